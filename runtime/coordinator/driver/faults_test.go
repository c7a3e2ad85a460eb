package driver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/checkpoint/faultstorage"
	"github.com/stategen/stategen/runtime/coordinator"
	"github.com/stategen/stategen/runtime/storetest"
)

// A job under storage faults: the real Coordinator and Instances, operators
// on backends/cow writing records on their own goroutines, and a
// checkpoint.Dir in a temporary directory behind a faultstorage.Storage.
// The fake clock triggers one checkpoint at a time, so that the tests know
// which checkpoint each fault hits; the operators' records flow on the real
// clock meanwhile.
type faultJob struct {
	t     *testing.T
	dir   *checkpoint.Dir
	fs    *faultstorage.Storage
	clock *fakeClock
	cfg   coordinator.Config
	c     *Coordinator
	ops   []*operator
	notes chan Notification
	stop  chan struct{}
	wg    sync.WaitGroup
	// completed lists the checkpoints the Coordinator reported completed.
	completed []coordinator.CheckpointID
	// stores makes the operators' stores.
	stores storeMaker
}

func newFaultJob(t *testing.T, cfg coordinator.Config, parallelism int) *faultJob {
	return newFaultJobOn(t, cfg, parallelism, cowStore)
}

// newFaultJobOn is newFaultJob with the operators' stores made by mk.
func newFaultJobOn(t *testing.T, cfg coordinator.Config, parallelism int, mk storeMaker) *faultJob {
	t.Helper()
	dir, err := checkpoint.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	j := &faultJob{t: t, dir: dir, fs: faultstorage.New(dir, 42), clock: &fakeClock{now: t0}, cfg: cfg, stores: mk}
	j.start(parallelism)
	return j
}

// start starts a Coordinator on the job's storage and parallelism operators
// joined to it, each on its own goroutine.
func (j *faultJob) start(parallelism int) {
	j.t.Helper()
	c, err := Start(context.Background(), Options{Config: j.cfg, Storage: j.fs, Clock: j.clock, Logger: quiet()})
	if err != nil {
		j.t.Fatal(err)
	}
	j.c = c
	j.ops = nil
	j.notes = make(chan Notification, 64)
	j.stop = make(chan struct{})
	for i := range parallelism {
		o := newOperatorOn(j.t, j.stores, c, i, parallelism, InstanceOptions{})
		j.ops = append(j.ops, o)
		j.wg.Add(1)
		go j.loop(o)
	}
}

// loop is an operator's goroutine: records every millisecond, a few more
// right before each snapshot (so that every checkpoint sees new records),
// and notifications forwarded to the test.
func (j *faultJob) loop(o *operator) {
	defer j.wg.Done()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-j.stop:
			return
		case <-tick.C:
			o.write(2)
		case tr := <-o.inst.Triggers():
			o.write(3)
			if err := o.snapshot(tr); err != nil {
				j.t.Errorf("operator %d: snapshot of checkpoint %d: %v", o.index, tr.ID, err)
			}
		case n := <-o.inst.Notifications():
			j.notes <- n
		}
	}
}

// step triggers the next checkpoint and waits until every operator has been
// told how it ended and the Coordinator has executed everything that
// followed (so that Failed is closed by now if it ever will be for it).
// It returns the checkpoint's record.
func (j *faultJob) step() coordinator.Record {
	j.t.Helper()
	j.clock.Advance(j.cfg.Interval)
	var id coordinator.CheckpointID
	seen := 0
	deadline := time.After(30 * time.Second)
	for seen < len(j.ops) {
		select {
		case n := <-j.notes:
			if n.ID < id {
				continue
			}
			if n.ID > id {
				id, seen = n.ID, 0
			}
			seen++
		case <-deadline:
			j.t.Fatalf("no end of the checkpoint after the trigger (counts %+v)", j.c.Stats().Counts())
		}
	}
	j.sync()
	for _, r := range j.c.Stats().Recent() {
		if r.ID == id {
			if r.Status == coordinator.StatusCompleted {
				j.completed = append(j.completed, id)
			}
			j.checkListed()
			return r
		}
	}
	j.t.Fatalf("no record of checkpoint %d", id)
	return coordinator.Record{}
}

