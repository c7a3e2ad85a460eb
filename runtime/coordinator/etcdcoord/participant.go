package etcdcoord

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime/coordinator"
	"github.com/stategen/stategen/runtime/coordinator/driver"
)

// JoinOptions configure an operator instance that takes part in a job's
// checkpoints from its own process.
type JoinOptions struct {
	// Job names the job. Required.
	Job Job
	// Instance describes the operator instance, as for
	// driver.Coordinator.Join: Operator, Index and Store are required.
	Instance driver.InstanceOptions
	// Storage is where the instance writes its snapshots: the job's
	// checkpoint storage, as this process reaches it (the coordinator's
	// Options.Storage, seen from here). Required.
	Storage checkpoint.Storage
	// LeaseTTL is the lease of the instance's registration: the
	// coordinator notices a dead instance about LeaseTTL after its last
	// keep-alive. It is rounded up to whole seconds; zero means
	// DefaultLeaseTTL.
	LeaseTTL time.Duration
	// Logger receives the instance's records; nil means slog.Default().
	Logger *slog.Logger
}

// Instance is an operator instance that joined a job through etcd. It is a
// driver.Instance — the operator's loop selects on Triggers and
// Notifications and calls Snapshot and Decline exactly as in one process —
// whose triggers and notifications arrive from the leading coordinator,
// wherever it runs, and whose acknowledgements go back to it through etcd.
//
// The instance is registered under a lease of its own, kept alive in the
// background: if this process dies, the registration expires and the
// coordinator removes the instance (its pending checkpoints abort, see
// coordinator.AbortParticipantLost). If the lease ends while the process
// lives (a long pause, a partition), the instance registers again and
// takes part in later checkpoints. Close (the driver.Instance's) leaves
// the job: it removes the registration at once.
type Instance struct {
	*driver.Instance
	l *link
}

// Join registers an operator instance with job and returns it: it takes
// part in the checkpoints the leader triggers once it has noticed the
// registration. If another process holds the registration of the same
// participant (operator/index) — a previous incarnation of this one whose
// lease has not expired yet — Join waits for it to go, until ctx ends.
func Join(ctx context.Context, cli *clientv3.Client, opts JoinOptions) (*Instance, error) {
	k, err := newKeys(opts.Job)
	if err != nil {
		return nil, err
	}
	switch {
	case cli == nil:
		return nil, errors.New("etcdcoord: Join: the etcd client is required")
	case opts.Storage == nil:
		return nil, errors.New("etcdcoord: JoinOptions.Storage is required")
	case opts.LeaseTTL < 0:
		return nil, fmt.Errorf("etcdcoord: JoinOptions.LeaseTTL is %v; it must not be negative", opts.LeaseTTL)
	}
	lctx, cancel := context.WithCancel(context.Background())
	l := &link{
		cli:       cli,
		keys:      k,
		op:        opts.Instance.Operator,
		storage:   opts.Storage,
		ttl:       ttlSeconds(opts.LeaseTTL),
		ctx:       lctx,
		cancel:    cancel,
		delivered: map[coordinator.CheckpointID]bool{},
	}
	inst, part, err := driver.NewInstance(opts.Instance, l)
	if err != nil {
		cancel()
		return nil, err
	}
	l.id, l.part = inst.ID(), part
	l.log = cmp.Or(opts.Logger, slog.Default()).With("job", opts.Job.Name, "participant", string(l.id))
	rev, err := l.register(ctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("etcdcoord: registering %s: %w", l.id, err)
	}
	l.wg.Add(2)
	go func() {
		defer l.wg.Done()
		l.keep()
	}()
	go func() {
		defer l.wg.Done()
		l.watchInbox(rev + 1)
	}()
	return &Instance{Instance: inst, l: l}, nil
}

// maxDelivered bounds the triggers a link remembers (to drop duplicates):
// one whose end is never notified — its notification was lost in a
// failover — would otherwise never be forgotten.
const maxDelivered = 1024

// link carries an Instance's messages: it is the Instance's
// driver.Upstream, and it calls the Instance's driver.Participant with what
// arrives in its inbox.
type link struct {
	cli     *clientv3.Client
	keys    keys
	id      coordinator.ParticipantID
	op      string
	storage checkpoint.Storage
	ttl     int
	log     *slog.Logger
	part    driver.Participant

	ctx    context.Context // cancelled when the instance leaves
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	sess      *concurrency.Session
	sessStop  context.CancelFunc
	createRev int64 // the create revision of the registration
	leaving   bool
	delivered map[coordinator.CheckpointID]bool // triggers handed to the Instance, awaiting their notification
}

