package cow

import (
	"encoding/binary"
	"github.com/stategen/stategen/backends/internal/arena"
	"math/bits"
)

// htab is the root of an open-addressing hash table (linear probing) whose
// records live in Go-allocated pages of pageSlots fixed-width records. A
// record is a 4-byte control word and an area of w-4 bytes:
//
//	control 0: empty, 1: deleted (only in the old table of a rehash),
//	else the top 24 bits of the hash << 8 | recInline or recRef
//	area: the entry itself (recInline) or the arena ref of the entry (recRef)
//
// Entries that fit the area are stored inline, so that a lookup costs one
// dependent cache miss (the record), like a Go map; larger ones live in the
// arena. The width is chosen from the table's mean entry size whenever the
// table is allocated. The hash bits in the control word are compared before
// the entry is touched and give the record's home position, so rehashing and
// deletion never rehash keys (tables up to 2^24 records).
//
// Pages are []byte (no pointers): the garbage collector does not trace
// records. Every page carries the epoch (the store's snapshot count) at which
// it was made; a page made before the table's newest snapshot is copied
// before it is written while that snapshot may be live, and so is the page
// directory. A snapshot's view of a table is simply the htab value it copied.
//
// Growth doubles the table incrementally: the old table stays in odir until
// every record below mig has been copied into the new one, a few per write.
type htab struct {
	dir       []pg // pages of the table
	odir      []pg // pages of the old table during a rehash, else nil
	count     int  // entries in both tables
	mig       int  // old records below mig have been migrated
	bytes     int64
	dirEpoch  uint64
	odirEpoch uint64
	logcap    uint8 // log2 of the number of records; 0: no table
	ologcap   uint8
	w, ow     uint16 // record widths
}

// pg is a page of records.
type pg struct {
	b     []byte
	epoch uint64
}

const (
	recEmpty  = 0
	recTomb   = 1
	recInline = 2
	recRef    = 3

	pageShift   = 9
	pageSlots   = 1 << pageShift
	minLogCap   = 3
	maxLogCap   = 24
	migrateStep = 16 // old records migrated per write
	migrateAll  = 7  // old tables of at most 1<<migrateAll records are migrated at once
	minWidth    = 16
	maxWidth    = 128
)

// loc is where an entry's record is: its position in the new or old table.
type loc struct {
	pos int
	old bool
}

func (r *htab) table(old bool) ([]pg, uint8, int) {
	if old {
		return r.odir, r.ologcap, int(r.ow)
	}
	return r.dir, r.logcap, int(r.w)
}

// record returns the w bytes of record pos of a table.
func record(dir []pg, w int, pos int) []byte {
	off := (pos & (pageSlots - 1)) * w
	return dir[pos>>pageShift].b[off : off+w : off+w]
}

func ctrl(rec []byte) uint32 { return binary.LittleEndian.Uint32(rec) }

// recEntry returns the bytes of the entry of an occupied record: the area
// itself or the arena region it refers to.
func recEntry(slabs [][]byte, rec []byte) []byte {
	if rec[0]&3 == recInline {
		return rec[4:]
	}
	return arena.At(slabs, binary.LittleEndian.Uint64(rec[4:]))
}

// find returns the record of (key, ns) in r, or nil.
func find(slabs [][]byte, r *htab, h uint64, key, ns []byte) ([]byte, loc) {
	if r.logcap != 0 {
		if rec, pos := probe(slabs, r.dir, r.logcap, int(r.w), 0, h, key, ns); rec != nil {
			return rec, loc{pos: pos}
		}
	}
	if r.odir != nil {
		if rec, pos := probe(slabs, r.odir, r.ologcap, int(r.ow), r.mig, h, key, ns); rec != nil {
			return rec, loc{pos: pos, old: true}
		}
	}
	return nil, loc{}
}

// Results of lookupInline.
const (
	lookupAbsent = iota // no entry
	lookupFound         // an inline entry with one-byte lengths
	lookupSlow          // maybe an entry, in a form only find handles
)

