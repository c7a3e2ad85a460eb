package pebble_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stategen/stategen/backends/pebble"
)

// BenchmarkFillPause Puts 1M new keys into a new store, one Put each, and
// reports the time per Put and the longest Put (max-put-ms): the pauses
// of the operator's goroutine, such as rebuilds of the key filter, which
// scan the whole database (before they ran on a goroutine of their own,
// the longest Put took 260-330 ms; since, 26-33 ms).
func BenchmarkFillPause(b *testing.B) {
	for _, n := range []int{1 << 20} {
		b.Run(fmt.Sprintf("keys=%dM", n>>20), func(b *testing.B) {
			var worst time.Duration
			for range b.N {
				s, err := pebble.New(pebble.Options{InMemory: true})
				if err != nil {
					b.Fatal(err)
				}
				vs := valueState(b, s)
				v := []byte("value-of-some-length")
				for i := range n {
					t0 := time.Now()
					if err := vs.Put(key(i), v); err != nil {
						b.Fatal(err)
					}
					worst = max(worst, time.Since(t0))
				}
				s.Close()
			}
			b.ReportMetric(float64(worst.Microseconds())/1000, "max-put-ms")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/put")
		})
	}
}
