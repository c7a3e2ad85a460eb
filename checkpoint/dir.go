package checkpoint

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// Dir is the Storage of a local directory: checkpoint c's object o is the
// file <root>/<c>/<o>. An object is written to a temporary file
// <root>/<c>/.tmp-<random>-<o>, synced, and published by a link (or, where
// links are unsupported, a rename) to its name, after which the directory is
// synced: a crash leaves either the whole object or a temporary file, which
// Cleanup removes. Dir never overwrites a committed object.
type Dir struct {
	root string
}

var _ Storage = (*Dir)(nil)

// tmpPrefix begins the name of every temporary file. Valid object names
// never begin with '.', so temporary files cannot be mistaken for objects.
const tmpPrefix = ".tmp-"

// NewDir returns the Storage of directory root, creating it if needed.
func NewDir(root string) (*Dir, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: storage directory %q: %w", root, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("checkpoint: storage directory: %w", err)
	}
	return &Dir{root: abs}, nil
}

// Root returns the absolute path of d's directory.
func (d *Dir) Root() string { return d.root }

func (d *Dir) ckptDir(ckpt string) string { return filepath.Join(d.root, ckpt) }

func checkNames(ckpt, name string) error {
	if err := ValidateName(ckpt); err != nil {
		return fmt.Errorf("checkpoint name: %w", err)
	}
	if err := ValidateName(name); err != nil {
		return fmt.Errorf("object name: %w", err)
	}
	return nil
}

func notFound(ckpt, name string, cause error) error {
	return &FileError{Path: ckpt + "/" + name, Offset: -1, Reason: "object does not exist", Err: ErrNotFound, Cause: cause}
}

// Create implements Storage.
func (d *Dir) Create(ctx context.Context, ckpt, name string) (ObjectWriter, error) {
	if err := checkNames(ckpt, name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dir := d.ckptDir(ckpt)
	final := filepath.Join(dir, name)
	if _, err := os.Lstat(final); err == nil {
		return nil, fmt.Errorf("%w: %s/%s", ErrExist, ckpt, name)
	}
	switch err := os.Mkdir(dir, 0o755); {
	case err == nil:
		if err := syncDir(d.root); err != nil {
			return nil, err
		}
	case errors.Is(err, fs.ErrExist):
	default:
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(dir, tmpPrefix+hex.EncodeToString(rnd[:])+"-"+name)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return &dirWriter{ctx: ctx, f: f, tmp: tmp, final: final, dir: dir, path: ckpt + "/" + name}, nil
}

type dirWriter struct {
	ctx   context.Context
	f     *os.File
	tmp   string
	final string
	dir   string
	path  string

	// written counts the bytes written, synced those whose writeback has
	// been started.
	written, synced int64

	mu   sync.Mutex
	done bool
}

// bytesPerSync is how much a writer writes between two requests to the
// kernel to start writing back its dirty pages, so that the fsync of Commit
// finds little left to do (RocksDB's bytes_per_sync).
const bytesPerSync = 1 << 20

func (w *dirWriter) Write(p []byte) (int, error) {
	if err := w.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := w.f.Write(p)
	w.written += int64(n)
	if w.written-w.synced >= bytesPerSync {
		startWriteback(w.f, w.synced, w.written-w.synced)
		w.synced = w.written
	}
	return n, err
}

func (w *dirWriter) Commit() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return fmt.Errorf("checkpoint: %s: writer already committed or aborted", w.path)
	}
	w.done = true
	err := w.commit()
	if err != nil {
		_ = w.f.Close()
		_ = os.Remove(w.tmp)
	}
	return err
}

func (w *dirWriter) commit() error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("checkpoint: %s: sync: %w", w.path, err)
	}
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("checkpoint: %s: close: %w", w.path, err)
	}
	// A link publishes the file atomically and, unlike a rename, fails
	// rather than replacing an object another writer committed meanwhile.
	switch err := os.Link(w.tmp, w.final); {
	case err == nil:
		if err := os.Remove(w.tmp); err != nil {
			return w.unpublish(err)
		}
	case errors.Is(err, fs.ErrExist):
		return fmt.Errorf("%w: %s", ErrExist, w.path)
	case errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EMLINK):
		// A file system without hard links: rename, which checks
		// existence just before rather than atomically.
		if _, err := os.Lstat(w.final); err == nil {
			return fmt.Errorf("%w: %s", ErrExist, w.path)
		}
		if err := os.Rename(w.tmp, w.final); err != nil {
			return fmt.Errorf("checkpoint: %s: %w", w.path, err)
		}
	default:
		return fmt.Errorf("checkpoint: %s: %w", w.path, err)
	}
	if err := syncDirHook(w.dir); err != nil {
		return w.unpublish(err)
	}
	return nil
}

