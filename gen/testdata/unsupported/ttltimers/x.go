package ttltimers

import "github.com/stategen/stategen/runtime"

//stategen:state
type S struct {
	F runtime.Timers[string, int64] `state:"x,ttl=1h"`
}
