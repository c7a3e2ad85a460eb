package checkpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A Commit whose directory cannot be made durable fails and leaves nothing
// visible, as the ObjectWriter contract says: the object it had published
// is taken back, and neither Stat nor a directory listing sees it.
func TestDirCommitFailingDirectorySyncLeavesNothingVisible(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	d, err := NewDir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer func(orig func(string) error) { syncDirHook = orig }(syncDirHook)
	syncDirHook = func(string) error { return syscall.EIO }

	w, err := d.Create(ctx, "chk-1", "data")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("bytes")); err != nil {
		t.Fatal(err)
	}
	err = w.Commit()
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("Commit with a failing directory sync = %v, want EIO", err)
	}
	if _, err := d.Stat(ctx, "chk-1", "data"); err == nil {
		t.Fatal("the object of a failed Commit is visible")
	}
	entries, err := os.ReadDir(filepath.Join(root, "chk-1"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("a failed Commit left %s behind", e.Name())
	}

	// With the directory durable again, the same name commits.
	syncDirHook = syncDir
	w, err = d.Create(ctx, "chk-1", "data")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("bytes")); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if info, err := d.Stat(ctx, "chk-1", "data"); err != nil || info.Size != 5 {
		t.Fatalf("Stat after a good Commit = %+v, %v", info, err)
	}
}
