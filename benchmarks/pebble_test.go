package benchmarks

// Benchmarks of backends/pebble, beside a rawpebble baseline that makes the
// same Pebble calls (Get, Set, Merge, bounded iterators, NewSnapshot) on
// the same encoded bytes — the backend's key layout (key group, state id,
// length-prefixed key and namespace, user key) and its list encoding — on a
// database opened with the same options (pebble.Options.PebbleOptions), so
// that pebble/rawpebble is the cost of the backend itself: the typed
// handles' encoding and decoding are paid by both, the Store contract's
// checks, the copy of a Get's value and the snapshot bookkeeping by the
// backend alone.
//
//	BenchmarkPebbleValueGet/backend=pebble/keys=1M
//	BenchmarkPebbleValueGet/backend=rawpebble/keys=1M
//
// The workloads, sizes and helpers are those of cow_test.go (random int64
// keys, 24-byte values, 1M keys, 10K under -short or STATEGEN_BENCH_KEYS);
// Go allows one BenchmarkValueGet per package, hence the Pebble prefix. To
// put pebble, btree and cow in one table, drop the prefixes:
//
//	go test -run='^$' -bench='ValueGet' -count=6 ./benchmarks | sed -E 's/^Benchmark(Pebble|Btree)/Benchmark/' > all.txt
//	benchstat -col /backend all.txt
//
// Working directories are on the real disk (under the benchmark's
// TempDir), with the default options: 64 MiB block cache, 8 MiB
// memtables, no write-ahead log. BenchmarkPebbleLargeState holds 10M
// entries of ~100-byte values with STATEGEN_BENCH_LARGE=1 (and a tiny
// store otherwise) and reports peak RSS beside Go's heap and Pebble's own
// memory accounting.

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"
	stpebble "github.com/stategen/stategen/backends/pebble"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
)

// pebbleBoth runs fn's pebble and rawpebble variants under
// backend=pebble|rawpebble/<param>, with cpu-ns/op beside the wall time.
func pebbleBoth(b *testing.B, param string, pbFn, rawFn func(b *testing.B)) {
	b.Run("backend=pebble", func(b *testing.B) { b.Run(param, withCPU(pbFn)) })
	b.Run("backend=rawpebble", func(b *testing.B) { b.Run(param, withCPU(rawFn)) })
}

// pebbleOpts returns the options of a benchmark store in a new directory
// under top's TempDir (top is the top-level benchmark, whose directory
// outlives the sub-benchmarks that share a fixture).
func pebbleOpts(top *testing.B, cfg runtime.StoreConfig) stpebble.Options {
	return stpebble.Options{StoreConfig: cfg, Dir: filepath.Join(top.TempDir(), "store")}
}

// newPebble opens a store with opts and closes it when top ends.
func newPebble(top, b *testing.B, opts stpebble.Options) *stpebble.Store {
	s, err := stpebble.New(opts)
	check(b, err)
	top.Cleanup(func() { s.Close() })
	return s
}

// The rawpebble baseline.

type rawPebble struct {
	db         *pebbledb.DB
	closed     bool
	kb, ik, vb []byte // encoded key, Pebble key, encoded value
	lo, hi     []byte // iteration bounds
}

// close closes the database; a second call does nothing.
func (r *rawPebble) close(b *testing.B) {
	if !r.closed {
		r.closed = true
		check(b, r.db.Close())
	}
}

// openRawPebble opens a database with the options of a default store, in a
// new directory under top's TempDir, closed when top ends. (The Cleanups
// of a sub-benchmark run after each of its rounds: fixtures shared by the
// rounds belong to the top-level benchmark.)
func openRawPebble(top, b *testing.B) *rawPebble {
	po, err := stpebble.Options{}.PebbleOptions()
	check(b, err)
	db, err := pebbledb.Open(filepath.Join(top.TempDir(), "raw"), po)
	check(b, err)
	r := &rawPebble{db: db}
	top.Cleanup(func() { r.close(top) })
	return r
}

// rawPebbleKey appends the backend's Pebble key of (kg, state id 0, key,
// ns): the first state registered in a store has id 0.
func rawPebbleKey(dst []byte, kg int, key, ns []byte) []byte {
	dst = append(dst, byte(kg>>8), byte(kg), 0)
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = append(dst, key...)
	dst = binary.AppendUvarint(dst, uint64(len(ns)))
	return append(dst, ns...)
}

