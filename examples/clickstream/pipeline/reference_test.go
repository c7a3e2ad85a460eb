package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/coordinator/driver"
)

// positionReference is the state a checkpoint with given source positions
// must hold, computed from the stream alone: one store over every key group
// that has processed, for each key group g, exactly the events of g with an
// offset <= th[g], in offset order. Positions only move forward, so it is
// advanced incrementally rather than recomputed.
type positionReference struct {
	stream Stream
	maxP   int
	store  runtime.Store
	st     *ClickState
	th     []int64        // per key group: the offset applied up to
	kg     map[string]int // memoized key group of each user
	events int64          // events applied
}

func newPositionReference(stream Stream, maxP int) (*positionReference, error) {
	s, err := cow.New(cow.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: maxP, KeyGroups: runtime.FullRange(maxP)}})
	if err != nil {
		return nil, err
	}
	st, err := OpenClickState(s)
	if err != nil {
		s.Close()
		return nil, err
	}
	th := make([]int64, maxP)
	for g := range th {
		th[g] = -1
	}
	return &positionReference{stream: stream, maxP: maxP, store: s, st: st, th: th, kg: map[string]int{}}, nil
}

func (r *positionReference) Close() { r.store.Close() }

// keyGroup returns the key group of user.
func (r *positionReference) keyGroup(user string) (int, error) {
	if g, ok := r.kg[user]; ok {
		return g, nil
	}
	g, err := runtime.KeyGroupForKey(runtime.AppendStringKey(nil, user), r.maxP)
	if err != nil {
		return 0, err
	}
	r.kg[user] = g
	return g, nil
}

// advance moves the reference to positions th: it applies, in offset order,
// every event of each key group g with an offset in (r.th[g], th[g]]. It
// fails if a position moved backwards — state would have to be unapplied,
// which exactly-once forbids.
func (r *positionReference) advance(th []int64) error {
	if len(th) != r.maxP {
		return fmt.Errorf("%d positions for %d key groups", len(th), r.maxP)
	}
	for g := range th {
		if th[g] < r.th[g] {
			return fmt.Errorf("key group %d went back from offset %d to %d", g, r.th[g], th[g])
		}
	}
	lo, hi := slices.Min(r.th)+1, slices.Max(th)
	for off := lo; off <= hi; off++ {
		e := r.stream.Event(off)
		g, err := r.keyGroup(e.User)
		if err != nil {
			return err
		}
		if off <= r.th[g] || off > th[g] {
			continue
		}
		if err := Process(r.st, e); err != nil {
			return fmt.Errorf("event %d: %w", off, err)
		}
		r.events++
	}
	r.th = slices.Clone(th)
	return nil
}

// dump returns the reference's Contents.
func (r *positionReference) dump() (Contents, error) { return Dump([]runtime.Store{r.store}) }

