// Package hatch is package bad's incompatible change made restorable: the
// old types are kept, and functions marked //stategen:migrate convert
// their values, which a restore of v1's checkpoints applies.
package hatch

//go:generate go run github.com/stategen/stategen/cmd/stategen

import (
	"errors"
	"math"

	"github.com/stategen/stategen/runtime"
)

// Profile's Name became the length of the old name.
type Profile struct {
	Name int64
	Age  int64
}

// ProfileV1 is the profile as v1 wrote it, kept for its checkpoints.
// (Fields the migration does not need may be left out: the schema rules
// first resolve the checkpoint's schema to this one.)
type ProfileV1 struct {
	Name string
	Age  int8
}

// State is the job's state.
//
//stategen:state
type State struct {
	Profiles runtime.Value[string, Profile] `state:"profiles"`
	Counter  runtime.Value[string, int16]   `state:"counter"`
}

//stategen:migrate profiles
func migrateProfiles(old ProfileV1) (Profile, error) {
	return Profile{Name: int64(len(old.Name)), Age: int64(old.Age)}, nil
}

// errOutOfRange reports a counter the narrower type cannot hold.
var errOutOfRange = errors.New("counter out of the int16 range")

//stategen:migrate counter
func narrowCounter(old int32) (int16, error) {
	if old < math.MinInt16 || old > math.MaxInt16 {
		return 0, errOutOfRange
	}
	return int16(old), nil
}
