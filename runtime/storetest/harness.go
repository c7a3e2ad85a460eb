package storetest

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/stategen/stategen/runtime"
)

// The randomized checks drive a harness: one or more backend stores that
// together own every key group (each owning a range, like the instances of
// an operator), and one Model that owns them all. Every operation goes to
// the store that owns its key and to the model; every result is compared.

// universe is the small key space of the randomized checks: few enough keys,
// namespaces and user keys that operations collide and key groups are
// shared by many keys.
type universe struct {
	keys   [][]byte // 200 uint32-encoded keys
	nss    [][]byte // 4 string-encoded namespaces
	uks    [][]byte // 30 string-encoded user keys of varied lengths
	bounds [][]byte // range bounds: user keys and bytes between them
}

func newUniverse() *universe {
	u := &universe{}
	for i := uint32(0); i < 200; i++ {
		u.keys = append(u.keys, encUint32(i*2654435761))
	}
	for _, ns := range []string{"", "a", "a\x00", "b"} {
		u.nss = append(u.nss, encString(ns))
	}
	// Strings over {0x00, 'a', 0xff} by length: 1 + 3 + 9 + 17 of length 3.
	strs := []string{""}
	for i := 0; len(strs) < 30; i++ {
		for _, c := range []string{"\x00", "a", "\xff"} {
			strs = append(strs, strs[i]+c)
		}
	}
	for _, s := range strs[:30] {
		uk := encString(s)
		u.uks = append(u.uks, uk)
		u.bounds = append(u.bounds, uk, uk[:len(uk)-1], append(clone(uk), 0))
	}
	return u
}

// node is one backend store of the harness.
type node struct {
	cfg    runtime.StoreConfig // as given to the factory
	groups runtime.KeyGroupRange
	store  runtime.Store
	states map[string]runtime.State
}

// liveSnap is a snapshot held across operations, with the model's content
// when it was taken.
type liveSnap struct {
	node *node
	snap runtime.Snapshot
	want Contents
	at   int
}

type harness struct {
	e       *env
	name    string
	rng     *rand.Rand
	u       *universe
	maxP    int
	specs   []runtime.StateSpec
	nodes   []*node
	model   *Model
	mstates map[string]runtime.State
	owned   [][]byte // keys whose key group some node owns
	foreign [][]byte // keys whose key group no node owns
	ops     int
	recent  []string
	live    []*liveSnap
	scratch [][]byte
	next    int // op count of the next full comparison

	liveSnaps bool // take live snapshots now and then
	restores  bool // restore nodes into fresh stores now and then

	stats stats
}

// stats counts what a harness did, for the log: a check that did not do
// what it claims to is a check that cannot fail.
type stats struct {
	reads, writes, probes, registers, bigValues int
	compares, liveSnapshots, restores, rescales int
	overlapped                                  int // steps taken while a background read ran
}

// randomSpecs are the states of the randomized checks: every kind, keyed and
// sub-keyed.
func randomSpecs() []runtime.StateSpec {
	var specs []runtime.StateSpec
	for _, k := range kinds {
		for _, sub := range keyedAndSubKeyed {
			specs = append(specs, specFor("rnd", k, sub))
		}
	}
	return specs
}

// newHarness makes one node per configuration (they must share the
// maxParallelism and own disjoint ranges) and registers every state.
func newHarness(e *env, name string, cfgs []runtime.StoreConfig) *harness {
	h := &harness{e: e, name: name, rng: e.rng(name), u: newUniverse(), specs: randomSpecs(), mstates: make(map[string]runtime.State)}
	for _, cfg := range cfgs {
		n := h.newNode(cfg)
		if h.maxP == 0 {
			h.maxP = n.store.Config().MaxParallelism
		}
		h.bind(n)
		h.nodes = append(h.nodes, n)
	}
	m, err := NewModel(runtime.StoreConfig{MaxParallelism: h.maxP})
	if err != nil {
		panic(err)
	}
	h.model = m
	for _, spec := range h.specs {
		st, err := m.Register(spec)
		if err != nil {
			panic(err)
		}
		h.mstates[spec.Name] = st
	}
	h.route()
	h.next = 100 + h.rng.IntN(200)
	return h
}

