package checkpoint_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

// trackedSnapshot wraps a snapshot to count its releases and to run hook
// before every Scan.
type trackedSnapshot struct {
	runtime.Snapshot
	releases   atomic.Int32
	releaseErr error
	hook       func(state string, kg int)
}

func (s *trackedSnapshot) Scan(state string, kg int, fn func(runtime.Entry) error) error {
	if s.hook != nil {
		s.hook(state, kg)
	}
	return s.Snapshot.Scan(state, kg, fn)
}

func (s *trackedSnapshot) Release() error {
	s.releases.Add(1)
	if err := s.Snapshot.Release(); err != nil {
		return err
	}
	return s.releaseErr
}

// trackedStore hands out trackedSnapshots.
type trackedStore struct {
	runtime.Store
	last    *trackedSnapshot
	hook    func(state string, kg int)
	snapErr error
}

func (s *trackedStore) Snapshot() (runtime.Snapshot, error) {
	if s.snapErr != nil {
		return nil, s.snapErr
	}
	snap, err := s.Store.Snapshot()
	if err != nil {
		return nil, err
	}
	s.last = &trackedSnapshot{Snapshot: snap, hook: s.hook}
	return s.last, nil
}

func filledModel(t testing.TB, keys int) (*storetest.Model, *memView) {
	t.Helper()
	v := genView(50, 16, runtime.FullRange(16), keys, 0)
	m := newModel(t, 16, 1, 0)
	fill(t, m, v)
	return m, v
}

// dirOf returns a Dir storage in a temporary directory and a function
// listing every file left in it (temporary files included).
func dirOf(t *testing.T) (*checkpoint.Dir, func() []string) {
	return dirAt(t, t.TempDir())
}

// dirAt is dirOf in the directory root.
func dirAt(t *testing.T, root string) (*checkpoint.Dir, func() []string) {
	d, err := checkpoint.NewDir(root)
	if err != nil {
		t.Fatal(err)
	}
	return d, func() []string {
		var files []string
		filepath.WalkDir(root, func(path string, e os.DirEntry, err error) error {
			if err == nil && !e.IsDir() {
				rel, _ := filepath.Rel(root, path)
				files = append(files, rel)
			}
			return nil
		})
		return files
	}
}

