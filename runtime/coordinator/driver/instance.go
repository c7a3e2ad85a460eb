package driver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/coordinator"
	"github.com/stategen/stategen/runtime/coordinator/metrics"
)

// DefaultMailbox is the capacity of an Instance's Triggers and
// Notifications channels unless InstanceOptions.Mailbox says otherwise.
const DefaultMailbox = 16

// Errors of an Instance.
var (
	// ErrMailboxFull: a trigger found the Instance's Triggers channel full —
	// its operator is not reading it — and the checkpoint was declined. The
	// decline counts towards the tolerable failures: an operator that does
	// not take triggers would let its checkpoints expire anyway.
	ErrMailboxFull = errors.New("driver: instance mailbox full: the operator does not read Triggers")
	// ErrInstanceClosed: the Instance was closed.
	ErrInstanceClosed = errors.New("driver: instance closed")
	// ErrUnknownTrigger: Snapshot or Decline was given a Trigger that did
	// not come from the Instance's Triggers channel, or one already
	// snapshotted or declined.
	ErrUnknownTrigger = errors.New("driver: trigger not delivered to this instance, or already handled")
	// ErrFinished: the Instance has finished (Finish): it answers triggers
	// by itself, and the operator may no longer Snapshot, Decline or
	// Finish again.
	ErrFinished = errors.New("driver: instance finished")
)

// InstanceOptions configure an Instance (see Coordinator.Join).
type InstanceOptions struct {
	// Operator names the operator the instance belongs to, e.g. "clicks":
	// a valid checkpoint name (checkpoint.ValidateName), stable across job
	// versions, since checkpoints record state by operator. Required.
	Operator string
	// Index is the instance's index among the operator's parallel
	// instances, from 0. With Operator it names the participant
	// ("clicks/3") and its data file in every checkpoint ("clicks-3.sgc").
	Index int
	// Store holds the instance's state: the key groups of instance Index.
	// Only the operator's goroutine uses it, Snapshot included. Required.
	Store runtime.Store
	// Mailbox is the capacity of the Triggers and Notifications channels;
	// zero means DefaultMailbox.
	Mailbox int
	// Writer tunes the data files; nil means the defaults.
	Writer *checkpoint.WriterOptions
	// LocalCopy, if not nil, keeps a copy of the instance's data files on
	// a storage of its own (a Dir on the instance's disk): every
	// checkpoint's file is written there too (savepoints' are not), and
	// on each completion the copy keeps that checkpoint's files, its chain
	// included, and drops the rest. Restore through
	// LocalCopy.Storage(remote) to read them there (local recovery: see
	// checkpoint.LocalCopy). A failed local write never fails a
	// checkpoint; LocalCopy.Stats counts it.
	LocalCopy *checkpoint.LocalCopy
	// MeterProvider receives the store's metrics (see metrics.Store: the
	// entries and bytes of each state at the latest checkpoint, live
	// snapshots, and an LSM backend's engine statistics), read in a
	// callback at collection, never on Put or Get. Nil means the
	// Coordinator's Options.MeterProvider for an instance that joins one,
	// and no metrics for NewInstance. Close the Instance before the store.
	MeterProvider metric.MeterProvider
}

// Notification tells an operator that a checkpoint it took part in
// completed or was aborted.
type Notification struct {
	// ID is the checkpoint.
	ID coordinator.CheckpointID
	// Err is nil if the checkpoint completed, and otherwise why it was
	// aborted (a *coordinator.AbortError).
	Err error
	// OperatorState is the blob the operator passed to Snapshot for this
	// checkpoint — typically its source positions, which a completed
	// checkpoint now makes safe to commit (a Kafka consumer commits its
	// offsets). It is nil if the instance never snapshotted the checkpoint.
	OperatorState []byte
	// Savepoint reports that the checkpoint is a savepoint. A savepoint's
	// completion implies nothing about checkpoints, and it is not in the
	// job's recovery lineage: commit side effects on it only when the job
	// stops on it.
	Savepoint bool
	// Final reports a completed final checkpoint: every instance of the
	// job had finished (Finish) when it snapshotted, so it holds the job's
	// final state. A finished instance may close once it sees one.
	Final bool
}

