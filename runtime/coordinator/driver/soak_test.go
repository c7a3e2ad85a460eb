package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	goruntime "runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime/coordinator"
	"github.com/stategen/stategen/runtime/storetest"
)

// soakStorage is the soak's checkpoint storage: a Mem with faults injected
// into participants' writes (random delays, failures, and writes too slow
// for the timeout), occasional metadata failures, a crash switch that
// fails everything, and an archive that keeps a copy of every committed
// checkpoint before it is deleted, so that every completed checkpoint can
// be verified after the run, also those retention removed.
type soakStorage struct {
	checkpoint.Storage // the live data, shared across a restart
	archive            *checkpoint.Mem
	crashed            atomic.Bool

	mu  sync.Mutex
	rng *rand.Rand
}

var errCrashed = errors.New("soak: storage unreachable (the process crashed)")

func (s *soakStorage) intn(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rng.IntN(n)
}

func (s *soakStorage) Create(ctx context.Context, ckpt, name string) (checkpoint.ObjectWriter, error) {
	if s.crashed.Load() {
		return nil, errCrashed
	}
	w, err := s.Storage.Create(ctx, ckpt, name)
	if err != nil {
		return nil, err
	}
	return &soakWriter{ObjectWriter: w, s: s, ctx: ctx, ckpt: ckpt, name: name}, nil
}

type soakWriter struct {
	checkpoint.ObjectWriter
	s          *soakStorage
	ctx        context.Context
	ckpt, name string
}

func (w *soakWriter) Commit() error {
	fail := func(err error) error {
		_ = w.ObjectWriter.Abort()
		return err
	}
	if w.s.crashed.Load() {
		return fail(errCrashed)
	}
	switch {
	case w.ckpt == checkpoint.CoordinatorName:
	case w.name == checkpoint.MetadataName:
		if w.s.intn(100) == 0 {
			return fail(errors.New("soak: injected metadata write failure"))
		}
	default:
		var delay time.Duration
		switch r := w.s.intn(100); {
		case r < 3:
			return fail(errors.New("soak: injected write failure"))
		case r < 6:
			delay = 150 * time.Millisecond // beyond the timeout
		default:
			delay = time.Duration(r%6) * time.Millisecond
		}
		select {
		case <-time.After(delay):
		case <-w.ctx.Done():
			return fail(w.ctx.Err())
		}
	}
	if w.s.crashed.Load() {
		return fail(errCrashed)
	}
	return w.ObjectWriter.Commit()
}

func (s *soakStorage) Open(ctx context.Context, ckpt, name string) (checkpoint.Object, error) {
	if s.crashed.Load() {
		return nil, errCrashed
	}
	return s.Storage.Open(ctx, ckpt, name)
}

func (s *soakStorage) Stat(ctx context.Context, ckpt, name string) (checkpoint.ObjectInfo, error) {
	if s.crashed.Load() {
		return checkpoint.ObjectInfo{}, errCrashed
	}
	return s.Storage.Stat(ctx, ckpt, name)
}

func (s *soakStorage) List(ctx context.Context) ([]string, error) {
	if s.crashed.Load() {
		return nil, errCrashed
	}
	return s.Storage.List(ctx)
}

func (s *soakStorage) Objects(ctx context.Context, ckpt string) ([]checkpoint.ObjectInfo, error) {
	if s.crashed.Load() {
		return nil, errCrashed
	}
	return s.Storage.Objects(ctx, ckpt)
}

// Remove archives a committed checkpoint before its metadata goes (the
// first step of checkpoint.Delete).
func (s *soakStorage) Remove(ctx context.Context, ckpt, name string) error {
	if s.crashed.Load() {
		return errCrashed
	}
	if name == checkpoint.MetadataName {
		if err := s.archiveCheckpoint(ctx, ckpt); err != nil {
			return err
		}
	}
	return s.Storage.Remove(ctx, ckpt, name)
}

func (s *soakStorage) RemoveIncomplete(ctx context.Context, ckpt string) error {
	if s.crashed.Load() {
		return errCrashed
	}
	return s.Storage.RemoveIncomplete(ctx, ckpt)
}

