package pebble

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/cespare/xxhash/v2"
	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/batchrepr"
)

// Write batching (see "Write batching" in the package doc). Under SyncNone
// the store's writes go into one pending batch, and reads see them: point
// reads through the store's index of the batch (pendingIndex), iterators
// and merged reads through the batch itself, once indexed (indexedBatch);
// the batch is committed when it reaches Options.BatchSize, after a run of
// reads with no write, before Snapshot and Restore, and at Close, without
// the writes that a later one of the same key supersedes (combined). With a
// write-ahead log (SyncWAL, SyncAlways) every write is committed on its
// own, as a write the caller saw succeed must be in the log.

// memEntryOverhead is what Pebble charges a memtable for an entry besides
// its key and value: a skiplist node with a full tower (184 bytes), the
// key's 8-byte trailer and alignment (pebble's memTableEntrySize). The
// store counts it in the pending batch's size, so that a committed batch
// stays well under Pebble's large-batch threshold (half a memtable),
// above which a batch becomes a flushable memtable of its own.
const memEntryOverhead = 184 + 8 + 3

// readRunCommit is the number of reads in a row, with no write between
// them, after which the store commits its pending batch: a read through
// an indexed batch merges the batch into the database's iterators and
// costs more than a read of the database alone, so a read-mostly phase
// stops paying for writes that are no longer coming.
const readRunCommit = 16

// indexCommit is the number of pending writes from which an iteration
// commits the pending batch rather than read through it (see readBatch):
// indexing a write costs about what its memtable insertion does (a
// skiplist insertion each), which the commit makes anyway, so past the
// commit's fixed cost indexing is work done twice — for the writes
// pending, or, if the batch is indexed already, for those that would
// follow into it. Below it, a job that iterates at every event does not
// commit at every event.
const indexCommit = 128

// maxBatchRangeDels is the number of range deletions (Clear of a map,
// DeleteAll) after which the pending batch is committed. An indexed batch
// fragments its range deletions again on the first read after each new
// one, in time and memory linear in their number, so a batch with many
// would make a Clear-then-read pattern quadratic.
const maxBatchRangeDels = 32

// commitBatch commits b; tests replace it to make a commit fail.
var commitBatch = func(b *pebbledb.Batch, wo *pebbledb.WriteOptions) error { return b.Commit(wo) }

// opKind is a write of the store.
type opKind uint8

const (
	opSet      opKind = iota // Set(key, value)
	opMerge                  // Merge(key, value), a list's merge operand
	opDelete                 // Delete(key)
	opDelRange               // DeleteRange(key, value): value is the end
)

// apply makes the write op of key and value: into the pending batch if
// the store batches its writes, and otherwise as a commit of its own.
func (s *Store) apply(op opKind, key, value []byte) error {
	n := int64(memEntryOverhead + len(key) + len(value))
	var h uint64 // the key's hash, for the pending index and the key filter
	if op != opDelRange {
		h = xxhash.Sum64(key)
	}
	if s.batch != nil {
		if s.failed != nil {
			return s.failed
		}
		if err := s.h.writable(); err != nil {
			return err
		}
		s.readRun = 0
		if s.pending+n > s.batchLimit || (op == opDelRange && s.rangeDels >= maxBatchRangeDels) {
			if err := s.commit(); err != nil {
				return err
			}
		}
		if n <= s.batchLimit {
			return s.applyPending(op, key, value, h, n)
		}
		// An entry larger than a whole batch is committed on its own (the
		// pending batch is empty now, so order is kept): batches stay
		// below the large-batch threshold.
	}
	// The key filter takes the key after any commit above, which may
	// rebuild it from the database, where the key is not yet.
	s.filter.write(op, h)
	if err := s.write(n, func() error { return writeOp(s.db, op, key, value, s.wo) }); err != nil {
		return err
	}
	s.maintainFilter() // the database holds every key: no write is pending
	return nil
}

