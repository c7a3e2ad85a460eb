package etcdcoord

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/internal/testenv/etcdtest"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/coordinator"
	"github.com/stategen/stategen/runtime/coordinator/driver"
	"github.com/stategen/stategen/runtime/storetest"
)

func TestMain(m *testing.M) { etcdtest.Main(m) }

const maxP = 32

// logger is quiet unless STATEGEN_LOG is set.
func logger() *slog.Logger {
	if os.Getenv("STATEGEN_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// testJob returns a job of its own for t on the shared server.
func testJob(t *testing.T) Job {
	t.Helper()
	etcdtest.Require(t)
	return Job{Name: "job", Prefix: etcdtest.Prefix(t)}
}

// client returns a new client of the shared server: one per simulated
// process.
func client(t *testing.T) *clientv3.Client {
	t.Helper()
	return etcdtest.Require(t).Client(t)
}

// waitUntil polls cond until it holds; a hang fails after a generous
// deadline (it is not a timing assertion).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func startCoordinator(t *testing.T, cli *clientv3.Client, opts Options) *Coordinator {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = logger()
	}
	c, err := StartCoordinator(context.Background(), cli, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("closing coordinator: %v", err)
		}
	})
	return c
}

func awaitLeader(t *testing.T, c *Coordinator) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	if err := c.AwaitLeadership(ctx); err != nil {
		t.Fatalf("%s never led: %v", c.name, err)
	}
}

// seen is a trigger as a worker received it.
type seen struct {
	id coordinator.CheckpointID
	at time.Time
}

// worker is an operator instance in a simulated process of its own (its
// own etcd client): it processes records into a cow store and handles
// triggers and notifications on its goroutine, as an operator loop does.
type worker struct {
	t           *testing.T
	index       int
	parallelism int
	job         Job
	storage     checkpoint.Storage
	cli         *clientv3.Client
	kgs         runtime.KeyGroupRange
	store       runtime.Store
	state       runtime.ValueState
	inst        *Instance
	rng         *rand.Rand
	offset      uint64

	stop chan struct{}
	done chan struct{}

	mu       sync.Mutex
	expected map[coordinator.CheckpointID]storetest.Contents
	blobs    map[coordinator.CheckpointID][]byte
	triggers []seen
	notes    []driver.Notification
	held     []driver.Trigger          // triggers held, not yet snapshotted
	seenHeld []driver.Trigger          // every trigger ever held
	hold     func(driver.Trigger) bool // hold (do not snapshot yet) the triggers it selects
}

func newWorker(t *testing.T, job Job, s checkpoint.Storage, index, parallelism int) *worker {
	t.Helper()
	return newWorkerOn(t, client(t), job, s, index, parallelism)
}

