package btree

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storekit"
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

// testTree returns an empty tree of the default options, with slabs of
// the least size, so that items spread over many slabs.
func testTree(t testing.TB, list bool) *tree {
	o, err := Options{MaxSlabSize: minMaxSlabSize}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return newTree(&o, list)
}

// TestLessIsBytewiseOrder checks the law the inline prefix must keep: the
// trees' less orders items exactly as bytes.Compare orders their item
// keys, for keys shorter than, equal to and longer than the inline prefix,
// and keys that differ only by trailing zero bytes, whether an item is in
// the arena or a probe, and so does before.
func TestLessIsBytewiseOrder(t *testing.T) {
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
	tr := testTree(t, false)
	for _, c := range cases {
		a, b := c[0], c[1]
		ia, ib := tr.newItem(a, []byte("value")), tr.newItem(b, nil)
		if got, want := tr.bt.Less(ia, ib), bytes.Compare(a, b) < 0; got != want {
			t.Fatalf("less(%x, %x) = %v, want %v", a, b, got, want)
		}
		if got, want := tr.bt.Less(ib, ia), bytes.Compare(b, a) < 0; got != want {
			t.Fatalf("less(%x, %x) = %v, want %v", b, a, got, want)
		}
		pb := tr.probe(b)
		if got, want := tr.bt.Less(ia, pb), bytes.Compare(a, b) < 0; got != want {
			t.Fatalf("less(%x, probe %x) = %v, want %v", a, b, got, want)
		}
		if got, want := tr.bt.Less(pb, ia), bytes.Compare(b, a) < 0; got != want {
			t.Fatalf("less(probe %x, %x) = %v, want %v", b, a, got, want)
		}
		if got, want := tr.before(ia, shortProbe(b), b), bytes.Compare(a, b) < 0; got != want {
			t.Fatalf("before(%x, %x) = %v, want %v", a, b, got, want)
		}
		if got := keyOf(tr.Slabs, ia, make([]byte, inlineLen)); !bytes.Equal(got, a) {
			t.Fatalf("keyOf(item of %x) = %x", a, got)
		}
		if got := valueOf(tr.Slabs, ia); string(got) != "value" || cap(got) != len(got) {
			t.Fatalf("valueOf(item of %x) = %q (capacity %d), want \"value\", capped", a, got, cap(got))
		}
	}
}

// TestItemKeyRoundTrip checks that item keys parse back into their parts,
// whatever the bytes, that items order as their (key group, key,
// namespace, user key) tuples do, whatever the lengths, and that the
// prefix of (key group, key) covers exactly that key's items.
func TestItemKeyRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	type parts struct {
		kg        int
		k, ns, uk []byte
		ik        []byte
	}
	var prev *parts
	tr := testTree(t, false)
	for range 20000 {
		sub := r.IntN(2) == 0
		kg := r.IntN(runtime.UpperBoundMaxParallelism)
		p := &parts{kg: kg, k: randBytes(r), ns: randBytes(r), uk: randBytes(r)}
		if !sub {
			p.ns = nil
		}
		p.ik = append(appendEntryKey(nil, kg, p.k, p.ns, sub), p.uk...)
		gotKG, gotK, gotNS, gotUK, _, err := parseItemKey(p.ik, sub, nil)
		if err != nil || gotKG != kg || !bytes.Equal(gotK, p.k) || !bytes.Equal(gotNS, p.ns) || !bytes.Equal(gotUK, p.uk) {
			t.Fatalf("parseItemKey(%x) = %d %x %x %x %v, want %d %x %x %x", p.ik, gotKG, gotK, gotNS, gotUK, err, kg, p.k, p.ns, p.uk)
		}
		pre := appendKeyPrefix(nil, kg, p.k)
		end, ok := storekit.AppendPrefixEnd(nil, pre)
		if !ok || !bytes.HasPrefix(p.ik, pre) || bytes.Compare(p.ik, end) >= 0 {
			t.Fatalf("item key %x is not in [%x, %x), the range of its key's prefix", p.ik, pre, end)
		}
		if prev != nil && r.IntN(2) == 0 {
			// Compare with an item of the same key group and sub-keyedness.
			q := &parts{kg: kg, k: prev.k, ns: randBytes(r), uk: randBytes(r)}
			if r.IntN(2) == 0 {
				q.k = randBytes(r)
			}
			if !sub {
				q.ns = nil
			}
			q.ik = append(appendEntryKey(nil, kg, q.k, q.ns, sub), q.uk...)
			want := cmp.Or(bytes.Compare(p.k, q.k), bytes.Compare(p.ns, q.ns), bytes.Compare(p.uk, q.uk)) < 0
			if got := tr.bt.Less(tr.newItem(p.ik, nil), tr.probe(q.ik)); got != want {
				t.Fatalf("items of (%x %x %x) and (%x %x %x): less = %v, want %v", p.k, p.ns, p.uk, q.k, q.ns, q.uk, got, want)
			}
		}
		prev = p
	}
}

// TestMalformedItems checks that the decoders report, never panic on,
// bytes the store did not write.
func TestMalformedItems(t *testing.T) {
	for _, b := range [][]byte{
		nil, {0}, {0, 0}, {0, 0, 5, 'a'}, {0, 0, 'k', 0, 0, 0, 0, 0, 0, 0, 2},
		{0, 0, 'k', 0, 0, 0, 0, 0, 0, 0, 1, 'n'},
	} {
		if _, _, _, _, _, err := parseItemKey(b, true, nil); !errors.Is(err, errBadItem) {
			t.Errorf("parseItemKey(%x) = %v, want errBadItem", b, err)
		}
	}
	for _, l := range [][]byte{{5, 'a'}, {0x80}, {1, 'a', 2}} {
		if err := eachElem(l, func([]byte) bool { return true }); !errors.Is(err, errBadItem) {
			t.Errorf("eachElem(%x) = %v, want errBadItem", l, err)
		}
	}
}

// TestInlineIsPaddedPrefix checks inline against its definition, the
// first 24 bytes of the key zero-padded and read as three big-endian
// words, for every length around the words' boundaries.
func TestInlineIsPaddedPrefix(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for n := range 40 {
		k := make([]byte, n)
		for i := range k {
			k[i] = byte(1 + r.IntN(255))
		}
		var pad [3 * 8]byte
		copy(pad[:], k)
		want := [3]uint64{binary.BigEndian.Uint64(pad[:]), binary.BigEndian.Uint64(pad[8:]), binary.BigEndian.Uint64(pad[16:])}
		p0, p1, p2 := inline(k)
		if got := [3]uint64{p0, p1, p2}; got != want {
			t.Errorf("inline(%x) = %x, want %x", k, got, want)
		}
	}
}
