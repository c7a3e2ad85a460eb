package cow

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stategen/stategen/backends/internal/arena"
	"github.com/stategen/stategen/backends/internal/entryidx"
	"github.com/stategen/stategen/runtime"
)

// checkEntryIndex checks the entry index of every table of every map state
// of p's cow store against the trees: each live record names an entry
// that its (key, namespace) tree holds at the record's ref, under the
// record's hash; the count of live records is the index's n. It returns
// the number of live records.
func checkEntryIndex(t *testing.T, p *pair, what string) int {
	t.Helper()
	total := 0
	for _, st := range p.states {
		s := mapStateOf(st[0])
		if s == nil {
			continue
		}
		for kg, tab := range s.tabs {
			if tab == nil {
				continue
			}
			x := &tab.idx
			live := 0
			x.Each(func(r *entryidx.Rec) {
				live++
				key, ns := r.Key[:r.Split], r.Key[r.Split:r.KL]
				uk := itemKey(arena.At(tab.Slabs, r.Ref))
				h := runtime.HashKey(key)
				if s.spec.SubKeyed {
					h ^= nsHash(ns)
				}
				if want := uint32(ixHash(h, uk) >> 32); r.Hash() != want {
					t.Fatalf("%s: state %s, key group %d: the record of (%x, %x, %x) has hash %x, want %x", what, s.spec.Name, kg, key, ns, uk, r.Hash(), want)
				}
				ref, _, ok := treeGet(tab.Slabs, &tab.main, h, key, ns, uk)
				if !ok || ref != r.Ref {
					t.Fatalf("%s: state %s, key group %d: the index has (%x, %x, %x) at ref %x; the tree has it: %v, at %x", what, s.spec.Name, kg, key, ns, uk, r.Ref, ok, ref)
				}
			})
			if live != x.Len() {
				t.Fatalf("%s: state %s, key group %d: %d live records, Len %d", what, s.spec.Name, kg, live, x.Len())
			}
			total += live
		}
	}
	return total
}

// mapStateOf returns the state of a cow map state, nil for another kind.
func mapStateOf(st runtime.State) *state {
	switch c := st.(type) {
	case mapState:
		return c.state
	case sortedMapState:
		return c.state
	}
	return nil
}

// mapOp applies one random operation to a map state of both stores of p,
// reads included (they fill the entry index), and checks what reads
// return against the model. Without clears it neither clears a map nor
// deletes all of a key's.
func mapOp(t *testing.T, p *pair, r *rand.Rand, maps []int, keys, uks int, clears bool) {
	t.Helper()
	st := p.states[maps[r.IntN(len(maps))]]
	a, b := st[0].(runtime.MapState), st[1].(runtime.MapState)
	var ns []byte
	if st[0].Spec().SubKeyed {
		ns = []byte{byte(r.IntN(3))}
	}
	key := fmt.Appendf(nil, "k%d", r.IntN(keys))
	if r.IntN(10) == 0 {
		key = append(key, bytes.Repeat([]byte{'y'}, entryidx.KeyMax)...) // not indexable
	}
	k := runtime.MakeKey(key, ns, p.maxP)
	uk := fmt.Appendf(nil, "u%d", r.IntN(uks))
	if r.IntN(8) == 0 {
		uk = append(uk, bytes.Repeat([]byte{'x'}, 9)...) // past ixHash's first 8 bytes
	}
	switch x := r.IntN(100); {
	case x < 30:
		got, gok, err1 := a.Get(k, uk)
		want, wok, err2 := b.Get(k, uk)
		p.check("Get", err1, err2)
		if gok != wok || !bytes.Equal(got, want) {
			t.Fatalf("Get(%q, %q, %q) = %q, %v; the model has %q, %v", k.Bytes(), ns, uk, got, gok, want, wok)
		}
	case x < 65:
		// A count whose length changes now and then (a new ref), and
		// sometimes a value of another length altogether.
		grow := r.IntN(10) == 0
		fn := func(old []byte, found bool) ([]byte, error) {
			nv := append([]byte(nil), old...)
			if len(nv) == 0 {
				nv = []byte{0}
			}
			nv[0]++
			if grow || nv[0] == 0 {
				nv = append(nv, 'g')
			}
			return nv, nil
		}
		want, wok, err := b.Get(k, uk)
		p.check("model Get", err)
		nv, _ := fn(want, wok)
		p.check("Update", a.(runtime.MapUpdater).Update(k, uk, fn), b.Put(k, uk, nv))
	case x < 80:
		v := bytesOf(r, 12)
		p.check("Put", a.Put(k, uk, v), b.Put(k, uk, v))
	case x < 92:
		p.check("Delete", a.Delete(k, uk), b.Delete(k, uk))
	case x < 95 && clears:
		p.check("Clear", st[0].Clear(k), st[1].Clear(k))
	case x < 97 && clears:
		p.check("DeleteAll", st[0].DeleteAll(k), st[1].DeleteAll(k))
	default:
		// Edit: drop odd counts, bump the rest.
		edit := func(_, v []byte) (runtime.MapEdit, error) {
			if len(v) > 0 && v[0]%2 == 1 {
				return runtime.MapEdit{Action: runtime.EditDelete}, nil
			}
			return runtime.MapEdit{Action: runtime.EditReplace, Value: append(append([]byte(nil), v...), 'e')}, nil
		}
		p.check("Edit", a.Edit(k, edit), b.Edit(k, edit))
	}
}

