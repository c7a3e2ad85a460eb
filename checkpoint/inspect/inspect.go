// Package inspect reads committed checkpoints offline, without a running
// job and without a backend: the seed of a State Processor API.
//
// Open a checkpoint (Open for a local directory, OpenStorage for any
// checkpoint.Storage), then read a state's entries as bytes (Entries), or
// decoded with the codecs stategen generated for the job (Read, and the
// per-kind helpers Values, Lists, Maps and SubKeyedValues, which take the
// same descriptors the job's handles are made from and check the state's
// kind and schema fingerprint first; a checkpoint of an earlier version of
// the job, whose schema has changed since, is migrated to the descriptor's
// schema by the rules a restore applies). Dump writes a state as JSON lines,
// with keys and values in hex unless the caller supplies a Decoder; Verify
// checks every byte of every file and reports its progress.
//
// Reading goes through checkpoint.Reader and checkpoint.View, so every
// block read is checksummed and every length bounded: a damaged checkpoint
// gives a *checkpoint.FileError naming the file, never a panic or garbage.
//
// The typed readers take the descriptors the generated code exports: for a
// state struct ClickState, DescribeClickState returns one per state, with
// the codecs of its types wherever they are declared.
//
//	c, err := inspect.Open(ctx, "/var/lib/job/checkpoints", "42")
//	users, err := inspect.Values(ctx, c, "clickstream", pipeline.DescribeClickState().Users)
package inspect

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/internal/tick"
	"github.com/stategen/stategen/runtime"
)

// ErrState reports a state that the checkpoint does not hold under that
// name, or holds with another kind, sub-keying or schema fingerprint than
// the caller's descriptor.
var ErrState = errors.New("inspect: state mismatch")

// Checkpoint is a committed checkpoint opened for reading. Its methods may
// be called from one goroutine at a time.
type Checkpoint struct {
	name    string
	storage *countingStorage
	reader  *checkpoint.Reader
}

// Open opens checkpoint ckpt of the checkpoint directory dir. ckpt is a
// checkpoint's name (such as "chk-00000000000000000042", or a savepoint's
// directory name) or its numeric id ("42").
func Open(ctx context.Context, dir, ckpt string) (*Checkpoint, error) {
	d, err := checkpoint.NewDir(dir)
	if err != nil {
		return nil, err
	}
	return OpenStorage(ctx, d, ckpt)
}

// Split splits a command-line checkpoint path, DIR/ID, into the checkpoint
// directory and the checkpoint's name or id.
func Split(path string) (dir, ckpt string) {
	path = filepath.Clean(path)
	return filepath.Dir(path), filepath.Base(path)
}

// OpenStorage opens checkpoint ckpt (a name or a numeric id) of s.
func OpenStorage(ctx context.Context, s checkpoint.Storage, ckpt string) (*Checkpoint, error) {
	if id, err := strconv.ParseUint(ckpt, 10, 64); err == nil {
		ckpt = checkpoint.CheckpointName(id)
	}
	if err := checkpoint.ValidateName(ckpt); err != nil {
		return nil, err
	}
	cs := &countingStorage{Storage: s}
	r, err := checkpoint.Open(ctx, cs, ckpt)
	if err != nil {
		return nil, err
	}
	return &Checkpoint{name: ckpt, storage: cs, reader: r}, nil
}

// Name returns the checkpoint's name in its storage.
func (c *Checkpoint) Name() string { return c.name }

// Metadata returns the checkpoint's metadata. The caller must not modify it.
func (c *Checkpoint) Metadata() *checkpoint.Metadata { return c.reader.Metadata() }

// Size returns the total size of the checkpoint's data files in bytes.
func (c *Checkpoint) Size() int64 { return DataSize(c.Metadata()) }

// FullSize returns the size of the whole state c holds: its own data
// files and the files of earlier checkpoints its chains reference.
func (c *Checkpoint) FullSize() int64 { return FullSize(c.Metadata()) }

// FullSize returns the total size of the data files m names, its own and
// those its chains reference (checkpoint.Instance.Base): what a restore of
// every instance reads. For a checkpoint that is not incremental it is
// DataSize.
func FullSize(m *checkpoint.Metadata) int64 {
	n := DataSize(m)
	for _, op := range m.Operators {
		for _, in := range op.Instances {
			for _, ref := range in.Base {
				n += ref.File.Size
			}
		}
	}
	return n
}

// DataSize returns the total size of the data files m names and owns:
// what the checkpoint wrote (the files of earlier checkpoints it
// references aside; see FullSize).
func DataSize(m *checkpoint.Metadata) int64 {
	var n int64
	for _, op := range m.Operators {
		for _, in := range op.Instances {
			n += in.File.Size
		}
	}
	return n
}

// Progress describes a Verify in progress.
type Progress struct {
	// BytesRead is the number of bytes read so far. Verify reads each file
	// twice: once for its whole-file checksum, once block by block.
	BytesRead int64
	// Files is the number of data files; File the 1-based number of the
	// file being read, and FileName its name.
	Files, File int
	FileName    string
	// Entries counts the entries done so far (Dump), of TotalEntries
	// (from the files' indexes); both are zero for Verify.
	Entries, TotalEntries int64
}

