package benchmarks

// Incremental checkpoint benchmarks (checkpoint.Tracker):
//
//	BenchmarkCheckpointIncremental/backend=cow/keys=1M/changed=1%  the checkpoint after 1% of the keys were overwritten
//	BenchmarkRestoreChain/backend=cow/keys=1M/chain=8               restore of a chain of DefaultMaxChainLength files, 1% changed between each
//	BenchmarkRestoreChain/backend=cow/keys=1M/chain=1               restore of a full checkpoint of the same state
//	BenchmarkTrackedPut/backend=cow/keys=1M/tracked=on              Put of random keys through a Tracker, and without one,
//	                                                                a checkpoint every 2^18 Puts (outside the timer)
//
// CheckpointIncremental measures, per iteration, the snapshot and write of
// the checkpoint that follows a completed full one after changed% of the
// keys, drawn uniformly at random, were overwritten; it reports
// written-B/op (the bytes of the file written), full-B/op (a full
// checkpoint's) and written-fraction, their ratio. The bars: ≤ 1%
// at changed=0%, ≤ 5% at 1%, ≤ 1.2 at 100%. RestoreChain's chain=8 row
// over its chain=1 row is the cost of restoring through a chain (bar:
// ≤ 1.5). TrackedPut's tracked=on row over its tracked=off row is the
// cost of recording changes (bar: ≤ 1.1).
//
//	go test ./benchmarks -run '^$' -bench 'Incremental|RestoreChain|TrackedPut' -benchmem -count 6 > inc.txt
//	go tool benchstat -col /tracked inc.txt

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
)

// trackedStore is a store of be filled with the benchmark's n entries,
// behind a Tracker, and its value state through the tracker.
func trackedStore(top *testing.B, be ckptTarget, n int, opts *checkpoint.TrackOptions) (*checkpoint.Tracker, runtime.ValueState) {
	tr, err := checkpoint.Track(ckptFilledStore(top, be, n), opts)
	if err != nil {
		top.Fatal(err)
	}
	st, err := tr.Register(ckptSpec)
	if err != nil {
		top.Fatal(err)
	}
	return tr, st.(runtime.ValueState)
}

// ckptWrite snapshots tr and writes the snapshot (in full if full) as
// checkpoint ckpt of s, commits it and reports it completed.
func ckptWrite(b *testing.B, tr *checkpoint.Tracker, s checkpoint.Storage, ckpt string, full bool) checkpoint.InstanceSnapshot {
	ctx := context.Background()
	snap, err := tr.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	if full {
		snap.(*checkpoint.TrackedSnapshot).Full()
	}
	is, err := checkpoint.WriteInstance(ctx, s, ckpt, "op-0.sgc", snap, nil)
	if rerr := snap.Release(); err == nil {
		err = rerr
	}
	if err != nil {
		b.Fatal(err)
	}
	op, err := checkpoint.NewOperator("op", is)
	if err != nil {
		b.Fatal(err)
	}
	if err := checkpoint.Commit(ctx, s, ckpt, &checkpoint.Metadata{Operators: []checkpoint.Operator{op}}); err != nil {
		b.Fatal(err)
	}
	tr.Completed(ckpt)
	return is
}

