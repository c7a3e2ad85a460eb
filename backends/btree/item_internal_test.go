package btree

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stategen/stategen/runtime"
)

// randBytes returns short byte strings biased towards shared prefixes,
// zero bytes and the 24-byte inline boundary.
func randBytes(r *rand.Rand) []byte {
	n := r.IntN(30)
	b := make([]byte, n)
	for i := range b {
		switch r.IntN(4) {
		case 0:
			b[i] = 0
		case 1:
			b[i] = 0xff
		default:
			b[i] = byte('a' + r.IntN(3))
		}
	}
	return b
}

// TestLessItemIsBytewiseOrder checks the law the inline prefix must keep:
// lessItem orders items exactly as bytes.Compare orders their item keys,
// for keys shorter than, equal to and longer than the inline prefix, and
// keys that differ only by trailing zero bytes.
func TestLessItemIsBytewiseOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cases := [][2][]byte{
		{[]byte("ab"), []byte("ab\x00")},
		{[]byte{}, {0}},
		{bytes.Repeat([]byte{0}, 24), bytes.Repeat([]byte{0}, 25)},
		{bytes.Repeat([]byte{1}, 24), append(bytes.Repeat([]byte{1}, 24), 0)},
		{append(bytes.Repeat([]byte{1}, 24), 2), append(bytes.Repeat([]byte{1}, 24), 1, 9)},
	}
	for range 20000 {
		a := randBytes(r)
		b := randBytes(r)
		if r.IntN(3) == 0 { // share a prefix
			b = append(bytes.Clone(a[:r.IntN(len(a)+1)]), b...)
		}
		cases = append(cases, [2][]byte{a, b})
	}
	for _, c := range cases {
		a, b := c[0], c[1]
		ia, ib := makeItem(append(bytes.Clone(a), "value"...), len(a)), probe(b)
		if got, want := lessItem(ia, ib), bytes.Compare(a, b) < 0; got != want {
			t.Fatalf("lessItem(%x, %x) = %v, want %v", a, b, got, want)
		}
		if got, want := lessItem(ib, ia), bytes.Compare(b, a) < 0; got != want {
			t.Fatalf("lessItem(%x, %x) = %v, want %v", b, a, got, want)
		}
	}
}

// TestItemKeyRoundTrip checks that item keys parse back into their parts,
// whatever the bytes, that distinct parts make distinct item keys, and
// that the prefix of (key group, key) covers exactly that key's items.
func TestItemKeyRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	seen := map[string][3]string{}
	for range 20000 {
		kg := r.IntN(runtime.UpperBoundMaxParallelism)
		k, ns, uk := randBytes(r), randBytes(r), randBytes(r)
		ik := append(appendEntryKey(nil, kg, k, ns), uk...)
		gotKG, gotK, gotNS, gotUK, err := parseItemKey(ik)
		if err != nil || gotKG != kg || !bytes.Equal(gotK, k) || !bytes.Equal(gotNS, ns) || !bytes.Equal(gotUK, uk) {
			t.Fatalf("parseItemKey(%x) = %d %x %x %x %v, want %d %x %x %x", ik, gotKG, gotK, gotNS, gotUK, err, kg, k, ns, uk)
		}
		parts := [3]string{string(k), string(ns), string(uk)}
		if prev, ok := seen[string(ik)]; ok && prev != parts {
			t.Fatalf("item key %x stands for both %q and %q", ik, prev, parts)
		}
		seen[string(ik)] = parts
		p := appendKeyPrefix(nil, kg, k)
		end, ok := appendPrefixEnd(nil, p)
		if !ok || !bytes.HasPrefix(ik, p) || bytes.Compare(ik, p) < 0 || bytes.Compare(ik, end) >= 0 {
			t.Fatalf("item key %x is not in [%x, %x), the range of its key's prefix", ik, p, end)
		}
		other := randBytes(r)
		if !bytes.Equal(other, k) {
			oik := appendEntryKey(nil, kg, other, ns)
			if bytes.Compare(oik, p) >= 0 && bytes.Compare(oik, end) < 0 {
				t.Fatalf("the item key %x of key %x falls in the prefix range of key %x", oik, other, k)
			}
		}
	}
}

// TestMalformedItems checks that the decoders report, never panic on,
// bytes the store did not write.
func TestMalformedItems(t *testing.T) {
	for _, b := range [][]byte{
		nil, {0}, {0, 0}, {0, 0, 5, 'a'}, {0, 0, 0x80}, {0, 0, 1, 'k', 3, 'n'},
		{0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	} {
		if _, _, _, _, err := parseItemKey(b); !errors.Is(err, errBadItem) {
			t.Errorf("parseItemKey(%x) = %v, want errBadItem", b, err)
		}
	}
	for _, l := range [][]byte{{5, 'a'}, {0x80}, {1, 'a', 2}} {
		if err := eachElem(l, func([]byte) bool { return true }); !errors.Is(err, errBadItem) {
			t.Errorf("eachElem(%x) = %v, want errBadItem", l, err)
		}
	}
	if _, ok := appendPrefixEnd(nil, []byte{0xff, 0xff}); ok {
		t.Error("appendPrefixEnd of an all-0xff prefix reported a successor")
	}
	if end, ok := appendPrefixEnd(nil, []byte{1, 0xff}); !ok || !bytes.Equal(end, []byte{2}) {
		t.Errorf("appendPrefixEnd(01ff) = %x, %v, want 02", end, ok)
	}
}
