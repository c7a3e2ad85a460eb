package pebble

// BenchmarkListLayout measures the two list representations this package
// could use, on raw Pebble with the store's options and key layout, so that
// the choice in the package doc can be reproduced:
//
//   - layout=merge: one key per list; Add writes the new element as a merge
//     operand (a blind write) and Get is one point read that folds the
//     operands (what the store does);
//   - layout=perelem: one key per element, the entry key followed by an
//     8-byte sequence number; Add must find the list's last sequence number
//     (a reverse seek) before its Set, and Get is a bounded iteration.
//
// op=add appends to the lists of random keys of an empty database; op=get
// reads a whole 4-element list of a random key.
//
//	go test -run='^$' -bench=ListLayout -count=6 ./backends/pebble | benchstat -col /layout -

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/stategen/stategen/runtime/storekit"
)

const benchListLen = 4

type listLayout interface {
	add(key, elem []byte) error
	get(key []byte, fn func([]byte)) (int, error)
}

type mergeLists struct {
	db  *pebbledb.DB
	buf []byte
}

func (m *mergeLists) add(key, elem []byte) error {
	m.buf = storekit.AppendElem(m.buf[:0], elem)
	return m.db.Merge(key, m.buf, pebbledb.NoSync)
}

func (m *mergeLists) get(key []byte, fn func([]byte)) (int, error) {
	v, closer, err := m.db.Get(key)
	if errors.Is(err, pebbledb.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	n := 0
	err = eachElem(v, func(e []byte) bool { fn(e); n++; return true })
	return n, err
}

type perElemLists struct {
	db     *pebbledb.DB
	lo, hi []byte
}

func (p *perElemLists) bounds(key []byte) *pebbledb.IterOptions {
	p.lo = append(p.lo[:0], key...)
	p.hi, _ = storekit.AppendPrefixEnd(p.hi[:0], key)
	return &pebbledb.IterOptions{LowerBound: p.lo, UpperBound: p.hi}
}

func (p *perElemLists) add(key, elem []byte) error {
	it, err := p.db.NewIter(p.bounds(key))
	if err != nil {
		return err
	}
	var next uint64
	if it.Last() {
		k := it.Key()
		next = binary.BigEndian.Uint64(k[len(k)-8:]) + 1
	}
	if err := it.Close(); err != nil {
		return err
	}
	p.lo = binary.BigEndian.AppendUint64(append(p.lo[:0], key...), next)
	return p.db.Set(p.lo, elem, pebbledb.NoSync)
}

func (p *perElemLists) get(key []byte, fn func([]byte)) (int, error) {
	it, err := p.db.NewIter(p.bounds(key))
	if err != nil {
		return 0, err
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		fn(it.Value())
		n++
	}
	return n, it.Close()
}

func openBenchDB(b *testing.B) *pebbledb.DB {
	po, err := Options{}.PebbleOptions()
	if err != nil {
		b.Fatal(err)
	}
	db, err := pebbledb.Open(b.TempDir(), po)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

func newLayout(name string, db *pebbledb.DB) listLayout {
	if name == "merge" {
		return &mergeLists{db: db}
	}
	return &perElemLists{db: db}
}

// benchListKeys returns the entry keys of n lists of a keyed list state
// with id 0, in random order.
func benchListKeys(n int) [][]byte {
	keys := make([][]byte, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i, p := range r.Perm(n) {
		k := binary.BigEndian.AppendUint64(nil, uint64(p)^1<<63)
		keys[i] = appendEntryKey(nil, p%128, 0, k, nil, false)
	}
	return keys
}

func BenchmarkListLayout(b *testing.B) {
	n, name := 100_000, "100K"
	if testing.Short() {
		n, name = 10_000, "10K"
	}
	keys := benchListKeys(n)
	elem := make([]byte, 24)
	var sink int
	for _, layout := range []string{"merge", "perelem"} {
		b.Run(fmt.Sprintf("layout=%s/op=add/keys=%s", layout, name), func(b *testing.B) {
			l := newLayout(layout, openBenchDB(b))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				binary.LittleEndian.PutUint64(elem, uint64(i))
				if err := l.add(keys[i%n], elem); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("layout=%s/op=get/keys=%s", layout, name), func(b *testing.B) {
			l := newLayout(layout, openBenchDB(b))
			for j := range benchListLen {
				for _, k := range keys {
					binary.LittleEndian.PutUint64(elem, uint64(j))
					if err := l.add(k, elem); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c, err := l.get(keys[(i*7919)%n], func(e []byte) { sink += len(e) })
				if err != nil || c != benchListLen {
					b.Fatalf("list of %d elements, error %v", c, err)
				}
			}
		})
	}
	_ = sink
}