// overwrite sets m keys of the n, drawn uniformly at random, to new values.
func overwrite(b *testing.B, vs runtime.ValueState, rng *rand.Rand, n, m, gen int) {
	var val []byte
	for range m {
		i := rng.IntN(n)
		val = ckptValue(val[:0], i+gen)
		if err := vs.Put(runtime.MakeKey(ckptKey(i), nil, ckptMaxP), val); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckpointIncremental(b *testing.B) {
	n := ckptKeys(b)
	for _, be := range ckptTargets() {
		b.Run("backend="+be.name, func(b *testing.B) {
			b.Run("keys="+sizeName(n), func(b *testing.B) {
				top := b
				for _, pct := range []float64{0, 0.1, 1, 10, 100} {
					b.Run(fmt.Sprintf("changed=%g%%", pct), func(b *testing.B) {
						tr, vs := trackedStore(top, be, n, nil)
						s, err := checkpoint.NewDir(b.TempDir())
						if err != nil {
							b.Fatal(err)
						}
						rng := rand.New(rand.NewPCG(1, uint64(pct*10)))
						m := int(float64(n) * pct / 100)
						var written, full int64
						ctx := context.Background()
						tm := newCkptTimer(b)
						for i := 0; i < b.N; i++ {
							tm.stop()
							base := checkpoint.CheckpointName(uint64(2 * i))
							full = ckptWrite(b, tr, s, base, true).File.Size
							overwrite(b, vs, rng, n, m, i+1)
							ckpt := checkpoint.CheckpointName(uint64(2*i + 1))
							tm.start()
							is := ckptWrite(b, tr, s, ckpt, false)
							tm.stop()
							written += is.File.Size
							if is.File.Delta != (len(is.Base) == 1) {
								b.Fatalf("wrote %+v over %v", is.File, is.Base)
							}
							for _, c := range []string{ckpt, base} {
								if err := checkpoint.Delete(ctx, s, c); err != nil {
									b.Fatal(err)
								}
							}
							tm.start()
						}
						tm.report()
						b.ReportMetric(float64(written)/float64(b.N), "written-B/op")
						b.ReportMetric(float64(full), "full-B/op")
						b.ReportMetric(float64(written)/float64(b.N)/float64(full), "written-fraction")
					})
				}
			})
		})
	}
}

func BenchmarkRestoreChain(b *testing.B) {
	n := ckptKeys(b)
	for _, be := range ckptTargets() {
		b.Run("backend="+be.name, func(b *testing.B) {
			b.Run("keys="+sizeName(n), func(b *testing.B) {
				// One chain of DefaultMaxChainLength files, 1% of the
				// keys overwritten between each, and a full checkpoint
				// of the state at the chain's end.
				tr, vs := trackedStore(b, be, n, nil)
				s, err := checkpoint.NewDir(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(2, 2))
				var last checkpoint.InstanceSnapshot
				for i := range checkpoint.DefaultMaxChainLength {
					if i > 0 {
						overwrite(b, vs, rng, n, n/100, i)
					}
					last = ckptWrite(b, tr, s, checkpoint.CheckpointName(uint64(i)), false)
				}
				if len(last.Base) != checkpoint.DefaultMaxChainLength-1 {
					b.Fatalf("the chain has %d files, want %d", len(last.Base)+1, checkpoint.DefaultMaxChainLength)
				}
				chain := checkpoint.CheckpointName(uint64(checkpoint.DefaultMaxChainLength - 1))
				full := checkpoint.CheckpointName(100)
				ckptWrite(b, tr, s, full, true)
				for _, c := range []struct {
					name string
					ckpt string
				}{{"chain=1", full}, {fmt.Sprintf("chain=%d", checkpoint.DefaultMaxChainLength), chain}} {
					b.Run(c.name, func(b *testing.B) {
						ctx := context.Background()
						tm := newCkptTimer(b)
						var read int64
						for i := 0; i < b.N; i++ {
							tm.stop()
							store, done := be.new(b, runtime.StoreConfig{MaxParallelism: ckptMaxP})
							tm.start()
							st, err := checkpoint.Restore(ctx, s, c.ckpt, "op", 0, 1, store, nil)
							if err != nil {
								b.Fatal(err)
							}
							tm.stop()
							if st.Entries != int64(n) {
								b.Fatalf("restored %d entries, want %d", st.Entries, n)
							}
							read = st.BytesRead
							done()
							tm.start()
						}
						tm.report()
						b.ReportMetric(float64(read), "read-bytes/op")
					})
				}
			})
		})
	}
}

// trackedPutInterval is BenchmarkTrackedPut's checkpoint interval, in
// Puts: about 0.1 s of Puts on cow, 0.5 s on pebble.
const trackedPutInterval = 1 << 18

func BenchmarkTrackedPut(b *testing.B) {
	n := ckptKeys(b)
	keys := make([]runtime.Key, 1<<16)
	rng := rand.New(rand.NewPCG(3, 3))
	for i := range keys {
		keys[i] = runtime.MakeKey(ckptKey(rng.IntN(n)), nil, ckptMaxP)
	}
	for _, be := range ckptTargets() {
		b.Run("backend="+be.name, func(b *testing.B) {
			b.Run("keys="+sizeName(n), func(b *testing.B) {
				for _, tracked := range []bool{false, true} {
					b.Run(fmt.Sprintf("tracked=%s", map[bool]string{false: "off", true: "on"}[tracked]), func(b *testing.B) {
						// A job's life: Puts, and a checkpoint every
						// trackedPutInterval of them, outside the timer —
						// with the tracker a file of changes written,
						// completed and the one before it deleted (its
						// changes' memory reused), without one the
						// backend's snapshot taken and released (what
						// copy-on-write costs the Puts after it is in both
						// rows). One interval runs before the timer.
						var (
							vs    runtime.ValueState
							tr    *checkpoint.Tracker
							store runtime.Store
							s     = checkpoint.NewMem()
							id    uint64
						)
						if tracked {
							tr, vs = trackedStore(b, be, n, nil)
							ckptWrite(b, tr, s, checkpoint.CheckpointName(id), true)
						} else {
							store = ckptFilledStore(b, be, n)
							st, err := store.Register(ckptSpec)
							if err != nil {
								b.Fatal(err)
							}
							vs = st.(runtime.ValueState)
						}
						checkpointNow := func() {
							if !tracked {
								snap, err := store.Snapshot()
								if err == nil {
									err = snap.Release()
								}
								if err != nil {
									b.Fatal(err)
								}
								return
							}
							id++
							ckptWrite(b, tr, s, checkpoint.CheckpointName(id), false)
							if id > 1 {
								if err := checkpoint.Delete(context.Background(), s, checkpoint.CheckpointName(id-1)); err != nil {
									b.Fatal(err)
								}
							}
						}
						var val []byte
						put := func(i int) {
							val = ckptValue(val[:0], i)
							if err := vs.Put(keys[i%len(keys)], val); err != nil {
								b.Fatal(err)
							}
						}
						for i := range trackedPutInterval {
							put(i)
						}
						checkpointNow()
						b.ResetTimer()
						for i := 0; i < b.N; i++ {
							put(i)
							if (i+1)%trackedPutInterval == 0 {
								b.StopTimer()
								checkpointNow()
								b.StartTimer()
							}
						}
						b.StopTimer()
					})
				}
			})
		})
	}
}
