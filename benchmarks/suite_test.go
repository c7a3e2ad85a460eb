package benchmarks

// The Flink state-benchmark operations (flink-benchmarks' ValueState,
// ListState and MapState benchmarks) through the typed handles, against
// every backend of suiteBackends:
//
//	BenchmarkFlink/valueGet/backend=cow/keys=500K
//	BenchmarkFlink/mapIterator/backend=model/keys=500K
//
// Workload, as in Flink: 500K pre-loaded keys (STATEGEN_BENCH_KEYS sets
// another number; 10K under -short and in -benchtime=1x smoke runs), 10 map
// entries per key, lists of 100 values. Lists of 100 values on every key
// would make 50M list elements (gigabytes per backend), so the list
// operations pre-load keys/100 keys with 100 values each: as many elements
// as the value state has keys. Keys are int64, values []byte of
// STATEGEN_BENCH_VALUE_SIZE bytes (default 24, the size of the other
// benchmarks' Val24). STATEGEN_BENCH_DIST=zipf draws the accessed keys from
// a Zipf distribution (s=1.1: a few hot keys, a long tail; the hot keys are
// spread over the key space by a permutation) instead of uniformly.
//
// Operations that insert new keys or entries (valueAdd, listAdd, mapAdd)
// or grow lists (listAppend, listAddAll) and mapRemove, which empties the
// state, rebuild their fixture with the timer stopped whenever the state
// has doubled or emptied, so that every iteration measures the same
// workload however large b.N grows.

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/stategen/stategen/backends/btree"
	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/backends/pebble"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

// suiteBackend is a backend of the Flink suite: a name for the benchmark's
// backend=<name> key and a constructor.
type suiteBackend struct {
	name string
	new  func(cfg runtime.StoreConfig) (runtime.Store, error)
}

// suiteBackends lists the backends every Flink operation runs against.
// Adding a backend is one line here.
var suiteBackends = []suiteBackend{
	{"cow", func(cfg runtime.StoreConfig) (runtime.Store, error) { return cow.New(cow.Options{StoreConfig: cfg}) }},
	{"btree", func(cfg runtime.StoreConfig) (runtime.Store, error) {
		return btree.New(btree.Options{StoreConfig: cfg})
	}},
	{"pebble", func(cfg runtime.StoreConfig) (runtime.Store, error) {
		return pebble.New(pebble.Options{StoreConfig: cfg, InMemory: true})
	}},
	{"model", func(cfg runtime.StoreConfig) (runtime.Store, error) { return storetest.NewModel(cfg) }},
}

const (
	flinkDefaultKeys = 500_000
	flinkMapEntries  = 10  // map entries per key
	flinkListValues  = 100 // values per list, and per listUpdate/listAddAll
)

// flinkWorkload is the configuration shared by the Flink operations.
type flinkWorkload struct {
	keys      int
	valueSize int
	dist      string  // "uniform" or "zipf"
	order     []int64 // the keys accessed, in order: indexes into [0, keys)
	values    [][]byte
}

// flinkKeys returns STATEGEN_BENCH_KEYS, 10K for a smoke run, else 500K.
func flinkKeys(b *testing.B) int {
	if os.Getenv("STATEGEN_BENCH_KEYS") != "" || testing.Short() || smokeRun() {
		return benchKeys(b)
	}
	return flinkDefaultKeys
}

func newFlinkWorkload(b *testing.B) *flinkWorkload {
	w := &flinkWorkload{keys: flinkKeys(b), valueSize: 24, dist: "uniform"}
	if s := os.Getenv("STATEGEN_BENCH_VALUE_SIZE"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > 1<<20 {
			b.Fatalf("STATEGEN_BENCH_VALUE_SIZE=%q: want a number of bytes between 0 and 1048576", s)
		}
		w.valueSize = n
	}
	if s := os.Getenv("STATEGEN_BENCH_DIST"); s != "" {
		if s != "uniform" && s != "zipf" {
			b.Fatalf("STATEGEN_BENCH_DIST=%q: want uniform or zipf", s)
		}
		w.dist = s
	}
	if w.dist == "zipf" {
		spread := perm(w.keys, 7)
		z := rand.NewZipf(rand.New(rand.NewPCG(8, 1)), 1.1, 1, uint64(w.keys-1))
		w.order = make([]int64, w.keys)
		for i := range w.order {
			w.order[i] = spread[z.Uint64()]
		}
	} else {
		w.order = perm(w.keys, 2)
	}
	r := rand.New(rand.NewPCG(9, 1))
	w.values = make([][]byte, 64)
	for i := range w.values {
		v := make([]byte, w.valueSize)
		for j := range v {
			v[j] = byte(r.Uint32())
		}
		w.values[i] = v
	}
	return w
}

