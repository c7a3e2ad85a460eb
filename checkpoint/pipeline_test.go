package checkpoint_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	gort "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
)

// probeView wraps a View: it runs before ahead of every Scan (an error it
// returns is Scan's), counts the Scans running at once, and counts the
// Scans that start after finished is set.
type probeView struct {
	runtime.View
	before   func(state string, kg int) error
	running  atomic.Int32
	peak     atomic.Int32
	finished atomic.Bool
	late     atomic.Int32
}

func (p *probeView) Scan(state string, kg int, fn func(runtime.Entry) error) error {
	if p.finished.Load() {
		p.late.Add(1)
	}
	n := p.running.Add(1)
	defer p.running.Add(-1)
	for {
		old := p.peak.Load()
		if n <= old || p.peak.CompareAndSwap(old, n) {
			break
		}
	}
	if p.before != nil {
		if err := p.before(state, kg); err != nil {
			return err
		}
	}
	return p.View.Scan(state, kg, fn)
}

// checkStopped checks, right after a write returned, that it left nothing
// running: no Scan of p in progress or started since, and no encoder
// goroutine. WriteFile waits for its goroutines, so no delay is needed
// (and the tests of this package do not run in parallel).
func (p *probeView) checkStopped(t *testing.T) {
	t.Helper()
	p.finished.Store(true)
	if n := p.running.Load(); n != 0 {
		t.Errorf("%d Scans still running after the write returned", n)
	}
	buf := make([]byte, 1<<20)
	stacks := buf[:gort.Stack(buf, true)]
	if bytes.Contains(stacks, []byte("checkpoint.(*fileWriter).encodeJobs")) {
		t.Errorf("an encoder goroutine outlived the write:\n%s", stacks)
	}
	if n := p.late.Load(); n != 0 {
		t.Errorf("%d Scans started after the write returned", n)
	}
}

func TestPipelinedWriterWritesTheSequentialBytes(t *testing.T) {
	views := map[string]*memView{
		"maxP=1":                 genView(11, 1, runtime.FullRange(1), 200, 3000),
		"maxP=8":                 genView(12, 8, runtime.FullRange(8), 300, 3000),
		"maxP=128":               genView(13, 128, runtime.FullRange(128), 2000, 3000),
		"maxP=128 sparse":        genView(14, 128, runtime.FullRange(128), 40, 0),
		"maxP=64 [10,50)":        genView(15, 64, runtime.KeyGroupRange{Start: 10, End: 50}, 500, 3000),
		"maxP=128 one key group": genView(16, 128, runtime.KeyGroupRange{Start: 7, End: 8}, 100, 3000),
	}
	for name, v := range views {
		for _, bs := range []int{1, 100, 512, 0} {
			want := fileBytes(t, v, &checkpoint.WriterOptions{BlockSize: bs, Concurrency: 1})
			for _, n := range []int{2, 3, 8, 200} {
				t.Run(fmt.Sprintf("%s/blockSize=%d/concurrency=%d", name, bs, n), func(t *testing.T) {
					got := fileBytes(t, v, &checkpoint.WriterOptions{BlockSize: bs, Concurrency: n})
					if !bytes.Equal(got, want) {
						t.Fatalf("the pipelined writer wrote %d bytes that differ from the sequential writer's %d", len(got), len(want))
					}
				})
			}
		}
	}
}

func TestPipelinedWriterScansKeyGroupsConcurrently(t *testing.T) {
	// The first Scans of key groups 0 and 1 wait for each other: a
	// writer that scanned one key group at a time would time out.
	started := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	var once [2]sync.Once
	var timedOut atomic.Bool
	p := &probeView{View: genView(21, 16, runtime.FullRange(16), 300, 0)}
	p.before = func(state string, kg int) error {
		if kg > 1 {
			return nil
		}
		once[kg].Do(func() {
			close(started[kg])
			select {
			case <-started[1-kg]:
			case <-time.After(10 * time.Second):
				timedOut.Store(true)
			}
		})
		return nil
	}
	if _, err := checkpoint.WriteFile(ctx, &bytes.Buffer{}, p, &checkpoint.WriterOptions{Concurrency: 2}); err != nil {
		t.Fatal(err)
	}
	p.checkStopped(t)
	if timedOut.Load() || p.peak.Load() < 2 {
		t.Errorf("with Concurrency 2, key groups 0 and 1 were not scanned at the same time (peak %d Scans at once)", p.peak.Load())
	}
}

