package btree

import (
	"bytes"
	"encoding/binary"
	"errors"

	tb "github.com/tidwall/btree"
)

// item is one entry of a tree: its item key (see the package doc) followed
// by its value in one allocation, so that an entry costs one heap object
// and one pointer for the garbage collector to trace.
//
// p0, p1 and p2 hold the first 24 bytes of the item key, big-endian and
// padded with zeros: most comparisons are decided by them, without reading
// b, which would cost a cache miss per comparison in a large tree. The item
// keys of a value of a 20-byte key, or of a map entry of an int64 key and
// an int64 user key, fit whole.
//
// The bytes of b[:len(b)] are never written once the item is in a tree: a
// snapshot that shares the item reads them while the live tree changes. A
// list's Add may append into b's spare capacity, beyond the length of
// every item that refers to b, and replace the item with a longer one.
type item struct {
	p0, p1, p2 uint64
	b          []byte
	kl         uint32
}

// inlineLen is the number of item-key bytes held in p0, p1 and p2.
const inlineLen = 24

// tree is the B-tree every state keeps its entries in.
type tree = tb.BTreeG[item]

// iterator is a tree iterator.
type iterator = tb.IterG[item]

// key returns the item key, and value the value; both are capped, so that
// an append by a reader cannot reach the bytes after them.
func (it item) key() []byte   { return it.b[:it.kl:it.kl] }
func (it item) value() []byte { return it.b[it.kl:len(it.b):len(it.b)] }

// lessItem orders items by item key, bytewise. If the padded prefixes
// differ, their order is the keys' order (a key that ends inside the
// prefix is padded with zeros, below any byte that could follow); if they
// are equal and both keys fit in them, the shorter key is the smaller.
func lessItem(a, b item) bool {
	if a.p0 != b.p0 {
		return a.p0 < b.p0
	}
	if a.p1 != b.p1 {
		return a.p1 < b.p1
	}
	if a.p2 != b.p2 {
		return a.p2 < b.p2
	}
	if a.kl <= inlineLen && b.kl <= inlineLen {
		return a.kl < b.kl
	}
	return bytes.Compare(a.b[:a.kl], b.b[:b.kl]) < 0
}

// inline returns the padded big-endian prefix of item key k.
func inline(k []byte) (p0, p1, p2 uint64) {
	if len(k) >= inlineLen {
		return binary.BigEndian.Uint64(k), binary.BigEndian.Uint64(k[8:]), binary.BigEndian.Uint64(k[16:])
	}
	var pad [inlineLen]byte
	copy(pad[:], k)
	return binary.BigEndian.Uint64(pad[:]), binary.BigEndian.Uint64(pad[8:]), binary.BigEndian.Uint64(pad[16:])
}

// makeItem returns the item of b, whose first kl bytes are the item key.
func makeItem(b []byte, kl int) item {
	p0, p1, p2 := inline(b[:kl])
	return item{p0: p0, p1: p1, p2: p2, b: b, kl: uint32(kl)}
}

// probe returns an item that compares equal to the item key k, for
// searches. It does not copy k.
func probe(k []byte) item { return makeItem(k, len(k)) }

// newTree returns an empty tree of the given degree, without locks: the
// operator's goroutine is its only user, and snapshots read Copy()s.
func newTree(degree int) *tree {
	return tb.NewBTreeGOptions(lessItem, tb.Options{Degree: degree, NoLocks: true})
}

// groupLen is the length of the key-group prefix of every item key.
const groupLen = 2

// appendGroup appends the two-byte big-endian key group kg, which is below
// runtime.UpperBoundMaxParallelism (1<<15).
func appendGroup(dst []byte, kg int) []byte { return append(dst, byte(kg>>8), byte(kg)) }

// appendField appends b with its length as a uvarint in front. A uvarint is
// a prefix-free code, so the result is prefix-free whatever b holds.
func appendField(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// appendKeyPrefix appends the prefix shared by every item of (kg, key):
// the key group, then the length-prefixed key.
func appendKeyPrefix(dst []byte, kg int, key []byte) []byte {
	return appendField(appendGroup(dst, kg), key)
}

// appendEntryKey appends the item key of (kg, key, ns) without a user key:
// the whole item key of a value or list entry, and the prefix of the items
// of a map.
func appendEntryKey(dst []byte, kg int, key, ns []byte) []byte {
	return appendField(appendKeyPrefix(dst, kg, key), ns)
}

// appendPrefixEnd appends the smallest byte string that is greater than
// every string having p as a prefix, and reports false if there is none
// (p is empty or all 0xff; never the case for the prefixes of item keys,
// whose first byte is below 0x80).
func appendPrefixEnd(dst, p []byte) ([]byte, bool) {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] != 0xff {
			dst = append(dst, p[:i+1]...)
			dst[len(dst)-1]++
			return dst, true
		}
	}
	return dst, false
}

// errBadItem reports an item key or list the store did not write: a bug,
// reported as an error rather than a panic.
var errBadItem = errors.New("btree: internal error: malformed item")

// readField splits a length-prefixed field off the front of b.
func readField(b []byte) (field, rest []byte, ok bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return nil, nil, false
	}
	end := w + int(n)
	return b[w:end:end], b[end:], true
}

// parseItemKey splits an item key into its key group, key, namespace and
// user key (empty for values and lists).
func parseItemKey(ik []byte) (kg int, key, ns, uk []byte, err error) {
	if len(ik) < groupLen {
		return 0, nil, nil, nil, errBadItem
	}
	kg = int(ik[0])<<8 | int(ik[1])
	key, rest, ok := readField(ik[groupLen:])
	if !ok {
		return 0, nil, nil, nil, errBadItem
	}
	ns, uk, ok = readField(rest)
	if !ok {
		return 0, nil, nil, nil, errBadItem
	}
	return kg, key, ns, uk, nil
}

// elemLen returns the encoded length of a list element of n bytes.
func elemLen(n int) int {
	l := 1
	for x := uint64(n); x >= 0x80; x >>= 7 {
		l++
	}
	return l + n
}

// eachElem calls fn with every element of an encoded list until fn
// returns false. It fails if list is malformed.
func eachElem(list []byte, fn func(elem []byte) bool) error {
	for len(list) > 0 {
		elem, rest, ok := readField(list)
		if !ok {
			return errBadItem
		}
		if !fn(elem) {
			return nil
		}
		list = rest
	}
	return nil
}
