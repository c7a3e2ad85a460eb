package runtime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// TestHashKeyIsXXH64Seed0 checks HashKey against published XXH64 (seed 0)
// test vectors, independently of the library that computes it.
func TestHashKeyIsXXH64Seed0(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
	}{
		{"", 0xef46db3751d8e999},
		{"a", 0xd24ec4f1a98c6e5b},
		{"abc", 0x44bc2cf5ad770999},
	} {
		if got := HashKey([]byte(tc.in)); got != tc.want {
			t.Errorf("HashKey(%q) = %#x, want %#x", tc.in, got, tc.want)
		}
	}
}

// TestKeyGroupForKeyIsPinned pins the key group of fixed keys. If this test
// fails, every checkpoint ever written restores keys into the wrong key
// groups: the hash must never change.
func TestKeyGroupForKeyIsPinned(t *testing.T) {
	for _, tc := range []struct {
		key  []byte
		maxP int
		want int
	}{
		{[]byte(""), 128, 0xef46db3751d8e999 % 128},
		{[]byte("a"), 128, 0xd24ec4f1a98c6e5b % 128},
		{[]byte("abc"), 128, 0x44bc2cf5ad770999 % 128},
		{[]byte("abc"), 32768, 0x44bc2cf5ad770999 % 32768},
		{[]byte("abc"), 7, 0x44bc2cf5ad770999 % 7},
		{[]byte("abc"), 1, 0},
		{[]byte("user-42\x00\x01"), 128, 62},
		{[]byte{0x80, 0, 0, 0, 0, 0, 0, 42}, 128, 95},
		{[]byte{0x80, 0, 0, 0, 0, 0, 0, 42}, 32768, 32479},
		{[]byte{0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 128, 20},
		{[]byte("\x00\xff\x00\x01"), 100, 21},
	} {
		got, err := KeyGroupForKey(tc.key, tc.maxP)
		if err != nil {
			t.Fatalf("KeyGroupForKey(%q, %d): %v", tc.key, tc.maxP, err)
		}
		if got != tc.want {
			t.Errorf("KeyGroupForKey(%q, %d) = %d, want %d", tc.key, tc.maxP, got, tc.want)
		}
	}
}

// checkAssignment verifies for one (maxP, p) that the operator ranges are
// non-empty, contiguous, ordered, cover [0, maxP), and agree with
// OperatorIndexForKeyGroup for every key group.
func checkAssignment(t *testing.T, maxP, p int) {
	t.Helper()
	next := 0
	for i := range p {
		r, err := KeyGroupRangeForOperator(maxP, p, i)
		if err != nil {
			t.Fatalf("maxP=%d p=%d i=%d: %v", maxP, p, i, err)
		}
		if r.Start != next || r.Empty() {
			t.Fatalf("maxP=%d p=%d: operator %d has range %v, want a non-empty range starting at %d", maxP, p, i, r, next)
		}
		next = r.End
		// Each key group of r belongs to exactly operator i; checking both
		// edges and a sample keeps maxP=32768 cheap.
		for _, kg := range []int{r.Start, r.End - 1, (r.Start + r.End) / 2} {
			op, err := OperatorIndexForKeyGroup(kg, maxP, p)
			if err != nil || op != i {
				t.Fatalf("maxP=%d p=%d: key group %d in range of operator %d, but OperatorIndexForKeyGroup = %d, %v", maxP, p, kg, i, op, err)
			}
		}
	}
	if next != maxP {
		t.Fatalf("maxP=%d p=%d: ranges end at %d, want %d", maxP, p, next, maxP)
	}
}

func TestKeyGroupRangesPartitionKeyGroups(t *testing.T) {
	for _, maxP := range []int{1, 7, 128} {
		for p := 1; p <= maxP; p++ {
			checkAssignment(t, maxP, p)
		}
	}
	// Exhaustive per key group for a middle-sized case.
	for p := 1; p <= 128; p++ {
		owner := make([]int, 128)
		for i := range owner {
			owner[i] = -1
		}
		for i := range p {
			r, _ := KeyGroupRangeForOperator(128, p, i)
			for kg := range r.All() {
				if owner[kg] != -1 {
					t.Fatalf("p=%d: key group %d owned by %d and %d", p, kg, owner[kg], i)
				}
				owner[kg] = i
			}
		}
		for kg, o := range owner {
			if o == -1 {
				t.Fatalf("p=%d: key group %d has no owner", p, kg)
			}
		}
	}
	// maxP = 32768: every p would take a while; sample.
	rng := rand.New(rand.NewPCG(1, 2))
	ps := []int{1, 2, 3, 127, 128, 129, 1000, 16383, 16384, 32767, 32768}
	for range 40 {
		ps = append(ps, 1+rng.IntN(32768))
	}
	for _, p := range ps {
		checkAssignment(t, 32768, p)
	}
}

func TestOperatorIndexForKeyMatchesRanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		key := fmt.Appendf(nil, "k%d", rng.Uint64())
		maxP := 1 + rng.IntN(300)
		p := 1 + rng.IntN(maxP)
		kg, err := KeyGroupForKey(key, maxP)
		if err != nil {
			t.Fatal(err)
		}
		op, err := OperatorIndexForKey(key, maxP, p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := KeyGroupRangeForOperator(maxP, p, op)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Contains(kg) {
			t.Fatalf("key %q: key group %d routed to operator %d whose range is %v", key, kg, op, r)
		}
		if k := MakeKey(key, nil, maxP); k.Group() != kg || k.Hash() != HashKey(key) {
			t.Fatalf("MakeKey(%q) = %+v, want group %d", key, k, kg)
		}
	}
}

