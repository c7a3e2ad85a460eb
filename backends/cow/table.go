package cow

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/stategen/stategen/backends/internal/arena"
	"github.com/stategen/stategen/backends/internal/entryidx"
	"github.com/stategen/stategen/runtime"
)

var (
	// ErrTooLarge reports a write to a (state, key group) table that has
	// reached the backend's limits: 2^24 records (about 12M keys and
	// namespaces), or 2^16 arena slabs of at most MaxSlabSize bytes (some
	// 60 GiB at the default). Spread the state over more key groups (a
	// larger maxParallelism).
	ErrTooLarge = errors.New("cow: table of one state and key group is too large")

	errTooLarge = ErrTooLarge
	errCorrupt  = fmt.Errorf("%w: cow: entry bytes are malformed", runtime.ErrCorrupt)
)

// table holds one state's entries in one key group: an arena and the roots
// of its hash tables. Snapshots copy the table's roots and slab list, never
// its entries.
type table struct {
	arena.Arena
	main  htab // (key, namespace) -> value, list header or B-tree root
	nsIdx htab // sub-keyed states: key -> B-tree of its namespaces
	// idx indexes the entries of the main table's trees that reads found
	// (see mapidx.go); noIdx turns it off: a state of another kind, or
	// Options.DisableEntryIndex.
	idx   entryidx.Index
	noIdx bool
	kind  runtime.Kind
	// marks is the end of the arena at the newest snapshot; cow, set by
	// every write from the store's count of live snapshots, says whether a
	// snapshot may still see what lies below it.
	marks      arena.Marks
	cow        bool
	garbage    int64 // bytes of regions no longer reachable from the roots
	minCompact int64
	// epoch is the store's snapshot count, stamped on new pages; pages
	// older than frozenEpoch, the count at the table's newest snapshot,
	// may be seen by it.
	epoch       uint64
	frozenEpoch uint64
	// prot holds the views of the live snapshots that captured the table,
	// oldest first; writes to main-table pages they see save the old
	// records in their undo logs (guard). Freed ones are dropped lazily.
	prot []*tableView
	// spare is the view of a freed snapshot, kept for the next snapshot
	// (see view).
	spare *tableView
	buf   []byte // scratch for entries being rewritten
}

// guard makes record pos of p, page i of the main table's new or old
// table (records of w bytes), safe to write in place: for every live
// snapshot that sees p, it saves the record's bytes in the snapshot's undo
// log unless they are saved already (pageSet.saveRecord). It returns false
// if a snapshot's reader is on the page: the caller must then copy the page
// instead (the undo records saved are harmless: the page is then never
// written again).
func (t *table) guard(p *pg, i, pos, w int) bool {
	ok := true
	keep := t.prot[:0]
	for _, tv := range t.prot {
		if tv.lease.Freed() {
			continue
		}
		keep = append(keep, tv)
		if p.epoch >= tv.seq {
			continue
		}
		if j := tv.pageIndex(p, i); j >= 0 && !tv.pageSet().saveRecord(j, pos&(pageSlots-1), p.b, w) {
			ok = false
		}
	}
	clear(t.prot[len(keep):])
	t.prot = keep
	return ok
}

// protect registers tv, the view of a snapshot being taken, made by view
// (which dropped the views of freed snapshots).
func (t *table) protect(tv *tableView) {
	t.prot = append(t.prot, tv)
}

// dropFreed drops the views of freed snapshots from t.prot, so that the
// table no longer keeps their roots reachable. Snapshot calls it for every
// table, and a write for its table once no snapshot is live.
func (t *table) dropFreed() {
	keep := t.prot[:0]
	for _, v := range t.prot {
		switch {
		case !v.lease.Freed():
			keep = append(keep, v)
		case t.spare == nil && v.done.Load():
			// Kept without what it saw, which the table may free, and
			// without a page set: freeViews dropped the snapshot's, but a
			// write that found the snapshot live just before its Release
			// may have made one since (guard), with undo records of the
			// old snapshot that the next one must not read. Only this
			// goroutine writes, and a freed snapshot has no reader, so
			// none is made after this.
			v.slabs, v.main, v.lease = nil, htab{}, nil
			v.pages.Store(nil)
			t.spare = v
		}
	}
	clear(t.prot[len(keep):])
	t.prot = keep
}

// view returns a view for a new snapshot of the table: the spare one, a
// freed snapshot's that freeViews is done with, if there is one. Nothing
// reads a recycled view through its old snapshot: a Scan of a released
// snapshot fails before it looks at its views, and a freed snapshot has
// no Scan running.
func (t *table) view() *tableView {
	t.dropFreed()
	tv := t.spare
	if tv == nil {
		return new(tableView)
	}
	t.spare = nil
	tv.done.Store(false)
	return tv
}

