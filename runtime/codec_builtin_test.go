package runtime

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// The laws every codec obeys are written once, generically (keySpec and
// valueSpec), and checked for every built-in type and for the struct codecs
// (codec_struct_test.go) over explicit edge cases and seeded random values.

const randomValues = 10_000

// keySpec describes a key codec under test.
type keySpec[T any] struct {
	what     string      // what its errors name, e.g. "int64 key"
	codec    KeyCodec[T] // the codec under test
	appendFn func([]byte, T) []byte
	decodeFn func([]byte) (T, []byte, error) // the exported functions, if any; they must agree with codec
	compare  func(a, b T) int                // the logical order keys must follow
	canon    func(T) T                       // what decoding an encoded value yields; nil means the value itself
	equal    func(a, b T) bool               // equality of decoded values
	edges    []T                             // explicit edge cases
	random   func(*rand.Rand) T
}

// keyLaws is the type-erased keySpec, so that specs of different types share
// one table.
type keyLaws interface {
	name() string
	testRoundTrip(t *testing.T)
	testOrder(t *testing.T)
	testPrefixFree(t *testing.T)
	testTruncation(t *testing.T)
}

func (s *keySpec[T]) name() string { return s.what }

// values returns the edge cases followed by randomValues random values, the
// same on every run.
func (s *keySpec[T]) values() []T {
	r := rand.New(rand.NewPCG(1, uint64(len(s.what))))
	vs := slices.Clone(s.edges)
	for range randomValues {
		vs = append(vs, s.random(r))
	}
	return vs
}

func (s *keySpec[T]) canonical(v T) T {
	if s.canon == nil {
		return v
	}
	return s.canon(v)
}

// enc encodes v with the codec and checks that the exported function, if
// any, writes the same bytes, and that appending keeps dst.
func (s *keySpec[T]) enc(t *testing.T, v T) []byte {
	t.Helper()
	b := s.codec.AppendKey(nil, v)
	if s.appendFn != nil {
		if f := s.appendFn(nil, v); !bytes.Equal(f, b) {
			t.Fatalf("%s: function encodes %#v as %x, codec as %x", s.what, v, f, b)
		}
	}
	if p := s.codec.AppendKey([]byte("prefix"), v); string(p) != "prefix"+string(b) {
		t.Fatalf("%s: AppendKey(\"prefix\", %#v) = %q, want prefix + %x", s.what, v, p, b)
	}
	return b
}

func (s *keySpec[T]) dec(src []byte) (T, []byte, error) {
	v, rest, err := s.codec.DecodeKey(src)
	if s.decodeFn != nil {
		fv, frest, ferr := s.decodeFn(src)
		if (err == nil) != (ferr == nil) || !bytes.Equal(rest, frest) || (err == nil && !s.equal(v, fv)) {
			panic(fmt.Sprintf("%s: function and codec disagree on %x: (%#v, %x, %v) vs (%#v, %x, %v)",
				s.what, src, fv, frest, ferr, v, rest, err))
		}
	}
	return v, rest, err
}

func (s *keySpec[T]) testRoundTrip(t *testing.T) {
	for _, v := range s.values() {
		b := s.enc(t, v)
		want := s.canonical(v)
		got, rest, err := s.dec(append(slices.Clip(b), "tail"...))
		if err != nil || !s.equal(got, want) || string(rest) != "tail" {
			t.Fatalf("%s: decode(enc(%#v) + tail) = %#v, %q, %v; want %#v, \"tail\", nil", s.what, v, got, rest, err, want)
		}
		// Canonical: the decoded value encodes to the same bytes.
		if b2 := s.enc(t, got); !bytes.Equal(b2, b) {
			t.Fatalf("%s: %#v encodes as %x, its decoding %#v as %x", s.what, v, b, got, b2)
		}
	}
}

func (s *keySpec[T]) testOrder(t *testing.T) {
	vs := s.values()
	encs := make([][]byte, len(vs))
	for i, v := range vs {
		encs[i] = s.enc(t, v)
	}
	check := func(i, j int) {
		t.Helper()
		got, want := bytes.Compare(encs[i], encs[j]), sign(s.compare(vs[i], vs[j]))
		if got != want {
			t.Fatalf("%s: bytes.Compare(enc(%#v), enc(%#v)) = %d, logical order %d\nenc: %x\nenc: %x",
				s.what, vs[i], vs[j], got, want, encs[i], encs[j])
		}
	}
	// Every pair of edge cases.
	for i := range s.edges {
		for j := range s.edges {
			check(i, j)
		}
	}
	// Random pairs, including equal ones.
	r := rand.New(rand.NewPCG(2, 3))
	for range randomValues {
		i := r.IntN(len(vs))
		j := i
		if r.IntN(10) > 0 {
			j = r.IntN(len(vs))
		}
		check(i, j)
	}
	// Sorted by encoding, the values are sorted logically: the order is total
	// and consistent across the whole set, not just on the sampled pairs.
	idx := make([]int, len(vs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(i, j int) int { return bytes.Compare(encs[i], encs[j]) })
	for k := 1; k < len(idx); k++ {
		check(idx[k-1], idx[k])
	}
}

func (s *keySpec[T]) testPrefixFree(t *testing.T) {
	vs := s.values()
	encs := make([][]byte, len(vs))
	for i, v := range vs {
		encs[i] = s.enc(t, v)
	}
	// If a is a proper prefix of b, every encoding sorting between them has a
	// as a prefix too, so checking neighbours in sorted order covers all pairs.
	sorted := slices.Clone(encs)
	slices.SortFunc(sorted, bytes.Compare)
	for k := 1; k < len(sorted); k++ {
		a, b := sorted[k-1], sorted[k]
		if len(a) < len(b) && bytes.HasPrefix(b, a) {
			t.Fatalf("%s: encoding %x is a proper prefix of %x", s.what, a, b)
		}
	}
	// Concatenations decode field by field.
	r := rand.New(rand.NewPCG(4, 5))
	for k := range randomValues {
		i, j := r.IntN(len(vs)), r.IntN(len(vs))
		if k < len(s.edges)*len(s.edges) {
			i, j = k/len(s.edges), k%len(s.edges)
		}
		cat := append(slices.Clone(encs[i]), encs[j]...)
		a, rest, err := s.dec(cat)
		if err != nil {
			t.Fatalf("%s: decode(%x): %v", s.what, cat, err)
		}
		b, rest, err := s.dec(rest)
		if err != nil || len(rest) != 0 || !s.equal(a, s.canonical(vs[i])) || !s.equal(b, s.canonical(vs[j])) {
			t.Fatalf("%s: decode(enc(%#v) + enc(%#v)) = %#v, %#v, rest %x, %v", s.what, vs[i], vs[j], a, b, rest, err)
		}
	}
}

func (s *keySpec[T]) testTruncation(t *testing.T) {
	for _, v := range s.edges {
		testProperPrefixesFail(t, s.what, s.enc(t, v), func(b []byte) error {
			_, _, err := s.dec(b)
			return err
		})
	}
}

// testProperPrefixesFail checks that decode fails with an error wrapping
// ErrCorrupt, naming what, on every proper prefix of enc (for long
// encodings: the shortest and longest 256 and every 97th in between).
func testProperPrefixesFail(t *testing.T, what string, enc []byte, decode func([]byte) error) {
	t.Helper()
	for n := range len(enc) {
		if len(enc) > 1024 && n >= 256 && n < len(enc)-256 && n%97 != 0 {
			continue
		}
		err := decode(slices.Clip(enc[:n]))
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: decoding the %d-byte prefix %x of %x: err = %v, want ErrCorrupt", what, n, enc[:n], enc, err)
		}
		if !strings.Contains(err.Error(), what) {
			t.Fatalf("%s: decoding %x: error %q does not say what was decoded", what, enc[:n], err)
		}
	}
}

// valueSpec describes a value codec under test.
type valueSpec[T any] struct {
	what      string
	codec     ValueCodec[T]
	appendFn  func([]byte, T) []byte
	decodeFn  func([]byte) (T, []byte, error)
	canon     func(T) T
	equal     func(a, b T) bool
	edges     []T
	random    func(*rand.Rand) T
	unordered bool // equal values may encode differently (maps)
}

type valueLaws interface {
	name() string
	testRoundTrip(t *testing.T)
	testTruncation(t *testing.T)
}

func (s *valueSpec[T]) name() string { return s.what }

func (s *valueSpec[T]) values() []T {
	r := rand.New(rand.NewPCG(6, uint64(len(s.what))))
	vs := slices.Clone(s.edges)
	for range randomValues {
		vs = append(vs, s.random(r))
	}
	return vs
}

