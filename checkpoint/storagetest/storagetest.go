// Package storagetest holds the conformance tests of checkpoint.Storage.
// Every implementation — the local directory, the in-memory one, an S3
// client — runs them with one call:
//
//	func TestStorage(t *testing.T) {
//		storagetest.Run(t, func(t *testing.T) checkpoint.Storage { return newMyStorage(t) })
//	}
//
// The tests check the object semantics the checkpoint protocol relies on
// (uncommitted writes are invisible, commits are atomic and never overwrite,
// removal is idempotent, names are validated, contexts are honoured) and
// then the protocol itself on top of the implementation: a checkpoint is
// listed only once its metadata is committed, Delete un-commits first, and
// Cleanup removes crash debris but nothing in progress or committed.
package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
)

// Run runs the conformance tests against fresh storages from newStorage,
// one per sub-test. newStorage reports its own failures with t.Fatal and
// registers its cleanup with t.Cleanup.
func Run(t *testing.T, newStorage func(t *testing.T) checkpoint.Storage) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s checkpoint.Storage)
	}{
		{"UncommittedWriteIsInvisible", testUncommittedInvisible},
		{"CommitPublishes", testCommitPublishes},
		{"AbortDiscards", testAbortDiscards},
		{"ObjectsAreImmutable", testImmutable},
		{"ConcurrentCommitsOfOneNameOneWins", testConcurrentSameName},
		{"ConcurrentWritersOfManyObjects", testConcurrentWriters},
		{"ReadAt", testReadAt},
		{"LargeObject", testLargeObject},
		{"OpenMissingIsNotFound", testMissing},
		{"RemoveIsIdempotent", testRemove},
		{"DeleteRemovesEverything", testDelete},
		{"RemoveIncompleteDiscardsPendingWrites", testRemoveIncomplete},
		{"InvalidNamesAreRejected", testInvalidNames},
		{"CancelledContext", testCancelledContext},
		{"ListsOnlyCommittedCheckpoints", testProtocolList},
		{"DeleteUncommitsFirst", testProtocolDelete},
		{"CleanupRemovesDebris", testProtocolCleanup},
		{"CommitRequiresFiles", testProtocolCommitRequiresFiles},
		{"RoundTrip", testProtocolRoundTrip},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStorage(t))
		})
	}
}

var ctx = context.Background()

func put(t *testing.T, s checkpoint.Storage, ckpt, name string, data []byte) {
	t.Helper()
	w, err := s.Create(ctx, ckpt, name)
	if err != nil {
		t.Fatalf("Create(%s, %s): %v", ckpt, name, err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatalf("Write(%s/%s): %v", ckpt, name, err)
	}
	if err := w.Commit(); err != nil {
		t.Fatalf("Commit(%s/%s): %v", ckpt, name, err)
	}
}

func get(t *testing.T, s checkpoint.Storage, ckpt, name string) []byte {
	t.Helper()
	o, err := s.Open(ctx, ckpt, name)
	if err != nil {
		t.Fatalf("Open(%s, %s): %v", ckpt, name, err)
	}
	defer o.Close()
	b := make([]byte, o.Size())
	if n, err := o.ReadAt(b, 0); n != len(b) {
		t.Fatalf("ReadAt(%s/%s): read %d of %d bytes: %v", ckpt, name, n, len(b), err)
	}
	return b
}

func names(infos []checkpoint.ObjectInfo) []string {
	var out []string
	for _, i := range infos {
		out = append(out, i.Name)
	}
	return out
}

func objects(t *testing.T, s checkpoint.Storage, ckpt string) []string {
	t.Helper()
	infos, err := s.Objects(ctx, ckpt)
	if err != nil {
		t.Fatalf("Objects(%s): %v", ckpt, err)
	}
	return names(infos)
}

func wantNotFound(t *testing.T, s checkpoint.Storage, ckpt, name string) {
	t.Helper()
	if _, err := s.Stat(ctx, ckpt, name); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("Stat(%s, %s) = %v, want ErrNotFound", ckpt, name, err)
	}
	if o, err := s.Open(ctx, ckpt, name); !errors.Is(err, checkpoint.ErrNotFound) {
		if err == nil {
			o.Close()
		}
		t.Errorf("Open(%s, %s) = %v, want ErrNotFound", ckpt, name, err)
	}
	if slices.Contains(objects(t, s, ckpt), name) {
		t.Errorf("Objects(%s) lists %s", ckpt, name)
	}
}

