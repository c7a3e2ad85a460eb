package checkpoint_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/checkpoint/checkpointtest"
	"github.com/stategen/stategen/checkpoint/faultstorage"
	"github.com/stategen/stategen/checkpoint/storagetest"
	"github.com/stategen/stategen/runtime"
)

// TestLocalCopyStorage: remote storage with a local copy in front is a
// Storage like any other.
func TestLocalCopyStorage(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) checkpoint.Storage {
		l, err := checkpoint.NewLocalCopy(checkpoint.NewMem())
		if err != nil {
			t.Fatal(err)
		}
		return l.Storage(checkpoint.NewMem())
	})
}

// countingStorage counts the Opens of data files on the storage it wraps.
type countingStorage struct {
	checkpoint.Storage
	opens atomic.Int64
}

func (c *countingStorage) Open(ctx context.Context, ckpt, name string) (checkpoint.Object, error) {
	if name != checkpoint.MetadataName {
		c.opens.Add(1)
	}
	return c.Storage.Open(ctx, ckpt, name)
}

// localSetup writes checkpoints 1 to n of a tracked model store through a
// local copy (Dir) in front of remote (Mem), incremental with chains of up
// to n files, retaining each as it completes, and returns the pieces and
// what the last one holds.
func localSetup(t *testing.T, n int) (*checkpoint.LocalCopy, *countingStorage, *checkpoint.Dir, map[string]map[int][]rec) {
	t.Helper()
	dir, err := checkpoint.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l, err := checkpoint.NewLocalCopy(dir)
	if err != nil {
		t.Fatal(err)
	}
	remote := &countingStorage{Storage: checkpoint.NewMem()}
	s := l.Storage(remote)
	rng := rand.New(rand.NewPCG(3, 4))
	tr, states := trackedModel(t, n)
	var want map[string]map[int][]rec
	for i := 1; i <= n; i++ {
		ops := 5
		if i == 1 {
			ops = 300
		}
		incOps(t, rng, states, ops)
		want = holds(t, tr)
		is := checkpointtest.Checkpoint(t, s, tr, uint64(i))
		if err := l.Retain(ctx, checkpoint.CheckpointName(uint64(i)), is); err != nil {
			t.Fatal(err)
		}
	}
	return l, remote, dir, want
}

// holds returns what tr's store holds now, in the canonical form of dump.
func holds(t *testing.T, tr *checkpoint.Tracker) map[string]map[int][]rec {
	t.Helper()
	snap, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	return canonical(dump(t, snap))
}

// restoreThrough restores checkpoint n of s into a new cow store, the one
// instance of one, and compares it with want.
func restoreThrough(t *testing.T, s checkpoint.Storage, n int, want map[string]map[int][]rec) {
	t.Helper()
	store, err := cow.New(cow.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: incMaxP}})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := checkpoint.Restore(ctx, s, checkpoint.CheckpointName(uint64(n)), checkpointtest.OperatorID, 0, 1, store, nil); err != nil {
		t.Fatal(err)
	}
	snap, err := store.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	if d := gocmp.Diff(want, canonical(dump(t, snap)), cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("restored through the local copy (-want +got):\n%s", d)
	}
}

// TestLocalCopyRestoresLocally: an instance whose key groups did not move
// restores its whole chain from its local copy — the remote storage gives
// only the metadata and the small reads that verify each copy — and
// Retain keeps exactly the files of the last completed checkpoint's
// chain.
func TestLocalCopyRestoresLocally(t *testing.T) {
	const n = 4
	l, remote, dir, want := localSetup(t, n)
	// Only the chain of checkpoint 4 is kept: its files and their records.
	var kept []string
	all, err := dir.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range all {
		objs, err := dir.Objects(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			kept = append(kept, c+"/"+o.Name)
		}
	}
	if len(kept) != 2*n {
		t.Errorf("the local copy holds %q, want the %d files of the last chain and their records", kept, n)
	}

	remote.opens.Store(0)
	restoreThrough(t, l.Storage(remote), n, want)
	st := l.Stats()
	if st.Hits == 0 || st.Misses != 0 || st.Rejected != 0 {
		t.Errorf("restore of an unmoved instance: %+v, want every file from the local copy", st)
	}
	if got := remote.opens.Load(); got != st.Hits {
		t.Errorf("the remote storage opened %d data files for %d local hits: want one verifying open each", got, st.Hits)
	}
}