// lookupInline is the fast path of find for the common case: no rehash in
// progress, short keys and namespaces, entries inline. It returns the
// entry's record, its position and the bounds of its value in it,
// lookupAbsent if r has no entry for (key, ns), or lookupSlow if the
// caller must use find.
func lookupInline(r *htab, h uint64, key, ns []byte) (rec []byte, pos, vs, ve, res int) {
	kl, nl := len(key), len(ns)
	if r.odir != nil || r.logcap == 0 || kl >= 0x80 || nl >= 0x80 {
		return nil, 0, 0, 0, lookupSlow
	}
	mask := 1<<r.logcap - 1
	pos = int(h >> (64 - r.logcap))
	want := uint32(h>>40)<<8 | recInline
	w := int(r.w)
	// An inline entry of (key, ns) starts with the one-byte lengths of key
	// and ns, then that of its value (below 0x80: it fits the record).
	hdr := uint16(kl) | uint16(nl)<<8
	vs = 7 + kl + nl
	for {
		b := r.dir[pos>>pageShift].b
		off := (pos & (pageSlots - 1)) * w
		rec = b[off : off+w : off+w]
		if c := binary.LittleEndian.Uint32(rec); c == want {
			if binary.LittleEndian.Uint16(rec[4:]) == hdr && rec[6] < 0x80 {
				ve = vs + int(rec[6])
				if ve <= w && bytesEqual(rec[7:7+kl], key) && (nl == 0 || string(rec[7+kl:vs]) == string(ns)) {
					return rec, pos, vs, ve, lookupFound
				}
			}
		} else if c == recEmpty {
			return nil, 0, 0, 0, lookupAbsent
		} else if c == want^recInline^recRef {
			return nil, 0, 0, 0, lookupSlow
		}
		pos = (pos + 1) & mask
	}
}

// fitsInline reports whether value can replace the value rec[vs:ve] of an
// inline entry that lookupInline found (so its lengths are one byte each)
// in place: it has the old value's length, or another one-byte length
// that the record still holds.
func fitsInline(rec []byte, vs, ve int, value []byte) bool {
	n := len(value)
	return n == ve-vs || n < 0x80 && vs+n <= len(rec)
}

// setInline overwrites the value rec[vs:ve] of an inline entry of r with
// value, which fitsInline accepted: a value of another length gets its
// length byte, the record's tail past it is cleared (as put leaves it)
// and r's byte count changes by the difference. The caller has made rec
// safe to write (mutRecord). value may overlap rec[vs:ve].
func (r *htab) setInline(rec []byte, vs, ve int, value []byte) {
	n := len(value)
	copy(rec[vs:vs+n], value)
	if n == ve-vs {
		return
	}
	rec[6] = byte(n)
	if vs+n < ve {
		clear(rec[vs+n : ve])
	}
	r.bytes += int64(n - (ve - vs))
}

// bytesEqual is string(a) == string(b), without a call for 8-byte keys
// (the encoding of every 64-bit integer key).
func bytesEqual(a, b []byte) bool {
	if len(a) == 8 && len(b) == 8 {
		return binary.LittleEndian.Uint64(a) == binary.LittleEndian.Uint64(b)
	}
	return string(a) == string(b)
}

// entryIs reports whether the entry bytes e are those of (key, ns), with a
// fast path for the usual one-byte lengths.
func entryIs(e, key, ns []byte) bool {
	if len(e) >= 3 && e[0]|e[1]|e[2] < 0x80 {
		kl, nl := int(e[0]), int(e[1])
		return kl == len(key) && nl == len(ns) && len(e) >= 3+kl+nl &&
			string(e[3:3+kl]) == string(key) && string(e[3+kl:3+kl+nl]) == string(ns)
	}
	k, n, _, _, ok := decodeEntry(e)
	return ok && string(k) == string(key) && string(n) == string(ns)
}

// probe looks for (key, ns) in one table; records below mig no longer count
// (they have been migrated).
func probe(slabs [][]byte, dir []pg, logcap uint8, w, mig int, h uint64, key, ns []byte) ([]byte, int) {
	mask := 1<<logcap - 1
	pos := int(h >> (64 - logcap))
	tag := uint32(h>>40) << 8
	for {
		rec := record(dir, w, pos)
		c := ctrl(rec)
		if c == recEmpty {
			return nil, 0
		}
		if c&^0xff == tag && c > recTomb && pos >= mig && entryIs(recEntry(slabs, rec), key, ns) {
			return rec, pos
		}
		pos = (pos + 1) & mask
	}
}

