//go:build unix

package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/coordinator/driver"
)

// The crash test: a child process — this test binary, re-executed — runs
// the job on an endless stream with checkpoints every few tens of
// milliseconds (resume), and the parent kills it with SIGKILL at a random
// moment. After each kill the parent does what a restarted job does
// (checkpoint.Cleanup), checks the storage, restores the latest completed
// checkpoint at a random parallelism and compares the restored state with
// a reference computed from the stream alone at that checkpoint's recorded
// positions. Then it starts the next child on the same directory, which
// restores that checkpoint itself (at another random parallelism) and goes
// on, until the next kill: one chain of kills, restores and continuations,
// crashChainKills long.
//
//	STATEGEN_CRASH_KILLS=500 go test -run TestCrash ./examples/clickstream/pipeline
//
// runs 500 kills instead of crashKillsDefault; STATEGEN_CRASH_SEED replays
// the random choices (parallelisms, intervals, kill delays) of a failed run —
// not its timing, which the machine decides.
const (
	crashKillsDefault = 20
	// crashChainKills is the length of a chain: after so many kills the
	// test starts again in a new directory.
	crashChainKills = 100
	crashKillsEnv   = "STATEGEN_CRASH_KILLS"
	crashSeedEnv    = "STATEGEN_CRASH_SEED"
	// crashChildEnv holds the child's crashSpec, as JSON; set, the test
	// binary is a child and runs no test.
	crashChildEnv = "STATEGEN_CRASH_CHILD"
	// crashRunning is the line a child prints on its stdout once its
	// restore is done, before its job starts.
	crashRunning = "running"
)

// crashSpec is what the parent tells a child.
type crashSpec struct {
	Dir         string        // the checkpoint directory
	Parallelism int           // the child's parallelism
	Interval    time.Duration // its checkpoint interval
	Users       int
	Seed        uint64
	Lifetime    time.Duration // the child stops by itself after this long
	// FinishAfter ends the input of instance i early (Config.finishAfter):
	// such instances finish while the others go on, and keep taking part
	// in checkpoints with their final state.
	FinishAfter []int64
	// Incremental runs the child's stores behind checkpoint.Trackers.
	Incremental bool
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(crashChildEnv); spec != "" {
		os.Exit(crashChild(spec))
	}
	os.Exit(m.Run())
}

// crashChild is the child's main: it resumes the job of spec.Dir and runs
// it until it is killed. It also stops — exit status 3 — if its stdin is
// closed (the parent is gone) or its lifetime ends, so that a child never
// outlives its test.
func crashChild(spec string) int {
	var c crashSpec
	if err := json.Unmarshal([]byte(spec), &c); err != nil {
		fmt.Fprintf(os.Stderr, "crash child: bad %s: %v\n", crashChildEnv, err)
		return 2
	}
	ctx, stop := context.WithTimeout(context.Background(), c.Lifetime)
	defer stop()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	cfg := Config{Dir: c.Dir, Users: c.Users, Seed: c.Seed, Interval: c.Interval, Events: 1 << 62, finishAfter: c.FinishAfter, Incremental: c.Incremental}
	stores, _, err := resume(ctx, cfg, c.Parallelism, func(restored string) {
		fmt.Printf("%s %q\n", crashRunning, restored)
	})
	closeAll(stores)
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "crash child: stopped without being killed")
		return 3
	}
	fmt.Fprintf(os.Stderr, "crash child: %v\n", err)
	return 1
}

// crashStats counts what the kills hit.
type crashStats struct {
	kills         int
	duringRestore int // killed before its restore was done
	midWrite      int // left a checkpoint newer than the latest without metadata
	allFiles      int // ... whose data files were all committed: killed in the metadata commit
	midDelete     int // left an older checkpoint without metadata: killed deleting it
	debris        int // kills after which Cleanup removed something
	advanced      int // kills after which the latest checkpoint was a new one
	finishing     int // ... of a child some of whose instances finished early
	counterDebris int // uncommitted writes of the id counter left in the end
	maxOffset     int64
	lastID        uint64
}