// Completed reports whether the checkpoint completed.
func (n Notification) Completed() bool { return n.Err == nil }

// Instance is the common-case participant: one operator instance with a
// runtime.Store, driven by the operator's own goroutine. The coordinator
// puts triggers and notifications in the instance's mailbox — the Triggers
// and Notifications channels, which the operator's loop selects on next to
// its input, like Flink's mailbox — and the operator handles a trigger with
// Snapshot (the synchronous phase, on its goroutine) and a completion by
// committing what the notification's blob says.
//
// Snapshot hands the snapshot to checkpoint.WriteAsync; when the write
// ends, the Instance acknowledges the checkpoint with the written file, the
// phases' durations, the bytes and the blob, or declines it. A checkpoint
// aborted meanwhile has its write cancelled, and a trigger whose checkpoint
// ended before the operator took it is skipped.
//
// Triggers and Notifications are never closed. The methods are safe for
// concurrent use, but Snapshot and Decline belong on the operator's
// goroutine: Snapshot calls Store.Snapshot.
type Instance struct {
	up        Upstream
	clock     Clock
	ioTimeout time.Duration
	id        coordinator.ParticipantID
	op        string
	object    string
	store     runtime.Store
	ops       *runtime.OperatorStates // the store's operator lists
	writer    *checkpoint.WriterOptions
	local     *checkpoint.LocalCopy // nil without local recovery
	metrics   *metrics.Store        // nil without a MeterProvider

	triggers chan Trigger
	notes    chan Notification

	ctx    context.Context // cancelled by Close: stops every write
	cancel context.CancelFunc
	wg     sync.WaitGroup // writes and asynchronous declines in flight

	mu        sync.Mutex
	closed    bool
	finished  bool   // Finish was called: the instance answers triggers itself
	finalBlob []byte // the operator state given to Finish
	attempts  map[coordinator.CheckpointID]*attempt
}

// attempt is the Instance's part in one checkpoint, from its trigger to its
// end.
type attempt struct {
	t        Trigger
	taken    bool                      // Snapshot or Decline was called
	async    *checkpoint.AsyncSnapshot // the write, once started
	snap     runtime.Snapshot          // what the write scans (for metrics)
	blob     []byte                    // the operator's own, for its notifications
	encoded  []byte                    // blob and the store's operator lists (runtime.OperatorStates.Encode)
	finished bool                      // snapshotted after Finish
	aborted  bool                      // NotifyAborted arrived
}

// Upstream is where an Instance sends its answers to triggers, and whom
// it tells that it leaves: the Coordinator itself for an instance that
// joined it in the same process (Coordinator.Join), or a transport to a
// coordinator in another process (see NewInstance). Coordinator implements
// it.
type Upstream interface {
	// Ack acknowledges trigger t for participant from with the result of
	// its snapshot. An error means the acknowledgement did not reach the
	// coordinator, which will therefore never delete the snapshot's file:
	// the Instance removes it itself.
	Ack(t Trigger, from coordinator.ParticipantID, a Acknowledgement) error
	// Decline reports that participant from cannot take part in trigger
	// t's checkpoint.
	Decline(t Trigger, from coordinator.ParticipantID, cause error) error
	// RemoveParticipant takes participant id out of checkpointing; an
	// error wrapping ErrClosed means the coordinator is already gone.
	RemoveParticipant(id coordinator.ParticipantID) error
}

