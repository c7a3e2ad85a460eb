package mapkey

import "github.com/stategen/stategen/runtime"

//stategen:state
type S struct {
	F runtime.Map[string, map[string]int, int64]
}
