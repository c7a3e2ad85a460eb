package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestBadFlags: each invalid flag exits 2 naming the flag.
func TestBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"-backend", "rocks"}, `-backend "rocks"`},
		{[]string{"-p-before", "0"}, "-p-before"},
		{[]string{"-crash-at", "1.5"}, "-crash-at 1.5"},
		{[]string{"-events", "10"}, "-events"},
		{[]string{"-crash-at", "0.01"}, "before the first checkpoint"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		var out, errb bytes.Buffer
		if code := run(c.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), c.says) {
			t.Errorf("%v: exit %d, stderr %q; want 2 saying %s", c.args, code, errb.String(), c.says)
		}
	}
}

// TestRun: a small run verifies and says so in the line CI looks for.
func TestRun(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-events", "3000", "-checkpoint-every", "500", "-dir", t.TempDir()}, &out, &errb); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), ", 0 differences\n") {
		t.Errorf("output %q does not end with 0 differences", out.String())
	}
}
