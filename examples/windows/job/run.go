package job

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/stategen/stategen/backends/btree"
	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/backends/pebble"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
)

// Config is a run of the job.
type Config struct {
	Backend         string // cow, btree or pebble
	PBefore, PAfter int    // parallelism before the crash and after the restore
	Stream          Stream
	// CheckpointEvery is the number of records between two checkpoints.
	CheckpointEvery int64
	// CrashAt is the offset after which the job crashes: its instances
	// are abandoned, whatever they did since the last checkpoint lost
	// (but for what they wrote into the sink, which outlives them).
	CrashAt int64
	// Dir is the checkpoint directory.
	Dir string
}

// restore restores instance i of p from checkpoint ckpt into store; the
// tests replace it with one that loses state, to prove that the
// verification catches a loss.
var restore = func(ctx context.Context, s checkpoint.Storage, ckpt string, i, p int, store runtime.Store) error {
	_, err := checkpoint.Restore(ctx, s, ckpt, operatorID, i, p, store, nil)
	return err
}

// Backends are the backends a Config may name.
func Backends() []string { return []string{"cow", "btree", "pebble"} }

func (c Config) open(dir string, cfg runtime.StoreConfig) (runtime.Store, error) {
	switch c.Backend {
	case "cow":
		return cow.New(cow.Options{StoreConfig: cfg})
	case "btree":
		return btree.New(btree.Options{StoreConfig: cfg})
	case "pebble":
		return pebble.New(pebble.Options{StoreConfig: cfg, Dir: dir})
	}
	return nil, fmt.Errorf("windows: unknown backend %q (want one of %s)", c.Backend, strings.Join(Backends(), ", "))
}

// Report is what a run found.
type Report struct {
	// Results is the number of window results in the sink, by kind.
	Results [3]int
	// Dropped counts the (event, window) pairs dropped as too late.
	Dropped int64
	// Restored names the checkpoint restored after the crash, and Resumed
	// the offset the new instances replayed from.
	Restored string
	Resumed  int64
	// Differences lists how the sink differs from the reference's.
	Differences []string
}

const operatorID = "windows"

// job is one run of the operator at a parallelism.
type job struct {
	cfg   Config
	ops   []*Operator
	stors []runtime.Store
	maxP  int
}

func (c Config) start(p, gen int, sink Sink) (*job, error) {
	j := &job{cfg: c, maxP: runtime.DefaultMaxParallelism}
	for i := range p {
		kgs, err := runtime.KeyGroupRangeForOperator(j.maxP, p, i)
		if err != nil {
			return nil, err
		}
		s, err := c.open(fmt.Sprintf("%s/stores/%d-%d", c.Dir, gen, i), runtime.StoreConfig{KeyGroups: kgs})
		if err != nil {
			return nil, err
		}
		o, err := NewOperator(s, sink)
		if err != nil {
			return nil, err
		}
		j.ops, j.stors = append(j.ops, o), append(j.stors, s)
	}
	return j, nil
}

// route hands record r to the instance that owns its user, or to every
// instance if it is a watermark.
func (j *job) route(r Record) error {
	if r.Watermark {
		for _, o := range j.ops {
			if err := o.Process(r); err != nil {
				return err
			}
		}
		return nil
	}
	i, err := runtime.OperatorIndexForKey(runtime.StringCodec{}.AppendKey(nil, r.User), j.maxP, len(j.ops))
	if err != nil {
		return err
	}
	if err := j.ops[i].Process(r); err != nil {
		return err
	}
	// Every instance has now handled the stream up to r: the snapshots
	// of a checkpoint taken here are aligned.
	for _, o := range j.ops {
		o.off = r.Offset
	}
	return nil
}

// checkpoint takes checkpoint id of every instance, at the record each
// has handled last, and commits it.
func (j *job) checkpoint(ctx context.Context, s checkpoint.Storage, id uint64) (string, error) {
	name := checkpoint.CheckpointName(id)
	var snaps []checkpoint.InstanceSnapshot
	for i, o := range j.ops {
		if err := o.mark(); err != nil {
			return "", err
		}
		a, err := checkpoint.SnapshotAsync(ctx, j.stors[i], s, name, fmt.Sprintf("%s-%d.sgc", operatorID, i), nil)
		if err != nil {
			return "", err
		}
		res, err := a.Wait()
		if err != nil {
			return "", err
		}
		res.Snapshot.OperatorState = o.ops.Encode(nil)
		snaps = append(snaps, res.Snapshot)
	}
	op, err := checkpoint.NewOperator(operatorID, snaps...)
	if err != nil {
		return "", err
	}
	return name, checkpoint.Commit(ctx, s, name, &checkpoint.Metadata{CheckpointID: id, Operators: []checkpoint.Operator{op}})
}

