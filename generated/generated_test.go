package generated

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/stategen/stategen/backends/btree"
	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/backends/pebble"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/checkpoint/inspect"
	"github.com/stategen/stategen/generated/geo"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

// TestStructKeyOrder checks by hand, on a table of keys in logical order,
// that the generated key codec of a struct orders by its fields in
// declaration order: by Start, then by End.
func TestStructKeyOrder(t *testing.T) {
	sorted := []Window{
		{math.MinInt64, 0}, {-10, -20}, {-10, 5}, {-1, math.MaxInt64},
		{0, math.MinInt64}, {0, 0}, {1, -1}, {math.MaxInt64, math.MinInt64},
	}
	var c WindowCodec
	var prev []byte
	for i, w := range sorted {
		b := c.AppendKey(nil, w)
		if i > 0 && bytes.Compare(prev, b) >= 0 {
			t.Errorf("%+v encodes as %x, not after %+v's %x", w, b, sorted[i-1], prev)
		}
		prev = b
	}
}

// TestSessionKeyOrderByField changes one field at a time and checks that
// the first differing field decides the order, including strings that are
// prefixes of each other, NUL bytes and negative numbers.
func TestSessionKeyOrderByField(t *testing.T) {
	base := SessionKey{User: "ann", Day: 3, Weight: 1.5, At: time.Unix(100, 0), ID: [4]byte{1, 2, 3, 4}, Raw: []byte("r"), Span: time.Second, Shard: 7, Color: Green}
	var c SessionKeyCodec
	less := []struct {
		name string
		a, b func(*SessionKey)
	}{
		{"User prefix", func(k *SessionKey) { k.User = "an" }, func(k *SessionKey) { k.User = "ann" }},
		{"User NUL", func(k *SessionKey) { k.User = "a" }, func(k *SessionKey) { k.User = "a\x00" }},
		{"Day negative", func(k *SessionKey) { k.Day = -1; k.User = "b" }, func(k *SessionKey) { k.Day = 0; k.User = "b" }},
		{"Weight NaN first", func(k *SessionKey) { k.Weight = math.NaN() }, func(k *SessionKey) { k.Weight = math.Inf(-1) }},
		{"Weight sign", func(k *SessionKey) { k.Weight = -0.5 }, func(k *SessionKey) { k.Weight = 0.25 }},
		{"At", func(k *SessionKey) { k.At = time.Unix(-5, 999) }, func(k *SessionKey) { k.At = time.Unix(-5, 1000) }},
		{"Active", func(k *SessionKey) { k.Active = false }, func(k *SessionKey) { k.Active = true }},
		{"ID", func(k *SessionKey) { k.ID[3] = 4 }, func(k *SessionKey) { k.ID[3] = 5 }},
		{"Raw prefix", func(k *SessionKey) { k.Raw = []byte("r") }, func(k *SessionKey) { k.Raw = []byte("r\x00") }},
		{"Color last", func(k *SessionKey) { k.Color = Red }, func(k *SessionKey) { k.Color = Blue }},
	}
	for _, tc := range less {
		a, b := base, base
		tc.a(&a)
		tc.b(&b)
		ea, eb := c.AppendKey(nil, a), c.AppendKey(nil, b)
		if bytes.Compare(ea, eb) >= 0 {
			t.Errorf("%s: %x is not below %x", tc.name, ea, eb)
		}
	}
}

// TestFloatKeysAreCanonical checks the documented float key policy: every
// NaN is one key, and -0 is +0.
func TestFloatKeysAreCanonical(t *testing.T) {
	var c stategenCodecGeoPoint
	nan2 := math.Float64frombits(math.Float64bits(math.NaN()) ^ 1)
	if a, b := c.AppendKey(nil, geo.Point{Lat: math.NaN()}), c.AppendKey(nil, geo.Point{Lat: nan2}); !bytes.Equal(a, b) {
		t.Errorf("two NaNs encode differently: %x, %x", a, b)
	}
	if a, b := c.AppendKey(nil, geo.Point{Lon: math.Copysign(0, -1)}), c.AppendKey(nil, geo.Point{}); !bytes.Equal(a, b) {
		t.Errorf("-0 and +0 encode differently: %x, %x", a, b)
	}
}

