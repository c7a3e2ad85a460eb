package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stategen/stategen/examples/clickstream/pipeline"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/coordinator/etcdcoord"
)

// long says whether to run the long versions (STATEGEN_LONG=1): longer
// streams, so more checkpoints and more of each scenario.
var long = os.Getenv("STATEGEN_LONG") == "1"

// size returns the stream length and rate of a scenario: about secs
// seconds of stream, four times as long in the long mode.
func size(secs int64) (int64, int) {
	const rate = 5000
	if long {
		secs *= 4
	}
	return secs * rate, rate
}

// Steady state: two coordinators, three workers, checkpoints mid-stream,
// the workers finish and their state equals the reference run's.
func TestSteady(t *testing.T) {
	c := newCluster(t, 4)
	obs := c.observe()
	workers, dumps, coords := c.job(1, 3)
	c.finish(workers)
	ids := obs.ids()
	if len(ids) < 2 {
		t.Fatalf("%d checkpoints completed during the run (%v); want at least 2", len(ids), ids)
	}
	t.Logf("completed checkpoints: %v", ids)
	leader, err := etcdcoord.Leader(context.Background(), c.cli, etcdcoord.Job{Name: jobName})
	if err != nil {
		t.Fatal(err)
	}
	if coords[leader] == nil {
		t.Fatalf("the leader is %q, not one of the coordinators", leader)
	}
	// The workers took part: each logged completions of checkpoints the
	// index lists.
	for _, w := range workers {
		if len(logLines(t, w, `msg="checkpoint completed"`)) == 0 {
			t.Errorf("%s saw no checkpoint complete", w.name)
		}
		// Each finished at the end of the stream and stayed until the
		// job's final checkpoint, which holds every worker's final state.
		if len(logLines(t, w, `msg="final checkpoint"`)) != 1 {
			t.Errorf("%s did not see the final checkpoint", w.name)
		}
	}
	c.verify(dumps)
	c.verifyFinal()
}

// Leader failover: the leader is killed with SIGKILL while a checkpoint
// is pending; the standby takes over, aborts it, issues only higher ids,
// and the job finishes correctly.
func TestLeaderKilledMidCheckpoint(t *testing.T) {
	c := newCluster(t, 6)
	obs := c.observe()
	workers, dumps, coords := c.job(1, 3)
	job := etcdcoord.Job{Name: jobName}
	c.waitFor("a first checkpoint", 60*time.Second, func() bool { return len(c.index()) > 0 }, workers...)

	var leader *proc
	var pending uint64
	var killedAt time.Time
	for attempt := 0; leader == nil; attempt++ {
		if attempt == 20 {
			t.Fatal("never caught the leader with a checkpoint pending")
		}
		name, err := etcdcoord.Leader(context.Background(), c.cli, job)
		if err != nil {
			t.Fatal(err)
		}
		p := coords[name]
		if p == nil {
			t.Fatalf("the leader is %q, not one of the coordinators", name)
		}
		// A trigger in an inbox is a checkpoint pending; freeze the leader
		// there (SIGSTOP), make sure the checkpoint did not complete in
		// the meantime, then kill it.
		var id uint64
		c.waitFor("a pending checkpoint", 30*time.Second, func() bool { id = c.pendingTrigger(); return id != 0 }, workers...)
		p.signal(syscall.SIGSTOP)
		time.Sleep(100 * time.Millisecond)
		if slicesContainsID(c.index(), id) {
			p.signal(syscall.SIGCONT)
			continue
		}
		p.kill()
		killedAt = time.Now()
		leader, pending = p, id
	}
	before := c.index()
	top, _ := latest(before)
	t.Logf("killed leader %s with checkpoint %d pending; index %v", leader.name, pending, before)

	c.waitFor("a checkpoint completed by the new leader", 30*time.Second, func() bool {
		l, ok := latest(c.index())
		return ok && uint64(l.ID) > pending
	}, workers...)
	failover := time.Since(killedAt)
	t.Logf("failover: %v from the kill to the new leader's first completed checkpoint (lease %v, interval %v)", failover.Round(time.Millisecond), lease, interval)
	after, _ := latest(c.index())
	if after.ID <= top.ID || uint64(after.ID) <= pending {
		t.Fatalf("the new leader completed %d, not above %d (completed) and %d (pending)", after.ID, top.ID, pending)
	}
	var standby *proc
	for _, p := range coords {
		if p != leader {
			standby = p
		}
	}
	if len(logLines(t, standby, `msg=leading`)) == 0 {
		t.Errorf("%s never logged that it leads", standby.name)
	}

	c.finish(workers)
	ids := obs.ids()
	for _, id := range ids {
		if id == pending {
			t.Fatalf("checkpoint %d, pending at the kill, completed: %v", pending, ids)
		}
	}
	t.Logf("completed checkpoints: %v", ids)
	// The pending checkpoint was aborted at every worker that took it,
	// and at least one saw the abort.
	abortedAt := 0
	for _, w := range workers {
		id := "checkpoint=" + strconv.FormatUint(pending, 10) + " "
		took := len(logLines(t, w, `msg=snapshot`, id)) > 0
		aborted := len(logLines(t, w, `msg="checkpoint aborted"`, id)) > 0
		if aborted {
			abortedAt++
		}
		if took && !aborted {
			t.Errorf("%s took checkpoint %d but never saw it aborted", w.name, pending)
		}
	}
	if abortedAt == 0 {
		t.Errorf("no worker saw checkpoint %d aborted", pending)
	}
	c.verify(dumps)
}

