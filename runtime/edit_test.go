package runtime_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/stategen/stategen/runtime"
)

// TestMapEdit: the typed Edit decodes each entry for the callback, deletes
// and replaces what it says (the replaced value being what it left in *v),
// and refuses other writes from the callback.
func TestMapEdit(t *testing.T) {
	s := newModel(t)
	m := must[runtime.Map[string, string, int64]](t)(runtime.NewMap(s, runtime.MapDescriptor[string, string, int64]{
		Name: "m", Key: runtime.StringCodec{}, UserKey: runtime.StringCodec{}, Value: runtime.Int64Codec{},
	}))
	for i, uk := range []string{"a", "b", "c", "d"} {
		check(t, m.Put("k", uk, int64(i)))
	}
	err := m.Edit("k", func(uk string, v *int64) (runtime.EditAction, error) {
		if err := m.Put("k", "z", 1); !errors.Is(err, runtime.ErrWriteDuringIteration) {
			t.Errorf("Put from inside Edit = %v, want ErrWriteDuringIteration", err)
		}
		switch uk {
		case "a":
			return runtime.EditDelete, nil
		case "b", "d":
			*v *= 10
			return runtime.EditReplace, nil
		}
		return runtime.EditKeep, nil
	})
	check(t, err)
	got := map[string]int64{}
	for e, err := range m.All("k") {
		check(t, err)
		got[e.Key] = e.Value
	}
	if want := map[string]int64{"b": 10, "c": 2, "d": 30}; len(got) != len(want) || got["b"] != 10 || got["c"] != 2 || got["d"] != 30 {
		t.Errorf("after Edit: %v, want %v", got, want)
	}
	boom := errors.New("boom")
	if err := m.Edit("k", func(string, *int64) (runtime.EditAction, error) { return runtime.EditDelete, boom }); !errors.Is(err, boom) {
		t.Errorf("Edit whose callback fails = %v, want its error", err)
	}
	if n := len(collect(t, m.All("k"))); n != 3 {
		t.Errorf("after a failed Edit the map has %d entries, want 3 (no edit applied)", n)
	}
	if err := (runtime.Map[string, string, int64]{}).Edit("k", nil); !errors.Is(err, runtime.ErrUnbound) {
		t.Errorf("Edit of a zero Map = %v, want ErrUnbound", err)
	}
}

// TestSortedMapEditBefore prunes a time-ordered buffer the way operators
// do: every entry older than a bound, in order, stopping at the bound.
func TestSortedMapEditBefore(t *testing.T) {
	s := newModel(t)
	events := must[runtime.SubKeyedSortedMap[string, string, int64, string]](t)(runtime.NewSubKeyedSortedMap(s, runtime.SubKeyedMapDescriptor[string, string, int64, string]{
		Name: "events", Key: runtime.StringCodec{}, Namespace: runtime.StringCodec{}, UserKey: runtime.Int64Codec{}, Value: runtime.StringCodec{},
	}))
	for _, ts := range []int64{30, -5, 10, 20, 0, 40} {
		check(t, events.Put("ann", "w", ts, "e"))
	}
	var visited []int64
	check(t, events.EditBefore("ann", "w", 20, func(ts int64, _ *string) (runtime.EditAction, error) {
		visited = append(visited, ts)
		return runtime.EditDelete, nil
	}))
	if want := []int64{-5, 0, 10}; !slices.Equal(visited, want) {
		t.Errorf("EditBefore(20) visited %v, want %v", visited, want)
	}
	var left []int64
	for e, err := range events.All("ann", "w") {
		check(t, err)
		left = append(left, e.Key)
	}
	if want := []int64{20, 30, 40}; !slices.Equal(left, want) {
		t.Errorf("after EditBefore(20): %v, want %v", left, want)
	}
	// EditRange with StopEdit: the first entry of [20, 50) replaced, then stop.
	check(t, events.EditRange("ann", "w", 20, 50, func(ts int64, v *string) (runtime.EditAction, error) {
		*v = "first"
		return runtime.EditReplace, runtime.StopEdit
	}))
	if v, _, _ := events.Get("ann", "w", 20); v != "first" {
		t.Errorf("after EditRange with StopEdit, entry 20 = %q, want first", v)
	}
	if v, _, _ := events.Get("ann", "w", 30); v != "e" {
		t.Errorf("after EditRange with StopEdit, entry 30 = %q, want e (not visited)", v)
	}
}

// noUpdater is a store whose value and map states are not
// runtime.ValueUpdaters or runtime.MapUpdaters: the handles' Update takes
// its Get-then-Put path there.
type noUpdater struct{ runtime.Store }

type plainValue struct{ runtime.ValueState }

type plainMap struct{ runtime.MapState }

type plainSortedMap struct{ runtime.SortedMapState }

func (s noUpdater) Register(spec runtime.StateSpec) (runtime.State, error) {
	st, err := s.Store.Register(spec)
	switch st := st.(type) {
	case runtime.SortedMapState:
		return plainSortedMap{st}, err
	case runtime.MapState:
		return plainMap{st}, err
	case runtime.ValueState:
		return plainValue{st}, err
	}
	return st, err
}

