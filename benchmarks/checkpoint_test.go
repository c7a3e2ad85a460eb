package benchmarks

// Checkpoint benchmarks: writing a snapshot into the checkpoint format on
// disk, against a raw buffered write of the same number of bytes, and
// restoring it — whole, and one of four key-group ranges — into every
// backend, against the reader alone.
//
//	BenchmarkCheckpointWrite/backend=cow/keys=1M       SnapshotAsync + Wait: sync phase, scan, encode, fsync, commit
//	BenchmarkCheckpointWrite/backend=btree/keys=1M     the same from the btree backend
//	BenchmarkCheckpointWrite/backend=pebble/keys=1M    the same from the pebble backend (on disk)
//	BenchmarkCheckpointWrite/backend=view/keys=1M      WriteInstance of a View that generates the entries: the writer alone
//	BenchmarkCheckpointWrite/backend=rawwrite/keys=1M  the file's size in 64 KiB writes through a 256 KiB bufio.Writer, fsync
//	BenchmarkCheckpointWriteConcurrency/backend=cow/keys=1M/concurrency=1  the writer with 1, 2 or 4 encoding goroutines
//	BenchmarkCheckpointRestore/backend=cow/keys=1M     checkpoint.Restore of every key group into an empty store
//	BenchmarkCheckpointRestore/backend=reader/keys=1M  the same into a store that only counts the entries: the reader alone
//	BenchmarkCheckpointRestoreQuarter/backend=cow/keys=1M  instance 1 of 4 restores its key groups; reports read-fraction
//	BenchmarkCheckpointRestoreReadAhead/backend=cow/keys=1M/readahead=off  Restore with the reader's read-ahead off, and on
//
// Every run has one Value state of int64 keys (8-byte order-preserving
// encoding) and 24-byte values, maxParallelism 128. MB/s is of the data
// file's bytes (a quarter of them for RestoreQuarter); the restores also
// report read-bytes/op, the bytes the reader read. Every benchmark reports
// cpu-ns/op, the process CPU time of the measured part: the writer and the
// reader use more than one core. Compare a backend's
// write with rawwrite, and its restore with its write, within one run:
//
//	go test ./benchmarks -run '^$' -bench 'BenchmarkCheckpoint' -benchmem -count 6 > ckpt.txt
//	go tool benchstat -col /backend ckpt.txt
//
// The number of keys follows STATEGEN_BENCH_KEYS (10K, 1M, ...), 10K under
// -short, else 1M.

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
)

const ckptMaxP = 128

var ckptSpec = runtime.StateSpec{Name: "value", Kind: runtime.KindValue, Fingerprint: "int64->Val24"}

// ckptKeys returns the number of keys: the workload's (STATEGEN_BENCH_KEYS,
// 10K under -short or a smoke run, else 1M).
func ckptKeys(b *testing.B) int { return load(b).keys }

func ckptKey(i int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(i)^(1<<63)) }

func ckptValue(dst []byte, i int) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, uint64(i))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(i)*3)
	return binary.LittleEndian.AppendUint64(dst, uint64(i)*7)
}

// ckptView is the benchmark's state as a runtime.View that holds only the
// key indexes, so it can be written without a backend.
type ckptView struct {
	groups [][]int // key indexes per key group
}

func newCkptView(n int) *ckptView {
	v := &ckptView{groups: make([][]int, ckptMaxP)}
	for i := range n {
		kg := runtime.KeyGroupOfHash(runtime.HashKey(ckptKey(i)), ckptMaxP)
		v.groups[kg] = append(v.groups[kg], i)
	}
	return v
}