// sync returns once the Coordinator's goroutine has finished what it was
// doing: it runs one event through the loop.
func (j *faultJob) sync() {
	j.t.Helper()
	if err := j.c.do(func() {}); err != nil && !errors.Is(err, ErrClosed) {
		j.t.Fatal(err)
	}
}

func (j *faultJob) failed() bool {
	select {
	case <-j.c.Failed():
		return true
	default:
		return false
	}
}

// checkListed checks that the storage lists as committed only checkpoints
// the Coordinator reported completed (or savepoints), read through the
// Dir itself so that no fault hides anything.
func (j *faultJob) checkListed() {
	j.t.Helper()
	names, err := checkpoint.List(context.Background(), j.dir)
	if err != nil {
		j.t.Fatal(err)
	}
	for _, n := range names {
		id, ok := checkpoint.ParseCheckpointName(n)
		if ok && !slices.Contains(j.completed, coordinator.CheckpointID(id)) {
			j.t.Errorf("checkpoint %s is listed as committed but was not reported completed (completed: %v)", n, j.completed)
		}
	}
}

// halt stops the operators, closes their Instances and the Coordinator.
func (j *faultJob) halt() {
	j.t.Helper()
	close(j.stop)
	j.wg.Wait()
	for _, o := range j.ops {
		if err := o.inst.Close(); err != nil {
			j.t.Errorf("closing %s: %v", o.inst.ID(), err)
		}
	}
	if err := j.c.Close(context.Background()); err != nil {
		j.t.Fatal(err)
	}
}

// checkStorage checks, through the Dir without faults, that every listed
// checkpoint is one the Coordinator reported completed, verifies (every
// byte against its checksums) and restores — at parallelism 1 and 3 — to
// exactly the operators' state at its synchronous phase; then that after
// checkpoint.Cleanup the directory holds nothing but the committed
// checkpoints' metadata and the files they name, and the id counter.
//
// epochs are the operators of each run of the job: a checkpoint's expected
// state is that of the run that took it.
func (j *faultJob) checkStorage(epochs ...[]*operator) {
	j.t.Helper()
	ctx := context.Background()
	names, err := checkpoint.List(ctx, j.dir)
	if err != nil {
		j.t.Fatal(err)
	}
	for _, name := range names {
		id, ok := checkpoint.ParseCheckpointName(name)
		if !ok {
			continue
		}
		if !slices.Contains(j.completed, coordinator.CheckpointID(id)) {
			j.t.Errorf("%s is listed but was never reported completed", name)
			continue
		}
		r, err := checkpoint.Open(ctx, j.dir, name)
		if err != nil {
			j.t.Fatalf("open %s: %v", name, err)
		}
		if err := r.Verify(ctx); err != nil {
			j.t.Errorf("verify %s: %v", name, err)
		}
		var ops []*operator
		for _, e := range epochs {
			if _, _, ok := e[0].expectedAt(coordinator.CheckpointID(id)); ok {
				ops = e
			}
		}
		if ops == nil {
			j.t.Fatalf("%s: no run of the job took it", name)
		}
		want, wantBlobs := wantAt(j.t, coordinator.CheckpointID(id), ops)
		for _, q := range []int{1, 3} {
			got, blobs := restoreAll(j.t, j.dir, name, q)
			if diff := cmp.Diff(want, got); diff != "" {
				j.t.Errorf("%s restored at parallelism %d differs from the state at its trigger (-want +got):\n%s", name, q, diff)
			}
			if !cmp.Equal(wantBlobs, blobs) {
				j.t.Errorf("%s: blobs %x, want %x", name, blobs, wantBlobs)
			}
		}
	}
	removed, err := checkpoint.Cleanup(ctx, j.dir, nil)
	if err != nil {
		j.t.Fatalf("cleanup: %v", err)
	}
	if len(removed) > 0 {
		j.t.Logf("cleanup removed %q", removed)
	}
	named := map[string]bool{}
	committed, err := checkpoint.List(ctx, j.dir)
	if err != nil {
		j.t.Fatal(err)
	}
	for _, name := range committed {
		m, err := checkpoint.ReadMetadata(ctx, j.dir, name)
		if err != nil {
			j.t.Fatal(err)
		}
		named[filepath.Join(name, checkpoint.MetadataName)] = true
		for _, op := range m.Operators {
			for _, in := range op.Instances {
				named[filepath.Join(name, in.File.Name)] = true
				// The files of its chain, in the checkpoints that own
				// them (deleted ones among them).
				for _, ref := range in.Base {
					named[filepath.Join(ref.Checkpoint, ref.File.Name)] = true
				}
			}
		}
	}
	err = filepath.WalkDir(j.dir.Root(), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(j.dir.Root(), path)
		if err != nil {
			return err
		}
		if !named[rel] && filepath.Dir(rel) != checkpoint.CoordinatorName {
			j.t.Errorf("orphaned file after cleanup: %s", rel)
		}
		return nil
	})
	if err != nil {
		j.t.Fatal(err)
	}
}

