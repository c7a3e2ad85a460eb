package pebble_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

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
