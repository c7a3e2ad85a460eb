// Package storekit holds what every Store implementation does alike,
// written once: the checks a Restore runs before it loads anything
// (CheckRestore), the checks of every restored entry (CheckEntry), of
// Register (CheckRegister) and of every Key (CheckKey); the walk that lets
// an iteration delete or replace the entry it visits (Edit); the tracking
// of snapshots — numbering, the live count, Release during a Scan, leaks
// (Snapshots and Lease); the sorted key layout that btree and pebble share
// (AppendEntry, SplitEntry and the framing beneath them); and the codes
// that pin each runtime.Kind in stored bytes (KindCode). The backends
// (cow, btree, pebble) and the reference model (runtime/storetest) import
// it, so their answers to bad input cannot drift apart, and the
// conformance suite pins those answers for every Store, third-party ones
// included.
//
// A backend keeps what is its own: where its states live, how it loads
// them, its own limits (a maximum key size, a writable working directory).
// Everything the runtime.Store contract says about Restore's preconditions
// — a nil View, another maxParallelism, invalid or repeated states, a state
// registered with another spec, a key group that already holds entries —
// is decided here, in this order, with these errors:
//
//   - a nil View: runtime.ErrInvalidView;
//   - another maxParallelism: runtime.ErrMaxParallelismMismatch;
//   - key groups outside the maxParallelism: runtime.ErrInvalidKeyGroup;
//   - an invalid state descriptor: runtime.ErrInvalidState;
//   - a state listed twice: runtime.ErrCorrupt;
//   - states not sorted by name: runtime.ErrInvalidView;
//   - a state registered with another spec: runtime.ErrStateMismatch;
//   - entries of a restored state already in a key group the view
//     restores: runtime.ErrRestoreConflict.
package storekit

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/stategen/stategen/runtime"
)

// Target is the store a Restore loads into, as CheckRestore sees it.
type Target struct {
	// Name prefixes error messages, e.g. "cow".
	Name string
	// Config is the store's configuration.
	Config runtime.StoreConfig
	// Registered returns the spec of the state registered under name.
	Registered func(name string) (runtime.StateSpec, bool)
	// Occupied reports whether the registered state name holds entries in
	// key group kg, which the store owns.
	Occupied func(name string, kg int) (bool, error)
}

// Specs returns a Target.Registered for a store that keeps its states in
// states, by name, each with the spec spec returns.
func Specs[S any](states map[string]S, spec func(S) runtime.StateSpec) func(name string) (runtime.StateSpec, bool) {
	return func(name string) (runtime.StateSpec, bool) {
		st, ok := states[name]
		if !ok {
			return runtime.StateSpec{}, false
		}
		return spec(st), true
	}
}

// InsertSpec inserts spec into specs, which are sorted by name, keeping
// them sorted: the order Store.States and View.States return.
func InsertSpec(specs []runtime.StateSpec, spec runtime.StateSpec) []runtime.StateSpec {
	i, _ := slices.BinarySearchFunc(specs, spec.Name, func(a runtime.StateSpec, name string) int {
		return strings.Compare(a.Name, name)
	})
	return slices.Insert(specs, i, spec)
}

// Restores counts a store's Restores for runtime.RestoreCounter: a store
// embeds it, and calls Note at the start of every Restore that may load
// entries.
type Restores struct{ n uint64 }

// Note counts a Restore.
func (r *Restores) Note() { r.n++ }

// Restores implements runtime.RestoreCounter.
func (r *Restores) Restores() (uint64, bool) { return r.n, true }

// Restore is what CheckRestore found: what to load.
type Restore struct {
	// Groups are the view's key groups that the store owns: the ones to
	// load.
	Groups runtime.KeyGroupRange
	// States are the view's states, in its order, each valid and listed
	// once.
	States []runtime.StateSpec
}

