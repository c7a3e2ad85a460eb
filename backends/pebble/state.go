package pebble

import (
	"bytes"
	"encoding/binary"
	"fmt"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storekit"
)

// state is one registered state: its spec and the compact id that its keys
// carry after the key group.
type state struct {
	s      *Store
	spec   runtime.StateSpec
	id     uint64
	handle runtime.State
	last   lastKey
}

// lastKey is a state's memory of the key of its last point read or
// write and of that key's value, so that a read of the same key again
// costs a comparison of the key, not a read of the pending batch and the
// database (a Get of a key Pebble holds in its memtable cost ~0.4µs): the
// key of a window, read at every event of the window, or a Put read back.
// Every write of the state's keys goes through set, merge, del and
// delPrefix, which keep it true; Restore, which writes around them, makes
// every state forget its last key. Only Value and Map Gets read it (lists
// merge, and read their elements without it). A value longer than
// maxLastValue is not kept.
type lastKey struct {
	key, value []byte
	found      bool
	ok         bool // key and found (and value, if found) are the state's
}

// maxLastValue is the longest value a state keeps in its lastKey.
const maxLastValue = 4 << 10

// remember makes (key, value, found) the state's last key, unless the
// value is too long to keep.
func (l *lastKey) remember(key, value []byte, found bool) {
	if len(value) > maxLastValue {
		l.ok = false
		return
	}
	l.key = append(l.key[:0], key...)
	l.value = append(l.value[:0], value...)
	l.found, l.ok = found, true
}

// is reports whether key is the state's last key.
func (l *lastKey) is(key []byte) bool { return l.ok && bytes.Equal(l.key, key) }

// Spec implements runtime.State.
func (st *state) Spec() runtime.StateSpec { return st.spec }

// check starts an operation on k: it fails if the store is closed, if k's
// key group is not owned, or if a keyed state is addressed with a namespace
// (when usesNS).
func (st *state) check(k runtime.Key, usesNS bool) error {
	s := st.s
	if s.closed {
		return fmt.Errorf("%w: state %q", runtime.ErrClosed, st.spec.Name)
	}
	if s.failed != nil {
		return fmt.Errorf("pebble: state %q: %w", st.spec.Name, s.failed)
	}
	return storekit.CheckKey(&s.cfg, &st.spec, &k, usesNS)
}

// checkWrite is check for a write, which an iteration callback may not
// make.
func (st *state) checkWrite(k runtime.Key, usesNS bool) error {
	if err := st.check(k, usesNS); err != nil {
		return err
	}
	if st.s.iterating > 0 {
		return fmt.Errorf("%w: state %q, key group %d", ErrWriteDuringIteration, st.spec.Name, k.Group())
	}
	return nil
}

// CheckWrite implements runtime.WriteChecker: checkWrite, and whether the
// database takes writes.
func (st *state) CheckWrite(k runtime.Key) error {
	if err := st.checkWrite(k, true); err != nil {
		return err
	}
	if err := st.s.h.writable(); err != nil {
		return st.wrap(k, err)
	}
	return nil
}

// wrap adds the state and key group to an error of Pebble.
func (st *state) wrap(k runtime.Key, err error) error { return st.wrapGroup(k.Group(), err) }

// wrapGroup adds the state and key group kg to an error of Pebble.
func (st *state) wrapGroup(kg int, err error) error {
	return fmt.Errorf("pebble: state %q, key group %d: %w", st.spec.Name, kg, err)
}

// entryKey returns the key of (k.Key, k.Namespace) in the store's key
// buffer, valid until the next point operation.
func (st *state) entryKey(k runtime.Key) []byte {
	s := st.s
	s.kbuf = appendEntryKey(s.kbuf[:0], k.Group(), st.id, k.Bytes(), k.Namespace(), st.spec.SubKeyed)
	return s.kbuf
}

// mapKey returns the key of user key uk of (k.Key, k.Namespace), like
// entryKey.
func (st *state) mapKey(k runtime.Key, uk []byte) []byte {
	s := st.s
	s.kbuf = append(appendEntryKey(s.kbuf[:0], k.Group(), st.id, k.Bytes(), k.Namespace(), st.spec.SubKeyed), uk...)
	return s.kbuf
}

