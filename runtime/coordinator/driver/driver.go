package driver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime/coordinator"
)

// Errors of the driver.
var (
	// ErrClosed reports a call on a closed Coordinator. It also matches
	// coordinator.ErrShutdown: every refusal of a stopped coordinator does.
	ErrClosed error = &closedError{}
	// ErrInvalidLocation reports a savepoint location that is not a valid
	// checkpoint name, looks like a checkpoint's name, or is already in
	// use.
	ErrInvalidLocation = errors.New("driver: invalid savepoint location")
)

type closedError struct{}

func (*closedError) Error() string { return "driver: coordinator closed" }
func (*closedError) Unwrap() error { return coordinator.ErrShutdown }

// DefaultIOTimeout bounds each storage operation of the driver unless
// Options.IOTimeout says otherwise.
const DefaultIOTimeout = time.Minute

// Participant is one operator instance taking part in checkpoints. The
// Coordinator calls its methods on its own goroutine: they must not block
// (hand the work to the operator's goroutine, e.g. through a mailbox). An
// operator with a runtime.Store need not implement it: Coordinator.Join
// returns an Instance that does. Implement it for other participants —
// one in another process, say — and answer triggers with Coordinator.Ack
// and Coordinator.Decline.
type Participant interface {
	// ID names the participant, uniquely within the job.
	ID() coordinator.ParticipantID
	// Operator names the operator the participant is an instance of (a
	// valid checkpoint name, see checkpoint.ValidateName). The checkpoint
	// metadata groups instances by operator.
	Operator() string
	// Trigger asks for a snapshot: write it as one object of checkpoint
	// t.Checkpoint in t.Storage (an object name unique within the
	// checkpoint, e.g. the operator and instance index), then report with
	// Coordinator.Ack, or Coordinator.Decline if it cannot.
	Trigger(t Trigger)
	// NotifyComplete says a checkpoint (or savepoint) the participant took
	// part in completed: side effects up to it may be committed. For
	// checkpoints a higher id implies the lower ones; a savepoint implies
	// nothing (see Completion).
	NotifyComplete(c Completion)
	// NotifyAborted says checkpoint id was aborted, and why: stop working
	// on it.
	NotifyAborted(id coordinator.CheckpointID, err error)
}

// Completion describes a completed checkpoint or savepoint to a
// participant.
type Completion struct {
	// ID is the checkpoint's id.
	ID coordinator.CheckpointID
	// Savepoint reports a savepoint: it is not in the job's recovery
	// lineage (a crash restores the latest checkpoint, which may be older),
	// so commit side effects on it only when the job stops on it.
	Savepoint bool
	// Final reports that every participant had finished (Instance.Finish)
	// when it snapshotted: the checkpoint holds the job's final state, and
	// the participant may stop.
	Final bool
}

// Trigger is what a participant is asked to snapshot.
type Trigger struct {
	// ID is the checkpoint's id.
	ID coordinator.CheckpointID
	// Options says whether it is a savepoint.
	Options coordinator.Options
	// At is the checkpoint's timestamp; Deadline when it expires.
	At, Deadline time.Time
	// Storage and Checkpoint are where the participant writes its object.
	Storage checkpoint.Storage
	// Checkpoint is the checkpoint's name in Storage.
	Checkpoint string
}

