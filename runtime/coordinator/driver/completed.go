package driver

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime/coordinator"
)

// CompletedStore is the index of a job's completed checkpoints (Flink's
// CompletedCheckpointStore): which checkpoints completed and are retained,
// each pointing at its metadata, committed in the checkpoint storage under
// checkpoint.CheckpointName(id). Savepoints are not listed: they belong to
// the user.
//
// By default (a nil Options.Completed) the storage is its own index: every
// committed checkpoint is a completed one. That is right for one
// coordinator, but not when a deposed coordinator may still be running: it
// could commit the metadata of a checkpoint after a standby took over.
// With a CompletedStore whose writes only the current leader can make
// (package runtime/coordinator/etcdcoord fences them with its election
// key), a checkpoint is completed when the index lists it, and the
// Coordinator
//
//   - recovers its retained checkpoints from the index at Start (the
//     metadata of each must be in the storage, or Start fails), and deletes
//     committed checkpoints the index does not list: a deposed
//     coordinator's, which nobody will restore;
//   - completes a checkpoint by committing its metadata and then adding it
//     to the index; if Add fails, the checkpoint is aborted and its
//     metadata deleted (unless the error wraps
//     coordinator.ErrOutcomeUnknown: then both are kept, and the next
//     leader's Start settles it);
//   - drops a checkpoint pushed out by retention from the index before it
//     deletes it from the storage, and keeps it in the storage if Remove
//     fails — a deposed coordinator never deletes what the leader retains.
type CompletedStore interface {
	// Completed returns the ids of the checkpoints the index lists.
	Completed(ctx context.Context) ([]coordinator.CheckpointID, error)
	// Add lists checkpoint id, whose metadata has just been committed.
	Add(ctx context.Context, id coordinator.CheckpointID) error
	// Remove drops checkpoint id from the index; removing an id that is
	// not listed is not an error.
	Remove(ctx context.Context, id coordinator.CheckpointID) error
}

// recoverIndexed is Recover for a coordinator with a CompletedStore: the
// retained checkpoints are those the index lists. It also returns the
// committed checkpoints the index does not list, to be deleted.
//
// Listed checkpoints that lack key groups are not retained; they come back
// in incomplete.
func recoverIndexed(ctx context.Context, s checkpoint.Storage, counter IDCounter, index CompletedStore) (rec coordinator.Recovery, unlisted, incomplete []string, err error) {
	ids, err := index.Completed(ctx)
	if err != nil {
		return rec, nil, nil, fmt.Errorf("driver: recover: reading the completed-checkpoint index: %w", err)
	}
	listed := map[uint64]bool{}
	for _, id := range ids {
		listed[uint64(id)] = true
	}
	next, err := counter.Read(ctx)
	if err != nil {
		return rec, nil, nil, fmt.Errorf("driver: recover: %w", err)
	}
	names, err := s.List(ctx)
	if err != nil {
		return rec, nil, nil, fmt.Errorf("driver: recover: %w", err)
	}
	var maxID uint64
	for _, name := range names {
		if name == checkpoint.CoordinatorName {
			continue
		}
		id, isCheckpoint := checkpoint.ParseCheckpointName(name)
		maxID = max(maxID, id)
		if isCheckpoint && !listed[id] {
			// Committed (its metadata exists) but not completed: a deposed
			// coordinator's. Uncommitted ones are Cleanup's.
			switch _, err := s.Stat(ctx, name, checkpoint.MetadataName); {
			case err == nil:
				unlisted = append(unlisted, name)
			case !errors.Is(err, checkpoint.ErrNotFound):
				return rec, nil, nil, fmt.Errorf("driver: recover: %w", err)
			}
			continue
		}
		m, err := checkpoint.ReadMetadata(ctx, s, name)
		switch {
		case errors.Is(err, checkpoint.ErrNotFound) && isCheckpoint:
			return rec, nil, nil, fmt.Errorf("driver: recover: checkpoint %d is listed as completed but its metadata is missing: %w", id, err)
		case errors.Is(err, checkpoint.ErrNotFound):
			continue // an uncommitted savepoint: debris
		case err != nil:
			return rec, nil, nil, fmt.Errorf("driver: recover: %w", err)
		}
		maxID = max(maxID, m.CheckpointID)
		switch {
		case !isCheckpoint:
		case m.Complete() != nil:
			incomplete = append(incomplete, name)
			delete(listed, id)
		default:
			rec.Retained = append(rec.Retained, fromMetadata(name, id, m))
			delete(listed, id)
		}
	}
	if len(listed) > 0 {
		missing := make([]uint64, 0, len(listed))
		for id := range listed {
			missing = append(missing, id)
		}
		slices.Sort(missing)
		return rec, nil, nil, fmt.Errorf("driver: recover: checkpoints %v are listed as completed but missing from the storage: %w", missing, checkpoint.ErrNotFound)
	}
	if maxID >= uint64(coordinator.MaxID)-1 || next >= coordinator.MaxID {
		return rec, nil, nil, fmt.Errorf("driver: recover: checkpoint id %d (counter %d) is beyond the counter's range", maxID, next)
	}
	rec.NextID = max(coordinator.CheckpointID(maxID+1), next)
	return rec, unlisted, incomplete, nil
}
