package etcdcoord

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/coordinator"
	"github.com/stategen/stategen/runtime/coordinator/driver"
	"github.com/stategen/stategen/runtime/storetest"
)

// newDir returns a checkpoint.Dir in a temporary directory: the storage
// the simulated processes share.
func newDir(t *testing.T) *checkpoint.Dir {
	t.Helper()
	d, err := checkpoint.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func startWorkers(t *testing.T, job Job, s checkpoint.Storage, n int) []*worker {
	ws := make([]*worker, n)
	for i := range ws {
		ws[i] = newWorker(t, job, s, i, n)
	}
	return ws
}

// Steady state: a leader and three instances in processes of their own
// (each with its own etcd client) checkpoint through etcd. Every completed
// checkpoint is committed to the storage, listed in the completed index,
// and restores to what the instances held at its trigger; ids strictly
// increase; the messages of ended checkpoints are deleted from etcd.
func TestSteadyCheckpointsThroughEtcd(t *testing.T) {
	job := testJob(t)
	s := newDir(t)
	obs := client(t)
	c := startCoordinator(t, client(t), Options{
		Job: job, Storage: s, LeaseTTL: 10 * time.Second,
		Config: coordinator.Config{Interval: 50 * time.Millisecond, Timeout: 20 * time.Second, Retained: 100},
	})
	awaitLeader(t, c)
	ws := startWorkers(t, job, s, 3)
	waitUntil(t, "a checkpoint completed at every instance", func() bool { return len(completedByAll(ws)) >= 1 })
	// Garbage among the answers is deleted and changes nothing.
	k, _ := newKeys(job)
	ctx := context.Background()
	for key, val := range map[string]string{
		k.acks() + "garbage":             "x",
		k.ack(1, "counter/0"):            "{",
		k.ack(1_000_000, "counter/0"):    encode(ackMsg{V: wireVersion, ID: 1_000_000, Participant: "counter/0", Checkpoint: checkpoint.CheckpointName(1_000_000), Decline: &declineMsg{Cause: "forged"}}),
		k.ack(2, "counter/0") + "/extra": "{}",
	} {
		if _, err := obs.Put(ctx, key, val); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "four checkpoints completed at every instance", func() bool { return len(completedByAll(ws)) >= 4 })

	// An on-demand checkpoint too: the leader triggers it at once.
	tr, err := c.TriggerCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := tr.Wait(ctx); err != nil || rec.ID != tr.ID || rec.Request == 0 {
		t.Fatalf("on-demand checkpoint: %+v, %v", rec, err)
	}

	// A savepoint goes the same way; it is not listed as a checkpoint.
	sp, err := c.Savepoint(ctx, "before-upgrade")
	if err != nil {
		t.Fatalf("savepoint: %v", err)
	}
	if _, err := driver.PlanRestore(ctx, s, "before-upgrade", "counter", 3, maxP); err != nil {
		t.Fatalf("savepoint %d does not restore: %v", sp.ID, err)
	}
	done := completedByAll(ws)
	for _, id := range done {
		checkRestores(t, s, id, ws, 3)
	}
	// Also at another parallelism.
	checkRestores(t, s, done[len(done)-1], ws, 2)
	for _, w := range ws {
		ids := w.seenTriggers()
		for i := 1; i < len(ids); i++ {
			if ids[i].id <= ids[i-1].id {
				t.Fatalf("worker %d: trigger %d after %d", w.index, ids[i].id, ids[i-1].id)
			}
		}
		for _, n := range w.notifications() {
			// Without Options.Expected, the checkpoints triggered while
			// the workers register one by one lack key groups: they are
			// aborted as not ready, never completed.
			if !n.Completed() && !errors.Is(n.Err, coordinator.ErrNotReady) {
				t.Errorf("worker %d: checkpoint %d aborted: %v", w.index, n.ID, n.Err)
			}
		}
	}
	index, err := ReadIndex(ctx, obs, job)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range done {
		if !slices.Contains(index, Completed{ID: id, Name: checkpoint.CheckpointName(uint64(id))}) {
			t.Errorf("checkpoint %d completed but the index %v does not list it", id, index)
		}
	}
	if slices.ContainsFunc(index, func(c Completed) bool { return c.ID == sp.ID }) {
		t.Errorf("the index %v lists savepoint %d", index, sp.ID)
	}
	// The messages of every ended checkpoint, and the garbage, are gone.
	last := max(done[len(done)-1], sp.ID)
	waitUntil(t, "messages of ended checkpoints deleted", func() bool {
		for _, key := range append(keysUnder(t, obs, k.acks()), keysUnder(t, obs, k.inboxes())...) {
			id := coordinator.MaxID
			if i, _, ok := k.parseAck(key); ok {
				id = i
			} else if _, _, i, ok := k.parseInbox(key); ok {
				id = i
			}
			if id <= last || id == coordinator.MaxID {
				return false
			}
		}
		return true
	})

	for _, w := range ws {
		w.close()
	}
	waitUntil(t, "the inboxes of departed instances deleted", func() bool { return len(keysUnder(t, obs, k.inboxes())) == 0 })
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	latest, err := Latest(ctx, obs, job)
	if err != nil {
		t.Fatal(err)
	}
	if latest.ID < done[len(done)-1] || latest.ID == sp.ID {
		t.Errorf("Latest = %d, but %d completed (and %d is a savepoint)", latest.ID, done[len(done)-1], sp.ID)
	}
	// A new worker restores its share of the latest checkpoint.
	var parts []storetest.Contents
	for i := range 3 {
		kgs, err := runtime.KeyGroupRangeForOperator(maxP, 3, i)
		if err != nil {
			t.Fatal(err)
		}
		store, err := cow.New(cow.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: maxP, KeyGroups: kgs}})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		r, err := RestoreLatest(ctx, obs, job, s, "counter", i, 3, store, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.ID != latest.ID || r.Checkpoint != latest.Name || len(r.OperatorStates) != 3 {
			t.Errorf("restored %+v, want checkpoint %d with 3 blobs", r, latest.ID)
		}
		parts = append(parts, dump(t, store))
	}
	var want []storetest.Contents
	for _, w := range ws {
		c, _, ok := w.expectedAt(latest.ID)
		if !ok {
			t.Fatalf("worker %d never snapshotted %d", w.index, latest.ID)
		}
		want = append(want, c)
	}
	if diff := gocmp.Diff(storetest.Merge(want...), storetest.Merge(parts...)); diff != "" {
		t.Errorf("RestoreLatest restores other state (-want +got):\n%s", diff)
	}
	if got := keysUnder(t, obs, k.members()); len(got) != 0 {
		t.Errorf("registrations left after the instances closed: %v", got)
	}
	if got := keysUnder(t, obs, k.election()); len(got) != 0 {
		t.Errorf("election keys left after Close: %v", got)
	}
	if _, err := Leader(ctx, obs, job); !errors.Is(err, ErrNoLeader) {
		t.Errorf("Leader after Close: %v, want ErrNoLeader", err)
	}
	noStrayObjects(t, s)

	// A new deployment starts from the savepoint: RestoreLatest returns
	// it, not the older checkpoints of the index, until the new run
	// completes one of its own.
	if err := driver.StartFrom(ctx, s, "before-upgrade"); err != nil {
		t.Fatal(err)
	}
	store, err := cow.New(cow.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: maxP, KeyGroups: runtime.FullRange(maxP)}})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	r, err := RestoreLatest(ctx, obs, job, s, "counter", 0, 1, store, nil)
	if err != nil || !r.Savepoint || r.Checkpoint != "before-upgrade" {
		t.Fatalf("RestoreLatest after StartFrom: %+v, %v; want the savepoint", r, err)
	}
	var atSP []storetest.Contents
	for _, w := range ws {
		c, _, ok := w.expectedAt(sp.ID)
		if !ok {
			t.Fatalf("worker %d never snapshotted the savepoint", w.index)
		}
		atSP = append(atSP, c)
	}
	if diff := gocmp.Diff(storetest.Merge(atSP...), dump(t, store)); diff != "" {
		t.Errorf("the savepoint restores other state (-want +got):\n%s", diff)
	}
}

