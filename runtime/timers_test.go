package runtime_test

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stategen/stategen/backends/btree"
	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/backends/pebble"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

// backendsFor returns a constructor of each backend's stores.
func backendsFor(t *testing.T) map[string]func(runtime.StoreConfig) runtime.Store {
	t.Helper()
	open := func(s runtime.Store, err error) runtime.Store {
		t.Helper()
		check(t, err)
		t.Cleanup(func() { s.Close() })
		return s
	}
	return map[string]func(runtime.StoreConfig) runtime.Store{
		"model": func(c runtime.StoreConfig) runtime.Store { return open(storetest.NewModel(c)) },
		"cow":   func(c runtime.StoreConfig) runtime.Store { return open(cow.New(cow.Options{StoreConfig: c})) },
		"btree": func(c runtime.StoreConfig) runtime.Store { return open(btree.New(btree.Options{StoreConfig: c})) },
		"pebble": func(c runtime.StoreConfig) runtime.Store {
			return open(pebble.New(pebble.Options{StoreConfig: c, Dir: t.TempDir()}))
		},
	}
}

type timer = runtime.Timer[string, int64]

func newTimers(t *testing.T, s runtime.Store) runtime.Timers[string, int64] {
	t.Helper()
	return must[runtime.Timers[string, int64]](t)(runtime.NewTimers(s, runtime.TimersDescriptor[string, int64]{
		Name: "timers", Key: runtime.StringCodec{}, Namespace: runtime.Int64Codec{},
	}))
}

func timerOrder(a, b timer) int {
	return cmp.Or(cmp.Compare(a.Time, b.Time), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Namespace, b.Namespace))
}

// advance runs Advance(to) and returns the timers it fired, in order.
func advance(t *testing.T, ts runtime.Timers[string, int64], to int64) []timer {
	t.Helper()
	var got []timer
	check(t, ts.Advance(to, func(tm timer) error { got = append(got, tm); return nil }))
	return got
}

// TestTimersModel runs random registrations, deletions and advances
// against a set of timers on every backend: Advance fires exactly the
// timers due, in (time, key, namespace) order, each once; registering a
// timer twice is one timer; Next is the earliest time.
func TestTimersModel(t *testing.T) {
	for name, newStore := range backendsFor(t) {
		t.Run(name, func(t *testing.T) {
			s := newStore(runtime.StoreConfig{MaxParallelism: 32})
			// Two handles of the one state, used at random: each sees the
			// other's timers at once.
			handles := []runtime.Timers[string, int64]{newTimers(t, s), newTimers(t, s)}
			rng := rand.New(rand.NewPCG(1, 2))
			want := map[timer]bool{}
			now := int64(0)
			for step := range 3000 {
				ts := handles[rng.IntN(2)]
				tm := timer{Time: now + rng.Int64N(200) - 20, Key: fmt.Sprintf("k%d", rng.IntN(40)), Namespace: rng.Int64N(3) - 1}
				switch r := rng.IntN(10); {
				case r < 6:
					check(t, ts.Register(tm.Time, tm.Key, tm.Namespace))
					want[tm] = true
				case r < 8:
					// Delete one that exists, or one that does not.
					for w := range want {
						if rng.IntN(2) == 0 {
							tm = w
						}
						break
					}
					check(t, ts.Delete(tm.Time, tm.Key, tm.Namespace))
					delete(want, tm)
				default:
					now += rng.Int64N(60)
					var due []timer
					for w := range want {
						if w.Time <= now {
							due = append(due, w)
							delete(want, w)
						}
					}
					slices.SortFunc(due, timerOrder)
					if got := advance(t, ts, now); !slices.Equal(got, due) {
						t.Fatalf("step %d: Advance(%d) fired %v, want %v", step, now, got, due)
					}
				}
				next, ok, err := ts.Next()
				check(t, err)
				var wantNext *int64
				for w := range want {
					if wantNext == nil || w.Time < *wantNext {
						wantNext = &w.Time
					}
				}
				if ok != (wantNext != nil) || ok && next != *wantNext {
					t.Fatalf("step %d: Next = %d, %v; want %v", step, next, ok, wantNext)
				}
			}
		})
	}
}

