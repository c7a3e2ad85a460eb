package cow

import (
	"fmt"
	"slices"

	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storekit"
)

// Store is the copy-on-write in-memory backend: a runtime.Store whose
// snapshots cost O(states × key groups). Like every Store it is used by one
// goroutine; its snapshots may be read and released on others.
type Store struct {
	restores storekit.Restores // counts Restores (runtime.RestoreCounter)
	cfg      runtime.StoreConfig
	opts     Options
	states   map[string]*state
	handles  map[string]runtime.State
	closed   bool
	// iterating counts the iterations running now: their callbacks must
	// not write.
	iterating int
	// updBuf holds the result of an Update's callback that goes through
	// Put's general path.
	updBuf []byte
	// snaps counts the snapshots; they report their release to it from
	// any goroutine.
	snaps *storekit.Snapshots
	// seq is the sequence number of the last snapshot: the epoch of the
	// pages and tables made since.
	seq uint64
	// testLoadFailed, if set (by tests), is called by a parallel Restore
	// once a worker's failure has stopped the others.
	testLoadFailed func()
}

// Restores implements runtime.RestoreCounter.
func (s *Store) Restores() (uint64, bool) { return s.restores.Restores() }

var _ runtime.Store = (*Store)(nil)

// New returns an empty store configured by opts.
func New(opts Options) (*Store, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Store{
		cfg:     o.StoreConfig,
		opts:    o,
		states:  make(map[string]*state),
		handles: make(map[string]runtime.State),
		snaps:   storekit.NewSnapshots(o.OnLeakedSnapshot),
	}, nil
}

// Config implements runtime.Store.
func (s *Store) Config() runtime.StoreConfig { return s.cfg }

// LiveSnapshots returns the number of snapshots taken and not yet freed:
// not released, or released while a Scan of theirs still runs.
// While it is above zero, writes copy what those snapshots can see; a count
// that only grows is a leaked snapshot (see also Options.OnLeakedSnapshot).
// It may be called from any goroutine.
func (s *Store) LiveSnapshots() int { return s.snaps.Live() }

// Register implements runtime.Store.
func (s *Store) Register(spec runtime.StateSpec) (runtime.State, error) {
	existing, err := storekit.CheckRegister(s.target(), s.closed, s.iterating > 0, spec)
	switch {
	case err != nil:
		return nil, err
	case existing:
		s.states[spec.Name].handed = true
		return s.handles[spec.Name], nil
	}
	h := s.create(spec)
	s.states[spec.Name].handed = true
	return h, nil
}

func (s *Store) create(spec runtime.StateSpec) runtime.State {
	st := &state{s: s, spec: spec, tabs: make([]*table, s.cfg.KeyGroups.Len()), start: s.cfg.KeyGroups.Start}
	var h runtime.State
	switch spec.Kind {
	case runtime.KindValue:
		h = valueState{st}
	case runtime.KindList:
		h = listState{st}
	case runtime.KindMap:
		h = mapState{st}
	default:
		h = sortedMapState{mapState{st}}
	}
	s.states[spec.Name] = st
	s.handles[spec.Name] = h
	return h
}

// States implements runtime.Store.
func (s *Store) States() []runtime.StateSpec {
	out := make([]runtime.StateSpec, 0, len(s.states))
	for _, st := range s.states {
		out = append(out, st.spec)
	}
	slices.SortFunc(out, func(a, b runtime.StateSpec) int { return cmpString(a.Name, b.Name) })
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Snapshot implements runtime.Store. It copies, for every state and owned
// key group, the table's roots and slab list (a few words), and records the
// arena's end in the table so that later writes copy what lies below it.
// It visits no entry.
func (s *Store) Snapshot() (runtime.Snapshot, error) {
	if s.closed {
		return nil, fmt.Errorf("%w: cannot snapshot", runtime.ErrClosed)
	}
	views := make(map[string]*stateView, len(s.states))
	snap := &snapshot{
		maxP:   s.cfg.MaxParallelism,
		groups: s.cfg.KeyGroups,
		specs:  s.States(),
		states: views,
	}
	snap.lease = storekit.Track(s.snaps, snap, func() error { freeViews(views); return nil })
	s.seq = snap.lease.Seq()
	for name, st := range s.states {
		sv := &stateView{spec: st.spec}
		if st.tab != nil {
			sv.tab = st.tab.Freeze(snap.lease)
		}
		for i, t := range st.tabs {
			if t == nil {
				continue
			}
			if t.empty() {
				t.dropFreed()
				continue
			}
			if sv.tabs == nil {
				sv.tabs = make([]*tableView, len(st.tabs))
			}
			tv := t.view()
			tv.slabs, tv.main, tv.seq, tv.lease = t.Slabs, t.main, s.seq, snap.lease
			sv.tabs[i] = tv
			t.protect(tv)
			t.marks = t.Mark()
			t.frozenEpoch = s.seq
		}
		snap.states[name] = sv
	}
	return storekit.DropExpired(snap, &s.cfg), nil
}

// Close implements runtime.Store. Live snapshots stay readable until they
// are released.
func (s *Store) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	runtime.ReleaseOperatorStates(s)
	for _, st := range s.states {
		clear(st.tabs)
		if st.tab != nil {
			st.tab.Drop()
		}
	}
	return nil
}
