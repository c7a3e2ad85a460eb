package checkpoint_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	gort "runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
)

// scanEvent is what a Scan's callback saw, or the error Scan returned.
type scanEvent struct {
	Rec rec
	Err string
}

// scanRecord scans every state of every key group of v, stopping each Scan
// after stopAfter entries if stopAfter >= 0, and records the entries each
// callback saw, in order, and each Scan's error.
func scanRecord(v runtime.View, stopAfter int) []scanEvent {
	var out []scanEvent
	stop := errors.New("callback stops")
	for _, s := range v.States() {
		for kg := range v.KeyGroups().All() {
			n := 0
			err := v.Scan(s.Name, kg, func(e runtime.Entry) error {
				if stopAfter >= 0 && n == stopAfter {
					return stop
				}
				n++
				out = append(out, scanEvent{Rec: rec{string(e.Key), string(e.Namespace), string(e.UserKey), string(e.Value)}})
				return nil
			})
			if err != nil {
				if errors.Is(err, stop) && err != stop {
					err = fmt.Errorf("wrapped the callback's error: %w", err)
				}
				out = append(out, scanEvent{Err: fmt.Sprintf("Scan(%q, %d): %v", s.Name, kg, err)})
			}
		}
	}
	return out
}

// openWithReadAhead opens data as a View that reads ahead blocks blocks.
func openWithReadAhead(t testing.TB, data []byte, blocks int) *checkpoint.View {
	t.Helper()
	fv, err := checkpoint.OpenFile("f.sgc", bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	checkpoint.SetReadAhead(fv, blocks)
	return fv
}

// noDecoderGoroutine fails if a read-ahead goroutine is still running a
// second after its Scan returned. Scan returns once the goroutine has
// closed its channel, its last act — but the goroutine may not have
// exited yet at that instant (seen under load in CI), so the check polls;
// a goroutine that leaks is still there after a second (and the tests of
// this package do not run in parallel).
func noDecoderGoroutine(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(time.Second)
	for {
		stacks := buf[:gort.Stack(buf, true)]
		if !bytes.Contains(stacks, []byte("checkpoint.readBlocks")) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("a read-ahead goroutine outlived its Scan by a second:\n%s", stacks)
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// TestReadAheadPassesWhatInlineReadingPasses compares Scans that read ahead
// with Scans that do not: the same entries in the same order, the same
// errors — on intact files, with callbacks that stop early at positions in
// the first, later and last blocks of sections, and on files with a
// damaged byte in a late block of a section.
func TestReadAheadPassesWhatInlineReadingPasses(t *testing.T) {
	v := genView(81, 4, runtime.FullRange(4), 400, 2000)
	for _, bs := range []int{48, 1000, 0} {
		data := fileBytes(t, v, &checkpoint.WriterOptions{BlockSize: bs})
		for _, stopAfter := range []int{-1, 0, 1, 7, 511, 512, 513, 1500} {
			t.Run(fmt.Sprintf("blockSize=%d/stopAfter=%d", bs, stopAfter), func(t *testing.T) {
				want := scanRecord(openWithReadAhead(t, data, 0), stopAfter)
				for _, ahead := range []int{1, 2, 5} {
					got := scanRecord(openWithReadAhead(t, data, ahead), stopAfter)
					if diff := cmp.Diff(want, got); diff != "" {
						t.Fatalf("reading %d blocks ahead differs from reading inline (-inline +ahead):\n%s", ahead, diff)
					}
				}
				noDecoderGoroutine(t)
			})
		}
	}
	// A damaged byte in the second half of the data blocks: the entries
	// before it are passed, then the same error.
	data := fileBytes(t, v, &checkpoint.WriterOptions{BlockSize: 200})
	dataEnd := int(binary.LittleEndian.Uint64(data[len(data)-24:])) // the index block's offset
	for i := range 40 {
		off := 32 + (dataEnd-32)*(50+i)/90
		t.Run(fmt.Sprintf("flip@%d", off), func(t *testing.T) {
			bad := bytes.Clone(data)
			bad[off] ^= 0x10
			want := scanRecord(openWithReadAhead(t, bad, 0), -1)
			got := scanRecord(openWithReadAhead(t, bad, 3), -1)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("reading ahead differs from reading inline (-inline +ahead):\n%s", diff)
			}
			if !slices.ContainsFunc(want, func(e scanEvent) bool { return e.Err != "" }) {
				t.Errorf("the flipped byte at %d went unnoticed", off)
			}
			noDecoderGoroutine(t)
		})
	}
}

// TestReadAheadStopsOnCancellation cancels the View's context from the
// callback in the middle of a section of many blocks: the Scan fails with
// the context's error, having passed at most the blocks already read
// ahead, not the rest of the section.
func TestReadAheadStopsOnCancellation(t *testing.T) {
	v := genView(82, 1, runtime.FullRange(1), 3000, 0)
	s := checkpoint.NewMem()
	writeCheckpoint(t, s, "chk", v, 1, &checkpoint.WriterOptions{BlockSize: 256})
	r, err := checkpoint.Open(ctx, s, "chk")
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cv, err := r.View(cctx, "op", runtime.FullRange(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cv.Close()
	total := len(v.data["counts"][0])
	n := 0
	err = cv.Scan("counts", 0, func(runtime.Entry) error {
		n++
		if n == 100 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Scan = %v after %d of %d entries, want context.Canceled", err, n, total)
	}
	// 256-byte blocks hold fewer than 100 entries: the Scan may finish the
	// blocks read ahead, not the section.
	if n >= total {
		t.Errorf("the Scan passed all %d entries after its context was cancelled", n)
	}
	noDecoderGoroutine(t)
}

// TestViewScansKeyGroupsConcurrently scans the key groups of one checkpoint
// View from several goroutines at once (run it with -race): each sees its
// key groups' entries, as runtime.View promises.
func TestViewScansKeyGroupsConcurrently(t *testing.T) {
	const maxP, workers = 16, 4
	v := genView(83, maxP, runtime.FullRange(maxP), 2000, 3000)
	s := checkpoint.NewMem()
	writeCheckpoint(t, s, "chk", v, 2, &checkpoint.WriterOptions{BlockSize: 300})
	r, err := checkpoint.Open(ctx, s, "chk")
	if err != nil {
		t.Fatal(err)
	}
	cv, err := r.View(ctx, "op", runtime.FullRange(maxP))
	if err != nil {
		t.Fatal(err)
	}
	defer cv.Close()
	want := dump(t, v)
	got := make([]map[string]map[int][]rec, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			out := make(map[string]map[int][]rec)
			for _, st := range cv.States() {
				out[st.Name] = make(map[int][]rec)
				for kg := w; kg < maxP; kg += workers {
					err := cv.Scan(st.Name, kg, func(e runtime.Entry) error {
						out[st.Name][kg] = append(out[st.Name][kg], rec{string(e.Key), string(e.Namespace), string(e.UserKey), string(e.Value)})
						return nil
					})
					if err != nil {
						errs[w] = err
						return
					}
				}
			}
			got[w] = out
		})
	}
	wg.Wait()
	merged := make(map[string]map[int][]rec)
	for w := range workers {
		if errs[w] != nil {
			t.Fatalf("goroutine %d: %v", w, errs[w])
		}
		for name, groups := range got[w] {
			if merged[name] == nil {
				merged[name] = make(map[int][]rec)
			}
			for kg, recs := range groups {
				merged[name][kg] = recs
			}
		}
	}
	if diff := cmp.Diff(want, merged); diff != "" {
		t.Fatalf("concurrent Scans differ from the view written (-want +got):\n%s", diff)
	}
}

// TestReadAheadAllocatesNothingPerEntry scans a section of many blocks and
// checks that the allocations do not grow with its entries: block buffers
// come from a pool, entries are passed as views of the blocks.
func TestReadAheadAllocatesNothingPerEntry(t *testing.T) {
	v := genView(84, 1, runtime.FullRange(1), 20000, 0)
	data := fileBytes(t, v, &checkpoint.WriterOptions{BlockSize: 4096})
	for _, ahead := range []int{0, 2} {
		fv := openWithReadAhead(t, data, ahead)
		entries := 0
		count := func(runtime.Entry) error { entries++; return nil }
		allocs := testing.AllocsPerRun(20, func() {
			if err := fv.Scan("counts", 0, count); err != nil {
				t.Fatal(err)
			}
		})
		t.Logf("read-ahead %d: %.0f allocations per Scan of %d entries", ahead, allocs, entries/21)
		if entries/21 < 10000 {
			t.Fatalf("the section has only %d entries", entries/21)
		}
		if allocs > 30 {
			t.Errorf("read-ahead %d: a Scan of %d entries allocated %.0f times", ahead, entries/21, allocs)
		}
	}
}

func TestRestoreOptionsReadAheadIsChecked(t *testing.T) {
	v := genView(85, 4, runtime.FullRange(4), 20, 0)
	s := checkpoint.NewMem()
	writeCheckpoint(t, s, "chk", v, 1, nil)
	for _, ra := range []int{-1, 1, checkpoint.MaxReadAhead} {
		m := newModel(t, 4, 1, 0)
		if _, err := checkpoint.Restore(ctx, s, "chk", "op", 0, 1, m, &checkpoint.RestoreOptions{ReadAhead: ra}); err != nil {
			t.Errorf("ReadAhead %d: %v", ra, err)
		}
	}
	m := newModel(t, 4, 1, 0)
	if _, err := checkpoint.Restore(ctx, s, "chk", "op", 0, 1, m, &checkpoint.RestoreOptions{ReadAhead: checkpoint.MaxReadAhead + 1}); err == nil {
		t.Errorf("ReadAhead %d was accepted", checkpoint.MaxReadAhead+1)
	}
}

// entryCounter is the optional interface a Store.Restore may test its View
// for.
type entryCounter interface {
	Entries(state string, kg int) (int64, bool)
}

// TestViewEntriesCountsWhatScanPasses checks View.Entries against Scans,
// on a View of some key groups of a checkpoint of two files.
func TestViewEntriesCountsWhatScanPasses(t *testing.T) {
	const maxP = 16
	v := genView(86, maxP, runtime.FullRange(maxP), 500, 0)
	s := checkpoint.NewMem()
	writeCheckpoint(t, s, "chk", v, 2, &checkpoint.WriterOptions{BlockSize: 300})
	r, err := checkpoint.Open(ctx, s, "chk")
	if err != nil {
		t.Fatal(err)
	}
	kgs := runtime.KeyGroupRange{Start: 5, End: 12} // across both files
	cv, err := r.View(ctx, "op", kgs)
	if err != nil {
		t.Fatal(err)
	}
	defer cv.Close()
	before := cv.BytesRead()
	counted := 0
	for _, st := range cv.States() {
		for kg := range kgs.All() {
			n, ok := cv.Entries(st.Name, kg)
			if !ok || n != int64(len(v.data[st.Name][kg])) {
				t.Errorf("Entries(%q, %d) = %d, %v; the view holds %d", st.Name, kg, n, ok, len(v.data[st.Name][kg]))
			}
			counted += int(n)
		}
	}
	if cv.BytesRead() != before {
		t.Errorf("Entries read %d bytes", cv.BytesRead()-before)
	}
	if scanned, err := scanAll(cv); err != nil || scanned != counted {
		t.Errorf("Scans passed %d entries (%v), Entries counted %d", scanned, err, counted)
	}
	if _, ok := cv.Entries("nope", 5); ok {
		t.Error("Entries of an unknown state is known")
	}
	if _, ok := cv.Entries("counts", 4); ok {
		t.Error("Entries of a key group outside the View is known")
	}
}

// entriesCheckingStore checks, in Restore, that the View it gets counts its
// entries (and hides the states it does not show).
type entriesCheckingStore struct {
	runtime.Store
	t       *testing.T
	checked int
}

func (s *entriesCheckingStore) Restore(src runtime.View) error {
	c, ok := src.(entryCounter)
	if !ok {
		s.t.Fatalf("the View Restore gets (%T) does not count its entries", src)
	}
	shown := map[string]bool{}
	for _, st := range src.States() {
		shown[st.Name] = true
		for kg := range src.KeyGroups().All() {
			want, ok := c.Entries(st.Name, kg)
			var got int64
			if err := src.Scan(st.Name, kg, func(runtime.Entry) error { got++; return nil }); err != nil {
				return err
			}
			if !ok || got != want {
				s.t.Errorf("state %q, key group %d: Entries = %d, %v; Scan passed %d", st.Name, kg, want, ok, got)
			}
			s.checked++
		}
	}
	for _, spec := range testSpecs {
		if _, ok := c.Entries(spec.Name, src.KeyGroups().Start); ok != shown[spec.Name] {
			s.t.Errorf("Entries of state %q is known: %v; the View shows it: %v", spec.Name, ok, shown[spec.Name])
		}
	}
	return s.Store.Restore(src)
}

func TestRestoreHandsTheStoreEntryCounts(t *testing.T) {
	v := genView(87, 8, runtime.FullRange(8), 200, 0)
	s := checkpoint.NewMem()
	writeCheckpoint(t, s, "chk", v, 3, nil)
	for _, policy := range []checkpoint.UnknownStatePolicy{checkpoint.KeepUnknownStates, checkpoint.DropUnknownStates} {
		m := newModel(t, 8, 2, 1)
		if _, err := m.Register(testSpecs[0]); err != nil {
			t.Fatal(err)
		}
		st := &entriesCheckingStore{Store: m, t: t}
		if _, err := checkpoint.Restore(ctx, s, "chk", "op", 1, 2, st, &checkpoint.RestoreOptions{UnknownStates: policy}); err != nil {
			t.Fatal(err)
		}
		if st.checked == 0 {
			t.Errorf("%v: nothing was checked", policy)
		}
	}
}
