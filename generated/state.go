package generated

import (
	"time"

	"github.com/stategen/stategen/generated/geo"
	"github.com/stategen/stategen/runtime"
)

// ClickState is the state of a click-counting operator: one state of each
// kind, keyed.
//
//stategen:state
type ClickState struct {
	// Clicks counts clicks per user.
	Clicks runtime.Value[string, int64] `state:"clicks"`
	// Last holds each user's last event.
	Last runtime.Value[string, Event] `state:"last-event"`
	// History lists each user's events.
	History runtime.List[string, Event] `state:"history"`
	// Pages counts page views per user and page.
	Pages runtime.Map[string, string, int64] `state:"pages"`
	// Timeline holds each user's events by time.
	Timeline runtime.SortedMap[int64, time.Time, Event]
	// Scratch is not a state.
	Scratch int `state:"-"`
}

// BidState is the state of an auction operator: each auction's highest
// bid (a small value).
//
//stategen:state
type BidState struct {
	Highest runtime.Value[int64, Bid] `state:"highest-bid"`
}

// WindowState is the state of a windowed aggregation: one state of each
// kind, sub-keyed, over every supported type family.
//
//stategen:state
type WindowState struct {
	Aggs     runtime.SubKeyedValue[string, Window, Agg]                    `state:"aggs"`
	Samples  runtime.SubKeyedList[SessionKey, Window, Scalars]             `state:"samples"`
	Seen     runtime.SubKeyedMap[uint64, Window, SessionKey, Color]        `state:"seen"`
	Ranked   runtime.SubKeyedSortedMap[Level, int32, float64, []byte]      `state:"ranked"`
	Places   runtime.SortedMap[geo.Point, [16]byte, geo.Pair[Level, Blob]] `state:"places"`
	Sessions runtime.Value[SessionKey, *Agg]                               `state:"sessions"`
	Durs     runtime.List[time.Duration, map[string][]*float64]            `state:"durations"`
	// Fire holds the windows' event-time timers.
	Fire runtime.Timers[SessionKey, Window] `state:"fire"`
}

// LedgerState is the state of a ledger: each account's balance, and the
// sums it sent to each other account. Both are kept as Go values on a
// store that can (runtime.TableHost), and their keys, a defined int64,
// are hashed from their values.
//
//stategen:state
type LedgerState struct {
	Balance runtime.Value[AccountID, int64]          `state:"balance"`
	Sent    runtime.Map[AccountID, AccountID, int64] `state:"sent"`
}

// ExpiringState is the state of an operator whose state expires (state
// TTL): each user's last event, kept 30 minutes after its last update;
// page views, kept a day after they were last read or written; each
// window's recent events, an hour and a half after each was added.
//
//stategen:state
type ExpiringState struct {
	LastSeen runtime.Value[string, Event]                `state:"last-seen,ttl=30m"`
	Views    runtime.Map[string, string, int64]          `state:"views,ttl=24h,ttlupdate=read-and-write"`
	Recent   runtime.SubKeyedList[string, Window, Event] `state:"recent,ttl=1h30m"`
}

// SourceState is the operator state of a source and its sink: the
// positions the source reads from, split evenly among the instances when
// the job is rescaled, and the commits the sink left pending, which every
// instance sees after a restore.
//
//stategen:state
type SourceState struct {
	Positions runtime.OperatorList[Position] `state:"positions"`
	Pending   runtime.UnionList[Event]       `state:"pending"`
}
