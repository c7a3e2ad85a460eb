#!/usr/bin/env bash
# .ci/minio.sh: install the MinIO server that the S3 tests start on loopback,
# and print its path.
#
# MinIO is built from the Go module proxy (no prebuilt download), at one
# pinned version, into ${STATEGEN_TOOLS:-$HOME/.cache/stategen/tools}/bin.
# A binary already there at that version is kept, so only the first run
# builds (several minutes on 2 cores; later runs take well under a second).
# The tests find the binary through STATEGEN_MINIO or in that directory:
#
#	export STATEGEN_MINIO="$(.ci/minio.sh)"
#	go test ./checkpoint/s3storage/...
#
# Progress goes to stderr; stdout is the path alone.
set -euo pipefail

module=github.com/minio/minio
version=v0.0.0-20260212201848-7aac2a2c5b7c

tools="${STATEGEN_TOOLS:-$HOME/.cache/stategen/tools}"
bin="$tools/bin/minio"

installed_version() {
	# `go version -m` prints the main module of a Go binary:
	#	mod	github.com/minio/minio	v0.0.0-...	h1:...
	go version -m "$1" 2>/dev/null | awk -v m="$module" '$1 == "mod" && $2 == m { print $3 }'
}

if [ -x "$bin" ] && [ "$(installed_version "$bin")" = "$version" ]; then
	echo "$bin"
	exit 0
fi

mkdir -p "$tools/bin"
echo "minio.sh: building $module@$version into $tools/bin (from the Go module proxy)" >&2
start=$(date +%s)
# Outside any module, so that this repository's go.mod and GOFLAGS
# (-mod=readonly in CI) play no part in MinIO's build.
(cd / && GOFLAGS= GOBIN="$tools/bin" CGO_ENABLED=0 go install "$module@$version") >&2
got="$(installed_version "$bin")"
if [ "$got" != "$version" ]; then
	echo "minio.sh: $bin reports version '${got:-none}', want $version" >&2
	exit 1
fi
echo "minio.sh: built in $(( $(date +%s) - start ))s" >&2
echo "$bin"