// key encodes k, hashes it once, and builds the Pebble key of (k, no
// namespace) in r.ik, as the typed handles and the backend do.
func (r *rawPebble) key(k int64) []byte {
	r.kb = runtime.Int64Codec{}.AppendKey(r.kb[:0], k)
	kg := runtime.KeyGroupOfHash(runtime.HashKey(r.kb), runtime.DefaultMaxParallelism)
	r.ik = rawPebbleKey(r.ik[:0], kg, r.kb, nil)
	return r.ik
}

func (r *rawPebble) mapKey(k, uk int64) []byte {
	r.ik = runtime.Int64Codec{}.AppendKey(r.key(k), uk)
	return r.ik
}

func (r *rawPebble) put(b *testing.B, k int64, v Val24) {
	r.vb = val24Codec{}.AppendValue(r.vb[:0], v)
	check(b, r.db.Set(r.key(k), r.vb, pebbledb.NoSync))
}

// getKey reads ik and decodes its value.
func (r *rawPebble) getKey(b *testing.B, ik []byte) (Val24, bool) {
	v, closer, err := r.db.Get(ik)
	if errors.Is(err, pebbledb.ErrNotFound) {
		return Val24{}, false
	}
	check(b, err)
	x, _, err := val24Codec{}.DecodeValue(v)
	check(b, err)
	check(b, closer.Close())
	return x, true
}

func (r *rawPebble) get(b *testing.B, k int64) (Val24, bool) { return r.getKey(b, r.key(k)) }

// add appends v to k's list: a merge operand of v with its uvarint length.
func (r *rawPebble) add(b *testing.B, k int64, v Val24) {
	r.vb = append(r.vb[:0], 24)
	r.vb = val24Codec{}.AppendValue(r.vb, v)
	check(b, r.db.Merge(r.key(k), r.vb, pebbledb.NoSync))
}

// list calls fn with every element of k's list and returns their number.
func (r *rawPebble) list(b *testing.B, k int64, fn func(Val24)) int {
	v, closer, err := r.db.Get(r.key(k))
	if errors.Is(err, pebbledb.ErrNotFound) {
		return 0
	}
	check(b, err)
	n := 0
	for len(v) > 0 {
		size, w := binary.Uvarint(v)
		x, _, err := val24Codec{}.DecodeValue(v[w : w+int(size)])
		check(b, err)
		fn(x)
		v = v[w+int(size):]
		n++
	}
	check(b, closer.Close())
	return n
}

func (r *rawPebble) mapPut(b *testing.B, k, uk int64, v Val24) {
	r.vb = val24Codec{}.AppendValue(r.vb[:0], v)
	check(b, r.db.Set(r.mapKey(k, uk), r.vb, pebbledb.NoSync))
}

func (r *rawPebble) mapGet(b *testing.B, k, uk int64) (Val24, bool) {
	return r.getKey(b, r.mapKey(k, uk))
}

// mapRange calls fn with the decoded entries of k's map whose user keys
// are in [from, to) (all of them if all), ascending, and returns their
// number: a bounded iterator over the map's span.
func (r *rawPebble) mapRange(b *testing.B, k, from, to int64, all bool, fn func(uk int64, v Val24)) int {
	ik := r.key(k)
	pl := len(ik)
	r.lo = append(r.lo[:0], ik...)
	if all {
		r.hi = append(r.hi[:0], ik...)
		r.hi[len(r.hi)-1]++ // the namespace length byte: the end of the map's span
	} else {
		r.lo = runtime.Int64Codec{}.AppendKey(r.lo, from)
		r.hi = runtime.Int64Codec{}.AppendKey(append(r.hi[:0], ik...), to)
	}
	it, err := r.db.NewIter(&pebbledb.IterOptions{LowerBound: r.lo, UpperBound: r.hi})
	check(b, err)
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		uk, _, err := runtime.Int64Codec{}.DecodeKey(it.Key()[pl:])
		check(b, err)
		v, _, err := val24Codec{}.DecodeValue(it.Value())
		check(b, err)
		fn(uk, v)
		n++
	}
	check(b, it.Close())
	return n
}

