package cow

import (
	"github.com/stategen/stategen/backends/internal/arena"
	"github.com/stategen/stategen/runtime"
)

// entryIndex is a table's hash index of the entries of its Map and
// SortedMap trees: (key, namespace, user key) -> the ref of the entry in
// the arena. A Get, Contains or Update of a map entry it holds costs one
// probe of a small table and the entry, where the tree costs the probe of
// the (key, namespace) record, a root-to-leaf descent and the scan of a
// leaf. It holds the entries that reads found through the trees (not every
// entry: writes do not add to it, so states only written, like timers,
// keep it empty), and is kept exact rather than complete:
//
//   - a record's ref is the live entry of its (key, namespace, user key):
//     the arena never hands out bytes twice, and every write that gives an
//     indexed entry another ref (treePut) sets the record's, every removal
//     of an entry removes its record (treeDelete), and whatever removes or
//     moves many entries at once — removing a (key, namespace), compacting
//     the table — empties the index (reset);
//   - emptying is O(1): records carry the index's generation, and a record
//     of another generation is empty. Within a generation records are only
//     added or removed by backward shifting, so a probe may stop at the
//     first empty record.
//
// Snapshots do not read the index (a snapshot's view holds the main table
// and its arena, whose entries the index only points at), so it is written
// in place under live snapshots. A record holds the key and namespace
// bytes (together at most idxKeyMax) to check a hit exactly; entries of
// longer ones are not indexed. The index grows to at most twice the
// table's live arena bytes, or idxMinBytes (Options.DisableMapIndex turns
// it off).
type entryIndex struct {
	recs   []idxRec // 1<<logcap records, nil until the first add
	gen    uint32   // the generation of the live records; never 0
	n      int      // live records
	logcap uint8
}

// idxRec is a record of an entryIndex: 40 bytes, no pointers.
type idxRec struct {
	h   uint64 // the hash of (key, namespace, user key): ixHash
	ref uint64 // the entry's ref
	gen uint32 // live if the index's generation
	kl  uint8  // len(key)
	nl  uint8  // len(namespace)
	kn  [idxKeyMax]byte
}

const (
	idxKeyMax     = 18 // the most bytes of key and namespace a record holds
	idxMinLogcap  = 6
	idxRecordSize = 40
	idxMinBytes   = 16 << 10 // the index may grow to this whatever the table's size
)

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

// indexable reports whether entries of (key, ns) fit the index's records.
func indexable(key, ns []byte) bool { return len(key)+len(ns) <= idxKeyMax }

// of reports whether record r is of (key, ns).
func (r *idxRec) of(key, ns []byte) bool {
	kl := len(key)
	return int(r.kl) == kl && int(r.nl) == len(ns) && bytesEqual(r.kn[:kl], key) &&
		(len(ns) == 0 || string(r.kn[kl:kl+len(ns)]) == string(ns))
}

// find returns the position of the record of (key, ns, uk) of hash h, with
// the value of its entry, and true; or the position of the first empty
// record of its probe sequence and false (-1 if the index has no records).
func (x *entryIndex) find(slabs [][]byte, h uint64, key, ns, uk []byte) (int, []byte, bool) {
	if x.recs == nil {
		return -1, nil, false
	}
	mask := len(x.recs) - 1
	for pos := int(h >> (64 - x.logcap)); ; pos = (pos + 1) & mask {
		r := &x.recs[pos]
		if r.gen != x.gen {
			return pos, nil, false
		}
		if r.h == h && r.of(key, ns) {
			if k, v, _, _ := decodeItem(arena.At(slabs, r.ref)); bytesEqual(k, uk) {
				return pos, v, true
			}
		}
	}
}

// get returns the ref and the value of the entry of (key, ns, uk), if
// indexed.
func (x *entryIndex) get(slabs [][]byte, h uint64, key, ns, uk []byte) (uint64, []byte, bool) {
	if x.n == 0 {
		return 0, nil, false
	}
	pos, v, ok := x.find(slabs, h, key, ns, uk)
	if !ok {
		return 0, nil, false
	}
	return x.recs[pos].ref, v, true
}

