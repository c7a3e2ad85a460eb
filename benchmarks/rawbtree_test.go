package benchmarks

// The btree-raw baseline: tidwall/btree's BTreeG called directly, the
// plain way — the first 24 bytes of the item key inline, item key and value
// in one heap allocation per entry (the layout backends/btree had before it
// kept entries in arenas), one tree per state and key group — with the same
// encoded bytes: item keys of key group, framed key (the layout of package
// storekit; a keyed state has no namespace) and user key; lists as one
// item whose elements carry uvarint lengths, appended in place when
// capacity allows. btree against btree-raw is the cost of the backend
// itself and of its layout: the encoding and decoding are paid by both,
// the typed handles' call and iteration machinery, the Store contract's
// checks, the snapshot bookkeeping and the arena by the backend alone, the
// allocation per write and the collector's tracing of every entry by the
// baseline alone. Its snapshot is a Copy of every tree.

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/stategen/stategen/runtime"
	tb "github.com/tidwall/btree"
)

type rawItem struct {
	p0, p1, p2 uint64
	b          []byte
	kl         uint32
}

func rawLess(a, b rawItem) bool {
	if a.p0 != b.p0 {
		return a.p0 < b.p0
	}
	if a.p1 != b.p1 {
		return a.p1 < b.p1
	}
	if a.p2 != b.p2 {
		return a.p2 < b.p2
	}
	if a.kl <= 24 && b.kl <= 24 {
		return a.kl < b.kl
	}
	return bytes.Compare(a.b[:a.kl], b.b[:b.kl]) < 0
}

// rawMake returns the item of buf, whose first kl bytes are the item key.
func rawMake(buf []byte, kl int) rawItem {
	var pad [24]byte
	copy(pad[:], buf[:kl])
	return rawItem{
		p0: binary.BigEndian.Uint64(pad[:]), p1: binary.BigEndian.Uint64(pad[8:]), p2: binary.BigEndian.Uint64(pad[16:]),
		b: buf, kl: uint32(kl),
	}
}

func (it rawItem) value() []byte { return it.b[it.kl:] }

// rawNew copies item key ik and value v into a new item.
func rawNew(ik, v []byte) rawItem {
	buf := make([]byte, len(ik)+len(v))
	copy(buf, ik)
	copy(buf[len(ik):], v)
	return rawMake(buf, len(ik))
}

// rawState is one state: a tree per key group.
type rawState [runtime.DefaultMaxParallelism]*tb.BTreeG[rawItem]

func (s *rawState) tree(kg int) *tb.BTreeG[rawItem] {
	t := s[kg]
	if t == nil {
		t = tb.NewBTreeGOptions(rawLess, tb.Options{NoLocks: true})
		s[kg] = t
	}
	return t
}

// copy is the raw synchronous phase of a snapshot: a Copy of every
// non-empty tree.
func (s *rawState) copy() *rawState {
	c := new(rawState)
	for i, t := range s {
		if t != nil && t.Len() > 0 {
			c[i] = t.Copy()
		}
	}
	return c
}

type rawBtree struct {
	value, list, m, sorted *rawState

	ik     []byte // item key
	vb     []byte // encoded value
	lo, hi []byte // range bounds
}

func newRawBtree() *rawBtree {
	return &rawBtree{value: new(rawState), list: new(rawState), m: new(rawState), sorted: new(rawState)}
}

// key encodes k, hashes it once, and builds the item key of (k, no
// namespace) in r.ik, as the typed handles and the backend do.
func (r *rawBtree) key(s *rawState, k int64) (*tb.BTreeG[rawItem], []byte) {
	r.ik = append(r.ik[:0], 0, 0) // key group
	r.ik = int64Codec.AppendKey(r.ik, k)
	kg := runtime.KeyGroupOfHash(runtime.HashKey(r.ik[2:]), runtime.DefaultMaxParallelism)
	r.ik[0], r.ik[1] = byte(kg>>8), byte(kg)
	// The framing of an 8-byte key is the key and its marker, 8
	// (storekit's layout); a keyed state writes no namespace.
	r.ik = append(r.ik, 8)
	return s.tree(kg), r.ik
}