// Options configure a Coordinator.
type Options struct {
	// Config configures the coordinator's rules (see coordinator.Config).
	// A zero Config.IDReservation means coordinator.DefaultIDReservation:
	// the driver always keeps a durable id counter in Storage.
	Config coordinator.Config
	// Storage holds checkpoints and savepoints. Required.
	Storage checkpoint.Storage
	// Clock is the source of time; nil means SystemClock.
	Clock Clock
	// Logger receives a record for every completed and failed checkpoint;
	// nil means slog.Default().
	Logger *slog.Logger
	// IOTimeout bounds each storage operation of the driver (a metadata
	// commit, a deletion); zero means DefaultIOTimeout.
	IOTimeout time.Duration
	// SkipCleanup leaves the debris of crashed writers in Storage at Start
	// (see checkpoint.Cleanup); by default Start removes it.
	SkipCleanup bool
	// Counter is the durable checkpoint-id counter; nil means objects in
	// Storage under checkpoint.CoordinatorName (see IDCounter).
	Counter IDCounter
	// Completed is the index of completed checkpoints; nil means Storage
	// is its own index: every committed checkpoint is completed (see
	// CompletedStore).
	Completed CompletedStore
	// Expected is the job graph: each operator's parallelism, as Flink's
	// JobManager knows it. Operator "op" with parallelism p has the
	// instances "op/0" … "op/<p-1>" (InstanceOptions Operator and Index),
	// and every checkpoint includes all of them, joined or not: while one
	// is missing — it has not joined yet, or it was closed — each
	// checkpoint is declined on its behalf as not ready
	// (coordinator.ErrNotReady: aborted, not counted as a failure, counted
	// in Counts.NotReady). So no checkpoint completes without every
	// instance, and the triggers that fire while the instances join one by
	// one complete nothing. Join refuses an instance that is not expected
	// (ErrUnexpectedInstance) or joined already (ErrDuplicateInstance).
	//
	// Nil Expected makes the participants exactly the instances joined
	// now. The Core still completes no checkpoint that lacks key groups
	// (see the coordinator package doc, "Coverage"), but each checkpoint
	// triggered while an instance is missing is written and then aborted;
	// set Expected for every keyed job.
	Expected map[string]int
	// MeterProvider receives the job's checkpoint metrics (package
	// runtime/coordinator/metrics: checkpoints started, completed,
	// failed, aborted and in progress, durations, sizes, phases), and is
	// the default InstanceOptions.MeterProvider of the instances that
	// Join. Nil records nothing and costs nothing. Start fails if the
	// provider cannot create the instruments.
	MeterProvider metric.MeterProvider
}

// Coordinator runs a coordinator.Core: it owns the goroutine that feeds the
// Core its inputs one at a time, the timer that ticks it, and the storage
// I/O its decisions call for (metadata commits, id-counter writes and
// deletions run on their own goroutines and report back as inputs). It is
// safe for concurrent use.
type Coordinator struct {
	storage   checkpoint.Storage
	counter   IDCounter
	completed CompletedStore // nil: the storage is the index
	clock     Clock
	log       *slog.Logger
	ioTimeout time.Duration

	events chan func()
	wake   chan struct{}
	done   chan struct{}
	failed chan struct{}

	// Owned by the loop goroutine.
	core         *coordinator.Core
	participants map[coordinator.ParticipantID]Participant
	savepoints   map[coordinator.CheckpointID]*savepoint
	parked       []*savepoint // savepoint requests waiting for checkpoint ids
	timer        Timer
	armed        time.Time
	inflight     int
	closing      bool

	expected   map[coordinator.ParticipantID]*slot // with Options.Expected: every expected instance
	requests   map[coordinator.RequestID]*request  // on-demand requests not triggered yet
	waiters    map[coordinator.CheckpointID]chan outcome
	later      []func() // inputs to feed the Core once the current decisions are executed
	reserveErr error    // why the last id reservation failed

	metrics       *coordMetrics        // nil without Options.MeterProvider
	meterProvider metric.MeterProvider // for the instances that Join

	mu       sync.Mutex
	stats    *coordinator.Stats
	err      error
	retained []coordinator.Checkpoint
	finished chan struct{} // closed when a final checkpoint completes
	final    bool
}

type savepoint struct {
	location string
	result   chan outcome
}

// outcome is how a checkpoint or savepoint somebody waits for ended.
type outcome struct {
	record coordinator.Record
	err    error
}

// handle is what the Core carries for the driver in Payload.Handle.
type handle struct {
	operator string
	snapshot checkpoint.InstanceSnapshot
}

