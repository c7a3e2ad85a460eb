package runtime

import (
	"bytes"
	"errors"
	"math"
	"testing"
	"time"
)

// Fuzz targets, one per decoder family. Each feeds arbitrary bytes to every
// decoder of its family and checks that the decoder never panics, fails
// only with ErrCorrupt (returning the zero value and a nil rest), returns
// as rest exactly the bytes it did not consume, and is canonical: key
// decoders accept only what their encoder writes (re-encoding the decoded
// key reproduces the consumed bytes), and re-encoding a decoded value
// decodes to an equal value (for the built-in value codecs, to the same
// bytes too).
//
// Run one with, for example:
//
//	go test -run='^$' -fuzz='^FuzzFixedKeys$' -fuzztime=10s ./runtime

// fuzzDecode decodes data and checks the error and rest conventions. It
// returns the decoded value, the consumed bytes and whether decoding
// succeeded.
func fuzzDecode[T any](t *testing.T, what string, data []byte, decode func([]byte) (T, []byte, error)) (T, []byte, bool) {
	t.Helper()
	v, rest, err := decode(data)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: decode(%x): error %v does not wrap ErrCorrupt", what, data, err)
		}
		if rest != nil {
			t.Fatalf("%s: decode(%x) failed but returned rest %x", what, data, rest)
		}
		return v, nil, false
	}
	if len(rest) > len(data) || !bytes.Equal(rest, data[len(data)-len(rest):]) {
		t.Fatalf("%s: decode(%x) returned rest %x, not a suffix of its input", what, data, rest)
	}
	return v, data[:len(data)-len(rest)], true
}

// fuzzKey checks a key decoder on data: when it succeeds, the encoder
// reproduces exactly the consumed bytes.
func fuzzKey[T any](t *testing.T, what string, data []byte, decode func([]byte) (T, []byte, error), encode func([]byte, T) []byte) {
	t.Helper()
	v, consumed, ok := fuzzDecode(t, what, data, decode)
	if !ok {
		return
	}
	if re := encode(nil, v); !bytes.Equal(re, consumed) {
		t.Fatalf("%s: %x decodes to %#v, which encodes as %x: not canonical", what, consumed, v, re)
	}
}

// fuzzValue checks a value decoder on data: when it succeeds, the
// re-encoded value decodes to an equal value and, if exact, is the consumed
// bytes.
func fuzzValue[T any](t *testing.T, what string, data []byte, codec ValueCodec[T], equal func(a, b T) bool, exact bool) {
	t.Helper()
	v, consumed, ok := fuzzDecode(t, what, data, codec.DecodeValue)
	if !ok {
		return
	}
	re := codec.AppendValue(nil, v)
	if exact && !bytes.Equal(re, consumed) {
		t.Fatalf("%s: %x decodes to %#v, which encodes as %x: not canonical", what, consumed, v, re)
	}
	v2, rest, err := codec.DecodeValue(re)
	if err != nil || len(rest) != 0 || !equal(v, v2) {
		t.Fatalf("%s: %#v re-encoded as %x decodes to %#v, rest %x, %v", what, v, re, v2, rest, err)
	}
}

