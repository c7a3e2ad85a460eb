package etcdcoord

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/coordinator"
	"github.com/stategen/stategen/runtime/coordinator/driver"
)

// The values of the keys are JSON, one struct per kind of key. Field names
// are the wire format: they change only with wireVersion, which every
// value carries, so that processes of different versions notice each
// other instead of misreading.
const wireVersion = 1

// MaxMessage bounds an acknowledgement's encoded size: etcd refuses
// requests above 1.5 MiB by default. An acknowledgement is small unless the
// operator-state blob is large; one that does not fit is turned into a
// decline (ErrMessageTooLarge).
const MaxMessage = 1 << 20

// ErrMessageTooLarge reports an acknowledgement larger than MaxMessage.
var ErrMessageTooLarge = errors.New("etcdcoord: acknowledgement too large for etcd (is the operator-state blob too big?)")

// errBadMessage reports a value that cannot be decoded.
var errBadMessage = errors.New("etcdcoord: malformed message")

func decode(data []byte, v interface{ version() int }) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: %v", errBadMessage, err)
	}
	if v.version() != wireVersion {
		return fmt.Errorf("%w: version %d, this process speaks %d", errBadMessage, v.version(), wireVersion)
	}
	return nil
}

func encode(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Every message is plain data: this cannot happen.
		panic(fmt.Sprintf("etcdcoord: encoding %T: %v", v, err))
	}
	return string(b)
}

// memberMsg is a participant's registration, put with its lease.
type memberMsg struct {
	V           int    `json:"v"`
	Participant string `json:"participant"`
	Operator    string `json:"operator"`
	// Incarnation is random per registration, for the logs.
	Incarnation string `json:"incarnation"`
}

func (m *memberMsg) version() int { return m.V }

func (m *memberMsg) check(key coordinator.ParticipantID) error {
	switch {
	case coordinator.ParticipantID(m.Participant) != key:
		return fmt.Errorf("%w: registration of %q under the key of %q", errBadMessage, m.Participant, key)
	case checkpoint.ValidateName(m.Operator) != nil:
		return fmt.Errorf("%w: participant %q: invalid operator %q", errBadMessage, m.Participant, m.Operator)
	}
	return nil
}

// triggerMsg asks one participant to snapshot a checkpoint.
type triggerMsg struct {
	V          int       `json:"v"`
	ID         uint64    `json:"id"`
	Checkpoint string    `json:"checkpoint"`
	Savepoint  bool      `json:"savepoint,omitempty"`
	Location   string    `json:"location,omitempty"`
	At         time.Time `json:"at"`
	Deadline   time.Time `json:"deadline"`
}

func (m *triggerMsg) version() int { return m.V }

func newTriggerMsg(t driver.Trigger) triggerMsg {
	return triggerMsg{
		V: wireVersion, ID: uint64(t.ID), Checkpoint: t.Checkpoint,
		Savepoint: t.Options.Savepoint, Location: t.Options.Location,
		At: t.At, Deadline: t.Deadline,
	}
}

// trigger returns the driver's Trigger, writing to s.
func (m *triggerMsg) trigger(id coordinator.CheckpointID, s checkpoint.Storage) (driver.Trigger, error) {
	if coordinator.CheckpointID(m.ID) != id {
		return driver.Trigger{}, fmt.Errorf("%w: trigger of checkpoint %d under the key of %d", errBadMessage, m.ID, id)
	}
	if err := checkName(id, m.Checkpoint); err != nil {
		return driver.Trigger{}, err
	}
	return driver.Trigger{
		ID:         id,
		Options:    coordinator.Options{Savepoint: m.Savepoint, Location: m.Location},
		At:         m.At,
		Deadline:   m.Deadline,
		Storage:    s,
		Checkpoint: m.Checkpoint,
	}, nil
}

