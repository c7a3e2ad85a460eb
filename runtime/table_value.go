package runtime

import "fmt"

// typedValue is the typed side of a value table, as a handle calls it: kg
// and hash are the key group and HashKey of key, which the handle has
// encoded and hashed (its Key is right by construction: the handle's
// maxParallelism is the store's, and a keyed handle makes no namespace).
// No pointer goes through these calls, which the compiler cannot see
// through: a pointer passed would escape, and its variable be allocated on
// the heap at every call (a Key is 64 bytes). tget returns the value for
// the same reason.
type typedValue[K, V any] interface {
	tget(kg int, hash uint64, key K) (V, bool, error)
	tcontains(kg int, hash uint64, key K) (bool, error)
	tput(kg int, hash uint64, key K, v V) error
	tupdate(kg int, hash uint64, key K, fn func(old V, found bool) V) error
	tdelete(kg int, hash uint64, key K) error
}

// valueTable is the Table of a keyed value state: a hash table of Go
// values (otab) per owned key group.
type valueTable[K comparable, V any] struct {
	tableBase
	keys   canon[K]
	vc     ValueCodec[V]
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
	if spec.Kind != KindValue || spec.SubKeyed || spec.TTL != 0 {
		return nil, fmt.Errorf("%w: state %q: only keyed value states without TTL are kept as Go values", ErrInvalidState, spec.Name)
	}
	if err := checkTableTypes[K, V](&spec, "key"); err != nil {
		return nil, err
	}
	return &valueTable[K, V]{
		tableBase: newTableBase(spec, env),
		keys:      canon[K]{kc: kc},
		vc:        vc,
		groups:    make([]valueGroup[K, V], env.Config.KeyGroups.Len()),
	}, nil
}

// keyed checks a byte-level operation on k, a write if write
// (keyIndex), and returns k's key group and its key decoded (decodeKey).
func (t *valueTable[K, V]) keyed(k *Key, write bool) (*valueGroup[K, V], K, error) {
	var key K
	i, err := t.keyIndex(k, write)
	if err != nil {
		return nil, key, err
	}
	key, err = t.decodeKey(k)
	return &t.groups[i], key, err
}

// group returns key group kg, checked (index).
func (t *valueTable[K, V]) group(kg int, write bool) (*valueGroup[K, V], error) {
	i, err := t.index(kg, write)
	if err != nil {
		return nil, err
	}
	return &t.groups[i], nil
}

// own makes g's slots the table's own to write: a copy if a live snapshot
// may be reading them.
func (g *valueGroup[K, V]) own() {
	if g.holders.held() {
		g.m = g.m.clone()
	}
}

func (t *valueTable[K, V]) tget(kg int, hash uint64, key K) (V, bool, error) {
	g, err := t.group(kg, false)
	if err != nil {
		var zero V
		return zero, false, err
	}
	v, ok := g.m.get(hash, key)
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
	g.own()
	g.m.put(hash, key, v)
	return nil
}

func (t *valueTable[K, V]) tupdate(kg int, hash uint64, key K, fn func(old V, found bool) V) error {
	g, err := t.group(kg, true)
	if err != nil {
		return err
	}
	old, found := g.m.get(hash, key)
	// fn must not write to the store, as in every ValueUpdater; it may
	// take a snapshot, which own, after it, copies the slots for.
	t.begin()
	defer t.done()
	nv := fn(old, found)
	g.own()
	g.m.put(hash, key, nv)
	return nil
}

func (t *valueTable[K, V]) tdelete(kg int, hash uint64, key K) error {
	g, err := t.group(kg, true)
	if err != nil {
		return err
	}
	g.own()
	g.m.del(hash, key)
	return nil
}

// decodeKey decodes the key of k, which must be the encoding of a K: the
// table holds no other keys.
func (t *valueTable[K, V]) decodeKey(k *Key) (K, error) {
	key, err := t.keys.decode(k.Bytes())
	if err != nil {
		return key, fmt.Errorf("%w: state %q: key %x: %w", ErrInvalidKey, t.spec.Name, k.Bytes(), err)
	}
	return key, nil
}

