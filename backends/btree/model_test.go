package btree_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stategen/stategen/backends/btree"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

// A driver applies the same operations to a btree store and to the
// reference model and compares every result. Its universe of keys,
// namespaces and user keys is deliberately not prefix-free ("a", "ab",
// "\x00", the empty string) and holds keys whose item keys are shorter
// and longer than the 24 bytes the items keep inline, so that it checks
// what the store assumes of its input: nothing.

var universe = [][]byte{
	{}, []byte("a"), []byte("ab"), []byte("abc"), []byte("b"),
	{0}, {0, 0}, {0, 1}, {0xff}, {0xff, 0xff}, {0x7f, 0xff},
	[]byte("0123456789abcdef"), []byte("0123456789abcdef0"), []byte("0123456789abcdef\x00"),
	[]byte("0123456789abcdeg"), []byte(strings.Repeat("z", 40)),
}

var driverSpecs = func() []runtime.StateSpec {
	var specs []runtime.StateSpec
	for _, k := range []runtime.Kind{runtime.KindValue, runtime.KindList, runtime.KindMap, runtime.KindSortedMap} {
		for _, sub := range []bool{false, true} {
			specs = append(specs, runtime.StateSpec{Name: fmt.Sprintf("%v.sub=%v", k, sub), Kind: k, SubKeyed: sub})
		}
	}
	return specs
}()

type driver struct {
	t     testing.TB
	s     *btree.Store
	m     *storetest.Model
	maxP  int
	pick  func(n int) int // a choice in [0, n)
	bs    []runtime.State
	ms    []runtime.State
	ops   int
	trail []string // the last operations, for failure messages
}

func newDriver(t testing.TB, opts btree.Options, pick func(n int) int) *driver {
	s, err := btree.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	m, err := storetest.NewModel(opts.StoreConfig)
	if err != nil {
		t.Fatal(err)
	}
	d := &driver{t: t, s: s, m: m, maxP: s.Config().MaxParallelism, pick: pick}
	for _, spec := range driverSpecs {
		b, err := s.Register(spec)
		if err != nil {
			t.Fatal(err)
		}
		mm, err := m.Register(spec)
		if err != nil {
			t.Fatal(err)
		}
		d.bs, d.ms = append(d.bs, b), append(d.ms, mm)
	}
	return d
}

func (d *driver) bytes() []byte { return bytes.Clone(universe[d.pick(len(universe))]) }

// key returns a Key whose group the store owns (retrying a few times), or
// any key.
func (d *driver) key(sub bool) runtime.Key {
	var ns []byte
	if sub || d.pick(32) == 0 { // now and then a namespace on a keyed state: an error
		ns = d.bytes()
	}
	for range 8 {
		k := runtime.MakeKey(d.bytes(), ns, d.maxP)
		if d.s.Config().KeyGroups.Contains(k.Group()) {
			return k
		}
	}
	return runtime.MakeKey(d.bytes(), ns, d.maxP)
}

func (d *driver) fail(format string, args ...any) {
	d.t.Helper()
	d.t.Fatalf("after %d operations (last: %s): %s", d.ops, strings.Join(d.trail, "; "), fmt.Sprintf(format, args...))
}

func (d *driver) same(what string, want, got any) {
	d.t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		d.fail("%s differs (-model +btree):\n%s", what, diff)
	}
}

// errKind reduces an error to what both stores must agree on: whether
// there is one.
func errKind(err error) string {
	if err == nil {
		return "ok"
	}
	return "error"
}

type kv struct{ K, V string }

