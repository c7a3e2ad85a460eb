package benchmarks

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	goruntime "runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/runtime"
)

// Val24 is the benchmarks' value: 24 bytes of plain data.
type Val24 struct{ A, B, C int64 }

// val24Codec encodes a Val24 as 24 little-endian bytes.
type val24Codec struct{}

func (val24Codec) AppendValue(dst []byte, v Val24) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, uint64(v.A))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(v.B))
	return binary.LittleEndian.AppendUint64(dst, uint64(v.C))
}

func (val24Codec) DecodeValue(src []byte) (Val24, []byte, error) {
	if len(src) < 24 {
		return Val24{}, src, fmt.Errorf("%w: Val24 needs 24 bytes, have %d", runtime.ErrCorrupt, len(src))
	}
	return Val24{
		A: int64(binary.LittleEndian.Uint64(src)),
		B: int64(binary.LittleEndian.Uint64(src[8:])),
		C: int64(binary.LittleEndian.Uint64(src[16:])),
	}, src[24:], nil
}

const (
	defaultKeys = 1 << 20 // "1M"
	shortKeys   = 10_000
)

// benchKeys returns the number of keys of the per-key workloads: 1M, 10K
// for a smoke run (-short, or -benchtime=Nx with N <= 10, where every
// benchmark runs once and building 1M-key fixtures would dominate), or
// STATEGEN_BENCH_KEYS.
func benchKeys(b *testing.B) int {
	if s := os.Getenv("STATEGEN_BENCH_KEYS"); s != "" {
		n, err := parseSize(s)
		if err != nil || n < 64 {
			b.Fatalf("STATEGEN_BENCH_KEYS=%q: want a number of at least 64, like 10K or 1M", s)
		}
		return n
	}
	if testing.Short() || smokeRun() {
		return shortKeys
	}
	return defaultKeys
}

// smokeRun reports whether -benchtime asks for at most 10 iterations.
func smokeRun() bool {
	f := flag.Lookup("test.benchtime")
	if f == nil {
		return false
	}
	s := f.Value.String()
	if !strings.HasSuffix(s, "x") {
		return false
	}
	n, err := strconv.Atoi(strings.TrimSuffix(s, "x"))
	return err == nil && n <= 10
}

// scaled scales a fixed size of the 1M-key configuration to the configured
// number of keys.
func scaled(b *testing.B, n int) int {
	return max(64, int(int64(n)*int64(benchKeys(b))/defaultKeys))
}

func parseSize(s string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1000, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	}
	n, err := strconv.Atoi(s)
	return n * mult, err
}

// sizeName formats n for a benchmark name: 10K, 100K, 1M, 4M.
func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dK", n/1000)
	}
	return strconv.Itoa(n)
}

// lazy returns a function that builds a fixture on its first call, so that
// a filtered run builds only the fixtures it needs, once per benchmark.
func lazy[T any](build func() T) func() T {
	var once sync.Once
	var v T
	return func() T {
		once.Do(func() { v = build() })
		return v
	}
}

func check(b *testing.B, err error) {
	if err != nil {
		b.Fatal(err)
	}
}

func newCow(b *testing.B) *cow.Store {
	s, err := cow.New(cow.Options{})
	check(b, err)
	return s
}

func val(i int) Val24 { return Val24{int64(i), int64(i) * 3, int64(i) * 7} }

// perm returns a random permutation of [0, n) as int64 keys, the access
// pattern of every benchmark.
func perm(n int, seed uint64) []int64 {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]int64, n)
	for i, p := range r.Perm(n) {
		out[i] = int64(p)
	}
	return out
}

var sink Val24

// both runs fn's cow and gomap variants under backend=cow|gomap/<param>,
// reporting each one's process CPU time per op as cpu-ns/op beside the
// wall time: on a shared machine the CPU time is the steadier of the two.
func both(b *testing.B, param string, cowFn, mapFn func(b *testing.B)) {
	b.Run("backend=cow", func(b *testing.B) { b.Run(param, withCPU(cowFn)) })
	b.Run("backend=gomap", func(b *testing.B) { b.Run(param, withCPU(mapFn)) })
}

