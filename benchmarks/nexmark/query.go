package nexmark

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// The queries' parameters, in ms of event time: Beam's NexmarkConfiguration
// defaults (windowSizeSec 10, windowPeriodSec 5), but for Q3Wait.
const (
	// WindowSize is the length of q5's sliding windows and of q7's and
	// q8's tumbling windows.
	WindowSize = 10_000
	// WindowPeriod is the slide of q5's windows: every bid is in
	// WindowSize/WindowPeriod of them.
	WindowPeriod = 5_000
	// SessionGap is the gap that ends a q11 session (Beam's Query11 uses
	// windowSizeSec).
	SessionGap = WindowSize
	// Q3Wait is how long q3 keeps a seller's state after its last event.
	// Beam's maxAuctionsWaitingTime is 600 s, six million events at Beam's
	// rate; 60 s is the shortest wait that changes no result here (a
	// person is chosen as a seller for the next NumActivePeople persons,
	// 50 s), so that the state stays bounded and its cleanup timers fire
	// within a benchmark's stream.
	Q3Wait = 60_000
	// WatermarkEvery is how many events pass between two watermarks: one
	// second of event time. (Flink's default is a watermark every 200 ms
	// of processing time, hundreds of thousands of events at these rates.)
	WatermarkEvery = 1000
)

// q3States are the states whose persons q3 joins.
var q3States = [...]string{"OR", "ID", "CA"}

// q3Category is the category of the auctions q3 joins.
const q3Category = 10

// Queries are the names of the five queries, as NewQuery and NewPlain take
// them; "all" runs the five in one pass.
var Queries = []string{"q3", "q5", "q7", "q8", "q11"}

// Query is one query (or several) of the benchmark, fed by Run: every
// event in order, and the watermark now and then. Its results go to the
// Output it was made with.
type Query interface {
	// Event processes one event.
	Event(e *Event) error
	// Watermark advances event time to wm: no event to come has a time at
	// or before wm. Windows whose last millisecond is at or before wm
	// fire. A watermark at or before the last one changes nothing.
	Watermark(wm int64) error
}

// Run feeds events to q in order, with a watermark after every
// WatermarkEvery events — the time of the next event minus one, the
// smallest time still to come, as Beam's generator computes it — and, at
// the end of the stream, a watermark at the end of time, which fires
// every window left. after, if not nil, is called after each watermark
// with the number of events processed: a job's point for a checkpoint.
func Run(q Query, events []Event, after func(done int) error) error {
	for i := range events {
		if err := q.Event(&events[i]); err != nil {
			return fmt.Errorf("nexmark: event %d (%s): %w", i, events[i].Kind, err)
		}
		if (i+1)%WatermarkEvery == 0 && i+1 < len(events) {
			if err := q.Watermark(events[i+1].Time - 1); err != nil {
				return fmt.Errorf("nexmark: watermark after event %d: %w", i, err)
			}
			if after != nil {
				if err := after(i + 1); err != nil {
					return err
				}
			}
		}
	}
	if err := q.Watermark(math.MaxInt64); err != nil {
		return fmt.Errorf("nexmark: watermark at the end of the stream: %w", err)
	}
	if after != nil {
		return after(len(events))
	}
	return nil
}

// Window is a window of event time, [Start, End) in ms.
type Window struct {
	Start, End int64
}

// last returns a window's last millisecond: when it fires.
func (w Window) last() int64 { return w.End - 1 }

// intersects reports whether two session windows overlap or touch (Flink's
// TimeWindow.intersects): they merge.
func (w Window) intersects(o Window) bool { return w.Start <= o.End && w.End >= o.Start }

// cover returns the smallest window that holds w and o.
func (w Window) cover(o Window) Window {
	return Window{min(w.Start, o.Start), max(w.End, o.End)}
}

// floorDiv is a/b rounded down (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// tumbling returns the tumbling window of WindowSize that holds t.
func tumbling(t int64) Window {
	s := floorDiv(t, WindowSize) * WindowSize
	return Window{s, s + WindowSize}
}

