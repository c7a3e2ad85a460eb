// Command benchreport turns the output of `go test -bench` into the reports
// of stategen's benchmarks: the backend comparison table, the base-vs-head
// regression gate that CI runs on every pull request, and an SVG chart of
// the backend comparison.
//
// It reads the standard Go benchmark format with golang.org/x/perf/benchfmt,
// groups results with benchproc projections (the sub-benchmark key /backend
// for columns, the rest of the name for rows) and compares samples with
// benchmath, as benchstat does: the center of a sample is its median, its
// spread the 95% confidence interval of the median, and two samples differ
// significantly when the Mann-Whitney U test gives p < alpha. Run each
// benchmark with -count 6 or more: with fewer samples no difference can be
// significant at alpha 0.05.
//
// Usage:
//
//	benchreport compare-backends [flags] FILE...
//	benchreport gate -base OLD -head NEW [flags]
//	benchreport chart -o chart.svg [flags] FILE...
//	benchreport fill [-check] REPORT.md
//
// compare-backends prints a markdown table per unit: one row per operation
// (the benchmark name without its backend=<name> key, e.g.
// ValueGet/keys=1M), one column per backend, the reference backend (-ref,
// default cow) first. Each cell is the median ± its confidence interval;
// other columns add their ratio to the reference (2.00× means twice the
// reference's value) and the p-value, or "~" when the difference is not
// significant. Columns come in the order the backends first appear in the
// input (the order of the suite's backend table), the reference first.
// Benchmarks that name their contenders codec=<name> rather than
// backend=<name> get a column per codec.
//
//	-ref name      reference column (default cow)
//	-units list    comma-separated units to tabulate (default sec/op)
//	-alpha a       significance level (default 0.05)
//	-filter re     keep only benchmarks whose name (without "Benchmark")
//	               matches the regular expression
//
// gate compares the benchmarks present in both files and exits with status
// 1 when any of them regressed: its center moved in the worse direction by
// more than -threshold with p < -alpha. It prints a markdown report of the
// regressions and improvements, suitable for $GITHUB_STEP_SUMMARY. For time,
// bytes and allocations lower is better; for rates (units ending in /s)
// and speed ratios (units beginning with speed-, as speed-vs-plain) higher
// is better.
//
//	-base file     results of the base revision (required)
//	-head file     results of the head revision (required)
//	-threshold t   largest tolerated change, "10%" or 0.1 (default 10%)
//	-alpha a       significance level (default 0.05)
//	-units list    units to gate on (default sec/op; add B/op,allocs/op
//	               to gate on memory too)
//	-filter re     gate only benchmarks whose name matches
//
// chart writes an SVG picture of the backend comparison of one unit: a
// group of horizontal bars per operation, one bar per backend, on a
// logarithmic axis, with a legend. It takes -o (the output file, default
// stdout), the -ref, -filter and -alpha flags of compare-backends, and
// -unit (default sec/op).
//
// fill regenerates the tables of a markdown report from the results they
// were made from: every block that opens with a comment
// "<!-- benchreport compare-backends ARGS... -->" (or chart) and closes with
// "<!-- end benchreport -->" gets the command's output as its content, the
// prose around the blocks is kept, and file names in ARGS are relative to
// the report. -check rewrites nothing and exits with status 1 if a block is
// out of date. benchmarks/REPORT.md is made this way.
//
// Exit status: 0 on success, 1 when the gate finds a regression (or fill
// -check a stale block), 2 on bad usage or unreadable input.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// errRegression is returned by the gate when it finds a regression.
var errRegression = errors.New("benchreport: regression")

// errUsage is returned for bad command lines; the flag package has already
// printed what was wrong.
var errUsage = errors.New("benchreport: usage")

const usage = `usage:
  benchreport compare-backends [-ref cow] [-units sec/op] [-alpha 0.05] [-filter re] FILE...
  benchreport gate -base OLD -head NEW [-threshold 10%] [-alpha 0.05] [-units sec/op] [-filter re]
  benchreport chart [-o chart.svg] [-ref cow] [-unit sec/op] [-filter re] FILE...
  benchreport fill [-check] REPORT.md
run "go doc github.com/stategen/stategen/benchmarks/cmd/benchreport" for details
`

// run is main without the process: it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "compare-backends":
		err = compareBackendsCmd(args[1:], stdout, stderr)
	case "gate":
		err = gateCmd(args[1:], stdout, stderr)
	case "chart":
		err = chartCmd(args[1:], stdout, stderr)
	case "fill":
		err = fillCmd(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "benchreport: unknown command %q\n%s", args[0], usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errRegression):
		return 1
	case errors.Is(err, errUsage):
		return 2
	default:
		fmt.Fprintln(stderr, err)
		return 2
	}
}