// Start recovers the coordinator's state from opts.Storage (see Recover;
// with opts.Completed, the retained checkpoints are those the index lists),
// removes crash debris (unless opts.SkipCleanup), reserves a first batch of
// checkpoint ids in the durable counter, and starts the Coordinator. It
// fails if the storage or the index cannot be read or the counter written.
// Close stops it.
func Start(ctx context.Context, opts Options) (*Coordinator, error) {
	if opts.Storage == nil {
		return nil, errors.New("driver: Options.Storage is required")
	}
	if opts.IOTimeout < 0 {
		return nil, fmt.Errorf("driver: Options.IOTimeout is %v; it must not be negative", opts.IOTimeout)
	}
	c := &Coordinator{
		storage:      opts.Storage,
		counter:      opts.Counter,
		completed:    opts.Completed,
		clock:        cmp.Or(opts.Clock, SystemClock),
		log:          cmp.Or(opts.Logger, slog.Default()),
		ioTimeout:    cmp.Or(opts.IOTimeout, DefaultIOTimeout),
		events:       make(chan func()),
		wake:         make(chan struct{}, 1),
		done:         make(chan struct{}),
		failed:       make(chan struct{}),
		participants: map[coordinator.ParticipantID]Participant{},
		savepoints:   map[coordinator.CheckpointID]*savepoint{},
		requests:     map[coordinator.RequestID]*request{},
		waiters:      map[coordinator.CheckpointID]chan outcome{},
		finished:     make(chan struct{}),
	}
	expected, err := ExpectedInstances(opts.Expected)
	if err != nil {
		return nil, err
	}
	if c.metrics, err = newCoordMetrics(opts.MeterProvider); err != nil {
		return nil, err
	}
	c.meterProvider = opts.MeterProvider
	if opts.Config.IDReservation == 0 {
		opts.Config.IDReservation = coordinator.DefaultIDReservation
	}
	cfg, err := opts.Config.Normalize()
	if err != nil {
		return nil, err
	}
	if c.counter == nil {
		c.counter = storageCounter{opts.Storage}
	}
	var rec coordinator.Recovery
	var unlisted, incomplete []string
	if c.completed == nil {
		rec, incomplete, err = recoverFrom(ctx, opts.Storage, c.counter)
	} else {
		rec, unlisted, incomplete, err = recoverIndexed(ctx, opts.Storage, c.counter, c.completed)
	}
	if err != nil {
		return nil, err
	}
	if len(incomplete) > 0 {
		c.log.Warn("committed checkpoints that lack key groups cannot be restored; they are not retained and are left in the storage",
			"checkpoints", incomplete)
	}
	if !opts.SkipCleanup {
		for _, name := range unlisted {
			// Committed, but never completed: the index does not list it.
			if err := checkpoint.Delete(ctx, opts.Storage, name); err != nil {
				c.log.Warn("checkpoint storage cleanup incomplete", "err", err)
				continue
			}
			c.log.Info("checkpoint not in the completed index deleted", "name", name)
		}
		removed, err := checkpoint.Cleanup(ctx, opts.Storage, nil)
		if len(removed) > 0 {
			c.log.Info("checkpoint storage cleaned up", "removed", removed)
		}
		if err != nil {
			c.log.Warn("checkpoint storage cleanup incomplete", "err", err)
		}
		// Cleanup leaves the coordinator's own objects alone; the writes
		// of a counter that crashed mid-write are this coordinator's to
		// remove, before it writes the counter itself.
		if err := opts.Storage.RemoveIncomplete(ctx, checkpoint.CoordinatorName); err != nil {
			c.log.Warn("coordinator objects cleanup incomplete", "err", err)
		}
	}
	rec.IDLimit = min(rec.NextID+coordinator.CheckpointID(cfg.IDReservation), coordinator.MaxID)
	if err := c.counter.Reserve(ctx, rec.IDLimit); err != nil {
		return nil, err
	}
	core, err := coordinator.New(cfg, c.clock.Now(), rec)
	if err != nil {
		return nil, err
	}
	c.core = core
	c.stats = coordinator.NewStats(cfg.StatsHistory)
	c.retained = core.Retained()
	if expected != nil {
		c.expected = map[coordinator.ParticipantID]*slot{}
		for _, e := range expected {
			sl := &slot{c: c, inst: e}
			if err := core.AddParticipant(e.ID()); err != nil {
				return nil, err
			}
			c.expected[e.ID()] = sl
			c.participants[e.ID()] = sl
		}
	}
	go c.loop()
	return c, nil
}

