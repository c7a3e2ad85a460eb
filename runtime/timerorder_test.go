package runtime

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTimerKeyLess checks timerKeyLess against bytes.Compare, which it
// must agree with on every pair: timer keys (an 8-byte time, then a key and
// namespace) of few distinct times, so that ties on the time are common,
// and keys shorter than a time.
func TestTimerKeyLess(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	key := func() []byte {
		if rng.IntN(10) == 0 {
			return AppendInt64Key(nil, rng.Int64N(3)-1)[:rng.IntN(9)]
		}
		k := AppendInt64Key(nil, rng.Int64N(5)-2)
		return AppendStringKey(k, string(rune('a'+rng.IntN(3)))+string(rune('a'+rng.IntN(3))))
	}
	for range 100_000 {
		a, b := key(), key()
		if got, want := timerKeyLess(a, b), bytes.Compare(a, b) < 0; got != want {
			t.Fatalf("timerKeyLess(%x, %x) = %v, want %v", a, b, got, want)
		}
		if got, want := timerKeyCompare(a, b), bytes.Compare(a, b); got != want {
			t.Fatalf("timerKeyCompare(%x, %x) = %v, want %v", a, b, got, want)
		}
	}
}

// TestHeadOrder drives headOrder as Advance does — reset, then fire the
// first head's next timer and pop or fix it — over heads of random timer
// keys (many of one time, some shorter than a time), and checks that the
// timers come out in order, every one once.
func TestHeadOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for round := range 200 {
		heads := make([]head, 1+rng.IntN(40))
		var all [][]byte
		for i := range heads {
			n := rng.IntN(6)
			for range n {
				k := AppendInt64Key(nil, rng.Int64N(20))
				if rng.IntN(10) == 0 {
					k = k[:rng.IntN(8)] // shorter than a time
				} else {
					k = AppendInt64Key(k, int64(i))
				}
				heads[i].q = append(heads[i].q, k)
			}
			slices.SortFunc(heads[i].q, bytes.Compare)
			heads[i].valid = true
			all = append(all, heads[i].q...)
		}
		slices.SortFunc(all, bytes.Compare)
		due := func(i int) bool { return len(heads[i].q) > 0 }
		var o headOrder
		o.reset(heads, due)
		var got [][]byte
		for len(o.idx) > 0 {
			hd := &heads[o.idx[0]]
			got = append(got, hd.q[0])
			hd.q = hd.q[1:]
			if due(o.idx[0]) {
				o.down(0)
			} else {
				o.pop()
			}
		}
		if !slices.EqualFunc(got, all, bytes.Equal) {
			t.Fatalf("round %d: fired %x, want %x", round, got, all)
		}
	}
}

// TestHeadSearch checks head.search against a binary search by
// bytes.Compare over random sorted heads, for keys present and absent.
func TestHeadSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	key := func() []byte {
		k := AppendInt64Key(nil, rng.Int64N(6))
		if rng.IntN(10) == 0 {
			return k[:rng.IntN(9)]
		}
		return AppendInt64Key(k, rng.Int64N(4))
	}
	for range 2000 {
		var hd head
		for range rng.IntN(20) {
			hd.q = append(hd.q, key())
		}
		slices.SortFunc(hd.q, bytes.Compare)
		hd.q = slices.CompactFunc(hd.q, bytes.Equal)
		for range 10 {
			uk := key()
			at, found := hd.search(uk)
			wantAt, wantFound := slices.BinarySearchFunc(hd.q, uk, bytes.Compare)
			if at != wantAt || found != wantFound {
				t.Fatalf("search(%x) in %x = %d %v, want %d %v", uk, hd.q, at, found, wantAt, wantFound)
			}
		}
	}
}
