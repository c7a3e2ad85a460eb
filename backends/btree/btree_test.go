package btree_test

import (
	"errors"
	"fmt"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stategen/stategen/backends/btree"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

func newStore(t testing.TB, opts btree.Options) *btree.Store {
	t.Helper()
	s, err := btree.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func register(t testing.TB, s runtime.Store, spec runtime.StateSpec) runtime.State {
	t.Helper()
	st, err := s.Register(spec)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantErr(t testing.TB, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: got error %v, want one wrapping %v", what, err, target)
	}
}

// pacedView scans a snapshot slowly: it signals started once the first key
// group is read and yields the processor before every key group, so that
// the writes of the test goroutine interleave with the scan.
type pacedView struct {
	runtime.View
	once    sync.Once
	started chan struct{}
}

func (v *pacedView) Scan(state string, kg int, fn func(runtime.Entry) error) error {
	goruntime.Gosched()
	err := v.View.Scan(state, kg, fn)
	v.once.Do(func() { close(v.started) })
	return err
}

// TestSnapshotEqualsModelWhileWritesRaceTheScan takes snapshots of a store
// and of the model at the same point, scans the store's on another
// goroutine while the test goroutine keeps writing (random operations of
// every kind, Clear and DeleteAll included), and compares the scan with
// the model's snapshot: the scan sees exactly the writes made before
// Snapshot returned. Several snapshots are live at once, and each is
// released by its reader. Run it with -race: the scans read tree nodes and
// arena bytes that the writes copy but must never modify. With eager
// compaction, the trees are rebuilt into fresh arenas while scans of the
// old ones run.
func TestSnapshotEqualsModelWhileWritesRaceTheScan(t *testing.T) {
	for _, o := range []btree.Options{
		{Degree: 2},
		{Degree: 32},
		{Degree: 3, MaxSlabSize: 1 << 10, CompactionMinGarbage: 1},
	} {
		t.Run(fmt.Sprintf("degree=%d/minGarbage=%d", o.Degree, o.CompactionMinGarbage), func(t *testing.T) {
			o.StoreConfig = runtime.StoreConfig{MaxParallelism: 16}
			d := newDriver(t, o, randPick(uint64(o.Degree)))
			for range 2000 {
				d.step()
			}
			type result struct {
				c   storetest.Contents
				err error
			}
			rounds := 20
			if testing.Short() {
				rounds = 6
			}
			for round := range rounds {
				var wants []storetest.Contents
				var results []chan result
				for range 3 { // three live snapshots, each read while writes go on
					b, m := d.snapshots()
					want, err := storetest.Dump(m)
					must(t, err)
					must(t, m.Release())
					wants = append(wants, want)
					ch := make(chan result, 1)
					results = append(results, ch)
					v := &pacedView{View: b, started: make(chan struct{})}
					go func() {
						defer v.once.Do(func() { close(v.started) }) // if Dump failed before its first Scan
						c, err := storetest.Dump(v)
						if rerr := b.Release(); err == nil {
							err = rerr
						}
						ch <- result{c, err}
					}()
					<-v.started
					for range 300 {
						d.step()
					}
				}
				for i, ch := range results {
					r := <-ch
					if r.err != nil {
						t.Fatalf("round %d, snapshot %d: %v", round, i, r.err)
					}
					d.same(fmt.Sprintf("round %d, snapshot %d, read while the store changed", round, i), wants[i], r.c)
				}
			}
			if n := d.s.LiveSnapshots(); n != 0 {
				t.Errorf("LiveSnapshots() = %d after every reader released its snapshot", n)
			}
		})
	}
}

// TestSnapshotIgnoresInPlaceWrites checks the writes that reuse memory, or
// could — a list appended to within its capacity, a value or map entry
// read and then overwritten by one of the same length — right after a
// snapshot and after a second one: the snapshots keep what they saw.
func TestSnapshotIgnoresInPlaceWrites(t *testing.T) {
	s := newStore(t, btree.Options{})
	vs := register(t, s, runtime.StateSpec{Name: "v", Kind: runtime.KindValue}).(runtime.ValueState)
	ls := register(t, s, runtime.StateSpec{Name: "l", Kind: runtime.KindList}).(runtime.ListState)
	ms := register(t, s, runtime.StateSpec{Name: "m", Kind: runtime.KindSortedMap}).(runtime.MapState)
	k := runtime.MakeKey([]byte("key"), nil, runtime.DefaultMaxParallelism)
	write := func(v string) {
		must(t, vs.Put(k, []byte(v)))
		_, _, err := vs.Get(k)
		must(t, err)
		must(t, vs.Put(k, []byte(v))) // read, then overwritten: in place, if allowed
		must(t, ls.Add(k, []byte(v)))
		_, _, err = ms.Get(k, []byte("u"))
		must(t, err)
		must(t, ms.Put(k, []byte("u"), []byte(v)))
	}
	write("v1")
	write("v2")
	s1, err := s.Snapshot()
	must(t, err)
	want1, err := storetest.Dump(s1)
	must(t, err)
	write("v3")
	write("v4")
	s2, err := s.Snapshot()
	must(t, err)
	want2, err := storetest.Dump(s2)
	must(t, err)
	write("v5")
	write("v6")
	for i, c := range []struct {
		snap runtime.Snapshot
		want storetest.Contents
	}{{s1, want1}, {s2, want2}} {
		got, err := storetest.Dump(c.snap)
		must(t, err)
		if d := diffContents(c.want, got); d != "" {
			t.Errorf("snapshot %d changed after writes:\n%s", i+1, d)
		}
		must(t, c.snap.Release())
	}
	var list []string
	must(t, ls.Get(k, func(e []byte) bool { list = append(list, string(e)); return true }))
	if got, want := fmt.Sprint(list), "[v1 v2 v3 v4 v5 v6]"; got != want {
		t.Errorf("list = %s, want %s", got, want)
	}
}

func diffContents(want, got storetest.Contents) string { return cmp.Diff(want, got) }

// TestLiveSnapshots counts snapshots taken and released, and reports a
// snapshot dropped without Release through OnLeakedSnapshot.
func TestLiveSnapshots(t *testing.T) {
	leaked := make(chan uint64, 4)
	s := newStore(t, btree.Options{OnLeakedSnapshot: func(seq uint64) { leaked <- seq }})
	st := register(t, s, runtime.StateSpec{Name: "v", Kind: runtime.KindValue}).(runtime.ValueState)
	must(t, st.Put(runtime.MakeKey([]byte("k"), nil, runtime.DefaultMaxParallelism), []byte("v")))

	a, err := s.Snapshot()
	must(t, err)
	b, err := s.Snapshot()
	must(t, err)
	if n := s.LiveSnapshots(); n != 2 {
		t.Fatalf("LiveSnapshots() = %d with two snapshots live, want 2", n)
	}
	must(t, a.Release())
	wantErr(t, a.Release(), runtime.ErrReleased, "second Release")
	if n := s.LiveSnapshots(); n != 1 {
		t.Fatalf("LiveSnapshots() = %d after one Release and a failed second one, want 1", n)
	}
	// Release on another goroutine.
	done := make(chan error)
	go func() { done <- b.Release() }()
	must(t, <-done)
	if n := s.LiveSnapshots(); n != 0 {
		t.Fatalf("LiveSnapshots() = %d after both were released, want 0", n)
	}

	// A leak: the third snapshot is dropped unreleased.
	func() {
		c, err := s.Snapshot()
		must(t, err)
		if c == nil {
			t.Fatal("nil snapshot")
		}
	}()
	if n := s.LiveSnapshots(); n != 1 {
		t.Fatalf("LiveSnapshots() = %d with a leaked snapshot not yet collected, want 1", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		goruntime.GC()
		select {
		case seq := <-leaked:
			if seq != 3 {
				t.Errorf("OnLeakedSnapshot(%d), want the third snapshot (3)", seq)
			}
			if n := s.LiveSnapshots(); n != 0 {
				t.Errorf("LiveSnapshots() = %d after the leaked snapshot was collected, want 0", n)
			}
			select {
			case seq := <-leaked:
				t.Errorf("OnLeakedSnapshot(%d) for a released snapshot", seq)
			default:
			}
			return
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("OnLeakedSnapshot was not called within 10s of the snapshot becoming unreachable")
		}
	}
}

// TestReleaseDuringScan releases a snapshot from inside its own Scan (as a
// cancelled checkpoint writer may, from another goroutine): the Scan stops
// with ErrReleased, and a later Scan fails too.
func TestReleaseDuringScan(t *testing.T) {
	s := newStore(t, btree.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: 1}})
	st := register(t, s, runtime.StateSpec{Name: "v", Kind: runtime.KindValue}).(runtime.ValueState)
	for i := range 100 {
		must(t, st.Put(runtime.MakeKey(fmt.Appendf(nil, "k%03d", i), nil, 1), []byte("v")))
	}
	snap, err := s.Snapshot()
	must(t, err)
	calls := 0
	err = snap.Scan("v", 0, func(runtime.Entry) error {
		calls++
		if calls == 10 {
			must(t, snap.Release())
		}
		return nil
	})
	wantErr(t, err, runtime.ErrReleased, "Scan released during the scan")
	if calls != 10 {
		t.Errorf("Scan went on for %d entries after Release, want it to stop", calls-10)
	}
	wantErr(t, snap.Scan("v", 0, func(runtime.Entry) error { return nil }), runtime.ErrReleased, "Scan after Release")
	if n := s.LiveSnapshots(); n != 0 {
		t.Errorf("LiveSnapshots() = %d, want 0", n)
	}
}

// TestBadInput feeds every method input it must refuse, and checks that it
// refuses with the right error and never panics.
func TestBadInput(t *testing.T) {
	const maxP = 8
	owned := runtime.KeyGroupRange{Start: 2, End: 6}
	cfg := runtime.StoreConfig{MaxParallelism: maxP, KeyGroups: owned}

	t.Run("Options", func(t *testing.T) {
		for _, o := range []btree.Options{
			{Degree: 1}, {Degree: -3}, {Degree: 257},
			{StoreConfig: runtime.StoreConfig{MaxParallelism: -1}},
			{StoreConfig: runtime.StoreConfig{MaxParallelism: 1 << 16}},
			{StoreConfig: runtime.StoreConfig{MaxParallelism: 8, KeyGroups: runtime.KeyGroupRange{Start: 4, End: 9}}},
		} {
			if s, err := btree.New(o); err == nil {
				t.Errorf("New(%+v) = %v, want an error", o, s)
			}
		}
	})

	t.Run("Register", func(t *testing.T) {
		s := newStore(t, btree.Options{StoreConfig: cfg})
		for _, spec := range []runtime.StateSpec{
			{Name: "", Kind: runtime.KindValue},
			{Name: "a/b", Kind: runtime.KindValue},
			{Name: "x", Kind: 0},
			{Name: "x", Kind: 9},
		} {
			_, err := s.Register(spec)
			wantErr(t, err, runtime.ErrInvalidState, fmt.Sprintf("Register(%v)", spec))
		}
		register(t, s, runtime.StateSpec{Name: "x", Kind: runtime.KindValue, Fingerprint: "1"})
		_, err := s.Register(runtime.StateSpec{Name: "x", Kind: runtime.KindValue, Fingerprint: "2"})
		wantErr(t, err, runtime.ErrStateMismatch, "Register with another fingerprint")
	})

	t.Run("Keys", func(t *testing.T) {
		s := newStore(t, btree.Options{StoreConfig: cfg})
		st := register(t, s, runtime.StateSpec{Name: "v", Kind: runtime.KindValue}).(runtime.ValueState)
		good := keyIn(maxP, owned, false)
		wantErr(t, st.Put(keyIn(maxP, owned, true), nil), runtime.ErrKeyGroupNotOwned, "Put of a key in a key group not owned")
		wantErr(t, st.Put(runtime.Key{}, nil), runtime.ErrInvalidKey, "Put of the zero Key")
		wantErr(t, st.Put(runtime.MakeKey(good.Bytes(), nil, maxP*2), nil), runtime.ErrInvalidKey, "Put of a Key built for another maxParallelism")
		withNS := good.WithNamespace([]byte("ns"))
		wantErr(t, st.Put(withNS, nil), runtime.ErrInvalidKey, "Put of a namespace on a keyed state")
		_, _, err := st.Get(withNS)
		wantErr(t, err, runtime.ErrInvalidKey, "Get of a namespace on a keyed state")
		// Namespaces and DeleteAll ignore the namespace.
		must(t, st.Namespaces(withNS, func([]byte) bool { return true }))
		must(t, st.DeleteAll(withNS))
	})

	t.Run("NilCallbacks", func(t *testing.T) {
		s := newStore(t, btree.Options{StoreConfig: cfg})
		k := keyIn(maxP, owned, false)
		l := register(t, s, runtime.StateSpec{Name: "l", Kind: runtime.KindList}).(runtime.ListState)
		m := register(t, s, runtime.StateSpec{Name: "m", Kind: runtime.KindSortedMap}).(runtime.SortedMapState)
		must(t, l.Add(k, []byte("e")))
		must(t, m.Put(k, []byte("u"), []byte("v")))
		for what, err := range map[string]error{
			"list Get":   l.Get(k, nil),
			"Iterate":    m.Iterate(k, nil),
			"Range":      m.Range(k, nil, nil, false, nil),
			"Namespaces": m.Namespaces(k, nil),
		} {
			if err == nil {
				t.Errorf("%s with a nil callback: no error", what)
			}
		}
		snap, err := s.Snapshot()
		must(t, err)
		defer snap.Release()
		if err := snap.Scan("m", k.Group(), nil); err == nil {
			t.Error("Scan with a nil callback: no error")
		}
		for _, kg := range []int{-1, 0, owned.End, 1 << 20} {
			if err := snap.Scan("m", kg, func(runtime.Entry) error { return nil }); err == nil {
				t.Errorf("Scan of key group %d outside %v: no error", kg, owned)
			}
		}
		if err := snap.Scan("nope", k.Group(), func(runtime.Entry) error { return nil }); err == nil {
			t.Error("Scan of an unknown state: no error")
		}
	})

	t.Run("WritesFromCallbacks", func(t *testing.T) {
		s := newStore(t, btree.Options{StoreConfig: cfg})
		k := keyIn(maxP, owned, false)
		v := register(t, s, runtime.StateSpec{Name: "v", Kind: runtime.KindValue}).(runtime.ValueState)
		l := register(t, s, runtime.StateSpec{Name: "l", Kind: runtime.KindList, SubKeyed: true}).(runtime.ListState)
		m := register(t, s, runtime.StateSpec{Name: "m", Kind: runtime.KindSortedMap, SubKeyed: true}).(runtime.SortedMapState)
		kn := k
		kn = kn.WithNamespace([]byte("ns"))
		must(t, v.Put(k, []byte("before")))
		must(t, l.Add(kn, []byte("e")))
		must(t, m.Put(kn, []byte("u"), []byte("v")))
		before, err := s.Snapshot()
		must(t, err)
		want, err := storetest.Dump(before)
		must(t, err)
		must(t, before.Release())

		var errs []error
		tryAll := func() {
			errs = append(errs,
				v.Put(k, []byte("inside")), v.Clear(k), v.DeleteAll(k),
				l.Add(kn, []byte("x")), l.AddAll(kn, [][]byte{[]byte("x")}), l.Replace(kn, nil),
				m.Put(kn, []byte("u2"), nil), m.Delete(kn, []byte("u")), m.Clear(kn),
				s.Restore(before))
			// Reads are fine, and may nest.
			if _, ok, err := v.Get(k); !ok || err != nil {
				t.Errorf("Get from inside a callback: %v %v", ok, err)
			}
			n := 0
			if err := m.Range(kn, nil, nil, true, func(_, _ []byte) bool { n++; return true }); err != nil || n != 1 {
				t.Errorf("nested Range from inside a callback: %d entries, %v", n, err)
			}
		}
		must(t, l.Get(kn, func([]byte) bool { tryAll(); return true }))
		must(t, m.Iterate(kn, func(_, _ []byte) bool { tryAll(); return true }))
		must(t, m.Range(kn, nil, nil, true, func(_, _ []byte) bool { tryAll(); return true }))
		must(t, m.Namespaces(kn, func([]byte) bool { tryAll(); return true }))
		for i, err := range errs {
			wantErr(t, err, btree.ErrWriteDuringIteration, fmt.Sprintf("write %d from inside a callback", i))
		}
		after, err := s.Snapshot()
		must(t, err)
		got, err := storetest.Dump(after)
		must(t, err)
		must(t, after.Release())
		if d := diffContents(want, got); d != "" {
			t.Errorf("refused writes changed the store:\n%s", d)
		}
		// And writes work again once the iterations are over.
		must(t, v.Put(k, []byte("after")))
	})

	t.Run("Closed", func(t *testing.T) {
		s := newStore(t, btree.Options{StoreConfig: cfg})
		k := keyIn(maxP, owned, false)
		v := register(t, s, runtime.StateSpec{Name: "v", Kind: runtime.KindValue}).(runtime.ValueState)
		l := register(t, s, runtime.StateSpec{Name: "l", Kind: runtime.KindList}).(runtime.ListState)
		m := register(t, s, runtime.StateSpec{Name: "m", Kind: runtime.KindSortedMap}).(runtime.SortedMapState)
		must(t, v.Put(k, []byte("x")))
		snap, err := s.Snapshot()
		must(t, err)
		must(t, s.Close())
		must(t, s.Close())
		_, _, gerr := v.Get(k)
		_, _, mgerr := m.Get(k, nil)
		_, rerr := s.Register(runtime.StateSpec{Name: "new", Kind: runtime.KindValue})
		_, serr := s.Snapshot()
		for i, err := range []error{
			v.Put(k, nil), gerr, v.Clear(k), v.DeleteAll(k), v.Namespaces(k, func([]byte) bool { return true }),
			l.Add(k, nil), l.AddAll(k, [][]byte{nil}), l.Replace(k, nil), l.Get(k, func([]byte) bool { return true }),
			m.Put(k, nil, nil), mgerr, m.Delete(k, nil), m.Iterate(k, func(_, _ []byte) bool { return true }),
			m.Range(k, nil, nil, false, func(_, _ []byte) bool { return true }),
			rerr, serr, s.Restore(snap),
		} {
			wantErr(t, err, runtime.ErrClosed, fmt.Sprintf("call %d after Close", i))
		}
		if got := s.States(); len(got) != 3 {
			t.Errorf("States() after Close = %v, want the three states", got)
		}
		// The snapshot taken before Close stays readable.
		c, err := storetest.Dump(snap)
		must(t, err)
		if c.Len() != 1 {
			t.Errorf("snapshot taken before Close holds %d records, want 1", c.Len())
		}
		must(t, snap.Release())
		wantErr(t, snap.Release(), runtime.ErrReleased, "second Release")
	})

	t.Run("Restore", func(t *testing.T) {
		src := newStore(t, btree.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: maxP}})
		spec := runtime.StateSpec{Name: "m", Kind: runtime.KindMap, SubKeyed: true}
		sm := register(t, src, spec).(runtime.MapState)
		k := runtime.MakeKey([]byte("k"), []byte("ns"), maxP)
		must(t, sm.Put(k, []byte("u"), []byte("v")))
		snap, err := src.Snapshot()
		must(t, err)
		defer snap.Release()

		dst := newStore(t, btree.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: maxP}})
		must(t, dst.Restore(snap))
		wantErr(t, dst.Restore(snap), runtime.ErrRestoreConflict, "second Restore of the same snapshot")

		other := newStore(t, btree.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: maxP}})
		k2 := keyIn(maxP, runtime.KeyGroupRange{Start: k.Group(), End: k.Group() + 1}, false)
		k2 = k2.WithNamespace([]byte("x"))
		must(t, register(t, other, spec).(runtime.MapState).Put(k2, []byte("u"), []byte("v")))
		wantErr(t, other.Restore(snap), runtime.ErrRestoreConflict, "Restore into a key group holding another key of the state")

		wrongP := newStore(t, btree.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: maxP * 2}})
		wantErr(t, wrongP.Restore(snap), runtime.ErrMaxParallelismMismatch, "Restore with another maxParallelism")

		mismatch := newStore(t, btree.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: maxP}})
		register(t, mismatch, runtime.StateSpec{Name: "m", Kind: runtime.KindSortedMap, SubKeyed: true})
		wantErr(t, mismatch.Restore(snap), runtime.ErrStateMismatch, "Restore into another kind")

		if err := newStore(t, btree.Options{}).Restore(nil); err == nil {
			t.Error("Restore(nil): no error")
		}
	})

	t.Run("CorruptViews", func(t *testing.T) {
		g := func(key string) int { return runtime.KeyGroupOfHash(runtime.HashKey([]byte(key)), maxP) }
		// Two keys of one key group, and one of another.
		var a, b, c string
		for i := 0; a == "" || b == "" || c == ""; i++ {
			key := fmt.Sprint("key", i)
			switch {
			case a == "":
				a = key
			case b == "" && g(key) == g(a):
				b = key
			case c == "" && g(key) != g(a):
				c = key
			}
		}
		value := runtime.StateSpec{Name: "v", Kind: runtime.KindValue}
		list := runtime.StateSpec{Name: "l", Kind: runtime.KindList}
		mp := runtime.StateSpec{Name: "m", Kind: runtime.KindMap}
		for _, tc := range []struct {
			name   string
			spec   runtime.StateSpec
			specs  []runtime.StateSpec
			target error
			scan   []runtime.Entry
		}{
			{"wrong key group", value, nil, runtime.ErrCorrupt, []runtime.Entry{{Key: []byte(c)}}},
			{"namespace in a keyed state", value, nil, runtime.ErrCorrupt, []runtime.Entry{{Key: []byte(a), Namespace: []byte("n")}}},
			{"user key in a value state", value, nil, runtime.ErrCorrupt, []runtime.Entry{{Key: []byte(a), UserKey: []byte("u")}}},
			{"duplicate value", value, nil, runtime.ErrCorrupt, []runtime.Entry{{Key: []byte(a)}, {Key: []byte(b)}, {Key: []byte(a)}}},
			{"duplicate map entry", mp, nil, runtime.ErrCorrupt, []runtime.Entry{{Key: []byte(a), UserKey: []byte("u")}, {Key: []byte(a), UserKey: []byte("u")}}},
			{"list not consecutive", list, nil, runtime.ErrCorrupt, []runtime.Entry{{Key: []byte(a)}, {Key: []byte(b)}, {Key: []byte(a)}}},
			{"state listed twice", value, []runtime.StateSpec{value, value}, runtime.ErrCorrupt, nil},
			{"invalid state", value, []runtime.StateSpec{{Name: "a/b", Kind: runtime.KindValue}}, runtime.ErrInvalidState, nil},
		} {
			specs := tc.specs
			if specs == nil {
				specs = []runtime.StateSpec{tc.spec}
			}
			v := fakeView{maxP: maxP, specs: specs, group: g(a), entries: tc.scan}
			s := newStore(t, btree.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: maxP}})
			wantErr(t, s.Restore(v), tc.target, "Restore of a view with a "+tc.name)
		}
		// A failing Scan is reported.
		s := newStore(t, btree.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: maxP}})
		boom := errors.New("boom")
		if err := s.Restore(fakeView{maxP: maxP, specs: []runtime.StateSpec{value}, scanErr: boom}); !errors.Is(err, boom) {
			t.Errorf("Restore of a view whose Scan fails: %v, want it to wrap %v", err, boom)
		}
	})
}