// get reads the value of key: the state's last key's, if it is key, else
// from the pending batch or the database, remembered as the last key
// (Pebble's own buffer is released at once). The result is valid until the
// next call on the store.
func (st *state) get(k runtime.Key, key []byte) ([]byte, bool, error) {
	l := &st.last
	if l.is(key) {
		return l.value[:len(l.value):len(l.value)], l.found, nil
	}
	s := st.s
	v, closer, found, err := s.pointRead(key)
	if err != nil {
		return nil, false, st.wrap(k, err)
	}
	l.remember(key, v, found)
	var out []byte
	if found {
		if l.ok {
			out = l.value[:len(l.value):len(l.value)]
		} else {
			s.vbuf = append(s.vbuf[:0], v...)
			out = s.vbuf[:len(s.vbuf):len(s.vbuf)]
		}
	}
	if closer != nil {
		if err := closer.Close(); err != nil {
			l.ok = false
			return nil, false, st.wrap(k, err)
		}
	}
	return out, found, nil
}

// update is the Update of the value or map entry at key (of k): one
// encoding of the key and one check for a read, fn's call with writes
// refused, and a write of fn's result. The key and the old value are
// copied first: fn may read the store, which reuses the key buffer and
// may make another key the state's last.
func (st *state) update(k runtime.Key, key []byte, fn func(old []byte, found bool) ([]byte, error)) error {
	s := st.s
	s.ukey = append(s.ukey[:0], key...)
	key = s.ukey
	old, found, err := st.get(k, key)
	if err != nil {
		return err
	}
	s.uold = append(s.uold[:0], old...)
	old = s.uold[:len(old):len(old)]
	nv, err := st.callUpdate(fn, old, found)
	if err != nil {
		return err
	}
	if s.closed { // fn may have closed the store
		return fmt.Errorf("%w: state %q", runtime.ErrClosed, st.spec.Name)
	}
	return st.set(k, key, nv)
}

// checkUpdate checks an Update of k with fn, before its key is encoded.
func (st *state) checkUpdate(k runtime.Key, fn func(old []byte, found bool) ([]byte, error)) error {
	if err := st.checkWrite(k, true); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("pebble: state %q: Update with a nil callback", st.spec.Name)
	}
	return nil
}

// callUpdate calls the function of an Update, refusing writes while it
// runs, even if it panics.
func (st *state) callUpdate(fn func(old []byte, found bool) ([]byte, error), old []byte, found bool) ([]byte, error) {
	st.s.iterating++
	defer st.s.endIteration()
	return fn(old, found)
}

// set, merge, del and delPrefix write through Store.apply: into the
// pending batch, or as a commit of their own.
// Each forgets the state's last key if the write failed; set and del
// remember what they wrote as the last key (wrote). Only lists merge.
func (st *state) set(k runtime.Key, key, value []byte) error {
	if err := st.s.apply(opSet, key, value); err != nil {
		st.last.ok = false
		return st.wrap(k, err)
	}
	st.wrote(key, value, true)
	return nil
}

// wrote makes a key just written the state's last key, unless the state
// is a list: a list's reads never consult it, and a list's value (all its
// elements) would be copied for nothing.
func (st *state) wrote(key, value []byte, found bool) {
	if st.spec.Kind != runtime.KindList {
		st.last.remember(key, value, found)
	}
}

func (st *state) merge(k runtime.Key, key, value []byte) error {
	if err := st.s.apply(opMerge, key, value); err != nil {
		st.last.ok = false
		return st.wrap(k, err)
	}
	return nil
}

func (st *state) del(k runtime.Key, key []byte) error {
	if err := st.s.apply(opDelete, key, nil); err != nil {
		st.last.ok = false
		return st.wrap(k, err)
	}
	st.wrote(key, nil, false)
	return nil
}

// maxPointClear is the most keys a span may hold for delPrefix to delete
// them one by one rather than with a range deletion (see the package doc,
// Deletions). Tests lower it.
var maxPointClear = 1024

