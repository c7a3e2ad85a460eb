package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/checkpoint/inspect"
	"github.com/stategen/stategen/runtime"
)

const checkpointUsage = `usage: stategen checkpoint <command> [arguments]

Commands:

  ls DIR                        list the committed checkpoints of checkpoint directory DIR:
                                id, time, size, parallelism, states
  inspect DIR/ID                print a checkpoint's metadata: operators, states with kinds
                                and fingerprints, key-group ranges, files and sizes
  verify DIR/ID                 read every block of every file and check every checksum;
                                exit status 1 names the first fault
  dump DIR/ID -state NAME [-operator OP]
                                write a state's entries as JSON lines, keys and values in hex

ls, inspect and verify take -json: one JSON document on stdout, stable field names,
sizes in bytes (schema: go doc github.com/stategen/stategen/cmd/stategen).
ID is a checkpoint's name (chk-00000000000000000042) or its id (42).
A program with the job's generated codecs can decode entries itself: see package
github.com/stategen/stategen/checkpoint/inspect.

Exit status: 0 ok, 1 error (or a fault found by verify), 2 usage.
`

// runCheckpoint runs "stategen checkpoint ..." and returns the exit status.
func runCheckpoint(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, checkpointUsage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cmd, args := args[0], args[1:]
	switch cmd {
	case "ls":
		return checkpointLs(ctx, args, stdout, stderr)
	case "inspect":
		return checkpointInspect(ctx, args, stdout, stderr)
	case "verify":
		return checkpointVerify(ctx, args, stdout, stderr)
	case "dump":
		return checkpointDump(ctx, args, stdout, stderr)
	}
	fmt.Fprintf(stderr, "stategen checkpoint: unknown command %q\n\n%s", cmd, checkpointUsage)
	return exitUsage
}

// parseInterspersed parses flags that may come before or after the
// positional arguments ("dump DIR/ID -state NAME"), and returns the
// positional arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// commandFlags makes the flag set of a subcommand and parses args into it,
// requiring exactly one positional argument. It returns the argument, or
// an exit status (ok is false).
func commandFlags(name, arg string, args []string, stderr io.Writer, define func(*flag.FlagSet)) (pos string, status int, ok bool) {
	fs := flag.NewFlagSet("stategen checkpoint "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	if define != nil {
		define(fs)
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: stategen checkpoint %s %s\n", name, arg)
		fs.PrintDefaults()
	}
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return "", exitOK, false
		}
		return "", exitUsage, false
	}
	if len(rest) != 1 {
		fmt.Fprintf(stderr, "stategen checkpoint %s: want one argument, %s; got %d\n", name, arg, len(rest))
		fs.Usage()
		return "", exitUsage, false
	}
	return rest[0], exitOK, true
}

// fail prints err for command name and returns exitError.
func fail(stderr io.Writer, name string, err error) int {
	fmt.Fprintf(stderr, "stategen checkpoint %s: %v\n", name, err)
	return exitError
}

