package cow

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync/atomic"

	srt "github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storekit"
)

// snapshot is the immutable view returned by Store.Snapshot: per state and
// key group, the table's roots and slab list as they were. The writer never
// changes a byte the snapshot can reach without first saving it in the
// snapshot's undo log (see tableView), so the view stays what it was.
type snapshot struct {
	lease  *storekit.Lease
	maxP   int
	groups srt.KeyGroupRange
	specs  []srt.StateSpec
	states map[string]*stateView
	// spare is a scanner kept from one Scan for the next, so that scanning
	// a snapshot key group by key group allocates once (a Scan nested in
	// another's callback makes its own).
	spare atomic.Pointer[scanner]
}

type stateView struct {
	spec srt.StateSpec
	tabs []*tableView  // by key group - start; nil for empty tables, or all of them
	tab  srt.TableView // the frozen table of a hosted state
}

// tableView is a snapshot's view of one table: its roots as they were at
// the snapshot. The table keeps a pointer to it (table.prot) while the
// snapshot is live, and writes to the main table's record pages go through
// it: the first write to a record in a page the view can see saves the
// record's old bytes in the view's undo log (pageSet), and the view's
// reader takes saved records from the log, so that it reads every page as
// it was at the snapshot.
//
// A view is recycled: once its snapshot is freed and freeViews has dropped
// its page set (done), the table takes it for its next snapshot (see
// table.view), so that a snapshot's synchronous phase allocates per state,
// not per state and key group.
type tableView struct {
	slabs [][]byte
	main  htab
	seq   uint64 // the snapshot's sequence number: pages made before it are its
	lease *storekit.Lease
	pages atomic.Pointer[pageSet] // made by the first write or read that needs it
	// done is set by freeViews once it no longer touches the view: the
	// table may then recycle it.
	done atomic.Bool
}

// pageSet is a view's per-page state for the pages of its main table (the
// pages of main.dir, then those of main.odir), and the undo records of
// those pages, appended to chunks allocated as needed, 256 bytes growing to
// undoChunk bytes. An undo record is
//
//	next (uint32: ref+1 of the page's previous undo record, 0 for none) |
//	slot (uint16) | the record's w bytes
//
// The writer and the view's reader meet on two words per page, without a
// lock (the argument of Dekker's algorithm, on sequentially consistent
// atomics): the first write to a record saves it, publishes the page's new
// undo-list head with an atomic store, and only then loads the page's
// reading count; a reader increments the reading count and only then loads
// the head. So either the reader sees the undo record — it takes the
// record from the log and never reads it from the page, so the writer may
// change it in place, now and later — or the writer sees the reader, and
// copies the page rather than write it (a page that a reader is on is
// never written). Records never share an 8-byte word, so the writer
// writing one record of a page while the reader reads the others is not a
// data race. A reader never waits for the writer, and the writer never
// waits for a reader.
type pageSet struct {
	pages []pageState
	// chunks is made by the first save; the reader reads it only after it
	// has seen a page's undo head, which the writer publishes after that.
	chunks    []atomic.Pointer[[]byte]
	maxChunks int
	chunk     []byte // the chunk being filled (writer only)
	off       int    // its fill offset (writer only)
	cur       int    // its index (writer only)
}

// pageState is the state of one page of a view, kept together so that a
// write touches one or two cache lines of it.
type pageState struct {
	reading atomic.Int32  // readers on the page now
	head    atomic.Uint32 // ref+1 of the page's newest undo record, 0 for none
	// saved is the writer's own record of the slots saved (the reader
	// walks the undo list instead).
	saved [pageSlots / 64]uint64
}

const (
	undoChunk     = 64 << 10 // at most 1<<undoOffBits
	undoOffBits   = 16
	undoRecHeader = 6
)

