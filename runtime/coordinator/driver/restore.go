package driver

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/coordinator"
)

// ErrNoCheckpoint reports that the storage holds no committed checkpoint to
// restore: the job starts empty.
var ErrNoCheckpoint = errors.New("driver: no checkpoint to restore")

// Latest returns the name and id of the checkpoint a restarted job in s
// restores: the newest committed checkpoint that is complete (it holds
// every key group of every operator; see checkpoint.Metadata.Complete) —
// or, if the job was started from a savepoint (StartFrom) and none of its
// own checkpoints has completed since, that savepoint. Checkpoints older
// than the savepoint the job started from are not considered. Other
// savepoints are restored by name, with PlanRestore.
//
// It fails with ErrNoCheckpoint if there is nothing to restore, and with
// an error wrapping checkpoint.ErrCorrupt if the metadata of a candidate
// is damaged (rather than restoring an older checkpoint silently).
func Latest(ctx context.Context, s checkpoint.Storage) (name string, id coordinator.CheckpointID, err error) {
	l, err := latest(ctx, s)
	return l.name, l.id, err
}

// latestCheckpoint is what latest found.
type latestCheckpoint struct {
	name      string
	id        coordinator.CheckpointID
	savepoint bool     // the job's origin: no checkpoint of its run completed
	skipped   []string // newer committed checkpoints that lack key groups
}

func latest(ctx context.Context, s checkpoint.Storage) (latestCheckpoint, error) {
	var l latestCheckpoint
	origin, started, err := ReadOrigin(ctx, s)
	if err != nil {
		return l, err
	}
	names, err := checkpoint.List(ctx, s)
	if err != nil {
		return l, fmt.Errorf("driver: latest checkpoint: %w", err)
	}
	for _, n := range slices.Backward(names) {
		cid, ok := checkpoint.ParseCheckpointName(n)
		if !ok || started && cid < uint64(origin.Base) {
			continue
		}
		m, err := checkpoint.ReadMetadata(ctx, s, n)
		if err != nil {
			return l, fmt.Errorf("driver: latest checkpoint: %w", err)
		}
		if m.Complete() != nil {
			l.skipped = append(l.skipped, n)
			continue
		}
		l.name, l.id = n, coordinator.CheckpointID(cid)
		return l, nil
	}
	if !started {
		return l, ErrNoCheckpoint
	}
	m, err := checkpoint.ReadMetadata(ctx, s, origin.Savepoint)
	if err != nil {
		return l, fmt.Errorf("driver: the savepoint the job started from: %w", err)
	}
	l.name, l.id, l.savepoint = origin.Savepoint, coordinator.CheckpointID(m.CheckpointID), true
	return l, nil
}

// RestorePlan is how the instances of one operator restore a checkpoint at
// a parallelism of their choice: what each new instance reads, and the
// operator-state blobs every one of them gets.
type RestorePlan struct {
	// Checkpoint is the checkpoint's (or savepoint's) name in the storage.
	Checkpoint string
	// ID is its coordinator id (zero if it has none).
	ID coordinator.CheckpointID
	// Operator is the operator restored.
	Operator string
	// MaxParallelism is the operator's number of key groups, fixed for the
	// life of its state.
	MaxParallelism int
	// Instances holds the plan of each new instance, by index: the key
	// groups it owns, the old files that hold them, and the operator-state
	// blobs of every old instance (Flink's union redistribution: a source
	// finds its positions among them, whatever the parallelism).
	Instances []checkpoint.InstancePlan
	// Savepoint reports that PlanLatest planned the savepoint the job was
	// started from (StartFrom): none of its own checkpoints has completed.
	Savepoint bool
	// Skipped names newer committed checkpoints that PlanLatest passed
	// over because they lack key groups (written by a version of this
	// package without coverage checks); worth a warning in the job's log.
	Skipped []string

	reader *checkpoint.Reader
}

