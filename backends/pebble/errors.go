package pebble

import (
	"errors"

	"github.com/stategen/stategen/runtime"
)

// Errors of this backend, to be tested with errors.Is. Errors about the
// working directory name it.
var (
	// ErrDirNotEmpty reports a working directory that already holds files
	// when Options.Existing is RefuseExisting (the default).
	ErrDirNotEmpty = errors.New("pebble: working directory is not empty")

	// ErrNotStoreDir reports a directory, opened with ReuseExisting, that
	// does not hold a store of this package, or holds one of another
	// layout version or maxParallelism.
	ErrNotStoreDir = errors.New("pebble: not a working directory of a compatible store")

	// ErrUncleanDir reports a directory, opened with ReuseExisting, whose
	// previous store was not closed cleanly: its content may predate the
	// last writes, so the job must restore a checkpoint instead.
	ErrUncleanDir = errors.New("pebble: working directory was not closed cleanly")

	// ErrWriteDuringIteration reports a write, Restore or Close made from
	// inside an iteration callback (List Get, Map Iterate, SortedMap Range,
	// Namespaces), which the Store contract forbids. The call is refused and
	// the store is unchanged.
	// It is runtime.ErrWriteDuringIteration, which every backend returns.
	ErrWriteDuringIteration = runtime.ErrWriteDuringIteration

	// ErrFailed reports that the working directory failed under the store:
	// a write could not be persisted (a full disk, an I/O error) or Pebble
	// hit a fatal error. Writes fail with it, naming the directory and the
	// cause, until the cause goes away (a flush succeeds again); after a
	// fatal error the store stays failed and should be closed and
	// discarded.
	ErrFailed = errors.New("pebble: working directory failed")
)
