package runtime

import (
	"fmt"
	"reflect"
	"slices"
)

// This file holds the typed fast path of DESIGN.md §3: a keyed value state
// kept as Go values, in a hash table per key group (otab), by a store that
// hosts it.
//
// Every Store keeps its states as bytes, and a handle encodes a value on
// every Put and decodes it on every Get. A store that implements TableHost
// (backends/cow does) may instead hold a state as a Table the typed layer
// made: a value state whose key type compares as its encoding does and
// whose value type shares nothing mutable (TypedValues checks both) is then
// a table of (hash, key, value) slots per key group, and a handle's Get and
// Put are one probe after the key's key group, with nothing encoded but the
// key (whose XXH64 picks the key group, as on every store, and the slot).
//
// The bytes come back wherever the Store contract meets the outside world:
// a snapshot's Scan encodes the entries of the slots it froze, Restore
// decodes them, and the Table also answers every byte-level operation of a
// ValueState (Register of the same state by a handle without TypedValues,
// the conformance suite, tools), encoding and decoding as it goes. So the
// checkpoint format, rescaling and migrations are those of every state:
// the table is only where the entries live in between.
//
// Snapshots copy on write by key group. Freeze, the table's part of
// Store.Snapshot, records in each non-empty key group that the snapshot
// holds its slots, in time O(key groups); the first write to that key
// group while a snapshot that holds them is live copies the slots, and
// writes to the copy from then on. The async phase reads the frozen slots,
// which no one writes again. A checkpoint thus costs at most one copy of
// each key group written to while it is in flight — a memory copy, less
// than the encoding it costs anyway — and a write after the checkpoint
// finished copies nothing.

// TableHost is implemented by a Store that can keep a state as a Table
// made by the typed layer (DESIGN.md §3's typed fast path). Handles whose
// descriptor asks for it (ValueDescriptor.Typed) register through
// HostTable; every other use of the store is unchanged.
type TableHost interface {
	Store
	// HostTable registers spec as Register does — the same checks, errors
	// and answers — but a state it creates is the Table mk returns, made
	// for the state's spec as registered, with the host's TableEnv. If
	// spec's state exists already, HostTable returns it as Register would,
	// except that a state a Restore created and no Register returned yet
	// becomes a Table (mk's), loaded with its entries. A handle uses the
	// typed path only if the State returned is a table of its own types.
	HostTable(spec StateSpec, mk func(StateSpec, TableEnv) (Table, error)) (State, error)
}

// TableEnv is what a TableHost lends the tables it hosts: its
// configuration, the flags every operation checks, and its checks of keys,
// so that a table answers bad input as the host's own states do.
type TableEnv struct {
	// Config is the host's configuration.
	Config StoreConfig
	// Closed is set once the store is closed: every operation then fails
	// with ErrClosed.
	Closed *bool
	// Iterating counts the iterations of the store running now: a write
	// while it is above zero fails with ErrWriteDuringIteration, and a
	// table's own iterations raise it while their callbacks run.
	Iterating *int
	// CheckKey checks a Key before an operation (storekit.CheckKey).
	CheckKey func(cfg *StoreConfig, spec *StateSpec, k *Key, usesNS bool) error
	// CheckGroup checks a key group (storekit.CheckGroup).
	CheckGroup func(cfg *StoreConfig, state string, kg int) error
	// CheckKeys checks the arguments of State.Keys (storekit.CheckKeys).
	CheckKeys func(cfg *StoreConfig, name string, closed bool, kg int, fn func(key []byte) bool) error
}

// TableLease is a snapshot's side of a Freeze: what the table asks of the
// snapshot that holds its maps.
type TableLease interface {
	// Released reports whether the snapshot was released: a Scan still
	// running stops.
	Released() bool
	// Freed reports whether the snapshot is released and no Scan of it
	// runs: its maps may be written again.
	Freed() bool
	// ErrReleasedDuringScan is the error of a Scan of state stopped by a
	// release.
	ErrReleasedDuringScan(state string) error
}

// Table is a state a TableHost holds for the typed layer. It is a State of
// its kind at the byte level (a value table is a ValueState), and it gives
// its host what the host does with its own states: the synchronous phase
// of a snapshot, the emptiness of a key group, the loading of a restore.
// Like the store, it is used by the operator's goroutine, except for the
// TableViews it returns.
type Table interface {
	State
	// Freeze is the table's part of Store.Snapshot: it captures the
	// table as it is, in time O(key groups), for a snapshot whose
	// lifetime l reports. The view may be scanned from other goroutines
	// while the table changes.
	Freeze(l TableLease) TableView
	// Occupied reports whether key group kg (owned) holds entries.
	Occupied(kg int) bool
	// Load is the table's part of Store.Restore: it reads the entries
	// scan yields for each key group of groups (owned by the host, and
	// holding no entries), checked by the host (the shape of the state's
	// kind, the key group of the key), and returns the function that
	// installs them. Until it is called the table is unchanged, so that a
	// host can load all its states before it changes any. An entry that
	// does not decode as the table's types is ErrCorrupt, naming the state
	// and key group.
	Load(groups KeyGroupRange, scan func(kg int, fn func(Entry) error) error) (install func(), err error)
	// Drop frees the table's entries once the store is closed.
	Drop()
}