func (s *valueSpec[T]) canonical(v T) T {
	if s.canon == nil {
		return v
	}
	return s.canon(v)
}

func (s *valueSpec[T]) enc(t *testing.T, v T) []byte {
	t.Helper()
	b := s.codec.AppendValue(nil, v)
	if s.appendFn != nil {
		if f := s.appendFn(nil, v); !bytes.Equal(f, b) {
			t.Fatalf("%s: function encodes %#v as %x, codec as %x", s.what, v, f, b)
		}
	}
	if p := s.codec.AppendValue([]byte("prefix"), v); !bytes.HasPrefix(p, []byte("prefix")) ||
		(!s.unordered && string(p) != "prefix"+string(b)) {
		t.Fatalf("%s: AppendValue(\"prefix\", %#v) = %q, want prefix + %x", s.what, v, p, b)
	}
	return b
}

func (s *valueSpec[T]) dec(src []byte) (T, []byte, error) {
	v, rest, err := s.codec.DecodeValue(src)
	if s.decodeFn != nil {
		fv, frest, ferr := s.decodeFn(src)
		if (err == nil) != (ferr == nil) || !bytes.Equal(rest, frest) || (err == nil && !s.equal(v, fv)) {
			panic(fmt.Sprintf("%s: function and codec disagree on %x", s.what, src))
		}
	}
	return v, rest, err
}

func (s *valueSpec[T]) testRoundTrip(t *testing.T) {
	vs := s.values()
	r := rand.New(rand.NewPCG(7, 8))
	for i, v := range vs {
		b := s.enc(t, v)
		want := s.canonical(v)
		got, rest, err := s.dec(append(slices.Clip(b), "tail"...))
		if err != nil || !s.equal(got, want) || string(rest) != "tail" {
			t.Fatalf("%s: decode(enc(%#v) + tail) = %#v, %q, %v; want %#v, \"tail\", nil", s.what, v, got, rest, err, want)
		}
		b2 := s.enc(t, got)
		if !s.unordered && !bytes.Equal(b2, b) {
			t.Fatalf("%s: %#v encodes as %x, its decoding %#v as %x", s.what, v, b, got, b2)
		}
		if got2, _, err := s.dec(b2); err != nil || !s.equal(got2, want) {
			t.Fatalf("%s: decode(enc(decode(enc(%#v)))) = %#v, %v", s.what, v, got2, err)
		}
		// Concatenations decode value by value.
		w := vs[r.IntN(len(vs))]
		if i < len(s.edges) {
			w = s.edges[(i+1)%len(s.edges)]
		}
		cat := append(slices.Clone(b), s.enc(t, w)...)
		a, rest, err := s.dec(cat)
		if err != nil {
			t.Fatalf("%s: decode(%x): %v", s.what, cat, err)
		}
		c, rest, err := s.dec(rest)
		if err != nil || len(rest) != 0 || !s.equal(a, want) || !s.equal(c, s.canonical(w)) {
			t.Fatalf("%s: decode(enc(%#v) + enc(%#v)) = %#v, %#v, rest %x, %v", s.what, v, w, a, c, rest, err)
		}
	}
}

func (s *valueSpec[T]) testTruncation(t *testing.T) {
	for _, v := range s.edges {
		testProperPrefixesFail(t, s.what, s.enc(t, v), func(b []byte) error {
			_, _, err := s.dec(b)
			return err
		})
	}
}

func sign(c int) int { return cmp.Compare(c, 0) }

// ---------------------------------------------------------------------------
// Edge cases and random values

// randBits returns 64 random bits shaped to hit interesting integers when
// truncated to any width: uniform, small of either sign, and every
// magnitude.
func randBits(r *rand.Rand) uint64 {
	switch r.IntN(4) {
	case 0:
		return r.Uint64()
	case 1:
		return uint64(r.Int64N(2001) - 1000)
	case 2:
		return r.Uint64() >> r.IntN(64)
	default:
		return -(r.Uint64() >> r.IntN(64))
	}
}

var signedCandidates = []int64{
	math.MinInt64, math.MinInt64 + 1, math.MinInt32 - 1, math.MinInt32, math.MinInt32 + 1,
	math.MinInt16 - 1, math.MinInt16, math.MinInt16 + 1, math.MinInt8 - 1, math.MinInt8, math.MinInt8 + 1,
	-8193, -8192, -65, -64, -2, -1, 0, 1, 2, 63, 64, 8191, 8192,
	math.MaxInt8 - 1, math.MaxInt8, math.MaxInt8 + 1, math.MaxUint8, math.MaxUint8 + 1,
	math.MaxInt16 - 1, math.MaxInt16, math.MaxInt16 + 1, math.MaxUint16, math.MaxUint16 + 1,
	math.MaxInt32 - 1, math.MaxInt32, math.MaxInt32 + 1, math.MaxUint32, math.MaxUint32 + 1,
	math.MaxInt64 - 1, math.MaxInt64,
}

var unsignedCandidates = []uint64{
	0, 1, 2, 127, 128, 255, 256, 16383, 16384,
	math.MaxInt16, math.MaxUint16 - 1, math.MaxUint16, math.MaxUint16 + 1,
	math.MaxInt32, math.MaxUint32 - 1, math.MaxUint32, math.MaxUint32 + 1,
	1 << 56, 1<<63 - 1, 1 << 63, math.MaxUint64 - 1, math.MaxUint64,
}

func signedEdges[T ~int8 | ~int16 | ~int32 | ~int64 | ~int](lo, hi int64) []T {
	var out []T
	for _, c := range signedCandidates {
		if c >= lo && c <= hi {
			out = append(out, T(c))
		}
	}
	return out
}

func unsignedEdges[T ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uint](hi uint64) []T {
	var out []T
	for _, c := range unsignedCandidates {
		if c <= hi {
			out = append(out, T(c))
		}
	}
	return out
}

func float64Edges() []float64 {
	return []float64{
		math.NaN(), math.Float64frombits(0x7ff0_0000_0000_0001), // signalling NaN
		math.Float64frombits(0xfff8_0000_0000_0000), // negative NaN
		math.Float64frombits(0x7fff_ffff_ffff_ffff), math.Float64frombits(0xffff_ffff_ffff_ffff),
		math.Inf(-1), -math.MaxFloat64, -1e300, -1 - 1e-15, -1, -0.5,
		-math.Float64frombits(0x0010_0000_0000_0000), // smallest negative normal
		-math.Float64frombits(0x000f_ffff_ffff_ffff), // largest negative subnormal
		-2 * math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64,
		math.Copysign(0, -1), 0,
		math.SmallestNonzeroFloat64, 2 * math.SmallestNonzeroFloat64,
		math.Float64frombits(0x000f_ffff_ffff_ffff), math.Float64frombits(0x0010_0000_0000_0000),
		0.5, 1, 1 + 1e-15, 1e300, math.MaxFloat64, math.Inf(1),
	}
}

func float32Edges() []float32 {
	return []float32{
		float32(math.NaN()), math.Float32frombits(0x7f80_0001), math.Float32frombits(0xffc0_0000),
		math.Float32frombits(0xffff_ffff),
		float32(math.Inf(-1)), -math.MaxFloat32, -1, -0.5,
		-math.Float32frombits(0x0080_0000), -math.Float32frombits(0x007f_ffff),
		-math.SmallestNonzeroFloat32, float32(math.Copysign(0, -1)), 0, math.SmallestNonzeroFloat32,
		2 * math.SmallestNonzeroFloat32, math.Float32frombits(0x007f_ffff), math.Float32frombits(0x0080_0000),
		0.5, 1, math.MaxFloat32, float32(math.Inf(1)),
	}
}

func randFloat64(r *rand.Rand) float64 {
	switch r.IntN(5) {
	case 0:
		return math.Float64frombits(r.Uint64()) // any bits: NaN payloads, subnormals, infinities
	case 1:
		return r.NormFloat64() * math.Pow(10, float64(r.IntN(40)-20))
	case 2:
		return float64(r.IntN(21) - 10)
	case 3:
		return math.Float64frombits(r.Uint64()>>12&(1<<52-1) | r.Uint64()&(1<<63)) // subnormal
	default:
		e := float64Edges()
		return e[r.IntN(len(e))]
	}
}

func randFloat32(r *rand.Rand) float32 {
	switch r.IntN(5) {
	case 0:
		return math.Float32frombits(r.Uint32())
	case 1:
		return float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(20)-10)))
	case 2:
		return float32(r.IntN(21) - 10)
	case 3:
		return math.Float32frombits(r.Uint32()&(1<<23-1) | r.Uint32()&(1<<31))
	default:
		e := float32Edges()
		return e[r.IntN(len(e))]
	}
}

