package storetest

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/stategen/stategen/runtime"
)

// The contract checks: deterministic examples of each rule of runtime.Store,
// written out so that a failure names the rule.

func contractChecks() []check {
	return []check{
		{"Config", checkConfig},
		{"Register", checkRegister},
		{"RegisterInvalid", checkRegisterInvalid},
		{"Value", checkValue},
		{"List", checkList},
		{"Map", checkMap},
		{"SortedMap", checkSortedMap},
		{"SortedMapRange", checkSortedMapRange},
		{"NamespacesAndDeleteAll", checkNamespacesAndDeleteAll},
		{"Keys", checkKeys},
		{"EarlyStop", checkEarlyStop},
		{"EmptyEncodings", checkEmptyEncodings},
		{"CopiesInputs", checkCopiesInputs},
		{"KeyGroupNotOwned", checkKeyGroupNotOwned},
		{"KeysNotMade", checkKeysNotMade},
		{"Order", checkOrder},
		{"Edit", checkEdit},
		{"Update", checkUpdate},
		{"NamespaceOnKeyedState", checkNamespaceOnKeyedState},
		{"Closed", checkClosed},
		{"CloseReleasesOperatorLists", checkCloseReleasesOperatorLists},
		{"Snapshot", checkSnapshot},
		{"SnapshotRelease", checkSnapshotRelease},
		{"ReleaseDuringScan", checkReleaseDuringScan},
		{"Restore", checkRestore},
		{"RestoreErrors", checkRestoreErrors},
		{"RestoreBadViews", checkRestoreBadViews},
		{"WriteDuringIteration", checkWriteDuringIteration},
		{"CheckWrite", checkCheckWrite},
	}
}

const mp = runtime.DefaultMaxParallelism

// key returns the Key of an encoded key and namespace with maxParallelism mp.
func key(k, ns []byte) runtime.Key { return runtime.MakeKey(k, ns, mp) }

// u32 returns the Key of the uint32-encoded key i and the encoded namespace
// ns (nil for keyed states).
func u32(i uint32, ns []byte) runtime.Key { return key(encUint32(i), ns) }

// kinds lists the four kinds.
var kinds = []runtime.Kind{runtime.KindValue, runtime.KindList, runtime.KindMap, runtime.KindSortedMap}

// specFor returns the spec of a test state of kind k.
func specFor(prefix string, k runtime.Kind, subKeyed bool) runtime.StateSpec {
	n := prefix + "." + k.String()
	if subKeyed {
		n += ".sub"
	}
	return runtime.StateSpec{Name: n, Kind: k, SubKeyed: subKeyed, Fingerprint: "fp:" + k.String()}
}

// twoNamespaces returns two distinct namespaces for a sub-keyed state, and
// nil twice for a keyed one.
func twoNamespaces(subKeyed bool) ([]byte, []byte) {
	if !subKeyed {
		return nil, nil
	}
	return encString("w1"), encString("w2")
}

var keyedAndSubKeyed = []bool{false, true}

func checkConfig(e *env) {
	for _, cfg := range []runtime.StoreConfig{
		{},
		{MaxParallelism: 1},
		{MaxParallelism: 64, KeyGroups: runtime.KeyGroupRange{Start: 8, End: 40}},
		{MaxParallelism: runtime.UpperBoundMaxParallelism, KeyGroups: runtime.KeyGroupRange{Start: 32767, End: 32768}},
	} {
		s := e.newStore(cfg) // checks Config()
		if got := s.States(); len(got) != 0 {
			fail("a new store made with %+v has states %v", cfg, got)
		}
		must(s.Close(), "Close")
	}
}

func checkRegister(e *env) {
	s := e.newStore(runtime.StoreConfig{})
	// States sorted by name, whatever the order of registration.
	var specs []runtime.StateSpec
	for _, n := range []string{"reg.c", "reg.a", "reg.b"} {
		spec := runtime.StateSpec{Name: n, Kind: runtime.KindValue, Fingerprint: "v1"}
		register(s, spec)
		specs = append(specs, spec)
	}
	expectEq("States()", []runtime.StateSpec{specs[1], specs[2], specs[0]}, s.States())

	// Every kind, keyed and sub-keyed, implements its interface (register checks it).
	for _, k := range kinds {
		for _, sub := range keyedAndSubKeyed {
			register(s, specFor("reg", k, sub))
		}
	}

	// Registering again with the same spec returns the same state.
	spec := runtime.StateSpec{Name: "reg.same", Kind: runtime.KindMap, SubKeyed: true, Fingerprint: "fp"}
	st1 := register(s, spec)
	k := u32(1, encString("ns"))
	putMap(st1, k, encString("u"), []byte("v"))
	st2 := register(s, spec)
	if v, ok := getMap(st2, k, encString("u")); !ok || v != "v" {
		fail("a state registered twice: the second handle reads (%q, %v), want (\"v\", true)", v, ok)
	}

	// Another kind, sub-keying or fingerprint under the same name: mismatch.
	const mismatch = "reg.mismatch-name"
	orig := runtime.StateSpec{Name: mismatch, Kind: runtime.KindValue, SubKeyed: false, Fingerprint: "v1"}
	st := register(s, orig)
	putValue(st, u32(7, nil), []byte("kept"))
	for _, other := range []runtime.StateSpec{
		{Name: mismatch, Kind: runtime.KindList, SubKeyed: false, Fingerprint: "v1"},
		{Name: mismatch, Kind: runtime.KindSortedMap, SubKeyed: false, Fingerprint: "v1"},
		{Name: mismatch, Kind: runtime.KindValue, SubKeyed: true, Fingerprint: "v1"},
		{Name: mismatch, Kind: runtime.KindValue, SubKeyed: false, Fingerprint: "v2"},
		{Name: mismatch, Kind: runtime.KindValue, SubKeyed: false, Fingerprint: ""},
	} {
		_, err := s.Register(other)
		wantErr(err, runtime.ErrStateMismatch, fmt.Sprintf("Register(%v) after Register(%v)", other, orig), mismatch)
	}
	st = register(s, orig)
	if v, ok := getValue(st, u32(7, nil)); !ok || v != "kept" {
		fail("after failed mismatching registrations, state %q reads (%q, %v), want (\"kept\", true)", mismatch, v, ok)
	}
	for _, spec := range s.States() {
		if spec.Name == mismatch && !spec.Equal(orig) {
			fail("States() reports %v after failed registrations, want %v", spec, orig)
		}
	}

	// A state's migration functions are part of the spec the store
	// registered: a restore finds them in States() (register checks Spec()).
	const migrated = "reg.migrated"
	withMigs := runtime.StateSpec{Name: migrated, Kind: runtime.KindValue, Fingerprint: "v2",
		Migrations: []runtime.Migration{{From: "v1", Convert: func(dst, src []byte) ([]byte, error) { return append(dst, src...), nil }}}}
	register(s, withMigs)
	for _, spec := range s.States() {
		if spec.Name == migrated && !spec.Equal(withMigs) {
			fail("States() reports %v with migrations from %q, registered with them from %q", spec, migrationsFrom(spec), migrationsFrom(withMigs))
		}
	}
}

func checkRegisterInvalid(e *env) {
	s := e.newStore(runtime.StoreConfig{})
	invalid := []runtime.StateSpec{
		{Name: "", Kind: runtime.KindValue},
		{Name: "a/b", Kind: runtime.KindValue},
		{Name: `a\b`, Kind: runtime.KindValue},
		{Name: "..", Kind: runtime.KindValue},
		{Name: ".", Kind: runtime.KindValue},
		{Name: "a\x00b", Kind: runtime.KindValue},
		{Name: "a\nb", Kind: runtime.KindValue},
		{Name: "\xff", Kind: runtime.KindValue},
		{Name: strings.Repeat("n", runtime.MaxStateNameLen+1), Kind: runtime.KindValue},
		{Name: "no.kind"},
		{Name: "bad.kind", Kind: runtime.Kind(9)},
		{Name: "bad.fingerprint", Kind: runtime.KindValue, Fingerprint: "\xff"},
	}
	for _, spec := range invalid {
		st, err := s.Register(spec)
		wantErr(err, runtime.ErrInvalidState, fmt.Sprintf("Register(%v)", spec))
		if st != nil {
			fail("Register(%v) failed but returned a state", spec)
		}
	}
	if got := s.States(); len(got) != 0 {
		fail("States() = %v after only invalid registrations", got)
	}
	// The longest valid name is fine.
	register(s, runtime.StateSpec{Name: strings.Repeat("n", runtime.MaxStateNameLen), Kind: runtime.KindValue})
}

func checkValue(e *env) {
	s := e.newStore(runtime.StoreConfig{})
	for _, sub := range keyedAndSubKeyed {
		st := register(s, specFor("value", runtime.KindValue, sub))
		ns1, ns2 := twoNamespaces(sub)
		k1 := u32(1, ns1)
		expect := func(k runtime.Key, want string, wantFound bool, when string) {
			v, found := getValue(st, k)
			if v != want || found != wantFound {
				fail("%s: %s.Get(%s) = (%q, %v), want (%q, %v)", when, name(st), keyDesc(k), v, found, want, wantFound)
			}
		}
		expect(k1, "", false, "absent key")
		putValue(st, k1, []byte("v1"))
		expect(k1, "v1", true, "after Put")
		putValue(st, k1, []byte("v2"))
		expect(k1, "v2", true, "Put replaces")
		putValue(st, k1, []byte{})
		expect(k1, "", true, "an empty value is found")
		putValue(st, k1, nil)
		expect(k1, "", true, "a nil value is stored as an empty value")
		putValue(st, k1, []byte("v3"))
		expect(u32(2, ns1), "", false, "another key")
		if sub {
			expect(u32(1, ns2), "", false, "another namespace")
			putValue(st, u32(1, ns2), []byte("other"))
			expect(k1, "v3", true, "after a Put to another namespace")
		}
		must(st.Clear(k1), "Clear")
		expect(k1, "", false, "after Clear")
		must(st.Clear(k1), "Clear of an absent entry")
		if sub {
			expect(u32(1, ns2), "other", true, "another namespace after Clear")
		}
	}
}

