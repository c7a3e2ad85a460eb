package cow

import (
	"encoding/binary"
)

// A table keeps its entries, list regions and tree nodes in an arena of
// package backends/internal/arena: refs (slab index, offset) into
// pointer-free slabs, ref 0 meaning none.

// slabHeadroom slabs are kept free: a write is refused when fewer remain,
// so that no operation can run out of refs halfway.
const slabHeadroom = 4096

func u64(b []byte, i int) uint64      { return binary.LittleEndian.Uint64(b[8*i:]) }
func put64(b []byte, i int, v uint64) { binary.LittleEndian.PutUint64(b[8*i:], v) }

// uvarint decodes a length; n is 0 on malformed input.
func uvarint(b []byte) (int, int) {
	if len(b) > 0 && b[0] < 0x80 {
		return int(b[0]), 1
	}
	v, n := binary.Uvarint(b)
	if n <= 0 || v > 1<<62 {
		return 0, 0
	}
	return int(v), n
}

func uvlen(v int) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func putUvarint(b []byte, v int) int { return binary.PutUvarint(b, uint64(v)) }