// floatKeyEqual is equality of decoded float keys: NaN equals NaN, and zeros
// must have the same sign (the canonical one).
func floatKeyEqual[F float32 | float64](a, b F) bool {
	if a != a || b != b {
		return a != a && b != b
	}
	return a == b && math.Signbit(float64(a)) == math.Signbit(float64(b))
}

// floatKeyCanon is what decoding a float key yields: NaN for every NaN, +0
// for -0.
func floatKeyCanon[F float32 | float64](f F) F {
	if f == 0 {
		return 0
	}
	return f
}

var stringEdges = []string{
	"", "\x00", "\x00\x00", "\x00\x01", "\x00\xff", "\x00\xff\x00", "\x01", "\x01\x00", "\xfe", "\xff", "\xff\x00", "\xff\xff",
	"a", "a\x00", "a\x00\x00", "a\x00\x01", "a\x00b", "a\x01", "a\xff", "ab", "ab\x00", "abc", "b", "é", "\x80\x81",
	strings.Repeat("x", 1000), strings.Repeat("x", 1000) + "\x00", strings.Repeat("\x00", 300),
	strings.Repeat("\x00\xff\x01", 100), strings.Repeat("long string with a \x00 inside ", 4000),
}

func bytesEdges() [][]byte {
	out := [][]byte{nil, {}}
	for _, s := range stringEdges[1:] {
		out = append(out, []byte(s))
	}
	return out
}

// randString returns short strings over a small alphabet rich in 0x00, 0x01
// and 0xFF (so that pairs often share prefixes and escapes), and sometimes
// long or arbitrary ones.
func randString(r *rand.Rand) string {
	n := r.IntN(10)
	if r.IntN(20) == 0 {
		n = r.IntN(700)
	}
	alphabet := "\x00\x01\x02\xfe\xffab"
	b := make([]byte, n)
	for i := range b {
		if r.IntN(4) > 0 {
			b[i] = alphabet[r.IntN(len(alphabet))]
		} else {
			b[i] = byte(r.Uint32())
		}
	}
	return string(b)
}

func randBytes(r *rand.Rand) []byte {
	switch r.IntN(10) {
	case 0:
		return nil
	case 1:
		return []byte{}
	default:
		return []byte(randString(r))
	}
}

func bytesValueEqual(a, b []byte) bool { return bytes.Equal(a, b) && (a == nil) == (b == nil) }

// minUnix and maxUnix bound the Unix seconds of the times whose keys order
// exactly (see AppendTimeKey): time.Unix(minUnix, 0) and
// time.Unix(maxUnix, 999999999) are the first and the last.
const (
	minUnix = math.MinInt64
	maxUnix = math.MaxInt64 - 62135596800
)

var (
	zoneEast = time.FixedZone("east", 5*3600+1800)
	zoneWest = time.FixedZone("west", -8*3600)
)

