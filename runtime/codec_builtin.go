package runtime

// Built-in codecs.
//
// This file holds the encodings of Go's basic types, as small functions that
// generated code calls directly (no interface call, no reflection; the
// fixed-width ones inline), and the zero-size Codec types that wrap them.
//
// Key encodings are order-preserving and prefix-free (see KeyCodec):
//
//	bool            1 byte, 0 or 1
//	uint8..uint64   big-endian, fixed width; uint as uint64
//	int8..int64     big-endian with the sign bit flipped, fixed width; int as int64
//	float32/64      IEEE bits, big-endian: sign bit flipped if positive, all
//	                bits flipped if negative; -0 as +0; every NaN as all zero
//	                bytes, below -Inf
//	string, []byte  bytes with 0x00 escaped as 0x00 0xFF, then 0x00 0x01
//	time.Time       Unix seconds as an int64 key, then nanoseconds as a
//	                big-endian uint32: 12 bytes
//	time.Duration   as int64
//
// Value encodings are compact and never compared:
//
//	bool            1 byte, 0 or 1
//	int8, uint8     1 raw byte
//	int16..int64    zigzag varint; int as int64
//	uint16..uint64  uvarint; uint as uint64
//	float32/64      IEEE bits, little-endian, fixed width (NaN payloads kept)
//	string          uvarint length, bytes
//	[]byte          uvarint 0 for nil, else uvarint length+1, bytes
//	time.Time       zigzag varint Unix seconds, uvarint nanoseconds
//	time.Duration   zigzag varint
//
// Every encoding has exactly one accepted form: decoders reject what no
// encoder writes (a bool byte other than 0 or 1, a non-minimal varint, a
// non-canonical float key, nanoseconds >= 1e9, an invalid escape), so
// AppendX(decodeX(b)) reproduces the bytes decodeX consumed. Decoders never
// panic, never allocate more than their input justifies, and return errors
// that wrap ErrCorrupt and name what was being decoded. On error the decoded
// value is the zero value and rest is nil.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	mathbits "math/bits"
	"slices"
	"strings"
	"time"
)

// decodeError is the error of the built-in decoders. It records what was
// being decoded and why it failed, and is formatted only when printed, so
// that building it is one small allocation and the decoders stay small
// enough to inline.
type decodeError struct {
	what   string // what was being decoded: "int64 key", "string value"
	reason reason
	a, b   uint64 // reason-specific operands
}

type reason uint8

const (
	reasonShort        reason = iota // need a bytes, have b
	reasonBool                       // byte a is neither 0 nor 1
	reasonRangeU                     // unsigned value a out of range
	reasonRangeS                     // signed value int64(a) out of range
	reasonNanos                      // nanoseconds a >= 1e9
	reasonFloat                      // non-canonical float key bits a
	reasonOverflow                   // varint overflows 64 bits
	reasonNonMinimal                 // varint not in minimal form
	reasonTruncated                  // varint truncated after a bytes
	reasonLength                     // length a exceeds the b remaining bytes
	reasonCount                      // count a exceeds the b remaining bytes
	reasonNoTerminator               // no 0x00 0x01 terminator in a bytes
	reasonEscape                     // byte a follows 0x00 at offset b
	reasonTag                        // pointer tag a is neither 0 nor 1
	reasonDup                        // a map key occurs twice
)

func (e *decodeError) Error() string {
	var detail string
	switch e.reason {
	case reasonShort:
		unit := "bytes"
		if e.a == 1 {
			unit = "byte"
		}
		detail = fmt.Sprintf("need %d %s, have %d", e.a, unit, e.b)
	case reasonBool:
		detail = fmt.Sprintf("invalid byte 0x%02x, want 0x00 or 0x01", e.a)
	case reasonRangeU:
		detail = fmt.Sprintf("value %d out of range", e.a)
	case reasonRangeS:
		detail = fmt.Sprintf("value %d out of range", int64(e.a))
	case reasonNanos:
		detail = fmt.Sprintf("nanoseconds %d out of range [0, 999999999]", e.a)
	case reasonFloat:
		detail = fmt.Sprintf("non-canonical encoding %#x (a NaN other than the canonical one, or -0)", e.a)
	case reasonOverflow:
		detail = "varint overflows 64 bits"
	case reasonNonMinimal:
		detail = "varint is not in minimal form"
	case reasonTruncated:
		detail = fmt.Sprintf("varint truncated after %d bytes", e.a)
	case reasonLength:
		detail = fmt.Sprintf("length %d exceeds the %d remaining bytes", e.a, e.b)
	case reasonCount:
		detail = fmt.Sprintf("count %d exceeds the %d remaining bytes", e.a, e.b)
	case reasonNoTerminator:
		detail = fmt.Sprintf("no 0x00 0x01 terminator in %d bytes", e.a)
	case reasonTag:
		detail = fmt.Sprintf("invalid tag 0x%02x, want 0x00 or 0x01", e.a)
	case reasonDup:
		detail = "a key occurs twice"
	case reasonEscape:
		detail = fmt.Sprintf("invalid escape 0x00 0x%02x at offset %d, want 0x00 0xff or 0x00 0x01", e.a, e.b)
	}
	return ErrCorrupt.Error() + ": " + e.what + ": " + detail
}

func (e *decodeError) Unwrap() error { return ErrCorrupt }

func errShort(what string, need, have int) error {
	return &decodeError{what: what, reason: reasonShort, a: uint64(need), b: uint64(have)}
}

func errBool(what string, b byte) error {
	return &decodeError{what: what, reason: reasonBool, a: uint64(b)}
}

func errRangeU(what string, v uint64) error {
	return &decodeError{what: what, reason: reasonRangeU, a: v}
}

func errRangeS(what string, v int64) error {
	return &decodeError{what: what, reason: reasonRangeS, a: uint64(v)}
}

func errNanos(what string, ns uint64) error {
	return &decodeError{what: what, reason: reasonNanos, a: ns}
}

func errFloat(what string, bits uint64) error {
	return &decodeError{what: what, reason: reasonFloat, a: bits}
}

func errLength(what string, n uint64, remaining int) error {
	return &decodeError{what: what, reason: reasonLength, a: n, b: uint64(remaining)}
}

// ---------------------------------------------------------------------------
// Varints

// AppendUvarint appends v as an unsigned varint (encoding/binary's format:
// 7 bits per byte, least significant first, high bit set on all but the
// last byte).
func AppendUvarint(dst []byte, v uint64) []byte {
	return binary.AppendUvarint(dst, v)
}

// DecodeUvarint decodes an unsigned varint written by AppendUvarint from the
// front of src. It rejects a truncated varint, one that overflows 64 bits and
// one that is not in minimal form (a redundant trailing zero group).
func DecodeUvarint(src []byte) (v uint64, rest []byte, err error) {
	return uvarint(src, "uvarint")
}

// AppendVarint appends v as a zigzag-encoded varint: 0, -1, 1, -2, ... map
// to 0, 1, 2, 3, ..., so that small magnitudes of either sign take few bytes.
func AppendVarint(dst []byte, v int64) []byte {
	return binary.AppendUvarint(dst, uint64(v<<1)^uint64(v>>63))
}