func TestPositionReferenceAdvancesLikeOneFilteredPass(t *testing.T) {
	const maxP = 8
	stream := Stream{Seed: 11, Users: 30, Len: 1500}
	kgOf := func(e Event) int {
		g, err := runtime.KeyGroupForKey(runtime.AppendStringKey(nil, e.User), maxP)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	// Two steps of uneven positions, then everything.
	steps := [][]int64{
		{100, -1, 500, 20, 900, 0, 1200, 300},
		{700, 50, 500, 1400, 900, 1300, 1200, 1100},
		{1499, 1499, 1499, 1499, 1499, 1499, 1499, 1499},
	}
	ref, err := newPositionReference(stream, maxP)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	for i, th := range steps {
		if err := ref.advance(th); err != nil {
			t.Fatal(err)
		}
		// The same positions in one pass over the stream, on a fresh store.
		s := mustStore(t)
		st, err := OpenClickState(s)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for off := range stream.Len {
			e := stream.Event(off)
			if off <= th[kgOf(e)] {
				if err := Process(st, e); err != nil {
					t.Fatal(err)
				}
				n++
			}
		}
		got, err := ref.dump()
		if err != nil {
			t.Fatal(err)
		}
		want, err := Dump([]runtime.Store{s})
		if err != nil {
			t.Fatal(err)
		}
		if d, first := Compare(got, want, 3); d != 0 || ref.events != n || len(want) == 0 {
			t.Fatalf("step %d: %d differences %v; %d events applied, want %d; %d entries", i, d, first, ref.events, n, len(want))
		}
	}
	if err := ref.advance(steps[0]); err == nil {
		t.Fatal("positions moved backwards without an error")
	}
}

// TestResumeContinuesExactlyOnceFromTheLatestCheckpoint runs the job on an
// endless stream until a checkpoint has completed and stops it, then resumes
// it at another parallelism up to a fixed end: the final state must be
// that of one uninterrupted pass.
func TestResumeContinuesExactlyOnceFromTheLatestCheckpoint(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Users: 200, Interval: 10 * time.Millisecond, Seed: 5, Dir: dir, Events: 1 << 40}
	storage, err := checkpoint.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}

	// First run: empty start, stopped once a checkpoint exists.
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	var restored string
	watched := make(chan error, 1)
	stores, _, err := resume(ctx, cfg, 2, func(ckpt string) {
		restored = ckpt
		go func() {
			defer stop()
			for {
				_, _, err := driver.Latest(ctx, storage)
				if !errors.Is(err, driver.ErrNoCheckpoint) {
					watched <- err
					return
				}
				select {
				case <-ctx.Done():
					watched <- ctx.Err()
					return
				case <-time.After(2 * time.Millisecond):
				}
			}
		}()
	})
	closeAll(stores)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: got %v, want it stopped", err)
	}
	if err := <-watched; err != nil {
		t.Fatal(err)
	}
	if restored != "" {
		t.Fatalf("first run restored %s from an empty directory", restored)
	}
	plan, err := driver.PlanLatest(t.Context(), storage, Operator, 1, runtime.DefaultMaxParallelism)
	if err != nil {
		t.Fatal(err)
	}
	th, err := Thresholds(plan.Instances[0].OperatorStates, runtime.DefaultMaxParallelism)
	if err != nil {
		t.Fatal(err)
	}

	t.Logf("stopped after %s: positions [%d, %d]", plan.Checkpoint, slices.Min(th), slices.Max(th))
	// Second run: to a fixed end beyond every recorded position.
	cfg.Events = slices.Max(th) + 3000
	stores, ph, err := resume(t.Context(), cfg, 3, func(ckpt string) { restored = ckpt })
	defer closeAll(stores)
	if err != nil {
		t.Fatal(err)
	}
	if restored != plan.Checkpoint || ph.From != slices.Min(th)+1 || ph.To != cfg.Events || ph.Parallelism != 3 {
		t.Fatalf("second run: restored %q (latest %s), phase %+v, positions [%d, %d]", restored, plan.Checkpoint, ph, slices.Min(th), slices.Max(th))
	}
	ref, err := newPositionReference(Stream{Seed: cfg.Seed, Users: cfg.Users, Len: cfg.Events}, runtime.DefaultMaxParallelism)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	end := make([]int64, runtime.DefaultMaxParallelism)
	for g := range end {
		end[g] = cfg.Events - 1
	}
	if err := ref.advance(end); err != nil {
		t.Fatal(err)
	}
	want, err := ref.dump()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Dump(stores)
	if err != nil {
		t.Fatal(err)
	}
	if n, first := Compare(got, want, 5); n != 0 {
		t.Fatalf("resumed state differs from one uninterrupted pass: %d differences: %v", n, first)
	}
}

func TestResumeNeedsADirectory(t *testing.T) {
	_, _, err := resume(t.Context(), Config{}, 1, nil)
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Flag != "dir" {
		t.Fatalf("got %v, want a -dir error", err)
	}
}
