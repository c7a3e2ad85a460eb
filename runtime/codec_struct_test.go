package runtime

import (
	"bytes"
	"cmp"
	"errors"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// UserDay is the composite key of the StructKeyCodec example.
type UserDay struct {
	User string
	Day  int32
}

var userDayKey = StructKeyCodec(
	KeyField(StringCodec{}, func(k *UserDay) *string { return &k.User }),
	KeyField(Int32Codec{}, func(k *UserDay) *int32 { return &k.Day }))

func compareUserDay(a, b UserDay) int {
	return cmp.Or(strings.Compare(a.User, b.User), cmp.Compare(a.Day, b.Day))
}

// event is a key with a field of every fixed-width kind.
type event struct {
	At    time.Time
	Score float64
	Late  bool
	Raw   []byte
}

var eventKey = StructKeyCodec(
	KeyField(TimeCodec{}, func(e *event) *time.Time { return &e.At }),
	KeyField(Float64Codec{}, func(e *event) *float64 { return &e.Score }),
	KeyField(BoolCodec{}, func(e *event) *bool { return &e.Late }),
	KeyField(BytesCodec{}, func(e *event) *[]byte { return &e.Raw }))

// profile is a value with slice, map and pointer fields, nil and non-nil.
type profile struct {
	Name   string
	Tags   []string
	Scores map[string]float64
	Best   *int64
	Raw    []byte
	Seen   time.Time
	Marks  []struct{}
	Nested map[int32][]*bool
}

// emptyCodec encodes struct{} in no bytes.
type emptyCodec struct{}

func (emptyCodec) AppendValue(dst []byte, _ struct{}) []byte { return dst }
func (emptyCodec) DecodeValue(src []byte) (struct{}, []byte, error) {
	return struct{}{}, src, nil
}

var profileValue = StructValueCodec(
	ValueField(StringCodec{}, func(p *profile) *string { return &p.Name }),
	ValueField(SliceValueCodec[string](StringCodec{}), func(p *profile) *[]string { return &p.Tags }),
	ValueField(MapValueCodec[string, float64](StringCodec{}, Float64Codec{}), func(p *profile) *map[string]float64 { return &p.Scores }),
	ValueField(PointerValueCodec[int64](Int64Codec{}), func(p *profile) **int64 { return &p.Best }),
	ValueField(BytesCodec{}, func(p *profile) *[]byte { return &p.Raw }),
	ValueField(TimeCodec{}, func(p *profile) *time.Time { return &p.Seen }),
	ValueField(SliceValueCodec[struct{}](emptyCodec{}), func(p *profile) *[]struct{} { return &p.Marks }),
	ValueField(MapValueCodec[int32, []*bool](Int32Codec{}, SliceValueCodec[*bool](PointerValueCodec[bool](BoolCodec{}))),
		func(p *profile) *map[int32][]*bool { return &p.Nested }))

// equalProfiles compares decoded profiles: nil and empty differ, floats
// compare by their bits (so NaN equals itself), times with ==.
func equalProfiles(a, b profile) bool {
	floatBits := func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) }
	return a.Name == b.Name &&
		equalSlices(a.Tags, b.Tags, eq[string]) &&
		equalMaps(a.Scores, b.Scores, floatBits) &&
		equalPointers(a.Best, b.Best, eq[int64]) &&
		bytesValueEqual(a.Raw, b.Raw) &&
		a.Seen == b.Seen &&
		(a.Marks == nil) == (b.Marks == nil) && len(a.Marks) == len(b.Marks) && // all elements are equal
		equalMaps(a.Nested, b.Nested, func(x, y []*bool) bool {
			return equalSlices(x, y, func(p, q *bool) bool { return equalPointers(p, q, eq[bool]) })
		})
}

func equalSlices[T any](a, b []T, eq func(T, T) bool) bool {
	return (a == nil) == (b == nil) && slices.EqualFunc(a, b, eq)
}

