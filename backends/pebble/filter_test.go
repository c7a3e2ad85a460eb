package pebble_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/stategen/stategen/backends/pebble"
	"github.com/stategen/stategen/runtime"
)

// TestKeyFilterReads drives random writes and reads of mostly absent keys
// into pebble stores and the reference model alike — batched and with a
// write-ahead log, with a filter that grows by rebuilds and one that
// outgrows its bound and turns off — with commits at random, then
// restores a snapshot into a new store and reads every key there: every
// read is the model's, and the filter answered reads of absent keys.
func TestKeyFilterReads(t *testing.T) {
	pebble.SetMaxPointClear(t, 0) // every Clear of a map is a range deletion
	for _, tc := range []struct {
		name    string
		opts    pebble.Options
		keys    int
		turnOff bool
	}{
		{"batched", pebble.Options{InMemory: true}, 10_000, false},
		{"wal", pebble.Options{InMemory: true, Sync: pebble.SyncWAL}, 8_000, false},
		{"bound", pebble.Options{InMemory: true, KeyFilterSize: 16 << 10}, 10_000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustNew(t, tc.opts)
			vs, ms, ls := valueState(t, s), register[runtime.SortedMapState](t, s, mapSpec), register[runtime.ListState](t, s, listSpec)
			_, mv, mm, ml := modelStates(t)
			rng := rand.New(rand.NewPCG(3, 4))
			startBytes, maxBytes := s.FilterBytes(), 0
			for n := range 4 * tc.keys {
				i := rng.IntN(tc.keys)
				k := nsKey(i, []string{"a", "b"}[rng.IntN(2)])
				v := []byte(fmt.Sprint("v", n))
				uk := []byte{byte('p' + rng.IntN(3))}
				switch op := rng.IntN(20); {
				case op < 8:
					must(t, mv.Put(key(i), v))
					must(t, vs.Put(key(i), v))
				case op < 10:
					must(t, mv.Clear(key(i)))
					must(t, vs.Clear(key(i)))
				case op < 14:
					must(t, mm.Put(k, uk, v))
					must(t, ms.Put(k, uk, v))
				case op == 14:
					must(t, mm.Clear(k))
					must(t, ms.Clear(k))
				case op < 18:
					must(t, ml.Add(k, v))
					must(t, ls.Add(k, v))
				case op == 18:
					snap, err := s.Snapshot() // commits
					must(t, err)
					must(t, snap.Release())
				}
				maxBytes = max(maxBytes, s.FilterBytes())
				// A read of a key written or not (most of the key space is
				// not written yet early on).
				j := rng.IntN(2 * tc.keys)
				if got, want := readAllOf(t, vs, ms, ls, j), readAllOf(t, mv, mm, ml, j); !cmp.Equal(got, want) {
					t.Fatalf("after %d writes, key %d (filter %d bytes; -model +pebble):\n%s", n+1, j, s.FilterBytes(), cmp.Diff(want, got))
				}
			}
			if s.FilterSkips() == 0 {
				t.Error("the key filter answered no read")
			}
			if tc.turnOff {
				if s.FilterBytes() != 0 || maxBytes > 16<<10 {
					t.Errorf("filter of %d bytes at the end, %d at most, with KeyFilterSize 16 KiB: want it off, never above the bound", s.FilterBytes(), maxBytes)
				}
			} else if maxBytes <= startBytes {
				t.Errorf("filter never grew from %d bytes with %d keys", startBytes, tc.keys)
			}

			// Restore into a new store: its filter holds the loaded keys.
			snap, err := s.Snapshot()
			must(t, err)
			defer snap.Release()
			r := mustNew(t, pebble.Options{InMemory: true})
			must(t, r.Restore(snap))
			rv, rm, rl := valueState(t, r), register[runtime.SortedMapState](t, r, mapSpec), register[runtime.ListState](t, r, listSpec)
			for j := range 2 * tc.keys {
				if got, want := readAllOf(t, rv, rm, rl, j), readAllOf(t, mv, mm, ml, j); !cmp.Equal(got, want) {
					t.Fatalf("restored, key %d (-model +pebble):\n%s", j, cmp.Diff(want, got))
				}
			}
			if r.FilterSkips() == 0 {
				t.Error("the restored store's key filter answered no read")
			}
		})
	}
}

// TestKeyFilterSizeBad: a KeyFilterSize below the smallest filter is
// refused, naming the option.
func TestKeyFilterSizeBad(t *testing.T) {
	_, err := pebble.New(pebble.Options{InMemory: true, KeyFilterSize: 100})
	if err == nil || !strings.Contains(err.Error(), "KeyFilterSize 100") {
		t.Fatalf("New with KeyFilterSize 100: %v, want an error naming it", err)
	}
	s := mustNew(t, pebble.Options{InMemory: true, KeyFilterSize: -1})
	if s.FilterBytes() != 0 {
		t.Fatalf("KeyFilterSize -1: a filter of %d bytes", s.FilterBytes())
	}
}

