package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// EnvBinary is the environment variable that names the etcd binary; when
// it is empty, etcd is looked up on PATH.
const EnvBinary = "STATEGEN_ETCD"

// ErrNoBinary reports that no etcd binary was found.
var ErrNoBinary = errors.New("etcdtest: no etcd binary: run .ci/etcd.sh to install one (Debian's etcd-server), or set " + EnvBinary + " to its path")

// Binary returns the path of the etcd binary: $STATEGEN_ETCD if set, or
// etcd on PATH. It fails with an error wrapping ErrNoBinary.
func Binary() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w (%s=%q: %v)", ErrNoBinary, EnvBinary, p, err)
		}
		return p, nil
	}
	p, err := exec.LookPath("etcd")
	if err != nil {
		return "", fmt.Errorf("%w (%v)", ErrNoBinary, err)
	}
	return p, nil
}

// Server is a running etcd server of one member.
type Server struct {
	endpoint string
	dir      string
	bin      string
	args     []string
	log      *tailBuffer

	mu   sync.Mutex
	proc *proc // the running process

	stopOnce sync.Once
	stopErr  error
}

// proc is one run of the server's process.
type proc struct {
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has exited
	waitErr error         // set before exited is closed
}

// startTimeout bounds the wait for a new server to answer.
const startTimeout = 30 * time.Second

// Start starts a server. It fails with an error wrapping ErrNoBinary if
// there is no etcd binary. Stop it with Stop.
func Start() (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	var errs []error
	// A free port found by listening may be taken by another process before
	// etcd binds it: try again with new ports.
	for range 3 {
		s, err := start(bin)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func start(bin string) (*Server, error) {
	clientPort, err := freePort()
	if err != nil {
		return nil, err
	}
	peerPort, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(tempRoot(), "etcdtest-")
	if err != nil {
		return nil, fmt.Errorf("etcdtest: %w", err)
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	s := &Server{
		endpoint: clientURL,
		dir:      dir,
		bin:      bin,
		args: []string{
			"--name", "default",
			"--data-dir", filepath.Join(dir, "data"),
			"--listen-client-urls", clientURL,
			"--advertise-client-urls", clientURL,
			"--listen-peer-urls", peerURL,
			"--initial-advertise-peer-urls", peerURL,
			"--initial-cluster", "default=" + peerURL,
			"--heartbeat-interval", "10",
			"--election-timeout", "100",
			"--logger", "zap",
			"--log-outputs", "stderr",
			"--log-level", "error",
		},
		log: &tailBuffer{max: 16 << 10},
	}
	if err := s.launch(); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// launch runs the server's process and waits until it answers.
func (s *Server) launch() error {
	cmd := exec.Command(s.bin, s.args...)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("etcdtest: starting %s: %w", s.bin, err)
	}
	p := &proc{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	if err := s.waitHealthy(p); err != nil {
		return fmt.Errorf("etcdtest: %s did not come up on %s: %w; its log ends with:\n%s", s.bin, s.endpoint, err, s.log.String())
	}
	return nil
}

// kill stops the process group of p: politely, then not.
func (p *proc) kill() {
	pgid := p.cmd.Process.Pid
	if err := signalGroup(pgid, syscall.SIGTERM); err != nil {
		_ = p.cmd.Process.Kill()
	}
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		if err := signalGroup(pgid, syscall.SIGKILL); err != nil {
			_ = p.cmd.Process.Kill()
		}
		<-p.exited
	}
	// Whatever else the group holds goes too.
	_ = signalGroup(pgid, syscall.SIGKILL)
}

// Restart stops the server's process and starts it again on the same
// ports and data: clients see the server go away and come back with its
// keys, revisions and leases.
func (s *Server) Restart() error {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	p.kill()
	return s.launch()
}

// tempRoot is where data directories go: /dev/shm if it is a writable
// directory (memory: fsync is free), else the default temporary directory.
func tempRoot() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if f, err := os.CreateTemp("/dev/shm", "etcdtest-probe-"); err == nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
			return "/dev/shm"
		}
	}
	return os.TempDir()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("etcdtest: finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitHealthy waits until the server serves a read, or p exits, or
// startTimeout passes.
func (s *Server) waitHealthy(p *proc) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	cli, err := s.NewClient()
	if err != nil {
		return err
	}
	defer cli.Close()
	for {
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		_, err := cli.Get(rctx, "/etcdtest/health")
		rcancel()
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("the server exited: %v", p.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("no answer within %v: %w", startTimeout, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Endpoint returns the server's client URL, e.g. "http://127.0.0.1:40123".
func (s *Server) Endpoint() string { return s.endpoint }

// PID returns the server's process id.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc.cmd.Process.Pid
}

// NewClient returns a new client of the server, with its own connection:
// a separate client stands for a separate process. The caller closes it.
func (s *Server) NewClient() (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{s.endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcdtest: client of %s: %w", s.endpoint, err)
	}
	return cli, nil
}

// Client returns a new client of the server, closed when tb ends.
func (s *Server) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	cli, err := s.NewClient()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cli.Close() })
	return cli
}

// Stop kills the server's process group, waits for the process and removes
// its data directory. It is idempotent.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		p := s.proc
		s.mu.Unlock()
		if p != nil {
			p.kill()
		}
		if err := os.RemoveAll(s.dir); err != nil {
			s.stopErr = fmt.Errorf("etcdtest: removing %s: %w", s.dir, err)
		}
	})
	return s.stopErr
}

// Exited is closed when the server's current process has exited.
func (s *Server) Exited() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc.exited
}

// The shared server of the test binary.
var shared struct {
	mu  sync.Mutex
	srv *Server
	err error
}

// Require returns the test binary's shared server, starting it on first
// use. Without an etcd binary it fails tb under CI=true and skips it
// otherwise; a server that does not start fails tb.
func Require(tb testing.TB) *Server {
	tb.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv == nil && shared.err == nil {
		shared.srv, shared.err = Start()
	}
	switch {
	case shared.err == nil:
		return shared.srv
	case errors.Is(shared.err, ErrNoBinary) && os.Getenv("CI") != "true":
		tb.Skip(shared.err)
	default:
		tb.Fatal(shared.err)
	}
	return nil
}

// Dedicated starts a server of tb's own — for a test that restarts or
// stops it — and stops it when tb ends. Without an etcd binary it fails or
// skips tb as Require does.
func Dedicated(tb testing.TB) *Server {
	tb.Helper()
	s, err := Start()
	switch {
	case err == nil:
		tb.Cleanup(func() {
			if err := s.Stop(); err != nil {
				tb.Error(err)
			}
		})
		return s
	case errors.Is(err, ErrNoBinary) && os.Getenv("CI") != "true":
		tb.Skip(err)
	default:
		tb.Fatal(err)
	}
	return nil
}

// Main runs the tests of m and then stops the shared server, if one was
// started, and exits. Call it from TestMain:
//
//	func TestMain(m *testing.M) { etcdtest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	shared.mu.Lock()
	if shared.srv != nil {
		if err := shared.srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		shared.srv = nil
	}
	shared.mu.Unlock()
	os.Exit(code)
}

var prefixes atomic.Int64

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// Prefix returns a key prefix of its own for tb, e.g.
// "/etcdtest/7-TestFailover": tests that share a server keep their keys
// apart under it. It does not end in '/'.
func Prefix(tb testing.TB) string {
	name := strings.Trim(unsafeChars.ReplaceAllString(tb.Name(), "-"), "-")
	return fmt.Sprintf("/etcdtest/%d-%s", prefixes.Add(1), name)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
