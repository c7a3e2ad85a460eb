package checkpoint_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/stategen/stategen/backends/btree"
	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/checkpoint/checkpointtest"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"

	gocmp "github.com/google/go-cmp/cmp"
)

const incMaxP = 16

// incSpecs are the states of the incremental tests: every kind, keyed and
// sub-keyed.
var incSpecs = []runtime.StateSpec{
	{Name: "l", Kind: runtime.KindList, SubKeyed: true, Fingerprint: "f"},
	{Name: "m", Kind: runtime.KindMap, Fingerprint: "f"},
	{Name: "sm", Kind: runtime.KindSortedMap, SubKeyed: true, Fingerprint: "f"},
	{Name: "sv", Kind: runtime.KindValue, SubKeyed: true, Fingerprint: "f"},
	{Name: "v", Kind: runtime.KindValue, Fingerprint: "f"},
}

// incOps applies n random operations of every kind to the states of s,
// on few keys, so that they overwrite, clear and delete one another.
func incOps(t testing.TB, rng *rand.Rand, states map[string]runtime.State, n int) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil && !errors.Is(err, errStopTest) {
			t.Fatal(err)
		}
	}
	val := func() []byte { return fmt.Appendf(nil, "v%d", rng.IntN(1000)) }
	for range n {
		kb := fmt.Appendf(nil, "k%02d", rng.IntN(24))
		ns := fmt.Appendf(nil, "n%d", rng.IntN(3))
		uk := fmt.Appendf(nil, "u%d", rng.IntN(6))
		sk := runtime.MakeKey(kb, ns, incMaxP)
		kk := runtime.MakeKey(kb, nil, incMaxP)
		switch name := incSpecs[rng.IntN(len(incSpecs))].Name; name {
		case "v", "sv":
			st := states[name].(runtime.ValueState)
			k := kk
			if name == "sv" {
				k = sk
			}
			switch r := rng.IntN(10); {
			case r < 6:
				must(st.Put(k, val()))
			case r < 8:
				must(st.(runtime.ValueUpdater).Update(k, func(old []byte, _ bool) ([]byte, error) {
					if rng.IntN(4) == 0 {
						return nil, errStopTest // nothing written
					}
					return append(old, 'x'), nil
				}))
			case r < 9:
				must(st.Clear(k))
			default:
				must(st.DeleteAll(k))
			}
		case "l":
			st := states[name].(runtime.ListState)
			switch r := rng.IntN(10); {
			case r < 5:
				must(st.Add(sk, val()))
			case r < 7:
				must(st.AddAll(sk, [][]byte{val(), val()}))
			case r < 8:
				must(st.Replace(sk, [][]byte{val()}))
			case r < 9:
				must(st.Clear(sk))
			default:
				must(st.DeleteAll(sk))
			}
		default:
			st := states[name].(runtime.MapState)
			k := kk
			if name == "sm" {
				k = sk
			}
			switch r := rng.IntN(12); {
			case r < 5:
				must(st.Put(k, uk, val()))
			case r < 7:
				must(st.Delete(k, uk))
			case r < 8:
				must(st.(runtime.MapUpdater).Update(k, uk, func(old []byte, _ bool) ([]byte, error) { return append(old, 'y'), nil }))
			case r < 9:
				stop := rng.IntN(3)
				i := 0
				must(st.Edit(k, func(u, v []byte) (runtime.MapEdit, error) {
					i++
					switch {
					case i == stop:
						return runtime.MapEdit{Action: runtime.EditReplace, Value: []byte("edited")}, runtime.StopEdit
					case rng.IntN(2) == 0:
						return runtime.MapEdit{Action: runtime.EditDelete}, nil
					}
					return runtime.MapEdit{}, nil
				}))
			case r < 10:
				// An Edit whose callback fails applies nothing.
				err := st.Edit(k, func(u, v []byte) (runtime.MapEdit, error) {
					return runtime.MapEdit{Action: runtime.EditDelete}, errStopTest
				})
				if err != nil && !errors.Is(err, errStopTest) {
					t.Fatal(err)
				}
			case r < 11:
				must(st.Clear(k))
			default:
				must(st.DeleteAll(k))
			}
		}
	}
}