func timeEdges() []time.Time {
	now := time.Now() // carries a monotonic reading
	return []time.Time{
		{}, // the zero time, year 1
		time.Unix(minUnix, 0), time.Unix(minUnix, 1), time.Unix(minUnix+1, 0),
		time.Date(-1_000_000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(1000, 6, 1, 12, 0, 0, 5, zoneWest),
		time.Date(1677, 9, 21, 0, 12, 43, 145224191, time.UTC), // just before UnixNano's range
		time.Date(1677, 9, 21, 0, 12, 43, 145224192, time.UTC),
		time.Unix(-1, 0), time.Unix(-1, 999999999), time.Unix(0, 0), time.Unix(0, 1), time.Unix(1, 0),
		time.Unix(1_700_000_000, 123456789).In(zoneEast),
		time.Unix(1_700_000_000, 123456789).In(zoneWest), // equal instant, other zone
		now, now.Add(time.Nanosecond), now.In(zoneEast), now.Round(0),
		time.Date(2262, 4, 11, 23, 47, 16, 854775807, time.UTC), // just after UnixNano's range
		time.Date(2262, 4, 11, 23, 47, 16, 854775808, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(1_000_000, 1, 1, 0, 0, 0, 0, zoneEast),
		time.Unix(maxUnix, 0), time.Unix(maxUnix, 999999999), // the last time.Time
	}
}

func randTime(r *rand.Rand) time.Time {
	nsec := int64(0)
	if r.IntN(4) > 0 {
		nsec = r.Int64N(1e9)
	}
	var t time.Time
	switch r.IntN(4) {
	case 0: // anywhere in the orderable range
		lo, hi := int64(minUnix), int64(maxUnix)
		t = time.Unix(lo+int64(r.Uint64N(uint64(hi)-uint64(lo))), nsec)
	case 1: // within 1000 years of 1970, beyond UnixNano's range on both sides
		const y = 1000 * 365 * 86400
		t = time.Unix(r.Int64N(2*y)-y, nsec)
	case 2: // near the zero time
		t = time.Time{}.Add(time.Duration(r.Int64N(1e18)))
	default: // now-ish, with a monotonic reading
		return time.Now().Add(time.Duration(r.Int64N(1e12) - 5e11))
	}
	switch r.IntN(4) {
	case 0:
		return t.In(zoneEast)
	case 1:
		return t.In(zoneWest)
	case 2:
		return t.Local()
	default:
		return t
	}
}

func timeCanon(t time.Time) time.Time { return t.UTC().Round(0) }

func eq[T comparable](a, b T) bool { return a == b }

// ---------------------------------------------------------------------------
// The specs

func builtinKeySpecs() []keyLaws {
	bits := randBits
	return []keyLaws{
		&keySpec[bool]{what: "bool key", codec: BoolCodec{}, appendFn: AppendBoolKey, decodeFn: DecodeBoolKey,
			compare: func(a, b bool) int { return cmp.Compare(b2u8(a), b2u8(b)) }, equal: eq[bool],
			edges: []bool{false, true}, random: func(r *rand.Rand) bool { return r.IntN(2) == 1 }},
		&keySpec[int]{what: "int key", codec: IntCodec{}, appendFn: AppendIntKey, decodeFn: DecodeIntKey,
			compare: cmp.Compare[int], equal: eq[int], edges: signedEdges[int](math.MinInt, math.MaxInt),
			random: func(r *rand.Rand) int { return int(bits(r)) }},
		&keySpec[int8]{what: "int8 key", codec: Int8Codec{}, appendFn: AppendInt8Key, decodeFn: DecodeInt8Key,
			compare: cmp.Compare[int8], equal: eq[int8], edges: signedEdges[int8](math.MinInt8, math.MaxInt8),
			random: func(r *rand.Rand) int8 { return int8(bits(r)) }},
		&keySpec[int16]{what: "int16 key", codec: Int16Codec{}, appendFn: AppendInt16Key, decodeFn: DecodeInt16Key,
			compare: cmp.Compare[int16], equal: eq[int16], edges: signedEdges[int16](math.MinInt16, math.MaxInt16),
			random: func(r *rand.Rand) int16 { return int16(bits(r)) }},
		&keySpec[int32]{what: "int32 key", codec: Int32Codec{}, appendFn: AppendInt32Key, decodeFn: DecodeInt32Key,
			compare: cmp.Compare[int32], equal: eq[int32], edges: signedEdges[int32](math.MinInt32, math.MaxInt32),
			random: func(r *rand.Rand) int32 { return int32(bits(r)) }},
		&keySpec[int64]{what: "int64 key", codec: Int64Codec{}, appendFn: AppendInt64Key, decodeFn: DecodeInt64Key,
			compare: cmp.Compare[int64], equal: eq[int64], edges: signedEdges[int64](math.MinInt64, math.MaxInt64),
			random: func(r *rand.Rand) int64 { return int64(bits(r)) }},
		&keySpec[uint]{what: "uint key", codec: UintCodec{}, appendFn: AppendUintKey, decodeFn: DecodeUintKey,
			compare: cmp.Compare[uint], equal: eq[uint], edges: unsignedEdges[uint](math.MaxUint),
			random: func(r *rand.Rand) uint { return uint(bits(r)) }},
		&keySpec[uint8]{what: "uint8 key", codec: Uint8Codec{}, appendFn: AppendUint8Key, decodeFn: DecodeUint8Key,
			compare: cmp.Compare[uint8], equal: eq[uint8], edges: unsignedEdges[uint8](math.MaxUint8),
			random: func(r *rand.Rand) uint8 { return uint8(bits(r)) }},
		&keySpec[uint16]{what: "uint16 key", codec: Uint16Codec{}, appendFn: AppendUint16Key, decodeFn: DecodeUint16Key,
			compare: cmp.Compare[uint16], equal: eq[uint16], edges: unsignedEdges[uint16](math.MaxUint16),
			random: func(r *rand.Rand) uint16 { return uint16(bits(r)) }},
		&keySpec[uint32]{what: "uint32 key", codec: Uint32Codec{}, appendFn: AppendUint32Key, decodeFn: DecodeUint32Key,
			compare: cmp.Compare[uint32], equal: eq[uint32], edges: unsignedEdges[uint32](math.MaxUint32),
			random: func(r *rand.Rand) uint32 { return uint32(bits(r)) }},
		&keySpec[uint64]{what: "uint64 key", codec: Uint64Codec{}, appendFn: AppendUint64Key, decodeFn: DecodeUint64Key,
			compare: cmp.Compare[uint64], equal: eq[uint64], edges: unsignedEdges[uint64](math.MaxUint64),
			random: bits},
		&keySpec[float32]{what: "float32 key", codec: Float32Codec{}, appendFn: AppendFloat32Key, decodeFn: DecodeFloat32Key,
			compare: cmp.Compare[float32], canon: floatKeyCanon[float32], equal: floatKeyEqual[float32],
			edges: float32Edges(), random: randFloat32},
		&keySpec[float64]{what: "float64 key", codec: Float64Codec{}, appendFn: AppendFloat64Key, decodeFn: DecodeFloat64Key,
			compare: cmp.Compare[float64], canon: floatKeyCanon[float64], equal: floatKeyEqual[float64],
			edges: float64Edges(), random: randFloat64},
		&keySpec[string]{what: "string key", codec: StringCodec{}, appendFn: AppendStringKey, decodeFn: DecodeStringKey,
			compare: strings.Compare, equal: eq[string], edges: stringEdges, random: randString},
		&keySpec[[]byte]{what: "bytes key", codec: BytesCodec{}, appendFn: AppendBytesKey, decodeFn: DecodeBytesKey,
			compare: bytes.Compare,
			canon: func(b []byte) []byte {
				if b == nil {
					return []byte{} // nil and empty are one key, decoded as empty
				}
				return b
			},
			equal: bytesValueEqual, edges: bytesEdges(), random: randBytes},
		&keySpec[time.Time]{what: "time key", codec: TimeCodec{}, appendFn: AppendTimeKey, decodeFn: DecodeTimeKey,
			compare: time.Time.Compare, canon: timeCanon, equal: eq[time.Time], edges: timeEdges(), random: randTime},
		&keySpec[time.Duration]{what: "duration key", codec: DurationCodec{}, appendFn: AppendDurationKey, decodeFn: DecodeDurationKey,
			compare: cmp.Compare[time.Duration], equal: eq[time.Duration],
			edges:  signedEdges[time.Duration](math.MinInt64, math.MaxInt64),
			random: func(r *rand.Rand) time.Duration { return time.Duration(bits(r)) }},
	}
}

func builtinValueSpecs() []valueLaws {
	bits := randBits
	floatBitsEqual64 := func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }
	floatBitsEqual32 := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }
	return []valueLaws{
		&valueSpec[bool]{what: "bool value", codec: BoolCodec{}, appendFn: AppendBoolValue, decodeFn: DecodeBoolValue,
			equal: eq[bool], edges: []bool{false, true}, random: func(r *rand.Rand) bool { return r.IntN(2) == 1 }},
		&valueSpec[int]{what: "int value", codec: IntCodec{}, appendFn: AppendIntValue, decodeFn: DecodeIntValue,
			equal: eq[int], edges: signedEdges[int](math.MinInt, math.MaxInt),
			random: func(r *rand.Rand) int { return int(bits(r)) }},
		&valueSpec[int8]{what: "int8 value", codec: Int8Codec{}, appendFn: AppendInt8Value, decodeFn: DecodeInt8Value,
			equal: eq[int8], edges: signedEdges[int8](math.MinInt8, math.MaxInt8),
			random: func(r *rand.Rand) int8 { return int8(bits(r)) }},
		&valueSpec[int16]{what: "int16 value", codec: Int16Codec{}, appendFn: AppendInt16Value, decodeFn: DecodeInt16Value,
			equal: eq[int16], edges: signedEdges[int16](math.MinInt16, math.MaxInt16),
			random: func(r *rand.Rand) int16 { return int16(bits(r)) }},
		&valueSpec[int32]{what: "int32 value", codec: Int32Codec{}, appendFn: AppendInt32Value, decodeFn: DecodeInt32Value,
			equal: eq[int32], edges: signedEdges[int32](math.MinInt32, math.MaxInt32),
			random: func(r *rand.Rand) int32 { return int32(bits(r)) }},
		&valueSpec[int64]{what: "int64 value", codec: Int64Codec{}, appendFn: AppendInt64Value, decodeFn: DecodeInt64Value,
			equal: eq[int64], edges: signedEdges[int64](math.MinInt64, math.MaxInt64),
			random: func(r *rand.Rand) int64 { return int64(bits(r)) }},
		&valueSpec[uint]{what: "uint value", codec: UintCodec{}, appendFn: AppendUintValue, decodeFn: DecodeUintValue,
			equal: eq[uint], edges: unsignedEdges[uint](math.MaxUint),
			random: func(r *rand.Rand) uint { return uint(bits(r)) }},
		&valueSpec[uint8]{what: "uint8 value", codec: Uint8Codec{}, appendFn: AppendUint8Value, decodeFn: DecodeUint8Value,
			equal: eq[uint8], edges: unsignedEdges[uint8](math.MaxUint8),
			random: func(r *rand.Rand) uint8 { return uint8(bits(r)) }},
		&valueSpec[uint16]{what: "uint16 value", codec: Uint16Codec{}, appendFn: AppendUint16Value, decodeFn: DecodeUint16Value,
			equal: eq[uint16], edges: unsignedEdges[uint16](math.MaxUint16),
			random: func(r *rand.Rand) uint16 { return uint16(bits(r)) }},
		&valueSpec[uint32]{what: "uint32 value", codec: Uint32Codec{}, appendFn: AppendUint32Value, decodeFn: DecodeUint32Value,
			equal: eq[uint32], edges: unsignedEdges[uint32](math.MaxUint32),
			random: func(r *rand.Rand) uint32 { return uint32(bits(r)) }},
		&valueSpec[uint64]{what: "uint64 value", codec: Uint64Codec{}, appendFn: AppendUint64Value, decodeFn: DecodeUint64Value,
			equal: eq[uint64], edges: unsignedEdges[uint64](math.MaxUint64), random: bits},
		&valueSpec[float32]{what: "float32 value", codec: Float32Codec{}, appendFn: AppendFloat32Value, decodeFn: DecodeFloat32Value,
			equal: floatBitsEqual32, edges: float32Edges(), random: randFloat32},
		&valueSpec[float64]{what: "float64 value", codec: Float64Codec{}, appendFn: AppendFloat64Value, decodeFn: DecodeFloat64Value,
			equal: floatBitsEqual64, edges: float64Edges(), random: randFloat64},
		&valueSpec[string]{what: "string value", codec: StringCodec{}, appendFn: AppendStringValue, decodeFn: DecodeStringValue,
			equal: eq[string], edges: stringEdges, random: randString},
		&valueSpec[[]byte]{what: "bytes value", codec: BytesCodec{}, appendFn: AppendBytesValue, decodeFn: DecodeBytesValue,
			equal: bytesValueEqual, edges: bytesEdges(), random: randBytes},
		&valueSpec[time.Time]{what: "time value", codec: TimeCodec{}, appendFn: AppendTimeValue, decodeFn: DecodeTimeValue,
			canon: timeCanon, equal: eq[time.Time],
			// Every time.Time, including the ones whose Unix seconds wrap.
			edges:  append(timeEdges(), time.Unix(math.MaxInt64, 999999999), time.Unix(maxUnix+1, 0)),
			random: randTime},
		&valueSpec[time.Duration]{what: "duration value", codec: DurationCodec{}, appendFn: AppendDurationValue, decodeFn: DecodeDurationValue,
			equal: eq[time.Duration], edges: signedEdges[time.Duration](math.MinInt64, math.MaxInt64),
			random: func(r *rand.Rand) time.Duration { return time.Duration(bits(r)) }},
		&valueSpec[uint64]{what: "uvarint", codec: funcCodec[uint64]{AppendUvarint, DecodeUvarint},
			equal: eq[uint64], edges: unsignedEdges[uint64](math.MaxUint64), random: bits},
		&valueSpec[int64]{what: "varint", codec: funcCodec[int64]{AppendVarint, DecodeVarint},
			equal: eq[int64], edges: signedEdges[int64](math.MinInt64, math.MaxInt64),
			random: func(r *rand.Rand) int64 { return int64(bits(r)) }},
	}
}

