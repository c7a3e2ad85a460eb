package s3storage

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/minio/minio-go/v7"

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
		keys := 1_000_000
		if s := os.Getenv("STATEGEN_BENCH_KEYS"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				b.Fatalf("STATEGEN_BENCH_KEYS=%q: want a positive integer", s)
			}
			keys = n
		}
		const maxP = 128
		v := newView(maxP, runtime.FullRange(maxP), keys, 40)
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