// wantAbort checks that r is a failed checkpoint aborted for reason by an
// injected fault, and that its error names the fault's operation and what
// it hit.
func wantAbort(t *testing.T, r coordinator.Record, reason coordinator.AbortReason, op faultstorage.Op, object string) {
	t.Helper()
	if r.Status != coordinator.StatusFailed || r.Err == nil {
		t.Fatalf("checkpoint %d: status %v, want aborted (%v)", r.ID, r.Status, reason)
	}
	if r.Err.Reason != reason {
		t.Fatalf("checkpoint %d aborted for %v, want %v: %v", r.ID, r.Err.Reason, reason, r.Err)
	}
	var f *faultstorage.Error
	if !errors.As(r.Err, &f) || f.Op != op {
		t.Fatalf("checkpoint %d: abort error %q is not the injected %v fault", r.ID, r.Err, op)
	}
	name := checkpoint.CheckpointName(uint64(r.ID))
	for _, s := range []string{op.String(), name + "/" + object, "injected fault"} {
		if !strings.Contains(r.Err.Error(), s) {
			t.Fatalf("checkpoint %d: abort error %q does not name %q", r.ID, r.Err, s)
		}
	}
}

// faultCase is one kind of storage fault a checkpoint can meet while it is
// written, and how the Coordinator must report it.
type faultCase struct {
	name   string
	rule   faultstorage.Rule
	reason coordinator.AbortReason
	// object is the object the fault hits: a data file of operator 0's
	// instance, or the metadata.
	object string
}

func writeFaults() []faultCase {
	data, meta := faultstorage.MatchObject("counter-0.sgc"), faultstorage.MatchMetadata
	const dataFile = "counter-0.sgc"
	declined, finalize := coordinator.AbortDeclined, coordinator.AbortFinalizeFailed
	return []faultCase{
		{"data/create", faultstorage.Rule{Op: faultstorage.OpCreate, Match: data}, declined, dataFile},
		{"data/write-EIO", faultstorage.Rule{Op: faultstorage.OpWrite, Match: data}, declined, dataFile},
		{"data/write-ENOSPC", faultstorage.Rule{Op: faultstorage.OpWrite, Match: data, Cause: syscall.ENOSPC}, declined, dataFile},
		{"data/short-write-ENOSPC", faultstorage.Rule{Op: faultstorage.OpWrite, Match: data, Short: true, Cause: syscall.ENOSPC}, declined, dataFile},
		{"data/sync", faultstorage.Rule{Op: faultstorage.OpSync, Match: data}, declined, dataFile},
		{"data/rename", faultstorage.Rule{Op: faultstorage.OpRename, Match: data}, declined, dataFile},
		{"data/stat", faultstorage.Rule{Op: faultstorage.OpStat, Match: data}, finalize, dataFile},
		{"metadata/create", faultstorage.Rule{Op: faultstorage.OpCreate, Match: meta}, finalize, checkpoint.MetadataName},
		{"metadata/write-EIO", faultstorage.Rule{Op: faultstorage.OpWrite, Match: meta}, finalize, checkpoint.MetadataName},
		{"metadata/short-write-ENOSPC", faultstorage.Rule{Op: faultstorage.OpWrite, Match: meta, Short: true, Cause: syscall.ENOSPC}, finalize, checkpoint.MetadataName},
		{"metadata/sync", faultstorage.Rule{Op: faultstorage.OpSync, Match: meta}, finalize, checkpoint.MetadataName},
		{"metadata/rename", faultstorage.Rule{Op: faultstorage.OpRename, Match: meta, Cause: syscall.ENOSPC}, finalize, checkpoint.MetadataName},
	}
}