// delPrefix deletes every key with prefix p: with a point deletion each if
// there are at most maxPointClear, else with one range deletion.
func (st *state) delPrefix(k runtime.Key, p []byte) error {
	s := st.s
	if bytes.HasPrefix(st.last.key, p) {
		st.last.ok = false
	}
	buf := s.takeBuf()
	buf = append(buf, p...)
	buf, _ = storekit.AppendPrefixEnd(buf, buf) // never false: p starts with a key group
	keys, few, err := st.fewKeys(k.Group(), buf[:len(p)], buf[len(p):], s.clearBuf[:0])
	switch {
	case err != nil:
	case few:
		for start := 0; start < len(keys) && err == nil; {
			n, w := binary.Uvarint(keys[start:])
			start += w
			err = s.apply(opDelete, keys[start:start+int(n)], nil)
			start += int(n)
		}
	default:
		err = s.apply(opDelRange, buf[:len(p)], buf[len(p):])
	}
	s.clearBuf = keys[:0]
	s.giveBuf(buf)
	if err != nil {
		return st.wrap(k, err)
	}
	return nil
}

// fewKeys appends the keys in [lo, hi), each after its uvarint length, to
// dst, and reports whether there are at most maxPointClear of them (it
// stops reading at the next).
func (st *state) fewKeys(kg int, lo, hi, dst []byte) ([]byte, bool, error) {
	it, err := st.iter(kg, lo, hi)
	if err != nil {
		return dst, false, err
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if n++; n > maxPointClear {
			break
		}
		dst = binary.AppendUvarint(dst, uint64(len(it.Key())))
		dst = append(dst, it.Key()...)
	}
	return dst, n <= maxPointClear, st.closeIter(kg, it, nil)
}

// Clear implements runtime.State: a value or list is one key, a map one
// span deleted with a range deletion.
func (st *state) Clear(k runtime.Key) error {
	if err := st.checkWrite(k, true); err != nil {
		return err
	}
	key := st.entryKey(k)
	if st.spec.Kind.HasUserKey() {
		return st.delPrefix(k, key)
	}
	return st.del(k, key)
}

// DeleteAll implements runtime.State, with one range deletion: the key's
// namespaces are one span.
func (st *state) DeleteAll(k runtime.Key) error {
	if err := st.checkWrite(k, false); err != nil {
		return err
	}
	s := st.s
	s.kbuf = appendKeyPrefix(s.kbuf[:0], k.Group(), st.id, k.Bytes())
	return st.delPrefix(k, s.kbuf)
}

// iter opens an iterator over [lo, hi), counted as an iteration so that
// its callback cannot write.
func (st *state) iter(kg int, lo, hi []byte) (*pebbledb.Iterator, error) {
	it, err := st.s.newIter(&pebbledb.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, st.wrapGroup(kg, err)
	}
	st.s.iterating++
	return it, nil
}

// closeIter closes an iterator opened by iter and returns the first of err
// and the iterator's errors.
func (st *state) closeIter(kg int, it *pebbledb.Iterator, err error) error {
	cerr := it.Close()
	st.s.endIteration()
	if err == nil && cerr != nil {
		err = st.wrapGroup(kg, cerr)
	}
	return err
}

// Namespaces implements runtime.State. Namespaces come in encoded order
// (the keys' order). For maps, it seeks past each namespace's entries.
func (st *state) Namespaces(k runtime.Key, fn func(ns []byte) bool) (err error) {
	if err := st.check(k, false); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("pebble: state %q: Namespaces with a nil callback", st.spec.Name)
	}
	s := st.s
	buf := appendKeyPrefix(s.takeBuf(), k.Group(), st.id, k.Bytes())
	pl := len(buf)
	buf, _ = storekit.AppendPrefixEnd(buf, buf[:pl])
	el := len(buf)
	it, err := st.iter(k.Group(), buf[:pl], buf[pl:el])
	if err != nil {
		s.giveBuf(buf)
		return err
	}
	defer func() {
		err = st.closeIter(k.Group(), it, err)
		s.giveBuf(buf)
	}()
	skip := st.spec.Kind.HasUserKey()
	var nsBuf []byte // for namespaces longer than a framing group
	for ok := it.First(); ok; {
		key := it.Key()
		if !st.spec.SubKeyed {
			// A keyed state's keys have no namespace: the key has an
			// entry, in the empty namespace.
			fn(nil)
			return nil
		}
		ns, rest, sc, ferr := storekit.ReadFramed(key[pl:], nsBuf[:0])
		nsBuf = sc
		if ferr != nil {
			return st.wrap(k, errBadKey)
		}
		if !fn(ns) {
			return nil
		}
		if !skip {
			ok = it.Next()
			continue
		}
		// Skip the other entries of this namespace's map.
		var more bool
		buf, more = storekit.AppendPrefixEnd(buf[:el], key[:len(key)-len(rest)])
		if !more {
			break
		}
		ok = it.SeekGE(buf[el:])
	}
	if err := it.Error(); err != nil {
		return st.wrap(k, err)
	}
	return nil
}

