package pebble_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
	"github.com/stategen/stategen/backends/pebble"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

// Write batching: under SyncNone writes wait in a pending batch, and every
// read sees them.

// TestConformancePending runs the conformance suite on stores that commit
// their pending batch only at its size bound, Snapshot, Restore and Close:
// every read of the suite between two snapshots goes through the pending
// writes (the point reads through the store's index of them, the others
// through Pebble's indexed batch).
func TestConformancePending(t *testing.T) {
	storetest.Run(t, func(tb testing.TB, cfg runtime.StoreConfig) runtime.Store {
		s, err := pebble.New(pebble.Options{StoreConfig: cfg, FS: vfs.NewMem()})
		if err != nil {
			tb.Fatal(err)
		}
		s.KeepPending()
		return s
	}, storetest.Sorted())
}

var (
	mapSpec    = runtime.StateSpec{Name: "m", Kind: runtime.KindSortedMap, SubKeyed: true, Fingerprint: "fp"}
	listSpec   = runtime.StateSpec{Name: "l", Kind: runtime.KindList, SubKeyed: true, Fingerprint: "fp"}
	keyedSpec  = runtime.StateSpec{Name: "k", Kind: runtime.KindMap, Fingerprint: "fp"}
	testGroups = runtime.KeyGroupRange{Start: 0, End: testMaxP}
)

func register[S runtime.State](t *testing.T, s *pebble.Store, spec runtime.StateSpec) S {
	t.Helper()
	st, err := s.Register(spec)
	if err != nil {
		t.Fatal(err)
	}
	return st.(S)
}

