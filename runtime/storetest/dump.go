package storetest

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

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
			if len(entries) > 0 {
				sc.Groups[kg] = records(entries)
			}
		}
		c.States[spec.Name] = sc
	}
	return c, nil
}

// records returns the canonical, sorted Records of the entries of one
// state in one key group.
func records(entries []runtime.Entry) []Record {
	recs := make([]Record, len(entries))
	for i, e := range entries {
		recs[i] = Record{Key: string(e.Key), Namespace: string(e.Namespace), UserKey: string(e.UserKey), Value: string(e.Value)}
	}
	slices.SortStableFunc(recs, func(a, b Record) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.UserKey, b.UserKey))
	})
	return recs
}

// overlapWait bounds how long a goroutine of dumpConcurrently waits for
// the others to be inside a Scan too: a View that serializes its Scans
// (which is allowed) makes it wait that long once per goroutine.
const overlapWait = 2 * time.Second

// dumpConcurrently is Dump with the key groups of v scanned by workers
// goroutines at once — goroutine w takes key groups Start+w,
// Start+w+workers, ..., for every state — which runtime.View allows. So
// that the Scans really overlap, each goroutine waits in the first
// callback it gets until every other one is in a callback too, or has
// nothing to scan, or overlapWait has passed.
func dumpConcurrently(v runtime.View, workers int) (Contents, error) {
	maxP := v.MaxParallelism()
	groups := v.KeyGroups()
	if err := groups.Validate(maxP); err != nil {
		return Contents{}, fmt.Errorf("concurrent dump: %w", err)
	}
	specs, err := viewStates(v)
	if err != nil {
		return Contents{}, fmt.Errorf("concurrent dump: %w", err)
	}
	gate := &overlapGate{n: int32(workers), all: make(chan struct{})}
	type result struct {
		entries map[string]map[int][]runtime.Entry
		err     error
	}
	results := make([]result, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			gv := &gatedView{View: v, gate: gate}
			defer gv.arrive(false)
			out := make(map[string]map[int][]runtime.Entry, len(specs))
			for _, spec := range specs {
				out[spec.Name] = make(map[int][]runtime.Entry)
				for kg := groups.Start + w; kg < groups.End; kg += workers {
					entries, err := readGroup(gv, spec, kg)
					if err != nil {
						results[w].err = err
						return
					}
					out[spec.Name][kg] = entries
				}
			}
			results[w].entries = out
		})
	}
	wg.Wait()
	c := Contents{MaxParallelism: maxP, KeyGroups: groups, States: make(map[string]StateContents, len(specs))}
	for _, spec := range specs {
		c.States[spec.Name] = StateContents{Spec: spec, Groups: make(map[int][]Record)}
	}
	for w, r := range results {
		if r.err != nil {
			return Contents{}, fmt.Errorf("concurrent dump, goroutine %d of %d: %w", w, workers, r.err)
		}
		for name, byGroup := range r.entries {
			for kg, entries := range byGroup {
				if len(entries) > 0 {
					c.States[name].Groups[kg] = records(entries)
				}
			}
		}
	}
	return c, nil
}

// overlapGate is where the goroutines of dumpConcurrently meet.
type overlapGate struct {
	n     int32
	count atomic.Int32
	all   chan struct{} // closed when all n have arrived
}

// gatedView is one goroutine's View in dumpConcurrently: its first
// callback arrives at the gate and waits there.
type gatedView struct {
	runtime.View
	gate    *overlapGate
	arrived bool
}

// arrive marks the goroutine as arrived, once, and waits for the others if
// wait.
func (v *gatedView) arrive(wait bool) {
	if v.arrived {
		return
	}
	v.arrived = true
	if v.gate.count.Add(1) == v.gate.n {
		close(v.gate.all)
	}
	if wait {
		select {
		case <-v.gate.all:
		case <-time.After(overlapWait):
		}
	}
}

func (v *gatedView) Scan(state string, kg int, fn func(runtime.Entry) error) error {
	return v.View.Scan(state, kg, func(e runtime.Entry) error {
		v.arrive(true)
		return fn(e)
	})
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

// Merge returns the union of parts, the Contents of the instances of one
// operator (the inverse of Restrict): what the whole operator holds. Its
// KeyGroups spans the parts' ranges, from the smallest start to the largest
// end. Parts must share MaxParallelism and have disjoint key groups, and a
// state in several parts must have the same spec in each; Merge panics
// otherwise, since its inputs are a test's own.
func Merge(parts ...Contents) Contents {
	var out Contents
	out.States = map[string]StateContents{}
	for i, c := range parts {
		if i == 0 {
			out.MaxParallelism, out.KeyGroups = c.MaxParallelism, c.KeyGroups
		} else {
			if c.MaxParallelism != out.MaxParallelism {
				panic(fmt.Sprintf("storetest.Merge: part %d has maxParallelism %d, part 0 %d", i, c.MaxParallelism, out.MaxParallelism))
			}
			for j, p := range parts[:i] {
				if !p.KeyGroups.Intersect(c.KeyGroups).Empty() {
					panic(fmt.Sprintf("storetest.Merge: the key groups of part %d, %v, overlap those of part %d, %v", i, c.KeyGroups, j, p.KeyGroups))
				}
			}
			out.KeyGroups = runtime.KeyGroupRange{Start: min(out.KeyGroups.Start, c.KeyGroups.Start), End: max(out.KeyGroups.End, c.KeyGroups.End)}
		}
		for name, sc := range c.States {
			dst, ok := out.States[name]
			if !ok {
				dst = StateContents{Spec: sc.Spec, Groups: map[int][]Record{}}
			} else if !dst.Spec.Equal(sc.Spec) {
				panic(fmt.Sprintf("storetest.Merge: state %q has spec %+v in part %d and %+v before", name, sc.Spec, i, dst.Spec))
			}
			for g, recs := range sc.Groups {
				dst.Groups[g] = slices.Clone(recs)
			}
			out.States[name] = dst
		}
	}
	return out
}

// DumpStore is Dump of a snapshot of s, released before it returns.
func DumpStore(s runtime.Store) (Contents, error) {
	snap, err := s.Snapshot()
	if err != nil {
		return Contents{}, fmt.Errorf("dump: %w", err)
	}
	defer snap.Release()
	return Dump(snap)
}
