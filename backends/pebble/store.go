package pebble

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storekit"
)

// Store is the on-disk backend: a runtime.Store that keeps every state in
// one Pebble database in its working directory, with the key layout of the
// package doc, and takes snapshots with Pebble snapshots. Like every Store
// it is used by one goroutine, the operator's; its snapshots may be read
// and released on others.
type Store struct {
	restores storekit.Restores // counts Restores (runtime.RestoreCounter)
	cfg      runtime.StoreConfig
	opts     Options
	h        *handle
	db       *pebbledb.DB
	wo       *pebbledb.WriteOptions

	states map[string]*state
	specs  []runtime.StateSpec // of states, sorted by name
	nextID uint64
	closed bool
	// iterating counts the iterations running now: their callbacks must
	// not write.
	iterating int
	// snaps counts the snapshots; they report their release to it from
	// any goroutine.
	snaps *storekit.Snapshots

	// Write batching (batch.go), under SyncNone only: batch is the
	// pending batch (nil with a write-ahead log): pbatch, a plain batch,
	// until a read through it makes it ibatch, an indexed batch holding
	// the same writes (see indexedBatch); cbatch, a plain batch, is what
	// commit fills with the writes of the pending one that no later write
	// supersedes (see combined). pending is its size in bytes of
	// memtable (bounded by batchLimit, Options.BatchSize), rangeDels its
	// range deletions, readRun the reads made in a row while it holds
	// writes (readRunLimit of them commit it; an iteration commits
	// indexCommit writes or more rather than index them). retired holds
	// committed batches that an iteration running then may still read.
	// failed is set when a pending batch could not be committed: every
	// method returns it.
	batch        *pebbledb.Batch
	pbatch       *pebbledb.Batch
	ibatch       *pebbledb.Batch
	cbatch       *pebbledb.Batch
	pending      int64
	batchLimit   int64
	rangeDels    int
	readRun      int
	readRunLimit int // readRunCommit; tests raise it
	indexCommit  int // indexCommit; tests raise it
	retired      []*pebbledb.Batch
	failed       error
	pidx         pendingIndex // the pending batch's writes, for point reads
	// kept are the batches committed last, their indexes and a copy of
	// their bytes, keptNext the slot the next commit fills and keptLen how
	// many hold one: a point read of a key the pending batch does not
	// touch asks them, newest first, before Pebble (see readCommitted).
	kept     [keptBatches]committedBatch
	keptNext int
	keptLen  int
	chits    int64 // the point reads the committed batches answered
	// filter holds every key the database may hold, and fbuild is its
	// rebuild running, if any (filter.go).
	filter keyFilter
	fbuild *filterBuild

	kbuf     []byte   // the key of the current point operation
	ukey     []byte   // the key of the Update running
	uold     []byte   // the old value of the Update running
	clearBuf []byte   // the keys of a Clear or DeleteAll being deleted one by one
	vbuf     []byte   // the value returned by the last Get, if too long for its state's lastKey
	wbuf     []byte   // the value being written
	bufs     [][]byte // spare buffers for iteration bounds (see takeBuf)
}

// Restores implements runtime.RestoreCounter.
func (s *Store) Restores() (uint64, bool) { return s.restores.Restores() }

var _ runtime.Store = (*Store)(nil)

// dirSeq numbers the directories New makes on a file system other than
// the operating system's.
var dirSeq atomic.Int64

// New opens a store configured by opts in its working directory (see
// Options.Dir and Options.Existing). On error nothing stays open: the
// database is closed and a directory New made is removed. Errors about the
// directory name it.
func New(opts Options) (*Store, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	fs := o.FS
	if fs == nil {
		fs = vfs.Default
	}
	h := &handle{fs: fs, opts: o, dir: o.Dir, progress: make(chan struct{}, 1)}
	made := false // whether New made the directory (and removes it on failure)
	switch {
	case h.dir == "" && fs == vfs.Default:
		d, err := os.MkdirTemp("", "stategen-pebble-")
		if err != nil {
			return nil, fmt.Errorf("pebble: make a working directory: %w", err)
		}
		h.dir, h.removeDir, made = d, true, true
	case h.dir == "":
		for {
			h.dir = fmt.Sprintf("%s-%d", inMemoryDir, dirSeq.Add(1))
			if _, err := fs.Stat(h.dir); oserrorNotExist(err) {
				break
			}
		}
		h.removeDir = true
	}
	s, err := open(h, o, &made)
	if err != nil {
		if made {
			_ = fs.RemoveAll(h.dir)
		}
		return nil, err
	}
	return s, nil
}

