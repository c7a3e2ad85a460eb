package checkpoint

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/stategen/stategen/runtime"
)

// Changes are operations on entries, recorded by a Tracker as they are
// made and written, in order, as the entries of a delta file: the entry's
// key, namespace and user key say what the operation addresses, and the
// first byte of its value which operation it is (the rest is the value
// it writes, if any).
const (
	opPut       = 1 // set the value of (key, ns) or of (key, ns, user key) in a map
	opDelete    = 2 // remove (key, ns, user key) from a map
	opClear     = 3 // remove (key, ns): a value, a whole list or a whole map
	opAppend    = 4 // append an element to the list of (key, ns)
	opDeleteAll = 5 // remove every namespace of key
)

// DefaultMaxChainLength is TrackOptions.MaxChainLength's default: a
// restore reads at most one full file and seven files of changes per
// instance.
const DefaultMaxChainLength = 8

// DefaultMaxChangeBytes is TrackOptions.MaxChangeBytes's default.
const DefaultMaxChangeBytes = 256 << 20

// TrackOptions configure a Tracker.
type TrackOptions struct {
	// MaxChainLength bounds the files a restore reads per instance: a full
	// file and the files of changes over it. When a checkpoint's chain
	// would be longer, it is written in full instead (in the background,
	// as every write is). Zero means DefaultMaxChainLength; 1 writes every
	// checkpoint in full.
	MaxChainLength int
	// MaxChangeBytes bounds the memory the changes since the last
	// completed checkpoint take. Past it the tracker drops them, stops
	// recording until the next snapshot, and writes that snapshot in full.
	// Zero means DefaultMaxChangeBytes.
	MaxChangeBytes int64
}

// Tracker is a runtime.Store that records every change made through it,
// so that a checkpoint can write only what changed since the last
// completed checkpoint (an incremental checkpoint) and reference the rest
// in earlier checkpoints' files. It wraps any backend: the typed handles
// bind to the Tracker as to any Store.
//
// A Tracker's snapshot (Snapshot) is a *TrackedSnapshot. WriteInstance
// (and so SnapshotAsync, WriteAsync and the driver) writes it as a file of
// changes over the chain of the last checkpoint that Completed reported,
// or in full when there is none, when the chain would exceed
// MaxChainLength, when the changes outweigh the full file, or after the
// changes overflowed MaxChangeBytes. The synchronous phase does no more
// than the backend's: it hands the changes recorded so far to the
// snapshot and starts new ones, O(states).
//
// A Tracker is used by the operator's goroutine, as every Store;
// Completed may be called from any goroutine.
type Tracker struct {
	inner  runtime.Store
	cfg    runtime.StoreConfig
	maxLen int
	maxMem int64
	states map[string]*trackedCore

	// The changes since the snapshot last taken, by state and key group,
	// and their size.
	cur     map[string][]changeLog
	curSize int64
	// recording is false from an overflow to the next snapshot.
	recording bool
	// gen counts the times cur was replaced: a state's cached logs are
	// cur's while their generation is gen (see trackedCore.logs).
	gen uint64
	// segSize is the size of segs.
	segSize atomic.Int64

	mu sync.Mutex // guards what follows, which writers and Completed change
	// seq counts the snapshots taken; segs are the changes between them,
	// since the base's snapshot (segs[i] ends at snapshot segs[i].seq).
	seq  uint64
	segs []segment
	// from is the snapshot after which every change is recorded: a file
	// of changes can be written over a base taken at or after it.
	from uint64
	// base is the chain of the last completed checkpoint, and baseSeq the
	// snapshot it was written from (0 and nil: none).
	base    []FileRef
	baseSeq uint64
	// written maps a checkpoint to the chain the tracker's snapshot was
	// written as there, until Completed says which one completed.
	written map[string]writtenChain
}

// changeLog is the changes of one state in one key group: encoded
// operations, in order (see appendChange), in chunks that are never
// copied as the log grows — a change costs its bytes, once.
type changeLog struct {
	chunks [][]byte
}

