package runtime

import (
	"encoding/binary"
	"fmt"
)

// This file holds the map table: a keyed Map state kept as Go values by a
// TableHost, as table_value.go keeps a value state.
//
// A key group's map table is a hash table (otab) of key to the key's map,
// itself a hash table of user key to value, found by the user key's hash
// (userKeyHash) — Flink's heap backend keeps a map state the same way, a map
// per key. A map with no entries does not exist: the last Delete removes
// the key. An Update or a Get is two probes, one per table; an iteration
// of a key's map walks one table, with nothing decoded.
//
// Snapshots copy on write in two steps. Freeze records its lease in each
// non-empty key group, as a value table does; the first write under a
// live lease copies the key group's table of keys — the pointers to the
// maps, not the maps — and starts a new epoch, and a write to a map made
// in an earlier epoch copies that map first. So a write while a
// checkpoint is in flight copies the maps it writes, once each, and a
// frozen key group keeps every map as it was.

// TypedMapTable lets a keyed Map state be kept as Go values by a store
// that can (TableHost); the zero TypedMapTable keeps it as bytes.
// TypedMaps makes one.
type TypedMapTable[K, UK, V any] struct {
	mk func(spec StateSpec, env TableEnv, kc KeyCodec[K], ukc KeyCodec[UK], vc ValueCodec[V]) (Table, error)
}

// TypedMaps returns the TypedMapTable of a keyed Map state (not a
// SortedMap, whose order a hash table does not keep) with key type K,
// user key type UK and value type V, which stategen sets in the
// descriptors it generates whenever the types allow it: K and UK as the
// key of TypedValues, V as its value. A state whose types do not allow it
// fails to bind with ErrInvalidState, naming the type at fault.
func TypedMaps[K, UK comparable, V any]() TypedMapTable[K, UK, V] {
	return TypedMapTable[K, UK, V]{mk: newMapTable[K, UK, V]}
}

// typedMap is the typed side of a map table, as a handle calls it: kg and
// hash are the key group and HashKey of key, uh the userKeyHash of uk (see
// typedValue for why nothing is passed by pointer but the scan frame,
// which lives on the heap already).
type typedMap[K, UK, V any] interface {
	tget(kg int, hash uint64, key K, uh uint64, uk UK) (V, bool, error)
	tput(kg int, hash uint64, key K, uh uint64, uk UK, v V) error
	tupdate(kg int, hash uint64, key K, uh uint64, uk UK, fn func(old V, found bool) V) error
	tdelete(kg int, hash uint64, key K, uh uint64, uk UK) error
	// tscan yields every entry of key's map to sc.yield, until it
	// returns false.
	tscan(kg int, hash uint64, key K, sc *mapScan[UK, V]) error
}

// mapTable is the Table of a keyed map state.
type mapTable[K, UK comparable, V any] struct {
	tableBase
	keys   canon[K]
	uks    canon[UK]
	vc     ValueCodec[V]
	groups []mapGroup[K, UK, V]
	buf    []byte // the encoded value of a byte-level Get
	ubuf   []byte // the encoded old value of a byte-level Update
}

// mapGroup is one key group of a map table: each key's map, the
// snapshots that may be reading them, and the epoch of the table of keys
// (bumped when a write copies it): a map of an older epoch may be a
// frozen key group's, and is copied before it is written.
type mapGroup[K, UK comparable, V any] struct {
	m       otab[K, *umap[UK, V]]
	holders leases
	epoch   uint64
}

// umap is the map of one key: a hash table of user keys, of the epoch
// of its key group's table it was made or copied in.
type umap[UK comparable, V any] struct {
	m     otab[UK, V]
	epoch uint64
}

func newMapTable[K, UK comparable, V any](spec StateSpec, env TableEnv, kc KeyCodec[K], ukc KeyCodec[UK], vc ValueCodec[V]) (Table, error) {
	if spec.Kind != KindMap || spec.SubKeyed || spec.TTL != 0 {
		return nil, fmt.Errorf("%w: state %q: only keyed map states (not sorted) without TTL are kept as Go values", ErrInvalidState, spec.Name)
	}
	if err := checkTableTypes[K, V](&spec, "key"); err != nil {
		return nil, err
	}
	if err := checkTableTypes[UK, V](&spec, "user key"); err != nil {
		return nil, err
	}
	return &mapTable[K, UK, V]{
		tableBase: newTableBase(spec, env),
		keys:      canon[K]{kc: kc},
		uks:       canon[UK]{kc: ukc},
		vc:        vc,
		groups:    make([]mapGroup[K, UK, V], env.Config.KeyGroups.Len()),
	}, nil
}

