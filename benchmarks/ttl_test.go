package benchmarks

// State TTL (runtime.TTL): the Get of a value state with a TTL beside the
// Get of the same state without one, in the same store, and the same pair
// on the plain-Go limit — a Go map of values and a Go map of values with
// the time of their last update, checked against time.Now on every read.
//
//	BenchmarkTTLGet/backend=cow/keys=1M/ttl=none
//	BenchmarkTTLGet/backend=cow/keys=1M/ttl=24h
//	BenchmarkTTLGet/backend=gomap/keys=1M/ttl=24h
//
// Both states hold keys=STATEGEN_BENCH_KEYS values written at the start,
// none expired; the Gets read them in the workload's order. The cost of a
// TTL is the clock read, the stamp's comparison and the stamp's eight
// bytes per value (the bar: ttl=24h at most 1.3× ttl=none).

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stategen/stategen/runtime"
)

const benchTTL = 24 * time.Hour

// ttlGetter reads the value of a key from one state of a pair.
type ttlGetter interface {
	get(ttl bool, k int64) (Val, bool, error)
	close() error
}

type storeTTL struct {
	s          runtime.Store
	plain, ttl runtime.Value[int64, Val]
}

func (t *storeTTL) get(ttl bool, k int64) (Val, bool, error) {
	if ttl {
		return t.ttl.Get(k)
	}
	return t.plain.Get(k)
}

func (t *storeTTL) close() error { return t.s.Close() }

// mapTTL is the plain-Go limit: a map per state.
type mapTTL struct {
	plain map[int64]Val
	ttl   map[int64]stampedVal
}

type stampedVal struct {
	v  Val
	at int64 // Unix milliseconds of the last update
}

func (t *mapTTL) get(ttl bool, k int64) (Val, bool, error) {
	if !ttl {
		v, ok := t.plain[k]
		return v, ok, nil
	}
	s, ok := t.ttl[k]
	if !ok || time.Now().UnixMilli()-s.at >= benchTTL.Milliseconds() {
		return Val{}, false, nil
	}
	return s.v, true, nil
}

func (t *mapTTL) close() error { return nil }

func openTTL(b *testing.B, name string, n int, w *workload) ttlGetter {
	if name == "gomap" {
		t := &mapTTL{plain: make(map[int64]Val, n), ttl: make(map[int64]stampedVal, n)}
		now := time.Now().UnixMilli()
		for i := range n {
			t.plain[int64(i)] = w.fresh(i)
			t.ttl[int64(i)] = stampedVal{w.fresh(i), now}
		}
		return t
	}
	for _, sb := range stores {
		if sb.name != name {
			continue
		}
		dir, err := os.MkdirTemp(b.TempDir(), "ttl")
		check(b, err)
		s, err := sb.open(filepath.Join(dir, "store"), runtime.StoreConfig{})
		check(b, err)
		t := &storeTTL{s: s}
		t.plain, err = runtime.NewValue(s, runtime.ValueDescriptor[int64, Val]{Name: "plain", Key: int64Codec, Value: valCodec{}})
		check(b, err)
		t.ttl, err = runtime.NewValue(s, runtime.ValueDescriptor[int64, Val]{Name: "ttl", Key: int64Codec, Value: valCodec{},
			TTL: runtime.TTL{Duration: benchTTL, CleanupPerWrite: -1}})
		check(b, err)
		for i := range n {
			check(b, t.plain.Put(int64(i), w.val(i)))
			check(b, t.ttl.Put(int64(i), w.val(i)))
		}
		return t
	}
	b.Fatalf("no backend %q", name)
	return nil
}

// BenchmarkTTLGet reads the value of a key from a state with a TTL and
// from one without.
func BenchmarkTTLGet(b *testing.B) {
	w := load(b)
	n := w.keys
	names := []string{"gomap"}
	for _, sb := range stores {
		names = append(names, sb.name)
	}
	for _, name := range names {
		b.Run("backend="+name+"/keys="+sizeName(n), func(b *testing.B) {
			t := openTTL(b, name, n, w)
			defer func() { check(b, t.close()) }()
			keys := w.order(n)
			for _, c := range []struct {
				name string
				ttl  bool
			}{{"ttl=none", false}, {"ttl=24h", true}} {
				b.Run(c.name, func(b *testing.B) {
					b.ReportAllocs()
					for i := 0; b.Loop(); i++ {
						k := keys[i%len(keys)]
						v, ok, err := t.get(c.ttl, k)
						if !ok || err != nil || v.A != k {
							b.Fatalf("value of %d: (%v, %v, %v)", k, v.A, ok, err)
						}
						sink = v
					}
				})
			}
		})
	}
}
