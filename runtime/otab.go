package runtime

// otab is the hash table of one key group of a table of Go values: open
// addressing with linear probing over one slice of slots, each holding the
// key's HashKey, the key and the value side by side.
//
// Why not a Go map: the handle has hashed the key already (XXH64 of its
// encoding picks the key group), and a slot that holds that hash, the key
// and the value is found with one probe into one slice — at a million
// keys, one cache miss, where a Go map would hash the key again and read
// its control word and then the slot, two dependent misses. The hash
// stored in the slot also settles almost every mismatch without reading
// the key (a string key's bytes live elsewhere). A snapshot's copy is a
// copy of the slice.
//
// A slot's h is the key's hash with its lowest bit set, so that no stored
// h is zero, the mark of an empty slot. The home slot of a key is the top
// bits of its hash — the key group is the hash's remainder, which all the
// keys of one table share. Deletion shifts the following slots of the
// probe sequence back, so that no tombstone lengthens a probe: every key
// stays between its home and the first empty slot after it.
type otab[K comparable, V any] struct {
	slots []oslot[K, V] // len is 0 or a power of two
	shift uint8         // 64 - log2(len(slots))
	n     int           // slots in use
}

type oslot[K comparable, V any] struct {
	h uint64 // the key's HashKey | 1; 0 for an empty slot
	k K
	v V
}

// otabMinSlots is the size of a table's first slice.
const otabMinSlots = 8

func (t *otab[K, V]) home(h uint64) int { return int(h >> t.shift) }

// find returns the index of key's slot, or -1.
func (t *otab[K, V]) find(hash uint64, key K) int {
	if t.n == 0 {
		return -1
	}
	h := hash | 1
	mask := len(t.slots) - 1
	for i := t.home(h); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.h == h && s.k == key {
			return i
		}
		if s.h == 0 {
			return -1
		}
	}
}

// get returns the value of key.
func (t *otab[K, V]) get(hash uint64, key K) (V, bool) {
	if i := t.find(hash, key); i >= 0 {
		return t.slots[i].v, true
	}
	var zero V
	return zero, false
}

// slot returns the slot of key, making it (with the zero V) if key has
// none, and whether it existed. The pointer is valid until the next
// change of the table.
func (t *otab[K, V]) slot(hash uint64, key K) (*V, bool) {
	if (t.n+1)*8 > len(t.slots)*7 {
		t.grow()
	}
	h := hash | 1
	mask := len(t.slots) - 1
	for i := t.home(h); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.h == h && s.k == key {
			return &s.v, true
		}
		if s.h == 0 {
			s.h, s.k = h, key
			t.n++
			return &s.v, false
		}
	}
}

// put sets the value of key.
func (t *otab[K, V]) put(hash uint64, key K, v V) {
	p, _ := t.slot(hash, key)
	*p = v
}

// del removes key, shifting back the slots after it that may move.
func (t *otab[K, V]) del(hash uint64, key K) {
	i := t.find(hash, key)
	if i < 0 {
		return
	}
	mask := len(t.slots) - 1
	for j := (i + 1) & mask; t.slots[j].h != 0; j = (j + 1) & mask {
		// The slot at j may fill the hole at i if its home is not in the
		// cyclic range (i, j]: probing from its home reaches i before j.
		if hm := t.home(t.slots[j].h); (j-hm)&mask >= (j-i)&mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = oslot[K, V]{}
	t.n--
}

// grow doubles the table (or makes its first slice) and places every key
// again.
func (t *otab[K, V]) grow() {
	old := t.slots
	size := max(otabMinSlots, 2*len(old))
	t.slots = make([]oslot[K, V], size)
	t.shift = uint8(64 - log2(size))
	mask := size - 1
	for _, s := range old {
		if s.h == 0 {
			continue
		}
		i := t.home(s.h)
		for t.slots[i].h != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}

// clone returns a copy of t that shares nothing with it.
func (t *otab[K, V]) clone() otab[K, V] {
	c := *t
	c.slots = append([]oslot[K, V](nil), t.slots...)
	return c
}

// all yields every key and value, in slot order.
func (t *otab[K, V]) all(yield func(K, V) bool) {
	if t.n == 0 {
		return
	}
	for i := range t.slots {
		if s := &t.slots[i]; s.h != 0 && !yield(s.k, s.v) {
			return
		}
	}
}

// log2 returns the base-2 logarithm of n, a power of two.
func log2(n int) int {
	l := 0
	for n > 1 {
		n >>= 1
		l++
	}
	return l
}
