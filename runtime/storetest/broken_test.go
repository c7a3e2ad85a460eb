package storetest

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stategen/stategen/runtime"
)

// These tests prove that the suite is not vacuous: each wraps the model in a
// store with one deliberate flaw and checks that the checks meant to catch
// it report a failure (without failing the test itself).

type flaw int

const (
	dropEvery50thPut flaw = iota + 1
	sortedDescending
	emptyReplaceKeepsList
	aliasesValues
	staleSnapshot
	secondReleaseSucceeds
	deleteAllOneNamespace
	restoreDropsLists
	namespacesRepeats
	scansInterfere
	restoreDedupsStates
	listCallbackUnguarded
	trustsKeys
	namespacesByLength
	editAppliesAfterError
	updateIgnoresError
	mapUpdateIgnoresError
	freesDuringScan
	keysPerNamespace
	snapshotKeepsExpired
	registerDropsTTL
	keepsOperatorLists
	restoreNotCounted
	restoreKeepsReads
	checkWriteAccepts
	registerDropsMigrations
)

// flawed is a Model with one flaw.
type flawed struct {
	*Model
	flaw    flaw
	puts    int
	prev    *MemView
	aliases map[string][]byte
	absent  map[string]bool // keys read as absent (restoreKeepsReads)
}

func newFlawed(f flaw) Factory {
	return func(tb testing.TB, cfg runtime.StoreConfig) runtime.Store {
		m, err := NewModel(cfg)
		if err != nil {
			tb.Fatal(err)
		}
		return &flawed{Model: m, flaw: f, aliases: make(map[string][]byte), absent: make(map[string]bool)}
	}
}

func (s *flawed) Register(spec runtime.StateSpec) (runtime.State, error) {
	switch s.flaw {
	case registerDropsTTL:
		spec.TTL = 0
	case registerDropsMigrations:
		spec.Migrations = nil
	}
	st, err := s.Model.Register(spec)
	if err != nil {
		return nil, err
	}
	switch st := st.(type) {
	case runtime.SortedMapState:
		return &flawedSorted{flawedMap{st, s}, st}, nil
	case runtime.MapState:
		return &flawedMap{st, s}, nil
	case runtime.ValueState:
		return &flawedValue{st, s}, nil
	case runtime.ListState:
		return &flawedList{st, s}, nil
	}
	panic("unknown state type")
}

// Restores is the model's count, or a count that never moves.
func (s *flawed) Restores() (uint64, bool) {
	if s.flaw == restoreNotCounted {
		return 0, true
	}
	return s.Model.Restores()
}

// dropPut reports whether this Put is one to drop.
func (s *flawed) dropPut() bool {
	if s.flaw != dropEvery50thPut {
		return false
	}
	s.puts++
	return s.puts%50 == 0
}

func (s *flawed) Close() error {
	err := s.Model.Close()
	if s.flaw != keepsOperatorLists {
		runtime.ReleaseOperatorStates(s)
	}
	return err
}

func (s *flawed) Snapshot() (runtime.Snapshot, error) {
	if s.flaw == snapshotKeepsExpired {
		// Filters by a clock that reads the epoch: nothing has expired.
		clock := s.Model.cfg.Clock
		s.Model.cfg.Clock = NewManualClock(time.UnixMilli(0))
		defer func() { s.Model.cfg.Clock = clock }()
	}
	snap, err := s.Model.Snapshot()
	if err != nil {
		return nil, err
	}
	switch s.flaw {
	case staleSnapshot:
		// Returns the content of the previous snapshot.
		if s.prev == nil {
			s.prev = snap.(*MemView)
		}
		out, err := CopyView(s.prev)
		s.prev = snap.(*MemView)
		return out, err
	case secondReleaseSucceeds:
		return lenientRelease{snap}, nil
	case scansInterfere:
		return &interferingScans{Snapshot: snap}, nil
	case freesDuringScan:
		return &freedDuringScan{Snapshot: snap, live: s.Model}, nil
	}
	return snap, nil
}

