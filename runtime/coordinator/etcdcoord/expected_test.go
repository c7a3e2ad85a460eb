package etcdcoord

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stategen/stategen/runtime/coordinator"
	"github.com/stategen/stategen/runtime/coordinator/driver"
)

// notFailed fails the test if checkpointing failed the job.
func notFailed(t *testing.T, c *Coordinator) {
	t.Helper()
	select {
	case <-c.Failed():
		t.Fatalf("the job failed: %v", c.Err())
	default:
	}
}

// abortedNotReady waits for w's notification of checkpoint id and checks
// that it was aborted, declined as not ready on behalf of participant by.
func abortedNotReady(t *testing.T, w *worker, id coordinator.CheckpointID, by coordinator.ParticipantID) {
	t.Helper()
	waitUntil(t, "the end of a checkpoint", func() bool { _, ok := w.note(id); return ok })
	n, _ := w.note(id)
	var ae *coordinator.AbortError
	if !errors.As(n.Err, &ae) || ae.Reason != coordinator.AbortDeclined || !errors.Is(n.Err, coordinator.ErrNotReady) || ae.Participant != by {
		t.Fatalf("worker %d: checkpoint %d ended with %v, want a not-ready decline by %s", w.index, id, n.Err, by)
	}
}

// With three instances expected and two registered, every trigger is
// declined as not ready on the third's behalf: nothing completes, nothing
// counts as a failure (TolerableFailures is 0, so one would fail the
// job). Once the third joins, checkpoints complete with all three and
// restore.
func TestExpectedWaitsForEveryInstance(t *testing.T) {
	job := testJob(t)
	s := newDir(t)
	c := startCoordinator(t, client(t), Options{
		Job: job, Storage: s, Expected: map[string]int{"counter": 3},
		Config: coordinator.Config{Interval: 20 * time.Millisecond, Timeout: 20 * time.Second, Retained: 100, TolerableFailures: 0},
	})
	awaitLeader(t, c)
	ws := []*worker{newWorker(t, job, s, 0, 3), newWorker(t, job, s, 1, 3)}
	// Triggers both received were sent while both were registered: only
	// counter/2 was missing.
	both := func() []coordinator.CheckpointID {
		var ids []coordinator.CheckpointID
		for _, a := range ws[0].seenTriggers() {
			if slices.ContainsFunc(ws[1].seenTriggers(), func(b seen) bool { return b.id == a.id }) {
				ids = append(ids, a.id)
			}
		}
		return ids
	}
	waitUntil(t, "five triggers to both", func() bool { return len(both()) >= 5 })
	for _, w := range ws {
		for _, id := range both()[:5] {
			abortedNotReady(t, w, id, "counter/2")
		}
	}
	if got := completedByAll(ws); len(got) != 0 {
		t.Fatalf("checkpoints %v completed without counter/2", got)
	}
	idx, err := ReadIndex(context.Background(), client(t), job)
	if err != nil {
		t.Fatal(err)
	}
	if len(idx) != 0 {
		t.Fatalf("the completed index lists %v without counter/2", idx)
	}
	notFailed(t, c)

	ws = append(ws, newWorker(t, job, s, 2, 3))
	waitUntil(t, "a checkpoint completed by all three", func() bool { return len(completedByAll(ws)) >= 2 })
	notFailed(t, c)
	for _, id := range completedByAll(ws) {
		checkRestores(t, s, id, ws, 3)
	}
}

