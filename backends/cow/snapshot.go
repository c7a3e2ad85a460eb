package cow

import (
	"fmt"
	"runtime"
	"sync/atomic"

	srt "github.com/stategen/stategen/runtime"
)

// snapshot is the immutable view returned by Store.Snapshot: per state and
// key group, the table's roots and slab list as they were. Nothing it can
// reach is ever written again while it is live.
type snapshot struct {
	sh     *snapShared
	maxP   int
	groups srt.KeyGroupRange
	specs  []srt.StateSpec
	states map[string]*stateView
}

type stateView struct {
	spec srt.StateSpec
	tabs []tableView // by key group - start; zero for empty tables
}

type tableView struct {
	slabs [][]byte
	main  htab
}

// snapShared is the part of a snapshot that the leak cleanup shares: it must
// not reference the snapshot itself.
type snapShared struct {
	released atomic.Bool
	live     *atomic.Int64
	seq      uint64
	onLeak   func(uint64)
}

// arm registers the leak cleanup: a snapshot collected unreleased is
// released, and reported.
func (sh *snapShared) arm(snap *snapshot) {
	runtime.AddCleanup(snap, func(sh *snapShared) {
		if sh.released.CompareAndSwap(false, true) {
			sh.live.Add(-1)
			if sh.onLeak != nil {
				sh.onLeak(sh.seq)
			}
		}
	}, sh)
}

// MaxParallelism implements runtime.View.
func (sn *snapshot) MaxParallelism() int { return sn.maxP }

// KeyGroups implements runtime.View.
func (sn *snapshot) KeyGroups() srt.KeyGroupRange { return sn.groups }

// States implements runtime.View.
func (sn *snapshot) States() []srt.StateSpec { return append([]srt.StateSpec(nil), sn.specs...) }

// Release implements runtime.Snapshot. It may be called from any goroutine.
func (sn *snapshot) Release() error {
	if !sn.sh.released.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: snapshot %d", srt.ErrReleased, sn.sh.seq)
	}
	sn.sh.live.Add(-1)
	return nil
}

// Scan implements runtime.View. Entries come in slot order of the key
// group's table; a list's elements are consecutive and in order, a map's
// entries ascend by user key.
func (sn *snapshot) Scan(name string, kg int, fn func(srt.Entry) error) error {
	if sn.sh.released.Load() {
		return fmt.Errorf("%w: snapshot %d", srt.ErrReleased, sn.sh.seq)
	}
	sv, ok := sn.states[name]
	if !ok {
		return fmt.Errorf("cow: snapshot %d has no state %q", sn.sh.seq, name)
	}
	if !sn.groups.Contains(kg) {
		return fmt.Errorf("%w: state %q: key group %d is not in the snapshot's key groups %v",
			srt.ErrKeyGroupNotOwned, name, kg, sn.groups)
	}
	tv := &sv.tabs[kg-sn.groups.Start]
	if tv.slabs == nil {
		return nil
	}
	return scanEntries(tv.slabs, &tv.main, sv.spec, func(e srt.Entry) error {
		if sn.sh.released.Load() {
			return fmt.Errorf("%w: snapshot %d released during Scan", srt.ErrReleased, sn.sh.seq)
		}
		return fn(e)
	})
}

// scanEntries calls fn with every entry of a table, until fn fails. It
// allocates nothing per entry.
func scanEntries(slabs [][]byte, r *htab, spec srt.StateSpec, fn func(srt.Entry) error) error {
	var err error
	var e srt.Entry // the entry being reported by the list and tree visitors
	elem := func(v []byte) bool {
		e.Value = v
		err = fn(e)
		return err == nil
	}
	item := func(uk, v []byte) bool {
		e.UserKey, e.Value = uk, v
		err = fn(e)
		return err == nil
	}
	scanTable(r, func(rec []byte) bool {
		key, ns, val, _, ok := decodeEntry(recEntry(slabs, rec))
		if !ok {
			err = errCorrupt
			return false
		}
		switch spec.Kind {
		case srt.KindValue:
			err = fn(srt.Entry{Key: key, Namespace: ns, Value: val})
		case srt.KindList:
			e = srt.Entry{Key: key, Namespace: ns}
			if lerr := listScan(slabs, val, elem); lerr != nil && err == nil {
				err = lerr
			}
		default:
			root, ok := decodeBtree(val)
			if !ok {
				err = errCorrupt
				return false
			}
			e = srt.Entry{Key: key, Namespace: ns}
			if berr := btRange(slabs, &root, nil, nil, false, item); berr != nil && err == nil {
				err = berr
			}
		}
		return err == nil
	})
	return err
}
