// Package migrate holds migration functions the generator must refuse.
package migrate

import "github.com/stategen/stategen/runtime"

type V struct{ A int64 }

type Old struct{ A string }

//stategen:state
type S struct {
	F runtime.Value[string, V] `state:"f"`
}

//stategen:migrate nope
func unknownState(old Old) (V, error) { return V{}, nil }

//stategen:migrate
func noState(old Old) (V, error) { return V{}, nil }

//stategen:migrate f
func wrongResult(old Old) (int64, error) { return 0, nil }

//stategen:migrate f
func noError(old Old) V { return V{} }

//stategen:migrate f
func sameSchema(old struct{ A int64 }) (V, error) { return V{}, nil }

//stategen:migrate f
func badType(old chan int) (V, error) { return V{}, nil }

//stategen:migrate f
func good(old Old) (V, error) { return V{}, nil }

//stategen:migrate f
func twice(old struct{ A string }) (V, error) { return V{}, nil }
