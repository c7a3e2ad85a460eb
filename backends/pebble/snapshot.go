package pebble

import (
	"fmt"
	"slices"

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
// group. The Pebble snapshot is closed, and the snapshot's reference to the
// database dropped, when the lease frees the snapshot: at Release, or when
// the last Scan running then ends (Release may come from any goroutine, in
// the middle of a Scan).
type snapshot struct {
	lease  *storekit.Lease
	ps     *pebbledb.Snapshot
	maxP   int
	groups srt.KeyGroupRange
	specs  []srt.StateSpec
	ids    map[string]stateRef
}

var _ srt.Snapshot = (*snapshot)(nil)

func newSnapshot(s *Store, ps *pebbledb.Snapshot, ids map[string]stateRef) *snapshot {
	sn := &snapshot{
		ps:     ps,
		maxP:   s.cfg.MaxParallelism,
		groups: s.cfg.KeyGroups,
		specs:  slices.Clone(s.specs),
		ids:    ids,
	}
	h := s.h
	sn.lease = storekit.Track(s.snaps, sn, func() error {
		err := ps.Close()
		if uerr := h.unref(); err == nil {
			err = uerr
		}
		return err
	})
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
// runtime.ErrReleased, and the Pebble snapshot is closed when it does.
func (sn *snapshot) Release() error { return sn.lease.Release() }

// Scan implements runtime.View. Entries come in key order: by key (length,
// then bytes), namespace (likewise), then user key; a list's elements,
// folded from its merge operands, are consecutive and in order. The slices
// of an Entry point into the iterator's buffers and are capped.
func (sn *snapshot) Scan(name string, kg int, fn func(srt.Entry) error) (err error) {
	if err := sn.lease.BeginScan(name); err != nil {
		return err
	}
	defer func() {
		if eerr := sn.lease.EndScan(); err == nil && eerr != nil {
			err = eerr
		}
	}()
	ref, ok := sn.ids[name]
	if !ok {
		return fmt.Errorf("pebble: snapshot %d has no state %q", sn.lease.Seq(), name)
	}
	if !sn.groups.Contains(kg) {
		return fmt.Errorf("%w: state %q: key group %d is not in the snapshot's key groups %v",
			srt.ErrKeyGroupNotOwned, name, kg, sn.groups)
	}
	if fn == nil {
		return fmt.Errorf("pebble: snapshot %d: Scan of state %q with a nil callback", sn.lease.Seq(), name)
	}
	lo := appendStatePrefix(make([]byte, 0, 16), kg, ref.id)
	hi, _ := storekit.AppendPrefixEnd(make([]byte, 0, 16), lo)
	it, err := sn.ps.NewIter(&pebbledb.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("pebble: snapshot %d: state %q, key group %d: %w", sn.lease.Seq(), name, kg, err)
	}
	defer func() {
		if cerr := it.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("pebble: snapshot %d: state %q, key group %d: %w", sn.lease.Seq(), name, kg, cerr)
		}
	}()
	bad := func(err error) error {
		return fmt.Errorf("pebble: snapshot %d: state %q, key group %d: %w", sn.lease.Seq(), name, kg, err)
	}
	kind := ref.spec.Kind
	var scratch []byte // for keys and namespaces longer than a framing group
	for ok := it.First(); ok; ok = it.Next() {
		if sn.lease.Released() {
			return sn.lease.ErrReleasedDuringScan(name)
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
