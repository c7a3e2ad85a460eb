package metrics_test

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/stategen/stategen/backends/btree"
	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/backends/pebble"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/internal/testenv/metrictest"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/coordinator/metrics"
)

const maxP = 16

func checkpointRestoreStats() checkpoint.RestoreStats {
	return checkpoint.RestoreStats{Files: 1, BytesRead: 4096, Entries: 70, Duration: 1500 * time.Millisecond}
}

// fill registers a value state "clicks" and puts n keys of 8-byte values,
// and a list state "events" to whose n/2 even keys it appends 3 elements
// of 4 bytes each.
func fill(t *testing.T, s runtime.Store, n int) {
	t.Helper()
	v, err := s.Register(runtime.StateSpec{Name: "clicks", Kind: runtime.KindValue})
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.Register(runtime.StateSpec{Name: "events", Kind: runtime.KindList})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		key := runtime.AppendUint64Key(nil, uint64(i))
		k := runtime.MakeKey(key, nil, maxP)
		if err := v.(runtime.ValueState).Put(k, binary.BigEndian.AppendUint64(nil, uint64(i))); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if err := l.(runtime.ListState).AddAll(k, [][]byte{[]byte("aaaa"), []byte("bbbb"), []byte("cccc")}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// write writes snap as a checkpoint object, as an Instance does.
func write(t *testing.T, snap runtime.Snapshot, name string) {
	t.Helper()
	a := checkpoint.WriteAsync(context.Background(), snap, 0, checkpoint.NewMem(), "chk-1", name,
		&checkpoint.WriterOptions{Concurrency: 4})
	if _, err := a.Wait(); err != nil {
		t.Fatal(err)
	}
}

// The entries and bytes of each state are what the latest snapshot written
// counted, on every backend alike; live snapshots are counted while they
// live; an older snapshot published late does not overwrite a newer one;
// and after Close nothing is observed.
func TestStoreReportsStateSizesOfTheLatestWrite(t *testing.T) {
	stores := map[string]func(runtime.StoreConfig) (runtime.Store, error){
		"cow":   func(c runtime.StoreConfig) (runtime.Store, error) { return cow.New(cow.Options{StoreConfig: c}) },
		"btree": func(c runtime.StoreConfig) (runtime.Store, error) { return btree.New(btree.Options{StoreConfig: c}) },
		"pebble": func(c runtime.StoreConfig) (runtime.Store, error) {
			return pebble.New(pebble.Options{StoreConfig: c, InMemory: true})
		},
	}
	for name, mk := range stores {
		t.Run("backend="+name, func(t *testing.T) {
			store, err := mk(runtime.StoreConfig{MaxParallelism: maxP, KeyGroups: runtime.FullRange(maxP)})
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			r := metrictest.New(t)
			m, err := metrics.NewStore(r.Provider, "op/0", store)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			fill(t, store, 100)
			op := who("op/0")
			state := func(s string) attribute.KeyValue { return attribute.String(metrics.AttrState, s) }

			d := r.Collect(t)
			if d.Has(metrics.StateEntries) {
				t.Errorf("state entries before any write: %v", d.Points(metrics.StateEntries))
			}
			old, err := store.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			old = m.Measure(old)
			if got, _ := r.Collect(t).Int(metrics.StoreLiveSnapshots, op); got != 1 {
				t.Errorf("live snapshots %d with one taken, want 1", got)
			}
			write(t, old, "old.sgc")
			if got, _ := r.Collect(t).Int(metrics.StoreLiveSnapshots, op); got != 0 {
				t.Errorf("live snapshots %d after the write released it, want 0", got)
			}
			// A newer snapshot, after more writes, is published first.
			fill(t, store, 200)
			snap, err := store.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			snap = m.Measure(snap)
			write(t, snap, "new.sgc")
			m.Publish(snap)
			m.Publish(old)
			d = r.Collect(t)
			clicks, clickBytes, events, eventBytes := sizes(200)
			for _, c := range []struct {
				state          string
				entries, bytes int64
			}{{"clicks", clicks, clickBytes}, {"events", events, eventBytes}} {
				if got, ok := d.Int(metrics.StateEntries, op, state(c.state)); !ok || got != c.entries {
					t.Errorf("%s entries %d (%v), want %d; points %v", c.state, got, ok, c.entries, d.Points(metrics.StateEntries))
				}
				if got, ok := d.Int(metrics.StateSize, op, state(c.state)); !ok || got != c.bytes {
					t.Errorf("%s bytes %d (%v), want %d", c.state, got, ok, c.bytes)
				}
			}
			// Pebble reports its engine's metrics; the others have none.
			lsm := d.Has(metrics.LSML0Files)
			if lsm != (name == "pebble") {
				t.Errorf("LSM metrics reported: %v", lsm)
			}
			if lsm {
				for _, res := range []string{"hit", "miss"} {
					if _, ok := d.Int(metrics.LSMBlockCacheLookups, op, attribute.String(metrics.AttrCacheResult, res)); !ok {
						t.Errorf("no block-cache %s count: %v", res, d.Points(metrics.LSMBlockCacheLookups))
					}
				}
				for _, n := range []string{metrics.LSMCompactions, metrics.LSML0Sublevels, metrics.LSMMemTableSize, metrics.LSMDiskUsage, metrics.LSMReadAmplification} {
					if _, ok := d.Int(n, op); !ok {
						t.Errorf("%s not observed: %v", n, d.Points(n))
					}
				}
				if got, _ := d.Int(metrics.LSMMemTableSize, op); got <= 0 {
					t.Errorf("memtable size %d after writes", got)
				}
			}
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			if d := r.Collect(t); d.Has(metrics.StateEntries) || d.Has(metrics.StoreLiveSnapshots) {
				t.Errorf("observed after Close: %v %v", d.Points(metrics.StateEntries), d.Points(metrics.StoreLiveSnapshots))
			}
		})
	}
}

// sizes returns the entries of each state, and their bytes, that fill(100)
// and then fill(n) leave: values are overwritten, lists appended to.
func sizes(n int) (clicks, clickBytes, events, eventBytes int64) {
	for i := range n {
		kl := int64(len(runtime.AppendUint64Key(nil, uint64(i))))
		clicks++
		clickBytes += kl + 8
		if i%2 == 0 {
			elems := int64(3)
			if i < 100 {
				elems = 6 // fill(100) added three elements already
			}
			events += elems
			eventBytes += elems * (kl + 4)
		}
	}
	return clicks, clickBytes, events, eventBytes
}

// A store metrics provider that fails is an error naming what failed; a
// closed pebble store reports nothing instead of failing the collection.
func TestStoreErrorsAndClosedStores(t *testing.T) {
	store, err := pebble.New(pebble.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: maxP, KeyGroups: runtime.FullRange(maxP)}, InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{metrics.StateSize, metrics.LSML0Files, "callback"} {
		if _, err := metrics.NewStore(metrictest.Failing(name), "op/0", store); !errors.Is(err, metrics.ErrInstrument) || !errors.Is(err, metrictest.ErrRefused) {
			t.Errorf("NewStore refusing %s: %v", name, err)
		}
	}
	r := metrictest.New(t)
	m, err := metrics.NewStore(r.Provider, "op/0", store)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	if d := r.Collect(t); d.Has(metrics.LSML0Files) {
		t.Errorf("a closed store's LSM metrics: %v", d.Points(metrics.LSML0Files))
	}
	var none *metrics.Store
	snap := runtime.Snapshot(nil)
	if none.Measure(snap) != nil || none.Close() != nil {
		t.Error("a nil Store is not a no-op")
	}
	none.Publish(snap)
}

// RecordRestore records a restore's duration, bytes and entries for its
// participant.
func TestRecordRestore(t *testing.T) {
	r := metrictest.New(t)
	ctx := context.Background()
	if err := metrics.RecordRestore(ctx, r.Provider, "op/1", checkpointRestoreStats()); err != nil {
		t.Fatal(err)
	}
	if err := metrics.RecordRestore(ctx, metrictest.Failing(metrics.RestoreDuration), "op/1", checkpointRestoreStats()); !errors.Is(err, metrics.ErrInstrument) {
		t.Errorf("RecordRestore with a failing provider: %v", err)
	}
	d := r.Collect(t)
	op := who("op/1")
	if n, ok := d.Count(metrics.RestoreDuration, op); !ok || n != 1 {
		t.Errorf("restore durations %d (%v), want 1", n, ok)
	}
	if s, _ := d.Sum(metrics.RestoreDuration, op); s != 1.5 {
		t.Errorf("restore duration %v, want 1.5", s)
	}
	if n, ok := d.Count(metrics.RestoreSize, op); !ok || n != 1 {
		t.Errorf("restore sizes %d (%v), want 1", n, ok)
	}
	if n, _ := d.Int(metrics.RestoreEntries, op); n != 70 {
		t.Errorf("restore entries %d, want 70", n)
	}
}
