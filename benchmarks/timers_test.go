package benchmarks

// Timers (runtime.Timers) on every backend, beside the plain-Go limit: a
// container/heap of timers with a map that makes registering a timer
// twice one timer, which is what Flink's heap timer service keeps.
//
//	BenchmarkTimerRegister/backend=cow/timers=1M
//	BenchmarkTimerRegisterAgain/backend=cow/timers=1M
//	BenchmarkTimerFire/backend=heap/timers=1M
//
// Each state holds timers=STATEGEN_BENCH_KEYS timers of int64 keys and
// namespaces, at distinct times in random order. Register adds timers at
// random times among them (the state grows by b.N); Fire advances the
// time so that each Advance fires 100 timers (ns/op is per timer fired),
// rebuilding the timers, with the clock stopped, once they are all fired.

import (
	"container/heap"
	"math/rand/v2"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/stategen/stategen/runtime"
)

// timerTarget is the timers of one backend under benchmark.
type timerTarget interface {
	register(time, key, ns int64) error
	// advance fires every timer due at to and returns how many fired.
	advance(to int64) (int, error)
	close() error
}

// storeTimers are a stategen store's timers, through the typed handle.
type storeTimers struct {
	s  runtime.Store
	ts runtime.Timers[int64, int64]
	n  int
}

func (t *storeTimers) register(time, key, ns int64) error { return t.ts.Register(time, key, ns) }

func (t *storeTimers) advance(to int64) (int, error) {
	t.n = 0
	err := t.ts.Advance(to, t.count)
	return t.n, err
}

func (t *storeTimers) count(runtime.Timer[int64, int64]) error { t.n++; return nil }

func (t *storeTimers) close() error { return t.s.Close() }

// heapTimer is a timer of the baseline.
type heapTimer struct{ time, key, ns int64 }

// heapTimers is the baseline: a binary heap ordered by (time, key,
// namespace) and a set of the timers in it.
type heapTimers struct {
	h   timerHeap
	set map[heapTimer]struct{}
}