func (h *harness) newNode(cfg runtime.StoreConfig) *node {
	s := h.e.newStore(cfg)
	return &node{cfg: cfg, groups: s.Config().KeyGroups, store: s, states: make(map[string]runtime.State)}
}

// bind registers every state of the harness in n.
func (h *harness) bind(n *node) {
	for _, spec := range h.specs {
		n.states[spec.Name] = register(n.store, spec)
	}
}

// route sorts the keys of the universe into owned and foreign.
func (h *harness) route() {
	h.owned, h.foreign = nil, nil
	for _, k := range h.u.keys {
		if h.owner(h.group(k)) >= 0 {
			h.owned = append(h.owned, k)
		} else {
			h.foreign = append(h.foreign, k)
		}
	}
	if len(h.owned) == 0 {
		panic("storetest: no key of the universe is owned")
	}
}

func (h *harness) group(k []byte) int { return runtime.KeyGroupOfHash(runtime.HashKey(k), h.maxP) }

// owner returns the index of the node that owns key group g, or -1.
func (h *harness) owner(g int) int {
	for i, n := range h.nodes {
		if n.groups.Contains(g) {
			return i
		}
	}
	return -1
}

// note records an operation for the failure context.
func (h *harness) note(format string, args ...any) {
	const keep = 25
	if len(h.recent) == keep {
		copy(h.recent, h.recent[1:])
		h.recent = h.recent[:keep-1]
	}
	h.recent = append(h.recent, fmt.Sprintf("#%d ", h.ops)+fmt.Sprintf(format, args...))
}

// addContext, deferred by every check that drives a harness, adds the seed
// and the last operations to a failure.
func (h *harness) addContext() {
	r := recover()
	if r == nil {
		return
	}
	ctx := fmt.Sprintf("%s: seed %d (replay with STATEGEN_SEED=%d), %d operations; the last ones:\n\t%s",
		h.name, h.e.o.seed, h.e.o.seed, h.ops, strings.Join(h.recent, "\n\t"))
	if f, ok := r.(failure); ok {
		panic(failure{fmt.Errorf("%w\n%s", f.err, ctx)})
	}
	panic(failure{fmt.Errorf("panic: %v\n%s\n%s", r, debug.Stack(), ctx)})
}

// run performs n random steps.
func (h *harness) run(n int) {
	for range n {
		h.step()
	}
}

// step performs one random step: mostly a state operation, sometimes a
// registration, a live snapshot or a restore, and every 100 to 300 steps a
// full comparison of every node with the model.
func (h *harness) step() {
	h.ops++
	if h.ops >= h.next {
		h.compareAll("periodic")
		h.next = h.ops + 100 + h.rng.IntN(200)
	}
	switch r := h.rng.IntN(1000); {
	case r < 10 && h.liveSnaps:
		h.liveStep()
	case r < 12 && h.restores:
		h.restoreNode(h.rng.IntN(len(h.nodes)))
	case r < 17:
		h.reregister()
	default:
		h.stateOp()
	}
}

// key returns an owned key: two times in three one of a few hot keys, so
// that maps and lists grow long enough for order and iteration to matter;
// otherwise any owned key, so that many key groups and keys sharing key
// groups are exercised.
func (h *harness) key() []byte {
	if h.rng.IntN(3) > 0 {
		return pick(h.rng, h.owned[:min(len(h.owned), 12)])
	}
	return pick(h.rng, h.owned)
}

func pick[T any](rng *rand.Rand, s []T) T { return s[rng.IntN(len(s))] }

// value returns a random value: mostly short, sometimes empty (nil or not),
// rarely 64 KiB.
func (h *harness) value() []byte {
	switch r := h.rng.IntN(1000); {
	case r < 4:
		h.stats.bigValues++
		b := make([]byte, 64<<10)
		for i := 0; i < len(b); i += 8 {
			x := h.rng.Uint64()
			for j := 0; j < 8; j++ {
				b[i+j] = byte(x >> (8 * j))
			}
		}
		return b
	case r < 50:
		return nil
	case r < 100:
		return []byte{}
	default:
		b := make([]byte, 1+h.rng.IntN(12))
		for i := range b {
			b[i] = byte(h.rng.IntN(256))
		}
		return b
	}
}

