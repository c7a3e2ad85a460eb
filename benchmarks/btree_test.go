package benchmarks

// Benchmarks of backends/btree, beside a rawbtree baseline that calls
// tidwall/btree's BTreeG directly with the same item layout (24-byte inline
// key prefix, key and value in one allocation, one tree per key group) and
// the same encoded bytes — item keys of key group, length-prefixed key and
// namespace, and user key; list elements with uvarint lengths — so that
// btree/rawbtree is the cost of the backend itself: the typed handles'
// encoding and decoding are paid by both, the handles' call and iteration
// machinery, the Store contract's checks and the snapshot bookkeeping by
// the backend alone.
//
//	BenchmarkBtreeValueGet/backend=btree/keys=1M
//	BenchmarkBtreeValueGet/backend=rawbtree/keys=1M
//
// The workloads, sizes and helpers are those of cow_test.go (random int64
// keys, 24-byte values, 1M keys, 10K under -short, in -benchtime=1x smoke
// runs or as STATEGEN_BENCH_KEYS says); Go allows one BenchmarkValueGet
// per package, hence the Btree prefix. To put btree, cow and gomap in one
// table, drop the prefix:
//
//	go test -run='^$' -bench='ValueGet' -count=6 ./benchmarks | sed -E 's/^Benchmark(Pebble|Btree)/Benchmark/' > all.txt
//	benchstat -col /backend all.txt
//
// Every benchmark reports its CPU time per operation (cpu-ns/op) beside the
// wall time: on a shared machine, the CPU time is the steadier measure.
// Range scans (SortedMapRange, SnapshotAsync) report entries/s, by wall
// time, and entries/cpu-s.

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	stbtree "github.com/stategen/stategen/backends/btree"
	"github.com/stategen/stategen/runtime"
	tb "github.com/tidwall/btree"
)

// btreeBoth runs fn's btree and rawbtree variants under
// backend=btree|rawbtree/<param>, with cpu-ns/op beside the wall time.
func btreeBoth(b *testing.B, param string, btFn, rawFn func(b *testing.B)) {
	b.Run("backend=btree", func(b *testing.B) { b.Run(param, withCPU(btFn)) })
	b.Run("backend=rawbtree", func(b *testing.B) { b.Run(param, withCPU(rawFn)) })
}

func newBtree(b *testing.B) *stbtree.Store {
	s, err := stbtree.New(stbtree.Options{})
	check(b, err)
	return s
}

// The rawbtree baseline: the item of backends/btree (inline 24-byte key
// prefix, key and value in one allocation) in one BTreeG per key group,
// as the backend keeps them, with no locks.

type rawItem struct {
	p0, p1, p2 uint64
	b          []byte
	kl         uint32
}

func rawLess(a, b rawItem) bool {
	if a.p0 != b.p0 {
		return a.p0 < b.p0
	}
	if a.p1 != b.p1 {
		return a.p1 < b.p1
	}
	if a.p2 != b.p2 {
		return a.p2 < b.p2
	}
	if a.kl <= 24 && b.kl <= 24 {
		return a.kl < b.kl
	}
	return bytes.Compare(a.b[:a.kl], b.b[:b.kl]) < 0
}

func rawMake(buf []byte, kl int) rawItem {
	var pad [24]byte
	copy(pad[:], buf[:kl])
	return rawItem{
		p0: binary.BigEndian.Uint64(pad[:]), p1: binary.BigEndian.Uint64(pad[8:]), p2: binary.BigEndian.Uint64(pad[16:]),
		b: buf, kl: uint32(kl),
	}
}

func (it rawItem) value() []byte { return it.b[it.kl:] }

// rawEntryKey appends the backend's item key of (kg, key, ns).
func rawEntryKey(dst []byte, kg int, key, ns []byte) []byte {
	dst = append(dst, byte(kg>>8), byte(kg))
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = append(dst, key...)
	dst = binary.AppendUvarint(dst, uint64(len(ns)))
	return append(dst, ns...)
}