// pageSet returns the view's page set, making it if needed. Both the writer
// and the reader may make it; the first to publish it wins.
func (tv *tableView) pageSet() *pageSet {
	if ps := tv.pages.Load(); ps != nil {
		return ps
	}
	// (A view freed meanwhile gets a page set nobody reads, which the
	// table drops before it recycles the view: see dropFreed.)
	n := len(tv.main.dir) + len(tv.main.odir)
	// Each record is saved at most once: that bounds the chunks needed.
	undo := len(tv.main.dir)*min(1<<tv.main.logcap, pageSlots)*(undoRecHeader+int(tv.main.w)) +
		len(tv.main.odir)*min(1<<tv.main.ologcap, pageSlots)*(undoRecHeader+int(tv.main.ow))
	ps := &pageSet{
		pages:     make([]pageState, n),
		maxChunks: 10 + undo/(undoChunk-undoRecHeader-maxWidth),
		cur:       -1,
	}
	// Another may publish its page set first, and a Release (free) may
	// drop whichever is published at any moment: retry until one is
	// returned, never nil.
	for {
		if pageSetRaced != nil {
			pageSetRaced(tv, false)
		}
		if tv.pages.CompareAndSwap(nil, ps) {
			return ps
		}
		if pageSetRaced != nil {
			pageSetRaced(tv, true)
		}
		if cur := tv.pages.Load(); cur != nil {
			return cur
		}
	}
}

// pageSetRaced, set by tests only, runs in pageSet before it publishes its
// page set, where another may publish first, and after a failed
// publication (failed), where a Release may drop the page set the other
// published.
var pageSetRaced func(tv *tableView, failed bool)

// pageIndex returns the index in the view's page set of p, page i of the
// table's new or old table now, or -1 if the view cannot see p. A page
// keeps its index when a rehash turns the new table into the old one, so p
// is page i of the view's dir or odir, if of either.
func (tv *tableView) pageIndex(p *pg, i int) int {
	d := &p.b[0]
	if i < len(tv.main.dir) && &tv.main.dir[i].b[0] == d {
		return i
	}
	if i < len(tv.main.odir) && &tv.main.odir[i].b[0] == d {
		return len(tv.main.dir) + i
	}
	return -1
}

// saveRecord makes record slot of page j (whose bytes are page, w bytes per
// record) safe to write in place for this view: it saves the record in the
// undo log the first time, and reports false if the view's reader is on
// the page, which must then be copied instead.
func (ps *pageSet) saveRecord(j, slot int, page []byte, w int) bool {
	st := &ps.pages[j]
	word, bit := slot>>6, uint64(1)<<(slot&63)
	if st.saved[word]&bit != 0 {
		return true
	}
	st.saved[word] |= bit
	n := undoRecHeader + w
	if ps.off+n > len(ps.chunk) {
		if ps.chunks == nil {
			ps.chunks = make([]atomic.Pointer[[]byte], ps.maxChunks)
		}
		c := make([]byte, min(256<<(ps.cur+1), undoChunk))
		ps.cur++
		ps.chunks[ps.cur].Store(&c)
		ps.chunk, ps.off = c, 0
	}
	e := ps.chunk[ps.off : ps.off+n]
	binary.LittleEndian.PutUint32(e, st.head.Load())
	binary.LittleEndian.PutUint16(e[4:], uint16(slot))
	copy(e[undoRecHeader:], page[slot*w:(slot+1)*w])
	st.head.Store(uint32(ps.cur<<undoOffBits|ps.off) + 1)
	ps.off += n
	return st.reading.Load() == 0
}

// undoRec returns the undo record at ref (not ref+1) and its w-byte record.
func (ps *pageSet) undoRec(ref uint32, w int) (next uint32, slot int, rec []byte) {
	c := *ps.chunks[ref>>undoOffBits].Load()
	e := c[ref&(1<<undoOffBits-1):]
	return binary.LittleEndian.Uint32(e), int(binary.LittleEndian.Uint16(e[4:])), e[undoRecHeader : undoRecHeader+w : undoRecHeader+w]
}

// freeViews ends the protection of a snapshot's views: their undo logs are
// garbage at once (the tables drop their pointers to the views lazily). It
// is the snapshot's storekit free function, so it must not reference the
// snapshot.
func freeViews(states map[string]*stateView) {
	for _, sv := range states {
		for _, tv := range sv.tabs {
			if tv == nil {
				continue
			}
			if p := &tv.pages; p.Load() != nil {
				p.Store(nil)
			}
			tv.done.Store(true) // last: the table may recycle tv now
		}
	}
}