// register puts the registration under a new lease, once no other holds it,
// and returns its revision.
func (l *link) register(ctx context.Context) (int64, error) {
	key := l.keys.member(l.id)
	val := encode(memberMsg{V: wireVersion, Participant: string(l.id), Operator: l.op, Incarnation: randomHex(8)})
	for {
		// The session lives until the instance leaves; until it is
		// registered, ctx can end it too.
		sctx, sstop := context.WithCancel(l.ctx)
		unbind := context.AfterFunc(ctx, sstop)
		sess, err := concurrency.NewSession(l.cli, concurrency.WithTTL(l.ttl), concurrency.WithContext(sctx))
		if err != nil {
			unbind()
			sstop()
			return 0, err
		}
		// Registering wipes the inbox: what is left in it was meant for an
		// earlier incarnation.
		resp, err := l.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpDelete(l.keys.inbox(l.id), clientv3.WithPrefix()), clientv3.OpPut(key, val, clientv3.WithLease(sess.Lease()))).
			Commit()
		if err == nil && resp.Succeeded && unbind() {
			l.mu.Lock()
			if l.sessStop != nil {
				l.sessStop()
			}
			l.sess, l.sessStop, l.createRev = sess, sstop, resp.Header.Revision
			l.mu.Unlock()
			l.log.Info("registered", "lease", fmt.Sprintf("%x", int64(sess.Lease())))
			return resp.Header.Revision, nil
		}
		unbind()
		l.revoke(sess)
		sstop()
		if err != nil {
			return 0, err
		}
		if resp.Succeeded {
			// Registered, but ctx ended meanwhile: undo.
			l.deregister(resp.Header.Revision)
			return 0, ctx.Err()
		}
		l.log.Warn("another process holds this participant's registration; waiting for it to end")
		if err := l.awaitDeletion(ctx, key, resp.Header.Revision+1); err != nil {
			return 0, err
		}
	}
}

// awaitDeletion waits until key is deleted (at or after revision rev).
func (l *link) awaitDeletion(ctx context.Context, key string, rev int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for wr := range l.cli.Watch(clientv3.WithRequireLeader(wctx), key, clientv3.WithRev(rev)) {
		if wr.Err() != nil {
			return nil // register reads the key again
		}
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypeDelete {
				return nil
			}
		}
	}
	return ctx.Err()
}

// keep registers the instance again whenever its lease ends, until it
// leaves.
func (l *link) keep() {
	backoff := 50 * time.Millisecond
	for {
		l.mu.Lock()
		sess := l.sess
		l.mu.Unlock()
		select {
		case <-l.ctx.Done():
			return
		case <-sess.Done():
		}
		if l.ctx.Err() != nil {
			return
		}
		l.log.Warn("registration lost (its lease ended); registering again")
		for {
			if _, err := l.register(l.ctx); err == nil {
				backoff = 50 * time.Millisecond
				break
			} else if l.ctx.Err() != nil {
				return
			} else {
				l.log.Warn("registering failed; retrying", "err", err)
			}
			sleep(l.ctx, &backoff)
		}
	}
}

