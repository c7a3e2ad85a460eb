package benchmarks

// Checkpoint benchmarks: writing a snapshot into the checkpoint format on
// disk, against a raw buffered write of the same number of bytes, and
// restoring it — whole, and one of four key-group ranges.
//
//	BenchmarkCheckpointWrite/backend=cow/keys=1M       SnapshotAsync + Wait: sync phase, scan, encode, fsync, commit
//	BenchmarkCheckpointWrite/backend=model/keys=1M     the same from the reference model (its sync phase deep-copies)
//	BenchmarkCheckpointWrite/backend=view/keys=1M      WriteInstance of a View that generates the entries: the writer alone
//	BenchmarkCheckpointWrite/backend=rawwrite/keys=1M  the file's size in 64 KiB writes through a 256 KiB bufio.Writer, fsync
//	BenchmarkCheckpointRestore/backend=cow/keys=1M     checkpoint.Restore of every key group into an empty store
//	BenchmarkCheckpointRestoreQuarter/backend=cow/keys=1M  instance 1 of 4 restores its key groups; reports read-fraction
//
// Every run has one Value state of int64 keys (8-byte order-preserving
// encoding) and 24-byte values, maxParallelism 128. MB/s is of the data
// file's bytes. The number of keys follows STATEGEN_BENCH_KEYS (10K, 1M,
// ...), 10K under -short, else 1M.

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

const ckptMaxP = 128

var ckptSpec = runtime.StateSpec{Name: "value", Kind: runtime.KindValue, Fingerprint: "int64->Val24"}

// ckptKeys returns the number of keys: STATEGEN_BENCH_KEYS, 10K under
// -short, else 1M.
func ckptKeys(b *testing.B) int {
	if s := os.Getenv("STATEGEN_BENCH_KEYS"); s != "" {
		mult := 1
		switch {
		case strings.HasSuffix(s, "K"):
			mult, s = 1000, strings.TrimSuffix(s, "K")
		case strings.HasSuffix(s, "M"):
			mult, s = 1<<20, strings.TrimSuffix(s, "M")
		}
		n, err := strconv.Atoi(s)
		if err != nil || n*mult < 64 {
			b.Fatalf("STATEGEN_BENCH_KEYS=%q: want a number of at least 64, like 10K or 1M", os.Getenv("STATEGEN_BENCH_KEYS"))
		}
		return n * mult
	}
	if testing.Short() {
		return 10_000
	}
	return 1 << 20
}

func ckptSizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dK", n/1000)
	}
	return strconv.Itoa(n)
}

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

type ckptBackend struct {
	name string
	new  func(b *testing.B, cfg runtime.StoreConfig) runtime.Store
}

var ckptBackends = []ckptBackend{
	{"cow", func(b *testing.B, cfg runtime.StoreConfig) runtime.Store {
		s, err := cow.New(cow.Options{StoreConfig: cfg})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}},
	{"model", func(b *testing.B, cfg runtime.StoreConfig) runtime.Store {
		s, err := storetest.NewModel(cfg)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}},
}

// ckptFilled caches the filled store of each backend and size across runs.
var ckptFilled sync.Map // "backend/n" -> runtime.Store

func ckptFilledStore(b *testing.B, be ckptBackend, n int) runtime.Store {
	key := fmt.Sprintf("%s/%d", be.name, n)
	if s, ok := ckptFilled.Load(key); ok {
		return s.(runtime.Store)
	}
	s := be.new(b, runtime.StoreConfig{MaxParallelism: ckptMaxP})
	st, err := s.Register(ckptSpec)
	if err != nil {
		b.Fatal(err)
	}
	vs := st.(runtime.ValueState)
	var val []byte
	for i := range n {
		val = ckptValue(val[:0], i)
		if err := vs.Put(runtime.MakeKey(ckptKey(i), nil, ckptMaxP), val); err != nil {
			b.Fatal(err)
		}
	}
	ckptFilled.Store(key, s)
	return s
}

// ckptFileSize returns the size of the data file of n keys.
func ckptFileSize(b *testing.B, n int) int64 {
	snap, err := checkpoint.WriteFile(context.Background(), io.Discard, newCkptView(n), nil)
	if err != nil {
		b.Fatal(err)
	}
	return snap.File.Size
}

