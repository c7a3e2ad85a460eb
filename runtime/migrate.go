package runtime

import (
	"fmt"
	"slices"
	"sync"
)

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
// MigrationFunc). A restore of a checkpoint whose schema of the state is
// From — or resolves to From by those rules — converts every value with it.
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

// The migrations of the states this process has bound, by state name and
// the fingerprint they migrate to. A restore finds them by the registered
// state's name and fingerprint (Migrations); the generated Open functions
// register them as they bind the handles.
var migrations struct {
	sync.Mutex
	m map[migrationKey][]Migration
}

type migrationKey struct{ state, to string }

// RegisterMigrations makes ms known as the migrations of state into the
// schema of fingerprint to. Binding a handle whose descriptor lists
// migrations calls it; registering the same From again replaces it.
func RegisterMigrations(state, to string, ms []Migration) {
	if len(ms) == 0 {
		return
	}
	migrations.Lock()
	defer migrations.Unlock()
	if migrations.m == nil {
		migrations.m = map[migrationKey][]Migration{}
	}
	k := migrationKey{state, to}
	for _, m := range ms {
		cur := migrations.m[k]
		if i := slices.IndexFunc(cur, func(o Migration) bool { return o.From == m.From }); i >= 0 {
			cur[i] = m
			continue
		}
		migrations.m[k] = append(cur, m)
	}
}

// Migrations returns the migrations registered for state into the schema
// of fingerprint to.
func Migrations(state, to string) []Migration {
	migrations.Lock()
	defer migrations.Unlock()
	return slices.Clone(migrations.m[migrationKey{state, to}])
}
