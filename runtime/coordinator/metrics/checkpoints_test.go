package metrics_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/stategen/stategen/internal/testenv/metrictest"
	"github.com/stategen/stategen/runtime/coordinator"
	"github.com/stategen/stategen/runtime/coordinator/metrics"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

// feed hands the Core's decisions to m as a driver does; the full size of
// a completed checkpoint is its bytes plus 1000 (the files it would share
// with earlier ones).
func feed(t *testing.T, c *coordinator.Core, m *metrics.Checkpoints) {
	t.Helper()
	ctx := context.Background()
	for c.HasReady() {
		feedOnce(t, ctx, c, m)
	}
}

func feedOnce(t *testing.T, ctx context.Context, c *coordinator.Core, m *metrics.Checkpoints) {
	t.Helper()
	for _, d := range c.Ready() {
		switch d := d.(type) {
		case coordinator.Trigger:
			m.Triggered(ctx, d)
		case coordinator.Refused:
			m.Refused(ctx, d)
		case coordinator.Finalize:
			if err := c.StoreResult(at(0), d.Checkpoint.ID, nil); err != nil {
				t.Fatal(err)
			}
		case coordinator.Report:
			m.Ended(ctx, d.Record, d.Record.Bytes+1000)
		}
	}
}

func ack(t *testing.T, c *coordinator.Core, now time.Time, id coordinator.CheckpointID, from coordinator.ParticipantID, sync, async time.Duration) {
	t.Helper()
	res, err := c.Ack(now, id, from, coordinator.Payload{Bytes: 100, SyncDuration: sync, AsyncDuration: async})
	if err != nil || res != coordinator.MessageAccepted {
		t.Fatalf("ack of %d by %s: %v, %v", id, from, res, err)
	}
}

var (
	checkpointType = attribute.String(metrics.AttrType, "checkpoint")
	savepointType  = attribute.String(metrics.AttrType, "savepoint")
)

func reason(r string) attribute.KeyValue { return attribute.String(metrics.AttrAbortReason, r) }
func who(p string) attribute.KeyValue    { return attribute.String(metrics.AttrParticipant, p) }

