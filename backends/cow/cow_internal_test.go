package cow

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

// pair drives a cow store and the reference model with the same
// operations.
type pair struct {
	t      *testing.T
	cow    *Store
	model  *storetest.Model
	states [][2]runtime.State // cow, model
	maxP   int
}

func newPair(t *testing.T, opts Options) *pair {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	m, err := storetest.NewModel(opts.StoreConfig)
	if err != nil {
		t.Fatal(err)
	}
	p := &pair{t: t, cow: s, model: m, maxP: s.Config().MaxParallelism}
	for _, kind := range []runtime.Kind{runtime.KindValue, runtime.KindList, runtime.KindMap, runtime.KindSortedMap} {
		for _, sub := range []bool{false, true} {
			spec := runtime.StateSpec{Name: fmt.Sprintf("%v-%v", kind, sub), Kind: kind, SubKeyed: sub}
			a, err := s.Register(spec)
			if err != nil {
				t.Fatal(err)
			}
			b, err := m.Register(spec)
			if err != nil {
				t.Fatal(err)
			}
			p.states = append(p.states, [2]runtime.State{a, b})
		}
	}
	return p
}

func (p *pair) check(what string, errs ...error) {
	p.t.Helper()
	for _, err := range errs {
		if err != nil {
			p.t.Fatalf("%s: %v", what, err)
		}
	}
}

func bytesOf(r *rand.Rand, n int) []byte {
	b := make([]byte, r.IntN(n+1))
	for i := range b {
		b[i] = byte(r.IntN(4))
	}
	return b
}

// op applies one random operation to both stores.
func (p *pair) op(r *rand.Rand, keys int) {
	st := p.states[r.IntN(len(p.states))]
	spec := st[0].Spec()
	var ns []byte
	if spec.SubKeyed {
		ns = []byte(fmt.Sprint(r.IntN(4)))
	}
	k := runtime.MakeKey([]byte(fmt.Sprintf("k%d", r.IntN(keys))), ns, p.maxP)
	val := bytesOf(r, 40)
	switch x := r.IntN(20); {
	case x == 0:
		p.check("Clear", st[0].Clear(k), st[1].Clear(k))
		return
	case x == 1:
		p.check("DeleteAll", st[0].DeleteAll(k), st[1].DeleteAll(k))
		return
	}
	switch a := st[0].(type) {
	case runtime.ValueState:
		p.check("Put", a.Put(k, val), st[1].(runtime.ValueState).Put(k, val))
	case runtime.ListState:
		b := st[1].(runtime.ListState)
		switch r.IntN(4) {
		case 0:
			elems := [][]byte{val, bytesOf(r, 5)}
			p.check("Replace", a.Replace(k, elems), b.Replace(k, elems))
		case 1:
			elems := [][]byte{val, bytesOf(r, 300)}
			p.check("AddAll", a.AddAll(k, elems), b.AddAll(k, elems))
		default:
			p.check("Add", a.Add(k, val), b.Add(k, val))
		}
	case runtime.MapState:
		b := st[1].(runtime.MapState)
		uk := []byte(fmt.Sprintf("u%d", r.IntN(60)))
		if r.IntN(4) == 0 {
			p.check("Delete", a.Delete(k, uk), b.Delete(k, uk))
		} else {
			p.check("Put", a.Put(k, uk, val), b.Put(k, uk, val))
		}
	}
}

// seeded returns a random source of a seed it logs, so that a failure can
// be replayed.
func seeded(t *testing.T, stream uint64) *rand.Rand {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, stream))
}

// drive calls op ops times, and after a call takes a snapshot of both
// stores (two calls in every) while fewer than most are live, or checks
// and releases a random live one (as often): each is checked against the
// model at the time it was taken. The snapshots live at the end are
// checked then.
func (p *pair) drive(r *rand.Rand, ops, every, most int, op func(i int)) {
	p.t.Helper()
	var live []snapPair
	for i := range ops {
		op(i)
		switch x := r.IntN(every); {
		case x < 2 && len(live) < most:
			live = append(live, p.snapshot())
		case x < 4 && len(live) > 0:
			j := r.IntN(len(live))
			p.verify(live[j], fmt.Sprintf("op %d", i))
			live = append(live[:j], live[j+1:]...)
		}
	}
	for _, s := range live {
		p.verify(s, "end")
	}
}

type snapPair struct {
	cow  runtime.Snapshot
	want storetest.Contents
}