// Under every kind of write fault, on a data file or on the metadata, the
// checkpoint is declined or fails to finalize with a reason that names the
// fault; the job keeps processing records; the tolerable-failure limit is
// honoured exactly — TolerableFailures consecutive failures are tolerated,
// a completed checkpoint resets the count, and one failure more fails the
// job with coordinator.ErrTooManyFailures wrapping the fault; nothing
// partial is ever listed as committed; and after checkpoint.Cleanup no
// orphaned file remains.
func TestCheckpointsUnderWriteFaults(t *testing.T) {
	const tolerable = 2
	total := map[string]int64{}
	for _, fc := range writeFaults() {
		t.Run(fc.name, func(t *testing.T) {
			cfg := coordinator.Config{Interval: 10 * time.Second, Timeout: time.Hour, TolerableFailures: tolerable, Retained: 2}
			j := newFaultJob(t, cfg, 2)
			ok := j.step()
			if ok.Status != coordinator.StatusCompleted {
				t.Fatalf("the first checkpoint, without faults: %+v", ok.Err)
			}
			failures := func(n int) {
				t.Helper()
				j.fs.SetRules(fc.rule)
				for range n {
					r := j.step()
					wantAbort(t, r, fc.reason, fc.rule.Op, fc.object)
					if !errors.Is(r.Err, fc.rule.Cause) && fc.rule.Cause != nil {
						t.Fatalf("abort error %q does not match %v", r.Err, fc.rule.Cause)
					}
				}
				j.fs.Heal()
			}
			failures(tolerable)
			if j.failed() {
				t.Fatalf("the job failed after %d failures, %d are tolerable: %v", tolerable, tolerable, j.c.Err())
			}
			// The faults stop: the next checkpoint completes and resets the
			// count.
			if r := j.step(); r.Status != coordinator.StatusCompleted {
				t.Fatalf("checkpoint %d after the faults stopped: %v", r.ID, r.Err)
			}
			failures(tolerable)
			if j.failed() {
				t.Fatalf("the job failed after %d failures following a completion: %v", tolerable, j.c.Err())
			}
			failures(1)
			if !j.failed() {
				t.Fatalf("the job did not fail after %d consecutive failures", tolerable+1)
			}
			err := j.c.Err()
			if !errors.Is(err, coordinator.ErrTooManyFailures) || !errors.Is(err, faultstorage.ErrInjected) || !errors.Is(err, fc.reason.Err()) {
				t.Errorf("terminal error %q, want ErrTooManyFailures wrapping the %v fault", err, fc.reason)
			}
			// Records kept flowing through the faults: each checkpoint's
			// source position is beyond the previous one's.
			var prev uint64
			for id := coordinator.CheckpointID(1); id <= 2*tolerable+3; id++ {
				_, blob, ok := j.ops[0].expectedAt(id)
				if !ok {
					continue // a checkpoint the operator never snapshotted
				}
				if off := offsetOf(blob); off <= prev {
					t.Errorf("operator 0 processed %d records at checkpoint %d, %d before", off, id, prev)
				} else {
					prev = off
				}
			}
			j.halt()
			j.checkStorage(j.ops)
			if got := slices.Sorted(maps.Keys(j.fs.Injected())); len(got) == 0 {
				t.Errorf("no fault was injected")
			}
			for k, v := range j.fs.Injected() {
				total[fc.name+" ("+k+")"] += v
			}
		})
	}
	t.Logf("faults injected by kind: %v", total)
}

func offsetOf(blob []byte) uint64 {
	var off uint64
	for _, b := range blob {
		off = off<<8 | uint64(b)
	}
	return off
}