// TestLocalCopyFallsBack: a local copy that is damaged, missing, or left
// from another write under the same name is never read: the restore reads
// the remote file and restores exactly the checkpoint, and the bad copy is
// removed. A file the remote storage lost is not served from the local
// copy.
func TestLocalCopyFallsBack(t *testing.T) {
	const n = 3
	damage := map[string]func(t *testing.T, path string){
		"damaged": func(t *testing.T, path string) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0x40
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"truncated": func(t *testing.T, path string) {
			if err := os.Truncate(path, 100); err != nil {
				t.Fatal(err)
			}
		},
		"missing": func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		},
		"no record": func(t *testing.T, path string) {
			if err := os.Remove(path + ".local-sum"); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, fn := range damage {
		t.Run(name, func(t *testing.T) {
			l, remote, dir, want := localSetup(t, n)
			path := filepath.Join(dir.Root(), checkpoint.CheckpointName(2), "instance-0.sgc")
			fn(t, path)
			restoreThrough(t, l.Storage(remote), n, want)
			st := l.Stats()
			switch name {
			case "missing":
				if st.Misses != 1 || st.Rejected != 0 {
					t.Errorf("stats %+v, want one miss", st)
				}
			default:
				if st.Rejected != 1 || st.Misses != 0 {
					t.Errorf("stats %+v, want one copy rejected", st)
				}
				if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the rejected copy is still there (%v)", err)
				}
			}
			if st.Hits != n-1 {
				t.Errorf("stats %+v, want the other %d files from the local copy", st, n-1)
			}
		})
	}

	t.Run("another write", func(t *testing.T) {
		// The remote checkpoint 1 is written again (another job, the
		// same names): the local copy of the first write has the right
		// name and a valid record, but not the remote file's header.
		l, remote, _, _ := localSetup(t, 1)
		if err := checkpoint.Delete(ctx, remote, checkpoint.CheckpointName(1)); err != nil {
			t.Fatal(err)
		}
		tr, states := trackedModel(t, 1)
		incOps(t, rand.New(rand.NewPCG(8, 8)), states, 200)
		want := holds(t, tr)
		checkpointtest.Checkpoint(t, remote, tr, 1)
		restoreThrough(t, l.Storage(remote), 1, want)
		if st := l.Stats(); st.Rejected != 1 || st.Hits != 0 {
			t.Errorf("stats %+v, want the stale copy rejected", st)
		}
	})

	t.Run("remote lost", func(t *testing.T) {
		l, remote, _, _ := localSetup(t, 1)
		if err := remote.Storage.Remove(ctx, checkpoint.CheckpointName(1), "instance-0.sgc"); err != nil {
			t.Fatal(err)
		}
		_, err := l.Storage(remote).Open(ctx, checkpoint.CheckpointName(1), "instance-0.sgc")
		if !errors.Is(err, checkpoint.ErrNotFound) {
			t.Errorf("Open of a file the remote storage lost = %v, want ErrNotFound", err)
		}
	})
}

// TestLocalCopyFullDisk: a local disk that fills up costs the local copy,
// never the checkpoint: the remote write commits, Stats names the
// failure, and a restore reads the remote file.
func TestLocalCopyFullDisk(t *testing.T) {
	local := faultstorage.New(checkpoint.NewMem(), 1, faultstorage.Rule{Op: faultstorage.OpWrite, Short: true, Cause: syscall.ENOSPC})
	l, err := checkpoint.NewLocalCopy(local)
	if err != nil {
		t.Fatal(err)
	}
	remote := checkpoint.NewMem()
	tr, states := trackedModel(t, 4)
	incOps(t, rand.New(rand.NewPCG(1, 2)), states, 200)
	want := holds(t, tr)
	checkpointtest.Checkpoint(t, l.Storage(remote), tr, 1)
	st := l.Stats()
	if st.WriteErrors != 1 || !errors.Is(st.LastWriteError, syscall.ENOSPC) {
		t.Errorf("stats %+v, want one local write error, ENOSPC", st)
	}
	restoreThrough(t, l.Storage(remote), 1, want)
	if st := l.Stats(); st.Misses != 1 || st.Hits != 0 {
		t.Errorf("stats %+v, want the file read remotely", st)
	}
}

// TestLocalCopyLateRetain: the Retain of a checkpoint that comes after the
// Retain of a later one does nothing — also when that later one, written
// in full, dropped the earlier one's files and their record. (A late
// Retain took such a checkpoint for the newest and trimmed the later
// one's files: the driver's local-recovery test found them missing under
// load.)
func TestLocalCopyLateRetain(t *testing.T) {
	l, err := checkpoint.NewLocalCopy(checkpoint.NewMem())
	if err != nil {
		t.Fatal(err)
	}
	s := l.Storage(checkpoint.NewMem())
	rng := rand.New(rand.NewPCG(5, 6))
	tr, states := trackedModel(t, 4)
	var iss []checkpoint.InstanceSnapshot
	for i := 1; i <= 2; i++ {
		incOps(t, rng, states, 50)
		iss = append(iss, checkpointtest.Checkpoint(t, s, tr, uint64(i)))
	}
	c1, c2 := checkpoint.CheckpointName(1), checkpoint.CheckpointName(2)
	if len(iss[1].Base) != 1 {
		t.Fatalf("checkpoint 2 references %d files, want checkpoint 1's", len(iss[1].Base))
	}
	// Checkpoint 2 as if written in full: its Retain drops checkpoint 1.
	full := iss[1]
	full.Base = nil
	if err := l.Retain(ctx, c2, full); err != nil {
		t.Fatal(err)
	}
	if err := l.Retain(ctx, c1, iss[0]); err != nil {
		t.Fatal(err)
	}
	all, err := l.Local().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(all, []string{c2}) {
		t.Fatalf("after a late Retain of %s the local copy holds %v, want only %s", c1, all, c2)
	}
	if objs, err := l.Local().Objects(ctx, c2); err != nil || len(objs) == 0 {
		t.Fatalf("the late Retain of %s trimmed %s: %v, %v", c1, c2, objs, err)
	}
}