func slicesContainsID(x []etcdcoord.Completed, id uint64) bool {
	for _, e := range x {
		if uint64(e.ID) == id {
			return true
		}
	}
	return false
}

// pendingTrigger returns the id of a trigger waiting in an instance's
// inbox, or 0.
func (c *cluster) pendingTrigger() uint64 {
	resp, err := c.cli.Get(context.Background(), "/stategen/"+jobName+"/inbox/", clientv3.WithPrefix())
	if err != nil {
		c.t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		if i := strings.LastIndex(k, "/t/"); i >= 0 {
			if id, err := strconv.ParseUint(k[i+3:], 10, 64); err == nil {
				return id
			}
		}
	}
	return 0
}

// A worker dies: the orchestrator kills the rest and restarts the job at
// parallelism 2 from the latest checkpoint, lets it complete a checkpoint,
// stops it, restarts it at parallelism 4 from that one and runs it to the
// end.
func TestWorkerKilledRescale(t *testing.T) {
	c := newCluster(t, 6)
	workers, _, coords := c.job(1, 3)
	c.waitFor("a first checkpoint", 60*time.Second, func() bool { return len(c.index()) > 0 }, workers...)
	workers[1].kill()
	t.Logf("killed %s", workers[1].name)
	stopAll := func(workers []*proc, coords map[string]*proc) etcdcoord.Completed {
		for _, w := range workers {
			w.kill()
		}
		for _, p := range coords {
			p.kill()
		}
		// The orchestrator waits for the dead instances' leases to go
		// before it deploys the new ones.
		c.waitFor("the dead instances to leave", 30*time.Second, func() bool { return c.members() == 0 })
		l, ok := latest(c.index())
		if !ok {
			t.Fatal("no completed checkpoint")
		}
		return l
	}
	first := stopAll(workers, coords)
	t.Logf("restarting at parallelism 2 from %s", first.Name)

	workers, _, coords = c.job(2, 2)
	c.waitFor("a checkpoint at parallelism 2", 60*time.Second, func() bool {
		l, ok := latest(c.index())
		return ok && l.ID > first.ID
	}, workers...)
	for _, w := range workers {
		if len(logLines(t, w, `msg=restored`, "checkpoint="+first.Name)) == 0 {
			t.Errorf("%s did not restore %s", w.name, first.Name)
		}
	}
	second := stopAll(workers, coords)
	t.Logf("restarting at parallelism 4 from %s", second.Name)

	workers, dumps, _ := c.job(3, 4)
	c.finish(workers)
	for _, w := range workers {
		if len(logLines(t, w, `msg=restored`, "checkpoint="+second.Name)) == 0 {
			t.Errorf("%s did not restore %s", w.name, second.Name)
		}
	}
	c.verify(dumps)
}