// PlanLatest plans the restore of operator from the newest committed
// checkpoint in s (see Latest) at parallelism new instances. maxParallelism
// is the one the job is configured with; zero accepts the checkpoint's.
//
// It fails with ErrNoCheckpoint if s holds no checkpoint; with an error
// wrapping runtime.ErrMaxParallelismMismatch if maxParallelism is not zero
// and differs from the checkpoint's (key groups cannot be re-cut, so state
// would land in the wrong instances); with runtime.ErrInvalidParallelism
// if parallelism is not in [1, maxParallelism]; with checkpoint.ErrNotFound
// if the checkpoint holds no state of operator (a renamed operator would
// otherwise start empty unnoticed); and with checkpoint.ErrCorrupt if its
// metadata is damaged.
func PlanLatest(ctx context.Context, s checkpoint.Storage, operator string, parallelism, maxParallelism int) (*RestorePlan, error) {
	l, err := latest(ctx, s)
	if err != nil {
		return nil, err
	}
	p, err := PlanRestore(ctx, s, l.name, operator, parallelism, maxParallelism)
	if err != nil {
		return nil, err
	}
	p.Savepoint, p.Skipped = l.savepoint, l.skipped
	return p, nil
}

// PlanRestore is PlanLatest for the checkpoint or savepoint named ckpt.
func PlanRestore(ctx context.Context, s checkpoint.Storage, ckpt, operator string, parallelism, maxParallelism int) (*RestorePlan, error) {
	r, err := checkpoint.Open(ctx, s, ckpt)
	if err != nil {
		return nil, fmt.Errorf("driver: restore %s: %w", ckpt, err)
	}
	op, err := r.Metadata().Operator(operator)
	if err != nil {
		return nil, fmt.Errorf("driver: restore %s: %w", ckpt, err)
	}
	if maxParallelism != 0 && maxParallelism != op.MaxParallelism {
		return nil, fmt.Errorf("%w: driver: restore %s: operator %q was checkpointed with maxParallelism %d, the job has %d; maxParallelism is fixed for the life of the state",
			runtime.ErrMaxParallelismMismatch, ckpt, operator, op.MaxParallelism, maxParallelism)
	}
	plans, err := op.Plan(parallelism)
	if err != nil {
		return nil, fmt.Errorf("driver: restore %s: %w", ckpt, err)
	}
	return &RestorePlan{
		Checkpoint:     ckpt,
		ID:             coordinator.CheckpointID(r.Metadata().CheckpointID),
		Operator:       operator,
		MaxParallelism: op.MaxParallelism,
		Instances:      plans,
		reader:         r,
	}, nil
}

// Restore restores the share of new instance index into store, which must
// be empty and own exactly that instance's key groups with the plan's
// maxParallelism (see checkpoint.Reader.Restore for the checks made before
// any entry is read).
func (p *RestorePlan) Restore(ctx context.Context, index int, store runtime.Store, opts *checkpoint.RestoreOptions) (checkpoint.RestoreStats, error) {
	if index < 0 || index >= len(p.Instances) {
		return checkpoint.RestoreStats{}, fmt.Errorf("%w: driver: instance index %d is outside [0, %d)",
			runtime.ErrInvalidParallelism, index, len(p.Instances))
	}
	return p.reader.Restore(ctx, p.Instances[index], store, opts)
}

// Restored describes what RestoreLatest restored.
type Restored struct {
	// Checkpoint and ID name the checkpoint restored.
	Checkpoint string
	ID         coordinator.CheckpointID
	// Savepoint reports that the checkpoint restored is the savepoint the
	// job was started from (StartFrom): none of its own checkpoints has
	// completed yet.
	Savepoint bool
	// OperatorStates are the operator-state blobs of every old instance:
	// the source positions to resume from.
	OperatorStates [][]byte
	// Stats describe the restore.
	Stats checkpoint.RestoreStats
}

// RestoreLatest restores instance index of parallelism instances of
// operator from the latest checkpoint in s (see Latest: the newest
// complete one, or the savepoint the job started from) into store, whose
// maxParallelism and key groups must be that instance's, and returns the
// old instances' operator-state blobs. It is PlanLatest (with the store's
// maxParallelism) followed by RestorePlan.Restore, and fails as they do —
// with ErrNoCheckpoint when there is nothing to restore, in which case
// store is untouched and the job starts empty.
func RestoreLatest(ctx context.Context, s checkpoint.Storage, operator string, index, parallelism int, store runtime.Store, opts *checkpoint.RestoreOptions) (Restored, error) {
	p, err := PlanLatest(ctx, s, operator, parallelism, store.Config().MaxParallelism)
	if err != nil {
		return Restored{}, err
	}
	stats, err := p.Restore(ctx, index, store, opts)
	if err != nil {
		return Restored{}, err
	}
	return Restored{Checkpoint: p.Checkpoint, ID: p.ID, Savepoint: p.Savepoint, OperatorStates: p.Instances[index].OperatorStates, Stats: stats}, nil
}