// oserrorNotExist reports whether err says that a file does not exist.
func oserrorNotExist(err error) bool { return err != nil && errors.Is(err, os.ErrNotExist) }

// open checks the working directory against the policy, opens the
// database and loads or writes the store's metadata. It sets *made if it
// creates the directory.
func open(h *handle, o Options, made *bool) (*Store, error) {
	fs, dir := h.fs, h.dir
	names, err := fs.List(dir)
	switch {
	case oserrorNotExist(err):
		if err := fs.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("pebble: make working directory %q: %w", dir, err)
		}
		*made = true
	case err != nil:
		return nil, fmt.Errorf("pebble: working directory %q: %w", dir, err)
	}
	existing := len(names) > 0
	if existing && o.Existing == RefuseExisting {
		sort.Strings(names)
		if len(names) > 5 {
			names = append(names[:5], "...")
		}
		return nil, fmt.Errorf("%w: %q holds %s (pass Existing: ReuseExisting to open a store closed there, or choose an empty directory)",
			ErrDirNotEmpty, dir, strings.Join(names, ", "))
	}
	unclean := false
	if existing {
		_, err := fs.Stat(fs.PathJoin(dir, openMarker))
		unclean = err == nil
	}
	if !unclean {
		if err := writeMarker(fs, dir); err != nil {
			return nil, fmt.Errorf("pebble: working directory %q: %w", dir, err)
		}
	}
	po := o.pebbleOptions(h)
	// A directory that holds files but no database (its MANIFEST lost, its
	// marker garbage) must not silently become a new, empty store.
	po.ErrorIfNotExists = existing
	// An unclean directory is opened only to tell a crashed store's
	// directory (refused with ErrUncleanDir) from one held by a live store
	// (Pebble's lock error): read-only, so that it is left as it is.
	po.ReadOnly = unclean
	db, err := pebbledb.Open(dir, po)
	if err != nil {
		if !unclean && !*made {
			_ = fs.Remove(fs.PathJoin(dir, openMarker))
		}
		if errors.Is(err, pebbledb.ErrDBDoesNotExist) {
			return nil, fmt.Errorf("pebble: open working directory %q: it holds files but no database (a lost or damaged MANIFEST, or not a store's directory): %w", dir, err)
		}
		return nil, fmt.Errorf("pebble: open working directory %q: %w", dir, err)
	}
	h.db, h.refs = db, 1
	fail := func(err error) (*Store, error) {
		_ = closeDB(db)
		if !unclean && !*made {
			_ = fs.Remove(fs.PathJoin(dir, openMarker))
		}
		return nil, err
	}
	if unclean {
		return fail(fmt.Errorf("%w: %q holds %s: the store that used it crashed or did not Close; restore a checkpoint into an empty directory instead",
			ErrUncleanDir, dir, openMarker))
	}
	s := &Store{
		cfg:    o.StoreConfig,
		opts:   o,
		h:      h,
		db:     db,
		wo:     writeOptions(o.Sync),
		states: make(map[string]*state),
		snaps:  storekit.NewSnapshots(o.OnLeakedSnapshot),
	}
	if err := s.loadMeta(existing); err != nil {
		return fail(fmt.Errorf("pebble: working directory %q: %w", dir, err))
	}
	if existing {
		s.startExistingFilter()
	} else {
		s.filter = newKeyFilter(o.KeyFilterSize)
	}
	if o.Sync == SyncNone {
		s.pbatch, s.ibatch, s.cbatch = db.NewBatch(), db.NewIndexedBatch(), db.NewBatch()
		s.batch, s.batchLimit, s.readRunLimit, s.indexCommit = s.pbatch, o.BatchSize, readRunCommit, indexCommit
	}
	return s, nil
}

