package cow

import (
	"errors"
	"fmt"
	"math/rand/v2"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

// exclusiveView is a View that fails the test if two Scans of one key
// group overlap, which runtime.View forbids, and records the key groups
// scanned.
type exclusiveView struct {
	runtime.View
	t       *testing.T
	mu      sync.Mutex
	active  map[int]bool
	scanned map[int]bool
}

func newExclusiveView(t *testing.T, v runtime.View) *exclusiveView {
	return &exclusiveView{View: v, t: t, active: make(map[int]bool), scanned: make(map[int]bool)}
}

func (v *exclusiveView) Scan(state string, kg int, fn func(runtime.Entry) error) error {
	v.mu.Lock()
	if v.active[kg] {
		v.t.Errorf("two Scans of key group %d overlap", kg)
	}
	v.active[kg], v.scanned[kg] = true, true
	v.mu.Unlock()
	defer func() {
		v.mu.Lock()
		v.active[kg] = false
		v.mu.Unlock()
	}()
	return v.View.Scan(state, kg, fn)
}

func restoreDump(t *testing.T, opts Options, v runtime.View) storetest.Contents {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Restore(v); err != nil {
		t.Fatalf("Restore with concurrency %d: %v", opts.RestoreConcurrency, err)
	}
	c, err := storetest.Dump(mustSnapshot(t, s))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestParallelRestoreMatchesSequential restores one view of every kind,
// keyed and sub-keyed, with maps split into runs, with concurrency 1 and
// several larger ones (more than the key groups included), into stores
// owning every key group and a part of them, and compares every entry
// with the sequential restore and with the reference model.
func TestParallelRestoreMatchesSequential(t *testing.T) {
	const maxP = 8
	v := mixedView(rand.New(rand.NewPCG(7, 8)), maxP, 200)
	for _, groups := range []runtime.KeyGroupRange{runtime.FullRange(maxP), {Start: 3, End: 7}} {
		cfg := runtime.StoreConfig{MaxParallelism: maxP, KeyGroups: groups}
		m, err := storetest.NewModel(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Restore(v); err != nil {
			t.Fatal(err)
		}
		model, err := storetest.Dump(mustSnapshot(t, m))
		if err != nil {
			t.Fatal(err)
		}
		seq := restoreDump(t, Options{StoreConfig: cfg, RestoreConcurrency: 1}, newExclusiveView(t, v))
		if d := cmp.Diff(model, seq); d != "" {
			t.Fatalf("key groups %v: the sequential restore differs from the model (-want +got):\n%s", groups, d)
		}
		if seq.Len() == 0 {
			t.Fatalf("key groups %v: nothing restored", groups)
		}
		for _, n := range []int{2, 3, 4, 7, 64} {
			ev := newExclusiveView(t, v)
			got := restoreDump(t, Options{StoreConfig: cfg, RestoreConcurrency: n}, ev)
			if d := cmp.Diff(seq, got); d != "" {
				t.Fatalf("key groups %v: concurrency %d differs from the sequential restore (-want +got):\n%s", groups, n, d)
			}
			if len(ev.scanned) != groups.Len() {
				t.Errorf("key groups %v: concurrency %d scanned key groups %v", groups, n, ev.scanned)
			}
		}
	}
}

var errScanFailed = errors.New("test: scan failed")

// failingView scans its view, except that the Scan of key group failKG
// fails with errScanFailed (or panics, if panics) after failAfter entries,
// and the Scans of the other key groups wait until failed is closed — by
// the store's testLoadFailed hook, once the failure has stopped the
// workers — before they call fn. It records the errors fn returned to the
// waiting Scans.
type failingView struct {
	*exclusiveView
	failKG    int
	failAfter int
	panics    bool
	failed    chan struct{}
	mu        sync.Mutex
	late      []error // what fn returned to the first entry of each waiting Scan
}

func (v *failingView) Scan(state string, kg int, fn func(runtime.Entry) error) error {
	if kg == v.failKG {
		n := 0
		return v.exclusiveView.Scan(state, kg, func(e runtime.Entry) error {
			if n == v.failAfter {
				if v.panics {
					panic(errScanFailed)
				}
				return fmt.Errorf("key group %d: %w", kg, errScanFailed)
			}
			n++
			return fn(e)
		})
	}
	<-v.failed
	first := true
	return v.exclusiveView.Scan(state, kg, func(e runtime.Entry) error {
		err := fn(e)
		if first {
			first = false
			v.mu.Lock()
			v.late = append(v.late, err)
			v.mu.Unlock()
		}
		return err
	})
}

// TestFailedRestoreChangesNothing makes the Scan of one key group fail
// midway (or panic) and checks, for concurrency 1 and larger, that Restore
// returns that error (re-raises that panic on its goroutine), that the
// other workers stopped — a Scan that was waiting gets an error at its
// first entry, and no key group is handed out after the failure — that no
// goroutine is left behind, and that the store is unchanged: no new
// state, no entry, and a second Restore of a sound view then succeeds.
func TestFailedRestoreChangesNothing(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const maxP = 8
	v := mixedView(rand.New(rand.NewPCG(9, 10)), maxP, 100)
	cfg := runtime.StoreConfig{MaxParallelism: maxP}
	want := restoreDump(t, Options{StoreConfig: cfg, RestoreConcurrency: 1}, v)
	for _, panics := range []bool{false, true} {
		for _, n := range []int{1, 2, 4, 64} {
			t.Run(fmt.Sprintf("panics=%v/concurrency=%d", panics, n), func(t *testing.T) {
				s, err := New(Options{StoreConfig: cfg, RestoreConcurrency: n})
				if err != nil {
					t.Fatal(err)
				}
				// A state of the store's own, with an entry, which the
				// failed Restore must leave alone.
				own, err := s.Register(runtime.StateSpec{Name: "own", Kind: runtime.KindValue})
				if err != nil {
					t.Fatal(err)
				}
				if err := own.(runtime.ValueState).Put(runtime.MakeKey([]byte("k"), nil, maxP), []byte("v")); err != nil {
					t.Fatal(err)
				}
				before, err := storetest.Dump(mustSnapshot(t, s))
				if err != nil {
					t.Fatal(err)
				}
				fv := &failingView{exclusiveView: newExclusiveView(t, v), failKG: 0, failAfter: 3, panics: panics, failed: make(chan struct{})}
				var once sync.Once
				s.testLoadFailed = func() { once.Do(func() { close(fv.failed) }) }
				err = restoreRecover(s, fv)
				if !errors.Is(err, errScanFailed) {
					t.Fatalf("Restore = %v, want errScanFailed", err)
				}
				if panics && n > 1 && !strings.Contains(err.Error(), "panic loading key group 0") {
					t.Errorf("the panic re-raised by Restore does not say where it happened: %v", err)
				}
				if len(fv.scanned) > n {
					t.Errorf("%d key groups scanned with %d workers: key groups were handed out after the failure", len(fv.scanned), n)
				}
				for _, e := range fv.late {
					if !errors.Is(e, errRestoreStopped) {
						t.Errorf("a Scan running after the failure was not stopped: its first entry got %v", e)
					}
				}
				if got := s.States(); len(got) != 1 || got[0].Name != "own" {
					t.Errorf("after a failed Restore the store has states %v, want only %q", got, "own")
				}
				after, err := storetest.Dump(mustSnapshot(t, s))
				if err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(before, after); d != "" {
					t.Fatalf("a failed Restore changed the store (-before +after):\n%s", d)
				}
				if err := s.Restore(v); err != nil {
					t.Fatalf("Restore after a failed one: %v", err)
				}
				got, err := storetest.Dump(mustSnapshot(t, s))
				if err != nil {
					t.Fatal(err)
				}
				delete(got.States, "own")
				if d := cmp.Diff(want, got); d != "" {
					t.Fatalf("Restore after a failed one differs (-want +got):\n%s", d)
				}
			})
		}
	}
}

// restoreRecover returns the error of s.Restore(v), or the panic it raised
// if that is an error.
func restoreRecover(s *Store, v runtime.View) (err error) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(error)
			if !ok {
				e = fmt.Errorf("panic with a non-error: %v", r)
			}
			err = e
		}
	}()
	return s.Restore(v)
}

// goexitView's Scan of key group 1 ends its goroutine with runtime.Goexit,
// as a test helper's t.FailNow would.
type goexitView struct{ runtime.View }

func (v goexitView) Scan(state string, kg int, fn func(runtime.Entry) error) error {
	if kg == 1 {
		goruntime.Goexit()
	}
	return v.View.Scan(state, kg, fn)
}

// TestParallelRestoreReportsGoexit checks that a worker whose Scan ends its
// goroutine fails the Restore instead of leaving its key group unloaded.
func TestParallelRestoreReportsGoexit(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const maxP = 4
	s, err := New(Options{StoreConfig: runtime.StoreConfig{MaxParallelism: maxP}, RestoreConcurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Restore(goexitView{mixedView(rand.New(rand.NewPCG(1, 1)), maxP, 20)})
	if err == nil || !strings.Contains(err.Error(), "key group 1") || !strings.Contains(err.Error(), "Goexit") {
		t.Fatalf("Restore = %v, want an error naming key group 1 and Goexit", err)
	}
	if len(s.States()) != 0 {
		t.Errorf("a failed Restore registered states %v", s.States())
	}
}
