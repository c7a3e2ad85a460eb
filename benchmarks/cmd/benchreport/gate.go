package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"regexp"
	"sort"
	"strings"

	"golang.org/x/perf/benchmath"
	"golang.org/x/perf/benchproc"
)

// gateOptions configures a base-vs-head comparison.
type gateOptions struct {
	base, head string
	threshold  float64 // fraction: 0.1 is 10%
	alpha      float64
	units      []string
	filter     *regexp.Regexp
}

// verdict classifies one benchmark's change.
type verdict int

const (
	unchanged verdict = iota
	improved
	regressed
)

// gateRow is one benchmark and unit present in both base and head.
type gateRow struct {
	name       string
	unit       string
	base, head benchmath.Summary
	delta      float64 // (head - base) / base; ±Inf when base is 0
	cmp        benchmath.Comparison
	verdict    verdict
}

// gateResult is the outcome of a gate run.
type gateResult struct {
	opts                gateOptions
	rows                []gateRow // every compared benchmark and unit
	onlyBase, onlyHead  []string  // benchmarks in one file only
	regressions, improv int
}

func gateCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("benchreport gate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o gateOptions
	fs.StringVar(&o.base, "base", "", "results of the base revision (`file`)")
	fs.StringVar(&o.head, "head", "", "results of the head revision (`file`)")
	threshold := fs.String("threshold", "10%", "largest tolerated `change`")
	fs.Float64Var(&o.alpha, "alpha", 0.05, "significance `level`")
	units := fs.String("units", "sec/op", "comma-separated `units` to gate on")
	filter := fs.String("filter", "", "gate only benchmarks whose name matches this `regexp`")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if o.base == "" || o.head == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "benchreport gate: want -base OLD -head NEW and no other arguments")
		return errUsage
	}
	var err error
	if o.threshold, err = parseThreshold(*threshold); err != nil {
		return err
	}
	if !(o.alpha > 0 && o.alpha < 1) {
		return fmt.Errorf("benchreport: -alpha %v: want a number between 0 and 1", o.alpha)
	}
	if o.units = splitList(*units); len(o.units) == 0 {
		return fmt.Errorf("benchreport: -units: no units")
	}
	if *filter != "" {
		if o.filter, err = regexp.Compile(*filter); err != nil {
			return fmt.Errorf("benchreport: -filter: %w", err)
		}
	}
	res, err := gate(o)
	if err != nil {
		return err
	}
	res.write(stdout)
	if res.regressions > 0 {
		return errRegression
	}
	return nil
}

// gate compares base and head. It fails if they have no benchmark in
// common in the gated units, so that a renamed suite or a wrong filter
// cannot pass the gate by comparing nothing.
func gate(o gateOptions) (*gateResult, error) {
	t, err := load(loadOptions{
		paths:  []string{"base=" + o.base, "head=" + o.head},
		labels: true,
		col:    ".file",
		filter: o.filter,
	})
	if err != nil {
		return nil, err
	}
	var baseCol, headCol benchproc.Key
	for _, c := range t.cols {
		switch c.StringValues() {
		case "base":
			baseCol = c
		case "head":
			headCol = c
		}
	}
	th := &benchmath.Thresholds{CompareAlpha: o.alpha}
	res := &gateResult{opts: o}
	for _, row := range t.rows {
		name := rowName(row)
		inBase, inHead := false, false
		for _, u := range o.units {
			var sb, sh *benchmath.Sample
			if !baseCol.IsZero() {
				sb = t.sample(row, baseCol, u, th)
			}
			if !headCol.IsZero() {
				sh = t.sample(row, headCol, u, th)
			}
			inBase, inHead = inBase || sb != nil, inHead || sh != nil
			if sb == nil || sh == nil {
				continue
			}
			r := gateRow{
				name: name, unit: u,
				base: benchmath.AssumeNothing.Summary(sb, 0.95),
				head: benchmath.AssumeNothing.Summary(sh, 0.95),
				cmp:  benchmath.AssumeNothing.Compare(sb, sh),
			}
			switch {
			case r.base.Center != 0:
				r.delta = (r.head.Center - r.base.Center) / r.base.Center
			case r.head.Center > 0:
				r.delta = math.Inf(1)
			case r.head.Center < 0:
				r.delta = math.Inf(-1)
			}
			worse := r.delta
			if higherIsBetter(u) {
				worse = -worse
			}
			if r.cmp.P < o.alpha {
				switch {
				case worse > o.threshold:
					r.verdict = regressed
					res.regressions++
				case worse < -o.threshold:
					r.verdict = improved
					res.improv++
				}
			}
			res.rows = append(res.rows, r)
		}
		switch {
		case inBase && !inHead:
			res.onlyBase = append(res.onlyBase, name)
		case inHead && !inBase:
			res.onlyHead = append(res.onlyHead, name)
		}
	}
	if len(res.rows) == 0 {
		return nil, fmt.Errorf("benchreport: %s and %s have no benchmark in common with units %s", o.base, o.head, strings.Join(o.units, ","))
	}
	return res, nil
}

