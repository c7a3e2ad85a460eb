package storetest

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stategen/stategen/runtime"
)

// Factory returns a new, empty store with configuration cfg, which the
// suite always gives valid (it may be the zero StoreConfig, meaning the
// defaults). It reports its own failures with tb.Fatal and registers with
// tb.Cleanup whatever it must clean up; the suite closes every store it gets
// as well.
type Factory func(tb testing.TB, cfg runtime.StoreConfig) runtime.Store

// SnapshotCodec carries a snapshot through a serialized form: it reads v
// completely, writes it somewhere (files under tb.TempDir(), say) and returns
// a View that reads it back. The suite releases v when the codec returns, so
// the returned View must not depend on it. If the returned View also has a
// Release() error method, the suite calls it when done.
//
// The suite may call the codec from goroutines other than the test's, on
// several snapshots at once, while the store keeps changing: it must be safe
// for concurrent use and report failures by returning an error, never with
// tb.Fatal.
type SnapshotCodec func(tb testing.TB, v runtime.View) (runtime.View, error)

// Option changes how Run checks a store.
type Option func(*options)

type options struct {
	codec   SnapshotCodec
	scale   float64
	seed    uint64
	hasSeed bool
	sorted  bool
}

// WithSnapshotCodec routes every snapshot that the suite restores or reads
// in the background through codec. The default is an in-memory deep copy
// (CopyView); a checkpoint format passes a codec that writes the snapshot to
// files and reads it back, so that the whole suite runs through it.
func WithSnapshotCodec(codec SnapshotCodec) Option {
	return func(o *options) { o.codec = codec }
}

// WithScale multiplies the number of operations of the randomized tests by
// factor (default 1). Slow backends pass a factor below 1; the environment
// variable STATEGEN_LONG=1 multiplies by 100 again, and -short divides by 5.
func WithScale(factor float64) Option {
	return func(o *options) { o.scale = factor }
}

// WithSeed fixes the seed of the randomized tests (by default it changes
// from run to run and is logged). The environment variable
// STATEGEN_SEED=<n> overrides it, to replay a logged failure.
func WithSeed(seed uint64) Option {
	return func(o *options) { o.seed, o.hasSeed = seed, true }
}

// Sorted declares that the store is a sorted backend (DESIGN.md §2): it
// yields the namespaces of a key (Namespaces), and a snapshot's entries
// in a key group (Scan), in encoded order — bytewise by key, then
// namespace, then user key — whatever their widths. The step
// Contract/Order then checks the order; without Sorted it checks only that
// each is yielded once.
func Sorted() Option {
	return func(o *options) { o.sorted = true }
}

// Run runs the conformance suite against the stores that factory makes.
// Its sub-tests are:
//
//   - Contract: deterministic examples of every rule of runtime.Store, for
//     every kind, keyed and sub-keyed;
//   - Random: seeded random operation sequences checked against a Model,
//     read by read, with a full comparison of snapshots every ~200
//     operations, snapshots held live across writes, and restores;
//   - SnapshotsWhileWriting: snapshots read on other goroutines while the
//     store keeps changing, several live at once, released in random order;
//     and (ConcurrentScans) the key groups of one snapshot, and of the
//     codec's View of it, scanned by several goroutines at once, each its
//     own key groups (run it with -race);
//   - Restore: a snapshot restored into a fresh store, which then goes on;
//   - Rescale: the snapshots of p stores restored into q stores that own
//     other key-group ranges, for (p, q) in (1, 4), (2, 3), (3, 2), (4, 1),
//     and back.
//
// The seed is logged; STATEGEN_SEED=<n> replays it.
func Run(t *testing.T, factory Factory, opts ...Option) {
	t.Helper()
	o, err := resolveOptions(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range suiteGroups() {
		t.Run(g.name, func(t *testing.T) {
			for _, c := range g.checks {
				t.Run(c.name, func(t *testing.T) {
					e := newEnv(t, factory, o)
					if err := catch(func() { c.run(e) }); err != nil {
						t.Fatal(err)
					}
				})
			}
		})
	}
}

// check is one sub-test of the suite. run reports a failure by calling fail
// (which panics with a failure, recovered by catch), so that checks can run
// against a deliberately broken store without failing the test that runs
// them (see the package's own tests).
type check struct {
	name string
	run  func(e *env)
}

type group struct {
	name   string
	checks []check
}

func suiteGroups() []group {
	return []group{
		{"Contract", contractChecks()},
		{"Random", randomChecks()},
		{"SnapshotsWhileWriting", []check{{"Overlap", checkSnapshotsWhileWriting}, {"ConcurrentScans", checkConcurrentScans}}},
		{"Restore", []check{{"Fresh", checkRestoreFresh}}},
		{"Rescale", rescaleChecks()},
		{"Timers", timersChecks()},
		{"TTL", ttlChecks()},
	}
}

func resolveOptions(opts []Option) (*options, error) {
	o := &options{scale: 1}
	for _, opt := range opts {
		opt(o)
	}
	if o.codec == nil {
		o.codec = func(_ testing.TB, v runtime.View) (runtime.View, error) { return CopyView(v) }
	}
	if s := os.Getenv("STATEGEN_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("storetest: STATEGEN_SEED=%q is not an unsigned integer", s)
		}
		o.seed, o.hasSeed = n, true
	}
	if !o.hasSeed {
		o.seed = uint64(time.Now().UnixNano())
	}
	if os.Getenv("STATEGEN_LONG") == "1" {
		o.scale *= 100
	}
	return o, nil
}