func (p *pair) snapshot() snapPair {
	p.t.Helper()
	c, err := p.cow.Snapshot()
	p.check("Snapshot", err)
	m, err := p.model.Snapshot()
	p.check("model Snapshot", err)
	want, err := storetest.Dump(m)
	p.check("Dump of the model", err)
	return snapPair{c, want}
}

// verify compares a snapshot with the model at the time it was taken, and
// releases it.
func (p *pair) verify(s snapPair, what string) {
	p.t.Helper()
	got, err := storetest.Dump(s.cow)
	p.check("Dump of a cow snapshot", err)
	if d := cmp.Diff(s.want, got); d != "" {
		p.t.Fatalf("%s: snapshot differs from the model at the time it was taken (-want +got):\n%s", what, d)
	}
	p.check("Release", s.cow.Release())
}

// TestSnapshotsEqualModelAtTheirTime applies random operations to a cow
// store and the reference model, takes snapshots of both at random moments,
// keeps several live while writing on, and checks each, when released in
// random order, against the model's snapshot from the same moment. Small
// slabs and eager compaction put rehashing, copy-on-write of pages, trees
// and entries, and compaction under live snapshots all in play.
func TestSnapshotsEqualModelAtTheirTime(t *testing.T) {
	for _, opts := range []Options{
		{StoreConfig: runtime.StoreConfig{MaxParallelism: 2}},
		{StoreConfig: runtime.StoreConfig{MaxParallelism: 4}, MaxSlabSize: 1 << 10, CompactionMinGarbage: 1},
	} {
		t.Run(fmt.Sprintf("slab=%d,compact=%d", opts.MaxSlabSize, opts.CompactionMinGarbage), func(t *testing.T) {
			p, r := newPair(t, opts), seeded(t, 7)
			ops := 10000
			if testing.Short() {
				ops = 3000
			}
			p.drive(r, ops, 400, 4, func(int) { p.op(r, 400) })
			last := p.snapshot()
			p.verify(last, "final")
			if n := p.cow.LiveSnapshots(); n != 0 {
				t.Fatalf("LiveSnapshots() = %d after every snapshot was released", n)
			}
		})
	}
}

// TestRehashWhileSnapshotsLive takes snapshots while a table is halfway
// through an incremental rehash, and keeps writing (inserts, overwrites,
// deletes) until the rehash ends and the next begins, checking every
// snapshot against the model.
func TestRehashWhileSnapshotsLive(t *testing.T) {
	p := newPair(t, Options{StoreConfig: runtime.StoreConfig{MaxParallelism: 1}})
	value := p.states[0]
	vs := value[0].(valueState)
	r := rand.New(rand.NewPCG(1, 2))
	key := func(i int) runtime.Key { return runtime.MakeKey([]byte(fmt.Sprintf("key%06d", i)), nil, 1) }
	var live []snapPair
	rehashSnaps, next := 0, 0
	for round := 0; rehashSnaps < 6 && round < 200000; round++ {
		var k runtime.Key
		switch r.IntN(10) {
		case 0:
			k = key(r.IntN(next + 1))
			p.check("Clear", value[0].Clear(k), value[1].Clear(k))
			continue
		case 1, 2:
			k = key(r.IntN(next + 1))
		default:
			k = key(next)
			next++
		}
		v := []byte(fmt.Sprint(round))
		p.check("Put", value[0].(runtime.ValueState).Put(k, v), value[1].(runtime.ValueState).Put(k, v))
		tb := vs.tabs[0]
		if tb.main.odir != nil && tb.main.mig > 0 && tb.main.mig < 1<<tb.main.ologcap/2 && len(live) < 3 && r.IntN(8) == 0 {
			live = append(live, p.snapshot())
			rehashSnaps++
		}
		if tb.main.odir == nil && len(live) > 0 && r.IntN(4) == 0 {
			p.verify(live[0], fmt.Sprintf("round %d", round))
			live = live[1:]
		}
	}
	if rehashSnaps < 6 {
		t.Fatalf("only %d snapshots were taken during a rehash", rehashSnaps)
	}
	for _, s := range live {
		p.verify(s, "end")
	}
}

