package evolve_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stategen/stategen/backends/btree"
	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/backends/pebble"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/checkpoint/inspect"
	"github.com/stategen/stategen/generated/evolve/bad"
	"github.com/stategen/stategen/generated/evolve/hatch"
	v1 "github.com/stategen/stategen/generated/evolve/v1"
	v2 "github.com/stategen/stategen/generated/evolve/v2"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/schema"
)

const maxP = 16

var ctx = context.Background()

// backends makes an empty store of each backend for key groups kgs.
var backends = []struct {
	name string
	new  func(t testing.TB, kgs runtime.KeyGroupRange) runtime.Store
}{
	{"cow", func(t testing.TB, kgs runtime.KeyGroupRange) runtime.Store {
		s, err := cow.New(cow.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: maxP, KeyGroups: kgs}})
		return must(t, s, err)
	}},
	{"btree", func(t testing.TB, kgs runtime.KeyGroupRange) runtime.Store {
		s, err := btree.New(btree.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: maxP, KeyGroups: kgs}})
		return must(t, s, err)
	}},
	{"pebble", func(t testing.TB, kgs runtime.KeyGroupRange) runtime.Store {
		s, err := pebble.New(pebble.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: maxP, KeyGroups: kgs}, Dir: t.TempDir()})
		return must(t, s, err)
	}},
}