// writeMarker creates the open marker of dir and makes it durable.
func writeMarker(fs vfs.FS, dir string) error {
	f, err := fs.Create(fs.PathJoin(dir, openMarker), vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte("a stategen pebble store has this directory open; if no process does, it crashed\n"))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(fs, dir)
	}
	return err
}

// loadMeta records the store's configuration in a new database, or reads
// the configuration and states of a reused one and deletes the key groups
// it holds outside the store's range.
func (s *Store) loadMeta(existing bool) error {
	want := storeMeta{version: layoutVersion, maxParallelism: s.cfg.MaxParallelism, groups: s.cfg.KeyGroups}
	v, closer, err := s.db.Get(metaConfigKey)
	if errors.Is(err, pebbledb.ErrNotFound) {
		if existing {
			it, err := s.db.NewIter(nil)
			if err != nil {
				return err
			}
			any := it.First()
			if err := it.Close(); err != nil {
				return err
			}
			if any {
				return fmt.Errorf("%w: the database holds keys but no store metadata", ErrNotStoreDir)
			}
		}
		return s.db.Set(metaConfigKey, encodeStoreMeta(want), s.wo)
	}
	if err != nil {
		return err
	}
	got, err := decodeStoreMeta(v)
	closer.Close()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotStoreDir, err)
	}
	switch {
	case got.version != layoutVersion:
		return fmt.Errorf("%w: layout version %d, this package reads and writes only version %d: restore the state from a checkpoint into a new directory",
			ErrNotStoreDir, got.version, layoutVersion)
	case got.maxParallelism != s.cfg.MaxParallelism:
		return fmt.Errorf("%w: %w: the directory's store has maxParallelism %d, the new store %d",
			ErrNotStoreDir, runtime.ErrMaxParallelismMismatch, got.maxParallelism, s.cfg.MaxParallelism)
	}
	if err := s.loadStates(); err != nil {
		return err
	}
	if got.groups == want.groups {
		return nil
	}
	// Clip: drop every key group outside the new range, in at most two
	// range deletions (key groups lead the layout).
	b := s.db.NewBatch()
	defer b.Close()
	if s.cfg.KeyGroups.Start > 0 {
		if err := b.DeleteRange(storekit.AppendGroup(nil, 0), storekit.AppendGroup(nil, s.cfg.KeyGroups.Start), nil); err != nil {
			return err
		}
	}
	if s.cfg.KeyGroups.End < s.cfg.MaxParallelism {
		if err := b.DeleteRange(storekit.AppendGroup(nil, s.cfg.KeyGroups.End), []byte{metaPrefix}, nil); err != nil {
			return err
		}
	}
	if err := b.Set(metaConfigKey, encodeStoreMeta(want), nil); err != nil {
		return err
	}
	return b.Commit(s.wo)
}

// loadStates registers the states recorded in a reused database.
func (s *Store) loadStates() error {
	end, _ := storekit.AppendPrefixEnd(nil, metaStatePfx)
	it, err := s.db.NewIter(&pebbledb.IterOptions{LowerBound: metaStatePfx, UpperBound: end})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		id, w := binary.Uvarint(it.Key()[len(metaStatePfx):])
		spec, err := decodeSpec(it.Value())
		if w <= 0 || err != nil || id >= maxStates || s.states[spec.Name] != nil {
			_ = it.Close()
			return fmt.Errorf("%w: bad state metadata under key %x: %v", ErrNotStoreDir, it.Key(), err)
		}
		s.add(spec, id)
		s.nextID = max(s.nextID, id+1)
	}
	return it.Close()
}

// Config implements runtime.Store.
func (s *Store) Config() runtime.StoreConfig { return s.cfg }

// Dir returns the working directory.
func (s *Store) Dir() string { return s.h.dir }

// LiveSnapshots returns the number of snapshots taken and not yet freed:
// not released, or released while a Scan of theirs still runs.
// A count that only grows is a leaked snapshot: each pins the versions of
// the entries it can see, which Pebble then cannot compact away (see also
// Options.OnLeakedSnapshot). It may be called from any goroutine.
func (s *Store) LiveSnapshots() int { return s.snaps.Live() }