func (h *harness) elems(allowEmpty bool) [][]byte {
	n := 1 + h.rng.IntN(4)
	if allowEmpty && h.rng.IntN(4) == 0 {
		n = 0
	}
	var out [][]byte
	if n > 0 || h.rng.IntN(2) == 0 {
		out = [][]byte{}
	}
	for range n {
		out = append(out, h.value())
	}
	return out
}

// bound returns a random Range bound: nil, empty non-nil, or bytes.
func (h *harness) bound() []byte {
	switch r := h.rng.IntN(10); {
	case r < 2:
		return nil
	case r < 3:
		return []byte{}
	default:
		return pick(h.rng, h.u.bounds)
	}
}

// scr returns a copy of b (nil stays nil) that is overwritten after the
// backend call: a backend that kept it sees garbage.
func (h *harness) scr(b []byte) []byte {
	c := cloneOrNil(b)
	h.scratch = append(h.scratch, c)
	return c
}

func (h *harness) scribble() {
	for _, b := range h.scratch {
		for i := range b {
			b[i] = 0xee
		}
	}
	h.scratch = h.scratch[:0]
}

// inputs are the byte arguments of an operation besides its Key.
type inputs struct {
	uk, value, lo, hi []byte
	elems             [][]byte
}

func (h *harness) copyInputs(in inputs) inputs {
	out := inputs{uk: h.scr(in.uk), value: h.scr(in.value), lo: h.scr(in.lo), hi: h.scr(in.hi)}
	if in.elems != nil {
		out.elems = make([][]byte, len(in.elems))
		for i, e := range in.elems {
			out.elems[i] = h.scr(e)
		}
	}
	return out
}

// op is one state operation, run the same way on the backend and the model.
type op struct {
	name  string
	args  string
	write bool
	in    inputs
	do    func(st runtime.State, k runtime.Key, in inputs) (any, error)
	// compare compares the model's result with the backend's; nil means
	// equality.
	compare func(want, got any) string
}

type getResult struct {
	Found bool
	Value string
}

// unordered is the result of an iteration in unspecified order: what a
// stopped iteration saw, and what a complete one yields.
type unordered[T comparable] struct {
	Seen, All []T
}

func compareUnordered[T comparable](limit int, order func(a, b T) int) func(want, got any) string {
	return func(w, g any) string {
		want, got := w.(unordered[T]), g.(unordered[T])
		slices.SortFunc(want.All, order)
		slices.SortFunc(got.All, order)
		if d := diff(want.All, got.All); d != "" {
			return "complete iteration (sorted):\n" + d
		}
		n := len(want.All)
		if limit > 0 {
			n = min(n, limit)
		}
		if len(got.Seen) != n {
			return fmt.Sprintf("an iteration stopped after %d entries saw %d entries, want %d", limit, len(got.Seen), n)
		}
		seen := make(map[T]bool)
		for _, x := range got.Seen {
			if seen[x] || !slices.Contains(want.All, x) {
				return fmt.Sprintf("an iteration stopped after %d entries saw %v (repeated, or not in the content)", limit, x)
			}
			seen[x] = true
		}
		return ""
	}
}

func compareKV(a, b kv) int { return cmp.Or(cmp.Compare(a.K, b.K), cmp.Compare(a.V, b.V)) }

// limit returns 0 (iterate everything) mostly, else 1 to 3.
func (h *harness) limit() int {
	if h.rng.IntN(4) == 0 {
		return 1 + h.rng.IntN(3)
	}
	return 0
}

func short(b []byte) string {
	if b == nil {
		return "nil"
	}
	if len(b) > 16 {
		return fmt.Sprintf("%x…(%d bytes)", b[:16], len(b))
	}
	return fmt.Sprintf("%x", b)
}

// collectStrings calls iterate with a callback that collects at most limit
// byte strings (all if limit <= 0), and fails on a call after false.
func collectStrings(what string, limit int, iterate func(fn func([]byte) bool) error) ([]string, error) {
	out := []string{}
	stopped, again := false, false
	err := iterate(func(b []byte) bool {
		if stopped {
			again = true
			return false
		}
		out = append(out, string(b))
		stopped = limit > 0 && len(out) >= limit
		return !stopped
	})
	if again {
		fail("%s called its callback after it returned false", what)
	}
	return out, err
}

