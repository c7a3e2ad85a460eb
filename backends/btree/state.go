package btree

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/stategen/stategen/backends/internal/arena"
	"github.com/stategen/stategen/backends/internal/entryidx"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storekit"
)

// state is one registered state: its trees (one per owned key group, or
// one in all; see layout), made on the first write to them.
type state struct {
	s      *Store
	spec   runtime.StateSpec
	trees  []*tree
	handle runtime.State
	gate   entryidx.Gate // whether reads use the trees' entry indexes
}

// Spec implements runtime.State.
func (st *state) Spec() runtime.StateSpec { return st.spec }

// index returns the index in trees of the tree of key group kg, which the
// store owns.
func (st *state) index(kg int) int {
	if st.s.layout == treePerGroup {
		return kg - st.s.cfg.KeyGroups.Start
	}
	return 0
}

// check starts an operation on k: it fails if the store is closed, or if
// storekit.CheckKey refuses k.
func (st *state) check(k runtime.Key, usesNS bool) error {
	s := st.s
	if s.closed {
		return fmt.Errorf("%w: state %q", runtime.ErrClosed, st.spec.Name)
	}
	if err := storekit.CheckKey(&s.cfg, &st.spec, &k, usesNS); err != nil {
		return err
	}
	if len(k.Bytes())+len(k.Namespace()) > MaxKeyBytes {
		return tooLarge(st, len(k.Bytes())+len(k.Namespace()))
	}
	return nil
}

// MaxKeyBytes bounds the length of a key and namespace together, or of a
// key, namespace and user key together: item keys are at most a few bytes
// longer, and their length is kept in 32 bits. Longer ones are refused
// with runtime.ErrInvalidKey.
const MaxKeyBytes = 1<<31 - 64

// MaxValueBytes bounds the length of a value, and of a list's elements
// together (each with its length as a uvarint): items keep it in 32 bits,
// and it fits an int on every platform. Longer ones are refused with
// ErrTooLarge.
const MaxValueBytes = 1<<31 - 1

// ErrTooLarge reports a value, or a list, longer than MaxValueBytes: a
// write of one is refused, and so is a Restore of one.
var ErrTooLarge = errors.New("btree: value or list is longer than MaxValueBytes")

func tooLarge(st *state, n int) error {
	return fmt.Errorf("%w: state %q: key, namespace and user key of %d bytes are longer than MaxKeyBytes",
		runtime.ErrInvalidKey, st.spec.Name, n)
}

// rtree checks a read of k and returns k's tree, nil if it has none.
func (st *state) rtree(k runtime.Key, usesNS bool) (*tree, error) {
	if err := st.check(k, usesNS); err != nil {
		return nil, err
	}
	return st.trees[st.index(k.Group())], nil
}