// An expected instance whose lease ends: the checkpoint pending on it
// aborts (participant lost); while it is gone every checkpoint is
// declined as not ready — none completes with two — and none counts as a
// failure; when it joins again, checkpoints complete with all three.
func TestExpectedInstanceLostAndBack(t *testing.T) {
	job := testJob(t)
	s := newDir(t)
	obs := client(t)
	c := startCoordinator(t, client(t), Options{
		Job: job, Storage: s, Expected: map[string]int{"counter": 3},
		Config: coordinator.Config{Interval: 20 * time.Millisecond, Timeout: 20 * time.Second, Retained: 100, TolerableFailures: 0},
	})
	awaitLeader(t, c)
	ws := startWorkers(t, job, s, 3)
	waitUntil(t, "a checkpoint completed", func() bool { return len(completedByAll(ws)) >= 1 })

	// From the first held trigger on, counter/2 acknowledges nothing: no
	// checkpoint from held.ID on may complete until a new counter/2 joins.
	ws[2].setHold(func(driver.Trigger) bool { return true })
	waitUntil(t, "a held trigger", func() bool { return len(ws[2].heldTriggers()) > 0 })
	held := ws[2].heldTriggers()[0]
	old := ws[2].inst.l.lease()
	if _, err := obs.Revoke(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	for _, w := range ws[:2] {
		waitUntil(t, "the abort of the checkpoint that waited for the lost instance", func() bool { _, ok := w.note(held.ID); return ok })
		n, _ := w.note(held.ID)
		var ae *coordinator.AbortError
		if !errors.As(n.Err, &ae) || ae.Reason != coordinator.AbortParticipantLost || ae.Participant != "counter/2" {
			t.Errorf("worker %d: checkpoint %d ended with %v, want participant-lost of counter/2", w.index, held.ID, n.Err)
		}
	}
	// The instance registers again by itself; closing it makes it leave
	// for good.
	ws[2].close()
	before := len(ws[0].seenTriggers())
	waitUntil(t, "four more triggers", func() bool { return len(ws[0].seenTriggers()) >= before+4 })
	// The last of them were triggered after counter/2 left.
	for _, tr := range ws[0].seenTriggers()[before+2 : before+4] {
		abortedNotReady(t, ws[0], tr.id, "counter/2")
	}
	notFailed(t, c)

	back := newWorker(t, job, s, 2, 3)
	ws = []*worker{ws[0], ws[1], back}
	waitUntil(t, "a checkpoint completed with the returned instance", func() bool { return len(completedByAll(ws)) >= 1 })
	first := completedByAll(ws)[0]
	for _, w := range ws[:2] {
		for _, id := range w.completed() {
			if id >= held.ID && id < first {
				t.Errorf("worker %d: checkpoint %d completed while counter/2 acknowledged nothing", w.index, id)
			}
		}
	}
	notFailed(t, c)
	checkRestores(t, s, first, ws, 3)
}

// A registration that is not expected — an index beyond the parallelism,
// an unknown operator — never takes part: it receives no trigger, and
// checkpoints complete with the expected instances and restore.
func TestUnexpectedRegistrationIgnored(t *testing.T) {
	job := testJob(t)
	s := newDir(t)
	c := startCoordinator(t, client(t), Options{
		Job: job, Storage: s, Expected: map[string]int{"counter": 2},
		Config: coordinator.Config{Interval: 20 * time.Millisecond, Timeout: 20 * time.Second, Retained: 100, TolerableFailures: 0},
	})
	awaitLeader(t, c)
	rogue := newWorker(t, job, s, 2, 3)
	ws := startWorkers(t, job, s, 2)
	waitUntil(t, "three checkpoints completed", func() bool { return len(completedByAll(ws)) >= 3 })
	if got := rogue.seenTriggers(); len(got) != 0 {
		t.Fatalf("the unexpected instance counter/2 received triggers %v", got)
	}
	if got := rogue.notifications(); len(got) != 0 {
		t.Fatalf("the unexpected instance counter/2 received notifications %v", got)
	}
	notFailed(t, c)
	checkRestores(t, s, completedByAll(ws)[2], ws, 2)
}

func TestExpectedValidated(t *testing.T) {
	job := testJob(t)
	cli := client(t)
	for _, tc := range []struct {
		exp  map[string]int
		want string
	}{
		{map[string]int{"counter": 0}, `operator "counter" has parallelism 0`},
		{map[string]int{"counter": -2}, `operator "counter" has parallelism -2`},
		{map[string]int{"": 1}, `operator "": checkpoint: invalid name: "" is empty`},
		{map[string]int{"a/b": 1}, `operator "a/b"`},
	} {
		_, err := StartCoordinator(context.Background(), cli, Options{Job: job, Storage: newDir(t), Expected: tc.exp, Config: coordinator.Config{Interval: time.Second}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Expected %v: got %v, want an error mentioning %q", tc.exp, err, tc.want)
		}
	}
}
