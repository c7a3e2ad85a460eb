package runtime

import (
	"fmt"
	"strings"
)

// The functions in this file are the pieces the generated codecs call
// beside the built-in ones: skipping over encodings (the scan that sizes a
// value's strings before decoding it), decoding a string into a shared
// buffer, and the errors of composite encodings. They are exported for
// generated code, which would otherwise stamp a copy of them into every
// file; their errors are the runtime's own, so a message reads the same
// whichever codec reported it.

// DecodeStringValueIn decodes a string value (a uvarint length, then the
// bytes). If a is not nil, the string's bytes are appended to a and the
// string shares a's memory: a generated decoder that scanned a value's
// strings first grows a once and decodes all of them into it, one
// allocation for any number of strings.
func DecodeStringValueIn(src []byte, a *strings.Builder) (s string, rest []byte, err error) {
	n, rest, err := DecodeLen(src)
	if err != nil {
		return "", nil, err
	}
	if a == nil {
		return string(rest[:n]), rest[n:], nil
	}
	a.Write(rest[:n])
	all := a.String()
	return all[len(all)-n:], rest[n:], nil
}

// ScanStringValue skips a string value and returns its length.
func ScanStringValue(src []byte) (n int, rest []byte, err error) {
	n, rest, err = DecodeLen(src)
	if err != nil {
		return 0, nil, err
	}
	return n, rest[n:], nil
}

// SkipValue skips n bytes of a value.
func SkipValue(src []byte, n int) (rest []byte, err error) {
	if len(src) < n {
		return nil, errShort("value", n, len(src))
	}
	return src[n:], nil
}

// SkipVarint skips a varint. It finds the varint's end only; the decoder
// that follows the scan validates it.
func SkipVarint(src []byte) (rest []byte, err error) {
	for i, b := range src {
		if b < 0x80 {
			return src[i+1:], nil
		}
		if i == 9 {
			break
		}
	}
	return nil, errShort("varint", len(src)+1, len(src))
}

// SkipBytesValue skips a []byte value.
func SkipBytesValue(src []byte) (rest []byte, err error) {
	u, rest, err := DecodeUvarint(src)
	if err != nil {
		return nil, err
	}
	if u == 0 {
		return rest, nil
	}
	if u-1 > uint64(len(rest)) {
		return nil, &decodeError{what: "[]byte value", reason: reasonLength, a: u - 1, b: uint64(len(rest))}
	}
	return rest[u-1:], nil
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
