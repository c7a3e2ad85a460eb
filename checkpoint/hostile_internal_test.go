package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

// recorder is a Storage that records every object and checkpoint its
// callers reach.
type recorder struct {
	Storage
	mu      sync.Mutex
	touched []string
}

func (r *recorder) note(op, ckpt, name string) {
	r.mu.Lock()
	r.touched = append(r.touched, op+" "+ckpt+"/"+name)
	r.mu.Unlock()
}

func (r *recorder) Open(ctx context.Context, ckpt, name string) (Object, error) {
	r.note("open", ckpt, name)
	return r.Storage.Open(ctx, ckpt, name)
}

func (r *recorder) Stat(ctx context.Context, ckpt, name string) (ObjectInfo, error) {
	r.note("stat", ckpt, name)
	return r.Storage.Stat(ctx, ckpt, name)
}

func (r *recorder) Objects(ctx context.Context, ckpt string) ([]ObjectInfo, error) {
	r.note("objects", ckpt, "")
	return r.Storage.Objects(ctx, ckpt)
}

func (r *recorder) Remove(ctx context.Context, ckpt, name string) error {
	r.note("remove", ckpt, name)
	return r.Storage.Remove(ctx, ckpt, name)
}

func (r *recorder) RemoveIncomplete(ctx context.Context, ckpt string) error {
	r.note("remove-incomplete", ckpt, "")
	return r.Storage.RemoveIncomplete(ctx, ckpt)
}

func (r *recorder) Delete(ctx context.Context, ckpt string) error {
	r.note("delete", ckpt, "")
	return r.Storage.Delete(ctx, ckpt)
}

// modelCheckpoint writes a committed checkpoint of one operator "op" at
// parallelism 2 from reference-model stores into s, and returns its
// metadata's JSON.
func modelCheckpoint(t *testing.T, s Storage, ckpt string, seed byte) []byte {
	t.Helper()
	ctx := context.Background()
	var snaps []InstanceSnapshot
	for i := range 2 {
		kgs, err := runtime.KeyGroupRangeForOperator(8, 2, i)
		if err != nil {
			t.Fatal(err)
		}
		m, err := storetest.NewModel(runtime.StoreConfig{MaxParallelism: 8, KeyGroups: kgs})
		if err != nil {
			t.Fatal(err)
		}
		st, err := m.Register(runtime.StateSpec{Name: "count", Kind: runtime.KindValue})
		if err != nil {
			t.Fatal(err)
		}
		for k := range 40 {
			key := runtime.MakeKey([]byte{byte(k)}, nil, 8)
			if kgs.Contains(key.Group()) {
				if err := st.(runtime.ValueState).Put(key, []byte{seed, byte(k)}); err != nil {
					t.Fatal(err)
				}
			}
		}
		snap, err := m.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		is, err := WriteInstance(ctx, s, ckpt, fmt.Sprintf("op-%d.sgc", i), snap, nil)
		snap.Release()
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, is)
	}
	op, err := NewOperator("op", snaps...)
	if err != nil {
		t.Fatal(err)
	}
	m := &Metadata{CheckpointID: uint64(seed), Operators: []Operator{op}}
	if err := Commit(ctx, s, ckpt, m); err != nil {
		t.Fatal(err)
	}
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// resign edits a metadata document and gives it a valid checksum, as a
// malicious writer would.
func resign(t *testing.T, data []byte, edit func(j *metadataJSON)) []byte {
	t.Helper()
	var j metadataJSON
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatal(err)
	}
	edit(&j)
	sum, err := j.checksum()
	if err != nil {
		t.Fatal(err)
	}
	j.Checksum = sum
	out, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Metadata naming paths outside its checkpoint — another checkpoint's
