package benchmarks

// Memory on every backend: the Go heap a state holds per entry, the cost of
// a garbage collection with the state live, and a state larger than a
// cache (STATEGEN_BENCH_LARGE=1: 10M entries) with the process's peak RSS.

import (
	"math/rand/v2"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"
	stpebble "github.com/stategen/stategen/backends/pebble"
)

// heapInUse returns the bytes of live heap after a full collection.
func heapInUse() uint64 {
	goruntime.GC()
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkHeapPerEntry fills a value state of keys entries and reports
// the live Go heap it holds per entry as B/entry. Pebble keeps its data on
// disk and its block cache and memtables outside the Go heap (when cgo is
// available), so pebble and pebble-raw report what stays on the heap.
func BenchmarkHeapPerEntry(b *testing.B) {
	forEachBackend(b, nil, func(b *testing.B, w *workload, f *fixture) {
		var per float64
		for f.loop(b) {
			check(b, f.drop())
			before := heapInUse()
			t := f.get(b)
			fillValues(b, w, t, f.n)
			after := heapInUse()
			per = float64(int64(after)-int64(before)) / float64(f.n)
		}
		b.ReportMetric(per, "B/entry")
	})
}

// BenchmarkGCCycle holds a value state of keys entries and measures full
// garbage collections: ns/op is the wall time of one runtime.GC, and
// gc-cpu-ns/cycle the GC's CPU time per cycle from runtime/metrics.
func BenchmarkGCCycle(b *testing.B) {
	forEachBackend(b, fillValues, func(b *testing.B, w *workload, f *fixture) {
		samples := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/gc/cycles/total:gc-cycles"}}
		goruntime.GC()
		metrics.Read(samples)
		cpu0, cycles0 := samples[0].Value.Float64(), samples[1].Value.Uint64()
		for f.loop(b) {
			goruntime.GC()
		}
		metrics.Read(samples)
		cpu, cycles := samples[0].Value.Float64()-cpu0, samples[1].Value.Uint64()-cycles0
		if cycles > 0 {
			b.ReportMetric(cpu*1e9/float64(cycles), "gc-cpu-ns/cycle")
		}
	})
}

// largeValueSize is the size of an encoded value of BenchmarkLargeState.
const largeValueSize = 100

// largeStateEntries returns the size of BenchmarkLargeState: 10M with
// STATEGEN_BENCH_LARGE=1, else 20K (a smoke run of the same code).
func largeStateEntries() int {
	if os.Getenv("STATEGEN_BENCH_LARGE") == "1" {
		return 10_000_000
	}
	return 20_000
}

// largeFill is what the last fill of BenchmarkLargeState measured.
var largeFill struct {
	rate  float64 // entries/s
	reset bool    // whether the peak RSS was reset before it
}

// fillLarge fills the value state with n values of largeValueSize bytes
// whose paddings are pseudo-random (incompressible, like serialized user
// data at its worst), after resetting the peak RSS.
func fillLarge(b *testing.B, _ *workload, t target, n int) {
	largeFill.reset = resetPeakRSS()
	pads := makePads(largeValueSize - 24)
	t0 := time.Now()
	for i := range n {
		pad := append([]byte(nil), pads[i%len(pads)]...)
		pad[0] = byte(i) // every value distinct
		check(b, t.putValue(int64(i), Val{A: int64(i), Pad: pad}))
	}
	largeFill.rate = float64(n) / time.Since(t0).Seconds()
}

// BenchmarkLargeState fills a value state of 10M entries (8-byte keys,
// 100-byte values: ~1.1 GB of data) on every backend, then measures random
// point reads (ns/op). Pebble stores get the default 64 MiB block cache. It
// reports the fill's throughput (fill-entries/s), the process's peak RSS
// over fill and reads (peak-rss-MiB, with the peak reset before the fill),
// the Go heap in use at the end (go-heap-MiB) and, on Pebble, Pebble's own
// accounting of its memory (block cache and memtables, pebble-mem-MiB) and
// its disk use (disk-MiB). Without STATEGEN_BENCH_LARGE=1 it runs the same
// code on 20K entries.
func BenchmarkLargeState(b *testing.B) {
	forEachCase(b, []int{largeStateEntries()}, nil, fillLarge, func(b *testing.B, w *workload, f *fixture, _ string) {
		t := f.get(b)
		r := rand.New(rand.NewPCG(7, 1))
		for f.loop(b) {
			j := int64(r.IntN(f.n))
			v, ok, err := t.getValue(j)
			if err != nil || !ok || v.A != j || len(v.Pad) != largeValueSize-24 {
				b.Fatalf("value %d: (%d, %d bytes of padding, %v, %v)", j, v.A, len(v.Pad), ok, err)
			}
		}
		var ms goruntime.MemStats
		goruntime.ReadMemStats(&ms)
		b.ReportMetric(largeFill.rate, "fill-entries/s")
		if largeFill.reset {
			b.ReportMetric(float64(peakRSS())/(1<<20), "peak-rss-MiB")
		}
		b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "go-heap-MiB")
		if m := pebbleMetrics(t); m != nil {
			b.ReportMetric(float64(m.BlockCache.Size+int64(m.MemTable.Size))/(1<<20), "pebble-mem-MiB")
			b.ReportMetric(float64(m.DiskSpaceUsage())/(1<<20), "disk-MiB")
		}
	})
}

// pebbleMetrics returns the metrics of a target on Pebble, nil for others.
func pebbleMetrics(t target) *pebbledb.Metrics {
	switch t := t.(type) {
	case *storeTarget:
		if s, ok := t.s.(*stpebble.Store); ok {
			return s.Metrics()
		}
	case *rawPebble:
		return t.db.Metrics()
	}
	return nil
}

// peakRSS returns VmHWM of /proc/self/status in bytes, or 0 where it
// cannot be read.
func peakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				if err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}

// resetPeakRSS returns freed memory to the operating system and resets
// VmHWM to the current RSS (Linux: "5" to /proc/self/clear_refs), so that
// the next peakRSS measures this benchmark rather than the fixtures of
// earlier ones. It reports whether the reset worked.
func resetPeakRSS() bool {
	goruntime.GC()
	debug.FreeOSMemory()
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}
