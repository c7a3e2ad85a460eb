package coordinator

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Recovery seeds a Core with what a restarted job finds in storage.
type Recovery struct {
	// NextID is the id the next checkpoint gets: the recovered checkpoint
	// id counter. Zero means 1. It is raised above every retained id, so
	// ids never repeat even if the counter was lost.
	NextID CheckpointID
	// IDLimit is, with Config.IDReservation, a reservation the driver made
	// durable before starting the Core: ids in [NextID, IDLimit) may be
	// issued at once. Zero, or a limit at or below NextID, means nothing is
	// reserved yet (the first Ready then asks for a reservation). It must
	// be zero without Config.IDReservation.
	IDLimit CheckpointID
	// Retained are the completed checkpoints found in storage, in any
	// order. They take part in retention as if this Core had completed
	// them: when newer checkpoints complete, the oldest are discarded.
	// Savepoints do not belong here.
	Retained []Checkpoint
}

// pending is a checkpoint between its trigger and its completion or abort.
type pending struct {
	id           CheckpointID
	opts         Options
	request      RequestID // the on-demand request it answers; zero if none
	triggeredAt  time.Time
	deadline     time.Time
	participants []ParticipantID // sorted
	acks         map[ParticipantID]ParticipantState
	fullyAcked   bool      // every participant acknowledged: waiting for, or in, Finalize
	ackedAt      time.Time // when the last acknowledgement arrived
	done         bool      // completed or aborted: no longer in Core.pending
}

func (p *pending) isParticipant(id ParticipantID) bool {
	_, ok := slices.BinarySearch(p.participants, id)
	return ok
}

func (p *pending) checkpoint() Checkpoint {
	cp := Checkpoint{ID: p.id, Options: p.opts, TriggeredAt: p.triggeredAt, AckedAt: p.ackedAt}
	for _, id := range p.participants {
		if a, ok := p.acks[id]; ok {
			cp.Participants = append(cp.Participants, a)
		}
	}
	return cp
}

// Core is the checkpoint coordinator's deterministic state machine. It
// holds no goroutine, no timer and no clock: every input carries the
// current time, and every effect comes out of Ready as a Decision for a
// driver to execute. The same inputs always yield the same decisions.
//
// A Core is not safe for concurrent use; its driver serializes the inputs.
type Core struct {
	cfg          Config
	now          time.Time
	participants map[ParticipantID]struct{}

	nextID     CheckpointID
	idLimit    CheckpointID // with IDReservation: ids below it may be issued
	reserving  CheckpointID // the Limit of the outstanding Reserve; zero if none
	reserveErr bool         // the last reservation failed: no prefetch until the next trigger
	pending    []*pending   // ascending ids
	finalizing *pending     // the checkpoint whose Finalize is outstanding

	nextTrigger    time.Time // when the periodic trigger is due; zero if none
	periodicQueued bool      // a due periodic trigger waits for a free slot or for ids
	idWait         bool      // ... for ids: it was refused with RefusedNoIDs
	lastCompletion time.Time

	requests    []RequestID // on-demand requests waiting for a slot or for ids, oldest first
	lastRequest RequestID

	failures     failureCounter
	retained     []Checkpoint // ascending ids
	savepoints   map[CheckpointID]struct{}
	refs         map[string]int // files referenced by pending, finalizing and retained checkpoints
	lastNotified CheckpointID

	shutdown  bool
	err       error     // the terminal error, once Fail was emitted
	scheduled time.Time // At of the last Schedule emitted

	out   []Decision
	stats *Stats
}

