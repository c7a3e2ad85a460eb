package driver

import (
	"context"
	"errors"
	"fmt"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime/coordinator"
)

// Recover reads what a restarted coordinator needs from s: the committed
// checkpoints (named by checkpoint.CheckpointName), which become the Core's
// retained set, and the id counter: the durable counter (ReadCounter),
// raised above the highest id found in any checkpoint or savepoint,
// committed or not — which matters only if the counter was lost.
//
// With the durable counter, an id is never issued twice, even one whose
// checkpoint left nothing in s: the counter covers every id issued before
// the restart (see coordinator.Config.IDReservation).
//
// Committed checkpoints that lack key groups (written by a version without
// coverage checks) cannot be restored: they are left in s, but not
// retained.
func Recover(ctx context.Context, s checkpoint.Storage) (coordinator.Recovery, error) {
	rec, _, err := recoverFrom(ctx, s, storageCounter{s})
	return rec, err
}

// recoverFrom is Recover with the id counter read from ids; it also
// returns the committed checkpoints it did not retain because they lack
// key groups.
func recoverFrom(ctx context.Context, s checkpoint.Storage, ids IDCounter) (rec coordinator.Recovery, incomplete []string, err error) {
	counter, err := ids.Read(ctx)
	if err != nil {
		return rec, nil, fmt.Errorf("driver: recover: %w", err)
	}
	names, err := s.List(ctx)
	if err != nil {
		return rec, nil, fmt.Errorf("driver: recover: %w", err)
	}
	var maxID uint64
	for _, name := range names {
		if name == checkpoint.CoordinatorName {
			continue
		}
		id, isCheckpoint := checkpoint.ParseCheckpointName(name)
		maxID = max(maxID, id)
		m, err := checkpoint.ReadMetadata(ctx, s, name)
		switch {
		case errors.Is(err, checkpoint.ErrNotFound):
			continue // not committed: debris
		case err != nil:
			return rec, nil, fmt.Errorf("driver: recover: %w", err)
		}
		maxID = max(maxID, m.CheckpointID)
		switch {
		case !isCheckpoint:
		case m.Complete() != nil:
			incomplete = append(incomplete, name)
		default:
			rec.Retained = append(rec.Retained, fromMetadata(name, id, m))
		}
	}
	if maxID >= uint64(coordinator.MaxID)-1 || counter >= coordinator.MaxID {
		return rec, nil, fmt.Errorf("driver: recover: checkpoint id %d (counter %d) is beyond the counter's range", maxID, counter)
	}
	rec.NextID = max(coordinator.CheckpointID(maxID+1), counter)
	return rec, incomplete, nil
}

// fromMetadata describes committed checkpoint name as the Core knows
// completed checkpoints. Participants' names are not stored in the
// metadata; each instance stands for one, named operator#index.
func fromMetadata(name string, id uint64, m *checkpoint.Metadata) coordinator.Checkpoint {
	cp := coordinator.Checkpoint{ID: coordinator.CheckpointID(id), TriggeredAt: m.Timestamp}
	for _, op := range m.Operators {
		for k, in := range op.Instances {
			snap := checkpoint.InstanceSnapshot{
				MaxParallelism: op.MaxParallelism,
				KeyGroups:      in.KeyGroups,
				File:           in.File,
				OperatorState:  in.OperatorState,
			}
			cp.Participants = append(cp.Participants, coordinator.ParticipantState{
				Participant: coordinator.ParticipantID(fmt.Sprintf("%s#%d", op.ID, k)),
				AckedAt:     m.Timestamp,
				Payload: coordinator.Payload{
					Files:         []string{name + "/" + in.File.Name},
					Bytes:         in.File.Size,
					OperatorState: in.OperatorState,
					KeyGroups:     coordinator.KeyGroups{Operator: op.ID, MaxParallelism: op.MaxParallelism, Range: in.KeyGroups},
					Handle:        handle{operator: op.ID, snapshot: snap},
				},
			})
		}
	}
	return cp
}