func BenchmarkCheckpointWrite(b *testing.B) {
	ctx := context.Background()
	n := ckptKeys(b)
	size := ckptFileSize(b, n)
	keys := "keys=" + ckptSizeName(n)
	for _, be := range ckptBackends {
		b.Run("backend="+be.name, func(b *testing.B) {
			b.Run(keys, func(b *testing.B) {
				store := ckptFilledStore(b, be, n)
				dir, err := checkpoint.NewDir(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				var syncNs int64
				b.SetBytes(size)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					name := checkpoint.CheckpointName(uint64(i))
					a, err := checkpoint.SnapshotAsync(ctx, store, dir, name, "op-0.sgc", nil)
					if err != nil {
						b.Fatal(err)
					}
					res, err := a.Wait()
					if err != nil {
						b.Fatal(err)
					}
					syncNs += int64(res.Stats.SyncDuration)
					b.StopTimer()
					if res.Snapshot.File.Size != size || res.Snapshot.File.Entries != int64(n) {
						b.Fatalf("wrote %+v, want %d bytes, %d entries", res.Snapshot.File, size, n)
					}
					if err := checkpoint.Delete(ctx, dir, name); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				b.ReportMetric(float64(syncNs)/float64(b.N), "sync-ns/op")
			})
		})
	}
	// The writer on its own: the same entries from a View that generates
	// them, with no backend to scan.
	b.Run("backend=view", func(b *testing.B) {
		b.Run(keys, func(b *testing.B) {
			v := newCkptView(n)
			dir, err := checkpoint.NewDir(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(size)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				name := checkpoint.CheckpointName(uint64(i))
				snap, err := checkpoint.WriteInstance(ctx, dir, name, "op-0.sgc", v, nil)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if snap.File.Size != size {
					b.Fatalf("wrote %d bytes, want %d", snap.File.Size, size)
				}
				if err := checkpoint.Delete(ctx, dir, name); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	})
	b.Run("backend=rawwrite", func(b *testing.B) {
		b.Run(keys, func(b *testing.B) {
			dir := b.TempDir()
			chunk := make([]byte, 64<<10)
			for i := range chunk {
				chunk[i] = byte(i * 7)
			}
			b.SetBytes(size)
			b.ResetTimer()
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
				b.StopTimer()
				os.Remove(path)
				b.StartTimer()
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

func BenchmarkCheckpointRestore(b *testing.B) {
	ctx := context.Background()
	n := ckptKeys(b)
	dir, size := ckptCommitted(b, n)
	for _, be := range ckptBackends {
		b.Run("backend="+be.name, func(b *testing.B) {
			b.Run("keys="+ckptSizeName(n), func(b *testing.B) {
				b.SetBytes(size)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					store := be.new(b, runtime.StoreConfig{MaxParallelism: ckptMaxP})
					b.StartTimer()
					st, err := checkpoint.Restore(ctx, dir, "chk", "op", 0, 1, store, nil)
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					if st.Entries != int64(n) {
						b.Fatalf("restored %d entries, want %d", st.Entries, n)
					}
					store.Close()
					b.StartTimer()
				}
				b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
			})
		})
	}
}

func BenchmarkCheckpointRestoreQuarter(b *testing.B) {
	ctx := context.Background()
	n := ckptKeys(b)
	dir, size := ckptCommitted(b, n)
	for _, be := range ckptBackends {
		b.Run("backend="+be.name, func(b *testing.B) {
			b.Run("keys="+ckptSizeName(n), func(b *testing.B) {
				kgs, err := runtime.KeyGroupRangeForOperator(ckptMaxP, 4, 1)
				if err != nil {
					b.Fatal(err)
				}
				var read int64
				b.SetBytes(size / 4)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					store := be.new(b, runtime.StoreConfig{MaxParallelism: ckptMaxP, KeyGroups: kgs})
					b.StartTimer()
					st, err := checkpoint.Restore(ctx, dir, "chk", "op", 1, 4, store, nil)
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					read = st.BytesRead
					store.Close()
					b.StartTimer()
				}
				frac := float64(read) / float64(size)
				b.ReportMetric(frac, "read-fraction")
				if frac > 0.30 {
					b.Errorf("restoring one of four key-group ranges read %d of %d bytes (%.3f), more than 30%%", read, size, frac)
				}
			})
		})
	}
}
