package s3storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/minio/minio-go/v7"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want Options
		err  string // a substring of the error, if one is expected
	}{
		{url: "s3://bucket", want: Options{Bucket: "bucket"}},
		{url: "s3://bucket/", want: Options{Bucket: "bucket"}},
		{url: "s3://bucket/jobs/clicks/", want: Options{Bucket: "bucket", Prefix: "jobs/clicks"}},
		{url: "s3://b/p?endpoint=127.0.0.1:9000&insecure=1&region=eu-west-1",
			want: Options{Bucket: "b", Prefix: "p", Endpoint: "127.0.0.1:9000", Insecure: true, Region: "eu-west-1"}},
		{url: "s3://b?endpoint=https://minio.example:9000&insecure=false",
			want: Options{Bucket: "b", Endpoint: "https://minio.example:9000"}},
		{url: "s3://b?part-size=16MiB&concurrency=4&read-ahead=512KiB&max-attempts=3",
			want: Options{Bucket: "b", PartSize: 16 << 20, Concurrency: 4, ReadAhead: 512 << 10, Retry: RetryPolicy{MaxAttempts: 3}}},
		{url: "s3://b?part-size=8388608", want: Options{Bucket: "b", PartSize: 8 << 20}},
		{url: "/local/dir", err: "scheme must be s3"},
		{url: "https://bucket/x", err: "scheme must be s3"},
		{url: "s3:///prefix", err: "names no bucket"},
		{url: "s3://key:secret@bucket/p", err: "credentials do not go in the URL"},
		{url: "s3://b?endpiont=x", err: `unknown parameter "endpiont"`},
		{url: "s3://b?insecure=maybe", err: "parameter insecure"},
		{url: "s3://b?part-size=big", err: "parameter part-size"},
		{url: "s3://b?concurrency=0", err: "parameter concurrency"},
		{url: "s3://b?region=a&region=b", err: "given 2 times"},
		{url: "s3://b#frag", err: "fragment"},
	} {
		got, err := ParseURL(tc.url)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseURL(%q) = %v, want an error with %q", tc.url, err, tc.err)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("ParseURL(%q): the error shows the secret: %v", tc.url, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseURL(%q): %v", tc.url, err)
			continue
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("ParseURL(%q) (-want +got):\n%s", tc.url, d)
		}
	}
}

func clearEnv(t *testing.T) {
	for _, k := range []string{"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION",
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"} {
		t.Setenv(k, "")
	}
}

func TestResolveTakesDefaultsFromTheEnvironment(t *testing.T) {
	clearEnv(t)
	t.Setenv("AWS_ENDPOINT_URL", "http://generic:1")
	t.Setenv("AWS_ENDPOINT_URL_S3", "http://s3-specific:2")
	t.Setenv("AWS_DEFAULT_REGION", "eu-central-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKID")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "SECRET")
	t.Setenv("AWS_SESSION_TOKEN", "TOKEN")
	o, err := Options{Bucket: "b", Prefix: "/p/q/"}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	want := Options{Bucket: "b", Prefix: "p/q", Endpoint: "http://s3-specific:2", Region: "eu-central-1",
		AccessKeyID: "AKID", SecretAccessKey: "SECRET", SessionToken: "TOKEN",
		PartSize: DefaultPartSize, Concurrency: DefaultConcurrency, ReadAhead: DefaultReadAhead,
		Retry: RetryPolicy{}.withDefaults()}
	if d := cmp.Diff(want, o, cmp.Comparer(func(a, b func(string, string, int, error, time.Duration)) bool { return a == nil && b == nil })); d != "" {
		t.Errorf("Resolve (-want +got):\n%s", d)
	}
	// Explicit options win over the environment; AWS_REGION over
	// AWS_DEFAULT_REGION.
	t.Setenv("AWS_REGION", "us-west-2")
	o, err = Options{Bucket: "b", Endpoint: "127.0.0.1:9000", AccessKeyID: "mine", SecretAccessKey: "own"}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if o.Endpoint != "127.0.0.1:9000" || o.Region != "us-west-2" || o.AccessKeyID != "mine" || o.SessionToken != "" {
		t.Errorf("Resolve with explicit options = %+v", o)
	}
}