// checkpointLs lists the committed checkpoints of a directory.
func checkpointLs(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var asJSON bool
	dir, status, ok := commandFlags("ls", "DIR", args, stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "one JSON document on stdout (schema: go doc github.com/stategen/stategen/cmd/stategen)")
	})
	if !ok {
		return status
	}
	if fi, err := os.Stat(dir); err != nil {
		return fail(stderr, "ls", err)
	} else if !fi.IsDir() {
		return fail(stderr, "ls", fmt.Errorf("%s is not a directory", dir))
	}
	s, err := checkpoint.NewDir(dir)
	if err != nil {
		return fail(stderr, "ls", err)
	}
	names, err := checkpoint.List(ctx, s)
	if err != nil {
		return fail(stderr, "ls", err)
	}
	doc := jsonLs{Dir: dir, Checkpoints: []jsonCheckpoint{}}
	status = exitOK
	for _, name := range names {
		m, err := checkpoint.ReadMetadata(ctx, s, name)
		if err != nil {
			status = exitError
		}
		doc.Checkpoints = append(doc.Checkpoints, lsEntry(name, m, err))
	}
	if asJSON {
		if err := writeJSON(stdout, doc); err != nil {
			return fail(stderr, "ls", err)
		}
		return status
	}
	if len(names) == 0 {
		fmt.Fprintf(stderr, "stategen checkpoint ls: no committed checkpoint in %s\n", dir)
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tTYPE\tTIME\tSIZE\tFULL\tPARALLELISM\tSTATES")
	for _, c := range doc.Checkpoints {
		if c.Error != "" {
			fmt.Fprintf(tw, "-\t%s\t-\t-\t-\t-\t-\terror: %s\n", c.Name, c.Error)
			continue
		}
		var par []string
		for _, op := range c.Operators {
			p := fmt.Sprint(op.Parallelism)
			if len(c.Operators) > 1 {
				p = op.ID + "=" + p
			}
			par = append(par, p)
		}
		when := "-"
		if c.Time != nil {
			when = formatTime(*c.Time)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.ID, c.Name, c.Type,
			when, formatSize(c.SizeBytes), formatSize(c.FullBytes), strings.Join(par, ","), strings.Join(c.States, ","))
	}
	tw.Flush()
	return status
}

// openCheckpoint opens the checkpoint DIR/ID.
func openCheckpoint(ctx context.Context, path string) (*inspect.Checkpoint, error) {
	dir, ckpt := inspect.Split(path)
	if fi, err := os.Stat(dir); err != nil {
		return nil, err
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	return inspect.Open(ctx, dir, ckpt)
}

// checkpointInspect prints a checkpoint's metadata.
func checkpointInspect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var asJSON bool
	path, status, ok := commandFlags("inspect", "DIR/ID", args, stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "one JSON document on stdout (schema: go doc github.com/stategen/stategen/cmd/stategen)")
	})
	if !ok {
		return status
	}
	c, err := openCheckpoint(ctx, path)
	if err != nil {
		return fail(stderr, "inspect", err)
	}
	if asJSON {
		if err := writeJSON(stdout, inspectDoc(c)); err != nil {
			return fail(stderr, "inspect", err)
		}
		return exitOK
	}
	m := c.Metadata()
	fmt.Fprintf(stdout, "checkpoint %s\n", c.Name())
	fmt.Fprintf(stdout, "  id:       %d\n", m.CheckpointID)
	fmt.Fprintf(stdout, "  time:     %s\n", formatTime(m.Timestamp))
	fmt.Fprintf(stdout, "  format:   version %d\n", m.FormatVersion)
	fmt.Fprintf(stdout, "  size:     %s in %d data files\n", formatSize(c.Size()), countFiles(m))
	if full := c.FullSize(); full != c.Size() {
		fmt.Fprintf(stdout, "  full:     %s with the files of earlier checkpoints it references (incremental)\n", formatSize(full))
	}
	for _, k := range slices.Sorted(maps.Keys(m.Properties)) {
		fmt.Fprintf(stdout, "  property: %s=%s\n", k, m.Properties[k])
	}
	for _, op := range m.Operators {
		fmt.Fprintf(stdout, "operator %q: maxParallelism %d, key groups %v, parallelism %d\n",
			op.ID, op.MaxParallelism, op.KeyGroups, len(op.Instances))
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  STATE\tKIND\tSUB-KEYED\tFINGERPRINT")
		for _, s := range op.States {
			fmt.Fprintf(tw, "  %s\t%s\t%t\t%s\n", s.Name, s.Kind, s.SubKeyed, s.Fingerprint)
		}
		tw.Flush()
		// The writer's schemas, from which a restore migrates the states
		// whose types changed since.
		fmt.Fprintln(stdout, "  SCHEMAS (the writer's)")
		for _, s := range op.States {
			sch := s.Schema
			if sch == "" {
				sch = "(none recorded: hand-written descriptor, or format version before 3)"
			}
			fmt.Fprintf(stdout, "  %s: %s\n", s.Name, sch)
		}
		tw = tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  INSTANCE\tKEY-GROUPS\tFILE\tKIND\tSIZE\tCRC32C\tTAG\tENTRIES\tOPERATOR-STATE")
		chains := false
		for i, in := range op.Instances {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%08x\t%s\t%d\t%dB\n", i, formatRange(in.KeyGroups), in.File.Name, fileKind(in.File),
				formatSize(in.File.Size), in.File.CRC32C, fileTag(m, in.File), in.File.Entries, len(in.OperatorState))
			chains = chains || len(in.Base) > 0
		}
		tw.Flush()
		if chains {
			// The files this checkpoint references and does not own, in
			// the order a restore applies them, its own file last.
			fmt.Fprintln(stdout, "  REFERENCES (files of earlier checkpoints, oldest first; a restore applies the instance's own file last)")
			tw = tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "  INSTANCE\tCHECKPOINT\tFILE\tKIND\tSIZE\tCRC32C\tTAG\tENTRIES")
			for i, in := range op.Instances {
				for _, ref := range in.Base {
					fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%08x\t%s\t%d\n", i, ref.Checkpoint, ref.File.Name, fileKind(ref.File),
						formatSize(ref.File.Size), ref.File.CRC32C, fileTag(m, ref.File), ref.File.Entries)
				}
			}
			tw.Flush()
		}
	}
	return exitOK
}

