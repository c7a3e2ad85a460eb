package btree

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stategen/stategen/backends/internal/entryidx"
	"github.com/stategen/stategen/runtime"
)

// checkIndexes checks the entry index of every tree of s against the
// tree: each live record names an item key the tree holds, with the
// item's region and value length. It returns the number of live records.
func checkIndexes(t *testing.T, s *Store, what string) int {
	t.Helper()
	total := 0
	for name, st := range s.states {
		for i, tr := range st.trees {
			if tr == nil {
				continue
			}
			n := 0
			tr.idx.Each(func(r *entryidx.Rec) {
				total++
				n++
				ik := r.Key[:r.KL]
				p := tr.probe(ik)
				if want := uint32(itemHash(&p) >> 32); r.Hash() != want {
					t.Fatalf("%s: state %s, tree %d: the record of %x has hash %x, want %x", what, name, i, ik, r.Hash(), want)
				}
				x, ok := tr.bt.Get(p)
				if !ok || x.ref != r.Ref || x.vl != r.Aux {
					t.Fatalf("%s: state %s, tree %d: the index has %x at region %x, %d bytes; the tree: %v, %x, %d", what, name, i, ik, r.Ref, r.Aux, ok, x.ref, x.vl)
				}
			})
			// find answers "absent" without a descent when the index holds
			// as many records as the tree holds items.
			if n != tr.idx.Len() || n > tr.bt.Len() {
				t.Fatalf("%s: state %s, tree %d: %d live records, the index counts %d, the tree holds %d items", what, name, i, n, tr.idx.Len(), tr.bt.Len())
			}
		}
	}
	return total
}

// TestEntryIndexAgreesWithTree drives value and map states of a store
// with random reads (which fill the entry index) and writes — Put, Update
// with values of the old length and of others, Delete, Clear, DeleteAll —
// over few keys, while snapshots are taken and released (so that writes
// put values in new regions) and trees compact; every read is checked
// against a Go map, and after every operation every tree's index against
// the tree (checkIndexes).
func TestEntryIndexAgreesWithTree(t *testing.T) {
	for _, o := range []Options{
		{StoreConfig: runtime.StoreConfig{MaxParallelism: 2}},
		{StoreConfig: runtime.StoreConfig{MaxParallelism: 2}, Degree: 2, MaxSlabSize: 1 << 10, CompactionMinGarbage: 1},
	} {
		t.Run(fmt.Sprintf("degree=%d/minGarbage=%d", o.Degree, o.CompactionMinGarbage), func(t *testing.T) {
			seed := rand.Uint64()
			t.Logf("seed %d", seed)
			r := rand.New(rand.NewPCG(seed, 3))
			s, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			type state struct {
				st    runtime.State
				model map[string]string // key/ns/uk -> value
			}
			var states []state
			for _, spec := range []runtime.StateSpec{
				{Name: "v", Kind: runtime.KindValue},
				{Name: "vs", Kind: runtime.KindValue, SubKeyed: true},
				{Name: "m", Kind: runtime.KindMap},
				{Name: "sm", Kind: runtime.KindSortedMap, SubKeyed: true},
			} {
				st, err := s.Register(spec)
				if err != nil {
					t.Fatal(err)
				}
				states = append(states, state{st, map[string]string{}})
			}
			var live []runtime.Snapshot
			most := 0
			for op := range 20000 {
				for _, st := range s.states {
					st.gate.SetCold(false) // every read uses the index
				}
				x := states[r.IntN(len(states))]
				spec := x.st.Spec()
				var ns []byte
				if spec.SubKeyed {
					ns = []byte{byte(r.IntN(3))}
				}
				key := fmt.Appendf(nil, "k%d", r.IntN(8))
				if r.IntN(10) == 0 {
					key = append(key, "-long-enough-not-to-be-indexed"...)
				}
				k := runtime.MakeKey(key, ns, s.Config().MaxParallelism)
				var uk []byte
				if spec.Kind.HasUserKey() {
					uk = fmt.Appendf(nil, "u%d", r.IntN(30))
				}
				id := fmt.Sprintf("%x/%x/%x", key, ns, uk)
				val := fmt.Sprintf("%03d", r.IntN(1000))[:1+r.IntN(3)]
				get := func() ([]byte, bool, error) {
					if vs, ok := x.st.(runtime.ValueState); ok {
						return vs.Get(k)
					}
					return x.st.(runtime.MapState).Get(k, uk)
				}
				switch c := r.IntN(100); {
				case c < 35:
					got, ok, err := get()
					want, wok := x.model[id]
					if err != nil || ok != wok || string(got) != want {
						t.Fatalf("op %d: Get %s = %q, %v, %v; want %q, %v", op, id, got, ok, err, want, wok)
					}
				case c < 65:
					fn := func(old []byte, found bool) ([]byte, error) {
						if found && r.IntN(2) == 0 {
							return []byte(fmt.Sprintf("%0*d", len(old), r.IntN(10))), nil // the old length
						}
						return []byte(val), nil
					}
					var got []byte
					wrap := func(old []byte, found bool) ([]byte, error) {
						nv, err := fn(old, found)
						got = nv
						return nv, err
					}
					if vs, ok := x.st.(runtime.ValueUpdater); ok {
						err = vs.Update(k, wrap)
					} else {
						err = x.st.(runtime.MapUpdater).Update(k, uk, wrap)
					}
					if err != nil {
						t.Fatal(err)
					}
					x.model[id] = string(got)
				case c < 80:
					if vs, ok := x.st.(runtime.ValueState); ok {
						err = vs.Put(k, []byte(val))
					} else {
						err = x.st.(runtime.MapState).Put(k, uk, []byte(val))
					}
					if err != nil {
						t.Fatal(err)
					}
					x.model[id] = val
				case c < 96:
					if _, ok := x.st.(runtime.ValueState); ok {
						err = x.st.Clear(k) // a value's Delete
					} else {
						err = x.st.(runtime.MapState).Delete(k, uk)
					}
					if err != nil {
						t.Fatal(err)
					}
					delete(x.model, id)
				case c < 98:
					if err := x.st.Clear(k); err != nil {
						t.Fatal(err)
					}
					prefix := fmt.Sprintf("%x/%x/", key, ns)
					for id := range x.model {
						if len(id) >= len(prefix) && id[:len(prefix)] == prefix {
							delete(x.model, id)
						}
					}
				default:
					if err := x.st.DeleteAll(k); err != nil {
						t.Fatal(err)
					}
					prefix := fmt.Sprintf("%x/", key)
					for id := range x.model {
						if len(id) >= len(prefix) && id[:len(prefix)] == prefix {
							delete(x.model, id)
						}
					}
				}
				most = max(most, checkIndexes(t, s, fmt.Sprintf("op %d", op)))
				switch c := r.IntN(300); {
				case c < 2 && len(live) < 3:
					snap, err := s.Snapshot()
					if err != nil {
						t.Fatal(err)
					}
					live = append(live, snap)
				case c < 4 && len(live) > 0:
					j := r.IntN(len(live))
					if err := live[j].Release(); err != nil {
						t.Fatal(err)
					}
					live = append(live[:j], live[j+1:]...)
				}
			}
			for _, snap := range live {
				_ = snap.Release()
			}
			if most == 0 {
				t.Fatal("the entry index never held an entry")
			}
			t.Logf("the indexes held up to %d entries", most)
		})
	}
}

