package s3storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/checkpoint/storagetest"
	"github.com/stategen/stategen/internal/testenv/miniotest"
	"github.com/stategen/stategen/runtime"
)

// TestConformance runs the storage conformance suite, unchanged, against
// MinIO: at a bucket's root and under a nested prefix.
func TestConformance(t *testing.T) {
	for _, nested := range []bool{false, true} {
		t.Run(fmt.Sprintf("nested=%v", nested), func(t *testing.T) {
			storagetest.Run(t, func(t *testing.T) checkpoint.Storage { return freshStorage(t, nested) })
		})
	}
}

// rawKeys lists every key of the bucket under prefix, pending markers
// included.
func rawKeys(t testing.TB, b *Bucket, prefix string) []string {
	t.Helper()
	var keys []string
	for o := range b.client.ListObjects(ctx, b.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}

// incompleteUploads lists the incomplete multipart uploads of key.
func incompleteUploads(t testing.TB, b *Bucket, key string) []string {
	t.Helper()
	var ids []string
	for u := range b.client.ListIncompleteUploads(ctx, b.bucket, key, true) {
		if u.Err != nil {
			t.Fatal(u.Err)
		}
		if u.Key == key {
			ids = append(ids, u.UploadID)
		}
	}
	return ids
}

// pattern returns n bytes that differ at every offset of interest.
func pattern(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	p := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			p[i+j] = byte(v >> (8 * j))
		}
	}
	return p
}

// writeChunks writes data to w in chunks of odd sizes, as a checkpoint
// writer's blocks would come.
func writeChunks(t testing.TB, w io.Writer, data []byte) {
	t.Helper()
	for off := 0; off < len(data); {
		n := min(len(data)-off, 65537+off%1000)
		if k, err := w.Write(data[off : off+n]); err != nil || k != n {
			t.Fatalf("Write at %d: wrote %d of %d: %v", off, k, n, err)
		}
		off += n
	}
}

