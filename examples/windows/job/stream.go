package job

import (
	"fmt"
	"math/rand/v2"
)

// Record is one record of the input: an event, or a watermark.
type Record struct {
	// Offset is the record's position in the stream, from 0.
	Offset int64
	// Watermark marks a watermark record: no event with a time at or
	// before Time is expected any more (later ones are late).
	Watermark bool
	// Time is the event's time, or the watermark's, in milliseconds.
	Time int64
	// User and Value are the event's.
	User  string
	Value int64
}

// Stream is the synthetic input: record i is a pure function of (Seed, i),
// so that any offset replays exactly, as a Kafka partition would. Events
// advance by 5 ms each and arrive up to Disorder ms out of order; one in
// fifty is late, by up to three times the allowed lateness, so that some
// late events land within it and some are dropped. Every WatermarkEvery-th
// record is a watermark: the largest event time so far minus Disorder. The
// one source broadcasts watermarks to every instance, so where an event
// falls relative to the watermark depends on the stream alone, not on the
// parallelism that processes it.
type Stream struct {
	Seed   uint64
	Events int64
	Users  int
}

// Stream parameters.
const (
	Step           = 5   // ms of event time per record
	Disorder       = 150 // ms an on-time event may be out of order
	WatermarkEvery = 16  // a watermark every this many records
)

// Len returns the number of records.
func (s Stream) Len() int64 { return s.Events }

// At returns record i.
func (s Stream) At(i int64) Record {
	if i%WatermarkEvery == WatermarkEvery-1 {
		// Event times grow by Step per record, out of order by at most
		// Disorder (on-time events): the largest time so far is that of
		// the record before, at most, and Disorder below it every event
		// to come is on time.
		return Record{Offset: i, Watermark: true, Time: (i-1)*Step - Disorder}
	}
	r := rand.New(rand.NewPCG(s.Seed, uint64(i)))
	t := i*Step - r.Int64N(Disorder)
	if r.IntN(50) == 0 {
		t = i*Step - Disorder - r.Int64N(3*Lateness)
	}
	return Record{Offset: i, Time: t, User: fmt.Sprintf("user-%d", r.IntN(s.Users)), Value: r.Int64N(1000)}
}