func withCPU(fn func(b *testing.B)) func(b *testing.B) {
	return func(b *testing.B) {
		c0 := cpuTime()
		fn(b)
		b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
	}
}

// threadCPU returns the CPU time of the calling thread so far: with the
// goroutine locked to its thread, the CPU time of the operator alone.
func threadCPU() int64 {
	const rusageThread = 1
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// cpuTime returns the user and system CPU time of the process so far.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

type cowValues struct {
	s *cow.Store
	v runtime.Value[int64, Val24]
}

func buildCowValues(b *testing.B, keys []int64) cowValues {
	s := newCow(b)
	v, err := runtime.NewValue(s, runtime.ValueDescriptor[int64, Val24]{Name: "v", Key: runtime.Int64Codec{}, Value: val24Codec{}})
	check(b, err)
	for _, k := range keys {
		check(b, v.Put(k, val(int(k))))
	}
	return cowValues{s, v}
}

func buildMapValues(keys []int64) map[int64]Val24 {
	m := make(map[int64]Val24)
	for _, k := range keys {
		m[k] = val(int(k))
	}
	return m
}

func BenchmarkValueGet(b *testing.B) {
	n := benchKeys(b)
	keys := perm(n, 1)
	order := perm(n, 2)
	cw := lazy(func() cowValues { return buildCowValues(b, keys) })
	gm := lazy(func() map[int64]Val24 { return buildMapValues(keys) })
	both(b, "keys="+sizeName(n), func(b *testing.B) {
		v := cw().v
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			x, ok, err := v.Get(order[i%n])
			if !ok || err != nil {
				b.Fatal("missing", err)
			}
			sink = x
		}
	}, func(b *testing.B) {
		m := gm()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			x, ok := m[order[i%n]]
			if !ok {
				b.Fatal("missing")
			}
			sink = x
		}
	})
}

func BenchmarkValuePut(b *testing.B) {
	n := benchKeys(b)
	keys := perm(n, 1)
	order := perm(n, 2)
	cw := lazy(func() cowValues { return buildCowValues(b, keys) })
	gm := lazy(func() map[int64]Val24 { return buildMapValues(keys) })
	both(b, "keys="+sizeName(n), func(b *testing.B) {
		v := cw().v
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := v.Put(order[i%n], val(i)); err != nil {
				b.Fatal(err)
			}
		}
	}, func(b *testing.B) {
		m := gm()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			m[order[i%n]] = val(i)
		}
	})
}

// BenchmarkValuePutInsert inserts new keys into a store (or map) that grows
// from empty to keys entries, then starts over with an empty one.
func BenchmarkValuePutInsert(b *testing.B) {
	n := benchKeys(b)
	keys := perm(n, 1)
	both(b, "keys="+sizeName(n), func(b *testing.B) {
		var fx cowValues
		for i := 0; i < b.N; i++ {
			if i%n == 0 {
				b.StopTimer()
				fx = buildCowValues(b, nil)
				b.StartTimer()
			}
			if err := fx.v.Put(keys[i%n], val(i)); err != nil {
				b.Fatal(err)
			}
		}
	}, func(b *testing.B) {
		var m map[int64]Val24
		for i := 0; i < b.N; i++ {
			if i%n == 0 {
				b.StopTimer()
				m = make(map[int64]Val24)
				b.StartTimer()
			}
			m[keys[i%n]] = val(i)
		}
	})
}

func newCowList(b *testing.B, s *cow.Store) runtime.List[int64, Val24] {
	l, err := runtime.NewList(s, runtime.ListDescriptor[int64, Val24]{Name: "l", Key: runtime.Int64Codec{}, Value: val24Codec{}})
	check(b, err)
	return l
}

