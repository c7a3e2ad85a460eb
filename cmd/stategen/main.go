// Command stategen generates the serializers and Open functions of state
// declared in plain Go.
//
// A state declaration is a struct type marked with a //stategen:state
// comment whose fields are the generic state handles of package
// github.com/stategen/stategen/runtime:
//
//	//go:generate go tool stategen
//
//	//stategen:state
//	type ClickState struct {
//		Clicks  runtime.Value[string, int64]              `state:"clicks"`
//		Windows runtime.SubKeyedValue[string, Window, Agg] `state:"windows"`
//	}
//
// stategen writes stategen_state.gen.go (and, unless -tests=false,
// stategen_state.gen_test.go) into each package it is given, with
// OpenClickState(runtime.Store) (*ClickState, error), DescribeClickState()
// (the states' descriptors) and the codecs of every type the states use. See package github.com/stategen/stategen/gen for the
// design and the supported types.
//
// Usage:
//
//	stategen [flags] [packages]
//	stategen compat -against DIR/ID [packages]
//	stategen checkpoint ls|inspect|verify|dump ...
//
// Packages are go command patterns (default "."), such as ./... .
//
// Flags:
//
//	-check      write nothing; report stale, missing or obsolete files
//	-tests      also generate stategen_state.gen_test.go (default true)
//	-tags list  build tags to load packages with
//	-v          print every file written or checked
//
// Exit status:
//
//	0  success: files written, or with -check, all files up to date
//	1  the declarations cannot be generated (errors are printed as
//	   file:line:col: message), or the go command or the file system failed
//	2  invalid usage
//	3  with -check: some generated file is stale, missing or obsolete
//
// stategen compat checks before deploy that the code can restore a
// checkpoint of the deployed job: for each state, unchanged, compatible
// (with what migrates at restore) or incompatible (why), by the rules a
// restore applies (package runtime/schema); exit status 3 means some state
// is incompatible. Run "stategen compat -h" for details.
//
// stategen checkpoint reads checkpoints offline: ls DIR lists a checkpoint
// directory; inspect DIR/ID prints a checkpoint's metadata; verify DIR/ID
// checks every checksum (exit status 1 names the first fault); dump DIR/ID
// -state NAME writes a state's entries as JSON lines. Run "stategen
// checkpoint" for details.
//
// # JSON output
//
// stategen checkpoint ls, inspect and verify -json write one JSON
// document on stdout, with stable field names in snake case, sizes in
// bytes, times in RFC 3339 (UTC, null when unknown) and checksums and tags
// as eight hex digits. Fields are only ever added. The schema:
//
//	ls:      {"dir", "checkpoints": [{"id", "name", "type", "time",
//	          "size_bytes", "full_bytes", "operators": [{"id",
//	          "parallelism"}], "states": [name], "error"}]}
//	inspect: {"name", "id", "time", "format_version", "size_bytes",
//	          "full_bytes", "data_files", "properties": {k: v},
//	          "operators": [{"id", "max_parallelism", "key_groups":
//	          {"start", "end"}, "parallelism", "states": [{"name", "kind",
//	          "sub_keyed", "fingerprint", "schema"}], "instances":
//	          [{"index", "key_groups", "file": FILE, "references": [FILE],
//	          "operator_state_bytes"}]}]}
//	FILE:    {"name", "size_bytes", "crc32c", "tag", "entries", "delta",
//	          "checkpoint"}
//	verify:  {"name", "ok", "data_files", "size_bytes", "seconds",
//	          "fault": null | {"message", "path", "offset", "field",
//	          "reason"}}
//
// "size_bytes" is what the checkpoint wrote and owns, "full_bytes" that
// and the files of earlier checkpoints it references (an incremental
// checkpoint's chain, "references", oldest first; its own "file" is then
// "delta", changes, applied last); "checkpoint" names a referenced file's
// owner and is absent for the checkpoint's own files. "error" (ls) is
// present only for a checkpoint whose metadata cannot be read; "type" is "checkpoint" unless the metadata says otherwise
// ("savepoint"); "tag" is "" for format version 1; "offset" is -1 when the
// fault has no byte offset.
//
// stategen runs as a tool of the module (Go 1.24 and later), added once
// with go get -tool github.com/stategen/stategen/cmd/stategen: the tool
// directive pins its version and keeps its dependencies in go.mod and
// go.sum through go mod tidy, which a go:generate line of the form
// "go run github.com/stategen/stategen/cmd/stategen" would need and lose.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/stategen/stategen/gen"
)

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
	exitStale = 3
)