// wtree checks a write of k and returns k's tree, making it if needed.
func (st *state) wtree(k runtime.Key, usesNS bool) (*tree, error) {
	if err := st.checkWrite(k, usesNS); err != nil {
		return nil, err
	}
	return st.groupTree(k.Group()), nil
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

// CheckWrite implements runtime.WriteChecker.
func (st *state) CheckWrite(k runtime.Key) error { return st.checkWrite(k, true) }

// groupTree returns the tree of key group kg, making it if needed.
func (st *state) groupTree(kg int) *tree {
	i := st.index(kg)
	t := st.trees[i]
	if t == nil {
		t = newTree(&st.s.opts, st.spec.Kind == runtime.KindList)
		st.trees[i] = t
	}
	t.cow = st.s.snaps.Any()
	return t
}

// entryKey returns the item key of (k.Key, k.Namespace) in the store's
// scratch buffer, valid until the next point operation.
func (st *state) entryKey(k runtime.Key) []byte {
	s := st.s
	s.scratch = appendEntryKey(s.scratch[:0], k.Group(), k.Bytes(), k.Namespace(), st.spec.SubKeyed)
	return s.scratch
}

// mapKey returns the item key of user key uk of (k.Key, k.Namespace), like
// entryKey.
func (st *state) mapKey(k runtime.Key, uk []byte) []byte {
	s := st.s
	s.scratch = append(appendEntryKey(s.scratch[:0], k.Group(), k.Bytes(), k.Namespace(), st.spec.SubKeyed), uk...)
	return s.scratch
}

// update is the one-lookup Update of a value (isMap false) or of user
// key uk of a map: it finds the item once, calls fn with its value
// (read-only, and the store refuses writes from fn as from an iteration's
// callback), and writes fn's result over the old value when it has the
// same length and lies in a region no live snapshot can see — the same
// in-place write as a Get then a Put of the same key (see tree.set), for
// one descent instead of two. Any other result goes through set.
func (st *state) update(k runtime.Key, uk []byte, isMap bool, fn func(old []byte, found bool) ([]byte, error)) error {
	if fn == nil {
		return nilCallback(st, "Update")
	}
	if err := st.check(k, true); err != nil {
		return err
	}
	s := st.s
	if s.iterating > 0 {
		return fmt.Errorf("%w: state %q, key group %d", ErrWriteDuringIteration, st.spec.Name, k.Group())
	}
	ik := st.itemKey(k, uk, isMap)
	t := st.trees[st.index(k.Group())]
	var (
		x     item
		found bool
		old   []byte
	)
	if t != nil {
		if x, found = t.find(&st.gate, ik); found {
			old = valueOf(t.Slabs, x)
		}
	}
	nv, err := s.callUpdate(fn, old, found)
	if err != nil {
		return err
	}
	if s.closed { // fn may have closed the store
		return fmt.Errorf("%w: state %q", runtime.ErrClosed, st.spec.Name)
	}
	if err := checkValue(st, k, nv); err != nil {
		return err
	}
	// fn may have read the store: the scratch buffer and the tree's hot
	// item are its now. The item found is still the tree's (fn wrote
	// nothing), and so is the region of old.
	t = st.groupTree(k.Group())
	if found && len(nv) == len(old) && !t.frozen(x.ref) {
		copy(old, nv)
		t.hot, t.hotOK = x, true
		return nil
	}
	// set copies nv into a new region before the old one can be moved by
	// a compaction: nv may be (part of) old.
	t.hotOK = false
	t.set(st.itemKey(k, uk, isMap), nv, !found && !st.gate.Cold())
	return nil
}

// callUpdate calls fn, the callback of an Update, as an iteration's
// callback: the store refuses writes from it.
func (s *Store) callUpdate(fn func(old []byte, found bool) ([]byte, error), old []byte, found bool) ([]byte, error) {
	s.iterating++
	defer func() { s.iterating-- }()
	return fn(old, found)
}

// itemKey returns the item key of k's value (isMap false) or of user key
// uk of k's map, in the store's scratch buffer (entryKey, mapKey).
func (st *state) itemKey(k runtime.Key, uk []byte, isMap bool) []byte {
	if isMap {
		return st.mapKey(k, uk)
	}
	return st.entryKey(k)
}

// Clear implements runtime.State.
func (st *state) Clear(k runtime.Key) error {
	t, err := st.wtree(k, true)
	if err != nil {
		return err
	}
	ik := st.entryKey(k)
	if st.spec.Kind.HasUserKey() {
		st.s.deletePrefix(t, ik)
		return nil
	}
	t.delete(ik)
	return nil
}

// Keys implements runtime.State. Keys come in encoded order (the item
// keys' order); after each, the walk seeks past the key's other items.
func (st *state) Keys(kg int, fn func(key []byte) bool) error {
	s := st.s
	if err := storekit.CheckKeys(&s.cfg, st.spec.Name, s.closed, kg, fn); err != nil {
		return err
	}
	t := st.trees[st.index(kg)]
	if t == nil {
		return nil
	}
	buf := storekit.AppendGroup(s.takeBuf(), kg)
	keyBuf, kb := s.takeBuf(), s.takeBuf()
	it := s.takeIter(t)
	s.iterating++
	defer func() {
		s.iterating--
		s.giveIter(it)
		s.giveBuf(kb)
		s.giveBuf(keyBuf)
		s.giveBuf(buf)
	}()
	gl := len(buf)
	for ok := it.Seek(t.probe(buf[:gl])); ok; {
		ik := keyOf(t.Slabs, it.Item(), kb)
		if len(ik) < gl || !bytes.Equal(ik[:gl], buf[:gl]) {
			break
		}
		key, rest, scratch, ferr := storekit.ReadFramed(ik[gl:], keyBuf[:0])
		keyBuf = scratch
		if ferr != nil {
			return fmt.Errorf("state %q: %w", st.spec.Name, errBadItem)
		}
		if !fn(key) {
			break
		}
		var more bool
		buf, more = storekit.AppendPrefixEnd(buf[:gl], ik[:len(ik)-len(rest)])
		if !more {
			break
		}
		ok = it.Seek(t.probe(buf[gl:]))
	}
	return nil
}

// DeleteAll implements runtime.State.
func (st *state) DeleteAll(k runtime.Key) error {
	t, err := st.wtree(k, false)
	if err != nil {
		return err
	}
	s := st.s
	s.scratch = appendKeyPrefix(s.scratch[:0], k.Group(), k.Bytes())
	s.deletePrefix(t, s.scratch)
	return nil
}

// Namespaces implements runtime.State. Namespaces come in encoded order
// (the item keys' order).
func (st *state) Namespaces(k runtime.Key, fn func(ns []byte) bool) error {
	t, err := st.rtree(k, false)
	if err != nil || t == nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("btree: state %q: Namespaces with a nil callback", st.spec.Name)
	}
	s := st.s
	buf := appendKeyPrefix(s.takeBuf(), k.Group(), k.Bytes())
	pl := len(buf)
	buf, _ = storekit.AppendPrefixEnd(buf, buf[:pl])
	el := len(buf)
	it := s.takeIter(t)
	nsBuf, kb := s.takeBuf(), s.takeBuf()
	s.iterating++
	defer func() {
		s.iterating--
		s.giveIter(it)
		s.giveBuf(kb)
		s.giveBuf(nsBuf)
		s.giveBuf(buf)
	}()
	skip := st.spec.Kind.HasUserKey()
	for ok := it.Seek(t.probe(buf[:pl])); ok; {
		ik := keyOf(t.Slabs, it.Item(), kb)
		if bytes.Compare(ik, buf[pl:el]) >= 0 {
			break
		}
		if !st.spec.SubKeyed {
			// A keyed state's items have no namespace: the key has an
			// entry, in the empty namespace.
			fn(nil)
			break
		}
		ns, rest, scratch, ferr := storekit.ReadFramed(ik[pl:], nsBuf[:0])
		nsBuf = scratch
		if ferr != nil {
			return fmt.Errorf("state %q: %w", st.spec.Name, errBadItem)
		}
		if !fn(ns) {
			break
		}
		if !skip {
			ok = it.Next()
			continue
		}
		// Skip the other entries of this namespace's map: seek past every
		// item key that starts with (key, namespace).
		nsEnd := len(ik) - len(rest)
		var more bool
		buf, more = storekit.AppendPrefixEnd(buf[:el], ik[:nsEnd])
		if !more {
			break
		}
		ok = it.Seek(t.probe(buf[el:]))
	}
	return nil
}