// Sizes of a changeLog's chunks: the first is small (most (state, key
// group) logs of a short interval are), each next one twice the last.
const (
	minChunk = 256
	maxChunk = 64 << 10
)

// add appends one change and returns its size.
func (l *changeLog) add(op byte, key, ns, uk, value []byte) int {
	need := 1 + uvarintLen(len(key)) + len(key) + uvarintLen(len(ns)) + len(ns) +
		uvarintLen(len(uk)) + len(uk) + uvarintLen(len(value)) + len(value)
	if n := len(l.chunks); n == 0 || len(l.chunks[n-1])+need > cap(l.chunks[n-1]) {
		size := minChunk
		if n > 0 {
			size = min(2*cap(l.chunks[n-1]), maxChunk)
		}
		l.chunks = append(l.chunks, make([]byte, 0, max(size, need)))
	}
	c := &l.chunks[len(l.chunks)-1]
	*c = appendChange(*c, op, key, ns, uk, value)
	return need
}

// segment is the changes made between two snapshots.
type segment struct {
	seq  uint64 // the snapshot the segment ends at
	logs map[string][]changeLog
	size int64
}

type writtenChain struct {
	seq   uint64
	chain []FileRef // base, then the file written
}

// Track returns a Tracker over s.
func Track(s runtime.Store, opts *TrackOptions) (*Tracker, error) {
	if s == nil {
		return nil, errors.New("checkpoint: Track of a nil store")
	}
	var o TrackOptions
	if opts != nil {
		o = *opts
	}
	switch {
	case o.MaxChainLength < 0:
		return nil, fmt.Errorf("checkpoint: TrackOptions.MaxChainLength %d is negative", o.MaxChainLength)
	case o.MaxChainLength == 0:
		o.MaxChainLength = DefaultMaxChainLength
	}
	switch {
	case o.MaxChangeBytes < 0:
		return nil, fmt.Errorf("checkpoint: TrackOptions.MaxChangeBytes %d is negative", o.MaxChangeBytes)
	case o.MaxChangeBytes == 0:
		o.MaxChangeBytes = DefaultMaxChangeBytes
	}
	return &Tracker{
		inner:     s,
		cfg:       s.Config(),
		maxLen:    o.MaxChainLength,
		maxMem:    o.MaxChangeBytes,
		states:    make(map[string]*trackedCore),
		cur:       make(map[string][]changeLog),
		recording: true,
		written:   make(map[string]writtenChain),
	}, nil
}

// Inner returns the store the tracker wraps.
func (t *Tracker) Inner() runtime.Store { return t.inner }

// Config implements runtime.Store.
func (t *Tracker) Config() runtime.StoreConfig { return t.inner.Config() }

// States implements runtime.Store.
func (t *Tracker) States() []runtime.StateSpec { return t.inner.States() }

// Close implements runtime.Store: it closes the inner store.
func (t *Tracker) Close() error {
	runtime.ReleaseOperatorStates(t)
	return t.inner.Close()
}

// Register implements runtime.Store: the state it returns records its
// changes in the tracker.
func (t *Tracker) Register(spec runtime.StateSpec) (runtime.State, error) {
	st, err := t.inner.Register(spec)
	if err != nil {
		return nil, err
	}
	c := t.states[spec.Name]
	if c == nil {
		c = &trackedCore{t: t, name: spec.Name}
		t.states[spec.Name] = c
	}
	c.inner = st
	return c.wrap(st), nil
}

// Restore implements runtime.Store. What the restore loads is no change
// the tracker can write over an earlier chain: the next checkpoint is
// written in full.
func (t *Tracker) Restore(src runtime.View) error {
	err := t.inner.Restore(src)
	for _, spec := range t.inner.States() {
		if t.states[spec.Name] == nil {
			t.states[spec.Name] = &trackedCore{t: t, name: spec.Name}
		}
	}
	t.mu.Lock()
	t.base, t.baseSeq, t.segs = nil, 0, nil
	t.segSize.Store(0)
	t.from = t.seq + 1
	t.mu.Unlock()
	t.cur, t.curSize = make(map[string][]changeLog), 0
	t.gen++
	return err
}

