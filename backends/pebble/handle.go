package pebble

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// handle owns the Pebble database of a store. It is shared by the store and
// its snapshots: the store holds one reference until Close, every Pebble
// snapshot not yet closed holds one, and the last reference to go closes
// the database (flushing it first when the directory is kept without a
// write-ahead log) and then removes the directory, or the marker that says
// it is open. So Close leaves live snapshots readable, and a database is
// never closed under an open iterator.
type handle struct {
	db   *pebbledb.DB
	fs   vfs.FS
	dir  string
	opts Options

	// removeDir makes the final close remove dir (a directory New made).
	removeDir bool

	mu     sync.Mutex
	refs   int
	closed bool

	// bgErr holds the last error of a background flush or compaction, and
	// is cleared when a flush succeeds again; fatal holds an error after
	// which the database must not be written at all. Both are read by the
	// store before every write.
	bgErr  atomic.Pointer[error]
	fatal  atomic.Pointer[error]
	bgSeen atomic.Bool // whether bgErr has been logged since it was last clear
	// progress receives a value (without blocking) when a flush or a
	// compaction ends or a background error occurs, so that a write
	// waiting in awaitQueue, or a flush, looks again.
	progress chan struct{}

	// The store's write stall (see room): after a look at the memtables,
	// budget is how many bytes of memtable the store may commit before
	// it looks again, and spent what it has committed since. Only the
	// store's goroutine uses them.
	budget, spent int64
	// waits counts the writes that waited in awaitQueue, and stalls the
	// write stalls of Pebble's own, which room exists to prevent: both
	// for the tests.
	waits, stalls atomic.Int64
}

// memEmptySlack is more than Pebble's memTableEmptySize, what an empty
// memtable holds (the head and tail nodes of its skiplists).
const memEmptySlack = 4 << 10

// minMemTable is the least capacity of any memtable Pebble makes: its
// first is min(MemTableSize, 256 KiB) (initialMemTableSize), and each
// later one is at least as large.
const minMemTable = 256 << 10

// memTableStopWrites and l0StopWrites are the store's
// MemTableStopWritesThreshold and L0StopWritesThreshold (the latter
// Pebble's default), which room keeps Pebble from reaching.
const (
	memTableStopWrites = 3
	l0StopWrites       = 12
)

// awaitPoll bounds how long awaitQueue sleeps between two looks at the
// memtable queue when no flush or compaction tells it of progress.
const awaitPoll = 10 * time.Millisecond

// openMarker is the file that says a working directory is open, or was not
// closed cleanly: created by New, removed by the final close of a kept
// directory.
const openMarker = "STATEGEN-OPEN"

// listener returns the event listener that tracks background errors.
func (h *handle) listener() *pebbledb.EventListener {
	return &pebbledb.EventListener{
		BackgroundError: func(err error) {
			h.bgErr.Store(&err)
			if !h.bgSeen.Swap(true) && h.opts.Logger == nil {
				quietLogger{}.Errorf("working directory %q: background error: %v", h.dir, err)
			}
			h.noteProgress()
		},
		FlushEnd:        func(info pebbledb.FlushInfo) { h.jobEnded(info.Err) },
		CompactionEnd:   func(info pebbledb.CompactionInfo) { h.jobEnded(info.Err) },
		WriteStallBegin: func(pebbledb.WriteStallBeginInfo) { h.stalls.Add(1) },
	}
}

// jobEnded notes the end of a flush or compaction that failed with err
// (nil if it succeeded). One that succeeded clears the background error:
// the disk takes writes again (a compaction's error would otherwise
// refuse them until some flush, which refused writes never cause,
// succeeded).
func (h *handle) jobEnded(err error) {
	if err == nil {
		h.bgErr.Store(nil)
		h.bgSeen.Store(false)
	}
	h.noteProgress()
}

// noteProgress wakes a write waiting in awaitQueue, or a flush.
func (h *handle) noteProgress() {
	select {
	case h.progress <- struct{}{}:
	default:
	}
}

// room makes sure that a commit of n bytes of memtable (as the pending
// batch counts them: Pebble's own reservation, see memEntryOverhead)
// cannot stall for ever, and must come right before that commit.
//
// Pebble stalls a commit that needs a new memtable while the memtables it
// holds (the mutable one and those queued for flushing) add up to
// MemTableStopWritesThreshold memtables, or level 0 has
// L0StopWritesThreshold sublevels, until a flush or compaction makes room
// — and only one that succeeds does, so on a full disk the commit would
// wait for as long as the disk is full, beyond the reach of the background
// error that says so. The store therefore stalls its commits itself: a
// commit goes ahead only while a memtable rotation, which a commit needs
// at most one of, cannot stall, and otherwise waits (awaitQueue) — for
// what Pebble would wait for, but the wait ends with the directory's
// error when a flush or compaction fails. The store is the database's
// only writer, so the memtables grow only through its commits, by at most
// one rotation per minMemTable bytes committed (a new memtable must fill
// before it is rotated): room looks at Pebble's metrics (DB.Metrics, a
// few microseconds) only when the commits since its last look could have
// rotated enough memtables to reach a stall. The threshold the store sets
// (memTableStopWrites) is one memtable above the two of Pebble's default,
// so that a commit goes ahead, like Pebble's, while a memtable is
// flushing; a write stalls when one more waits.
func (h *handle) room(n int64) error {
	large := n+memEmptySlack > int64(h.opts.MemTableSize/2)
	if !large && h.spent+n <= h.budget {
		h.spent += n
		return nil
	}
	m, err := h.awaitQueue()
	if err != nil {
		return err
	}
	h.spent, h.budget = n, 0
	if large {
		// Pebble queues a batch this large as a memtable of its own:
		// look again at the next commit.
		return nil
	}
	// Rotations that may come before a stall could: by memtable size,
	// and by level 0 (each flush adds at most one sublevel, and every
	// queued memtable and rotated one will be flushed).
	mts := int64(h.opts.MemTableSize)
	r := (memTableStopWrites*mts - int64(m.MemTable.Size) - 1) / mts
	r = min(r, int64(l0StopWrites)-int64(m.Levels[0].Sublevels)-m.MemTable.Count)
	if r > 0 {
		h.budget = r * (min(minMemTable, mts) - memEmptySlack)
	}
	return nil
}