// TestPipelinedWriterScanErrorAbortsTheWrite fails the Scan of one key
// group — the first, one in the middle while earlier ones are still being
// scanned, the last — and checks that the write fails with that error,
// leaving no object, no pending write and nothing running.
func TestPipelinedWriterScanErrorAbortsTheWrite(t *testing.T) {
	const maxP = 32
	for _, failKG := range []int{0, 9, maxP - 1} {
		t.Run(fmt.Sprintf("keyGroup=%d", failKG), func(t *testing.T) {
			boom := fmt.Errorf("boom in key group %d", failKG)
			failed := make(chan struct{})
			p := &probeView{View: genView(31, maxP, runtime.FullRange(maxP), 3000, 0)}
			p.before = func(state string, kg int) error {
				switch {
				case kg == failKG && state == "counts": // the first state
					// (A later state would deadlock the test: key group
					// failKG would have to run more blocks ahead of the
					// writer than the pipeline holds, while the writer
					// waits for key group failKG-1, which waits for this.)
					close(failed)
					return boom
				case kg == failKG-1:
					// The key group before is still being scanned when
					// the failure happens, so the writer is waiting for
					// it, not for the failed one.
					<-failed
				}
				return nil
			}
			s := checkpoint.NewMem()
			_, err := checkpoint.WriteInstance(ctx, s, "chk", "f", p, &checkpoint.WriterOptions{BlockSize: 256, Concurrency: 3})
			p.checkStopped(t)
			if !errors.Is(err, boom) {
				t.Fatalf("WriteInstance = %v, want the Scan's error", err)
			}
			if want := fmt.Sprintf(`state "counts", key group %d`, failKG); !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %s", err, want)
			}
			if objs, _ := s.Objects(ctx, "chk"); len(objs) != 0 {
				t.Errorf("a failed write left %v", objs)
			}
			if all, _ := s.List(ctx); len(all) != 0 {
				t.Errorf("a failed write left a pending write in %v", all)
			}
		})
	}
}

// TestPipelinedWriterCancellation cancels the context in the middle of a
// write, while encoders are blocked on full queues (small blocks, big key
// groups): the write fails with context.Canceled and leaves nothing.
func TestPipelinedWriterCancellation(t *testing.T) {
	d, files := dirOf(t)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := &probeView{View: genView(41, 16, runtime.FullRange(16), 4000, 0)}
	var scans atomic.Int32
	p.before = func(string, int) error {
		if scans.Add(1) == 30 {
			cancel()
		}
		return nil
	}
	_, err := checkpoint.WriteInstance(cctx, d, "chk", "op-0.sgc", p, &checkpoint.WriterOptions{BlockSize: 64, Concurrency: 4})
	p.checkStopped(t)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("WriteInstance = %v, want context.Canceled", err)
	}
	if got := files(); len(got) != 0 {
		t.Errorf("a cancelled write left %q", got)
	}
	if all, _ := checkpoint.List(ctx, d); len(all) != 0 {
		t.Errorf("a cancelled write left the committed checkpoints %q", all)
	}
}

func TestPipelinedWriterPanicInScanIsAnError(t *testing.T) {
	p := &probeView{View: genView(51, 16, runtime.FullRange(16), 300, 0)}
	p.before = func(_ string, kg int) error {
		if kg == 5 {
			panic("backend bug")
		}
		return nil
	}
	_, err := checkpoint.WriteFile(ctx, &bytes.Buffer{}, p, &checkpoint.WriterOptions{Concurrency: 2})
	p.checkStopped(t)
	if !errors.Is(err, checkpoint.ErrPanic) || !strings.Contains(err.Error(), "backend bug") || !strings.Contains(err.Error(), "key group 5") {
		t.Fatalf("WriteFile = %v, want ErrPanic naming the panic and the key group", err)
	}
}

// failingWriter accepts limit bytes, then fails.
type failingWriter struct {
	limit int
	err   error
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.limit {
		n := w.limit
		w.limit = 0
		return n, w.err
	}
	w.limit -= len(p)
	return len(p), nil
}

func TestPipelinedWriterOutputErrorStopsTheEncoders(t *testing.T) {
	full := errors.New("disk full")
	p := &probeView{View: genView(61, 16, runtime.FullRange(16), 3000, 0)}
	_, err := checkpoint.WriteFile(ctx, &failingWriter{limit: 10_000, err: full}, p,
		&checkpoint.WriterOptions{BlockSize: 512, Concurrency: 3})
	p.checkStopped(t)
	if !errors.Is(err, full) {
		t.Fatalf("WriteFile = %v, want the output's error", err)
	}
}

func TestWriterOptionsAreChecked(t *testing.T) {
	v := genView(71, 4, runtime.FullRange(4), 10, 0)
	for _, opts := range []checkpoint.WriterOptions{
		{Concurrency: -1},
		{Concurrency: checkpoint.MaxConcurrency + 1},
		{BlockSize: -1},
		{BlockSize: checkpoint.MaxBlockSize + 1},
	} {
		if _, err := checkpoint.WriteFile(ctx, &bytes.Buffer{}, v, &opts); err == nil {
			t.Errorf("WriteFile with %+v succeeded", opts)
		}
	}
	if n := checkpoint.DefaultConcurrency(); n < 1 || n > checkpoint.MaxDefaultConcurrency {
		t.Errorf("DefaultConcurrency() = %d", n)
	}
}