// TestLargeObjectIsMultipartAndInvisibleUntilCommit writes an object of
// several parts and checks, before Commit, that only the pending marker
// and an incomplete upload exist; after it, that the object is the
// multipart object of the right parts and reads back, whole and in ranges.
func TestLargeObjectIsMultipartAndInvisibleUntilCommit(t *testing.T) {
	b := freshStorage(t, true)
	data := pattern(3*MinPartSize+MinPartSize/2+7, 1)
	w, err := b.Create(ctx, "chk-1", "big.sgc")
	if err != nil {
		t.Fatal(err)
	}
	writeChunks(t, w, data)
	key := b.Key("chk-1", "big.sgc")
	wr := w.(*writer)
	wr.wg.Wait() // the parts flushed so far are uploaded
	if wr.uploadID == "" || wr.next != 4 {
		t.Fatalf("after %d bytes: upload %q, next part %d; want an upload with 3 parts sent", len(data), wr.uploadID, wr.next)
	}
	if wr.allocated > b.concurrency+1 {
		t.Errorf("the writer made %d part buffers, more than Concurrency+1 = %d", wr.allocated, b.concurrency+1)
	}
	if got := incompleteUploads(t, b, key); len(got) != 1 {
		t.Errorf("incomplete uploads of %s before Commit: %q, want one", key, got)
	}
	keys := rawKeys(t, b, b.root)
	if len(keys) != 1 || !strings.Contains(keys[0], pendingPrefix) {
		t.Errorf("keys before Commit = %q, want only the pending marker", keys)
	}
	if _, err := b.Stat(ctx, "chk-1", "big.sgc"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("Stat before Commit = %v, want ErrNotFound", err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := incompleteUploads(t, b, key); len(got) != 0 {
		t.Errorf("incomplete uploads after Commit: %q", got)
	}
	if keys := rawKeys(t, b, b.root); !slices.Equal(keys, []string{key}) {
		t.Errorf("keys after Commit = %q, want only %s (the marker gone)", keys, key)
	}
	info, err := b.client.StatObject(ctx, b.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(info.ETag, "-4") {
		t.Errorf("ETag %q: want a multipart object of 4 parts (suffix -4)", info.ETag)
	}
	if got := get(t, b, "chk-1", "big.sgc"); !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, not the %d written", len(got), len(data))
	}
	o, err := b.Open(ctx, "chk-1", "big.sgc")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	r := rand.New(rand.NewPCG(2, 3))
	for range 50 {
		off := r.Int64N(int64(len(data)))
		n := r.IntN(3 * DefaultReadAhead)
		p := make([]byte, n)
		k, err := o.ReadAt(p, off)
		want := data[off:min(int64(len(data)), off+int64(n))]
		if k != len(want) || !bytes.Equal(p[:k], want) {
			t.Fatalf("ReadAt(%d bytes at %d) = %d bytes, %v; want %d bytes", n, off, k, err, len(want))
		}
		if (k < n) != (err == io.EOF) {
			t.Fatalf("ReadAt(%d bytes at %d) = %d, %v: want io.EOF exactly when short", n, off, k, err)
		}
	}
}

// TestAbortLeavesNoDebris aborts a multipart write and finds neither an
// incomplete upload nor a key.
func TestAbortLeavesNoDebris(t *testing.T) {
	b := freshStorage(t, true)
	w, err := b.Create(ctx, "chk-1", "big.sgc")
	if err != nil {
		t.Fatal(err)
	}
	writeChunks(t, w, pattern(2*MinPartSize+100, 4))
	key := b.Key("chk-1", "big.sgc")
	w.(*writer).wg.Wait()
	if got := incompleteUploads(t, b, key); len(got) != 1 {
		t.Fatalf("incomplete uploads before Abort: %q, want one", got)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if got := incompleteUploads(t, b, key); len(got) != 0 {
		t.Errorf("incomplete uploads after Abort: %q", got)
	}
	if keys := rawKeys(t, b, b.root); len(keys) != 0 {
		t.Errorf("keys after Abort: %q", keys)
	}
	if all, _ := b.List(ctx); len(all) != 0 {
		t.Errorf("List after Abort = %q", all)
	}
}

// TestCancelledWriteLeavesNoDebris cancels a multipart write's context:
// Commit fails with context.Canceled and nothing remains.
func TestCancelledWriteLeavesNoDebris(t *testing.T) {
	b := freshStorage(t, true)
	cctx, cancel := context.WithCancel(ctx)
	w, err := b.Create(cctx, "chk-1", "big.sgc")
	if err != nil {
		t.Fatal(err)
	}
	writeChunks(t, w, pattern(2*MinPartSize+100, 5))
	cancel()
	if err := w.Commit(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Commit after cancel = %v, want context.Canceled", err)
	}
	if got := incompleteUploads(t, b, b.Key("chk-1", "big.sgc")); len(got) != 0 {
		t.Errorf("incomplete uploads after a cancelled write: %q", got)
	}
	if keys := rawKeys(t, b, b.root); len(keys) != 0 {
		t.Errorf("keys after a cancelled write: %q", keys)
	}
}

// TestCrashedWriterIsCleanedUp leaves a multipart write as a killed
// process would — marker, upload and parts — and checks that Cleanup
// removes all of it and that the writer can no longer commit.
func TestCrashedWriterIsCleanedUp(t *testing.T) {
	b := freshStorage(t, true)
	put(t, b, "chk-2", "op-0.sgc", []byte("committed, but no metadata"))
	w, err := b.Create(ctx, "chk-2", "op-1.sgc")
	if err != nil {
		t.Fatal(err)
	}
	writeChunks(t, w, pattern(MinPartSize+1, 6))
	w.(*writer).wg.Wait()
	key := b.Key("chk-2", "op-1.sgc")
	if got := incompleteUploads(t, b, key); len(got) != 1 {
		t.Fatalf("incomplete uploads of the crashed writer: %q, want one", got)
	}
	if all, err := b.List(ctx); err != nil || !slices.Equal(all, []string{"chk-2"}) {
		t.Fatalf("List = %q, %v; want chk-2", all, err)
	}
	removed, err := checkpoint.Cleanup(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{"chk-2"}) {
		t.Errorf("Cleanup removed %q, want chk-2", removed)
	}
	if got := incompleteUploads(t, b, key); len(got) != 0 {
		t.Errorf("incomplete uploads after Cleanup: %q", got)
	}
	if keys := rawKeys(t, b, b.root); len(keys) != 0 {
		t.Errorf("keys after Cleanup: %q", keys)
	}
	if err := w.Commit(); err == nil {
		t.Error("the crashed writer committed after Cleanup")
	}
	if _, err := b.Stat(ctx, "chk-2", "op-1.sgc"); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("Stat after the failed Commit = %v, want ErrNotFound", err)
	}
}

// TestCheckpointRoundTrip writes a real checkpoint larger than a part
// through the checkpoint writer, commits it, and restores every entry.
func TestCheckpointRoundTrip(t *testing.T) {
	b := freshStorage(t, true)
	const maxP, keys = 16, 60000
	v := newView(maxP, runtime.FullRange(maxP), keys, 100)
	snap, err := checkpoint.WriteInstance(ctx, b, "chk-1", "op-0.sgc", v, nil)
	if err != nil {
		t.Fatal(err)
	}
	if snap.File.Size <= MinPartSize {
		t.Fatalf("data file of %d bytes is not larger than a part (%d)", snap.File.Size, MinPartSize)
	}
	op, err := checkpoint.NewOperator("op", snap)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Commit(ctx, b, "chk-1", &checkpoint.Metadata{CheckpointID: 1, Operators: []checkpoint.Operator{op}}); err != nil {
		t.Fatal(err)
	}
	if got, err := checkpoint.List(ctx, b); err != nil || !slices.Equal(got, []string{"chk-1"}) {
		t.Fatalf("checkpoint.List = %q, %v", got, err)
	}
	r, err := checkpoint.Open(ctx, b, "chk-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Verify(ctx); err != nil {
		t.Fatal(err)
	}
	view, err := r.View(ctx, "op", runtime.FullRange(maxP))
	if err != nil {
		t.Fatal(err)
	}
	defer view.Close()
	n := 0
	for kg := range maxP {
		i := 0
		err := view.Scan("s", kg, func(e runtime.Entry) error {
			want := v.entries[kg][i]
			if !bytes.Equal(e.Key, want.Key) || !bytes.Equal(e.Value, want.Value) {
				return fmt.Errorf("key group %d entry %d: got %q, want %q", kg, i, e.Key, want.Key)
			}
			i++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if i != len(v.entries[kg]) {
			t.Errorf("key group %d: read %d entries, wrote %d", kg, i, len(v.entries[kg]))
		}
		n += i
	}
	if n != keys {
		t.Errorf("read %d entries, wrote %d", n, keys)
	}
}

// view is a runtime.View of one value state "s".
type view struct {
	maxP    int
	kgs     runtime.KeyGroupRange
	entries map[int][]runtime.Entry
}

func newView(maxP int, kgs runtime.KeyGroupRange, keys, valueLen int) *view {
	v := &view{maxP: maxP, kgs: kgs, entries: make(map[int][]runtime.Entry)}
	val := pattern(valueLen, 7)
	for i := range keys {
		k := fmt.Appendf(nil, "key-%08d", i)
		kg, _ := runtime.KeyGroupForKey(k, maxP)
		if kgs.Contains(kg) {
			v.entries[kg] = append(v.entries[kg], runtime.Entry{Key: k, Value: val})
		}
	}
	return v
}

func (v *view) MaxParallelism() int              { return v.maxP }
func (v *view) KeyGroups() runtime.KeyGroupRange { return v.kgs }
func (v *view) States() []runtime.StateSpec {
	return []runtime.StateSpec{{Name: "s", Kind: runtime.KindValue, Fingerprint: "fp"}}
}
func (v *view) Scan(state string, kg int, fn func(runtime.Entry) error) error {
	for _, e := range v.entries[kg] {
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// TestWrongCredentials checks that a wrong secret fails at once — one
// request, no retries — with an error that names the bucket.
func TestWrongCredentials(t *testing.T) {
	srv := miniotest.Shared(t)
	o := testOptions(srv, sharedBucket(t, srv), "p")
	o.SecretAccessKey = "not-the-secret"
	_, err := New(ctx, o)
	if err == nil {
		t.Fatal("New with a wrong secret succeeded")
	}
	var oe *OpError
	if !errors.As(err, &oe) {
		t.Fatalf("error %v is not an *OpError", err)
	}
	if oe.Attempts != 1 || oe.Bucket != o.Bucket || errorStatus(err) != http.StatusForbidden {
		t.Errorf("error %#v: want one attempt on bucket %s with HTTP 403", oe, o.Bucket)
	}
	if msg := err.Error(); !strings.Contains(msg, o.Bucket) || !strings.Contains(msg, "credentials") || strings.Contains(msg, "not-the-secret") {
		t.Errorf("error %q: want the bucket named, credentials blamed and the secret not shown", msg)
	}
}

// TestMissingBucket checks the error for a bucket that does not exist.
func TestMissingBucket(t *testing.T) {
	srv := miniotest.Shared(t)
	o := testOptions(srv, "no-such-bucket-here", "")
	_, err := New(ctx, o)
	if !errors.Is(err, ErrBucketNotFound) {
		t.Fatalf("New on a missing bucket = %v, want ErrBucketNotFound", err)
	}
	if !strings.Contains(err.Error(), "no-such-bucket-here") {
		t.Errorf("error %q does not name the bucket", err)
	}
}

// TestBucketRemovedLater checks the errors of a Bucket whose bucket went
// away: they name the bucket, and are not retried.
func TestBucketRemovedLater(t *testing.T) {
	srv := miniotest.Shared(t)
	name := srv.NewBucket(t)
	b := newBucket(t, testOptions(srv, name, ""))
	if err := b.client.RemoveBucket(ctx, name); err != nil {
		t.Fatal(err)
	}
	_, err := b.List(ctx)
	var oe *OpError
	if !errors.As(err, &oe) || oe.Attempts != 1 || errorCode(err) != minio.NoSuchBucket || !strings.Contains(err.Error(), name) {
		t.Errorf("List on a removed bucket = %v; want one attempt, NoSuchBucket, naming %s", err, name)
	}
	_, err = b.Create(ctx, "c", "o")
	if err == nil || !strings.Contains(err.Error(), name) {
		t.Errorf("Create on a removed bucket = %v; want an error naming %s", err, name)
	}
}

// TestOpenURL opens the storage the way a -checkpoints flag would.
func TestOpenURL(t *testing.T) {
	srv := miniotest.Shared(t)
	bucket := srv.NewBucket(t) // its own: the test writes a fixed name, and runs again with -count
	t.Setenv("AWS_ACCESS_KEY_ID", miniotest.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", miniotest.SecretKey)
	s, err := Open(ctx, "s3://"+bucket+"/url/test/?endpoint="+srv.Endpoint+"&part-size=5MiB")
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, "chk-1", "a", []byte("hello"))
	keys := rawKeys(t, s, "url/test/")
	if !slices.Equal(keys, []string{"url/test/chk-1/a"}) {
		t.Errorf("keys = %q, want url/test/chk-1/a", keys)
	}
	if got := s.String(); got != "s3://"+bucket+"/url/test" {
		t.Errorf("String() = %q", got)
	}
}

// TestUnusualNames stores objects whose valid names hold characters that
// URLs and S3 treat specially.
func TestUnusualNames(t *testing.T) {
	b := freshStorage(t, true)
	names := []string{"a b", "100%", "x?y=z&w", "#frag", "plus+sign", "tilde~", "émoji-🙂", "semi;colon", "quote'\"", "back`tick", "*star", "dots..", "_metadata.bak"}
	for i, name := range names {
		ckpt := fmt.Sprintf("ckpt %d %s", i, name)
		put(t, b, ckpt, name, []byte(name))
		if got := get(t, b, ckpt, name); string(got) != name {
			t.Errorf("%q/%q read back %q", ckpt, name, got)
		}
		objs, err := b.Objects(ctx, ckpt)
		if err != nil || len(objs) != 1 || objs[0].Name != name || objs[0].Size != int64(len(name)) {
			t.Errorf("Objects(%q) = %v, %v; want %q", ckpt, objs, err, name)
		}
	}
	all, err := b.List(ctx)
	if err != nil || len(all) != len(names) {
		t.Fatalf("List = %q, %v; want %d checkpoints", all, err, len(names))
	}
	for _, ckpt := range all {
		if err := b.Delete(ctx, ckpt); err != nil {
			t.Errorf("Delete(%q): %v", ckpt, err)
		}
	}
	if keys := rawKeys(t, b, b.root); len(keys) != 0 {
		t.Errorf("keys after deleting everything: %q", keys)
	}
}
