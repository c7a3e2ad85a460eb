package etcdcoord

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.opentelemetry.io/otel/metric"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime/coordinator"
	"github.com/stategen/stategen/runtime/coordinator/driver"
	"github.com/stategen/stategen/runtime/coordinator/metrics"
)

// DefaultLeaseTTL is the lease of a coordinator's election key and of a
// participant's registration unless their options say otherwise: a dead
// leader is replaced, and a dead participant removed, about this long
// after it died.
const DefaultLeaseTTL = 10 * time.Second

// requestTimeout bounds one etcd request of the machinery (a transaction,
// a read); failed requests are retried.
const requestTimeout = 5 * time.Second

// Errors of the coordinator.
var (
	// ErrFailover, wrapped in the cause of an aborted checkpoint's
	// notification, says that the coordinator that triggered the
	// checkpoint lost its leadership before it ended, and its successor
	// aborted it.
	ErrFailover = errors.New("etcdcoord: coordinator failover: the leader that triggered the checkpoint is gone")
	// ErrClosed reports a call on a closed Coordinator.
	ErrClosed = errors.New("etcdcoord: coordinator closed")
)

// Options configure a Coordinator.
type Options struct {
	// Job names the job. Required.
	Job Job
	// Storage holds the job's checkpoints: the storage every participant
	// writes its snapshots to (a shared directory, an object store).
	// Required.
	Storage checkpoint.Storage
	// Config configures the coordinator's rules, as for driver.Options.
	Config coordinator.Config
	// LeaseTTL is the lease of the election key: a dead leader is replaced
	// about LeaseTTL after its last keep-alive. It is rounded up to whole
	// seconds; zero means DefaultLeaseTTL.
	LeaseTTL time.Duration
	// Name names this coordinator in the election and in the logs; empty
	// means host name, process id and a random suffix. Every coordinator
	// of a job needs its own.
	Name string
	// Logger receives the coordinator's records; nil means slog.Default().
	Logger *slog.Logger
	// IOTimeout bounds each storage operation (see driver.Options).
	IOTimeout time.Duration
	// SkipCleanup leaves crash debris in Storage when a term starts (see
	// driver.Options).
	SkipCleanup bool
	// Expected is the job graph: each operator's parallelism, passed to
	// the leader's driver (driver.Options.Expected). Operator "op" with
	// parallelism p has the instances "op/0" … "op/<p-1>" (the participant
	// ids of driver.InstanceOptions{Operator, Index}), and every checkpoint
	// includes all of them, registered or not: a trigger to an expected
	// instance that is not registered (it has not joined yet, or its lease
	// expired) is declined on its behalf with an error wrapping
	// coordinator.ErrNotReady — the checkpoint is aborted without counting
	// as a failure, as Flink refuses to trigger while a task is not
	// running — so no checkpoint completes without every instance's key
	// groups. When a registered instance leaves, the checkpoints pending
	// on it are aborted (coordinator.AbortParticipantLost) and it stays
	// expected: later checkpoints are declined until it registers again.
	// A registration that is not expected (an unknown operator, an index
	// not below the parallelism) is refused with an error in the log
	// (driver.ErrUnexpectedInstance) and never takes part in a checkpoint.
	// To change a parallelism, restart the coordinators with the new
	// Expected (Flink redeploys the job graph).
	//
	// Nil Expected makes the participants exactly the instances
	// registered now. Beware: then a checkpoint completes with the
	// instances that happen to be registered — after one died, or before
	// all of a restarted job's instances joined — and such a checkpoint
	// lacks key groups and cannot be restored (pipeline.Thresholds and
	// checkpoint.Restore report the missing key groups). Use nil only for
	// jobs whose instances do not partition keyed state, or in tests.
	Expected map[string]int
	// MeterProvider receives the job's checkpoint metrics while this
	// coordinator leads (driver.Options.MeterProvider; package
	// runtime/coordinator/metrics): each term's driver records into the
	// same instruments, so counters go on across terms of one process. A
	// standby records nothing. Nil records nothing. StartCoordinator fails
	// if the provider cannot create the instruments.
	MeterProvider metric.MeterProvider
}

