package driver

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime/coordinator"
	"github.com/stategen/stategen/runtime/storetest"
)

// startOpts starts a Coordinator with opts (Storage, Clock and Logger
// filled in if unset).
func startOpts(t *testing.T, s checkpoint.Storage, clock Clock, opts Options) *Coordinator {
	t.Helper()
	opts.Storage, opts.Clock = s, clock
	if opts.Logger == nil {
		opts.Logger = quiet()
	}
	c, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// graphs are the two ways to run a job: with the job graph, and without
// (where the Core's coverage check alone keeps partial checkpoints out).
var graphs = []struct {
	name     string
	expected func(p int) map[string]int
}{
	{"expected", func(p int) map[string]int { return map[string]int{"counter": p} }},
	{"no-graph", func(int) map[string]int { return nil }},
}

// restoresEverything checks that the latest checkpoint in s restores every
// key group, to want.
func restoresEverything(t *testing.T, s checkpoint.Storage, want storetest.Contents) {
	t.Helper()
	name, _, err := Latest(context.Background(), s)
	if err != nil {
		t.Fatalf("Latest: %v", err)
	}
	for _, q := range []int{1, 2, 3} {
		got, _ := restoreAll(t, s, name, q)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%s at parallelism %d (-want +got):\n%s", name, q, diff)
		}
	}
}

// The partial-coverage trap of the issue that introduced Options.Expected:
// one of two instances reaches the end of its input and closes mid-stream,
// with the default retention of one checkpoint. No later checkpoint may
// complete without its key groups — they are declined as not ready (with
// the job graph) or aborted as incomplete (without) — and none of that
// counts as a failure, so the latest checkpoint still restores every key
// group.
func TestClosedInstanceLeavesNoPartialCheckpoint(t *testing.T) {
	for _, g := range graphs {
		t.Run(g.name, func(t *testing.T) {
			s := checkpoint.NewMem()
			clock := &fakeClock{now: t0}
			c := startOpts(t, s, clock, Options{
				Config:   coordinator.Config{Interval: 10 * time.Second},
				Expected: g.expected(2),
			})
			ops := []*operator{newOperator(t, c, 0, 2, InstanceOptions{}), newOperator(t, c, 1, 2, InstanceOptions{})}
			first := completeOne(t, c, clock, ops)
			want, _ := wantAt(t, first, ops)
			ops[0].nextNote()

			ops[1].write(20)
			if err := ops[1].inst.Close(); err != nil {
				t.Fatal(err)
			}
			for range 5 {
				clock.Advance(10 * time.Second)
				ops[0].write(10)
				if err := ops[0].snapshot(ops[0].nextTrigger()); err != nil {
					t.Fatal(err)
				}
				n := ops[0].nextNote()
				if n.Completed() || !errors.Is(n.Err, coordinator.ErrNotReady) {
					t.Fatalf("checkpoint %d without instance 1: %v, want an abort as not ready", n.ID, n.Err)
				}
			}
			n := c.Stats().Counts()
			if n.Completed != 1 || n.Failed != 0 || n.NotReady != 5 {
				t.Errorf("counts %+v, want 1 completed, 0 failed, 5 not ready", n)
			}
			restoresEverything(t, s, want)
		})
	}
}

// Triggers race against Join: the coordinator checkpoints every few
// milliseconds of real time while the instances join one by one, at random
// moments. Every checkpoint that completes — during the joins and after —
// restores every key group, and the latest restores to what the operators
// held at its synchronous phase.
func TestTriggersRacingJoinsCompleteOnlyWholeCheckpoints(t *testing.T) {
	for _, g := range graphs {
		t.Run(g.name, func(t *testing.T) {
			for seed := range uint64(4) {
				raceJoins(t, g.expected, seed)
			}
		})
	}
}