func equalMaps[K comparable, V any](a, b map[K]V, eq func(V, V) bool) bool {
	return (a == nil) == (b == nil) && maps.EqualFunc(a, b, eq)
}

func equalPointers[T any](a, b *T, eq func(T, T) bool) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return eq(*a, *b)
}

func randUserDay(r *rand.Rand) UserDay {
	users := []string{"", "a", "a\x00", "ab", "b", "\xff"}
	u := users[r.IntN(len(users))]
	if r.IntN(3) == 0 {
		u = randString(r)
	}
	return UserDay{User: u, Day: int32(randBits(r)) % 4}
}

func randEvent(r *rand.Rand) event {
	return event{At: randTime(r), Score: randFloat64(r), Late: r.IntN(2) == 0, Raw: randBytes(r)}
}

func randProfile(r *rand.Rand) profile {
	p := profile{Name: randString(r), Raw: randBytes(r), Seen: randTime(r)}
	if r.IntN(4) > 0 {
		p.Tags = make([]string, r.IntN(4))
		for i := range p.Tags {
			p.Tags[i] = randString(r)
		}
	}
	if r.IntN(4) > 0 {
		p.Scores = map[string]float64{}
		for range r.IntN(4) {
			p.Scores[randString(r)] = randFloat64(r)
		}
	}
	if r.IntN(2) == 0 {
		best := int64(randBits(r))
		p.Best = &best
	}
	if r.IntN(3) > 0 {
		p.Marks = make([]struct{}, r.IntN(1000))
	}
	if r.IntN(3) > 0 {
		p.Nested = map[int32][]*bool{}
		for range r.IntN(3) {
			var bs []*bool
			for range r.IntN(3) {
				var b *bool
				if r.IntN(3) > 0 {
					v := r.IntN(2) == 0
					b = &v
				}
				bs = append(bs, b)
			}
			p.Nested[int32(randBits(r))] = bs
		}
	}
	return p
}

func structKeySpecs() []keyLaws {
	return []keyLaws{
		&keySpec[UserDay]{what: "UserDay key field", codec: userDayKey, compare: compareUserDay, equal: eq[UserDay],
			edges: []UserDay{{}, {"", math.MinInt32}, {"", -1}, {"", math.MaxInt32}, {"\x00", 0}, {"a", -1}, {"a", 0},
				{"a\x00", math.MinInt32}, {"a\x01", 5}, {"ab", 0}, {"b", math.MinInt32}, {"\xff\xff", math.MaxInt32}},
			random: randUserDay},
		&keySpec[event]{what: "event key field", codec: eventKey,
			compare: func(a, b event) int {
				return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.Score, b.Score), cmp.Compare(b2u8(a.Late), b2u8(b.Late)), bytes.Compare(a.Raw, b.Raw))
			},
			canon: func(e event) event {
				e.At = timeCanon(e.At)
				e.Score = floatKeyCanon(e.Score)
				if e.Raw == nil {
					e.Raw = []byte{}
				}
				return e
			},
			equal: func(a, b event) bool {
				return a.At == b.At && floatKeyEqual(a.Score, b.Score) && a.Late == b.Late && bytesValueEqual(a.Raw, b.Raw)
			},
			edges: []event{{}, {Score: math.NaN()}, {Score: math.Copysign(0, -1), Raw: []byte{0}}, {Late: true},
				{At: time.Unix(0, 1), Score: math.Inf(-1)}, {At: time.Unix(0, 1), Score: math.Inf(1), Raw: []byte("\x00\xff")}},
			random: func(r *rand.Rand) event {
				e := randEvent(r)
				if r.IntN(2) == 0 { // share a prefix with other keys, so later fields decide
					e.At, e.Score = time.Unix(int64(r.IntN(2)), 0), float64(r.IntN(3)-1)
				}
				return e
			}},
	}
}

