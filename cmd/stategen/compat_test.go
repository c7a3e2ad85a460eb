package main

import (
	"bytes"
	"strings"
	"testing"
)

// stategen compat against a checkpoint of generated/evolve/v1's code
// (its golden testdata): v2's code restores every state, and says what
// migrates; bad's does not, and says why; both at once disagree.
func TestCompatReportsEveryStateAndFailsTheIncompatible(t *testing.T) {
	t.Chdir(repoRoot(t))
	const ckpt = "generated/evolve/testdata/v1-checkpoint/chk-1"
	for _, tc := range []struct {
		name     string
		args     []string
		want     int
		says     []string
		mustNot  []string
		inStderr string
	}{
		{"compatible", []string{"compat", "-against", ckpt, "./generated/evolve/v2"}, exitOK, []string{
			`operator "op" of chk-1 (format version 3)`,
			"unchanged    same",
			"compatible   profiles", "value.Added: added (the checkpoint's entries get the zero value)",
			"value.Visits[].Score: dropped (the code removed it)", "value.Age: int8 → int64",
			"compatible   windows", "namespace: struct{Start int64;End int64} → struct{From int64;To int64} (the same bytes)",
			"compatible   scores", "value.C: added",
		}, []string{"incompatible"}, ""},
		{"incompatible", []string{"compat", "-against", ckpt, "./generated/evolve/bad"}, exitStale, []string{
			"incompatible profiles", "value.Name: checkpoint has string, code declares int64",
			"incompatible counter", "value: checkpoint has int32, code declares int16",
			"not-in-code  history",
		}, nil, "cannot be restored"},
		{"migration functions", []string{"compat", "-against", ckpt, "./generated/evolve/hatch"}, exitOK, []string{
			"compatible   profiles", "converted by the migration function migrateProfiles from struct{Name string;Age int8}",
			"compatible   counter", "converted by the migration function narrowCounter from int32",
		}, []string{"incompatible"}, ""},
		{"declared twice", []string{"compat", "-against", ckpt, "./generated/evolve/v2", "./generated/evolve/bad"}, exitStale, []string{
			"incompatible profiles", "the declarations disagree",
		}, nil, ""},
		{"missing checkpoint", []string{"compat", "-against", "generated/evolve/testdata/v1-checkpoint/chk-9", "./generated/evolve/v2"}, exitError, nil, nil, "chk-9"},
		{"no -against", []string{"compat", "./generated/evolve/v2"}, exitUsage, nil, nil, "-against DIR/ID is required"},
		{"unknown operator", []string{"compat", "-against", ckpt, "-operator", "nope", "./generated/evolve/v2"}, exitError, nil, nil, `no operator "nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(tc.args, &out, &errb); code != tc.want {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.want, out.String(), errb.String())
			}
			for _, s := range tc.says {
				if !strings.Contains(out.String(), s) {
					t.Errorf("stdout lacks %q:\n%s", s, out.String())
				}
			}
			for _, s := range tc.mustNot {
				if strings.Contains(out.String(), s) {
					t.Errorf("stdout has %q:\n%s", s, out.String())
				}
			}
			if !strings.Contains(errb.String(), tc.inStderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.inStderr, errb.String())
			}
		})
	}
}
