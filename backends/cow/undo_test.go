package cow

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

// readResult is what a reader goroutine found in a snapshot: two Dumps of
// it, the second after the first, while the store kept changing.
type readResult struct {
	first, second storetest.Contents
	err           error
}

// TestSnapshotsReadWhileWritingEqualModel applies random operations to a
// cow store and the reference model and, at random moments, takes a
// snapshot of both and starts a goroutine that reads the cow snapshot
// twice while the operations go on, so that writes race the reads of the
// pages they change (undo records, and the page copy when a reader is on
// the page). Every read must equal the model at the time the
// snapshot was taken. Run it with -race; STATEGEN_LONG=1 runs longer.
func TestSnapshotsReadWhileWritingEqualModel(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		keys int
	}{
		{Options{StoreConfig: runtime.StoreConfig{MaxParallelism: 2}}, 400},
		{Options{StoreConfig: runtime.StoreConfig{MaxParallelism: 1}}, 3000},
		{Options{StoreConfig: runtime.StoreConfig{MaxParallelism: 4}, MaxSlabSize: 1 << 10, CompactionMinGarbage: 1}, 400},
	} {
		t.Run(fmt.Sprintf("maxP=%d,keys=%d,compact=%d", tc.opts.MaxParallelism, tc.keys, tc.opts.CompactionMinGarbage), func(t *testing.T) {
			seed := rand.Uint64()
			t.Logf("seed %d", seed)
			r := rand.New(rand.NewPCG(seed, 9))
			p := newPair(t, tc.opts)
			type reading struct {
				snap runtime.Snapshot
				want storetest.Contents
				done chan readResult
			}
			var live []reading
			finish := func(rd reading, what string) {
				t.Helper()
				res := <-rd.done
				p.check("Dump of a snapshot being written", res.err)
				if d := cmp.Diff(rd.want, res.first); d != "" {
					t.Fatalf("%s: first read of a snapshot differs from the model at its time (-want +got):\n%s", what, d)
				}
				if d := cmp.Diff(rd.want, res.second); d != "" {
					t.Fatalf("%s: second read of a snapshot differs from the model at its time (-want +got):\n%s", what, d)
				}
				p.check("Release", rd.snap.Release())
			}
			ops := 3000
			switch {
			case os.Getenv("STATEGEN_LONG") == "1":
				ops = 100_000
			case testing.Short():
				ops = 1000
			}
			for i := range ops {
				p.op(r, tc.keys)
				switch x := r.IntN(300); {
				case x < 3 && len(live) < 3:
					sp := p.snapshot()
					rd := reading{snap: sp.cow, want: sp.want, done: make(chan readResult, 1)}
					go func() {
						var res readResult
						res.first, res.err = storetest.Dump(rd.snap)
						if res.err == nil {
							res.second, res.err = storetest.Dump(rd.snap)
						}
						rd.done <- res
					}()
					live = append(live, rd)
				case x < 5 && len(live) > 0:
					j := r.IntN(len(live))
					finish(live[j], fmt.Sprintf("op %d", i))
					live = append(live[:j], live[j+1:]...)
				}
			}
			for _, rd := range live {
				finish(rd, "end")
			}
			if n := p.cow.LiveSnapshots(); n != 0 {
				t.Fatalf("LiveSnapshots() = %d after every snapshot was released", n)
			}
		})
	}
}