// get returns key's map, nil if it has none. The caller only reads it.
func (g *mapGroup[K, UK, V]) get(hash uint64, key K) *umap[UK, V] {
	u, _ := g.m.get(hash, key)
	return u
}

// own makes g's table of keys the table's own to write: a copy, and a new
// epoch, if a live snapshot may be reading it.
func (g *mapGroup[K, UK, V]) own() {
	if g.holders.held() {
		g.m = g.m.clone()
		g.epoch++
	}
}

// writable returns key's map to write — owned (own), and copied if it is
// of an earlier epoch — made empty if it has none and create is set, and
// nil otherwise.
func (g *mapGroup[K, UK, V]) writable(hash uint64, key K, create bool) *umap[UK, V] {
	g.own()
	var p **umap[UK, V]
	if create {
		var found bool
		if p, found = g.m.slot(hash, key); !found {
			*p = &umap[UK, V]{epoch: g.epoch}
			return *p
		}
	} else {
		i := g.m.find(hash, key)
		if i < 0 {
			return nil
		}
		p = &g.m.slots[i].v
	}
	if u := *p; u.epoch != g.epoch {
		*p = &umap[UK, V]{m: u.m.clone(), epoch: g.epoch}
	}
	return *p
}

// dropEmpty removes key if its map u has no entries left.
func (g *mapGroup[K, UK, V]) dropEmpty(hash uint64, key K, u *umap[UK, V]) {
	if u.m.n == 0 {
		g.m.del(hash, key)
	}
}

// group returns key group kg, checked (groupIn).
func (t *mapTable[K, UK, V]) group(kg int, write bool) (*mapGroup[K, UK, V], error) {
	return groupIn(&t.tableBase, t.groups, kg, write)
}

func (t *mapTable[K, UK, V]) tget(kg int, hash uint64, key K, uh uint64, uk UK) (V, bool, error) {
	var v V
	g, err := t.group(kg, false)
	if err != nil {
		return v, false, err
	}
	u := g.get(hash, key)
	if u == nil {
		return v, false, nil
	}
	v, ok := u.m.get(uh, uk)
	return v, ok, nil
}

func (t *mapTable[K, UK, V]) tput(kg int, hash uint64, key K, uh uint64, uk UK, v V) error {
	g, err := t.group(kg, true)
	if err != nil {
		return err
	}
	g.writable(hash, key, true).m.put(uh, uk, v)
	if t.env.Changes != nil {
		t.noted(changePut, kg, key, uk, v)
	}
	return nil
}

// noted tells env.Changes, which must be set, of a change to (key, uk):
// changePut of v, changeDelete, or changeClear of key's whole map.
func (t *mapTable[K, UK, V]) noted(change, kg int, key K, uk UK, v V) {
	ukc := t.uks.kc
	if change == changeClear {
		ukc = nil
	}
	noted(&t.tableBase, change, kg, t.keys.kc, key, ukc, uk, t.vc, v)
}

func (t *mapTable[K, UK, V]) tupdate(kg int, hash uint64, key K, uh uint64, uk UK, fn func(old V, found bool) V) error {
	g, err := t.group(kg, true)
	if err != nil {
		return err
	}
	var old V
	u, i := g.get(hash, key), -1
	if u != nil {
		if i = u.m.find(uh, uk); i >= 0 {
			old = u.m.slots[i].v
		}
	}
	nv := callTyped(&t.tableBase, fn, old, i >= 0)
	if i >= 0 && u.epoch == g.epoch && len(g.holders) == 0 {
		// No snapshot holds the map, even one fn took: the slot read
		// is the one to write, and fn wrote nothing that moved it.
		u.m.slots[i].v = nv
	} else {
		g.writable(hash, key, true).m.put(uh, uk, nv)
	}
	if t.env.Changes != nil {
		t.noted(changePut, kg, key, uk, nv)
	}
	return nil
}

