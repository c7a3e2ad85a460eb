package storekit

import (
	"fmt"
	goruntime "runtime"
	"sync/atomic"

	"github.com/stategen/stategen/runtime"
)

// Snapshots counts a store's snapshots: it numbers them, counts the live
// ones and reports those collected unreleased. Every backend keeps one and
// gives each snapshot it takes a Lease from it, so that Release, Scan after
// Release, Release during a Scan and leaks behave alike on every Store:
//
//   - Release succeeds once; a second Release returns runtime.ErrReleased,
//     as does a Scan begun after it.
//   - Release may come from any goroutine, also while Scans run: the
//     snapshot stays live (its resources held, LiveSnapshots counting it)
//     until the last running Scan ends, which then frees it. A Scan that
//     notices the Release stops with runtime.ErrReleased.
//   - A snapshot that becomes unreachable without a Release is released by
//     a runtime cleanup and reported to the onLeak function, with its
//     sequence number.
//
// Snapshots is safe for concurrent use.
type Snapshots struct {
	live   atomic.Int64
	seq    atomic.Uint64
	onLeak func(seq uint64)
}

// NewSnapshots returns the snapshot count of a store; onLeak, if not nil,
// is called (on a runtime cleanup goroutine) for each snapshot collected
// unreleased.
func NewSnapshots(onLeak func(seq uint64)) *Snapshots {
	return &Snapshots{onLeak: onLeak}
}

// Live returns the number of snapshots not yet freed: released or not,
// those with a Scan running count.
func (s *Snapshots) Live() int { return int(s.live.Load()) }

// Any reports whether a snapshot is live: the one atomic load a
// copy-on-write writer pays to learn whether it may write in place.
func (s *Snapshots) Any() bool { return s.live.Load() != 0 }

// Track starts tracking snapshot, which becomes live, under the next
// sequence number, and arms its leak cleanup. free, if not nil, is called
// exactly once, when the snapshot stops being live: at its Release if no
// Scan is running, else when the last running Scan ends; its error is
// returned by that Release or EndScan. Neither free nor anything it
// references may reference snapshot, or the cleanup never runs.
func Track[T any](s *Snapshots, snapshot *T, free func() error) *Lease {
	l := &Lease{s: s, seq: s.seq.Add(1), free: free}
	s.live.Add(1)
	goruntime.AddCleanup(snapshot, func(l *Lease) {
		if released, _ := l.release(); released && l.s.onLeak != nil {
			l.s.onLeak(l.seq)
		}
	}, l)
	return l
}

// Lease is one tracked snapshot: whether it was released, whether it is
// freed, and how many Scans are running.
type Lease struct {
	// state is relBit | freedBit | scans<<scanShift.
	state atomic.Uint64
	s     *Snapshots
	seq   uint64
	free  func() error
}

const (
	relBit    = 1
	freedBit  = 2
	scanShift = 2
)

// Seq returns the snapshot's sequence number, for messages.
func (l *Lease) Seq() uint64 { return l.seq }

// Release marks the snapshot released, and frees it if no Scan is running.
// A second Release returns runtime.ErrReleased.
func (l *Lease) Release() error {
	released, err := l.release()
	if !released {
		return fmt.Errorf("%w: snapshot %d", runtime.ErrReleased, l.seq)
	}
	return err
}

func (l *Lease) release() (bool, error) {
	for {
		s := l.state.Load()
		if s&relBit != 0 {
			return false, nil
		}
		n := s | relBit
		if s>>scanShift == 0 {
			n |= freedBit
		}
		if l.state.CompareAndSwap(s, n) {
			if n&freedBit != 0 {
				return true, l.doFree()
			}
			return true, nil
		}
	}
}

func (l *Lease) doFree() error {
	l.s.live.Add(-1)
	if l.free != nil {
		return l.free()
	}
	return nil
}

// BeginScan registers a Scan of state; it returns runtime.ErrReleased once
// the snapshot is released. Each successful BeginScan must be followed by
// one EndScan.
func (l *Lease) BeginScan(state string) error {
	for {
		s := l.state.Load()
		if s&relBit != 0 {
			return fmt.Errorf("%w: snapshot %d: cannot scan state %q", runtime.ErrReleased, l.seq, state)
		}
		if l.state.CompareAndSwap(s, s+1<<scanShift) {
			return nil
		}
	}
}

// EndScan ends a Scan, freeing the snapshot if it was released meanwhile
// and this was the last Scan running; it returns free's error then.
func (l *Lease) EndScan() error {
	for {
		s := l.state.Load()
		n := s - 1<<scanShift
		if n&relBit != 0 && n>>scanShift == 0 {
			n |= freedBit
		}
		if l.state.CompareAndSwap(s, n) {
			if n&freedBit != 0 && s&freedBit == 0 {
				return l.doFree()
			}
			return nil
		}
	}
}

// Released reports whether Release was called: a running Scan checks it
// between pages and stops with ErrReleasedDuringScan.
func (l *Lease) Released() bool { return l.state.Load()&relBit != 0 }

// Freed reports whether the snapshot is no longer live: a copy-on-write
// writer need not protect what it sees.
func (l *Lease) Freed() bool { return l.state.Load()&freedBit != 0 }

// ErrReleasedDuringScan returns the error of a Scan of state that stopped
// because the snapshot was released while it ran.
func (l *Lease) ErrReleasedDuringScan(state string) error {
	return fmt.Errorf("%w: snapshot %d released during a Scan of state %q", runtime.ErrReleased, l.seq, state)
}
