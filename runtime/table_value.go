package runtime

import "fmt"

// typedValue is the typed side of a value table, as a handle calls it: kg
// and hash are the key group and HashKey of key, which the handle has
// encoded and hashed (its Key is right by construction: the handle's
// maxParallelism is the store's, and a keyed handle makes no namespace).
// No pointer goes through these calls, which the compiler cannot see
// through: a pointer passed would escape, and its variable be allocated on
// the heap at every call (a Key is 64 bytes). tget returns the value for
// the same reason, and takes the caller's, whose memory a table of slices
// reuses (GetInto; Get's is the zero V).
type typedValue[K, V any] interface {
	tget(kg int, hash uint64, key K, reuse V) (V, bool, error)
	tcontains(kg int, hash uint64, key K) (bool, error)
	tput(kg int, hash uint64, key K, v V) error
	tupdate(kg int, hash uint64, key K, fn func(old V, found bool) V) error
	tdelete(kg int, hash uint64, key K) error
}

// valueTable is the Table of a keyed value state: a hash table of Go
// values (otab) per owned key group.
type valueTable[K comparable, V any] struct {
	tableBase
	keys canon[K]
	vc   ValueCodec[V]
	// cp, if set, copies src into dst's memory (reused) and returns the
	// copy: the values are slices (TypedSlices), whose arrays the table
	// owns and the caller must not share. Without it a value is copied by
	// assignment.
	cp func(dst, src V) V
	// drop, if set (with cp), is given the value of a key deleted, whose
	// array a later copy may reuse.
	drop   func(v V)
	groups []valueGroup[K, V]
	buf    []byte // the encoded value of a byte-level Get
	ubuf   []byte // the encoded old value of a byte-level Update
}

// valueGroup is one key group of a value table: its hash table, and the
// snapshots that may be reading its slots.
type valueGroup[K comparable, V any] struct {
	m       otab[K, V]
	holders leases
}

func newValueTable[K comparable, V any](spec StateSpec, env TableEnv, kc KeyCodec[K], vc ValueCodec[V]) (Table, error) {
	if err := checkValueTable(&spec); err != nil {
		return nil, err
	}
	if err := checkTableTypes[K, V](&spec, "key"); err != nil {
		return nil, err
	}
	return makeValueTable(spec, env, kc, vc), nil
}

// newSliceTable is newValueTable for values that are slices of E: E must
// be what a value table may hold, and the table copies the slices in and
// out (cp).
func newSliceTable[K comparable, E any](spec StateSpec, env TableEnv, kc KeyCodec[K], vc ValueCodec[[]E]) (Table, error) {
	if err := checkValueTable(&spec); err != nil {
		return nil, err
	}
	if err := checkTableTypes[K, E](&spec, "key"); err != nil {
		return nil, err
	}
	t := makeValueTable(spec, env, kc, vc)
	var free slicePool[E]
	t.cp, t.drop = free.copy, free.put
	return t, nil
}

// slicePool keeps the arrays of a slice table's deleted values for the
// copies it makes next, so that a key deleted and written again (a
// session closed and another opened) allocates nothing. It keeps a
// bounded number of small arrays.
type slicePool[E any] struct{ free [][]E }

// Bounds of a slicePool: how many arrays, of at most how many elements.
const (
	slicePoolArrays = 256
	slicePoolCap    = 64
)

// copy returns src copied into dst's array, or into one of the pool's if
// dst has none.
func (p *slicePool[E]) copy(dst, src []E) []E {
	if cap(dst) == 0 && len(src) != 0 {
		if n := len(p.free); n != 0 {
			dst = p.free[n-1]
			p.free[n-1] = nil
			p.free = p.free[:n-1]
		}
	}
	return append(dst[:0], src...)
}

// put keeps v's array, which no one else holds, for a later copy.
func (p *slicePool[E]) put(v []E) {
	if c := cap(v); c != 0 && c <= slicePoolCap && len(p.free) < slicePoolArrays {
		clear(v[:c]) // keep no pointers the elements may hold
		p.free = append(p.free, v[:0])
	}
}

// checkValueTable checks that spec is a state a value table can be.
func checkValueTable(spec *StateSpec) error {
	if spec.Kind != KindValue || spec.SubKeyed || spec.TTL != 0 {
		return fmt.Errorf("%w: state %q: only keyed value states without TTL are kept as Go values", ErrInvalidState, spec.Name)
	}
	return nil
}

func makeValueTable[K comparable, V any](spec StateSpec, env TableEnv, kc KeyCodec[K], vc ValueCodec[V]) *valueTable[K, V] {
	return &valueTable[K, V]{
		tableBase: newTableBase(spec, env),
		keys:      canon[K]{kc: kc},
		vc:        vc,
		groups:    make([]valueGroup[K, V], env.Config.KeyGroups.Len()),
	}
}

// keyed checks a byte-level operation on k and returns its key group and
// key (keyedIn).
func (t *valueTable[K, V]) keyed(k *Key, write bool) (*valueGroup[K, V], K, error) {
	return keyedIn(&t.tableBase, t.groups, &t.keys, k, write)
}

