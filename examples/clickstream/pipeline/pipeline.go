package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/coordinator"
	"github.com/stategen/stategen/runtime/coordinator/driver"
)

// Operator is the operator id of the clickstream job in its checkpoints.
const Operator = "clickstream"

// Defaults of Config.
const (
	DefaultEvents   = 100_000
	DefaultUsers    = 2_000
	DefaultPBefore  = 2
	DefaultPAfter   = 3
	DefaultInterval = 200 * time.Millisecond
	DefaultCrashAt  = 0.6
	DefaultSeed     = 1
)

// crashWait bounds how long the source waits at the crash point for a first
// checkpoint to complete.
const crashWait = 30 * time.Second

// Config configures a run. The zero value of every field means its default;
// the comment of each field names the command-line flag that sets it.
type Config struct {
	// Backend is the name of the backend (-backend; default DefaultBackend).
	Backend string
	// Incremental writes incremental checkpoints (-incremental): every
	// store is behind a checkpoint.Tracker, so that a checkpoint writes
	// the changes since the last completed one.
	Incremental bool
	// LocalRecovery keeps a local copy of each instance's checkpoint files
	// (-local-recovery; checkpoint.LocalCopy, in the scratch directory
	// that stands for the instances' own disks), and the restore reads
	// each new instance's files there when it can, the rest from the
	// checkpoint directory.
	LocalRecovery bool
	// PBefore and PAfter are the parallelism before the crash and after
	// the restore (-p-before, -p-after).
	PBefore, PAfter int
	// Events is the length of the stream (-events).
	Events int64
	// Users is the number of distinct users (-users).
	Users int
	// Interval is the checkpoint interval (-interval).
	Interval time.Duration
	// Dir is the checkpoint directory (-dir). It must not hold committed
	// checkpoints already. Empty means a new temporary directory, removed
	// when Run returns unless Keep is set.
	Dir string
	// Keep keeps a temporary checkpoint directory (-keep).
	Keep bool
	// CrashAt is where the crash happens, as a fraction of the stream in
	// (0, 1) (-crash-at).
	CrashAt float64
	// Seed selects the stream (-seed; default DefaultSeed).
	Seed uint64
	// MaxParallelism is the number of key groups (default
	// runtime.DefaultMaxParallelism).
	MaxParallelism int
	// Progress receives a progress line per second at most during long
	// phases; nil means none.
	Progress io.Writer

	// finishAfter[i], if positive, ends instance i's input after the
	// source has read that many offsets past where the job started: the
	// instance finishes early, as one whose partition of the input ends
	// first (the crash test uses it). Nil means every input ends with the
	// stream.
	finishAfter []int64
}

// ConfigError reports an invalid Config field, named by its flag.
type ConfigError struct {
	Flag   string // the command-line flag, without its dash
	Reason string
}

// Error implements error.
func (e *ConfigError) Error() string { return "-" + e.Flag + ": " + e.Reason }

