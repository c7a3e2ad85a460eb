package driver

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/coordinator"
	"github.com/stategen/stategen/runtime/storetest"
)

// fakeClock is a Clock whose time moves only with Advance, which runs the
// timers that come due.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c       *fakeClock
	at      time.Time
	f       func()
	stopped bool
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

// Advance moves the clock by d and fires the timers due by then.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	keep := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.at.After(c.now):
			t.stopped = true
			due = append(due, t)
		default:
			keep = append(keep, t)
		}
	}
	c.timers = keep
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
}

const maxP = 128

// participant is an in-process operator instance: a storetest.Model store
// written by its own goroutine, which also takes the synchronous phase of
// snapshots; the asynchronous phase and the acknowledgement run on
// checkpoint.WriteAsync's goroutine.
type participant struct {
	t     testing.TB
	id    coordinator.ParticipantID
	op    string
	index int
	kgs   runtime.KeyGroupRange

	coord   *Coordinator
	store   *storetest.Model
	state   runtime.ValueState
	rng     *rand.Rand
	mailbox chan func()
	stop    chan struct{}
	loopWG  sync.WaitGroup
	asyncWG sync.WaitGroup

	// delay, if set, decides what happens to a finished snapshot before
	// it is acknowledged: wait (a func that blocks), decline (an error).
	delay func(id coordinator.CheckpointID) (wait func(), decline error)

	mu        sync.Mutex
	expected  map[coordinator.CheckpointID]storetest.Contents
	triggered chan coordinator.CheckpointID
	completed chan coordinator.CheckpointID
	aborted   chan coordinator.CheckpointID
}

func newParticipant(t testing.TB, op string, index, parallelism int, writeEvery time.Duration) *participant {
	t.Helper()
	kgs, err := runtime.KeyGroupRangeForOperator(maxP, parallelism, index)
	if err != nil {
		t.Fatal(err)
	}
	store, err := storetest.NewModel(runtime.StoreConfig{MaxParallelism: maxP, KeyGroups: kgs})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Register(runtime.StateSpec{Name: "count", Kind: runtime.KindValue})
	if err != nil {
		t.Fatal(err)
	}
	p := &participant{
		t: t, id: coordinator.ParticipantID(fmt.Sprintf("%s/%d", op, index)), op: op, index: index, kgs: kgs,
		store: store, state: st.(runtime.ValueState), rng: rand.New(rand.NewPCG(uint64(index), 1)),
		mailbox: make(chan func(), 4096), stop: make(chan struct{}),
		expected:  map[coordinator.CheckpointID]storetest.Contents{},
		triggered: make(chan coordinator.CheckpointID, 4096), completed: make(chan coordinator.CheckpointID, 4096),
		aborted: make(chan coordinator.CheckpointID, 4096),
	}
	p.loopWG.Add(1)
	go p.loop(writeEvery)
	return p
}

func (p *participant) ID() coordinator.ParticipantID { return p.id }
func (p *participant) Operator() string              { return p.op }

func (p *participant) Trigger(t Trigger) {
	select {
	case p.triggered <- t.ID:
	default:
	}
	select {
	case p.mailbox <- func() { p.snapshot(t) }:
	default:
		go p.coord.Decline(t, p.id, fmt.Errorf("mailbox full: %w", coordinator.ErrNotReady))
	}
}

func (p *participant) NotifyComplete(id coordinator.CheckpointID) {
	select {
	case p.completed <- id:
	default:
	}
}

func (p *participant) NotifyAborted(id coordinator.CheckpointID, err error) {
	select {
	case p.aborted <- id:
	default:
	}
}

// loop is the operator's goroutine: it runs mailbox work and, every
// writeEvery (if not zero), writes.
func (p *participant) loop(writeEvery time.Duration) {
	defer p.loopWG.Done()
	var tick <-chan time.Time
	if writeEvery > 0 {
		tk := time.NewTicker(writeEvery)
		defer tk.Stop()
		tick = tk.C
	}
	for {
		select {
		case <-p.stop:
			return
		case fn := <-p.mailbox:
			fn()
		case <-tick:
			p.write(3)
		}
	}
}

// write puts n random entries into the key groups the participant owns.
func (p *participant) write(n int) {
	for n > 0 {
		key := binary.BigEndian.AppendUint64(nil, p.rng.Uint64()%512)
		k := runtime.MakeKey(key, nil, maxP)
		if !p.kgs.Contains(k.Group) {
			continue
		}
		if err := p.state.Put(k, binary.BigEndian.AppendUint64(nil, p.rng.Uint64())); err != nil {
			p.t.Error(err)
			return
		}
		n--
	}
}

