package runtime

import "fmt"

// Migration converts the values of a state written under an older schema
// that the current one cannot be resolved from by the rules of package
// runtime/schema — a narrowed number, a field whose type changed family —
// with a function the user wrote: the escape hatch for an incompatible
// change. The user keeps the old value type in the code and marks a
// function from it to the state's current value type
//
//	//stategen:migrate profiles
//	func migrateProfiles(old ProfileV1) (Profile, error) { ... }
//
// and the generator adds a Migration to the state's descriptor (see
// MigrationFunc). Binding the handle registers the state with its
// migrations (StateSpec.Migrations): a restore into that store of a
// checkpoint whose schema of the state is From — or resolves to From by
// those rules — converts every value with it.
// Keys, namespaces and user keys cannot change this way: From must encode
// them as the current schema does.
type Migration struct {
	// From is the schema of the state the function migrates from: the
	// state's schema with the old value type.
	From string
	// Convert appends to dst the encoding of the migrated value of src,
	// which holds one value in From's encoding, whole.
	Convert func(dst, src []byte) ([]byte, error)
}

// MigrationFunc returns the Convert function of a Migration: it decodes a
// value with from, migrates it with fn, and appends the result encoded
// with to. The error of a value that does not decode, or of fn, names the
// migration.
func MigrationFunc[O, N any](from ValueCodec[O], to ValueCodec[N], fn func(O) (N, error)) func(dst, src []byte) ([]byte, error) {
	return func(dst, src []byte) ([]byte, error) {
		old, rest, err := from.DecodeValue(src)
		if err != nil {
			return dst, err
		}
		if len(rest) != 0 {
			return dst, fmt.Errorf("%w: %d bytes after the value", ErrCorrupt, len(rest))
		}
		v, err := fn(old)
		if err != nil {
			return dst, fmt.Errorf("stategen: the migration function failed: %w", err)
		}
		return to.AppendValue(dst, v), nil
	}
}
