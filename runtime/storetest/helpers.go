package storetest

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/stategen/stategen/runtime"
)

// Helpers of the contract checks: each runs one operation and fails the
// check if the operation fails.

// kv is one map entry as strings.
type kv struct{ K, V string }

// migrationsFrom returns the From of each of spec's migrations.
func migrationsFrom(spec runtime.StateSpec) []string {
	var out []string
	for _, m := range spec.Migrations {
		out = append(out, m.From)
	}
	return out
}

// register registers spec in s and checks the returned state: its Spec and
// the interface of its kind.
func register(s runtime.Store, spec runtime.StateSpec) runtime.State {
	st, err := s.Register(spec)
	must(err, "Register(%v)", spec)
	if st == nil {
		fail("Register(%v) returned a nil State", spec)
	}
	if got := st.Spec(); !got.Equal(spec) {
		fail("Register(%v) returned a state whose Spec() is %v, schema %q, migrations from %q; want schema %q, migrations from %q",
			spec, got, got.Schema, migrationsFrom(got), spec.Schema, migrationsFrom(spec))
	}
	var ok bool
	switch spec.Kind {
	case runtime.KindValue:
		_, ok = st.(runtime.ValueState)
	case runtime.KindList:
		_, ok = st.(runtime.ListState)
	case runtime.KindMap:
		_, ok = st.(runtime.MapState)
	case runtime.KindSortedMap:
		_, ok = st.(runtime.SortedMapState)
	}
	if !ok {
		fail("Register(%v) returned a %T, which does not implement the interface of kind %v", spec, st, spec.Kind)
	}
	return st
}

func name(st runtime.State) string { return st.Spec().Name }

// keyDesc formats k for messages.
func keyDesc(k runtime.Key) string {
	return fmt.Sprintf("key %x ns %x (group %d)", k.Bytes(), k.Namespace(), k.Group())
}

func getValue(st runtime.State, k runtime.Key) (string, bool) {
	v, found, err := st.(runtime.ValueState).Get(k)
	must(err, "%s.Get(%s)", name(st), keyDesc(k))
	return string(v), found
}

func putValue(st runtime.State, k runtime.Key, v []byte) {
	must(st.(runtime.ValueState).Put(k, v), "%s.Put(%s)", name(st), keyDesc(k))
}

// getList returns the first limit elements of k's list (all if limit <= 0),
// and fails if Get calls its callback again after it returned false.
func getList(st runtime.State, k runtime.Key, limit int) []string {
	what := fmt.Sprintf("%s.Get(%s)", name(st), keyDesc(k))
	out := []string{}
	stopped, again := false, false
	err := st.(runtime.ListState).Get(k, func(elem []byte) bool {
		if stopped {
			again = true
			return false
		}
		out = append(out, string(elem))
		stopped = limit > 0 && len(out) >= limit
		return !stopped
	})
	must(err, "%s", what)
	if again {
		fail("%s called its callback after it returned false", what)
	}
	return out
}

func getMap(st runtime.State, k runtime.Key, uk []byte) (string, bool) {
	v, found, err := st.(runtime.MapState).Get(k, uk)
	must(err, "%s.Get(%s, %x)", name(st), keyDesc(k), uk)
	return string(v), found
}

func putMap(st runtime.State, k runtime.Key, uk, v []byte) {
	must(st.(runtime.MapState).Put(k, uk, v), "%s.Put(%s, %x)", name(st), keyDesc(k), uk)
}

// collector collects the entries passed to a map callback: at most limit
// (all if limit <= 0). Callbacks never panic, so that a failing check does
// not unwind through the code under test.
type collector struct {
	what    string
	limit   int
	out     []kv
	stopped bool
	again   bool
}

func newCollector(what string, limit int) *collector {
	return &collector{what: what, limit: limit, out: []kv{}}
}

func (c *collector) fn(uk, v []byte) bool {
	if c.stopped {
		c.again = true
		return false
	}
	c.out = append(c.out, kv{string(uk), string(v)})
	c.stopped = c.limit > 0 && len(c.out) >= c.limit
	return !c.stopped
}

// result fails if the callback was called after it returned false, and
// returns the entries.
func (c *collector) result() []kv {
	if c.again {
		fail("%s called its callback after it returned false", c.what)
	}
	return c.out
}

// iterate returns the entries of k's map in the order Iterate yields them.
func iterate(st runtime.State, k runtime.Key, limit int) []kv {
	c := newCollector(fmt.Sprintf("%s.Iterate(%s)", name(st), keyDesc(k)), limit)
	must(st.(runtime.MapState).Iterate(k, c.fn), "%s", c.what)
	return c.result()
}

// iterateSorted returns the entries of k's map sorted by user key.
func iterateSorted(st runtime.State, k runtime.Key) []kv {
	out := iterate(st, k, 0)
	slices.SortFunc(out, func(a, b kv) int { return cmp.Compare(a.K, b.K) })
	return out
}

func rangeOf(st runtime.State, k runtime.Key, lo, hi []byte, reverse bool, limit int) []kv {
	c := newCollector(fmt.Sprintf("%s.Range(%s, lo=%s, hi=%s, reverse=%v)", name(st), keyDesc(k), boundDesc(lo), boundDesc(hi), reverse), limit)
	must(st.(runtime.SortedMapState).Range(k, lo, hi, reverse, c.fn), "%s", c.what)
	return c.result()
}

