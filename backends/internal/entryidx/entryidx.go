// Package entryidx is the entry index that backends/cow and backends/btree
// keep beside their trees: an open-addressing hash table from an entry's
// identity to where the backend keeps the entry, so that a point read of
// an entry read before costs one probe instead of a tree descent.
//
// # Exact, not a cache of guesses
//
// A record names an entry by its hash and its identity bytes — up to
// KeyMax bytes, in two parts (cow: the key and the namespace; btree: the
// item key and nothing) — and holds the backend's payload for it: Ref,
// the entry's place in the backend's arena, and Aux. The backend keeps
// every record true at the one place each write happens: a write that
// gives an indexed entry another place sets its payload (through the
// Probe that finds its record), a delete removes its record (Remove), and
// whatever removes or moves many entries at once empties the index
// (Reset). Two entries may share a hash and
// identity bytes (cow's map entries differ in a user key the record does
// not hold): a Probe visits every live record of an identity, for the
// backend to tell them apart by what the payload points at.
//
// # Layout
//
// Records are 40 bytes with no pointer, in one slice of a power-of-two
// length, probed linearly from the position given by the hash's top bits;
// the table holds at most 3/4 of its records. A record carries the
// generation of the index at its add, and a record of another generation
// is empty: Reset is O(1), a new generation (the slice is cleared when the
// 16-bit generation wraps). A record keeps the top 32 bits of its hash,
// which give its home position in tables of up to 2^32 records. Within a
// generation records are only added and removed by backward shifting, so
// a probe stops at the first empty record. An index grows by doubling up to the bound its backend gives
// Add; one that would outgrow it starts over (Reset) with the entries
// added next.
//
// # The gate
//
// An index pays when reads come back to entries read before (a count per
// item of a window, updated over and over). When they do not — uniform
// reads over many more entries than come back within a while — every read
// would pay a probe (a cache miss of its own at scale) and an add for
// nothing: at 1M keys, cow's map Get took 28% longer with an index that
// took every read. A Gate, one per state, counts how many of the last
// Window reads that used the index it answered; below a quarter the index
// goes cold and only one read in ColdSample uses it (probes it and adds
// what it missed) until a window of those samples finds a quarter again.
// The window is long beside the misses of an index just emptied, which are
// not evidence of coldness.
package entryidx

import "encoding/binary"

// KeyMax is the most identity bytes a record holds: entries with longer
// identities are not indexed.
const KeyMax = 20

// RecordSize is the size of a record in bytes.
const RecordSize = 40

// MinBytes is the size an index may grow to whatever the bound its backend
// gives Add.
const MinBytes = 16 << 10

const minLogcap = 6

// Rec is a record of an index: an entry's identity (Key[:KL], of which
// the first Split bytes are the identity's first part) and the backend's
// payload for it.
type Rec struct {
	Ref   uint64 // payload: where the backend keeps the entry
	Aux   uint32 // payload: the backend's
	h     uint32 // the top 32 bits of the entry's hash
	gen   uint16 // live if the index's generation
	KL    uint8
	Split uint8
	Key   [KeyMax]byte
}

// Index is an entry index. The zero Index is empty and ready to use.
type Index struct {
	recs   []Rec // 1<<logcap records, nil until the first Add
	gen    uint16
	n      int // live records
	logcap uint8
}

// Indexable reports whether an identity of parts a and b fits a record.
func Indexable(a, b []byte) bool { return len(a)+len(b) <= KeyMax }

// Len returns the number of live records.
func (x *Index) Len() int { return x.n }

// Cap returns the number of records the index has room for, live or not.
func (x *Index) Cap() int { return len(x.recs) }

// is reports whether r has identity (h, a, b).
func (r *Rec) is(h uint32, a, b []byte) bool {
	la := len(a)
	if r.h != h || int(r.KL) != la+len(b) || int(r.Split) != la {
		return false
	}
	if la == 8 { // a 64-bit integer key: no call
		if binary.LittleEndian.Uint64(r.Key[:8]) != binary.LittleEndian.Uint64(a) {
			return false
		}
	} else if string(r.Key[:la]) != string(a) {
		return false
	}
	return len(b) == 0 || string(r.Key[la:la+len(b)]) == string(b)
}

// Probe is a search of an index for the live records of one identity, in
// probe order; see Start.
type Probe struct {
	x    *Index
	h    uint32 // the top 32 bits of the hash
	a, b []byte
	pos  int // the record Rec returns; at the end, the first empty one
	end  bool
}

// Start makes p a search of x for the records of identity (h, a, b). The
// index must not change while p is in use, but through it (Remove, Add).
// It sets p a field at a time: a Probe built as a composite literal and
// returned is copied with 16-byte moves that cannot be forwarded from the
// word-sized stores that built it, a stall on every read (18% of an
// Update's time).
func (p *Probe) Start(x *Index, h uint64, a, b []byte) {
	p.x, p.h, p.a, p.b, p.pos, p.end = x, uint32(h>>32), a, b, -1, false
}

// Next moves to the next live record of the identity and reports whether
// there is one.
func (p *Probe) Next() bool {
	x := p.x
	if x.n == 0 || p.end {
		p.end = true
		return false
	}
	pos := int(p.h >> (32 - x.logcap))
	if p.pos >= 0 {
		pos = (p.pos + 1) & (len(x.recs) - 1)
	}
	var ok bool
	p.pos, ok = x.scan(p.h, p.a, p.b, pos)
	p.end = !ok
	return ok
}

