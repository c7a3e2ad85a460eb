package main

import (
	"bytes"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchmath"
	"golang.org/x/perf/benchproc"
	"golang.org/x/perf/benchunit"
)

// table holds benchmark measurements grouped into rows and columns by two
// benchproc projections, per unit.
type table struct {
	rowProj, colProj *benchproc.Projection
	rows, cols       []benchproc.Key // sorted
	units            []string        // in order of first appearance
	values           map[cell][]float64
}

// cell addresses the measurements of one unit in one row and column.
type cell struct {
	row, col benchproc.Key
	unit     string
}

// loadOptions says how to read and group results.
type loadOptions struct {
	paths  []string // file names, or label=path when labels is set
	labels bool
	col    string         // benchproc projection of the columns
	filter *regexp.Regexp // on the name without "Benchmark"; nil keeps all
	// transform, if set, rewrites each result before it is filtered and
	// projected.
	transform func(*benchfmt.Result)
}

// load reads the results of o.paths into a table whose rows are the
// benchmark's full name without the fields of the column projection.
func load(o loadOptions) (*table, error) {
	var parser benchproc.ProjectionParser
	colProj, err := parser.Parse(o.col, nil)
	if err != nil {
		return nil, fmt.Errorf("benchreport: column projection %q: %w", o.col, err)
	}
	rowProj, err := parser.Parse(".fullname", nil)
	if err != nil {
		return nil, fmt.Errorf("benchreport: row projection: %w", err)
	}
	t := &table{rowProj: rowProj, colProj: colProj, values: make(map[cell][]float64)}
	seenRow := make(map[benchproc.Key]bool)
	seenCol := make(map[benchproc.Key]bool)
	seenUnit := make(map[string]bool)
	files := benchfmt.Files{Paths: o.paths, AllowLabels: o.labels}
	for files.Scan() {
		rec := files.Result()
		switch rec := rec.(type) {
		case *benchfmt.SyntaxError:
			return nil, fmt.Errorf("benchreport: %w", rec)
		case *benchfmt.Result:
			if o.transform != nil {
				o.transform(rec)
			}
			if o.filter != nil && !o.filter.MatchString(trimProcs(string(rec.Name.Full()))) {
				continue
			}
			row, col := rowProj.Project(rec), colProj.Project(rec)
			if !seenRow[row] {
				seenRow[row] = true
				t.rows = append(t.rows, row)
			}
			if !seenCol[col] {
				seenCol[col] = true
				t.cols = append(t.cols, col)
			}
			for _, v := range rec.Values {
				if !seenUnit[v.Unit] {
					seenUnit[v.Unit] = true
					t.units = append(t.units, v.Unit)
				}
				c := cell{row, col, v.Unit}
				t.values[c] = append(t.values[c], v.Value)
			}
		}
	}
	if err := files.Err(); err != nil {
		return nil, fmt.Errorf("benchreport: %w", err)
	}
	benchproc.SortKeys(t.rows)
	benchproc.SortKeys(t.cols)
	return t, nil
}

// sample returns the sample of one cell, or nil if the cell is empty.
func (t *table) sample(row, col benchproc.Key, unit string, th *benchmath.Thresholds) *benchmath.Sample {
	vs := t.values[cell{row, col, unit}]
	if len(vs) == 0 {
		return nil
	}
	return benchmath.NewSample(vs, th)
}

// hasUnit reports whether any cell has measurements in unit.
func (t *table) hasUnit(unit string) bool {
	for _, u := range t.units {
		if u == unit {
			return true
		}
	}
	return false
}

// procsSuffix matches the -GOMAXPROCS suffix of a benchmark name.
var procsSuffix = regexp.MustCompile(`-\d+$`)

// trimProcs drops the -GOMAXPROCS suffix of a benchmark name: the reports
// come from one machine, and the suffix only makes names longer.
func trimProcs(name string) string { return procsSuffix.ReplaceAllString(name, "") }

// rowName is the display name of a row: its full name without the
// -GOMAXPROCS suffix.
func rowName(row benchproc.Key) string { return trimProcs(row.StringValues()) }

// codecAsBackend is the rewrite that compare-backends and chart apply to
// every result: a codec=<name> key becomes backend=<name> when the name
// has no backend key, so that codecs get columns like backends.
func codecAsBackend(r *benchfmt.Result) {
	_, parts := r.Name.Parts()
	for _, p := range parts {
		if bytes.HasPrefix(p, []byte("/backend=")) {
			return
		}
	}
	r.Name = benchfmt.Name(bytes.Replace(r.Name, []byte("/codec="), []byte("/backend="), 1))
}

// splitList splits a comma-separated flag value, dropping empty elements.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// parseThreshold parses "10%", "10" (percent when greater than 1) or "0.1".
func parseThreshold(s string) (float64, error) {
	pct := strings.HasSuffix(s, "%")
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "%"), 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("benchreport: bad threshold %q: want a percentage like 10%% or a fraction like 0.1", s)
	}
	if pct || v > 1 {
		v /= 100
	}
	return v, nil
}

// scale formats v, a value of unit, for a table or a chart: with an SI
// prefix and benchstat's precision (benchunit.Scale), but a speed ratio,
// which is near 1, with three decimals (0.168, not 168.0m).
func scale(v float64, unit string) string {
	if strings.HasPrefix(unit, "speed-") {
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
	return benchunit.Scale(v, benchunit.ClassOf(unit))
}

// higherIsBetter reports whether a larger value of unit is an improvement:
// rates (B/s, entries/s) and speed ratios (speed-vs-plain: a baseline's
// time over the benchmark's) are, times and sizes are not.
func higherIsBetter(unit string) bool {
	return strings.HasSuffix(unit, "/s") || strings.HasPrefix(unit, "speed-")
}
