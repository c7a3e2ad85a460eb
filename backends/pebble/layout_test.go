package pebble

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storekit"
)

// TestKeyLayout pins the key layout of the package doc, byte for byte: a
// change here is a change of the working-directory format (layoutVersion).
func TestKeyLayout(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		// A keyed value: key group, state id, the framed key (one group:
		// the key padded to 8 bytes, then the marker 2, its length); no
		// namespace.
		{"value, keyed", appendEntryKey(nil, 0x0102, 3, []byte("k1"), nil, false), "0102" + "03" + "6b31000000000000" + "02"},
		// A sub-keyed list: the framed namespace follows the key.
		{"list, sub-keyed", appendEntryKey(nil, 127, 200, []byte("k"), []byte("ns"), true), "007f" + "c801" + "6b00000000000000" + "01" + "6e73000000000000" + "02"},
		// A key of 8 bytes fills its group (marker 8); of 9, it continues
		// (marker 9) into a second group.
		{"8-byte key", appendEntryKey(nil, 1, 0, []byte("12345678"), nil, false), "0001" + "00" + "3132333435363738" + "08"},
		{"9-byte key", appendEntryKey(nil, 1, 0, []byte("123456789"), nil, false), "0001" + "00" + "3132333435363738" + "09" + "3900000000000000" + "01"},
		// A map entry: the user key follows, unframed.
		{"map entry", append(appendEntryKey(nil, 5, 0, []byte{}, []byte{}, true), "uk"...), "0005" + "00" + "0000000000000000" + "00" + "0000000000000000" + "00" + "756b"},
		{"key prefix (all namespaces)", appendKeyPrefix(nil, 5, 1, []byte("k")), "0005" + "01" + "6b00000000000000" + "01"},
		{"state prefix (a key group of a state)", appendStatePrefix(nil, 32767, 0), "7fff" + "00"},
		{"store metadata", metaConfigKey, "ff63"},
		{"state metadata", stateMetaKey(129), "ff73" + "8101"},
		{"store metadata value", encodeStoreMeta(storeMeta{version: layoutVersion, maxParallelism: 128, groups: runtime.KeyGroupRange{Start: 0, End: 64}}), "02" + "8001" + "00" + "40"},
		// A state's spec: the kind code (storekit's, not runtime.Kind's
		// numbering), sub-keyed, then the length-prefixed name,
		// fingerprint and schema.
		{"spec of a value", encodeSpec(runtime.StateSpec{Name: "a", Kind: runtime.KindValue}), "01" + "00" + "0161" + "00"},
		{"spec of a list", encodeSpec(runtime.StateSpec{Name: "l", Kind: runtime.KindList, SubKeyed: true, Fingerprint: "f"}), "02" + "01" + "016c" + "0166"},
		{"spec of a map", encodeSpec(runtime.StateSpec{Name: "m", Kind: runtime.KindMap, Schema: "s"}), "03" + "00" + "016d" + "00" + "0173"},
		{"spec of a sorted map", encodeSpec(runtime.StateSpec{Name: "s", Kind: runtime.KindSortedMap}), "04" + "00" + "0173" + "00"},
	} {
		if got := hex.EncodeToString(tc.got); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestSpansAreContiguous checks the property the layout exists for: every
// key of a (key, namespace)'s map, of a key's namespaces, of a state in a
// key group lies in the span [prefix, prefixEnd), and no other key does,
// even for keys and namespaces that are prefixes of one another.
func TestSpansAreContiguous(t *testing.T) {
	keys := [][]byte{{}, {0}, {0, 0}, {0xff}, []byte("ab")}
	type entry struct {
		kg      int
		id      uint64
		key, ns []byte
		full    []byte
	}
	var entries []entry
	for _, kg := range []int{0, 256} {
		for _, id := range []uint64{0, 128} {
			for _, k := range keys {
				for _, ns := range keys {
					for _, uk := range keys {
						full := append(appendEntryKey(nil, kg, id, k, ns, true), uk...)
						entries = append(entries, entry{kg: kg, id: id, key: k, ns: ns, full: full})
					}
				}
			}
		}
	}
	in := func(k, p []byte) bool {
		end, ok := storekit.AppendPrefixEnd(nil, p)
		return ok && bytes.Compare(k, p) >= 0 && bytes.Compare(k, end) < 0
	}
	for _, e := range entries {
		for _, span := range []struct {
			name   string
			prefix []byte
			member func(o entry) bool
		}{
			{"state in key group", appendStatePrefix(nil, e.kg, e.id), func(o entry) bool { return o.kg == e.kg && o.id == e.id }},
			{"key's namespaces", appendKeyPrefix(nil, e.kg, e.id, e.key), func(o entry) bool {
				return o.kg == e.kg && o.id == e.id && bytes.Equal(o.key, e.key)
			}},
			{"(key, namespace)", appendEntryKey(nil, e.kg, e.id, e.key, e.ns, true), func(o entry) bool {
				return o.kg == e.kg && o.id == e.id && bytes.Equal(o.key, e.key) && bytes.Equal(o.ns, e.ns)
			}},
		} {
			for _, o := range entries {
				if got, want := in(o.full, span.prefix), span.member(o); got != want {
					t.Fatalf("%s span of %x: entry %x (kg %d, id %d, key %x, ns %x): in span %v, want %v",
						span.name, span.prefix, o.full, o.kg, o.id, o.key, o.ns, got, want)
				}
			}
		}
	}
	// Every data key splits back into its parts.
	for _, e := range entries {
		p := appendStatePrefix(nil, e.kg, e.id)
		k, ns, _, _, err := splitEntry(e.full[len(p):], true, nil)
		if err != nil || !bytes.Equal(k, e.key) || !bytes.Equal(ns, e.ns) {
			t.Fatalf("splitEntry(%x) = %x, %x, %v", e.full, k, ns, err)
		}
	}
}

func TestSpecRoundTrip(t *testing.T) {
	for _, spec := range []runtime.StateSpec{
		{Name: "a", Kind: runtime.KindValue},
		{Name: "window.sessions", Kind: runtime.KindSortedMap, SubKeyed: true, Fingerprint: "struct{a int64}"},
	} {
		got, err := decodeSpec(encodeSpec(spec))
		if err != nil || !got.Equal(spec) {
			t.Fatalf("decodeSpec(encodeSpec(%v)) = %v, %v", spec, got, err)
		}
	}
	for _, bad := range []string{"", "01", "0102", "010001", "0100016100ff", "0500016100"} {
		b, _ := hex.DecodeString(bad)
		if _, err := decodeSpec(b); err == nil {
			t.Errorf("decodeSpec(%s) succeeded", bad)
		}
	}
}

func TestListMergerIsAssociative(t *testing.T) {
	ops := [][]byte{appendElems(nil, [][]byte{[]byte("a")}), appendElems(nil, [][]byte{[]byte("bc"), {}}), appendElems(nil, [][]byte{[]byte("d")})}
	want := bytes.Join(ops, nil)
	// Newest first, as a read merges; oldest first, as a compaction may.
	m, _ := listMerge.Merge(nil, ops[2])
	_ = m.MergeOlder(ops[1])
	_ = m.MergeOlder(ops[0])
	got, _, _ := m.Finish(true)
	if !bytes.Equal(got, want) {
		t.Fatalf("MergeOlder: %x, want %x", got, want)
	}
	m, _ = listMerge.Merge(nil, ops[0])
	_ = m.MergeNewer(ops[1])
	_ = m.MergeNewer(ops[2])
	got, _, _ = m.Finish(true)
	if !bytes.Equal(got, want) {
		t.Fatalf("MergeNewer: %x, want %x", got, want)
	}
	var elems []string
	if err := eachElem(got, func(e []byte) bool { elems = append(elems, string(e)); return true }); err != nil {
		t.Fatal(err)
	}
	if len(elems) != 4 || elems[0] != "a" || elems[1] != "bc" || elems[2] != "" || elems[3] != "d" {
		t.Fatalf("elements %q", elems)
	}
	if err := eachElem([]byte{5, 'a'}, func([]byte) bool { return true }); err == nil {
		t.Fatal("a truncated list decodes")
	}
}
