package coordinator

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stategen/stategen/runtime"
)

func TestConfigDefaultsAreFlinks(t *testing.T) {
	got, err := Config{Interval: time.Second}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Interval:          time.Second,
		Timeout:           10 * time.Minute,
		MinPause:          0,
		MaxConcurrent:     1,
		TolerableFailures: 0,
		Retained:          1,
		StatsHistory:      10,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

func TestConfigIntervalRaisedToMinPause(t *testing.T) {
	got, err := Config{Interval: time.Second, MinPause: 3 * time.Second}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	if got.Interval != 3*time.Second {
		t.Errorf("Interval = %v, want the min pause 3s", got.Interval)
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	ok := Config{Interval: time.Second}
	for _, tc := range []struct {
		field string
		edit  func(*Config)
	}{
		{"Interval", func(c *Config) { c.Interval = 0 }},
		{"Interval", func(c *Config) { c.Interval = -time.Second }},
		{"Interval", func(c *Config) { c.Interval = time.Millisecond }},
		{"Interval", func(c *Config) { c.Interval = 2 * MaxDuration }},
		{"Timeout", func(c *Config) { c.Timeout = -1 }},
		{"Timeout", func(c *Config) { c.Timeout = time.Millisecond }},
		{"Timeout", func(c *Config) { c.Timeout = MaxDuration + 1 }},
		{"MinPause", func(c *Config) { c.MinPause = -1 }},
		{"MinPause", func(c *Config) { c.MinPause = MaxDuration + 1 }},
		{"MaxConcurrent", func(c *Config) { c.MaxConcurrent = -1 }},
		{"TolerableFailures", func(c *Config) { c.TolerableFailures = -1 }},
		{"Retained", func(c *Config) { c.Retained = -3 }},
		{"StatsHistory", func(c *Config) { c.StatsHistory = -1 }},
		{"IDReservation", func(c *Config) { c.IDReservation = -1 }},
		{"IDReservation", func(c *Config) { c.IDReservation = MaxIDReservation + 1 }},
	} {
		cfg := ok
		tc.edit(&cfg)
		_, err := cfg.Normalize()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "Config."+tc.field+" ") {
			t.Errorf("%+v: err = %v, want ErrInvalidConfig naming Config.%s", cfg, err, tc.field)
		}
		if _, err := New(cfg, t0, Recovery{}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("New(%+v): err = %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

// drive is a small helper for Go tests: it fails the test on an unexpected
// error and returns the decisions of each step.
type drive struct {
	t *testing.T
	c *Core
}

func newDrive(t *testing.T, cfg Config, rec Recovery, participants ...ParticipantID) *drive {
	t.Helper()
	c, err := New(cfg, t0, rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range participants {
		if err := c.AddParticipant(p); err != nil {
			t.Fatal(err)
		}
	}
	c.Ready()
	return &drive{t, c}
}

func at(d time.Duration) time.Time { return t0.Add(d) }

// complete acknowledges checkpoint id by every participant (one file each,
// named after participant and id) and stores it successfully.
func (d *drive) complete(now time.Time, id CheckpointID, participants ...ParticipantID) []Decision {
	d.t.Helper()
	for _, p := range participants {
		if r, err := d.c.Ack(now, id, p, Payload{Files: []string{fmt.Sprintf("%s%d", p, id)}}); r != MessageAccepted || err != nil {
			d.t.Fatalf("ack %d by %s: %v, %v", id, p, r, err)
		}
	}
	if err := d.c.StoreResult(now, id, nil); err != nil {
		d.t.Fatal(err)
	}
	return d.c.Ready()
}

func triggers(ds []Decision) []CheckpointID {
	var ids []CheckpointID
	for _, d := range ds {
		if tr, ok := d.(Trigger); ok {
			ids = append(ids, tr.ID)
		}
	}
	return ids
}

func TestRecoverySeedsCounterAndRetention(t *testing.T) {
	cp := func(id CheckpointID, files ...string) Checkpoint {
		return Checkpoint{ID: id, Participants: []ParticipantState{{Participant: "a", Payload: Payload{Files: files}}}}
	}
	// Retained out of order, NextID below the newest retained id (a lost
	// counter): ids continue above everything recovered.
	d := newDrive(t, Config{Interval: 10 * time.Second, Retained: 2},
		Recovery{NextID: 4, Retained: []Checkpoint{cp(5, "a5"), cp(3, "a3", "shared")}}, "a")
	if got := d.c.NextID(); got != 6 {
		t.Fatalf("NextID = %d, want 6", got)
	}
	if latest, ok := d.c.Latest(); !ok || latest.ID != 5 {
		t.Fatalf("Latest = %v, %v; want 5", latest.ID, ok)
	}
	d.c.Tick(at(10 * time.Second))
	if got := triggers(d.c.Ready()); !cmp.Equal(got, []CheckpointID{6}) {
		t.Fatalf("triggered %v, want [6]", got)
	}
	// Completing 6 pushes the recovered 3 out, metadata first.
	var discards []Discard
	for _, dec := range d.complete(at(11*time.Second), 6, "a") {
		if dd, ok := dec.(Discard); ok {
			discards = append(discards, dd)
		}
	}
	want := []Discard{{ID: 3, Reason: DiscardSubsumed, Metadata: true, Files: []string{"a3", "shared"}}}
	if diff := cmp.Diff(want, discards); diff != "" {
		t.Errorf("discards (-want +got):\n%s", diff)
	}
	var ids []CheckpointID
	for _, r := range d.c.Retained() {
		ids = append(ids, r.ID)
	}
	if !cmp.Equal(ids, []CheckpointID{5, 6}) {
		t.Errorf("retained %v, want [5 6]", ids)
	}
}

func TestRecoveryRejectsBadInput(t *testing.T) {
	cfg := Config{Interval: time.Second}
	good := Checkpoint{ID: 1, Participants: []ParticipantState{{Participant: "a", Payload: Payload{Files: []string{"f"}}}}}
	for name, rec := range map[string]Recovery{
		"zero id":                    {Retained: []Checkpoint{{ID: 0}}},
		"repeated id":                {Retained: []Checkpoint{good, good}},
		"savepoint":                  {Retained: []Checkpoint{{ID: 2, Options: Options{Savepoint: true, Location: "/sp"}}}},
		"empty file":                 {Retained: []Checkpoint{{ID: 2, Participants: []ParticipantState{{Participant: "a", Payload: Payload{Files: []string{""}}}}}}},
		"negative size":              {Retained: []Checkpoint{{ID: 2, Participants: []ParticipantState{{Participant: "a", Payload: Payload{Bytes: -1}}}}}},
		"id too large":               {Retained: []Checkpoint{{ID: MaxID}}},
		"counter large":              {NextID: MaxID},
		"limit without reservations": {IDLimit: 10},
		"not covering": {Retained: []Checkpoint{{ID: 2, Participants: []ParticipantState{{Participant: "a", Payload: Payload{
			KeyGroups: KeyGroups{Operator: "op", MaxParallelism: 128, Range: runtime.KeyGroupRange{Start: 0, End: 64}}}}}}}},
	} {
		if _, err := New(cfg, t0, rec); !errors.Is(err, ErrInvalidRecovery) {
			t.Errorf("%s: err = %v, want ErrInvalidRecovery", name, err)
		}
	}
}

func TestIDsNeverRepeatAcrossRestart(t *testing.T) {
	cfg := Config{Interval: 10 * time.Second, MaxConcurrent: 2, TolerableFailures: UnlimitedFailures}
	d := newDrive(t, cfg, Recovery{}, "a")
	seen := map[CheckpointID]bool{}
	noteIDs := func(ids []CheckpointID) {
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("id %d issued twice", id)
			}
			seen[id] = true
		}
	}
	note := func(ds []Decision) { noteIDs(triggers(ds)) }
	d.c.Tick(at(10 * time.Second)) // 1
	note(d.c.Ready())
	if _, err := d.c.RequestSavepoint(at(11*time.Second), "/sp"); err != nil { // 2
		t.Fatal(err)
	}
	d.c.Decline(at(12*time.Second), 1, "a", errors.New("no")) // 1 aborted
	note(d.c.Ready())
	d.c.Tick(at(20 * time.Second)) // 3
	note(d.c.Ready())
	note(d.complete(at(21*time.Second), 3, "a"))
	// The job crashes with savepoint 2 pending; the counter was persisted.
	d2 := newDrive(t, cfg, Recovery{NextID: d.c.NextID(), Retained: d.c.Retained()}, "a")
	if _, err := d2.c.RequestSavepoint(at(time.Second), "/sp2"); err != nil {
		t.Fatal(err)
	}
	d2.c.Tick(at(10 * time.Second))
	got := triggers(d2.c.Ready())
	if !cmp.Equal(got, []CheckpointID{4, 5}) {
		t.Fatalf("after restart triggered %v, want [4 5]", got)
	}
	noteIDs(got)
}

func TestTimeNeverGoesBackwards(t *testing.T) {
	d := newDrive(t, Config{Interval: 10 * time.Second}, Recovery{}, "a")
	d.c.Tick(at(30 * time.Second))
	d.c.Ready()
	// An input carrying an earlier time is applied at the Core's time.
	id, err := d.c.RequestSavepoint(at(5*time.Second), "/sp")
	if err != nil {
		t.Fatal(err)
	}
	for _, dec := range d.c.Ready() {
		if tr, ok := dec.(Trigger); ok && tr.ID == id && !tr.At.Equal(at(30*time.Second)) {
			t.Errorf("savepoint triggered at %v, want the Core's time %v", tr.At, at(30*time.Second))
		}
	}
}

func TestAckPayloadIsCopied(t *testing.T) {
	d := newDrive(t, Config{Interval: 10 * time.Second}, Recovery{}, "a")
	d.c.Tick(at(10 * time.Second))
	d.c.Ready()
	files := []string{"b", "a", "b"}
	blob := []byte("offsets")
	if _, err := d.c.Ack(at(11*time.Second), 1, "a", Payload{Files: files, OperatorState: blob, Bytes: 7, Handle: 42}); err != nil {
		t.Fatal(err)
	}
	files[0], blob[0] = "x", 'X'
	var fin *Finalize
	for _, dec := range d.c.Ready() {
		if f, ok := dec.(Finalize); ok {
			fin = &f
		}
	}
	if fin == nil {
		t.Fatal("no Finalize after the only participant acknowledged")
	}
	got := fin.Checkpoint.Participants[0].Payload
	want := Payload{Files: []string{"a", "b"}, OperatorState: []byte("offsets"), Bytes: 7, Handle: 42}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("finalized payload (-want +got):\n%s", diff)
	}
}

func TestReportCarriesParticipantStats(t *testing.T) {
	d := newDrive(t, Config{Interval: 10 * time.Second, Timeout: time.Minute, TolerableFailures: 5, StatsHistory: 2}, Recovery{}, "a", "b")
	d.c.Tick(at(10 * time.Second))
	d.c.Ready()
	d.c.Ack(at(12*time.Second), 1, "a", Payload{Files: []string{"a1"}, Bytes: 100, SyncDuration: time.Millisecond, AsyncDuration: time.Second})
	d.c.Ack(at(13*time.Second), 1, "b", Payload{Files: []string{"b1"}, Bytes: 50, SyncDuration: 2 * time.Millisecond, AsyncDuration: 3 * time.Second})
	d.c.StoreResult(at(14*time.Second), 1, nil)
	var rec Record
	for _, dec := range d.c.Ready() {
		if r, ok := dec.(Report); ok {
			rec = r.Record
		}
	}
	want := Record{
		ID: 1, Status: StatusCompleted, TriggeredAt: at(10 * time.Second), EndedAt: at(14 * time.Second), Bytes: 150,
		Participants: []ParticipantStats{
			{Participant: "a", Acked: true, AckedAt: at(12 * time.Second), SyncDuration: time.Millisecond, AsyncDuration: time.Second, Bytes: 100},
			{Participant: "b", Acked: true, AckedAt: at(13 * time.Second), SyncDuration: 2 * time.Millisecond, AsyncDuration: 3 * time.Second, Bytes: 50},
		},
	}
	if diff := cmp.Diff(want, rec); diff != "" {
		t.Errorf("record (-want +got):\n%s", diff)
	}
	if rec.Duration() != 4*time.Second {
		t.Errorf("Duration = %v, want 4s", rec.Duration())
	}

	// An expired checkpoint's record shows who was missing and why.
	d.c.Tick(at(20 * time.Second))
	d.c.Ack(at(21*time.Second), 2, "b", Payload{Bytes: 5})
	d.c.Tick(at(80 * time.Second))
	var failed Record
	for _, dec := range d.c.Ready() {
		if r, ok := dec.(Report); ok {
			failed = r.Record
		}
	}
	if failed.ID != 2 || failed.Status != StatusFailed || !errors.Is(failed.Err, ErrExpired) ||
		failed.Participants[0].Acked || !failed.Participants[1].Acked || failed.Bytes != 5 {
		t.Errorf("expired record = %+v", failed)
	}

	st := d.c.Stats()
	if got, want := st.Counts(), (Counts{Triggered: 3, Completed: 1, Failed: 1}); got != want {
		t.Errorf("counts = %+v, want %+v", got, want)
	}
	if got := st.Counts().InProgress(); got != 1 {
		t.Errorf("in progress = %d, want 1 (checkpoint 3)", got)
	}
	if lc, ok := st.LastCompleted(); !ok || lc.ID != 1 {
		t.Errorf("LastCompleted = %d, %v", lc.ID, ok)
	}
	if lf, ok := st.LastFailed(); !ok || lf.ID != 2 {
		t.Errorf("LastFailed = %d, %v", lf.ID, ok)
	}
}

func TestStatsKeepsTheLatestRecords(t *testing.T) {
	s := NewStats(3)
	if _, ok := s.LastCompleted(); ok {
		t.Error("empty stats report a completed checkpoint")
	}
	for id := CheckpointID(1); id <= 5; id++ {
		s.Observe(Trigger{ID: id})
		status := StatusCompleted
		if id%2 == 0 {
			status = StatusFailed
		}
		s.Observe(Report{Record: Record{ID: id, Status: status}})
	}
	s.Observe(Refused{Reason: RefusedMinPause})
	s.Observe(Schedule{})
	clone := s.Clone()
	s.Observe(Report{Record: Record{ID: 6, Status: StatusCompleted}})

	var ids []CheckpointID
	for _, r := range clone.Recent() {
		ids = append(ids, r.ID)
	}
	if !cmp.Equal(ids, []CheckpointID{3, 4, 5}) {
		t.Errorf("recent = %v, want [3 4 5] oldest first", ids)
	}
	if got, want := clone.Counts(), (Counts{Triggered: 5, Completed: 3, Failed: 2, Refused: 1}); got != want {
		t.Errorf("counts = %+v, want %+v", got, want)
	}
	ids = nil
	for _, r := range s.Recent() {
		ids = append(ids, r.ID)
	}
	if !cmp.Equal(ids, []CheckpointID{4, 5, 6}) {
		t.Errorf("recent after clone = %v, want [4 5 6]", ids)
	}
	if r, _ := clone.LastCompleted(); r.ID != 5 {
		t.Errorf("clone's LastCompleted = %d, want 5", r.ID)
	}
	if r, _ := NewStats(0).LastFailed(); r.ID != 0 {
		t.Error("empty stats report a failed checkpoint")
	}
}

// Summary aggregates every completed checkpoint, also those the recent
// history no longer holds, and ignores failed ones.
func TestStatsSummaryAggregatesCompletedCheckpoints(t *testing.T) {
	s := NewStats(1)
	if got := s.Summary(); got != (Summary{}) {
		t.Errorf("empty summary = %+v", got)
	}
	rec := func(id CheckpointID, status Status, d time.Duration, parts ...ParticipantStats) Record {
		r := Record{ID: id, Status: status, TriggeredAt: t0, EndedAt: t0.Add(d), Participants: parts}
		for _, p := range parts {
			r.Bytes += p.Bytes
		}
		return r
	}
	p := func(sync, async time.Duration, bytes int64) ParticipantStats {
		return ParticipantStats{Acked: true, SyncDuration: sync, AsyncDuration: async, Bytes: bytes}
	}
	s.Observe(Report{Record: rec(1, StatusCompleted, 4*time.Second, p(1*time.Millisecond, 3*time.Second, 100), p(3*time.Millisecond, 1*time.Second, 300))})
	s.Observe(Report{Record: rec(2, StatusFailed, time.Hour, p(time.Hour, time.Hour, 1<<40))})
	s.Observe(Report{Record: rec(3, StatusCompleted, 2*time.Second, p(2*time.Millisecond, 2*time.Second, 200), p(2*time.Millisecond, 2*time.Second, 0))})
	want := Summary{
		Completed:     2,
		Duration:      Spread{Min: 2 * time.Second, Mean: 3 * time.Second, Max: 4 * time.Second},
		Bytes:         SizeSpread{Min: 200, Mean: 300, Max: 400},
		SyncDuration:  Spread{Min: time.Millisecond, Mean: 2 * time.Millisecond, Max: 3 * time.Millisecond},
		AsyncDuration: Spread{Min: time.Second, Mean: 2 * time.Second, Max: 3 * time.Second},
	}
	if diff := cmp.Diff(want, s.Summary()); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, s.Clone().Summary()); diff != "" {
		t.Errorf("clone's summary (-want +got):\n%s", diff)
	}
}

func TestAbortErrorMatchesReasonAndCause(t *testing.T) {
	cause := fmt.Errorf("snapshot: %w", ErrNotReady)
	err := error(&AbortError{ID: 7, Reason: AbortDeclined, Participant: "a", Cause: cause})
	if !errors.Is(err, ErrDeclined) || !errors.Is(err, ErrNotReady) || errors.Is(err, ErrExpired) {
		t.Errorf("errors.Is mismatch for %v", err)
	}
	var ae *AbortError
	if !errors.As(fmt.Errorf("wrapped: %w", err), &ae) || ae.ID != 7 {
		t.Errorf("errors.As failed")
	}
	if got, want := err.Error(), "coordinator: checkpoint 7 aborted: declined by a: snapshot: coordinator: participant not ready to checkpoint"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	for r := AbortDeclined; r <= AbortShutdown; r++ {
		if !errors.Is(&AbortError{Reason: r}, r.Err()) || strings.HasPrefix(r.String(), "AbortReason(") {
			t.Errorf("reason %d has no name or sentinel", r)
		}
	}
	for r := RefusedTooManyPending; r <= RefusedNoParticipants; r++ {
		if r.Err() == nil || strings.HasPrefix(r.String(), "RefuseReason(") {
			t.Errorf("refuse reason %d has no name or sentinel", r)
		}
	}
	// Out-of-range values print and wrap without panicking.
	for _, s := range []string{AbortReason(99).String(), RefuseReason(99).String(), MessageResult(99).String(), DiscardReason(99).String(), Status(9).String()} {
		if s == "" {
			t.Error("empty name for an out-of-range value")
		}
	}
	if AbortReason(99).Err() == nil || RefuseReason(0).Err() == nil {
		t.Error("nil error for an out-of-range reason")
	}
}

// The failure counter, ported in spirit from Flink's
// CheckpointFailureManagerTest.
func TestFailureCounter(t *testing.T) {
	t.Run("ContinuousFailure", func(t *testing.T) {
		f := newFailureCounter(2)
		if f.failure(1) || f.failure(2) || !f.failure(3) {
			t.Error("the third consecutive failure with 2 tolerated must be terminal")
		}
	})
	t.Run("BreakContinuousFailure", func(t *testing.T) {
		f := newFailureCounter(2)
		f.failure(1)
		f.failure(2)
		f.success(3)
		if f.failure(4) || f.failure(5) || !f.failure(6) {
			t.Error("a success must reset the count")
		}
	})
	t.Run("CountsEachCheckpointOnce", func(t *testing.T) {
		f := newFailureCounter(1)
		f.failure(1)
		if f.failure(1) || f.failure(1) {
			t.Error("the same checkpoint counted more than once")
		}
		if !f.failure(2) {
			t.Error("a second checkpoint must count")
		}
	})
	t.Run("IgnoresPastCheckpoints", func(t *testing.T) {
		f := newFailureCounter(0)
		f.success(5)
		if f.failure(4) || f.failure(5) {
			t.Error("failures at or below the last success must be ignored")
		}
		if !f.failure(6) {
			t.Error("a failure above the last success must count")
		}
	})
	t.Run("OlderSuccessDoesNotReset", func(t *testing.T) {
		f := newFailureCounter(1)
		f.success(5)
		f.failure(6)
		f.success(3)
		if !f.failure(7) {
			t.Error("a success below the last one must not reset the count")
		}
	})
	t.Run("Unlimited", func(t *testing.T) {
		f := newFailureCounter(UnlimitedFailures)
		for id := CheckpointID(1); id < 1000; id++ {
			if f.failure(id) {
				t.Fatal("unlimited failures must never be terminal")
			}
		}
	})
}

func TestCountedReasons(t *testing.T) {
	plain := errors.New("boom")
	benign := fmt.Errorf("closing: %w", ErrNotReady)
	for _, tc := range []struct {
		r         AbortReason
		savepoint bool
		cause     error
		want      bool
	}{
		{AbortDeclined, false, plain, true},
		{AbortDeclined, false, benign, false},
		{AbortDeclined, true, plain, true},
		{AbortExpired, false, nil, true},
		{AbortExpired, true, nil, false},
		{AbortTriggerFailed, false, plain, true},
		{AbortTriggerFailed, true, plain, false},
		{AbortFinalizeFailed, false, plain, true},
		{AbortFinalizeFailed, false, fmt.Errorf("%w", ErrOutcomeUnknown), true},
		{AbortFinalizeFailed, true, plain, false},
		{AbortSubsumed, false, nil, false},
		{AbortParticipantLost, false, nil, false},
		{AbortShutdown, false, nil, false},
	} {
		if got := tc.r.counts(tc.savepoint, tc.cause); got != tc.want {
			t.Errorf("%v (savepoint %v, cause %v) counts = %v, want %v", tc.r, tc.savepoint, tc.cause, got, tc.want)
		}
	}
}

func TestSavepointNeedsLocation(t *testing.T) {
	d := newDrive(t, Config{Interval: time.Second}, Recovery{}, "a")
	if _, err := d.c.RequestSavepoint(t0, ""); !errors.Is(err, ErrInvalidLocation) {
		t.Errorf("err = %v, want ErrInvalidLocation", err)
	}
	if d.c.HasReady() {
		t.Errorf("a refused savepoint made decisions: %v", d.c.Ready())
	}
}
