package pebble

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	pebbledb "github.com/cockroachdb/pebble/v2"
	srt "github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storekit"
)

// stateRef is a state as a snapshot sees it.
type stateRef struct {
	spec srt.StateSpec
	id   uint64
}

// snapshot is the immutable view returned by Store.Snapshot: a Pebble
// snapshot and the states registered when it was taken. Scan reads the
// Pebble snapshot with an iterator bounded by the state's prefix in the key
// group.
type snapshot struct {
	sh     *snapShared
	maxP   int
	groups srt.KeyGroupRange
	specs  []srt.StateSpec
	ids    map[string]stateRef
}

// snapShared is the part of a snapshot that its leak cleanup uses: it must
// not reference the snapshot itself. It counts the scans running, so that
// the Pebble snapshot is closed only when the last of them ends: Release
// may come from any goroutine, in the middle of a Scan.
type snapShared struct {
	h      *handle
	seq    uint64
	onLeak func(uint64)
	live   interface{ Add(int64) int64 }

	mu       sync.Mutex
	snap     *pebbledb.Snapshot // nil once closed
	released atomic.Bool        // set under mu; read without it by running Scans
	scans    int
}

var _ srt.Snapshot = (*snapshot)(nil)

func newSnapshot(s *Store, ps *pebbledb.Snapshot, ids map[string]stateRef) *snapshot {
	sh := &snapShared{h: s.h, seq: s.seq, onLeak: s.opts.OnLeakedSnapshot, live: s.live, snap: ps}
	sn := &snapshot{
		sh:     sh,
		maxP:   s.cfg.MaxParallelism,
		groups: s.cfg.KeyGroups,
		specs:  slices.Clone(s.specs),
		ids:    ids,
	}
	s.live.Add(1)
	// A snapshot collected unreleased is released, and reported.
	runtime.AddCleanup(sn, func(sh *snapShared) {
		if sh.release() == nil && sh.onLeak != nil {
			sh.onLeak(sh.seq)
		}
	}, sh)
	return sn
}

// release marks the snapshot released; the Pebble snapshot is closed now,
// or by the last running Scan.
func (sh *snapShared) release() error {
	sh.mu.Lock()
	if sh.released.Load() {
		sh.mu.Unlock()
		return fmt.Errorf("%w: snapshot %d", srt.ErrReleased, sh.seq)
	}
	sh.released.Store(true)
	sh.live.Add(-1)
	var err error
	if sh.scans == 0 {
		err = sh.closeLocked()
	}
	sh.mu.Unlock()
	return err
}

// closeLocked closes the Pebble snapshot and drops its reference to the
// database, which may close it (after the store's Close).
func (sh *snapShared) closeLocked() error {
	ps := sh.snap
	sh.snap = nil
	err := ps.Close()
	if uerr := sh.h.unref(); err == nil {
		err = uerr
	}
	return err
}

// begin starts a Scan: it fails if the snapshot is released.
func (sh *snapShared) begin(name string) (*pebbledb.Snapshot, error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.released.Load() {
		return nil, fmt.Errorf("%w: snapshot %d: cannot scan state %q", srt.ErrReleased, sh.seq, name)
	}
	sh.scans++
	return sh.snap, nil
}

// end ends a Scan, closing the Pebble snapshot if it was released during
// the Scan and this was the last one.
func (sh *snapShared) end() error {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.scans--
	if sh.released.Load() && sh.scans == 0 && sh.snap != nil {
		return sh.closeLocked()
	}
	return nil
}

func (sh *snapShared) isReleased() bool { return sh.released.Load() }

// MaxParallelism implements runtime.View.
func (sn *snapshot) MaxParallelism() int { return sn.maxP }

// KeyGroups implements runtime.View.
func (sn *snapshot) KeyGroups() srt.KeyGroupRange { return sn.groups }

// States implements runtime.View.
func (sn *snapshot) States() []srt.StateSpec { return slices.Clone(sn.specs) }

// Release implements runtime.Snapshot. It may be called from any
// goroutine, also while another one scans: that Scan then stops with
// runtime.ErrReleased, and the Pebble snapshot is closed when it does.
func (sn *snapshot) Release() error { return sn.sh.release() }

// Scan implements runtime.View. Entries come in key order: by key (length,
// then bytes), namespace (likewise), then user key; a list's elements,
// folded from its merge operands, are consecutive and in order. The slices
// of an Entry point into the iterator's buffers and are capped.
func (sn *snapshot) Scan(name string, kg int, fn func(srt.Entry) error) (err error) {
	ref, ok := sn.ids[name]
	if !ok {
		if sn.sh.isReleased() {
			return fmt.Errorf("%w: snapshot %d: cannot scan state %q", srt.ErrReleased, sn.sh.seq, name)
		}
		return fmt.Errorf("pebble: snapshot %d has no state %q", sn.sh.seq, name)
	}
	if !sn.groups.Contains(kg) {
		return fmt.Errorf("%w: state %q: key group %d is not in the snapshot's key groups %v",
			srt.ErrKeyGroupNotOwned, name, kg, sn.groups)
	}
	if fn == nil {
		return fmt.Errorf("pebble: snapshot %d: Scan of state %q with a nil callback", sn.sh.seq, name)
	}
	ps, err := sn.sh.begin(name)
	if err != nil {
		return err
	}
	defer func() {
		if eerr := sn.sh.end(); err == nil && eerr != nil {
			err = eerr
		}
	}()
	lo := appendStatePrefix(make([]byte, 0, 16), kg, ref.id)
	hi, _ := storekit.AppendPrefixEnd(make([]byte, 0, 16), lo)
	it, err := ps.NewIter(&pebbledb.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("pebble: snapshot %d: state %q, key group %d: %w", sn.sh.seq, name, kg, err)
	}
	defer func() {
		if cerr := it.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("pebble: snapshot %d: state %q, key group %d: %w", sn.sh.seq, name, kg, cerr)
		}
	}()
	bad := func(err error) error {
		return fmt.Errorf("pebble: snapshot %d: state %q, key group %d: %w", sn.sh.seq, name, kg, err)
	}
	kind := ref.spec.Kind
	var scratch []byte // for keys and namespaces longer than a framing group
	for ok := it.First(); ok; ok = it.Next() {
		if sn.sh.isReleased() {
			return fmt.Errorf("%w: snapshot %d released during a Scan of state %q", srt.ErrReleased, sn.sh.seq, name)
		}
		key, ns, uk, sc, perr := splitEntry(it.Key()[len(lo):], ref.spec.SubKeyed, scratch[:0])
		scratch = sc
		if perr != nil {
			return bad(perr)
		}
		e := srt.Entry{Key: key, Namespace: ns}
		v := it.Value()
		if kind == srt.KindList {
			var ferr error
			if lerr := eachElem(v, func(elem []byte) bool {
				e.Value = elem
				ferr = fn(e)
				return ferr == nil
			}); lerr != nil {
				return bad(lerr)
			}
			if ferr != nil {
				return ferr
			}
			continue
		}
		if kind.HasUserKey() {
			e.UserKey = uk
		}
		e.Value = v[:len(v):len(v)]
		if err := fn(e); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return bad(err)
	}
	return nil
}