// rawNew copies item key ik and value v into a new item.
func rawNew(ik, v []byte) rawItem {
	buf := make([]byte, len(ik)+len(v))
	copy(buf, ik)
	copy(buf[len(ik):], v)
	return rawMake(buf, len(ik))
}

type rawTrees struct {
	trees [runtime.DefaultMaxParallelism]*tb.BTreeG[rawItem]
	kb    []byte // encoded key
	ik    []byte // item key
	vb    []byte // encoded value
	lo    []byte // range bounds
	hi    []byte
}

func newRawTrees() *rawTrees { return new(rawTrees) }

func (r *rawTrees) tree(kg int) *tb.BTreeG[rawItem] {
	t := r.trees[kg]
	if t == nil {
		t = tb.NewBTreeGOptions(rawLess, tb.Options{NoLocks: true})
		r.trees[kg] = t
	}
	return t
}

// key encodes k, hashes it once, and builds the item key of (k, no
// namespace) in r.ik, as the typed handles and the backend do.
func (r *rawTrees) key(k int64) (*tb.BTreeG[rawItem], []byte) {
	r.kb = runtime.Int64Codec{}.AppendKey(r.kb[:0], k)
	kg := runtime.KeyGroupOfHash(runtime.HashKey(r.kb), runtime.DefaultMaxParallelism)
	r.ik = rawEntryKey(r.ik[:0], kg, r.kb, nil)
	return r.tree(kg), r.ik
}

// mapKey is key followed by the encoded user key uk.
func (r *rawTrees) mapKey(k, uk int64) (*tb.BTreeG[rawItem], []byte) {
	t, ik := r.key(k)
	r.ik = runtime.Int64Codec{}.AppendKey(ik, uk)
	return t, r.ik
}

func (r *rawTrees) put(k int64, v Val24) {
	t, ik := r.key(k)
	r.vb = val24Codec{}.AppendValue(r.vb[:0], v)
	t.Set(rawNew(ik, r.vb))
}

func (r *rawTrees) get(k int64) (Val24, bool) {
	t, ik := r.key(k)
	it, ok := t.Get(rawMake(ik, len(ik)))
	if !ok {
		return Val24{}, false
	}
	v, _, err := val24Codec{}.DecodeValue(it.value())
	return v, err == nil
}

// add appends v to k's list: one item per list, elements prefixed by
// their uvarint length, appended in place when capacity allows.
func (r *rawTrees) add(k int64, v Val24) {
	t, ik := r.key(k)
	var buf []byte
	if old, ok := t.Get(rawMake(ik, len(ik))); ok {
		buf = old.b
	} else {
		buf = append(make([]byte, 0, len(ik)+25), ik...)
	}
	r.vb = val24Codec{}.AppendValue(r.vb[:0], v)
	buf = binary.AppendUvarint(buf, uint64(len(r.vb)))
	buf = append(buf, r.vb...)
	t.Set(rawMake(buf, len(ik)))
}

// list calls fn with every element of k's list and returns their number.
func (r *rawTrees) list(b *testing.B, k int64, fn func(Val24)) int {
	t, ik := r.key(k)
	it, ok := t.Get(rawMake(ik, len(ik)))
	if !ok {
		return 0
	}
	n := 0
	for l := it.value(); len(l) > 0; n++ {
		size, w := binary.Uvarint(l)
		v, _, err := val24Codec{}.DecodeValue(l[w : w+int(size)])
		check(b, err)
		fn(v)
		l = l[w+int(size):]
	}
	return n
}

func (r *rawTrees) mapPut(k, uk int64, v Val24) {
	t, ik := r.mapKey(k, uk)
	r.vb = val24Codec{}.AppendValue(r.vb[:0], v)
	t.Set(rawNew(ik, r.vb))
}