// checkRawLayout proves that rawPebbleKey is the backend's layout: a value
// written through a store is found by raw Pebble under rawPebbleKey after
// the store is closed.
func checkRawLayout(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "layout")
	s, err := stpebble.New(stpebble.Options{Dir: dir})
	check(b, err)
	v, err := runtime.NewValue(s, runtime.ValueDescriptor[int64, Val24]{Name: "v", Key: runtime.Int64Codec{}, Value: val24Codec{}})
	check(b, err)
	check(b, v.Put(42, val(42)))
	check(b, s.Close())
	po, err := stpebble.Options{}.PebbleOptions()
	check(b, err)
	db, err := pebbledb.Open(dir, po)
	check(b, err)
	defer db.Close()
	r := &rawPebble{db: db}
	if x, ok := r.get(b, 42); !ok || x != val(42) {
		b.Fatalf("raw Pebble reads (%v, %v) under rawPebbleKey, want (%v, true): the baseline's layout is not the backend's", x, ok, val(42))
	}
}

// Fixtures.

type pebbleValues struct {
	s *stpebble.Store
	v runtime.Value[int64, Val24]
}

func buildPebbleValues(top, b *testing.B, keys []int64) pebbleValues {
	s := newPebble(top, b, pebbleOpts(top, runtime.StoreConfig{}))
	v, err := runtime.NewValue(s, runtime.ValueDescriptor[int64, Val24]{Name: "v", Key: runtime.Int64Codec{}, Value: val24Codec{}})
	check(b, err)
	for _, k := range keys {
		check(b, v.Put(k, val(int(k))))
	}
	return pebbleValues{s, v}
}

func buildRawPebbleValues(top, b *testing.B, keys []int64) *rawPebble {
	checkRawLayout(b)
	r := openRawPebble(top, b)
	for _, k := range keys {
		r.put(b, k, val(int(k)))
	}
	return r
}

// The Get benchmarks read every entry once after building their fixture,
// so that they measure reads of a warm block cache (the fixtures fit in it)
// rather than the first touch of every block; BenchmarkPebbleLargeState
// measures reads of a store many times larger than its cache.

func warmPebbleValues(b *testing.B, v runtime.Value[int64, Val24], keys []int64) {
	for _, k := range keys {
		_, ok, err := v.Get(k)
		if !ok || err != nil {
			b.Fatal("missing", err)
		}
	}
}

func warmRawValues(b *testing.B, r *rawPebble, keys []int64) {
	for _, k := range keys {
		if _, ok := r.get(b, k); !ok {
			b.Fatal("missing")
		}
	}
}

func BenchmarkPebbleValueGet(b *testing.B) {
	top := b
	n := benchKeys(b)
	keys := perm(n, 1)
	order := perm(n, 2)
	var pb pebbleValues
	var raw *rawPebble
	pebbleBoth(b, "keys="+sizeName(n), func(b *testing.B) {
		if pb.s == nil {
			pb = buildPebbleValues(top, b, keys)
			warmPebbleValues(b, pb.v, keys)
		}
		v := pb.v
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			x, ok, err := v.Get(order[i%n])
			if !ok || err != nil {
				b.Fatal("missing", err)
			}
			sink = x
		}
	}, func(b *testing.B) {
		if raw == nil {
			raw = buildRawPebbleValues(top, b, keys)
			warmRawValues(b, raw, keys)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			x, ok := raw.get(b, order[i%n])
			if !ok {
				b.Fatal("missing")
			}
			sink = x
		}
	})
}

func BenchmarkPebbleValuePut(b *testing.B) {
	top := b
	n := benchKeys(b)
	keys := perm(n, 1)
	order := perm(n, 2)
	var pb pebbleValues
	var raw *rawPebble
	pebbleBoth(b, "keys="+sizeName(n), func(b *testing.B) {
		if pb.s == nil {
			pb = buildPebbleValues(top, b, keys)
		}
		v := pb.v
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := v.Put(order[i%n], val(i)); err != nil {
				b.Fatal(err)
			}
		}
	}, func(b *testing.B) {
		if raw == nil {
			raw = buildRawPebbleValues(top, b, keys)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			raw.put(b, order[i%n], val(i))
		}
	})
}

func newPebbleList(b *testing.B, s *stpebble.Store) runtime.List[int64, Val24] {
	l, err := runtime.NewList(s, runtime.ListDescriptor[int64, Val24]{Name: "l", Key: runtime.Int64Codec{}, Value: val24Codec{}})
	check(b, err)
	return l
}