// scanTable calls fn with every occupied record of r until fn returns false.
func scanTable(r *htab, fn func(rec []byte) bool) bool {
	scan := func(dir []pg, logcap uint8, w, from int) bool {
		n := 1 << logcap
		for pos := from; pos < n; pos++ {
			rec := record(dir, w, pos)
			if ctrl(rec) > recTomb && !fn(rec) {
				return false
			}
		}
		return true
	}
	if r.logcap != 0 && !scan(r.dir, r.logcap, int(r.w), 0) {
		return false
	}
	if r.odir != nil && !scan(r.odir, r.ologcap, int(r.ow), r.mig) {
		return false
	}
	return true
}

// mutRecord returns record pos of r's new (or old) table for writing. If
// a live snapshot may see its page in the main table, the page is made
// safe to write first: guard saves the record's old bytes in the undo log
// of every snapshot that sees the page; where that is not possible (a
// reader is reading the page right now) the page, and the directory, are
// copied instead if a snapshot may see them. The namespace index, which
// no snapshot reads (a view holds the main table alone), is written in
// place.
func (t *table) mutRecord(r *htab, old bool, pos int) []byte {
	dirp, epoch, w := &r.dir, &r.dirEpoch, int(r.w)
	if old {
		dirp, epoch, w = &r.odir, &r.odirEpoch, int(r.ow)
	}
	i := pos >> pageShift
	p := &(*dirp)[i]
	if t.cow && p.epoch < t.frozenEpoch && r == &t.main && !t.guard(p, i, pos, w) {
		if *epoch < t.frozenEpoch {
			*dirp = append([]pg(nil), *dirp...)
			*epoch = t.epoch
			p = &(*dirp)[i]
		}
		p.b = append([]byte(nil), p.b...)
		p.epoch = t.epoch
	}
	off := (pos & (pageSlots - 1)) * w
	return p.b[off : off+w : off+w]
}

// allocTable returns the pages of a fresh table of 1<<logcap records of
// width w.
func (t *table) allocTable(logcap uint8, w int) []pg {
	n := 1 << logcap
	per := min(n, pageSlots)
	dir := make([]pg, n/per)
	for i := range dir {
		b := make([]byte, per*w)
		touch(b)
		dir[i] = pg{b: b, epoch: t.epoch}
	}
	return dir
}

// touch writes a zero into every 4 KiB of b, fresh zeroed memory. Memory
// the Go runtime has just taken from the operating system is not mapped
// yet: the first read of an OS page maps the shared zero page, and the
// first write then faults again to give it a page of its own. Records are
// read (probed) before they are written, so without this each OS page of
// a new table would fault twice.
func touch(b []byte) {
	for i := 0; i < len(b); i += 4096 {
		b[i] = 0
	}
	if len(b) > 0 {
		b[len(b)-1] = 0
	}
}

// widthFor returns the record width for entries of mean size mean: room
// for the control word and the entry, at least a ref.
func widthFor(mean int64) int {
	w := (mean + 4 + 7) &^ 7
	return int(min(max(w, minWidth), maxWidth))
}

// home returns the home position of an occupied record in a table of
// 1<<logcap records.
func home(rec []byte, logcap uint8) int { return int(ctrl(rec) >> (32 - logcap)) }

// put writes the entry bytes e (with control word c) into the record rec of
// width len(rec): inline if it fits, else as a ref to a copy in the arena
// (or to ref, if e already lives there).
func (t *table) put(rec []byte, c uint32, e []byte, ref uint64) {
	if len(e) <= len(rec)-4 {
		if ref != 0 {
			t.garbage += int64(len(e))
		}
		binary.LittleEndian.PutUint32(rec, c&^0xff|recInline)
		copy(rec[4:], e)
		clear(rec[4+len(e):])
		return
	}
	if ref == 0 {
		var b []byte
		ref, b = t.Alloc(len(e))
		copy(b, e)
	}
	binary.LittleEndian.PutUint32(rec, c&^0xff|recRef)
	binary.LittleEndian.PutUint64(rec[4:], ref)
	clear(rec[12:])
}