// group returns key group kg, checked (groupIn).
func (t *valueTable[K, V]) group(kg int, write bool) (*valueGroup[K, V], error) {
	return groupIn(&t.tableBase, t.groups, kg, write)
}

// own makes g's slots the table's own to write: a copy if a live snapshot
// may be reading them, with copies of their slices (cp) if the values are
// slices, so that the table always owns the arrays of its slots and
// writes them in place.
func (t *valueTable[K, V]) own(g *valueGroup[K, V]) {
	if g.holders.held() {
		g.m = g.m.clone()
		if t.cp != nil {
			var zero V
			for i := range g.m.slots {
				if s := &g.m.slots[i]; s.h != 0 {
					s.v = t.cp(zero, s.v)
				}
			}
		}
	}
}

// store sets key's value to v: a copy into the slot's array if the values
// are slices. The caller owns g.
func (t *valueTable[K, V]) store(g *valueGroup[K, V], hash uint64, key K, v V) {
	p, _ := g.m.slot(hash, key)
	if t.cp != nil {
		v = t.cp(*p, v)
	}
	*p = v
}

func (t *valueTable[K, V]) tget(kg int, hash uint64, key K, reuse V) (V, bool, error) {
	g, err := t.group(kg, false)
	if err != nil {
		var zero V
		return zero, false, err
	}
	v, ok := g.m.get(hash, key)
	if ok && t.cp != nil {
		v = t.cp(reuse, v)
	}
	return v, ok, nil
}

func (t *valueTable[K, V]) tcontains(kg int, hash uint64, key K) (bool, error) {
	g, err := t.group(kg, false)
	if err != nil {
		return false, err
	}
	return g.m.find(hash, key) >= 0, nil
}

func (t *valueTable[K, V]) tput(kg int, hash uint64, key K, v V) error {
	g, err := t.group(kg, true)
	if err != nil {
		return err
	}
	t.own(g)
	t.store(g, hash, key, v)
	if t.env.Changes != nil {
		t.noted(changePut, kg, key, v)
	}
	return nil
}

func (t *valueTable[K, V]) tupdate(kg int, hash uint64, key K, fn func(old V, found bool) V) error {
	g, err := t.group(kg, true)
	if err != nil {
		return err
	}
	old, found := g.m.get(hash, key)
	if found && t.cp != nil {
		var zero V
		old = t.cp(zero, old) // fn may change it
	}
	// fn must not write to the store, as in every ValueUpdater; it may
	// take a snapshot, which own, after it, copies the slots for.
	nv := callTyped(&t.tableBase, fn, old, found)
	t.own(g)
	t.store(g, hash, key, nv)
	if t.env.Changes != nil {
		t.noted(changePut, kg, key, nv)
	}
	return nil
}

func (t *valueTable[K, V]) tdelete(kg int, hash uint64, key K) error {
	g, err := t.group(kg, true)
	if err != nil {
		return err
	}
	t.del(g, hash, key)
	if t.env.Changes != nil {
		var zero V
		t.noted(changeClear, kg, key, zero)
	}
	return nil
}

// noted tells env.Changes, which must be set, of a change to key
// (changePut of v, or changeClear).
func (t *valueTable[K, V]) noted(change, kg int, key K, v V) {
	noted[K, noNS, V](&t.tableBase, change, kg, t.keys.kc, key, nil, noNS{}, t.vc, v)
}

// del removes key from g, which it owns first, and gives its value to
// drop if the table has one.
func (t *valueTable[K, V]) del(g *valueGroup[K, V], hash uint64, key K) {
	t.own(g)
	if t.drop != nil {
		if v, ok := g.m.get(hash, key); ok {
			t.drop(v)
		}
	}
	g.m.del(hash, key)
}

// Get implements ValueState. The value is encoded into a buffer of the
// table's, valid until its next call.
func (t *valueTable[K, V]) Get(k Key) ([]byte, bool, error) {
	g, key, err := t.keyed(&k, false)
	if err != nil {
		return nil, false, err
	}
	v, ok := g.m.get(k.Hash(), key)
	if !ok {
		return nil, false, nil
	}
	t.buf = t.vc.AppendValue(t.buf[:0], v)
	return t.buf, true, nil
}

// Put implements ValueState.
func (t *valueTable[K, V]) Put(k Key, value []byte) error {
	g, key, err := t.keyed(&k, true)
	if err != nil {
		return err
	}
	v, err := decodeWritten(&t.tableBase, t.vc, value)
	if err != nil {
		return err
	}
	t.own(g)
	g.m.put(k.Hash(), key, v)
	if t.env.Changes != nil {
		t.noted(changePut, k.Group(), key, v)
	}
	return nil
}