// watchInbox follows the instance's inbox from revision rev.
func (l *link) watchInbox(rev int64) {
	prefix := l.keys.inbox(l.id)
	backoff := 50 * time.Millisecond
	for l.ctx.Err() == nil {
		if rev == 0 {
			// The revision to resume from was compacted away: what is in
			// the inbox now is what is still to handle.
			resp, err := l.cli.Get(l.ctx, prefix, clientv3.WithPrefix())
			if err != nil {
				sleep(l.ctx, &backoff)
				continue
			}
			for _, kv := range resp.Kvs {
				l.handle(kv.Key, kv.Value)
			}
			rev = resp.Header.Revision + 1
		}
		for wr := range l.cli.Watch(clientv3.WithRequireLeader(l.ctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(rev)) {
			if wr.CompactRevision != 0 {
				rev = 0
				break
			}
			if err := wr.Err(); err != nil {
				l.log.Warn("inbox watch failed; resuming", "err", err)
				break
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypePut {
					l.handle(ev.Kv.Key, ev.Kv.Value)
				}
				rev = ev.Kv.ModRevision + 1
			}
			backoff = 50 * time.Millisecond
		}
		sleep(l.ctx, &backoff)
	}
}

// handle delivers a trigger or a notification to the Instance.
func (l *link) handle(k, v []byte) {
	key := string(k)
	p, kind, id, ok := l.keys.parseInbox(key)
	if !ok || p != l.id {
		return
	}
	switch kind {
	case 't':
		var m triggerMsg
		err := decode(v, &m)
		var tr driver.Trigger
		if err == nil {
			tr, err = m.trigger(id, l.storage)
		}
		if err != nil {
			l.log.Error("unreadable trigger ignored", "key", key, "err", err)
			return
		}
		l.mu.Lock()
		dup := l.delivered[id] || l.leaving
		if !dup {
			l.delivered[id] = true
			for len(l.delivered) > maxDelivered {
				delete(l.delivered, slices.Min(slices.Collect(maps.Keys(l.delivered))))
			}
		}
		l.mu.Unlock()
		if !dup {
			l.part.Trigger(tr)
		}
	case 'n':
		var m noteMsg
		err := decode(v, &m)
		if err == nil && m.ID != uint64(id) {
			err = fmt.Errorf("%w: notification of checkpoint %d under the key of %d", errBadMessage, m.ID, id)
		}
		if err != nil {
			l.log.Error("unreadable notification ignored", "key", key, "err", err)
		} else {
			l.mu.Lock()
			mine := l.delivered[id]
			delete(l.delivered, id)
			l.mu.Unlock()
			// A notification of a checkpoint this incarnation never saw
			// the trigger of is not for it.
			if mine && m.Completed {
				l.part.NotifyComplete(m.completion())
			} else if mine {
				l.part.NotifyAborted(id, m.err())
			}
		}
		ctx, cancel := context.WithTimeout(l.ctx, requestTimeout)
		if _, err := l.cli.Delete(ctx, key); err != nil && l.ctx.Err() == nil {
			l.log.Warn("handled notification not deleted", "key", key, "err", err)
		}
		cancel()
	}
}

// Ack implements driver.Upstream: it puts the acknowledgement where the
// leader watches. One larger than MaxMessage is declined instead.
func (l *link) Ack(t driver.Trigger, from coordinator.ParticipantID, a driver.Acknowledgement) error {
	val := encode(ackMsg{
		V: wireVersion, ID: uint64(t.ID), Participant: string(from), Checkpoint: t.Checkpoint,
		Savepoint: t.Options.Savepoint, Snapshot: newSnapshotMsg(a.Result), Finished: a.Finished,
	})
	if len(val) > MaxMessage {
		err := fmt.Errorf("%w: %d bytes, at most %d", ErrMessageTooLarge, len(val), MaxMessage)
		_ = l.Decline(t, from, err)
		return err
	}
	return l.put(l.keys.ack(t.ID, from), val, t.Deadline)
}

// Decline implements driver.Upstream. It may run on the operator's
// goroutine (Instance.Snapshot declines when the synchronous phase fails),
// so it retries for requestTimeout at most.
func (l *link) Decline(t driver.Trigger, from coordinator.ParticipantID, cause error) error {
	msg := "declined"
	if cause != nil {
		msg = cause.Error()
	}
	return l.put(l.keys.ack(t.ID, from), encode(ackMsg{
		V: wireVersion, ID: uint64(t.ID), Participant: string(from), Checkpoint: t.Checkpoint,
		Savepoint: t.Options.Savepoint,
		Decline:   &declineMsg{Cause: msg, NotReady: errors.Is(cause, coordinator.ErrNotReady)},
	}), earliest(t.Deadline, time.Now().Add(requestTimeout)))
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// put writes an answer, retrying failed attempts (the write is idempotent)
// until the checkpoint's deadline, after which nobody waits for it.
func (l *link) put(key, val string, deadline time.Time) error {
	backoff := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		_, err := l.cli.Put(ctx, key, val)
		cancel()
		if err == nil {
			return nil
		}
		if l.cli.Ctx().Err() != nil || !time.Now().Add(backoff).Before(deadline) {
			return fmt.Errorf("etcdcoord: %s: sending %s: %w", l.id, key, err)
		}
		l.log.Warn("sending an answer failed; retrying", "key", key, "err", err)
		time.Sleep(backoff)
		backoff = min(2*backoff, time.Second)
	}
}

// RemoveParticipant implements driver.Upstream: the instance leaves. Its
// registration (if still its own) and inbox are deleted, its lease
// revoked, and the link's goroutines stopped.
func (l *link) RemoveParticipant(coordinator.ParticipantID) error {
	l.mu.Lock()
	if l.leaving {
		l.mu.Unlock()
		return nil
	}
	l.leaving = true
	l.mu.Unlock()
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	sess, sstop, rev := l.sess, l.sessStop, l.createRev
	l.mu.Unlock()
	err := l.deregister(rev)
	l.revoke(sess)
	sstop()
	if err != nil {
		return fmt.Errorf("etcdcoord: %s: leaving: %w (the registration expires with its lease)", l.id, err)
	}
	return nil
}

// deregister deletes the registration made at revision rev, if it is still
// there, and the inbox.
func (l *link) deregister(rev int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	key := l.keys.member(l.id)
	_, err := l.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
		Then(clientv3.OpDelete(key), clientv3.OpDelete(l.keys.inbox(l.id), clientv3.WithPrefix())).
		Commit()
	return err
}

// revoke ends a session's lease now rather than at its expiry. The
// session's own Close cannot: its context is the instance's, which has
// ended.
func (l *link) revoke(sess *concurrency.Session) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	_, _ = l.cli.Revoke(ctx, sess.Lease())
}

// lease returns the lease of the current registration (for tests).
func (l *link) lease() clientv3.LeaseID {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sess.Lease()
}