func testUncommittedInvisible(t *testing.T, s checkpoint.Storage) {
	w, err := s.Create(ctx, "c1", "a")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if _, err := w.Write([]byte("pending")); err != nil {
		t.Fatal(err)
	}
	wantNotFound(t, s, "c1", "a")
	list, err := checkpoint.List(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 0 {
		t.Errorf("checkpoint.List = %q, want none", list)
	}
}

func testCommitPublishes(t *testing.T, s checkpoint.Storage) {
	put(t, s, "c1", "a", []byte("hello"))
	put(t, s, "c1", "b", nil)
	if got := get(t, s, "c1", "a"); string(got) != "hello" {
		t.Errorf("a = %q, want hello", got)
	}
	if got := get(t, s, "c1", "b"); len(got) != 0 {
		t.Errorf("b = %q, want empty", got)
	}
	info, err := s.Stat(ctx, "c1", "a")
	if err != nil || info != (checkpoint.ObjectInfo{Name: "a", Size: 5}) {
		t.Errorf("Stat = %+v, %v; want {a 5}", info, err)
	}
	if got, want := objects(t, s, "c1"), []string{"a", "b"}; !slices.Equal(got, want) {
		t.Errorf("Objects = %q, want %q", got, want)
	}
	all, err := s.List(ctx)
	if err != nil || !slices.Contains(all, "c1") {
		t.Errorf("List = %q, %v; want it to hold c1", all, err)
	}
}

func testAbortDiscards(t *testing.T, s checkpoint.Storage) {
	w, err := s.Create(ctx, "c1", "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := w.Abort(); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	if err := w.Abort(); err != nil {
		t.Errorf("second Abort: %v", err)
	}
	if err := w.Commit(); err == nil {
		t.Errorf("Commit after Abort succeeded")
	}
	wantNotFound(t, s, "c1", "a")
	// The name is free again.
	put(t, s, "c1", "a", []byte("y"))
	if got := get(t, s, "c1", "a"); string(got) != "y" {
		t.Errorf("a = %q, want y", got)
	}
	w2, err := s.Create(ctx, "c1", "b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w2.Write([]byte("z")); err != nil {
		t.Fatal(err)
	}
	if err := w2.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := w2.Abort(); err != nil {
		t.Errorf("Abort after Commit: %v", err)
	}
	if got := get(t, s, "c1", "b"); string(got) != "z" {
		t.Errorf("Abort after Commit removed the object: b = %q", got)
	}
}

func testImmutable(t *testing.T, s checkpoint.Storage) {
	put(t, s, "c1", "a", []byte("first"))
	if w, err := s.Create(ctx, "c1", "a"); !errors.Is(err, checkpoint.ErrExist) {
		if err == nil {
			w.Abort()
		}
		t.Errorf("Create of a committed object = %v, want ErrExist", err)
	}
	if got := get(t, s, "c1", "a"); string(got) != "first" {
		t.Errorf("a = %q, want first", got)
	}
}

func testConcurrentSameName(t *testing.T, s checkpoint.Storage) {
	w1, err := s.Create(ctx, "c1", "a")
	if err != nil {
		t.Fatal(err)
	}
	w2, err := s.Create(ctx, "c1", "a")
	if err != nil {
		t.Fatal(err)
	}
	w1.Write([]byte("one"))
	w2.Write([]byte("two"))
	if err := w1.Commit(); err != nil {
		t.Fatalf("first Commit: %v", err)
	}
	if err := w2.Commit(); !errors.Is(err, checkpoint.ErrExist) {
		t.Errorf("second Commit of the same name = %v, want ErrExist", err)
	}
	if got := get(t, s, "c1", "a"); string(got) != "one" {
		t.Errorf("a = %q, want the first commit's bytes", got)
	}
}

func testConcurrentWriters(t *testing.T, s checkpoint.Storage) {
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ckpt := fmt.Sprintf("c%d", i%3)
			w, err := s.Create(ctx, ckpt, fmt.Sprintf("o%d", i))
			if err != nil {
				errs <- err
				return
			}
			for range 10 {
				if _, err := w.Write(bytes.Repeat([]byte{byte(i)}, 100)); err != nil {
					errs <- err
					return
				}
			}
			errs <- w.Commit()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		got := get(t, s, fmt.Sprintf("c%d", i%3), fmt.Sprintf("o%d", i))
		if !bytes.Equal(got, bytes.Repeat([]byte{byte(i)}, 1000)) {
			t.Errorf("o%d holds the wrong bytes", i)
		}
	}
}

