package checkpoint

import (
	"errors"
	"fmt"

	"github.com/stategen/stategen/runtime"
)

// trackedCore is what the Tracker's states of every kind share: the state
// under them, and the recording of the changes common to every kind.
type trackedCore struct {
	t     *Tracker
	name  string
	inner runtime.State
	// The one-lookup Update in progress (ValueUpdater, MapUpdater): its
	// function and the value it returned. updCB, made once, is the
	// callback passed to the inner state.
	updFn func(old []byte, found bool) ([]byte, error)
	updNV []byte
	updOK bool
	updCB func(old []byte, found bool) ([]byte, error)
	// log is the tracker's current log of the state, while gen is the
	// tracker's (see Tracker.record).
	log *changeLog
	gen uint64
	// table is the Table of the state that Tracker.HostTable had the
	// store make, reporting its changes to the tracker; nil if none.
	table runtime.Table
}

// adopt makes st the state under c and returns the state the tracker
// gives out for it: st itself if it is the Table that Tracker.HostTable
// made for c, which reports its changes to c, else its tracked state
// (wrap) — also for a Table the store made for someone else (a state
// registered on the store before it was put behind the tracker), whose
// changes the tracker sees only at the byte level, through wrap.
func (c *trackedCore) adopt(st runtime.State) runtime.State {
	c.inner = st
	if tb, ok := st.(runtime.Table); ok && c.table != nil && tb == c.table {
		return st
	}
	return c.wrap(st)
}

// tableChanges records the changes a Table of state c reports
// (runtime.TableChanges) as the tracked states record theirs.
type tableChanges struct{ c *trackedCore }

// Put implements runtime.TableChanges.
func (tc tableChanges) Put(kg int, key, ns, uk, value []byte) {
	tc.c.t.recordAt(tc.c, opPut, kg, key, ns, uk, value)
}

// Delete implements runtime.TableChanges.
func (tc tableChanges) Delete(kg int, key, ns, uk []byte) {
	tc.c.t.recordAt(tc.c, opDelete, kg, key, ns, uk, nil)
}

// Clear implements runtime.TableChanges.
func (tc tableChanges) Clear(kg int, key, ns []byte) {
	tc.c.t.recordAt(tc.c, opClear, kg, key, ns, nil, nil)
}

// wrap returns the tracked state of st's kind. It is a runtime.ValueUpdater
// or runtime.MapUpdater exactly when st is.
func (c *trackedCore) wrap(st runtime.State) runtime.State {
	c.updCB = c.updateCallback
	switch st := st.(type) {
	case runtime.SortedMapState:
		m := &trackedSorted{trackedMap{c, st, nil}, st}
		if m.upd, _ = st.(runtime.MapUpdater); m.upd != nil {
			return trackedSortedUpdater{m}
		}
		return m
	case runtime.MapState:
		m := &trackedMap{c, st, nil}
		if m.upd, _ = st.(runtime.MapUpdater); m.upd != nil {
			return trackedMapUpdater{m}
		}
		return m
	case runtime.ListState:
		return &trackedList{c, st}
	case runtime.ValueState:
		v := &trackedValue{c, st, nil}
		if v.upd, _ = st.(runtime.ValueUpdater); v.upd != nil {
			return trackedValueUpdater{v}
		}
		return v
	}
	return st
}

// The tracked states of stores that update in one lookup.
type (
	trackedValueUpdater  struct{ *trackedValue }
	trackedMapUpdater    struct{ *trackedMap }
	trackedSortedUpdater struct{ *trackedSorted }
)

// Update implements runtime.ValueUpdater.
func (v trackedValueUpdater) Update(k runtime.Key, fn func(old []byte, found bool) ([]byte, error)) error {
	return v.update(k, fn)
}

// Update implements runtime.MapUpdater.
func (m trackedMapUpdater) Update(k runtime.Key, userKey []byte, fn func(old []byte, found bool) ([]byte, error)) error {
	return m.update(k, userKey, fn)
}

// Update implements runtime.MapUpdater.
func (m trackedSortedUpdater) Update(k runtime.Key, userKey []byte, fn func(old []byte, found bool) ([]byte, error)) error {
	return m.update(k, userKey, fn)
}

// Spec implements runtime.State.
func (c *trackedCore) Spec() runtime.StateSpec { return c.inner.Spec() }