// Join adds an operator instance to the coordinator and returns it: the
// instance takes part in every checkpoint triggered from now on. Close it
// when the operator stops, or Finish it when its input ends. The error
// names the InstanceOptions field at fault, or comes from AddParticipant:
// ErrDuplicateInstance if an instance with the same operator and index
// has joined; with Options.Expected, ErrUnexpectedInstance if the job
// graph has no such instance or its Store does not own the instance's key
// groups (runtime.KeyGroupRangeForOperator of the operator's parallelism).
func (c *Coordinator) Join(opts InstanceOptions) (*Instance, error) {
	if opts.MeterProvider == nil {
		opts.MeterProvider = c.meterProvider
	}
	in, err := newInstance(opts, c, c.clock, c.ioTimeout)
	if err != nil {
		return nil, err
	}
	if sl, ok := c.expected[in.id]; ok && sl.inst.Operator == opts.Operator {
		cfg := opts.Store.Config()
		want, err := runtime.KeyGroupRangeForOperator(cfg.MaxParallelism, sl.inst.Parallelism, sl.inst.Index)
		if err == nil && cfg.KeyGroups != want {
			err = fmt.Errorf("its Store holds key groups %v of %d", cfg.KeyGroups, cfg.MaxParallelism)
		}
		if err != nil {
			in.cancel()
			return nil, fmt.Errorf("%w: instance %d of operator %q (parallelism %d) owns key groups %v: %v",
				ErrUnexpectedInstance, sl.inst.Index, opts.Operator, sl.inst.Parallelism, want, err)
		}
	}
	if err := c.AddParticipant(member{in}); err != nil {
		in.cancel()
		return nil, err
	}
	return in, nil
}

// NewInstance returns an operator instance whose coordinator is not a
// Coordinator of this process: a transport that carries triggers and
// notifications between processes (package
// runtime/coordinator/etcdcoord) calls the returned Participant's methods
// when they arrive — Trigger with the storage this process writes to —
// and the Instance sends its acknowledgements, declines and its leaving
// to up. The Instance is used exactly like one that joined a local
// Coordinator; Participant.ID returns its id. The error names the
// InstanceOptions field at fault.
func NewInstance(opts InstanceOptions, up Upstream) (*Instance, Participant, error) {
	if up == nil {
		return nil, nil, errors.New("driver: NewInstance: the Upstream is required")
	}
	in, err := newInstance(opts, up, SystemClock, DefaultIOTimeout)
	if err != nil {
		return nil, nil, err
	}
	return in, member{in}, nil
}