// BenchmarkListAdd appends to the lists of random keys, starting from an
// empty store.
func BenchmarkListAdd(b *testing.B) {
	n := benchKeys(b)
	order := perm(n, 2)
	both(b, "keys="+sizeName(n), func(b *testing.B) {
		l := newCowList(b, newCow(b))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := l.Add(order[i%n], val(i)); err != nil {
				b.Fatal(err)
			}
		}
	}, func(b *testing.B) {
		m := make(map[int64][]Val24)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			k := order[i%n]
			m[k] = append(m[k], val(i))
		}
	})
}

const listLen = 4

// BenchmarkListGet reads the whole 4-element list of a random key.
func BenchmarkListGet(b *testing.B) {
	n := benchKeys(b)
	keys := perm(n, 1)
	order := perm(n, 2)
	cw := lazy(func() runtime.List[int64, Val24] {
		l := newCowList(b, newCow(b))
		for j := range listLen {
			for _, k := range keys {
				check(b, l.Add(k, val(int(k)+j)))
			}
		}
		return l
	})
	gm := lazy(func() map[int64][]Val24 {
		m := make(map[int64][]Val24)
		for j := range listLen {
			for _, k := range keys {
				m[k] = append(m[k], val(int(k)+j))
			}
		}
		return m
	})
	both(b, "keys="+sizeName(n), func(b *testing.B) {
		l := cw()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			c := 0
			for x, err := range l.All(order[i%n]) {
				if err != nil {
					b.Fatal(err)
				}
				sink = x
				c++
			}
			if c != listLen {
				b.Fatalf("list of %d elements", c)
			}
		}
	}, func(b *testing.B) {
		m := gm()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			c := 0
			for _, x := range m[order[i%n]] {
				sink = x
				c++
			}
			if c != listLen {
				b.Fatalf("list of %d elements", c)
			}
		}
	})
}

// mapFanout is the number of user keys per key in the map benchmarks: keys
// entries in keys/mapFanout maps.
const mapFanout = 16

type mapFixture struct {
	s  runtime.Store
	m  runtime.Map[int64, int64, Val24]
	sm runtime.SortedMap[int64, int64, Val24]
}

// fillMaps registers a Map (or, if sorted, a SortedMap) state on s and fills
// it with n entries, fanout user keys per key, in random order. Every
// backend's map benchmarks share it.
func fillMaps(b *testing.B, s runtime.Store, n, fanout int, sorted bool) mapFixture {
	d := runtime.MapDescriptor[int64, int64, Val24]{Name: "m", Key: runtime.Int64Codec{}, UserKey: runtime.Int64Codec{}, Value: val24Codec{}}
	fx := mapFixture{s: s}
	var err error
	put := func(k, uk int64, v Val24) error { return fx.m.Put(k, uk, v) }
	if sorted {
		fx.sm, err = runtime.NewSortedMap(s, d)
		put = func(k, uk int64, v Val24) error { return fx.sm.Put(k, uk, v) }
	} else {
		fx.m, err = runtime.NewMap(s, d)
	}
	check(b, err)
	for _, e := range perm(n, 3) {
		k, uk := e/int64(fanout), e%int64(fanout)
		check(b, put(k, uk, val(int(e))))
	}
	return fx
}

func buildCowMaps(b *testing.B, n, fanout int, sorted bool) mapFixture {
	return fillMaps(b, newCow(b), n, fanout, sorted)
}

func buildGoMaps(n, fanout int) map[int64]map[int64]Val24 {
	m := make(map[int64]map[int64]Val24)
	for _, e := range perm(n, 3) {
		k, uk := e/int64(fanout), e%int64(fanout)
		in := m[k]
		if in == nil {
			in = make(map[int64]Val24)
			m[k] = in
		}
		in[uk] = val(int(e))
	}
	return m
}

