package coordinator

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stategen/stategen/runtime"
)

// CheckpointID identifies a checkpoint or savepoint of a job. The first id
// is 1; ids strictly increase and never repeat, across restarts too when the
// coordinator is seeded with the recovered counter (Recovery.NextID).
type CheckpointID uint64

// MaxID bounds the ids a Core issues and accepts in a Recovery. It is far
// beyond any real job (a checkpoint per millisecond for a hundred million
// years) and keeps the counter far from wrapping.
const MaxID CheckpointID = 1 << 62

// ParticipantID names a participant: one operator instance that snapshots
// its state when triggered, e.g. "window/3". It must not be empty.
type ParticipantID string

// Options says what a trigger asks for.
type Options struct {
	// Savepoint reports whether this is a savepoint: forced (it ignores
	// MaxConcurrent and MinPause), never subsumed, never deleted by
	// retention, owned by the user.
	Savepoint bool
	// Location is where a savepoint is written, chosen by the user. It is
	// empty for checkpoints, which go to the checkpoint storage.
	Location string
}

// Payload is what a participant hands back with its acknowledgement. The
// coordinator reads only Files (to delete them when the payload is
// discarded) and the statistics; OperatorState and Handle are carried to the
// completed checkpoint untouched.
type Payload struct {
	// Files names every file (object) the participant wrote for this
	// checkpoint, as the checkpoint storage names them. A discarded payload
	// is deleted through exactly these names. Names must not be empty.
	// Checkpoints may share files (the Core counts references and deletes a
	// file only when no live checkpoint names it any more), but a
	// savepoint's files are its own: they live in the savepoint's location
	// and no checkpoint names them.
	Files []string
	// Bytes is the size of the participant's snapshot.
	Bytes int64
	// SyncDuration is how long the synchronous phase of the snapshot took
	// on the operator's goroutine.
	SyncDuration time.Duration
	// AsyncDuration is how long the asynchronous phase (writing the files)
	// took.
	AsyncDuration time.Duration
	// OperatorState is a small opaque blob of operator state, typically
	// source positions, stored with the completed checkpoint and handed back
	// at restore.
	OperatorState []byte
	// KeyGroups says which key groups of which operator the snapshot
	// holds. The Core completes a checkpoint only if, for every operator
	// its participants name, their key groups tile all of the operator's
	// key groups exactly (see the package doc, "Coverage"). The zero value
	// says the participant holds no keyed state, and is not checked.
	KeyGroups KeyGroups
	// Finished reports that the participant had reached the end of its
	// input when it took the snapshot: its state and operator state will
	// not change any more. A checkpoint whose participants had all
	// finished is the job's final checkpoint (Record.Final).
	Finished bool
	// Handle is the checkpoint layer's own description of what the
	// participant wrote (for example its snapshot metadata). The coordinator
	// never looks inside it and never uses it to delete anything.
	Handle any
}

// KeyGroups names the key groups of one operator instance's keyed state:
// Range of the operator's MaxParallelism key groups. Every key group of a
// job's keyed state belongs to exactly one instance, so the instances of
// an operator tile [0, MaxParallelism) (see runtime.KeyGroupRangeForOperator).
type KeyGroups struct {
	// Operator names the operator the instance belongs to.
	Operator string
	// MaxParallelism is the operator's number of key groups.
	MaxParallelism int
	// Range is the instance's key groups.
	Range runtime.KeyGroupRange
}

// IsZero reports whether k names no keyed state.
func (k KeyGroups) IsZero() bool { return k == KeyGroups{} }

// validate checks p and returns its files sorted and without duplicates,
// as a new slice.
func (p Payload) validate() ([]string, error) {
	var files []string
	var err error
	for _, f := range p.Files {
		if f == "" {
			err = errors.New("empty file name")
			continue
		}
		files = append(files, f)
	}
	slices.Sort(files)
	files = slices.Compact(files)
	switch {
	case err != nil:
	case p.Bytes < 0:
		err = fmt.Errorf("negative Bytes %d", p.Bytes)
	case p.SyncDuration < 0 || p.AsyncDuration < 0:
		err = fmt.Errorf("negative duration (sync %v, async %v)", p.SyncDuration, p.AsyncDuration)
	case !p.KeyGroups.IsZero():
		err = p.KeyGroups.validate()
	}
	if err != nil {
		err = fmt.Errorf("%w: %v", ErrInvalidPayload, err)
	}
	return files, err
}

// ParticipantState is one participant's accepted acknowledgement of a
// checkpoint.
type ParticipantState struct {
	// Participant is who acknowledged.
	Participant ParticipantID
	// AckedAt is when the acknowledgement arrived.
	AckedAt time.Time
	// Payload is what the participant handed back. Its Files are sorted and
	// free of duplicates.
	Payload Payload
}

// Checkpoint is a checkpoint or savepoint that every participant has
// acknowledged: what the driver writes as its top-level metadata (Finalize)
// and what the completed-checkpoint store retains.
//
// A Checkpoint handed out by a Core shares memory with it: treat it as
// read-only.
type Checkpoint struct {
	// ID is the checkpoint's id.
	ID CheckpointID
	// Options are the options it was triggered with.
	Options Options
	// TriggeredAt is when it was triggered.
	TriggeredAt time.Time
	// AckedAt is when its last acknowledgement arrived.
	AckedAt time.Time
	// Participants holds every participant's acknowledgement, sorted by
	// participant.
	Participants []ParticipantState
}

// Files returns the files of every participant of c, sorted and without
// duplicates.
func (c Checkpoint) Files() []string {
	var files []string
	for _, p := range c.Participants {
		files = append(files, p.Payload.Files...)
	}
	slices.Sort(files)
	return slices.Compact(files)
}

// MessageResult is how a Core classified an acknowledgement or a decline.
type MessageResult uint8

// The classifications of messages from participants.
const (
	// MessageAccepted: the message was applied to a pending checkpoint.
	MessageAccepted MessageResult = iota + 1
	// MessageDuplicate: the participant had already acknowledged the
	// checkpoint. Files of the duplicate that the first acknowledgement does
	// not hold are discarded; a redelivered message therefore deletes
	// nothing.
	MessageDuplicate
	// MessageUnknownParticipant: the sender is not a participant of the
	// checkpoint. Its payload is discarded.
	MessageUnknownParticipant
	// MessageUnknownCheckpoint: no checkpoint with this id was ever
	// triggered. The payload is discarded.
	MessageUnknownCheckpoint
	// MessageLate: the checkpoint is no longer pending (it was aborted or
	// completed) or no longer waits for acknowledgements (every participant
	// has acknowledged). The payload is discarded, except for the files of
	// a completed savepoint, which belong to the user.
	MessageLate
	// MessageRejected: the payload was invalid; the checkpoint was declined
	// on the participant's behalf and the payload's files discarded.
	MessageRejected
)

var messageResultNames = [...]string{
	MessageAccepted:           "accepted",
	MessageDuplicate:          "duplicate",
	MessageUnknownParticipant: "unknown-participant",
	MessageUnknownCheckpoint:  "unknown-checkpoint",
	MessageLate:               "late",
	MessageRejected:           "rejected",
}

// String returns the result's name, e.g. "duplicate".
func (r MessageResult) String() string {
	if r >= MessageAccepted && int(r) < len(messageResultNames) {
		return messageResultNames[r]
	}
	return fmt.Sprintf("MessageResult(%d)", uint8(r))
}