// do runs fn on the loop goroutine.
func (c *Coordinator) do(fn func()) error {
	select {
	case c.events <- fn:
		return nil
	case <-c.done:
		return ErrClosed
	}
}

func (c *Coordinator) loop() {
	defer close(c.done)
	c.step()
	for {
		select {
		case fn := <-c.events:
			fn()
		case <-c.wake:
			c.armed = time.Time{}
			c.core.Tick(c.clock.Now())
		}
		c.step()
		if c.closing && c.inflight == 0 {
			if c.timer != nil {
				c.timer.Stop()
			}
			return
		}
	}
}

// step executes the Core's decisions, then the inputs they called for
// (declines on behalf of missing instances), until there are none, and
// rearms the timer.
func (c *Coordinator) step() {
	c.execute(c.core.Ready())
	for len(c.later) > 0 {
		later := c.later
		c.later = nil
		for _, fn := range later {
			fn()
		}
		c.execute(c.core.Ready())
	}
	c.rearm()
}

// rearm keeps one timer set for the Core's next deadline.
func (c *Coordinator) rearm() {
	at, ok := c.core.NextDeadline()
	if ok && at.Equal(c.armed) {
		return
	}
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	c.armed = at
	if !ok {
		return
	}
	c.timer = c.clock.AfterFunc(max(at.Sub(c.clock.Now()), 0), c.wakeUp)
	// A timer counts its duration from when AfterFunc runs, which may be
	// after the Now it was computed from: if the deadline passed in
	// between, the timer fires late by as much (with a test clock that
	// jumps, by the jump). Wake the loop now instead.
	if !c.clock.Now().Before(at) {
		c.wakeUp()
	}
}

// wakeUp makes the loop tick the Core, unless a tick is pending already.
func (c *Coordinator) wakeUp() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// spawn runs storage I/O on its own goroutine; its result comes back to the
// loop as an input. The loop does not exit while I/O is in flight.
func (c *Coordinator) spawn(work func(ctx context.Context) func()) {
	c.inflight++
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.ioTimeout)
		then := work(ctx)
		cancel()
		c.events <- func() {
			c.inflight--
			then()
		}
	}()
}

// name returns the storage name of checkpoint id.
func (c *Coordinator) name(id coordinator.CheckpointID) string {
	if sp, ok := c.savepoints[id]; ok {
		return sp.location
	}
	return checkpoint.CheckpointName(uint64(id))
}