func (w *flinkWorkload) value(i int) []byte { return w.values[i%len(w.values)] }

// key returns the key of the i-th access among n keys.
func (w *flinkWorkload) key(i, n int) int64 { return w.order[i%len(w.order)] % int64(n) }

// listKeys is the number of keys of the list operations.
func (w *flinkWorkload) listKeys() int { return max(1, w.keys/flinkListValues) }

func (w *flinkWorkload) list() [][]byte {
	l := make([][]byte, flinkListValues)
	for i := range l {
		l[i] = w.value(i)
	}
	return l
}

func newSuiteStore(b *testing.B, be suiteBackend) runtime.Store {
	s, err := be.new(runtime.StoreConfig{})
	check(b, err)
	return s
}

func (w *flinkWorkload) valueState(b *testing.B, be suiteBackend, preload int) runtime.Value[int64, []byte] {
	v, err := runtime.NewValue(newSuiteStore(b, be), runtime.ValueDescriptor[int64, []byte]{Name: "v", Key: runtime.Int64Codec{}, Value: runtime.BytesCodec{}})
	check(b, err)
	for k := range preload {
		check(b, v.Put(int64(k), w.value(k)))
	}
	return v
}

func (w *flinkWorkload) listState(b *testing.B, be suiteBackend) runtime.List[int64, []byte] {
	l, err := runtime.NewList(newSuiteStore(b, be), runtime.ListDescriptor[int64, []byte]{Name: "l", Key: runtime.Int64Codec{}, Value: runtime.BytesCodec{}})
	check(b, err)
	vs := w.list()
	for k := range w.listKeys() {
		check(b, l.AddAll(int64(k), vs))
	}
	return l
}

func (w *flinkWorkload) mapState(b *testing.B, be suiteBackend) runtime.Map[int64, int64, []byte] {
	m, err := runtime.NewMap(newSuiteStore(b, be), runtime.MapDescriptor[int64, int64, []byte]{Name: "m", Key: runtime.Int64Codec{}, UserKey: runtime.Int64Codec{}, Value: runtime.BytesCodec{}})
	check(b, err)
	for k := range w.keys {
		for uk := range flinkMapEntries {
			check(b, m.Put(int64(k), int64(uk), w.value(k+uk)))
		}
	}
	return m
}

// flinkFixtures builds the pre-loaded states of one backend lazily, once
// per benchmark run rather than once per b.N ramp-up step: operations that
// only read, overwrite, or grow a state by at most what they rebuild take
// them from here.
type flinkFixtures struct {
	values func(b *testing.B) runtime.Value[int64, []byte]
	lists  func(b *testing.B) runtime.List[int64, []byte]
	maps   func(b *testing.B) runtime.Map[int64, int64, []byte]
}

func newFlinkFixtures(w *flinkWorkload, be suiteBackend) *flinkFixtures {
	return &flinkFixtures{
		values: lazyB(func(b *testing.B) runtime.Value[int64, []byte] { return w.valueState(b, be, w.keys) }),
		lists:  lazyB(func(b *testing.B) runtime.List[int64, []byte] { return w.listState(b, be) }),
		maps:   lazyB(func(b *testing.B) runtime.Map[int64, int64, []byte] { return w.mapState(b, be) }),
	}
}

// lazyB is lazy for builders that may fail the benchmark: the first call
// builds with the calling benchmark's b, so that a failure is reported on
// the goroutine that runs it. Calls are sequential (one benchmark at a
// time), so it needs no lock.
func lazyB[T any](build func(b *testing.B) T) func(b *testing.B) T {
	var built bool
	var v T
	return func(b *testing.B) T {
		if !built {
			v, built = build(b), true
		}
		return v
	}
}

