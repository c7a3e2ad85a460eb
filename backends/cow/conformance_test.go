package cow_test

import (
	"testing"

	"github.com/stategen/stategen/checkpoint/checkpointtest"

	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

func factory(opts cow.Options) storetest.Factory {
	return func(tb testing.TB, cfg runtime.StoreConfig) runtime.Store {
		opts.StoreConfig = cfg
		s, err := cow.New(opts)
		if err != nil {
			tb.Fatal(err)
		}
		return s
	}
}

// TestConformance runs the shared conformance suite with the default
// options.
func TestConformance(t *testing.T) {
	storetest.Run(t, factory(cow.Options{}))
}

// TestConformanceTinySlabsEagerCompaction runs the suite with the smallest
// slabs (many slabs, values in slabs of their own) and compaction after
// nearly every write, so that every path of the arena is exercised.
func TestConformanceTinySlabsEagerCompaction(t *testing.T) {
	storetest.Run(t, factory(cow.Options{MaxSlabSize: 1 << 10, CompactionMinGarbage: 1}))
}

// TestConformanceParallelRestore runs the suite with Restore loading on
// four goroutines whatever GOMAXPROCS is (the default follows it, and is
// 1 on one core).
func TestConformanceParallelRestore(t *testing.T) {
	storetest.Run(t, factory(cow.Options{RestoreConcurrency: 4}))
}

// TestConformanceTrackedChains runs the suite on a checkpoint.Tracker over
// the backend, with every snapshot written as a chain of incremental
// checkpoints and read back through it.
func TestConformanceTrackedChains(t *testing.T) {
	checkpointtest.RunTrackedChains(t, factory(cow.Options{}))
}
