package runtime

import (
	"fmt"
	"time"
)

// The functions in this file are the pieces the generated codecs call
// beside the built-in ones: the fast paths of integer and time decoding,
// decoding the strings of a value into one shared block, and the errors of
// composite encodings. They are exported for generated code, which would
// otherwise stamp a copy of them into every file; their errors are the
// runtime's own, so a message reads the same whichever codec reported it.

// UvarintPrefix decodes the varint at the front of src if it is in minimal
// form and takes at most 9 bytes, and returns it with its length. Otherwise
// it returns a length of 0, and the caller decodes with the full decoder
// (DecodeUvarint and the integer value decoders), which takes every varint
// and reports the errors. It makes no call, so it inlines: a generated
// decoder's fast path for integer fields,
//
//	if x, n := runtime.UvarintPrefix(src); n > 0 {
//		v.ID, src = runtime.Unzigzag(x), src[n:]
//	} else if v.ID, src, err = runtime.DecodeInt64Value(src); err != nil {
//		...
//	}
//
// which keeps a decoder of several such fields free of calls.
func UvarintPrefix(src []byte) (x uint64, n int) {
	for i, s := 0, uint(0); i < len(src) && i < 9; i, s = i+1, s+7 {
		b := src[i]
		x |= uint64(b&0x7f) << s
		if b < 0x80 {
			if b == 0 && i > 0 {
				return 0, 0 // not minimal
			}
			return x, i + 1
		}
	}
	return 0, 0
}

// Unzigzag returns the int64 whose zigzag encoding (AppendVarint) is u.
func Unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// TimeValuePrefix decodes the time value at the front of src, as
// DecodeTimeValue does, if both its varints take UvarintPrefix's fast path
// and its nanoseconds are in range, and returns it with its length.
// Otherwise it returns a length of 0, and the caller decodes with
// DecodeTimeValue, which reports the errors. It is the fast path of time
// fields in generated decoders, and of DecodeTimeValue.
func TimeValuePrefix(src []byte) (t time.Time, n int) {
	sec, n := UvarintPrefix(src)
	if n == 0 {
		return time.Time{}, 0
	}
	nsec, m := UvarintPrefix(src[n:])
	if m == 0 || nsec >= 1e9 {
		return time.Time{}, 0
	}
	return time.Unix(Unzigzag(sec), int64(nsec)).UTC(), n + m
}

// stringBlockSize is how many bytes of input a StringBlock copies at once,
// unless a string needs more: enough for the strings of a typical value,
// little enough that a decoded string never keeps much memory alive beside
// its own bytes.
const stringBlockSize = 256

// StringBlock lets the strings of one decoded value share one allocation,
// without a pass over the value to size it first: the first string copies
// the input from its start, up to stringBlockSize bytes or to the end of
// the input, into a block, and the strings that lie in the copied bytes
// are slices of the block; a string past them starts a new block. The
// block is a copy, so decoded strings never alias the input. Strings that
// follow each other in the input (a struct's, a slice's, a map's keys)
// usually take one block; the bytes between them are copied too. The cost
// is memory: a decoded string keeps its whole block alive, at most
// stringBlockSize bytes beside its own, where a value whose strings are far
// apart (a short string between long byte slices) copies a block per
// string.
//
// A generated decoder of a value that can hold several strings declares
// one StringBlock and passes it to DecodeStringValueIn for each string,
// which must come from one input, decoded front to back. The zero value
// is empty; a nil *StringBlock allocates each string on its own.
type StringBlock struct {
	block string
	end   int // how many input bytes followed the first byte of block
}

// DecodeStringValueIn decodes a string value (DecodeStringValue) as a slice
// of a's block, copying a new block from src if the string is not in it.
// With a nil a, the string is a copy of its own.
func DecodeStringValueIn(src []byte, a *StringBlock) (s string, rest []byte, err error) {
	if a == nil {
		return DecodeStringValue(src)
	}
	if len(src) > 0 && src[0] == 0 {
		return "", src[1:], nil
	}
	var n int
	if len(src) > 0 && int(src[0]) < 0x80 && int(src[0]) < len(src) {
		n, rest = int(src[0]), src[1:] // a length of one byte, in range
	} else if n, rest, err = decodeLen(src, "string value"); err != nil {
		return "", nil, err
	}
	// Positions count the input bytes left from there to the end of the
	// input, which is the same for every slice of src the value decodes
	// from: the block spans (a.end-len(a.block), a.end].
	if len(rest) > a.end || len(rest)-n < a.end-len(a.block) {
		a.block = string(rest[:min(len(rest), max(n, stringBlockSize))])
		a.end = len(rest)
	}
	i := a.end - len(rest)
	return a.block[i : i+n], rest[n:], nil
}

// FieldError names the field whose decoding failed: "Type.Field: err".
func FieldError(field string, err error) error {
	return fmt.Errorf("%s: %w", field, err)
}

// ShortError reports input that ends before the need bytes of what.
func ShortError(what string, need, have int) error { return errShort(what, need, have) }

// CountError reports a count of elements of what that the have remaining
// bytes cannot hold.
func CountError(what string, n uint64, have int) error {
	return &decodeError{what: what, reason: reasonCount, a: n, b: uint64(have)}
}

// TagError reports a pointer tag other than 0 (nil) and 1 (a value
// follows).
func TagError(what string, tag byte) error {
	return &decodeError{what: what, reason: reasonTag, a: uint64(tag)}
}

// DupKeyError reports a map encoding in which a key occurs twice.
func DupKeyError(what string) error {
	return &decodeError{what: what, reason: reasonDup}
}