// DecodeVarint decodes a zigzag varint written by AppendVarint from the front
// of src, with the checks of DecodeUvarint.
func DecodeVarint(src []byte) (v int64, rest []byte, err error) {
	return varint(src, "varint")
}

// DecodeLen decodes a uvarint length from the front of src and checks that
// it does not exceed the bytes that follow it, so that a caller may allocate
// n bytes (or n elements of at least one byte each) without trusting the
// input. Generated code for strings, slices and maps calls it.
func DecodeLen(src []byte) (n int, rest []byte, err error) {
	return decodeLen(src, "length")
}

// uvarint is DecodeUvarint with the name of what is being decoded, for
// errors. Every integer, length and count decoder calls it, so it is flat:
// a decode costs this one call. A varint of up to 8 bytes decodes from one
// 8-byte load (varint8). One of 9 or 10 bytes, one within 8 bytes of the end
// of src (where a copy to load from would cost more) and input that is not
// a minimal varint go byte by byte, which also finds the errors.
func uvarint(src []byte, what string) (uint64, []byte, error) {
	if len(src) > 0 && src[0] < 0x80 {
		return uint64(src[0]), src[1:], nil
	}
	if len(src) >= 8 {
		if x, n, ok := varint8(binary.LittleEndian.Uint64(src)); ok {
			return x, src[n:], nil
		}
	}
	return uvarintLoop(src, what)
}

// varint8 decodes the varint at the front of the 8 bytes w holds
// (little-endian), without a branch per byte: the first byte whose high bit
// is clear ends it. It returns the value and the length, and ok false if
// the varint is longer than 8 bytes or not in minimal form (a last byte of
// zero after the first).
func varint8(w uint64) (x uint64, n int, ok bool) {
	stop := ^w & 0x8080_8080_8080_8080
	w &= stop ^ (stop - 1) // the bytes of the varint, or all if none ends it
	n = mathbits.TrailingZeros64(stop)/8 + 1
	// A last byte of zero, after a first, is not minimal: then w has no
	// bit at or above the last byte's first (|1 passes a one-byte zero).
	return compact7(w), n, stop != 0 && (w|1)>>(8*n-8) != 0
}

// compact7 gathers the low 7 bits of each byte of w into one number, the
// first byte's bits lowest: the value of a varint of up to 8 bytes loaded
// little-endian, its bytes past the end cleared.
func compact7(w uint64) uint64 {
	w &= 0x7f7f_7f7f_7f7f_7f7f
	w = w&0x007f_007f_007f_007f | w>>1&0x3f80_3f80_3f80_3f80
	w = w&0x0000_3fff_0000_3fff | w>>2&0x0fff_c000_0fff_c000
	return w&0x0000_0000_0fff_ffff | w>>4&0x00ff_ffff_f000_0000
}

// uvarintLoop decodes a varint byte by byte.
func uvarintLoop(src []byte, what string) (uint64, []byte, error) {
	if len(src) == 0 {
		return 0, nil, errShort(what, 1, 0)
	}
	var x uint64
	for i := 0; i < len(src); i++ {
		b := src[i]
		if i == binary.MaxVarintLen64-1 && b > 1 {
			return 0, nil, &decodeError{what: what, reason: reasonOverflow}
		}
		if b < 0x80 {
			if b == 0 && i > 0 {
				return 0, nil, &decodeError{what: what, reason: reasonNonMinimal}
			}
			return x | uint64(b)<<(7*i), src[i+1:], nil
		}
		x |= uint64(b&0x7f) << (7 * i)
	}
	return 0, nil, &decodeError{what: what, reason: reasonTruncated, a: uint64(len(src))}
}

// varint is DecodeVarint with the name of what is being decoded, for
// errors. It inlines, so that a decode costs the one call of uvarint.
func varint(src []byte, what string) (v int64, rest []byte, err error) {
	u, rest, err := uvarint(src, what)
	return int64(u>>1) ^ -int64(u&1), rest, err // zigzag: see AppendVarint
}

func decodeLen(src []byte, what string) (int, []byte, error) {
	u, rest, err := uvarint(src, what)
	if err != nil {
		return 0, nil, err
	}
	if u > uint64(len(rest)) {
		return 0, nil, errLength(what, u, len(rest))
	}
	return int(u), rest, nil
}

// ---------------------------------------------------------------------------
// Keys: bool and integers

// AppendBoolKey appends the key encoding of v: one byte, 0 for false and 1
// for true, so false sorts before true.
func AppendBoolKey(dst []byte, v bool) []byte {
	return append(dst, b2u8(v))
}

// DecodeBoolKey decodes a key written by AppendBoolKey. A byte other than 0
// or 1 is an error.
func DecodeBoolKey(src []byte) (v bool, rest []byte, err error) {
	if len(src) == 0 {
		return false, nil, errShort("bool key", 1, 0)
	}
	if src[0] > 1 {
		return false, nil, errBool("bool key", src[0])
	}
	return src[0] == 1, src[1:], nil
}

func b2u8(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// AppendUint8Key appends the key encoding of v: the byte itself.
func AppendUint8Key(dst []byte, v uint8) []byte {
	return append(dst, v)
}

// DecodeUint8Key decodes a key written by AppendUint8Key.
func DecodeUint8Key(src []byte) (v uint8, rest []byte, err error) {
	if len(src) < 1 {
		return 0, nil, errShort("uint8 key", 1, 0)
	}
	return src[0], src[1:], nil
}

// AppendUint16Key appends the key encoding of v: 2 bytes, big-endian.
func AppendUint16Key(dst []byte, v uint16) []byte {
	return binary.BigEndian.AppendUint16(dst, v)
}

// DecodeUint16Key decodes a key written by AppendUint16Key.
func DecodeUint16Key(src []byte) (v uint16, rest []byte, err error) {
	if len(src) < 2 {
		return 0, nil, errShort("uint16 key", 2, len(src))
	}
	return binary.BigEndian.Uint16(src), src[2:], nil
}

// AppendUint32Key appends the key encoding of v: 4 bytes, big-endian.
func AppendUint32Key(dst []byte, v uint32) []byte {
	return binary.BigEndian.AppendUint32(dst, v)
}

// DecodeUint32Key decodes a key written by AppendUint32Key.
func DecodeUint32Key(src []byte) (v uint32, rest []byte, err error) {
	if len(src) < 4 {
		return 0, nil, errShort("uint32 key", 4, len(src))
	}
	return binary.BigEndian.Uint32(src), src[4:], nil
}

// AppendUint64Key appends the key encoding of v: 8 bytes, big-endian.
func AppendUint64Key(dst []byte, v uint64) []byte {
	return binary.BigEndian.AppendUint64(dst, v)
}

// DecodeUint64Key decodes a key written by AppendUint64Key.
func DecodeUint64Key(src []byte) (v uint64, rest []byte, err error) {
	if len(src) < 8 {
		return 0, nil, errShort("uint64 key", 8, len(src))
	}
	return binary.BigEndian.Uint64(src), src[8:], nil
}

// AppendUintKey appends the key encoding of v, that of uint64 (8 bytes on
// every platform, so keys do not depend on the machine that wrote them).
func AppendUintKey(dst []byte, v uint) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(v))
}

