package checkpoint_test

import (
	"sync/atomic"
	"testing"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/checkpoint/checkpointtest"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

func modelFactory(tb testing.TB, cfg runtime.StoreConfig) runtime.Store {
	m, err := storetest.NewModel(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// TestConformanceThroughFiles runs the Store conformance suite on the
// reference model with every snapshot carried through checkpoint files on
// disk: what any backend gets with the same option.
func TestConformanceThroughFiles(t *testing.T) {
	var calls atomic.Int64
	codec := func(tb testing.TB, v runtime.View) (runtime.View, error) {
		calls.Add(1)
		out, err := checkpointtest.ThroughFiles(tb, v)
		if err == nil {
			if _, ok := out.(*checkpoint.View); !ok {
				t.Errorf("ThroughFiles returned a %T, not a *checkpoint.View", out)
			}
		}
		return out, err
	}
	storetest.Run(t, modelFactory, storetest.Sorted(), storetest.WithSnapshotCodec(codec))
	t.Logf("%d snapshots went through files", calls.Load())
	if calls.Load() < 10 {
		t.Errorf("only %d snapshots went through the codec", calls.Load())
	}
}

// TestConformanceTrackedChains runs the Store conformance suite on a
// Tracker over the reference model, with every snapshot carried through
// a chain of incremental checkpoints (checkpointtest.RunTrackedChains):
// the tracker is a conforming store, and what the suite reads back of
// each snapshot — restores and rescales included — is the chain's.
func TestConformanceTrackedChains(t *testing.T) {
	checkpointtest.RunTrackedChains(t, modelFactory, storetest.Sorted())
}
