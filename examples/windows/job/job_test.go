package job

import (
	"context"
	"io"
	"strings"
	"testing"
)

// TestWindowsVerify runs the job on every backend, across a crash and a
// restore at another parallelism (up and down), and requires the output
// to equal the plain-Go reference's, with nothing left in the stores.
func TestWindowsVerify(t *testing.T) {
	for _, backend := range Backends() {
		for _, pq := range [][2]int{{3, 2}, {1, 4}} {
			t.Run(backend, func(t *testing.T) {
				events := int64(12000)
				if backend == "pebble" || testing.Short() {
					events = 4000
				}
				cfg := Config{Backend: backend, PBefore: pq[0], PAfter: pq[1], Stream: Stream{Seed: 7, Events: events, Users: 25},
					CheckpointEvery: 700, CrashAt: events * 5 / 8, Dir: t.TempDir()}
				rep, err := Run(context.Background(), cfg, io.Discard)
				if err != nil {
					t.Fatal(err)
				}
				if len(rep.Differences) != 0 {
					t.Fatalf("%d differences, the first: %s", len(rep.Differences), rep.Differences[0])
				}
				if rep.Resumed >= cfg.CrashAt || rep.Resumed < cfg.CrashAt-cfg.CheckpointEvery {
					t.Errorf("resumed after offset %d; the crash came after %d, checkpoints every %d", rep.Resumed, cfg.CrashAt, cfg.CheckpointEvery)
				}
				// The stream exercises what it must: late events within
				// the lateness (re-fired windows) and beyond it (drops),
				// and sessions.
				if rep.Dropped == 0 || rep.Results[Session] == 0 || rep.Results[Sliding] < 3*rep.Results[Tumbling] {
					t.Errorf("a degenerate run: %+v", rep)
				}
			})
		}
	}
}

// TestWindowsDetectsLoss proves the verification is not vacuous: a restore
// that brings back the progress but not the windows and timers is caught.
func TestWindowsDetectsLoss(t *testing.T) {
	saved := restore
	defer func() { restore = saved }()
	restore = restoreListsOnly
	cfg := Config{Backend: "cow", PBefore: 2, PAfter: 3, Stream: Stream{Seed: 7, Events: 4000, Users: 25},
		CheckpointEvery: 700, CrashAt: 2500, Dir: t.TempDir()}
	rep, err := Run(context.Background(), cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Differences) == 0 {
		t.Fatal("a restore that lost the windows verified")
	}
	t.Logf("%d differences, as there must be; the first: %s", len(rep.Differences), rep.Differences[0])
}

// TestReferenceRules pins the window rules the reference and the job
// share, on a hand-made stream.
func TestReferenceRules(t *testing.T) {
	if got := slidingWindows(260); len(got) != 4 || got[0] != (Window{250, 1250}) || got[3] != (Window{-500, 500}) {
		t.Errorf("slidingWindows(260) = %v", got)
	}
	if got := tumblingWindow(-1); got != (Window{-1000, 0}) {
		t.Errorf("tumblingWindow(-1) = %v", got)
	}
	if !(Window{0, 300}).intersects(Window{300, 600}) || (Window{0, 300}).intersects(Window{301, 600}) {
		t.Error("sessions that touch must merge, and only those")
	}
	if !strings.Contains(Stream{Seed: 1, Events: 10, Users: 2}.At(3).User, "user-") {
		t.Error("an event without a user")
	}
}
