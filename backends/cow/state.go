package cow

import (
	"encoding/binary"
	"fmt"

	"github.com/stategen/stategen/backends/internal/arena"
	"github.com/stategen/stategen/backends/internal/entryidx"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storekit"
)

// state is one registered state: a table per owned key group, made on the
// first write to it.
type state struct {
	s     *Store
	spec  runtime.StateSpec
	tabs  []*table
	start int           // the first owned key group: tabs[kg-start] is kg's table
	gate  entryidx.Gate // whether map reads use the entry index
	// tab is the table of Go values the state is kept in if it is hosted
	// (see host.go); its tabs are then empty.
	tab runtime.Table
	// handed is set once Register or HostTable has returned the state: a
	// handle may hold it, so it is never made a table from then on.
	handed bool
}

// hash returns the hash of k's entry in the main table: the key's stable
// hash, mixed with a cheap hash of the namespace for sub-keyed states.
func (st *state) hash(k runtime.Key) uint64 {
	if !st.spec.SubKeyed {
		return k.Hash()
	}
	return k.Hash() ^ nsHash(k.Namespace())
}

// rtable checks a read of k and returns k's table, nil if it has none.
func (st *state) rtable(k runtime.Key, usesNS bool) (*table, error) {
	s := st.s
	if s.closed {
		return nil, fmt.Errorf("%w: state %q", runtime.ErrClosed, st.spec.Name)
	}
	if err := storekit.CheckKey(&s.cfg, &st.spec, &k, usesNS); err != nil {
		return nil, err
	}
	return st.tabs[k.Group()-s.cfg.KeyGroups.Start], nil
}

// writable checks a write of k and returns k's table, nil if it has none
// yet.
func (st *state) writable(k runtime.Key, usesNS bool) (*table, error) {
	t, err := st.rtable(k, usesNS)
	if err != nil {
		return nil, err
	}
	if st.s.iterating > 0 {
		return nil, fmt.Errorf("%w: cow: state %q", runtime.ErrWriteDuringIteration, st.spec.Name)
	}
	if t != nil && len(t.Slabs) > arena.MaxSlabs-slabHeadroom {
		return nil, fmt.Errorf("%w: state %q, key group %d", ErrTooLarge, st.spec.Name, k.Group())
	}
	return t, nil
}

// CheckWrite implements runtime.WriteChecker.
func (st *state) CheckWrite(k runtime.Key) error {
	_, err := st.writable(k, true)
	return err
}

// wtable checks a write of k and returns k's table, making it if needed,
// ready for writing.
func (st *state) wtable(k runtime.Key, usesNS bool) (*table, error) {
	t, err := st.writable(k, usesNS)
	if err != nil {
		return nil, err
	}
	s := st.s
	if t == nil {
		t = newTable(st.spec.Kind, &s.opts, s.seq)
		st.tabs[k.Group()-s.cfg.KeyGroups.Start] = t
	}
	if t.cow = s.snaps.Any(); !t.cow && len(t.prot) != 0 {
		t.dropFreed()
	}
	t.epoch = s.seq
	t.step(&t.main)
	return t, nil
}

// done ends a write on t.
func (st *state) done(t *table, err error) error {
	t.maybeCompact()
	if err != nil {
		return fmt.Errorf("state %q: %w", st.spec.Name, err)
	}
	return nil
}

// created records a new (key, namespace) in the namespace index.
func (st *state) created(t *table, k runtime.Key) error {
	if !st.spec.SubKeyed {
		return nil
	}
	t.step(&t.nsIdx)
	_, err := t.treePut(&t.nsIdx, k.Hash(), k.Bytes(), nil, k.Namespace(), nil, false)
	return err
}

// removed drops a (key, namespace) from the namespace index.
func (st *state) removed(t *table, k runtime.Key) {
	if st.spec.SubKeyed {
		t.step(&t.nsIdx)
		t.treeDelete(&t.nsIdx, k.Hash(), k.Bytes(), nil, k.Namespace())
	}
}

// Spec implements runtime.State.
func (st *state) Spec() runtime.StateSpec { return st.spec }

// Clear implements runtime.State.
func (st *state) Clear(k runtime.Key) error {
	t, err := st.wtable(k, true)
	if err != nil {
		return err
	}
	h := st.hash(k)
	if rec, l := find(t.Slabs, &t.main, h, k.Bytes(), k.Namespace()); rec != nil {
		_, _, val, _, _ := decodeEntry(recEntry(t.Slabs, rec))
		t.removeEntry(&t.main, l, t.owned(val))
		st.removed(t, k)
	}
	return st.done(t, nil)
}

