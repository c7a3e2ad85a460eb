package btree

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

// TestItemHoldsNoPointers pins what keeps the garbage collector off the
// entries: an item, the element type of every tree node's item slice,
// holds no pointer (no pointer, slice, string, map, channel, function or
// interface, at any depth), so those slices are allocated as memory the
// collector does not scan.
func TestItemHoldsNoPointers(t *testing.T) {
	var check func(path string, ty reflect.Type)
	check = func(path string, ty reflect.Type) {
		switch ty.Kind() {
		case reflect.Struct:
			for i := range ty.NumField() {
				f := ty.Field(i)
				check(path+"."+f.Name, f.Type)
			}
		case reflect.Array:
			check(path+"[]", ty.Elem())
		case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
			reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		default:
			t.Errorf("%s is a %v, which the garbage collector scans", path, ty.Kind())
		}
	}
	check("item", reflect.TypeFor[item]())
}

// newTestStore returns a store of one key group with eager compaction and
// the smallest slabs, and the states of the given kinds, registered under
// their kinds' names.
func newTestStore(t testing.TB, kinds ...runtime.Kind) (*Store, map[runtime.Kind]runtime.State) {
	s, err := New(Options{
		StoreConfig:          runtime.StoreConfig{MaxParallelism: 1},
		MaxSlabSize:          minMaxSlabSize,
		CompactionMinGarbage: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	states := map[runtime.Kind]runtime.State{}
	for _, k := range kinds {
		st, err := s.Register(runtime.StateSpec{Name: k.String(), Kind: k, SubKeyed: true})
		if err != nil {
			t.Fatal(err)
		}
		states[k] = st
	}
	return s, states
}

// treeOf returns the tree of the only key group of state name.
func treeOf(s *Store, name string) *tree { return s.states[name].trees[0] }

// testKey returns key i, long (its item key does not fit in the inline
// prefix) if i is odd.
func testKey(i int, ns string) runtime.Key {
	k := fmt.Appendf(nil, "k%03d", i)
	if i%2 == 1 {
		k = append(k, bytes.Repeat([]byte("-long"), 8)...)
	}
	return runtime.MakeKey(k, []byte(ns), 1)
}

func noErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// dump returns the contents of snap.
func dump(t testing.TB, snap runtime.Snapshot) storetest.Contents {
	t.Helper()
	c, err := storetest.Dump(snap)
	noErr(t, err)
	return c
}

// TestCompactionKeepsWhatSnapshotsSee takes snapshots of values, lists and
// maps (short and long item keys), then overwrites and deletes everything
// many times over — values with other lengths, so that every write leaves
// garbage and the trees compact into fresh arenas again and again — and
// checks that each snapshot, read after the compactions, still holds
// exactly what it held when taken.
func TestCompactionKeepsWhatSnapshotsSee(t *testing.T) {
	s, sts := newTestStore(t, runtime.KindValue, runtime.KindList, runtime.KindMap)
	vs := sts[runtime.KindValue].(runtime.ValueState)
	ls := sts[runtime.KindList].(runtime.ListState)
	ms := sts[runtime.KindMap].(runtime.MapState)
	write := func(round int) {
		for i := range 40 {
			k := testKey(i, "ns")
			v := bytes.Repeat([]byte{byte(round)}, 1+(round+i)%13)
			if (i+round)%5 == 0 {
				noErr(t, vs.Clear(k))
				noErr(t, ls.Replace(k, nil))
				noErr(t, ms.Clear(k))
				continue
			}
			noErr(t, vs.Put(k, v))
			noErr(t, ls.Add(k, v))
			noErr(t, ms.Put(k, fmt.Appendf(nil, "u%d", i%7), v))
			noErr(t, ms.Put(k, bytes.Repeat([]byte("user-key-"), 4), v))
		}
	}
	type held struct {
		snap runtime.Snapshot
		want storetest.Contents
	}
	var snaps []held
	slabs := map[string][]byte{} // the first slab of each tree when the first snapshot was taken
	for round := range 30 {
		write(round)
		if round%10 == 9 {
			snap, err := s.Snapshot()
			noErr(t, err)
			snaps = append(snaps, held{snap, dump(t, snap)})
			if len(slabs) == 0 {
				for _, name := range []string{runtime.KindValue.String(), runtime.KindList.String(), runtime.KindMap.String()} {
					slabs[name] = treeOf(s, name).Slabs[0]
				}
			}
		}
	}
	for name, first := range slabs {
		if tr := treeOf(s, name); &tr.Slabs[0][0] == &first[0] {
			t.Fatalf("state %s: the tree was not compacted after the first snapshot", name)
		}
	}
	for i, h := range snaps {
		if d := cmp.Diff(h.want, dump(t, h.snap)); d != "" {
			t.Errorf("snapshot %d changed after compactions (-taken +now):\n%s", i, d)
		}
		noErr(t, h.snap.Release())
	}
	checkGarbage(t, s)
}

// checkGarbage checks the garbage accounting of every tree of s: the bytes
// the arena handed out, less the garbage, are exactly the regions of the
// tree's items (and the arena's 8 reserved bytes).
func checkGarbage(t testing.TB, s *Store) {
	t.Helper()
	for name, st := range s.states {
		for i, tr := range st.trees {
			if tr == nil {
				continue
			}
			live := int64(8)
			tr.bt.Scan(func(x item) bool { live += tr.size(x); return true })
			if got := tr.Used - tr.garbage; got != live || tr.garbage < 0 {
				t.Fatalf("state %s, tree %d: used %d - garbage %d = %d, want the live regions' %d",
					name, i, tr.Used, tr.garbage, got, live)
			}
		}
	}
}

// TestGarbageAccounting applies random writes of every kind — overwrites
// of the same and other lengths, deletes, map and namespace clears, list
// appends and replacements — with snapshots taken and released among them,
// and checks after each write that every tree's garbage is exactly the
// bytes no item refers to. It also pins the cases that make none: a value
// overwritten by one of the same length while no snapshot is live, and a
// list appended to within its capacity, snapshot or not.
func TestGarbageAccounting(t *testing.T) {
	s, sts := newTestStore(t, runtime.KindValue, runtime.KindList, runtime.KindMap)
	s.opts.CompactionMinGarbage = 1 << 40 // count, never compact
	for _, st := range s.states {
		for _, tr := range st.trees {
			if tr != nil {
				tr.minCompact = 1 << 40
			}
		}
	}
	vs := sts[runtime.KindValue].(runtime.ValueState)
	ls := sts[runtime.KindList].(runtime.ListState)
	ms := sts[runtime.KindMap].(runtime.MapState)

	// No garbage: a value read and overwritten by one of the same length
	// with no snapshot live; a list appended to within its capacity, with
	// one live.
	k := testKey(1, "n")
	noErr(t, vs.Put(k, []byte("abc")))
	noErr(t, ls.Add(k, []byte("e1")))
	noErr(t, ls.Add(k, []byte("e2")))
	noErr(t, ls.Add(k, []byte("e3"))) // capacity 12 bytes, 9 used
	vt, lt := treeOf(s, runtime.KindValue.String()), treeOf(s, runtime.KindList.String())
	vUsed, lUsed, lGarbage := vt.Used, lt.Used, lt.garbage
	_, _, err := vs.Get(k)
	noErr(t, err)
	noErr(t, vs.Put(k, []byte("xyz")))
	snap, err := s.Snapshot()
	noErr(t, err)
	noErr(t, ls.Add(k, []byte("e"))) // 2 bytes more
	if vt.Used != vUsed || vt.garbage != 0 || lt.Used != lUsed || lt.garbage != lGarbage {
		t.Fatalf("in-place writes allocated: value tree used %d -> %d, garbage %d; list tree used %d -> %d, garbage %d -> %d",
			vUsed, vt.Used, vt.garbage, lUsed, lt.Used, lGarbage, lt.garbage)
	}
	// Under the snapshot, a read and overwritten value goes to a new
	// region, and so does a blind overwrite after its release: each time,
	// the old region becomes garbage.
	x, _ := vt.get(appendEntryKey(nil, k.Group(), k.Bytes(), k.Namespace(), true))
	region := vt.size(x)
	_, _, err = vs.Get(k)
	noErr(t, err)
	noErr(t, vs.Put(k, []byte("uvw")))
	if vt.garbage != region {
		t.Fatalf("an overwrite under a live snapshot counted %d bytes of garbage, want its region's %d", vt.garbage, region)
	}
	noErr(t, snap.Release())
	noErr(t, vs.Put(k, []byte("rst")))
	if vt.garbage != 2*region {
		t.Fatalf("a blind overwrite counted %d bytes of garbage, want its region's %d", vt.garbage-region, region)
	}

	r := rand.New(rand.NewPCG(5, 6))
	var live []runtime.Snapshot
	for i := range 5000 {
		k := testKey(r.IntN(30), []string{"a", "b", "a-much-longer-namespace-name"}[r.IntN(3)])
		v := bytes.Repeat([]byte{byte(i)}, r.IntN(20))
		switch r.IntN(10) {
		case 0:
			noErr(t, vs.Clear(k))
		case 1:
			noErr(t, ls.Replace(k, [][]byte{v, v}))
		case 2:
			noErr(t, ms.Clear(k))
		case 3:
			noErr(t, ls.DeleteAll(k))
		case 4, 5:
			noErr(t, ls.Add(k, v))
		case 6:
			noErr(t, ms.Put(k, v[:min(len(v), 3)], v))
		default:
			noErr(t, vs.Put(k, v))
		}
		switch {
		case r.IntN(200) == 0:
			snap, err := s.Snapshot()
			noErr(t, err)
			live = append(live, snap)
		case r.IntN(100) == 0 && len(live) > 0:
			j := r.IntN(len(live))
			noErr(t, live[j].Release())
			live = slices.Delete(live, j, j+1)
		}
		checkGarbage(t, s)
	}
	for _, snap := range live {
		noErr(t, snap.Release())
	}
}

// TestListGrowsInPlaceAcrossSnapshots appends to lists (short and long
// item keys) before and after snapshots — into the spare capacity of a
// region a snapshot sees, and past it into new regions — and replaces
// them, and checks that each snapshot keeps the elements it saw while the
// live lists hold all of theirs.
func TestListGrowsInPlaceAcrossSnapshots(t *testing.T) {
	s, sts := newTestStore(t, runtime.KindList)
	ls := sts[runtime.KindList].(runtime.ListState)
	keys := []runtime.Key{testKey(0, "w"), testKey(1, "w")}
	var want [2][]string
	type held struct {
		snap runtime.Snapshot
		want storetest.Contents
	}
	var snaps []held
	for round := range 12 {
		for i, k := range keys {
			for j := range round % 4 {
				e := fmt.Sprintf("r%d.%d", round, j)
				noErr(t, ls.Add(k, []byte(e)))
				want[i] = append(want[i], e)
			}
			if round == 7 && i == 0 {
				noErr(t, ls.Replace(k, [][]byte{[]byte("replaced")}))
				want[i] = []string{"replaced"}
			}
		}
		snap, err := s.Snapshot()
		noErr(t, err)
		snaps = append(snaps, held{snap, dump(t, snap)})
	}
	for i, k := range keys {
		var got []string
		noErr(t, ls.Get(k, func(e []byte) bool { got = append(got, string(e)); return true }))
		if !slices.Equal(got, want[i]) {
			t.Errorf("list %d = %q, want %q", i, got, want[i])
		}
	}
	for i, h := range snaps {
		if d := cmp.Diff(h.want, dump(t, h.snap)); d != "" {
			t.Errorf("snapshot %d changed after appends (-taken +now):\n%s", i, d)
		}
		noErr(t, h.snap.Release())
	}
	checkGarbage(t, s)
}

// TestListRefusesGrowthPastMaxValueBytes checks the bound of a list's
// length on a list whose item claims to be just below it: an append that
// would pass it is refused and changes nothing.
func TestListRefusesGrowthPastMaxValueBytes(t *testing.T) {
	tr := testTree(t, true)
	ik := []byte("\x00\x00some item key")
	one := [][]byte{[]byte("e")}
	if !tr.appendElems(ik, one, 2) {
		t.Fatal("the first append was refused")
	}
	x, _ := tr.get(ik)
	x.vl = MaxValueBytes - 1
	tr.bt.Set(x)
	used := tr.Used
	if tr.appendElems(ik, one, 2) {
		t.Fatal("an append past MaxValueBytes was accepted")
	}
	if y, _ := tr.get(ik); y != x || tr.Used != used {
		t.Fatalf("a refused append changed the list: item %+v -> %+v, used %d -> %d", x, y, used, tr.Used)
	}
}

// TestReadThenWriteSeesInterveningWrites pins the in-place overwrite of a
// value just read (Get, then Put of the same length), and the read of the
// item a read found last without a descent (find): whatever comes between
// the two — a delete of the key, writes of other keys that move it or
// compact the tree, a snapshot — a read sees it, the Put leaves the new
// value readable, the garbage exact and every snapshot as it was.
func TestReadThenWriteSeesInterveningWrites(t *testing.T) {
	s, sts := newTestStore(t, runtime.KindValue, runtime.KindMap)
	vs := sts[runtime.KindValue].(runtime.ValueState)
	ms := sts[runtime.KindMap].(runtime.MapState)
	between := []struct {
		name string
		do   func(k runtime.Key) error
	}{
		{"nothing", func(runtime.Key) error { return nil }},
		{"delete", func(k runtime.Key) error {
			if err := ms.Delete(k, []byte("u")); err != nil {
				return err
			}
			return vs.Clear(k)
		}},
		{"other keys", func(runtime.Key) error { // splits nodes, compacts
			for i := range 200 {
				k := testKey(100+i, "other")
				if err := vs.Put(k, bytes.Repeat([]byte{'o'}, i%9)); err != nil {
					return err
				}
				if err := ms.Put(k, []byte("u"), bytes.Repeat([]byte{'o'}, i%7)); err != nil {
					return err
				}
			}
			return nil
		}},
	}
	var snaps []runtime.Snapshot
	var wants []storetest.Contents
	for round := range 8 {
		for _, b := range between {
			for i := range 6 {
				k := testKey(i, "ns")
				v := fmt.Appendf(nil, "%s-%d-%d", b.name[:1], round, i) // same length every round
				noErr(t, vs.Put(k, v))
				noErr(t, ms.Put(k, []byte("u"), v))
				_, _, err := vs.Get(k)
				noErr(t, err)
				_, _, err = ms.Get(k, []byte("u"))
				noErr(t, err)
				noErr(t, b.do(k))
				// A read after the writes between sees them, though the
				// key's item was the hot one (find).
				got, ok, err := vs.Get(k)
				noErr(t, err)
				mgot, mok, err := ms.Get(k, []byte("u"))
				noErr(t, err)
				if want := b.name != "delete"; ok != want || mok != want || (want && (!bytes.Equal(got, v) || !bytes.Equal(mgot, v))) {
					t.Fatalf("round %d, %s between, key %d: read back value %q (%v), map entry %q (%v), want %q (%v)",
						round, b.name, i, got, ok, mgot, mok, v, want)
				}
				if round%3 == 1 && i == 2 {
					snap, err := s.Snapshot()
					noErr(t, err)
					snaps, wants = append(snaps, snap), append(wants, dump(t, snap))
				}
				w := bytes.ToUpper(v)
				noErr(t, vs.Put(k, w))
				noErr(t, ms.Put(k, []byte("u"), w))
				got, ok, err = vs.Get(k)
				noErr(t, err)
				mgot, mok, err = ms.Get(k, []byte("u"))
				noErr(t, err)
				if !ok || !bytes.Equal(got, w) || !mok || !bytes.Equal(mgot, w) {
					t.Fatalf("round %d, %s between, key %d: value %q (%v), map entry %q (%v), want %q",
						round, b.name, i, got, ok, mgot, mok, w)
				}
				checkGarbage(t, s)
			}
		}
	}
	for i, snap := range snaps {
		if d := cmp.Diff(wants[i], dump(t, snap)); d != "" {
			t.Errorf("snapshot %d changed (-taken +now):\n%s", i, d)
		}
		noErr(t, snap.Release())
	}
}