// funcCodec makes a ValueCodec of a pair of functions.
type funcCodec[T any] struct {
	append func([]byte, T) []byte
	decode func([]byte) (T, []byte, error)
}

func (c funcCodec[T]) AppendValue(dst []byte, v T) []byte              { return c.append(dst, v) }
func (c funcCodec[T]) DecodeValue(src []byte) (T, []byte, error)       { return c.decode(src) }
func (c funcCodec[T]) AppendKey(dst []byte, v T) []byte                { return c.append(dst, v) }
func (c funcCodec[T]) DecodeKey(src []byte) (v T, r []byte, err error) { return c.decode(src) }

// ---------------------------------------------------------------------------
// The laws

func TestKeyCodecsRoundTrip(t *testing.T) {
	for _, s := range builtinKeySpecs() {
		t.Run(s.name(), s.testRoundTrip)
	}
}

func TestKeyCodecsPreserveOrder(t *testing.T) {
	for _, s := range builtinKeySpecs() {
		t.Run(s.name(), s.testOrder)
	}
}

func TestKeyCodecsArePrefixFree(t *testing.T) {
	for _, s := range builtinKeySpecs() {
		t.Run(s.name(), s.testPrefixFree)
	}
}

func TestKeyCodecsRejectTruncation(t *testing.T) {
	for _, s := range builtinKeySpecs() {
		t.Run(s.name(), s.testTruncation)
	}
}

func TestValueCodecsRoundTrip(t *testing.T) {
	for _, s := range builtinValueSpecs() {
		t.Run(s.name(), s.testRoundTrip)
	}
}

func TestValueCodecsRejectTruncation(t *testing.T) {
	for _, s := range builtinValueSpecs() {
		t.Run(s.name(), s.testTruncation)
	}
}

// ---------------------------------------------------------------------------
// Pinned encodings: the bytes are part of the checkpoint format.

func TestKeyEncodingsArePinned(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"false", AppendBoolKey(nil, false), "00"},
		{"true", AppendBoolKey(nil, true), "01"},
		{"int8 -1", AppendInt8Key(nil, -1), "7f"},
		{"int16 1", AppendInt16Key(nil, 1), "8001"},
		{"int32 -2", AppendInt32Key(nil, -2), "7ffffffe"},
		{"int64 min", AppendInt64Key(nil, math.MinInt64), "0000000000000000"},
		{"int 1", AppendIntKey(nil, 1), "8000000000000001"},
		{"uint16", AppendUint16Key(nil, 0x1234), "1234"},
		{"uint 1", AppendUintKey(nil, 1), "0000000000000001"},
		{"float64 NaN", AppendFloat64Key(nil, math.NaN()), "0000000000000000"},
		{"float64 -NaN", AppendFloat64Key(nil, math.Float64frombits(0xfff8000000000001)), "0000000000000000"},
		{"float64 -Inf", AppendFloat64Key(nil, math.Inf(-1)), "000fffffffffffff"},
		{"float64 -1", AppendFloat64Key(nil, -1), "400fffffffffffff"},
		{"float64 -0", AppendFloat64Key(nil, math.Copysign(0, -1)), "8000000000000000"},
		{"float64 +0", AppendFloat64Key(nil, 0), "8000000000000000"},
		{"float64 1", AppendFloat64Key(nil, 1), "bff0000000000000"},
		{"float64 +Inf", AppendFloat64Key(nil, math.Inf(1)), "fff0000000000000"},
		{"float32 NaN", AppendFloat32Key(nil, float32(math.NaN())), "00000000"},
		{"float32 -0", AppendFloat32Key(nil, float32(math.Copysign(0, -1))), "80000000"},
		{"float32 1", AppendFloat32Key(nil, 1), "bf800000"},
		{"string", AppendStringKey(nil, "a\x00b"), "6100ff620001"},
		{"empty string", AppendStringKey(nil, ""), "0001"},
		{"nil bytes", AppendBytesKey(nil, nil), "0001"},
		{"time", AppendTimeKey(nil, time.Unix(-1, 5).In(zoneEast)), "7fffffffffffffff00000005"},
		{"zero time", AppendTimeKey(nil, time.Time{}), "7ffffff1886e090000000000"},
		{"duration", AppendDurationKey(nil, -time.Nanosecond), "7fffffffffffffff"},
	} {
		if got := fmt.Sprintf("%x", tc.got); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestValueEncodingsArePinned(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"true", AppendBoolValue(nil, true), "01"},
		{"int8 -1", AppendInt8Value(nil, -1), "ff"},
		{"uint8", AppendUint8Value(nil, 200), "c8"},
		{"int16 -1", AppendInt16Value(nil, -1), "01"},
		{"int32 1", AppendInt32Value(nil, 1), "02"},
		{"int64 -64", AppendInt64Value(nil, -64), "7f"},
		{"int64 64", AppendInt64Value(nil, 64), "8001"},
		{"int64 min", AppendInt64Value(nil, math.MinInt64), "ffffffffffffffffff01"},
		{"int -3", AppendIntValue(nil, -3), "05"},
		{"uint16 300", AppendUint16Value(nil, 300), "ac02"},
		{"uint64 max", AppendUint64Value(nil, math.MaxUint64), "ffffffffffffffffff01"},
		{"float64 1", AppendFloat64Value(nil, 1), "000000000000f03f"},
		{"float32 -0", AppendFloat32Value(nil, float32(math.Copysign(0, -1))), "00000080"},
		{"string", AppendStringValue(nil, "ab"), "026162"},
		{"nil bytes", AppendBytesValue(nil, nil), "00"},
		{"empty bytes", AppendBytesValue(nil, []byte{}), "01"},
		{"bytes", AppendBytesValue(nil, []byte{7}), "0207"},
		{"time", AppendTimeValue(nil, time.Unix(-1, 300).In(zoneWest)), "01ac02"},
		{"duration", AppendDurationValue(nil, time.Second), "80a8d6b907"},
	} {
		if got := fmt.Sprintf("%x", tc.got); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
}

// ---------------------------------------------------------------------------
// Edge cases of particular codecs

func TestFloatKeyCanonicalizesNaNAndNegativeZero(t *testing.T) {
	for _, nan := range []float64{math.NaN(), -math.NaN(), math.Float64frombits(0x7ff0000000000001), math.Float64frombits(0xffffffffffffffff)} {
		if got := AppendFloat64Key(nil, nan); !bytes.Equal(got, make([]byte, 8)) {
			t.Errorf("AppendFloat64Key(%x) = %x, want eight zero bytes", math.Float64bits(nan), got)
		}
		if got := AppendFloat32Key(nil, float32(nan)); !bytes.Equal(got, make([]byte, 4)) {
			t.Errorf("AppendFloat32Key(NaN) = %x, want four zero bytes", got)
		}
	}
	v, _, err := DecodeFloat64Key(make([]byte, 8))
	if err != nil || !math.IsNaN(v) {
		t.Errorf("DecodeFloat64Key(zeros) = %v, %v; want NaN", v, err)
	}
	f, _, err := DecodeFloat32Key(make([]byte, 4))
	if err != nil || f == f {
		t.Errorf("DecodeFloat32Key(zeros) = %v, %v; want NaN", f, err)
	}
	negZero := math.Copysign(0, -1)
	v, _, err = DecodeFloat64Key(AppendFloat64Key(nil, negZero))
	if err != nil || v != 0 || math.Signbit(v) {
		t.Errorf("-0 decodes as %v (signbit %v), %v; want +0", v, math.Signbit(v), err)
	}
	// NaN sorts below -Inf, -0 equals +0.
	if bytes.Compare(AppendFloat64Key(nil, math.NaN()), AppendFloat64Key(nil, math.Inf(-1))) >= 0 {
		t.Error("NaN does not sort below -Inf")
	}
	if !bytes.Equal(AppendFloat64Key(nil, negZero), AppendFloat64Key(nil, 0)) {
		t.Error("-0 and +0 are different keys")
	}
}