// CheckRestore runs, before anything is loaded, every check the Store
// contract asks of Restore(src) into t (see the package doc), and returns
// what to load. The errors name t, the state and the key group at fault.
func CheckRestore(t Target, src runtime.View) (Restore, error) {
	if src == nil {
		return Restore{}, fmt.Errorf("%w: %s: restore from a nil View", runtime.ErrInvalidView, t.Name)
	}
	if p := src.MaxParallelism(); p != t.Config.MaxParallelism {
		return Restore{}, fmt.Errorf("%w: %s: the store has maxParallelism %d, the restored view %d",
			runtime.ErrMaxParallelismMismatch, t.Name, t.Config.MaxParallelism, p)
	}
	if err := src.KeyGroups().Validate(t.Config.MaxParallelism); err != nil {
		return Restore{}, fmt.Errorf("%s: restore: the view's key groups: %w", t.Name, err)
	}
	r := Restore{Groups: src.KeyGroups().Intersect(t.Config.KeyGroups), States: src.States()}
	for i, spec := range r.States {
		if err := spec.Validate(); err != nil {
			return Restore{}, fmt.Errorf("%s: restore: %w", t.Name, err)
		}
		if i > 0 {
			switch prev := r.States[i-1].Name; {
			case prev == spec.Name:
				return Restore{}, fmt.Errorf("%w: %s: restore: the view lists state %q twice", runtime.ErrCorrupt, t.Name, spec.Name)
			case prev > spec.Name:
				return Restore{}, fmt.Errorf("%w: %s: restore: the view's states are not sorted by name: %q before %q", runtime.ErrInvalidView, t.Name, prev, spec.Name)
			}
		}
		reg, ok := t.Registered(spec.Name)
		if !ok {
			continue
		}
		if err := runtime.CheckSame(reg, spec); err != nil {
			return Restore{}, fmt.Errorf("%s: restore: %w", t.Name, err)
		}
		for kg := range r.Groups.All() {
			occupied, err := t.Occupied(spec.Name, kg)
			if err != nil {
				return Restore{}, fmt.Errorf("%s: restore: %w", t.Name, err)
			}
			if occupied {
				return Restore{}, fmt.Errorf("%w: %s: state %q already has entries in key group %d",
					runtime.ErrRestoreConflict, t.Name, spec.Name, kg)
			}
		}
	}
	return r, nil
}

// CheckEntry checks one entry of state spec that a View's Scan of key group
// kg passed, whose key belongs to key group group (the caller has hashed
// the key already, to place the entry): it must belong to kg, carry a
// namespace only in a sub-keyed state, and a user key only in a Map or
// SortedMap. The error wraps runtime.ErrCorrupt and names the key.
func CheckEntry(spec runtime.StateSpec, kg, group int, e runtime.Entry) error {
	if err := CheckEntryGroup(kg, group, e); err != nil {
		return err
	}
	return CheckEntryShape(spec, e)
}

// CheckEntryGroup is the key-group check of CheckEntry, for a backend that
// checks it once per key (the entries of a list or map share their key).
func CheckEntryGroup(kg, group int, e runtime.Entry) error {
	if group != kg {
		return fmt.Errorf("%w: entry of key %x, which belongs to key group %d, read from key group %d", runtime.ErrCorrupt, e.Key, group, kg)
	}
	return nil
}

// CheckEntryShape is the rest of CheckEntry: a namespace only in a
// sub-keyed state, a user key only in a Map or SortedMap.
func CheckEntryShape(spec runtime.StateSpec, e runtime.Entry) error {
	switch {
	case !spec.SubKeyed && len(e.Namespace) != 0:
		return fmt.Errorf("%w: entry of key %x has namespace %x in a keyed state", runtime.ErrCorrupt, e.Key, e.Namespace)
	case !spec.Kind.HasUserKey() && len(e.UserKey) != 0:
		return fmt.Errorf("%w: entry of key %x has a user key in a %v state", runtime.ErrCorrupt, e.Key, spec.Kind)
	}
	return nil
}