// TestKeyFilterFill: a fill of blind Puts, whose batches are committed
// when full — each commit that finds the filter outgrown rebuilds it,
// while the Put that made the commit waits to go into the next batch —
// leaves every key readable.
func TestKeyFilterFill(t *testing.T) {
	s := mustNew(t, pebble.Options{InMemory: true, BatchSize: 64 << 10})
	vs := valueState(t, s)
	const n = 50_000
	for i := range n {
		must(t, vs.Put(key(i), []byte("v")))
	}
	s.WaitFilter()
	if s.FilterBytes() <= 8<<10 {
		t.Fatalf("the filter was not rebuilt: %d bytes for %d keys", s.FilterBytes(), n)
	}
	for i := range n {
		if _, ok := get(t, vs, i); !ok {
			t.Fatalf("value %d of %d missing after the fill", i, n)
		}
	}
	if _, ok := get(t, vs, n); ok {
		t.Fatalf("value %d found, never written", n)
	}
}

// TestKeyFilterSizedByRestore: a Restore of many keys into a new store
// leaves a filter sized for them, built once from a count of the keys.
func TestKeyFilterSizedByRestore(t *testing.T) {
	src := mustNew(t, pebble.Options{InMemory: true})
	vs := valueState(t, src)
	const n = 30_000
	for i := range n {
		must(t, vs.Put(key(i), []byte("v")))
	}
	snap, err := src.Snapshot()
	must(t, err)
	defer snap.Release()
	r := mustNew(t, pebble.Options{InMemory: true})
	must(t, r.Restore(snap))
	if got := r.FilterBytes() * 8 / 10; got < n {
		t.Fatalf("after a Restore of %d keys: a filter of %d bytes, for %d keys", n, r.FilterBytes(), got)
	}
	rv := valueState(t, r)
	for i := range n {
		if _, ok := get(t, rv, i); !ok {
			t.Fatalf("value %d of %d missing after the restore", i, n)
		}
	}
}

// TestKeyFilterRebuildInBackground: a rebuild scans a snapshot on its own
// goroutine while the operator goes on writing; the keys written
// meanwhile, which the snapshot lacks, reach the rebuilt filter through
// its log, so that every key written stays readable, and absent keys are
// still answered by the filter. A Close while a rebuild runs cancels it
// and leaves no goroutine behind.
func TestKeyFilterRebuildInBackground(t *testing.T) {
	started, gates := holdFilterBuilds(t)
	gate := make(chan struct{})
	gates <- gate
	s := mustNew(t, pebble.Options{InMemory: true, BatchSize: 16 << 10})
	vs := valueState(t, s)
	n := 0
	for ; !s.FilterBuilding(); n++ {
		if n == 100_000 {
			t.Fatal("no rebuild of the key filter after 100,000 new keys")
		}
		must(t, vs.Put(key(n), []byte("v")))
	}
	<-started
	// The rebuild holds before its scans: these keys are written after its
	// snapshot, and committed in many batches.
	const later = 30_000
	before := s.FilterBytes()
	for i := n; i < n+later; i++ {
		must(t, vs.Put(key(i), []byte("w")))
	}
	if !s.FilterBuilding() || s.FilterBytes() != before {
		t.Fatalf("the filter changed (%d -> %d bytes) while its rebuild was held", before, s.FilterBytes())
	}
	close(gate)
	s.WaitFilter()
	if s.FilterBytes() <= before {
		t.Fatalf("rebuilt filter of %d bytes, not larger than the %d it replaced, for %d keys", s.FilterBytes(), before, n+later)
	}
	skips := s.FilterSkips()
	for i := range n + later {
		if _, ok := get(t, vs, i); !ok {
			t.Fatalf("key %d of %d (%d written after the rebuild's snapshot) missing after the rebuild", i, n+later, later)
		}
	}
	for i := n + later; i < n+later+1000; i++ {
		if _, ok := get(t, vs, i); ok {
			t.Fatalf("key %d found, never written", i)
		}
	}
	if s.FilterSkips()-skips < 900 {
		t.Errorf("the rebuilt filter answered %d of 1000 reads of absent keys", s.FilterSkips()-skips)
	}

	// A Close while a rebuild runs (released, so that it scans while
	// Close cancels it) leaves no goroutine of the store behind.
	must(t, s.Close())
	others := goleak.IgnoreCurrent()
	gate = make(chan struct{})
	gates <- gate
	c := mustNew(t, pebble.Options{InMemory: true, BatchSize: 16 << 10})
	cv := valueState(t, c)
	for i := 0; !c.FilterBuilding(); i++ {
		must(t, cv.Put(key(i), []byte("v")))
	}
	<-started
	close(gate)
	must(t, c.Close())
	if c.FilterBuilding() {
		t.Fatal("Close left the rebuild of the key filter running")
	}
	goleak.VerifyNone(t, others)
}