// New returns a Core configured by cfg (see Config.Normalize), started at
// start, seeded with rec (the zero Recovery for a new job). The first
// periodic trigger is due at start + Interval; the first Ready returns the
// Schedule for it.
func New(cfg Config, start time.Time, rec Recovery) (*Core, error) {
	cfg, err := cfg.Normalize()
	if err != nil {
		return nil, err
	}
	c := &Core{
		cfg:            cfg,
		now:            start,
		participants:   map[ParticipantID]struct{}{},
		nextID:         max(rec.NextID, 1),
		nextTrigger:    start.Add(cfg.Interval),
		lastCompletion: start,
		failures:       newFailureCounter(cfg.TolerableFailures),
		savepoints:     map[CheckpointID]struct{}{},
		refs:           map[string]int{},
		stats:          NewStats(cfg.StatsHistory),
	}
	retained := slices.Clone(rec.Retained)
	slices.SortFunc(retained, func(a, b Checkpoint) int { return cmp.Compare(a.ID, b.ID) })
	for i, cp := range retained {
		bad := func(format string, args ...any) (*Core, error) {
			return nil, fmt.Errorf("%w: retained checkpoint %d: %s", ErrInvalidRecovery, cp.ID, fmt.Sprintf(format, args...))
		}
		switch {
		case cp.ID == 0 || cp.ID >= MaxID:
			return bad("id out of range")
		case i > 0 && retained[i-1].ID == cp.ID:
			return bad("id appears twice")
		case cp.Options.Savepoint:
			return bad("is a savepoint; savepoints are not retained")
		}
		cp.Participants = slices.Clone(cp.Participants)
		for j, ps := range cp.Participants {
			files, err := ps.Payload.validate()
			if err != nil {
				return bad("participant %q: %v", ps.Participant, err)
			}
			cp.Participants[j].Payload.Files = files
		}
		slices.SortFunc(cp.Participants, func(a, b ParticipantState) int { return cmp.Compare(a.Participant, b.Participant) })
		if err := checkCoverage(cp.Participants); err != nil {
			return bad("%v", err)
		}
		retained[i] = cp
		c.nextID = max(c.nextID, cp.ID+1)
		c.lastNotified = cp.ID
	}
	if c.nextID >= MaxID {
		return nil, fmt.Errorf("%w: NextID %d is beyond MaxID", ErrInvalidRecovery, c.nextID)
	}
	switch {
	case rec.IDLimit > MaxID:
		return nil, fmt.Errorf("%w: IDLimit %d is beyond MaxID", ErrInvalidRecovery, rec.IDLimit)
	case rec.IDLimit != 0 && cfg.IDReservation == 0:
		return nil, fmt.Errorf("%w: IDLimit %d without Config.IDReservation", ErrInvalidRecovery, rec.IDLimit)
	case cfg.IDReservation > 0:
		c.idLimit = max(rec.IDLimit, c.nextID)
	}
	for _, cp := range retained {
		for _, ps := range cp.Participants {
			c.ref(ps.Payload.Files)
		}
	}
	c.retained = retained
	c.maybeReserve(false)
	c.emitSchedule()
	return c, nil
}

// shutdownErr is the refusal of a request to a Core that is shut down:
// ErrShutdown, wrapping the job's failure if it failed.
func (c *Core) shutdownErr() error {
	if c.err != nil {
		return fmt.Errorf("%w: %w", ErrShutdown, c.err)
	}
	return ErrShutdown
}

// Config returns the normalized configuration.
func (c *Core) Config() Config { return c.cfg }

// Ready returns the decisions made since the last call, in the order the
// driver must execute them, and forgets them.
func (c *Core) Ready() []Decision {
	out := c.out
	c.out = nil
	return out
}

// HasReady reports whether Ready would return decisions.
func (c *Core) HasReady() bool { return len(c.out) > 0 }

// Tick advances the Core's time to now: checkpoints whose deadline has
// passed expire, and a due periodic trigger fires (or is refused). The
// driver calls it at NextDeadline; calling it at other times is harmless.
func (c *Core) Tick(now time.Time) {
	c.advance(now)
	c.afterStep()
}

// RequestSavepoint triggers a savepoint to be written at location (chosen
// by the user) and returns its id. Savepoints are forced: they start even
// while MaxConcurrent checkpoints are pending and before MinPause has
// passed. The request is refused if the Core is shut down (ErrShutdown) or
// has no participant (ErrNoParticipants), if location is empty
// (ErrInvalidLocation), or if no checkpoint id is reserved (ErrNoIDs: a
// Reserve decision is outstanding; retry when it succeeds). The outcome
// comes as a Report for the returned id.
func (c *Core) RequestSavepoint(now time.Time, location string) (CheckpointID, error) {
	c.advance(now)
	defer c.afterStep()
	switch {
	case c.shutdown:
		return 0, c.shutdownErr()
	case location == "":
		return 0, ErrInvalidLocation
	case len(c.participants) == 0:
		return 0, ErrNoParticipants
	case !c.canIssue():
		c.maybeReserve(true)
		return 0, ErrNoIDs
	}
	return c.trigger(Options{Savepoint: true, Location: location}, 0), nil
}