// BenchmarkPebbleListAdd appends to the lists of random keys, starting
// from an empty store: one merge operand per Add.
func BenchmarkPebbleListAdd(b *testing.B) {
	n := benchKeys(b)
	order := perm(n, 2)
	pebbleBoth(b, "keys="+sizeName(n), func(b *testing.B) {
		l := newPebbleList(b, newPebble(b, b, pebbleOpts(b, runtime.StoreConfig{})))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := l.Add(order[i%n], val(i)); err != nil {
				b.Fatal(err)
			}
		}
	}, func(b *testing.B) {
		r := openRawPebble(b, b)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			r.add(b, order[i%n], val(i))
		}
	})
}

// BenchmarkPebbleListGet reads the whole 4-element list of a random key,
// written by 4 rounds of Adds: one point read folding 4 merge operands.
func BenchmarkPebbleListGet(b *testing.B) {
	top := b
	n := benchKeys(b)
	keys := perm(n, 1)
	order := perm(n, 2)
	var pl runtime.List[int64, Val24]
	var raw *rawPebble
	pebbleBoth(b, "keys="+sizeName(n), func(b *testing.B) {
		if pl == (runtime.List[int64, Val24]{}) {
			pl = newPebbleList(b, newPebble(top, b, pebbleOpts(top, runtime.StoreConfig{})))
			for j := range listLen {
				for _, k := range keys {
					check(b, pl.Add(k, val(int(k)+j)))
				}
			}
			for _, k := range keys {
				for _, err := range pl.All(k) {
					check(b, err)
				}
			}
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			c := 0
			for x, err := range pl.All(order[i%n]) {
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
		if raw == nil {
			raw = openRawPebble(top, b)
			for j := range listLen {
				for _, k := range keys {
					raw.add(b, k, val(int(k)+j))
				}
			}
			for _, k := range keys {
				raw.list(b, k, func(Val24) {})
			}
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if c := raw.list(b, order[i%n], func(x Val24) { sink = x }); c != listLen {
				b.Fatalf("list of %d elements", c)
			}
		}
	})
}

func buildPebbleMaps(top, b *testing.B, n, fanout int, sorted bool) mapFixture {
	fx := fillMaps(b, newPebble(top, b, pebbleOpts(top, runtime.StoreConfig{})), n, fanout, sorted)
	for k := range int64(n / fanout) { // warm the block cache
		all := fx.m.All
		if sorted {
			all = fx.sm.All
		}
		for _, err := range all(k) {
			check(b, err)
		}
	}
	return fx
}

func buildRawPebbleMaps(top, b *testing.B, n, fanout int) *rawPebble {
	r := openRawPebble(top, b)
	for _, e := range perm(n, 3) {
		r.mapPut(b, e/int64(fanout), e%int64(fanout), val(int(e)))
	}
	for k := range int64(n / fanout) { // warm the block cache
		r.mapRange(b, k, 0, 0, true, func(int64, Val24) {})
	}
	return r
}

func BenchmarkPebbleMapPut(b *testing.B) {
	top := b
	n := benchKeys(b)
	order := perm(n, 2)
	var pb *mapFixture
	var raw *rawPebble
	pebbleBoth(b, "keys="+sizeName(n), func(b *testing.B) {
		if pb == nil {
			fx := buildPebbleMaps(top, b, n, mapFanout, false)
			pb = &fx
		}
		m := pb.m
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			e := order[i%n]
			if err := m.Put(e/mapFanout, e%mapFanout, val(i)); err != nil {
				b.Fatal(err)
			}
		}
	}, func(b *testing.B) {
		if raw == nil {
			raw = buildRawPebbleMaps(top, b, n, mapFanout)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			e := order[i%n]
			raw.mapPut(b, e/mapFanout, e%mapFanout, val(i))
		}
	})
}

func BenchmarkPebbleMapGet(b *testing.B) {
	top := b
	n := benchKeys(b)
	order := perm(n, 2)
	var pb *mapFixture
	var raw *rawPebble
	pebbleBoth(b, "keys="+sizeName(n), func(b *testing.B) {
		if pb == nil {
			fx := buildPebbleMaps(top, b, n, mapFanout, false)
			pb = &fx
		}
		m := pb.m
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
		if raw == nil {
			raw = buildRawPebbleMaps(top, b, n, mapFanout)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			e := order[i%n]
			x, ok := raw.mapGet(b, e/mapFanout, e%mapFanout)
			if !ok {
				b.Fatal("missing")
			}
			sink = x
		}
	})
}

// BenchmarkPebbleMapIterate reads every entry of a random key's 16-entry
// map: a bounded iterator over the map's span.
func BenchmarkPebbleMapIterate(b *testing.B) {
	top := b
	n := benchKeys(b)
	outer := n / mapFanout
	order := perm(outer, 2)
	var pb *mapFixture
	var raw *rawPebble
	pebbleBoth(b, "keys="+sizeName(n), func(b *testing.B) {
		if pb == nil {
			fx := buildPebbleMaps(top, b, n, mapFanout, false)
			pb = &fx
		}
		m := pb.m
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
		if raw == nil {
			raw = buildRawPebbleMaps(top, b, n, mapFanout)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if c := raw.mapRange(b, order[i%outer], 0, 0, true, func(_ int64, v Val24) { sink = v }); c != mapFanout {
				b.Fatalf("map of %d entries", c)
			}
		}
	})
}

// BenchmarkPebbleSortedMapRange reads 16 consecutive entries of a random
// key's 64-entry sorted map, and reports entries/s.
func BenchmarkPebbleSortedMapRange(b *testing.B) {
	top := b
	n := benchKeys(b)
	outer := n / sortedFanout
	order := perm(outer, 2)
	starts := perm(sortedFanout-rangeLen, 4)
	var pb *mapFixture
	var raw *rawPebble
	entriesPerSec := func(b *testing.B) {
		b.ReportMetric(float64(b.N)*rangeLen/b.Elapsed().Seconds(), "entries/s")
	}
	pebbleBoth(b, "keys="+sizeName(n), func(b *testing.B) {
		if pb == nil {
			fx := buildPebbleMaps(top, b, n, sortedFanout, true)
			pb = &fx
		}
		sm := pb.sm
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
		entriesPerSec(b)
	}, func(b *testing.B) {
		if raw == nil {
			raw = buildRawPebbleMaps(top, b, n, sortedFanout)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			from := starts[i%len(starts)]
			if c := raw.mapRange(b, order[i%outer], from, from+rangeLen, false, func(_ int64, v Val24) { sink = v }); c != rangeLen {
				b.Fatalf("range of %d entries", c)
			}
		}
		entriesPerSec(b)
	})
}

// BenchmarkPebbleSnapshotSync measures the synchronous phase of a snapshot
// (and its release) of a value state with 10K and 1M entries (scaled down
// with the number of keys): the backend's Snapshot against a raw
// NewSnapshot and Close. Each fixture is closed before the next is built.
func BenchmarkPebbleSnapshotSync(b *testing.B) {
	for _, size := range []int{10_000, 1 << 20} {
		n := scaled(b, size)
		keys := perm(n, 1)
		top := b
		var s *stpebble.Store
		b.Run("backend=pebble/entries="+sizeName(n), withCPU(func(b *testing.B) {
			if s == nil {
				s = buildPebbleValues(top, b, keys).s
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				snap, err := s.Snapshot()
				check(b, err)
				check(b, snap.Release())
			}
		}))
		if s != nil {
			check(b, s.Close())
			s = nil
		}
		var r *rawPebble
		b.Run("backend=rawpebble/entries="+sizeName(n), withCPU(func(b *testing.B) {
			if r == nil {
				r = buildRawPebbleValues(top, b, keys)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				check(b, r.db.NewSnapshot().Close())
			}
		}))
		if r != nil {
			r.close(b)
			r = nil
		}
	}
}

// BenchmarkPebbleSnapshotAsync measures the asynchronous phase: a scan of
// every entry of a snapshot (Snapshot, Scan of every key group, Release),
// against a raw snapshot read with one iterator per key group. It reports
// entries/s and MB/s of key, namespace and value bytes.
func BenchmarkPebbleSnapshotAsync(b *testing.B) {
	top := b
	n := benchKeys(b)
	keys := perm(n, 1)
	var pb pebbleValues
	var raw *rawPebble
	report := func(b *testing.B, entries, size int64) {
		b.SetBytes(size)
		b.ReportMetric(float64(entries)/b.Elapsed().Seconds(), "entries/s")
	}
	pebbleBoth(b, "entries="+sizeName(n), func(b *testing.B) {
		if pb.s == nil {
			pb = buildPebbleValues(top, b, keys)
		}
		var entries, size int64
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			snap, err := pb.s.Snapshot()
			check(b, err)
			e, sz, err := scanAll(snap)
			check(b, err)
			check(b, snap.Release())
			entries, size = entries+e, sz
		}
		report(b, entries, size)
	}, func(b *testing.B) {
		if raw == nil {
			raw = buildRawPebbleValues(top, b, keys)
		}
		var entries, size int64
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			snap := raw.db.NewSnapshot()
			var e, sz int64
			for kg := range runtime.DefaultMaxParallelism {
				lo := []byte{byte(kg >> 8), byte(kg), 0}
				hi := []byte{byte(kg >> 8), byte(kg), 1}
				it, err := snap.NewIter(&pebbledb.IterOptions{LowerBound: lo, UpperBound: hi})
				check(b, err)
				for ok := it.First(); ok; ok = it.Next() {
					kl, _ := binary.Uvarint(it.Key()[3:])
					e++
					sz += int64(int(kl) + len(it.Value()))
				}
				check(b, it.Close())
			}
			check(b, snap.Close())
			entries, size = entries+e, sz
		}
		report(b, entries, size)
	})
}

