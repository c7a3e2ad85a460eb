package driver

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/metric"

	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/coordinator"
	"github.com/stategen/stategen/runtime/coordinator/metrics"
)

// coordMetrics feeds the job's instruments (package
// runtime/coordinator/metrics) with the Core's decisions, on the loop
// goroutine. A nil *coordMetrics — no Options.MeterProvider — does
// nothing, so a Coordinator without metrics pays one nil check per step.
type coordMetrics struct {
	m *metrics.Checkpoints
	// fullSize holds, from its Finalize to its Report, the total size of
	// the data files of each checkpoint being finalized.
	fullSize map[coordinator.CheckpointID]int64
}

// newCoordMetrics returns the metrics of a Coordinator with mp; nil for a
// nil mp.
func newCoordMetrics(mp metric.MeterProvider) (*coordMetrics, error) {
	if mp == nil {
		return nil, nil
	}
	m, err := metrics.NewCheckpoints(mp)
	if err != nil {
		return nil, fmt.Errorf("driver: Options.MeterProvider: %w", err)
	}
	return &coordMetrics{m: m, fullSize: map[coordinator.CheckpointID]int64{}}, nil
}

// observe records what decisions ds say: triggers, refusals, and the ends
// of checkpoints.
func (cm *coordMetrics) observe(ds []coordinator.Decision) {
	if cm == nil {
		return
	}
	ctx := context.Background()
	for _, d := range ds {
		switch d := d.(type) {
		case coordinator.Trigger:
			cm.m.Triggered(ctx, d)
		case coordinator.Refused:
			cm.m.Refused(ctx, d)
		case coordinator.Finalize:
			cm.fullSize[d.Checkpoint.ID] = fullSize(d.Checkpoint)
		case coordinator.Report:
			id := d.Record.ID
			full, ok := cm.fullSize[id]
			if !ok {
				full = d.Record.Bytes
			}
			delete(cm.fullSize, id)
			cm.m.Ended(ctx, d.Record, full)
		}
	}
}

// fullSize is the total size of the data files checkpoint cp's metadata
// names. Every checkpoint written today is self-contained, so it equals
// the bytes its participants wrote; a checkpoint that references files of
// earlier ones would be larger.
func fullSize(cp coordinator.Checkpoint) int64 {
	var n int64
	for _, ps := range cp.Participants {
		if h, ok := ps.Payload.Handle.(handle); ok {
			n += h.snapshot.File.Size
		} else {
			n += ps.Payload.Bytes
		}
	}
	return n
}

// newStoreMetrics returns the store instruments of participant id, with
// store, or nil for a nil mp.
func newStoreMetrics(mp metric.MeterProvider, id coordinator.ParticipantID, store runtime.Store) (*metrics.Store, error) {
	if mp == nil {
		return nil, nil
	}
	return metrics.NewStore(mp, id, store)
}
