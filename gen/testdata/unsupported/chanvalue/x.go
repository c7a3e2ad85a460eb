package chanvalue

import "github.com/stategen/stategen/runtime"

//stategen:state
type S struct {
	F runtime.Value[string, chan int]
}