// RequestID identifies an on-demand checkpoint request (see
// RequestCheckpoint). The first is 1.
type RequestID uint64

// MaxQueuedRequests bounds the on-demand requests that may wait for a
// slot at once (Flink's bound on queued checkpoint requests).
const MaxQueuedRequests = 1000

// RequestCheckpoint asks for a regular checkpoint now, outside the periodic
// schedule — to checkpoint the final state of a job, say — and returns the
// request's id. The checkpoint is an ordinary one in every other respect:
// it is retained, subsumes and may be subsumed, notified, and its failures
// count. It is not held back by MinPause, but it is by MaxConcurrent, like
// Flink's manual trigger: while MaxConcurrent checkpoints are pending the
// request waits, and is triggered as soon as one ends, before a waiting
// periodic trigger; requests are served in order. It also waits while no
// checkpoint id is reserved (a Reserve is asked for at once).
//
// The Trigger decision that starts the checkpoint carries the request's id
// (Trigger.Request), and so does its Record; a request dropped without a
// checkpoint — the Core shut down, every participant left, or the id
// reservation it waited for failed — comes back as a Refused decision with
// the request's id. The request is refused at once if the Core is shut
// down (ErrShutdown, wrapping the terminal error if the job failed), has no
// participant (ErrNoParticipants), or MaxQueuedRequests requests already
// wait (ErrTooManyRequests).
func (c *Core) RequestCheckpoint(now time.Time) (RequestID, error) {
	c.advance(now)
	defer c.afterStep()
	switch {
	case c.shutdown:
		return 0, c.shutdownErr()
	case len(c.participants) == 0:
		return 0, ErrNoParticipants
	case len(c.requests) >= MaxQueuedRequests:
		return 0, fmt.Errorf("%w (%d)", ErrTooManyRequests, len(c.requests))
	}
	c.lastRequest++
	c.requests = append(c.requests, c.lastRequest)
	return c.lastRequest, nil
}

// Ack delivers participant from's acknowledgement of checkpoint id with its
// payload. When the last participant of a pending checkpoint acknowledges,
// the checkpoint is finalized (a Finalize decision, once no other Finalize
// is outstanding). Acknowledgements that cannot be applied have their
// payload's files discarded (see MessageResult), except files that a live
// checkpoint references. An invalid payload (ErrInvalidPayload, returned)
// declines the checkpoint on the participant's behalf.
func (c *Core) Ack(now time.Time, id CheckpointID, from ParticipantID, payload Payload) (MessageResult, error) {
	c.advance(now)
	defer c.afterStep()
	files, verr := payload.validate()
	if verr != nil {
		verr = fmt.Errorf("checkpoint %d, participant %q: %w", id, from, verr)
	}
	p := c.find(id)
	if p == nil {
		res := c.unknownOrLate(id)
		if _, ok := c.savepoints[id]; !ok {
			reason := DiscardUnknownAck
			if res == MessageLate {
				reason = DiscardLateAck
			}
			c.discardUnreferenced(id, from, reason, files)
		}
		return res, verr
	}
	if !p.isParticipant(from) {
		c.discardUnreferenced(id, from, DiscardUnknownAck, files)
		return MessageUnknownParticipant, verr
	}
	if _, ok := p.acks[from]; ok {
		c.discardUnreferenced(id, from, DiscardDuplicateAck, files)
		return MessageDuplicate, verr
	}
	if verr != nil {
		c.discardUnreferenced(id, from, DiscardInvalidAck, files)
		c.abort(p, AbortDeclined, from, verr)
		return MessageRejected, verr
	}
	payload.Files = files
	payload.OperatorState = slices.Clone(payload.OperatorState)
	c.ref(files)
	p.acks[from] = ParticipantState{Participant: from, AckedAt: c.now, Payload: payload}
	if len(p.acks) == len(p.participants) {
		if err := checkCoverage(p.checkpoint().Participants); err != nil {
			c.abort(p, AbortIncomplete, "", fmt.Errorf("checkpoint %d: %w", id, err))
			return MessageAccepted, nil
		}
		p.fullyAcked = true
		p.ackedAt = c.now
	}
	return MessageAccepted, nil
}

