package coordinator

import "time"

// Decision is something a Core asks its driver to do, or tells it. The
// concrete types are Trigger, Finalize, Discard, NotifyComplete,
// NotifyAborted, Schedule, Reserve, Refused, Fail and Report; a driver switches on
// them and executes them in the order Ready returns them.
//
// Decisions share memory with the Core: treat them as read-only.
type Decision interface {
	decision()
}

// Trigger asks the driver to send a trigger for checkpoint ID to every one
// of Participants. A participant answers with Core.Ack or Core.Decline; if
// the driver cannot deliver a trigger or prepare the checkpoint's storage,
// it reports Core.TriggerFailed.
type Trigger struct {
	// ID is the new checkpoint's id.
	ID CheckpointID
	// Options says whether it is a savepoint, and where it goes.
	Options Options
	// At is the trigger time (the checkpoint's timestamp).
	At time.Time
	// Deadline is when the checkpoint expires unless every participant has
	// acknowledged it.
	Deadline time.Time
	// Participants are the participants to trigger, sorted; the checkpoint
	// completes when all of them have acknowledged.
	Participants []ParticipantID
	// Request is the on-demand request this checkpoint answers (see
	// Core.RequestCheckpoint); zero for periodic checkpoints and
	// savepoints.
	Request RequestID
}

// Finalize asks the driver to write the checkpoint's top-level metadata
// atomically through the checkpoint storage (at Checkpoint.Options.Location
// for a savepoint) and to report the outcome with Core.StoreResult. At most
// one Finalize is outstanding at a time; until its result arrives no other
// checkpoint completes.
type Finalize struct {
	// Checkpoint is the fully acknowledged checkpoint.
	Checkpoint Checkpoint
}

// DiscardReason is why files are discarded.
type DiscardReason uint8

// The reasons for discarding files.
const (
	// DiscardAborted: the files of a checkpoint that was aborted.
	DiscardAborted DiscardReason = iota + 1
	// DiscardSubsumed: the files of a completed checkpoint that newer ones
	// pushed out of the retained set.
	DiscardSubsumed
	// DiscardLateAck: an acknowledgement for a checkpoint that is no longer
	// pending.
	DiscardLateAck
	// DiscardUnknownAck: an acknowledgement for a checkpoint never
	// triggered, or from a sender that is not its participant.
	DiscardUnknownAck
	// DiscardDuplicateAck: the files of a second acknowledgement that the
	// first one does not hold.
	DiscardDuplicateAck
	// DiscardInvalidAck: the files of an acknowledgement whose payload was
	// invalid.
	DiscardInvalidAck
)

var discardNames = [...]string{
	DiscardAborted:      "aborted",
	DiscardSubsumed:     "subsumed",
	DiscardLateAck:      "late-ack",
	DiscardUnknownAck:   "unknown-ack",
	DiscardDuplicateAck: "duplicate-ack",
	DiscardInvalidAck:   "invalid-ack",
}

// String returns the reason's name, e.g. "late-ack".
func (r DiscardReason) String() string {
	if r >= DiscardAborted && int(r) < len(discardNames) {
		return discardNames[r]
	}
	return "DiscardReason(?)"
}

// Discard asks the driver to delete files. The Core never lists a file that
// an acknowledgement accepted for a pending, finalizing or retained
// checkpoint still references, nor any file of a late acknowledgement of a
// completed savepoint.
type Discard struct {
	// ID is the checkpoint the files were written for.
	ID CheckpointID
	// Participant is the sender of the acknowledgement whose files are
	// discarded; empty when a whole checkpoint is discarded.
	Participant ParticipantID
	// Reason is why.
	Reason DiscardReason
	// Metadata reports that the checkpoint's top-level metadata may exist
	// (a completed checkpoint dropped by retention, or a failed
	// finalization): the driver deletes it first, so that a crash midway
	// never leaves metadata pointing at missing files.
	Metadata bool
	// Files are the files to delete, sorted.
	Files []string
}