func TestInvalidParallelismIsAnError(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"maxP=0", ValidateMaxParallelism(0)},
		{"maxP=-1", ValidateMaxParallelism(-1)},
		{"maxP=32769", ValidateMaxParallelism(32769)},
		{"p=0", ValidateParallelism(128, 0)},
		{"p>maxP", ValidateParallelism(128, 129)},
		{"KeyGroupForKey maxP=0", second(KeyGroupForKey([]byte("x"), 0))},
		{"OperatorIndexForKey p=0", second(OperatorIndexForKey([]byte("x"), 128, 0))},
		{"OperatorIndexForKeyGroup kg=128", second(OperatorIndexForKeyGroup(128, 128, 4))},
		{"OperatorIndexForKeyGroup kg=-1", second(OperatorIndexForKeyGroup(-1, 128, 4))},
		{"range index=p", second(KeyGroupRangeForOperator(128, 4, 4))},
		{"range index=-1", second(KeyGroupRangeForOperator(128, 4, -1))},
		{"range p=200", second(KeyGroupRangeForOperator(128, 200, 0))},
	} {
		if tc.err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if !errors.Is(tc.err, ErrInvalidParallelism) && !errors.Is(tc.err, ErrInvalidKeyGroup) {
			t.Errorf("%s: error %v wraps neither ErrInvalidParallelism nor ErrInvalidKeyGroup", tc.name, tc.err)
		}
	}
	if err := ValidateParallelism(32768, 32768); err != nil {
		t.Errorf("maxP=p=32768: %v", err)
	}
}

func second[T any](_ T, err error) error { return err }

func TestKeyGroupRange(t *testing.T) {
	r := KeyGroupRange{Start: 3, End: 7}
	if r.Len() != 4 || r.Empty() || !r.Contains(3) || r.Contains(7) || r.Contains(2) {
		t.Fatalf("range %v: wrong Len/Contains", r)
	}
	if got := r.Intersect(KeyGroupRange{Start: 5, End: 10}); got != (KeyGroupRange{Start: 5, End: 7}) {
		t.Errorf("Intersect = %v", got)
	}
	if got := r.Intersect(KeyGroupRange{Start: 7, End: 10}); !got.Empty() {
		t.Errorf("disjoint Intersect = %v, want empty", got)
	}
	var all []int
	for kg := range r.All() {
		all = append(all, kg)
	}
	if fmt.Sprint(all) != "[3 4 5 6]" {
		t.Errorf("All = %v", all)
	}
	if err := (KeyGroupRange{Start: 0, End: 129}).Validate(128); !errors.Is(err, ErrInvalidKeyGroup) {
		t.Errorf("Validate beyond maxP: %v", err)
	}
	if err := (KeyGroupRange{Start: 4, End: 4}).Validate(128); !errors.Is(err, ErrInvalidKeyGroup) {
		t.Errorf("Validate empty: %v", err)
	}
	if err := FullRange(128).Validate(128); err != nil {
		t.Errorf("Validate full: %v", err)
	}
}