// Coordinator is one of a job's coordinator processes. It campaigns for
// the leadership of the job and, while it leads, runs a driver.Coordinator
// whose participants are the job's expected instances (Options.Expected),
// or else those registered in etcd (see the package doc). While another coordinator leads, it waits as a standby. It is safe
// for concurrent use.
type Coordinator struct {
	cli  *clientv3.Client
	opts Options
	keys keys
	ttl  int
	name string
	log  *slog.Logger

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	term     *term
	leading  chan struct{} // closed when a term starts
	terms    int
	stats    *coordinator.Stats // of the last term, once it ended
	retained []coordinator.Checkpoint
	failed   chan struct{}
	failErr  error
	stopErr  error // why run stopped, if not Close
}

// StartCoordinator checks opts, and that etcd answers within ctx, and
// starts the Coordinator: it campaigns in the background and leads when
// it wins. Close stops it.
func StartCoordinator(ctx context.Context, cli *clientv3.Client, opts Options) (*Coordinator, error) {
	k, err := newKeys(opts.Job)
	if err != nil {
		return nil, err
	}
	switch {
	case cli == nil:
		return nil, errors.New("etcdcoord: StartCoordinator: the etcd client is required")
	case opts.Storage == nil:
		return nil, errors.New("etcdcoord: Options.Storage is required")
	case opts.LeaseTTL < 0:
		return nil, fmt.Errorf("etcdcoord: Options.LeaseTTL is %v; it must not be negative", opts.LeaseTTL)
	case opts.IOTimeout < 0:
		return nil, fmt.Errorf("etcdcoord: Options.IOTimeout is %v; it must not be negative", opts.IOTimeout)
	}
	if _, err := opts.Config.Normalize(); err != nil {
		return nil, err
	}
	if _, err := driver.ExpectedInstances(opts.Expected); err != nil {
		return nil, fmt.Errorf("etcdcoord: Options.Expected: %w", err)
	}
	opts.Expected = maps.Clone(opts.Expected)
	if opts.MeterProvider != nil {
		// Every term's driver creates them again: find out now.
		if _, err := metrics.NewCheckpoints(opts.MeterProvider); err != nil {
			return nil, fmt.Errorf("etcdcoord: Options.MeterProvider: %w", err)
		}
	}
	if _, err := cli.Get(ctx, k.counter()); err != nil {
		return nil, fmt.Errorf("etcdcoord: etcd does not answer: %w", err)
	}
	name := opts.Name
	if name == "" {
		name = defaultName()
	}
	cctx, cancel := context.WithCancel(context.Background())
	c := &Coordinator{
		cli:     cli,
		opts:    opts,
		keys:    k,
		ttl:     ttlSeconds(opts.LeaseTTL),
		name:    name,
		log:     cmp.Or(opts.Logger, slog.Default()).With("job", opts.Job.Name, "coordinator", name),
		ctx:     cctx,
		cancel:  cancel,
		done:    make(chan struct{}),
		leading: make(chan struct{}),
		failed:  make(chan struct{}),
	}
	go c.run()
	return c, nil
}

func ttlSeconds(d time.Duration) int {
	if d == 0 {
		d = DefaultLeaseTTL
	}
	return max(1, int((d+time.Second-1)/time.Second))
}

func defaultName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d-%s", cmp.Or(host, "host"), os.Getpid(), randomHex(4))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// run campaigns and leads, term after term, until Close.
func (c *Coordinator) run() {
	defer close(c.done)
	backoff := 100 * time.Millisecond
	for c.ctx.Err() == nil {
		err := c.campaignAndLead()
		switch {
		case c.ctx.Err() != nil:
			return
		case c.cli.Ctx().Err() != nil:
			c.log.Error("etcd client closed: the coordinator stops", "err", err)
			c.mu.Lock()
			c.stopErr = fmt.Errorf("etcdcoord: the etcd client was closed: %w", err)
			c.mu.Unlock()
			return
		case err != nil:
			c.log.Warn("coordinator term ended", "err", err)
			select {
			case <-time.After(backoff):
			case <-c.ctx.Done():
				return
			}
			backoff = min(2*backoff, 2*time.Second)
		default:
			backoff = 100 * time.Millisecond
		}
	}
}

