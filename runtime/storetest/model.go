package storetest

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storekit"
)

// Model is the reference implementation of runtime.Store: plain Go maps, a
// sort wherever the contract requires an order, and deep copies for
// snapshots. It is meant to be obviously correct, not fast: Snapshot costs
// O(entries), which the contract forbids real backends.
//
// Model is stricter than the contract requires, so that it also catches
// callers (typed handles, the checkpoint reader) that break the rules:
//
//   - a Key whose Hash or Group does not match runtime.HashKey(Key) is
//     rejected with an error wrapping runtime.ErrInvalidKey;
//   - a non-empty Namespace on a keyed (not sub-keyed) state is rejected;
//   - a write from inside an iteration callback is rejected;
//   - slices returned by Get are overwritten with garbage at the next call on
//     the store, and slices passed to callbacks when the callback returns;
//   - Restore validates every entry it reads (key group, namespace, user key,
//     duplicates, list runs) and checks everything before changing anything.
//
// Like any Store, a Model is used by one goroutine; its snapshots are
// independent copies and may be read from any goroutine.
type Model struct {
	restores storekit.Restores // counts Restores (runtime.RestoreCounter)
	cfg      runtime.StoreConfig
	closed   bool
	states   map[string]*stateCore
	handles  map[string]runtime.State
	// loans are the slices returned by Get since the last call on the store.
	loans [][]byte
	// callbacks counts the iteration callbacks running now.
	callbacks int
}

// Restores implements runtime.RestoreCounter.
func (m *Model) Restores() (uint64, bool) { return m.restores.Restores() }

var _ runtime.Store = (*Model)(nil)

// NewModel returns an empty Model with the normalized cfg. It fails if cfg
// is invalid (see runtime.StoreConfig.Normalize).
func NewModel(cfg runtime.StoreConfig) (*Model, error) {
	cfg, err := cfg.Normalize()
	if err != nil {
		return nil, err
	}
	return &Model{
		cfg:     cfg,
		states:  make(map[string]*stateCore),
		handles: make(map[string]runtime.State),
	}, nil
}

// enter starts a call on the store: the slices lent by earlier calls become
// invalid, and the model makes sure of it.
func (m *Model) enter() {
	for _, b := range m.loans {
		poison(b)
	}
	m.loans = nil
}

// lend returns a copy of b that stays valid until the next call on the store.
func (m *Model) lend(b []byte) []byte {
	c := clone(b)
	m.loans = append(m.loans, c)
	return c
}

// callback runs fn as an iteration callback: writes are refused meanwhile.
func (m *Model) callback(fn func() bool) bool {
	m.callbacks++
	defer func() { m.callbacks-- }()
	return fn()
}

// Config implements runtime.Store.
func (m *Model) Config() runtime.StoreConfig { return m.cfg }

// Register implements runtime.Store.
func (m *Model) Register(spec runtime.StateSpec) (runtime.State, error) {
	m.enter()
	existing, err := storekit.CheckRegister(m.target(), m.closed, m.callbacks > 0, spec)
	switch {
	case err != nil:
		return nil, err
	case existing:
		return m.handles[spec.Name], nil
	}
	return m.create(spec), nil
}

// target describes the model to storekit.
func (m *Model) target() storekit.Target {
	return storekit.Target{
		Name:       "storetest",
		Config:     m.cfg,
		Registered: storekit.Specs(m.states, func(st *stateCore) runtime.StateSpec { return st.spec }),
		Occupied:   func(name string, kg int) (bool, error) { return len(m.states[name].groups[kg]) > 0, nil },
	}
}

// create registers a new, empty state; spec is valid and its name is new.
func (m *Model) create(spec runtime.StateSpec) runtime.State {
	core := &stateCore{m: m, spec: spec, groups: make(map[int]map[cellKey]*cell)}
	var h runtime.State
	switch spec.Kind {
	case runtime.KindValue:
		h = &valueState{core}
	case runtime.KindList:
		h = &listState{core}
	case runtime.KindMap:
		h = &mapState{core}
	case runtime.KindSortedMap:
		h = &sortedMapState{mapState{core}}
	default:
		panic(fmt.Sprintf("storetest: create called with invalid spec %v", spec))
	}
	m.states[spec.Name] = core
	m.handles[spec.Name] = h
	return h
}

