// Package benchmarks measures stategen's state backends on shared
// workloads, beside plain baselines, with sub-benchmark names that
// benchstat and benchreport can pivot on:
//
//	BenchmarkValueGet/backend=cow/keys=1M
//	BenchmarkValueGet/backend=btree/keys=1M
//	BenchmarkValueGet/backend=pebble/keys=1M
//	BenchmarkValueGet/backend=gomap/keys=1M
//	BenchmarkValueGet/backend=btree-raw/keys=1M
//	BenchmarkValueGet/backend=pebble-raw/keys=1M
//
// # Backends
//
// Every benchmark of an operation is one function that runs on every
// backend of one table: the stores of stategen (stores in backends_test.go:
// cow, btree, pebble), through the typed handles (runtime.NewValue and
// friends, int64 keys, a struct value), and the baselines, which do the
// same work on the same data without stategen:
//
//   - gomap: Go maps of the Go values (a map of slices for lists, a map of
//     maps for maps). The floor of in-memory point operations. Its snapshot
//     is a copy of everything, which is what checkpointing a Go map takes.
//   - btree-raw: tidwall/btree's BTreeG used the plain way, an item per
//     entry pointing at a heap allocation of its key and value (the layout
//     backends/btree had before its arenas), with backends/btree's key
//     layout and encoded bytes; its snapshot is a Copy of every tree.
//   - pebble-raw: Pebble with backends/pebble's key layout, list encoding and
//     options, on disk; its snapshot is a Pebble snapshot.
//
// A backend against its raw baseline (btree against btree-raw, pebble
// against pebble-raw) is the cost of the backend itself: both pay the
// encoding and decoding, only the backend pays the typed handles, the Store
// contract's checks and the snapshot bookkeeping (btree against btree-raw
// also compares their layouts: see rawbtree_test.go). Every backend is driven
// through one interface (target), so all pay the same dynamic call per
// operation. Adding a backend is one line in stores (or, for a baseline,
// in baselines): every benchmark then runs on it.
//
// # Benchmarks
//
// The operations of Flink's state benchmarks (flink-benchmarks), one
// benchmark each, in ops_test.go: ValueGet, ValuePut (valueUpdate),
// ValueAdd, ListGet, ListAdd, ListAppend, ListAddAll, ListUpdate, MapGet,
// MapPut (mapUpdate), MapAdd, MapContains, MapRemove, MapIterate
// (mapIterator), MapKeys, MapValues; and SortedMapRange, 16 consecutive
// entries of a 64-entry sorted map. Snapshots, in snapshot_test.go:
// SnapshotSync (the synchronous phase at keys/100 and keys entries),
// SnapshotAsync (a full scan of a snapshot: entries/s and MB/s),
// PutDuringSnapshot (writes while snapshots are scanned, and without),
// MapFirstPutAfterSnapshot. Memory, in memory_test.go: HeapPerEntry,
// GCCycle, LargeState (10M entries with STATEGEN_BENCH_LARGE=1). Checkpoint
// write and restore (checkpoint_test.go), rescale from 2 to 3 instances
// (rescale_test.go) and the codecs of a small value and of an event against
// tinylib/msgp, mus-go, vtprotobuf, encoding/json and encoding/gob
// (codec_test.go, value=<small|event>/codec=<name>) complete the suite.
// FlatGet and FlatPut (flat_test.go) read and overwrite a 24-byte value
// without pointers (benchmarks/internal/flat, with its generated codec)
// under int64 and string keys, on cow against a plain Go map and one behind
// a sync.RWMutex (gomap, gomap-rwmutex): the Val of the other benchmarks
// holds a []byte the map's collector must trace, which flatters cow
// against the map; flat values are the map's best case. A whole
// streaming workload is in the sub-package benchmarks/nexmark: Nexmark's
// stateful queries q3, q5, q7, q8 and q11 on every backend beside the same
// queries in plain Go (BenchmarkNexmark: events/s, allocs/event, with and
// without a checkpoint every second).
//
// # Workload
//
// Every state holds keys entries: keys values, keys/100 lists of 100
// elements, keys/10 maps of 10 entries (Flink's shapes), keys/64 sorted
// maps of 64 entries. Reads and overwrites access keys in a fixed
// pseudo-random order; operations that insert run on the pre-loaded state
// and rebuild it, with the timer stopped, once it has doubled (MapRemove
// once it is empty), so that every operation meets a state of the same
// size however large b.N grows. Fixtures are built once per backend and
// shared by the -count runs. The knobs are environment variables:
//
//	STATEGEN_BENCH_KEYS        entries per state: 10K, 100K, 1M (1<<20), 250000...
//	                           Default 1M; 10K under -short and in smoke runs
//	                           (-benchtime=Nx with N <= 10, as CI's -benchtime=1x).
//	STATEGEN_BENCH_VALUE_SIZE  bytes of an encoded value, 24 (the default: three
//	                           int64s) to 1M; beyond 24, a padding of random bytes.
//	STATEGEN_BENCH_DIST        uniform (default): every key as often; zipf: keys
//	                           drawn from a Zipf distribution (s=1.1: a few hot
//	                           keys, a long tail), the hot keys spread over the
//	                           key space.
//	STATEGEN_BENCH_LARGE       1: BenchmarkLargeState holds 10M entries (else 20K).
//
// The checkpoint and rescale benchmarks follow STATEGEN_BENCH_KEYS too.
//
// # Metrics
//
// Besides ns/op, B/op and allocs/op, every operation reports cpu-ns/op, the
// process's CPU time per operation (rebuilds excluded): on a shared machine
// it is steadier than wall time. PutDuringSnapshot reports op-cpu-ns/op,
// the CPU time of the operator's thread alone, which separates the cost of
// the writes from the scanning goroutine's competition for a core.
//
// # Comparing
//
// Compare backends, or base and head, with benchstat or benchreport
// (benchmarks/cmd/benchreport, which also draws the chart and runs CI's
// regression gate):
//
//	go test -run='^$' -bench=. -count=6 ./benchmarks > new.txt
//	go tool benchstat -col /backend new.txt
//	go run ./benchmarks/cmd/benchreport compare-backends new.txt
//
// REPORT.md holds the comparison of a full run, with the exact command.
package benchmarks
