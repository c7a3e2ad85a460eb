package driver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime/coordinator"
)

// Checkpoints that were aborted and deleted leave no trace in storage; a
// restarted coordinator must still not issue their ids again (Flink's id
// counter never repeats, also across failovers). Deriving the counter from
// storage would restart at 1 here.
func TestIDsNeverRepeatAfterRestartWithoutTraces(t *testing.T) {
	s := checkpoint.NewMem()
	clock := &fakeClock{now: t0}
	cfg := coordinator.Config{Interval: 10 * time.Second, TolerableFailures: coordinator.UnlimitedFailures, IDReservation: 3}
	c := startPlain(t, s, clock, cfg)
	o := newOperator(t, c, 0, 1, InstanceOptions{})
	var last coordinator.CheckpointID
	for range 5 {
		clock.Advance(10 * time.Second)
		tr := o.nextTrigger()
		last = tr.ID
		if err := o.inst.Decline(tr, errors.New("not this time")); err != nil {
			t.Fatal(err)
		}
		if n := o.nextNote(); n.ID != tr.ID || n.Completed() {
			t.Fatalf("notification %+v", n)
		}
	}
	if err := o.inst.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if names, err := checkpoint.List(context.Background(), s); err != nil || len(names) != 0 {
		t.Fatalf("committed %v, %v; want nothing", names, err)
	}
	// A Cleanup by hand leaves the counter alone.
	if _, err := checkpoint.Cleanup(context.Background(), s, nil); err != nil {
		t.Fatal(err)
	}
	c2 := startPlain(t, s, clock, cfg)
	o2 := newOperator(t, c2, 0, 1, InstanceOptions{})
	clock.Advance(10 * time.Second)
	if tr := o2.nextTrigger(); tr.ID <= last {
		t.Fatalf("after a restart the first id is %d; %d was issued before", tr.ID, last)
	}
}

// Reservations are batched and made ahead of need: with batches of 4, ten
// checkpoints cost four counter writes (at Start, then after ids 2, 6 and
// 10), and only the newest counter object is kept.
func TestCounterReservesInBatchesAheadOfNeed(t *testing.T) {
	s := newHookStorage(checkpoint.NewMem())
	clock := &fakeClock{now: t0}
	c := startPlain(t, s, clock, coordinator.Config{Interval: 10 * time.Second, IDReservation: 4})
	o := newOperator(t, c, 0, 1, InstanceOptions{})
	for id := coordinator.CheckpointID(1); id <= 10; id++ {
		clock.Advance(10 * time.Second)
		tr := o.nextTrigger()
		if tr.ID != id {
			t.Fatalf("trigger %d, want %d: no trigger may wait for a reservation", tr.ID, id)
		}
		if err := o.snapshot(tr); err != nil {
			t.Fatal(err)
		}
		waitCompleted(t, c, int64(id))
	}
	waitUntil(t, "the fourth counter write", func() bool { return s.committed(checkpoint.CoordinatorName) >= 4 })
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := s.committed(checkpoint.CoordinatorName); n != 4 {
		t.Errorf("%d counter writes for 10 checkpoints, want 4", n)
	}
	objs, err := s.Objects(context.Background(), checkpoint.CoordinatorName)
	if err != nil || len(objs) != 1 || objs[0].Name != counterObject(17) {
		t.Errorf("counter objects %v, %v; want only %s", objs, err, counterObject(17))
	}
	if got, err := ReadCounter(context.Background(), s); got != 17 || err != nil {
		t.Errorf("ReadCounter = %d, %v; want 17", got, err)
	}
}

// A counter that cannot be written fails the triggers that need an id, and
// those count as failures: with none tolerated the job fails, naming the
// counter (Flink: testTriggerCheckpointWithCounterIOException).
func TestCounterFailureFailsTheJob(t *testing.T) {
	s := newHookStorage(checkpoint.NewMem())
	clock := &fakeClock{now: t0}
	c := startPlain(t, s, clock, coordinator.Config{Interval: 10 * time.Second, IDReservation: 1})
	o := newOperator(t, c, 0, 1, InstanceOptions{})
	denied := errors.New("counter: permission denied")
	s.setHook(func(ctx context.Context, ckpt, name string) error {
		if ckpt == checkpoint.CoordinatorName {
			return denied
		}
		return nil
	})
	// Checkpoint 1 uses the id reserved at Start; the reservation made
	// ahead of need fails without counting.
	clock.Advance(10 * time.Second)
	if err := o.snapshot(o.nextTrigger()); err != nil {
		t.Fatal(err)
	}
	waitCompleted(t, c, 1)
	// The next trigger has no id; its reservation fails, and that fails
	// the job.
	clock.Advance(10 * time.Second)
	select {
	case <-c.Failed():
	case <-time.After(20 * time.Second):
		t.Fatalf("the job did not fail; stats %+v", c.Stats().Counts())
	}
	if err := c.Err(); !errors.Is(err, coordinator.ErrTooManyFailures) || !errors.Is(err, coordinator.ErrIDReservationFailed) || !errors.Is(err, denied) {
		t.Errorf("Err() = %v", err)
	}
	if got := c.Stats().Counts(); got.Triggered != 1 {
		t.Errorf("counts %+v: only checkpoint 1 may have been triggered", got)
	}
}