// TestNilAndEmptyArePreserved checks that values keep nil apart from empty
// slices, maps and []byte, and nil pointers apart from pointers to zero.
func TestNilAndEmptyArePreserved(t *testing.T) {
	var c AggCodec
	zero := int64(0)
	for _, v := range []Agg{
		{},
		{Colors: []Color{}, Levels: Tags{}, ByColor: map[Color][]string{}, Blob: Blob{}, Maybe: &zero, Extra: &Extra{}},
	} {
		got, _, err := c.DecodeValue(c.AppendValue(nil, v))
		if err != nil {
			t.Fatal(err)
		}
		if (got.Colors == nil) != (v.Colors == nil) || (got.Levels == nil) != (v.Levels == nil) ||
			(got.ByColor == nil) != (v.ByColor == nil) || (got.Blob == nil) != (v.Blob == nil) ||
			(got.Maybe == nil) != (v.Maybe == nil) || (got.Extra == nil) != (v.Extra == nil) {
			t.Errorf("nil-ness changed: %#v became %#v", v, got)
		}
	}
}

// TestCorruptInputIsRejected checks a few corruptions by hand: each fails
// with an error wrapping runtime.ErrCorrupt that names the field.
func TestCorruptInputIsRejected(t *testing.T) {
	var c EventCodec
	good := c.AppendValue(nil, Event{ID: 1, Name: "n", Tags: []string{"a"}, Counts: map[string]int64{"k": 1}})
	cases := map[string][]byte{
		"truncated": good[:len(good)-1],
		// ID 0, Name "", At, then a tag count of 2^28-2 in a few bytes.
		"huge tags": append(runtime.AppendTimeValue([]byte{0, 0}, time.Time{}), 0xff, 0xff, 0xff, 0x7f, 0),
		"empty":     nil,
	}
	for name, b := range cases {
		if _, _, err := c.DecodeValue(b); !errors.Is(err, runtime.ErrCorrupt) {
			t.Errorf("%s: %x: got %v, want ErrCorrupt", name, b, err)
		}
	}
	// A duplicate map key.
	dup := c.AppendValue(nil, Event{Counts: map[string]int64{"k": 1}})
	dup = append(dup[:len(dup)-4], 3, 1, 'k', 2, 1, 'k', 2)
	if _, _, err := c.DecodeValue(dup); !errors.Is(err, runtime.ErrCorrupt) {
		t.Errorf("duplicate map key: got %v, want ErrCorrupt", err)
	}
}