// TestReadModifyWrite: every Update(fn) is a read-modify-write — Value
// (through ValueUpdater and through Get then Put alike), List and Map.
func TestReadModifyWrite(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    runtime.Store
	}{{"updater", newModel(t)}, {"get-put", noUpdater{newModel(t)}}} {
		t.Run(tc.name, func(t *testing.T) {
			v := must[runtime.Value[string, int64]](t)(runtime.NewValue(tc.s, runtime.ValueDescriptor[string, int64]{Name: "v", Key: runtime.StringCodec{}, Value: runtime.Int64Codec{}}))
			for range 3 {
				check(t, v.Update("k", func(old int64, found bool) int64 {
					if found != (old != 0) {
						t.Errorf("Update: old %d, found %v", old, found)
					}
					return old + 5
				}))
			}
			if got, _, _ := v.Get("k"); got != 15 {
				t.Errorf("after 3 Updates of +5: %d, want 15", got)
			}
			if err := v.Update("k", nil); err == nil {
				t.Error("Update with a nil fn succeeded")
			}
		})
	}
	s := newModel(t)
	l := must[runtime.List[string, string]](t)(runtime.NewList(s, runtime.ListDescriptor[string, string]{Name: "l", Key: runtime.StringCodec{}, Value: runtime.StringCodec{}}))
	check(t, l.AddAll("k", []string{"a", "b", "c"}))
	check(t, l.Update("k", func(old []string) []string { return old[1:] }))
	if got, _ := l.Get("k"); !slices.Equal(got, []string{"b", "c"}) {
		t.Errorf("List after Update(trim the first): %q", got)
	}
	check(t, l.Update("k", func([]string) []string { return nil }))
	if got, _ := l.Get("k"); got != nil {
		t.Errorf("List after Update to nothing: %q, want none", got)
	}
	for _, tc := range []struct {
		name string
		s    runtime.Store
	}{{"updater", newModel(t)}, {"get-put", noUpdater{newModel(t)}}} {
		t.Run("map/"+tc.name, func(t *testing.T) {
			m := must[runtime.SubKeyedMap[string, int32, string, int64]](t)(runtime.NewSubKeyedMap(tc.s, runtime.SubKeyedMapDescriptor[string, int32, string, int64]{
				Name: "m", Key: runtime.StringCodec{}, Namespace: runtime.Int32Codec{}, UserKey: runtime.StringCodec{}, Value: runtime.Int64Codec{},
			}))
			for i := range 2 {
				check(t, m.Update("k", 7, "clicks", func(old int64, found bool) int64 {
					if found != (i > 0) || old != int64(i) {
						t.Errorf("Update %d: old (%d, %v)", i, old, found)
					}
					return old + 1
				}))
			}
			if got, ok, _ := m.Get("k", 7, "clicks"); !ok || got != 2 {
				t.Errorf("Map entry after 2 Updates of +1: (%d, %v), want (2, true)", got, ok)
			}
			if got, ok, _ := m.Get("k", 8, "clicks"); ok {
				t.Errorf("another namespace after Updates: %d, want none", got)
			}
			if err := m.Update("k", 7, "clicks", nil); err == nil {
				t.Error("Map.Update with a nil fn succeeded")
			}
			// fn may read other entries through the same handle; a nested
			// Update is refused where the store looks up once.
			check(t, m.Put("a-much-longer-key-than-the-other", 1, "a-much-longer-user-key", 1))
			check(t, m.Update("a-much-longer-key-than-the-other", 1, "a-much-longer-user-key", func(old int64, _ bool) int64 {
				other, _, err := m.Get("k", 7, "clicks")
				check(t, err)
				if nested := m.Update("k", 7, "clicks", func(int64, bool) int64 { return 0 }); tc.name == "updater" && !errors.Is(nested, runtime.ErrWriteDuringIteration) {
					t.Errorf("Map.Update from inside Map.Update = %v, want ErrWriteDuringIteration", nested)
				}
				return old + other
			}))
			if got, _, _ := m.Get("a-much-longer-key-than-the-other", 1, "a-much-longer-user-key"); got != 3 {
				t.Errorf("after Update reading another entry: %d, want 3", got)
			}
		})
	}
}

// TestUpdateReadsThroughItsHandle: fn of an Update may read other keys
// through the same handle, and a nested Update is refused; neither
// disturbs the key being updated.
func TestUpdateReadsThroughItsHandle(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    runtime.Store
	}{{"updater", newModel(t)}, {"get-put", noUpdater{newModel(t)}}} {
		t.Run(tc.name, func(t *testing.T) {
			v := must[runtime.Value[string, int64]](t)(runtime.NewValue(tc.s, runtime.ValueDescriptor[string, int64]{Name: "v", Key: runtime.StringCodec{}, Value: runtime.Int64Codec{}}))
			check(t, v.Put("a-much-longer-key-than-the-other", 1))
			check(t, v.Put("b", 100))
			check(t, v.Update("a-much-longer-key-than-the-other", func(old int64, _ bool) int64 {
				other, _, err := v.Get("b")
				check(t, err)
				if nested := v.Update("b", func(int64, bool) int64 { return 0 }); tc.name == "updater" && !errors.Is(nested, runtime.ErrWriteDuringIteration) {
					t.Errorf("Update from inside Update = %v, want ErrWriteDuringIteration", nested)
				}
				return old + other
			}))
			if got, _, _ := v.Get("a-much-longer-key-than-the-other"); got != 101 {
				t.Errorf("after Update reading another key: %d, want 101", got)
			}
		})
	}
}