// TestKeyFilterReuseExisting: a store opened on a directory a closed store
// left starts without a key filter and builds one from its database in the
// background; the keys written before the build is taken (held here until
// 5,000 were) reach it through its log. Every key, old and new, stays
// readable, and the built filter answers reads of absent keys.
func TestKeyFilterReuseExisting(t *testing.T) {
	started, gates := holdFilterBuilds(t)
	dir := t.TempDir() + "/d"
	s, err := pebble.New(pebble.Options{Dir: dir})
	must(t, err)
	vs := valueState(t, s)
	const old, later = 20_000, 5_000
	for i := range old {
		must(t, vs.Put(key(i), []byte("old")))
	}
	must(t, s.Close())

	gate := make(chan struct{})
	gates <- gate
	r := mustNew(t, pebble.Options{Dir: dir, Existing: pebble.ReuseExisting})
	<-started
	if r.FilterBytes() != 0 || !r.FilterBuilding() {
		t.Fatalf("a reopened store: filter of %d bytes, building %v; want none yet, building", r.FilterBytes(), r.FilterBuilding())
	}
	rv := valueState(t, r)
	for i := old; i < old+later; i++ {
		must(t, rv.Put(key(i), []byte("new")))
	}
	if _, ok := get(t, rv, old+later); ok {
		t.Fatal("a key never written found before the filter was built")
	}
	close(gate)
	r.WaitFilter()
	if r.FilterBytes()*8/filterBitsPerKeyForTest < old {
		t.Fatalf("the built filter has %d bytes, too few for the %d keys of the database", r.FilterBytes(), old)
	}
	skips := r.FilterSkips()
	for i := range old + later {
		want := "old"
		if i >= old {
			want = "new"
		}
		if v, ok := get(t, rv, i); !ok || v != want {
			t.Fatalf("key %d = (%q, %v) after the filter was built, want %q", i, v, ok, want)
		}
	}
	for i := old + later; i < old+later+1000; i++ {
		if _, ok := get(t, rv, i); ok {
			t.Fatalf("key %d found, never written", i)
		}
	}
	if r.FilterSkips()-skips < 900 {
		t.Errorf("the built filter answered %d of 1000 reads of absent keys", r.FilterSkips()-skips)
	}
}

// filterBitsPerKeyForTest is the filter's bits per key (filterBitsPerKey).
const filterBitsPerKeyForTest = 10

// holdFilterBuilds makes the rebuilds of key filters of the test's stores
// hold: a rebuild that finds a gate in gates sends on started, then waits
// until the gate is closed before it scans; the others run through.
func holdFilterBuilds(t *testing.T) (started chan struct{}, gates chan chan struct{}) {
	started, gates = make(chan struct{}, 1), make(chan chan struct{}, 1)
	pebble.SetFilterBuildStarted(t, func() {
		select {
		case gate := <-gates:
			started <- struct{}{}
			<-gate
		default:
		}
	})
	return started, gates
}

// filterLog records what a store logs of its key filter.
type filterLog struct {
	mu            sync.Mutex
	infos, errors []string
}

func (l *filterLog) Infof(format string, args ...any) {
	if msg := fmt.Sprintf(format, args...); strings.Contains(msg, "key filter") {
		l.mu.Lock()
		l.infos = append(l.infos, msg)
		l.mu.Unlock()
	}
}

func (l *filterLog) Errorf(format string, args ...any) {
	if msg := fmt.Sprintf(format, args...); strings.Contains(msg, "key filter") {
		l.mu.Lock()
		l.errors = append(l.errors, msg)
		l.mu.Unlock()
	}
}

func (l *filterLog) Fatalf(format string, args ...any) { l.Errorf(format, args...) }

// TestKeyFilterOffIsLogged: a rebuild whose scan fails, and one whose
// filter would outgrow KeyFilterSize, turn the filter off and say so to
// Options.Logger — an error naming the cause, an informational message
// naming the bound — and every key stays readable.
func TestKeyFilterOffIsLogged(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    pebble.Options
		fail    bool
		want    string
		isError bool
	}{
		{"scan fails", pebble.Options{InMemory: true}, true, "injected scan failure", true},
		{"too large", pebble.Options{InMemory: true, KeyFilterSize: 8 << 10}, false, "KeyFilterSize 8192", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.fail {
				pebble.SetNewKeyIter(t, func(pebbledb.Reader) (*pebbledb.Iterator, error) {
					return nil, errors.New("injected scan failure")
				})
			}
			rec := &filterLog{}
			tc.opts.Logger = rec
			s := mustNew(t, tc.opts)
			vs := valueState(t, s)
			const n = 30_000
			for i := range n {
				must(t, vs.Put(key(i), []byte("v")))
			}
			s.WaitFilter()
			if s.FilterBytes() != 0 {
				t.Fatalf("filter of %d bytes after its rebuild failed; want it off", s.FilterBytes())
			}
			rec.mu.Lock()
			got := rec.infos
			if tc.isError {
				got = rec.errors
			}
			rec.mu.Unlock()
			if len(got) != 1 || !strings.Contains(got[0], tc.want) || !strings.Contains(got[0], "key filter is off") {
				t.Fatalf("logged %q; want one message that the key filter is off, naming %q", got, tc.want)
			}
			for i := range n + 100 {
				if _, ok := get(t, vs, i); ok != (i < n) {
					t.Fatalf("key %d found %v with the filter off", i, ok)
				}
			}
		})
	}
}
