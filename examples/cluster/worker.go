package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/examples/clickstream/pipeline"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/coordinator"
	"github.com/stategen/stategen/runtime/coordinator/driver"
	"github.com/stategen/stategen/runtime/coordinator/etcdcoord"
	"github.com/stategen/stategen/runtime/coordinator/metrics"
)

// workerConfig is what a worker needs besides the common flags.
type workerConfig struct {
	index, parallelism, maxParallelism int
	stream                             pipeline.Stream
	rate                               float64
	out                                string
	finalWait                          time.Duration
	declineEvery                       int
}

// runWorker is "cluster worker".
func runWorker(ctx context.Context, args []string, stderr io.Writer) int {
	var c common
	var w workerConfig
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.register(fs)
	fs.IntVar(&w.index, "index", -1, "this worker's operator instance, in [0, parallelism)")
	fs.IntVar(&w.parallelism, "parallelism", 0, "the job's parallelism: how many workers run")
	fs.IntVar(&w.maxParallelism, "max-parallelism", runtime.DefaultMaxParallelism, "number of key groups (fixed for the job's lifetime)")
	fs.Int64Var(&w.stream.Len, "events", pipeline.DefaultEvents, "number of events in the stream")
	fs.Uint64Var(&w.stream.Seed, "seed", pipeline.DefaultSeed, "seed of the stream (not 0)")
	fs.IntVar(&w.stream.Users, "users", pipeline.DefaultUsers, "number of distinct users")
	fs.Float64Var(&w.rate, "rate", 0, "stream offsets read per second (0: unlimited)")
	fs.StringVar(&w.out, "out", "", "file to write the final state dump to (required)")
	fs.DurationVar(&w.finalWait, "final-wait", time.Minute, "at the end of the stream, how long to wait for the job's final checkpoint (0: do not wait)")
	fs.IntVar(&w.declineEvery, "decline-every", 0, "decline every Nth checkpoint trigger, a failure that shows in the metrics (0: never)")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	bad := c.check()
	switch {
	case bad != nil:
	case w.parallelism < 1:
		bad = fmt.Errorf("-parallelism: %d is not positive", w.parallelism)
	case runtime.ValidateMaxParallelism(w.maxParallelism) != nil:
		bad = fmt.Errorf("-max-parallelism: %w", runtime.ValidateMaxParallelism(w.maxParallelism))
	case w.parallelism > w.maxParallelism:
		bad = fmt.Errorf("-parallelism: %d is more than -max-parallelism %d", w.parallelism, w.maxParallelism)
	case w.index < 0 || w.index >= w.parallelism:
		bad = fmt.Errorf("-index: %d is not in [0, %d)", w.index, w.parallelism)
	case w.stream.Len < 1:
		bad = fmt.Errorf("-events: %d is not positive", w.stream.Len)
	case w.stream.Seed == 0:
		bad = errors.New("-seed: 0 is not a valid seed")
	case w.stream.Users < 1:
		bad = fmt.Errorf("-users: %d is not positive", w.stream.Users)
	case w.rate < 0:
		bad = fmt.Errorf("-rate: %v is negative", w.rate)
	case w.out == "":
		bad = errors.New("-out: required (the file of the final state dump)")
	case w.finalWait < 0:
		bad = fmt.Errorf("-final-wait: %v is negative", w.finalWait)
	case w.declineEvery < 0:
		bad = fmt.Errorf("-decline-every: %d is negative", w.declineEvery)
	}
	if bad != nil {
		fmt.Fprintf(stderr, "cluster worker: %v\n", bad)
		return 2
	}
	log := logger(stderr, "worker").With("index", w.index, "parallelism", w.parallelism)
	if err := work(ctx, c, w, log); err != nil {
		log.Error("worker failed", "err", err)
		return 1
	}
	return 0
}

// worker is one operator instance in its own process.
type worker struct {
	workerConfig
	log   *slog.Logger
	kgs   runtime.KeyGroupRange
	store runtime.Store
	st    *pipeline.ClickState
	inst  *etcdcoord.Instance
	// th[g-kgs.Start] is the offset up to which the restored state of key
	// group g reflects the stream (-1 for none); last is the last offset
	// read. Since the worker reads every offset in order, key group g
	// reflects every event of g with an offset <= max(th[g], last).
	th   []int64
	last int64
	// triggers counts the triggers taken, for -decline-every.
	triggers int
}

