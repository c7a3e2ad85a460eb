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
	// The tracker keeps the memory of changes it no longer needs for the
	// next ones, as long as that and the changes it holds stay within
	// MaxChangeBytes. Zero means DefaultMaxChangeBytes.
	MaxChangeBytes int64
}

// Tracker is a runtime.Store that records every change made through it,
// so that a checkpoint can write only what changed since the last
// completed checkpoint (an incremental checkpoint) and reference the rest
// in earlier checkpoints' files. It wraps any backend: the typed handles
// bind to the Tracker as to any Store, and on a store that keeps states as
// Go values (runtime.TableHost: backends/cow) they keep them so behind the
// Tracker too (HostTable): the store's tables report each change they
// make, encoded, and the Tracker records it as it records the changes of
// the states it wraps. Recording a change costs its encoding, which a
// table otherwise skips: on Nexmark's five queries, cow behind a Tracker
// ran at 0.15 of plain Go's speed where it runs at 0.25 without one (0.10
// while the Tracker kept every state as bytes; see
// BenchmarkNexmark/backend=cow-tracked in benchmarks/nexmark).
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

	// The changes since the snapshot last taken, by state, and their size.
	cur     map[string]*changeLog
	curSize int64
	// recording is false from an overflow to the next snapshot.
	recording bool
	// gen counts the times cur was replaced: a state's cached logs are
	// cur's while their generation is gen (see trackedCore.logs).
	gen uint64
	// segSize is the size of segs.
	segSize atomic.Int64

	// free holds the chunks of the changes no one holds any more, by size
	// class (see chunkClass), for the logs of the next changes: a tracker
	// in a steady state of checkpoints that complete records into memory
	// it already has, never asking the allocator or the OS for more.
	// Guarded by mu; freeBytes is their size, which with the changes held
	// stays within maxMem.
	free      [numChunkClasses][][]byte
	freeBytes int64

	mu sync.Mutex // guards what follows, which writers and Completed change
	// seq counts the snapshots taken; segs are the changes between them,
	// since the base's snapshot (segs[i] ends at snapshot segs[i].seq).
	seq  uint64
	segs []*segment
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

// changeLog is the changes of one state: encoded operations, in the
// order made, each with its key group (see add), in chunks that are never
// copied as the log grows — a change costs its bytes, once. One log per
// state, not per key group, is one sequential stream of writes, which the
// CPU's prefetchers follow; a log per key group would be one stream per
// key group, each write a cache miss. The write phase finds a key group's
// changes through an index built once (logIndex).
type changeLog struct {
	chunks [][]byte
}

// Sizes of a changeLog's chunks: the first is small (most logs of a short
// interval are), each next one twice the last, up to maxChunk. A chunk's
// size class is log2(size/minChunk).
const (
	minChunk        = 256
	maxChunk        = 64 << 10
	numChunkClasses = 9 // minChunk << (numChunkClasses-1) == maxChunk
)

// add appends one change, in key group kg, to l and returns its size; t
// gives the chunks. A change is its operation, its key group, and its
// key, namespace, user key and value, each with its uvarint length.
func (l *changeLog) add(t *Tracker, kg int, op byte, key, ns, uk, value []byte) int {
	need := 1 + uvarintLen(kg) + uvarintLen(len(key)) + len(key) + uvarintLen(len(ns)) + len(ns) +
		uvarintLen(len(uk)) + len(uk) + uvarintLen(len(value)) + len(value)
	n := len(l.chunks)
	if n == 0 || len(l.chunks[n-1])+need > cap(l.chunks[n-1]) {
		class := 0
		if n > 0 {
			class = min(chunkClass(cap(l.chunks[n-1]))+1, numChunkClasses-1)
		}
		l.chunks = append(l.chunks, t.chunk(class, need))
		n++
	}
	c := l.chunks[n-1]
	off := len(c)
	c = c[:off+need]
	b := c[off:]
	b[0] = op
	i := 1
	if kg < 0x80 {
		b[1] = byte(kg)
		i++
	} else {
		i += binary.PutUvarint(b[1:], uint64(kg))
	}
	i += putField(b[i:], key)
	i += putField(b[i:], ns)
	i += putField(b[i:], uk)
	putField(b[i:], value)
	l.chunks[n-1] = c
	return need
}

