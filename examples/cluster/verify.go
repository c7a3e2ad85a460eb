package main

import (
	"context"
	"encoding/gob"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/examples/clickstream/pipeline"
	"github.com/stategen/stategen/runtime"
)

// dumpMagic starts a dump file, so that verify refuses anything else.
const dumpMagic = "stategen-cluster-dump-v1"

// writeDump writes c to path atomically (a temporary file renamed), so
// that a worker killed while writing leaves no partial dump.
func writeDump(path string, c pipeline.Contents) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	enc := gob.NewEncoder(f)
	err = enc.Encode(dumpMagic)
	if err == nil {
		err = enc.Encode(map[string]string(c))
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("dump %s: %w", path, err)
	}
	return nil
}

// readDump reads a file written by writeDump.
func readDump(path string) (pipeline.Contents, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := gob.NewDecoder(f)
	var magic string
	if err := dec.Decode(&magic); err != nil || magic != dumpMagic {
		return nil, fmt.Errorf("%s: not a worker's dump", path)
	}
	var c map[string]string
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%s: corrupt dump: %w", path, err)
	}
	return c, nil
}

// union merges the dumps of a job's workers, which own disjoint key
// groups: an entry in two dumps is an error.
func union(paths []string) (pipeline.Contents, error) {
	out := make(pipeline.Contents)
	for _, p := range paths {
		c, err := readDump(p)
		if err != nil {
			return nil, err
		}
		for k, v := range c {
			if _, dup := out[k]; dup {
				return nil, fmt.Errorf("%s: an entry is also in another dump: the workers' key groups overlap", p)
			}
			out[k] = v
		}
	}
	return out, nil
}

// reference processes the whole stream on one in-process store, without
// checkpoints, and returns its Contents: what the job must end with.
func reference(ctx context.Context, s pipeline.Stream, maxParallelism int) (pipeline.Contents, error) {
	store, err := cow.New(cow.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: maxParallelism, KeyGroups: runtime.FullRange(maxParallelism)}})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	st, err := pipeline.OpenClickState(store)
	if err != nil {
		return nil, err
	}
	for i := range s.Len {
		if i%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if err := pipeline.Process(st, s.Event(i)); err != nil {
			return nil, fmt.Errorf("reference: event %d: %w", i, err)
		}
	}
	return pipeline.Dump([]runtime.Store{store})
}

// verification compares the union of the dumps with the reference; it
// returns the number of entries and the differences (at most five shown).
func verification(ctx context.Context, s pipeline.Stream, maxParallelism int, dumps []string) (keys, n int, first []string, err error) {
	got, err := union(dumps)
	if err != nil {
		return 0, 0, nil, err
	}
	want, err := reference(ctx, s, maxParallelism)
	if err != nil {
		return 0, 0, nil, err
	}
	n, first = pipeline.Compare(got, want, 5)
	return len(want), n, first, nil
}

// runVerify is "cluster verify".
func runVerify(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var s pipeline.Stream
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Int64Var(&s.Len, "events", pipeline.DefaultEvents, "number of events in the stream")
	fs.Uint64Var(&s.Seed, "seed", pipeline.DefaultSeed, "seed of the stream (not 0)")
	fs.IntVar(&s.Users, "users", pipeline.DefaultUsers, "number of distinct users")
	maxP := fs.Int("max-parallelism", runtime.DefaultMaxParallelism, "number of key groups")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	var bad string
	switch {
	case fs.NArg() == 0:
		bad = "no dump files given"
	case s.Len < 1:
		bad = fmt.Sprintf("-events: %d is not positive", s.Len)
	case s.Seed == 0:
		bad = "-seed: 0 is not a valid seed"
	case s.Users < 1:
		bad = fmt.Sprintf("-users: %d is not positive", s.Users)
	case runtime.ValidateMaxParallelism(*maxP) != nil:
		bad = fmt.Sprintf("-max-parallelism: %v", runtime.ValidateMaxParallelism(*maxP))
	}
	if bad != "" {
		fmt.Fprintf(stderr, "cluster verify: %s\n", bad)
		return 2
	}
	keys, n, first, err := verification(ctx, s, *maxP, fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "cluster verify: %v\n", err)
		return 1
	}
	if n != 0 {
		fmt.Fprintf(stdout, "FAILED: %d of %d entries differ from the reference run; first:\n", n, keys)
		for _, d := range first {
			fmt.Fprintf(stdout, "  %s\n", d)
		}
		return 1
	}
	fmt.Fprintf(stdout, "verified: the %d workers' final state (%d entries) equals the reference run's\n", fs.NArg(), keys)
	return 0
}