// Faults of the housekeeping operations — Remove and Delete, which
// retention and aborts use, Objects and RemoveIncomplete, which cleanup
// uses — fail no checkpoint: the job goes on completing checkpoints. What
// they fail to delete is either a whole committed checkpoint (its metadata
// could not be removed), which restores and verifies, or debris that the
// next Start's cleanup removes, leaving no orphaned file.
func TestCheckpointsUnderHousekeepingFaults(t *testing.T) {
	cfg := coordinator.Config{Interval: 10 * time.Second, Timeout: time.Hour, TolerableFailures: 5, Retained: 1}
	j := newFaultJob(t, cfg, 2)
	cases := []struct {
		name  string
		rules []faultstorage.Rule
	}{
		// Retention cannot remove the old checkpoint's metadata: it stays,
		// whole and committed.
		{"remove-metadata", []faultstorage.Rule{{Op: faultstorage.OpRemove, Match: faultstorage.MatchMetadata}}},
		// The metadata goes, the rest cannot: debris.
		{"delete", []faultstorage.Rule{{Op: faultstorage.OpDelete, Match: faultstorage.MatchCheckpoints}}},
		// Both, with a full disk's cause.
		{"remove-and-delete-ENOSPC", []faultstorage.Rule{
			{Op: faultstorage.OpRemove, Match: faultstorage.MatchCheckpoints, Probability: 0.5, Cause: syscall.ENOSPC},
			{Op: faultstorage.OpDelete, Match: faultstorage.MatchCheckpoints, Cause: syscall.ENOSPC},
		}},
	}
	for _, tc := range cases {
		j.fs.SetRules(tc.rules...)
		for range 3 {
			if r := j.step(); r.Status != coordinator.StatusCompleted {
				t.Fatalf("%s: checkpoint %d failed: %v", tc.name, r.ID, r.Err)
			}
		}
	}
	// An aborted checkpoint whose deletion fails leaves the other
	// instance's data file behind, uncommitted: never listed.
	j.fs.SetRules(
		faultstorage.Rule{Op: faultstorage.OpSync, Match: faultstorage.MatchObject("counter-1.sgc"), Times: 1},
		faultstorage.Rule{Op: faultstorage.OpDelete, Match: faultstorage.MatchCheckpoints},
	)
	r := j.step()
	wantAbort(t, r, coordinator.AbortDeclined, faultstorage.OpSync, "counter-1.sgc")
	injected := j.fs.Injected()
	if injected["remove"] == 0 || injected["delete"] == 0 || injected["remove-ENOSPC"] == 0 || injected["delete-ENOSPC"] == 0 {
		t.Errorf("injected %v: some kind never hit", injected)
	}
	j.halt()
	ops1 := j.ops

	// Leftovers are visible now: more than the one retained checkpoint.
	entries, err := j.dir.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) <= 2 {
		t.Fatalf("the faults left nothing behind (%q): the test tests nothing", entries)
	}
	// A restart cleans up, with its own cleanup first failing on
	// Objects and RemoveIncomplete, which only delays it.
	j.fs.SetRules(
		faultstorage.Rule{Op: faultstorage.OpObjects, Match: faultstorage.MatchCheckpoints, Times: 1},
		faultstorage.Rule{Op: faultstorage.OpRemoveIncomplete, Match: faultstorage.MatchCheckpoints, Times: 1},
	)
	j.start(2)
	j.fs.Heal()
	if r := j.step(); r.Status != coordinator.StatusCompleted {
		t.Fatalf("after the restart: %v", r.Err)
	}
	j.halt()
	for k, v := range j.fs.Injected() {
		injected[k] = v
	}
	t.Logf("faults injected by kind: %v; storage before the restart: %q", injected, entries)
	j.checkStorage(ops1, j.ops)
}

