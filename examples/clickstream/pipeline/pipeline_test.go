package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/checkpoint/inspect"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/coordinator/driver"
)

// small is a run small enough for -race on two cores.
func small(backend string, before, after int, dir string) Config {
	return Config{
		Backend: backend, PBefore: before, PAfter: after,
		Events: 6000, Users: 300, Interval: 10 * time.Millisecond,
		CrashAt: 0.5, Seed: 7, Dir: dir,
	}
}

func TestRunRestoresExactlyOnceOnEveryBackend(t *testing.T) {
	for _, backend := range Backends() {
		for _, tc := range []struct{ before, after int }{{2, 3}, {3, 2}} {
			t.Run(fmt.Sprintf("backend=%s/p=%d-to-%d", backend, tc.before, tc.after), func(t *testing.T) {
				rep, err := Run(t.Context(), small(backend, tc.before, tc.after, ""))
				if err != nil {
					t.Fatal(err)
				}
				var out strings.Builder
				rep.Print(&out)
				t.Log("\n" + out.String())
				if !rep.Verified() {
					t.Fatalf("final state differs from the reference: %d differences: %v; final checkpoint: %d differences: %v",
						rep.DifferenceCount, rep.Differences, rep.FinalDifferenceCount, rep.FinalDifferences)
				}
				if rep.Keys == 0 || rep.Before.Counts.Completed == 0 || rep.Restored == "" {
					t.Fatalf("vacuous run: %d keys, %d checkpoints before the crash, restored %q", rep.Keys, rep.Before.Counts.Completed, rep.Restored)
				}
				if rep.After.Parallelism != tc.after || rep.After.To != 6000 || rep.After.From > rep.Before.To {
					t.Fatalf("after restore: %+v, crash at %d", rep.After, rep.Before.To)
				}
				if !strings.Contains(out.String(), fmt.Sprintf("verified: %d keys, 0 differences", rep.Keys)) {
					t.Fatalf("report lacks the verified line:\n%s", out.String())
				}
			})
		}
	}
}

