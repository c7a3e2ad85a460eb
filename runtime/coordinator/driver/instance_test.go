package driver

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime/coordinator"
)

// startPlain starts a Coordinator on the fake clock without participants.
func startPlain(t *testing.T, s checkpoint.Storage, clock Clock, cfg coordinator.Config) *Coordinator {
	t.Helper()
	c, err := Start(context.Background(), Options{Config: cfg, Storage: s, Clock: clock, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// The common case, end to end: the operator takes the trigger between two
// records, the write acknowledges with the blob, the completion reaches the
// operator with that blob, and the checkpoint restores to exactly the state
// of the synchronous phase — at another parallelism too, each new instance
// getting every old blob. The record carries the instance's sync and async
// durations and bytes.
func TestInstanceSnapshotAcknowledgesAndNotifiesCompletion(t *testing.T) {
	s := checkpoint.NewMem()
	clock := &fakeClock{now: t0}
	c := startPlain(t, s, clock, coordinator.Config{Interval: 10 * time.Second})
	ops := []*operator{newOperator(t, c, 0, 2, InstanceOptions{}), newOperator(t, c, 1, 2, InstanceOptions{})}
	for _, o := range ops {
		o.write(50)
	}
	clock.Advance(10 * time.Second)
	for _, o := range ops {
		tr := o.nextTrigger()
		if tr.ID != 1 || tr.Checkpoint != checkpoint.CheckpointName(1) || !tr.Deadline.Equal(t0.Add(10*time.Second+coordinator.DefaultTimeout)) {
			t.Fatalf("trigger %+v", tr)
		}
		if err := o.snapshot(tr); err != nil {
			t.Fatal(err)
		}
		o.write(10) // after the synchronous phase: not in checkpoint 1
	}
	for _, o := range ops {
		n := o.nextNote()
		_, blob, _ := o.expectedAt(1)
		if n.ID != 1 || !n.Completed() || !bytes.Equal(n.OperatorState, blob) {
			t.Errorf("operator %d: notification %+v, want completion of 1 with blob %x", o.index, n, blob)
		}
	}
	want, wantBlobs := wantAt(t, 1, ops)
	for _, q := range []int{1, 2, 3} {
		got, blobs := restoreAll(t, s, checkpoint.CheckpointName(1), q)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("restored at parallelism %d (-want +got):\n%s", q, diff)
		}
		if !cmp.Equal(wantBlobs, blobs) {
			t.Errorf("blobs at parallelism %d: %x, want %x", q, blobs, wantBlobs)
		}
	}
	r, ok := c.Stats().LastCompleted()
	if !ok || r.ID != 1 || len(r.Participants) != 2 {
		t.Fatalf("last completed %+v", r)
	}
	var sum int64
	for _, p := range r.Participants {
		if !p.Acked || p.Bytes <= 0 || p.SyncDuration <= 0 || p.AsyncDuration <= 0 {
			t.Errorf("participant stats %+v", p)
		}
		sum += p.Bytes
	}
	objs, err := s.Objects(context.Background(), checkpoint.CheckpointName(1))
	if err != nil {
		t.Fatal(err)
	}
	var files int64
	for _, o := range objs {
		if o.Name != checkpoint.MetadataName {
			files += o.Size
		}
	}
	if r.Bytes != sum || r.Bytes != files {
		t.Errorf("record bytes %d, participants %d, files %d", r.Bytes, sum, files)
	}
}

// A trigger whose checkpoint ended before the operator took it is skipped:
// nothing is written.
func TestInstanceSkipsTriggerOfEndedCheckpoint(t *testing.T) {
	s := checkpoint.NewMem()
	clock := &fakeClock{now: t0}
	c := startPlain(t, s, clock, coordinator.Config{Interval: 10 * time.Second, Timeout: 5 * time.Second, TolerableFailures: 9})
	o := newOperator(t, c, 0, 1, InstanceOptions{})
	clock.Advance(10 * time.Second)
	tr := o.nextTrigger()
	clock.Advance(5 * time.Second)
	if n := o.nextNote(); n.ID != 1 || !errors.Is(n.Err, coordinator.ErrExpired) || n.OperatorState != nil {
		t.Fatalf("notification %+v, want checkpoint 1 expired", n)
	}
	if err := o.inst.Snapshot(tr, []byte("late")); err != nil {
		t.Fatalf("Snapshot of an expired checkpoint: %v", err)
	}
	if err := o.inst.Snapshot(tr, nil); !errors.Is(err, ErrUnknownTrigger) {
		t.Errorf("second Snapshot of the trigger: %v, want ErrUnknownTrigger", err)
	}
	if objs, _ := s.Objects(context.Background(), tr.Checkpoint); len(objs) != 0 {
		t.Errorf("objects written for an expired checkpoint: %v", objs)
	}
	// A trigger past its deadline but not yet expired is skipped too.
	clock.Advance(5 * time.Second)
	tr = o.nextTrigger()
	clock.mu.Lock()
	clock.now = tr.Deadline // the timer has not fired yet
	clock.mu.Unlock()
	if err := o.inst.Snapshot(tr, nil); err != nil {
		t.Fatal(err)
	}
	if objs, _ := s.Objects(context.Background(), tr.Checkpoint); len(objs) != 0 {
		t.Errorf("objects written for a checkpoint past its deadline: %v", objs)
	}
}

// When another participant declines, the checkpoint is aborted and the
// write still running is cancelled: it leaves nothing, and the instance
// does not decline on top (one failure, not two).
func TestInstanceCancelsWriteOfAbortedCheckpoint(t *testing.T) {
	s := newHookStorage(checkpoint.NewMem())
	clock := &fakeClock{now: t0}
	c := startPlain(t, s, clock, coordinator.Config{Interval: 10 * time.Second, TolerableFailures: 9})
	a, b := newOperator(t, c, 0, 2, InstanceOptions{}), newOperator(t, c, 1, 2, InstanceOptions{})
	a.write(20)
	s.setHook(func(ctx context.Context, ckpt, name string) error {
		if strings.HasPrefix(name, "counter-0") {
			return blockUntilDone(ctx)
		}
		return nil
	})
	clock.Advance(10 * time.Second)
	ta, tb := a.nextTrigger(), b.nextTrigger()
	if err := a.snapshot(ta); err != nil {
		t.Fatal(err)
	}
	if err := b.inst.Decline(tb, errors.New("input not ready")); err != nil {
		t.Fatal(err)
	}
	n := a.nextNote()
	if n.ID != 1 || !errors.Is(n.Err, coordinator.ErrDeclined) || n.OperatorState == nil {
		t.Fatalf("notification %+v, want checkpoint 1 declined, with a's blob", n)
	}
	if err := a.inst.Close(); err != nil { // waits for the cancelled write
		t.Fatal(err)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := c.Stats().Counts(); got.Failed != 1 || got.InProgress() != 0 {
		t.Errorf("counts %+v, want one failure", got)
	}
	if lf, _ := c.Stats().LastFailed(); lf.Err == nil || lf.Err.Participant != b.inst.ID() {
		t.Errorf("last failure %+v, want declined by %s", lf.Err, b.inst.ID())
	}
	if names, _ := s.List(context.Background()); slices.ContainsFunc(names, func(n string) bool { return n != checkpoint.CoordinatorName }) {
		t.Errorf("storage holds %v after the abort", names)
	}
}

// A trigger that finds the mailbox full is declined with ErrMailboxFull.
func TestInstanceDeclinesWhenMailboxIsFull(t *testing.T) {
	clock := &fakeClock{now: t0}
	c := startPlain(t, checkpoint.NewMem(), clock, coordinator.Config{Interval: 10 * time.Second, MaxConcurrent: 2, TolerableFailures: 9})
	o := newOperator(t, c, 0, 1, InstanceOptions{Mailbox: 1})
	clock.Advance(10 * time.Second)
	waitUntil(t, "trigger 1", func() bool { return c.Stats().Counts().Triggered == 1 })
	clock.Advance(10 * time.Second) // 2 finds 1 in the mailbox
	if n := o.nextNote(); n.ID != 2 || !errors.Is(n.Err, ErrMailboxFull) {
		t.Fatalf("notification %+v, want checkpoint 2 declined with ErrMailboxFull", n)
	}
	if tr := o.nextTrigger(); tr.ID != 1 {
		t.Fatalf("trigger %d in the mailbox, want 1", tr.ID)
	}
}

// When the operator falls behind, the oldest notification makes room for
// the newest: the latest completion, which implies the others, survives.
func TestInstanceNotificationsKeepTheLatest(t *testing.T) {
	clock := &fakeClock{now: t0}
	c := startPlain(t, checkpoint.NewMem(), clock, coordinator.Config{Interval: 10 * time.Second})
	o := newOperator(t, c, 0, 1, InstanceOptions{Mailbox: 1})
	for id := coordinator.CheckpointID(1); id <= 3; id++ {
		clock.Advance(10 * time.Second)
		if err := o.snapshot(o.nextTrigger()); err != nil {
			t.Fatal(err)
		}
		waitCompleted(t, c, int64(id))
	}
	settle(t, c)
	_, blob, _ := o.expectedAt(3)
	if n := o.nextNote(); n.ID != 3 || !n.Completed() || !bytes.Equal(n.OperatorState, blob) {
		t.Errorf("notification %+v, want the completion of 3", n)
	}
	select {
	case n := <-o.inst.Notifications():
		t.Errorf("extra notification %+v", n)
	default:
	}
}

// waitCompleted waits until n checkpoints completed.
func waitCompleted(t *testing.T, c *Coordinator, n int64) {
	t.Helper()
	waitUntil(t, "completions", func() bool { return c.Stats().Counts().Completed >= n })
}

// settle waits until the Coordinator's goroutine has executed the
// decisions of every input it took so far (Stats is updated before the
// participants are called).
func settle(t *testing.T, c *Coordinator) {
	t.Helper()
	done := make(chan struct{})
	if err := c.do(func() { close(done) }); err != nil {
		t.Fatal(err)
	}
	<-done
}

// waitUntil polls cond until it holds, failing after a generous deadline
// (a hang, not a timing assertion).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 20s for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A failing synchronous phase declines the checkpoint, and Snapshot says
// why.
func TestInstanceDeclinesWhenSyncPhaseFails(t *testing.T) {
	clock := &fakeClock{now: t0}
	c := startPlain(t, checkpoint.NewMem(), clock, coordinator.Config{Interval: 10 * time.Second, TolerableFailures: 9})
	o := newOperator(t, c, 0, 1, InstanceOptions{})
	clock.Advance(10 * time.Second)
	tr := o.nextTrigger()
	if err := o.store.Close(); err != nil {
		t.Fatal(err)
	}
	if err := o.inst.Snapshot(tr, nil); err == nil || !strings.Contains(err.Error(), "counter/0") {
		t.Fatalf("Snapshot with a closed store: %v", err)
	}
	if n := o.nextNote(); n.ID != 1 || !errors.Is(n.Err, coordinator.ErrDeclined) {
		t.Fatalf("notification %+v, want checkpoint 1 declined", n)
	}
	if err := o.inst.Snapshot(Trigger{ID: 7}, nil); !errors.Is(err, ErrUnknownTrigger) {
		t.Errorf("Snapshot of a trigger never delivered: %v, want ErrUnknownTrigger", err)
	}
}

// Close leaves the coordinator — the checkpoint waiting for the instance is
// aborted, not counted — and cancels the write in flight; afterwards the
// instance refuses work, and a second Close is harmless.
func TestInstanceCloseLeavesAndCancels(t *testing.T) {
	s := newHookStorage(checkpoint.NewMem())
	s.setHook(func(ctx context.Context, ckpt, name string) error {
		if ckpt != checkpoint.CoordinatorName {
			return blockUntilDone(ctx)
		}
		return nil
	})
	clock := &fakeClock{now: t0}
	c := startPlain(t, s, clock, coordinator.Config{Interval: 10 * time.Second})
	o := newOperator(t, c, 0, 1, InstanceOptions{})
	clock.Advance(10 * time.Second)
	tr := o.nextTrigger()
	if err := o.snapshot(tr); err != nil {
		t.Fatal(err)
	}
	if err := o.inst.Close(); err != nil {
		t.Fatal(err)
	}
	if err := o.inst.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := o.inst.Snapshot(tr, nil); !errors.Is(err, ErrInstanceClosed) {
		t.Errorf("Snapshot after Close: %v, want ErrInstanceClosed", err)
	}
	if got := c.core0Participants(t); len(got) != 0 {
		t.Errorf("participants after Close: %v", got)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	lf, ok := c.Stats().LastFailed()
	if !ok || lf.ID != 1 || !errors.Is(lf.Err, coordinator.ErrParticipantLost) || c.Err() != nil {
		t.Errorf("last failure %+v (job error %v), want checkpoint 1 lost its participant, not counted", lf.Err, c.Err())
	}
	if objs, _ := s.Objects(context.Background(), tr.Checkpoint); len(objs) != 0 {
		t.Errorf("objects left by the cancelled write: %v", objs)
	}
}

// core0Participants returns the Core's participants, read on the loop.
func (c *Coordinator) core0Participants(t *testing.T) []coordinator.ParticipantID {
	t.Helper()
	ch := make(chan []coordinator.ParticipantID, 1)
	if err := c.do(func() { ch <- c.core.Participants() }); err != nil {
		t.Fatal(err)
	}
	return <-ch
}

func TestJoinValidatesOptions(t *testing.T) {
	c := startPlain(t, checkpoint.NewMem(), &fakeClock{now: t0}, coordinator.Config{Interval: 10 * time.Second})
	store := newOperator(t, nil, 0, 1, InstanceOptions{}).store
	for _, tc := range []struct {
		opts  InstanceOptions
		field string
	}{
		{InstanceOptions{Index: 0, Store: store}, "InstanceOptions.Operator"},
		{InstanceOptions{Operator: "a/b", Store: store}, "InstanceOptions.Operator"},
		{InstanceOptions{Operator: strings.Repeat("x", checkpoint.MaxNameLen-2), Store: store}, "InstanceOptions.Operator"},
		{InstanceOptions{Operator: "op", Index: -1, Store: store}, "InstanceOptions.Index"},
		{InstanceOptions{Operator: "op"}, "InstanceOptions.Store"},
		{InstanceOptions{Operator: "op", Store: store, Mailbox: -1}, "InstanceOptions.Mailbox"},
	} {
		if _, err := c.Join(tc.opts); err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Join(%+v): %v, want an error naming %s", tc.opts, err, tc.field)
		}
	}
	if _, err := c.Join(InstanceOptions{Operator: "op", Store: store}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Join(InstanceOptions{Operator: "op", Store: store}); !errors.Is(err, ErrDuplicateInstance) {
		t.Errorf("second Join of op/0: %v, want ErrDuplicateInstance", err)
	}
}

// TestDeadlinePassedWhileArming: the clock passes a checkpoint's deadline
// between the Now the coordinator computes the deadline's timer from and
// the timer's AfterFunc, which then counts from the later time and fires
// late (by the whole jump on a test clock). The coordinator still expires
// the checkpoint at once, not when the late timer fires: with a fake
// clock, it never would (tests waited 20s for a notification, under load
// in CI).
func TestDeadlinePassedWhileArming(t *testing.T) {
	s := checkpoint.NewMem()
	clock := &fakeClock{now: t0}
	const timeout = 5 * time.Second
	var once sync.Once
	clock.mu.Lock()
	clock.beforeArm = func(d time.Duration) {
		if d == timeout { // the deadline of checkpoint 1, armed after its trigger
			once.Do(func() { clock.Advance(timeout) })
		}
	}
	clock.mu.Unlock()
	c := startPlain(t, s, clock, coordinator.Config{Interval: 10 * time.Second, Timeout: timeout, TolerableFailures: 9})
	o := newOperator(t, c, 0, 1, InstanceOptions{})
	clock.Advance(10 * time.Second)
	o.nextTrigger()
	select {
	case n := <-o.inst.Notifications():
		if n.ID != 1 || !errors.Is(n.Err, coordinator.ErrExpired) {
			t.Fatalf("notification %+v, want checkpoint 1 expired", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("checkpoint 1 did not expire: its deadline passed while its timer was armed")
	}
}
