package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"sync"
	"sync/atomic"
)

// LocalCopy keeps a copy of the data files one instance writes on a
// storage of its own, normally a Dir on the instance's local disk, so that
// the instance's next restore reads them there instead of from the remote
// storage its checkpoints live on — Flink's local recovery. The remote
// storage stays the truth: a checkpoint exists, completes and is restored
// from exactly as without a LocalCopy, and the local copy only spares the
// download of files it holds.
//
// Storage returns the remote storage with the local copy in front. Every
// data file created through it is written to both (the metadata, which the
// coordinator writes, only to the remote storage). The remote commit
// decides the write; the local copy is best effort — if it fails (a full
// local disk), the write goes on remote-only and Stats counts the failure.
// A local copy is committed with a record of its size and CRC-32C.
//
// Open of a data file tries the local copy first, and uses it only when it
// is verified: its bytes match the recorded CRC-32C, and its size and
// header (which holds the random tag of the write) match the remote
// object's, read with one small read. A local copy that fails either check
// (damaged, or left over from another job that reused the checkpoint's
// names) is removed and the remote object is opened instead; a file the
// remote storage no longer has is never served from the local copy. A
// restore through Storage therefore reads locally exactly the files of its
// key groups that this instance wrote — all of them when its key groups
// did not move — and the rest remotely, with the format's own checks
// (sizes, tags, block CRCs) on both.
//
// Retain bounds the copy to what a restore can need: the files of the
// last completed checkpoint, its chain included (see Tracker); the driver
// calls it on every completion (driver.InstanceOptions.LocalCopy).
//
// A LocalCopy is safe for concurrent use.
type LocalCopy struct {
	local Storage

	mu       sync.Mutex
	created  map[string]uint64 // checkpoint → when the first object was created through l
	seq      uint64
	retained uint64          // the creation of the checkpoint last retained
	verified map[string]bool // "ckpt/name" verified in this process

	hits, misses, rejected, writeErrors atomic.Int64
	lastErr                             atomic.Pointer[error]
}

// LocalCopyStats count what a LocalCopy did.
type LocalCopyStats struct {
	// Hits counts the data files opened from the local copy, Misses those
	// opened remotely because the copy had none, Rejected those opened
	// remotely because the local copy failed verification.
	Hits, Misses, Rejected int64
	// WriteErrors counts the local copies that could not be written (the
	// checkpoints themselves were written remotely), and LastWriteError is
	// the latest one's error.
	WriteErrors    int64
	LastWriteError error
}

// localSumSuffix ends the name of the record of a local copy's size and
// CRC-32C, beside the copy itself.
const localSumSuffix = ".local-sum"

// NewLocalCopy returns a LocalCopy on local, normally a Dir on the
// instance's own disk, used by this instance alone.
func NewLocalCopy(local Storage) (*LocalCopy, error) {
	if local == nil {
		return nil, errors.New("checkpoint: NewLocalCopy of a nil storage")
	}
	return &LocalCopy{local: local, created: make(map[string]uint64), verified: make(map[string]bool)}, nil
}

// Local returns the storage that holds the copies.
func (l *LocalCopy) Local() Storage { return l.local }

// Stats returns what l did so far.
func (l *LocalCopy) Stats() LocalCopyStats {
	s := LocalCopyStats{Hits: l.hits.Load(), Misses: l.misses.Load(), Rejected: l.rejected.Load(), WriteErrors: l.writeErrors.Load()}
	if p := l.lastErr.Load(); p != nil {
		s.LastWriteError = *p
	}
	return s
}

// Storage returns remote with l in front of it (see LocalCopy).
func (l *LocalCopy) Storage(remote Storage) Storage { return &localStorage{l: l, remote: remote} }

