package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/checkpoint/checkpointtest"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

// Asynchronous snapshots leave no goroutine behind however they end:
// written, cancelled through a context that was done before they started,
// cancelled with Cancel while blocked in a write, cancelled through their
// context while blocked, failed by the storage, panicking in the store's
// Scan — and every snapshot is released.
func TestAsyncSnapshotsLeakNoGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	d, files := dirOf(t)
	m, _ := filledModel(t, 50)
	store := &countingStore{Store: m}
	done, cancelDone := context.WithCancel(ctx)
	cancelDone()
	for i := range 20 {
		name := func(what string) string { return fmt.Sprintf("%s-%d", what, i) }
		a, err := checkpoint.SnapshotAsync(ctx, store, d, "chk", name("ok"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Wait(); err != nil {
			t.Fatal(err)
		}
		a, err = checkpoint.SnapshotAsync(done, store, d, "chk", name("done"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Wait(); !errors.Is(err, context.Canceled) {
			t.Fatalf("snapshot with a done context: %v", err)
		}
		a, err = checkpoint.SnapshotAsync(ctx, store, checkpointtest.Blocking{Storage: d}, "chk", name("cancel"), nil)
		if err != nil {
			t.Fatal(err)
		}
		a.Cancel()
		if _, err := a.Wait(); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled snapshot: %v", err)
		}
		cctx, cancel := context.WithCancel(ctx)
		snap, err := store.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		a = checkpoint.WriteAsync(cctx, snap, 0, checkpointtest.Blocking{Storage: d}, "chk", name("ctx"), nil)
		cancel()
		if _, err := a.Wait(); !errors.Is(err, context.Canceled) {
			t.Fatalf("snapshot whose context was cancelled: %v", err)
		}
		a, err = checkpoint.SnapshotAsync(ctx, store, d, "no/such", name("bad"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Wait(); !errors.Is(err, checkpoint.ErrInvalidName) {
			t.Fatalf("snapshot into an invalid checkpoint name: %v", err)
		}
		a = checkpoint.WriteAsync(ctx, panicky{}, 0, d, "chk", name("panic"), nil)
		if _, err := a.Wait(); !errors.Is(err, checkpoint.ErrPanic) {
			t.Fatalf("panicking snapshot: %v", err)
		}
	}
	if n := store.live.Load(); n != 0 {
		t.Errorf("%d snapshots were not released", n)
	}
	for _, f := range files() {
		if !strings.HasPrefix(f, "chk/ok-") {
			t.Errorf("a failed snapshot left %s", f)
		}
	}
}

// countingStore counts the snapshots it handed out that are not released
// yet.
type countingStore struct {
	runtime.Store
	live atomic.Int64
}

func (s *countingStore) Snapshot() (runtime.Snapshot, error) {
	snap, err := s.Store.Snapshot()
	if err != nil {
		return nil, err
	}
	s.live.Add(1)
	return &countedSnapshot{Snapshot: snap, live: &s.live}, nil
}

type countedSnapshot struct {
	runtime.Snapshot
	live *atomic.Int64
}

func (s *countedSnapshot) Release() error {
	s.live.Add(-1)
	return s.Snapshot.Release()
}

// panicky is a snapshot whose Scan panics.
type panicky struct{}

func (panicky) MaxParallelism() int              { return 4 }
func (panicky) KeyGroups() runtime.KeyGroupRange { return runtime.FullRange(4) }
func (panicky) States() []runtime.StateSpec {
	return []runtime.StateSpec{{Name: "s", Kind: runtime.KindValue}}
}
func (panicky) Scan(string, int, func(runtime.Entry) error) error { panic("scan exploded") }
func (panicky) Release() error                                    { return nil }

// openFDs returns the file descriptors the process has open, with what
// each one is (the target of its /proc/self/fd link).
func openFDs(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd to count file descriptors: %v", err)
	}
	var out []string
	for _, e := range ents {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue // the descriptor ReadDir itself used, closed by now
		}
		out = append(out, e.Name()+" -> "+target)
	}
	slices.Sort(out)
	return out
}

// The number of open file descriptors is the same before and after 1,000
// checkpoint cycles on a Dir — two instances written asynchronously,
// committed, listed, opened, verified, restored into fresh stores and
// deleted; and a tenth of the cycles fail instead, by cancellation, a
// missing file or a corrupt one. STATEGEN_LONG=1 runs 10,000 cycles. The
// directory is on a memory file system where there is one (/dev/shm), so
// that the cycles' fsyncs cost nothing: the descriptors are the same.
func TestFileDescriptorsStableAcrossCheckpointCycles(t *testing.T) {
	cycles := 1000
	if os.Getenv("STATEGEN_LONG") == "1" {
		cycles = 10000
	}
	d, files := fastDir(t)
	var stores []*storetest.Model
	for i := range 2 {
		m := newModel(t, 16, 2, i)
		fill(t, m, genView(uint64(60+i), 16, m.Config().KeyGroups, 20, 0))
		stores = append(stores, m)
	}
	cycle := func(n int) {
		ckpt := checkpoint.CheckpointName(uint64(n))
		var snaps []checkpoint.InstanceSnapshot
		for i, m := range stores {
			a, err := checkpoint.SnapshotAsync(ctx, m, d, ckpt, fmt.Sprintf("op-%d.sgc", i), nil)
			if err != nil {
				t.Fatal(err)
			}
			if n%10 == 3 && i == 1 {
				a.Cancel() // a failed checkpoint: nothing to commit
			}
			res, err := a.Wait()
			if err != nil {
				if n%10 == 3 {
					if err := checkpoint.Delete(ctx, d, ckpt); err != nil {
						t.Fatal(err)
					}
					return
				}
				t.Fatal(err)
			}
			snaps = append(snaps, res.Snapshot)
		}
		op, err := checkpoint.NewOperator("op", snaps...)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkpoint.Commit(ctx, d, ckpt, &checkpoint.Metadata{CheckpointID: uint64(n), Operators: []checkpoint.Operator{op}}); err != nil {
			t.Fatal(err)
		}
		names, err := checkpoint.List(ctx, d)
		if err != nil || !slices.Equal(names, []string{ckpt}) {
			t.Fatalf("List = %q, %v", names, err)
		}
		switch n % 10 {
		case 5: // a file goes missing
			if err := d.Remove(ctx, ckpt, "op-0.sgc"); err != nil {
				t.Fatal(err)
			}
		case 7: // a file is replaced by another of the same size
			replaceObject(t, d, ckpt, "op-1.sgc", func(b []byte) []byte { b[len(b)/2] ^= 1; return b })
		}
		r, err := checkpoint.Open(ctx, d, ckpt)
		if err != nil {
			t.Fatal(err)
		}
		verr := r.Verify(ctx)
		for q := range 2 {
			fresh := newModel(t, 16, 2, q)
			plans, err := r.Plan("op", 2)
			if err != nil {
				t.Fatal(err)
			}
			_, rerr := r.Restore(ctx, plans[q], fresh, nil)
			if (rerr != nil || verr != nil) != (n%10 == 5 || n%10 == 7) && !(rerr == nil && q == 0 && n%10 == 7) {
				t.Fatalf("cycle %d: verify %v, restore of instance %d %v", n, verr, q, rerr)
			}
		}
		if err := checkpoint.Delete(ctx, d, ckpt); err != nil {
			t.Fatal(err)
		}
	}
	cycle(0) // the first cycle opens what the process keeps open for good
	before := openFDs(t)
	for n := 1; n <= cycles; n++ {
		cycle(n)
		if n%100 == 0 {
			if now := openFDs(t); len(now) > len(before) {
				t.Fatalf("after %d cycles %d file descriptors are open, %d before:\nnow:    %q\nbefore: %q\n%s",
					n, len(now), len(before), now, before, goroutines())
			}
		}
	}
	after := openFDs(t)
	if len(after) != len(before) {
		t.Errorf("%d file descriptors open before %d checkpoint cycles, %d after:\nbefore: %q\nafter:  %q", len(before), cycles, len(after), before, after)
	}
	if left := files(); len(left) != 0 {
		t.Errorf("the cycles left files behind: %q", left)
	}
	t.Logf("%d checkpoint cycles: %d file descriptors open before, %d after", cycles, len(before), len(after))
}

// fastDir is dirOf in a directory of /dev/shm, if it is there.
func fastDir(t *testing.T) (*checkpoint.Dir, func() []string) {
	root, err := os.MkdirTemp("/dev/shm", "stategen-test-")
	if err != nil {
		return dirOf(t)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	return dirAt(t, root)
}

func goroutines() string {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	return b.String()
}
