package inspect

import (
	"context"
	"fmt"
	"time"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
)

// Codecs decode one state's entries. A nil codec leaves its field of a
// Record zero (a keyed state has no namespace; Value and List states have
// no user key).
type Codecs[K, N, UK, V any] struct {
	Key       runtime.KeyCodec[K]
	Namespace runtime.KeyCodec[N]
	UserKey   runtime.KeyCodec[UK]
	Value     runtime.ValueCodec[V]
}

// Record is one decoded entry of a state.
type Record[K, N, UK, V any] struct {
	KeyGroup  int
	Key       K
	Namespace N
	UserKey   UK
	Value     V
	// Updated is the time of the entry's last update, for a state with a
	// TTL (runtime.TTL), whose values carry it; zero otherwise. A
	// checkpoint holds no entry that had expired when it was taken; one
	// may have expired since.
	Updated time.Time
}

// Read yields the entries of state in operator, decoded with codecs. A
// field that does not decode completely is an error naming the state and
// key group. Read decodes the checkpoint's bytes as they are; the per-kind
// helpers (Values, Lists, ...) also migrate them first when the state's
// schema changed since (see Values).
func Read[K, N, UK, V any](ctx context.Context, c *Checkpoint, operator, state string, codecs Codecs[K, N, UK, V]) runtime.Seq[Record[K, N, UK, V]] {
	return read(ctx, c, operator, state, codecs, nil)
}

// read is Read, with the values converted by mig (if not nil) before they
// are decoded.
func read[K, N, UK, V any](ctx context.Context, c *Checkpoint, operator, state string, codecs Codecs[K, N, UK, V], mig *checkpoint.Migration) runtime.Seq[Record[K, N, UK, V]] {
	return func(yield func(Record[K, N, UK, V], error) bool) {
		var buf []byte
		spec, err := c.State(operator, state)
		if err != nil {
			yield(Record[K, N, UK, V]{}, err)
			return
		}
		for e, err := range c.Entries(ctx, operator, state) {
			if err != nil {
				yield(Record[K, N, UK, V]{}, err)
				return
			}
			var updated time.Time
			if spec.TTL != 0 {
				stamp, v, err := runtime.SplitTTLStamp(e.Value)
				if err != nil {
					yield(Record[K, N, UK, V]{}, fmt.Errorf("checkpoint %s: state %q, key group %d: %w", c.name, state, e.KeyGroup, err))
					return
				}
				updated, e.Value = time.UnixMilli(stamp).UTC(), v
			}
			if mig != nil && mig.Rewrites() {
				if buf, err = mig.Transcode(buf[:0], e.Value); err != nil {
					yield(Record[K, N, UK, V]{}, fmt.Errorf("checkpoint %s: state %q, key group %d: migrating to the descriptor's schema: %w", c.name, state, e.KeyGroup, err))
					return
				}
				e.Value = buf
			}
			r := Record[K, N, UK, V]{KeyGroup: e.KeyGroup, Updated: updated}
			if err = decodeKey(codecs.Key, e.Key, &r.Key, "key"); err == nil {
				if err = decodeKey(codecs.Namespace, e.Namespace, &r.Namespace, "namespace"); err == nil {
					if err = decodeKey(codecs.UserKey, e.UserKey, &r.UserKey, "user key"); err == nil {
						err = decodeValue(codecs.Value, e.Value, &r.Value)
					}
				}
			}
			if err != nil {
				yield(Record[K, N, UK, V]{}, fmt.Errorf("checkpoint %s: state %q, key group %d: %w", c.name, state, e.KeyGroup, err))
				return
			}
			if !yield(r, nil) {
				return
			}
		}
	}
}

func decodeKey[T any](c runtime.KeyCodec[T], b []byte, dst *T, what string) error {
	if c == nil {
		return nil
	}
	v, rest, err := c.DecodeKey(b)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if len(rest) != 0 {
		return fmt.Errorf("%s: %w: %d trailing bytes", what, runtime.ErrCorrupt, len(rest))
	}
	*dst = v
	return nil
}

func decodeValue[T any](c runtime.ValueCodec[T], b []byte, dst *T) error {
	if c == nil {
		return nil
	}
	v, rest, err := c.DecodeValue(b)
	if err != nil {
		return fmt.Errorf("value: %w", err)
	}
	if len(rest) != 0 {
		return fmt.Errorf("value: %w: %d trailing bytes", runtime.ErrCorrupt, len(rest))
	}
	*dst = v
	return nil
}