// flinkOp is one operation of the suite: run measures b.N operations of
// backend be.
type flinkOp struct {
	name string
	run  func(b *testing.B, w *flinkWorkload, be suiteBackend, fx *flinkFixtures)
}

var flinkOps = []flinkOp{
	{"valueGet", func(b *testing.B, w *flinkWorkload, be suiteBackend, fx *flinkFixtures) {
		v := fx.values(b)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			x, ok, err := v.Get(w.key(i, w.keys))
			if !ok || err != nil || len(x) != w.valueSize {
				b.Fatal("valueGet: missing value", err)
			}
		}
	}},
	{"valueUpdate", func(b *testing.B, w *flinkWorkload, be suiteBackend, fx *flinkFixtures) {
		v := fx.values(b)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			check(b, v.Put(w.key(i, w.keys), w.value(i)))
		}
	}},
	{"valueAdd", func(b *testing.B, w *flinkWorkload, be suiteBackend, fx *flinkFixtures) {
		// New keys above the pre-loaded ones, until the state has doubled.
		var v runtime.Value[int64, []byte]
		for i := 0; i < b.N; i++ {
			if i%w.keys == 0 {
				b.StopTimer()
				v = w.valueState(b, be, w.keys)
				b.StartTimer()
			}
			check(b, v.Put(int64(w.keys+i%w.keys), w.value(i)))
		}
	}},
	{"listGet", func(b *testing.B, w *flinkWorkload, be suiteBackend, fx *flinkFixtures) {
		l, n := fx.lists(b), w.listKeys()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			c := 0
			for x, err := range l.All(w.key(i, n)) {
				check(b, err)
				if len(x) != w.valueSize {
					b.Fatalf("listGet: element of %d bytes", len(x))
				}
				c++
			}
			if c != flinkListValues {
				b.Fatalf("listGet: list of %d values, want %d", c, flinkListValues)
			}
		}
	}},
	{"listAdd", func(b *testing.B, w *flinkWorkload, be suiteBackend, fx *flinkFixtures) {
		// One value into the list of a key that has none, until as many
		// new keys as pre-loaded ones have lists.
		var l runtime.List[int64, []byte]
		n := w.listKeys()
		for i := 0; i < b.N; i++ {
			if i%n == 0 {
				b.StopTimer()
				l = w.listState(b, be)
				b.StartTimer()
			}
			check(b, l.Add(int64(n+i%n), w.value(i)))
		}
	}},
	{"listAppend", func(b *testing.B, w *flinkWorkload, be suiteBackend, fx *flinkFixtures) {
		// One value onto an existing 100-value list, until the lists have
		// doubled.
		var l runtime.List[int64, []byte]
		n := w.listKeys()
		for i := 0; i < b.N; i++ {
			if i%(n*flinkListValues) == 0 {
				b.StopTimer()
				l = w.listState(b, be)
				b.StartTimer()
			}
			check(b, l.Add(w.key(i, n), w.value(i)))
		}
	}},
	{"listUpdate", func(b *testing.B, w *flinkWorkload, be suiteBackend, fx *flinkFixtures) {
		l, n, vs := fx.lists(b), w.listKeys(), w.list()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			check(b, l.Update(w.key(i, n), vs))
		}
	}},
	{"listAddAll", func(b *testing.B, w *flinkWorkload, be suiteBackend, fx *flinkFixtures) {
		// 100 values onto an existing list, until the lists have doubled.
		var l runtime.List[int64, []byte]
		n, vs := w.listKeys(), w.list()
		for i := 0; i < b.N; i++ {
			if i%n == 0 {
				b.StopTimer()
				l = w.listState(b, be)
				b.StartTimer()
			}
			check(b, l.AddAll(w.key(i, n), vs))
		}
	}},
	{"mapGet", func(b *testing.B, w *flinkWorkload, be suiteBackend, fx *flinkFixtures) {
		m := fx.maps(b)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			x, ok, err := m.Get(w.key(i, w.keys), int64(i%flinkMapEntries))
			if !ok || err != nil || len(x) != w.valueSize {
				b.Fatal("mapGet: missing entry", err)
			}
		}
	}},
	{"mapUpdate", func(b *testing.B, w *flinkWorkload, be suiteBackend, fx *flinkFixtures) {
		m := fx.maps(b)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			check(b, m.Put(w.key(i, w.keys), int64(i%flinkMapEntries), w.value(i)))
		}
	}},
	{"mapAdd", func(b *testing.B, w *flinkWorkload, be suiteBackend, fx *flinkFixtures) {
		// New user keys into existing maps, until the maps have doubled.
		var m runtime.Map[int64, int64, []byte]
		total := w.keys * flinkMapEntries
		for i := 0; i < b.N; i++ {
			j := i % total
			if j == 0 {
				b.StopTimer()
				m = w.mapState(b, be)
				b.StartTimer()
			}
			check(b, m.Put(int64(j%w.keys), int64(flinkMapEntries+j/w.keys), w.value(i)))
		}
	}},
	{"mapContains", func(b *testing.B, w *flinkWorkload, be suiteBackend, fx *flinkFixtures) {
		// Half of the user keys asked for exist.
		m := fx.maps(b)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			uk := int64(i % (2 * flinkMapEntries))
			ok, err := m.Contains(w.key(i, w.keys), uk)
			check(b, err)
			if ok != (uk < flinkMapEntries) {
				b.Fatalf("mapContains(%d) = %v", uk, ok)
			}
		}
	}},
	{"mapRemove", func(b *testing.B, w *flinkWorkload, be suiteBackend, fx *flinkFixtures) {
		// Every entry once, in a random order of keys, then start over.
		var m runtime.Map[int64, int64, []byte]
		total := w.keys * flinkMapEntries
		keys := perm(w.keys, 10)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			j := i % total
			if j == 0 {
				b.StopTimer()
				m = w.mapState(b, be)
				b.StartTimer()
			}
			check(b, m.Delete(keys[j%w.keys], int64(j/w.keys)))
		}
	}},
	{"mapIterator", func(b *testing.B, w *flinkWorkload, be suiteBackend, fx *flinkFixtures) {
		m := fx.maps(b)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			c := 0
			for e, err := range m.All(w.key(i, w.keys)) {
				check(b, err)
				if len(e.Value) != w.valueSize {
					b.Fatalf("mapIterator: value of %d bytes", len(e.Value))
				}
				c++
			}
			if c != flinkMapEntries {
				b.Fatalf("mapIterator: %d entries, want %d", c, flinkMapEntries)
			}
		}
	}},
	{"mapKeys", func(b *testing.B, w *flinkWorkload, be suiteBackend, fx *flinkFixtures) {
		m := fx.maps(b)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			c := 0
			for uk, err := range m.Keys(w.key(i, w.keys)) {
				check(b, err)
				if uk < 0 || uk >= flinkMapEntries {
					b.Fatalf("mapKeys: user key %d", uk)
				}
				c++
			}
			if c != flinkMapEntries {
				b.Fatalf("mapKeys: %d keys, want %d", c, flinkMapEntries)
			}
		}
	}},
	{"mapValues", func(b *testing.B, w *flinkWorkload, be suiteBackend, fx *flinkFixtures) {
		m := fx.maps(b)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			c := 0
			for v, err := range m.Values(w.key(i, w.keys)) {
				check(b, err)
				if len(v) != w.valueSize {
					b.Fatalf("mapValues: value of %d bytes", len(v))
				}
				c++
			}
			if c != flinkMapEntries {
				b.Fatalf("mapValues: %d values, want %d", c, flinkMapEntries)
			}
		}
	}},
}

// BenchmarkFlink runs the Flink state-benchmark operations against every
// backend of suiteBackends: BenchmarkFlink/<op>/backend=<name>/keys=<n>.
func BenchmarkFlink(b *testing.B) {
	w := lazyB(newFlinkWorkload)
	for _, op := range flinkOps {
		b.Run(op.name, func(b *testing.B) {
			for _, be := range suiteBackends {
				b.Run("backend="+be.name, func(b *testing.B) {
					fx := newFlinkFixtures(w(b), be)
					b.Run("keys="+sizeName(w(b).keys), func(b *testing.B) {
						b.ReportAllocs()
						op.run(b, w(b), be, fx)
					})
				})
			}
		})
	}
}