func TestStoreConfigNormalize(t *testing.T) {
	c, err := StoreConfig{}.Normalize()
	if err != nil || c.MaxParallelism != DefaultMaxParallelism || c.KeyGroups != FullRange(DefaultMaxParallelism) {
		t.Fatalf("zero config normalizes to %+v, %v", c, err)
	}
	if _, err := (StoreConfig{MaxParallelism: 40000}).Normalize(); !errors.Is(err, ErrInvalidParallelism) {
		t.Errorf("maxP=40000: %v", err)
	}
	if _, err := (StoreConfig{MaxParallelism: 8, KeyGroups: KeyGroupRange{Start: 4, End: 9}}).Normalize(); !errors.Is(err, ErrInvalidKeyGroup) {
		t.Errorf("range beyond maxP: %v", err)
	}
}

func TestKeyGroupOfHashFastPathEqualsModulo(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 100000 {
		h := rng.Uint64()
		m := 1 + rng.IntN(UpperBoundMaxParallelism)
		if rng.IntN(2) == 0 {
			m = 1 << rng.IntN(16)
		}
		if got, want := KeyGroupOfHash(h, m), int(h%uint64(m)); got != want {
			t.Fatalf("KeyGroupOfHash(%#x, %d) = %d, want %d", h, m, got, want)
		}
	}
}

// TestHashKeyIsXXH64 checks HashKey against xxhash.Sum64, the definition of
// the stable hash, for every length around the short-key path's limit and
// random contents: a difference would move keys to other key groups.
func TestHashKeyIsXXH64(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for n := range 80 {
		for range 200 {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			if got, want := HashKey(b), xxhash.Sum64(b); got != want {
				t.Fatalf("HashKey(%x) = %#x, xxhash.Sum64 %#x", b, got, want)
			}
		}
	}
}

// hashSink keeps BenchmarkHashKey's hashes alive.
var hashSink uint64

// BenchmarkHashKey hashes encoded keys of an int64's length and of a short
// string's.
func BenchmarkHashKey(b *testing.B) {
	for _, n := range []int{8, 13} {
		b.Run(fmt.Sprintf("len=%d", n), func(b *testing.B) {
			key := make([]byte, n)
			for i := 0; b.Loop(); i++ {
				// One 8-byte store, as a key codec writes an int64.
				binary.BigEndian.PutUint64(key, uint64(i))
				hashSink += HashKey(key)
			}
		})
	}
}

// TestUserKeyHashSpreads holds userKeyHash to what an otab needs of it:
// the homes (top bits) of int64 user keys, sequential or strided in low or
// high bits, spread over a table as evenly as a random hash's would, and
// other lengths hash as HashKey.
func TestUserKeyHashSpreads(t *testing.T) {
	const n, bits = 4096, 13 // 4096 keys in 8192 slots
	for _, stride := range []uint64{1, 7, 1 << 20, 1 << 32, 1 << 48} {
		homes := map[uint64]int{}
		for i := range uint64(n) {
			b := AppendInt64Key(nil, int64(i*stride))
			homes[userKeyHash(b)>>(64-bits)]++
		}
		// 4096 random keys in 8192 homes take about 3225 distinct ones.
		if len(homes) < 3000 {
			t.Errorf("stride %#x: %d keys take %d of %d homes", stride, n, len(homes), 1<<bits)
		}
	}
	for _, b := range [][]byte{nil, []byte("abc"), []byte("sixteen bytes..!")} {
		if userKeyHash(b) != HashKey(b) {
			t.Errorf("userKeyHash(%q) is not HashKey", b)
		}
	}
}

// TestKeyWord holds the built-in codecs' KeyWord to their key encodings,
// and the hashes of a word to the hashes of the encoding it stands for.
func TestKeyWord(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	ints := []int64{0, 1, -1, 1 << 62, -1 << 63, 1<<63 - 1}
	for range 1000 {
		ints = append(ints, int64(r.Uint64()))
	}
	checkWord := func(enc []byte, w uint64) {
		t.Helper()
		if len(enc) != 8 || binary.BigEndian.Uint64(enc) != w {
			t.Fatalf("KeyWord %#x, encoding %x", w, enc)
		}
		if hashKeyWord(w) != HashKey(enc) {
			t.Fatalf("hashKeyWord(%#x) = %#x, HashKey of %x %#x", w, hashKeyWord(w), enc, HashKey(enc))
		}
		if userKeyHashWord(w) != userKeyHash(enc) {
			t.Fatalf("userKeyHashWord(%#x) is not userKeyHash of %x", w, enc)
		}
	}
	for _, v := range ints {
		checkWord(Int64Codec{}.AppendKey(nil, v), Int64Codec{}.KeyWord(v))
		checkWord(Uint64Codec{}.AppendKey(nil, uint64(v)), Uint64Codec{}.KeyWord(uint64(v)))
	}
}