func TestAsyncSnapshotWritesReportsAndReleases(t *testing.T) {
	m, v := filledModel(t, 500)
	st := &trackedStore{Store: m}
	d, files := dirOf(t)
	a, err := checkpoint.SnapshotAsync(ctx, st, d, "chk", "op-0.sgc", nil)
	if err != nil {
		t.Fatal(err)
	}
	<-a.Done()
	res, err := a.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if n := st.last.releases.Load(); n != 1 {
		t.Errorf("snapshot released %d times", n)
	}
	info, err := d.Stat(ctx, "chk", "op-0.sgc")
	if err != nil {
		t.Fatal(err)
	}
	s := res.Stats
	t.Logf("stats %+v", s)
	if s.SyncDuration <= 0 || s.AsyncDuration <= 0 || s.BytesWritten != info.Size || s.BytesWritten != res.Snapshot.File.Size ||
		s.Entries != res.Snapshot.File.Entries || s.Entries == 0 {
		t.Errorf("stats %+v for a file of %d bytes, %d entries", s, info.Size, res.Snapshot.File.Entries)
	}
	if res.Snapshot.File.Name != "op-0.sgc" || res.Snapshot.MaxParallelism != 16 || !cmp.Equal(res.Snapshot.States, testSpecs) {
		t.Errorf("snapshot %+v", res.Snapshot)
	}
	if got := files(); len(got) != 1 {
		t.Errorf("files left: %q", got)
	}
	op, err := checkpoint.NewOperator("op", res.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Commit(ctx, d, "chk", &checkpoint.Metadata{Operators: []checkpoint.Operator{op}}); err != nil {
		t.Fatal(err)
	}
	m2 := newModel(t, 16, 1, 0)
	if _, err := checkpoint.Restore(ctx, d, "chk", "op", 0, 1, m2, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(contents(t, v), snapshotContents(t, m2)); diff != "" {
		t.Errorf("restored (-want +got):\n%s", diff)
	}
}

// TestAsyncSnapshotCancelRemovesThePartialFile cancels a write in the middle,
// both through the handle and through the caller's context.
func TestAsyncSnapshotCancelRemovesThePartialFile(t *testing.T) {
	for _, how := range []string{"Cancel", "context"} {
		t.Run(how, func(t *testing.T) {
			m, _ := filledModel(t, 2000)
			started := make(chan struct{})
			proceed := make(chan struct{})
			var scans atomic.Int32
			st := &trackedStore{Store: m, hook: func(string, int) {
				if scans.Add(1) == 20 {
					close(started)
					<-proceed
				}
			}}
			d, files := dirOf(t)
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			a, err := checkpoint.SnapshotAsync(cctx, st, d, "chk", "op-0.sgc", &checkpoint.WriterOptions{BlockSize: 128})
			if err != nil {
				t.Fatal(err)
			}
			<-started
			if how == "Cancel" {
				a.Cancel()
			} else {
				cancel()
			}
			close(proceed)
			res, err := a.Wait()
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Wait = %v, want context.Canceled", err)
			}
			if n := st.last.releases.Load(); n != 1 {
				t.Errorf("snapshot released %d times", n)
			}
			if got := files(); len(got) != 0 {
				t.Errorf("a cancelled snapshot left %q", got)
			}
			if res.Stats.AsyncDuration <= 0 || res.Stats.SyncDuration <= 0 || res.Snapshot.File.Name != "" {
				t.Errorf("result of a cancelled snapshot: %+v", res)
			}
			a.Cancel() // harmless after the end
		})
	}
}

func TestAsyncSnapshotPanicIsAnErrorAndReleases(t *testing.T) {
	m, _ := filledModel(t, 100)
	st := &trackedStore{Store: m, hook: func(state string, kg int) {
		if kg == 3 {
			panic("backend bug")
		}
	}}
	d, files := dirOf(t)
	a, err := checkpoint.SnapshotAsync(ctx, st, d, "chk", "op-0.sgc", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Wait()
	if !errors.Is(err, checkpoint.ErrPanic) || !strings.Contains(err.Error(), "backend bug") {
		t.Fatalf("Wait = %v, want ErrPanic with the panic value", err)
	}
	if n := st.last.releases.Load(); n != 1 {
		t.Errorf("snapshot released %d times", n)
	}
	if got := files(); len(got) != 0 {
		t.Errorf("a panicked snapshot left %q", got)
	}
}

func TestAsyncSnapshotReportsReleaseErrors(t *testing.T) {
	m, _ := filledModel(t, 10)
	snap, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	ts := &trackedSnapshot{Snapshot: snap, releaseErr: runtime.ErrReleased}
	a := checkpoint.WriteAsync(ctx, ts, time.Millisecond, checkpoint.NewMem(), "chk", "f", nil)
	res, err := a.Wait()
	if !errors.Is(err, runtime.ErrReleased) {
		t.Errorf("Wait = %v, want the release error", err)
	}
	if res.Stats.SyncDuration != time.Millisecond || ts.releases.Load() != 1 {
		t.Errorf("stats %+v, %d releases", res.Stats, ts.releases.Load())
	}
}

func TestAsyncSnapshotStorageErrorReleases(t *testing.T) {
	m, _ := filledModel(t, 10)
	s := checkpoint.NewMem()
	put(t, s, "chk", "f", []byte("taken"))
	st := &trackedStore{Store: m}
	a, err := checkpoint.SnapshotAsync(ctx, st, s, "chk", "f", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Wait(); !errors.Is(err, checkpoint.ErrExist) {
		t.Errorf("Wait = %v, want ErrExist", err)
	}
	if n := st.last.releases.Load(); n != 1 {
		t.Errorf("snapshot released %d times", n)
	}
	if got := readObject(t, s, "chk", "f"); string(got) != "taken" {
		t.Errorf("the failed snapshot overwrote the object: %q", got)
	}
}

func TestSnapshotAsyncReportsASyncPhaseError(t *testing.T) {
	m, _ := filledModel(t, 10)
	boom := errors.New("boom")
	a, err := checkpoint.SnapshotAsync(ctx, &trackedStore{Store: m, snapErr: boom}, checkpoint.NewMem(), "chk", "f", nil)
	if !errors.Is(err, boom) || a != nil {
		t.Errorf("SnapshotAsync = %v, %v; want the Snapshot error and no handle", a, err)
	}
}

// TestWritesContinueDuringAsyncSnapshot writes to the store on the
// operator's goroutine while the runner writes its snapshot (run it with
// -race); the checkpoint holds exactly the state at the sync phase.
func TestWritesContinueDuringAsyncSnapshot(t *testing.T) {
	m, v := filledModel(t, 1000)
	want := contents(t, v)
	s := checkpoint.NewMem()
	a, err := checkpoint.SnapshotAsync(ctx, m, s, "chk", "op-0.sgc", &checkpoint.WriterOptions{BlockSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	st, err := m.Register(testSpecs[0])
	if err != nil {
		t.Fatal(err)
	}
	counts := st.(runtime.ValueState)
	for i := 0; ; i++ {
		k := runtime.MakeKey([]byte{byte(i), byte(i >> 8), 1, 2, 3}, nil, 16)
		if err := counts.Put(k, []byte("later")); err != nil {
			t.Fatal(err)
		}
		select {
		case <-a.Done():
		default:
			continue
		}
		break
	}
	res, err := a.Wait()
	if err != nil {
		t.Fatal(err)
	}
	op, _ := checkpoint.NewOperator("op", res.Snapshot)
	if err := checkpoint.Commit(ctx, s, "chk", &checkpoint.Metadata{Operators: []checkpoint.Operator{op}}); err != nil {
		t.Fatal(err)
	}
	m2 := newModel(t, 16, 1, 0)
	if _, err := checkpoint.Restore(ctx, s, "chk", "op", 0, 1, m2, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, snapshotContents(t, m2)); diff != "" {
		t.Errorf("the checkpoint is not the state at the sync phase (-want +got):\n%s", diff)
	}
}
