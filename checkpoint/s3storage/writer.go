package s3storage

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/stategen/stategen/checkpoint"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crc32cHeader returns the base64 of p's CRC32C, big-endian, as S3's
// x-amz-checksum-crc32c wants it.
func crc32cHeader(p []byte) string {
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc32.Checksum(p, castagnoli))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// smallObject is the size up to which a writer's first buffer grows by
// append; a larger object gets whole part buffers from the bucket's pool.
const smallObject = 256 << 10

// cleanupTimeout bounds the requests that discard a failed or aborted
// write, which run even when the writer's context is done.
const cleanupTimeout = time.Minute

// writer is an ObjectWriter on S3. Bytes fill a part buffer; a full buffer
// is uploaded as a part of a multipart upload (started on the first full
// part) on a goroutine of its own while the next one fills, at most
// Concurrency at once, so memory is bounded by (Concurrency+1) part
// buffers and the upload streams. Nothing exists under the object's key
// until Commit: a single PutObject for an object of at most one part,
// else CompleteMultipartUpload — both atomic on S3, both conditional on
// the key not existing (If-None-Match: *).
type writer struct {
	b                       *Bucket
	ctx                     context.Context // the caller's: governs Write and Commit
	uctx                    context.Context // part uploads: ctx, cancelled by Abort
	cancel                  context.CancelFunc
	ckpt, name, key, marker string
	id                      string

	buf       []byte // the part being filled
	next      int    // the number buf will have as a part, from 1
	uploadID  string // "" until the first part is uploaded
	free      chan []byte
	allocated int // part buffers made
	wg        sync.WaitGroup

	mu     sync.Mutex
	parts  []minio.CompletePart // by part number - 1; guarded by mu
	upErr  error                // the first failed part upload; guarded by mu
	closed bool                 // Commit or Abort was called; guarded by mu
}

func newWriter(ctx context.Context, b *Bucket, ckpt, name, key, marker, id string) *writer {
	uctx, cancel := context.WithCancel(ctx)
	return &writer{
		b: b, ctx: ctx, uctx: uctx, cancel: cancel,
		ckpt: ckpt, name: name, key: key, marker: marker, id: id,
		next:      1,
		allocated: 1, // the first buffer, which grows by append
		free:      make(chan []byte, b.concurrency+1),
	}
}

func (w *writer) path() string { return w.ckpt + "/" + w.name }

// partSize returns the size of part n: the configured size for the first
// 1000 parts, doubling every 1000 parts after (up to S3's 5 GiB), so that
// S3's 10000 parts hold 1023000 configured part sizes: 8 TB of 8 MiB.
func (w *writer) partSize(n int) int {
	size := w.b.partSize
	for n > 1000 && size < MaxPartSize {
		size *= 2
		n -= 1000
	}
	return int(min(size, MaxPartSize))
}

func (w *writer) Write(p []byte) (int, error) {
	if err := w.ctx.Err(); err != nil {
		return 0, err
	}
	w.mu.Lock()
	closed, upErr := w.closed, w.upErr
	w.mu.Unlock()
	if closed {
		return 0, fmt.Errorf("s3storage: %s: write after Commit or Abort", w.path())
	}
	if upErr != nil {
		return 0, upErr
	}
	n := 0
	for len(p) > 0 {
		room := w.partSize(w.next) - len(w.buf)
		if room == 0 {
			if err := w.flush(); err != nil {
				return n, err
			}
			continue
		}
		k := min(room, len(p))
		if len(w.buf)+k > cap(w.buf) && len(w.buf)+k > smallObject {
			// Past a small object's size, a whole part buffer from the
			// pool, rather than growing by append through copies.
			nb := append(w.b.partBuffer(w.partSize(w.next)), w.buf...)
			w.buf = nb
		}
		w.buf = append(w.buf, p[:k]...)
		p = p[k:]
		n += k
	}
	return n, nil
}

