package storetest

import (
	"bytes"
	"encoding/binary"
)

// The suite encodes its test keys itself rather than with the codecs of
// package runtime, so that it checks backends independently of them. Both
// encodings are order-preserving and prefix-free, as the Store contract
// requires of keys, namespaces and user keys.

// encUint32 returns the big-endian encoding of v. Fixed width makes it
// prefix-free; big-endian makes it order-preserving.
func encUint32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// encString returns the escape-and-terminate encoding of s: every 0x00 byte
// becomes 0x00 0xFF and the result ends with 0x00 0x01. The terminator sorts
// below every escaped byte, so a string sorts before its extensions.
func encString(s string) []byte {
	out := make([]byte, 0, len(s)+2)
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			out = append(out, 0, 0xff)
			continue
		}
		out = append(out, s[i])
	}
	return append(out, 0, 1)
}

// clone returns a copy of b that is never nil, so that an empty value stays
// distinguishable from an absent one where the contract cares (Range's hi).
func clone(b []byte) []byte { return append(make([]byte, 0, len(b)), b...) }

// cloneOrNil is clone, except that nil stays nil.
func cloneOrNil(b []byte) []byte {
	if b == nil {
		return nil
	}
	return clone(b)
}

// poison overwrites b so that a caller that kept a slice it was only lent
// sees garbage instead of plausible data.
func poison(b []byte) {
	for i := range b {
		b[i] = 0xdb
	}
}

// inRange reports whether u satisfies the bounds of SortedMapState.Range:
// lo <= u < hi, where a nil or empty lo is no lower bound and a nil hi is no
// upper bound (an empty, non-nil hi admits nothing).
func inRange(u, lo, hi []byte) bool {
	if len(lo) > 0 && bytes.Compare(u, lo) < 0 {
		return false
	}
	if hi != nil && bytes.Compare(u, hi) >= 0 {
		return false
	}
	return true
}