// mapKey is key followed by the encoded user key uk.
func (r *rawBtree) mapKey(s *rawState, k, uk int64) (*tb.BTreeG[rawItem], []byte) {
	t, ik := r.key(s, k)
	r.ik = int64Codec.AppendKey(ik, uk)
	return t, r.ik
}

func (r *rawBtree) lookup(t *tb.BTreeG[rawItem], ik []byte) (Val, bool, error) {
	it, ok := t.Get(rawMake(ik, len(ik)))
	if !ok {
		return Val{}, false, nil
	}
	v, _, err := valCodec{}.DecodeValue(it.value())
	return v, err == nil, err
}

func (r *rawBtree) set(t *tb.BTreeG[rawItem], ik []byte, v Val) {
	r.vb = valCodec{}.AppendValue(r.vb[:0], v)
	t.Set(rawNew(ik, r.vb))
}

func (r *rawBtree) getValue(k int64) (Val, bool, error) { return r.lookup(r.key(r.value, k)) }

func (r *rawBtree) putValue(k int64, v Val) error {
	t, ik := r.key(r.value, k)
	r.set(t, ik, v)
	return nil
}

// updateValue is a lookup and a Set, as the btree backend does.
func (r *rawBtree) updateValue(k int64, fn func(Val, bool) Val) error {
	t, ik := r.key(r.value, k)
	v, ok, err := r.lookup(t, ik)
	if err != nil {
		return err
	}
	r.set(t, ik, fn(v, ok))
	return nil
}

// addAllList appends vs to k's list, in place when its buffer has room.
func (r *rawBtree) addAllList(k int64, vs []Val) error {
	t, ik := r.key(r.list, k)
	var buf []byte
	if old, ok := t.Get(rawMake(ik, len(ik))); ok {
		buf = old.b
	} else {
		buf = append(make([]byte, 0, len(ik)+len(vs)*(len(vs[0].Pad)+25)), ik...)
	}
	t.Set(rawMake(r.appendElements(buf, vs), len(ik)))
	return nil
}

// appendElements appends the encodings of vs, each preceded by its length.
func (r *rawBtree) appendElements(buf []byte, vs []Val) []byte {
	for _, v := range vs {
		r.vb = valCodec{}.AppendValue(r.vb[:0], v)
		buf = binary.AppendUvarint(buf, uint64(len(r.vb)))
		buf = append(buf, r.vb...)
	}
	return buf
}

func (r *rawBtree) addList(k int64, v Val) error { return r.addAllList(k, []Val{v}) }

func (r *rawBtree) updateList(k int64, vs []Val) error {
	t, ik := r.key(r.list, k)
	buf := append(make([]byte, 0, len(ik)+len(vs)*(len(vs[0].Pad)+25)), ik...)
	t.Set(rawMake(r.appendElements(buf, vs), len(ik)))
	return nil
}

func (r *rawBtree) readList(k int64) (int, error) {
	t, ik := r.key(r.list, k)
	it, ok := t.Get(rawMake(ik, len(ik)))
	if !ok {
		return 0, nil
	}
	return decodeElements(it.value())
}

// decodeElements decodes a list of uvarint-length-prefixed elements and
// returns their number.
func decodeElements(l []byte) (int, error) {
	n := 0
	for ; len(l) > 0; n++ {
		size, w := binary.Uvarint(l)
		if w <= 0 || uint64(len(l)-w) < size {
			return n, fmt.Errorf("%w: list element %d", runtime.ErrCorrupt, n)
		}
		v, _, err := valCodec{}.DecodeValue(l[w : w+int(size)])
		if err != nil {
			return n, err
		}
		sink = v
		l = l[w+int(size):]
	}
	return n, nil
}

func (r *rawBtree) getMap(k, uk int64) (Val, bool, error) { return r.lookup(r.mapKey(r.m, k, uk)) }