// applyPending adds the write op of key (of xxhash h) and value, n bytes
// of memtable, to the pending batch, which has room for it.
func (s *Store) applyPending(op opKind, key, value []byte, h uint64, n int64) error {
	s.filter.write(op, h)
	b := s.batch
	off := b.Len()
	if op == opDelRange {
		s.rangeDels++
	}
	if err := writeOp(b, op, key, value, nil); err != nil {
		// Pebble's batch is in an unknown state: the writes already in
		// it can neither be trusted nor committed.
		return s.fail(b.Count(), fmt.Errorf("add a write to the pending batch: %w", err))
	}
	s.pending += n
	s.pidx.note(op, key, value, h, off, b.Count())
	return nil
}

// opOf returns the store's write of a write of kind in a batch, and false
// for a kind the store never writes.
func opOf(kind pebbledb.InternalKeyKind) (opKind, bool) {
	switch kind {
	case pebbledb.InternalKeyKindSet:
		return opSet, true
	case pebbledb.InternalKeyKindMerge:
		return opMerge, true
	case pebbledb.InternalKeyKindDelete:
		return opDelete, true
	case pebbledb.InternalKeyKindRangeDelete:
		return opDelRange, true
	}
	return 0, false
}

// writeOp makes the write op of key and value on w: a batch (wo is then
// ignored), or the database, as a commit of its own.
func writeOp(w pebbledb.Writer, op opKind, key, value []byte, wo *pebbledb.WriteOptions) error {
	switch op {
	case opSet:
		return w.Set(key, value, wo)
	case opMerge:
		return w.Merge(key, value, wo)
	case opDelete:
		return w.Delete(key, wo)
	default:
		return w.DeleteRange(key, value, wo)
	}
}

// readBatch returns the batch a read goes through: the pending batch,
// indexed, while it holds writes (an indexed batch reads through to the
// database), and nil, for the database itself, otherwise. It counts the
// reads made with writes pending and commits them after a run of them
// (see countRead). (Callers call the concrete types' methods: through the
// pebble.Reader interface, an iterator's options would escape to the
// heap.)
func (s *Store) readBatch() (*pebbledb.Batch, error) {
	b := s.batch
	if b == nil || b.Empty() {
		return nil, nil
	}
	if s.countRead() || (s.iterating == 0 && int(b.Count()) >= s.indexCommit) {
		if err := s.commit(); err != nil {
			if s.failed != nil {
				return nil, err
			}
			// The directory refuses writes now: read through the
			// batch, which still holds them.
			return s.indexedBatch()
		}
		return nil, nil
	}
	return s.indexedBatch()
}

// indexedBatch returns the pending batch indexed, for a read through it.
// Writes go into a plain batch (pbatch), which Pebble does not index: an
// indexed batch inserts every write into a skiplist of its own, which
// only reads through the batch use, and which cost a fifth of a Put
// (BenchmarkValuePut, backend=pebble). The first read that must go
// through the batch — an iterator over fewer than indexCommit pending
// writes (readBatch commits more), or a point read of a key whose last
// pending write is a merge operand — copies the pending writes into the
// indexed batch (ibatch), which keeps them at the same offsets (the
// pending index stays right) and takes the writes that follow, until the
// commit makes the plain batch the pending one again. A write-only phase
// never pays for an index; a phase of reads and writes pays what an
// indexed batch costs, and one copy of the batch's bytes per commit.
func (s *Store) indexedBatch() (*pebbledb.Batch, error) {
	b := s.batch
	if b.Indexed() {
		return b, nil
	}
	ib := s.ibatch
	if err := ib.Apply(b, nil); err != nil {
		// Pebble refuses the bytes of its own batch: neither batch can be
		// trusted to hold the writes.
		return nil, s.fail(b.Count(), fmt.Errorf("index the pending batch: %w", err))
	}
	b.Reset()
	s.batch = ib
	return ib, nil
}