// DecodeUintKey decodes a key written by AppendUintKey. On a 32-bit platform
// a key that does not fit in uint is an error.
func DecodeUintKey(src []byte) (v uint, rest []byte, err error) {
	if len(src) < 8 {
		return 0, nil, errShort("uint key", 8, len(src))
	}
	u := binary.BigEndian.Uint64(src)
	if uint64(uint(u)) != u {
		return 0, nil, errRangeU("uint key", u)
	}
	return uint(u), src[8:], nil
}

// AppendInt8Key appends the key encoding of v: one byte with the sign bit
// flipped, so that negative numbers sort before non-negative ones.
func AppendInt8Key(dst []byte, v int8) []byte {
	return append(dst, uint8(v)^0x80)
}

// DecodeInt8Key decodes a key written by AppendInt8Key.
func DecodeInt8Key(src []byte) (v int8, rest []byte, err error) {
	if len(src) < 1 {
		return 0, nil, errShort("int8 key", 1, 0)
	}
	return int8(src[0] ^ 0x80), src[1:], nil
}

// AppendInt16Key appends the key encoding of v: 2 bytes, big-endian, sign
// bit flipped.
func AppendInt16Key(dst []byte, v int16) []byte {
	return binary.BigEndian.AppendUint16(dst, uint16(v)^(1<<15))
}

// DecodeInt16Key decodes a key written by AppendInt16Key.
func DecodeInt16Key(src []byte) (v int16, rest []byte, err error) {
	if len(src) < 2 {
		return 0, nil, errShort("int16 key", 2, len(src))
	}
	return int16(binary.BigEndian.Uint16(src) ^ (1 << 15)), src[2:], nil
}

// AppendInt32Key appends the key encoding of v: 4 bytes, big-endian, sign
// bit flipped.
func AppendInt32Key(dst []byte, v int32) []byte {
	return binary.BigEndian.AppendUint32(dst, uint32(v)^(1<<31))
}

// DecodeInt32Key decodes a key written by AppendInt32Key.
func DecodeInt32Key(src []byte) (v int32, rest []byte, err error) {
	if len(src) < 4 {
		return 0, nil, errShort("int32 key", 4, len(src))
	}
	return int32(binary.BigEndian.Uint32(src) ^ (1 << 31)), src[4:], nil
}

// AppendInt64Key appends the key encoding of v: 8 bytes, big-endian, sign
// bit flipped.
func AppendInt64Key(dst []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(v)^(1<<63))
}

// DecodeInt64Key decodes a key written by AppendInt64Key.
func DecodeInt64Key(src []byte) (v int64, rest []byte, err error) {
	if len(src) < 8 {
		return 0, nil, errShort("int64 key", 8, len(src))
	}
	return int64(binary.BigEndian.Uint64(src) ^ (1 << 63)), src[8:], nil
}

// AppendIntKey appends the key encoding of v, that of int64 (8 bytes on
// every platform).
func AppendIntKey(dst []byte, v int) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(v)^(1<<63))
}

// DecodeIntKey decodes a key written by AppendIntKey. On a 32-bit platform a
// key that does not fit in int is an error.
func DecodeIntKey(src []byte) (v int, rest []byte, err error) {
	if len(src) < 8 {
		return 0, nil, errShort("int key", 8, len(src))
	}
	i := int64(binary.BigEndian.Uint64(src) ^ (1 << 63))
	if int64(int(i)) != i {
		return 0, nil, errRangeS("int key", i)
	}
	return int(i), src[8:], nil
}

// AppendDurationKey appends the key encoding of d, that of int64.
func AppendDurationKey(dst []byte, d time.Duration) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(d)^(1<<63))
}

// DecodeDurationKey decodes a key written by AppendDurationKey.
func DecodeDurationKey(src []byte) (d time.Duration, rest []byte, err error) {
	if len(src) < 8 {
		return 0, nil, errShort("duration key", 8, len(src))
	}
	return time.Duration(binary.BigEndian.Uint64(src) ^ (1 << 63)), src[8:], nil
}

// ---------------------------------------------------------------------------
// Keys: floats

// Float keys order like cmp.Compare: every NaN is one key that sorts below
// -Inf, and -0 equals +0. The encoding is the IEEE bits, big-endian, with
// the sign bit flipped for positive numbers and every bit flipped for
// negative ones, except that every NaN encodes as all zero bytes (which no
// number uses: it would be the complement of a negative NaN) and -0 encodes
// as +0. Decoding therefore yields the canonical NaN for every NaN and +0
// for -0; the decoders reject the encodings no encoder writes (another NaN,
// the encoding of -0).

const (
	f64Sign = 1 << 63
	f64Inf  = 0x7ff0_0000_0000_0000 // bits of +Inf; larger magnitudes are NaNs
	f32Sign = 1 << 31
	f32Inf  = 0x7f80_0000
)

// AppendFloat64Key appends the 8-byte key encoding of v. Keys order like
// cmp.Compare: NaN (every NaN, encoded as eight zero bytes) < -Inf < ... <
// -0 == +0 < ... < +Inf. -0 encodes as +0, so they are the same key.
func AppendFloat64Key(dst []byte, v float64) []byte {
	return binary.BigEndian.AppendUint64(dst, float64KeyBits(v))
}

func float64KeyBits(v float64) uint64 {
	switch b := math.Float64bits(v); {
	case v != v:
		return 0
	case v == 0:
		return f64Sign
	case b&f64Sign != 0:
		return ^b
	default:
		return b | f64Sign
	}
}

// DecodeFloat64Key decodes a key written by AppendFloat64Key. Eight zero
// bytes decode to NaN, the encoding of +0 to +0. Other NaN encodings and the
// encoding -0 would have without canonicalization are errors.
func DecodeFloat64Key(src []byte) (v float64, rest []byte, err error) {
	if len(src) < 8 {
		return 0, nil, errShort("float64 key", 8, len(src))
	}
	u := binary.BigEndian.Uint64(src)
	var b uint64
	switch {
	case u == 0:
		return math.NaN(), src[8:], nil
	case u&f64Sign != 0:
		b = u &^ f64Sign
	default:
		b = ^u
	}
	if b == f64Sign || b&^f64Sign > f64Inf {
		return 0, nil, errFloat("float64 key", u)
	}
	return math.Float64frombits(b), src[8:], nil
}

// AppendFloat32Key appends the 4-byte key encoding of v, with the order and
// canonicalization of AppendFloat64Key: every NaN encodes as four zero bytes
// and sorts first, -0 encodes as +0.
func AppendFloat32Key(dst []byte, v float32) []byte {
	return binary.BigEndian.AppendUint32(dst, float32KeyBits(v))
}

func float32KeyBits(v float32) uint32 {
	switch b := math.Float32bits(v); {
	case v != v:
		return 0
	case v == 0:
		return f32Sign
	case b&f32Sign != 0:
		return ^b
	default:
		return b | f32Sign
	}
}