// Snapshot implements runtime.Store: the backend's snapshot, with the
// changes recorded since the base's and the decision how to write it.
func (t *Tracker) Snapshot() (runtime.Snapshot, error) {
	inner, err := t.inner.Snapshot()
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seq++
	seg := segment{seq: t.seq, logs: t.cur, size: t.curSize}
	if t.recording {
		t.segs = append(t.segs, seg)
		t.segSize.Add(seg.size)
	} else {
		// Changes were dropped before this snapshot: none can be written
		// over a base taken before it.
		t.segs, t.from = nil, t.seq
		t.segSize.Store(0)
	}
	t.cur, t.curSize, t.recording = make(map[string][]changeLog), 0, true
	t.gen++
	ts := &TrackedSnapshot{Snapshot: inner, t: t, seq: t.seq}
	if t.base != nil && t.baseSeq >= t.from && len(t.base) < t.maxLen {
		var size, deltas int64
		for _, s := range t.segs {
			size += s.size
		}
		for _, ref := range t.base[1:] {
			deltas += ref.File.Size
		}
		// Changes that outweigh the full file are better written in full.
		if deltas+size <= t.base[0].File.Size {
			ts.base = t.base
			ts.segs = append([]segment(nil), t.segs...)
		}
	}
	return ts, nil
}

// Completed tells the tracker that checkpoint ckpt completed: if the
// tracker's snapshot was written there, its chain becomes the base of the
// next checkpoints, and the changes it holds are dropped. A checkpoint
// the tracker did not write is ignored. Call it when the coordinator
// notifies the instance (driver.Participant.NotifyComplete).
func (t *Tracker) Completed(ckpt string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	w, ok := t.written[ckpt]
	if !ok || w.seq <= t.baseSeq {
		return
	}
	t.base, t.baseSeq = w.chain, w.seq
	for name, other := range t.written {
		if other.seq <= w.seq {
			delete(t.written, name)
		}
	}
	i := 0
	for i < len(t.segs) && t.segs[i].seq <= w.seq {
		i++
	}
	for _, s := range t.segs[:i] {
		t.segSize.Add(-s.size)
	}
	t.segs = append([]segment(nil), t.segs[i:]...)
}

// Base returns the chain that the next checkpoint's changes would apply
// to: the files of the last completed checkpoint's chain, oldest first,
// or nil if there is none.
func (t *Tracker) Base() []FileRef {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]FileRef(nil), t.base...)
}

// written records that snapshot seq was written in ckpt as chain.
func (t *Tracker) recordWritten(ckpt string, seq uint64, chain []FileRef) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.written[ckpt] = writtenChain{seq: seq, chain: chain}
}

// record appends one change of state c to k's key, in its key group.
func (t *Tracker) record(c *trackedCore, op byte, k runtime.Key, ns, uk, value []byte) {
	if !t.recording {
		return
	}
	if c.gen != t.gen || c.logs == nil {
		logs := t.cur[c.name]
		if logs == nil {
			logs = make([]changeLog, t.cfg.KeyGroups.Len())
			t.cur[c.name] = logs
		}
		c.logs, c.gen = logs, t.gen
	}
	t.curSize += int64(c.logs[k.Group()-t.cfg.KeyGroups.Start].add(op, k.Bytes(), ns, uk, value))
	if t.curSize+t.segSize.Load() > t.maxMem {
		t.overflow()
	}
}

// overflow drops every change kept: the next snapshot is written in full.
func (t *Tracker) overflow() {
	t.cur, t.curSize, t.recording = make(map[string][]changeLog), 0, false
	t.gen++
	t.mu.Lock()
	t.segs = nil
	t.segSize.Store(0)
	t.mu.Unlock()
}

// appendChange appends one change: the operation, then key, namespace,
// user key and value, each with its uvarint length.
func appendChange(dst []byte, op byte, key, ns, uk, value []byte) []byte {
	dst = append(dst, op)
	dst = appendBytes(dst, key)
	dst = appendBytes(dst, ns)
	dst = appendBytes(dst, uk)
	return appendBytes(dst, value)
}