// BenchmarkPebbleCheckpointWrite writes a snapshot of a 1M-entry value
// state (the state of checkpoint_test.go: 8-byte keys, 24-byte values,
// maxParallelism 128) as a checkpoint file: SnapshotAsync and Wait — sync
// phase, scan, encode, fsync, commit. MB/s is of the data file; compare
// with BenchmarkCheckpointWrite/backend=cow.
func BenchmarkPebbleCheckpointWrite(b *testing.B) {
	ctx := context.Background()
	n := ckptKeys(b)
	size := ckptFileSize(b, n)
	top := b
	var store *stpebble.Store
	b.Run("backend=pebble", func(b *testing.B) {
		b.Run("keys="+ckptSizeName(n), func(b *testing.B) {
			if store == nil {
				store = pebbleCkptStore(top, b, n)
			}
			dir, err := checkpoint.NewDir(b.TempDir())
			check(b, err)
			var syncNs int64
			b.SetBytes(size)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				name := checkpoint.CheckpointName(uint64(i))
				a, err := checkpoint.SnapshotAsync(ctx, store, dir, name, "op-0.sgc", nil)
				check(b, err)
				res, err := a.Wait()
				check(b, err)
				syncNs += int64(res.Stats.SyncDuration)
				b.StopTimer()
				if res.Snapshot.File.Size != size || res.Snapshot.File.Entries != int64(n) {
					b.Fatalf("wrote %+v, want %d bytes, %d entries", res.Snapshot.File, size, n)
				}
				check(b, checkpoint.Delete(ctx, dir, name))
				b.StartTimer()
			}
			b.ReportMetric(float64(syncNs)/float64(b.N), "sync-ns/op")
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
		})
	})
}

