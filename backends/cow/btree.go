package cow

import (
	"bytes"
	"encoding/binary"
	"github.com/stategen/stategen/backends/internal/arena"
)

// btree is the root of a persistent B+tree in the arena: the per-(key,
// namespace) structure of Map and SortedMap states and of the namespace
// index. Its root is stored in the bytes of the owning table entry.
//
// Nodes are arena regions: an 8-byte header (item count, capacity) and
// items. A leaf item is (prefix, ref): the first 8 bytes of the user key as
// a big-endian number, compared before the entry is touched, and the ref of
// the entry (uvarint len(uk) | uvarint len(v) | uk | v). An inner item is
// (prefix, sep, child): child's separator, a lower bound of its keys that is
// greater than every key of the child before it, and the child's ref. A
// separator may name an entry deleted since; entries are never overwritten
// before a compaction rebuilds the tree, so it stays readable. Leaves grow by
// doubling up to btMax items, then split; nothing merges (compaction
// repacks). Writes copy every frozen node on the path from the root (path
// copying), so a snapshot's view of a tree is the root it captured.
type btree struct {
	root   uint64
	count  uint64 // entries
	bytes  int64  // bytes of the nodes and entries of the tree
	height uint8  // 0: the root is a leaf
}

const (
	btRootSize = 25
	btMax      = 32
	innerSize  = 8 + 24*btMax
)

func (r *btree) encode(b []byte) {
	binary.LittleEndian.PutUint64(b, r.root)
	binary.LittleEndian.PutUint64(b[8:], r.count)
	binary.LittleEndian.PutUint64(b[16:], uint64(r.bytes))
	b[24] = r.height
}

func decodeBtree(b []byte) (btree, bool) {
	if len(b) != btRootSize {
		return btree{}, false
	}
	return btree{
		root:   binary.LittleEndian.Uint64(b),
		count:  binary.LittleEndian.Uint64(b[8:]),
		bytes:  int64(binary.LittleEndian.Uint64(b[16:])),
		height: b[24],
	}, true
}

func nodeN(nd []byte) int             { return int(binary.LittleEndian.Uint16(nd)) }
func nodeCap(nd []byte) int           { return int(binary.LittleEndian.Uint16(nd[2:])) }
func setN(nd []byte, n int)           { binary.LittleEndian.PutUint16(nd, uint16(n)) }
func setCap(nd []byte, c int)         { binary.LittleEndian.PutUint16(nd[2:], uint16(c)) }
func leafSize(c int) int              { return 8 + 16*c }
func leafRef(nd []byte, i int) uint64 { return u64(nd, 2+2*i) }
func child(nd []byte, i int) uint64   { return u64(nd, 3+3*i) }

// prefix is the first 8 bytes of k, zero-padded, as a big-endian number:
// prefixes order like the keys, except that equal prefixes need a full
// comparison.
func prefix(k []byte) uint64 {
	if len(k) >= 8 {
		return binary.BigEndian.Uint64(k)
	}
	var p uint64
	for i, c := range k {
		p |= uint64(c) << (56 - 8*i)
	}
	return p
}

// lowerBound returns the index of the first of the n items of items, each
// stride words long with a prefix as its first word, whose prefix is >= kp
// (n if none), by a linear scan. A node is at most btMax items, a few
// cache lines: the scan's loads do not wait for each other, and only its
// last comparison mispredicts, where a binary search waits for each load
// before it can issue the next and mispredicts every other comparison
// (BenchmarkMapUpdate, 1,000-entry maps: 134 ns against 158 ns).
func lowerBound(items []byte, n, stride int, kp uint64) int {
	i := 0
	step := 8 * stride
	items = items[:n*step]
	for off := 0; off+8 <= len(items); off += step {
		if binary.LittleEndian.Uint64(items[off:]) >= kp {
			break
		}
		i++
	}
	return i
}