// Decline delivers participant from's refusal of checkpoint id. A pending
// checkpoint that still waits for acknowledgements is aborted — only that
// one: other pending checkpoints go on. The failure counts towards
// TolerableFailures unless cause wraps ErrNotReady.
func (c *Core) Decline(now time.Time, id CheckpointID, from ParticipantID, cause error) MessageResult {
	c.advance(now)
	defer c.afterStep()
	p := c.find(id)
	switch {
	case p == nil:
		return c.unknownOrLate(id)
	case !p.isParticipant(from):
		return MessageUnknownParticipant
	case p.fullyAcked:
		return MessageLate
	}
	c.abort(p, AbortDeclined, from, cause)
	return MessageAccepted
}

// TriggerFailed reports that the driver could not start checkpoint id: it
// could not prepare the checkpoint's storage or deliver a trigger. A
// pending checkpoint that still waits for acknowledgements is aborted; the
// failure counts as an I/O failure.
func (c *Core) TriggerFailed(now time.Time, id CheckpointID, cause error) MessageResult {
	c.advance(now)
	defer c.afterStep()
	p := c.find(id)
	switch {
	case p == nil:
		return c.unknownOrLate(id)
	case p.fullyAcked:
		return MessageLate
	}
	c.abort(p, AbortTriggerFailed, "", cause)
	return MessageAccepted
}

// StoreResult reports the outcome of the outstanding Finalize of
// checkpoint id: err is nil if its metadata was committed.
//
// On success the checkpoint is completed: a savepoint is handed to the user
// (its files are never deleted); a checkpoint joins the retained set, the
// oldest retained checkpoints beyond Config.Retained are discarded, pending
// checkpoints with lower ids (savepoints excepted) are aborted as subsumed,
// and the participants are notified. On failure the checkpoint is aborted
// and its files and metadata discarded — unless err wraps
// ErrOutcomeUnknown, in which case the files are kept.
//
// A result for a checkpoint that is not being finalized is an error
// (ErrUnexpectedStoreResult) and changes nothing.
func (c *Core) StoreResult(now time.Time, id CheckpointID, err error) error {
	p := c.finalizing
	if p == nil || p.id != id {
		return fmt.Errorf("%w: checkpoint %d", ErrUnexpectedStoreResult, id)
	}
	c.advance(now)
	defer c.afterStep()
	c.finalizing = nil
	if err != nil {
		c.abort(p, AbortFinalizeFailed, "", err)
		return nil
	}
	c.complete(p)
	return nil
}

// ReserveResult reports the outcome of the outstanding Reserve decision
// with limit: err is nil if the counter is durable up to limit. On success
// ids below limit may be issued, and a periodic trigger that waited for
// them fires. On failure nothing changes but the Core's plans: if a
// periodic trigger waited for ids, it counts as a failed checkpoint (an I/O
// failure, as Flink counts a failing id counter; the Fail decision's error
// then wraps ErrIDReservationFailed and err) and is due again an Interval
// later, when the reservation is retried. A failed reservation made ahead
// of need is retried after the next trigger, and does not count.
//
// A result that answers no outstanding Reserve is an error
// (ErrUnexpectedReserveResult) and changes nothing.
func (c *Core) ReserveResult(now time.Time, limit CheckpointID, err error) error {
	if c.reserving == 0 || limit != c.reserving {
		return fmt.Errorf("%w: limit %d", ErrUnexpectedReserveResult, limit)
	}
	c.advance(now)
	defer c.afterStep()
	c.reserving = 0
	if err == nil {
		c.idLimit = max(c.idLimit, limit)
		c.reserveErr = false
		return nil
	}
	c.reserveErr = true
	if !c.canIssue() {
		c.refuseRequests(RefusedNoIDs)
	}
	if c.idWait && !c.shutdown {
		c.idWait, c.periodicQueued = false, false
		c.nextTrigger = c.now.Add(c.cfg.Interval)
		c.emit(Refused{Reason: RefusedNoIDs, RetryAt: c.nextTrigger})
		if c.failures.failureWithoutID() {
			c.fail(fmt.Errorf("%w (%d tolerated); the last failure: %w: %w",
				ErrTooManyFailures, c.cfg.TolerableFailures, ErrIDReservationFailed, err))
		}
	}
	return nil
}