// step applies one random operation to both stores.
func (d *driver) step() {
	i := d.pick(len(d.bs))
	b, m := d.bs[i], d.ms[i]
	spec := b.Spec()
	k := d.key(spec.SubKeyed)
	d.ops++
	note := func(op string, args ...any) {
		d.trail = append(d.trail, fmt.Sprintf("%s.%s(%x/%x%s)", spec.Name, op, k.Bytes(), k.Namespace(), fmt.Sprint(args...)))
		if len(d.trail) > 8 {
			d.trail = d.trail[1:]
		}
	}
	r := d.pick(16)
	switch {
	case r == 0:
		note("Clear")
		d.same("Clear", errKind(m.Clear(k)), errKind(b.Clear(k)))
		return
	case r == 1:
		note("DeleteAll")
		d.same("DeleteAll", errKind(m.DeleteAll(k)), errKind(b.DeleteAll(k)))
		return
	case r == 2:
		note("Namespaces")
		d.same("Namespaces", d.namespaces(m, k), d.namespaces(b, k))
		return
	}
	switch spec.Kind {
	case runtime.KindValue:
		bv, mv := b.(runtime.ValueState), m.(runtime.ValueState)
		if r >= 7 && r < 9 {
			fn := d.updateFn()
			note("Update")
			d.same("Update", errKind(mv.(runtime.ValueUpdater).Update(k, fn)), errKind(bv.(runtime.ValueUpdater).Update(k, fn)))
			return
		}
		if r < 9 {
			v := d.bytes()
			note("Put", " ", v)
			d.same("Put", errKind(mv.Put(k, v)), errKind(bv.Put(k, v)))
			return
		}
		note("Get")
		mval, mok, merr := mv.Get(k)
		want := fmt.Sprintf("%q %v %s", mval, mok, errKind(merr))
		bval, bok, berr := bv.Get(k)
		d.same("Get", want, fmt.Sprintf("%q %v %s", bval, bok, errKind(berr)))
	case runtime.KindList:
		bl, ml := b.(runtime.ListState), m.(runtime.ListState)
		switch {
		case r < 7:
			v := d.bytes()
			note("Add", " ", v)
			d.same("Add", errKind(ml.Add(k, v)), errKind(bl.Add(k, v)))
		case r < 9:
			vs := make([][]byte, d.pick(4))
			for j := range vs {
				vs[j] = d.bytes()
			}
			note("AddAll", " ", len(vs))
			d.same("AddAll", errKind(ml.AddAll(k, vs)), errKind(bl.AddAll(k, vs)))
		case r < 11:
			vs := make([][]byte, d.pick(3))
			for j := range vs {
				vs[j] = d.bytes()
			}
			note("Replace", " ", len(vs))
			d.same("Replace", errKind(ml.Replace(k, vs)), errKind(bl.Replace(k, vs)))
		default:
			note("Get")
			d.same("list Get", d.list(ml, k), d.list(bl, k))
		}
	default:
		bm, mm := b.(runtime.MapState), m.(runtime.MapState)
		uk := d.bytes()
		switch {
		case r < 4:
			fn := d.updateFn()
			note("Update", " ", uk)
			d.same("map Update", errKind(mm.(runtime.MapUpdater).Update(k, uk, fn)), errKind(bm.(runtime.MapUpdater).Update(k, uk, fn)))
		case r < 8:
			v := d.bytes()
			note("Put", " ", uk, "=", v)
			d.same("Put", errKind(mm.Put(k, uk, v)), errKind(bm.Put(k, uk, v)))
		case r < 10:
			note("Delete", " ", uk)
			d.same("Delete", errKind(mm.Delete(k, uk)), errKind(bm.Delete(k, uk)))
		case r < 12:
			note("Get", " ", uk)
			mval, mok, merr := mm.Get(k, uk)
			want := fmt.Sprintf("%q %v %s", mval, mok, errKind(merr))
			bval, bok, berr := bm.Get(k, uk)
			d.same("map Get", want, fmt.Sprintf("%q %v %s", bval, bok, errKind(berr)))
		case r < 14 || spec.Kind == runtime.KindMap:
			note("Iterate")
			want, got := d.iterate(mm, k), d.iterate(bm, k)
			if spec.Kind == runtime.KindMap { // unspecified order: compare sorted
				byKey := func(a, b kv) int { return strings.Compare(a.K, b.K) }
				slices.SortFunc(want[:len(want)-1], byKey)
				slices.SortFunc(got[:len(got)-1], byKey)
			}
			d.same("Iterate", want, got)
		default:
			var lo, hi []byte
			if d.pick(4) > 0 {
				lo = d.bytes()
			}
			if d.pick(4) > 0 {
				hi = d.bytes()
			}
			reverse := d.pick(2) == 0
			limit := d.pick(4)
			note("Range", fmt.Sprintf(" lo=%x hi=%x nil=%v rev=%v limit=%d", lo, hi, hi == nil, reverse, limit))
			d.same("Range", d.rangeOf(mm.(runtime.SortedMapState), k, lo, hi, reverse, limit),
				d.rangeOf(bm.(runtime.SortedMapState), k, lo, hi, reverse, limit))
		}
	}
}

// updateFn returns the callback of a one-lookup Update: it sets a value
// of the old one's length (written in place where no snapshot sees it) or
// a new random one, the choice made now so that both stores get the same.
func (d *driver) updateFn() func(old []byte, found bool) ([]byte, error) {
	sameLen, v := d.pick(2) == 0, d.bytes()
	return func(old []byte, found bool) ([]byte, error) {
		if !found || !sameLen {
			return v, nil
		}
		nv := make([]byte, len(old))
		for i, c := range old {
			nv[i] = c + 1
		}
		return nv, nil
	}
}

func (d *driver) namespaces(st runtime.State, k runtime.Key) []string {
	out := []string{}
	err := st.Namespaces(k, func(ns []byte) bool { out = append(out, string(ns)); return true })
	slices.Sort(out)
	return append(out, errKind(err))
}

func (d *driver) list(st runtime.ListState, k runtime.Key) []string {
	out := []string{}
	err := st.Get(k, func(e []byte) bool { out = append(out, string(e)); return true })
	return append(out, errKind(err))
}