func newTable(kind runtime.Kind, o *Options, epoch uint64) *table {
	noIdx := o.DisableEntryIndex || (kind != runtime.KindMap && kind != runtime.KindSortedMap)
	return &table{Arena: arena.New(o.MaxSlabSize), kind: kind, minCompact: int64(o.CompactionMinGarbage), epoch: epoch, noIdx: noIdx}
}

// frozen reports whether a live snapshot may reach the region at ref, which
// must then not be written.
func (t *table) frozen(ref uint64) bool { return t.cow && t.marks.Frozen(ref) }

// copyRegion copies the n-byte region at ref into a fresh one; the old one
// becomes garbage.
func (t *table) copyRegion(ref uint64, n int) uint64 {
	nref, b := t.Alloc(n)
	copy(b, arena.At(t.Slabs, ref)[:n])
	t.garbage += int64(n)
	return nref
}

func (t *table) empty() bool { return t.main.count == 0 }

// setValue replaces the value of the entry at l in r: in place if no
// snapshot can see it and the length is unchanged, else in a copy.
func (t *table) setValue(r *htab, l loc, val []byte) {
	dir, _, w := r.table(l.old)
	rec := record(dir, w, l.pos)
	ref := entryRef(rec)
	key, ns, old, size, _ := decodeEntry(recEntry(t.Slabs, rec))
	if len(old) == len(val) {
		if ref == 0 {
			mrec := t.mutRecord(r, l.old, l.pos)
			_, _, ov, _, _ := decodeEntry(mrec[4:])
			copy(ov, val)
			return
		}
		if !t.frozen(ref) {
			copy(old, val)
			return
		}
	}
	n := entrySize(len(key), len(ns), len(val))
	if cap(t.buf) < n {
		t.buf = make([]byte, n)
	}
	e := t.buf[:n]
	writeEntry(e, key, ns, val)
	if ref != 0 {
		t.garbage += int64(size)
	}
	r.bytes += int64(n - size)
	t.put(t.mutRecord(r, l.old, l.pos), ctrl(rec), e, 0)
}

// insertEntry adds the entry of (key, ns), which r does not hold.
func (t *table) insertEntry(r *htab, h uint64, key, ns, val []byte) error {
	n := entrySize(len(key), len(ns), len(val))
	if err := t.reserve(r, n); err != nil {
		return err
	}
	if cap(t.buf) < n {
		t.buf = make([]byte, n)
	}
	e := t.buf[:n]
	writeEntry(e, key, ns, val)
	t.place(r, tagOf(h)|recInline, e, 0)
	r.count++
	r.bytes += int64(n)
	return nil
}

// removeEntry deletes the entry at l in r; extra is the size of what the
// entry owns (a list region, a tree). Removing a map empties the entry
// index, which may hold its entries.
func (t *table) removeEntry(r *htab, l loc, extra int64) {
	if r == &t.main {
		t.idx.Reset()
	}
	dir, _, w := r.table(l.old)
	rec := record(dir, w, l.pos)
	_, _, _, size, _ := decodeEntry(recEntry(t.Slabs, rec))
	if entryRef(rec) != 0 {
		t.garbage += int64(size)
	}
	t.garbage += extra
	r.bytes -= int64(size)
	t.removeAt(r, l)
}

// owned returns the bytes that the value of a main-table entry owns.
func (t *table) owned(val []byte) int64 {
	switch t.kind {
	case runtime.KindList:
		_, _, c := decodeList(val)
		return int64(c)
	case runtime.KindMap, runtime.KindSortedMap:
		r, _ := decodeBtree(val)
		return r.bytes
	}
	return 0
}

// List headers: region ref | bytes used | bytes of capacity. Elements are
// uvarint length | bytes, back to back. Appends write past the used bytes of
// the region, which no snapshot reads, so they never copy the region.
const listHdrSize = 24

func decodeList(b []byte) (region uint64, used, capb int) {
	if len(b) != listHdrSize {
		return 0, 0, 0
	}
	return binary.LittleEndian.Uint64(b), int(binary.LittleEndian.Uint64(b[8:])), int(binary.LittleEndian.Uint64(b[16:]))
}

func encodeList(b []byte, region uint64, used, capb int) {
	binary.LittleEndian.PutUint64(b, region)
	binary.LittleEndian.PutUint64(b[8:], uint64(used))
	binary.LittleEndian.PutUint64(b[16:], uint64(capb))
}

func listBytes(elems [][]byte) int {
	n := 0
	for _, e := range elems {
		n += uvlen(len(e)) + len(e)
	}
	return n
}

