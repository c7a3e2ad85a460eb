package etcdcoord

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime/coordinator"
	"github.com/stategen/stategen/runtime/coordinator/driver"
)

// elect campaigns with a new session of cli and returns the session and
// the leader's fence.
func elect(t *testing.T, cli *clientv3.Client, k keys, name string) (*concurrency.Session, fence) {
	t.Helper()
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(30))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sess.Close() })
	e := concurrency.NewElection(sess, k.election())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Campaign(ctx, name); err != nil {
		t.Fatal(err)
	}
	return sess, fence{key: e.Key(), rev: e.Rev()}
}

// A deposed leader — its lease gone, a successor elected — cannot write
// the completed index, the id counter or messages to instances, however
// late its writes come: each is fenced by its election key. Its
// successor's writes land.
func TestDeposedLeaderIsFencedOff(t *testing.T) {
	job := testJob(t)
	k, _ := newKeys(job)
	ctx := context.Background()
	s := checkpoint.NewMem()
	cliA, cliB := client(t), client(t)

	sessA, fa := elect(t, cliA, k, "a")
	xa := &index{cli: cliA, key: k.completed(), fence: fa}
	if _, err := xa.seed(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := xa.Add(ctx, 1); err != nil {
		t.Fatal(err)
	}
	ca := &Counter{cli: cliA, key: k.counter(), owner: "a", fence: fa}
	if _, err := ca.Read(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ca.Reserve(ctx, 100); err != nil {
		t.Fatal(err)
	}

	// a's lease ends (as when its process stalls past the TTL); b wins.
	if _, err := cliB.Revoke(ctx, sessA.Lease()); err != nil {
		t.Fatal(err)
	}
	_, fb := elect(t, cliB, k, "b")
	xb := &index{cli: cliB, key: k.completed(), fence: fb}
	cb := &Counter{cli: cliB, key: k.counter(), owner: "b", fence: fb}

	if err := xa.Add(ctx, 2); !errors.Is(err, ErrNotLeader) {
		t.Errorf("deposed leader's index Add: %v, want ErrNotLeader", err)
	}
	if err := xa.Remove(ctx, 1); !errors.Is(err, ErrNotLeader) {
		t.Errorf("deposed leader's index Remove: %v, want ErrNotLeader", err)
	}
	if err := ca.Reserve(ctx, 200); !errors.Is(err, ErrNotLeader) {
		t.Errorf("deposed leader's reservation: %v, want ErrNotLeader", err)
	}
	out := newOutbox(cliA, fa, logger())
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	go out.run(octx)
	out.put(k.trigger("op/0", 150), "{}")
	select {
	case <-out.lost:
	case <-time.After(30 * time.Second):
		t.Fatal("the deposed leader's outbox did not notice")
	}
	if err := out.flush(ctx); !errors.Is(err, ErrNotLeader) {
		t.Errorf("deposed leader's flush: %v, want ErrNotLeader", err)
	}
	if got := keysUnder(t, cliB, k.inboxes()); len(got) != 0 {
		t.Errorf("the deposed leader's trigger landed: %v", got)
	}

	// The index and the counter are as a left them, and b writes them.
	got, err := xb.Completed(ctx)
	if err != nil || !slices.Equal(got, []coordinator.CheckpointID{1}) {
		t.Fatalf("index %v, %v; want [1]", got, err)
	}
	if n, err := cb.Read(ctx); n != 100 || err != nil {
		t.Fatalf("counter %d, %v; want 100", n, err)
	}
	if err := cb.Reserve(ctx, 200); err != nil {
		t.Fatal(err)
	}
	if err := xb.Add(ctx, 101); err != nil {
		t.Fatal(err)
	}
	if err := xb.Remove(ctx, 1); err != nil {
		t.Fatal(err)
	}
	cps, err := ReadIndex(ctx, cliA, job)
	if err != nil || len(cps) != 1 || cps[0] != (Completed{ID: 101, Name: checkpoint.CheckpointName(101)}) {
		t.Errorf("index %v, %v; want only 101", cps, err)
	}
}

// The first leader of a job that ran without etcd adopts the checkpoints
// in its storage; later leaders keep the index they find.
func TestIndexSeedsFromStorageOnce(t *testing.T) {
	job := testJob(t)
	k, _ := newKeys(job)
	ctx := context.Background()
	s := checkpoint.NewMem()
	for _, id := range []uint64{3, 9} {
		if err := checkpoint.Commit(ctx, s, checkpoint.CheckpointName(id), &checkpoint.Metadata{CheckpointID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ReadIndex(ctx, client(t), job); !errors.Is(err, ErrNoIndex) {
		t.Fatalf("ReadIndex of a new job: %v, want ErrNoIndex", err)
	}
	if _, err := Latest(ctx, client(t), job); !errors.Is(err, driver.ErrNoCheckpoint) || !errors.Is(err, ErrNoIndex) {
		t.Fatalf("Latest of a new job: %v, want driver.ErrNoCheckpoint and ErrNoIndex", err)
	}
	x := &index{cli: client(t), key: k.completed()}
	seeded, err := x.seed(ctx, s)
	if err != nil || !slices.Equal(seeded, []uint64{3, 9}) {
		t.Fatalf("seeded %v, %v; want [3 9]", seeded, err)
	}
	if err := checkpoint.Commit(ctx, s, checkpoint.CheckpointName(12), &checkpoint.Metadata{CheckpointID: 12}); err != nil {
		t.Fatal(err)
	}
	if seeded, err := x.seed(ctx, s); err != nil || len(seeded) != 0 {
		t.Fatalf("second seed %v, %v; want nothing", seeded, err)
	}
	latest, err := Latest(ctx, client(t), job)
	if err != nil || latest.ID != 9 {
		t.Fatalf("Latest = %+v, %v; want 9", latest, err)
	}
}