// newIter opens an iterator with options o on the pending batch (see
// readBatch) or the database.
func (s *Store) newIter(o *pebbledb.IterOptions) (*pebbledb.Iterator, error) {
	b, err := s.readBatch()
	switch {
	case err != nil:
		return nil, err
	case b != nil:
		return b.NewIter(o)
	}
	return s.db.NewIter(o)
}

// countRead counts a read made while the pending batch holds writes, and
// reports whether the batch should be committed now: after readRunCommit
// reads in a row, unless an iteration is open (it may be reading the
// batch) or the directory refuses writes (the reads then go on through
// the batch).
func (s *Store) countRead() bool {
	if s.iterating > 0 {
		return false
	}
	s.readRun++
	return s.readRun >= s.readRunLimit && s.h.writable() == nil
}

// commit commits the pending batch, if it holds writes, and empties it.
// While the directory refuses writes (see handle.room) it returns the
// refusal and leaves the batch pending; a commit that fails fails the
// store (see fail).
func (s *Store) commit() error {
	if s.failed != nil {
		return s.failed
	}
	s.readRun = 0
	b := s.batch
	if b == nil || b.Empty() {
		return nil
	}
	if err := s.h.writable(); err != nil {
		return err
	}
	if err := s.h.room(s.pending); err != nil {
		return err
	}
	cb := s.combined(b)
	if err := s.h.run(func() error { return commitBatch(cb, s.wo) }); err != nil {
		return s.fail(b.Count(), fmt.Errorf("commit the pending batch: %w", err))
	}
	if cb != b {
		cb.Reset()
	}
	s.pending, s.rangeDels = 0, 0
	s.keepCommitted(b)
	s.maintainFilter() // the database holds every key now
	s.batch = s.pbatch // empty: b is it, or the indexed batch was filled from it
	if b.Indexed() && s.iterating > 0 {
		// An iterator opened by a running iteration may read b (only
		// Snapshot commits during an iteration): keep it intact until
		// the iterations end, and index into a new one.
		s.retired = append(s.retired, b)
		s.ibatch = s.db.NewIndexedBatch()
		return nil
	}
	b.Reset() // a committed batch may be reused after Reset
	return nil
}

// Write combining. A key written again and again between two commits —
// a count per window, the latest session of a bidder, the maximum of a
// window — leaves every write but its last in the pending batch, and a
// commit would insert each into the memtable, where the last hides the
// others until a flush or compaction drops them. The pending index knows
// each key's last point write, so commit can leave out every Set, Delete
// or merge operand that a later Set or Delete of the same key supersedes:
// what the batch makes of every key is the same, for fewer memtable
// insertions and less to flush and compact. Range deletions and the
// writes before a key's last merge operand (which folds them) all stay, in
// their order.

// combined returns what commit commits for the pending batch b: b itself,
// unless at least a quarter of its writes may be superseded (more writes
// than keys, range deletions and merge operands), and then s.cbatch filled
// with b's writes that no later Set or Delete of their key supersedes, in
// b's order. If b cannot be read back or cbatch refuses a write, b is
// committed as it is.
func (s *Store) combined(b *pebbledb.Batch) *pebbledb.Batch {
	x := &s.pidx
	n := int(b.Count())
	if dup := n - len(x.refs) - len(x.ranges) - x.merges; dup <= 0 || 4*dup < n {
		return b
	}
	repr, cb := b.Repr(), s.cbatch
	r := batchrepr.Read(repr)
	for seq := uint32(1); ; seq++ {
		kind, key, value, ok, err := r.Next()
		if err == nil && !ok {
			return cb
		}
		op, known := opOf(kind)
		if err != nil || !known {
			break
		}
		if op != opDelRange && x.superseded(repr, key, seq) {
			continue
		}
		if writeOp(cb, op, key, value, nil) != nil {
			break
		}
	}
	cb.Reset()
	return b
}

