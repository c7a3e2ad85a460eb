package driver

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stategen/stategen/backends/cow"
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
	// beforeArm, if set, runs at the start of AfterFunc(d), before the
	// timer is registered: a test moves the clock there to play the
	// moment between a caller's Now and its AfterFunc.
	beforeArm func(d time.Duration)
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

// AfterFunc runs f once the clock has advanced by d; like time.AfterFunc,
// at once (on its own goroutine) if d is not positive — a timer armed
// after the clock passed its time must not wait for the next Advance.
func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	if hook := c.beforeArm; hook != nil {
		c.mu.Unlock()
		hook(d)
		c.mu.Lock()
	}
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	if d <= 0 {
		t.stopped = true
		go f()
		return t
	}
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

// participant is a hand-written Participant (the prototype of Instance):
// a storetest.Model store written by its own goroutine, which also takes
// the synchronous phase of snapshots; the asynchronous phase and the
// acknowledgement run on checkpoint.WriteAsync's goroutine. Unlike an
// Instance it can hold an acknowledgement past the deadline (delay), which
// the tests of late acknowledgements need.
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

func (p *participant) NotifyComplete(c Completion) {
	select {
	case p.completed <- c.ID:
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
		if !p.kgs.Contains(k.Group()) {
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
		p.coord.Ack(t, p.id, Acknowledgement{Result: res})
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
	if diff := cmp.Diff(storetest.Merge(parts...), got); diff != "" {
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

// operator is an operator instance built on the exported helper: a
// storetest.Model store with one value state, joined to a Coordinator as an
// Instance. Tests on the fake clock play the operator's goroutine
// themselves, one step at a time; the soak runs loop.
type operator struct {
	t     testing.TB
	index int
	kgs   runtime.KeyGroupRange
	store runtime.Store
	state runtime.ValueState
	inst  *Instance
	rng   *rand.Rand
	// offset counts the records processed: the source position that the
	// operator-state blob records.
	offset uint64

	mu       sync.Mutex
	expected map[coordinator.CheckpointID]storetest.Contents
	blobs    map[coordinator.CheckpointID][]byte
}

// storeMaker makes an operator's store.
type storeMaker func(runtime.StoreConfig) (runtime.Store, error)

// modelStore is the reference model: obviously correct, and strict about
// its callers' mistakes. The tests of the helper use it, and it is the
// oracle restored checkpoints are read into.
func modelStore(cfg runtime.StoreConfig) (runtime.Store, error) { return storetest.NewModel(cfg) }

// cowStore is the real in-memory backend, which the soak runs on. A
// snapshot that becomes garbage without having been released (the leak
// of FLINK-13469, which keeps copy-on-write on forever) is counted in
// leakedSnapshots.
func cowStore(cfg runtime.StoreConfig) (runtime.Store, error) {
	return cow.New(cow.Options{StoreConfig: cfg, OnLeakedSnapshot: func(uint64) { leakedSnapshots.Add(1) }})
}

var leakedSnapshots atomic.Int64

// newOperator returns instance index of parallelism of operator "counter"
// on the reference model, joined to c if c is not nil.
func newOperator(t testing.TB, c *Coordinator, index, parallelism int, opts InstanceOptions) *operator {
	return newOperatorOn(t, modelStore, c, index, parallelism, opts)
}

// newOperatorOn is newOperator on the stores mk makes.
func newOperatorOn(t testing.TB, mk storeMaker, c *Coordinator, index, parallelism int, opts InstanceOptions) *operator {
	t.Helper()
	kgs, err := runtime.KeyGroupRangeForOperator(maxP, parallelism, index)
	if err != nil {
		t.Fatal(err)
	}
	store, err := mk(runtime.StoreConfig{MaxParallelism: maxP, KeyGroups: kgs})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Register(runtime.StateSpec{Name: "count", Kind: runtime.KindValue})
	if err != nil {
		t.Fatal(err)
	}
	o := &operator{
		t: t, index: index, kgs: kgs, store: store, state: st.(runtime.ValueState),
		rng:      rand.New(rand.NewPCG(uint64(index), uint64(parallelism))),
		expected: map[coordinator.CheckpointID]storetest.Contents{},
		blobs:    map[coordinator.CheckpointID][]byte{},
	}
	if c != nil {
		o.join(c, opts)
	}
	return o
}

func (o *operator) join(c *Coordinator, opts InstanceOptions) {
	o.t.Helper()
	opts.Operator, opts.Index, opts.Store = "counter", o.index, o.store
	inst, err := c.Join(opts)
	if err != nil {
		o.t.Fatal(err)
	}
	o.inst = inst
}

// write processes n records: each puts a random value under a random key
// of the operator's key groups.
func (o *operator) write(n int) {
	for n > 0 {
		key := binary.BigEndian.AppendUint64(nil, o.rng.Uint64()%512)
		k := runtime.MakeKey(key, nil, maxP)
		if !o.kgs.Contains(k.Group()) {
			continue
		}
		if err := o.state.Put(k, binary.BigEndian.AppendUint64(nil, o.rng.Uint64())); err != nil {
			o.t.Error(err)
			return
		}
		o.offset++
		n--
	}
}

// contents returns what the store holds now.
func (o *operator) contents() storetest.Contents {
	o.t.Helper()
	snap, err := o.store.Snapshot()
	if err != nil {
		o.t.Fatal(err)
	}
	defer snap.Release()
	c, err := storetest.Dump(snap)
	if err != nil {
		o.t.Fatal(err)
	}
	return c
}

// snapshot handles trigger t like an operator: it records the state and
// the source offset (the blob) at the synchronous phase, then calls
// Instance.Snapshot.
func (o *operator) snapshot(t Trigger) error {
	blob := binary.BigEndian.AppendUint64(nil, o.offset)
	o.mu.Lock()
	o.expected[t.ID] = o.contents()
	o.blobs[t.ID] = blob
	o.mu.Unlock()
	return o.inst.Snapshot(t, blob)
}

func (o *operator) expectedAt(id coordinator.CheckpointID) (storetest.Contents, []byte, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c, ok := o.expected[id]
	return c, o.blobs[id], ok
}

// nextTrigger waits for the instance's next trigger (a hang fails after a
// generous deadline; it is not a timing assertion).
func (o *operator) nextTrigger() Trigger {
	o.t.Helper()
	select {
	case t := <-o.inst.Triggers():
		return t
	case <-time.After(20 * time.Second):
		o.t.Fatal("no trigger")
	}
	return Trigger{}
}

// nextNote waits for the instance's next notification.
func (o *operator) nextNote() Notification {
	o.t.Helper()
	select {
	case n := <-o.inst.Notifications():
		return n
	case <-time.After(20 * time.Second):
		o.t.Fatal("no notification")
	}
	return Notification{}
}

// hookStorage wraps a Storage and runs a hook before every object's commit:
// to delay it, block it until its context ends, or fail it. It counts the
// commits of each checkpoint name.
type hookStorage struct {
	checkpoint.Storage
	mu      sync.Mutex
	hook    func(ctx context.Context, ckpt, name string) error
	commits map[string]int
}

func newHookStorage(s checkpoint.Storage) *hookStorage {
	return &hookStorage{Storage: s, commits: map[string]int{}}
}

func (h *hookStorage) setHook(f func(ctx context.Context, ckpt, name string) error) {
	h.mu.Lock()
	h.hook = f
	h.mu.Unlock()
}

func (h *hookStorage) committed(ckpt string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.commits[ckpt]
}

func (h *hookStorage) Create(ctx context.Context, ckpt, name string) (checkpoint.ObjectWriter, error) {
	w, err := h.Storage.Create(ctx, ckpt, name)
	if err != nil {
		return nil, err
	}
	return &hookWriter{ObjectWriter: w, h: h, ctx: ctx, ckpt: ckpt, name: name}, nil
}

type hookWriter struct {
	checkpoint.ObjectWriter
	h          *hookStorage
	ctx        context.Context
	ckpt, name string
}

func (w *hookWriter) Commit() error {
	w.h.mu.Lock()
	hook := w.h.hook
	w.h.mu.Unlock()
	if hook != nil {
		if err := hook(w.ctx, w.ckpt, w.name); err != nil {
			_ = w.ObjectWriter.Abort()
			return err
		}
	}
	if err := w.ObjectWriter.Commit(); err != nil {
		return err
	}
	w.h.mu.Lock()
	w.h.commits[w.ckpt]++
	w.h.mu.Unlock()
	return nil
}

// blockUntilDone is a commit hook that holds a write until its context
// ends: a write that only cancellation can stop.
func blockUntilDone(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// restoreAll restores checkpoint ckpt of s at parallelism q with the
// restore API and returns the union of the new instances' contents and the
// blobs handed to instance 0, sorted.
func restoreAll(t testing.TB, s checkpoint.Storage, ckpt string, q int) (storetest.Contents, [][]byte) {
	t.Helper()
	ctx := context.Background()
	plan, err := PlanRestore(ctx, s, ckpt, "counter", q, maxP)
	if err != nil {
		t.Fatalf("plan %s at %d: %v", ckpt, q, err)
	}
	var parts []storetest.Contents
	for i := range q {
		o := newOperator(t, nil, i, q, InstanceOptions{})
		if _, err := plan.Restore(ctx, i, o.store, nil); err != nil {
			t.Fatalf("restore %s instance %d of %d: %v", ckpt, i, q, err)
		}
		parts = append(parts, o.contents())
		if !slices.EqualFunc(plan.Instances[i].OperatorStates, plan.Instances[0].OperatorStates, slices.Equal) {
			t.Fatalf("%s: instance %d gets other blobs than instance 0", ckpt, i)
		}
	}
	blobs := slices.Clone(plan.Instances[0].OperatorStates)
	slices.SortFunc(blobs, func(a, b []byte) int { return slices.Compare(a, b) })
	return storetest.Merge(parts...), blobs
}

// wantAt is what the operators held at checkpoint id, merged, and their
// blobs, sorted.
func wantAt(t testing.TB, id coordinator.CheckpointID, ops []*operator) (storetest.Contents, [][]byte) {
	t.Helper()
	var parts []storetest.Contents
	var blobs [][]byte
	for _, o := range ops {
		c, blob, ok := o.expectedAt(id)
		if !ok {
			t.Fatalf("operator %d never snapshotted checkpoint %d", o.index, id)
		}
		parts = append(parts, c)
		blobs = append(blobs, blob)
	}
	slices.SortFunc(blobs, func(a, b []byte) int { return slices.Compare(a, b) })
	return storetest.Merge(parts...), blobs
}