// The leader dies in the middle of a checkpoint (its etcd client and its
// storage are cut off, as if its process were killed). The standby takes
// over once the dead leader's lease expires, aborts the pending checkpoint
// — every instance is notified, with ErrFailover — deletes its files,
// issues no id twice, and checkpoints go on. The time from the death to
// the new leader's first trigger is the failover time.
func TestLeaderKilledMidCheckpoint(t *testing.T) {
	job := testJob(t)
	s := newDir(t)
	obs := client(t)
	// Two seconds: short enough to keep the test short, long enough that a
	// loaded machine does not let the living leader's lease expire.
	const ttl = 2 * time.Second
	cfg := coordinator.Config{Interval: 100 * time.Millisecond, Timeout: 20 * time.Second, Retained: 2, TolerableFailures: 0}
	aStorage := &cutStorage{Storage: s}
	aClient := client(t)
	a := startCoordinator(t, aClient, Options{Job: job, Storage: aStorage, LeaseTTL: ttl, Config: cfg, Name: "a"})
	awaitLeader(t, a)
	b := startCoordinator(t, client(t), Options{Job: job, Storage: s, LeaseTTL: ttl, Config: cfg, Name: "b"})
	ws := startWorkers(t, job, s, 3)
	waitUntil(t, "two checkpoints completed", func() bool { return len(completedByAll(ws)) >= 2 })
	if b.Leading() {
		t.Fatal("the standby leads while the leader lives")
	}
	if name, err := Leader(context.Background(), obs, job); err != nil || name != "a" {
		t.Fatalf("Leader = %q, %v; want a", name, err)
	}

	// Instance 2 holds its next trigger: that checkpoint stays pending.
	ws[2].setHold(func(driver.Trigger) bool { return true })
	waitUntil(t, "a held trigger", func() bool { return len(ws[2].heldTriggers()) > 0 })
	pending := ws[2].heldTriggers()[0].ID
	waitUntil(t, "the others' acknowledgements of the pending checkpoint", func() bool {
		for _, w := range ws[:2] {
			if _, _, ok := w.expectedAt(pending); !ok {
				return false
			}
		}
		return true
	})
	var before coordinator.CheckpointID
	for _, w := range ws {
		for _, sn := range w.seenTriggers() {
			before = max(before, sn.id)
		}
	}

	// Kill the leader: its etcd client first, then its storage. The other
	// way round, a leader still in office sees its storage fail, fails
	// the job (no tolerable failures) and publishes the pending
	// checkpoint's abort as a shutdown before its client closes — which a
	// dead process never does (CI hit that window under load).
	killed := time.Now()
	if err := aClient.Close(); err != nil {
		t.Fatal(err)
	}
	aStorage.off.Store(true)
	awaitLeader(t, b)
	if name, err := Leader(context.Background(), obs, job); err != nil || name != "b" {
		t.Errorf("Leader = %q, %v; want b", name, err)
	}
	// The pending checkpoint is aborted at every instance, as a failover.
	for _, w := range ws {
		waitUntil(t, fmt.Sprintf("worker %d: the abort of checkpoint %d", w.index, pending), func() bool { _, ok := w.note(pending); return ok })
		n, _ := w.note(pending)
		var ae *coordinator.AbortError
		if n.Completed() || !errors.Is(n.Err, ErrFailover) || !errors.As(n.Err, &ae) || ae.ID != pending {
			t.Errorf("worker %d: checkpoint %d ended with %v, want an abort wrapping ErrFailover", w.index, pending, n.Err)
		}
	}
	// The held trigger's checkpoint ended: snapshotting it does nothing.
	ws[2].setHold(nil)

	// The first trigger after the death is the new leader's.
	var first time.Time
	waitUntil(t, "the new leader's first trigger", func() bool {
		for _, w := range ws {
			for _, sn := range w.seenTriggers() {
				if sn.at.After(killed) && sn.id > pending && (first.IsZero() || sn.at.Before(first)) {
					first = sn.at
				}
			}
		}
		return !first.IsZero()
	})
	failover := first.Sub(killed)
	t.Logf("failover: %v from the leader's death to the new leader's first trigger (lease TTL %v, so %.2f lease periods; interval %v)",
		failover.Round(time.Millisecond), ttl, failover.Seconds()/ttl.Seconds(), cfg.Interval)

	waitUntil(t, "two checkpoints completed by the new leader", func() bool {
		n := 0
		for _, id := range completedByAll(ws) {
			if id > pending {
				n++
			}
		}
		return n >= 2
	})
	// No id was issued twice: each instance saw strictly increasing ids,
	// and the new leader's are above every id the dead one issued.
	for _, w := range ws {
		sns := w.seenTriggers()
		for i := 1; i < len(sns); i++ {
			if sns[i].id <= sns[i-1].id {
				t.Fatalf("worker %d: trigger %d after %d", w.index, sns[i].id, sns[i-1].id)
			}
			if sns[i].at.After(killed) && sns[i].id <= before {
				t.Fatalf("worker %d: the new leader reissued id %d", w.index, sns[i].id)
			}
		}
	}
	done := completedByAll(ws)
	checkRestores(t, s, done[len(done)-1], ws, 3)
	ctx := context.Background()
	latest, err := Latest(ctx, obs, job)
	if err != nil || latest.ID < done[len(done)-1] {
		t.Errorf("Latest = %+v, %v; %d completed", latest, err, done[len(done)-1])
	}
	// The aborted checkpoint's files are gone.
	waitUntil(t, "the aborted checkpoint deleted", func() bool {
		names, err := s.List(ctx)
		return err == nil && !slices.Contains(names, checkpoint.CheckpointName(uint64(pending)))
	})
	select {
	case <-a.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the dead coordinator did not stop")
	}
	if err := a.Err(); err == nil {
		t.Error("the dead coordinator stopped without saying why")
	}
	if st := b.Stats(); st == nil || st.Counts().Completed < 2 {
		t.Errorf("new leader's stats: %+v", st)
	}
	for _, w := range ws {
		w.close()
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	noStrayObjects(t, s)
}

// An instance's lease expires (its process is partitioned or paused):
// its registration disappears, the leader removes it, and the checkpoint
// that waited for it is aborted as participant-lost — which does not
// count as a failure, so with no failure tolerated the job goes on. The
// instance registers again with a new lease and takes part in later
// checkpoints.
func TestParticipantLeaseExpiry(t *testing.T) {
	job := testJob(t)
	s := newDir(t)
	obs := client(t)
	c := startCoordinator(t, client(t), Options{
		Job: job, Storage: s, LeaseTTL: 10 * time.Second,
		Config: coordinator.Config{Interval: 50 * time.Millisecond, Timeout: 20 * time.Second, Retained: 100, TolerableFailures: 0},
	})
	awaitLeader(t, c)
	ws := startWorkers(t, job, s, 3)
	waitUntil(t, "a checkpoint completed", func() bool { return len(completedByAll(ws)) >= 1 })

	ws[2].setHold(func(driver.Trigger) bool { return true })
	waitUntil(t, "a held trigger", func() bool { return len(ws[2].heldTriggers()) > 0 })
	held := ws[2].heldTriggers()[0]
	old := ws[2].inst.l.lease()
	ctx := context.Background()
	if _, err := obs.Revoke(ctx, old); err != nil {
		t.Fatal(err)
	}
	for _, w := range ws[:2] {
		waitUntil(t, "the abort of the checkpoint that waited for the lost instance", func() bool { _, ok := w.note(held.ID); return ok })
		n, _ := w.note(held.ID)
		var ae *coordinator.AbortError
		if !errors.As(n.Err, &ae) || ae.Reason != coordinator.AbortParticipantLost || ae.Participant != ws[2].inst.ID() {
			t.Errorf("worker %d: checkpoint %d ended with %v, want participant-lost of %s", w.index, held.ID, n.Err, ws[2].inst.ID())
		}
	}
	ws[2].setHold(nil)
	waitUntil(t, "a new registration", func() bool { return ws[2].inst.l.lease() != old })
	waitUntil(t, "a checkpoint completed with the returned instance", func() bool {
		return slices.ContainsFunc(completedByAll(ws), func(id coordinator.CheckpointID) bool { return id > held.ID })
	})
	select {
	case <-c.Failed():
		t.Fatalf("the job failed: %v", c.Err())
	default:
	}
	done := completedByAll(ws)
	checkRestores(t, s, done[len(done)-1], ws, 3)
	for _, w := range ws {
		w.close()
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// A leader that closes resigns: the standby takes over at once (no lease
// to wait for), recovers the retained checkpoints from the index, and
// continues the ids above every id the first leader reserved.
func TestCloseHandsOverToStandby(t *testing.T) {
	job := testJob(t)
	s := newDir(t)
	cfg := coordinator.Config{Interval: 50 * time.Millisecond, Timeout: 20 * time.Second, Retained: 2}
	a := startCoordinator(t, client(t), Options{Job: job, Storage: s, LeaseTTL: 30 * time.Second, Config: cfg, Name: "a"})
	awaitLeader(t, a)
	b := startCoordinator(t, client(t), Options{Job: job, Storage: s, LeaseTTL: 30 * time.Second, Config: cfg, Name: "b"})
	ws := startWorkers(t, job, s, 2)
	waitUntil(t, "two checkpoints completed", func() bool { return len(completedByAll(ws)) >= 2 })
	retained := a.Retained()
	ctx := context.Background()
	counter, err := NewCounter(client(t), job, "observer")
	if err != nil {
		t.Fatal(err)
	}
	reserved, err := counter.Read(ctx)
	if err != nil || reserved == 0 {
		t.Fatalf("counter %d, %v", reserved, err)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var last coordinator.CheckpointID
	for _, w := range ws {
		for _, sn := range w.seenTriggers() {
			last = max(last, sn.id)
		}
	}
	// With a lease of 30 s, only a resignation lets b lead within the
	// wait; the recovery happens before b leads.
	awaitLeader(t, b)
	got := b.Retained()
	if len(got) == 0 || len(retained) == 0 || got[len(got)-1].ID < retained[len(retained)-1].ID {
		t.Errorf("b retains %v after a retained %v", ids(got), ids(retained))
	}
	waitUntil(t, "a checkpoint completed by b", func() bool {
		return slices.ContainsFunc(completedByAll(ws), func(id coordinator.CheckpointID) bool { return id > last })
	})
	for _, w := range ws {
		for _, sn := range w.seenTriggers() {
			if sn.id > last && sn.id < reserved {
				t.Errorf("worker %d: b issued %d, inside a's reservation (below %d)", w.index, sn.id, reserved)
			}
		}
	}
	done := completedByAll(ws)
	checkRestores(t, s, done[len(done)-1], ws, 2)
}

func ids(cps []coordinator.Checkpoint) []coordinator.CheckpointID {
	var out []coordinator.CheckpointID
	for _, cp := range cps {
		out = append(out, cp.ID)
	}
	return out
}