func (r *rawBtree) putMap(k, uk int64, v Val) error {
	t, ik := r.mapKey(r.m, k, uk)
	r.set(t, ik, v)
	return nil
}

// updateMap is a lookup and a Set, as the btree backend does.
func (r *rawBtree) updateMap(k, uk int64, fn func(Val, bool) Val) error {
	t, ik := r.mapKey(r.m, k, uk)
	v, ok, err := r.lookup(t, ik)
	if err != nil {
		return err
	}
	r.set(t, ik, fn(v, ok))
	return nil
}

func (r *rawBtree) containsMap(k, uk int64) (bool, error) {
	t, ik := r.mapKey(r.m, k, uk)
	_, ok := t.Get(rawMake(ik, len(ik)))
	return ok, nil
}

func (r *rawBtree) deleteMap(k, uk int64) error {
	t, ik := r.mapKey(r.m, k, uk)
	t.Delete(rawMake(ik, len(ik)))
	return nil
}

func (r *rawBtree) readMap(k int64, part mapPart) (int, error) {
	return r.scanMap(r.m, k, 0, 0, true, part)
}

func (r *rawBtree) putSorted(k, uk int64, v Val) error {
	t, ik := r.mapKey(r.sorted, k, uk)
	r.set(t, ik, v)
	return nil
}

func (r *rawBtree) readRange(k, from, to int64) (int, error) {
	return r.scanMap(r.sorted, k, from, to, false, partEntries)
}

// scanMap decodes the entries of k's map whose user keys are in [from, to)
// (all of them if all), ascending, and returns their number.
func (r *rawBtree) scanMap(s *rawState, k, from, to int64, all bool, part mapPart) (int, error) {
	t, ik := r.key(s, k)
	pl := len(ik)
	r.lo = append(r.lo[:0], ik...)
	var hi []byte
	if !all {
		r.lo = int64Codec.AppendKey(r.lo, from)
		r.hi = int64Codec.AppendKey(append(r.hi[:0], ik...), to)
		hi = r.hi
	}
	it := t.Iter()
	defer it.Release()
	n := 0
	for ok := it.Seek(rawMake(r.lo, len(r.lo))); ok; ok = it.Next() {
		x := it.Item()
		key := x.b[:x.kl]
		if !bytes.HasPrefix(key, ik) || hi != nil && bytes.Compare(key, hi) >= 0 {
			break
		}
		if part != partValues {
			uk, _, err := int64Codec.DecodeKey(key[pl:])
			if err != nil {
				return n, err
			}
			sink.A = uk
		}
		if part != partKeys {
			v, _, err := valCodec{}.DecodeValue(x.value())
			if err != nil {
				return n, err
			}
			sink = v
		}
		n++
	}
	return n, nil
}

func (r *rawBtree) snapshot() (frozen, error) {
	return rawBtreeSnapshot{r.value.copy(), r.list.copy(), r.m.copy(), r.sorted.copy()}, nil
}

func (r *rawBtree) close() error { return nil }

type rawBtreeSnapshot [4]*rawState

// scan reads every item, as a snapshot scan does: the item key split into
// key, namespace and user key, a list item into its elements.
func (s rawBtreeSnapshot) scan() (entries, size int64, err error) {
	for i, st := range s {
		isList := i == 1
		for _, t := range st {
			if t == nil {
				continue
			}
			t.Scan(func(x rawItem) bool {
				ik := x.b[:x.kl]
				keyBytes := int64(len(ik) - 2 - 1) // key and user key: less the key group and the key's framing marker
				if !isList {
					entries++
					size += keyBytes + int64(len(x.value()))
					return true
				}
				for l := x.value(); len(l) > 0; {
					el, w3 := binary.Uvarint(l)
					entries++
					size += keyBytes + int64(el)
					l = l[w3+int(el):]
				}
				return true
			})
		}
	}
	return entries, size, nil
}

func (s rawBtreeSnapshot) release() error { return nil }