// campaignAndLead waits to be elected with a new session, and leads until
// the term ends.
func (c *Coordinator) campaignAndLead() error {
	// The session outlives Close's cancellation (a leader still writes
	// and resigns under it), but Close cancels its creation.
	sctx, scancel := context.WithCancel(context.Background())
	defer scancel()
	unbind := context.AfterFunc(c.ctx, scancel)
	sess, err := concurrency.NewSession(c.cli, concurrency.WithTTL(c.ttl), concurrency.WithContext(sctx))
	if !unbind() && err == nil {
		// Closed while the lease was being granted: give it back.
		rctx, rcancel := context.WithTimeout(context.Background(), requestTimeout)
		_, _ = c.cli.Revoke(rctx, sess.Lease())
		rcancel()
		err = c.ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("etcdcoord: creating a session: %w", err)
	}
	defer func() {
		// Revoke the lease if it is still ours; a lost one is gone anyway.
		select {
		case <-sess.Done():
		default:
			_ = sess.Close()
		}
	}()
	e := concurrency.NewElection(sess, c.keys.election())
	cctx, cancel := context.WithCancel(c.ctx)
	go func() {
		select {
		case <-sess.Done():
		case <-cctx.Done():
		}
		cancel()
	}()
	err = e.Campaign(cctx, c.name)
	cancel()
	if err != nil {
		return fmt.Errorf("etcdcoord: campaign: %w", err)
	}
	f := fence{key: e.Key(), rev: e.Rev()}
	// Campaign also returns when the session died while it waited: check
	// that the key is still ours.
	gctx, gcancel := context.WithTimeout(c.ctx, requestTimeout)
	resp, err := c.cli.Get(gctx, f.key)
	gcancel()
	if err != nil {
		return fmt.Errorf("etcdcoord: checking the election key: %w", err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != f.rev {
		return fmt.Errorf("etcdcoord: elected, but the session ended meanwhile: %w", ErrNotLeader)
	}
	return c.lead(sess, e, f)
}

// lead runs one term: takeover, then the driver until the session is
// lost, a write is fenced off, or Close.
func (c *Coordinator) lead(sess *concurrency.Session, e *concurrency.Election, f fence) error {
	elected := time.Now()
	t := &term{
		c:     c,
		fence: f,
		out:   newOutbox(c.cli, f, c.log),
		stale: map[coordinator.CheckpointID]string{},
		known: map[coordinator.ParticipantID]int64{},
		owner: fmt.Sprintf("%s/%x", c.name, int64(sess.Lease())),
	}
	tctx, tcancel := context.WithCancel(context.Background())
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		t.out.run(tctx)
	}()
	defer func() {
		tcancel()
		t.wg.Wait()
	}()
	c.log.Info("elected leader", "lease", fmt.Sprintf("%x", int64(sess.Lease())), "ttl", c.ttl)
	// The takeover stops if Close is called or the lease ends meanwhile.
	kctx, kcancel := context.WithCancel(c.ctx)
	go func() {
		select {
		case <-sess.Done():
			kcancel()
		case <-kctx.Done():
		}
	}()
	err := t.takeover(kctx, tctx)
	kcancel()
	if err != nil {
		t.end(false)
		return fmt.Errorf("etcdcoord: takeover: %w", err)
	}
	c.log.Info("leading", "firstID", t.base, "takeover", time.Since(elected), "abortedFromPreviousLeader", len(t.stale))
	c.mu.Lock()
	c.term = t
	c.terms++
	close(c.leading)
	c.mu.Unlock()

	var reason error
	select {
	case <-sess.Done():
		reason = fmt.Errorf("etcdcoord: leadership lost: the session's lease ended: %w", ErrNotLeader)
	case <-t.out.lost:
		reason = fmt.Errorf("etcdcoord: leadership lost: a write was fenced off: %w", ErrNotLeader)
	case <-c.ctx.Done():
	}
	c.mu.Lock()
	c.term = nil
	c.leading = make(chan struct{})
	c.mu.Unlock()
	stillLeader := reason == nil
	if !stillLeader {
		// A coordinator that lost the leadership writes nothing more.
		// The checkpoints its driver aborts on the way out were triggered
		// in a term that is over: the next leader aborts them at its
		// takeover, as a failover. (The election key outlives the session
		// by up to a lease period, so the term's outbox could still land
		// those aborts, as a shutdown, while the session is gone — which
		// is how a coordinator whose etcd client closed under it looked to
		// its instances until the outbox stopped here.)
		tcancel()
	}
	t.end(stillLeader)
	c.mu.Lock()
	c.stats, c.retained = t.drv.Stats(), t.drv.Retained()
	c.mu.Unlock()
	if stillLeader {
		rctx, rcancel := context.WithTimeout(context.Background(), requestTimeout)
		if err := e.Resign(rctx); err != nil {
			c.log.Warn("resigning the leadership failed; the lease will expire", "err", err)
		}
		rcancel()
	} else {
		c.log.Warn("no longer the leader", "err", reason)
	}
	return reason
}

// ErrNoLeader reports that no coordinator of the job leads.
var ErrNoLeader = errors.New("etcdcoord: no coordinator leads the job")

// Leader returns the name (Options.Name) of the coordinator that leads job
// now: the campaigner whose election key is the oldest, as
// concurrency.Election.Leader says. It fails with ErrNoLeader if none
// campaigns.
func Leader(ctx context.Context, cli *clientv3.Client, job Job) (string, error) {
	k, err := newKeys(job)
	if err != nil {
		return "", err
	}
	resp, err := cli.Get(ctx, k.election()+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return "", fmt.Errorf("etcdcoord: reading the election: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return "", ErrNoLeader
	}
	return string(resp.Kvs[0].Value), nil
}

// fail records the job's failure (once).
func (c *Coordinator) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failErr == nil {
		c.failErr = err
		close(c.failed)
	}
}

// Leading reports whether this coordinator leads now.
func (c *Coordinator) Leading() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.term != nil
}

