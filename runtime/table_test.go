package runtime_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stategen/stategen/backends/btree"
	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

// typedDesc is the descriptor of the typed-path tests' state: int64 keys,
// string values, kept as Go values where the store can (typed).
func typedDesc(typed bool) runtime.ValueDescriptor[int64, string] {
	d := runtime.ValueDescriptor[int64, string]{
		Name: "vals", Fingerprint: "i64->str", Key: runtime.Int64Codec{}, Value: runtime.StringCodec{},
	}
	if typed {
		d.Typed = runtime.TypedValues[int64, string]()
	}
	return d
}

func newCow(t *testing.T, cfg runtime.StoreConfig) *cow.Store {
	t.Helper()
	s, err := cow.New(cow.Options{StoreConfig: cfg})
	check(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func isTable(t *testing.T, s runtime.Store, name string) bool {
	t.Helper()
	for _, spec := range s.States() {
		if spec.Name == name {
			st, err := s.Register(spec)
			check(t, err)
			_, ok := st.(runtime.Table)
			return ok
		}
	}
	t.Fatalf("no state %q", name)
	return false
}

// twins tracks the snapshots of a test that drives a typed store (ts) and
// a byte store (bs) through the same operations: each snapshot of ts is
// taken with bs's contents at the same moment, scanned on another
// goroutine while the writes go on, compared again when it is released
// (out of order), and the stores are compared at the end.
type twins struct {
	t       *testing.T
	ts, bs  runtime.Store
	live    []twin
	wg      sync.WaitGroup
	scanned chan error
}

type twin struct {
	ts   runtime.Snapshot
	want storetest.Contents // bs's snapshot, dumped at once
}

func newTwins(t *testing.T, ts, bs runtime.Store) *twins {
	return &twins{t: t, ts: ts, bs: bs, scanned: make(chan error, 10000)}
}

// snapshot takes a snapshot of both stores and scans ts's at once, on
// another goroutine.
func (w *twins) snapshot() {
	t := w.t
	p := twin{ts: must[runtime.Snapshot](t)(w.ts.Snapshot())}
	bsnap := must[runtime.Snapshot](t)(w.bs.Snapshot())
	p.want = must[storetest.Contents](t)(storetest.Dump(bsnap))
	check(t, bsnap.Release())
	w.wg.Add(1)
	go func(v runtime.View, want storetest.Contents) {
		defer w.wg.Done()
		c, err := storetest.Dump(v)
		if err == nil {
			if d := cmp.Diff(want, c); d != "" {
				err = errors.New("snapshot scanned while writing differs (-bytes +typed):\n" + d)
			}
		}
		w.scanned <- err
	}(p.ts, p.want)
	w.live = append(w.live, p)
}

// release checks and releases the j-th live snapshot, once every scan is
// over.
func (w *twins) release(op, j int) {
	t := w.t
	t.Helper()
	p := w.live[j]
	w.wg.Wait()
	if d := cmp.Diff(p.want, must[storetest.Contents](t)(storetest.Dump(p.ts))); d != "" {
		t.Fatalf("op %d: a snapshot changed after it was taken (-bytes +typed):\n%s", op, d)
	}
	check(t, p.ts.Release())
	w.live = append(w.live[:j], w.live[j+1:]...)
}

// finish checks every scan and live snapshot, releases them, and compares
// the stores.
func (w *twins) finish() {
	t := w.t
	t.Helper()
	w.wg.Wait()
	close(w.scanned)
	for err := range w.scanned {
		check(t, err)
	}
	for len(w.live) > 0 {
		w.release(-1, 0)
	}
	a, b := must[runtime.Snapshot](t)(w.ts.Snapshot()), must[runtime.Snapshot](t)(w.bs.Snapshot())
	if d := cmp.Diff(must[storetest.Contents](t)(storetest.Dump(b)), must[storetest.Contents](t)(storetest.Dump(a))); d != "" {
		t.Fatalf("final contents differ (-bytes +typed):\n%s", d)
	}
	check(t, errors.Join(a.Release(), b.Release()))
}

// TestTypedValuesMatchBytes drives a typed Value on cow (a hosted table of
// Go values) and a byte Value on another cow store through the same random
// operations, with snapshots taken, scanned on other goroutines while the
// writes go on, and released out of order: every read answers alike, and
// every snapshot holds exactly what the byte store's snapshot of the same
// moment holds — the copy-on-write of the maps keeps a snapshot what it
// was, whatever is written after it.
func TestTypedValuesMatchBytes(t *testing.T) {
	cfg := runtime.StoreConfig{MaxParallelism: 16}
	ts, bs := newCow(t, cfg), newCow(t, cfg)
	tv := must[runtime.Value[int64, string]](t)(runtime.NewValue(ts, typedDesc(true)))
	bv := must[runtime.Value[int64, string]](t)(runtime.NewValue(bs, typedDesc(false)))
	if !isTable(t, ts, "vals") || isTable(t, bs, "vals") {
		t.Fatal("the typed handle's state is not a table, or the byte handle's is")
	}
	w := newTwins(t, ts, bs)
	defer w.wg.Wait()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		k := rng.Int64N(300)
		val := strings.Repeat("v", rng.IntN(4)) + string(rune('a'+i%26))
		switch op := rng.IntN(100); {
		case op < 35:
			check(t, tv.Put(k, val))
			check(t, bv.Put(k, val))
		case op < 45:
			fn := func(old string, found bool) string {
				if found {
					return old + val
				}
				return val
			}
			check(t, tv.Update(k, fn))
			check(t, bv.Update(k, fn))
		case op < 55:
			check(t, tv.Delete(k))
			check(t, bv.Delete(k))
		case op < 60:
			a, errA := tv.Contains(k)
			b, errB := bv.Contains(k)
			check(t, errors.Join(errA, errB))
			if a != b {
				t.Fatalf("op %d: Contains(%d): typed %v, bytes %v", i, k, a, b)
			}
		case op < 98:
			a, fa, errA := tv.Get(k)
			b, fb, errB := bv.Get(k)
			check(t, errors.Join(errA, errB))
			if a != b || fa != fb {
				t.Fatalf("op %d: Get(%d): typed %q %v, bytes %q %v", i, k, a, fa, b, fb)
			}
		case op < 99 && len(w.live) < 4:
			w.snapshot()
		case len(w.live) > 0:
			w.release(i, rng.IntN(len(w.live)))
		}
	}
	w.finish()
}

// TestTypedValuesRestore restores a snapshot of a typed state into stores
// of two instances (a rescale), one whose handle is bound before the
// Restore (the table loads the entries) and one after it (the restored
// byte state becomes a table): both read what was written, each its own
// key groups only; and a store restored from the typed snapshot holds what
// a byte store restored from it holds.
func TestTypedValuesRestore(t *testing.T) {
	const maxP = 32
	src := newCow(t, runtime.StoreConfig{MaxParallelism: maxP})
	v := must[runtime.Value[int64, string]](t)(runtime.NewValue(src, typedDesc(true)))
	want := map[int64]string{}
	for k := range int64(1000) {
		want[k] = strings.Repeat("x", int(k%7))
		check(t, v.Put(k, want[k]))
	}
	snap := must[runtime.Snapshot](t)(src.Snapshot())
	defer snap.Release()
	for _, before := range []bool{true, false} {
		for i := range 2 {
			groups := must[runtime.KeyGroupRange](t)(runtime.KeyGroupRangeForOperator(maxP, 2, i))
			dst := newCow(t, runtime.StoreConfig{MaxParallelism: maxP, KeyGroups: groups})
			var h runtime.Value[int64, string]
			if before {
				h = must[runtime.Value[int64, string]](t)(runtime.NewValue(dst, typedDesc(true)))
			}
			check(t, dst.Restore(snap))
			if !before {
				h = must[runtime.Value[int64, string]](t)(runtime.NewValue(dst, typedDesc(true)))
			}
			if !isTable(t, dst, "vals") {
				t.Fatalf("bound before restore %v: the state is not a table", before)
			}
			for k, w := range want {
				got, found, err := h.Get(k)
				if groups.Contains(runtime.KeyGroupOfHash(runtime.HashKey(runtime.Int64Codec{}.AppendKey(nil, k)), maxP)) {
					check(t, err)
					if !found || got != w {
						t.Fatalf("bound before restore %v, instance %d: Get(%d) = %q %v, want %q", before, i, k, got, found, w)
					}
				} else if !errors.Is(err, runtime.ErrKeyGroupNotOwned) {
					t.Fatalf("instance %d: Get(%d) of another instance's key: %v, want ErrKeyGroupNotOwned", i, k, err)
				}
			}
			// The restored store's snapshot holds what a byte store
			// restored from the same snapshot holds.
			bs := newCow(t, runtime.StoreConfig{MaxParallelism: maxP, KeyGroups: groups})
			check(t, bs.Restore(snap))
			a, b := must[runtime.Snapshot](t)(dst.Snapshot()), must[runtime.Snapshot](t)(bs.Snapshot())
			if d := cmp.Diff(must[storetest.Contents](t)(storetest.Dump(b)), must[storetest.Contents](t)(storetest.Dump(a))); d != "" {
				t.Fatalf("restored contents differ (-bytes +typed):\n%s", d)
			}
			check(t, errors.Join(a.Release(), b.Release()))
			// A second restore of the same key groups conflicts.
			if err := dst.Restore(snap); !errors.Is(err, runtime.ErrRestoreConflict) {
				t.Fatalf("restore into a loaded table: %v, want ErrRestoreConflict", err)
			}
		}
	}
}

// TestTypedValuesRestoreCorrupt: a checkpoint whose bytes do not decode as
// the table's types fails the Restore with ErrCorrupt, naming the state,
// and leaves the table as it was; so does the adoption of such a restored
// state by a typed handle, which then fails to bind.
func TestTypedValuesRestoreCorrupt(t *testing.T) {
	cfg := runtime.StoreConfig{MaxParallelism: 8}
	src := newCow(t, cfg)
	bad := must[runtime.Value[int64, string]](t)(runtime.NewValue(src, runtime.ValueDescriptor[int64, string]{
		Name: "vals", Fingerprint: "i64->str", Key: runtime.Int64Codec{}, Value: rawString{},
	}))
	check(t, bad.Put(1, "ok"))
	check(t, bad.Put(2, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff")) // not a StringCodec value
	snap := must[runtime.Snapshot](t)(src.Snapshot())
	defer snap.Release()

	fresh := newCow(t, cfg)
	hf := must[runtime.Value[int64, string]](t)(runtime.NewValue(fresh, typedDesc(true)))
	err := fresh.Restore(snap)
	if !errors.Is(err, runtime.ErrCorrupt) || !strings.Contains(err.Error(), `"vals"`) {
		t.Fatalf("restore of undecodable values: %v, want ErrCorrupt naming the state", err)
	}
	if _, found, err := hf.Get(1); err != nil || found {
		t.Fatalf("after a failed restore Get(1) = %v, %v; want nothing loaded", found, err)
	}

	adopt := newCow(t, cfg)
	check(t, adopt.Restore(snap))
	if _, err := runtime.NewValue(adopt, typedDesc(true)); !errors.Is(err, runtime.ErrCorrupt) {
		t.Fatalf("binding a typed handle to an undecodable restored state: %v, want ErrCorrupt", err)
	}
	// The restored state is still there, as bytes.
	hb := must[runtime.Value[int64, string]](t)(runtime.NewValue(adopt, runtime.ValueDescriptor[int64, string]{
		Name: "vals", Fingerprint: "i64->str", Key: runtime.Int64Codec{}, Value: rawString{},
	}))
	if got, found, err := hb.Get(1); err != nil || !found || got != "ok" {
		t.Fatalf("the restored state after a failed adoption: Get(1) = %q %v %v", got, found, err)
	}
}

// rawString is a value codec of strings as their bytes, which StringCodec
// does not read.
type rawString struct{}

func (rawString) AppendValue(dst []byte, v string) []byte { return append(dst, v...) }
func (rawString) DecodeValue(b []byte) (string, []byte, error) {
	return string(b), nil, nil
}

// TestTypedValuesShareState: a typed handle and a byte handle of one state
// on one store see each other's writes, whichever binds first: a state a
// handle holds is never changed under it (the second handle gets the same
// state, a table or bytes), and a table answers byte-level calls.
func TestTypedValuesShareState(t *testing.T) {
	for _, typedFirst := range []bool{true, false} {
		s := newCow(t, runtime.StoreConfig{})
		first := must[runtime.Value[int64, string]](t)(runtime.NewValue(s, typedDesc(typedFirst)))
		second := must[runtime.Value[int64, string]](t)(runtime.NewValue(s, typedDesc(!typedFirst)))
		if isTable(t, s, "vals") != typedFirst {
			t.Fatalf("typed first %v: the state is a table: %v", typedFirst, !typedFirst)
		}
		check(t, first.Put(1, "one"))
		check(t, second.Update(1, func(old string, _ bool) string { return old + "+two" }))
		check(t, second.Put(2, "two"))
		for k, want := range map[int64]string{1: "one+two", 2: "two"} {
			if got, _, err := first.Get(k); err != nil || got != want {
				t.Fatalf("typed first %v: Get(%d) = %q, %v; want %q", typedFirst, k, got, err, want)
			}
		}
		check(t, second.Delete(1))
		if ok, err := first.Contains(1); err != nil || ok {
			t.Fatalf("typed first %v: Contains(1) after the other handle's Delete = %v, %v", typedFirst, ok, err)
		}
	}
}

// TestTypedValuesElsewhere: where a typed table cannot be — a store that
// does not host tables, a state with a TTL — the descriptor's Typed is
// ignored and the state is bytes, with the same answers.
func TestTypedValuesElsewhere(t *testing.T) {
	bt, err := btree.New(btree.Options{})
	check(t, err)
	defer bt.Close()
	d := typedDesc(true)
	d.TTL = runtime.TTL{Duration: time.Hour}
	for name, c := range map[string]struct {
		s runtime.Store
		d runtime.ValueDescriptor[int64, string]
	}{"btree": {bt, typedDesc(true)}, "cow with TTL": {newCow(t, runtime.StoreConfig{}), d}} {
		h := must[runtime.Value[int64, string]](t)(runtime.NewValue(c.s, c.d))
		if isTable(t, c.s, "vals") {
			t.Fatalf("%s: the state is a table", name)
		}
		check(t, h.Put(7, "seven"))
		if got, _, err := h.Get(7); err != nil || got != "seven" {
			t.Fatalf("%s: Get = %q, %v", name, got, err)
		}
	}
}

// TestTypedValuesRefuseUnsafeTypes: TypedValues of types whose Go values
// would not behave as their encodings — float keys (NaN, -0), string keys
// (whose bytes a lookup would read from elsewhere), pointers,
// values that share slices or maps or hide unexported fields — fails to
// bind with ErrInvalidState naming the type at fault, rather than keep
// state that would differ after a restore.
func TestTypedValuesRefuseUnsafeTypes(t *testing.T) {
	s := newCow(t, runtime.StoreConfig{})
	type withSlice struct {
		A int64
		B []byte
	}
	type hidden struct{ a int64 }
	type okStruct struct {
		A [2]int32
		S string
		F float64
	}
	for _, c := range []struct {
		name, want string
		bind       func(name string) error
	}{
		{"float key", "float64", func(n string) error {
			_, err := runtime.NewValue(s, runtime.ValueDescriptor[float64, int64]{Name: n, Key: runtime.Float64Codec{}, Value: runtime.Int64Codec{}, Typed: runtime.TypedValues[float64, int64]()})
			return err
		}},
		{"string key", "string", func(n string) error {
			_, err := runtime.NewValue(s, runtime.ValueDescriptor[string, int64]{Name: n, Key: runtime.StringCodec{}, Value: runtime.Int64Codec{}, Typed: runtime.TypedValues[string, int64]()})
			return err
		}},
		{"slice in value", "[]uint8", func(n string) error {
			_, err := runtime.NewValue(s, runtime.ValueDescriptor[int64, withSlice]{Name: n, Key: runtime.Int64Codec{}, Value: nopCodec[withSlice]{}, Typed: runtime.TypedValues[int64, withSlice]()})
			return err
		}},
		{"unexported field", "unexported field a", func(n string) error {
			_, err := runtime.NewValue(s, runtime.ValueDescriptor[int64, hidden]{Name: n, Key: runtime.Int64Codec{}, Value: nopCodec[hidden]{}, Typed: runtime.TypedValues[int64, hidden]()})
			return err
		}},
		{"pointer value", "*int64", func(n string) error {
			_, err := runtime.NewValue(s, runtime.ValueDescriptor[int64, *int64]{Name: n, Key: runtime.Int64Codec{}, Value: nopCodec[*int64]{}, Typed: runtime.TypedValues[int64, *int64]()})
			return err
		}},
	} {
		err := c.bind(strings.ReplaceAll(c.name, " ", "-"))
		if !errors.Is(err, runtime.ErrInvalidState) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInvalidState naming %s", c.name, err, c.want)
		}
	}
	if _, err := runtime.NewValue(s, runtime.ValueDescriptor[[2]int64, okStruct]{Name: "ok", Key: nopCodec[[2]int64]{}, Value: nopCodec[okStruct]{}, Typed: runtime.TypedValues[[2]int64, okStruct]()}); err != nil {
		t.Fatalf("an array key, strings, arrays and floats in a value: %v", err)
	}
	if !isTable(t, s, "ok") {
		t.Fatal("the state of safe types is not a table")
	}
}

// nopCodec is a value codec that encodes nothing: the refusal tests never
// write.
type nopCodec[T any] struct{}

func (nopCodec[T]) AppendValue(dst []byte, _ T) []byte { return dst }
func (nopCodec[T]) AppendKey(dst []byte, _ T) []byte   { return dst }
func (nopCodec[T]) DecodeKey(b []byte) (T, []byte, error) {
	var v T
	return v, b, nil
}
func (nopCodec[T]) DecodeValue(b []byte) (T, []byte, error) {
	var v T
	return v, b, nil
}

// TestTypedValuesStoreRules: the typed path keeps the rules every handle
// keeps — a write from inside an iteration of the store fails with
// ErrWriteDuringIteration (and so does one from an Update's function),
// and every call after Close fails with ErrClosed.
func TestTypedValuesStoreRules(t *testing.T) {
	s := newCow(t, runtime.StoreConfig{})
	v := must[runtime.Value[int64, string]](t)(runtime.NewValue(s, typedDesc(true)))
	if !isTable(t, s, "vals") {
		t.Fatal("not a table")
	}
	check(t, v.Put(1, "one"))
	for k, err := range v.AllKeys() {
		check(t, err)
		if err := v.Put(k+100, "x"); !errors.Is(err, runtime.ErrWriteDuringIteration) {
			t.Fatalf("Put inside AllKeys: %v, want ErrWriteDuringIteration", err)
		}
		if got, _, err := v.Get(k); err != nil || got != "one" {
			t.Fatalf("Get inside AllKeys: %q, %v", got, err)
		}
	}
	var inner error
	check(t, v.Update(1, func(old string, _ bool) string {
		inner = v.Put(2, "two")
		return old + "!"
	}))
	if !errors.Is(inner, runtime.ErrWriteDuringIteration) {
		t.Fatalf("Put inside Update's function: %v, want ErrWriteDuringIteration", inner)
	}
	if got, _, _ := v.Get(1); got != "one!" {
		t.Fatalf("after Update: %q", got)
	}
	check(t, s.Close())
	if _, _, err := v.Get(1); !errors.Is(err, runtime.ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if err := v.Put(1, "x"); !errors.Is(err, runtime.ErrClosed) {
		t.Fatalf("Put after Close: %v", err)
	}
	if err := v.Delete(1); !errors.Is(err, runtime.ErrClosed) {
		t.Fatalf("Delete after Close: %v", err)
	}
}