func TestResolveRejectsBadOptions(t *testing.T) {
	clearEnv(t)
	creds := func(o Options) Options { o.AccessKeyID, o.SecretAccessKey = "k", "s"; return o }
	for _, tc := range []struct {
		o   Options
		err string
	}{
		{Options{}, "no bucket name"},
		{creds(Options{Bucket: "a/b"}), "contains '/'"},
		{Options{Bucket: "b"}, "no credentials"},
		{creds(Options{Bucket: "b", PartSize: 1 << 20}), "part size"},
		{creds(Options{Bucket: "b", Concurrency: -1}), "concurrency"},
		{creds(Options{Bucket: "b", Prefix: "a//b"}), "prefix"},
		{creds(Options{Bucket: "b", Prefix: "a/../b"}), "prefix"},
		{creds(Options{Bucket: "b", Prefix: strings.Repeat("p", maxPrefixLen+1)}), "prefix"},
	} {
		if _, err := tc.o.Resolve(); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Resolve(%+v) = %v, want an error with %q", tc.o, err, tc.err)
		}
	}
}

func TestHostAndTLS(t *testing.T) {
	for _, tc := range []struct {
		endpoint string
		insecure bool
		host     string
		secure   bool
		err      bool
	}{
		{endpoint: "s3.amazonaws.com", host: "s3.amazonaws.com", secure: true},
		{endpoint: "minio.internal:9000", host: "minio.internal:9000", secure: true},
		{endpoint: "minio.internal:9000", insecure: true, host: "minio.internal:9000"},
		{endpoint: "127.0.0.1:9000", host: "127.0.0.1:9000"},
		{endpoint: "127.9.9.9:9000", host: "127.9.9.9:9000"},
		{endpoint: "localhost:9000", host: "localhost:9000"},
		{endpoint: "[::1]:9000", host: "[::1]:9000"},
		{endpoint: "http://minio.internal:9000", host: "minio.internal:9000"},
		{endpoint: "https://minio.internal", host: "minio.internal", secure: true},
		{endpoint: "https://127.0.0.1:9000", host: "127.0.0.1:9000", secure: true},
		{endpoint: "ftp://x", err: true},
		{endpoint: "http://x/path", err: true},
		{endpoint: "x/y", err: true},
	} {
		host, secure, err := hostAndTLS(tc.endpoint, tc.insecure)
		if tc.err {
			if err == nil {
				t.Errorf("hostAndTLS(%q) = %q, %v; want an error", tc.endpoint, host, secure)
			}
			continue
		}
		if err != nil || host != tc.host || secure != tc.secure {
			t.Errorf("hostAndTLS(%q, %v) = %q, %v, %v; want %q, %v", tc.endpoint, tc.insecure, host, secure, err, tc.host, tc.secure)
		}
	}
}