func FuzzFixedKeys(f *testing.F) {
	for _, seed := range [][]byte{
		nil, {0}, {1}, {2}, {0x80}, {0x7f, 0xff},
		AppendInt64Key(nil, -1), AppendUint64Key(nil, math.MaxUint64),
		AppendFloat64Key(nil, math.NaN()), AppendFloat64Key(nil, math.Inf(-1)), AppendFloat64Key(nil, 0),
		AppendFloat32Key(nil, -1.5), {0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, // -0 of float64, non-canonical
		{0xff, 0xf8, 0, 0, 0, 0, 0, 0}, // a NaN, non-canonical
		AppendTimeKey(nil, time.Unix(1_700_000_000, 999_999_999)), AppendTimeKey(nil, time.Time{}),
		append(AppendInt64Key(nil, 0), 0x3b, 0x9a, 0xca, 0x00), // 1e9 ns
		AppendDurationKey(nil, time.Hour),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzKey(t, "bool key", data, DecodeBoolKey, AppendBoolKey)
		fuzzKey(t, "int key", data, DecodeIntKey, AppendIntKey)
		fuzzKey(t, "int8 key", data, DecodeInt8Key, AppendInt8Key)
		fuzzKey(t, "int16 key", data, DecodeInt16Key, AppendInt16Key)
		fuzzKey(t, "int32 key", data, DecodeInt32Key, AppendInt32Key)
		fuzzKey(t, "int64 key", data, DecodeInt64Key, AppendInt64Key)
		fuzzKey(t, "uint key", data, DecodeUintKey, AppendUintKey)
		fuzzKey(t, "uint8 key", data, DecodeUint8Key, AppendUint8Key)
		fuzzKey(t, "uint16 key", data, DecodeUint16Key, AppendUint16Key)
		fuzzKey(t, "uint32 key", data, DecodeUint32Key, AppendUint32Key)
		fuzzKey(t, "uint64 key", data, DecodeUint64Key, AppendUint64Key)
		fuzzKey(t, "float32 key", data, DecodeFloat32Key, AppendFloat32Key)
		fuzzKey(t, "float64 key", data, DecodeFloat64Key, AppendFloat64Key)
		fuzzKey(t, "time key", data, DecodeTimeKey, AppendTimeKey)
		fuzzKey(t, "duration key", data, DecodeDurationKey, AppendDurationKey)

		// Two keys decoded from the input compare like their values.
		if len(data) >= 16 {
			a, _, errA := DecodeFloat64Key(data[:8])
			b, _, errB := DecodeFloat64Key(data[8:16])
			if errA == nil && errB == nil {
				if got, want := bytes.Compare(data[:8], data[8:16]), sign(compareFloats(a, b)); got != want {
					t.Fatalf("float64 keys %x and %x (%v, %v) compare %d, values %d", data[:8], data[8:16], a, b, got, want)
				}
			}
		}
	})
}

// compareFloats is cmp.Compare, spelled out so that the fuzz target checks
// the documented order (NaN first, -0 == +0) independently.
func compareFloats(a, b float64) int {
	switch {
	case a != a && b != b:
		return 0
	case a != a:
		return -1
	case b != b:
		return 1
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func FuzzStringKeys(f *testing.F) {
	for _, s := range []string{"", "a", "\x00", "\x00\xff", "\x00\x01", "a\x00b", "\xff\xff"} {
		f.Add(AppendStringKey(nil, s))
	}
	for _, seed := range []string{"", "abc", "a\x00", "a\x00\x02\x00\x01", "\x00\x00\x01", "\x00\xff\x00", "x\x00\x01tail"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzKey(t, "string key", data, DecodeStringKey, AppendStringKey)
		fuzzKey(t, "bytes key", data, DecodeBytesKey, AppendBytesKey)
		s, sRest, sErr := DecodeStringKey(data)
		b, bRest, bErr := DecodeBytesKey(data)
		if (sErr == nil) != (bErr == nil) || s != string(b) || len(sRest) != len(bRest) {
			t.Fatalf("string and bytes keys disagree on %x: %q, %v vs %q, %v", data, s, sErr, b, bErr)
		}
		if bErr == nil && b == nil {
			t.Fatalf("bytes key %x decodes to nil, want a non-nil slice", data)
		}
		if len(s) > len(data) {
			t.Fatalf("string key %x decodes to %d bytes, more than its input", data, len(s))
		}
	})
}

func FuzzVarintValues(f *testing.F) {
	for _, seed := range [][]byte{
		nil, {0}, {1}, {2}, {0x7f}, {0x80}, {0x80, 0}, {0xff, 1},
		AppendUvarint(nil, math.MaxUint64), AppendVarint(nil, math.MinInt64),
		AppendUvarint(nil, math.MaxUint16+1), AppendVarint(nil, math.MinInt32-1),
		bytes.Repeat([]byte{0xff}, 11),
		AppendFloat64Value(nil, math.NaN()), AppendTimeValue(nil, time.Unix(-1, 999_999_999)),
		append(AppendVarint(nil, 0), AppendUvarint(nil, 1e9)...),
	} {
		f.Add(seed)
	}
	floatBits64 := func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }
	floatBits32 := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzValue(t, "bool value", data, BoolCodec{}, eq[bool], true)
		fuzzValue(t, "int value", data, IntCodec{}, eq[int], true)
		fuzzValue(t, "int8 value", data, Int8Codec{}, eq[int8], true)
		fuzzValue(t, "int16 value", data, Int16Codec{}, eq[int16], true)
		fuzzValue(t, "int32 value", data, Int32Codec{}, eq[int32], true)
		fuzzValue(t, "int64 value", data, Int64Codec{}, eq[int64], true)
		fuzzValue(t, "uint value", data, UintCodec{}, eq[uint], true)
		fuzzValue(t, "uint8 value", data, Uint8Codec{}, eq[uint8], true)
		fuzzValue(t, "uint16 value", data, Uint16Codec{}, eq[uint16], true)
		fuzzValue(t, "uint32 value", data, Uint32Codec{}, eq[uint32], true)
		fuzzValue(t, "uint64 value", data, Uint64Codec{}, eq[uint64], true)
		fuzzValue(t, "float32 value", data, Float32Codec{}, floatBits32, true)
		fuzzValue(t, "float64 value", data, Float64Codec{}, floatBits64, true)
		fuzzValue(t, "time value", data, TimeCodec{}, eq[time.Time], true)
		fuzzValue(t, "duration value", data, DurationCodec{}, eq[time.Duration], true)
		fuzzValue(t, "uvarint", data, funcCodec[uint64]{AppendUvarint, DecodeUvarint}, eq[uint64], true)
		fuzzValue(t, "varint", data, funcCodec[int64]{AppendVarint, DecodeVarint}, eq[int64], true)

		// The 8-byte paths of uvarint and DecodeTimeValue agree with the
		// byte-by-byte decode, on values and on errors.
		checkVarintPaths(t, data)

		// DecodeLen never returns a length beyond the input.
		if n, rest, err := DecodeLen(data); err == nil && (n < 0 || n > len(rest)) {
			t.Fatalf("DecodeLen(%x) = %d with %d bytes left", data, n, len(rest))
		}
	})
}