// checkName checks the storage name of checkpoint id: a checkpoint's own
// name, or a savepoint's location.
func checkName(id coordinator.CheckpointID, name string) error {
	if err := checkpoint.ValidateName(name); err != nil {
		return fmt.Errorf("%w: checkpoint %d: %v", errBadMessage, id, err)
	}
	if n, ok := checkpoint.ParseCheckpointName(name); ok && n != uint64(id) {
		return fmt.Errorf("%w: checkpoint %d named %q", errBadMessage, id, name)
	}
	if name == checkpoint.CoordinatorName {
		return fmt.Errorf("%w: checkpoint %d named %q, the coordinator's reserved name", errBadMessage, id, name)
	}
	return nil
}

// noteMsg tells one participant that a checkpoint completed or was
// aborted.
type noteMsg struct {
	V         int    `json:"v"`
	ID        uint64 `json:"id"`
	Completed bool   `json:"completed,omitempty"`
	// Savepoint marks a savepoint, completed or aborted.
	Savepoint bool `json:"savepoint,omitempty"`
	// Final marks a completed final checkpoint (driver.Completion.Final).
	Final bool `json:"final,omitempty"`
	// The abort (a coordinator.AbortError) otherwise.
	Reason      string `json:"reason,omitempty"`
	Participant string `json:"participant,omitempty"`
	Cause       string `json:"cause,omitempty"`
	// Failover marks an abort by a new leader of a checkpoint its
	// predecessor triggered: the cause wraps ErrFailover.
	Failover bool `json:"failover,omitempty"`
	// NotReady marks a cause that wraps coordinator.ErrNotReady (a benign
	// decline, not counted as a failure).
	NotReady bool `json:"notReady,omitempty"`
}

// remoteCause is a cause that crossed etcd as text: its message as it
// was, and the sentinel it wrapped.
type remoteCause struct {
	msg      string
	sentinel error
}

func (e *remoteCause) Error() string { return e.msg }
func (e *remoteCause) Unwrap() error { return e.sentinel }

func (m *noteMsg) version() int { return m.V }

func completedNote(c driver.Completion) noteMsg {
	return noteMsg{V: wireVersion, ID: uint64(c.ID), Completed: true, Savepoint: c.Savepoint, Final: c.Final}
}

// completion returns the driver.Completion of a completed note.
func (m *noteMsg) completion() driver.Completion {
	return driver.Completion{ID: coordinator.CheckpointID(m.ID), Savepoint: m.Savepoint, Final: m.Final}
}

func abortedNote(id coordinator.CheckpointID, err error) noteMsg {
	n := noteMsg{V: wireVersion, ID: uint64(id), Reason: coordinator.AbortShutdown.String()}
	var ae *coordinator.AbortError
	if errors.As(err, &ae) {
		n.Savepoint, n.Reason, n.Participant = ae.Savepoint, ae.Reason.String(), string(ae.Participant)
		if ae.Cause != nil {
			n.Cause = ae.Cause.Error()
			n.NotReady = errors.Is(ae.Cause, coordinator.ErrNotReady)
		}
	} else if err != nil {
		n.Cause = err.Error()
	}
	return n
}

// err returns nil for a completion, and the abort as a
// *coordinator.AbortError otherwise.
func (m *noteMsg) err() error {
	if m.Completed {
		return nil
	}
	reason := coordinator.AbortShutdown
	for r := coordinator.AbortDeclined; r <= coordinator.AbortIncomplete; r++ {
		if r.String() == m.Reason {
			reason = r
		}
	}
	var cause error
	switch {
	case m.Failover:
		cause = fmt.Errorf("%w: %s", ErrFailover, m.Cause)
	case m.NotReady:
		cause = &remoteCause{msg: m.Cause, sentinel: coordinator.ErrNotReady}
	case m.Cause != "":
		cause = errors.New(m.Cause)
	}
	return &coordinator.AbortError{
		ID:          coordinator.CheckpointID(m.ID),
		Savepoint:   m.Savepoint,
		Reason:      reason,
		Participant: coordinator.ParticipantID(m.Participant),
		Cause:       cause,
	}
}

