package cow

import (
	"github.com/stategen/stategen/backends/internal/arena"
	"github.com/stategen/stategen/backends/internal/entryidx"
	"github.com/stategen/stategen/runtime"
)

// A table of a Map or SortedMap state keeps an entry index (package
// backends/internal/entryidx) of the map entries that reads found: a
// record's identity is the (key, namespace) of the entry's map, its hash
// ixHash of the map's main-table hash and the user key, and its Ref the
// entry's ref in the arena; the user key, which the record does not hold,
// is checked in the entry. The writes that keep it exact are treePut (a
// rewritten entry's ref), treeDelete (a deleted entry's record),
// removeEntry (a whole map) and compact (every entry); see "The entry
// index" in the package doc.

// ixHash returns the index hash of user key uk in the tree of the entry
// whose main-table hash is h: h mixed with a multiply-hash of uk's first
// eight bytes and length (and XXH64 of the rest of a longer uk).
func ixHash(h uint64, uk []byte) uint64 {
	const m = 0x9E3779B97F4A7C15
	u := (prefix(uk) ^ uint64(len(uk))) * m
	if len(uk) > 8 {
		u ^= runtime.HashKey(uk[8:])
	}
	h ^= u
	h ^= h >> 32
	return h * m
}

// idxFind moves p, a probe of t's index for the records of a map, to the
// record of user key uk and returns the entry's value, if the index holds
// it. If not, p is where an Add puts uk's record.
func (t *table) idxFind(p *entryidx.Probe, uk []byte) ([]byte, bool) {
	for p.Next() {
		if k, v, _, _ := decodeItem(arena.At(t.Slabs, p.Rec().Ref)); bytesEqual(k, uk) {
			return v, true
		}
	}
	return nil, false
}

// idxSet makes ref the entry of (key, ns, uk), whose map has main-table
// hash h, in t's index: it sets the record's ref, or, with add, adds a
// record if there is none.
func (t *table) idxSet(h uint64, key, ns, uk []byte, ref uint64, add bool) {
	if t.idx.Len() == 0 && !add {
		return
	}
	var p entryidx.Probe
	p.Start(&t.idx, ixHash(h, uk), key, ns)
	if _, ok := t.idxFind(&p, uk); ok {
		p.Rec().Ref = ref
	} else if add {
		t.idx.Add(&p, ref, 0, t.idxBound())
	}
}

// idxRemove removes the record of (key, ns, uk) from t's index, if any.
func (t *table) idxRemove(h uint64, key, ns, uk []byte) {
	if t.idx.Len() == 0 {
		return
	}
	var p entryidx.Probe
	p.Start(&t.idx, ixHash(h, uk), key, ns)
	if _, ok := t.idxFind(&p, uk); ok {
		t.idx.Remove(&p)
	}
}

// idxBound is the most bytes t's index may grow to: four times the live
// bytes of its arena, room for every entry (an entry and its leaf item
// take at least 20 bytes, its record 48 at a load of at most 3/4).
func (t *table) idxBound() int64 { return 4 * (t.Used - t.garbage) }
