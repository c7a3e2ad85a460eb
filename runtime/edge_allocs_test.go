package runtime_test

import (
	"errors"
	goruntime "runtime"
	"slices"
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

// TestListAllAllocs: ranging over a list of pointer-free elements costs
// at most two allocations on cow however long the list — the iterator and
// the loop body the compiler makes for it — and a range nested in another
// over the same handle sees its own elements.
func TestListAllAllocs(t *testing.T) {
	s := backendsFor(t)["cow"](runtime.StoreConfig{})
	l := must[runtime.List[int64, int64]](t)(runtime.NewList(s, runtime.ListDescriptor[int64, int64]{
		Name: "l", Key: runtime.Int64Codec{}, Value: runtime.Int64Codec{},
	}))
	for i := range int64(100) {
		check(t, l.Add(1, i))
		check(t, l.Add(2, -i))
	}
	sum := int64(0)
	allocs := testing.AllocsPerRun(100, func() {
		for v, err := range l.All(1) {
			check(t, err)
			sum += v
		}
	})
	if sum != 101*4950 || allocs > 2 {
		t.Errorf("ranging over 100 elements: sum %d, %v allocations, want %d and at most 2", sum, allocs, 101*4950)
	}
	outer, inner := int64(0), int64(0)
	for v, err := range l.All(1) {
		check(t, err)
		outer += v
		for w, err := range l.All(2) {
			check(t, err)
			inner += w
		}
	}
	if outer != 4950 || inner != -100*4950 {
		t.Errorf("nested ranges: %d and %d, want 4950 and %d", outer, inner, -100*4950)
	}
}

// TestSortedMapRangeAllocs: a range over a sorted map of pointer-free
// entries, stopped at once or run to the end, costs at most two
// allocations on cow (the iterator and the loop body the compiler makes
// for it), and ranges over one handle nest.
func TestSortedMapRangeAllocs(t *testing.T) {
	s := backendsFor(t)["cow"](runtime.StoreConfig{})
	sm := must[runtime.SortedMap[int64, int64, int64]](t)(runtime.NewSortedMap(s, runtime.MapDescriptor[int64, int64, int64]{
		Name: "sm", Key: runtime.Int64Codec{}, UserKey: runtime.Int64Codec{}, Value: runtime.Int64Codec{},
	}))
	for uk := range int64(64) {
		check(t, sm.Put(1, uk, uk))
	}
	n := 0
	allocs := testing.AllocsPerRun(100, func() {
		for e, err := range sm.Range(1, 10, 50) {
			check(t, err)
			if e.Key != e.Value {
				t.Fatal(e)
			}
			n++
		}
		for _, err := range sm.All(1) {
			check(t, err)
			break
		}
	})
	if n != 101*40 || allocs > 4 {
		t.Errorf("a range of 40 entries and one stopped at once: %d entries, %v allocations, want %d and at most 4", n, allocs, 101*40)
	}
	pairs := 0
	for range sm.Range(1, 0, 8) {
		for range sm.Range(1, 0, 8) {
			pairs++
		}
	}
	if pairs != 64 {
		t.Errorf("nested ranges: %d pairs, want 64", pairs)
	}
}

// TestListGetInto: GetInto reads a list's elements in order into the
// caller's slice, reusing its backing array — no allocation once it is
// long enough — empties it for an empty list, and refuses a nil
// destination and an unbound handle.
func TestListGetInto(t *testing.T) {
	for _, name := range []string{"cow", "btree", "pebble"} {
		t.Run(name, func(t *testing.T) {
			s := backendsFor(t)[name](runtime.StoreConfig{})
			l := must[runtime.List[int64, int64]](t)(runtime.NewList(s, runtime.ListDescriptor[int64, int64]{
				Name: "l", Key: runtime.Int64Codec{}, Value: runtime.Int64Codec{},
			}))
			sl := must[runtime.SubKeyedList[int64, int64, []byte]](t)(runtime.NewSubKeyedList(s, runtime.SubKeyedListDescriptor[int64, int64, []byte]{
				Name: "sl", Key: runtime.Int64Codec{}, Namespace: runtime.Int64Codec{}, Value: runtime.BytesCodec{},
			}))
			for i := range int64(50) {
				check(t, l.Add(1, i*i))
				check(t, sl.Add(1, 2, []byte{byte(i)}))
			}
			var dst []int64
			check(t, l.GetInto(1, &dst))
			want, err := l.Get(1)
			check(t, err)
			if !slices.Equal(dst, want) || len(dst) != 50 {
				t.Fatalf("GetInto = %v, want %v", dst, want)
			}
			if name == "cow" {
				if a := testing.AllocsPerRun(100, func() { check(t, l.GetInto(1, &dst)) }); a != 0 {
					t.Errorf("GetInto into a long enough slice allocated %v times, want 0", a)
				}
			}
			check(t, l.GetInto(2, &dst))
			if len(dst) != 0 || cap(dst) < 50 {
				t.Errorf("GetInto of an empty list: len %d cap %d, want empty with the array kept", len(dst), cap(dst))
			}
			var bs [][]byte
			check(t, sl.GetInto(1, 2, &bs))
			if len(bs) != 50 || bs[7][0] != 7 || bs[49][0] != 49 {
				t.Errorf("SubKeyedList.GetInto = %v", bs)
			}
			if err := l.GetInto(1, nil); err == nil {
				t.Error("GetInto with a nil destination succeeded")
			}
			var unbound runtime.List[int64, int64]
			if err := unbound.GetInto(1, &dst); !errors.Is(err, runtime.ErrUnbound) {
				t.Errorf("GetInto on the zero List: %v, want ErrUnbound", err)
			}
		})
	}
}