// TestEntryIndexAgreesWithTrees drives map states of a cow store and the
// reference model with random reads and writes — Get, Update, Put,
// Delete, Clear, DeleteAll and Edit over few keys and user keys, long user
// keys among them — while snapshots are taken and released (so that
// writes give entries new refs) and tables compact. Every read agrees with
// the model, and after every operation the entry index of every table
// agrees with its trees (checkEntryIndex). One key group holds every
// entry, so that the index also grows to its bound and starts over.
func TestEntryIndexAgreesWithTrees(t *testing.T) {
	for _, opts := range []Options{
		{StoreConfig: runtime.StoreConfig{MaxParallelism: 1}},
		{StoreConfig: runtime.StoreConfig{MaxParallelism: 2}, MaxSlabSize: 1 << 10, CompactionMinGarbage: 1},
	} {
		t.Run(fmt.Sprintf("maxP=%d,compact=%d", opts.MaxParallelism, opts.CompactionMinGarbage), func(t *testing.T) {
			p, r := newPair(t, opts), seeded(t, 11)
			var maps []int
			for i, st := range p.states {
				if k := st[0].Spec().Kind; k == runtime.KindMap || k == runtime.KindSortedMap {
					maps = append(maps, i)
				}
			}
			ops, most := 20000, 0
			if testing.Short() {
				ops = 5000
			}
			p.drive(r, ops, 300, 3, func(i int) {
				keys, uks, clears := 6, 40, true
				if i%5000 > 2500 {
					// More entries than the index holds at first, and
					// no Clear to empty it: it grows to its bound.
					keys, uks, clears = 20, 400, false
				}
				for _, i := range maps {
					mapStateOf(p.states[i][0]).gate.SetCold(false) // every read uses the index
				}
				mapOp(t, p, r, maps, keys, uks, clears)
				most = max(most, checkEntryIndex(t, p, fmt.Sprintf("op %d", i)))
			})
			if most == 0 {
				t.Fatal("the entry index never held an entry")
			}
			t.Logf("the index held up to %d entries", most)
		})
	}
}

// TestEntryIndexServesRereads checks that the index is used: a map entry
// read once is then read from the index (a tree made unreadable behind
// its back does not stop the read), and that DisableEntryIndex keeps it
// empty.
func TestEntryIndexServesRereads(t *testing.T) {
	for _, disable := range []bool{false, true} {
		s, err := New(Options{DisableEntryIndex: disable})
		if err != nil {
			t.Fatal(err)
		}
		st, err := s.Register(runtime.StateSpec{Name: "m", Kind: runtime.KindMap})
		if err != nil {
			t.Fatal(err)
		}
		m := st.(mapState)
		k := runtime.MakeKey([]byte("key"), nil, s.Config().MaxParallelism)
		if err := m.Put(k, []byte("uk"), []byte("v1")); err != nil {
			t.Fatal(err)
		}
		tab := m.tabs[k.Group()]
		if tab.idx.Len() != 0 {
			t.Fatalf("disable=%v: a Put indexed its entry (n = %d)", disable, tab.idx.Len())
		}
		if v, ok, err := m.Get(k, []byte("uk")); err != nil || !ok || string(v) != "v1" {
			t.Fatalf("Get = %q, %v, %v", v, ok, err)
		}
		want := 1
		if disable {
			want = 0
		}
		if tab.idx.Len() != want {
			t.Fatalf("disable=%v: after a Get the index holds %d entries, want %d", disable, tab.idx.Len(), want)
		}
		if disable {
			continue
		}
		// Hide the (key, namespace) record from the tree path: only the
		// index can answer now.
		saved := tab.main
		tab.main = htab{}
		v, ok, err := m.Get(k, []byte("uk"))
		tab.main = saved
		if err != nil || !ok || string(v) != "v1" {
			t.Fatalf("Get from the index = %q, %v, %v; want v1", v, ok, err)
		}
		if err := m.Delete(k, []byte("uk")); err != nil {
			t.Fatal(err)
		}
		if tab.idx.Len() != 0 {
			t.Fatalf("after Delete the index holds %d entries", tab.idx.Len())
		}
		_ = s.Close()
	}
}