// interferingScans is a snapshot whose Scans spoil each other's values
// when they overlap: a backend that shares scan state between goroutines,
// without the data race that would stop the test binary under -race.
type interferingScans struct {
	runtime.Snapshot
	running atomic.Int32
}

func (s *interferingScans) Scan(state string, kg int, fn func(runtime.Entry) error) error {
	s.running.Add(1)
	defer s.running.Add(-1)
	return s.Snapshot.Scan(state, kg, func(e runtime.Entry) error {
		if s.running.Load() > 1 {
			e.Value = []byte("spoiled by another Scan")
		}
		return fn(e)
	})
}

// freedDuringScan is a snapshot freed by a Release that comes during a
// Scan: the rest of the Scan reads the live store's bytes, as a
// copy-on-write backend would that stopped protecting pages at Release.
type freedDuringScan struct {
	runtime.Snapshot
	live     *Model
	released atomic.Bool
}

func (s *freedDuringScan) Release() error {
	s.released.Store(true)
	return s.Snapshot.Release()
}

func (s *freedDuringScan) Scan(state string, kg int, fn func(runtime.Entry) error) error {
	return s.Snapshot.Scan(state, kg, func(e runtime.Entry) error {
		if s.released.Load() {
			cur, err := s.live.Snapshot()
			if err != nil {
				return err
			}
			_ = cur.Scan(state, kg, func(c runtime.Entry) error {
				if bytes.Equal(c.Key, e.Key) && bytes.Equal(c.Namespace, e.Namespace) && bytes.Equal(c.UserKey, e.UserKey) {
					e.Value = bytes.Clone(c.Value)
				}
				return nil
			})
			_ = cur.Release()
		}
		return fn(e)
	})
}

type lenientRelease struct{ runtime.Snapshot }

func (l lenientRelease) Release() error {
	_ = l.Snapshot.Release()
	return nil
}

func (s *flawed) Restore(src runtime.View) error {
	switch {
	case s.flaw == restoreDropsLists:
		return s.Model.Restore(noLists{src})
	case s.flaw == restoreDedupsStates && src != nil:
		// What cow once did: a View that lists a state twice restored.
		return s.Model.Restore(dedupStates{src})
	}
	return s.Model.Restore(src)
}

// dedupStates is a View whose States are sorted and repeated ones dropped.
type dedupStates struct{ runtime.View }

func (v dedupStates) States() []runtime.StateSpec {
	specs := slices.Clone(v.View.States())
	slices.SortFunc(specs, func(a, b runtime.StateSpec) int { return strings.Compare(a.Name, b.Name) })
	return slices.CompactFunc(specs, func(a, b runtime.StateSpec) bool { return a.Name == b.Name })
}

// noLists is a View whose lists are empty.
type noLists struct{ runtime.View }

func (v noLists) Scan(state string, kg int, fn func(runtime.Entry) error) error {
	for _, spec := range v.States() {
		if spec.Name == state && spec.Kind == runtime.KindList {
			return nil
		}
	}
	return v.View.Scan(state, kg, fn)
}

// checkWrite is the CheckWrite of every flawed state: the model's, or,
// with the flaw, one that accepts every write, as a backend would that
// forgot a check.
func (s *flawed) checkWrite(st runtime.State, k runtime.Key) error {
	if s.flaw == checkWriteAccepts {
		return nil
	}
	return st.(runtime.WriteChecker).CheckWrite(k)
}

// CheckWrite implements runtime.WriteChecker.
func (v *flawedValue) CheckWrite(k runtime.Key) error { return v.s.checkWrite(v.ValueState, k) }

// CheckWrite implements runtime.WriteChecker.
func (l *flawedList) CheckWrite(k runtime.Key) error { return l.s.checkWrite(l.ListState, k) }

// CheckWrite implements runtime.WriteChecker.
func (m *flawedMap) CheckWrite(k runtime.Key) error { return m.s.checkWrite(m.MapState, k) }

type flawedValue struct {
	runtime.ValueState
	s *flawed
}

