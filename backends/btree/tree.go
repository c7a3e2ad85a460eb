package btree

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"unsafe"

	tb "github.com/tidwall/btree"

	"github.com/stategen/stategen/backends/internal/arena"
	"github.com/stategen/stategen/backends/internal/entryidx"
	"github.com/stategen/stategen/runtime/storekit"
)

// tree is one B-tree of a state — a key group's, or the whole state's —
// and the arena that holds its items' regions. The B-tree is tidwall/btree's
// BTreeG without locks: the operator's goroutine is its only writer, and
// snapshots read Copies.
//
// No byte a live snapshot can see is ever written. A snapshot holds a Copy
// of bt (whose nodes the live tree copies before changing them) and a copy
// of the slab list, and sees the regions allocated before marks, its mark:
//
//   - a value is written into a new region, the old one becoming garbage,
//     except one just read (see set) whose length is unchanged and whose
//     region is not frozen (allocated after the newest snapshot's mark, or
//     no snapshot live): that one is overwritten in place; with several
//     snapshots live, the newest one's mark protects them all;
//   - a list is replaced in its region only if the region is not frozen,
//     and moves to a new region when it outgrows it;
//   - a list's Add writes past the elements of the live item, into the
//     region's spare capacity, frozen or not: every item a snapshot holds
//     ends at or before the live one (a frozen region is never rewritten
//     shorter), so no snapshot reads there.
//
// Garbage is counted; once it outweighs the live bytes (arena.CompactDue),
// compact moves the live regions into a fresh arena. A snapshot keeps its
// Copy and its slab list, so it goes on reading the old ones.
type tree struct {
	bt *tb.BTreeG[item]
	arena.Arena
	// garbage is the bytes of regions that no item of bt refers to.
	garbage int64
	// marks is the end of the arena at the newest snapshot of the tree;
	// cow, set by every write from the store's count of live snapshots,
	// says whether a snapshot may still see what lies below it.
	marks arena.Marks
	cow   bool
	// key is the item key of the probe being searched for (see probe).
	key []byte
	// hot is the item the last lookup or Update found, valid (hotOK) until
	// the next write to the tree that may move or drop it: find returns it
	// and set overwrites its value in place without a search.
	hot   item
	hotOK bool
	// idx indexes the items that reads found (see "The entry index" in
	// the package doc); noIdx turns it off: a list state's tree, or
	// Options.DisableEntryIndex.
	idx        entryidx.Index
	noIdx      bool
	list       bool // a list state's tree: regions hold a capacity
	degree     int
	minCompact int64
}

// newTree returns an empty tree for a state of list kind or not.
func newTree(o *Options, list bool) *tree {
	t := &tree{
		Arena:      arena.New(o.MaxSlabSize),
		list:       list,
		noIdx:      list || o.DisableEntryIndex,
		degree:     o.Degree,
		minCompact: int64(o.CompactionMinGarbage),
	}
	t.bt = t.newBTree()
	return t
}

// newBTree returns an empty BTreeG ordered by item key, bytewise: by the
// items' inline prefixes, and, if both keys are longer and share them, by
// the rest of their bytes — from the probe key for a probe, else from the
// arena. Snapshots share this comparison with the live tree (a Copy keeps
// it) but search only with short probes, which never reach the probe key
// or the arena.
func (t *tree) newBTree() *tb.BTreeG[item] {
	// A closure rather than a method value, whose wrapper would make every
	// comparison two calls; the inline prefixes, which decide nearly all
	// comparisons, are compared in it.
	less := func(a, b item) bool {
		if l, ok := prefixLess(&a, &b); ok {
			return l
		}
		return t.lessLong(&a, &b)
	}
	return tb.NewBTreeGOptions(less, tb.Options{Degree: t.degree, NoLocks: true})
}

// lessLong orders items whose keys are longer than inlineLen and share
// their inline prefix.
func (t *tree) lessLong(a, b *item) bool {
	return bytes.Compare(t.longKey(a)[inlineLen:], t.longKey(b)[inlineLen:]) < 0
}