// AwaitLeadership waits until this coordinator leads, ctx ends or the
// Coordinator stops.
func (c *Coordinator) AwaitLeadership(ctx context.Context) error {
	c.mu.Lock()
	ch := c.leading
	c.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return ErrClosed
	}
}

// current returns the running term's driver, or fails with ErrNotLeader.
func (c *Coordinator) current() (*driver.Coordinator, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.done:
		return nil, ErrClosed
	default:
	}
	if c.term == nil {
		return nil, fmt.Errorf("%w: %s is a standby", ErrNotLeader, c.name)
	}
	return c.term.drv, nil
}

// TriggerCheckpoint takes a checkpoint now, as
// driver.Coordinator.TriggerCheckpoint; only the leader can (ErrNotLeader
// otherwise). A failover aborts the checkpoint: Triggered.Wait then fails
// with driver.ErrClosed.
func (c *Coordinator) TriggerCheckpoint(ctx context.Context) (*driver.Triggered, error) {
	d, err := c.current()
	if err != nil {
		return nil, err
	}
	return d.TriggerCheckpoint(ctx)
}

// Savepoint takes a savepoint, as driver.Coordinator.Savepoint; only the
// leader can (ErrNotLeader otherwise).
func (c *Coordinator) Savepoint(ctx context.Context, location string) (coordinator.Record, error) {
	d, err := c.current()
	if err != nil {
		return coordinator.Record{}, err
	}
	return d.Savepoint(ctx, location)
}

// Stats returns the checkpoint statistics of the current term, or of the
// last one if this coordinator is a standby now; nil if it never led.
func (c *Coordinator) Stats() *coordinator.Stats {
	if d, err := c.current(); err == nil {
		return d.Stats()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stats == nil {
		return nil
	}
	return c.stats.Clone()
}

// Retained returns the retained completed checkpoints as the current term
// knows them (or the last term, on a standby), oldest first. ReadIndex
// reads them from etcd.
func (c *Coordinator) Retained() []coordinator.Checkpoint {
	if d, err := c.current(); err == nil {
		return d.Retained()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.retained)
}

// Terms returns how many terms this coordinator has led.
func (c *Coordinator) Terms() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.terms
}