// valueFixture is one value state of n keys in one key group: a table of
// several record pages.
func valueFixture(t *testing.T, n int) (*Store, valueState, []runtime.Key) {
	t.Helper()
	s, err := New(Options{StoreConfig: runtime.StoreConfig{MaxParallelism: 1}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Register(runtime.StateSpec{Name: "v", Kind: runtime.KindValue})
	if err != nil {
		t.Fatal(err)
	}
	v := st.(valueState)
	keys := make([]runtime.Key, n)
	for i := range keys {
		keys[i] = runtime.MakeKey([]byte(fmt.Sprintf("key%05d", i)), nil, 1)
		if err := v.Put(keys[i], []byte("old-value")); err != nil {
			t.Fatal(err)
		}
	}
	for t := v.tabs[0]; t.main.odir != nil; {
		t.migrate(&t.main, 1<<20)
	}
	return s, v, keys
}

// samePages reports whether the table's main pages are those of dir.
func samePages(t *table, dir []pg) bool {
	if len(t.main.dir) != len(dir) {
		return false
	}
	for i := range dir {
		if &t.main.dir[i].b[0] != &dir[i].b[0] {
			return false
		}
	}
	return true
}

// TestWritesUnderSnapshotCopyRecordsNotPages pins the cost of a write while
// a snapshot is live: the record's old bytes go to the snapshot's undo
// log and the page is written in place — no page is copied — and the
// snapshot still reads the old values, also when it is read again.
func TestWritesUnderSnapshotCopyRecordsNotPages(t *testing.T) {
	s, v, keys := valueFixture(t, 3000)
	tb := v.tabs[0]
	if len(tb.main.dir) < 4 {
		t.Fatalf("the fixture has %d pages, want several", len(tb.main.dir))
	}
	pages := append([]pg(nil), tb.main.dir...)
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	want, err := storetest.Dump(snap)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		for _, k := range keys {
			if err := v.Put(k, []byte(fmt.Sprintf("new-val-%d", round))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !samePages(tb, pages) {
		t.Fatal("writes under a live snapshot copied record pages")
	}
	ps := snap.(*snapshot).states["v"].tabs[0].pages.Load()
	saved := 0
	for i := range ps.pages {
		for _, w := range ps.pages[i].saved {
			for ; w != 0; w &= w - 1 {
				saved++
			}
		}
	}
	if saved != len(keys) {
		t.Fatalf("the undo log holds %d records, want one per key written (%d)", saved, len(keys))
	}
	for range 2 {
		got, err := storetest.Dump(snap)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("the snapshot changed (-want +got):\n%s", d)
		}
	}
	if err := snap.Release(); err != nil {
		t.Fatal(err)
	}
	got, found, err := v.Get(keys[7])
	if err != nil || !found || string(got) != "new-val-2" {
		t.Fatalf("Get after the writes = %q, %v, %v", got, found, err)
	}
}

// TestWriteToPageBeingReadCopiesIt pins the fallback: a write to a page
// that a reader is reading right now (its Scan callback is running) copies
// the page instead of waiting for the reader, and the reader still sees
// the snapshot.
func TestWriteToPageBeingReadCopiesIt(t *testing.T) {
	s, v, keys := valueFixture(t, 3000)
	tb := v.tabs[0]
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	want, err := storetest.Dump(snap)
	if err != nil {
		t.Fatal(err)
	}
	inside, resume := make(chan []byte), make(chan struct{})
	var got []runtime.Entry
	done := make(chan error, 1)
	go func() {
		first := true
		done <- snap.Scan("v", 0, func(e runtime.Entry) error {
			if first {
				first = false
				inside <- append([]byte(nil), e.Key...)
				<-resume
			}
			got = append(got, runtime.Entry{Key: append([]byte(nil), e.Key...), Value: append([]byte(nil), e.Value...)})
			return nil
		})
	}()
	firstKey := <-inside // the reader is on page 0
	var k runtime.Key
	for _, c := range keys {
		if string(c.Bytes()) == string(firstKey) {
			k = c
		}
	}
	page0 := &tb.main.dir[0].b[0]
	if err := v.Put(k, []byte("written-while-read")); err != nil {
		t.Fatal(err)
	}
	if &tb.main.dir[0].b[0] == page0 {
		t.Fatal("a write to the page being read did not copy it")
	}
	for _, c := range keys {
		if err := v.Put(c, []byte("written-while-read")); err != nil {
			t.Fatal(err)
		}
	}
	close(resume)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	recs := want.States["v"].Groups[0]
	if len(got) != len(recs) {
		t.Fatalf("the Scan read %d entries, want %d", len(got), len(recs))
	}
	for _, e := range got {
		if string(e.Value) != "old-value" {
			t.Fatalf("the Scan read %q = %q, a value written after the snapshot", e.Key, e.Value)
		}
	}
	if err := snap.Release(); err != nil {
		t.Fatal(err)
	}
}

// TestReleaseDuringScan pins Release from another goroutine while a Scan
// runs: Release succeeds at once, the Scan stops with ErrReleased, and the
// snapshot counts as live — so writes keep protecting what the Scan reads —
// until the Scan has returned.
func TestReleaseDuringScan(t *testing.T) {
	s, v, keys := valueFixture(t, 3000)
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	inside, resume := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		n := 0
		done <- snap.Scan("v", 0, func(e runtime.Entry) error {
			if n++; n == 1 {
				close(inside)
				<-resume
			}
			if string(e.Value) != "old-value" {
				return fmt.Errorf("the Scan read %q = %q, a value written after the snapshot", e.Key, e.Value)
			}
			return nil
		})
	}()
	<-inside
	if err := snap.Release(); err != nil {
		t.Fatal(err)
	}
	if n := s.LiveSnapshots(); n != 1 {
		t.Fatalf("LiveSnapshots() = %d while a Scan of the released snapshot runs, want 1", n)
	}
	for _, k := range keys {
		if err := v.Put(k, []byte("new-value")); err != nil {
			t.Fatal(err)
		}
	}
	close(resume)
	if err := <-done; !errors.Is(err, runtime.ErrReleased) {
		t.Fatalf("Scan released while running returned %v, want ErrReleased", err)
	}
	if n := s.LiveSnapshots(); n != 0 {
		t.Fatalf("LiveSnapshots() = %d after the Scan returned, want 0", n)
	}
	if err := snap.Release(); !errors.Is(err, runtime.ErrReleased) {
		t.Fatalf("second Release: %v", err)
	}
}

// TestConcurrentReadersOfSeveralSnapshots reads three live snapshots, each
// on its own goroutine, while the operator overwrites every key between
// them: each reader sees its own snapshot's values.
func TestConcurrentReadersOfSeveralSnapshots(t *testing.T) {
	s, v, keys := valueFixture(t, 3000)
	var snaps []runtime.Snapshot
	for gen := range 3 {
		snap, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, snap)
		for _, k := range keys {
			if err := v.Put(k, []byte(fmt.Sprintf("gen-%d", gen))); err != nil {
				t.Fatal(err)
			}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(snaps))
	for i, snap := range snaps {
		want := "old-value"
		if i > 0 {
			want = fmt.Sprintf("gen-%d", i-1)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			err := snap.Scan("v", 0, func(e runtime.Entry) error {
				n++
				if string(e.Value) != want {
					return fmt.Errorf("snapshot %d read %q = %q, want %q", i, e.Key, e.Value, want)
				}
				return nil
			})
			if err == nil && n != len(keys) {
				err = fmt.Errorf("snapshot %d read %d entries, want %d", i, n, len(keys))
			}
			errs <- err
		}()
	}
	for i := range 2 * len(keys) {
		if err := v.Put(keys[i%len(keys)], []byte("while-reading")); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	for _, snap := range snaps {
		if err := snap.Release(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSavedRecordIsWrittenWhileReaderIsOnPage pins that a record already
// in a snapshot's undo log is written in place even while the snapshot's
// reader is on its page — the reader takes it from the log — and that the
// reader still sees the snapshot.
func TestSavedRecordIsWrittenWhileReaderIsOnPage(t *testing.T) {
	s, v, keys := valueFixture(t, 3000)
	tb := v.tabs[0]
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Write a key of page 0 once, so that its record is saved.
	var k runtime.Key
	for _, c := range keys {
		if _, l := find(tb.Slabs, &tb.main, c.Hash(), c.Bytes(), nil); !l.old && l.pos < pageSlots {
			k = c
			break
		}
	}
	if err := v.Put(k, []byte("first-new")); err != nil {
		t.Fatal(err)
	}
	page0 := &tb.main.dir[0].b[0]
	inside, resume := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		n := 0
		done <- snap.Scan("v", 0, func(e runtime.Entry) error {
			if n++; n == 1 {
				close(inside)
				<-resume
			}
			if string(e.Value) != "old-value" {
				return fmt.Errorf("the Scan read %q = %q, a value written after the snapshot", e.Key, e.Value)
			}
			return nil
		})
	}()
	<-inside // the reader is on page 0
	if err := v.Put(k, []byte("again-new")); err != nil {
		t.Fatal(err)
	}
	if &tb.main.dir[0].b[0] != page0 {
		t.Fatal("a write to a record in the undo log copied the page the reader is on")
	}
	close(resume)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := snap.Release(); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := v.Get(k); string(got) != "again-new" {
		t.Fatalf("Get = %q after the writes", got)
	}
}

// TestReleaseDropsUndoLogsAndViews pins that a released snapshot's undo
// logs become garbage at once, and that a table stops pointing at the view
// of a released snapshot on its next write that may allocate (an in-place
// overwrite needs nothing of the view) or at the next Snapshot, so neither
// keeps the snapshot's memory reachable.
func TestReleaseDropsUndoLogsAndViews(t *testing.T) {
	s, v, keys := valueFixture(t, 3000)
	tb := v.tabs[0]
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys[:100] {
		if err := v.Put(k, []byte("new-value")); err != nil {
			t.Fatal(err)
		}
	}
	tv := snap.(*snapshot).states["v"].tabs[0]
	if tv.pages.Load() == nil || len(tb.prot) != 1 {
		t.Fatalf("under a live snapshot: page set %v, %d views protected; want a page set and 1 view", tv.pages.Load() != nil, len(tb.prot))
	}
	if err := snap.Release(); err != nil {
		t.Fatal(err)
	}
	if tv.pages.Load() != nil {
		t.Fatal("a released snapshot keeps its undo logs")
	}
	if err := v.Put(keys[0], []byte("a value of another length")); err != nil {
		t.Fatal(err)
	}
	if len(tb.prot) != 0 {
		t.Fatalf("the table still points at %d views after a write with no live snapshot", len(tb.prot))
	}
	// The next Snapshot drops them too.
	snap, err = s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Release(); err != nil {
		t.Fatal(err)
	}
	last, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if len(tb.prot) != 1 {
		t.Fatalf("after a Snapshot the table points at %d views, want only the live one", len(tb.prot))
	}
	if err := last.Release(); err != nil {
		t.Fatal(err)
	}
}

// A writer's pageSet that loses the race to publish a page set to the
// snapshot's reader, and then sees a Release drop it, makes one of its
// own instead of returning nil (the writer then saved a record into a nil
// page set and crashed, under load in CI).
func TestPageSetSurvivesAReleaseBetweenPublications(t *testing.T) {
	tv := &tableView{}
	raced := 0
	pageSetRaced = func(tv *tableView, failed bool) {
		switch {
		case !failed && raced == 0:
			tv.pages.Store(&pageSet{}) // the reader publishes first
		case failed:
			raced++
			tv.pages.Store(nil) // the Release frees the view
		}
	}
	defer func() { pageSetRaced = nil }()
	if ps := tv.pageSet(); ps == nil || raced != 1 {
		t.Fatalf("pageSet = %v after %d races, want a page set", ps, raced)
	}
}

// TestRecycledViewStartsWithoutUndoLogs: a Release that frees a snapshot
// between a write's check that the snapshot is live and its making of the
// view's page set leaves that page set, with the records the write saved,
// on the freed view. The next snapshot recycles the view; it must start
// without the old snapshot's undo records, or its reader takes the old
// values from them (and the writer, finding the records saved, saves no
// new ones): lost updates in checkpoints, found by the clickstream example
// under -race and load.
func TestRecycledViewStartsWithoutUndoLogs(t *testing.T) {
	s, err := New(Options{StoreConfig: runtime.StoreConfig{MaxParallelism: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Register(runtime.StateSpec{Name: "v", Kind: runtime.KindValue})
	if err != nil {
		t.Fatal(err)
	}
	v := st.(runtime.ValueState)
	var keys []runtime.Key
	for i := range 10 {
		k := runtime.MakeKey([]byte(fmt.Sprintf("k%d", i)), nil, 1)
		keys = append(keys, k)
		if err := v.Put(k, []byte("old")); err != nil {
			t.Fatal(err)
		}
	}
	first, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	released := false
	pageSetRaced = func(_ *tableView, failed bool) {
		if !failed && !released {
			released = true
			if err := first.Release(); err != nil {
				t.Error(err)
			}
		}
	}
	err = v.Put(keys[0], []byte("new"))
	pageSetRaced = nil
	if err != nil {
		t.Fatal(err)
	}
	if !released {
		t.Fatal("the write made no page set for the live snapshot: the test no longer reaches the race")
	}
	second, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer second.Release()
	if err := v.Put(keys[0], []byte("newer")); err != nil {
		t.Fatal(err)
	}
	got, err := storetest.Dump(second)
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]int{}
	for _, r := range got.States["v"].Groups[0] {
		values[r.Value]++
	}
	if want := map[string]int{"old": 9, "new": 1}; !cmp.Equal(values, want) {
		t.Errorf("the second snapshot holds values %v, want %v (the key written between the snapshots reads %q)", values, want, "new")
	}
}

// entryBytes sums the sizes of the entries in the main table of t, as its
// byte count should have them, and reports the first record whose bytes
// past its inline entry are not zero (as put leaves them).
func entryBytes(t *testing.T, tb *table) int64 {
	t.Helper()
	var sum int64
	for p := range tb.main.dir {
		b := tb.main.dir[p].b
		for off := 0; off+int(tb.main.w) <= len(b); off += int(tb.main.w) {
			rec := b[off : off+int(tb.main.w)]
			if ctrl(rec) == recEmpty {
				continue
			}
			_, _, _, size, ok := decodeEntry(recEntry(tb.Slabs, rec))
			if !ok {
				t.Fatalf("record at page %d offset %d: undecodable entry", p, off)
			}
			if rec[0]&3 == recInline {
				for i, c := range rec[4+size:] {
					if c != 0 {
						t.Fatalf("record at page %d offset %d: byte %d past its entry of %d bytes is %#x, not 0", p, off, 4+size+i, size, c)
					}
				}
			}
			sum += int64(size)
		}
	}
	return sum
}

// TestValueOfNewLengthWrittenInPlace: Put and Update write a value of
// another length that still fits its inline record where it is — no record
// moves and the arena does not grow — keep the table's byte count and the
// records' cleared tails right, and a live snapshot still reads the old
// values (and its own byte count) while the record is rewritten.
func TestValueOfNewLengthWrittenInPlace(t *testing.T) {
	s, v, keys := valueFixture(t, 2000)
	tb := v.tabs[0]
	w := int(tb.main.w)
	maxVal := w - 4 - 3 - len(keys[0].Bytes()) // the longest value an inline record holds
	if maxVal < 4 {
		t.Fatalf("record width %d leaves room for values of %d bytes only", w, maxVal)
	}
	r := rand.New(rand.NewPCG(5, 6))
	want := make(map[int]string)
	arena := tb.Size()
	write := func(round int) {
		for i, k := range keys {
			n := r.IntN(maxVal + 1)
			val := []byte(strings.Repeat(string(rune('a'+round)), n))
			var err error
			if i%2 == 0 {
				err = v.Put(k, val)
			} else {
				err = v.Update(k, func(old []byte, found bool) ([]byte, error) {
					if !found || string(old) != want[i] {
						return nil, fmt.Errorf("Update of key %d: old value %q, %v; want %q", i, old, found, want[i])
					}
					return val, nil
				})
			}
			if err != nil {
				t.Fatal(err)
			}
			want[i] = string(val)
		}
	}
	for i := range keys {
		want[i] = "old-value"
	}
	for round := range 3 {
		write(round)
		if got, sum := tb.main.bytes, entryBytes(t, tb); got != sum {
			t.Fatalf("round %d: the table counts %d entry bytes; its entries hold %d", round, got, sum)
		}
		if tb.Size() != arena {
			t.Fatalf("round %d: the arena grew from %d to %d bytes: a value that fits its record was moved", round, arena, tb.Size())
		}
	}
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	before, err := storetest.Dump(snap)
	if err != nil {
		t.Fatal(err)
	}
	write(3)
	for i, k := range keys {
		got, ok, err := v.Get(k)
		if err != nil || !ok || string(got) != want[i] {
			t.Fatalf("Get of key %d = %q, %v, %v after a resize under a snapshot; want %q", i, got, ok, err, want[i])
		}
	}
	after, err := storetest.Dump(snap)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(before, after); d != "" {
		t.Fatalf("the snapshot changed while values were resized (-before +after):\n%s", d)
	}
	if err := snap.Release(); err != nil {
		t.Fatal(err)
	}
	if got, sum := tb.main.bytes, entryBytes(t, tb); got != sum {
		t.Fatalf("after the snapshot: the table counts %d entry bytes; its entries hold %d", got, sum)
	}
}