func testReadAt(t *testing.T, s checkpoint.Storage) {
	put(t, s, "c1", "a", []byte("0123456789"))
	o, err := s.Open(ctx, "c1", "a")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if o.Size() != 10 {
		t.Errorf("Size = %d, want 10", o.Size())
	}
	b := make([]byte, 4)
	if n, err := o.ReadAt(b, 3); n != 4 || err != nil || string(b) != "3456" {
		t.Errorf("ReadAt(4 bytes at 3) = %d, %v, %q", n, err, b)
	}
	if n, err := o.ReadAt(b, 8); n != 2 || err == nil {
		t.Errorf("ReadAt past the end = %d, %v; want 2 bytes and an error", n, err)
	}
	if n, err := o.ReadAt(b, 20); n != 0 || err == nil {
		t.Errorf("ReadAt beyond the end = %d, %v; want an error", n, err)
	}
}

func testLargeObject(t *testing.T, s checkpoint.Storage) {
	var want []byte
	w, err := s.Create(ctx, "c1", "big")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		chunk := bytes.Repeat([]byte{byte(i), byte(i >> 8), 0x5a}, 3333)
		want = append(want, chunk...)
		if _, err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := get(t, s, "c1", "big"); !bytes.Equal(got, want) {
		t.Errorf("a %d-byte object read back wrong (%d bytes)", len(want), len(got))
	}
}

func testMissing(t *testing.T, s checkpoint.Storage) {
	wantNotFound(t, s, "nope", "a")
	put(t, s, "c1", "a", nil)
	wantNotFound(t, s, "c1", "b")
	if objs := objects(t, s, "nope"); len(objs) != 0 {
		t.Errorf("Objects of an unknown checkpoint = %q", objs)
	}
}

func testRemove(t *testing.T, s checkpoint.Storage) {
	put(t, s, "c1", "a", []byte("x"))
	put(t, s, "c1", "b", []byte("y"))
	for range 2 {
		if err := s.Remove(ctx, "c1", "a"); err != nil {
			t.Fatalf("Remove: %v", err)
		}
	}
	wantNotFound(t, s, "c1", "a")
	if err := s.Remove(ctx, "nope", "a"); err != nil {
		t.Errorf("Remove in an unknown checkpoint: %v", err)
	}
	if got := get(t, s, "c1", "b"); string(got) != "y" {
		t.Errorf("Remove of a removed b: b = %q", got)
	}
}

func testDelete(t *testing.T, s checkpoint.Storage) {
	put(t, s, "c1", "a", []byte("x"))
	put(t, s, "c2", "a", []byte("keep"))
	w, err := s.Create(ctx, "c1", "pending")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("p"))
	for range 2 {
		if err := s.Delete(ctx, "c1"); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	}
	if err := w.Commit(); err == nil {
		t.Errorf("Commit of a write into a deleted checkpoint succeeded")
		s.Delete(ctx, "c1")
	}
	all, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(all, "c1") {
		t.Errorf("List after Delete = %q, still holds c1", all)
	}
	wantNotFound(t, s, "c1", "a")
	if got := get(t, s, "c2", "a"); string(got) != "keep" {
		t.Errorf("Delete(c1) changed c2: %q", got)
	}
}