// Failed is closed when checkpointing fails the job while this coordinator
// leads (too many consecutive failures, see driver.Coordinator.Failed);
// Err then says why. The coordinator keeps its leadership but triggers no
// more checkpoints: stop the job, restart it from the latest checkpoint,
// and start its coordinators again.
func (c *Coordinator) Failed() <-chan struct{} { return c.failed }

// Err returns the job's failure once Failed is closed, or why the
// Coordinator stopped by itself (its etcd client was closed); nil
// otherwise.
func (c *Coordinator) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return cmp.Or(c.failErr, c.stopErr)
}

// Done is closed when the Coordinator has stopped: after Close, or when
// its etcd client was closed.
func (c *Coordinator) Done() <-chan struct{} { return c.done }

// Close stops the Coordinator. A leader shuts its driver down — pending
// checkpoints are aborted, their participants notified and their files
// deleted — and resigns, so that a standby takes over at once; a standby
// leaves the election. If ctx ends first, Close returns its error and the
// shutdown goes on in the background. Close is idempotent.
func (c *Coordinator) Close(ctx context.Context) error {
	c.cancel()
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// term is one leadership of a Coordinator.
type term struct {
	c     *Coordinator
	fence fence
	out   *outbox
	owner string
	wg    sync.WaitGroup

	drv     *driver.Coordinator
	counter *Counter
	index   *index
	// base is the counter at takeover: ids below it were issued by
	// earlier leaders, ids from it on by this one.
	base coordinator.CheckpointID
	// last is the highest id this term triggered.
	last atomic.Uint64
	// stale maps the checkpoints of earlier leaders that were pending at
	// takeover, and that this term aborted, to their storage names.
	stale map[coordinator.CheckpointID]string

	mu    sync.Mutex
	known map[coordinator.ParticipantID]int64 // participants registered, by the create revision of their registration
}

// takeover starts a term: it adopts the storage's checkpoints if the job
// has no index yet, aborts the checkpoints the previous leader left
// pending, starts the driver (which recovers the retained checkpoints and
// the id counter from etcd and reserves ids), adds the registered
// participants and starts watching registrations and acknowledgements.
// ctx cancels the takeover; tctx is the term's.
func (t *term) takeover(ctx, tctx context.Context) error {
	c := t.c
	t.index = &index{cli: c.cli, key: c.keys.completed(), fence: t.fence}
	seeded, err := t.index.seed(ctx, c.opts.Storage)
	if err != nil {
		return err
	}
	if len(seeded) > 0 {
		c.log.Info("completed-checkpoint index created from the storage's checkpoints", "ids", seeded)
	}
	mresp, err := c.cli.Get(ctx, c.keys.members(), clientv3.WithPrefix())
	if err != nil {
		return err
	}
	iresp, err := c.cli.Get(ctx, c.keys.inboxes(), clientv3.WithPrefix(), clientv3.WithRev(mresp.Header.Revision))
	if err != nil {
		return err
	}
	members := map[coordinator.ParticipantID]*mvccpb.KeyValue{}
	for _, kv := range mresp.Kvs {
		if p, ok := c.keys.parseMember(string(kv.Key)); ok {
			members[p] = kv
		}
	}
	listed, err := t.index.Completed(ctx)
	if err != nil {
		return err
	}
	var finished []coordinator.CheckpointID
	wiped := map[coordinator.ParticipantID]bool{}
	for _, kv := range iresp.Kvs {
		p, kind, id, ok := c.keys.parseInbox(string(kv.Key))
		switch {
		case !ok:
			continue
		case members[p] == nil:
			if !wiped[p] {
				wiped[p] = true
				t.out.delPrefix(c.keys.inbox(p))
			}
			continue
		case kind != 't':
			continue // a notification the participant has yet to read
		}
		var m triggerMsg
		if err := decode(kv.Value, &m); err != nil {
			c.log.Warn("unreadable trigger deleted", "key", string(kv.Key), "err", err)
			t.out.del(string(kv.Key))
			continue
		}
		t.out.del(string(kv.Key))
		if slices.Contains(listed, id) {
			// The previous leader completed it but died before it could
			// say so.
			t.out.put(c.keys.note(p, id), encode(completedNote(driver.Completion{ID: id})))
			finished = append(finished, id)
			continue
		}
		t.stale[id] = m.Checkpoint
		t.out.put(c.keys.note(p, id), encode(noteMsg{
			V: wireVersion, ID: uint64(id), Savepoint: m.Savepoint,
			Reason:   coordinator.AbortShutdown.String(),
			Cause:    fmt.Sprintf("checkpoint %d was pending when its coordinator lost the leadership; %s took over", id, c.name),
			Failover: true,
		}))
	}
	if err := t.out.flush(ctx); err != nil {
		return err
	}
	if len(t.stale) > 0 {
		c.log.Info("checkpoints of the previous leader aborted", "ids", slices.Sorted(maps.Keys(t.stale)))
	}
	if len(finished) > 0 {
		c.log.Info("completions of the previous leader notified", "ids", slices.Compact(slices.Sorted(slices.Values(finished))))
	}
	t.counter = &Counter{cli: c.cli, key: c.keys.counter(), owner: t.owner, fence: t.fence}
	t.drv, err = driver.Start(ctx, driver.Options{
		Config:      c.opts.Config,
		Storage:     c.opts.Storage,
		Logger:      c.log,
		IOTimeout:   c.opts.IOTimeout,
		SkipCleanup: c.opts.SkipCleanup,
		Counter:     t.counter,
		Completed:   t.index,
		Expected:    c.opts.Expected,
		// Each term records into the same instruments.
		MeterProvider: c.opts.MeterProvider,
	})
	if err != nil {
		return err
	}
	t.base = t.counter.firstRead()
	if c.opts.Expected != nil {
		c.log.Info("job graph: checkpoints are declined as not ready for the expected instances not registered", "expected", c.opts.Expected)
	}
	for _, p := range slices.Sorted(maps.Keys(members)) {
		t.addMember(p, members[p])
	}
	t.wg.Add(3)
	go func() {
		defer t.wg.Done()
		t.watch(tctx, c.keys.members(), mresp.Header.Revision+1, t.resyncMembers, t.memberEvent)
	}()
	go func() {
		defer t.wg.Done()
		t.watch(tctx, c.keys.acks(), 0, t.resyncAcks, t.ackEvent)
	}()
	go func() {
		defer t.wg.Done()
		select {
		case <-t.drv.Failed():
			c.fail(t.drv.Err())
		case <-tctx.Done():
		}
	}()
	return nil
}

// end ends the term: the driver shuts down (aborting what is pending), and
// a leader that still is one writes the notifications that causes.
func (t *term) end(stillLeader bool) {
	if t.drv == nil {
		return
	}
	timeout := cmp.Or(t.c.opts.IOTimeout, driver.DefaultIOTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := t.drv.Close(ctx); err != nil {
		t.c.log.Warn("driver shutdown incomplete", "err", err)
	}
	if stillLeader {
		fctx, fcancel := context.WithTimeout(context.Background(), requestTimeout)
		if err := t.out.flush(fctx); err != nil {
			t.c.log.Warn("notifications of the shutdown not written", "err", err)
		}
		fcancel()
	}
}

// watch follows the keys under prefix from revision rev (0: resync
// first) and hands each put or deletion to event, in order. A watch that
// breaks is resumed at the revision after the last event seen, so nothing
// is missed; if etcd compacted that revision away, resync reads the
// current keys and returns the revision to go on from.
func (t *term) watch(ctx context.Context, prefix string, rev int64, resync func(context.Context) (int64, error), event func(*clientv3.Event)) {
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		if rev == 0 {
			r, err := resync(ctx)
			if err != nil {
				if ctx.Err() == nil {
					t.c.log.Warn("reading keys failed; retrying", "prefix", prefix, "err", err)
				}
				sleep(ctx, &backoff)
				continue
			}
			rev = r
		}
		wch := t.c.cli.Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(rev))
		for wr := range wch {
			if wr.CompactRevision != 0 {
				rev = 0
				break
			}
			if err := wr.Err(); err != nil {
				t.c.log.Warn("watch failed; resuming", "prefix", prefix, "err", err)
				break
			}
			for _, ev := range wr.Events {
				event(ev)
				rev = ev.Kv.ModRevision + 1
			}
			backoff = 50 * time.Millisecond
		}
		sleep(ctx, &backoff)
	}
}