// fileKind says whether f is a full file or a file of changes.
func fileKind(f checkpoint.File) string {
	if f.Delta {
		return "changes"
	}
	return "full"
}

// fileTag formats f's tag; a version-1 file has none.
func fileTag(m *checkpoint.Metadata, f checkpoint.File) string {
	if m.FormatVersion >= 2 {
		return fmt.Sprintf("%08x", f.Tag)
	}
	return "-"
}

// checkpointVerify checks every byte of a checkpoint.
func checkpointVerify(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var quiet, asJSON bool
	path, status, ok := commandFlags("verify", "DIR/ID", args, stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&quiet, "q", false, "no progress lines (shown on stderr only when it is a terminal)")
		fs.BoolVar(&asJSON, "json", false, "one JSON document on stdout, the fault included (schema: go doc github.com/stategen/stategen/cmd/stategen)")
	})
	if !ok {
		return status
	}
	c, err := openCheckpoint(ctx, path)
	if err != nil {
		return fail(stderr, "verify", err)
	}
	var progress func(inspect.Progress)
	start := time.Now()
	if !quiet && isTerminal(stderr) {
		total := 2 * c.Size() // Verify reads every file twice
		progress = func(p inspect.Progress) {
			fmt.Fprintln(stderr, progressLine(p, total, time.Since(start)))
		}
	}
	if asJSON {
		verr := c.Verify(ctx, progress)
		if err := writeJSON(stdout, verifyDoc(c, time.Since(start), verr)); err != nil {
			return fail(stderr, "verify", err)
		}
		if verr != nil {
			return exitError
		}
		return exitOK
	}
	if err := c.Verify(ctx, progress); err != nil {
		fmt.Fprintf(stderr, "stategen checkpoint verify: %s: FAULT: %v\n", c.Name(), err)
		return exitError
	}
	fmt.Fprintf(stdout, "%s: ok: %d files, %s, every checksum verified in %v\n",
		c.Name(), countFiles(c.Metadata()), formatSize(c.Size()), time.Since(start).Round(time.Millisecond))
	return exitOK
}

