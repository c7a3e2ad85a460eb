package notahandle

import "github.com/stategen/stategen/runtime"

//stategen:state
type S struct {
	F map[string]int64
}