func TestIsTransient(t *testing.T) {
	s3err := func(status int, code string) error {
		return minio.ErrorResponse{StatusCode: status, Code: code, Message: "m"}
	}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{s3err(503, "ServiceUnavailable"), true},
		{s3err(503, "SlowDown"), true},
		{s3err(500, "InternalError"), true},
		{s3err(502, "502 Bad Gateway"), true},
		{s3err(429, "TooManyRequests"), true},
		{s3err(408, "RequestTimeout"), true},
		{s3err(200, "InternalError"), true}, // an error in a 200 response to CompleteMultipartUpload
		{s3err(404, minio.NoSuchKey), false},
		{s3err(404, minio.NoSuchBucket), false},
		{s3err(403, minio.AccessDenied), false},
		{s3err(403, "InvalidAccessKeyId"), false},
		{s3err(403, "SignatureDoesNotMatch"), false},
		{s3err(412, "PreconditionFailed"), false},
		{s3err(400, "EntityTooSmall"), false},
		{fmt.Errorf("wrapped: %w", s3err(503, "SlowDown")), true},
		{&url.Error{Op: "Put", URL: "u", Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}, true},
		{&url.Error{Op: "Put", URL: "u", Err: syscall.ECONNRESET}, true},
		{&url.Error{Op: "Get", URL: "u", Err: io.EOF}, true},
		{fmt.Errorf("body: %w", io.ErrUnexpectedEOF), true},
		{&net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}, false},
		{&net.DNSError{Err: "timeout", Name: "x", IsTimeout: true}, true},
		{context.Canceled, false},
		{context.DeadlineExceeded, false},
		{&url.Error{Op: "Get", URL: "u", Err: context.Canceled}, false},
		{&permanentError{s3err(503, "SlowDown")}, false},
		{errors.New("something else"), false},
	} {
		if got := IsTransient(tc.err); got != tc.want {
			t.Errorf("IsTransient(%#v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	p := RetryPolicy{InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}.withDefaults()
	for attempt, limit := range []time.Duration{0, 100, 200, 400, 800, 1000, 1000, 1000} {
		if attempt == 0 {
			continue
		}
		limit *= time.Millisecond
		var sawHigh, sawLow bool
		for range 2000 {
			d := p.backoff(attempt)
			if d < 0 || d > limit {
				t.Fatalf("backoff(%d) = %v, outside [0, %v]", attempt, d, limit)
			}
			sawHigh = sawHigh || d > limit*3/4
			sawLow = sawLow || d < limit/4
		}
		if !sawHigh || !sawLow {
			t.Errorf("backoff(%d) is not jittered over [0, %v]: low seen %v, high seen %v", attempt, limit, sawLow, sawHigh)
		}
	}
}

func TestDo(t *testing.T) {
	var retried []int
	b := &Bucket{bucket: "bkt", retry: RetryPolicy{MaxAttempts: 4, InitialBackoff: time.Microsecond, MaxBackoff: time.Microsecond},
		onRetry: func(op, key string, attempt int, err error, wait time.Duration) { retried = append(retried, attempt) }}
	transient := minio.ErrorResponse{StatusCode: 503, Code: "SlowDown", Message: "Please reduce your request rate."}

	t.Run("SucceedsAfterTransientFailures", func(t *testing.T) {
		retried = nil
		calls := 0
		err := b.do(ctx, "PutObject", "k", func(context.Context) error {
			calls++
			if calls < 3 {
				return transient
			}
			return nil
		})
		if err != nil || calls != 3 || len(retried) != 2 {
			t.Errorf("do = %v after %d calls, %v retries; want success after 3 calls", err, calls, retried)
		}
	})
	t.Run("GivesUpAfterMaxAttempts", func(t *testing.T) {
		retried = nil
		calls := 0
		err := b.do(ctx, "PutObject", "p/k", func(context.Context) error { calls++; return transient })
		var oe *OpError
		if !errors.As(err, &oe) || calls != 4 || oe.Attempts != 4 || len(retried) != 3 {
			t.Fatalf("do = %v after %d calls; want an *OpError after 4", err, calls)
		}
		want := "s3storage: PutObject s3://bkt/p/k: Please reduce your request rate (HTTP 503, SlowDown, 4 attempts)"
		if err.Error() != want {
			t.Errorf("error = %q\nwant    %q", err, want)
		}
		var er minio.ErrorResponse
		if !errors.As(err, &er) || er.Code != "SlowDown" {
			t.Errorf("the S3 error is not in the chain: %v", err)
		}
	})
	t.Run("PermanentErrorsAreNotRetried", func(t *testing.T) {
		retried = nil
		calls := 0
		err := b.do(ctx, "HeadObject", "k", func(context.Context) error {
			calls++
			return minio.ErrorResponse{StatusCode: 403, Code: "AccessDenied", Message: "Access Denied."}
		})
		var oe *OpError
		if !errors.As(err, &oe) || calls != 1 || oe.Attempts != 1 || len(retried) != 0 {
			t.Errorf("do = %v after %d calls; want one attempt", err, calls)
		}
	})
	t.Run("StopsWhenTheContextIsDone", func(t *testing.T) {
		retried = nil
		cctx, cancel := context.WithCancel(ctx)
		calls := 0
		err := b.do(cctx, "GetObject", "k", func(context.Context) error {
			calls++
			if calls == 2 {
				cancel()
			}
			return transient
		})
		if !errors.Is(err, context.Canceled) || calls != 2 {
			t.Errorf("do = %v after %d calls; want context.Canceled after 2", err, calls)
		}
		if err := b.do(cctx, "GetObject", "k", func(context.Context) error { t.Error("called with a done context"); return nil }); !errors.Is(err, context.Canceled) {
			t.Errorf("do with a done context = %v", err)
		}
	})
}

func TestMarkerNames(t *testing.T) {
	id := newID()
	if len(id) != idLen {
		t.Fatalf("newID() = %q, want %d characters", id, idLen)
	}
	for _, name := range []string{"a", "op-0.sgc", "_metadata", "with-dashes-and.dots"} {
		got, ok := parseMarker(markerName(id, name))
		if !ok || got != name {
			t.Errorf("parseMarker(markerName(%q)) = %q, %v", name, got, ok)
		}
	}
	for _, bad := range []string{"a", ".pending-", ".pending-0123-x", ".tmp-0123456789abcdef-x", ".pending-0123456789abcdefx"} {
		if name, ok := parseMarker(bad); ok {
			t.Errorf("parseMarker(%q) = %q, want not a marker", bad, name)
		}
	}
}
