package cow_test

import (
	"fmt"
	"testing"

	"github.com/stategen/stategen/checkpoint/checkpointtest"

	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

// rawKey holds the bytes of a key inline, as the keys of a table must be
// (no strings: runtime.TypedValues).
type rawKey struct {
	N uint8
	B [64]byte
}

// rawCodec is the identity codec of keys and values: a key's or value's
// bytes are the rawKey's or the string's. Over it, a hosted table holds
// exactly the bytes the conformance suite writes.
type rawCodec struct{}

func (rawCodec) AppendKey(dst []byte, k rawKey) []byte { return append(dst, k.B[:k.N]...) }
func (rawCodec) DecodeKey(b []byte) (rawKey, []byte, error) {
	var k rawKey
	if len(b) > len(k.B) {
		return k, nil, fmt.Errorf("rawCodec: a key of %d bytes, more than %d", len(b), len(k.B))
	}
	k.N = uint8(copy(k.B[:], b))
	return k, nil, nil
}
func (rawCodec) AppendValue(dst []byte, v string) []byte { return append(dst, v...) }
func (rawCodec) DecodeValue(b []byte) (string, []byte, error) {
	return string(b), nil, nil
}

// hostingStore is a cow store whose keyed value and map states without
// TTL are all hosted tables (runtime.TypedValues of rawKey and string,
// runtime.TypedMaps of rawKey, rawKey and string), as a typed handle would
// make them: Register binds a handle with TypedValues first, which
// creates the table (or adopts a restored state), then returns the state
// registered. States a Restore creates stay byte tables until then.
type hostingStore struct{ *cow.Store }

func (s hostingStore) Register(spec runtime.StateSpec) (runtime.State, error) {
	// Errors are Register's too: it reports them below.
	switch {
	case spec.SubKeyed || spec.TTL != 0:
	case spec.Kind == runtime.KindValue:
		_, _ = runtime.NewValue(s.Store, runtime.ValueDescriptor[rawKey, string]{
			Name: spec.Name, Fingerprint: spec.Fingerprint, Schema: spec.Schema, Migrations: spec.Migrations,
			Key: rawCodec{}, Value: rawCodec{}, Typed: runtime.TypedValues[rawKey, string](),
		})
	case spec.Kind == runtime.KindMap:
		_, _ = runtime.NewMap(s.Store, runtime.MapDescriptor[rawKey, rawKey, string]{
			Name: spec.Name, Fingerprint: spec.Fingerprint, Schema: spec.Schema, Migrations: spec.Migrations,
			Key: rawCodec{}, UserKey: rawCodec{}, Value: rawCodec{}, Typed: runtime.TypedMaps[rawKey, rawKey, string](),
		})
	}
	return s.Store.Register(spec)
}

// Close closes the store and forgets the operator lists registered with
// the wrapper, as every Store's Close does.
func (s hostingStore) Close() error {
	runtime.ReleaseOperatorStates(s)
	return s.Store.Close()
}

func hostingFactory(opts cow.Options) storetest.Factory {
	f := factory(opts)
	return func(tb testing.TB, cfg runtime.StoreConfig) runtime.Store {
		return hostingStore{f(tb, cfg).(*cow.Store)}
	}
}

// TestConformanceHostedValues runs the shared conformance suite with every
// keyed value and (unsorted) map state kept as a hosted table of Go values: the typed fast
// path answers every rule of the Store contract at the byte level as the
// store's own states do — snapshots while writing, restores, rescaling,
// bad keys, writes from callbacks, Close.
func TestConformanceHostedValues(t *testing.T) {
	storetest.Run(t, hostingFactory(cow.Options{}))
}

// TestConformanceHostedValuesTrackedChains runs the tracked-chains suite
// (incremental checkpoints written and read back) with hosted values.
func TestConformanceHostedValuesTrackedChains(t *testing.T) {
	checkpointtest.RunTrackedChains(t, hostingFactory(cow.Options{}))
}

// TestHostingStoreHostsValues: the suites above test hosted tables only
// if the wrapper makes them.
func TestHostingStoreHostsValues(t *testing.T) {
	s := hostingFactory(cow.Options{})(t, runtime.StoreConfig{})
	defer s.Close()
	for _, kind := range []runtime.Kind{runtime.KindValue, runtime.KindMap} {
		st, err := s.Register(runtime.StateSpec{Name: kind.String(), Kind: kind})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := st.(runtime.Table); !ok {
			t.Fatalf("Register of a %v state returned %T, not a hosted table", kind, st)
		}
	}
}
