package cow

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

// entriesView is a View of given entries, scanned in the given order.
type entriesView struct {
	maxP    int
	specs   []runtime.StateSpec
	entries map[string]map[int][]runtime.Entry
}

func (v *entriesView) MaxParallelism() int              { return v.maxP }
func (v *entriesView) KeyGroups() runtime.KeyGroupRange { return runtime.FullRange(v.maxP) }
func (v *entriesView) States() []runtime.StateSpec      { return slices.Clone(v.specs) }
func (v *entriesView) Scan(state string, kg int, fn func(runtime.Entry) error) error {
	for _, e := range v.entries[state][kg] {
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

func (v *entriesView) add(spec runtime.StateSpec, e runtime.Entry) {
	kg := runtime.KeyGroupOfHash(runtime.HashKey(e.Key), v.maxP)
	if v.entries[spec.Name] == nil {
		v.entries[spec.Name] = make(map[int][]runtime.Entry)
	}
	v.entries[spec.Name][kg] = append(v.entries[spec.Name][kg], e)
}

// TestRestoreLoadsMapsInAnyOrder restores views whose map entries come
// unsorted and with the entries of one (key, namespace) split into several
// runs — orders the View contract allows, which the bulk loader must sort
// and merge — and compares the result with the reference model restored
// from the same view.
func TestRestoreLoadsMapsInAnyOrder(t *testing.T) {
	const maxP = 4
	v := mixedView(rand.New(rand.NewPCG(5, 6)), maxP, 60)
	s, err := New(Options{StoreConfig: runtime.StoreConfig{MaxParallelism: maxP}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := storetest.NewModel(runtime.StoreConfig{MaxParallelism: maxP})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Restore(v); err != nil {
		t.Fatal(err)
	}
	if err := m.Restore(v); err != nil {
		t.Fatal(err)
	}
	got, err := storetest.Dump(mustSnapshot(t, s))
	if err != nil {
		t.Fatal(err)
	}
	want, err := storetest.Dump(mustSnapshot(t, m))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("the restored store differs from the model (-want +got):\n%s", d)
	}
}

// mixedView returns a view of keys keys of every kind, keyed and
// sub-keyed (three namespaces), with map entries shuffled so that no run
// of a key stays whole, and lists of one to five elements.
func mixedView(r *rand.Rand, maxP, keys int) *entriesView {
	v := &entriesView{maxP: maxP, entries: make(map[string]map[int][]runtime.Entry)}
	for _, kind := range []runtime.Kind{runtime.KindValue, runtime.KindList, runtime.KindMap, runtime.KindSortedMap} {
		for _, sub := range []bool{false, true} {
			spec := runtime.StateSpec{Name: fmt.Sprintf("%v-%v", kind, sub), Kind: kind, SubKeyed: sub}
			v.specs = append(v.specs, spec)
			var es []runtime.Entry
			for k := range keys {
				var ns []byte
				if sub {
					ns = []byte{byte(k % 3)}
				}
				key := []byte(fmt.Sprintf("key-%d", k))
				switch kind {
				case runtime.KindValue:
					es = append(es, runtime.Entry{Key: key, Namespace: ns, Value: bytesOf(r, 60)})
				case runtime.KindList:
					for range 1 + r.IntN(5) {
						es = append(es, runtime.Entry{Key: key, Namespace: ns, Value: bytesOf(r, 30)})
					}
				default:
					for u := range 1 + r.IntN(80) {
						es = append(es, runtime.Entry{Key: key, Namespace: ns, UserKey: []byte(fmt.Sprintf("u%03d", u)), Value: bytesOf(r, 30)})
					}
				}
			}
			if kind.HasUserKey() {
				// Map entries in any order: no run of a key stays whole.
				r.Shuffle(len(es), func(i, j int) { es[i], es[j] = es[j], es[i] })
			}
			for _, e := range es {
				v.add(spec, e)
			}
		}
	}
	slices.SortFunc(v.specs, func(a, b runtime.StateSpec) int { return cmpString(a.Name, b.Name) })
	return v
}

func mustSnapshot(t *testing.T, s runtime.Store) runtime.Snapshot {
	t.Helper()
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = snap.Release() })
	return snap
}

// TestRestoreRejectsViewsBreakingTheContract pins that what the View
// contract forbids fails a Restore with ErrCorrupt instead of dropping an
// entry: two values of one key, a list whose elements are not
// consecutive, two entries of one map user key, an entry in the wrong key
// group, a user key in a value state, a namespace in a keyed state.
func TestRestoreRejectsViewsBreakingTheContract(t *testing.T) {
	const maxP = 2
	value := runtime.StateSpec{Name: "v", Kind: runtime.KindValue}
	list := runtime.StateSpec{Name: "l", Kind: runtime.KindList}
	mp := runtime.StateSpec{Name: "m", Kind: runtime.KindMap}
	k := func(s string) []byte { return []byte(s) }
	var other []byte // a key of the other key group than "a"
	for i := 0; ; i++ {
		other = []byte(fmt.Sprint("b", i))
		if runtime.KeyGroupOfHash(runtime.HashKey(other), maxP) != runtime.KeyGroupOfHash(runtime.HashKey(k("a")), maxP) {
			break
		}
	}
	kgA := runtime.KeyGroupOfHash(runtime.HashKey(k("a")), maxP)
	var x []byte // another key of key group kgA
	for i := 0; ; i++ {
		x = []byte(fmt.Sprint("x", i))
		if runtime.KeyGroupOfHash(runtime.HashKey(x), maxP) == kgA {
			break
		}
	}
	for _, tc := range []struct {
		name    string
		spec    runtime.StateSpec
		entries []runtime.Entry
	}{
		{"two values of one key", value, []runtime.Entry{{Key: k("a"), Value: k("1")}, {Key: k("a"), Value: k("2")}}},
		{"list elements not consecutive", list, []runtime.Entry{{Key: k("a"), Value: k("1")}, {Key: x, Value: k("1")}, {Key: k("a"), Value: k("2")}}},
		{"two entries of one user key", mp, []runtime.Entry{{Key: k("a"), UserKey: k("u"), Value: k("1")}, {Key: k("a"), UserKey: k("w"), Value: k("1")}, {Key: k("a"), UserKey: k("u"), Value: k("2")}}},
		{"two entries of one user key in separate runs", mp, []runtime.Entry{{Key: k("a"), UserKey: k("u"), Value: k("1")}, {Key: x, UserKey: k("u"), Value: k("1")}, {Key: k("a"), UserKey: k("u"), Value: k("2")}}},
		{"entry in the wrong key group", value, []runtime.Entry{{Key: other, Value: k("1")}}},
		{"user key in a value state", value, []runtime.Entry{{Key: k("a"), UserKey: k("u"), Value: k("1")}}},
		{"namespace in a keyed state", value, []runtime.Entry{{Key: k("a"), Namespace: k("n"), Value: k("1")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &entriesView{maxP: maxP, specs: []runtime.StateSpec{tc.spec}, entries: map[string]map[int][]runtime.Entry{tc.spec.Name: {}}}
			// Every entry is scanned from key group kgA, where all but the
			// wrong-key-group case's keys belong.
			v.entries[tc.spec.Name][kgA] = tc.entries
			s, err := New(Options{StoreConfig: runtime.StoreConfig{MaxParallelism: maxP}})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Restore(v); !errors.Is(err, runtime.ErrCorrupt) {
				t.Fatalf("Restore = %v, want ErrCorrupt", err)
			}
		})
	}
}

// TestRestoreThenWriteAndSnapshot restores a snapshot of a store filled by
// random operations into a fresh cow store and a fresh model, then keeps
// applying random operations to both, with snapshots checked against the
// model: bulk-loaded tables must behave like tables built by writes
// (growth, rehash, copy-on-write, compaction).
func TestRestoreThenWriteAndSnapshot(t *testing.T) {
	for _, opts := range []Options{
		{StoreConfig: runtime.StoreConfig{MaxParallelism: 4}},
		{StoreConfig: runtime.StoreConfig{MaxParallelism: 4}, MaxSlabSize: 1 << 10, CompactionMinGarbage: 1},
	} {
		t.Run(fmt.Sprintf("compact=%d", opts.CompactionMinGarbage), func(t *testing.T) {
			seed := rand.Uint64()
			t.Logf("seed %d", seed)
			r := rand.New(rand.NewPCG(seed, 11))
			src := newPair(t, opts)
			for range 4000 {
				src.op(r, 300)
			}
			snap, err := src.cow.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			defer snap.Release()
			p := newPair(t, opts)
			p.check("Restore into cow", p.cow.Restore(snap))
			p.check("Restore into the model", p.model.Restore(snap))
			var live []snapPair
			for i := range 4000 {
				if i%500 == 0 {
					live = append(live, p.snapshot())
				}
				p.op(r, 300)
				if len(live) > 2 {
					p.verify(live[0], fmt.Sprintf("op %d", i))
					live = live[1:]
				}
			}
			for _, s := range live {
				p.verify(s, "end")
			}
			p.verify(p.snapshot(), "final")
		})
	}
}