var errStopTest = errors.New("the test's callback fails")

// trackedModel returns a Tracker with chains of at most maxChain files over
// the reference model, closed when the test ends, and the states incSpecs
// registered through it.
func trackedModel(t *testing.T, maxChain int) (*checkpoint.Tracker, map[string]runtime.State) {
	t.Helper()
	inner, err := storetest.NewModel(runtime.StoreConfig{MaxParallelism: incMaxP})
	if err != nil {
		t.Fatal(err)
	}
	tr, list := checkpointtest.Track(t, inner, &checkpoint.TrackOptions{MaxChainLength: maxChain}, incSpecs...)
	states := make(map[string]runtime.State)
	for i, spec := range incSpecs {
		states[spec.Name] = list[i]
	}
	return tr, states
}

// canonical sorts the entries of every (state, key group) by key,
// namespace and user key, keeping list elements in order.
func canonical(d map[string]map[int][]rec) map[string]map[int][]rec {
	for _, groups := range d {
		for kg, recs := range groups {
			slices.SortStableFunc(recs, func(a, b rec) int {
				return cmp.Or(strings.Compare(a.Key, b.Key), strings.Compare(a.NS, b.NS), strings.Compare(a.UK, b.UK))
			})
			if len(recs) == 0 {
				delete(groups, kg)
			}
		}
	}
	return d
}

// restrictDump keeps the key groups kgs of d.
func restrictDump(d map[string]map[int][]rec, kgs runtime.KeyGroupRange) map[string]map[int][]rec {
	out := make(map[string]map[int][]rec)
	for s, groups := range d {
		out[s] = make(map[int][]rec)
		for kg, recs := range groups {
			if kgs.Contains(kg) {
				out[s][kg] = recs
			}
		}
	}
	return out
}

// TestIncrementalChains is a model-based test of incremental checkpoints:
// random operations of every kind through a Tracker, a checkpoint after
// each round, most of them completed (the others abandoned, so the next
// one's changes reach back further), old checkpoints deleted as a
// coordinator's retention would; every checkpoint, read back through its
// chain at one, two and three instances and restored into every backend,
// must hold exactly what the store held when its snapshot was taken.
func TestIncrementalChains(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			tr, states := trackedModel(t, 4)
			s := checkpoint.NewMem()
			var retained []string
			deltas, longest := 0, 0
			for i := 1; i <= 24; i++ {
				incOps(t, rng, states, 10+rng.IntN(60))
				ckpt, want, is := checkpointOnce(t, tr, s, i)
				if is.File.Delta {
					deltas++
				}
				longest = max(longest, len(is.Base)+1)
				if rng.IntN(5) == 0 {
					// Abandoned: the coordinator never completes it, and
					// deletes it at once.
					if err := checkpoint.Delete(ctx, s, ckpt); err != nil {
						t.Fatal(err)
					}
					continue
				}
				tr.Completed(ckpt)
				retained = append(retained, ckpt)
				// Retain two: the older go, their shared files stay.
				for len(retained) > 2 {
					if err := checkpoint.Delete(ctx, s, retained[0]); err != nil {
						t.Fatal(err)
					}
					retained = retained[1:]
				}
				checkRestores(t, s, ckpt, want)
			}
			if deltas == 0 || longest != 4 {
				t.Errorf("%d files of changes, longest chain %d files: want some, and chains as long as MaxChainLength (4)", deltas, longest)
			}
			// Whatever was deleted, the retained checkpoints restore, and
			// Cleanup finds nothing to remove.
			removed, err := checkpoint.Cleanup(ctx, s, nil)
			if err != nil || len(removed) != 0 {
				t.Errorf("Cleanup after retention = %q, %v; want nothing removed", removed, err)
			}
			for _, ckpt := range retained {
				r, err := checkpoint.Open(ctx, s, ckpt)
				if err != nil {
					t.Fatal(err)
				}
				if err := r.Verify(ctx); err != nil {
					t.Errorf("Verify(%s): %v", ckpt, err)
				}
			}
			// Deleting the retained checkpoints leaves nothing behind.
			for _, ckpt := range retained {
				if err := checkpoint.Delete(ctx, s, ckpt); err != nil {
					t.Fatal(err)
				}
			}
			if left, err := s.List(ctx); err != nil || len(left) != 0 {
				t.Errorf("after deleting every checkpoint the storage holds %q (%v)", left, err)
			}
		})
	}
}

