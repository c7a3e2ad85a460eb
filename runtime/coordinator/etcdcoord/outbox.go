package etcdcoord

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// An outbox carries a leader's messages to etcd: triggers and
// notifications for participants, deletions of handled acknowledgements,
// wipes of departed participants' inboxes. The driver calls a participant
// on its own goroutine and must not wait, so the messages are queued and
// written by the outbox's goroutine, in order, several to a transaction,
// each transaction fenced by the leader's election key. A transaction
// that fails for another reason than the fence (etcd unreachable, a
// timeout) is retried until it lands, so nothing is lost or reordered;
// every message is idempotent (puts of the same value, deletions), which
// makes the retry of a transaction that did land harmless.
type outbox struct {
	cli   *clientv3.Client
	fence fence
	log   *slog.Logger
	// timeout bounds one transaction.
	timeout time.Duration

	mu      sync.Mutex
	queue   []outOp
	queued  uint64 // messages ever queued
	written uint64 // messages ever written (or dropped, once fenced)
	err     error  // ErrNotLeader once fenced: everything is dropped
	changed chan struct{}
	lost    chan struct{} // closed when the fence fails
	wake    chan struct{}
}

// outOp is one message: a put, a deletion, or the deletion of a prefix.
type outOp struct {
	key, val string
	del      bool
	prefix   bool
}

// maxTxnOps keeps a transaction below etcd's default limit of 128
// operations (--max-txn-ops), the fence's comparison aside.
const maxTxnOps = 100

func newOutbox(cli *clientv3.Client, f fence, log *slog.Logger) *outbox {
	return &outbox{
		cli: cli, fence: f, log: log, timeout: requestTimeout,
		changed: make(chan struct{}), lost: make(chan struct{}), wake: make(chan struct{}, 1),
	}
}

func (o *outbox) put(key, val string) { o.add(outOp{key: key, val: val}) }
func (o *outbox) del(key string)      { o.add(outOp{key: key, del: true}) }
func (o *outbox) delPrefix(p string)  { o.add(outOp{key: p, del: true, prefix: true}) }

func (o *outbox) add(ops ...outOp) {
	o.mu.Lock()
	if o.err == nil {
		o.queue = append(o.queue, ops...)
		o.queued += uint64(len(ops))
	}
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// run writes the queue until ctx ends or the fence fails.
func (o *outbox) run(ctx context.Context) {
	backoff := 50 * time.Millisecond
	for {
		o.mu.Lock()
		batch := nextBatch(o.queue)
		o.mu.Unlock()
		if len(batch) == 0 {
			select {
			case <-o.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		err := o.write(ctx, batch)
		switch {
		case err == nil:
			backoff = 50 * time.Millisecond
			o.mu.Lock()
			o.queue = o.queue[len(batch):]
			o.written += uint64(len(batch))
			o.signal()
			o.mu.Unlock()
		case errors.Is(err, ErrNotLeader):
			o.mu.Lock()
			o.err = err
			o.written = o.queued
			o.queue = nil
			close(o.lost)
			o.signal()
			o.mu.Unlock()
			return
		default:
			if ctx.Err() != nil {
				return
			}
			o.log.Warn("etcd write failed; retrying", "ops", len(batch), "err", err)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return
			}
			backoff = min(2*backoff, 2*time.Second)
		}
	}
}

// signal wakes the flushers; called with o.mu held.
func (o *outbox) signal() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// nextBatch returns the longest prefix of queue that one transaction can
// carry: etcd refuses a transaction that writes a key twice, so the batch
// ends before a message that touches a key (or prefix) of an earlier one,
// and a prefix deletion travels alone.
func nextBatch(queue []outOp) []outOp {
	if len(queue) > 0 && queue[0].prefix {
		return queue[:1]
	}
	seen := map[string]bool{}
	for i, op := range queue {
		if i == maxTxnOps || op.prefix || seen[op.key] {
			return queue[:i]
		}
		seen[op.key] = true
	}
	return queue
}

func (o *outbox) write(ctx context.Context, batch []outOp) error {
	ops := make([]clientv3.Op, len(batch))
	for i, op := range batch {
		switch {
		case op.prefix:
			ops[i] = clientv3.OpDelete(op.key, clientv3.WithPrefix())
		case op.del:
			ops[i] = clientv3.OpDelete(op.key)
		default:
			ops[i] = clientv3.OpPut(op.key, op.val)
		}
	}
	tctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	_, err := o.fence.txn(tctx, o.cli, nil, ops)
	return err
}

// flush waits until every message queued before the call is written, the
// fence fails (ErrNotLeader) or ctx ends.
func (o *outbox) flush(ctx context.Context) error {
	o.mu.Lock()
	target := o.queued
	for o.written < target && o.err == nil {
		ch := o.changed
		o.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		o.mu.Lock()
	}
	err := o.err
	o.mu.Unlock()
	return err
}
