package cow

import (
	"fmt"
	goruntime "runtime"

	"github.com/stategen/stategen/backends/internal/arena"
	"github.com/stategen/stategen/runtime"
)

// Options configures a Store. The zero value of every field means its
// default; New applies the defaults in one place (Options.withDefaults).
type Options struct {
	// StoreConfig is the job's maxParallelism and the key groups the store
	// owns (default: all of DefaultMaxParallelism).
	runtime.StoreConfig

	// MaxSlabSize is the size of the largest slab a table allocates; the
	// slabs of a table grow from 512 bytes to it as the table grows, and a
	// value, list or tree node larger than half of it gets a slab of its
	// own. Default 1 MiB, which is also the maximum; at least 1 KiB.
	MaxSlabSize int

	// CompactionMinGarbage is the least garbage, in bytes, that makes a
	// table compact itself; a table compacts when its garbage (entries
	// overwritten or deleted, pages and nodes copied for snapshots) exceeds
	// both this and its live bytes. Default 64 KiB; tests set 1 to compact
	// as often as possible.
	CompactionMinGarbage int

	// OnLeakedSnapshot, if set, is called when a snapshot becomes
	// unreachable without having been released. The store releases such a
	// snapshot itself (so that copy-on-write stops), but a leak is a bug in
	// the caller: this hook reports it. It runs on a runtime cleanup
	// goroutine and receives the snapshot's sequence number (1 for the
	// store's first snapshot).
	OnLeakedSnapshot func(seq uint64)

	// RestoreConcurrency is how many goroutines Restore loads key groups
	// on: each takes the next key group not yet loaded and bulk-loads every
	// restored state of it, with staging buffers of its own, so the View is
	// scanned for that many key groups at once (which runtime.View allows).
	// 1 loads the key groups one after the other on the calling goroutine.
	// Default DefaultRestoreConcurrency(); at most MaxRestoreConcurrency.
	// Restore never runs more goroutines than it has key groups to load.
	RestoreConcurrency int

	// DisableEntryIndex turns off the entry index of Map and SortedMap
	// states (backends/btree has one of the same name, for its value and
	// map states): per state and key group, a hash table of the map entries
	// that reads found, which answers a later Get, Contains or Update of
	// them with one probe rather than the (key, namespace) lookup and a
	// B-tree descent (see "The entry index" in the package doc). It costs
	// 40 bytes and more per entry read (a load of at most 3/4), up to four
	// times the live bytes of the table, at least 16 KiB; off, every map
	// read descends its tree.
	DisableEntryIndex bool
}

// MaxDefaultRestoreConcurrency caps DefaultRestoreConcurrency: beyond a
// few goroutines a restore is bound by memory bandwidth and the View.
const MaxDefaultRestoreConcurrency = 8

// MaxRestoreConcurrency bounds Options.RestoreConcurrency.
const MaxRestoreConcurrency = 256

// DefaultRestoreConcurrency is the RestoreConcurrency of Options that do
// not set one: GOMAXPROCS, at most MaxDefaultRestoreConcurrency.
func DefaultRestoreConcurrency() int {
	return min(goruntime.GOMAXPROCS(0), MaxDefaultRestoreConcurrency)
}

const (
	defaultMaxSlabSize = arena.MaxSlabSize
	minMaxSlabSize     = 1 << 10
	defaultMinGarbage  = 64 << 10
)

// withDefaults validates o and fills in its defaults.
func (o Options) withDefaults() (Options, error) {
	cfg, err := o.StoreConfig.Normalize()
	if err != nil {
		return o, fmt.Errorf("cow: %w", err)
	}
	o.StoreConfig = cfg
	switch {
	case o.MaxSlabSize == 0:
		o.MaxSlabSize = defaultMaxSlabSize
	case o.MaxSlabSize < minMaxSlabSize || o.MaxSlabSize > defaultMaxSlabSize:
		return o, fmt.Errorf("cow: MaxSlabSize %d is outside [%d, %d]", o.MaxSlabSize, minMaxSlabSize, defaultMaxSlabSize)
	}
	switch {
	case o.CompactionMinGarbage == 0:
		o.CompactionMinGarbage = defaultMinGarbage
	case o.CompactionMinGarbage < 0:
		return o, fmt.Errorf("cow: CompactionMinGarbage %d is negative", o.CompactionMinGarbage)
	}
	switch {
	case o.RestoreConcurrency == 0:
		o.RestoreConcurrency = DefaultRestoreConcurrency()
	case o.RestoreConcurrency < 0 || o.RestoreConcurrency > MaxRestoreConcurrency:
		return o, fmt.Errorf("cow: RestoreConcurrency %d is outside [1, %d]", o.RestoreConcurrency, MaxRestoreConcurrency)
	}
	return o, nil
}
