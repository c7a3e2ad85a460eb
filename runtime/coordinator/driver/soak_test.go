package driver

import (
	"context"
	"errors"
	"flag"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime/coordinator"
)

var soakCheckpoints = flag.Int("soak", 30, "checkpoints the real-clock soak test waits for (issue 8 asks 200 in the long run)")

// TestSoakRealClock runs the driver on the real clock with four
// participants writing continuously, random acknowledgement delays,
// declines and timeouts, until enough checkpoints completed. Afterwards:
// every committed checkpoint restores to exactly the state at its trigger,
// ids strictly increased, retention held, and no file is left that no
// retained checkpoint references. Timing only decides which checkpoints
// fail, never whether the assertions hold.
func TestSoakRealClock(t *testing.T) {
	want := *soakCheckpoints
	if testing.Short() {
		want = 10
	}
	s := checkpoint.NewMem()
	cfg := coordinator.Config{
		Interval:          10 * time.Millisecond,
		Timeout:           80 * time.Millisecond,
		MaxConcurrent:     2,
		Retained:          2,
		TolerableFailures: coordinator.UnlimitedFailures,
	}
	var ps []*participant
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range 4 {
		p := newParticipant(t, "counter", i, 4, time.Millisecond)
		p.delay = func(id coordinator.CheckpointID) (func(), error) {
			mu.Lock()
			r := rng.IntN(100)
			mu.Unlock()
			switch {
			case r < 3:
				return nil, errors.New("injected failure")
			case r < 6:
				return func() { <-time.After(120 * time.Millisecond) }, nil // past the timeout: late
			default:
				return func() { <-time.After(time.Duration(r%5) * time.Millisecond) }, nil
			}
		}
		ps = append(ps, p)
	}
	c := start(t, s, SystemClock, cfg, ps...)

	deadline := time.After(60 * time.Second)
	for c.Stats().Counts().Completed < int64(want) {
		select {
		case <-ps[0].completed:
		case <-ps[0].aborted:
		case <-deadline:
			t.Fatalf("only %+v after 60s", c.Stats().Counts())
		}
	}
	if _, err := c.Savepoint(context.Background(), "soak-savepoint"); err != nil {
		// A savepoint may fail like any checkpoint here (a declined or late
		// participant); it must fail cleanly.
		var ae *coordinator.AbortError
		if !errors.As(err, &ae) {
			t.Fatalf("savepoint: %v", err)
		}
	}
	for _, p := range ps {
		p.halt()
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	counts := c.Stats().Counts()
	if counts.InProgress() != 0 {
		t.Errorf("checkpoints still in progress after Close: %+v", counts)
	}
	names := committed(t, s)
	var checkpoints int
	for _, name := range names {
		if _, ok := checkpoint.ParseCheckpointName(name); ok {
			checkpoints++
		}
		checkRestores(t, s, name, ps)
	}
	if checkpoints == 0 || checkpoints > cfg.Retained {
		t.Errorf("%d checkpoints committed, want 1..%d", checkpoints, cfg.Retained)
	}
	noDebris(t, s)

	// Ids strictly increase in the order participants were triggered.
	var last coordinator.CheckpointID
	for len(ps[0].triggered) > 0 {
		id := <-ps[0].triggered
		if id <= last {
			t.Fatalf("trigger %d after %d", id, last)
		}
		last = id
	}
	t.Logf("%+v; committed %v", counts, names)
}
