package storetest

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/stategen/stategen/runtime"
)

// The timers scenarios drive runtime.Timers — a SortedMap state of the
// store under test, one anchor key per key group — against a set of
// timers: random registrations, deletions and advances on p stores that
// split the key groups, with snapshots (through the suite's codec) restored
// into q stores and back. Every Advance fires, store by store, exactly the
// due timers of the keys the store owns, in (time, key, namespace) order,
// each once; a timer due before a snapshot and not yet fired fires after
// the restore.

func timersChecks() []check {
	var checks []check
	for _, pq := range [][2]int{{1, 3}, {3, 2}} {
		p, q := pq[0], pq[1]
		name := fmt.Sprintf("Rescale%dto%d", p, q)
		checks = append(checks, check{name, func(e *env) { runTimers(e, "Timers/"+name, p, q) }})
	}
	return checks
}

type modelTimer = runtime.Timer[string, int64]

func compareTimers(a, b modelTimer) int {
	return cmp.Or(cmp.Compare(a.Time, b.Time), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Namespace, b.Namespace))
}

// timerStores are the stores of one parallelism, with their timers.
type timerStores struct {
	cfgs   []runtime.StoreConfig
	stores []runtime.Store
	timers []runtime.Timers[string, int64]
}

func newTimerStores(e *env, maxP, p int) *timerStores {
	ts := &timerStores{}
	for i := range p {
		r, err := runtime.KeyGroupRangeForOperator(maxP, p, i)
		if err != nil {
			panic(err)
		}
		cfg := runtime.StoreConfig{MaxParallelism: maxP, KeyGroups: r}
		s := e.newStore(cfg)
		t, err := runtime.NewTimers(s, runtime.TimersDescriptor[string, int64]{
			Name: "timers", Key: runtime.StringCodec{}, Namespace: runtime.Int64Codec{},
		})
		must(err, "NewTimers")
		ts.cfgs, ts.stores, ts.timers = append(ts.cfgs, cfg), append(ts.stores, s), append(ts.timers, t)
	}
	return ts
}

// owner returns the index of the store that owns key.
func (ts *timerStores) owner(key string) int {
	k := runtime.MakeKey(runtime.StringCodec{}.AppendKey(nil, key), nil, ts.cfgs[0].MaxParallelism)
	for i, c := range ts.cfgs {
		if c.KeyGroups.Contains(k.Group()) {
			return i
		}
	}
	panic("no store owns key " + key)
}

func runTimers(e *env, name string, p, q int) {
	const maxP = 32
	rng := e.rng(name)
	want := map[modelTimer]bool{}
	now := int64(0)
	ts := newTimerStores(e, maxP, p)
	for round, par := range []int{q, p, q} {
		for step := range e.ops(1000) {
			// Most timers soon, some far: many are still registered at
			// each snapshot.
			span := int64(100)
			if rng.IntN(3) == 0 {
				span = 3000
			}
			tm := modelTimer{Time: now + rng.Int64N(span) - 10, Key: fmt.Sprintf("k%d", rng.IntN(50)), Namespace: rng.Int64N(3)}
			t := ts.timers[ts.owner(tm.Key)]
			switch r := rng.IntN(10); {
			case r < 6:
				must(t.Register(tm.Time, tm.Key, tm.Namespace), "Register")
				want[tm] = true
			case r < 7:
				for w := range want {
					tm = w
					break
				}
				must(ts.timers[ts.owner(tm.Key)].Delete(tm.Time, tm.Key, tm.Namespace), "Delete")
				delete(want, tm)
			default:
				now += rng.Int64N(30)
				var due []modelTimer
				for w := range want {
					if w.Time <= now {
						due = append(due, w)
						delete(want, w)
					}
				}
				slices.SortFunc(due, compareTimers)
				var fired []modelTimer
				for i, t := range ts.timers {
					var got []modelTimer
					must(t.Advance(now, func(tm modelTimer) error { got = append(got, tm); return nil }), "Advance")
					if !slices.IsSortedFunc(got, compareTimers) {
						fail("round %d step %d: store %d fired out of (time, key, namespace) order: %v", round, step, i, got)
					}
					for _, tm := range got {
						if o := ts.owner(tm.Key); o != i {
							fail("round %d step %d: store %d fired %v, whose key store %d owns", round, step, i, tm, o)
						}
					}
					fired = append(fired, got...)
				}
				slices.SortFunc(fired, compareTimers)
				if !slices.Equal(fired, due) {
					fail("round %d step %d: Advance(%d) fired %v, want %v", round, step, now, fired, due)
				}
			}
		}
		// Snapshot every store, restore them all into par new stores. The
		// snapshots hold exactly the timers registered and not fired: what
		// Advance fired says nothing of what a store holds, since the
		// handles keep the first timers of each key group.
		next := newTimerStores(e, maxP, par)
		stored := map[modelTimer]bool{}
		for _, s := range ts.stores {
			snap, err := s.Snapshot()
			must(err, "Snapshot")
			v, err := e.o.codec(e.tb, snap)
			must(err, "snapshot codec")
			storedTimers(v, stored)
			for _, n := range next.stores {
				must(n.Restore(v), "Restore of the timers")
			}
			releaseView(v)
			must(snap.Release(), "Release")
		}
		if !maps.Equal(stored, want) {
			fail("round %d: the snapshots hold %d timers, %d of them registered and not fired; want the %d registered and not fired", round, len(stored), countIn(stored, want), len(want))
		}
		ts = next
	}
	// What is left fires once, at the end of time.
	var left []modelTimer
	for w := range want {
		left = append(left, w)
	}
	slices.SortFunc(left, compareTimers)
	var fired []modelTimer
	for _, t := range ts.timers {
		must(t.Advance(1<<62, func(tm modelTimer) error { fired = append(fired, tm); return nil }), "Advance")
	}
	slices.SortFunc(fired, compareTimers)
	if !slices.Equal(fired, left) {
		fail("the last Advance fired %d timers, want the %d left", len(fired), len(left))
	}
}

// storedTimers adds the timers of the view's "timers" state to into.
func storedTimers(v runtime.View, into map[modelTimer]bool) {
	for kg := range v.KeyGroups().All() {
		err := v.Scan("timers", kg, func(en runtime.Entry) error {
			var tm modelTimer
			rest := en.UserKey
			var err error
			if tm.Time, rest, err = runtime.DecodeInt64Key(rest); err == nil {
				if tm.Key, rest, err = (runtime.StringCodec{}).DecodeKey(rest); err == nil {
					tm.Namespace, rest, err = runtime.Int64Codec{}.DecodeKey(rest)
				}
			}
			if err != nil || len(rest) != 0 {
				return fmt.Errorf("key group %d: a timer that does not decode: %x", kg, en.UserKey)
			}
			into[tm] = true
			return nil
		})
		must(err, "Scan of the timers")
	}
}

// countIn returns how many of the timers of a are in b.
func countIn(a, b map[modelTimer]bool) int {
	n := 0
	for tm := range a {
		if b[tm] {
			n++
		}
	}
	return n
}
