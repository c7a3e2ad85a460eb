package storekit

import (
	"encoding/binary"
	"errors"
)

// The sorted key layout, shared by the sorted backends (btree, pebble).
// An entry of a state is kept under the byte string
//
//	key group (2 bytes, big-endian) | [backend prefix] | framed key
//	| framed namespace (sub-keyed states only) | user key (maps only)
//
// where a framed field is the field cut into groups of FrameGroup bytes,
// the last one padded with zeros, each followed by a marker byte: 0 to
// FrameGroup, the number of the group's bytes that belong to the field, in
// the last group; FrameGroup+1 in every other group. The framing is
//
//   - prefix-free: the fields of an entry key split unambiguously, so every
//     namespace of a key, one (key, namespace) and a map's user keys are
//     each one contiguous span of the sorted keyspace;
//   - order-preserving: framed fields compare bytewise as their contents
//     do (bytes.Compare), whatever their lengths, so keys and namespaces
//     come out of a sorted backend in encoded order — the order of their
//     logical values (DESIGN.md §2) — like the user keys of a SortedMap,
//     which are the last field and need no framing;
//   - cheap for the common widths: an 8-byte key (an int64) takes 9 bytes,
//     as a uvarint length prefix would; a keyed state, whose namespace is
//     always empty, writes none.
//
// Two fields differ first either inside a group both fill, where their
// bytes decide; or where one ends: its padding (zero) meets the other's
// byte, which is not smaller, and if it is equal, the shorter field's
// marker is smaller than the longer one's.

// FrameGroup is the number of field bytes in one group of a framed field.
const FrameGroup = 8

// frameMore marks a group that the field continues past.
const frameMore = FrameGroup + 1

// ErrBadLayout reports an entry key, or an encoded list, that a backend
// did not write: a bug or a damaged working directory, reported as an
// error, never a panic.
var ErrBadLayout = errors.New("stategen: malformed entry key or list encoding")

// GroupLen is the length of the key-group prefix of every entry key.
const GroupLen = 2

// AppendGroup appends the two-byte big-endian key group kg, which is below
// runtime.UpperBoundMaxParallelism (1<<15): the first byte of an entry key
// is below 0x80, and a backend may keep other data above it.
func AppendGroup(dst []byte, kg int) []byte { return append(dst, byte(kg>>8), byte(kg)) }

// ReadGroup returns the key group at the front of the entry key b.
func ReadGroup(b []byte) (kg int, rest []byte, err error) {
	if len(b) < GroupLen {
		return 0, nil, ErrBadLayout
	}
	return int(b[0])<<8 | int(b[1]), b[GroupLen:], nil
}

// FramedLen returns the length of the framing of an n-byte field.
func FramedLen(n int) int { return max(1, (n+FrameGroup-1)/FrameGroup) * (FrameGroup + 1) }

// AppendFramed appends the framing of field.
func AppendFramed(dst, field []byte) []byte {
	for len(field) >= FrameGroup {
		if len(field) == FrameGroup {
			return append(append(dst, field...), FrameGroup)
		}
		dst = append(append(dst, field[:FrameGroup]...), frameMore)
		field = field[FrameGroup:]
	}
	var pad [FrameGroup + 1]byte
	copy(pad[:], field)
	pad[FrameGroup] = byte(len(field))
	return append(dst, pad[:]...)
}

// ReadFramed splits a framed field off the front of b. A field of one
// group is returned as a capped slice of b; a longer field is appended to
// scratch (which is returned grown, for reuse) and returned from there.
// It fails with ErrBadLayout if b does not start with a framed field.
func ReadFramed(b, scratch []byte) (field, rest, scratchOut []byte, err error) {
	const w = FrameGroup + 1
	if len(b) < w {
		return nil, nil, scratch, ErrBadLayout
	}
	if m := int(b[FrameGroup]); m <= FrameGroup {
		if !zeros(b[m:FrameGroup]) {
			return nil, nil, scratch, ErrBadLayout
		}
		return b[:m:m], b[w:], scratch, nil
	}
	start := len(scratch)
	for {
		if len(b) < w {
			return nil, nil, scratch[:start], ErrBadLayout
		}
		m := int(b[FrameGroup])
		switch {
		case m == frameMore:
			scratch = append(scratch, b[:FrameGroup]...)
		case m >= 1 && m <= FrameGroup && zeros(b[m:FrameGroup]):
			// (An empty last group after a full one is not how
			// AppendFramed ends a field: a field has one framing.)
			scratch = append(scratch, b[:m]...)
			return scratch[start:len(scratch):len(scratch)], b[w:], scratch, nil
		default:
			return nil, nil, scratch[:start], ErrBadLayout
		}
		b = b[w:]
	}
}

