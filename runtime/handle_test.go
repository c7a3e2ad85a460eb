package runtime_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

func newModel(t *testing.T) runtime.Store {
	t.Helper()
	m, err := storetest.NewModel(runtime.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// collect drains a Seq, failing the test on an error.
func collect[T any](t *testing.T, seq runtime.Seq[T]) []T {
	t.Helper()
	var out []T
	for v, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

type window struct{ Start, End int64 }

var windowCodec = runtime.StructKeyCodec(
	runtime.KeyField(runtime.Int64Codec{}, func(w *window) *int64 { return &w.Start }),
	runtime.KeyField(runtime.Int64Codec{}, func(w *window) *int64 { return &w.End }),
)

func TestValueHandle(t *testing.T) {
	s := newModel(t)
	clicks := must[runtime.Value[string, int64]](t)(runtime.NewValue(s, runtime.ValueDescriptor[string, int64]{
		Name: "clicks", Fingerprint: "v1", Key: runtime.StringCodec{}, Value: runtime.Int64Codec{},
	}))
	if _, ok, err := clicks.Get("ann"); ok || err != nil {
		t.Fatalf("Get of absent key = found %v, %v", ok, err)
	}
	check(t, clicks.Put("ann", 3))
	check(t, clicks.Put("ann", 5)) // replaces
	for range 4 {
		check(t, clicks.Update("bob", func(n int64, _ bool) int64 { return n + 1 }))
	}
	if v, ok, err := clicks.Get("ann"); v != 5 || !ok || err != nil {
		t.Fatalf("Get(ann) = %d, %v, %v; want 5", v, ok, err)
	}
	if v, _, _ := clicks.Get("bob"); v != 4 {
		t.Fatalf("Get(bob) after 4 increments = %d", v)
	}
	check(t, clicks.Delete("ann"))
	check(t, clicks.Delete("nobody"))
	if _, ok, _ := clicks.Get("ann"); ok {
		t.Fatal("ann still present after Delete")
	}
	if got := clicks.Spec(); !got.Equal(runtime.StateSpec{Name: "clicks", Kind: runtime.KindValue, Fingerprint: "v1"}) {
		t.Fatalf("Spec = %v", got)
	}
}

func TestSubKeyedValueHandle(t *testing.T) {
	s := newModel(t)
	agg := must[runtime.SubKeyedValue[string, window, float64]](t)(runtime.NewSubKeyedValue(s, runtime.SubKeyedValueDescriptor[string, window, float64]{
		Name: "agg", Key: runtime.StringCodec{}, Namespace: windowCodec, Value: runtime.Float64Codec{},
	}))
	w1, w2, w3 := window{0, 10}, window{10, 20}, window{-10, 0}
	check(t, agg.Put("ann", w1, 1.5))
	check(t, agg.Put("ann", w2, 2.5))
	check(t, agg.Put("ann", w3, -1))
	check(t, agg.Put("bob", w1, 9))
	check(t, agg.Update("ann", w1, func(v float64, ok bool) float64 { return v * 2 }))
	if v, ok, _ := agg.Get("ann", w1); v != 3 || !ok {
		t.Fatalf("Get(ann, w1) = %v, %v", v, ok)
	}
	ns := collect(t, agg.Namespaces("ann"))
	slices.SortFunc(ns, func(a, b window) int { return int(a.Start - b.Start) })
	if diff := cmp.Diff([]window{w3, w1, w2}, ns); diff != "" {
		t.Fatalf("Namespaces(ann) (-want +got):\n%s", diff)
	}
	check(t, agg.Delete("ann", w2))
	if got := collect(t, agg.Namespaces("ann")); len(got) != 2 {
		t.Fatalf("after Delete, Namespaces = %v", got)
	}
	check(t, agg.DeleteAll("ann"))
	if got := collect(t, agg.Namespaces("ann")); len(got) != 0 {
		t.Fatalf("after DeleteAll, Namespaces = %v", got)
	}
	if v, ok, _ := agg.Get("bob", w1); v != 9 || !ok {
		t.Fatalf("DeleteAll(ann) touched bob: %v, %v", v, ok)
	}
}

func TestListHandle(t *testing.T) {
	s := newModel(t)
	recent := must[runtime.List[int64, string]](t)(runtime.NewList(s, runtime.ListDescriptor[int64, string]{
		Name: "recent", Key: runtime.Int64Codec{}, Value: runtime.StringCodec{},
	}))
	if got, err := recent.Get(1); got != nil || err != nil {
		t.Fatalf("Get of absent list = %v, %v", got, err)
	}
	check(t, recent.Add(1, "a"))
	check(t, recent.AddAll(1, []string{"b", "", "c"}))
	check(t, recent.AddAll(1, nil))
	if got := must[[]string](t)(recent.Get(1)); !slices.Equal(got, []string{"a", "b", "", "c"}) {
		t.Fatalf("Get = %q", got)
	}
	if got := collect(t, recent.All(1)); !slices.Equal(got, []string{"a", "b", "", "c"}) {
		t.Fatalf("All = %q", got)
	}
	check(t, recent.Replace(1, []string{"z", strings.Repeat("y", 1000)}))
	if got := must[[]string](t)(recent.Get(1)); len(got) != 2 || got[0] != "z" || len(got[1]) != 1000 {
		t.Fatalf("after Update, Get = %q", got)
	}
	check(t, recent.Replace(1, nil))
	if got := must[[]string](t)(recent.Get(1)); got != nil {
		t.Fatalf("after empty Update, Get = %q", got)
	}
	check(t, recent.Add(2, "x"))
	check(t, recent.Delete(2))
	if got := must[[]string](t)(recent.Get(2)); got != nil {
		t.Fatalf("after Delete, Get = %q", got)
	}
	// Early break stops the iteration.
	check(t, recent.AddAll(3, []string{"1", "2", "3"}))
	n := 0
	for range recent.All(3) {
		n++
		break
	}
	if n != 1 {
		t.Fatalf("break after first element visited %d", n)
	}

	sub := must[runtime.SubKeyedList[string, int32, bool]](t)(runtime.NewSubKeyedList(s, runtime.SubKeyedListDescriptor[string, int32, bool]{
		Name: "flags", Key: runtime.StringCodec{}, Namespace: runtime.Int32Codec{}, Value: runtime.BoolCodec{},
	}))
	check(t, sub.Add("k", -1, true))
	check(t, sub.AddAll("k", 7, []bool{false, true}))
	if got := must[[]bool](t)(sub.Get("k", 7)); !slices.Equal(got, []bool{false, true}) {
		t.Fatalf("sub Get = %v", got)
	}
	ns := collect(t, sub.Namespaces("k"))
	slices.Sort(ns)
	if !slices.Equal(ns, []int32{-1, 7}) {
		t.Fatalf("sub Namespaces = %v", ns)
	}
	check(t, sub.Replace("k", -1, nil))
	check(t, sub.Delete("k", 7))
	if ns := collect(t, sub.Namespaces("k")); len(ns) != 0 {
		t.Fatalf("after deletes, Namespaces = %v", ns)
	}
}

func TestMapHandle(t *testing.T) {
	s := newModel(t)
	pages := must[runtime.Map[string, string, int64]](t)(runtime.NewMap(s, runtime.MapDescriptor[string, string, int64]{
		Name: "pages", Key: runtime.StringCodec{}, UserKey: runtime.StringCodec{}, Value: runtime.Int64Codec{},
	}))
	if empty := must[bool](t)(pages.IsEmpty("ann")); !empty {
		t.Fatal("IsEmpty of absent map = false")
	}
	check(t, pages.Put("ann", "/home", 1))
	check(t, pages.Put("ann", "/cart", 2))
	check(t, pages.Put("ann", "/home", 3))
	check(t, pages.Put("bob", "/home", 7))
	if v, ok, _ := pages.Get("ann", "/home"); v != 3 || !ok {
		t.Fatalf("Get = %d, %v", v, ok)
	}
	if ok := must[bool](t)(pages.Contains("ann", "/cart")); !ok {
		t.Fatal("Contains(/cart) = false")
	}
	if ok := must[bool](t)(pages.Contains("ann", "/none")); ok {
		t.Fatal("Contains(/none) = true")
	}
	all := collect(t, pages.All("ann"))
	slices.SortFunc(all, func(a, b runtime.MapEntry[string, int64]) int { return strings.Compare(a.Key, b.Key) })
	if diff := cmp.Diff([]runtime.MapEntry[string, int64]{{"/cart", 2}, {"/home", 3}}, all); diff != "" {
		t.Fatalf("All (-want +got):\n%s", diff)
	}
	keys := collect(t, pages.Keys("ann"))
	slices.Sort(keys)
	vals := collect(t, pages.Values("ann"))
	slices.Sort(vals)
	if !slices.Equal(keys, []string{"/cart", "/home"}) || !slices.Equal(vals, []int64{2, 3}) {
		t.Fatalf("Keys = %q, Values = %v", keys, vals)
	}
	check(t, pages.Delete("ann", "/cart"))
	check(t, pages.Delete("ann", "/none"))
	if n := len(collect(t, pages.All("ann"))); n != 1 {
		t.Fatalf("after Delete, %d entries", n)
	}
	check(t, pages.Clear("ann"))
	if empty := must[bool](t)(pages.IsEmpty("ann")); !empty {
		t.Fatal("IsEmpty after Clear = false")
	}
	if v, ok, _ := pages.Get("bob", "/home"); v != 7 || !ok {
		t.Fatal("Clear(ann) touched bob")
	}
}

func TestSortedMapHandle(t *testing.T) {
	s := newModel(t)
	events := must[runtime.SortedMap[string, int64, string]](t)(runtime.NewSortedMap(s, runtime.MapDescriptor[string, int64, string]{
		Name: "events", Key: runtime.StringCodec{}, UserKey: runtime.Int64Codec{}, Value: runtime.StringCodec{},
	}))
	if _, ok, err := events.First("ann"); ok || err != nil {
		t.Fatalf("First of absent map = %v, %v", ok, err)
	}
	for _, ts := range []int64{30, -5, 10, 20, 0, 40} {
		check(t, events.Put("ann", ts, "e"+string(rune('a'+ts%26+5))))
	}
	keysOf := func(seq runtime.Seq[runtime.MapEntry[int64, string]]) []int64 {
		var ks []int64
		for _, e := range collect(t, seq) {
			ks = append(ks, e.Key)
		}
		return ks
	}
	for _, tc := range []struct {
		name string
		seq  runtime.Seq[runtime.MapEntry[int64, string]]
		want []int64
	}{
		{"All is ascending", events.All("ann"), []int64{-5, 0, 10, 20, 30, 40}},
		{"Range [0, 30)", events.Range("ann", 0, 30), []int64{0, 10, 20}},
		{"Range [1, 9)", events.Range("ann", 1, 9), nil},
		{"Range [30, 0) is empty", events.Range("ann", 30, 0), nil},
		{"From 11", events.From("ann", 11), []int64{20, 30, 40}},
		{"Before 10", events.Before("ann", 10), []int64{-5, 0}},
		{"Descend", events.Descend("ann"), []int64{40, 30, 20, 10, 0, -5}},
		{"DescendRange [0, 30)", events.DescendRange("ann", 0, 30), []int64{20, 10, 0}},
		{"other key", events.All("bob"), nil},
	} {
		if got := keysOf(tc.seq); !slices.Equal(got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.name, got, tc.want)
		}
	}
	if e, ok, _ := events.First("ann"); !ok || e.Key != -5 {
		t.Errorf("First = %v, %v", e, ok)
	}
	if e, ok, _ := events.Last("ann"); !ok || e.Key != 40 {
		t.Errorf("Last = %v, %v", e, ok)
	}

	sub := must[runtime.SubKeyedSortedMap[string, string, uint16, []byte]](t)(runtime.NewSubKeyedSortedMap(s, runtime.SubKeyedMapDescriptor[string, string, uint16, []byte]{
		Name: "sub", Key: runtime.StringCodec{}, Namespace: runtime.StringCodec{}, UserKey: runtime.Uint16Codec{}, Value: runtime.BytesCodec{},
	}))
	for i := range uint16(10) {
		check(t, sub.Put("k", "ns", i*1000, []byte{byte(i)}))
	}
	var got []uint16
	for e, err := range sub.DescendRange("k", "ns", 2000, 5000) {
		check(t, err)
		got = append(got, e.Key)
	}
	if !slices.Equal(got, []uint16{4000, 3000, 2000}) {
		t.Errorf("sub DescendRange = %v", got)
	}
	if e, ok, _ := sub.Last("k", "ns"); !ok || e.Key != 9000 || e.Value[0] != 9 {
		t.Errorf("sub Last = %v", e)
	}
	if n := len(collect(t, sub.From("k", "ns", 8500))); n != 1 {
		t.Errorf("sub From = %d entries", n)
	}
	if n := len(collect(t, sub.Before("k", "ns", 1))); n != 1 {
		t.Errorf("sub Before = %d entries", n)
	}
	if n := len(collect(t, sub.Range("k", "ns", 0, 65535))); n != 10 {
		t.Errorf("sub Range = %d entries", n)
	}
	if e, ok, _ := sub.First("k", "ns"); !ok || e.Key != 0 {
		t.Errorf("sub First = %v", e)
	}
	if n := len(collect(t, sub.Descend("k", "ns"))); n != 10 {
		t.Errorf("sub Descend = %d entries", n)
	}
}

// TestCallsInsideIterationDoNotCorruptIt reads through the same handle from
// inside a loop over it: the loop's encoded key must not be overwritten.
func TestCallsInsideIterationDoNotCorruptIt(t *testing.T) {
	s := newModel(t)
	m := must[runtime.SortedMap[string, int64, int64]](t)(runtime.NewSortedMap(s, runtime.MapDescriptor[string, int64, int64]{
		Name: "m", Key: runtime.StringCodec{}, UserKey: runtime.Int64Codec{}, Value: runtime.Int64Codec{},
	}))
	for i := range int64(5) {
		check(t, m.Put("a-long-key-for-the-loop", i, i))
		check(t, m.Put("b", i, 10*i))
	}
	var sum int64
	for e, err := range m.Range("a-long-key-for-the-loop", 1, 4) {
		check(t, err)
		v, _, err := m.Get("b", e.Key)
		check(t, err)
		sum += v
	}
	if sum != 10+20+30 {
		t.Fatalf("sum = %d, want 60", sum)
	}
}

func TestZeroHandlesReturnErrUnbound(t *testing.T) {
	var (
		v  runtime.Value[string, int64]
		sv runtime.SubKeyedValue[string, string, int64]
		l  runtime.List[string, int64]
		sl runtime.SubKeyedList[string, string, int64]
		m  runtime.Map[string, string, int64]
		sm runtime.SortedMap[string, string, int64]
		ss runtime.SubKeyedSortedMap[string, string, string, int64]
	)
	seqErr := func(seq runtime.Seq[int64]) error {
		for _, err := range seq {
			return err
		}
		return nil
	}
	_, _, e1 := v.Get("k")
	_, _, e2 := sm.First("k")
	_, e3 := l.Get("k")
	_, e4 := m.Contains("k", "u")
	_, e6 := v.Contains("k")
	_, e7 := sv.Contains("k", "n")
	_, _, e5 := ss.Last("k", "n")
	for i, err := range []error{
		e1, v.Put("k", 1), v.Delete("k"), v.Update("k", func(int64, bool) int64 { return 0 }),
		sv.Put("k", "n", 1), sv.DeleteAll("k"),
		e3, l.Add("k", 1), l.AddAll("k", []int64{1}), l.Replace("k", nil), l.Delete("k"), seqErr(l.All("k")),
		sl.Add("k", "n", 1),
		e4, m.Put("k", "u", 1), m.Delete("k", "u"), m.Clear("k"), seqErr(m.Values("k")),
		e2, sm.Put("k", "u", 1), e5, e6, e7,
	} {
		if !errors.Is(err, runtime.ErrUnbound) {
			t.Errorf("call %d on a zero handle: %v, want ErrUnbound", i, err)
		}
	}
	if !v.Spec().Equal(runtime.StateSpec{}) {
		t.Error("zero handle has a spec")
	}
}

func TestBindErrorsNameTheState(t *testing.T) {
	s := newModel(t)
	_, err := runtime.NewValue(s, runtime.ValueDescriptor[string, int64]{Name: "v", Value: runtime.Int64Codec{}})
	if !errors.Is(err, runtime.ErrInvalidState) || !strings.Contains(err.Error(), `"v"`) || !strings.Contains(err.Error(), "key codec") {
		t.Errorf("nil key codec: %v", err)
	}
	_, err = runtime.NewMap(s, runtime.MapDescriptor[string, string, int64]{Name: "m", Key: runtime.StringCodec{}, Value: runtime.Int64Codec{}})
	if !errors.Is(err, runtime.ErrInvalidState) || !strings.Contains(err.Error(), "user key codec") {
		t.Errorf("nil user key codec: %v", err)
	}
	_, err = runtime.NewSubKeyedList(s, runtime.SubKeyedListDescriptor[string, string, int64]{Name: "l", Key: runtime.StringCodec{}, Value: runtime.Int64Codec{}})
	if !errors.Is(err, runtime.ErrInvalidState) || !strings.Contains(err.Error(), "namespace codec") {
		t.Errorf("nil namespace codec: %v", err)
	}
	_, err = runtime.NewValue(nil, runtime.ValueDescriptor[string, int64]{Name: "v", Key: runtime.StringCodec{}, Value: runtime.Int64Codec{}})
	if !errors.Is(err, runtime.ErrInvalidState) {
		t.Errorf("nil store: %v", err)
	}
	_, err = runtime.NewValue(s, runtime.ValueDescriptor[string, int64]{Name: "a/b", Key: runtime.StringCodec{}, Value: runtime.Int64Codec{}})
	if !errors.Is(err, runtime.ErrInvalidState) {
		t.Errorf("name with a slash: %v", err)
	}

	// The same state registered twice with the same descriptor binds twice;
	// with another kind or fingerprint it fails naming both.
	d := runtime.ValueDescriptor[string, int64]{Name: "x", Fingerprint: "f1", Key: runtime.StringCodec{}, Value: runtime.Int64Codec{}}
	a := must[runtime.Value[string, int64]](t)(runtime.NewValue(s, d))
	b := must[runtime.Value[string, int64]](t)(runtime.NewValue(s, d))
	check(t, a.Put("k", 1))
	if v, _, _ := b.Get("k"); v != 1 {
		t.Fatalf("second binding does not see the first's write")
	}
	d.Fingerprint = "f2"
	_, err = runtime.NewValue(s, d)
	if !errors.Is(err, runtime.ErrStateMismatch) || !strings.Contains(err.Error(), `"f1"`) || !strings.Contains(err.Error(), `"f2"`) {
		t.Errorf("fingerprint mismatch: %v", err)
	}
	_, err = runtime.NewList(s, runtime.ListDescriptor[string, int64]{Name: "x", Fingerprint: "f1", Key: runtime.StringCodec{}, Value: runtime.Int64Codec{}})
	if !errors.Is(err, runtime.ErrStateMismatch) || !strings.Contains(err.Error(), `"x"`) {
		t.Errorf("kind mismatch: %v", err)
	}
}

// failingStore wraps a store so that every state operation fails.
type failingStore struct{ runtime.Store }

var errDisk = errors.New("disk on fire")

func (f failingStore) Register(spec runtime.StateSpec) (runtime.State, error) {
	st, err := f.Store.Register(spec)
	if err != nil {
		return nil, err
	}
	switch st := st.(type) {
	case runtime.SortedMapState:
		return failingSorted{st}, nil
	case runtime.ValueState:
		return failingValue{st}, nil
	}
	return st, nil
}

type failingValue struct{ runtime.ValueState }

func (failingValue) Get(runtime.Key) ([]byte, bool, error) { return nil, false, errDisk }
func (failingValue) Put(runtime.Key, []byte) error         { return errDisk }

type failingSorted struct{ runtime.SortedMapState }

func (failingSorted) Range(runtime.Key, []byte, []byte, bool, func([]byte, []byte) bool) error {
	return errDisk
}
func (failingSorted) Iterate(runtime.Key, func([]byte, []byte) bool) error { return errDisk }

func TestBackendErrorsSurface(t *testing.T) {
	s := failingStore{newModel(t)}
	v := must[runtime.Value[string, int64]](t)(runtime.NewValue(s, runtime.ValueDescriptor[string, int64]{Name: "v", Key: runtime.StringCodec{}, Value: runtime.Int64Codec{}}))
	if _, _, err := v.Get("k"); !errors.Is(err, errDisk) || !strings.Contains(err.Error(), `state "v"`) {
		t.Errorf("Get: %v", err)
	}
	if err := v.Update("k", func(int64, bool) int64 { return 1 }); !errors.Is(err, errDisk) {
		t.Errorf("Update: %v", err)
	}
	m := must[runtime.SortedMap[string, int64, int64]](t)(runtime.NewSortedMap(s, runtime.MapDescriptor[string, int64, int64]{Name: "m", Key: runtime.StringCodec{}, UserKey: runtime.Int64Codec{}, Value: runtime.Int64Codec{}}))
	for _, seq := range []runtime.Seq[runtime.MapEntry[int64, int64]]{m.All("k"), m.Range("k", 0, 9), m.Descend("k")} {
		n := 0
		for _, err := range seq {
			n++
			if !errors.Is(err, errDisk) {
				t.Errorf("iteration error = %v", err)
			}
		}
		if n != 1 {
			t.Errorf("iteration yielded %d times, want exactly the error", n)
		}
	}
	if _, _, err := m.First("k"); !errors.Is(err, errDisk) {
		t.Errorf("First: %v", err)
	}
	if _, err := m.IsEmpty("k"); !errors.Is(err, errDisk) {
		t.Errorf("IsEmpty: %v", err)
	}
}

// TestCorruptValuesAreErrors writes bytes through the byte-level contract
// that the typed codec cannot decode.
func TestCorruptValuesAreErrors(t *testing.T) {
	s := newModel(t)
	v := must[runtime.Value[string, int64]](t)(runtime.NewValue(s, runtime.ValueDescriptor[string, int64]{Name: "v", Key: runtime.StringCodec{}, Value: runtime.Int64Codec{}}))
	st := must[runtime.State](t)(s.Register(v.Spec())).(runtime.ValueState)
	key := runtime.StringCodec{}.AppendKey(nil, "k")
	check(t, st.Put(runtime.MakeKey(key, nil, s.Config().MaxParallelism), []byte{0x80})) // truncated varint
	if _, _, err := v.Get("k"); !errors.Is(err, runtime.ErrCorrupt) || !strings.Contains(err.Error(), `state "v"`) {
		t.Errorf("truncated value: %v", err)
	}
	check(t, st.Put(runtime.MakeKey(key, nil, s.Config().MaxParallelism), []byte{2, 0})) // trailing byte
	// The value decodes (as 1) before the trailing byte is seen: Get must
	// still return the zero value, not a half-trusted one.
	if got, found, err := v.Get("k"); !errors.Is(err, runtime.ErrCorrupt) || got != 0 || found {
		t.Errorf("trailing bytes: (%d, %v, %v), want (0, false, ErrCorrupt)", got, found, err)
	}
	upd := 0
	if err := v.Update("k", func(old int64, found bool) int64 { upd++; return old + 1 }); !errors.Is(err, runtime.ErrCorrupt) || upd != 0 {
		t.Errorf("Update of a corrupt value: %v (fn called %d times), want ErrCorrupt before fn", err, upd)
	}
	m := must[runtime.Map[string, string, int64]](t)(runtime.NewMap(s, runtime.MapDescriptor[string, string, int64]{Name: "m", Key: runtime.StringCodec{}, UserKey: runtime.StringCodec{}, Value: runtime.Int64Codec{}}))
	ms := must[runtime.State](t)(s.Register(m.Spec())).(runtime.MapState)
	check(t, ms.Put(runtime.MakeKey(key, nil, s.Config().MaxParallelism), runtime.StringCodec{}.AppendKey(nil, "u"), []byte{0x80}))
	if err := m.Update("k", "u", func(old int64, found bool) int64 { upd++; return old + 1 }); !errors.Is(err, runtime.ErrCorrupt) || upd != 0 || !strings.Contains(err.Error(), `state "m"`) {
		t.Errorf("Map.Update of a corrupt value: %v (fn called %d times), want ErrCorrupt naming the state before fn", err, upd)
	}
	if b, _, _ := ms.Get(runtime.MakeKey(key, nil, s.Config().MaxParallelism), runtime.StringCodec{}.AppendKey(nil, "u")); !bytes.Equal(b, []byte{0x80}) {
		t.Errorf("a failed Map.Update changed the stored bytes to %x", b)
	}
}

// TestValueContains: Contains reports a value's presence on every backend,
// per namespace for sub-keyed values, without decoding it (a value its
// codec cannot decode is present, and Get of it fails).
func TestValueContains(t *testing.T) {
	for name, newStore := range backendsFor(t) {
		t.Run(name, func(t *testing.T) {
			s := newStore(runtime.StoreConfig{MaxParallelism: 16})
			v := must[runtime.Value[string, int64]](t)(runtime.NewValue(s, runtime.ValueDescriptor[string, int64]{
				Name: "v", Key: runtime.StringCodec{}, Value: runtime.Int64Codec{},
			}))
			sv := must[runtime.SubKeyedValue[string, int64, int64]](t)(runtime.NewSubKeyedValue(s, runtime.SubKeyedValueDescriptor[string, int64, int64]{
				Name: "sv", Key: runtime.StringCodec{}, Namespace: runtime.Int64Codec{}, Value: runtime.Int64Codec{},
			}))
			contains := func(ok bool, err error) bool {
				t.Helper()
				check(t, err)
				return ok
			}
			if contains(v.Contains("a")) {
				t.Fatal("Contains of an absent key")
			}
			check(t, v.Put("a", 0)) // the zero value is a value
			check(t, sv.Put("a", 1, 7))
			if !contains(v.Contains("a")) || contains(v.Contains("b")) {
				t.Fatal("Contains after Put: want a, not b")
			}
			if !contains(sv.Contains("a", 1)) || contains(sv.Contains("a", 2)) || contains(sv.Contains("b", 1)) {
				t.Fatal("sub-keyed Contains after Put: want (a, 1) only")
			}
			check(t, v.Delete("a"))
			check(t, sv.Delete("a", 1))
			if contains(v.Contains("a")) || contains(sv.Contains("a", 1)) {
				t.Fatal("Contains after Delete")
			}
			// A value that does not decode is present, and Get says why.
			st := must[runtime.State](t)(s.Register(v.Spec()))
			k := runtime.MakeKey(runtime.StringCodec{}.AppendKey(nil, "bad"), nil, 16)
			check(t, st.(runtime.ValueState).Put(k, []byte{0x80}))
			if !contains(v.Contains("bad")) {
				t.Error("Contains of a value that does not decode: absent")
			}
			if _, _, err := v.Get("bad"); !errors.Is(err, runtime.ErrCorrupt) {
				t.Errorf("Get of a value that does not decode: %v, want ErrCorrupt", err)
			}
		})
	}
}
