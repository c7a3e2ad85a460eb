// Package v2 is package v1's job a week later: every compatible kind of
// change a user makes to a state's types, applied at once, in nested
// structs and in collections — fields added, removed, reordered and
// renamed with a tag, types renamed, integers and floats widened, string
// and []byte swapped, values made pointers and pointers values.
package v2

//go:generate go run github.com/stategen/stategen/cmd/stategen

import "github.com/stategen/stategen/runtime"

// PageVisit is v1.Visit: renamed; Page renamed in Go (its schema name kept
// by the tag); Score removed; Tags moved first; N widened; Extra added.
type PageVisit struct {
	Tags  []string
	Where string `stategen:"Page"`
	N     int64
	Extra bool
}

// Profile is v1.Profile: Name a []byte, Age widened, Visits of the renamed
// type, Pages' values pointers, Best no longer a pointer, Ratio widened,
// Raw a string, Added new.
type Profile struct {
	Added  map[string]int64
	Name   []byte
	Age    int64
	Visits []PageVisit
	Pages  map[string]*PageVisit
	Best   PageVisit
	Ratio  float64
	Raw    string
}

// Span is v1.Window with its fields renamed: a namespace keeps its bytes.
type Span struct{ From, To int64 }

// Agg is v1.Agg widened, with Max added.
type Agg struct {
	Count int64
	Sum   float64
	Max   int32
}

// Score is v1.Score with one field added.
type Score struct {
	A, B int64
	Name string
	C    int64
}

// State is the job's state, under the same state names.
//
//stategen:state
type State struct {
	Profiles runtime.Value[string, Profile]              `state:"profiles"`
	History  runtime.List[string, PageVisit]             `state:"history"`
	Pages    runtime.Map[string, string, *PageVisit]     `state:"pages"`
	Timeline runtime.SortedMap[string, int64, PageVisit] `state:"timeline"`
	Windows  runtime.SubKeyedValue[string, Span, Agg]    `state:"windows"`
	Same     runtime.Value[string, int64]                `state:"same"`
	Counter  runtime.Value[string, int64]                `state:"counter"`
	Scores   runtime.Value[string, Score]                `state:"scores"`
}
