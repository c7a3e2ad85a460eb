package s3storage

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/internal/testenv/miniotest"
)

// TestMain shares one MinIO server among the package's tests (started on
// first use) and stops it at the end.
func TestMain(m *testing.M) {
	// minio-go pauses up to DefaultRetryUnit after a failed attempt even
	// with its retries off (MaxRetries: 1); the tests that inject hundreds
	// of failures would spend minutes there. The package's own policy
	// (fastRetry) is what they test.
	minio.DefaultRetryUnit = time.Millisecond
	os.Exit(miniotest.Main(m))
}

var ctx = context.Background()

// fastRetry keeps the tests that inject failures quick: the backoff is
// tested on its own (TestBackoff).
var fastRetry = RetryPolicy{MaxAttempts: 6, InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}

// testOptions returns options for bucket on srv, with the smallest part
// size S3 allows so that multipart uploads start at 5 MiB.
func testOptions(srv *miniotest.Server, bucket, prefix string) Options {
	return Options{
		Bucket:          bucket,
		Prefix:          prefix,
		Endpoint:        srv.Endpoint,
		AccessKeyID:     miniotest.AccessKey,
		SecretAccessKey: miniotest.SecretKey,
		PartSize:        MinPartSize,
		Retry:           fastRetry,
	}
}

func newBucket(t testing.TB, o Options) *Bucket {
	t.Helper()
	b, err := New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var prefixSeq atomic.Int64

// freshStorage returns a Bucket on a new bucket of the shared server, at
// the bucket's root, or under a new nested prefix of a bucket shared by
// the tests.
func freshStorage(t *testing.T, nested bool) *Bucket {
	srv := miniotest.Shared(t)
	if !nested {
		return newBucket(t, testOptions(srv, srv.NewBucket(t), ""))
	}
	prefix := fmt.Sprintf("jobs/%d/checkpoints", prefixSeq.Add(1))
	return newBucket(t, testOptions(srv, sharedBucket(t, srv), prefix))
}

var shared struct {
	sync.Mutex
	bucket string
}

// sharedBucket returns a bucket that the tests share, made on first use.
func sharedBucket(t testing.TB, srv *miniotest.Server) string {
	shared.Lock()
	defer shared.Unlock()
	if shared.bucket == "" {
		shared.bucket = srv.NewBucket(t)
	}
	return shared.bucket
}

func put(t testing.TB, s checkpoint.Storage, ckpt, name string, data []byte) {
	t.Helper()
	w, err := s.Create(ctx, ckpt, name)
	if err != nil {
		t.Fatalf("Create(%s, %s): %v", ckpt, name, err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatalf("Write(%s/%s): %v", ckpt, name, err)
	}
	if err := w.Commit(); err != nil {
		t.Fatalf("Commit(%s/%s): %v", ckpt, name, err)
	}
}

func get(t testing.TB, s checkpoint.Storage, ckpt, name string) []byte {
	t.Helper()
	o, err := s.Open(ctx, ckpt, name)
	if err != nil {
		t.Fatalf("Open(%s, %s): %v", ckpt, name, err)
	}
	defer o.Close()
	b := make([]byte, o.Size())
	if n, err := o.ReadAt(b, 0); n != len(b) {
		t.Fatalf("ReadAt(%s/%s): read %d of %d bytes: %v", ckpt, name, n, len(b), err)
	}
	return b
}