// flush starts the upload of the full buffer as the next part and gives
// the writer an empty buffer, waiting for one if Concurrency parts are
// uploading.
func (w *writer) flush() error {
	if w.uploadID == "" {
		err := w.b.do(w.ctx, "CreateMultipartUpload", w.key, func(ctx context.Context) error {
			opts := minio.PutObjectOptions{UserMetadata: map[string]string{
				writerMeta:                 w.id,
				"X-Amz-Checksum-Algorithm": "CRC32C",
			}}
			id, err := w.b.core.NewMultipartUpload(ctx, w.b.bucket, w.key, opts)
			if err == nil {
				w.uploadID = id
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	part, data := w.next, w.buf
	w.next++
	w.buf = nil
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		cp, err := w.uploadPart(w.uctx, part, data)
		w.free <- data[:0]
		w.mu.Lock()
		defer w.mu.Unlock()
		if err != nil {
			if w.upErr == nil {
				w.upErr = err
			}
			return
		}
		for len(w.parts) < part {
			w.parts = append(w.parts, minio.CompletePart{})
		}
		w.parts[part-1] = cp
	}()
	// The next buffer: a returned one, a new one while fewer than
	// Concurrency+1 exist, or else the first one returned.
	select {
	case w.buf = <-w.free:
		return nil
	default:
	}
	if w.allocated < w.b.concurrency+1 {
		w.allocated++
		w.buf = w.b.partBuffer(w.partSize(w.next))
		return nil
	}
	select {
	case w.buf = <-w.free:
		return nil
	case <-w.ctx.Done():
		return w.ctx.Err()
	}
}

func (w *writer) uploadPart(ctx context.Context, part int, data []byte) (minio.CompletePart, error) {
	sum := crc32cHeader(data)
	var cp minio.CompletePart
	err := w.b.do(ctx, fmt.Sprintf("UploadPart %d", part), w.key, func(ctx context.Context) error {
		h := make(http.Header)
		h.Set("X-Amz-Checksum-Crc32c", sum)
		h.Set("X-Amz-Checksum-Algorithm", "CRC32C")
		p, err := w.b.core.PutObjectPart(ctx, w.b.bucket, w.key, w.uploadID, part, bytes.NewReader(data), int64(len(data)),
			minio.PutObjectPartOptions{CustomHeader: h, DisableContentSha256: true})
		if err != nil {
			if errorCode(err) == "NoSuchUpload" {
				return &permanentError{fmt.Errorf("%w (the upload was aborted: RemoveIncomplete or Delete discarded the write)", err)}
			}
			return err
		}
		cp = minio.CompletePart{PartNumber: part, ETag: p.ETag, ChecksumCRC32C: sum}
		return nil
	})
	return cp, err
}

func (w *writer) Commit() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return fmt.Errorf("s3storage: %s: writer already committed or aborted", w.path())
	}
	w.closed = true
	w.mu.Unlock()
	err := w.commit()
	if err != nil {
		_ = w.discard()
	}
	w.cancel()
	w.release()
	return err
}

// release gives the part buffers back to the bucket's pool, once no upload
// uses them.
func (w *writer) release() {
	w.wg.Wait()
	w.b.recycle(w.buf)
	w.buf = nil
	for {
		select {
		case p := <-w.free:
			w.b.recycle(p)
		default:
			return
		}
	}
}

// errDiscarded reports a write whose pending marker is gone.
var errDiscarded = errors.New("the uncommitted write was discarded (RemoveIncomplete, Delete or Cleanup removed it)")

func (w *writer) commit() error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	w.wg.Wait()
	w.mu.Lock()
	upErr := w.upErr
	w.mu.Unlock()
	if upErr != nil {
		return upErr
	}
	if err := w.ctx.Err(); err != nil {
		return err
	}
	// A write that RemoveIncomplete or Delete discarded must not appear.
	if _, err := w.b.stat(w.ctx, "Commit: HeadObject marker", w.marker); err != nil {
		if isNotFound(err) {
			return fmt.Errorf("s3storage: %s (s3://%s/%s): %w", w.path(), w.b.bucket, w.key, errDiscarded)
		}
		return err
	}
	var err error
	retried := false
	if w.uploadID == "" {
		err = w.putObject(&retried)
	} else {
		err = w.completeUpload(&retried)
	}
	if err != nil {
		code := errorCode(err)
		if (code == "PreconditionFailed" || code == "NoSuchUpload" && retried) && w.isOurs() {
			// An earlier attempt succeeded and its response was lost.
			err = nil
		} else if code == "PreconditionFailed" {
			return fmt.Errorf("%w: %s (s3://%s/%s): another writer committed it", checkpoint.ErrExist, w.path(), w.b.bucket, w.key)
		}
	}
	if err != nil {
		return err
	}
	// The object is committed; a marker left behind by a failure here is
	// harmless debris that RemoveIncomplete removes.
	_ = w.b.removeKey(context.WithoutCancel(w.ctx), "Commit: DeleteObject marker", w.marker)
	return nil
}