func aliasID(k runtime.Key) string { return fmt.Sprintf("%x/%x", k.Bytes(), k.Namespace()) }

func (v *flawedValue) Put(k runtime.Key, value []byte) error {
	if v.s.dropPut() {
		return nil
	}
	if v.s.flaw == aliasesValues {
		v.s.aliases[v.Spec().Name+aliasID(k)] = value // keeps the caller's slice
	}
	delete(v.s.absent, v.Spec().Name+aliasID(k))
	return v.ValueState.Put(k, value)
}

func (v *flawedValue) Get(k runtime.Key) ([]byte, bool, error) {
	if v.s.flaw == trustsKeys {
		// What cow's fast path once did: a Key built for another
		// maxParallelism read as the store's own (its key group is wrong).
		k = runtime.MakeKey(k.Bytes(), k.Namespace(), v.s.Config().MaxParallelism)
	}
	if v.s.absent[v.Spec().Name+aliasID(k)] {
		return nil, false, nil
	}
	val, found, err := v.ValueState.Get(k)
	if v.s.flaw == restoreKeepsReads && err == nil && !found {
		// What a backend does that remembers its reads and writes but
		// not what a Restore loads (pebble's lastKey, had Restore not
		// forgotten it).
		v.s.absent[v.Spec().Name+aliasID(k)] = true
	}
	if a, ok := v.s.aliases[v.Spec().Name+aliasID(k)]; ok && found {
		return a, found, err
	}
	return val, found, err
}

func (v *flawedValue) Update(k runtime.Key, fn func(old []byte, found bool) ([]byte, error)) error {
	upd := v.ValueState.(runtime.ValueUpdater)
	if v.s.flaw == updateIgnoresError && fn != nil {
		return updateIgnoringError(fn, func(fn func([]byte, bool) ([]byte, error)) error { return upd.Update(k, fn) },
			func(nv []byte) error { return v.ValueState.Put(k, nv) })
	}
	return upd.Update(k, fn)
}

// updateIgnoringError is what a backend does that writes the result of an
// Update's fn before it looks at fn's error.
func updateIgnoringError(fn func([]byte, bool) ([]byte, error), update func(func([]byte, bool) ([]byte, error)) error, put func([]byte) error) error {
	var nv []byte
	err := update(func(old []byte, found bool) ([]byte, error) {
		var err error
		nv, err = fn(old, found)
		nv = bytes.Clone(nv)
		return nv, err
	})
	if err != nil {
		return errors.Join(err, put(nv))
	}
	return nil
}

func (v *flawedValue) DeleteAll(k runtime.Key) error {
	if v.s.flaw == deleteAllOneNamespace && v.Spec().SubKeyed {
		return v.ValueState.Clear(k)
	}
	return v.ValueState.DeleteAll(k)
}

func (v *flawedValue) Namespaces(k runtime.Key, fn func([]byte) bool) error {
	return flawedNamespaces(v.s, v.ValueState, k, fn)
}

func (v *flawedValue) Keys(kg int, fn func([]byte) bool) error {
	return flawedKeys(v.s, v.ValueState, kg, fn)
}

// flawedKeys reports a key once per namespace if the flaw says so: a
// backend that lists its (key, namespace) entries.
func flawedKeys(s *flawed, st runtime.State, kg int, fn func([]byte) bool) error {
	if s.flaw != keysPerNamespace {
		return st.Keys(kg, fn)
	}
	var keys [][]byte
	if err := st.Keys(kg, func(k []byte) bool { keys = append(keys, bytes.Clone(k)); return true }); err != nil {
		return err
	}
	for _, k := range keys {
		more := true
		if err := st.Namespaces(runtime.MakeKey(k, nil, s.Config().MaxParallelism), func([]byte) bool { more = fn(k); return more }); err != nil || !more {
			return err
		}
	}
	return nil
}

