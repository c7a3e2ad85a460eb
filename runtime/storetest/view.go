package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storekit"
)

// MemView is a View held entirely in memory: the snapshots of a Model, and
// the deep copies made by CopyView. It is the simplest snapshot stream: what
// the suite restores from until a real checkpoint format stands in (see
// WithSnapshotCodec).
//
// A MemView shares no memory with anything else, so any number of goroutines
// may read it at once. It also implements runtime.Snapshot; releasing it only
// makes later Scans fail with runtime.ErrReleased, as the contract requires.
// The slices passed to a Scan callback are overwritten when the callback
// returns, to catch readers that keep them.
type MemView struct {
	maxP     int
	groups   runtime.KeyGroupRange
	specs    []runtime.StateSpec
	data     map[string]map[int][]runtime.Entry
	released atomic.Bool
}

var _ runtime.Snapshot = (*MemView)(nil)

// CopyView reads every state of every key group of v and returns a deep
// copy. It checks what it reads like Dump does (see Dump), so it fails on a
// view that breaks the contract. v is no longer needed when CopyView returns.
func CopyView(v runtime.View) (*MemView, error) {
	maxP := v.MaxParallelism()
	groups := v.KeyGroups()
	if err := groups.Validate(maxP); err != nil {
		return nil, fmt.Errorf("copy view: %w", err)
	}
	specs, err := viewStates(v)
	if err != nil {
		return nil, fmt.Errorf("copy view: %w", err)
	}
	mv := &MemView{maxP: maxP, groups: groups, specs: specs, data: make(map[string]map[int][]runtime.Entry, len(specs))}
	for _, spec := range specs {
		byGroup := make(map[int][]runtime.Entry)
		for kg := range groups.All() {
			entries, err := readGroup(v, spec, kg)
			if err != nil {
				return nil, fmt.Errorf("copy view: %w", err)
			}
			if len(entries) > 0 {
				byGroup[kg] = entries
			}
		}
		mv.data[spec.Name] = byGroup
	}
	return mv, nil
}

// MaxParallelism implements runtime.View.
func (v *MemView) MaxParallelism() int { return v.maxP }

// KeyGroups implements runtime.View.
func (v *MemView) KeyGroups() runtime.KeyGroupRange { return v.groups }

// States implements runtime.View.
func (v *MemView) States() []runtime.StateSpec { return slices.Clone(v.specs) }

// Scan implements runtime.View. Entries come in the order they were captured:
// by (key, namespace, user key) for a Model's snapshot, in the source's scan
// order for CopyView.
func (v *MemView) Scan(state string, kg int, fn func(runtime.Entry) error) error {
	if v.released.Load() {
		return fmt.Errorf("%w: cannot scan state %q", runtime.ErrReleased, state)
	}
	groups, ok := v.data[state]
	if !ok {
		return fmt.Errorf("view has no state %q", state)
	}
	if !v.groups.Contains(kg) {
		return fmt.Errorf("%w: state %q: key group %d is not in the view's key groups %v",
			runtime.ErrKeyGroupNotOwned, state, kg, v.groups)
	}
	for _, e := range groups[kg] {
		lent := runtime.Entry{Key: clone(e.Key), Namespace: clone(e.Namespace), UserKey: clone(e.UserKey), Value: clone(e.Value)}
		err := fn(lent)
		poison(lent.Key)
		poison(lent.Namespace)
		poison(lent.UserKey)
		poison(lent.Value)
		if err != nil {
			return err
		}
	}
	return nil
}

// Release implements runtime.Snapshot.
func (v *MemView) Release() error {
	if v.released.Swap(true) {
		return fmt.Errorf("%w: second Release", runtime.ErrReleased)
	}
	return nil
}

// viewStates returns v's states after checking that each is valid and that
// they are sorted by name without duplicates.
func viewStates(v runtime.View) ([]runtime.StateSpec, error) {
	specs := slices.Clone(v.States())
	for i, s := range specs {
		if err := s.Validate(); err != nil {
			return nil, fmt.Errorf("the view's states: %w", err)
		}
		if i > 0 && specs[i-1].Name >= s.Name {
			return nil, fmt.Errorf("the view's states are not sorted by name without duplicates: %q before %q",
				specs[i-1].Name, s.Name)
		}
	}
	return specs, nil
}

// entryID identifies an entry for the duplicate checks of readGroup.
type entryID struct{ key, ns, uk string }

// readGroup scans state spec in key group kg of v and returns deep copies of
// its entries in scan order. It checks every rule a View must keep: each
// entry's key belongs to kg, keyed states have empty namespaces, only maps
// have user keys, no (key, namespace[, user key]) repeats, and the elements
// of a list are consecutive. Errors name the state and key group and wrap
// runtime.ErrCorrupt when an entry breaks a rule.
func readGroup(v runtime.View, spec runtime.StateSpec, kg int) ([]runtime.Entry, error) {
	maxP := v.MaxParallelism()
	var (
		out      []runtime.Entry
		seen     = make(map[entryID]bool)
		run      entryID
		inRun    bool
		verdict  error
		badEntry = func(format string, args ...any) error {
			verdict = fmt.Errorf("%w: state %q, key group %d, entry %d: %s",
				runtime.ErrCorrupt, spec.Name, kg, len(out), fmt.Sprintf(format, args...))
			return verdict
		}
	)
	err := v.Scan(spec.Name, kg, func(e runtime.Entry) error {
		if verdict != nil {
			return badEntry("Scan went on after its callback returned an error")
		}
		if err := storekit.CheckEntry(spec, kg, runtime.KeyGroupOfHash(runtime.HashKey(e.Key), maxP), e); err != nil {
			verdict = fmt.Errorf("state %q, key group %d, entry %d: %w", spec.Name, kg, len(out), err)
			return verdict
		}
		id := entryID{string(e.Key), string(e.Namespace), string(e.UserKey)}
		switch spec.Kind {
		case runtime.KindList:
			if !inRun || id != run {
				if seen[id] {
					return badEntry("the elements of list (key %x, namespace %x) are not consecutive", e.Key, e.Namespace)
				}
				seen[id], run, inRun = true, id, true
			}
		default:
			if seen[id] {
				return badEntry("duplicate entry (key %x, namespace %x, user key %x)", e.Key, e.Namespace, e.UserKey)
			}
			seen[id] = true
		}
		out = append(out, runtime.Entry{
			Key:       cloneOrNil(e.Key),
			Namespace: cloneOrNil(e.Namespace),
			UserKey:   cloneOrNil(e.UserKey),
			Value:     cloneOrNil(e.Value),
		})
		return nil
	})
	switch {
	case verdict != nil && !errors.Is(err, verdict):
		// The view swallowed or replaced the callback's error.
		return nil, fmt.Errorf("%w (and Scan returned %v instead of the callback's error)", verdict, err)
	case verdict != nil:
		return nil, verdict
	case err != nil:
		return nil, fmt.Errorf("scan of state %q, key group %d: %w", spec.Name, kg, err)
	}
	return out, nil
}