func boundDesc(b []byte) string {
	if b == nil {
		return "nil"
	}
	return fmt.Sprintf("%q", b)
}

// namespaces returns the namespaces of k's key, sorted.
func namespaces(st runtime.State, k runtime.Key) []string {
	out := []string{}
	err := st.Namespaces(k, func(ns []byte) bool {
		out = append(out, string(ns))
		return true
	})
	must(err, "%s.Namespaces(%s)", name(st), keyDesc(k))
	slices.Sort(out)
	return out
}

// listKeys returns the keys State.Keys reports for key group kg, in its
// order, stopping after limit keys (all if limit <= 0).
func listKeys(st runtime.State, kg, limit int) []string {
	out := []string{}
	err := st.Keys(kg, func(k []byte) bool {
		out = append(out, string(k))
		return limit <= 0 || len(out) < limit
	})
	must(err, "%s.Keys(%d)", name(st), kg)
	return out
}

// write adds one entry to k of any kind of state: a value, a list element
// or the map entry u=v.
func write(st runtime.State, k runtime.Key, v string) {
	switch st.Spec().Kind {
	case runtime.KindValue:
		putValue(st, k, []byte(v))
	case runtime.KindList:
		must(st.(runtime.ListState).Add(k, []byte(v)), "%s.Add(%s)", name(st), keyDesc(k))
	default:
		putMap(st, k, encString("u"), []byte(v))
	}
}

// readAll returns the content of k in any kind of state as strings: the
// value, the list elements, or "userkey=value" in user-key order.
func readAll(st runtime.State, k runtime.Key) []string {
	switch st.Spec().Kind {
	case runtime.KindValue:
		if v, ok := getValue(st, k); ok {
			return []string{v}
		}
		return []string{}
	case runtime.KindList:
		return getList(st, k, 0)
	default:
		out := []string{}
		for _, e := range iterateSorted(st, k) {
			out = append(out, fmt.Sprintf("%x=%s", e.K, e.V))
		}
		return out
	}
}

// expectEq fails if got differs from want.
func expectEq(what string, want, got any) {
	if d := diff(want, got); d != "" {
		fail("%s: differs (-want +got):\n%s", what, d)
	}
}

// sameGroupKeys returns n distinct string-encoded keys of one key group
// that lies in r.
func sameGroupKeys(maxP int, r runtime.KeyGroupRange, n int) [][]byte {
	byGroup := make(map[int][][]byte)
	for i := 0; ; i++ {
		k := encString(fmt.Sprintf("key-%d", i))
		g := runtime.KeyGroupOfHash(runtime.HashKey(k), maxP)
		if !r.Contains(g) {
			continue
		}
		byGroup[g] = append(byGroup[g], k)
		if len(byGroup[g]) == n {
			return byGroup[g]
		}
	}
}

// keyInGroups returns a uint32-encoded key whose key group is in r, or
// outside r if outside.
func keyInGroups(maxP int, r runtime.KeyGroupRange, outside bool) []byte {
	for i := uint32(1000); ; i++ {
		k := encUint32(i)
		g := runtime.KeyGroupOfHash(runtime.HashKey(k), maxP)
		if r.Contains(g) != outside {
			return k
		}
	}
}

// namedRecord is a record of a named state, for expected contents.
type namedRecord struct {
	state string
	Record
}

// expectContents builds the Contents that Dump returns for a view with the
// given states and records (given in list order where it matters).
func expectContents(maxP int, r runtime.KeyGroupRange, specs []runtime.StateSpec, recs ...namedRecord) Contents {
	c := Contents{MaxParallelism: maxP, KeyGroups: r, States: make(map[string]StateContents)}
	for _, s := range specs {
		c.States[s.Name] = StateContents{Spec: s, Groups: make(map[int][]Record)}
	}
	for _, nr := range recs {
		sc, ok := c.States[nr.state]
		if !ok {
			panic("storetest: expectContents: unknown state " + nr.state)
		}
		g := runtime.KeyGroupOfHash(runtime.HashKey([]byte(nr.Key)), maxP)
		sc.Groups[g] = append(sc.Groups[g], nr.Record)
	}
	for _, sc := range c.States {
		for _, recs := range sc.Groups {
			slices.SortStableFunc(recs, func(a, b Record) int {
				return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.UserKey, b.UserKey))
			})
		}
	}
	return c
}

// Int64sCodec is a value codec of []int64 — a length, then zigzag varints —
// for the tests of states whose values are slices (runtime.TypedSlices),
// which no codec of the runtime's encodes.
type Int64sCodec struct{}

// AppendValue implements runtime.ValueCodec.
func (Int64sCodec) AppendValue(dst []byte, v []int64) []byte {
	dst = runtime.AppendUvarint(dst, uint64(len(v)))
	for _, x := range v {
		dst = runtime.AppendVarint(dst, x)
	}
	return dst
}

// DecodeValue implements runtime.ValueCodec; an empty slice decodes as nil.
func (Int64sCodec) DecodeValue(b []byte) ([]int64, []byte, error) {
	n, b, err := runtime.DecodeLen(b)
	if err != nil || n == 0 {
		return nil, b, err
	}
	v := make([]int64, n)
	for i := range v {
		if v[i], b, err = runtime.DecodeVarint(b); err != nil {
			return nil, nil, err
		}
	}
	return v, b, nil
}
