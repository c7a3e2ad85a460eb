package storetest

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/stategen/stategen/runtime"
)

// The TTL scenarios drive three states with a TTL — a Value, a sub-keyed
// List and a SortedMap renewed on reads (runtime.TTLOnReadAndWrite) — on p
// stores that split the key groups, under a ManualClock, against a model of
// (value, time of last update) entries. Every read returns exactly the
// model's live entries (an entry is expired once its last update plus the
// TTL is at or before now, as in Flink); every snapshot holds exactly the
// live entries, stamps included, and nothing expired (what a backend gets
// from storekit.DropExpired); snapshots restored into q stores and back
// keep every stamp, so entries expire after the rescale when they would
// have before; and writes clean up: once everything has expired, enough
// writes leave no expired key in any state (State.Keys). Registering a
// state again with another TTL, or without one, fails with
// runtime.ErrStateMismatch.

// ManualClock is a runtime.Clock that moves only when told to: the
// processing time of TTL tests. It is safe for concurrent use.
type ManualClock struct{ ms atomic.Int64 }

// NewManualClock returns a clock that reads start (to the millisecond).
func NewManualClock(start time.Time) *ManualClock {
	c := new(ManualClock)
	c.ms.Store(start.UnixMilli())
	return c
}

// Now implements runtime.Clock.
func (c *ManualClock) Now() time.Time { return time.UnixMilli(c.ms.Load()) }

// Advance moves the clock forward by d (to the millisecond).
func (c *ManualClock) Advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

func ttlChecks() []check {
	checks := []check{{"Register", checkTTLRegister}}
	for _, pq := range [][2]int{{1, 3}, {3, 2}} {
		p, q := pq[0], pq[1]
		name := fmt.Sprintf("Rescale%dto%d", p, q)
		checks = append(checks, check{name, func(e *env) { runTTL(e, "TTL/"+name, p, q) }})
	}
	return checks
}

const ttlMillis = 100

var ttlValueSpec = runtime.TTL{Duration: ttlMillis * time.Millisecond}

// ttlHandles are the three TTL states of one store.
type ttlHandles struct {
	value runtime.Value[string, int64]
	list  runtime.SubKeyedList[string, int64, int64]
	smap  runtime.SortedMap[string, int64, int64]
}

func newTTLHandles(s runtime.Store) ttlHandles {
	var h ttlHandles
	var err error
	h.value, err = runtime.NewValue(s, runtime.ValueDescriptor[string, int64]{
		Name: "ttl-value", Key: runtime.StringCodec{}, Value: runtime.Int64Codec{}, TTL: ttlValueSpec,
	})
	must(err, "NewValue with a TTL")
	h.list, err = runtime.NewSubKeyedList(s, runtime.SubKeyedListDescriptor[string, int64, int64]{
		Name: "ttl-list", Key: runtime.StringCodec{}, Namespace: runtime.Int64Codec{}, Value: runtime.Int64Codec{}, TTL: ttlValueSpec,
	})
	must(err, "NewSubKeyedList with a TTL")
	h.smap, err = runtime.NewSortedMap(s, runtime.MapDescriptor[string, int64, int64]{
		Name: "ttl-map", Key: runtime.StringCodec{}, UserKey: runtime.Int64Codec{}, Value: runtime.Int64Codec{},
		TTL: runtime.TTL{Duration: ttlMillis * time.Millisecond, Update: runtime.TTLOnReadAndWrite},
	})
	must(err, "NewSortedMap with a TTL")
	return h
}

// stamped is a model entry: a value and the time of its last update.
type stamped struct{ v, at int64 }

func (s stamped) live(now int64) bool { return now-s.at < ttlMillis }

type listKey struct {
	k  string
	ns int64
}

// ttlModel is what the three states should hold.
type ttlModel struct {
	values map[string]stamped
	lists  map[listKey][]stamped
	maps   map[string]map[int64]stamped
}

// ttlStores are the stores of one parallelism.
type ttlStores struct {
	timerStores // for owner
	handles     []ttlHandles
}

func newTTLStores(e *env, clock *ManualClock, maxP, p int) *ttlStores {
	ts := &ttlStores{}
	for i := range p {
		r, err := runtime.KeyGroupRangeForOperator(maxP, p, i)
		if err != nil {
			panic(err)
		}
		cfg := runtime.StoreConfig{MaxParallelism: maxP, KeyGroups: r, Clock: clock}
		s := e.newStore(cfg)
		ts.cfgs, ts.stores, ts.handles = append(ts.cfgs, cfg), append(ts.stores, s), append(ts.handles, newTTLHandles(s))
	}
	return ts
}

