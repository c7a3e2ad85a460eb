package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/checkpoint/inspect"
	"github.com/stategen/stategen/examples/clickstream/pipeline"
)

var (
	exampleOnce sync.Once
	exampleDir  string
	exampleErr  error
)

// exampleCheckpoints runs the clickstream example in-process, once, with
// small numbers, into a checkpoint directory it keeps, and returns the
// directory and the newest checkpoint's name.
func exampleCheckpoints(t *testing.T) (dir, latest string) {
	t.Helper()
	exampleOnce.Do(func() {
		exampleDir, exampleErr = os.MkdirTemp("", "stategen-checkpoint-test-")
		if exampleErr != nil {
			return
		}
		var rep *pipeline.Report
		rep, exampleErr = pipeline.Run(t.Context(), pipeline.Config{
			Events: 4000, Users: 200, Interval: 10 * time.Millisecond, Seed: 5,
			Dir: exampleDir,
		})
		if exampleErr == nil && !rep.Verified() {
			exampleErr = fmt.Errorf("example not verified: %v", rep.Differences)
		}
	})
	if exampleErr != nil {
		t.Fatal(exampleErr)
	}
	s, err := checkpoint.NewDir(exampleDir)
	if err != nil {
		t.Fatal(err)
	}
	names, err := checkpoint.List(t.Context(), s)
	if err != nil || len(names) == 0 {
		t.Fatalf("no checkpoint in %s: %v", exampleDir, err)
	}
	return exampleDir, names[len(names)-1]
}

func TestMain(m *testing.M) {
	code := m.Run()
	if exampleDir != "" {
		os.RemoveAll(exampleDir)
	}
	os.Exit(code)
}

// runCmd runs the command with args and returns its exit status and
// output.
func runCmd(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestCheckpointLsListsTheExampleCheckpoints(t *testing.T) {
	dir, latest := exampleCheckpoints(t)
	code, out, errs := runCmd("checkpoint", "ls", dir)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"ID", "PARALLELISM", latest, "user-stats", "windows", "page-views", "KiB"} {
		if !strings.Contains(out, want) {
			t.Errorf("ls output lacks %q:\n%s", want, out)
		}
	}
	// Every column is one field: a row splits on white space into as many
	// fields as the header (STATES, the last, lists names with commas).
	lines := strings.Split(strings.TrimSpace(out), "\n")
	header := len(strings.Fields(lines[0]))
	for _, l := range lines[1:] {
		if n := len(strings.Fields(l)); n != header {
			t.Errorf("ls row %q has %d fields, the header %d", l, n, header)
		}
	}
}

func TestCheckpointInspectShowsStatesRangesAndFiles(t *testing.T) {
	dir, latest := exampleCheckpoints(t)
	for _, arg := range []string{filepath.Join(dir, latest), filepath.Join(dir, idOf(t, latest))} {
		code, out, errs := runCmd("checkpoint", "inspect", arg)
		if code != exitOK {
			t.Fatalf("inspect %s: exit %d: %s", arg, code, errs)
		}
		for _, want := range []string{
			`operator "clickstream": maxParallelism 128`,
			"timeline    sortedmap  false", "windows     value      true", "v1:",
			"clickstream-0.sgc", "[0,", ",128)", "CRC32C", "TAG", "format:   version 3",
			"SCHEMAS", "user-stats: stategen/v1 value key=string value=struct{Events int64;",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("inspect %s lacks %q:\n%s", arg, want, out)
			}
		}
		// The instance table's rows split into the header's fields.
		lines := strings.Split(out, "\n")
		for i, l := range lines {
			if !strings.HasPrefix(strings.TrimSpace(l), "INSTANCE") {
				continue
			}
			header := len(strings.Fields(l))
			for _, row := range lines[i+1:] {
				if !strings.HasPrefix(row, "  ") || strings.HasPrefix(row, "  STATE") {
					break
				}
				if n := len(strings.Fields(row)); n != header {
					t.Errorf("inspect row %q has %d fields, the header %d", row, n, header)
				}
			}
		}
	}
}