func newInstance(opts InstanceOptions, up Upstream, clock Clock, ioTimeout time.Duration) (*Instance, error) {
	bad := func(field, format string, args ...any) (*Instance, error) {
		return nil, fmt.Errorf("driver: InstanceOptions.%s %s", field, fmt.Sprintf(format, args...))
	}
	if err := checkpoint.ValidateName(opts.Operator); err != nil {
		return bad("Operator", "is invalid: %v", err)
	}
	switch {
	case opts.Index < 0:
		return bad("Index", "is %d; it must not be negative", opts.Index)
	case opts.Store == nil:
		return bad("Store", "is required")
	case opts.Mailbox < 0:
		return bad("Mailbox", "is %d; it must not be negative", opts.Mailbox)
	}
	object := fmt.Sprintf("%s-%d.sgc", opts.Operator, opts.Index)
	if err := checkpoint.ValidateName(object); err != nil {
		return bad("Operator", "is too long to name a data file: %v", err)
	}
	size := opts.Mailbox
	if size == 0 {
		size = DefaultMailbox
	}
	id := coordinator.ParticipantID(fmt.Sprintf("%s/%d", opts.Operator, opts.Index))
	sm, err := newStoreMetrics(opts.MeterProvider, id, opts.Store)
	if err != nil {
		return nil, fmt.Errorf("driver: InstanceOptions.MeterProvider: %s: %w", id, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := &Instance{
		up:        up,
		clock:     clock,
		ioTimeout: ioTimeout,
		id:        id,
		op:        opts.Operator,
		object:    object,
		store:     opts.Store,
		ops:       runtime.OperatorStatesOf(opts.Store),
		writer:    opts.Writer,
		local:     opts.LocalCopy,
		metrics:   sm,
		triggers:  make(chan Trigger, size),
		notes:     make(chan Notification, size),
		ctx:       ctx,
		// Whoever cancels the instance — Close, or Join refusing it —
		// also stops its metrics from reading the store.
		cancel:   func() { cancel(); _ = sm.Close() },
		attempts: map[coordinator.CheckpointID]*attempt{},
	}
	return in, nil
}

// ID returns the instance's participant id, "operator/index".
func (in *Instance) ID() coordinator.ParticipantID { return in.id }

// Triggers delivers the checkpoints to take: handle each with Snapshot (or
// Decline) on the operator's goroutine, between two records.
func (in *Instance) Triggers() <-chan Trigger { return in.triggers }

// Notifications delivers the ends of the checkpoints the instance was
// triggered for: completions (commit side effects up to them) and aborts.
// Savepoints are not notified when they complete. If the operator falls
// behind and the channel is full, the oldest notification is dropped: a
// completion implies the earlier ones, so the latest is what matters.
func (in *Instance) Notifications() <-chan Notification { return in.notes }

// Snapshot takes the instance's part in checkpoint t: it runs the
// synchronous phase (Store.Snapshot) now, on the caller's goroutine — which
// must be the operator's — records operatorState (the operator's source
// positions, say; copied) as the instance's blob, and returns while the
// snapshot is written in the background. The write's end acknowledges or
// declines the checkpoint.
//
// Call it between two records, so the snapshot and the blob describe the
// same point of the input. If the checkpoint already ended (aborted,
// expired), Snapshot does nothing and returns nil. If the synchronous
// phase fails, Snapshot declines the checkpoint and returns the error; the
// operator may go on. It fails with ErrUnknownTrigger for a trigger that
// did not come from Triggers or was handled already, and with
// ErrInstanceClosed after Close.
func (in *Instance) Snapshot(t Trigger, operatorState []byte) error {
	if in.isFinished() {
		return ErrFinished
	}
	return in.snapshot(t, operatorState, false)
}

// snapshot is Snapshot, for the operator or, once finished, for the
// Instance's own goroutine.
func (in *Instance) snapshot(t Trigger, operatorState []byte, finished bool) error {
	a, skip, err := in.take(t)
	if skip || err != nil {
		return err
	}
	start := time.Now()
	snap, err := in.store.Snapshot()
	syncPhase := time.Since(start)
	if err != nil {
		in.forget(t.ID)
		err = fmt.Errorf("driver: %s: snapshot for checkpoint %d: %w", in.id, t.ID, err)
		_ = in.up.Decline(t, in.id, err)
		return err
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		_ = snap.Release()
		return ErrInstanceClosed
	}
	a.blob = slices.Clone(operatorState)
	// The operator lists bound to the store are captured now, with the
	// store's snapshot, in the blob the checkpoint records.
	a.encoded = in.ops.Encode(operatorState)
	a.finished = finished
	if ts, ok := snap.(*checkpoint.TrackedSnapshot); ok {
		// The store is a checkpoint.Tracker: the write is of its changes
		// (the state sizes are not measured), a savepoint's in full.
		if t.Options.Savepoint {
			ts.SelfContained()
		}
		a.snap = snap
	} else {
		a.snap = in.metrics.Measure(snap)
	}
	storage := t.Storage
	if in.local != nil && !t.Options.Savepoint {
		storage = in.local.Storage(storage)
	}
	a.async = checkpoint.WriteAsync(in.ctx, a.snap, syncPhase, storage, t.Checkpoint, in.object, in.writer)
	if a.aborted {
		a.async.Cancel()
	}
	in.wg.Add(1)
	go in.finish(a)
	return nil
}

// Decline refuses checkpoint t without snapshotting, with cause. A cause
// wrapping coordinator.ErrNotReady (the operator is starting or draining)
// does not count towards the tolerable failures. Like Snapshot, it fails
// with ErrUnknownTrigger or ErrInstanceClosed, and does nothing for a
// checkpoint that already ended.
func (in *Instance) Decline(t Trigger, cause error) error {
	if in.isFinished() {
		return ErrFinished
	}
	_, skip, err := in.take(t)
	if skip || err != nil {
		return err
	}
	in.forget(t.ID)
	return in.up.Decline(t, in.id, cause)
}

// take marks t's attempt as handled. skip is true if its checkpoint already
// ended: there is nothing to do.
func (in *Instance) take(t Trigger) (a *attempt, skip bool, err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return nil, false, ErrInstanceClosed
	}
	a, ok := in.attempts[t.ID]
	if !ok || a.taken || a.t.Checkpoint != t.Checkpoint || !a.t.At.Equal(t.At) {
		return nil, false, fmt.Errorf("%w: checkpoint %d", ErrUnknownTrigger, t.ID)
	}
	a.taken = true
	if a.aborted || !in.clock.Now().Before(t.Deadline) {
		// Ended, or about to expire: the coordinator aborts it without us.
		if a.aborted {
			delete(in.attempts, t.ID)
		}
		return nil, true, nil
	}
	return a, false, nil
}

// forget drops the attempt of checkpoint id.
func (in *Instance) forget(id coordinator.CheckpointID) {
	in.mu.Lock()
	delete(in.attempts, id)
	in.mu.Unlock()
}

// finish waits for a's write and acknowledges or declines the checkpoint.
func (in *Instance) finish(a *attempt) {
	defer in.wg.Done()
	res, err := a.async.Wait()
	in.mu.Lock()
	aborted := a.aborted
	if err != nil {
		// No completion will be notified: a failed write's checkpoint is
		// aborted.
		delete(in.attempts, a.t.ID)
	}
	in.mu.Unlock()
	if err != nil {
		if !aborted && in.ctx.Err() == nil {
			_ = in.up.Decline(a.t, in.id, err)
		}
		return
	}
	in.metrics.Publish(a.snap)
	// A write that finished although its checkpoint was aborted is
	// acknowledged all the same: the coordinator deletes late files.
	res.Snapshot.OperatorState = a.encoded
	if err := in.up.Ack(a.t, in.id, Acknowledgement{Result: res, Finished: a.finished}); err != nil {
		// The coordinator is gone: nobody will delete the file but us.
		ctx, cancel := context.WithTimeout(context.Background(), in.ioTimeout)
		_ = a.t.Storage.Remove(ctx, a.t.Checkpoint, res.Snapshot.File.Name)
		cancel()
	}
}

// Finish says that the operator has reached the end of its input, for good:
// operatorState (copied) is its final operator state — the source
// positions after the last record. Call it on the operator's goroutine,
// after the last record, instead of Close.
//
// From then on the Instance answers every trigger itself, on a goroutine
// of its own, with a snapshot of the store and this blob, marked finished
// (as Flink's tasks do since FLIP-147): checkpoints keep completing — and
// keep holding this instance's key groups — while the other instances
// still run, and once every instance has finished, the next checkpoint is
// the job's final one (Notification.Final, Coordinator.Finished). The
// store is the Instance's from now on: the operator must not use it, nor
// read Triggers, nor call Snapshot or Decline (ErrFinished); it may read
// Notifications. Keep the Instance and its store open until the final
// checkpoint has completed, then Close it (and the store).
//
// A trigger that was in the mailbox when Finish was called is answered
// with the final state too. Finish fails with ErrFinished if called twice
// and ErrInstanceClosed after Close.
func (in *Instance) Finish(operatorState []byte) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	switch {
	case in.closed:
		return ErrInstanceClosed
	case in.finished:
		return ErrFinished
	}
	in.finished = true
	in.finalBlob = slices.Clone(operatorState)
	in.wg.Add(1)
	go in.serveFinished()
	return nil
}