func FuzzBytesValues(f *testing.F) {
	for _, seed := range [][]byte{
		nil, {0}, {1}, {2, 0}, AppendStringValue(nil, "a\x00b"), AppendBytesValue(nil, []byte("xyz")),
		AppendUvarint(nil, 1<<40), AppendUvarint(nil, math.MaxUint64), {5, 'a', 'b'},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzValue(t, "string value", data, StringCodec{}, eq[string], true)
		fuzzValue(t, "bytes value", data, BytesCodec{}, bytesValueEqual, true)
		if s, _, err := DecodeStringValue(data); err == nil && len(s) > len(data) {
			t.Fatalf("string value %x decodes to %d bytes, more than its input", data, len(s))
		}
	})
}

func FuzzStructCodecs(f *testing.F) {
	best := int64(3)
	yes := true
	for _, seed := range [][]byte{
		nil, {0}, {0, 1, 0, 1},
		userDayKey.AppendKey(nil, UserDay{User: "a\x00", Day: -2}),
		eventKey.AppendKey(nil, event{At: time.Unix(5, 6), Score: math.Inf(-1), Late: true, Raw: []byte{0}}),
		profileValue.AppendValue(nil, profile{}),
		profileValue.AppendValue(nil, profile{
			Name: "n", Tags: []string{"t"}, Scores: map[string]float64{"s": 1}, Best: &best, Raw: []byte{},
			Seen: time.Unix(7, 8), Marks: make([]struct{}, 3), Nested: map[int32][]*bool{1: {nil, &yes}},
		}),
		append(append([]byte{0, 0, 0, 0, 0, 0, 0}, AppendUvarint(nil, math.MaxInt64+1)...), 0), // Marks of maximal length
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzKey(t, "UserDay key", data, userDayKey.DecodeKey, userDayKey.AppendKey)
		fuzzKey(t, "event key", data, eventKey.DecodeKey, eventKey.AppendKey)
		fuzzValue(t, "profile value", data, profileValue, equalProfiles, false)
	})
}