// MaxParallelism implements runtime.View.
func (sn *snapshot) MaxParallelism() int { return sn.maxP }

// KeyGroups implements runtime.View.
func (sn *snapshot) KeyGroups() srt.KeyGroupRange { return sn.groups }

// States implements runtime.View.
func (sn *snapshot) States() []srt.StateSpec { return append([]srt.StateSpec(nil), sn.specs...) }

// Release implements runtime.Snapshot. It may be called from any goroutine,
// also while another goroutine is in Scan: that Scan then stops with
// runtime.ErrReleased at the next page, and the snapshot stops counting as
// live when it returns.
func (sn *snapshot) Release() error {
	return sn.lease.Release()
}

// Scan implements runtime.View. Entries come in slot order of the key
// group's table; a list's elements are consecutive and in order, a map's
// entries ascend by user key.
func (sn *snapshot) Scan(name string, kg int, fn func(srt.Entry) error) error {
	if err := sn.lease.BeginScan(name); err != nil {
		return err
	}
	defer sn.lease.EndScan()
	sv, ok := sn.states[name]
	if !ok {
		return fmt.Errorf("cow: snapshot %d has no state %q", sn.lease.Seq(), name)
	}
	if !sn.groups.Contains(kg) {
		return fmt.Errorf("%w: state %q: key group %d is not in the snapshot's key groups %v",
			srt.ErrKeyGroupNotOwned, name, kg, sn.groups)
	}
	if sv.tab != nil {
		return sv.tab.Scan(kg, fn)
	}
	if sv.tabs == nil {
		return nil
	}
	tv := sv.tabs[kg-sn.groups.Start]
	if tv == nil {
		return nil
	}
	sc := sn.spare.Swap(nil)
	if sc == nil {
		sc = newScanner()
	}
	sc.slabs, sc.kind, sc.state, sc.fn = tv.slabs, sv.spec.Kind, name, fn
	err := tv.scan(sc)
	sc.slabs, sc.fn, sc.e, sc.err = nil, nil, srt.Entry{}, nil
	sn.spare.Store(sc)
	return err
}

// scan calls sc's callback with every entry of the view's table, page by
// page, each page with its reading count raised (see pageSet).
func (tv *tableView) scan(sc *scanner) error {
	ps := tv.pageSet()
	r := &tv.main
	if r.logcap != 0 {
		if err := tv.scanPages(ps, sc, r.dir, r.logcap, int(r.w), 0, 0); err != nil {
			return err
		}
	}
	if r.odir != nil {
		return tv.scanPages(ps, sc, r.odir, r.ologcap, int(r.ow), r.mig, len(r.dir))
	}
	return nil
}

// scanPages scans the records from..end of a table whose pages are dir;
// base is the index of dir[0] in the page set.
func (tv *tableView) scanPages(ps *pageSet, sc *scanner, dir []pg, logcap uint8, w, from, base int) error {
	per := min(1<<logcap, pageSlots)
	for i := from / per; i < len(dir); i++ {
		if err := tv.scanPage(ps, sc, base+i, dir[i].b, w, max(from-i*per, 0), per); err != nil {
			return err
		}
	}
	return nil
}

// scanPage scans records from..per of page j, with the page's reading count
// raised: records the writer has saved are read from the undo log.
func (tv *tableView) scanPage(ps *pageSet, sc *scanner, j int, page []byte, w, from, per int) error {
	st := &ps.pages[j]
	st.reading.Add(1)
	defer st.reading.Add(-1)
	if tv.lease.Released() {
		return tv.lease.ErrReleasedDuringScan(sc.state)
	}
	head := st.head.Load()
	if head == 0 {
		return sc.page(page, w, from, per, nil)
	}
	u := &sc.undo
	clear(u.bits[:])
	for ref := head; ref != 0; {
		next, slot, rec := ps.undoRec(ref-1, w)
		u.recs[slot] = rec
		u.bits[slot>>6] |= 1 << (slot & 63)
		ref = next
	}
	return sc.page(page, w, from, per, u)
}