func sleep(ctx context.Context, backoff *time.Duration) {
	select {
	case <-time.After(*backoff):
	case <-ctx.Done():
	}
	*backoff = min(2**backoff, 2*time.Second)
}

// remote is the driver's Participant for an instance in another process:
// its calls become messages in the instance's inbox. It exists while the
// instance is registered; with Options.Expected, the driver declines on
// behalf of an expected instance while it has none.
type remote struct {
	t  *term
	id coordinator.ParticipantID
	op string
}

func (r *remote) ID() coordinator.ParticipantID { return r.id }
func (r *remote) Operator() string              { return r.op }

func (r *remote) Trigger(tr driver.Trigger) {
	for {
		last := r.t.last.Load()
		if uint64(tr.ID) <= last || r.t.last.CompareAndSwap(last, uint64(tr.ID)) {
			break
		}
	}
	r.t.out.put(r.t.c.keys.trigger(r.id, tr.ID), encode(newTriggerMsg(tr)))
}

func (r *remote) NotifyComplete(n driver.Completion) {
	r.t.out.put(r.t.c.keys.note(r.id, n.ID), encode(completedNote(n)))
	r.t.out.del(r.t.c.keys.trigger(r.id, n.ID))
}

func (r *remote) NotifyAborted(id coordinator.CheckpointID, err error) {
	r.t.out.put(r.t.c.keys.note(r.id, id), encode(abortedNote(id, err)))
	r.t.out.del(r.t.c.keys.trigger(r.id, id))
}