// Verify reads every data file of the checkpoint completely and checks
// every checksum and every entry (checkpoint.Reader.Verify). It returns
// the first fault, a *checkpoint.FileError naming the file. If progress is
// not nil, it is called about once per second from another goroutine
// while Verify runs.
func (c *Checkpoint) Verify(ctx context.Context, progress func(Progress)) error {
	if progress == nil {
		return c.reader.Verify(ctx)
	}
	stop := c.report(progress, nil, 0)
	err := c.reader.Verify(ctx)
	stop()
	return err
}

// report calls progress about once a second, from a goroutine of its own,
// with the bytes read since and the entries done (entries, if not nil, of
// total), until the function it returns is called, which reports once
// more, the work done.
func (c *Checkpoint) report(progress func(Progress), entries *atomic.Int64, total int64) func() {
	files := 0
	for _, op := range c.Metadata().Operators {
		files += len(op.Instances)
	}
	c.storage.reset()
	now := func() Progress {
		n, name, read := c.storage.status()
		p := Progress{BytesRead: read, Files: files, File: n, FileName: name, TotalEntries: total}
		if entries != nil {
			p.Entries = entries.Load()
		}
		return p
	}
	return tick.Every(time.Second, func() { progress(now()) })
}

// StateEntries returns the number of entries of state in operator, from
// the files' indexes, without reading a block.
func (c *Checkpoint) StateEntries(ctx context.Context, operator, state string) (int64, error) {
	if _, err := c.State(operator, state); err != nil {
		return 0, err
	}
	op, _ := c.Metadata().Operator(operator)
	v, err := c.reader.View(ctx, operator, op.KeyGroups)
	if err != nil {
		return 0, err
	}
	defer v.Close()
	var total int64
	for kg := range op.KeyGroups.All() {
		n, _ := v.Entries(state, kg)
		total += n
	}
	return total, nil
}

// countingStorage counts the bytes read through it and remembers the data
// object being read, for Verify's progress.
type countingStorage struct {
	checkpoint.Storage
	read atomic.Int64
	mu   sync.Mutex
	n    int
	name string
}

func (s *countingStorage) reset() {
	s.read.Store(0)
	s.mu.Lock()
	s.n, s.name = 0, ""
	s.mu.Unlock()
}

func (s *countingStorage) status() (n int, name string, read int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, s.name, s.read.Load()
}

// Open implements checkpoint.Storage.
func (s *countingStorage) Open(ctx context.Context, ckpt, name string) (checkpoint.Object, error) {
	o, err := s.Storage.Open(ctx, ckpt, name)
	if err != nil {
		return nil, err
	}
	if name != checkpoint.MetadataName {
		s.mu.Lock()
		if name != s.name {
			s.n++
			s.name = name
		}
		s.mu.Unlock()
	}
	return &countingObject{Object: o, read: &s.read}, nil
}

type countingObject struct {
	checkpoint.Object
	read *atomic.Int64
}

// ReadAt implements io.ReaderAt.
func (o *countingObject) ReadAt(p []byte, off int64) (int, error) {
	n, err := o.Object.ReadAt(p, off)
	o.read.Add(int64(n))
	return n, err
}

// State returns the spec of state in operator, or an error wrapping
// ErrState.
func (c *Checkpoint) State(operator, state string) (runtime.StateSpec, error) {
	op, err := c.Metadata().Operator(operator)
	if err != nil {
		return runtime.StateSpec{}, err
	}
	for _, s := range op.States {
		if s.Name == state {
			return s, nil
		}
	}
	return runtime.StateSpec{}, fmt.Errorf("%w: checkpoint %s, operator %q has no state %q", ErrState, c.name, operator, state)
}

// Entry is one entry of a state, as bytes, with its key group. Its slices
// are its own.
type Entry struct {
	KeyGroup int
	runtime.Entry
}

// Entries yields every entry of state in operator, key group by key
// group; within a key group the order is the checkpoint's (list elements
// consecutive and in order).
func (c *Checkpoint) Entries(ctx context.Context, operator, state string) runtime.Seq[Entry] {
	return func(yield func(Entry, error) bool) {
		if _, err := c.State(operator, state); err != nil {
			yield(Entry{}, err)
			return
		}
		op, _ := c.Metadata().Operator(operator)
		v, err := c.reader.View(ctx, operator, op.KeyGroups)
		if err != nil {
			yield(Entry{}, err)
			return
		}
		defer v.Close()
		stop := errors.New("stop")
		for kg := range op.KeyGroups.All() {
			err := v.Scan(state, kg, func(e runtime.Entry) error {
				own := Entry{KeyGroup: kg, Entry: runtime.Entry{
					Key:       clone(e.Key),
					Namespace: clone(e.Namespace),
					UserKey:   clone(e.UserKey),
					Value:     clone(e.Value),
				}}
				if !yield(own, nil) {
					return stop
				}
				return nil
			})
			if errors.Is(err, stop) {
				return
			}
			if err != nil {
				yield(Entry{}, err)
				return
			}
		}
	}
}

// clone copies b; nil stays nil.
func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}