func structValueSpecs() []valueLaws {
	best := int64(-7)
	no, yes := false, true
	return []valueLaws{
		&valueSpec[profile]{what: "profile value field", codec: profileValue, canon: func(p profile) profile {
			p.Seen = timeCanon(p.Seen)
			return p
		}, equal: equalProfiles, unordered: true,
			edges: []profile{
				{},
				{Tags: []string{}, Scores: map[string]float64{}, Raw: []byte{}, Marks: []struct{}{}, Nested: map[int32][]*bool{}},
				{Name: "x\x00", Tags: []string{"", "a"}, Scores: map[string]float64{"nan": math.NaN(), "-0": math.Copysign(0, -1)},
					Best: &best, Raw: []byte{0}, Seen: time.Now(), Marks: make([]struct{}, 1<<20),
					Nested: map[int32][]*bool{-1: nil, 0: {}, 1: {nil, &no, &yes}}},
			},
			random: randProfile},
		&valueSpec[[]int32]{what: "slice value", codec: SliceValueCodec[int32](Int32Codec{}), equal: func(a, b []int32) bool {
			return equalSlices(a, b, eq[int32])
		}, edges: [][]int32{nil, {}, {0}, {math.MinInt32, -1, math.MaxInt32}},
			random: func(r *rand.Rand) []int32 {
				if r.IntN(5) == 0 {
					return nil
				}
				s := make([]int32, r.IntN(20))
				for i := range s {
					s[i] = int32(randBits(r))
				}
				return s
			}},
		&valueSpec[*string]{what: "pointer value", codec: PointerValueCodec[string](StringCodec{}), equal: func(a, b *string) bool {
			return equalPointers(a, b, eq[string])
		}, edges: []*string{nil, new(string), ptr("a\x00")},
			random: func(r *rand.Rand) *string {
				if r.IntN(3) == 0 {
					return nil
				}
				return ptr(randString(r))
			}},
	}
}

func ptr[T any](v T) *T { return &v }

func TestStructKeyCodecRoundTrip(t *testing.T) {
	for _, s := range structKeySpecs() {
		t.Run(s.name(), s.testRoundTrip)
	}
}

func TestStructKeyCodecOrdersByFieldsInOrder(t *testing.T) {
	for _, s := range structKeySpecs() {
		t.Run(s.name(), s.testOrder)
	}
}

func TestStructKeyCodecIsPrefixFree(t *testing.T) {
	for _, s := range structKeySpecs() {
		t.Run(s.name(), s.testPrefixFree)
	}
}

func TestStructKeyCodecRejectsTruncation(t *testing.T) {
	for _, s := range structKeySpecs() {
		t.Run(s.name(), s.testTruncation)
	}
}

func TestCompositeValueCodecsRoundTrip(t *testing.T) {
	for _, s := range structValueSpecs() {
		t.Run(s.name(), s.testRoundTrip)
	}
}

func TestCompositeValueCodecsRejectTruncation(t *testing.T) {
	for _, s := range structValueSpecs() {
		t.Run(s.name(), s.testTruncation)
	}
}

func TestStructKeyCodecExampleEncoding(t *testing.T) {
	got := userDayKey.AppendKey(nil, UserDay{User: "al", Day: -1})
	want := append(AppendStringKey(nil, "al"), AppendInt32Key(nil, -1)...)
	if !bytes.Equal(got, want) {
		t.Errorf("UserDay key = %x, want the concatenation of its fields %x", got, want)
	}
	_, _, err := userDayKey.DecodeKey(want[:len(want)-1])
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "runtime.UserDay key field 1 of 2") ||
		!strings.Contains(err.Error(), "int32 key: need 4 bytes, have 3") {
		t.Errorf("truncated UserDay key: error %v, want ErrCorrupt naming the type, the field and the cause", err)
	}
}

