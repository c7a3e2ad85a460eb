#!/usr/bin/env bash
# Runs the benchmarks behind benchmarks/REPORT.md into benchmarks/results/
# and regenerates the report's tables and charts from them (benchreport fill).
#
#   bash benchmarks/report.sh            every run (about an hour on 2 cores)
#   bash benchmarks/report.sh checkpoint only the named runs: ops, flat, memory,
#                                        rescale-codec, checkpoint, nexmark
#
# STATEGEN_BENCH_KEYS (default 1M here) and the other knobs of doc.go apply.
# The machine should be otherwise idle: the report compares medians of
# -count 6 runs and of 10 rounds, and load from other processes widens
# every interval.
set -euo pipefail
cd "$(dirname "$0")/.."
export STATEGEN_BENCH_KEYS="${STATEGEN_BENCH_KEYS:-1M}"
runs=("$@")
[ ${#runs[@]} -gt 0 ] || runs=(ops flat memory rescale-codec checkpoint nexmark)

bench() { # bench OUTFILE REGEXP [BENCHTIME [COUNT]]
	go test -run='^$' -bench="$2" -benchmem -count "${4:-6}" -benchtime="${3:-100ms}" -timeout 120m ./benchmarks |
		tee "benchmarks/results/$1.txt"
}

# rounds OUTFILE REGEXP BENCHTIME ROUNDS PACKAGE runs every benchmark of
# REGEXP once per round, ROUNDS rounds, from one test binary. The ratios
# of an acceptance bar come from these: go test -count N runs a benchmark
# N times in a row before the next, so a spell of this machine's speed
# (they last minutes, and move a median 10-30%) lands on one side of a
# ratio; in rounds it lands on every contender alike.
rounds() {
	local bin
	bin="$(mktemp -d)/bench.test"
	go test -c -o "$bin" "$5"
	: >"benchmarks/results/$1.txt"
	for ((i = 1; i <= $4; i++)); do
		(cd "$5" && "$bin" -test.run='^$' -test.bench="$2" -test.benchmem -test.count 1 -test.benchtime="$3" -test.timeout 120m) |
			tee -a "benchmarks/results/$1.txt"
	done
	rm -r "$(dirname "$bin")"
}

for r in "${runs[@]}"; do
	case "$r" in
	ops) bench backends '^Benchmark(Value|List|Map|SortedMap|Snapshot|PutDuringSnapshot)' ;;
	# The flat value's ratios to a Go map are an acceptance bar: 10 rounds.
	flat) rounds flat '^BenchmarkFlat(Get|Put)$' 100ms 10 ./benchmarks ;;
	# Memory in a process of its own: a GC cycle costs what the whole heap holds.
	memory) bench memory '^Benchmark(HeapPerEntry|GCCycle)$' ;;
	# Codec Unmarshal against msgp, mus-go and vtprotobuf is an acceptance bar: 10 rounds.
	rescale-codec) rounds rescale-codec '^Benchmark(Rescale|Codec)' 100ms 10 ./benchmarks ;;
	# A restore takes ~0.1-0.7 s: 1s gives each sample a few of them.
	checkpoint) bench checkpoint '^BenchmarkCheckpoint(Write|Restore|RestoreQuarter)$' 1s ;;
	# Nexmark: a pass of 200K events per iteration, 10 rounds (the issue's bar).
	nexmark) rounds nexmark '^BenchmarkNexmark$' 1s 10 ./benchmarks/nexmark ;;
	*)
		echo "report.sh: unknown run $r (want ops, flat, memory, rescale-codec, checkpoint or nexmark)" >&2
		exit 2
		;;
	esac
done
go run ./benchmarks/cmd/benchreport fill benchmarks/REPORT.md
echo "benchmarks/REPORT.md, chart.svg and nexmark.svg regenerated; update the prose's figures by hand"
