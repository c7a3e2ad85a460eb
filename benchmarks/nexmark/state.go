package nexmark

//go:generate go run github.com/stategen/stategen/cmd/stategen

import "github.com/stategen/stategen/runtime"

// Q3Person is what q3 keeps of a seller: what its rows show.
type Q3Person struct {
	Name, City, State string
}

// Q3State is q3's state, keyed by seller (a person's id): Beam's JoinDoFn.
// The person, once seen; the ids of its auctions seen before it; the time
// of its cleanup timer, Q3Wait after its last event, which deletes all
// three (a new event moves the timer: Beam's timer.set).
//
//stategen:state
type Q3State struct {
	Persons runtime.Value[int64, Q3Person] `state:"q3-persons"`
	Pending runtime.List[int64, int64]     `state:"q3-pending"`
	Expiry  runtime.Value[int64, int64]    `state:"q3-expiry"`
	// Timers are the cleanup timers, keyed by seller, of namespace 0.
	Timers runtime.Timers[int64, int64] `state:"q3-timers"`
}

// Q5State is q5's state: the number of bids of each auction in each
// sliding window, a map keyed by the window's start with the auction as
// user key, and a timer per window, keyed by its start with its end as
// namespace, at its last millisecond.
//
//stategen:state
type Q5State struct {
	Counts runtime.Map[int64, int64, int64] `state:"q5-counts"`
	Timers runtime.Timers[int64, int64]     `state:"q5-timers"`
}

// Q7Bid is a bid of the highest price of a q7 window so far.
type Q7Bid struct {
	Auction, Bidder, Time int64
}

// Q7State is q7's state, keyed by a tumbling window's start: the highest
// price so far, the bids at that price, and the window's timer (keyed by
// its start with its end as namespace) at its last millisecond.
//
//stategen:state
type Q7State struct {
	Max     runtime.Value[int64, int64]  `state:"q7-max"`
	Winners runtime.List[int64, Q7Bid]   `state:"q7-winners"`
	Timers  runtime.Timers[int64, int64] `state:"q7-timers"`
}

// Q8State is q8's state, keyed by person (a person's id, an auction's
// seller) with a tumbling window's start as namespace: the person's name
// if it registered in the window, the reserves of the auctions it opened
// in the window, and the timer of the (person, window) at the window's
// last millisecond.
//
//stategen:state
type Q8State struct {
	Persons  runtime.SubKeyedValue[int64, int64, string] `state:"q8-persons"`
	Reserves runtime.SubKeyedList[int64, int64, int64]   `state:"q8-reserves"`
	Timers   runtime.Timers[int64, int64]                `state:"q8-timers"`
}

// Q11State is q11's state, keyed by bidder: the windows of the bidder's
// live sessions (Flink's MergingWindowSet, which its WindowOperator keeps
// in a keyed list state), the number of bids of each session, with the
// session's window as namespace, merged when a bid bridges sessions
// (SubKeyedValue.Merge), and the timer of each session at its last
// millisecond.
//
// The windows are a state of their own, rather than listed with
// Sessions.Namespaces as examples/windows does, because on pebble that
// scan crosses the tombstone of every session namespace merged away
// before it: a hot bidder's bids, each a merge, made it quadratic (some
// 130 µs a bid over 10,000 events, 95% of the time in the scan).
//
//stategen:state
type Q11State struct {
	Windows  runtime.Value[int64, []Window]              `state:"q11-windows"`
	Sessions runtime.SubKeyedValue[int64, Window, int64] `state:"q11-sessions"`
	Timers   runtime.Timers[int64, Window]               `state:"q11-timers"`
}
