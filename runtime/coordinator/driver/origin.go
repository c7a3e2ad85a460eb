package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime/coordinator"
)

// A job started from a savepoint must restore that savepoint after a crash
// until one of its own checkpoints completes — otherwise a crash before
// the first checkpoint would restart it empty. StartFrom records the
// savepoint as the job's origin in the storage, next to the id counter
// (objects under checkpoint.CoordinatorName), with the first checkpoint id
// the new run can issue; Latest then prefers the newest complete
// checkpoint with an id at or above it, and falls back to the origin.
// Checkpoints older than the origin — of an earlier deployment that used
// the same storage — are never restored. Objects are immutable: each
// recording writes origin-<sequence>, the highest sequence wins, and older
// ones are removed.
const originPrefix = "origin-"

// Origin is the savepoint a job was started from (StartFrom).
type Origin struct {
	// Savepoint is the savepoint's name in the storage.
	Savepoint string
	// Base is the first checkpoint id of the run that started from it:
	// checkpoints with lower ids belong to earlier runs.
	Base coordinator.CheckpointID
	// seq orders the recordings.
	seq uint64
}

type originMsg struct {
	V         int    `json:"v"`
	Savepoint string `json:"savepoint"`
	Base      uint64 `json:"base"`
}

func originObject(seq uint64) string { return numbered(originPrefix, seq) }

// StartFrom records that the job in s starts from savepoint, a committed
// and complete savepoint (or checkpoint) in s, restored by the job's
// instances with PlanRestore. Call it once, before the instances restore
// and before Start: from then on Latest, PlanLatest and RestoreLatest
// return the savepoint until a checkpoint of this run completes, so a job
// that crashes before its first checkpoint restores the savepoint again
// instead of starting empty. The Coordinator never deletes a savepoint:
// it is the user's.
//
// StartFrom with the savepoint already recorded does nothing, so a
// restarted process may call it again with the same arguments: its
// restore then still prefers the run's newer checkpoints. Recording
// another savepoint starts a new run: older checkpoints in s are ignored
// by Latest from then on (use a storage of its own per job to keep them
// apart).
//
// It fails with an error wrapping checkpoint.ErrNotFound if savepoint is
// not committed in s, and checkpoint.ErrIncomplete if it lacks key
// groups.
func StartFrom(ctx context.Context, s checkpoint.Storage, savepoint string) error {
	if err := checkpoint.ValidateName(savepoint); err != nil {
		return fmt.Errorf("driver: start from savepoint: %w", err)
	}
	m, err := checkpoint.ReadMetadata(ctx, s, savepoint)
	if err == nil {
		err = m.Complete()
	}
	if err != nil {
		return fmt.Errorf("driver: start from savepoint %q: %w", savepoint, err)
	}
	old, ok, err := ReadOrigin(ctx, s)
	switch {
	case err != nil:
		return err
	case ok && old.Savepoint == savepoint:
		return nil
	}
	rec, err := Recover(ctx, s)
	if err != nil {
		return fmt.Errorf("driver: start from savepoint %q: %w", savepoint, err)
	}
	data, err := json.Marshal(originMsg{V: 1, Savepoint: savepoint, Base: uint64(rec.NextID)})
	if err != nil {
		return err
	}
	name := originObject(old.seq + 1)
	if err := writeObject(ctx, s, checkpoint.CoordinatorName, name, data); err != nil {
		return fmt.Errorf("driver: start from savepoint %q: recording it: %w", savepoint, err)
	}
	if ok {
		// Best effort: a leftover older origin is ignored anyway.
		_ = s.Remove(ctx, checkpoint.CoordinatorName, originObject(old.seq))
	}
	return nil
}

// ReadOrigin returns the savepoint the job in s was started from
// (StartFrom); ok is false if it was not started from one.
func ReadOrigin(ctx context.Context, s checkpoint.Storage) (Origin, bool, error) {
	objs, err := s.Objects(ctx, checkpoint.CoordinatorName)
	if err != nil {
		return Origin{}, false, fmt.Errorf("driver: reading the job's origin: %w", err)
	}
	var best Origin
	found := false
	for _, o := range objs {
		seq, ok := parseNumbered(originPrefix, o.Name)
		if !ok || found && seq < best.seq {
			continue
		}
		data, err := readObject(ctx, s, checkpoint.CoordinatorName, o.Name, 4096)
		if err != nil {
			return Origin{}, false, fmt.Errorf("driver: reading the job's origin: %w", err)
		}
		var m originMsg
		if err := json.Unmarshal(data, &m); err != nil || m.V != 1 || checkpoint.ValidateName(m.Savepoint) != nil {
			return Origin{}, false, fmt.Errorf("%w: driver: the job's origin %s/%s is unreadable (%v)",
				checkpoint.ErrCorrupt, checkpoint.CoordinatorName, o.Name, err)
		}
		best, found = Origin{Savepoint: m.Savepoint, Base: coordinator.CheckpointID(m.Base), seq: seq}, true
	}
	return best, found, nil
}

// writeObject writes one small object and commits it.
func writeObject(ctx context.Context, s checkpoint.Storage, ckpt, name string, data []byte) error {
	w, err := s.Create(ctx, ckpt, name)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		_ = w.Abort()
		return err
	}
	return w.Commit()
}

// readObject reads one small object of at most limit bytes.
func readObject(ctx context.Context, s checkpoint.Storage, ckpt, name string, limit int64) ([]byte, error) {
	obj, err := s.Open(ctx, ckpt, name)
	if err != nil {
		return nil, err
	}
	defer obj.Close()
	if obj.Size() > limit {
		return nil, fmt.Errorf("%w: %s/%s is %d bytes, more than %d", checkpoint.ErrCorrupt, ckpt, name, obj.Size(), limit)
	}
	data := make([]byte, obj.Size())
	if _, err := obj.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return data, nil
}
