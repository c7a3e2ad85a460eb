package etcdcoord

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/coordinator"
	"github.com/stategen/stategen/runtime/coordinator/driver"
)

// ErrNoIndex reports a job whose completed-checkpoint index was never
// written: no coordinator of the job ever led.
var ErrNoIndex = errors.New("etcdcoord: the job has no completed-checkpoint index in etcd")

// Completed is one entry of a job's completed-checkpoint index.
type Completed struct {
	// ID is the checkpoint's id.
	ID coordinator.CheckpointID
	// Name is the checkpoint's name in the checkpoint storage, where its
	// metadata is committed: checkpoint.CheckpointName(ID).
	Name string
}

// ReadIndex returns the completed checkpoints of job, oldest first: those
// its leader completed and retains. It fails with ErrNoIndex if no
// coordinator of the job ever led.
func ReadIndex(ctx context.Context, cli *clientv3.Client, job Job) ([]Completed, error) {
	k, err := newKeys(job)
	if err != nil {
		return nil, err
	}
	resp, err := cli.Get(ctx, k.completed())
	if err != nil {
		return nil, fmt.Errorf("etcdcoord: reading the completed-checkpoint index: %w", err)
	}
	m, err := parseIndex(k.completed(), resp)
	if err != nil {
		return nil, err
	}
	out := make([]Completed, len(m.Checkpoints))
	for i, e := range m.Checkpoints {
		out[i] = Completed{ID: coordinator.CheckpointID(e.ID), Name: e.Name}
	}
	return out, nil
}

func parseIndex(key string, resp *clientv3.GetResponse) (*indexMsg, error) {
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("%w (%s)", ErrNoIndex, key)
	}
	var m indexMsg
	if err := decode(resp.Kvs[0].Value, &m); err != nil {
		return nil, fmt.Errorf("etcdcoord: completed-checkpoint index %s: %w", key, err)
	}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("etcdcoord: completed-checkpoint index %s: %w", key, err)
	}
	return &m, nil
}

// Latest returns the newest completed checkpoint of job — the one a
// restarted job restores — by its index in etcd. Unlike driver.Latest, it
// never picks a checkpoint that a deposed coordinator committed to the
// storage but could not list. It fails with driver.ErrNoCheckpoint if the
// job has no completed checkpoint (or no index yet).
func Latest(ctx context.Context, cli *clientv3.Client, job Job) (Completed, error) {
	cps, err := ReadIndex(ctx, cli, job)
	switch {
	case errors.Is(err, ErrNoIndex):
		return Completed{}, fmt.Errorf("%w: %w", driver.ErrNoCheckpoint, err)
	case err != nil:
		return Completed{}, err
	case len(cps) == 0:
		return Completed{}, driver.ErrNoCheckpoint
	}
	return cps[len(cps)-1], nil
}

// RestoreLatest is driver.RestoreLatest for a job coordinated through
// etcd: it restores instance index of parallelism instances of operator
// from the newest completed checkpoint of job (see Latest), read from s,
// into store — or, if the job was started from a savepoint
// (driver.StartFrom on s) and none of the index's checkpoints is newer,
// from that savepoint. It fails with driver.ErrNoCheckpoint when there is
// nothing to restore (store is untouched: the job starts empty).
func RestoreLatest(ctx context.Context, cli *clientv3.Client, job Job, s checkpoint.Storage, operator string, index, parallelism int, store runtime.Store, opts *checkpoint.RestoreOptions) (driver.Restored, error) {
	name, savepoint, err := latestOrOrigin(ctx, cli, job, s)
	if err != nil {
		return driver.Restored{}, err
	}
	p, err := driver.PlanRestore(ctx, s, name, operator, parallelism, store.Config().MaxParallelism)
	if err != nil {
		return driver.Restored{}, err
	}
	stats, err := p.Restore(ctx, index, store, opts)
	if err != nil {
		return driver.Restored{}, err
	}
	return driver.Restored{Checkpoint: p.Checkpoint, ID: p.ID, Savepoint: savepoint, OperatorStates: p.Instances[index].OperatorStates, Stats: stats}, nil
}

// latestOrOrigin names what RestoreLatest restores: the newest completed
// checkpoint of job, unless the job started from a savepoint after it.
func latestOrOrigin(ctx context.Context, cli *clientv3.Client, job Job, s checkpoint.Storage) (name string, savepoint bool, err error) {
	latest, err := Latest(ctx, cli, job)
	if err != nil && !errors.Is(err, driver.ErrNoCheckpoint) {
		return "", false, err
	}
	origin, started, oerr := driver.ReadOrigin(ctx, s)
	switch {
	case oerr != nil:
		return "", false, oerr
	case started && (err != nil || latest.ID < origin.Base):
		return origin.Savepoint, true, nil
	case err != nil:
		return "", false, err
	}
	return latest.Name, false, nil
}

// index is a leader's completed-checkpoint index (a
// driver.CompletedStore): one key holding the list of completed
// checkpoints, ascending, each naming its metadata's checkpoint in the
// storage. Every update is a transaction that compares the key's revision
// (so concurrent updates of one leader never lose each other) and the
// leader's fence (so a deposed leader cannot write).
type index struct {
	cli   *clientv3.Client
	key   string
	fence fence

	mu  sync.Mutex
	rev int64 // the key's mod revision when last read or written; 0: unknown
	cur []indexEntry
}

var _ driver.CompletedStore = (*index)(nil)

