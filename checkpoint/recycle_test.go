package checkpoint_test

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/checkpoint/checkpointtest"
	"github.com/stategen/stategen/runtime"
)

// TestTrackerHeldSnapshotKeepsItsChanges: a Tracker reuses the memory of
// changes no one holds any more, but never that of a snapshot not yet
// released. Snapshot A is taken and held; a later snapshot B is written,
// completed and released (its changes, and the tracker's hold on A's, are
// let go of); more changes are recorded; then A is written: it must hold
// exactly what the store held when A was taken.
func TestTrackerHeldSnapshotKeepsItsChanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	tr, states := trackedModel(t, 8)
	s := checkpoint.NewMem()
	incOps(t, rng, states, 300)
	checkpointtest.Checkpoint(t, s, tr, 1)

	incOps(t, rng, states, 40)
	a, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	want := canonical(dump(t, a))
	incOps(t, rng, states, 40)
	if is := checkpointtest.Checkpoint(t, s, tr, 3); !is.File.Delta {
		t.Fatalf("checkpoint 3 was written in full, want a file of changes")
	}
	// These changes go into memory the tracker took back from checkpoint
	// 3's snapshot — never into A's, which A still holds.
	incOps(t, rng, states, 400)

	ckpt := checkpoint.CheckpointName(2)
	is, err := checkpoint.WriteInstance(ctx, s, ckpt, "instance-0.sgc", a, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	if !is.File.Delta {
		t.Fatalf("the held snapshot was written in full, want a file of changes over checkpoint 1")
	}
	op, err := checkpoint.NewOperator(checkpointtest.OperatorID, is)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Commit(ctx, s, ckpt, &checkpoint.Metadata{CheckpointID: 2, Operators: []checkpoint.Operator{op}}); err != nil {
		t.Fatal(err)
	}
	if d := gocmp.Diff(want, readBack(t, s, ckpt), cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("the snapshot held while the tracker recycled other changes reads back differently (-want +got):\n%s", d)
	}
}

// TestTrackerRecordsIntoRecycledMemory: in a steady state of checkpoints
// that complete, recording changes allocates nothing per change — the
// tracker records into the memory of the changes it no longer needs. An
// interval of 2,000 Puts over 128 key groups allocates a few times (the
// per-interval tables of the changes, O(states)), not once per chunk or
// key group.
func TestTrackerRecordsIntoRecycledMemory(t *testing.T) {
	const keyGroups, n, changed = 128, 20000, 2000
	inner, err := cow.New(cow.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: keyGroups}})
	if err != nil {
		t.Fatal(err)
	}
	tr, list := checkpointtest.Track(t, inner, nil, runtime.StateSpec{Name: "v", Kind: runtime.KindValue, Fingerprint: "f"})
	vs := list[0].(runtime.ValueState)
	keys := make([]runtime.Key, n)
	for i := range keys {
		keys[i] = runtime.MakeKey(binary.BigEndian.AppendUint64(nil, uint64(i)), nil, keyGroups)
	}
	val := make([]byte, 24)
	rng := rand.New(rand.NewPCG(1, 1))
	put := func(k runtime.Key) {
		binary.LittleEndian.PutUint64(val, rng.Uint64())
		if err := vs.Put(k, val); err != nil {
			t.Fatal(err)
		}
	}
	puts := func() {
		for range changed {
			put(keys[rng.IntN(n)])
		}
	}
	for _, k := range keys {
		put(k)
	}
	s := checkpoint.NewMem()
	checkpointtest.Checkpoint(t, s, tr, 1) // in full
	id := uint64(1)
	for range 2 { // files of changes
		puts()
		id++
		checkpointtest.Checkpoint(t, s, tr, id)
	}
	allocs := testing.AllocsPerRun(1, puts)
	if allocs > 8 {
		t.Errorf("an interval of %d Puts through a tracker in a steady state allocated %v times, want at most 8: the changes' memory is not reused", changed, allocs)
	}
	id++
	if is := checkpointtest.Checkpoint(t, s, tr, id); !is.File.Delta {
		t.Errorf("checkpoint %d was written in full, want a file of changes", id)
	}
}

// readBack reads checkpoint ckpt of s, all of its key groups, in the
// canonical form of dump.
func readBack(t *testing.T, s checkpoint.Storage, ckpt string) map[string]map[int][]rec {
	t.Helper()
	return canonical(dump(t, openView(t, s, ckpt)))
}

// openView opens the View of every key group of checkpoint ckpt of s,
// closed when the test ends.
func openView(t *testing.T, s checkpoint.Storage, ckpt string) *checkpoint.View {
	t.Helper()
	r, err := checkpoint.Open(ctx, s, ckpt)
	if err != nil {
		t.Fatal(err)
	}
	v, err := r.View(ctx, checkpointtest.OperatorID, runtime.FullRange(incMaxP))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Close() })
	return v
}
