package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/checkpoint/s3storage"
	"github.com/stategen/stategen/runtime/coordinator/etcdcoord"
)

// common are the flags of the coordinator and the worker.
type common struct {
	etcd        string
	job         string
	checkpoints string
	lease       time.Duration
	metricsAddr string
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.etcd, "etcd", "127.0.0.1:2379", "etcd endpoints, comma-separated")
	fs.StringVar(&c.job, "job", "clicks", "the job's name (its keys in etcd are /stategen/NAME/)")
	fs.StringVar(&c.checkpoints, "checkpoints", "", "checkpoint storage: s3://BUCKET/PREFIX?endpoint=HOST:PORT, or a shared directory")
	fs.DurationVar(&c.lease, "lease", 2*time.Second, "etcd lease TTL: how long a dead process holds its place")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://HOST:PORT/metrics (port 0: any free port, logged); empty: no metrics")
}

// check validates the common flags.
func (c *common) check() error {
	switch {
	case strings.TrimSpace(c.etcd) == "":
		return errors.New("-etcd: no endpoint")
	case c.job == "":
		return errors.New("-job: empty job name")
	case c.checkpoints == "":
		return errors.New("-checkpoints: required (s3://BUCKET/PREFIX?endpoint=... or a directory)")
	case c.lease < time.Second:
		return fmt.Errorf("-lease: %v is shorter than etcd's one-second lease granularity", c.lease)
	}
	return checkMetricsAddr(c.metricsAddr)
}

// connect opens the etcd client and the checkpoint storage.
func (c *common) connect(ctx context.Context) (*clientv3.Client, checkpoint.Storage, error) {
	var storage checkpoint.Storage
	var err error
	if s3storage.IsURL(c.checkpoints) {
		storage, err = s3storage.Open(ctx, c.checkpoints)
	} else {
		storage, err = checkpoint.NewDir(c.checkpoints)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint storage %s: %w", c.checkpoints, err)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(c.etcd, ","),
		DialTimeout: 5 * time.Second,
		Logger:      nil,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("etcd %s: %w", c.etcd, err)
	}
	return cli, storage, nil
}

func (c *common) jobSpec() etcdcoord.Job { return etcdcoord.Job{Name: c.job} }

// parseFlags parses args into fs; it returns the exit status to return and
// false when the command must stop (help or a bad flag).
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if fs.NArg() > 0 && fs.Name() != "verify" {
		fmt.Fprintf(stderr, "cluster %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return 2, false
	}
	return 0, true
}

// logger logs to stderr, each line tagged with the process's role.
func logger(stderr io.Writer, role string) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("proc", role)
}
