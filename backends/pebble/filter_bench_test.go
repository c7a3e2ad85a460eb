package pebble_test

import (
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
	const n = 1 << 20
	b.Run("keys=1M", func(b *testing.B) {
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

// BenchmarkGetAbsent reads keys a store never held, after 100K Puts
// (the last batches kept, as a job that creates state reads them): the
// key filter answers such reads, before any batch's index is asked
// (which took them from 200 to 125 ns, -38%, p=0.000, 8 interleaved
// runs).
func BenchmarkGetAbsent(b *testing.B) {
	s, err := pebble.New(pebble.Options{InMemory: true, BatchSize: 64 << 10})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	vs := valueState(b, s)
	const n = 100_000
	for i := range n {
		if err := vs.Put(key(i), []byte("value")); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		if _, ok, err := vs.Get(key(n + i%(1<<20))); err != nil || ok {
			b.Fatal(ok, err)
		}
	}
}