// States implements runtime.Store.
func (m *Model) States() []runtime.StateSpec {
	m.enter()
	specs := make([]runtime.StateSpec, 0, len(m.states))
	for _, st := range m.states {
		specs = append(specs, st.spec)
	}
	slices.SortFunc(specs, func(a, b runtime.StateSpec) int { return cmp.Compare(a.Name, b.Name) })
	return specs
}

// Snapshot implements runtime.Store. It deep-copies every entry, so it costs
// O(entries); the returned *MemView shares nothing with the model, and
// holds no entry of a state with a TTL that is expired at the model's time
// (StoreConfig.Clock).
func (m *Model) Snapshot() (runtime.Snapshot, error) {
	m.enter()
	if m.closed {
		return nil, fmt.Errorf("%w: cannot take a snapshot", runtime.ErrClosed)
	}
	v := &MemView{
		maxP:   m.cfg.MaxParallelism,
		groups: m.cfg.KeyGroups,
		specs:  m.States(),
		data:   make(map[string]map[int][]runtime.Entry, len(m.states)),
	}
	now := m.cfg.Now().UnixMilli()
	for name, st := range m.states {
		v.data[name] = st.entries()
		if ttl := st.spec.TTL.Milliseconds(); ttl != 0 {
			// Expired entries stay out of every snapshot (the rule
			// storekit.DropExpired implements for the backends).
			for kg, es := range v.data[name] {
				live := es[:0]
				for _, e := range es {
					stamp, _, err := runtime.SplitTTLStamp(e.Value)
					if err != nil {
						return nil, fmt.Errorf("storetest: state %q, key group %d: %w", name, kg, err)
					}
					if !runtime.TTLExpired(stamp, ttl, now) {
						live = append(live, e)
					}
				}
				v.data[name][kg] = live
			}
		}
	}
	return v, nil
}

// Restore implements runtime.Store. It reads and checks all of src before it
// changes anything, so a failed Restore leaves the model as it was.
func (m *Model) Restore(src runtime.View) error {
	m.enter()
	if m.closed {
		return fmt.Errorf("%w: cannot restore", runtime.ErrClosed)
	}
	if m.callbacks > 0 {
		return fmt.Errorf("%w: storetest: Restore", runtime.ErrWriteDuringIteration)
	}
	m.restores.Note()
	r, err := storekit.CheckRestore(m.target(), src)
	if err != nil {
		return err
	}
	groups, specs := r.Groups, r.States
	loaded := make(map[string]map[int][]runtime.Entry, len(specs))
	for _, spec := range specs {
		loaded[spec.Name] = make(map[int][]runtime.Entry)
		for kg := range groups.All() {
			entries, err := readGroup(src, spec, kg)
			if err != nil {
				return fmt.Errorf("restore: %w", err)
			}
			loaded[spec.Name][kg] = entries
		}
	}
	for _, spec := range specs {
		st, ok := m.states[spec.Name]
		if !ok {
			m.create(spec)
			st = m.states[spec.Name]
		}
		for kg, entries := range loaded[spec.Name] {
			st.load(kg, entries)
		}
	}
	return nil
}

// Close implements runtime.Store. Snapshots are independent copies, so they
// stay readable.
func (m *Model) Close() error {
	m.enter()
	m.closed = true
	runtime.ReleaseOperatorStates(m)
	return nil
}

// cellKey addresses the entry of one (key, namespace) within a key group.
type cellKey struct{ key, ns string }

// cell is the entry of one (key, namespace): a value, a list or a map,
// depending on the state's kind. A cell exists only while it is not empty.
type cell struct {
	value []byte
	list  [][]byte
	m     map[string][]byte
}

// stateCore holds one state's entries and implements the methods every kind
// shares. The kind-specific handles embed it.
type stateCore struct {
	m      *Model
	spec   runtime.StateSpec
	groups map[int]map[cellKey]*cell
}

// Spec implements runtime.State.
func (s *stateCore) Spec() runtime.StateSpec { return s.spec }