// checkpointOnce takes a snapshot of tr and writes it as checkpoint i of
// operator "op", one instance, into s, committed (not yet Completed): it
// returns the checkpoint's name, the snapshot's contents and the
// instance's file.
func checkpointOnce(t *testing.T, tr *checkpoint.Tracker, s checkpoint.Storage, i int) (string, map[string]map[int][]rec, checkpoint.InstanceSnapshot) {
	t.Helper()
	snap, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	want := canonical(dump(t, snap))
	ckpt := checkpoint.CheckpointName(uint64(i))
	is, err := checkpoint.WriteInstance(ctx, s, ckpt, "instance-0.sgc", snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Release(); err != nil {
		t.Fatal(err)
	}
	op, err := checkpoint.NewOperator("op", is)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Commit(ctx, s, ckpt, &checkpoint.Metadata{CheckpointID: uint64(i), Operators: []checkpoint.Operator{op}}); err != nil {
		t.Fatal(err)
	}
	return ckpt, want, is
}

// checkRestores reads checkpoint ckpt back at parallelisms 1 to 3 and
// restores it into every backend, comparing with want.
func checkRestores(t *testing.T, s checkpoint.Storage, ckpt string, want map[string]map[int][]rec) {
	t.Helper()
	r, err := checkpoint.Open(ctx, s, ckpt)
	if err != nil {
		t.Fatal(err)
	}
	for p := 1; p <= 3; p++ {
		for i := range p {
			kgs, _ := runtime.KeyGroupRangeForOperator(incMaxP, p, i)
			v, err := r.View(ctx, "op", kgs)
			if err != nil {
				t.Fatalf("%s: View(%v): %v", ckpt, kgs, err)
			}
			got := canonical(dump(t, v))
			_ = v.Close()
			if d := gocmp.Diff(canonical(restrictDump(want, kgs)), got, cmpopts.EquateEmpty()); d != "" {
				t.Fatalf("%s read at parallelism %d, instance %d (%v) differs from the snapshot (-want +got):\n%s", ckpt, p, i, kgs, d)
			}
		}
	}
	for name, open := range map[string]func(runtime.StoreConfig) (runtime.Store, error){
		"cow":   func(c runtime.StoreConfig) (runtime.Store, error) { return cow.New(cow.Options{StoreConfig: c}) },
		"btree": func(c runtime.StoreConfig) (runtime.Store, error) { return btree.New(btree.Options{StoreConfig: c}) },
	} {
		kgs, _ := runtime.KeyGroupRangeForOperator(incMaxP, 2, 1)
		store, err := open(runtime.StoreConfig{MaxParallelism: incMaxP, KeyGroups: kgs})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := checkpoint.Restore(ctx, s, ckpt, "op", 1, 2, store, nil); err != nil {
			t.Fatalf("%s: restore into %s: %v", ckpt, name, err)
		}
		snap, err := store.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		got := canonical(dump(t, snap))
		_ = snap.Release()
		_ = store.Close()
		if d := gocmp.Diff(canonical(restrictDump(want, kgs)), got, cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("%s restored into %s (instance 1 of 2) differs from the snapshot (-want +got):\n%s", ckpt, name, d)
		}
	}
}

// incChain writes checkpoints 1 to n of a tracked model store to a new
// Mem storage, each after a round of random operations and completed,
// and returns the storage. With MaxChainLength n, checkpoint n has a
// chain of every earlier one.
func incChain(t *testing.T, n int) *checkpoint.Mem {
	t.Helper()
	rng := rand.New(rand.NewPCG(9, 9))
	tr, states := trackedModel(t, n)
	s := checkpoint.NewMem()
	for i := 1; i <= n; i++ {
		ops := 5 // changes that weigh less than the full file
		if i == 1 {
			ops = 300
		}
		incOps(t, rng, states, ops)
		is := checkpointtest.Checkpoint(t, s, tr, uint64(i))
		if is.File.Delta != (i > 1) || len(is.Base) != i-1 {
			t.Fatalf("checkpoint %d: delta %v over %d files, want a chain of every earlier checkpoint", i, is.File.Delta, len(is.Base))
		}
	}
	return s
}

// TestIncrementalBadChains: a chain whose referenced file vanished, was
// swapped for another checkpoint's file, was truncated or has a damaged
// block fails the restore — before the store changes, but for the damaged
// block, which only reading it finds — and Verify, with a *FileError on
// the file that names the checkpoint referencing it; metadata that
// references a file outside the storage, its own checkpoint (a cycle) or
// one file twice is refused.
func TestIncrementalBadChains(t *testing.T) {
	c1, c2, c3 := checkpoint.CheckpointName(1), checkpoint.CheckpointName(2), checkpoint.CheckpointName(3)
	restore := func(s checkpoint.Storage, late bool) error {
		store, err := storetest.NewModel(runtime.StoreConfig{MaxParallelism: incMaxP})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		_, err = checkpoint.Restore(ctx, s, c3, "op", 0, 1, store, nil)
		if err != nil && len(store.States()) != 0 && !late {
			t.Errorf("a failed restore registered %d states: the chain must be checked before the store changes", len(store.States()))
		}
		return err
	}
	for _, tc := range []struct {
		name     string
		damage   func(t *testing.T, s *checkpoint.Mem)
		path     string
		sentinel error
	}{
		{"vanished", func(t *testing.T, s *checkpoint.Mem) {
			if err := s.Remove(ctx, c2, "instance-0.sgc"); err != nil {
				t.Fatal(err)
			}
		}, c2 + "/instance-0.sgc", checkpoint.ErrNotFound},
		{"swapped for another checkpoint's", func(t *testing.T, s *checkpoint.Mem) {
			other := incChain(t, 1) // a full file of the same shape, another tag
			b := readObject(t, other, c1, "instance-0.sgc")
			if err := s.Remove(ctx, c1, "instance-0.sgc"); err != nil {
				t.Fatal(err)
			}
			put(t, s, c1, "instance-0.sgc", b)
		}, c1 + "/instance-0.sgc", checkpoint.ErrCorrupt},
		{"with a damaged block", func(t *testing.T, s *checkpoint.Mem) {
			b := readObject(t, s, c1, "instance-0.sgc")
			b[len(b)/3] ^= 0x40
			if err := s.Remove(ctx, c1, "instance-0.sgc"); err != nil {
				t.Fatal(err)
			}
			put(t, s, c1, "instance-0.sgc", b)
		}, c1 + "/instance-0.sgc", checkpoint.ErrCorrupt},
		{"truncated", func(t *testing.T, s *checkpoint.Mem) {
			b := readObject(t, s, c2, "instance-0.sgc")
			if err := s.Remove(ctx, c2, "instance-0.sgc"); err != nil {
				t.Fatal(err)
			}
			put(t, s, c2, "instance-0.sgc", b[:len(b)-1])
		}, c2 + "/instance-0.sgc", checkpoint.ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := incChain(t, 3)
			if err := restore(s, false); err != nil {
				t.Fatalf("restore of the undamaged chain: %v", err)
			}
			tc.damage(t, s)
			late := tc.name == "with a damaged block"
			for what, err := range map[string]error{"Restore": restore(s, late), "Verify": verify(s, c3)} {
				fe := wantFileError(t, err, tc.sentinel, tc.path)
				if fe != nil && !strings.Contains(err.Error(), "referenced by checkpoint "+c3) {
					t.Errorf("%s: %v does not name the checkpoint that references the file (%s)", what, err, c3)
				}
			}
		})
	}
	t.Run("bad references", func(t *testing.T) {
		s := incChain(t, 3)
		m, err := checkpoint.ReadMetadata(ctx, s, c3)
		if err != nil {
			t.Fatal(err)
		}
		for _, bc := range []struct {
			name  string
			edit  func(in *checkpoint.Instance)
			field string
		}{
			{"outside the storage", func(in *checkpoint.Instance) { in.Base[0].Checkpoint = "../elsewhere" }, "base[0].checkpoint"},
			{"an unsafe file name", func(in *checkpoint.Instance) { in.Base[1].File.Name = "a/b" }, "base[1].name"},
			{"one file twice", func(in *checkpoint.Instance) { in.Base[1] = in.Base[0]; in.Base[1].File.Delta = true }, "base[1]"},
			{"a full file over a chain", func(in *checkpoint.Instance) { in.File.Delta = false }, "file.delta"},
			{"changes first", func(in *checkpoint.Instance) { in.Base[0].File.Delta = true }, "base[0].delta"},
		} {
			bad := *m
			bad.Operators = slices.Clone(m.Operators)
			bad.Operators[0].Instances = slices.Clone(m.Operators[0].Instances)
			in := &bad.Operators[0].Instances[0]
			in.Base = slices.Clone(in.Base)
			bc.edit(in)
			_, err := bad.Marshal()
			var fe *checkpoint.FileError
			if !errors.As(err, &fe) || !errors.Is(err, checkpoint.ErrCorrupt) || !strings.HasSuffix(fe.Field, bc.field) {
				t.Errorf("%s: Marshal = %v, want a *FileError wrapping ErrCorrupt at field ...%s", bc.name, err, bc.field)
			}
		}
		// A cycle: the chain references the checkpoint itself.
		cyc := *m
		cyc.Operators = slices.Clone(m.Operators)
		cyc.Operators[0].Instances = slices.Clone(m.Operators[0].Instances)
		in := &cyc.Operators[0].Instances[0]
		in.Base = append(slices.Clone(in.Base), checkpoint.FileRef{Checkpoint: c3, File: in.File})
		c4 := checkpoint.CheckpointName(4)
		in.Base[len(in.Base)-1].Checkpoint = c4
		if err := checkpoint.Commit(ctx, s, c4, &cyc); !errors.Is(err, checkpoint.ErrCorrupt) || !strings.Contains(err.Error(), "cycle") {
			t.Errorf("Commit of a checkpoint whose chain references itself = %v, want ErrCorrupt naming the cycle", err)
		}
		data, err := cyc.Marshal() // written by another tool, say
		if err != nil {
			t.Fatal(err)
		}
		put(t, s, c4, "instance-0.sgc", readObject(t, s, c3, "instance-0.sgc"))
		put(t, s, c4, checkpoint.MetadataName, data)
		r, err := checkpoint.Open(ctx, s, c4)
		if err == nil {
			_, err = r.View(ctx, "op", runtime.FullRange(incMaxP))
		}
		if !errors.Is(err, checkpoint.ErrCorrupt) || !strings.Contains(err.Error(), "cycle") {
			t.Errorf("reading a checkpoint whose chain references itself = %v, want ErrCorrupt naming the cycle", err)
		}
	})
}

