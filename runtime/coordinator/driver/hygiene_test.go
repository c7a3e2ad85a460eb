package driver

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/checkpoint/faultstorage"
	"github.com/stategen/stategen/runtime/coordinator"
)

// A job on the real clock — checkpoints every 10ms over cow and a Dir,
// operators writing continuously, a savepoint — leaves no goroutine behind
// once its Instances and Coordinator are closed: not the loop, not the
// timer, not a write, a commit or a deletion. goleak reports any that
// remain, with its stack, after giving them time to wind down.
func TestShutdownLeaksNoGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	dir, err := checkpoint.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for run := range 2 {
		c, err := Start(ctx, Options{Storage: dir, Logger: quiet(), Config: coordinator.Config{
			Interval: 10 * time.Millisecond, Timeout: time.Second, MaxConcurrent: 2, Retained: 2,
			TolerableFailures: coordinator.UnlimitedFailures,
		}})
		if err != nil {
			t.Fatal(err)
		}
		e := &epoch{c: c}
		for i := range 3 {
			o := newOperatorOn(t, cowStore, nil, i, 3, InstanceOptions{})
			o.join(c, InstanceOptions{})
			e.ops = append(e.ops, o)
		}
		e.run(uint64(run))
		deadline := time.Now().Add(time.Minute)
		for c.Stats().Counts().Completed < 5 {
			if time.Now().After(deadline) {
				t.Fatalf("no checkpoints: %+v", c.Stats().Counts())
			}
			time.Sleep(5 * time.Millisecond)
		}
		if _, err := c.Savepoint(ctx, "sp-"+string(rune('a'+run))); err != nil {
			var ae *coordinator.AbortError
			if !errors.As(err, &ae) {
				t.Fatal(err)
			}
		}
		// Stop while checkpoints are in flight.
		e.halt(t)
	}
}

// Checkpoints that end without completing — expired while their writes
// block, aborted when a participant declines, cut short by an Instance
// that closes mid-write or a Coordinator that shuts down with checkpoints
// pending, or failing the job — leave no goroutine behind: every write is
// cancelled and waited for, every snapshot released.
func TestAbortedCheckpointsLeakNoGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx := context.Background()
	dir, err := checkpoint.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	hs := newHookStorage(dir)
	clock := &fakeClock{now: t0}
	cfg := coordinator.Config{Interval: 10 * time.Second, Timeout: 20 * time.Second, MaxConcurrent: 3, TolerableFailures: 4}
	c, err := Start(ctx, Options{Storage: hs, Clock: clock, Logger: quiet(), Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	ops := []*operator{
		newOperatorOn(t, cowStore, c, 0, 2, InstanceOptions{}),
		newOperatorOn(t, cowStore, c, 1, 2, InstanceOptions{}),
	}
	// Every data file's commit blocks until its write is cancelled.
	hs.setHook(func(ctx context.Context, ckpt, name string) error {
		if name == checkpoint.MetadataName || ckpt == checkpoint.CoordinatorName {
			return nil
		}
		return blockUntilDone(ctx)
	})
	snapshotAll := func() coordinator.CheckpointID {
		t.Helper()
		var id coordinator.CheckpointID
		for _, o := range ops {
			o.write(10)
			tr := o.nextTrigger()
			if err := o.snapshot(tr); err != nil {
				t.Fatal(err)
			}
			id = tr.ID
		}
		return id
	}
	waitAborted := func(id coordinator.CheckpointID, want error) {
		t.Helper()
		for _, o := range ops {
			for {
				n := o.nextNote()
				if n.ID == id {
					if !errors.Is(n.Err, want) {
						t.Fatalf("checkpoint %d ended with %v, want %v", id, n.Err, want)
					}
					break
				}
			}
		}
	}
	// 1: expires while both writes block.
	clock.Advance(10 * time.Second)
	id := snapshotAll()
	clock.Advance(20 * time.Second)
	waitAborted(id, coordinator.ErrExpired)
	// The next: operator 1 declines it while operator 0's write blocks.
	tr0 := ops[0].nextTrigger()
	if err := ops[0].snapshot(tr0); err != nil {
		t.Fatal(err)
	}
	tr1 := ops[1].nextTrigger()
	if err := ops[1].inst.Decline(tr1, errors.New("operator busy")); err != nil {
		t.Fatal(err)
	}
	waitAborted(tr1.ID, coordinator.ErrDeclined)
	// The next two stay pending with their writes blocked; operator 1's
	// Instance closes mid-write, then the Coordinator shuts down.
	clock.Advance(10 * time.Second)
	snapshotAll()
	clock.Advance(10 * time.Second)
	snapshotAll()
	if err := ops[1].inst.Close(); err != nil {
		t.Fatal(err)
	}
	closeCtx, cancel := context.WithCancel(ctx)
	cancel()
	// With a done context Close returns at once; the shutdown goes on.
	if err := c.Close(closeCtx); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if err := ops[0].inst.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// A job that fails: its checkpoints' metadata cannot be written.
	fs := faultstorage.New(dir, 1, faultstorage.Rule{Op: faultstorage.OpCreate, Match: faultstorage.MatchMetadata, Cause: syscall.ENOSPC})
	c, err = Start(ctx, Options{Storage: fs, Clock: clock, Logger: quiet(), Config: coordinator.Config{Interval: 10 * time.Second, TolerableFailures: 1}})
	if err != nil {
		t.Fatal(err)
	}
	o := newOperatorOn(t, cowStore, c, 0, 1, InstanceOptions{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 2 {
			if err := o.snapshot(o.nextTrigger()); err != nil {
				t.Error(err)
			}
		}
	}()
	for range 2 {
		clock.Advance(10 * time.Second)
		o.nextNote()
	}
	wg.Wait()
	select {
	case <-c.Failed():
	case <-time.After(20 * time.Second):
		t.Fatal("the job did not fail")
	}
	if err := o.inst.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	noDebris(t, dir)
}
