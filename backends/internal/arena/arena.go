// Package arena is the pointer-free byte allocator that the in-memory
// backends (cow and btree) keep their entries in, so that the garbage
// collector has nothing to trace per entry.
//
// An Arena hands out byte regions of append-only []byte slabs, addressed by
// 64-bit refs (slab index, offset). Slabs hold no pointers, so the
// collector never scans them; they are never reallocated, and a region is
// never handed out twice, so bytes written once stay where they are. A
// snapshot that keeps a copy of the slab list (Arena.Slabs) reads the
// regions it saw for as long as it likes, while the arena keeps allocating:
// new slabs are appended beyond the copy's length, new regions lie beyond
// every region allocated before.
//
// What the backends build on it is their own: they decide which regions a
// live snapshot may see (Marks), account the bytes they stop using
// (garbage) and, once CompactDue says so, rebuild their live entries into a
// fresh Arena. A snapshot keeps the old slabs through its own copy of the
// slab list, so compaction never changes what it reads.
package arena

import "math/bits"

// A ref addresses a region of an arena: the slab index in the high bits,
// the offset in the slab in the low OffBits bits. Regions never straddle
// slabs, so a region is At(slabs, ref)[:size]. Ref 0 means none: slab 0
// starts with 8 reserved bytes, so no region has it.
const (
	// OffBits is the number of bits of a ref's offset: slabs are at most
	// MaxSlabSize bytes, except a slab that holds a single region.
	OffBits = 20
	// MaxSlabSize is the largest slab an arena fills with many regions.
	MaxSlabSize = 1 << OffBits
	// RefBits is the number of bits a ref uses.
	RefBits = 36
	// MaxSlabs is the number of slabs a ref can address.
	MaxSlabs = 1 << (RefBits - OffBits)
	// MinSlabSize is the size of an arena's first slab.
	MinSlabSize = 512

	offMask = 1<<OffBits - 1
)

// Arena is an append-only allocator of byte regions in large slabs. Slabs
// are []byte (no pointers, so the garbage collector never scans them), are
// never reallocated and never reused: a region's bytes change only when
// its owner overwrites them in place, which it must do only for regions no
// live snapshot can reach. Fresh regions are zero, because slabs are zeroed
// when made and never handed out twice.
type Arena struct {
	// Slabs are the arena's slabs; a ref's slab index indexes them.
	Slabs [][]byte
	// Used is the number of bytes handed out, the 8 reserved ones
	// included.
	Used    int64
	cur     int   // index of the slab being filled
	off     int   // fill offset in Slabs[cur]
	size    int64 // bytes of all slabs
	maxSlab int
}

// New returns an empty arena whose slabs grow, from MinSlabSize, up to
// maxSlab bytes (at most MaxSlabSize).
func New(maxSlab int) Arena { return NewFor(maxSlab, 0) }

// NewFor returns an arena whose first slab has room for about want bytes
// (within maxSlab): a compaction, which knows the live bytes it will copy,
// allocates one slab rather than a run of growing ones.
func NewFor(maxSlab int, want int64) Arena {
	first := min(int(max(CeilPow2(want+8), MinSlabSize)), maxSlab)
	first = max(first, min(MinSlabSize, maxSlab))
	return Arena{Slabs: [][]byte{make([]byte, first)}, off: 8, size: int64(first), Used: 8, maxSlab: maxSlab}
}

// MaxSlab returns the largest slab the arena fills with many regions.
func (a *Arena) MaxSlab() int { return a.maxSlab }

// Alloc returns the ref of a fresh, zeroed region of n > 0 bytes, and the
// region, capped at n bytes. A region of more than half the largest slab
// gets a slab of its own. It adds a slab to Slabs at most once.
func (a *Arena) Alloc(n int) (uint64, []byte) {
	s := a.Slabs[a.cur]
	if a.off+n <= len(s) {
		ref := uint64(a.cur)<<OffBits | uint64(a.off)
		b := s[a.off : a.off+n : a.off+n]
		a.off += n
		a.Used += int64(n)
		return ref, b
	}
	return a.allocSlow(n)
}

func (a *Arena) allocSlow(n int) (uint64, []byte) {
	a.Used += int64(n)
	a.size += int64(n)
	if n > a.maxSlab/2 {
		// A region of its own; the slab being filled stays current.
		idx := len(a.Slabs)
		b := make([]byte, n)
		a.Slabs = append(a.Slabs, b)
		return uint64(idx) << OffBits, b[:n:n]
	}
	size := int(min(max(CeilPow2(a.size/8), MinSlabSize), int64(a.maxSlab)))
	size = max(size, int(CeilPow2(int64(n))))
	a.size += int64(size - n)
	s := make([]byte, size)
	a.Slabs = append(a.Slabs, s)
	a.cur, a.off = len(a.Slabs)-1, n
	return uint64(a.cur) << OffBits, s[:n:n]
}

// Size returns the bytes of all the arena's slabs.
func (a *Arena) Size() int64 { return a.size }

// CeilPow2 returns the least power of two at least n (1 for n <= 1).
func CeilPow2(n int64) int64 {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len64(uint64(n-1))
}

// At returns the bytes of slabs from ref to the end of its slab.
func At(slabs [][]byte, ref uint64) []byte {
	return slabs[ref>>OffBits][ref&offMask:]
}

// Marks records the end of an arena at a snapshot: the regions a snapshot
// can reach were all allocated before it. The zero Marks freezes nothing.
type Marks struct {
	lo       uint64 // refs below lo are frozen
	hi0, hi1 uint64 // so are refs in [hi0, hi1): regions of their own allocated after slab cur
}

// Mark returns the arena's end, for a snapshot being taken.
func (a *Arena) Mark() Marks {
	return Marks{
		lo:  uint64(a.cur)<<OffBits | uint64(a.off),
		hi0: uint64(a.cur+1) << OffBits,
		hi1: uint64(len(a.Slabs)) << OffBits,
	}
}

// Frozen reports whether the region at ref was allocated before m was
// taken: a snapshot taken then may see it, so it must not be written while
// that snapshot is live.
func (m *Marks) Frozen(ref uint64) bool {
	return ref < m.lo || (ref >= m.hi0 && ref < m.hi1)
}

// CompactDue reports whether an arena of used bytes, garbage of them no
// longer reachable, should be rebuilt with its live bytes only: once the
// garbage reaches minGarbage and outweighs the live bytes. While a snapshot
// is live (snapshotLive), a compaction frees nothing until the snapshot is
// released (the snapshot keeps the old slabs), so it waits for four times
// the live bytes: enough to bound memory under back-to-back snapshots, rare
// enough not to tax the copy-on-write path.
func CompactDue(used, garbage, minGarbage int64, snapshotLive bool) bool {
	if garbage < minGarbage {
		return false
	}
	live := used - garbage
	return garbage > live && (!snapshotLive || garbage > 4*live)
}
