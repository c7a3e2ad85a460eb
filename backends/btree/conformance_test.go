package btree_test

import (
	"testing"

	"github.com/stategen/stategen/backends/btree"
	"github.com/stategen/stategen/checkpoint/checkpointtest"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

func factory(opts btree.Options) storetest.Factory {
	return func(tb testing.TB, cfg runtime.StoreConfig) runtime.Store {
		opts.StoreConfig = cfg
		s, err := btree.New(opts)
		if err != nil {
			tb.Fatal(err)
		}
		return s
	}
}

// TestConformance runs the shared conformance suite with the default
// options.
func TestConformance(t *testing.T) {
	storetest.Run(t, factory(btree.Options{}), storetest.Sorted())
}

// TestConformanceDegree2 runs the suite on 2-3-4 trees, whose nodes split
// and merge on nearly every write, so that copy-on-write of nodes shared
// with snapshots is exercised everywhere.
func TestConformanceDegree2(t *testing.T) {
	storetest.Run(t, factory(btree.Options{Degree: 2}), storetest.Sorted())
}

// TestConformanceTinySlabsEagerCompaction runs the suite with the smallest
// slabs (many slabs, large values in slabs of their own) and a compaction
// whenever garbage outweighs the live bytes, however few, so that every
// path of the arena is exercised, with snapshots live across compactions.
func TestConformanceTinySlabsEagerCompaction(t *testing.T) {
	storetest.Run(t, factory(btree.Options{MaxSlabSize: 1 << 10, CompactionMinGarbage: 1}), storetest.Sorted())
}

// TestConformanceThroughFiles runs the suite with every snapshot written
// to checkpoint files and read back, rescaling included.
func TestConformanceThroughFiles(t *testing.T) {
	storetest.Run(t, factory(btree.Options{}), storetest.Sorted(), storetest.WithSnapshotCodec(checkpointtest.ThroughFiles))
}

// TestConformanceTrackedChains runs the suite on a checkpoint.Tracker over
// the backend, with every snapshot written as a chain of incremental
// checkpoints and read back through it.
func TestConformanceTrackedChains(t *testing.T) {
	checkpointtest.RunTrackedChains(t, factory(btree.Options{}), storetest.Sorted())
}
