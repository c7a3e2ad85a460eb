package driver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime/coordinator"
)

// memCounter is an IDCounter in memory.
type memCounter struct {
	mu       sync.Mutex
	limit    coordinator.CheckpointID
	reserved []coordinator.CheckpointID
}

func (c *memCounter) Read(context.Context) (coordinator.CheckpointID, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.limit, nil
}

func (c *memCounter) Reserve(_ context.Context, limit coordinator.CheckpointID) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.limit = max(c.limit, limit)
	c.reserved = append(c.reserved, limit)
	return nil
}

// memIndex is a CompletedStore in memory whose writes can be made to fail,
// as a deposed leader's are.
type memIndex struct {
	mu                sync.Mutex
	ids               []coordinator.CheckpointID
	addErr, removeErr error
}

func (x *memIndex) Completed(context.Context) ([]coordinator.CheckpointID, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Clone(x.ids), nil
}

func (x *memIndex) Add(_ context.Context, id coordinator.CheckpointID) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.addErr != nil {
		return x.addErr
	}
	if !slices.Contains(x.ids, id) {
		x.ids = append(x.ids, id)
		slices.Sort(x.ids)
	}
	return nil
}

func (x *memIndex) Remove(_ context.Context, id coordinator.CheckpointID) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.removeErr != nil {
		return x.removeErr
	}
	x.ids = slices.DeleteFunc(x.ids, func(i coordinator.CheckpointID) bool { return i == id })
	return nil
}

func (x *memIndex) set(addErr, removeErr error) {
	x.mu.Lock()
	x.addErr, x.removeErr = addErr, removeErr
	x.mu.Unlock()
}

func (x *memIndex) listed() []coordinator.CheckpointID {
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Clone(x.ids)
}

func names(ids ...uint64) []string {
	var out []string
	for _, id := range ids {
		out = append(out, checkpoint.CheckpointName(id))
	}
	return out
}

