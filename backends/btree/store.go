package btree

import (
	"fmt"
	"slices"

	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storekit"
	tb "github.com/tidwall/btree"
)

// ErrWriteDuringIteration reports a write (or a Restore) made from inside
// an iteration callback — List Get, Map Iterate, SortedMap Range,
// Namespaces — which the Store contract forbids. The write is refused and
// the store is unchanged.
// It is runtime.ErrWriteDuringIteration, which every backend returns.
var ErrWriteDuringIteration = runtime.ErrWriteDuringIteration

// layout says how a state's entries are spread over trees.
type layout uint8

const (
	// treePerGroup keeps one tree per state and owned key group.
	treePerGroup layout = iota
	// treePerState keeps one tree per state; the key-group prefix of the
	// item keys separates the key groups.
	treePerState
)

// defaultLayout is the layout New uses; the package doc explains the
// measurement behind it (BenchmarkLayout in layout_test.go reproduces it).
const defaultLayout = treePerGroup

// Store is the sorted in-memory backend: a runtime.Store that keeps each
// state in B-trees of tidwall/btree, ordered by item key (see the package
// doc), and takes snapshots with their O(1) copy-on-write Copy. Like every
// Store it is used by one goroutine, the operator's; its snapshots may be
// read and released on others.
type Store struct {
	restores storekit.Restores // counts Restores (runtime.RestoreCounter)
	cfg      runtime.StoreConfig
	opts     Options
	layout   layout
	states   map[string]*state
	specs    []runtime.StateSpec // of states, sorted by name
	closed   bool
	// iterating counts the iterations running now: their callbacks must
	// not write.
	iterating int
	// snaps counts the snapshots; they report their release to it from
	// any goroutine.
	snaps *storekit.Snapshots
	// scratch holds the item key of the current point operation.
	scratch []byte
	// bufs and iters are spare buffers and iterators for iterations. An
	// iteration takes what it needs and gives it back, so that a read
	// made from inside its callback gets its own, and a run of them
	// allocates nothing.
	bufs  [][]byte
	iters []*iterator
}

// iterator is an iterator over a tree's B-tree.
type iterator = tb.IterG[item]

// Restores implements runtime.RestoreCounter.
func (s *Store) Restores() (uint64, bool) { return s.restores.Restores() }

var _ runtime.Store = (*Store)(nil)

// New returns an empty store configured by opts.
func New(opts Options) (*Store, error) {
	return newStore(opts, defaultLayout)
}

func newStore(opts Options, l layout) (*Store, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Store{
		cfg:    o.StoreConfig,
		opts:   o,
		layout: l,
		states: make(map[string]*state),
		snaps:  storekit.NewSnapshots(o.OnLeakedSnapshot),
	}, nil
}

// Config implements runtime.Store.
func (s *Store) Config() runtime.StoreConfig { return s.cfg }

// LiveSnapshots returns the number of snapshots taken and not yet freed:
// not released, or released while a Scan of theirs still runs.
// A count that only grows is a leaked snapshot, which keeps every node and
// slab of the trees it copied in memory, however much the live trees have
// changed since, and makes their writes copy (see also
// Options.OnLeakedSnapshot). It may be called from any goroutine.
func (s *Store) LiveSnapshots() int { return s.snaps.Live() }

// Register implements runtime.Store.
func (s *Store) Register(spec runtime.StateSpec) (runtime.State, error) {
	existing, err := storekit.CheckRegister(s.target(), s.closed, s.iterating > 0, spec)
	switch {
	case err != nil:
		return nil, err
	case existing:
		return s.states[spec.Name].handle, nil
	}
	return s.create(spec).handle, nil
}