// AddParticipant adds a participant. Checkpoints triggered from now on
// wait for it too; pending ones do not.
func (c *Core) AddParticipant(id ParticipantID) error {
	if id == "" {
		return fmt.Errorf("%w: empty id", ErrInvalidParticipant)
	}
	if _, ok := c.participants[id]; ok {
		return fmt.Errorf("%w: %q is already a participant", ErrInvalidParticipant, id)
	}
	c.participants[id] = struct{}{}
	return nil
}

// RemoveParticipant removes a participant (its operator instance stopped or
// failed). Pending checkpoints that still wait for its acknowledgement can
// never complete and are aborted (the failure does not count).
func (c *Core) RemoveParticipant(now time.Time, id ParticipantID) error {
	if _, ok := c.participants[id]; !ok {
		return fmt.Errorf("%w: %q is not a participant", ErrInvalidParticipant, id)
	}
	c.advance(now)
	defer c.afterStep()
	delete(c.participants, id)
	for _, p := range slices.Clone(c.pending) {
		if p.done || p.fullyAcked || !p.isParticipant(id) {
			continue
		}
		if _, acked := p.acks[id]; !acked {
			c.abort(p, AbortParticipantLost, id, nil)
		}
	}
	return nil
}

// Shutdown stops the coordinator: pending checkpoints are aborted and their
// files discarded, and no checkpoint is triggered any more. A Finalize
// still outstanding is not aborted — its metadata may be landing — and its
// StoreResult is handled as usual. Completed checkpoints stay: a restarted
// job restores from them. Shutdown is idempotent.
func (c *Core) Shutdown(now time.Time) {
	if now.After(c.now) {
		c.now = now
	}
	c.stop(nil)
	c.emitSchedule()
}

// Participants returns the participants, sorted.
func (c *Core) Participants() []ParticipantID {
	return slices.Sorted(maps.Keys(c.participants))
}

// NextID returns the id the next checkpoint will get: the value of the
// checkpoint id counter to persist (without Config.IDReservation).
func (c *Core) NextID() CheckpointID { return c.nextID }

// IDLimit returns, with Config.IDReservation, the reserved limit: ids below
// it may be issued without another reservation. It is zero without
// reservations.
func (c *Core) IDLimit() CheckpointID { return c.idLimit }

// Pending returns the ids of the pending checkpoints (those triggered and
// neither completed nor aborted, including one being finalized),
// ascending.
func (c *Core) Pending() []CheckpointID {
	ids := make([]CheckpointID, len(c.pending))
	for i, p := range c.pending {
		ids[i] = p.id
	}
	return ids
}

// Retained returns the retained completed checkpoints, oldest first. They
// share memory with the Core: treat them as read-only.
func (c *Core) Retained() []Checkpoint { return slices.Clone(c.retained) }

// Latest returns the newest retained checkpoint: the one to restore.
func (c *Core) Latest() (Checkpoint, bool) {
	if len(c.retained) == 0 {
		return Checkpoint{}, false
	}
	return c.retained[len(c.retained)-1], true
}

// NextDeadline returns when the Core next needs Tick: the earliest of the
// next periodic trigger and the deadlines of pending checkpoints still
// waiting for acknowledgements. ok is false if nothing is scheduled.
func (c *Core) NextDeadline() (at time.Time, ok bool) {
	if !c.shutdown && !c.nextTrigger.IsZero() {
		at = c.nextTrigger
	}
	for _, p := range c.pending {
		if !p.fullyAcked && (at.IsZero() || p.deadline.Before(at)) {
			at = p.deadline
		}
	}
	return at, !at.IsZero()
}

