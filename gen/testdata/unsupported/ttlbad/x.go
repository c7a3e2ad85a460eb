package ttlbad

import "github.com/stategen/stategen/runtime"

//stategen:state
type S struct {
	F runtime.Value[string, int64] `state:"x,ttl=soon"`
}
