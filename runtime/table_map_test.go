package runtime_test

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

// mapDesc is the descriptor of the typed-map tests' state: int64 keys and
// user keys, string values, kept as Go values where the store can (typed).
func mapDesc(typed bool) runtime.MapDescriptor[int64, int64, string] {
	d := runtime.MapDescriptor[int64, int64, string]{
		Name: "maps", Fingerprint: "i64->i64->str", Key: runtime.Int64Codec{}, UserKey: runtime.Int64Codec{}, Value: runtime.StringCodec{},
	}
	if typed {
		d.Typed = runtime.TypedMaps[int64, int64, string]()
	}
	return d
}

// noWord is a key codec without KeyWord: a handle encodes its keys to
// hash them, where Int64Codec's it hashes from their values.
type noWord[T any] struct{ runtime.KeyCodec[T] }

type mapHandle = runtime.Map[int64, int64, string]

// entriesOf collects k's map through All, and checks that Keys, Values
// and IsEmpty agree with it.
func entriesOf(t *testing.T, m mapHandle, k int64) map[int64]string {
	t.Helper()
	got := map[int64]string{}
	for e, err := range m.All(k) {
		check(t, err)
		if _, dup := got[e.Key]; dup {
			t.Fatalf("All(%d) yields user key %d twice", k, e.Key)
		}
		got[e.Key] = e.Value
	}
	n := 0
	for uk, err := range m.Keys(k) {
		check(t, err)
		if _, ok := got[uk]; !ok {
			t.Fatalf("Keys(%d) yields %d, which All does not", k, uk)
		}
		n++
	}
	values := 0
	for _, err := range m.Values(k) {
		check(t, err)
		values++
	}
	empty, err := m.IsEmpty(k)
	check(t, err)
	if n != len(got) || values != len(got) || empty != (len(got) == 0) {
		t.Fatalf("key %d: All has %d entries, Keys %d, Values %d, IsEmpty %v", k, len(got), n, values, empty)
	}
	return got
}

// TestTypedMapsMatchBytes drives a typed Map on cow (a hosted table) and a
// byte Map on another cow store through the same random operations —
// Put, Update (some of whose functions take a snapshot), Delete, Get,
// Contains, All, Edit, Clear — with snapshots scanned on other goroutines
// while the writes go on and released out of order: every read answers
// alike, and every snapshot holds what the byte store's snapshot of the
// same moment holds, whatever is written after it.
//
// The typed handle hashes its keys and user keys from their values
// (runtime.KeyWord) or, with codecs that cannot, from their encodings:
// both must find the key groups the byte handle does.
func TestTypedMapsMatchBytes(t *testing.T) {
	for _, words := range []bool{true, false} {
		t.Run(fmt.Sprintf("keyword=%v", words), func(t *testing.T) {
			d := mapDesc(true)
			if !words {
				d.Key, d.UserKey = noWord[int64]{d.Key}, noWord[int64]{d.UserKey}
			}
			typedMapsMatchBytes(t, d)
		})
	}
}

