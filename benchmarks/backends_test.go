package benchmarks

// The backends every benchmark runs on, and the target interface through
// which a benchmark drives one: stategen's stores through the typed handles,
// and the plain baselines (a Go map, raw tidwall/btree, raw Pebble) doing
// the same work on the same data.

import (
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"testing"

	"github.com/stategen/stategen/backends/btree"
	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/backends/pebble"
	"github.com/stategen/stategen/runtime"
)

// storeBackend is one of stategen's backends: open returns an empty store
// of cfg, working in dir (a directory that does not exist yet) if it keeps
// files.
type storeBackend struct {
	name string
	open func(dir string, cfg runtime.StoreConfig) (runtime.Store, error)
}

// stores lists stategen's backends. Every benchmark runs on each of them
// (the rescale benchmark too): adding a backend is one line here.
var stores = []storeBackend{
	{"cow", func(_ string, cfg runtime.StoreConfig) (runtime.Store, error) {
		return cow.New(cow.Options{StoreConfig: cfg})
	}},
	{"btree", func(_ string, cfg runtime.StoreConfig) (runtime.Store, error) {
		return btree.New(btree.Options{StoreConfig: cfg})
	}},
	{"pebble", func(dir string, cfg runtime.StoreConfig) (runtime.Store, error) {
		return pebble.New(pebble.Options{StoreConfig: cfg, Dir: dir})
	}},
}

// baselines are the backend=<name> values that are no stategen backend:
// the floor each kind of backend is measured against. Each implements
// target directly on its structure.
var baselines = []backend{
	{"gomap", func(string) (target, error) { return newGoMap(), nil }},
	{"btree-raw", func(string) (target, error) { return newRawBtree(), nil }},
	{"pebble-raw", openRawPebble},
}

// backend is one backend=<name> value of the benchmarks: open returns an
// empty target working in dir, a directory that does not exist yet.
type backend struct {
	name string
	open func(dir string) (target, error)
}

// allBackends returns the stores, through the typed handles, and then the
// baselines.
func allBackends() []backend {
	var out []backend
	for _, s := range stores {
		out = append(out, backend{s.name, func(dir string) (target, error) { return openStoreTarget(s, dir) }})
	}
	return append(out, baselines...)
}

// target is the state of one backend under benchmark: a value state, a list
// state, a map state and a sorted map state, all of int64 keys (and user
// keys) and Val values, and snapshots of all four. Methods that read
// several values decode every one and return their number.
//
// Every backend's target is called through this interface, so every one
// pays the same dynamic call per operation.
type target interface {
	getValue(k int64) (Val, bool, error)
	putValue(k int64, v Val) error
	// updateValue sets k's value to fn(old, found): a read-modify-write.
	updateValue(k int64, fn func(old Val, found bool) Val) error
	addList(k int64, v Val) error
	addAllList(k int64, vs []Val) error
	updateList(k int64, vs []Val) error
	readList(k int64) (int, error)
	getMap(k, uk int64) (Val, bool, error)
	putMap(k, uk int64, v Val) error
	// updateMap sets uk in k's map to fn(old, found): a read-modify-write.
	updateMap(k, uk int64, fn func(old Val, found bool) Val) error
	containsMap(k, uk int64) (bool, error)
	deleteMap(k, uk int64) error
	readMap(k int64, part mapPart) (int, error)
	putSorted(k, uk int64, v Val) error
	readRange(k, from, to int64) (int, error)
	// snapshot runs the synchronous phase of a snapshot of all four states.
	snapshot() (frozen, error)
	close() error
}

// mapPart says what readMap decodes: whole entries, user keys or values.
type mapPart uint8

const (
	partEntries mapPart = iota
	partKeys
	partValues
)

// frozen is a snapshot: an immutable view that another goroutine may scan
// while the target changes.
type frozen interface {
	// scan reads every entry and returns their number and the bytes of their
	// encoded keys, user keys and values.
	scan() (entries, bytes int64, err error)
	release() error
}

// storeTarget is a target on a stategen store, through the typed handles.
type storeTarget struct {
	s      runtime.Store
	value  runtime.Value[int64, Val]
	list   runtime.List[int64, Val]
	m      runtime.Map[int64, int64, Val]
	sorted runtime.SortedMap[int64, int64, Val]
}