func BenchmarkMapPut(b *testing.B) {
	n := benchKeys(b)
	order := perm(n, 2)
	cw := lazy(func() mapFixture { return buildCowMaps(b, n, mapFanout, false) })
	gm := lazy(func() map[int64]map[int64]Val24 { return buildGoMaps(n, mapFanout) })
	both(b, "keys="+sizeName(n), func(b *testing.B) {
		m := cw().m
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			e := order[i%n]
			if err := m.Put(e/mapFanout, e%mapFanout, val(i)); err != nil {
				b.Fatal(err)
			}
		}
	}, func(b *testing.B) {
		m := gm()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			e := order[i%n]
			in := m[e/mapFanout]
			if in == nil {
				in = make(map[int64]Val24)
				m[e/mapFanout] = in
			}
			in[e%mapFanout] = val(i)
		}
	})
}

func BenchmarkMapGet(b *testing.B) {
	n := benchKeys(b)
	order := perm(n, 2)
	cw := lazy(func() mapFixture { return buildCowMaps(b, n, mapFanout, false) })
	gm := lazy(func() map[int64]map[int64]Val24 { return buildGoMaps(n, mapFanout) })
	both(b, "keys="+sizeName(n), func(b *testing.B) {
		m := cw().m
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			e := order[i%n]
			x, ok, err := m.Get(e/mapFanout, e%mapFanout)
			if !ok || err != nil {
				b.Fatal("missing", err)
			}
			sink = x
		}
	}, func(b *testing.B) {
		m := gm()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			e := order[i%n]
			x, ok := m[e/mapFanout][e%mapFanout]
			if !ok {
				b.Fatal("missing")
			}
			sink = x
		}
	})
}

// BenchmarkMapIterate reads every entry of a random key's 16-entry map.
func BenchmarkMapIterate(b *testing.B) {
	n := benchKeys(b)
	outer := n / mapFanout
	order := perm(outer, 2)
	cw := lazy(func() mapFixture { return buildCowMaps(b, n, mapFanout, false) })
	gm := lazy(func() map[int64]map[int64]Val24 { return buildGoMaps(n, mapFanout) })
	both(b, "keys="+sizeName(n), func(b *testing.B) {
		m := cw().m
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			c := 0
			for e, err := range m.All(order[i%outer]) {
				if err != nil {
					b.Fatal(err)
				}
				sink = e.Value
				c++
			}
			if c != mapFanout {
				b.Fatalf("map of %d entries", c)
			}
		}
	}, func(b *testing.B) {
		m := gm()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			c := 0
			for _, v := range m[order[i%outer]] {
				sink = v
				c++
			}
			if c != mapFanout {
				b.Fatalf("map of %d entries", c)
			}
		}
	})
}

const (
	sortedFanout = 64 // user keys per key in BenchmarkSortedMapRange
	rangeLen     = 16 // entries per range
)

// BenchmarkSortedMapRange reads 16 consecutive entries of a random key's
// 64-entry sorted map. The gomap baseline, a map of maps, has no order: it
// collects the user keys in the range and sorts them on every call, which
// is what a sorted map saves.
func BenchmarkSortedMapRange(b *testing.B) {
	n := benchKeys(b)
	outer := n / sortedFanout
	order := perm(outer, 2)
	starts := perm(sortedFanout-rangeLen, 4)
	cw := lazy(func() mapFixture { return buildCowMaps(b, n, sortedFanout, true) })
	gm := lazy(func() map[int64]map[int64]Val24 { return buildGoMaps(n, sortedFanout) })
	both(b, "keys="+sizeName(n), func(b *testing.B) {
		sm := cw().sm
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			from := starts[i%len(starts)]
			c := 0
			for e, err := range sm.Range(order[i%outer], from, from+rangeLen) {
				if err != nil {
					b.Fatal(err)
				}
				sink = e.Value
				c++
			}
			if c != rangeLen {
				b.Fatalf("range of %d entries", c)
			}
		}
	}, func(b *testing.B) {
		m := gm()
		uks := make([]int64, 0, sortedFanout)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			from := starts[i%len(starts)]
			in := m[order[i%outer]]
			uks = uks[:0]
			for uk := range in {
				if uk >= from && uk < from+rangeLen {
					uks = append(uks, uk)
				}
			}
			slices.Sort(uks)
			for _, uk := range uks {
				sink = in[uk]
			}
			if len(uks) != rangeLen {
				b.Fatalf("range of %d entries", len(uks))
			}
		}
	})
}