// TestEntryIndexGate checks the gate of a state's entry index: uniform
// reads over many more entries than a window reads twice turn the index
// cold (it then holds only what the sampled reads added), and reads that
// come back to a few entries turn it warm again.
func TestEntryIndexGate(t *testing.T) {
	s, err := New(Options{StoreConfig: runtime.StoreConfig{MaxParallelism: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Register(runtime.StateSpec{Name: "m", Kind: runtime.KindMap})
	if err != nil {
		t.Fatal(err)
	}
	m := st.(mapState)
	k := runtime.MakeKey([]byte("key"), nil, 1)
	const entries = 100000
	uk := func(i int) []byte { return fmt.Appendf(nil, "%06d", i) }
	for i := range entries {
		if err := m.Put(k, uk(i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	read := func(i int) {
		t.Helper()
		if v, ok, err := m.Get(k, uk(i)); err != nil || !ok || string(v) != "v" {
			t.Fatalf("Get(%d) = %q, %v, %v", i, v, ok, err)
		}
	}
	for range 2 * entryidx.Window {
		read(r.IntN(entries))
	}
	if !m.gate.Cold() {
		t.Fatalf("after %d uniform reads of %d entries the index is warm", 2*entryidx.Window, entries)
	}
	n := m.tabs[0].idx.Len()
	for range entryidx.Window {
		read(r.IntN(entries))
	}
	if added := m.tabs[0].idx.Len() - n; added > entryidx.Window/entryidx.ColdSample+1 {
		t.Fatalf("a cold index took %d entries in %d reads", added, entryidx.Window)
	}
	for i := range 2 * entryidx.Window * entryidx.ColdSample {
		read(i % 50)
	}
	if m.gate.Cold() {
		t.Fatalf("after %d reads of 50 entries the index is cold", 2*entryidx.Window*entryidx.ColdSample)
	}
}

// TestEntryIndexAfterCompaction compacts a table whose index holds every
// entry of its map: every entry moves, and the index must not keep a ref.
func TestEntryIndexAfterCompaction(t *testing.T) {
	p := newPair(t, Options{StoreConfig: runtime.StoreConfig{MaxParallelism: 1}})
	for _, st := range p.states {
		s := mapStateOf(st[0])
		if s == nil {
			continue
		}
		a := st[0].(runtime.MapState)
		k := runtime.MakeKey([]byte("key"), nil, 1)
		if s.spec.SubKeyed {
			k = runtime.MakeKey([]byte("key"), []byte("ns"), 1)
		}
		for i := range 100 {
			p.check("Put", a.Put(k, fmt.Appendf(nil, "uk%d", i), []byte("v")))
		}
		for i := range 100 {
			if _, ok, err := a.Get(k, fmt.Appendf(nil, "uk%d", i)); err != nil || !ok {
				t.Fatalf("%s: Get(uk%d) = %v, %v", s.spec.Name, i, ok, err)
			}
		}
		if s.tabs[0].idx.Len() != 100 {
			t.Fatalf("%s: the index holds %d of the 100 entries read", s.spec.Name, s.tabs[0].idx.Len())
		}
		s.tabs[0].compact()
		checkEntryIndex(t, p, s.spec.Name+" after compact")
		for i := range 100 {
			if v, ok, err := a.Get(k, fmt.Appendf(nil, "uk%d", i)); err != nil || !ok || string(v) != "v" {
				t.Fatalf("%s: after compact, Get(uk%d) = %q, %v, %v", s.spec.Name, i, v, ok, err)
			}
		}
	}
}