func verify(s checkpoint.Storage, ckpt string) error {
	r, err := checkpoint.Open(ctx, s, ckpt)
	if err != nil {
		return err
	}
	return r.Verify(ctx)
}

// TestIncrementalSavepoint: a savepoint's snapshot (SelfContained) is
// written in full amid a chain, and never becomes a base: the checkpoint
// after it still applies to the chain before it.
func TestIncrementalSavepoint(t *testing.T) {
	inner, err := storetest.NewModel(runtime.StoreConfig{MaxParallelism: incMaxP})
	if err != nil {
		t.Fatal(err)
	}
	tr, list := checkpointtest.Track(t, inner, nil, incSpecs[4])
	st := list[0]
	v := st.(runtime.ValueState)
	s := checkpoint.NewMem()
	take := func(ckpt string, savepoint bool, puts int) checkpoint.InstanceSnapshot {
		t.Helper()
		for i := range puts {
			if err := v.Put(runtime.MakeKey(fmt.Appendf(nil, "%s-%d", ckpt, i), nil, incMaxP), []byte("value")); err != nil {
				t.Fatal(err)
			}
		}
		snap, err := tr.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if savepoint {
			snap.(*checkpoint.TrackedSnapshot).SelfContained()
		}
		is, err := checkpoint.WriteInstance(ctx, s, ckpt, "instance-0.sgc", snap, nil)
		_ = snap.Release()
		if err != nil {
			t.Fatal(err)
		}
		tr.Completed(ckpt)
		return is
	}
	take("a", false, 100)
	if is := take("b", false, 1); !is.File.Delta || len(is.Base) != 1 || is.Base[0].Checkpoint != "a" {
		t.Fatalf("the checkpoint after a full one: delta %v over %v, want changes over a", is.File.Delta, is.Base)
	}
	if is := take("sp", true, 1); is.File.Delta || len(is.Base) != 0 {
		t.Fatalf("a savepoint: delta %v over %v, want a full file", is.File.Delta, is.Base)
	}
	is := take("c", false, 1)
	if !is.File.Delta || len(is.Base) != 2 || is.Base[1].Checkpoint != "b" {
		t.Fatalf("the checkpoint after a savepoint: delta %v over %v, want changes over a and b", is.File.Delta, is.Base)
	}
}