// Retain keeps the local copies of the files that instance snapshot is,
// written in checkpoint ckpt, reads — its own file and every file of its
// chain — and removes every other, but for those of checkpoints created
// through l after ckpt (still being written). Call it when ckpt completes;
// a Retain of a checkpoint older than one retained already, or of one not
// written through l, does nothing.
func (l *LocalCopy) Retain(ctx context.Context, ckpt string, is InstanceSnapshot) error {
	keep := map[string]map[string]bool{ckpt: {is.File.Name: true}}
	for _, ref := range is.Base {
		if keep[ref.Checkpoint] == nil {
			keep[ref.Checkpoint] = make(map[string]bool)
		}
		keep[ref.Checkpoint][ref.File.Name] = true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	seq, ok := l.created[ckpt]
	if !ok || seq < l.retained {
		// A later checkpoint was retained already — and, if it did not
		// need ckpt's files, dropped ckpt's record: a Retain that comes
		// late (on a goroutine of its own, as the driver's does) must not
		// take ckpt for the newest and trim what came after it. A
		// checkpoint never written through l has nothing here to keep.
		return nil
	}
	l.retained = seq
	all, err := l.local.List(ctx)
	if err != nil {
		return fmt.Errorf("checkpoint: local copy: %w", err)
	}
	var errs []error
	for _, c := range all {
		if s, ok := l.created[c]; ok && s > seq {
			continue // newer than ckpt: being written
		}
		names := keep[c]
		if names == nil {
			if err := l.local.Delete(ctx, c); err != nil {
				errs = append(errs, err)
				continue
			}
			delete(l.created, c)
			l.forget(c, "")
			continue
		}
		objs, err := l.local.Objects(ctx, c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, o := range objs {
			if names[strings.TrimSuffix(o.Name, localSumSuffix)] {
				continue
			}
			if err := l.local.Remove(ctx, c, o.Name); err != nil {
				errs = append(errs, err)
			}
			l.forget(c, o.Name)
		}
		if err := l.local.RemoveIncomplete(ctx, c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("checkpoint: local copy: %w", err)
	}
	return nil
}

// forget drops what l verified of ckpt's object name (of all of ckpt's if
// name is ""). l.mu is held.
func (l *LocalCopy) forget(ckpt, name string) {
	if name != "" {
		delete(l.verified, ckpt+"/"+name)
		return
	}
	for k := range l.verified {
		if strings.HasPrefix(k, ckpt+"/") {
			delete(l.verified, k)
		}
	}
}

// failed records that a local copy could not be written.
func (l *LocalCopy) failed(ckpt, name string, err error) {
	l.writeErrors.Add(1)
	err = fmt.Errorf("checkpoint: local copy of %s/%s: %w", ckpt, name, err)
	l.lastErr.Store(&err)
}

// remove removes the local copy of ckpt/name and its record.
func (l *LocalCopy) remove(ctx context.Context, ckpt, name string) {
	_ = l.local.Remove(ctx, ckpt, name)
	_ = l.local.Remove(ctx, ckpt, name+localSumSuffix)
	l.mu.Lock()
	l.forget(ckpt, name)
	l.mu.Unlock()
}

// isDataFile reports whether object name is one the local copy keeps:
// every object but the metadata (and the copies' own records).
func isDataFile(name string) bool {
	return name != MetadataName && !strings.HasSuffix(name, localSumSuffix)
}

// localStorage is LocalCopy.Storage: remote with the copy in front.
type localStorage struct {
	l      *LocalCopy
	remote Storage
}

// Create implements Storage: a data file is written remotely and locally.
func (s *localStorage) Create(ctx context.Context, ckpt, name string) (ObjectWriter, error) {
	w, err := s.remote.Create(ctx, ckpt, name)
	if err != nil || !isDataFile(name) {
		return w, err
	}
	l := s.l
	l.mu.Lock()
	if _, ok := l.created[ckpt]; !ok {
		l.seq++
		l.created[ckpt] = l.seq
	}
	l.mu.Unlock()
	// A copy left from an earlier write of this name is not this write's.
	l.remove(ctx, ckpt, name)
	lw, err := l.local.Create(ctx, ckpt, name)
	if err != nil {
		l.failed(ckpt, name, err)
		lw = nil
	}
	return &teeWriter{ctx: ctx, l: l, ckpt: ckpt, name: name, remote: w, local: lw}, nil
}

// teeWriter writes a data file remotely and, as long as that works,
// locally.
type teeWriter struct {
	ctx        context.Context
	l          *LocalCopy
	ckpt, name string
	remote     ObjectWriter
	local      ObjectWriter // nil once the local copy failed
	size       int64
	crc        uint32
}

func (w *teeWriter) Write(p []byte) (int, error) {
	n, err := w.remote.Write(p)
	if w.local != nil && n > 0 {
		if _, lerr := w.local.Write(p[:n]); lerr != nil {
			w.dropLocal(lerr)
		} else {
			w.size += int64(n)
			w.crc = crc32.Update(w.crc, castagnoli, p[:n])
		}
	}
	return n, err
}

func (w *teeWriter) dropLocal(err error) {
	_ = w.local.Abort()
	w.local = nil
	w.l.failed(w.ckpt, w.name, err)
}

// Commit commits the remote object, then the local copy and its record.
func (w *teeWriter) Commit() error {
	if err := w.remote.Commit(); err != nil {
		if w.local != nil {
			_ = w.local.Abort()
			w.local = nil
		}
		return err
	}
	if w.local == nil {
		return nil
	}
	lw := w.local
	w.local = nil
	if err := lw.Commit(); err != nil {
		w.l.failed(w.ckpt, w.name, err)
		return nil
	}
	sw, err := w.l.local.Create(w.ctx, w.ckpt, w.name+localSumSuffix)
	if err == nil {
		_, err = fmt.Fprintf(sw, "%d %08x\n", w.size, w.crc)
		if err == nil {
			err = sw.Commit()
		} else {
			_ = sw.Abort()
		}
	}
	if err != nil {
		w.l.failed(w.ckpt, w.name, err)
		w.l.remove(w.ctx, w.ckpt, w.name)
	}
	return nil
}

func (w *teeWriter) Abort() error {
	if w.local != nil {
		_ = w.local.Abort()
		w.local = nil
	}
	return w.remote.Abort()
}

// Open implements Storage: a data file from the local copy if it is
// verified, from remote otherwise.
func (s *localStorage) Open(ctx context.Context, ckpt, name string) (Object, error) {
	if !isDataFile(name) {
		return s.remote.Open(ctx, ckpt, name)
	}
	l := s.l
	lo, err := l.local.Open(ctx, ckpt, name)
	if err != nil {
		l.misses.Add(1)
		return s.remote.Open(ctx, ckpt, name)
	}
	ok, err := s.verify(ctx, ckpt, name, lo)
	if err != nil {
		_ = lo.Close()
		return nil, err
	}
	if !ok {
		_ = lo.Close()
		l.rejected.Add(1)
		l.remove(ctx, ckpt, name)
		return s.remote.Open(ctx, ckpt, name)
	}
	l.hits.Add(1)
	return lo, nil
}

// verify reports whether local copy lo of ckpt/name may be read for the
// remote object: its bytes match its record, and its size and header the
// remote object's. An error is the remote storage's: the object is gone,
// or cannot be read.
func (s *localStorage) verify(ctx context.Context, ckpt, name string, lo Object) (bool, error) {
	key := ckpt + "/" + name
	s.l.mu.Lock()
	done := s.l.verified[key]
	s.l.mu.Unlock()
	ro, err := s.remote.Open(ctx, ckpt, name)
	if err != nil {
		return false, err
	}
	defer ro.Close()
	if ro.Size() != lo.Size() {
		return false, nil
	}
	var rh, lh [headerSize]byte
	n := min(int64(headerSize), lo.Size())
	// ReadAt may report io.EOF with every byte read, at the object's end.
	if k, err := ro.ReadAt(rh[:n], 0); int64(k) < n {
		return false, fmt.Errorf("checkpoint: %s/%s: reading the header: %w", ckpt, name, err)
	}
	if k, _ := lo.ReadAt(lh[:n], 0); int64(k) < n || !bytes.Equal(rh[:n], lh[:n]) {
		return false, nil
	}
	if done {
		return true, nil
	}
	size, crc, ok := s.readSum(ctx, ckpt, name)
	if !ok || size != lo.Size() {
		return false, nil
	}
	h := crc32.New(castagnoli)
	if _, err := io.Copy(h, io.NewSectionReader(lo, 0, lo.Size())); err != nil || h.Sum32() != crc {
		return false, nil
	}
	s.l.mu.Lock()
	s.l.verified[key] = true
	s.l.mu.Unlock()
	return true, nil
}

// readSum reads the record of the local copy of ckpt/name.
func (s *localStorage) readSum(ctx context.Context, ckpt, name string) (size int64, crc uint32, ok bool) {
	o, err := s.l.local.Open(ctx, ckpt, name+localSumSuffix)
	if err != nil {
		return 0, 0, false
	}
	defer o.Close()
	if o.Size() > 64 {
		return 0, 0, false
	}
	b := make([]byte, o.Size())
	if _, err := o.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return 0, 0, false
	}
	if n, err := fmt.Sscanf(string(b), "%d %08x\n", &size, &crc); err != nil || n != 2 {
		return 0, 0, false
	}
	return size, crc, true
}

// Stat implements Storage: the remote object's.
func (s *localStorage) Stat(ctx context.Context, ckpt, name string) (ObjectInfo, error) {
	return s.remote.Stat(ctx, ckpt, name)
}

// List implements Storage: the remote storage's.
func (s *localStorage) List(ctx context.Context) ([]string, error) { return s.remote.List(ctx) }

// Objects implements Storage: the remote storage's.
func (s *localStorage) Objects(ctx context.Context, ckpt string) ([]ObjectInfo, error) {
	return s.remote.Objects(ctx, ckpt)
}

// Remove implements Storage: the remote object, and its local copy.
func (s *localStorage) Remove(ctx context.Context, ckpt, name string) error {
	if err := s.remote.Remove(ctx, ckpt, name); err != nil {
		return err
	}
	if isDataFile(name) {
		s.l.remove(ctx, ckpt, name)
	}
	return nil
}

// RemoveIncomplete implements Storage, remotely and locally.
func (s *localStorage) RemoveIncomplete(ctx context.Context, ckpt string) error {
	if err := s.remote.RemoveIncomplete(ctx, ckpt); err != nil {
		return err
	}
	_ = s.l.local.RemoveIncomplete(ctx, ckpt)
	return nil
}

// Delete implements Storage: the remote checkpoint's data, and the local
// copies of its files.
func (s *localStorage) Delete(ctx context.Context, ckpt string) error {
	if err := s.remote.Delete(ctx, ckpt); err != nil {
		return err
	}
	_ = s.l.local.Delete(ctx, ckpt)
	s.l.mu.Lock()
	delete(s.l.created, ckpt)
	s.l.forget(ckpt, "")
	s.l.mu.Unlock()
	return nil
}