func (s *soakStorage) Delete(ctx context.Context, ckpt string) error {
	if s.crashed.Load() {
		return errCrashed
	}
	return s.Storage.Delete(ctx, ckpt)
}

func (s *soakStorage) archiveCheckpoint(ctx context.Context, ckpt string) error {
	if _, err := s.Storage.Stat(ctx, ckpt, checkpoint.MetadataName); errors.Is(err, checkpoint.ErrNotFound) {
		return nil // not committed: nothing to verify later
	}
	objs, err := s.Storage.Objects(ctx, ckpt)
	if err != nil {
		return err
	}
	for _, o := range objs {
		obj, err := s.Storage.Open(ctx, ckpt, o.Name)
		if err != nil {
			return err
		}
		data, err := io.ReadAll(io.NewSectionReader(obj, 0, obj.Size()))
		_ = obj.Close()
		if err != nil {
			return err
		}
		w, err := s.archive.Create(ctx, ckpt, o.Name)
		if errors.Is(err, checkpoint.ErrExist) {
			continue
		}
		if err != nil {
			return err
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
		if err := w.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// soakLoop is an operator's goroutine: it writes continuously, takes
// triggers between writes — declining a few, sometimes after a delay (a
// busy operator) — and checks that the ids of its triggers and completions
// strictly increase.
func (o *operator) soakLoop(stop <-chan struct{}, seed uint64, triggered, completed *[]coordinator.CheckpointID) {
	rng := rand.New(rand.NewPCG(seed, 99))
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			o.write(3)
		case t := <-o.inst.Triggers():
			if n := len(*triggered); n > 0 && t.ID <= (*triggered)[n-1] {
				o.t.Errorf("operator %d: trigger %d after %d", o.index, t.ID, (*triggered)[n-1])
			}
			*triggered = append(*triggered, t.ID)
			var err error
			switch r := rng.IntN(100); {
			case r < 2:
				err = o.inst.Decline(t, errors.New("soak: operator declined"))
			case r < 4:
				err = o.inst.Decline(t, fmt.Errorf("soak: draining: %w", coordinator.ErrNotReady))
			default:
				if r < 10 {
					time.Sleep(time.Duration(r) * time.Millisecond) // busy
				}
				err = o.snapshot(t)
			}
			if err != nil && !errors.Is(err, ErrClosed) {
				o.t.Errorf("operator %d, checkpoint %d: %v", o.index, t.ID, err)
			}
		case n := <-o.inst.Notifications():
			if !n.Completed() || n.Savepoint {
				// Savepoints are notified apart: their ids are not
				// ordered with the checkpoints'.
				continue
			}
			if k := len(*completed); k > 0 && n.ID <= (*completed)[k-1] {
				o.t.Errorf("operator %d: completion %d after %d", o.index, n.ID, (*completed)[k-1])
			}
			*completed = append(*completed, n.ID)
		}
	}
}

// epoch is one run of the job: a Coordinator and its operators.
type epoch struct {
	c         *Coordinator
	ops       []*operator
	stop      chan struct{}
	wg        sync.WaitGroup
	triggered [][]coordinator.CheckpointID // per operator, in order
	completed [][]coordinator.CheckpointID
}

func (e *epoch) run(seed uint64) {
	e.stop = make(chan struct{})
	e.triggered = make([][]coordinator.CheckpointID, len(e.ops))
	e.completed = make([][]coordinator.CheckpointID, len(e.ops))
	for i, o := range e.ops {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			o.soakLoop(e.stop, seed+uint64(i), &e.triggered[i], &e.completed[i])
		}()
	}
}

