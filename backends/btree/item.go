package btree

import (
	"encoding/binary"
	"fmt"

	"github.com/stategen/stategen/backends/internal/arena"
	"github.com/stategen/stategen/runtime/storekit"
)

// item is one entry of a tree: the first 24 bytes of its item key (see the
// package doc) and the ref of the entry's region in the tree's arena, with
// the lengths needed to read it. It holds no Go pointer, so the nodes'
// item slices are never scanned by the garbage collector, and a write
// allocates nothing per entry: the bytes go into the arena's slabs.
//
// p0, p1 and p2 hold the first 24 bytes of the item key, big-endian and
// padded with zeros: most comparisons are decided by them, without reading
// the arena, which would cost a cache miss per comparison in a large tree.
// An item key of at most inlineLen bytes is held whole by them and is not
// stored in the arena at all; a longer one is stored whole at the start of
// the region. The region is then
//
//	values, map entries: item key (if longer than inlineLen) | value (vl bytes)
//	lists:               item key (if longer than inlineLen) | capacity (4 bytes) | elements (vl bytes used)
//
// A region of no bytes (a short item key and an empty value) has ref 0.
// Which bytes of a region may be written while a snapshot can see them is
// the tree's business (see tree).
type item struct {
	p0, p1, p2 uint64
	ref        uint64 // the region, in the tree's arena; probeRef for a probe
	kl         uint32 // item key length
	vl         uint32 // value length; a list's bytes of elements
}

// inlineLen is the number of item-key bytes held in p0, p1 and p2.
const inlineLen = 24

// probeRef is the ref of a probe: an item built to search for an item key,
// whose bytes (if longer than inlineLen) are the tree's probe key. No
// region has it: refs use arena.RefBits bits.
const probeRef = ^uint64(0)

// capLen is the size of a list region's capacity field.
const capLen = 4

// storedKey returns how many bytes of an item key of length kl its region
// holds: all of them, or none if the inline prefix holds them.
func storedKey(kl uint32) int {
	if kl > inlineLen {
		return int(kl)
	}
	return 0
}

// prefixLess orders items by item key, bytewise, where their inline
// prefixes decide: it returns (less, true) then, and (_, false) if both
// keys are longer than the prefix and share it. If the padded prefixes
// differ, their order is the keys' order (a key that ends inside the
// prefix is padded with zeros, below any byte that could follow); if they
// are equal and one key fits in them, that key is a prefix of the other,
// so the shorter key is the smaller. It takes pointers: copying the items
// into it made every comparison stall on a store the CPU could not forward
// (measured on Nexmark: the comparisons took 2.5 times longer).
func prefixLess(a, b *item) (less, decided bool) {
	if a.p0 != b.p0 {
		return a.p0 < b.p0, true
	}
	if a.p1 != b.p1 {
		return a.p1 < b.p1, true
	}
	if a.p2 != b.p2 {
		return a.p2 < b.p2, true
	}
	if a.kl <= inlineLen || b.kl <= inlineLen {
		return a.kl < b.kl, true
	}
	return false, false
}

// inline returns the padded big-endian prefix of item key k. It loads
// whole words, shifting off what a short key's last one reads of the
// bytes before it: copying k into a padded buffer first made the loads
// wait for the copy's stores.
func inline(k []byte) (p0, p1, p2 uint64) {
	switch n := len(k); {
	case n >= inlineLen:
		return binary.BigEndian.Uint64(k), binary.BigEndian.Uint64(k[8:]), binary.BigEndian.Uint64(k[16:])
	case n > 16:
		return binary.BigEndian.Uint64(k), binary.BigEndian.Uint64(k[8:]), binary.BigEndian.Uint64(k[n-8:]) << (8 * (24 - n))
	case n > 8:
		return binary.BigEndian.Uint64(k), binary.BigEndian.Uint64(k[n-8:]) << (8 * (16 - n)), 0
	case n == 8:
		return binary.BigEndian.Uint64(k), 0, 0
	}
	for i, c := range k {
		p0 |= uint64(c) << (56 - 8*i)
	}
	return p0, 0, 0
}

// shortProbe returns a probe for an item key k of at most inlineLen bytes:
// comparisons with it never read the probe key or the arena, so a
// snapshot may search with it on any goroutine.
func shortProbe(k []byte) (p item) {
	p.setProbe(k)
	return p
}

// setProbe makes *x the probe of item key k (see shortProbe), a field at a
// time. An item is five words, more than the compiler keeps in registers:
// a composite literal is built in a temporary with word-sized stores and
// copied with 16-byte moves, which cannot be forwarded from those stores
// and wait for them to reach the cache. The point operations of a tree
// build their probe in place with it; the rest, off the hot path, use
// shortProbe. (With the handles' Keys built in place too, see
// runtime.Key: btree's Value Put -5%, Map Get -6%, List Add -5% at 100K
// keys, -count 8 interleaved, p <= 0.021.)
func (x *item) setProbe(k []byte) {
	x.p0, x.p1, x.p2 = inline(k)
	x.ref, x.kl, x.vl = probeRef, uint32(len(k)), 0
}

// keyOf returns the item key of x: from its region in slabs if it is
// longer than inlineLen, else decoded from its prefix into buf, whose
// capacity must be at least inlineLen. Either way it is capped, so that an
// append by a reader cannot reach the bytes after it.
func keyOf(slabs [][]byte, x item, buf []byte) []byte {
	if x.kl > inlineLen {
		return arena.At(slabs, x.ref)[:x.kl:x.kl]
	}
	buf = buf[:inlineLen]
	binary.BigEndian.PutUint64(buf, x.p0)
	binary.BigEndian.PutUint64(buf[8:], x.p1)
	binary.BigEndian.PutUint64(buf[16:], x.p2)
	return buf[:x.kl:x.kl]
}

// noBytes is the value of an item whose region is empty.
var noBytes = []byte{}

// valueOf returns the value of x, an item of a value or map state, capped.
func valueOf(slabs [][]byte, x item) []byte {
	if x.ref == 0 {
		return noBytes
	}
	ks := storedKey(x.kl)
	return arena.At(slabs, x.ref)[ks : ks+int(x.vl) : ks+int(x.vl)]
}

// elemsOf returns the encoded elements of x, an item of a list state,
// capped.
func elemsOf(slabs [][]byte, x item) []byte {
	o := storedKey(x.kl) + capLen
	return arena.At(slabs, x.ref)[o : o+int(x.vl) : o+int(x.vl)]
}

// listCap returns the capacity for elements of the region of x, an item
// of a list state.
func listCap(slabs [][]byte, x item) int {
	return int(binary.LittleEndian.Uint32(arena.At(slabs, x.ref)[storedKey(x.kl):]))
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