// Keys implements runtime.State. Keys come in encoded order (the data
// keys' order); after each, the iterator seeks past the key's other
// entries.
func (st *state) Keys(kg int, fn func(key []byte) bool) (err error) {
	s := st.s
	if err := storekit.CheckKeys(&s.cfg, st.spec.Name, s.closed, kg, fn); err != nil {
		return err
	}
	if s.failed != nil {
		return fmt.Errorf("pebble: state %q: %w", st.spec.Name, s.failed)
	}
	buf := appendStatePrefix(s.takeBuf(), kg, st.id)
	pl := len(buf)
	buf, _ = storekit.AppendPrefixEnd(buf, buf[:pl])
	el := len(buf)
	it, err := st.iter(kg, buf[:pl], buf[pl:el])
	if err != nil {
		s.giveBuf(buf)
		return err
	}
	defer func() {
		err = st.closeIter(kg, it, err)
		s.giveBuf(buf)
	}()
	var keyBuf []byte // for keys longer than a framing group
	for ok := it.First(); ok; {
		dk := it.Key()
		key, rest, sc, ferr := storekit.ReadFramed(dk[pl:], keyBuf[:0])
		keyBuf = sc
		if ferr != nil {
			return st.wrapGroup(kg, errBadKey)
		}
		if !fn(key[:len(key):len(key)]) {
			return nil
		}
		var more bool
		buf, more = storekit.AppendPrefixEnd(buf[:el], dk[:len(dk)-len(rest)])
		if !more {
			break
		}
		ok = it.SeekGE(buf[el:])
	}
	if err := it.Error(); err != nil {
		return st.wrapGroup(kg, err)
	}
	return nil
}

// valueState is the handle of a KindValue state.
type valueState struct{ *state }

// Get implements runtime.ValueState. The value is in a buffer of the
// store, valid until the next Get.
func (v valueState) Get(k runtime.Key) ([]byte, bool, error) {
	if err := v.check(k, true); err != nil {
		return nil, false, err
	}
	return v.get(k, v.entryKey(k))
}

// Put implements runtime.ValueState.
func (v valueState) Put(k runtime.Key, value []byte) error {
	if err := v.checkWrite(k, true); err != nil {
		return err
	}
	return v.set(k, v.entryKey(k), value)
}

// Update implements runtime.ValueUpdater: the key is encoded and checked
// once for the read and the write.
func (v valueState) Update(k runtime.Key, fn func(old []byte, found bool) ([]byte, error)) error {
	if err := v.checkUpdate(k, fn); err != nil {
		return err
	}
	return v.update(k, v.entryKey(k), fn)
}

// listState is the handle of a KindList state: a list is one key whose
// value is its length-prefixed elements; Add and AddAll write merge
// operands, Update a whole value.
type listState struct{ *state }

// Get implements runtime.ListState: one point read, which folds the
// list's merge operands.
func (l listState) Get(k runtime.Key, fn func(elem []byte) bool) error {
	if err := l.check(k, true); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("pebble: state %q: Get with a nil callback", l.spec.Name)
	}
	v, closer, found, err := l.s.pointRead(l.entryKey(k))
	if err != nil {
		return l.wrap(k, err)
	}
	if !found {
		return nil
	}
	l.s.iterating++
	defer func() {
		if closer != nil {
			closer.Close()
		}
		l.s.endIteration()
	}()
	if err := eachElem(v, fn); err != nil {
		return l.wrap(k, err)
	}
	return nil
}

// Add implements runtime.ListState.
func (l listState) Add(k runtime.Key, elem []byte) error {
	if err := l.checkWrite(k, true); err != nil {
		return err
	}
	s := l.s
	s.wbuf = storekit.AppendElem(s.wbuf[:0], elem)
	return l.merge(k, l.entryKey(k), s.wbuf)
}

// AddAll implements runtime.ListState.
func (l listState) AddAll(k runtime.Key, elems [][]byte) error {
	if err := l.checkWrite(k, true); err != nil || len(elems) == 0 {
		return err
	}
	s := l.s
	s.wbuf = appendElems(s.wbuf[:0], elems)
	return l.merge(k, l.entryKey(k), s.wbuf)
}