// Namespaces implements runtime.State. Sub-keyed states report namespaces
// in ascending byte order.
func (st *state) Namespaces(k runtime.Key, fn func(ns []byte) bool) error {
	t, err := st.rtable(k, false)
	if err != nil || t == nil {
		return err
	}
	st.s.iterating++
	defer func() { st.s.iterating-- }()
	if !st.spec.SubKeyed {
		if rec, _ := find(t.Slabs, &t.main, k.Hash(), k.Bytes(), nil); rec != nil {
			fn([]byte{})
		}
		return nil
	}
	rec, _ := find(t.Slabs, &t.nsIdx, k.Hash(), k.Bytes(), nil)
	if rec == nil {
		return nil
	}
	_, _, rv, _, _ := decodeEntry(recEntry(t.Slabs, rec))
	root, ok := decodeBtree(rv)
	if !ok {
		return errCorrupt
	}
	return btRange(t.Slabs, &root, nil, nil, false, func(ns, _ []byte) bool { return fn(ns) })
}

// Keys implements runtime.State, in table order. A keyed state's main
// table has one record per key; a sub-keyed state's namespace index has
// one per key, whatever its number of namespaces.
func (st *state) Keys(kg int, fn func(key []byte) bool) error {
	s := st.s
	if err := storekit.CheckKeys(&s.cfg, st.spec.Name, s.closed, kg, fn); err != nil {
		return err
	}
	t := st.tabs[kg-s.cfg.KeyGroups.Start]
	if t == nil {
		return nil
	}
	r := &t.main
	if st.spec.SubKeyed {
		r = &t.nsIdx
	}
	s.iterating++
	defer func() { s.iterating-- }()
	bad := false
	scanTable(r, func(rec []byte) bool {
		key, _, _, _, ok := decodeEntry(recEntry(t.Slabs, rec))
		if !ok {
			bad = true
			return false
		}
		return fn(key[:len(key):len(key)])
	})
	if bad {
		return fmt.Errorf("cow: state %q, key group %d: %w", st.spec.Name, kg, errCorrupt)
	}
	return nil
}

// DeleteAll implements runtime.State.
func (st *state) DeleteAll(k runtime.Key) error {
	if !st.spec.SubKeyed {
		return st.Clear(k.WithNamespace(nil))
	}
	t, err := st.wtable(k, false)
	if err != nil {
		return err
	}
	t.step(&t.nsIdx)
	rec, l := find(t.Slabs, &t.nsIdx, k.Hash(), k.Bytes(), nil)
	if rec == nil {
		return st.done(t, nil)
	}
	_, _, rv, _, _ := decodeEntry(recEntry(t.Slabs, rec))
	root, _ := decodeBtree(rv)
	slabs := t.Slabs // removals below only append to the arena
	err = btRange(slabs, &root, nil, nil, false, func(ns, _ []byte) bool {
		h := k.Hash() ^ nsHash(ns)
		if mrec, ml := find(t.Slabs, &t.main, h, k.Bytes(), ns); mrec != nil {
			_, _, val, _, _ := decodeEntry(recEntry(t.Slabs, mrec))
			t.removeEntry(&t.main, ml, t.owned(val))
		}
		return true
	})
	t.removeEntry(&t.nsIdx, l, root.bytes)
	return st.done(t, err)
}

// valueState implements runtime.ValueState.
type valueState struct{ *state }

