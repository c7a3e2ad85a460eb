package pebble_test

import (
	"fmt"
	"testing"

	"go.uber.org/goleak"

	"github.com/stategen/stategen/backends/pebble"
	"github.com/stategen/stategen/checkpoint/checkpointtest"
	"github.com/stategen/stategen/runtime"
)

// A store that is opened, written, snapshotted — its snapshots scanned,
// written to checkpoints, cancelled, restored from, outliving the store —
// and closed leaves no goroutine behind (goleak reports any, with its
// stack, after giving them time to wind down).
func TestClosedStoreLeaksNoGoroutine(t *testing.T) {
	for _, inMemory := range []bool{false, true} {
		t.Run(fmt.Sprintf("InMemory=%v", inMemory), func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			for range 2 {
				checkpointtest.Lifecycle(t, func() runtime.Store {
					s, err := pebble.New(pebble.Options{
						StoreConfig: runtime.StoreConfig{MaxParallelism: 16, KeyGroups: runtime.FullRange(16)},
						InMemory:    inMemory,
					})
					if err != nil {
						t.Fatal(err)
					}
					return s
				})
			}
		})
	}
}