func runTTL(e *env, name string, p, q int) {
	const maxP = 32
	rng := e.rng(name)
	clock := NewManualClock(time.UnixMilli(1_700_000_000_000))
	now := func() int64 { return clock.Now().UnixMilli() }
	m := ttlModel{values: map[string]stamped{}, lists: map[listKey][]stamped{}, maps: map[string]map[int64]stamped{}}
	ts := newTTLStores(e, clock, maxP, p)
	for round, par := range []int{q, p, q} {
		for step := range e.ops(1500) {
			k := fmt.Sprintf("k%d", rng.IntN(40))
			h := ts.handles[ts.owner(k)]
			t := now()
			at := fmt.Sprintf("round %d step %d (time +%d ms)", round, step, t%1_000_000)
			switch r := rng.IntN(20); {
			case r < 3:
				v := rng.Int64N(1000)
				must(h.value.Put(k, v), "%s: Put", at)
				m.values[k] = stamped{v, t}
			case r < 5:
				got, found, err := h.value.Get(k)
				must(err, "%s: Get", at)
				want, ok := m.values[k]
				if ok = ok && want.live(t); found != ok || found && got != want.v {
					fail("%s: Get(%q) = %d, %v; want %d, %v (last updated %d ms ago, TTL %d ms)", at, k, got, found, want.v, ok, t-want.at, ttlMillis)
				}
			case r < 6:
				old, ok := m.values[k]
				ok = ok && old.live(t)
				must(h.value.Update(k, func(v int64, found bool) int64 {
					if found != ok || found && v != old.v {
						fail("%s: Update(%q) saw %d, %v; want %d, %v", at, k, v, found, old.v, ok)
					}
					return v + 1
				}), "%s: Update", at)
				if !ok {
					old.v = 0
				}
				m.values[k] = stamped{old.v + 1, t}
			case r < 8:
				ns, v := rng.Int64N(3), rng.Int64N(1000)
				must(h.list.Add(k, ns, v), "%s: Add", at)
				lk := listKey{k, ns}
				m.lists[lk] = append(m.lists[lk], stamped{v, t})
			case r < 10:
				ns := rng.Int64N(3)
				got, err := h.list.Get(k, ns)
				must(err, "%s: list Get", at)
				var want []int64
				for _, s := range m.lists[listKey{k, ns}] {
					if s.live(t) {
						want = append(want, s.v)
					}
				}
				if !slices.Equal(got, want) {
					fail("%s: list Get(%q, %d) = %v, want the live elements %v", at, k, ns, got, want)
				}
			case r < 13:
				uk, v := rng.Int64N(8), rng.Int64N(1000)
				must(h.smap.Put(k, uk, v), "%s: map Put", at)
				if m.maps[k] == nil {
					m.maps[k] = map[int64]stamped{}
				}
				m.maps[k][uk] = stamped{v, t}
			case r < 15:
				uk := rng.Int64N(8)
				got, found, err := h.smap.Get(k, uk)
				must(err, "%s: map Get", at)
				want, ok := m.maps[k][uk]
				if ok = ok && want.live(t); found != ok || found && got != want.v {
					fail("%s: map Get(%q, %d) = %d, %v; want %d, %v", at, k, uk, got, found, want.v, ok)
				}
				if ok {
					m.maps[k][uk] = stamped{want.v, t} // read-and-write renews
				}
			case r < 16:
				var got, want [][2]int64
				for en, err := range h.smap.All(k) {
					must(err, "%s: map All", at)
					got = append(got, [2]int64{en.Key, en.Value})
				}
				for uk, s := range m.maps[k] {
					if s.live(t) {
						want = append(want, [2]int64{uk, s.v})
						m.maps[k][uk] = stamped{s.v, t}
					}
				}
				slices.SortFunc(want, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
				if !slices.Equal(got, want) {
					fail("%s: map All(%q) = %v, want the live entries %v", at, k, got, want)
				}
			default:
				clock.Advance(time.Duration(rng.Int64N(40)) * time.Millisecond)
			}
		}
		// Every snapshot holds exactly the live entries, with their
		// stamps; restored into par stores, they keep them.
		want := m.records(now())
		got := map[string][]Record{}
		next := newTTLStores(e, clock, maxP, par)
		for i, s := range ts.stores {
			snap, err := s.Snapshot()
			must(err, "Snapshot")
			c, err := Dump(snap)
			must(err, "dump of the snapshot of store %d", i)
			for name, sc := range c.States {
				if sc.Spec.TTL != ttlMillis*time.Millisecond {
					fail("round %d: the snapshot of store %d has state %s, want a TTL of %d ms", round, i, sc.Spec, ttlMillis)
				}
				for _, recs := range sc.Groups {
					got[name] = append(got[name], recs...)
				}
			}
			v := e.codec(snap)
			for _, n := range next.stores {
				must(n.Restore(v), "Restore of the TTL states")
			}
			releaseView(v)
			must(snap.Release(), "Release")
		}
		for name := range want {
			sortRecords(got[name])
			if d := diff(want[name], got[name]); d != "" {
				fail("round %d: the snapshots of state %q hold other entries than the live ones (-want +got):\n%s", round, name, d)
			}
		}
		ts = next
	}
	checkTTLCleanup(e, ts, clock)
}

// records returns the model's live entries as a snapshot's records, sorted
// by state.
func (m *ttlModel) records(now int64) map[string][]Record {
	enc := func(v, at int64) string {
		return string(runtime.Int64Codec{}.AppendValue(runtime.AppendTTLStamp(nil, at), v))
	}
	key := func(k string) string { return string(runtime.StringCodec{}.AppendKey(nil, k)) }
	uk := func(u int64) string { return string(runtime.Int64Codec{}.AppendKey(nil, u)) }
	out := map[string][]Record{"ttl-value": nil, "ttl-list": nil, "ttl-map": nil}
	for k, s := range m.values {
		if s.live(now) {
			out["ttl-value"] = append(out["ttl-value"], Record{Key: key(k), Value: enc(s.v, s.at)})
		}
	}
	for lk, es := range m.lists {
		for _, s := range es {
			if s.live(now) {
				out["ttl-list"] = append(out["ttl-list"], Record{Key: key(lk.k), Namespace: uk(lk.ns), Value: enc(s.v, s.at)})
			}
		}
	}
	for k, es := range m.maps {
		for u, s := range es {
			if s.live(now) {
				out["ttl-map"] = append(out["ttl-map"], Record{Key: key(k), UserKey: uk(u), Value: enc(s.v, s.at)})
			}
		}
	}
	for _, recs := range out {
		sortRecords(recs)
	}
	return out
}

// sortRecords sorts records as Dump does, keeping list order.
func sortRecords(recs []Record) {
	slices.SortStableFunc(recs, func(a, b Record) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.UserKey, b.UserKey))
	})
}