func TestTimeCodecsDropLocationAndMonotonicReading(t *testing.T) {
	now := time.Now().In(zoneEast)
	for _, c := range []Codec[time.Time]{TimeCodec{}} {
		k, _, err := c.DecodeKey(c.AppendKey(nil, now))
		if err != nil || k != now.UTC().Round(0) || !k.Equal(now) || k.Location() != time.UTC {
			t.Errorf("time key: %v, %v; want %v in UTC", k, err, now.UTC())
		}
		v, _, err := c.DecodeValue(c.AppendValue(nil, now))
		if err != nil || v != now.UTC().Round(0) || !v.Equal(now) || v.Location() != time.UTC {
			t.Errorf("time value: %v, %v; want %v in UTC", v, err, now.UTC())
		}
	}
	if k, _, err := DecodeTimeKey(AppendTimeKey(nil, time.Time{})); err != nil || !k.IsZero() || k != (time.Time{}) {
		t.Errorf("zero time key decodes as %v, %v", k, err)
	}
}

// TestTimeKeyOrderWrapsOnlyBelowUnixMin pins the one documented exception to
// the order of time keys: the times below time.Unix(math.MinInt64, 0), whose
// Unix seconds wrap, round trip exactly but sort after every other time.
func TestTimeKeyOrderWrapsOnlyBelowUnixMin(t *testing.T) {
	first := time.Unix(minUnix, 0)
	wrapped := time.Unix(math.MaxInt64, 0) // time.Unix itself wraps: this is before first
	last := time.Unix(maxUnix, 999999999)
	if !wrapped.Before(first) || !first.Before(last) {
		t.Fatalf("time.Time's range is not as documented: %v %v %v", wrapped, first, last)
	}
	if last.Add(time.Nanosecond).After(last) {
		t.Fatalf("%v is not the last time", last)
	}
	for _, tm := range []time.Time{first, wrapped, last} {
		got, _, err := DecodeTimeKey(AppendTimeKey(nil, tm))
		if err != nil || got != tm.UTC() {
			t.Errorf("time key %v decodes as %v, %v", tm, got, err)
		}
	}
	if bytes.Compare(AppendTimeKey(nil, first), AppendTimeKey(nil, last)) >= 0 {
		t.Error("the first orderable time does not sort before the last time")
	}
	if bytes.Compare(AppendTimeKey(nil, wrapped), AppendTimeKey(nil, last)) <= 0 {
		t.Error("a wrapped time does not sort after the last time, contrary to the documentation")
	}
}

// TestPlatformIntsUse64BitEncodings checks that int and uint encode like
// int64 and uint64 on every platform, and that a 32-bit platform rejects
// what does not fit instead of truncating it.
func TestPlatformIntsUse64BitEncodings(t *testing.T) {
	if !bytes.Equal(AppendIntKey(nil, -2), AppendInt64Key(nil, -2)) || !bytes.Equal(AppendUintKey(nil, 7), AppendUint64Key(nil, 7)) ||
		!bytes.Equal(AppendIntValue(nil, -2), AppendInt64Value(nil, -2)) || !bytes.Equal(AppendUintValue(nil, 7), AppendUint64Value(nil, 7)) {
		t.Error("int and uint do not encode like int64 and uint64")
	}
	big := int64(math.MaxInt32) + 1
	ik, _, ikErr := DecodeIntKey(AppendInt64Key(nil, big))
	iv, _, ivErr := DecodeIntValue(AppendInt64Value(nil, -big-1))
	uk, _, ukErr := DecodeUintKey(AppendUint64Key(nil, math.MaxUint32+1))
	uv, _, uvErr := DecodeUintValue(AppendUint64Value(nil, math.MaxUint32+1))
	if math.MaxInt == math.MaxInt32 { // 32-bit
		for _, err := range []error{ikErr, ivErr, ukErr, uvErr} {
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "out of range") {
				t.Errorf("decoding a 64-bit value into a 32-bit int: err = %v, want out of range", err)
			}
		}
	} else if ikErr != nil || ivErr != nil || ukErr != nil || uvErr != nil ||
		int64(ik) != big || int64(iv) != -big-1 || uint64(uk) != math.MaxUint32+1 || uint64(uv) != math.MaxUint32+1 {
		t.Errorf("64-bit int and uint: %d %d %d %d, errors %v %v %v %v", ik, iv, uk, uv, ikErr, ivErr, ukErr, uvErr)
	}
}

func TestDecodedStringsDoNotAliasInput(t *testing.T) {
	for _, tc := range []struct {
		name   string
		enc    []byte
		decode func([]byte) (string, []byte, error)
	}{
		{"string key", AppendStringKey(nil, "hello"), DecodeStringKey},
		{"string key with escape", AppendStringKey(nil, "he\x00llo"), DecodeStringKey},
		{"string value", AppendStringValue(nil, "hello"), DecodeStringValue},
	} {
		src := slices.Clone(tc.enc)
		got, _, err := tc.decode(src)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		want := strings.Clone(got)
		for i := range src {
			src[i] ^= 0x55
		}
		if got != want {
			t.Errorf("%s: decoded string changed with its input: %q, was %q", tc.name, got, want)
		}
	}
}

func TestDecodedBytesDoNotAliasInput(t *testing.T) {
	for _, tc := range []struct {
		name   string
		enc    []byte
		decode func([]byte) ([]byte, []byte, error)
	}{
		{"bytes key", AppendBytesKey(nil, []byte("hello")), DecodeBytesKey},
		{"bytes key with escape", AppendBytesKey(nil, []byte("he\x00llo")), DecodeBytesKey},
		{"bytes value", AppendBytesValue(nil, []byte("hello")), DecodeBytesValue},
	} {
		src := slices.Clone(tc.enc)
		got, _, err := tc.decode(src)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		want := slices.Clone(got)
		for i := range src {
			src[i] ^= 0x55
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: decoded slice changed with its input: %q, was %q", tc.name, got, want)
		}
	}
}

func TestBytesKeysDecodeNonNil(t *testing.T) {
	for _, b := range [][]byte{nil, {}} {
		got, rest, err := DecodeBytesKey(AppendBytesKey(nil, b))
		if err != nil || got == nil || len(got) != 0 || len(rest) != 0 {
			t.Errorf("DecodeBytesKey(AppendBytesKey(%#v)) = %#v, %x, %v; want []byte{}", b, got, rest, err)
		}
	}
}

// ---------------------------------------------------------------------------
// Errors