// decodeValue decodes a value passed to a byte-level write.
func (t *valueTable[K, V]) decodeValue(b []byte) (V, error) {
	v, err := decodeAll(t.vc, b)
	if err != nil {
		return v, fmt.Errorf("state %q: the value does not decode as %T: %w", t.spec.Name, v, err)
	}
	return v, nil
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
	v, err := t.decodeValue(value)
	if err != nil {
		return err
	}
	g.own()
	g.m.put(k.Hash(), key, v)
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
	if v, err = t.decodeValue(nb); err != nil {
		return err
	}
	g.own() // after fn, which may have taken a snapshot
	g.m.put(k.Hash(), key, v)
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
	g.own()
	g.m.del(k.Hash(), key)
	return nil
}

// Namespaces implements State: the empty namespace if k has a value.
func (t *valueTable[K, V]) Namespaces(k Key, fn func(ns []byte) bool) error {
	k = k.WithNamespace(nil)
	g, key, err := t.keyed(&k, false)
	if err != nil {
		return err
	}
	if g.m.find(k.Hash(), key) >= 0 {
		t.begin()
		defer t.done()
		fn([]byte{})
	}
	return nil
}

// DeleteAll implements State: a keyed state's only namespace is the
// empty one.
func (t *valueTable[K, V]) DeleteAll(k Key) error { return t.Clear(k.WithNamespace(nil)) }

// Keys implements State, in the map's order.
func (t *valueTable[K, V]) Keys(kg int, fn func(key []byte) bool) error {
	if err := t.checkKeys(kg, fn); err != nil {
		return err
	}
	t.begin()
	defer t.done()
	var buf []byte
	for key := range t.groups[kg-t.start].m.all {
		buf = t.keys.kc.AppendKey(buf[:0], key)
		if !fn(buf[:len(buf):len(buf)]) {
			break
		}
	}
	return nil
}

// Occupied implements Table.
func (t *valueTable[K, V]) Occupied(kg int) bool { return t.groups[kg-t.start].m.n != 0 }

// Drop implements Table.
func (t *valueTable[K, V]) Drop() { clear(t.groups) }

// Load implements Table: it decodes every entry into a new hash table per
// key group; install installs them.
func (t *valueTable[K, V]) Load(groups KeyGroupRange, scan func(kg int, fn func(Entry) error) error) (func(), error) {
	loaded := make([]otab[K, V], groups.Len())
	for kg := range groups.All() {
		m := &loaded[kg-groups.Start]
		err := scan(kg, func(e Entry) error {
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
		})
		if err != nil {
			return nil, err
		}
	}
	return func() {
		for kg := range groups.All() {
			if m := loaded[kg-groups.Start]; m.n != 0 {
				g := &t.groups[kg-t.start]
				g.holders.held() // drops the leases of the empty table it replaces
				g.m = m
			}
		}
	}, nil
}

// Freeze implements Table: the slots of every non-empty key group become
// the view's, and are copied before the table next writes them while l
// is live.
func (t *valueTable[K, V]) Freeze(l TableLease) TableView {
	v := &valueView[K, V]{t: t, lease: l, start: t.start, tabs: make([]otab[K, V], len(t.groups))}
	for i := range t.groups {
		g := &t.groups[i]
		if g.m.n == 0 {
			continue
		}
		v.tabs[i] = g.m
		g.holders.add(l)
	}
	return v
}

// valueView is a frozen value table. Its slots are never written again
// while its lease is live; it reads only the table's codecs and spec,
// which never change.
type valueView[K comparable, V any] struct {
	t     *valueTable[K, V]
	lease TableLease
	start int
	tabs  []otab[K, V]
}

// Scan implements TableView.
func (v *valueView[K, V]) Scan(kg int, fn func(Entry) error) error {
	var kb, vb [64]byte
	var e Entry
	n := 0
	for key, val := range v.tabs[kg-v.start].all {
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