func (c *Coordinator) execute(ds []coordinator.Decision) {
	c.mu.Lock()
	for _, d := range ds {
		c.stats.Observe(d)
	}
	c.mu.Unlock()
	c.metrics.observe(ds)
	for _, d := range ds {
		switch d := d.(type) {
		case coordinator.Trigger:
			t := Trigger{ID: d.ID, Options: d.Options, At: d.At, Deadline: d.Deadline, Storage: c.storage, Checkpoint: c.name(d.ID)}
			if r := c.requests[d.Request]; r != nil {
				delete(c.requests, d.Request)
				c.waiters[d.ID] = r.result
				r.triggered <- d.ID
			}
			for _, id := range d.Participants {
				c.participants[id].Trigger(t)
			}
		case coordinator.Finalize:
			cp, name := d.Checkpoint, c.name(d.Checkpoint.ID)
			c.spawn(func(ctx context.Context) func() {
				err := c.commit(ctx, name, cp)
				if err == nil && c.completed != nil && !cp.Options.Savepoint {
					if err = c.completed.Add(ctx, cp.ID); err != nil {
						err = fmt.Errorf("driver: checkpoint %d committed but not listed as completed: %w", cp.ID, err)
					}
				}
				return func() {
					if err := c.core.StoreResult(c.clock.Now(), cp.ID, err); err != nil {
						c.log.Error("checkpoint store result rejected", "id", cp.ID, "err", err)
					}
				}
			})
		case coordinator.Discard:
			c.discard(d)
		case coordinator.NotifyComplete:
			n := Completion{ID: d.ID, Savepoint: d.Savepoint, Final: d.Final}
			for _, id := range d.Participants {
				if p, ok := c.participants[id]; ok {
					p.NotifyComplete(n)
				}
			}
			if d.Final && !d.Savepoint {
				c.mu.Lock()
				if !c.final {
					c.final = true
					close(c.finished)
				}
				c.mu.Unlock()
			}
		case coordinator.NotifyAborted:
			for _, id := range d.Participants {
				if p, ok := c.participants[id]; ok {
					p.NotifyAborted(d.ID, d.Err)
				}
			}
		case coordinator.Reserve:
			limit := d.Limit
			c.spawn(func(ctx context.Context) func() {
				err := c.counter.Reserve(ctx, limit)
				return func() {
					if err != nil {
						c.log.Warn("checkpoint ids not reserved", "limit", limit, "err", err)
					}
					if rerr := c.core.ReserveResult(c.clock.Now(), limit, err); rerr != nil {
						c.log.Error("checkpoint id reservation result rejected", "limit", limit, "err", rerr)
					}
					parked := c.parked
					c.parked = nil
					for _, sp := range parked {
						if err != nil {
							sp.result <- outcome{err: fmt.Errorf("%w: %w", coordinator.ErrNoIDs, err)}
							continue
						}
						c.requestSavepoint(sp)
					}
					if err != nil {
						c.reserveErr = err
					}
				}
			})
		case coordinator.Refused:
			if d.Request != 0 {
				c.refuseRequest(d)
				break
			}
			c.log.Debug("checkpoint trigger refused", "reason", d.Reason.String(), "retryAt", d.RetryAt)
		case coordinator.Fail:
			c.log.Error("checkpointing failed the job", "err", d.Err)
			c.mu.Lock()
			c.err = d.Err
			c.mu.Unlock()
			close(c.failed)
		case coordinator.Report:
			c.report(d.Record)
		case coordinator.Schedule:
			// rearm follows the Core's NextDeadline after every step.
		}
	}
	c.mu.Lock()
	c.retained = c.core.Retained()
	c.mu.Unlock()
}

// commit writes checkpoint cp's metadata as checkpoint name.
func (c *Coordinator) commit(ctx context.Context, name string, cp coordinator.Checkpoint) error {
	byOp := map[string][]checkpoint.InstanceSnapshot{}
	for _, ps := range cp.Participants {
		h, ok := ps.Payload.Handle.(handle)
		if !ok {
			return fmt.Errorf("driver: participant %q acknowledged without a snapshot", ps.Participant)
		}
		byOp[h.operator] = append(byOp[h.operator], h.snapshot)
	}
	kind := "checkpoint"
	if cp.Options.Savepoint {
		kind = "savepoint"
	}
	m := &checkpoint.Metadata{
		CheckpointID: uint64(cp.ID),
		Timestamp:    cp.TriggeredAt,
		Properties:   map[string]string{"type": kind},
	}
	for _, op := range slices.Sorted(maps.Keys(byOp)) {
		o, err := checkpoint.NewOperator(op, byOp[op]...)
		if err != nil {
			return err
		}
		m.Operators = append(m.Operators, o)
	}
	return checkpoint.Commit(ctx, c.storage, name, m)
}

