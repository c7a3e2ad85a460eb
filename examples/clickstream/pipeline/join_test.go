package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/coordinator"
	"github.com/stategen/stategen/runtime/coordinator/driver"
)

// TestCheckpointsTriggeredBeforeEveryInstanceJoinedAreDeclined makes the
// coordinator trigger checkpoints while only the first of two instances
// has joined — what a slow machine does to runJob between two Joins. Such
// a checkpoint would hold half of the key groups and could never be
// restored: the coordinator, which knows the job graph, declines it on
// behalf of the missing instance as not ready (not a failure), and every
// checkpoint that completes covers every key group.
func TestCheckpointsTriggeredBeforeEveryInstanceJoinedAreDeclined(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	cfg, err := Config{Dir: dir, Users: 50, Interval: 10 * time.Millisecond}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	storage, err := checkpoint.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{cfg: cfg, newStore: backends[DefaultBackend], storage: storage, scratch: t.TempDir(),
		stream: Stream{Seed: cfg.Seed, Users: cfg.Users, Len: cfg.Events}}
	ops, err := r.operators(2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(stores(ops))
	coord, err := driver.Start(ctx, driver.Options{
		Config:   coordinator.Config{Interval: cfg.Interval, Retained: 2},
		Storage:  storage,
		Logger:   slog.New(slog.DiscardHandler),
		Expected: map[string]int{Operator: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer coord.Close(context.WithoutCancel(ctx))
	join := func(op *operator) {
		if op.inst, err = coord.Join(driver.InstanceOptions{Operator: Operator, Index: op.index, Store: op.store}); err != nil {
			t.Fatal(err)
		}
	}
	join(ops[0])
	waitFor(t, "a trigger of instance 0 alone", func() bool { return len(ops[0].inst.Triggers()) > 0 })
	waitFor(t, "a checkpoint declined for instance 1", func() bool { return coord.Stats().Counts().NotReady > 0 })
	join(ops[1])

	loopCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, op := range ops {
		wg.Go(func() {
			if err := op.loop(loopCtx, cfg.MaxParallelism); err != nil {
				t.Error(err)
			}
		})
	}
	waitFor(t, "a completed checkpoint", func() bool { return coord.Stats().Counts().Completed > 0 })
	stop()
	wg.Wait()

	names, err := checkpoint.List(ctx, storage)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("no checkpoint committed")
	}
	for _, name := range names {
		// A restore plan needs every key group.
		if _, err := driver.PlanRestore(ctx, storage, name, Operator, 1, runtime.DefaultMaxParallelism); err != nil {
			t.Errorf("%s cannot be restored: %v", name, err)
		}
	}
	if errors.Is(coord.Err(), coordinator.ErrTooManyFailures) || coord.Stats().Counts().Failed > 0 {
		t.Fatalf("the declines counted as failures: %v, %+v", coord.Err(), coord.Stats().Counts())
	}
}

// waitFor polls cond until it holds, for at most a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s in a minute", what)
		}
		time.Sleep(time.Millisecond)
	}
}