// scanAll reads every entry of every state and key group of v and returns
// the number of entries and their bytes (key, namespace, user key, value).
func scanAll(v runtime.View) (entries, bytes int64, err error) {
	for _, spec := range v.States() {
		for kg := range v.KeyGroups().All() {
			err = v.Scan(spec.Name, kg, func(e runtime.Entry) error {
				entries++
				bytes += int64(len(e.Key) + len(e.Namespace) + len(e.UserKey) + len(e.Value))
				return nil
			})
			if err != nil {
				return
			}
		}
	}
	return
}

// BenchmarkSnapshotSync measures the synchronous phase of a snapshot (and
// its release) of a value state with the given number of entries.
func BenchmarkSnapshotSync(b *testing.B) {
	b.Run("backend=cow", func(b *testing.B) {
		for _, n := range []int{10_000, 100_000, 1 << 20, 4 << 20} {
			n := scaled(b, n)
			fx := lazy(func() cowValues { return buildCowValues(b, perm(n, 1)) })
			b.Run("entries="+sizeName(n), func(b *testing.B) {
				s := fx().s
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					snap, err := s.Snapshot()
					check(b, err)
					check(b, snap.Release())
				}
			})
		}
	})
}

// BenchmarkSnapshotAsync measures the asynchronous phase: a scan of every
// entry of a snapshot. It reports entries/s, MB/s (of key and value bytes)
// and, for the sync-phase target, the synchronous phase of the same
// snapshot as sync-ns/op.
func BenchmarkSnapshotAsync(b *testing.B) {
	n := benchKeys(b)
	fx := lazy(func() cowValues { return buildCowValues(b, perm(n, 1)) })
	b.Run("backend=cow", func(b *testing.B) {
		b.Run("entries="+sizeName(n), func(b *testing.B) {
			s := fx().s
			var syncNs, entries, size int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				snap, err := s.Snapshot()
				check(b, err)
				syncNs += int64(time.Since(t0))
				e, sz, err := scanAll(snap)
				check(b, err)
				check(b, snap.Release())
				entries, size = entries+e, sz
			}
			b.SetBytes(size)
			b.ReportMetric(float64(entries)/b.Elapsed().Seconds(), "entries/s")
			b.ReportMetric(float64(syncNs)/float64(b.N), "sync-ns/op")
		})
	})
}

// BenchmarkPutDuringSnapshot measures Put (overwrite of random keys) while
// snapshots are continuously being scanned on another goroutine
// (snapshot=active: as soon as one scan ends, the operator takes the next
// snapshot) and with no snapshot (snapshot=idle).
func BenchmarkPutDuringSnapshot(b *testing.B) {
	n := benchKeys(b)
	keys := perm(n, 1)
	order := perm(n, 2)
	fx := lazy(func() cowValues { return buildCowValues(b, keys) })
	b.Run("backend=cow", func(b *testing.B) {
		for _, mode := range []string{"active", "idle"} {
			b.Run("keys="+sizeName(n)+"/snapshot="+mode, func(b *testing.B) {
				s, v := fx().s, fx().v
				snaps := make(chan runtime.Snapshot, 1)
				var idle atomic.Bool
				idle.Store(true)
				var scans atomic.Int64
				var wg sync.WaitGroup
				errs := make(chan error, 1)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for snap := range snaps {
						_, _, err := scanAll(snap)
						if rerr := snap.Release(); err == nil {
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
				}()
				goruntime.LockOSThread()
				defer goruntime.UnlockOSThread()
				c0 := threadCPU()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if mode == "active" && i%256 == 0 && idle.Load() {
						idle.Store(false)
						snap, err := s.Snapshot()
						check(b, err)
						snaps <- snap
					}
					if err := v.Put(order[i%n], val(i)); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(threadCPU()-c0)/float64(b.N), "op-cpu-ns/op")
				close(snaps)
				wg.Wait()
				select {
				case err := <-errs:
					b.Fatal(err)
				default:
				}
				if mode == "active" {
					b.ReportMetric(float64(scans.Load()), "scans")
				}
			})
		}
	})
}