// checkpointDump writes a state's entries as JSON lines.
func checkpointDump(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var state, operator string
	var quiet bool
	path, status, ok := commandFlags("dump", "DIR/ID -state NAME [-operator OP]", args, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&state, "state", "", "the state to dump (required)")
		fs.StringVar(&operator, "operator", "", "the operator whose state to dump (default: the checkpoint's only operator)")
		fs.BoolVar(&quiet, "q", false, "no progress lines (shown on stderr only when it is a terminal)")
	})
	if !ok {
		return status
	}
	if state == "" {
		fmt.Fprintln(stderr, "stategen checkpoint dump: -state NAME is required")
		return exitUsage
	}
	c, err := openCheckpoint(ctx, path)
	if err != nil {
		return fail(stderr, "dump", err)
	}
	if operator == "" {
		ops := c.Metadata().Operators
		if len(ops) != 1 {
			ids := make([]string, len(ops))
			for i, op := range ops {
				ids[i] = op.ID
			}
			fmt.Fprintf(stderr, "stategen checkpoint dump: the checkpoint has %d operators (%s): choose one with -operator\n", len(ops), strings.Join(ids, ", "))
			return exitUsage
		}
		operator = ops[0].ID
	}
	var progress func(inspect.Progress)
	if !quiet && isTerminal(stderr) {
		start := time.Now()
		progress = func(p inspect.Progress) { fmt.Fprintln(stderr, entriesLine(p, time.Since(start))) }
	}
	if _, err := c.DumpProgress(ctx, stdout, operator, state, nil, progress); err != nil {
		return fail(stderr, "dump", err)
	}
	return exitOK
}

// entriesLine describes the progress of long work that goes through
// p.TotalEntries entries: done, bytes read, rate and time left.
func entriesLine(p inspect.Progress, elapsed time.Duration) string {
	line := fmt.Sprintf("  ... %d of %d entries", p.Entries, p.TotalEntries)
	if p.TotalEntries > 0 {
		line += fmt.Sprintf(" (%d%%)", min(100, p.Entries*100/p.TotalEntries))
	}
	line += fmt.Sprintf(", %s read", formatSize(p.BytesRead))
	if secs := elapsed.Seconds(); secs > 0 && p.Entries > 0 {
		rate := float64(p.Entries) / secs
		line += fmt.Sprintf(", %.0f entries/s", rate)
		if left := p.TotalEntries - p.Entries; left > 0 {
			line += fmt.Sprintf(", ETA %v", (time.Duration(float64(left) / rate * float64(time.Second))).Round(time.Second))
		}
	}
	return line
}

func countFiles(m *checkpoint.Metadata) int {
	n := 0
	for _, op := range m.Operators {
		n += len(op.Instances)
	}
	return n
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// isTerminal reports whether w is a terminal: progress goes to stderr only
// then, never into a file or a pipe.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progressLine describes the progress of long work that reads total bytes:
// done, rate and time left.
func progressLine(p inspect.Progress, total int64, elapsed time.Duration) string {
	line := fmt.Sprintf("  ... %s of %s read", formatSize(p.BytesRead), formatSize(total))
	if total > 0 {
		line += fmt.Sprintf(" (%d%%)", min(100, p.BytesRead*100/total))
	}
	if secs := elapsed.Seconds(); secs > 0 && p.BytesRead > 0 {
		rate := float64(p.BytesRead) / secs
		line += fmt.Sprintf(", %s/s", formatSize(int64(rate)))
		if left := total - p.BytesRead; left > 0 {
			line += fmt.Sprintf(", ETA %v", (time.Duration(float64(left) / rate * float64(time.Second))).Round(time.Second))
		}
	}
	return line + fmt.Sprintf(", file %d of %d (%s)", p.File, p.Files, p.FileName)
}

// formatRange formats a key-group range for a column: one field, "[0,64)".
func formatRange(r runtime.KeyGroupRange) string { return fmt.Sprintf("[%d,%d)", r.Start, r.End) }

// formatSize formats a size for a column: one field, such as "390.3KiB",
// so that a script splitting lines on white space finds every column.
func formatSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%dB", n)
	}
}