// Get implements runtime.ValueState. The value aliases the store's memory:
// it is read-only and valid until the next call on the store.
//
// The common case — a keyed state, an owned key group (of a Key made for
// the store's maxParallelism), an inline entry — is looked up here without
// a call: a Get is one cache miss, and a short
// path lets the processor overlap the misses of consecutive Gets.
func (v valueState) Get(k runtime.Key) ([]byte, bool, error) {
	st := v.state
	if i := k.Group() - st.start; uint(i) < uint(len(st.tabs)) && k.MaxParallelism() == st.s.cfg.MaxParallelism && !st.spec.SubKeyed && len(k.Namespace()) == 0 && !st.s.closed {
		t := st.tabs[i]
		if t == nil {
			return nil, false, nil
		}
		r := &t.main
		kl := len(k.Bytes())
		if r.odir == nil && r.logcap != 0 && kl < 0x80 {
			mask := 1<<r.logcap - 1
			pos := int(k.Hash() >> (64 - r.logcap))
			want := uint32(k.Hash()>>40)<<8 | recInline
			w := int(r.w)
			for {
				b := r.dir[pos>>pageShift].b
				off := (pos & (pageSlots - 1)) * w
				rec := b[off : off+w : off+w]
				c := binary.LittleEndian.Uint32(rec)
				if c == want && rec[4] == byte(kl) && rec[5] == 0 && rec[6] < 0x80 {
					vs := 7 + kl
					ve := vs + int(rec[6])
					if ve <= w && bytesEqual(rec[7:vs], k.Bytes()) {
						return rec[vs:ve:ve], true, nil
					}
				} else if c == recEmpty {
					return nil, false, nil
				} else if c == want^recInline^recRef {
					break
				}
				pos = (pos + 1) & mask
			}
		}
	}
	return v.get(k)
}

// get is Get's general path.
func (v valueState) get(k runtime.Key) ([]byte, bool, error) {
	t, err := v.rtable(k, true)
	if err != nil || t == nil {
		return nil, false, err
	}
	h := v.hash(k)
	switch rec, _, vs, ve, res := lookupInline(&t.main, h, k.Bytes(), k.Namespace()); res {
	case lookupFound:
		return rec[vs:ve:ve], true, nil
	case lookupAbsent:
		return nil, false, nil
	}
	rec, _ := find(t.Slabs, &t.main, h, k.Bytes(), k.Namespace())
	if rec == nil {
		return nil, false, nil
	}
	_, _, val, _, _ := decodeEntry(recEntry(t.Slabs, rec))
	return val, true, nil
}

// Put implements runtime.ValueState.
//
// The common case — a keyed state, no live snapshot, an inline entry that
// the new value still fits (setInline) — is an overwrite in place, done
// here without the checks and bookkeeping of the general path (which it
// does not need: it allocates nothing and moves nothing).
func (v valueState) Put(k runtime.Key, value []byte) error {
	st := v.state
	if s := st.s; !s.closed && s.iterating == 0 && !st.spec.SubKeyed && len(k.Namespace()) == 0 && k.MaxParallelism() == s.cfg.MaxParallelism && !s.snaps.Any() {
		if i := k.Group() - st.start; uint(i) < uint(len(st.tabs)) {
			if t := st.tabs[i]; t != nil {
				if rec, _, vs, ve, res := lookupInline(&t.main, k.Hash(), k.Bytes(), nil); res == lookupFound && fitsInline(rec, vs, ve, value) {
					t.main.setInline(rec, vs, ve, value)
					return nil
				}
			}
		}
	}
	return v.put(k, value)
}

// Update implements runtime.ValueUpdater: one lookup finds the value for
// fn and, in the common case — a keyed state, no live snapshot, an inline
// entry that fn's result still fits (fitsInline) — the place to write
// fn's result (Put's fast path, without its lookup). Otherwise the result
// goes through Put's general path.
func (v valueState) Update(k runtime.Key, fn func(old []byte, found bool) ([]byte, error)) error {
	st := v.state
	s := st.s
	t, err := st.utable(k, fn)
	if err != nil {
		return err
	}
	var (
		old     []byte
		found   bool
		inPlace []byte // the value's record, if it may be overwritten in place
		vs, ve  int    // the bounds of the value in inPlace
	)
	if t != nil {
		h := st.hash(k)
		var rec []byte
		var res int
		switch rec, _, vs, ve, res = lookupInline(&t.main, h, k.Bytes(), k.Namespace()); res {
		case lookupFound:
			old, found = rec[vs:ve:ve], true
			if !st.spec.SubKeyed {
				inPlace = rec
			}
		case lookupAbsent:
		default:
			if rec, _ := find(t.Slabs, &t.main, h, k.Bytes(), k.Namespace()); rec != nil {
				_, _, old, _, _ = decodeEntry(recEntry(t.Slabs, rec))
				found = true
			}
		}
	}
	nv, err := st.callUpdate(fn, old, found)
	if err != nil {
		return err
	}
	if inPlace != nil && fitsInline(inPlace, vs, ve, nv) && !s.snaps.Any() && !s.closed {
		t.main.setInline(inPlace, vs, ve, nv)
		return nil
	}
	if found {
		// nv may be (part of) old, which the general path may move.
		s.updBuf = append(s.updBuf[:0], nv...)
		nv = s.updBuf
	}
	return v.put(k, nv)
}

