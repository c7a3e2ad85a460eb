package pebble

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

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
	// bgNote receives a value (without blocking) on every background
	// error, so that a flush can stop waiting for a disk that refuses it.
	bgNote chan struct{}
}

// openMarker is the file that says a working directory is open, or was not
// closed cleanly: created by New, removed by the final close of a kept
// directory.
const openMarker = "STATEGEN-OPEN"

// listener returns the event listener that tracks background errors.
func (h *handle) listener() *pebbledb.EventListener {
	return &pebbledb.EventListener{
		BackgroundError: func(err error) {
			h.bgErr.Store(&err)
			select {
			case h.bgNote <- struct{}{}:
			default:
			}
			if !h.bgSeen.Swap(true) && h.opts.Logger == nil {
				quietLogger{}.Errorf("working directory %q: background error: %v", h.dir, err)
			}
		},
		FlushEnd: func(info pebbledb.FlushInfo) {
			if info.Err == nil {
				h.bgErr.Store(nil)
				h.bgSeen.Store(false)
			}
		},
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
// error that Pebble reports through the logger (quietLogger panics with
// it) into an error, after which the store stays failed.
func (h *handle) guard(fn func() error) error {
	if err := h.run(fn); err != nil {
		if fe, ok := err.(fatalError); ok {
			return fmt.Errorf("%w: %q: %w", ErrFailed, h.dir, fe)
		}
		return err
	}
	return nil
}

// run is guard without the wrapping: a fatal error is returned as the
// fatalError itself (and recorded, so that the store stays failed).
func (h *handle) run(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			fe, ok := r.(fatalError)
			if !ok {
				panic(r)
			}
			var e error = fe
			h.fatal.Store(&e)
			err = fe
		}
	}()
	return fn()
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
		if err := h.writable(); err != nil {
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
func (h *handle) flush() error {
	for {
		select {
		case <-h.bgNote: // forget errors that came before this flush
			continue
		default:
		}
		break
	}
	done, err := h.db.AsyncFlush()
	if err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-h.bgNote:
		if p := h.bgErr.Load(); p != nil {
			return fmt.Errorf("flush: %w", *p)
		}
		return errors.New("flush: a background error occurred")
	}
}

// closeDB closes db, turning a panic (Pebble panics on misuse, and
// quietLogger on a fatal error) into an error.
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