// leafSearch returns the index of the first item >= key in a leaf and
// whether it equals key, with the item's value if it does. Prefixes
// decide, but for the items whose prefix is key's, which are compared
// whole (and whose entry, decoded for the comparison, gives the value).
func leafSearch(slabs [][]byte, nd []byte, kp uint64, key []byte) (int, []byte, bool) {
	n := nodeN(nd)
	items := nd[8 : 8+16*n]
	i := lowerBound(items, n, 2, kp)
	for ; i < n && binary.LittleEndian.Uint64(items[16*i:]) == kp; i++ {
		uk, v, _, _ := decodeItem(arena.At(slabs, binary.LittleEndian.Uint64(items[16*i+8:])))
		switch c := bytes.Compare(uk, key); {
		case c == 0:
			return i, v, true
		case c > 0:
			return i, nil, false
		}
	}
	return i, nil, false
}

// route returns the child of an inner node that holds key: the last i >= 1
// whose separator is <= key (or < key if strict), else 0. Prefixes decide,
// but for the separators whose prefix is key's, which are compared whole.
func route(slabs [][]byte, nd []byte, kp uint64, key []byte, strict bool) int {
	n := nodeN(nd)
	items := nd[8 : 8+24*n]
	// The last separator whose prefix is <= kp, found as the first > kp.
	i := n - 1
	if kp < 1<<64-1 {
		i = lowerBound(items[24:], n-1, 3, kp+1)
	}
	for ; i >= 1 && binary.LittleEndian.Uint64(items[24*i:]) == kp; i-- {
		c := bytes.Compare(itemKey(arena.At(slabs, binary.LittleEndian.Uint64(items[24*i+8:]))), key)
		if c < 0 || (c == 0 && !strict) {
			break
		}
	}
	return i
}

type pathEl struct {
	ref uint64
	idx int
}

// descend returns the path from the root to the leaf that holds key; the
// leaf's idx is left for the caller.
func descend(slabs [][]byte, r *btree, kp uint64, key []byte, path []pathEl) []pathEl {
	ref := r.root
	for range int(r.height) {
		nd := arena.At(slabs, ref)
		i := route(slabs, nd, kp, key, false)
		path = append(path, pathEl{ref, i})
		ref = child(nd, i)
	}
	return append(path, pathEl{ref: ref})
}

// btGet returns the ref and the value of the entry of key in r.
func btGet(slabs [][]byte, r *btree, key []byte) (uint64, []byte, bool) {
	if r.root == 0 {
		return 0, nil, false
	}
	kp := prefix(key)
	ref := r.root
	for range int(r.height) {
		nd := arena.At(slabs, ref)
		ref = child(nd, route(slabs, nd, kp, key, false))
	}
	nd := arena.At(slabs, ref)
	i, v, ok := leafSearch(slabs, nd, kp, key)
	if !ok {
		return 0, nil, false
	}
	return leafRef(nd, i), v, true
}

func (t *table) newItem(key, val []byte) (uint64, int) {
	n := itemSize(len(key), len(val))
	ref, b := t.Alloc(n)
	writeItem(b, key, val)
	return ref, n
}

// mutNode returns the node at path[l], first copying it (and, recursively,
// its ancestors) if a live snapshot can reach it.
func (t *table) mutNode(r *btree, path []pathEl, l int) []byte {
	ref := path[l].ref
	if !t.frozen(ref) {
		return arena.At(t.Slabs, ref)
	}
	size := innerSize
	if l == int(r.height) {
		size = leafSize(nodeCap(arena.At(t.Slabs, ref)))
	}
	nref := t.copyRegion(ref, size)
	path[l].ref = nref
	t.setChild(r, path, l-1, nref)
	return arena.At(t.Slabs, nref)
}

// setChild points the child slot path[l].idx of the node at path[l] (or the
// root, if l < 0) at ref.
func (t *table) setChild(r *btree, path []pathEl, l int, ref uint64) {
	if l < 0 {
		r.root = ref
		return
	}
	nd := t.mutNode(r, path, l)
	put64(nd, 3+3*path[l].idx, ref)
}