// file, a parent directory, an absolute path — is rejected by every reader
// (Open, and so Verify and Restore; Cleanup, which reads metadata to decide
// what to keep; driver-style listing) without any object outside the
// checkpoint being opened, statted or removed, even though a valid data
// file waits at the path named. Cleanup leaves the hostile checkpoint
// alone (it cannot tell what it holds) and the victim untouched.
func TestMetadataNamingPathsOutsideTheCheckpoint(t *testing.T) {
	ctx := context.Background()
	paths := []string{
		"../victim/op-0.sgc",
		"../../victim/op-0.sgc",
		"victim/../../victim/op-0.sgc",
		"/tmp/op-0.sgc",
		"..",
		".",
		`..\victim\op-0.sgc`,
		"op-0.sgc\x00../victim",
		".tmp-0-op-0.sgc",
		MetadataName,
	}
	for _, p := range paths {
		t.Run(fmt.Sprintf("%q", p), func(t *testing.T) {
			dir, err := NewDir(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			modelCheckpoint(t, dir, "victim", 1)
			good := modelCheckpoint(t, dir, "chk", 2)
			// The hostile metadata names the victim's file, which is a
			// valid data file of the same shape: a reader that followed
			// the path would read it without complaint.
			bad := resign(t, good, func(j *metadataJSON) { j.Operators[0].Instances[0].File.Name = p })
			if err := os.WriteFile(filepath.Join(dir.Root(), "chk", MetadataName), bad, 0o644); err != nil {
				t.Fatal(err)
			}
			victimFiles := listFiles(t, filepath.Join(dir.Root(), "victim"))
			rec := &recorder{Storage: dir}
			checkErr := func(what string, err error) {
				t.Helper()
				var fe *FileError
				if !errors.As(err, &fe) || !errors.Is(err, ErrCorrupt) || fe.Field != "operators[0].instances[0].file.name" {
					t.Fatalf("%s: %v, want a *FileError on operators[0].instances[0].file.name", what, err)
				}
				if fe.Path != "chk/"+MetadataName {
					t.Fatalf("%s: the error blames %q", what, fe.Path)
				}
			}
			_, err = Open(ctx, rec, "chk")
			checkErr("Open", err)
			store, err := storetest.NewModel(runtime.StoreConfig{MaxParallelism: 8, KeyGroups: runtime.FullRange(8)})
			if err != nil {
				t.Fatal(err)
			}
			_, err = Restore(ctx, rec, "chk", "op", 0, 1, store, nil)
			checkErr("Restore", err)
			removed, err := Cleanup(ctx, rec, nil)
			checkErr("Cleanup", err)
			if len(removed) > 0 {
				t.Errorf("Cleanup removed %q", removed)
			}
			for _, touched := range rec.touched {
				if !strings.HasPrefix(touched, "open chk/"+MetadataName) && !strings.HasPrefix(touched, "stat chk/"+MetadataName) &&
					!strings.HasPrefix(touched, "remove-incomplete chk/") && !strings.Contains(touched, " victim/") {
					t.Errorf("a reader of the hostile checkpoint reached %s", touched)
				}
				if strings.Contains(touched, " victim/") && !strings.HasPrefix(touched, "stat victim/"+MetadataName) &&
					!strings.HasPrefix(touched, "open victim/"+MetadataName) && !strings.HasPrefix(touched, "objects victim/") &&
					!strings.HasPrefix(touched, "remove-incomplete victim/") {
					t.Errorf("the victim was reached: %s", touched)
				}
			}
			if got := listFiles(t, filepath.Join(dir.Root(), "victim")); !slices.Equal(got, victimFiles) {
				t.Errorf("the victim's files changed: %q, were %q", got, victimFiles)
			}
			// Only Cleanup's own pass over the victim, as a committed
			// checkpoint of the storage, reached it: it is intact.
			r, err := Open(ctx, dir, "victim")
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Verify(ctx); err != nil {
				t.Fatalf("the victim no longer verifies: %v", err)
			}
		})
	}
	// A checkpoint name that is a path is refused before any storage call.
	rec := &recorder{Storage: NewMem()}
	for _, name := range []string{"../victim", "/etc", "a/b", ".."} {
		if _, err := Open(ctx, rec, name); !errors.Is(err, ErrInvalidName) {
			t.Errorf("Open(%q) = %v, want ErrInvalidName", name, err)
		}
		if err := Delete(ctx, rec, name); !errors.Is(err, ErrInvalidName) {
			t.Errorf("Delete(%q) = %v, want ErrInvalidName", name, err)
		}
	}
	if len(rec.touched) > 0 {
		t.Errorf("invalid checkpoint names reached the storage: %q", rec.touched)
	}
}

func listFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Duplicate names in the metadata — a state described twice, an instance
// listing a state twice, two instances sharing a file, an operator twice
// — are rejected with the field at fault, whatever else is consistent.
func TestMetadataWithDuplicateNames(t *testing.T) {
	dir := NewMem()
	good := modelCheckpoint(t, dir, "chk", 1)
	cases := []struct {
		name  string
		edit  func(j *metadataJSON)
		field string
	}{
		{"state described twice", func(j *metadataJSON) {
			j.Operators[0].States = append(j.Operators[0].States, j.Operators[0].States[0])
		}, "operators[0].states[1].name"},
		{"state described twice with another kind", func(j *metadataJSON) {
			s := j.Operators[0].States[0]
			s.Kind = "list"
			j.Operators[0].States = append(j.Operators[0].States, s)
		}, "operators[0].states[1].name"},
		{"instance lists a state twice", func(j *metadataJSON) {
			in := &j.Operators[0].Instances[1]
			in.States = append(in.States, in.States[0])
		}, "operators[0].instances[1].states[1]"},
		{"two instances share a file", func(j *metadataJSON) {
			j.Operators[0].Instances[1].File = j.Operators[0].Instances[0].File
		}, "operators[0].instances[1].file.name"},
		{"operator twice", func(j *metadataJSON) {
			j.Operators = append(j.Operators, j.Operators[0])
		}, "operators[1].id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseMetadata("chk/"+MetadataName, resign(t, good, tc.edit))
			var fe *FileError
			if !errors.As(err, &fe) || !errors.Is(err, ErrCorrupt) || fe.Field != tc.field {
				t.Fatalf("ParseMetadata = %v, want a *FileError on %s", err, tc.field)
			}
		})
	}
}