// Err returns the terminal error once the Core has failed the job (a Fail
// decision), and nil before.
func (c *Core) Err() error { return c.err }

// Stats returns a copy of the Core's statistics.
func (c *Core) Stats() *Stats { return c.stats.Clone() }

// emit queues a decision and feeds the stats.
func (c *Core) emit(d Decision) {
	c.out = append(c.out, d)
	c.stats.Observe(d)
}

// advance moves the Core's time to now (never backwards) and expires
// pending checkpoints whose deadline has passed: time-driven events happen
// before the input that carries the time.
func (c *Core) advance(now time.Time) {
	if now.After(c.now) {
		c.now = now
	}
	for _, p := range slices.Clone(c.pending) {
		if !p.done && !p.fullyAcked && !c.now.Before(p.deadline) {
			c.abort(p, AbortExpired, "", nil)
		}
	}
}

// afterStep runs what may follow any input: start the next Finalize, fire
// a due periodic trigger, reserve ids ahead of need, and tell the driver
// when to Tick next.
func (c *Core) afterStep() {
	c.startFinalize()
	c.maybeTriggerRequested()
	c.maybeTriggerPeriodic()
	c.maybeReserve(false)
	c.emitSchedule()
}

// canIssue reports whether the next id may be issued: it is reserved, or
// reservations are off.
func (c *Core) canIssue() bool {
	return c.cfg.IDReservation == 0 || c.nextID < c.idLimit
}

// maybeReserve emits a Reserve decision unless one is outstanding:
// because an id is needed now (needed), or ahead of need, when no more than
// half a reservation remains and the last reservation did not fail.
func (c *Core) maybeReserve(needed bool) {
	n := CheckpointID(c.cfg.IDReservation)
	if n == 0 || c.shutdown || c.reserving != 0 {
		return
	}
	if !needed && (c.reserveErr || c.idLimit-c.nextID > n/2) {
		return
	}
	limit := min(max(c.idLimit, c.nextID)+n, MaxID)
	if limit <= c.idLimit {
		return // at MaxID: nothing more to reserve
	}
	c.reserving = limit
	c.emit(Reserve{Limit: limit})
}

func (c *Core) emitSchedule() {
	at, _ := c.NextDeadline()
	if !at.Equal(c.scheduled) {
		c.scheduled = at
		c.emit(Schedule{At: at})
	}
}

func (c *Core) find(id CheckpointID) *pending {
	i, ok := slices.BinarySearchFunc(c.pending, id, func(p *pending, id CheckpointID) int { return cmp.Compare(p.id, id) })
	if !ok {
		return nil
	}
	return c.pending[i]
}

func (c *Core) unknownOrLate(id CheckpointID) MessageResult {
	if id == 0 || id >= c.nextID {
		return MessageUnknownCheckpoint
	}
	return MessageLate
}

func (c *Core) maybeTriggerPeriodic() {
	if c.shutdown {
		return
	}
	if !c.periodicQueued && (c.nextTrigger.IsZero() || c.now.Before(c.nextTrigger)) {
		return
	}
	if len(c.participants) == 0 {
		c.periodicQueued, c.idWait = false, false
		c.nextTrigger = c.now.Add(c.cfg.Interval)
		c.emit(Refused{Reason: RefusedNoParticipants, RetryAt: c.nextTrigger})
		return
	}
	if len(c.pending) >= c.cfg.MaxConcurrent {
		if !c.periodicQueued {
			c.periodicQueued = true
			c.nextTrigger = time.Time{}
			c.emit(Refused{Reason: RefusedTooManyPending})
		}
		return
	}
	if earliest := c.lastCompletion.Add(c.cfg.MinPause); c.now.Before(earliest) {
		c.periodicQueued, c.idWait = false, false
		c.nextTrigger = earliest
		c.emit(Refused{Reason: RefusedMinPause, RetryAt: earliest})
		return
	}
	if !c.canIssue() {
		c.maybeReserve(true)
		if !c.idWait {
			c.periodicQueued, c.idWait = true, true
			c.nextTrigger = time.Time{}
			c.emit(Refused{Reason: RefusedNoIDs})
		}
		return
	}
	c.periodicQueued, c.idWait = false, false
	c.trigger(Options{}, 0)
	c.nextTrigger = c.now.Add(c.cfg.Interval)
}

