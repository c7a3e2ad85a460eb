package etcdcoord

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/internal/testenv/etcdtest"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/coordinator"
	"github.com/stategen/stategen/runtime/coordinator/driver"
	"github.com/stategen/stategen/runtime/storetest"
)

// leaseOf returns the lease of coordinator name's election key.
func leaseOf(t *testing.T, cli *clientv3.Client, job Job, name string) clientv3.LeaseID {
	t.Helper()
	k, _ := newKeys(job)
	resp, err := cli.Get(context.Background(), k.election()+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if string(kv.Value) == name {
			return clientv3.LeaseID(kv.Lease)
		}
	}
	t.Fatalf("no election key of %s", name)
	return 0
}

// A leader whose lease ends while its process lives (a long pause, a
// partition) is deposed: the standby takes over and aborts the pending
// checkpoint, the old leader notices, steps down without writing anything
// (its writes are fenced), and campaigns again as a standby. When the new
// leader closes, the old one leads again, and ids go on increasing.
func TestDeposedLeaderStepsDown(t *testing.T) {
	job := testJob(t)
	s := newDir(t)
	obs := client(t)
	cfg := coordinator.Config{Interval: 50 * time.Millisecond, Timeout: 20 * time.Second, Retained: 2}
	a := startCoordinator(t, client(t), Options{Job: job, Storage: s, LeaseTTL: 2 * time.Second, Config: cfg, Name: "a"})
	awaitLeader(t, a)
	b := startCoordinator(t, client(t), Options{Job: job, Storage: s, LeaseTTL: 2 * time.Second, Config: cfg, Name: "b"})
	ws := startWorkers(t, job, s, 2)
	waitUntil(t, "a checkpoint completed", func() bool { return len(completedByAll(ws)) >= 1 })
	ws[1].setHold(func(driver.Trigger) bool { return true })
	waitUntil(t, "a held trigger", func() bool { return len(ws[1].heldTriggers()) > 0 })
	pending := ws[1].heldTriggers()[0].ID

	ctx := context.Background()
	if _, err := obs.Revoke(ctx, leaseOf(t, obs, job, "a")); err != nil {
		t.Fatal(err)
	}
	awaitLeader(t, b)
	waitUntil(t, "a steps down", func() bool { return !a.Leading() })
	for _, w := range ws {
		waitUntil(t, fmt.Sprintf("worker %d: the abort of %d", w.index, pending), func() bool { _, ok := w.note(pending); return ok })
		if n, _ := w.note(pending); !errors.Is(n.Err, ErrFailover) {
			t.Errorf("worker %d: checkpoint %d ended with %v, want ErrFailover", w.index, pending, n.Err)
		}
	}
	ws[1].setHold(nil)
	waitUntil(t, "a checkpoint completed by b", func() bool {
		return slices.ContainsFunc(completedByAll(ws), func(id coordinator.CheckpointID) bool { return id > pending })
	})
	select {
	case <-a.Done():
		t.Fatalf("the deposed leader stopped instead of standing by: %v", a.Err())
	default:
	}
	// A standby refuses what only the leader can do.
	if _, err := a.TriggerCheckpoint(ctx); !errors.Is(err, ErrNotLeader) {
		t.Errorf("TriggerCheckpoint on the standby: %v, want ErrNotLeader", err)
	}

	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var byB coordinator.CheckpointID
	for _, w := range ws {
		for _, sn := range w.seenTriggers() {
			byB = max(byB, sn.id)
		}
	}
	awaitLeader(t, a)
	if n := a.Terms(); n != 2 {
		t.Errorf("a led %d terms, want 2", n)
	}
	waitUntil(t, "a checkpoint completed by a again", func() bool {
		return slices.ContainsFunc(completedByAll(ws), func(id coordinator.CheckpointID) bool { return id > byB })
	})
	for _, w := range ws {
		sns := w.seenTriggers()
		for i := 1; i < len(sns); i++ {
			if sns[i].id <= sns[i-1].id {
				t.Fatalf("worker %d: trigger %d after %d", w.index, sns[i].id, sns[i-1].id)
			}
		}
	}
	done := completedByAll(ws)
	checkRestores(t, s, done[len(done)-1], ws, 2)
}

