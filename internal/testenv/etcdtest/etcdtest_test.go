package etcdtest

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

// A server serves reads and writes, keeps its data across a restart, and
// Stop leaves neither a process nor its data directory behind.
func TestServerServesAndStopsWithoutLeftovers(t *testing.T) {
	if _, err := Binary(); errors.Is(err, ErrNoBinary) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = s.Stop()
		}
	})
	cli := s.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "/k", "v"); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "/k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("Get = %v, %v", resp, err)
	}
	// A restart keeps the data.
	old := s.PID()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if processExists(old) || s.PID() == old {
		t.Errorf("the old process %d survived the restart (now %d)", old, s.PID())
	}
	resp, err = cli.Get(ctx, "/k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("Get after restart = %v, %v", resp, err)
	}
	pid := s.PID()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	select {
	case <-s.Exited():
	default:
		t.Fatal("Stop returned before the process exited")
	}
	if processExists(pid) {
		t.Errorf("process %d still exists after Stop", pid)
	}
	if _, err := os.Stat(s.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data directory %s left behind (%v)", s.dir, err)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// The shared server answers, and each test gets a prefix of its own.
func TestRequireSharesOneServer(t *testing.T) {
	a, b := Require(t), Require(t)
	if a != b {
		t.Fatal("Require started a second server")
	}
	if p, q := Prefix(t), Prefix(t); p == q {
		t.Errorf("Prefix returned %q twice", p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := a.Client(t).Get(ctx, Prefix(t)); err != nil {
		t.Fatal(err)
	}
}

// Without a binary the error says how to get one.
func TestBinaryNamesTheInstallScript(t *testing.T) {
	t.Setenv(EnvBinary, "/nonexistent/etcd")
	_, err := Binary()
	if !errors.Is(err, ErrNoBinary) {
		t.Fatalf("Binary() = %v, want ErrNoBinary", err)
	}
	for _, want := range []string{".ci/etcd.sh", EnvBinary, "/nonexistent/etcd"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}
