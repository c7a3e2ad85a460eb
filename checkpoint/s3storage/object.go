package s3storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/minio/minio-go/v7"
)

// object is a committed object opened for reading. ReadAt fetches ranges
// with GETs conditional on the ETag seen at Open, at least readAhead bytes
// at a time, and keeps the last range fetched: a checkpoint reader's
// sequential block reads cost one request per readAhead bytes.
type object struct {
	b      *Bucket
	ctx    context.Context
	cancel context.CancelFunc
	key    string
	etag   string
	size   int64

	mu     sync.Mutex
	win    []byte // the bytes at [winOff, winOff+len(win))
	winOff int64
	closed bool
}

func newObject(ctx context.Context, b *Bucket, key string, info minio.ObjectInfo) *object {
	// Reads outlive the call that opened the object, as reads of an open
	// file do; Close ends them.
	octx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	return &object{b: b, ctx: octx, cancel: cancel, key: key, etag: info.ETag, size: info.Size}
}

func (o *object) Size() int64 { return o.size }

func (o *object) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	o.win = nil
	o.cancel()
	return nil
}

var errClosed = errors.New("s3storage: read of a closed object")

// ReadAt implements io.ReaderAt. It is safe for concurrent use.
func (o *object) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("s3storage: s3://%s/%s: negative offset %d", o.b.bucket, o.key, off)
	}
	if off >= o.size {
		if len(p) == 0 && off == o.size {
			return 0, nil
		}
		return 0, io.EOF
	}
	want := min(int64(len(p)), o.size-off)
	end := off + want

	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return 0, errClosed
	}
	if off >= o.winOff && end <= o.winOff+int64(len(o.win)) {
		n := copy(p, o.win[off-o.winOff:end-o.winOff])
		o.mu.Unlock()
		return n, eofIfShort(n, len(p))
	}
	o.mu.Unlock()

	if want >= int64(o.b.readAhead) {
		// Large reads go straight into p.
		if err := o.fetch(p[:want], off); err != nil {
			return 0, err
		}
		return int(want), eofIfShort(int(want), len(p))
	}
	n := min(int64(o.b.readAhead), o.size-off)
	buf := make([]byte, n)
	if err := o.fetch(buf, off); err != nil {
		return 0, err
	}
	copy(p, buf[:want])
	o.mu.Lock()
	if !o.closed {
		o.win, o.winOff = buf, off
	}
	o.mu.Unlock()
	return int(want), eofIfShort(int(want), len(p))
}

func eofIfShort(n, want int) error {
	if n < want {
		return io.EOF
	}
	return nil
}

// fetch reads len(p) bytes at off, retrying the whole range on transient
// errors, including a connection that breaks mid-body.
func (o *object) fetch(p []byte, off int64) error {
	return o.b.do(o.ctx, fmt.Sprintf("GetObject [%d, %d)", off, off+int64(len(p))), o.key, func(ctx context.Context) error {
		var opts minio.GetObjectOptions
		if err := opts.SetRange(off, off+int64(len(p))-1); err != nil {
			return &permanentError{err}
		}
		if o.etag != "" {
			if err := opts.SetMatchETag(o.etag); err != nil {
				return &permanentError{err}
			}
		}
		body, _, _, err := o.b.core.GetObject(ctx, o.b.bucket, o.key, opts)
		if err != nil {
			if errorCode(err) == "PreconditionFailed" {
				return &permanentError{fmt.Errorf("the object was replaced after it was opened: %w", err)}
			}
			return err
		}
		defer body.Close()
		if _, err := io.ReadFull(body, p); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("reading the response body: %w", err)
		}
		return nil
	})
}