// place puts an entry into the first free record of its probe sequence in
// r's new table, which has room. ref is the entry's arena region, if any.
func (t *table) place(r *htab, c uint32, e []byte, ref uint64) {
	mask := 1<<r.logcap - 1
	pos := int(c >> (32 - r.logcap))
	for ctrl(record(r.dir, int(r.w), pos)) != recEmpty {
		pos = (pos + 1) & mask
	}
	t.put(t.mutRecord(r, false, pos), c, e, ref)
}

// entryRef returns the arena ref of a record's entry, or 0 if it is inline.
func entryRef(rec []byte) uint64 {
	if rec[0]&3 == recRef {
		return binary.LittleEndian.Uint64(rec[4:])
	}
	return 0
}

// removeAt deletes the record at l: a tombstone in the old table, a
// backward shift in the new one (which has no tombstones).
func (t *table) removeAt(r *htab, l loc) {
	r.count--
	if l.old {
		rec := t.mutRecord(r, true, l.pos)
		binary.LittleEndian.PutUint32(rec, recTomb)
		return
	}
	mask := 1<<r.logcap - 1
	w := int(r.w)
	i := l.pos
	for j := (i + 1) & mask; ; j = (j + 1) & mask {
		rec := record(r.dir, w, j)
		if ctrl(rec) == recEmpty {
			break
		}
		if (j-home(rec, r.logcap))&mask >= (j-i)&mask {
			copy(t.mutRecord(r, false, i), rec)
			i = j
		}
	}
	clear(t.mutRecord(r, false, i))
}

// reserve makes room in r for one more entry of size hint, growing it if
// needed. It fails only if r has reached its maximum size.
func (t *table) reserve(r *htab, hint int) error {
	if r.logcap != 0 && (r.count+1)*4 <= 3<<r.logcap {
		return nil
	}
	if r.odir != nil {
		t.migrate(r, 1<<r.ologcap)
	}
	w := widthFor((r.bytes + int64(hint)) / int64(r.count+1))
	if r.logcap == 0 {
		r.logcap, r.w = minLogCap, uint16(w)
		r.dir, r.dirEpoch = t.allocTable(minLogCap, w), t.epoch
		return nil
	}
	if r.logcap >= maxLogCap {
		return errTooLarge
	}
	r.odir, r.ologcap, r.ow, r.odirEpoch, r.mig = r.dir, r.logcap, r.w, r.dirEpoch, 0
	r.logcap++
	r.w = uint16(w)
	r.dir, r.dirEpoch = t.allocTable(r.logcap, w), t.epoch
	if r.ologcap <= migrateAll {
		t.migrate(r, 1<<r.ologcap)
	}
	return nil
}

// migrate moves up to n records of r's old table into the new one.
func (t *table) migrate(r *htab, n int) {
	ocap := 1 << r.ologcap
	end := min(ocap, r.mig+n)
	ow := int(r.ow)
	for pos := r.mig; pos < end; pos++ {
		rec := record(r.odir, ow, pos)
		if c := ctrl(rec); c > recTomb {
			t.place(r, c, recEntry(t.Slabs, rec), entryRef(rec))
		}
	}
	r.mig = end
	if end == ocap {
		r.odir, r.ologcap, r.ow, r.mig = nil, 0, 0, 0
	}
}

// step does a little of a pending rehash; writes call it before they look
// up their entry.
func (t *table) step(r *htab) {
	if r.odir != nil {
		t.migrate(r, migrateStep)
	}
}

// tagOf returns the control word (without kind bits) of hash h.
func tagOf(h uint64) uint32 { return uint32(h>>40) << 8 }

// capFor returns the log2 size of a table for count entries.
func capFor(count int) uint8 { return uint8(max(minLogCap, bits.Len(uint(count*3/2)))) }