// A Coordinator with its own id counter issues ids from it and reserves in
// it — nothing goes to the storage's counter.
func TestStartUsesTheGivenCounter(t *testing.T) {
	s := checkpoint.NewMem()
	clock := &fakeClock{now: t0}
	ctr := &memCounter{limit: 40}
	c, err := Start(context.Background(), Options{
		Config: coordinator.Config{Interval: 10 * time.Second, IDReservation: 4}, Storage: s, Clock: clock, Logger: quiet(), Counter: ctr,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	o := newOperator(t, c, 0, 1, InstanceOptions{})
	clock.Advance(10 * time.Second)
	if tr := o.nextTrigger(); tr.ID != 40 {
		t.Fatalf("first id %d, want the counter's 40", tr.ID)
	}
	ctr.mu.Lock()
	reserved := slices.Clone(ctr.reserved)
	ctr.mu.Unlock()
	if len(reserved) == 0 || reserved[0] != 44 {
		t.Errorf("reservations %v, want 44 first", reserved)
	}
	if got, err := ReadCounter(context.Background(), s); got != 0 || err != nil {
		t.Errorf("the storage's counter is %d, %v; want none", got, err)
	}
}

// With a completed-checkpoint index, a checkpoint completes when the index
// lists it; one the index refuses is aborted and deleted, one whose
// listing has an unknown outcome is kept; retention drops a checkpoint
// from the index before it deletes it, and keeps it if the index refuses;
// and a restarted Coordinator retains what the index lists and deletes the
// committed checkpoints it does not.
func TestCompletedIndexDecidesWhatIsCompleted(t *testing.T) {
	s := checkpoint.NewMem()
	clock := &fakeClock{now: t0}
	ctr := &memCounter{}
	idx := &memIndex{}
	opts := Options{
		Config:  coordinator.Config{Interval: 10 * time.Second, TolerableFailures: coordinator.UnlimitedFailures},
		Storage: s, Clock: clock, Logger: quiet(), Counter: ctr, Completed: idx,
	}
	c, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	o := newOperator(t, c, 0, 1, InstanceOptions{})
	step := func(id coordinator.CheckpointID, completed bool) {
		t.Helper()
		clock.Advance(10 * time.Second)
		tr := o.nextTrigger()
		if tr.ID != id {
			t.Fatalf("trigger %d, want %d", tr.ID, id)
		}
		if err := o.snapshot(tr); err != nil {
			t.Fatal(err)
		}
		n := o.nextNote()
		if n.ID != id || n.Completed() != completed {
			t.Fatalf("checkpoint %d: notification %+v, want completed=%v", id, n, completed)
		}
		settle(t, c)
	}
	check := func(wantIndex []coordinator.CheckpointID, wantCommitted []string) {
		t.Helper()
		// Retention edits the index on the driver's I/O goroutine, after
		// the notification: wait for it as for the deletions.
		waitUntil(t, fmt.Sprintf("index lists %v", wantIndex), func() bool { return slices.Equal(idx.listed(), wantIndex) })
		waitUntil(t, fmt.Sprintf("committed %v", wantCommitted), func() bool { return slices.Equal(committed(t, s), wantCommitted) })
		// A Delete un-commits its checkpoint first and removes the files
		// after: wait for those too, or they look like debris.
		waitUntil(t, fmt.Sprintf("stored %v", wantCommitted), func() bool { return slices.Equal(stored(t, s), wantCommitted) })
	}
	step(1, true)
	check([]coordinator.CheckpointID{1}, names(1))
	step(2, true) // retention: 1 is dropped from the index, then deleted
	check([]coordinator.CheckpointID{2}, names(2))

	idx.set(fmt.Errorf("%w: timeout", coordinator.ErrOutcomeUnknown), nil)
	step(3, false) // aborted, but its metadata may be listed: kept
	check([]coordinator.CheckpointID{2}, names(2, 3))

	idx.set(errors.New("not the leader"), nil)
	step(4, false) // refused: aborted and deleted
	check([]coordinator.CheckpointID{2}, names(2, 3))

	idx.set(nil, errors.New("not the leader"))
	step(5, true) // completes; 2 cannot leave the index, so it stays
	check([]coordinator.CheckpointID{2, 5}, names(2, 3, 5))
	if err := o.inst.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	// A restart retains what the index lists and deletes 3, committed but
	// never listed.
	idx.set(nil, nil)
	c2, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c2.Close(context.Background()) })
	if got := ids(c2.Retained()); !slices.Equal(got, []coordinator.CheckpointID{2, 5}) {
		t.Errorf("retained after restart %v, want [2 5]", got)
	}
	check([]coordinator.CheckpointID{2, 5}, names(2, 5))
	o2 := newOperator(t, c2, 0, 1, InstanceOptions{})
	clock.Advance(10 * time.Second)
	tr := o2.nextTrigger()
	if err := o2.snapshot(tr); err != nil {
		t.Fatal(err)
	}
	if n := o2.nextNote(); !n.Completed() {
		t.Fatalf("checkpoint %d: %v", tr.ID, n.Err)
	}
	settle(t, c2)
	check([]coordinator.CheckpointID{tr.ID}, names(uint64(tr.ID)))
	checkRestoresOps(t, s, tr.ID, o2)
	noDebris(t, s)
}

// An index that lists a checkpoint the storage lacks stops the start: the
// job's recovery point is gone, which must not pass unnoticed.
func TestStartFailsWhenIndexedCheckpointIsMissing(t *testing.T) {
	_, err := Start(context.Background(), Options{
		Config: coordinator.Config{Interval: time.Second}, Storage: checkpoint.NewMem(), Logger: quiet(),
		Counter: &memCounter{}, Completed: &memIndex{ids: []coordinator.CheckpointID{7}},
	})
	if !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("Start = %v, want ErrNotFound", err)
	}
}

func ids(cps []coordinator.Checkpoint) []coordinator.CheckpointID {
	var out []coordinator.CheckpointID
	for _, cp := range cps {
		out = append(out, cp.ID)
	}
	return out
}

