package pebble_test

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
	"github.com/stategen/stategen/backends/pebble"
	srt "github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

func TestOptionsValidation(t *testing.T) {
	for _, o := range []pebble.Options{
		{StoreConfig: srt.StoreConfig{MaxParallelism: -1}},
		{StoreConfig: srt.StoreConfig{MaxParallelism: 8, KeyGroups: srt.KeyGroupRange{Start: 4, End: 9}}},
		{BlockCacheSize: -1},
		{MemTableSize: 1024},
		{MemTableSize: 1 << 32},
		{MemTableSize: 22 << 20},                         // three would take the whole default cache
		{BlockCacheSize: 1 << 20, MemTableSize: 1 << 20}, // likewise
		{BatchSize: -1},
		{BatchSize: 2<<20 + 1}, // more than a quarter of the default memtable
		{Sync: 9},
		{Existing: 9},
	} {
		if _, err := pebble.New(o); err == nil {
			t.Errorf("New(%+v) succeeded", o)
		}
		if _, err := o.PebbleOptions(); err == nil {
			t.Errorf("PebbleOptions of %+v succeeded", o)
		}
	}
	po, err := pebble.Options{Sync: pebble.SyncWAL}.PebbleOptions()
	if err != nil {
		t.Fatal(err)
	}
	if po.CacheSize != 64<<20 || po.MemTableSize != 8<<20 || po.DisableWAL || po.Merger == nil {
		t.Fatalf("PebbleOptions = cache %d, memtable %d, WAL disabled %v, merger %v: not the documented defaults",
			po.CacheSize, po.MemTableSize, po.DisableWAL, po.Merger)
	}
	if po, _ := (pebble.Options{}).PebbleOptions(); !po.DisableWAL {
		t.Fatal("the default SyncNone does not disable the write-ahead log")
	}
}

func TestTempDirRemovedOnClose(t *testing.T) {
	s, err := pebble.New(pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := s.Dir()
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("working directory %q: %v", dir, err)
	}
	put(t, valueState(t, s), 1, "x")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the directory New made is still there after Close: %v", err)
	}
}