// pebbleCkptStore returns a store holding the checkpoint benchmarks'
// state, closed when top ends.
func pebbleCkptStore(top, b *testing.B, n int) *stpebble.Store {
	s := newPebble(top, b, pebbleOpts(top, runtime.StoreConfig{MaxParallelism: ckptMaxP}))
	st, err := s.Register(ckptSpec)
	check(b, err)
	vs := st.(runtime.ValueState)
	var v []byte
	for i := range n {
		v = ckptValue(v[:0], i)
		check(b, vs.Put(runtime.MakeKey(ckptKey(i), nil, ckptMaxP), v))
	}
	return s
}

// BenchmarkPebbleCheckpointRestore restores a committed checkpoint of the
// same state into an empty store (checkpoint.Restore of every key group;
// the store writes batches) and reports entries/s; compare with
// BenchmarkCheckpointRestore/backend=cow.
func BenchmarkPebbleCheckpointRestore(b *testing.B) {
	ctx := context.Background()
	n := ckptKeys(b)
	dir, size := ckptCommitted(b, n)
	b.Run("backend=pebble", func(b *testing.B) {
		b.Run("keys="+ckptSizeName(n), func(b *testing.B) {
			b.SetBytes(size)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				store, err := stpebble.New(pebbleOpts(b, runtime.StoreConfig{MaxParallelism: ckptMaxP}))
				check(b, err)
				b.StartTimer()
				st, err := checkpoint.Restore(ctx, dir, "chk", "op", 0, 1, store, nil)
				check(b, err)
				b.StopTimer()
				if st.Entries != int64(n) {
					b.Fatalf("restored %d entries, want %d", st.Entries, n)
				}
				check(b, store.Close())
				b.StartTimer()
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
		})
	})
}