// commonOp returns a Clear, Namespaces or DeleteAll.
func (h *harness) commonOp(r int) op {
	switch {
	case r < 40:
		return op{name: "Clear", write: true, do: func(st runtime.State, k runtime.Key, _ inputs) (any, error) {
			return nil, st.Clear(k)
		}}
	case r < 75:
		limit := h.limit()
		return op{name: "Namespaces", args: fmt.Sprintf(" limit %d", limit), do: func(st runtime.State, k runtime.Key, _ inputs) (any, error) {
			var res unordered[string]
			var err error
			res.Seen, err = collectStrings("Namespaces", limit, func(fn func([]byte) bool) error { return st.Namespaces(k, fn) })
			if err != nil {
				return nil, err
			}
			res.All, err = collectStrings("Namespaces", 0, func(fn func([]byte) bool) error { return st.Namespaces(k, fn) })
			return res, err
		}, compare: compareUnordered(limit, cmp.Compare[string])}
	default:
		return op{name: "DeleteAll", write: true, do: func(st runtime.State, k runtime.Key, _ inputs) (any, error) {
			return nil, st.DeleteAll(k)
		}}
	}
}

func (h *harness) valueOp() op {
	switch r := h.rng.IntN(100); {
	case r < 35:
		return op{name: "Get", do: func(st runtime.State, k runtime.Key, _ inputs) (any, error) {
			v, found, err := st.(runtime.ValueState).Get(k)
			return getResult{found, string(v)}, err
		}}
	case r < 80:
		in := inputs{value: h.value()}
		return op{name: "Put", write: true, args: " " + short(in.value), in: in, do: func(st runtime.State, k runtime.Key, in inputs) (any, error) {
			return nil, st.(runtime.ValueState).Put(k, in.value)
		}}
	default:
		return h.commonOp(h.rng.IntN(100))
	}
}

func (h *harness) listOp() op {
	switch r := h.rng.IntN(100); {
	case r < 25:
		limit := h.limit()
		return op{name: "Get", args: fmt.Sprintf(" limit %d", limit), do: func(st runtime.State, k runtime.Key, _ inputs) (any, error) {
			return collectStrings("list Get", limit, func(fn func([]byte) bool) error { return st.(runtime.ListState).Get(k, fn) })
		}}
	case r < 45:
		in := inputs{value: h.value()}
		return op{name: "Add", write: true, args: " " + short(in.value), in: in, do: func(st runtime.State, k runtime.Key, in inputs) (any, error) {
			return nil, st.(runtime.ListState).Add(k, in.value)
		}}
	case r < 60:
		in := inputs{elems: h.elems(h.rng.IntN(5) == 0)}
		return op{name: "AddAll", write: true, args: fmt.Sprintf(" %d elements", len(in.elems)), in: in, do: func(st runtime.State, k runtime.Key, in inputs) (any, error) {
			return nil, st.(runtime.ListState).AddAll(k, in.elems)
		}}
	case r < 75:
		in := inputs{elems: h.elems(true)}
		return op{name: "Replace", write: true, args: fmt.Sprintf(" %d elements", len(in.elems)), in: in, do: func(st runtime.State, k runtime.Key, in inputs) (any, error) {
			return nil, st.(runtime.ListState).Replace(k, in.elems)
		}}
	default:
		return h.commonOp(h.rng.IntN(100))
	}
}

