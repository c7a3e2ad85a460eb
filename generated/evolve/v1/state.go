// Package v1 is the first version of the state of package evolve's tests:
// the job as it was deployed yesterday. Package v2 is the same job after a
// week of changes to its types; the checkpoints v1 writes must restore
// under v2's code.
package v1

//go:generate go run github.com/stategen/stategen/cmd/stategen

import "github.com/stategen/stategen/runtime"

// Visit is one page visit.
type Visit struct {
	Page  string
	Score float64
	Tags  []string
	N     int32
}

// Profile is a user's profile.
type Profile struct {
	Name   string
	Age    int8
	Visits []Visit
	Pages  map[string]Visit
	Best   *Visit
	Ratio  float32
	Raw    []byte
}

// Window is a tumbling window.
type Window struct{ Start, End int64 }

// Agg aggregates a window.
type Agg struct {
	Count int16
	Sum   float32
}

// Score is a small value: the restore-migration benchmark's.
type Score struct {
	A, B int64
	Name string
}

// State is the job's state.
//
//stategen:state
type State struct {
	Profiles runtime.Value[string, Profile]             `state:"profiles"`
	History  runtime.List[string, Visit]                `state:"history"`
	Pages    runtime.Map[string, string, Visit]         `state:"pages"`
	Timeline runtime.SortedMap[string, int64, Visit]    `state:"timeline"`
	Windows  runtime.SubKeyedValue[string, Window, Agg] `state:"windows"`
	Same     runtime.Value[string, int64]               `state:"same"`
	Counter  runtime.Value[string, int32]               `state:"counter"`
	Scores   runtime.Value[string, Score]               `state:"scores"`
}