// largeStateEntries returns the size of BenchmarkPebbleLargeState: 10M
// with STATEGEN_BENCH_LARGE=1, else 20K (a smoke run of the same code).
func largeStateEntries() (int, string) {
	if os.Getenv("STATEGEN_BENCH_LARGE") == "1" {
		return 10_000_000, "10M"
	}
	return 20_000, "20K"
}

// largeValue appends the ~100-byte value of entry i: its index, then
// pseudo-random bytes (incompressible, like serialized user data at its
// worst).
func largeValue(dst []byte, i int) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, uint64(i))
	x := uint64(i)*0x9e3779b97f4a7c15 | 1
	for len(dst) < 100 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		dst = binary.LittleEndian.AppendUint64(dst, x)
	}
	return dst[:100]
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

// BenchmarkPebbleLargeState fills a value state of 10M entries (8-byte
// keys, 100-byte values; ~1.1 GB of data) in a store with a 64 MiB block
// cache, then measures random point reads (ns/op). It reports the fill's
// throughput (fill-entries/s), the process's peak RSS over fill and reads
// (peak-rss-MiB, with VmHWM reset first), the Go heap in use at the end
// (go-heap-MiB) and Pebble's own accounting of its memory (block cache
// and memtables, pebble-mem-MiB). Without STATEGEN_BENCH_LARGE=1 it runs
// the same code on 20K entries.
func BenchmarkPebbleLargeState(b *testing.B) {
	n, name := largeStateEntries()
	const maxP = 128
	top := b
	var s *stpebble.Store
	var vs runtime.ValueState
	var fillRate float64
	reset := false
	b.Run("backend=pebble/entries="+name, func(b *testing.B) {
		if s == nil {
			reset = resetPeakRSS()
			var err error
			s, err = stpebble.New(stpebble.Options{
				StoreConfig:    runtime.StoreConfig{MaxParallelism: maxP},
				Dir:            filepath.Join(top.TempDir(), "large"),
				BlockCacheSize: 64 << 20,
			})
			check(b, err)
			st, err := s.Register(runtime.StateSpec{Name: "large", Kind: runtime.KindValue})
			check(b, err)
			vs = st.(runtime.ValueState)
			var v, k []byte
			t0 := time.Now()
			for i := range n {
				k = binary.BigEndian.AppendUint64(k[:0], uint64(i)^1<<63)
				v = largeValue(v[:0], i)
				check(b, vs.Put(runtime.MakeKey(k, nil, maxP), v))
			}
			fillRate = float64(n) / time.Since(t0).Seconds()
		}
		r := rand.New(rand.NewPCG(7, uint64(b.N)))
		var k []byte
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			j := r.IntN(n)
			k = binary.BigEndian.AppendUint64(k[:0], uint64(j)^1<<63)
			v, ok, err := vs.Get(runtime.MakeKey(k, nil, maxP))
			if err != nil || !ok || binary.LittleEndian.Uint64(v) != uint64(j) {
				b.Fatalf("Get of entry %d: (%x, %v, %v)", j, v, ok, err)
			}
		}
		b.StopTimer()
		m := s.Metrics()
		var ms goruntime.MemStats
		goruntime.ReadMemStats(&ms)
		b.ReportMetric(fillRate, "fill-entries/s")
		if reset {
			b.ReportMetric(float64(peakRSS())/(1<<20), "peak-rss-MiB")
		}
		b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "go-heap-MiB")
		b.ReportMetric(float64(m.BlockCache.Size+int64(m.MemTable.Size))/(1<<20), "pebble-mem-MiB")
		b.ReportMetric(float64(m.DiskSpaceUsage())/(1<<20), "disk-MiB")
	})
	if s != nil {
		check(b, s.Close())
	}
}
