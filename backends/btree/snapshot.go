package btree

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	srt "github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storekit"
	tb "github.com/tidwall/btree"
)

// snapshot is the immutable view returned by Store.Snapshot: per state, a
// Copy of the B-tree of each of its trees and the tree's slab list. The
// copies share their nodes with the live trees, which copy a node before
// they change it (tidwall/btree's copy-on-write, keyed by an isolation id
// per tree), and the store never writes the bytes of a region a snapshot
// can see (see tree): nothing a snapshot can reach is ever written again.
type snapshot struct {
	lease  *storekit.Lease
	maxP   int
	groups srt.KeyGroupRange
	layout layout
	specs  []srt.StateSpec
	// data is dropped when the snapshot is freed (by Release, or by the
	// last Scan running then), so that the copies can be collected even if
	// the snapshot itself is kept.
	data *atomic.Pointer[snapData]
}

type snapData struct {
	states map[string]*stateView
}

// stateView is a state in a snapshot: its non-empty trees, and where each
// tree of the state (indexed like state.trees) is among them.
type stateView struct {
	spec srt.StateSpec
	// index holds, per tree of the state, 1 + its position in trees, or 0
	// if it had no entry: 2 bytes the collector does not scan per key
	// group, where a treeView is 32 it does (a store owns at most
	// runtime.UpperBoundMaxParallelism key groups, which uint16 counts).
	index []uint16
	trees []treeView
}

// tree returns the view of tree i of the state, nil if it had no entry.
func (sv *stateView) tree(i int) *treeView {
	if j := sv.index[i]; j != 0 {
		return &sv.trees[j-1]
	}
	return nil
}

// treeView is a tree in a snapshot: a Copy of its B-tree, and its slab list
// as it was then, which holds every region the Copy's items refer to.
type treeView struct {
	bt    *tb.BTreeG[item]
	slabs [][]byte
}

var _ srt.Snapshot = (*snapshot)(nil)

func newSnapshot(s *Store, d *snapData) *snapshot {
	data := new(atomic.Pointer[snapData])
	data.Store(d)
	sn := &snapshot{
		maxP:   s.cfg.MaxParallelism,
		groups: s.cfg.KeyGroups,
		layout: s.layout,
		specs:  slices.Clone(s.specs),
		data:   data,
	}
	sn.lease = storekit.Track(s.snaps, sn, func() error { data.Store(nil); return nil })
	return sn
}

// MaxParallelism implements runtime.View.
func (sn *snapshot) MaxParallelism() int { return sn.maxP }

// KeyGroups implements runtime.View.
func (sn *snapshot) KeyGroups() srt.KeyGroupRange { return sn.groups }

// States implements runtime.View.
func (sn *snapshot) States() []srt.StateSpec { return slices.Clone(sn.specs) }

// Release implements runtime.Snapshot. It may be called from any
// goroutine, also while another one scans: that Scan then stops with
// runtime.ErrReleased.
func (sn *snapshot) Release() error {
	return sn.lease.Release()
}

// Scan implements runtime.View. Entries come in item-key order: by key
// (length, then bytes), namespace (likewise), then user key; a list's
// elements are consecutive and in order. The slices of an Entry point into
// the snapshot's items: they are read-only, and capped so that an append
// copies.
func (sn *snapshot) Scan(name string, kg int, fn func(srt.Entry) error) error {
	if err := sn.lease.BeginScan(name); err != nil {
		return err
	}
	defer sn.lease.EndScan()
	sv, ok := sn.data.Load().states[name]
	if !ok {
		return fmt.Errorf("btree: snapshot %d has no state %q", sn.lease.Seq(), name)
	}
	if !sn.groups.Contains(kg) {
		return fmt.Errorf("%w: state %q: key group %d is not in the snapshot's key groups %v",
			srt.ErrKeyGroupNotOwned, name, kg, sn.groups)
	}
	if fn == nil {
		return fmt.Errorf("btree: snapshot %d: Scan of state %q with a nil callback", sn.lease.Seq(), name)
	}
	i := 0
	if sn.layout == treePerGroup {
		i = kg - sn.groups.Start
	}
	t := sv.tree(i)
	if t == nil {
		return nil
	}
	var p [groupLen]byte
	storekit.AppendGroup(p[:0], kg)
	it := t.bt.Iter()
	defer it.Release()
	var batch [batchLen]item
	// kb holds short item keys, scratch keys and namespaces longer than a
	// framing group.
	kb, scratch := make([]byte, inlineLen), []byte(nil)
	off := 0 // of the last byte warm reads
	if sv.spec.Kind == srt.KindList {
		off = capLen
	}
	// A short probe: the search reads neither the probe key nor the arena
	// of the live tree, whose comparison function the Copy shares.
	for ok := it.Seek(shortProbe(p[:])); ok; {
		n := 0
		for ok && n < batchLen {
			x := it.Item()
			if x.kl < groupLen || int(x.p0>>48) != kg { // the key group's items end
				ok = false
				break
			}
			batch[n] = x
			n++
			ok = it.Next()
		}
		warm(t.slabs, batch[:n], off)
		for _, x := range batch[:n] {
			if sn.lease.Released() {
				return sn.lease.ErrReleasedDuringScan(name)
			}
			if err := emit(sv.spec, t.slabs, x, kb, &scratch, fn); err != nil {
				if errors.Is(err, errBadItem) {
					return fmt.Errorf("state %q, key group %d: %w", name, kg, err)
				}
				return err
			}
		}
	}
	return nil
}

// emit calls fn with the entries of item x of a state of spec, whose
// region is in slabs: one, or one per element of a list, decoding a short
// item key into kb and long keys and namespaces into *scratch. It returns
// fn's error as is.
func emit(spec srt.StateSpec, slabs [][]byte, x item, kb []byte, scratch *[]byte, fn func(srt.Entry) error) error {
	_, key, ns, uk, sc, err := parseItemKey(keyOf(slabs, x, kb), spec.SubKeyed, (*scratch)[:0])
	*scratch = sc
	if err != nil {
		return err
	}
	e := srt.Entry{Key: key, Namespace: ns}
	switch spec.Kind {
	case srt.KindList:
		var ferr error
		if lerr := eachElem(elemsOf(slabs, x), func(elem []byte) bool {
			e.Value = elem
			ferr = fn(e)
			return ferr == nil
		}); lerr != nil {
			return lerr
		}
		return ferr
	case srt.KindMap, srt.KindSortedMap:
		e.UserKey = uk
	}
	e.Value = valueOf(slabs, x)
	return fn(e)
}
