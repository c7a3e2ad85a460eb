package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/stategen/stategen/runtime"
)

// SnapshotStats are the costs of one asynchronous snapshot.
type SnapshotStats struct {
	// SyncDuration is the synchronous phase: Store.Snapshot on the
	// operator's goroutine.
	SyncDuration time.Duration
	// AsyncDuration is the write phase on the runner's goroutine, from its
	// start to the data file's commit (or the failure).
	AsyncDuration time.Duration
	// BytesWritten counts the bytes of the data file that reached the
	// storage (after a failure, those written before it).
	BytesWritten int64
	// Entries counts the entries written.
	Entries int64
}

// SnapshotResult is the outcome of a successful asynchronous snapshot.
type SnapshotResult struct {
	// Snapshot describes the committed data file: what a participant
	// acknowledges.
	Snapshot InstanceSnapshot
	// Stats are its costs.
	Stats SnapshotStats
}

// AsyncSnapshot is the handle of a snapshot being written in the
// background. Wait for it with Wait or Done; stop it with Cancel.
type AsyncSnapshot struct {
	cancel context.CancelFunc
	done   chan struct{}
	// Set before done is closed.
	result SnapshotResult
	err    error
}

// SnapshotAsync takes a snapshot of store and writes it in the background
// as object name of checkpoint ckpt in s. It runs the synchronous phase,
// store.Snapshot, on the caller's goroutine — the operator's — and times
// it; then it returns while WriteAsync writes the snapshot. If Snapshot
// fails, SnapshotAsync returns its error and no handle.
func SnapshotAsync(ctx context.Context, store runtime.Store, s Storage, ckpt, name string, opts *WriterOptions) (*AsyncSnapshot, error) {
	t0 := time.Now()
	snap, err := store.Snapshot()
	syncPhase := time.Since(t0)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: snapshot for %s/%s: %w", ckpt, name, err)
	}
	return WriteAsync(ctx, snap, syncPhase, s, ckpt, name, opts), nil
}

// WriteAsync writes snap on a new goroutine as object name of checkpoint
// ckpt in s (see WriteInstance) and releases snap when done, whatever
// happens: success, an error, cancellation through ctx or Cancel, even a
// panic in the store's Scan, which becomes an error wrapping ErrPanic. A
// failed or cancelled write leaves no object behind. syncPhase is the
// duration of the synchronous phase the caller measured, reported in the
// stats as is.
func WriteAsync(ctx context.Context, snap runtime.Snapshot, syncPhase time.Duration, s Storage, ckpt, name string, opts *WriterOptions) *AsyncSnapshot {
	ctx, cancel := context.WithCancel(ctx)
	a := &AsyncSnapshot{cancel: cancel, done: make(chan struct{})}
	a.result.Stats.SyncDuration = syncPhase
	if snap == nil {
		a.err = fmt.Errorf("checkpoint: WriteAsync of %s/%s: nil snapshot", ckpt, name)
		cancel()
		close(a.done)
		return a
	}
	go a.run(ctx, snap, s, ckpt, name, opts)
	return a
}

func (a *AsyncSnapshot) run(ctx context.Context, snap runtime.Snapshot, s Storage, ckpt, name string, opts *WriterOptions) {
	t0 := time.Now()
	counter := &countingStorage{Storage: s}
	defer close(a.done)
	defer a.cancel()
	defer func() {
		if r := recover(); r != nil {
			a.err = fmt.Errorf("%w writing %s/%s: %v\n%s", ErrPanic, ckpt, name, r, debug.Stack())
		}
		if err := snap.Release(); err != nil {
			a.err = errors.Join(a.err, fmt.Errorf("checkpoint: releasing the snapshot for %s/%s: %w", ckpt, name, err))
		}
		a.result.Stats.AsyncDuration = time.Since(t0)
		a.result.Stats.BytesWritten = counter.n
		if a.err != nil {
			a.result.Snapshot = InstanceSnapshot{}
		}
	}()
	is, err := WriteInstance(ctx, counter, ckpt, name, snap, opts)
	if err != nil {
		a.err = err
		return
	}
	a.result.Snapshot = is
	a.result.Stats.Entries = is.File.Entries
}

// Done returns a channel that is closed when the snapshot has been written
// or has failed, and released.
func (a *AsyncSnapshot) Done() <-chan struct{} { return a.done }

// Wait waits for the snapshot and returns its result. The error, if any,
// wraps the cause: the context's error after a cancellation, ErrPanic after
// a panic, the storage's or the store's error otherwise. The stats are set
// also with an error.
func (a *AsyncSnapshot) Wait() (SnapshotResult, error) {
	<-a.done
	return a.result, a.err
}

// Cancel stops the write; Wait then returns an error wrapping
// context.Canceled, unless the write had already finished. The partial
// object is removed and the snapshot released.
func (a *AsyncSnapshot) Cancel() { a.cancel() }

// countingStorage counts the bytes written through its writers; the runner
// owns it, so n needs no lock once the writes are done.
type countingStorage struct {
	Storage
	n int64
}

func (c *countingStorage) Create(ctx context.Context, ckpt, name string) (ObjectWriter, error) {
	w, err := c.Storage.Create(ctx, ckpt, name)
	if err != nil {
		return nil, err
	}
	return &countingWriter{ObjectWriter: w, n: &c.n}, nil
}

type countingWriter struct {
	ObjectWriter
	n *int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.ObjectWriter.Write(p)
	*w.n += int64(n)
	return n, err
}