// btPut sets key to val in r. It returns the ref of the entry that now
// holds key and that of the entry it replaced: 0 if key had none, the
// same ref if the value was written in place.
func (t *table) btPut(r *btree, key, val []byte) (uint64, uint64) {
	kp := prefix(key)
	if r.root == 0 {
		ref, n := t.newItem(key, val)
		leaf, nd := t.Alloc(leafSize(1))
		setN(nd, 1)
		setCap(nd, 1)
		put64(nd, 1, kp)
		put64(nd, 2, ref)
		*r = btree{root: leaf, count: 1, bytes: int64(n + leafSize(1))}
		return ref, 0
	}
	var buf [16]pathEl
	path := descend(t.Slabs, r, kp, key, buf[:0])
	h := int(r.height)
	nd := arena.At(t.Slabs, path[h].ref)
	idx, _, found := leafSearch(t.Slabs, nd, kp, key)
	path[h].idx = idx
	if found {
		old := leafRef(nd, idx)
		_, ov, osize, _ := decodeItem(arena.At(t.Slabs, old))
		if len(ov) == len(val) && !t.frozen(old) {
			copy(ov, val)
			return old, old
		}
		ref, n := t.newItem(key, val)
		r.bytes += int64(n - osize)
		t.garbage += int64(osize)
		nd = t.mutNode(r, path, h)
		put64(nd, 2+2*idx, ref)
		return ref, old
	}
	ref, n := t.newItem(key, val)
	r.count++
	r.bytes += int64(n)
	nd = t.mutNode(r, path, h)
	cnt, c := nodeN(nd), nodeCap(nd)
	if cnt < c {
		copy(nd[8+16*(idx+1):8+16*(cnt+1)], nd[8+16*idx:8+16*cnt])
		put64(nd, 1+2*idx, kp)
		put64(nd, 2+2*idx, ref)
		setN(nd, cnt+1)
		return ref, 0
	}
	if c < btMax {
		nc := min(2*c, btMax)
		nref, nn := t.Alloc(leafSize(nc))
		copy(nn[8:], nd[8:8+16*idx])
		copy(nn[8+16*(idx+1):], nd[8+16*idx:8+16*cnt])
		put64(nn, 1+2*idx, kp)
		put64(nn, 2+2*idx, ref)
		setN(nn, cnt+1)
		setCap(nn, nc)
		t.garbage += int64(leafSize(c))
		r.bytes += int64(leafSize(nc) - leafSize(c))
		t.setChild(r, path, h-1, nref)
		return ref, 0
	}
	// Split a full leaf: the left half stays, the right half moves.
	var items [btMax + 1][2]uint64
	for i, j := 0, 0; i <= cnt; i++ {
		if i == idx {
			items[i] = [2]uint64{kp, ref}
			continue
		}
		items[i] = [2]uint64{u64(nd, 1+2*j), u64(nd, 2+2*j)}
		j++
	}
	const left = (btMax + 2) / 2
	rref, rn := t.Alloc(leafSize(btMax))
	r.bytes += int64(leafSize(btMax))
	for i := left; i <= btMax; i++ {
		put64(rn, 1+2*(i-left), items[i][0])
		put64(rn, 2+2*(i-left), items[i][1])
	}
	setN(rn, btMax+1-left)
	setCap(rn, btMax)
	for i := 0; i < left; i++ {
		put64(nd, 1+2*i, items[i][0])
		put64(nd, 2+2*i, items[i][1])
	}
	setN(nd, left)
	t.insertChild(r, path, h-1, items[left][0], items[left][1], rref)
	return ref, 0
}

