package checkpoint_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

// typedStates are the states of TestIncrementalTypedTables, opened through
// a Tracker with the descriptors' Typed set, as stategen generates them:
// a value, a value that is a slice, and a map, each also used at the byte
// level (bytes, by name).
type typedStates struct {
	vals  runtime.Value[int64, string]
	lists runtime.Value[int64, []int64]
	maps  runtime.Map[int64, int64, string]
	bytes map[string]runtime.State
}

func openTypedStates(t *testing.T, tr *checkpoint.Tracker) *typedStates {
	t.Helper()
	var ts typedStates
	var err error
	ts.vals, err = runtime.NewValue(tr, runtime.ValueDescriptor[int64, string]{
		Name: "tv", Fingerprint: "f", Key: runtime.Int64Codec{}, Value: runtime.StringCodec{},
		Typed: runtime.TypedValues[int64, string](),
	})
	if err != nil {
		t.Fatal(err)
	}
	ts.lists, err = runtime.NewValue(tr, runtime.ValueDescriptor[int64, []int64]{
		Name: "ts", Fingerprint: "f", Key: runtime.Int64Codec{}, Value: storetest.Int64sCodec{},
		Typed: runtime.TypedSlices[int64, int64](),
	})
	if err != nil {
		t.Fatal(err)
	}
	ts.maps, err = runtime.NewMap(tr, runtime.MapDescriptor[int64, int64, string]{
		Name: "tm", Fingerprint: "f", Key: runtime.Int64Codec{}, UserKey: runtime.Int64Codec{}, Value: runtime.StringCodec{},
		Typed: runtime.TypedMaps[int64, int64, string](),
	})
	if err != nil {
		t.Fatal(err)
	}
	ts.bytes = make(map[string]runtime.State)
	for _, spec := range tr.States() {
		st, err := tr.Register(spec)
		if err != nil {
			t.Fatal(err)
		}
		// The store keeps each state as Go values behind the tracker,
		// and the tracker gives out the Table itself, which the typed
		// handles use.
		if _, ok := st.(runtime.Table); !ok {
			t.Fatalf("state %q behind a Tracker over cow is a %T, not a runtime.Table: the typed path is off", spec.Name, st)
		}
		ts.bytes[spec.Name] = st
	}
	return &ts
}

// typedOps applies n random operations to ts, through the typed handles
// and at the byte level, on few keys, so that they overwrite, clear and
// delete one another.
func typedOps(t *testing.T, rng *rand.Rand, ts *typedStates, n int) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	key := func() runtime.Key {
		return runtime.MakeKey(runtime.Int64Codec{}.AppendKey(nil, rng.Int64N(24)), nil, incMaxP)
	}
	str := func() string { return fmt.Sprint("v", rng.IntN(1000)) }
	for range n {
		k, uk := rng.Int64N(24), rng.Int64N(6)
		switch rng.IntN(3) {
		case 0:
			switch r := rng.IntN(10); {
			case r < 4:
				must(ts.vals.Put(k, str()))
			case r < 6:
				must(ts.vals.Update(k, func(old string, _ bool) string { return old + "x" }))
			case r < 7:
				must(ts.vals.Delete(k))
			case r < 8:
				must(ts.bytes["tv"].(runtime.ValueState).Put(key(), runtime.StringCodec{}.AppendValue(nil, str())))
			case r < 9:
				must(ts.bytes["tv"].(runtime.ValueUpdater).Update(key(), func(old []byte, found bool) ([]byte, error) {
					var s string
					var err error
					if found {
						s, _, err = runtime.StringCodec{}.DecodeValue(old)
					}
					return runtime.StringCodec{}.AppendValue(nil, s+"b"), err
				}))
			default:
				must(ts.bytes["tv"].DeleteAll(key()))
			}
		case 1:
			switch r := rng.IntN(8); {
			case r < 3:
				must(ts.lists.Put(k, []int64{rng.Int64N(9), rng.Int64N(9)}))
			case r < 6:
				must(ts.lists.Update(k, func(old []int64, _ bool) []int64 { return append(old, rng.Int64N(9)) }))
			case r < 7:
				must(ts.lists.Delete(k))
			default:
				must(ts.bytes["ts"].Clear(key()))
			}
		default:
			st := ts.bytes["tm"].(runtime.MapState)
			switch r := rng.IntN(12); {
			case r < 4:
				must(ts.maps.Put(k, uk, str()))
			case r < 6:
				must(ts.maps.Update(k, uk, func(old string, _ bool) string { return old + "y" }))
			case r < 7:
				must(ts.maps.Delete(k, uk))
			case r < 8:
				must(ts.maps.Edit(k, func(_ int64, v *string) (runtime.EditAction, error) {
					switch rng.IntN(3) {
					case 0:
						return runtime.EditDelete, nil
					case 1:
						*v += "e"
						return runtime.EditReplace, nil
					}
					return runtime.EditKeep, nil
				}))
			case r < 9:
				must(ts.maps.Clear(k))
			case r < 10:
				must(st.Put(key(), runtime.Int64Codec{}.AppendKey(nil, uk), runtime.StringCodec{}.AppendValue(nil, str())))
			case r < 11:
				must(st.Delete(key(), runtime.Int64Codec{}.AppendKey(nil, uk)))
			default:
				must(st.DeleteAll(key()))
			}
		}
	}
}

