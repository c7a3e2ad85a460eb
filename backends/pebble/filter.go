package pebble

import (
	"errors"
	"slices"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
	pebbledb "github.com/cockroachdb/pebble/v2"
)

// The key filter. A point read of a key the database does not hold — the
// first count of an auction in a window, a bidder's first session, a
// person seen for the first time — costs Pebble a search of every
// memtable and a filter probe of every level of sstables, and a job that
// creates state reads absent keys all the time: of the point reads that
// Nexmark's five queries leave to Pebble, 81% are of absent keys (94% in
// q5). So the store keeps a Bloom filter of the keys it may have written
// to the database, and a point read of a key the filter does not hold
// answers "not found" without asking Pebble.
//
// The filter holds a superset of the database's keys: every Set and
// merge operand the store writes, batched or not, adds its key before it
// reaches the database, and so does every entry Restore loads; deletions
// remove nothing, so a deleted key stays a false positive until the
// filter is rebuilt. A filter is sized for filterBitsPerKey bits a key;
// once more keys were added than that (a key whose bits were all set
// already does not count), it is rebuilt from a scan of the database's
// keys, for filterHeadroom times as many keys as the database holds. A
// rebuild that would take more than Options.KeyFilterSize bytes, or whose
// scan fails, turns the filter off: every point read then asks Pebble, as
// it does until the filter of a store opened on an existing directory
// is built. Either is reported to Options.Logger (Infof for the bound,
// Errorf for a failed scan), naming the working directory.
//
// The commit after which the filter is outgrown — when the database holds
// every key the store wrote — starts the rebuild on a goroutine of its
// own, which scans a Pebble snapshot taken then, so that the operator
// does not wait for a scan of its whole database. Until the rebuilt
// filter is taken, the old one keeps answering (it still holds every
// key; it is only fuller), and every key added to it is logged too. The
// first commit after the scan ends takes the new filter and adds the
// logged keys to it: the snapshot's keys and those written since, a
// superset of the database's again. A Restore, which the operator waits
// for anyway, cancels a rebuild running and rebuilds at its end, before
// it returns; Close cancels a rebuild and waits for its goroutine. A
// store opened on an existing directory (ReuseExisting) starts without a
// filter, answering every point read from Pebble, and builds one the same
// way from the moment it opens.
//
// The filter is blocked: a key's filterProbes bits lie in one 64-byte
// block, one cache miss, picked by its xxhash (the hash the pending
// batches' indexes use, computed once per read).

// filterBitsPerKey is the bits of filter per key it is sized for: about
// 1% false positives with filterProbes bits in a 512-bit block.
const filterBitsPerKey = 10

// filterProbes is the bits a key sets in its block.
const filterProbes = 7

// minFilterBlocks is the size of a new store's filter: 8 KiB, for 6,553
// keys.
const minFilterBlocks = 128

// defaultKeyFilterSize is the default Options.KeyFilterSize: 16 MiB, a
// filter for about 13 million keys, rebuilt for up to 3.3 million live
// ones.
const defaultKeyFilterSize = 16 << 20

// filterBlock is one block of the filter: 512 bits.
type filterBlock [8]uint64

// keyFilter is the store's filter of the keys the database may hold (see
// above). The zero value is off: it holds every key.
type keyFilter struct {
	blocks  []filterBlock // nil when off
	n       int           // the keys added since the filter was made
	rebuild bool          // n outgrew the filter: rebuild at the next commit
	max     int64         // the most bytes a rebuild may take
	skips   int64         // the point reads it answered
	// logging is set while a rebuild runs: every key added is also
	// appended to log, for the rebuilt filter (see Store.takeFilter),
	// even while the store has no filter yet (an existing database).
	logging bool
	log     []uint64
}

// newKeyFilter returns the filter of an empty database, of at most max
// bytes (off if max is less than the smallest filter).
func newKeyFilter(max int64) keyFilter {
	f := keyFilter{max: max}
	if f.allowed() {
		f.blocks = make([]filterBlock, minFilterBlocks)
	}
	return f
}

// allowed reports whether the bound of the filter admits one at all.
func (f *keyFilter) allowed() bool { return f.max >= minFilterBlocks*64 }

// startExistingFilter starts building the key filter of a store opened on
// an existing database, unless filters are off: until the build is taken
// the store has none, and every point read asks Pebble.
func (s *Store) startExistingFilter() {
	s.filter = keyFilter{max: s.opts.KeyFilterSize}
	if s.filter.allowed() {
		s.startFilterBuild()
	}
}