// newWorkerOn is newWorker with the client cli.
func newWorkerOn(t *testing.T, cli *clientv3.Client, job Job, s checkpoint.Storage, index, parallelism int) *worker {
	t.Helper()
	kgs, err := runtime.KeyGroupRangeForOperator(maxP, parallelism, index)
	if err != nil {
		t.Fatal(err)
	}
	store, err := cow.New(cow.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: maxP, KeyGroups: kgs}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Register(runtime.StateSpec{Name: "count", Kind: runtime.KindValue})
	if err != nil {
		t.Fatal(err)
	}
	w := &worker{
		t: t, index: index, parallelism: parallelism, job: job, storage: s,
		cli: cli, kgs: kgs, store: store, state: st.(runtime.ValueState),
		rng:      rand.New(rand.NewPCG(uint64(index), uint64(parallelism))),
		expected: map[coordinator.CheckpointID]storetest.Contents{},
		blobs:    map[coordinator.CheckpointID][]byte{},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w.inst, err = Join(ctx, w.cli, JoinOptions{
		Job:      job,
		Instance: driver.InstanceOptions{Operator: "counter", Index: index, Store: store},
		Storage:  s,
		// Long enough that a loaded machine never lets it expire by
		// itself: the tests that want a lease to end revoke it.
		LeaseTTL: 10 * time.Second,
		Logger:   logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	w.stop, w.done = make(chan struct{}), make(chan struct{})
	go w.loop()
	t.Cleanup(w.close)
	return w
}

func (w *worker) loop() {
	defer close(w.done)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-w.stop:
			return
		case tr := <-w.inst.Triggers():
			w.mu.Lock()
			w.triggers = append(w.triggers, seen{tr.ID, time.Now()})
			hold := w.hold != nil && w.hold(tr)
			if hold {
				w.held = append(w.held, tr)
				w.seenHeld = append(w.seenHeld, tr)
			}
			w.mu.Unlock()
			if !hold {
				w.snapshot(tr)
			}
		case n := <-w.inst.Notifications():
			w.mu.Lock()
			w.notes = append(w.notes, n)
			w.mu.Unlock()
		case <-tick.C:
			w.write(10)
			// Released: take the held triggers now (those whose
			// checkpoints ended are skipped by the Instance).
			w.mu.Lock()
			var release []driver.Trigger
			if w.hold == nil {
				release, w.held = w.held, nil
			}
			w.mu.Unlock()
			for _, tr := range release {
				w.snapshot(tr)
			}
		}
	}
}

// write processes n records: each puts a random value under a random key
// of the worker's key groups.
func (w *worker) write(n int) {
	for n > 0 {
		key := binary.BigEndian.AppendUint64(nil, w.rng.Uint64()%256)
		k := runtime.MakeKey(key, nil, maxP)
		if !w.kgs.Contains(k.Group()) {
			continue
		}
		if err := w.state.Put(k, binary.BigEndian.AppendUint64(nil, w.rng.Uint64())); err != nil {
			w.t.Error(err)
			return
		}
		w.offset++
		n--
	}
}

// snapshot records the state and the source offset at the synchronous
// phase and calls Instance.Snapshot.
func (w *worker) snapshot(tr driver.Trigger) {
	blob := binary.BigEndian.AppendUint64(nil, w.offset)
	snap, err := w.store.Snapshot()
	if err != nil {
		w.t.Error(err)
		return
	}
	contents, err := storetest.Dump(snap)
	_ = snap.Release()
	if err != nil {
		w.t.Error(err)
		return
	}
	w.mu.Lock()
	w.expected[tr.ID] = contents
	w.blobs[tr.ID] = blob
	w.mu.Unlock()
	if err := w.inst.Snapshot(tr, blob); err != nil {
		w.t.Errorf("worker %d: snapshot %d: %v", w.index, tr.ID, err)
	}
}

func (w *worker) close() {
	select {
	case <-w.stop:
		return
	default:
	}
	close(w.stop)
	<-w.done
	if err := w.inst.Close(); err != nil {
		w.t.Errorf("worker %d: close: %v", w.index, err)
	}
	if err := w.store.Close(); err != nil {
		w.t.Errorf("worker %d: closing the store: %v", w.index, err)
	}
}

// setHold makes the worker hold the triggers f selects; nil releases the
// held ones.
func (w *worker) setHold(f func(driver.Trigger) bool) {
	w.mu.Lock()
	w.hold = f
	w.mu.Unlock()
}

// heldTriggers returns every trigger the worker held, released or not.
func (w *worker) heldTriggers() []driver.Trigger {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seenHeld)
}

func (w *worker) seenTriggers() []seen {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.triggers)
}

func (w *worker) notifications() []driver.Notification {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.notes)
}

// note returns the worker's notification of checkpoint id, if any.
func (w *worker) note(id coordinator.CheckpointID) (driver.Notification, bool) {
	for _, n := range w.notifications() {
		if n.ID == id {
			return n, true
		}
	}
	return driver.Notification{}, false
}

// completed returns the ids of the checkpoints (not savepoints) the worker
// was notified complete, ascending.
func (w *worker) completed() []coordinator.CheckpointID {
	var ids []coordinator.CheckpointID
	for _, n := range w.notifications() {
		// A savepoint is notified too, but lives at its own location, not
		// among the checkpoints.
		if n.Completed() && !n.Savepoint {
			ids = append(ids, n.ID)
		}
	}
	return ids
}

// completedByAll returns the ids every worker was notified complete.
func completedByAll(ws []*worker) []coordinator.CheckpointID {
	ids := ws[0].completed()
	for _, w := range ws[1:] {
		other := w.completed()
		ids = slices.DeleteFunc(ids, func(id coordinator.CheckpointID) bool { return !slices.Contains(other, id) })
	}
	return ids
}

func (w *worker) expectedAt(id coordinator.CheckpointID) (storetest.Contents, []byte, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c, ok := w.expected[id]
	return c, w.blobs[id], ok
}

