package benchmarks

// Snapshots on every backend: the synchronous phase, the asynchronous scan,
// writes while snapshots are being scanned, and the first write after a
// snapshot. A snapshot covers the four states of a target; the value state
// holds the entries, the others are empty.

import (
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkSnapshotSync measures the synchronous phase of a snapshot and
// its release, of a value state of keys/100 and of keys entries: cow,
// btree and pebble cost the same at both sizes, the gomap baseline copies
// everything.
func BenchmarkSnapshotSync(b *testing.B) {
	n := load(b).keys
	small := max(64, n/100)
	if small >= 1000 {
		small -= small % 1000 // a round number: 1M/100 is 10K
	}
	forEachCase(b, []int{small, n}, nil, fillValues, func(b *testing.B, w *workload, f *fixture, _ string) {
		t := f.get(b)
		for f.loop(b) {
			s, err := t.snapshot()
			check(b, err)
			check(b, s.release())
		}
	})
}

// BenchmarkSnapshotAsync measures the asynchronous phase: a snapshot of a
// value state of keys entries and a scan of every entry, as the checkpoint
// writer does. It reports entries/s, MB/s of key and value bytes, and the
// synchronous phase of the same snapshot as sync-ns/op.
func BenchmarkSnapshotAsync(b *testing.B) {
	forEachBackend(b, fillValues, func(b *testing.B, w *workload, f *fixture) {
		t := f.get(b)
		var syncNs, entries, size int64
		for f.loop(b) {
			t0 := time.Now()
			s, err := t.snapshot()
			check(b, err)
			syncNs += int64(time.Since(t0))
			e, sz, err := s.scan()
			check(b, err)
			check(b, s.release())
			if e != int64(f.n) {
				b.Fatalf("snapshot of %d entries, want %d", e, f.n)
			}
			entries, size = entries+e, sz
		}
		b.SetBytes(size)
		b.ReportMetric(float64(entries)/b.Elapsed().Seconds(), "entries/s")
		b.ReportMetric(float64(syncNs)/float64(b.N), "sync-ns/op")
	})
}

// BenchmarkPutDuringSnapshot measures ValuePut while snapshots are
// continuously scanned on another goroutine (snapshot=active: as soon as
// one scan ends, the operator takes the next snapshot, which on gomap is a
// copy of the state) and with no snapshot (snapshot=idle). Beside ns/op it
// reports op-cpu-ns/op, the CPU time of the operator's thread alone, which
// separates the cost of the writes (copy-on-write, the synchronous phase)
// from the scanning goroutine's competition for a core, and scans, the
// snapshots scanned.
func BenchmarkPutDuringSnapshot(b *testing.B) {
	forEachCase(b, []int{load(b).keys}, []string{"snapshot=active", "snapshot=idle"}, fillValues, func(b *testing.B, w *workload, f *fixture, c string) {
		putDuringSnapshot(b, w, f, c == "snapshot=active")
	})
}

func putDuringSnapshot(b *testing.B, w *workload, f *fixture, active bool) {
	t, keys := f.get(b), w.order(f.n)
	snaps := make(chan frozen, 1)
	var idle atomic.Bool
	idle.Store(true)
	var scans atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	wg.Go(func() {
		for s := range snaps {
			_, _, err := s.scan()
			if rerr := s.release(); err == nil {
				err = rerr
			}
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
			scans.Add(1)
			idle.Store(true)
		}
	})
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	c0 := threadCPU()
	for i := 0; f.loop(b); i++ {
		if active && i%256 == 0 && idle.Load() {
			idle.Store(false)
			s, err := t.snapshot()
			check(b, err)
			snaps <- s
		}
		check(b, t.putValue(keys[i%len(keys)], w.val(i)))
	}
	b.ReportMetric(float64(threadCPU()-c0)/float64(b.N), "op-cpu-ns/op")
	close(snaps)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	if active {
		b.ReportMetric(float64(scans.Load()), "scans")
	}
}

// firstPutEntries is the size of the map of BenchmarkMapFirstPutAfterSnapshot.
const firstPutEntries = 10_000

// fillOneMap fills key 0 of the map state and of the sorted map state with
// n entries each.
func fillOneMap(b *testing.B, w *workload, t target, n int) {
	for _, uk := range perm(n, 3) {
		check(b, t.putMap(0, uk, w.fresh(int(uk))))
		check(b, t.putSorted(0, uk, w.fresh(int(uk))))
	}
}

// BenchmarkMapFirstPutAfterSnapshot measures a Put into a key's
// 10,000-entry map (kind=map) or sorted map (kind=sortedmap): put=first
// right after a snapshot that stays live during the Put (on cow, the Put
// copies what the snapshot sees), put=ordinary after a snapshot that was
// released before the Put, put=nosnapshot with none. ns/put is the Put
// alone; ns/op includes taking and releasing the snapshot.
func BenchmarkMapFirstPutAfterSnapshot(b *testing.B) {
	var cases []string
	for _, kind := range []string{"map", "sortedmap"} {
		for _, mode := range []string{"first", "ordinary", "nosnapshot"} {
			cases = append(cases, "kind="+kind+"/put="+mode)
		}
	}
	forEachCase(b, []int{firstPutEntries}, cases, fillOneMap, func(b *testing.B, w *workload, f *fixture, c string) {
		t := f.get(b)
		put := t.putMap
		if strings.HasPrefix(c, "kind=sortedmap/") {
			put = t.putSorted
		}
		firstPut(b, w, f, put, c[strings.LastIndex(c, "=")+1:])
	})
}

func firstPut(b *testing.B, w *workload, f *fixture, put func(k, uk int64, v Val) error, mode string) {
	t := f.get(b)
	ukeys := perm(firstPutEntries, 5)
	var total time.Duration
	for i := 0; f.loop(b); i++ {
		var s frozen
		if mode != "nosnapshot" {
			var err error
			s, err = t.snapshot()
			check(b, err)
			if mode == "ordinary" {
				check(b, s.release())
			}
		}
		t0 := time.Now()
		err := put(0, ukeys[i%len(ukeys)], w.val(i))
		total += time.Since(t0)
		check(b, err)
		if mode == "first" {
			check(b, s.release())
		}
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/put")
}
