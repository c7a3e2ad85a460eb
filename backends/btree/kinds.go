package btree

import (
	"bytes"
	"fmt"

	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storekit"
)

// checkValue refuses a value longer than MaxValueBytes.
func checkValue(st *state, k runtime.Key, v []byte) error {
	if len(v) > MaxValueBytes {
		return fmt.Errorf("%w: state %q, key group %d: a value of %d bytes is longer than MaxValueBytes",
			ErrTooLarge, st.spec.Name, k.Group(), len(v))
	}
	return nil
}

// nilCallback reports an iteration called without a callback.
func nilCallback(st *state, op string) error {
	return fmt.Errorf("btree: state %q: %s with a nil callback", st.spec.Name, op)
}

// valueState is the handle of a KindValue state.
type valueState struct{ *state }

// Get implements runtime.ValueState. The value is a view of the stored
// bytes, valid until the next call on the store.
func (v valueState) Get(k runtime.Key) ([]byte, bool, error) {
	t, err := v.rtree(k, true)
	if err != nil || t == nil {
		return nil, false, err
	}
	value, ok := t.lookup(&v.gate, v.entryKey(k))
	return value, ok, nil
}

// Put implements runtime.ValueState.
func (v valueState) Put(k runtime.Key, value []byte) error {
	t, err := v.wtree(k, true)
	if err == nil {
		err = checkValue(v.state, k, value)
	}
	if err != nil {
		return err
	}
	t.set(v.entryKey(k), value, false)
	return nil
}

// Update implements runtime.ValueUpdater: one lookup finds the value for
// fn and, when fn's result has the old value's length and no live
// snapshot can see its region, the place to write that result.
func (v valueState) Update(k runtime.Key, fn func(old []byte, found bool) ([]byte, error)) error {
	return v.update(k, nil, false, fn)
}

// listState is the handle of a KindList state. A list is one item whose
// value is its elements, each preceded by its length as a uvarint.
type listState struct{ *state }

// Get implements runtime.ListState.
func (l listState) Get(k runtime.Key, fn func(elem []byte) bool) error {
	t, err := l.rtree(k, true)
	if err != nil || t == nil {
		return err
	}
	if fn == nil {
		return nilCallback(l.state, "Get")
	}
	it, ok := t.get(l.entryKey(k))
	if !ok {
		return nil
	}
	s := l.s
	s.iterating++
	defer func() { s.iterating-- }()
	if err := eachElem(elemsOf(t.Slabs, it), fn); err != nil {
		return fmt.Errorf("state %q: %w", l.spec.Name, err)
	}
	return nil
}

// Add implements runtime.ListState.
func (l listState) Add(k runtime.Key, elem []byte) error {
	t, err := l.wtree(k, true)
	if err != nil {
		return err
	}
	one := [1][]byte{elem}
	return l.appendElems(t, k, one[:])
}

// AddAll implements runtime.ListState.
func (l listState) AddAll(k runtime.Key, elems [][]byte) error {
	t, err := l.wtree(k, true)
	if err != nil || len(elems) == 0 {
		return err
	}
	return l.appendElems(t, k, elems)
}

// Replace implements runtime.ListState.
func (l listState) Replace(k runtime.Key, elems [][]byte) error {
	t, err := l.wtree(k, true)
	if err != nil {
		return err
	}
	ik := l.entryKey(k)
	if len(elems) == 0 {
		t.delete(ik)
		return nil
	}
	need, err := l.listBytes(k, elems)
	if err != nil {
		return err
	}
	t.replaceList(ik, elems, need)
	return nil
}

// listBytes returns the bytes of elems encoded, or ErrTooLarge if they
// are more than MaxValueBytes.
func (l listState) listBytes(k runtime.Key, elems [][]byte) (int, error) {
	need := 0
	for _, e := range elems {
		need += storekit.ElemLen(len(e))
		if need > MaxValueBytes {
			return 0, l.tooLong(k)
		}
	}
	return need, nil
}

func (l listState) tooLong(k runtime.Key) error {
	return fmt.Errorf("%w: state %q, key group %d: a list of more than MaxValueBytes",
		ErrTooLarge, l.spec.Name, k.Group())
}

// appendElems appends elems to the list of k in t (see tree.appendElems).
func (l listState) appendElems(t *tree, k runtime.Key, elems [][]byte) error {
	need, err := l.listBytes(k, elems)
	if err != nil {
		return err
	}
	if !t.appendElems(l.entryKey(k), elems, need) {
		return l.tooLong(k)
	}
	return nil
}

// mapState is the handle of a KindMap state; sortedMapState extends it. A
// map entry is one item whose key is the map's item key followed by the
// user key, so a map's entries are one contiguous run, sorted by user key.
type mapState struct{ *state }