// A savepoint requested while no id is reserved waits for the reservation
// instead of failing.
func TestSavepointWaitsForReservation(t *testing.T) {
	s := newHookStorage(checkpoint.NewMem())
	clock := &fakeClock{now: t0}
	c := startPlain(t, s, clock, coordinator.Config{Interval: time.Hour, IDReservation: 1})
	o := newOperator(t, c, 0, 1, InstanceOptions{})
	release := make(chan struct{})
	s.setHook(func(ctx context.Context, ckpt, name string) error {
		if ckpt == checkpoint.CoordinatorName {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	type result struct {
		r   coordinator.Record
		err error
	}
	results := make(chan result, 2)
	go func() {
		r, err := c.Savepoint(context.Background(), "sp-1") // id 1, reserved at Start
		results <- result{r, err}
	}()
	if err := o.snapshot(o.nextTrigger()); err != nil {
		t.Fatal(err)
	}
	if r := <-results; r.err != nil || r.r.ID != 1 {
		t.Fatalf("first savepoint: %+v, %v", r.r, r.err)
	}
	go func() {
		r, err := c.Savepoint(context.Background(), "sp-2") // waits for id 2
		results <- result{r, err}
	}()
	select {
	case r := <-o.inst.Triggers():
		t.Fatalf("savepoint %d triggered before its id was reserved", r.ID)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	tr := o.nextTrigger()
	if err := o.snapshot(tr); err != nil {
		t.Fatal(err)
	}
	if r := <-results; r.err != nil || r.r.ID != 2 || r.r.Location != "sp-2" {
		t.Fatalf("second savepoint: %+v, %v", r.r, r.err)
	}
}

func TestStartFailsWithoutCounter(t *testing.T) {
	s := newHookStorage(checkpoint.NewMem())
	s.setHook(func(context.Context, string, string) error { return errors.New("read-only file system") })
	_, err := Start(context.Background(), Options{Config: coordinator.Config{Interval: time.Second}, Storage: s, Logger: quiet()})
	if err == nil {
		t.Fatal("Start with an unwritable counter succeeded")
	}
}

// Savepoint locations may not take the coordinator's reserved name.
func TestSavepointRefusesReservedName(t *testing.T) {
	c := startPlain(t, checkpoint.NewMem(), &fakeClock{now: t0}, coordinator.Config{Interval: time.Hour})
	if _, err := c.Savepoint(context.Background(), checkpoint.CoordinatorName); !errors.Is(err, ErrInvalidLocation) {
		t.Errorf("savepoint to %q: %v, want ErrInvalidLocation", checkpoint.CoordinatorName, err)
	}
}

// A counter write cut off by a crash leaves a temporary file among the
// coordinator's objects, which checkpoint.Cleanup never touches; Start
// removes it, so crashes do not pile debris up under CoordinatorName.
func TestStartRemovesACrashedCounterWrite(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := checkpoint.NewDir(root)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Create(ctx, checkpoint.CoordinatorName, "crashed")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("half a counter")); err != nil {
		t.Fatal(err)
	}
	// w is never committed nor aborted: its process died.
	clock := &fakeClock{now: t0}
	cfg := coordinator.Config{Interval: 10 * time.Second, TolerableFailures: coordinator.UnlimitedFailures}
	c := startPlain(t, s, clock, cfg)
	defer c.Close(ctx)
	ents, err := os.ReadDir(filepath.Join(root, checkpoint.CoordinatorName))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Errorf("Start left the crashed counter write %s", e.Name())
		}
	}
	if len(ents) == 0 {
		t.Error("Start wrote no counter")
	}
}
