package benchmarks

// Flat values: a 24-byte value with no pointer in it (flat.Value, three
// int64s, with the codec stategen generates), read and overwritten in
// random order under int64 and string keys, through the typed handles on
// cow against Go maps of the same Go values. The map is the limit of an
// in-memory point operation: unlike the Val of the other benchmarks, whose
// padding is a []byte the map's collector must trace, a map of flat
// values is never scanned.
//
//	BenchmarkFlatGet/key=int64/backend=cow/keys=1M
//	BenchmarkFlatGet/key=int64/backend=gomap/keys=1M
//	BenchmarkFlatGet/key=string/backend=gomap-rwmutex/keys=1M
//
// gomap is a plain map; gomap-rwmutex guards it with a sync.RWMutex, as a
// map shared with a checkpointing goroutine must be. cow keeps the values
// as Go values (the descriptors stategen generates set Typed:
// runtime.TypedValues); cow-bytes is the same state on cow kept as bytes,
// its descriptors without Typed, as every other backend keeps it.
//
// The keys are put in one random order and read in another, each put with
// a string key of its own: as in a job, where a key is stored when its
// first event comes and looked up with the key of a later event, a string
// decoded anew. A Go map holds a pointer to its string keys' bytes and
// compares them on a hit; read in the order they were put, with the very
// strings it holds, it would compare pointers and read its keys' bytes in
// address order, which no job does.

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/benchmarks/internal/flat"
	"github.com/stategen/stategen/runtime"
)

// flatKey is a key type of the flat benchmarks.
type flatKey interface{ int64 | string }

// flatTarget is one backend of the flat benchmarks, for keys K.
type flatTarget[K flatKey] interface {
	get(k K) (flat.Value, bool, error)
	put(k K, v flat.Value) error
}

// flatStore is a flat value state on cow.
type flatStore[K flatKey] struct{ v runtime.Value[K, flat.Value] }

func (s flatStore[K]) get(k K) (flat.Value, bool, error) { return s.v.Get(k) }
func (s flatStore[K]) put(k K, v flat.Value) error       { return s.v.Put(k, v) }

// flatMap is a plain Go map.
type flatMap[K flatKey] map[K]flat.Value

func (m flatMap[K]) get(k K) (flat.Value, bool, error) {
	v, ok := m[k]
	return v, ok, nil
}

func (m flatMap[K]) put(k K, v flat.Value) error {
	m[k] = v
	return nil
}

// flatLocked is a Go map behind a sync.RWMutex.
type flatLocked[K flatKey] struct {
	mu sync.RWMutex
	m  map[K]flat.Value
}

func (l *flatLocked[K]) get(k K) (flat.Value, bool, error) {
	l.mu.RLock()
	v, ok := l.m[k]
	l.mu.RUnlock()
	return v, ok, nil
}

func (l *flatLocked[K]) put(k K, v flat.Value) error {
	l.mu.Lock()
	l.m[k] = v
	l.mu.Unlock()
	return nil
}

// flatKeys returns the keys of the flat benchmarks, in access order: the
// workload's order of n int64 keys, and string keys made of them.
func flatKeys[K flatKey](w *workload, n int) []K {
	order := w.order(n)
	keys := make([]K, len(order))
	for i, k := range order {
		switch p := any(&keys[i]).(type) {
		case *int64:
			*p = k
		case *string:
			*p = fmt.Sprintf("user-%09d", k)
		}
	}
	return keys
}

