package checkpoint_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
)

// The golden checkpoints: goldenView in two instances of 20-byte blocks,
// committed as checkpoint 7 of operator "op", by this package's writer
// (testdata/v3-checkpoint, with the file tags pinned), and by the version-2
// and version-1 writers (testdata/v2-checkpoint, testdata/v1-checkpoint,
// which no test rewrites: they are what a user's existing checkpoints look
// like).
var (
	goldenCheckpoint = checkpoint.CheckpointName(7)
	goldenFiles      = []string{"op-0-of-2.sgc", "op-1-of-2.sgc"}
	goldenTags       = []uint32{goldenTag, 0x0c11f3a9}
)

// writeGoldenCheckpoint writes the golden checkpoint of this version into s.
func writeGoldenCheckpoint(t *testing.T, s checkpoint.Storage) {
	t.Helper()
	v := goldenView(runtime.FullRange(4))
	var snaps []checkpoint.InstanceSnapshot
	for i, name := range goldenFiles {
		kgs, err := runtime.KeyGroupRangeForOperator(4, 2, i)
		if err != nil {
			t.Fatal(err)
		}
		opts := &checkpoint.WriterOptions{BlockSize: 20, Concurrency: 1}
		checkpoint.SetFileTag(opts, goldenTags[i])
		snap, err := checkpoint.WriteInstance(ctx, s, goldenCheckpoint, name, v.restrict(kgs), opts)
		if err != nil {
			t.Fatal(err)
		}
		snap.OperatorState = []byte("offsets of " + string(rune('0'+i)))
		snaps = append(snaps, snap)
	}
	op, err := checkpoint.NewOperator("op", snaps...)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Commit(ctx, s, goldenCheckpoint, &checkpoint.Metadata{CheckpointID: 1, Operators: []checkpoint.Operator{op}}); err != nil {
		t.Fatal(err)
	}
}