// openStoreTarget opens a store and registers its four states, in the order
// the pebble-raw baseline assumes (state ids 0 to 3).
func openStoreTarget(sb storeBackend, dir string) (target, error) {
	s, err := sb.open(dir, runtime.StoreConfig{})
	if err != nil {
		return nil, err
	}
	t := &storeTarget{s: s}
	if t.value, err = runtime.NewValue(s, runtime.ValueDescriptor[int64, Val]{Name: "value", Key: int64Codec, Value: valCodec{}}); err == nil {
		if t.list, err = runtime.NewList(s, runtime.ListDescriptor[int64, Val]{Name: "list", Key: int64Codec, Value: valCodec{}}); err == nil {
			d := runtime.MapDescriptor[int64, int64, Val]{Name: "map", Key: int64Codec, UserKey: int64Codec, Value: valCodec{}}
			if t.m, err = runtime.NewMap(s, d); err == nil {
				d.Name = "sorted"
				t.sorted, err = runtime.NewSortedMap(s, d)
			}
		}
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return t, nil
}

func (t *storeTarget) getValue(k int64) (Val, bool, error) { return t.value.Get(k) }
func (t *storeTarget) putValue(k int64, v Val) error       { return t.value.Put(k, v) }
func (t *storeTarget) updateValue(k int64, fn func(Val, bool) Val) error {
	return t.value.Update(k, fn)
}
func (t *storeTarget) addList(k int64, v Val) error       { return t.list.Add(k, v) }
func (t *storeTarget) addAllList(k int64, vs []Val) error { return t.list.AddAll(k, vs) }
func (t *storeTarget) updateList(k int64, vs []Val) error { return t.list.Replace(k, vs) }

func (t *storeTarget) readList(k int64) (int, error) {
	n := 0
	for v, err := range t.list.All(k) {
		if err != nil {
			return n, err
		}
		sink = v
		n++
	}
	return n, nil
}

func (t *storeTarget) getMap(k, uk int64) (Val, bool, error) { return t.m.Get(k, uk) }
func (t *storeTarget) putMap(k, uk int64, v Val) error       { return t.m.Put(k, uk, v) }
func (t *storeTarget) updateMap(k, uk int64, fn func(Val, bool) Val) error {
	return t.m.Update(k, uk, fn)
}
func (t *storeTarget) containsMap(k, uk int64) (bool, error) { return t.m.Contains(k, uk) }
func (t *storeTarget) deleteMap(k, uk int64) error           { return t.m.Delete(k, uk) }
func (t *storeTarget) putSorted(k, uk int64, v Val) error    { return t.sorted.Put(k, uk, v) }
func (t *storeTarget) snapshot() (frozen, error)             { return storeSnapshot(t.s) }
func (t *storeTarget) close() error                          { return t.s.Close() }
func (t *storeTarget) readRange(k, from, to int64) (int, error) {
	return readEntries(t.sorted.Range(k, from, to))
}

func (t *storeTarget) readMap(k int64, part mapPart) (int, error) {
	n := 0
	switch part {
	case partKeys:
		for uk, err := range t.m.Keys(k) {
			if err != nil {
				return n, err
			}
			sink.A = uk
			n++
		}
	case partValues:
		for v, err := range t.m.Values(k) {
			if err != nil {
				return n, err
			}
			sink = v
			n++
		}
	default:
		return readEntries(t.m.All(k))
	}
	return n, nil
}

func readEntries(seq runtime.Seq[runtime.MapEntry[int64, Val]]) (int, error) {
	n := 0
	for e, err := range seq {
		if err != nil {
			return n, err
		}
		sink = e.Value
		n++
	}
	return n, nil
}

type viewSnapshot struct{ runtime.Snapshot }

func storeSnapshot(s runtime.Store) (frozen, error) {
	snap, err := s.Snapshot()
	if err != nil {
		return nil, err
	}
	return viewSnapshot{snap}, nil
}

func (v viewSnapshot) scan() (entries, bytes int64, err error) { return scanView(v.Snapshot) }
func (v viewSnapshot) release() error                          { return v.Release() }

// scanView reads every entry of every state and key group of v, as the
// checkpoint writer does, and returns the number of entries and their bytes
// (key, namespace, user key, value).
func scanView(v runtime.View) (entries, bytes int64, err error) {
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

// A fixture is the state of one backend that a benchmark reads and
// writes: built on first use, shared by the -count runs of the benchmark,
// rebuilt (with the timer stopped) when an operation has used it up, and
// closed when the benchmark of the backend ends.
type fixture struct {
	be    backend
	owner *testing.B // the backend's benchmark: it outlives every run
	n     int        // entries of the filled state
	fill  filler
	t     target
	dir   string
	gen   int
	used  int   // operations since the fixture was built
	c0    int64 // process CPU time at the first iteration of the run
	pause int64 // process CPU time of the run spent with the timer stopped
}

// filler fills a target with a state of n entries.
type filler func(b *testing.B, w *workload, t target, n int)

// newFixture returns the fixture of backend be for the benchmark owner,
// filled by fill with n entries (fill may be nil: an empty state).
func newFixture(owner *testing.B, be backend, n int, fill filler) *fixture {
	f := &fixture{be: be, owner: owner, n: n, fill: fill}
	owner.Cleanup(func() {
		if err := f.drop(); err != nil {
			owner.Error(err)
		}
	})
	return f
}

// get returns the target, building it first if needed.
func (f *fixture) get(b *testing.B) target {
	if f.t == nil {
		f.build(b)
	}
	return f.t
}

func (f *fixture) build(b *testing.B) {
	check(b, f.drop())
	f.gen++
	f.dir = filepath.Join(f.owner.TempDir(), fmt.Sprintf("%s-%d", f.be.name, f.gen))
	t, err := f.be.open(f.dir)
	check(b, err)
	f.t, f.used = t, 0
	if f.fill != nil {
		f.fill(b, load(b), t, f.n)
	}
	// Measure from a settled heap: a GC cycle that the fill (or the
	// previous fixture's garbage) started would otherwise mark into the
	// measured loop, on the other core and through write barriers, and
	// charge one backend for another's garbage.
	goruntime.GC()
}

// drop closes the target and deletes its files.
func (f *fixture) drop() error {
	if f.t == nil {
		return nil
	}
	err := f.t.close()
	f.t = nil
	if rerr := os.RemoveAll(f.dir); err == nil {
		err = rerr
	}
	return err
}

// step returns the number of operations since the fixture was built and
// counts one more, first rebuilding the fixture, with the timer stopped,
// when budget operations have used it up. Operations that insert or delete
// use it, so that every operation meets a state of the same size however
// large b.N grows.
func (f *fixture) step(b *testing.B, budget int) (target, int) {
	if f.t == nil || f.used >= budget {
		f.paused(b, func() { f.build(b) })
	}
	j := f.used
	f.used++
	return f.t, j
}

// loop is b.Loop, which the benchmarks of forEachCase call instead so
// that cpu-ns/op counts from the first iteration: setup before the loop
// is left out, as it is of ns/op.
func (f *fixture) loop(b *testing.B) bool {
	if !b.Loop() {
		return false
	}
	if f.c0 == 0 {
		f.c0 = cpuTime()
	}
	return true
}

// paused runs fn with the benchmark's timer stopped, and keeps its CPU
// time out of cpu-ns/op.
func (f *fixture) paused(b *testing.B, fn func()) {
	b.StopTimer()
	c := cpuTime()
	fn()
	f.pause += cpuTime() - c
	b.StartTimer()
}

// forEachBackend runs body as Benchmark<Op>/backend=<name>/keys=<n> for
// every backend, n the workload's number of keys, with a fixture filled by
// fill (nil: an empty state) and shared by the -count runs of one backend.
func forEachBackend(b *testing.B, fill filler, body func(b *testing.B, w *workload, f *fixture)) {
	forEachCase(b, []int{load(b).keys}, nil, fill, func(b *testing.B, w *workload, f *fixture, _ string) { body(b, w, f) })
}

// forEachCase is forEachBackend for states of each of sizes, and for each
// of cases (nil: one unnamed case) on every state:
// Benchmark<Op>/backend=<name>/keys=<size>/<case>, one fixture at a time,
// shared by the cases. body loops with f.loop(b) (b.Loop); forEachCase
// reports the process CPU time per operation, cpu-ns/op, beside ns/op: on
// a shared machine the CPU time is steadier than the wall time.
func forEachCase(b *testing.B, sizes []int, cases []string, fill filler, body func(b *testing.B, w *workload, f *fixture, c string)) {
	w := load(b)
	if cases == nil {
		cases = []string{""}
	}
	for _, be := range allBackends() {
		b.Run("backend="+be.name, func(b *testing.B) {
			for _, n := range sizes {
				f := newFixture(b, be, n, fill)
				for _, c := range cases {
					name := "keys=" + sizeName(n)
					if c != "" {
						name += "/" + c
					}
					b.Run(name, func(b *testing.B) {
						if fill != nil {
							f.get(b)
						}
						b.ReportAllocs()
						f.c0, f.pause = 0, 0
						body(b, w, f, c)
						if b.N > 0 && f.c0 != 0 {
							b.ReportMetric(float64(cpuTime()-f.c0-f.pause)/float64(b.N), "cpu-ns/op")
						}
					})
				}
				check(b, f.drop())
			}
		})
	}
}

// The fills of the four states: n entries each, in random order.

// fillValues fills the value state with keys [0, n), key k holding
// fresh(k), and reads every one back: the check of the fill warms Pebble's
// block cache.
func fillValues(b *testing.B, w *workload, t target, n int) {
	for _, k := range perm(n, 1) {
		check(b, t.putValue(k, w.fresh(int(k))))
	}
	for _, k := range perm(n, 1) {
		_, ok, err := t.getValue(k)
		if !ok || err != nil {
			b.Fatalf("value %d: missing after the fill (%v)", k, err)
		}
	}
}

// listKeys is the number of lists of a list state of n elements: n/listLen
// lists of listLen elements.
func listKeys(n int) int { return max(1, n/listLen) }

func fillLists(b *testing.B, w *workload, t target, n int) {
	vs := make([]Val, listLen)
	for _, k := range perm(listKeys(n), 1) {
		for j := range vs {
			vs[j] = w.fresh(int(k) + j)
		}
		check(b, t.addAllList(k, vs))
	}
	for k := range int64(listKeys(n)) {
		if n, err := t.readList(k); n != listLen || err != nil {
			b.Fatalf("list %d: %d elements after the fill, want %d (%v)", k, n, listLen, err)
		}
	}
}

// mapKeys is the number of maps of a map state of n entries: n/mapFanout
// maps of mapFanout entries.
func mapKeys(n int) int { return max(1, n/mapFanout) }

// sortedKeys is the number of sorted maps of a sorted map state of n
// entries: n/sortedFanout maps of sortedFanout entries.
func sortedKeys(n int) int { return max(1, n/sortedFanout) }

func fillMaps(b *testing.B, w *workload, t target, n int) {
	fillMapState(b, w, mapKeys(n), mapFanout, t.putMap, func(k int64) (int, error) { return t.readMap(k, partEntries) })
}

func fillSorted(b *testing.B, w *workload, t target, n int) {
	fillMapState(b, w, sortedKeys(n), sortedFanout, t.putSorted, func(k int64) (int, error) { return t.readRange(k, 0, sortedFanout) })
}

// fillMapState puts fanout entries into each of keys maps, entry e (key
// e/fanout, user key e%fanout) holding fresh(e), in random order, and
// checks with read that every map has them.
func fillMapState(b *testing.B, w *workload, keys, fanout int, put func(k, uk int64, v Val) error, read func(k int64) (int, error)) {
	for _, e := range perm(keys*fanout, 3) {
		check(b, put(e/int64(fanout), e%int64(fanout), w.fresh(int(e))))
	}
	for k := range int64(keys) {
		if n, err := read(k); n != fanout || err != nil {
			b.Fatalf("map %d: %d entries after the fill, want %d (%v)", k, n, fanout, err)
		}
	}
}
