package s3storage

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/internal/testenv/miniotest"
	"github.com/stategen/stategen/runtime"
)

// BenchmarkS3Upload measures checkpoint upload throughput to MinIO on
// loopback, against the baseline of the same bytes in the same run:
//
//	path=storage     64 MiB through an ObjectWriter of the storage, written
//	                 in 64 KiB blocks as the checkpoint writer writes them,
//	                 then committed (default options: 8 MiB parts, 2 at once)
//	path=putobject   the same 64 MiB with one minio-go PutObject from
//	                 memory (its parallel multipart upload, no payload hash),
//	                 the `mc cp`-style raw upload
//	path=checkpoint  a real checkpoint data file of STATEGEN_BENCH_KEYS
//	                 entries (default 1M) written by checkpoint.WriteInstance,
//	                 encoding included
//
// -short uses 8 MiB and the smoke run's key count.
func BenchmarkS3Upload(b *testing.B) {
	srv := miniotest.Shared(b)
	size := 64 << 20
	if testing.Short() {
		size = 8 << 20
	}
	data := pattern(size, 10)
	o := testOptions(srv, srv.NewBucket(b), "bench")
	o.PartSize, o.Retry = 0, RetryPolicy{} // the defaults
	st := newBucket(b, o)

	b.Run("path=storage", func(b *testing.B) {
		b.SetBytes(int64(size))
		for i := range b.N {
			ckpt := checkpoint.CheckpointName(uint64(i))
			w, err := st.Create(ctx, ckpt, "data")
			if err != nil {
				b.Fatal(err)
			}
			for off := 0; off < len(data); off += 64 << 10 {
				if _, err := w.Write(data[off:min(len(data), off+64<<10)]); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Commit(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := st.Delete(ctx, ckpt); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})

	b.Run("path=putobject", func(b *testing.B) {
		b.SetBytes(int64(size))
		for i := range b.N {
			key := fmt.Sprintf("bench/raw-%d", i)
			_, err := st.client.PutObject(ctx, st.bucket, key, bytes.NewReader(data), int64(size),
				minio.PutObjectOptions{DisableContentSha256: true})
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := st.client.RemoveObject(ctx, st.bucket, key, minio.RemoveObjectOptions{}); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})

	b.Run("path=checkpoint", func(b *testing.B) {
		const maxP = 128
		v := newView(maxP, runtime.FullRange(maxP), benchKeys(b), 40)
		b.ResetTimer()
		for i := range b.N {
			ckpt := checkpoint.CheckpointName(uint64(i))
			snap, err := checkpoint.WriteInstance(ctx, st, ckpt, "op-0.sgc", v, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.SetBytes(snap.File.Size)
			if err := st.Delete(ctx, ckpt); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
}

// benchKeys is the benchmarks' key count: STATEGEN_BENCH_KEYS, default 1M.
func benchKeys(b *testing.B) int {
	keys := 1_000_000
	if s := os.Getenv("STATEGEN_BENCH_KEYS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("STATEGEN_BENCH_KEYS=%q: want a positive integer", s)
		}
		keys = n
	}
	return keys
}

// BenchmarkRestoreLocalCopy measures local recovery (checkpoint.LocalCopy):
// the restore into a cow store of one instance's checkpoint of
// STATEGEN_BENCH_KEYS entries (default 1M, 40-byte values) from MinIO on
// loopback (from=remote), and through a local copy on a local directory
// in front of it (from=local: a new LocalCopy each time, as after a
// restart, so every iteration verifies the copy — its CRC-32C, and its
// size and header against the remote object).
func BenchmarkRestoreLocalCopy(b *testing.B) {
	srv := miniotest.Shared(b)
	remote := newBucket(b, testOptions(srv, srv.NewBucket(b), "bench"))
	dir, err := checkpoint.NewDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	l, err := checkpoint.NewLocalCopy(dir)
	if err != nil {
		b.Fatal(err)
	}
	const maxP = 128
	keys := benchKeys(b)
	v := newView(maxP, runtime.FullRange(maxP), keys, 40)
	ckpt := checkpoint.CheckpointName(1)
	is, err := checkpoint.WriteInstance(ctx, l.Storage(remote), ckpt, "op-0.sgc", v, nil)
	if err != nil {
		b.Fatal(err)
	}
	op, err := checkpoint.NewOperator("op", is)
	if err != nil {
		b.Fatal(err)
	}
	if err := checkpoint.Commit(ctx, remote, ckpt, &checkpoint.Metadata{CheckpointID: 1, Operators: []checkpoint.Operator{op}}); err != nil {
		b.Fatal(err)
	}
	for _, from := range []string{"remote", "local"} {
		b.Run(fmt.Sprintf("keys=%s/from=%s", keysName(keys), from), func(b *testing.B) {
			b.SetBytes(is.File.Size)
			for range b.N {
				b.StopTimer()
				store, err := cow.New(cow.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: maxP}})
				if err != nil {
					b.Fatal(err)
				}
				s := checkpoint.Storage(remote)
				var lc *checkpoint.LocalCopy
				if from == "local" {
					if lc, err = checkpoint.NewLocalCopy(dir); err != nil {
						b.Fatal(err)
					}
					s = lc.Storage(remote)
				}
				b.StartTimer()
				st, err := checkpoint.Restore(ctx, s, ckpt, "op", 0, 1, store, nil)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if st.Entries != int64(keys) {
					b.Fatalf("restored %d entries, want %d", st.Entries, keys)
				}
				if lc != nil {
					if ls := lc.Stats(); ls.Hits != 1 || ls.Misses+ls.Rejected != 0 {
						b.Fatalf("local copy: %+v, want the file read locally", ls)
					}
				}
				_ = store.Close()
				b.StartTimer()
			}
		})
	}
}

// keysName is n as the benchmarks name key counts: 1M, 10K, 500.
func keysName(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dK", n/1000)
	}
	return fmt.Sprint(n)
}