// TestTimersModelDense is TestTimersModel with hundreds of timers in each
// of two key groups — more than Advance reads of a group at once, so that
// the heads it keeps hold a group's first timers only — and with
// callbacks that register and delete timers at random, before, among and
// after the timers a head holds: Advance still fires exactly the timers
// due, in time order, each once, those a callback registers due included.
func TestTimersModelDense(t *testing.T) {
	for name, newStore := range backendsFor(t) {
		t.Run(name, func(t *testing.T) {
			s := newStore(runtime.StoreConfig{MaxParallelism: 2})
			handles := []runtime.Timers[string, int64]{newTimers(t, s), newTimers(t, s)}
			rng := rand.New(rand.NewPCG(3, 4))
			want := map[timer]bool{}
			now := int64(0)
			// write registers or deletes a random timer at floor or later
			// (or one that exists) through a random handle, and keeps want
			// in step.
			write := func(floor int64) {
				ts := handles[rng.IntN(2)]
				// Half of them soon, half far: groups hold many timers, and
				// many come before the last a head holds.
				span := int64(100)
				if rng.IntN(2) == 0 {
					span = 5000
				}
				tm := timer{Time: max(floor, now+rng.Int64N(span)-10), Key: fmt.Sprintf("k%d", rng.IntN(300)), Namespace: rng.Int64N(3)}
				if rng.IntN(3) == 0 {
					for w := range want {
						tm = w
						break
					}
					check(t, ts.Delete(tm.Time, tm.Key, tm.Namespace))
					delete(want, tm)
					return
				}
				check(t, ts.Register(tm.Time, tm.Key, tm.Namespace))
				want[tm] = true
			}
			steps := 4000
			if testing.Short() {
				steps = 1000
			}
			for step := range steps {
				if rng.IntN(20) != 0 {
					write(math.MinInt64)
					continue
				}
				now += rng.Int64N(40)
				var got []timer
				err := handles[rng.IntN(2)].Advance(now, func(tm timer) error {
					if !want[tm] {
						t.Fatalf("step %d: Advance(%d) fired %v, which is not registered", step, now, tm)
					}
					// In time order (a callback's timer at its own time fires
					// after it, whatever its key).
					if len(got) > 0 && got[len(got)-1].Time > tm.Time {
						t.Fatalf("step %d: Advance(%d) fired %v after %v", step, now, tm, got[len(got)-1])
					}
					delete(want, tm)
					got = append(got, tm)
					// A callback's timers come at or after its own, as in
					// a job (one before would fire next, out of order).
					for range rng.IntN(3) {
						write(tm.Time)
					}
					return nil
				})
				check(t, err)
				for w := range want {
					if w.Time <= now {
						t.Fatalf("step %d: Advance(%d) left %v, which is due", step, now, w)
					}
				}
			}
		})
	}
}