func raceJoins(t *testing.T, expected func(int) map[string]int, seed uint64) {
	const p = 3
	rng := rand.New(rand.NewPCG(seed, 1))
	s := checkpoint.NewMem()
	c := startOpts(t, s, SystemClock, Options{
		Config:   coordinator.Config{Interval: 10 * time.Millisecond, TolerableFailures: coordinator.UnlimitedFailures, StatsHistory: 10000},
		Expected: expected(p),
	})
	ops := make([]*operator, p)
	for i := range ops {
		ops[i] = newOperator(t, nil, i, p, InstanceOptions{})
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, i := range rng.Perm(p) {
		time.Sleep(time.Duration(rng.IntN(25)) * time.Millisecond)
		o := ops[i]
		o.join(c, InstanceOptions{})
		wg.Go(func() {
			for {
				select {
				case tr := <-o.inst.Triggers():
					o.write(5)
					if err := o.snapshot(tr); err != nil {
						t.Error(err)
					}
				case <-o.inst.Notifications():
				case <-ctx.Done():
					return
				}
			}
		})
	}
	waitUntil(t, "checkpoints after the joins", func() bool { return c.Stats().Counts().Completed >= 3 })
	stop()
	wg.Wait()
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	names, err := checkpoint.List(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		m, err := checkpoint.ReadMetadata(context.Background(), s, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Complete(); err != nil {
			t.Errorf("seed %d: checkpoint %s completed without every key group: %v", seed, name, err)
		}
	}
	name, id, err := Latest(context.Background(), s)
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	want, _ := wantAt(t, id, ops)
	got, _ := restoreAll(t, s, name, 2)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("seed %d: %s (-want +got):\n%s", seed, name, diff)
	}
	for _, r := range c.Stats().Recent() {
		if r.Err != nil && !r.NotReady() && r.Err.Reason != coordinator.AbortShutdown {
			t.Errorf("seed %d: checkpoint %d failed: %v", seed, r.ID, r.Err)
		}
	}
}

// The job graph refuses instances it does not have, each with an error
// that names the operator and the index, and lets nothing complete while
// an expected instance is missing.
func TestJoinRefusesInstancesOutsideTheJobGraph(t *testing.T) {
	s := checkpoint.NewMem()
	clock := &fakeClock{now: t0}
	for _, graph := range []map[string]int{{}, {"": 1}, {"counter": 0}, {"a/b": 1}} {
		if _, err := Start(context.Background(), Options{Config: coordinator.Config{Interval: time.Second}, Storage: s, Expected: graph}); err == nil {
			t.Errorf("Start with Expected %v succeeded", graph)
		}
	}
	c := startOpts(t, s, clock, Options{
		Config:   coordinator.Config{Interval: 10 * time.Second},
		Expected: map[string]int{"counter": 2, "other": 1},
	})
	o0 := newOperator(t, c, 0, 2, InstanceOptions{})
	for _, tc := range []struct {
		opts InstanceOptions
		want error
		says []string
	}{
		{InstanceOptions{Operator: "counter", Index: 2}, ErrUnexpectedInstance, []string{`"counter"`, "instance 2", "parallelism 2"}},
		{InstanceOptions{Operator: "nope", Index: 0}, ErrUnexpectedInstance, []string{`"nope"`, "instance 0", `"counter" "other"`}},
		{InstanceOptions{Operator: "counter", Index: 0}, ErrDuplicateInstance, []string{"counter/0"}},
		// Instance 1 with the store of instance 0's key groups.
		{InstanceOptions{Operator: "counter", Index: 1, Store: o0.store}, ErrUnexpectedInstance, []string{`"counter"`, "instance 1", "[64, 128)", "[0, 64)"}},
	} {
		if tc.opts.Store == nil {
			tc.opts.Store = newOperator(t, nil, 0, 2, InstanceOptions{}).store
		}
		_, err := c.Join(tc.opts)
		if !errors.Is(err, tc.want) {
			t.Errorf("Join(%s/%d): %v, want %v", tc.opts.Operator, tc.opts.Index, err, tc.want)
			continue
		}
		for _, s := range tc.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("Join(%s/%d): %q does not say %s", tc.opts.Operator, tc.opts.Index, err, s)
			}
		}
	}
	// counter/1 and other/0 never joined: instance 0's snapshot completes
	// nothing.
	clock.Advance(10 * time.Second)
	o0.write(10)
	if err := o0.snapshot(o0.nextTrigger()); err != nil {
		t.Fatal(err)
	}
	if n := o0.nextNote(); !errors.Is(n.Err, coordinator.ErrNotReady) || !strings.Contains(n.Err.Error(), "has not joined") {
		t.Errorf("notification %+v, want an abort naming the instance that has not joined", n)
	}
	if names, _ := checkpoint.List(context.Background(), s); len(names) != 0 {
		t.Errorf("committed %v without every instance", names)
	}
}