// halt stops the operators, closes their instances and the Coordinator.
func (e *epoch) halt(t *testing.T) {
	t.Helper()
	close(e.stop)
	e.wg.Wait()
	for _, o := range e.ops {
		if err := o.inst.Close(); err != nil {
			t.Errorf("closing instance %s: %v", o.inst.ID(), err)
		}
	}
	if err := e.c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// waitEnded waits until n checkpoints of e ended, taking a savepoint
// halfway; a hang fails after a generous deadline.
func (e *epoch) waitEnded(t *testing.T, n int64, savepoint string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	took := false
	for {
		counts := e.c.Stats().Counts()
		if counts.Completed+counts.Failed >= n {
			return
		}
		if !took && counts.Completed+counts.Failed >= n/2 {
			took = true
			if _, err := e.c.Savepoint(context.Background(), savepoint); err != nil {
				// A savepoint fails like any checkpoint here (a decline, a
				// slow write); it must fail cleanly.
				var ae *coordinator.AbortError
				if !errors.As(err, &ae) {
					t.Fatalf("savepoint: %v", err)
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %+v after 3 minutes", counts)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSoak runs a job on the real clock: four operators on backends/cow
// writing continuously, checkpoints every 10ms with random participant delays,
// declines, write failures and timeouts, a savepoint, and a crash halfway
// after which the job restores the latest checkpoint at parallelism three
// and goes on. Afterwards: ids strictly increased (per operator, and
// across the crash, which the durable counter guarantees); every completed
// checkpoint and savepoint — retained or long deleted — restores, at some
// parallelism, into the reference model to exactly the state the operators
// recorded at their synchronous phase, with their blobs; and the storage holds nothing but
// the retained checkpoints, the savepoints and the id counter. Timing only
// decides which checkpoints fail, never whether the assertions hold.
//
// It runs 200 checkpoints; STATEGEN_LONG=1 runs 2000.
func TestSoak(t *testing.T) {
	total := int64(200)
	if os.Getenv("STATEGEN_LONG") == "1" {
		total = 2000
	}
	start := time.Now()
	mem := checkpoint.NewMem()
	archive := checkpoint.NewMem()
	newStorage := func(seed uint64) *soakStorage {
		return &soakStorage{Storage: mem, archive: archive, rng: rand.New(rand.NewPCG(seed, 1))}
	}
	cfg := coordinator.Config{
		Interval:          10 * time.Millisecond,
		Timeout:           100 * time.Millisecond,
		MaxConcurrent:     2,
		Retained:          2,
		TolerableFailures: coordinator.UnlimitedFailures,
		StatsHistory:      int(total) * 2,
		IDReservation:     10,
	}
	ctx := context.Background()
	startEpoch := func(s checkpoint.Storage, parallelism int) *epoch {
		c, err := Start(ctx, Options{Config: cfg, Storage: s, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		e := &epoch{c: c}
		for i := range parallelism {
			e.ops = append(e.ops, newOperatorOn(t, cowStore, nil, i, parallelism, InstanceOptions{}))
		}
		return e
	}

	// The first run, at parallelism 4, until the crash.
	s1 := newStorage(1)
	e1 := startEpoch(s1, 4)
	for _, o := range e1.ops {
		o.join(e1.c, InstanceOptions{})
	}
	e1.run(100)
	e1.waitEnded(t, total/2, "savepoint-1")
	s1.crashed.Store(true)
	e1.halt(t)

	// The restart: the latest checkpoint restores at parallelism 3, to the
	// state of its synchronous phase.
	s2 := newStorage(2)
	name, latest, err := Latest(ctx, s2)
	if err != nil {
		t.Fatal(err)
	}
	e2 := startEpoch(s2, 3)
	var blobs [][]byte
	for _, o := range e2.ops {
		r, err := RestoreLatest(ctx, s2, "counter", o.index, 3, o.store, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Checkpoint != name {
			t.Fatalf("restored %s, the latest is %s", r.Checkpoint, name)
		}
		blobs = r.OperatorStates
	}
	want, wantBlobs := wantAt(t, latest, e1.ops)
	merged := storetest.Merge(contentsOf(e2.ops)...)
	if diff := cmp.Diff(want, merged); diff != "" {
		t.Fatalf("the restart restored another state than checkpoint %d's (-want +got):\n%s", latest, diff)
	}
	slices.SortFunc(blobs, func(a, b []byte) int { return slices.Compare(a, b) })
	if !cmp.Equal(wantBlobs, blobs) {
		t.Fatalf("the restart got blobs %x, want %x", blobs, wantBlobs)
	}
	for _, o := range e2.ops {
		o.join(e2.c, InstanceOptions{})
	}
	if r := e2.c.Retained(); len(r) == 0 || r[len(r)-1].ID != latest {
		t.Fatalf("retained after the restart: %v, want up to %d", r, latest)
	}
	e2.run(200)
	e2.waitEnded(t, total-total/2, "savepoint-2")
	e2.halt(t)

	// Ids strictly increased across the crash: the second run's first id
	// is above everything the first run issued.
	var max1 coordinator.CheckpointID
	for _, ids := range e1.triggered {
		if len(ids) > 0 {
			max1 = max(max1, ids[len(ids)-1])
		}
	}
	for _, r := range e1.c.Stats().Recent() {
		max1 = max(max1, r.ID)
	}
	for _, r := range e2.c.Stats().Recent() {
		if r.ID <= max1 {
			t.Errorf("after the restart, checkpoint %d; the first run issued up to %d", r.ID, max1)
		}
	}

	// Every completed checkpoint restores to the state at its trigger.
	verified := 0
	for k, e := range []*epoch{e1, e2} {
		st := e.c.Stats()
		if n := st.Counts(); n.InProgress() != 0 || n.Completed == 0 || int(n.Completed+n.Failed+n.NotReady) != len(st.Recent()) {
			t.Errorf("run %d: counts %+v, %d records", k+1, n, len(st.Recent()))
		}
		for i, r := range st.Recent() {
			if r.Status != coordinator.StatusCompleted {
				continue
			}
			ckpt := checkpoint.CheckpointName(uint64(r.ID))
			if r.Savepoint {
				ckpt = r.Location
			}
			src := checkpoint.Storage(mem)
			if _, err := mem.Stat(ctx, ckpt, checkpoint.MetadataName); err != nil {
				src = archive
			}
			want, wantBlobs := wantAt(t, r.ID, e.ops)
			got, blobs := restoreAll(t, src, ckpt, 1+i%5)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("checkpoint %d restores to another state than at its trigger (-want +got):\n%s", r.ID, diff)
			}
			if !cmp.Equal(wantBlobs, blobs) {
				t.Errorf("checkpoint %d: blobs %x, want %x", r.ID, blobs, wantBlobs)
			}
			verified++
		}
	}

	// Nothing is left that no retained checkpoint references.
	removed, err := checkpoint.Cleanup(ctx, mem, nil)
	if err != nil || len(removed) > 0 {
		t.Errorf("left behind: %v (%v)", removed, err)
	}
	all, err := mem.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, r := range e2.c.Retained() {
		keep = append(keep, checkpoint.CheckpointName(uint64(r.ID)))
	}
	for _, n := range all {
		if n != checkpoint.CoordinatorName && !slices.Contains(keep, n) && n != "savepoint-1" && n != "savepoint-2" {
			t.Errorf("storage holds %s, neither retained, a savepoint nor the counter", n)
		}
	}
	if len(keep) == 0 || len(keep) > cfg.Retained {
		t.Errorf("%d checkpoints retained, want 1..%d", len(keep), cfg.Retained)
	}
	// Every snapshot was released, whatever became of its checkpoint. (A
	// leak is found when the garbage collector finds the snapshot.)
	goruntime.GC()
	goruntime.GC()
	time.Sleep(10 * time.Millisecond)
	if n := leakedSnapshots.Load(); n > 0 {
		t.Errorf("%d snapshots were never released", n)
	}
	c1, c2 := e1.c.Stats().Counts(), e2.c.Stats().Counts()
	t.Logf("run 1 (parallelism 4): %d completed, %d aborted; crash; run 2 (parallelism 3, from checkpoint %d): %d completed, %d aborted; %d completed checkpoints verified in %v",
		c1.Completed, c1.Failed, latest, c2.Completed, c2.Failed, verified, time.Since(start).Round(time.Millisecond))
}

// contentsOf returns the current contents of ops' stores.
func contentsOf(ops []*operator) []storetest.Contents {
	var out []storetest.Contents
	for _, o := range ops {
		out = append(out, o.contents())
	}
	return out
}