// TestOpenBindsEveryState opens both example state structs on the
// reference store, uses a state of every kind, and checks that opening
// them again is accepted while a conflicting declaration is refused.
func TestOpenBindsEveryState(t *testing.T) {
	store, err := storetest.NewModel(runtime.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	cs, err := OpenClickState(store)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := OpenWindowState(store)
	if err != nil {
		t.Fatal(err)
	}
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	ev := Event{ID: 7, Name: "e", At: time.Unix(5, 6).UTC(), Tags: []string{"t"}, Counts: map[string]int64{"c": 1}}
	check(cs.Clicks.Put("u", 3))
	check(cs.Last.Put("u", ev))
	check(cs.History.AddAll("u", []Event{ev, ev}))
	check(cs.Pages.Put("u", "/p", 9))
	check(cs.Timeline.Put(1, ev.At, ev))
	w := Window{Start: 0, End: 10}
	check(ws.Aggs.Put("u", w, Agg{Min: 1, Pair: geo.Pair[string, int64]{First: "f", Second: 2}}))
	key := SessionKey{User: "u", Raw: []byte{0}}
	check(ws.Samples.Add(key, w, Scalars{S: "s", Bs: []byte{}}))
	check(ws.Seen.Put(9, w, key, Blue))
	for _, f := range []float64{2, math.Inf(-1), 0.5} {
		check(ws.Ranked.Put("info", 1, f, []byte{byte(f)}))
	}
	check(ws.Places.Put(geo.Point{Lat: 1}, [16]byte{1}, geo.Pair[Level, Blob]{First: "x"}))
	check(ws.Sessions.Put(key, &Agg{}))
	check(ws.Durs.Add(time.Minute, map[string][]*float64{"a": nil}))

	if got, ok, err := cs.Last.Get("u"); err != nil || !ok || !gocmp.Equal(got, ev) {
		t.Errorf("Last.Get = %v, %v, %v; want %v", got, ok, err, ev)
	}
	var ranked []float64
	for e, err := range ws.Ranked.All("info", 1) {
		check(err)
		ranked = append(ranked, e.Key)
	}
	if want := []float64{math.Inf(-1), 0.5, 2}; !slices.Equal(ranked, want) {
		t.Errorf("sorted map order %v, want %v", ranked, want)
	}
	if c, ok, err := ws.Seen.Get(9, w, key); err != nil || !ok || c != Blue {
		t.Errorf("Seen.Get = %v, %v, %v", c, ok, err)
	}

	if _, err := OpenClickState(store); err != nil {
		t.Errorf("reopening with the same schemas: %v", err)
	}
	// A state of the same name with another schema is refused.
	if _, err := runtime.NewValue(store, runtime.ValueDescriptor[string, string]{
		Name: "clicks", Fingerprint: "v1:other", Key: runtime.StringCodec{}, Value: runtime.StringCodec{},
	}); !errors.Is(err, runtime.ErrStateMismatch) {
		t.Errorf("registering clicks with another schema: %v, want ErrStateMismatch", err)
	}
}

// TestHugeCountErrorNamesTheField: a count the input cannot hold is
// refused before anything is allocated, with the runtime's own wording (the
// generated code calls the runtime's error helpers), prefixed by the field.
func TestHugeCountErrorNamesTheField(t *testing.T) {
	b := append(runtime.AppendTimeValue([]byte{0, 0}, time.Time{}), 0xff, 0xff, 0xff, 0x7f, 0)
	_, _, err := EventCodec{}.DecodeValue(b)
	const want = "Event.Tags: stategen: corrupt encoding: []string: count 268435454 exceeds the 1 remaining bytes"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

// TestGeneratedTimers: a runtime.Timers field is bound by Open with the
// codecs of its key and namespace types, fires in (time, key, namespace)
// order, and survives a checkpoint written and restored by package
// checkpoint at another parallelism (its schema, recorded in the
// checkpoint, is the one the generator derives).
func TestGeneratedTimers(t *testing.T) {
	ctx := context.Background()
	src, err := cow.New(cow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ws, err := OpenWindowState(src)
	if err != nil {
		t.Fatal(err)
	}
	type fired = runtime.Timer[SessionKey, Window]
	var want []fired
	for i := range 40 {
		tm := fired{Time: int64(i % 7), Key: SessionKey{User: fmt.Sprint("u", i), Day: int32(i), Raw: []byte{}}, Namespace: Window{Start: int64(i), End: int64(i + 10)}}
		if err := ws.Fire.Register(tm.Time, tm.Key, tm.Namespace); err != nil {
			t.Fatal(err)
		}
		want = append(want, tm)
	}
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	dir, err := checkpoint.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	in, err := checkpoint.WriteInstance(ctx, dir, "chk-1", "op-0.sgc", snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	op, err := checkpoint.NewOperator("op", in)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Commit(ctx, dir, "chk-1", &checkpoint.Metadata{Operators: []checkpoint.Operator{op}}); err != nil {
		t.Fatal(err)
	}
	var got []fired
	for i := range 2 {
		r, err := runtime.KeyGroupRangeForOperator(runtime.DefaultMaxParallelism, 2, i)
		if err != nil {
			t.Fatal(err)
		}
		store, err := storetest.NewModel(runtime.StoreConfig{KeyGroups: r})
		if err != nil {
			t.Fatal(err)
		}
		ws2, err := OpenWindowState(store)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := checkpoint.Restore(ctx, dir, "chk-1", "op", i, 2, store, nil); err != nil {
			t.Fatal(err)
		}
		if err := ws2.Fire.Advance(100, func(tm fired) error { got = append(got, tm); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	order := func(a, b fired) int {
		return cmp.Or(cmp.Compare(a.Time, b.Time), cmp.Compare(a.Key.User, b.Key.User))
	}
	slices.SortFunc(want, order)
	slices.SortFunc(got, order)
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("timers fired after the restore (-want +got):\n%s", diff)
	}
}

// TestGeneratedTTL: the tag options ttl= and ttlupdate= reach the
// descriptors, and a generated state expires through a checkpoint
// restored at parallelism 2 on the pebble backend: what was live at the
// snapshot restores with its stamp, and expires when it would have.
func TestGeneratedTTL(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewManualClock(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	src, err := cow.New(cow.Options{StoreConfig: runtime.StoreConfig{Clock: clock}})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	es, err := OpenExpiringState(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		spec runtime.StateSpec
		ttl  time.Duration
	}{{es.LastSeen.Spec(), 30 * time.Minute}, {es.Views.Spec(), 24 * time.Hour}, {es.Recent.Spec(), 90 * time.Minute}} {
		if c.spec.TTL != c.ttl {
			t.Errorf("state %s, want TTL %v", c.spec, c.ttl)
		}
	}
	users := []string{"ann", "bob", "cy", "dee", "eve", "fay"}
	for i, u := range users {
		if err := es.LastSeen.Put(u, Event{ID: int64(i), Name: u}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(5 * time.Minute) // ann at +0, ..., fay at +25m
	}
	clock.Advance(9 * time.Minute) // +39m: ann and bob (+0, +5m) have expired
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	dir, err := checkpoint.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	in, err := checkpoint.WriteInstance(ctx, dir, "chk-1", "op-0.sgc", snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	if in.File.Entries != int64(len(users)-2) {
		t.Errorf("the checkpoint holds %d entries, want %d: the expired ones stay out", in.File.Entries, len(users)-2)
	}
	op, err := checkpoint.NewOperator("op", in)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Commit(ctx, dir, "chk-1", &checkpoint.Metadata{Operators: []checkpoint.Operator{op}}); err != nil {
		t.Fatal(err)
	}
	// inspect reads the values without their stamps, and reports when
	// each was last updated.
	c, err := inspect.OpenStorage(ctx, dir, "chk-1")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for r, err := range inspect.Read(ctx, c, "op", "last-seen", inspect.Codecs[string, struct{}, struct{}, Event]{Key: runtime.StringCodec{}, Value: DescribeExpiringState().LastSeen.Value}) {
		if err != nil {
			t.Fatal(err)
		}
		i := slices.Index(users, r.Key)
		if r.Value.Name != r.Key || !r.Updated.Equal(time.Date(2026, 12, 2, 9, 5*i, 0, 0, time.UTC)) {
			t.Errorf("inspect.Read: %+v, want the event of %q updated at +%dm", r, r.Key, 5*i)
		}
		n++
	}
	if n != len(users)-2 {
		t.Errorf("inspect.Read read %d entries, want %d", n, len(users)-2)
	}
	var restored []*ExpiringState
	for i := range 2 {
		r, err := runtime.KeyGroupRangeForOperator(runtime.DefaultMaxParallelism, 2, i)
		if err != nil {
			t.Fatal(err)
		}
		store, err := pebble.New(pebble.Options{StoreConfig: runtime.StoreConfig{KeyGroups: r, Clock: clock}, InMemory: true})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		es2, err := OpenExpiringState(store)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := checkpoint.Restore(ctx, dir, "chk-1", "op", i, 2, store, nil); err != nil {
			t.Fatal(err)
		}
		restored = append(restored, es2)
	}
	live := func() []string {
		var out []string
		for _, u := range users {
			idx, err := runtime.OperatorIndexForKey(runtime.StringCodec{}.AppendKey(nil, u), runtime.DefaultMaxParallelism, 2)
			if err != nil {
				t.Fatal(err)
			}
			e, ok, err := restored[idx].LastSeen.Get(u)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				if e.Name != u {
					t.Fatalf("LastSeen.Get(%q) = %+v", u, e)
				}
				out = append(out, u)
			}
		}
		return out
	}
	if got := live(); !slices.Equal(got, users[2:]) {
		t.Errorf("after the restore at +39m: live %v, want %v", got, users[2:])
	}
	clock.Advance(10 * time.Minute) // +49m: cy (+10m) and dee (+15m) expire
	if got := live(); !slices.Equal(got, users[4:]) {
		t.Errorf("at +49m: live %v, want %v", got, users[4:])
	}
}

// TestGeneratedOperatorLists: the generated OpenSourceState binds typed
// operator lists whose elements travel in the instances' operator-state
// blobs; after a rescale from 2 to 3 instances the positions are split
// evenly, every instance has every pending commit, and each element knows
// the old instance it came from.
func TestGeneratedOperatorLists(t *testing.T) {
	ctx := context.Background()
	dir, err := checkpoint.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var snaps []checkpoint.InstanceSnapshot
	for i := range 2 {
		r, _ := runtime.KeyGroupRangeForOperator(runtime.DefaultMaxParallelism, 2, i)
		store, err := btree.New(btree.Options{StoreConfig: runtime.StoreConfig{KeyGroups: r}})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		// What the driver's Instance holds for the instance's life.
		ops := runtime.OperatorStatesOf(store)
		ss, err := OpenSourceState(store)
		if err != nil {
			t.Fatal(err)
		}
		for p := range 3 {
			ss.Positions.Add(Position{Partition: int32(3*i + p), Offset: int64(1000*i + p)})
		}
		ss.Pending.Add(Event{ID: int64(i), Name: fmt.Sprint("txn-", i), Tags: []string{}, Counts: map[string]int64{}})
		snap, err := store.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		in, err := checkpoint.WriteInstance(ctx, dir, "chk-1", fmt.Sprintf("op-%d.sgc", i), snap, nil)
		snap.Release()
		if err != nil {
			t.Fatal(err)
		}
		in.OperatorState = ops.Encode(nil)
		snaps = append(snaps, in)
	}
	op, err := checkpoint.NewOperator("op", snaps...)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Commit(ctx, dir, "chk-1", &checkpoint.Metadata{Operators: []checkpoint.Operator{op}}); err != nil {
		t.Fatal(err)
	}
	var partitions []int32
	for i := range 3 {
		r, _ := runtime.KeyGroupRangeForOperator(runtime.DefaultMaxParallelism, 3, i)
		store, err := cow.New(cow.Options{StoreConfig: runtime.StoreConfig{KeyGroups: r}})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		ss, err := OpenSourceState(store)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := checkpoint.Restore(ctx, dir, "chk-1", "op", i, 3, store, nil); err != nil {
			t.Fatal(err)
		}
		pos := ss.Positions.Elements()
		if len(pos) != 2 {
			t.Errorf("instance %d of 3 has %d positions, want 2 of the 6", i, len(pos))
		}
		for _, p := range pos {
			if int(p.Value.Partition)/3 != p.Origin || p.Value.Offset != int64(1000*p.Origin)+int64(p.Value.Partition%3) {
				t.Errorf("instance %d: position %+v", i, p)
			}
			partitions = append(partitions, p.Value.Partition)
		}
		pending := ss.Pending.Elements()
		if len(pending) != 2 || pending[0].Value.Name != "txn-0" || pending[1].Origin != 1 || pending[1].Value.Name != "txn-1" {
			t.Errorf("instance %d: pending %+v, want both old instances' commits", i, pending)
		}
	}
	if !slices.Equal(partitions, []int32{0, 1, 2, 3, 4, 5}) {
		t.Errorf("the new instances read partitions %v, want each of 0..5 once", partitions)
	}
}

// TestDefinedInt64KeysHashFromValues binds LedgerState, whose keys and user
// keys are a defined int64 kept as Go values on cow and hashed from their
// values (AccountIDCodec's KeyWord), on the cow store of one instance of
// two: a key is written and read back exactly when the key group of its
// encoding — the byte handles' and every checkpoint's — is the instance's.
func TestDefinedInt64KeysHashFromValues(t *testing.T) {
	r, _ := runtime.KeyGroupRangeForOperator(runtime.DefaultMaxParallelism, 2, 1)
	store, err := cow.New(cow.Options{StoreConfig: runtime.StoreConfig{KeyGroups: r}})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ls, err := OpenLedgerState(store)
	if err != nil {
		t.Fatal(err)
	}
	owned := func(id AccountID) bool {
		enc := AccountIDCodec{}.AppendKey(nil, id)
		return r.Contains(runtime.KeyGroupOfHash(runtime.HashKey(enc), runtime.DefaultMaxParallelism))
	}
	for _, id := range []AccountID{0, 1, -1, 42, 1 << 40, math.MinInt64, math.MaxInt64} {
		errV := ls.Balance.Put(id, int64(id)+1)
		errM := ls.Sent.Put(id, 7, int64(id)+2)
		if owned(id) {
			if errV != nil || errM != nil {
				t.Fatalf("account %d, in the instance's key groups: Put: %v, %v", id, errV, errM)
			}
			b, okB, errB := ls.Balance.Get(id)
			s, okS, errS := ls.Sent.Get(id, 7)
			if b != int64(id)+1 || s != int64(id)+2 || !okB || !okS || errB != nil || errS != nil {
				t.Errorf("account %d: Balance %d %v %v, Sent %d %v %v", id, b, okB, errB, s, okS, errS)
			}
			continue
		}
		if !errors.Is(errV, runtime.ErrKeyGroupNotOwned) || !errors.Is(errM, runtime.ErrKeyGroupNotOwned) {
			t.Errorf("account %d, in another instance's key groups: Put: %v, %v; want ErrKeyGroupNotOwned", id, errV, errM)
		}
	}
}
