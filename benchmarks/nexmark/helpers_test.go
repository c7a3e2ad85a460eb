package nexmark

// What the tests and the benchmarks share: the backends, cached streams
// and plain-Go outputs, and a run on a store.

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stategen/stategen/backends/btree"
	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/backends/pebble"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
)

// seed is the seed of every stream of the tests and benchmarks.
const seed = 42

// backend is one of stategen's backends: open returns an empty store that
// keeps its files, if any, in dir (a directory that does not exist yet).
type backend struct {
	name string
	open func(dir string) (runtime.Store, error)
}

// backends are stategen's backends; pebble works on disk, as a job's
// would. cow-tracked is cow behind a checkpoint.Tracker, as a job with
// incremental checkpoints runs it: the checkpointer then completes the
// Tracker's checkpoints, so that each writes what changed since the last.
var backends = []backend{
	{"cow", func(string) (runtime.Store, error) { return cow.New(cow.Options{}) }},
	{"btree", func(string) (runtime.Store, error) { return btree.New(btree.Options{}) }},
	{"pebble", func(dir string) (runtime.Store, error) { return pebble.New(pebble.Options{Dir: dir}) }},
	{"cow-tracked", func(string) (runtime.Store, error) {
		s, err := cow.New(cow.Options{})
		if err != nil {
			return nil, err
		}
		return checkpoint.Track(s, nil)
	}},
}

var (
	cacheMu     sync.Mutex
	streamCache = map[int][]Event{}
	plainCache  = map[string]*Output{}
)

// stream returns the first n events of the stream of seed, generated once.
func stream(n int) []Event {
	cacheMu.Lock()
	defer cacheMu.Unlock()
	if s, ok := streamCache[n]; ok {
		return s
	}
	s := Generate(seed, n)
	streamCache[n] = s
	return s
}

// plainOutput returns the rows of query name in plain Go on stream(n),
// computed once.
func plainOutput(tb testing.TB, name string, n int) *Output {
	events := stream(n)
	key := fmt.Sprintf("%s/%d", name, n)
	cacheMu.Lock()
	defer cacheMu.Unlock()
	if out, ok := plainCache[key]; ok {
		return out
	}
	out := &Output{}
	q, err := NewPlain(name, out)
	if err != nil {
		tb.Fatal(err)
	}
	if err := Run(q, events, nil); err != nil {
		tb.Fatal(err)
	}
	plainCache[key] = out
	return out
}

// runOnStore runs query name on a new store of be, in dir, over events,
// calling after (if not nil) at every watermark, and returns its rows and
// the store, which the caller closes.
func runOnStore(be backend, dir, name string, events []Event, after func(runtime.Store) func(int) error) (*Output, runtime.Store, error) {
	store, err := be.open(dir)
	if err != nil {
		return nil, nil, err
	}
	out := &Output{}
	q, err := NewQuery(name, store, out)
	if err == nil {
		var fn func(int) error
		if after != nil {
			fn = after(store)
		}
		err = Run(q, events, fn)
	}
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	return out, store, nil
}

// entries returns the number of entries a store holds, over every state
// and key group: 0 once every window has fired and every state expired.
func entries(store runtime.Store) (int, error) {
	snap, err := store.Snapshot()
	if err != nil {
		return 0, err
	}
	defer snap.Release()
	n := 0
	for _, spec := range snap.States() {
		for kg := range snap.KeyGroups().All() {
			if err := snap.Scan(spec.Name, kg, func(runtime.Entry) error { n++; return nil }); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}
