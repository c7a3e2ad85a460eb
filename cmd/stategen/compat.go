package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/stategen/stategen/gen/load"
	"github.com/stategen/stategen/gen/model"
	"github.com/stategen/stategen/runtime/schema"
)

const compatUsage = `usage: stategen compat -against DIR/ID [-operator OP] [-tags list] [packages]

compat checks, before deploy, that the code in packages (default ".") can
restore checkpoint DIR/ID — the deployed job's latest checkpoint or
savepoint, or one saved from the last release. For every state it says
whether its schema is unchanged, compatible (and what migrates at restore),
or incompatible (and why), by the rules a restore applies (package
runtime/schema). States the checkpoint has and the code no longer declares
are listed too: a restore keeps them by default.

Exit status: 0 every state restores, 1 error, 2 usage, 3 some state is
incompatible (or declared twice with different schemas): the restore of
the deployed job would fail.

Flags:
`

// codeState is a state the code declares.
type codeState struct {
	name, schema string
	where        []string // "pkg.Struct.Field (file:line)", every declaration
	migrations   []codeMigration
}

// codeMigration is a //stategen:migrate function of a state.
type codeMigration struct{ fn, from string }

// runCompat is "stategen compat".
func runCompat(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("stategen compat", flag.ContinueOnError)
	fs.SetOutput(stderr)
	against := fs.String("against", "", "the checkpoint to restore: DIR/ID, as stategen checkpoint inspect takes (required)")
	operator := fs.String("operator", "", "check only this operator's states (default: every operator of the checkpoint)")
	tags := fs.String("tags", "", "comma-separated build tags to load packages with")
	fs.Usage = func() {
		fmt.Fprint(stderr, compatUsage)
		fs.PrintDefaults()
	}
	patterns, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if *against == "" {
		fmt.Fprintln(stderr, "stategen compat: -against DIR/ID is required")
		fs.Usage()
		return exitUsage
	}
	if len(patterns) == 0 {
		patterns = []string{"."}
	}
	cfg := load.Config{}
	if *tags != "" {
		cfg.BuildFlags = []string{"-tags=" + *tags}
	}
	pkgs, err := load.Load(cfg, patterns...)
	if err != nil {
		var list model.ErrorList
		if errors.As(err, &list) {
			for _, e := range list {
				fmt.Fprintln(stderr, e)
			}
			return exitError
		}
		fmt.Fprintf(stderr, "stategen compat: %v\n", err)
		return exitError
	}
	code := map[string]*codeState{}
	for _, p := range pkgs {
		for _, s := range p.Structs {
			for _, st := range s.States {
				cs := code[st.Name]
				if cs == nil {
					cs = &codeState{name: st.Name, schema: st.Schema()}
					code[st.Name] = cs
				}
				for _, m := range st.Migrations {
					cs.migrations = append(cs.migrations, codeMigration{fn: m.Func, from: st.MigrationSchema(m)})
				}
				where := fmt.Sprintf("%s.%s.%s (%s:%d)", p.Name, s.Name, st.Field, st.Pos.Filename, st.Pos.Line)
				if st.Schema() != cs.schema {
					where += " with schema " + st.Schema()
				}
				cs.where = append(cs.where, where)
			}
		}
	}
	c, err := openCheckpoint(context.Background(), *against)
	if err != nil {
		fmt.Fprintf(stderr, "stategen compat: %v\n", err)
		return exitError
	}
	m := c.Metadata()
	status := exitOK
	checked := map[string]bool{}
	found := false
	for _, op := range m.Operators {
		if *operator != "" && op.ID != *operator {
			continue
		}
		found = true
		fmt.Fprintf(stdout, "operator %q of %s (format version %d):\n", op.ID, c.Name(), m.FormatVersion)
		for _, spec := range op.States {
			checked[spec.Name] = true
			cs := code[spec.Name]
			verdict, detail := compat(spec.Name, spec.Schema, spec.Fingerprint, cs)
			fmt.Fprintf(stdout, "  %-12s %s\n", verdict, spec.Name)
			for _, d := range detail {
				fmt.Fprintf(stdout, "      %s\n", d)
			}
			if verdict == schema.Incompatible.String() {
				status = exitStale
			}
		}
	}
	if !found {
		fmt.Fprintf(stderr, "stategen compat: %s has no operator %q\n", c.Name(), *operator)
		return exitError
	}
	for _, name := range slices.Sorted(maps.Keys(code)) {
		if !checked[name] {
			fmt.Fprintf(stdout, "  %-12s %s\n      not in the checkpoint: it starts empty\n", "new", name)
		}
	}
	if status != exitOK {
		fmt.Fprintln(stderr, "stategen compat: some states cannot be restored from the checkpoint by this code")
	}
	return status
}

// compat is the verdict on one checkpointed state and its lines of detail.
func compat(name, written, fingerprint string, cs *codeState) (string, []string) {
	if cs == nil {
		return "not-in-code", []string{"the code declares no such state: a restore keeps it (KeepUnknownStates, the default) or drops it (DropUnknownStates)"}
	}
	var detail []string
	if len(cs.where) > 1 {
		detail = append(detail, "declared by "+strings.Join(cs.where, ", "))
	}
	for _, w := range cs.where {
		if strings.Contains(w, " with schema ") {
			return schema.Incompatible.String(), append(detail, "the declarations disagree: pass only the job's packages")
		}
	}
	if written == "" {
		if model.Fingerprint(cs.schema) == fingerprint {
			return schema.Unchanged.String(), detail
		}
		return schema.Incompatible.String(), append(detail,
			"the checkpoint records no schema (format version before 3, or a hand-written descriptor) and its fingerprint "+fingerprint+" differs from the code's "+model.Fingerprint(cs.schema))
	}
	from, err := schema.Parse(written)
	if err != nil {
		return schema.Incompatible.String(), append(detail, "the checkpoint's schema does not parse: "+err.Error())
	}
	to, err := schema.Parse(cs.schema)
	if err != nil {
		return schema.Incompatible.String(), append(detail, "the code's schema does not parse: "+err.Error())
	}
	mig, err := schema.Resolve(from, to)
	if err == nil {
		return mig.Verdict.String(), append(detail, mig.Changes...)
	}
	// The escape hatch, as a restore applies it.
	for _, m := range cs.migrations {
		mfrom, perr := schema.Parse(m.from)
		if perr != nil || schema.CheckKeys(mfrom, to) != nil {
			continue
		}
		if pre, rerr := schema.Resolve(from, mfrom); rerr == nil {
			detail = append(detail, "converted by the migration function "+m.fn+" from "+mfrom.Value.String())
			if pre.Verdict != schema.Unchanged {
				detail = append(detail, pre.Changes...)
			}
			return schema.Compatible.String(), detail
		}
	}
	return schema.Incompatible.String(), append(detail, err.Error())
}