func (h *harness) mapOp(sorted bool) op {
	switch r := h.rng.IntN(100); {
	case r < 22:
		in := inputs{uk: pick(h.rng, h.u.uks)}
		return op{name: "Get", args: " " + short(in.uk), in: in, do: func(st runtime.State, k runtime.Key, in inputs) (any, error) {
			v, found, err := st.(runtime.MapState).Get(k, in.uk)
			return getResult{found, string(v)}, err
		}}
	case r < 50:
		in := inputs{uk: pick(h.rng, h.u.uks), value: h.value()}
		return op{name: "Put", write: true, args: " " + short(in.uk) + " " + short(in.value), in: in, do: func(st runtime.State, k runtime.Key, in inputs) (any, error) {
			return nil, st.(runtime.MapState).Put(k, in.uk, in.value)
		}}
	case r < 65:
		in := inputs{uk: pick(h.rng, h.u.uks)}
		return op{name: "Delete", write: true, args: " " + short(in.uk), in: in, do: func(st runtime.State, k runtime.Key, in inputs) (any, error) {
			return nil, st.(runtime.MapState).Delete(k, in.uk)
		}}
	case r < 75:
		limit := h.limit()
		o := op{name: "Iterate", args: fmt.Sprintf(" limit %d", limit)}
		if sorted {
			o.do = func(st runtime.State, k runtime.Key, _ inputs) (any, error) {
				c := newCollector("Iterate", limit)
				err := st.(runtime.MapState).Iterate(k, c.fn)
				return c.result(), err
			}
			return o
		}
		o.do = func(st runtime.State, k runtime.Key, _ inputs) (any, error) {
			var res unordered[kv]
			c := newCollector("Iterate", limit)
			if err := st.(runtime.MapState).Iterate(k, c.fn); err != nil {
				return nil, err
			}
			res.Seen = c.result()
			c = newCollector("Iterate", 0)
			err := st.(runtime.MapState).Iterate(k, c.fn)
			res.All = c.result()
			return res, err
		}
		o.compare = compareUnordered(limit, compareKV)
		return o
	case r < 90 && sorted:
		in := inputs{lo: h.bound(), hi: h.bound()}
		reverse := h.rng.IntN(2) == 0
		limit := h.limit()
		return op{name: "Range", args: fmt.Sprintf(" lo %s hi %s reverse %v limit %d", short(in.lo), short(in.hi), reverse, limit), in: in,
			do: func(st runtime.State, k runtime.Key, in inputs) (any, error) {
				c := newCollector("Range", limit)
				err := st.(runtime.SortedMapState).Range(k, in.lo, in.hi, reverse, c.fn)
				return c.result(), err
			}}
	default:
		return h.commonOp(h.rng.IntN(100))
	}
}

// stateOp performs one random operation on a random state and key, on the
// owning node and the model, and compares. About one operation in fifty is
// sent to a node that does not own the key, and must fail with
// ErrKeyGroupNotOwned.
func (h *harness) stateOp() {
	spec := pick(h.rng, h.specs)
	var k []byte
	target, probe := -1, false
	if h.rng.IntN(50) == 0 {
		switch {
		case len(h.nodes) > 1:
			k = pick(h.rng, h.owned)
			target = (h.owner(h.group(k)) + 1 + h.rng.IntN(len(h.nodes)-1)) % len(h.nodes)
			probe = true
		case len(h.foreign) > 0:
			k, target, probe = pick(h.rng, h.foreign), 0, true
		}
	}
	if !probe {
		k = h.key()
		target = h.owner(h.group(k))
	}
	var ns []byte
	if spec.SubKeyed {
		ns = pick(h.rng, h.u.nss)
	}
	var o op
	switch spec.Kind {
	case runtime.KindValue:
		o = h.valueOp()
	case runtime.KindList:
		o = h.listOp()
	case runtime.KindMap:
		o = h.mapOp(false)
	default:
		o = h.mapOp(true)
	}
	h.exec(o, spec, k, ns, target, probe)
}

// exec runs o on node target (with copies of the inputs that are overwritten
// afterwards) and, unless probe, on the model, and compares the results.
func (h *harness) exec(o op, spec runtime.StateSpec, key, ns []byte, target int, probe bool) {
	desc := fmt.Sprintf("%s.%s(key %x ns %x%s) on node %d", spec.Name, o.name, key, ns, o.args, target)
	if probe {
		desc += " (which does not own the key)"
	}
	h.note("%s", desc)
	n := h.nodes[target]
	bk := runtime.MakeKey(h.scr(key), h.scr(ns), h.maxP)
	got, err := o.do(n.states[spec.Name], bk, h.copyInputs(o.in))
	h.scribble()
	if probe {
		h.stats.probes++
		wantErr(err, runtime.ErrKeyGroupNotOwned, desc, spec.Name, fmt.Sprint(bk.Group()))
		return
	}
	if o.write {
		h.stats.writes++
	} else {
		h.stats.reads++
	}
	if err != nil {
		fail("%s: backend: %v", desc, err)
	}
	want, err := o.do(h.mstates[spec.Name], runtime.MakeKey(key, ns, h.maxP), o.in)
	if err != nil {
		panic(fmt.Sprintf("storetest: model: %s: %v", desc, err))
	}
	compare := o.compare
	if compare == nil {
		compare = diff
	}
	if d := compare(want, got); d != "" {
		fail("%s: result differs (-model +backend):\n%s", desc, d)
	}
}