func testRemoveIncomplete(t *testing.T, s checkpoint.Storage) {
	put(t, s, "c1", "a", []byte("x"))
	w, err := s.Create(ctx, "c1", "pending")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("p"))
	if err := s.RemoveIncomplete(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err == nil {
		t.Errorf("Commit of a write discarded by RemoveIncomplete succeeded")
	}
	wantNotFound(t, s, "c1", "pending")
	if got := get(t, s, "c1", "a"); string(got) != "x" {
		t.Errorf("RemoveIncomplete changed a committed object: %q", got)
	}
	if err := s.RemoveIncomplete(ctx, "nope"); err != nil {
		t.Errorf("RemoveIncomplete of an unknown checkpoint: %v", err)
	}
}

func testInvalidNames(t *testing.T, s checkpoint.Storage) {
	bad := []string{"", ".", "..", "../x", "a/b", `a\b`, "/abs", "nul\x00", "ctl\n", ".tmp-x", ".hidden", string(bytes.Repeat([]byte("n"), checkpoint.MaxNameLen+1)), "\xff"}
	for _, name := range bad {
		check := func(op string, err error) {
			t.Helper()
			if !errors.Is(err, checkpoint.ErrInvalidName) {
				t.Errorf("%s with name %q = %v, want ErrInvalidName", op, name, err)
			}
		}
		w, err := s.Create(ctx, "c1", name)
		if err == nil {
			w.Abort()
		}
		check("Create(object)", err)
		w, err = s.Create(ctx, name, "a")
		if err == nil {
			w.Abort()
		}
		check("Create(checkpoint)", err)
		_, err = s.Open(ctx, "c1", name)
		check("Open", err)
		_, err = s.Stat(ctx, name, "a")
		check("Stat", err)
		_, err = s.Objects(ctx, name)
		check("Objects", err)
		check("Remove", s.Remove(ctx, "c1", name))
		check("RemoveIncomplete", s.RemoveIncomplete(ctx, name))
		check("Delete", s.Delete(ctx, name))
	}
	all, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range all {
		if checkpoint.ValidateName(c) != nil {
			t.Errorf("List returned invalid name %q", c)
		}
	}
}

func testCancelledContext(t *testing.T, s checkpoint.Storage) {
	cctx, cancel := context.WithCancel(ctx)
	w, err := s.Create(cctx, "c1", "a")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("x"))
	cancel()
	if _, err := w.Write([]byte("y")); !errors.Is(err, context.Canceled) {
		t.Errorf("Write after cancel = %v, want context.Canceled", err)
	}
	if err := w.Commit(); !errors.Is(err, context.Canceled) {
		t.Errorf("Commit after cancel = %v, want context.Canceled", err)
	}
	wantNotFound(t, s, "c1", "a")
	if _, err := s.Create(cctx, "c1", "b"); !errors.Is(err, context.Canceled) {
		t.Errorf("Create with a cancelled context = %v, want context.Canceled", err)
	}
	if _, err := s.List(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("List with a cancelled context = %v, want context.Canceled", err)
	}
}

// view is a small runtime.View for the protocol tests.
type view struct {
	maxP    int
	kgs     runtime.KeyGroupRange
	entries map[int][]runtime.Entry // by key group, state "s"
}

func newView(maxP int, kgs runtime.KeyGroupRange, keys int) *view {
	v := &view{maxP: maxP, kgs: kgs, entries: make(map[int][]runtime.Entry)}
	for i, n := 0, 0; n < keys && i < 100*keys; i++ {
		k := []byte(fmt.Sprintf("key-%d", i))
		kg, _ := runtime.KeyGroupForKey(k, maxP)
		if kgs.Contains(kg) {
			v.entries[kg] = append(v.entries[kg], runtime.Entry{Key: k, Value: []byte(fmt.Sprint(i))})
			n++
		}
	}
	return v
}