// Get implements runtime.MapState.
func (m mapState) Get(k runtime.Key, userKey []byte) ([]byte, bool, error) {
	t, err := m.rtree(k, true)
	if err != nil || t == nil {
		return nil, false, err
	}
	if err := m.checkUserKey(k, userKey); err != nil {
		return nil, false, err
	}
	value, ok := t.lookup(&m.gate, m.mapKey(k, userKey))
	return value, ok, nil
}

// Put implements runtime.MapState.
func (m mapState) Put(k runtime.Key, userKey, value []byte) error {
	t, err := m.wtree(k, true)
	if err != nil {
		return err
	}
	if err := m.checkUserKey(k, userKey); err != nil {
		return err
	}
	if err := checkValue(m.state, k, value); err != nil {
		return err
	}
	t.set(m.mapKey(k, userKey), value, false)
	return nil
}

// Update implements runtime.MapUpdater: one lookup finds the entry for
// fn and, when fn's result has the old value's length and no live
// snapshot can see its region, the place to write that result.
func (m mapState) Update(k runtime.Key, userKey []byte, fn func(old []byte, found bool) ([]byte, error)) error {
	if err := m.checkUserKey(k, userKey); err != nil {
		return err
	}
	return m.update(k, userKey, true, fn)
}

// checkUserKey refuses a key, namespace and user key longer than
// MaxKeyBytes together.
func (m mapState) checkUserKey(k runtime.Key, userKey []byte) error {
	if n := len(k.Bytes()) + len(k.Namespace()) + len(userKey); n > MaxKeyBytes {
		return tooLarge(m.state, n)
	}
	return nil
}

// Delete implements runtime.MapState.
func (m mapState) Delete(k runtime.Key, userKey []byte) error {
	t, err := m.wtree(k, true)
	if err != nil {
		return err
	}
	if err := m.checkUserKey(k, userKey); err != nil {
		return err
	}
	t.delete(m.mapKey(k, userKey))
	return nil
}

// Iterate implements runtime.MapState, in ascending order of user key for
// both map kinds.
func (m mapState) Iterate(k runtime.Key, fn func(userKey, value []byte) bool) error {
	return m.visit(k, nil, nil, false, fn, "Iterate")
}

// Edit implements runtime.MapState.
func (m mapState) Edit(k runtime.Key, fn func(userKey, value []byte) (runtime.MapEdit, error)) error {
	return storekit.EditMap(m, k, fn)
}

// visit calls fn with the entries of k's map whose user key u satisfies
// lo <= u < hi (see runtime.SortedMapState.Range).
func (m mapState) visit(k runtime.Key, lo, hi []byte, reverse bool, fn func(userKey, value []byte) bool, op string) error {
	t, err := m.rtree(k, true)
	if err != nil || t == nil {
		return err
	}
	if fn == nil {
		return nilCallback(m.state, op)
	}
	if hi != nil && bytes.Compare(lo, hi) >= 0 { // also an empty, non-nil hi
		return nil
	}
	if n := len(k.Bytes()) + len(k.Namespace()) + max(len(lo), len(hi)); n > MaxKeyBytes {
		return tooLarge(m.state, n)
	}
	s := m.s
	// The bounds go in a buffer of their own: fn may make point reads,
	// which reuse the scratch buffer.
	buf := appendEntryKey(s.takeBuf(), k.Group(), k.Bytes(), k.Namespace(), m.spec.SubKeyed)
	pl := len(buf)
	buf = append(buf, lo...)
	ll := len(buf)
	if hi == nil {
		buf, _ = storekit.AppendPrefixEnd(buf, buf[:pl])
	} else {
		buf = append(append(buf, buf[:pl]...), hi...)
	}
	kb := s.takeBuf()
	s.each(t, buf[:ll], buf[ll:], reverse, func(x item) bool {
		ik := keyOf(t.Slabs, x, kb)
		return fn(ik[pl:], valueOf(t.Slabs, x))
	})
	s.giveBuf(kb)
	s.giveBuf(buf)
	return nil
}

// sortedMapState is the handle of a KindSortedMap state.
type sortedMapState struct{ mapState }

// Range implements runtime.SortedMapState.
func (m sortedMapState) Range(k runtime.Key, lo, hi []byte, reverse bool, fn func(userKey, value []byte) bool) error {
	return m.visit(k, lo, hi, reverse, fn, "Range")
}

// EditRange implements runtime.SortedMapState.
func (m sortedMapState) EditRange(k runtime.Key, lo, hi []byte, reverse bool, fn func(userKey, value []byte) (runtime.MapEdit, error)) error {
	return storekit.EditRange(m, k, lo, hi, reverse, fn)
}
