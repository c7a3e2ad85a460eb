package s3storage

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Options configure a Bucket. The zero value of every field but Bucket
// means its default, which for the endpoint, region and credentials comes
// from the usual environment variables (see Options.Resolve).
type Options struct {
	// Bucket is the bucket's name. Required.
	Bucket string
	// Prefix is the key prefix under which checkpoints live, without
	// leading or trailing '/': checkpoint c's object o is the key
	// "<Prefix>/<c>/<o>". Empty means the bucket's root. The prefix must
	// belong to the checkpoints alone: Cleanup removes whatever else looks
	// like an uncommitted checkpoint there.
	Prefix string

	// Endpoint is the S3 service: "host", "host:port" or a URL
	// "http://host:port" / "https://host". Empty means
	// $AWS_ENDPOINT_URL_S3, else $AWS_ENDPOINT_URL, else AWS
	// ("s3.amazonaws.com").
	Endpoint string
	// Insecure selects plain HTTP. A URL endpoint's scheme decides by
	// itself; a bare endpoint on a loopback address (127.0.0.0/8, ::1,
	// localhost) is plain HTTP too, since nothing on loopback has a
	// certificate; any other bare endpoint is HTTPS unless Insecure.
	Insecure bool
	// Region is the bucket's region. Empty means $AWS_REGION, else
	// $AWS_DEFAULT_REGION, else "us-east-1" (what MinIO answers to).
	Region string

	// AccessKeyID, SecretAccessKey and SessionToken are the credentials.
	// Empty means $AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY and
	// $AWS_SESSION_TOKEN.
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string

	// PartSize is the size of the parts of a multipart upload, and so the
	// size above which an object is uploaded in parts; zero means 8 MiB.
	// At least 5 MiB (S3's smallest part). Parts grow past 1000 parts so
	// that an object never needs more than S3's 10000.
	PartSize int64
	// Concurrency is how many parts of one object upload at once while
	// the next part fills; zero means 2. A writer holds at most
	// (Concurrency+1)·PartSize bytes.
	Concurrency int
	// ReadAhead is how many bytes a read of an object fetches at least,
	// so that the small sequential reads of a checkpoint reader cost one
	// request per ReadAhead bytes; zero means 1 MiB.
	ReadAhead int

	// Retry bounds the retries of each request.
	Retry RetryPolicy
	// OnRetry, if set, is called before each retry with the operation,
	// key, the attempt that failed, its error and the pause that follows.
	// It is how a program logs transient failures.
	OnRetry func(op, key string, attempt int, err error, wait time.Duration)

	// Transport carries the HTTP requests; nil means minio-go's default
	// transport.
	Transport http.RoundTripper
}

// Defaults of Options.
const (
	DefaultPartSize    = 8 << 20
	MinPartSize        = 5 << 20
	MaxPartSize        = 5 << 30
	DefaultConcurrency = 2
	DefaultReadAhead   = 1 << 20
	DefaultRegion      = "us-east-1"
	awsEndpoint        = "s3.amazonaws.com"
)

// maxPrefixLen keeps keys within S3's 1024 bytes: prefix, two names of at
// most 200 bytes and a marker's 26.
const maxPrefixLen = 512