// create registers a new, empty state; spec is valid and its name is new.
func (s *Store) create(spec runtime.StateSpec) *state {
	n := 1
	if s.layout == treePerGroup {
		n = s.cfg.KeyGroups.Len()
	}
	st := &state{s: s, spec: spec, trees: make([]*tree, n)}
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

// Snapshot implements runtime.Store. It copies every non-empty tree with
// tidwall/btree's Copy, which allocates one tree header and shares every
// node, keeps the tree's slab list, and marks the end of its arena, below
// which later writes do not write while the snapshot is live: O(1) per
// tree, so O(states × key groups) in all. It visits no entry.
func (s *Store) Snapshot() (runtime.Snapshot, error) {
	if s.closed {
		return nil, fmt.Errorf("%w: cannot take a snapshot", runtime.ErrClosed)
	}
	d := &snapData{states: make(map[string]*stateView, len(s.states))}
	for name, st := range s.states {
		n := 0
		for _, t := range st.trees {
			if t != nil && t.bt.Len() > 0 {
				n++
			}
		}
		sv := &stateView{spec: st.spec, index: make([]uint16, len(st.trees)), trees: make([]treeView, 0, n)}
		for i, t := range st.trees {
			if t != nil && t.bt.Len() > 0 {
				sv.trees = append(sv.trees, treeView{bt: t.bt.Copy(), slabs: t.Slabs})
				sv.index[i] = uint16(len(sv.trees))
				t.marks = t.Mark()
			}
		}
		d.states[name] = sv
	}
	return storekit.DropExpired(newSnapshot(s, d), &s.cfg), nil
}

// Restore implements runtime.Store. It checks every state and key group
// before it loads anything: a key group that already holds entries of a
// restored state fails with runtime.ErrRestoreConflict (the store never
// merges or replaces). Entries are checked as they are loaded: one in the
// wrong key group, a namespace on a keyed state, a user key on a value or
// list, a repeated entry or a list whose elements are not consecutive
// fail with runtime.ErrCorrupt.
func (s *Store) Restore(src runtime.View) error {
	if s.closed {
		return fmt.Errorf("%w: cannot restore", runtime.ErrClosed)
	}
	if s.iterating > 0 {
		return fmt.Errorf("%w: Restore", ErrWriteDuringIteration)
	}
	s.restores.Note()
	r, err := storekit.CheckRestore(s.target(), src)
	if err != nil {
		return err
	}
	groups, specs := r.Groups, r.States
	for _, spec := range specs {
		st, ok := s.states[spec.Name]
		if !ok {
			st = s.create(spec)
		}
		for kg := range groups.All() {
			if err := st.load(src, kg); err != nil {
				return fmt.Errorf("btree: restore: state %q, key group %d: %w", spec.Name, kg, err)
			}
		}
	}
	return nil
}

// target describes the store to storekit.
func (s *Store) target() storekit.Target {
	return storekit.Target{
		Name:       "btree",
		Config:     s.cfg,
		Registered: storekit.Specs(s.states, func(st *state) runtime.StateSpec { return st.spec }),
		Occupied:   func(name string, kg int) (bool, error) { return s.states[name].hasGroup(kg), nil },
	}
}

// Close implements runtime.Store. It drops the live trees; snapshots hold
// their own copies and stay readable until released.
func (s *Store) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	runtime.ReleaseOperatorStates(s)
	for _, st := range s.states {
		clear(st.trees)
	}
	s.scratch, s.bufs, s.iters = nil, nil, nil
	return nil
}

// deletePrefix removes every item of t whose item key starts with p.
func (s *Store) deletePrefix(t *tree, p []byte) {
	it := s.takeIter(t)
	t.deletePrefix(p, it)
	s.giveIter(it)
}

// takeIter returns an iterator over t, to be given back with giveIter.
func (s *Store) takeIter(t *tree) *iterator {
	var it *iterator
	if n := len(s.iters); n > 0 {
		it = s.iters[n-1]
		s.iters = s.iters[:n-1]
	} else {
		it = new(iterator)
	}
	it.Init(t.bt, false)
	return it
}

func (s *Store) giveIter(it *iterator) {
	it.Release()
	if !s.closed {
		s.iters = append(s.iters, it)
	}
}

// minBuf is the capacity of a new scratch buffer: room for a short item
// key, which keyOf decodes into one.
const minBuf = 64

// takeBuf returns an empty scratch buffer of capacity at least minBuf, to
// be given back with giveBuf.
func (s *Store) takeBuf() []byte {
	if n := len(s.bufs); n > 0 {
		b := s.bufs[n-1]
		s.bufs = s.bufs[:n-1]
		return b[:0]
	}
	return make([]byte, 0, minBuf)
}

func (s *Store) giveBuf(b []byte) {
	if !s.closed && cap(b) >= minBuf {
		s.bufs = append(s.bufs, b)
	}
}
