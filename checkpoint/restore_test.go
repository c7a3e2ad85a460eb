package checkpoint_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

// newModel returns a reference-model store of instance i of p.
func newModel(t testing.TB, maxP, p, i int) *storetest.Model {
	t.Helper()
	kgs, err := runtime.KeyGroupRangeForOperator(maxP, p, i)
	if err != nil {
		t.Fatal(err)
	}
	m, err := storetest.NewModel(runtime.StoreConfig{MaxParallelism: maxP, KeyGroups: kgs})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// fill writes the entries of v that m owns into m through the Store API.
func fill(t testing.TB, m runtime.Store, v *memView) {
	t.Helper()
	cfg := m.Config()
	for _, spec := range v.specs {
		st, err := m.Register(spec)
		if err != nil {
			t.Fatal(err)
		}
		for kg, es := range v.data[spec.Name] {
			if !cfg.KeyGroups.Contains(kg) {
				continue
			}
			for _, e := range es {
				k := runtime.MakeKey(e.Key, e.Namespace, cfg.MaxParallelism)
				switch s := st.(type) {
				case runtime.ValueState:
					err = s.Put(k, e.Value)
				case runtime.ListState:
					err = s.Add(k, e.Value)
				case runtime.MapState:
					err = s.Put(k, e.UserKey, e.Value)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

func contents(t testing.TB, v runtime.View) storetest.Contents {
	t.Helper()
	c, err := storetest.Dump(v)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func snapshotContents(t testing.TB, s runtime.Store) storetest.Contents {
	t.Helper()
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	return contents(t, snap)
}

// checkpointStores snapshots stores (the instances of one operator) into
// checkpoint ckpt of s and commits it.
func checkpointStores(t testing.TB, s checkpoint.Storage, ckpt string, stores []*storetest.Model) {
	t.Helper()
	var snaps []checkpoint.InstanceSnapshot
	for i, m := range stores {
		a, err := checkpoint.SnapshotAsync(ctx, m, s, ckpt, fmt.Sprintf("op-%d.sgc", i), &checkpoint.WriterOptions{BlockSize: 256})
		if err != nil {
			t.Fatal(err)
		}
		res, err := a.Wait()
		if err != nil {
			t.Fatal(err)
		}
		res.Snapshot.OperatorState = []byte{byte(i)}
		snaps = append(snaps, res.Snapshot)
	}
	op, err := checkpoint.NewOperator("op", snaps...)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Commit(ctx, s, ckpt, &checkpoint.Metadata{CheckpointID: 1, Operators: []checkpoint.Operator{op}}); err != nil {
		t.Fatal(err)
	}
}

func TestRestoreAtEveryParallelism(t *testing.T) {
	const maxP = 16
	v := genView(30, maxP, runtime.FullRange(maxP), 400, 2000)
	for _, p := range []int{1, 2, 3, 4} {
		old := make([]*storetest.Model, p)
		want := storetest.Contents{}
		for i := range old {
			old[i] = newModel(t, maxP, p, i)
			fill(t, old[i], v)
		}
		s := checkpoint.NewMem()
		checkpointStores(t, s, "chk", old)
		for _, q := range []int{1, 2, 3, 5, 16} {
			t.Run(fmt.Sprintf("%dto%d", p, q), func(t *testing.T) {
				total := int64(0)
				for i := range q {
					m := newModel(t, maxP, q, i)
					stats, err := checkpoint.Restore(ctx, s, "chk", "op", i, q, m, nil)
					if err != nil {
						t.Fatal(err)
					}
					total += stats.Entries
					got := snapshotContents(t, m)
					// What the new instance should hold: the old instances'
					// contents restricted to its key groups.
					want = storetest.Contents{MaxParallelism: maxP, KeyGroups: m.Config().KeyGroups, States: map[string]storetest.StateContents{}}
					for _, o := range old {
						part := snapshotContents(t, o).Restrict(m.Config().KeyGroups)
						for name, sc := range part.States {
							merged := want.States[name]
							merged.Spec = sc.Spec
							if merged.Groups == nil {
								merged.Groups = map[int][]storetest.Record{}
							}
							for kg, recs := range sc.Groups {
								merged.Groups[kg] = recs
							}
							want.States[name] = merged
						}
					}
					if diff := cmp.Diff(want, got); diff != "" {
						t.Fatalf("instance %d of %d (-want +got):\n%s", i, q, diff)
					}
				}
				var n int64
				for _, es := range v.data {
					for _, e := range es {
						n += int64(len(e))
					}
				}
				if total != n {
					t.Errorf("restored %d entries in all, the checkpoint holds %d", total, n)
				}
			})
		}
	}
}

func TestPlanReadsEveryKeyGroupOnceFromItsFile(t *testing.T) {
	for _, maxP := range []int{1, 7, 128} {
		for p := 1; p <= min(maxP, 6); p++ {
			op := checkpoint.Operator{ID: "op", MaxParallelism: maxP, KeyGroups: runtime.FullRange(maxP)}
			for i := range p {
				kgs, _ := runtime.KeyGroupRangeForOperator(maxP, p, i)
				op.Instances = append(op.Instances, checkpoint.Instance{KeyGroups: kgs,
					File: checkpoint.File{Name: fmt.Sprintf("f%d", i)}, OperatorState: []byte{byte(i)}})
			}
			for q := 1; q <= min(maxP, 7); q++ {
				plans, err := op.Plan(q)
				if err != nil {
					t.Fatal(err)
				}
				seen := make([]int, maxP)
				for i, pl := range plans {
					kgs, _ := runtime.KeyGroupRangeForOperator(maxP, q, i)
					if pl.Index != i || pl.Parallelism != q || pl.KeyGroups != kgs || len(pl.OperatorStates) != p {
						t.Fatalf("maxP %d, %d->%d: plan %d = %+v", maxP, p, q, i, pl)
					}
					next := kgs.Start
					for _, rd := range pl.Reads {
						in := op.Instances[rd.Instance]
						if rd.File != in.File || rd.KeyGroups.Intersect(in.KeyGroups) != rd.KeyGroups || rd.KeyGroups.Start != next {
							t.Fatalf("maxP %d, %d->%d: plan %d reads %+v", maxP, p, q, i, rd)
						}
						next = rd.KeyGroups.End
						for kg := range rd.KeyGroups.All() {
							seen[kg]++
						}
					}
					if next != kgs.End {
						t.Fatalf("maxP %d, %d->%d: plan %d stops at %d", maxP, p, q, i, next)
					}
				}
				for kg, n := range seen {
					if n != 1 {
						t.Fatalf("maxP %d, %d->%d: key group %d read %d times", maxP, p, q, kg, n)
					}
				}
			}
		}
	}
	op := checkpoint.Operator{ID: "op", MaxParallelism: 8, KeyGroups: runtime.KeyGroupRange{Start: 0, End: 4}}
	if _, err := op.Plan(2); !errors.Is(err, checkpoint.ErrIncomplete) {
		t.Errorf("Plan of a partial checkpoint = %v, want ErrIncomplete", err)
	}
	op.KeyGroups = runtime.FullRange(8)
	for _, q := range []int{0, 9} {
		if _, err := op.Plan(q); !errors.Is(err, runtime.ErrInvalidParallelism) {
			t.Errorf("Plan(%d) = %v, want ErrInvalidParallelism", q, err)
		}
	}
}

// setup writes a checkpoint of one instance holding v.
func setup(t *testing.T, v *memView) checkpoint.Storage {
	t.Helper()
	m := newModel(t, v.maxP, 1, 0)
	fill(t, m, v)
	s := checkpoint.NewMem()
	checkpointStores(t, s, "chk", []*storetest.Model{m})
	return s
}

// isEmpty reports whether store holds no entry.
func isEmpty(t *testing.T, store runtime.Store) bool {
	return snapshotContents(t, store).Len() == 0
}

func TestRestoreRefusesAnotherFingerprint(t *testing.T) {
	v := genView(31, 8, runtime.FullRange(8), 50, 0)
	s := setup(t, v)
	m := newModel(t, 8, 1, 0)
	changed := testSpecs[3]
	changed.Fingerprint = "map:string->int64"
	if _, err := m.Register(changed); err != nil {
		t.Fatal(err)
	}
	_, err := checkpoint.Restore(ctx, s, "chk", "op", 0, 1, m, nil)
	if !errors.Is(err, runtime.ErrStateMismatch) {
		t.Fatalf("Restore = %v, want ErrStateMismatch", err)
	}
	for _, want := range []string{`"index"`, `"map:string->int"`, `"map:string->int64"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if !isEmpty(t, m) {
		t.Errorf("a refused restore changed the store")
	}
	// The checkpoint-level check says the same without a store.
	r, err := checkpoint.Open(ctx, s, "chk")
	if err != nil {
		t.Fatal(err)
	}
	op, _ := r.Metadata().Operator("op")
	if _, err := checkpoint.CheckStates([]runtime.StateSpec{changed}, op.States, checkpoint.KeepUnknownStates); !errors.Is(err, runtime.ErrStateMismatch) {
		t.Errorf("CheckStates = %v", err)
	}
	kindChanged := testSpecs[0]
	kindChanged.Kind = runtime.KindList
	_, err = checkpoint.CheckStates([]runtime.StateSpec{changed, kindChanged}, op.States, checkpoint.KeepUnknownStates)
	if !strings.Contains(fmt.Sprint(err), `"counts"`) || !strings.Contains(fmt.Sprint(err), `"index"`) {
		t.Errorf("CheckStates does not report every mismatch: %v", err)
	}
	// Without a recorded schema (hand-written descriptors, format versions
	// before 3) nothing can migrate: the error says why.
	if _, err := checkpoint.CheckStates([]runtime.StateSpec{changed}, op.States, checkpoint.KeepUnknownStates); !strings.Contains(fmt.Sprint(err), "records no schema") {
		t.Errorf("CheckStates without schemas = %v, want it to say the checkpoint records no schema", err)
	}
	if migs, err := checkpoint.CheckStates(testSpecs, op.States, checkpoint.FailOnUnknownStates); err != nil || migs != nil {
		t.Errorf("CheckStates of the same specs = %v, %v", migs, err)
	}
	// Store.Restore's own check fires too, because the View carries the
	// specs.
	cv, err := r.View(ctx, "op", runtime.FullRange(8))
	if err != nil {
		t.Fatal(err)
	}
	defer cv.Close()
	m2 := newModel(t, 8, 1, 0)
	m2.Register(changed)
	if err := m2.Restore(cv); !errors.Is(err, runtime.ErrStateMismatch) || !strings.Contains(err.Error(), "map:string->int64") {
		t.Errorf("Store.Restore of the view = %v, want ErrStateMismatch naming both fingerprints", err)
	}
}

func TestRestoreRefusesAnotherMaxParallelism(t *testing.T) {
	v := genView(32, 8, runtime.FullRange(8), 50, 0)
	s := setup(t, v)
	m := newModel(t, 16, 1, 0)
	_, err := checkpoint.Restore(ctx, s, "chk", "op", 0, 1, m, nil)
	if !errors.Is(err, runtime.ErrMaxParallelismMismatch) || !strings.Contains(err.Error(), "8") || !strings.Contains(err.Error(), "16") {
		t.Fatalf("Restore = %v, want ErrMaxParallelismMismatch naming 8 and 16", err)
	}
	if !isEmpty(t, m) {
		t.Errorf("a refused restore changed the store")
	}
}

func TestRestoreRefusesAStoreOfOtherKeyGroups(t *testing.T) {
	v := genView(33, 8, runtime.FullRange(8), 50, 0)
	s := setup(t, v)
	m := newModel(t, 8, 2, 1)
	if _, err := checkpoint.Restore(ctx, s, "chk", "op", 0, 2, m, nil); !errors.Is(err, runtime.ErrInvalidKeyGroup) {
		t.Fatalf("restoring instance 0's plan into instance 1's store = %v", err)
	}
}

func TestUnknownStatePolicies(t *testing.T) {
	v := genView(34, 8, runtime.FullRange(8), 80, 0)
	s := setup(t, v)
	registered := []runtime.StateSpec{testSpecs[0], testSpecs[3]} // counts, index
	newStore := func() *storetest.Model {
		m := newModel(t, 8, 1, 0)
		for _, spec := range registered {
			if _, err := m.Register(spec); err != nil {
				t.Fatal(err)
			}
		}
		return m
	}
	full := contents(t, v)

	t.Run("keep", func(t *testing.T) {
		m := newStore()
		if _, err := checkpoint.Restore(ctx, s, "chk", "op", 0, 1, m, nil); err != nil {
			t.Fatal(err)
		}
		got := snapshotContents(t, m)
		if diff := cmp.Diff(full, got); diff != "" {
			t.Errorf("kept states (-want +got):\n%s", diff)
		}
	})
	t.Run("drop", func(t *testing.T) {
		m := newStore()
		st, err := checkpoint.Restore(ctx, s, "chk", "op", 0, 1, m, &checkpoint.RestoreOptions{UnknownStates: checkpoint.DropUnknownStates})
		if err != nil {
			t.Fatal(err)
		}
		got := snapshotContents(t, m)
		want := storetest.Contents{MaxParallelism: 8, KeyGroups: runtime.FullRange(8), States: map[string]storetest.StateContents{}}
		for _, spec := range registered {
			want.States[spec.Name] = full.States[spec.Name]
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("after dropping unknown states (-want +got):\n%s", diff)
		}
		if st.Entries != int64(want.Len()) {
			t.Errorf("stats say %d entries restored, want %d", st.Entries, want.Len())
		}
	})
	t.Run("invalid", func(t *testing.T) {
		m := newStore()
		if _, err := checkpoint.Restore(ctx, s, "chk", "op", 0, 1, m, &checkpoint.RestoreOptions{UnknownStates: 7}); err == nil || !strings.Contains(err.Error(), "UnknownStatePolicy(7)") {
			t.Errorf("Restore with policy 7 = %v", err)
		}
	})
	t.Run("fail", func(t *testing.T) {
		m := newStore()
		_, err := checkpoint.Restore(ctx, s, "chk", "op", 0, 1, m, &checkpoint.RestoreOptions{UnknownStates: checkpoint.FailOnUnknownStates})
		if !errors.Is(err, checkpoint.ErrUnknownState) {
			t.Fatalf("Restore = %v, want ErrUnknownState", err)
		}
		for _, name := range []string{`"empty"`, `"events"`, `"windows"`} {
			if !strings.Contains(err.Error(), name) {
				t.Errorf("error %q does not name %s", err, name)
			}
		}
		if !isEmpty(t, m) {
			t.Errorf("a refused restore changed the store")
		}
		m2 := newModel(t, 8, 1, 0)
		for _, spec := range testSpecs {
			m2.Register(spec)
		}
		if _, err := checkpoint.Restore(ctx, s, "chk", "op", 0, 1, m2, &checkpoint.RestoreOptions{UnknownStates: checkpoint.FailOnUnknownStates}); err != nil {
			t.Errorf("with every state registered: %v", err)
		}
	})
}

func TestRestoreFailsBeforeChangingTheStoreWhenAFileIsMissing(t *testing.T) {
	const maxP = 8
	v := genView(35, maxP, runtime.FullRange(maxP), 100, 0)
	old := []*storetest.Model{newModel(t, maxP, 2, 0), newModel(t, maxP, 2, 1)}
	fill(t, old[0], v)
	fill(t, old[1], v)
	s := checkpoint.NewMem()
	checkpointStores(t, s, "chk", old)
	if err := s.Remove(ctx, "chk", "op-1.sgc"); err != nil {
		t.Fatal(err)
	}
	m := newModel(t, maxP, 1, 0)
	_, err := checkpoint.Restore(ctx, s, "chk", "op", 0, 1, m, nil)
	wantFileError(t, err, checkpoint.ErrNotFound, "chk/op-1.sgc")
	if !isEmpty(t, m) {
		t.Errorf("the restore loaded the first file before finding the second missing")
	}
}

func TestRestoreOfACorruptBlockFails(t *testing.T) {
	v := genView(36, 8, runtime.FullRange(8), 200, 0)
	s := setup(t, v)
	// Flip a byte in the middle of the data.
	replaceObject(t, s, "chk", "op-0.sgc", func(b []byte) []byte { b[len(b)/2] ^= 0x10; return b })
	m := newModel(t, 8, 1, 0)
	_, err := checkpoint.Restore(ctx, s, "chk", "op", 0, 1, m, nil)
	fe := wantFileError(t, err, checkpoint.ErrCorrupt, "chk/op-0.sgc")
	if !strings.Contains(fe.Reason, "checksum") {
		t.Errorf("error %q is not a checksum mismatch", err)
	}
}

func TestRestoreUnknownOperator(t *testing.T) {
	v := genView(37, 8, runtime.FullRange(8), 10, 0)
	s := setup(t, v)
	m := newModel(t, 8, 1, 0)
	if _, err := checkpoint.Restore(ctx, s, "chk", "other", 0, 1, m, nil); !errors.Is(err, checkpoint.ErrNotFound) || !strings.Contains(err.Error(), "other") {
		t.Errorf("Restore of an unknown operator = %v", err)
	}
}

func TestRestoreChecksATravelledPlan(t *testing.T) {
	v := genView(38, 8, runtime.FullRange(8), 10, 0)
	s := setup(t, v)
	r, err := checkpoint.Open(ctx, s, "chk")
	if err != nil {
		t.Fatal(err)
	}
	plans, err := r.Plan("op", 2)
	if err != nil {
		t.Fatal(err)
	}
	bad := plans[0]
	bad.Reads = nil
	if _, err := r.Restore(ctx, bad, newModel(t, 8, 2, 0), nil); !errors.Is(err, checkpoint.ErrIncomplete) {
		t.Errorf("a plan with no reads = %v, want ErrIncomplete", err)
	}
	bad = plans[0]
	bad.Reads = []checkpoint.FileRead{plans[0].Reads[0]}
	bad.Reads[0].KeyGroups.End = 8
	if _, err := r.Restore(ctx, bad, newModel(t, 8, 2, 0), nil); !errors.Is(err, checkpoint.ErrIncomplete) {
		t.Errorf("a plan reading beyond its key groups = %v, want ErrIncomplete", err)
	}
	st, err := r.Restore(ctx, plans[1], newModel(t, 8, 2, 1), nil)
	if err != nil || st.Files != 1 || st.BytesRead == 0 {
		t.Errorf("the genuine plan: %+v, %v", st, err)
	}
}
