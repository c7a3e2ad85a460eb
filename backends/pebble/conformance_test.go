package pebble_test

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stategen/stategen/backends/pebble"
	"github.com/stategen/stategen/checkpoint/checkpointtest"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

// factory returns a storetest.Factory of stores made with opts, each on a
// new in-memory file system unless opts.FS is set.
func factory(opts pebble.Options) storetest.Factory {
	return func(tb testing.TB, cfg runtime.StoreConfig) runtime.Store {
		o := opts
		o.StoreConfig = cfg
		if o.FS == nil {
			o.FS = vfs.NewMem()
		}
		s, err := pebble.New(o)
		if err != nil {
			tb.Fatal(err)
		}
		return s
	}
}

// TestConformance runs the shared conformance suite with the default
// options, on an in-memory file system.
func TestConformance(t *testing.T) {
	storetest.Run(t, factory(pebble.Options{}), storetest.Sorted())
}

// TestConformanceRangeClears runs the suite with every Clear and DeleteAll
// one range deletion, as those of more than a thousand entries are (the
// suite's maps are small: by default they are deleted entry by entry).
func TestConformanceRangeClears(t *testing.T) {
	pebble.SetMaxPointClear(t, 0)
	storetest.Run(t, factory(pebble.Options{}), storetest.Sorted())
}

// TestConformanceThroughFiles runs the suite with every snapshot written
// to checkpoint files and read back, rescaling included.
func TestConformanceThroughFiles(t *testing.T) {
	storetest.Run(t, factory(pebble.Options{}), storetest.Sorted(), storetest.WithSnapshotCodec(checkpointtest.ThroughFiles))
}

// TestConformanceTrackedChains runs the suite on a checkpoint.Tracker over
// the backend, with every snapshot written as a chain of incremental
// checkpoints and read back through it.
func TestConformanceTrackedChains(t *testing.T) {
	checkpointtest.RunTrackedChains(t, factory(pebble.Options{}), storetest.Sorted())
}
