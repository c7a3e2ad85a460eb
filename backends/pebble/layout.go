package pebble

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storekit"
)

// The key layout (see the package doc for the table). Every data key is
//
//	key group (2 bytes, big-endian) | state id (uvarint)
//	| framed key | framed namespace (sub-keyed states only)
//	| user key (Map and SortedMap only)
//
// in package storekit's sorted key layout, which backends/btree shares, so
// that a key group, a state within it, all namespaces of a key, one (key,
// namespace) — a value, a list or a whole map — and a SortedMap range are
// each one contiguous span of Pebble's keyspace, and keys and namespaces
// sort in encoded order whatever their lengths. Metadata lives under
// metaPrefix, above every data key.

// metaPrefix starts every metadata key. Key groups are below 1<<15, so the
// first byte of a data key is at most 0x7f and metadata sorts after all data.
const metaPrefix = 0xff

// Metadata keys.
var (
	metaConfigKey = []byte{metaPrefix, 'c'} // the store's layout version and StoreConfig
	metaStatePfx  = []byte{metaPrefix, 's'} // + uvarint id: the spec of state id
)

// layoutVersion is the version of the key layout and metadata encoding
// recorded in a working directory. Version 1 (before storekit's framing)
// length-prefixed keys and namespaces, and stored runtime.Kind's numbering;
// this package refuses it (a working directory is rebuilt from a
// checkpoint, never migrated).
const layoutVersion = 2

// maxStates bounds the number of states of one store, and so the state ids.
const maxStates = 1 << 20

// appendStatePrefix appends the prefix of every key of state id in key
// group kg.
func appendStatePrefix(dst []byte, kg int, id uint64) []byte {
	return binary.AppendUvarint(storekit.AppendGroup(dst, kg), id)
}

// appendKeyPrefix appends the prefix of every key of (kg, id, key): all of
// the key's namespaces.
func appendKeyPrefix(dst []byte, kg int, id uint64, key []byte) []byte {
	return storekit.AppendKeyPrefix(appendStatePrefix(dst, kg, id), key)
}

// appendEntryKey appends the key of (kg, id, key, ns) in a state that is
// sub-keyed or not: the whole key of a value or list, and the prefix of
// every entry of a map.
func appendEntryKey(dst []byte, kg int, id uint64, key, ns []byte, subKeyed bool) []byte {
	return storekit.AppendEntry(appendStatePrefix(dst, kg, id), key, ns, subKeyed)
}

// errBadKey reports a data key or list value the store did not write: a
// bug or a damaged working directory, reported as an error, never a panic.
var errBadKey = fmt.Errorf("%w in the working directory", storekit.ErrBadLayout)

// splitEntry splits the part of a data key after its state prefix into the
// key, the namespace and the user key (empty for values and lists), as
// storekit.SplitEntry does (long fields are decoded into scratch).
func splitEntry(k []byte, subKeyed bool, scratch []byte) (key, ns, uk, scratchOut []byte, err error) {
	key, ns, uk, scratch, err = storekit.SplitEntry(k, subKeyed, scratch)
	if err != nil {
		return nil, nil, nil, scratch, errBadKey
	}
	return key, ns, uk, scratch, nil
}

// List values. A list is stored under its entry key as the concatenation of
// its elements, each preceded by its length as a uvarint (storekit's list
// encoding). Add writes the new elements, encoded the same way, as a Pebble
// merge operand, and the merge operator (listMerger) concatenates operands:
// a read folds them into one encoded list.

// appendElems appends the encoding of elems.
func appendElems(dst []byte, elems [][]byte) []byte {
	for _, e := range elems {
		dst = storekit.AppendElem(dst, e)
	}
	return dst
}

// eachElem calls fn with every element of an encoded list until fn returns
// false. It fails if list is malformed.
func eachElem(list []byte, fn func(elem []byte) bool) error {
	if storekit.EachElem(list, fn) != nil {
		return errBadKey
	}
	return nil
}