// batchLen is the number of items an iteration reads ahead.
const batchLen = 8

// warm reads the first byte of every item's region and the last of its
// value (a list's elements start capLen bytes later: off). The regions
// of a batch lie in the arena, away from the tree node that holds the
// items (and, for entries written at different times, away from each
// other), so an iteration would take a cache miss per item, one at a
// time; reading a batch's bytes in one loop of independent loads lets the
// processor overlap the misses. The result only keeps the loads from
// being optimized away.
//
//go:noinline
func warm(slabs [][]byte, items []item, off int) (x byte) {
	for i := range items {
		it := &items[i]
		if it.ref != 0 {
			b := arena.At(slabs, it.ref)
			x += b[0] ^ b[storedKey(it.kl)+off+int(it.vl)-1]
		}
	}
	return x
}

// each calls fn with the items of t whose item keys k satisfy lo <= k < hi
// (hi nil: no upper bound), ascending, or descending if reverse, until fn
// returns false. Writes are refused while it runs.
func (s *Store) each(t *tree, lo, hi []byte, reverse bool, fn func(item) bool) {
	it := s.takeIter(t)
	s.iterating++
	defer func() {
		s.iterating--
		s.giveIter(it)
	}()
	var ok bool
	switch {
	case !reverse:
		ok = it.Seek(t.probe(lo))
	case hi == nil:
		ok = it.Last()
	case it.Seek(t.probe(hi)):
		ok = it.Prev()
	default: // every item is below hi
		ok = it.Last()
	}
	// The bound is checked as the batch fills, on the items' inline
	// prefixes where they decide, so that no item past it is warmed. It is
	// compared through before, not the tree's less: fn may search the tree,
	// which changes the probe key.
	bound := lo
	if !reverse {
		bound = hi
	}
	bp := shortProbe(bound)
	var batch [batchLen]item
	for ok {
		n := 0
		for ok && n < batchLen {
			x := it.Item()
			if reverse && t.before(x, bp, bound) || !reverse && hi != nil && !t.before(x, bp, bound) {
				ok = false
				break
			}
			batch[n] = x
			n++
			if reverse {
				ok = it.Prev()
			} else {
				ok = it.Next()
			}
		}
		warm(t.Slabs, batch[:n], 0)
		for _, x := range batch[:n] {
			if !fn(x) {
				return
			}
		}
	}
}