// flawedNamespaces reports the first namespace twice if the flaw says so.
func flawedNamespaces(s *flawed, st runtime.State, k runtime.Key, fn func([]byte) bool) error {
	if s.flaw == namespacesByLength {
		// What btree and pebble once did: namespaces ordered by length,
		// then bytewise, as length-prefixed fields sort.
		var nss [][]byte
		if err := st.Namespaces(k, func(ns []byte) bool { nss = append(nss, bytes.Clone(ns)); return true }); err != nil {
			return err
		}
		slices.SortFunc(nss, func(a, b []byte) int { return cmp.Or(len(a)-len(b), bytes.Compare(a, b)) })
		for _, ns := range nss {
			if !fn(ns) {
				break
			}
		}
		return nil
	}
	if s.flaw != namespacesRepeats {
		return st.Namespaces(k, fn)
	}
	first := true
	return st.Namespaces(k, func(ns []byte) bool {
		if first {
			first = false
			if !fn(ns) {
				return false
			}
		}
		return fn(ns)
	})
}

type flawedList struct {
	runtime.ListState
	s *flawed
}

// Get copies the list first and calls fn after the model's guard is off:
// writes from the callback then go through.
func (l *flawedList) Get(k runtime.Key, fn func([]byte) bool) error {
	if l.s.flaw != listCallbackUnguarded {
		return l.ListState.Get(k, fn)
	}
	var elems [][]byte
	if err := l.ListState.Get(k, func(e []byte) bool { elems = append(elems, slices.Clone(e)); return true }); err != nil {
		return err
	}
	for _, e := range elems {
		if !fn(e) {
			break
		}
	}
	return nil
}

func (l *flawedList) Replace(k runtime.Key, elems [][]byte) error {
	if l.s.flaw == emptyReplaceKeepsList && len(elems) == 0 {
		return nil
	}
	return l.ListState.Replace(k, elems)
}

func (l *flawedList) DeleteAll(k runtime.Key) error {
	if l.s.flaw == deleteAllOneNamespace && l.Spec().SubKeyed {
		return l.ListState.Clear(k)
	}
	return l.ListState.DeleteAll(k)
}

func (l *flawedList) Namespaces(k runtime.Key, fn func([]byte) bool) error {
	return flawedNamespaces(l.s, l.ListState, k, fn)
}

func (l *flawedList) Keys(kg int, fn func([]byte) bool) error {
	return flawedKeys(l.s, l.ListState, kg, fn)
}

type flawedMap struct {
	runtime.MapState
	s *flawed
}

func (m *flawedMap) Put(k runtime.Key, uk, v []byte) error {
	if m.s.dropPut() {
		return nil
	}
	return m.MapState.Put(k, uk, v)
}

func (m *flawedMap) Update(k runtime.Key, uk []byte, fn func(old []byte, found bool) ([]byte, error)) error {
	upd := m.MapState.(runtime.MapUpdater)
	if m.s.flaw == mapUpdateIgnoresError && fn != nil {
		return updateIgnoringError(fn, func(fn func([]byte, bool) ([]byte, error)) error { return upd.Update(k, uk, fn) },
			func(nv []byte) error { return m.MapState.Put(k, uk, nv) })
	}
	return upd.Update(k, uk, fn)
}

func (m *flawedMap) DeleteAll(k runtime.Key) error {
	if m.s.flaw == deleteAllOneNamespace && m.Spec().SubKeyed {
		return m.MapState.Clear(k)
	}
	return m.MapState.DeleteAll(k)
}

func (m *flawedMap) Namespaces(k runtime.Key, fn func([]byte) bool) error {
	return flawedNamespaces(m.s, m.MapState, k, fn)
}

func (m *flawedMap) Keys(kg int, fn func([]byte) bool) error {
	return flawedKeys(m.s, m.MapState, kg, fn)
}

func (m *flawedMap) Edit(k runtime.Key, fn func(uk, v []byte) (runtime.MapEdit, error)) error {
	if m.s.flaw == editAppliesAfterError && fn != nil {
		// A backend that applies its edits as it goes cannot take them
		// back when the callback fails.
		var ferr error
		err := m.MapState.Edit(k, func(uk, v []byte) (runtime.MapEdit, error) {
			e, err := fn(uk, v)
			if err != nil && !errors.Is(err, runtime.StopEdit) {
				ferr = err
				return runtime.MapEdit{}, runtime.StopEdit
			}
			return e, err
		})
		return errors.Join(err, ferr)
	}
	return m.MapState.Edit(k, fn)
}

