package runtime_test

import (
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
