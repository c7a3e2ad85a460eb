package pebble

import (
	"math/rand/v2"
	"testing"
)

// TestKeyFilterHoldsWhatItAdds: a filter never answers "absent" for a key
// it added, however full, and at its design load answers "may hold" for
// about 1% of the keys it did not add.
func TestKeyFilterHoldsWhatItAdds(t *testing.T) {
	f := newKeyFilter(1 << 20)
	capacity := len(f.blocks) * 512 / filterBitsPerKey
	rng := rand.New(rand.NewPCG(1, 2))
	added := make([]uint64, 3*capacity)
	for i := range added {
		added[i] = rng.Uint64()
		f.add(added[i])
		if f.rebuild != (f.n > capacity) {
			t.Fatalf("after %d keys (%d counted): rebuild %v, capacity %d", i+1, f.n, f.rebuild, capacity)
		}
		if i+1 == capacity {
			fp := 0
			for range 100_000 {
				if f.mayHold(rng.Uint64()) {
					fp++
				}
			}
			if rate := float64(fp) / 100_000; rate > 0.02 {
				t.Errorf("false positives at the design load: %.2f%%, want about 1%%", 100*rate)
			}
		}
	}
	for i, h := range added {
		if !f.mayHold(h) {
			t.Fatalf("key %d of %d added, absent from the filter", i, len(added))
		}
	}
	var off keyFilter
	if !off.mayHold(1) {
		t.Fatal("a filter that is off answers absent")
	}
	if f := newKeyFilter(-1); f.blocks != nil {
		t.Fatal("a filter of no bytes is on")
	}
}
