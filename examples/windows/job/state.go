package job

//go:generate go run github.com/stategen/stategen/cmd/stategen

import "github.com/stategen/stategen/runtime"

// Window is a window of event time, [Start, End) in milliseconds: the
// namespace of the window states.
type Window struct {
	Start, End int64
}

// Agg is what a window computes of its events.
type Agg struct {
	Count, Sum, Max int64
}

// add returns a with the event value v added.
func (a Agg) add(v int64) Agg {
	if a.Count == 0 || v > a.Max {
		a.Max = v
	}
	a.Count++
	a.Sum += v
	return a
}

// merge returns the aggregate of a's events and b's.
func merge(a, b Agg) Agg {
	if b.Count == 0 {
		return a
	}
	if a.Count == 0 || b.Max > a.Max {
		a.Max = b.Max
	}
	a.Count += b.Count
	a.Sum += b.Sum
	return a
}

// Kind says which windowing a window or timer belongs to.
type Kind = uint8

// The three windowings.
const (
	Tumbling Kind = iota
	Sliding
	Session
)

// TimerNS is the namespace of a timer: the window it is for, and whether it
// fires the window (at its last millisecond) or cleans it up (once the
// allowed lateness has passed too).
type TimerNS struct {
	Kind    Kind
	Start   int64
	End     int64
	Cleanup bool
}

// Progress is how far an instance has read the stream: the offset of the
// last record it handled, the watermark it had reached, and how many
// (event, window) pairs it had dropped as too late.
type Progress struct {
	Offset, Watermark, Dropped int64
}

// State is the state of one instance of the windowing operator: three
// window states, one per windowing, keyed by user with the window as
// namespace; the event-time timers of all of them; and how far the
// instance has read, a union list so that every instance finds every old
// instance's progress after a rescale.
//
//stategen:state
type State struct {
	Tumbling runtime.SubKeyedValue[string, Window, Agg] `state:"tumbling"`
	Sliding  runtime.SubKeyedValue[string, Window, Agg] `state:"sliding"`
	Sessions runtime.SubKeyedValue[string, Window, Agg] `state:"sessions"`
	Timers   runtime.Timers[string, TimerNS]            `state:"timers"`
	Progress runtime.UnionList[Progress]                `state:"progress"`
}
