//go:build unix

package miniotest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/minio/minio-go/v7"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// recorder is a testing.TB that records Fatalf and Skipf instead of
// ending the test.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }
func (r *recorder) Skipf(format string, args ...any)  { r.skip = fmt.Sprintf(format, args...) }

// TestRequireFailsUnderCIAndSkipsElsewhere checks what a missing binary
// does to a test: under CI it is a failure that says how to install MinIO,
// elsewhere a skip with the same advice.
func TestRequireFailsUnderCIAndSkipsElsewhere(t *testing.T) {
	t.Setenv(Env, filepath.Join(t.TempDir(), "no-minio-here"))
	for _, ci := range []string{"true", ""} {
		t.Setenv("CI", ci)
		r := &recorder{TB: t}
		Require(r)
		got, other := r.fatal, r.skip
		if ci != "true" {
			got, other = r.skip, r.fatal
		}
		if !strings.Contains(got, ".ci/minio.sh") || !strings.Contains(got, "no-minio-here") || other != "" {
			t.Errorf("CI=%q: fatal %q, skip %q; want one of them naming the path and .ci/minio.sh", ci, r.fatal, r.skip)
		}
	}
	t.Setenv(Env, "")
	t.Setenv("STATEGEN_TOOLS", t.TempDir())
	if _, err := Binary(); !errors.Is(err, ErrNoBinary) || !strings.Contains(err.Error(), os.Getenv("STATEGEN_TOOLS")) {
		t.Errorf("Binary() with an empty tools cache = %v, want ErrNoBinary naming the cache", err)
	}
}

// TestServerLifecycle starts a server, uses it, restarts it on the same
// address and data, and closes it: nothing of it remains.
func TestServerLifecycle(t *testing.T) {
	bin := Require(t)
	s, err := StartServer(Options{Binary: bin})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasPrefix(s.Endpoint, "127.0.0.1:") || !strings.HasPrefix(s.console, "127.0.0.1:") {
		t.Errorf("server bound to %s and %s, want 127.0.0.1 only", s.Endpoint, s.console)
	}
	bucket, err := s.CreateBucket(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Client()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(context.Background(), bucket, "k", strings.NewReader("v"), 1, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	pid := s.cmd.Process.Pid

	s.Stop()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the server process %d is still there after Stop (kill 0: %v)", pid, err)
	}
	if resp, err := http.Get("http://" + s.Endpoint + "/minio/health/live"); err == nil {
		resp.Body.Close()
		t.Errorf("the server still answers after Stop")
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StatObject(context.Background(), bucket, "k", minio.StatObjectOptions{}); err != nil {
		t.Errorf("the object is gone after a restart: %v", err)
	}
	pid = s.cmd.Process.Pid
	dir := s.Dir
	s.Close()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the server process %d is still there after Close (kill 0: %v)", pid, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the data directory %s survived Close (%v)", dir, err)
	}
}
