package benchmarks

// The pebble-raw baseline: the Pebble calls of backends/pebble (Get, Set,
// Merge, Delete, bounded iterators, NewSnapshot) made directly, on the same
// encoded bytes — the backend's key layout (key group, state id,
// framed key, user key: package storekit's layout) and its list encoding
// (elements with uvarint lengths, added as merge operands) — in a database
// opened with the store's options (pebble.Options.PebbleOptions: block
// cache, memtables, merge operator, no write-ahead log), in a directory on
// the real disk. pebble against pebble-raw is the cost of the backend
// itself: the encoding and decoding are paid by both, the Store contract's
// checks, the copy of a Get's value and the snapshot bookkeeping by the
// backend alone. Before its first use, the baseline checks that its keys
// are the backend's: a value and a map entry written through a store are
// read back by raw Pebble.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	pebbledb "github.com/cockroachdb/pebble/v2"
	stpebble "github.com/stategen/stategen/backends/pebble"
	"github.com/stategen/stategen/runtime"
)

// The state ids of the raw layout: a store's states are numbered in the
// order they are registered, which openStoreTarget follows.
const (
	rawValueID = iota
	rawListID
	rawMapID
	rawSortedID
)

type rawPebble struct {
	db     *pebbledb.DB
	ik, vb []byte // Pebble key, encoded value
	lo, hi []byte // iteration bounds
}

var rawLayoutOnce = sync.OnceValue(checkRawPebbleLayout)

// openRawPebble opens a database in dir with the options of a default
// store.
func openRawPebble(dir string) (target, error) {
	if err := rawLayoutOnce(); err != nil {
		return nil, err
	}
	po, err := stpebble.Options{}.PebbleOptions()
	if err != nil {
		return nil, err
	}
	db, err := pebbledb.Open(dir, po)
	if err != nil {
		return nil, err
	}
	return &rawPebble{db: db}, nil
}

// key encodes k, hashes it once, and builds the Pebble key of (state id,
// k, no namespace) in r.ik, as the typed handles and the backend do.
func (r *rawPebble) key(id byte, k int64) []byte {
	r.ik = append(r.ik[:0], 0, 0, id) // key group, state id
	r.ik = int64Codec.AppendKey(r.ik, k)
	kg := runtime.KeyGroupOfHash(runtime.HashKey(r.ik[3:]), runtime.DefaultMaxParallelism)
	r.ik[0], r.ik[1] = byte(kg>>8), byte(kg)
	// The framing of an 8-byte key is the key and its marker, 8
	// (storekit's layout); a keyed state writes no namespace.
	r.ik = append(r.ik, 8)
	return r.ik
}

func (r *rawPebble) mapKey(id byte, k, uk int64) []byte {
	r.ik = int64Codec.AppendKey(r.key(id, k), uk)
	return r.ik
}