// Metrics returns Pebble's metrics of the working directory: memtable and
// block-cache sizes, levels, compactions. It returns nil after Close.
func (s *Store) Metrics() *pebbledb.Metrics {
	if s.closed || s.db == nil {
		return nil
	}
	return s.db.Metrics()
}

// Register implements runtime.Store. A new state gets the next state id,
// recorded with its spec in the working directory.
func (s *Store) Register(spec runtime.StateSpec) (runtime.State, error) {
	existing, err := storekit.CheckRegister(s.target(nil), s.closed, s.iterating > 0, spec)
	switch {
	case err != nil:
		return nil, err
	case existing:
		return s.states[spec.Name].handle, nil
	}
	st, err := s.create(spec)
	if err != nil {
		return nil, err
	}
	return st.handle, nil
}

// create registers a new state: spec is valid and its name is new.
func (s *Store) create(spec runtime.StateSpec) (*state, error) {
	if s.iterating > 0 {
		return nil, fmt.Errorf("%w: register state %q", ErrWriteDuringIteration, spec.Name)
	}
	if s.nextID >= maxStates {
		return nil, fmt.Errorf("pebble: cannot register state %q: the store has %d states, the most it can hold", spec.Name, maxStates)
	}
	id := s.nextID
	if err := s.apply(opSet, stateMetaKey(id), encodeSpec(spec)); err != nil {
		return nil, fmt.Errorf("pebble: register state %q: %w", spec.Name, err)
	}
	s.nextID++
	return s.add(spec, id), nil
}

// add makes the state of spec with id.
func (s *Store) add(spec runtime.StateSpec, id uint64) *state {
	st := &state{s: s, spec: spec, id: id}
	switch spec.Kind {
	case runtime.KindValue:
		st.handle = valueState{st}
	case runtime.KindList:
		st.handle = listState{st}
	case runtime.KindMap:
		st.handle = mapState{st}
	default:
		st.handle = sortedMapState{mapState{st}}
	}
	s.states[spec.Name] = st
	s.specs = storekit.InsertSpec(s.specs, spec)
	return st
}

// States implements runtime.Store.
func (s *Store) States() []runtime.StateSpec { return slices.Clone(s.specs) }

// Snapshot implements runtime.Store. It commits the pending batch (at
// most Options.BatchSize of writes), takes a Pebble snapshot — a sequence
// number registered with the database, O(1) — and copies the list of
// states: O(states), independent of the number of entries. While the
// working directory refuses writes (see ErrFailed), a snapshot cannot
// include the pending writes and fails.
func (s *Store) Snapshot() (runtime.Snapshot, error) {
	if s.closed {
		return nil, fmt.Errorf("%w: cannot take a snapshot", runtime.ErrClosed)
	}
	if s.failed != nil {
		return nil, fmt.Errorf("pebble: cannot take a snapshot: %w", s.failed)
	}
	if s.batch != nil && !s.batch.Empty() {
		if err := s.h.writable(); err != nil {
			return nil, fmt.Errorf("pebble: cannot take a snapshot: the pending batch holds %d acknowledged writes: %w", s.batch.Count(), err)
		}
		if err := s.commit(); err != nil {
			return nil, fmt.Errorf("pebble: cannot take a snapshot: %w", err)
		}
	}
	if !s.h.ref() {
		return nil, fmt.Errorf("%w: cannot take a snapshot", runtime.ErrClosed)
	}
	ids := make(map[string]stateRef, len(s.states))
	for name, st := range s.states {
		ids[name] = stateRef{spec: st.spec, id: st.id}
	}
	return storekit.DropExpired(newSnapshot(s, s.db.NewSnapshot(), ids), &s.cfg), nil
}

// restoreBatch returns the size, in bytes of memtable (as the pending
// batch counts them: see memEntryOverhead), at which Restore commits a
// batch: a quarter of a memtable, below Pebble's large-batch threshold
// (half a memtable), so that each batch is applied to the memtable rather
// than queued as a memtable of its own. (Batches of 1 MiB of batch bytes,
// which small entries make several times larger in a memtable, became
// such flushable batches; restores of 1M entries of 24-byte values took
// 20-35% longer, in wall and CPU time, than with this bound.)
func (s *Store) restoreBatch() int64 { return int64(s.opts.MemTableSize / 4) }

