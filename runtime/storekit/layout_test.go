package storekit_test

import (
	"bytes"
	"cmp"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stategen/stategen/runtime/storekit"
)

// randField returns a field of 0 to 27 bytes drawn from bytes that meet
// the framing's edge cases: zero (the padding), one, the group markers and
// 0xff.
func randField(r *rand.Rand) []byte {
	alphabet := []byte{0, 1, 8, 9, 0xff}
	b := make([]byte, r.IntN(28))
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return b
}

// TestFramingKeepsOrderAndSplits checks the two properties the layout
// rests on, for pairs of (key, namespace, user key) entries: entry keys
// compare as the tuples of their fields do, and split back into them.
func TestFramingKeepsOrderAndSplits(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	type entry struct{ key, ns, uk []byte }
	enc := func(e entry, sub bool) []byte {
		return append(storekit.AppendEntry(nil, e.key, e.ns, sub), e.uk...)
	}
	for range 20000 {
		sub := r.IntN(2) == 0
		a := entry{randField(r), randField(r), randField(r)}
		b := entry{randField(r), randField(r), randField(r)}
		if r.IntN(3) == 0 {
			b.key = a.key // same key: the namespaces decide
		}
		if !sub {
			a.ns, b.ns = nil, nil
		}
		want := cmp.Or(bytes.Compare(a.key, b.key), bytes.Compare(a.ns, b.ns), bytes.Compare(a.uk, b.uk))
		ea, eb := enc(a, sub), enc(b, sub)
		if got := bytes.Compare(ea, eb); got != want {
			t.Fatalf("entries %q and %q (sub-keyed %v) compare %d framed, %d as tuples", a, b, sub, got, want)
		}
		key, ns, uk, _, err := storekit.SplitEntry(ea, sub, nil)
		if err != nil || !bytes.Equal(key, a.key) || !bytes.Equal(ns, a.ns) || !bytes.Equal(uk, a.uk) {
			t.Fatalf("SplitEntry(%x) = %q, %q, %q, %v; want %q", ea, key, ns, uk, err, a)
		}
		if l := len(storekit.AppendFramed(nil, a.key)); l != storekit.FramedLen(len(a.key)) {
			t.Fatalf("FramedLen(%d) = %d, the framing is %d bytes", len(a.key), storekit.FramedLen(len(a.key)), l)
		}
		rest, err := storekit.SkipFramed(ea)
		if wantRest := ea[storekit.FramedLen(len(a.key)):]; err != nil || !bytes.Equal(rest, wantRest) {
			t.Fatalf("SkipFramed(%x) = %x, %v; want %x", ea, rest, err, wantRest)
		}
	}
}

func TestFramingWidths(t *testing.T) {
	for _, tc := range []struct{ n, framed int }{{0, 9}, {1, 9}, {8, 9}, {9, 18}, {16, 18}, {17, 27}} {
		if got := storekit.FramedLen(tc.n); got != tc.framed {
			t.Errorf("FramedLen(%d) = %d, want %d", tc.n, got, tc.framed)
		}
	}
	// A keyed state writes no namespace.
	if got := storekit.AppendEntry(nil, []byte("12345678"), nil, false); len(got) != 9 {
		t.Errorf("keyed entry of an 8-byte key is %d bytes, want 9", len(got))
	}
}

func TestReadFramedRefusesMalformed(t *testing.T) {
	for _, b := range [][]byte{
		nil,
		{1, 2, 3},                      // shorter than a group
		{1, 2, 0, 0, 0, 0, 0, 0, 10},   // marker above frameMore
		{1, 2, 3, 0, 0, 0, 0, 0, 2},    // a non-zero byte in the padding
		{1, 2, 3, 4, 5, 6, 7, 8, 9},    // continued, but nothing follows
		{1, 2, 3, 4, 5, 6, 7, 8, 9, 1}, // continued into a short group
	} {
		if _, _, _, err := storekit.ReadFramed(b, nil); !errors.Is(err, storekit.ErrBadLayout) {
			t.Errorf("ReadFramed(%x) = %v, want ErrBadLayout", b, err)
		}
		if _, err := storekit.SkipFramed(b); len(b) < 9 && !errors.Is(err, storekit.ErrBadLayout) {
			t.Errorf("SkipFramed(%x) = %v, want ErrBadLayout", b, err)
		}
	}
}

func TestElems(t *testing.T) {
	var list []byte
	elems := [][]byte{{}, []byte("a"), bytes.Repeat([]byte("x"), 300)}
	for _, e := range elems {
		list = storekit.AppendElem(list, e)
		if storekit.ElemLen(len(e)) != len(storekit.AppendElem(nil, e)) {
			t.Errorf("ElemLen(%d) is not the encoded length", len(e))
		}
	}
	var got [][]byte
	if err := storekit.EachElem(list, func(e []byte) bool { got = append(got, e); return true }); err != nil || len(got) != 3 || !bytes.Equal(got[2], elems[2]) {
		t.Errorf("EachElem = %q, %v", got, err)
	}
	if err := storekit.EachElem(list[:len(list)-1], func([]byte) bool { return true }); !errors.Is(err, storekit.ErrBadLayout) {
		t.Errorf("EachElem of a truncated list = %v, want ErrBadLayout", err)
	}
}

func FuzzSplitEntry(f *testing.F) {
	f.Add(storekit.AppendEntry(nil, []byte("key"), []byte("namespace-long"), true), true)
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0}, false)
	f.Fuzz(func(t *testing.T, b []byte, sub bool) {
		key, ns, uk, _, err := storekit.SplitEntry(b, sub, nil)
		if err != nil {
			return
		}
		// What splits re-encodes to the same bytes: the framing is canonical.
		if again := append(storekit.AppendEntry(nil, key, ns, sub), uk...); !bytes.Equal(again, b) {
			t.Fatalf("SplitEntry(%x) = %q, %q, %q, which encode to %x", b, key, ns, uk, again)
		}
	})
}
