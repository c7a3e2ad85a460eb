package pebble_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stategen/stategen/backends/pebble"
	"github.com/stategen/stategen/runtime"
)

// Bad input: a working directory that is not empty, corrupted, held by
// another store, or on a full disk. Every error names the directory, and
// the store is either not opened (nothing left open, nothing of the
// caller's deleted) or usable.

const testMaxP = 128

var valueSpec = runtime.StateSpec{Name: "v", Kind: runtime.KindValue, Fingerprint: "fp"}

func key(i int) runtime.Key {
	return runtime.MakeKey(binary.BigEndian.AppendUint32(nil, uint32(i)), nil, testMaxP)
}

func mustNew(t *testing.T, o pebble.Options) *pebble.Store {
	t.Helper()
	s, err := pebble.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func valueState(t testing.TB, s *pebble.Store) runtime.ValueState {
	t.Helper()
	st, err := s.Register(valueSpec)
	if err != nil {
		t.Fatal(err)
	}
	return st.(runtime.ValueState)
}

func put(t *testing.T, vs runtime.ValueState, i int, v string) {
	t.Helper()
	if err := vs.Put(key(i), []byte(v)); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, vs runtime.ValueState, i int) (string, bool) {
	t.Helper()
	v, ok, err := vs.Get(key(i))
	if err != nil {
		t.Fatal(err)
	}
	return string(v), ok
}

// wantErr fails unless err wraps every target and mentions every string.
func wantErr(t *testing.T, what string, err error, targets []error, mentions ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	t.Logf("%s: %v", what, err)
	for _, target := range targets {
		if !errors.Is(err, target) {
			t.Fatalf("%s: error %q does not wrap %q", what, err, target)
		}
	}
	for _, m := range mentions {
		if !strings.Contains(err.Error(), m) {
			t.Fatalf("%s: error %q does not mention %q", what, err, m)
		}
	}
}

// writeClosed makes a store in dir of fs, writes entries 0..n-1 and closes
// it cleanly.
func writeClosed(t *testing.T, fs vfs.FS, dir string, n int) {
	t.Helper()
	s, err := pebble.New(pebble.Options{FS: fs, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	vs := valueState(t, s)
	for i := range n {
		put(t, vs, i, fmt.Sprint("v", i))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestNewRefusesNonEmptyDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "precious.txt"), []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := pebble.New(pebble.Options{Dir: dir})
	wantErr(t, "New on a directory holding a file", err, []error{pebble.ErrDirNotEmpty}, dir, "precious.txt")
	if b, err := os.ReadFile(filepath.Join(dir, "precious.txt")); err != nil || string(b) != "keep me" {
		t.Fatalf("the caller's file after a refused New: %q, %v", b, err)
	}
	// A store's own closed directory is refused too, by default.
	mem := vfs.NewMem()
	writeClosed(t, mem, "d", 3)
	_, err = pebble.New(pebble.Options{FS: mem, Dir: "d"})
	wantErr(t, "New on a closed store's directory without ReuseExisting", err, []error{pebble.ErrDirNotEmpty}, `"d"`)
}

func TestCorruptedDir(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(t *testing.T, dir string)
	}{
		{"manifest marker names a missing MANIFEST", func(t *testing.T, dir string) {
			remove(t, dir, "", "marker.manifest.")
			if err := os.WriteFile(filepath.Join(dir, "marker.manifest.000009.MANIFEST-000099"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"garbage CURRENT", func(t *testing.T, dir string) {
			// Pebble v2 names the current MANIFEST with a marker file; a
			// CURRENT file (of older formats) is read when there is none.
			remove(t, dir, "", "marker.manifest.")
			if err := os.WriteFile(filepath.Join(dir, "CURRENT"), []byte("\x00garbage\xff\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"garbage MANIFEST", func(t *testing.T, dir string) {
			overwrite(t, dir, "MANIFEST-", strings.Repeat("\xde\xad\xbe\xef", 64))
		}},
		{"truncated MANIFEST", func(t *testing.T, dir string) {
			overwrite(t, dir, "MANIFEST-", "\x01")
		}},
		{"garbage OPTIONS", func(t *testing.T, dir string) {
			overwrite(t, dir, "OPTIONS-", "[Options]\n  merger=someone.else\n")
		}},
		{"missing table", func(t *testing.T, dir string) {
			remove(t, dir, ".sst", "")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			writeClosed(t, vfs.Default, dir, 100)
			tc.corrupt(t, dir)
			before := listDir(t, dir)
			s, err := pebble.New(pebble.Options{Dir: dir, Existing: pebble.ReuseExisting})
			if err == nil {
				// Some damage only shows when the data is read: then the
				// read fails, naming the directory and never panicking.
				defer s.Close()
				vs := valueState(t, s)
				_, _, err = vs.Get(key(1))
				wantErr(t, "Get from a damaged directory", err, nil, "v")
				return
			}
			wantErr(t, "New on a damaged directory", err, nil, dir)
			if after := listDir(t, dir); after != before {
				t.Fatalf("a failed New changed the directory:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// overwrite replaces the content of the first file of dir whose name
// starts with prefix.
func overwrite(t *testing.T, dir, prefix, content string) {
	t.Helper()
	for _, e := range mustReadDir(t, dir) {
		if strings.HasPrefix(e, prefix) {
			if err := os.WriteFile(filepath.Join(dir, e), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no file %s* in %s: %v", prefix, dir, mustReadDir(t, dir))
}

// remove removes every file of dir whose name ends with suffix and starts
// with prefix.
func remove(t *testing.T, dir, suffix, prefix string) {
	t.Helper()
	n := 0
	for _, e := range mustReadDir(t, dir) {
		if strings.HasSuffix(e, suffix) && strings.HasPrefix(e, prefix) {
			if err := os.Remove(filepath.Join(dir, e)); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatalf("no file *%s in %s: %v", suffix, dir, mustReadDir(t, dir))
	}
}

func mustReadDir(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func listDir(t *testing.T, dir string) string {
	return strings.Join(mustReadDir(t, dir), " ")
}

func TestNotAStoreDir(t *testing.T) {
	// A Pebble database with the store's options but not written by a
	// store: refused, and left alone.
	dir := filepath.Join(t.TempDir(), "raw")
	po, err := pebble.Options{}.PebbleOptions()
	if err != nil {
		t.Fatal(err)
	}
	db, err := pebbledb.Open(dir, po)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set([]byte("someone else's key"), []byte("value"), pebbledb.NoSync); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil { // no write-ahead log: flush, or the key is lost
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = pebble.New(pebble.Options{Dir: dir, Existing: pebble.ReuseExisting})
	wantErr(t, "New on a foreign Pebble database", err, []error{pebble.ErrNotStoreDir}, dir)

	// A store's directory with another maxParallelism.
	mem := vfs.NewMem()
	writeClosed(t, mem, "d", 3)
	_, err = pebble.New(pebble.Options{FS: mem, Dir: "d", Existing: pebble.ReuseExisting, StoreConfig: runtime.StoreConfig{MaxParallelism: 64}})
	wantErr(t, "New with another maxParallelism", err, []error{pebble.ErrNotStoreDir, runtime.ErrMaxParallelismMismatch}, `"d"`, "128", "64")
	// The directory is intact: the right configuration opens it.
	s := mustNew(t, pebble.Options{FS: mem, Dir: "d", Existing: pebble.ReuseExisting})
	if v, ok := get(t, valueState(t, s), 2); !ok || v != "v2" {
		t.Fatalf("after a refused New, the store reads (%q, %v), want (v2, true)", v, ok)
	}
}

// TestOldLayoutVersionRefused: a working directory of layout version 1
// (length-prefixed keys, before storekit's framing) is refused with a
// remedy, never read with the wrong layout.
func TestOldLayoutVersionRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "v1")
	s := mustNew(t, pebble.Options{Dir: dir})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	po, err := pebble.Options{}.PebbleOptions()
	if err != nil {
		t.Fatal(err)
	}
	db, err := pebbledb.Open(dir, po)
	if err != nil {
		t.Fatal(err)
	}
	// The store metadata of version 1: version, maxParallelism 128, key groups [0, 128).
	if err := db.Set([]byte{0xff, 'c'}, []byte{1, 0x80, 1, 0, 0x80, 1}, pebbledb.NoSync); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(db.Flush(), db.Close()); err != nil {
		t.Fatal(err)
	}
	_, err = pebble.New(pebble.Options{Dir: dir, Existing: pebble.ReuseExisting})
	wantErr(t, "New on a directory of layout version 1", err, []error{pebble.ErrNotStoreDir}, "layout version 1", "version 2", "checkpoint")
}

func TestDirHeldByAnotherStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	a := mustNew(t, pebble.Options{Dir: dir})
	va := valueState(t, a)
	put(t, va, 1, "a")

	// Pebble's LOCK refuses a second store on the directory.
	_, err := pebble.New(pebble.Options{Dir: dir, Existing: pebble.ReuseExisting})
	wantErr(t, "New on a directory held by an open store", err, nil, dir, "lock")
	// With the default policy, the directory is simply not empty.
	_, err = pebble.New(pebble.Options{Dir: dir})
	wantErr(t, "New (default policy) on a directory held by an open store", err, []error{pebble.ErrDirNotEmpty}, dir)

	// The first store is unharmed, and once it is closed the directory
	// opens again.
	put(t, va, 2, "b")
	if v, ok := get(t, va, 1); !ok || v != "a" {
		t.Fatalf("the first store reads (%q, %v) after a refused New", v, ok)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b := mustNew(t, pebble.Options{Dir: dir, Existing: pebble.ReuseExisting})
	if v, ok := get(t, valueState(t, b), 2); !ok || v != "b" {
		t.Fatalf("reopened store reads (%q, %v), want (b, true)", v, ok)
	}
}

func TestReuseAfterCrashRefused(t *testing.T) {
	fs := vfs.NewCrashableMem()
	s := mustNew(t, pebble.Options{FS: fs, Dir: "d"})
	vs := valueState(t, s)
	for i := range 100 {
		put(t, vs, i, "x")
	}
	// The machine crashes: only what was synced survives.
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	_, err := pebble.New(pebble.Options{FS: crashed, Dir: "d", Existing: pebble.ReuseExisting})
	wantErr(t, "New on a crashed store's directory", err, []error{pebble.ErrUncleanDir}, `"d"`)
	// The refused directory is left as it was, still unclean.
	_, err = pebble.New(pebble.Options{FS: crashed, Dir: "d", Existing: pebble.ReuseExisting})
	wantErr(t, "a second New on a crashed store's directory", err, []error{pebble.ErrUncleanDir}, `"d"`)
}

// fullDisk is a file system whose writes fail with ENOSPC while full is
// on.
type fullDisk struct {
	*errorfs.FS
	full *errorfs.Toggle
}

func newFullDisk() fullDisk {
	tog := &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if takesSpace(op) {
			return syscall.ENOSPC
		}
		return nil
	})}
	return fullDisk{FS: errorfs.Wrap(vfs.NewMem(), tog), full: tog}
}

// takesSpace reports whether op is one a full disk refuses.
func takesSpace(op errorfs.Op) bool {
	switch op.Kind {
	case errorfs.OpCreate, errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFilePreallocate,
		errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo, errorfs.OpLink, errorfs.OpRename:
		return true
	}
	return false
}

// filledStore opens a store in directory "d" of fs, with 1 MiB
// memtables, and writes its first 1000 entries (fill); it returns the
// store, its value state and the number of entries written, once no flush
// or compaction is in progress: one that the test's full disk caught
// between its table and its MANIFEST write would fail the database for
// good (Pebble's MANIFEST errors are fatal), where the tests mean a flush
// that fails and can be retried.
func filledStore(t *testing.T, fs vfs.FS) (*pebble.Store, runtime.ValueState, int) {
	t.Helper()
	s := mustNew(t, pebble.Options{FS: fs, Dir: "d", MemTableSize: 1 << 20})
	vs := valueState(t, s)
	n, err := fill(vs, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); s.BackgroundWork() > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("flushes and compactions still in progress 30s after the fill: %d", s.BackgroundWork())
		}
	}
	return s, vs, n
}

// fill writes 1 KiB values from entry from on until a Put fails or limit
// entries are written, and returns the number written and the error.
func fill(vs runtime.ValueState, from, limit int) (int, error) {
	v := make([]byte, 1<<10)
	for i := from; i < from+limit; i++ {
		binary.LittleEndian.PutUint64(v, uint64(i))
		if err := vs.Put(key(i), v); err != nil {
			return i - from, err
		}
	}
	return limit, nil
}

func TestFullDiskDuringWrites(t *testing.T) {
	disk := newFullDisk()
	s, vs, n := filledStore(t, disk)
	disk.full.On()
	// Writes go on into memory until a flush fails; from then on they
	// are refused with an error naming the directory and the cause,
	// rather than stalling forever behind a flush that cannot succeed.
	var err error
	deadline := time.Now().Add(30 * time.Second)
	for err == nil && time.Now().Before(deadline) {
		var m int
		m, err = fill(vs, n, 256)
		n += m
		if err == nil {
			time.Sleep(time.Millisecond)
		}
	}
	wantErr(t, "Put on a full disk", err, []error{pebble.ErrFailed, syscall.ENOSPC}, `"d"`)
	if _, err := fill(vs, n, 1); !errors.Is(err, pebble.ErrFailed) {
		t.Fatalf("a second Put on a full disk: %v", err)
	}
	// CheckWrite refuses what a write would (timers skip the write of a
	// timer they know exists after asking it).
	if err := vs.(runtime.WriteChecker).CheckWrite(key(n)); !errors.Is(err, pebble.ErrFailed) {
		t.Fatalf("CheckWrite on a full disk: %v, want ErrFailed", err)
	}
	// Reads still work, and see every acknowledged write (those of the
	// pending batch too). A snapshot must hold the pending writes, which
	// cannot be committed while the disk refuses them: it fails, naming
	// the directory and the cause, rather than stalling or leaving them
	// out.
	checkFilled(t, vs, n)
	if snap, err := s.Snapshot(); err == nil {
		t.Fatal("Snapshot on a full disk with writes pending succeeded")
		snap.Release()
	} else {
		wantErr(t, "Snapshot on a full disk", err, []error{pebble.ErrFailed, syscall.ENOSPC}, `"d"`)
	}

	// Space comes back: the retried flush succeeds and writes resume.
	disk.full.Off()
	n = resumeWrites(t, vs, n)
	checkFilled(t, vs, n)
	// The snapshot taken now holds every acknowledged write.
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot after the disk recovered: %v", err)
	}
	if got := countEntries(t, snap, valueSpec.Name); got != n {
		t.Fatalf("the snapshot after the disk recovered holds %d entries, %d were acknowledged", got, n)
	}
	if err := snap.Release(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close after the disk recovered: %v", err)
	}
}

// heldDisk is a file system on which the disk fills up in the middle of
// a write: while held is on, writes wait until hold is closed and then
// fail with ENOSPC, as they do while full is on.
type heldDisk struct {
	*errorfs.FS
	held    atomic.Bool
	hold    chan struct{}
	waiting atomic.Int32 // writes waiting on hold
	full    atomic.Bool
}

func newHeldDisk() *heldDisk {
	d := &heldDisk{hold: make(chan struct{})}
	d.FS = errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !takesSpace(op) {
			return nil
		}
		if d.held.Load() {
			d.waiting.Add(1)
			<-d.hold
			return syscall.ENOSPC
		}
		if d.full.Load() {
			return syscall.ENOSPC
		}
		return nil
	}))
	return d
}

// A flush that is under way when the disk fills up fails only after the
// memtables have filled: the writes that then wait for it must end with
// the directory's error when it fails, not wait for as long as the disk
// is full (Pebble's own write stall, which only a successful flush ends).
func TestDiskFillsUpDuringAFlush(t *testing.T) {
	disk := newHeldDisk()
	s, vs, n := filledStore(t, disk)
	disk.full.Store(true)
	disk.held.Store(true)
	var written atomic.Int64
	done := make(chan error, 1)
	go func() {
		for {
			m, err := fill(vs, n+int(written.Load()), 64)
			written.Add(int64(m))
			if err != nil {
				done <- err
				return
			}
		}
	}()
	// Wait for a flush to hang on the disk and for the writes to stop
	// behind it: the memtables are full.
	deadline := time.Now().Add(30 * time.Second)
	for last, since := int64(-1), time.Now(); ; time.Sleep(10 * time.Millisecond) {
		if w := written.Load(); w != last {
			last, since = w, time.Now()
		}
		if disk.waiting.Load() > 0 && time.Since(since) > 200*time.Millisecond {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("a write failed before the flush did: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s, %d writes waiting on the disk and %d entries written since", disk.waiting.Load(), written.Load())
		}
	}
	// The flush fails: the waiting write fails with it.
	disk.held.Store(false)
	close(disk.hold)
	select {
	case err := <-done:
		wantErr(t, "a write waiting for a flush that failed", err, []error{pebble.ErrFailed, syscall.ENOSPC}, `"d"`)
	case <-time.After(30 * time.Second):
		disk.full.Store(false) // let the stalled write go on
		t.Fatal("a write waited 30s for a flush that failed")
	}
	n += int(written.Load())
	checkFilled(t, vs, n)
	// Space comes back: writes resume and every acknowledged one is read.
	disk.full.Store(false)
	n = resumeWrites(t, vs, n)
	checkFilled(t, vs, n)
	if err := s.Close(); err != nil {
		t.Fatalf("Close after the disk recovered: %v", err)
	}
}

// The store waits for flushes itself (handle.room), so that Pebble never
// stalls a commit, on a disk that flushes slower than the store writes:
// with and without a write-ahead log, for single writes, batches, Clear's
// range deletions and Restore's batches.
func TestStoreWaitsInsteadOfPebble(t *testing.T) {
	for _, sync := range []pebble.SyncPolicy{pebble.SyncNone, pebble.SyncWAL} {
		t.Run(fmt.Sprint("sync=", sync), func(t *testing.T) {
			slow := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
				if op.Kind == errorfs.OpFileWrite && strings.HasSuffix(op.Path, ".sst") {
					time.Sleep(2 * time.Millisecond)
				}
				return nil
			}))
			s := mustNew(t, pebble.Options{FS: slow, Dir: "d", MemTableSize: 1 << 20, Sync: sync})
			vs := valueState(t, s)
			const n = 12000
			if _, err := fill(vs, 0, n); err != nil {
				t.Fatal(err)
			}
			checkFilled(t, vs, n)
			snap, err := s.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			for i := range n {
				if err := vs.Clear(key(i)); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Restore(snap); err != nil {
				t.Fatal(err)
			}
			if err := snap.Release(); err != nil {
				t.Fatal(err)
			}
			checkFilled(t, vs, n)
			waits, stalls := s.Stalls()
			if stalls != 0 {
				t.Errorf("Pebble stalled %d commits (the store waited %d times)", stalls, waits)
			}
			if waits == 0 {
				t.Errorf("the store never waited for a flush: the test does not fill the memtables faster than the disk flushes them")
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A fatal error of Pebble's on one of its background goroutines — a
// MANIFEST write that fails after a flush wrote its table — fails the
// store (its writes are refused, its Close reports it) rather than the
// process.
func TestManifestWriteFails(t *testing.T) {
	var failing atomic.Bool
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if failing.Load() && strings.Contains(op.Path, "MANIFEST") && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return syscall.EIO
		}
		return nil
	}))
	s := mustNew(t, pebble.Options{FS: fs, Dir: "d", MemTableSize: 1 << 20})
	vs := valueState(t, s)
	failing.Store(true)
	var err error
	deadline := time.Now().Add(30 * time.Second)
	for n := 0; err == nil && time.Now().Before(deadline); n += 256 {
		_, err = fill(vs, n, 256)
	}
	wantErr(t, "Put after a failed MANIFEST write", err, []error{pebble.ErrFailed, syscall.EIO}, `"d"`, "MANIFEST")
	failing.Store(false)
	if err := s.Close(); !errors.Is(err, pebble.ErrFailed) {
		t.Fatalf("Close after a failed MANIFEST write: %v, want ErrFailed", err)
	}
}

// resumeWrites writes entry n once the disk has room again (a flush has
// succeeded), within 30s, and returns the number of entries written.
func resumeWrites(t *testing.T, vs runtime.ValueState, n int) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, err := fill(vs, n, 1)
		n += m
		if err == nil {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("writes still fail 30s after the disk has room again: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func checkFilled(t *testing.T, vs runtime.ValueState, n int) {
	t.Helper()
	for _, i := range []int{0, n / 2, n - 1} {
		v, ok, err := vs.Get(key(i))
		if err != nil || !ok || binary.LittleEndian.Uint64(v) != uint64(i) {
			t.Fatalf("entry %d of %d acknowledged: Get = (%x..., %v, %v)", i, n, v[:min(8, len(v))], ok, err)
		}
	}
}

func TestCloseOnFullDisk(t *testing.T) {
	disk := newFullDisk()
	s, err := pebble.New(pebble.Options{FS: disk, Dir: "d", MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	vs := valueState(t, s)
	if _, err := fill(vs, 0, 100); err != nil {
		t.Fatal(err)
	}
	disk.full.On()
	// Close must flush the memtable to keep the directory: it cannot, and
	// says so, without hanging; the store is closed.
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Close on a full disk hangs")
	}
	wantErr(t, "Close on a full disk", err, nil, `"d"`, "no space left")
	if _, err := s.Snapshot(); !errors.Is(err, runtime.ErrClosed) {
		t.Fatalf("Snapshot after a failed Close: %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	// The directory was not closed cleanly: it is not reused.
	disk.full.Off()
	_, err = pebble.New(pebble.Options{FS: disk, Dir: "d", Existing: pebble.ReuseExisting})
	wantErr(t, "New on a directory whose Close failed", err, []error{pebble.ErrUncleanDir}, `"d"`)
}

func TestFullDiskWithWAL(t *testing.T) {
	disk := newFullDisk()
	s, err := pebble.New(pebble.Options{FS: disk, Dir: "d", Sync: pebble.SyncAlways})
	if err != nil {
		t.Fatal(err)
	}
	vs := valueState(t, s)
	put(t, vs, 1, "before")
	disk.full.On()
	// A write whose log record cannot be written is fatal to Pebble: the
	// store reports it and stays failed.
	err = vs.Put(key(2), []byte("x"))
	wantErr(t, "Put with a write-ahead log on a full disk", err, []error{pebble.ErrFailed}, `"d"`)
	disk.full.Off()
	err = vs.Put(key(3), []byte("x"))
	wantErr(t, "Put after a fatal error", err, []error{pebble.ErrFailed}, `"d"`)
	if v, ok := get(t, vs, 1); !ok || v != "before" {
		t.Fatalf("Get after a fatal error: (%q, %v)", v, ok)
	}
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Close after a fatal error hangs")
	}
}

func TestNewOnFullDisk(t *testing.T) {
	disk := newFullDisk()
	disk.full.On()
	_, err := pebble.New(pebble.Options{FS: disk, Dir: "d"})
	wantErr(t, "New on a full disk", err, []error{syscall.ENOSPC}, `"d"`)
	disk.full.Off()
	// Nothing was left open or half-made: the directory opens now.
	s := mustNew(t, pebble.Options{FS: disk, Dir: "d", Existing: pebble.ReuseExisting})
	put(t, valueState(t, s), 1, "x")
}

// countEntries returns the number of entries of state name in every key
// group of view v.
func countEntries(t *testing.T, v runtime.View, name string) int {
	t.Helper()
	n := 0
	for kg := range v.KeyGroups().All() {
		if err := v.Scan(name, kg, func(runtime.Entry) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	return n
}