// A worker dies and is restarted alone, at the same parallelism, while the
// coordinators stay up. While it is gone, every checkpoint is declined as
// not ready on its behalf: none completes without its key groups, and the
// job does not fail. The restarted worker restores its share of the
// latest checkpoint (every key group is in it), checkpoints complete
// again, and the job ends with the reference run's state.
func TestWorkerRestartedCoordinatorsStay(t *testing.T) {
	// Long enough that workers 0 and 2 are still running when worker 1
	// is back: a checkpoint needs all three.
	c := newCluster(t, 12)
	workers, dumps, coords := c.job(1, 3)
	c.waitFor("a first checkpoint", 60*time.Second, func() bool { return len(c.index()) > 0 }, workers...)
	workers[1].kill()
	t.Logf("killed %s", workers[1].name)
	c.waitFor("the dead worker's lease to expire", 30*time.Second, func() bool { return c.members() == 2 }, workers[0], workers[2])
	gone, _ := latest(c.index())
	name, err := etcdcoord.Leader(context.Background(), c.cli, etcdcoord.Job{Name: jobName})
	if err != nil {
		t.Fatal(err)
	}
	leader := coords[name]
	if leader == nil {
		t.Fatalf("the leader is %q, not one of the coordinators", name)
	}
	absent := fmt.Sprintf("expected instance %s/1 (of 3) has left", pipeline.Operator)
	c.waitFor("three checkpoints declined for the absent worker", 30*time.Second, func() bool {
		return len(logLines(t, leader, absent)) >= 3
	}, workers[0], workers[2], leader)
	if l, _ := latest(c.index()); l.ID != gone.ID {
		t.Fatalf("checkpoint %d completed without worker 1 (the latest was %d when it was gone)", l.ID, gone.ID)
	}

	again, out := c.worker(2, 1, 3)
	workers[1], dumps[1] = again, out
	c.waitFor("a checkpoint with the restarted worker", 60*time.Second, func() bool {
		l, ok := latest(c.index())
		return ok && l.ID > gone.ID
	}, workers...)
	if len(logLines(t, again, `msg=restored`, "checkpoint="+gone.Name)) == 0 {
		t.Errorf("%s did not restore %s", again.name, gone.Name)
	}
	c.finish(workers)
	for _, p := range coords {
		select {
		case <-p.done:
			t.Fatalf("%s exited: %v", p.name, p.err)
		default:
		}
	}
	c.verify(dumps)
}

// The object store goes away for a while: checkpoints fail (within the
// tolerable failures), processing goes on, and checkpoints complete again
// once it is back.
func TestObjectStoreOutage(t *testing.T) {
	c := newCluster(t, 10)
	c.tolerable = 1000
	obs := c.observe()
	workers, dumps, coords := c.job(1, 3)
	c.waitFor("a first checkpoint", 60*time.Second, func() bool { return len(c.index()) > 0 }, workers...)
	c.minio.Stop()
	down := time.Now()
	before, _ := latest(c.index())
	time.Sleep(10 * interval)
	// Let the checkpoints of the outage fail for sure: the timeout is 1 s.
	time.Sleep(time.Second)
	if err := c.minio.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("MinIO was down for %v", time.Since(down).Round(time.Millisecond))
	c.waitFor("a checkpoint after the outage", 60*time.Second, func() bool {
		l, ok := latest(c.index())
		return ok && l.ID > before.ID
	}, workers...)
	c.finish(workers)
	ids := obs.ids()
	t.Logf("completed checkpoints: %v (last before the outage: %d)", ids, before.ID)
	for _, w := range workers {
		if len(logLines(t, w, `msg="checkpoint aborted"`)) == 0 {
			t.Errorf("%s saw no checkpoint fail", w.name)
		}
	}
	// The leader counted failures, and the job did not fail.
	failed := int64(0)
	re := regexp.MustCompile(`failed=(\d+)`)
	for _, p := range coords {
		select {
		case <-p.done:
			t.Fatalf("%s exited: %v", p.name, p.err)
		default:
		}
		for _, l := range logLines(t, p, `msg=counts`) {
			if m := re.FindStringSubmatch(l); m != nil {
				n, _ := strconv.ParseInt(m[1], 10, 64)
				failed = max(failed, n)
			}
		}
	}
	if failed == 0 {
		t.Error("the coordinators counted no failed checkpoint")
	}
	t.Logf("failed checkpoints: %d", failed)
	c.verify(dumps)
}