// Metadata encodings.

// storeMeta is what a working directory records about its store.
type storeMeta struct {
	version        uint64
	maxParallelism int
	groups         runtime.KeyGroupRange
}

func encodeStoreMeta(m storeMeta) []byte {
	b := binary.AppendUvarint(nil, m.version)
	b = binary.AppendUvarint(b, uint64(m.maxParallelism))
	b = binary.AppendUvarint(b, uint64(m.groups.Start))
	return binary.AppendUvarint(b, uint64(m.groups.End))
}

func decodeStoreMeta(b []byte) (storeMeta, error) {
	var v [4]uint64
	for i := range v {
		x, w := binary.Uvarint(b)
		if w <= 0 || x > 1<<32 {
			return storeMeta{}, fmt.Errorf("%w: store metadata %x", runtime.ErrCorrupt, b)
		}
		v[i], b = x, b[w:]
	}
	if len(b) != 0 {
		return storeMeta{}, fmt.Errorf("%w: %d bytes after the store metadata", runtime.ErrCorrupt, len(b))
	}
	return storeMeta{version: v[0], maxParallelism: int(v[1]), groups: runtime.KeyGroupRange{Start: int(v[2]), End: int(v[3])}}, nil
}

func stateMetaKey(id uint64) []byte {
	return binary.AppendUvarint(append([]byte(nil), metaStatePfx...), id)
}

// The flags of an encoded spec, its second byte. A spec with specTTL has
// its TTL in milliseconds, a uvarint, after the flags.
const (
	specSubKeyed = 1 << 0
	specTTL      = 1 << 1
)

func encodeSpec(spec runtime.StateSpec) []byte {
	b := []byte{storekit.KindCode(spec.Kind), 0}
	if spec.SubKeyed {
		b[1] |= specSubKeyed
	}
	if spec.TTL != 0 {
		b[1] |= specTTL
		b = binary.AppendUvarint(b, uint64(spec.TTL.Milliseconds()))
	}
	b = storekit.AppendElem(b, []byte(spec.Name))
	b = storekit.AppendElem(b, []byte(spec.Fingerprint))
	if spec.Schema != "" {
		// The schema is optional: a hand-written descriptor may have none.
		b = storekit.AppendElem(b, []byte(spec.Schema))
	}
	return b
}

func decodeSpec(b []byte) (runtime.StateSpec, error) {
	bad := func(why string) (runtime.StateSpec, error) {
		return runtime.StateSpec{}, fmt.Errorf("%w: state metadata %x: %s", runtime.ErrCorrupt, b, why)
	}
	if len(b) < 2 || b[1]&^(specSubKeyed|specTTL) != 0 {
		return bad("bad header")
	}
	spec := runtime.StateSpec{Kind: storekit.KindOfCode(b[0]), SubKeyed: b[1]&specSubKeyed != 0}
	rest := b[2:]
	if b[1]&specTTL != 0 {
		ms, n := binary.Uvarint(rest)
		if n <= 0 || ms == 0 || ms > math.MaxInt64/uint64(time.Millisecond) {
			return bad("bad TTL")
		}
		spec.TTL, rest = time.Duration(ms)*time.Millisecond, rest[n:]
	}
	name, rest, ok := storekit.ReadElem(rest)
	if !ok {
		return bad("truncated name")
	}
	fp, rest, ok := storekit.ReadElem(rest)
	if !ok || !utf8.Valid(fp) {
		return bad("bad fingerprint")
	}
	var schema []byte
	if len(rest) > 0 {
		if schema, rest, ok = storekit.ReadElem(rest); !ok || len(rest) != 0 || !utf8.Valid(schema) {
			return bad("bad schema")
		}
	}
	spec.Name, spec.Fingerprint, spec.Schema = string(name), string(fp), string(schema)
	if err := spec.Validate(); err != nil {
		return runtime.StateSpec{}, fmt.Errorf("%w: %w", runtime.ErrCorrupt, err)
	}
	return spec, nil
}