// check starts an operation on k: it fails if the store is closed, if a write
// comes from inside a callback, if k is not owned or malformed, or if a keyed
// state is addressed with a namespace (when usesNamespace).
func (s *stateCore) check(k runtime.Key, usesNamespace, write bool) error {
	m := s.m
	m.enter()
	if m.closed {
		return fmt.Errorf("%w: state %q", runtime.ErrClosed, s.spec.Name)
	}
	if write && m.callbacks > 0 {
		return fmt.Errorf("%w: state %q", runtime.ErrWriteDuringIteration, s.spec.Name)
	}
	return storekit.CheckKey(&m.cfg, &s.spec, &k, usesNamespace)
}

// CheckWrite implements runtime.WriteChecker.
func (s *stateCore) CheckWrite(k runtime.Key) error { return s.check(k, true, true) }

func (s *stateCore) lookup(k runtime.Key) *cell {
	return s.groups[k.Group()][cellKey{string(k.Bytes()), string(k.Namespace())}]
}

func (s *stateCore) ensure(k runtime.Key) *cell {
	return s.ensureIn(k.Group(), k.Bytes(), k.Namespace())
}

// ensureIn is ensure of (key, ns) in key group kg.
func (s *stateCore) ensureIn(kg int, key, ns []byte) *cell {
	g := s.groups[kg]
	if g == nil {
		g = make(map[cellKey]*cell)
		s.groups[kg] = g
	}
	ck := cellKey{string(key), string(ns)}
	c := g[ck]
	if c == nil {
		c = &cell{}
		if s.spec.Kind.HasUserKey() {
			c.m = make(map[string][]byte)
		}
		g[ck] = c
	}
	return c
}

func (s *stateCore) drop(group int, ck cellKey) {
	g := s.groups[group]
	delete(g, ck)
	if len(g) == 0 {
		delete(s.groups, group)
	}
}

// Clear implements runtime.State.
func (s *stateCore) Clear(k runtime.Key) error {
	if err := s.check(k, true, true); err != nil {
		return err
	}
	s.drop(k.Group(), cellKey{string(k.Bytes()), string(k.Namespace())})
	return nil
}

// Namespaces implements runtime.State, in Go map order.
func (s *stateCore) Namespaces(k runtime.Key, fn func(ns []byte) bool) error {
	if err := s.check(k, false, false); err != nil {
		return err
	}
	var nss []string
	for ck := range s.groups[k.Group()] {
		if ck.key == string(k.Bytes()) {
			nss = append(nss, ck.ns)
		}
	}
	slices.Sort(nss) // the model is a sorted store (storetest.Sorted)
	for _, ns := range nss {
		b := []byte(ns)
		more := s.m.callback(func() bool { return fn(b) })
		poison(b)
		if !more {
			break
		}
	}
	return nil
}

// Keys implements runtime.State, in encoded order.
func (s *stateCore) Keys(kg int, fn func(key []byte) bool) error {
	m := s.m
	m.enter()
	if err := storekit.CheckKeys(&m.cfg, s.spec.Name, m.closed, kg, fn); err != nil {
		return err
	}
	seen := map[string]bool{}
	var keys []string
	for ck := range s.groups[kg] {
		if !seen[ck.key] {
			seen[ck.key] = true
			keys = append(keys, ck.key)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		b := []byte(k)
		more := m.callback(func() bool { return fn(b) })
		poison(b)
		if !more {
			break
		}
	}
	return nil
}

// DeleteAll implements runtime.State.
func (s *stateCore) DeleteAll(k runtime.Key) error {
	if err := s.check(k, false, true); err != nil {
		return err
	}
	for ck := range s.groups[k.Group()] {
		if ck.key == string(k.Bytes()) {
			s.drop(k.Group(), ck)
		}
	}
	return nil
}

// entries returns deep copies of the state's entries per key group, ordered
// by (key, namespace, user key), list elements in list order.
func (s *stateCore) entries() map[int][]runtime.Entry {
	out := make(map[int][]runtime.Entry, len(s.groups))
	for kg, cells := range s.groups {
		cks := make([]cellKey, 0, len(cells))
		for ck := range cells {
			cks = append(cks, ck)
		}
		slices.SortFunc(cks, func(a, b cellKey) int {
			return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.ns, b.ns))
		})
		var es []runtime.Entry
		for _, ck := range cks {
			c := cells[ck]
			e := runtime.Entry{Key: []byte(ck.key), Namespace: []byte(ck.ns)}
			switch s.spec.Kind {
			case runtime.KindValue:
				e.Value = clone(c.value)
				es = append(es, e)
			case runtime.KindList:
				for _, elem := range c.list {
					e.Value = clone(elem)
					es = append(es, e)
				}
			default:
				for _, uk := range slices.Sorted(maps.Keys(c.m)) {
					e.UserKey = []byte(uk)
					e.Value = clone(c.m[uk])
					es = append(es, e)
				}
			}
		}
		out[kg] = es
	}
	return out
}

