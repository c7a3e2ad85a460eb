package main

import (
	"bytes"
	"cmp"
	"encoding/xml"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchunit"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// The recorded files in testdata are `go test -bench -count 6` output of
// seven benchmarks with 2% noise and occasional +12% outliers (a shared
// machine): base.txt and head_noise.txt are two runs of the same code,
// head_2x.txt is head_noise.txt with ValueAdd twice as slow, and
// head_faster.txt has MapGet 40% faster. backends.txt is an excerpt of the
// run behind benchmarks/REPORT.md (keys=1M, every backend, and the codecs).
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
	for _, want := range []string{"❌ benchmark gate: 1 regression(s)", "| ValueAdd/backend=cow/keys=10K | sec/op |", "p=0.002"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	res, err := gate(gateOptions{base: baseFile, head: slowFile, threshold: 0.1, alpha: 0.05, units: []string{"sec/op"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.rows {
		if (r.verdict == regressed) != (r.name == "ValueAdd/backend=cow/keys=10K") {
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
	if code, out, _ := runCmd(t, "gate", "-base", baseFile, "-head", slowFile, "-filter", "^ValueAdd/"); code != 1 {
		t.Errorf("-filter ^ValueAdd/: exit status %d, want 1:\n%s", code, out)
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

func TestCodecAsBackend(t *testing.T) {
	for in, want := range map[string]string{
		"CodecMarshal/codec=json-2":              "CodecMarshal/backend=json-2",
		"CodecMarshal/codec=json":                "CodecMarshal/backend=json",
		"Mixed/backend=cow/codec=json":           "Mixed/backend=cow/codec=json",
		"ValueGet/backend=btree-raw/keys=1M-2":   "ValueGet/backend=btree-raw/keys=1M-2",
		"Codec/x=codec=y":                        "Codec/x=codec=y",
		"Flink/valueGet/backend=cow/keys=500K-2": "Flink/valueGet/backend=cow/keys=500K-2",
	} {
		r := &benchfmt.Result{Name: benchfmt.Name(in)}
		codecAsBackend(r)
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

// recorded is the ns/op samples of the recorded backend comparison
// (testdata/backends.txt), read without benchfmt: operation (the name
// without "Benchmark", its backend or codec key and -GOMAXPROCS) ->
// backend -> samples, and the backends in order of first appearance.
func recorded(t *testing.T) (map[string]map[string][]float64, []string) {
	t.Helper()
	data, err := os.ReadFile(backends)
	if err != nil {
		t.Fatal(err)
	}
	key := regexp.MustCompile(`/(backend|codec)=([^/]+)`)
	out := map[string]map[string][]float64{}
	var order []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || f[3] != "ns/op" {
			continue
		}
		name := procsSuffix.ReplaceAllString(strings.TrimPrefix(f[0], "Benchmark"), "")
		m := key.FindStringSubmatch(name)
		if m == nil {
			t.Fatalf("%s: no backend or codec key", name)
		}
		op := strings.Replace(name, m[0], "", 1)
		v, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			t.Fatal(err)
		}
		if out[op] == nil {
			out[op] = map[string][]float64{}
		}
		if !slices.Contains(order, m[2]) {
			order = append(order, m[2])
		}
		out[op][m[2]] = append(out[op][m[2]], v*1e-9)
	}
	return out, order
}

func median(vs []float64) float64 {
	s := slices.Sorted(slices.Values(vs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func TestCompareBackendsTable(t *testing.T) {
	code, out, stderr := runCmd(t, "compare-backends", backends)
	if code != 0 {
		t.Fatalf("exit status %d; stderr: %s", code, stderr)
	}
	var header []string
	rows := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
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
	ops, order := recorded(t)
	// Columns: cow first, then the backends and codecs in the order they
	// first appear.
	wantHeader := []string{"operation", "cow (ref)"}
	for _, be := range order {
		if be != "cow" {
			wantHeader = append(wantHeader, be)
		}
	}
	if !slices.Equal(header, wantHeader) {
		t.Fatalf("header %q, want %q", header, wantHeader)
	}
	if len(rows) != len(ops) {
		t.Fatalf("%d rows, want %d:\n%s", len(rows), len(ops), out)
	}
	for op, byBackend := range ops {
		row := rows[op]
		if row == nil {
			t.Errorf("no row %s:\n%s", op, out)
			continue
		}
		ref, hasRef := byBackend["cow"]
		for i, col := range header[2:] {
			cell := row[i+1]
			vs, ok := byBackend[col]
			if !ok {
				if cell != "—" {
					t.Errorf("%s %s: %q, want —", op, col, cell)
				}
				continue
			}
			// The median, then the ratio to cow's median (6 samples each,
			// all apart: p=0.002) or nothing when the row has no cow.
			want := benchunit.Scale(median(vs), benchunit.Decimal) + " ±"
			if !strings.HasPrefix(cell, want) {
				t.Errorf("%s %s: %q, want it to start with %q", op, col, cell, want)
			}
			if hasRef {
				ratio := fmt.Sprintf("%.2f×", median(vs)/median(ref))
				if !strings.Contains(cell, "("+ratio) && !strings.Contains(cell, "(~"+ratio) {
					t.Errorf("%s %s: %q, want the ratio %s to cow", op, col, cell, ratio)
				}
			} else if strings.Contains(cell, "×") {
				t.Errorf("%s %s: %q has a ratio, but the row has no cow", op, col, cell)
			}
		}
		if !hasRef {
			if row[0] != "—" {
				t.Errorf("%s cow: %q, want —", op, row[0])
			}
		} else if want := benchunit.Scale(median(ref), benchunit.Decimal) + " ±"; !strings.HasPrefix(row[0], want) || strings.Contains(row[0], "×") {
			t.Errorf("%s cow: %q, want it to start with %q and have no ratio", op, row[0], want)
		}
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
	// One bar per (operation, backend) with a value in backends.txt, as
	// long as its median.
	ops, order := recorded(t)
	var want []string
	lo, hi := math.Inf(1), math.Inf(-1)
	for op, byBackend := range ops {
		for be, vs := range byBackend {
			key := op + "|" + be
			want = append(want, key)
			m := median(vs)
			lo, hi = math.Min(lo, m), math.Max(hi, m)
			if v, ok := values[key]; ok && math.Abs(v-m) > 1e-9*m {
				t.Errorf("bar %s: value %g, want the median %g", key, v, m)
			}
		}
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
	// Log scale: decade ticks around the values, each printed twice (top
	// and bottom); bar widths are log-proportional.
	var wantTicks []string
	for d := int(math.Floor(math.Log10(lo))); d <= int(math.Ceil(math.Log10(hi))); d++ {
		wantTicks = append(wantTicks, decadeLabel(d, "sec/op"), decadeLabel(d, "sec/op"))
	}
	if !slices.Equal(ticks, wantTicks) {
		t.Errorf("ticks %q, want %q", ticks, wantTicks)
	}
	var keys []string // of the shortest bar, the longest, and one in between
	for k := range values {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(values[a], values[b]) })
	a, b, c := keys[0], keys[len(keys)-1], keys[len(keys)/2]
	perDecade := (bars[b] - bars[a]) / (math.Log10(values[b]) - math.Log10(values[a]))
	if perDecade2 := (bars[c] - bars[a]) / (math.Log10(values[c]) - math.Log10(values[a])); math.Abs(perDecade-perDecade2) > 0.5 {
		t.Errorf("bar widths are not logarithmic: %.2f vs %.2f px per decade", perDecade, perDecade2)
	}
	wantLegend := []string{"cow (ref)"}
	for _, be := range order {
		if be != "cow" {
			wantLegend = append(wantLegend, be)
		}
	}
	if !slices.Equal(legend, wantLegend) {
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
		{0, "sec/op", "1s"}, {-7, "cpu-sec/op", "100ns"}, {-3, "sync-sec/op", "1ms"}, {3, "B/op", "1kB"}, {4, "allocs/op", "10k"}, {-30, "sec/op", "1e-30"},
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

// TestSpeedRatioHigherIsBetter: a speed- unit (speed-vs-plain, a
// baseline's time over the benchmark's) improves upward, like a rate: the
// gate fails when it halves and reports an improvement when it doubles,
// and the comparison table says higher is better and shows the ratio with
// three decimals.
func TestSpeedRatioHigherIsBetter(t *testing.T) {
	for unit, want := range map[string]bool{"events/s": true, "B/s": true, "speed-vs-plain": true, "sec/op": false, "allocs/event": false, "B/op": false} {
		if got := higherIsBetter(unit); got != want {
			t.Errorf("higherIsBetter(%q) = %v, want %v", unit, got, want)
		}
	}
	dir := t.TempDir()
	write := func(name string, center float64) string {
		var b strings.Builder
		for i := range 8 {
			fmt.Fprintf(&b, "BenchmarkNexmark/query=all/backend=cow-2 \t10\t100 ns/op\t%.4f speed-vs-plain\n", center*(1+0.01*float64(i%3)))
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base, slower, faster := write("base.txt", 0.2), write("slower.txt", 0.1), write("faster.txt", 0.4)
	if code, out, stderr := runCmd(t, "gate", "-base", base, "-head", slower, "-units", "speed-vs-plain"); code != 1 {
		t.Errorf("speed-vs-plain halved: exit status %d, want 1 (a regression); stderr %s\n%s", code, stderr, out)
	}
	code, out, stderr := runCmd(t, "gate", "-base", base, "-head", faster, "-units", "speed-vs-plain")
	if code != 0 || !strings.Contains(out, "### Improvements") {
		t.Errorf("speed-vs-plain doubled: exit status %d, want 0 and an improvement; stderr %s\n%s", code, stderr, out)
	}
	code, out, stderr = runCmd(t, "compare-backends", "-units", "speed-vs-plain", base)
	if code != 0 || !strings.Contains(out, "### speed-vs-plain (median ± 95% CI; higher is better)") || !strings.Contains(out, "| 0.202 ±") {
		t.Errorf("compare-backends: exit status %d; stderr %s\n%s", code, stderr, out)
	}
}