// env is what a check runs with.
type env struct {
	tb      testing.TB
	factory Factory
	o       *options
}

func newEnv(tb testing.TB, factory Factory, o *options) *env {
	return &env{tb: tb, factory: factory, o: o}
}

// newStore returns a new store from the factory, checks its Config, and
// closes it at cleanup.
func (e *env) newStore(cfg runtime.StoreConfig) runtime.Store {
	want, err := cfg.Normalize()
	if err != nil {
		panic(fmt.Sprintf("storetest: invalid config %+v: %v", cfg, err))
	}
	s := e.factory(e.tb, cfg)
	if s == nil {
		fail("the factory returned a nil Store for %+v", cfg)
	}
	e.tb.Cleanup(func() { _ = s.Close() })
	if got := s.Config(); got.MaxParallelism != want.MaxParallelism || got.KeyGroups != want.KeyGroups || got.Clock != want.Clock {
		fail("a store made with %+v has Config() %+v, want %+v", cfg, got, want)
	}
	return s
}

// codec runs the snapshot codec on v and fails if it fails.
func (e *env) codec(v runtime.View) runtime.View {
	out, err := e.o.codec(e.tb, v)
	if err != nil {
		fail("snapshot codec: %v", err)
	}
	if out == nil {
		fail("snapshot codec returned a nil View")
	}
	return out
}

// rng returns the random source of the check named name, derived from the
// run's seed, and logs the seed.
func (e *env) rng(name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	e.tb.Logf("%s: seed %d (replay with STATEGEN_SEED=%d)", name, e.o.seed, e.o.seed)
	return rand.New(rand.NewPCG(e.o.seed, h.Sum64()))
}

// ops scales a base operation count by the options, -short and
// STATEGEN_LONG.
func (e *env) ops(base int) int {
	f := float64(base) * e.o.scale
	if testing.Short() {
		f /= 5
	}
	return max(int(f), 20)
}

// failure is the panic value of fail.
type failure struct{ err error }

// fail stops the running check with an error.
func fail(format string, args ...any) {
	panic(failure{fmt.Errorf(format, args...)})
}

// must fails the check if err is not nil.
func must(err error, format string, args ...any) {
	if err != nil {
		fail("%s: %w", fmt.Sprintf(format, args...), err)
	}
}

// catch runs fn and returns the failure it reported, or an error describing
// a panic of the code under test.
func catch(fn func()) (err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if f, ok := r.(failure); ok {
			err = f.err
			return
		}
		err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
	}()
	fn()
	return nil
}

// wantErr fails unless err wraps target and its message contains every one
// of mentions (the state name, the key group: the contract's errors name
// what is at fault).
func wantErr(err, target error, what string, mentions ...string) {
	if err == nil {
		fail("%s: got no error, want %v", what, target)
	}
	if !errors.Is(err, target) {
		fail("%s: got error %q, want one wrapping %q", what, err, target)
	}
	for _, m := range mentions {
		if !strings.Contains(err.Error(), m) {
			fail("%s: error %q does not mention %q", what, err, m)
		}
	}
}

// diff returns cmp.Diff(want, got), shortened for messages; "" means equal.
func diff(want, got any) string {
	if reflect.DeepEqual(want, got) { // fast path; the types compared hold no unexported fields
		return ""
	}
	d := cmp.Diff(want, got)
	const limit = 8 << 10
	if len(d) > limit {
		d = d[:limit] + "\n... (diff truncated)"
	}
	return d
}

// dumpStore takes a snapshot of s, dumps it and releases it.
func dumpStore(s runtime.Store) Contents {
	snap, err := s.Snapshot()
	must(err, "Snapshot")
	c, err := Dump(snap)
	if rerr := snap.Release(); rerr != nil && err == nil {
		err = fmt.Errorf("Release: %w", rerr)
	}
	must(err, "dump of a snapshot")
	return c
}

// releaseView releases v if it can be released (a codec's output may be).
func releaseView(v runtime.View) {
	if r, ok := v.(interface{ Release() error }); ok {
		must(r.Release(), "release of the snapshot codec's view")
	}
}