// A new leader settles what its predecessor left in the instances'
// inboxes: a checkpoint the completed index lists is notified complete (the
// predecessor died before it could say so), one it does not list is
// aborted with ErrFailover and its files deleted, and the retained
// checkpoints and the id counter are taken from etcd.
func TestTakeoverSettlesThePredecessorsCheckpoints(t *testing.T) {
	job := testJob(t)
	k, _ := newKeys(job)
	s := newDir(t)
	obs := client(t)
	ctx := context.Background()
	ws := startWorkers(t, job, s, 1)
	w := ws[0]
	w.setHold(func(driver.Trigger) bool { return true })

	// The state a leader leaves when it dies after completing checkpoint 5
	// but before notifying it, with checkpoint 6 pending.
	if err := checkpoint.Commit(ctx, s, checkpoint.CheckpointName(5), &checkpoint.Metadata{CheckpointID: 5}); err != nil {
		t.Fatal(err)
	}
	ow, err := s.Create(ctx, checkpoint.CheckpointName(6), "counter-0.sgc")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ow.Write([]byte("partial")); err != nil {
		t.Fatal(err)
	}
	if err := ow.Commit(); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for key, val := range map[string]string{
		k.counter():   encode(counterMsg{V: wireVersion, Limit: 10, Owner: "dead"}),
		k.completed(): encode(indexMsg{V: wireVersion, Checkpoints: []indexEntry{{ID: 5, Name: checkpoint.CheckpointName(5)}}}),
	} {
		if _, err := obs.Put(ctx, key, val); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []coordinator.CheckpointID{5, 6} {
		tr := driver.Trigger{ID: id, At: now, Deadline: now.Add(time.Hour), Checkpoint: checkpoint.CheckpointName(uint64(id))}
		if _, err := obs.Put(ctx, k.trigger(w.inst.ID(), id), encode(newTriggerMsg(tr))); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "the dead leader's triggers", func() bool { return len(w.heldTriggers()) == 2 })

	c := startCoordinator(t, client(t), Options{Job: job, Storage: s, Config: coordinator.Config{Interval: time.Hour}})
	awaitLeader(t, c)
	waitUntil(t, "both settled", func() bool { return len(w.notifications()) == 2 })
	if n, _ := w.note(5); !n.Completed() {
		t.Errorf("checkpoint 5, listed as completed, ended with %v", n.Err)
	}
	if n, _ := w.note(6); !errors.Is(n.Err, ErrFailover) {
		t.Errorf("checkpoint 6 ended with %v, want ErrFailover", n.Err)
	}
	if got := ids(c.Retained()); !slices.Equal(got, []coordinator.CheckpointID{5}) {
		t.Errorf("retained %v, want [5]", got)
	}
	names, err := s.List(ctx)
	if err != nil || !slices.Equal(names, []string{checkpoint.CheckpointName(5)}) {
		t.Errorf("storage holds %v, %v; want only checkpoint 5", names, err)
	}
	if got := keysUnder(t, obs, k.inbox(w.inst.ID())+"t/"); len(got) != 0 {
		t.Errorf("triggers left: %v", got)
	}
	// The first id the new leader issues is the counter's.
	w.setHold(nil)
	rec, err := c.Savepoint(ctx, "sp")
	if err != nil || rec.ID != 10 {
		t.Errorf("first id after takeover: %+v, %v; want 10", rec, err)
	}
}

// etcd itself restarts (a rolling upgrade, a crash of a one-member
// cluster): the coordinator and the instances reconnect, their watches
// resume where they stopped, and checkpoints go on with increasing ids.
func TestEtcdRestartIsSurvived(t *testing.T) {
	srv := etcdtest.Dedicated(t)
	job := Job{Name: "job"}
	s := newDir(t)
	c := startCoordinator(t, srv.Client(t), Options{
		Job: job, Storage: s, LeaseTTL: 10 * time.Second,
		Config: coordinator.Config{Interval: 50 * time.Millisecond, Timeout: 20 * time.Second, Retained: 100, TolerableFailures: coordinator.UnlimitedFailures},
	})
	awaitLeader(t, c)
	ws := []*worker{newWorkerOn(t, srv.Client(t), job, s, 0, 2), newWorkerOn(t, srv.Client(t), job, s, 1, 2)}
	waitUntil(t, "two checkpoints completed", func() bool { return len(completedByAll(ws)) >= 2 })
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	before := completedByAll(ws)
	last := before[len(before)-1]
	waitUntil(t, "two checkpoints completed after the restart", func() bool {
		n := 0
		for _, id := range completedByAll(ws) {
			if id > last+1 {
				n++
			}
		}
		return n >= 2
	})
	for _, w := range ws {
		sns := w.seenTriggers()
		for i := 1; i < len(sns); i++ {
			if sns[i].id <= sns[i-1].id {
				t.Fatalf("worker %d: trigger %d after %d", w.index, sns[i].id, sns[i-1].id)
			}
		}
	}
	done := completedByAll(ws)
	checkRestores(t, s, done[len(done)-1], ws, 2)
	latest, err := Latest(context.Background(), srv.Client(t), job)
	if err != nil || latest.ID < done[len(done)-1] {
		t.Errorf("Latest = %+v, %v; %d completed", latest, err, done[len(done)-1])
	}
}

// An instance id is registered by one process at a time: a second Join of
// the same operator and index — a restarted worker whose previous
// incarnation's lease has not expired yet — waits until the first leaves.
func TestJoinWaitsForThePreviousIncarnation(t *testing.T) {
	job := testJob(t)
	s := newDir(t)
	first := newWorker(t, job, s, 0, 1)
	store, err := storetest.NewModel(runtime.StoreConfig{MaxParallelism: maxP, KeyGroups: runtime.FullRange(maxP)})
	if err != nil {
		t.Fatal(err)
	}
	opts := JoinOptions{
		Job:      job,
		Instance: driver.InstanceOptions{Operator: "counter", Index: 0, Store: store},
		Storage:  s,
		Logger:   logger(),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if in, err := Join(ctx, client(t), opts); !errors.Is(err, context.DeadlineExceeded) {
		if in != nil {
			_ = in.Close()
		}
		t.Fatalf("second Join while the first is registered: %v, want to wait until its context ends", err)
	}
	type result struct {
		in  *Instance
		err error
	}
	joined := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		in, err := Join(ctx, client(t), opts)
		joined <- result{in, err}
	}()
	select {
	case r := <-joined:
		t.Fatalf("Join returned while the first registration lives: %v", r.err)
	case <-time.After(200 * time.Millisecond):
	}
	first.close()
	r := <-joined
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.in.Close()
	k, _ := newKeys(job)
	resp, err := client(t).Get(context.Background(), k.member(r.in.ID()))
	if err != nil || len(resp.Kvs) != 1 || clientv3.LeaseID(resp.Kvs[0].Lease) != r.in.l.lease() {
		t.Errorf("registration %v, %v; want the second instance's", resp, err)
	}
}