// TestTimersRegisteredWhileFiring: a callback's timers due by the bound
// fire in the same Advance, in order; later ones wait; a callback's error
// ends the Advance.
func TestTimersRegisteredWhileFiring(t *testing.T) {
	for name, newStore := range backendsFor(t) {
		t.Run(name, func(t *testing.T) {
			s := newStore(runtime.StoreConfig{})
			ts := newTimers(t, s)
			check(t, ts.Register(10, "a", 0))
			check(t, ts.Register(20, "b", 0))
			var got []timer
			other := newTimers(t, s)
			check(t, ts.Advance(30, func(tm timer) error {
				got = append(got, tm)
				if tm.Key == "a" {
					check(t, other.Register(12, "g", 0)) // through another handle
					check(t, ts.Register(15, "c", 1))    // due, before b
					check(t, ts.Register(25, "d", 0))    // due, after b
					check(t, ts.Register(31, "e", 0))    // not due
					check(t, ts.Delete(20, "b", 0))      // deleted before it fires
					check(t, ts.Register(20, "b", 7))    // another namespace
				}
				return nil
			}))
			want := []timer{{10, "a", 0}, {12, "g", 0}, {15, "c", 1}, {20, "b", 7}, {25, "d", 0}}
			if !slices.Equal(got, want) {
				t.Errorf("fired %v, want %v", got, want)
			}
			boom := errors.New("boom")
			check(t, ts.Register(32, "f", 0))
			n := 0
			if err := ts.Advance(40, func(timer) error { n++; return boom }); !errors.Is(err, boom) || n != 1 {
				t.Errorf("Advance with a failing callback: %v after %d calls, want boom after 1", err, n)
			}
			if got := advance(t, ts, 40); !slices.Equal(got, []timer{{32, "f", 0}}) {
				t.Errorf("after the failed Advance, Advance fired %v", got)
			}
			if err := ts.Advance(50, nil); err == nil {
				t.Error("Advance with a nil callback succeeded")
			}
			var zero runtime.Timers[string, int64]
			if err := zero.Register(1, "a", 0); !errors.Is(err, runtime.ErrUnbound) {
				t.Errorf("Register on a zero handle: %v", err)
			}
		})
	}
}

// TestTimersRescale: timers are keyed state in every snapshot; restored
// into two stores that split the key groups, each fires exactly the timers
// of its keys, all of them once — a timer due before the snapshot and not
// yet fired fires after the restore — on every backend, restoring the
// snapshot of any other.
func TestTimersRescale(t *testing.T) {
	const maxP = 64
	backends := backendsFor(t)
	for from, newFrom := range backends {
		src := newFrom(runtime.StoreConfig{MaxParallelism: maxP})
		ts := newTimers(t, src)
		var all []timer
		for i := range 200 {
			tm := timer{Time: int64(i % 37), Key: fmt.Sprintf("key-%d", i), Namespace: int64(i % 3)}
			check(t, ts.Register(tm.Time, tm.Key, tm.Namespace))
			all = append(all, tm)
		}
		slices.SortFunc(all, timerOrder)
		snap, err := src.Snapshot()
		check(t, err)
		for to, newTo := range backends {
			t.Run(from+"-to-"+to, func(t *testing.T) {
				var fired []timer
				for _, r := range []runtime.KeyGroupRange{{Start: 0, End: 23}, {Start: 23, End: maxP}} {
					dst := newTo(runtime.StoreConfig{MaxParallelism: maxP, KeyGroups: r})
					dts := newTimers(t, dst)
					check(t, dst.Restore(snap))
					for _, tm := range advance(t, dts, 100) {
						k := runtime.MakeKey(runtime.StringCodec{}.AppendKey(nil, tm.Key), nil, maxP)
						if !r.Contains(k.Group()) {
							t.Errorf("store of key groups %v fired %v, of key group %d", r, tm, k.Group())
						}
						fired = append(fired, tm)
					}
					if got := advance(t, dts, 100); len(got) != 0 {
						t.Errorf("a second Advance fired %v again", got)
					}
				}
				slices.SortFunc(fired, timerOrder)
				if !slices.Equal(fired, all) {
					t.Errorf("the two stores fired %d timers, want the %d registered", len(fired), len(all))
				}
			})
		}
		check(t, snap.Release())
	}
}

