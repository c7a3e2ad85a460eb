package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/stategen/stategen/runtime"
)

// View is a runtime.View over the data files of a checkpoint: all of an
// operator's key groups or only some of them. Any Store.Restore loads it.
// It reads only the blocks of the key groups and states it is asked to
// Scan, plus each file's header, trailer and index, and it counts the bytes
// it reads (BytesRead).
//
// A View reads its files lazily, section by section, and verifies every
// block's checksum as it goes; a corrupt block fails the Scan that meets it
// with a *FileError naming the file and offset. The blocks of a section
// of several are read and checked ahead of the Scan's callback on a
// goroutine of the Scan's own (see RestoreOptions.ReadAhead). Like any runtime.View,
// a View may be scanned from several goroutines at once for different key
// groups. Close (or Release) closes its files.
type View struct {
	ctx       context.Context
	maxP      int
	kgs       runtime.KeyGroupRange
	states    []runtime.StateSpec
	parts     []viewPart // ordered by key groups; together they cover kgs
	readAhead int        // blocks read ahead of a Scan's callback; 0: none
	read      atomic.Int64
	closed    atomic.Bool
}

// viewPart is the part of a View that one data file serves: a full file,
// or the chain of an incremental checkpoint's instance, a full file and
// files of changes to apply to it in order (see chain.go).
type viewPart struct {
	kgs     runtime.KeyGroupRange
	file    *dataFile
	changes []*dataFile
}

var _ runtime.Snapshot = (*View)(nil)

// OpenFile opens one data file on its own, without a checkpoint's metadata:
// the View holds the file's key groups and states as its header and index
// record them. path names the file in errors; r and size give its bytes.
// Closing the View does not close r. Tools that inspect a file use it; a
// restore goes through Open and Reader, which also check the file against
// the metadata.
func OpenFile(path string, r io.ReaderAt, size int64) (*View, error) {
	v := &View{ctx: context.Background(), readAhead: DefaultReadAhead}
	f, err := openDataFile(path, r, size, &v.read)
	if err != nil {
		return nil, err
	}
	v.maxP, v.kgs, v.states = f.maxP, f.kgs, f.states
	v.parts = []viewPart{{kgs: f.kgs, file: f}}
	return v, nil
}

// MaxParallelism implements runtime.View.
func (v *View) MaxParallelism() int { return v.maxP }

// KeyGroups implements runtime.View.
func (v *View) KeyGroups() runtime.KeyGroupRange { return v.kgs }

// States implements runtime.View: the specs of the checkpoint's states,
// sorted by name, with their fingerprints, so that Store.Restore checks them
// against the registered states.
func (v *View) States() []runtime.StateSpec { return slices.Clone(v.states) }

// Scan implements runtime.View. It fails if the View is closed, if its
// context is done (checked before every block), if kg is outside
// KeyGroups, if the state is unknown, and with a *FileError wrapping
// ErrCorrupt if the bytes fail a check.
func (v *View) Scan(state string, kg int, fn func(runtime.Entry) error) error {
	_, err := v.scan(state, kg, fn)
	return err
}

// scan is Scan, and also returns how many entries it passed to fn.
func (v *View) scan(state string, kg int, fn func(runtime.Entry) error) (int64, error) {
	if v.closed.Load() {
		return 0, fmt.Errorf("checkpoint: scan of a closed view: %w", runtime.ErrReleased)
	}
	if err := v.ctx.Err(); err != nil {
		return 0, err
	}
	if !v.kgs.Contains(kg) {
		return 0, fmt.Errorf("%w: checkpoint view: key group %d is outside %v", runtime.ErrInvalidKeyGroup, kg, v.kgs)
	}
	if _, ok := slices.BinarySearchFunc(v.states, state, func(s runtime.StateSpec, name string) int {
		switch {
		case s.Name < name:
			return -1
		case s.Name > name:
			return 1
		}
		return 0
	}); !ok {
		return 0, fmt.Errorf("%w: checkpoint view has no state %q", runtime.ErrInvalidState, state)
	}
	i := sort.Search(len(v.parts), func(i int) bool { return v.parts[i].kgs.End > kg })
	if p := &v.parts[i]; len(p.changes) > 0 {
		return p.scanChain(v.ctx, v.spec(state), kg, v.readAhead, fn)
	}
	return v.parts[i].file.scan(v.ctx, state, kg, v.readAhead, fn)
}

