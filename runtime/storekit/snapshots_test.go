package storekit

import (
	"errors"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stategen/stategen/runtime"
)

type fakeSnap struct{ _ [16]byte }

func TestLeaseReleaseAndScans(t *testing.T) {
	s := NewSnapshots(nil)
	frees := 0
	snap := &fakeSnap{}
	l := Track(s, snap, func() error { frees++; return errors.New("close failed") })
	if l.Seq() != 1 || s.Live() != 1 || !s.Any() {
		t.Fatalf("after Track: seq %d, live %d, any %v; want 1, 1, true", l.Seq(), s.Live(), s.Any())
	}
	if err := l.BeginScan("a"); err != nil {
		t.Fatalf("BeginScan: %v", err)
	}
	if err := l.BeginScan("b"); err != nil {
		t.Fatalf("second BeginScan: %v", err)
	}
	// Released while two Scans run: not freed until both end, and free's
	// error comes from the EndScan that frees.
	if err := l.Release(); err != nil {
		t.Fatalf("Release during Scans: %v", err)
	}
	if !l.Released() || l.Freed() || frees != 0 || s.Live() != 1 {
		t.Fatalf("released during Scans: released %v, freed %v, frees %d, live %d; want true, false, 0, 1", l.Released(), l.Freed(), frees, s.Live())
	}
	if err := l.BeginScan("c"); !errors.Is(err, runtime.ErrReleased) {
		t.Fatalf("BeginScan after Release: %v, want ErrReleased", err)
	}
	if err := l.EndScan(); err != nil || frees != 0 {
		t.Fatalf("first EndScan: %v, %d frees; want nil, 0", err, frees)
	}
	if err := l.EndScan(); err == nil || err.Error() != "close failed" || frees != 1 {
		t.Fatalf("last EndScan: %v, %d frees; want free's error, 1", err, frees)
	}
	if !l.Freed() || s.Live() != 0 || s.Any() {
		t.Fatalf("after the last Scan: freed %v, live %d", l.Freed(), s.Live())
	}
	if err := l.Release(); !errors.Is(err, runtime.ErrReleased) {
		t.Fatalf("second Release: %v, want ErrReleased", err)
	}
	if frees != 1 {
		t.Fatalf("free called %d times, want 1", frees)
	}
	goruntime.KeepAlive(snap)

	// Released with no Scan running: freed at once, free's error returned.
	l2 := Track(s, &fakeSnap{}, func() error { return errors.New("x") })
	if l2.Seq() != 2 {
		t.Fatalf("second lease has seq %d, want 2", l2.Seq())
	}
	if err := l2.Release(); err == nil || err.Error() != "x" || !l2.Freed() {
		t.Fatalf("Release: %v (freed %v), want free's error", err, l2.Freed())
	}
}

func TestLeaseConcurrentReleaseFreesOnce(t *testing.T) {
	for range 200 {
		s := NewSnapshots(nil)
		var frees atomic.Int32
		snap := &fakeSnap{}
		l := Track(s, snap, func() error { frees.Add(1); return nil })
		var wg sync.WaitGroup
		var ok atomic.Int32
		for range 4 {
			wg.Add(2)
			go func() {
				defer wg.Done()
				if l.BeginScan("s") == nil {
					_ = l.EndScan()
				}
			}()
			go func() {
				defer wg.Done()
				if l.Release() == nil {
					ok.Add(1)
				}
			}()
		}
		wg.Wait()
		if ok.Load() != 1 || frees.Load() != 1 || s.Live() != 0 {
			t.Fatalf("%d Releases succeeded, %d frees, live %d; want 1, 1, 0", ok.Load(), frees.Load(), s.Live())
		}
		goruntime.KeepAlive(snap)
	}
}

func TestLeakedSnapshotIsReleasedAndReported(t *testing.T) {
	leaked := make(chan uint64, 1)
	s := NewSnapshots(func(seq uint64) { leaked <- seq })
	freed := make(chan struct{})
	func() {
		Track(s, &fakeSnap{}, func() error { close(freed); return nil })
	}()
	deadline := time.After(10 * time.Second)
	for {
		goruntime.GC()
		select {
		case seq := <-leaked:
			if seq != 1 {
				t.Fatalf("leak reported for snapshot %d, want 1", seq)
			}
			<-freed
			if s.Live() != 0 {
				t.Fatalf("Live = %d after the leak was reported", s.Live())
			}
			return
		case <-deadline:
			t.Fatal("a snapshot collected unreleased was not reported")
		case <-time.After(10 * time.Millisecond):
		}
	}
}