// Bad flags are a clear error and exit status 2.
func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "usage"},
		{[]string{"launch"}, `unknown subcommand "launch"`},
		{[]string{"worker", "-checkpoints", "/x", "-parallelism", "3", "-index", "3", "-out", "f"}, "-index: 3 is not in [0, 3)"},
		{[]string{"worker", "-checkpoints", "/x", "-parallelism", "0", "-index", "0", "-out", "f"}, "-parallelism: 0 is not positive"},
		{[]string{"worker", "-checkpoints", "/x", "-parallelism", "2", "-index", "0"}, "-out: required"},
		{[]string{"worker", "-parallelism", "2", "-index", "0", "-out", "f"}, "-checkpoints: required"},
		{[]string{"worker", "-checkpoints", "/x", "-parallelism", "2", "-index", "0", "-out", "f", "-seed", "0"}, "-seed: 0"},
		{[]string{"worker", "-checkpoints", "/x", "-parallelism", "2", "-index", "0", "-out", "f", "-rate", "-1"}, "-rate: -1 is negative"},
		{[]string{"coordinator", "-checkpoints", "/x", "-parallelism", "3", "-interval", "1ms"}, "-interval: 1ms"},
		{[]string{"coordinator", "-checkpoints", "/x", "-parallelism", "3", "-lease", "100ms"}, "-lease: 100ms"},
		{[]string{"coordinator", "-checkpoints", "/x", "-parallelism", "3", "extra"}, `unexpected argument "extra"`},
		{[]string{"coordinator", "-checkpoints", "/x"}, "-parallelism: 0 is not positive"},
		{[]string{"coordinator", "-checkpoints", "/x", "-parallelism", "-1"}, "-parallelism: -1 is not positive"},
		{[]string{"coordinator", "-bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"coordinator", "-checkpoints", "/x", "-parallelism", "3", "-metrics-addr", "9464"}, `-metrics-addr: "9464": want HOST:PORT`},
		{[]string{"coordinator", "-checkpoints", "/x", "-parallelism", "3", "-metrics-addr", "127.0.0.1:http"}, `port "http" is not a number`},
		{[]string{"worker", "-checkpoints", "/x", "-parallelism", "2", "-index", "0", "-out", "f", "-metrics-addr", "127.0.0.1:70000"}, `port "70000" is not a number in [0, 65535]`},
		{[]string{"worker", "-checkpoints", "/x", "-parallelism", "2", "-index", "0", "-out", "f", "-decline-every", "-1"}, "-decline-every: -1 is negative"},
		{[]string{"verify"}, "no dump files given"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), tc.args, &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("cluster %q: exit %d, stderr %q; want 2 and %q", tc.args, code, errb.String(), tc.want)
		}
	}
}

// verify refuses what is not a dump, and reports a dump that differs.
func TestVerify(t *testing.T) {
	dir := t.TempDir()
	junk := dir + "/junk"
	if err := os.WriteFile(junk, []byte("not a dump"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"verify", "-events", "100", junk}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "not a worker's dump") {
		t.Errorf("verify of junk: exit %d, %q", code, errb.String())
	}
	want, err := reference(context.Background(), pipeline.Stream{Seed: 3, Users: 20, Len: 100}, runtime.DefaultMaxParallelism)
	if err != nil {
		t.Fatal(err)
	}
	good := dir + "/good"
	if err := writeDump(good, want); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run(context.Background(), []string{"verify", "-events", "100", "-seed", "3", "-users", "20", good}, &out, &errb); code != 0 {
		t.Errorf("verify of the reference itself: exit %d, %q %q", code, out.String(), errb.String())
	}
	for k := range want {
		want[k] += "x"
		break
	}
	bad := dir + "/bad"
	if err := writeDump(bad, want); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run(context.Background(), []string{"verify", "-events", "100", "-seed", "3", "-users", "20", bad}, &out, &errb); code != 1 || !strings.Contains(out.String(), "1 of") {
		t.Errorf("verify of a changed dump: exit %d, %q", code, out.String())
	}
	// Two copies of one dump overlap.
	if code := run(context.Background(), []string{"verify", "-events", "100", "-seed", "3", "-users", "20", good, good}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "overlap") {
		t.Errorf("verify of overlapping dumps: exit %d, %q", code, errb.String())
	}
}