func nsKey(i int, ns string) runtime.Key { return key(i).WithNamespace([]byte(ns)) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// pendingStore returns an in-memory store that commits its pending batch
// only at its size bound, Snapshot, Restore and Close (KeepPending), with a
// value state, a sub-keyed sorted map state and a sub-keyed list state.
func pendingStore(t *testing.T) (*pebble.Store, runtime.ValueState, runtime.SortedMapState, runtime.ListState) {
	t.Helper()
	s := mustNew(t, pebble.Options{InMemory: true})
	s.KeepPending()
	return s, valueState(t, s), register[runtime.SortedMapState](t, s, mapSpec), register[runtime.ListState](t, s, listSpec)
}

// TestReadYourWrites checks every read path on writes still in the
// pending batch: overwrites, deletes, range deletions (Clear of a map,
// DeleteAll) and writes after them, list merge operands and replaced
// lists.
func TestReadYourWrites(t *testing.T) {
	s, vs, ms, ls := pendingStore(t)
	ks := register[runtime.MapState](t, s, keyedSpec)

	// Some of it committed, the rest pending on top.
	put(t, vs, 1, "old")
	put(t, vs, 2, "gone")
	must(t, ms.Put(nsKey(1, "a"), []byte("u1"), []byte("committed")))
	must(t, ms.Put(nsKey(1, "b"), []byte("u1"), []byte("cleared")))
	must(t, ls.Add(nsKey(1, "a"), []byte("e1")))
	must(t, ks.Put(key(7), []byte("x"), []byte("1")))
	snap, err := s.Snapshot() // commits
	must(t, err)
	must(t, snap.Release())
	if n := s.PendingWrites(); n != 0 {
		t.Fatalf("%d writes pending after Snapshot", n)
	}

	put(t, vs, 1, "new")
	must(t, vs.Clear(key(2)))
	put(t, vs, 3, "fresh")
	must(t, ms.Put(nsKey(1, "a"), []byte("u2"), []byte("pending")))
	must(t, ms.Put(nsKey(1, "a"), []byte("u0"), []byte("first")))
	must(t, ms.Clear(nsKey(1, "b")))
	must(t, ms.Put(nsKey(1, "b"), []byte("u9"), []byte("after clear")))
	must(t, ms.Put(nsKey(1, "c"), []byte("u1"), []byte("c")))
	must(t, ls.Add(nsKey(1, "a"), []byte("e2")))
	must(t, ls.Replace(nsKey(1, "b"), [][]byte{[]byte("r1"), []byte("r2")}))
	must(t, ls.Add(nsKey(1, "b"), []byte("r3")))
	must(t, ls.Replace(nsKey(1, "c"), [][]byte{[]byte("only")}))
	must(t, ks.Put(key(8), []byte("y"), []byte("2")))
	must(t, ks.DeleteAll(key(7)))
	if s.PendingWrites() == 0 {
		t.Fatal("no write is pending: the test reads nothing through the batch")
	}

	for i, want := range map[int]string{1: "new", 2: "", 3: "fresh", 4: ""} {
		if got, ok := get(t, vs, i); got != want || ok != (want != "") {
			t.Errorf("value %d: Get = (%q, %v), want %q", i, got, ok, want)
		}
	}
	mapGet := func(ns, uk, want string) {
		t.Helper()
		v, ok, err := ms.Get(nsKey(1, ns), []byte(uk))
		must(t, err)
		if string(v) != want || ok != (want != "") {
			t.Errorf("map (1, %s)[%s] = (%q, %v), want %q", ns, uk, v, ok, want)
		}
	}
	mapGet("a", "u1", "committed")
	mapGet("a", "u2", "pending")
	mapGet("b", "u1", "")
	mapGet("b", "u9", "after clear")
	entries := func(ns string, lo, hi []byte, reverse bool) string {
		t.Helper()
		var out []string
		must(t, ms.Range(nsKey(1, ns), lo, hi, reverse, func(uk, v []byte) bool {
			out = append(out, string(uk)+"="+string(v))
			return true
		}))
		return strings.Join(out, " ")
	}
	for _, c := range []struct {
		ns      string
		lo, hi  []byte
		reverse bool
		want    string
	}{
		{"a", nil, nil, false, "u0=first u1=committed u2=pending"},
		{"a", nil, nil, true, "u2=pending u1=committed u0=first"},
		{"a", []byte("u1"), []byte("u2"), false, "u1=committed"},
		{"b", nil, nil, false, "u9=after clear"},
	} {
		if got := entries(c.ns, c.lo, c.hi, c.reverse); got != c.want {
			t.Errorf("Range (1, %s) [%q, %q) reverse %v = %q, want %q", c.ns, c.lo, c.hi, c.reverse, got, c.want)
		}
	}
	var it []string
	must(t, ks.Iterate(key(8), func(uk, v []byte) bool { it = append(it, string(uk)+"="+string(v)); return true }))
	if got := strings.Join(it, " "); got != "y=2" {
		t.Errorf("Iterate of keyed map 8 = %q", got)
	}
	list := func(ns string) string {
		t.Helper()
		var out []string
		must(t, ls.Get(nsKey(1, ns), func(e []byte) bool { out = append(out, string(e)); return true }))
		return strings.Join(out, " ")
	}
	for ns, want := range map[string]string{"a": "e1 e2", "b": "r1 r2 r3", "c": "only", "d": ""} {
		if got := list(ns); got != want {
			t.Errorf("list (1, %s) = %q, want %q", ns, got, want)
		}
	}
	var nss []string
	must(t, ms.Namespaces(key(1), func(ns []byte) bool { nss = append(nss, string(ns)); return true }))
	if got := strings.Join(nss, " "); got != "a b c" {
		t.Errorf("Namespaces of map key 1 = %q, want %q", got, "a b c")
	}
	has := func(st runtime.State, i int) bool {
		t.Helper()
		found := false
		must(t, st.Namespaces(key(i), func([]byte) bool { found = true; return false }))
		return found
	}
	if has(ks, 7) || !has(ks, 8) {
		t.Errorf("keyed map: key 7 (deleted) has an entry %v, key 8 (pending) %v", has(ks, 7), has(ks, 8))
	}
	keysOf := func(st runtime.State) []string {
		var out []string
		for kg := range testGroups.All() {
			must(t, st.Keys(kg, func(k []byte) bool { out = append(out, fmt.Sprintf("%x", k)); return true }))
		}
		return out
	}
	if got := keysOf(vs); len(got) != 2 {
		t.Errorf("Keys of the value state: %v, want keys 1 and 3", got)
	}
	k8 := key(8)
	if got := keysOf(ks); len(got) != 1 || got[0] != fmt.Sprintf("%x", k8.Bytes()) {
		t.Errorf("Keys of the keyed map: %v, want key 8 only", got)
	}
	if s.PendingWrites() == 0 {
		t.Fatal("the pending batch was committed during the reads")
	}
	// A snapshot holds exactly the pending writes too.
	want := dump(t, s)
	if n := s.PendingWrites(); n != 0 {
		t.Fatalf("%d writes pending after Snapshot", n)
	}
	if d := diffContents(want, dump(t, s)); d != "" {
		t.Fatalf("a second snapshot differs:\n%s", d)
	}
}

// TestBatchIndexedOnDemand: writes go into a plain batch, which the first
// read through the batch (an iterator, a list with pending operands)
// copies into an indexed one; the writes after it go there, point reads
// find every pending write, made before the copy or after, and a commit
// makes the plain batch the pending one again.
func TestBatchIndexedOnDemand(t *testing.T) {
	s, vs, ms, ls := pendingStore(t)
	values := map[int]string{}
	write := func(i int, v string) {
		t.Helper()
		put(t, vs, i, v)
		values[i] = v
	}
	checkValues := func(when string) {
		t.Helper()
		for i, want := range values {
			if got, ok := get(t, vs, i); !ok || got != want {
				t.Fatalf("%s: value %d = (%q, %v), want %q", when, i, got, ok, want)
			}
		}
	}
	entries := func() string {
		t.Helper()
		var out []string
		must(t, ms.Range(nsKey(1, "a"), nil, nil, false, func(uk, v []byte) bool {
			out = append(out, string(uk)+"="+string(v))
			return true
		}))
		return strings.Join(out, " ")
	}
	list := func() string {
		t.Helper()
		var out []string
		must(t, ls.Get(nsKey(1, "a"), func(e []byte) bool { out = append(out, string(e)); return true }))
		return strings.Join(out, " ")
	}
	indexed := func(when string, want bool) {
		t.Helper()
		if got := s.PendingIndexed(); got != want {
			t.Fatalf("%s: pending batch indexed %v, want %v", when, got, want)
		}
	}

	for i := range 100 {
		write(i, fmt.Sprint("v", i))
	}
	must(t, ms.Put(nsKey(1, "a"), []byte("u1"), []byte("m1")))
	must(t, ls.Add(nsKey(1, "a"), []byte("e1")))
	checkValues("writes only")
	indexed("after writes and point reads", false)

	if got := entries(); got != "u1=m1" {
		t.Fatalf("Range through the pending batch = %q", got)
	}
	indexed("after an iteration", true)
	checkValues("after the copy")
	for i := 50; i < 150; i++ {
		write(i, fmt.Sprint("w", i))
	}
	must(t, ms.Put(nsKey(1, "a"), []byte("u2"), []byte("m2")))
	must(t, ls.Add(nsKey(1, "a"), []byte("e2")))
	checkValues("writes after the copy")
	if got := entries(); got != "u1=m1 u2=m2" {
		t.Fatalf("Range after the copy = %q", got)
	}
	if got := list(); got != "e1 e2" {
		t.Fatalf("list after the copy = %q", got)
	}

	snap, err := s.Snapshot() // commits
	must(t, err)
	must(t, snap.Release())
	if n := s.PendingWrites(); n != 0 {
		t.Fatalf("%d writes pending after Snapshot", n)
	}
	indexed("after the commit", false)
	checkValues("after the commit")

	// A list read with pending merge operands indexes the batch too.
	must(t, ls.Add(nsKey(1, "a"), []byte("e3")))
	write(7, "x")
	indexed("after a write following the commit", false)
	if got := list(); got != "e1 e2 e3" {
		t.Fatalf("list with a pending operand = %q", got)
	}
	indexed("after a list read with a pending operand", true)
	checkValues("after the second copy")
}

// TestConformanceCommitted runs the conformance suite on stores whose
// pending batch holds one small write: each write commits the one before
// it, so nearly every point read of the suite is one of a key the batch
// committed last, which the committed batch's index answers (or, for a
// list's merge operand, Pebble), and every entry larger than ~200 bytes
// is written outside the batch, which forgets the committed batch.
func TestConformanceCommitted(t *testing.T) {
	storetest.Run(t, func(tb testing.TB, cfg runtime.StoreConfig) runtime.Store {
		// Each write counts ~200 bytes of skiplist node beside its key
		// and value (see Options.BatchSize).
		s, err := pebble.New(pebble.Options{StoreConfig: cfg, FS: vfs.NewMem(), BatchSize: 420})
		if err != nil {
			tb.Fatal(err)
		}
		return s
	}, storetest.Sorted())
}

// TestReadCommitted: a point read of a key that the batch committed last
// wrote is answered by the committed batch — its Set, its Delete, a range
// deletion — until a later write of the key, pending or committed; a
// merge operand is folded by Pebble; and a write that reaches the
// database outside the pending batch (an entry larger than a batch,
// Restore's loads) makes the committed batch answer nothing.
func TestReadCommitted(t *testing.T) {
	pebble.SetMaxPointClear(t, 0) // a map's Clear is a range deletion
	const batchSize = 4 << 10
	s := mustNew(t, pebble.Options{InMemory: true, BatchSize: batchSize})
	vs := valueState(t, s)
	ms := register[runtime.SortedMapState](t, s, mapSpec)
	ls := register[runtime.ListState](t, s, listSpec)
	commit := func() {
		t.Helper()
		snap, err := s.Snapshot() // commits
		must(t, err)
		must(t, snap.Release())
	}
	// reads checks the values of keys 1 to 4, the map's entries of (1, a)
	// and the list of (1, a), and returns how many of those point reads
	// the committed batch answered.
	reads := func(when string, values map[int]string, entries map[string]string, list string) int64 {
		t.Helper()
		before := s.CommittedReads()
		for i := 1; i <= 4; i++ {
			want, wantOK := values[i]
			if got, ok := get(t, vs, i); got != want || ok != wantOK {
				t.Errorf("%s: value %d = (%.20q, %v) (%d bytes), want (%.20q, %v) (%d bytes)", when, i, got, ok, len(got), want, wantOK, len(want))
			}
		}
		for _, uk := range []string{"u1", "u2", "u3"} {
			want, wantOK := entries[uk]
			v, ok, err := ms.Get(nsKey(1, "a"), []byte(uk))
			must(t, err)
			if string(v) != want || ok != wantOK {
				t.Errorf("%s: map (1, a)[%s] = (%q, %v), want (%q, %v)", when, uk, v, ok, want, wantOK)
			}
		}
		var got []string
		must(t, ls.Get(nsKey(1, "a"), func(e []byte) bool { got = append(got, string(e)); return true }))
		if strings.Join(got, " ") != list {
			t.Errorf("%s: list (1, a) = %q, want %q", when, got, list)
		}
		return s.CommittedReads() - before
	}

	put(t, vs, 1, "one")
	put(t, vs, 2, "two")
	put(t, vs, 3, "three")
	must(t, vs.Clear(key(3)))
	must(t, ms.Put(nsKey(1, "a"), []byte("u1"), []byte("m1")))
	must(t, ms.Put(nsKey(1, "a"), []byte("u2"), []byte("m2")))
	must(t, ls.Add(nsKey(1, "a"), []byte("e1")))
	commit()
	must(t, ls.Add(nsKey(1, "a"), []byte("e2")))
	commit()
	values := map[int]string{1: "one", 2: "two"}
	entries := map[string]string{"u1": "m1", "u2": "m2"}
	// The last batch holds the list's second operand only: the one before
	// it answers for the values 1 and 2, 3's deletion and the entries u1
	// and u2; the list is folded by Pebble.
	if n := reads("after two commits", values, entries, "e1 e2"); n != 5 {
		t.Errorf("after two commits: the committed batches answered %d point reads, want 5 (values 1, 2, 3; entries u1, u2)", n)
	}

	put(t, vs, 1, "uno")
	must(t, vs.Clear(key(2)))
	put(t, vs, 4, "four")
	must(t, ms.Put(nsKey(1, "a"), []byte("u1"), []byte("stale")))
	must(t, ms.Clear(nsKey(1, "a"))) // a range deletion, after u1's Set
	must(t, ms.Put(nsKey(1, "a"), []byte("u3"), []byte("m3")))
	must(t, ls.Add(nsKey(1, "a"), []byte("e3")))
	commit()
	values = map[int]string{1: "uno", 4: "four"}
	entries = map[string]string{"u3": "m3"}
	// Keys 1, 2, 4 and u1 to u3 are the newest batch's (its range
	// deletion hides the first batch's u1 and u2), 3's deletion the first
	// batch's (the read of the list goes to Pebble).
	if n := reads("after the third commit", values, entries, "e1 e2 e3"); n != 7 {
		t.Errorf("after the third commit: the committed batches answered %d point reads, want 7 (values 1, 2, 3, 4; entries u1, u2, u3)", n)
	}

	// Pending writes come first.
	put(t, vs, 1, "eins")
	must(t, vs.Clear(key(4)))
	values = map[int]string{1: "eins"}
	reads("with pending writes", values, entries, "e1 e2 e3")

	// An entry larger than a batch is written on its own: the committed
	// batch, which holds key 1's "uno" no longer, forgets.
	commit()
	big := strings.Repeat("B", 2*batchSize)
	put(t, vs, 1, big)
	values[1] = big
	if n := reads("after an entry larger than a batch", values, entries, "e1 e2 e3"); n != 0 {
		t.Errorf("after an entry larger than a batch: the committed batch answered %d reads", n)
	}

	// Restore loads around the batches: a key the committed batch deleted
	// reads as restored.
	src := mustNew(t, pebble.Options{InMemory: true})
	put(t, valueState(t, src), 3, "restored")
	snap, err := src.Snapshot()
	must(t, err)
	defer snap.Release()
	dst := mustNew(t, pebble.Options{InMemory: true})
	dvs := valueState(t, dst)
	put(t, dvs, 3, "x")
	must(t, dvs.Clear(key(3)))
	must(t, dst.Restore(snap)) // commits: the committed batch deletes 3
	// Restore makes the state forget its last key: this read asks the
	// store.
	if v, ok := get(t, dvs, 3); !ok || v != "restored" {
		t.Fatalf("after Restore: value 3 = (%q, %v), want the restored value", v, ok)
	}
}

// TestKeptBatches: the store keeps the last four committed batches, and a
// point read takes a key's value from the newest that writes it; a key
// only the fifth-newest wrote is read from Pebble.
func TestKeptBatches(t *testing.T) {
	s := mustNew(t, pebble.Options{InMemory: true})
	vs := valueState(t, s)
	for i := 1; i <= 5; i++ {
		put(t, vs, i, fmt.Sprint("only ", i))
		put(t, vs, 0, fmt.Sprint("last ", i)) // every batch writes 0
		if i == 3 {
			must(t, vs.Clear(key(0))) // ... and this one deletes it after
		}
		snap, err := s.Snapshot() // commits
		must(t, err)
		must(t, snap.Release())
	}
	before := s.CommittedReads()
	for i := 1; i <= 5; i++ {
		if v, ok := get(t, vs, i); !ok || v != fmt.Sprint("only ", i) {
			t.Errorf("value %d = (%q, %v), want %q", i, v, ok, fmt.Sprint("only ", i))
		}
	}
	// (Read after the others: the state answers a read of the key it
	// wrote last itself.)
	if v, ok := get(t, vs, 0); !ok || v != "last 5" {
		t.Errorf("value 0 = (%q, %v), want the newest batch's", v, ok)
	}
	if n := s.CommittedReads() - before; n != 5 {
		t.Errorf("the committed batches answered %d reads, want 5 (0 and 2 to 5; 1 is the fifth batch's)", n)
	}
}

// TestReadRunCommits: a run of reads with no write commits the pending
// batch, so that reads go to the database alone; a write in between
// starts the run again. (The keys read are in the database: a read of a
// key the key filter knows absent asks no batch and counts for nothing.)
func TestReadRunCommits(t *testing.T) {
	s := mustNew(t, pebble.Options{InMemory: true})
	vs := valueState(t, s)
	for i := range 15 {
		put(t, vs, i, "old")
	}
	snap, err := s.Snapshot() // commits
	must(t, err)
	must(t, snap.Release())
	put(t, vs, 1, "a")
	for i := range 15 {
		get(t, vs, i)
	}
	put(t, vs, 2, "b")
	for i := range 15 {
		get(t, vs, i)
	}
	if s.PendingWrites() == 0 {
		t.Fatal("the batch was committed before a run of 16 reads")
	}
	get(t, vs, 1)
	if n := s.PendingWrites(); n != 0 {
		t.Fatalf("%d writes still pending after 16 reads in a row", n)
	}
	if v, _ := get(t, vs, 2); v != "b" {
		t.Fatalf("value 2 after the commit: %q", v)
	}
}

// TestBatchSizeBound: the pending batch never holds more than BatchSize
// (in bytes of memtable: a write's key and value and ~200 bytes of
// skiplist node), an entry larger than a batch is written on its own,
// and every write stays readable across the commits.
func TestBatchSizeBound(t *testing.T) {
	const batchSize = 16 << 10
	s := mustNew(t, pebble.Options{InMemory: true, BatchSize: batchSize})
	s.KeepPending()
	vs := valueState(t, s)
	value := bytes.Repeat([]byte("v"), 100)
	perWrite := 195 + 9 + 100 // node, key (2 + 1 + 4-byte key framed into 9... at least), value
	maxPending := batchSize/perWrite + 1
	commits, last := 0, 0
	for i := range 1000 {
		must(t, vs.Put(key(i), value))
		n := s.PendingWrites()
		if n > maxPending {
			t.Fatalf("after %d Puts, %d writes pending: more than the %d of BatchSize %d", i+1, n, maxPending, batchSize)
		}
		if n < last {
			commits++
		}
		last = n
	}
	if commits < 1000/maxPending-1 {
		t.Fatalf("%d commits for 1000 Puts of ~%d bytes of memtable into batches of %d", commits, perWrite, batchSize)
	}
	big := bytes.Repeat([]byte("B"), 2*batchSize)
	must(t, vs.Put(key(5000), big))
	if n := s.PendingWrites(); n != 0 {
		t.Fatalf("an entry larger than a batch left %d writes pending", n)
	}
	if v, ok := get(t, vs, 5000); !ok || v != string(big) {
		t.Fatalf("the large entry reads back as %d bytes, found %v", len(v), ok)
	}
	for i := range 1000 {
		if v, ok := get(t, vs, i); !ok || v != string(value) {
			t.Fatalf("value %d after the commits: (%q, %v)", i, v, ok)
		}
	}
}

// TestRangeDeletionsCommitEarly: a batch with many range deletions is
// committed, so that reads through it stay fast; Clear-then-read stays
// correct across those commits.
func TestRangeDeletionsCommitEarly(t *testing.T) {
	pebble.SetMaxPointClear(t, 0) // every Clear a range deletion
	s := mustNew(t, pebble.Options{InMemory: true})
	s.KeepPending()
	ms := register[runtime.SortedMapState](t, s, mapSpec)
	maxSeen := 0
	for i := range 200 {
		k := nsKey(i%10, "w")
		must(t, ms.Put(k, []byte{byte(i)}, []byte("v")))
		must(t, ms.Clear(k))
		must(t, ms.Put(k, []byte("last"), []byte(fmt.Sprint(i))))
		if _, ok, err := ms.Get(k, []byte{byte(i)}); err != nil || ok {
			t.Fatalf("round %d: a cleared entry reads (%v, %v)", i, ok, err)
		}
		maxSeen = max(maxSeen, s.PendingWrites())
	}
	if maxSeen > 3*33 {
		t.Fatalf("%d writes pending, with a range deletion every third: the batch is not committed at 32 range deletions", maxSeen)
	}
	for i := range 10 {
		var got []string
		must(t, ms.Iterate(nsKey(i, "w"), func(uk, v []byte) bool { got = append(got, string(uk)+"="+string(v)); return true }))
		if want := fmt.Sprintf("last=%d", 190+i); strings.Join(got, " ") != want {
			t.Fatalf("map %d = %v, want %s", i, got, want)
		}
	}
}

// TestSnapshotHoldsPendingWrites: a snapshot holds every write made before
// it, pending ones included, and none made after it.
func TestSnapshotHoldsPendingWrites(t *testing.T) {
	s := mustNew(t, pebble.Options{InMemory: true})
	vs := valueState(t, s)
	ls := register[runtime.ListState](t, s, listSpec)
	for i := range 100 {
		put(t, vs, i, fmt.Sprint("before ", i))
	}
	must(t, ls.Add(nsKey(1, "a"), []byte("e1")))
	if s.PendingWrites() == 0 {
		t.Fatal("nothing pending before the snapshot")
	}
	snap, err := s.Snapshot()
	must(t, err)
	defer snap.Release()
	for i := range 100 {
		if i%2 == 0 {
			must(t, vs.Clear(key(i)))
		} else {
			put(t, vs, i, "after")
		}
	}
	put(t, vs, 500, "after")
	must(t, ls.Add(nsKey(1, "a"), []byte("e2")))
	got, err := storetest.Dump(snap)
	must(t, err)
	n := 0
	for _, g := range got.States[valueSpec.Name].Groups {
		for _, e := range g {
			n++
			if !strings.HasPrefix(string(e.Value), "before ") {
				t.Fatalf("the snapshot holds %q, written after it", e.Value)
			}
		}
	}
	if n != 100 {
		t.Fatalf("the snapshot holds %d values, want the 100 written before it", n)
	}
	if d := cmp.Diff(1, countEntries(t, snap, listSpec.Name)); d != "" {
		t.Fatalf("list elements in the snapshot (-want +got):\n%s", d)
	}
}

// TestSnapshotDuringIteration: a Snapshot from inside an iteration
// callback commits the pending batch while an iterator reads it; the
// iteration goes on undisturbed and the snapshot holds the pending
// writes.
func TestSnapshotDuringIteration(t *testing.T) {
	s := mustNew(t, pebble.Options{InMemory: true})
	s.KeepPending()
	ms := register[runtime.SortedMapState](t, s, mapSpec)
	for i := range 50 {
		must(t, ms.Put(nsKey(1, "a"), []byte(fmt.Sprintf("%02d", i)), []byte("v")))
	}
	var snap runtime.Snapshot
	n := 0
	must(t, ms.Iterate(nsKey(1, "a"), func(uk, v []byte) bool {
		if n == 10 {
			var err error
			if snap, err = s.Snapshot(); err != nil {
				t.Fatal(err)
			}
		}
		if want := fmt.Sprintf("%02d", n); string(uk) != want || string(v) != "v" {
			t.Fatalf("entry %d of the iteration: %q=%q", n, uk, v)
		}
		n++
		return true
	}))
	defer snap.Release()
	if n != 50 {
		t.Fatalf("the iteration visited %d entries, want 50", n)
	}
	if got := countEntries(t, snap, mapSpec.Name); got != 50 {
		t.Fatalf("the snapshot holds %d entries, want 50", got)
	}
	must(t, ms.Put(nsKey(1, "a"), []byte("zz"), []byte("v")))
	if _, ok, err := ms.Get(nsKey(1, "a"), []byte("zz")); !ok || err != nil {
		t.Fatalf("a write after the iteration: (%v, %v)", ok, err)
	}
}

// TestClosePersistsPendingWrites: Close of a kept directory commits the
// pending batch (and flushes it): a store reopened there reads every
// write.
func TestClosePersistsPendingWrites(t *testing.T) {
	fs := vfs.NewMem()
	s, err := pebble.New(pebble.Options{FS: fs, Dir: "d"})
	must(t, err)
	vs := valueState(t, s)
	for i := range 300 {
		put(t, vs, i, fmt.Sprint(i))
	}
	must(t, vs.Clear(key(7)))
	if s.PendingWrites() == 0 {
		t.Fatal("nothing pending before Close")
	}
	must(t, s.Close())
	s = mustNew(t, pebble.Options{FS: fs, Dir: "d", Existing: pebble.ReuseExisting})
	vs = valueState(t, s)
	for i := range 300 {
		v, ok := get(t, vs, i)
		if want := fmt.Sprint(i); i != 7 && (!ok || v != want) || i == 7 && ok {
			t.Fatalf("value %d after reopening: (%q, %v)", i, v, ok)
		}
	}
}

// TestFailedCommit: a commit of the pending batch that fails fails the
// store: every later call returns an error naming the directory and the
// cause — no panic, no silent loss — and the directory is left unclean.
func TestFailedCommit(t *testing.T) {
	cause := errors.New("injected commit failure")
	fs := vfs.NewMem()
	s, err := pebble.New(pebble.Options{FS: fs, Dir: "d", BatchSize: 4 << 10})
	must(t, err)
	vs := valueState(t, s)
	ms := register[runtime.MapState](t, s, keyedSpec)
	put(t, vs, 0, "committed")
	snap, err := s.Snapshot()
	must(t, err)
	must(t, snap.Release())

	restore := pebble.SetCommitBatch(func(*pebbledb.Batch, *pebbledb.WriteOptions) error { return cause })
	defer restore()
	var werr error
	for i := 1; i < 1000 && werr == nil; i++ {
		werr = vs.Put(key(i), []byte("lost?"))
	}
	wantErr(t, "the Put that commits", werr, []error{pebble.ErrFailed, cause}, `"d"`, "acknowledged writes")
	restore()

	failed := []error{pebble.ErrFailed, cause}
	_, _, err = vs.Get(key(0))
	wantErr(t, "Get after a failed commit", err, failed, `"d"`)
	wantErr(t, "Put after a failed commit", vs.Put(key(1), []byte("x")), failed, `"d"`)
	wantErr(t, "map Put after a failed commit", ms.Put(key(1), []byte("u"), []byte("x")), failed, `"d"`)
	wantErr(t, "Iterate after a failed commit", ms.Iterate(key(1), func(_, _ []byte) bool { return true }), failed, `"d"`)
	wantErr(t, "Namespaces after a failed commit", vs.Namespaces(key(1), func([]byte) bool { return true }), failed, `"d"`)
	wantErr(t, "Keys after a failed commit", vs.Keys(0, func([]byte) bool { return true }), failed, `"d"`)
	_, err = s.Snapshot()
	wantErr(t, "Snapshot after a failed commit", err, failed, `"d"`)
	empty, err := pebble.New(pebble.Options{InMemory: true})
	must(t, err)
	esnap, err := empty.Snapshot()
	must(t, err)
	wantErr(t, "Restore after a failed commit", s.Restore(esnap), failed, `"d"`)
	must(t, esnap.Release())
	must(t, empty.Close())
	_, err = s.Register(runtime.StateSpec{Name: "new", Kind: runtime.KindValue, Fingerprint: "fp"})
	wantErr(t, "Register after a failed commit", err, failed, `"d"`)
	wantErr(t, "Close after a failed commit", s.Close(), failed, `"d"`)
	_, err = pebble.New(pebble.Options{FS: fs, Dir: "d", Existing: pebble.ReuseExisting})
	wantErr(t, "New on the directory of a store whose commit failed", err, []error{pebble.ErrUncleanDir}, `"d"`)
}

// TestWALWritesAreNotBatched: with a write-ahead log every write is
// committed on its own.
func TestWALWritesAreNotBatched(t *testing.T) {
	for _, sync := range []pebble.SyncPolicy{pebble.SyncWAL, pebble.SyncAlways} {
		s := mustNew(t, pebble.Options{InMemory: true, Sync: sync})
		vs := valueState(t, s)
		put(t, vs, 1, "x")
		if n := s.PendingWrites(); n != 0 {
			t.Fatalf("%v: %d writes pending", sync, n)
		}
	}
}

// TestCommitCombinesWrites drives random writes, most of them to a few
// keys, into a pebble store and the reference model alike, with commits
// (Snapshot) at random points: each commit leaves out the writes that a
// later Set or Delete of the same key supersedes (write combining), and
// what the store holds — read through a snapshot after each commit, and
// through the pending writes before it — is the model's. The writes
// cover every kind a batch holds: Sets, Deletes, merge operands (list
// Add) and range deletions (Clear of a map, DeleteAll), which are kept.
func TestCommitCombinesWrites(t *testing.T) {
	var committed, dropped int
	restore := pebble.SetCommitBatch(func(b *pebbledb.Batch, wo *pebbledb.WriteOptions) error {
		committed += int(b.Count())
		return b.Commit(wo)
	})
	defer restore()
	s, vs, ms, ls := pendingStore(t)
	pebble.SetMaxPointClear(t, 0) // every Clear of a map is a range deletion
	m, mv, mm, ml := modelStates(t)

	rng := rand.New(rand.NewPCG(7, 8))
	nss := []string{"a", "b"}
	writes := 0
	for round := range 40 {
		last := 0
		for range 20 + rng.IntN(200) {
			i := rng.IntN(3) // three keys take nearly every write
			if rng.IntN(10) == 0 {
				i = 3 + rng.IntN(50)
			}
			k := nsKey(i, nss[rng.IntN(2)])
			v := []byte(fmt.Sprint("v", rng.IntN(1000)))
			uk := []byte{byte('p' + rng.IntN(3))}
			var what string
			switch op := rng.IntN(40); {
			case op < 12:
				what = "value Put"
				must(t, mv.Put(key(i), v))
				must(t, vs.Put(key(i), v))
			case op < 16:
				what = "value Clear"
				must(t, mv.Clear(key(i)))
				must(t, vs.Clear(key(i)))
			case op < 26:
				what = "map Put"
				must(t, mm.Put(k, uk, v))
				must(t, ms.Put(k, uk, v))
			case op < 30:
				what = "map Delete"
				must(t, mm.Delete(k, uk))
				must(t, ms.Delete(k, uk))
			case op == 30:
				what = "map Clear"
				must(t, mm.Clear(k))
				must(t, ms.Clear(k))
			case op == 31:
				what = "map DeleteAll"
				must(t, mm.DeleteAll(k))
				must(t, ms.DeleteAll(k))
			case op < 38:
				what = "list Add"
				must(t, ml.Add(k, v))
				must(t, ls.Add(k, v))
			default:
				what = "list Replace"
				must(t, ml.Replace(k, [][]byte{v, v}))
				must(t, ls.Replace(k, [][]byte{v, v}))
			}
			if n := s.PendingWrites(); n < last {
				t.Fatalf("round %d: the pending batch was committed before the round's end (%d range deletions?)", round, last)
			}
			last = s.PendingWrites()
			if got, want := readAllOf(t, vs, ms, ls, i), readAllOf(t, mv, mm, ml, i); !cmp.Equal(got, want) {
				t.Fatalf("round %d, after a %s of key %d, read through the pending writes (-model +pebble):\n%s", round, what, i, cmp.Diff(want, got))
			}
		}
		before, n := committed, s.PendingWrites()
		writes += n
		got, want := dump(t, s), dump(t, m) // commits
		if d := diffContents(want, got); d != "" {
			t.Fatalf("round %d: after the commit of %d writes as %d (-model +pebble):\n%s", round, n, committed-before, d)
		}
		dropped += n - (committed - before)
	}
	if dropped == 0 || committed+dropped != writes {
		t.Fatalf("%d writes made, %d committed, %d left out: commits left none out, or lost count", writes, committed, dropped)
	}
	t.Logf("%d writes committed as %d", writes, committed)
}

// modelStates returns a new reference model and its value, map and list
// states of valueSpec, mapSpec and listSpec.
func modelStates(t *testing.T) (*storetest.Model, runtime.ValueState, runtime.SortedMapState, runtime.ListState) {
	t.Helper()
	m, err := storetest.NewModel(runtime.StoreConfig{KeyGroups: testGroups, MaxParallelism: testMaxP})
	must(t, err)
	return m, register2[runtime.ValueState](t, m, valueSpec), register2[runtime.SortedMapState](t, m, mapSpec), register2[runtime.ListState](t, m, listSpec)
}

// register2 registers spec with any store.
func register2[S runtime.State](t *testing.T, s runtime.Store, spec runtime.StateSpec) S {
	t.Helper()
	st, err := s.Register(spec)
	must(t, err)
	return st.(S)
}

// readAllOf reads, through the point reads and iterations of its states,
// what a value, a sorted map and a list state hold of key i in namespaces
// a and b.
func readAllOf(t *testing.T, vs runtime.ValueState, ms runtime.SortedMapState, ls runtime.ListState, i int) []string {
	t.Helper()
	v, ok, err := vs.Get(key(i))
	must(t, err)
	out := []string{fmt.Sprintf("value %q %v", v, ok)}
	for _, ns := range []string{"a", "b"} {
		must(t, ms.Iterate(nsKey(i, ns), func(uk, v []byte) bool {
			out = append(out, fmt.Sprintf("map %s %s=%s", ns, uk, v))
			return true
		}))
		for _, uk := range []string{"p", "q", "r"} {
			v, ok, err := ms.Get(nsKey(i, ns), []byte(uk))
			must(t, err)
			out = append(out, fmt.Sprintf("map %s Get %s=%q %v", ns, uk, v, ok))
		}
		must(t, ls.Get(nsKey(i, ns), func(e []byte) bool {
			out = append(out, fmt.Sprintf("list %s %s", ns, e))
			return true
		}))
	}
	return out
}

// TestIterationCommitsLargeBatch: an iteration over a pending batch of
// fewer than 128 writes indexes it (the writes after it go into the
// indexed batch); over 128 or more, indexed already or not, it commits the
// batch and reads the database, and the writes after it go into a plain
// batch again. Either way the iteration sees every write.
func TestIterationCommitsLargeBatch(t *testing.T) {
	s := mustNew(t, pebble.Options{InMemory: true})
	ms := register[runtime.SortedMapState](t, s, mapSpec)
	commit := func() {
		t.Helper()
		snap, err := s.Snapshot()
		must(t, err)
		must(t, snap.Release())
	}
	commit() // the registration's write
	k := nsKey(1, "a")
	entries := func() int {
		t.Helper()
		n := 0
		must(t, ms.Range(k, nil, nil, false, func(uk, v []byte) bool { n++; return true }))
		return n
	}
	puts := 0
	put := func(n int) {
		t.Helper()
		for range n {
			must(t, ms.Put(k, fmt.Appendf(nil, "u%04d", puts), []byte("v")))
			puts++
		}
	}
	put(127)
	if got := entries(); got != 127 {
		t.Fatalf("iteration over 127 pending writes saw %d entries", got)
	}
	if n, ix := s.PendingWrites(), s.PendingIndexed(); n != 127 || !ix {
		t.Fatalf("after an iteration over 127 pending writes: %d pending, indexed %v; want 127, indexed", n, ix)
	}
	put(1) // into the indexed batch: 128 pending
	if got := entries(); got != 128 {
		t.Fatalf("iteration over 128 pending writes, indexed, saw %d entries, want 128", got)
	}
	if n, ix := s.PendingWrites(), s.PendingIndexed(); n != 0 || ix {
		t.Fatalf("after an iteration over 128 indexed pending writes: %d pending, indexed %v; want 0, plain", n, ix)
	}
	put(128)
	if got := entries(); got != 256 {
		t.Fatalf("iteration over 128 pending writes saw %d entries, want 256", got)
	}
	if n, ix := s.PendingWrites(), s.PendingIndexed(); n != 0 || ix {
		t.Fatalf("after an iteration over 128 pending writes: %d pending, indexed %v; want 0, plain", n, ix)
	}
	put(1)
	if n, ix := s.PendingWrites(), s.PendingIndexed(); n != 1 || ix {
		t.Fatalf("a write after the commit: %d pending, indexed %v; want 1, plain", n, ix)
	}
	if got := entries(); got != 257 {
		t.Fatalf("iteration after the commit saw %d entries, want 257", got)
	}
}
