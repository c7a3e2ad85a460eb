#!/usr/bin/env bash
# scripts/cluster-demo.sh: the clickstream job on "many machines", on one.
#
# Starts etcd and MinIO on loopback (installed by .ci/etcd.sh and
# .ci/minio.sh), builds examples/cluster, starts three workers (the job at
# parallelism 3) and two coordinators (a leader and a standby, which expect
# the three workers: -parallelism 3), kills the
# leader with SIGKILL mid-stream, shows the standby taking over, waits for
# the workers to finish and verifies that their final state equals that of
# an uninterrupted run. Everything it starts is stopped at exit, and its
# temporary directory removed (KEEP=1 keeps it, with every process's log).
#
#	scripts/cluster-demo.sh
#
# Environment: EVENTS (default 60000), RATE (offsets per second per
# worker, default 5000), ETCD_PORT (default 23790), MINIO_PORT (default
# 29000), KEEP.
set -euo pipefail

cd "$(dirname "$0")/.."
events=${EVENTS:-60000}
rate=${RATE:-5000}
etcd_port=${ETCD_PORT:-23790}
minio_port=${MINIO_PORT:-29000}
job=clicks
seed=7

etcd_bin=$(bash .ci/etcd.sh)
minio_bin=$(bash .ci/minio.sh)
work=$(mktemp -d "${TMPDIR:-/tmp}/stategen-cluster-demo.XXXXXX")
pids=()

cleanup() {
	for pid in "${pids[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	if [ "${KEEP:-}" = 1 ]; then
		echo "kept $work"
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT

say() { printf '%s %s\n' "$(date +%T.%3N)" "$*"; }

# wait_for FILE PATTERN SECONDS: wait until FILE has a line matching PATTERN.
wait_for() {
	local deadline=$((SECONDS + $3))
	until grep -qE "$2" "$1" 2>/dev/null; do
		if [ $SECONDS -ge $deadline ]; then
			echo "timed out waiting for /$2/ in $1:" >&2
			tail -20 "$1" >&2 || true
			exit 1
		fi
		sleep 0.05
	done
}

say "building examples/cluster"
go build -o "$work/cluster" ./examples/cluster

say "etcd on 127.0.0.1:$etcd_port"
"$etcd_bin" --name demo --data-dir "$work/etcd" \
	--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
	--listen-peer-urls "http://127.0.0.1:$((etcd_port + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((etcd_port + 1))" \
	--initial-cluster "demo=http://127.0.0.1:$((etcd_port + 1))" --log-level error >"$work/etcd.log" 2>&1 &
pids+=($!)

say "MinIO on 127.0.0.1:$minio_port"
export AWS_ACCESS_KEY_ID=stategen-demo AWS_SECRET_ACCESS_KEY=stategen-demo-secret
MINIO_ROOT_USER=$AWS_ACCESS_KEY_ID MINIO_ROOT_PASSWORD=$AWS_SECRET_ACCESS_KEY MINIO_BROWSER=off MINIO_UPDATE=off MINIO_CI_CD=on \
	"$minio_bin" server "$work/minio" --address "127.0.0.1:$minio_port" \
	--console-address "127.0.0.1:$((minio_port + 1))" --quiet >"$work/minio.log" 2>&1 &
pids+=($!)
deadline=$((SECONDS + 30))
until curl -sf "http://127.0.0.1:$minio_port/minio/health/live" >/dev/null &&
	curl -sf "http://127.0.0.1:$etcd_port/health" >/dev/null; do
	if [ $SECONDS -ge $deadline ]; then
		echo "etcd or MinIO did not start:" >&2
		tail -5 "$work/etcd.log" "$work/minio.log" >&2
		exit 1
	fi
	sleep 0.1
done
curl -sf --aws-sigv4 "aws:amz:us-east-1:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
	-X PUT "http://127.0.0.1:$minio_port/demo" >/dev/null
ckpts="s3://demo/$job?endpoint=127.0.0.1:$minio_port"
common=(-etcd "127.0.0.1:$etcd_port" -job "$job" -checkpoints "$ckpts" -lease 2s)

say "coordinators a (first, so the leader) and b (standby)"
for c in a b; do
	"$work/cluster" coordinator "${common[@]}" -name "coord-$c" -interval 200ms -timeout 2s \
		-tolerable-failures 3 -parallelism 3 2>"$work/coord-$c.log" &
	pids+=($!)
	declare "pid_$c=$!"
	wait_for "$work/coord-$c.log" 'msg="started' 30
	[ $c = a ] && wait_for "$work/coord-a.log" 'msg=leading' 30
done
say "3 workers: $events events at $rate offsets/s each"
workers=()
for i in 0 1 2; do
	"$work/cluster" worker "${common[@]}" -index $i -parallelism 3 -events "$events" -seed $seed \
		-rate "$rate" -out "$work/dump-$i" 2>"$work/worker-$i.log" &
	pids+=($!)
	workers+=($!)
done
# No need to wait for them: the coordinators expect all three
# (-parallelism 3) and complete no checkpoint until all have joined.

wait_for "$work/coord-a.log" 'msg=counts .*completed=[3-9]' 60
say "leader coord-a: $(grep 'msg=counts' "$work/coord-a.log" | tail -1 | grep -oE 'triggered=.*')"
notready=$(grep -c 'has not joined yet' "$work/coord-a.log" || true)
say "checkpoints coord-a declined as not ready while a worker had yet to join (not failures): $notready"

say "kill -9 the leader coord-a"
disown "$pid_a" # no "Killed" job report
kill -KILL "$pid_a"
killed=$(date +%s%N)
wait_for "$work/coord-b.log" 'msg=leading' 30
led=$(date +%s%N)
wait_for "$work/coord-b.log" 'msg=counts .*completed=[1-9]' 30
done_ns=$(date +%s%N)
say "coord-b leads $(((led - killed) / 1000000)) ms after the kill; its first checkpoint completed $(((done_ns - killed) / 1000000)) ms after the kill"
aborted=$(grep -h 'msg="checkpoint aborted"' "$work"/worker-*.log | grep -i failover || true)
if [ -n "$aborted" ]; then
	say "the workers saw the checkpoint that was pending at the kill aborted:"
	echo "$aborted" | sed 's/^/    /'
else
	say "no checkpoint was pending at the kill"
fi

say "waiting for the workers to reach event $events"
for pid in "${workers[@]}"; do wait "$pid"; done
say "coord-b: $(grep 'msg=counts' "$work/coord-b.log" | tail -1 | grep -oE 'triggered=.*')"
grep -h 'msg=done' "$work"/worker-*.log | sed 's/^/    /'
"$work/cluster" verify -events "$events" -seed $seed "$work"/dump-0 "$work"/dump-1 "$work"/dump-2