// undoSlots are the records of a page that come from the undo log.
type undoSlots struct {
	bits [pageSlots / 64]uint64
	recs [pageSlots][]byte // valid where bits are set
}

// page reports the entries of records from..per of a page, taking the
// records in u (if any) from the undo log. It finds the occupied records of
// each run of 64 without a branch per record (which would be mispredicted
// half the time at the usual load), and reports inline entries of Value
// states without a call of its own.
func (sc *scanner) page(page []byte, w, from, per int, u *undoSlots) error {
	value := sc.kind == srt.KindValue
	for base := from &^ 63; base < per; base += 64 {
		n := min(64, per-base)
		run := page[base*w : (base+n)*w]
		var occ, saved uint64
		if u == nil {
			for i := range n {
				occ |= b2u(binary.LittleEndian.Uint32(run[i*w:]) > recTomb) << i
			}
		} else {
			// The page's bytes of a saved record may be being written:
			// only the undo log's copy may be read.
			saved = u.bits[base>>6]
			for i := range n {
				var c uint32
				if saved>>i&1 != 0 {
					c = binary.LittleEndian.Uint32(u.recs[base+i])
				} else {
					c = binary.LittleEndian.Uint32(run[i*w:])
				}
				occ |= b2u(c > recTomb) << i
			}
		}
		if base < from {
			occ &^= 1<<(from-base) - 1
		}
		for ; occ != 0; occ &= occ - 1 {
			i := bits.TrailingZeros64(occ)
			var rec []byte
			if saved>>i&1 != 0 {
				rec = u.recs[base+i]
			} else {
				rec = run[i*w : i*w+w : i*w+w]
			}
			if value && rec[0]&3 == recInline && rec[4]|rec[5]|rec[6] < 0x80 {
				ke := 7 + int(rec[4])
				ne := ke + int(rec[5])
				ve := ne + int(rec[6])
				if ve <= w {
					if err := sc.fn(srt.Entry{Key: rec[7:ke:ke], Namespace: rec[ke:ne:ne], Value: rec[ne:ve:ve]}); err != nil {
						return err
					}
					continue
				}
			}
			if err := sc.record(rec); err != nil {
				return err
			}
		}
	}
	return nil
}

// b2u converts a bool to 0 or 1 without a branch.
func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// scanner turns the records of a table into Entries. It allocates nothing
// per entry.
type scanner struct {
	undo  undoSlots // scratch for pages with undo records
	slabs [][]byte
	kind  srt.Kind
	state string // the state being scanned, for errors
	fn    func(srt.Entry) error
	e     srt.Entry // the entry being reported by the list and tree visitors
	err   error
	elem  func(v []byte) bool
	item  func(uk, v []byte) bool
}

func newScanner() *scanner {
	sc := new(scanner)
	sc.elem = func(v []byte) bool {
		sc.e.Value = v
		sc.err = sc.fn(sc.e)
		return sc.err == nil
	}
	sc.item = func(uk, v []byte) bool {
		sc.e.UserKey, sc.e.Value = uk, v
		sc.err = sc.fn(sc.e)
		return sc.err == nil
	}
	return sc
}

// record reports the entries of one occupied record.
func (sc *scanner) record(rec []byte) error {
	key, ns, val, _, ok := decodeEntry(recEntry(sc.slabs, rec))
	if !ok {
		return errCorrupt
	}
	switch sc.kind {
	case srt.KindValue:
		return sc.fn(srt.Entry{Key: key, Namespace: ns, Value: val})
	case srt.KindList:
		sc.e = srt.Entry{Key: key, Namespace: ns}
		if err := listScan(sc.slabs, val, sc.elem); err != nil {
			return err
		}
	default:
		root, ok := decodeBtree(val)
		if !ok {
			return errCorrupt
		}
		sc.e = srt.Entry{Key: key, Namespace: ns}
		if err := btRange(sc.slabs, &root, nil, nil, false, sc.item); err != nil {
			return err
		}
	}
	err := sc.err
	sc.err = nil
	return err
}
