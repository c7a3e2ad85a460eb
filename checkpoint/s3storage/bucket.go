package s3storage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/stategen/stategen/checkpoint"
)

// ErrBucketNotFound reports a bucket that does not exist.
var ErrBucketNotFound = errors.New("s3storage: bucket does not exist")

// Bucket is a checkpoint.Storage on a key prefix of an S3 bucket. It is
// safe for concurrent use.
type Bucket struct {
	client *minio.Client
	core   minio.Core
	bucket string
	root   string // the prefix with a trailing '/', or ""

	endpoint    string
	partSize    int64
	concurrency int
	readAhead   int
	retry       RetryPolicy
	onRetry     func(op, key string, attempt int, err error, wait time.Duration)

	buffers sync.Pool // *[]byte of capacity partSize, for writers' parts
}

// partBuffer returns an empty buffer of capacity size, from the pool if
// size is the configured part size.
func (b *Bucket) partBuffer(size int) []byte {
	if int64(size) == b.partSize {
		if p, ok := b.buffers.Get().(*[]byte); ok {
			return (*p)[:0]
		}
	}
	return make([]byte, 0, size)
}

// recycle returns a part buffer to the pool.
func (b *Bucket) recycle(p []byte) {
	if int64(cap(p)) == b.partSize {
		b.buffers.Put(&p)
	}
}

var _ checkpoint.Storage = (*Bucket)(nil)

// Open returns the Bucket that an S3 storage URL names (see ParseURL), with
// credentials from the environment, once it has checked that the bucket
// exists and the credentials may see it:
//
//	s, err := s3storage.Open(ctx, "s3://checkpoints/jobs/clicks?endpoint=127.0.0.1:9000")
func Open(ctx context.Context, rawURL string) (*Bucket, error) {
	o, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	return New(ctx, o)
}