// unpublish takes back an object that became visible in a Commit that then
// failed (its directory could not be made durable), since a failed Commit
// must leave nothing visible; it returns the Commit's error.
func (w *dirWriter) unpublish(cause error) error {
	if err := os.Remove(w.final); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("checkpoint: %s: %w (and removing the published object: %v)", w.path, cause, err)
	}
	return fmt.Errorf("checkpoint: %s: %w", w.path, cause)
}

// syncDirHook is syncDir, replaceable by tests that make it fail.
var syncDirHook = syncDir

func (w *dirWriter) Abort() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return nil
	}
	w.done = true
	_ = w.f.Close()
	if err := os.Remove(w.tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("checkpoint: %s: abort: %w", w.path, err)
	}
	return nil
}

// syncDir makes the entries of directory dir durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("checkpoint: sync directory: %w", err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("checkpoint: sync directory %s: %w", dir, err)
	}
	return nil
}

// Open implements Storage.
func (d *Dir) Open(ctx context.Context, ckpt, name string) (Object, error) {
	if err := checkNames(ckpt, name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(d.ckptDir(ckpt), name))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, notFound(ckpt, name, err)
		}
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, notFound(ckpt, name, fmt.Errorf("%s is not a regular file", f.Name()))
	}
	return &dirObject{File: f, size: fi.Size()}, nil
}

type dirObject struct {
	*os.File
	size int64
}

func (o *dirObject) Size() int64 { return o.size }

// Stat implements Storage.
func (d *Dir) Stat(ctx context.Context, ckpt, name string) (ObjectInfo, error) {
	if err := checkNames(ckpt, name); err != nil {
		return ObjectInfo{}, err
	}
	if err := ctx.Err(); err != nil {
		return ObjectInfo{}, err
	}
	fi, err := os.Stat(filepath.Join(d.ckptDir(ckpt), name))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return ObjectInfo{}, notFound(ckpt, name, err)
		}
		return ObjectInfo{}, fmt.Errorf("checkpoint: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return ObjectInfo{}, notFound(ckpt, name, fmt.Errorf("not a regular file"))
	}
	return ObjectInfo{Name: name, Size: fi.Size()}, nil
}

// List implements Storage.
func (d *Dir) List(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(d.root)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && ValidateName(e.Name()) == nil {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// Objects implements Storage.
func (d *Dir) Objects(ctx context.Context, ckpt string) ([]ObjectInfo, error) {
	if err := ValidateName(ckpt); err != nil {
		return nil, fmt.Errorf("checkpoint name: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(d.ckptDir(ckpt))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	var out []ObjectInfo
	for _, e := range ents {
		if !e.Type().IsRegular() || ValidateName(e.Name()) != nil {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
		out = append(out, ObjectInfo{Name: e.Name(), Size: fi.Size()})
	}
	return out, nil
}

// Remove implements Storage.
func (d *Dir) Remove(ctx context.Context, ckpt, name string) error {
	if err := checkNames(ckpt, name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	dir := d.ckptDir(ckpt)
	if err := os.Remove(filepath.Join(dir, name)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("checkpoint: %w", err)
	}
	return syncDir(dir)
}

// RemoveIncomplete implements Storage: it removes the temporary files of
// ckpt.
func (d *Dir) RemoveIncomplete(ctx context.Context, ckpt string) error {
	if err := ValidateName(ckpt); err != nil {
		return fmt.Errorf("checkpoint name: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	dir := d.ckptDir(ckpt)
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("checkpoint: %w", err)
	}
	removed := false
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), tmpPrefix) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		removed = true
	}
	if removed {
		return syncDir(dir)
	}
	return nil
}

// Delete implements Storage.
func (d *Dir) Delete(ctx context.Context, ckpt string) error {
	if err := ValidateName(ckpt); err != nil {
		return fmt.Errorf("checkpoint name: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	dir := d.ckptDir(ckpt)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return syncDir(d.root)
}