// heapInUse returns the bytes of live heap after a full collection.
func heapInUse() uint64 {
	goruntime.GC()
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkHeapPerEntry builds a value state (or map) of keys entries and
// reports the live heap it holds per entry as B/entry.
func BenchmarkHeapPerEntry(b *testing.B) {
	n := benchKeys(b)
	keys := perm(n, 1)
	report := func(b *testing.B, build func() any) {
		var per float64
		for i := 0; i < b.N; i++ {
			before := heapInUse()
			x := build()
			after := heapInUse()
			goruntime.KeepAlive(x)
			per = float64(int64(after)-int64(before)) / float64(n)
		}
		b.ReportMetric(per, "B/entry")
	}
	both(b, "entries="+sizeName(n), func(b *testing.B) {
		report(b, func() any { return buildCowValues(b, keys) })
	}, func(b *testing.B) {
		report(b, func() any { return buildMapValues(keys) })
	})
}

// BenchmarkGCCycle holds a value state (or map) of 4M entries and measures
// full garbage collections: ns/op is the wall time of one runtime.GC, and
// gc-cpu-ns/cycle the GC CPU time per cycle from runtime/metrics.
func BenchmarkGCCycle(b *testing.B) {
	n := scaled(b, 4<<20)
	keys := perm(n, 1)
	run := func(b *testing.B, build func() any) {
		x := build()
		samples := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/gc/cycles/total:gc-cycles"}}
		goruntime.GC()
		metrics.Read(samples)
		cpu0, cycles0 := samples[0].Value.Float64(), samples[1].Value.Uint64()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			goruntime.GC()
		}
		b.StopTimer()
		metrics.Read(samples)
		cpu, cycles := samples[0].Value.Float64()-cpu0, samples[1].Value.Uint64()-cycles0
		goruntime.KeepAlive(x)
		if cycles > 0 {
			b.ReportMetric(cpu*1e9/float64(cycles), "gc-cpu-ns/cycle")
		}
	}
	both(b, "entries="+sizeName(n), func(b *testing.B) {
		run(b, func() any { return buildCowValues(b, keys) })
	}, func(b *testing.B) {
		run(b, func() any { return buildMapValues(keys) })
	})
}

// BenchmarkMapFirstPutAfterSnapshot measures a Put into a key's 10,000-entry
// map: put=first right after a snapshot that stays live during the Put (so
// the Put copies what the snapshot sees), put=ordinary after the snapshot
// is released (copy-on-write off). Both take and release a snapshot per
// iteration outside the timed Put; ns/put is the Put alone.
func BenchmarkMapFirstPutAfterSnapshot(b *testing.B) {
	const entries = 10_000
	for _, kind := range []string{"map", "sortedmap"} {
		fx := lazy(func() mapFixture { return buildCowMaps(b, entries, entries, kind == "sortedmap") })
		for _, mode := range []string{"first", "ordinary"} {
			b.Run("backend=cow/entries=10K/kind="+kind+"/put="+mode, func(b *testing.B) {
				f := fx()
				put := f.m.Put
				if kind == "sortedmap" {
					put = f.sm.Put
				}
				ukeys := perm(entries, 5)
				st := f.s
				var total time.Duration
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					snap, err := st.Snapshot()
					check(b, err)
					if mode == "ordinary" {
						check(b, snap.Release())
					}
					t0 := time.Now()
					err = put(0, ukeys[i%entries], val(i))
					total += time.Since(t0)
					check(b, err)
					if mode == "first" {
						check(b, snap.Release())
					}
				}
				b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/put")
			})
		}
	}
}