// add indexes ref as the entry of (key, ns, uk), which the index does not
// hold (a get just missed it), if (key, ns) is indexable and the index may
// grow to hold it: to at most twice live (the table's live arena bytes), or
// idxMinBytes.
func (x *entryIndex) add(slabs [][]byte, h uint64, key, ns, uk []byte, ref uint64, live int64) {
	if !indexable(key, ns) {
		return
	}
	if x.recs == nil || 4*(x.n+1) > 3*len(x.recs) {
		x.grow(live)
	}
	pos, _, ok := x.find(slabs, h, key, ns, uk)
	if ok {
		x.recs[pos].ref = ref
		return
	}
	r := &x.recs[pos]
	r.h, r.ref, r.gen = h, ref, x.gen
	r.kl, r.nl = uint8(len(key)), uint8(len(ns))
	copy(r.kn[copy(r.kn[:], key):], ns)
	x.n++
}

// grow doubles the index (or makes it), keeping its records, if the new
// size is within add's bound; else it empties it, so that it holds the
// entries read since.
func (x *entryIndex) grow(live int64) {
	logcap := max(x.logcap+1, idxMinLogcap)
	if x.recs != nil && int64(idxRecordSize)<<logcap > max(2*live, idxMinBytes) {
		x.reset()
		return
	}
	old, gen := x.recs, x.gen
	x.recs, x.logcap, x.gen, x.n = make([]idxRec, 1<<logcap), logcap, 1, 0
	mask := len(x.recs) - 1
	for i := range old {
		if old[i].gen != gen {
			continue
		}
		pos := int(old[i].h >> (64 - logcap))
		for x.recs[pos].gen == x.gen {
			pos = (pos + 1) & mask
		}
		x.recs[pos] = old[i]
		x.recs[pos].gen = x.gen
		x.n++
	}
}

// setRef makes ref the entry of (key, ns, uk) if the index holds it.
func (x *entryIndex) setRef(slabs [][]byte, h uint64, key, ns, uk []byte, ref uint64) {
	if x.n == 0 {
		return
	}
	if pos, _, ok := x.find(slabs, h, key, ns, uk); ok {
		x.recs[pos].ref = ref
	}
}

// remove drops the record of (key, ns, uk), if any, shifting back the
// records after it that probed past it.
func (x *entryIndex) remove(slabs [][]byte, h uint64, key, ns, uk []byte) {
	if x.n == 0 {
		return
	}
	i, _, ok := x.find(slabs, h, key, ns, uk)
	if !ok {
		return
	}
	mask := len(x.recs) - 1
	for j := (i + 1) & mask; x.recs[j].gen == x.gen; j = (j + 1) & mask {
		home := int(x.recs[j].h >> (64 - x.logcap))
		if (j-home)&mask >= (j-i)&mask {
			x.recs[i] = x.recs[j]
			i = j
		}
	}
	x.recs[i].gen = 0
	x.n--
}

// idxGate decides, per state, whether map reads use the entry index. An
// index pays when reads come back to the entries they read before (a
// count per item of a window, updated over and over); when they do not —
// uniform reads over many more entries than are read twice in a while —
// every read would pay a probe of the index, a cache miss of its own at
// scale, and an add, for nothing. So the gate counts, over windows of
// idxWindow reads that used the index, how many it answered: with fewer
// than a quarter, the state's index goes cold and only one read in
// idxColdSample uses it (probes it and adds what it misses) until a window
// of those samples finds a quarter again. The window spans the state's
// key groups and is long beside the misses of an index just emptied or
// grown, which are not evidence of coldness.
type idxGate struct {
	cold        bool
	skip        uint8  // reads to leave before the next sample, while cold
	tries, hits uint16 // of the current window
}

const (
	idxWindow     = 4096
	idxColdSample = 16
)

// use reports whether a read should use the index.
func (g *idxGate) use() bool {
	if !g.cold {
		return true
	}
	if g.skip > 0 {
		g.skip--
		return false
	}
	g.skip = idxColdSample - 1
	return true
}

// count counts a read that used the index, and whether it hit; at the end
// of a window it decides whether the index is warm or cold.
func (g *idxGate) count(hit bool) {
	g.tries++
	if hit {
		g.hits++
	}
	if g.tries == idxWindow {
		g.cold = 4*g.hits < g.tries
		g.tries, g.hits = 0, 0
	}
}

// reset empties the index in O(1): a new generation.
func (x *entryIndex) reset() {
	if x.n == 0 {
		return
	}
	x.n = 0
	if x.gen++; x.gen == 0 {
		clear(x.recs)
		x.gen = 1
	}
}