// TestNoCopyWithoutLiveSnapshot pins that once no snapshot is live,
// overwrites happen in place: no page, entry or node is copied.
func TestNoCopyWithoutLiveSnapshot(t *testing.T) {
	s, err := New(Options{StoreConfig: runtime.StoreConfig{MaxParallelism: 1}})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := s.Register(runtime.StateSpec{Name: "v", Kind: runtime.KindValue})
	ms, _ := s.Register(runtime.StateSpec{Name: "m", Kind: runtime.KindMap})
	v, m := st.(valueState), ms.(mapState)
	val := make([]byte, 24)
	mk := func(i int) runtime.Key { return runtime.MakeKey([]byte(fmt.Sprint(i)), nil, 1) }
	for i := range 5000 {
		if err := v.Put(mk(i), val); err != nil {
			t.Fatal(err)
		}
		if err := m.Put(mk(0), []byte(fmt.Sprint(i)), val); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Release(); err != nil {
		t.Fatal(err)
	}
	vt, mt := v.tabs[0], m.tabs[0]
	for vt.main.odir != nil {
		vt.migrate(&vt.main, 1<<20)
	}
	vused, mused := vt.Used, mt.Used
	pages := append([]pg(nil), vt.main.dir...)
	for i := range 5000 {
		val[0] = byte(i)
		if err := v.Put(mk(i), val); err != nil {
			t.Fatal(err)
		}
		if err := m.Put(mk(0), []byte(fmt.Sprint(i)), val); err != nil {
			t.Fatal(err)
		}
	}
	if vt.Used != vused || mt.Used != mused {
		t.Fatalf("overwrites with no live snapshot allocated: value arena %d -> %d, map arena %d -> %d", vused, vt.Used, mused, mt.Used)
	}
	for i, p := range vt.main.dir {
		if &p.b[0] != &pages[i].b[0] {
			t.Fatalf("page %d was copied with no live snapshot", i)
		}
	}
}

// TestFirstMapPutAfterSnapshotCopiesLittle pins that the first Put into a
// key's 10,000-entry map after a snapshot copies a path of the tree, not
// the map.
func TestFirstMapPutAfterSnapshotCopiesLittle(t *testing.T) {
	for _, kind := range []runtime.Kind{runtime.KindMap, runtime.KindSortedMap} {
		s, err := New(Options{})
		if err != nil {
			t.Fatal(err)
		}
		st, _ := s.Register(runtime.StateSpec{Name: "m", Kind: kind})
		ms := st.(runtime.MapState)
		k := runtime.MakeKey([]byte("user"), nil, s.Config().MaxParallelism)
		val := make([]byte, 24)
		for i := range 10000 {
			if err := ms.Put(k, []byte(fmt.Sprintf("%05d", i)), val); err != nil {
				t.Fatal(err)
			}
		}
		var tb *table
		switch x := st.(type) {
		case mapState:
			tb = x.tabs[k.Group()]
		case sortedMapState:
			tb = x.tabs[k.Group()]
		}
		snap, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		before := tb.Used
		val[0] = 1
		if err := ms.Put(k, []byte("05000"), val); err != nil {
			t.Fatal(err)
		}
		// A root-to-leaf path of three or four nodes and the new entry.
		if grew := tb.Used - before; grew > int64(4*innerSize+leafSize(btMax)+64) {
			t.Fatalf("%v: the first Put after a snapshot allocated %d bytes", kind, grew)
		}
		got, err := storetest.Dump(snap)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range got.States["m"].Groups[k.Group()] {
			if rec.UserKey == "05000" && rec.Value[0] != 0 {
				t.Fatalf("%v: the snapshot sees the write made after it", kind)
			}
		}
		if err := snap.Release(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGetPathsAgree checks Get against the model over keys, namespaces and
// values of the lengths that choose between Get's inline fast path and its
// general path: one-byte and longer length prefixes, 8-byte keys, values
// inline and out of line, keyed and sub-keyed states, before and after
// overwrites that change a value's length, and during a rehash.
func TestGetPathsAgree(t *testing.T) {
	p := newPair(t, Options{StoreConfig: runtime.StoreConfig{MaxParallelism: 2}})
	r := rand.New(rand.NewPCG(3, 4))
	lengths := []int{0, 1, 7, 8, 9, 100, 127, 128, 300}
	var keys []runtime.Key
	for i := range 400 {
		kl := lengths[i%len(lengths)]
		k := make([]byte, kl)
		for j := range k {
			k[j] = byte(r.IntN(256))
		}
		if kl > 0 {
			k[0] = byte(i)
			if kl > 1 {
				k[1] = byte(i >> 8)
			}
		}
		keys = append(keys, runtime.MakeKey(k, nil, p.maxP))
	}
	for _, st := range p.states {
		a, ok := st[0].(runtime.ValueState)
		if !ok {
			continue
		}
		b := st[1].(runtime.ValueState)
		for round := range 4 {
			for i, k := range keys {
				if st[0].Spec().SubKeyed {
					k = k.WithNamespace([]byte(fmt.Sprint(i % 3)))
				}
				if (i+round)%3 == 0 {
					v := make([]byte, lengths[(i+round)%len(lengths)])
					p.check("Put", a.Put(k, v), b.Put(k, v))
				}
				got, gotOK, err1 := a.Get(k)
				want, wantOK, err2 := b.Get(k)
				p.check("Get", err1, err2)
				if gotOK != wantOK || string(got) != string(want) {
					t.Fatalf("%v: Get(%x) = %x, %v; the model has %x, %v", st[0].Spec(), k.Bytes(), got, gotOK, want, wantOK)
				}
			}
		}
	}
}

// TestSnapshotAllocatesPerState: the synchronous phase of a snapshot
// allocates per state, not per state and key group — the views of a freed
// snapshot's tables are recycled — and the recycled views read what their
// own snapshot saw, not what the earlier one did.
func TestSnapshotAllocatesPerState(t *testing.T) {
	allocs := func(maxP int) float64 {
		s, err := New(Options{StoreConfig: runtime.StoreConfig{MaxParallelism: maxP}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var states []runtime.ValueState
		for i := range 4 {
			st, err := s.Register(runtime.StateSpec{Name: fmt.Sprintf("v%d", i), Kind: runtime.KindValue})
			if err != nil {
				t.Fatal(err)
			}
			states = append(states, st.(runtime.ValueState))
		}
		// Every state has a table in every key group.
		for i := range 64 * maxP {
			k := runtime.MakeKey(runtime.AppendInt64Key(nil, int64(i)), nil, maxP)
			for _, st := range states {
				if err := st.Put(k, []byte{1}); err != nil {
					t.Fatal(err)
				}
			}
		}
		return testing.AllocsPerRun(20, func() {
			snap, err := s.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if err := snap.Release(); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := allocs(8), allocs(512)
	if large != small {
		t.Errorf("a snapshot of 4 states allocates %v times in 8 key groups and %v times in 512: want the same", small, large)
	}

	// Each snapshot recycles the views of the one before it, and reads
	// what the store held at its own time.
	p := newPair(t, Options{StoreConfig: runtime.StoreConfig{MaxParallelism: 4}})
	r := rand.New(rand.NewPCG(7, 7))
	for round := range 30 {
		for range 300 {
			p.op(r, 100)
		}
		s := p.snapshot()
		for range 300 {
			p.op(r, 100)
		}
		p.verify(s, fmt.Sprintf("round %d", round))
	}
}

// TestNamespaceIndexWrittenInPlace pins that the namespace index of a
// sub-keyed state, which no snapshot reads, is written in place while a
// snapshot is live: a new namespace of a key changes the key's record in
// the index without copying its page, and the snapshot still reads the
// state as it was.
func TestNamespaceIndexWrittenInPlace(t *testing.T) {
	s, err := New(Options{StoreConfig: runtime.StoreConfig{MaxParallelism: 1}})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := s.Register(runtime.StateSpec{Name: "v", Kind: runtime.KindValue, SubKeyed: true})
	v := st.(valueState)
	val := make([]byte, 8)
	mk := func(i int, ns string) runtime.Key { return runtime.MakeKey([]byte(fmt.Sprint(i)), []byte(ns), 1) }
	const keys = 3000
	for i := range keys {
		if err := v.Put(mk(i, "a"), val); err != nil {
			t.Fatal(err)
		}
	}
	tb := v.tabs[0]
	for tb.nsIdx.odir != nil {
		tb.migrate(&tb.nsIdx, 1<<20)
	}
	want, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	taken, err := storetest.Dump(want)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := want.Release(); err != nil {
		t.Fatal(err)
	}
	pages := append([]pg(nil), tb.nsIdx.dir...)
	for i := range keys {
		if err := v.Put(mk(i, "b"), val); err != nil {
			t.Fatal(err)
		}
	}
	if len(tb.nsIdx.dir) != len(pages) {
		t.Fatalf("the namespace index was rehashed (%d pages, then %d): the test needs fewer keys", len(pages), len(tb.nsIdx.dir))
	}
	for i, p := range tb.nsIdx.dir {
		if &p.b[0] != &pages[i].b[0] {
			t.Fatalf("page %d of the namespace index was copied under a live snapshot", i)
		}
	}
	got, err := storetest.Dump(snap)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(taken, got); d != "" {
		t.Fatalf("the snapshot changed (-taken +now):\n%s", d)
	}
	if err := snap.Release(); err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		var nss []string
		if err := v.Namespaces(mk(i, ""), func(ns []byte) bool { nss = append(nss, string(ns)); return true }); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(nss) != "[a b]" {
			t.Fatalf("key %d: namespaces %v, want [a b]", i, nss)
		}
	}
}