// discard executes a Discard. The files of rejected acknowledgements are
// removed one by one; a completed checkpoint dropped by retention, or an
// aborted one whose metadata may exist, is deleted whole, metadata first.
// (An aborted checkpoint is deleted whole when its Report arrives.)
func (c *Coordinator) discard(d coordinator.Discard) {
	switch {
	case d.Metadata:
		name := c.name(d.ID)
		unlist := c.completed != nil && d.Reason == coordinator.DiscardSubsumed
		c.spawn(func(ctx context.Context) func() {
			if unlist {
				// Only what the index no longer lists may go: if this
				// coordinator was deposed, the new leader retains it.
				if err := c.completed.Remove(ctx, d.ID); err != nil {
					err = fmt.Errorf("driver: checkpoint %d kept: it could not be dropped from the completed index: %w", d.ID, err)
					return func() { c.logDiscard(d, err) }
				}
			}
			err := checkpoint.Delete(ctx, c.storage, name)
			return func() { c.logDiscard(d, err) }
		})
	case d.Reason == coordinator.DiscardAborted:
	default:
		files := d.Files
		c.spawn(func(ctx context.Context) func() {
			var errs []error
			for _, f := range files {
				ckpt, obj, ok := strings.Cut(f, "/")
				if !ok {
					errs = append(errs, fmt.Errorf("driver: file %q is not checkpoint/object", f))
					continue
				}
				errs = append(errs, c.storage.Remove(ctx, ckpt, obj))
			}
			err := errors.Join(errs...)
			return func() { c.logDiscard(d, err) }
		})
	}
}

func (c *Coordinator) logDiscard(d coordinator.Discard, err error) {
	if err != nil {
		c.log.Warn("checkpoint files not deleted", "id", d.ID, "reason", d.Reason.String(), "files", d.Files, "err", err)
	}
}

func (c *Coordinator) report(r coordinator.Record) {
	attrs := []any{"id", r.ID, "savepoint", r.Savepoint, "duration", r.Duration(), "bytes", r.Bytes}
	if r.Savepoint {
		attrs = append(attrs, "location", r.Location)
	}
	parts := make([]any, 0, len(r.Participants))
	for _, p := range r.Participants {
		parts = append(parts, slog.Group(string(p.Participant),
			"acked", p.Acked, "sync", p.SyncDuration, "async", p.AsyncDuration, "bytes", p.Bytes))
	}
	attrs = append(attrs, slog.Group("participants", parts...))
	if r.Err == nil {
		c.log.Info("checkpoint completed", attrs...)
	} else {
		attrs = append(attrs, "reason", r.Err.Reason.String())
		if r.Err.Participant != "" {
			attrs = append(attrs, "participant", string(r.Err.Participant))
		}
		if r.NotReady() {
			// Expected while instances join, leave or end: not a failure.
			c.log.Info("checkpoint aborted: a participant was not ready", append(attrs, "err", r.Err)...)
		} else {
			c.log.Warn("checkpoint failed", append(attrs, "err", r.Err)...)
		}
		if !errors.Is(r.Err, coordinator.ErrOutcomeUnknown) {
			// Everything under an aborted checkpoint's name is its own:
			// delete it whole, with what participants are still writing.
			name := c.name(r.ID)
			c.spawn(func(ctx context.Context) func() {
				err := checkpoint.Delete(ctx, c.storage, name)
				return func() {
					if err != nil {
						c.log.Warn("aborted checkpoint not deleted", "id", r.ID, "name", name, "err", err)
					}
				}
			})
		}
	}
	if w, ok := c.waiters[r.ID]; ok {
		res := outcome{record: r}
		if r.Err != nil {
			res.err = r.Err
		}
		w <- res
		delete(c.waiters, r.ID)
	}
	delete(c.savepoints, r.ID)
}

// AddParticipant adds p: checkpoints triggered from now on include it.
// With Options.Expected, p takes the place of the expected instance with
// its id: it must be one (ErrUnexpectedInstance) whose place is free
// (ErrDuplicateInstance); without, its id must be new
// (ErrDuplicateInstance).
func (c *Coordinator) AddParticipant(p Participant) error {
	if err := checkpoint.ValidateName(p.Operator()); err != nil {
		return fmt.Errorf("driver: participant %q: operator: %w", p.ID(), err)
	}
	errc := make(chan error, 1)
	if err := c.do(func() { errc <- c.add(p) }); err != nil {
		return err
	}
	return <-errc
}

