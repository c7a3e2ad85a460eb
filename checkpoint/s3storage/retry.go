package s3storage

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
)

// RetryPolicy bounds the retries of one S3 request. A request that fails
// with a transient error — a 5xx status, 408 or 429, a throttling code
// (SlowDown), a refused, reset or timed-out connection — is sent again
// after a pause drawn uniformly from [0, min(MaxBackoff,
// InitialBackoff·2^(attempt-1))) ("full jitter"), until it succeeds,
// fails with an error that is not transient (any other 4xx: NoSuchKey,
// AccessDenied, NoSuchBucket, PreconditionFailed), MaxAttempts attempts
// have been made, or its context is done. (minio-go itself, with its own
// retries off, still pauses up to 200ms after a failed attempt; that pause
// comes on top of the policy's.)
type RetryPolicy struct {
	// MaxAttempts is the number of attempts, the first included; zero
	// means 6, and 1 disables retries.
	MaxAttempts int
	// InitialBackoff caps the first pause; zero means 100ms.
	InitialBackoff time.Duration
	// MaxBackoff caps every pause; zero means 5s.
	MaxBackoff time.Duration
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 6
	}
	if p.InitialBackoff <= 0 {
		p.InitialBackoff = 100 * time.Millisecond
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = 5 * time.Second
	}
	if p.MaxBackoff < p.InitialBackoff {
		p.MaxBackoff = p.InitialBackoff
	}
	return p
}

// backoff returns the pause before attempt+1, after attempt failed
// attempts (attempt >= 1).
func (p RetryPolicy) backoff(attempt int) time.Duration {
	limit := p.InitialBackoff
	for i := 1; i < attempt && limit < p.MaxBackoff; i++ {
		limit *= 2
	}
	limit = min(limit, p.MaxBackoff)
	return time.Duration(rand.Int64N(int64(limit) + 1))
}

// OpError is the error of an S3 operation: what was done, to which bucket
// and key, how many attempts were made, and the last error. It unwraps to
// that error, so errors.As finds a minio.ErrorResponse in it, and
// errors.Is finds context.Canceled and the like.
type OpError struct {
	Op       string // the S3 operation, such as "PutObject"
	Bucket   string
	Key      string // the object key or key prefix; "" for bucket operations
	Attempts int    // requests sent
	Err      error
}

// Error formats e as
// "s3storage: PutObject s3://bucket/key: message (HTTP 503, SlowDown; 6 attempts)".
func (e *OpError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "s3storage: %s s3://%s", e.Op, e.Bucket)
	if e.Key != "" {
		b.WriteString("/")
		b.WriteString(e.Key)
	}
	b.WriteString(": ")
	var detail []string
	var er minio.ErrorResponse
	if errors.As(e.Err, &er) {
		msg := er.Error()
		b.WriteString(strings.TrimSuffix(msg, "."))
		if er.StatusCode != 0 {
			detail = append(detail, fmt.Sprintf("HTTP %d", er.StatusCode))
		}
		if er.Code != "" && !strings.Contains(msg, er.Code) {
			detail = append(detail, er.Code)
		}
	} else {
		b.WriteString(e.Err.Error())
	}
	if e.Attempts > 1 {
		detail = append(detail, fmt.Sprintf("%d attempts", e.Attempts))
	}
	if len(detail) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(detail, ", "))
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *OpError) Unwrap() error { return e.Err }

// errorCode returns the S3 error code in err, or "".
func errorCode(err error) string {
	var er minio.ErrorResponse
	if errors.As(err, &er) {
		return er.Code
	}
	return ""
}

// errorStatus returns the HTTP status of the S3 error in err, or 0.
func errorStatus(err error) int {
	var er minio.ErrorResponse
	if errors.As(err, &er) {
		return er.StatusCode
	}
	return 0
}

func isNotFound(err error) bool {
	switch errorCode(err) {
	case minio.NoSuchKey, "NotFound":
		return true
	}
	return errorStatus(err) == http.StatusNotFound && errorCode(err) != minio.NoSuchBucket
}

// IsTransient reports whether err is worth retrying: the server or the
// network failed, not the request. Context errors are not transient.
func IsTransient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var p *permanentError
	if errors.As(err, &p) {
		return false
	}
	var er minio.ErrorResponse
	if errors.As(err, &er) {
		switch er.Code {
		case "SlowDown", "SlowDownRead", "SlowDownWrite", "Throttling", "ThrottlingException",
			"RequestLimitExceeded", "RequestThrottled", "RequestTimeout", "InternalError",
			"ServiceUnavailable", "XMinioServerNotInitialized", "XMinioReadQuorum", "XMinioWriteQuorum":
			return true
		}
		switch s := er.StatusCode; {
		case s >= 500, s == http.StatusRequestTimeout, s == http.StatusTooManyRequests:
			return true
		}
		return false
	}
	// TLS failures repeat themselves.
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var recordHeader tls.RecordHeaderError
	if errors.As(err, &unknownCA) || errors.As(err, &hostname) || errors.As(err, &invalid) || errors.As(err, &recordHeader) {
		return false
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return dnsErr.IsTemporary || dnsErr.IsTimeout
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return true
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return true // dial, read or write on the connection failed
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		// The transport failed in a way not named above, such as a
		// connection closed by the server mid-response.
		return !strings.Contains(urlErr.Error(), "server gave HTTP response to HTTPS client")
	}
	return false
}

// permanentError marks an error as not worth retrying, whatever it wraps
// (such as a batch of errors of which only some are transient).
type permanentError struct{ err error }

func (p *permanentError) Error() string { return p.err.Error() }
func (p *permanentError) Unwrap() error { return p.err }

// do runs fn, retrying it under b's policy, and returns nil or an *OpError
// naming op, b's bucket and key (or key prefix);
// each call is one attempt.
func (b *Bucket) do(ctx context.Context, op, key string, fn func(ctx context.Context) error) error {
	p := b.retry
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return &OpError{Op: op, Bucket: b.bucket, Key: key, Attempts: attempt - 1, Err: err}
		}
		err := fn(ctx)
		if err == nil {
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			// The request failed because the caller gave up.
			return &OpError{Op: op, Bucket: b.bucket, Key: key, Attempts: attempt, Err: cerr}
		}
		if attempt >= p.MaxAttempts || !IsTransient(err) {
			return &OpError{Op: op, Bucket: b.bucket, Key: key, Attempts: attempt, Err: err}
		}
		wait := p.backoff(attempt)
		if b.onRetry != nil {
			b.onRetry(op, key, attempt, err, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return &OpError{Op: op, Bucket: b.bucket, Key: key, Attempts: attempt, Err: ctx.Err()}
		case <-t.C:
		}
	}
}