func idOf(t *testing.T, name string) string {
	id, ok := checkpoint.ParseCheckpointName(name)
	if !ok {
		t.Fatalf("%s is not a checkpoint name", name)
	}
	return fmt.Sprint(id)
}

func TestCheckpointDumpWritesHexJSONLines(t *testing.T) {
	dir, latest := exampleCheckpoints(t)
	code, out, errs := runCmd("checkpoint", "dump", filepath.Join(dir, latest), "-state", "timeline")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 10 {
		t.Fatalf("only %d lines", len(lines))
	}
	var l struct {
		KeyGroup int    `json:"keyGroup"`
		Key      string `json:"key"`
		UserKey  string `json:"userKey"`
		Value    string `json:"value"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &l); err != nil {
		t.Fatal(err)
	}
	// Keys are encoded user names: "user-" in hex.
	if !strings.HasPrefix(l.Key, "757365722d") || l.UserKey == "" || l.Value == "" {
		t.Fatalf("first line %s", lines[0])
	}

	// The README's form: the flag after the positional argument, or before.
	code, out, errs = runCmd("checkpoint", "dump", "-state", "user-stats", filepath.Join(dir, latest))
	if code != exitOK || strings.Count(out, "\n") < 10 {
		t.Fatalf("dump user-stats: exit %d: %s", code, errs)
	}

	// The progress of a dump counts the entries written, of the state's
	// total from the index; its last report is the whole dump.
	c, err := inspect.Open(context.Background(), dir, latest)
	if err != nil {
		t.Fatal(err)
	}
	var last inspect.Progress
	n, err := c.DumpProgress(context.Background(), io.Discard, c.Metadata().Operators[0].ID, "timeline", nil, func(p inspect.Progress) { last = p })
	if err != nil || n == 0 || last.Entries != n || last.TotalEntries != n || last.BytesRead == 0 {
		t.Errorf("DumpProgress wrote %d entries (%v); its last progress %+v", n, err, last)
	}

	code, _, errs = runCmd("checkpoint", "dump", filepath.Join(dir, latest), "-state", "nope")
	if code != exitError || !strings.Contains(errs, `no state "nope"`) {
		t.Fatalf("unknown state: exit %d: %s", code, errs)
	}
	code, _, errs = runCmd("checkpoint", "dump", filepath.Join(dir, latest))
	if code != exitUsage || !strings.Contains(errs, "-state") {
		t.Fatalf("no -state: exit %d: %s", code, errs)
	}
}

func TestCheckpointVerifyPassesThenNamesTheCorruptFile(t *testing.T) {
	dir, latest := exampleCheckpoints(t)
	code, out, errs := runCmd("checkpoint", "verify", filepath.Join(dir, latest))
	if code != exitOK || !strings.Contains(out, "ok") {
		t.Fatalf("intact checkpoint: exit %d: %s%s", code, out, errs)
	}

	// A copy with one byte flipped in the middle of a data file.
	bad := t.TempDir()
	src := filepath.Join(dir, latest)
	dst := filepath.Join(bad, latest)
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(dst, "clickstream-1.sgc")
	data, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x40
	if err := os.WriteFile(victim, data, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs = runCmd("checkpoint", "verify", "-q", dst)
	if code != exitError {
		t.Fatalf("corrupt checkpoint: exit %d, want 1: %s", code, errs)
	}
	if !strings.Contains(errs, "clickstream-1.sgc") || !strings.Contains(errs, "FAULT") {
		t.Fatalf("the error does not name the file: %s", errs)
	}
	// It names the block, whose byte range holds the damaged byte.
	m := regexp.MustCompile(`block of bytes \[(\d+), (\d+)\): checksum mismatch`).FindStringSubmatch(errs)
	if m == nil {
		t.Fatalf("the error does not name the block: %s", errs)
	}
	lo, _ := strconv.Atoi(m[1])
	hi, _ := strconv.Atoi(m[2])
	if at := len(data) / 2; at < lo || at >= hi {
		t.Errorf("the damaged byte %d is outside the block [%d, %d) named: %s", at, lo, hi, errs)
	}
}

func TestCheckpointUsageErrors(t *testing.T) {
	dir, _ := exampleCheckpoints(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"checkpoint"}, exitUsage, "usage: stategen checkpoint"},
		{[]string{"checkpoint", "frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{[]string{"checkpoint", "ls"}, exitUsage, "want one argument"},
		{[]string{"checkpoint", "inspect", "a", "b"}, exitUsage, "want one argument"},
		{[]string{"checkpoint", "ls", filepath.Join(dir, "missing")}, exitError, "no such file"},
		{[]string{"checkpoint", "inspect", filepath.Join(dir, "999")}, exitError, "no committed metadata"},
	} {
		code, _, errs := runCmd(tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, errs, tc.code, tc.want)
		}
	}
}

// jsonPaths returns the set of field paths of a JSON document: "a.b",
// "a[].c" for the fields of array elements.
func jsonPaths(t *testing.T, doc string) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("not one JSON document: %v\n%s", err, doc)
	}
	set := map[string]bool{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				set[p] = true
				if k != "properties" { // the checkpoint's own keys
					walk(p, e)
				}
			}
		case []any:
			for _, e := range x {
				walk(prefix+"[]", e)
			}
		}
	}
	walk("", v)
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// The golden field paths of the -json documents: renaming or removing one
// breaks scripts, so it must break this test first.
var (
	goldenLsFields = []string{
		"checkpoints",
		"checkpoints[].full_bytes", "checkpoints[].id", "checkpoints[].name", "checkpoints[].operators",
		"checkpoints[].operators[].id", "checkpoints[].operators[].parallelism", "checkpoints[].size_bytes",
		"checkpoints[].states", "checkpoints[].time", "checkpoints[].type", "dir",
	}
	goldenInspectFields = []string{
		"data_files", "format_version", "full_bytes", "id", "name", "operators", "operators[].id",
		"operators[].instances", "operators[].instances[].file", "operators[].instances[].file.crc32c",
		"operators[].instances[].file.delta",
		"operators[].instances[].file.entries", "operators[].instances[].file.name",
		"operators[].instances[].file.size_bytes", "operators[].instances[].file.tag",
		"operators[].instances[].index", "operators[].instances[].key_groups",
		"operators[].instances[].key_groups.end", "operators[].instances[].key_groups.start",
		"operators[].instances[].operator_state_bytes", "operators[].instances[].references",
		"operators[].key_groups", "operators[].key_groups.end",
		"operators[].key_groups.start", "operators[].max_parallelism", "operators[].parallelism",
		"operators[].states", "operators[].states[].fingerprint", "operators[].states[].kind",
		"operators[].states[].name", "operators[].states[].schema", "operators[].states[].sub_keyed",
		"properties", "size_bytes", "time",
	}
	goldenVerifyFields      = []string{"data_files", "fault", "name", "ok", "seconds", "size_bytes"}
	goldenVerifyFaultFields = []string{"data_files", "fault", "fault.field", "fault.message", "fault.offset", "fault.path", "fault.reason", "name", "ok", "seconds", "size_bytes"}
)

// runJSON runs a -json command, wants exit status code, checks the
// document's field paths against golden and decodes it into doc.
func runJSON(t *testing.T, code int, golden []string, doc any, args ...string) {
	t.Helper()
	got, out, errs := runCmd(args...)
	if got != code {
		t.Fatalf("%s: exit %d, want %d: %s", strings.Join(args, " "), got, code, errs)
	}
	if paths := jsonPaths(t, out); !slices.Equal(paths, golden) {
		t.Errorf("%s fields:\n%q\nwant\n%q", strings.Join(args, " "), paths, golden)
	}
	if err := json.Unmarshal([]byte(out), doc); err != nil {
		t.Fatal(err)
	}
}

// TestCheckpointJSON: ls, inspect and verify -json write one document each
// with the golden field names; their numbers agree with each other and with
// the metadata; a damaged checkpoint's verify document names the block.
func TestCheckpointJSON(t *testing.T) {
	dir, latest := exampleCheckpoints(t)
	var ls jsonLs
	runJSON(t, exitOK, goldenLsFields, &ls, "checkpoint", "ls", "-json", dir)
	var entry *jsonCheckpoint
	for i := range ls.Checkpoints {
		if ls.Checkpoints[i].Name == latest {
			entry = &ls.Checkpoints[i]
		}
	}
	if entry == nil || entry.Type != "checkpoint" || entry.Time == nil || entry.SizeBytes <= 0 || len(entry.States) == 0 {
		t.Fatalf("ls -json lacks a sound entry for %s: %+v", latest, entry)
	}

	var in jsonInspect
	runJSON(t, exitOK, goldenInspectFields, &in, "checkpoint", "inspect", "-json", filepath.Join(dir, latest))
	var sum int64
	for _, op := range in.Operators {
		for _, i := range op.Instances {
			sum += i.File.SizeBytes
			if len(i.File.CRC32C) != 8 || len(i.File.Tag) != 8 {
				t.Errorf("instance %d: crc32c %q, tag %q, want eight hex digits", i.Index, i.File.CRC32C, i.File.Tag)
			}
		}
	}
	if in.ID != entry.ID || in.SizeBytes != entry.SizeBytes || sum != in.SizeBytes {
		t.Errorf("inspect -json: id %d, size %d (files sum to %d); ls says id %d, size %d", in.ID, in.SizeBytes, sum, entry.ID, entry.SizeBytes)
	}

	var v jsonVerify
	runJSON(t, exitOK, goldenVerifyFields, &v, "checkpoint", "verify", "-json", "-q", filepath.Join(dir, latest))
	if !v.OK || v.Fault != nil || v.SizeBytes != in.SizeBytes || v.DataFiles != in.DataFiles {
		t.Errorf("verify -json of an intact checkpoint: %+v", v)
	}

	// One byte damaged in the middle of a data file.
	bad := filepath.Join(t.TempDir(), latest)
	if err := os.CopyFS(bad, os.DirFS(filepath.Join(dir, latest))); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(bad, in.Operators[0].Instances[0].File.Name)
	data, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x40
	if err := os.WriteFile(victim, data, 0o644); err != nil {
		t.Fatal(err)
	}
	v = jsonVerify{}
	runJSON(t, exitError, goldenVerifyFaultFields, &v, "checkpoint", "verify", "-json", "-q", bad)
	if v.OK || v.Fault == nil || !strings.HasSuffix(v.Fault.Path, in.Operators[0].Instances[0].File.Name) ||
		v.Fault.Offset < 0 || v.Fault.Offset > int64(len(data)/2) || !strings.Contains(v.Fault.Reason, "block of bytes") {
		t.Errorf("verify -json of a damaged checkpoint: %+v", v.Fault)
	}
}

// TestProgressLine: the progress of long work says what is done, of what,
// the rate and the time left; it goes to terminals only.
func TestProgressLine(t *testing.T) {
	p := inspect.Progress{BytesRead: 30 << 20, Files: 3, File: 2, FileName: "op-1.sgc"}
	got := progressLine(p, 120<<20, 3*time.Second)
	const want = "  ... 30.0MiB of 120.0MiB read (25%), 10.0MiB/s, ETA 9s, file 2 of 3 (op-1.sgc)"
	if got != want {
		t.Errorf("progressLine = %q, want %q", got, want)
	}
	e := inspect.Progress{Entries: 250, TotalEntries: 1000, BytesRead: 2 << 20}
	if got, want := entriesLine(e, 5*time.Second), "  ... 250 of 1000 entries (25%), 2.0MiB read, 50 entries/s, ETA 15s"; got != want {
		t.Errorf("entriesLine = %q, want %q", got, want)
	}
	if isTerminal(&bytes.Buffer{}) {
		t.Error("a buffer counts as a terminal")
	}
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Error("a regular file counts as a terminal")
	}
}