// Replace implements runtime.ListState: a Set, which hides every older
// merge operand, or a Delete.
func (l listState) Replace(k runtime.Key, elems [][]byte) error {
	if err := l.checkWrite(k, true); err != nil {
		return err
	}
	if len(elems) == 0 {
		return l.del(k, l.entryKey(k))
	}
	s := l.s
	s.wbuf = appendElems(s.wbuf[:0], elems)
	return l.set(k, l.entryKey(k), s.wbuf)
}

// mapState is the handle of a KindMap state; sortedMapState extends it. An
// entry is one key: the map's entry key followed by the user key, so a
// map's entries are one span, ascending by user key.
type mapState struct{ *state }

// Get implements runtime.MapState.
func (m mapState) Get(k runtime.Key, userKey []byte) ([]byte, bool, error) {
	if err := m.check(k, true); err != nil {
		return nil, false, err
	}
	return m.get(k, m.mapKey(k, userKey))
}

// Put implements runtime.MapState.
func (m mapState) Put(k runtime.Key, userKey, value []byte) error {
	if err := m.checkWrite(k, true); err != nil {
		return err
	}
	return m.set(k, m.mapKey(k, userKey), value)
}

// Update implements runtime.MapUpdater: the entry's key is encoded and
// checked once for the read and the write.
func (m mapState) Update(k runtime.Key, userKey []byte, fn func(old []byte, found bool) ([]byte, error)) error {
	if err := m.checkUpdate(k, fn); err != nil {
		return err
	}
	return m.update(k, m.mapKey(k, userKey), fn)
}

// Delete implements runtime.MapState.
func (m mapState) Delete(k runtime.Key, userKey []byte) error {
	if err := m.checkWrite(k, true); err != nil {
		return err
	}
	return m.del(k, m.mapKey(k, userKey))
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
// lo <= u < hi (see runtime.SortedMapState.Range), with an iterator
// bounded by the map's span.
func (m mapState) visit(k runtime.Key, lo, hi []byte, reverse bool, fn func(userKey, value []byte) bool, op string) (err error) {
	if err := m.check(k, true); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("pebble: state %q: %s with a nil callback", m.spec.Name, op)
	}
	if hi != nil && bytes.Compare(lo, hi) >= 0 { // also an empty, non-nil hi
		return nil
	}
	s := m.s
	buf := appendEntryKey(s.takeBuf(), k.Group(), m.id, k.Bytes(), k.Namespace(), m.spec.SubKeyed)
	pl := len(buf)
	buf = append(buf, lo...)
	ll := len(buf)
	if hi == nil {
		buf, _ = storekit.AppendPrefixEnd(buf, buf[:pl])
	} else {
		buf = append(append(buf, buf[:pl]...), hi...)
	}
	it, err := m.iter(k.Group(), buf[:ll], buf[ll:])
	if err != nil {
		s.giveBuf(buf)
		return err
	}
	defer func() {
		err = m.closeIter(k.Group(), it, err)
		s.giveBuf(buf)
	}()
	var ok bool
	if reverse {
		ok = it.Last()
	} else {
		ok = it.First()
	}
	for ok {
		key := it.Key()
		v := it.Value()
		if !fn(key[pl:len(key):len(key)], v[:len(v):len(v)]) {
			return nil
		}
		if reverse {
			ok = it.Prev()
		} else {
			ok = it.Next()
		}
	}
	if err := it.Error(); err != nil {
		return m.wrap(k, err)
	}
	return nil
}

// sortedMapState is the handle of a KindSortedMap state.
type sortedMapState struct{ mapState }

// Range implements runtime.SortedMapState, with an iterator bounded by
// [map prefix + lo, map prefix + hi).
func (m sortedMapState) Range(k runtime.Key, lo, hi []byte, reverse bool, fn func(userKey, value []byte) bool) error {
	return m.visit(k, lo, hi, reverse, fn, "Range")
}

// EditRange implements runtime.SortedMapState.
func (m sortedMapState) EditRange(k runtime.Key, lo, hi []byte, reverse bool, fn func(userKey, value []byte) (runtime.MapEdit, error)) error {
	return storekit.EditRange(m, k, lo, hi, reverse, fn)
}