// TestIncrementalTypedTables: behind a Tracker over cow the typed handles
// keep their states as Go values (Tracker.HostTable), and the tables
// report every change they make, through the typed handles or at the byte
// level (runtime.TableChanges). Random operations of both kinds, a
// checkpoint after each round, most of them completed: every checkpoint,
// read back through its chain at one, two and three instances and
// restored into every backend, must hold exactly what the store held when
// its snapshot was taken — a change a table did not report would be
// missing from the files of changes.
func TestIncrementalTypedTables(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 11))
			inner, err := cow.New(cow.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: incMaxP}})
			if err != nil {
				t.Fatal(err)
			}
			tr, err := checkpoint.Track(inner, &checkpoint.TrackOptions{MaxChainLength: 4})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tr.Close() })
			ts := openTypedStates(t, tr)
			s := checkpoint.NewMem()
			deltas := 0
			for i := 1; i <= 16; i++ {
				typedOps(t, rng, ts, 10+rng.IntN(60))
				ckpt, want, is := checkpointOnce(t, tr, s, i)
				if is.File.Delta {
					deltas++
				}
				if rng.IntN(5) != 0 { // else abandoned: the next changes reach back further
					tr.Completed(ckpt)
				}
				checkRestores(t, s, ckpt, want)
			}
			if deltas == 0 {
				t.Error("no checkpoint was written as changes: the test proves nothing")
			}
			// The typed handles read what the byte level wrote, and the
			// other way round, after all this.
			for k := range int64(24) {
				v, ok, err := ts.vals.Get(k)
				b, bok, berr := ts.bytes["tv"].(runtime.ValueState).Get(runtime.MakeKey(runtime.Int64Codec{}.AppendKey(nil, k), nil, incMaxP))
				if err != nil || berr != nil || ok != bok || ok && string(runtime.StringCodec{}.AppendValue(nil, v)) != string(b) {
					t.Fatalf("key %d: typed Get (%q, %v, %v), byte Get (%x, %v, %v)", k, v, ok, err, b, bok, berr)
				}
			}
		})
	}
}

// TestTrackerHostsTablesOnlyForItself: a state the store made a Table
// before it was put behind a Tracker reports its changes to no one, so the
// tracker gives it out wrapped, at the byte level, as it does every state
// of a store that hosts no tables — never the untracked Table, whose
// typed writes it would not see.
func TestTrackerHostsTablesOnlyForItself(t *testing.T) {
	inner, err := cow.New(cow.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: incMaxP}})
	if err != nil {
		t.Fatal(err)
	}
	desc := runtime.ValueDescriptor[int64, string]{
		Name: "tv", Fingerprint: "f", Key: runtime.Int64Codec{}, Value: runtime.StringCodec{},
		Typed: runtime.TypedValues[int64, string](),
	}
	if _, err := runtime.NewValue(inner, desc); err != nil {
		t.Fatal(err)
	}
	tr, err := checkpoint.Track(inner, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	v, err := runtime.NewValue(tr, desc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := tr.Register(tr.States()[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.(runtime.Table); ok {
		t.Fatalf("the Tracker gave out a Table it did not have made")
	}
	// A full checkpoint, completed; then a Put through the typed
	// handle, which the next checkpoint, of changes, must hold.
	s := checkpoint.NewMem()
	for i, put := range []int64{1, 7} {
		if err := v.Put(put, fmt.Sprint("value ", put)); err != nil {
			t.Fatal(err)
		}
		ckpt, want, is := checkpointOnce(t, tr, s, i+1)
		if is.File.Delta != (i == 1) {
			t.Fatalf("checkpoint %d: Delta %v", i+1, is.File.Delta)
		}
		tr.Completed(ckpt)
		checkRestores(t, s, ckpt, want)
		if n := len(want["tv"]); n == 0 {
			t.Fatalf("checkpoint %d holds no entry of the state", i+1)
		}
	}
}