// DecodeFloat32Key decodes a key written by AppendFloat32Key, with the checks
// of DecodeFloat64Key.
func DecodeFloat32Key(src []byte) (v float32, rest []byte, err error) {
	if len(src) < 4 {
		return 0, nil, errShort("float32 key", 4, len(src))
	}
	u := binary.BigEndian.Uint32(src)
	var b uint32
	switch {
	case u == 0:
		return float32(math.NaN()), src[4:], nil
	case u&f32Sign != 0:
		b = u &^ f32Sign
	default:
		b = ^u
	}
	if b == f32Sign || b&^f32Sign > f32Inf {
		return 0, nil, errFloat("float32 key", uint64(u))
	}
	return math.Float32frombits(b), src[4:], nil
}

// ---------------------------------------------------------------------------
// Keys: time

// Time keys are the Unix seconds as an int64 key (big-endian, sign bit
// flipped) followed by the nanoseconds within the second as a big-endian
// uint32: 12 bytes, ordered like time.Time.Compare. The encoding holds
// every instant time.Time can represent, with no overflow, so decoding is
// exact; the only exception to the order is the bottom 62135596800 seconds
// (1969 years) of time.Time's range, below time.Unix(math.MinInt64, 0),
// whose Unix seconds wrap around int64 and which sort after every other time.
// Only wrapping constructions such as time.Unix(math.MaxInt64, 0) reach them.
//
// The location and the monotonic clock reading are not stored: a decoded
// time is in UTC with no monotonic reading, equal by == to t.UTC().Round(0)
// for the encoded t (and so equal to t by Equal).

// AppendTimeKey appends the 12-byte key encoding of t: Unix seconds as an
// int64 key, then nanoseconds as a big-endian uint32. The location and the
// monotonic reading of t are not encoded.
func AppendTimeKey(dst []byte, t time.Time) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.Unix())^(1<<63))
	return binary.BigEndian.AppendUint32(dst, uint32(t.Nanosecond()))
}

// DecodeTimeKey decodes a key written by AppendTimeKey into a UTC time
// without monotonic reading. Nanoseconds of 1e9 or more are an error.
func DecodeTimeKey(src []byte) (t time.Time, rest []byte, err error) {
	if len(src) < 12 {
		return time.Time{}, nil, errShort("time key", 12, len(src))
	}
	sec := int64(binary.BigEndian.Uint64(src) ^ (1 << 63))
	nsec := binary.BigEndian.Uint32(src[8:])
	if nsec >= 1e9 {
		return time.Time{}, nil, errNanos("time key", uint64(nsec))
	}
	return time.Unix(sec, int64(nsec)).UTC(), src[12:], nil
}

// ---------------------------------------------------------------------------
// Keys: strings and bytes

// AppendStringKey appends the key encoding of s: its bytes with every 0x00
// escaped as 0x00 0xFF, then the terminator 0x00 0x01. The terminator sorts
// below every escaped or literal byte, so a string sorts before its
// extensions, and keys order like strings.Compare.
func AppendStringKey(dst []byte, s string) []byte {
	dst = slices.Grow(dst, len(s)+2)
	for {
		i := strings.IndexByte(s, 0)
		if i < 0 {
			break
		}
		dst = append(dst, s[:i+1]...)
		dst = append(dst, 0xff)
		s = s[i+1:]
	}
	dst = append(dst, s...)
	return append(dst, 0, 1)
}

// DecodeStringKey decodes a key written by AppendStringKey. A 0x00 followed
// by anything but 0xFF or 0x01, or a missing terminator, is an error. The
// string is a copy: it does not alias src.
func DecodeStringKey(src []byte) (s string, rest []byte, err error) {
	n, end, err := scanEscaped(src, "string key")
	if err != nil {
		return "", nil, err
	}
	if n == end-2 { // no escapes
		return string(src[:n]), src[end:], nil
	}
	var sb strings.Builder
	sb.Grow(n)
	for enc := src[:end-2]; ; {
		i := bytes.IndexByte(enc, 0)
		if i < 0 {
			sb.Write(enc)
			break
		}
		sb.Write(enc[:i+1]) // the 0x00 of an escape is the decoded 0x00
		enc = enc[i+2:]
	}
	return sb.String(), src[end:], nil
}

// AppendBytesKey appends the key encoding of b, that of string(b): keys
// order like bytes.Compare. A nil and an empty slice are the same key.
func AppendBytesKey(dst []byte, b []byte) []byte {
	dst = slices.Grow(dst, len(b)+2)
	for {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			break
		}
		dst = append(dst, b[:i+1]...)
		dst = append(dst, 0xff)
		b = b[i+1:]
	}
	dst = append(dst, b...)
	return append(dst, 0, 1)
}

// DecodeBytesKey decodes a key written by AppendBytesKey, with the checks of
// DecodeStringKey. The result is a new, non-nil slice (empty for the empty
// key) that does not alias src.
func DecodeBytesKey(src []byte) (b []byte, rest []byte, err error) {
	n, end, err := scanEscaped(src, "bytes key")
	if err != nil {
		return nil, nil, err
	}
	b = make([]byte, 0, n)
	for enc := src[:end-2]; ; {
		i := bytes.IndexByte(enc, 0)
		if i < 0 {
			b = append(b, enc...)
			break
		}
		b = append(b, enc[:i+1]...) // the 0x00 of an escape is the decoded 0x00
		enc = enc[i+2:]
	}
	return b, src[end:], nil
}

// scanEscaped validates the escaped, terminated encoding at the front of src
// and returns the length n of the decoded bytes and the length end of the
// encoding, terminator included. n <= end-2 < len(src), so a caller may
// allocate n bytes.
func scanEscaped(src []byte, what string) (n, end int, err error) {
	i := 0
	for {
		j := bytes.IndexByte(src[i:], 0)
		if j < 0 {
			return 0, 0, &decodeError{what: what, reason: reasonNoTerminator, a: uint64(len(src))}
		}
		i += j
		n += j
		if i+1 >= len(src) {
			return 0, 0, &decodeError{what: what, reason: reasonNoTerminator, a: uint64(len(src))}
		}
		switch src[i+1] {
		case 0x01:
			return n, i + 2, nil
		case 0xff:
			n++
			i += 2
		default:
			return 0, 0, &decodeError{what: what, reason: reasonEscape, a: uint64(src[i+1]), b: uint64(i)}
		}
	}
}

// ---------------------------------------------------------------------------
// Values: bool and integers

// AppendBoolValue appends the value encoding of v: one byte, 0 or 1.
func AppendBoolValue(dst []byte, v bool) []byte {
	return append(dst, b2u8(v))
}

// DecodeBoolValue decodes a value written by AppendBoolValue. A byte other
// than 0 or 1 is an error.
func DecodeBoolValue(src []byte) (v bool, rest []byte, err error) {
	if len(src) == 0 {
		return false, nil, errShort("bool value", 1, 0)
	}
	if src[0] > 1 {
		return false, nil, errBool("bool value", src[0])
	}
	return src[0] == 1, src[1:], nil
}

// AppendUint8Value appends the value encoding of v: the byte itself.
func AppendUint8Value(dst []byte, v uint8) []byte {
	return append(dst, v)
}

