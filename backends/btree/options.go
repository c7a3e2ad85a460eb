package btree

import (
	"fmt"

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

	// OnLeakedSnapshot, if set, is called when a snapshot becomes
	// unreachable without having been released. The store then counts it
	// as released (see Store.LiveSnapshots), but a leak is a bug in the
	// caller: this hook reports it. It runs on a runtime cleanup goroutine
	// and receives the snapshot's sequence number (1 for the store's first
	// snapshot).
	OnLeakedSnapshot func(seq uint64)
}

const (
	defaultDegree = 32
	minDegree     = 2
	maxDegree     = 256
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
	return o, nil
}
