// Package bad is package v1's job with an incompatible change: a
// profile's Name became a number. A restore of v1's checkpoints must
// refuse it before loading anything, naming the field.
package bad

//go:generate go run github.com/stategen/stategen/cmd/stategen

import "github.com/stategen/stategen/runtime"

// Profile is v1.Profile with Name an int64.
type Profile struct {
	Name int64
}

// State is the job's state.
//
//stategen:state
type State struct {
	Profiles runtime.Value[string, Profile] `state:"profiles"`
	Counter  runtime.Value[string, int16]   `state:"counter"`
}
