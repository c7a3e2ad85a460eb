// Package benchmarks measures the state backends on shared workloads, with
// sub-benchmark names that benchstat can pivot on:
//
//	BenchmarkValueGet/backend=cow/keys=1M
//	BenchmarkValueGet/backend=gomap/keys=1M
//
// Every workload runs through the typed handles (runtime.NewValue and
// friends, int64 keys, a 24-byte struct value) for the backends, and through
// a plain Go map of the same Go types with the same access pattern (random
// keys from a pre-generated permutation) for the gomap baseline.
//
// The number of keys is 1M by default. STATEGEN_BENCH_KEYS sets another
// (e.g. 10K, 250000, 1M); under -short, and in a smoke run that asks for at
// most 10 iterations (-benchtime=1x, as CI does), it is 10K, so that
// go test -run='^$' -bench=. -benchtime=1x ./benchmarks takes seconds
// rather than minutes of fixture building. The benchmarks with fixed sizes
// (snapshot sync phase at 10K to 4M entries, GC cost at 4M) scale them down
// by the same factor.
//
// Besides ns/op, the per-operation benchmarks report cpu-ns/op, the
// process CPU time per operation, and BenchmarkPutDuringSnapshot reports
// op-cpu-ns/op, the CPU time of the operator's thread alone: on a shared
// machine these are steadier than wall time, and they separate the cost of
// copy-on-write from the competition of the snapshot-scanning goroutine for
// a core.
//
// Compare backends, or base and head, with benchstat:
//
//	go test -run='^$' -bench=. -count=6 ./benchmarks > new.txt
//	benchstat -col /backend new.txt
package benchmarks