// nextChange decodes the change at the head of b, which the tracker wrote.
func nextChange(b []byte) (op byte, key, ns, uk, value, rest []byte) {
	op, b = b[0], b[1:]
	field := func() []byte {
		n, w := binary.Uvarint(b)
		f := b[w : w+int(n) : w+int(n)]
		b = b[w+int(n):]
		return f
	}
	key, ns, uk, value = field(), field(), field(), field()
	return op, key, ns, uk, value, b
}

// TrackedSnapshot is the snapshot of a Tracker: the backend's snapshot, and
// the changes since the base's. WriteInstance writes it as a file of
// changes over Base when it has one, in full otherwise.
type TrackedSnapshot struct {
	runtime.Snapshot
	t    *Tracker
	seq  uint64
	base []FileRef
	segs []segment
	own  bool // a savepoint's (SelfContained)
}

// Full makes the snapshot be written in full, whatever its changes: a
// materialization, which starts a new chain once it completes.
func (s *TrackedSnapshot) Full() { s.base, s.segs = nil, nil }

// SelfContained makes the snapshot a savepoint's: it is written in full,
// references nothing, and never becomes the base of a chain — a savepoint
// belongs to the user, who may delete it at any time. Call it before the
// snapshot is written.
func (s *TrackedSnapshot) SelfContained() { s.base, s.segs, s.own = nil, nil, true }

// Tracker returns the tracker that took the snapshot.
func (s *TrackedSnapshot) Tracker() *Tracker { return s.t }

// Base returns the chain the snapshot's changes apply to, nil if it is
// written in full.
func (s *TrackedSnapshot) Base() []FileRef { return append([]FileRef(nil), s.base...) }

// write writes the snapshot as object name of ckpt (see WriteInstance).
func (s *TrackedSnapshot) write(ctx context.Context, st Storage, ckpt, name string, opts *WriterOptions) (InstanceSnapshot, error) {
	if s.base == nil {
		is, err := writeInstance(ctx, st, ckpt, name, s.Snapshot, opts)
		if err == nil && !s.own {
			s.t.recordWritten(ckpt, s.seq, []FileRef{{Checkpoint: ckpt, File: is.File}})
		}
		return is, err
	}
	for _, ref := range s.base {
		if ref.Checkpoint == ckpt {
			return InstanceSnapshot{}, fmt.Errorf("checkpoint: %s/%s: the chain it applies to is in the same checkpoint: write each checkpoint under a new name", ckpt, name)
		}
	}
	is, err := writeInstance(ctx, st, ckpt, name, changesView{s}, opts)
	if err != nil {
		return InstanceSnapshot{}, err
	}
	is.File.Delta = true
	is.Base = s.Base()
	// The states of the changes are the snapshot's.
	is.States = s.Snapshot.States()
	s.t.recordWritten(ckpt, s.seq, append(s.Base(), FileRef{Checkpoint: ckpt, File: is.File}))
	return is, nil
}

// changesView is the View of a snapshot's changes: the changes of each
// (state, key group) in the order they were made, each an Entry whose
// value begins with the operation.
type changesView struct{ s *TrackedSnapshot }

func (v changesView) MaxParallelism() int              { return v.s.MaxParallelism() }
func (v changesView) KeyGroups() runtime.KeyGroupRange { return v.s.KeyGroups() }
func (v changesView) States() []runtime.StateSpec      { return v.s.Snapshot.States() }

func (v changesView) Scan(state string, kg int, fn func(runtime.Entry) error) error {
	kgs := v.s.KeyGroups()
	if !kgs.Contains(kg) {
		return fmt.Errorf("%w: key group %d is not in %v", runtime.ErrKeyGroupNotOwned, kg, kgs)
	}
	var val []byte
	for _, seg := range v.s.segs {
		logs := seg.logs[state]
		if logs == nil {
			continue
		}
		for _, b := range logs[kg-kgs.Start].chunks {
			for len(b) > 0 {
				var op byte
				var en runtime.Entry
				op, en.Key, en.Namespace, en.UserKey, en.Value, b = nextChange(b)
				val = append(append(val[:0], op), en.Value...)
				en.Value = val
				if err := fn(en); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