// longKey returns the item key of x, which is longer than inlineLen.
func (t *tree) longKey(x *item) []byte {
	if x.ref == probeRef {
		return t.key
	}
	return arena.At(t.Slabs, x.ref)[:x.kl]
}

// before reports whether item x orders before item key k, whose probe is
// p (shortProbe(k)). Unlike less, it does not read the probe key.
func (t *tree) before(x, p item, k []byte) bool {
	if l, ok := prefixLess(&x, &p); ok {
		return l
	}
	return bytes.Compare(arena.At(t.Slabs, x.ref)[inlineLen:x.kl], k[inlineLen:]) < 0
}

// probe returns an item that compares equal to item key k, for searches
// of the live tree until the next probe. It does not copy k.
func (t *tree) probe(k []byte) (p item) {
	t.setProbe(&p, k)
	return p
}

// setProbe is probe into *p (see item.setProbe).
func (t *tree) setProbe(p *item, k []byte) {
	t.key = k
	p.setProbe(k)
}

// frozen reports whether a live snapshot may see the region at ref.
func (t *tree) frozen(ref uint64) bool { return t.cow && t.marks.Frozen(ref) }

// newItem returns an item of item key ik and value v, written into a new
// region.
func (t *tree) newItem(ik, v []byte) (x item) {
	x.setProbe(ik)
	t.fill(&x, ik, v)
	return x
}

// fill makes *x, the probe of item key ik, the item of ik and value v,
// written into a new region.
func (t *tree) fill(x *item, ik, v []byte) {
	x.ref, x.vl = 0, uint32(len(v))
	ks := storedKey(x.kl)
	if n := ks + len(v); n > 0 {
		var b []byte
		x.ref, b = t.Alloc(n)
		copy(b, ik[:ks])
		copy(b[ks:], v)
	}
}

// size returns the bytes of the region of x.
func (t *tree) size(x item) int64 {
	if t.list {
		return int64(storedKey(x.kl) + capLen + listCap(t.Slabs, x))
	}
	return int64(storedKey(x.kl)) + int64(x.vl)
}

// get returns the item of item key ik.
func (t *tree) get(ik []byte) (item, bool) {
	var p item
	t.setProbe(&p, ik)
	return t.bt.Get(p)
}

// set sets the value of item key ik to v. If the item is the one the last
// lookup found (a read-modify-write: Get, then Put) and no write to the
// tree came between, and the new value has the old one's length and no
// snapshot can see its region, it overwrites the value in place: no
// descent, no allocation, no garbage. Otherwise it writes v into a new
// region and sets the item in one descent; the old region, if any,
// becomes garbage. (Looking the item up first to overwrite it in place
// costs a second descent when it cannot be, and the write's cache miss
// on the old value when it can: blind Puts of 1M keys took 40% more CPU
// that way.) With index, a new item goes into the entry index: an Update
// that creates an entry, which a stream job reads and writes again (a
// count per window), as cow's Update does; a Put's items, timers among
// them, often are not read again, and are indexed by the reads that find
// them.
func (t *tree) set(ik, v []byte, index bool) {
	var p item
	p.setProbe(ik)
	if t.hotOK && int(t.hot.vl) == len(v) && t.isHot(&p, ik) && !t.frozen(t.hot.ref) {
		copy(valueOf(t.Slabs, t.hot), v)
		return
	}
	t.hotOK = false
	t.key = ik
	t.fill(&p, ik, v)
	old, ok := t.bt.Set(p)
	switch {
	case ok:
		// The item moved to its new region: its record, if any, follows.
		var pr entryidx.Probe
		if t.idx.Len() > 0 && t.indexed(&pr, &p, ik) {
			r := pr.Rec()
			r.Ref, r.Aux = p.ref, p.vl
		}
		t.drop(old)
	case index && !t.noIdx && entryidx.Indexable(ik, nil):
		// A new item, which the index cannot hold yet: the probe walks to
		// where Add puts it.
		var pr entryidx.Probe
		if !t.indexed(&pr, &p, ik) {
			t.idx.Add(&pr, p.ref, p.vl, t.idxBound())
		}
	}
}