func TestCrashRecoveryUnderSIGKILL(t *testing.T) {
	kills := crashKillsDefault
	if s := os.Getenv(crashKillsEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number of kills", crashKillsEnv, s)
		}
		kills = n
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(crashSeedEnv); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want an unsigned integer", crashSeedEnv, s)
		}
		seed = n
	}
	t.Logf("seed %d (replay with %s=%d), %d kills", seed, crashSeedEnv, seed, kills)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))

	ctx := t.Context()
	const maxP = runtime.DefaultMaxParallelism
	const users = 200
	streamSeed := 1 + seed%1000
	root := t.TempDir()
	tmp := filepath.Join(root, "tmp") // the children's scratch directories
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}

	var st crashStats
	var (
		dir       string             // the chain's checkpoint directory
		storage   *checkpoint.Dir    // ... as a Storage
		ref       *positionReference // the chain's reference
		committed map[string]bool    // the committed checkpoints seen so far
		maxSeen   uint64             // the highest checkpoint id ever seen in the directory
		latest    string             // the checkpoint restored last
		tmps      []string           // uncommitted writes of the id counter
	)
	defer func() {
		if ref != nil {
			ref.Close()
		}
	}()
	for k := range kills {
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d, kill %d: %s", seed, k, fmt.Sprintf(format, args...))
		}
		if k%crashChainKills == 0 {
			// A new chain: the state of a long one grows with the
			// stream, and so would the time of each kill.
			if ref != nil {
				ref.Close()
				st.counterDebris += len(tmps)
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
			}
			dir = filepath.Join(root, fmt.Sprintf("checkpoints-%d", k/crashChainKills))
			var err error
			if storage, err = checkpoint.NewDir(dir); err != nil {
				t.Fatal(err)
			}
			if ref, err = newPositionReference(Stream{Seed: streamSeed, Users: users, Len: 1 << 62}, maxP); err != nil {
				t.Fatal(err)
			}
			committed, maxSeen, latest, tmps = map[string]bool{}, 0, "", nil
		}
		spec := crashSpec{
			Dir: dir, Parallelism: 1 + rng.IntN(4), Interval: time.Duration(20+rng.IntN(31)) * time.Millisecond,
			Users: users, Seed: streamSeed, Lifetime: 5 * time.Minute,
			// Every other child writes incremental checkpoints (over
			// whatever its predecessor left): a kill may then hit the
			// write of changes, their commit, or retention deleting a
			// checkpoint whose files later ones reference.
			Incremental: k%2 == 1,
		}
		// Half of the children have instances whose input ends early, at
		// different offsets: the job must go on checkpointing, and every
		// checkpoint must restore, while some instances have finished.
		if rng.IntN(2) == 0 && spec.Parallelism > 1 {
			spec.FinishAfter = make([]int64, spec.Parallelism)
			for range spec.Parallelism - 1 {
				spec.FinishAfter[rng.IntN(spec.Parallelism)] = 1 + rng.Int64N(30_000)
			}
		}
		// When to kill: mostly a random delay after the child's n-th new
		// checkpoint completed (n in 0..2), so that the chain moves on
		// however loaded the machine is; sometimes a random delay after
		// its start, during or just after its restore.
		kill := killAt{checkpoints: rng.IntN(3), delay: time.Duration(rng.Int64N(int64(150 * time.Millisecond)))}
		if rng.IntN(8) == 0 {
			kill = killAt{early: true, delay: time.Duration(rng.Int64N(int64(40 * time.Millisecond)))}
		}
		started := time.Now()
		restoredDone, stderr := killChild(t, fail, spec, tmp, storage, latest, kill)
		lived := time.Since(started)
		if !restoredDone {
			st.duringRestore++
		}
		if strings.Contains(stderr, "DATA RACE") || strings.Contains(stderr, "panic") || strings.Contains(stderr, "fatal error") {
			fail("the child failed before its kill:\n%s", stderr)
		}
		st.kills++

		// What the kill left, before any cleanup. Every committed
		// checkpoint must be whole: its files present and intact.
		all, err := storage.List(ctx)
		if err != nil {
			fail("list: %v", err)
		}
		names, err := checkpoint.List(ctx, storage)
		if err != nil {
			fail("list committed: %v", err)
		}
		var ids []uint64
		for _, n := range names {
			id, ok := checkpoint.ParseCheckpointName(n)
			if !ok {
				fail("committed checkpoint %q has no checkpoint name", n)
			}
			ids = append(ids, id)
			r, err := checkpoint.Open(ctx, storage, n)
			if err == nil {
				err = r.Verify(ctx)
			}
			if err != nil {
				fail("committed checkpoint %s is not whole: %v", n, err)
			}
			if !committed[n] {
				// Ids never repeat, across restarts too: a new
				// checkpoint's id is above every id the directory
				// ever held, committed or not.
				if id <= maxSeen {
					fail("new checkpoint %s has id %d, not above %d, the highest id seen before", n, id, maxSeen)
				}
			}
		}
		newest := uint64(0)
		if len(ids) > 0 {
			newest = slices.Max(ids)
		}
		killedWriting, killedDeleting := false, false
		for _, n := range all {
			if n == checkpoint.CoordinatorName || slices.Contains(names, n) {
				continue
			}
			id, ok := checkpoint.ParseCheckpointName(n)
			if !ok {
				fail("the directory holds %q, which no job wrote", n)
			}
			maxSeen = max(maxSeen, id)
			if id > newest {
				killedWriting = true
				objs, err := storage.Objects(ctx, n)
				if err != nil {
					fail("objects of %s: %v", n, err)
				}
				if len(objs) == spec.Parallelism {
					st.allFiles++
				}
			} else {
				killedDeleting = true
			}
		}
		if killedWriting {
			st.midWrite++
		}
		if killedDeleting {
			st.midDelete++
		}
		// The checkpoint restored last is deleted only once newer ones
		// have completed.
		if latest != "" && !slices.Contains(names, latest) && (len(names) == 0 || names[len(names)-1] < latest) {
			fail("the latest checkpoint %s disappeared; the directory holds %v", latest, names)
		}
		committed = map[string]bool{}
		for i, n := range names {
			committed[n] = true
			maxSeen = max(maxSeen, ids[i])
		}

		// What a restarted job does first: remove the debris. Afterwards
		// every checkpoint in the directory is a committed one.
		removed, err := checkpoint.Cleanup(ctx, storage, nil)
		if err != nil {
			fail("cleanup: %v", err)
		}
		if len(removed) > 0 {
			st.debris++
		}
		after, err := storage.List(ctx)
		if err != nil {
			fail("list: %v", err)
		}
		after = slices.DeleteFunc(after, func(n string) bool { return n == checkpoint.CoordinatorName })
		// ... or one whose files a committed checkpoint references (an
		// incremental checkpoint's chain), holding only those files.
		wantDirs := slices.Clone(names)
		for _, n := range names {
			m, err := checkpoint.ReadMetadata(ctx, storage, n)
			if err != nil {
				fail("metadata of %s: %v", n, err)
			}
			for _, op := range m.Operators {
				for _, in := range op.Instances {
					for _, ref := range in.Base {
						if !slices.Contains(wantDirs, ref.Checkpoint) {
							wantDirs = append(wantDirs, ref.Checkpoint)
						}
					}
				}
			}
		}
		slices.Sort(wantDirs)
		if !slices.Equal(after, wantDirs) {
			fail("after cleanup (removed %v) the directory holds %v, want the committed %v and those their chains reference", removed, after, wantDirs)
		}
		// Nor does any uncommitted write (checkpoint.Dir's temporary files)
		// survive, but in the coordinator's reserved directory, which
		// Cleanup leaves alone: those are counted.
		tmps, err = filepath.Glob(filepath.Join(dir, "*", ".tmp-*"))
		if err != nil {
			fail("glob: %v", err)
		}
		for _, f := range tmps {
			if filepath.Base(filepath.Dir(f)) != checkpoint.CoordinatorName {
				fail("the uncommitted write %s survived cleanup", f)
			}
		}

		// Restore the latest checkpoint at a random parallelism and
		// compare it with the reference at its recorded positions.
		name, id, err := driver.Latest(ctx, storage)
		if errors.Is(err, driver.ErrNoCheckpoint) {
			if latest != "" {
				fail("no checkpoint to restore after %s completed", latest)
			}
			continue
		}
		if err != nil {
			fail("latest: %v", err)
		}
		if name < latest {
			fail("latest checkpoint went back from %s to %s", latest, name)
		}
		if name != latest {
			st.advanced++
			if spec.FinishAfter != nil {
				st.finishing++
			}
		}
		latest, st.lastID = name, uint64(id)
		q := 1 + rng.IntN(4)
		stores, th, err := restoreLatest(ctx, storage, name, q, rng.IntN(2) == 0)
		if err != nil {
			closeAll(stores)
			fail("restore of %s at parallelism %d: %v", name, q, err)
		}
		got, err := Dump(stores)
		closeAll(stores)
		if err != nil {
			fail("dump of %s: %v", name, err)
		}
		if err := ref.advance(th); err != nil {
			fail("reference at the positions of %s: %v", name, err)
		}
		want, err := ref.dump()
		if err != nil {
			fail("dump of the reference: %v", err)
		}
		if n, first := Compare(got, want, 5); n != 0 {
			fail("%s restored at parallelism %d differs from the reference at its positions in %d entries; the first:\n%s",
				name, q, n, strings.Join(first, "\n"))
		}
		st.maxOffset = slices.Max(th)
		t.Logf("kill %d: child p=%d every %v killed %v, lived %v; restored %s at p=%d: positions [%d, %d]",
			k, spec.Parallelism, spec.Interval, kill, lived.Round(time.Millisecond), name, q, slices.Min(th), slices.Max(th))
	}
	st.counterDebris += len(tmps)
	t.Logf("survived %d kills: %d killed during the restore, %d mid-checkpoint-write (%d of them with every data file written, before the metadata commit), "+
		"%d while deleting a retained checkpoint, %d left debris for cleanup, %d uncommitted id-counter writes left; the latest checkpoint moved on after %d kills (%d of them of a child with instances that finished early); %d chains, the last up to %s (id %d) at stream offset %d, %d events in its reference",
		st.kills, st.duringRestore, st.midWrite, st.allFiles, st.midDelete, st.debris, st.counterDebris, st.advanced, st.finishing,
		(kills+crashChainKills-1)/crashChainKills, latest, st.lastID, st.maxOffset, ref.events)
	if st.advanced == 0 {
		t.Fatalf("seed %d: no checkpoint completed in %d runs: the test checked nothing", seed, kills)
	}
}