type flawedSorted struct {
	flawedMap
	sm runtime.SortedMapState
}

func (m *flawedSorted) Iterate(k runtime.Key, fn func(uk, v []byte) bool) error {
	if m.s.flaw == sortedDescending {
		return m.sm.Range(k, nil, nil, true, fn)
	}
	return m.sm.Iterate(k, fn)
}

func (m *flawedSorted) EditRange(k runtime.Key, lo, hi []byte, reverse bool, fn func(uk, v []byte) (runtime.MapEdit, error)) error {
	return m.sm.EditRange(k, lo, hi, reverse, fn)
}

func (m *flawedSorted) Range(k runtime.Key, lo, hi []byte, reverse bool, fn func(uk, v []byte) bool) error {
	if m.s.flaw == sortedDescending {
		reverse = !reverse
	}
	return m.sm.Range(k, lo, hi, reverse, fn)
}

// runCheck runs the suite's check group/name against factory and returns
// its failure. The seed is fixed (and STATEGEN_SEED ignored) and -short does
// not reduce the operation counts, so that whether a flaw is caught does not
// depend on luck or flags.
func runCheck(t *testing.T, factory Factory, path string, opts ...Option) error {
	t.Helper()
	o, err := resolveOptions(opts)
	if err != nil {
		t.Fatal(err)
	}
	o.seed = 1
	if testing.Short() {
		o.scale *= 5
	}
	for _, g := range suiteGroups() {
		for _, c := range g.checks {
			if g.name+"/"+c.name == path {
				return catch(func() { c.run(newEnv(t, factory, o)) })
			}
		}
	}
	t.Fatalf("no check %q", path)
	return nil
}

func TestSuiteDetectsFlaws(t *testing.T) {
	cases := []struct {
		name   string
		flaw   flaw
		checks []string // each must fail
	}{
		{"DropEvery50thPut", dropEvery50thPut, []string{"Random/MaxP128", "Random/MaxP8Partial", "Rescale/2to3", "Timers/Rescale1to3"}},
		{"SortedMapDescending", sortedDescending, []string{"Contract/SortedMap", "Contract/SortedMapRange", "Random/MaxP1", "Timers/Rescale3to2"}},
		{"EmptyReplaceKeepsList", emptyReplaceKeepsList, []string{"Contract/List", "Random/MaxP128"}},
		{"AliasesCallerValues", aliasesValues, []string{"Contract/CopiesInputs", "Random/MaxP128"}},
		{"StaleSnapshot", staleSnapshot, []string{"Contract/Snapshot", "Random/MaxP128", "SnapshotsWhileWriting/Overlap"}},
		{"SecondReleaseSucceeds", secondReleaseSucceeds, []string{"Contract/SnapshotRelease", "Random/MaxP128"}},
		{"DeleteAllOneNamespace", deleteAllOneNamespace, []string{"Contract/NamespacesAndDeleteAll", "Random/MaxP128"}},
		{"RestoreDropsLists", restoreDropsLists, []string{"Contract/Restore", "Restore/Fresh", "Rescale/1to4", "Rescale/4to1"}},
		{"NamespacesRepeats", namespacesRepeats, []string{"Contract/NamespacesAndDeleteAll", "Random/MaxP8Partial"}},
		{"ScansInterfere", scansInterfere, []string{"SnapshotsWhileWriting/ConcurrentScans"}},
		{"RestoreDedupsStates", restoreDedupsStates, []string{"Contract/RestoreBadViews"}},
		{"ListCallbackUnguarded", listCallbackUnguarded, []string{"Contract/WriteDuringIteration"}},
		{"TrustsKeys", trustsKeys, []string{"Contract/KeysNotMade"}},
		{"NamespacesByLength", namespacesByLength, []string{"Contract/Order"}},
		{"EditAppliesAfterError", editAppliesAfterError, []string{"Contract/Edit"}},
		{"UpdateIgnoresError", updateIgnoresError, []string{"Contract/Update"}},
		{"MapUpdateIgnoresError", mapUpdateIgnoresError, []string{"Contract/Update"}},
		{"FreesDuringScan", freesDuringScan, []string{"Contract/ReleaseDuringScan"}},
		{"KeysPerNamespace", keysPerNamespace, []string{"Contract/Keys"}},
		{"SnapshotKeepsExpired", snapshotKeepsExpired, []string{"TTL/Rescale1to3", "TTL/Rescale3to2"}},
		{"RegisterDropsTTL", registerDropsTTL, []string{"TTL/Register", "TTL/Rescale1to3"}},
		{"KeepsOperatorLists", keepsOperatorLists, []string{"Contract/CloseReleasesOperatorLists"}},
		{"RestoreNotCounted", restoreNotCounted, []string{"Contract/Restore"}},
		{"RestoreKeepsReads", restoreKeepsReads, []string{"Contract/Restore"}},
		{"CheckWriteAccepts", checkWriteAccepts, []string{"Contract/CheckWrite"}},
		{"RegisterDropsMigrations", registerDropsMigrations, []string{"Contract/Register"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, path := range c.checks {
				err := runCheck(t, newFlawed(c.flaw), path, Sorted())
				if err == nil {
					t.Errorf("check %s passed a store whose flaw it must catch", path)
					continue
				}
				t.Logf("%s failed as it should: %.300s", path, err)
			}
		})
	}
}

