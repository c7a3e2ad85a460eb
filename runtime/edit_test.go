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