// TestEntryIndexFilledByReads checks which reads and writes fill a tree's
// index: a Get of a value does, and an Update that creates an entry; a
// Put does not, nor anything with Options.DisableEntryIndex, nor a list's
// Get.
func TestEntryIndexFilledByReads(t *testing.T) {
	for _, disable := range []bool{false, true} {
		s, err := New(Options{DisableEntryIndex: disable})
		if err != nil {
			t.Fatal(err)
		}
		v, err := s.Register(runtime.StateSpec{Name: "v", Kind: runtime.KindValue})
		if err != nil {
			t.Fatal(err)
		}
		l, err := s.Register(runtime.StateSpec{Name: "l", Kind: runtime.KindList})
		if err != nil {
			t.Fatal(err)
		}
		k := runtime.MakeKey([]byte("key"), nil, s.Config().MaxParallelism)
		if err := v.(runtime.ValueState).Put(k, []byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := l.(runtime.ListState).Add(k, []byte("x")); err != nil {
			t.Fatal(err)
		}
		tv, tl := s.states["v"].groupTree(k.Group()), s.states["l"].groupTree(k.Group())
		if n := tv.idx.Len(); n != 0 {
			t.Fatalf("disable=%v: a Put indexed %d items", disable, n)
		}
		// A Put leaves its item remembered; a Put of another key forgets it.
		other := runtime.MakeKey([]byte("other"), nil, s.Config().MaxParallelism)
		if err := v.(runtime.ValueState).Put(other, []byte("y")); err != nil {
			t.Fatal(err)
		}
		if got, ok, err := v.(runtime.ValueState).Get(k); err != nil || !ok || string(got) != "x" {
			t.Fatalf("Get = %q, %v, %v", got, ok, err)
		}
		if err := l.(runtime.ListState).Get(k, func([]byte) bool { return true }); err != nil {
			t.Fatal(err)
		}
		want := 1
		if disable {
			want = 0
		}
		if n := tv.idx.Len(); n != want {
			t.Fatalf("disable=%v: after a Get the value tree's index holds %d items, want %d", disable, n, want)
		}
		if n := tl.idx.Len(); n != 0 {
			t.Fatalf("a list Get indexed %d items", n)
		}
		m, err := s.Register(runtime.StateSpec{Name: "m", Kind: runtime.KindMap})
		if err != nil {
			t.Fatal(err)
		}
		count := func(old []byte, found bool) ([]byte, error) { return append(old[:len(old):len(old)], 1), nil }
		for _, uk := range []string{"a", "b"} {
			if err := m.(runtime.MapUpdater).Update(k, []byte(uk), count); err != nil {
				t.Fatal(err)
			}
		}
		if err := m.(runtime.MapState).Put(k, []byte("c"), []byte("x")); err != nil {
			t.Fatal(err)
		}
		want = 2
		if disable {
			want = 0
		}
		if n := s.states["m"].groupTree(k.Group()).idx.Len(); n != want {
			t.Fatalf("disable=%v: after two Updates that made entries and a Put, the map tree's index holds %d items, want %d", disable, n, want)
		}
		checkIndexes(t, s, fmt.Sprintf("disable=%v", disable))
		_ = s.Close()
	}
}