// vanishing is a Storage in which the metadata of checkpoint gone is
// deleted between a List that shows it and a read of it, as a concurrent
// Delete does.
type vanishing struct {
	checkpoint.Storage
	gone string
}

func (v vanishing) Open(ctx context.Context, ckpt, name string) (checkpoint.Object, error) {
	if ckpt == v.gone && name == checkpoint.MetadataName {
		return nil, fmt.Errorf("%s/%s: %w", ckpt, name, checkpoint.ErrNotFound)
	}
	return v.Storage.Open(ctx, ckpt, name)
}

// TestDeleteWhileAnotherIsDeleted: the references Delete reads come from
// every committed checkpoint; one deleted meanwhile (by the coordinator's
// concurrent housekeeping) references nothing, and does not fail the
// Delete — which would leave the checkpoint behind as debris.
func TestDeleteWhileAnotherIsDeleted(t *testing.T) {
	s := incChain(t, 1)
	c2 := checkpoint.CheckpointName(2)
	put(t, s, c2, "instance-0.sgc", readObject(t, s, checkpoint.CheckpointName(1), "instance-0.sgc"))
	put(t, s, c2, checkpoint.MetadataName, readObject(t, s, checkpoint.CheckpointName(1), checkpoint.MetadataName))
	v := vanishing{Storage: s, gone: c2}
	if err := checkpoint.Delete(ctx, v, checkpoint.CheckpointName(1)); err != nil {
		t.Fatalf("Delete while another checkpoint's metadata vanishes: %v", err)
	}
	if left, _ := s.Objects(ctx, checkpoint.CheckpointName(1)); len(left) != 0 {
		t.Errorf("the deleted checkpoint still holds %v", left)
	}
}