// load adds entries read by readGroup to key group kg, which holds no entry
// of the state.
func (s *stateCore) load(kg int, entries []runtime.Entry) {
	for _, e := range entries {
		c := s.ensureIn(kg, e.Key, e.Namespace)
		switch s.spec.Kind {
		case runtime.KindValue:
			c.value = clone(e.Value)
		case runtime.KindList:
			c.list = append(c.list, clone(e.Value))
		default:
			c.m[string(e.UserKey)] = clone(e.Value)
		}
	}
}

// valueState is the handle of a KindValue state.
type valueState struct{ *stateCore }

// Get implements runtime.ValueState.
func (s *valueState) Get(k runtime.Key) ([]byte, bool, error) {
	if err := s.check(k, true, false); err != nil {
		return nil, false, err
	}
	c := s.lookup(k)
	if c == nil {
		return nil, false, nil
	}
	return s.m.lend(c.value), true, nil
}

// Put implements runtime.ValueState.
func (s *valueState) Put(k runtime.Key, value []byte) error {
	if err := s.check(k, true, true); err != nil {
		return err
	}
	s.ensure(k).value = clone(value)
	return nil
}

// Update implements runtime.ValueUpdater.
func (s *valueState) Update(k runtime.Key, fn func(old []byte, found bool) ([]byte, error)) error {
	return s.update(k, fn, func(c *cell) ([]byte, bool) {
		if c == nil {
			return nil, false
		}
		return c.value, true
	}, func(v []byte) { s.ensure(k).value = v })
}

// update is the model of a one-lookup Update (ValueUpdater, MapUpdater):
// fn sees a copy of the old value (read from k's cell, nil if k has none),
// poisoned once fn returns so that a store that let fn's result alias it
// shows; write stores a copy of fn's result.
func (s *stateCore) update(k runtime.Key, fn func(old []byte, found bool) ([]byte, error), read func(*cell) ([]byte, bool), write func([]byte)) error {
	if err := s.check(k, true, true); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("storetest: state %q: Update with a nil callback", s.spec.Name)
	}
	ov, found := read(s.lookup(k))
	old := clone(ov)
	var nv []byte
	var ferr error
	s.m.callback(func() bool {
		nv, ferr = fn(old, found)
		return true
	})
	val := clone(nv) // before old is poisoned: nv may be old
	poison(old)
	if ferr != nil {
		return ferr
	}
	write(val)
	return nil
}

// listState is the handle of a KindList state.
type listState struct{ *stateCore }

// Get implements runtime.ListState.
func (s *listState) Get(k runtime.Key, fn func(elem []byte) bool) error {
	if err := s.check(k, true, false); err != nil {
		return err
	}
	c := s.lookup(k)
	if c == nil {
		return nil
	}
	for _, elem := range slices.Clone(c.list) {
		b := clone(elem)
		more := s.m.callback(func() bool { return fn(b) })
		poison(b)
		if !more {
			break
		}
	}
	return nil
}

// Add implements runtime.ListState.
func (s *listState) Add(k runtime.Key, elem []byte) error {
	if err := s.check(k, true, true); err != nil {
		return err
	}
	c := s.ensure(k)
	c.list = append(c.list, clone(elem))
	return nil
}

// AddAll implements runtime.ListState.
func (s *listState) AddAll(k runtime.Key, elems [][]byte) error {
	if err := s.check(k, true, true); err != nil {
		return err
	}
	if len(elems) == 0 {
		return nil
	}
	c := s.ensure(k)
	for _, e := range elems {
		c.list = append(c.list, clone(e))
	}
	return nil
}