// work runs a worker to the end of the stream.
func work(ctx context.Context, c common, cfg workerConfig, log *slog.Logger) error {
	ms, err := serveMetrics(c.metricsAddr, log)
	if err != nil {
		return err
	}
	defer ms.Close()
	cli, storage, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	w := &worker{workerConfig: cfg, log: log, last: -1}
	if w.kgs, err = runtime.KeyGroupRangeForOperator(cfg.maxParallelism, cfg.parallelism, cfg.index); err != nil {
		return err
	}
	if w.store, err = cow.New(cow.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: cfg.maxParallelism, KeyGroups: w.kgs}}); err != nil {
		return err
	}
	defer w.store.Close()
	if w.st, err = pipeline.OpenClickState(w.store); err != nil {
		return err
	}
	w.th = make([]int64, w.kgs.Len())
	for i := range w.th {
		w.th[i] = -1
	}
	job := c.jobSpec()
	start := time.Now()
	res, err := etcdcoord.RestoreLatest(ctx, cli, job, storage, pipeline.Operator, cfg.index, cfg.parallelism, w.store, nil)
	switch {
	case errors.Is(err, driver.ErrNoCheckpoint):
		log.Info("no completed checkpoint: starting empty")
	case err != nil:
		return fmt.Errorf("restore: %w", err)
	default:
		all, err := pipeline.Thresholds(res.OperatorStates, cfg.maxParallelism)
		if err != nil {
			return fmt.Errorf("restore %s: %w", res.Checkpoint, err)
		}
		copy(w.th, all[w.kgs.Start:w.kgs.End])
		participant := coordinator.ParticipantID(fmt.Sprintf("%s/%d", pipeline.Operator, cfg.index))
		if err := metrics.RecordRestore(ctx, ms.Provider(), participant, res.Stats); err != nil {
			log.Warn("restore not recorded in the metrics", "err", err)
		}
		log.Info("restored", "checkpoint", res.Checkpoint, "bytes", res.Stats.BytesRead, "took", time.Since(start).Round(time.Millisecond))
	}
	from := cfg.stream.Len
	for _, t := range w.th {
		from = min(from, t+1)
	}
	w.last = from - 1
	if w.inst, err = etcdcoord.Join(ctx, cli, etcdcoord.JoinOptions{
		Job: job,
		// The store's metrics (state sizes, live snapshots) go with the
		// instance; it is closed before the store.
		Instance: driver.InstanceOptions{Operator: pipeline.Operator, Index: cfg.index, Store: w.store, MeterProvider: ms.Provider()},
		Storage:  storage,
		LeaseTTL: c.lease,
		Logger:   log,
	}); err != nil {
		return fmt.Errorf("join: %w", err)
	}
	log.Info("joined", "from", from, "to", cfg.stream.Len)
	if err := w.process(ctx, from); err != nil {
		w.inst.Close()
		return err
	}
	contents, err := pipeline.Dump([]runtime.Store{w.store})
	if err != nil {
		w.inst.Close()
		return fmt.Errorf("dump: %w", err)
	}
	if err := writeDump(w.out, contents); err != nil {
		w.inst.Close()
		return err
	}
	log.Info("done", "entries", len(contents), "out", w.out, "took", time.Since(start).Round(time.Millisecond))
	w.end(ctx)
	w.inst.Close()
	return nil
}

