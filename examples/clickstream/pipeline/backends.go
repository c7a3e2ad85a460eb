package pipeline

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stategen/stategen/backends/btree"
	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/backends/pebble"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
)

// NewStore makes an empty store of one backend for the key groups cfg
// names. dir is a fresh, empty directory the store may use for its files
// (an on-disk backend's data); in-memory backends ignore it.
type NewStore func(cfg runtime.StoreConfig, dir string) (runtime.Store, error)

// backends is the registry of the backends the example can run on. Adding
// a backend is one line.
var backends = map[string]NewStore{
	"cow": func(cfg runtime.StoreConfig, _ string) (runtime.Store, error) {
		return cow.New(cow.Options{StoreConfig: cfg})
	},
	"btree": func(cfg runtime.StoreConfig, _ string) (runtime.Store, error) {
		return btree.New(btree.Options{StoreConfig: cfg})
	},
	"pebble": func(cfg runtime.StoreConfig, dir string) (runtime.Store, error) {
		return pebble.New(pebble.Options{StoreConfig: cfg, Dir: dir})
	},
}

// DefaultBackend is the backend the example uses unless told otherwise: the
// embedded, in-memory copy-on-write hash table.
const DefaultBackend = "cow"

// Backends returns the names of the registered backends, sorted.
func Backends() []string {
	names := make([]string, 0, len(backends))
	for name := range backends {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// storeMaker returns the constructor of c's stores: its backend's, behind
// a checkpoint.Tracker if c is incremental. c has been validated.
func (c Config) storeMaker() NewStore {
	f, _ := lookupBackend(c.Backend)
	if !c.Incremental {
		return f
	}
	return func(cfg runtime.StoreConfig, dir string) (runtime.Store, error) {
		s, err := f(cfg, dir)
		if err != nil {
			return nil, err
		}
		return checkpoint.Track(s, nil)
	}
}

// lookupBackend returns the constructor of backend name, or an error that
// lists the backends that exist.
func lookupBackend(name string) (NewStore, error) {
	if f, ok := backends[name]; ok {
		return f, nil
	}
	return nil, fmt.Errorf("unknown backend %q (this build has: %s)", name, strings.Join(Backends(), ", "))
}