// Faults while reading — listing, opening, reading and statting the
// storage — fail the restore or the start of a job with an error naming
// the fault, never silently: a store that a failed restore touched is not
// reported restored. Once the faults stop, the same calls succeed and
// restore the latest checkpoint exactly.
func TestRestoreUnderReadFaults(t *testing.T) {
	cfg := coordinator.Config{Interval: 10 * time.Second, Timeout: time.Hour}
	j := newFaultJob(t, cfg, 2)
	for range 2 {
		if r := j.step(); r.Status != coordinator.StatusCompleted {
			t.Fatalf("checkpoint %d: %v", r.ID, r.Err)
		}
	}
	j.halt()
	latest := j.completed[len(j.completed)-1]
	ctx := context.Background()
	cases := []faultstorage.Rule{
		{Op: faultstorage.OpList},
		{Op: faultstorage.OpStat, Match: faultstorage.MatchMetadata},
		{Op: faultstorage.OpOpen, Match: faultstorage.MatchMetadata},
		{Op: faultstorage.OpOpen, Match: faultstorage.MatchDataFiles},
		{Op: faultstorage.OpRead, Match: faultstorage.MatchMetadata},
		{Op: faultstorage.OpRead, Match: faultstorage.MatchDataFiles, After: 3},
		{Op: faultstorage.OpRead, Match: faultstorage.MatchDataFiles, Probability: 0.2},
	}
	restoreFails := func(rule faultstorage.Rule) {
		t.Helper()
		for i := range 2 {
			o := newOperatorOn(t, cowStore, nil, i, 2, InstanceOptions{})
			res, err := RestoreLatest(ctx, j.fs, "counter", i, 2, o.store, nil)
			if err == nil {
				// A probabilistic rule may spare a restore; it must then
				// be exact.
				if rule.Probability == 0 {
					t.Fatalf("%v fault: RestoreLatest succeeded (%+v)", rule.Op, res)
				}
				continue
			}
			var f *faultstorage.Error
			if !errors.As(err, &f) || f.Op != rule.Op || !strings.Contains(err.Error(), "injected fault: "+rule.Op.String()) {
				t.Fatalf("%v fault: RestoreLatest failed with %q, which does not name the fault", rule.Op, err)
			}
			if res.Checkpoint != "" {
				t.Fatalf("%v fault: a failed restore reports %+v", rule.Op, res)
			}
		}
	}
	for _, rule := range cases {
		j.fs.SetRules(rule)
		restoreFails(rule)
		if rule.Op == faultstorage.OpList || rule.Op == faultstorage.OpOpen && rule.Match != nil && rule.Match("x", checkpoint.MetadataName) {
			if c, err := Start(ctx, Options{Config: cfg, Storage: j.fs, Clock: j.clock, Logger: quiet()}); !errors.Is(err, faultstorage.ErrInjected) {
				if c != nil {
					c.Close(ctx)
				}
				t.Errorf("%v fault: Start = %v, want the injected fault", rule.Op, err)
			}
		}
		if rule.Op == faultstorage.OpRead && rule.Probability == 0 {
			r, err := checkpoint.Open(ctx, j.fs, checkpoint.CheckpointName(uint64(latest)))
			if err == nil {
				err = r.Verify(ctx)
			}
			if !errors.Is(err, faultstorage.ErrInjected) {
				t.Errorf("%v fault: Verify = %v, want the injected fault", rule.Op, err)
			}
		}
	}
	j.fs.Heal()
	want, _ := wantAt(t, latest, j.ops)
	var parts []*operator
	for i := range 2 {
		o := newOperatorOn(t, cowStore, nil, i, 2, InstanceOptions{})
		res, err := RestoreLatest(ctx, j.fs, "counter", i, 2, o.store, nil)
		if err != nil || res.ID != latest {
			t.Fatalf("healed: RestoreLatest = %+v, %v; want checkpoint %d", res, err, latest)
		}
		parts = append(parts, o)
	}
	if diff := cmp.Diff(want, storetest.Merge(contentsOf(parts)...)); diff != "" {
		t.Errorf("healed restore differs (-want +got):\n%s", diff)
	}
	t.Logf("faults injected by kind: %v", j.fs.Injected())
}