// New returns the Bucket of o, once it has checked that the bucket exists
// and the credentials may see it. The errors name the bucket; a missing
// bucket's wraps ErrBucketNotFound.
func New(ctx context.Context, o Options) (*Bucket, error) {
	o, err := o.Resolve()
	if err != nil {
		return nil, err
	}
	host, secure, err := hostAndTLS(o.Endpoint, o.Insecure)
	if err != nil {
		return nil, err
	}
	client, err := minio.New(host, &minio.Options{
		Creds:     credentials.NewStaticV4(o.AccessKeyID, o.SecretAccessKey, o.SessionToken),
		Secure:    secure,
		Region:    o.Region,
		Transport: o.Transport,
		// Retries are this package's (RetryPolicy): one policy, with
		// errors that count the attempts.
		MaxRetries: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("s3storage: bucket %s at %s: %w", o.Bucket, o.Endpoint, err)
	}
	b := &Bucket{
		client:      client,
		core:        minio.Core{Client: client},
		bucket:      o.Bucket,
		endpoint:    client.EndpointURL().String(),
		partSize:    o.PartSize,
		concurrency: o.Concurrency,
		readAhead:   o.ReadAhead,
		retry:       o.Retry,
		onRetry:     o.OnRetry,
	}
	if o.Prefix != "" {
		b.root = o.Prefix + "/"
	}
	var exists bool
	err = b.do(ctx, "HeadBucket", "", func(ctx context.Context) error {
		var err error
		exists, err = client.BucketExists(ctx, o.Bucket)
		return err
	})
	switch {
	case err != nil && errorStatus(err) == http.StatusForbidden:
		return nil, fmt.Errorf("%w (access key %s at %s: wrong credentials, or no permission on the bucket)", err, o.AccessKeyID, b.endpoint)
	case err != nil:
		return nil, fmt.Errorf("%w (endpoint %s)", err, b.endpoint)
	case !exists:
		return nil, fmt.Errorf("%w: %s at %s (create it first, e.g. `mc mb`)", ErrBucketNotFound, o.Bucket, b.endpoint)
	}
	return b, nil
}

// String returns the storage's location, "s3://bucket/prefix".
func (b *Bucket) String() string {
	return "s3://" + b.bucket + "/" + strings.TrimSuffix(b.root, "/")
}

// Client returns the minio-go client that b uses, for tools and tests.
func (b *Bucket) Client() *minio.Client { return b.client }

// Key returns the object key of object name of checkpoint ckpt.
func (b *Bucket) Key(ckpt, name string) string { return b.root + ckpt + "/" + name }

func (b *Bucket) ckptPrefix(ckpt string) string { return b.root + ckpt + "/" }

// A pending marker records a write in progress: the key
// "<prefix>/<ckpt>/.pending-<writer id>-<name>", an empty object. S3 has
// no temporary files, and MinIO lists incomplete multipart uploads only
// for one exact key, so the markers are how List sees checkpoints with
// nothing committed yet, and how RemoveIncomplete and Delete find the
// uploads to abort.
const pendingPrefix = ".pending-"

// idLen is the length of a writer id: 16 hex digits.
const idLen = 16

func newID() string {
	var rnd [idLen / 2]byte
	_, _ = rand.Read(rnd[:])
	return hex.EncodeToString(rnd[:])
}

// markerName returns the marker's name within its checkpoint.
func markerName(id, name string) string { return pendingPrefix + id + "-" + name }

// parseMarker returns the object name a marker stands for.
func parseMarker(base string) (name string, ok bool) {
	rest, ok := strings.CutPrefix(base, pendingPrefix)
	if !ok || len(rest) < idLen+2 || rest[idLen] != '-' {
		return "", false
	}
	return rest[idLen+1:], true
}

// writerMeta is the user metadata that records which writer committed an
// object, so that a commit whose response was lost and whose retry was
// refused (the object exists) can tell its own object from a rival's.
const writerMeta = "Stategen-Writer"

func checkNames(ckpt, name string) error {
	if err := checkpoint.ValidateName(ckpt); err != nil {
		return fmt.Errorf("checkpoint name: %w", err)
	}
	if err := checkpoint.ValidateName(name); err != nil {
		return fmt.Errorf("object name: %w", err)
	}
	return nil
}

func checkCkpt(ckpt string) error {
	if err := checkpoint.ValidateName(ckpt); err != nil {
		return fmt.Errorf("checkpoint name: %w", err)
	}
	return nil
}

func notFound(ckpt, name string, cause error) error {
	return &checkpoint.FileError{Path: ckpt + "/" + name, Offset: -1, Reason: "object does not exist",
		Err: checkpoint.ErrNotFound, Cause: cause}
}

// stat returns the object info of key, or an error that isNotFound
// recognizes.
func (b *Bucket) stat(ctx context.Context, op, key string) (minio.ObjectInfo, error) {
	var info minio.ObjectInfo
	err := b.do(ctx, op, key, func(ctx context.Context) error {
		var err error
		info, err = b.client.StatObject(ctx, b.bucket, key, minio.StatObjectOptions{})
		return err
	})
	return info, err
}

// Create implements checkpoint.Storage. It checks that the object is not
// committed and writes the write's pending marker; the data goes to S3 as
// the writer fills parts, and becomes the object at Commit.
func (b *Bucket) Create(ctx context.Context, ckpt, name string) (checkpoint.ObjectWriter, error) {
	if err := checkNames(ckpt, name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	key := b.Key(ckpt, name)
	switch _, err := b.stat(ctx, "Create: HeadObject", key); {
	case err == nil:
		return nil, fmt.Errorf("%w: %s/%s (s3://%s/%s)", checkpoint.ErrExist, ckpt, name, b.bucket, key)
	case !isNotFound(err):
		return nil, err
	}
	id := newID()
	marker := b.Key(ckpt, markerName(id, name))
	if err := b.putEmpty(ctx, "Create: PutObject marker", marker); err != nil {
		return nil, err
	}
	return newWriter(ctx, b, ckpt, name, key, marker, id), nil
}

func (b *Bucket) putEmpty(ctx context.Context, op, key string) error {
	return b.do(ctx, op, key, func(ctx context.Context) error {
		_, err := b.core.PutObject(ctx, b.bucket, key, strings.NewReader(""), 0, "", "", minio.PutObjectOptions{DisableContentSha256: true})
		return err
	})
}

// Open implements checkpoint.Storage. The object's reads are ranged GETs
// conditional on the ETag seen here, so a reader never mixes the bytes of
// two objects that had the same name. Reads outlive ctx's deadline, as an
// open file does, and end when the object is closed.
func (b *Bucket) Open(ctx context.Context, ckpt, name string) (checkpoint.Object, error) {
	if err := checkNames(ckpt, name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	key := b.Key(ckpt, name)
	info, err := b.stat(ctx, "Open: HeadObject", key)
	if err != nil {
		if isNotFound(err) {
			return nil, notFound(ckpt, name, err)
		}
		return nil, err
	}
	return newObject(ctx, b, key, info), nil
}

// Stat implements checkpoint.Storage.
func (b *Bucket) Stat(ctx context.Context, ckpt, name string) (checkpoint.ObjectInfo, error) {
	if err := checkNames(ckpt, name); err != nil {
		return checkpoint.ObjectInfo{}, err
	}
	if err := ctx.Err(); err != nil {
		return checkpoint.ObjectInfo{}, err
	}
	info, err := b.stat(ctx, "Stat: HeadObject", b.Key(ckpt, name))
	if err != nil {
		if isNotFound(err) {
			return checkpoint.ObjectInfo{}, notFound(ckpt, name, err)
		}
		return checkpoint.ObjectInfo{}, err
	}
	return checkpoint.ObjectInfo{Name: name, Size: info.Size}, nil
}

// list returns the keys (and common prefixes, if !recursive) under prefix,
// retrying the whole listing on transient errors.
func (b *Bucket) list(ctx context.Context, op, prefix string, recursive bool) ([]minio.ObjectInfo, error) {
	var out []minio.ObjectInfo
	err := b.do(ctx, op, prefix, func(ctx context.Context) error {
		out = out[:0]
		lctx, cancel := context.WithCancel(ctx)
		defer cancel()
		for o := range b.client.ListObjects(lctx, b.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: recursive}) {
			if o.Err != nil {
				return o.Err
			}
			out = append(out, o)
		}
		return nil
	})
	return out, err
}

// List implements checkpoint.Storage: the checkpoints are the common
// prefixes under the storage's prefix, which hold committed objects,
// pending markers or both.
func (b *Bucket) List(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	objs, err := b.list(ctx, "List: ListObjects", b.root, false)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, o := range objs {
		c, ok := strings.CutSuffix(strings.TrimPrefix(o.Key, b.root), "/")
		if ok && checkpoint.ValidateName(c) == nil {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Objects implements checkpoint.Storage.
func (b *Bucket) Objects(ctx context.Context, ckpt string) ([]checkpoint.ObjectInfo, error) {
	if err := checkCkpt(ckpt); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	prefix := b.ckptPrefix(ckpt)
	objs, err := b.list(ctx, "Objects: ListObjects", prefix, true)
	if err != nil {
		return nil, err
	}
	var out []checkpoint.ObjectInfo
	for _, o := range objs {
		name := strings.TrimPrefix(o.Key, prefix)
		if checkpoint.ValidateName(name) == nil {
			out = append(out, checkpoint.ObjectInfo{Name: name, Size: o.Size})
		}
	}
	slices.SortFunc(out, func(x, y checkpoint.ObjectInfo) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}

// Remove implements checkpoint.Storage.
func (b *Bucket) Remove(ctx context.Context, ckpt, name string) error {
	if err := checkNames(ckpt, name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.removeKey(ctx, "Remove: DeleteObject", b.Key(ckpt, name))
}

func (b *Bucket) removeKey(ctx context.Context, op, key string) error {
	return b.do(ctx, op, key, func(ctx context.Context) error {
		err := b.client.RemoveObject(ctx, b.bucket, key, minio.RemoveObjectOptions{})
		if isNotFound(err) {
			return nil
		}
		return err
	})
}

// RemoveIncomplete implements checkpoint.Storage: for each pending marker
// of ckpt, it aborts the multipart uploads of the marker's object key and
// removes the marker. A writer whose marker is gone cannot commit.
func (b *Bucket) RemoveIncomplete(ctx context.Context, ckpt string) error {
	if err := checkCkpt(ckpt); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	prefix := b.ckptPrefix(ckpt)
	markers, err := b.list(ctx, "RemoveIncomplete: ListObjects", prefix+pendingPrefix, true)
	if err != nil {
		return err
	}
	var keys []string
	for _, m := range markers {
		name, ok := parseMarker(strings.TrimPrefix(m.Key, prefix))
		if !ok {
			continue
		}
		if err := b.abortUploads(ctx, prefix+name); err != nil {
			return err
		}
		keys = append(keys, m.Key)
	}
	return b.removeKeys(ctx, "RemoveIncomplete: RemoveObjects", prefix, keys)
}

// Delete implements checkpoint.Storage: it aborts the uploads of every
// pending write of ckpt, then removes every key under ckpt's prefix.
func (b *Bucket) Delete(ctx context.Context, ckpt string) error {
	if err := checkCkpt(ckpt); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	prefix := b.ckptPrefix(ckpt)
	objs, err := b.list(ctx, "Delete: ListObjects", prefix, true)
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(objs))
	for _, o := range objs {
		if name, ok := parseMarker(strings.TrimPrefix(o.Key, prefix)); ok {
			if err := b.abortUploads(ctx, prefix+name); err != nil {
				return err
			}
		}
		keys = append(keys, o.Key)
	}
	return b.removeKeys(ctx, "Delete: RemoveObjects", prefix, keys)
}

// abortUploads aborts every incomplete multipart upload of key.
func (b *Bucket) abortUploads(ctx context.Context, key string) error {
	var keyMarker, idMarker string
	for {
		var res minio.ListMultipartUploadsResult
		err := b.do(ctx, "ListMultipartUploads", key, func(ctx context.Context) error {
			var err error
			res, err = b.core.ListMultipartUploads(ctx, b.bucket, key, keyMarker, idMarker, "", 1000)
			return err
		})
		if err != nil {
			return err
		}
		for _, u := range res.Uploads {
			if u.Key == key {
				if err := b.abortUpload(ctx, key, u.UploadID); err != nil {
					return err
				}
			}
		}
		if !res.IsTruncated || res.NextKeyMarker == "" && res.NextUploadIDMarker == "" {
			return nil
		}
		keyMarker, idMarker = res.NextKeyMarker, res.NextUploadIDMarker
	}
}

func (b *Bucket) abortUpload(ctx context.Context, key, uploadID string) error {
	return b.do(ctx, "AbortMultipartUpload", key, func(ctx context.Context) error {
		err := b.core.AbortMultipartUpload(ctx, b.bucket, key, uploadID)
		if errorCode(err) == "NoSuchUpload" {
			return nil // already gone: aborted, or completed
		}
		return err
	})
}

// removeKeys removes keys with multi-object deletes, retrying the keys
// whose removal failed transiently.
func (b *Bucket) removeKeys(ctx context.Context, op, prefix string, keys []string) error {
	for len(keys) > 0 {
		batch := keys[:min(len(keys), 1000)]
		keys = keys[len(batch):]
		err := b.do(ctx, op, prefix, func(ctx context.Context) error {
			ch := make(chan minio.ObjectInfo, len(batch))
			for _, k := range batch {
				ch <- minio.ObjectInfo{Key: k}
			}
			close(ch)
			var failed []string
			var errs []error
			for e := range b.client.RemoveObjects(ctx, b.bucket, ch, minio.RemoveObjectsOptions{}) {
				if e.Err == nil || isNotFound(e.Err) {
					continue
				}
				failed = append(failed, e.ObjectName)
				errs = append(errs, fmt.Errorf("%s: %w", e.ObjectName, e.Err))
			}
			if len(errs) == 0 {
				return nil
			}
			batch = failed // a retry sends only what failed
			// Retry only if every failure is transient.
			for _, err := range errs {
				if !IsTransient(err) {
					return &permanentError{errors.Join(errs...)}
				}
			}
			return errs[0]
		})
		if err != nil {
			return err
		}
	}
	return nil
}