func (r *rawTrees) mapGet(k, uk int64) (Val24, bool) {
	t, ik := r.mapKey(k, uk)
	it, ok := t.Get(rawMake(ik, len(ik)))
	if !ok {
		return Val24{}, false
	}
	v, _, err := val24Codec{}.DecodeValue(it.value())
	return v, err == nil
}

// mapRange calls fn with the decoded entries of k's map whose user keys
// are in [from, to) (all of them if all), ascending, and returns their
// number.
func (r *rawTrees) mapRange(b *testing.B, k, from, to int64, all bool, fn func(uk int64, v Val24)) int {
	t, ik := r.key(k)
	pl := len(ik)
	r.lo = append(r.lo[:0], ik...)
	var hi []byte
	if !all {
		r.lo = runtime.Int64Codec{}.AppendKey(r.lo, from)
		r.hi = runtime.Int64Codec{}.AppendKey(append(r.hi[:0], ik...), to)
		hi = r.hi
	}
	it := t.Iter()
	defer it.Release()
	n := 0
	for ok := it.Seek(rawMake(r.lo, len(r.lo))); ok; ok = it.Next() {
		x := it.Item()
		key := x.b[:x.kl]
		if !bytes.HasPrefix(key, ik) || hi != nil && bytes.Compare(key, hi) >= 0 {
			break
		}
		uk, _, err := runtime.Int64Codec{}.DecodeKey(key[pl:])
		check(b, err)
		v, _, err := val24Codec{}.DecodeValue(x.value())
		check(b, err)
		fn(uk, v)
		n++
	}
	return n
}

// copyAll is the raw synchronous phase of a snapshot: a Copy of every
// non-empty tree.
func (r *rawTrees) copyAll() []*tb.BTreeG[rawItem] {
	out := make([]*tb.BTreeG[rawItem], len(r.trees))
	for i, t := range r.trees {
		if t != nil && t.Len() > 0 {
			out[i] = t.Copy()
		}
	}
	return out
}

// rawScanAll reads every item of trees, as a snapshot scan does (item key
// split into key and namespace), and returns the number of entries and
// their bytes.
func rawScanAll(trees []*tb.BTreeG[rawItem]) (entries, size int64) {
	for _, t := range trees {
		if t == nil {
			continue
		}
		t.Scan(func(x rawItem) bool {
			ik := x.b[:x.kl]
			kl, w := binary.Uvarint(ik[2:])
			key := ik[2+w : 2+w+int(kl)]
			rest := ik[2+w+int(kl):]
			nl, w2 := binary.Uvarint(rest)
			ns := rest[w2 : w2+int(nl)]
			entries++
			size += int64(len(key) + len(ns) + len(x.value()))
			return true
		})
	}
	return entries, size
}

type btreeValues struct {
	s *stbtree.Store
	v runtime.Value[int64, Val24]
}

func buildBtreeValues(b *testing.B, keys []int64) btreeValues {
	s := newBtree(b)
	v, err := runtime.NewValue(s, runtime.ValueDescriptor[int64, Val24]{Name: "v", Key: runtime.Int64Codec{}, Value: val24Codec{}})
	check(b, err)
	for _, k := range keys {
		check(b, v.Put(k, val(int(k))))
	}
	return btreeValues{s, v}
}

func buildRawValues(keys []int64) *rawTrees {
	r := newRawTrees()
	for _, k := range keys {
		r.put(k, val(int(k)))
	}
	return r
}

func BenchmarkBtreeValueGet(b *testing.B) {
	n := benchKeys(b)
	keys := perm(n, 1)
	order := perm(n, 2)
	bt := lazy(func() btreeValues { return buildBtreeValues(b, keys) })
	raw := lazy(func() *rawTrees { return buildRawValues(keys) })
	btreeBoth(b, "keys="+sizeName(n), func(b *testing.B) {
		v := bt().v
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			x, ok, err := v.Get(order[i%n])
			if !ok || err != nil {
				b.Fatal("missing", err)
			}
			sink = x
		}
	}, func(b *testing.B) {
		r := raw()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			x, ok := r.get(order[i%n])
			if !ok {
				b.Fatal("missing")
			}
			sink = x
		}
	})
}