// check verifies that the checkpoint holds the state of want, of want's
// kind and sub-keying, and, if want has a fingerprint, that it holds it
// under that fingerprint — or under a schema a restore would migrate to
// want's (checkpoint.CheckStates: by the rules of package runtime/schema,
// or with one of want's migration functions): then it returns the
// migration.
func (c *Checkpoint) check(operator string, want runtime.StateSpec) (*checkpoint.Migration, error) {
	spec, err := c.State(operator, want.Name)
	if err != nil {
		return nil, err
	}
	if spec.Kind != want.Kind || spec.SubKeyed != want.SubKeyed {
		return nil, fmt.Errorf("%w: checkpoint %s holds %v, the descriptor says %v", ErrState, c.name, spec, want)
	}
	if want.Fingerprint == "" || spec.Fingerprint == want.Fingerprint {
		return nil, nil
	}
	// read splits the TTL stamps off before it migrates: the values
	// migrate as those of a state without a TTL.
	spec.TTL, want.TTL = 0, 0
	migs, err := checkpoint.CheckStates([]runtime.StateSpec{want}, []runtime.StateSpec{spec}, checkpoint.FailOnUnknownStates)
	if err != nil {
		return nil, fmt.Errorf("%w: checkpoint %s: the descriptor's types cannot read it: %w", ErrState, c.name, err)
	}
	m := migs[want.Name]
	return &m, nil
}

// Values reads a keyed Value state whole. An empty d.Fingerprint skips the
// schema check. If the checkpoint holds the state under another schema —
// written by an earlier version of the job — and both it and d carry
// their schemas, the values are migrated to d's schema first, as a restore
// would migrate them: by the rules of package runtime/schema, or with the
// migration functions d lists (the //stategen:migrate escape hatch); an
// incompatible change without one is an error wrapping ErrState that names
// the field. The other helpers do the same.
func Values[K comparable, V any](ctx context.Context, c *Checkpoint, operator string, d runtime.ValueDescriptor[K, V]) (map[K]V, error) {
	mig, err := c.check(operator, runtime.StateSpec{Name: d.Name, Kind: runtime.KindValue, Fingerprint: d.Fingerprint, Schema: d.Schema, Migrations: d.Migrations})
	if err != nil {
		return nil, err
	}
	out := make(map[K]V)
	for r, err := range read(ctx, c, operator, d.Name, Codecs[K, struct{}, struct{}, V]{Key: d.Key, Value: d.Value}, mig) {
		if err != nil {
			return nil, err
		}
		out[r.Key] = r.Value
	}
	return out, nil
}

// SubKeyedValues reads a sub-keyed Value state whole, by key then
// namespace.
func SubKeyedValues[K, N comparable, V any](ctx context.Context, c *Checkpoint, operator string, d runtime.SubKeyedValueDescriptor[K, N, V]) (map[K]map[N]V, error) {
	mig, err := c.check(operator, runtime.StateSpec{Name: d.Name, Kind: runtime.KindValue, SubKeyed: true, Fingerprint: d.Fingerprint, Schema: d.Schema, Migrations: d.Migrations})
	if err != nil {
		return nil, err
	}
	out := make(map[K]map[N]V)
	for r, err := range read(ctx, c, operator, d.Name, Codecs[K, N, struct{}, V]{Key: d.Key, Namespace: d.Namespace, Value: d.Value}, mig) {
		if err != nil {
			return nil, err
		}
		m := out[r.Key]
		if m == nil {
			m = make(map[N]V)
			out[r.Key] = m
		}
		m[r.Namespace] = r.Value
	}
	return out, nil
}

// Lists reads a keyed List state whole; each list is in order.
func Lists[K comparable, V any](ctx context.Context, c *Checkpoint, operator string, d runtime.ListDescriptor[K, V]) (map[K][]V, error) {
	mig, err := c.check(operator, runtime.StateSpec{Name: d.Name, Kind: runtime.KindList, Fingerprint: d.Fingerprint, Schema: d.Schema, Migrations: d.Migrations})
	if err != nil {
		return nil, err
	}
	out := make(map[K][]V)
	for r, err := range read(ctx, c, operator, d.Name, Codecs[K, struct{}, struct{}, V]{Key: d.Key, Value: d.Value}, mig) {
		if err != nil {
			return nil, err
		}
		out[r.Key] = append(out[r.Key], r.Value)
	}
	return out, nil
}

// Maps reads a keyed Map or SortedMap state whole.
func Maps[K, UK comparable, V any](ctx context.Context, c *Checkpoint, operator string, d runtime.MapDescriptor[K, UK, V]) (map[K]map[UK]V, error) {
	spec, err := c.State(operator, d.Name)
	if err != nil {
		return nil, err
	}
	kind := runtime.KindMap
	if spec.Kind == runtime.KindSortedMap {
		kind = runtime.KindSortedMap
	}
	mig, err := c.check(operator, runtime.StateSpec{Name: d.Name, Kind: kind, Fingerprint: d.Fingerprint, Schema: d.Schema, Migrations: d.Migrations})
	if err != nil {
		return nil, err
	}
	out := make(map[K]map[UK]V)
	for r, err := range read(ctx, c, operator, d.Name, Codecs[K, struct{}, UK, V]{Key: d.Key, UserKey: d.UserKey, Value: d.Value}, mig) {
		if err != nil {
			return nil, err
		}
		m := out[r.Key]
		if m == nil {
			m = make(map[UK]V)
			out[r.Key] = m
		}
		m[r.UserKey] = r.Value
	}
	return out, nil
}