// DecodeUint8Value decodes a value written by AppendUint8Value.
func DecodeUint8Value(src []byte) (v uint8, rest []byte, err error) {
	if len(src) < 1 {
		return 0, nil, errShort("uint8 value", 1, 0)
	}
	return src[0], src[1:], nil
}

// AppendInt8Value appends the value encoding of v: its two's-complement
// byte.
func AppendInt8Value(dst []byte, v int8) []byte {
	return append(dst, uint8(v))
}

// DecodeInt8Value decodes a value written by AppendInt8Value.
func DecodeInt8Value(src []byte) (v int8, rest []byte, err error) {
	if len(src) < 1 {
		return 0, nil, errShort("int8 value", 1, 0)
	}
	return int8(src[0]), src[1:], nil
}

// AppendUint16Value appends the value encoding of v: a uvarint.
func AppendUint16Value(dst []byte, v uint16) []byte {
	return binary.AppendUvarint(dst, uint64(v))
}

// DecodeUint16Value decodes a value written by AppendUint16Value. A value
// above math.MaxUint16 is an error.
func DecodeUint16Value(src []byte) (v uint16, rest []byte, err error) {
	u, rest, err := uvarint(src, "uint16 value")
	if err != nil {
		return 0, nil, err
	}
	if u > math.MaxUint16 {
		return 0, nil, errRangeU("uint16 value", u)
	}
	return uint16(u), rest, nil
}

// AppendUint32Value appends the value encoding of v: a uvarint.
func AppendUint32Value(dst []byte, v uint32) []byte {
	return binary.AppendUvarint(dst, uint64(v))
}

// DecodeUint32Value decodes a value written by AppendUint32Value. A value
// above math.MaxUint32 is an error.
func DecodeUint32Value(src []byte) (v uint32, rest []byte, err error) {
	u, rest, err := uvarint(src, "uint32 value")
	if err != nil {
		return 0, nil, err
	}
	if u > math.MaxUint32 {
		return 0, nil, errRangeU("uint32 value", u)
	}
	return uint32(u), rest, nil
}

// AppendUint64Value appends the value encoding of v: a uvarint.
func AppendUint64Value(dst []byte, v uint64) []byte {
	return binary.AppendUvarint(dst, v)
}

// DecodeUint64Value decodes a value written by AppendUint64Value.
func DecodeUint64Value(src []byte) (v uint64, rest []byte, err error) {
	return uvarint(src, "uint64 value")
}

// AppendUintValue appends the value encoding of v, that of uint64.
func AppendUintValue(dst []byte, v uint) []byte {
	return binary.AppendUvarint(dst, uint64(v))
}

// DecodeUintValue decodes a value written by AppendUintValue. On a 32-bit
// platform a value that does not fit in uint is an error.
func DecodeUintValue(src []byte) (v uint, rest []byte, err error) {
	u, rest, err := uvarint(src, "uint value")
	if err != nil {
		return 0, nil, err
	}
	if uint64(uint(u)) != u {
		return 0, nil, errRangeU("uint value", u)
	}
	return uint(u), rest, nil
}

// AppendInt16Value appends the value encoding of v: a zigzag varint.
func AppendInt16Value(dst []byte, v int16) []byte {
	return AppendVarint(dst, int64(v))
}

// DecodeInt16Value decodes a value written by AppendInt16Value. A value
// outside the range of int16 is an error.
func DecodeInt16Value(src []byte) (v int16, rest []byte, err error) {
	i, rest, err := varint(src, "int16 value")
	if err != nil {
		return 0, nil, err
	}
	if int64(int16(i)) != i {
		return 0, nil, errRangeS("int16 value", i)
	}
	return int16(i), rest, nil
}

// AppendInt32Value appends the value encoding of v: a zigzag varint.
func AppendInt32Value(dst []byte, v int32) []byte {
	return AppendVarint(dst, int64(v))
}

// DecodeInt32Value decodes a value written by AppendInt32Value. A value
// outside the range of int32 is an error.
func DecodeInt32Value(src []byte) (v int32, rest []byte, err error) {
	i, rest, err := varint(src, "int32 value")
	if err != nil {
		return 0, nil, err
	}
	if int64(int32(i)) != i {
		return 0, nil, errRangeS("int32 value", i)
	}
	return int32(i), rest, nil
}

// AppendInt64Value appends the value encoding of v: a zigzag varint.
func AppendInt64Value(dst []byte, v int64) []byte {
	return AppendVarint(dst, v)
}

// DecodeInt64Value decodes a value written by AppendInt64Value.
func DecodeInt64Value(src []byte) (v int64, rest []byte, err error) {
	// Not varint: this inlines into generated code only with uvarint's
	// call alone in its body.
	u, rest, err := uvarint(src, "int64 value")
	return int64(u>>1) ^ -int64(u&1), rest, err
}

// AppendIntValue appends the value encoding of v, that of int64.
func AppendIntValue(dst []byte, v int) []byte {
	return AppendVarint(dst, int64(v))
}

// DecodeIntValue decodes a value written by AppendIntValue. On a 32-bit
// platform a value that does not fit in int is an error.
func DecodeIntValue(src []byte) (v int, rest []byte, err error) {
	i, rest, err := varint(src, "int value")
	if err != nil {
		return 0, nil, err
	}
	if int64(int(i)) != i {
		return 0, nil, errRangeS("int value", i)
	}
	return int(i), rest, nil
}

// AppendDurationValue appends the value encoding of d: a zigzag varint of its
// nanoseconds.
func AppendDurationValue(dst []byte, d time.Duration) []byte {
	return AppendVarint(dst, int64(d))
}

// DecodeDurationValue decodes a value written by AppendDurationValue.
func DecodeDurationValue(src []byte) (d time.Duration, rest []byte, err error) {
	i, rest, err := varint(src, "duration value")
	return time.Duration(i), rest, err
}

// ---------------------------------------------------------------------------
// Values: floats and time

// AppendFloat64Value appends the value encoding of v: its IEEE bits,
// little-endian, 8 bytes. Every float64, NaN payloads and -0 included, round
// trips bit for bit.
func AppendFloat64Value(dst []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
}

// DecodeFloat64Value decodes a value written by AppendFloat64Value.
func DecodeFloat64Value(src []byte) (v float64, rest []byte, err error) {
	if len(src) < 8 {
		return 0, nil, errShort("float64 value", 8, len(src))
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(src)), src[8:], nil
}

// AppendFloat32Value appends the value encoding of v: its IEEE bits,
// little-endian, 4 bytes. Every float32 round trips bit for bit.
func AppendFloat32Value(dst []byte, v float32) []byte {
	return binary.LittleEndian.AppendUint32(dst, math.Float32bits(v))
}

// DecodeFloat32Value decodes a value written by AppendFloat32Value.
func DecodeFloat32Value(src []byte) (v float32, rest []byte, err error) {
	if len(src) < 4 {
		return 0, nil, errShort("float32 value", 4, len(src))
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(src)), src[4:], nil
}