// latestSliding returns the start of the latest sliding window of
// WindowSize, every WindowPeriod, that holds t: the windows of t start
// there and every WindowPeriod before, while the start is after
// t-WindowSize.
func latestSliding(t int64) int64 { return floorDiv(t, WindowPeriod) * WindowPeriod }

// inQ3State reports whether q3 joins persons of state.
func inQ3State(state string) bool {
	for _, s := range q3States {
		if state == s {
			return true
		}
	}
	return false
}

// Q3Row is a result of q3, local item suggestion: an auction of category
// 10 by a seller in Oregon, Idaho or California (Beam's NameCityStateId).
type Q3Row struct {
	Name, City, State string // the seller's
	Auction           int64  // the auction's id
}

// Q5Row is a result of q5, hot items: an auction with the most bids of a
// sliding window, and its number of bids (Beam's AuctionCount, with the
// window).
type Q5Row struct {
	Start, End int64 // the window
	Auction    int64
	Count      int64
}

// Q7Row is a result of q7, highest bid: a bid with the highest price of a
// tumbling window (Beam's Bid, with the window).
type Q7Row struct {
	Start, End int64 // the window
	Auction    int64
	Bidder     int64
	Price      int64
	Time       int64
}

// Q8Row is a result of q8, monitor new users: a person who registered in
// a tumbling window and opened an auction in the same window, with the
// auction's reserve (Beam's IdNameReserve, with the window's start), one
// row per auction.
type Q8Row struct {
	Start   int64 // the window's
	Person  int64
	Name    string
	Reserve int64
}

// Q11Row is a result of q11, user sessions: a bidder's session, the bids
// of which no two are SessionGap or more apart, and its number of bids
// (Beam's BidsPerSession, with the session window: from its first bid to
// its last bid plus SessionGap).
type Q11Row struct {
	Bidder     int64
	Start, End int64 // the session
	Count      int64
}

// Output collects the rows the queries emit, one slice per query. A query
// appends to its own slice only, so several queries share one Output.
type Output struct {
	Q3  []Q3Row
	Q5  []Q5Row
	Q7  []Q7Row
	Q8  []Q8Row
	Q11 []Q11Row
}

// Reset empties o, keeping the slices' memory for the next run.
func (o *Output) Reset() {
	o.Q3, o.Q5, o.Q7, o.Q8, o.Q11 = o.Q3[:0], o.Q5[:0], o.Q7[:0], o.Q8[:0], o.Q11[:0]
}

// Rows returns the number of rows of query name ("all": of every query).
func (o *Output) Rows(name string) int {
	switch name {
	case "q3":
		return len(o.Q3)
	case "q5":
		return len(o.Q5)
	case "q7":
		return len(o.Q7)
	case "q8":
		return len(o.Q8)
	case "q11":
		return len(o.Q11)
	}
	return len(o.Q3) + len(o.Q5) + len(o.Q7) + len(o.Q8) + len(o.Q11)
}

// ErrUnknownQuery is returned for a query name that is none of Queries and
// not "all".
var ErrUnknownQuery = errors.New("nexmark: unknown query")

// expand returns the queries name stands for.
func expand(name string) ([]string, error) {
	if name == "all" {
		return Queries, nil
	}
	for _, q := range Queries {
		if q == name {
			return []string{name}, nil
		}
	}
	return nil, fmt.Errorf("%w %q (want one of %s, or all)", ErrUnknownQuery, name, strings.Join(Queries, ", "))
}

// multi is several queries fed the same stream.
type multi []Query

func (m multi) Event(e *Event) error {
	for _, q := range m {
		if err := q.Event(e); err != nil {
			return err
		}
	}
	return nil
}

func (m multi) Watermark(wm int64) error {
	for _, q := range m {
		if err := q.Watermark(wm); err != nil {
			return err
		}
	}
	return nil
}

// combine returns the queries as one.
func combine(qs []Query) Query {
	if len(qs) == 1 {
		return qs[0]
	}
	return multi(qs)
}