// TableView is a Table frozen by Freeze: View.Scan of one state. Scans of
// different key groups may run on several goroutines at once.
type TableView interface {
	// Scan calls fn with every entry of key group kg, in an unspecified
	// order, until fn returns an error, which Scan returns. It stops with
	// the lease's ErrReleasedDuringScan if the snapshot is released while
	// it runs.
	Scan(kg int, fn func(Entry) error) error
}

// TypedTable lets a value state be kept as Go values by a store that can
// (TableHost); the zero TypedTable keeps it as bytes. TypedValues makes
// one.
type TypedTable[K, V any] struct {
	mk func(spec StateSpec, env TableEnv, kc KeyCodec[K], vc ValueCodec[V]) (Table, error)
}

// TypedValues returns the TypedTable of a keyed value state with key type
// K and value type V, which stategen sets in the descriptors it generates
// whenever the types allow it. They allow it when two keys are equal (==)
// exactly when their encodings are, and a key is compared without reading
// memory elsewhere — K is made of booleans and integers, in structs and
// arrays, with no floating-point number (NaN, -0), string, pointer or
// interface — and when a copy of a V shares nothing that the copy's owner
// could change — V is made of booleans, numbers and strings, in structs
// and arrays, with no slice, map, pointer, channel, function or interface.
// Neither may have an unexported field (blank ones aside), which a codec
// might not encode: the Go value would then keep what a restore loses. A
// state whose types do not allow it fails to bind with ErrInvalidState,
// naming the type at fault.
func TypedValues[K comparable, V any]() TypedTable[K, V] {
	return TypedTable[K, V]{mk: newValueTable[K, V]}
}

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
	spec   StateSpec
	env    TableEnv
	kc     KeyCodec[K]
	vc     ValueCodec[V]
	start  int // the first owned key group: groups[kg-start] is kg's
	groups []valueGroup[K, V]
	buf    []byte // the encoded value of a byte-level Get
	ubuf   []byte // the encoded old value of a byte-level Update
	kbuf   []byte // a key re-encoded to check it (canonical)
}

// valueGroup is one key group of a value table: its hash table, and the
// snapshots that may be reading its slots.
type valueGroup[K comparable, V any] struct {
	m       otab[K, V]
	holders []TableLease
}

func newValueTable[K comparable, V any](spec StateSpec, env TableEnv, kc KeyCodec[K], vc ValueCodec[V]) (Table, error) {
	if spec.Kind != KindValue || spec.SubKeyed || spec.TTL != 0 {
		return nil, fmt.Errorf("%w: state %q: only keyed value states without TTL are kept as Go values", ErrInvalidState, spec.Name)
	}
	var k K
	var v V
	if err := goValueSafe(reflect.TypeOf(&k).Elem(), true); err != nil {
		return nil, fmt.Errorf("%w: state %q: key type %T cannot key a Go map in place of its encoding: %v", ErrInvalidState, spec.Name, k, err)
	}
	if err := goValueSafe(reflect.TypeOf(&v).Elem(), false); err != nil {
		return nil, fmt.Errorf("%w: state %q: value type %T cannot be kept as a Go value: %v", ErrInvalidState, spec.Name, v, err)
	}
	return &valueTable[K, V]{
		spec:   spec,
		env:    env,
		kc:     kc,
		vc:     vc,
		start:  env.Config.KeyGroups.Start,
		groups: make([]valueGroup[K, V], env.Config.KeyGroups.Len()),
	}, nil
}

// goValueSafe checks that t may be a table's key type (key) or value type:
// see TypedValues.
func goValueSafe(t reflect.Type, key bool) error {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return nil
	case reflect.String:
		if key {
			return fmt.Errorf("%v is a string, whose bytes a table would read from elsewhere at every lookup (a cow state keeps them in its records)", t)
		}
		return nil
	case reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		if key {
			return fmt.Errorf("%v is a floating-point number (NaN != NaN, -0 == +0)", t)
		}
		return nil
	case reflect.Array:
		return goValueSafe(t.Elem(), key)
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Name == "_" {
				continue // no code reads it: a copy's is no one's
			}
			if !f.IsExported() {
				return fmt.Errorf("%v has an unexported field %s", t, f.Name)
			}
			if err := goValueSafe(f.Type, key); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%v is a %v", t, t.Kind())
}

// Spec implements State.
func (t *valueTable[K, V]) Spec() StateSpec { return t.spec }