// hasGroup reports whether the state holds an entry in key group kg.
func (st *state) hasGroup(kg int) bool {
	t := st.trees[st.index(kg)]
	if t == nil || t.bt.Len() == 0 {
		return false
	}
	if st.s.layout == treePerGroup {
		return true
	}
	var p [groupLen]byte
	storekit.AppendGroup(p[:0], kg)
	it := t.bt.Iter()
	defer it.Release()
	return it.Seek(shortProbe(p[:])) && it.Item().kl >= groupLen && it.Item().p0>>48 == uint64(kg)
}

// errDuplicate reports a restored entry that repeats an earlier one.
var errDuplicate = errors.New("duplicate entry")

// load restores the entries of key group kg of src, which the state does
// not hold yet. The elements of a list are gathered into one region of
// their exact size.
func (st *state) load(src runtime.View, kg int) error {
	s := st.s
	spec := st.spec
	var (
		t         *tree
		listKey   = s.takeBuf() // the item key of the list being gathered
		listElems = s.takeBuf() // and its elements, encoded
	)
	defer func() {
		s.giveBuf(listElems)
		s.giveBuf(listKey)
	}()
	flush := func() error {
		if len(listKey) == 0 {
			return nil
		}
		x := t.newList(listKey, nil, 0, len(listElems))
		copy(arena.At(t.Slabs, x.ref)[storedKey(x.kl)+capLen:], listElems)
		x.vl = uint32(len(listElems))
		listKey, listElems = listKey[:0], listElems[:0]
		if t.load(x) {
			return fmt.Errorf("%w: the elements of a list are not consecutive", runtime.ErrCorrupt)
		}
		return nil
	}
	err := src.Scan(spec.Name, kg, func(e runtime.Entry) error {
		if err := storekit.CheckEntry(spec, kg, runtime.KeyGroupOfHash(runtime.HashKey(e.Key), s.cfg.MaxParallelism), e); err != nil {
			return err
		}
		if len(e.Key)+len(e.Namespace)+len(e.UserKey) > MaxKeyBytes {
			return fmt.Errorf("%w: entry of %d key bytes is longer than MaxKeyBytes", runtime.ErrCorrupt, len(e.Key)+len(e.Namespace)+len(e.UserKey))
		}
		if t == nil {
			t = st.groupTree(kg)
		}
		s.scratch = appendEntryKey(s.scratch[:0], kg, e.Key, e.Namespace, spec.SubKeyed)
		switch spec.Kind {
		case runtime.KindList:
			if len(listKey) == 0 || !bytes.Equal(listKey, s.scratch) {
				if err := flush(); err != nil {
					return err
				}
				listKey = append(listKey, s.scratch...)
			}
			if len(listElems)+storekit.ElemLen(len(e.Value)) > MaxValueBytes {
				return fmt.Errorf("%w: a list of more than MaxValueBytes", ErrTooLarge)
			}
			listElems = storekit.AppendElem(listElems, e.Value)
			return nil
		case runtime.KindValue:
		default:
			s.scratch = append(s.scratch, e.UserKey...)
		}
		if len(e.Value) > MaxValueBytes {
			return fmt.Errorf("%w: a value of %d bytes is longer than MaxValueBytes", ErrTooLarge, len(e.Value))
		}
		if t.load(t.newItem(s.scratch, e.Value)) {
			return fmt.Errorf("%w: %w: key %x, namespace %x, user key %x",
				runtime.ErrCorrupt, errDuplicate, e.Key, e.Namespace, e.UserKey)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}
