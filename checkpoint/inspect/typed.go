package inspect

import (
	"context"
	"fmt"

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
}

// Read yields the entries of state in operator, decoded with codecs. A
// field that does not decode completely is an error naming the state and
// key group.
func Read[K, N, UK, V any](ctx context.Context, c *Checkpoint, operator, state string, codecs Codecs[K, N, UK, V]) runtime.Seq[Record[K, N, UK, V]] {
	return func(yield func(Record[K, N, UK, V], error) bool) {
		for e, err := range c.Entries(ctx, operator, state) {
			if err != nil {
				yield(Record[K, N, UK, V]{}, err)
				return
			}
			r := Record[K, N, UK, V]{KeyGroup: e.KeyGroup}
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

// check verifies that the checkpoint holds state name with kind and
// sub-keying, and, if fingerprint is not empty, that fingerprint.
func (c *Checkpoint) check(operator, name string, kind runtime.Kind, subKeyed bool, fingerprint string) error {
	spec, err := c.State(operator, name)
	if err != nil {
		return err
	}
	if spec.Kind != kind || spec.SubKeyed != subKeyed || fingerprint != "" && spec.Fingerprint != fingerprint {
		want := runtime.StateSpec{Name: name, Kind: kind, SubKeyed: subKeyed, Fingerprint: fingerprint}
		return fmt.Errorf("%w: checkpoint %s holds %v, the descriptor says %v", ErrState, c.name, spec, want)
	}
	return nil
}

// Values reads a keyed Value state whole. An empty d.Fingerprint skips the
// schema check.
func Values[K comparable, V any](ctx context.Context, c *Checkpoint, operator string, d runtime.ValueDescriptor[K, V]) (map[K]V, error) {
	if err := c.check(operator, d.Name, runtime.KindValue, false, d.Fingerprint); err != nil {
		return nil, err
	}
	out := make(map[K]V)
	for r, err := range Read(ctx, c, operator, d.Name, Codecs[K, struct{}, struct{}, V]{Key: d.Key, Value: d.Value}) {
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
	if err := c.check(operator, d.Name, runtime.KindValue, true, d.Fingerprint); err != nil {
		return nil, err
	}
	out := make(map[K]map[N]V)
	for r, err := range Read(ctx, c, operator, d.Name, Codecs[K, N, struct{}, V]{Key: d.Key, Namespace: d.Namespace, Value: d.Value}) {
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
	if err := c.check(operator, d.Name, runtime.KindList, false, d.Fingerprint); err != nil {
		return nil, err
	}
	out := make(map[K][]V)
	for r, err := range Read(ctx, c, operator, d.Name, Codecs[K, struct{}, struct{}, V]{Key: d.Key, Value: d.Value}) {
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
	if err := c.check(operator, d.Name, kind, false, d.Fingerprint); err != nil {
		return nil, err
	}
	out := make(map[K]map[UK]V)
	for r, err := range Read(ctx, c, operator, d.Name, Codecs[K, struct{}, UK, V]{Key: d.Key, UserKey: d.UserKey, Value: d.Value}) {
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