func checkList(e *env) {
	s := e.newStore(runtime.StoreConfig{})
	for _, sub := range keyedAndSubKeyed {
		st := register(s, specFor("list", runtime.KindList, sub))
		ls := st.(runtime.ListState)
		ns1, ns2 := twoNamespaces(sub)
		k1, k2 := u32(1, ns1), u32(2, ns1)
		expect := func(k runtime.Key, want []string, when string) {
			expectEq(fmt.Sprintf("%s: %s.Get(%s)", when, name(st), keyDesc(k)), want, getList(st, k, 0))
			nss := namespaces(st, k)
			if has := indexOf(nss, string(k.Namespace())) >= 0; has != (len(want) > 0) {
				fail("%s: %s.Namespaces(%s) = %q: a list exists exactly when it is not empty", when, name(st), keyDesc(k), nss)
			}
		}
		expect(k1, []string{}, "absent list")
		must(ls.Add(k1, []byte("a")), "Add")
		must(ls.Add(k1, []byte("b")), "Add")
		must(ls.AddAll(k1, [][]byte{[]byte("c"), []byte("d")}), "AddAll")
		expect(k1, []string{"a", "b", "c", "d"}, "Add, Add, AddAll")
		must(ls.Add(k1, []byte("a")), "Add")
		expect(k1, []string{"a", "b", "c", "d", "a"}, "duplicates are kept")
		must(ls.AddAll(k1, nil), "AddAll(nil)")
		must(ls.AddAll(k1, [][]byte{}), "AddAll(empty)")
		expect(k1, []string{"a", "b", "c", "d", "a"}, "AddAll with no elements")
		must(ls.Replace(k1, [][]byte{[]byte("x"), []byte("y")}), "Replace")
		expect(k1, []string{"x", "y"}, "Replace replaces")
		must(ls.Replace(k1, nil), "Replace(nil)")
		expect(k1, []string{}, "Replace with no elements removes the list")
		must(ls.AddAll(k2, nil), "AddAll(nil) of an absent list")
		must(ls.Replace(k2, [][]byte{}), "Replace(empty) of an absent list")
		expect(k2, []string{}, "AddAll and Replace with no elements do not create a list")
		must(ls.Add(k2, nil), "Add(nil)")
		must(ls.AddAll(k2, [][]byte{{}, []byte("z"), nil}), "AddAll with empty elements")
		expect(k2, []string{"", "", "z", ""}, "empty elements are elements")
		must(ls.AddAll(k1, [][]byte{[]byte("p")}), "AddAll creates")
		expect(k1, []string{"p"}, "AddAll of an absent list creates it")
		if sub {
			k3 := u32(1, ns2)
			must(ls.Add(k3, []byte("q")), "Add")
			expect(k1, []string{"p"}, "after an Add to another namespace")
			expect(k3, []string{"q"}, "the other namespace")
		}
		must(st.Clear(k1), "Clear")
		expect(k1, []string{}, "after Clear")
		must(st.Clear(k1), "Clear of an absent list")
	}
}

// checkMapCommon checks the rules Map and SortedMap share.
func checkMapCommon(e *env, kind runtime.Kind) {
	s := e.newStore(runtime.StoreConfig{})
	for _, sub := range keyedAndSubKeyed {
		st := register(s, specFor("map", kind, sub))
		ms := st.(runtime.MapState)
		ns1, ns2 := twoNamespaces(sub)
		k1 := u32(1, ns1)
		u1, u2, u3 := encString("u1"), encString("u2"), encString("u3")
		expectGet := func(k runtime.Key, uk []byte, want string, wantFound bool, when string) {
			v, found := getMap(st, k, uk)
			if v != want || found != wantFound {
				fail("%s: %s.Get(%s, %x) = (%q, %v), want (%q, %v)", when, name(st), keyDesc(k), uk, v, found, want, wantFound)
			}
		}
		expectAll := func(k runtime.Key, want []kv, when string) {
			expectEq(fmt.Sprintf("%s: %s.Iterate(%s) (sorted)", when, name(st), keyDesc(k)), want, iterateSorted(st, k))
		}
		expectGet(k1, u1, "", false, "absent map")
		expectAll(k1, []kv{}, "absent map")
		must(ms.Delete(k1, u1), "Delete from an absent map")
		expectAll(k1, []kv{}, "Delete from an absent map")
		putMap(st, k1, u1, []byte("v1"))
		putMap(st, k1, u2, []byte("v2"))
		expectGet(k1, u1, "v1", true, "after Put")
		expectGet(k1, u2, "v2", true, "after Put")
		expectGet(k1, u3, "", false, "absent user key")
		putMap(st, k1, u1, []byte("v1b"))
		expectGet(k1, u1, "v1b", true, "Put replaces")
		putMap(st, k1, u3, []byte{})
		expectGet(k1, u3, "", true, "an empty value is found")
		expectAll(k1, []kv{{string(u1), "v1b"}, {string(u2), "v2"}, {string(u3), ""}}, "after Puts")
		must(ms.Delete(k1, u2), "Delete")
		expectGet(k1, u2, "", false, "after Delete")
		must(ms.Delete(k1, u2), "Delete of an absent user key")
		expectAll(k1, []kv{{string(u1), "v1b"}, {string(u3), ""}}, "after Delete")
		if sub {
			putMap(st, u32(1, ns2), u1, []byte("other"))
			expectGet(k1, u1, "v1b", true, "after a Put to another namespace")
		}
		must(ms.Delete(k1, u1), "Delete")
		must(ms.Delete(k1, u3), "Delete")
		expectAll(k1, []kv{}, "after deleting every entry")
		if got := namespaces(st, k1); sub && (len(got) != 1 || got[0] != string(ns2)) || !sub && len(got) != 0 {
			fail("%s: a map whose entries were all deleted still exists: Namespaces = %q", name(st), got)
		}
		putMap(st, k1, u1, []byte("again"))
		must(st.Clear(k1), "Clear")
		expectAll(k1, []kv{}, "after Clear")
		must(st.Clear(k1), "Clear of an absent map")
		if sub {
			expectAll(u32(1, ns2), []kv{{string(u1), "other"}}, "another namespace after Clear")
		}
	}
}

func checkMap(e *env) { checkMapCommon(e, runtime.KindMap) }

// sortedKeys are user keys whose encodings sort in this (logical) order,
// with varied lengths and 0x00 and 0xff bytes.
var sortedKeys = []string{"", "\x00", "\x00\x00", "a", "a\x00", "ab", "b", "\xff", "\xff\xff"}

func checkSortedMap(e *env) {
	checkMapCommon(e, runtime.KindSortedMap)
	s := e.newStore(runtime.StoreConfig{})
	for _, sub := range keyedAndSubKeyed {
		st := register(s, specFor("sorted", runtime.KindSortedMap, sub))
		ns1, _ := twoNamespaces(sub)
		k := u32(1, ns1)
		// Insert in a scrambled order.
		for _, i := range []int{4, 0, 8, 2, 6, 1, 7, 3, 5} {
			putMap(st, k, encString(sortedKeys[i]), []byte(fmt.Sprintf("v%d", i)))
		}
		var want []kv
		for i, s := range sortedKeys {
			want = append(want, kv{string(encString(s)), fmt.Sprintf("v%d", i)})
		}
		expectEq(fmt.Sprintf("%s.Iterate: ascending by encoded user key", name(st)), want, iterate(st, k, 0))
	}
}

func checkSortedMapRange(e *env) {
	s := e.newStore(runtime.StoreConfig{})
	enc := func(s string) []byte { return encString(s) }
	for _, sub := range keyedAndSubKeyed {
		st := register(s, specFor("range", runtime.KindSortedMap, sub))
		ns1, _ := twoNamespaces(sub)
		k := u32(1, ns1)
		for i, s := range sortedKeys {
			putMap(st, k, enc(s), []byte(fmt.Sprintf("v%d", i)))
		}
		all := sortedKeys
		cases := []struct {
			lo, hi  []byte
			reverse bool
			limit   int
			want    []string // logical user keys
		}{
			{nil, nil, false, 0, all},
			{nil, nil, true, 0, reversed(all)},
			{[]byte{}, nil, false, 0, all},
			{nil, []byte{}, false, 0, nil},
			{nil, []byte{}, true, 0, nil},
			{[]byte{}, []byte{}, false, 0, nil},
			{enc("a"), enc("b"), false, 0, []string{"a", "a\x00", "ab"}},
			{enc("a"), enc("b"), true, 0, []string{"ab", "a\x00", "a"}},
			{enc("a"), enc("a"), false, 0, nil},
			{enc("b"), enc("a"), false, 0, nil},
			{enc("b"), enc("a"), true, 0, nil},
			{enc("a"), nil, false, 0, []string{"a", "a\x00", "ab", "b", "\xff", "\xff\xff"}},
			{nil, enc("a"), false, 0, []string{"", "\x00", "\x00\x00"}},
			{nil, enc("a"), true, 0, []string{"\x00\x00", "\x00", ""}},
			// Bounds that are not user keys of the map.
			{[]byte("a"), []byte("b"), false, 0, []string{"a", "a\x00", "ab"}},
			{[]byte{0}, []byte{0, 0xff, 0, 2}, false, 0, []string{"", "\x00"}},
			{enc("\xff\xff\xff"), nil, false, 0, nil},
			{nil, []byte{0}, false, 0, nil},
			// First and Last.
			{nil, nil, false, 1, []string{""}},
			{nil, nil, true, 1, []string{"\xff\xff"}},
			{enc("a"), enc("b"), true, 2, []string{"ab", "a\x00"}},
		}
		for _, c := range cases {
			want := []kv{}
			for _, u := range c.want {
				want = append(want, kv{string(enc(u)), fmt.Sprintf("v%d", indexOf(sortedKeys, u))})
			}
			got := rangeOf(st, k, c.lo, c.hi, c.reverse, c.limit)
			expectEq(fmt.Sprintf("%s.Range(lo=%s, hi=%s, reverse=%v) stopped after %d",
				name(st), boundDesc(c.lo), boundDesc(c.hi), c.reverse, c.limit), want, got)
		}
		if got := rangeOf(st, u32(2, ns1), nil, nil, false, 0); len(got) != 0 {
			fail("%s.Range of an absent map yields %v", name(st), got)
		}
	}
}