// get reads key and decodes its value with decode.
func (r *rawPebble) get(key []byte, decode func([]byte) error) (bool, error) {
	v, closer, err := r.db.Get(key)
	if errors.Is(err, pebbledb.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	err = decode(v)
	if cerr := closer.Close(); err == nil {
		err = cerr
	}
	return true, err
}

func (r *rawPebble) getVal(key []byte) (Val, bool, error) {
	var v Val
	ok, err := r.get(key, func(b []byte) (err error) {
		v, _, err = valCodec{}.DecodeValue(b)
		return err
	})
	return v, ok, err
}

func (r *rawPebble) set(key []byte, v Val) error {
	r.vb = valCodec{}.AppendValue(r.vb[:0], v)
	return r.db.Set(key, r.vb, pebbledb.NoSync)
}

func (r *rawPebble) getValue(k int64) (Val, bool, error) { return r.getVal(r.key(rawValueID, k)) }
func (r *rawPebble) putValue(k int64, v Val) error       { return r.set(r.key(rawValueID, k), v) }

// updateValue is a Get and a Set, as the pebble backend does.
func (r *rawPebble) updateValue(k int64, fn func(Val, bool) Val) error {
	key := r.key(rawValueID, k)
	v, ok, err := r.getVal(key)
	if err != nil {
		return err
	}
	return r.set(key, fn(v, ok))
}

// elements encodes vs as a list value or merge operand: each element
// preceded by its uvarint length.
func (r *rawPebble) elements(vs []Val) []byte {
	r.vb = r.vb[:0]
	for _, v := range vs {
		r.vb = binary.AppendUvarint(r.vb, uint64(24+len(v.Pad)))
		r.vb = valCodec{}.AppendValue(r.vb, v)
	}
	return r.vb
}

func (r *rawPebble) addList(k int64, v Val) error { return r.addAllList(k, []Val{v}) }

func (r *rawPebble) addAllList(k int64, vs []Val) error {
	return r.db.Merge(r.key(rawListID, k), r.elements(vs), pebbledb.NoSync)
}

func (r *rawPebble) updateList(k int64, vs []Val) error {
	return r.db.Set(r.key(rawListID, k), r.elements(vs), pebbledb.NoSync)
}

func (r *rawPebble) readList(k int64) (int, error) {
	n := 0
	_, err := r.get(r.key(rawListID, k), func(l []byte) (err error) {
		n, err = decodeElements(l)
		return err
	})
	return n, err
}

func (r *rawPebble) getMap(k, uk int64) (Val, bool, error) {
	return r.getVal(r.mapKey(rawMapID, k, uk))
}

func (r *rawPebble) putMap(k, uk int64, v Val) error { return r.set(r.mapKey(rawMapID, k, uk), v) }

// updateMap is a Get and a Set, as the pebble backend does.
func (r *rawPebble) updateMap(k, uk int64, fn func(Val, bool) Val) error {
	key := r.mapKey(rawMapID, k, uk)
	v, ok, err := r.getVal(key)
	if err != nil {
		return err
	}
	return r.set(key, fn(v, ok))
}

func (r *rawPebble) containsMap(k, uk int64) (bool, error) {
	return r.get(r.mapKey(rawMapID, k, uk), func([]byte) error { return nil })
}

func (r *rawPebble) deleteMap(k, uk int64) error {
	return r.db.Delete(r.mapKey(rawMapID, k, uk), pebbledb.NoSync)
}

func (r *rawPebble) putSorted(k, uk int64, v Val) error {
	return r.set(r.mapKey(rawSortedID, k, uk), v)
}

func (r *rawPebble) readMap(k int64, part mapPart) (int, error) {
	return r.scanMap(rawMapID, k, 0, 0, true, part)
}

func (r *rawPebble) readRange(k, from, to int64) (int, error) {
	return r.scanMap(rawSortedID, k, from, to, false, partEntries)
}

// scanMap decodes the entries of k's map whose user keys are in [from, to)
// (all of them if all), ascending, and returns their number: one bounded
// iterator over the span.
func (r *rawPebble) scanMap(id byte, k, from, to int64, all bool, part mapPart) (int, error) {
	ik := r.key(id, k)
	pl := len(ik)
	r.lo = append(r.lo[:0], ik...)
	if all {
		r.hi = append(r.hi[:0], ik...)
		r.hi[len(r.hi)-1]++ // the namespace length byte: the end of the map's span
	} else {
		r.lo = int64Codec.AppendKey(r.lo, from)
		r.hi = int64Codec.AppendKey(append(r.hi[:0], ik...), to)
	}
	it, err := r.db.NewIter(&pebbledb.IterOptions{LowerBound: r.lo, UpperBound: r.hi})
	if err != nil {
		return 0, err
	}
	n := 0
	for ok := it.First(); ok && err == nil; ok = it.Next() {
		if part != partValues {
			var uk int64
			uk, _, err = int64Codec.DecodeKey(it.Key()[pl:])
			sink.A = uk
		}
		if part != partKeys && err == nil {
			var v []byte
			if v, err = it.ValueAndErr(); err == nil {
				sink, _, err = valCodec{}.DecodeValue(v)
			}
		}
		n++
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	return n, err
}

func (r *rawPebble) snapshot() (frozen, error) { return rawPebbleSnapshot{r.db.NewSnapshot()}, nil }
func (r *rawPebble) close() error              { return r.db.Close() }

type rawPebbleSnapshot struct{ *pebbledb.Snapshot }

// scan reads every key group with one bounded iterator, splitting each
// key into state, key, namespace and user key and each list into its
// elements, as a snapshot scan does.
func (s rawPebbleSnapshot) scan() (entries, size int64, err error) {
	for kg := range runtime.DefaultMaxParallelism {
		lo := []byte{byte(kg >> 8), byte(kg)}
		hi := []byte{byte((kg + 1) >> 8), byte(kg + 1)}
		it, err := s.NewIter(&pebbledb.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return entries, size, err
		}
		for ok := it.First(); ok; ok = it.Next() {
			key := it.Key()
			_, w := binary.Uvarint(key[2:])         // state id
			keyBytes := int64(len(key) - 2 - w - 1) // less the key's framing marker
			v, err := it.ValueAndErr()
			if err != nil {
				it.Close()
				return entries, size, err
			}
			if key[2] != rawListID {
				entries++
				size += keyBytes + int64(len(v))
				continue
			}
			for len(v) > 0 {
				el, w := binary.Uvarint(v)
				entries++
				size += keyBytes + int64(el)
				v = v[w+int(el):]
			}
		}
		if err := it.Close(); err != nil {
			return entries, size, err
		}
	}
	return entries, size, nil
}

func (s rawPebbleSnapshot) release() error { return s.Close() }

// checkRawPebbleLayout proves that rawPebble's keys are the backend's: a
// value and a map entry written through a store are found by raw Pebble
// under its keys after the store is closed.
func checkRawPebbleLayout() error {
	tmp, err := os.MkdirTemp("", "stategen-bench-layout")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "store")
	t, err := openStoreTarget(storeBackend{"pebble", func(dir string, cfg runtime.StoreConfig) (runtime.Store, error) {
		return stpebble.New(stpebble.Options{StoreConfig: cfg, Dir: dir})
	}}, dir)
	if err != nil {
		return err
	}
	want := Val{A: 42, B: 43, C: 44}
	err = errors.Join(t.putValue(42, want), t.putMap(7, 9, want), t.addList(5, want))
	if err = errors.Join(err, t.close()); err != nil {
		return err
	}
	po, err := stpebble.Options{}.PebbleOptions()
	if err != nil {
		return err
	}
	db, err := pebbledb.Open(dir, po)
	if err != nil {
		return err
	}
	r := &rawPebble{db: db}
	v, ok, err1 := r.getValue(42)
	m, mok, err2 := r.getMap(7, 9)
	n, err3 := r.readList(5)
	if err := errors.Join(err1, err2, err3, db.Close()); err != nil {
		return err
	}
	if !ok || v.A != want.A || !mok || m.C != want.C || n != 1 {
		return fmt.Errorf("raw Pebble reads value (%v, %v), map entry (%v, %v) and a list of %d elements under its keys, want %v, %v and 1: the pebble-raw baseline's layout is not backends/pebble's",
			v, ok, m, mok, n, want, want)
	}
	return nil
}