type timerHeap []heapTimer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if a.time != b.time {
		return a.time < b.time
	}
	if a.key != b.key {
		return a.key < b.key
	}
	return a.ns < b.ns
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)   { *h = append(*h, x.(heapTimer)) }
func (h *timerHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (t *heapTimers) register(time, key, ns int64) error {
	tm := heapTimer{time, key, ns}
	if _, ok := t.set[tm]; !ok {
		t.set[tm] = struct{}{}
		heap.Push(&t.h, tm)
	}
	return nil
}

func (t *heapTimers) advance(to int64) (int, error) {
	n := 0
	for len(t.h) > 0 && t.h[0].time <= to {
		tm := heap.Pop(&t.h).(heapTimer)
		delete(t.set, tm)
		n++
	}
	return n, nil
}

func (t *heapTimers) close() error { return nil }

// timerBackend is a backend=<name> value of the timer benchmarks.
type timerBackend struct {
	name string
	open func(dir string) (timerTarget, error)
}

// timerBackends are the stores, through runtime.Timers, and the heap.
func timerBackends() []timerBackend {
	var out []timerBackend
	for _, sb := range stores {
		out = append(out, struct {
			name string
			open func(dir string) (timerTarget, error)
		}{sb.name, func(dir string) (timerTarget, error) {
			s, err := sb.open(dir, runtime.StoreConfig{})
			if err != nil {
				return nil, err
			}
			ts, err := runtime.NewTimers(s, runtime.TimersDescriptor[int64, int64]{
				Name: "timers", Key: runtime.Int64Codec{}, Namespace: runtime.Int64Codec{},
			})
			if err != nil {
				return nil, err
			}
			return &storeTimers{s: s, ts: ts}, nil
		}})
	}
	return append(out, timerBackend{"heap", func(string) (timerTarget, error) {
		return &heapTimers{set: map[heapTimer]struct{}{}}, nil
	}})
}

// forEachTimerBackend runs body on each backend's timers, filled with n
// timers at times 0..n-1 in random order (timer i has key i).
func forEachTimerBackend(b *testing.B, body func(b *testing.B, fill func() timerTarget, n int)) {
	n := load(b).keys
	for _, be := range timerBackends() {
		b.Run("backend="+be.name+"/timers="+sizeName(n), func(b *testing.B) {
			runs := 0
			var cur timerTarget
			fill := func() timerTarget {
				if cur != nil {
					check(b, cur.close())
				}
				runs++
				dir, err := os.MkdirTemp(b.TempDir(), "timers")
				check(b, err)
				t, err := be.open(filepath.Join(dir, "store"))
				check(b, err)
				rng := rand.New(rand.NewPCG(uint64(n), 7))
				for _, i := range rng.Perm(n) {
					check(b, t.register(int64(i), int64(i), 0))
				}
				cur = t
				return t
			}
			b.ReportAllocs()
			body(b, fill, n)
			if cur != nil {
				check(b, cur.close())
			}
		})
	}
}

// BenchmarkTimerRegister registers a timer at a random time among the
// state's, for a new key.
func BenchmarkTimerRegister(b *testing.B) {
	forEachTimerBackend(b, func(b *testing.B, fill func() timerTarget, n int) {
		t := fill()
		rng := rand.New(rand.NewPCG(1, 2))
		key := int64(n)
		for b.Loop() {
			check(b, t.register(rng.Int64N(int64(n)), key, 1))
			key++
		}
	})
}

// BenchmarkTimerRegisterAgain registers again one of the state's 100
// earliest timers, after an Advance that fired none, as a window operator
// registers its window's timer with every element of the window.
func BenchmarkTimerRegisterAgain(b *testing.B) {
	forEachTimerBackend(b, func(b *testing.B, fill func() timerTarget, n int) {
		t := fill()
		if fired, err := t.advance(-1); err != nil || fired != 0 {
			b.Fatalf("Advance(-1) fired %d timers: %v", fired, err)
		}
		i := int64(0)
		for b.Loop() {
			if err := t.register(i, i, 0); err != nil {
				b.Fatal(err)
			}
			if i++; i == min(100, int64(n)) {
				i = 0
			}
		}
	})
}

// BenchmarkTimerFire fires timers in order, 100 per Advance.
func BenchmarkTimerFire(b *testing.B) {
	const batch = 100
	forEachTimerBackend(b, func(b *testing.B, fill func() timerTarget, n int) {
		b.StopTimer()
		t := fill()
		b.StartTimer()
		now := int64(-1)
		for i := 0; i < b.N; i += batch {
			if now+batch >= int64(n) {
				b.StopTimer()
				t, now = fill(), -1
				b.StartTimer()
			}
			now += batch
			fired, err := t.advance(now)
			check(b, err)
			if fired != batch {
				b.Fatalf("Advance(%d) fired %d timers, want %d", now, fired, batch)
			}
		}
	})
}

// BenchmarkTimerMemory registers STATEGEN_BENCH_TIMERS timers (default
// keys=STATEGEN_BENCH_KEYS; a comma-separated list, like 1M,10M, runs each)
// and reports the heap they keep live, after a GC, beside what was live
// before, in MB (live-MB) and per timer (live-B/timer): on pebble the timers live on disk, and the heap
// stays bounded — Pebble's memtables and caches, and a few prefetched
// timers per key group — whatever their number, while the heap baseline
// and the in-memory backends grow with it. Run it with -benchtime 1x: an
// iteration registers every timer.
//
//	BenchmarkTimerMemory/backend=pebble/timers=10M
func BenchmarkTimerMemory(b *testing.B) {
	sizes := []int{load(b).keys}
	if s := os.Getenv("STATEGEN_BENCH_TIMERS"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := parseSize(f)
			if err != nil {
				b.Fatalf("STATEGEN_BENCH_TIMERS=%q: %v", s, err)
			}
			sizes = append(sizes, n)
		}
	}
	for _, be := range timerBackends() {
		for _, n := range sizes {
			b.Run("backend="+be.name+"/timers="+sizeName(n), func(b *testing.B) {
				for range b.N {
					goruntime.GC()
					var before goruntime.MemStats
					goruntime.ReadMemStats(&before)
					dir, err := os.MkdirTemp(b.TempDir(), "timers")
					check(b, err)
					t, err := be.open(filepath.Join(dir, "store"))
					check(b, err)
					rng := rand.New(rand.NewPCG(uint64(n), 9))
					for i := range n {
						check(b, t.register(rng.Int64N(int64(n)), int64(i), 0))
					}
					goruntime.GC()
					var ms goruntime.MemStats
					goruntime.ReadMemStats(&ms)
					live := float64(ms.HeapAlloc) - float64(before.HeapAlloc)
					b.ReportMetric(live/(1<<20), "live-MB")
					b.ReportMetric(live/float64(n), "live-B/timer")
					// The timers are reachable: none is due before time 0.
					fired, err := t.advance(-1)
					check(b, err)
					if fired != 0 {
						b.Fatalf("%d timers before time 0", fired)
					}
					check(b, t.close())
				}
			})
		}
	}
}