// CheckRegister runs the checks every Store.Register(spec) makes, in this
// order: the store is not closed (runtime.ErrClosed), spec is valid
// (runtime.ErrInvalidState), a state registered under its name has the
// same spec, TTL included (runtime.ErrStateMismatch) — then Register returns that state
// (existing is true) — and a new state is not registered from inside an
// iteration callback (runtime.ErrWriteDuringIteration).
func CheckRegister(t Target, closed, iterating bool, spec runtime.StateSpec) (existing bool, err error) {
	if closed {
		return false, fmt.Errorf("%w: %s: cannot register state %q", runtime.ErrClosed, t.Name, spec.Name)
	}
	if err := spec.Validate(); err != nil {
		return false, err
	}
	if reg, ok := t.Registered(spec.Name); ok {
		if err := runtime.CheckSame(reg, spec); err != nil {
			return false, err
		}
		if reg.TTL != spec.TTL {
			// A restore takes the TTL of the registered state; a state
			// a restore created keeps the checkpoint's.
			return false, fmt.Errorf("%w: state %q has a TTL of %v, registered again with %v (register the states before a restore to change their TTL)",
				runtime.ErrStateMismatch, spec.Name, reg.TTL, spec.TTL)
		}
		return true, nil
	}
	if iterating {
		return false, fmt.Errorf("%w: %s: register state %q", runtime.ErrWriteDuringIteration, t.Name, spec.Name)
	}
	return false, nil
}

// CheckGroup runs the checks every Store makes of the key group of an
// operation that names one (State.Keys): kg lies in cfg's maxParallelism
// (runtime.ErrInvalidKeyGroup) and is owned (runtime.ErrKeyGroupNotOwned).
func CheckGroup(cfg *runtime.StoreConfig, state string, kg int) error {
	if kg < 0 || kg >= cfg.MaxParallelism {
		return fmt.Errorf("%w: state %q: key group %d is outside [0, %d)", runtime.ErrInvalidKeyGroup, state, kg, cfg.MaxParallelism)
	}
	if !cfg.KeyGroups.Contains(kg) {
		return fmt.Errorf("%w: state %q: key group %d is not in the store's key groups %v", runtime.ErrKeyGroupNotOwned, state, kg, cfg.KeyGroups)
	}
	return nil
}

// CheckKeys runs the checks every Store makes before a State.Keys of key
// group kg of state name: the store is open (runtime.ErrClosed), kg is
// valid and owned (CheckGroup), and fn is not nil.
func CheckKeys(cfg *runtime.StoreConfig, name string, closed bool, kg int, fn func(key []byte) bool) error {
	if closed {
		return fmt.Errorf("%w: state %q", runtime.ErrClosed, name)
	}
	if err := CheckGroup(cfg, name, kg); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("state %q: Keys with a nil callback", name)
	}
	return nil
}

// CheckKey runs the checks every Store makes of a Key before an operation
// on state spec, in a store configured by cfg: k was built for cfg's
// maxParallelism (the zero Key was built for none) and otherwise
// runtime.ErrInvalidKey; its key group is one the store owns, and otherwise
// runtime.ErrKeyGroupNotOwned; and, when usesNS, it carries a namespace
// only if the state is sub-keyed (runtime.ErrInvalidKey). The errors name
// the state and the key group.
//
// It takes the Key by pointer: a Key is eight words, and one passed by
// value beside three more arguments does not fit the registers of a call,
// so it is copied to the callee's arguments with wide moves that cannot be
// forwarded from the narrow stores that spilled it — a stall on every
// operation of every backend.
func CheckKey(cfg *runtime.StoreConfig, spec *runtime.StateSpec, k *runtime.Key, usesNS bool) error {
	if k.MaxParallelism() == cfg.MaxParallelism && cfg.KeyGroups.Contains(k.Group()) &&
		(!usesNS || spec.SubKeyed || len(k.Namespace()) == 0) {
		return nil
	}
	return keyError(cfg, spec, k)
}