func typedMapsMatchBytes(t *testing.T, typed runtime.MapDescriptor[int64, int64, string]) {
	cfg := runtime.StoreConfig{MaxParallelism: 8}
	ts, bs := newCow(t, cfg), newCow(t, cfg)
	tm := must[mapHandle](t)(runtime.NewMap(ts, typed))
	bm := must[mapHandle](t)(runtime.NewMap(bs, mapDesc(false)))
	if !isTable(t, ts, "maps") || isTable(t, bs, "maps") {
		t.Fatal("the typed handle's state is not a table, or the byte handle's is")
	}
	w := newTwins(t, ts, bs)
	defer w.wg.Wait()
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 30000 {
		k, uk := rng.Int64N(20), rng.Int64N(40)
		val := strings.Repeat("v", rng.IntN(4)) + string(rune('a'+i%26))
		switch op := rng.IntN(200); {
		case op < 60:
			check(t, tm.Put(k, uk, val))
			check(t, bm.Put(k, uk, val))
		case op < 90:
			snap := op < 63 && len(w.live) < 4
			for _, m := range []mapHandle{tm, bm} {
				check(t, m.Update(k, uk, func(old string, found bool) string {
					if snap && m == tm {
						w.snapshot() // both stores, before either writes
					}
					if found {
						return old + val
					}
					return val
				}))
			}
		case op < 115:
			check(t, tm.Delete(k, uk))
			check(t, bm.Delete(k, uk))
		case op < 120:
			a, errA := tm.Contains(k, uk)
			b, errB := bm.Contains(k, uk)
			check(t, errors.Join(errA, errB))
			if a != b {
				t.Fatalf("op %d: Contains(%d, %d): typed %v, bytes %v", i, k, uk, a, b)
			}
		case op < 160:
			a, fa, errA := tm.Get(k, uk)
			b, fb, errB := bm.Get(k, uk)
			check(t, errors.Join(errA, errB))
			if a != b || fa != fb {
				t.Fatalf("op %d: Get(%d, %d): typed %q %v, bytes %q %v", i, k, uk, a, fa, b, fb)
			}
		case op < 180:
			if a, b := entriesOf(t, tm, k), entriesOf(t, bm, k); !maps.Equal(a, b) {
				t.Fatalf("op %d: All(%d): typed %v, bytes %v", i, k, a, b)
			}
		case op < 190:
			// Edit deletes the entries of odd user keys and appends to
			// the others: the order of the walk does not matter.
			for _, m := range []mapHandle{tm, bm} {
				check(t, m.Edit(k, func(uk int64, v *string) (runtime.EditAction, error) {
					if uk%2 == 1 {
						return runtime.EditDelete, nil
					}
					*v += "e"
					return runtime.EditReplace, nil
				}))
			}
		case op < 193:
			check(t, tm.Clear(k))
			check(t, bm.Clear(k))
		case op < 196 && len(w.live) < 4:
			w.snapshot()
		case len(w.live) > 0:
			w.release(i, rng.IntN(len(w.live)))
		}
	}
	w.finish()
}

// TestTypedMapsRestore restores a snapshot of a typed map into the stores
// of two instances (a rescale), bound before the Restore (the table loads
// the entries) and after it (the restored byte state becomes a table):
// each reads what was written in its own key groups, holds what a byte
// store restored from the same snapshot holds, and writes the loaded maps.
func TestTypedMapsRestore(t *testing.T) {
	const maxP = 16
	src := newCow(t, runtime.StoreConfig{MaxParallelism: maxP})
	m := must[mapHandle](t)(runtime.NewMap(src, mapDesc(true)))
	want := map[int64]map[int64]string{}
	for k := range int64(200) {
		want[k] = map[int64]string{}
		for uk := range k % 5 {
			want[k][uk] = strings.Repeat("x", int(uk))
			check(t, m.Put(k, uk, want[k][uk]))
		}
	}
	snap := must[runtime.Snapshot](t)(src.Snapshot())
	defer snap.Release()
	for _, before := range []bool{true, false} {
		for i := range 2 {
			groups := must[runtime.KeyGroupRange](t)(runtime.KeyGroupRangeForOperator(maxP, 2, i))
			dst := newCow(t, runtime.StoreConfig{MaxParallelism: maxP, KeyGroups: groups})
			var h mapHandle
			if before {
				h = must[mapHandle](t)(runtime.NewMap(dst, mapDesc(true)))
			}
			check(t, dst.Restore(snap))
			if !before {
				h = must[mapHandle](t)(runtime.NewMap(dst, mapDesc(true)))
			}
			if !isTable(t, dst, "maps") {
				t.Fatalf("bound before restore %v: the state is not a table", before)
			}
			for k, w := range want {
				if !groups.Contains(runtime.KeyGroupOfHash(runtime.HashKey(runtime.Int64Codec{}.AppendKey(nil, k)), maxP)) {
					if _, _, err := h.Get(k, 0); !errors.Is(err, runtime.ErrKeyGroupNotOwned) {
						t.Fatalf("instance %d: Get(%d) of another instance's key: %v, want ErrKeyGroupNotOwned", i, k, err)
					}
					continue
				}
				if got := entriesOf(t, h, k); !maps.Equal(got, w) {
					t.Fatalf("bound before restore %v, instance %d: All(%d) = %v, want %v", before, i, k, got, w)
				}
			}
			bs := newCow(t, runtime.StoreConfig{MaxParallelism: maxP, KeyGroups: groups})
			check(t, bs.Restore(snap))
			a, b := must[runtime.Snapshot](t)(dst.Snapshot()), must[runtime.Snapshot](t)(bs.Snapshot())
			if d := cmp.Diff(must[storetest.Contents](t)(storetest.Dump(b)), must[storetest.Contents](t)(storetest.Dump(a))); d != "" {
				t.Fatalf("restored contents differ (-bytes +typed):\n%s", d)
			}
			// A write to a loaded map, under a live snapshot, leaves the
			// snapshot as it was.
			for k := range want {
				if groups.Contains(runtime.KeyGroupOfHash(runtime.HashKey(runtime.Int64Codec{}.AppendKey(nil, k)), maxP)) {
					check(t, h.Update(k, 0, func(old string, _ bool) string { return old + "!" }))
				}
			}
			if d := cmp.Diff(must[storetest.Contents](t)(storetest.Dump(b)), must[storetest.Contents](t)(storetest.Dump(a))); d != "" {
				t.Fatalf("a snapshot of restored maps changed with a write (-before +after):\n%s", d)
			}
			check(t, errors.Join(a.Release(), b.Release()))
			if err := dst.Restore(snap); !errors.Is(err, runtime.ErrRestoreConflict) {
				t.Fatalf("restore into a loaded table: %v, want ErrRestoreConflict", err)
			}
		}
	}
}

