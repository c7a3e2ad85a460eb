package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeReport writes doc as report.md in a new directory holding a copy of
// the recorded backends results as results/backends.txt, and returns the
// report's path.
func writeReport(t *testing.T, doc string) string {
	t.Helper()
	dir := t.TempDir()
	data, err := os.ReadFile(backends)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "results"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results", "backends.txt"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "report.md")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFillRegeneratesBlocksAndKeepsProse(t *testing.T) {
	const doc = "# Report\n\nProse before.\n\n" +
		"<!-- benchreport compare-backends -units sec/op -filter '^ValueGet/' results/backends.txt -->\n" +
		"stale table\nmore stale lines\n" +
		"<!-- end benchreport -->\n\nProse between.\n\n" +
		"<!-- benchreport chart -unit sec/op -o chart.svg -filter \"^(ValueGet|MapGet)/\" results/backends.txt -->\n" +
		"<!-- end benchreport -->\n\nProse after.\n"
	path := writeReport(t, doc)

	// The table a block must hold is what compare-backends prints for it.
	code, want, stderr := runCmd(t, "compare-backends", "-units", "sec/op", "-filter", "^ValueGet/", backends)
	if code != 0 {
		t.Fatalf("compare-backends: %d %s", code, stderr)
	}
	if code, _, stderr := runCmd(t, "fill", "-check", path); code != 1 {
		t.Fatalf("fill -check of a stale report: status %d, want 1 (%s)", code, stderr)
	}
	if code, _, stderr := runCmd(t, "fill", path); code != 0 {
		t.Fatalf("fill: status %d: %s", code, stderr)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	wantDoc := "# Report\n\nProse before.\n\n" +
		"<!-- benchreport compare-backends -units sec/op -filter '^ValueGet/' results/backends.txt -->\n" +
		want +
		"<!-- end benchreport -->\n\nProse between.\n\n" +
		"<!-- benchreport chart -unit sec/op -o chart.svg -filter \"^(ValueGet|MapGet)/\" results/backends.txt -->\n" +
		"<!-- end benchreport -->\n\nProse after.\n"
	if string(got) != wantDoc {
		t.Errorf("filled report:\n%s\nwant:\n%s", got, wantDoc)
	}
	if !strings.Contains(want, "ValueGet/") || strings.Contains(want, "Codec") {
		t.Errorf("the filter was not applied to the block's table:\n%s", want)
	}
	svg, err := os.ReadFile(filepath.Join(filepath.Dir(path), "chart.svg"))
	if err != nil || !strings.Contains(string(svg), "<svg") || !strings.Contains(string(svg), "MapGet") {
		t.Errorf("chart block did not write chart.svg next to the report (%v)", err)
	}
	// Filling again changes nothing, and -check agrees.
	if code, out, stderr := runCmd(t, "fill", "-check", path); code != 0 {
		t.Errorf("fill -check of a filled report: status %d: %s%s", code, out, stderr)
	}
}

func TestFillRejectsBrokenBlocks(t *testing.T) {
	open := "<!-- benchreport compare-backends results/backends.txt -->\n"
	for name, doc := range map[string]string{
		"unclosed":         "x\n" + open + "table\n",
		"nested":           open + open + "<!-- end benchreport -->\n",
		"stray end":        "x\n<!-- end benchreport -->\n",
		"gate":             "<!-- benchreport gate -base a -head b -->\n<!-- end benchreport -->\n",
		"missing file":     "<!-- benchreport compare-backends results/nope.txt -->\n<!-- end benchreport -->\n",
		"unterminated '":   "<!-- benchreport compare-backends -filter 'x results/backends.txt -->\n<!-- end benchreport -->\n",
		"comment on lines": "<!-- benchreport compare-backends\nresults/backends.txt -->\n<!-- end benchreport -->\n",
	} {
		t.Run(name, func(t *testing.T) {
			path := writeReport(t, doc)
			code, _, stderr := runCmd(t, "fill", path)
			if code != 2 || !strings.Contains(stderr, "report.md") || !strings.Contains(stderr, "line ") {
				t.Errorf("status %d, stderr %q: want 2 and an error naming the file and line", code, stderr)
			}
			if got, _ := os.ReadFile(path); string(got) != doc {
				t.Errorf("a failed fill rewrote the report")
			}
		})
	}
	if code, _, _ := runCmd(t, "fill"); code != 2 {
		t.Errorf("fill without a file: status %d, want 2", code)
	}
}

func TestSplitWords(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"a b  c", []string{"a", "b", "c"}},
		{`-filter '^(A|B) C$' f.txt`, []string{"-filter", "^(A|B) C$", "f.txt"}},
		{`-x "a \"q\" \\ b" y`, []string{"-x", `a "q" \ b`, "y"}},
		{`pre'fix'"ed"`, []string{"prefixed"}},
		{`''`, []string{""}},
		{"", nil},
	} {
		got, err := splitWords(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("splitWords(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{`'open`, `"open`} {
		if _, err := splitWords(bad); err == nil {
			t.Errorf("splitWords(%q): no error", bad)
		}
	}
}