// insertChild inserts (p, sep, ch) after child path[l].idx of the inner
// node at path[l], splitting it if full; l < 0 grows a new root.
func (t *table) insertChild(r *btree, path []pathEl, l int, p, sep, ch uint64) {
	if l < 0 {
		ref, nd := t.Alloc(innerSize)
		setN(nd, 2)
		setCap(nd, btMax)
		put64(nd, 3, r.root)
		put64(nd, 4, p)
		put64(nd, 5, sep)
		put64(nd, 6, ch)
		r.root = ref
		r.height++
		r.bytes += innerSize
		return
	}
	nd := t.mutNode(r, path, l)
	n := nodeN(nd)
	pos := path[l].idx + 1
	if n < btMax {
		copy(nd[8+24*(pos+1):8+24*(n+1)], nd[8+24*pos:8+24*n])
		put64(nd, 1+3*pos, p)
		put64(nd, 2+3*pos, sep)
		put64(nd, 3+3*pos, ch)
		setN(nd, n+1)
		return
	}
	var items [btMax + 1][3]uint64
	for i, j := 0, 0; i <= n; i++ {
		if i == pos {
			items[i] = [3]uint64{p, sep, ch}
			continue
		}
		items[i] = [3]uint64{u64(nd, 1+3*j), u64(nd, 2+3*j), u64(nd, 3+3*j)}
		j++
	}
	const left = (btMax + 2) / 2
	rref, rn := t.Alloc(innerSize)
	r.bytes += innerSize
	for i := left; i <= btMax; i++ {
		for w := range 3 {
			put64(rn, 1+3*(i-left)+w, items[i][w])
		}
	}
	setN(rn, btMax+1-left)
	setCap(rn, btMax)
	for i := 0; i < left; i++ {
		for w := range 3 {
			put64(nd, 1+3*i+w, items[i][w])
		}
	}
	setN(nd, left)
	t.insertChild(r, path, l-1, items[left][0], items[left][1], rref)
}

// btDelete removes key from r and reports whether it was there.
func (t *table) btDelete(r *btree, key []byte) bool {
	if r.root == 0 {
		return false
	}
	kp := prefix(key)
	var buf [16]pathEl
	path := descend(t.Slabs, r, kp, key, buf[:0])
	h := int(r.height)
	nd := arena.At(t.Slabs, path[h].ref)
	idx, _, found := leafSearch(t.Slabs, nd, kp, key)
	if !found {
		return false
	}
	path[h].idx = idx
	_, _, size, _ := decodeItem(arena.At(t.Slabs, leafRef(nd, idx)))
	r.count--
	r.bytes -= int64(size)
	t.garbage += int64(size)
	n := nodeN(nd)
	if n == 1 {
		ls := leafSize(nodeCap(nd))
		t.garbage += int64(ls)
		r.bytes -= int64(ls)
		if h == 0 {
			*r = btree{}
			return true
		}
		t.removeChild(r, path, h-1)
		return true
	}
	nd = t.mutNode(r, path, h)
	copy(nd[8+16*idx:8+16*(n-1)], nd[8+16*(idx+1):8+16*n])
	setN(nd, n-1)
	return true
}

// removeChild removes child path[l].idx from the inner node at path[l].
func (t *table) removeChild(r *btree, path []pathEl, l int) {
	nd := arena.At(t.Slabs, path[l].ref)
	n := nodeN(nd)
	if n == 1 {
		t.garbage += innerSize
		r.bytes -= innerSize
		if l == 0 {
			*r = btree{}
			return
		}
		t.removeChild(r, path, l-1)
		return
	}
	nd = t.mutNode(r, path, l)
	idx := path[l].idx
	copy(nd[8+24*idx:8+24*(n-1)], nd[8+24*(idx+1):8+24*n])
	setN(nd, n-1)
	for r.height > 0 {
		root := arena.At(t.Slabs, r.root)
		if nodeN(root) != 1 {
			break
		}
		r.root = child(root, 0)
		r.height--
		t.garbage += innerSize
		r.bytes -= innerSize
	}
}

// btIter walks a tree in order for Iterate, Range and snapshot scans.
type btIter struct {
	slabs  [][]byte
	lo, hi []byte
	fn     func(uk, v []byte) bool
	err    error
}

// btRange calls fn with the entries of r whose user key is in [lo, hi) (nil
// bounds: unbounded), ascending or descending, until fn returns false.
func btRange(slabs [][]byte, r *btree, lo, hi []byte, reverse bool, fn func(uk, v []byte) bool) error {
	if r.root == 0 {
		return nil
	}
	it := btIter{slabs: slabs, lo: lo, hi: hi, fn: fn}
	if reverse {
		it.desc(r.root, int(r.height), hi)
	} else {
		it.asc(r.root, int(r.height), lo)
	}
	return it.err
}

