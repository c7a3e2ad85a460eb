package runtime

import (
	"math/rand/v2"
	"testing"
)

// TestOtabMatchesMap drives an otab and a Go map through the same random
// puts and deletes, with hashes drawn from few home slots (clusters that
// wrap around the slice's end, so that deletion's backward shift meets
// every case) and from XXH64: every lookup agrees, the count is right,
// every key stays reachable from its home, and a clone is independent.
func TestOtabMatchesMap(t *testing.T) {
	for name, hash := range map[string]func(k int64) uint64{
		"clustered": func(k int64) uint64 { return uint64(k%3)<<62 | uint64(k)<<1 },
		"wrapping":  func(k int64) uint64 { return ^uint64(0) - uint64(k%2)<<1 },
		"xxh64":     func(k int64) uint64 { return HashKey(Int64Codec{}.AppendKey(nil, k)) },
	} {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			var tab otab[int64, int64]
			want := map[int64]int64{}
			var snap otab[int64, int64]
			var snapWant map[int64]int64
			for i := range 20000 {
				k := rng.Int64N(200)
				switch op := rng.IntN(10); {
				case op < 5:
					tab.put(hash(k), k, int64(i))
					want[k] = int64(i)
				case op < 9:
					tab.del(hash(k), k)
					delete(want, k)
				case snapWant == nil:
					snap, snapWant = tab.clone(), map[int64]int64{}
					for k, v := range want {
						snapWant[k] = v
					}
				}
				if tab.n != len(want) {
					t.Fatalf("op %d: %d keys, want %d", i, tab.n, len(want))
				}
				for probe := range int64(200) {
					v, ok := tab.get(hash(probe), probe)
					if w, wok := want[probe]; ok != wok || v != w {
						t.Fatalf("op %d: get(%d) = %d %v, want %d %v", i, probe, v, ok, w, wok)
					}
				}
			}
			got := map[int64]int64{}
			for k, v := range tab.all {
				got[k] = v
			}
			if len(got) != len(want) {
				t.Fatalf("all yields %d keys, want %d", len(got), len(want))
			}
			for k, v := range snap.all {
				if snapWant[k] != v {
					t.Fatalf("the clone's %d = %d, want %d", k, v, snapWant[k])
				}
				delete(snapWant, k)
			}
			if len(snapWant) != 0 {
				t.Fatalf("the clone lost %d keys", len(snapWant))
			}
		})
	}
}