// maybeTriggerRequested triggers the waiting on-demand requests, oldest
// first, while there is a free slot and an id for them.
func (c *Core) maybeTriggerRequested() {
	for len(c.requests) > 0 && !c.shutdown {
		if len(c.participants) == 0 {
			c.refuseRequests(RefusedNoParticipants)
			return
		}
		if len(c.pending) >= c.cfg.MaxConcurrent {
			return
		}
		if !c.canIssue() {
			c.maybeReserve(true)
			return
		}
		r := c.requests[0]
		c.requests = slices.Delete(c.requests, 0, 1)
		c.trigger(Options{}, r)
	}
}

// refuseRequests drops every waiting on-demand request.
func (c *Core) refuseRequests(reason RefuseReason) {
	for _, r := range c.requests {
		c.emit(Refused{Reason: reason, Request: r})
	}
	c.requests = nil
}

// trigger starts a checkpoint with the current participants, answering
// on-demand request req (zero for none).
func (c *Core) trigger(opts Options, req RequestID) CheckpointID {
	p := &pending{
		id:           c.nextID,
		opts:         opts,
		request:      req,
		triggeredAt:  c.now,
		deadline:     c.now.Add(c.cfg.Timeout),
		participants: c.Participants(),
		acks:         map[ParticipantID]ParticipantState{},
	}
	c.nextID++
	c.reserveErr = false
	c.pending = append(c.pending, p)
	c.emit(Trigger{
		ID:           p.id,
		Options:      opts,
		At:           p.triggeredAt,
		Deadline:     p.deadline,
		Participants: p.participants,
		Request:      req,
	})
	return p.id
}

// startFinalize asks for the Finalize of the lowest fully acknowledged
// checkpoint, unless one is outstanding. Finalizing one at a time keeps
// completions in id order: a checkpoint waiting here is subsumed if a newer
// one completes first.
func (c *Core) startFinalize() {
	if c.finalizing != nil {
		return
	}
	for _, p := range c.pending {
		if p.fullyAcked {
			c.finalizing = p
			c.emit(Finalize{Checkpoint: p.checkpoint()})
			return
		}
	}
}

func (c *Core) complete(p *pending) {
	c.remove(p)
	cp := p.checkpoint()
	c.lastCompletion = c.now
	c.failures.success(p.id)
	rec := c.record(p, StatusCompleted, nil)
	c.emit(Report{Record: rec})
	if p.opts.Savepoint {
		// The user owns the savepoint's files from now on.
		c.unrefAll(cp.Participants)
		c.savepoints[p.id] = struct{}{}
		c.emit(NotifyComplete{ID: p.id, Savepoint: true, Final: rec.Final, Participants: p.participants})
		return
	}
	c.retained = append(c.retained, cp)
	for len(c.retained) > c.cfg.Retained {
		old := c.retained[0]
		c.retained = slices.Delete(c.retained, 0, 1)
		c.emit(Discard{ID: old.ID, Reason: DiscardSubsumed, Metadata: true, Files: c.unrefAll(old.Participants)})
	}
	for _, q := range slices.Clone(c.pending) {
		if !q.done && !q.opts.Savepoint && q.id < p.id {
			c.abort(q, AbortSubsumed, "", nil)
		}
	}
	if p.id > c.lastNotified {
		c.lastNotified = p.id
		c.emit(NotifyComplete{ID: p.id, Final: rec.Final, Participants: p.participants})
	}
}