// spec returns the spec of a state of the View.
func (v *View) spec(name string) runtime.StateSpec {
	i, _ := slices.BinarySearchFunc(v.states, name, func(s runtime.StateSpec, name string) int { return strings.Compare(s.Name, name) })
	return v.states[i]
}

// BytesRead returns how many bytes the View has read from its files so far:
// headers, trailers, indexes and the blocks of the sections scanned.
func (v *View) BytesRead() int64 { return v.read.Load() }

// Entries returns how many entries Scan(state, kg) passes, from the files'
// indexes, without reading a block; ok is false if the View has no such
// state or key group. A Store.Restore may use it to size its tables before
// it loads them, testing its View for the method
//
//	interface{ Entries(state string, kg int) (n int64, ok bool) }
//
// which the View that Reader.Restore hands a store implements.
func (v *View) Entries(state string, kg int) (n int64, ok bool) {
	if !v.kgs.Contains(kg) || !slices.ContainsFunc(v.states, func(s runtime.StateSpec) bool { return s.Name == state }) {
		return 0, false
	}
	f := v.parts[sort.Search(len(v.parts), func(i int) bool { return v.parts[i].kgs.End > kg })].file
	if si := f.stateIndex(state); si >= 0 {
		if s, found := f.find(si, kg); found {
			return s.entries, true
		}
	}
	return 0, true
}

// DataBytes returns how many bytes of its files' data blocks the View's key
// groups occupy: what a Scan of every state of every key group reads, apart
// from the small fixed cost of headers and indexes.
func (v *View) DataBytes() int64 {
	var n int64
	for _, p := range v.parts {
		for _, f := range append([]*dataFile{p.file}, p.changes...) {
			_, l := f.byteRange(p.kgs)
			n += l
		}
	}
	return n
}

// Close closes the View's files. Closing twice returns runtime.ErrReleased.
func (v *View) Close() error {
	if v.closed.Swap(true) {
		return fmt.Errorf("checkpoint: view closed twice: %w", runtime.ErrReleased)
	}
	var errs []error
	for _, p := range v.parts {
		errs = append(errs, p.file.close())
		for _, f := range p.changes {
			errs = append(errs, f.close())
		}
	}
	return errors.Join(errs...)
}

// Release is Close, so that a View can stand in for a runtime.Snapshot.
func (v *View) Release() error { return v.Close() }

// filteredView hides some states of a View (DropUnknownStates) and counts
// the entries scanned. Like the View, it may be scanned from several
// goroutines at once.
type filteredView struct {
	*View
	states     []runtime.StateSpec
	migrations Migrations // states whose values are rewritten as they are scanned
	entries    *atomic.Int64
}

func (f *filteredView) States() []runtime.StateSpec { return slices.Clone(f.states) }

// Entries is View.Entries, for the states f shows.
func (f *filteredView) Entries(state string, kg int) (int64, bool) {
	if !slices.ContainsFunc(f.states, func(s runtime.StateSpec) bool { return s.Name == state }) {
		return 0, false
	}
	return f.View.Entries(state, kg)
}

func (f *filteredView) Scan(state string, kg int, fn func(runtime.Entry) error) error {
	if !slices.ContainsFunc(f.states, func(s runtime.StateSpec) bool { return s.Name == state }) {
		return fmt.Errorf("%w: checkpoint view has no state %q", runtime.ErrInvalidState, state)
	}
	if m, ok := f.migrations[state]; ok && m.Rewrites() {
		// The store gets every value as today's codec writes it. The
		// buffer is the Scan's own (Scans of other key groups may run at
		// once), reused entry after entry: a store copies what it keeps.
		var buf []byte
		inner := fn
		fn = func(e runtime.Entry) error {
			var err error
			if buf, err = m.Transcode(buf[:0], e.Value); err != nil {
				return fmt.Errorf("checkpoint: migrating state %q to the code's schema: %w", state, err)
			}
			e.Value = buf
			return inner(e)
		}
	}
	n, err := f.View.scan(state, kg, fn)
	f.entries.Add(n)
	return err
}