func must[S runtime.Store](t testing.TB, s S, err error) runtime.Store {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func visit1(page string, n int32) v1.Visit {
	return v1.Visit{Page: page, Score: 0.5, Tags: []string{"t-" + page}, N: n}
}

// visit2 is what visit1(page, n) becomes under v2's types.
func visit2(page string, n int64) v2.PageVisit {
	return v2.PageVisit{Tags: []string{"t-" + page}, Where: page, N: n}
}

// users of the test: each key lands in some key group.
var users = []string{"ann", "bob", "cy", "dee", "eve", "fay"}

// writeV1 fills a store with v1's code and checkpoints it as
// "chk-1"/operator "op" in s.
func writeV1(t testing.TB, s checkpoint.Storage) {
	t.Helper()
	store := backends[0].new(t, runtime.FullRange(maxP))
	st, err := v1.OpenState(store)
	if err != nil {
		t.Fatal(err)
	}
	for i, u := range users {
		n := int32(i + 1)
		p := v1.Profile{Name: "N" + u, Age: int8(-i), Ratio: 0.25 * float32(i)}
		if i%2 == 0 {
			p.Visits = []v1.Visit{visit1("/a", n), visit1("/b", -n)}
			p.Pages = map[string]v1.Visit{"home": visit1("/h", n)}
			best := visit1("/best", 100*n)
			p.Best = &best
			p.Raw = []byte("raw " + u)
		}
		check(t, st.Profiles.Put(u, p))
		check(t, st.History.AddAll(u, []v1.Visit{visit1("/x", n), visit1("/y", n+1)}))
		check(t, st.Pages.Put(u, "p", visit1("/p", n)))
		check(t, st.Timeline.Put(u, int64(-i), visit1("/t", n)))
		check(t, st.Timeline.Put(u, int64(i*10), visit1("/u", n)))
		check(t, st.Windows.Put(u, v1.Window{Start: 0, End: 60}, v1.Agg{Count: int16(-i), Sum: 1.5}))
		check(t, st.Same.Put(u, int64(i)*1e12))
		check(t, st.Counter.Put(u, -n))
		check(t, st.Scores.Put(u, v1.Score{A: int64(i), B: -int64(i), Name: u}))
	}
	checkpointStore(t, s, store)
}

// checkpointStore writes a snapshot of store as checkpoint chk-1 of
// operator "op".
func checkpointStore(t testing.TB, s checkpoint.Storage, store runtime.Store) {
	t.Helper()
	snap, err := store.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	is, err := checkpoint.WriteInstance(ctx, s, "chk-1", "op-0.sgc", snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	op, err := checkpoint.NewOperator("op", is)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Commit(ctx, s, "chk-1", &checkpoint.Metadata{CheckpointID: 1, Operators: []checkpoint.Operator{op}}); err != nil {
		t.Fatal(err)
	}
}

func check(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantV2 is what user i's state holds under v2's types.
type userState struct {
	Profile  v2.Profile
	History  []v2.PageVisit
	Page     *v2.PageVisit
	Timeline map[int64]v2.PageVisit
	Window   v2.Agg
	Same     int64
	Counter  int64
	Score    v2.Score
}

func wantV2(i int, u string) userState {
	n := int64(i + 1)
	p := v2.Profile{Name: []byte("N" + u), Age: int64(-i), Ratio: float64(0.25 * float32(i))}
	if i%2 == 0 {
		p.Visits = []v2.PageVisit{visit2("/a", n), visit2("/b", -n)}
		home := visit2("/h", n)
		p.Pages = map[string]*v2.PageVisit{"home": &home}
		p.Best = visit2("/best", 100*n)
		p.Raw = "raw " + u
	} else {
		p.Name = []byte("N" + u)
	}
	page := visit2("/p", n)
	return userState{
		Profile:  p,
		History:  []v2.PageVisit{visit2("/x", n), visit2("/y", n+1)},
		Page:     &page,
		Timeline: map[int64]v2.PageVisit{int64(-i): visit2("/t", n), int64(i * 10): visit2("/u", n)},
		Window:   v2.Agg{Count: int64(-i), Sum: 1.5},
		Same:     int64(i) * 1e12,
		Counter:  -n,
		Score:    v2.Score{A: int64(i), B: -int64(i), Name: u},
	}
}

func readV2(t *testing.T, st *v2.State, u string) userState {
	t.Helper()
	var got userState
	var err error
	var ok bool
	if got.Profile, ok, err = st.Profiles.Get(u); err != nil || !ok {
		t.Fatalf("profile of %s: %v, %v", u, ok, err)
	}
	if got.History, err = st.History.Get(u); err != nil {
		t.Fatal(err)
	}
	if got.Page, ok, err = st.Pages.Get(u, "p"); err != nil || !ok {
		t.Fatalf("page of %s: %v, %v", u, ok, err)
	}
	got.Timeline = map[int64]v2.PageVisit{}
	for e, err := range st.Timeline.All(u) {
		check(t, err)
		got.Timeline[e.Key] = e.Value
	}
	if got.Window, ok, err = st.Windows.Get(u, v2.Span{From: 0, To: 60}); err != nil || !ok {
		t.Fatalf("window of %s: %v, %v", u, ok, err)
	}
	if got.Same, _, err = st.Same.Get(u); err != nil {
		t.Fatal(err)
	}
	if got.Counter, _, err = st.Counter.Get(u); err != nil {
		t.Fatal(err)
	}
	if got.Score, _, err = st.Scores.Get(u); err != nil {
		t.Fatal(err)
	}
	return got
}

// A checkpoint written by yesterday's code restores under today's, on
// every backend and at another parallelism, with no option: every value
// is what v2's types must hold — added fields zero, removed ones gone,
// renamed and reordered ones found, widened numbers equal, pointers
// made and unmade — and the unchanged state restores untouched. The
// restored store then checkpoints and restores again under v2 alone.
//
// The checkpoint comes fresh from v1's code, and from testdata, where v1's
// code wrote it once (go test -update rewrites it): yesterday's bytes must
// keep restoring whatever today's code becomes.
func TestRestoreMigratesYesterdaysCheckpoint(t *testing.T) {
	fresh := checkpoint.NewMem()
	writeV1(t, fresh)
	for _, src := range []struct {
		name string
		s    checkpoint.Storage
	}{{"fresh", fresh}, {"golden", golden(t)}} {
		s := src.s
		for _, b := range backends {
			for _, p := range []int{1, 2} {
				t.Run(fmt.Sprintf("checkpoint=%s/backend=%s/p=%d", src.name, b.name, p), func(t *testing.T) {
					seen := 0
					for i := range p {
						kgs, err := runtime.KeyGroupRangeForOperator(maxP, p, i)
						check(t, err)
						store := b.new(t, kgs)
						st, err := v2.OpenState(store)
						check(t, err)
						stats, err := checkpoint.Restore(ctx, s, "chk-1", "op", i, p, store, nil)
						if err != nil {
							t.Fatalf("restore: %v", err)
						}
						wantMigrated := []string{"counter", "history", "pages", "profiles", "scores", "timeline", "windows"}
						if got := slices.Sorted(maps.Keys(stats.Migrated)); !slices.Equal(got, wantMigrated) {
							t.Errorf("migrated %v, want %v (same is unchanged)", got, wantMigrated)
						}
						for ui, u := range users {
							kg, err := runtime.KeyGroupForKey(runtime.AppendStringKey(nil, u), maxP)
							check(t, err)
							if !kgs.Contains(kg) {
								continue
							}
							seen++
							if diff := cmp.Diff(wantV2(ui, u), readV2(t, st, u)); diff != "" {
								t.Errorf("user %s (-want +got):\n%s", u, diff)
							}
						}
						if p == 1 {
							// The restored state checkpoints as v2 and
							// restores as v2, without migration.
							s2 := checkpoint.NewMem()
							checkpointStore(t, s2, store)
							again := b.new(t, kgs)
							st2, err := v2.OpenState(again)
							check(t, err)
							stats, err := checkpoint.Restore(ctx, s2, "chk-1", "op", 0, 1, again, nil)
							if err != nil || stats.Migrated != nil {
								t.Fatalf("second restore: %+v, %v", stats, err)
							}
							for ui, u := range users {
								if diff := cmp.Diff(wantV2(ui, u), readV2(t, st2, u)); diff != "" {
									t.Errorf("user %s after a second checkpoint (-want +got):\n%s", u, diff)
								}
							}
						}
					}
					if seen != len(users) {
						t.Errorf("read %d users, want %d", seen, len(users))
					}
				})
			}
		}
	}
}

var update = flag.Bool("update", false, "rewrite testdata/v1-checkpoint with v1's code")

// golden returns the checkpoint directory of testdata, written by v1's
// code (with -update, again).
func golden(t testing.TB) checkpoint.Storage {
	t.Helper()
	dir := filepath.Join("testdata", "v1-checkpoint")
	if *update {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		d, err := checkpoint.NewDir(dir)
		check(t, err)
		writeV1(t, d)
	}
	d, err := checkpoint.NewDir(dir)
	check(t, err)
	return d
}

// An incompatible change is refused before anything is loaded, on every
// backend, with an error that names each state, the field path and both
// types, saying which side is which.
func TestRestoreRefusesIncompatibleChanges(t *testing.T) {
	s := checkpoint.NewMem()
	writeV1(t, s)
	for _, b := range backends {
		t.Run("backend="+b.name, func(t *testing.T) {
			store := b.new(t, runtime.FullRange(maxP))
			if _, err := bad.OpenState(store); err != nil {
				t.Fatal(err)
			}
			_, err := checkpoint.Restore(ctx, s, "chk-1", "op", 0, 1, store, nil)
			if !errors.Is(err, schema.ErrIncompatible) || !errors.Is(err, runtime.ErrStateMismatch) {
				t.Fatalf("restore: %v, want an incompatible schema change", err)
			}
			for _, want := range []string{
				`state "profiles"`, "value.Name: checkpoint has string, code declares int64",
				`state "counter"`, "value: checkpoint has int32, code declares int16",
			} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			snap, err := store.Snapshot()
			check(t, err)
			defer snap.Release()
			for _, spec := range snap.States() {
				for kg := range snap.KeyGroups().All() {
					check(t, snap.Scan(spec.Name, kg, func(e runtime.Entry) error {
						return fmt.Errorf("the refused restore loaded %q in state %q", e.Key, spec.Name)
					}))
				}
			}
		})
	}
}

// The offline reader migrates through the functions a descriptor lists,
// as a restore does: yesterday's incompatible change reads with the
// escape hatch's descriptor, and is refused without it.
func TestInspectMigratesWithMigrationFunctions(t *testing.T) {
	c, err := inspect.OpenStorage(ctx, golden(t), "chk-1")
	check(t, err)
	d := hatch.DescribeState()
	profiles, err := inspect.Values(ctx, c, "op", d.Profiles)
	check(t, err)
	counters, err := inspect.Values(ctx, c, "op", d.Counter)
	check(t, err)
	for i, u := range users {
		if p := profiles[u]; p != (hatch.Profile{Name: int64(len("N" + u)), Age: int64(-i)}) {
			t.Errorf("profile of %s: %+v", u, p)
		}
		if n := counters[u]; n != int16(-(i + 1)) {
			t.Errorf("counter of %s: %d", u, n)
		}
	}
	if len(profiles) != len(users) || len(counters) != len(users) {
		t.Errorf("read %d profiles and %d counters, want %d each", len(profiles), len(counters), len(users))
	}
	_, err = inspect.Values(ctx, c, "op", bad.DescribeState().Counter)
	if !errors.Is(err, inspect.ErrState) || !errors.Is(err, schema.ErrIncompatible) || !strings.Contains(err.Error(), `state "counter"`) {
		t.Errorf("inspect of the counter without its migration function: %v", err)
	}
}

// A migration function belongs to the store its state's handle was bound
// to: a restore into another store of the same process, whose same-named
// state of the same schema declares none, refuses the incompatible change
// rather than run a function that code never declared for it.
func TestMigrationFunctionsBelongToTheirStore(t *testing.T) {
	s := checkpoint.NewMem()
	writeV1(t, s)
	for _, b := range backends {
		t.Run("backend="+b.name, func(t *testing.T) {
			withHatch := b.new(t, runtime.FullRange(maxP))
			hs, err := hatch.OpenState(withHatch)
			check(t, err)
			without := b.new(t, runtime.FullRange(maxP))
			bs, err := bad.OpenState(without)
			check(t, err)
			if hs.Counter.Spec().Fingerprint != bs.Counter.Spec().Fingerprint {
				t.Fatalf("the counters differ in schema: %s, %s", hs.Counter.Spec(), bs.Counter.Spec())
			}
			_, err = checkpoint.Restore(ctx, s, "chk-1", "op", 0, 1, without, nil)
			if !errors.Is(err, schema.ErrIncompatible) || !strings.Contains(err.Error(), `state "counter"`) {
				t.Fatalf("restore into the store without migrations: %v, want counter's change refused", err)
			}
			_, err = checkpoint.Restore(ctx, s, "chk-1", "op", 0, 1, withHatch, &checkpoint.RestoreOptions{UnknownStates: checkpoint.DropUnknownStates})
			check(t, err)
			for i, u := range users {
				if c, ok, err := hs.Counter.Get(u); err != nil || !ok || c != int16(-(i+1)) {
					t.Errorf("counter of %s: %d, %v, %v", u, c, ok, err)
				}
			}
		})
	}
}

// BenchmarkRestoreMigrate restores a checkpoint of one Value state of
// BENCH keys (default 1M) twice in the same run: into a store that
// registered the checkpoint's own schema (plain), and into one that
// registered it with a field added (migrate), on the cow backend.
func BenchmarkRestoreMigrate(b *testing.B) {
	n := 1_000_000
	if testing.Short() {
		n = 10_000
	}
	s := checkpoint.NewMem()
	store := backends[0].new(b, runtime.FullRange(maxP))
	st, err := v1.OpenState(store)
	check(b, err)
	for i := range n {
		check(b, st.Scores.Put(fmt.Sprintf("user-%08d", i), v1.Score{A: int64(i), B: int64(-i), Name: "n"}))
	}
	checkpointStore(b, s, store)
	keys := fmt.Sprintf("keys=%dk", n/1000)
	if n >= 1_000_000 {
		keys = fmt.Sprintf("keys=%dM", n/1_000_000)
	}
	for _, mode := range []struct {
		name string
		open func(runtime.Store) error
	}{
		{"plain", func(s runtime.Store) error { _, err := v1.OpenState(s); return err }},
		{"migrate", func(s runtime.Store) error { _, err := v2.OpenState(s); return err }},
	} {
		b.Run("mode="+mode.name+"/"+keys, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				dst, err := cow.New(cow.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: maxP, KeyGroups: runtime.FullRange(maxP)}})
				check(b, err)
				check(b, mode.open(dst))
				b.StartTimer()
				if _, err := checkpoint.Restore(ctx, s, "chk-1", "op", 0, 1, dst, nil); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				dst.Close()
				b.StartTimer()
			}
		})
	}
}