// scan returns the position of the first live record of identity (h, a,
// b) from pos on, and true; or the position of the first empty record
// and false.
func (x *Index) scan(h uint32, a, b []byte, pos int) (int, bool) {
	recs, gen, mask := x.recs, x.gen, len(x.recs)-1
	for ; ; pos = (pos + 1) & mask {
		r := &recs[pos]
		if r.gen != gen {
			return pos, false
		}
		if r.is(h, a, b) {
			return pos, true
		}
	}
}

// Hash returns the top 32 bits of the hash of r's entry.
func (r *Rec) Hash() uint32 { return r.h }

// Rec returns the record Next found.
func (p *Probe) Rec() *Rec { return &p.x.recs[p.pos] }

// Add adds a record of identity (h, a, b) with payload (ref, aux): the
// probe has visited every live record of the identity (Next returned
// false) and the backend found none of them to be the entry. If the
// identity is too long it does nothing. The index doubles, or starts over
// if doubling would take it past max(maxBytes, MinBytes).
func (x *Index) Add(p *Probe, ref uint64, aux uint32, maxBytes int64) {
	if !Indexable(p.a, p.b) {
		return
	}
	if x.recs == nil || 4*(x.n+1) > 3*len(x.recs) {
		x.grow(maxBytes)
		p.pos = -1 // find the empty record anew
	}
	pos := p.pos
	if pos < 0 {
		mask := len(x.recs) - 1
		for pos = int(p.h >> (32 - x.logcap)); x.recs[pos].gen == x.gen; pos = (pos + 1) & mask {
		}
	}
	r := &x.recs[pos]
	r.h, r.Ref, r.Aux, r.gen = p.h, ref, aux, x.gen
	r.KL, r.Split = uint8(len(p.a)+len(p.b)), uint8(len(p.a))
	copy(r.Key[copy(r.Key[:], p.a):], p.b)
	x.n++
	p.end = true
}

// grow doubles the index (or makes it), keeping its records, if the new
// size is within max(maxBytes, MinBytes); else it empties it.
func (x *Index) grow(maxBytes int64) {
	logcap := max(x.logcap+1, minLogcap)
	if x.recs != nil && (int64(RecordSize)<<logcap > max(maxBytes, MinBytes) || logcap > 32) {
		x.Reset()
		return
	}
	old, gen := x.recs, x.gen
	x.recs, x.logcap, x.gen, x.n = make([]Rec, 1<<logcap), logcap, 1, 0
	mask := len(x.recs) - 1
	for i := range old {
		if old[i].gen != gen {
			continue
		}
		pos := int(old[i].h >> (32 - logcap))
		for x.recs[pos].gen == x.gen {
			pos = (pos + 1) & mask
		}
		x.recs[pos] = old[i]
		x.recs[pos].gen = x.gen
		x.n++
	}
}

// Remove removes the record Next found, shifting back the records after
// it that probed past it. The Probe ends.
func (x *Index) Remove(p *Probe) {
	i := p.pos
	mask := len(x.recs) - 1
	for j := (i + 1) & mask; x.recs[j].gen == x.gen; j = (j + 1) & mask {
		home := int(x.recs[j].h >> (32 - x.logcap))
		if (j-home)&mask >= (j-i)&mask {
			x.recs[i] = x.recs[j]
			i = j
		}
	}
	x.recs[i].gen = 0
	x.n--
	p.end = true
}

// Reset empties the index in O(1): a new generation.
func (x *Index) Reset() {
	if x.n == 0 {
		return
	}
	x.n = 0
	if x.gen++; x.gen == 0 {
		clear(x.recs)
		x.gen = 1
	}
}

// Each calls fn with every live record, for tests and checks.
func (x *Index) Each(fn func(*Rec)) {
	if x.n == 0 {
		return
	}
	for i := range x.recs {
		if x.recs[i].gen == x.gen {
			fn(&x.recs[i])
		}
	}
}

// Gate decides, per state, whether reads use the state's indexes (see the
// package doc). The zero Gate is warm.
type Gate struct {
	cold        bool
	skip        uint8  // reads to leave before the next sample, while cold
	tries, hits uint16 // of the current window
}

// The gate's window and its sampling while cold.
const (
	Window     = 4096
	ColdSample = 16
)

// Use reports whether a read should use the index.
func (g *Gate) Use() bool {
	if !g.cold {
		return true
	}
	if g.skip > 0 {
		g.skip--
		return false
	}
	g.skip = ColdSample - 1
	return true
}

// Count counts a read that used the index, and whether it hit; at the end
// of a window it decides whether the index is warm or cold.
func (g *Gate) Count(hit bool) {
	g.tries++
	if hit {
		g.hits++
	}
	if g.tries == Window {
		g.cold = 4*g.hits < g.tries
		g.tries, g.hits = 0, 0
	}
}

// Cold reports whether the gate is cold: only sampled reads use the index.
func (g *Gate) Cold() bool { return g.cold }

// SetCold sets the gate cold or warm, for tests.
func (g *Gate) SetCold(cold bool) { g.cold = cold }