// A finished instance keeps answering triggers with its final state, so
// checkpoints keep completing — holding its key groups — while the other
// instance runs; once both have finished, an on-demand checkpoint is the
// final one: notified as Final, closing Finished, and restoring to every
// instance's final state and source position.
func TestFinishedInstancesEndTheJobOnAFinalCheckpoint(t *testing.T) {
	s := checkpoint.NewMem()
	clock := &fakeClock{now: t0}
	c := startOpts(t, s, clock, Options{
		Config:   coordinator.Config{Interval: 10 * time.Second},
		Expected: map[string]int{"counter": 2},
	})
	ops := []*operator{newOperator(t, c, 0, 2, InstanceOptions{}), newOperator(t, c, 1, 2, InstanceOptions{})}
	completeOne(t, c, clock, ops)
	for _, o := range ops {
		o.nextNote()
	}

	// Instance 0 reaches the end of its input.
	ops[0].write(40)
	final0 := ops[0].contents()
	blob0 := []byte("positions of 0")
	if err := ops[0].inst.Finish(blob0); err != nil {
		t.Fatal(err)
	}
	if err := ops[0].inst.Finish(blob0); !errors.Is(err, ErrFinished) {
		t.Errorf("second Finish: %v, want ErrFinished", err)
	}
	for i := range 3 {
		clock.Advance(10 * time.Second)
		ops[1].write(10)
		if err := ops[1].snapshot(ops[1].nextTrigger()); err != nil {
			t.Fatal(err)
		}
		n := ops[0].nextNote()
		if !n.Completed() || n.Final || !bytes.Equal(n.OperatorState, blob0) {
			t.Fatalf("round %d: finished instance notified %+v, want a completion (not final) with its final blob", i, n)
		}
		ops[1].nextNote()
	}
	select {
	case <-c.Finished():
		t.Fatal("Finished closed while instance 1 still runs")
	default:
	}
	if err := ops[0].inst.Snapshot(Trigger{}, nil); !errors.Is(err, ErrFinished) {
		t.Errorf("Snapshot after Finish: %v, want ErrFinished", err)
	}
	// The latest checkpoint holds instance 0's final state.
	name, _, err := Latest(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := restoreAll(t, s, name, 2)
	if diff := cmp.Diff(final0, got.Restrict(ops[0].kgs)); diff != "" {
		t.Errorf("finished instance's key groups in %s (-want +got):\n%s", name, diff)
	}

	// Instance 1 ends too; the job ends on an on-demand final checkpoint.
	ops[1].write(40)
	final1 := ops[1].contents()
	blob1 := []byte("positions of 1")
	if err := ops[1].inst.Finish(blob1); err != nil {
		t.Fatal(err)
	}
	tr, err := c.TriggerCheckpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rec, err := tr.Wait(context.Background())
	if err != nil || !rec.Final || rec.ID != tr.ID || rec.Request == 0 {
		t.Fatalf("final checkpoint: %+v, %v", rec, err)
	}
	select {
	case <-c.Finished():
	case <-time.After(20 * time.Second):
		t.Fatal("Finished not closed after the final checkpoint")
	}
	for _, o := range ops {
		n := o.nextNote()
		if n.ID != tr.ID || !n.Final || !n.Completed() {
			t.Errorf("instance %d: %+v, want the final completion of %d", o.index, n, tr.ID)
		}
	}
	want := storetest.Merge(final0, final1)
	got, blobs := restoreAll(t, s, checkpoint.CheckpointName(uint64(tr.ID)), 3)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("final checkpoint (-want +got):\n%s", diff)
	}
	if !slices.EqualFunc(blobs, [][]byte{blob0, blob1}, bytes.Equal) {
		t.Errorf("final blobs %q", blobs)
	}
	for _, o := range ops {
		if err := o.inst.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TriggerCheckpoint takes a regular checkpoint now: it ignores MinPause,
// waits while MaxConcurrent checkpoints are pending, reports its outcome —
// completed, or the abort with its reason — and is refused with a typed
// error once the job failed or the Coordinator closed.
func TestTriggerCheckpointWaitsForASlotAndReportsItsOutcome(t *testing.T) {
	s := checkpoint.NewMem()
	clock := &fakeClock{now: t0}
	c := startOpts(t, s, clock, Options{Config: coordinator.Config{Interval: 10 * time.Second, MinPause: 10 * time.Second, TolerableFailures: 1}})
	o := newOperator(t, c, 0, 1, InstanceOptions{})
	completeOne(t, c, clock, []*operator{o})
	o.nextNote()

	// MinPause (until 20s) does not hold it back.
	tr, err := c.TriggerCheckpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := o.snapshot(o.nextTrigger()); err != nil {
		t.Fatal(err)
	}
	if rec, err := tr.Wait(context.Background()); err != nil || rec.Status != coordinator.StatusCompleted || rec.ID != tr.ID {
		t.Fatalf("on-demand checkpoint: %+v, %v", rec, err)
	}
	o.nextNote()

	// While one is pending (MaxConcurrent 1) a request waits.
	first, err := c.TriggerCheckpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		tr  *Triggered
		err error
	}
	request := func() <-chan result {
		ch := make(chan result, 1)
		go func() {
			tr, err := c.TriggerCheckpoint(context.Background())
			ch <- result{tr, err}
		}()
		return ch
	}
	waiting := func(ch <-chan result) {
		t.Helper()
		settle(t, c)
		select {
		case r := <-ch:
			t.Fatalf("request triggered while one was pending: %+v", r)
		default:
		}
	}
	second := request()
	waiting(second)
	if err := o.inst.Decline(o.nextTrigger(), errors.New("disk on fire")); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Wait(context.Background()); !errors.Is(err, coordinator.ErrDeclined) || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("declined on-demand checkpoint: %v, want ErrDeclined with the cause", err)
	}
	r := <-second
	if r.err != nil || r.tr.ID <= first.ID {
		t.Fatalf("second request: %+v", r)
	}
	// A third waits for the second; a second decline fails the job
	// (TolerableFailures 1), which refuses the third with why.
	third := request()
	waiting(third)
	if err := o.inst.Decline(o.nextTrigger(), errors.New("disk still on fire")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.tr.Wait(context.Background()); !errors.Is(err, coordinator.ErrDeclined) {
		t.Errorf("second on-demand checkpoint: %v, want ErrDeclined", err)
	}
	for _, err := range []error{(<-third).err, func() error { _, err := c.TriggerCheckpoint(context.Background()); return err }()} {
		if !errors.Is(err, coordinator.ErrShutdown) || !errors.Is(err, coordinator.ErrTooManyFailures) {
			t.Errorf("request once the job failed: %v, want ErrShutdown and ErrTooManyFailures", err)
		}
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err = c.TriggerCheckpoint(context.Background())
	if !errors.Is(err, ErrClosed) || !errors.Is(err, coordinator.ErrShutdown) {
		t.Errorf("request after Close: %v, want ErrClosed, which is ErrShutdown", err)
	}
	if _, err := c.Savepoint(context.Background(), "sp"); !errors.Is(err, coordinator.ErrShutdown) {
		t.Errorf("savepoint after Close: %v, want ErrShutdown", err)
	}
}

// A savepoint's completion reaches the instances, marked as a savepoint,
// with the blob they snapshotted for it; it does not end the checkpoints
// they still take part in.
func TestSavepointCompletionIsNotified(t *testing.T) {
	s := checkpoint.NewMem()
	clock := &fakeClock{now: t0}
	c := startOpts(t, s, clock, Options{Config: coordinator.Config{Interval: 10 * time.Second}})
	o := newOperator(t, c, 0, 1, InstanceOptions{})
	done := make(chan error, 1)
	go func() {
		_, err := c.Savepoint(context.Background(), "sp-1")
		done <- err
	}()
	tr := o.nextTrigger()
	if err := o.snapshot(tr); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_, blob, _ := o.expectedAt(tr.ID)
	if n := o.nextNote(); n.ID != tr.ID || !n.Savepoint || !n.Completed() || !bytes.Equal(n.OperatorState, blob) {
		t.Errorf("notification %+v, want the savepoint's completion with blob %x", n, blob)
	}
}

// A job started from a savepoint restores it until a checkpoint of its own
// completes — also after a crash before that first checkpoint, which would
// otherwise restart it empty — and then its checkpoints, the first of
// which is self-contained. Checkpoints of the earlier run in the same
// storage are never restored, and the savepoint is never deleted.
func TestJobStartedFromSavepointRestoresItUntilItsFirstCheckpoint(t *testing.T) {
	ctx := context.Background()
	s := checkpoint.NewMem()
	clock := &fakeClock{now: t0}

	// The earlier run: a checkpoint, the savepoint, a later checkpoint.
	c1 := startOpts(t, s, clock, Options{Config: coordinator.Config{Interval: 10 * time.Second}, Expected: map[string]int{"counter": 2}})
	ops := []*operator{newOperator(t, c1, 0, 2, InstanceOptions{}), newOperator(t, c1, 1, 2, InstanceOptions{})}
	completeOne(t, c1, clock, ops)
	done := make(chan coordinator.Record, 1)
	go func() {
		rec, err := c1.Savepoint(ctx, "sp-before-upgrade")
		if err != nil {
			t.Error(err)
		}
		done <- rec
	}()
	for _, o := range ops {
		o.write(20)
		if err := o.snapshot(o.nextTrigger()); err != nil {
			t.Fatal(err)
		}
	}
	sp := <-done
	wantSP, _ := wantAt(t, sp.ID, ops)
	completeOne(t, c1, clock, ops)
	if err := c1.Close(ctx); err != nil {
		t.Fatal(err)
	}

	if err := StartFrom(ctx, s, "no-such-savepoint"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("StartFrom a missing savepoint: %v, want ErrNotFound", err)
	}
	if err := StartFrom(ctx, s, "sp-before-upgrade"); err != nil {
		t.Fatal(err)
	}
	// Twice: a restarted process calls it again.
	for run := range 2 {
		if err := StartFrom(ctx, s, "sp-before-upgrade"); err != nil {
			t.Fatal(err)
		}
		news := []*operator{newOperator(t, nil, 0, 3, InstanceOptions{}), newOperator(t, nil, 1, 3, InstanceOptions{}), newOperator(t, nil, 2, 3, InstanceOptions{})}
		var parts []storetest.Contents
		for i, o := range news {
			r, err := RestoreLatest(ctx, s, "counter", i, 3, o.store, nil)
			if err != nil {
				t.Fatalf("run %d: %v", run, err)
			}
			if !r.Savepoint || r.Checkpoint != "sp-before-upgrade" {
				t.Fatalf("run %d: restored %+v, want the savepoint", run, r)
			}
			parts = append(parts, o.contents())
		}
		if diff := cmp.Diff(wantSP, storetest.Merge(parts...)); diff != "" {
			t.Fatalf("run %d (-want +got):\n%s", run, diff)
		}
		// The run starts and crashes before its first checkpoint.
		c := startOpts(t, s, clock, Options{Config: coordinator.Config{Interval: 10 * time.Second}, Expected: map[string]int{"counter": 3}})
		for _, o := range news {
			o.join(c, InstanceOptions{})
		}
		if err := c.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// The third start completes a checkpoint: it is what Latest restores
	// from now on, and it names only files of its own.
	c := startOpts(t, s, clock, Options{Config: coordinator.Config{Interval: 10 * time.Second}, Expected: map[string]int{"counter": 3}})
	news := []*operator{newOperator(t, c, 0, 3, InstanceOptions{}), newOperator(t, c, 1, 3, InstanceOptions{}), newOperator(t, c, 2, 3, InstanceOptions{})}
	var first coordinator.CheckpointID
	for range 3 {
		first = completeOne(t, c, clock, news)
	}
	name, id, err := Latest(ctx, s)
	if err != nil || id != first {
		t.Fatalf("Latest = %s, %d, %v; want the run's checkpoint %d", name, id, err, first)
	}
	m, err := checkpoint.ReadMetadata(ctx, s, name)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := s.Objects(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range m.Operators {
		for _, in := range op.Instances {
			if !slices.ContainsFunc(objs, func(o checkpoint.ObjectInfo) bool { return o.Name == in.File.Name }) {
				t.Errorf("checkpoint %s names %s, which is not its own", name, in.File.Name)
			}
		}
	}
	if _, err := checkpoint.ReadMetadata(ctx, s, "sp-before-upgrade"); err != nil {
		t.Errorf("the savepoint the job started from: %v", err)
	}
	if o, ok, err := ReadOrigin(ctx, s); err != nil || !ok || o.Savepoint != "sp-before-upgrade" || o.Base <= sp.ID {
		t.Errorf("origin: %+v, %v, %v", o, ok, err)
	}
}

// A Latest that meets a committed checkpoint without every key group — as
// earlier versions could write — passes over it, and says so, rather than
// handing out a checkpoint no restore can use; Start does not retain it.
func TestLatestPassesOverCheckpointsThatLackKeyGroups(t *testing.T) {
	ctx := context.Background()
	s := checkpoint.NewMem()
	clock := &fakeClock{now: t0}
	c := startOpts(t, s, clock, Options{Config: coordinator.Config{Interval: 10 * time.Second, Retained: 3}})
	ops := []*operator{newOperator(t, c, 0, 2, InstanceOptions{}), newOperator(t, c, 1, 2, InstanceOptions{})}
	id := completeOne(t, c, clock, ops)
	want, _ := wantAt(t, id, ops)
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// A checkpoint of instance 0 alone, committed by hand.
	m, err := checkpoint.ReadMetadata(ctx, s, checkpoint.CheckpointName(uint64(id)))
	if err != nil {
		t.Fatal(err)
	}
	partial := *m
	partial.CheckpointID = uint64(id) + 5
	op := partial.Operators[0]
	op.Instances = op.Instances[:1]
	op.KeyGroups.End = op.Instances[0].KeyGroups.End
	partial.Operators = []checkpoint.Operator{op}
	bad := checkpoint.CheckpointName(partial.CheckpointID)
	data, err := readObject(ctx, s, checkpoint.CheckpointName(uint64(id)), op.Instances[0].File.Name, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeObject(ctx, s, bad, op.Instances[0].File.Name, data); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Commit(ctx, s, bad, &partial); err != nil {
		t.Fatal(err)
	}
	plan, err := PlanLatest(ctx, s, "counter", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if plan.ID != id || !slices.Equal(plan.Skipped, []string{bad}) {
		t.Errorf("plan of %d skipping %v, want %d skipping %s", plan.ID, plan.Skipped, id, bad)
	}
	restoresEverything(t, s, want)
	var logs syncBuffer
	c2 := startOpts(t, s, clock, Options{Config: coordinator.Config{Interval: 10 * time.Second, Retained: 3}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if got := retainedIDs(c2); !slices.Equal(got, []coordinator.CheckpointID{id}) {
		t.Errorf("retained %v, want only %d", got, id)
	}
	if !strings.Contains(logs.String(), bad) {
		t.Errorf("the log does not name %s:\n%s", bad, logs.String())
	}
}

func retainedIDs(c *Coordinator) []coordinator.CheckpointID {
	var ids []coordinator.CheckpointID
	for _, cp := range c.Retained() {
		ids = append(ids, cp.ID)
	}
	return ids
}

// The job graph's names: instance ids are "operator/index" with a
// canonical decimal index, and ExpectedInstances lists them sorted.
func TestInstanceIDsOfTheJobGraph(t *testing.T) {
	for id, want := range map[coordinator.ParticipantID]bool{
		"counter/0": true, "counter/12": true, "a/b/3": true,
		"counter/-1": false, "counter/01": false, "counter/x": false, "counter": false, "/0": false, "counter/": false,
	} {
		op, i, ok := ParseInstanceID(id)
		if ok != want || ok && InstanceID(op, i) != id {
			t.Errorf("ParseInstanceID(%q) = %q, %d, %v", id, op, i, ok)
		}
	}
	got, err := ExpectedInstances(map[string]int{"sink": 1, "counter": 3})
	if err != nil {
		t.Fatal(err)
	}
	var ids []coordinator.ParticipantID
	for _, e := range got {
		ids = append(ids, e.ID())
	}
	if want := []coordinator.ParticipantID{"counter/0", "counter/1", "counter/2", "sink/0"}; !slices.Equal(ids, want) {
		t.Errorf("ExpectedInstances: %v, want %v", ids, want)
	}
	if got, err := ExpectedInstances(nil); got != nil || err != nil {
		t.Errorf("ExpectedInstances(nil) = %v, %v", got, err)
	}
}