// flatTargets returns each backend of the flat benchmarks, filled with
// copies of the keys, in another random order than theirs, the key of
// keys[i] with the value {A: i}.
func flatTargets[K flatKey](b *testing.B, keys []K, st func(*flat.State) runtime.Value[K, flat.Value]) []struct {
	name string
	t    flatTarget[K]
	done func()
} {
	s, err := cow.New(cow.Options{})
	check(b, err)
	state, err := flat.OpenState(s)
	check(b, err)
	// cow-bytes: the same state kept as bytes, as without the typed path
	// (the descriptors without Typed).
	bs, err := cow.New(cow.Options{})
	check(b, err)
	d := flat.DescribeState()
	d.ByInt.Typed, d.ByString.Typed = runtime.TypedTable[int64, flat.Value]{}, runtime.TypedTable[string, flat.Value]{}
	bstate := new(flat.State)
	bstate.ByInt, err = runtime.NewValue(bs, d.ByInt)
	check(b, err)
	bstate.ByString, err = runtime.NewValue(bs, d.ByString)
	check(b, err)
	fill := perm(len(keys), 3)
	m := make(flatMap[K], len(keys))
	locked := &flatLocked[K]{m: make(map[K]flat.Value, len(keys))}
	targets := []struct {
		name string
		t    flatTarget[K]
		done func()
	}{
		{"cow", flatStore[K]{st(state)}, func() { check(b, s.Close()) }},
		{"cow-bytes", flatStore[K]{st(bstate)}, func() { check(b, bs.Close()) }},
		{"gomap", m, func() {}},
		{"gomap-rwmutex", locked, func() {}},
	}
	for _, t := range targets {
		for _, i := range fill {
			check(b, t.t.put(cloneKey(keys[i]), flat.Value{A: int64(i)}))
		}
	}
	return targets
}

// benchFlat runs op over every flat target with int64 and with string
// keys.
func benchFlat(b *testing.B, op func(b *testing.B, t flatTarget[int64], keys []int64, i int), sop func(b *testing.B, t flatTarget[string], keys []string, i int)) {
	w := load(b)
	benchFlatKeys(b, w, "int64", func(s *flat.State) runtime.Value[int64, flat.Value] { return s.ByInt }, op)
	benchFlatKeys(b, w, "string", func(s *flat.State) runtime.Value[string, flat.Value] { return s.ByString }, sop)
}

// benchFlatKeys runs op over every flat target with keys K, as
// key=<name>/backend=<target>/keys=<n>; state picks the generated handle
// of keys K.
func benchFlatKeys[K flatKey](b *testing.B, w *workload, name string, state func(*flat.State) runtime.Value[K, flat.Value], op func(b *testing.B, t flatTarget[K], keys []K, i int)) {
	n := w.keys
	b.Run("key="+name, func(b *testing.B) {
		keys := flatKeys[K](w, n)
		for _, t := range flatTargets(b, keys, state) {
			b.Run("backend="+t.name+"/keys="+sizeName(n), func(b *testing.B) {
				for i := 0; b.Loop(); i++ {
					op(b, t.t, keys, i)
				}
			})
			t.done()
		}
	})
}

// cloneKey returns a copy of k that shares no memory with it: the key a
// target stores, as a job's state stores the key of an earlier event.
func cloneKey[K flatKey](k K) K {
	if p, ok := any(&k).(*string); ok {
		*p = strings.Clone(*p)
	}
	return k
}

// flatSink keeps the values read alive.
var flatSink flat.Value

func flatGet[K flatKey](b *testing.B, t flatTarget[K], keys []K, i int) {
	v, ok, err := t.get(keys[i%len(keys)])
	if !ok || err != nil {
		b.Fatalf("Get of key %d: found %v, %v", i%len(keys), ok, err)
	}
	flatSink = v
}

func flatPut[K flatKey](b *testing.B, t flatTarget[K], keys []K, i int) {
	if err := t.put(keys[i%len(keys)], flat.Value{A: int64(i), B: 1, C: 2}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkFlatGet reads the value of a key.
func BenchmarkFlatGet(b *testing.B) { benchFlat(b, flatGet[int64], flatGet[string]) }

// BenchmarkFlatPut overwrites the value of a key.
func BenchmarkFlatPut(b *testing.B) { benchFlat(b, flatPut[int64], flatPut[string]) }