// lookup returns the value of item key ik, and remembers its item for
// set. g is the gate of the tree's state (see find).
func (t *tree) lookup(g *entryidx.Gate, ik []byte) ([]byte, bool) {
	x, ok := t.find(g, ik)
	if !ok {
		return nil, false
	}
	t.hot, t.hotOK = x, true
	return valueOf(t.Slabs, x), true
}

// find returns the item of item key ik. If it is the hot item, the one
// the last lookup or Update found or wrote in place, it is returned
// without a descent: a key read again before any write that may move or
// drop its item (the window of a burst of events, a Get after a Put of
// the same length) costs a comparison of the inline prefix. Every write
// that may move or drop an item clears hotOK, and an item's region holds
// its value until then, so the hot item is the tree's own. Otherwise, if
// the gate g of the tree's state lets the read use the entry index and
// the index holds the item, it comes from there, without a descent; else
// from the tree, and into the index — unless the index holds every item
// of the tree: its records are exact, one per item it indexes, so as many
// records as items means that an item it lacks is not in the tree, and an
// Update that makes an entry (a count's first bid) costs no descent to
// find nothing.
func (t *tree) find(g *entryidx.Gate, ik []byte) (item, bool) {
	var p item
	t.setProbe(&p, ik)
	if t.hotOK && t.isHot(&p, ik) {
		return t.hot, true
	}
	if t.noIdx || !entryidx.Indexable(ik, nil) || !g.Use() {
		return t.bt.Get(p)
	}
	var pr entryidx.Probe
	if t.indexed(&pr, &p, ik) {
		g.Count(true)
		r := pr.Rec()
		p.ref, p.vl = r.Ref, r.Aux
		return p, true
	}
	g.Count(false)
	if t.idx.Len() == t.bt.Len() {
		return item{}, false
	}
	x, ok := t.bt.Get(p)
	if ok {
		t.idx.Add(&pr, x.ref, x.vl, t.idxBound())
	}
	return x, ok
}

// idxBound is the most bytes the tree's index may grow to: four times the
// tree's live bytes, its items (in the B-tree's nodes) and their regions.
// The items count: a map entry of int64 key and user key and a small
// value keeps its whole key inline and a region of a byte or two, and a
// bound of the regions alone held its index to MinBytes, about 300 of
// such entries, emptied again at every growth past them (Nexmark's q5 on
// btree: 16 in 35 of its index misses were entries it had held).
func (t *tree) idxBound() int64 {
	return 4 * (t.Used - t.garbage + int64(unsafe.Sizeof(item{}))*int64(t.bt.Len()))
}

// indexed starts pr, a search of the entry index for item key ik, whose
// probe is p, and reports whether the index holds the item (then pr.Rec
// is its record; else pr is where an Add puts it).
func (t *tree) indexed(pr *entryidx.Probe, p *item, ik []byte) bool {
	pr.Start(&t.idx, itemHash(p), ik, nil)
	return pr.Next()
}

// itemHash is the entry index's hash of the item key of probe p, of at
// most entryidx.KeyMax bytes and so all in p's inline prefix: a
// multiply-mix of the prefix and the length.
func itemHash(p *item) uint64 {
	const m1, m2, m3 = 0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
	h := p.p0*m1 ^ bits.RotateLeft64(p.p1*m2, 21) ^ bits.RotateLeft64(p.p2*m3, 42) ^ uint64(p.kl)
	h ^= h >> 29
	h *= m1
	return h ^ h>>32
}