// block returns the block of the key of xxhash h, and the bits it sets in
// it, filterProbes positions of 9 bits each, from a second mix of h.
func (f *keyFilter) block(h uint64) (*filterBlock, uint64) {
	i := uint64(uint32(h>>32)) * uint64(len(f.blocks)) >> 32
	return &f.blocks[i], h * 0x9e37_79b9_7f4a_7c15
}

// add adds the key of xxhash h.
func (f *keyFilter) add(h uint64) {
	if f.logging {
		f.log = append(f.log, h)
	}
	if f.blocks == nil {
		return
	}
	b, g := f.block(h)
	var fresh bool
	for range filterProbes {
		w, m := g>>6&7, uint64(1)<<(g&63)
		fresh = fresh || b[w]&m == 0
		b[w] |= m
		g >>= 9
	}
	if fresh {
		f.n++
		if f.n > len(f.blocks)*512/filterBitsPerKey {
			f.rebuild = true
		}
	}
}

// write adds the key of xxhash h if a write op of it makes it present in
// the database: a Set or a merge operand.
func (f *keyFilter) write(op opKind, h uint64) {
	if op == opSet || op == opMerge {
		f.add(h)
	}
}

// mayHold reports whether the database may hold the key of xxhash h:
// false only for a key no write or load added.
func (f *keyFilter) mayHold(h uint64) bool {
	if f.blocks == nil {
		return true
	}
	b, g := f.block(h)
	for range filterProbes {
		if b[g>>6&7]&(uint64(1)<<(g&63)) == 0 {
			f.skips++
			return false
		}
		g >>= 9
	}
	return true
}

// off turns the filter off for good.
func (f *keyFilter) off() {
	f.blocks, f.n, f.rebuild, f.logging, f.log = nil, 0, false, false, nil
}

// filterHeadroom is how many times the keys the database holds a rebuilt
// filter is sized for: the next rebuild comes after three times as many
// new keys. A job that creates and deletes keys all the time (windows,
// sessions, timers) rebuilds its filter after every few times its live
// keys, each rebuild a scan of the database, tombstones included (two
// until 326ed41): at twice the keys, rebuilds took 22% of Nexmark's five
// queries on pebble;
// at four times a pass took 17% less time (p=0.041, 6 interleaved runs).
// The cost is memory: 40 bits per live key just after a rebuild.
const filterHeadroom = 4

// filterBuild is a rebuild of the key filter running on its own
// goroutine, from a snapshot of the database.
type filterBuild struct {
	snap *pebbledb.Snapshot
	max  int64
	stop atomic.Bool   // set to cancel the scans
	done chan struct{} // closed when the goroutine has ended
	// res is the rebuilt filter (off if it would be larger than max) and
	// err the scans' error; both are read only after done is closed.
	res keyFilter
	err error
}

// errFilterBuildStopped is the error of a rebuild canceled by the store.
var errFilterBuildStopped = errors.New("key filter rebuild canceled")

// filterBuildStarted, if set by a test, is called by a rebuild's goroutine
// before its scans.
var filterBuildStarted func()

// newKeyIter opens the iterator of a scan of a filter build; tests replace
// it to make scans fail.
var newKeyIter = func(r pebbledb.Reader) (*pebbledb.Iterator, error) {
	return r.NewIter(&pebbledb.IterOptions{})
}

// maintainFilter runs after every commit, when the database holds every
// key the store wrote: it takes the filter a rebuild has finished, and
// starts a rebuild if the filter is outgrown and none is running.
func (s *Store) maintainFilter() {
	if b := s.fbuild; b != nil {
		select {
		case <-b.done:
			s.takeFilter()
		default:
			return
		}
	}
	if s.filter.rebuild {
		s.startFilterBuild()
	}
}

// startFilterBuild starts a rebuild of the key filter from a snapshot of
// the database, which must hold every key the store wrote.
func (s *Store) startFilterBuild() {
	f := &s.filter
	b := &filterBuild{snap: s.db.NewSnapshot(), max: f.max, done: make(chan struct{})}
	s.fbuild = b
	f.rebuild, f.logging, f.log = false, true, f.log[:0]
	go b.run()
}

func (b *filterBuild) run() {
	defer close(b.done)
	if filterBuildStarted != nil {
		filterBuildStarted()
	}
	b.res, b.err = buildFilter(b.snap, b.max, &b.stop)
	if err := b.snap.Close(); b.err == nil {
		b.err = err
	}
}