// nextLogged decodes the change at the head of b, which add wrote.
func nextLogged(b []byte) (kg int, op byte, key, ns, uk, value, rest []byte) {
	op = b[0]
	k, w := binary.Uvarint(b[1:])
	key, ns, uk, value, rest = changeFields(b[1+w:])
	return int(k), op, key, ns, uk, value, rest
}

// loggedKeyGroup returns the key group of the change at the head of b,
// and the changes after it.
func loggedKeyGroup(b []byte) (kg int, rest []byte) {
	k, w := binary.Uvarint(b[1:])
	b = b[1+w:]
	for range 4 {
		n, w := binary.Uvarint(b)
		b = b[w+int(n):]
	}
	return int(k), b
}

// putField writes f with its uvarint length at the head of b, which has
// room, and returns the bytes written.
func putField(b, f []byte) int {
	switch {
	case len(f) == 0:
		b[0] = 0
		return 1
	case len(f) < 0x80:
		b[0] = byte(len(f))
		return 1 + copy(b[1:], f)
	}
	w := binary.PutUvarint(b, uint64(len(f)))
	return w + copy(b[w:], f)
}

// chunkClass returns the size class of a chunk of capacity c: the class
// whose size is the largest power-of-two multiple of minChunk within c.
func chunkClass(c int) int {
	class := 0
	for class < numChunkClasses-1 && minChunk<<(class+1) <= c {
		class++
	}
	return class
}

// chunk returns an empty chunk of size class class, with room for at
// least need bytes: a recycled one if there is one.
func (t *Tracker) chunk(class, need int) []byte {
	size := minChunk << class
	if need > size {
		return make([]byte, 0, need) // a change larger than any chunk: its own
	}
	t.mu.Lock()
	if f := t.free[class]; len(f) > 0 {
		c := f[len(f)-1]
		f[len(f)-1] = nil
		t.free[class] = f[:len(f)-1]
		t.freeBytes -= int64(cap(c))
		t.mu.Unlock()
		return c
	}
	t.mu.Unlock()
	return make([]byte, 0, size)
}

// recycle keeps the chunks of logs, which no one holds any more, for the
// next changes, as long as they and the changes held fit in maxMem. t.mu
// is held.
func (t *Tracker) recycle(logs map[string]*changeLog) {
	for _, l := range logs {
		for j, c := range l.chunks {
			l.chunks[j] = nil
			if cp := cap(c); cp <= maxChunk && cp == minChunk<<chunkClass(cp) && t.freeBytes+int64(cp)+t.segSize.Load() <= t.maxMem {
				class := chunkClass(cp)
				t.free[class] = append(t.free[class], c[:0])
				t.freeBytes += int64(cp)
			}
		}
		l.chunks = nil
	}
}

// unref drops one holder of each of segs, recycling the segments that
// have none left. t.mu is held.
func (t *Tracker) unref(segs []*segment) {
	for _, s := range segs {
		if s.refs--; s.refs == 0 {
			t.recycle(s.logs)
			s.logs = nil
		}
	}
}

// segment is the changes made between two snapshots.
type segment struct {
	seq  uint64 // the snapshot the segment ends at
	logs map[string]*changeLog
	size int64
	// refs counts the segment's holders: the tracker while the segment is
	// in its segs, and each TrackedSnapshot holding it until released.
	// The last to let go recycles its chunks. Guarded by Tracker.mu.
	refs int
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
		cur:       make(map[string]*changeLog),
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
	return t.core(spec.Name).adopt(st), nil
}

// HostTable implements runtime.TableHost, so that the typed handles keep
// their states as Go values behind a Tracker as they do on its store: if
// the store is a TableHost, the state is hosted there, and a Table made
// for it is told to report its changes to the tracker
// (runtime.TableEnv.Changes), which records them as it records those of
// the states it wraps; the Table is returned as it is, for the handles to
// use. On any other store it is Register; and a state the store keeps as
// bytes, or a Table the store made without the tracker (a state registered
// before the store was put behind it, whose changes would reach no one),
// is given out wrapped, as Register gives out every state, and the handles
// use it at the byte level.
func (t *Tracker) HostTable(spec runtime.StateSpec, mk func(runtime.StateSpec, runtime.TableEnv) (runtime.Table, error)) (runtime.State, error) {
	host, ok := t.inner.(runtime.TableHost)
	if !ok {
		return t.Register(spec)
	}
	c := t.core(spec.Name)
	st, err := host.HostTable(spec, func(spec runtime.StateSpec, env runtime.TableEnv) (runtime.Table, error) {
		env.Changes = tableChanges{c}
		tb, err := mk(spec, env)
		if err == nil {
			c.table = tb
		}
		return tb, err
	})
	if err != nil {
		return nil, err
	}
	return c.adopt(st), nil
}

