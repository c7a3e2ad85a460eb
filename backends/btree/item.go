package btree

import (
	"bytes"
	"encoding/binary"
	"fmt"

	tb "github.com/tidwall/btree"

	"github.com/stategen/stategen/runtime/storekit"
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
const groupLen = storekit.GroupLen

// Item keys follow the sorted key layout of package storekit, which
// backends/pebble shares: the key group, the framed key, the framed
// namespace (sub-keyed states only), the user key (maps only). Framed
// fields keep their order whatever their lengths, so keys, namespaces and
// user keys come out of a tree in encoded order.

// appendKeyPrefix appends the prefix shared by every item of (kg, key), in
// all its namespaces.
func appendKeyPrefix(dst []byte, kg int, key []byte) []byte {
	return storekit.AppendKeyPrefix(storekit.AppendGroup(dst, kg), key)
}

// appendEntryKey appends the item key of (kg, key, ns) without a user key:
// the whole item key of a value or list entry, and the prefix of the items
// of a map. A keyed state's items have no namespace.
func appendEntryKey(dst []byte, kg int, key, ns []byte, subKeyed bool) []byte {
	return storekit.AppendEntry(storekit.AppendGroup(dst, kg), key, ns, subKeyed)
}

// errBadItem reports an item key or list the store did not write: a bug,
// reported as an error rather than a panic.
var errBadItem = fmt.Errorf("btree: internal error: %w", storekit.ErrBadLayout)

// parseItemKey splits an item key of a state (sub-keyed or not) into its
// key group, key, namespace and user key (empty for values and lists). A
// key or namespace longer than one group of the framing is decoded into
// scratch, which is returned for reuse.
func parseItemKey(ik []byte, subKeyed bool, scratch []byte) (kg int, key, ns, uk, scratchOut []byte, err error) {
	kg, rest, err := storekit.ReadGroup(ik)
	if err == nil {
		key, ns, uk, scratch, err = storekit.SplitEntry(rest, subKeyed, scratch)
	}
	if err != nil {
		return 0, nil, nil, nil, scratch, errBadItem
	}
	return kg, key, ns, uk, scratch, nil
}

// eachElem calls fn with every element of an encoded list until fn
// returns false. It fails if list is malformed.
func eachElem(list []byte, fn func(elem []byte) bool) error {
	if storekit.EachElem(list, fn) != nil {
		return errBadItem
	}
	return nil
}