// withDefaults applies the defaults and validates c.
func (c Config) withDefaults() (Config, error) {
	if c.Backend == "" {
		c.Backend = DefaultBackend
	}
	if c.PBefore == 0 {
		c.PBefore = DefaultPBefore
	}
	if c.PAfter == 0 {
		c.PAfter = DefaultPAfter
	}
	if c.Events == 0 {
		c.Events = DefaultEvents
	}
	if c.Users == 0 {
		c.Users = DefaultUsers
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.CrashAt == 0 {
		c.CrashAt = DefaultCrashAt
	}
	if c.Seed == 0 {
		c.Seed = DefaultSeed
	}
	if c.MaxParallelism == 0 {
		c.MaxParallelism = runtime.DefaultMaxParallelism
	}
	if _, err := lookupBackend(c.Backend); err != nil {
		return c, &ConfigError{"backend", err.Error()}
	}
	if err := runtime.ValidateMaxParallelism(c.MaxParallelism); err != nil {
		return c, &ConfigError{"max-parallelism", err.Error()}
	}
	if c.PBefore < 1 || c.PBefore > c.MaxParallelism {
		return c, &ConfigError{"p-before", fmt.Sprintf("parallelism %d is not in [1, %d]", c.PBefore, c.MaxParallelism)}
	}
	if c.PAfter < 1 || c.PAfter > c.MaxParallelism {
		return c, &ConfigError{"p-after", fmt.Sprintf("parallelism %d is not in [1, %d]", c.PAfter, c.MaxParallelism)}
	}
	if c.Events < 2 {
		return c, &ConfigError{"events", fmt.Sprintf("%d events: need at least 2", c.Events)}
	}
	if c.Users < 1 {
		return c, &ConfigError{"users", fmt.Sprintf("%d users: need at least 1", c.Users)}
	}
	if c.Interval < coordinator.MinInterval || c.Interval > time.Hour {
		return c, &ConfigError{"interval", fmt.Sprintf("%v is not in [%v, 1h]", c.Interval, coordinator.MinInterval)}
	}
	if !(c.CrashAt > 0 && c.CrashAt < 1) {
		return c, &ConfigError{"crash-at", fmt.Sprintf("%v is not a fraction in (0, 1)", c.CrashAt)}
	}
	return c, nil
}

// Phase describes one phase of a run.
type Phase struct {
	// Parallelism is the number of operator instances.
	Parallelism int
	// From and To are the offsets the source read, [From, To).
	From, To int64
	// Skipped counts events replayed but already reflected in restored
	// state (after a restore only).
	Skipped int64
	// Duration is the phase's wall time.
	Duration time.Duration
	// Counts and Summary are the coordinator's statistics (zero for the
	// reference run, which takes no checkpoint).
	Counts  coordinator.Counts
	Summary coordinator.Summary
	// Final names the final checkpoint the phase ended on, once every
	// instance had finished; empty for a phase that crashed.
	Final string
}

// EventsPerSecond is the phase's throughput.
func (p Phase) EventsPerSecond() float64 {
	if p.Duration <= 0 {
		return 0
	}
	return float64(p.To-p.From) / p.Duration.Seconds()
}

// Report is the outcome of a run.
type Report struct {
	// Config is the configuration run, with defaults applied.
	Config Config
	// Dir is the checkpoint directory.
	Dir string
	// Reference is the uninterrupted run: one instance, no checkpoints.
	Reference Phase
	// Before runs until the crash; After from the restore to the end.
	Before, After Phase
	// Restored names the checkpoint restored after the crash.
	Restored string
	// RestoreDuration is the time to restore every new instance.
	RestoreDuration time.Duration
	// RestoreBytes is the number of checkpoint bytes the restore read.
	RestoreBytes int64
	// LocalFiles and RemoteFiles count the data files the restore opened
	// from the instances' local copies and from the checkpoint directory,
	// with LocalRecovery.
	LocalFiles, RemoteFiles int64
	// Keys is the number of state entries compared: values, lists, map
	// entries — (state, key, namespace, user key) tuples.
	Keys int
	// Differences describes the first differences between the final state
	// and the reference; empty when verification succeeded.
	Differences []string
	// DifferenceCount is the number of differing entries.
	DifferenceCount int
	// FinalDifferences and FinalDifferenceCount compare the final
	// checkpoint (After.Final), restored at parallelism 1, with the
	// reference in the same way.
	FinalDifferences     []string
	FinalDifferenceCount int
}

// Verified reports whether the final state, and the final checkpoint the
// job ended on, equal the reference.
func (r *Report) Verified() bool { return r.DifferenceCount == 0 && r.FinalDifferenceCount == 0 }

// Run runs the whole demonstration: a reference run, a run with periodic
// checkpoints that crashes, a restore at another parallelism, a replay to
// the end of the stream and the comparison of the final state with the
// reference. A run whose final state differs from the reference returns a
// Report with differences and a nil error; an error means the run could
// not be carried out.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	newStore := cfg.storeMaker()
	rep = &Report{Config: cfg, Dir: cfg.Dir}
	if rep.Dir == "" {
		if rep.Dir, err = os.MkdirTemp("", "clickstream-checkpoints-"); err != nil {
			return nil, err
		}
		if !cfg.Keep {
			defer os.RemoveAll(rep.Dir)
		}
	}
	storage, err := checkpoint.NewDir(rep.Dir)
	if err != nil {
		return nil, err
	}
	if names, err := checkpoint.List(ctx, storage); err != nil {
		return nil, err
	} else if len(names) > 0 {
		return nil, &ConfigError{"dir", fmt.Sprintf("%s already holds %d checkpoints; choose an empty or new directory", rep.Dir, len(names))}
	}
	scratch, err := os.MkdirTemp("", "clickstream-stores-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	r := &runner{cfg: cfg, newStore: newStore, storage: storage, scratch: scratch,
		stream: Stream{Seed: cfg.Seed, Users: cfg.Users, Len: cfg.Events}}

	ref, err := r.reference(ctx, &rep.Reference)
	if err != nil {
		return nil, fmt.Errorf("reference run: %w", err)
	}
	defer closeAll(ref)

	crash := max(1, min(cfg.Events-1, int64(cfg.CrashAt*float64(cfg.Events))))
	if err := r.beforeCrash(ctx, crash, &rep.Before); err != nil {
		return nil, fmt.Errorf("run before the crash: %w", err)
	}
	final, err := r.afterRestore(ctx, rep)
	if err != nil {
		return nil, fmt.Errorf("run after the restore: %w", err)
	}
	defer closeAll(final)

	r.progress("verifying the final state against the reference run")
	want, err := Dump(ref)
	if err != nil {
		return nil, fmt.Errorf("dump of the reference: %w", err)
	}
	got, err := Dump(final)
	if err != nil {
		return nil, fmt.Errorf("dump of the final state: %w", err)
	}
	rep.Keys = len(want)
	rep.DifferenceCount, rep.Differences = Compare(got, want, 5)

	r.progress("verifying the final checkpoint %s against the reference run", rep.After.Final)
	restored, err := r.restoreFinal(ctx, rep.After.Final)
	if err != nil {
		return nil, fmt.Errorf("restore of the final checkpoint: %w", err)
	}
	defer restored.Close()
	got, err = Dump([]runtime.Store{restored})
	if err != nil {
		return nil, fmt.Errorf("dump of the final checkpoint: %w", err)
	}
	rep.FinalDifferenceCount, rep.FinalDifferences = Compare(got, want, 5)
	return rep, nil
}