// TestTypedMapsRestoreCorrupt: a checkpoint whose user keys or values do
// not decode as the table's types fails the Restore with ErrCorrupt,
// naming the state, and loads nothing.
func TestTypedMapsRestoreCorrupt(t *testing.T) {
	cfg := runtime.StoreConfig{MaxParallelism: 8}
	for name, d := range map[string]runtime.MapDescriptor[int64, int64, string]{
		"value":    {Name: "maps", Fingerprint: "i64->i64->str", Key: runtime.Int64Codec{}, UserKey: runtime.Int64Codec{}, Value: rawString{}},
		"user key": {Name: "maps", Fingerprint: "i64->i64->str", Key: runtime.Int64Codec{}, UserKey: shortKey{}, Value: runtime.StringCodec{}},
	} {
		src := newCow(t, cfg)
		bad := must[mapHandle](t)(runtime.NewMap(src, d))
		check(t, bad.Put(1, 1, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"))
		snap := must[runtime.Snapshot](t)(src.Snapshot())
		fresh := newCow(t, cfg)
		h := must[mapHandle](t)(runtime.NewMap(fresh, mapDesc(true)))
		err := fresh.Restore(snap)
		if !errors.Is(err, runtime.ErrCorrupt) || !strings.Contains(err.Error(), `"maps"`) || !strings.Contains(err.Error(), name) {
			t.Fatalf("restore of an undecodable %s: %v, want ErrCorrupt naming the state and the %s", name, err, name)
		}
		if empty, err := h.IsEmpty(1); err != nil || !empty {
			t.Fatalf("after a failed restore IsEmpty(1) = %v, %v; want nothing loaded", empty, err)
		}
		check(t, snap.Release())
	}
}

// shortKey encodes an int64 user key in one byte, which Int64Codec does
// not decode.
type shortKey struct{}

func (shortKey) AppendKey(dst []byte, k int64) []byte { return append(dst, byte(k)) }
func (shortKey) DecodeKey(b []byte) (int64, []byte, error) {
	if len(b) == 0 {
		return 0, nil, errors.New("shortKey: empty")
	}
	return int64(b[0]), b[1:], nil
}

// TestTypedMapsRules: a typed map refuses unsafe user key types, is bytes
// where it cannot be a table (a sorted map, a TTL, a sub-keyed map, a
// store that hosts no tables), and keeps the store's rules: no write from
// an iteration or an Update's function, ErrClosed after Close.
func TestTypedMapsRules(t *testing.T) {
	s := newCow(t, runtime.StoreConfig{})
	_, err := runtime.NewMap(s, runtime.MapDescriptor[int64, string, int64]{
		Name: "str", Key: runtime.Int64Codec{}, UserKey: runtime.StringCodec{}, Value: runtime.Int64Codec{},
		Typed: runtime.TypedMaps[int64, string, int64](),
	})
	if !errors.Is(err, runtime.ErrInvalidState) || !strings.Contains(err.Error(), "user key type string") {
		t.Fatalf("a string user key: %v, want ErrInvalidState naming the user key type", err)
	}
	sorted := mapDesc(true)
	sorted.Name = "sorted"
	sm := must[runtime.SortedMap[int64, int64, string]](t)(runtime.NewSortedMap(s, sorted))
	if isTable(t, s, "sorted") {
		t.Fatal("a sorted map is a table")
	}
	check(t, sm.Put(1, 2, "x"))
	if e, ok, err := sm.First(1); err != nil || !ok || e.Key != 2 {
		t.Fatalf("sorted map First = %v %v %v", e, ok, err)
	}

	m := must[mapHandle](t)(runtime.NewMap(s, mapDesc(true)))
	if !isTable(t, s, "maps") {
		t.Fatal("not a table")
	}
	check(t, m.Put(1, 1, "one"))
	for _, err := range m.All(1) {
		check(t, err)
		if err := m.Put(1, 2, "x"); !errors.Is(err, runtime.ErrWriteDuringIteration) {
			t.Fatalf("Put inside All: %v, want ErrWriteDuringIteration", err)
		}
		if got, _, err := m.Get(1, 1); err != nil || got != "one" {
			t.Fatalf("Get inside All: %q, %v", got, err)
		}
	}
	var inner error
	check(t, m.Update(1, 1, func(old string, _ bool) string {
		inner = m.Delete(1, 1)
		return old + "!"
	}))
	if !errors.Is(inner, runtime.ErrWriteDuringIteration) {
		t.Fatalf("Delete inside Update's function: %v, want ErrWriteDuringIteration", inner)
	}
	if got, _, _ := m.Get(1, 1); got != "one!" {
		t.Fatalf("after Update: %q", got)
	}
	check(t, m.Delete(1, 1))
	if empty, err := m.IsEmpty(1); err != nil || !empty {
		t.Fatalf("after the last Delete IsEmpty = %v, %v", empty, err)
	}
	n := 0
	for _, err := range m.AllKeys() {
		check(t, err)
		n++
	}
	if n != 0 {
		t.Fatalf("a map whose last entry was deleted still has its key: %d keys", n)
	}
	check(t, s.Close())
	if _, _, err := m.Get(1, 1); !errors.Is(err, runtime.ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if err := m.Update(1, 1, func(string, bool) string { return "" }); !errors.Is(err, runtime.ErrClosed) {
		t.Fatalf("Update after Close: %v", err)
	}
	for _, err := range m.All(1) {
		if !errors.Is(err, runtime.ErrClosed) {
			t.Fatalf("All after Close: %v", err)
		}
	}
}

// TestTypedSlicesMatchBytes drives a typed Value of []int64 (TypedSlices)
// and a byte one through the same random operations, with snapshots
// scanned while the writes go on: every read answers alike, every
// snapshot holds what the byte store's held, and no slice is shared
// between the table and its callers — changing a slice after Put, or one
// that Get, GetInto or an Update's function was given, changes no state.
func TestTypedSlicesMatchBytes(t *testing.T) {
	cfg := runtime.StoreConfig{MaxParallelism: 8}
	ts, bs := newCow(t, cfg), newCow(t, cfg)
	desc := func(typed bool) runtime.ValueDescriptor[int64, []int64] {
		d := runtime.ValueDescriptor[int64, []int64]{Name: "slices", Key: runtime.Int64Codec{}, Value: storetest.Int64sCodec{}}
		if typed {
			d.Typed = runtime.TypedSlices[int64, int64]()
		}
		return d
	}
	tv := must[runtime.Value[int64, []int64]](t)(runtime.NewValue(ts, desc(true)))
	bv := must[runtime.Value[int64, []int64]](t)(runtime.NewValue(bs, desc(false)))
	if !isTable(t, ts, "slices") {
		t.Fatal("the typed handle's state is not a table")
	}
	w := newTwins(t, ts, bs)
	defer w.wg.Wait()
	var reuse []int64 // GetInto's slice, kept across calls as a caller would
	same := func(op int, what string, a, b []int64) {
		t.Helper()
		if !slices.Equal(a, b) {
			t.Fatalf("op %d: %s: typed %v, bytes %v", op, what, a, b)
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 20000 {
		k := rng.Int64N(50)
		val := make([]int64, rng.IntN(6))
		for j := range val {
			val[j] = rng.Int64N(1000)
		}
		switch op := rng.IntN(100); {
		case op < 30:
			check(t, tv.Put(k, val))
			check(t, bv.Put(k, val))
			if len(val) > 0 {
				val[0] = -1 // the caller's slice, not the table's
			}
		case op < 45:
			for _, h := range []runtime.Value[int64, []int64]{tv, bv} {
				check(t, h.Update(k, func(old []int64, found bool) []int64 {
					if len(old) > 0 {
						old[0]++ // fn may change what it is given
					}
					return append(old, int64(i))
				}))
			}
		case op < 55:
			check(t, tv.Delete(k))
			check(t, bv.Delete(k))
		case op < 75:
			a, fa, errA := tv.Get(k)
			b, fb, errB := bv.Get(k)
			check(t, errors.Join(errA, errB))
			same(i, "Get", a, b)
			if fa != fb {
				t.Fatalf("op %d: Get(%d) found: typed %v, bytes %v", i, k, fa, fb)
			}
			if len(a) > 0 {
				a[0] = -2
			}
		case op < 95:
			fa, errA := tv.GetInto(k, &reuse)
			var b []int64
			fb, errB := bv.GetInto(k, &b)
			check(t, errors.Join(errA, errB))
			if fa != fb || fa && !slices.Equal(reuse, b) {
				t.Fatalf("op %d: GetInto(%d): typed %v %v, bytes %v %v", i, k, reuse, fa, b, fb)
			}
			if fa && len(reuse) > 0 {
				reuse[0] = -3
			}
		case op < 97 && len(w.live) < 3:
			w.snapshot()
		case len(w.live) > 0:
			w.release(i, rng.IntN(len(w.live)))
		}
	}
	w.finish()
	// An element type that may not be a table's value is refused.
	_, err := runtime.NewValue(ts, runtime.ValueDescriptor[int64, [][]int64]{Name: "nested", Key: runtime.Int64Codec{}, Value: nopCodec[[][]int64]{},
		Typed: runtime.TypedSlices[int64, []int64]()})
	if !errors.Is(err, runtime.ErrInvalidState) || !strings.Contains(err.Error(), "[]int64") {
		t.Fatalf("slices of slices: %v, want ErrInvalidState naming []int64", err)
	}
}

// badWord is Int64Codec with a KeyWord that forgets the sign bit: its
// words are not its encodings.
type badWord struct{ runtime.Int64Codec }

func (badWord) KeyWord(v int64) uint64 { return uint64(v) }

// TestKeyWordMustBeTheEncoding: a key or user key codec whose KeyWord is
// not its encoding would hash keys into other key groups than their
// bytes; binding refuses it, naming the state and the codec, and
// registers nothing.
func TestKeyWordMustBeTheEncoding(t *testing.T) {
	s := newCow(t, runtime.StoreConfig{})
	vd := runtime.ValueDescriptor[int64, string]{Name: "v", Key: badWord{}, Value: runtime.StringCodec{}, Typed: runtime.TypedValues[int64, string]()}
	md := mapDesc(true)
	md.UserKey = badWord{}
	_, errV := runtime.NewValue(s, vd)
	_, errM := runtime.NewMap(s, md)
	for _, c := range []struct {
		err          error
		state, codec string
	}{{errV, `"v"`, "key codec"}, {errM, `"maps"`, "user key codec"}} {
		if !errors.Is(c.err, runtime.ErrInvalidState) || !strings.Contains(c.err.Error(), c.state) ||
			!strings.Contains(c.err.Error(), c.codec+" runtime_test.badWord") {
			t.Errorf("binding a %s whose KeyWord is not its encoding: %v; want ErrInvalidState naming state %s and the codec", c.codec, c.err, c.state)
		}
	}
	if n := len(s.States()); n != 0 {
		t.Errorf("the refused states left %d registered", n)
	}
}