// checkRestores restores checkpoint id of s at parallelism q and compares
// the state and the blobs with what the workers held at its trigger.
func checkRestores(t *testing.T, s checkpoint.Storage, id coordinator.CheckpointID, ws []*worker, q int) {
	t.Helper()
	ctx := context.Background()
	plan, err := driver.PlanRestore(ctx, s, checkpoint.CheckpointName(uint64(id)), "counter", q, maxP)
	if err != nil {
		t.Fatalf("plan checkpoint %d: %v", id, err)
	}
	var parts []storetest.Contents
	for i := range q {
		kgs, err := runtime.KeyGroupRangeForOperator(maxP, q, i)
		if err != nil {
			t.Fatal(err)
		}
		store, err := storetest.NewModel(runtime.StoreConfig{MaxParallelism: maxP, KeyGroups: kgs})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := plan.Restore(ctx, i, store, nil); err != nil {
			t.Fatalf("restore checkpoint %d instance %d: %v", id, i, err)
		}
		parts = append(parts, dump(t, store))
		_ = store.Close()
	}
	var wantParts []storetest.Contents
	var blobs [][]byte
	for _, w := range ws {
		c, blob, ok := w.expectedAt(id)
		if !ok {
			t.Fatalf("worker %d never snapshotted checkpoint %d", w.index, id)
		}
		wantParts = append(wantParts, c)
		blobs = append(blobs, blob)
	}
	if diff := cmp.Diff(storetest.Merge(wantParts...), storetest.Merge(parts...)); diff != "" {
		t.Fatalf("checkpoint %d restores to other state (-want +got):\n%s", id, diff)
	}
	gotBlobs := slices.Clone(plan.Instances[0].OperatorStates)
	slices.SortFunc(gotBlobs, func(a, b []byte) int { return slices.Compare(a, b) })
	slices.SortFunc(blobs, func(a, b []byte) int { return slices.Compare(a, b) })
	if diff := cmp.Diff(blobs, gotBlobs); diff != "" {
		t.Fatalf("checkpoint %d restores other blobs (-want +got):\n%s", id, diff)
	}
}

func dump(t *testing.T, s runtime.Store) storetest.Contents {
	t.Helper()
	c, err := storetest.DumpStore(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// noStrayObjects fails if s holds an object that no committed
// checkpoint's metadata names: data that Cleanup would have to remove.
// Uncommitted checkpoints must be empty; an empty one may remain where a
// participant's write, cancelled because its checkpoint was aborted, raced
// with the deletion of the checkpoint (checkpoint.Dir creates a
// checkpoint's directory on the first write), and Cleanup removes it.
func noStrayObjects(t *testing.T, s checkpoint.Storage) {
	t.Helper()
	ctx := context.Background()
	names, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		objs, err := s.Objects(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		m, err := checkpoint.ReadMetadata(ctx, s, name)
		if errors.Is(err, checkpoint.ErrNotFound) {
			if len(objs) > 0 {
				t.Errorf("uncommitted checkpoint %s holds %v", name, objs)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var named []string
		for _, op := range m.Operators {
			for _, in := range op.Instances {
				named = append(named, in.File.Name)
			}
		}
		for _, o := range objs {
			if o.Name != checkpoint.MetadataName && !slices.Contains(named, o.Name) {
				t.Errorf("checkpoint %s holds %s, which its metadata does not name", name, o.Name)
			}
		}
	}
	if _, err := checkpoint.Cleanup(ctx, s, nil); err != nil {
		t.Fatal(err)
	}
}

// keysUnder returns the keys under prefix.
func keysUnder(t *testing.T, cli *clientv3.Client, prefix string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		out = append(out, string(kv.Key))
	}
	return out
}

// cutStorage is a Storage that a test can cut off: a dead process's
// storage, where nothing it would do after its death lands.
type cutStorage struct {
	checkpoint.Storage
	off atomic.Bool
}

var errCut = errors.New("test: storage cut off (the process is dead)")

func (c *cutStorage) Create(ctx context.Context, ckpt, name string) (checkpoint.ObjectWriter, error) {
	if c.off.Load() {
		return nil, errCut
	}
	return c.Storage.Create(ctx, ckpt, name)
}

func (c *cutStorage) Remove(ctx context.Context, ckpt, name string) error {
	if c.off.Load() {
		return errCut
	}
	return c.Storage.Remove(ctx, ckpt, name)
}

func (c *cutStorage) RemoveIncomplete(ctx context.Context, ckpt string) error {
	if c.off.Load() {
		return errCut
	}
	return c.Storage.RemoveIncomplete(ctx, ckpt)
}

func (c *cutStorage) Delete(ctx context.Context, ckpt string) error {
	if c.off.Load() {
		return errCut
	}
	return c.Storage.Delete(ctx, ckpt)
}
