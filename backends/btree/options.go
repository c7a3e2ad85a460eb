package btree

import (
	"fmt"

	"github.com/stategen/stategen/backends/internal/arena"

	"github.com/stategen/stategen/runtime"
)

// Options configures a Store. The zero value of every field means its
// default; New applies the defaults in one place (Options.withDefaults).
type Options struct {
	// StoreConfig is the job's maxParallelism and the key groups the store
	// owns (default: all DefaultMaxParallelism key groups).
	runtime.StoreConfig

	// Degree is the degree of every B-tree: a node holds at most
	// 2*Degree-1 items. Default 32 (nodes of up to 63 items, the
	// tidwall/btree default); at least 2, at most 256. Small degrees make
	// deep trees with frequent splits and merges, which tests use to
	// exercise copy-on-write; large degrees make copy-on-write copy more
	// bytes per node.
	Degree int

	// MaxSlabSize is the size of the largest slab of a tree's arena; the
	// slabs of a tree grow from 512 bytes to it as the tree grows, and a
	// value or list region larger than half of it gets a slab of its own.
	// Default 1 MiB, which is also the maximum; at least 1 KiB.
	MaxSlabSize int

	// CompactionMinGarbage is the least garbage, in bytes, that makes a
	// tree compact itself; a tree compacts when its garbage (the regions
	// of values overwritten with another length or under a snapshot,
	// deleted entries, lists outgrown) exceeds both this and its live
	// bytes. Default 64 KiB; tests set 1 to compact as often as possible.
	CompactionMinGarbage int

	// OnLeakedSnapshot, if set, is called when a snapshot becomes
	// unreachable without having been released. The store then counts it
	// as released (see Store.LiveSnapshots), but a leak is a bug in the
	// caller: this hook reports it. It runs on a runtime cleanup goroutine
	// and receives the snapshot's sequence number (1 for the store's first
	// snapshot).
	OnLeakedSnapshot func(seq uint64)

	// DisableEntryIndex turns off the entry index of value and map states:
	// per tree, a hash table of the entries that reads found, which
	// answers a later Get, Contains or Update of them with one probe
	// rather than a descent of the tree (see "The entry index" in the
	// package doc). It costs 40 bytes and more per entry read (a load of
	// at most 3/4), up to four times the live bytes of the tree's arena,
	// at least 16 KiB; off, every read descends the tree.
	DisableEntryIndex bool
}

const (
	defaultDegree     = 32
	minDegree         = 2
	maxDegree         = 256
	minMaxSlabSize    = 1 << 10
	defaultMinGarbage = 64 << 10
)

// withDefaults validates o and fills in its defaults.
func (o Options) withDefaults() (Options, error) {
	cfg, err := o.StoreConfig.Normalize()
	if err != nil {
		return o, fmt.Errorf("btree: %w", err)
	}
	o.StoreConfig = cfg
	switch {
	case o.Degree == 0:
		o.Degree = defaultDegree
	case o.Degree < minDegree || o.Degree > maxDegree:
		return o, fmt.Errorf("btree: Degree %d is outside [%d, %d]", o.Degree, minDegree, maxDegree)
	}
	switch {
	case o.MaxSlabSize == 0:
		o.MaxSlabSize = arena.MaxSlabSize
	case o.MaxSlabSize < minMaxSlabSize || o.MaxSlabSize > arena.MaxSlabSize:
		return o, fmt.Errorf("btree: MaxSlabSize %d is outside [%d, %d]", o.MaxSlabSize, minMaxSlabSize, arena.MaxSlabSize)
	}
	switch {
	case o.CompactionMinGarbage == 0:
		o.CompactionMinGarbage = defaultMinGarbage
	case o.CompactionMinGarbage < 0:
		return o, fmt.Errorf("btree: CompactionMinGarbage %d is negative", o.CompactionMinGarbage)
	}
	return o, nil
}
