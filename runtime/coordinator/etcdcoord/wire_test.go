package etcdcoord

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/coordinator"
	"github.com/stategen/stategen/runtime/coordinator/driver"
)

// Participant ids become one key element whatever they contain, and parse
// back; keys of other shapes do not parse.
func TestKeysRoundTrip(t *testing.T) {
	k, err := newKeys(Job{Name: "clicks"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []coordinator.ParticipantID{"op/3", "a%2Fb", "x y/ü", "/", "%"} {
		if got, ok := k.parseMember(k.member(p)); !ok || got != p {
			t.Errorf("member key of %q parses as %q, %v", p, got, ok)
		}
		for _, kind := range []byte{'t', 'n'} {
			key := k.trigger(p, 42)
			if kind == 'n' {
				key = k.note(p, 42)
			}
			if gp, gk, id, ok := k.parseInbox(key); !ok || gp != p || gk != kind || id != 42 {
				t.Errorf("inbox key %q parses as %q %c %d %v", key, gp, gk, id, ok)
			}
		}
		if id, gp, ok := k.parseAck(k.ack(7, p)); !ok || gp != p || id != 7 {
			t.Errorf("ack key of %q parses as %d %q %v", p, id, gp, ok)
		}
	}
	if !strings.HasPrefix(k.member("op/3"), "/stategen/clicks/members/") {
		t.Errorf("member key %q", k.member("op/3"))
	}
	for _, bad := range []string{
		k.acks() + "12/op", k.acks() + "00000000000000000000/op", k.acks() + "00000000000000000042/",
		k.inboxes() + "op/x/00000000000000000042", k.inboxes() + "op", k.members() + "a%zz",
	} {
		if _, _, ok := k.parseAck(bad); ok {
			t.Errorf("%q parses as an ack", bad)
		}
		if _, _, _, ok := k.parseInbox(bad); ok {
			t.Errorf("%q parses as an inbox key", bad)
		}
		if _, ok := k.parseMember(bad); ok && strings.HasPrefix(bad, k.members()) {
			t.Errorf("%q parses as a member", bad)
		}
	}
	for _, j := range []Job{{}, {Name: "a/b"}, {Name: "x", Prefix: "rel"}, {Name: "x", Prefix: "/p/"}} {
		if _, err := newKeys(j); err == nil {
			t.Errorf("job %+v accepted", j)
		}
	}
}

// An acknowledgement carries a checkpoint.SnapshotResult across processes
// unchanged.
func TestSnapshotResultRoundTrip(t *testing.T) {
	want := checkpoint.SnapshotResult{
		Snapshot: checkpoint.InstanceSnapshot{
			MaxParallelism: 128,
			KeyGroups:      runtime.KeyGroupRange{Start: 43, End: 86},
			States: []runtime.StateSpec{
				{Name: "clicks", Kind: runtime.KindValue, Fingerprint: "f1", Schema: "stategen/v1 value key=string value=int64"},
				{Name: "pages", Kind: runtime.KindSortedMap, SubKeyed: true, Fingerprint: "f2"},
			},
			File:          checkpoint.File{Name: "op-1.sgc", Size: 1234, CRC32C: 0xdeadbeef, Tag: 0x9f3a0c11, Entries: 17},
			OperatorState: []byte{0, 1, 2, 255},
		},
		Stats: checkpoint.SnapshotStats{SyncDuration: 3 * time.Microsecond, AsyncDuration: 2 * time.Second, BytesWritten: 1234, Entries: 17},
	}
	var m ackMsg
	if err := decode([]byte(encode(ackMsg{V: wireVersion, ID: 5, Participant: "op/1", Checkpoint: checkpoint.CheckpointName(5), Snapshot: newSnapshotMsg(want)})), &m); err != nil {
		t.Fatal(err)
	}
	if err := m.check(5, "op/1"); err != nil {
		t.Fatal(err)
	}
	got, err := m.Snapshot.result()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("snapshot result changed on the wire (-want +got):\n%s", diff)
	}
}

// Answers that do not fit their key, or say neither yes nor no, or name a
// checkpoint wrongly, are rejected with errBadMessage.
func TestAckMessageChecks(t *testing.T) {
	snap := newSnapshotMsg(checkpoint.SnapshotResult{Snapshot: checkpoint.InstanceSnapshot{File: checkpoint.File{Name: "f"}}})
	ok := ackMsg{V: wireVersion, ID: 5, Participant: "op/1", Checkpoint: checkpoint.CheckpointName(5), Snapshot: snap}
	for name, m := range map[string]ackMsg{
		"other id":          {V: 1, ID: 6, Participant: "op/1", Checkpoint: checkpoint.CheckpointName(6), Snapshot: snap},
		"other participant": {V: 1, ID: 5, Participant: "op/2", Checkpoint: checkpoint.CheckpointName(5), Snapshot: snap},
		"neither":           {V: 1, ID: 5, Participant: "op/1", Checkpoint: checkpoint.CheckpointName(5)},
		"both":              {V: 1, ID: 5, Participant: "op/1", Checkpoint: checkpoint.CheckpointName(5), Snapshot: snap, Decline: &declineMsg{}},
		"other checkpoint":  {V: 1, ID: 5, Participant: "op/1", Checkpoint: checkpoint.CheckpointName(9), Snapshot: snap},
		"reserved name":     {V: 1, ID: 5, Participant: "op/1", Checkpoint: checkpoint.CoordinatorName, Snapshot: snap},
		"path":              {V: 1, ID: 5, Participant: "op/1", Checkpoint: "../x", Snapshot: snap},
	} {
		if err := m.check(5, "op/1"); !errors.Is(err, errBadMessage) {
			t.Errorf("%s: check = %v, want errBadMessage", name, err)
		}
	}
	if err := ok.check(5, "op/1"); err != nil {
		t.Errorf("valid message: %v", err)
	}
	savepoint := ok
	savepoint.Checkpoint = "before-upgrade"
	if err := savepoint.check(5, "op/1"); err != nil {
		t.Errorf("savepoint location: %v", err)
	}
	var m ackMsg
	if err := decode([]byte(`{"v":2,"id":5}`), &m); !errors.Is(err, errBadMessage) {
		t.Errorf("other version: %v", err)
	}
	if err := decode([]byte(`{"v":1,`), &m); !errors.Is(err, errBadMessage) {
		t.Errorf("truncated: %v", err)
	}
	bad := *snap
	bad.States = []stateMsg{{Name: "s", Kind: "tree"}}
	if _, err := bad.result(); !errors.Is(err, errBadMessage) {
		t.Errorf("unknown kind: %v", err)
	}
	bad = *snap
	bad.BytesWritten = -1
	if _, err := bad.result(); !errors.Is(err, errBadMessage) {
		t.Errorf("negative size: %v", err)
	}
}

// An abort reaches the instance as the coordinator.AbortError it was, its
// cause as text; a decline's benign cause stays benign.
func TestNotificationsCarryTheAbort(t *testing.T) {
	sent := &coordinator.AbortError{ID: 9, Reason: coordinator.AbortParticipantLost, Participant: "op/2", Cause: errors.New("gone")}
	n := abortedNote(9, sent)
	var m noteMsg
	if err := decode([]byte(encode(n)), &m); err != nil {
		t.Fatal(err)
	}
	var got *coordinator.AbortError
	if err := m.err(); !errors.As(err, &got) || !errors.Is(err, coordinator.ErrParticipantLost) || err.Error() != sent.Error() {
		t.Errorf("received %v, sent %v", err, sent)
	}
	c := completedNote(driver.Completion{ID: 9})
	if c.err() != nil {
		t.Errorf("completion carries %v", c.err())
	}
	for _, want := range []driver.Completion{{ID: 9}, {ID: 10, Savepoint: true}, {ID: 11, Final: true}, {ID: 12, Savepoint: true, Final: true}} {
		var m noteMsg
		if err := decode([]byte(encode(completedNote(want))), &m); err != nil || m.completion() != want {
			t.Errorf("completion %+v arrives as %+v (%v)", want, m.completion(), err)
		}
	}
	// Every reason survives the trip, also those added after the wire
	// format.
	for r := coordinator.AbortDeclined; r <= coordinator.AbortIncomplete; r++ {
		var m noteMsg
		if err := decode([]byte(encode(abortedNote(5, &coordinator.AbortError{ID: 5, Reason: r}))), &m); err != nil {
			t.Fatal(err)
		}
		if err := m.err(); !errors.Is(err, r.Err()) {
			t.Errorf("an abort for %v arrives as %v", r, err)
		}
	}
	failover := noteMsg{V: 1, ID: 3, Reason: coordinator.AbortShutdown.String(), Cause: "x took over", Failover: true}
	if err := failover.err(); !errors.Is(err, ErrFailover) || !errors.Is(err, coordinator.ErrShutdown) {
		t.Errorf("failover abort %v", err)
	}
	benign := &coordinator.AbortError{ID: 10, Reason: coordinator.AbortDeclined, Participant: "op/1", Cause: fmt.Errorf("absent: %w", coordinator.ErrNotReady)}
	var bm noteMsg
	if err := decode([]byte(encode(abortedNote(10, benign))), &bm); err != nil {
		t.Fatal(err)
	}
	if err := bm.err(); !errors.Is(err, coordinator.ErrNotReady) || !errors.Is(err, coordinator.ErrDeclined) || err.Error() != benign.Error() {
		t.Errorf("received %v, sent %v (a not-ready decline)", err, benign)
	}
	if err := m.err(); errors.Is(err, coordinator.ErrNotReady) {
		t.Errorf("received %v: not a not-ready decline", err)
	}
	d := declineMsg{Cause: "draining", NotReady: true}
	if err := d.cause("op/1"); !errors.Is(err, coordinator.ErrNotReady) {
		t.Errorf("benign decline %v", err)
	}
	tr := driver.Trigger{ID: 4, Options: coordinator.Options{Savepoint: true, Location: "sp"}, At: time.Unix(10, 5).UTC(), Deadline: time.Unix(20, 0).UTC(), Checkpoint: "sp"}
	tm := newTriggerMsg(tr)
	var back triggerMsg
	if err := decode([]byte(encode(tm)), &back); err != nil {
		t.Fatal(err)
	}
	s := checkpoint.NewMem()
	gotTr, err := back.trigger(4, s)
	tr.Storage = s
	if err != nil || !gotTr.At.Equal(tr.At) || !gotTr.Deadline.Equal(tr.Deadline) || gotTr.Options != tr.Options || gotTr.Checkpoint != tr.Checkpoint || gotTr.Storage != s {
		t.Errorf("trigger %+v, %v; sent %+v", gotTr, err, tr)
	}
	if _, err := back.trigger(5, s); !errors.Is(err, errBadMessage) {
		t.Errorf("trigger under another id's key: %v", err)
	}
}

// The outbox cuts its queue into transactions etcd accepts: no key twice,
// prefix deletions alone, at most maxTxnOps operations.
func TestOutboxBatches(t *testing.T) {
	put := func(k string) outOp { return outOp{key: k, val: "v"} }
	del := func(k string) outOp { return outOp{key: k, del: true} }
	wipe := func(k string) outOp { return outOp{key: k, del: true, prefix: true} }
	queue := []outOp{put("a"), put("b"), del("a"), put("c"), wipe("p/"), put("p/x"), put("d")}
	var batches [][]string
	for len(queue) > 0 {
		b := nextBatch(queue)
		var keys []string
		for _, op := range b {
			keys = append(keys, op.key)
		}
		batches = append(batches, keys)
		queue = queue[len(b):]
	}
	want := [][]string{{"a", "b"}, {"a", "c"}, {"p/"}, {"p/x", "d"}}
	if diff := cmp.Diff(want, batches); diff != "" {
		t.Errorf("batches (-want +got):\n%s", diff)
	}
	var many []outOp
	for i := range 250 {
		many = append(many, put(strings.Repeat("k", i+1)))
	}
	if n := len(nextBatch(many)); n != maxTxnOps {
		t.Errorf("batch of %d operations, want %d", n, maxTxnOps)
	}
}

// Whatever bytes an acknowledgement key holds, reading it fails cleanly
// or yields a result the coordinator can use.
func FuzzAckMessage(f *testing.F) {
	snap := newSnapshotMsg(checkpoint.SnapshotResult{Snapshot: checkpoint.InstanceSnapshot{File: checkpoint.File{Name: "f"}, States: []runtime.StateSpec{{Name: "s", Kind: runtime.KindMap}}}})
	f.Add([]byte(encode(ackMsg{V: wireVersion, ID: 5, Participant: "op/1", Checkpoint: checkpoint.CheckpointName(5), Snapshot: snap})))
	f.Add([]byte(encode(ackMsg{V: wireVersion, ID: 5, Participant: "op/1", Checkpoint: "sp", Decline: &declineMsg{Cause: "x"}})))
	f.Add([]byte(`{"v":1,"snapshot":{"keyGroups":[1]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var m ackMsg
		if err := decode(data, &m); err != nil {
			if !errors.Is(err, errBadMessage) {
				t.Fatalf("decode error %v does not wrap errBadMessage", err)
			}
			return
		}
		if err := m.check(5, "op/1"); err != nil {
			return
		}
		if m.Snapshot != nil {
			if res, err := m.Snapshot.result(); err == nil && (res.Snapshot.File.Name == "" || res.Stats.BytesWritten < 0) {
				t.Fatalf("accepted %+v", res)
			}
		}
	})
}