// abort ends a pending checkpoint: its files are discarded, its
// participants notified, its failure counted.
func (c *Core) abort(p *pending, reason AbortReason, who ParticipantID, cause error) {
	c.remove(p)
	if c.finalizing == p {
		c.finalizing = nil
	}
	aerr := &AbortError{ID: p.id, Savepoint: p.opts.Savepoint, Reason: reason, Participant: who, Cause: cause}
	files := c.unrefAll(p.checkpoint().Participants)
	metadata := reason == AbortFinalizeFailed
	if metadata && errors.Is(cause, ErrOutcomeUnknown) {
		files, metadata = nil, false
	}
	if len(files) > 0 || metadata {
		c.emit(Discard{ID: p.id, Reason: DiscardAborted, Metadata: metadata, Files: files})
	}
	c.emit(NotifyAborted{ID: p.id, Participants: p.participants, Err: aerr})
	c.emit(Report{Record: c.record(p, StatusFailed, aerr)})
	if reason.counts(p.opts.Savepoint, cause) && c.failures.failure(p.id) {
		c.fail(fmt.Errorf("%w (%d tolerated); the last failure: %w", ErrTooManyFailures, c.cfg.TolerableFailures, aerr))
	}
}

// fail makes the job fail with err and shuts the Core down.
func (c *Core) fail(err error) {
	if c.err != nil {
		return
	}
	c.err = err
	c.emit(Fail{Err: err})
	c.stop(err)
}

// stop shuts the Core down, aborting every pending checkpoint but the one
// being finalized.
func (c *Core) stop(cause error) {
	if c.shutdown {
		return
	}
	c.shutdown = true
	if c.periodicQueued || !c.nextTrigger.IsZero() {
		c.emit(Refused{Reason: RefusedShutdown})
	}
	c.refuseRequests(RefusedShutdown)
	c.periodicQueued, c.idWait = false, false
	c.nextTrigger = time.Time{}
	for _, p := range slices.Clone(c.pending) {
		if !p.done && p != c.finalizing {
			c.abort(p, AbortShutdown, "", cause)
		}
	}
}

func (c *Core) remove(p *pending) {
	p.done = true
	c.pending = slices.DeleteFunc(c.pending, func(q *pending) bool { return q == p })
}

func (c *Core) record(p *pending, status Status, err *AbortError) Record {
	r := Record{
		ID:          p.id,
		Savepoint:   p.opts.Savepoint,
		Location:    p.opts.Location,
		Status:      status,
		TriggeredAt: p.triggeredAt,
		EndedAt:     c.now,
		Request:     p.request,
		Err:         err,
	}
	r.Final = len(p.acks) == len(p.participants)
	for _, id := range p.participants {
		ps := ParticipantStats{Participant: id}
		if a, ok := p.acks[id]; ok {
			ps.Acked = true
			ps.AckedAt = a.AckedAt
			ps.SyncDuration = a.Payload.SyncDuration
			ps.AsyncDuration = a.Payload.AsyncDuration
			ps.Bytes = a.Payload.Bytes
			ps.Finished = a.Payload.Finished
			r.Bytes += a.Payload.Bytes
			r.Final = r.Final && a.Payload.Finished
		}
		r.Participants = append(r.Participants, ps)
	}
	return r
}

// ref records one more reference to each of files (sorted, unique).
func (c *Core) ref(files []string) {
	for _, f := range files {
		c.refs[f]++
	}
}

// unref drops one reference to each of files (sorted, unique) and returns
// those no longer referenced: the ones to delete.
func (c *Core) unref(files []string) []string {
	var free []string
	for _, f := range files {
		n := c.refs[f] - 1
		if n > 0 {
			c.refs[f] = n
			continue
		}
		delete(c.refs, f)
		free = append(free, f)
	}
	return free
}

// unrefAll drops the references of every payload of participants and
// returns the files no longer referenced, sorted and unique.
func (c *Core) unrefAll(participants []ParticipantState) []string {
	var free []string
	for _, ps := range participants {
		free = append(free, c.unref(ps.Payload.Files)...)
	}
	slices.Sort(free)
	return slices.Compact(free)
}

// discardUnreferenced discards the files of a rejected acknowledgement that
// no live checkpoint references.
func (c *Core) discardUnreferenced(id CheckpointID, from ParticipantID, reason DiscardReason, files []string) {
	var free []string
	for _, f := range files {
		if c.refs[f] == 0 {
			free = append(free, f)
		}
	}
	if len(free) > 0 {
		c.emit(Discard{ID: id, Participant: from, Reason: reason, Files: free})
	}
}