// SkipFramed returns what follows the framed field at the front of b,
// without decoding it.
func SkipFramed(b []byte) (rest []byte, err error) {
	const w = FrameGroup + 1
	for {
		if len(b) < w || b[FrameGroup] > frameMore {
			return nil, ErrBadLayout
		}
		m := b[FrameGroup]
		b = b[w:]
		if m != frameMore {
			return b, nil
		}
	}
}

func zeros(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// AppendKeyPrefix appends the framed key: after the key group (and any
// prefix of the backend's), the prefix of every entry of one key, in all
// its namespaces.
func AppendKeyPrefix(dst, key []byte) []byte { return AppendFramed(dst, key) }

// AppendEntry appends the framed key and, in a sub-keyed state, the framed
// namespace: the whole entry key of a value or a list, after the prefix,
// and the prefix of the entries of a map. A keyed state's namespace is
// always empty, and is not written.
func AppendEntry(dst, key, ns []byte, subKeyed bool) []byte {
	dst = AppendFramed(dst, key)
	if subKeyed {
		dst = AppendFramed(dst, ns)
	}
	return dst
}

// SplitEntry splits what AppendEntry wrote, followed by a user key, into
// the key, the namespace (empty in a keyed state) and the user key. The
// slices alias b and are capped, except a field longer than one group,
// which is decoded into scratch (see ReadFramed).
func SplitEntry(b []byte, subKeyed bool, scratch []byte) (key, ns, uk, scratchOut []byte, err error) {
	key, rest, scratch, err := ReadFramed(b, scratch)
	if err != nil {
		return nil, nil, nil, scratch, err
	}
	if subKeyed {
		if ns, rest, scratch, err = ReadFramed(rest, scratch); err != nil {
			return nil, nil, nil, scratch, err
		}
	}
	return key, ns, rest[:len(rest):len(rest)], scratch, nil
}

// AppendPrefixEnd appends the smallest byte string greater than every
// string with prefix p, and reports false if there is none (p is empty or
// all 0xff; never the case for the prefixes of entry keys, whose first
// byte is below 0x80).
func AppendPrefixEnd(dst, p []byte) ([]byte, bool) {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] != 0xff {
			dst = append(dst, p[:i+1]...)
			dst[len(dst)-1]++
			return dst, true
		}
	}
	return dst, false
}

// Lists. A sorted backend keeps a list under its entry key as the
// concatenation of its elements, each preceded by its length as a uvarint
// (a list's elements are never compared, so their encoding need not keep
// order).

// AppendElem appends the encoding of one list element (and of any
// length-prefixed field).
func AppendElem(dst, elem []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(elem)))
	return append(dst, elem...)
}

// ElemLen returns the length of the encoding of an n-byte list element.
func ElemLen(n int) int {
	l := 1
	for x := uint64(n); x >= 0x80; x >>= 7 {
		l++
	}
	return l + n
}

// ReadElem splits an element written by AppendElem off the front of b;
// the element is a capped slice of b.
func ReadElem(b []byte) (elem, rest []byte, ok bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return nil, nil, false
	}
	end := w + int(n)
	return b[w:end:end], b[end:], true
}

// EachElem calls fn with every element of an encoded list until fn returns
// false. It fails with ErrBadLayout if list is malformed.
func EachElem(list []byte, fn func(elem []byte) bool) error {
	for len(list) > 0 {
		elem, rest, ok := ReadElem(list)
		if !ok {
			return ErrBadLayout
		}
		if !fn(elem) {
			return nil
		}
		list = rest
	}
	return nil
}