func (t *mapTable[K, UK, V]) tdelete(kg int, hash uint64, key K, uh uint64, uk UK) error {
	g, err := t.group(kg, true)
	if err != nil {
		return err
	}
	t.del(g, hash, key, uh, uk)
	if t.env.Changes != nil {
		var zero V
		t.noted(changeDelete, kg, key, uk, zero)
	}
	return nil
}

// del removes (key, uk) from g, copying nothing if it is absent.
func (t *mapTable[K, UK, V]) del(g *mapGroup[K, UK, V], hash uint64, key K, uh uint64, uk UK) {
	if u := g.get(hash, key); u == nil || u.m.find(uh, uk) < 0 {
		return
	}
	u := g.writable(hash, key, false)
	u.m.del(uh, uk)
	g.dropEmpty(hash, key, u)
}

func (t *mapTable[K, UK, V]) tscan(kg int, hash uint64, key K, sc *mapScan[UK, V]) error {
	g, err := t.group(kg, false)
	if err != nil {
		return err
	}
	u := g.get(hash, key)
	if u == nil {
		return nil
	}
	t.begin()
	defer t.done()
	for uk, v := range u.m.all {
		if !sc.yield(MapEntry[UK, V]{Key: uk, Value: v}, nil) {
			break
		}
	}
	return nil
}

// keyed checks a byte-level operation on k and returns its key group and
// key (keyedIn).
func (t *mapTable[K, UK, V]) keyed(k *Key, write bool) (*mapGroup[K, UK, V], K, error) {
	return keyedIn(&t.tableBase, t.groups, &t.keys, k, write)
}

// userKey decodes the user key of a byte-level operation and returns it
// with its userKeyHash.
func (t *mapTable[K, UK, V]) userKey(b []byte) (UK, uint64, error) {
	uk, err := t.uks.decode(b)
	if err != nil {
		return uk, 0, fmt.Errorf("%w: state %q: user key %x: %w", ErrInvalidKey, t.spec.Name, b, err)
	}
	return uk, userKeyHash(b), nil
}

// userKeyHash is the hash of an encoded user key in a map table's inner
// tables. Unlike HashKey it is nobody's contract — it picks no key group
// and is never stored — so an 8-byte encoding (an int64's, q5's auction
// in Nexmark, hashed with every bid of every window) is hashed by one
// multiply, Fibonacci hashing, whose top bits, the ones an otab uses, mix
// every bit of the key; the multiplier is odd, so distinct keys keep
// distinct hashes. Other lengths go to HashKey.
func userKeyHash(b []byte) uint64 {
	if len(b) == 8 {
		return userKeyHashWord(binary.BigEndian.Uint64(b))
	}
	return HashKey(b)
}

// userKeyHashWord is userKeyHash of an 8-byte encoding given as a
// big-endian number (KeyWord).
func userKeyHashWord(w uint64) uint64 { return w * 0x9E3779B97F4A7C15 }

// entry is keyed and userKey together.
func (t *mapTable[K, UK, V]) entry(k *Key, ukb []byte, write bool) (*mapGroup[K, UK, V], K, UK, uint64, error) {
	var uk UK
	g, key, err := t.keyed(k, write)
	if err != nil {
		return nil, key, uk, 0, err
	}
	uk, uh, err := t.userKey(ukb)
	return g, key, uk, uh, err
}

// Get implements MapState. The value is encoded into a buffer of the
// table's, valid until its next call.
func (t *mapTable[K, UK, V]) Get(k Key, userKey []byte) ([]byte, bool, error) {
	g, key, uk, uh, err := t.entry(&k, userKey, false)
	if err != nil {
		return nil, false, err
	}
	u := g.get(k.Hash(), key)
	if u == nil {
		return nil, false, nil
	}
	v, ok := u.m.get(uh, uk)
	if !ok {
		return nil, false, nil
	}
	t.buf = t.vc.AppendValue(t.buf[:0], v)
	return t.buf, true, nil
}

