// Command clickstream is stategen's end-to-end demonstration: a click
// stream processed by parallel operator instances with typed, generated
// state on a pluggable backend, periodic asynchronous checkpoints, a
// crash, a restore at another parallelism, a replay, and the proof that
// the final state equals that of an uninterrupted run.
//
//	go run ./examples/clickstream [flags]
//
// See package github.com/stategen/stategen/examples/clickstream/pipeline
// for the design. Exit status: 0 verified, 1 the run failed or the final
// state differs from the reference, 2 invalid flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/stategen/stategen/examples/clickstream/pipeline"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the command; it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cfg pipeline.Config
	fs := flag.NewFlagSet("clickstream", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Backend, "backend", pipeline.DefaultBackend, "state backend: "+strings.Join(pipeline.Backends(), ", "))
	fs.BoolVar(&cfg.Incremental, "incremental", true, "write incremental checkpoints: each the changes since the last completed one (-incremental=false: every checkpoint in full)")
	fs.BoolVar(&cfg.LocalRecovery, "local-recovery", false, "keep a local copy of each instance's checkpoint files and restore from it where the key groups allow")
	fs.IntVar(&cfg.PBefore, "p-before", pipeline.DefaultPBefore, "parallelism before the crash")
	fs.IntVar(&cfg.PAfter, "p-after", pipeline.DefaultPAfter, "parallelism after the restore")
	fs.Int64Var(&cfg.Events, "events", pipeline.DefaultEvents, "number of events in the stream")
	fs.IntVar(&cfg.Users, "users", pipeline.DefaultUsers, "number of distinct users")
	fs.DurationVar(&cfg.Interval, "interval", pipeline.DefaultInterval, "checkpoint interval")
	fs.StringVar(&cfg.Dir, "dir", "", "checkpoint directory (default: a temporary directory, removed at exit unless -keep)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the temporary checkpoint directory")
	fs.Float64Var(&cfg.CrashAt, "crash-at", pipeline.DefaultCrashAt, "where the crash happens, as a fraction of the stream in (0, 1)")
	fs.Uint64Var(&cfg.Seed, "seed", pipeline.DefaultSeed, "seed of the synthetic stream (not 0)")
	quiet := fs.Bool("q", false, "no progress lines")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "clickstream: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	// Zero means "default" in Config; on the command line it is an error.
	var bad *pipeline.ConfigError
	switch {
	case cfg.Seed == 0:
		bad = &pipeline.ConfigError{Flag: "seed", Reason: "0 is not a valid seed"}
	case cfg.PBefore <= 0:
		bad = &pipeline.ConfigError{Flag: "p-before", Reason: fmt.Sprintf("parallelism %d is not positive", cfg.PBefore)}
	case cfg.PAfter <= 0:
		bad = &pipeline.ConfigError{Flag: "p-after", Reason: fmt.Sprintf("parallelism %d is not positive", cfg.PAfter)}
	case cfg.Events <= 0:
		bad = &pipeline.ConfigError{Flag: "events", Reason: fmt.Sprintf("%d events: need at least 2", cfg.Events)}
	case cfg.Users <= 0:
		bad = &pipeline.ConfigError{Flag: "users", Reason: fmt.Sprintf("%d users: need at least 1", cfg.Users)}
	case cfg.Interval <= 0:
		bad = &pipeline.ConfigError{Flag: "interval", Reason: fmt.Sprintf("%v is not positive", cfg.Interval)}
	case cfg.CrashAt <= 0:
		bad = &pipeline.ConfigError{Flag: "crash-at", Reason: fmt.Sprintf("%v is not a fraction in (0, 1)", cfg.CrashAt)}
	}
	if bad != nil {
		fmt.Fprintf(stderr, "clickstream: %v\n", bad)
		return 2
	}
	if !*quiet {
		cfg.Progress = stderr
	}
	rep, err := pipeline.Run(ctx, cfg)
	if errors.As(err, &bad) {
		fmt.Fprintf(stderr, "clickstream: %v\n", err)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "clickstream: %v\n", err)
		return 1
	}
	rep.Print(stdout)
	if !rep.Verified() {
		return 1
	}
	return 0
}
