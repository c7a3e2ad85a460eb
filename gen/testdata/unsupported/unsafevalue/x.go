package unsafevalue

import (
	"unsafe"

	"github.com/stategen/stategen/runtime"
)

//stategen:state
type S struct {
	F runtime.Value[string, unsafe.Pointer]
}
