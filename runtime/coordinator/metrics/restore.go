package metrics

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime/coordinator"
)

// Restores are the instruments of restores: how long each participant's
// restore took, how many bytes it read and how many entries it loaded.
// A Restores is safe for concurrent use; its method does nothing on a nil
// *Restores.
type Restores struct {
	duration metric.Float64Histogram
	size     metric.Int64Histogram
	entries  metric.Int64Counter
}

// NewRestores creates the restore instruments with mp's meter
// (ScopeName); a nil mp records nothing. The error wraps ErrInstrument and
// names the instrument mp could not create.
func NewRestores(mp metric.MeterProvider) (*Restores, error) {
	b := &builder{m: meter(mp)}
	r := &Restores{
		duration: b.seconds(RestoreDuration, "Duration of each participant's restore of a checkpoint."),
		size:     b.bytes(RestoreSize, "Bytes each participant's restore read from the checkpoint."),
		entries:  b.counter(RestoreEntries, "{entry}", "Entries restored, per participant."),
	}
	if b.err != nil {
		return nil, b.err
	}
	return r, nil
}

// Record records participant's restore, described by stats (the
// RestoreStats of checkpoint.Reader.Restore, driver.RestoreLatest or
// etcdcoord.RestoreLatest).
func (r *Restores) Record(ctx context.Context, participant coordinator.ParticipantID, stats checkpoint.RestoreStats) {
	if r == nil {
		return
	}
	who := metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrParticipant, string(participant))))
	r.duration.Record(ctx, stats.Duration.Seconds(), who)
	r.size.Record(ctx, stats.BytesRead, who)
	r.entries.Add(ctx, stats.Entries, who)
}

// RecordRestore is NewRestores followed by Record, for a process that
// restores once: a worker calls it after its restore, with the
// MeterProvider it gives its Instance.
//
//	res, err := driver.RestoreLatest(ctx, storage, "clicks", i, p, store, nil)
//	...
//	err = metrics.RecordRestore(ctx, mp, "clicks/3", res.Stats)
func RecordRestore(ctx context.Context, mp metric.MeterProvider, participant coordinator.ParticipantID, stats checkpoint.RestoreStats) error {
	r, err := NewRestores(mp)
	if err != nil {
		return err
	}
	r.Record(ctx, participant, stats)
	return nil
}