// put is Put's general path.
func (v valueState) put(k runtime.Key, value []byte) error {
	t, err := v.wtable(k, true)
	if err != nil {
		return err
	}
	h := v.hash(k)
	// The common case first: an inline value that the new one still fits
	// is overwritten where it is (once mutRecord has made its page safe to
	// write, if a live snapshot sees it).
	if rec, pos, vs, ve, res := lookupInline(&t.main, h, k.Bytes(), k.Namespace()); res == lookupFound && fitsInline(rec, vs, ve, value) {
		if t.cow {
			rec = t.mutRecord(&t.main, false, pos)
		}
		t.main.setInline(rec, vs, ve, value)
		return v.done(t, nil)
	}
	if rec, l := find(t.Slabs, &t.main, h, k.Bytes(), k.Namespace()); rec != nil {
		t.setValue(&t.main, l, value)
		return v.done(t, nil)
	}
	if err := t.insertEntry(&t.main, h, k.Bytes(), k.Namespace(), value); err != nil {
		return v.done(t, err)
	}
	return v.done(t, v.created(t, k))
}

// listState implements runtime.ListState.
type listState struct{ *state }

// Get implements runtime.ListState.
func (ls listState) Get(k runtime.Key, fn func(elem []byte) bool) error {
	t, err := ls.rtable(k, true)
	if err != nil || t == nil {
		return err
	}
	rec, _ := find(t.Slabs, &t.main, ls.hash(k), k.Bytes(), k.Namespace())
	if rec == nil {
		return nil
	}
	_, _, hv, _, _ := decodeEntry(recEntry(t.Slabs, rec))
	ls.s.iterating++
	defer func() { ls.s.iterating-- }()
	return listScan(t.Slabs, hv, fn)
}

// Add implements runtime.ListState.
func (ls listState) Add(k runtime.Key, elem []byte) error {
	one := [1][]byte{elem}
	return ls.AddAll(k, one[:])
}

// AddAll implements runtime.ListState.
func (ls listState) AddAll(k runtime.Key, elems [][]byte) error {
	t, err := ls.wtable(k, true)
	if err != nil {
		return err
	}
	if len(elems) == 0 {
		return ls.done(t, nil)
	}
	created, err := t.listAppend(ls.hash(k), k.Bytes(), k.Namespace(), elems)
	if err == nil && created {
		err = ls.created(t, k)
	}
	return ls.done(t, err)
}

// Replace implements runtime.ListState.
func (ls listState) Replace(k runtime.Key, elems [][]byte) error {
	if len(elems) == 0 {
		return ls.Clear(k)
	}
	t, err := ls.wtable(k, true)
	if err != nil {
		return err
	}
	created, err := t.listReplace(ls.hash(k), k.Bytes(), k.Namespace(), elems)
	if err == nil && created {
		err = ls.created(t, k)
	}
	return ls.done(t, err)
}

// mapState implements runtime.MapState.
type mapState struct{ *state }

// Get implements runtime.MapState.
func (m mapState) Get(k runtime.Key, userKey []byte) ([]byte, bool, error) {
	t, err := m.rtable(k, true)
	if err != nil || t == nil {
		return nil, false, err
	}
	_, v, ok := t.mapGet(&m.gate, m.hash(k), k.Bytes(), k.Namespace(), userKey)
	return v, ok, nil
}

// Put implements runtime.MapState.
func (m mapState) Put(k runtime.Key, userKey, value []byte) error {
	return m.put(k, userKey, value, false)
}

// put is Put; with index it adds the entry to the entry index (Update's
// entries, read-modify-written, are read again; Put's, timers' among them,
// are often not).
func (m mapState) put(k runtime.Key, userKey, value []byte, index bool) error {
	t, err := m.wtable(k, true)
	if err != nil {
		return err
	}
	created, err := t.treePut(&t.main, m.hash(k), k.Bytes(), k.Namespace(), userKey, value, index && !t.noIdx)
	if err == nil && created {
		err = m.created(t, k)
	}
	return m.done(t, err)
}

