package runtime

// ValueCodec encodes and decodes values of type T in a compact form. Value
// encodings are never compared, only stored, so they favour size and speed:
// varints, length prefixes.
//
// AppendValue appends the encoding of v to dst and returns the extended
// buffer; it never fails and, given a dst with room, never allocates.
// DecodeValue decodes one value from the front of src and returns it with the
// bytes that follow it. A decoded value owns its memory: it never aliases src,
// so callers may keep it after src is reused. On truncated or malformed input
// DecodeValue returns an error wrapping ErrCorrupt, never panics, and never
// allocates more than the length of src justifies.
//
// Codecs are stateless and safe for concurrent use; the operator goroutine
// and a snapshot goroutine may use the same codec at once.
type ValueCodec[T any] interface {
	AppendValue(dst []byte, v T) []byte
	DecodeValue(src []byte) (v T, rest []byte, err error)
}

// IntoDecoder is implemented by value codecs that decode into an existing
// value, reusing its memory: DecodeValueInto decodes one value from the
// front of src into *dst and returns the bytes that follow it, overwriting
// in place the slices (when their capacity suffices) and maps (cleared
// first) that *dst holds, at any depth, instead of allocating new ones. It
// is how the GetInto methods of the handles read a value without
// allocating: a job that reads a value with a slice, changes it and puts
// it back reads into the same variable every time. What *dst shares with
// other values changes with it; the decoded value never aliases src. On an
// error (wrapping ErrCorrupt) *dst is unspecified. The rules of
// ValueCodec apply otherwise.
//
// The codecs stategen generates for composite types implement it; a
// ValueCodec that does not is decoded into a fresh value by GetInto.
type IntoDecoder[T any] interface {
	DecodeValueInto(dst *T, src []byte) (rest []byte, err error)
}

// KeyCodec encodes and decodes values of type T as keys, namespaces or map
// user keys, with an order-preserving, prefix-free encoding:
//
//   - order-preserving: bytes.Compare(AppendKey(nil, a), AppendKey(nil, b))
//     has the sign of the logical comparison of a and b, so sorted backends
//     and SortedMap order entries by their logical keys;
//   - prefix-free: no encoding is a proper prefix of another, so the
//     concatenation of field encodings is itself order-preserving and
//     prefix-free (struct keys order by their fields in declaration order),
//     and a sorted backend can scan "every namespace of key k" as a prefix.
//
// Equal encodings mean equal keys and unequal encodings unequal keys; a codec
// canonicalizes values that its type considers equal but that could encode
// differently (for example every NaN encodes as one NaN).
//
// The error, ownership and concurrency rules of ValueCodec apply.
type KeyCodec[T any] interface {
	AppendKey(dst []byte, v T) []byte
	DecodeKey(src []byte) (v T, rest []byte, err error)
}

// KeyWord is implemented by a KeyCodec whose key encoding is always eight
// bytes (Int64Codec, Uint64Codec): KeyWord(v) is the encoding of v read as
// a big-endian number, binary.BigEndian.Uint64(AppendKey(nil, v)). A
// handle of a table of Go values (TableHost) then hashes a key, and a map
// table's user key, from its value, without writing its encoding: the
// hash is the same, HashKey of the encoding, computed from the number. A
// word that were not the encoding would put keys in other key groups than
// their bytes: binding a handle checks the codec on the zero value and
// refuses one that disagrees (ErrInvalidState, naming it).
type KeyWord[T any] interface {
	KeyWord(v T) uint64
}

// Codec is a codec usable both as a KeyCodec and as a ValueCodec. Every
// built-in codec of a key-able type is one.
type Codec[T any] interface {
	KeyCodec[T]
	ValueCodec[T]
}
