package storetest

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/stategen/stategen/runtime"
)

// Contents is the canonical form of everything a View holds: plain values,
// sorted and deep-copied, so that two views hold the same state exactly when
// their Contents are equal, and cmp.Diff of two Contents shows what differs.
type Contents struct {
	// MaxParallelism is the view's maxParallelism.
	MaxParallelism int
	// KeyGroups is the view's key-group range.
	KeyGroups runtime.KeyGroupRange
	// States holds every state of the view by name, empty states included.
	States map[string]StateContents
}

// StateContents is the content of one state in a Contents.
type StateContents struct {
	// Spec is the state's spec.
	Spec runtime.StateSpec
	// Groups holds the records of every key group that has any; it never
	// holds an empty slice, and it is never nil.
	Groups map[int][]Record
}

// Record is one entry of a state, as strings so that it compares by value
// and prints readably. Records are sorted by (Key, Namespace, UserKey); the
// elements of a list, which share those, keep their list order.
type Record struct {
	Key, Namespace, UserKey, Value string
}

// Dump reads every state of every key group of v and returns its canonical
// Contents. It fails if a Scan fails or if v breaks a rule of the View
// contract: states not sorted by name, an entry in the wrong key group, a
// namespace in a keyed state, a user key outside a map, a duplicate entry,
// or list elements that are not consecutive.
func Dump(v runtime.View) (Contents, error) {
	maxP := v.MaxParallelism()
	groups := v.KeyGroups()
	if err := groups.Validate(maxP); err != nil {
		return Contents{}, fmt.Errorf("dump: %w", err)
	}
	specs, err := viewStates(v)
	if err != nil {
		return Contents{}, fmt.Errorf("dump: %w", err)
	}
	c := Contents{MaxParallelism: maxP, KeyGroups: groups, States: make(map[string]StateContents, len(specs))}
	for _, spec := range specs {
		sc := StateContents{Spec: spec, Groups: make(map[int][]Record)}
		for kg := range groups.All() {
			entries, err := readGroup(v, spec, kg)
			if err != nil {
				return Contents{}, fmt.Errorf("dump: %w", err)
			}
			if len(entries) == 0 {
				continue
			}
			recs := make([]Record, len(entries))
			for i, e := range entries {
				recs[i] = Record{Key: string(e.Key), Namespace: string(e.Namespace), UserKey: string(e.UserKey), Value: string(e.Value)}
			}
			slices.SortStableFunc(recs, func(a, b Record) int {
				return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.UserKey, b.UserKey))
			})
			sc.Groups[kg] = recs
		}
		c.States[spec.Name] = sc
	}
	return c, nil
}

// Restrict returns the part of c in the key groups of r: what a store that
// owns r holds after restoring c. Its KeyGroups is r ∩ c.KeyGroups.
func (c Contents) Restrict(r runtime.KeyGroupRange) Contents {
	out := Contents{MaxParallelism: c.MaxParallelism, KeyGroups: c.KeyGroups.Intersect(r), States: make(map[string]StateContents, len(c.States))}
	for name, sc := range c.States {
		groups := make(map[int][]Record)
		for kg, recs := range sc.Groups {
			if out.KeyGroups.Contains(kg) {
				groups[kg] = slices.Clone(recs)
			}
		}
		out.States[name] = StateContents{Spec: sc.Spec, Groups: groups}
	}
	return out
}

// Len returns the number of records in c.
func (c Contents) Len() int {
	n := 0
	for _, sc := range c.States {
		for _, recs := range sc.Groups {
			n += len(recs)
		}
	}
	return n
}