// ackMsg is a participant's answer to a trigger: a snapshot, or a decline.
type ackMsg struct {
	V           int          `json:"v"`
	ID          uint64       `json:"id"`
	Participant string       `json:"participant"`
	Checkpoint  string       `json:"checkpoint"`
	Savepoint   bool         `json:"savepoint,omitempty"`
	Snapshot    *snapshotMsg `json:"snapshot,omitempty"`
	// Finished marks the acknowledgement of a finished instance
	// (driver.Acknowledgement.Finished).
	Finished bool        `json:"finished,omitempty"`
	Decline  *declineMsg `json:"decline,omitempty"`
}

func (m *ackMsg) version() int { return m.V }

type declineMsg struct {
	Cause    string `json:"cause"`
	NotReady bool   `json:"notReady,omitempty"`
}

// snapshotMsg is a checkpoint.SnapshotResult.
type snapshotMsg struct {
	MaxParallelism int        `json:"maxParallelism"`
	KeyGroups      [2]int     `json:"keyGroups"`
	States         []stateMsg `json:"states"`
	File           fileMsg    `json:"file"`
	OperatorState  []byte     `json:"operatorState,omitempty"`
	SyncNanos      int64      `json:"syncNanos"`
	AsyncNanos     int64      `json:"asyncNanos"`
	BytesWritten   int64      `json:"bytesWritten"`
	Entries        int64      `json:"entries"`
}

type stateMsg struct {
	Name        string `json:"name"`
	Kind        string `json:"kind"`
	SubKeyed    bool   `json:"subKeyed,omitempty"`
	Fingerprint string `json:"fingerprint"`
	Schema      string `json:"schema,omitempty"`
}

// fileMsg is a checkpoint.File. Tag is the data file's tag; an
// acknowledgement without one (a participant of before format version 2)
// makes checkpoint.NewOperator fail, naming the file's tag.
type fileMsg struct {
	Name    string `json:"name"`
	Size    int64  `json:"size"`
	CRC32C  uint32 `json:"crc32c"`
	Tag     uint32 `json:"tag,omitempty"`
	Entries int64  `json:"entries"`
}

func newSnapshotMsg(r checkpoint.SnapshotResult) *snapshotMsg {
	s := r.Snapshot
	m := &snapshotMsg{
		MaxParallelism: s.MaxParallelism,
		KeyGroups:      [2]int{s.KeyGroups.Start, s.KeyGroups.End},
		File:           fileMsg{Name: s.File.Name, Size: s.File.Size, CRC32C: s.File.CRC32C, Tag: s.File.Tag, Entries: s.File.Entries},
		OperatorState:  s.OperatorState,
		SyncNanos:      int64(r.Stats.SyncDuration),
		AsyncNanos:     int64(r.Stats.AsyncDuration),
		BytesWritten:   r.Stats.BytesWritten,
		Entries:        r.Stats.Entries,
	}
	for _, st := range s.States {
		m.States = append(m.States, stateMsg{Name: st.Name, Kind: st.Kind.String(), SubKeyed: st.SubKeyed, Fingerprint: st.Fingerprint, Schema: st.Schema})
	}
	return m
}