// Clear implements runtime.State.
func (c *trackedCore) Clear(k runtime.Key) error {
	if err := c.inner.Clear(k); err != nil {
		return err
	}
	c.t.record(c, opClear, k, k.Namespace(), nil, nil)
	return nil
}

// Namespaces implements runtime.State.
func (c *trackedCore) Namespaces(k runtime.Key, fn func(ns []byte) bool) error {
	return c.inner.Namespaces(k, fn)
}

// DeleteAll implements runtime.State.
func (c *trackedCore) DeleteAll(k runtime.Key) error {
	if err := c.inner.DeleteAll(k); err != nil {
		return err
	}
	c.t.record(c, opDeleteAll, k, nil, nil, nil)
	return nil
}

// Keys implements runtime.State.
func (c *trackedCore) Keys(kg int, fn func(key []byte) bool) error { return c.inner.Keys(kg, fn) }

// CheckWrite implements runtime.WriteChecker: the Tracker refuses what its
// store refuses.
func (c *trackedCore) CheckWrite(k runtime.Key) error {
	if wc, ok := c.inner.(runtime.WriteChecker); ok {
		return wc.CheckWrite(k)
	}
	return fmt.Errorf("checkpoint: state %q: %w: its store does not check writes", c.name, errors.ErrUnsupported)
}

// begin starts a one-lookup Update of fn: the inner state calls updCB,
// which calls fn and keeps what it wrote. end ends it, given the inner
// state's error, and reports the value written, if any (valid until the
// next Update). A store refuses an Update from inside another before it
// calls anything, so the fields are this call's alone.
func (c *trackedCore) begin(fn func(old []byte, found bool) ([]byte, error)) {
	c.updFn, c.updOK = fn, false
}

func (c *trackedCore) end(err error) ([]byte, bool) {
	ok := c.updOK && err == nil
	c.updFn, c.updOK = nil, false
	return c.updNV, ok
}

func (c *trackedCore) updateCallback(old []byte, found bool) ([]byte, error) {
	nv, err := c.updFn(old, found)
	if err == nil {
		c.updNV, c.updOK = append(c.updNV[:0], nv...), true
	}
	return nv, err
}

// trackedValue is a tracked ValueState.
type trackedValue struct {
	*trackedCore
	st  runtime.ValueState
	upd runtime.ValueUpdater // st, if it updates in one lookup
}

// Get implements runtime.ValueState.
func (v *trackedValue) Get(k runtime.Key) ([]byte, bool, error) { return v.st.Get(k) }

// Put implements runtime.ValueState.
func (v *trackedValue) Put(k runtime.Key, value []byte) error {
	if err := v.st.Put(k, value); err != nil {
		return err
	}
	v.t.record(v.trackedCore, opPut, k, k.Namespace(), nil, value)
	return nil
}

// update is the Update of a state whose inner state is a ValueUpdater.
func (v *trackedValue) update(k runtime.Key, fn func(old []byte, found bool) ([]byte, error)) error {
	if fn == nil {
		return v.upd.Update(k, nil) // the store's error
	}
	v.begin(fn)
	err := v.upd.Update(k, v.updCB)
	nv, ok := v.end(err)
	if ok {
		v.t.record(v.trackedCore, opPut, k, k.Namespace(), nil, nv)
	}
	return err
}

// trackedList is a tracked ListState.
type trackedList struct {
	*trackedCore
	st runtime.ListState
}

// Get implements runtime.ListState.
func (l *trackedList) Get(k runtime.Key, fn func(elem []byte) bool) error { return l.st.Get(k, fn) }

// Add implements runtime.ListState.
func (l *trackedList) Add(k runtime.Key, elem []byte) error {
	if err := l.st.Add(k, elem); err != nil {
		return err
	}
	l.t.record(l.trackedCore, opAppend, k, k.Namespace(), nil, elem)
	return nil
}

// AddAll implements runtime.ListState.
func (l *trackedList) AddAll(k runtime.Key, elems [][]byte) error {
	if err := l.st.AddAll(k, elems); err != nil {
		return err
	}
	for _, e := range elems {
		l.t.record(l.trackedCore, opAppend, k, k.Namespace(), nil, e)
	}
	return nil
}

