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
package checkpointtest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
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
		op, err := checkpoint.NewOperator(OperatorID, snap)
		if err != nil {
			return nil, err
		}
		if err := checkpoint.Commit(ctx, s, ckpt, &checkpoint.Metadata{CheckpointID: uint64(n), Operators: []checkpoint.Operator{op}}); err != nil {
			return nil, err
		}
		r, err := checkpoint.Open(ctx, s, ckpt)
		if err != nil {
			return nil, err
		}
		if err := r.Verify(ctx); err != nil {
			return nil, fmt.Errorf("checkpointtest: a freshly written checkpoint fails Verify: %w", err)
		}
		return r.View(ctx, OperatorID, v.KeyGroups())
	}
}
