package structkey

import "github.com/stategen/stategen/runtime"

//stategen:state
type S struct {
	F runtime.SubKeyedValue[string, Window, int64]
}

type Window struct {
	Start int64
	Tags  []string
}
