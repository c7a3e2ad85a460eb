package runtime

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Kind is the kind of a state: how its entries are addressed and read.
type Kind uint8

// The four kinds of state. The zero Kind is invalid, so that a forgotten
// field is caught at registration.
const (
	KindValue     Kind = iota + 1 // one value per (key, namespace)
	KindList                      // an ordered list of values per (key, namespace)
	KindMap                       // a map of user key to value per (key, namespace)
	KindSortedMap                 // a Map whose entries are ordered by encoded user key
)

var kindNames = [...]string{
	KindValue:     "value",
	KindList:      "list",
	KindMap:       "map",
	KindSortedMap: "sortedmap",
}

// String returns the kind's name as it appears in checkpoint metadata:
// "value", "list", "map" or "sortedmap".
func (k Kind) String() string {
	if k.Valid() {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Valid reports whether k is one of the four kinds.
func (k Kind) Valid() bool { return k >= KindValue && k <= KindSortedMap }

// HasUserKey reports whether entries of kind k carry a user key (Map and
// SortedMap).
func (k Kind) HasUserKey() bool { return k == KindMap || k == KindSortedMap }

// ParseKind is the inverse of Kind.String.
func ParseKind(s string) (Kind, error) {
	for k := KindValue; k <= KindSortedMap; k++ {
		if kindNames[k] == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown kind %q", ErrInvalidState, s)
}

// MaxStateNameLen bounds the length of a state name in bytes.
const MaxStateNameLen = 200

// StateSpec is the byte-level identity of a state: everything a backend and a
// checkpoint need to know about it, and nothing about Go types. Two specs
// describe the same state exactly when they agree on everything but Schema,
// Migrations and the length of a TTL (see CheckSame). A StateSpec holds
// functions (Migrations), so == does not compare it: Equal does.
type StateSpec struct {
	// Name is the state's stable name, unique within a store. It is stored in
	// checkpoints, so renaming a field must not rename the state. Names are
	// non-empty UTF-8 of at most MaxStateNameLen bytes, and contain no '/',
	// '\\', NUL or other control character, and are not "." or "..": they
	// may become file or object names.
	Name string
	// Kind is the state's kind.
	Kind Kind
	// SubKeyed reports whether entries are addressed by (key, namespace)
	// rather than by key alone. Keyed states always use the empty namespace.
	SubKeyed bool
	// Fingerprint identifies the schema of the state's keys and values. A
	// restore refuses a state whose fingerprint differs from the registered
	// one. Generated code derives it from a canonical schema string;
	// hand-written descriptors choose their own (empty is allowed and is
	// compared like any other string).
	Fingerprint string
	// Schema is the canonical schema string the fingerprint was derived
	// from (package runtime/schema), or empty if the descriptor has none.
	// Checkpoints record it as the writer's schema, so that a restore can
	// migrate the state's bytes when the code's schema changed. It
	// describes the state but is not part of its identity: specs with
	// equal fingerprints are the same state.
	Schema string
	// TTL is the time to live of the state's entries (see TTL), in whole
	// milliseconds; zero means they never expire. A state with a TTL
	// stores a stamp in front of every value (TTLStampLen), so whether it
	// has one is part of its identity; its length is not: a TTL changed
	// between a checkpoint and its restore applies to the restored
	// entries (see CheckSame).
	TTL time.Duration
	// Migrations are the user's functions that convert the values of the
	// state from older schemas the rules of package runtime/schema cannot
	// resolve into Schema (see Migration). A restore into the store uses
	// the migrations of the spec the store registered, so they are the
	// state's own: a same-named state of another store never sees them.
	// Like Schema they describe the state, not its identity: a state
	// registered again keeps the schema and migrations of its first
	// registration, so bind the handles that declare them first.
	Migrations []Migration
}

// MaxSchemaLen bounds the length of StateSpec.Schema.
const MaxSchemaLen = 1 << 20

// Validate reports whether s can be registered. The error wraps
// ErrInvalidState and names the state.
func (s StateSpec) Validate() error {
	if err := ValidateStateName(s.Name); err != nil {
		return err
	}
	if !s.Kind.Valid() {
		return fmt.Errorf("%w: state %q: invalid kind %v", ErrInvalidState, s.Name, s.Kind)
	}
	if !utf8.ValidString(s.Fingerprint) || len(s.Fingerprint) > 1024 {
		return fmt.Errorf("%w: state %q: fingerprint is not UTF-8 of at most 1024 bytes", ErrInvalidState, s.Name)
	}
	if !utf8.ValidString(s.Schema) || len(s.Schema) > MaxSchemaLen {
		return fmt.Errorf("%w: state %q: schema is not UTF-8 of at most %d bytes", ErrInvalidState, s.Name, MaxSchemaLen)
	}
	if s.TTL != 0 {
		if err := (TTL{Duration: s.TTL}).Validate(s.Name); err != nil {
			return err
		}
	}
	return nil
}

// String formats s for messages: name (kind[, sub-keyed][, TTL d],
// fingerprint).
func (s StateSpec) String() string {
	sub := ""
	if s.SubKeyed {
		sub = ", sub-keyed"
	}
	if s.TTL != 0 {
		sub += ", TTL " + s.TTL.String()
	}
	return fmt.Sprintf("%q (%v%s, fingerprint %q)", s.Name, s.Kind, sub, s.Fingerprint)
}

// Equal reports whether s and o are equal in every field; their
// migrations are compared by From, as functions cannot be compared.
func (s StateSpec) Equal(o StateSpec) bool {
	return s.Name == o.Name && s.Kind == o.Kind && s.SubKeyed == o.SubKeyed &&
		s.Fingerprint == o.Fingerprint && s.Schema == o.Schema && s.TTL == o.TTL &&
		slices.EqualFunc(s.Migrations, o.Migrations, func(a, b Migration) bool { return a.From == b.From })
}

// CheckSame returns nil if registered and requested describe the same state
// — the same name, kind, sub-keying and fingerprint, and both with a TTL or
// both without; their schemas and the lengths of their TTLs are not
// compared — and otherwise an error wrapping ErrStateMismatch that names the
// state and both descriptors. A restore calls it to match a checkpoint's
// states with the registered ones (the registered TTL applies); Register
// of a name already registered asks for the same TTL too (storekit).
func CheckSame(registered, requested StateSpec) error {
	regTTL, reqTTL := registered.TTL != 0, requested.TTL != 0
	if registered.Name == requested.Name && registered.Kind == requested.Kind &&
		registered.SubKeyed == requested.SubKeyed && registered.Fingerprint == requested.Fingerprint &&
		regTTL == reqTTL {
		return nil
	}
	switch {
	case registered.Kind != requested.Kind || registered.SubKeyed != requested.SubKeyed:
		return fmt.Errorf("%w: state %q is %s, requested as %s",
			ErrStateMismatch, registered.Name, registered, requested)
	case regTTL != reqTTL:
		return fmt.Errorf("%w: state %q: registered %s, requested %s (the values of a state with a TTL carry a stamp)",
			ErrStateMismatch, registered.Name, withOrWithout(regTTL), withOrWithout(reqTTL))
	default:
		return fmt.Errorf("%w: state %q: fingerprint mismatch: registered %q, requested %q",
			ErrStateMismatch, registered.Name, registered.Fingerprint, requested.Fingerprint)
	}
}

func withOrWithout(ttl bool) string {
	if ttl {
		return "with a TTL"
	}
	return "without a TTL"
}

// ValidateStateName reports whether name is a valid state name (see
// StateSpec.Name). The error wraps ErrInvalidState.
func ValidateStateName(name string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: state name %q %s", ErrInvalidState, name, why)
	}
	switch {
	case name == "":
		return bad("is empty")
	case len(name) > MaxStateNameLen:
		return bad(fmt.Sprintf("is longer than %d bytes", MaxStateNameLen))
	case !utf8.ValidString(name):
		return bad("is not valid UTF-8")
	case name == "." || name == "..":
		return bad("is a relative path element")
	case strings.ContainsAny(name, `/\`):
		return bad("contains a path separator")
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return bad("contains a control character")
		}
	}
	return nil
}

// StoreConfig is what every backend needs to know about the job: how many key
// groups there are and which of them this store owns. Backends embed it in
// their options.
type StoreConfig struct {
	// MaxParallelism is the number of key groups; zero means
	// DefaultMaxParallelism.
	MaxParallelism int
	// KeyGroups is the range of key groups this store owns; the zero value
	// means all of them.
	KeyGroups KeyGroupRange
	// Clock is the processing time of the states with a TTL (see TTL):
	// their handles stamp and expire entries by it, and the store's
	// snapshots leave out the entries expired at the time of their
	// synchronous phase. Nil means the system clock; tests inject a fake.
	Clock Clock
}

// Normalize applies the defaults and validates c: the result has a valid
// maxParallelism and a non-empty key-group range inside it.
func (c StoreConfig) Normalize() (StoreConfig, error) {
	if c.MaxParallelism == 0 {
		c.MaxParallelism = DefaultMaxParallelism
	}
	if err := ValidateMaxParallelism(c.MaxParallelism); err != nil {
		return c, err
	}
	if c.KeyGroups == (KeyGroupRange{}) {
		c.KeyGroups = FullRange(c.MaxParallelism)
	}
	if err := c.KeyGroups.Validate(c.MaxParallelism); err != nil {
		return c, err
	}
	return c, nil
}

// Key addresses one (key, namespace) of a state. The typed handles build it
// once per operation: the key is encoded and hashed once, and backends reuse
// the hash for their own lookups.
//
// A Key is opaque: only MakeKey (and the handles) build one, from the key's
// bytes, so its key group and hash always match them — a backend trusts
// them, and cannot be handed a Key that lies. The zero Key addresses
// nothing: every store refuses it with ErrInvalidKey.
//
// Backends never retain the slices of a Key (or any other argument) after a
// call returns: callers may reuse their buffers.
//
// The accessors have pointer receivers: a Key is eight words, too large
// for the compiler to keep in registers, and an inlined call of a method
// with a value receiver would copy all of it to read one word.
type Key struct {
	hash uint64
	// gp holds the key group, KeyGroupOfHash(hash, maxP), in its low 32
	// bits and maxP, the maxParallelism the Key was built for (0 in the
	// zero Key), in its high 32: one word, so that a Key and a receiver
	// fit in the integer argument registers of a call.
	gp  uint64
	key []byte
	ns  []byte
}

// MakeKey returns the Key of an encoded key and namespace in a job with
// maxParallelism key groups (which must be valid). The Key holds key and
// namespace, not copies: they must not change while it is in use.
func MakeKey(key, namespace []byte, maxParallelism int) (k Key) {
	k.set(HashKey(key), key, namespace, maxParallelism)
	return k
}

// makeKey is MakeKey with the key's hash computed already.
func makeKey(hash uint64, key, namespace []byte, maxParallelism int) (k Key) {
	k.set(hash, key, namespace, maxParallelism)
	return k
}

// set makes *k the Key of makeKey's arguments, a field at a time. A Key is
// eight words, more than the compiler keeps in registers: a composite
// literal is built in a temporary with word-sized stores and copied to its
// destination with 16-byte moves, which cannot be forwarded from those
// stores and wait for them to reach the cache (a stall of about a dozen
// cycles each, on every operation of a handle). Stored a field at a time,
// into the variable a function returns, it is read back with word-sized
// loads only.
func (k *Key) set(hash uint64, key, namespace []byte, maxParallelism int) {
	k.hash = hash
	k.gp = uint64(KeyGroupOfHash(hash, maxParallelism)) | uint64(maxParallelism)<<32
	k.key = key
	k.ns = namespace
}

// Group returns the key group of the key: KeyGroupOfHash(Hash(),
// MaxParallelism()).
func (k *Key) Group() int { return int(uint32(k.gp)) }

// Hash returns HashKey(Bytes()).
func (k *Key) Hash() uint64 { return k.hash }

// MaxParallelism returns the number of key groups the Key was built for
// (zero for the zero Key). A store refuses a Key built for another
// maxParallelism than its own with ErrInvalidKey: its key group would be
// wrong.
func (k *Key) MaxParallelism() int { return int(k.gp >> 32) }

// Bytes returns the key's order-preserving encoding.
func (k *Key) Bytes() []byte { return k.key }

// Namespace returns the namespace's order-preserving encoding; empty for
// keyed states. The namespace does not take part in Group or Hash: all
// namespaces of a key live in the key's key group.
func (k *Key) Namespace() []byte { return k.ns }

// WithNamespace returns the Key of the same key in namespace ns (which,
// like the namespace of MakeKey, is not copied).
func (k Key) WithNamespace(ns []byte) Key {
	k.ns = ns
	return k
}

// Store is the byte-level contract every backend implements (DESIGN.md §3).
// It holds the states of one operator instance for the key groups it owns.
// Keys, namespaces and user keys are order-preserving encodings (KeyCodec);
// values are opaque bytes (ValueCodec). The typed handles of this package
// sit on top of it.
//
// A Store is used by one goroutine, the operator's; only snapshots are used
// from other goroutines (see Snapshot). Methods of a closed store return
// ErrClosed, except Config and States, which keep answering.
//
// Keys are built by the caller (the typed handles, or MakeKey): an
// operation on a Key whose Group the store does not own returns
// ErrKeyGroupNotOwned; a Key built for another maxParallelism (or the zero
// Key), and a non-empty namespace on a keyed state, return ErrInvalidKey
// (storekit.CheckKey makes these checks for every backend). A Key's group
// and hash match its bytes by construction.
// Errors name the state and, where one is involved, the key group.
type Store interface {
	// Config returns the store's maxParallelism and key-group range.
	Config() StoreConfig

	// Register returns the state named spec.Name, creating it empty if it
	// does not exist. Registering an existing name again with an identical
	// spec returns the same state; with a different spec it fails with
	// ErrStateMismatch. The returned State implements the interface of its
	// kind: ValueState, ListState, MapState or SortedMapState.
	Register(spec StateSpec) (State, error)

	// States returns the specs of every registered state (including states
	// created by Restore), sorted by name.
	States() []StateSpec

	// Snapshot runs the synchronous phase of a snapshot: it captures an
	// immutable view of every state in every owned key group, in time
	// O(states × key groups) or better, never O(entries). The view may be
	// read from another goroutine while the store keeps changing, and
	// reflects exactly the writes made before Snapshot returned (and only
	// the states registered by then). The caller must Release it whatever
	// happens. Several snapshots may be live, each read by goroutines of
	// its own at the same time (several per snapshot, for different key
	// groups: see View), and Release may be called from any goroutine.
	Snapshot() (Snapshot, error)

	// Restore loads the entries of every key group that both src and the
	// store own, and registers every state of src that is not registered
	// yet (even when no key group is shared). It fails with
	// ErrMaxParallelismMismatch if src has another maxParallelism, with
	// ErrStateMismatch if a state of src is registered with another spec,
	// and with ErrRestoreConflict if the store already holds an entry of one
	// of src's states in one of the key groups being loaded (whether or not
	// src has entries there). Restoring the snapshots of several old
	// instances one after the other is how a store is rescaled: their key
	// groups are disjoint. After an error the store's content is
	// unspecified and it should be discarded.
	Restore(src View) error

	// Close releases the store's resources, its operator lists among them
	// (runtime.ReleaseOperatorStates). Live snapshots stay readable until
	// released. Close is idempotent.
	Close() error
}

// State is a registered state. Every state also implements the interface of
// its kind.
//
// Clear, Namespaces and DeleteAll address a whole (key, namespace) or key
// and work the same way for every kind.
type State interface {
	// Spec returns the state's spec.
	Spec() StateSpec
	// Clear removes the entry of (k.Key, k.Namespace): a value, a whole list
	// or a whole map. Clearing an absent entry is not an error.
	Clear(k Key) error
	// Namespaces calls fn with the encoded namespace of every non-empty
	// (k.Key, namespace) of the state, in unspecified order, until fn
	// returns false; k.Namespace is ignored. A keyed state reports the empty
	// namespace if the key has an entry. fn must not modify the store; ns is
	// valid only during the call.
	Namespaces(k Key, fn func(ns []byte) bool) error
	// DeleteAll removes every namespace of k.Key; k.Namespace is ignored.
	DeleteAll(k Key) error
	// Keys calls fn with the encoded key of every key that has an entry
	// of the state (in any namespace) in key group kg, each key once,
	// until fn returns false: Flink's getKeys, on the live store, without
	// a snapshot. Sorted backends report keys in encoded order, others in
	// an unspecified one. A key group outside the maxParallelism returns
	// ErrInvalidKeyGroup, one the store does not own ErrKeyGroupNotOwned.
	// fn must not modify the store (ErrWriteDuringIteration); key is valid
	// only during the call.
	Keys(kg int, fn func(key []byte) bool) error
}

// ValueState holds one value per (key, namespace).
type ValueState interface {
	State
	// Get returns the value of k and whether it exists. The returned slice is
	// read-only and valid until the next call on the store; callers that
	// keep it copy it. A stored value may be empty (zero length) and is
	// still found.
	Get(k Key) (value []byte, found bool, err error)
	// Put sets the value of k, replacing any previous value. The store copies
	// value.
	Put(k Key, value []byte) error
}

// ListState holds an ordered list of values per (key, namespace). An empty
// list does not exist: it has no namespace entry and Get yields nothing.
type ListState interface {
	State
	// Get calls fn with each element of k's list in order until fn returns
	// false. Elements are valid only during the call; fn must not modify the
	// store.
	Get(k Key, fn func(elem []byte) bool) error
	// Add appends elem to k's list, creating it if needed.
	Add(k Key, elem []byte) error
	// AddAll appends elems in order; with no elements it does nothing.
	AddAll(k Key, elems [][]byte) error
	// Replace replaces k's list with elems; with no elements it removes the
	// list.
	Replace(k Key, elems [][]byte) error
}

// MapState holds a map of encoded user key to value per (key, namespace). A
// map with no entries does not exist.
type MapState interface {
	State
	// Get returns the value of userKey in k's map; the rules of
	// ValueState.Get apply.
	Get(k Key, userKey []byte) (value []byte, found bool, err error)
	// Put sets userKey to value in k's map, replacing any previous value.
	Put(k Key, userKey, value []byte) error
	// Delete removes userKey from k's map; removing an absent entry is not an
	// error.
	Delete(k Key, userKey []byte) error
	// Iterate calls fn with every entry of k's map until fn returns false.
	// The order is unspecified for KindMap and ascending by encoded user key
	// for KindSortedMap. Slices are valid only during the call; fn must not
	// modify the store.
	Iterate(k Key, fn func(userKey, value []byte) bool) error
	// Edit walks k's map as Iterate does, and fn says what becomes of each
	// entry it visits: kept (the zero MapEdit), deleted, or given a new
	// value — Flink's iterator.remove and entry.setValue. It is the one
	// way to change a map while visiting it: any other write from fn fails
	// with ErrWriteDuringIteration. fn sees the map as it was when Edit
	// began (reads from fn included); the edits take effect in the order fn
	// made them when the walk ends, before Edit returns. fn ends the walk
	// early by returning StopEdit (its edit of that entry applies); any
	// other error ends it too, and Edit returns the error and applies no
	// edit, as when the walk itself fails.
	Edit(k Key, fn func(userKey, value []byte) (MapEdit, error)) error
}

// StopEdit is returned by the callback of an Edit (MapState.Edit,
// SortedMapState.EditRange and the map handles' Edit methods) to end the
// walk early, as fs.SkipAll ends a WalkDir: the edits made so far apply,
// that of the entry being visited included, and Edit returns nil.
var StopEdit = errors.New("stategen: stop the edit")

// RestoreCounter is implemented by stores that count their Restores:
// backends/cow, btree and pebble, the reference model, and wrappers of
// them such as checkpoint.Tracker. Timers use it to know that nothing was
// restored into a key group they read empty; with a store that does not
// count (or answers false), they read every key group they last saw empty
// again at each Advance.
type RestoreCounter interface {
	// Restores returns the number of calls of Restore that may have
	// loaded entries (successful or not), and false if the store does
	// not count them.
	Restores() (n uint64, ok bool)
}

// WriteChecker is implemented by the States of backends that can tell,
// without writing, whether a write would be refused now and with which
// error (backends/cow, btree and pebble, the reference model, and
// checkpoint.Tracker over any of them). Timers use it to answer the
// Register of a timer they know exists without writing it again, as
// Flink's timer queues answer it from their cache: a window operator
// registers its window's timer with every element.
type WriteChecker interface {
	// CheckWrite returns the error with which a write of an entry of
	// (k.Key, k.Namespace) — a Put, or any write of the state's kind —
	// would be refused before it changed anything: ErrClosed after Close,
	// ErrKeyGroupNotOwned (or another key error), ErrWriteDuringIteration
	// inside an iteration's callback, or the error a failed store returns
	// for every write. It returns nil if the write would be attempted; the
	// write itself may still fail (a full disk). Errors that depend on
	// what is written (a user key or value too long) are not checked.
	// A wrapper of a state that is not a WriteChecker returns an error
	// wrapping errors.ErrUnsupported, and the caller writes instead.
	CheckWrite(k Key) error
}

// ValueUpdater is implemented by the ValueStates of backends that read and
// write a value in one lookup (backends/cow, btree and pebble, and the
// reference model). The handles' Value.Update uses it when the state has
// it, and a Get then a Put otherwise: the result is the same, the cost one
// lookup less.
type ValueUpdater interface {
	// Update sets k's value to what fn returns given the current one (nil
	// and found false if there is none), looking k up once; the rules of
	// ValueState.Put apply to the new value, which the store copies. old
	// is read-only and valid during the call; fn must not write to the
	// store (ErrWriteDuringIteration). If fn returns an error, nothing is
	// written and Update returns it.
	Update(k Key, fn func(old []byte, found bool) ([]byte, error)) error
}

// MapUpdater is implemented by the MapStates of backends that read and
// write a map entry in one lookup (backends/cow, btree and pebble, and the
// reference model): ValueUpdater for one entry of a map. The handles'
// Map.Update uses it when the state has it, and a Get then a Put
// otherwise.
type MapUpdater interface {
	// Update sets userKey in k's map to what fn returns given its current
	// value (nil and found false if there is none), looking the entry up
	// once; the rules of MapState.Put apply to the new value, which the
	// store copies. old is read-only and valid during the call; fn must not
	// write to the store (ErrWriteDuringIteration). If fn returns an error,
	// nothing is written and Update returns it.
	Update(k Key, userKey []byte, fn func(old []byte, found bool) ([]byte, error)) error
}

// MapEdit is what the callback of MapState.Edit does with the entry it
// visits.
type MapEdit struct {
	// Action is EditKeep (the zero value), EditDelete or EditReplace.
	Action EditAction
	// Value is the entry's new value, for EditReplace. The store copies
	// it: the caller may reuse its buffer.
	Value []byte
}

// EditAction is the action of a MapEdit.
type EditAction uint8

// The actions of a MapEdit.
const (
	EditKeep    EditAction = iota // leave the entry as it is
	EditDelete                    // remove the entry
	EditReplace                   // set the entry's value to MapEdit.Value
)

// SortedMapState is a MapState whose entries are ordered by encoded user
// key.
type SortedMapState interface {
	MapState
	// Range calls fn with the entries of k's map whose user key u satisfies
	// lo <= u < hi, in ascending order, or in descending order if reverse,
	// until fn returns false. A nil hi means no upper bound (an empty,
	// non-nil hi is an empty range); a nil or empty lo means no lower bound;
	// lo >= hi is an empty range. The rules of Iterate apply.
	Range(k Key, lo, hi []byte, reverse bool, fn func(userKey, value []byte) bool) error
	// EditRange is Edit over the entries Range visits.
	EditRange(k Key, lo, hi []byte, reverse bool, fn func(userKey, value []byte) (MapEdit, error)) error
}

// Entry is one entry of a state in a snapshot or checkpoint, as bytes:
// Key and Namespace always (Namespace empty for keyed states), UserKey for
// Map and SortedMap, and Value. A list yields one Entry per element; the
// elements of one (key, namespace) come consecutively and in list order.
type Entry struct {
	Key       []byte
	Namespace []byte
	UserKey   []byte
	Value     []byte
}

// View is a read-only view of the states of a range of key groups: a
// snapshot of a live store, or a checkpoint being restored. It is what the
// checkpoint writer reads and what Store.Restore loads.
//
// A View may be used from several goroutines at once, as long as the Scans
// that run at the same time are of different key groups: the checkpoint
// writer scans key groups in parallel, and a Store.Restore may load them in
// parallel. Scans of the same key group must not overlap (a View may keep
// per-key-group state for a Scan), but may follow each other on different
// goroutines. Every implementation passes the conformance step that scans
// disjoint key groups from several goroutines under -race
// (runtime/storetest, SnapshotsWhileWriting/ConcurrentScans).
type View interface {
	// MaxParallelism returns the number of key groups of the job the view
	// belongs to.
	MaxParallelism() int
	// KeyGroups returns the key groups the view holds.
	KeyGroups() KeyGroupRange
	// States returns the specs of the view's states, sorted by name.
	States() []StateSpec
	// Scan calls fn with every entry of the named state in key group kg,
	// until fn returns an error, which Scan then returns (possibly wrapped:
	// test it with errors.Is). The order of
	// entries is unspecified except that list elements are consecutive and
	// in order (see Entry). The slices of an Entry are valid only during the
	// call. Scanning a key group outside KeyGroups or an unknown state is an
	// error.
	//
	// Scan may be called from several goroutines at once for different key
	// groups (see View). A caller stops a Scan early — on cancellation,
	// say — by returning an error from fn, such as its context's error:
	// Scan takes no context, as fn sees every entry and so a cancellation
	// within one entry.
	Scan(state string, kg int, fn func(Entry) error) error
}

// Snapshot is an immutable View of a store captured by Store.Snapshot.
type Snapshot interface {
	View
	// Release frees the snapshot. It must be called exactly once, whatever
	// happens to the checkpoint the snapshot was taken for; until then a
	// copy-on-write backend keeps copying. A second Release returns
	// ErrReleased, as does any use after Release.
	Release() error
}