// restoreFinal restores the final checkpoint ckpt at parallelism 1, and
// checks that it is final: every old instance's blob says its input
// ended at the end of the stream.
func (r *runner) restoreFinal(ctx context.Context, ckpt string) (runtime.Store, error) {
	if ckpt == "" {
		return nil, errors.New("the job did not end on a final checkpoint")
	}
	plan, err := driver.PlanRestore(ctx, r.storage, ckpt, Operator, 1, r.cfg.MaxParallelism)
	if err != nil {
		return nil, err
	}
	s, err := r.store(runtime.FullRange(r.cfg.MaxParallelism))
	if err != nil {
		return nil, err
	}
	if _, err := plan.Restore(ctx, 0, s, nil); err != nil {
		s.Close()
		return nil, err
	}
	th, err := Thresholds(plan.Instances[0].OperatorStates, r.cfg.MaxParallelism)
	if err == nil {
		for g, t := range th {
			if t != r.cfg.Events-1 {
				err = fmt.Errorf("%s is not final: key group %d is at offset %d, not %d", ckpt, g, t, r.cfg.Events-1)
				break
			}
		}
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// runner holds what the phases of a run share.
type runner struct {
	cfg      Config
	newStore NewStore
	storage  checkpoint.Storage
	scratch  string
	stream   Stream
	stores   atomic.Int64 // numbers scratch directories
	locals   map[int]*checkpoint.LocalCopy
}

// localCopy returns the local copy of instance i's files (LocalRecovery):
// a directory of the scratch directory, which stands for its disk.
func (r *runner) localCopy(i int) (*checkpoint.LocalCopy, error) {
	if l := r.locals[i]; l != nil {
		return l, nil
	}
	dir, err := checkpoint.NewDir(filepath.Join(r.scratch, "local", fmt.Sprint(i)))
	if err != nil {
		return nil, err
	}
	l, err := checkpoint.NewLocalCopy(dir)
	if err != nil {
		return nil, err
	}
	if r.locals == nil {
		r.locals = make(map[int]*checkpoint.LocalCopy)
	}
	r.locals[i] = l
	return l, nil
}

// store makes an empty store for the key groups kgs.
func (r *runner) store(kgs runtime.KeyGroupRange) (runtime.Store, error) {
	dir := filepath.Join(r.scratch, fmt.Sprint(r.stores.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	return r.newStore(runtime.StoreConfig{MaxParallelism: r.cfg.MaxParallelism, KeyGroups: kgs}, dir)
}

// progress prints a progress line, if progress is wanted.
func (r *runner) progress(format string, args ...any) {
	if r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, "  ... "+format+"\n", args...)
	}
}

// ticker calls fn once per second until the returned stop is called.
func (r *runner) ticker(fn func()) (stop func()) {
	if r.cfg.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fn()
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// reference processes the whole stream on one instance, without
// checkpoints.
func (r *runner) reference(ctx context.Context, ph *Phase) ([]runtime.Store, error) {
	s, err := r.store(runtime.FullRange(r.cfg.MaxParallelism))
	if err != nil {
		return nil, err
	}
	st, err := OpenClickState(s)
	if err != nil {
		s.Close()
		return nil, err
	}
	*ph = Phase{Parallelism: 1, From: 0, To: r.cfg.Events}
	var done atomic.Int64
	stop := r.ticker(func() { r.progress("reference run: %d/%d events", done.Load(), r.cfg.Events) })
	defer stop()
	start := time.Now()
	for i := range r.cfg.Events {
		if i%4096 == 0 {
			if err := ctx.Err(); err != nil {
				s.Close()
				return nil, err
			}
			done.Store(i)
		}
		if err := Process(st, r.stream.Event(i)); err != nil {
			s.Close()
			return nil, fmt.Errorf("event %d: %w", i, err)
		}
	}
	ph.Duration = time.Since(start)
	return []runtime.Store{s}, nil
}

// closeAll closes stores.
func closeAll(stores []runtime.Store) {
	for _, s := range stores {
		s.Close()
	}
}

// beforeCrash runs the job at parallelism PBefore from the start of the
// stream with periodic checkpoints, and crashes once the source has read
// offsets [0, crash) and a checkpoint has completed: the instances are
// abandoned — their stores are never closed, the events in their inputs
// are lost — and the coordinator is stopped.
func (r *runner) beforeCrash(ctx context.Context, crash int64, ph *Phase) error {
	p := r.cfg.PBefore
	ops, err := r.operators(p, nil)
	if err != nil {
		return err
	}
	*ph = Phase{Parallelism: p, From: 0, To: crash}
	return r.runJob(ctx, ops, ph, true)
}

// afterRestore restores the latest checkpoint at parallelism PAfter,
// replays the stream from the smallest offset any key group needs, skipping
// what the restored state already reflects, and runs to the end. It
// returns the final stores.
func (r *runner) afterRestore(ctx context.Context, rep *Report) ([]runtime.Store, error) {
	q := r.cfg.PAfter
	r.progress("restoring the latest checkpoint at parallelism %d", q)
	start := time.Now()
	ops, err := r.operators(q, func(i int, s runtime.Store) ([][]byte, error) {
		var opts *checkpoint.RestoreOptions
		if r.cfg.Progress != nil {
			opts = &checkpoint.RestoreOptions{Progress: func(p checkpoint.RestoreProgress) {
				r.progress("instance %d of %d: restored %d of %d entries, %d bytes read, in %v",
					i, q, p.Entries, p.TotalEntries, p.BytesRead, p.Elapsed.Round(time.Millisecond))
			}}
		}
		storage := r.storage
		l := r.locals[i] // the copy of old instance i, on the disk new instance i runs on
		var before checkpoint.LocalCopyStats
		if l != nil {
			storage, before = l.Storage(storage), l.Stats()
		}
		res, err := driver.RestoreLatest(ctx, storage, Operator, i, q, s, opts)
		if err != nil {
			return nil, err
		}
		if l != nil {
			after := l.Stats()
			rep.LocalFiles += after.Hits - before.Hits
			rep.RemoteFiles += after.Misses - before.Misses + after.Rejected - before.Rejected
		}
		rep.Restored = res.Checkpoint
		rep.RestoreBytes += res.Stats.BytesRead
		return res.OperatorStates, nil
	})
	if err != nil {
		return nil, err
	}
	rep.RestoreDuration = time.Since(start)
	from := r.cfg.Events
	for _, op := range ops {
		for _, t := range op.th {
			from = min(from, t+1)
		}
	}
	rep.After = Phase{Parallelism: q, From: from, To: r.cfg.Events}
	if err := r.runJob(ctx, ops, &rep.After, false); err != nil {
		closeAll(stores(ops))
		return nil, err
	}
	for _, op := range ops {
		rep.After.Skipped += op.skipped
	}
	return stores(ops), nil
}

func stores(ops []*operator) []runtime.Store {
	out := make([]runtime.Store, len(ops))
	for i, op := range ops {
		out[i] = op.store
	}
	return out
}

// operators makes p operator instances with their stores. With restore
// nil they start empty; otherwise restore loads instance i's store and
// returns the old instances' position blobs.
func (r *runner) operators(p int, restore func(i int, s runtime.Store) ([][]byte, error)) ([]*operator, error) {
	ops := make([]*operator, p)
	for i := range p {
		kgs, err := runtime.KeyGroupRangeForOperator(r.cfg.MaxParallelism, p, i)
		if err != nil {
			return nil, err
		}
		s, err := r.store(kgs)
		if err != nil {
			return nil, err
		}
		st, err := OpenClickState(s)
		if err != nil {
			return nil, err
		}
		op := &operator{index: i, kgs: kgs, store: s, st: st, th: make([]int64, kgs.Len()), last: -1,
			in: make(chan Event, 1024), finished: make(chan struct{})}
		for g := range op.th {
			op.th[g] = -1
		}
		if restore != nil {
			blobs, err := restore(i, s)
			if err != nil {
				return nil, err
			}
			all, err := Thresholds(blobs, r.cfg.MaxParallelism)
			if err != nil {
				return nil, err
			}
			copy(op.th, all[kgs.Start:kgs.End])
		}
		ops[i] = op
	}
	return ops, nil
}

// operator is one operator instance: its store and state, its input, and
// the position of its input.
type operator struct {
	index int
	kgs   runtime.KeyGroupRange
	store runtime.Store
	st    *ClickState
	inst  *driver.Instance
	in    chan Event
	// th[g-kgs.Start] is the offset up to which the restored state of key
	// group g reflects the stream (-1 for none); last is the offset of the
	// last event this instance handled. Key group g's state reflects every
	// event of g with an offset <= max(th[g], last).
	th      []int64
	last    int64
	skipped int64
	// endAt is the offset at which the input ended: the instance has seen
	// every event of its key groups before it. Set before the input is
	// closed.
	endAt int64
	// finished is closed once the instance's input has ended and it has
	// finished (driver.Instance.Finish).
	finished chan struct{}
}

// position returns the operator's current Position: runs of key groups
// with the offset max(th[g], last).
func (op *operator) position() Position {
	var p Position
	for i, t := range op.th {
		off := max(t, op.last)
		g := op.kgs.Start + i
		if n := len(p.Ranges); n > 0 && p.Ranges[n-1].Offset == off {
			p.Ranges[n-1].KeyGroups.End = g + 1
			continue
		}
		p.Ranges = append(p.Ranges, PositionRange{runtime.KeyGroupRange{Start: g, End: g + 1}, off})
	}
	return p
}

// handle processes e unless the restored state already reflects it.
func (op *operator) handle(e Event, kg int) error {
	if e.Offset <= op.th[kg-op.kgs.Start] {
		op.skipped++
	} else if err := Process(op.st, e); err != nil {
		return fmt.Errorf("instance %d: event %d: %w", op.index, e.Offset, err)
	}
	op.last = e.Offset
	return nil
}

// loop is the operator's goroutine: it handles its input, and takes
// checkpoints between two records. When its input ends it finishes: the
// Instance answers triggers with the final state and position from then
// on, and the loop waits for the job's final checkpoint. It returns once
// that has completed, or when ctx is done (the crash).
func (op *operator) loop(ctx context.Context, maxP int) error {
	var key []byte
	in, triggers := op.in, op.inst.Triggers()
	for {
		select {
		case e, ok := <-in:
			if !ok {
				op.last = max(op.last, op.endAt-1)
				if err := op.inst.Finish(op.position().Marshal()); err != nil {
					return fmt.Errorf("instance %d: %w", op.index, err)
				}
				in, triggers = nil, nil // the Instance's from now on
				close(op.finished)
				continue
			}
			key = runtime.AppendStringKey(key[:0], e.User)
			kg := runtime.KeyGroupOfHash(runtime.HashKey(key), maxP)
			if err := op.handle(e, kg); err != nil {
				return err
			}
		case t := <-triggers:
			// A failed synchronous phase declines the checkpoint; the
			// next one will do.
			_ = op.inst.Snapshot(t, op.position().Marshal())
		case n := <-op.inst.Notifications():
			// A real source would commit its offsets here.
			if n.Final {
				return nil
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// runJob starts a coordinator for the job graph of ops (their operator at
// their parallelism), joins ops to it, feeds them the stream [ph.From,
// ph.To) and, if crash, abandons them there once a checkpoint has
// completed. Otherwise each instance finishes when its input ends, and the
// job ends on a final checkpoint (ph.Final): runJob waits for it and for
// the instances, and closes them.
func (r *runner) runJob(ctx context.Context, ops []*operator, ph *Phase, crash bool) error {
	coord, err := driver.Start(ctx, driver.Options{
		Config: coordinator.Config{
			Interval:          r.cfg.Interval,
			Retained:          2,
			TolerableFailures: 5,
		},
		Storage: r.storage,
		Logger:  slog.New(slog.DiscardHandler),
		// Every checkpoint includes every instance: those triggered while
		// the instances join are declined as not ready.
		Expected: map[string]int{Operator: len(ops)},
	})
	if err != nil {
		return err
	}
	defer coord.Close(context.WithoutCancel(ctx))
	for _, op := range ops {
		opts := driver.InstanceOptions{Operator: Operator, Index: op.index, Store: op.store}
		if r.cfg.LocalRecovery {
			if opts.LocalCopy, err = r.localCopy(op.index); err != nil {
				return err
			}
		}
		if op.inst, err = coord.Join(opts); err != nil {
			return err
		}
	}

	opCtx, crashNow := context.WithCancel(ctx)
	defer crashNow()
	var wg sync.WaitGroup
	errs := make(chan error, len(ops))
	for _, op := range ops {
		wg.Go(func() {
			if err := op.loop(opCtx, r.cfg.MaxParallelism); err != nil {
				errs <- err
				crashNow()
			}
		})
	}

	name := "after the restore"
	if crash {
		name = "before the crash"
	}
	var sent atomic.Int64
	stop := r.ticker(func() {
		c := coord.Stats().Counts()
		r.progress("%s (p=%d): %d/%d events, %d checkpoints completed",
			name, len(ops), sent.Load(), ph.To-ph.From, c.Completed)
	})
	start := time.Now()
	srcErr := r.source(opCtx, ops, ph.From, ph.To, !crash, &sent)
	if srcErr == nil && crash {
		srcErr = waitForCheckpoint(opCtx, coord)
		crashNow() // the crash: the instances stop where they are
	}
	if srcErr == nil && !crash {
		ph.Final, srcErr = endOnFinalCheckpoint(opCtx, coord, ops)
		if srcErr != nil {
			crashNow()
		}
	}
	wg.Wait()
	ph.Duration = time.Since(start)
	stop()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	if srcErr != nil {
		return srcErr
	}
	if !crash {
		for _, op := range ops {
			op.inst.Close()
		}
	}
	if err := coord.Close(ctx); err != nil {
		return err
	}
	stats := coord.Stats()
	ph.Counts, ph.Summary = stats.Counts(), stats.Summary()
	select {
	case <-coord.Failed():
		return fmt.Errorf("checkpoints failed: %w", coord.Err())
	default:
	}
	return nil
}

// source reads the stream [from, to) and sends each event to the instance
// that owns its user's key group. The input of instance i ends early, once
// the source has read cfg.finishAfter[i] offsets (if positive): it gets no
// more events, and its input is closed. With end, every input is closed at
// the end of the stream.
func (r *runner) source(ctx context.Context, ops []*operator, from, to int64, end bool, sent *atomic.Int64) error {
	var key []byte
	ends := make([]int64, len(ops))
	for i := range ends {
		ends[i] = to
		if i < len(r.cfg.finishAfter) && r.cfg.finishAfter[i] > 0 {
			ends[i] = min(to, from+r.cfg.finishAfter[i])
		}
	}
	open := slices.Repeat([]bool{true}, len(ops))
	next := slices.Min(ends) // the next end to act on
	closeEnded := func(at int64) {
		next = to + 1
		for i, op := range ops {
			switch {
			case !open[i]:
			case ends[i] <= at && (end || ends[i] < to):
				open[i] = false
				op.endAt = ends[i]
				close(op.in)
			default:
				next = min(next, ends[i])
			}
		}
	}
	for i := from; i < to; i++ {
		if i >= next {
			closeEnded(i)
		}
		e := r.stream.Event(i)
		key = runtime.AppendStringKey(key[:0], e.User)
		idx, err := runtime.OperatorIndexForKey(key, r.cfg.MaxParallelism, len(ops))
		if err != nil {
			return err
		}
		if !open[idx] {
			continue // its input has ended: the event belongs to a later run
		}
		select {
		case ops[idx].in <- e:
		case <-ctx.Done():
			return ctx.Err()
		}
		if i%1024 == 0 {
			sent.Store(i - from)
		}
	}
	closeEnded(to)
	sent.Store(to - from)
	return nil
}

// endOnFinalCheckpoint waits until every instance of ops has finished and
// ends the job on a final checkpoint: it asks for one at once and waits
// until a final checkpoint has completed (the periodic ones are final too
// by then), and returns its name.
func endOnFinalCheckpoint(ctx context.Context, coord *driver.Coordinator, ops []*operator) (string, error) {
	for _, op := range ops {
		select {
		case <-op.finished:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	if _, err := coord.TriggerCheckpoint(ctx); err != nil {
		return "", fmt.Errorf("the final checkpoint: %w", err)
	}
	select {
	case <-coord.Finished():
	case <-coord.Failed():
		return "", fmt.Errorf("checkpoints failed: %w", coord.Err())
	case <-ctx.Done():
		return "", ctx.Err()
	}
	rec, _ := coord.Stats().LastCompleted()
	return checkpoint.CheckpointName(uint64(rec.ID)), nil
}

// waitForCheckpoint waits until coord has completed a checkpoint, so that
// the crash has something to restore.
func waitForCheckpoint(ctx context.Context, coord *driver.Coordinator) error {
	deadline := time.Now().Add(crashWait)
	for coord.Stats().Counts().Completed == 0 {
		if time.Now().After(deadline) {
			return errors.New("no checkpoint completed before the crash point")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-coord.Failed():
			return fmt.Errorf("checkpoints failed: %w", coord.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}