// TestSuitePassesUnflawedWrapper checks that the flaw wrappers themselves
// are transparent when no flaw is set: the failures above come from the
// flaws.
func TestSuitePassesUnflawedWrapper(t *testing.T) {
	for _, path := range []string{"Contract/SortedMapRange", "Contract/CopiesInputs", "Random/MaxP8Partial", "Rescale/3to2", "SnapshotsWhileWriting/ConcurrentScans", "TTL/Rescale3to2", "TTL/Register"} {
		if err := runCheck(t, newFlawed(0), path, WithScale(0.3)); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
}

func TestSuiteDetectsMissingOwnershipCheck(t *testing.T) {
	factory := func(tb testing.TB, cfg runtime.StoreConfig) runtime.Store {
		cfg, err := cfg.Normalize()
		if err != nil {
			tb.Fatal(err)
		}
		// A model owning every key group, reporting the configured range.
		m, err := NewModel(runtime.StoreConfig{MaxParallelism: cfg.MaxParallelism})
		if err != nil {
			tb.Fatal(err)
		}
		return configLiar{m, cfg}
	}
	for _, path := range []string{"Contract/KeyGroupNotOwned", "Random/MaxP8Partial"} {
		err := runCheck(t, factory, path)
		if err == nil {
			t.Errorf("%s passed a store that accepts keys it does not own", path)
			continue
		}
		if !strings.Contains(err.Error(), "ErrKeyGroupNotOwned") && !strings.Contains(err.Error(), runtime.ErrKeyGroupNotOwned.Error()) {
			t.Errorf("%s failed, but not for the missing ownership check: %v", path, err)
		}
	}
}

// configLiar owns every key group but reports cfg.
type configLiar struct {
	*Model
	cfg runtime.StoreConfig
}

func (c configLiar) Config() runtime.StoreConfig { return c.cfg }

// TestSnapshotCodecIsUsed checks that snapshots really go through the codec
// option: a codec that drops one entry must make the restore checks fail,
// and a faithful one (through bytes) must pass them.
func TestSnapshotCodecIsUsed(t *testing.T) {
	model := func(tb testing.TB, cfg runtime.StoreConfig) runtime.Store {
		m, err := NewModel(cfg)
		if err != nil {
			tb.Fatal(err)
		}
		return m
	}
	var calls atomic.Int64 // the codec runs on several goroutines at once
	faithful := func(tb testing.TB, v runtime.View) (runtime.View, error) {
		calls.Add(1)
		b, err := encodeView(v)
		if err != nil {
			return nil, err
		}
		return decodeView(b)
	}
	for _, path := range []string{"Contract/Restore", "Restore/Fresh", "Rescale/2to3", "SnapshotsWhileWriting/Overlap"} {
		if err := runCheck(t, model, path, WithSnapshotCodec(faithful), WithScale(0.3)); err != nil {
			t.Errorf("%s through a faithful codec: %v", path, err)
		}
	}
	if calls.Load() == 0 {
		t.Fatal("the snapshot codec was never called")
	}
	lossy := func(tb testing.TB, v runtime.View) (runtime.View, error) {
		mv, err := CopyView(v)
		if err != nil {
			return nil, err
		}
		for _, groups := range mv.data {
			for kg, entries := range groups {
				if len(entries) > 0 {
					groups[kg] = entries[:len(entries)-1]
					return mv, nil
				}
			}
		}
		return mv, nil
	}
	for _, path := range []string{"Contract/Restore", "Restore/Fresh", "Rescale/3to2", "SnapshotsWhileWriting/Overlap"} {
		if err := runCheck(t, model, path, WithSnapshotCodec(lossy)); err == nil {
			t.Errorf("%s passed through a codec that drops an entry", path)
		}
	}
	failing := func(tb testing.TB, v runtime.View) (runtime.View, error) {
		return nil, errors.New("disk full")
	}
	if err := runCheck(t, model, "SnapshotsWhileWriting/Overlap", WithSnapshotCodec(failing)); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("a failing codec: got %v, want the codec's error", err)
	}
}