// Resolve returns o with every default applied: environment variables for
// the endpoint, region and credentials, then the package defaults. It
// fails on a missing bucket name, bad sizes or missing credentials.
func (o Options) Resolve() (Options, error) {
	if o.Bucket == "" {
		return o, errors.New("s3storage: no bucket name")
	}
	if strings.ContainsAny(o.Bucket, "/?#") {
		return o, fmt.Errorf("s3storage: bucket name %q contains '/', '?' or '#'", o.Bucket)
	}
	o.Prefix = strings.Trim(o.Prefix, "/")
	if len(o.Prefix) > maxPrefixLen {
		return o, fmt.Errorf("s3storage: prefix of %d bytes is longer than %d", len(o.Prefix), maxPrefixLen)
	}
	for _, el := range strings.Split(o.Prefix, "/") {
		if o.Prefix != "" && (el == "" || el == "." || el == "..") {
			return o, fmt.Errorf("s3storage: prefix %q has an empty, '.' or '..' element", o.Prefix)
		}
	}
	if o.Endpoint == "" {
		o.Endpoint = firstEnv("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
	}
	if o.Endpoint == "" {
		o.Endpoint = awsEndpoint
	}
	if o.Region == "" {
		o.Region = firstEnv("AWS_REGION", "AWS_DEFAULT_REGION")
	}
	if o.Region == "" {
		o.Region = DefaultRegion
	}
	if o.AccessKeyID == "" && o.SecretAccessKey == "" {
		o.AccessKeyID = os.Getenv("AWS_ACCESS_KEY_ID")
		o.SecretAccessKey = os.Getenv("AWS_SECRET_ACCESS_KEY")
		if o.SessionToken == "" {
			o.SessionToken = os.Getenv("AWS_SESSION_TOKEN")
		}
	}
	if o.AccessKeyID == "" || o.SecretAccessKey == "" {
		return o, fmt.Errorf("s3storage: bucket %s: no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or Options.AccessKeyID and SecretAccessKey)", o.Bucket)
	}
	if o.PartSize == 0 {
		o.PartSize = DefaultPartSize
	}
	if o.PartSize < MinPartSize || o.PartSize > MaxPartSize {
		return o, fmt.Errorf("s3storage: part size %d is outside [%d, %d] (S3's limits)", o.PartSize, MinPartSize, MaxPartSize)
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Concurrency < 1 || o.Concurrency > 64 {
		return o, fmt.Errorf("s3storage: concurrency %d is outside [1, 64]", o.Concurrency)
	}
	if o.ReadAhead == 0 {
		o.ReadAhead = DefaultReadAhead
	}
	if o.ReadAhead < 0 || o.ReadAhead > 1<<30 {
		return o, fmt.Errorf("s3storage: read-ahead %d is outside [0, 1GiB]", o.ReadAhead)
	}
	o.Retry = o.Retry.withDefaults()
	return o, nil
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// hostAndTLS splits an endpoint into the host[:port] that minio-go takes
// and whether to use TLS.
func hostAndTLS(endpoint string, insecure bool) (host string, secure bool, err error) {
	if strings.Contains(endpoint, "://") {
		u, err := url.Parse(endpoint)
		if err != nil {
			return "", false, fmt.Errorf("s3storage: endpoint %q: %w", endpoint, err)
		}
		if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.User != nil {
			return "", false, fmt.Errorf("s3storage: endpoint %q: only a scheme, host and port are allowed", endpoint)
		}
		switch u.Scheme {
		case "http":
			return u.Host, false, nil
		case "https":
			return u.Host, !insecure, nil
		default:
			return "", false, fmt.Errorf("s3storage: endpoint %q: scheme %q is not http or https", endpoint, u.Scheme)
		}
	}
	if strings.ContainsAny(endpoint, "/?#@") {
		return "", false, fmt.Errorf("s3storage: endpoint %q: want host[:port] or a URL", endpoint)
	}
	return endpoint, !insecure && !isLoopback(endpoint), nil
}

func isLoopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// IsURL reports whether s is an S3 storage URL ("s3://..."), as opposed to
// a local directory.
func IsURL(s string) bool { return strings.HasPrefix(s, "s3://") }

// ParseURL returns the options that an S3 storage URL names:
//
//	s3://BUCKET[/PREFIX][?PARAM=VALUE&...]
//
// with the parameters
//
//	endpoint=HOST[:PORT] or a URL   Options.Endpoint
//	insecure=1|true|0|false         Options.Insecure (plain HTTP)
//	region=NAME                     Options.Region
//	part-size=BYTES                 Options.PartSize ("16MiB", "8388608")
//	concurrency=N                   Options.Concurrency
//	read-ahead=BYTES                Options.ReadAhead
//	max-attempts=N                  Options.Retry.MaxAttempts
//
// Credentials never go in the URL: they come from the environment. An
// unknown parameter is an error, so that a typo is not silently ignored.
// The options are not resolved: New does that.
func ParseURL(raw string) (Options, error) {
	var o Options
	u, err := url.Parse(raw)
	if err != nil {
		return o, fmt.Errorf("s3storage: URL %q: %w", raw, err)
	}
	if u.Scheme != "s3" {
		return o, fmt.Errorf("s3storage: URL %q: scheme must be s3, as in s3://bucket/prefix", raw)
	}
	if u.User != nil {
		return o, fmt.Errorf("s3storage: URL %q: credentials do not go in the URL; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", u.Redacted())
	}
	if u.Host == "" {
		return o, fmt.Errorf("s3storage: URL %q names no bucket (want s3://bucket/prefix)", raw)
	}
	if u.Fragment != "" {
		return o, fmt.Errorf("s3storage: URL %q: unexpected fragment", raw)
	}
	o.Bucket = u.Host
	o.Prefix = strings.Trim(u.Path, "/")
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return o, fmt.Errorf("s3storage: URL %q: %w", raw, err)
	}
	for k, vs := range q {
		if len(vs) != 1 {
			return o, fmt.Errorf("s3storage: URL %q: parameter %s given %d times", raw, k, len(vs))
		}
		v := vs[0]
		bad := func(err error) error { return fmt.Errorf("s3storage: URL %q: parameter %s=%q: %v", raw, k, v, err) }
		switch k {
		case "endpoint":
			o.Endpoint = v
		case "insecure":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return o, bad(errors.New("want 1, true, 0 or false"))
			}
			o.Insecure = b
		case "region":
			o.Region = v
		case "part-size":
			n, err := parseBytes(v)
			if err != nil {
				return o, bad(err)
			}
			o.PartSize = n
		case "read-ahead":
			n, err := parseBytes(v)
			if err != nil {
				return o, bad(err)
			}
			if n > 1<<30 {
				return o, bad(errors.New("more than 1GiB"))
			}
			o.ReadAhead = int(n)
		case "concurrency", "max-attempts":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return o, bad(errors.New("want a positive integer"))
			}
			if k == "concurrency" {
				o.Concurrency = n
			} else {
				o.Retry.MaxAttempts = n
			}
		default:
			return o, fmt.Errorf("s3storage: URL %q: unknown parameter %q (known: endpoint, insecure, region, part-size, concurrency, read-ahead, max-attempts)", raw, k)
		}
	}
	return o, nil
}

// parseBytes parses "8388608", "8MiB", "512KiB" or "1GiB".
func parseBytes(s string) (int64, error) {
	mult := int64(1)
	num := s
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = n, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<40)/mult {
		return 0, errors.New("want a byte count such as 8388608, 512KiB, 16MiB or 1GiB")
	}
	return n * mult, nil
}