func TestDecodersRejectCorruptInput(t *testing.T) {
	ff := func(n int) []byte { return bytes.Repeat([]byte{0xff}, n) }
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	u := func(v uint64) []byte { return AppendUvarint(nil, v) }
	for _, tc := range []struct {
		name   string
		decode func([]byte) error
		in     []byte
		want   string // in the error message
	}{
		{"bool key 2", errDec(DecodeBoolKey), []byte{2}, "bool key: invalid byte 0x02"},
		{"bool key ff", errDec(DecodeBoolKey), []byte{0xff}, "bool key: invalid byte 0xff"},
		{"bool value 2", errDec(DecodeBoolValue), []byte{2}, "bool value: invalid byte 0x02"},
		{"int64 key short", errDec(DecodeInt64Key), []byte{1, 2, 3}, "int64 key: need 8 bytes, have 3"},

		{"string key no terminator", errDec(DecodeStringKey), []byte("abc"), "string key: no 0x00 0x01 terminator"},
		{"string key lone 0x00", errDec(DecodeStringKey), []byte("abc\x00"), "string key: no 0x00 0x01 terminator"},
		{"string key escape 0x02", errDec(DecodeStringKey), []byte("a\x00\x02\x00\x01"), "string key: invalid escape 0x00 0x02 at offset 1"},
		{"string key escape 0x00", errDec(DecodeStringKey), []byte("\x00\x00\x01"), "string key: invalid escape 0x00 0x00 at offset 0"},
		{"string key escape 0xfe", errDec(DecodeStringKey), []byte("\x00\xfe"), "invalid escape 0x00 0xfe"},
		{"bytes key escape", errDec(DecodeBytesKey), []byte("x\x00\x80\x00\x01"), "bytes key: invalid escape 0x00 0x80"},
		{"bytes key empty", errDec(DecodeBytesKey), nil, "bytes key: no 0x00 0x01 terminator in 0 bytes"},

		{"float64 key positive NaN", errDec(DecodeFloat64Key), cat([]byte{0xff, 0xf8}, make([]byte, 6)), "float64 key: non-canonical"},
		{"float64 key max NaN", errDec(DecodeFloat64Key), ff(8), "float64 key: non-canonical"},
		{"float64 key negative NaN", errDec(DecodeFloat64Key), []byte{0, 7, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, "float64 key: non-canonical"},
		{"float64 key lowest NaN", errDec(DecodeFloat64Key), []byte{0, 0, 0, 0, 0, 0, 0, 1}, "float64 key: non-canonical"},
		{"float64 key -0", errDec(DecodeFloat64Key), cat([]byte{0x7f}, ff(7)), "float64 key: non-canonical"},
		{"float32 key positive NaN", errDec(DecodeFloat32Key), []byte{0xff, 0xc0, 0, 0}, "float32 key: non-canonical"},
		{"float32 key negative NaN", errDec(DecodeFloat32Key), []byte{0, 0x3f, 0xff, 0xff}, "float32 key: non-canonical"},
		{"float32 key -0", errDec(DecodeFloat32Key), []byte{0x7f, 0xff, 0xff, 0xff}, "float32 key: non-canonical"},

		{"time key 1e9 ns", errDec(DecodeTimeKey), cat(AppendInt64Key(nil, 0), AppendUint32Key(nil, 1e9)), "time key: nanoseconds 1000000000 out of range"},
		{"time key max ns", errDec(DecodeTimeKey), cat(AppendInt64Key(nil, 0), ff(4)), "time key: nanoseconds 4294967295"},
		{"time value 1e9 ns", errDec(DecodeTimeValue), cat(u(0), u(1e9)), "time value: nanoseconds 1000000000 out of range"},
		{"time value no ns", errDec(DecodeTimeValue), u(0), "time value: need 1 byte, have 0"},

		{"uvarint empty", errDec(DecodeUvarint), nil, "uvarint: need 1 byte, have 0"},
		{"uvarint truncated", errDec(DecodeUvarint), []byte{0x80}, "uvarint: varint truncated after 1 bytes"},
		{"uvarint 11 bytes", errDec(DecodeUvarint), ff(11), "uvarint: varint overflows 64 bits"},
		{"uvarint 10th byte 2", errDec(DecodeUvarint), cat(ff(9), []byte{2}), "uvarint: varint overflows 64 bits"},
		{"uvarint non-minimal 0", errDec(DecodeUvarint), []byte{0x80, 0}, "uvarint: varint is not in minimal form"},
		{"uvarint non-minimal 127", errDec(DecodeUvarint), []byte{0xff, 0x80, 0}, "uvarint: varint is not in minimal form"},
		{"varint overflow", errDec(DecodeVarint), cat(ff(9), []byte{0x7f}), "varint: varint overflows 64 bits"},
		{"int64 value overflow", errDec(DecodeInt64Value), ff(10), "int64 value: varint overflows 64 bits"},

		{"uint16 value 65536", errDec(DecodeUint16Value), u(math.MaxUint16 + 1), "uint16 value: value 65536 out of range"},
		{"uint32 value 2^32", errDec(DecodeUint32Value), u(math.MaxUint32 + 1), "uint32 value: value 4294967296 out of range"},
		{"int16 value 32768", errDec(DecodeInt16Value), AppendVarint(nil, math.MaxInt16+1), "int16 value: value 32768 out of range"},
		{"int16 value -32769", errDec(DecodeInt16Value), AppendVarint(nil, math.MinInt16-1), "int16 value: value -32769 out of range"},
		{"int32 value 2^31", errDec(DecodeInt32Value), AppendVarint(nil, math.MaxInt32+1), "int32 value: value 2147483648 out of range"},
		{"int32 value min-1", errDec(DecodeInt32Value), AppendVarint(nil, math.MinInt32-1), "int32 value: value -2147483649 out of range"},

		{"string value too long", errDec(DecodeStringValue), cat(u(4), []byte("abc")), "string value: length 4 exceeds the 3 remaining bytes"},
		{"string value 2^40", errDec(DecodeStringValue), cat(u(1<<40), []byte("abc")), "string value: length 1099511627776 exceeds"},
		{"string value max", errDec(DecodeStringValue), u(math.MaxUint64), "string value: length 18446744073709551615 exceeds the 0"},
		{"bytes value too long", errDec(DecodeBytesValue), cat(u(5), []byte("abc")), "bytes value: length 4 exceeds the 3 remaining bytes"},
		{"bytes value max", errDec(DecodeBytesValue), u(math.MaxUint64), "bytes value: length 18446744073709551614 exceeds"},
		{"len too long", errDec(DecodeLen), cat(u(2), []byte("a")), "length: length 2 exceeds the 1 remaining bytes"},
	} {
		err := tc.decode(tc.in)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: decode(%x) = %v, want ErrCorrupt", tc.name, tc.in, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), ErrCorrupt.Error()+": ") {
			t.Errorf("%s: error %q, want it to start with %q and contain %q", tc.name, err, ErrCorrupt, tc.want)
		}
	}
}

func errDec[T any](f func([]byte) (T, []byte, error)) func([]byte) error {
	return func(b []byte) error {
		v, rest, err := f(b)
		var zero T
		if err != nil && (rest != nil || !equalZero(v, zero)) {
			return fmt.Errorf("decoder returned %v, %x with error %w; want the zero value and nil", v, rest, err)
		}
		return err
	}
}

func equalZero[T any](v, zero T) bool { return fmt.Sprint(v) == fmt.Sprint(zero) }

// TestDecodersAcceptBoundaries pins the largest accepted inputs next to the
// rejected ones above.
func TestDecodersAcceptBoundaries(t *testing.T) {
	ff := bytes.Repeat([]byte{0xff}, 9)
	if v, rest, err := DecodeUvarint(append(ff, 1, 'x')); err != nil || v != math.MaxUint64 || string(rest) != "x" {
		t.Errorf("DecodeUvarint(max) = %d, %q, %v", v, rest, err)
	}
	if v, _, err := DecodeTimeKey(append(AppendInt64Key(nil, 0), AppendUint32Key(nil, 999999999)...)); err != nil || v.Nanosecond() != 999999999 {
		t.Errorf("DecodeTimeKey(999999999 ns) = %v, %v", v, err)
	}
	if s, rest, err := DecodeStringValue([]byte("\x03abc")); err != nil || s != "abc" || len(rest) != 0 {
		t.Errorf("DecodeStringValue(exact length) = %q, %q, %v", s, rest, err)
	}
	if n, rest, err := DecodeLen([]byte("\x02ab")); err != nil || n != 2 || string(rest) != "ab" {
		t.Errorf("DecodeLen = %d, %q, %v; want 2 and the bytes that follow", n, rest, err)
	}
}

// TestHugeLengthsFailWithoutAllocating checks that a length prefix claiming
// far more than the input holds fails before anything is allocated: the
// only allocation is the error.
func TestHugeLengthsFailWithoutAllocating(t *testing.T) {
	huge := AppendUvarint(nil, 1<<40)
	sliceCodec := SliceValueCodec[int64](Int64Codec{})
	mapCodec := MapValueCodec[string, int64](StringCodec{}, Int64Codec{})
	for _, tc := range []struct {
		name   string
		decode func() error
	}{
		{"string value", func() error { _, _, err := DecodeStringValue(huge); return err }},
		{"bytes value", func() error { _, _, err := DecodeBytesValue(huge); return err }},
		{"len", func() error { _, _, err := DecodeLen(huge); return err }},
		{"slice value", func() error { _, _, err := sliceCodec.DecodeValue(huge); return err }},
		{"map value", func() error { _, _, err := mapCodec.DecodeValue(huge); return err }},
	} {
		if err := tc.decode(); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", tc.name, err)
		}
		if allocs := testing.AllocsPerRun(100, func() { _ = tc.decode() }); allocs > 1 {
			t.Errorf("%s: %v allocations to reject a huge length, want at most 1 (the error)", tc.name, allocs)
		}
	}
}

func TestDecodersDoNotAllocateOnSuccess(t *testing.T) {
	buf := AppendInt64Key(nil, -5)
	buf = AppendTimeKey(buf, time.Now())
	buf = AppendFloat64Key(buf, 1.5)
	buf = AppendVarint(buf, -300)
	buf = AppendUvarint(buf, 1<<40)
	allocs := testing.AllocsPerRun(100, func() {
		_, rest, _ := DecodeInt64Key(buf)
		_, rest, _ = DecodeTimeKey(rest)
		_, rest, _ = DecodeFloat64Key(rest)
		_, rest, _ = DecodeVarint(rest)
		_, _, _ = DecodeUvarint(rest)
	})
	if allocs != 0 {
		t.Errorf("fixed-width and varint decoders allocate %v times, want 0", allocs)
	}
	dst := make([]byte, 0, 64)
	allocs = testing.AllocsPerRun(100, func() {
		d := AppendStringKey(dst, "a\x00b")
		d = AppendTimeValue(d, time.Time{})
		_ = AppendBytesValue(d, []byte("xyz"))
	})
	if allocs != 0 {
		t.Errorf("encoders with room allocate %v times, want 0", allocs)
	}
}