// isFinished reports whether Finish was called.
func (in *Instance) isFinished() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.finished
}

// serveFinished answers the triggers of a finished instance until Close.
func (in *Instance) serveFinished() {
	defer in.wg.Done()
	for {
		select {
		case t := <-in.triggers:
			// A failed synchronous phase declines the checkpoint; the
			// next trigger tries again.
			_ = in.snapshot(t, in.finalBlob, true)
		case <-in.ctx.Done():
			return
		}
	}
}

// notify puts n in the Notifications channel, dropping the oldest
// notification if it is full. Called with in.mu held.
func (in *Instance) notify(n Notification) {
	for {
		select {
		case in.notes <- n:
			return
		default:
		}
		select {
		case <-in.notes:
		default:
		}
	}
}

// Close takes the instance out of checkpointing: it leaves the coordinator
// (pending checkpoints that wait for it are aborted, which does not count
// as a failure), cancels the snapshots being written and waits for them.
// The store is the caller's to close. Close is idempotent.
func (in *Instance) Close() error {
	in.mu.Lock()
	if in.closed {
		in.mu.Unlock()
		return nil
	}
	in.closed = true
	in.mu.Unlock()
	err := in.up.RemoveParticipant(in.id)
	if errors.Is(err, ErrClosed) {
		err = nil
	}
	in.cancel()
	in.wg.Wait()
	in.mu.Lock()
	clear(in.attempts)
	in.mu.Unlock()
	return err
}