// Update implements ValueUpdater: fn sees the encoded old value, and its
// result is decoded and stored.
func (t *valueTable[K, V]) Update(k Key, fn func(old []byte, found bool) ([]byte, error)) error {
	g, key, err := t.keyed(&k, true)
	if err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("state %q: Update with a nil callback", t.spec.Name)
	}
	var old []byte
	v, found := g.m.get(k.Hash(), key)
	if found {
		// Not t.buf: fn may Get other entries while it reads old.
		t.ubuf = t.vc.AppendValue(t.ubuf[:0], v)
		old = t.ubuf
	}
	nb, err := t.callUpdate(fn, old, found)
	if err != nil {
		return err
	}
	if v, err = decodeWritten(&t.tableBase, t.vc, nb); err != nil {
		return err
	}
	t.own(g) // after fn, which may have taken a snapshot
	g.m.put(k.Hash(), key, v)
	if t.env.Changes != nil {
		t.noted(changePut, k.Group(), key, v)
	}
	return nil
}

// CheckWrite implements WriteChecker.
func (t *valueTable[K, V]) CheckWrite(k Key) error {
	_, _, err := t.keyed(&k, true)
	return err
}

// Clear implements State.
func (t *valueTable[K, V]) Clear(k Key) error {
	g, key, err := t.keyed(&k, true)
	if err != nil {
		return err
	}
	t.del(g, k.Hash(), key)
	if t.env.Changes != nil {
		var zero V
		t.noted(changeClear, k.Group(), key, zero)
	}
	return nil
}

// Namespaces implements State: the empty namespace if k has a value.
func (t *valueTable[K, V]) Namespaces(k Key, fn func(ns []byte) bool) error {
	k = k.WithNamespace(nil)
	g, key, err := t.keyed(&k, false)
	if err != nil {
		return err
	}
	t.keyedNamespace(g.m.find(k.Hash(), key) >= 0, fn)
	return nil
}

// DeleteAll implements State: a keyed state's only namespace is the
// empty one.
func (t *valueTable[K, V]) DeleteAll(k Key) error { return t.Clear(k.WithNamespace(nil)) }

// Keys implements State, in the map's order.
func (t *valueTable[K, V]) Keys(kg int, fn func(key []byte) bool) error {
	return keysIn(&t.tableBase, t.keys.kc, kg, fn, func(i int) *otab[K, V] { return &t.groups[i].m })
}

// Occupied implements Table.
func (t *valueTable[K, V]) Occupied(kg int) bool { return t.groups[kg-t.start].m.n != 0 }

// Drop implements Table.
func (t *valueTable[K, V]) Drop() { clear(t.groups) }

// Load implements Table: it decodes every entry into a new hash table per
// key group; install installs them.
func (t *valueTable[K, V]) Load(groups KeyGroupRange, scan func(kg int, fn func(Entry) error) error) (func(), error) {
	return loadTabs(groups, scan, func(kg int, m *otab[K, V], e Entry) error {
		key, err := t.keys.decode(e.Key)
		if err != nil {
			return fmt.Errorf("%w: state %q, key group %d: key %x: %w", ErrCorrupt, t.spec.Name, kg, e.Key, err)
		}
		v, err := decodeAll(t.vc, e.Value)
		if err != nil {
			return fmt.Errorf("%w: state %q, key group %d: value of key %x: %w", ErrCorrupt, t.spec.Name, kg, e.Key, err)
		}
		p, dup := m.slot(HashKey(e.Key), key)
		if dup {
			return fmt.Errorf("%w: state %q, key group %d: key %x twice", ErrCorrupt, t.spec.Name, kg, e.Key)
		}
		*p = v
		return nil
	}, func(kg int, m otab[K, V]) {
		g := &t.groups[kg-t.start]
		g.holders.held() // drops the leases of the empty table it replaces
		g.m = m
	})
}

// Freeze implements Table: the slots of every non-empty key group become
// the view's, and are copied before the table next writes them while l
// is live.
func (t *valueTable[K, V]) Freeze(l TableLease) TableView {
	return &valueView[K, V]{t: t, lease: l, tabs: freezeTabs(len(t.groups), l, func(i int) (*otab[K, V], *leases) {
		return &t.groups[i].m, &t.groups[i].holders
	})}
}

// valueView is a frozen value table. Its slots are never written again
// while its lease is live; it reads only the table's codecs and spec,
// which never change.
type valueView[K comparable, V any] struct {
	t     *valueTable[K, V]
	lease TableLease
	tabs  []otab[K, V]
}

// Scan implements TableView.
func (v *valueView[K, V]) Scan(kg int, fn func(Entry) error) error {
	var kb, vb [64]byte
	var e Entry
	n := 0
	for key, val := range v.tabs[kg-v.t.start].all {
		if n++; n%scanCheckEvery == 0 && v.lease.Released() {
			return v.lease.ErrReleasedDuringScan(v.t.spec.Name)
		}
		e.Key = v.t.keys.kc.AppendKey(kb[:0], key)
		e.Namespace = e.Key[len(e.Key):]
		e.Value = v.t.vc.AppendValue(vb[:0], val)
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}