// keyError is CheckKey's failure.
func keyError(cfg *runtime.StoreConfig, spec *runtime.StateSpec, k *runtime.Key) error {
	switch {
	case k.MaxParallelism() == 0:
		return fmt.Errorf("%w: state %q: the zero Key (build keys with runtime.MakeKey)", runtime.ErrInvalidKey, spec.Name)
	case k.MaxParallelism() != cfg.MaxParallelism:
		return fmt.Errorf("%w: state %q: Key built for maxParallelism %d, the store has %d",
			runtime.ErrInvalidKey, spec.Name, k.MaxParallelism(), cfg.MaxParallelism)
	case !cfg.KeyGroups.Contains(k.Group()):
		return fmt.Errorf("%w: state %q: key group %d is not in the store's key groups %v",
			runtime.ErrKeyGroupNotOwned, spec.Name, k.Group(), cfg.KeyGroups)
	}
	return fmt.Errorf("%w: state %q is keyed, not sub-keyed: namespace %x must be empty",
		runtime.ErrInvalidKey, spec.Name, k.Namespace())
}

// EditMap is MapState.Edit for a backend whose map state is m: a backend's
// Edit is
//
//	func (m mapState) Edit(k runtime.Key, fn ...) error { return storekit.EditMap(m, k, fn) }
func EditMap(m runtime.MapState, k runtime.Key, fn func(uk, v []byte) (runtime.MapEdit, error)) error {
	return Edit(m.Spec().Name, func(f func(uk, v []byte) bool) error { return m.Iterate(k, f) },
		func(uk []byte) error { return m.Delete(k, uk) }, func(uk, v []byte) error { return m.Put(k, uk, v) }, fn)
}

// EditRange is SortedMapState.EditRange for a backend whose sorted map
// state is m, as EditMap is Edit.
func EditRange(m runtime.SortedMapState, k runtime.Key, lo, hi []byte, reverse bool, fn func(uk, v []byte) (runtime.MapEdit, error)) error {
	return Edit(m.Spec().Name, func(f func(uk, v []byte) bool) error { return m.Range(k, lo, hi, reverse, f) },
		func(uk []byte) error { return m.Delete(k, uk) }, func(uk, v []byte) error { return m.Put(k, uk, v) }, fn)
}

// Edit runs a MapState.Edit (or SortedMapState.EditRange) for a backend:
// walk visits the entries (the backend's Iterate or Range, which guards
// the walk against writes as usual), fn says what becomes of each, and
// once the walk has ended without error (fn's StopEdit ends it without
// one) Edit applies the edits in order
// with del and put — the backend's Delete and Put, which check the key
// again. It holds copies of the edited user keys and new values in one
// buffer until then, so fn sees the map as it was, and a failed walk
// changes nothing.
// The errors name state.
func Edit(state string, walk func(fn func(uk, v []byte) bool) error, del func(uk []byte) error, put func(uk, v []byte) error,
	fn func(uk, v []byte) (runtime.MapEdit, error)) error {
	if fn == nil {
		return fmt.Errorf("state %q: Edit with a nil callback", state)
	}
	type edit struct {
		del         bool
		uk, v       int // offsets in buf
		ukEnd, vEnd int
	}
	var (
		buf   []byte
		edits []edit
		ferr  error
	)
	err := walk(func(uk, v []byte) bool {
		e, err := fn(uk, v)
		if err != nil && !errors.Is(err, runtime.StopEdit) {
			ferr = err
			return false
		}
		switch e.Action {
		case runtime.EditKeep:
		case runtime.EditDelete:
			start := len(buf)
			buf = append(buf, uk...)
			edits = append(edits, edit{del: true, uk: start, ukEnd: len(buf)})
		case runtime.EditReplace:
			start := len(buf)
			buf = append(buf, uk...)
			mid := len(buf)
			buf = append(buf, e.Value...)
			edits = append(edits, edit{uk: start, ukEnd: mid, v: mid, vEnd: len(buf)})
		default:
			ferr = fmt.Errorf("state %q: Edit: unknown action %d for user key %x", state, e.Action, uk)
			return false
		}
		return err == nil
	})
	if ferr != nil {
		return ferr
	}
	if err != nil {
		return err
	}
	for _, e := range edits {
		uk := buf[e.uk:e.ukEnd:e.ukEnd]
		if e.del {
			err = del(uk)
		} else {
			err = put(uk, buf[e.v:e.vEnd:e.vEnd])
		}
		if err != nil {
			return err
		}
	}
	return nil
}
