package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/checkpoint/s3storage"
	"github.com/stategen/stategen/examples/clickstream/pipeline"
	"github.com/stategen/stategen/internal/testenv/etcdtest"
	"github.com/stategen/stategen/internal/testenv/miniotest"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/coordinator/etcdcoord"
)

// The harness plays the orchestrator: it builds the cluster binary once,
// starts a real etcd and a real MinIO on loopback, and starts, kills and
// restarts coordinator and worker processes.

var build struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
	os.Exit(code)
}

// binary builds the command once per test binary.
func binary(t *testing.T) string {
	t.Helper()
	build.once.Do(func() {
		if build.dir, build.err = os.MkdirTemp("", "stategen-cluster-"); build.err != nil {
			return
		}
		build.path = filepath.Join(build.dir, "cluster")
		out, err := exec.Command("go", "build", "-o", build.path, ".").CombinedOutput()
		if err != nil {
			build.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.path
}

const (
	jobName  = "clicks"
	lease    = 2 * time.Second
	interval = 200 * time.Millisecond
)

// cluster is one test's etcd, MinIO bucket and processes.
type cluster struct {
	t      *testing.T
	bin    string
	etcd   *etcdtest.Server
	minio  *miniotest.Server
	cli    *clientv3.Client
	url    string
	dir    string
	stream pipeline.Stream
	rate   int
	// tolerable is the coordinators' -tolerable-failures.
	tolerable int

	mu    sync.Mutex
	procs []*proc
}

// proc is a process of the cluster binary, in its own process group.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error // the exit, once done is closed
}

// newCluster starts the etcd and MinIO of a test whose stream lasts about
// secs seconds.
func newCluster(t *testing.T, secs int64) *cluster {
	t.Helper()
	events, rate := size(secs)
	bin := binary(t)
	c := &cluster{
		t:         t,
		bin:       bin,
		etcd:      etcdtest.Dedicated(t),
		minio:     miniotest.Start(t),
		dir:       t.TempDir(),
		stream:    pipeline.Stream{Seed: 7, Users: 500, Len: events},
		rate:      rate,
		tolerable: 3,
	}
	c.cli = c.etcd.Client(t)
	bucket := c.minio.NewBucket(t)
	c.url = fmt.Sprintf("s3://%s/%s?endpoint=%s&max-attempts=2", bucket, jobName, c.minio.Endpoint)
	t.Cleanup(c.cleanup)
	return c
}

// cleanup kills every process still running and, if the test failed,
// logs what each printed.
func (c *cluster) cleanup() {
	c.mu.Lock()
	procs := slices.Clone(c.procs)
	c.mu.Unlock()
	for _, p := range procs {
		p.kill()
	}
	if !c.t.Failed() {
		return
	}
	for _, p := range procs {
		b, _ := os.ReadFile(p.log)
		if len(b) > 6000 {
			b = append([]byte("...\n"), b[len(b)-6000:]...)
		}
		c.t.Logf("---- %s (%v) ----\n%s", p.name, p.err, b)
	}
}

func (c *cluster) start(name string, args ...string) *proc {
	c.t.Helper()
	p := &proc{name: name, log: filepath.Join(c.dir, name+".log"), done: make(chan struct{})}
	f, err := os.Create(p.log)
	if err != nil {
		c.t.Fatal(err)
	}
	p.cmd = exec.Command(c.bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.cmd.Env = append(os.Environ(),
		"AWS_ACCESS_KEY_ID="+miniotest.AccessKey,
		"AWS_SECRET_ACCESS_KEY="+miniotest.SecretKey)
	if err := p.cmd.Start(); err != nil {
		f.Close()
		c.t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		f.Close()
		close(p.done)
	}()
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return p
}

// signal sends sig to p's process group.
func (p *proc) signal(sig syscall.Signal) {
	select {
	case <-p.done:
	default:
		_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	}
}

// kill kills p's process group with SIGKILL and waits for p.
func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
	<-p.done
}

// coordinator starts a coordinator of the job at parallelism p, with
// extra flags.
func (c *cluster) coordinator(name string, p int, extra ...string) *proc {
	return c.start(name, append([]string{"coordinator", "-etcd", c.etcd.Endpoint(), "-job", jobName,
		"-checkpoints", c.url, "-interval", interval.String(), "-lease", lease.String(),
		"-timeout", "1s", "-tolerable-failures", strconv.Itoa(c.tolerable), "-name", name,
		"-parallelism", strconv.Itoa(p)}, extra...)...)
}

// job starts the two coordinators of generation gen at parallelism p, then
// its p workers. The coordinators need not wait for the workers: they
// expect all p (-parallelism), and decline every checkpoint as not ready
// until all have joined, so no checkpoint covers only part of them.
func (c *cluster) job(gen, p int) (workers []*proc, dumps []string, coords map[string]*proc) {
	c.t.Helper()
	coords = map[string]*proc{}
	for _, n := range []string{"a", "b"} {
		name := fmt.Sprintf("coord-%d%s", gen, n)
		coords[name] = c.coordinator(name, p)
	}
	for i := range p {
		w, out := c.worker(gen, i, p)
		workers, dumps = append(workers, w), append(dumps, out)
	}
	return workers, dumps, coords
}

// worker starts worker i of p of generation gen, with extra flags, and
// returns it and the file it dumps its final state to.
func (c *cluster) worker(gen, i, p int, extra ...string) (*proc, string) {
	out := filepath.Join(c.dir, fmt.Sprintf("dump-%d-%d", gen, i))
	return c.start(fmt.Sprintf("worker-%d-%d", gen, i), append([]string{"worker",
		"-etcd", c.etcd.Endpoint(), "-job", jobName, "-checkpoints", c.url, "-lease", lease.String(),
		"-index", strconv.Itoa(i), "-parallelism", strconv.Itoa(p),
		"-events", strconv.FormatInt(c.stream.Len, 10), "-seed", strconv.FormatUint(c.stream.Seed, 10),
		"-users", strconv.Itoa(c.stream.Users), "-rate", strconv.Itoa(c.rate), "-out", out}, extra...)...), out
}

// members counts the registered instances.
func (c *cluster) members() int {
	resp, err := c.cli.Get(context.Background(), "/stategen/"+jobName+"/members/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		c.t.Fatal(err)
	}
	return int(resp.Count)
}

// index reads the completed-checkpoint index (empty before any leader).
func (c *cluster) index() []etcdcoord.Completed {
	x, err := etcdcoord.ReadIndex(context.Background(), c.cli, etcdcoord.Job{Name: jobName})
	if errors.Is(err, etcdcoord.ErrNoIndex) {
		return nil
	}
	if err != nil {
		c.t.Fatal(err)
	}
	return x
}

func latest(x []etcdcoord.Completed) (etcdcoord.Completed, bool) {
	if len(x) == 0 {
		return etcdcoord.Completed{}, false
	}
	return x[len(x)-1], true
}

// waitFor polls cond until it holds, failing the test after timeout or if
// one of the watched processes exits meanwhile.
func (c *cluster) waitFor(what string, timeout time.Duration, cond func() bool, watch ...*proc) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		for _, p := range watch {
			select {
			case <-p.done:
				c.t.Fatalf("waiting for %s: %s exited: %v", what, p.name, p.err)
			default:
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("waiting for %s: not after %v", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// finish waits for the workers to exit 0.
func (c *cluster) finish(workers []*proc) {
	c.t.Helper()
	for _, w := range workers {
		select {
		case <-w.done:
			if w.err != nil {
				c.t.Fatalf("%s: %v", w.name, w.err)
			}
		case <-time.After(120 * time.Second):
			c.t.Fatalf("%s did not finish", w.name)
		}
	}
}

// verify checks that the union of the dumps equals the reference run's
// final state.
func (c *cluster) verify(dumps []string) {
	c.t.Helper()
	keys, n, first, err := verification(context.Background(), c.stream, runtime.DefaultMaxParallelism, dumps)
	if err != nil {
		c.t.Fatal(err)
	}
	if keys == 0 {
		c.t.Fatal("the reference run has no state")
	}
	if n != 0 {
		c.t.Fatalf("%d of %d entries differ from the reference run; first: %q", n, keys, first)
	}
	c.t.Logf("verified: %d workers' final state (%d entries) equals the reference", len(dumps), keys)
}

// observer polls the index and checks that completed ids only ever grow:
// every id it sees for the first time is above every id seen before.
type observer struct {
	c    *cluster
	stop chan struct{}
	done chan struct{}

	mu   sync.Mutex
	seen []uint64 // in the order first seen
	bad  string
}

func (c *cluster) observe() *observer {
	o := &observer{c: c, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(o.done)
		for {
			x, err := etcdcoord.ReadIndex(context.Background(), c.cli, etcdcoord.Job{Name: jobName})
			if err == nil {
				o.add(x)
			}
			select {
			case <-o.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return o
}

func (o *observer) add(x []etcdcoord.Completed) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, e := range x {
		id := uint64(e.ID)
		if i > 0 && x[i-1].ID >= e.ID {
			o.bad = fmt.Sprintf("index not in id order: %v", x)
		}
		if slices.Contains(o.seen, id) {
			continue
		}
		if n := len(o.seen); n > 0 && o.seen[n-1] >= id {
			o.bad = fmt.Sprintf("id %d completed after id %d", id, o.seen[n-1])
		}
		o.seen = append(o.seen, id)
	}
}

// ids stops the observer and returns the ids it saw, failing the test if
// they did not strictly increase.
func (o *observer) ids() []uint64 {
	o.c.t.Helper()
	close(o.stop)
	<-o.done
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.bad != "" {
		o.c.t.Fatal(o.bad)
	}
	return slices.Clone(o.seen)
}

// logLines returns the lines of p's log that contain every one of parts.
func logLines(t *testing.T, p *proc, parts ...string) []string {
	t.Helper()
	f, err := os.Open(p.log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		ok := true
		for _, s := range parts {
			ok = ok && strings.Contains(l, s)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

// verifyFinal checks that the job ended on a final checkpoint: the latest
// checkpoint the index lists, restored at parallelism 1, holds the
// reference run's final state.
func (c *cluster) verifyFinal() {
	c.t.Helper()
	ctx := context.Background()
	c.t.Setenv("AWS_ACCESS_KEY_ID", miniotest.AccessKey)
	c.t.Setenv("AWS_SECRET_ACCESS_KEY", miniotest.SecretKey)
	storage, err := s3storage.Open(ctx, c.url)
	if err != nil {
		c.t.Fatal(err)
	}
	store, err := cow.New(cow.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: runtime.DefaultMaxParallelism, KeyGroups: runtime.FullRange(runtime.DefaultMaxParallelism)}})
	if err != nil {
		c.t.Fatal(err)
	}
	defer store.Close()
	if _, err := pipeline.OpenClickState(store); err != nil {
		c.t.Fatal(err)
	}
	res, err := etcdcoord.RestoreLatest(ctx, c.cli, etcdcoord.Job{Name: jobName}, storage, pipeline.Operator, 0, 1, store, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	got, err := pipeline.Dump([]runtime.Store{store})
	if err != nil {
		c.t.Fatal(err)
	}
	want, err := reference(ctx, c.stream, runtime.DefaultMaxParallelism)
	if err != nil {
		c.t.Fatal(err)
	}
	if n, first := pipeline.Compare(got, want, 3); n != 0 {
		c.t.Fatalf("the latest checkpoint %s is not the job's final state: %d of %d entries differ; first: %q", res.Checkpoint, n, len(want), first)
	}
	c.t.Logf("verified: the job ended on %s, which holds its final state (%d entries)", res.Checkpoint, len(want))
}
