package metrics

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/stategen/stategen/runtime/coordinator"
)

// Checkpoints are the instruments of a job's checkpoints, fed by its
// coordinator's driver with the Core's decisions: a Trigger starts a
// checkpoint, a Refused drops a trigger, a Report ends a checkpoint with
// its record (see the package doc for what each instrument measures).
// Package runtime/coordinator/driver feeds one when
// driver.Options.MeterProvider is set; a driver of its own calls Triggered,
// Refused and Ended in the same places.
//
// A Checkpoints is safe for concurrent use. Its methods do nothing on a
// nil *Checkpoints, so a driver without a MeterProvider may keep a nil one
// and pay for nothing.
type Checkpoints struct {
	started, completed, failed, aborted, notReady, refused metric.Int64Counter
	inProgress                                             metric.Int64UpDownCounter
	duration, syncDuration, asyncDuration, startDelay      metric.Float64Histogram
	size, fullSize                                         metric.Int64Histogram
	lastDuration                                           metric.Float64Gauge
	lastSize, lastFullSize, lastID                         metric.Int64Gauge

	// byType holds the attribute sets of checkpoints and savepoints.
	byType [2]metric.MeasurementOption
}

// NewCheckpoints creates the job instruments with mp's meter (ScopeName);
// a nil mp records nothing. The error wraps ErrInstrument and names the
// instrument mp could not create.
func NewCheckpoints(mp metric.MeterProvider) (*Checkpoints, error) {
	b := &builder{m: meter(mp)}
	m := &Checkpoints{
		started:   b.counter(CheckpointStarted, unitCheckpoint, "Checkpoints and savepoints triggered."),
		completed: b.counter(CheckpointCompleted, unitCheckpoint, "Checkpoints and savepoints completed."),
		failed: b.counter(CheckpointFailed, unitCheckpoint,
			"Checkpoints and savepoints aborted for a reason that counts towards the tolerable failures, by reason."),
		aborted: b.counter(CheckpointAborted, unitCheckpoint,
			"Checkpoints and savepoints aborted for a reason that is not a failure (subsumed, shutdown, participant lost), by reason."),
		notReady: b.counter(CheckpointNotReady, unitCheckpoint,
			"Checkpoints and savepoints aborted because a participant was not ready (not a failure), by reason."),
		refused: b.counter(CheckpointRefused, "{trigger}",
			"Periodic triggers that did not start a checkpoint, and on-demand requests dropped, by reason."),
		inProgress:    b.upDown(CheckpointInProgress, unitCheckpoint, "Checkpoints and savepoints triggered and not ended yet."),
		duration:      b.seconds(CheckpointDuration, "Duration of completed checkpoints, from trigger to completion."),
		syncDuration:  b.seconds(CheckpointSyncDuration, "Duration of the synchronous snapshot phase of each participant of completed checkpoints."),
		asyncDuration: b.seconds(CheckpointAsyncDuration, "Duration of the asynchronous snapshot phase (the write) of each participant of completed checkpoints."),
		startDelay: b.seconds(CheckpointStartDelay,
			"Time from the trigger to the start of each participant's snapshot, for completed checkpoints (includes the acknowledgement's trip)."),
		size:         b.bytes(CheckpointSize, "Bytes the participants wrote for completed checkpoints."),
		fullSize:     b.bytes(CheckpointFullSize, "Full size of completed checkpoints: every data file they reference."),
		lastDuration: b.floatGauge(CheckpointLastDuration, unitSeconds, "Duration of the latest completed checkpoint."),
		lastSize:     b.gauge(CheckpointLastSize, unitBytes, "Bytes written for the latest completed checkpoint."),
		lastFullSize: b.gauge(CheckpointLastFullSize, unitBytes, "Full size of the latest completed checkpoint."),
		lastID:       b.gauge(CheckpointLastID, "{checkpoint}", "Id of the latest completed checkpoint."),
	}
	if b.err != nil {
		return nil, b.err
	}
	m.byType[0] = metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrType, "checkpoint")))
	m.byType[1] = metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrType, "savepoint")))
	return m, nil
}

// kind returns the attribute option of a checkpoint or a savepoint.
func (m *Checkpoints) kind(savepoint bool) metric.MeasurementOption {
	if savepoint {
		return m.byType[1]
	}
	return m.byType[0]
}

// Triggered records the start of checkpoint t.
func (m *Checkpoints) Triggered(ctx context.Context, t coordinator.Trigger) {
	if m == nil {
		return
	}
	k := m.kind(t.Options.Savepoint)
	m.started.Add(ctx, 1, k)
	m.inProgress.Add(ctx, 1, k)
}

// Refused records a trigger or request that started no checkpoint.
func (m *Checkpoints) Refused(ctx context.Context, r coordinator.Refused) {
	if m == nil {
		return
	}
	m.refused.Add(ctx, 1, metric.WithAttributes(attribute.String(AttrRefuseReason, r.Reason.String())))
}

// Ended records the end of the checkpoint r describes (a Report
// decision's record). fullSize is the total size of the data files its
// metadata references; a driver that cannot tell passes r.Bytes.
//
// A completed checkpoint adds to the completed counter and sets the last
// gauges and the histograms of duration, sizes, and each participant's
// phases and start delay. An aborted one adds to exactly one of the
// not-ready counter (r.NotReady), the failed counter (its abort counts
// towards the tolerable failures, coordinator.AbortError.Counted) and the
// aborted counter, with its reason.
func (m *Checkpoints) Ended(ctx context.Context, r coordinator.Record, fullSize int64) {
	if m == nil {
		return
	}
	k := m.kind(r.Savepoint)
	m.inProgress.Add(ctx, -1, k)
	if r.Status != coordinator.StatusCompleted || r.Err != nil {
		reason := "unknown"
		counter := m.failed
		if r.Err != nil {
			reason = r.Err.Reason.String()
			switch {
			case r.NotReady():
				counter = m.notReady
			case !r.Err.Counted():
				counter = m.aborted
			}
		}
		counter.Add(ctx, 1, metric.WithAttributes(
			attribute.String(AttrType, typeName(r.Savepoint)),
			attribute.String(AttrAbortReason, reason)))
		return
	}
	m.completed.Add(ctx, 1, k)
	d := r.Duration().Seconds()
	m.duration.Record(ctx, d, k)
	m.size.Record(ctx, r.Bytes, k)
	m.fullSize.Record(ctx, fullSize, k)
	m.lastDuration.Record(ctx, d, k)
	m.lastSize.Record(ctx, r.Bytes, k)
	m.lastFullSize.Record(ctx, fullSize, k)
	m.lastID.Record(ctx, int64(min(r.ID, coordinator.MaxID)), k)
	for _, p := range r.Participants {
		if !p.Acked {
			continue
		}
		who := metric.WithAttributes(attribute.String(AttrParticipant, string(p.Participant)))
		m.syncDuration.Record(ctx, p.SyncDuration.Seconds(), who)
		m.asyncDuration.Record(ctx, p.AsyncDuration.Seconds(), who)
		// The coordinator sees when the trigger left and when the
		// acknowledgement came back; what the two phases do not account
		// for is the wait before the snapshot began (and the trip back).
		delay := p.AckedAt.Sub(r.TriggeredAt) - p.SyncDuration - p.AsyncDuration
		m.startDelay.Record(ctx, max(delay, 0).Seconds(), who)
	}
}

func typeName(savepoint bool) string {
	if savepoint {
		return "savepoint"
	}
	return "checkpoint"
}