// TestTimersBadInput: a timer registered for a time already passed fires
// at the next Advance (as in Flink); timers restored into a store of
// another maxParallelism are refused (their key groups would be wrong),
// and the store's own timers stay; a key whose key group the store does
// not own is refused naming the key group; Advance from inside Advance is
// refused.
func TestTimersBadInput(t *testing.T) {
	for name, newStore := range backendsFor(t) {
		t.Run(name, func(t *testing.T) {
			s := newStore(runtime.StoreConfig{MaxParallelism: 64, KeyGroups: runtime.KeyGroupRange{Start: 0, End: 32}})
			ts := newTimers(t, s)
			var owned, other string
			for i := 0; owned == "" || other == ""; i++ {
				k := fmt.Sprint("key-", i)
				key := runtime.MakeKey(runtime.StringCodec{}.AppendKey(nil, k), nil, 64)
				if key.Group() < 32 {
					owned = k
				} else {
					other = k
				}
			}
			if got := advance(t, ts, 100); len(got) != 0 {
				t.Fatalf("Advance of an empty state fired %v", got)
			}
			check(t, ts.Register(50, owned, 0)) // in the past
			if got := advance(t, ts, 100); !slices.Equal(got, []timer{{50, owned, 0}}) {
				t.Errorf("a timer registered in the past: Advance fired %v", got)
			}
			if err := ts.Register(200, other, 0); !errors.Is(err, runtime.ErrKeyGroupNotOwned) {
				t.Errorf("Register of a key of an unowned key group: %v, want ErrKeyGroupNotOwned", err)
			}
			check(t, ts.Register(300, owned, 0))
			err := ts.Advance(400, func(timer) error {
				return ts.Advance(500, func(timer) error { return nil })
			})
			if err == nil {
				t.Error("Advance from inside Advance succeeded")
			}
			check(t, ts.Register(300, owned, 0)) // the failed Advance deleted it
			src := newStore(runtime.StoreConfig{MaxParallelism: 32})
			st := newTimers(t, src)
			check(t, st.Register(1, owned, 0))
			snap, err := src.Snapshot()
			check(t, err)
			defer snap.Release()
			if err := s.Restore(snap); !errors.Is(err, runtime.ErrMaxParallelismMismatch) {
				t.Errorf("restoring timers of maxParallelism 32 into 64: %v, want ErrMaxParallelismMismatch", err)
			}
			if got := advance(t, ts, 1000); !slices.Equal(got, []timer{{300, owned, 0}}) {
				t.Errorf("after the refused Restore, Advance fired %v", got)
			}
		})
	}
}

// uncounted hides a store's RestoreCounter: timers then read every key
// group they saw empty again at each Advance.
type uncounted struct{ runtime.Store }

// TestTimersRestoredAfterAdvance: timers restored into a store whose
// timer handles have already read its key groups empty fire at the next
// Advance, and Next sees them — on every backend, whether the store counts
// its Restores or not.
func TestTimersRestoredAfterAdvance(t *testing.T) {
	for name, newStore := range backendsFor(t) {
		for _, hide := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/uncounted=%v", name, hide), func(t *testing.T) {
				cfg := runtime.StoreConfig{MaxParallelism: 16}
				src := newStore(cfg)
				srcTimers := newTimers(t, src)
				var want []timer
				for i := range 40 {
					tm := timer{Time: int64(100 + i), Key: fmt.Sprint("k", i), Namespace: int64(i % 3)}
					check(t, srcTimers.Register(tm.Time, tm.Key, tm.Namespace))
					want = append(want, tm)
				}
				snap, err := src.Snapshot()
				check(t, err)
				defer snap.Release()

				var dst runtime.Store = newStore(cfg)
				if hide {
					dst = uncounted{dst}
				}
				ts := newTimers(t, dst)
				// One timer of the store's own, and every other group read
				// empty.
				check(t, ts.Register(50, "own", 0))
				if got := advance(t, ts, 60); !slices.Equal(got, []timer{{50, "own", 0}}) {
					t.Fatalf("Advance fired %v, want the store's own timer", got)
				}
				if _, ok, err := ts.Next(); err != nil || ok {
					t.Fatalf("Next of an empty timer state: %v, %v", ok, err)
				}
				check(t, dst.Restore(snap))
				next, ok, err := ts.Next()
				if err != nil || !ok || next != 100 {
					t.Errorf("after the restore, Next = %d, %v, %v; want 100", next, ok, err)
				}
				if got := advance(t, ts, 1000); !slices.Equal(got, want) {
					t.Errorf("after the restore, Advance fired %v, want the %d restored timers", got, len(want))
				}
			})
		}
	}
}

