// Package miniotest starts real MinIO servers on loopback for tests.
//
// The S3 storage (package checkpoint/s3storage) is tested against a real
// S3-compatible server, not a mock: MinIO, built from the Go module proxy
// by .ci/minio.sh into a tools cache. A test finds the binary through the
// STATEGEN_MINIO environment variable or, if that is unset, at
// ${STATEGEN_TOOLS:-$HOME/.cache/stategen/tools}/bin/minio. A binary that
// cannot be found fails the test under CI (CI=true), with a message that
// says to run .ci/minio.sh, and skips it elsewhere, so that a developer
// without MinIO can still run the rest of the module's tests.
//
// A Server is one `minio server` process on a temporary directory, bound to
// 127.0.0.1 only (its S3 API and its console each on a free port), with
// fixed root credentials. Start waits until the server answers its liveness
// probe; Stop ends the whole process group. A stopped server can be started
// again on the same port and data, which is how tests make the storage
// unavailable for a while.
//
// Starting MinIO takes a second or two, so a test package shares one server
// among its tests:
//
//	func TestMain(m *testing.M) { os.Exit(miniotest.Main(m)) }
//
//	func TestSomething(t *testing.T) {
//		srv := miniotest.Shared(t)        // started on first use, stopped after m.Run
//		bucket := srv.NewBucket(t)        // a fresh bucket for this test
//		...
//	}
package miniotest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Env is the environment variable that names the MinIO binary.
const Env = "STATEGEN_MINIO"

// Root credentials of every server this package starts.
const (
	AccessKey = "stategen-test"
	SecretKey = "stategen-test-secret"
)

// InstallHint tells a developer how to get the binary.
const InstallHint = "run .ci/minio.sh (it builds MinIO from the Go module proxy into the tools cache and prints its path), or set " + Env + " to a minio binary"

// ErrNoBinary reports that no MinIO binary was found.
var ErrNoBinary = errors.New("miniotest: no MinIO binary")

// Binary returns the path of the MinIO binary: $STATEGEN_MINIO if set (it
// must exist), else minio in the tools cache. The error wraps ErrNoBinary
// and says how to install it.
func Binary() (string, error) {
	if p := os.Getenv(Env); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: %s=%s: %v; %s", ErrNoBinary, Env, p, err, InstallHint)
		}
		return p, nil
	}
	tools := os.Getenv("STATEGEN_TOOLS")
	if tools == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("%w: %s is unset and the home directory is unknown (%v); %s", ErrNoBinary, Env, err, InstallHint)
		}
		tools = filepath.Join(home, ".cache", "stategen", "tools")
	}
	p := filepath.Join(tools, "bin", "minio")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%w: %s is unset and %s does not exist; %s", ErrNoBinary, Env, p, InstallHint)
	}
	return p, nil
}

// Require returns the MinIO binary, or ends tb: with a failure under CI
// (CI=true), where a missing server is a broken setup, and with a skip
// elsewhere.
func Require(tb testing.TB) string {
	tb.Helper()
	p, err := Binary()
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("%v (CI=true: the S3 tests must run)", err)
		} else {
			tb.Skipf("%v", err)
		}
		return ""
	}
	return p
}

// Server is a MinIO server process on loopback.
type Server struct {
	// Endpoint is the S3 API's address, "127.0.0.1:<port>" (plain HTTP).
	Endpoint string
	// Dir is the server's data directory.
	Dir string

	binary  string
	console string
	owned   bool // Dir was made by Start and goes with Close

	mu   sync.Mutex
	cmd  *exec.Cmd
	exit chan struct{} // closed when cmd has exited
	log  *bytes.Buffer // the process's output, for errors
}

// Options configure StartServer.
type Options struct {
	// Binary is the minio executable; empty means Binary().
	Binary string
	// Dir is the data directory; empty means a new temporary directory,
	// removed by Close.
	Dir string
}

// StartServer starts a MinIO server and waits until it is live. Close
// stops it and removes what it made.
func StartServer(opts Options) (*Server, error) {
	bin := opts.Binary
	if bin == "" {
		var err error
		if bin, err = Binary(); err != nil {
			return nil, err
		}
	}
	s := &Server{binary: bin, Dir: opts.Dir}
	if s.Dir == "" {
		d, err := os.MkdirTemp("", "stategen-minio-")
		if err != nil {
			return nil, fmt.Errorf("miniotest: %w", err)
		}
		s.Dir, s.owned = d, true
	}
	// A free port can be taken by another process between the probe and
	// MinIO's bind; try a few.
	var err error
	for range 3 {
		var api, console string
		if api, err = freePort(); err != nil {
			break
		}
		if console, err = freePort(); err != nil {
			break
		}
		s.Endpoint, s.console = api, console
		if err = s.Start(); err == nil {
			return s, nil
		}
	}
	s.Close()
	return nil, err
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("miniotest: find a free port: %w", err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr, nil
}

// startTimeout bounds how long a server may take to become live.
const startTimeout = 60 * time.Second

// Start starts a stopped server again, on the same address and data, and
// waits until it is live.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return fmt.Errorf("miniotest: server %s is already running", s.Endpoint)
	}
	cmd := exec.Command(s.binary, "server", filepath.Join(s.Dir, "data"),
		"--address", s.Endpoint, "--console-address", s.console,
		"--certs-dir", filepath.Join(s.Dir, "certs"), "--quiet")
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + s.Dir,
		"MINIO_ROOT_USER=" + AccessKey,
		"MINIO_ROOT_PASSWORD=" + SecretKey,
		"MINIO_BROWSER=off",
		"MINIO_UPDATE=off",
		"MINIO_CI_CD=on", // allow a data directory on the root disk
	}
	s.log = new(bytes.Buffer)
	cmd.Stdout = &lockedWriter{w: s.log, mu: &s.mu}
	cmd.Stderr = cmd.Stdout
	setProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("miniotest: start %s: %w", s.binary, err)
	}
	exit := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exit) }()
	s.cmd, s.exit = cmd, exit

	s.mu.Unlock()
	err := waitLive(s.Endpoint, exit)
	s.mu.Lock()
	if err != nil {
		s.stopLocked()
		return fmt.Errorf("miniotest: minio server on %s: %w\n%s", s.Endpoint, err, s.log.String())
	}
	return nil
}

