package checkpointtest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
)

// Lifecycle drives a store through every way a snapshot can end, for a
// backend's resource-hygiene tests to wrap in a leak check:
//
//	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
//	checkpointtest.Lifecycle(t, func() runtime.Store { ... })
//
// It opens a store with open, writes every kind of state, and takes
// snapshots that are scanned and released, written to a checkpoint in the
// background, cancelled before and during the write, restored from into a
// second store of open's kind, and still open when the store closes (they
// stay readable until released); then it closes both stores.
func Lifecycle(t *testing.T, open func() runtime.Store) {
	t.Helper()
	ctx := context.Background()
	s := open()
	specs := []runtime.StateSpec{
		{Name: "v", Kind: runtime.KindValue},
		{Name: "l", Kind: runtime.KindList, SubKeyed: true},
		{Name: "m", Kind: runtime.KindMap},
		{Name: "sm", Kind: runtime.KindSortedMap, SubKeyed: true},
	}
	cfg := s.Config()
	for _, spec := range specs {
		st, err := s.Register(spec)
		if err != nil {
			t.Fatal(err)
		}
		for k := range 200 {
			var ns []byte
			if spec.SubKeyed {
				ns = []byte{byte(k % 3)}
			}
			key := runtime.MakeKey(binary.BigEndian.AppendUint32(nil, uint32(k)), ns, cfg.MaxParallelism)
			if !cfg.KeyGroups.Contains(key.Group()) {
				continue
			}
			v := []byte(fmt.Sprint(k))
			switch st := st.(type) {
			case runtime.ValueState:
				err = st.Put(key, v)
			case runtime.ListState:
				err = st.Add(key, v)
			case runtime.MapState:
				err = st.Put(key, v, v)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	snapshot := func() runtime.Snapshot { return snapshotOf(t, s) }
	scan := func(v runtime.View) int {
		t.Helper()
		n := 0
		for _, spec := range v.States() {
			for kg := range v.KeyGroups().All() {
				if err := v.Scan(spec.Name, kg, func(runtime.Entry) error { n++; return nil }); err != nil {
					t.Fatal(err)
				}
			}
		}
		return n
	}
	// Scanned and released.
	snap := snapshot()
	if scan(snap) == 0 {
		t.Fatal("the snapshot is empty")
	}
	if err := snap.Release(); err != nil {
		t.Fatal(err)
	}
	// Written in the background, as a checkpoint's asynchronous phase.
	mem := checkpoint.NewMem()
	if _, err := checkpoint.WriteAsync(ctx, snapshot(), 0, mem, "chk", "f", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	// Cancelled before the write starts, and during it.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := checkpoint.WriteAsync(cancelled, snapshot(), 0, mem, "chk", "g", nil).Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("a write with a cancelled context: %v", err)
	}
	a, err := checkpoint.SnapshotAsync(ctx, s, Blocking{mem}, "chk", "h", &checkpoint.WriterOptions{BlockSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	a.Cancel()
	if _, err := a.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled write: %v", err)
	}
	// Committed, and restored into a fresh store of the same kind.
	res, err := checkpoint.WriteAsync(ctx, snapshot(), 0, mem, "chk2", "f", nil).Wait()
	if err != nil {
		t.Fatal(err)
	}
	op, err := checkpoint.NewOperator("op", res.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Commit(ctx, mem, "chk2", &checkpoint.Metadata{Operators: []checkpoint.Operator{op}}); err != nil {
		t.Fatal(err)
	}
	fresh := open()
	if _, err := checkpoint.Restore(ctx, mem, "chk2", "op", 0, 1, fresh, nil); err != nil {
		t.Fatal(err)
	}
	freshSnap := snapshotOf(t, fresh)
	if got, want := scan(freshSnap), int(res.Snapshot.File.Entries); got != want {
		t.Fatalf("the restored store holds %d entries, the checkpoint %d", got, want)
	}
	// Still open when the store closes: it stays readable until released.
	late := snapshot()
	if err := fresh.Close(); err != nil {
		t.Fatal(err)
	}
	if err := freshSnap.Release(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if scan(late) == 0 {
		t.Fatal("the snapshot taken before Close is empty")
	}
	if err := late.Release(); err != nil {
		t.Fatal(err)
	}
}

func snapshotOf(t *testing.T, s runtime.Store) runtime.Snapshot {
	t.Helper()
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// Blocking is a Storage whose writes block until their context ends: a
// write that only cancellation stops.
type Blocking struct{ checkpoint.Storage }

// Create creates the object in the wrapped Storage and returns a writer
// whose Write waits for ctx to end and returns its error.
func (b Blocking) Create(ctx context.Context, ckpt, name string) (checkpoint.ObjectWriter, error) {
	w, err := b.Storage.Create(ctx, ckpt, name)
	if err != nil {
		return nil, err
	}
	return blockingWriter{w, ctx}, nil
}

type blockingWriter struct {
	checkpoint.ObjectWriter
	ctx context.Context
}

func (w blockingWriter) Write(p []byte) (int, error) {
	<-w.ctx.Done()
	return 0, w.ctx.Err()
}