// Replace implements runtime.ListState.
func (s *listState) Replace(k runtime.Key, elems [][]byte) error {
	if err := s.check(k, true, true); err != nil {
		return err
	}
	if len(elems) == 0 {
		s.drop(k.Group(), cellKey{string(k.Bytes()), string(k.Namespace())})
		return nil
	}
	list := make([][]byte, len(elems))
	for i, e := range elems {
		list[i] = clone(e)
	}
	s.ensure(k).list = list
	return nil
}

// mapState is the handle of a KindMap state; sortedMapState extends it.
type mapState struct{ *stateCore }

// Get implements runtime.MapState.
func (s *mapState) Get(k runtime.Key, userKey []byte) ([]byte, bool, error) {
	if err := s.check(k, true, false); err != nil {
		return nil, false, err
	}
	c := s.lookup(k)
	if c == nil {
		return nil, false, nil
	}
	v, ok := c.m[string(userKey)]
	if !ok {
		return nil, false, nil
	}
	return s.m.lend(v), true, nil
}

// Put implements runtime.MapState.
func (s *mapState) Put(k runtime.Key, userKey, value []byte) error {
	if err := s.check(k, true, true); err != nil {
		return err
	}
	s.ensure(k).m[string(userKey)] = clone(value)
	return nil
}

// Update implements runtime.MapUpdater.
func (s *mapState) Update(k runtime.Key, userKey []byte, fn func(old []byte, found bool) ([]byte, error)) error {
	return s.update(k, fn, func(c *cell) ([]byte, bool) {
		if c == nil {
			return nil, false
		}
		v, ok := c.m[string(userKey)]
		return v, ok
	}, func(v []byte) { s.ensure(k).m[string(userKey)] = v })
}

// Delete implements runtime.MapState.
func (s *mapState) Delete(k runtime.Key, userKey []byte) error {
	if err := s.check(k, true, true); err != nil {
		return err
	}
	c := s.lookup(k)
	if c == nil {
		return nil
	}
	delete(c.m, string(userKey))
	if len(c.m) == 0 {
		s.drop(k.Group(), cellKey{string(k.Bytes()), string(k.Namespace())})
	}
	return nil
}

// Iterate implements runtime.MapState: in Go map order for KindMap, so that
// callers cannot come to rely on an order, and ascending for KindSortedMap.
func (s *mapState) Iterate(k runtime.Key, fn func(userKey, value []byte) bool) error {
	if err := s.check(k, true, false); err != nil {
		return err
	}
	s.visit(k, nil, nil, false, fn)
	return nil
}

// Edit implements runtime.MapState.
func (s *mapState) Edit(k runtime.Key, fn func(userKey, value []byte) (runtime.MapEdit, error)) error {
	return storekit.EditMap(s, k, fn)
}

// visit calls fn with the entries of k's map within [lo, hi) (see inRange),
// sorted unless the state is a KindMap, descending if reverse.
func (s *mapState) visit(k runtime.Key, lo, hi []byte, reverse bool, fn func(userKey, value []byte) bool) {
	c := s.lookup(k)
	if c == nil {
		return
	}
	var uks []string
	for uk := range c.m {
		if inRange([]byte(uk), lo, hi) {
			uks = append(uks, uk)
		}
	}
	if s.spec.Kind == runtime.KindSortedMap {
		slices.Sort(uks)
		if reverse {
			slices.Reverse(uks)
		}
	}
	vals := make([][]byte, len(uks))
	for i, uk := range uks {
		vals[i] = c.m[uk]
	}
	for i, uk := range uks {
		u, v := []byte(uk), clone(vals[i])
		more := s.m.callback(func() bool { return fn(u, v) })
		poison(u)
		poison(v)
		if !more {
			return
		}
	}
}

// sortedMapState is the handle of a KindSortedMap state.
type sortedMapState struct{ mapState }

// Range implements runtime.SortedMapState.
func (s *sortedMapState) Range(k runtime.Key, lo, hi []byte, reverse bool, fn func(userKey, value []byte) bool) error {
	if err := s.check(k, true, false); err != nil {
		return err
	}
	s.visit(k, lo, hi, reverse, fn)
	return nil
}

// EditRange implements runtime.SortedMapState.
func (s *sortedMapState) EditRange(k runtime.Key, lo, hi []byte, reverse bool, fn func(userKey, value []byte) (runtime.MapEdit, error)) error {
	return storekit.EditRange(s, k, lo, hi, reverse, fn)
}