// fakeView is a View of maxP key groups that yields entries in key group
// group for every state, and fails every Scan with scanErr if set.
type fakeView struct {
	maxP    int
	specs   []runtime.StateSpec
	group   int
	entries []runtime.Entry
	scanErr error
}

func (v fakeView) MaxParallelism() int              { return v.maxP }
func (v fakeView) KeyGroups() runtime.KeyGroupRange { return runtime.FullRange(v.maxP) }
func (v fakeView) States() []runtime.StateSpec      { return v.specs }
func (v fakeView) Scan(_ string, kg int, fn func(runtime.Entry) error) error {
	if v.scanErr != nil {
		return v.scanErr
	}
	if kg != v.group {
		return nil
	}
	for _, e := range v.entries {
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// keyIn returns a Key of a key group in r (outside r if outside).
func keyIn(maxP int, r runtime.KeyGroupRange, outside bool) runtime.Key {
	for i := 0; ; i++ {
		k := runtime.MakeKey(fmt.Appendf(nil, "key-%d", i), nil, maxP)
		if r.Contains(k.Group()) != outside {
			return k
		}
	}
}

// TestScanCanBeCalledConcurrently reads one snapshot from several
// goroutines at once (the View contract asks for one at a time; the btree
// snapshot allows more) while the store keeps changing.
func TestScanCanBeCalledConcurrently(t *testing.T) {
	d := newDriver(t, btree.Options{Degree: 3, StoreConfig: runtime.StoreConfig{MaxParallelism: 8}}, randPick(42))
	for range 3000 {
		d.step()
	}
	b, m := d.snapshots()
	want, err := storetest.Dump(m)
	must(t, err)
	var wg sync.WaitGroup
	var failures atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := storetest.Dump(b)
			if err != nil || diffContents(want, got) != "" {
				failures.Add(1)
			}
		}()
	}
	for range 1000 {
		d.step()
	}
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Errorf("%d of 4 concurrent readers saw something other than the snapshot", n)
	}
	must(t, b.Release())
	must(t, m.Release())
}
