package pebble

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cespare/xxhash/v2"
	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
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

// TestBuildFilterHoldsEveryKey: a filter built from a database holds every
// key of it, whether the build kept the keys' hashes from its counting
// scan or, their hashes past its bound, scanned the database again; and a
// database whose filter would pass the bound gets none.
func TestBuildFilterHoldsEveryKey(t *testing.T) {
	db, err := pebbledb.Open("", &pebbledb.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const n = 5000
	var keys [][]byte
	for i := range n {
		k := fmt.Appendf(nil, "key-%06d", i)
		keys = append(keys, k)
		if err := db.Set(k, nil, pebbledb.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	// The filter takes 5 bytes a key (filterHeadroom*filterBitsPerKey
	// bits) and the hashes 8: 25,000 and 40,000 bytes.
	for _, c := range []struct {
		name  string
		limit int64
		on    bool
	}{
		{"hashes kept", 1 << 20, true},
		{"scanned again", 30_000, true},
		{"too large", 20_000, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := buildFilter(db, c.limit, nil)
			if err != nil {
				t.Fatal(err)
			}
			if on := f.blocks != nil; on != c.on {
				t.Fatalf("limit %d: filter on %v, want %v", c.limit, on, c.on)
			}
			if size := int64(len(f.blocks)) * 64; size > c.limit {
				t.Fatalf("limit %d: a filter of %d bytes", c.limit, size)
			}
			for _, k := range keys {
				if !f.mayHold(xxhash.Sum64(k)) {
					t.Fatalf("limit %d: key %q of the database is absent from its filter", c.limit, k)
				}
			}
		})
	}
}