func TestStructCodecsWithoutFieldsEncodeNothing(t *testing.T) {
	kc := StructKeyCodec[UserDay]()
	if b := kc.AppendKey(nil, UserDay{User: "x"}); len(b) != 0 {
		t.Errorf("key of no fields = %x, want empty", b)
	}
	if v, rest, err := kc.DecodeKey([]byte("tail")); err != nil || v != (UserDay{}) || string(rest) != "tail" {
		t.Errorf("DecodeKey = %v, %q, %v", v, rest, err)
	}
	vc := StructValueCodec[UserDay](ValueField(StringCodec{}, func(u *UserDay) *string { return &u.User }))
	if v, _, err := vc.DecodeValue(vc.AppendValue(nil, UserDay{User: "x", Day: 9})); err != nil || v != (UserDay{User: "x"}) {
		t.Errorf("unlisted field: decoded %v, %v; want it zero", v, err)
	}
}

func TestStructCodecsAreSafeForConcurrentUse(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 9))
			var buf []byte
			for range 500 {
				k := randUserDay(r)
				buf = userDayKey.AppendKey(buf[:0], k)
				if got, _, err := userDayKey.DecodeKey(buf); err != nil || got != k {
					t.Errorf("concurrent UserDay round trip: %v, %v; want %v", got, err, k)
					return
				}
				p := randProfile(r)
				enc := profileValue.AppendValue(nil, p)
				if got, _, err := profileValue.DecodeValue(enc); err != nil || !equalProfiles(got, profile{
					Name: p.Name, Tags: p.Tags, Scores: p.Scores, Best: p.Best, Raw: p.Raw, Seen: timeCanon(p.Seen), Marks: p.Marks, Nested: p.Nested,
				}) {
					t.Errorf("concurrent profile round trip failed: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestStructKeyCodecDoesNotAllocate(t *testing.T) {
	buf := make([]byte, 0, 64)
	k := UserDay{User: "someone", Day: 17}
	userDayKey.AppendKey(buf, k) // warm the pool
	if allocs := testing.AllocsPerRun(100, func() { buf = userDayKey.AppendKey(buf[:0], k) }); allocs != 0 {
		t.Errorf("StructKeyCodec.AppendKey allocates %v times, want 0", allocs)
	}
	enc := userDayKey.AppendKey(nil, k)
	// One allocation: the decoded string.
	if allocs := testing.AllocsPerRun(100, func() { _, _, _ = userDayKey.DecodeKey(enc) }); allocs > 1 {
		t.Errorf("StructKeyCodec.DecodeKey allocates %v times, want 1 (the string)", allocs)
	}
}

func TestCompositeCodecsKeepNilApartFromEmpty(t *testing.T) {
	sc := SliceValueCodec[string](StringCodec{})
	for _, s := range [][]string{nil, {}} {
		got, _, err := sc.DecodeValue(sc.AppendValue(nil, s))
		if err != nil || (got == nil) != (s == nil) || len(got) != 0 {
			t.Errorf("slice %#v decodes as %#v, %v", s, got, err)
		}
	}
	mc := MapValueCodec[string, int64](StringCodec{}, Int64Codec{})
	for _, m := range []map[string]int64{nil, {}} {
		got, _, err := mc.DecodeValue(mc.AppendValue(nil, m))
		if err != nil || (got == nil) != (m == nil) || len(got) != 0 {
			t.Errorf("map %#v decodes as %#v, %v", m, got, err)
		}
	}
	pc := PointerValueCodec[[]byte](BytesCodec{})
	for _, p := range []*[]byte{nil, new([]byte), ptr([]byte{})} {
		got, _, err := pc.DecodeValue(pc.AppendValue(nil, p))
		if err != nil || (got == nil) != (p == nil) || (p != nil && (*got == nil) != (*p == nil)) {
			t.Errorf("pointer %#v decodes as %#v, %v", p, got, err)
		}
	}
}

func TestMapValueCodecKeepsEveryNaNKey(t *testing.T) {
	c := MapValueCodec[float64, int](Float64Codec{}, IntCodec{})
	m := map[float64]int{1: 1}
	m[math.NaN()] = 2
	m[math.NaN()] = 3
	got, _, err := c.DecodeValue(c.AppendValue(nil, m))
	if err != nil || len(got) != 3 || got[1] != 1 {
		t.Fatalf("map with two NaN keys decodes as %v, %v", got, err)
	}
	sum := 0
	for k, v := range got {
		if k != k {
			sum += v
		}
	}
	if sum != 5 {
		t.Errorf("NaN entries hold %d in total, want 2+3", sum)
	}
}

func TestCompositeCodecsRejectCorruptInput(t *testing.T) {
	u := func(v uint64) []byte { return AppendUvarint(nil, v) }
	strMap := MapValueCodec[string, int64](StringCodec{}, Int64Codec{})
	emptyMap := MapValueCodec[struct{}, struct{}](emptyCodec{}, emptyCodec{})
	ints := SliceValueCodec[int64](Int64Codec{})
	empties := SliceValueCodec[struct{}](emptyCodec{})
	for _, tc := range []struct {
		name   string
		decode func([]byte) error
		in     []byte
		want   string
	}{
		{"pointer tag 2", errDec(PointerValueCodec[int64](Int64Codec{}).DecodeValue), []byte{2}, "pointer value: invalid tag 0x02"},
		{"pointer empty", errDec(PointerValueCodec[int64](Int64Codec{}).DecodeValue), nil, "pointer value: need 1 byte, have 0"},
		{"pointer elem", errDec(PointerValueCodec[int64](Int64Codec{}).DecodeValue), []byte{1, 0x80}, "pointer value: " + ErrCorrupt.Error() + ": int64 value: varint truncated"},
		{"slice count", errDec(ints.DecodeValue), append(u(4), 1, 2), "slice value: count 3 exceeds the 2 remaining bytes"},
		{"slice elem", errDec(ints.DecodeValue), append(u(3), 1, 0x80), "slice value element 1 of 2: " + ErrCorrupt.Error() + ": int64 value: varint truncated"},
		{"slice count overflows int", errDec(empties.DecodeValue), u(math.MaxUint64), "slice value: count 18446744073709551614 exceeds"},
		{"map count", errDec(strMap.DecodeValue), append(u(3), 0), "map value: count 2 exceeds the 1 remaining bytes"},
		{"map duplicate key", errDec(strMap.DecodeValue), append(u(3), 1, 'a', 2, 1, 'a', 4), "map value: key 1 of 2 occurs twice"},
		{"map zero-width duplicate key", errDec(emptyMap.DecodeValue), u(3), "map value: count 2 exceeds the 0 remaining bytes"},
		{"map key", errDec(strMap.DecodeValue), append(u(2), 5, 'a'), "map value key 0 of 1: " + ErrCorrupt.Error() + ": string value: length 5"},
		{"map value", errDec(strMap.DecodeValue), append(u(2), 1, 'a'), "map value element 0 of 1: " + ErrCorrupt.Error() + ": int64 value: need 1"},
		{"struct field", errDec(profileValue.DecodeValue), []byte{0, 3, 0x80, 0x80}, "runtime.profile value field 1 of 8: slice value element 0 of 2: " + ErrCorrupt.Error() + ": string value: varint truncated"},
	} {
		err := tc.decode(tc.in)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: decode(%x) = %v, want ErrCorrupt containing %q", tc.name, tc.in, err, tc.want)
		}
	}
}

// TestZeroSizeSlicesOfAnyLengthDecodeInstantly checks that a slice of
// struct{} claims any length without allocating or looping: its elements
// take no bytes, so the count cannot be bounded by the input, and it does
// not need to be.
func TestZeroSizeSlicesOfAnyLengthDecodeInstantly(t *testing.T) {
	c := SliceValueCodec[struct{}](emptyCodec{})
	enc := AppendUvarint(nil, math.MaxInt+1) // math.MaxInt elements
	var got []struct{}
	allocs := testing.AllocsPerRun(10, func() {
		var err error
		if got, _, err = c.DecodeValue(enc); err != nil {
			t.Fatal(err)
		}
	})
	if len(got) != math.MaxInt || allocs != 0 {
		t.Errorf("decoded %d elements with %v allocations, want %d and none", len(got), allocs, math.MaxInt)
	}
	if re := c.AppendValue(nil, got); !bytes.Equal(re, enc) {
		t.Errorf("re-encoded as %x, want %x", re, enc)
	}
	// A zero-size element that takes bytes is still bounded by the input.
	marked := SliceValueCodec[struct{}](funcCodec[struct{}]{
		append: func(dst []byte, _ struct{}) []byte { return append(dst, 'm') },
		decode: func(src []byte) (struct{}, []byte, error) {
			if len(src) == 0 || src[0] != 'm' {
				return struct{}{}, nil, errShort("mark", 1, len(src))
			}
			return struct{}{}, src[1:], nil
		},
	})
	if _, _, err := marked.DecodeValue(append(AppendUvarint(nil, 1<<62), "mmm"...)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("marked elements beyond the input: err = %v, want ErrCorrupt", err)
	}
	if s, rest, err := marked.DecodeValue(append(AppendUvarint(nil, 4), "mmmx"...)); err != nil || len(s) != 3 || string(rest) != "x" {
		t.Errorf("3 marked elements: %d, %q, %v", len(s), rest, err)
	}
}

func TestPreallocationIsBoundedByInput(t *testing.T) {
	for _, tc := range []struct {
		n         uint64
		remaining int
		size      uintptr
		want      int
	}{
		{10, 100, 8, 10},
		{1 << 40, 100, 8, 100},
		{1 << 40, 100, 1 << 20, 0},
		{1 << 40, 1000, 1024, 19},
		{1 << 40, 5, 0, 5},
		{math.MaxUint64, 1 << 20, 1, 1 << 20},
	} {
		if got := preallocLen(tc.n, tc.remaining, tc.size); got != tc.want {
			t.Errorf("preallocLen(%d, %d, %d) = %d, want %d", tc.n, tc.remaining, tc.size, got, tc.want)
		}
	}
}

func TestConstructorsRejectNilCodecs(t *testing.T) {
	for name, f := range map[string]func(){
		"KeyField codec":    func() { KeyField[UserDay, string](nil, func(u *UserDay) *string { return &u.User }) },
		"KeyField getter":   func() { KeyField[UserDay, string](StringCodec{}, nil) },
		"ValueField":        func() { ValueField[UserDay, string](nil, func(u *UserDay) *string { return &u.User }) },
		"StructKeyCodec":    func() { StructKeyCodec(KeyFieldCodec[UserDay]{}) },
		"StructValueCodec":  func() { StructValueCodec(ValueFieldCodec[UserDay]{}) },
		"SliceValueCodec":   func() { SliceValueCodec[int](nil) },
		"MapValueCodec":     func() { MapValueCodec[int, int](IntCodec{}, nil) },
		"PointerValueCodec": func() { PointerValueCodec[int](nil) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), "stategen: ") {
					t.Errorf("%s: recovered %v, want a stategen panic", name, r)
				}
			}()
			f()
		}()
	}
}

func BenchmarkStructKeyCodec(b *testing.B) {
	k := UserDay{User: "user-12345", Day: 20250}
	buf := make([]byte, 0, 64)
	b.Run("op=append", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			buf = userDayKey.AppendKey(buf[:0], k)
		}
	})
	enc := userDayKey.AppendKey(nil, k)
	b.Run("op=decode", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, _, err := userDayKey.DecodeKey(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
}