// AppendTimeValue appends the value encoding of t: its Unix seconds as a
// zigzag varint, then its nanoseconds within the second as a uvarint. As
// with AppendTimeKey, every time.Time is encoded exactly, and the location
// and monotonic reading are not stored.
func AppendTimeValue(dst []byte, t time.Time) []byte {
	dst = AppendVarint(dst, t.Unix())
	return binary.AppendUvarint(dst, uint64(t.Nanosecond()))
}

// DecodeTimeValue decodes a value written by AppendTimeValue into a UTC time
// without monotonic reading, equal by == to t.UTC().Round(0) for the encoded
// t. Nanoseconds of 1e9 or more are an error.
func DecodeTimeValue(src []byte) (t time.Time, rest []byte, err error) {
	if t, n := TimeValuePrefix(src); n > 0 {
		return t, src[n:], nil
	}
	return decodeTimeBytewise(src)
}

// decodeTimeBytewise is DecodeTimeValue without its fast path
// (TimeValuePrefix): for varints of 10 bytes, and for the errors.
func decodeTimeBytewise(src []byte) (t time.Time, rest []byte, err error) {
	u, rest, err := uvarintLoop(src, "time value")
	if err != nil {
		return time.Time{}, nil, err
	}
	nsec, rest, err := uvarintLoop(rest, "time value")
	if err != nil {
		return time.Time{}, nil, err
	}
	if nsec >= 1e9 {
		return time.Time{}, nil, errNanos("time value", nsec)
	}
	return time.Unix(int64(u>>1)^-int64(u&1), int64(nsec)).UTC(), rest, nil
}

// ---------------------------------------------------------------------------
// Values: strings and bytes

// AppendStringValue appends the value encoding of s: its length as a
// uvarint, then its bytes.
func AppendStringValue(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// DecodeStringValue decodes a value written by AppendStringValue. A length
// beyond the end of src is an error, found before anything is allocated.
// The string is a copy: it does not alias src.
func DecodeStringValue(src []byte) (s string, rest []byte, err error) {
	if len(src) > 0 {
		// A string shorter than 128 bytes has a one-byte length.
		if n := int(src[0]); n < 0x80 && n < len(src) {
			return string(src[1 : 1+n]), src[1+n:], nil
		}
	}
	n, rest, err := decodeLen(src, "string value")
	if err != nil {
		return "", nil, err
	}
	return string(rest[:n]), rest[n:], nil
}

// AppendBytesValue appends the value encoding of b, keeping nil apart from
// empty: uvarint 0 for nil, otherwise uvarint len(b)+1 followed by the bytes.
func AppendBytesValue(dst []byte, b []byte) []byte {
	if b == nil {
		return append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(b))+1)
	return append(dst, b...)
}

// DecodeBytesValue decodes a value written by AppendBytesValue: nil for nil,
// otherwise a new non-nil slice that does not alias src. A length beyond the
// end of src is an error, found before anything is allocated.
func DecodeBytesValue(src []byte) (b []byte, rest []byte, err error) {
	u, rest, err := uvarint(src, "bytes value")
	if err != nil {
		return nil, nil, err
	}
	if u == 0 {
		return nil, rest, nil
	}
	if u-1 > uint64(len(rest)) {
		return nil, nil, errLength("bytes value", u-1, len(rest))
	}
	n := int(u - 1)
	b = make([]byte, n)
	copy(b, rest)
	return b, rest[n:], nil
}

// ---------------------------------------------------------------------------
// Codec types

// Compile-time checks that every built-in codec is a Codec of its type.
var (
	_ IntoDecoder[[]byte]  = BytesCodec{}
	_ Codec[bool]          = BoolCodec{}
	_ Codec[int]           = IntCodec{}
	_ Codec[int8]          = Int8Codec{}
	_ Codec[int16]         = Int16Codec{}
	_ Codec[int32]         = Int32Codec{}
	_ Codec[int64]         = Int64Codec{}
	_ KeyWord[int64]       = Int64Codec{}
	_ KeyWord[uint64]      = Uint64Codec{}
	_ Codec[uint]          = UintCodec{}
	_ Codec[uint8]         = Uint8Codec{}
	_ Codec[uint16]        = Uint16Codec{}
	_ Codec[uint32]        = Uint32Codec{}
	_ Codec[uint64]        = Uint64Codec{}
	_ Codec[float32]       = Float32Codec{}
	_ Codec[float64]       = Float64Codec{}
	_ Codec[string]        = StringCodec{}
	_ Codec[[]byte]        = BytesCodec{}
	_ Codec[time.Time]     = TimeCodec{}
	_ Codec[time.Duration] = DurationCodec{}
)

// BoolCodec is the Codec of bool: keys by AppendBoolKey and DecodeBoolKey,
// values by AppendBoolValue and DecodeBoolValue.
type BoolCodec struct{}

// AppendKey appends the key encoding of v (AppendBoolKey).
func (BoolCodec) AppendKey(dst []byte, v bool) []byte { return AppendBoolKey(dst, v) }

// DecodeKey decodes a key encoding (DecodeBoolKey).
func (BoolCodec) DecodeKey(src []byte) (bool, []byte, error) { return DecodeBoolKey(src) }

// AppendValue appends the value encoding of v (AppendBoolValue).
func (BoolCodec) AppendValue(dst []byte, v bool) []byte { return AppendBoolValue(dst, v) }

// DecodeValue decodes a value encoding (DecodeBoolValue).
func (BoolCodec) DecodeValue(src []byte) (bool, []byte, error) { return DecodeBoolValue(src) }

// IntCodec is the Codec of int: keys by AppendIntKey and DecodeIntKey,
// values by AppendIntValue and DecodeIntValue.
type IntCodec struct{}

// AppendKey appends the key encoding of v (AppendIntKey).
func (IntCodec) AppendKey(dst []byte, v int) []byte { return AppendIntKey(dst, v) }

// DecodeKey decodes a key encoding (DecodeIntKey).
func (IntCodec) DecodeKey(src []byte) (int, []byte, error) { return DecodeIntKey(src) }

// AppendValue appends the value encoding of v (AppendIntValue).
func (IntCodec) AppendValue(dst []byte, v int) []byte { return AppendIntValue(dst, v) }

// DecodeValue decodes a value encoding (DecodeIntValue).
func (IntCodec) DecodeValue(src []byte) (int, []byte, error) { return DecodeIntValue(src) }

// Int8Codec is the Codec of int8: keys by AppendInt8Key and DecodeInt8Key,
// values by AppendInt8Value and DecodeInt8Value.
type Int8Codec struct{}

// AppendKey appends the key encoding of v (AppendInt8Key).
func (Int8Codec) AppendKey(dst []byte, v int8) []byte { return AppendInt8Key(dst, v) }

// DecodeKey decodes a key encoding (DecodeInt8Key).
func (Int8Codec) DecodeKey(src []byte) (int8, []byte, error) { return DecodeInt8Key(src) }

// AppendValue appends the value encoding of v (AppendInt8Value).
func (Int8Codec) AppendValue(dst []byte, v int8) []byte { return AppendInt8Value(dst, v) }

