package checkpoint_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/checkpoint/storagetest"
	"github.com/stategen/stategen/runtime"
)

func TestDirStorage(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) checkpoint.Storage {
		d, err := checkpoint.NewDir(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return d
	})
}

func TestMemStorage(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) checkpoint.Storage { return checkpoint.NewMem() })
}

// TestDirCleanupRemovesCrashDebris plants what a killed process leaves in a
// directory — a temporary file, a checkpoint directory without metadata, a
// stray directory — and checks that Cleanup removes it and nothing else.
func TestDirCleanupRemovesCrashDebris(t *testing.T) {
	root := t.TempDir()
	d, err := checkpoint.NewDir(root)
	if err != nil {
		t.Fatal(err)
	}
	v := genView(40, 4, runtime.FullRange(4), 20, 0)
	writeCheckpoint(t, d, "chk-1", v, 2, nil)
	writeCheckpoint(t, d, "chk-2", v, 1, nil)
	mustWrite := func(path string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("debris"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A temporary file in a committed checkpoint, killed mid-write.
	mustWrite(filepath.Join(root, "chk-1", ".tmp-0123456789abcdef-op-9.sgc"))
	// A checkpoint whose coordinator died before committing.
	mustWrite(filepath.Join(root, "chk-3", "op-0-of-1.sgc"))
	mustWrite(filepath.Join(root, "chk-3", ".tmp-00-_metadata"))
	// A checkpoint being deleted when the process died: metadata gone.
	writeCheckpoint(t, d, "chk-4", v, 1, nil)
	if err := os.Remove(filepath.Join(root, "chk-4", checkpoint.MetadataName)); err != nil {
		t.Fatal(err)
	}
	// Something that is not a checkpoint at all is left alone.
	mustWrite(filepath.Join(root, ".trash", "x"))

	removed, err := checkpoint.Cleanup(ctx, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	if want := []string{"chk-3", "chk-4"}; !slices.Equal(removed, want) {
		t.Errorf("Cleanup removed %q, want %q", removed, want)
	}
	for _, gone := range []string{"chk-1/.tmp-0123456789abcdef-op-9.sgc", "chk-3", "chk-4"} {
		if _, err := os.Lstat(filepath.Join(root, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s survived Cleanup", gone)
		}
	}
	if _, err := os.Lstat(filepath.Join(root, ".trash", "x")); err != nil {
		t.Errorf("Cleanup touched a directory that is not a checkpoint: %v", err)
	}
	for _, c := range []string{"chk-1", "chk-2"} {
		r, err := checkpoint.Open(ctx, d, c)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Verify(ctx); err != nil {
			t.Errorf("%s after Cleanup: %v", c, err)
		}
	}
}

// TestDirLeavesNoTemporaryFiles checks the directory after committed,
// aborted and failed writes.
func TestDirLeavesNoTemporaryFiles(t *testing.T) {
	root := t.TempDir()
	d, err := checkpoint.NewDir(root)
	if err != nil {
		t.Fatal(err)
	}
	v := genView(41, 4, runtime.FullRange(4), 20, 0)
	writeCheckpoint(t, d, "chk-1", v, 2, nil)
	w, err := d.Create(ctx, "chk-1", "aborted")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("x"))
	w.Abort()
	bad := genView(41, 4, runtime.FullRange(4), 20, 0)
	bad.specs = []runtime.StateSpec{testSpecs[1], testSpecs[0]}
	if _, err := checkpoint.WriteInstance(ctx, d, "chk-1", "failed", bad, nil); err == nil {
		t.Fatal("WriteInstance of an invalid view succeeded")
	}
	ents, err := os.ReadDir(filepath.Join(root, "chk-1"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := []string{"_metadata", "op-0-of-2.sgc", "op-1-of-2.sgc"}; !slices.Equal(names, want) {
		t.Errorf("chk-1 holds %q, want %q", names, want)
	}
}

func TestCheckpointNames(t *testing.T) {
	for _, id := range []uint64{0, 1, 42, 1<<64 - 1} {
		name := checkpoint.CheckpointName(id)
		if got, ok := checkpoint.ParseCheckpointName(name); !ok || got != id {
			t.Errorf("ParseCheckpointName(%q) = %d, %v", name, got, ok)
		}
		if err := checkpoint.ValidateName(name); err != nil {
			t.Error(err)
		}
	}
	if checkpoint.CheckpointName(9) >= checkpoint.CheckpointName(10) {
		t.Errorf("names do not sort like ids")
	}
	for _, bad := range []string{"chk-1", "savepoint-1", "chk-0000000000000000000x", "chk-99999999999999999999"} {
		if _, ok := checkpoint.ParseCheckpointName(bad); ok {
			t.Errorf("ParseCheckpointName(%q) accepted it", bad)
		}
	}
}

func TestDeleteNeedsAValidName(t *testing.T) {
	if err := checkpoint.Delete(ctx, checkpoint.NewMem(), "../x"); !errors.Is(err, checkpoint.ErrInvalidName) {
		t.Errorf("Delete(../x) = %v", err)
	}
	if _, err := checkpoint.NewOperator("a/b"); !errors.Is(err, checkpoint.ErrInvalidName) {
		t.Errorf("NewOperator(a/b) = %v", err)
	}
	if _, err := checkpoint.WriteInstance(ctx, checkpoint.NewMem(), "c", checkpoint.MetadataName, genView(1, 1, runtime.FullRange(1), 1, 0), nil); !errors.Is(err, checkpoint.ErrInvalidName) {
		t.Errorf("WriteInstance named _metadata = %v", err)
	}
	if !strings.Contains(checkpoint.CheckpointName(3), "3") {
		t.Error("CheckpointName lost the id")
	}
}

// TestCleanupLeavesCoordinatorNameAlone: the coordinator's reserved
// checkpoint name holds objects without metadata (its durable id counter);
// Cleanup, which removes every other checkpoint without metadata, must
// leave it alone, on every Storage, and List must not show it.
func TestCleanupLeavesCoordinatorNameAlone(t *testing.T) {
	dir, err := checkpoint.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]checkpoint.Storage{"dir": dir, "mem": checkpoint.NewMem()} {
		t.Run(name, func(t *testing.T) {
			for _, ckpt := range []string{checkpoint.CoordinatorName, "chk-9"} {
				w, err := s.Create(ctx, ckpt, "next-id-7")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := w.Write([]byte("7\n")); err != nil {
					t.Fatal(err)
				}
				if err := w.Commit(); err != nil {
					t.Fatal(err)
				}
			}
			removed, err := checkpoint.Cleanup(ctx, s, nil)
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{"chk-9"}; !slices.Equal(removed, want) {
				t.Errorf("Cleanup removed %q, want %q", removed, want)
			}
			objs, err := s.Objects(ctx, checkpoint.CoordinatorName)
			if err != nil || len(objs) != 1 || objs[0].Name != "next-id-7" {
				t.Errorf("objects of %s after Cleanup: %v, %v", checkpoint.CoordinatorName, objs, err)
			}
			if names, err := checkpoint.List(ctx, s); err != nil || len(names) != 0 {
				t.Errorf("List = %q, %v; want nothing", names, err)
			}
		})
	}
}
