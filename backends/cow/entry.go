package cow

import (
	"encoding/binary"
	"math/bits"

	"github.com/cespare/xxhash/v2"
)

// Table entries (one per (key, namespace)) are laid out as
//
//	uvarint len(key) | uvarint len(ns) | uvarint len(value) | key | ns | value
//
// and entries of the nested B-trees (one per map user key or namespace) as
//
//	uvarint len(userKey) | uvarint len(value) | userKey | value

func entrySize(k, ns, v int) int { return uvlen(k) + uvlen(ns) + uvlen(v) + k + ns + v }

func writeEntry(b, key, ns, val []byte) {
	if len(key)|len(ns)|len(val) < 0x80 {
		b[0], b[1], b[2] = byte(len(key)), byte(len(ns)), byte(len(val))
		n := 3 + copy(b[3:], key)
		n += copy(b[n:], ns)
		copy(b[n:], val)
		return
	}
	n := putUvarint(b, len(key))
	n += putUvarint(b[n:], len(ns))
	n += putUvarint(b[n:], len(val))
	n += copy(b[n:], key)
	n += copy(b[n:], ns)
	copy(b[n:], val)
}

// decodeEntry splits the entry at the front of b. ok is false if b does not
// hold a whole entry.
func decodeEntry(b []byte) (key, ns, val []byte, size int, ok bool) {
	var kl, nl, vl, h int
	if len(b) >= 3 && b[0]|b[1]|b[2] < 0x80 {
		kl, nl, vl, h = int(b[0]), int(b[1]), int(b[2]), 3
	} else {
		var n1, n2, n3 int
		kl, n1 = uvarint(b)
		if n1 == 0 {
			return
		}
		nl, n2 = uvarint(b[n1:])
		if n2 == 0 {
			return
		}
		vl, n3 = uvarint(b[n1+n2:])
		if n3 == 0 {
			return
		}
		h = n1 + n2 + n3
	}
	size = h + kl + nl + vl
	if size > len(b) || size < h {
		return nil, nil, nil, 0, false
	}
	e := h + kl
	f := e + nl
	return b[h:e:e], b[e:f:f], b[f:size:size], size, true
}

func itemSize(uk, v int) int { return uvlen(uk) + uvlen(v) + uk + v }

func writeItem(b, uk, val []byte) {
	n := putUvarint(b, len(uk))
	n += putUvarint(b[n:], len(val))
	n += copy(b[n:], uk)
	copy(b[n:], val)
}

// decodeItem splits the B-tree entry at the front of b.
func decodeItem(b []byte) (uk, val []byte, size int, ok bool) {
	var ul, vl, h int
	if len(b) >= 2 && b[0]|b[1] < 0x80 {
		ul, vl, h = int(b[0]), int(b[1]), 2
	} else {
		var n1, n2 int
		ul, n1 = uvarint(b)
		if n1 == 0 {
			return
		}
		vl, n2 = uvarint(b[n1:])
		if n2 == 0 {
			return
		}
		h = n1 + n2
	}
	size = h + ul + vl
	if size > len(b) || size < h {
		return nil, nil, 0, false
	}
	e := h + ul
	return b[h:e:e], b[e:size:size], size, true
}

// itemKey returns the user key of the B-tree entry at the front of b, or nil.
func itemKey(b []byte) []byte {
	uk, _, _, _ := decodeItem(b)
	return uk
}

// nsHash is the cheap hash mixed into a key's hash for sub-keyed states:
// wyhash-style multiply-mixing for short namespaces, XXH64 for long ones.
func nsHash(b []byte) uint64 {
	const m1, m2 = 0xa0761d6478bd642f, 0xe7037ed1a0b428db
	var a, c uint64
	switch n := len(b); {
	case n == 0:
		return m1
	case n <= 8:
		var buf [8]byte
		copy(buf[:], b)
		a, c = binary.LittleEndian.Uint64(buf[:]), uint64(n)
	case n <= 16:
		a, c = binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[n-8:])^uint64(n)<<56
	default:
		return xxhash.Sum64(b) ^ m2
	}
	hi, lo := bits.Mul64(a^m1, c^m2)
	return hi ^ lo
}