// NotifyComplete asks the driver to tell Participants that checkpoint ID
// completed: they may now commit side effects up to it (a source commits
// its offsets). Ids of successive NotifyComplete decisions of checkpoints
// strictly increase; a participant may miss one, and a higher id implies
// the lower ones.
//
// A savepoint's completion is notified too, with Savepoint set. It implies
// nothing about other checkpoints, and its id is not ordered with theirs:
// a savepoint is not part of the job's recovery lineage — after a crash
// the job restores its latest checkpoint, which may be older — so a
// participant commits side effects on a savepoint only when the job stops
// on it.
type NotifyComplete struct {
	// ID is the completed checkpoint or savepoint.
	ID CheckpointID
	// Savepoint reports whether it is a savepoint.
	Savepoint bool
	// Final reports that every participant had finished (Payload.Finished)
	// when it snapshotted: the checkpoint holds the job's final state, and
	// the participants may stop.
	Final bool
	// Participants are the checkpoint's participants; some may have left
	// since, and the driver skips those.
	Participants []ParticipantID
}

// NotifyAborted asks the driver to tell Participants that checkpoint ID was
// aborted, so that they stop work on it and release what they hold for it.
// Every abort is notified.
type NotifyAborted struct {
	// ID is the aborted checkpoint.
	ID CheckpointID
	// Participants are the checkpoint's participants.
	Participants []ParticipantID
	// Err says why.
	Err *AbortError
}

// Schedule tells the driver when the Core next needs Tick: for the next
// periodic trigger or the earliest expiry. It is emitted whenever that time
// changes; a zero At means no Tick is needed until some other input
// arrives. Core.NextDeadline returns the same time.
type Schedule struct {
	// At is when to call Tick.
	At time.Time
}

// Reserve asks the driver to make the checkpoint-id counter durable up to
// Limit — to persist "ids below Limit may have been issued" so that a
// restarted job starts at Limit or above — and to report the outcome with
// Core.ReserveResult. Only a Core with Config.IDReservation emits it, and
// at most one is outstanding at a time. Limits never decrease, and each is
// above every limit reported durable; a failed reservation may be asked
// for again with the same limit, so writing it must be idempotent.
type Reserve struct {
	// Limit is the new high-water mark: the Core will issue ids below it.
	Limit CheckpointID
}

// Refused reports that a due periodic trigger did not start a checkpoint,
// or, with Request set, that an on-demand request was dropped without a
// checkpoint: the Core shut down (RefusedShutdown), the participants left
// (RefusedNoParticipants), or the reservation of an id failed
// (RefusedNoIDs). A request that merely waits for a free slot or for ids
// is not refused. When the Core shuts down, the periodic trigger is
// refused once with RefusedShutdown.
type Refused struct {
	// Reason is why.
	Reason RefuseReason
	// RetryAt is when the periodic trigger is due again; zero for
	// RefusedTooManyPending, where it fires as soon as a pending checkpoint
	// finishes, for RefusedShutdown, and for requests.
	RetryAt time.Time
	// Request is the on-demand request dropped; zero for the periodic
	// trigger.
	Request RequestID
}

// Fail reports that the job must fail: its consecutive checkpoint failures
// exceeded TolerableFailures. Err wraps ErrTooManyFailures and the last
// failure. The Core has shut itself down: pending checkpoints are aborted
// and no more are triggered.
type Fail struct {
	// Err is the terminal error.
	Err error
}

// Report is the outcome of one checkpoint, emitted exactly once for every
// triggered checkpoint when it completes or aborts, with its statistics. A
// driver resolves savepoint requests with it and logs it; Stats keeps the
// recent ones.
type Report struct {
	// Record describes the checkpoint.
	Record Record
}

func (Trigger) decision()        {}
func (Finalize) decision()       {}
func (Discard) decision()        {}
func (NotifyComplete) decision() {}
func (NotifyAborted) decision()  {}
func (Schedule) decision()       {}
func (Reserve) decision()        {}
func (Refused) decision()        {}
func (Fail) decision()           {}
func (Report) decision()         {}
