package nexmark

//go:generate go run github.com/stategen/stategen/cmd/stategen

import "github.com/stategen/stategen/runtime"

// Q3Person is what q3 keeps of a seller: what its rows show.
type Q3Person struct {
	Name, City, State string
}

// Q3State is q3's state, keyed by seller (a person's id): Beam's JoinDoFn.
// The person, once seen; the ids of its auctions seen before it; the time
// of its cleanup, Q3Wait after its last event, when a timer deletes all
// three. A new event sets a timer at its new cleanup time and leaves the
// old one, which finds a later cleanup time when it fires and does
// nothing, as the plain query's stale timers do (Beam's timer.set moves
// the timer: a Delete more per event, for the same rows).
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

// Q11Session is a live q11 session of a bidder: its window, its number of
// bids, and the namespace of its timer (the start of the window that
// opened it).
type Q11Session struct {
	Start, End, Count, Timer int64
}

// Q11State is q11's state, keyed by bidder: the bidder's live sessions, in
// one value, and a timer per session, in the namespace the session names.
// A session's timer is set when the session opens, at its last
// millisecond then; a session extended since is still live when its timer
// fires, and sets it again at its new last millisecond (Flink users do the
// same with a timer per session rather than one per extension); a session
// merged into another leaves its timer behind, which finds no session of
// its namespace when it fires. It is the plain query's algorithm
// (plainQ11), as every query here runs its plain twin's: the ratio of the
// two is that of the state, not of two ways to compute sessions. Flink's
// own WindowOperator — a state namespace per session window, merged with
// SubKeyedValue.Merge, and a timer moved at every extension — is what
// examples/windows shows.
//
//stategen:state
type Q11State struct {
	Sessions runtime.Value[int64, []Q11Session] `state:"q11-sessions"`
	Timers   runtime.Timers[int64, int64]       `state:"q11-timers"`
}
