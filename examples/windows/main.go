// Command windows builds tumbling, sliding and session windows with
// allowed lateness on stategen's primitives alone — window states keyed by
// user with the window as namespace, event-time timers, namespace merging,
// a union operator list — runs them over a synthetic stream with late
// events, crashes, restores the latest checkpoint at another parallelism,
// replays, and checks the output against a plain-Go computation of the same
// windows:
//
//	go run ./examples/windows [-backend cow|btree|pebble] [-p-before 3] [-p-after 2]
//
// See package github.com/stategen/stategen/examples/windows/job for the
// semantics. Exit status: 0 verified, 1 the run failed or the output
// differs from the reference, 2 invalid flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/stategen/stategen/examples/windows/job"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	cfg := job.Config{Stream: job.Stream{Seed: 1}}
	fs := flag.NewFlagSet("windows", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Backend, "backend", "cow", "state backend: "+strings.Join(job.Backends(), ", "))
	fs.IntVar(&cfg.PBefore, "p-before", 3, "parallelism before the crash")
	fs.IntVar(&cfg.PAfter, "p-after", 2, "parallelism after the restore")
	fs.Int64Var(&cfg.Stream.Events, "events", 40000, "records in the stream (events and watermarks)")
	fs.IntVar(&cfg.Stream.Users, "users", 40, "distinct users")
	fs.Uint64Var(&cfg.Stream.Seed, "seed", 1, "seed of the stream")
	fs.Int64Var(&cfg.CheckpointEvery, "checkpoint-every", 3000, "records between two checkpoints")
	crash := fs.Float64("crash-at", 0.63, "where the crash happens, as a fraction of the stream in (0, 1)")
	fs.StringVar(&cfg.Dir, "dir", "", "working directory for checkpoints and stores (default: a temporary one, removed at exit)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "windows: "+format+"\n", a...)
		return 2
	}
	switch {
	case fs.NArg() > 0:
		return bad("unexpected argument %q", fs.Arg(0))
	case !strings.Contains(" "+strings.Join(job.Backends(), " ")+" ", " "+cfg.Backend+" "):
		return bad("-backend %q: want one of %s", cfg.Backend, strings.Join(job.Backends(), ", "))
	case cfg.PBefore < 1 || cfg.PAfter < 1:
		return bad("-p-before and -p-after must be at least 1")
	case cfg.Stream.Events < 100 || cfg.Stream.Users < 1:
		return bad("-events must be at least 100 and -users at least 1")
	case !(*crash > 0 && *crash < 1):
		return bad("-crash-at %v: want a fraction in (0, 1)", *crash)
	case cfg.CheckpointEvery < 1:
		return bad("-checkpoint-every must be at least 1")
	}
	cfg.CrashAt = int64(*crash * float64(cfg.Stream.Events))
	if cfg.CrashAt < cfg.CheckpointEvery {
		return bad("-crash-at %v of %d records comes before the first checkpoint (every %d records)", *crash, cfg.Stream.Events, cfg.CheckpointEvery)
	}
	if cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "stategen-windows-")
		if err != nil {
			fmt.Fprintln(stderr, "windows:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		cfg.Dir = dir
	}
	rep, err := job.Run(context.Background(), cfg, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "windows:", err)
		return 1
	}
	for i, d := range rep.Differences {
		if i == 10 {
			fmt.Fprintf(stdout, "... and %d more\n", len(rep.Differences)-i)
			break
		}
		fmt.Fprintln(stdout, "difference:", d)
	}
	fmt.Fprintf(stdout, "verified: %d tumbling, %d sliding and %d session results, %d (event, window) pairs dropped as too late, %d differences\n",
		rep.Results[job.Tumbling], rep.Results[job.Sliding], rep.Results[job.Session], rep.Dropped, len(rep.Differences))
	if len(rep.Differences) > 0 {
		return 1
	}
	return 0
}