// Put implements MapState.
func (t *mapTable[K, UK, V]) Put(k Key, userKey, value []byte) error {
	g, key, uk, uh, err := t.entry(&k, userKey, true)
	if err != nil {
		return err
	}
	v, err := decodeWritten(&t.tableBase, t.vc, value)
	if err != nil {
		return err
	}
	g.writable(k.Hash(), key, true).m.put(uh, uk, v)
	if t.env.Changes != nil {
		t.noted(changePut, k.Group(), key, uk, v)
	}
	return nil
}

// Delete implements MapState.
func (t *mapTable[K, UK, V]) Delete(k Key, userKey []byte) error {
	g, key, uk, uh, err := t.entry(&k, userKey, true)
	if err != nil {
		return err
	}
	t.del(g, k.Hash(), key, uh, uk)
	if t.env.Changes != nil {
		var zero V
		t.noted(changeDelete, k.Group(), key, uk, zero)
	}
	return nil
}

// Update implements MapUpdater: fn sees the encoded old value, and its
// result is decoded and stored.
func (t *mapTable[K, UK, V]) Update(k Key, userKey []byte, fn func(old []byte, found bool) ([]byte, error)) error {
	g, key, uk, uh, err := t.entry(&k, userKey, true)
	if err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("state %q: Update with a nil callback", t.spec.Name)
	}
	var old []byte
	found := false
	if u := g.get(k.Hash(), key); u != nil {
		var v V
		if v, found = u.m.get(uh, uk); found {
			// Not t.buf: fn may Get other entries while it reads old.
			t.ubuf = t.vc.AppendValue(t.ubuf[:0], v)
			old = t.ubuf
		}
	}
	nb, err := t.callUpdate(fn, old, found)
	if err != nil {
		return err
	}
	v, err := decodeWritten(&t.tableBase, t.vc, nb)
	if err != nil {
		return err
	}
	g.writable(k.Hash(), key, true).m.put(uh, uk, v) // after fn, which may have taken a snapshot
	if t.env.Changes != nil {
		t.noted(changePut, k.Group(), key, uk, v)
	}
	return nil
}

// CheckWrite implements WriteChecker.
func (t *mapTable[K, UK, V]) CheckWrite(k Key) error {
	_, _, err := t.keyed(&k, true)
	return err
}

// Iterate implements MapState, in the order of the key's hash table.
func (t *mapTable[K, UK, V]) Iterate(k Key, fn func(userKey, value []byte) bool) error {
	g, key, err := t.keyed(&k, false)
	if err != nil {
		return err
	}
	u := g.get(k.Hash(), key)
	if u == nil {
		return nil
	}
	t.begin()
	defer t.done()
	var ub, vb []byte // fn may call the table, whose buffers are its own
	for uk, v := range u.m.all {
		ub = t.uks.kc.AppendKey(ub[:0], uk)
		vb = t.vc.AppendValue(vb[:0], v)
		if !fn(ub[:len(ub):len(ub)], vb[:len(vb):len(vb)]) {
			break
		}
	}
	return nil
}

// Edit implements MapState, as the host's states do (TableEnv.Edit).
func (t *mapTable[K, UK, V]) Edit(k Key, fn func(userKey, value []byte) (MapEdit, error)) error {
	return t.env.Edit(t.spec.Name,
		func(visit func(uk, v []byte) bool) error { return t.Iterate(k, visit) },
		func(uk []byte) error { return t.Delete(k, uk) },
		func(uk, v []byte) error { return t.Put(k, uk, v) },
		fn)
}

// Clear implements State: it removes k's map.
func (t *mapTable[K, UK, V]) Clear(k Key) error {
	g, key, err := t.keyed(&k, true)
	if err != nil {
		return err
	}
	if g.get(k.Hash(), key) != nil {
		g.own()
		g.m.del(k.Hash(), key)
	}
	if t.env.Changes != nil {
		var zero UK
		var v V
		t.noted(changeClear, k.Group(), key, zero, v)
	}
	return nil
}

// Namespaces implements State: the empty namespace if k has a map.
func (t *mapTable[K, UK, V]) Namespaces(k Key, fn func(ns []byte) bool) error {
	k = k.WithNamespace(nil)
	g, key, err := t.keyed(&k, false)
	if err != nil {
		return err
	}
	t.keyedNamespace(g.get(k.Hash(), key) != nil, fn)
	return nil
}