// keyed checks a byte-level operation on k, a write if write — the Key's
// own checks (the host's CheckKey), then group's — and returns k's key
// group and its key decoded (decodeKey).
func (t *valueTable[K, V]) keyed(k *Key, write bool) (*valueGroup[K, V], K, error) {
	var key K
	if !*t.env.Closed {
		if err := t.env.CheckKey(&t.env.Config, &t.spec, k, true); err != nil {
			return nil, key, err
		}
	}
	g, err := t.group(k.Group(), write)
	if err == nil {
		key, err = t.decodeKey(k)
	}
	return g, key, err
}

// group returns key group kg, checked: the store is open, kg is owned,
// and a write is not made from inside an iteration. A write then calls
// own before it changes the group's slots.
func (t *valueTable[K, V]) group(kg int, write bool) (*valueGroup[K, V], error) {
	i := kg - t.start
	if *t.env.Closed || uint(i) >= uint(len(t.groups)) || write && *t.env.Iterating > 0 {
		return nil, t.groupError(kg)
	}
	return &t.groups[i], nil
}

// groupError is group's failure.
func (t *valueTable[K, V]) groupError(kg int) error {
	if *t.env.Closed {
		return fmt.Errorf("%w: state %q", ErrClosed, t.spec.Name)
	}
	if err := t.env.CheckGroup(&t.env.Config, t.spec.Name, kg); err != nil {
		return err
	}
	return fmt.Errorf("%w: state %q", ErrWriteDuringIteration, t.spec.Name)
}

// own makes g's slots the table's own to write: a copy if a live snapshot
// may be reading them.
func (g *valueGroup[K, V]) own() {
	if len(g.holders) != 0 {
		held := false
		for _, l := range g.holders {
			if !l.Freed() {
				held = true
				break
			}
		}
		clear(g.holders)
		g.holders = g.holders[:0]
		if held {
			g.m = g.m.clone()
		}
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
	*t.env.Iterating++
	defer func() { *t.env.Iterating-- }()
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
	key, err := t.decodeCanonical(k.Bytes())
	if err != nil {
		return key, fmt.Errorf("%w: state %q: key %x: %w", ErrInvalidKey, t.spec.Name, k.Bytes(), err)
	}
	return key, nil
}

// decodeCanonical decodes b as a K, which must encode to b again: a
// table keeps the K, and Scan writes its encoding.
func (t *valueTable[K, V]) decodeCanonical(b []byte) (K, error) {
	key, err := decodeKeyAll(t.kc, b)
	if err != nil {
		return key, err
	}
	if t.kbuf = t.kc.AppendKey(t.kbuf[:0], key); string(t.kbuf) != string(b) {
		return key, fmt.Errorf("%w: the key is not the encoding of the %T it decodes to", ErrCorrupt, key)
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

// callUpdate calls an Update's fn, during which the store refuses writes.
func (t *valueTable[K, V]) callUpdate(fn func(old []byte, found bool) ([]byte, error), old []byte, found bool) ([]byte, error) {
	*t.env.Iterating++
	defer func() { *t.env.Iterating-- }()
	return fn(old, found)
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
		*t.env.Iterating++
		defer func() { *t.env.Iterating-- }()
		fn([]byte{})
	}
	return nil
}

// DeleteAll implements State: a keyed state's only namespace is the
// empty one.
func (t *valueTable[K, V]) DeleteAll(k Key) error { return t.Clear(k.WithNamespace(nil)) }

// Keys implements State, in the map's order.
func (t *valueTable[K, V]) Keys(kg int, fn func(key []byte) bool) error {
	if err := t.env.CheckKeys(&t.env.Config, t.spec.Name, *t.env.Closed, kg, fn); err != nil {
		return err
	}
	*t.env.Iterating++
	defer func() { *t.env.Iterating-- }()
	var buf []byte
	for key := range t.groups[kg-t.start].m.all {
		buf = t.kc.AppendKey(buf[:0], key)
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
			key, err := t.decodeCanonical(e.Key)
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
				g.own() // drops the holders of the empty table it replaces
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
		// Forget the snapshots gone since (a key group no one writes
		// would otherwise keep every snapshot's lease).
		g.holders = slices.DeleteFunc(g.holders, TableLease.Freed)
		g.holders = append(g.holders, l)
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

// scanCheckEvery is how many entries a Scan visits between two checks
// that its snapshot is still live.
const scanCheckEvery = 256

// Scan implements TableView.
func (v *valueView[K, V]) Scan(kg int, fn func(Entry) error) error {
	var kb, vb [64]byte
	var e Entry
	n := 0
	for key, val := range v.tabs[kg-v.start].all {
		if n++; n%scanCheckEvery == 0 && v.lease.Released() {
			return v.lease.ErrReleasedDuringScan(v.t.spec.Name)
		}
		e.Key = v.t.kc.AppendKey(kb[:0], key)
		e.Namespace = e.Key[len(e.Key):]
		e.Value = v.t.vc.AppendValue(vb[:0], val)
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}
