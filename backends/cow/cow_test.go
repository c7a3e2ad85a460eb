package cow_test

import (
	"bytes"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stategen/stategen/backends/cow"
	srt "github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

func newStore(t *testing.T, opts cow.Options) *cow.Store {
	t.Helper()
	s, err := cow.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func register(t *testing.T, s *cow.Store, spec srt.StateSpec) srt.State {
	t.Helper()
	st, err := s.Register(spec)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func ok(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func key(s *cow.Store, k string) srt.Key {
	return srt.MakeKey([]byte(k), nil, s.Config().MaxParallelism)
}

func dump(t *testing.T, v srt.View) storetest.Contents {
	t.Helper()
	c, err := storetest.Dump(v)
	ok(t, err)
	return c
}

// TestLiveSnapshotsCountsUnreleased pins that a snapshot that is never
// released is visible: LiveSnapshots counts it until Release.
func TestLiveSnapshotsCountsUnreleased(t *testing.T) {
	s := newStore(t, cow.Options{})
	a, err := s.Snapshot()
	ok(t, err)
	b, err := s.Snapshot()
	ok(t, err)
	if n := s.LiveSnapshots(); n != 2 {
		t.Fatalf("LiveSnapshots() = %d with two snapshots live, want 2", n)
	}
	ok(t, a.Release())
	if n := s.LiveSnapshots(); n != 1 {
		t.Fatalf("LiveSnapshots() = %d after one Release, want 1", n)
	}
	ok(t, b.Release())
	if n := s.LiveSnapshots(); n != 0 {
		t.Fatalf("LiveSnapshots() = %d after both were released, want 0", n)
	}
}

// TestLeakedSnapshotIsReportedAndReleased pins that a snapshot dropped
// without Release is reported through OnLeakedSnapshot once it is
// collected, and stops counting as live (so copy-on-write stops).
func TestLeakedSnapshotIsReportedAndReleased(t *testing.T) {
	var leaked atomic.Uint64
	s := newStore(t, cow.Options{OnLeakedSnapshot: func(seq uint64) { leaked.Store(seq) }})
	v := register(t, s, srt.StateSpec{Name: "v", Kind: srt.KindValue}).(srt.ValueState)
	ok(t, v.Put(key(s, "a"), []byte("1")))
	func() {
		kept, err := s.Snapshot()
		ok(t, err)
		ok(t, kept.Release())
		_, err = s.Snapshot() // seq 2, leaked
		ok(t, err)
	}()
	if n := s.LiveSnapshots(); n != 1 {
		t.Fatalf("LiveSnapshots() = %d with a leaked snapshot, want 1", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for leaked.Load() == 0 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if got := leaked.Load(); got != 2 {
		t.Fatalf("OnLeakedSnapshot reported snapshot %d, want 2", got)
	}
	if n := s.LiveSnapshots(); n != 0 {
		t.Fatalf("LiveSnapshots() = %d after the leaked snapshot was collected, want 0", n)
	}
}

// TestGetResultCannotCorruptSnapshot pins the aliasing rule: values
// returned by Get alias the store and are read-only, and neither a Put
// after a Get nor any later write to the same entry changes what a live
// snapshot holds.
func TestGetResultCannotCorruptSnapshot(t *testing.T) {
	s := newStore(t, cow.Options{})
	v := register(t, s, srt.StateSpec{Name: "v", Kind: srt.KindValue}).(srt.ValueState)
	m := register(t, s, srt.StateSpec{Name: "m", Kind: srt.KindSortedMap}).(srt.MapState)
	l := register(t, s, srt.StateSpec{Name: "l", Kind: srt.KindList}).(srt.ListState)
	k := key(s, "k")
	ok(t, v.Put(k, []byte("original")))
	ok(t, m.Put(k, []byte("u"), []byte("original")))
	ok(t, l.Add(k, []byte("original")))
	snap, err := s.Snapshot()
	ok(t, err)
	defer snap.Release()
	want := dump(t, snap)

	got, found, err := v.Get(k)
	ok(t, err)
	if !found || string(got) != "original" {
		t.Fatalf("Get = %q, %v", got, found)
	}
	// The caller's copy, reused as the next value: same length, then
	// another length, then many times.
	mine := bytes.Clone(got)
	copy(mine, "modified")
	ok(t, v.Put(k, mine))
	ok(t, v.Put(k, []byte("a different length")))
	ok(t, m.Put(k, []byte("u"), []byte("modified")))
	ok(t, l.Replace(k, [][]byte{[]byte("modified")}))
	for range 100 {
		ok(t, v.Put(k, []byte("modified")))
		ok(t, l.Add(k, []byte("more")))
	}
	if d := cmp.Diff(want, dump(t, snap)); d != "" {
		t.Fatalf("writes after the snapshot changed it (-want +got):\n%s", d)
	}
	if got, _, _ := v.Get(k); string(got) != "modified" {
		t.Fatalf("Get after the writes = %q, want %q", got, "modified")
	}
}

// TestBadInputGetsErrors pins the errors of misuse: never a panic.
func TestBadInputGetsErrors(t *testing.T) {
	for _, opts := range []cow.Options{
		{MaxSlabSize: 100},
		{MaxSlabSize: 1 << 30},
		{CompactionMinGarbage: -1},
		{RestoreConcurrency: -1},
		{RestoreConcurrency: cow.MaxRestoreConcurrency + 1},
		{StoreConfig: srt.StoreConfig{MaxParallelism: 1 << 20}},
		{StoreConfig: srt.StoreConfig{MaxParallelism: 8, KeyGroups: srt.KeyGroupRange{Start: 4, End: 9}}},
	} {
		if _, err := cow.New(opts); err == nil {
			t.Errorf("New(%+v) succeeded", opts)
		}
	}

	s := newStore(t, cow.Options{StoreConfig: srt.StoreConfig{MaxParallelism: 8, KeyGroups: srt.KeyGroupRange{Start: 0, End: 4}}})
	v := register(t, s, srt.StateSpec{Name: "v", Kind: srt.KindValue}).(srt.ValueState)
	sub := register(t, s, srt.StateSpec{Name: "sub", Kind: srt.KindList, SubKeyed: true}).(srt.ListState)

	// A key group the store does not own.
	var foreign srt.Key
	for i := 0; ; i++ {
		foreign = srt.MakeKey([]byte{byte(i)}, nil, 8)
		if foreign.Group() >= 4 {
			break
		}
	}
	if err := v.Put(foreign, []byte("x")); !errors.Is(err, srt.ErrKeyGroupNotOwned) {
		t.Errorf("Put to a key group not owned: %v", err)
	}
	k := srt.MakeKey([]byte("k"), nil, 8)
	for k.Group() >= 4 {
		k = srt.MakeKey(append(k.Bytes(), 'k'), nil, 8)
	}
	// A namespace on a keyed state.
	withNS := k
	withNS = withNS.WithNamespace([]byte("ns"))
	if err := v.Put(withNS, []byte("x")); err == nil {
		t.Error("Put with a namespace into a keyed state succeeded")
	}
	// A write from inside an iteration callback.
	ok(t, sub.Add(withNS, []byte("a")))
	var inner error
	ok(t, sub.Get(withNS, func([]byte) bool { inner = sub.Add(withNS, []byte("b")); return true }))
	if inner == nil {
		t.Error("Add from inside a Get callback succeeded")
	}
	// Restore into a key group that holds entries of a restored state.
	ok(t, v.Put(k, []byte("x")))
	snap, err := s.Snapshot()
	ok(t, err)
	if err := s.Restore(snap); !errors.Is(err, srt.ErrRestoreConflict) {
		t.Errorf("Restore into a non-empty key group: %v", err)
	}
	// Double Release, and use after Release.
	ok(t, snap.Release())
	if err := snap.Release(); !errors.Is(err, srt.ErrReleased) {
		t.Errorf("second Release: %v", err)
	}
	if err := snap.Scan("v", k.Group(), func(srt.Entry) error { return nil }); !errors.Is(err, srt.ErrReleased) {
		t.Errorf("Scan after Release: %v", err)
	}
	// After Close.
	live, err := s.Snapshot()
	ok(t, err)
	ok(t, s.Close())
	ok(t, s.Close())
	if err := v.Put(k, []byte("y")); !errors.Is(err, srt.ErrClosed) {
		t.Errorf("Put after Close: %v", err)
	}
	if _, _, err := v.Get(k); !errors.Is(err, srt.ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	if _, err := s.Snapshot(); !errors.Is(err, srt.ErrClosed) {
		t.Errorf("Snapshot after Close: %v", err)
	}
	if _, err := s.Register(srt.StateSpec{Name: "new", Kind: srt.KindValue}); !errors.Is(err, srt.ErrClosed) {
		t.Errorf("Register after Close: %v", err)
	}
	// A snapshot taken before Close stays readable until released.
	c := dump(t, live)
	if len(c.States["v"].Groups[k.Group()]) != 1 {
		t.Errorf("snapshot taken before Close lost its entry: %+v", c.States["v"])
	}
	ok(t, live.Release())
}

// TestRestoreLoadsEveryKind restores a snapshot of a store holding every
// kind, keyed and sub-keyed, into a fresh store and into two stores that
// split its key groups, and compares contents.
func TestRestoreLoadsEveryKind(t *testing.T) {
	src := newStore(t, cow.Options{StoreConfig: srt.StoreConfig{MaxParallelism: 16}})
	for _, sub := range []bool{false, true} {
		suffix := map[bool]string{false: "keyed", true: "sub"}[sub]
		v := register(t, src, srt.StateSpec{Name: "v-" + suffix, Kind: srt.KindValue, SubKeyed: sub}).(srt.ValueState)
		l := register(t, src, srt.StateSpec{Name: "l-" + suffix, Kind: srt.KindList, SubKeyed: sub}).(srt.ListState)
		m := register(t, src, srt.StateSpec{Name: "m-" + suffix, Kind: srt.KindSortedMap, SubKeyed: sub}).(srt.MapState)
		for i := range 300 {
			var ns []byte
			if sub {
				ns = []byte{byte(i % 3)}
			}
			k := srt.MakeKey([]byte{byte(i), byte(i >> 8)}, ns, 16)
			ok(t, v.Put(k, []byte{byte(i)}))
			ok(t, l.AddAll(k, [][]byte{{1}, {2}, bytes.Repeat([]byte{3}, i)}))
			ok(t, m.Put(k, []byte{byte(i % 7)}, []byte{byte(i)}))
		}
	}
	snap, err := src.Snapshot()
	ok(t, err)
	defer snap.Release()
	want := dump(t, snap)

	whole := newStore(t, cow.Options{StoreConfig: srt.StoreConfig{MaxParallelism: 16}})
	ok(t, whole.Restore(snap))
	ws, err := whole.Snapshot()
	ok(t, err)
	if d := cmp.Diff(want, dump(t, ws)); d != "" {
		t.Fatalf("restored store differs (-want +got):\n%s", d)
	}
	ok(t, ws.Release())

	for _, r := range []srt.KeyGroupRange{{Start: 0, End: 5}, {Start: 5, End: 16}} {
		part := newStore(t, cow.Options{StoreConfig: srt.StoreConfig{MaxParallelism: 16, KeyGroups: r}})
		ok(t, part.Restore(snap))
		ps, err := part.Snapshot()
		ok(t, err)
		if d := cmp.Diff(want.Restrict(r), dump(t, ps)); d != "" {
			t.Fatalf("store owning %v differs (-want +got):\n%s", r, d)
		}
		ok(t, ps.Release())
	}
}