// fail records that the count writes of the pending batch could not be
// committed: from then on every method of the store (but Close, Config
// and States) returns the error, which wraps ErrFailed and names the
// directory and the cause, and the directory is left unclean (writes
// acknowledged to the caller are missing from it). It returns the error.
func (s *Store) fail(count uint32, cause error) error {
	s.failed = fmt.Errorf("%w: %q: %d acknowledged writes of the pending batch may be lost (close the store and restore a checkpoint): %w",
		ErrFailed, s.h.dir, count, cause)
	err := s.failed
	s.h.fatal.CompareAndSwap(nil, &err)
	return s.failed
}

// endIteration ends an iteration, closing the batches that commits made
// during iterations retired once none is running.
func (s *Store) endIteration() {
	s.iterating--
	if s.iterating == 0 && len(s.retired) > 0 {
		for i, b := range s.retired {
			_ = b.Close()
			s.retired[i] = nil
		}
		s.retired = s.retired[:0]
	}
}

// closeBatch commits the pending batch when the directory is kept, and
// closes it: the first step of Close. A pending batch that cannot be
// committed (the directory refuses writes) is reported, and the directory
// left unclean.
func (s *Store) closeBatch() error {
	s.cancelFilterBuild()
	s.filter.off() // no read follows: the last commit need not rebuild it
	b := s.batch
	if b == nil {
		return nil
	}
	switch {
	case s.failed != nil:
		// The failed batch is in Pebble's commit pipeline's hands: both
		// are left to the garbage collector. A directory Close removes
		// loses nothing more than the failure already reported.
		s.batch, s.pbatch, s.ibatch, s.cbatch = nil, nil, nil, nil
		if s.h.removeDir {
			return nil
		}
		return s.failed
	case !s.h.removeDir && !b.Empty():
		if werr := s.commit(); werr != nil {
			if s.failed == nil {
				werr = s.fail(b.Count(), fmt.Errorf("close: %w", werr))
			}
			return werr
		}
	}
	_ = s.pbatch.Close()
	_ = s.ibatch.Close()
	_ = s.cbatch.Close()
	s.batch, s.pbatch, s.ibatch, s.cbatch = nil, nil, nil, nil
	s.kept, s.keptLen = [keptBatches]committedBatch{}, 0
	return nil
}

// The pending index. A read through an indexed batch (Batch.Get) builds
// iterators over the batch for every lookup: two allocations and a merge
// of the batch into the LSM lookup, whether or not the batch holds the
// key. So the store keeps its own index of the pending batch's point
// writes — the hash of each key to where the batch holds its last write
// — and its range deletions: a point read of a key the batch does not
// touch goes straight to the database, the value of a pending Set is read
// from the batch's own bytes, and a pending Delete or range deletion
// answers "not found". Only a key whose last pending write is a merge
// operand (a list's Add) is read through the batch, which folds it with
// the database's value.

// pendingRef is where the pending batch holds the last write of a key:
// its kind, the offsets of its key and value in Batch.Repr, and its
// number in the batch (the writes' order, against range deletions).
type pendingRef struct {
	keyOff, keyLen uint32
	valOff, valLen uint32
	seq            uint32
	op             opKind
}

// pendingRange is a pending range deletion [start, end): offsets in
// Batch.Repr, and its number in the batch.
type pendingRange struct {
	startOff, startLen uint32
	endOff, endLen     uint32
	seq                uint32
}

// pendingIndex indexes the pending batch (see above). It is cleared with
// the batch, keeping its memory.
type pendingIndex struct {
	refs   map[uint64]pendingRef // by xxhash of the key
	ranges []pendingRange
	merges int // merge operands
}

// note records the write op of key (of xxhash h) and value that the
// batch holds at offset off as its write number seq.
func (x *pendingIndex) note(op opKind, key, value []byte, h uint64, off int, seq uint32) {
	keyOff := uint32(off + 1 + uvarintLen(len(key)))
	r := pendingRef{keyOff: keyOff, keyLen: uint32(len(key)), seq: seq, op: op}
	if op != opDelete {
		r.valOff = keyOff + uint32(len(key)+uvarintLen(len(value)))
		r.valLen = uint32(len(value))
	}
	if op == opDelRange {
		x.ranges = append(x.ranges, pendingRange{startOff: r.keyOff, startLen: r.keyLen, endOff: r.valOff, endLen: r.valLen, seq: seq})
		return
	}
	if op == opMerge {
		x.merges++
	}
	if x.refs == nil {
		x.refs = make(map[uint64]pendingRef)
	}
	x.refs[h] = r
}