// TestRunWithLocalRecovery: with local copies, a restore at the same
// parallelism reads every data file from the instances' own copies, one at
// another parallelism some from the checkpoint directory, and both end in
// the reference state — with incremental checkpoints too.
func TestRunWithLocalRecovery(t *testing.T) {
	for _, tc := range []struct {
		before, after int
		incremental   bool
	}{{2, 2, false}, {2, 2, true}, {2, 3, true}} {
		t.Run(fmt.Sprintf("p=%d-to-%d/incremental=%v", tc.before, tc.after, tc.incremental), func(t *testing.T) {
			cfg := small(DefaultBackend, tc.before, tc.after, "")
			cfg.LocalRecovery, cfg.Incremental = true, tc.incremental
			rep, err := Run(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Verified() {
				t.Fatalf("final state differs from the reference: %d differences: %v; final checkpoint: %d differences: %v",
					rep.DifferenceCount, rep.Differences, rep.FinalDifferenceCount, rep.FinalDifferences)
			}
			switch {
			case rep.LocalFiles == 0:
				t.Errorf("no data file read from a local copy (%d remote)", rep.RemoteFiles)
			case tc.before == tc.after && rep.RemoteFiles != 0:
				t.Errorf("restore at the same parallelism read %d files remotely, want all %d local", rep.RemoteFiles, rep.LocalFiles)
			case tc.before != tc.after && rep.RemoteFiles == 0:
				t.Errorf("restore at a new parallelism read no file remotely, yet new instance 1 spans old instance 0's key groups")
			}
			var out strings.Builder
			rep.Print(&out)
			if !strings.Contains(out.String(), "local copies: ") {
				t.Errorf("report lacks the local copies line:\n%s", out.String())
			}
		})
	}
}

// TestCheckpointHoldsExactlyItsRecordedPositions reads the latest
// checkpoint of a run offline, with the generated codecs, and compares its
// user-stats and page-views states with a reference that processed, for
// each key group, exactly the events up to the offset the checkpoint
// recorded for it.
func TestCheckpointHoldsExactlyItsRecordedPositions(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	cfg := small(DefaultBackend, 2, 3, dir)
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Verified() {
		t.Fatal(rep.Differences)
	}
	storage, err := checkpoint.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	name, _, err := driver.Latest(ctx, storage)
	if err != nil {
		t.Fatal(err)
	}
	c, err := inspect.OpenStorage(ctx, storage, name)
	if err != nil {
		t.Fatal(err)
	}
	op, err := c.Metadata().Operator(Operator)
	if err != nil {
		t.Fatal(err)
	}
	var blobs [][]byte
	for _, in := range op.Instances {
		blobs = append(blobs, in.OperatorState)
	}
	th, err := Thresholds(blobs, runtime.DefaultMaxParallelism)
	if err != nil {
		t.Fatal(err)
	}

	// The expected state: the stream filtered by the recorded positions.
	ref, err := OpenClickState(mustStore(t))
	if err != nil {
		t.Fatal(err)
	}
	stream := Stream{Seed: cfg.Seed, Users: cfg.Users, Len: cfg.Events}
	wantUsers := map[string]UserStats{}
	for i := range cfg.Events {
		e := stream.Event(i)
		kg, _ := runtime.KeyGroupForKey(runtime.AppendStringKey(nil, e.User), runtime.DefaultMaxParallelism)
		if i > th[kg] {
			continue
		}
		if err := Process(ref, e); err != nil {
			t.Fatal(err)
		}
		wantUsers[e.User], _, _ = ref.Users.Get(e.User)
	}
	if len(wantUsers) == 0 {
		t.Fatal("the checkpoint reflects no event")
	}

	// The descriptors, codecs and schemas included, come from the
	// generated code.
	d := DescribeClickState()
	gotUsers, err := inspect.Values(ctx, c, Operator, d.Users)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantUsers, gotUsers); diff != "" {
		t.Fatalf("user-stats in %s (-want +got):\n%s", name, diff)
	}
	pages, err := inspect.Maps(ctx, c, Operator, d.Pages)
	if err != nil {
		t.Fatal(err)
	}
	for user, st := range gotUsers {
		var sum int64
		for page, n := range pages[user] {
			want, _, _ := ref.Pages.Get(user, page)
			if n != want {
				t.Fatalf("page-views %s %s = %d, want %d", user, page, n, want)
			}
			sum += n
		}
		if sum != st.Events {
			t.Fatalf("user %s: page views sum to %d, user-stats counts %d events", user, sum, st.Events)
		}
	}
	recent, err := inspect.Lists(ctx, c, Operator, d.Recent)
	if err != nil {
		t.Fatal(err)
	}
	for user := range gotUsers {
		want, _ := ref.Recent.Get(user)
		if diff := cmp.Diff(want, recent[user]); diff != "" {
			t.Fatalf("recent %s (-want +got):\n%s", user, diff)
		}
	}

	// A descriptor of another schema is refused before anything is read.
	_, err = inspect.Values(ctx, c, Operator, runtime.ValueDescriptor[string, int64]{
		Name: "user-stats", Fingerprint: "v1:other", Key: runtime.StringCodec{}, Value: runtime.Int64Codec{},
	})
	if !errors.Is(err, inspect.ErrState) {
		t.Fatalf("wrong fingerprint: got %v, want ErrState", err)
	}
}