// ---------------------------------------------------------------------------
// Benchmarks

func BenchmarkInt64Key(b *testing.B) {
	buf := make([]byte, 0, 16)
	b.Run("op=append", func(b *testing.B) {
		for i := range b.N {
			buf = AppendInt64Key(buf[:0], int64(i))
		}
	})
	enc := AppendInt64Key(nil, 42)
	b.Run("op=decode", func(b *testing.B) {
		for range b.N {
			if _, _, err := DecodeInt64Key(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkStringKey(b *testing.B) {
	s := "user-0123456789\x00abcdef"
	buf := make([]byte, 0, 64)
	b.Run("op=append", func(b *testing.B) {
		for range b.N {
			buf = AppendStringKey(buf[:0], s)
		}
	})
	enc := AppendStringKey(nil, s)
	b.Run("op=decode", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, _, err := DecodeStringKey(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// checkVarintPaths fails t unless the fast paths of varint and time
// decoding (uvarint's 8-byte load, UvarintPrefix and TimeValuePrefix) give
// what the byte-by-byte decode gives for src: the same value, rest and
// error, or, for the prefix functions, nothing.
func checkVarintPaths(t *testing.T, src []byte) {
	t.Helper()
	u, rest, err := uvarint(src, "x")
	u2, rest2, err2 := uvarintLoop(src, "x")
	if u != u2 || !bytes.Equal(rest, rest2) || fmt.Sprint(err) != fmt.Sprint(err2) {
		t.Fatalf("uvarint(%x) = %d, %x, %v; byte by byte %d, %x, %v", src, u, rest, err, u2, rest2, err2)
	}
	// The fast path of generated decoders takes every varint of up to 9
	// bytes that uvarint takes, and nothing else.
	if x, n := UvarintPrefix(src); n > 0 != (err2 == nil && len(src)-len(rest2) <= 9) || n > 0 && (x != u2 || n != len(src)-len(rest2)) {
		t.Fatalf("UvarintPrefix(%x) = %d, %d; uvarint %d, %x, %v", src, x, n, u2, rest2, err2)
	}
	tm, rest, err := DecodeTimeValue(src)
	tm2, rest2, err2 := decodeTimeBytewise(src)
	if tm != tm2 || !bytes.Equal(rest, rest2) || fmt.Sprint(err) != fmt.Sprint(err2) {
		t.Fatalf("DecodeTimeValue(%x) = %v, %x, %v; byte by byte %v, %x, %v", src, tm, rest, err, tm2, rest2, err2)
	}
	if tm3, n := TimeValuePrefix(src); n > 0 && (err2 != nil || tm3 != tm2 || n != len(src)-len(rest2)) {
		t.Fatalf("TimeValuePrefix(%x) = %v, %d; byte by byte %v, %x, %v", src, tm3, n, tm2, rest2, err2)
	}
}

// TestVarintPathsAgree runs checkVarintPaths on varints of every length,
// minimal or not, at every distance from the end of the input, and on time
// values after them.
func TestVarintPathsAgree(t *testing.T) {
	var encs [][]byte
	for bits := 0; bits <= 64; bits++ {
		for _, v := range []uint64{1<<bits - 1, 1 << bits, 1<<bits + 1} {
			enc := AppendUvarint(nil, v)
			encs = append(encs, enc)
			if enc[len(enc)-1] < 0x80 && len(enc) < 10 {
				// The same value with a redundant zero group: not minimal.
				long := append(bytes.Clone(enc), 0)
				long[len(enc)-1] |= 0x80
				encs = append(encs, long)
			}
			encs = append(encs, enc[:len(enc)-1]) // truncated
		}
	}
	encs = append(encs, bytes.Repeat([]byte{0xff}, 11), append(bytes.Repeat([]byte{0xff}, 9), 2))
	for _, enc := range encs {
		for pad := 0; pad <= 9; pad++ {
			in := append(bytes.Clone(enc), bytes.Repeat([]byte{0x81}, pad)...)
			checkVarintPaths(t, in)
			checkVarintPaths(t, append(AppendVarint(nil, -1<<40), in...)) // a time's seconds, then enc
		}
	}
}

func BenchmarkVarintValue(b *testing.B) {
	enc := AppendInt64Value(nil, -123456)
	for range b.N {
		if _, _, err := DecodeInt64Value(enc); err != nil {
			b.Fatal(err)
		}
	}
}

// TestGeneratedCodecHelpers: the helpers generated codecs call decode what
// the built-in codecs write, and fail on truncated or malformed input with
// errors that wrap ErrCorrupt, in the built-in codecs' wording.
func TestGeneratedCodecHelpers(t *testing.T) {
	str := AppendStringValue(nil, "héllo")
	tail := []byte{7}
	for _, a := range []*StringBlock{nil, new(StringBlock)} {
		s, rest, err := DecodeStringValueIn(append(bytes.Clone(str), tail...), a)
		if err != nil || s != "héllo" || !bytes.Equal(rest, tail) {
			t.Errorf("DecodeStringValueIn(block %v) = %q, %x, %v", a != nil, s, rest, err)
		}
	}
	bad := []struct {
		name string
		err  error
		want string
	}{
		{"string truncated", errOf3(DecodeStringValueIn(str[:3], nil)), "string value: length 6 exceeds the 2 remaining bytes"},
		{"string truncated, block", errOf3(DecodeStringValueIn(str[:3], new(StringBlock))), "string value: length 6 exceeds the 2 remaining bytes"},
		{"string length overlong, block", errOf3(DecodeStringValueIn([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, new(StringBlock))), "string value: varint overflows 64 bits"},
		{"string length empty, block", errOf3(DecodeStringValueIn(nil, new(StringBlock))), "string value: need 1 byte, have 0"},
		{"one byte short", ShortError("pointer value", 1, 0), "pointer value: need 1 byte, have 0"},
		{"count", CountError("[]int", 9, 3), "[]int: count 9 exceeds the 3 remaining bytes"},
		{"tag", TagError("*T", 2), "*T: invalid tag 0x02, want 0x00 or 0x01"},
		{"dup", DupKeyError("map[string]int"), "map[string]int: a key occurs twice"},
		{"field", FieldError("T.F", ShortError("x", 2, 1)), "T.F: stategen: corrupt encoding: x: need 2 bytes, have 1"},
	}
	for _, c := range bad {
		if !errors.Is(c.err, ErrCorrupt) || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrCorrupt mentioning %q", c.name, c.err, c.want)
		}
	}
}

// TestStringBlockSharesOneCopy decodes the strings of one input through one
// StringBlock: strings within stringBlockSize bytes of the first share one
// block; a string past it, or longer than it, starts a new one; empty
// strings take none; and no string aliases the input.
func TestStringBlockSharesOneCopy(t *testing.T) {
	long := strings.Repeat("L", stringBlockSize+10)
	words := []string{"click", "", "web", "eu", long, "mobile", "é\x00x"}
	var in []byte
	for _, w := range words {
		in = AppendStringValue(in, w)
		in = AppendInt64Value(in, 1<<40) // bytes between the strings
	}
	var a StringBlock
	var blocks []string
	rest := in
	for i, want := range words {
		var s string
		var err error
		s, rest, err = DecodeStringValueIn(rest, &a)
		if err != nil || s != want {
			t.Fatalf("string %d = %q, %v; want %q", i, s, err, want)
		}
		if _, rest, err = DecodeInt64Value(rest); err != nil {
			t.Fatal(err)
		}
		if len(blocks) == 0 || blocks[len(blocks)-1] != a.block {
			blocks = append(blocks, a.block)
		}
		words[i] = s
	}
	if len(rest) != 0 {
		t.Errorf("%d bytes left", len(rest))
	}
	// "click" to "eu" in the first block; the long string in its own;
	// the rest in a third, up to the end of the input.
	if len(blocks) != 3 || len(blocks[1]) != len(long) || len(blocks[0]) != stringBlockSize {
		t.Errorf("%d blocks of %d bytes, want 3: %d, %d and the rest", len(blocks), lens(blocks), stringBlockSize, len(long))
	}
	for i := range in {
		in[i] = '#'
	}
	for i, w := range []string{"click", "", "web", "eu", long, "mobile", "é\x00x"} {
		if words[i] != w {
			t.Errorf("string %d is %q after the input changed, want %q: it aliases the input", i, words[i], w)
		}
	}
}

func lens(ss []string) []int {
	var n []int
	for _, s := range ss {
		n = append(n, len(s))
	}
	return n
}

// errOf3 returns the error of a three-result decode.
func errOf3[A, B any](_ A, _ B, err error) error { return err }