// Replace implements runtime.ListState.
func (l *trackedList) Replace(k runtime.Key, elems [][]byte) error {
	if err := l.st.Replace(k, elems); err != nil {
		return err
	}
	l.t.record(l.trackedCore, opClear, k, k.Namespace(), nil, nil)
	for _, e := range elems {
		l.t.record(l.trackedCore, opAppend, k, k.Namespace(), nil, e)
	}
	return nil
}

// trackedMap is a tracked MapState.
type trackedMap struct {
	*trackedCore
	st  runtime.MapState
	upd runtime.MapUpdater // st, if it updates in one lookup
}

// Get implements runtime.MapState.
func (m *trackedMap) Get(k runtime.Key, userKey []byte) ([]byte, bool, error) {
	return m.st.Get(k, userKey)
}

// Put implements runtime.MapState.
func (m *trackedMap) Put(k runtime.Key, userKey, value []byte) error {
	if err := m.st.Put(k, userKey, value); err != nil {
		return err
	}
	m.t.record(m.trackedCore, opPut, k, k.Namespace(), userKey, value)
	return nil
}

// Delete implements runtime.MapState.
func (m *trackedMap) Delete(k runtime.Key, userKey []byte) error {
	if err := m.st.Delete(k, userKey); err != nil {
		return err
	}
	m.t.record(m.trackedCore, opDelete, k, k.Namespace(), userKey, nil)
	return nil
}

// update is the Update of a state whose inner state is a MapUpdater.
func (m *trackedMap) update(k runtime.Key, userKey []byte, fn func(old []byte, found bool) ([]byte, error)) error {
	if fn == nil {
		return m.upd.Update(k, userKey, nil) // the store's error
	}
	m.begin(fn)
	err := m.upd.Update(k, userKey, m.updCB)
	nv, ok := m.end(err)
	if ok {
		m.t.record(m.trackedCore, opPut, k, k.Namespace(), userKey, nv)
	}
	return err
}

// Iterate implements runtime.MapState.
func (m *trackedMap) Iterate(k runtime.Key, fn func(userKey, value []byte) bool) error {
	return m.st.Iterate(k, fn)
}

// Edit implements runtime.MapState.
func (m *trackedMap) Edit(k runtime.Key, fn func(userKey, value []byte) (runtime.MapEdit, error)) error {
	return m.edit(k, fn, func(fn func(userKey, value []byte) (runtime.MapEdit, error)) error { return m.st.Edit(k, fn) })
}

// edit runs an Edit of fn through do, recording the edits it applied.
func (m *trackedMap) edit(k runtime.Key, fn func(userKey, value []byte) (runtime.MapEdit, error), do func(func(userKey, value []byte) (runtime.MapEdit, error)) error) error {
	if fn == nil {
		return do(nil)
	}
	var edits []byte // the changes, in the order fn made them
	err := do(func(uk, v []byte) (runtime.MapEdit, error) {
		e, err := fn(uk, v)
		if err == nil || errors.Is(err, runtime.StopEdit) {
			switch e.Action {
			case runtime.EditDelete:
				edits = appendChange(edits, opDelete, nil, nil, uk, nil)
			case runtime.EditReplace:
				edits = appendChange(edits, opPut, nil, nil, uk, e.Value)
			}
		}
		return e, err
	})
	if err != nil {
		return err
	}
	for len(edits) > 0 {
		var op byte
		var uk, v []byte
		op, _, _, uk, v, edits = nextChange(edits)
		m.t.record(m.trackedCore, op, k, k.Namespace(), uk, v)
	}
	return nil
}

// trackedSorted is a tracked SortedMapState.
type trackedSorted struct {
	trackedMap
	sm runtime.SortedMapState
}

// Range implements runtime.SortedMapState.
func (m *trackedSorted) Range(k runtime.Key, lo, hi []byte, reverse bool, fn func(userKey, value []byte) bool) error {
	return m.sm.Range(k, lo, hi, reverse, fn)
}

// EditRange implements runtime.SortedMapState.
func (m *trackedSorted) EditRange(k runtime.Key, lo, hi []byte, reverse bool, fn func(userKey, value []byte) (runtime.MapEdit, error)) error {
	return m.edit(k, fn, func(fn func(userKey, value []byte) (runtime.MapEdit, error)) error {
		return m.sm.EditRange(k, lo, hi, reverse, fn)
	})
}