// reregister registers a state again: with its spec (which must return a
// working handle, used from then on) or with a conflicting one (which must
// fail with ErrStateMismatch).
func (h *harness) reregister() {
	spec := pick(h.rng, h.specs)
	i := h.rng.IntN(len(h.nodes))
	n := h.nodes[i]
	if h.rng.IntN(4) == 0 {
		bad := spec
		switch h.rng.IntN(3) {
		case 0:
			bad.Kind = kinds[(int(spec.Kind)+h.rng.IntN(3))%4]
		case 1:
			bad.SubKeyed = !bad.SubKeyed
		default:
			bad.Fingerprint += "'"
		}
		h.note("Register(%v) on node %d", bad, i)
		_, err := n.store.Register(bad)
		wantErr(err, runtime.ErrStateMismatch, fmt.Sprintf("Register(%v) of a state registered as %v", bad, spec), spec.Name)
		return
	}
	h.note("Register(%v) on node %d", spec, i)
	h.stats.registers++
	n.states[spec.Name] = register(n.store, spec)
	st, err := h.model.Register(spec)
	if err != nil {
		panic(err)
	}
	h.mstates[spec.Name] = st
}

// modelContents returns the model's content now.
func (h *harness) modelContents() Contents {
	snap, err := h.model.Snapshot()
	if err != nil {
		panic(err)
	}
	defer snap.Release()
	c, err := Dump(snap)
	if err != nil {
		panic(err)
	}
	return c
}

// compareAll compares every node with the model through a snapshot.
func (h *harness) compareAll(why string) {
	h.note("compare every node with the model (%s)", why)
	h.stats.compares++
	mc := h.modelContents()
	for i := range h.nodes {
		h.compareNode(i, why, mc)
	}
}

func (h *harness) compareNode(i int, why string, mc Contents) {
	n := h.nodes[i]
	got := dumpStore(n.store)
	if d := diff(mc.Restrict(n.groups), got); d != "" {
		fail("%s: node %d (key groups %v) differs from the model (-model +backend):\n%s", why, i, n.groups, d)
	}
	if d := diff(h.model.States(), n.store.States()); d != "" {
		fail("%s: node %d: States() differs from the model's (-model +backend):\n%s", why, i, d)
	}
}

// finish ends a check: it reads and releases the live snapshots, compares
// every node with the model, and logs what the harness did.
func (h *harness) finish() {
	h.finishAllLive()
	h.compareAll("final")
	st := h.stats
	h.e.tb.Logf("%s: %d operations: %d reads, %d writes (%d values of 64 KiB), %d sent to a node that does not own the key, "+
		"%d registrations, %d full comparisons, %d live snapshots, %d restores, %d rescales, %d steps during a background read; %d entries at the end",
		h.name, h.ops, st.reads, st.writes, st.bigValues, st.probes, st.registers, st.compares, st.liveSnapshots,
		st.restores, st.rescales, st.overlapped, h.modelContents().Len())
}

// liveStep takes a snapshot to hold across later operations (up to three
// at once), or reads and releases one of those held.
func (h *harness) liveStep() {
	if len(h.live) < 3 && (len(h.live) == 0 || h.rng.IntN(2) == 0) {
		i := h.rng.IntN(len(h.nodes))
		n := h.nodes[i]
		h.note("Snapshot of node %d, held live", i)
		h.stats.liveSnapshots++
		snap, err := n.store.Snapshot()
		must(err, "Snapshot")
		h.live = append(h.live, &liveSnap{node: n, snap: snap, want: h.modelContents().Restrict(n.groups), at: h.ops})
		return
	}
	h.finishLive(h.rng.IntN(len(h.live)))
}