func BenchmarkBtreeValuePut(b *testing.B) {
	n := benchKeys(b)
	keys := perm(n, 1)
	order := perm(n, 2)
	bt := lazy(func() btreeValues { return buildBtreeValues(b, keys) })
	raw := lazy(func() *rawTrees { return buildRawValues(keys) })
	btreeBoth(b, "keys="+sizeName(n), func(b *testing.B) {
		v := bt().v
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := v.Put(order[i%n], val(i)); err != nil {
				b.Fatal(err)
			}
		}
	}, func(b *testing.B) {
		r := raw()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			r.put(order[i%n], val(i))
		}
	})
}

func newBtreeList(b *testing.B, s *stbtree.Store) runtime.List[int64, Val24] {
	l, err := runtime.NewList(s, runtime.ListDescriptor[int64, Val24]{Name: "l", Key: runtime.Int64Codec{}, Value: val24Codec{}})
	check(b, err)
	return l
}

// BenchmarkBtreeListAdd appends to the lists of random keys, starting from
// an empty store.
func BenchmarkBtreeListAdd(b *testing.B) {
	n := benchKeys(b)
	order := perm(n, 2)
	btreeBoth(b, "keys="+sizeName(n), func(b *testing.B) {
		l := newBtreeList(b, newBtree(b))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := l.Add(order[i%n], val(i)); err != nil {
				b.Fatal(err)
			}
		}
	}, func(b *testing.B) {
		r := newRawTrees()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			r.add(order[i%n], val(i))
		}
	})
}

// BenchmarkBtreeListGet reads the whole 4-element list of a random key.
func BenchmarkBtreeListGet(b *testing.B) {
	n := benchKeys(b)
	keys := perm(n, 1)
	order := perm(n, 2)
	bt := lazy(func() runtime.List[int64, Val24] {
		l := newBtreeList(b, newBtree(b))
		for j := range listLen {
			for _, k := range keys {
				check(b, l.Add(k, val(int(k)+j)))
			}
		}
		return l
	})
	raw := lazy(func() *rawTrees {
		r := newRawTrees()
		for j := range listLen {
			for _, k := range keys {
				r.add(k, val(int(k)+j))
			}
		}
		return r
	})
	btreeBoth(b, "keys="+sizeName(n), func(b *testing.B) {
		l := bt()
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
		r := raw()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if c := r.list(b, order[i%n], func(x Val24) { sink = x }); c != listLen {
				b.Fatalf("list of %d elements", c)
			}
		}
	})
}

func buildBtreeMaps(b *testing.B, n, fanout int, sorted bool) mapFixture {
	return fillMaps(b, newBtree(b), n, fanout, sorted)
}

func buildRawMaps(n, fanout int) *rawTrees {
	r := newRawTrees()
	for _, e := range perm(n, 3) {
		r.mapPut(e/int64(fanout), e%int64(fanout), val(int(e)))
	}
	return r
}

func BenchmarkBtreeMapPut(b *testing.B) {
	n := benchKeys(b)
	order := perm(n, 2)
	bt := lazy(func() mapFixture { return buildBtreeMaps(b, n, mapFanout, false) })
	raw := lazy(func() *rawTrees { return buildRawMaps(n, mapFanout) })
	btreeBoth(b, "keys="+sizeName(n), func(b *testing.B) {
		m := bt().m
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			e := order[i%n]
			if err := m.Put(e/mapFanout, e%mapFanout, val(i)); err != nil {
				b.Fatal(err)
			}
		}
	}, func(b *testing.B) {
		r := raw()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			e := order[i%n]
			r.mapPut(e/mapFanout, e%mapFanout, val(i))
		}
	})
}