// encodeView and decodeView are a tiny serialized form of a View (uvarint
// length-prefixed fields), standing in for the checkpoint format in
// TestSnapshotCodecIsUsed.
func encodeView(v runtime.View) ([]byte, error) {
	var b []byte
	num := func(n int) { b = binary.AppendUvarint(b, uint64(n)) }
	str := func(s []byte) { num(len(s)); b = append(b, s...) }
	num(v.MaxParallelism())
	num(v.KeyGroups().Start)
	num(v.KeyGroups().End)
	num(len(v.States()))
	for _, s := range v.States() {
		str([]byte(s.Name))
		num(int(s.Kind))
		num(map[bool]int{false: 0, true: 1}[s.SubKeyed])
		str([]byte(s.Fingerprint))
		for kg := range v.KeyGroups().All() {
			err := v.Scan(s.Name, kg, func(e runtime.Entry) error {
				num(1 + kg)
				str(e.Key)
				str(e.Namespace)
				str(e.UserKey)
				str(e.Value)
				return nil
			})
			if err != nil {
				return nil, err
			}
		}
		num(0)
	}
	return b, nil
}

func decodeView(b []byte) (*MemView, error) {
	var bad error
	num := func() int {
		n, k := binary.Uvarint(b)
		if k <= 0 {
			bad = errors.New("truncated")
			return 0
		}
		b = b[k:]
		return int(n)
	}
	str := func() []byte {
		n := num()
		if n > len(b) {
			bad = errors.New("truncated")
			return nil
		}
		s := bytes.Clone(b[:n])
		b = b[n:]
		return s
	}
	mv := &MemView{data: make(map[string]map[int][]runtime.Entry)}
	mv.maxP = num()
	mv.groups = runtime.KeyGroupRange{Start: num(), End: num()}
	for range num() {
		s := runtime.StateSpec{Name: string(str()), Kind: runtime.Kind(num()), SubKeyed: num() == 1, Fingerprint: string(str())}
		mv.specs = append(mv.specs, s)
		groups := make(map[int][]runtime.Entry)
		for bad == nil {
			kg := num() - 1
			if kg < 0 {
				break
			}
			groups[kg] = append(groups[kg], runtime.Entry{Key: str(), Namespace: str(), UserKey: str(), Value: str()})
		}
		mv.data[s.Name] = groups
	}
	if bad == nil && len(b) > 0 {
		bad = errors.New("trailing bytes")
	}
	return mv, bad
}
