package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/stategen/stategen/examples/clickstream/pipeline"
	"github.com/stategen/stategen/runtime/coordinator"
	"github.com/stategen/stategen/runtime/coordinator/etcdcoord"
)

// runCoordinator is "cluster coordinator".
func runCoordinator(ctx context.Context, args []string, stderr io.Writer) int {
	var c common
	fs := flag.NewFlagSet("coordinator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.register(fs)
	name := fs.String("name", "", "this coordinator's name in the election (default: host and pid)")
	interval := fs.Duration("interval", 200*time.Millisecond, "checkpoint interval")
	timeout := fs.Duration("timeout", 5*time.Second, "a checkpoint not complete after this long fails")
	tolerable := fs.Int("tolerable-failures", 3, "consecutive failed checkpoints tolerated before the job fails")
	retained := fs.Int("retained", 2, "completed checkpoints kept")
	parallelism := fs.Int("parallelism", 0, "the job's parallelism: every checkpoint covers workers 0 … parallelism-1 (required)")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	bad := c.check()
	switch {
	case bad != nil:
	case *interval < coordinator.MinInterval:
		bad = fmt.Errorf("-interval: %v is shorter than %v", *interval, coordinator.MinInterval)
	case *timeout <= 0:
		bad = fmt.Errorf("-timeout: %v is not positive", *timeout)
	case *tolerable < 0:
		bad = fmt.Errorf("-tolerable-failures: %d is negative", *tolerable)
	case *retained < 1:
		bad = fmt.Errorf("-retained: %d: keep at least one checkpoint", *retained)
	case *parallelism <= 0:
		bad = fmt.Errorf("-parallelism: %d is not positive (it is required: the job's workers)", *parallelism)
	}
	if bad != nil {
		fmt.Fprintf(stderr, "cluster coordinator: %v\n", bad)
		return 2
	}
	log := logger(stderr, "coordinator")
	if *name != "" {
		log = log.With("name", *name)
	}
	ms, err := serveMetrics(c.metricsAddr, log)
	if err != nil {
		fmt.Fprintf(stderr, "cluster coordinator: %v\n", err)
		return 1
	}
	defer ms.Close()
	cli, storage, err := c.connect(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "cluster coordinator: %v\n", err)
		return 1
	}
	defer cli.Close()
	co, err := etcdcoord.StartCoordinator(ctx, cli, etcdcoord.Options{
		Job:     c.jobSpec(),
		Storage: storage,
		Config: coordinator.Config{
			Interval:          *interval,
			Timeout:           *timeout,
			TolerableFailures: *tolerable,
			Retained:          *retained,
		},
		LeaseTTL: c.lease,
		Name:     *name,
		Logger:   log,
		// The job graph: no checkpoint completes without every worker.
		Expected: map[string]int{pipeline.Operator: *parallelism},
		// The checkpoint metrics, while this coordinator leads.
		MeterProvider: ms.Provider(),
	})
	if err != nil {
		fmt.Fprintf(stderr, "cluster coordinator: %v\n", err)
		return 1
	}
	log.Info("started; campaigning")
	go func() {
		if co.AwaitLeadership(ctx) == nil {
			log.Info("leading")
		}
	}()
	// Report the checkpoint counts as they change, for the operator (and
	// the tests) to read.
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var last coordinator.Counts
	for {
		select {
		case <-ctx.Done():
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := co.Close(cctx); err != nil {
				log.Warn("close", "err", err)
			}
			log.Info("stopped")
			return 0
		case <-co.Done():
			log.Error("coordinator stopped", "err", co.Err())
			return 1
		case <-co.Failed():
			log.Error("checkpoints failed", "err", co.Err())
			return 1
		case <-tick.C:
			if st := co.Stats(); st != nil {
				if n := st.Counts(); n != last {
					last = n
					log.Info("counts", "triggered", n.Triggered, "completed", n.Completed, "failed", n.Failed, "notReady", n.NotReady, "refused", n.Refused)
				}
			}
		}
	}
}