// DeleteAll implements State: a keyed state's only namespace is the
// empty one.
func (t *mapTable[K, UK, V]) DeleteAll(k Key) error { return t.Clear(k.WithNamespace(nil)) }

// Keys implements State, in the order of the key group's hash table.
func (t *mapTable[K, UK, V]) Keys(kg int, fn func(key []byte) bool) error {
	return keysIn(&t.tableBase, t.keys.kc, kg, fn, func(i int) *otab[K, *umap[UK, V]] { return &t.groups[i].m })
}

// Occupied implements Table.
func (t *mapTable[K, UK, V]) Occupied(kg int) bool { return t.groups[kg-t.start].m.n != 0 }

// Drop implements Table.
func (t *mapTable[K, UK, V]) Drop() { clear(t.groups) }

// Load implements Table: it decodes every entry into new tables per key
// group; install installs them.
func (t *mapTable[K, UK, V]) Load(groups KeyGroupRange, scan func(kg int, fn func(Entry) error) error) (func(), error) {
	return loadTabs(groups, scan, func(kg int, m *otab[K, *umap[UK, V]], e Entry) error {
		key, err := t.keys.decode(e.Key)
		if err != nil {
			return fmt.Errorf("%w: state %q, key group %d: key %x: %w", ErrCorrupt, t.spec.Name, kg, e.Key, err)
		}
		uk, err := t.uks.decode(e.UserKey)
		if err != nil {
			return fmt.Errorf("%w: state %q, key group %d: key %x: user key %x: %w", ErrCorrupt, t.spec.Name, kg, e.Key, e.UserKey, err)
		}
		v, err := decodeAll(t.vc, e.Value)
		if err != nil {
			return fmt.Errorf("%w: state %q, key group %d: key %x: value of user key %x: %w", ErrCorrupt, t.spec.Name, kg, e.Key, e.UserKey, err)
		}
		p, found := m.slot(HashKey(e.Key), key)
		if !found {
			*p = new(umap[UK, V])
		}
		pv, dup := (*p).m.slot(userKeyHash(e.UserKey), uk)
		if dup {
			return fmt.Errorf("%w: state %q, key group %d: key %x: user key %x twice", ErrCorrupt, t.spec.Name, kg, e.Key, e.UserKey)
		}
		*pv = v
		return nil
	}, func(kg int, m otab[K, *umap[UK, V]]) {
		g := &t.groups[kg-t.start]
		g.holders.held() // drops the leases of the empty table it replaces
		// The loaded maps are of epoch 0, and no snapshot holds them.
		g.m, g.epoch = m, 0
	})
}

// Freeze implements Table: the table of keys of every non-empty key
// group, and the maps it points to, become the view's; they are copied
// before the table next writes them while l is live.
func (t *mapTable[K, UK, V]) Freeze(l TableLease) TableView {
	return &mapView[K, UK, V]{t: t, lease: l, tabs: freezeTabs(len(t.groups), l, func(i int) (*otab[K, *umap[UK, V]], *leases) {
		return &t.groups[i].m, &t.groups[i].holders
	})}
}

// mapView is a frozen map table. Neither its tables of keys nor the maps
// they point to are written again while its lease is live.
type mapView[K, UK comparable, V any] struct {
	t     *mapTable[K, UK, V]
	lease TableLease
	tabs  []otab[K, *umap[UK, V]]
}

// Scan implements TableView.
func (v *mapView[K, UK, V]) Scan(kg int, fn func(Entry) error) error {
	var kb, ub, vb [64]byte
	var e Entry
	n := 0
	for key, u := range v.tabs[kg-v.t.start].all {
		e.Key = v.t.keys.kc.AppendKey(kb[:0], key)
		e.Namespace = e.Key[len(e.Key):]
		for uk, val := range u.m.all {
			if n++; n%scanCheckEvery == 0 && v.lease.Released() {
				return v.lease.ErrReleasedDuringScan(v.t.spec.Name)
			}
			e.UserKey = v.t.uks.kc.AppendKey(ub[:0], uk)
			e.Value = v.t.vc.AppendValue(vb[:0], val)
			if err := fn(e); err != nil {
				return err
			}
		}
	}
	return nil
}
