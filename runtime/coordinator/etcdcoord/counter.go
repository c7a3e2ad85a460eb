package etcdcoord

import (
	"context"
	"errors"
	"fmt"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stategen/stategen/runtime/coordinator"
	"github.com/stategen/stategen/runtime/coordinator/driver"
)

// ErrCounterConflict reports a reservation of checkpoint ids that lost a
// race: the counter moved since this Counter last read or wrote it, so
// another coordinator reserved ids meanwhile.
var ErrCounterConflict = errors.New("etcdcoord: the checkpoint-id counter was moved by another coordinator")

// Counter is a job's checkpoint-id counter in etcd (a driver.IDCounter):
// one key holding the high-water mark below which ids may have been
// issued, and the coordinator that wrote it.
//
// A reservation is a compare-and-swap from the revision this Counter last
// read or wrote: it claims the ids between the old mark and the new one
// for this Counter alone. Two coordinators that race therefore never
// reserve the same id — one of them fails with ErrCounterConflict — and a
// coordinator that takes over reads the mark and starts above every id
// its predecessors may have issued. A reservation whose outcome is unknown
// (a timeout) is settled by reading the key back: the owner recognizes its
// own write. A leader's Counter is also fenced by its election key, so
// that it fails with ErrNotLeader once deposed.
type Counter struct {
	cli   *clientv3.Client
	key   string
	owner string
	fence fence

	mu    sync.Mutex
	read  bool
	rev   int64                    // the key's mod revision when last read or written; 0: absent
	limit coordinator.CheckpointID // its limit then
	wrote bool                     // ... which this Counter wrote
	first coordinator.CheckpointID // the limit the first Read returned
}

var _ driver.IDCounter = (*Counter)(nil)

// NewCounter returns the checkpoint-id counter of job, for a coordinator
// named owner (unique among the job's coordinators). Coordinators started
// with StartCoordinator make their own, fenced by their election key;
// this one is not fenced.
func NewCounter(cli *clientv3.Client, job Job, owner string) (*Counter, error) {
	k, err := newKeys(job)
	if err != nil {
		return nil, err
	}
	if owner == "" {
		return nil, errors.New("etcdcoord: NewCounter: the owner is required")
	}
	return &Counter{cli: cli, key: k.counter(), owner: owner}, nil
}

// Read returns the counter, zero if it was never written, and makes it the
// value the next Reserve swaps from.
func (c *Counter) Read(ctx context.Context) (coordinator.CheckpointID, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	resp, err := c.cli.Get(ctx, c.key)
	if err != nil {
		return 0, fmt.Errorf("etcdcoord: reading the checkpoint-id counter: %w", err)
	}
	if err := c.load(resp); err != nil {
		return 0, err
	}
	if !c.read {
		c.read, c.first = true, c.limit
	}
	return c.limit, nil
}

// load takes the counter from a Get of its key.
func (c *Counter) load(resp *clientv3.GetResponse) error {
	c.wrote = false
	if len(resp.Kvs) == 0 {
		c.rev, c.limit = 0, 0
		return nil
	}
	var m counterMsg
	if err := decode(resp.Kvs[0].Value, &m); err != nil {
		return fmt.Errorf("etcdcoord: checkpoint-id counter %s: %w", c.key, err)
	}
	if m.Limit >= uint64(coordinator.MaxID) {
		return fmt.Errorf("etcdcoord: checkpoint-id counter %s: %w: limit %d beyond the id range", c.key, errBadMessage, m.Limit)
	}
	c.rev, c.limit = resp.Kvs[0].ModRevision, coordinator.CheckpointID(m.Limit)
	return nil
}

// Reserve raises the counter to limit if nobody moved it since this
// Counter's last Read or Reserve; it fails with ErrCounterConflict if
// somebody did, and with ErrNotLeader if the Counter is a deposed leader's.
// Reserving the limit this Counter holds already succeeds.
func (c *Counter) Reserve(ctx context.Context, limit coordinator.CheckpointID) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !c.read:
		return errors.New("etcdcoord: Counter.Reserve before Read")
	case limit == c.limit && c.wrote:
		return nil // a retry of a reservation that succeeded
	case limit <= c.limit || limit >= coordinator.MaxID:
		return fmt.Errorf("etcdcoord: reserving checkpoint ids below %d: the counter is at %d", limit, c.limit)
	}
	val := encode(counterMsg{V: wireVersion, Limit: uint64(limit), Owner: c.owner})
	resp, err := c.fence.txn(ctx, c.cli,
		[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(c.key), "=", c.rev)},
		[]clientv3.Op{clientv3.OpPut(c.key, val)},
		clientv3.OpGet(c.key))
	switch {
	case err == nil:
		c.rev, c.limit, c.wrote = resp.Header.Revision, limit, true
		return nil
	case errors.Is(err, ErrNotLeader):
		return fmt.Errorf("etcdcoord: reserving checkpoint ids below %d: %w", limit, err)
	case errors.Is(err, errCompare):
		return c.conflict(c.fence.elseResponses(resp)[0], limit)
	}
	// The outcome is unknown: read it back.
	get, gerr := c.cli.Get(ctx, c.key)
	if gerr != nil {
		return fmt.Errorf("etcdcoord: reserving checkpoint ids below %d: %w (and reading the counter back: %v)", limit, err, gerr)
	}
	if len(get.Kvs) > 0 && get.Kvs[0].ModRevision == c.rev {
		return fmt.Errorf("etcdcoord: reserving checkpoint ids below %d: %w", limit, err)
	}
	if m, ok := c.mine(get); ok && m.Limit == uint64(limit) {
		c.rev, c.limit, c.wrote = get.Kvs[0].ModRevision, limit, true
		return nil
	}
	return c.conflict(get, limit)
}

// mine decodes the counter of resp if this Counter's owner wrote it.
func (c *Counter) mine(resp *clientv3.GetResponse) (counterMsg, bool) {
	var m counterMsg
	if len(resp.Kvs) == 0 || decode(resp.Kvs[0].Value, &m) != nil || m.Owner != c.owner {
		return m, false
	}
	return m, true
}

func (c *Counter) conflict(resp *clientv3.GetResponse, limit coordinator.CheckpointID) error {
	var m counterMsg
	if len(resp.Kvs) > 0 {
		_ = decode(resp.Kvs[0].Value, &m)
	}
	return fmt.Errorf("%w: reserving ids below %d from %d, found %d reserved by %q", ErrCounterConflict, limit, c.limit, m.Limit, m.Owner)
}

// firstRead returns the value the first Read returned: the ids below it
// were issued before this Counter's coordinator started.
func (c *Counter) firstRead() coordinator.CheckpointID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.first
}
