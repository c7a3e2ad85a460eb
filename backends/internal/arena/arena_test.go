package arena

import (
	"testing"
)

// TestAllocHandsOutFreshRegions allocates regions of many sizes, small
// ones and ones larger than half a slab, and checks that each is zeroed,
// as long as asked, within one slab, distinct from every other (writing
// one never shows in another), that ref 0 is never handed out, and that
// Used counts what was handed out.
func TestAllocHandsOutFreshRegions(t *testing.T) {
	a := New(1 << 10)
	type region struct {
		ref uint64
		n   int
	}
	var regions []region
	used := int64(8)
	for i := range 2000 {
		n := 1 + (i*37)%700
		ref, b := a.Alloc(n)
		if ref == 0 {
			t.Fatal("Alloc returned ref 0")
		}
		if len(b) != n || cap(b) != n {
			t.Fatalf("Alloc(%d) = %d bytes, capacity %d", n, len(b), cap(b))
		}
		for _, c := range b {
			if c != 0 {
				t.Fatalf("Alloc(%d) returned a region that is not zero", n)
			}
		}
		if got := At(a.Slabs, ref)[:n]; &got[0] != &b[0] {
			t.Fatalf("At(ref of region %d) is not the region", i)
		}
		for j := range b {
			b[j] = byte(i)
		}
		regions = append(regions, region{ref, n})
		used += int64(n)
	}
	for i, r := range regions {
		for _, c := range At(a.Slabs, r.ref)[:r.n] {
			if c != byte(i) {
				t.Fatalf("region %d was overwritten by another", i)
			}
		}
	}
	if a.Used != used || a.Size() < used {
		t.Fatalf("Used = %d, Size = %d, want Used %d <= Size", a.Used, a.Size(), used)
	}
}

// TestMarksFreezeWhatWasAllocatedBefore checks Marks: every region
// allocated before Mark is frozen, every region allocated after is not,
// whether it went into the slab being filled, into a new one, or into a
// slab of its own.
func TestMarksFreezeWhatWasAllocatedBefore(t *testing.T) {
	a := New(1 << 10)
	var before, after []uint64
	for i := range 300 {
		ref, _ := a.Alloc(1 + (i*53)%900)
		before = append(before, ref)
	}
	m := a.Mark()
	for i := range 300 {
		ref, _ := a.Alloc(1 + (i*29)%900)
		after = append(after, ref)
	}
	for i, ref := range before {
		if !m.Frozen(ref) {
			t.Errorf("region %d, allocated before the mark, is not frozen", i)
		}
	}
	for i, ref := range after {
		if m.Frozen(ref) {
			t.Errorf("region %d, allocated after the mark, is frozen", i)
		}
	}
	var zero Marks
	if zero.Frozen(before[0]) {
		t.Error("the zero Marks freezes a region")
	}
}

// TestCompactDue pins the compaction rule: never below the minimum
// garbage; once garbage outweighs the live bytes; while a snapshot is
// live, once it outweighs four times them.
func TestCompactDue(t *testing.T) {
	for _, c := range []struct {
		used, garbage, min int64
		live, want         bool
	}{
		{used: 100, garbage: 40, min: 1, want: false},
		{used: 100, garbage: 51, min: 1, want: true},
		{used: 100, garbage: 51, min: 64, want: false},
		{used: 100, garbage: 51, min: 1, live: true, want: false},
		{used: 100, garbage: 81, min: 1, live: true, want: true},
	} {
		if got := CompactDue(c.used, c.garbage, c.min, c.live); got != c.want {
			t.Errorf("CompactDue(used %d, garbage %d, min %d, snapshot live %v) = %v, want %v",
				c.used, c.garbage, c.min, c.live, got, c.want)
		}
	}
}