// TestChainKeepsKeyOrder: a chain over a full file in key order (a sorted
// store's) reads in key order but for the entries its changes added — an
// entry replaced is read in its old place — so that a sorted store's bulk
// load stays a bulk load.
func TestChainKeepsKeyOrder(t *testing.T) {
	inner, err := btree.New(btree.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: incMaxP}})
	if err != nil {
		t.Fatal(err)
	}
	tr, list := checkpointtest.Track(t, inner, nil,
		runtime.StateSpec{Name: "v", Kind: runtime.KindValue, Fingerprint: "f"},
		runtime.StateSpec{Name: "m", Kind: runtime.KindSortedMap, Fingerprint: "f"})
	vs, ms := list[0].(runtime.ValueState), list[1].(runtime.MapState)
	key := func(i int) runtime.Key { return runtime.MakeKey(fmt.Appendf(nil, "k%04d", i), nil, incMaxP) }
	for i := range 2000 {
		if err := vs.Put(key(i), []byte("old")); err != nil {
			t.Fatal(err)
		}
		if err := ms.Put(key(i%50), fmt.Appendf(nil, "u%04d", i), []byte("old")); err != nil {
			t.Fatal(err)
		}
	}
	s := checkpoint.NewMem()
	checkpointtest.Checkpoint(t, s, tr, 1)
	rng := rand.New(rand.NewPCG(1, 1))
	for range 200 {
		i := rng.IntN(2000)
		if err := vs.Put(key(i), []byte("new")); err != nil {
			t.Fatal(err)
		}
		if err := ms.Put(key(i%50), fmt.Appendf(nil, "u%04d", i), []byte("new")); err != nil {
			t.Fatal(err)
		}
	}
	if is := checkpointtest.Checkpoint(t, s, tr, 2); !is.File.Delta {
		t.Fatal("checkpoint 2 was written in full, want a file of changes")
	}
	v := openView(t, s, checkpoint.CheckpointName(2))
	news := 0
	for _, state := range []string{"v", "m"} {
		for kg := range incMaxP {
			var last []byte
			err := v.Scan(state, kg, func(en runtime.Entry) error {
				id := append(append(append([]byte(nil), en.Key...), 0), en.UserKey...)
				if last != nil && string(id) <= string(last) {
					return fmt.Errorf("entry %q/%q after %q: out of key order", en.Key, en.UserKey, last)
				}
				if string(en.Value) == "new" {
					news++
				}
				last = id
				return nil
			})
			if err != nil {
				t.Fatalf("state %s, key group %d: %v", state, kg, err)
			}
		}
	}
	if news == 0 {
		t.Fatal("no replaced value read back")
	}
}

