package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/stategen/stategen/runtime"
)

// The key layout (see the package doc for the table). Every data key is
//
//	key group (2 bytes, big-endian) | state id (uvarint)
//	| len(key) (uvarint) | key | len(namespace) (uvarint) | namespace
//	| user key (Map and SortedMap only)
//
// so that a key group, a state within it, all namespaces of a key, one
// (key, namespace) — a value, a list or a whole map — and a SortedMap range
// are each one contiguous span of Pebble's keyspace. Metadata lives under
// metaPrefix, above every data key.

// groupLen is the length of the key-group prefix of every data key.
const groupLen = 2

// metaPrefix starts every metadata key. Key groups are below 1<<15, so the
// first byte of a data key is at most 0x7f and metadata sorts after all data.
const metaPrefix = 0xff

// Metadata keys.
var (
	metaConfigKey = []byte{metaPrefix, 'c'} // the store's layout version and StoreConfig
	metaStatePfx  = []byte{metaPrefix, 's'} // + uvarint id: the spec of state id
)

// layoutVersion is the version of the key layout and metadata encoding
// recorded in a working directory.
const layoutVersion = 1

// maxStates bounds the number of states of one store, and so the state ids.
const maxStates = 1 << 20

// appendGroup appends the two-byte big-endian key group kg (< 1<<15).
func appendGroup(dst []byte, kg int) []byte { return append(dst, byte(kg>>8), byte(kg)) }

// appendField appends b preceded by its length as a uvarint. A uvarint is a
// prefix-free code, so length-prefixed fields concatenate unambiguously.
func appendField(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// appendStatePrefix appends the prefix of every key of state id in key
// group kg.
func appendStatePrefix(dst []byte, kg int, id uint64) []byte {
	return binary.AppendUvarint(appendGroup(dst, kg), id)
}

// appendKeyPrefix appends the prefix of every key of (kg, id, key): all of
// the key's namespaces.
func appendKeyPrefix(dst []byte, kg int, id uint64, key []byte) []byte {
	return appendField(appendStatePrefix(dst, kg, id), key)
}

// appendEntryKey appends the key of (kg, id, key, ns): the whole key of a
// value or list, and the prefix of every entry of a map.
func appendEntryKey(dst []byte, kg int, id uint64, key, ns []byte) []byte {
	return appendField(appendKeyPrefix(dst, kg, id, key), ns)
}

// appendPrefixEnd appends the smallest byte string greater than every
// string with prefix p, and reports false if there is none (p is empty or
// all 0xff; never the case for data-key prefixes, whose first byte is below
// 0x80).
func appendPrefixEnd(dst, p []byte) ([]byte, bool) {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] != 0xff {
			dst = append(dst, p[:i+1]...)
			dst[len(dst)-1]++
			return dst, true
		}
	}
	return dst, false
}

// errBadKey reports a data key or list value the store did not write: a
// bug or a damaged working directory, reported as an error, never a panic.
var errBadKey = errors.New("malformed key or value in the working directory")

// readField splits a length-prefixed field off the front of b.
func readField(b []byte) (field, rest []byte, ok bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return nil, nil, false
	}
	end := w + int(n)
	return b[w:end:end], b[end:], true
}

// splitEntry splits the part of a data key after its state prefix into the
// key, the namespace and the user key (empty for values and lists). The
// slices alias k and are capped.
func splitEntry(k []byte) (key, ns, uk []byte, err error) {
	key, rest, ok := readField(k)
	if !ok {
		return nil, nil, nil, errBadKey
	}
	ns, uk, ok = readField(rest)
	if !ok {
		return nil, nil, nil, errBadKey
	}
	return key, ns, uk[:len(uk):len(uk)], nil
}

// List values. A list is stored under its entry key as the concatenation of
// its elements, each preceded by its length as a uvarint. Add writes the
// new elements, encoded the same way, as a Pebble merge operand, and the
// merge operator (listMerger) concatenates operands: a read folds them into
// one encoded list.

// appendElems appends the encoding of elems.
func appendElems(dst []byte, elems [][]byte) []byte {
	for _, e := range elems {
		dst = appendField(dst, e)
	}
	return dst
}

// eachElem calls fn with every element of an encoded list until fn returns
// false. It fails if list is malformed.
func eachElem(list []byte, fn func(elem []byte) bool) error {
	for len(list) > 0 {
		elem, rest, ok := readField(list)
		if !ok {
			return errBadKey
		}
		if !fn(elem) {
			return nil
		}
		list = rest
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

func encodeSpec(spec runtime.StateSpec) []byte {
	b := []byte{byte(spec.Kind), 0}
	if spec.SubKeyed {
		b[1] = 1
	}
	b = appendField(b, []byte(spec.Name))
	b = appendField(b, []byte(spec.Fingerprint))
	if spec.Schema != "" {
		// Directories written before schemas were recorded end after the
		// fingerprint; the schema is optional on read.
		b = appendField(b, []byte(spec.Schema))
	}
	return b
}

func decodeSpec(b []byte) (runtime.StateSpec, error) {
	bad := func(why string) (runtime.StateSpec, error) {
		return runtime.StateSpec{}, fmt.Errorf("%w: state metadata %x: %s", runtime.ErrCorrupt, b, why)
	}
	if len(b) < 2 || b[1] > 1 {
		return bad("bad header")
	}
	spec := runtime.StateSpec{Kind: runtime.Kind(b[0]), SubKeyed: b[1] == 1}
	name, rest, ok := readField(b[2:])
	if !ok {
		return bad("truncated name")
	}
	fp, rest, ok := readField(rest)
	if !ok || !utf8.Valid(fp) {
		return bad("bad fingerprint")
	}
	var schema []byte
	if len(rest) > 0 {
		if schema, rest, ok = readField(rest); !ok || len(rest) != 0 || !utf8.Valid(schema) {
			return bad("bad schema")
		}
	}
	spec.Name, spec.Fingerprint, spec.Schema = string(name), string(fp), string(schema)
	if err := spec.Validate(); err != nil {
		return runtime.StateSpec{}, fmt.Errorf("%w: %w", runtime.ErrCorrupt, err)
	}
	return spec, nil
}