func reversed(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func checkNamespacesAndDeleteAll(e *env) {
	s := e.newStore(runtime.StoreConfig{})
	keys := sameGroupKeys(mp, runtime.FullRange(mp), 3)
	for _, k := range kinds {
		for _, sub := range keyedAndSubKeyed {
			st := register(s, specFor("ns", k, sub))
			ns1, ns2 := twoNamespaces(sub)
			a1, a2, b1 := key(keys[0], ns1), key(keys[0], ns2), key(keys[1], ns1)
			absent := key(keys[2], ns1)
			write(st, a1, "a1")
			write(st, a2, "a2")
			write(st, b1, "b1")
			wantA, wantB := []string{""}, []string{""}
			if sub {
				wantA, wantB = []string{string(ns1), string(ns2)}, []string{string(ns1)}
			}
			expectEq(name(st)+".Namespaces of a key with entries", wantA, namespaces(st, a1))
			expectEq(name(st)+".Namespaces of another key of the same key group", wantB, namespaces(st, b1))
			expectEq(name(st)+".Namespaces of an absent key", []string{}, namespaces(st, absent))
			// Namespaces and DeleteAll ignore k.Namespace.
			other := key(keys[0], encString("ignored"))
			expectEq(name(st)+".Namespaces ignores k.Namespace", wantA, namespaces(st, other))

			must(st.Clear(a1), "Clear")
			wantA = []string{}
			if sub {
				wantA = []string{string(ns2)}
			}
			expectEq(name(st)+".Namespaces after Clear of one namespace", wantA, namespaces(st, a1))

			bBefore := readAll(st, b1)
			write(st, a1, "a1")
			must(st.DeleteAll(other), "DeleteAll")
			expectEq(name(st)+".Namespaces after DeleteAll", []string{}, namespaces(st, a1))
			expectEq(name(st)+" content after DeleteAll", []string{}, readAll(st, a1))
			expectEq(name(st)+" content after DeleteAll", []string{}, readAll(st, a2))
			expectEq(name(st)+": DeleteAll of one key changes another key of its key group", bBefore, readAll(st, b1))
			expectEq(name(st)+".Namespaces of another key after DeleteAll", wantB, namespaces(st, b1))
			must(st.DeleteAll(absent), "DeleteAll of an absent key")
		}
	}
}

// checkKeys: State.Keys lists every key with an entry in a key group once,
// whatever its namespaces, elements or user keys — in encoded order on a
// sorted store — and no key of another key group or without entries; it
// stops when fn returns false, refuses its callback's writes, and refuses
// key groups the store does not own or that do not exist.
func checkKeys(e *env) {
	owned := runtime.KeyGroupRange{Start: 0, End: mp / 2}
	s := e.newStore(runtime.StoreConfig{KeyGroups: owned})
	keys := sameGroupKeys(mp, owned, 5)
	k0 := key(keys[0], nil)
	kg := k0.Group()
	var other []byte // a key of another owned key group
	otherKG := -1
	for i := uint32(0); other == nil; i++ {
		if k := u32(i, nil); k.Group() != kg && owned.Contains(k.Group()) {
			other, otherKG = k.Bytes(), k.Group()
		}
	}
	for _, kind := range kinds {
		for _, sub := range keyedAndSubKeyed {
			st := register(s, specFor("keys", kind, sub))
			what := name(st) + ".Keys"
			ns1, ns2 := twoNamespaces(sub)
			for _, k := range keys[:4] {
				write(st, key(k, ns1), "1")
				write(st, key(k, ns2), "2")
				if kind.HasUserKey() {
					putMap(st, key(k, ns1), encString("v"), []byte("3"))
				}
			}
			write(st, key(other, ns1), "o")
			must(st.DeleteAll(key(keys[3], nil)), "DeleteAll")
			want := []string{string(keys[0]), string(keys[1]), string(keys[2])}
			slices.Sort(want)
			got := listKeys(st, kg, 0)
			if !e.o.sorted {
				slices.Sort(got)
			}
			expectEq(what+" of a key group (keys with entries, each once"+map[bool]string{true: ", in encoded order", false: ""}[e.o.sorted]+")", want, got)
			expectEq(what+" of another key group", []string{string(other)}, listKeys(st, otherKG, 0))
			if n := len(listKeys(st, kg, 1)); n != 1 {
				fail("%s whose callback returns false at once reported %d keys, want 1", what, n)
			}
			var werr error
			must(st.Keys(kg, func([]byte) bool {
				werr = st.Clear(key(keys[0], ns1))
				return false
			}), "%s", what)
			wantErr(werr, runtime.ErrWriteDuringIteration, what+" callback's Clear")
			wantErr(st.Keys(mp/2, func([]byte) bool { return true }), runtime.ErrKeyGroupNotOwned, what+" of a key group the store does not own")
			wantErr(st.Keys(-1, func([]byte) bool { return true }), runtime.ErrInvalidKeyGroup, what+" of key group -1")
			wantErr(st.Keys(mp, func([]byte) bool { return true }), runtime.ErrInvalidKeyGroup, what+" of a key group past the maxParallelism")
		}
	}
	st := register(s, specFor("keys.empty", runtime.KindValue, false))
	expectEq("Keys of an empty state", []string{}, listKeys(st, kg, 0))
}

func checkEarlyStop(e *env) {
	s := e.newStore(runtime.StoreConfig{})
	k := u32(1, encString("w"))
	ls := register(s, specFor("stop", runtime.KindList, true))
	must(ls.(runtime.ListState).AddAll(k, [][]byte{[]byte("a"), []byte("b"), []byte("c")}), "AddAll")
	expectEq("list Get stopped after one element", []string{"a"}, getList(ls, k, 1))
	expectEq("list Get stopped after two elements", []string{"a", "b"}, getList(ls, k, 2))
	for _, kind := range []runtime.Kind{runtime.KindMap, runtime.KindSortedMap} {
		st := register(s, specFor("stop", kind, true))
		for _, u := range []string{"a", "b", "c"} {
			putMap(st, k, encString(u), []byte(u))
		}
		if got := iterate(st, k, 1); len(got) != 1 {
			fail("%s.Iterate stopped after one entry yields %v", name(st), got)
		}
	}
	for _, kind := range kinds {
		st := register(s, specFor("stopns", kind, true))
		for _, ns := range []string{"x", "y", "z"} {
			write(st, u32(1, encString(ns)), "v")
		}
		calls, again := 0, false
		must(st.Namespaces(k, func([]byte) bool {
			if calls > 0 {
				again = true
			}
			calls++
			return false
		}), "Namespaces")
		if again {
			fail("%s.Namespaces called its callback after it returned false", name(st))
		}
		if calls != 1 {
			fail("%s.Namespaces called its callback %d times, want 1", name(st), calls)
		}
	}
}

func checkEmptyEncodings(e *env) {
	// A unit-like key, namespace or user key encodes as zero bytes; it is a
	// valid encoding (the only one of its codec) and must not be confused
	// with "absent".
	s := e.newStore(runtime.StoreConfig{})
	empty := []byte{}
	k := key(empty, empty)
	kKeyed := key(empty, nil)

	v := register(s, runtime.StateSpec{Name: "empty.value", Kind: runtime.KindValue})
	putValue(v, kKeyed, empty)
	if got, ok := getValue(v, kKeyed); !ok || got != "" {
		fail("value at the empty key: Get = (%q, %v), want (\"\", true)", got, ok)
	}
	expectEq("Namespaces of the empty key", []string{""}, namespaces(v, kKeyed))

	l := register(s, runtime.StateSpec{Name: "empty.list", Kind: runtime.KindList, SubKeyed: true})
	must(l.(runtime.ListState).Add(k, empty), "Add")
	expectEq("list at the empty key and namespace", []string{""}, getList(l, k, 0))
	expectEq("Namespaces of the empty key", []string{""}, namespaces(l, k))

	m := register(s, runtime.StateSpec{Name: "empty.sorted", Kind: runtime.KindSortedMap, SubKeyed: true})
	putMap(m, k, empty, empty)
	if got, ok := getMap(m, k, empty); !ok || got != "" {
		fail("sorted map at the empty key, namespace and user key: Get = (%q, %v), want (\"\", true)", got, ok)
	}
	if got, ok := getMap(m, k, nil); !ok || got != "" {
		fail("sorted map: Get with a nil user key = (%q, %v), want the empty user key's (\"\", true)", got, ok)
	}
	expectEq("Iterate", []kv{{"", ""}}, iterate(m, k, 0))
	expectEq("Range(nil, nil)", []kv{{"", ""}}, rangeOf(m, k, nil, nil, false, 0))
	expectEq("Range(empty, nil)", []kv{{"", ""}}, rangeOf(m, k, empty, nil, true, 0))
	expectEq("Range(nil, empty)", []kv{}, rangeOf(m, k, nil, empty, false, 0))
	expectEq("Namespaces", []string{""}, namespaces(m, k))

	g := runtime.KeyGroupOfHash(runtime.HashKey(nil), mp)
	want := expectContents(mp, runtime.FullRange(mp), s.States(),
		namedRecord{"empty.value", Record{}},
		namedRecord{"empty.list", Record{}},
		namedRecord{"empty.sorted", Record{}},
	)
	expectEq(fmt.Sprintf("snapshot with entries at empty encodings (key group %d)", g), want, dumpStore(s))

	must(m.DeleteAll(k), "DeleteAll")
	expectEq("Iterate after DeleteAll", []kv{}, iterate(m, k, 0))
	must(l.(runtime.ListState).Replace(k, nil), "Replace(nil)")
	expectEq("list after Replace(nil)", []string{}, getList(l, k, 0))
}

func checkCopiesInputs(e *env) {
	s := e.newStore(runtime.StoreConfig{})
	scribble := func(bufs ...[]byte) {
		for _, b := range bufs {
			for i := range b {
				b[i] = '#'
			}
		}
	}

	// Value: the key, namespace and value buffers are reused after Put.
	vs := register(s, specFor("copy", runtime.KindValue, true))
	kb, nb, vb := encUint32(1), encString("ns"), []byte("value-1")
	putValue(vs, key(kb, nb), vb)
	copy(kb, encUint32(2))
	copy(nb, encString("zz"))
	scribble(vb)
	if v, ok := getValue(vs, u32(1, encString("ns"))); !ok || v != "value-1" {
		fail("value: after the caller reused its buffers, Get = (%q, %v), want (\"value-1\", true)", v, ok)
	}
	if v, ok := getValue(vs, key(kb, nb)); ok {
		fail("value: a key never written is found with %q after the caller reused the buffers of another key", v)
	}

	// Get's result is the caller's to read, but the caller's later writes to
	// its own buffers must not reach it.
	ls := register(s, specFor("copy", runtime.KindList, false))
	buf := []byte("e1e2e3")
	k := u32(3, nil)
	must(ls.(runtime.ListState).Add(k, buf[0:2]), "Add")
	must(ls.(runtime.ListState).AddAll(k, [][]byte{buf[2:4], buf[4:6]}), "AddAll")
	scribble(buf)
	expectEq("list after the caller reused its buffers (Add, AddAll)", []string{"e1", "e2", "e3"}, getList(ls, k, 0))
	buf = []byte("u1u2")
	must(ls.(runtime.ListState).Replace(k, [][]byte{buf[0:2], buf[2:4]}), "Replace")
	scribble(buf)
	expectEq("list after the caller reused its buffers (Replace)", []string{"u1", "u2"}, getList(ls, k, 0))

	for _, kind := range []runtime.Kind{runtime.KindMap, runtime.KindSortedMap} {
		ms := register(s, specFor("copy", kind, true))
		kb, nb := encUint32(4), encString("ns")
		ub, vb := encString("user"), []byte("val")
		putMap(ms, key(kb, nb), ub, vb)
		scribble(kb, nb, ub, vb)
		expectEq(kind.String()+" after the caller reused its buffers",
			[]kv{{string(encString("user")), "val"}}, iterate(ms, u32(4, encString("ns")), 0))
	}
}

// checkKeyGroupNotOwned: every operation on a key in a key group the store
// does not own is an ErrKeyGroupNotOwned naming the state and the key
// group, and leaves the store unchanged.
func checkKeyGroupNotOwned(e *env) {
	owned := runtime.KeyGroupRange{Start: 0, End: mp / 2}
	s := e.newStore(runtime.StoreConfig{MaxParallelism: mp, KeyGroups: owned})
	kIn := keyInGroups(mp, owned, false)
	kOut := keyInGroups(mp, owned, true)
	for _, kind := range kinds {
		for _, sub := range keyedAndSubKeyed {
			st := register(s, specFor("owned", kind, sub))
			ns, _ := twoNamespaces(sub)
			in, out := key(kIn, ns), key(kOut, ns)
			write(st, in, "fine")
			before := readAll(st, in)
			group := strconv.Itoa(out.Group())
			everyOp(st, out, func(op string, err error) {
				wantErr(err, runtime.ErrKeyGroupNotOwned,
					fmt.Sprintf("%s.%s of a key in key group %d, outside %v", name(st), op, out.Group(), owned),
					name(st), group)
			})
			expectEq(name(st)+" at an owned key after failed operations on a key not owned", before, readAll(st, in))
		}
	}
	c := dumpStore(s)
	for name, sc := range c.States {
		for g := range sc.Groups {
			if !owned.Contains(g) {
				fail("state %q holds entries in key group %d, outside the store's %v", name, g, owned)
			}
		}
	}
}

// checkKeysNotMade: a Key that MakeKey did not build for the store's
// maxParallelism — the zero Key, or one built for another maxParallelism,
// whose key group would be wrong — is refused by every operation with an
// ErrInvalidKey naming the state, and leaves the store unchanged.
func checkKeysNotMade(e *env) {
	s := e.newStore(runtime.StoreConfig{MaxParallelism: mp})
	for _, kind := range kinds {
		for _, sub := range keyedAndSubKeyed {
			st := register(s, specFor("made", kind, sub))
			ns, _ := twoNamespaces(sub)
			good := key(encUint32(9), ns)
			write(st, good, "fine")
			before := readAll(st, good)
			for _, bad := range []struct {
				what string
				k    runtime.Key
			}{
				{"the zero Key", runtime.Key{}},
				{fmt.Sprintf("a Key built for maxParallelism %d", 2*mp), runtime.MakeKey(good.Bytes(), good.Namespace(), 2*mp)},
			} {
				everyOp(st, bad.k, func(op string, err error) {
					wantErr(err, runtime.ErrInvalidKey, fmt.Sprintf("%s.%s of %s", name(st), op, bad.what), name(st))
				})
			}
			expectEq(name(st)+" after failed operations on keys not made for the store", before, readAll(st, good))
		}
	}
}

// orderFields are keys, namespaces and user keys of many widths — empty,
// one byte, around the 8 bytes a length or framing group often takes, and
// longer — whose bytewise order differs from their order by length.
var orderFields = []string{
	"", "\x00", "\x00\x00", "a", "a\x00", "aa", "ab", "b", "\xff", "\xff\xff",
	"1234567", "12345678", "123456789", "12345678\x00", "1234567812345678", "12345678123456789",
	"session-9", "session-10", "session-100", strings.Repeat("z", 40),
}

// checkOrder: a sorted store (Sorted) yields a key's namespaces, and a
// snapshot's entries, in encoded order for keys, namespaces and user keys
// of every width; any store yields each exactly once.
func checkOrder(e *env) {
	const maxP = 1 // one key group: every key in it
	s := e.newStore(runtime.StoreConfig{MaxParallelism: maxP})
	sortedFields := slices.Clone(orderFields)
	slices.Sort(sortedFields)
	var states []runtime.State
	for _, kind := range kinds {
		for _, sub := range keyedAndSubKeyed {
			st := register(s, specFor("order", kind, sub))
			states = append(states, st)
			nss := []string{""}
			if sub {
				nss = orderFields
			}
			// Write in an order that is neither sorted nor by length.
			for i := range orderFields {
				k := orderFields[(i*7)%len(orderFields)]
				for j := range nss {
					ns := nss[(j*3)%len(nss)]
					rk := runtime.MakeKey([]byte(k), []byte(ns), maxP)
					switch kind {
					case runtime.KindValue:
						putValue(st, rk, []byte("v"))
					case runtime.KindList:
						must(st.(runtime.ListState).AddAll(rk, [][]byte{[]byte("1"), []byte("2")}), "AddAll")
					default:
						for u := range 3 {
							putMap(st, rk, []byte(orderFields[(i+j+5*u)%len(orderFields)]), []byte("v"))
						}
					}
				}
			}
			rk := runtime.MakeKey([]byte("12345678"), nil, maxP)
			var got []string
			must(st.Namespaces(rk, func(ns []byte) bool { got = append(got, string(ns)); return true }), "Namespaces")
			want := []string{""}
			if sub {
				want = sortedFields
			}
			if !e.o.sorted {
				slices.Sort(got)
			}
			expectEq(name(st)+".Namespaces of namespaces of many widths (in encoded order on a sorted store)", want, got)
		}
	}
	snap, err := s.Snapshot()
	must(err, "Snapshot")
	defer func() { must(snap.Release(), "Release") }()
	for _, st := range states {
		type entry struct{ k, ns, uk string }
		var got []entry
		must(snap.Scan(name(st), 0, func(en runtime.Entry) error {
			got = append(got, entry{string(en.Key), string(en.Namespace), string(en.UserKey)})
			return nil
		}), "Scan")
		order := func(a, b entry) int {
			return cmp.Or(strings.Compare(a.k, b.k), strings.Compare(a.ns, b.ns), strings.Compare(a.uk, b.uk))
		}
		if !e.o.sorted {
			slices.SortStableFunc(got, order)
		}
		for i := 1; i < len(got); i++ {
			c := order(got[i-1], got[i])
			if c > 0 || c == 0 && st.Spec().Kind != runtime.KindList {
				fail("%s: Scan yields (key %q, namespace %q, user key %q) before (key %q, namespace %q, user key %q)%s",
					name(st), got[i-1].k, got[i-1].ns, got[i-1].uk, got[i].k, got[i].ns, got[i].uk,
					map[bool]string{true: ": a sorted store yields entries in encoded order", false: " twice"}[c > 0])
			}
		}
	}
}

// checkEdit: MapState.Edit and SortedMapState.EditRange keep, delete and
// replace the entries the callback visits; the callback sees the map as it
// was; the edits apply when the walk ends, all of them up to a StopEdit,
// none after an error; other writes from the callback are refused.
func checkEdit(e *env) {
	s := e.newStore(runtime.StoreConfig{})
	uks := make([][]byte, 10)
	for i := range uks {
		uks[i] = encUint32(uint32(i))
	}
	for _, kind := range []runtime.Kind{runtime.KindMap, runtime.KindSortedMap} {
		for _, sub := range keyedAndSubKeyed {
			st := register(s, specFor("edit", kind, sub))
			ms := st.(runtime.MapState)
			ns, _ := twoNamespaces(sub)
			k := key(encUint32(1), ns)
			fill := func() {
				must(st.Clear(k), "Clear")
				for i, uk := range uks {
					putMap(st, k, uk, []byte(fmt.Sprint("v", i)))
				}
			}
			want := func(what string, f func(i int) (string, bool)) {
				w := []string{}
				for i, uk := range uks {
					if v, ok := f(i); ok {
						w = append(w, fmt.Sprintf("%x=%s", uk, v))
					}
				}
				expectEq(name(st)+": "+what, w, readAll(st, k))
			}
			index := func(uk []byte) int { return int(binary.BigEndian.Uint32(uk)) }

			// Delete the even entries, replace the multiples of 3, keep
			// the rest; the callback reads a deleted entry, tries a Put,
			// and reuses the buffer of the value it returns.
			fill()
			seen := 0
			buf := make([]byte, 0, 8)
			must(ms.Edit(k, func(uk, v []byte) (runtime.MapEdit, error) {
				seen++
				poison(buf) // the value returned last time is the store's copy now
				i := index(uk)
				if got, ok := getMap(st, k, uks[0]); !ok || got != "v0" {
					fail("%s.Edit: the callback reads entry 0 as (%q, %v), want the map as it was, (v0, true)", name(st), got, ok)
				}
				wantErr(ms.Put(k, uk, []byte("x")), runtime.ErrWriteDuringIteration, name(st)+".Put from inside Edit")
				switch {
				case i%2 == 0:
					return runtime.MapEdit{Action: runtime.EditDelete}, nil
				case i%3 == 0:
					buf = append(buf[:0], fmt.Sprint("r", i)...)
					return runtime.MapEdit{Action: runtime.EditReplace, Value: buf}, nil
				}
				return runtime.MapEdit{}, nil
			}), "Edit")
			if seen != len(uks) {
				fail("%s.Edit visited %d entries of %d", name(st), seen, len(uks))
			}
			want("after Edit (delete even, replace multiples of 3)", func(i int) (string, bool) {
				switch {
				case i%2 == 0:
					return "", false
				case i%3 == 0:
					return fmt.Sprint("r", i), true
				}
				return fmt.Sprint("v", i), true
			})

			// StopEdit ends the walk; the edits so far apply, its own too.
			fill()
			var visited []int
			must(ms.Edit(k, func(uk, _ []byte) (runtime.MapEdit, error) {
				visited = append(visited, index(uk))
				if len(visited) == 3 {
					return runtime.MapEdit{Action: runtime.EditDelete}, runtime.StopEdit
				}
				return runtime.MapEdit{Action: runtime.EditDelete}, nil
			}), "Edit stopped with StopEdit")
			want("after an Edit that deletes 3 entries and stops", func(i int) (string, bool) {
				return fmt.Sprint("v", i), !slices.Contains(visited, i)
			})

			// Another error: Edit returns it and applies nothing.
			fill()
			boom := errors.New("boom")
			n := 0
			err := ms.Edit(k, func(_, _ []byte) (runtime.MapEdit, error) {
				if n++; n == 5 {
					return runtime.MapEdit{}, boom
				}
				return runtime.MapEdit{Action: runtime.EditDelete}, nil
			})
			wantErr(err, boom, name(st)+".Edit whose callback fails")
			want("after an Edit whose callback failed", func(i int) (string, bool) { return fmt.Sprint("v", i), true })
			wantAnyErr(ms.Edit(k, func(_, _ []byte) (runtime.MapEdit, error) {
				return runtime.MapEdit{Action: runtime.EditAction(99)}, nil
			}), name(st)+".Edit with an unknown action")
			want("after an Edit with an unknown action", func(i int) (string, bool) { return fmt.Sprint("v", i), true })
			wantAnyErr(ms.Edit(k, nil), name(st)+".Edit with a nil callback")

			// An absent map: the callback is never called.
			must(ms.Edit(key(encUint32(2), ns), func(_, _ []byte) (runtime.MapEdit, error) {
				fail("%s.Edit of an absent map called its callback", name(st))
				return runtime.MapEdit{}, nil
			}), "Edit of an absent map")

			if kind != runtime.KindSortedMap {
				continue
			}
			// EditRange visits [lo, hi) in order, or in reverse.
			sm := st.(runtime.SortedMapState)
			for _, reverse := range []bool{false, true} {
				fill()
				visited = visited[:0]
				must(sm.EditRange(k, uks[2], uks[7], reverse, func(uk, _ []byte) (runtime.MapEdit, error) {
					visited = append(visited, index(uk))
					return runtime.MapEdit{Action: runtime.EditReplace, Value: []byte("r")}, nil
				}), "EditRange")
				wantOrder := []int{2, 3, 4, 5, 6}
				if reverse {
					slices.Reverse(wantOrder)
				}
				expectEq(fmt.Sprintf("%s.EditRange([2, 7), reverse %v) visits", name(st), reverse), wantOrder, visited)
				want("after EditRange [2, 7) replaced every entry", func(i int) (string, bool) {
					if i >= 2 && i < 7 {
						return "r", true
					}
					return fmt.Sprint("v", i), true
				})
			}
		}
	}
}

// checkUpdate: a ValueState that is a runtime.ValueUpdater, or a MapState
// that is a runtime.MapUpdater (optional interfaces), updates like a Get
// then a Put: fn sees the current value, its result is stored (copied),
// its error stores nothing, writes from fn are refused, and a live
// snapshot keeps the value it saw. For a store without them there is
// nothing to check.
func checkUpdate(e *env) {
	s := e.newStore(runtime.StoreConfig{})
	for _, kind := range []runtime.Kind{runtime.KindValue, runtime.KindMap, runtime.KindSortedMap} {
		for _, sub := range keyedAndSubKeyed {
			st := register(s, specFor("update", kind, sub))
			u, ok := updaterOf(st)
			if !ok {
				continue
			}
			ns, _ := twoNamespaces(sub)
			checkUpdateOn(s, st, u, key(encUint32(1), ns))
		}
	}
}

// oneLookup is a state's one-lookup Update, on the entry of k (of a map,
// its user key "u"), with a plain Get and Put of that entry.
type oneLookup struct {
	update func(k runtime.Key, fn func(old []byte, found bool) ([]byte, error)) error
	get    func(k runtime.Key) []string // the entry's value, none if absent
	put    func(k runtime.Key, v []byte) error
}

// updaterOf returns st's oneLookup if st has one.
func updaterOf(st runtime.State) (oneLookup, bool) {
	uk := encString("u")
	switch st := st.(type) {
	case runtime.ValueUpdater:
		vs := st.(runtime.ValueState)
		return oneLookup{
			update: st.Update,
			get: func(k runtime.Key) []string {
				return readAll(vs, k)
			},
			put: vs.Put,
		}, true
	case runtime.MapUpdater:
		ms := st.(runtime.MapState)
		return oneLookup{
			update: func(k runtime.Key, fn func(old []byte, found bool) ([]byte, error)) error {
				return st.Update(k, uk, fn)
			},
			get: func(k runtime.Key) []string {
				v, found, err := ms.Get(k, uk)
				must(err, "%s.Get(%s, %q)", name(ms), keyDesc(k), uk)
				if !found {
					return []string{}
				}
				return []string{string(v)}
			},
			put: func(k runtime.Key, v []byte) error { return ms.Put(k, uk, v) },
		}, true
	}
	return oneLookup{}, false
}

func checkUpdateOn(s runtime.Store, st runtime.State, u oneLookup, k runtime.Key) {
	// Another entry of the state, which fn reads: old stays what it was
	// given (a store that hands out a buffer of its reads copies it).
	other := key(encUint32(2), k.Namespace())
	must(u.put(other, []byte("other entry")), "Put")
	var calls []string
	buf := []byte("first")
	must(u.update(k, func(old []byte, found bool) ([]byte, error) {
		calls = append(calls, fmt.Sprintf("%q %v", old, found))
		return buf, nil
	}), "Update of an absent value")
	poison(buf)
	expectEq(name(st)+": Update of an absent value calls fn with", []string{`"" false`}, calls)
	expectEq(name(st)+" after Update of an absent value (the caller reused its buffer)", []string{"first"}, u.get(k))

	snap, err := s.Snapshot()
	must(err, "Snapshot")
	for _, nv := range []string{"again", "longer value", "short"} { // the same length, then others
		calls = calls[:0]
		must(u.update(k, func(old []byte, found bool) ([]byte, error) {
			calls = append(calls, fmt.Sprintf("%q %v", old, found))
			given := string(old)
			if got := u.get(other); len(got) != 1 || got[0] != "other entry" {
				fail("%s.Update: fn reads another entry as %q, want %q", name(st), got, "other entry")
			}
			if string(old) != given {
				fail("%s.Update: fn's old value changed from %q to %q when fn read another entry", name(st), given, old)
			}
			if got := u.get(k); len(got) != 1 || got[0] != string(old) {
				fail("%s.Update: fn reads %q, want what it was given, %q", name(st), got, old)
			}
			wantErr(u.put(k, []byte("x")), runtime.ErrWriteDuringIteration, name(st)+".Put from inside Update")
			return []byte(nv), nil
		}), "Update")
		if len(calls) != 1 {
			fail("%s.Update called fn %d times, want once", name(st), len(calls))
		}
		expectEq(name(st)+" after Update to "+nv, []string{nv}, u.get(k))
	}
	snapVal := ""
	must(snap.Scan(name(st), k.Group(), func(en runtime.Entry) error {
		if bytes.Equal(en.Key, k.Bytes()) {
			snapVal = string(en.Value)
		}
		return nil
	}), "Scan")
	must(snap.Release(), "Release")
	if snapVal != "first" {
		fail("%s: a snapshot taken before Updates reads %q, want %q", name(st), snapVal, "first")
	}
	// With no live snapshot, an Update of the same length may write in place.
	must(u.update(k, func(old []byte, _ bool) ([]byte, error) { return []byte("SHORT"), nil }), "Update in place")
	expectEq(name(st)+" after Update to SHORT", []string{"SHORT"}, u.get(k))
	// fn's result may be (part of) the old value.
	must(u.update(k, func(old []byte, _ bool) ([]byte, error) { return old[1:3], nil }), "Update to part of old")
	expectEq(name(st)+" after Update to old[1:3]", []string{"HO"}, u.get(k))
	must(u.update(k, func(old []byte, _ bool) ([]byte, error) { return old[:], nil }), "Update to old itself")
	expectEq(name(st)+" after Update to old itself", []string{"HO"}, u.get(k))
	boom := errors.New("boom")
	wantErr(u.update(k, func([]byte, bool) ([]byte, error) { return []byte("lost"), boom }), boom, name(st)+".Update whose fn fails")
	expectEq(name(st)+" after an Update whose fn failed", []string{"HO"}, u.get(k))
	wantAnyErr(u.update(k, nil), name(st)+".Update with a nil callback")
}

// wantAnyErr fails if err is nil.
func wantAnyErr(err error, what string) {
	if err == nil {
		fail("%s: no error", what)
	}
}

// everyOp runs every operation of st's kind on k and passes check each
// one's error.
func everyOp(st runtime.State, k runtime.Key, check func(op string, err error)) {
	check("Clear", st.Clear(k))
	check("Namespaces", st.Namespaces(k, func([]byte) bool { return true }))
	check("DeleteAll", st.DeleteAll(k))
	v := []byte("v")
	switch st := st.(type) {
	case runtime.ValueState:
		_, _, err := st.Get(k)
		check("Get", err)
		check("Put", st.Put(k, v))
		if upd, ok := st.(runtime.ValueUpdater); ok {
			check("Update", upd.Update(k, func([]byte, bool) ([]byte, error) { return v, nil }))
		}
	case runtime.ListState:
		check("Get", st.Get(k, func([]byte) bool { return true }))
		check("Add", st.Add(k, v))
		check("AddAll", st.AddAll(k, [][]byte{v}))
		check("Replace", st.Replace(k, [][]byte{v}))
	case runtime.MapState:
		_, _, err := st.Get(k, v)
		check("Get", err)
		check("Put", st.Put(k, v, v))
		check("Delete", st.Delete(k, v))
		check("Iterate", st.Iterate(k, func(_, _ []byte) bool { return true }))
		check("Edit", st.Edit(k, func(_, _ []byte) (runtime.MapEdit, error) { return runtime.MapEdit{}, nil }))
		if upd, ok := st.(runtime.MapUpdater); ok {
			check("Update", upd.Update(k, v, func([]byte, bool) ([]byte, error) { return v, nil }))
		}
		if sm, ok := st.(runtime.SortedMapState); ok {
			check("Range", sm.Range(k, nil, nil, false, func(_, _ []byte) bool { return true }))
			check("EditRange", sm.EditRange(k, nil, nil, false, func(_, _ []byte) (runtime.MapEdit, error) { return runtime.MapEdit{}, nil }))
		}
	}
}

// checkNamespaceOnKeyedState: a keyed state has only the empty namespace;
// writing or reading another is an ErrInvalidKey naming the state, and
// leaves the state unchanged.
func checkNamespaceOnKeyedState(e *env) {
	s := e.newStore(runtime.StoreConfig{})
	for _, kind := range kinds {
		st := register(s, specFor("keyedns", kind, false))
		k := u32(7, nil)
		write(st, k, "fine")
		before := readAll(st, k)
		bad := u32(7, encString("window"))
		v := []byte("v")
		expect := func(op string, err error) {
			wantErr(err, runtime.ErrInvalidKey, fmt.Sprintf("%s.%s with a namespace on a keyed state", name(st), op), name(st))
		}
		expect("Clear", st.Clear(bad))
		switch kind {
		case runtime.KindValue:
			expect("Put", st.(runtime.ValueState).Put(bad, v))
		case runtime.KindList:
			expect("Add", st.(runtime.ListState).Add(bad, v))
		default:
			expect("Put", st.(runtime.MapState).Put(bad, v, v))
		}
		expectEq(name(st)+" after rejected writes with a namespace", before, readAll(st, k))
	}
}

func checkClosed(e *env) {
	s := e.newStore(runtime.StoreConfig{})
	var states []runtime.State
	for _, kind := range kinds {
		st := register(s, specFor("closed", kind, true))
		write(st, u32(1, encString("w")), "before close")
		states = append(states, st)
	}
	want := dumpStore(s)
	snap, err := s.Snapshot()
	must(err, "Snapshot")
	other := e.newStore(runtime.StoreConfig{})
	otherSnap, err := other.Snapshot()
	must(err, "Snapshot")
	defer otherSnap.Release()

	must(s.Close(), "Close")
	must(s.Close(), "a second Close (Close is idempotent)")

	_, err = s.Register(runtime.StateSpec{Name: "closed.new", Kind: runtime.KindValue})
	wantErr(err, runtime.ErrClosed, "Register after Close")
	_, err = s.Register(specFor("closed", runtime.KindValue, true))
	wantErr(err, runtime.ErrClosed, "Register of an existing state after Close")
	_, err = s.Snapshot()
	wantErr(err, runtime.ErrClosed, "Snapshot after Close")
	wantErr(s.Restore(otherSnap), runtime.ErrClosed, "Restore after Close")

	k := u32(1, encString("w"))
	v := []byte("v")
	for _, st := range states {
		closed := func(op string, err error) {
			wantErr(err, runtime.ErrClosed, fmt.Sprintf("%s.%s after Close", name(st), op), name(st))
		}
		closed("Clear", st.Clear(k))
		closed("Namespaces", st.Namespaces(k, func([]byte) bool { return true }))
		closed("DeleteAll", st.DeleteAll(k))
		switch st := st.(type) {
		case runtime.ValueState:
			_, _, err := st.Get(k)
			closed("Get", err)
			closed("Put", st.Put(k, v))
		case runtime.ListState:
			closed("Get", st.Get(k, func([]byte) bool { return true }))
			closed("Add", st.Add(k, v))
			closed("AddAll", st.AddAll(k, [][]byte{v}))
			closed("Replace", st.Replace(k, nil))
		case runtime.MapState:
			_, _, err := st.Get(k, v)
			closed("Get", err)
			closed("Put", st.Put(k, v, v))
			closed("Delete", st.Delete(k, v))
			closed("Iterate", st.Iterate(k, func(_, _ []byte) bool { return true }))
			if sm, ok := st.(runtime.SortedMapState); ok {
				closed("Range", sm.Range(k, nil, nil, false, func(_, _ []byte) bool { return true }))
			}
		}
	}

	// A snapshot taken before Close stays readable until released.
	got, err := Dump(snap)
	must(err, "Dump of a snapshot taken before Close, after Close")
	expectEq("snapshot taken before Close, read after Close", want, got)
	must(snap.Release(), "Release of a snapshot after Close of its store")
}

func checkSnapshot(e *env) {
	s := e.newStore(runtime.StoreConfig{})
	if got := s.States(); len(got) != 0 {
		fail("new store has states %v", got)
	}
	emptySnap, err := s.Snapshot()
	must(err, "Snapshot of an empty store")
	expectEq("snapshot of an empty store", expectContents(mp, runtime.FullRange(mp), nil), mustDump(emptySnap))
	must(emptySnap.Release(), "Release")

	valueSpec := runtime.StateSpec{Name: "snap.value", Kind: runtime.KindValue, Fingerprint: "v"}
	listSpec := runtime.StateSpec{Name: "snap.list", Kind: runtime.KindList, SubKeyed: true, Fingerprint: "l"}
	mapSpec := runtime.StateSpec{Name: "snap.map", Kind: runtime.KindMap, SubKeyed: true}
	vs := register(s, valueSpec)
	ls := register(s, listSpec).(runtime.ListState)
	k1, k2 := encUint32(1), encUint32(2)
	n1, n2 := encString("n1"), encString("n2")
	putValue(vs, key(k1, nil), []byte("a"))
	putValue(vs, key(k2, nil), []byte{})
	must(ls.AddAll(key(k1, n1), [][]byte{[]byte("x"), []byte("y")}), "AddAll")
	must(ls.Add(key(k1, n2), []byte("z")), "Add")

	s1, err := s.Snapshot()
	must(err, "Snapshot")
	specs1 := []runtime.StateSpec{listSpec, valueSpec}
	expectEq("snapshot States(), sorted by name", specs1, s1.States())
	if got := s1.MaxParallelism(); got != mp {
		fail("snapshot MaxParallelism() = %d, want %d", got, mp)
	}
	if got := s1.KeyGroups(); got != runtime.FullRange(mp) {
		fail("snapshot KeyGroups() = %v, want %v", got, runtime.FullRange(mp))
	}
	want1 := expectContents(mp, runtime.FullRange(mp), specs1,
		namedRecord{"snap.value", Record{Key: string(k1), Value: "a"}},
		namedRecord{"snap.value", Record{Key: string(k2), Value: ""}},
		namedRecord{"snap.list", Record{Key: string(k1), Namespace: string(n1), Value: "x"}},
		namedRecord{"snap.list", Record{Key: string(k1), Namespace: string(n1), Value: "y"}},
		namedRecord{"snap.list", Record{Key: string(k1), Namespace: string(n2), Value: "z"}},
	)
	expectEq("snapshot", want1, mustDump(s1))

	// Writes after Snapshot do not reach it.
	putValue(vs, key(k1, nil), []byte("b"))
	must(vs.Clear(key(k2, nil)), "Clear")
	must(ls.Add(key(k1, n1), []byte("w")), "Add")
	must(ls.Replace(key(k1, n2), nil), "Replace")
	ms := register(s, mapSpec)
	putMap(ms, key(k2, n1), encString("u"), []byte("m"))
	expectEq("snapshot after later writes and registrations", want1, mustDump(s1))

	s2, err := s.Snapshot()
	must(err, "Snapshot")
	specs2 := []runtime.StateSpec{listSpec, mapSpec, valueSpec}
	want2 := expectContents(mp, runtime.FullRange(mp), specs2,
		namedRecord{"snap.value", Record{Key: string(k1), Value: "b"}},
		namedRecord{"snap.list", Record{Key: string(k1), Namespace: string(n1), Value: "x"}},
		namedRecord{"snap.list", Record{Key: string(k1), Namespace: string(n1), Value: "y"}},
		namedRecord{"snap.list", Record{Key: string(k1), Namespace: string(n1), Value: "w"}},
		namedRecord{"snap.map", Record{Key: string(k2), Namespace: string(n1), UserKey: string(encString("u")), Value: "m"}},
	)
	expectEq("second snapshot", want2, mustDump(s2))
	expectEq("first snapshot, while a second is live", want1, mustDump(s1))

	// Scan errors.
	g1 := runtime.KeyGroupOfHash(runtime.HashKey(k1), mp)
	if err := s1.Scan("snap.nope", g1, func(runtime.Entry) error { return nil }); err == nil {
		fail("Scan of an unknown state succeeded")
	}
	if err := s1.Scan("snap.map", g1, func(runtime.Entry) error { return nil }); err == nil {
		fail("Scan of a state registered after the snapshot succeeded")
	}
	for _, g := range []int{-1, mp, mp + 1} {
		if err := s1.Scan("snap.value", g, func(runtime.Entry) error { return nil }); err == nil {
			fail("Scan of key group %d, outside %v, succeeded", g, s1.KeyGroups())
		}
	}
	stop := errors.New("stop here")
	calls := 0
	err = s1.Scan("snap.list", g1, func(runtime.Entry) error { calls++; return stop })
	if !errors.Is(err, stop) {
		fail("Scan whose callback returned %q returned %v", stop, err)
	}
	if calls != 1 {
		fail("Scan called its callback %d times after it returned an error, want once", calls)
	}

	// A store that owns part of the key groups: its snapshot holds them only.
	part := runtime.KeyGroupRange{Start: 16, End: 48}
	p := e.newStore(runtime.StoreConfig{MaxParallelism: mp, KeyGroups: part})
	register(p, valueSpec)
	ps, err := p.Snapshot()
	must(err, "Snapshot")
	if got := ps.KeyGroups(); got != part {
		fail("snapshot of a store owning %v: KeyGroups() = %v", part, got)
	}
	for _, g := range []int{part.Start - 1, part.End, 0, mp - 1} {
		if err := ps.Scan("snap.value", g, func(runtime.Entry) error { return nil }); err == nil {
			fail("Scan of key group %d of a snapshot of %v succeeded", g, part)
		}
	}
	for _, g := range []int{part.Start, part.End - 1} {
		must(ps.Scan("snap.value", g, func(runtime.Entry) error { return nil }), "Scan of owned key group %d", g)
	}
	must(ps.Release(), "Release")
	must(s1.Release(), "Release")
	must(s2.Release(), "Release")
}

func mustDump(v runtime.View) Contents {
	c, err := Dump(v)
	must(err, "Dump")
	return c
}

// checkReleaseDuringScan: Release may come while a Scan runs (here from
// its own callback, which then rewrites every entry the Scan has still to
// yield): Release succeeds, the Scan either ends normally or stops with
// ErrReleased, and every entry it yields is the snapshot's, never a write
// made after the Release — the snapshot is freed only when the Scan ends.
// Then the snapshot is released for good.
func checkReleaseDuringScan(e *env) {
	s := e.newStore(runtime.StoreConfig{})
	st := register(s, runtime.StateSpec{Name: "release.scan", Kind: runtime.KindValue})
	byGroup := map[int][]runtime.Key{}
	best := -1
	for i := uint32(0); best < 0 || len(byGroup[best]) < 12; i++ {
		k := u32(i, nil)
		putValue(st, k, fmt.Appendf(nil, "old-%06d", i))
		byGroup[k.Group()] = append(byGroup[k.Group()], k)
		if best < 0 || len(byGroup[k.Group()]) > len(byGroup[best]) {
			best = k.Group()
		}
	}
	snap, err := s.Snapshot()
	must(err, "Snapshot")
	yielded, released := 0, false
	err = snap.Scan("release.scan", best, func(en runtime.Entry) error {
		if !released {
			released = true
			must(snap.Release(), "Release during a Scan")
			for _, k := range byGroup[best] {
				old, _ := getValue(st, k)
				putValue(st, k, []byte("new"+old[3:]))
			}
		}
		yielded++
		if !bytes.HasPrefix(en.Value, []byte("old-")) {
			fail("a Scan released by its callback yielded %q for key %x: a write made after the Release, want the snapshot's value", en.Value, en.Key)
		}
		return nil
	})
	if err != nil && !errors.Is(err, runtime.ErrReleased) {
		fail("a Scan whose snapshot was released during it returned %v, want nil or ErrReleased", err)
	}
	if err == nil && yielded != len(byGroup[best]) {
		fail("a Scan released during it returned nil after %d of %d entries: it must yield all or fail with ErrReleased", yielded, len(byGroup[best]))
	}
	wantErr(snap.Release(), runtime.ErrReleased, "Release after a Release during a Scan")
	wantErr(snap.Scan("release.scan", best, func(runtime.Entry) error { return nil }), runtime.ErrReleased, "Scan after a Release during a Scan")
	for _, k := range byGroup[best] {
		if v, _ := getValue(st, k); !strings.HasPrefix(v, "new-") {
			fail("store reads %q for %s after the rewrite, want the new value", v, keyDesc(k))
		}
	}
}

func checkSnapshotRelease(e *env) {
	s := e.newStore(runtime.StoreConfig{})
	st := register(s, runtime.StateSpec{Name: "release.value", Kind: runtime.KindValue})
	k := u32(1, nil)
	putValue(st, k, []byte("1"))
	a, err := s.Snapshot()
	must(err, "Snapshot")
	putValue(st, k, []byte("2"))
	b, err := s.Snapshot()
	must(err, "Snapshot")
	putValue(st, k, []byte("3"))
	c, err := s.Snapshot()
	must(err, "Snapshot")
	putValue(st, k, []byte("4"))
	value := func(v runtime.View) string {
		d := mustDump(v)
		recs := d.States["release.value"].Groups[k.Group()]
		if len(recs) != 1 {
			fail("snapshot holds %v, want one record", recs)
		}
		return recs[0].Value
	}
	// Release the middle one first, then the oldest, then the newest.
	must(b.Release(), "Release")
	wantErr(b.Release(), runtime.ErrReleased, "a second Release")
	wantErr(b.Scan("release.value", k.Group(), func(runtime.Entry) error { return nil }), runtime.ErrReleased, "Scan after Release")
	if v := value(a); v != "1" {
		fail("oldest snapshot reads %q after a newer one was released, want \"1\"", v)
	}
	if v := value(c); v != "3" {
		fail("newest snapshot reads %q after an older one was released, want \"3\"", v)
	}
	must(a.Release(), "Release")
	wantErr(a.Release(), runtime.ErrReleased, "a second Release")
	putValue(st, k, []byte("5"))
	if v := value(c); v != "3" {
		fail("snapshot reads %q after writes and releases, want \"3\"", v)
	}
	must(c.Release(), "Release")
	wantErr(c.Release(), runtime.ErrReleased, "a second Release")
	if v, _ := getValue(st, k); v != "5" {
		fail("store reads %q after every snapshot was released, want \"5\"", v)
	}
}

// restoreSource returns a store with a few states and entries, and its
// expected content.
func restoreSource(e *env) (runtime.Store, []runtime.StateSpec) {
	s := e.newStore(runtime.StoreConfig{})
	var specs []runtime.StateSpec
	for _, kind := range kinds {
		for _, sub := range keyedAndSubKeyed {
			spec := specFor("restore", kind, sub)
			specs = append(specs, spec)
			st := register(s, spec)
			for i := uint32(0); i < 64; i++ {
				ns, _ := twoNamespaces(sub)
				write(st, u32(i, ns), fmt.Sprintf("v%d", i))
				if kind == runtime.KindList {
					write(st, u32(i, ns), "second")
				}
			}
		}
	}
	empty := runtime.StateSpec{Name: "restore.empty", Kind: runtime.KindValue, Fingerprint: "empty"}
	register(s, empty)
	return s, append(specs, empty)
}

// restoreCount returns s's count of Restores, and whether it keeps one.
func restoreCount(s runtime.Store) (uint64, bool) {
	if c, ok := s.(runtime.RestoreCounter); ok {
		return c.Restores()
	}
	return 0, false
}

func checkRestore(e *env) {
	src, _ := restoreSource(e)
	want := dumpStore(src)
	snap, err := src.Snapshot()
	must(err, "Snapshot")
	v := e.codec(snap)
	must(snap.Release(), "Release")
	defer releaseView(v)

	// Into a fresh store. A store that counts its Restores
	// (runtime.RestoreCounter) counts this one: timers trust the count.
	dst := e.newStore(runtime.StoreConfig{})
	n0, counted := restoreCount(dst)
	must(dst.Restore(v), "Restore into a fresh store")
	if n1, _ := restoreCount(dst); counted && n1 == n0 {
		fail("the store counts its Restores (runtime.RestoreCounter), but its count stayed %d across a Restore", n0)
	}
	expectEq("States() after Restore", src.States(), dst.States())
	expectEq("content after Restore", want, dumpStore(dst))
	// The restored states can be registered again and used.
	st := register(dst, specFor("restore", runtime.KindValue, false))
	if got, ok := getValue(st, u32(5, nil)); !ok || got != "v5" {
		fail("restored value state: Get = (%q, %v), want (\"v5\", true)", got, ok)
	}
	putValue(st, u32(5, nil), []byte("changed"))
	if got, _ := getValue(st, u32(5, nil)); got != "changed" {
		fail("restored value state: Get after Put = %q", got)
	}

	// Into a store that registered some states already, identically.
	pre := e.newStore(runtime.StoreConfig{})
	register(pre, specFor("restore", runtime.KindList, true))
	register(pre, runtime.StateSpec{Name: "restore.empty", Kind: runtime.KindValue, Fingerprint: "empty"})
	must(pre.Restore(v), "Restore into a store with identical registrations")
	expectEq("content after Restore into a store with registrations", want, dumpStore(pre))

	// Into a store that owns part of the key groups: only those are loaded.
	part := runtime.KeyGroupRange{Start: 0, End: 64}
	half := e.newStore(runtime.StoreConfig{MaxParallelism: mp, KeyGroups: part})
	must(half.Restore(v), "Restore into a store owning %v", part)
	expectEq(fmt.Sprintf("content after Restore into a store owning %v", part), want.Restrict(part), dumpStore(half))
	out := keyInGroups(mp, part, true)
	hst := register(half, specFor("restore", runtime.KindValue, false))
	_, _, err = hst.(runtime.ValueState).Get(key(out, nil))
	wantErr(err, runtime.ErrKeyGroupNotOwned, "Get of a key outside the range after Restore")

	// Into a store that owns key groups the source does not: states are
	// registered, nothing is loaded, and the store's own entries stay.
	upperRange := runtime.KeyGroupRange{Start: 64, End: mp}
	srcHalf := e.newStore(runtime.StoreConfig{MaxParallelism: mp, KeyGroups: part})
	must(srcHalf.Restore(v), "Restore")
	halfSnap, err := srcHalf.Snapshot()
	must(err, "Snapshot")
	hv := e.codec(halfSnap)
	must(halfSnap.Release(), "Release")
	defer releaseView(hv)
	other := e.newStore(runtime.StoreConfig{MaxParallelism: mp, KeyGroups: upperRange})
	ospec := specFor("restore", runtime.KindValue, false)
	okey := keyInGroups(mp, upperRange, false)
	putValue(register(other, ospec), key(okey, nil), []byte("own"))
	must(other.Restore(hv), "Restore of a snapshot of disjoint key groups")
	expectEq("States() after Restore of disjoint key groups", src.States(), other.States())
	expectEq("content after Restore of disjoint key groups",
		expectContents(mp, upperRange, src.States(), namedRecord{ospec.Name, Record{Key: string(okey), Value: "own"}}),
		dumpStore(other))

	// Two halves restored one after the other make the whole (rescaling).
	// Keys of the second half read as absent between the two Restores are
	// found after the second: a store that remembers its reads forgets
	// them at a Restore.
	whole := e.newStore(runtime.StoreConfig{})
	must(whole.Restore(hv), "Restore of the first half")
	upper := e.newStore(runtime.StoreConfig{MaxParallelism: mp, KeyGroups: runtime.KeyGroupRange{Start: 64, End: mp}})
	must(upper.Restore(v), "Restore")
	upperSnap, err := upper.Snapshot()
	must(err, "Snapshot")
	uv := e.codec(upperSnap)
	must(upperSnap.Release(), "Release")
	defer releaseView(uv)
	wv := register(whole, specFor("restore", runtime.KindValue, false)).(runtime.ValueState)
	wm := register(whole, specFor("restore", runtime.KindMap, false)).(runtime.MapState)
	var later []uint32 // keys of the second half
	for i := uint32(0); i < 64 && len(later) < 3; i++ {
		if k := u32(i, nil); k.Group() >= 64 {
			later = append(later, i)
		}
	}
	if len(later) == 0 {
		fail("no key of the restore source lies in key groups [64, %d)", mp)
	}
	for _, i := range later {
		if got, ok := getValue(wv, u32(i, nil)); ok {
			fail("Get of key %d before the Restore of its key group = %q, want absent", i, got)
		}
		if _, ok, err := wm.Get(u32(i, nil), encString("u")); err != nil || ok {
			fail("map Get of key %d before the Restore of its key group = (%v, %v), want absent", i, ok, err)
		}
	}
	must(whole.Restore(uv), "Restore of the second half")
	slices.Reverse(later) // the key read last first
	for _, i := range later {
		val := fmt.Sprintf("v%d", i)
		if got, ok := getValue(wv, u32(i, nil)); !ok || got != val {
			fail("Get of key %d, read as absent before the Restore of its key group, = (%q, %v) after it, want (%q, true)", i, got, ok, val)
		}
		if got, ok, err := wm.Get(u32(i, nil), encString("u")); err != nil || !ok || string(got) != val {
			fail("map Get of key %d, read as absent before the Restore of its key group, = (%q, %v, %v) after it, want (%q, true)", i, got, ok, err, val)
		}
	}
	expectEq("content after restoring two halves", want, dumpStore(whole))

	// An empty store's snapshot restores nothing.
	empty := e.newStore(runtime.StoreConfig{})
	es, err := empty.Snapshot()
	must(err, "Snapshot")
	ev := e.codec(es)
	must(es.Release(), "Release")
	defer releaseView(ev)
	fresh := e.newStore(runtime.StoreConfig{})
	must(fresh.Restore(ev), "Restore of an empty snapshot")
	if got := fresh.States(); len(got) != 0 {
		fail("States() = %v after Restore of an empty snapshot", got)
	}
}

func checkRestoreErrors(e *env) {
	src, _ := restoreSource(e)
	snap, err := src.Snapshot()
	must(err, "Snapshot")
	v := e.codec(snap)
	must(snap.Release(), "Release")
	defer releaseView(v)

	// Another maxParallelism.
	for _, p := range []int{mp / 2, mp * 2, 1} {
		dst := e.newStore(runtime.StoreConfig{MaxParallelism: p})
		wantErr(dst.Restore(v), runtime.ErrMaxParallelismMismatch,
			fmt.Sprintf("Restore of a snapshot with maxParallelism %d into a store with %d", mp, p))
	}

	// A state registered with another spec.
	for _, other := range []runtime.StateSpec{
		{Name: "restore.value", Kind: runtime.KindList},
		{Name: "restore.value", Kind: runtime.KindValue, SubKeyed: true, Fingerprint: "fp:value"},
		{Name: "restore.value", Kind: runtime.KindValue, Fingerprint: "fp:other"},
		{Name: "restore.empty", Kind: runtime.KindValue, Fingerprint: "other"},
	} {
		dst := e.newStore(runtime.StoreConfig{})
		register(dst, other)
		wantErr(dst.Restore(v), runtime.ErrStateMismatch,
			fmt.Sprintf("Restore into a store where %v is registered", other), other.Name)
	}

	// A key group that already holds entries of a restored state: the same
	// key, and another key of the same key group.
	spec := specFor("restore", runtime.KindMap, true)
	ns, _ := twoNamespaces(true)
	existing := u32(3, ns)
	dst := e.newStore(runtime.StoreConfig{})
	write(register(dst, spec), existing, "already here")
	wantErr(dst.Restore(v), runtime.ErrRestoreConflict, "Restore into a key group that holds entries of the state", spec.Name)

	sameGroup := keyInGroups(mp, runtime.KeyGroupRange{Start: existing.Group(), End: existing.Group() + 1}, false)
	dst = e.newStore(runtime.StoreConfig{})
	write(register(dst, spec), key(sameGroup, ns), "already here")
	wantErr(dst.Restore(v), runtime.ErrRestoreConflict, "Restore into a key group that holds entries of the state", spec.Name)

	// Restoring the same snapshot twice conflicts too.
	dst = e.newStore(runtime.StoreConfig{})
	must(dst.Restore(v), "Restore")
	wantErr(dst.Restore(v), runtime.ErrRestoreConflict, "a second Restore of the same snapshot")

	// A released snapshot cannot be restored.
	rel, err := src.Snapshot()
	must(err, "Snapshot")
	must(rel.Release(), "Release")
	dst = e.newStore(runtime.StoreConfig{})
	if err := dst.Restore(rel); err == nil {
		fail("Restore of a released snapshot succeeded")
	}
}

// badView is a View whose States lie: as returned by states.
type badView struct {
	runtime.View
	states []runtime.StateSpec
}

func (v badView) States() []runtime.StateSpec { return v.states }

// checkRestoreBadViews: a nil View, and a View that lists a state twice or
// not in name order, are refused before anything is loaded, with the
// errors of package runtime/storekit — never a panic, never a partial
// restore.
func checkRestoreBadViews(e *env) {
	src, specs := restoreSource(e)
	snap, err := src.Snapshot()
	must(err, "Snapshot")
	v := e.codec(snap)
	must(snap.Release(), "Release")
	defer releaseView(v)

	dst := e.newStore(runtime.StoreConfig{})
	wantErr(dst.Restore(nil), runtime.ErrInvalidView, "Restore(nil)")
	all := v.States()
	twice := append(slices.Clone(all[:2]), all[1:]...)
	wantErr(dst.Restore(badView{v, twice}), runtime.ErrCorrupt, "Restore of a View that lists a state twice", all[1].Name)
	unsorted := slices.Clone(all)
	unsorted[0], unsorted[1] = unsorted[1], unsorted[0]
	wantErr(dst.Restore(badView{v, unsorted}), runtime.ErrInvalidView, "Restore of a View whose states are not sorted")
	if got := dumpStore(dst); len(got.States) != 0 {
		fail("refused Restores loaded %v", got.States)
	}
	if len(dst.States()) != 0 {
		fail("refused Restores registered states %v", dst.States())
	}
	// The store is still usable: the good View restores.
	must(dst.Restore(v), "Restore after refused ones")
	_ = specs
}

// checkWriteDuringIteration: a write from inside an iteration callback —
// to the state iterated, another state, a new state, or a Restore — fails
// with runtime.ErrWriteDuringIteration on every backend, and changes
// nothing; reads are allowed.
func checkWriteDuringIteration(e *env) {
	s := e.newStore(runtime.StoreConfig{})
	val := register(s, specFor("iter", runtime.KindValue, true)).(runtime.ValueState)
	list := register(s, specFor("iter", runtime.KindList, false)).(runtime.ListState)
	m := register(s, specFor("iter", runtime.KindSortedMap, false)).(runtime.SortedMapState)
	k := u32(1, nil)
	kns := u32(1, []byte("ns"))
	must(val.Put(kns, []byte("v")), "Put")
	must(list.Add(k, []byte("e")), "Add")
	must(m.Put(k, []byte("u"), []byte("v")), "Put")
	before := dumpStore(s)
	snap, err := s.Snapshot()
	must(err, "Snapshot")
	view := e.codec(snap)
	must(snap.Release(), "Release")
	defer releaseView(view)

	writes := []struct {
		name string
		do   func() error
	}{
		{"Value Put", func() error { return val.Put(kns, []byte("w")) }},
		{"Value Clear", func() error { return val.Clear(kns) }},
		{"List Add", func() error { return list.Add(k, []byte("f")) }},
		{"List Replace", func() error { return list.Replace(k, [][]byte{[]byte("g")}) }},
		{"Map Put", func() error { return m.Put(k, []byte("u2"), []byte("v")) }},
		{"Map Delete", func() error { return m.Delete(k, []byte("u")) }},
		{"DeleteAll", func() error { return val.DeleteAll(kns) }},
		{"Register", func() error { _, err := s.Register(specFor("iter.new", runtime.KindValue, false)); return err }},
		{"Restore", func() error { return s.Restore(view) }},
	}
	iterations := []struct {
		name string
		run  func(fn func()) error
	}{
		{"List Get", func(fn func()) error { return list.Get(k, func([]byte) bool { fn(); return true }) }},
		{"Map Iterate", func(fn func()) error { return m.Iterate(k, func(_, _ []byte) bool { fn(); return true }) }},
		{"SortedMap Range", func(fn func()) error {
			return m.Range(k, nil, nil, true, func(_, _ []byte) bool { fn(); return true })
		}},
		{"Namespaces", func(fn func()) error { return val.Namespaces(kns, func([]byte) bool { fn(); return true }) }},
	}
	for _, it := range iterations {
		for _, w := range writes {
			var got error
			called := false
			must(it.run(func() {
				called = true
				// A read is allowed.
				if _, _, err := m.Get(k, []byte("u")); err != nil {
					fail("%s: a read from inside the callback: %v", it.name, err)
				}
				got = w.do()
			}), "%s", it.name)
			if !called {
				fail("%s: the callback was not called", it.name)
			}
			wantErr(got, runtime.ErrWriteDuringIteration, fmt.Sprintf("%s from inside %s", w.name, it.name))
		}
	}
	if d := diff(before, dumpStore(s)); d != "" {
		fail("refused writes changed the store:\n%s", d)
	}
}

// checkCheckWrite: a state that is a runtime.WriteChecker (an optional
// interface) refuses in CheckWrite what a write of the same key would
// refuse, with the same error — a key group the store does not own, a
// namespace on a keyed state, a write from inside an iteration's callback,
// a closed store — accepts the rest, and changes nothing. Timers rely on
// it to skip the write of a timer they know exists.
func checkCheckWrite(e *env) {
	owned := runtime.KeyGroupRange{Start: 0, End: mp / 2}
	s := e.newStore(runtime.StoreConfig{MaxParallelism: mp, KeyGroups: owned})
	kIn := keyInGroups(mp, owned, false)
	kOut := keyInGroups(mp, owned, true)
	iter := register(s, specFor("checkwrite.iter", runtime.KindSortedMap, false)).(runtime.SortedMapState)
	ik := key(kIn, nil)
	must(iter.Put(ik, []byte("u"), []byte("v")), "Put")
	type checked struct {
		wc runtime.WriteChecker
		k  runtime.Key
		st runtime.State
	}
	var all []checked
	for _, kind := range kinds {
		for _, sub := range keyedAndSubKeyed {
			st := register(s, specFor("checkwrite", kind, sub))
			wc, ok := st.(runtime.WriteChecker)
			if !ok {
				continue
			}
			ns, _ := twoNamespaces(sub)
			in := key(kIn, ns)
			before := dumpStore(s)
			must(wc.CheckWrite(in), "%s.CheckWrite of an owned key", name(st))
			out := key(kOut, ns)
			wantErr(wc.CheckWrite(out), runtime.ErrKeyGroupNotOwned,
				fmt.Sprintf("%s.CheckWrite of a key in key group %d, outside %v", name(st), out.Group(), owned), name(st))
			if !sub {
				wantErr(wc.CheckWrite(key(kIn, encString("ns"))), runtime.ErrInvalidKey,
					fmt.Sprintf("%s.CheckWrite with a namespace on a keyed state", name(st)), name(st))
			}
			var inside error
			called := false
			must(iter.Range(ik, nil, nil, false, func(_, _ []byte) bool {
				called = true
				inside = wc.CheckWrite(in)
				return true
			}), "Range")
			if !called {
				fail("Range: the callback was not called")
			}
			wantErr(inside, runtime.ErrWriteDuringIteration, fmt.Sprintf("%s.CheckWrite from inside Range", name(st)), name(st))
			if d := diff(before, dumpStore(s)); d != "" {
				fail("%s.CheckWrite changed the store:\n%s", name(st), d)
			}
			// What it accepted, a write makes.
			write(st, in, "after CheckWrite")
			all = append(all, checked{wc, in, st})
		}
	}
	must(s.Close(), "Close")
	for _, c := range all {
		wantErr(c.wc.CheckWrite(c.k), runtime.ErrClosed, fmt.Sprintf("%s.CheckWrite after Close", name(c.st)), name(c.st))
	}
}

// checkCloseReleasesOperatorLists: the operator lists bound to a store
// (runtime.OperatorList) live until it is closed, and Close forgets them
// (runtime.ReleaseOperatorStates), so that a closed store is not kept in
// memory by its lists.
func checkCloseReleasesOperatorLists(e *env) {
	s := e.newStore(runtime.StoreConfig{})
	l, err := runtime.NewOperatorList(s, runtime.OperatorListDescriptor[int64]{Name: "offsets", Value: runtime.Int64Codec{}})
	must(err, "NewOperatorList")
	must(l.Add(1), "Add")
	if got := runtime.OperatorLists(s); len(got) != 1 {
		fail("an open store has operator lists %v, want the one bound", got)
	}
	must(s.Close(), "Close")
	if got := runtime.OperatorLists(s); len(got) != 0 {
		fail("a closed store still has operator lists %v: its Close must call runtime.ReleaseOperatorStates", got)
	}
}
