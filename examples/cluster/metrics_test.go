package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stategen/stategen/runtime/coordinator/etcdcoord"
)

// metricsAddr waits for p to log the address it serves metrics at.
func (c *cluster) metricsAddr(p *proc) string {
	c.t.Helper()
	re := regexp.MustCompile(`msg="serving metrics".* addr=(\S+)`)
	var addr string
	c.waitFor(p.name+"'s metrics address", 30*time.Second, func() bool {
		for _, l := range logLines(c.t, p, `msg="serving metrics"`) {
			if m := re.FindStringSubmatch(l); m != nil {
				addr = m[1]
				return true
			}
		}
		return false
	}, p)
	return addr
}

// scrape is one scrape of a /metrics endpoint: each sample's value by its
// series, name{labels} as the text exposition writes it.
type scrape map[string]float64

// scrapeMetrics GETs http://addr/metrics and parses the Prometheus text
// format: comment lines start with #, every other line is "series value".
func scrapeMetrics(t *testing.T, addr string) (scrape, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	s := scrape{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if i < 0 {
			return nil, fmt.Errorf("malformed sample line %q", l)
		}
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("sample line %q: %v", l, err)
		}
		s[l[:i]] = v
	}
	return s, sc.Err()
}

// sum adds the samples of metric name whose labels contain every one of
// labels (each `key="value"`), and reports whether there was any.
func (s scrape) sum(name string, labels ...string) (float64, bool) {
	var total float64
	found := false
	for series, v := range s {
		n, rest, _ := strings.Cut(series, "{")
		if n != name {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(rest, l)
		}
		if ok {
			total, found = total+v, true
		}
	}
	return total, found
}

// The coordinators and workers serve their metrics with the Prometheus
// exporter (-metrics-addr). Scraped during a run, the leader's completed
// counter grows as checkpoints complete, and its failed counter moves,
// with the reason, when a worker declines a checkpoint (-decline-every);
// the workers report their states' sizes; and the job still ends right.
func TestMetricsScrapedDuringARun(t *testing.T) {
	c := newCluster(t, 6)
	coords := map[string]*proc{}
	for _, n := range []string{"a", "b"} {
		name := "coord-1" + n
		coords[name] = c.coordinator(name, 3, "-metrics-addr", "127.0.0.1:0")
	}
	var workers []*proc
	var dumps []string
	for i := range 3 {
		extra := []string{"-metrics-addr", "127.0.0.1:0"}
		if i == 1 {
			extra = append(extra, "-decline-every", "4")
		}
		w, out := c.worker(1, i, 3, extra...)
		workers, dumps = append(workers, w), append(dumps, out)
	}
	var leader string
	c.waitFor("a leader", 30*time.Second, func() bool {
		var err error
		leader, err = etcdcoord.Leader(context.Background(), c.cli, etcdcoord.Job{Name: jobName})
		return err == nil
	}, workers...)
	addr := c.metricsAddr(coords[leader])

	const (
		completed = "stategen_checkpoint_completed_total"
		failed    = "stategen_checkpoint_failed_total"
		declined  = `stategen_checkpoint_abort_reason="declined"`
		ckpt      = `stategen_checkpoint_type="checkpoint"`
	)
	var last scrape
	read := func(name string, labels ...string) float64 {
		s, err := scrapeMetrics(t, addr)
		if err != nil {
			t.Fatalf("scraping %s (%s): %v", leader, addr, err)
		}
		last = s
		v, _ := s.sum(name, labels...)
		return v
	}
	var first float64
	c.waitFor("a completed checkpoint in the metrics", 60*time.Second, func() bool {
		first = read(completed, ckpt)
		return first >= 1
	}, workers...)
	c.waitFor("the completed counter to grow", 60*time.Second, func() bool { return read(completed, ckpt) > first }, workers...)
	c.waitFor("a declined checkpoint in the failed counter", 60*time.Second, func() bool { return read(failed, ckpt, declined) >= 1 }, workers...)
	done, _ := last.sum(completed, ckpt)
	fails, _ := last.sum(failed, ckpt)
	t.Logf("leader %s: %v completed, %v failed so far", leader, done, fails)
	for _, name := range []string{"stategen_checkpoint_duration_seconds_count", "stategen_checkpoint_last_size_bytes",
		"stategen_checkpoint_sync_duration_seconds_count", "stategen_checkpoint_started_total"} {
		if v, ok := last.sum(name); !ok || v <= 0 {
			t.Errorf("%s = %v (%v) on the leader", name, v, ok)
		}
	}
	// The standby records no checkpoints.
	for name, p := range coords {
		if name == leader {
			continue
		}
		s, err := scrapeMetrics(t, c.metricsAddr(p))
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := s.sum(completed); ok && v != 0 {
			t.Errorf("standby %s counts %v completed checkpoints", name, v)
		}
	}
	// A worker reports the sizes of its states once it has written a
	// snapshot.
	w0 := c.metricsAddr(workers[0])
	c.waitFor("worker 0's state sizes", 60*time.Second, func() bool {
		s, err := scrapeMetrics(t, w0)
		if err != nil {
			t.Fatalf("scraping worker 0: %v", err)
		}
		n, ok := s.sum("stategen_state_entries", `stategen_participant_id="clickstream/0"`)
		_, live := s.sum("stategen_store_snapshots_live")
		return ok && n > 0 && live
	}, workers...)

	c.finish(workers)
	c.verify(dumps)
}