// reset empties the index.
func (x *pendingIndex) reset() {
	clear(x.refs)
	x.ranges, x.merges = x.ranges[:0], 0
}

// superseded reports whether the point write number seq of key in the
// pending batch, whose bytes are repr, is followed in it by a Set or a
// Delete of key (its last write): then the batch makes of key what that
// write makes of it, with or without the earlier one. A key whose hash
// another key's write took over in the index is not known superseded.
func (x *pendingIndex) superseded(repr, key []byte, seq uint32) bool {
	r, ok := x.refs[xxhash.Sum64(key)]
	return ok && r.seq != seq && (r.op == opSet || r.op == opDelete) &&
		int(r.keyOff+r.keyLen) <= len(repr) && bytes.Equal(repr[r.keyOff:r.keyOff+r.keyLen], key)
}

// pendingState is what the pending batch says of a key.
type pendingState uint8

const (
	pendingNone    pendingState = iota // nothing: read the database
	pendingSet                         // a Set: its value is the key's
	pendingDeleted                     // a Delete or range deletion: no value
	pendingMerge                       // a merge operand (or a hash collision): read through the batch
)

// lookup returns what the pending batch, whose bytes are repr, says of
// key, whose xxhash is h, and the value of a pending Set (in repr).
func (x *pendingIndex) lookup(repr, key []byte, h uint64) ([]byte, pendingState) {
	r, ok := x.refs[h]
	var seq uint32
	if ok {
		if int(r.valOff+r.valLen) > len(repr) || !bytes.Equal(repr[r.keyOff:r.keyOff+r.keyLen], key) {
			return nil, pendingMerge // another key of the same hash: let the batch answer
		}
		seq = r.seq
	}
	for _, d := range x.ranges {
		if (!ok || d.seq > seq) &&
			bytes.Compare(repr[d.startOff:d.startOff+d.startLen], key) <= 0 &&
			bytes.Compare(key, repr[d.endOff:d.endOff+d.endLen]) < 0 {
			return nil, pendingDeleted
		}
	}
	switch {
	case !ok:
		return nil, pendingNone
	case r.op == opSet:
		return repr[r.valOff : r.valOff+r.valLen : r.valOff+r.valLen], pendingSet
	case r.op == opDelete:
		return nil, pendingDeleted
	}
	return nil, pendingMerge
}

// uvarintLen is the length of the uvarint encoding of n.
func uvarintLen(n int) int {
	l := 1
	for ; n >= 0x80; n >>= 7 {
		l++
	}
	return l
}

// The committed batches. A job reads again the keys it wrote a moment ago
// — a window's count at the window's next bid, a bidder's sessions at its
// next bid — and once their batch is committed such a read costs a
// search of Pebble's memtables. So a commit keeps the batch's index
// (swapped with that of the oldest batch kept, whose memory the next
// pending batch then reuses) and a copy of its bytes, the last
// keptBatches batches in all, and a point read of a key the pending batch
// does not touch asks them, newest first, before Pebble: the newest kept
// batch that writes the key, or deletes it with a range deletion, holds
// what the database holds of it, no later batch writing it. A write that
// reaches the database outside the pending batch (an entry larger than a
// batch, Restore's loads) forgets them all (Store.write). The cost is a
// copy of each committed batch's bytes, at most Options.BatchSize each,
// and the memory to hold keptBatches of them; a read of a key none of
// them holds pays a hash lookup in each.

