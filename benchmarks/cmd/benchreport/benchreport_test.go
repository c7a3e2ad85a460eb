package main

import (
	"bytes"
	"encoding/xml"
	"flag"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/perf/benchfmt"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// The recorded files in testdata are `go test -bench -count 6` output of
// seven benchmarks with 2% noise and occasional +12% outliers (a shared
// machine): base.txt and head_noise.txt are two runs of the same code,
// head_2x.txt is head_noise.txt with Flink/valueGet twice as slow, and
// head_faster.txt has MapGet 40% faster.
const (
	baseFile   = "testdata/base.txt"
	noiseFile  = "testdata/head_noise.txt"
	slowFile   = "testdata/head_2x.txt"
	fasterFile = "testdata/head_faster.txt"
	backends   = "testdata/backends.txt"
)

func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestGateFailsOnInjected2xSlowdown(t *testing.T) {
	code, out, stderr := runCmd(t, "gate", "-base", baseFile, "-head", slowFile)
	if code != 1 {
		t.Fatalf("exit status %d, want 1; stderr: %s\n%s", code, stderr, out)
	}
	for _, want := range []string{"❌ benchmark gate: 1 regression(s)", "| Flink/valueGet/backend=cow/keys=10K | sec/op |", "p=0.002"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	res, err := gate(gateOptions{base: baseFile, head: slowFile, threshold: 0.1, alpha: 0.05, units: []string{"sec/op"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.rows {
		if (r.verdict == regressed) != (r.name == "Flink/valueGet/backend=cow/keys=10K") {
			t.Errorf("%s: verdict %v, delta %+.1f%%, %s", r.name, r.verdict, 100*r.delta, r.cmp)
		}
		if r.verdict == regressed && (r.delta < 0.8 || r.delta > 1.2) {
			t.Errorf("%s: delta %+.1f%%, want about +100%%", r.name, 100*r.delta)
		}
	}
}

// slowDown returns src with the ns/op of benchmark name multiplied by f.
func slowDown(t *testing.T, src []byte, name string, f float64) []byte {
	t.Helper()
	var out bytes.Buffer
	n := 0
	for _, line := range strings.SplitAfter(string(src), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 3 && strings.TrimSuffix(fields[0], "-2") == "Benchmark"+name && fields[3] == "ns/op" {
			v, err := strconv.ParseFloat(fields[2], 64)
			if err != nil {
				t.Fatal(err)
			}
			line = strings.Replace(line, fields[2], strconv.FormatFloat(v*f, 'f', 2, 64), 1)
			n++
		}
		out.WriteString(line)
	}
	if n != 6 {
		t.Fatalf("%s: %d samples, want 6", name, n)
	}
	return out.Bytes()
}

func TestGateCatchesEveryBenchmarkSlowedTwofold(t *testing.T) {
	noise, err := os.ReadFile(noiseFile)
	if err != nil {
		t.Fatal(err)
	}
	base, err := gate(gateOptions{base: baseFile, head: noiseFile, threshold: 0.1, alpha: 0.05, units: []string{"sec/op"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(base.rows) != 7 {
		t.Fatalf("%d benchmarks compared, want 7", len(base.rows))
	}
	for _, r := range base.rows {
		t.Run(r.name, func(t *testing.T) {
			head := filepath.Join(t.TempDir(), "head.txt")
			if err := os.WriteFile(head, slowDown(t, noise, r.name, 2), 0o644); err != nil {
				t.Fatal(err)
			}
			code, out, stderr := runCmd(t, "gate", "-base", baseFile, "-head", head)
			if code != 1 || !strings.Contains(out, "1 regression(s)") || !strings.Contains(out, "| "+r.name+" |") {
				t.Errorf("exit status %d, want 1 with one regression of %s; stderr: %s\n%s", code, r.name, stderr, out)
			}
		})
	}
}

func TestGatePassesOnNoiseAndIdenticalData(t *testing.T) {
	for _, tc := range []struct{ name, head, units string }{
		{"identical", baseFile, "sec/op"},
		{"noise", noiseFile, "sec/op"},
		{"noise-all-units", noiseFile, "sec/op,B/op,allocs/op"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := runCmd(t, "gate", "-base", baseFile, "-head", tc.head, "-units", tc.units)
			if code != 0 || !strings.Contains(out, "✅ benchmark gate: no regression") {
				t.Errorf("exit status %d, want 0; stderr: %s\n%s", code, stderr, out)
			}
			if strings.Contains(out, "### Regressions") || strings.Contains(out, "### Improvements") {
				t.Errorf("noise reported as a change:\n%s", out)
			}
		})
	}
}

func TestGateReportsImprovementsWithoutFailing(t *testing.T) {
	code, out, _ := runCmd(t, "gate", "-base", baseFile, "-head", fasterFile)
	if code != 0 {
		t.Fatalf("exit status %d, want 0:\n%s", code, out)
	}
	if !strings.Contains(out, "### Improvements") || !strings.Contains(out, "| MapGet/backend=cow/keys=10K | sec/op |") || !regexp.MustCompile(`\| -(3[5-9]|4[0-5])\.\d% \|`).MatchString(out) {
		t.Errorf("improvement of MapGet not reported:\n%s", out)
	}
}

func TestGateThresholdAndFilter(t *testing.T) {
	// A 2× slowdown is within a 150% threshold.
	if code, out, _ := runCmd(t, "gate", "-base", baseFile, "-head", slowFile, "-threshold", "150%"); code != 0 {
		t.Errorf("-threshold 150%%: exit status %d, want 0:\n%s", code, out)
	}
	// The filter leaves the slow benchmark out...
	if code, out, _ := runCmd(t, "gate", "-base", baseFile, "-head", slowFile, "-filter", "^MapGet"); code != 0 || !strings.Contains(out, "1 benchmark measurement(s)") {
		t.Errorf("-filter ^MapGet: exit status %d, want 0 with one comparison:\n%s", code, out)
	}
	// ...or keeps it.
	if code, out, _ := runCmd(t, "gate", "-base", baseFile, "-head", slowFile, "-filter", "^Flink/"); code != 1 {
		t.Errorf("-filter ^Flink/: exit status %d, want 1:\n%s", code, out)
	}
	// A filter that selects nothing is an error, not a pass.
	if code, out, stderr := runCmd(t, "gate", "-base", baseFile, "-head", slowFile, "-filter", "^NoSuchBenchmark"); code != 2 || !strings.Contains(stderr, "no benchmark in common") {
		t.Errorf("-filter ^NoSuchBenchmark: exit status %d, want 2; stderr: %s\n%s", code, stderr, out)
	}
}

func TestGateRejectsBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"gate", "-head", slowFile},
		{"gate", "-base", baseFile, "-head", slowFile, "extra"},
		{"gate", "-base", baseFile, "-head", slowFile, "-threshold", "ten"},
		{"gate", "-base", baseFile, "-head", "testdata/missing.txt"},
		{"nosuchcommand"},
		{},
	} {
		if code, _, _ := runCmd(t, args...); code != 2 {
			t.Errorf("%q: exit status %d, want 2", args, code)
		}
	}
}

func TestParseThreshold(t *testing.T) {
	for in, want := range map[string]float64{"10%": 0.1, "0.1": 0.1, "10": 0.1, "2.5%": 0.025, "0": 0} {
		got, err := parseThreshold(in)
		if err != nil || math.Abs(got-want) > 1e-12 {
			t.Errorf("parseThreshold(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "-5%", "NaN"} {
		if _, err := parseThreshold(in); err == nil {
			t.Errorf("parseThreshold(%q) succeeded", in)
		}
	}
}

func TestBackendTransform(t *testing.T) {
	tr := backendTransform([]string{"Btree", "Pebble"})
	for in, want := range map[string]string{
		"BtreeValueGet/backend=btree/keys=1M-2":  "ValueGet/backend=btree/keys=1M-2",
		"PebbleMapGet/backend=pebble/keys=1M":    "MapGet/backend=pebble/keys=1M",
		"Btree/backend=btree":                    "Btree/backend=btree",
		"Btreeish/backend=btree":                 "Btreeish/backend=btree",
		"CodecMarshal/codec=json-2":              "CodecMarshal/backend=json-2",
		"Mixed/backend=cow/codec=json":           "Mixed/backend=cow/codec=json",
		"Flink/valueGet/backend=cow/keys=500K-2": "Flink/valueGet/backend=cow/keys=500K-2",
	} {
		r := &benchfmt.Result{Name: benchfmt.Name(in)}
		tr(r)
		if got := string(r.Name); got != want {
			t.Errorf("%s -> %s, want %s", in, got, want)
		}
	}
}

func TestCompareBackendsGolden(t *testing.T) {
	code, out, stderr := runCmd(t, "compare-backends", "-units", "sec/op,B/op", backends)
	if code != 0 {
		t.Fatalf("exit status %d; stderr: %s", code, stderr)
	}
	golden := "testdata/backends.golden.md"
	if *update {
		if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Errorf("compare-backends output differs from %s (run go test -update to accept):\n%s", golden, out)
	}
}

func TestCompareBackendsTable(t *testing.T) {
	_, out, _ := runCmd(t, "compare-backends", backends)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var header []string
	rows := map[string][]string{}
	for _, l := range lines {
		if !strings.HasPrefix(l, "| ") || strings.HasPrefix(l, "| ---") {
			continue
		}
		cells := strings.Split(strings.Trim(l, "| "), " | ")
		if header == nil {
			header = cells
			continue
		}
		rows[cells[0]] = cells[1:]
	}
	wantHeader := []string{"operation", "cow (ref)", "gomap", "btree", "rawbtree", "model", "stategen", "msgp", "json"}
	if !slices.Equal(header, wantHeader) {
		t.Fatalf("header %q, want %q", header, wantHeader)
	}
	if len(rows) != 6 {
		t.Fatalf("%d rows, want 6 (btree's BtreeValueGet joins ValueGet):\n%s", len(rows), out)
	}
	vg := rows["ValueGet/keys=100K"]
	if vg == nil {
		t.Fatalf("no ValueGet/keys=100K row:\n%s", out)
	}
	// gomap is faster than cow, btree slower; both significantly.
	for col, re := range map[int]string{1: `^24\.\d+n ±\d+% \(0\.4\d×, p=0\.002 n=6\)$`, 2: `^18\d\.\dn ±\d+% \(3\.0\d×, p=0\.002 n=6\)$`, 0: `^6\d\.\d+n ±\d+%$`} {
		if !regexp.MustCompile(re).MatchString(vg[col]) {
			t.Errorf("ValueGet %s cell %q does not match %s", header[col+1], vg[col], re)
		}
	}
	if c := rows["CodecMarshal"]; c == nil || c[0] != "—" || !strings.HasPrefix(c[5], "37.") || strings.Contains(c[6], "×") {
		t.Errorf("CodecMarshal row %q: want codecs as columns, no cow and no ratios", c)
	}
}

// svgNode is a generic XML element.
type svgNode struct {
	XMLName  xml.Name
	Attrs    []xml.Attr `xml:",any,attr"`
	Text     string     `xml:",chardata"`
	Children []svgNode  `xml:",any"`
}

func (n *svgNode) attr(name string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func (n *svgNode) walk(fn func(*svgNode)) {
	fn(n)
	for i := range n.Children {
		n.Children[i].walk(fn)
	}
}

func TestChart(t *testing.T) {
	out := filepath.Join(t.TempDir(), "chart.svg")
	if code, _, stderr := runCmd(t, "chart", "-o", out, backends); code != 0 {
		t.Fatalf("exit status %d; stderr: %s", code, stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var root svgNode
	if err := xml.Unmarshal(data, &root); err != nil {
		t.Fatalf("chart is not XML: %v", err)
	}
	if root.XMLName.Local != "svg" || root.XMLName.Space != "http://www.w3.org/2000/svg" {
		t.Fatalf("root element %v, want svg", root.XMLName)
	}
	bars := map[string]float64{} // op|backend -> width
	values := map[string]float64{}
	var ticks, legend []string
	root.walk(func(n *svgNode) {
		switch {
		case n.XMLName.Local == "rect" && n.attr("class") == "bar":
			key := n.attr("data-op") + "|" + n.attr("data-backend")
			if _, dup := bars[key]; dup {
				t.Errorf("two bars for %s", key)
			}
			w, err := strconv.ParseFloat(n.attr("width"), 64)
			v, err2 := strconv.ParseFloat(n.attr("data-value"), 64)
			if err != nil || err2 != nil || w <= 0 {
				t.Errorf("bar %s: width %q, value %q", key, n.attr("width"), n.attr("data-value"))
			}
			bars[key], values[key] = w, v
		case n.XMLName.Local == "text" && n.attr("class") == "tick":
			ticks = append(ticks, n.Text)
		case n.XMLName.Local == "g" && n.attr("class") == "legend":
			for _, c := range n.Children {
				if c.XMLName.Local == "text" {
					legend = append(legend, c.Text)
				}
			}
		}
	})
	// One bar per (operation, backend) with a value in backends.txt.
	want := []string{
		"ValueGet/keys=100K|cow", "ValueGet/keys=100K|gomap", "ValueGet/keys=100K|btree", "ValueGet/keys=100K|rawbtree",
		"MapGet/keys=100K|cow", "MapGet/keys=100K|gomap",
		"SortedMapRange/keys=100K|cow", "SortedMapRange/keys=100K|gomap",
		"Flink/valueGet/keys=100K|cow", "Flink/valueGet/keys=100K|model",
		"Flink/mapIterator/keys=100K|cow", "Flink/mapIterator/keys=100K|model",
		"CodecMarshal|stategen", "CodecMarshal|msgp", "CodecMarshal|json",
	}
	var got []string
	for k := range bars {
		got = append(got, k)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("bars %q\nwant %q", got, want)
	}
	// Log scale: decade ticks from 10ns to 10µs, each printed twice (top
	// and bottom), equally spaced; bar widths are log-proportional.
	if wantTicks := []string{"10ns", "10ns", "100ns", "100ns", "1µs", "1µs", "10µs", "10µs"}; !slices.Equal(ticks, wantTicks) {
		t.Errorf("ticks %q, want %q", ticks, wantTicks)
	}
	a, b := "ValueGet/keys=100K|gomap", "Flink/mapIterator/keys=100K|model"
	ratio := (bars[b] - bars[a]) / (math.Log10(values[b]) - math.Log10(values[a]))
	c := "SortedMapRange/keys=100K|cow"
	if ratio2 := (bars[c] - bars[a]) / (math.Log10(values[c]) - math.Log10(values[a])); math.Abs(ratio-ratio2) > 0.5 {
		t.Errorf("bar widths are not logarithmic: %.2f vs %.2f px per decade", ratio, ratio2)
	}
	if wantLegend := []string{"cow (ref)", "gomap", "btree", "rawbtree", "model", "stategen", "msgp", "json"}; !slices.Equal(legend, wantLegend) {
		t.Errorf("legend %q, want %q", legend, wantLegend)
	}
}

func TestDecadeLabel(t *testing.T) {
	for _, tc := range []struct {
		d    int
		unit string
		want string
	}{
		{-9, "sec/op", "1ns"}, {-8, "sec/op", "10ns"}, {-7, "sec/op", "100ns"}, {-6, "sec/op", "1µs"},
		{0, "sec/op", "1s"}, {3, "B/op", "1kB"}, {4, "allocs/op", "10k"}, {-30, "sec/op", "1e-30"},
	} {
		if got := decadeLabel(tc.d, tc.unit); got != tc.want {
			t.Errorf("decadeLabel(%d, %s) = %q, want %q", tc.d, tc.unit, got, tc.want)
		}
	}
}

func TestChartRejectsUnknownUnit(t *testing.T) {
	code, _, stderr := runCmd(t, "chart", "-unit", "furlongs/op", backends)
	if code != 2 || !strings.Contains(stderr, "no measurements in furlongs/op") {
		t.Errorf("exit status %d, stderr %q", code, stderr)
	}
}
