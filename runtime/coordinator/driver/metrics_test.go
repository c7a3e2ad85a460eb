package driver

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/internal/testenv/metrictest"
	"github.com/stategen/stategen/runtime/coordinator"
	"github.com/stategen/stategen/runtime/coordinator/metrics"
)

// The driver records the job's checkpoints from its decisions and each
// instance's store from its writes: a checkpoint declined as not ready for
// an instance that has not joined, one that completes, one an instance
// declines. Each is counted once, with its reason; the full size is the
// data files' size; each instance's state entries and bytes are those of
// its snapshot of the completed checkpoint.
func TestDriverRecordsCheckpointAndStoreMetrics(t *testing.T) {
	r := metrictest.New(t)
	s := checkpoint.NewMem()
	clock := &fakeClock{now: t0}
	c := startOpts(t, s, clock, Options{
		Config:        coordinator.Config{Interval: 10 * time.Second, TolerableFailures: coordinator.UnlimitedFailures},
		Expected:      map[string]int{"counter": 2},
		MeterProvider: r.Provider,
	})
	ops := []*operator{newOperatorOn(t, cowStore, c, 0, 2, InstanceOptions{}), newOperatorOn(t, cowStore, nil, 1, 2, InstanceOptions{})}

	// 1: instance 1 has not joined.
	clock.Advance(10 * time.Second)
	tr := ops[0].nextTrigger()
	if n := ops[0].nextNote(); !errors.Is(n.Err, coordinator.ErrNotReady) {
		t.Fatalf("checkpoint %d: %v, want declined as not ready", n.ID, n.Err)
	}
	if err := ops[0].snapshot(tr); err != nil {
		t.Fatal(err)
	}
	// 2 completes.
	ops[1].join(c, InstanceOptions{})
	done := completeOne(t, c, clock, ops)
	for _, o := range ops {
		o.nextNote()
	}
	// 3: instance 1 declines; instance 0 takes the trigger after the
	// abort, and so writes nothing.
	clock.Advance(10 * time.Second)
	tr = ops[0].nextTrigger()
	if err := ops[1].inst.Decline(ops[1].nextTrigger(), errors.New("disk full")); err != nil {
		t.Fatal(err)
	}
	if n := ops[0].nextNote(); !errors.Is(n.Err, coordinator.ErrDeclined) {
		t.Fatalf("checkpoint %d: %v, want declined", n.ID, n.Err)
	}
	if err := ops[0].snapshot(tr); err != nil {
		t.Fatal(err)
	}
	settle(t, c)

	d := r.Collect(t)
	typ := attribute.String(metrics.AttrType, "checkpoint")
	reason := func(s string) attribute.KeyValue { return attribute.String(metrics.AttrAbortReason, s) }
	for _, want := range []struct {
		name  string
		attrs []attribute.KeyValue
		n     int64
	}{
		{metrics.CheckpointStarted, []attribute.KeyValue{typ}, 3},
		{metrics.CheckpointCompleted, []attribute.KeyValue{typ}, 1},
		{metrics.CheckpointNotReady, []attribute.KeyValue{typ, reason("declined")}, 1},
		{metrics.CheckpointFailed, []attribute.KeyValue{typ, reason("declined")}, 1},
		{metrics.CheckpointInProgress, []attribute.KeyValue{typ}, 0},
		{metrics.CheckpointLastID, []attribute.KeyValue{typ}, int64(done)},
	} {
		if got, ok := d.Int(want.name, want.attrs...); !ok || got != want.n {
			t.Errorf("%s %v = %d (%v), want %d; points %v", want.name, want.attrs, got, ok, want.n, d.Points(want.name))
		}
	}
	if d.Has(metrics.CheckpointAborted) {
		t.Errorf("aborted: %v, want none", d.Points(metrics.CheckpointAborted))
	}
	cp := c.Retained()[0]
	var files, written int64
	for _, ps := range cp.Participants {
		files += ps.Payload.Handle.(handle).snapshot.File.Size
		written += ps.Payload.Bytes
	}
	if got, _ := d.Int(metrics.CheckpointLastFullSize, typ); got != files || files == 0 {
		t.Errorf("last full size %d, want the data files' %d", got, files)
	}
	if got, _ := d.Int(metrics.CheckpointLastSize, typ); got != written {
		t.Errorf("last size %d, want the bytes written, %d", got, written)
	}
	for _, o := range ops {
		who := attribute.String(metrics.AttrParticipant, string(o.inst.ID()))
		for _, name := range []string{metrics.CheckpointSyncDuration, metrics.CheckpointAsyncDuration, metrics.CheckpointStartDelay} {
			if n, ok := d.Count(name, who); !ok || n != 1 {
				t.Errorf("%s of %s: %d measurements (%v), want 1 (checkpoint %d)", name, who.Value.Emit(), n, ok, done)
			}
		}
		// The entries of the latest write, checkpoint 2's.
		want, _, _ := o.expectedAt(done)
		var entries, bytes int64
		for _, recs := range want.States["count"].Groups {
			for _, rec := range recs {
				entries++
				bytes += int64(len(rec.Key) + len(rec.Value))
			}
		}
		st := attribute.String(metrics.AttrState, "count")
		if got, ok := d.Int(metrics.StateEntries, who, st); !ok || got != entries || entries == 0 {
			t.Errorf("%s: state entries %d (%v), want %d", who.Value.Emit(), got, ok, entries)
		}
		if got, _ := d.Int(metrics.StateSize, who, st); got != bytes {
			t.Errorf("%s: state bytes %d, want %d", who.Value.Emit(), got, bytes)
		}
		if got, ok := d.Int(metrics.StoreLiveSnapshots, who); !ok || got != 0 {
			t.Errorf("%s: live snapshots %d (%v), want 0", who.Value.Emit(), got, ok)
		}
	}
	// A closed instance stops observing its store.
	for _, o := range ops {
		if err := o.inst.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if d := r.Collect(t); d.Has(metrics.StateEntries) || d.Has(metrics.StoreLiveSnapshots) {
		t.Errorf("observed after Close: %v", d.Points(metrics.StateEntries))
	}
}

// A MeterProvider that cannot create an instrument fails Start and Join
// with an error that names the option and the instrument, before anything
// starts.
func TestBadMeterProviderFailsStartAndJoin(t *testing.T) {
	s := checkpoint.NewMem()
	_, err := Start(context.Background(), Options{
		Config: coordinator.Config{Interval: time.Second}, Storage: s, Logger: quiet(),
		MeterProvider: metrictest.Failing(metrics.CheckpointInProgress),
	})
	if !errors.Is(err, metrics.ErrInstrument) || !strings.Contains(err.Error(), "Options.MeterProvider") ||
		!strings.Contains(err.Error(), metrics.CheckpointInProgress) {
		t.Errorf("Start: %v", err)
	}
	if names := committed(t, s); len(names) != 0 {
		t.Errorf("Start wrote %v before failing", names)
	}
	c := startOpts(t, s, &fakeClock{now: t0}, Options{Config: coordinator.Config{Interval: time.Second}})
	o := newOperatorOn(t, cowStore, nil, 0, 1, InstanceOptions{})
	_, err = c.Join(InstanceOptions{Operator: "counter", Store: o.store, MeterProvider: metrictest.Failing("callback")})
	if !errors.Is(err, metrics.ErrInstrument) || !strings.Contains(err.Error(), "InstanceOptions.MeterProvider") {
		t.Errorf("Join: %v", err)
	}
	if got := c.Stats().Counts(); got.Triggered != 0 {
		t.Errorf("counts %+v", got)
	}
}
