package pipeline

import (
	"fmt"
	"io"
	"time"

	"github.com/stategen/stategen/runtime/coordinator"
)

// Print writes the report for people: throughput, checkpoints, restore and
// the verification line, "verified: N keys, 0 differences", or the first
// differences.
func (r *Report) Print(w io.Writer) {
	c := r.Config
	backend := c.Backend
	if c.Incremental {
		backend += " (incremental checkpoints)"
	}
	fmt.Fprintf(w, "clickstream: %d events, %d users, backend %s, maxParallelism %d, seed %d\n",
		c.Events, c.Users, backend, c.MaxParallelism, c.Seed)
	fmt.Fprintf(w, "checkpoints:  %s (every %v)\n", r.Dir, c.Interval)
	fmt.Fprintf(w, "reference:    p=1, no checkpoints: %d events in %v (%s events/s)\n",
		r.Reference.To-r.Reference.From, round(r.Reference.Duration), rate(r.Reference))
	printPhase(w, "before crash:", r.Before)
	fmt.Fprintf(w, "crash:        at offset %d (%.0f%%): %d instances abandoned, coordinator stopped\n",
		r.Before.To, 100*c.CrashAt, r.Before.Parallelism)
	fmt.Fprintf(w, "restore:      %s at p=%d -> p=%d in %v (%s read)\n",
		r.Restored, r.Before.Parallelism, r.After.Parallelism, round(r.RestoreDuration), size(r.RestoreBytes))
	if c.LocalRecovery {
		fmt.Fprintf(w, "local copies: %d data files read from the instances' local copies, %d from the checkpoint directory\n",
			r.LocalFiles, r.RemoteFiles)
	}
	fmt.Fprintf(w, "replay:       from offset %d: %d events already in the restored state skipped\n",
		r.After.From, r.After.Skipped)
	printPhase(w, "after restore:", r.After)
	fmt.Fprintf(w, "end:          every instance finished; the job ended on the final checkpoint %s\n", r.After.Final)
	if r.FinalDifferenceCount == 0 {
		fmt.Fprintf(w, "final checkpoint: restores the reference state exactly\n")
	} else {
		fmt.Fprintf(w, "final checkpoint: %d differences from the reference; the first:\n", r.FinalDifferenceCount)
		for _, d := range r.FinalDifferences {
			fmt.Fprintf(w, "  %s\n", d)
		}
	}
	if r.DifferenceCount == 0 && r.FinalDifferenceCount == 0 {
		fmt.Fprintf(w, "verified: %d keys, 0 differences\n", r.Keys)
		return
	}
	fmt.Fprintf(w, "NOT verified: %d keys, %d differences; the first:\n", r.Keys, r.DifferenceCount+r.FinalDifferenceCount)
	for _, d := range r.Differences {
		fmt.Fprintf(w, "  %s\n", d)
	}
}

// printPhase prints a checkpointed phase: throughput and the checkpoint
// summary.
func printPhase(w io.Writer, label string, p Phase) {
	fmt.Fprintf(w, "%-13s p=%d: %d events in %v (%s events/s), %d checkpoints completed, %d declined as not ready, %d failed\n",
		label, p.Parallelism, p.To-p.From, round(p.Duration), rate(p), p.Counts.Completed, p.Counts.NotReady, p.Counts.Failed)
	s := p.Summary
	if s.Completed == 0 {
		return
	}
	fmt.Fprintf(w, "              sync phase %s, async phase %s, checkpoint %s, size %s\n",
		spread(s.SyncDuration), spread(s.AsyncDuration), spread(s.Duration),
		fmt.Sprintf("%s/%s/%s", size(s.Bytes.Min), size(s.Bytes.Mean), size(s.Bytes.Max)))
}

// spread formats min/mean/max durations.
func spread(s coordinator.Spread) string {
	return fmt.Sprintf("%v/%v/%v", round(s.Min), round(s.Mean), round(s.Max))
}

// round rounds d for display.
func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	default:
		return d.Round(time.Microsecond / 10)
	}
}

// rate formats a phase's events per second.
func rate(p Phase) string {
	r := p.EventsPerSecond()
	if r >= 1e6 {
		return fmt.Sprintf("%.2fM", r/1e6)
	}
	return fmt.Sprintf("%.0fk", r/1e3)
}

// size formats a byte count.
func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%d B", n)
	}
}
