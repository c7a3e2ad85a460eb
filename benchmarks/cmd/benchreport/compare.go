package main

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"

	"golang.org/x/perf/benchmath"
	"golang.org/x/perf/benchproc"
)

// comparison is the backend comparison of one unit, ready to print or draw.
type comparison struct {
	unit  string
	ref   string   // the reference column, "" if no result has it
	cols  []string // backend names, the reference first
	rows  []comparisonRow
	alpha float64
}

// comparisonRow is one operation of a comparison.
type comparisonRow struct {
	name  string
	cells []comparisonCell // parallel to comparison.cols
}

// comparisonCell summarizes one backend's sample of one operation.
type comparisonCell struct {
	present bool
	summary benchmath.Summary
	n       int
	// vsRef is set when the cell is not the reference and the row has a
	// reference sample.
	vsRef       bool
	ratio       float64 // center / reference center
	refZero     bool    // the reference center is 0: no ratio
	cmp         benchmath.Comparison
	significant bool
}

// backendFlags are the flags shared by compare-backends and chart.
type backendFlags struct {
	ref, filter string
	alpha       float64
}

// parseBackendCmd parses the command line of compare-backends or chart,
// whose own flags extra registers, and loads the files it names into a
// table whose columns are backends.
func parseBackendCmd(name string, args []string, stderr io.Writer, extra func(*flag.FlagSet)) (*table, *backendFlags, error) {
	fs := flag.NewFlagSet("benchreport "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := new(backendFlags)
	fs.StringVar(&f.ref, "ref", "cow", "reference `backend`")
	fs.StringVar(&f.filter, "filter", "", "keep benchmarks whose name matches this `regexp`")
	fs.Float64Var(&f.alpha, "alpha", 0.05, "significance `level`")
	extra(fs)
	if err := fs.Parse(args); err != nil {
		return nil, nil, errUsage
	}
	if fs.NArg() == 0 {
		return nil, nil, fmt.Errorf("benchreport: no input files")
	}
	var re *regexp.Regexp
	if f.filter != "" {
		var err error
		if re, err = regexp.Compile(f.filter); err != nil {
			return nil, nil, fmt.Errorf("benchreport: -filter: %w", err)
		}
	}
	if !(f.alpha > 0 && f.alpha < 1) {
		return nil, nil, fmt.Errorf("benchreport: -alpha %v: want a number between 0 and 1", f.alpha)
	}
	t, err := load(loadOptions{paths: fs.Args(), col: "/backend", filter: re, transform: codecAsBackend})
	return t, f, err
}

func compareBackendsCmd(args []string, stdout, stderr io.Writer) error {
	var units *string
	t, bf, err := parseBackendCmd("compare-backends", args, stderr, func(fs *flag.FlagSet) {
		units = fs.String("units", "sec/op", "comma-separated `units` to tabulate")
	})
	if err != nil {
		return err
	}
	n := 0
	for _, u := range splitList(*units) {
		if !t.hasUnit(u) {
			continue
		}
		if n > 0 {
			fmt.Fprintln(stdout)
		}
		writeComparison(stdout, compareBackends(t, u, bf.ref, bf.alpha))
		n++
	}
	if n == 0 {
		return fmt.Errorf("benchreport: no measurements in units %s (have %s)", *units, strings.Join(t.units, ", "))
	}
	return nil
}

// compareBackends computes the backend comparison of unit from t, whose
// columns are projected by /backend.
func compareBackends(t *table, unit, ref string, alpha float64) *comparison {
	th := &benchmath.Thresholds{CompareAlpha: alpha}
	c := &comparison{unit: unit, alpha: alpha}
	// Columns that have measurements of unit, the reference first.
	var cols []benchproc.Key
	for _, col := range t.cols {
		has := false
		for _, row := range t.rows {
			if len(t.values[cell{row, col, unit}]) > 0 {
				has = true
				break
			}
		}
		if !has {
			continue
		}
		if col.StringValues() == ref {
			c.ref = ref
			cols = append([]benchproc.Key{col}, cols...)
		} else {
			cols = append(cols, col)
		}
	}
	for _, col := range cols {
		name := col.StringValues()
		if name == "" {
			name = "(none)"
		}
		c.cols = append(c.cols, name)
	}
	for _, row := range t.rows {
		r := comparisonRow{name: rowName(row), cells: make([]comparisonCell, len(cols))}
		var refSample *benchmath.Sample
		var refCenter float64
		if c.ref != "" {
			if refSample = t.sample(row, cols[0], unit, th); refSample != nil {
				refCenter = benchmath.AssumeNothing.Summary(refSample, 0.95).Center
			}
		}
		any := false
		for i, col := range cols {
			s := t.sample(row, col, unit, th)
			if s == nil {
				continue
			}
			any = true
			cc := comparisonCell{present: true, summary: benchmath.AssumeNothing.Summary(s, 0.95), n: len(s.Values)}
			if refSample != nil && !(i == 0 && c.ref != "") {
				cc.vsRef = true
				if refCenter != 0 {
					cc.ratio = cc.summary.Center / refCenter
				} else {
					cc.refZero = true
				}
				cc.cmp = benchmath.AssumeNothing.Compare(refSample, s)
				cc.significant = cc.cmp.P < alpha
			}
			r.cells[i] = cc
		}
		if any {
			c.rows = append(c.rows, r)
		}
	}
	return c
}

// writeComparison prints c as a markdown table.
func writeComparison(w io.Writer, c *comparison) {
	better := "lower is better"
	if higherIsBetter(c.unit) {
		better = "higher is better"
	}
	fmt.Fprintf(w, "### %s (median ± 95%% CI; %s)\n\n", c.unit, better)
	if c.ref != "" {
		fmt.Fprintf(w, "Ratios are to %s; ~ marks a difference that is not significant (Mann-Whitney U, p ≥ %g).\n\n", c.ref, c.alpha)
	}
	fmt.Fprintf(w, "| operation |")
	for i, col := range c.cols {
		if i == 0 && c.ref != "" {
			col += " (ref)"
		}
		fmt.Fprintf(w, " %s |", col)
	}
	fmt.Fprintf(w, "\n| --- |%s\n", strings.Repeat(" ---: |", len(c.cols)))
	for _, r := range c.rows {
		fmt.Fprintf(w, "| %s |", r.name)
		for _, cc := range r.cells {
			fmt.Fprintf(w, " %s |", formatCell(cc, c.unit))
		}
		fmt.Fprintln(w)
	}
}

// formatCell formats a cell as "12.3n ±2%" followed, against the
// reference, by "(2.05×, p=0.002)" or "(~1.01×, p=0.310)".
func formatCell(cc comparisonCell, unit string) string {
	if !cc.present {
		return "—"
	}
	s := scale(cc.summary.Center, unit) + " ±" + cc.summary.PctRangeString()
	if cc.vsRef {
		mark := ""
		if !cc.significant {
			mark = "~"
		}
		ratio := fmt.Sprintf("%.2f×", cc.ratio)
		if cc.refZero {
			ratio = "=" // both zero, or a zero reference: no ratio
			if cc.summary.Center != 0 {
				ratio = "∞×"
			}
		}
		s += fmt.Sprintf(" (%s%s, %s)", mark, ratio, cc.cmp.String())
	}
	return s
}