// killAt says when to kill a child: delay after its start if early;
// otherwise delay after it has completed checkpoints new checkpoints (zero:
// after its restore).
type killAt struct {
	early       bool
	checkpoints int
	delay       time.Duration
}

func (k killAt) String() string {
	if k.early {
		return fmt.Sprintf("%v after its start", k.delay.Round(time.Millisecond))
	}
	return fmt.Sprintf("%v after its restore and %d new checkpoints", k.delay.Round(time.Millisecond), k.checkpoints)
}

// killChild starts a child with spec, kills it with SIGKILL as kill says —
// counting the checkpoints of storage newer than since — and waits for it.
// It returns whether the child had finished its restore, and its stderr.
func killChild(t *testing.T, fail func(string, ...any), spec crashSpec, tmp string, storage checkpoint.Storage, since string, kill killAt) (restored bool, stderr string) {
	t.Helper()
	js, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+string(js), "TMPDIR="+tmp)
	running := &lineWatch{prefix: crashRunning, seen: make(chan struct{})}
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = running, &errb
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	exited := false
	defer func() {
		if !exited { // a failed test: do not leave the child behind
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	const patience = 2 * time.Minute
	deadline := time.After(patience)
	exitedEarly := func(err error) {
		exited = true
		fail("the child exited by itself: %v\n%s", err, errb.String())
	}
	if !kill.early {
		select {
		case <-running.seen:
		case err := <-done:
			exitedEarly(err)
		case <-deadline:
			fail("the child did not finish its restore in %v\n%s", patience, errb.String())
		}
		for {
			names, err := checkpoint.List(t.Context(), storage)
			if err != nil {
				fail("list: %v", err)
			}
			if len(names)-sort.SearchStrings(names, since+"\x00") >= kill.checkpoints {
				break
			}
			select {
			case <-time.After(2 * time.Millisecond):
			case err := <-done:
				exitedEarly(err)
			case <-deadline:
				fail("the child did not complete %d checkpoints in %v\n%s", kill.checkpoints, patience, errb.String())
			}
		}
	}
	select {
	case <-time.After(kill.delay):
	case err := <-done:
		exitedEarly(err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		fail("kill: %v", err)
	}
	err = <-done
	exited = true
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		fail("the child ended with %v, not by SIGKILL\n%s", err, errb.String())
	}
	select {
	case <-running.seen:
		restored = true
	default:
	}
	return restored, errb.String()
}

// lineWatch is a child's stdout: it closes seen when a line beginning with
// prefix has been written.
type lineWatch struct {
	prefix string
	seen   chan struct{}
	mu     sync.Mutex
	buf    []byte
	once   sync.Once
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for _, line := range strings.Split(string(w.buf), "\n") {
		if strings.HasPrefix(line, w.prefix) {
			w.once.Do(func() { close(w.seen) })
		}
	}
	return len(p), nil
}

// restoreLatest restores checkpoint name — the latest — at parallelism q
// into fresh stores, the way the example does: each instance by
// driver.RestoreLatest, or all of them from one driver.PlanLatest. It
// returns the stores and the per-key-group positions of the checkpoint's
// operator-state blobs, which every instance must have received whole.
func restoreLatest(ctx context.Context, storage checkpoint.Storage, name string, q int, planned bool) ([]runtime.Store, []int64, error) {
	const maxP = runtime.DefaultMaxParallelism
	var plan *driver.RestorePlan
	if planned {
		var err error
		if plan, err = driver.PlanLatest(ctx, storage, Operator, q, maxP); err != nil {
			return nil, nil, err
		}
		if plan.Checkpoint != name {
			return nil, nil, fmt.Errorf("planned %s, want the latest %s", plan.Checkpoint, name)
		}
	}
	var stores []runtime.Store
	var blobs [][]byte
	for i := range q {
		kgs, err := runtime.KeyGroupRangeForOperator(maxP, q, i)
		if err != nil {
			return stores, nil, err
		}
		s, err := cow.New(cow.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: maxP, KeyGroups: kgs}})
		if err != nil {
			return stores, nil, err
		}
		stores = append(stores, s)
		if _, err := OpenClickState(s); err != nil {
			return stores, nil, err
		}
		var got [][]byte
		if planned {
			if _, err := plan.Restore(ctx, i, s, nil); err != nil {
				return stores, nil, fmt.Errorf("instance %d: %w", i, err)
			}
			got = plan.Instances[i].OperatorStates
		} else {
			res, err := driver.RestoreLatest(ctx, storage, Operator, i, q, s, nil)
			if err != nil {
				return stores, nil, fmt.Errorf("instance %d: %w", i, err)
			}
			if res.Checkpoint != name {
				return stores, nil, fmt.Errorf("instance %d restored %s, want the latest %s", i, res.Checkpoint, name)
			}
			got = res.OperatorStates
		}
		if i == 0 {
			blobs = got
		} else if !slices.EqualFunc(got, blobs, bytes.Equal) {
			return stores, nil, fmt.Errorf("instance %d received other operator-state blobs than instance 0", i)
		}
	}
	th, err := Thresholds(blobs, maxP)
	return stores, th, err
}