func (j *job) close() {
	for _, s := range j.stors {
		s.Close()
	}
}

// Run runs the job: at parallelism PBefore up to CrashAt, checkpointing
// every CheckpointEvery records; then, the instances abandoned, at
// parallelism PAfter from the latest checkpoint to the end; and compares
// the sink with the plain-Go Reference.
func Run(ctx context.Context, cfg Config, log io.Writer) (Report, error) {
	var rep Report
	if cfg.PBefore < 1 || cfg.PAfter < 1 || cfg.CheckpointEvery < 1 || cfg.CrashAt < cfg.CheckpointEvery || cfg.CrashAt >= cfg.Stream.Len() {
		return rep, fmt.Errorf("windows: invalid config %+v: want parallelisms >= 1 and CheckpointEvery <= CrashAt < the stream's length", cfg)
	}
	dir, err := checkpoint.NewDir(cfg.Dir + "/checkpoints")
	if err != nil {
		return rep, err
	}
	sink := Sink{}
	before, err := cfg.start(cfg.PBefore, 0, sink)
	if err != nil {
		return rep, err
	}
	var latest string
	var id uint64
	for i := int64(0); i <= cfg.CrashAt; i++ {
		if err := before.route(cfg.Stream.At(i)); err != nil {
			return rep, err
		}
		if (i+1)%cfg.CheckpointEvery == 0 {
			id++
			if latest, err = before.checkpoint(ctx, dir, id); err != nil {
				return rep, err
			}
		}
	}
	fmt.Fprintf(log, "windows: %s, parallelism %d: crashed after offset %d, %d checkpoints\n", cfg.Backend, cfg.PBefore, cfg.CrashAt, id)
	// The crash: the instances are abandoned (their stores closed only to
	// free them), what they did since the checkpoint is lost.
	before.close()

	after, err := cfg.start(cfg.PAfter, 1, sink)
	if err != nil {
		return rep, err
	}
	defer after.close()
	resume := int64(-1)
	for i, o := range after.ops {
		if err := restore(ctx, dir, latest, i, cfg.PAfter, after.stors[i]); err != nil {
			return rep, err
		}
		var dropped int64
		if resume, dropped, err = o.resume(); err != nil {
			return rep, err
		}
		if i == 0 {
			o.Dropped = dropped // the old instances' drops, counted once
		}
	}
	rep.Restored, rep.Resumed = latest, resume
	fmt.Fprintf(log, "windows: restored %s at parallelism %d, replaying from offset %d\n", latest, cfg.PAfter, resume+1)
	for i := resume + 1; i < cfg.Stream.Len(); i++ {
		if err := after.route(cfg.Stream.At(i)); err != nil {
			return rep, err
		}
	}
	for i, o := range after.ops {
		if err := o.Finish(); err != nil {
			return rep, err
		}
		empty, err := o.empty()
		if err != nil {
			return rep, err
		}
		if !empty {
			rep.Differences = append(rep.Differences, fmt.Sprintf("instance %d holds windows or timers after the end of the stream", i))
		}
	}
	want, wantDropped := Reference(cfg.Stream)
	for _, o := range after.ops {
		rep.Dropped += o.Dropped
	}
	if rep.Dropped != wantDropped {
		rep.Differences = append(rep.Differences, fmt.Sprintf("the job dropped %d (event, window) pairs as too late, the reference %d", rep.Dropped, wantDropped))
	}
	for k := range sink {
		rep.Results[k.Kind]++
	}
	rep.Differences = append(rep.Differences, compare(want, sink)...)
	return rep, nil
}

// compare lists the differences between the reference's sink and the
// job's.
func compare(want, got Sink) []string {
	var diffs []string
	for _, k := range slices.SortedFunc(maps.Keys(want), compareKeys) {
		if g, ok := got[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%v: missing, want %+v", k, want[k]))
		} else if g != want[k] {
			diffs = append(diffs, fmt.Sprintf("%v: %+v, want %+v", k, g, want[k]))
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(got), compareKeys) {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%v: %+v, not in the reference", k, got[k]))
		}
	}
	return diffs
}

func compareKeys(a, b ResultKey) int {
	switch {
	case a.Kind != b.Kind:
		return int(a.Kind) - int(b.Kind)
	case a.User != b.User:
		return strings.Compare(a.User, b.User)
	case a.Window.Start != b.Window.Start:
		return cmp.Compare(a.Window.Start, b.Window.Start)
	}
	return cmp.Compare(a.Window.End, b.Window.End)
}
