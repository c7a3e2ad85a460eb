// Package flat declares the state of the flat-value benchmarks
// (benchmarks.BenchmarkFlatGet and BenchmarkFlatPut): a 24-byte value
// without pointers, the limit of what a Go map of the same values costs,
// under int64 and string keys, with the codecs stategen generates for them
// (stategen_state.gen.go), as a user's state would have.
package flat

//go:generate go run github.com/stategen/stategen/cmd/stategen

import "github.com/stategen/stategen/runtime"

// Value is a small user struct with no pointer in it: a Go map of Values
// is a map the collector does not scan.
type Value struct {
	A, B, C int64
}

// State is the benchmarks' state: one value per int64 key, one per string
// key.
//
//stategen:state
type State struct {
	ByInt    runtime.Value[int64, Value]  `state:"flat-by-int"`
	ByString runtime.Value[string, Value] `state:"flat-by-string"`
}