func writeElems(b []byte, elems [][]byte) {
	n := 0
	for _, e := range elems {
		n += putUvarint(b[n:], len(e))
		n += copy(b[n:], e)
	}
}

// listAppend appends elems to the list of (key, ns) and reports whether it
// created the list.
func (t *table) listAppend(h uint64, key, ns []byte, elems [][]byte) (bool, error) {
	need := listBytes(elems)
	rec, l := find(t.Slabs, &t.main, h, key, ns)
	var hdr [listHdrSize]byte
	if rec == nil {
		region, b := t.Alloc(need)
		writeElems(b, elems)
		encodeList(hdr[:], region, need, need)
		return true, t.insertEntry(&t.main, h, key, ns, hdr[:])
	}
	_, _, hv, _, _ := decodeEntry(recEntry(t.Slabs, rec))
	region, used, capb := decodeList(hv)
	if used+need <= capb {
		writeElems(arena.At(t.Slabs, region)[used:], elems)
	} else {
		ncap := max(2*capb, used+need)
		nregion, b := t.Alloc(ncap)
		copy(b, arena.At(t.Slabs, region)[:used])
		writeElems(b[used:], elems)
		t.garbage += int64(capb)
		region, capb = nregion, ncap
	}
	encodeList(hdr[:], region, used+need, capb)
	t.setValue(&t.main, l, hdr[:])
	return false, nil
}

// listReplace replaces the list of (key, ns) with elems (not empty).
func (t *table) listReplace(h uint64, key, ns []byte, elems [][]byte) (bool, error) {
	need := listBytes(elems)
	rec, l := find(t.Slabs, &t.main, h, key, ns)
	if rec == nil {
		return t.listAppend(h, key, ns, elems)
	}
	var hdr [listHdrSize]byte
	_, _, hv, _, _ := decodeEntry(recEntry(t.Slabs, rec))
	region, _, capb := decodeList(hv)
	if capb < need || t.frozen(region) {
		t.garbage += int64(capb)
		region, _ = t.Alloc(need)
		capb = need
	}
	writeElems(arena.At(t.Slabs, region)[:capb], elems)
	encodeList(hdr[:], region, need, capb)
	t.setValue(&t.main, l, hdr[:])
	return false, nil
}

// listScan calls fn with each element of the list whose header is hv.
func listScan(slabs [][]byte, hv []byte, fn func(elem []byte) bool) error {
	region, used, _ := decodeList(hv)
	if region == 0 {
		return errCorrupt
	}
	b := arena.At(slabs, region)
	if used > len(b) {
		return errCorrupt
	}
	b = b[:used]
	for len(b) > 0 {
		n, w := uvarint(b)
		if w == 0 || n > len(b)-w {
			return errCorrupt
		}
		if !fn(b[w : w+n : w+n]) {
			return nil
		}
		b = b[w+n:]
	}
	return nil
}

// treeGet returns the ref and the value of the entry of uk in the tree of
// the entry (key, ns) of r.
func treeGet(slabs [][]byte, r *htab, h uint64, key, ns, uk []byte) (uint64, []byte, bool) {
	rec, _ := find(slabs, r, h, key, ns)
	if rec == nil {
		return 0, nil, false
	}
	_, _, rv, _, _ := decodeEntry(recEntry(slabs, rec))
	root, ok := decodeBtree(rv)
	if !ok {
		return 0, nil, false
	}
	return btGet(slabs, &root, uk)
}

// mapGet returns the ref and the value of the entry of uk in the map of
// (key, ns), whose main-table hash is h: from the entry index if the gate
// lets the read use it and it holds the entry, else from the tree,
// indexing the entry it finds if the read uses the index.
func (t *table) mapGet(g *entryidx.Gate, h uint64, key, ns, uk []byte) (uint64, []byte, bool) {
	if t.noIdx || !g.Use() {
		return treeGet(t.Slabs, &t.main, h, key, ns, uk)
	}
	var p entryidx.Probe
	p.Start(&t.idx, ixHash(h, uk), key, ns)
	v, ok := t.idxFind(&p, uk)
	g.Count(ok)
	if ok {
		return p.Rec().Ref, v, true
	}
	ref, v, ok := treeGet(t.Slabs, &t.main, h, key, ns, uk)
	if ok {
		t.idx.Add(&p, ref, 0, t.idxBound())
	}
	return ref, v, ok
}

