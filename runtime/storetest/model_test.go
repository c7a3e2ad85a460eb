package storetest_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

// TestModel runs the conformance suite against the reference model: the
// model must pass its own suite.
func TestModel(t *testing.T) {
	storetest.Run(t, func(tb testing.TB, cfg runtime.StoreConfig) runtime.Store {
		m, err := storetest.NewModel(cfg)
		if err != nil {
			tb.Fatal(err)
		}
		return m
	}, storetest.Sorted())
}

func newModel(t *testing.T, cfg runtime.StoreConfig) *storetest.Model {
	t.Helper()
	m, err := storetest.NewModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustRegister(t *testing.T, s runtime.Store, spec runtime.StateSpec) runtime.State {
	t.Helper()
	st, err := s.Register(spec)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func be32(i uint32) []byte { return []byte{byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)} }

func TestNewModelConfig(t *testing.T) {
	m := newModel(t, runtime.StoreConfig{})
	if got, want := m.Config(), (runtime.StoreConfig{MaxParallelism: 128, KeyGroups: runtime.KeyGroupRange{Start: 0, End: 128}}); got != want {
		t.Errorf("Config() = %+v, want %+v", got, want)
	}
	if _, err := storetest.NewModel(runtime.StoreConfig{MaxParallelism: -1}); !errors.Is(err, runtime.ErrInvalidParallelism) {
		t.Errorf("maxParallelism -1: got %v, want ErrInvalidParallelism", err)
	}
	if _, err := storetest.NewModel(runtime.StoreConfig{MaxParallelism: 8, KeyGroups: runtime.KeyGroupRange{Start: 4, End: 9}}); !errors.Is(err, runtime.ErrInvalidKeyGroup) {
		t.Errorf("range [4, 9) of 8: got %v, want ErrInvalidKeyGroup", err)
	}
}

// TestModelKindTypes checks that each kind's handle implements its
// interface and no other: a map is not a sorted map.
func TestModelKindTypes(t *testing.T) {
	m := newModel(t, runtime.StoreConfig{})
	kinds := []runtime.Kind{runtime.KindValue, runtime.KindList, runtime.KindMap, runtime.KindSortedMap}
	for _, k := range kinds {
		st := mustRegister(t, m, runtime.StateSpec{Name: k.String(), Kind: k})
		_, isValue := st.(runtime.ValueState)
		_, isList := st.(runtime.ListState)
		_, isMap := st.(runtime.MapState)
		_, isSorted := st.(runtime.SortedMapState)
		got := [4]bool{isValue, isList, isMap, isSorted}
		want := [4]bool{k == runtime.KindValue, k == runtime.KindList, k.HasUserKey(), k == runtime.KindSortedMap}
		if got != want {
			t.Errorf("kind %v: implements (value, list, map, sorted) = %v, want %v", k, got, want)
		}
	}
}

func TestModelRejectsMalformedKeys(t *testing.T) {
	m := newModel(t, runtime.StoreConfig{})
	vs := mustRegister(t, m, runtime.StateSpec{Name: "strict.value", Kind: runtime.KindValue}).(runtime.ValueState)
	good := runtime.MakeKey(be32(1), nil, 128)

	if err := vs.Put(runtime.Key{}, []byte("v")); !errors.Is(err, runtime.ErrInvalidKey) || !strings.Contains(err.Error(), "strict.value") {
		t.Errorf("Put of the zero Key: got %v, want ErrInvalidKey naming the state", err)
	}
	if _, _, err := vs.Get(runtime.MakeKey(be32(1), nil, 256)); !errors.Is(err, runtime.ErrInvalidKey) || !strings.Contains(err.Error(), "256") {
		t.Errorf("Get of a Key built for maxParallelism 256: got %v, want ErrInvalidKey naming it", err)
	}

	withNS := runtime.MakeKey(be32(1), []byte("ns"), 128)
	if err := vs.Put(withNS, []byte("v")); err == nil || !strings.Contains(err.Error(), "strict.value") {
		t.Errorf("Put with a namespace on a keyed state: got %v, want an error naming the state", err)
	}
	ls := mustRegister(t, m, runtime.StateSpec{Name: "strict.list", Kind: runtime.KindList}).(runtime.ListState)
	if err := ls.Add(withNS, nil); err == nil {
		t.Error("list Add with a namespace on a keyed state succeeded")
	}
	// Namespaces and DeleteAll ignore the namespace.
	if err := vs.Put(good, []byte("v")); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := vs.Namespaces(withNS, func([]byte) bool { n++; return true }); err != nil || n != 1 {
		t.Errorf("Namespaces with a namespace on a keyed state: %d calls, error %v; want 1 call, no error", n, err)
	}
	if err := vs.DeleteAll(withNS); err != nil {
		t.Errorf("DeleteAll with a namespace on a keyed state: %v", err)
	}
	if _, found, _ := vs.Get(good); found {
		t.Error("DeleteAll left the value")
	}
}

// TestModelLendsSlices checks that the model overwrites what it only lends:
// Get results at the next call, callback arguments when the callback
// returns, and Scan entries likewise.
func TestModelLendsSlices(t *testing.T) {
	m := newModel(t, runtime.StoreConfig{})
	k1, k2 := runtime.MakeKey(be32(1), []byte("n"), 128), runtime.MakeKey(be32(2), []byte("n"), 128)
	vs := mustRegister(t, m, runtime.StateSpec{Name: "lend.value", Kind: runtime.KindValue, SubKeyed: true}).(runtime.ValueState)
	ms := mustRegister(t, m, runtime.StateSpec{Name: "lend.map", Kind: runtime.KindSortedMap, SubKeyed: true}).(runtime.SortedMapState)
	ls := mustRegister(t, m, runtime.StateSpec{Name: "lend.list", Kind: runtime.KindList, SubKeyed: true}).(runtime.ListState)
	for _, err := range []error{vs.Put(k1, []byte("value")), ms.Put(k1, []byte("uk"), []byte("mv")), ls.Add(k1, []byte("elem"))} {
		if err != nil {
			t.Fatal(err)
		}
	}
	v, _, _ := vs.Get(k1)
	if string(v) != "value" {
		t.Fatalf("Get = %q", v)
	}
	if _, _, err := vs.Get(k2); err != nil {
		t.Fatal(err)
	}
	if string(v) == "value" {
		t.Error("a value returned by Get is unchanged after the next call: the model does not enforce the lending rule")
	}

	var kept [][]byte
	keep := func(b ...[]byte) { kept = append(kept, b...) }
	_ = ms.Iterate(k1, func(u, v []byte) bool { keep(u, v); return true })
	_ = ms.Range(k1, nil, nil, true, func(u, v []byte) bool { keep(u, v); return true })
	_ = ls.Get(k1, func(e []byte) bool { keep(e); return true })
	_ = vs.Namespaces(k1, func(ns []byte) bool { keep(ns); return true })
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	_ = snap.Scan("lend.value", k1.Group(), func(e runtime.Entry) error { keep(e.Key, e.Value); return nil })
	if len(kept) != 8 {
		t.Fatalf("kept %d slices, want 8", len(kept))
	}
	for i, b := range kept {
		for _, orig := range []string{"uk", "mv", "elem", "n", "value", string(be32(1))} {
			if string(b) == orig {
				t.Errorf("slice %d passed to a callback still reads %q after the callback returned", i, b)
			}
		}
	}
}

func TestModelRejectsWritesFromCallbacks(t *testing.T) {
	m := newModel(t, runtime.StoreConfig{})
	k := runtime.MakeKey(be32(1), nil, 128)
	ms := mustRegister(t, m, runtime.StateSpec{Name: "cb.map", Kind: runtime.KindMap}).(runtime.MapState)
	if err := ms.Put(k, []byte("u"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	var inner, read error
	err := ms.Iterate(k, func(u, v []byte) bool {
		_, _, read = ms.Get(k, u)
		inner = ms.Put(k, []byte("w"), v)
		return true
	})
	if err != nil || read != nil {
		t.Fatalf("Iterate: %v; Get inside the callback: %v", err, read)
	}
	if inner == nil || !strings.Contains(inner.Error(), "cb.map") {
		t.Errorf("Put from inside an Iterate callback: got %v, want an error naming the state", inner)
	}
	if err := ms.Put(k, []byte("w"), nil); err != nil {
		t.Errorf("Put after the callback: %v", err)
	}
}

// fakeView is a View made of literal entries, to feed Dump, CopyView and
// Restore views that break the rules.
type fakeView struct {
	maxP    int
	groups  runtime.KeyGroupRange
	specs   []runtime.StateSpec
	entries map[string]map[int][]runtime.Entry
	swallow bool // Scan ignores the callback's errors
}

func (v *fakeView) MaxParallelism() int              { return v.maxP }
func (v *fakeView) KeyGroups() runtime.KeyGroupRange { return v.groups }
func (v *fakeView) States() []runtime.StateSpec      { return v.specs }
func (v *fakeView) Scan(state string, kg int, fn func(runtime.Entry) error) error {
	groups, ok := v.entries[state]
	if !ok {
		return errors.New("no such state")
	}
	for _, e := range groups[kg] {
		if err := fn(e); err != nil && !v.swallow {
			return err
		}
	}
	return nil
}

// kg4 returns the key group of key with maxParallelism 4.
func kg4(key []byte) int { return runtime.KeyGroupOfHash(runtime.HashKey(key), 4) }

func TestDumpChecksViews(t *testing.T) {
	k1, k2 := be32(1), be32(2)
	g1 := kg4(k1)
	value := runtime.StateSpec{Name: "v", Kind: runtime.KindValue}
	list := runtime.StateSpec{Name: "l", Kind: runtime.KindList, SubKeyed: true}
	mapSpec := runtime.StateSpec{Name: "m", Kind: runtime.KindMap, SubKeyed: true}
	view := func(specs []runtime.StateSpec, entries map[string]map[int][]runtime.Entry) *fakeView {
		return &fakeView{maxP: 4, groups: runtime.FullRange(4), specs: specs, entries: entries}
	}
	// k2 in the same key group as k1, for the list run check.
	for i := uint32(2); kg4(k2) != g1; i++ {
		k2 = be32(i)
	}
	cases := []struct {
		name    string
		v       *fakeView
		corrupt bool // the error wraps ErrCorrupt
	}{
		{"states not sorted", view([]runtime.StateSpec{value, list}, map[string]map[int][]runtime.Entry{"v": {}, "l": {}}), false},
		{"duplicate state", view([]runtime.StateSpec{value, value}, map[string]map[int][]runtime.Entry{"v": {}}), false},
		{"invalid state name", view([]runtime.StateSpec{{Name: "a/b", Kind: runtime.KindValue}}, map[string]map[int][]runtime.Entry{"a/b": {}}), false},
		{"invalid key groups", &fakeView{maxP: 4, groups: runtime.KeyGroupRange{Start: 2, End: 9}}, false},
		{"unknown state in Scan", view([]runtime.StateSpec{value}, nil), false},
		{"entry in the wrong key group", view([]runtime.StateSpec{value}, map[string]map[int][]runtime.Entry{
			"v": {(g1 + 1) % 4: {{Key: k1}}}}), true},
		{"namespace in a keyed state", view([]runtime.StateSpec{value}, map[string]map[int][]runtime.Entry{
			"v": {g1: {{Key: k1, Namespace: []byte("ns")}}}}), true},
		{"user key in a value state", view([]runtime.StateSpec{value}, map[string]map[int][]runtime.Entry{
			"v": {g1: {{Key: k1, UserKey: []byte("u")}}}}), true},
		{"duplicate value", view([]runtime.StateSpec{value}, map[string]map[int][]runtime.Entry{
			"v": {g1: {{Key: k1, Value: []byte("a")}, {Key: k1, Value: []byte("b")}}}}), true},
		{"duplicate map entry", view([]runtime.StateSpec{mapSpec}, map[string]map[int][]runtime.Entry{
			"m": {g1: {{Key: k1, UserKey: []byte("u")}, {Key: k1, UserKey: []byte("u")}}}}), true},
		{"list elements not consecutive", view([]runtime.StateSpec{list}, map[string]map[int][]runtime.Entry{
			"l": {g1: {{Key: k1, Value: []byte("a")}, {Key: k2, Value: []byte("b")}, {Key: k1, Value: []byte("c")}}}}), true},
		{"Scan swallows the callback's error", &fakeView{maxP: 4, groups: runtime.FullRange(4), specs: []runtime.StateSpec{value}, swallow: true,
			entries: map[string]map[int][]runtime.Entry{"v": {g1: {{Key: k1}, {Key: k1}}}}}, true},
	}
	for _, c := range cases {
		if _, err := storetest.Dump(c.v); err == nil {
			t.Errorf("Dump of a view with %s succeeded", c.name)
		} else if c.corrupt && !errors.Is(err, runtime.ErrCorrupt) {
			t.Errorf("Dump of a view with %s: error %v does not wrap ErrCorrupt", c.name, err)
		}
		if _, err := storetest.CopyView(c.v); err == nil {
			t.Errorf("CopyView of a view with %s succeeded", c.name)
		}
		if c.v.maxP == 4 {
			m := newModel(t, runtime.StoreConfig{MaxParallelism: 4})
			if err := m.Restore(c.v); err == nil {
				t.Errorf("Restore of a view with %s succeeded", c.name)
			}
			if got := m.States(); len(got) != 0 {
				t.Errorf("a failed Restore of a view with %s registered %v", c.name, got)
			}
		}
	}

	// A valid view: lists keep their order, other records are sorted.
	ok := view([]runtime.StateSpec{list, value}, map[string]map[int][]runtime.Entry{
		"l": {g1: {{Key: k2, Value: []byte("z")}, {Key: k1, Value: []byte("b")}, {Key: k1, Value: []byte("a")}}},
		"v": {g1: {{Key: k2, Value: []byte("2")}, {Key: k1, Value: []byte("1")}}},
	})
	got, err := storetest.Dump(ok)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := string(k1), string(k2)
	if lo > hi {
		lo, hi = hi, lo
	}
	want := storetest.Contents{MaxParallelism: 4, KeyGroups: runtime.FullRange(4), States: map[string]storetest.StateContents{
		"l": {Spec: list, Groups: map[int][]storetest.Record{g1: sortedList(k1, k2)}},
		"v": {Spec: value, Groups: map[int][]storetest.Record{g1: {{Key: lo, Value: map[string]string{string(k1): "1", string(k2): "2"}[lo]}, {Key: hi, Value: map[string]string{string(k1): "1", string(k2): "2"}[hi]}}}},
	}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Dump (-want +got):\n%s", d)
	}
	if n := got.Len(); n != 5 {
		t.Errorf("Len() = %d, want 5", n)
	}
	r := runtime.KeyGroupRange{Start: g1, End: g1 + 1}
	if d := cmp.Diff(want, got.Restrict(r).Restrict(runtime.FullRange(4))); g1 >= 0 && d == "" {
		t.Error("Restrict did not change KeyGroups")
	}
	other := runtime.KeyGroupRange{Start: (g1 + 1) % 4, End: (g1+1)%4 + 1}
	if n := got.Restrict(other).Len(); n != 0 {
		t.Errorf("Restrict to another key group keeps %d records", n)
	}
	if n := got.Restrict(r).Len(); n != 5 {
		t.Errorf("Restrict to the entries' key group keeps %d records, want 5", n)
	}

	// Merge undoes a split by Restrict, in any order of the parts.
	parts := []storetest.Contents{got.Restrict(runtime.KeyGroupRange{Start: 2, End: 4}), got.Restrict(runtime.KeyGroupRange{Start: 0, End: 1}), got.Restrict(runtime.KeyGroupRange{Start: 1, End: 2})}
	if d := cmp.Diff(want, storetest.Merge(parts...)); d != "" {
		t.Errorf("Merge of the parts (-want +got):\n%s", d)
	}
	if d := cmp.Diff(got.Restrict(runtime.KeyGroupRange{Start: 0, End: 2}), storetest.Merge(parts[1:]...)); d != "" {
		t.Errorf("Merge of two parts (-want +got):\n%s", d)
	}
	for name, bad := range map[string][]storetest.Contents{
		"overlapping key groups": {parts[0], got.Restrict(runtime.KeyGroupRange{Start: 3, End: 4})},
		"other maxParallelism":   {parts[1], {MaxParallelism: 8, KeyGroups: runtime.KeyGroupRange{Start: 4, End: 8}}},
		"other spec": {parts[1], {MaxParallelism: 4, KeyGroups: runtime.KeyGroupRange{Start: 1, End: 2}, States: map[string]storetest.StateContents{
			"l": {Spec: value, Groups: map[int][]storetest.Record{}}}}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Merge of parts with %s did not panic", name)
				}
			}()
			storetest.Merge(bad...)
		}()
	}
}

// sortedList returns the records of list "l" of TestDumpChecksViews: k1's
// elements b, a in order, and k2's z, ordered by key.
func sortedList(k1, k2 []byte) []storetest.Record {
	a := []storetest.Record{{Key: string(k1), Value: "b"}, {Key: string(k1), Value: "a"}}
	b := []storetest.Record{{Key: string(k2), Value: "z"}}
	if string(k1) < string(k2) {
		return append(a, b...)
	}
	return append(b, a...)
}

func TestCopyViewIsIndependent(t *testing.T) {
	m := newModel(t, runtime.StoreConfig{MaxParallelism: 16})
	st := mustRegister(t, m, runtime.StateSpec{Name: "copy.list", Kind: runtime.KindList}).(runtime.ListState)
	for i := uint32(0); i < 50; i++ {
		k := runtime.MakeKey(be32(i), nil, 16)
		if err := st.AddAll(k, [][]byte{[]byte("x"), be32(i)}); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	want, err := storetest.Dump(snap)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := storetest.CopyView(snap)
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := storetest.Dump(snap); !errors.Is(err, runtime.ErrReleased) {
		t.Errorf("Dump of a released snapshot: got %v, want ErrReleased", err)
	}
	got, err := storetest.Dump(cp)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("copy (-snapshot +copy):\n%s", d)
	}
	if err := cp.Release(); err != nil {
		t.Fatal(err)
	}
	if err := cp.Release(); !errors.Is(err, runtime.ErrReleased) {
		t.Errorf("second Release: got %v, want ErrReleased", err)
	}
	if err := cp.Scan("copy.list", 0, func(runtime.Entry) error { return nil }); !errors.Is(err, runtime.ErrReleased) {
		t.Errorf("Scan after Release: got %v, want ErrReleased", err)
	}
}

// TestModelRestoreIsAtomic checks that a failed Restore changes nothing.
func TestModelRestoreIsAtomic(t *testing.T) {
	src := newModel(t, runtime.StoreConfig{})
	a := mustRegister(t, src, runtime.StateSpec{Name: "a", Kind: runtime.KindValue}).(runtime.ValueState)
	mustRegister(t, src, runtime.StateSpec{Name: "b", Kind: runtime.KindValue})
	k := runtime.MakeKey(be32(1), nil, 128)
	if err := a.Put(k, []byte("from src")); err != nil {
		t.Fatal(err)
	}
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()

	dst := newModel(t, runtime.StoreConfig{})
	mustRegister(t, dst, runtime.StateSpec{Name: "b", Kind: runtime.KindList})
	err = dst.Restore(snap)
	if !errors.Is(err, runtime.ErrStateMismatch) || !strings.Contains(err.Error(), `"b"`) {
		t.Fatalf("Restore with a conflicting spec: got %v, want ErrStateMismatch naming \"b\"", err)
	}
	if got := dst.States(); len(got) != 1 || got[0].Name != "b" {
		t.Errorf("after a failed Restore, States() = %v, want only b", got)
	}

	dst = newModel(t, runtime.StoreConfig{})
	da := mustRegister(t, dst, runtime.StateSpec{Name: "a", Kind: runtime.KindValue}).(runtime.ValueState)
	if err := da.Put(k, []byte("mine")); err != nil {
		t.Fatal(err)
	}
	err = dst.Restore(snap)
	if !errors.Is(err, runtime.ErrRestoreConflict) || !strings.Contains(err.Error(), `"a"`) || !strings.Contains(err.Error(), "key group") {
		t.Fatalf("Restore over existing entries: got %v, want ErrRestoreConflict naming the state and key group", err)
	}
	if v, _, _ := da.Get(k); string(v) != "mine" {
		t.Errorf("after a failed Restore the value is %q, want \"mine\"", v)
	}
	if got := dst.States(); len(got) != 1 {
		t.Errorf("a failed Restore registered states: %v", got)
	}
}
