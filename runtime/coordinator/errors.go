package coordinator

import (
	"errors"
	"fmt"
)

// Errors a user or a driver can meet, to be tested with errors.Is.
var (
	// ErrInvalidConfig reports a Config field out of range; the message
	// names the field.
	ErrInvalidConfig = errors.New("coordinator: invalid config")
	// ErrInvalidRecovery reports a Recovery that cannot seed a Core: a zero
	// or repeated checkpoint id, a savepoint among the retained checkpoints,
	// an invalid payload, an id beyond MaxID.
	ErrInvalidRecovery = errors.New("coordinator: invalid recovery")
	// ErrInvalidParticipant reports an empty participant id, the addition
	// of a participant already present or the removal of one that is not.
	ErrInvalidParticipant = errors.New("coordinator: invalid participant")
	// ErrInvalidPayload reports an acknowledgement whose payload has an
	// empty file name or a negative size or duration.
	ErrInvalidPayload = errors.New("coordinator: invalid acknowledgement payload")
	// ErrInvalidLocation reports a savepoint request without a location.
	ErrInvalidLocation = errors.New("coordinator: savepoint location is required")
	// ErrUnexpectedStoreResult reports a StoreResult for a checkpoint that
	// is not being finalized. The Core ignores it.
	ErrUnexpectedStoreResult = errors.New("coordinator: store result for a checkpoint that is not being finalized")
	// ErrUnexpectedReserveResult reports a ReserveResult that answers no
	// outstanding Reserve decision. The Core ignores it.
	ErrUnexpectedReserveResult = errors.New("coordinator: reserve result for no outstanding reservation")

	// ErrNotReady, wrapped in the cause of a decline, says the participant
	// could not take part for a benign reason (not running yet, closing,
	// input ended). Such declines abort the checkpoint but do not count
	// towards TolerableFailures, as in Flink.
	ErrNotReady = errors.New("coordinator: participant not ready to checkpoint")
	// ErrOutcomeUnknown, wrapped in the error given to StoreResult, says the
	// driver cannot tell whether the metadata was committed (a timeout on an
	// object store, say). The checkpoint is aborted but its files are kept:
	// they may belong to a visible checkpoint. Storage cleanup after a
	// restart deals with them.
	ErrOutcomeUnknown = errors.New("coordinator: outcome of the metadata write is unknown")

	// ErrTooManyFailures is the terminal error of a job whose consecutive
	// checkpoint failures exceeded TolerableFailures. The Fail decision
	// carries it, wrapping the last failure.
	ErrTooManyFailures = errors.New("coordinator: exceeded the tolerable number of consecutive checkpoint failures")

	// ErrTooManyPending: MaxConcurrent checkpoints are pending.
	ErrTooManyPending = errors.New("coordinator: too many pending checkpoints")
	// ErrMinPause: the minimum pause since the last completed checkpoint
	// has not passed.
	ErrMinPause = errors.New("coordinator: minimum pause between checkpoints has not passed")
	// ErrShutdown: the coordinator has been shut down (or failed the job).
	ErrShutdown = errors.New("coordinator: shut down")
	// ErrNoParticipants: there is no participant to checkpoint.
	ErrNoParticipants = errors.New("coordinator: no participants")
	// ErrNoIDs: every reserved checkpoint id has been issued and the
	// reservation of more (a Reserve decision) has not succeeded yet. A
	// savepoint request may be retried once it has.
	ErrNoIDs = errors.New("coordinator: no checkpoint id reserved")
	// ErrIDReservationFailed: the driver could not make a reservation of
	// checkpoint ids durable, and a checkpoint could not be triggered for
	// want of an id. It counts as a failed checkpoint (Flink's id-counter
	// failure).
	ErrIDReservationFailed = errors.New("coordinator: checkpoint id reservation failed")

	// ErrDeclined: a participant declined the checkpoint.
	ErrDeclined = errors.New("coordinator: checkpoint declined")
	// ErrExpired: the checkpoint was not acknowledged within the timeout.
	ErrExpired = errors.New("coordinator: checkpoint expired")
	// ErrSubsumed: a newer checkpoint completed first.
	ErrSubsumed = errors.New("coordinator: checkpoint subsumed")
	// ErrTriggerFailed: the driver could not start the checkpoint (prepare
	// its storage, deliver a trigger).
	ErrTriggerFailed = errors.New("coordinator: checkpoint trigger failed")
	// ErrFinalizeFailed: the checkpoint's metadata could not be written.
	ErrFinalizeFailed = errors.New("coordinator: checkpoint finalization failed")
	// ErrParticipantLost: a participant left before acknowledging.
	ErrParticipantLost = errors.New("coordinator: participant lost")
	// ErrIncomplete: every participant acknowledged, but their snapshots
	// do not hold every key group of every operator exactly once, so the
	// checkpoint could not be restored; it is aborted (AbortIncomplete)
	// instead of completed. The message names the operator and the key
	// groups at fault.
	ErrIncomplete = errors.New("coordinator: checkpoint does not cover every key group")

	// ErrTooManyRequests: MaxQueuedRequests on-demand checkpoint requests
	// are already waiting.
	ErrTooManyRequests = errors.New("coordinator: too many checkpoint requests waiting")
)

