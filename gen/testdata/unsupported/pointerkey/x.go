package pointerkey

import "github.com/stategen/stategen/runtime"

//stategen:state
type S struct {
	F runtime.Value[*int64, int64]
}