// write prints the gate's report as markdown: a verdict line, then the
// regressions and the improvements, worst first.
func (r *gateResult) write(w io.Writer) {
	o := r.opts
	rule := fmt.Sprintf("a change beyond ±%s with p < %g (Mann-Whitney U) counts", pct(o.threshold), o.alpha)
	if r.regressions > 0 {
		fmt.Fprintf(w, "## ❌ benchmark gate: %d regression(s)\n\n", r.regressions)
	} else {
		fmt.Fprintf(w, "## ✅ benchmark gate: no regression\n\n")
	}
	fmt.Fprintf(w, "%d benchmark measurement(s) compared in %s; %s. %d regressed, %d improved, %d unchanged.\n",
		len(r.rows), strings.Join(o.units, ", "), rule, r.regressions, r.improv, len(r.rows)-r.regressions-r.improv)
	section := func(title string, v verdict) {
		var rows []gateRow
		for _, row := range r.rows {
			if row.verdict == v {
				rows = append(rows, row)
			}
		}
		if len(rows) == 0 {
			return
		}
		sort.SliceStable(rows, func(i, j int) bool {
			if v == regressed {
				return badness(rows[i]) > badness(rows[j])
			}
			return badness(rows[i]) < badness(rows[j])
		})
		fmt.Fprintf(w, "\n### %s\n\n| benchmark | unit | base | head | change | p |\n| --- | --- | ---: | ---: | ---: | --- |\n", title)
		for _, row := range rows {
			fmt.Fprintf(w, "| %s | %s | %s ±%s | %s ±%s | %s | %s |\n", row.name, row.unit,
				scale(row.base.Center, row.unit), row.base.PctRangeString(),
				scale(row.head.Center, row.unit), row.head.PctRangeString(),
				signedPct(row.delta), row.cmp.String())
		}
	}
	section("Regressions", regressed)
	section("Improvements", improved)
	if len(r.onlyBase) > 0 {
		fmt.Fprintf(w, "\nOnly in base (not compared): %s\n", strings.Join(r.onlyBase, ", "))
	}
	if len(r.onlyHead) > 0 {
		fmt.Fprintf(w, "\nOnly in head (not compared): %s\n", strings.Join(r.onlyHead, ", "))
	}
}

// badness is a row's change in the worse direction.
func badness(r gateRow) float64 {
	if higherIsBetter(r.unit) {
		return -r.delta
	}
	return r.delta
}

func pct(f float64) string { return fmt.Sprintf("%.4g%%", f*100) }

func signedPct(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+∞%"
	case math.IsInf(f, -1):
		return "-∞%"
	}
	return fmt.Sprintf("%+.1f%%", f*100)
}
