// Command cluster runs the clickstream job (package
// examples/clickstream/pipeline) as separate processes coordinated through
// etcd, with checkpoints in S3-compatible object storage: the layout of a
// job running on many machines.
//
//	cluster coordinator -etcd HOST:PORT -job NAME -checkpoints s3://BUCKET/PREFIX?endpoint=... -parallelism P
//	cluster worker      -etcd HOST:PORT -job NAME -checkpoints s3://... -index I -parallelism P -out FILE
//	cluster verify      -events N -seed S -users U DUMP...
//
// A coordinator process runs etcdcoord.StartCoordinator: it leads the
// job's checkpoints while it wins the election and stands by otherwise;
// run two for failover. It runs until SIGINT or SIGTERM, or until the
// checkpoints fail beyond -tolerable-failures (exit 1).
//
// A worker process is operator instance I of P. It restores its share of
// the latest completed checkpoint listed in etcd (etcdcoord.RestoreLatest),
// or starts empty; reads the whole deterministic stream from the smallest
// offset its key groups still need, keeping only the events of the key
// groups it owns (so no shared source process is needed: event i is a pure
// function of the seed and i, as a Kafka partition's record at offset i
// is); joins the job (etcdcoord.Join) and takes its checkpoints between
// two records, its operator-state blob being its pipeline.Position. It
// reads at most -rate offsets per second. At the end of the stream it
// writes its final state in the pipeline's canonical form (pipeline.Dump)
// to -out, leaves the job and exits 0.
//
// The coordinator knows the job graph: -parallelism P makes workers 0 …
// P-1 the expected instances (etcdcoord.Options.Expected), and every
// checkpoint needs all of them. Until all have joined, and while one is
// gone (dead, its lease expired, or finished), each checkpoint is declined
// as not ready on the missing worker's behalf — not counted as a failure —
// so no completed checkpoint lacks a worker's key groups. Coordinators may
// therefore start before the workers, and stay up while a worker restarts
// at the same parallelism; a worker registering with an index outside
// [0, P) is refused. To rescale, restart the coordinators with the new
// -parallelism along with the new workers (as Flink redeploys the job
// graph).
//
// Restarting the job after a lost worker — kill the rest, start P' new
// workers that restore — is the orchestrator's part (Kubernetes, or Flink's
// JobManager); the tests and scripts/cluster-demo.sh play it.
//
// Both serve their metrics when given -metrics-addr HOST:PORT (port 0
// picks a free one, logged as "serving metrics"): OpenTelemetry's
// Prometheus exporter at http://HOST:PORT/metrics. A coordinator exports
// the job's checkpoint metrics while it leads (completed, failed by
// reason, durations, sizes; see package runtime/coordinator/metrics), a
// worker its restore and its store's state sizes and live snapshots.
// A worker with -decline-every N declines every Nth checkpoint it is
// triggered for, a failure to watch in the metrics (the tests use it).
//
// verify recomputes the reference (the whole stream on one in-process
// store), reads the workers' dumps and compares their union with it: exit
// 0 if they are equal, 1 if not.
//
// Exit status 2 means invalid flags. Credentials of the object store come
// from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// usage is printed for a missing or unknown subcommand.
const usage = `usage: cluster coordinator|worker|verify [flags]
run "cluster SUBCOMMAND -h" for the flags of one`

// run is the command; it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	switch args[0] {
	case "coordinator":
		return runCoordinator(ctx, args[1:], stderr)
	case "worker":
		return runWorker(ctx, args[1:], stderr)
	case "verify":
		return runVerify(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "cluster: unknown subcommand %q\n%s\n", args[0], usage)
		return 2
	}
}