// meeting is a Storage on which the Deletes of two checkpoints meet: each
// removes its metadata only once both have read which files are
// referenced, as two Deletes of the coordinator's housekeeping may.
type meeting struct {
	checkpoint.Storage
	t       *testing.T
	ckpts   [2]string
	arrived sync.WaitGroup
}

func (m *meeting) Remove(ctx context.Context, ckpt, name string) error {
	if name == checkpoint.MetadataName && (ckpt == m.ckpts[0] || ckpt == m.ckpts[1]) {
		m.arrived.Done()
		met := make(chan struct{})
		go func() { m.arrived.Wait(); close(met) }()
		select {
		case <-met:
		case <-time.After(10 * time.Second):
			m.t.Errorf("the Delete of %s waited 10s for the other's", ckpt)
		}
	}
	return m.Storage.Remove(ctx, ckpt, name)
}

// TestConcurrentDeletesLeaveNoFiles: two Deletes that run at once, each
// having read the references while the other checkpoint was still
// committed, leave nothing behind — not the files each kept for the
// other, nor those of an earlier deleted checkpoint that only they
// referenced. (Each kept them for good before: the driver's incremental
// test found them as debris under load.)
func TestConcurrentDeletesLeaveNoFiles(t *testing.T) {
	s := incChain(t, 3) // 2 references 1; 3 references 1 and 2
	c1, c2, c3 := checkpoint.CheckpointName(1), checkpoint.CheckpointName(2), checkpoint.CheckpointName(3)
	if err := checkpoint.Delete(ctx, s, c1); err != nil {
		t.Fatal(err)
	}
	if left, _ := s.Objects(ctx, c1); len(left) == 0 {
		t.Fatal("the first Delete removed files that later checkpoints reference")
	}
	m := &meeting{Storage: s, t: t, ckpts: [2]string{c2, c3}}
	m.arrived.Add(2)
	var wg sync.WaitGroup
	for _, c := range []string{c2, c3} {
		wg.Go(func() {
			if err := checkpoint.Delete(ctx, m, c); err != nil {
				t.Errorf("Delete %s: %v", c, err)
			}
		})
	}
	wg.Wait()
	for _, c := range []string{c1, c2, c3} {
		if left, err := s.Objects(ctx, c); err != nil || len(left) != 0 {
			t.Errorf("%s still holds %v (%v) after every checkpoint that referenced it was deleted", c, left, err)
		}
	}
	if removed, err := checkpoint.Cleanup(ctx, s, nil); err != nil || len(removed) != 0 {
		t.Errorf("Cleanup = %q, %v: the concurrent Deletes left debris", removed, err)
	}
}