func (it *btIter) asc(ref uint64, h int, lo []byte) bool {
	nd := arena.At(it.slabs, ref)
	n := nodeN(nd)
	if h == 0 {
		i := 0
		if lo != nil {
			i, _, _ = leafSearch(it.slabs, nd, prefix(lo), lo)
		}
		for ; i < n; i++ {
			uk, v, _, ok := decodeItem(arena.At(it.slabs, leafRef(nd, i)))
			if !ok {
				it.err = errCorrupt
				return false
			}
			if it.hi != nil && bytes.Compare(uk, it.hi) >= 0 {
				return false
			}
			if !it.fn(uk, v) {
				return false
			}
		}
		return true
	}
	i := 0
	if lo != nil {
		i = route(it.slabs, nd, prefix(lo), lo, false)
	}
	for ; i < n; i++ {
		if !it.asc(child(nd, i), h-1, lo) {
			return false
		}
		lo = nil
	}
	return true
}

func (it *btIter) desc(ref uint64, h int, hi []byte) bool {
	nd := arena.At(it.slabs, ref)
	n := nodeN(nd)
	if h == 0 {
		i := n - 1
		if hi != nil {
			j, _, _ := leafSearch(it.slabs, nd, prefix(hi), hi)
			i = j - 1
		}
		for ; i >= 0; i-- {
			uk, v, _, ok := decodeItem(arena.At(it.slabs, leafRef(nd, i)))
			if !ok {
				it.err = errCorrupt
				return false
			}
			if len(it.lo) > 0 && bytes.Compare(uk, it.lo) < 0 {
				return false
			}
			if !it.fn(uk, v) {
				return false
			}
		}
		return true
	}
	i := n - 1
	if hi != nil {
		i = route(it.slabs, nd, prefix(hi), hi, true)
	}
	for ; i >= 0; i-- {
		if !it.desc(child(nd, i), h-1, hi) {
			return false
		}
		hi = nil
	}
	return true
}

// btBuild builds a packed tree over items, (prefix, ref) pairs in key order
// whose entries are already in the arena; it returns the root with bytes
// counting the nodes only.
func (t *table) btBuild(items [][2]uint64) btree {
	if len(items) == 0 {
		return btree{}
	}
	var r btree
	r.count = uint64(len(items))
	type node struct{ p, sep, ref uint64 }
	level := make([]node, 0, (len(items)+btMax-1)/btMax)
	for _, chunk := range chunks(len(items)) {
		c := chunk[1] - chunk[0]
		ref, nd := t.Alloc(leafSize(c))
		r.bytes += int64(leafSize(c))
		for i := range c {
			put64(nd, 1+2*i, items[chunk[0]+i][0])
			put64(nd, 2+2*i, items[chunk[0]+i][1])
		}
		setN(nd, c)
		setCap(nd, c)
		level = append(level, node{items[chunk[0]][0], items[chunk[0]][1], ref})
	}
	for len(level) > 1 {
		next := make([]node, 0, (len(level)+btMax-1)/btMax)
		for _, chunk := range chunks(len(level)) {
			ref, nd := t.Alloc(innerSize)
			r.bytes += innerSize
			for i := range chunk[1] - chunk[0] {
				c := level[chunk[0]+i]
				put64(nd, 1+3*i, c.p)
				put64(nd, 2+3*i, c.sep)
				put64(nd, 3+3*i, c.ref)
			}
			setN(nd, chunk[1]-chunk[0])
			setCap(nd, btMax)
			next = append(next, node{level[chunk[0]].p, level[chunk[0]].sep, ref})
		}
		level = next
		r.height++
	}
	r.root = level[0].ref
	return r
}

// chunks splits n items into the fewest runs of at most btMax, of nearly
// equal sizes, as [start, end) pairs.
func chunks(n int) [][2]int {
	k := (n + btMax - 1) / btMax
	out := make([][2]int, k)
	start := 0
	for i := range k {
		size := n / k
		if i < n%k {
			size++
		}
		out[i] = [2]int{start, start + size}
		start += size
	}
	return out
}