// Restore implements runtime.Store. It checks every state before it loads
// anything: a key group that already holds entries of a restored state
// fails with runtime.ErrRestoreConflict, found with one bounded seek per
// (state, key group). It then writes the entries of the key groups both src
// and the store own, in batches; the elements of a list, which a View
// yields consecutively, go into one merge operand. Entries are checked as
// they are loaded: one in the wrong key group, a namespace on a keyed
// state or a user key on a value or list fails with runtime.ErrCorrupt.
func (s *Store) Restore(src runtime.View) error {
	if s.closed {
		return fmt.Errorf("%w: cannot restore", runtime.ErrClosed)
	}
	if s.iterating > 0 {
		return fmt.Errorf("%w: Restore", ErrWriteDuringIteration)
	}
	if s.failed != nil {
		return fmt.Errorf("pebble: restore: %w", s.failed)
	}
	if err := s.h.writable(); err != nil {
		return fmt.Errorf("pebble: restore: %w", err)
	}
	// The conflict check and the load read and write the database
	// directly.
	if err := s.commit(); err != nil {
		return fmt.Errorf("pebble: restore: %w", err)
	}
	// A rebuild of the key filter running would log every key loaded: the
	// end of the Restore rebuilds it instead.
	s.cancelFilterBuild()
	// The load writes around the states' set: they forget their last
	// keys (a key read as absent may be loaded).
	for _, st := range s.states {
		st.last.ok = false
	}
	it, err := s.db.NewIter(&pebbledb.IterOptions{})
	if err != nil {
		return fmt.Errorf("pebble: restore: %w", err)
	}
	s.restores.Note()
	r, err := storekit.CheckRestore(s.target(it), src)
	if cerr := it.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("pebble: restore: %w", cerr)
	}
	if err != nil {
		return err
	}
	groups, specs := r.Groups, r.States
	for _, spec := range specs {
		st, ok := s.states[spec.Name]
		if !ok {
			var err error
			if st, err = s.create(spec); err != nil {
				return fmt.Errorf("pebble: restore: %w", err)
			}
		}
		if groups.Empty() {
			continue
		}
		if err := s.load(st, src, groups); err != nil {
			return err
		}
	}
	if s.filter.rebuild {
		s.rebuildFilter() // the database holds every key: the load wrote it directly
	}
	return nil
}

// target describes the store to storekit; it answers Occupied with it.
func (s *Store) target(it *pebbledb.Iterator) storekit.Target {
	var bounds [2][]byte
	return storekit.Target{
		Name:       "pebble",
		Config:     s.cfg,
		Registered: storekit.Specs(s.states, func(st *state) runtime.StateSpec { return st.spec }),
		Occupied:   func(name string, kg int) (bool, error) { return occupied(it, &bounds, s.states[name], kg) },
	}
}

// occupied reports whether state st has an entry in key group kg: one
// seek of it, bounded by the state's prefix in that key group.
// bounds holds the iterator's bounds, reused from call to call.
func occupied(it *pebbledb.Iterator, bounds *[2][]byte, st *state, kg int) (bool, error) {
	bounds[0] = appendStatePrefix(bounds[0][:0], kg, st.id)
	bounds[1], _ = storekit.AppendPrefixEnd(bounds[1][:0], bounds[0])
	it.SetBounds(bounds[0], bounds[1])
	if it.First() {
		return true, nil
	}
	if err := it.Error(); err != nil {
		return false, fmt.Errorf("state %q, key group %d: %w", st.spec.Name, kg, err)
	}
	return false, nil
}