// isHot reports whether item key ik, whose probe is p, is the hot item's.
func (t *tree) isHot(p *item, ik []byte) bool {
	x := &t.hot
	return x.p0 == p.p0 && x.p1 == p.p1 && x.p2 == p.p2 && x.kl == p.kl &&
		(x.kl <= inlineLen || bytes.Equal(arena.At(t.Slabs, x.ref)[inlineLen:x.kl], ik[inlineLen:]))
}

// load adds x, which must not be in the tree, for a restore; items loaded
// in order are appended. It reports whether x was in the tree after all.
func (t *tree) load(x item) (dup bool) {
	t.hotOK = false
	_, dup = t.bt.Load(x)
	return dup
}

// delete removes the item of item key ik, and its record in the entry
// index.
func (t *tree) delete(ik []byte) {
	t.hotOK = false
	var p item
	t.setProbe(&p, ik)
	if old, ok := t.bt.Delete(p); ok {
		var pr entryidx.Probe
		if t.idx.Len() > 0 && t.indexed(&pr, &p, ik) {
			t.idx.Remove(&pr)
		}
		t.drop(old)
	}
}

// drop counts the region of x, which left the tree, as garbage, and
// compacts the tree if it is due.
func (t *tree) drop(x item) {
	t.garbage += t.size(x)
	t.maybeCompact()
}

// deleteRange deletes the items from first to last, both included.
var deleteRange = &tb.DeleteRangeOptions{NoReturn: true, MaxInclusive: true}

// deletePrefix removes every item whose item key starts with p, counting
// their regions as garbage, and their records in the entry index; it
// finds them with it, an iterator over the tree. The index keeps the
// records of the other items: a Clear of one key's map leaves the other
// keys' entries indexed, where emptying the index made each of their next
// reads a descent and an add.
func (t *tree) deletePrefix(p []byte, it *iterator) {
	t.hotOK = false
	var (
		kb          [inlineLen]byte
		first, last item
		garbage     int64
		n           int
	)
	for more := it.Seek(t.probe(p)); more; more = it.Next() {
		x := it.Item()
		k := keyOf(t.Slabs, x, kb[:])
		if !bytes.HasPrefix(k, p) {
			break
		}
		var pr entryidx.Probe
		if t.idx.Len() > 0 && entryidx.Indexable(k, nil) && t.indexed(&pr, &x, k) {
			t.idx.Remove(&pr)
		}
		if n == 0 {
			first = x
		}
		last = x
		garbage += t.size(x)
		n++
	}
	switch n {
	case 0:
		return
	case 1:
		t.bt.Delete(first)
	default:
		t.bt.DeleteRange(first, last, deleteRange)
	}
	t.garbage += garbage
	t.maybeCompact()
}

// maybeCompact compacts the tree if it is due.
func (t *tree) maybeCompact() {
	if arena.CompactDue(t.Used, t.garbage, t.minCompact, t.cow) {
		t.compact()
	}
}

// compact moves the tree's live regions into a fresh arena, lists at
// their exact length, and points the items at them: a walk of the nodes,
// with no search and no new node but copies of those a snapshot shares
// (WalkMut copies a node before it hands out its items, as any write
// does; an item's key does not change, so neither does the order).
// Snapshots keep their Copies of the old nodes and their copies of the
// old slab list; nothing they can see is in the new arena.
func (t *tree) compact() {
	t.hotOK = false
	src := t.Slabs
	t.Arena = arena.NewFor(t.MaxSlab(), t.Used-t.garbage)
	t.garbage, t.marks = 0, arena.Marks{}
	var kb [inlineLen]byte
	t.bt.WalkMut(func(items []item) bool {
		for i := range items {
			x := &items[i]
			t.move(src, x)
			// Every region moves: an indexed item's record follows it,
			// so that the entries read before are still found without
			// a descent (an emptied index made each of them a descent
			// and an add again).
			if t.idx.Len() == 0 {
				continue
			}
			var pr entryidx.Probe
			if k := keyOf(t.Slabs, *x, kb[:]); entryidx.Indexable(k, nil) && t.indexed(&pr, x, k) {
				pr.Rec().Ref = x.ref
			}
		}
		return true
	})
}

