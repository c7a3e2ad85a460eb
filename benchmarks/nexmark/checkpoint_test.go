package nexmark

// Checkpoints while a query runs, as a job takes them: what the
// benchmark's checkpoint=1s variant does.

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

// checkpointer takes checkpoints of a store while a query runs, as a job
// does: at a watermark, once every interval of processing time, it takes
// a snapshot (the synchronous phase) and writes it into dir in the
// background while the query goes on; at a later watermark, once the
// write is done, it commits the checkpoint and deletes the one before (it
// retains one). One checkpoint is in flight at a time: a checkpoint due
// while the last is still being written waits for it, the query does not.
type checkpointer struct {
	ctx      context.Context
	store    runtime.Store
	dir      *checkpoint.Dir
	interval time.Duration
	last     time.Time // when the last checkpoint was triggered
	id       uint64
	pending  *checkpoint.AsyncSnapshot
	prev     string // the last committed checkpoint
	// completed counts the checkpoints committed, deltas those of them
	// written as changes over earlier ones (a Tracker's, unless the
	// changes outweigh the full file, as the windows' often do).
	completed, deltas int
}

// newCheckpointer returns a checkpointer of store into a new checkpoint
// directory at root, taking a checkpoint every interval of processing time
// from now.
func newCheckpointer(store runtime.Store, root string, interval time.Duration) (*checkpointer, error) {
	dir, err := checkpoint.NewDir(root)
	if err != nil {
		return nil, err
	}
	return &checkpointer{ctx: context.Background(), store: store, dir: dir, interval: interval, last: time.Now()}, nil
}

// resume restarts the clock as if the last checkpoint had been triggered
// elapsed ago: a benchmark's pass goes on from where the pass before
// stopped (sinceLast), so that passes shorter than the interval still take
// one checkpoint per interval of processing time between them.
func (c *checkpointer) resume(elapsed time.Duration) { c.last = time.Now().Add(-elapsed) }

// sinceLast returns the time since the last checkpoint was triggered (or
// since the clock started).
func (c *checkpointer) sinceLast() time.Duration { return time.Since(c.last) }

// tick is called at every watermark: it completes the checkpoint in
// flight if its write is done, and triggers the next if one is due.
func (c *checkpointer) tick(int) error {
	if c.pending != nil {
		select {
		case <-c.pending.Done():
			if err := c.complete(); err != nil {
				return err
			}
		default:
			return nil
		}
	}
	if time.Since(c.last) < c.interval {
		return nil
	}
	c.id++
	a, err := checkpoint.SnapshotAsync(c.ctx, c.store, c.dir, checkpoint.CheckpointName(c.id), "nexmark-0.sgc", nil)
	if err != nil {
		return err
	}
	c.pending, c.last = a, time.Now()
	return nil
}

// complete waits for the checkpoint in flight, commits it and deletes the
// one before.
func (c *checkpointer) complete() error {
	res, err := c.pending.Wait()
	c.pending = nil
	if err != nil {
		return err
	}
	name := checkpoint.CheckpointName(c.id)
	op, err := checkpoint.NewOperator("nexmark", res.Snapshot)
	if err != nil {
		return err
	}
	if err := checkpoint.Commit(c.ctx, c.dir, name, &checkpoint.Metadata{CheckpointID: c.id, Operators: []checkpoint.Operator{op}}); err != nil {
		return err
	}
	if tr, ok := c.store.(*checkpoint.Tracker); ok {
		tr.Completed(name) // the next checkpoint writes what changed since
	}
	if c.prev != "" {
		if err := checkpoint.Delete(c.ctx, c.dir, c.prev); err != nil {
			return err
		}
	}
	c.prev = name
	c.completed++
	if res.Snapshot.File.Delta {
		c.deltas++
	}
	return nil
}

// finish waits for the checkpoint in flight, if any, and completes it.
func (c *checkpointer) finish() error {
	if c.pending == nil {
		return nil
	}
	return c.complete()
}

// TestCheckpointsWhileRunning takes checkpoints as often as the writes
// allow while the five queries run on every backend, as the benchmark's
// checkpoint=1s variant does once a second: the rows stay plain Go's, and
// checkpoints commit.
func TestCheckpointsWhileRunning(t *testing.T) {
	n := 10_000
	if raceEnabled {
		n = 4_000
	}
	want := plainOutput(t, "all", n)
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			var c *checkpointer
			got, store, err := runOnStore(be, filepath.Join(t.TempDir(), "store"), "all", stream(n), func(s runtime.Store) func(int) error {
				var err error
				if c, err = newCheckpointer(s, filepath.Join(t.TempDir(), "checkpoints"), 0); err != nil {
					t.Fatal(err)
				}
				return c.tick
			})
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			if err := c.finish(); err != nil {
				t.Fatal(err)
			}
			if d, _ := Diff("all", want, got, 20); len(d) > 0 {
				t.Fatalf("the rows differ from plain Go's:\n%s", joinLines(d))
			}
			if c.completed == 0 {
				t.Error("no checkpoint completed")
			}
			// A last checkpoint, of the store as the run left it (over a
			// chain of changes on cow-tracked), restores it exactly.
			c.last = time.Time{}
			if err := c.tick(0); err != nil {
				t.Fatal(err)
			}
			if err := c.finish(); err != nil {
				t.Fatal(err)
			}
			fresh, err := cow.New(cow.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer fresh.Close()
			if _, err := checkpoint.Restore(c.ctx, c.dir, c.prev, "nexmark", 0, 1, fresh, nil); err != nil {
				t.Fatalf("restore %s: %v", c.prev, err)
			}
			if d := cmp.Diff(contents(t, store), contents(t, fresh)); d != "" {
				t.Fatalf("the last checkpoint, %s, restores other entries than the store holds (-store +restored):\n%.4000s", c.prev, d)
			}
			t.Logf("%d checkpoints, %d of them changes", c.completed, c.deltas)
		})
	}
}

// contents returns what store holds (storetest.Dump of a snapshot).
func contents(t *testing.T, store runtime.Store) storetest.Contents {
	t.Helper()
	c, err := storetest.DumpStore(store)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
