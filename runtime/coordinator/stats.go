package coordinator

import (
	"errors"
	"fmt"
	"time"
)

// Status is the outcome of a checkpoint.
type Status uint8

// The outcomes of a checkpoint.
const (
	// StatusCompleted: every participant acknowledged and the metadata was
	// written.
	StatusCompleted Status = iota + 1
	// StatusFailed: the checkpoint was aborted.
	StatusFailed
)

// String returns "completed" or "failed".
func (s Status) String() string {
	switch s {
	case StatusCompleted:
		return "completed"
	case StatusFailed:
		return "failed"
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// ParticipantStats describes one participant's part in a checkpoint.
type ParticipantStats struct {
	// Participant is who.
	Participant ParticipantID
	// Acked reports whether it acknowledged; the other fields are zero if
	// not. An expired checkpoint's record shows who was missing.
	Acked bool
	// AckedAt is when its acknowledgement arrived.
	AckedAt time.Time
	// SyncDuration and AsyncDuration are the durations of the snapshot's
	// two phases, as the participant reported them.
	SyncDuration, AsyncDuration time.Duration
	// Bytes is the size of its snapshot.
	Bytes int64
	// Finished reports that it had reached the end of its input when it
	// snapshotted (Payload.Finished).
	Finished bool
}

// Record describes a completed or failed checkpoint.
type Record struct {
	// ID is the checkpoint's id.
	ID CheckpointID
	// Savepoint reports whether it was a savepoint.
	Savepoint bool
	// Location is the savepoint's location; empty for checkpoints.
	Location string
	// Status is the outcome.
	Status Status
	// TriggeredAt is when it was triggered; EndedAt when it completed or
	// was aborted.
	TriggeredAt, EndedAt time.Time
	// Participants describes every participant, sorted.
	Participants []ParticipantStats
	// Bytes is the total size of the acknowledged snapshots.
	Bytes int64
	// Final reports that every participant had finished when it
	// snapshotted (Payload.Finished): the checkpoint holds the job's final
	// state.
	Final bool
	// Request is the on-demand request the checkpoint answered (see
	// Core.RequestCheckpoint); zero for periodic checkpoints and
	// savepoints.
	Request RequestID
	// Err says why the checkpoint failed; nil if it completed.
	Err *AbortError
}

// NotReady reports whether the checkpoint was aborted because a
// participant was not ready — it declined with a cause wrapping
// ErrNotReady, or was missing, leaving key groups uncovered. Such aborts
// are expected while a job starts, rescales or ends, and do not count as
// failures.
func (r Record) NotReady() bool {
	return r.Err != nil && errors.Is(r.Err, ErrNotReady)
}

// Duration is the time from trigger to completion or abort.
func (r Record) Duration() time.Duration { return r.EndedAt.Sub(r.TriggeredAt) }

// Counts are cumulative checkpoint counters.
type Counts struct {
	// Triggered counts checkpoints and savepoints started.
	Triggered int64
	// Completed and Failed count their outcomes. Failed does not include
	// the checkpoints counted in NotReady.
	Completed, Failed int64
	// NotReady counts checkpoints aborted because a participant was not
	// ready (see Record.NotReady): declined as not ready, or missing.
	NotReady int64
	// Refused counts periodic triggers that did not start a checkpoint,
	// and on-demand requests dropped without one.
	Refused int64
}

// InProgress is the number of checkpoints triggered but not yet completed,
// failed or aborted as not ready.
func (c Counts) InProgress() int64 { return c.Triggered - c.Completed - c.Failed - c.NotReady }

// Spread summarizes a set of durations: the least, the mean and the
// greatest. It is zero for an empty set.
type Spread struct {
	Min, Mean, Max time.Duration
}

// SizeSpread summarizes a set of sizes in bytes: the least, the mean and the
// greatest. It is zero for an empty set.
type SizeSpread struct {
	Min, Mean, Max int64
}

// Summary aggregates every completed checkpoint and savepoint a Stats has
// seen, like Flink's checkpoint summary: how long they took, how big they
// were, and how long their participants' synchronous and asynchronous
// phases took.
type Summary struct {
	// Completed is the number of checkpoints summarized.
	Completed int64
	// Duration spreads their durations, trigger to completion.
	Duration Spread
	// Bytes spreads their sizes.
	Bytes SizeSpread
	// SyncDuration and AsyncDuration spread the phases of every
	// participant of every completed checkpoint.
	SyncDuration, AsyncDuration Spread
}

// spread accumulates a Spread or SizeSpread.
type spread struct {
	n             int64
	sum, min, max int64
}

func (s *spread) add(v int64) {
	if s.n == 0 || v < s.min {
		s.min = v
	}
	if s.n == 0 || v > s.max {
		s.max = v
	}
	s.n++
	s.sum += v
}

func (s spread) mean() int64 {
	if s.n == 0 {
		return 0
	}
	return s.sum / s.n
}

func (s spread) durations() Spread {
	return Spread{Min: time.Duration(s.min), Mean: time.Duration(s.mean()), Max: time.Duration(s.max)}
}

// Stats keeps checkpoint counters and the most recent records. It is fed
// with a Core's decisions (Observe); every Core keeps one (Core.Stats), and
// a driver may keep its own to serve it to other goroutines under a lock.
// A Stats is not safe for concurrent use.
type Stats struct {
	counts        Counts
	recent        []Record // ring buffer of at most history records
	next          int      // where the next record goes once the ring is full
	history       int
	lastCompleted *Record
	lastFailed    *Record

	duration, bytes, sync, async spread
}

// NewStats returns an empty Stats that keeps the latest history records
// (at least one).
func NewStats(history int) *Stats {
	return &Stats{history: max(history, 1)}
}

// Observe accounts for d: Trigger, Refused and Report decisions change the
// stats, the others are ignored.
func (s *Stats) Observe(d Decision) {
	switch d := d.(type) {
	case Trigger:
		s.counts.Triggered++
	case Refused:
		s.counts.Refused++
	case Report:
		s.add(d.Record)
	}
}

func (s *Stats) add(r Record) {
	switch r.Status {
	case StatusCompleted:
		s.counts.Completed++
		s.lastCompleted = &r
		s.duration.add(int64(r.Duration()))
		s.bytes.add(r.Bytes)
		for _, p := range r.Participants {
			s.sync.add(int64(p.SyncDuration))
			s.async.add(int64(p.AsyncDuration))
		}
	case StatusFailed:
		if r.NotReady() {
			s.counts.NotReady++
			break
		}
		s.counts.Failed++
		s.lastFailed = &r
	}
	if len(s.recent) < s.history {
		s.recent = append(s.recent, r)
		return
	}
	s.recent[s.next] = r
	s.next = (s.next + 1) % s.history
}

// Counts returns the counters.
func (s *Stats) Counts() Counts { return s.counts }

// Recent returns the latest records, oldest first. The records share
// memory with s: treat them as read-only.
func (s *Stats) Recent() []Record {
	out := make([]Record, 0, len(s.recent))
	out = append(out, s.recent[s.next:]...)
	return append(out, s.recent[:s.next]...)
}

// Summary aggregates every completed checkpoint seen, not only the recent
// ones.
func (s *Stats) Summary() Summary {
	return Summary{
		Completed:     s.duration.n,
		Duration:      s.duration.durations(),
		Bytes:         SizeSpread{Min: s.bytes.min, Mean: s.bytes.mean(), Max: s.bytes.max},
		SyncDuration:  s.sync.durations(),
		AsyncDuration: s.async.durations(),
	}
}

// LastCompleted returns the record of the latest completed checkpoint, if
// any.
func (s *Stats) LastCompleted() (Record, bool) {
	if s.lastCompleted == nil {
		return Record{}, false
	}
	return *s.lastCompleted, true
}

// LastFailed returns the record of the latest failed checkpoint, if any;
// checkpoints aborted as not ready are not failures (see Counts.NotReady).
func (s *Stats) LastFailed() (Record, bool) {
	if s.lastFailed == nil {
		return Record{}, false
	}
	return *s.lastFailed, true
}

// Clone returns an independent copy of s (records are shared, read-only).
func (s *Stats) Clone() *Stats {
	c := *s
	c.recent = append([]Record(nil), s.recent...)
	return &c
}
