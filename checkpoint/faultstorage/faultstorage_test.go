package faultstorage_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/checkpoint/faultstorage"
	"github.com/stategen/stategen/checkpoint/storagetest"
)

var ctx = context.Background()

// Without rules the wrapper is transparent: it passes the conformance tests
// over both implementations.
func TestConformanceWithoutFaults(t *testing.T) {
	t.Run("Mem", func(t *testing.T) {
		storagetest.Run(t, func(t *testing.T) checkpoint.Storage {
			return faultstorage.New(checkpoint.NewMem(), 1)
		})
	})
	t.Run("Dir", func(t *testing.T) {
		storagetest.Run(t, func(t *testing.T) checkpoint.Storage {
			d, err := checkpoint.NewDir(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return faultstorage.New(d, 1)
		})
	})
	// Rules that select nothing, or have not started failing yet, change
	// nothing either.
	t.Run("IdleRules", func(t *testing.T) {
		storagetest.Run(t, func(t *testing.T) checkpoint.Storage {
			var rules []faultstorage.Rule
			for _, op := range faultstorage.Ops() {
				rules = append(rules,
					faultstorage.Rule{Op: op, Match: faultstorage.MatchCheckpoint("never-used")},
					faultstorage.Rule{Op: op, After: 1 << 40})
			}
			return faultstorage.New(checkpoint.NewMem(), 1, rules...)
		})
	})
}

func newDir(t *testing.T) *checkpoint.Dir {
	t.Helper()
	d, err := checkpoint.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// files lists every file under root, relative to it.
func files(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(root, path)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func put(s checkpoint.Storage, ckpt, name string, data []byte) error {
	w, err := s.Create(ctx, ckpt, name)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		_ = w.Abort()
		return err
	}
	return w.Commit()
}

// wantFault checks that err is an injected fault of op on ckpt/object with
// cause, and that its message names all of them.
func wantFault(t *testing.T, err error, op faultstorage.Op, ckpt, object string, cause error) *faultstorage.Error {
	t.Helper()
	var f *faultstorage.Error
	if !errors.As(err, &f) {
		t.Fatalf("error %v (%T) is not an injected fault", err, err)
	}
	if !errors.Is(err, faultstorage.ErrInjected) || !errors.Is(err, cause) {
		t.Fatalf("error %q does not match ErrInjected and %v", err, cause)
	}
	if f.Op != op || f.Checkpoint != ckpt || f.Object != object {
		t.Fatalf("fault %+v, want %v on %s/%s", f, op, ckpt, object)
	}
	for _, s := range []string{op.String(), ckpt, object, cause.Error()} {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("error %q does not name %q", err, s)
		}
	}
	return f
}

// Every operation fails when a rule says so, with an error naming it, and
// leaves the wrapped Dir as the real failure would: nothing created,
// nothing published, nothing removed, no temporary file behind.
func TestEveryOperationFails(t *testing.T) {
	data := []byte("0123456789abcdef")
	for _, op := range faultstorage.Ops() {
		t.Run(op.String(), func(t *testing.T) {
			d := newDir(t)
			s := faultstorage.New(d, 1)
			if err := put(s, "c", "old", data); err != nil {
				t.Fatal(err)
			}
			before := files(t, d.Root())
			s.SetRules(faultstorage.Rule{Op: op})
			var err error
			object := "new"
			switch op {
			case faultstorage.OpCreate, faultstorage.OpWrite, faultstorage.OpSync, faultstorage.OpRename:
				err = put(s, "c", "new", data)
			case faultstorage.OpOpen:
				_, err = s.Open(ctx, "c", "old")
				object = "old"
			case faultstorage.OpRead:
				var o checkpoint.Object
				if o, err = s.Open(ctx, "c", "old"); err != nil {
					t.Fatal(err)
				}
				_, err = o.ReadAt(make([]byte, 4), 0)
				o.Close()
				object = "old"
			case faultstorage.OpStat:
				_, err = s.Stat(ctx, "c", "old")
				object = "old"
			case faultstorage.OpList:
				_, err = s.List(ctx)
				wantFault(t, err, op, "", "", syscall.EIO)
				return
			case faultstorage.OpObjects:
				_, err = s.Objects(ctx, "c")
				object = ""
			case faultstorage.OpRemove:
				err = s.Remove(ctx, "c", "old")
				object = "old"
			case faultstorage.OpRemoveIncomplete:
				err = s.RemoveIncomplete(ctx, "c")
				object = ""
			case faultstorage.OpDelete:
				err = s.Delete(ctx, "c")
				object = ""
			}
			wantFault(t, err, op, "c", object, syscall.EIO)
			if after := files(t, d.Root()); !slicesEqual(before, after) {
				t.Errorf("files before the fault %q, after %q", before, after)
			}
			if got := s.Injected(); got[op.String()] != 1 || s.Total() != 1 {
				t.Errorf("injected %v, want one %v", got, op)
			}
			// Healed, the operation goes through.
			s.Heal()
			if op <= faultstorage.OpRename {
				if err := put(s, "c", "new", data); err != nil {
					t.Fatalf("after healing: %v", err)
				}
			}
		})
	}
}

func slicesEqual(a, b []string) bool { return strings.Join(a, "\x00") == strings.Join(b, "\x00") }

// A short write writes half its bytes and fails with the rule's cause —
// ENOSPC, which errors.Is sees through the checkpoint's own wrapping; the
// aborted object leaves nothing.
func TestShortWriteWithENOSPC(t *testing.T) {
	mem := checkpoint.NewMem()
	d := newDir(t)
	for _, inner := range []checkpoint.Storage{mem, d} {
		s := faultstorage.New(inner, 1, faultstorage.Rule{Op: faultstorage.OpWrite, After: 1, Short: true, Cause: syscall.ENOSPC})
		w, err := s.Create(ctx, "c", "o")
		if err != nil {
			t.Fatal(err)
		}
		if n, err := w.Write([]byte("first")); n != 5 || err != nil {
			t.Fatalf("first write: %d, %v", n, err)
		}
		n, err := w.Write([]byte("0123456789"))
		f := wantFault(t, err, faultstorage.OpWrite, "c", "o", syscall.ENOSPC)
		if n != 5 || !f.Short || f.Kind() != "write-short-ENOSPC" || !strings.Contains(err.Error(), "short write") {
			t.Fatalf("short write: %d, %v (kind %s)", n, err, f.Kind())
		}
		if err := w.Abort(); err != nil {
			t.Fatal(err)
		}
		if objs, err := s.Objects(ctx, "c"); err != nil || len(objs) != 0 {
			t.Fatalf("objects after the aborted write: %v, %v", objs, err)
		}
		if got := s.Injected(); got["write-short-ENOSPC"] != 1 {
			t.Fatalf("injected %v", got)
		}
	}
	if left := files(t, d.Root()); len(left) != 0 {
		t.Errorf("files left in the directory: %q", left)
	}
}

// After, Times and Match select exactly the calls they say.
func TestRuleSelection(t *testing.T) {
	s := faultstorage.New(checkpoint.NewMem(), 1, faultstorage.Rule{
		Op: faultstorage.OpCreate, Match: faultstorage.MatchDataFiles, After: 2, Times: 3,
	})
	var failed []int
	for i := range 10 {
		if err := put(s, "c", "o"+string(rune('0'+i)), nil); err != nil {
			failed = append(failed, i)
		}
		if err := put(s, "c"+string(rune('0'+i)), checkpoint.MetadataName, nil); err != nil {
			t.Fatalf("metadata create %d failed: %v", i, err)
		}
	}
	if want := []int{2, 3, 4}; !intsEqual(failed, want) {
		t.Errorf("failed creates %v, want %v", failed, want)
	}
	if n := s.Calls(faultstorage.OpCreate); n != 20 {
		t.Errorf("%d create calls counted, want 20", n)
	}
}

func intsEqual(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A probabilistic rule fails about that fraction of the calls, and the same
// seed fails the same calls.
func TestProbabilityIsSeeded(t *testing.T) {
	run := func(seed uint64) []bool {
		s := faultstorage.New(checkpoint.NewMem(), seed, faultstorage.Rule{Op: faultstorage.OpStat, Probability: 0.25})
		out := make([]bool, 2000)
		for i := range out {
			_, err := s.Stat(ctx, "c", "o")
			out[i] = errors.Is(err, faultstorage.ErrInjected)
		}
		return out
	}
	a, b, c := run(7), run(7), run(8)
	n := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seed 7 failed call %d once and not the other time", i)
		}
		if a[i] {
			n++
		}
	}
	if n < 400 || n > 600 {
		t.Errorf("%d of 2000 calls failed with probability 0.25", n)
	}
	same := true
	for i := range a {
		same = same && a[i] == c[i]
	}
	if same {
		t.Error("seeds 7 and 8 failed the same calls")
	}
}

// A failed commit (sync or rename) leaves no object and no temporary file,
// and a retry under the same name succeeds.
func TestFailedCommitLeavesNothing(t *testing.T) {
	for _, op := range []faultstorage.Op{faultstorage.OpSync, faultstorage.OpRename} {
		d := newDir(t)
		s := faultstorage.New(d, 1, faultstorage.Rule{Op: op, Times: 1, Cause: syscall.ENOSPC})
		err := put(s, "c", "o", bytes.Repeat([]byte("x"), 1<<16))
		wantFault(t, err, op, "c", "o", syscall.ENOSPC)
		if _, err := os.Stat(filepath.Join(d.Root(), "c", "o")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%v: the object exists after a failed commit: %v", op, err)
		}
		if left := files(t, d.Root()); len(left) != 0 {
			t.Errorf("%v: files left: %q", op, left)
		}
		if err := put(s, "c", "o", []byte("x")); err != nil {
			t.Errorf("%v: retry: %v", op, err)
		}
	}
}