// checkTTLCleanup lets everything expire, writes one key per store and
// state until the incremental cleanup has swept every key group, and
// checks that only the written keys are left.
func checkTTLCleanup(e *env, ts *ttlStores, clock *ManualClock) {
	clock.Advance(2 * ttlMillis * time.Millisecond)
	for i, s := range ts.stores {
		cfg := ts.cfgs[i]
		var key string
		for n := 0; ; n++ {
			key = fmt.Sprintf("fresh%d", n)
			if ts.owner(key) == i {
				break
			}
		}
		h := ts.handles[i]
		// Each write examines DefaultTTLCleanup key (or loads the keys of
		// the next key group): this many writes sweep every group.
		writes := 2*cfg.KeyGroups.Len() + 200
		for n := range writes {
			must(h.value.Put(key, int64(n)), "Put")
			must(h.list.Replace(key, 0, []int64{int64(n)}), "Replace")
			must(h.smap.Put(key, 0, int64(n)), "map Put")
		}
		want := string(runtime.StringCodec{}.AppendKey(nil, key))
		for _, spec := range s.States() {
			st, err := s.Register(spec)
			must(err, "Register of %q again", spec.Name)
			for kg := range cfg.KeyGroups.All() {
				must(st.Keys(kg, func(k []byte) bool {
					if string(k) != want {
						fail("store %d, state %q: key %q is still stored in key group %d after everything expired and %d writes cleaned up", i, spec.Name, k, kg, writes)
					}
					return true
				}), "Keys")
			}
		}
	}
}

// checkTTLRegister checks that a state's TTL is part of how it is
// registered.
func checkTTLRegister(e *env) {
	s := e.newStore(runtime.StoreConfig{Clock: NewManualClock(time.UnixMilli(0))})
	spec := runtime.StateSpec{Name: "ttl", Kind: runtime.KindValue, TTL: time.Second}
	if _, err := s.Register(spec); err != nil {
		fail("Register with a TTL: %v", err)
	}
	for _, other := range []time.Duration{2 * time.Second, 0} {
		bad := spec
		bad.TTL = other
		_, err := s.Register(bad)
		wantErr(err, runtime.ErrStateMismatch, fmt.Sprintf("Register of a state with a TTL of 1s again with %v", other), `"ttl"`)
	}
	if got := s.States(); len(got) != 1 || got[0].TTL != time.Second {
		fail("States() = %v, want the state with its TTL of 1s", got)
	}
	bad := runtime.StateSpec{Name: "neg", Kind: runtime.KindValue, TTL: -time.Second}
	_, err := s.Register(bad)
	wantErr(err, runtime.ErrInvalidState, "Register with a negative TTL", `"neg"`)
	if errors.Is(err, runtime.ErrStateMismatch) {
		fail("Register with a negative TTL: %v also wraps ErrStateMismatch", err)
	}
}
