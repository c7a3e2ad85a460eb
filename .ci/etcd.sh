#!/usr/bin/env bash
# .ci/etcd.sh: make sure an etcd server binary is installed for the tests
# that coordinate through etcd (internal/testenv/etcdtest starts it), and
# print its path. Idempotent and quiet: it installs Debian's etcd-server
# package only if no etcd binary is found, and never starts the service.
# $STATEGEN_ETCD, if set, names the binary to use instead.
set -euo pipefail

if [ -n "${STATEGEN_ETCD:-}" ]; then
	if [ ! -x "$STATEGEN_ETCD" ]; then
		echo "etcd.sh: STATEGEN_ETCD=$STATEGEN_ETCD is not an executable file" >&2
		exit 1
	fi
	echo "$STATEGEN_ETCD"
	exit 0
fi

bin=$(command -v etcd || true)
if [ -z "$bin" ] && [ -x /usr/bin/etcd ]; then
	bin=/usr/bin/etcd
fi
if [ -z "$bin" ]; then
	if ! command -v apt-get >/dev/null; then
		echo "etcd.sh: no etcd binary and no apt-get to install one; install etcd and set STATEGEN_ETCD" >&2
		exit 1
	fi
	sudo=""
	if [ "$(id -u)" != 0 ]; then
		sudo=sudo
	fi
	export DEBIAN_FRONTEND=noninteractive
	log=$(mktemp)
	trap 'rm -f "$log"' EXIT
	# policy-rc.d exit 101 keeps the package's service from being started.
	policy=/usr/sbin/policy-rc.d
	created_policy=""
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
		$sudo chmod +x "$policy"
		created_policy=1
	fi
	if ! { $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends etcd-server; } >"$log" 2>&1; then
		[ -n "$created_policy" ] && $sudo rm -f "$policy"
		cat "$log" >&2
		echo "etcd.sh: installing etcd-server failed" >&2
		exit 1
	fi
	[ -n "$created_policy" ] && $sudo rm -f "$policy"
	bin=/usr/bin/etcd
	if [ ! -x "$bin" ]; then
		echo "etcd.sh: etcd-server is installed but $bin is missing" >&2
		exit 1
	fi
fi
echo "$bin"
