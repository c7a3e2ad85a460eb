package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/coordinator/driver"
)

// resume runs the job the way a restarted production job runs, with no
// reference run and no planned crash: it restores the latest completed
// checkpoint of cfg.Dir at parallelism p — or starts empty if the directory
// holds none — replays the stream from the smallest offset a key group
// needs, skipping what the restored state already reflects, and processes
// the rest of the stream, [.., cfg.Events), with a checkpoint every
// cfg.Interval, until the stream ends or ctx is done.
//
// The process running resume may be killed at any instant; calling resume
// again on the same directory, at any parallelism, continues exactly once
// from the newest checkpoint that completed. The crash test does that with
// SIGKILL in a loop. ready, if not nil, is called once the restore is done
// and before the job starts, with the name of the checkpoint restored (""
// for an empty start).
//
// resume returns the instances' stores, which the caller must close, and
// the phase it ran; when ctx is done first, the error is ctx's, and the
// stores reflect what the instances handled until then.
func resume(ctx context.Context, cfg Config, p int, ready func(restored string)) ([]runtime.Store, Phase, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, Phase{}, err
	}
	if cfg.Dir == "" {
		return nil, Phase{}, &ConfigError{"dir", "resuming needs the checkpoint directory of the job"}
	}
	if p < 1 || p > cfg.MaxParallelism {
		return nil, Phase{}, &ConfigError{"p-after", fmt.Sprintf("parallelism %d is not in [1, %d]", p, cfg.MaxParallelism)}
	}
	newStore := cfg.storeMaker()
	storage, err := checkpoint.NewDir(cfg.Dir)
	if err != nil {
		return nil, Phase{}, err
	}
	scratch, err := os.MkdirTemp("", "clickstream-stores-")
	if err != nil {
		return nil, Phase{}, err
	}
	defer os.RemoveAll(scratch)
	r := &runner{cfg: cfg, newStore: newStore, storage: storage, scratch: scratch,
		stream: Stream{Seed: cfg.Seed, Users: cfg.Users, Len: cfg.Events}}

	// One plan for every instance, so that all of them restore the same
	// checkpoint.
	var restore func(i int, s runtime.Store) ([][]byte, error)
	restored := ""
	plan, err := driver.PlanLatest(ctx, storage, Operator, p, cfg.MaxParallelism)
	switch {
	case errors.Is(err, driver.ErrNoCheckpoint):
	case err != nil:
		return nil, Phase{}, err
	default:
		restored = plan.Checkpoint
		restore = func(i int, s runtime.Store) ([][]byte, error) {
			if _, err := plan.Restore(ctx, i, s, nil); err != nil {
				return nil, err
			}
			return plan.Instances[i].OperatorStates, nil
		}
	}
	ops, err := r.operators(p, restore)
	if err != nil {
		return nil, Phase{}, fmt.Errorf("restore of %s at parallelism %d: %w", restored, p, err)
	}
	from := cfg.Events
	for _, op := range ops {
		for _, t := range op.th {
			from = min(from, t+1)
		}
	}
	if ready != nil {
		ready(restored)
	}
	ph := Phase{Parallelism: p, From: from, To: cfg.Events}
	err = r.runJob(ctx, ops, &ph, false)
	for _, op := range ops {
		ph.Skipped += op.skipped
	}
	return stores(ops), ph, err
}
