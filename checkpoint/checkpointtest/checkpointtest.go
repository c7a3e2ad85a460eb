// Package checkpointtest helps backends test themselves through real
// checkpoint files. Its Codec carries a snapshot through the checkpoint
// format on disk, which is what the conformance suite's snapshot-codec
// option takes:
//
//	storetest.Run(t, factory, storetest.WithSnapshotCodec(checkpointtest.ThroughFiles))
//
// so that every snapshot the suite restores or reads is written as a data
// file, committed with its metadata into a temporary directory, verified,
// and read back through a checkpoint.View.
//
// ThroughChains does the same for the snapshots of a checkpoint.Tracker,
// into one storage per tracker, reporting each checkpoint completed: the
// snapshots of a tracked store are then written as chains of incremental
// checkpoints, and every snapshot the suite reads is read through its
// chain.
package checkpointtest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

// OperatorID is the operator id under which Codec stores snapshots.
const OperatorID = "op"

// ThroughFiles writes v as a committed checkpoint in a temporary directory
// of tb and returns a View of it; see Codec. It uses 512-byte blocks, so
// that sections of a few entries already span several blocks and the
// suite's randomized tests cross block boundaries everywhere.
func ThroughFiles(tb testing.TB, v runtime.View) (runtime.View, error) {
	return Codec(&checkpoint.WriterOptions{BlockSize: 512})(tb, v)
}

var seq atomic.Int64

// Codec returns a snapshot codec that writes v with opts as the only
// instance of operator OperatorID of a checkpoint in a new temporary
// directory of tb, commits it, verifies every byte (checkpoint.Reader.Verify)
// and returns a *checkpoint.View of v's key groups, which does not depend on
// v. The View's Release closes its files; the directory goes when the test
// ends. Failures are returned, never reported with tb.Fatal, so the codec
// may run on any goroutine.
func Codec(opts *checkpoint.WriterOptions) func(tb testing.TB, v runtime.View) (runtime.View, error) {
	return func(tb testing.TB, v runtime.View) (runtime.View, error) {
		ctx := context.Background()
		s, err := checkpoint.NewDir(tb.TempDir())
		if err != nil {
			return nil, err
		}
		n := seq.Add(1)
		ckpt := checkpoint.CheckpointName(uint64(n))
		snap, err := checkpoint.WriteInstance(ctx, s, ckpt, "instance-0.sgc", v, opts)
		if err != nil {
			return nil, err
		}
		return commitAndRead(ctx, s, ckpt, uint64(n), snap, v.KeyGroups(), nil)
	}
}

// commitAndRead commits checkpoint ckpt (id n) of the one instance snap,
// calls completed if it is not nil, verifies every byte of it and returns
// a View of key groups kgs.
func commitAndRead(ctx context.Context, s checkpoint.Storage, ckpt string, n uint64, snap checkpoint.InstanceSnapshot, kgs runtime.KeyGroupRange, completed func()) (runtime.View, error) {
	op, err := checkpoint.NewOperator(OperatorID, snap)
	if err != nil {
		return nil, err
	}
	if err := checkpoint.Commit(ctx, s, ckpt, &checkpoint.Metadata{CheckpointID: n, Operators: []checkpoint.Operator{op}}); err != nil {
		return nil, err
	}
	if completed != nil {
		completed()
	}
	r, err := checkpoint.Open(ctx, s, ckpt)
	if err != nil {
		return nil, err
	}
	if err := r.Verify(ctx); err != nil {
		return nil, fmt.Errorf("checkpointtest: a freshly written checkpoint fails Verify: %w", err)
	}
	return r.View(ctx, OperatorID, kgs)
}

