package cow

import (
	"encoding/binary"
	"math/bits"
)

// A ref addresses a byte region of a table's arena: the slab index in the
// high bits, the offset in the slab in the low offBits bits. Regions never
// straddle slabs, so a region is the slice at(ref)[:size]. Ref 0 means none:
// slab 0 starts with 8 reserved bytes, so no region has it.
const (
	offBits  = 20
	offMask  = 1<<offBits - 1
	refBits  = 36
	maxSlabs = 1 << (refBits - offBits)
	// slabHeadroom slabs are kept free: a write is refused when fewer remain,
	// so that no operation can run out of refs halfway.
	slabHeadroom = 4096
	minSlabSize  = 512
)

// arena is an append-only allocator of byte regions in large slabs. Slabs
// are []byte (no pointers, so the garbage collector never scans them), are
// never reallocated and never reused: a region's bytes change only when the
// table overwrites them in place, which it does only for regions no live
// snapshot can reach. Fresh regions are zero, because slabs are zeroed when
// made and never handed out twice.
type arena struct {
	slabs   [][]byte
	cur     int   // index of the slab being filled
	off     int   // fill offset in slabs[cur]
	used    int64 // bytes handed out
	size    int64 // bytes of all slabs
	maxSlab int
}

func newArena(maxSlab int) arena { return newArenaFor(maxSlab, 0) }

// newArenaFor returns an arena whose first slab has room for about want
// bytes (within maxSlab): a compaction, which knows the live bytes it will
// copy, allocates one slab rather than a run of growing ones.
func newArenaFor(maxSlab int, want int64) arena {
	first := min(int(max(ceilPow2(want+8), minSlabSize)), maxSlab)
	first = max(first, min(minSlabSize, maxSlab))
	return arena{slabs: [][]byte{make([]byte, first)}, off: 8, size: int64(first), used: 8, maxSlab: maxSlab}
}

// alloc returns a fresh, zeroed region of n > 0 bytes.
func (a *arena) alloc(n int) (uint64, []byte) {
	s := a.slabs[a.cur]
	if a.off+n <= len(s) {
		ref := uint64(a.cur)<<offBits | uint64(a.off)
		b := s[a.off : a.off+n : a.off+n]
		a.off += n
		a.used += int64(n)
		return ref, b
	}
	return a.allocSlow(n)
}

func (a *arena) allocSlow(n int) (uint64, []byte) {
	a.used += int64(n)
	a.size += int64(n)
	if n > a.maxSlab/2 {
		// A region of its own; the slab being filled stays current.
		idx := len(a.slabs)
		b := make([]byte, n)
		a.slabs = append(a.slabs, b)
		return uint64(idx) << offBits, b[:n:n]
	}
	size := int(min(max(ceilPow2(a.size/8), minSlabSize), int64(a.maxSlab)))
	size = max(size, int(ceilPow2(int64(n))))
	a.size += int64(size - n)
	s := make([]byte, size)
	a.slabs = append(a.slabs, s)
	a.cur, a.off = len(a.slabs)-1, n
	return uint64(a.cur) << offBits, s[:n:n]
}

func ceilPow2(n int64) int64 {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len64(uint64(n-1))
}

// marks records the end of an arena at a snapshot: the regions a snapshot
// can reach were all allocated before it.
type marks struct {
	lo       uint64 // refs below lo are frozen
	hi0, hi1 uint64 // so are refs in [hi0, hi1): regions of their own allocated after slab cur
}

func (a *arena) mark() marks {
	return marks{
		lo:  uint64(a.cur)<<offBits | uint64(a.off),
		hi0: uint64(a.cur+1) << offBits,
		hi1: uint64(len(a.slabs)) << offBits,
	}
}

func (m *marks) frozen(ref uint64) bool {
	return ref < m.lo || (ref >= m.hi0 && ref < m.hi1)
}

// at returns the bytes of slabs from ref to the end of its slab.
func at(slabs [][]byte, ref uint64) []byte {
	return slabs[ref>>offBits][ref&offMask:]
}

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