// A long run with every kind of fault injected at random into the
// checkpoints' objects, at seeded probabilities: whatever fails, every
// failed checkpoint's error names an injected fault, the job never stops
// (unlimited tolerable failures), checkpoints complete again once the
// faults stop, only completed checkpoints are ever listed, each restores
// exactly and verifies, and cleanup leaves no orphaned file.
// STATEGEN_LONG=1 runs ten times as many checkpoints.
func TestCheckpointsUnderRandomFaults(t *testing.T) {
	steps := 60
	if os.Getenv("STATEGEN_LONG") == "1" {
		steps = 600
	}
	// Incremental: stores behind checkpoint.Trackers, so that a failed
	// write of a file of changes, a failed commit, or a failed removal of
	// a checkpoint others reference meets chains of shared files.
	for _, incremental := range []bool{false, true} {
		t.Run(fmt.Sprintf("incremental=%v", incremental), func(t *testing.T) {
			mk := cowStore
			if incremental {
				mk = trackedStores(cowStore, &checkpoint.TrackOptions{MaxChainLength: 4})
			}
			randomFaults(t, steps, mk, incremental)
		})
	}
}

// randomFaults runs steps checkpoints of a job on stores of mk under random
// storage faults, then one without, and checks the storage.
func randomFaults(t *testing.T, steps int, mk storeMaker, incremental bool) {
	cfg := coordinator.Config{Interval: 10 * time.Second, Timeout: time.Hour, TolerableFailures: coordinator.UnlimitedFailures, Retained: 2}
	j := newFaultJobOn(t, cfg, 3, mk)
	var rules []faultstorage.Rule
	for _, op := range []faultstorage.Op{faultstorage.OpCreate, faultstorage.OpWrite, faultstorage.OpSync, faultstorage.OpRename, faultstorage.OpStat} {
		rules = append(rules, faultstorage.Rule{Op: op, Match: faultstorage.MatchCheckpoints, Probability: 0.02})
	}
	// Removals are rarer calls (retention and aborts): fail more of them.
	for _, op := range []faultstorage.Op{faultstorage.OpRemove, faultstorage.OpDelete} {
		rules = append(rules, faultstorage.Rule{Op: op, Match: faultstorage.MatchCheckpoints, Probability: 0.15})
	}
	rules = append(rules,
		faultstorage.Rule{Op: faultstorage.OpWrite, Match: faultstorage.MatchCheckpoints, Probability: 0.02, Short: true, Cause: syscall.ENOSPC},
		faultstorage.Rule{Op: faultstorage.OpCreate, Match: faultstorage.MatchCheckpoints, Probability: 0.02, Cause: syscall.ENOSPC},
	)
	j.fs.SetRules(rules...)
	failed := 0
	for range steps {
		r := j.step()
		if r.Status == coordinator.StatusCompleted {
			continue
		}
		failed++
		if !errors.Is(r.Err, faultstorage.ErrInjected) {
			t.Errorf("checkpoint %d failed without an injected fault: %v", r.ID, r.Err)
		}
		if j.failed() {
			t.Fatalf("the job failed with unlimited tolerable failures: %v", j.c.Err())
		}
	}
	j.fs.Heal()
	if r := j.step(); r.Status != coordinator.StatusCompleted {
		t.Fatalf("after the faults stopped, checkpoint %d failed: %v", r.ID, r.Err)
	}
	j.halt()
	if failed == 0 || len(j.completed) < 2 {
		t.Errorf("%d checkpoints failed, %d completed: the mix is off", failed, len(j.completed))
	}
	if incremental {
		deltas := 0
		for _, id := range j.completed {
			m, err := checkpoint.ReadMetadata(context.Background(), j.dir, checkpoint.CheckpointName(uint64(id)))
			if err != nil {
				continue // deleted by retention
			}
			for _, in := range m.Operators[0].Instances {
				if in.File.Delta {
					deltas++
				}
			}
		}
		if deltas == 0 {
			t.Errorf("no retained checkpoint has a file of changes: the incremental run wrote none")
		}
	}
	injected := j.fs.Injected()
	t.Logf("%d checkpoints: %d completed, %d failed; faults injected by kind: %v (total %d)",
		steps+1, len(j.completed), failed, injected, j.fs.Total())
	j.checkStorage(j.ops)
}