const usage = `usage: stategen [flags] [packages]
       stategen compat -against DIR/ID [packages] (run "stategen compat -h" for help)
       stategen checkpoint ls|inspect|verify|dump ... (run "stategen checkpoint" for help)

stategen generates serializers and Open functions for the structs marked
//stategen:state in the given packages (default "."), into
stategen_state.gen.go and stategen_state.gen_test.go in each package.

Flags:
`

const examples = `
Examples:

  Once per module (Go 1.24+), pin stategen as a tool:
	go get -tool github.com/stategen/stategen/cmd/stategen

  In a package, next to the declarations:
	//go:generate go tool stategen

  Generate for every package of a module:
	stategen ./...

  In CI, fail if generated code is stale:
	stategen -check ./...

  Before deploy, fail if the code cannot restore the deployed job's checkpoint:
	stategen compat -against /checkpoints/chk-00000000000000000042 ./...

Exit status: 0 ok, 1 generation errors, 2 usage, 3 stale (with -check) or
incompatible (compat).
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command: it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "checkpoint" {
		return runCheckpoint(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "compat" {
		return runCompat(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("stategen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	check := fs.Bool("check", false, "write nothing; exit 3 if a generated file is stale, missing or obsolete")
	tests := fs.Bool("tests", true, "also generate "+gen.TestFileName+" with round-trip, order and fuzz tests")
	tags := fs.String("tags", "", "comma-separated build tags to load packages with")
	verbose := fs.Bool("v", false, "print every file written or checked")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
		fmt.Fprint(stderr, examples)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	cfg := gen.Config{NoTests: !*tests}
	if *tags != "" {
		cfg.BuildFlags = []string{"-tags=" + *tags}
	}
	patterns := fs.Args()
	if len(patterns) == 0 {
		patterns = []string{"."}
	}
	files, err := gen.Generate(cfg, patterns...)
	if err != nil {
		var list gen.ErrorList
		if errors.As(err, &list) {
			for _, e := range list {
				fmt.Fprintln(stderr, relError(e))
			}
		} else {
			fmt.Fprintln(stderr, err)
		}
		return exitError
	}
	status := exitOK
	for _, f := range files {
		name := relPath(f.Path)
		if *check {
			diff, err := f.Check()
			if err != nil {
				fmt.Fprintln(stderr, err)
				return exitError
			}
			if diff != "" {
				fmt.Fprintf(stderr, "%s: %s\n", name, diff)
				status = exitStale
			} else if *verbose && f.Content != nil {
				fmt.Fprintf(stdout, "%s: up to date\n", name)
			}
			continue
		}
		changed, err := f.Write()
		if err != nil {
			fmt.Fprintln(stderr, err)
			return exitError
		}
		if *verbose {
			switch {
			case changed && f.Content == nil:
				fmt.Fprintf(stdout, "%s: removed\n", name)
			case changed:
				fmt.Fprintf(stdout, "%s: written\n", name)
			case f.Content != nil:
				fmt.Fprintf(stdout, "%s: unchanged\n", name)
			}
		}
	}
	if status == exitStale {
		fmt.Fprintln(stderr, "stategen: generated files are out of date; run stategen (go generate) and commit the result")
	}
	return status
}

// relPath shortens a path to one relative to the working directory when it
// lies below it.
func relPath(p string) string {
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	rel, err := filepath.Rel(wd, p)
	if err != nil || filepath.IsAbs(rel) || len(rel) >= 2 && rel[:2] == ".." {
		return p
	}
	return rel
}

// relError formats e with a relative file name.
func relError(e *gen.Error) string {
	if !e.Pos.IsValid() {
		return e.Msg
	}
	p := e.Pos
	p.Filename = relPath(p.Filename)
	return p.String() + ": " + e.Msg
}