// add adds p on the loop goroutine.
func (c *Coordinator) add(p Participant) error {
	id := p.ID()
	if c.expected != nil {
		sl, ok := c.expected[id]
		switch {
		case !ok:
			return unexpected(id, p.Operator(), c.expected)
		case sl.inst.Operator != p.Operator():
			return fmt.Errorf("%w: participant %s is an instance of operator %q, not %q",
				ErrUnexpectedInstance, id, sl.inst.Operator, p.Operator())
		case sl.p != nil:
			return fmt.Errorf("%w: %s has joined already", ErrDuplicateInstance, id)
		}
		sl.bind(p)
		return nil
	}
	if _, ok := c.participants[id]; ok {
		return fmt.Errorf("%w: %s has joined already", ErrDuplicateInstance, id)
	}
	if err := c.core.AddParticipant(id); err != nil {
		return err
	}
	c.participants[id] = p
	return nil
}

// RemoveParticipant removes participant id; pending checkpoints still
// waiting for it are aborted. With Options.Expected, an expected instance
// stays in every checkpoint, absent: its checkpoints are declined as not
// ready until a participant takes its place again.
func (c *Coordinator) RemoveParticipant(id coordinator.ParticipantID) error {
	errc := make(chan error, 1)
	if err := c.do(func() {
		err := c.core.RemoveParticipant(c.clock.Now(), id)
		switch sl := c.expected[id]; {
		case err != nil:
		case sl != nil:
			// Out and in again within one input of the loop: no
			// checkpoint is triggered in between.
			sl.unbind()
			err = c.core.AddParticipant(id)
		default:
			delete(c.participants, id)
		}
		errc <- err
	}); err != nil {
		return err
	}
	return <-errc
}

// Acknowledgement is a participant's answer to a trigger it took part in.
type Acknowledgement struct {
	// Result is what the participant wrote.
	Result checkpoint.SnapshotResult
	// Finished reports that the participant had reached the end of its
	// input when it snapshotted (Instance.Finish).
	Finished bool
}

// Ack acknowledges trigger t for participant from with the result of its
// snapshot.
func (c *Coordinator) Ack(t Trigger, from coordinator.ParticipantID, a Acknowledgement) error {
	res := a.Result
	payload := coordinator.Payload{
		Bytes:         res.Stats.BytesWritten,
		SyncDuration:  res.Stats.SyncDuration,
		AsyncDuration: res.Stats.AsyncDuration,
		OperatorState: res.Snapshot.OperatorState,
		Finished:      a.Finished,
	}
	if res.Snapshot.File.Name != "" {
		payload.Files = []string{t.Checkpoint + "/" + res.Snapshot.File.Name}
	}
	return c.do(func() {
		var op string
		if p, ok := c.participants[from]; ok {
			op = p.Operator()
		}
		payload.Handle = handle{operator: op, snapshot: res.Snapshot}
		if op != "" {
			payload.KeyGroups = coordinator.KeyGroups{Operator: op, MaxParallelism: res.Snapshot.MaxParallelism, Range: res.Snapshot.KeyGroups}
		}
		result, err := c.core.Ack(c.clock.Now(), t.ID, from, payload)
		if result != coordinator.MessageAccepted {
			c.log.Debug("checkpoint acknowledgement not accepted", "id", t.ID, "participant", from, "result", result.String(), "err", err)
		}
	})
}

// Decline reports that participant from cannot take part in trigger t's
// checkpoint. A cause wrapping coordinator.ErrNotReady does not count
// towards the tolerable failures.
func (c *Coordinator) Decline(t Trigger, from coordinator.ParticipantID, cause error) error {
	return c.do(func() {
		result := c.core.Decline(c.clock.Now(), t.ID, from, cause)
		if result != coordinator.MessageAccepted {
			c.log.Debug("checkpoint decline not applied", "id", t.ID, "participant", from, "result", result.String())
		}
	})
}