// load writes the entries of state st in groups from src.
func (s *Store) load(st *state, src runtime.View, groups runtime.KeyGroupRange) error {
	spec := st.spec
	// One buffer for every batch: sized for a full batch and its last
	// entry, and retained across Reset.
	limit := s.restoreBatch()
	b := s.db.NewBatch(pebbledb.WithInitialSizeBytes(int(min(limit, 1<<20))), pebbledb.WithMaxRetainedSizeBytes(int(limit+64<<10)))
	var size int64 // of b, in bytes of memtable
	defer func() { b.Close() }()
	commit := func() error {
		if b.Empty() {
			return nil
		}
		if err := s.write(size, func() error { return b.Commit(s.wo) }); err != nil {
			return err
		}
		b.Reset()
		size = 0
		return nil
	}
	var key, list []byte // the pending list's key and encoded elements
	pending := false
	flushList := func() error {
		if !pending {
			return nil
		}
		pending = false
		size += int64(memEntryOverhead + len(key) + len(list))
		s.filter.add(xxhash.Sum64(key))
		return b.Merge(key, list, nil)
	}
	for kg := range groups.All() {
		err := src.Scan(spec.Name, kg, func(e runtime.Entry) error {
			if err := storekit.CheckEntry(spec, kg, runtime.KeyGroupOfHash(runtime.HashKey(e.Key), s.cfg.MaxParallelism), e); err != nil {
				return err
			}
			s.kbuf = appendEntryKey(s.kbuf[:0], kg, st.id, e.Key, e.Namespace, spec.SubKeyed)
			if spec.Kind == runtime.KindList {
				if pending && bytes.Equal(key, s.kbuf) {
					list = storekit.AppendElem(list, e.Value)
					return nil
				}
				if err := flushList(); err != nil {
					return err
				}
				key = append(key[:0], s.kbuf...)
				list = storekit.AppendElem(list[:0], e.Value)
				pending = true
			} else {
				if spec.Kind.HasUserKey() {
					s.kbuf = append(s.kbuf, e.UserKey...)
				}
				s.filter.add(xxhash.Sum64(s.kbuf))
				if err := b.Set(s.kbuf, e.Value, nil); err != nil {
					return err
				}
				size += int64(memEntryOverhead + len(s.kbuf) + len(e.Value))
			}
			if size >= limit {
				return commit()
			}
			return nil
		})
		if err == nil {
			err = flushList()
		}
		if err != nil {
			return fmt.Errorf("pebble: restore: state %q, key group %d: %w", spec.Name, kg, err)
		}
	}
	if err := commit(); err != nil {
		return fmt.Errorf("pebble: restore: state %q: %w", spec.Name, err)
	}
	return nil
}

// Close implements runtime.Store. It closes the store at once — every
// method but Config and States then returns runtime.ErrClosed — and the
// database when no snapshot is live: live snapshots stay readable, and the
// last one's Release closes the database, flushes it (if the directory is
// kept and there is no write-ahead log) and removes the directory New made.
// Close fails with ErrWriteDuringIteration, and does nothing, if called
// from inside an iteration callback.
func (s *Store) Close() error {
	if s.closed {
		return nil
	}
	if s.iterating > 0 {
		return fmt.Errorf("%w: Close", ErrWriteDuringIteration)
	}
	s.closed = true
	runtime.ReleaseOperatorStates(s)
	s.kbuf, s.vbuf, s.wbuf, s.bufs, s.ukey, s.uold = nil, nil, nil, nil, nil, nil
	berr := s.closeBatch()
	if err := s.h.unref(); err != nil || berr == nil {
		return err
	}
	return fmt.Errorf("pebble: close of working directory %q: unflushed writes are lost: %w", s.h.dir, berr)
}

// write runs a write of the database that is committed on its own (with
// a write-ahead log, and Restore's batches), of n bytes of memtable: it
// fails if the working directory has failed or refuses writes (see
// handle.room), and turns a fatal Pebble error into ErrFailed.
func (s *Store) write(n int64, fn func() error) error {
	s.forgetCommitted()
	if err := s.h.writable(); err != nil {
		return err
	}
	if err := s.h.room(n); err != nil {
		return err
	}
	return s.h.guard(fn)
}

// takeBuf returns an empty scratch buffer, to be given back with giveBuf:
// an iteration keeps its bounds in one while reads made from inside its
// callback take others.
func (s *Store) takeBuf() []byte {
	if n := len(s.bufs); n > 0 {
		b := s.bufs[n-1]
		s.bufs = s.bufs[:n-1]
		return b[:0]
	}
	return make([]byte, 0, 64)
}

func (s *Store) giveBuf(b []byte) {
	if !s.closed {
		s.bufs = append(s.bufs, b)
	}
}