// addMember adds the participant registered as kv. A new registration
// under an id already known is a restarted instance: what was pending on
// the old one aborts first.
func (t *term) addMember(p coordinator.ParticipantID, kv *mvccpb.KeyValue) {
	var m memberMsg
	err := decode(kv.Value, &m)
	if err == nil {
		err = m.check(p)
	}
	if err != nil {
		t.c.log.Error("unreadable registration ignored", "participant", p, "err", err)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if rev, ok := t.known[p]; ok {
		if rev == kv.CreateRevision {
			return
		}
		t.removeLocked(p)
	}
	if err := t.drv.AddParticipant(&remote{t: t, id: p, op: m.Operator}); err != nil {
		if !errors.Is(err, driver.ErrClosed) {
			t.c.log.Error("registration refused: the instance takes part in no checkpoint",
				"participant", p, "operator", m.Operator, "incarnation", m.Incarnation, "expected", t.c.opts.Expected, "err", err)
		}
		return
	}
	t.known[p] = kv.CreateRevision
	t.c.log.Info("participant joined", "participant", p, "operator", m.Operator, "incarnation", m.Incarnation)
}

// removeLocked removes participant p and wipes its inbox; t.mu is held.
// The checkpoints pending on it abort; an expected participant stays in
// every checkpoint, absent, until it registers again.
func (t *term) removeLocked(p coordinator.ParticipantID) {
	if _, ok := t.known[p]; !ok {
		return
	}
	delete(t.known, p)
	if err := t.drv.RemoveParticipant(p); err != nil && !errors.Is(err, driver.ErrClosed) {
		t.c.log.Warn("participant not removed", "participant", p, "err", err)
	}
	t.out.delPrefix(t.c.keys.inbox(p))
	if t.c.opts.Expected != nil {
		t.c.log.Warn("expected participant left: checkpoints are declined until it registers again", "participant", p)
		return
	}
	t.c.log.Info("participant left", "participant", p)
}

func (t *term) memberEvent(ev *clientv3.Event) {
	p, ok := t.c.keys.parseMember(string(ev.Kv.Key))
	if !ok {
		return
	}
	if ev.Type == clientv3.EventTypeDelete {
		t.mu.Lock()
		t.removeLocked(p)
		t.mu.Unlock()
		return
	}
	t.addMember(p, ev.Kv)
}

// resyncMembers makes the participants those registered now.
func (t *term) resyncMembers(ctx context.Context) (int64, error) {
	resp, err := t.c.cli.Get(ctx, t.c.keys.members(), clientv3.WithPrefix())
	if err != nil {
		return 0, err
	}
	now := map[coordinator.ParticipantID]*mvccpb.KeyValue{}
	for _, kv := range resp.Kvs {
		if p, ok := t.c.keys.parseMember(string(kv.Key)); ok {
			now[p] = kv
		}
	}
	t.mu.Lock()
	for p := range t.known {
		if now[p] == nil {
			t.removeLocked(p)
		}
	}
	t.mu.Unlock()
	for _, p := range slices.Sorted(maps.Keys(now)) {
		t.addMember(p, now[p])
	}
	return resp.Header.Revision + 1, nil
}

// resyncAcks handles every answer waiting in etcd.
func (t *term) resyncAcks(ctx context.Context) (int64, error) {
	resp, err := t.c.cli.Get(ctx, t.c.keys.acks(), clientv3.WithPrefix())
	if err != nil {
		return 0, err
	}
	for _, kv := range resp.Kvs {
		t.ackEvent(&clientv3.Event{Type: clientv3.EventTypePut, Kv: kv})
	}
	return resp.Header.Revision + 1, nil
}

// ackEvent handles a participant's answer to a trigger, and deletes it.
func (t *term) ackEvent(ev *clientv3.Event) {
	if ev.Type != clientv3.EventTypePut {
		return
	}
	key := string(ev.Kv.Key)
	id, p, ok := t.c.keys.parseAck(key)
	var m ackMsg
	var err error
	if !ok {
		err = fmt.Errorf("%w: key %q", errBadMessage, key)
	} else if err = decode(ev.Kv.Value, &m); err == nil {
		err = m.check(id, p)
	}
	t.out.del(key)
	if err != nil {
		t.c.log.Warn("unreadable answer to a trigger deleted", "key", key, "err", err)
		return
	}
	switch {
	case id < t.base:
		if name, ok := t.stale[id]; ok {
			t.deleteStale(id, name)
			return
		}
		// A late answer to an earlier leader's checkpoint that ended: the
		// driver discards its file unless a retained checkpoint holds it.
	case uint64(id) > t.last.Load():
		// Not this term's checkpoint: another leader's (this one may be
		// deposed without knowing yet). Its files are not ours to delete.
		t.c.log.Debug("answer to a checkpoint this leader did not trigger ignored", "id", id, "participant", p)
		return
	}
	tr := driver.Trigger{ID: id, Options: coordinator.Options{Savepoint: m.Savepoint}, Storage: t.c.opts.Storage, Checkpoint: m.Checkpoint}
	if m.Decline != nil {
		err = t.drv.Decline(tr, p, m.Decline.cause(p))
	} else {
		res, rerr := m.Snapshot.result()
		if rerr != nil {
			err = t.drv.Decline(tr, p, fmt.Errorf("etcdcoord: invalid acknowledgement: %w", rerr))
		} else {
			err = t.drv.Ack(tr, p, driver.Acknowledgement{Result: res, Finished: m.Finished})
		}
	}
	if err != nil && !errors.Is(err, driver.ErrClosed) {
		t.c.log.Warn("answer to a trigger not delivered to the driver", "id", id, "participant", p, "err", err)
	}
}

// deleteStale deletes an earlier leader's aborted checkpoint, with what
// its participants still wrote after the takeover — unless it was
// committed (completed, or a savepoint the user owns).
func (t *term) deleteStale(id coordinator.CheckpointID, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(t.c.opts.IOTimeout, driver.DefaultIOTimeout))
	defer cancel()
	s := t.c.opts.Storage
	switch _, err := s.Stat(ctx, name, checkpoint.MetadataName); {
	case err == nil:
		return
	case !errors.Is(err, checkpoint.ErrNotFound):
		t.c.log.Warn("aborted checkpoint of the previous leader not deleted", "id", id, "name", name, "err", err)
		return
	}
	if err := checkpoint.Delete(ctx, s, name); err != nil {
		t.c.log.Warn("aborted checkpoint of the previous leader not deleted", "id", id, "name", name, "err", err)
	}
}
