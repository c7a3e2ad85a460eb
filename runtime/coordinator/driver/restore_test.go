package driver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/coordinator"
	"github.com/stategen/stategen/runtime/storetest"
)

// completeOne runs one checkpoint through ops on the fake clock and returns
// its id.
func completeOne(t *testing.T, c *Coordinator, clock *fakeClock, ops []*operator) coordinator.CheckpointID {
	t.Helper()
	done := c.Stats().Counts().Completed
	clock.Advance(10 * time.Second)
	var id coordinator.CheckpointID
	for _, o := range ops {
		o.write(30)
		tr := o.nextTrigger()
		id = tr.ID
		if err := o.snapshot(tr); err != nil {
			t.Fatal(err)
		}
	}
	waitCompleted(t, c, done+1)
	return id
}

// snapshotNext has every operator of ops snapshot its next trigger, of
// a checkpoint of the kind what names: run it on a goroutine of its own
// while the coordinator waits for the checkpoint.
func snapshotNext(t *testing.T, ops []*operator, what string) {
	for _, o := range ops {
		select {
		case tr := <-o.inst.Triggers():
			if err := o.snapshot(tr); err != nil {
				t.Error(err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("no %s trigger", what)
			return
		}
	}
}

// The restore API: the latest checkpoint (savepoints aside) restores at
// any parallelism, every new instance getting the blobs of all old ones,
// and a store restored by RestoreLatest holds exactly the state at the
// checkpoint's synchronous phase.
func TestRestoreLatestAtAnyParallelism(t *testing.T) {
	s := checkpoint.NewMem()
	clock := &fakeClock{now: t0}
	c := startPlain(t, s, clock, coordinator.Config{Interval: 10 * time.Second, Retained: 2})
	ops := []*operator{newOperator(t, c, 0, 3, InstanceOptions{}), newOperator(t, c, 1, 3, InstanceOptions{}), newOperator(t, c, 2, 3, InstanceOptions{})}
	completeOne(t, c, clock, ops)
	id := completeOne(t, c, clock, ops)
	// A savepoint taken later is not "the latest checkpoint".
	go snapshotNext(t, ops, "savepoint")
	if _, err := c.Savepoint(context.Background(), "later"); err != nil {
		t.Fatal(err)
	}
	name, got, err := Latest(context.Background(), s)
	if err != nil || got != id || name != checkpoint.CheckpointName(uint64(id)) {
		t.Fatalf("Latest = %s, %d, %v; want checkpoint %d", name, got, err, id)
	}
	want, wantBlobs := wantAt(t, id, ops)
	for _, q := range []int{1, 2, 3, 5, maxP} {
		plan, err := PlanLatest(context.Background(), s, "counter", q, 0)
		if err != nil {
			t.Fatal(err)
		}
		if plan.ID != id || plan.MaxParallelism != maxP || len(plan.Instances) != q {
			t.Fatalf("plan %+v", plan)
		}
		got, blobs := restoreAll(t, s, plan.Checkpoint, q)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("parallelism %d (-want +got):\n%s", q, diff)
		}
		if !cmp.Equal(wantBlobs, blobs) {
			t.Errorf("parallelism %d: blobs %x, want %x", q, blobs, wantBlobs)
		}
	}
	// One instance of two, by the convenience.
	o := newOperator(t, nil, 1, 2, InstanceOptions{})
	r, err := RestoreLatest(context.Background(), s, "counter", 1, 2, o.store, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != id || r.Checkpoint != name || len(r.OperatorStates) != 3 || r.Stats.Entries == 0 {
		t.Errorf("restored %+v", r)
	}
	if diff := cmp.Diff(want.Restrict(o.kgs), o.contents()); diff != "" {
		t.Errorf("instance 1 of 2 (-want +got):\n%s", diff)
	}
}

// Restores fail clearly, with errors a caller can test for.
func TestRestoreFailsClearly(t *testing.T) {
	ctx := context.Background()
	empty := checkpoint.NewMem()
	if _, _, err := Latest(ctx, empty); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("Latest of empty storage: %v, want ErrNoCheckpoint", err)
	}
	o := newOperator(t, nil, 0, 1, InstanceOptions{})
	if _, err := RestoreLatest(ctx, empty, "counter", 0, 1, o.store, nil); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("RestoreLatest of empty storage: %v, want ErrNoCheckpoint", err)
	}

	s := checkpoint.NewMem()
	clock := &fakeClock{now: t0}
	c := startPlain(t, s, clock, coordinator.Config{Interval: 10 * time.Second})
	completeOne(t, c, clock, []*operator{newOperator(t, c, 0, 1, InstanceOptions{})})

	if _, err := PlanLatest(ctx, s, "counter", 2, 2*maxP); !errors.Is(err, runtime.ErrMaxParallelismMismatch) || !strings.Contains(err.Error(), "maxParallelism") {
		t.Errorf("another maxParallelism: %v, want ErrMaxParallelismMismatch", err)
	}
	other, err := storetest.NewModel(runtime.StoreConfig{MaxParallelism: 2 * maxP})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := RestoreLatest(ctx, s, "counter", 0, 1, other, nil); !errors.Is(err, runtime.ErrMaxParallelismMismatch) {
		t.Errorf("RestoreLatest into a store with another maxParallelism: %v, want ErrMaxParallelismMismatch", err)
	}
	if _, err := PlanLatest(ctx, s, "renamed", 1, 0); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("unknown operator: %v, want checkpoint.ErrNotFound", err)
	}
	if _, err := PlanLatest(ctx, s, "counter", maxP+1, 0); !errors.Is(err, runtime.ErrInvalidParallelism) {
		t.Errorf("parallelism above maxParallelism: %v, want ErrInvalidParallelism", err)
	}
	plan, err := PlanLatest(ctx, s, "counter", 2, maxP)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plan.Restore(ctx, 2, o.store, nil); !errors.Is(err, runtime.ErrInvalidParallelism) {
		t.Errorf("instance index out of range: %v, want ErrInvalidParallelism", err)
	}
	if _, err := plan.Restore(ctx, 0, o.store, nil); !errors.Is(err, runtime.ErrInvalidKeyGroup) {
		t.Errorf("restore into a store of other key groups: %v, want ErrInvalidKeyGroup", err)
	}
	if _, err := PlanRestore(ctx, s, "no-such-savepoint", "counter", 1, 0); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("unknown checkpoint: %v, want checkpoint.ErrNotFound", err)
	}
}

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Every completed and failed checkpoint is logged with its id, duration,
// bytes, each participant's sync and async durations and bytes, and, for a
// failure, the reason, the participant at fault and the error; the Stats
// summary aggregates the completed ones.
func TestDriverLogsEveryCheckpoint(t *testing.T) {
	var buf syncBuffer
	s := checkpoint.NewMem()
	clock := &fakeClock{now: t0}
	c, err := Start(context.Background(), Options{
		Config:  coordinator.Config{Interval: 10 * time.Second, TolerableFailures: 1},
		Storage: s, Clock: clock, Logger: slog.New(slog.NewJSONHandler(&buf, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	a, b := newOperator(t, c, 0, 2, InstanceOptions{}), newOperator(t, c, 1, 2, InstanceOptions{})
	completeOne(t, c, clock, []*operator{a, b})
	clock.Advance(10 * time.Second)
	if err := a.snapshot(a.nextTrigger()); err != nil {
		t.Fatal(err)
	}
	if err := b.inst.Decline(b.nextTrigger(), errors.New("disk full")); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the failure", func() bool { return c.Stats().Counts().Failed == 1 })

	var completed, failed map[string]any
	waitUntil(t, "both log records", func() bool {
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			switch rec["msg"] {
			case "checkpoint completed":
				completed = rec
			case "checkpoint failed":
				failed = rec
			}
		}
		return completed != nil && failed != nil
	})
	for _, rec := range []map[string]any{completed, failed} {
		for _, key := range []string{"id", "duration", "bytes", "participants"} {
			if _, ok := rec[key]; !ok {
				t.Errorf("log record %v lacks %q", rec, key)
			}
		}
		parts, _ := rec["participants"].(map[string]any)
		pa, _ := parts["counter/0"].(map[string]any)
		for _, key := range []string{"acked", "sync", "async", "bytes"} {
			if _, ok := pa[key]; !ok {
				t.Errorf("participant record %v lacks %q", pa, key)
			}
		}
	}
	if completed["id"] != 1.0 || completed["bytes"].(float64) <= 0 {
		t.Errorf("completed record %v", completed)
	}
	if failed["id"] != 2.0 || failed["reason"] != "declined" || failed["participant"] != "counter/1" || !strings.Contains(failed["err"].(string), "disk full") {
		t.Errorf("failed record %v", failed)
	}
	sum := c.Stats().Summary()
	if sum.Completed != 1 || sum.Bytes.Min <= 0 || sum.AsyncDuration.Max <= 0 {
		t.Errorf("summary %+v", sum)
	}
}

// TestOperatorListsThroughTheDriver: the operator lists bound to an
// instance's store travel in its checkpoints with the operator's own blob,
// even once the operator has let go of its handles (the instance keeps
// them), and RestoreLatest at another parallelism redistributes them and
// hands back only the own blobs.
func TestOperatorListsThroughTheDriver(t *testing.T) {
	s := checkpoint.NewMem()
	clock := &fakeClock{now: t0}
	c := startPlain(t, s, clock, coordinator.Config{Interval: 10 * time.Second, Retained: 2})
	ops := []*operator{newOperator(t, c, 0, 2, InstanceOptions{}), newOperator(t, c, 1, 2, InstanceOptions{})}
	d := runtime.OperatorListDescriptor[int64]{Name: "offsets", Value: runtime.Int64Codec{}}
	for i, o := range ops {
		l, err := runtime.NewOperatorList(o.store, d)
		if err != nil {
			t.Fatal(err)
		}
		for k := range 4 {
			if err := l.Add(int64(10*i + k)); err != nil {
				t.Fatal(err)
			}
		}
	}
	goruntime.GC() // the handles are gone; the instances keep the lists
	goruntime.GC()
	id := completeOne(t, c, clock, ops)
	_, wantBlobs := wantAt(t, id, ops)
	var got []int64
	for i := range 4 {
		o := newOperator(t, nil, i, 4, InstanceOptions{})
		l, err := runtime.NewOperatorList(o.store, d)
		if err != nil {
			t.Fatal(err)
		}
		r, err := RestoreLatest(context.Background(), s, "counter", i, 4, o.store, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !cmp.Equal(wantBlobs, r.OperatorStates) {
			t.Errorf("instance %d of 4: own blobs %x, want %x", i, r.OperatorStates, wantBlobs)
		}
		for _, e := range l.Elements() {
			if int(e.Value/10) != e.Origin {
				t.Errorf("instance %d of 4: offset %d has origin %d", i, e.Value, e.Origin)
			}
			got = append(got, e.Value)
		}
		if n := len(l.Get()); n != 2 {
			t.Errorf("instance %d of 4 got %d offsets, want 2 of the 8", i, n)
		}
	}
	if want := []int64{0, 1, 2, 3, 10, 11, 12, 13}; !cmp.Equal(got, want) {
		t.Errorf("offsets after the rescale: %v, want %v", got, want)
	}
}

// Incremental checkpoints through the driver: on stores behind a
// checkpoint.Tracker, checkpoints after the first completed one are
// written as changes over its chain (the instance reports each completion
// to its tracker), a savepoint amid them is written in full, retention
// deletes old checkpoints without losing a file a later one references,
// and the latest restores exactly at any parallelism.
func TestIncrementalCheckpointsThroughTheDriver(t *testing.T) {
	s := checkpoint.NewMem()
	clock := &fakeClock{now: t0}
	c := startPlain(t, s, clock, coordinator.Config{Interval: 10 * time.Second, Retained: 2})
	tracked := trackedModels(nil)
	ops := []*operator{newOperatorOn(t, tracked, c, 0, 2, InstanceOptions{}), newOperatorOn(t, tracked, c, 1, 2, InstanceOptions{})}
	for _, o := range ops {
		o.write(300)
	}
	var id coordinator.CheckpointID
	incremental := 0
	for i := range 8 {
		id = completeOne(t, c, clock, ops)
		// The completion reaches the instances' trackers before the next
		// trigger does.
		for _, o := range ops {
			n := o.nextNote()
			for n.Savepoint {
				n = o.nextNote()
			}
			if n.ID != id || n.Err != nil {
				t.Fatalf("notification %+v, want checkpoint %d completed", n, id)
			}
		}
		m, err := checkpoint.ReadMetadata(context.Background(), s, checkpoint.CheckpointName(uint64(id)))
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range m.Operators[0].Instances {
			if len(in.Base) > 0 {
				incremental++
			}
		}
		if i == 4 {
			go snapshotNext(t, ops, "savepoint")
			_, err := c.Savepoint(context.Background(), "amid-the-chain")
			if err != nil {
				t.Fatal(err)
			}
			m, err := checkpoint.ReadMetadata(context.Background(), s, "amid-the-chain")
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range m.Operators[0].Instances {
				if len(in.Base) > 0 || in.File.Delta {
					t.Errorf("the savepoint references %d files: a savepoint is self-contained", len(in.Base))
				}
			}
		}
	}
	if incremental == 0 {
		t.Fatal("no checkpoint was written incrementally")
	}
	want, wantBlobs := wantAt(t, id, ops)
	for _, q := range []int{1, 2, 3} {
		got, blobs := restoreAll(t, s, checkpoint.CheckpointName(uint64(id)), q)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("parallelism %d (-want +got):\n%s", q, diff)
		}
		if !cmp.Equal(wantBlobs, blobs) {
			t.Errorf("parallelism %d: blobs %x, want %x", q, blobs, wantBlobs)
		}
	}
	if removed, err := checkpoint.Cleanup(context.Background(), s, nil); err != nil || len(removed) != 0 {
		t.Errorf("Cleanup = %q, %v: retention left debris or a referenced file looks like it", removed, err)
	}
}

// TestLocalRecoveryThroughTheDriver: instances with a LocalCopy keep their
// files on their own storage as checkpoints complete — at the end, exactly
// the files of the last checkpoint's chain — and restore at the same
// parallelism reads every data file from there, with the same contents as
// a restore from the remote storage; at another parallelism each instance
// reads the files of the old instance whose copy it has locally, and the
// others' from the remote storage.
func TestLocalRecoveryThroughTheDriver(t *testing.T) {
	s := checkpoint.NewMem()
	clock := &fakeClock{now: t0}
	c := startPlain(t, s, clock, coordinator.Config{Interval: 10 * time.Second, Retained: 2})
	tracked := trackedModels(&checkpoint.TrackOptions{MaxChainLength: 3})
	locals := make([]*checkpoint.LocalCopy, 2)
	var ops []*operator
	for i := range locals {
		var err error
		if locals[i], err = checkpoint.NewLocalCopy(checkpoint.NewMem()); err != nil {
			t.Fatal(err)
		}
		ops = append(ops, newOperatorOn(t, tracked, c, i, 2, InstanceOptions{LocalCopy: locals[i]}))
		ops[i].write(300)
	}
	var id coordinator.CheckpointID
	for range 5 {
		id = completeOne(t, c, clock, ops)
		for _, o := range ops {
			if n := o.nextNote(); n.ID != id || n.Err != nil {
				t.Fatalf("notification %+v, want checkpoint %d completed", n, id)
			}
		}
	}
	m, err := checkpoint.ReadMetadata(context.Background(), s, checkpoint.CheckpointName(uint64(id)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, l := range locals {
		in := m.Operators[0].Instances[i]
		want := []string{checkpoint.CheckpointName(uint64(id)) + "/" + in.File.Name}
		for _, ref := range in.Base {
			want = append(want, ref.Checkpoint+"/"+ref.File.Name)
		}
		slices.Sort(want)
		// Retain runs after the notification, on a goroutine of its own.
		var got []string
		for deadline := time.Now().Add(10 * time.Second); ; {
			got = localFiles(t, l.Local())
			if slices.Equal(got, want) || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if !slices.Equal(got, want) {
			t.Errorf("instance %d's local copy holds %q, want the chain of checkpoint %d: %q", i, got, id, want)
		}
	}

	wantContents, _ := wantAt(t, id, ops)
	for _, q := range []int{2, 3} {
		var parts []storetest.Contents
		plan, err := PlanRestore(ctx, s, checkpoint.CheckpointName(uint64(id)), "counter", q, maxP)
		if err != nil {
			t.Fatal(err)
		}
		for i := range q {
			l := locals[min(i, 1)]
			before := l.Stats()
			r, err := PlanRestore(ctx, l.Storage(s), checkpoint.CheckpointName(uint64(id)), "counter", q, maxP)
			if err != nil {
				t.Fatal(err)
			}
			o := newOperator(t, nil, i, q, InstanceOptions{})
			if _, err := r.Restore(ctx, i, o.store, nil); err != nil {
				t.Fatalf("restore of instance %d of %d through its local copy: %v", i, q, err)
			}
			parts = append(parts, o.contents())
			after := l.Stats()
			hits, misses := after.Hits-before.Hits, after.Misses-before.Misses
			// The files of the old instance whose copy this is are local,
			// the others' remote.
			local, remote := 0, 0
			for _, rd := range plan.Instances[i].Reads {
				files := 1 + len(m.Operators[0].Instances[rd.Instance].Base)
				if rd.Instance == min(i, 1) {
					local += files
				} else {
					remote += files
				}
			}
			if hits != int64(local) || misses != int64(remote) {
				t.Errorf("instance %d of %d: %d local hits and %d misses, want %d and %d", i, q, hits, misses, local, remote)
			}
			if q == 3 && i == 1 && remote == 0 {
				t.Errorf("instance 1 of 3 reads no file of old instance 0")
			}
			if after.Rejected != 0 {
				t.Errorf("instance %d of %d: %d local copies rejected", i, q, after.Rejected)
			}
		}
		if diff := cmp.Diff(wantContents, storetest.Merge(parts...)); diff != "" {
			t.Errorf("restored through the local copies at parallelism %d (-want +got):\n%s", q, diff)
		}
	}
}

// localFiles lists the data files of a local copy as checkpoint/name.
func localFiles(t *testing.T, s checkpoint.Storage) []string {
	t.Helper()
	ctx := context.Background()
	all, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range all {
		objs, err := s.Objects(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if !strings.HasSuffix(o.Name, ".local-sum") {
				out = append(out, c+"/"+o.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// trackedModels makes model stores behind Trackers with opts.
func trackedModels(opts *checkpoint.TrackOptions) storeMaker { return trackedStores(modelStore, opts) }

// trackedStores makes stores of mk behind Trackers with opts.
func trackedStores(mk storeMaker, opts *checkpoint.TrackOptions) storeMaker {
	return func(cfg runtime.StoreConfig) (runtime.Store, error) {
		inner, err := mk(cfg)
		if err != nil {
			return nil, err
		}
		return checkpoint.Track(inner, opts)
	}
}