// keptBatches is how many committed batches the store keeps. Nexmark's five
// queries in one pass, whose writes fill a batch five times as fast as
// one query's, read 31,000 of 109,000 point reads from one committed
// batch, 54,000 from four (of 77,000 and 55,000 left to Pebble, 58% and
// 81% of them of absent keys, which no batch answers): a pass took 11%
// less time (median of 12 interleaved pairs, load 1.1; the machine's
// noise, ±20%, left benchstat's test at p=0.38).
const keptBatches = 4

// committedBatch is a committed batch the store keeps: the index of its
// point writes and range deletions, and a copy of its bytes.
type committedBatch struct {
	idx  pendingIndex
	repr []byte
}

// keepCommitted makes the pending index and the bytes of b, just
// committed, the newest committed batch, in place of the oldest, and
// empties the pending index.
func (s *Store) keepCommitted(b *pebbledb.Batch) {
	c := &s.kept[s.keptNext]
	s.pidx, c.idx = c.idx, s.pidx
	s.pidx.reset()
	c.repr = append(c.repr[:0], b.Repr()...)
	s.keptNext = (s.keptNext + 1) % keptBatches
	s.keptLen = min(s.keptLen+1, keptBatches)
}

// forgetCommitted forgets the committed batches.
func (s *Store) forgetCommitted() {
	for i := range s.kept {
		s.kept[i].idx.reset()
		s.kept[i].repr = s.kept[i].repr[:0]
	}
	s.keptLen = 0
}

// readCommitted reads key, whose xxhash is h, for a point read that the
// pending batch does not answer: from the newest committed batch that
// says something of it, or the database.
func (s *Store) readCommitted(key []byte, h uint64) ([]byte, io.Closer, bool, error) {
	for i := 1; i <= s.keptLen; i++ {
		c := &s.kept[(s.keptNext-i+keptBatches)%keptBatches]
		switch v, ps := c.idx.lookup(c.repr, key, h); ps {
		case pendingSet:
			s.chits++
			return v, nil, true, nil
		case pendingDeleted:
			s.chits++
			return nil, nil, false, nil
		case pendingMerge:
			// A merge operand, which the database folds.
			return found3(s.db.Get(key))
		}
	}
	return found3(s.db.Get(key))
}

// pointRead reads key for a point read (Get): "not found" if the key
// filter knows it absent, else from the pending batch's index, the
// committed batches', or the database, or through the batch. A found
// value is valid until closer is closed (closer is nil for a value of a
// batch, valid until the next write or commit).
//
// The filter comes first: it holds every key written since it was built,
// pending and committed batches included (a key is added before its write
// goes into a batch), so a key it does not hold is in none of them, and a
// read of an absent key — most reads of a job that creates state — costs
// one probe of the filter, not a lookup in the index of every batch kept.
func (s *Store) pointRead(key []byte) (value []byte, closer io.Closer, found bool, err error) {
	h := xxhash.Sum64(key)
	if !s.filter.mayHold(h) {
		return nil, nil, false, nil
	}
	b := s.batch
	if b == nil {
		return found3(s.db.Get(key))
	}
	if b.Empty() {
		return s.readCommitted(key, h)
	}
	if s.countRead() {
		err := s.commit()
		if err == nil {
			return s.readCommitted(key, h)
		}
		if s.failed != nil {
			return nil, nil, false, err
		}
		// The directory refuses writes now: read through the batch.
	}
	switch v, ps := s.pidx.lookup(b.Repr(), key, h); ps {
	case pendingSet:
		return v, nil, true, nil
	case pendingDeleted:
		return nil, nil, false, nil
	case pendingMerge:
		ib, err := s.indexedBatch()
		if err != nil {
			return nil, nil, false, err
		}
		return found3(ib.Get(key))
	}
	return s.readCommitted(key, h)
}

// found3 turns the results of a Get into pointRead's: ErrNotFound into
// found false.
func found3(v []byte, closer io.Closer, err error) ([]byte, io.Closer, bool, error) {
	if err != nil {
		if errors.Is(err, pebbledb.ErrNotFound) {
			return nil, nil, false, nil
		}
		return nil, nil, false, err
	}
	return v, closer, true, nil
}