// checkRestoresOps restores checkpoint id and compares it with what o held
// at its trigger.
func checkRestoresOps(t *testing.T, s checkpoint.Storage, id coordinator.CheckpointID, ops ...*operator) {
	t.Helper()
	got, gotBlobs := restoreAll(t, s, checkpoint.CheckpointName(uint64(id)), 1)
	want, wantBlobs := wantAt(t, id, ops)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("checkpoint %d restores to other state (-want +got):\n%s", id, diff)
	}
	if diff := cmp.Diff(wantBlobs, gotBlobs); diff != "" {
		t.Fatalf("checkpoint %d restores other blobs (-want +got):\n%s", id, diff)
	}
}

// fakeUpstream records what an Instance sends.
type fakeUpstream struct {
	mu       sync.Mutex
	acks     []checkpoint.SnapshotResult
	declines []error
	removed  []coordinator.ParticipantID
	ackErr   error
}

func (u *fakeUpstream) Ack(t Trigger, from coordinator.ParticipantID, a Acknowledgement) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ackErr != nil {
		return u.ackErr
	}
	u.acks = append(u.acks, a.Result)
	return nil
}

func (u *fakeUpstream) Decline(t Trigger, from coordinator.ParticipantID, cause error) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.declines = append(u.declines, cause)
	return nil
}

func (u *fakeUpstream) RemoveParticipant(id coordinator.ParticipantID) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.removed = append(u.removed, id)
	return nil
}

func (u *fakeUpstream) counts() (acks, declines, removed int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.acks), len(u.declines), len(u.removed)
}

// An Instance made with NewInstance is driven through its Participant by a
// transport, and answers to its Upstream: snapshots are written to the
// trigger's storage and acknowledged, declines and the leaving go to the
// Upstream, and a snapshot whose acknowledgement cannot be sent is removed.
func TestNewInstanceAnswersToItsUpstream(t *testing.T) {
	if _, _, err := NewInstance(InstanceOptions{Operator: "counter"}, nil); err == nil {
		t.Error("NewInstance without an Upstream succeeded")
	}
	o := newOperator(t, nil, 0, 1, InstanceOptions{})
	up := &fakeUpstream{}
	in, part, err := NewInstance(InstanceOptions{Operator: "counter", Index: 0, Store: o.store}, up)
	if err != nil {
		t.Fatal(err)
	}
	o.inst = in
	if part.ID() != in.ID() || part.Operator() != "counter" {
		t.Fatalf("participant %q/%q for instance %q", part.ID(), part.Operator(), in.ID())
	}
	s := checkpoint.NewMem()
	trigger := func(id coordinator.CheckpointID) Trigger {
		tr := Trigger{ID: id, At: time.Now(), Deadline: time.Now().Add(time.Hour), Storage: s, Checkpoint: checkpoint.CheckpointName(uint64(id))}
		part.Trigger(tr)
		return o.nextTrigger()
	}
	o.write(50)
	tr := trigger(7)
	if err := o.snapshot(tr); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the acknowledgement", func() bool { a, _, _ := up.counts(); return a == 1 })
	up.mu.Lock()
	res := up.acks[0]
	up.mu.Unlock()
	if _, err := s.Stat(context.Background(), tr.Checkpoint, res.Snapshot.File.Name); err != nil {
		t.Errorf("acknowledged file: %v", err)
	}
	part.NotifyComplete(Completion{ID: 7})
	if n := o.nextNote(); n.ID != 7 || !n.Completed() || !slices.Equal(n.OperatorState, res.Snapshot.OperatorState) {
		t.Errorf("notification %+v", n)
	}

	if err := in.Decline(trigger(8), coordinator.ErrNotReady); err != nil {
		t.Fatal(err)
	}
	if _, d, _ := up.counts(); d != 1 {
		t.Errorf("%d declines, want 1", d)
	}

	up.mu.Lock()
	up.ackErr = errors.New("coordinator unreachable")
	up.mu.Unlock()
	tr9 := trigger(9)
	if err := o.snapshot(tr9); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the unacknowledged file removed", func() bool {
		objs, err := s.Objects(context.Background(), tr9.Checkpoint)
		return err == nil && len(objs) == 0
	})
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, r := up.counts(); r != 1 {
		t.Errorf("%d removals, want 1", r)
	}
}
