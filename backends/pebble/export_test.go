package pebble

import pebbledb "github.com/cockroachdb/pebble/v2"

// Hooks for the tests of package pebble_test.

// SetCommitBatch makes the store's batch commits call fn instead of
// Batch.Commit, until the returned function restores them.
func SetCommitBatch(fn func(b *pebbledb.Batch, wo *pebbledb.WriteOptions) error) (restore func()) {
	old := commitBatch
	commitBatch = fn
	return func() { commitBatch = old }
}

// PendingWrites returns the number of writes in the pending batch.
func (s *Store) PendingWrites() int {
	if s.batch == nil {
		return 0
	}
	return int(s.batch.Count())
}

// PendingIndexed reports whether the pending batch is indexed (see
// Store.indexedBatch).
func (s *Store) PendingIndexed() bool { return s.batch != nil && s.batch.Indexed() }

// KeepPending makes s commit its pending batch only at the size bound,
// Snapshot, Restore and Close, never after a run of reads or before an
// iteration: so that every read of a test goes through the pending
// writes.
func (s *Store) KeepPending() { s.readRunLimit, s.indexCommit = 1<<62, 1<<62 }

// SetMaxPointClear sets the most keys a Clear or DeleteAll deletes one by
// one, for the test, and restores it after.
func SetMaxPointClear(t interface{ Cleanup(func()) }, n int) {
	old := maxPointClear
	maxPointClear = n
	t.Cleanup(func() { maxPointClear = old })
}

// Stalls returns the number of writes that waited for a flush or
// compaction in the store (handle.awaitQueue) and the number of Pebble's
// own write stalls.
func (s *Store) Stalls() (waits, pebbleStalls int64) {
	return s.h.waits.Load(), s.h.stalls.Load()
}

// CommittedReads returns the number of point reads that the committed
// batch answered (see Store.readCommitted).
func (s *Store) CommittedReads() int64 { return s.chits }

// FilterSkips returns the number of point reads the key filter answered.
func (s *Store) FilterSkips() int64 { return s.filter.skips }

// FilterBytes returns the size of the key filter, 0 if it is off.
func (s *Store) FilterBytes() int { return 64 * len(s.filter.blocks) }

// SetFilterBuildStarted makes every rebuild of a key filter call fn on its
// goroutine before it scans, until the test ends.
func SetFilterBuildStarted(t interface{ Cleanup(func()) }, fn func()) {
	old := filterBuildStarted
	filterBuildStarted = fn
	t.Cleanup(func() { filterBuildStarted = old })
}

// FilterBuilding reports whether a rebuild of the key filter is running
// (or has ended and was not taken yet).
func (s *Store) FilterBuilding() bool { return s.fbuild != nil }

// WaitFilter waits for the rebuild of the key filter running, if any, and
// takes its filter, as the next commit would.
func (s *Store) WaitFilter() {
	if s.fbuild != nil {
		s.takeFilter()
	}
}

// SetNewKeyIter makes the scans of key filter builds open their iterators
// with fn, until the test ends.
func SetNewKeyIter(t interface{ Cleanup(func()) }, fn func(r pebbledb.Reader) (*pebbledb.Iterator, error)) {
	old := newKeyIter
	newKeyIter = fn
	t.Cleanup(func() { newKeyIter = old })
}

// BackgroundWork returns the number of Pebble's flushes and compactions in
// progress in the store's database.
func (s *Store) BackgroundWork() int64 {
	m := s.db.Metrics()
	return m.Flush.NumInProgress + m.Compact.NumInProgress
}
