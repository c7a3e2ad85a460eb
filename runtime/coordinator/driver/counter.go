package driver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime/coordinator"
)

// The durable checkpoint-id counter is a high-water mark: "ids below L may
// have been issued". Storage objects are immutable, so every reservation
// writes a new object, named after its limit, under the coordinator's
// reserved name (checkpoint.CoordinatorName, which checkpoint.Cleanup
// leaves alone); the highest limit found is the counter, and older objects
// are removed once a newer one is committed. Writing a limit that already
// exists succeeds, so a reservation can be retried after an unknown
// outcome. A limit that was written but reported as failed only makes a
// restarted job skip ids — never repeat them.
const counterPrefix = "next-id-"

// counterObject names the object of limit (see numbered).
func counterObject(limit coordinator.CheckpointID) string {
	return numbered(counterPrefix, uint64(limit))
}

// parseCounterObject is the inverse of counterObject.
func parseCounterObject(name string) (coordinator.CheckpointID, bool) {
	n, ok := parseNumbered(counterPrefix, name)
	return coordinator.CheckpointID(n), ok
}

// numbered names the coordinator's object n of a kind: the kind's prefix
// and n in 20 digits, so that names sort like numbers. Objects are
// immutable, so a value that changes is a sequence of such objects, the
// highest of which is current.
func numbered(prefix string, n uint64) string { return fmt.Sprintf("%s%020d", prefix, n) }

// parseNumbered is the inverse of numbered.
func parseNumbered(prefix, name string) (uint64, bool) {
	digits, ok := strings.CutPrefix(name, prefix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil
}

// IDCounter is the durable checkpoint-id counter of a job (Flink's
// CheckpointIDCounter): a high-water mark below which checkpoint ids may
// have been issued. A Coordinator reads it once at Start — the next id is
// at or above it — and then raises it with Reserve before it issues the ids
// below the new limit (see coordinator.Config.IDReservation).
//
// Options.Counter selects one; by default the counter lives in the
// checkpoint storage (objects under checkpoint.CoordinatorName, see
// ReadCounter). A coordinator that can fail over to a standby keeps it in a
// consensus store instead, where a reservation is a compare-and-swap from
// the value the coordinator last read or wrote, so that two coordinators
// never reserve the same ids (package runtime/coordinator/etcdcoord).
type IDCounter interface {
	// Read returns the counter: the highest limit ever reserved, or zero
	// if none was.
	Read(ctx context.Context) (coordinator.CheckpointID, error)
	// Reserve raises the counter to limit, durably, before the
	// Coordinator issues ids below it. The Coordinator calls it at most
	// once at a time, with limits above the value Read returned and above
	// every limit reported reserved. A failed reservation may be retried
	// with the same limit, so Reserve must be idempotent. After a failure
	// the ids are not issued; a counter raised all the same only makes
	// ids skipped, never repeated.
	Reserve(ctx context.Context, limit coordinator.CheckpointID) error
}

// storageCounter is the default IDCounter: objects in the checkpoint
// storage.
type storageCounter struct{ s checkpoint.Storage }

func (c storageCounter) Read(ctx context.Context) (coordinator.CheckpointID, error) {
	return ReadCounter(ctx, c.s)
}

func (c storageCounter) Reserve(ctx context.Context, limit coordinator.CheckpointID) error {
	return writeCounter(ctx, c.s, limit)
}

// ReadCounter returns the durable checkpoint-id counter in s: the highest
// limit a coordinator reserved, below which ids may have been issued, or
// zero if there is none.
func ReadCounter(ctx context.Context, s checkpoint.Storage) (coordinator.CheckpointID, error) {
	limit, _, err := readCounter(ctx, s)
	return limit, err
}

// readCounter returns the counter and the names of every counter object.
func readCounter(ctx context.Context, s checkpoint.Storage) (coordinator.CheckpointID, []string, error) {
	objs, err := s.Objects(ctx, checkpoint.CoordinatorName)
	if err != nil {
		return 0, nil, fmt.Errorf("driver: reading the checkpoint-id counter: %w", err)
	}
	var limit coordinator.CheckpointID
	var names []string
	for _, o := range objs {
		if l, ok := parseCounterObject(o.Name); ok {
			limit = max(limit, l)
			names = append(names, o.Name)
		}
	}
	return limit, names, nil
}

// writeCounter makes limit durable in s and then removes the objects of
// lower limits (a failure to remove them is harmless: the highest wins).
func writeCounter(ctx context.Context, s checkpoint.Storage, limit coordinator.CheckpointID) error {
	err := writeObject(ctx, s, checkpoint.CoordinatorName, counterObject(limit), fmt.Appendf(nil, "%d\n", uint64(limit)))
	if err != nil && !errors.Is(err, checkpoint.ErrExist) {
		return fmt.Errorf("driver: reserving checkpoint ids below %d: %w", limit, err)
	}
	if _, names, err := readCounter(ctx, s); err == nil {
		for _, n := range names {
			if l, _ := parseCounterObject(n); l < limit {
				_ = s.Remove(ctx, checkpoint.CoordinatorName, n)
			}
		}
	}
	return nil
}