// seed writes an index listing every committed checkpoint of s if the job
// has none yet: the first leader of a job that used to run without etcd
// adopts its checkpoints instead of deleting them as unlisted.
func (x *index) seed(ctx context.Context, s checkpoint.Storage) (seeded []uint64, err error) {
	resp, err := x.cli.Get(ctx, x.key)
	if err != nil || len(resp.Kvs) > 0 {
		return nil, err
	}
	names, err := checkpoint.List(ctx, s)
	if err != nil {
		return nil, fmt.Errorf("etcdcoord: seeding the completed-checkpoint index from the storage: %w", err)
	}
	m := indexMsg{V: wireVersion, Checkpoints: []indexEntry{}}
	for _, n := range names {
		if id, ok := checkpoint.ParseCheckpointName(n); ok && id > 0 && id < uint64(coordinator.MaxID) {
			m.Checkpoints = append(m.Checkpoints, indexEntry{ID: id, Name: n})
			seeded = append(seeded, id)
		}
	}
	slices.SortFunc(m.Checkpoints, func(a, b indexEntry) int { return cmp.Compare(a.ID, b.ID) })
	_, err = x.fence.txn(ctx, x.cli,
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(x.key), "=", 0)},
		[]clientv3.Op{clientv3.OpPut(x.key, encode(m))})
	if errors.Is(err, errCompare) {
		return nil, nil // written meanwhile
	}
	return seeded, err
}

// Completed implements driver.CompletedStore.
func (x *index) Completed(ctx context.Context) ([]coordinator.CheckpointID, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.load(ctx); err != nil {
		return nil, err
	}
	ids := make([]coordinator.CheckpointID, len(x.cur))
	for i, e := range x.cur {
		ids[i] = coordinator.CheckpointID(e.ID)
	}
	return ids, nil
}

func (x *index) load(ctx context.Context) error {
	resp, err := x.cli.Get(ctx, x.key)
	if err != nil {
		return fmt.Errorf("etcdcoord: reading the completed-checkpoint index: %w", err)
	}
	return x.take(resp)
}

func (x *index) take(resp *clientv3.GetResponse) error {
	m, err := parseIndex(x.key, resp)
	if err != nil {
		return err
	}
	x.rev, x.cur = resp.Kvs[0].ModRevision, m.Checkpoints
	return nil
}

// Add implements driver.CompletedStore. An error whose outcome cannot be
// settled by reading the index back wraps coordinator.ErrOutcomeUnknown.
func (x *index) Add(ctx context.Context, id coordinator.CheckpointID) error {
	err := x.update(ctx, func(cur []indexEntry) []indexEntry {
		i, found := slices.BinarySearchFunc(cur, uint64(id), func(e indexEntry, id uint64) int { return cmp.Compare(e.ID, id) })
		if found {
			return nil
		}
		return slices.Insert(slices.Clone(cur), i, indexEntry{ID: uint64(id), Name: checkpoint.CheckpointName(uint64(id))})
	}, func(cur []indexEntry) bool {
		return slices.ContainsFunc(cur, func(e indexEntry) bool { return e.ID == uint64(id) })
	})
	if err != nil {
		return fmt.Errorf("etcdcoord: listing checkpoint %d as completed: %w", id, err)
	}
	return nil
}

// Remove implements driver.CompletedStore.
func (x *index) Remove(ctx context.Context, id coordinator.CheckpointID) error {
	err := x.update(ctx, func(cur []indexEntry) []indexEntry {
		i := slices.IndexFunc(cur, func(e indexEntry) bool { return e.ID == uint64(id) })
		if i < 0 {
			return nil
		}
		return slices.Delete(slices.Clone(cur), i, i+1)
	}, func(cur []indexEntry) bool {
		return !slices.ContainsFunc(cur, func(e indexEntry) bool { return e.ID == uint64(id) })
	})
	if err != nil {
		return fmt.Errorf("etcdcoord: dropping checkpoint %d from the completed index: %w", id, err)
	}
	return nil
}

// update applies change to the index — nil means nothing to change — with
// a compare-and-swap, retried when a concurrent update of this leader won;
// done reports whether an index already holds the change, to settle an
// unknown outcome.
func (x *index) update(ctx context.Context, change func([]indexEntry) []indexEntry, done func([]indexEntry) bool) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.rev == 0 {
		if err := x.load(ctx); err != nil {
			return err
		}
	}
	for attempt := 0; ; attempt++ {
		next := change(x.cur)
		if next == nil {
			return nil
		}
		m := indexMsg{V: wireVersion, Checkpoints: next}
		resp, err := x.fence.txn(ctx, x.cli,
			[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(x.key), "=", x.rev)},
			[]clientv3.Op{clientv3.OpPut(x.key, encode(m))},
			clientv3.OpGet(x.key))
		switch {
		case err == nil:
			x.rev, x.cur = resp.Header.Revision, next
			return nil
		case errors.Is(err, ErrNotLeader):
			return err
		case errors.Is(err, errCompare) && attempt < 3:
			if err := x.take(x.fence.elseResponses(resp)[0]); err != nil {
				return err
			}
			continue
		case errors.Is(err, errCompare):
			return fmt.Errorf("%w: the index keeps changing under this leader", err)
		}
		// The outcome is unknown: read the index back.
		x.rev = 0
		if lerr := x.load(ctx); lerr != nil {
			return fmt.Errorf("%w: %w (and reading the index back: %v)", coordinator.ErrOutcomeUnknown, err, lerr)
		}
		if done(x.cur) {
			return nil
		}
		return err
	}
}