// core returns the trackedCore of state name, making it if needed.
func (t *Tracker) core(name string) *trackedCore {
	c := t.states[name]
	if c == nil {
		c = &trackedCore{t: t, name: name}
		t.states[name] = c
	}
	return c
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
	t.unref(t.segs)
	t.base, t.baseSeq, t.segs = nil, 0, nil
	t.segSize.Store(0)
	t.from = t.seq + 1
	t.recycle(t.cur)
	t.mu.Unlock()
	t.cur, t.curSize = make(map[string]*changeLog), 0
	t.gen++
	return err
}

// Restores implements runtime.RestoreCounter: the inner store's count, if
// it keeps one.
func (t *Tracker) Restores() (uint64, bool) {
	if c, ok := t.inner.(runtime.RestoreCounter); ok {
		return c.Restores()
	}
	return 0, false
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
	seg := &segment{seq: t.seq, logs: t.cur, size: t.curSize}
	if t.recording {
		seg.refs++
		t.segs = append(t.segs, seg)
		t.segSize.Add(seg.size)
	} else {
		// Changes were dropped before this snapshot: none can be written
		// over a base taken before it.
		t.recycle(seg.logs)
		t.unref(t.segs)
		t.segs, t.from = nil, t.seq
		t.segSize.Store(0)
	}
	t.cur, t.curSize, t.recording = make(map[string]*changeLog), 0, true
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
			ts.segs = append([]*segment(nil), t.segs...)
			for _, s := range ts.segs {
				s.refs++
			}
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
	t.unref(t.segs[:i])
	t.segs = append([]*segment(nil), t.segs[i:]...)
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

// record appends one change of state c to k's key.
func (t *Tracker) record(c *trackedCore, op byte, k runtime.Key, ns, uk, value []byte) {
	t.recordAt(c, op, k.Group(), k.Bytes(), ns, uk, value)
}

// recordAt appends one change of state c to key, of key group kg.
func (t *Tracker) recordAt(c *trackedCore, op byte, kg int, key, ns, uk, value []byte) {
	if !t.recording {
		return
	}
	if c.gen != t.gen || c.log == nil {
		l := t.cur[c.name]
		if l == nil {
			l = new(changeLog)
			t.cur[c.name] = l
		}
		c.log, c.gen = l, t.gen
	}
	t.curSize += int64(c.log.add(t, kg, op, key, ns, uk, value))
	if t.curSize+t.segSize.Load() > t.maxMem {
		t.overflow()
	}
}

// overflow drops every change kept: the next snapshot is written in full.
func (t *Tracker) overflow() {
	t.mu.Lock()
	t.recycle(t.cur)
	t.unref(t.segs)
	t.segs = nil
	t.segSize.Store(0)
	t.mu.Unlock()
	t.cur, t.curSize, t.recording = make(map[string]*changeLog), 0, false
	t.gen++
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

// nextChange decodes the change at the head of b, which appendChange
// wrote.
func nextChange(b []byte) (op byte, key, ns, uk, value, rest []byte) {
	key, ns, uk, value, rest = changeFields(b[1:])
	return b[0], key, ns, uk, value, rest
}

// changeFields decodes the key, namespace, user key and value at the head
// of b, each with its uvarint length.
func changeFields(b []byte) (key, ns, uk, value, rest []byte) {
	field := func() []byte {
		n, w := binary.Uvarint(b)
		f := b[w : w+int(n) : w+int(n)]
		b = b[w+int(n):]
		return f
	}
	key, ns, uk, value = field(), field(), field(), field()
	return key, ns, uk, value, b
}

// TrackedSnapshot is the snapshot of a Tracker: the backend's snapshot, and
// the changes since the base's. WriteInstance writes it as a file of
// changes over Base when it has one, in full otherwise.
type TrackedSnapshot struct {
	runtime.Snapshot
	t    *Tracker
	seq  uint64
	base []FileRef
	segs []*segment // held until Release (see segment.refs)
	own  bool       // a savepoint's (SelfContained)

	idxMu sync.Mutex
	idx   map[string]*logIndex // by state, built by the first Scan of each
}

// logIndex finds the changes of one state in one key group, in the order
// made, in the logs of a snapshot's segments: built by one pass over the
// logs, in the write phase, it costs 8 bytes a change, and lets the writer
// read key group after key group without passing over the others.
type logIndex struct {
	chunks [][]byte // the chunks of the state's logs, segment after segment
	start  []int    // key group kg's changes are pos[start[i]:start[i+1]], i = kg - first key group
	pos    []uint64 // chunk index << 32 | offset in the chunk
}

// index returns the index of state's changes, nil if it has none.
func (s *TrackedSnapshot) index(state string) (*logIndex, error) {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	if x, ok := s.idx[state]; ok {
		return x, nil
	}
	kgs := s.KeyGroups()
	x := &logIndex{start: make([]int, kgs.Len()+1)}
	counts := x.start[1:]
	for _, seg := range s.segs {
		if l := seg.logs[state]; l != nil {
			x.chunks = append(x.chunks, l.chunks...)
		}
	}
	for _, b := range x.chunks {
		for len(b) > 0 {
			var kg int
			kg, b = loggedKeyGroup(b)
			if !kgs.Contains(kg) {
				return nil, fmt.Errorf("checkpoint: a tracked change of state %q is in key group %d, outside %v", state, kg, kgs)
			}
			counts[kg-kgs.Start]++
		}
	}
	for i := 1; i < len(x.start); i++ {
		x.start[i] += x.start[i-1]
	}
	if x.start[len(x.start)-1] == 0 {
		x = nil
	} else {
		x.pos = make([]uint64, x.start[len(x.start)-1])
		next := append([]int(nil), x.start[:len(x.start)-1]...)
		for ci, c := range x.chunks {
			for b := c; len(b) > 0; {
				off := len(c) - len(b)
				var kg int
				kg, b = loggedKeyGroup(b)
				i := kg - kgs.Start
				x.pos[next[i]] = uint64(ci)<<32 | uint64(off)
				next[i]++
			}
		}
	}
	if s.idx == nil {
		s.idx = make(map[string]*logIndex)
	}
	s.idx[state] = x
	return x, nil
}

// Full makes the snapshot be written in full, whatever its changes: a
// materialization, which starts a new chain once it completes.
func (s *TrackedSnapshot) Full() { s.base = nil; s.drop() }

// SelfContained makes the snapshot a savepoint's: it is written in full,
// references nothing, and never becomes the base of a chain — a savepoint
// belongs to the user, who may delete it at any time. Call it before the
// snapshot is written.
func (s *TrackedSnapshot) SelfContained() { s.base, s.own = nil, true; s.drop() }

// Release implements runtime.Snapshot: it releases the backend's snapshot
// and lets go of the changes the snapshot holds. Releasing twice is the
// backend's to judge; the changes are let go of once.
func (s *TrackedSnapshot) Release() error {
	s.drop()
	return s.Snapshot.Release()
}

// drop lets go of the snapshot's changes.
func (s *TrackedSnapshot) drop() {
	if s.segs == nil {
		return
	}
	s.idxMu.Lock()
	s.idx = nil
	s.idxMu.Unlock()
	s.t.mu.Lock()
	s.t.unref(s.segs)
	s.t.mu.Unlock()
	s.segs = nil
}

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
	x, err := v.s.index(state)
	if err != nil || x == nil {
		return err
	}
	i := kg - kgs.Start
	var val []byte
	for _, p := range x.pos[x.start[i]:x.start[i+1]] {
		var op byte
		var en runtime.Entry
		_, op, en.Key, en.Namespace, en.UserKey, en.Value, _ = nextLogged(x.chunks[p>>32][uint32(p):])
		val = append(append(val[:0], op), en.Value...)
		en.Value = val
		if err := fn(en); err != nil {
			return err
		}
	}
	return nil
}