// safeToRotate reports whether, by metrics m, Pebble would rotate the
// memtable without a stall.
func (h *handle) safeToRotate(m *pebbledb.Metrics) bool {
	return m.MemTable.Size < memTableStopWrites*h.opts.MemTableSize && m.Levels[0].Sublevels < l0StopWrites
}

// awaitQueue waits until a memtable rotation cannot stall (safeToRotate):
// the memtables add up to less than memTableStopWrites of
// Options.MemTableSize and level 0 has fewer than l0StopWrites sublevels.
// It returns the metrics that say so, or writable's error as soon as the
// directory refuses writes (a flush or compaction failed).
func (h *handle) awaitQueue() (*pebbledb.Metrics, error) {
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		select {
		case <-h.progress: // forget progress made before this look
		default:
		}
		if err := h.writable(); err != nil {
			return nil, err
		}
		if m := h.db.Metrics(); h.safeToRotate(m) {
			return m, nil
		}
		if t == nil {
			h.waits.Add(1)
			t = time.NewTimer(awaitPoll)
		} else {
			t.Reset(awaitPoll)
		}
		select {
		case <-h.progress:
		case <-t.C:
		}
	}
}

// writable returns nil if the database may be written, and otherwise an
// error wrapping ErrFailed that names the directory and the cause.
func (h *handle) writable() error {
	if p := h.fatal.Load(); p != nil {
		return fmt.Errorf("%w: %q: %w", ErrFailed, h.dir, *p)
	}
	if p := h.bgErr.Load(); p != nil {
		return fmt.Errorf("%w: %q: writes are refused until a flush succeeds again: %w", ErrFailed, h.dir, *p)
	}
	return nil
}

// guard runs a Pebble call on the operator's goroutine, turning a fatal
// error that Pebble reported through the store's logger (see storeLogger)
// into an error wrapping ErrFailed, after which the store stays failed.
func (h *handle) guard(fn func() error) error {
	if err := h.run(fn); err != nil {
		if fe, ok := err.(fatalError); ok {
			return fmt.Errorf("%w: %q: %w", ErrFailed, h.dir, fe)
		}
		return err
	}
	return nil
}

// run is guard without the wrapping: a fatal error that Pebble reported
// during fn, or before, is returned as the fatalError itself, whatever fn
// returned (Pebble goes on from a fatal error as if it had succeeded).
func (h *handle) run(fn func() error) error {
	err := fn()
	if p := h.fatal.Load(); p != nil {
		if fe, ok := (*p).(fatalError); ok {
			return fe
		}
	}
	return err
}

// ref takes a reference for a new Pebble snapshot; it fails if the
// database is closed.
func (h *handle) ref() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.refs++
	return true
}

// unref drops a reference; the last one closes the database.
func (h *handle) unref() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refs--
	if h.refs > 0 || h.closed {
		return nil
	}
	h.closed = true
	return h.closeLocked()
}

// closeLocked closes the database and cleans the directory up.
func (h *handle) closeLocked() error {
	var errs []error
	keep := !h.removeDir
	if keep && h.opts.Sync == SyncNone && h.fatal.Load() == nil {
		// Without a write-ahead log the memtables exist only in memory:
		// flush them so that the kept directory holds every write. A
		// flush waits for the disk, so it is skipped while flushes fail.
		if _, err := h.awaitQueue(); err != nil {
			errs = append(errs, fmt.Errorf("unflushed writes are lost: %w", err))
		} else if err := h.guard(h.flush); err != nil {
			errs = append(errs, fmt.Errorf("unflushed writes are lost: %w", err))
		}
	}
	if err := closeDB(h.db); err != nil {
		errs = append(errs, err)
	}
	h.db = nil
	switch {
	case h.removeDir:
		if err := h.fs.RemoveAll(h.dir); err != nil {
			errs = append(errs, fmt.Errorf("remove: %w", err))
		}
	case len(errs) == 0 && h.fatal.Load() == nil:
		// A clean close: the directory may be reused.
		if err := h.fs.Remove(h.fs.PathJoin(h.dir, openMarker)); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", openMarker, err))
		} else {
			errs = append(errs, syncDir(h.fs, h.dir))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pebble: close of working directory %q: %w", h.dir, err)
	}
	return nil
}

// flush flushes the memtables and waits for the flush to end, or to fail:
// Pebble retries a failed flush until it succeeds, so DB.Flush would wait
// for as long as the disk is full.
// The caller has made sure that the directory takes writes (awaitQueue).
func (h *handle) flush() error {
	done, err := h.db.AsyncFlush()
	if err != nil {
		return err
	}
	for {
		select {
		case <-done:
			return nil
		case <-h.progress:
			if err := h.writable(); err != nil {
				return fmt.Errorf("flush: %w", err)
			}
		}
	}
}

// closeDB closes db, turning a panic (Pebble panics on misuse) into an
// error.
func closeDB(db *pebbledb.DB) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("pebble: close: %v", r)
		}
	}()
	return db.Close()
}

// syncDir fsyncs directory dir of fs.
func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
