package runtime

import (
	"fmt"
	"reflect"
	"slices"
)

// This file holds the typed fast path of DESIGN.md §3: a keyed state kept
// as Go values, in a hash table per key group (otab), by a store that
// hosts it — what every table shares; table_value.go holds the value
// tables (TypedValues, TypedSlices), table_map.go the map tables
// (TypedMaps).
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
// ValueState or MapState (Register of the same state by a handle without
// Typed, the conformance suite, tools), encoding and decoding as it goes. So the
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
// descriptor asks for it (ValueDescriptor.Typed, MapDescriptor.Typed)
// register through HostTable; every other use of the store is unchanged.
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
	// Edit runs a MapState.Edit over the walk, deletions and puts of a
	// table (storekit.Edit).
	Edit func(state string, walk func(fn func(uk, v []byte) bool) error, del func(uk []byte) error, put func(uk, v []byte) error,
		fn func(uk, v []byte) (MapEdit, error)) error
	// Changes, if set, is told of every change the table makes to its
	// entries. The host leaves it nil; a Store that records changes for
	// incremental checkpoints and hosts tables through its inner store
	// (checkpoint.Tracker) sets it in the TableEnv it passes on to the
	// table's maker.
	Changes TableChanges
}

// TableChanges is told of every change a Table makes to its entries,
// through its typed side or at the byte level, in the entries' encodings
// and once the change is made: the changes of a state, applied in order
// to its entries as they were, give its entries as they are. A keyed
// table's namespace is empty. The slices are valid only during the call.
type TableChanges interface {
	// Put records that the value of (key, ns), or of user key uk of its
	// map (uk non-nil), is value.
	Put(kg int, key, ns, uk, value []byte)
	// Delete records that user key uk of the map of (key, ns) has no
	// entry.
	Delete(kg int, key, ns, uk []byte)
	// Clear records that (key, ns) has no value, or no map.
	Clear(kg int, key, ns []byte)
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

// TypedSlices is TypedValues for a value state whose values are slices of
// E, with E as TypedValues allows a value (so no slice in an E): the
// table keeps a copy of each slice it is given, in an array of its own
// that later Puts of the key reuse, and gives out copies — a Get a new
// slice, a GetInto the caller's slice, reused, as decoding would. A
// snapshot's copy of a key group copies the slices too.
func TypedSlices[K comparable, E any]() TypedTable[K, []E] {
	return TypedTable[K, []E]{mk: newSliceTable[K, E]}
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

// checkTableTypes checks that K may key a table and that V may be kept in
// one (goValueSafe), naming the state and the type at fault.
func checkTableTypes[K, V any](spec *StateSpec, what string) error {
	var k K
	var v V
	if err := goValueSafe(reflect.TypeOf(&k).Elem(), true); err != nil {
		return fmt.Errorf("%w: state %q: %s type %T cannot key a Go map in place of its encoding: %v", ErrInvalidState, spec.Name, what, k, err)
	}
	if err := goValueSafe(reflect.TypeOf(&v).Elem(), false); err != nil {
		return fmt.Errorf("%w: state %q: value type %T cannot be kept as a Go value: %v", ErrInvalidState, spec.Name, v, err)
	}
	return nil
}

// tableBase is what every table holds alike: its spec, its host's
// TableEnv, and the checks every operation makes of them.
type tableBase struct {
	spec  StateSpec
	env   TableEnv
	start int // the first owned key group: a table's groups[kg-start] is kg's
	n     int // the number of owned key groups
	// The encodings of a change for env.Changes (see noted).
	ckey, cuk, cval []byte
}

// The changes of noted.
const (
	changePut    = iota // the value of (key, uk) is v
	changeDelete        // user key uk of key's map has no entry
	changeClear         // key has no value, or no map
)

// noted tells env.Changes, which must be set, of a change to key group kg:
// change, of key (and user key uk, if ukc is set) and value v, given as Go
// values and encoded here with kc, ukc and vc. Callers check env.Changes
// first, so that a table no one records pays no call.
func noted[K, UK, V any](b *tableBase, change, kg int, kc KeyCodec[K], key K, ukc KeyCodec[UK], uk UK, vc ValueCodec[V], v V) {
	b.ckey = kc.AppendKey(b.ckey[:0], key)
	var ukb []byte
	if ukc != nil {
		b.cuk = ukc.AppendKey(b.cuk[:0], uk)
		ukb = b.cuk
	}
	switch change {
	case changePut:
		b.cval = vc.AppendValue(b.cval[:0], v)
		b.env.Changes.Put(kg, b.ckey, nil, ukb, b.cval)
	case changeDelete:
		b.env.Changes.Delete(kg, b.ckey, nil, ukb)
	default:
		b.env.Changes.Clear(kg, b.ckey, nil)
	}
}

func newTableBase(spec StateSpec, env TableEnv) tableBase {
	return tableBase{spec: spec, env: env, start: env.Config.KeyGroups.Start, n: env.Config.KeyGroups.Len()}
}

// Spec implements State.
func (b *tableBase) Spec() StateSpec { return b.spec }

// keyIndex checks a byte-level operation on k, a write if write — the
// Key's own checks (the host's CheckKey), then index's — and returns the
// index of k's key group.
func (b *tableBase) keyIndex(k *Key, write bool) (int, error) {
	if !*b.env.Closed {
		if err := b.env.CheckKey(&b.env.Config, &b.spec, k, true); err != nil {
			return 0, err
		}
	}
	return b.index(k.Group(), write)
}

// index returns the index of key group kg, checked: the store is open, kg
// is owned, and a write is not made from inside an iteration. A write
// then owns the key group (leases.held) before it changes it.
func (b *tableBase) index(kg int, write bool) (int, error) {
	i := kg - b.start
	if *b.env.Closed || uint(i) >= uint(b.n) || write && *b.env.Iterating > 0 {
		return 0, b.groupError(kg)
	}
	return i, nil
}

// groupError is index's failure.
func (b *tableBase) groupError(kg int) error {
	if *b.env.Closed {
		return fmt.Errorf("%w: state %q", ErrClosed, b.spec.Name)
	}
	if err := b.env.CheckGroup(&b.env.Config, b.spec.Name, kg); err != nil {
		return err
	}
	return fmt.Errorf("%w: state %q", ErrWriteDuringIteration, b.spec.Name)
}

// groupIn returns the key group kg of a table's groups, checked (index).
func groupIn[G any](b *tableBase, groups []G, kg int, write bool) (*G, error) {
	i, err := b.index(kg, write)
	if err != nil {
		return nil, err
	}
	return &groups[i], nil
}

// keyedIn checks a byte-level operation on k, a write if write
// (keyIndex), and returns k's key group of a table's groups and its key
// decoded by keys, which must be the encoding of a K: a table holds no
// other keys.
func keyedIn[G, K any](b *tableBase, groups []G, keys *canon[K], k *Key, write bool) (*G, K, error) {
	var key K
	i, err := b.keyIndex(k, write)
	if err != nil {
		return nil, key, err
	}
	if key, err = keys.decode(k.Bytes()); err != nil {
		return nil, key, fmt.Errorf("%w: state %q: key %x: %w", ErrInvalidKey, b.spec.Name, k.Bytes(), err)
	}
	return &groups[i], key, nil
}

// decodeWritten decodes a value passed to a byte-level write.
func decodeWritten[V any](b *tableBase, vc ValueCodec[V], data []byte) (V, error) {
	v, err := decodeAll(vc, data)
	if err != nil {
		return v, fmt.Errorf("state %q: the value does not decode as %T: %w", b.spec.Name, v, err)
	}
	return v, nil
}

// callTyped calls a typed Update's fn, during which the store refuses
// writes.
func callTyped[V any](b *tableBase, fn func(old V, found bool) V, old V, found bool) V {
	b.begin()
	defer b.done()
	return fn(old, found)
}

// checkKeys checks the arguments of State.Keys.
func (b *tableBase) checkKeys(kg int, fn func(key []byte) bool) error {
	return b.env.CheckKeys(&b.env.Config, b.spec.Name, *b.env.Closed, kg, fn)
}

// keyedNamespace ends State.Namespaces of a keyed table: fn sees the
// empty namespace if the key has an entry (has).
func (b *tableBase) keyedNamespace(has bool, fn func(ns []byte) bool) {
	if has {
		b.begin()
		defer b.done()
		fn([]byte{})
	}
}

// keysIn is State.Keys of a table whose key group at index i holds the
// keys of m(i), in its order.
func keysIn[K comparable, V any](b *tableBase, kc KeyCodec[K], kg int, fn func(key []byte) bool, m func(i int) *otab[K, V]) error {
	if err := b.checkKeys(kg, fn); err != nil {
		return err
	}
	b.begin()
	defer b.done()
	var buf []byte
	for key := range m(kg - b.start).all {
		buf = kc.AppendKey(buf[:0], key)
		if !fn(buf[:len(buf):len(buf)]) {
			break
		}
	}
	return nil
}

// loadTabs is Table.Load over a T per key group of groups, filled by add
// with each entry that scan yields for it: the install it returns gives
// set each T that holds entries.
func loadTabs[K comparable, V any](groups KeyGroupRange, scan func(kg int, fn func(Entry) error) error,
	add func(kg int, m *otab[K, V], e Entry) error, set func(kg int, m otab[K, V])) (func(), error) {
	loaded := make([]otab[K, V], groups.Len())
	for kg := range groups.All() {
		m := &loaded[kg-groups.Start]
		if err := scan(kg, func(e Entry) error { return add(kg, m, e) }); err != nil {
			return nil, err
		}
	}
	return func() {
		for kg := range groups.All() {
			if m := loaded[kg-groups.Start]; m.n != 0 {
				set(kg, m)
			}
		}
	}, nil
}

// freezeTabs is the loop of Table.Freeze: the hash table of each of n key
// groups that holds entries, which l holds from then on (leases.add).
func freezeTabs[K comparable, V any](n int, l TableLease, group func(i int) (*otab[K, V], *leases)) []otab[K, V] {
	tabs := make([]otab[K, V], n)
	for i := range tabs {
		m, holders := group(i)
		if m.n == 0 {
			continue
		}
		tabs[i] = *m
		holders.add(l)
	}
	return tabs
}

// begin marks the start of an iteration, or of a callback, that must not
// write to the store; done its end (defer b.done()).
func (b *tableBase) begin() { *b.env.Iterating++ }

func (b *tableBase) done() { *b.env.Iterating-- }

// callUpdate calls a byte-level Update's fn, during which the store
// refuses writes.
func (b *tableBase) callUpdate(fn func(old []byte, found bool) ([]byte, error), old []byte, found bool) ([]byte, error) {
	b.begin()
	defer b.done()
	return fn(old, found)
}

// leases are the snapshots that may be reading a key group's slots.
type leases []TableLease

// held reports whether a live snapshot may be reading the key group, whose
// table must then copy what it writes; either way the key group is the
// table's from then on, until the next Freeze.
func (ls *leases) held() bool {
	if len(*ls) == 0 {
		return false
	}
	held := false
	for _, l := range *ls {
		if !l.Freed() {
			held = true
			break
		}
	}
	clear(*ls)
	*ls = (*ls)[:0]
	return held
}

// add records that l holds the key group, forgetting the snapshots freed
// since (a key group no one writes would otherwise keep every snapshot's
// lease).
func (ls *leases) add(l TableLease) {
	*ls = slices.DeleteFunc(*ls, TableLease.Freed)
	*ls = append(*ls, l)
}

// canon decodes the keys (or user keys) of byte-level calls and entries,
// which must be the encoding of a K: a table holds the K, and writes its
// encoding back.
type canon[K any] struct {
	kc  KeyCodec[K]
	buf []byte
}

// decode decodes b as a K, which must encode to b again.
func (c *canon[K]) decode(b []byte) (K, error) {
	key, err := decodeKeyAll(c.kc, b)
	if err != nil {
		return key, err
	}
	if c.buf = c.kc.AppendKey(c.buf[:0], key); string(c.buf) != string(b) {
		return key, fmt.Errorf("%w: the key is not the encoding of the %T it decodes to", ErrCorrupt, key)
	}
	return key, nil
}

// scanCheckEvery is how many entries a Scan visits between two checks
// that its snapshot is still live.
const scanCheckEvery = 256
