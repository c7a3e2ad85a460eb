package storekit

import "github.com/stategen/stategen/runtime"

// Kind codes: the byte that stands for a state's kind in what is stored —
// the checkpoint format's state table (since its version 1) and the state
// metadata of backends/pebble's working directories. They are stored
// formats' own, not runtime.Kind's numbering, which may change: a golden
// test of each format pins them.
const (
	KindCodeValue     = 1
	KindCodeList      = 2
	KindCodeMap       = 3
	KindCodeSortedMap = 4
)

// KindCode returns the stored code of kind k, or 0 for an invalid kind.
func KindCode(k runtime.Kind) byte {
	switch k {
	case runtime.KindValue:
		return KindCodeValue
	case runtime.KindList:
		return KindCodeList
	case runtime.KindMap:
		return KindCodeMap
	case runtime.KindSortedMap:
		return KindCodeSortedMap
	}
	return 0
}

// KindOfCode is the inverse of KindCode: an unknown code gives an invalid
// Kind (zero), which runtime.StateSpec.Validate refuses.
func KindOfCode(c byte) runtime.Kind {
	switch c {
	case KindCodeValue:
		return runtime.KindValue
	case KindCodeList:
		return runtime.KindList
	case KindCodeMap:
		return runtime.KindMap
	case KindCodeSortedMap:
		return runtime.KindSortedMap
	}
	return 0
}
