package runtime

import "errors"

// Errors a user can meet, to be tested with errors.Is. Functions wrap them
// with the state, value or offset at fault.
var (
	// ErrInvalidParallelism reports a maxParallelism or parallelism outside its
	// valid range, or an operator index outside [0, parallelism).
	ErrInvalidParallelism = errors.New("stategen: invalid parallelism")

	// ErrInvalidKeyGroup reports a key group or key-group range outside
	// [0, maxParallelism).
	ErrInvalidKeyGroup = errors.New("stategen: invalid key group")

	// ErrKeyGroupNotOwned reports an operation on a key whose key group lies
	// outside the key groups the store owns: the record was routed to the
	// wrong operator instance.
	ErrKeyGroupNotOwned = errors.New("stategen: key group not owned by this store")

	// ErrInvalidKey reports a Key that does not describe its own bytes — a
	// Group or Hash that differs from the encoded key's (build keys with
	// MakeKey) — or a non-empty namespace on a keyed state.
	ErrInvalidKey = errors.New("stategen: invalid key")

	// ErrCorrupt reports bytes a decoder cannot decode: truncated input, a
	// length that exceeds the input, an invalid escape or tag.
	ErrCorrupt = errors.New("stategen: corrupt encoding")

	// ErrInvalidState reports a state descriptor that cannot be registered: an
	// empty or unsafe name, an unknown kind, a nil codec.
	ErrInvalidState = errors.New("stategen: invalid state descriptor")

	// ErrStateMismatch reports a state registered, or restored, under a name
	// that already holds a state of another kind, sub-keying or schema
	// fingerprint.
	ErrStateMismatch = errors.New("stategen: state already registered with another descriptor")

	// ErrMaxParallelismMismatch reports a restore from a snapshot or
	// checkpoint taken with another maxParallelism. The number of key groups
	// is fixed for the life of the state.
	ErrMaxParallelismMismatch = errors.New("stategen: maxParallelism differs from the snapshot's")

	// ErrRestoreConflict reports a restore into a key group that already holds
	// entries of the restored state.
	ErrRestoreConflict = errors.New("stategen: restore into a key group that already holds state")

	// ErrClosed reports an operation on a closed store.
	ErrClosed = errors.New("stategen: store is closed")

	// ErrReleased reports a use of a snapshot after Release, or a second
	// Release.
	ErrReleased = errors.New("stategen: snapshot already released")

	// ErrUnbound reports a call on a zero handle: a state struct field that
	// no generated Open function (or New* constructor) has bound to a store.
	ErrUnbound = errors.New("stategen: state handle is not bound to a store")

	// ErrInvalidView reports a View that breaks its contract: nil, its
	// states unsorted, an entry outside the key group scanned (a corrupt
	// entry wraps ErrCorrupt instead).
	ErrInvalidView = errors.New("stategen: invalid view")

	// ErrWriteDuringIteration reports a write to a store — a Put, Add,
	// Delete, Clear, a Register of a new state, a Restore — made from
	// inside the callback of one of its iterations (an All, Keys, Values,
	// Range, Namespaces or Edit loop), which every backend refuses. To
	// delete or replace the map entry being visited, iterate with Edit
	// (MapState.Edit, the map handles' Edit and EditRange).
	ErrWriteDuringIteration = errors.New("stategen: write from inside an iteration of the same store")
)