func mustStore(t *testing.T) runtime.Store {
	t.Helper()
	s, err := backends[DefaultBackend](runtime.StoreConfig{}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestCompareFindsEveryKindOfDifference(t *testing.T) {
	a, b := mustStore(t), mustStore(t)
	sa, _ := OpenClickState(a)
	sb, _ := OpenClickState(b)
	stream := Stream{Seed: 3, Users: 20, Len: 200}
	for i := range stream.Len {
		e := stream.Event(i)
		if err := Process(sa, e); err != nil {
			t.Fatal(err)
		}
		if i == 100 { // b misses one event
			continue
		}
		if err := Process(sb, e); err != nil {
			t.Fatal(err)
		}
	}
	want, err := Dump([]runtime.Store{a})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Dump([]runtime.Store{b})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := Compare(want, want, 5); n != 0 {
		t.Fatalf("a state differs from itself: %d", n)
	}
	n, first := Compare(got, want, 3)
	if n == 0 || len(first) == 0 || len(first) > 3 {
		t.Fatalf("one missed event: %d differences, first %v", n, first)
	}
	user := stream.Event(100).User
	if !strings.Contains(strings.Join(first, "\n"), fmt.Sprintf("user %q", user)) {
		t.Fatalf("differences do not name user %s: %v", user, first)
	}
}

func TestPositionRoundTripAndThresholds(t *testing.T) {
	p := Position{Ranges: []PositionRange{
		{runtime.KeyGroupRange{Start: 0, End: 3}, -1},
		{runtime.KeyGroupRange{Start: 3, End: 4}, 41},
	}}
	q, err := UnmarshalPosition(p.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p, q); diff != "" {
		t.Fatal(diff)
	}
	other := Position{Ranges: []PositionRange{{runtime.KeyGroupRange{Start: 4, End: 8}, 7}}}.Marshal()
	th, err := Thresholds([][]byte{p.Marshal(), other}, 8)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{-1, -1, -1, 41, 7, 7, 7, 7}, th); diff != "" {
		t.Fatal(diff)
	}
	for name, blobs := range map[string][][]byte{
		"gap":       {p.Marshal()},
		"overlap":   {p.Marshal(), other, other},
		"truncated": {p.Marshal()[:3], other},
		"trailing":  {append(p.Marshal(), 0), other},
	} {
		if _, err := Thresholds(blobs, 8); !errors.Is(err, errBadPosition) {
			t.Errorf("%s: got %v, want errBadPosition", name, err)
		}
	}
}

func TestStreamIsAPureFunctionOfSeedAndOffset(t *testing.T) {
	s := Stream{Seed: 9, Users: 100, Len: 1000}
	if s.Event(500) != s.Event(500) {
		t.Fatal("event 500 differs between two reads")
	}
	if s.Event(500) == (Stream{Seed: 10, Users: 100, Len: 1000}).Event(500) {
		t.Fatal("two seeds give the same event")
	}
	if e := s.Event(7); e.Offset != 7 || e.At < StreamStart+7*EventStep {
		t.Fatalf("event 7: %+v", e)
	}
}

func TestConfigErrorsNameTheFlag(t *testing.T) {
	for flag, cfg := range map[string]Config{
		"backend":  {Backend: "nope"},
		"p-before": {PBefore: 1000},
		"p-after":  {PAfter: -1},
		"events":   {Events: 1},
		"interval": {Interval: time.Millisecond},
		"crash-at": {CrashAt: 1.5},
	} {
		_, err := Run(context.Background(), cfg)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Flag != flag {
			t.Errorf("flag %s: got %v", flag, err)
		}
	}
	_, err := Run(context.Background(), Config{Backend: "nope"})
	if !strings.Contains(err.Error(), "cow") {
		t.Errorf("unknown backend error does not list the backends: %v", err)
	}
}

func TestRunRefusesADirectoryWithCheckpoints(t *testing.T) {
	dir := t.TempDir()
	if _, err := Run(t.Context(), small(DefaultBackend, 1, 2, dir)); err != nil {
		t.Fatal(err)
	}
	_, err := Run(t.Context(), small(DefaultBackend, 1, 2, dir))
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Flag != "dir" {
		t.Fatalf("second run into %s: got %v, want a -dir error", dir, err)
	}
}