// end finishes the instance at the end of the stream — it answers the
// coordinator's triggers with its final state from now on, so the job
// keeps checkpointing while other workers run — and waits, up to
// finalWait, for the job's final checkpoint: the first one after every
// worker has finished, which holds the whole job's final state.
func (w *worker) end(ctx context.Context) {
	if w.finalWait == 0 {
		return
	}
	if err := w.inst.Finish(w.position().Marshal()); err != nil {
		w.log.Warn("not finished", "err", err)
		return
	}
	w.log.Info("finished: waiting for the final checkpoint", "up to", w.finalWait)
	timeout := time.NewTimer(w.finalWait)
	defer timeout.Stop()
	for {
		select {
		case n := <-w.inst.Notifications():
			w.note(n)
			if n.Final {
				w.log.Info("final checkpoint", "checkpoint", uint64(n.ID))
				return
			}
		case <-timeout.C:
			w.log.Warn("no final checkpoint: not every worker finished in time", "waited", w.finalWait)
			return
		case <-ctx.Done():
			return
		}
	}
}

// process reads the stream [from, Len), keeping the events of its key
// groups, at most rate offsets per second; between two records it takes
// the checkpoints the coordinator triggers.
func (w *worker) process(ctx context.Context, from int64) error {
	start := time.Now()
	var key []byte
	for i := from; i < w.stream.Len; i++ {
		if err := w.between(ctx); err != nil {
			return err
		}
		if w.rate > 0 {
			due := start.Add(time.Duration(float64(i-from) / w.rate * float64(time.Second)))
			for d := time.Until(due); d > 0; d = time.Until(due) {
				if err := w.wait(ctx, d); err != nil {
					return err
				}
			}
		}
		e := w.stream.Event(i)
		key = runtime.AppendStringKey(key[:0], e.User)
		kg := runtime.KeyGroupOfHash(runtime.HashKey(key), w.maxParallelism)
		if w.kgs.Contains(kg) && e.Offset > w.th[kg-w.kgs.Start] {
			if err := pipeline.Process(w.st, e); err != nil {
				return fmt.Errorf("event %d: %w", i, err)
			}
		}
		w.last = i
	}
	return w.between(ctx)
}

// between handles what the coordinator sent, without waiting.
func (w *worker) between(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case t := <-w.inst.Triggers():
			w.snapshot(t)
		case n := <-w.inst.Notifications():
			w.note(n)
		default:
			return nil
		}
	}
}

// wait waits d, handling what the coordinator sends meanwhile.
func (w *worker) wait(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case t := <-w.inst.Triggers():
		w.snapshot(t)
	case n := <-w.inst.Notifications():
		w.note(n)
	case <-timer.C:
	}
	return nil
}

func (w *worker) snapshot(t driver.Trigger) {
	w.triggers++
	if w.declineEvery > 0 && w.triggers%w.declineEvery == 0 {
		err := fmt.Errorf("worker %d: trigger %d declined on purpose (-decline-every %d)", w.index, w.triggers, w.declineEvery)
		if derr := w.inst.Decline(t, err); derr != nil {
			w.log.Warn("decline", "checkpoint", uint64(t.ID), "err", derr)
			return
		}
		w.log.Info("snapshot declined on purpose", "checkpoint", uint64(t.ID))
		return
	}
	// A failed synchronous phase declines the checkpoint; the next one
	// will do.
	if err := w.inst.Snapshot(t, w.position().Marshal()); err != nil {
		w.log.Warn("snapshot declined", "checkpoint", uint64(t.ID), "err", err)
		return
	}
	w.log.Info("snapshot", "checkpoint", uint64(t.ID), "offset", w.last)
}

func (w *worker) note(n driver.Notification) {
	if n.Completed() {
		w.log.Info("checkpoint completed", "checkpoint", uint64(n.ID))
		return
	}
	w.log.Info("checkpoint aborted", "checkpoint", uint64(n.ID), "err", n.Err)
}

// position is the worker's pipeline.Position: runs of key groups with the
// offset max(th[g], last).
func (w *worker) position() pipeline.Position {
	var p pipeline.Position
	for i, t := range w.th {
		off := max(t, w.last)
		g := w.kgs.Start + i
		if n := len(p.Ranges); n > 0 && p.Ranges[n-1].Offset == off {
			p.Ranges[n-1].KeyGroups.End = g + 1
			continue
		}
		p.Ranges = append(p.Ranges, pipeline.PositionRange{KeyGroups: runtime.KeyGroupRange{Start: g, End: g + 1}, Offset: off})
	}
	return p
}
