package driver

import (
	"context"
	"fmt"

	"github.com/stategen/stategen/runtime/coordinator"
)

// request is an on-demand checkpoint request the Core has not triggered
// yet.
type request struct {
	triggered chan coordinator.CheckpointID // gets the checkpoint's id
	refused   chan error                    // or why there is none
	result    chan outcome                  // then the checkpoint's outcome
}

// Triggered is an on-demand checkpoint that has been triggered (see
// Coordinator.TriggerCheckpoint).
type Triggered struct {
	// ID is the checkpoint's id.
	ID     coordinator.CheckpointID
	result chan outcome
	done   chan struct{} // the Coordinator's
	out    *outcome
}

// Wait waits for the checkpoint's outcome: its Record and nil once it
// completed, or its Record and the *coordinator.AbortError that says why
// it was aborted — errors.Is(err, coordinator.ErrSubsumed) means a newer
// checkpoint completed first, which holds the state too. It fails with
// ctx's error if ctx ends first (the checkpoint goes on), and with
// ErrClosed if the Coordinator stopped without reporting it. Wait may be
// called again after an outcome, which it returns again.
func (t *Triggered) Wait(ctx context.Context) (coordinator.Record, error) {
	if t.out != nil {
		return t.out.record, t.out.err
	}
	select {
	case o := <-t.result:
		t.out = &o
		return o.record, o.err
	case <-ctx.Done():
		return coordinator.Record{}, ctx.Err()
	case <-t.done:
		select {
		case o := <-t.result:
			t.out = &o
			return o.record, o.err
		default:
			return coordinator.Record{}, ErrClosed
		}
	}
}

// TriggerCheckpoint takes a checkpoint now, outside the periodic schedule —
// at the end of a job, say, to checkpoint every instance's final state
// (see the package doc, "Ending a job"). It is a regular checkpoint:
// retained, notified, subject to subsumption, its failure counted. It is
// not held back by Config.MinPause, but it is by Config.MaxConcurrent: while
// that many checkpoints are pending, the request waits and is triggered
// as soon as one ends, before the periodic trigger.
//
// TriggerCheckpoint returns once the checkpoint is triggered, with its id;
// Triggered.Wait waits for its outcome. It fails with ErrClosed after
// Close; with an error wrapping coordinator.ErrShutdown (and the job's
// failure) if checkpoints failed the job; with
// coordinator.ErrNoParticipants if no instance has joined (with
// Options.Expected there always are participants); with
// coordinator.ErrNoIDs if the checkpoint-id reservation it waited for
// failed; and with ctx's error if ctx ends before the trigger (the request
// stays queued, and its checkpoint is taken later).
func (c *Coordinator) TriggerCheckpoint(ctx context.Context) (*Triggered, error) {
	r := &request{
		triggered: make(chan coordinator.CheckpointID, 1),
		refused:   make(chan error, 1),
		result:    make(chan outcome, 1),
	}
	if err := c.do(func() {
		id, err := c.core.RequestCheckpoint(c.clock.Now())
		if err != nil {
			r.refused <- err
			return
		}
		c.requests[id] = r
	}); err != nil {
		return nil, err
	}
	select {
	case id := <-r.triggered:
		return &Triggered{ID: id, result: r.result, done: c.done}, nil
	case err := <-r.refused:
		return nil, err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.done:
		select {
		case id := <-r.triggered:
			return &Triggered{ID: id, result: r.result, done: c.done}, nil
		case err := <-r.refused:
			return nil, err
		default:
			return nil, ErrClosed
		}
	}
}

// refuseRequest answers a request the Core dropped.
func (c *Coordinator) refuseRequest(d coordinator.Refused) {
	r := c.requests[d.Request]
	if r == nil {
		return
	}
	delete(c.requests, d.Request)
	err := d.Reason.Err()
	switch {
	case d.Reason == coordinator.RefusedShutdown && c.closing:
		err = ErrClosed
	case d.Reason == coordinator.RefusedShutdown && c.core.Err() != nil:
		err = fmt.Errorf("%w: %w", err, c.core.Err())
	case d.Reason == coordinator.RefusedNoIDs && c.reserveErr != nil:
		err = fmt.Errorf("%w: %w", err, c.reserveErr)
	}
	r.refused <- fmt.Errorf("driver: checkpoint request refused: %w", err)
}

// Finished is closed when a final checkpoint completes: one that every
// participant took part in after it had finished (Instance.Finish), so
// that it holds every instance's final state. Stats().LastCompleted() is
// its record. The job may then close its instances and the Coordinator.
func (c *Coordinator) Finished() <-chan struct{} { return c.finished }
