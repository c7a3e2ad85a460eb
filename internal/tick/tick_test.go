package tick

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestEvery: reports come while the work runs, and one more at its end,
// none after it.
func TestEvery(t *testing.T) {
	var n atomic.Int64
	stop := Every(time.Millisecond, func() { n.Add(1) })
	for n.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	stop()
	after := n.Load()
	time.Sleep(10 * time.Millisecond)
	if n.Load() != after || after < 4 {
		t.Errorf("%d reports, then %d: want at least 3 and the last, and none after stop", after, n.Load())
	}
}