// treePut sets uk to val in the tree of the entry (key, ns) of r, creating
// the entry if needed, and reports whether it did. In the main table it
// keeps the entry index true: a rewritten entry's record gets its new ref,
// and with index the entry is added if the index does not hold it.
func (t *table) treePut(r *htab, h uint64, key, ns, uk, val []byte, index bool) (bool, error) {
	rec, l := find(t.Slabs, r, h, key, ns)
	var rb [btRootSize]byte
	if rec == nil {
		var root btree
		ref, _ := t.btPut(&root, uk, val)
		root.encode(rb[:])
		if err := t.insertEntry(r, h, key, ns, rb[:]); err != nil {
			return true, err
		}
		if index && r == &t.main {
			t.idxSet(h, key, ns, uk, ref, true)
		}
		return true, nil
	}
	_, _, rv, _, _ := decodeEntry(recEntry(t.Slabs, rec))
	root, _ := decodeBtree(rv)
	before := root
	if ref, old := t.btPut(&root, uk, val); r == &t.main && (ref != old && old != 0 || index) {
		// A replaced entry that moved needs its record's new ref.
		t.idxSet(h, key, ns, uk, ref, index)
	}
	if root != before {
		root.encode(rb[:])
		t.setValue(r, l, rb[:])
	}
	return false, nil
}

// treeDelete removes uk from the tree of the entry (key, ns) of r, removing
// the entry if the tree becomes empty, and reports whether it did.
func (t *table) treeDelete(r *htab, h uint64, key, ns, uk []byte) bool {
	rec, l := find(t.Slabs, r, h, key, ns)
	if rec == nil {
		return false
	}
	_, _, rv, _, _ := decodeEntry(recEntry(t.Slabs, rec))
	root, _ := decodeBtree(rv)
	before := root
	if !t.btDelete(&root, uk) {
		return false
	}
	if r == &t.main {
		t.idxRemove(h, key, ns, uk)
	}
	if root.count == 0 {
		t.removeEntry(r, l, root.bytes)
		return true
	}
	if root != before {
		var rb [btRootSize]byte
		root.encode(rb[:])
		t.setValue(r, l, rb[:])
	}
	return false
}

// maybeCompact compacts t once its garbage outweighs its live bytes, or four
// times them while a snapshot is live (arena.CompactDue explains why).
func (t *table) maybeCompact() {
	if arena.CompactDue(t.Used, t.garbage, t.minCompact, t.cow) {
		t.compact()
	}
}

// compact rebuilds the table in a fresh arena: live entries only, hash
// tables sized for their counts, lists at their exact length, trees packed.
// Live snapshots keep the old arena alive through their own slab lists; the
// new arena holds nothing they can see.
func (t *table) compact() {
	src := t.Slabs
	oldMain, oldNS := t.main, t.nsIdx
	t.Arena = arena.NewFor(t.MaxSlab(), t.Used-t.garbage)
	t.marks = arena.Marks{}
	clear(t.prot)
	t.prot = t.prot[:0]
	t.garbage = 0
	t.idx.Reset() // every entry moves
	var items [][2]uint64
	t.main = t.rebuild(src, &oldMain, t.kind, &items)
	t.nsIdx = t.rebuild(src, &oldNS, runtime.KindSortedMap, &items)
}

func (t *table) rebuild(src [][]byte, r *htab, kind runtime.Kind, items *[][2]uint64) htab {
	var n htab
	if r.count == 0 {
		return n
	}
	n.logcap = capFor(r.count)
	n.w = uint16(widthFor(r.bytes / int64(r.count)))
	n.dir, n.dirEpoch = t.allocTable(n.logcap, int(n.w)), t.epoch
	n.count, n.bytes = r.count, r.bytes
	var hv [max(listHdrSize, btRootSize)]byte
	var ebuf []byte // the entry being placed, which place copies
	scanTable(r, func(rec []byte) bool {
		key, ns, val, _, _ := decodeEntry(recEntry(src, rec))
		switch kind {
		case runtime.KindList:
			region, used, _ := decodeList(val)
			nregion, b := t.Alloc(max(used, 1))
			copy(b, arena.At(src, region)[:used])
			encodeList(hv[:], nregion, used, max(used, 1))
			val = hv[:listHdrSize]
		case runtime.KindMap, runtime.KindSortedMap:
			root, _ := decodeBtree(val)
			*items = (*items)[:0]
			var size int64
			_ = btRange(src, &root, nil, nil, false, func(uk, v []byte) bool {
				ref, sz := t.newItem(uk, v)
				size += int64(sz)
				*items = append(*items, [2]uint64{prefix(uk), ref})
				return true
			})
			nr := t.btBuild(*items)
			nr.bytes += size
			nr.encode(hv[:])
			val = hv[:btRootSize]
		}
		sz := entrySize(len(key), len(ns), len(val))
		if cap(ebuf) < sz {
			ebuf = make([]byte, sz)
		}
		e := ebuf[:sz]
		writeEntry(e, key, ns, val)
		t.place(&n, ctrl(rec), e, 0)
		return true
	})
	return n
}