func (v *view) MaxParallelism() int              { return v.maxP }
func (v *view) KeyGroups() runtime.KeyGroupRange { return v.kgs }
func (v *view) States() []runtime.StateSpec {
	return []runtime.StateSpec{{Name: "s", Kind: runtime.KindValue, Fingerprint: "fp"}}
}
func (v *view) Scan(state string, kg int, fn func(runtime.Entry) error) error {
	if state != "s" || !v.kgs.Contains(kg) {
		return fmt.Errorf("bad scan %q %d", state, kg)
	}
	for _, e := range v.entries[kg] {
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// writeCheckpoint writes a checkpoint of two instances and commits it.
func writeCheckpoint(t *testing.T, s checkpoint.Storage, ckpt string) *checkpoint.Metadata {
	t.Helper()
	const maxP = 8
	var snaps []checkpoint.InstanceSnapshot
	for i := range 2 {
		kgs, _ := runtime.KeyGroupRangeForOperator(maxP, 2, i)
		snap, err := checkpoint.WriteInstance(ctx, s, ckpt, fmt.Sprintf("op-%d.sgc", i), newView(maxP, kgs, 20), nil)
		if err != nil {
			t.Fatal(err)
		}
		snap.OperatorState = []byte{byte(i)}
		snaps = append(snaps, snap)
	}
	op, err := checkpoint.NewOperator("op", snaps...)
	if err != nil {
		t.Fatal(err)
	}
	m := &checkpoint.Metadata{CheckpointID: 7, Operators: []checkpoint.Operator{op}}
	if err := checkpoint.Commit(ctx, s, ckpt, m); err != nil {
		t.Fatal(err)
	}
	return m
}

func testProtocolList(t *testing.T, s checkpoint.Storage) {
	put(t, s, "uncommitted", "op-0.sgc", []byte("data"))
	writeCheckpoint(t, s, "chk-b")
	writeCheckpoint(t, s, "chk-a")
	got, err := checkpoint.List(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"chk-a", "chk-b"}; !slices.Equal(got, want) {
		t.Errorf("checkpoint.List = %q, want %q", got, want)
	}
	if err := checkpoint.Commit(ctx, s, "chk-a", &checkpoint.Metadata{}); !errors.Is(err, checkpoint.ErrExist) {
		t.Errorf("committing chk-a twice = %v, want ErrExist", err)
	}
}

func testProtocolDelete(t *testing.T, s checkpoint.Storage) {
	writeCheckpoint(t, s, "chk-1")
	writeCheckpoint(t, s, "chk-2")
	if err := checkpoint.Delete(ctx, s, "chk-1"); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Delete(ctx, s, "chk-1"); err != nil {
		t.Errorf("second Delete: %v", err)
	}
	got, err := checkpoint.List(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"chk-2"}; !slices.Equal(got, want) {
		t.Errorf("List after Delete = %q, want %q", got, want)
	}
	if objs := objects(t, s, "chk-1"); len(objs) != 0 {
		t.Errorf("objects of a deleted checkpoint remain: %q", objs)
	}
	if _, err := checkpoint.Open(ctx, s, "chk-1"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("Open of a deleted checkpoint = %v, want ErrNotFound", err)
	}
}

func testProtocolCleanup(t *testing.T, s checkpoint.Storage) {
	writeCheckpoint(t, s, "chk-1")
	// Debris: a checkpoint whose coordinator died before the commit, a
	// write that never finished, and a late file in a committed checkpoint.
	put(t, s, "chk-2", "op-0.sgc", []byte("orphan"))
	dead, err := s.Create(ctx, "chk-2", "op-1.sgc")
	if err != nil {
		t.Fatal(err)
	}
	dead.Write([]byte("never committed"))
	crashed, err := s.Create(ctx, "chk-1", "late-writer.sgc")
	if err != nil {
		t.Fatal(err)
	}
	crashed.Write([]byte("never committed"))
	put(t, s, "chk-1", "late.sgc", []byte("acknowledged too late"))
	// In progress: must survive.
	put(t, s, "chk-3", "op-0.sgc", []byte("being written"))
	live, err := s.Create(ctx, "chk-3", "op-1.sgc")
	if err != nil {
		t.Fatal(err)
	}
	live.Write([]byte("still writing"))

	removed, err := checkpoint.Cleanup(ctx, s, func(c string) bool { return c == "chk-3" })
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	if want := []string{"chk-1/late.sgc", "chk-2"}; !slices.Equal(removed, want) {
		t.Errorf("Cleanup removed %q, want %q", removed, want)
	}
	if err := dead.Commit(); err == nil {
		t.Errorf("a write discarded by Cleanup could still commit")
	}
	if err := crashed.Commit(); err == nil {
		t.Errorf("an uncommitted write in a committed checkpoint survived Cleanup")
	}
	if err := live.Commit(); err != nil {
		t.Errorf("Cleanup broke a write in progress: %v", err)
	}
	all, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(all, "chk-2") {
		t.Errorf("List after Cleanup still holds chk-2: %q", all)
	}
	if got, want := objects(t, s, "chk-1"), []string{"_metadata", "op-0.sgc", "op-1.sgc"}; !slices.Equal(got, want) {
		t.Errorf("chk-1 after Cleanup holds %q, want %q", got, want)
	}
	r, err := checkpoint.Open(ctx, s, "chk-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Verify(ctx); err != nil {
		t.Errorf("Verify after Cleanup: %v", err)
	}
	if got, want := objects(t, s, "chk-3"), []string{"op-0.sgc", "op-1.sgc"}; !slices.Equal(got, want) {
		t.Errorf("chk-3 (in progress) after Cleanup holds %q, want %q", got, want)
	}
	// Without inProgress, everything uncommitted goes.
	if _, err := checkpoint.Cleanup(ctx, s, nil); err != nil {
		t.Fatal(err)
	}
	got, err := checkpoint.List(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	all, _ = s.List(ctx)
	if !slices.Equal(got, []string{"chk-1"}) || !slices.Equal(all, []string{"chk-1"}) {
		t.Errorf("after a full Cleanup: committed %q, all %q; want only chk-1", got, all)
	}
}

func testProtocolCommitRequiresFiles(t *testing.T, s checkpoint.Storage) {
	m := writeCheckpoint(t, s, "chk-1")
	m.Operators[0].Instances[1].File.Name = "missing.sgc"
	if err := checkpoint.Commit(ctx, s, "chk-x", m); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("Commit naming a missing file = %v, want ErrNotFound", err)
	}
	if got, _ := checkpoint.List(ctx, s); !slices.Equal(got, []string{"chk-1"}) {
		t.Errorf("a failed Commit left a checkpoint: %q", got)
	}
}

func testProtocolRoundTrip(t *testing.T, s checkpoint.Storage) {
	m := writeCheckpoint(t, s, "chk-1")
	r, err := checkpoint.Open(ctx, s, "chk-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Verify(ctx); err != nil {
		t.Fatal(err)
	}
	got := r.Metadata()
	if got.CheckpointID != m.CheckpointID || len(got.Operators) != 1 || len(got.Operators[0].Instances) != 2 {
		t.Fatalf("metadata read back = %+v", got)
	}
	v, err := r.View(ctx, "op", runtime.FullRange(8))
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	n := 0
	for kg := range 8 {
		if err := v.Scan("s", kg, func(runtime.Entry) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if want := int(m.Operators[0].Instances[0].File.Entries + m.Operators[0].Instances[1].File.Entries); n != want || n != 40 {
		t.Errorf("read %d entries, want %d (40)", n, want)
	}
	plans, err := r.Plan("op", 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plans {
		if len(p.OperatorStates) != 2 || !bytes.Equal(p.OperatorStates[1], []byte{1}) {
			t.Errorf("plan %d: operator states %v, want both old instances'", p.Index, p.OperatorStates)
		}
	}
}