// TestReuseExisting: a cleanly closed directory opens again with its
// states and entries; a smaller key-group range drops the other key
// groups.
func TestReuseExisting(t *testing.T) {
	fs := vfs.NewMem()
	s := mustNew(t, pebble.Options{FS: fs, Dir: "d"})
	vs := valueState(t, s)
	lst, err := s.Register(srt.StateSpec{Name: "l", Kind: srt.KindList, SubKeyed: true})
	if err != nil {
		t.Fatal(err)
	}
	ls := lst.(srt.ListState)
	ttlSpec := srt.StateSpec{Name: "t", Kind: srt.KindMap, TTL: 90 * time.Minute, Fingerprint: "fp", Schema: ""}
	if _, err := s.Register(ttlSpec); err != nil {
		t.Fatal(err)
	}
	ns := []byte("ns\x00\x01")
	for i := range 200 {
		put(t, vs, i, fmt.Sprint("v", i))
		k := key(i).WithNamespace(ns)
		if err := ls.AddAll(k, [][]byte{[]byte("a"), []byte("b")}); err != nil {
			t.Fatal(err)
		}
	}
	want := dump(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	r := mustNew(t, pebble.Options{FS: fs, Dir: "d", Existing: pebble.ReuseExisting})
	if got := r.States(); len(got) != 3 || !got[1].Equal(ttlSpec) || !got[2].Equal(valueSpec) {
		t.Fatalf("reused store has states %v, want its TTL state with the TTL", got)
	}
	if _, err := r.Register(srt.StateSpec{Name: "t", Kind: srt.KindMap, TTL: time.Hour, Fingerprint: "fp"}); !errors.Is(err, srt.ErrStateMismatch) {
		t.Fatalf("Register of a reused state with another TTL: %v", err)
	}
	if d := diffContents(want, dump(t, r)); d != "" {
		t.Fatalf("reused store differs (-before +after):\n%s", d)
	}
	if _, err := r.Register(srt.StateSpec{Name: "v", Kind: srt.KindValue, Fingerprint: "other"}); !errors.Is(err, srt.ErrStateMismatch) {
		t.Fatalf("Register of a reused state with another fingerprint: %v", err)
	}
	// New states get new ids: they do not see the old ones' entries.
	nst, err := r.Register(srt.StateSpec{Name: "w", Kind: srt.KindValue})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := nst.(srt.ValueState).Get(key(1)); ok {
		t.Fatal("a state registered after reuse sees another state's entry")
	}
	if err := nst.(srt.ValueState).Put(key(1), []byte("w1")); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	// Rescaled: the store now owns a quarter of the key groups; the
	// others are deleted, for good.
	part := srt.KeyGroupRange{Start: 32, End: 64}
	q := mustNew(t, pebble.Options{FS: fs, Dir: "d", Existing: pebble.ReuseExisting, StoreConfig: srt.StoreConfig{KeyGroups: part}})
	sub := want.Restrict(part)
	sameStates(t, "reused store with key groups [32, 64)", sub, dump(t, q), "l", "v")
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	f := mustNew(t, pebble.Options{FS: fs, Dir: "d", Existing: pebble.ReuseExisting})
	all := dump(t, f)
	sub.KeyGroups = all.KeyGroups
	sameStates(t, "store clipped to [32, 64), reopened with every key group", sub, all, "l", "v")
}

// sameStates fails if the named states of want and got differ.
func sameStates(t *testing.T, what string, want, got storetest.Contents, names ...string) {
	t.Helper()
	for _, n := range names {
		w, g := want.States[n], got.States[n]
		if len(w.Groups) == 0 {
			t.Fatalf("%s: the expected content of state %q is empty: a vacuous comparison", what, n)
		}
		if d := cmp.Diff(w, g); d != "" {
			t.Fatalf("%s: state %q differs (-want +got):\n%s", what, n, d)
		}
	}
}

// diffContents is cmp.Diff of two Contents.
func diffContents(want, got storetest.Contents) string { return cmp.Diff(want, got) }

func dump(t *testing.T, s srt.Store) storetest.Contents {
	t.Helper()
	c, err := storetest.DumpStore(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCloseWithLiveSnapshots: Close closes the store at once; a snapshot
// taken before stays readable, also from another goroutine, and its
// Release closes the database and removes the directory.
func TestCloseWithLiveSnapshots(t *testing.T) {
	s, err := pebble.New(pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	vs := valueState(t, s)
	for i := range 1000 {
		put(t, vs, i, fmt.Sprint(i))
	}
	want := dump(t, s)
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := vs.Get(key(1)); !errors.Is(err, srt.ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if _, err := os.Stat(s.Dir()); err != nil {
		t.Fatalf("the directory is gone while a snapshot is live: %v", err)
	}
	var got storetest.Contents
	var derr error
	var wg sync.WaitGroup
	wg.Go(func() { got, derr = storetest.Dump(snap) })
	wg.Wait()
	if derr != nil {
		t.Fatal(derr)
	}
	if d := diffContents(want, got); d != "" {
		t.Fatalf("snapshot read after Close differs:\n%s", d)
	}
	if n := s.LiveSnapshots(); n != 1 {
		t.Fatalf("LiveSnapshots = %d, want 1", n)
	}
	if err := snap.Release(); err != nil {
		t.Fatalf("Release of the last snapshot (which closes the database): %v", err)
	}
	if n := s.LiveSnapshots(); n != 0 {
		t.Fatalf("LiveSnapshots = %d after Release, want 0", n)
	}
	if _, err := os.Stat(s.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the directory is still there after the last Release: %v", err)
	}
}

// TestReleaseDuringScan: a Release from another goroutine stops a running
// Scan with ErrReleased; the Pebble snapshot is closed when the Scan ends,
// and the database closes cleanly.
func TestReleaseDuringScan(t *testing.T) {
	s, err := pebble.New(pebble.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	vs := valueState(t, s)
	var kg int
	for i := range 20000 {
		put(t, vs, i, "x")
		k := key(i)
		kg = k.Group()
	}
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	release := make(chan error)
	n := 0
	err = snap.Scan(valueSpec.Name, kg, func(srt.Entry) error {
		if n++; n == 1 {
			close(started)
			go func() { release <- snap.Release() }()
			if err := <-release; err != nil {
				return err
			}
		}
		return nil
	})
	<-started
	if !errors.Is(err, srt.ErrReleased) {
		t.Fatalf("Scan during which the snapshot was released returned %v after %d entries, want ErrReleased", err, n)
	}
	// The 20,000 Puts may have started a rebuild of the key filter, whose
	// goroutine holds a Pebble snapshot of its own until it ends.
	s.WaitFilter()
	if m := s.Metrics(); m.Snapshots.Count != 0 {
		t.Fatalf("Pebble has %d open snapshots after the Scan ended", m.Snapshots.Count)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCloseAfterHeavyUse: after every kind of operation, nested reads in
// callbacks, early stops, snapshots, scans and restores, Close returns no
// error: Pebble reports a leaked iterator or snapshot at Close.
func TestCloseAfterHeavyUse(t *testing.T) {
	var src, dst *pebble.Store
	for _, p := range []**pebble.Store{&src, &dst} {
		s, err := pebble.New(pebble.Options{InMemory: true, MemTableSize: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		*p = s
	}
	vs := valueState(t, src)
	mst, err := src.Register(srt.StateSpec{Name: "m", Kind: srt.KindSortedMap, SubKeyed: true})
	if err != nil {
		t.Fatal(err)
	}
	ms := mst.(srt.SortedMapState)
	lst, err := src.Register(srt.StateSpec{Name: "l", Kind: srt.KindList})
	if err != nil {
		t.Fatal(err)
	}
	ls := lst.(srt.ListState)
	for i := range 5000 {
		k := key(i % 500)
		put(t, vs, i, "value")
		if err := ls.Add(k, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		k = k.WithNamespace([]byte{byte(i % 3)})
		if err := ms.Put(k, []byte{byte(i >> 8), byte(i)}, []byte("m")); err != nil {
			t.Fatal(err)
		}
		switch i % 7 {
		case 0:
			// Nested reads and iterations inside callbacks, stopped early.
			if err := ms.Range(k, nil, nil, true, func(_, _ []byte) bool {
				_, _, _ = vs.Get(key(i))
				_ = ls.Get(key(i%500), func([]byte) bool { return false })
				_ = ms.Namespaces(k, func([]byte) bool { return false })
				return false
			}); err != nil {
				t.Fatal(err)
			}
		case 1:
			if err := ms.DeleteAll(k); err != nil {
				t.Fatal(err)
			}
		case 2:
			snap, err := src.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if err := snap.Scan("m", k.Group(), func(srt.Entry) error { return errors.New("stop") }); err == nil {
				t.Fatal("Scan did not return its callback's error")
			}
			if err := snap.Release(); err != nil {
				t.Fatal(err)
			}
		}
	}
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if err := snap.Release(); err != nil {
		t.Fatal(err)
	}
	if d := diffContents(dump(t, src), dump(t, dst)); d != "" {
		t.Fatalf("restored store differs:\n%s", d)
	}
	for _, s := range []*pebble.Store{src, dst} {
		s.WaitFilter() // a rebuild of the key filter holds a Pebble snapshot while it runs
		m := s.Metrics()
		if m.Snapshots.Count != 0 || s.LiveSnapshots() != 0 {
			t.Fatalf("%d Pebble snapshots and %d live snapshots open after all were released", m.Snapshots.Count, s.LiveSnapshots())
		}
		if err := s.Close(); err != nil {
			t.Fatalf("Close after heavy use: %v", err)
		}
		if s.Metrics() != nil {
			t.Fatal("Metrics after Close is not nil")
		}
	}
}

func TestWriteDuringIterationRefused(t *testing.T) {
	s := mustNew(t, pebble.Options{InMemory: true})
	vs := valueState(t, s)
	mst, err := s.Register(srt.StateSpec{Name: "m", Kind: srt.KindMap})
	if err != nil {
		t.Fatal(err)
	}
	ms := mst.(srt.MapState)
	k := key(1)
	if err := ms.Put(k, []byte("u"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	calls := 0
	if err := ms.Iterate(k, func(_, _ []byte) bool {
		calls++
		for what, err := range map[string]error{
			"Put":      vs.Put(key(2), []byte("x")),
			"Map Put":  ms.Put(k, []byte("w"), []byte("x")),
			"Clear":    ms.Clear(k),
			"Restore":  s.Restore(nil),
			"Close":    s.Close(),
			"Register": func() error { _, err := s.Register(srt.StateSpec{Name: "new", Kind: srt.KindValue}); return err }(),
		} {
			if !errors.Is(err, pebble.ErrWriteDuringIteration) {
				t.Errorf("%s from an iteration callback: %v, want ErrWriteDuringIteration", what, err)
			}
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Fatalf("Iterate called its callback %d times", calls)
	}
	if _, ok := get(t, vs, 2); ok {
		t.Fatal("a write refused inside a callback happened")
	}
	if err := vs.Put(key(2), []byte("x")); err != nil {
		t.Fatalf("Put after the iteration: %v", err)
	}
}

func TestLeakedSnapshotReleased(t *testing.T) {
	leaked := make(chan uint64, 1)
	s := mustNew(t, pebble.Options{InMemory: true, OnLeakedSnapshot: func(seq uint64) { leaked <- seq }})
	put(t, valueState(t, s), 1, "x")
	func() {
		if _, err := s.Snapshot(); err != nil {
			t.Fatal(err)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		select {
		case seq := <-leaked:
			if seq != 1 {
				t.Fatalf("OnLeakedSnapshot(%d), want 1", seq)
			}
			if n := s.LiveSnapshots(); n != 0 {
				t.Fatalf("LiveSnapshots = %d after the leak was reported", n)
			}
			if m := s.Metrics(); m.Snapshots.Count != 0 {
				t.Fatalf("Pebble still has %d snapshots open", m.Snapshots.Count)
			}
			return
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("a leaked snapshot was not reported")
		}
	}
}