// RefuseReason is why a periodic trigger did not start a checkpoint.
type RefuseReason uint8

// The reasons a trigger is refused.
const (
	// RefusedTooManyPending: MaxConcurrent checkpoints are pending. A
	// periodic trigger waits and fires as soon as one finishes.
	RefusedTooManyPending RefuseReason = iota + 1
	// RefusedMinPause: MinPause has not passed since the last completion.
	// The periodic trigger is rescheduled for when it has.
	RefusedMinPause
	// RefusedShutdown: the coordinator has been shut down.
	RefusedShutdown
	// RefusedNoParticipants: there is no participant. The periodic trigger
	// is rescheduled one Interval later.
	RefusedNoParticipants
	// RefusedNoIDs: every reserved checkpoint id has been issued. With a
	// zero RetryAt the periodic trigger waits for the outstanding
	// reservation and fires as soon as it succeeds; with a RetryAt the
	// reservation failed, and the trigger is due again then.
	RefusedNoIDs
)

var refuseNames = [...]string{
	RefusedTooManyPending: "too-many-pending",
	RefusedMinPause:       "min-pause",
	RefusedShutdown:       "shutdown",
	RefusedNoParticipants: "no-participants",
	RefusedNoIDs:          "no-ids",
}

var refuseErrs = [...]error{
	RefusedTooManyPending: ErrTooManyPending,
	RefusedMinPause:       ErrMinPause,
	RefusedShutdown:       ErrShutdown,
	RefusedNoParticipants: ErrNoParticipants,
	RefusedNoIDs:          ErrNoIDs,
}

// String returns the reason's name, e.g. "min-pause".
func (r RefuseReason) String() string {
	if r >= RefusedTooManyPending && int(r) < len(refuseNames) {
		return refuseNames[r]
	}
	return fmt.Sprintf("RefuseReason(%d)", uint8(r))
}

// Err returns the sentinel error of the reason (ErrTooManyPending,
// ErrMinPause, ErrShutdown, ErrNoParticipants or ErrNoIDs).
func (r RefuseReason) Err() error {
	if r >= RefusedTooManyPending && int(r) < len(refuseErrs) {
		return refuseErrs[r]
	}
	return fmt.Errorf("coordinator: trigger refused (%v)", r)
}

// AbortReason is why a pending checkpoint was aborted.
type AbortReason uint8

// The reasons a checkpoint is aborted. Only declines (other than
// ErrNotReady ones), expiries, trigger (I/O) failures, finalize failures
// and overlapping coverage count towards TolerableFailures.
const (
	// AbortDeclined: a participant declined it.
	AbortDeclined AbortReason = iota + 1
	// AbortExpired: it was not acknowledged within the timeout.
	AbortExpired
	// AbortSubsumed: a newer checkpoint completed first.
	AbortSubsumed
	// AbortTriggerFailed: the driver could not start it (I/O).
	AbortTriggerFailed
	// AbortFinalizeFailed: its metadata could not be written.
	AbortFinalizeFailed
	// AbortParticipantLost: a participant left before acknowledging it.
	AbortParticipantLost
	// AbortShutdown: the coordinator shut down or failed the job.
	AbortShutdown
	// AbortIncomplete: the acknowledged snapshots do not cover every key
	// group of every operator (ErrIncomplete). It counts as a failure
	// unless the cause is a gap (which wraps ErrNotReady): instances claim
	// the same key groups, or disagree on maxParallelism.
	AbortIncomplete
)