// snapshot runs on the operator's goroutine: the synchronous phase, then
// the write and the acknowledgement in the background.
func (p *participant) snapshot(t Trigger) {
	p.write(2)
	start := time.Now()
	snap, err := p.store.Snapshot()
	if err != nil {
		p.coord.Decline(t, p.id, err)
		return
	}
	sync := time.Since(start)
	want, err := storetest.Dump(snap)
	if err != nil {
		snap.Release()
		p.coord.Decline(t, p.id, err)
		return
	}
	p.mu.Lock()
	p.expected[t.ID] = want
	p.mu.Unlock()
	a := checkpoint.WriteAsync(context.Background(), snap, sync, t.Storage, t.Checkpoint, fmt.Sprintf("%s-%d", p.op, p.index), nil)
	p.asyncWG.Add(1)
	go func() {
		defer p.asyncWG.Done()
		res, err := a.Wait()
		if err == nil && p.delay != nil {
			wait, decline := p.delay(t.ID)
			if wait != nil {
				wait()
			}
			err = decline
		}
		if err != nil {
			p.coord.Decline(t, p.id, err)
			return
		}
		res.Snapshot.OperatorState = []byte(fmt.Sprintf("%s@%d", p.id, t.ID))
		p.coord.Ack(t, p.id, res)
	}()
}

// halt stops the operator goroutine and waits for its snapshots to be
// acknowledged or declined.
func (p *participant) halt() {
	close(p.stop)
	p.loopWG.Wait()
	p.asyncWG.Wait()
}

func (p *participant) expectedAt(id coordinator.CheckpointID) (storetest.Contents, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.expected[id]
	return c, ok
}

// waitFor receives from ch until it yields id, failing after a generous
// deadline (a hang, not a timing assertion).
func waitFor(t testing.TB, what string, ch <-chan coordinator.CheckpointID, id coordinator.CheckpointID) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case got := <-ch:
			if got == id {
				return
			}
		case <-deadline:
			t.Fatalf("no %s for checkpoint %d", what, id)
		}
	}
}

// merge is the union of the instances' contents: what the whole operator
// held at a checkpoint.
func merge(parts ...storetest.Contents) storetest.Contents {
	out := storetest.Contents{MaxParallelism: maxP, KeyGroups: runtime.FullRange(maxP), States: map[string]storetest.StateContents{}}
	for _, c := range parts {
		for name, sc := range c.States {
			dst, ok := out.States[name]
			if !ok {
				dst = storetest.StateContents{Spec: sc.Spec, Groups: map[int][]storetest.Record{}}
			}
			for g, recs := range sc.Groups {
				dst.Groups[g] = recs
			}
			out.States[name] = dst
		}
	}
	return out
}

// checkRestores restores checkpoint name of s and compares it with what the
// participants held when it was triggered, including their operator-state
// blobs.
func checkRestores(t testing.TB, s checkpoint.Storage, name string, ps []*participant) {
	t.Helper()
	ctx := context.Background()
	r, err := checkpoint.Open(ctx, s, name)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	id := coordinator.CheckpointID(r.Metadata().CheckpointID)
	var parts []storetest.Contents
	var wantBlobs []string
	for _, p := range ps {
		c, ok := p.expectedAt(id)
		if !ok {
			t.Fatalf("%s: participant %s never snapshotted checkpoint %d", name, p.id, id)
		}
		parts = append(parts, c)
		wantBlobs = append(wantBlobs, fmt.Sprintf("%s@%d", p.id, id))
	}
	v, err := r.View(ctx, ps[0].op, runtime.FullRange(maxP))
	if err != nil {
		t.Fatalf("view %s: %v", name, err)
	}
	defer v.Close()
	got, err := storetest.Dump(v)
	if err != nil {
		t.Fatalf("dump %s: %v", name, err)
	}
	if diff := cmp.Diff(merge(parts...), got); diff != "" {
		t.Errorf("%s restores to another state than at its trigger (-want +got):\n%s", name, diff)
	}
	op, err := r.Metadata().Operator(ps[0].op)
	if err != nil {
		t.Fatal(err)
	}
	var blobs []string
	for _, in := range op.Instances {
		blobs = append(blobs, string(in.OperatorState))
	}
	sort.Strings(blobs)
	sort.Strings(wantBlobs)
	if !slices.Equal(blobs, wantBlobs) {
		t.Errorf("%s: operator-state blobs %q, want %q", name, blobs, wantBlobs)
	}
}
