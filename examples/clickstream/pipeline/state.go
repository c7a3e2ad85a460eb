package pipeline

import "github.com/stategen/stategen/runtime"

//go:generate go run github.com/stategen/stategen/cmd/stategen

// Event is one click of the synthetic stream: who, where, when, in which
// session, and the event's offset in the stream (its position in the log,
// like a Kafka offset).
type Event struct {
	Offset  int64
	User    string
	Page    string
	Session int64
	At      int64 // Unix milliseconds
}

// UserStats is the per-user counter: how many events and sessions, and the
// time span they cover.
type UserStats struct {
	Events   int64
	Sessions int64
	Session  int64 // the current session
	First    int64 // Unix milliseconds of the first event
	Last     int64 // Unix milliseconds of the last event
}

// EventTime orders a user's events by time, then by offset (two events of
// one user may share a millisecond).
type EventTime struct {
	At     int64
	Offset int64
}

// Window is a tumbling time window [Start, End) in Unix milliseconds: the
// namespace of the windowed aggregates.
type Window struct {
	Start, End int64
}

// WindowAgg aggregates a user's events in one window.
type WindowAgg struct {
	Events   int64
	Pages    int64 // distinct pages seen, approximated by page changes
	LastPage string
}

// ClickState is the keyed state of the clickstream operator, keyed by user.
// Every kind of state appears once.
//
//stategen:state
type ClickState struct {
	// Users counts each user's events and sessions.
	Users runtime.Value[string, UserStats] `state:"user-stats"`
	// Recent holds each user's last RecentEvents events, oldest first.
	Recent runtime.List[string, Event] `state:"recent"`
	// Pages counts each user's views per page.
	Pages runtime.Map[string, string, int64] `state:"page-views"`
	// Timeline holds each user's events of the last TimelineSpan by time.
	Timeline runtime.SortedMap[string, EventTime, Event] `state:"timeline"`
	// Windows aggregates each user's events per tumbling window.
	Windows runtime.SubKeyedValue[string, Window, WindowAgg] `state:"windows"`
}