func (d *driver) iterate(st runtime.MapState, k runtime.Key) []kv {
	out := []kv{}
	err := st.Iterate(k, func(u, v []byte) bool { out = append(out, kv{string(u), string(v)}); return true })
	return append(out, kv{errKind(err), ""})
}

func (d *driver) rangeOf(st runtime.SortedMapState, k runtime.Key, lo, hi []byte, reverse bool, limit int) []kv {
	out := []kv{}
	err := st.Range(k, lo, hi, reverse, func(u, v []byte) bool {
		out = append(out, kv{string(u), string(v)})
		return limit == 0 || len(out) < limit
	})
	return append(out, kv{errKind(err), ""})
}

// snapshots returns a snapshot of each store.
func (d *driver) snapshots() (b, m runtime.Snapshot) {
	d.t.Helper()
	b, err := d.s.Snapshot()
	if err != nil {
		d.fail("Snapshot: %v", err)
	}
	m, err = d.m.Snapshot()
	if err != nil {
		d.fail("model Snapshot: %v", err)
	}
	return b, m
}

// compare dumps a snapshot of each and compares them, and releases them.
func (d *driver) compare(b, m runtime.Snapshot, what string) {
	d.t.Helper()
	want, err := storetest.Dump(m)
	if err != nil {
		d.fail("%s: dump of the model's snapshot: %v", what, err)
	}
	got, err := storetest.Dump(b)
	if err != nil {
		d.fail("%s: dump of the btree snapshot: %v", what, err)
	}
	d.same(what, want, got)
	if err := b.Release(); err != nil {
		d.fail("%s: Release: %v", what, err)
	}
	if err := m.Release(); err != nil {
		d.fail("%s: model Release: %v", what, err)
	}
}

// randPick returns a choice function drawing from a seeded source.
func randPick(seed uint64) func(n int) int {
	r := rand.New(rand.NewPCG(seed, 7))
	return func(n int) int { return r.IntN(n) }
}

// TestAgainstModelArbitraryBytes applies random operations with keys,
// namespaces and user keys that are not prefix-free, and long ones, to a
// store and to the model, comparing every result, with snapshots held live
// across writes and compared with the model's at the same point.
func TestAgainstModelArbitraryBytes(t *testing.T) {
	for _, o := range []btree.Options{
		{},
		{Degree: 2},
		{StoreConfig: runtime.StoreConfig{MaxParallelism: 4, KeyGroups: runtime.KeyGroupRange{Start: 1, End: 3}}, Degree: 3},
		{StoreConfig: runtime.StoreConfig{MaxParallelism: 1}},
		{Degree: 3, MaxSlabSize: 1 << 10, CompactionMinGarbage: 1},
	} {
		t.Run(fmt.Sprintf("maxP=%d/degree=%d/minGarbage=%d", o.MaxParallelism, o.Degree, o.CompactionMinGarbage), func(t *testing.T) {
			for seed := range uint64(3) {
				d := newDriver(t, o, randPick(seed))
				type live struct{ b, m runtime.Snapshot }
				var held []live
				n := 3000
				if testing.Short() {
					n = 600
				}
				for i := range n {
					d.step()
					switch {
					case i%211 == 0:
						b, m := d.snapshots()
						held = append(held, live{b, m})
					case i%97 == 0 && len(held) > 0:
						j := d.pick(len(held))
						d.compare(held[j].b, held[j].m, fmt.Sprintf("snapshot held across writes (seed %d)", seed))
						held = slices.Delete(held, j, j+1)
					}
				}
				for _, h := range held {
					d.compare(h.b, h.m, "snapshot held to the end")
				}
				b, m := d.snapshots()
				d.compare(b, m, "final snapshot")
				if got := d.s.LiveSnapshots(); got != 0 {
					t.Errorf("LiveSnapshots() = %d after every snapshot was released", got)
				}
			}
		})
	}
}

// FuzzAgainstModel drives the operations of TestAgainstModelArbitraryBytes
// from the fuzzer's bytes.
func FuzzAgainstModel(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add(bytes.Repeat([]byte{3, 7, 1, 15, 0, 9}, 40))
	f.Add(bytes.Repeat([]byte{6, 14, 2, 13, 5, 1, 15, 11}, 60))
	f.Fuzz(func(t *testing.T, choices []byte) {
		pos := 0
		pick := func(n int) int {
			if pos >= len(choices) {
				return 0
			}
			c := int(choices[pos])
			pos++
			return c % n
		}
		d := newDriver(t, btree.Options{Degree: 2, StoreConfig: runtime.StoreConfig{MaxParallelism: 4}, MaxSlabSize: 1 << 10, CompactionMinGarbage: 1}, pick)
		var bs, ms runtime.Snapshot
		for i := 0; pos < len(choices); i++ {
			d.step()
			if i == 5 {
				bs, ms = d.snapshots()
			}
		}
		if bs != nil {
			d.compare(bs, ms, "snapshot taken after 5 operations")
		}
		b, m := d.snapshots()
		d.compare(b, m, "final snapshot")
	})
}
