package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stategen/stategen/checkpoint"
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
			"clickstream-0.sgc", "[0, ", ", 128)", "CRC32C", "TAG", "format:   version 3",
			"SCHEMAS", "user-stats: stategen/v1 value key=string value=struct{Events int64;",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("inspect %s lacks %q:\n%s", arg, want, out)
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
