package checkpoint_test

import (
	"errors"
	"testing"

	"github.com/stategen/stategen/checkpoint/checkpointtest"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

// uncheckedStore is a store whose states are not runtime.WriteCheckers.
type uncheckedStore struct{ runtime.Store }

func (s uncheckedStore) Register(spec runtime.StateSpec) (runtime.State, error) {
	st, err := s.Store.Register(spec)
	if err != nil {
		return nil, err
	}
	return struct{ runtime.SortedMapState }{st.(runtime.SortedMapState)}, nil
}

// TestTrackerCheckWrite: a Tracker's states check writes as its store's
// do (runtime.WriteChecker), and answer errors.ErrUnsupported over a store
// whose states cannot, so that the caller writes instead.
func TestTrackerCheckWrite(t *testing.T) {
	spec := runtime.StateSpec{Name: "sm", Kind: runtime.KindSortedMap, Fingerprint: "f"}
	k := runtime.MakeKey([]byte("k"), nil, runtime.DefaultMaxParallelism)

	m, err := storetest.NewModel(runtime.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	tr, states := checkpointtest.Track(t, m, nil, spec)
	wc, ok := states[0].(runtime.WriteChecker)
	if !ok {
		t.Fatal("a Tracker's state is not a runtime.WriteChecker")
	}
	if err := wc.CheckWrite(k); err != nil {
		t.Fatalf("CheckWrite of an open store: %v", err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := wc.CheckWrite(k); !errors.Is(err, runtime.ErrClosed) {
		t.Fatalf("CheckWrite after Close: %v, want ErrClosed", err)
	}

	m2, err := storetest.NewModel(runtime.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	_, states = checkpointtest.Track(t, uncheckedStore{m2}, nil, spec)
	if err := states[0].(runtime.WriteChecker).CheckWrite(k); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("CheckWrite over a store that cannot check writes: %v, want errors.ErrUnsupported", err)
	}
}