// A job's checkpoints end every way there is — completed, declined as not
// ready, declined, expired, a participant lost, a savepoint — and each end
// is counted once, in the one counter its kind says, with its reason; the
// counters agree with the Core's Stats.
func TestCheckpointsCountEveryEndOnceWithItsReason(t *testing.T) {
	r := metrictest.New(t)
	m, err := metrics.NewCheckpoints(r.Provider)
	if err != nil {
		t.Fatal(err)
	}
	cfg := coordinator.Config{Interval: 10 * time.Second, Timeout: 30 * time.Second, TolerableFailures: coordinator.UnlimitedFailures}
	c, err := coordinator.New(cfg, t0, coordinator.Recovery{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []coordinator.ParticipantID{"op/0", "op/1"} {
		if err := c.AddParticipant(p); err != nil {
			t.Fatal(err)
		}
	}
	feed(t, c, m)

	// 1 completes: triggered at 10s, acknowledged at 13s and 14s.
	c.Tick(at(10))
	feed(t, c, m)
	ack(t, c, at(13), 1, "op/0", time.Second, time.Second)
	ack(t, c, at(14), 1, "op/1", 2*time.Second, time.Second)
	feed(t, c, m)
	// 2 is declined as not ready, 3 declined for real.
	c.Tick(at(20))
	c.Decline(at(21), 2, "op/0", coordinator.ErrNotReady)
	feed(t, c, m)
	c.Tick(at(30))
	c.Decline(at(31), 3, "op/1", errors.New("disk full"))
	feed(t, c, m)
	// 4 expires; the triggers due meanwhile wait (refused once).
	c.Tick(at(40))
	feed(t, c, m)
	c.Tick(at(50))
	feed(t, c, m)
	c.Tick(at(70))
	feed(t, c, m)
	// 5, triggered at once after the expiry, loses a participant.
	if got := c.Pending(); !slices.Equal(got, []coordinator.CheckpointID{5}) {
		t.Fatalf("pending %v, want [5]", got)
	}
	if err := c.RemoveParticipant(at(71), "op/1"); err != nil {
		t.Fatal(err)
	}
	feed(t, c, m)
	// A savepoint of the one participant left completes.
	id, err := c.RequestSavepoint(at(72), "sp")
	if err != nil {
		t.Fatal(err)
	}
	feed(t, c, m)
	ack(t, c, at(73), id, "op/0", 0, time.Second)
	feed(t, c, m)

	d := r.Collect(t)
	ints := []struct {
		name  string
		attrs []attribute.KeyValue
		want  int64
	}{
		{metrics.CheckpointStarted, []attribute.KeyValue{checkpointType}, 5},
		{metrics.CheckpointStarted, []attribute.KeyValue{savepointType}, 1},
		{metrics.CheckpointCompleted, []attribute.KeyValue{checkpointType}, 1},
		{metrics.CheckpointCompleted, []attribute.KeyValue{savepointType}, 1},
		{metrics.CheckpointNotReady, []attribute.KeyValue{checkpointType, reason("declined")}, 1},
		{metrics.CheckpointFailed, []attribute.KeyValue{checkpointType, reason("declined")}, 1},
		{metrics.CheckpointFailed, []attribute.KeyValue{checkpointType, reason("expired")}, 1},
		{metrics.CheckpointAborted, []attribute.KeyValue{checkpointType, reason("participant-lost")}, 1},
		{metrics.CheckpointInProgress, []attribute.KeyValue{checkpointType}, 0},
		{metrics.CheckpointInProgress, []attribute.KeyValue{savepointType}, 0},
		{metrics.CheckpointRefused, []attribute.KeyValue{attribute.String(metrics.AttrRefuseReason, "too-many-pending")}, 1},
		{metrics.CheckpointLastID, []attribute.KeyValue{checkpointType}, 1},
		{metrics.CheckpointLastID, []attribute.KeyValue{savepointType}, int64(id)},
		{metrics.CheckpointLastSize, []attribute.KeyValue{checkpointType}, 200},
		{metrics.CheckpointLastFullSize, []attribute.KeyValue{checkpointType}, 1200},
		{metrics.CheckpointLastSize, []attribute.KeyValue{savepointType}, 100},
	}
	for _, c := range ints {
		if got, ok := d.Int(c.name, c.attrs...); !ok || got != c.want {
			t.Errorf("%s %v = %d (recorded: %v), want %d; points: %v", c.name, c.attrs, got, ok, c.want, d.Points(c.name))
		}
	}
	// Nothing else was counted: one point per outcome above.
	for name, want := range map[string]int{
		metrics.CheckpointFailed: 2, metrics.CheckpointAborted: 1, metrics.CheckpointNotReady: 1, metrics.CheckpointRefused: 1,
	} {
		if got := d.Points(name); len(got) != want {
			t.Errorf("%s has points %v, want %d", name, got, want)
		}
	}
	// The counters agree with the Core's: Failed is failed + aborted.
	n := c.Stats().Counts()
	if n.Completed != 2 || n.Failed != 3 || n.NotReady != 1 {
		t.Errorf("Stats counts %+v; want completed 2, failed 3 (2 failed + 1 aborted), not ready 1", n)
	}

	floats := []struct {
		name  string
		attrs []attribute.KeyValue
		count uint64
		sum   float64
	}{
		{metrics.CheckpointDuration, []attribute.KeyValue{checkpointType}, 1, 4},
		{metrics.CheckpointDuration, []attribute.KeyValue{savepointType}, 1, 1},
		// Per participant, over checkpoint 1 and the savepoint.
		{metrics.CheckpointSyncDuration, []attribute.KeyValue{who("op/0")}, 2, 1},
		{metrics.CheckpointSyncDuration, []attribute.KeyValue{who("op/1")}, 1, 2},
		{metrics.CheckpointAsyncDuration, []attribute.KeyValue{who("op/0")}, 2, 2},
		// op/0: 13-10-1-1 = 1s, then 73-72-0-1 = 0; op/1: 14-10-2-1 = 1s.
		{metrics.CheckpointStartDelay, []attribute.KeyValue{who("op/0")}, 2, 1},
		{metrics.CheckpointStartDelay, []attribute.KeyValue{who("op/1")}, 1, 1},
	}
	for _, c := range floats {
		count, ok := d.Count(c.name, c.attrs...)
		sum, _ := d.Sum(c.name, c.attrs...)
		if !ok || count != c.count || sum != c.sum {
			t.Errorf("%s %v: count %d sum %v (recorded: %v), want count %d sum %v; points %v",
				c.name, c.attrs, count, sum, ok, c.count, c.sum, d.Points(c.name))
		}
	}
	if got, ok := d.Float(metrics.CheckpointLastDuration, checkpointType); !ok || got != 4 {
		t.Errorf("last duration %v (%v), want 4", got, ok)
	}
	if got, ok := d.Count(metrics.CheckpointFullSize, checkpointType); !ok || got != 1 {
		t.Errorf("full size histogram count %d (%v), want 1", got, ok)
	}
	for name, unit := range map[string]string{
		metrics.CheckpointDuration: "s", metrics.CheckpointSize: "By", metrics.CheckpointCompleted: "{checkpoint}",
		metrics.CheckpointLastFullSize: "By", metrics.CheckpointStartDelay: "s",
	} {
		if got := d.Unit(name); got != unit {
			t.Errorf("%s has unit %q, want %q", name, got, unit)
		}
	}
}

// A provider that cannot create an instrument is a clear error, naming
// the instrument — never a panic; nil providers and nil recorders record
// nothing.
func TestBadProviderIsAnErrorNilIsNoop(t *testing.T) {
	for _, name := range []string{metrics.CheckpointFailed, metrics.CheckpointDuration, metrics.CheckpointLastID} {
		_, err := metrics.NewCheckpoints(metrictest.Failing(name))
		if !errors.Is(err, metrics.ErrInstrument) || !errors.Is(err, metrictest.ErrRefused) || !strings.Contains(err.Error(), name) {
			t.Errorf("NewCheckpoints with %s refused: %v", name, err)
		}
	}
	if _, err := metrics.NewRestores(metrictest.Failing(metrics.RestoreSize)); !errors.Is(err, metrics.ErrInstrument) {
		t.Errorf("NewRestores: %v", err)
	}
	m, err := metrics.NewCheckpoints(nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rec := coordinator.Record{ID: 1, Status: coordinator.StatusCompleted, Participants: []coordinator.ParticipantStats{{Participant: "a", Acked: true}}}
	m.Triggered(ctx, coordinator.Trigger{ID: 1})
	m.Ended(ctx, rec, 0)
	var none *metrics.Checkpoints
	none.Triggered(ctx, coordinator.Trigger{ID: 1})
	none.Refused(ctx, coordinator.Refused{Reason: coordinator.RefusedMinPause})
	none.Ended(ctx, rec, 0)
	var noRestores *metrics.Restores
	noRestores.Record(ctx, "a", checkpointRestoreStats())
}
