package btree

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"syscall"
	"testing"

	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

// The store's tree layout (one tree per state and key group, or one per
// state) is chosen by BenchmarkLayout; both layouts pass the conformance
// suite.

var layouts = []struct {
	name string
	l    layout
}{{"per-group", treePerGroup}, {"per-state", treePerState}}

// TestConformanceLayouts runs the conformance suite against both layouts,
// on trees of degree 3 (nodes of up to 5 items, split and merged all the
// time), at half the suite's usual number of operations.
func TestConformanceLayouts(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			storetest.Run(t, func(tb testing.TB, cfg runtime.StoreConfig) runtime.Store {
				s, err := newStore(Options{StoreConfig: cfg, Degree: 3}, l.l)
				if err != nil {
					tb.Fatal(err)
				}
				return s
			}, storetest.Sorted(), storetest.WithScale(0.5))
		})
	}
}

// layoutKeys is the number of keys of BenchmarkLayout: 1M, 10K under
// -short, or STATEGEN_BENCH_KEYS (a plain number).
func layoutKeys(b *testing.B) int {
	if s := os.Getenv("STATEGEN_BENCH_KEYS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 64 {
			return n
		}
	}
	if testing.Short() {
		return 10_000
	}
	return 1 << 20
}

// cpuTime returns the user and system CPU time of the process so far: on a
// shared machine, cpu-ns/op is steadier than the wall time.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func withCPU(fn func(b *testing.B)) func(b *testing.B) {
	return func(b *testing.B) {
		c0 := cpuTime()
		fn(b)
		b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkLayout compares the two layouts on the byte-level Store
// (no typed handles): Get and Put of random existing keys of a value
// state of int64-like keys and 24-byte values, Put of new keys into an
// empty state, and the synchronous phase of a snapshot.
func BenchmarkLayout(b *testing.B) {
	n := layoutKeys(b)
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([]runtime.Key, n)
	for i := range keys {
		keys[i] = runtime.MakeKey(binary.BigEndian.AppendUint64(nil, uint64(i)^1<<63), nil, runtime.DefaultMaxParallelism)
	}
	order := r.Perm(n) // insertion order
	acc := r.Perm(n)   // access order
	val := make([]byte, 24)
	spec := runtime.StateSpec{Name: "v", Kind: runtime.KindValue}
	build := func(b *testing.B, l layout, fill bool) (*Store, runtime.ValueState) {
		s, err := newStore(Options{}, l)
		if err != nil {
			b.Fatal(err)
		}
		st, err := s.Register(spec)
		if err != nil {
			b.Fatal(err)
		}
		vs := st.(runtime.ValueState)
		if fill {
			for _, i := range order {
				if err := vs.Put(keys[i], val); err != nil {
					b.Fatal(err)
				}
			}
		}
		return s, vs
	}
	for _, l := range layouts {
		var s *Store
		var vs runtime.ValueState
		filled := func(b *testing.B) runtime.ValueState {
			if s == nil {
				s, vs = build(b, l.l, true)
			}
			return vs
		}
		b.Run(fmt.Sprintf("op=get/layout=%s/keys=%d", l.name, n), withCPU(func(b *testing.B) {
			vs := filled(b)
			b.ResetTimer()
			for i := range b.N {
				if _, ok, err := vs.Get(keys[acc[i%n]]); !ok || err != nil {
					b.Fatal("missing", err)
				}
			}
		}))
		b.Run(fmt.Sprintf("op=put/layout=%s/keys=%d", l.name, n), withCPU(func(b *testing.B) {
			vs := filled(b)
			b.ResetTimer()
			for i := range b.N {
				val[0] = byte(i)
				if err := vs.Put(keys[acc[i%n]], val); err != nil {
					b.Fatal(err)
				}
			}
		}))
		b.Run(fmt.Sprintf("op=insert/layout=%s/keys=%d", l.name, n), withCPU(func(b *testing.B) {
			var vs runtime.ValueState
			for i := range b.N {
				if i%n == 0 {
					b.StopTimer()
					_, vs = build(b, l.l, false)
					b.StartTimer()
				}
				if err := vs.Put(keys[order[i%n]], val); err != nil {
					b.Fatal(err)
				}
			}
		}))
		b.Run(fmt.Sprintf("op=snapshot/layout=%s/keys=%d", l.name, n), withCPU(func(b *testing.B) {
			filled(b)
			b.ResetTimer()
			for range b.N {
				snap, err := s.Snapshot()
				if err != nil {
					b.Fatal(err)
				}
				if err := snap.Release(); err != nil {
					b.Fatal(err)
				}
			}
		}))
		b.Run(fmt.Sprintf("op=put-after-snapshot/layout=%s/keys=%d", l.name, n), withCPU(func(b *testing.B) {
			vs := filled(b)
			b.ResetTimer()
			for i := range b.N {
				if i%1024 == 0 {
					snap, err := s.Snapshot()
					if err != nil {
						b.Fatal(err)
					}
					if err := snap.Release(); err != nil {
						b.Fatal(err)
					}
				}
				if err := vs.Put(keys[acc[i%n]], val); err != nil {
					b.Fatal(err)
				}
			}
		}))
		s = nil
	}
}
