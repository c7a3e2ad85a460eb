// Package s3storage is a checkpoint.Storage on S3-compatible object storage
// (AWS S3, MinIO, and their kin), through minio-go. It is how checkpoints
// leave the machine: every worker of a job writes its files into one
// bucket, and any worker restores from it after a crash.
//
//	s, err := s3storage.Open(ctx, "s3://checkpoints/jobs/clicks?endpoint=127.0.0.1:9000")
//	// s is a checkpoint.Storage: checkpoint.WriteInstance, Commit, List, Open...
//
// # Layout
//
// Object o of checkpoint c is the key "<prefix>/<c>/<o>" of the bucket, so
// a checkpoint is a key prefix, listed with a '/' delimiter, and its
// metadata is "<prefix>/<c>/_metadata". Keys beginning with '.' after the
// checkpoint's prefix are this package's own (pending markers, below) and
// never appear as objects.
//
// # Commit without rename
//
// S3 has no rename, but it has two atomic, all-or-nothing publications of a
// key: a single PutObject and CompleteMultipartUpload. An ObjectWriter
// fills a part buffer (PartSize, 8 MiB by default); an object that fits in
// one part is sent by a single PutObject at Commit, a larger one is a
// multipart upload whose parts are sent while the writer goes on writing
// (Concurrency parts at once, so a writer holds at most Concurrency+1 part
// buffers) and which Commit completes. Either way the key does not exist
// until Commit, and exists whole after it: the object is invisible until
// then, as the Storage contract requires. Both requests carry
// If-None-Match: *, so two writers of one name cannot both commit: the
// second gets checkpoint.ErrExist, and a committed object is never
// overwritten. Every part and single upload carries its CRC32C
// (x-amz-checksum-crc32c), which the server checks.
//
// A whole checkpoint is committed by the package checkpoint's protocol on
// top of that: data objects first, the metadata object last. checkpoint.List
// shows a checkpoint only once its metadata exists, so a checkpoint is
// never seen half-written.
//
// # Pending writes
//
// The Storage contract asks List to show checkpoints that hold only
// uncommitted writes (the debris of a crashed writer, which Cleanup must
// find), and RemoveIncomplete and Delete to discard such writes, so that a
// writer whose write was discarded cannot commit. An incomplete multipart
// upload would be the natural record, but MinIO lists incomplete uploads
// only for one exact key, not by prefix. So Create writes an empty pending
// marker "<prefix>/<c>/.pending-<writer id>-<o>" before anything else;
// Commit checks that its marker still exists before it publishes the object
// and removes it after; Abort aborts the upload and then removes the
// marker. RemoveIncomplete and Delete abort the uploads of each marker's
// key (listing the incomplete uploads of that exact key) and remove the
// markers. A writer that dies leaves its marker, which keeps its
// checkpoint listed until Cleanup removes it with its upload.
//
// # Retries and errors
//
// minio-go's own retries are off; every request goes through one
// RetryPolicy: transient failures (5xx, 408, 429, throttling codes, a
// refused, reset or timed-out connection) are retried with exponential
// backoff and full jitter, a bounded number of times and never past the
// context; other failures (NoSuchKey, AccessDenied, NoSuchBucket, a failed
// precondition) return at once. A commit whose first attempt reached the
// server but whose response was lost finds on retry that the key exists;
// the writer id stored in the object's metadata tells it that the object is
// its own. Errors are *OpError values naming the operation, bucket, key and
// number of attempts; missing objects match checkpoint.ErrNotFound, a
// missing bucket ErrBucketNotFound.
//
// # Configuration
//
// Options, or an s3:// URL (ParseURL), name the bucket, prefix, endpoint
// and tuning; the endpoint, region and credentials default to the
// environment variables that AWS tools use: AWS_ENDPOINT_URL_S3 or
// AWS_ENDPOINT_URL, AWS_REGION or AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN. An endpoint on a loopback
// address is plain HTTP. New and Open check at once that the bucket exists
// and the credentials may use it.
//
// Reads are ranged GETs conditional on the ETag seen at Open, fetching at
// least ReadAhead bytes, so a checkpoint reader's small sequential reads
// cost one request per ReadAhead bytes.
package s3storage
