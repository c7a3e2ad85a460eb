package runtime_test

import (
	goruntime "runtime"
	"testing"

	"github.com/stategen/stategen/runtime"
)

// TestSortedMapEdgeAllocs: First and Last of a sorted map of pointer-free
// entries allocate nothing on the in-memory backends — they are the read
// of a timer queue's or a window's head, once per record.
func TestSortedMapEdgeAllocs(t *testing.T) {
	for _, name := range []string{"cow", "btree"} {
		t.Run(name, func(t *testing.T) {
			s := backendsFor(t)[name](runtime.StoreConfig{})
			sm := must[runtime.SortedMap[int64, int64, int64]](t)(runtime.NewSortedMap(s, runtime.MapDescriptor[int64, int64, int64]{
				Name: "sm", Key: runtime.Int64Codec{}, UserKey: runtime.Int64Codec{}, Value: runtime.Int64Codec{},
			}))
			for uk := int64(-5); uk <= 40; uk++ {
				check(t, sm.Put(1, uk, 10*uk))
			}
			allocs := testing.AllocsPerRun(100, func() {
				if e, ok, err := sm.First(1); err != nil || !ok || e.Key != -5 || e.Value != -50 {
					t.Fatal(e, ok, err)
				}
				if e, ok, err := sm.Last(1); err != nil || !ok || e.Key != 40 || e.Value != 400 {
					t.Fatal(e, ok, err)
				}
				if _, ok, err := sm.First(2); err != nil || ok {
					t.Fatal(ok, err)
				}
			})
			if allocs != 0 {
				t.Errorf("First and Last allocated %.1f times, want 0", allocs)
			}
		})
	}
}

// TestTimersAdvanceAllocs: firing timers of pointer-free keys allocates
// almost nothing on cow: reading a key group's next timers is a call to
// the store with a callback made once, not a closure per read, into
// buffers kept from one Advance to the next.
func TestTimersAdvanceAllocs(t *testing.T) {
	s := backendsFor(t)["cow"](runtime.StoreConfig{})
	tm := must[runtime.Timers[int64, int64]](t)(runtime.NewTimers(s, runtime.TimersDescriptor[int64, int64]{
		Name: "tm", Key: runtime.Int64Codec{}, Namespace: runtime.Int64Codec{},
	}))
	const n = 2000
	next := int64(0)
	fired := 0
	register := func() {
		for i := range int64(n) {
			check(t, tm.Register(next+i, i, i%7))
		}
	}
	advance := func() {
		check(t, tm.Advance(next+n, func(runtime.Timer[int64, int64]) error { fired++; return nil }))
		next += 2 * n
	}
	var allocs uint64
	for range 3 { // the first rounds grow the tables and the heads' buffers
		register()
		var before, after goruntime.MemStats
		goruntime.ReadMemStats(&before)
		advance()
		goruntime.ReadMemStats(&after)
		allocs = after.Mallocs - before.Mallocs
	}
	if fired != 3*n {
		t.Fatalf("fired %d timers, want %d", fired, 3*n)
	}
	if allocs > n/100 {
		t.Errorf("an Advance firing %d timers allocated %d times, want at most %d", n, allocs, n/100)
	}
}