// member is the Participant the Coordinator calls for an Instance; it
// keeps the Participant methods off the Instance's API. Its methods run on
// the Coordinator's goroutine and never block.
type member struct{ in *Instance }

func (m member) ID() coordinator.ParticipantID { return m.in.id }
func (m member) Operator() string              { return m.in.op }

func (m member) Trigger(t Trigger) {
	in := m.in
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return // Close removes the participant, which aborts t.
	}
	a := &attempt{t: t}
	in.attempts[t.ID] = a
	select {
	case in.triggers <- t:
		return
	default:
	}
	delete(in.attempts, t.ID)
	in.wg.Add(1)
	go func() {
		defer in.wg.Done()
		_ = in.up.Decline(t, in.id, fmt.Errorf("%w (capacity %d)", ErrMailboxFull, cap(in.triggers)))
	}()
}

func (m member) NotifyComplete(c Completion) {
	in := m.in
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return
	}
	var blob []byte
	name := checkpoint.CheckpointName(uint64(c.ID))
	if a, ok := in.attempts[c.ID]; ok {
		blob, name = a.blob, a.t.Checkpoint
	}
	if tr, ok := in.store.(*checkpoint.Tracker); ok && !c.Savepoint {
		// The checkpoint's chain is the base of the next ones.
		tr.Completed(name)
	}
	if a, ok := in.attempts[c.ID]; ok && in.local != nil && !c.Savepoint && a.async != nil {
		// The write is over: the coordinator had its acknowledgement.
		if res, err := a.async.Wait(); err == nil {
			in.wg.Add(1)
			go func() {
				defer in.wg.Done()
				ctx, cancel := context.WithTimeout(in.ctx, in.ioTimeout)
				defer cancel()
				// A copy not trimmed now is trimmed at the next completion.
				_ = in.local.Retain(ctx, name, res.Snapshot)
			}()
		}
	}
	if c.Savepoint {
		delete(in.attempts, c.ID)
	} else {
		for k, a := range in.attempts {
			// A completion implies the earlier checkpoints: those still
			// here were handled and are over (savepoints go on
			// independently).
			if k <= c.ID && a.taken && !a.t.Options.Savepoint {
				delete(in.attempts, k)
			}
		}
	}
	in.notify(Notification{ID: c.ID, OperatorState: blob, Savepoint: c.Savepoint, Final: c.Final})
}

func (m member) NotifyAborted(id coordinator.CheckpointID, err error) {
	in := m.in
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return
	}
	var blob []byte
	savepoint := false
	if a, ok := in.attempts[id]; ok {
		blob = a.blob
		savepoint = a.t.Options.Savepoint
		a.aborted = true
		if a.async != nil {
			a.async.Cancel()
		}
		if a.taken {
			delete(in.attempts, id)
		}
	}
	in.notify(Notification{ID: id, Err: err, OperatorState: blob, Savepoint: savepoint})
}