// takeFilter waits for the rebuild running to end and makes its filter,
// with the keys added since its snapshot, the store's; a rebuild that
// failed, or whose filter would be too large, turns the filter off.
func (s *Store) takeFilter() {
	b := s.fbuild
	<-b.done
	s.fbuild = nil
	// The log is dropped with the old filter, not kept for the next
	// rebuild: it may have grown to millions of keys, 8 bytes each.
	s.installFilter(b.res, b.err, s.filter.log)
}

// cancelFilterBuild cancels the rebuild running, if any, and waits for its
// goroutine. The filter is left as it is, holding every key, and still
// due for a rebuild.
func (s *Store) cancelFilterBuild() {
	b := s.fbuild
	if b == nil {
		return
	}
	b.stop.Store(true)
	<-b.done
	s.fbuild = nil
	f := &s.filter
	f.rebuild, f.logging, f.log = true, false, nil
}

// rebuildFilter rebuilds the key filter from the keys of the database,
// which must hold every key the store wrote, before it returns: at the end
// of a Restore. A rebuild running is canceled first.
func (s *Store) rebuildFilter() {
	s.cancelFilterBuild()
	nf, err := buildFilter(s.db, s.filter.max, nil)
	s.installFilter(nf, err, nil)
}

// installFilter makes nf, built with error err, the store's key filter,
// with the keys of log added. A build that failed, or whose filter would
// outgrow Options.KeyFilterSize (nf off, err nil), turns the filter off
// for good, and says so to the store's logger.
func (s *Store) installFilter(nf keyFilter, err error, log []uint64) {
	f := &s.filter
	if err == nil && nf.blocks != nil {
		nf.skips = f.skips
		for _, h := range log {
			nf.add(h)
		}
		*f = nf
		return
	}
	l := storeLogger{h: s.h, user: s.opts.Logger}
	if err != nil {
		l.Errorf("working directory %q: the key filter is off, its rebuild failed: %v (point reads ask Pebble for every key)", s.h.dir, err)
	} else {
		l.Infof("working directory %q: the key filter is off: the database holds too many keys for KeyFilterSize %d (point reads ask Pebble for every key)", s.h.dir, f.max)
	}
	f.off()
}

// buildFilter returns the filter of the keys r holds, sized for
// filterHeadroom times as many: off if it would take more than limit
// bytes. One scan counts the keys and keeps their hashes, 8 bytes a key,
// which the filter, sized by then, takes; a database whose hashes would
// take more than limit bytes is counted to the end and scanned again for
// its hashes, if its filter is within limit at all. (Until 326ed41 every
// rebuild scanned twice, and rebuilds took 11% of the processor time of
// Nexmark's five queries on pebble.) A non-nil stop cancels the scans
// once set.
func buildFilter(r pebbledb.Reader, limit int64, stop *atomic.Bool) (keyFilter, error) {
	keys, keep := 0, true
	var hashes []uint64
	if err := scanKeys(r, stop, func(k []byte) {
		keys++
		if !keep {
			return
		}
		if len(hashes) == cap(hashes) {
			// The old array and the new one together stay within limit.
			if n := max(1024, 2*cap(hashes)); int64(n+cap(hashes))*8 <= limit {
				hashes = slices.Grow(hashes, n-len(hashes))
			} else {
				hashes, keep = nil, false // past the bound: count only
				return
			}
		}
		hashes = append(hashes, xxhash.Sum64(k))
	}); err != nil {
		return keyFilter{}, err
	}
	size := max(minFilterBlocks, (filterHeadroom*keys*filterBitsPerKey+511)/512)
	if int64(size)*64 > limit {
		return keyFilter{}, nil
	}
	nf := keyFilter{blocks: make([]filterBlock, size), max: limit}
	if keep {
		for _, h := range hashes {
			nf.add(h)
		}
		return nf, nil
	}
	if err := scanKeys(r, stop, func(k []byte) { nf.add(xxhash.Sum64(k)) }); err != nil {
		return keyFilter{}, err
	}
	return nf, nil
}

// scanKeys calls fn with every key of r, valid until fn returns, until
// stop (if not nil) is set.
func scanKeys(r pebbledb.Reader, stop *atomic.Bool, fn func(key []byte)) error {
	it, err := newKeyIter(r)
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		if stop != nil && stop.Load() {
			_ = it.Close()
			return errFilterBuildStopped
		}
		fn(it.Key())
	}
	return it.Close()
}
