package cow_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/checkpoint/checkpointtest"
	"github.com/stategen/stategen/runtime"
)

// A store that is opened, written, snapshotted — its snapshots scanned,
// written to checkpoints, cancelled, restored from, outliving the store —
// and closed leaves no goroutine behind (goleak reports any, with its
// stack, after giving them time to wind down), whether Restore loads on
// the calling goroutine or on workers of its own. (Failed and panicking
// parallel restores are checked by TestFailedRestoreChangesNothing.)
func TestClosedStoreLeaksNoGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, n := range []int{1, 4, 1, 4} {
		checkpointtest.Lifecycle(t, func() runtime.Store {
			s, err := cow.New(cow.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: 16, KeyGroups: runtime.FullRange(16)}, RestoreConcurrency: n})
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
	}
}