// move copies the region of *x, read from src, into a new region of the
// tree's arena, and points *x at it.
func (t *tree) move(src [][]byte, x *item) {
	ks := storedKey(x.kl)
	n := ks + int(x.vl)
	if t.list {
		n += capLen
	}
	if n == 0 {
		return
	}
	ref, b := t.Alloc(n)
	r := arena.At(src, x.ref)
	copy(b[:ks], r)
	if t.list {
		binary.LittleEndian.PutUint32(b[ks:], x.vl)
		copy(b[ks+capLen:], elemsOf(src, *x))
	} else {
		copy(b[ks:], r[ks:ks+int(x.vl)])
	}
	x.ref = ref
}

// newList returns the item of a list of item key ik and elements elems,
// need bytes encoded, in a new region with room for capb >= need bytes of
// elements.
func (t *tree) newList(ik []byte, elems [][]byte, need, capb int) (x item) {
	x.setProbe(ik)
	ks := storedKey(x.kl)
	var b []byte
	x.ref, b = t.Alloc(ks + capLen + capb)
	copy(b, ik[:ks])
	binary.LittleEndian.PutUint32(b[ks:], uint32(capb))
	writeElems(b[ks+capLen:], elems)
	x.vl = uint32(need)
	return x
}

// writeElems writes elems, encoded, at the start of b, which has room.
func writeElems(b []byte, elems [][]byte) {
	b = b[:0]
	for _, e := range elems {
		b = storekit.AppendElem(b, e)
	}
}

// appendElems appends elems, need bytes encoded, to the list of item key
// ik, creating it if needed, as append does: into the region's spare
// capacity if it has room, else into a new region with room to grow, so
// that a run of Adds costs amortized O(element). It returns false, and
// changes nothing, if the list would grow past MaxValueBytes.
func (t *tree) appendElems(ik []byte, elems [][]byte, need int) bool {
	t.hotOK = false
	var hint tb.PathHint
	var p item
	t.setProbe(&p, ik)
	old, ok := t.bt.GetHint(p, &hint)
	if !ok {
		t.bt.SetHint(t.newList(ik, elems, need, need), &hint)
		return true
	}
	used := int(old.vl)
	if need > MaxValueBytes-used {
		return false
	}
	c := listCap(t.Slabs, old)
	if c-used >= need {
		// Past the end of every item that refers to the region.
		o := storedKey(old.kl) + capLen + used
		writeElems(arena.At(t.Slabs, old.ref)[o:o+need], elems)
		old.vl += uint32(need)
		t.bt.SetHint(old, &hint)
		return true
	}
	x := t.newList(ik, nil, 0, min(max(2*c, used+need), MaxValueBytes))
	o := storedKey(x.kl) + capLen
	b := arena.At(t.Slabs, x.ref)[o : o+used+need]
	copy(b, elemsOf(t.Slabs, old))
	writeElems(b[used:], elems)
	x.vl = uint32(used + need)
	t.bt.SetHint(x, &hint)
	t.drop(old)
	return true
}

// replaceList replaces the list of item key ik, if any, with elems (not
// empty), need bytes encoded: in its region if no snapshot can see it and
// it has room, else in a new region of their exact size.
func (t *tree) replaceList(ik []byte, elems [][]byte, need int) {
	t.hotOK = false
	var hint tb.PathHint
	var p item
	t.setProbe(&p, ik)
	old, ok := t.bt.GetHint(p, &hint)
	if ok && !t.frozen(old.ref) && listCap(t.Slabs, old) >= need {
		o := storedKey(old.kl) + capLen
		writeElems(arena.At(t.Slabs, old.ref)[o:o+need], elems)
		old.vl = uint32(need)
		t.bt.SetHint(old, &hint)
		return
	}
	t.bt.SetHint(t.newList(ik, elems, need, need), &hint)
	if ok {
		t.drop(old)
	}
}