// The offline reader decodes yesterday's checkpoint with today's types
// through the same migration as a restore.
func TestInspectReadsYesterdaysCheckpointWithTodaysTypes(t *testing.T) {
	c, err := inspect.OpenStorage(ctx, golden(t), "chk-1")
	check(t, err)
	d := v2.DescribeState()
	scores, err := inspect.Values(ctx, c, "op", d.Scores)
	check(t, err)
	history, err := inspect.Lists(ctx, c, "op", d.History)
	check(t, err)
	for i, u := range users {
		want := wantV2(i, u)
		if diff := cmp.Diff(want.Score, scores[u]); diff != "" {
			t.Errorf("score of %s (-want +got):\n%s", u, diff)
		}
		if diff := cmp.Diff(want.History, history[u]); diff != "" {
			t.Errorf("history of %s (-want +got):\n%s", u, diff)
		}
	}
	// An incompatible descriptor is refused, naming the field.
	_, err = inspect.Values(ctx, c, "op", bad.DescribeState().Profiles)
	if !errors.Is(err, inspect.ErrState) || !errors.Is(err, schema.ErrIncompatible) || !strings.Contains(err.Error(), "value.Name") {
		t.Errorf("inspect with an incompatible descriptor: %v", err)
	}
}

// The escape hatch: an incompatible change restores when the code keeps
// the old type and marks a function that migrates from it; the function
// runs for every value, on every backend, after the schema rules resolve
// the checkpoint's schema to the old type's.
func TestMigrationFunctionsRestoreAnIncompatibleChange(t *testing.T) {
	s := golden(t)
	for _, b := range backends {
		t.Run("backend="+b.name, func(t *testing.T) {
			store := b.new(t, runtime.FullRange(maxP))
			st, err := hatch.OpenState(store)
			check(t, err)
			stats, err := checkpoint.Restore(ctx, s, "chk-1", "op", 0, 1, store, &checkpoint.RestoreOptions{UnknownStates: checkpoint.DropUnknownStates})
			if err != nil {
				t.Fatalf("restore: %v", err)
			}
			if got := strings.Join(stats.Migrated["profiles"], "\n"); !strings.Contains(got, "migration function") {
				t.Errorf("profiles migrated with %q", stats.Migrated["profiles"])
			}
			for i, u := range users {
				p, ok, err := st.Profiles.Get(u)
				if err != nil || !ok || p != (hatch.Profile{Name: int64(len("N" + u)), Age: int64(-i)}) {
					t.Errorf("profile of %s: %+v, %v, %v", u, p, ok, err)
				}
				c, ok, err := st.Counter.Get(u)
				if err != nil || !ok || c != int16(-(i+1)) {
					t.Errorf("counter of %s: %d, %v, %v", u, c, ok, err)
				}
			}
		})
	}
}