// lockedWriter serializes the process's writes with readers of the log.
type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w.Len() > 1<<20 {
		return len(p), nil // enough to diagnose a failed start
	}
	return l.w.Write(p)
}

// waitLive polls the server's liveness probe, then its cluster probe (the
// object layer has write quorum, so S3 requests succeed), until both
// answer 200, the process exits, or startTimeout passes.
func waitLive(endpoint string, exit <-chan struct{}) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(startTimeout)
	for _, probe := range []string{"/minio/health/live", "/minio/health/cluster"} {
		url := "http://" + endpoint + probe
		for {
			resp, err := client.Get(url)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
				err = errors.New(resp.Status)
			}
			select {
			case <-exit:
				return errors.New("the process exited before it became live")
			case <-time.After(50 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s not answering after %v (last probe: %v)", probe, startTimeout, err)
			}
		}
	}
	return nil
}

// Stop ends the server's process group and waits for it. Stopping a
// stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

func (s *Server) stopLocked() {
	if s.cmd == nil {
		return
	}
	cmd, exit := s.cmd, s.exit
	s.cmd, s.exit = nil, nil
	s.mu.Unlock()
	defer s.mu.Lock()
	signalGroup(cmd, false)
	select {
	case <-exit:
	case <-time.After(10 * time.Second):
		signalGroup(cmd, true)
		<-exit
	}
	// Anything the server started in its group goes too.
	signalGroup(cmd, true)
}

// Close stops the server and removes the data directory if Start made it.
func (s *Server) Close() {
	s.Stop()
	if s.owned {
		_ = os.RemoveAll(s.Dir)
	}
}

// Client returns a minio-go client of the server, with the root
// credentials.
func (s *Server) Client() (*minio.Client, error) {
	return minio.New(s.Endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(AccessKey, SecretKey, ""),
		Region: "us-east-1",
	})
}

var bucketSeq atomic.Int64

// CreateBucket makes a bucket with a new unique name and returns the name.
func (s *Server) CreateBucket(ctx context.Context) (string, error) {
	c, err := s.Client()
	if err != nil {
		return "", err
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := fmt.Sprintf("test-%d-%s", bucketSeq.Add(1), hex.EncodeToString(rnd[:]))
	if err := c.MakeBucket(ctx, name, minio.MakeBucketOptions{}); err != nil {
		return "", fmt.Errorf("miniotest: make bucket %s on %s: %w", name, s.Endpoint, err)
	}
	return name, nil
}

// NewBucket makes a bucket for tb, or fails it.
func (s *Server) NewBucket(tb testing.TB) string {
	tb.Helper()
	name, err := s.CreateBucket(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return name
}

// Log returns what the server printed so far.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.log == nil {
		return ""
	}
	return strings.Clone(s.log.String())
}

var shared struct {
	sync.Mutex
	inMain bool
	srv    *Server
	err    error
}

// Main runs m's tests and then stops the server that Shared started, if
// any; its result is TestMain's exit code. A package that calls Shared
// must call Main from TestMain, so that no server outlives the tests.
func Main(m *testing.M) int {
	shared.Lock()
	shared.inMain = true
	shared.Unlock()
	code := m.Run()
	shared.Lock()
	defer shared.Unlock()
	if shared.srv != nil {
		shared.srv.Close()
		shared.srv = nil
	}
	return code
}

// Shared returns the package's shared server, starting it on first use.
// Without a binary it fails tb under CI and skips it elsewhere (Require).
// Tests must not Stop it: a test that needs an outage starts its own
// server with StartServer.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	bin := Require(tb)
	shared.Lock()
	defer shared.Unlock()
	if !shared.inMain {
		tb.Fatal("miniotest.Shared needs TestMain to call miniotest.Main, which stops the server")
	}
	if shared.srv == nil && shared.err == nil {
		shared.srv, shared.err = StartServer(Options{Binary: bin})
	}
	if shared.err != nil {
		tb.Fatal(shared.err)
	}
	return shared.srv
}

// Start starts a server of tb's own, stopped and removed when tb ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin := Require(tb)
	s, err := StartServer(Options{Binary: bin, Dir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}
