package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestBadFlagsExitTwoNamingTheFlag(t *testing.T) {
	for flag, args := range map[string][]string{
		"-backend":  {"-backend", "nope"},
		"-p-before": {"-p-before", "0"},
		"-p-after":  {"-p-after", "-2"},
		"-events":   {"-events", "1"},
		"-interval": {"-interval", "1ns"},
		"-crash-at": {"-crash-at", "1"},
		"-seed":     {"-seed", "0"},
		"-nosuch":   {"-nosuch"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2; stderr %s", args, code, errb.String())
		}
		if !strings.Contains(errb.String(), flag) {
			t.Errorf("%v: stderr does not name %s: %s", args, flag, errb.String())
		}
	}
}

func TestSmallRunPrintsTheVerifiedLine(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(t.Context(), []string{"-q", "-events", "3000", "-users", "100", "-interval", "10ms", "-p-before", "3", "-p-after", "1"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"events/s", "checkpoints completed", "sync phase", "restore:", "verified: ", " keys, 0 differences"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
