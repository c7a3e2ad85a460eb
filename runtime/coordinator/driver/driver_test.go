package driver

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime/coordinator"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func start(t *testing.T, s checkpoint.Storage, clock Clock, cfg coordinator.Config, ps ...*participant) *Coordinator {
	t.Helper()
	c, err := Start(context.Background(), Options{Config: cfg, Storage: s, Clock: clock, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		p.coord = c
		if err := c.AddParticipant(p); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func committed(t *testing.T, s checkpoint.Storage) []string {
	t.Helper()
	names, err := checkpoint.List(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// stored returns the checkpoints s holds anything of, committed or not,
// but the coordinator's reserved name.
func stored(t *testing.T, s checkpoint.Storage) []string {
	t.Helper()
	names, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(names, func(n string) bool { return n == checkpoint.CoordinatorName })
}

// noDebris fails if s holds anything that no committed checkpoint's
// metadata names: checkpoint.Cleanup would remove it.
func noDebris(t *testing.T, s checkpoint.Storage) {
	t.Helper()
	removed, err := checkpoint.Cleanup(context.Background(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) > 0 {
		t.Errorf("files left behind that no retained checkpoint references: %v", removed)
	}
}

// The driver on a fake clock: periodic checkpoints complete, are committed
// to storage and restore to the state at their trigger; retention deletes
// the old one; an expired checkpoint's late acknowledgement is deleted; a
// savepoint lands at its location; and a restart continues the ids and
// keeps the retained checkpoint.
func TestDriverCheckpointsThroughStorage(t *testing.T) {
	s := checkpoint.NewMem()
	clock := &fakeClock{now: t0}
	cfg := coordinator.Config{Interval: 10 * time.Second, Timeout: 30 * time.Second, TolerableFailures: 5}
	a, b := newParticipant(t, "counter", 0, 2, 0), newParticipant(t, "counter", 1, 2, 0)
	ps := []*participant{a, b}
	release := make(chan struct{})
	b.delay = func(id coordinator.CheckpointID) (func(), error) {
		if id == 3 {
			return func() { <-release }, nil // b holds checkpoint 3 past its deadline
		}
		return nil, nil
	}
	c := start(t, s, clock, cfg, a, b)

	clock.Advance(10 * time.Second)
	waitFor(t, "notify-complete", a.completed, 1)
	waitFor(t, "notify-complete", b.completed, 1)
	if got := committed(t, s); !slices.Equal(got, []string{checkpoint.CheckpointName(1)}) {
		t.Fatalf("committed %v after checkpoint 1", got)
	}
	checkRestores(t, s, checkpoint.CheckpointName(1), ps)

	clock.Advance(10 * time.Second)
	waitFor(t, "notify-complete", a.completed, 2)
	checkRestores(t, s, checkpoint.CheckpointName(2), ps)

	// Checkpoint 3 expires waiting for b; b's acknowledgement comes late.
	clock.Advance(10 * time.Second)
	waitFor(t, "trigger", b.triggered, 3)
	clock.Advance(30 * time.Second)
	waitFor(t, "notify-aborted", a.aborted, 3)
	// The periodic trigger that came due meanwhile fires as the slot frees.
	waitFor(t, "notify-complete", a.completed, 4)
	close(release)

	rec, err := c.Savepoint(context.Background(), "before-upgrade")
	if err != nil {
		t.Fatalf("savepoint: %v (record %+v)", err, rec)
	}
	if !rec.Savepoint || rec.Status != coordinator.StatusCompleted {
		t.Fatalf("savepoint record %+v", rec)
	}
	checkRestores(t, s, "before-upgrade", ps)
	if _, err := c.Savepoint(context.Background(), "before-upgrade"); !errors.Is(err, ErrInvalidLocation) {
		t.Errorf("second savepoint to the same location: %v, want ErrInvalidLocation", err)
	}
	if _, err := c.Savepoint(context.Background(), checkpoint.CheckpointName(99)); !errors.Is(err, ErrInvalidLocation) {
		t.Errorf("savepoint to a checkpoint's name: %v, want ErrInvalidLocation", err)
	}

	for _, p := range ps {
		p.halt()
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := c.Ack(Trigger{ID: 9}, a.id, Acknowledgement{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Ack after Close: %v, want ErrClosed", err)
	}

	// Retention kept checkpoint 4 only; the savepoint stays; nothing else.
	if got, want := committed(t, s), []string{"before-upgrade", checkpoint.CheckpointName(4)}; !slices.Equal(got, want) {
		t.Errorf("committed %v, want %v", got, want)
	}
	noDebris(t, s)
	st := c.Stats()
	if n := st.Counts(); n.Completed != 4 || n.Failed != 1 || n.InProgress() != 0 {
		t.Errorf("counts %+v", n)
	}
	if lf, ok := st.LastFailed(); !ok || lf.ID != 3 || !errors.Is(lf.Err, coordinator.ErrExpired) {
		t.Errorf("last failed %+v", lf)
	}

	// A restart recovers the retained checkpoint and continues the ids at
	// the durable counter: the first run reserved ids 1..100 (the
	// savepoint took 5), so the next is 101.
	counter, err := ReadCounter(context.Background(), s)
	if err != nil || counter != 1+coordinator.DefaultIDReservation {
		t.Fatalf("counter %d, %v; want %d", counter, err, 1+coordinator.DefaultIDReservation)
	}
	a2, b2 := newParticipant(t, "counter", 0, 2, 0), newParticipant(t, "counter", 1, 2, 0)
	c2 := start(t, s, clock, cfg, a2, b2)
	if got := c2.Retained(); len(got) != 1 || got[0].ID != 4 {
		t.Fatalf("retained after restart: %+v", got)
	}
	clock.Advance(10 * time.Second)
	waitFor(t, "notify-complete", a2.completed, counter)
	a2.halt()
	b2.halt()
	if err := c2.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkRestores(t, s, checkpoint.CheckpointName(uint64(counter)), []*participant{a2, b2})
	if got, want := committed(t, s), []string{"before-upgrade", checkpoint.CheckpointName(uint64(counter))}; !slices.Equal(got, want) {
		t.Errorf("committed after restart %v, want %v", got, want)
	}
	noDebris(t, s)
}

// A job whose checkpoints keep failing is failed by the coordinator.
func TestDriverFailsJobAfterTooManyFailures(t *testing.T) {
	s := checkpoint.NewMem()
	clock := &fakeClock{now: t0}
	p := newParticipant(t, "counter", 0, 1, 0)
	p.delay = func(coordinator.CheckpointID) (func(), error) { return nil, errors.New("disk full") }
	c := start(t, s, clock, coordinator.Config{Interval: time.Second, TolerableFailures: 1}, p)
	for id := coordinator.CheckpointID(1); id <= 2; id++ {
		clock.Advance(time.Second)
		waitFor(t, "notify-aborted", p.aborted, id)
	}
	select {
	case <-c.Failed():
	case <-time.After(20 * time.Second):
		t.Fatal("the job did not fail")
	}
	if err := c.Err(); !errors.Is(err, coordinator.ErrTooManyFailures) || !errors.Is(err, coordinator.ErrDeclined) {
		t.Errorf("Err() = %v", err)
	}
	if _, err := c.Savepoint(context.Background(), "sp"); !errors.Is(err, coordinator.ErrShutdown) {
		t.Errorf("savepoint after failure: %v, want ErrShutdown", err)
	}
	p.halt()
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := committed(t, s); len(got) != 0 {
		t.Errorf("committed %v", got)
	}
	noDebris(t, s)
}

func TestStartValidates(t *testing.T) {
	if _, err := Start(context.Background(), Options{Config: coordinator.Config{Interval: time.Second}}); err == nil {
		t.Error("Start without storage succeeded")
	}
	if _, err := Start(context.Background(), Options{Storage: checkpoint.NewMem()}); !errors.Is(err, coordinator.ErrInvalidConfig) {
		t.Errorf("Start without interval: %v, want ErrInvalidConfig", err)
	}
}
