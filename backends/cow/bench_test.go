package cow

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	goruntime "runtime"
	"syscall"
	"testing"

	"github.com/stategen/stategen/runtime"
)

// These benchmarks isolate the byte-level cost of the backend, without the
// typed handles: the cross-backend benchmarks are in package benchmarks.

func benchKeys(n int) []runtime.Key {
	keys := make([]runtime.Key, n)
	for i, p := range rand.New(rand.NewPCG(1, 2)).Perm(n) {
		k := binary.BigEndian.AppendUint64(nil, uint64(p)^1<<63)
		keys[i] = runtime.MakeKey(k, nil, runtime.DefaultMaxParallelism)
	}
	return keys
}

func benchValueStore(b *testing.B, keys []runtime.Key) (*Store, valueState) {
	s, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	st, err := s.Register(runtime.StateSpec{Name: "v", Kind: runtime.KindValue})
	if err != nil {
		b.Fatal(err)
	}
	v := st.(valueState)
	val := make([]byte, 24)
	for _, k := range keys {
		if err := v.Put(k, val); err != nil {
			b.Fatal(err)
		}
	}
	return s, v
}

// threadCPU returns the CPU time of the calling thread so far.
func threadCPU() int64 {
	const rusageThread = 1
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// cpuMetric reports the benchmark goroutine's CPU time per op as
// op-cpu-ns/op when the returned function is called: on a busy machine it
// is steadier than the wall time.
func cpuMetric(b *testing.B) func() {
	goruntime.LockOSThread()
	c0 := threadCPU()
	return func() {
		b.ReportMetric(float64(threadCPU()-c0)/float64(b.N), "op-cpu-ns/op")
		goruntime.UnlockOSThread()
	}
}

// BenchmarkPutUnderSnapshot overwrites random keys of a 1M-key value state
// with no snapshot (idle), and with a snapshot live that nobody reads,
// replaced by a new one every window Puts (held): the writer's share of
// the cost of a snapshot being written.
func BenchmarkPutUnderSnapshot(b *testing.B) {
	const n = 1 << 20
	keys := benchKeys(n)
	s, v := benchValueStore(b, keys)
	val := make([]byte, 24)
	for _, window := range []int{0, 1 << 16, 1 << 18} {
		name := "idle"
		if window > 0 {
			name = fmt.Sprintf("held/window=%d", window)
		}
		b.Run(name, func(b *testing.B) {
			defer cpuMetric(b)()
			var snap runtime.Snapshot
			for i := 0; i < b.N; i++ {
				if window > 0 && i%window == 0 {
					if snap != nil {
						_ = snap.Release()
					}
					var err error
					if snap, err = s.Snapshot(); err != nil {
						b.Fatal(err)
					}
				}
				val[0] = byte(i)
				if err := v.Put(keys[i&(n-1)], val); err != nil {
					b.Fatal(err)
				}
			}
			if snap != nil {
				_ = snap.Release()
			}
		})
	}
}

// BenchmarkGet reads random keys of a 1M-key value state (the keys are in
// random order, so reading them in turn reads the table at random).
func BenchmarkGet(b *testing.B) {
	const n = 1 << 20
	keys := benchKeys(n)
	_, v := benchValueStore(b, keys)
	b.ResetTimer()
	defer cpuMetric(b)()
	for i := 0; i < b.N; i++ {
		if _, ok, _ := v.Get(keys[i&(n-1)]); !ok {
			b.Fatal("missing")
		}
	}
}

// BenchmarkScan scans every entry of a snapshot of a 1M-key value state.
func BenchmarkScan(b *testing.B) {
	const n = 1 << 20
	s, _ := benchValueStore(b, benchKeys(n))
	b.ResetTimer()
	defer cpuMetric(b)()
	for i := 0; i < b.N; i++ {
		snap, err := s.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		c := 0
		for kg := range runtime.DefaultMaxParallelism {
			if err := snap.Scan("v", kg, func(e runtime.Entry) error { c += len(e.Value); return nil }); err != nil {
				b.Fatal(err)
			}
		}
		_ = snap.Release()
		if c != 24*n {
			b.Fatal(c)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}

// processCPU returns the CPU time of the whole process so far.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkRestore restores a snapshot of a 1M-key value state into an
// empty store, loading on concurrency goroutines: the bulk loader alone
// (a snapshot's Scan is cheap), sequential and parallel. cpu-ns/op is the
// process's CPU time: compare it with the wall time for the parallelism
// achieved, and with concurrency=1 for the cost of running in parallel.
func BenchmarkRestore(b *testing.B) {
	const n = 1 << 20
	src, _ := benchValueStore(b, benchKeys(n))
	snap, err := src.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	defer snap.Release()
	for _, c := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("concurrency=%d", c), func(b *testing.B) {
			goruntime.GC()
			b.ResetTimer()
			c0 := processCPU()
			for i := 0; i < b.N; i++ {
				s, err := New(Options{RestoreConcurrency: c})
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Restore(snap); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU()-c0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
		})
	}
}

// BenchmarkMapUpdate increments random entries of four maps of 1,000
// int64 user keys each, through the one-lookup Update (Nexmark q5's
// pattern: a count per auction in a map per window).
func BenchmarkMapUpdate(b *testing.B) {
	s, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	st, err := s.Register(runtime.StateSpec{Name: "m", Kind: runtime.KindMap})
	if err != nil {
		b.Fatal(err)
	}
	m := st.(mapState)
	keys := benchKeys(4)
	const entries = 1000
	uks := make([][]byte, entries)
	for i := range uks {
		uks[i] = binary.BigEndian.AppendUint64(nil, uint64(i*7919)^1<<63)
	}
	one := []byte{1}
	for _, k := range keys {
		for _, uk := range uks {
			if err := m.Put(k, uk, one); err != nil {
				b.Fatal(err)
			}
		}
	}
	var nv [1]byte
	inc := func(old []byte, found bool) ([]byte, error) {
		if found {
			nv[0] = old[0] + 1
			return nv[:], nil
		}
		return one, nil
	}
	rng := rand.New(rand.NewPCG(5, 6))
	order := make([]int, 1<<16)
	for i := range order {
		order[i] = rng.IntN(entries * len(keys))
	}
	b.ResetTimer()
	defer cpuMetric(b)()
	for i := range b.N {
		j := order[i&(len(order)-1)]
		if err := m.Update(keys[j&3], uks[j>>2], inc); err != nil {
			b.Fatal(err)
		}
	}
}