var abortNames = [...]string{
	AbortDeclined:        "declined",
	AbortExpired:         "expired",
	AbortSubsumed:        "subsumed",
	AbortTriggerFailed:   "trigger-failed",
	AbortFinalizeFailed:  "finalize-failed",
	AbortParticipantLost: "participant-lost",
	AbortShutdown:        "shutdown",
	AbortIncomplete:      "incomplete",
}

var abortErrs = [...]error{
	AbortDeclined:        ErrDeclined,
	AbortExpired:         ErrExpired,
	AbortSubsumed:        ErrSubsumed,
	AbortTriggerFailed:   ErrTriggerFailed,
	AbortFinalizeFailed:  ErrFinalizeFailed,
	AbortParticipantLost: ErrParticipantLost,
	AbortShutdown:        ErrShutdown,
	AbortIncomplete:      ErrIncomplete,
}

// String returns the reason's name, e.g. "expired".
func (r AbortReason) String() string {
	if r >= AbortDeclined && int(r) < len(abortNames) {
		return abortNames[r]
	}
	return fmt.Sprintf("AbortReason(%d)", uint8(r))
}

// Err returns the sentinel error of the reason, e.g. ErrExpired.
func (r AbortReason) Err() error {
	if r >= AbortDeclined && int(r) < len(abortErrs) {
		return abortErrs[r]
	}
	return fmt.Errorf("coordinator: checkpoint aborted (%v)", r)
}

// AbortError describes an aborted checkpoint. errors.Is matches it against
// its reason's sentinel (ErrExpired, ErrDeclined, ...) and against its
// cause.
type AbortError struct {
	// ID is the aborted checkpoint.
	ID CheckpointID
	// Savepoint reports whether it was a savepoint.
	Savepoint bool
	// Reason is why it was aborted.
	Reason AbortReason
	// Participant is the participant at fault, if any: the one that
	// declined or was lost.
	Participant ParticipantID
	// Cause is the underlying error, if any: a decline's reason, a storage
	// error.
	Cause error
}

// Error describes the abort, e.g.
// "coordinator: checkpoint 7 aborted: declined by a: disk full".
func (e *AbortError) Error() string {
	kind := "checkpoint"
	if e.Savepoint {
		kind = "savepoint"
	}
	msg := fmt.Sprintf("coordinator: %s %d aborted: %v", kind, e.ID, e.Reason)
	if e.Participant != "" {
		by := "by"
		if e.Reason == AbortParticipantLost {
			by = "waiting for"
		}
		msg += fmt.Sprintf(" %s %s", by, e.Participant)
	}
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

// Unwrap returns the reason's sentinel and the cause, for errors.Is and
// errors.As.
func (e *AbortError) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Reason.Err()}
	}
	return []error{e.Reason.Err(), e.Cause}
}

// Counted reports whether the abort counts towards
// Config.TolerableFailures: whether it is a failure in the sense of Flink's
// CheckpointFailureManager (see the package doc), rather than a benign end
// — subsumed, shut down, a participant lost or not ready.
func (e *AbortError) Counted() bool { return e.Reason.counts(e.Savepoint, e.Cause) }

// counts reports whether an abort of a checkpoint (savepoint if sp) for
// this reason and cause counts towards TolerableFailures. The rules are
// Flink's CheckpointFailureManager: declines, expiries, I/O and finalize
// failures count, benign declines do not; of a savepoint's failures only a
// participant's decline counts (the others are the user's business, and a
// restart would not help). A checkpoint whose snapshots overlap counts
// (the job is misconfigured); one with a gap does not (an instance was
// missing: its cause wraps ErrNotReady, like a benign decline).
func (r AbortReason) counts(savepoint bool, cause error) bool {
	switch r {
	case AbortDeclined, AbortIncomplete:
		return !errors.Is(cause, ErrNotReady)
	case AbortExpired, AbortTriggerFailed, AbortFinalizeFailed:
		return !savepoint
	default:
		return false
	}
}