// isOurs reports whether the object under w's key was committed by w.
func (w *writer) isOurs() bool {
	info, err := w.b.stat(w.ctx, "Commit: HeadObject", w.key)
	if err != nil {
		return false
	}
	for k, v := range info.UserMetadata {
		if strings.EqualFold(k, writerMeta) || strings.EqualFold(k, "X-Amz-Meta-"+writerMeta) {
			return v == w.id
		}
	}
	return false
}

func (w *writer) putObject(retried *bool) error {
	data := w.buf
	sum := crc32cHeader(data)
	attempts := 0
	return w.b.do(w.ctx, "Commit: PutObject", w.key, func(ctx context.Context) error {
		attempts++
		*retried = attempts > 1
		opts := minio.PutObjectOptions{
			UserMetadata:         map[string]string{writerMeta: w.id, "X-Amz-Checksum-Crc32c": sum},
			DisableContentSha256: true,
		}
		opts.SetMatchETagExcept("*")
		_, err := w.b.core.PutObject(ctx, w.b.bucket, w.key, bytes.NewReader(data), int64(len(data)), "", "", opts)
		return conditionFailed(err)
	})
}

func (w *writer) completeUpload(retried *bool) error {
	// The last part: what remains, or an empty part after a data-less
	// flush (never, since flush runs only before more data).
	if len(w.buf) > 0 {
		cp, err := w.uploadPart(w.ctx, w.next, w.buf)
		if err != nil {
			return err
		}
		w.parts = append(w.parts, cp)
		w.next++
	}
	parts := slices.Clone(w.parts)
	attempts := 0
	return w.b.do(w.ctx, "Commit: CompleteMultipartUpload", w.key, func(ctx context.Context) error {
		attempts++
		*retried = attempts > 1
		var opts minio.PutObjectOptions
		opts.SetMatchETagExcept("*")
		_, err := w.b.core.CompleteMultipartUpload(ctx, w.b.bucket, w.key, w.uploadID, parts, opts)
		if errorCode(err) == "NoSuchUpload" && !*retried {
			return &permanentError{fmt.Errorf("%w (the upload was aborted: RemoveIncomplete or Delete discarded the write)", err)}
		}
		return conditionFailed(err)
	})
}

// conditionFailed makes a failed If-None-Match permanent: the object
// exists, and asking again will not change that.
func conditionFailed(err error) error {
	if errorCode(err) == "PreconditionFailed" || errorStatus(err) == http.StatusPreconditionFailed {
		return &permanentError{err}
	}
	return err
}

func (w *writer) Abort() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	err := w.discard()
	w.cancel()
	w.release()
	return err
}

// discard stops the part uploads, aborts the multipart upload and removes
// the marker, in that order, so that a failure leaves the marker through
// which RemoveIncomplete finds the upload. It runs even if w.ctx is done.
func (w *writer) discard() error {
	w.cancel()
	w.wg.Wait()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), cleanupTimeout)
	defer cancel()
	if w.uploadID != "" {
		if err := w.b.abortUpload(ctx, w.key, w.uploadID); err != nil {
			return err
		}
	}
	return w.b.removeKey(ctx, "Abort: DeleteObject marker", w.marker)
}
