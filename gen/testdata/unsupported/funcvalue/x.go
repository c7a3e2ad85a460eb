package funcvalue

import "github.com/stategen/stategen/runtime"

//stategen:state
type S struct {
	F runtime.List[string, func()]
}