// TestGoldenCheckpointV3 pins the version-3 checkpoint, metadata included:
// the writer must keep producing these exact objects, and they must keep
// restoring. Run with -update only when the format version changes.
func TestGoldenCheckpointV3(t *testing.T) {
	s := checkpoint.NewMem()
	writeGoldenCheckpoint(t, s)
	dir := filepath.Join("testdata", "v3-checkpoint", goldenCheckpoint)
	for _, name := range append([]string{checkpoint.MetadataName}, goldenFiles...) {
		checkGolden(t, filepath.Join(dir, name), readObject(t, s, goldenCheckpoint, name))
	}
	m := checkGoldenCheckpoint(t, "v3-checkpoint", 3)
	for i, in := range m.Operators[0].Instances {
		if in.File.Tag != goldenTags[i] {
			t.Errorf("instance %d: tag %08x in the metadata, want %08x", i, in.File.Tag, goldenTags[i])
		}
	}
	meta, err := os.ReadFile(filepath.Join(dir, checkpoint.MetadataName))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"formatVersion": 3,`, `"tag": "9f3a0c11"`, `"tag": "0c11f3a9"`} {
		if !bytes.Contains(meta, []byte(want)) {
			t.Errorf("the golden metadata does not contain %s:\n%s", want, meta)
		}
	}
}

// TestGoldenCheckpointV2 keeps a checkpoint of the version-2 writer
// restorable: tags, but no schemas.
func TestGoldenCheckpointV2(t *testing.T) {
	m := checkGoldenCheckpoint(t, "v2-checkpoint", 2)
	for i, in := range m.Operators[0].Instances {
		if in.File.Tag != goldenTags[i] {
			t.Errorf("instance %d: tag %08x in the metadata, want %08x", i, in.File.Tag, goldenTags[i])
		}
	}
}

// TestGoldenCheckpointV1 keeps a checkpoint of the version-1 writer
// restorable: its metadata has no tags, its files' tag words are zero.
func TestGoldenCheckpointV1(t *testing.T) {
	m := checkGoldenCheckpoint(t, "v1-checkpoint", 1)
	for i, in := range m.Operators[0].Instances {
		if in.File.Tag != 0 {
			t.Errorf("instance %d of a version-1 checkpoint has tag %08x", i, in.File.Tag)
		}
	}
}

// checkGoldenCheckpoint opens the golden checkpoint in testdata/root,
// checks its format version, verifies it, and restores it at every
// parallelism that divides its key groups evenly or not, comparing the
// stores with goldenView. It returns the metadata.
func checkGoldenCheckpoint(t *testing.T, root string, version int) *checkpoint.Metadata {
	t.Helper()
	d, err := checkpoint.NewDir(filepath.Join("testdata", root))
	if err != nil {
		t.Fatal(err)
	}
	r, err := checkpoint.Open(ctx, d, goldenCheckpoint)
	if err != nil {
		t.Fatal(err)
	}
	m := r.Metadata()
	if m.FormatVersion != version {
		t.Errorf("%s: format version %d, want %d", root, m.FormatVersion, version)
	}
	if err := r.Verify(ctx); err != nil {
		t.Errorf("%s: Verify: %v", root, err)
	}
	v := goldenView(runtime.FullRange(4))
	for p := 1; p <= 4; p++ {
		for i := range p {
			store := newModel(t, 4, p, i)
			if _, err := checkpoint.Restore(ctx, d, goldenCheckpoint, "op", i, p, store, nil); err != nil {
				t.Fatalf("%s: restore of instance %d of %d: %v", root, i, p, err)
			}
			want := contents(t, v.restrict(store.Config().KeyGroups))
			if diff := cmp.Diff(want, snapshotContents(t, store)); diff != "" {
				t.Errorf("%s: instance %d of %d restored other contents (-want +got):\n%s", root, i, p, diff)
			}
		}
	}
	return m
}

// copyCheckpoint copies a golden checkpoint from testdata/root into s.
func copyCheckpoint(t *testing.T, s checkpoint.Storage, root string) {
	t.Helper()
	for _, name := range append([]string{checkpoint.MetadataName}, goldenFiles...) {
		data, err := os.ReadFile(filepath.Join("testdata", root, goldenCheckpoint, name))
		if err != nil {
			t.Fatal(err)
		}
		put(t, s, goldenCheckpoint, name, data)
	}
}

// A metadata object of one version naming a file of the other — which can
// only be a file of another checkpoint — fails a restore, naming the file
// and both versions, before any entry is read.
func TestFormatVersionOfFileAndMetadataDisagree(t *testing.T) {
	cases := []struct {
		name           string
		ckpt, fileFrom string
		fileV, metaV   string
	}{
		{"version-1 metadata, version-2 file", "v1-checkpoint", "v2-checkpoint", "version 2", "version 1"},
		{"version-2 metadata, version-1 file", "v2-checkpoint", "v1-checkpoint", "version 1", "version 2"},
		{"version-3 metadata, version-2 file", "v3-checkpoint", "v2-checkpoint", "version 2", "version 3"},
		{"version-2 metadata, version-3 file", "v2-checkpoint", "v3-checkpoint", "version 3", "version 2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := checkpoint.NewMem()
			copyCheckpoint(t, s, tc.ckpt)
			other, err := os.ReadFile(filepath.Join("testdata", tc.fileFrom, goldenCheckpoint, goldenFiles[1]))
			if err != nil {
				t.Fatal(err)
			}
			replaceObject(t, s, goldenCheckpoint, goldenFiles[1], func(old []byte) []byte {
				if len(old) != len(other) {
					t.Fatalf("the files have %d and %d bytes: the case tests the size check, not the version", len(old), len(other))
				}
				return other
			})
			store := newModel(t, 4, 2, 1)
			_, err = checkpoint.Restore(ctx, s, goldenCheckpoint, "op", 1, 2, store, nil)
			path := goldenCheckpoint + "/" + goldenFiles[1]
			var fe *checkpoint.FileError
			if !errors.As(err, &fe) || !errors.Is(err, checkpoint.ErrCorrupt) || fe.Path != path || fe.Field != "operators[0].instances[1].file" {
				t.Fatalf("Restore = %v, want a *FileError on %s, field operators[0].instances[1].file, wrapping ErrCorrupt", err, path)
			}
			msg := err.Error()
			if !strings.Contains(msg, "file is format "+tc.fileV) || !strings.Contains(msg, "metadata "+tc.metaV) || !strings.Contains(msg, "another checkpoint") {
				t.Errorf("error %q does not name both versions and say the file belongs to another checkpoint", msg)
			}
			if n := snapshotContents(t, store); len(n.States) != 0 {
				t.Errorf("the store changed before the file was checked: %v", n)
			}
		})
	}
}

// checkGolden compares got, what the writer produced, with the golden file
// at path, which -update first rewrites with got, and returns the file's
// bytes.
func checkGolden(t *testing.T, path string, got []byte) []byte {
	t.Helper()
	if *checkpoint.UpdateTestdata {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the writer's bytes differ from %s: the format changed\ngot  %q\nwant %q", path, got, want)
	}
	return want
}
