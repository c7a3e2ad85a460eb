package s3storage

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/checkpoint/storagetest"
	"github.com/stategen/stategen/internal/testenv/miniotest"
)

// fault is what the proxy does to the first request of each kind.
type fault int

const (
	pass         fault = iota // forward everything
	unavailable               // answer 503 without forwarding
	reset                     // reset the connection without forwarding
	loseResponse              // forward, then reset instead of answering
	alwaysDown                // answer every request with 503
)

// proxy sits between a Bucket and MinIO on loopback and injects faults
// deterministically: each distinct request (method, path, query, range)
// fails the first time the proxy sees it, and passes after.
type proxy struct {
	srv    *httptest.Server
	target string
	tr     *http.Transport

	mode     atomic.Int64
	injected atomic.Int64 // faults injected
	requests sync.Map     // method -> *atomic.Int64, requests seen

	mu   sync.Mutex
	seen map[string]bool
}

func newProxy(t testing.TB, target string) *proxy {
	p := &proxy{target: target, seen: make(map[string]bool), tr: &http.Transport{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(func() {
		p.srv.Close()
		p.tr.CloseIdleConnections()
	})
	return p
}

func (p *proxy) endpoint() string { return strings.TrimPrefix(p.srv.URL, "http://") }

func (p *proxy) set(f fault) {
	p.mu.Lock()
	p.seen = make(map[string]bool)
	p.mu.Unlock()
	p.mode.Store(int64(f))
}

func (p *proxy) count(method string) int64 {
	v, _ := p.requests.LoadOrStore(method, new(atomic.Int64))
	return v.(*atomic.Int64).Load()
}

// first reports whether r is the first request of its kind.
func (p *proxy) first(r *http.Request) bool {
	id := r.Method + " " + r.URL.Path + "?" + r.URL.RawQuery + " " + r.Header.Get("Range")
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen[id] {
		return false
	}
	p.seen[id] = true
	return true
}

func (p *proxy) serve(w http.ResponseWriter, r *http.Request) {
	v, _ := p.requests.LoadOrStore(r.Method, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
	f := fault(p.mode.Load())
	if f == alwaysDown || f != pass && p.first(r) {
		p.injected.Add(1)
		switch f {
		case unavailable, alwaysDown:
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>ServiceUnavailable</Code><Message>injected by the test proxy</Message></Error>`)
			return
		case reset:
			resetConn(w)
			return
		case loseResponse:
			if resp, err := p.forward(r); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			resetConn(w)
			return
		}
	}
	resp, err := p.forward(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

// forward sends r to MinIO unchanged: the Host header stays the proxy's,
// which is what the client signed.
func (p *proxy) forward(r *http.Request) (*http.Response, error) {
	out := r.Clone(r.Context())
	out.URL.Scheme, out.URL.Host = "http", p.target
	out.RequestURI = ""
	out.Host = r.Host
	if r.ContentLength == 0 {
		out.Body = nil
	}
	return p.tr.RoundTrip(out)
}

// resetConn closes the client's connection with a TCP reset.
func resetConn(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// faultyStorage returns a Bucket that reaches MinIO through a proxy, and
// counts its retries.
func faultyStorage(t *testing.T, f fault) (*Bucket, *proxy, *atomic.Int64) {
	srv := miniotest.Shared(t)
	p := newProxy(t, srv.Endpoint)
	o := testOptions(srv, srv.NewBucket(t), "faults")
	o.Endpoint = p.endpoint()
	var retries atomic.Int64
	o.OnRetry = func(op, key string, attempt int, err error, wait time.Duration) {
		retries.Add(1)
		if !IsTransient(err) {
			t.Errorf("retried %s %s after a permanent error: %v", op, key, err)
		}
	}
	b := newBucket(t, o)
	p.set(f)
	return b, p, &retries
}

// TestConformanceUnderFaults runs the conformance suite with every
// distinct request failing once: with a 503, with a reset connection, and
// with the request carried out but its response lost (so that a retried
// conditional commit finds its own object).
func TestConformanceUnderFaults(t *testing.T) {
	// Without MinIO the test skips as a whole, before its sub-tests: their
	// fault counts would be zero.
	miniotest.Require(t)
	for _, tc := range []struct {
		name string
		f    fault
	}{{"503", unavailable}, {"reset", reset}, {"lost-response", loseResponse}} {
		t.Run(tc.name, func(t *testing.T) {
			var injected, retries int64
			storagetest.Run(t, func(t *testing.T) checkpoint.Storage {
				b, p, r := faultyStorage(t, tc.f)
				t.Cleanup(func() {
					injected += p.injected.Load()
					retries += r.Load()
				})
				return b
			})
			t.Logf("%d faults injected, %d retries", injected, retries)
			if injected < 100 {
				t.Errorf("only %d faults injected", injected)
			}
			switch tc.f {
			case unavailable:
				// Every 503 costs exactly one retry.
				if retries != injected {
					t.Errorf("%d retries for %d injected 503s, want one each", retries, injected)
				}
			default:
				// Go's transport retries some requests on a reset
				// connection by itself.
				if retries == 0 || retries > injected {
					t.Errorf("%d retries for %d injected faults", retries, injected)
				}
			}
		})
	}
}

// TestMultipartUnderFaults writes and reads a multipart object with every
// distinct request failing once, and checks that no upload is left.
func TestMultipartUnderFaults(t *testing.T) {
	for _, f := range []fault{unavailable, loseResponse} {
		b, p, retries := faultyStorage(t, f)
		data := pattern(2*MinPartSize+MinPartSize/3, 8)
		put(t, b, "chk-1", "big", data)
		if got := get(t, b, "chk-1", "big"); !bytes.Equal(got, data) {
			t.Fatalf("fault %d: read back %d bytes, not the %d written", f, len(got), len(data))
		}
		if retries.Load() == 0 || p.injected.Load() == 0 {
			t.Errorf("fault %d: %d retries, %d faults", f, retries.Load(), p.injected.Load())
		}
		p.set(pass)
		if f == unavailable {
			if got := incompleteUploads(t, b, b.Key("chk-1", "big")); len(got) != 0 {
				t.Errorf("incomplete uploads left: %q", got)
			}
		}
		if keys := rawKeys(t, b, b.root); !slices.Equal(keys, []string{b.Key("chk-1", "big")}) {
			t.Errorf("keys = %q, want only the object", keys)
		}
	}
}

// TestRetriesAreBounded points a Bucket at a server that always answers
// 503: each operation gives up after MaxAttempts requests, with an error
// that says so.
func TestRetriesAreBounded(t *testing.T) {
	b, p, retries := faultyStorage(t, alwaysDown)
	before := p.count(http.MethodGet)
	_, err := b.List(ctx)
	var oe *OpError
	if !errors.As(err, &oe) || oe.Attempts != fastRetry.MaxAttempts || !IsTransient(oe.Err) {
		t.Fatalf("List against a server that is down = %v; want an *OpError after %d attempts", err, fastRetry.MaxAttempts)
	}
	if got := p.count(http.MethodGet) - before; got != int64(fastRetry.MaxAttempts) {
		t.Errorf("%d requests sent, want %d", got, fastRetry.MaxAttempts)
	}
	if retries.Load() != int64(fastRetry.MaxAttempts-1) {
		t.Errorf("%d retries, want %d", retries.Load(), fastRetry.MaxAttempts-1)
	}
	if msg := err.Error(); !strings.Contains(msg, b.bucket) || !strings.Contains(msg, "ListObjects") || !strings.Contains(msg, "6 attempts") {
		t.Errorf("error %q: want the bucket, operation and attempts", msg)
	}
	// The storage works again once the server is back.
	p.set(pass)
	put(t, b, "chk-1", "a", []byte("x"))
}

// TestServerDownForAWhile stops a server of the test's own mid-use: a
// write fails after its retries, and works again once the server is back
// on the same address and data.
func TestServerDownForAWhile(t *testing.T) {
	srv := miniotest.Start(t)
	o := testOptions(srv, srv.NewBucket(t), "")
	o.Retry = RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
	b := newBucket(t, o)
	put(t, b, "chk-1", "a", []byte("before"))
	srv.Stop()
	_, err := b.Create(ctx, "chk-1", "b")
	var oe *OpError
	if !errors.As(err, &oe) || oe.Attempts != 3 || !IsTransient(oe.Err) {
		t.Fatalf("Create while the server is down = %v; want a transient *OpError after 3 attempts", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	put(t, b, "chk-1", "b", []byte("after"))
	if got := get(t, b, "chk-1", "a"); string(got) != "before" {
		t.Errorf("a = %q after the restart", got)
	}
}

// TestReadAheadBoundsRequests reads an object sequentially in small
// blocks, as a checkpoint reader does, and counts the GETs.
func TestReadAheadBoundsRequests(t *testing.T) {
	b, p, _ := faultyStorage(t, pass)
	b.readAhead = 1 << 20
	data := pattern(3<<20+5, 9)
	put(t, b, "chk-1", "f", data)
	o, err := b.Open(ctx, "chk-1", "f")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	before := p.count(http.MethodGet)
	var got []byte
	buf := make([]byte, 64<<10)
	for off := int64(0); off < o.Size(); {
		n, err := o.ReadAt(buf, off)
		if err != nil && !(err == io.EOF && off+int64(n) == o.Size()) {
			t.Fatalf("ReadAt at %d: %v", off, err)
		}
		got = append(got, buf[:n]...)
		off += int64(n)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("sequential reads returned the wrong bytes")
	}
	if gets := p.count(http.MethodGet) - before; gets != 4 {
		t.Errorf("%d GETs for %d bytes read in 64KiB blocks with 1MiB read-ahead, want 4", gets, len(data))
	}
}