// ThroughChains is ThroughFiles for the snapshots of a checkpoint.Tracker
// (a *checkpoint.TrackedSnapshot; other views go through ThroughFiles):
// each tracker writes into a temporary directory of its own, one
// checkpoint per snapshot, and learns that each one completed as soon as
// it is committed, so that the next snapshots are written as files of
// changes over its chain. The View returned reads the snapshot through its
// chain. It reports through Deltas how many files of changes it wrote.
func ThroughChains(tb testing.TB, v runtime.View) (runtime.View, error) {
	ts, ok := v.(*checkpoint.TrackedSnapshot)
	if !ok {
		return ThroughFiles(tb, v)
	}
	ctx := context.Background()
	tr := ts.Tracker()
	var s checkpoint.Storage
	if d, ok := chainDirs.Load(tr); ok {
		s = d.(checkpoint.Storage)
	} else {
		d, err := checkpoint.NewDir(tb.TempDir())
		if err != nil {
			return nil, err
		}
		got, _ := chainDirs.LoadOrStore(tr, d)
		s = got.(checkpoint.Storage)
	}
	n := seq.Add(1)
	ckpt := checkpoint.CheckpointName(uint64(n))
	snap, err := checkpoint.WriteInstance(ctx, s, ckpt, "instance-0.sgc", v, &checkpoint.WriterOptions{BlockSize: 512})
	if err != nil {
		return nil, err
	}
	if snap.File.Delta {
		deltas.Add(1)
	}
	return commitAndRead(ctx, s, ckpt, uint64(n), snap, v.KeyGroups(), func() { tr.Completed(ckpt) })
}

// Deltas returns how many files of changes ThroughChains has written in
// this process.
func Deltas() int64 { return deltas.Load() }

var (
	chainDirs sync.Map // *checkpoint.Tracker -> checkpoint.Storage
	deltas    atomic.Int64
)

// RunTrackedChains runs the conformance suite (storetest.Run, with opts)
// on a checkpoint.Tracker over every store of factory, with every snapshot
// carried through a chain of incremental checkpoints (ThroughChains), and
// fails if fewer than ten snapshots were written as files of changes (two
// under -short, whose randomized checks run a fifth of the operations:
// over 200 seeds it wrote as few as 6 of them then, and over 40 seeds at
// least 65 without).
func RunTrackedChains(t *testing.T, factory storetest.Factory, opts ...storetest.Option) {
	tracked := func(tb testing.TB, cfg runtime.StoreConfig) runtime.Store {
		tr, err := checkpoint.Track(factory(tb, cfg), nil)
		if err != nil {
			tb.Fatal(err)
		}
		return tr
	}
	before := Deltas()
	storetest.Run(t, tracked, append(opts, storetest.WithSnapshotCodec(ThroughChains))...)
	want := int64(10)
	if testing.Short() {
		want = 2
	}
	if n := Deltas() - before; n < want {
		t.Errorf("only %d snapshots were written as files of changes, want %d or more", n, want)
	}
}

// Track returns a Tracker over inner with opts, closed when tb's test
// ends, and the states of specs registered through it, in order. It fails
// tb on any error.
func Track(tb testing.TB, inner runtime.Store, opts *checkpoint.TrackOptions, specs ...runtime.StateSpec) (*checkpoint.Tracker, []runtime.State) {
	tb.Helper()
	tr, err := checkpoint.Track(inner, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = tr.Close() })
	states := make([]runtime.State, len(specs))
	for i, spec := range specs {
		if states[i], err = tr.Register(spec); err != nil {
			tb.Fatal(err)
		}
	}
	return tr, states
}

// Checkpoint snapshots tr, writes the snapshot as the one instance of
// operator OperatorID of checkpoint id of s (CheckpointName(id)), commits
// it, reports it completed to tr, and returns what it wrote. It fails tb
// on any error.
func Checkpoint(tb testing.TB, s checkpoint.Storage, tr *checkpoint.Tracker, id uint64) checkpoint.InstanceSnapshot {
	tb.Helper()
	ctx := context.Background()
	snap, err := tr.Snapshot()
	if err != nil {
		tb.Fatal(err)
	}
	ckpt := checkpoint.CheckpointName(id)
	is, err := checkpoint.WriteInstance(ctx, s, ckpt, "instance-0.sgc", snap, nil)
	if rerr := snap.Release(); err == nil {
		err = rerr
	}
	if err != nil {
		tb.Fatal(err)
	}
	op, err := checkpoint.NewOperator(OperatorID, is)
	if err != nil {
		tb.Fatal(err)
	}
	if err := checkpoint.Commit(ctx, s, ckpt, &checkpoint.Metadata{CheckpointID: id, Operators: []checkpoint.Operator{op}}); err != nil {
		tb.Fatal(err)
	}
	tr.Completed(ckpt)
	return is
}
