package runtime

import (
	"bytes"
	"cmp"
	"math"
	"strings"
	"testing"
	"time"
)

// FuzzKeyOrder decodes two keys, one after the other, from arbitrary bytes
// with every built-in key decoder and the struct key codecs of the tests.
// When both decode, the bytes each was decoded from must compare like the
// keys, by the documented order of their type: bytewise order is logical
// order for every key the decoders accept, not only for those the encoders
// were tested on. (FuzzFixedKeys, FuzzStringKeys and FuzzStructCodecs check
// that decoding is canonical; this checks the order.)
//
//	go test -run='^$' -fuzz='^FuzzKeyOrder$' -fuzztime=10s ./runtime
func FuzzKeyOrder(f *testing.F) {
	for _, seed := range [][]byte{
		nil, {0, 1}, {1, 0},
		AppendInt64Key(AppendInt64Key(nil, -1), 0),
		AppendUint32Key(AppendUint32Key(nil, 7), 7),
		AppendFloat64Key(AppendFloat64Key(nil, math.NaN()), math.Inf(-1)),
		AppendFloat32Key(AppendFloat32Key(nil, -0.5), 0),
		AppendTimeKey(AppendTimeKey(nil, time.Unix(minUnix, 0)), time.Unix(maxUnix, 999_999_999)),
		AppendTimeKey(AppendTimeKey(nil, time.Unix(math.MaxInt64, 0)), time.Unix(0, 0)), // a wrapped time first
		AppendStringKey(AppendStringKey(nil, "a"), "a\x00"),
		AppendBytesKey(AppendBytesKey(nil, []byte{0xff}), []byte{0, 0xff}),
		userDayKey.AppendKey(userDayKey.AppendKey(nil, UserDay{"a", 1}), UserDay{"a\x00", -1}),
		eventKey.AppendKey(eventKey.AppendKey(nil, event{Score: math.NaN()}), event{Late: true, Raw: []byte{0}}),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkKeyOrder(t, "bool key", data, DecodeBoolKey, func(a, b bool) int { return cmp.Compare(b2u8(a), b2u8(b)) })
		checkKeyOrder(t, "int key", data, DecodeIntKey, cmp.Compare[int])
		checkKeyOrder(t, "int8 key", data, DecodeInt8Key, cmp.Compare[int8])
		checkKeyOrder(t, "int16 key", data, DecodeInt16Key, cmp.Compare[int16])
		checkKeyOrder(t, "int32 key", data, DecodeInt32Key, cmp.Compare[int32])
		checkKeyOrder(t, "int64 key", data, DecodeInt64Key, cmp.Compare[int64])
		checkKeyOrder(t, "uint key", data, DecodeUintKey, cmp.Compare[uint])
		checkKeyOrder(t, "uint8 key", data, DecodeUint8Key, cmp.Compare[uint8])
		checkKeyOrder(t, "uint16 key", data, DecodeUint16Key, cmp.Compare[uint16])
		checkKeyOrder(t, "uint32 key", data, DecodeUint32Key, cmp.Compare[uint32])
		checkKeyOrder(t, "uint64 key", data, DecodeUint64Key, cmp.Compare[uint64])
		checkKeyOrder(t, "float32 key", data, DecodeFloat32Key, func(a, b float32) int { return compareFloats(float64(a), float64(b)) })
		checkKeyOrder(t, "float64 key", data, DecodeFloat64Key, compareFloats)
		checkKeyOrder(t, "time key", data, DecodeTimeKey, compareTimeKeys)
		checkKeyOrder(t, "duration key", data, DecodeDurationKey, cmp.Compare[time.Duration])
		checkKeyOrder(t, "string key", data, DecodeStringKey, strings.Compare)
		checkKeyOrder(t, "bytes key", data, DecodeBytesKey, bytes.Compare)
		checkKeyOrder(t, "UserDay key", data, userDayKey.DecodeKey, compareUserDay)
		checkKeyOrder(t, "event key", data, eventKey.DecodeKey, func(a, b event) int {
			return cmp.Or(compareTimeKeys(a.At, b.At), compareFloats(a.Score, b.Score),
				cmp.Compare(b2u8(a.Late), b2u8(b.Late)), bytes.Compare(a.Raw, b.Raw))
		})
	})
}

// checkKeyOrder decodes two keys from data and, if both decode, checks that
// their encodings compare like the keys.
func checkKeyOrder[T any](t *testing.T, what string, data []byte, decode func([]byte) (T, []byte, error), compare func(a, b T) int) {
	t.Helper()
	a, rest, err := decode(data)
	if err != nil {
		return
	}
	encA := data[:len(data)-len(rest)]
	b, tail, err := decode(rest)
	if err != nil {
		return
	}
	encB := rest[:len(rest)-len(tail)]
	if got, want := bytes.Compare(encA, encB), sign(compare(a, b)); got != want {
		t.Fatalf("%s: %x and %x compare %d, but they decode to %#v and %#v, which compare %d", what, encA, encB, got, a, b, want)
	}
}

// compareTimeKeys is the documented order of time keys (see AppendTimeKey):
// chronological, except that the times below time.Unix(math.MinInt64, 0),
// whose Unix seconds wrap, sort after every other time.
func compareTimeKeys(a, b time.Time) int {
	first := time.Unix(minUnix, 0)
	if wa, wb := a.Before(first), b.Before(first); wa != wb {
		if wa {
			return 1
		}
		return -1
	}
	return a.Compare(b)
}