// finishLive reads live snapshot i through the codec, compares it with the
// model's content when it was taken, and releases it.
func (h *harness) finishLive(i int) {
	l := h.live[i]
	h.live = slices.Delete(h.live, i, i+1)
	h.note("read and release the snapshot taken at #%d", l.at)
	v := h.e.codec(l.snap)
	must(l.snap.Release(), "Release of the snapshot taken at #%d", l.at)
	wantErr(l.snap.Release(), runtime.ErrReleased, "a second Release")
	got, err := Dump(v)
	must(err, "dump of the snapshot taken at #%d, after the codec", l.at)
	releaseView(v)
	if d := diff(l.want, got); d != "" {
		fail("the snapshot taken at #%d, read at #%d, differs from the model's content when it was taken (-model +backend):\n%s", l.at, h.ops, d)
	}
}

func (h *harness) finishAllLive() {
	for len(h.live) > 0 {
		h.finishLive(len(h.live) - 1)
	}
}

// snapshotThroughCodec snapshots n, runs the snapshot through the codec and
// releases it.
func (h *harness) snapshotThroughCodec(n *node) runtime.View {
	snap, err := n.store.Snapshot()
	must(err, "Snapshot")
	v := h.e.codec(snap)
	must(snap.Release(), "Release")
	return v
}

// restoreNode replaces node i by a fresh store restored from its snapshot;
// the fresh store sometimes registers some states before the restore.
func (h *harness) restoreNode(i int) {
	old := h.nodes[i]
	for j := len(h.live) - 1; j >= 0; j-- {
		if h.live[j].node == old {
			h.finishLive(j)
		}
	}
	h.note("restore node %d into a fresh store", i)
	h.stats.restores++
	v := h.snapshotThroughCodec(old)
	n := h.newNode(old.cfg)
	for _, spec := range h.specs {
		if h.rng.IntN(3) == 0 {
			register(n.store, spec)
		}
	}
	must(n.store.Restore(v), "Restore of node %d's snapshot into a fresh store", i)
	releaseView(v)
	must(old.store.Close(), "Close")
	h.bind(n)
	h.nodes[i] = n
	h.compareNode(i, "after restore", h.modelContents())
}

// rescale replaces the nodes by q nodes owning the key-group ranges of q
// operators, each restored from the snapshots of every old node.
func (h *harness) rescale(q int) {
	h.finishAllLive()
	h.compareAll(fmt.Sprintf("before rescaling from %d to %d", len(h.nodes), q))
	var views []runtime.View
	for _, n := range h.nodes {
		views = append(views, h.snapshotThroughCodec(n))
		must(n.store.Close(), "Close")
	}
	h.note("rescale from %d to %d nodes", len(h.nodes), q)
	h.stats.rescales++
	nodes := make([]*node, q)
	for j := range nodes {
		r, err := runtime.KeyGroupRangeForOperator(h.maxP, q, j)
		if err != nil {
			panic(err)
		}
		n := h.newNode(runtime.StoreConfig{MaxParallelism: h.maxP, KeyGroups: r})
		for _, i := range h.rng.Perm(len(views)) {
			must(n.store.Restore(views[i]), "Restore of old node %d's snapshot (key groups %v) into new node %d (key groups %v)",
				i, views[i].KeyGroups(), j, r)
		}
		h.bind(n)
		nodes[j] = n
	}
	for _, v := range views {
		releaseView(v)
	}
	h.nodes = nodes
	h.route()
	h.compareAll(fmt.Sprintf("after rescaling to %d", q))
	for j, n := range h.nodes {
		snap, err := n.store.Snapshot()
		must(err, "Snapshot")
		for _, g := range []int{n.groups.Start - 1, n.groups.End} {
			if g < 0 || g >= h.maxP {
				continue
			}
			for _, spec := range h.specs {
				if err := snap.Scan(spec.Name, g, func(runtime.Entry) error { return nil }); err == nil {
					fail("new node %d owns %v, but Scan of key group %d of its snapshot succeeded", j, n.groups, g)
				}
			}
		}
		must(snap.Release(), "Release")
	}
}