// putCounter is a store whose sorted map states count their Puts. Its
// states check writes as their store's do (runtime.WriteChecker), unless
// hide, when they answer errors.ErrUnsupported as a wrapper of a store that
// cannot check writes does.
type putCounter struct {
	runtime.Store
	hide bool
	puts int
}

func (p *putCounter) Register(spec runtime.StateSpec) (runtime.State, error) {
	st, err := p.Store.Register(spec)
	if sm, ok := st.(runtime.SortedMapState); ok && err == nil {
		return &countedSorted{sm, p}, nil
	}
	return st, err
}

type countedSorted struct {
	runtime.SortedMapState
	p *putCounter
}

func (c *countedSorted) Put(k runtime.Key, uk, v []byte) error {
	c.p.puts++
	return c.SortedMapState.Put(k, uk, v)
}

func (c *countedSorted) CheckWrite(k runtime.Key) error {
	if wc, ok := c.SortedMapState.(runtime.WriteChecker); ok && !c.p.hide {
		return wc.CheckWrite(k)
	}
	return fmt.Errorf("putCounter: %w", errors.ErrUnsupported)
}

// TestTimersRegisterAgain: registering a timer that the handles hold among
// the first timers of its key group writes nothing to a store that checks
// writes (runtime.WriteChecker), and fails as the write would: from inside
// an iteration's callback, and after Close. A store that cannot check
// writes is written to. Either way the timer fires once.
func TestTimersRegisterAgain(t *testing.T) {
	for name, newStore := range backendsFor(t) {
		for _, hide := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/hide=%v", name, hide), func(t *testing.T) {
				p := &putCounter{Store: newStore(runtime.StoreConfig{}), hide: hide}
				ts := newTimers(t, p)
				check(t, ts.Register(10, "a", 0))
				if got := advance(t, ts, 0); len(got) != 0 { // reads the heads
					t.Fatalf("Advance(0) fired %v", got)
				}
				before := p.puts
				check(t, ts.Register(10, "a", 0))
				wantPuts := before
				if hide {
					wantPuts++
				}
				if p.puts != wantPuts {
					t.Errorf("registering a held timer again made %d Puts, want %d", p.puts-before, wantPuts-before)
				}
				check(t, ts.Register(20, "a", 0))
				if p.puts != wantPuts+1 {
					t.Errorf("registering a new timer made %d Puts, want 1", p.puts-wantPuts)
				}

				// From inside an iteration of the same store, a write is
				// refused, and so is the Register that would make none.
				m := must[runtime.Map[string, string, string]](t)(runtime.NewMap(p, runtime.MapDescriptor[string, string, string]{
					Name: "other", Key: runtime.StringCodec{}, UserKey: runtime.StringCodec{}, Value: runtime.StringCodec{},
				}))
				check(t, m.Put("k", "u", "v"))
				for _, err := range m.All("k") {
					check(t, err)
					if err := ts.Register(10, "a", 0); !errors.Is(err, runtime.ErrWriteDuringIteration) {
						t.Errorf("Register from inside an iteration: %v, want ErrWriteDuringIteration", err)
					}
				}
				if got, want := advance(t, ts, 30), []timer{{Time: 10, Key: "a"}, {Time: 20, Key: "a"}}; !slices.Equal(got, want) {
					t.Errorf("Advance(30) fired %v, want %v", got, want)
				}

				check(t, ts.Register(40, "a", 0))
				advance(t, ts, 30)
				check(t, p.Close())
				if err := ts.Register(40, "a", 0); !errors.Is(err, runtime.ErrClosed) {
					t.Errorf("Register after Close: %v, want ErrClosed", err)
				}
			})
		}
	}
}