func BenchmarkBtreeMapGet(b *testing.B) {
	n := benchKeys(b)
	order := perm(n, 2)
	bt := lazy(func() mapFixture { return buildBtreeMaps(b, n, mapFanout, false) })
	raw := lazy(func() *rawTrees { return buildRawMaps(n, mapFanout) })
	btreeBoth(b, "keys="+sizeName(n), func(b *testing.B) {
		m := bt().m
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
		r := raw()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			e := order[i%n]
			x, ok := r.mapGet(e/mapFanout, e%mapFanout)
			if !ok {
				b.Fatal("missing")
			}
			sink = x
		}
	})
}

// BenchmarkBtreeMapIterate reads every entry of a random key's 16-entry
// map.
func BenchmarkBtreeMapIterate(b *testing.B) {
	n := benchKeys(b)
	outer := n / mapFanout
	order := perm(outer, 2)
	bt := lazy(func() mapFixture { return buildBtreeMaps(b, n, mapFanout, false) })
	raw := lazy(func() *rawTrees { return buildRawMaps(n, mapFanout) })
	btreeBoth(b, "keys="+sizeName(n), func(b *testing.B) {
		m := bt().m
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
		r := raw()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if c := r.mapRange(b, order[i%outer], 0, 0, true, func(_ int64, v Val24) { sink = v }); c != mapFanout {
				b.Fatalf("map of %d entries", c)
			}
		}
	})
}

// BenchmarkBtreeSortedMapRange reads 16 consecutive entries of a random
// key's 64-entry sorted map, and reports entries/s.
func BenchmarkBtreeSortedMapRange(b *testing.B) {
	n := benchKeys(b)
	outer := n / sortedFanout
	order := perm(outer, 2)
	starts := perm(sortedFanout-rangeLen, 4)
	bt := lazy(func() mapFixture { return buildBtreeMaps(b, n, sortedFanout, true) })
	raw := lazy(func() *rawTrees { return buildRawMaps(n, sortedFanout) })
	// entries/s is by wall time, entries/cpu-s by the process's CPU time
	// (steadier on a shared machine).
	var cpu0 int64
	start := func(b *testing.B) {
		b.ResetTimer()
		cpu0 = cpuTime()
	}
	entriesPerSec := func(b *testing.B) {
		b.ReportMetric(float64(b.N)*rangeLen/b.Elapsed().Seconds(), "entries/s")
		b.ReportMetric(float64(b.N)*rangeLen/(float64(cpuTime()-cpu0)/1e9), "entries/cpu-s")
	}
	btreeBoth(b, "keys="+sizeName(n), func(b *testing.B) {
		sm := bt().sm
		start(b)
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
		r := raw()
		start(b)
		for i := 0; i < b.N; i++ {
			from := starts[i%len(starts)]
			if c := r.mapRange(b, order[i%outer], from, from+rangeLen, false, func(_ int64, v Val24) { sink = v }); c != rangeLen {
				b.Fatalf("range of %d entries", c)
			}
		}
		entriesPerSec(b)
	})
}

// BenchmarkBtreeSnapshotSync measures the synchronous phase of a snapshot
// (and its release) of a value state with 10K to 4M entries (scaled down
// with the number of keys): the backend's Snapshot against a Copy of every
// raw tree. Each fixture is dropped before the next is built.
func BenchmarkBtreeSnapshotSync(b *testing.B) {
	for _, size := range []int{10_000, 100_000, 1 << 20, 4 << 20} {
		n := scaled(b, size)
		keys := perm(n, 1)
		var s *stbtree.Store
		b.Run("backend=btree/entries="+sizeName(n), withCPU(func(b *testing.B) {
			if s == nil {
				s = buildBtreeValues(b, keys).s
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				snap, err := s.Snapshot()
				check(b, err)
				check(b, snap.Release())
			}
		}))
		s = nil
		var r *rawTrees
		b.Run("backend=rawbtree/entries="+sizeName(n), withCPU(func(b *testing.B) {
			if r == nil {
				r = buildRawValues(keys)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				sink.A += int64(len(r.copyAll()))
			}
		}))
		r = nil
	}
}