// result returns the checkpoint.SnapshotResult. The snapshot is checked
// in full when the checkpoint's metadata is assembled
// (checkpoint.NewOperator); here only what the coordinator itself reads.
func (m *snapshotMsg) result() (checkpoint.SnapshotResult, error) {
	bad := func(format string, args ...any) (checkpoint.SnapshotResult, error) {
		return checkpoint.SnapshotResult{}, fmt.Errorf("%w: snapshot: %s", errBadMessage, fmt.Sprintf(format, args...))
	}
	if err := checkpoint.ValidateName(m.File.Name); err != nil {
		return bad("file: %v", err)
	}
	if m.File.Size < 0 || m.BytesWritten < 0 || m.SyncNanos < 0 || m.AsyncNanos < 0 {
		return bad("negative size or duration")
	}
	r := checkpoint.SnapshotResult{
		Snapshot: checkpoint.InstanceSnapshot{
			MaxParallelism: m.MaxParallelism,
			KeyGroups:      runtime.KeyGroupRange{Start: m.KeyGroups[0], End: m.KeyGroups[1]},
			File:           checkpoint.File{Name: m.File.Name, Size: m.File.Size, CRC32C: m.File.CRC32C, Tag: m.File.Tag, Entries: m.File.Entries},
			OperatorState:  m.OperatorState,
		},
		Stats: checkpoint.SnapshotStats{
			SyncDuration:  time.Duration(m.SyncNanos),
			AsyncDuration: time.Duration(m.AsyncNanos),
			BytesWritten:  m.BytesWritten,
			Entries:       m.Entries,
		},
	}
	for _, st := range m.States {
		kind, err := runtime.ParseKind(st.Kind)
		if err != nil {
			return bad("state %q: %v", st.Name, err)
		}
		r.Snapshot.States = append(r.Snapshot.States, runtime.StateSpec{Name: st.Name, Kind: kind, SubKeyed: st.SubKeyed, Fingerprint: st.Fingerprint, Schema: st.Schema})
	}
	return r, nil
}

// check validates an acknowledgement found under the key of (id, p).
func (m *ackMsg) check(id coordinator.CheckpointID, p coordinator.ParticipantID) error {
	switch {
	case coordinator.CheckpointID(m.ID) != id || coordinator.ParticipantID(m.Participant) != p:
		return fmt.Errorf("%w: answer of %q to checkpoint %d under the key of %q, %d", errBadMessage, m.Participant, m.ID, p, id)
	case (m.Snapshot == nil) == (m.Decline == nil):
		return fmt.Errorf("%w: answer of %q to checkpoint %d is neither an acknowledgement nor a decline", errBadMessage, p, id)
	}
	return checkName(id, m.Checkpoint)
}

// cause returns a decline's cause; one the participant marked as benign
// wraps coordinator.ErrNotReady.
func (d *declineMsg) cause(p coordinator.ParticipantID) error {
	if d.NotReady {
		return fmt.Errorf("%w: %s (reported by %s)", coordinator.ErrNotReady, d.Cause, p)
	}
	return fmt.Errorf("%s (reported by %s)", d.Cause, p)
}

// counterMsg is the checkpoint-id counter.
type counterMsg struct {
	V     int    `json:"v"`
	Limit uint64 `json:"limit"`
	// Owner is the coordinator (and term) that wrote it, so that a retried
	// reservation recognizes its own write.
	Owner string `json:"owner"`
}

func (m *counterMsg) version() int { return m.V }

// indexMsg is the completed-checkpoint index.
type indexMsg struct {
	V           int          `json:"v"`
	Checkpoints []indexEntry `json:"checkpoints"`
}

func (m *indexMsg) version() int { return m.V }

// indexEntry is one completed checkpoint: its id and the name of its
// metadata's checkpoint in the storage.
type indexEntry struct {
	ID   uint64 `json:"id"`
	Name string `json:"name"`
}

func (m *indexMsg) check() error {
	for i, e := range m.Checkpoints {
		if e.ID == 0 || e.ID >= uint64(coordinator.MaxID) || e.Name != checkpoint.CheckpointName(e.ID) {
			return fmt.Errorf("%w: completed index entry %d: id %d, name %q", errBadMessage, i, e.ID, e.Name)
		}
		if i > 0 && m.Checkpoints[i-1].ID >= e.ID {
			return fmt.Errorf("%w: completed index not in ascending order at entry %d", errBadMessage, i)
		}
	}
	return nil
}