// Savepoint takes a savepoint named location in the storage and waits for
// its outcome. The location must be a valid checkpoint name that is not
// used yet and does not look like a checkpoint's (checkpoint.CheckpointName).
func (c *Coordinator) Savepoint(ctx context.Context, location string) (coordinator.Record, error) {
	if err := checkpoint.ValidateName(location); err != nil {
		return coordinator.Record{}, fmt.Errorf("%w: %w", ErrInvalidLocation, err)
	}
	if _, ok := checkpoint.ParseCheckpointName(location); ok {
		return coordinator.Record{}, fmt.Errorf("%w: %q is a checkpoint's name", ErrInvalidLocation, location)
	}
	if location == checkpoint.CoordinatorName {
		return coordinator.Record{}, fmt.Errorf("%w: %q is reserved for the coordinator", ErrInvalidLocation, location)
	}
	names, err := c.storage.List(ctx)
	if err != nil {
		return coordinator.Record{}, err
	}
	if slices.Contains(names, location) {
		return coordinator.Record{}, fmt.Errorf("%w: %q already exists", ErrInvalidLocation, location)
	}
	result := make(chan outcome, 1)
	if err := c.do(func() {
		c.requestSavepoint(&savepoint{location: location, result: result})
	}); err != nil {
		return coordinator.Record{}, err
	}
	select {
	case r := <-result:
		return r.record, r.err
	case <-ctx.Done():
		return coordinator.Record{}, ctx.Err()
	case <-c.done:
		select {
		case r := <-result:
			return r.record, r.err
		default:
			return coordinator.Record{}, ErrClosed
		}
	}
}

// requestSavepoint asks the Core for savepoint sp, on the loop goroutine.
// A request made while no checkpoint id is reserved waits for the
// outstanding reservation.
func (c *Coordinator) requestSavepoint(sp *savepoint) {
	inUse := slices.ContainsFunc(c.parked, func(o *savepoint) bool { return o.location == sp.location })
	for _, o := range c.savepoints {
		inUse = inUse || o.location == sp.location
	}
	if inUse {
		sp.result <- outcome{err: fmt.Errorf("%w: a savepoint to %q is in progress", ErrInvalidLocation, sp.location)}
		return
	}
	id, err := c.core.RequestSavepoint(c.clock.Now(), sp.location)
	switch {
	case errors.Is(err, coordinator.ErrNoIDs) && !c.closing:
		c.parked = append(c.parked, sp)
	case err != nil:
		sp.result <- outcome{err: err}
	default:
		c.savepoints[id] = sp
		c.waiters[id] = sp.result
	}
}

// Stats returns a copy of the checkpoint statistics.
func (c *Coordinator) Stats() *coordinator.Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats.Clone()
}

// Retained returns the retained completed checkpoints, oldest first; after
// Close, those retained when it returned.
func (c *Coordinator) Retained() []coordinator.Checkpoint {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.retained)
}

// Failed is closed when checkpointing fails the job (too many consecutive
// failures); Err then returns why. The Coordinator has shut its Core down;
// the job should stop, and restart from the latest retained checkpoint.
func (c *Coordinator) Failed() <-chan struct{} { return c.failed }

// Err returns the terminal error once Failed is closed, nil before.
func (c *Coordinator) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close shuts the Coordinator down: pending checkpoints are aborted and
// their files deleted, an outstanding metadata commit and deletions are
// waited for, and the goroutine stops. Retained checkpoints stay in
// storage. If ctx ends first, Close returns its error and the shutdown
// goes on in the background. Close is idempotent.
func (c *Coordinator) Close(ctx context.Context) error {
	err := c.do(func() {
		if !c.closing {
			c.closing = true
			c.core.Shutdown(c.clock.Now())
			for _, sp := range c.parked {
				sp.result <- outcome{err: coordinator.ErrShutdown}
			}
			c.parked = nil
		}
	})
	if errors.Is(err, ErrClosed) {
		return nil
	}
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