// BenchmarkBtreeSnapshotAsync measures the asynchronous phase: a scan of
// every entry of a snapshot (Snapshot, Scan of every key group, Release),
// against a Copy and a scan of every raw tree. It reports entries/s and
// MB/s of key, namespace and value bytes.
func BenchmarkBtreeSnapshotAsync(b *testing.B) {
	n := benchKeys(b)
	keys := perm(n, 1)
	bt := lazy(func() btreeValues { return buildBtreeValues(b, keys) })
	raw := lazy(func() *rawTrees { return buildRawValues(keys) })
	var cpu0 int64
	start := func(b *testing.B) {
		b.ResetTimer()
		cpu0 = cpuTime()
	}
	report := func(b *testing.B, entries, size int64) {
		b.SetBytes(size)
		b.ReportMetric(float64(entries)/b.Elapsed().Seconds(), "entries/s")
		b.ReportMetric(float64(entries)/(float64(cpuTime()-cpu0)/1e9), "entries/cpu-s")
	}
	btreeBoth(b, "entries="+sizeName(n), func(b *testing.B) {
		s := bt().s
		var entries, size int64
		start(b)
		for i := 0; i < b.N; i++ {
			snap, err := s.Snapshot()
			check(b, err)
			e, sz, err := scanAll(snap)
			check(b, err)
			check(b, snap.Release())
			entries, size = entries+e, sz
		}
		report(b, entries, size)
	}, func(b *testing.B) {
		r := raw()
		var entries, size int64
		start(b)
		for i := 0; i < b.N; i++ {
			e, sz := rawScanAll(r.copyAll())
			entries, size = entries+e, sz
		}
		report(b, entries, size)
	})
}

// BenchmarkBtreeMapFirstPutAfterSnapshot measures a Put into a key's
// 10,000-entry map, at a random user key: put=first right after a snapshot
// that stays live during the Put, put=ordinary right after a snapshot that
// was released before the Put (the names of cow's benchmark), and
// put=nosnapshot with no snapshot at all. After a snapshot, released or
// not, the first write to a tree node copies it (tidwall/btree's
// copy-on-write compares the node's isolation id with the tree's, which
// Copy changed), so first and ordinary cost the same here; nosnapshot is
// the steady state. ns/put is the Put alone. The rawbtree variant Copies
// the tree and Sets a new item.
func BenchmarkBtreeMapFirstPutAfterSnapshot(b *testing.B) {
	const entries = 10_000
	for _, kind := range []string{"map", "sortedmap"} {
		fx := lazy(func() mapFixture { return buildBtreeMaps(b, entries, entries, kind == "sortedmap") })
		for _, mode := range []string{"first", "ordinary", "nosnapshot"} {
			b.Run("backend=btree/entries=10K/kind="+kind+"/put="+mode, func(b *testing.B) {
				f := fx()
				put := f.m.Put
				if kind == "sortedmap" {
					put = f.sm.Put
				}
				ukeys := perm(entries, 5)
				var total time.Duration
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					var snap runtime.Snapshot
					if mode != "nosnapshot" {
						var err error
						snap, err = f.s.Snapshot()
						check(b, err)
						if mode == "ordinary" {
							check(b, snap.Release())
						}
					}
					t0 := time.Now()
					err := put(0, ukeys[i%entries], val(i))
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
	raw := lazy(func() *rawTrees { return buildRawMaps(entries, entries) })
	for _, mode := range []string{"first", "nosnapshot"} {
		b.Run("backend=rawbtree/entries=10K/kind=map/put="+mode, func(b *testing.B) {
			r := raw()
			ukeys := perm(entries, 5)
			var total time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if mode == "first" {
					sink.A += int64(len(r.copyAll()))
				}
				t0 := time.Now()
				r.mapPut(0, ukeys[i%entries], val(i))
				total += time.Since(t0)
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/put")
		})
	}
}
