package nexmark

import (
	"flag"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// benchEvents returns the number of events of a benchmark pass: EventsEnv
// if set, else SmokeEvents under -short and in smoke runs, else
// DefaultEvents. A bad EventsEnv fails b.
func benchEvents(b *testing.B) int {
	if s, ok := os.LookupEnv(EventsEnv); ok {
		n, err := ParseEvents(s)
		if err != nil {
			b.Fatal(err)
		}
		return n
	}
	if testing.Short() || smokeRun() {
		return SmokeEvents
	}
	return DefaultEvents
}

// smokeRun reports whether -benchtime asks for at most 10 iterations, as a
// smoke run (-benchtime=1x) does.
func smokeRun() bool {
	f := flag.Lookup("test.benchtime")
	if f == nil {
		return false
	}
	s := f.Value.String()
	n, err := strconv.Atoi(strings.TrimSuffix(s, "x"))
	return strings.HasSuffix(s, "x") && err == nil && n <= 10
}

// checkpointInterval is the processing time between two checkpoints of
// the checkpoint=1s variant.
const checkpointInterval = time.Second

// BenchmarkNexmark runs each query, and the five in one pass
// (query=all), over a pre-generated stream on one goroutine: on every
// backend through the typed handles and timers, in plain Go beside them
// (backend=plain), and on every backend again with a checkpoint every
// second of processing time (checkpoint=1s):
//
//	BenchmarkNexmark/query=q5/backend=cow/events=200K
//	BenchmarkNexmark/query=q5/backend=plain/events=200K
//	BenchmarkNexmark/query=q5/backend=cow/events=200K/checkpoint=1s
//
// An iteration is a pass over the whole stream into a new store, ending
// with the watermark at the end of time. Besides ns/op (per pass), it
// reports events/s and allocs/event (every allocation of the process
// during the pass, checkpoint writers included), and checkpoints/op for
// the checkpoint=1s variant. The first pass of each is checked against the
// plain-Go rows.
func BenchmarkNexmark(b *testing.B) {
	n := benchEvents(b)
	events := stream(n)
	size := "/events=" + EventsName(n)
	for _, name := range append(slices.Clone(Queries), "all") {
		b.Run("query="+name, func(b *testing.B) {
			want := plainOutput(b, name, n)
			for _, be := range backends {
				b.Run("backend="+be.name+size, func(b *testing.B) { benchStore(b, be, name, events, want, false) })
			}
			b.Run("backend=plain"+size, func(b *testing.B) { benchPlain(b, name, events, want) })
			for _, be := range backends {
				b.Run("backend="+be.name+size+"/checkpoint=1s", func(b *testing.B) { benchStore(b, be, name, events, want, true) })
			}
		})
	}
}

// passMeter measures the passes of a benchmark: the allocations of the
// process while the timer runs, reported per event with events/s.
type passMeter struct {
	b      *testing.B
	events int
	allocs uint64
	ms     goruntime.MemStats
}

// start settles the heap, so that no pass pays for another's garbage, and
// starts the timer.
func (m *passMeter) start() {
	goruntime.GC()
	goruntime.ReadMemStats(&m.ms)
	m.allocs -= m.ms.Mallocs
	m.b.StartTimer()
}

// stop stops the timer.
func (m *passMeter) stop() {
	m.b.StopTimer()
	goruntime.ReadMemStats(&m.ms)
	m.allocs += m.ms.Mallocs
}

func (m *passMeter) report() {
	if m.b.N == 0 {
		return
	}
	total := float64(m.events) * float64(m.b.N)
	if s := m.b.Elapsed().Seconds(); s > 0 {
		m.b.ReportMetric(total/s, "events/s")
	}
	m.b.ReportMetric(float64(m.allocs)/total, "allocs/event")
}

// checkRows fails b if out's rows of query name differ from want's.
func checkRows(b *testing.B, name string, want, out *Output) {
	d, err := Diff(name, want, out, 5)
	if err != nil {
		b.Fatal(err)
	}
	if len(d) > 0 {
		b.Fatalf("the rows differ from plain Go's:\n%s", joinLines(d))
	}
}

// benchStore runs query name on a new store of be per pass, with a
// checkpoint every second if checkpoints. Before each pass it runs the
// query in plain Go, off the clock, and it reports speed-vs-plain: the
// plain passes' time over its own, the fraction of plain Go's events/s it
// reached, each pass paired with a plain one a moment before it. (A ratio
// of two medians taken minutes apart holds whatever spells of speed this
// machine went through in between, which move a median by a third.)
func benchStore(b *testing.B, be backend, name string, events []Event, want *Output, checkpoints bool) {
	m := &passMeter{b: b, events: len(events)}
	completed := 0
	var elapsed time.Duration // processing time since the last checkpoint
	var plain time.Duration   // the paired plain passes'
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		plain += plainPass(b, name, events)
		dir := b.TempDir()
		store, err := be.open(filepath.Join(dir, "store"))
		if err != nil {
			b.Fatal(err)
		}
		out := &Output{}
		q, err := NewQuery(name, store, out)
		if err != nil {
			b.Fatal(err)
		}
		var c *checkpointer
		var tick func(int) error
		if checkpoints {
			if c, err = newCheckpointer(store, filepath.Join(dir, "checkpoints"), checkpointInterval); err != nil {
				b.Fatal(err)
			}
			tick = c.tick
		}
		m.start()
		if c != nil {
			c.resume(elapsed)
		}
		err = Run(q, events, tick)
		m.stop()
		if err != nil {
			b.Fatal(err)
		}
		if c != nil {
			elapsed = c.sinceLast()
			// The stream's end: the checkpoint in flight, if any, completes
			// off the clock.
			if err := c.finish(); err != nil {
				b.Fatal(err)
			}
			completed += c.completed
		}
		if err := store.Close(); err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			checkRows(b, name, want, out)
		}
	}
	m.report()
	if checkpoints && b.N > 0 {
		b.ReportMetric(float64(completed)/float64(b.N), "checkpoints/op")
	}
	if s := b.Elapsed(); s > 0 && b.N > 0 {
		b.ReportMetric(plain.Seconds()/s.Seconds(), "speed-vs-plain")
	}
}

// plainPass runs query name in plain Go over events, from a settled heap,
// and returns its time.
func plainPass(b *testing.B, name string, events []Event) time.Duration {
	q, err := NewPlain(name, &Output{})
	if err != nil {
		b.Fatal(err)
	}
	goruntime.GC()
	start := time.Now()
	err = Run(q, events, nil)
	d := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// benchPlain runs query name in plain Go per pass.
func benchPlain(b *testing.B, name string, events []Event, want *Output) {
	m := &passMeter{b: b, events: len(events)}
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		out := &Output{}
		q, err := NewPlain(name, out)
		if err != nil {
			b.Fatal(err)
		}
		m.start()
		err = Run(q, events, nil)
		m.stop()
		if err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			checkRows(b, name, want, out)
		}
	}
	m.report()
}