func (v *ckptView) MaxParallelism() int              { return ckptMaxP }
func (v *ckptView) KeyGroups() runtime.KeyGroupRange { return runtime.FullRange(ckptMaxP) }
func (v *ckptView) States() []runtime.StateSpec      { return []runtime.StateSpec{ckptSpec} }
func (v *ckptView) Scan(_ string, kg int, fn func(runtime.Entry) error) error {
	var k, val [24]byte
	for _, i := range v.groups[kg] {
		e := runtime.Entry{Key: binary.BigEndian.AppendUint64(k[:0], uint64(i)^(1<<63)), Value: ckptValue(val[:0], i)}
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// ckptTarget makes the stores the checkpoint benchmarks write from and
// restore into: new returns an empty store and a func that closes it and
// removes its files.
type ckptTarget struct {
	name string
	new  func(b *testing.B, cfg runtime.StoreConfig) (runtime.Store, func())
}

// ckptTargets are the stores of every backend of the suite (stores), each
// in a directory of its own that done removes. The reference model is not
// one of them: its snapshots are deep copies, by design, and its numbers
// say nothing about the checkpoint code.
func ckptTargets() []ckptTarget {
	var out []ckptTarget
	for _, be := range stores {
		out = append(out, ckptTarget{be.name, func(b *testing.B, cfg runtime.StoreConfig) (runtime.Store, func()) {
			dir := filepath.Join(b.TempDir(), be.name)
			s, err := be.open(dir, cfg)
			if err != nil {
				b.Fatal(err)
			}
			return s, func() {
				s.Close()
				os.RemoveAll(dir)
			}
		}})
	}
	return out
}

// ckptFilledStore returns a store of backend be holding the benchmark's n
// entries. It lives until top, the benchmark of one backend, ends: the
// sub-benchmark that measures it runs several times (for b.N) on the same
// store.
func ckptFilledStore(top *testing.B, be ckptTarget, n int) runtime.Store {
	s, done := be.new(top, runtime.StoreConfig{MaxParallelism: ckptMaxP})
	top.Cleanup(done)
	st, err := s.Register(ckptSpec)
	if err != nil {
		top.Fatal(err)
	}
	vs := st.(runtime.ValueState)
	var val []byte
	for i := range n {
		val = ckptValue(val[:0], i)
		if err := vs.Put(runtime.MakeKey(ckptKey(i), nil, ckptMaxP), val); err != nil {
			top.Fatal(err)
		}
	}
	return s
}

// ckptTimer is the benchmark timer, which also sums the process CPU time
// of the timed parts and reports it as cpu-ns/op: on a shared machine it is
// steadier than the wall time, and it shows what the writer's and
// reader's goroutines cost in CPU for the wall time they save.
type ckptTimer struct {
	b          *testing.B
	t0, cpuSum int64
}

// newCkptTimer resets b's timer and starts the CPU clock.
func newCkptTimer(b *testing.B) *ckptTimer {
	b.ResetTimer()
	return &ckptTimer{b: b, t0: cpuTime()}
}

func (t *ckptTimer) stop() {
	t.b.StopTimer()
	t.cpuSum += cpuTime() - t.t0
}

func (t *ckptTimer) start() {
	t.t0 = cpuTime()
	t.b.StartTimer()
}

// report stops the clock (the timer is running at the end of a loop) and
// reports cpu-ns/op.
func (t *ckptTimer) report() {
	t.stop()
	t.b.ReportMetric(float64(t.cpuSum)/float64(t.b.N), "cpu-ns/op")
}

// ckptFileSize returns the size of the data file of n keys.
func ckptFileSize(b *testing.B, n int) int64 {
	snap, err := checkpoint.WriteFile(context.Background(), io.Discard, newCkptView(n), nil)
	if err != nil {
		b.Fatal(err)
	}
	return snap.File.Size
}

// ckptSnapshotWrite measures SnapshotAsync + Wait of store into a fresh
// checkpoint of dir per iteration, with opts.
func ckptSnapshotWrite(b *testing.B, store runtime.Store, n int, size int64, opts *checkpoint.WriterOptions) {
	ctx := context.Background()
	dir, err := checkpoint.NewDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	var syncNs int64
	b.SetBytes(size)
	tm := newCkptTimer(b)
	for i := 0; i < b.N; i++ {
		name := checkpoint.CheckpointName(uint64(i))
		a, err := checkpoint.SnapshotAsync(ctx, store, dir, name, "op-0.sgc", opts)
		if err != nil {
			b.Fatal(err)
		}
		res, err := a.Wait()
		if err != nil {
			b.Fatal(err)
		}
		syncNs += int64(res.Stats.SyncDuration)
		tm.stop()
		if res.Snapshot.File.Size != size || res.Snapshot.File.Entries != int64(n) {
			b.Fatalf("wrote %+v, want %d bytes, %d entries", res.Snapshot.File, size, n)
		}
		if err := checkpoint.Delete(ctx, dir, name); err != nil {
			b.Fatal(err)
		}
		tm.start()
	}
	tm.report()
	b.ReportMetric(float64(syncNs)/float64(b.N), "sync-ns/op")
}

// ckptViewWrite measures WriteInstance of v per iteration, with opts.
func ckptViewWrite(b *testing.B, v runtime.View, size int64, opts *checkpoint.WriterOptions) {
	ctx := context.Background()
	dir, err := checkpoint.NewDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	tm := newCkptTimer(b)
	for i := 0; i < b.N; i++ {
		name := checkpoint.CheckpointName(uint64(i))
		snap, err := checkpoint.WriteInstance(ctx, dir, name, "op-0.sgc", v, opts)
		if err != nil {
			b.Fatal(err)
		}
		tm.stop()
		if snap.File.Size != size {
			b.Fatalf("wrote %d bytes, want %d", snap.File.Size, size)
		}
		if err := checkpoint.Delete(ctx, dir, name); err != nil {
			b.Fatal(err)
		}
		tm.start()
	}
	tm.report()
}

func BenchmarkCheckpointWrite(b *testing.B) {
	n := ckptKeys(b)
	size := ckptFileSize(b, n)
	keys := "keys=" + sizeName(n)
	for _, be := range ckptTargets() {
		b.Run("backend="+be.name, func(b *testing.B) {
			store := ckptFilledStore(b, be, n)
			b.Run(keys, func(b *testing.B) { ckptSnapshotWrite(b, store, n, size, nil) })
		})
	}
	// The writer on its own: the same entries from a View that generates
	// them, with no backend to scan.
	b.Run("backend=view", func(b *testing.B) {
		v := newCkptView(n)
		b.Run(keys, func(b *testing.B) { ckptViewWrite(b, v, size, nil) })
	})
	b.Run("backend=rawwrite", func(b *testing.B) {
		b.Run(keys, func(b *testing.B) {
			dir := b.TempDir()
			chunk := make([]byte, 64<<10)
			for i := range chunk {
				chunk[i] = byte(i * 7)
			}
			b.SetBytes(size)
			tm := newCkptTimer(b)
			for i := 0; i < b.N; i++ {
				path := filepath.Join(dir, fmt.Sprintf("raw-%d", i))
				f, err := os.Create(path)
				if err != nil {
					b.Fatal(err)
				}
				w := bufio.NewWriterSize(f, 256<<10)
				for left := size; left > 0; {
					m := min(left, int64(len(chunk)))
					if _, err := w.Write(chunk[:m]); err != nil {
						b.Fatal(err)
					}
					left -= m
				}
				if err := w.Flush(); err != nil {
					b.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
				if err := f.Close(); err != nil {
					b.Fatal(err)
				}
				tm.stop()
				os.Remove(path)
				tm.start()
			}
			tm.report()
		})
	})
}

// BenchmarkCheckpointWriteConcurrency is BenchmarkCheckpointWrite of cow
// and of the generating View with 1 (sequential), 2 and 4 encoding
// goroutines (WriterOptions.Concurrency): what the pipeline buys.
func BenchmarkCheckpointWriteConcurrency(b *testing.B) {
	n := ckptKeys(b)
	size := ckptFileSize(b, n)
	keys := "keys=" + sizeName(n)
	concs := []int{1, 2, 4}
	b.Run("backend=cow", func(b *testing.B) {
		store := ckptFilledStore(b, ckptTargets()[0], n)
		b.Run(keys, func(b *testing.B) {
			for _, c := range concs {
				b.Run(fmt.Sprintf("concurrency=%d", c), func(b *testing.B) {
					ckptSnapshotWrite(b, store, n, size, &checkpoint.WriterOptions{Concurrency: c})
				})
			}
		})
	})
	b.Run("backend=view", func(b *testing.B) {
		v := newCkptView(n)
		b.Run(keys, func(b *testing.B) {
			for _, c := range concs {
				b.Run(fmt.Sprintf("concurrency=%d", c), func(b *testing.B) {
					ckptViewWrite(b, v, size, &checkpoint.WriterOptions{Concurrency: c})
				})
			}
		})
	})
}

// ckptCommitted writes the benchmark's state as a committed checkpoint of
// one instance in a temporary directory of b.
func ckptCommitted(b *testing.B, n int) (checkpoint.Storage, int64) {
	ctx := context.Background()
	dir, err := checkpoint.NewDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	snap, err := checkpoint.WriteInstance(ctx, dir, "chk", "op-0.sgc", newCkptView(n), nil)
	if err != nil {
		b.Fatal(err)
	}
	op, err := checkpoint.NewOperator("op", snap)
	if err != nil {
		b.Fatal(err)
	}
	if err := checkpoint.Commit(ctx, dir, "chk", &checkpoint.Metadata{Operators: []checkpoint.Operator{op}}); err != nil {
		b.Fatal(err)
	}
	return dir, snap.File.Size
}

// readerStore is a runtime.Store that restores by scanning every entry and
// keeping nothing: restoring into it measures the checkpoint reader alone.
type readerStore struct {
	cfg     runtime.StoreConfig
	entries int64
}

func (s *readerStore) Config() runtime.StoreConfig { return s.cfg }
func (s *readerStore) Register(spec runtime.StateSpec) (runtime.State, error) {
	return nil, fmt.Errorf("readerStore: Register %q: not supported", spec.Name)
}
func (s *readerStore) States() []runtime.StateSpec { return nil }
func (s *readerStore) Snapshot() (runtime.Snapshot, error) {
	return nil, fmt.Errorf("readerStore: Snapshot: not supported")
}
func (s *readerStore) Close() error { return nil }
func (s *readerStore) Restore(src runtime.View) error {
	count := func(runtime.Entry) error { s.entries++; return nil }
	groups := src.KeyGroups().Intersect(s.cfg.KeyGroups)
	for _, spec := range src.States() {
		for kg := range groups.All() {
			if err := src.Scan(spec.Name, kg, count); err != nil {
				return err
			}
		}
	}
	return nil
}

// ckptRestoreTargets are the backends and the reader alone.
func ckptRestoreTargets() []ckptTarget {
	return append(ckptTargets(), ckptTarget{"reader", func(b *testing.B, cfg runtime.StoreConfig) (runtime.Store, func()) {
		cfg, err := cfg.Normalize()
		if err != nil {
			b.Fatal(err)
		}
		return &readerStore{cfg: cfg}, func() {}
	}})
}

// ckptRestore measures the restore of instance index of parallelism from
// the checkpoint in dir into fresh stores of be, with opts, and reports the
// bytes read per restore.
func ckptRestore(b *testing.B, be ckptTarget, dir checkpoint.Storage, index, parallelism int, wantEntries int, opts *checkpoint.RestoreOptions) (bytesRead int64) {
	ctx := context.Background()
	kgs, err := runtime.KeyGroupRangeForOperator(ckptMaxP, parallelism, index)
	if err != nil {
		b.Fatal(err)
	}
	tm := newCkptTimer(b)
	for i := 0; i < b.N; i++ {
		tm.stop()
		store, done := be.new(b, runtime.StoreConfig{MaxParallelism: ckptMaxP, KeyGroups: kgs})
		tm.start()
		st, err := checkpoint.Restore(ctx, dir, "chk", "op", index, parallelism, store, opts)
		if err != nil {
			b.Fatal(err)
		}
		tm.stop()
		if wantEntries >= 0 && st.Entries != int64(wantEntries) {
			b.Fatalf("restored %d entries, want %d", st.Entries, wantEntries)
		}
		bytesRead = st.BytesRead
		done()
		tm.start()
	}
	tm.report()
	b.ReportMetric(float64(bytesRead), "read-bytes/op")
	return bytesRead
}

func BenchmarkCheckpointRestore(b *testing.B) {
	n := ckptKeys(b)
	dir, size := ckptCommitted(b, n)
	for _, be := range ckptRestoreTargets() {
		b.Run("backend="+be.name, func(b *testing.B) {
			b.Run("keys="+sizeName(n), func(b *testing.B) {
				b.SetBytes(size)
				ckptRestore(b, be, dir, 0, 1, n, nil)
				b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
			})
		})
	}
}

func BenchmarkCheckpointRestoreQuarter(b *testing.B) {
	n := ckptKeys(b)
	dir, size := ckptCommitted(b, n)
	for _, be := range ckptRestoreTargets() {
		b.Run("backend="+be.name, func(b *testing.B) {
			b.Run("keys="+sizeName(n), func(b *testing.B) {
				b.SetBytes(size / 4)
				read := ckptRestore(b, be, dir, 1, 4, -1, nil)
				frac := float64(read) / float64(size)
				b.ReportMetric(frac, "read-fraction")
				if frac > 0.30 {
					b.Errorf("restoring one of four key-group ranges read %d of %d bytes (%.3f), more than 30%%", read, size, frac)
				}
			})
		})
	}
}

// BenchmarkCheckpointRestoreReadAhead is BenchmarkCheckpointRestore of cow,
// btree and the reader alone with read-ahead off (the store's goroutine
// reads, checks and decodes as it inserts) and on (RestoreOptions.ReadAhead,
// 2 blocks): what overlapping the reader with the inserts buys.
func BenchmarkCheckpointRestoreReadAhead(b *testing.B) {
	n := ckptKeys(b)
	dir, size := ckptCommitted(b, n)
	targets := ckptRestoreTargets()
	for _, be := range []ckptTarget{targets[0], targets[1], targets[len(targets)-1]} {
		b.Run("backend="+be.name, func(b *testing.B) {
			b.Run("keys="+sizeName(n), func(b *testing.B) {
				for _, ra := range []int{-1, 2} {
					name := "readahead=off"
					if ra > 0 {
						name = fmt.Sprintf("readahead=%d", ra)
					}
					b.Run(name, func(b *testing.B) {
						b.SetBytes(size)
						ckptRestore(b, be, dir, 0, 1, n, &checkpoint.RestoreOptions{ReadAhead: ra})
					})
				}
			})
		})
	}
}