// DecodeValue decodes a value encoding (DecodeInt8Value).
func (Int8Codec) DecodeValue(src []byte) (int8, []byte, error) { return DecodeInt8Value(src) }

// Int16Codec is the Codec of int16: keys by AppendInt16Key and DecodeInt16Key,
// values by AppendInt16Value and DecodeInt16Value.
type Int16Codec struct{}

// AppendKey appends the key encoding of v (AppendInt16Key).
func (Int16Codec) AppendKey(dst []byte, v int16) []byte { return AppendInt16Key(dst, v) }

// DecodeKey decodes a key encoding (DecodeInt16Key).
func (Int16Codec) DecodeKey(src []byte) (int16, []byte, error) { return DecodeInt16Key(src) }

// AppendValue appends the value encoding of v (AppendInt16Value).
func (Int16Codec) AppendValue(dst []byte, v int16) []byte { return AppendInt16Value(dst, v) }

// DecodeValue decodes a value encoding (DecodeInt16Value).
func (Int16Codec) DecodeValue(src []byte) (int16, []byte, error) { return DecodeInt16Value(src) }

// Int32Codec is the Codec of int32: keys by AppendInt32Key and DecodeInt32Key,
// values by AppendInt32Value and DecodeInt32Value.
type Int32Codec struct{}

// AppendKey appends the key encoding of v (AppendInt32Key).
func (Int32Codec) AppendKey(dst []byte, v int32) []byte { return AppendInt32Key(dst, v) }

// DecodeKey decodes a key encoding (DecodeInt32Key).
func (Int32Codec) DecodeKey(src []byte) (int32, []byte, error) { return DecodeInt32Key(src) }

// AppendValue appends the value encoding of v (AppendInt32Value).
func (Int32Codec) AppendValue(dst []byte, v int32) []byte { return AppendInt32Value(dst, v) }

// DecodeValue decodes a value encoding (DecodeInt32Value).
func (Int32Codec) DecodeValue(src []byte) (int32, []byte, error) { return DecodeInt32Value(src) }

// Int64Codec is the Codec of int64: keys by AppendInt64Key and DecodeInt64Key,
// values by AppendInt64Value and DecodeInt64Value.
type Int64Codec struct{}

// AppendKey appends the key encoding of v (AppendInt64Key).
func (Int64Codec) AppendKey(dst []byte, v int64) []byte { return AppendInt64Key(dst, v) }

// DecodeKey decodes a key encoding (DecodeInt64Key).
func (Int64Codec) DecodeKey(src []byte) (int64, []byte, error) { return DecodeInt64Key(src) }

// KeyWord returns the key encoding of v as a big-endian number (KeyWord).
func (Int64Codec) KeyWord(v int64) uint64 { return uint64(v) ^ (1 << 63) }

// AppendValue appends the value encoding of v (AppendInt64Value).
func (Int64Codec) AppendValue(dst []byte, v int64) []byte { return AppendInt64Value(dst, v) }

// DecodeValue decodes a value encoding (DecodeInt64Value).
func (Int64Codec) DecodeValue(src []byte) (int64, []byte, error) { return DecodeInt64Value(src) }

// UintCodec is the Codec of uint: keys by AppendUintKey and DecodeUintKey,
// values by AppendUintValue and DecodeUintValue.
type UintCodec struct{}

// AppendKey appends the key encoding of v (AppendUintKey).
func (UintCodec) AppendKey(dst []byte, v uint) []byte { return AppendUintKey(dst, v) }

// DecodeKey decodes a key encoding (DecodeUintKey).
func (UintCodec) DecodeKey(src []byte) (uint, []byte, error) { return DecodeUintKey(src) }

// AppendValue appends the value encoding of v (AppendUintValue).
func (UintCodec) AppendValue(dst []byte, v uint) []byte { return AppendUintValue(dst, v) }

// DecodeValue decodes a value encoding (DecodeUintValue).
func (UintCodec) DecodeValue(src []byte) (uint, []byte, error) { return DecodeUintValue(src) }

// Uint8Codec is the Codec of uint8: keys by AppendUint8Key and DecodeUint8Key,
// values by AppendUint8Value and DecodeUint8Value.
type Uint8Codec struct{}

// AppendKey appends the key encoding of v (AppendUint8Key).
func (Uint8Codec) AppendKey(dst []byte, v uint8) []byte { return AppendUint8Key(dst, v) }

// DecodeKey decodes a key encoding (DecodeUint8Key).
func (Uint8Codec) DecodeKey(src []byte) (uint8, []byte, error) { return DecodeUint8Key(src) }

// AppendValue appends the value encoding of v (AppendUint8Value).
func (Uint8Codec) AppendValue(dst []byte, v uint8) []byte { return AppendUint8Value(dst, v) }

// DecodeValue decodes a value encoding (DecodeUint8Value).
func (Uint8Codec) DecodeValue(src []byte) (uint8, []byte, error) { return DecodeUint8Value(src) }

// Uint16Codec is the Codec of uint16: keys by AppendUint16Key and DecodeUint16Key,
// values by AppendUint16Value and DecodeUint16Value.
type Uint16Codec struct{}

// AppendKey appends the key encoding of v (AppendUint16Key).
func (Uint16Codec) AppendKey(dst []byte, v uint16) []byte { return AppendUint16Key(dst, v) }

// DecodeKey decodes a key encoding (DecodeUint16Key).
func (Uint16Codec) DecodeKey(src []byte) (uint16, []byte, error) { return DecodeUint16Key(src) }

// AppendValue appends the value encoding of v (AppendUint16Value).
func (Uint16Codec) AppendValue(dst []byte, v uint16) []byte { return AppendUint16Value(dst, v) }

// DecodeValue decodes a value encoding (DecodeUint16Value).
func (Uint16Codec) DecodeValue(src []byte) (uint16, []byte, error) { return DecodeUint16Value(src) }

// Uint32Codec is the Codec of uint32: keys by AppendUint32Key and DecodeUint32Key,
// values by AppendUint32Value and DecodeUint32Value.
type Uint32Codec struct{}

// AppendKey appends the key encoding of v (AppendUint32Key).
func (Uint32Codec) AppendKey(dst []byte, v uint32) []byte { return AppendUint32Key(dst, v) }

// DecodeKey decodes a key encoding (DecodeUint32Key).
func (Uint32Codec) DecodeKey(src []byte) (uint32, []byte, error) { return DecodeUint32Key(src) }

// AppendValue appends the value encoding of v (AppendUint32Value).
func (Uint32Codec) AppendValue(dst []byte, v uint32) []byte { return AppendUint32Value(dst, v) }

// DecodeValue decodes a value encoding (DecodeUint32Value).
func (Uint32Codec) DecodeValue(src []byte) (uint32, []byte, error) { return DecodeUint32Value(src) }

// Uint64Codec is the Codec of uint64: keys by AppendUint64Key and DecodeUint64Key,
// values by AppendUint64Value and DecodeUint64Value.
type Uint64Codec struct{}

// AppendKey appends the key encoding of v (AppendUint64Key).
func (Uint64Codec) AppendKey(dst []byte, v uint64) []byte { return AppendUint64Key(dst, v) }