// Update implements runtime.MapUpdater: one lookup finds the entry for fn
// and, when no live snapshot shares it and fn's result has the old value's
// length, the place to write that result. Otherwise the result goes
// through Put.
func (m mapState) Update(k runtime.Key, userKey []byte, fn func(old []byte, found bool) ([]byte, error)) error {
	st := m.state
	s := st.s
	t, err := st.utable(k, fn)
	if err != nil {
		return err
	}
	var (
		old   []byte
		found bool
	)
	if t != nil {
		_, old, found = t.mapGet(&m.gate, m.hash(k), k.Bytes(), k.Namespace(), userKey)
		old = old[:len(old):len(old)]
	}
	nv, err := st.callUpdate(fn, old, found)
	if err != nil {
		return err
	}
	// Without a live snapshot no item is shared: old's bytes are the
	// entry's own (as btPut writes a value of the same length).
	if found && len(nv) == len(old) && !s.snaps.Any() && !s.closed {
		copy(old, nv)
		return nil
	}
	if found {
		// nv may be (part of) old, which Put may move.
		s.updBuf = append(s.updBuf[:0], nv...)
		nv = s.updBuf
	}
	return m.put(k, userKey, nv, !m.gate.Cold())
}

// utable checks an Update of k with fn and returns k's table, nil if it
// has none (the lookup comes before fn, the write after it).
func (st *state) utable(k runtime.Key, fn func(old []byte, found bool) ([]byte, error)) (*table, error) {
	if fn == nil {
		return nil, fmt.Errorf("cow: state %q: Update with a nil callback", st.spec.Name)
	}
	t, err := st.rtable(k, true)
	if err != nil {
		return nil, err
	}
	if st.s.iterating > 0 {
		return nil, fmt.Errorf("%w: cow: state %q", runtime.ErrWriteDuringIteration, st.spec.Name)
	}
	return t, nil
}

// callUpdate calls the function of an Update with the old value, refusing
// writes while it runs.
func (st *state) callUpdate(fn func(old []byte, found bool) ([]byte, error), old []byte, found bool) ([]byte, error) {
	st.s.iterating++
	defer func() { st.s.iterating-- }()
	return fn(old, found)
}

// Delete implements runtime.MapState.
func (m mapState) Delete(k runtime.Key, userKey []byte) error {
	t, err := m.wtable(k, true)
	if err != nil {
		return err
	}
	if t.treeDelete(&t.main, m.hash(k), k.Bytes(), k.Namespace(), userKey) {
		m.removed(t, k)
	}
	return m.done(t, nil)
}

// Iterate implements runtime.MapState; both map kinds iterate in ascending
// order of user key.
func (m mapState) Iterate(k runtime.Key, fn func(userKey, value []byte) bool) error {
	return m.scan(k, nil, nil, false, fn)
}

// Edit implements runtime.MapState.
func (m mapState) Edit(k runtime.Key, fn func(userKey, value []byte) (runtime.MapEdit, error)) error {
	return storekit.EditMap(m, k, fn)
}

func (m mapState) scan(k runtime.Key, lo, hi []byte, reverse bool, fn func(userKey, value []byte) bool) error {
	t, err := m.rtable(k, true)
	if err != nil || t == nil {
		return err
	}
	rec, _ := find(t.Slabs, &t.main, m.hash(k), k.Bytes(), k.Namespace())
	if rec == nil {
		return nil
	}
	_, _, rv, _, _ := decodeEntry(recEntry(t.Slabs, rec))
	root, ok := decodeBtree(rv)
	if !ok {
		return errCorrupt
	}
	m.s.iterating++
	defer func() { m.s.iterating-- }()
	return btRange(t.Slabs, &root, lo, hi, reverse, fn)
}

// sortedMapState implements runtime.SortedMapState.
type sortedMapState struct{ mapState }

// Range implements runtime.SortedMapState.
func (m sortedMapState) Range(k runtime.Key, lo, hi []byte, reverse bool, fn func(userKey, value []byte) bool) error {
	return m.scan(k, lo, hi, reverse, fn)
}

// EditRange implements runtime.SortedMapState.
func (m sortedMapState) EditRange(k runtime.Key, lo, hi []byte, reverse bool, fn func(userKey, value []byte) (runtime.MapEdit, error)) error {
	return storekit.EditRange(m, k, lo, hi, reverse, fn)
}
