package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/checkpoint/checkpointtest"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

// incrementalCheckpoints writes three checkpoints of a tracked store into
// a new directory: a full one and two of changes over it, and returns the
// directory.
func incrementalCheckpoints(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s, err := checkpoint.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := storetest.NewModel(runtime.StoreConfig{MaxParallelism: 8})
	if err != nil {
		t.Fatal(err)
	}
	tr, states := checkpointtest.Track(t, inner, nil, runtime.StateSpec{Name: "count", Kind: runtime.KindValue, Fingerprint: "f"})
	st := states[0]
	for i := 1; i <= 3; i++ {
		n := 1000
		if i > 1 {
			n = 10
		}
		for k := range n {
			key := binary.BigEndian.AppendUint64(nil, uint64(k))
			if err := st.(runtime.ValueState).Put(runtime.MakeKey(key, nil, 8), fmt.Appendf(nil, "value %d of round %d", k, i)); err != nil {
				t.Fatal(err)
			}
		}
		checkpointtest.Checkpoint(t, s, tr, uint64(i))
	}
	return dir
}

// TestCheckpointCommandsShowChains: ls shows an incremental checkpoint's
// own size beside its full size, inspect lists the files it owns and
// those it references, and verify checks the whole chain, naming the
// referencing checkpoint when a referenced file is damaged.
func TestCheckpointCommandsShowChains(t *testing.T) {
	dir := incrementalCheckpoints(t)
	c1, c3 := checkpoint.CheckpointName(1), checkpoint.CheckpointName(3)
	var ls jsonLs
	runJSON(t, exitOK, goldenLsFields, &ls, "checkpoint", "ls", "-json", dir)
	if len(ls.Checkpoints) != 3 {
		t.Fatalf("ls: %d checkpoints, want 3", len(ls.Checkpoints))
	}
	first, last := ls.Checkpoints[0], ls.Checkpoints[2]
	if first.SizeBytes != first.FullBytes || last.SizeBytes*10 > last.FullBytes || last.FullBytes <= first.FullBytes {
		t.Errorf("ls sizes: first %d of %d, last %d of %d; want the first full and the last a small part of its full size",
			first.SizeBytes, first.FullBytes, last.SizeBytes, last.FullBytes)
	}
	code, out, errs := runCmd("checkpoint", "ls", dir)
	if code != exitOK || !strings.Contains(out, "FULL") {
		t.Errorf("ls: exit %d, %s%s", code, out, errs)
	}
	var doc jsonInspect
	chainFields := slices.Clone(goldenInspectFields)
	for _, f := range []string{"checkpoint", "crc32c", "delta", "entries", "name", "size_bytes", "tag"} {
		chainFields = append(chainFields, "operators[].instances[].references[]."+f)
	}
	slices.Sort(chainFields)
	runJSON(t, exitOK, chainFields, &doc, "checkpoint", "inspect", "-json", filepath.Join(dir, c3))
	in := doc.Operators[0].Instances[0]
	if !in.File.Delta || len(in.References) != 2 || in.References[0].Checkpoint != c1 || in.References[0].Delta || !in.References[1].Delta {
		t.Errorf("inspect of %s: file %+v references %+v; want changes over chk 1 (full) and chk 2 (changes)", c3, in.File, in.References)
	}
	code, out, errs = runCmd("checkpoint", "inspect", filepath.Join(dir, c3))
	for _, want := range []string{"REFERENCES", c1, "changes", "full:", "incremental"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("inspect: exit %d, output lacks %q:\n%s%s", code, want, out, errs)
		}
	}
	if code, _, errs := runCmd("checkpoint", "verify", "-q", filepath.Join(dir, c3)); code != exitOK {
		t.Fatalf("verify of the intact chain: exit %d: %s", code, errs)
	}
	// Damage the full file the chain begins with: verify of the last
	// checkpoint names both.
	path := filepath.Join(dir, c1, "instance-0.sgc")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs = runCmd("checkpoint", "verify", "-q", filepath.Join(dir, c3))
	if code != exitError || !strings.Contains(errs, c1+"/instance-0.sgc") || !strings.Contains(errs, "referenced by checkpoint "+c3) {
		t.Errorf("verify of a chain with a damaged full file: exit %d, %s; want an error naming %s/instance-0.sgc and %s", code, errs, c1, c3)
	}
}