// DecodeKey decodes a key encoding (DecodeUint64Key).
func (Uint64Codec) DecodeKey(src []byte) (uint64, []byte, error) { return DecodeUint64Key(src) }

// KeyWord returns the key encoding of v as a big-endian number (KeyWord).
func (Uint64Codec) KeyWord(v uint64) uint64 { return v }

// AppendValue appends the value encoding of v (AppendUint64Value).
func (Uint64Codec) AppendValue(dst []byte, v uint64) []byte { return AppendUint64Value(dst, v) }

// DecodeValue decodes a value encoding (DecodeUint64Value).
func (Uint64Codec) DecodeValue(src []byte) (uint64, []byte, error) { return DecodeUint64Value(src) }

// Float32Codec is the Codec of float32: keys by AppendFloat32Key and DecodeFloat32Key,
// values by AppendFloat32Value and DecodeFloat32Value.
type Float32Codec struct{}

// AppendKey appends the key encoding of v (AppendFloat32Key).
func (Float32Codec) AppendKey(dst []byte, v float32) []byte { return AppendFloat32Key(dst, v) }

// DecodeKey decodes a key encoding (DecodeFloat32Key).
func (Float32Codec) DecodeKey(src []byte) (float32, []byte, error) { return DecodeFloat32Key(src) }

// AppendValue appends the value encoding of v (AppendFloat32Value).
func (Float32Codec) AppendValue(dst []byte, v float32) []byte { return AppendFloat32Value(dst, v) }

// DecodeValue decodes a value encoding (DecodeFloat32Value).
func (Float32Codec) DecodeValue(src []byte) (float32, []byte, error) { return DecodeFloat32Value(src) }

// Float64Codec is the Codec of float64: keys by AppendFloat64Key and DecodeFloat64Key,
// values by AppendFloat64Value and DecodeFloat64Value.
type Float64Codec struct{}

// AppendKey appends the key encoding of v (AppendFloat64Key).
func (Float64Codec) AppendKey(dst []byte, v float64) []byte { return AppendFloat64Key(dst, v) }

// DecodeKey decodes a key encoding (DecodeFloat64Key).
func (Float64Codec) DecodeKey(src []byte) (float64, []byte, error) { return DecodeFloat64Key(src) }

// AppendValue appends the value encoding of v (AppendFloat64Value).
func (Float64Codec) AppendValue(dst []byte, v float64) []byte { return AppendFloat64Value(dst, v) }

// DecodeValue decodes a value encoding (DecodeFloat64Value).
func (Float64Codec) DecodeValue(src []byte) (float64, []byte, error) { return DecodeFloat64Value(src) }

// StringCodec is the Codec of string: keys by AppendStringKey and DecodeStringKey,
// values by AppendStringValue and DecodeStringValue.
type StringCodec struct{}

// AppendKey appends the key encoding of v (AppendStringKey).
func (StringCodec) AppendKey(dst []byte, v string) []byte { return AppendStringKey(dst, v) }

// DecodeKey decodes a key encoding (DecodeStringKey).
func (StringCodec) DecodeKey(src []byte) (string, []byte, error) { return DecodeStringKey(src) }

// AppendValue appends the value encoding of v (AppendStringValue).
func (StringCodec) AppendValue(dst []byte, v string) []byte { return AppendStringValue(dst, v) }

// DecodeValue decodes a value encoding (DecodeStringValue).
func (StringCodec) DecodeValue(src []byte) (string, []byte, error) { return DecodeStringValue(src) }

// BytesCodec is the Codec of []byte: keys by AppendBytesKey and DecodeBytesKey,
// values by AppendBytesValue and DecodeBytesValue.
type BytesCodec struct{}

// AppendKey appends the key encoding of v (AppendBytesKey).
func (BytesCodec) AppendKey(dst []byte, v []byte) []byte { return AppendBytesKey(dst, v) }

// DecodeKey decodes a key encoding (DecodeBytesKey).
func (BytesCodec) DecodeKey(src []byte) ([]byte, []byte, error) { return DecodeBytesKey(src) }

// AppendValue appends the value encoding of v (AppendBytesValue).
func (BytesCodec) AppendValue(dst []byte, v []byte) []byte { return AppendBytesValue(dst, v) }

// DecodeValue decodes a value encoding (DecodeBytesValue).
func (BytesCodec) DecodeValue(src []byte) ([]byte, []byte, error) { return DecodeBytesValue(src) }

// DecodeValueInto decodes a value encoding (DecodeBytesValue) into *dst,
// reusing its array when its capacity suffices (IntoDecoder). A nil slice
// decodes as nil, an empty one as empty.
func (BytesCodec) DecodeValueInto(dst *[]byte, src []byte) ([]byte, error) {
	u, rest, err := uvarint(src, "bytes value")
	if err != nil {
		return nil, err
	}
	if u == 0 {
		*dst = nil
		return rest, nil
	}
	if u-1 > uint64(len(rest)) {
		return nil, errLength("bytes value", u-1, len(rest))
	}
	n := int(u - 1)
	b := *dst
	if b != nil && cap(b) >= n {
		b = b[:n]
	} else {
		b = make([]byte, n)
	}
	copy(b, rest)
	*dst = b
	return rest[n:], nil
}

// TimeCodec is the Codec of time.Time: keys by AppendTimeKey and DecodeTimeKey,
// values by AppendTimeValue and DecodeTimeValue.
type TimeCodec struct{}

// AppendKey appends the key encoding of v (AppendTimeKey).
func (TimeCodec) AppendKey(dst []byte, v time.Time) []byte { return AppendTimeKey(dst, v) }

// DecodeKey decodes a key encoding (DecodeTimeKey).
func (TimeCodec) DecodeKey(src []byte) (time.Time, []byte, error) { return DecodeTimeKey(src) }

// AppendValue appends the value encoding of v (AppendTimeValue).
func (TimeCodec) AppendValue(dst []byte, v time.Time) []byte { return AppendTimeValue(dst, v) }

// DecodeValue decodes a value encoding (DecodeTimeValue).
func (TimeCodec) DecodeValue(src []byte) (time.Time, []byte, error) { return DecodeTimeValue(src) }

// DurationCodec is the Codec of time.Duration: keys by AppendDurationKey and DecodeDurationKey,
// values by AppendDurationValue and DecodeDurationValue.
type DurationCodec struct{}

// AppendKey appends the key encoding of v (AppendDurationKey).
func (DurationCodec) AppendKey(dst []byte, v time.Duration) []byte { return AppendDurationKey(dst, v) }

// DecodeKey decodes a key encoding (DecodeDurationKey).
func (DurationCodec) DecodeKey(src []byte) (time.Duration, []byte, error) {
	return DecodeDurationKey(src)
}

// AppendValue appends the value encoding of v (AppendDurationValue).
func (DurationCodec) AppendValue(dst []byte, v time.Duration) []byte {
	return AppendDurationValue(dst, v)
}

// DecodeValue decodes a value encoding (DecodeDurationValue).
func (DurationCodec) DecodeValue(src []byte) (time.Duration, []byte, error) {
	return DecodeDurationValue(src)
}
