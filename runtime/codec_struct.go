package runtime

// Composite codecs for hand-written code: structs composed field by field,
// and the generic slice, map and pointer value codecs. Generated code emits
// straight-line equivalents and does not need them; they are for codecs
// written by hand and for tests.

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"unsafe"
)

// KeyFieldCodec is the key codec of one field of a struct type T, made by
// KeyField and composed by StructKeyCodec. The zero KeyFieldCodec is
// invalid.
type KeyFieldCodec[T any] struct {
	appendKey func(dst []byte, v *T) []byte
	decodeKey func(src []byte, v *T) ([]byte, error)
}

// KeyField returns the key codec of the field of T that get points to,
// encoded with c. get must return a pointer into the struct it is given
// (typically func(v *T) *F { return &v.Field }) and do nothing else. KeyField
// panics if c or get is nil.
func KeyField[T, F any](c KeyCodec[F], get func(*T) *F) KeyFieldCodec[T] {
	if c == nil || get == nil {
		panic("stategen: KeyField: nil codec or getter")
	}
	return KeyFieldCodec[T]{
		appendKey: func(dst []byte, v *T) []byte { return c.AppendKey(dst, *get(v)) },
		decodeKey: func(src []byte, v *T) ([]byte, error) {
			f, rest, err := c.DecodeKey(src)
			if err != nil {
				return nil, err
			}
			*get(v) = f
			return rest, nil
		},
	}
}

// ValueFieldCodec is the value codec of one field of a struct type T, made
// by ValueField and composed by StructValueCodec. The zero ValueFieldCodec is
// invalid.
type ValueFieldCodec[T any] struct {
	appendValue func(dst []byte, v *T) []byte
	decodeValue func(src []byte, v *T) ([]byte, error)
}

// ValueField returns the value codec of the field of T that get points to,
// encoded with c. The rules of KeyField apply.
func ValueField[T, F any](c ValueCodec[F], get func(*T) *F) ValueFieldCodec[T] {
	if c == nil || get == nil {
		panic("stategen: ValueField: nil codec or getter")
	}
	return ValueFieldCodec[T]{
		appendValue: func(dst []byte, v *T) []byte { return c.AppendValue(dst, *get(v)) },
		decodeValue: func(src []byte, v *T) ([]byte, error) {
			f, rest, err := c.DecodeValue(src)
			if err != nil {
				return nil, err
			}
			*get(v) = f
			return rest, nil
		},
	}
}

// structScratch lends the codecs of a struct type T a *T to hand to the
// field getters. A getter receives a pointer, so a local T would escape and
// every call would allocate; a pooled T does not. Borrowed values are
// cleared before they return to the pool so that it retains nothing.
type structScratch[T any] struct {
	pool     sync.Pool
	typeName string // for errors, e.g. "main.UserDay"
}

func newStructScratch[T any]() *structScratch[T] {
	s := &structScratch[T]{typeName: fmt.Sprintf("%T", *new(T))}
	s.pool.New = func() any { return new(T) }
	return s
}

func (s *structScratch[T]) get() *T { return s.pool.Get().(*T) }

func (s *structScratch[T]) put(p *T) {
	var zero T
	*p = zero
	s.pool.Put(p)
}

// StructKeyCodec returns the KeyCodec of a struct type T whose key is the
// concatenation of the key encodings of fields, in the order given. Because
// each field's encoding is order-preserving and prefix-free, so is the
// concatenation, and keys order lexicographically by the fields in that
// order: by the first field, then the second among equal firsts, and so on.
//
//	type UserDay struct {
//		User string
//		Day  int32
//	}
//
//	var userDayKey = runtime.StructKeyCodec(
//		runtime.KeyField(runtime.StringCodec{}, func(k *UserDay) *string { return &k.User }),
//		runtime.KeyField(runtime.Int32Codec{}, func(k *UserDay) *int32 { return &k.Day }))
//
// Fields not listed are not encoded and decode as their zero values.
// StructKeyCodec panics if a field is the zero KeyFieldCodec.
func StructKeyCodec[T any](fields ...KeyFieldCodec[T]) KeyCodec[T] {
	for i, f := range fields {
		if f.appendKey == nil {
			panic(fmt.Sprintf("stategen: StructKeyCodec: field %d was not made by KeyField", i))
		}
	}
	return &structKeyCodec[T]{fields: slices.Clone(fields), scratch: newStructScratch[T]()}
}

type structKeyCodec[T any] struct {
	fields  []KeyFieldCodec[T]
	scratch *structScratch[T]
}

func (c *structKeyCodec[T]) AppendKey(dst []byte, v T) []byte {
	p := c.scratch.get()
	*p = v
	for _, f := range c.fields {
		dst = f.appendKey(dst, p)
	}
	c.scratch.put(p)
	return dst
}

func (c *structKeyCodec[T]) DecodeKey(src []byte) (v T, rest []byte, err error) {
	p := c.scratch.get()
	rest = src
	for i, f := range c.fields {
		if rest, err = f.decodeKey(rest, p); err != nil {
			c.scratch.put(p)
			return v, nil, fmt.Errorf("%s key field %d of %d: %w", c.scratch.typeName, i, len(c.fields), err)
		}
	}
	v = *p
	c.scratch.put(p)
	return v, rest, nil
}

// StructValueCodec returns the ValueCodec of a struct type T whose value is
// the concatenation of the value encodings of fields, in the order given.
// Fields not listed are not encoded and decode as their zero values.
// StructValueCodec panics if a field is the zero ValueFieldCodec.
func StructValueCodec[T any](fields ...ValueFieldCodec[T]) ValueCodec[T] {
	for i, f := range fields {
		if f.appendValue == nil {
			panic(fmt.Sprintf("stategen: StructValueCodec: field %d was not made by ValueField", i))
		}
	}
	return &structValueCodec[T]{fields: slices.Clone(fields), scratch: newStructScratch[T]()}
}

type structValueCodec[T any] struct {
	fields  []ValueFieldCodec[T]
	scratch *structScratch[T]
}

func (c *structValueCodec[T]) AppendValue(dst []byte, v T) []byte {
	p := c.scratch.get()
	*p = v
	for _, f := range c.fields {
		dst = f.appendValue(dst, p)
	}
	c.scratch.put(p)
	return dst
}

func (c *structValueCodec[T]) DecodeValue(src []byte) (v T, rest []byte, err error) {
	p := c.scratch.get()
	rest = src
	for i, f := range c.fields {
		if rest, err = f.decodeValue(rest, p); err != nil {
			c.scratch.put(p)
			return v, nil, fmt.Errorf("%s value field %d of %d: %w", c.scratch.typeName, i, len(c.fields), err)
		}
	}
	v = *p
	c.scratch.put(p)
	return v, rest, nil
}

// preallocLen returns how many elements of size bytes a decoder may allocate
// up front for a count n read from its input when remaining bytes follow.
// The count is never trusted: the result is at most one element per
// remaining byte, and at most 16 bytes of memory per remaining byte (plus
// 4 KiB), so that a short input claiming a huge count cannot make the
// decoder allocate much; a genuine large count grows the container as
// elements actually decode.
func preallocLen(n uint64, remaining int, size uintptr) int {
	limit := uint64(remaining)
	if size > 0 {
		limit = min(limit, (16*uint64(remaining)+4096)/uint64(size))
	}
	return int(min(n, limit))
}

// SliceValueCodec returns the ValueCodec of []T that encodes each element
// with elem, after a count that keeps nil apart from empty: uvarint 0 for a
// nil slice, uvarint n+1 for a slice of length n.
//
// Decoding never trusts the count for allocation. Unless T has size zero
// (struct{}), the count may not exceed the remaining input: elem must encode
// every value of a non-empty type in at least one byte, as every built-in
// and generated codec does. For a zero-size T whose elem decodes from no
// bytes, a slice of any length decodes without allocating or looping.
// SliceValueCodec panics if elem is nil.
func SliceValueCodec[T any](elem ValueCodec[T]) ValueCodec[[]T] {
	if elem == nil {
		panic("stategen: SliceValueCodec: nil element codec")
	}
	var zero T
	return sliceValueCodec[T]{elem: elem, size: unsafe.Sizeof(zero)}
}

type sliceValueCodec[T any] struct {
	elem ValueCodec[T]
	size uintptr // unsafe.Sizeof of T
}

func (c sliceValueCodec[T]) AppendValue(dst []byte, s []T) []byte {
	if s == nil {
		return append(dst, 0)
	}
	dst = AppendUvarint(dst, uint64(len(s))+1)
	if c.size == 0 && len(s) > 0 {
		// Every element is the one value of a zero-size T. If it encodes in
		// no bytes, so do the others: skip them, as the decoder does.
		before := len(dst)
		if dst = c.elem.AppendValue(dst, s[0]); len(dst) == before {
			return dst
		}
		s = s[1:]
	}
	for _, v := range s {
		dst = c.elem.AppendValue(dst, v)
	}
	return dst
}

func (c sliceValueCodec[T]) DecodeValue(src []byte) ([]T, []byte, error) {
	u, rest, err := uvarint(src, "slice value")
	if err != nil {
		return nil, nil, err
	}
	if u == 0 {
		return nil, rest, nil
	}
	n := u - 1
	if n > math.MaxInt || (c.size > 0 && n > uint64(len(rest))) {
		return nil, nil, &decodeError{what: "slice value", reason: reasonCount, a: n, b: uint64(len(rest))}
	}
	s := make([]T, 0, preallocLen(n, len(rest), c.size))
	for i := 0; i < int(n); i++ {
		before := len(rest)
		var v T
		if v, rest, err = c.elem.DecodeValue(rest); err != nil {
			return nil, nil, fmt.Errorf("slice value element %d of %d: %w", i, n, err)
		}
		s = append(s, v)
		if c.size == 0 && len(rest) == before {
			// A stateless codec decoded a zero-size value from no bytes: the
			// remaining elements decode the same way, to the same (only)
			// value of T. Extending a slice of zero-size elements allocates
			// nothing.
			s = slices.Grow(s, int(n)-len(s))[:n]
			break
		}
	}
	return s, rest, nil
}

// MapValueCodec returns the ValueCodec of map[K]V that encodes each entry as
// its key with k then its value with v, after a count that keeps nil apart
// from empty: uvarint 0 for a nil map, uvarint n+1 for a map of n entries.
// Entries are written in Go's map iteration order, so equal maps may encode
// differently; they decode equal.
//
// Decoding never trusts the count for allocation, and a count above one may
// not exceed the remaining input (two distinct keys cannot both encode in
// zero bytes). A key that occurs twice is an error, as no encoder writes one
// (NaN keys, never equal to themselves, are all kept). MapValueCodec panics
// if k or v is nil.
func MapValueCodec[K comparable, V any](k ValueCodec[K], v ValueCodec[V]) ValueCodec[map[K]V] {
	if k == nil || v == nil {
		panic("stategen: MapValueCodec: nil key or value codec")
	}
	var zk K
	var zv V
	return mapValueCodec[K, V]{key: k, val: v, size: unsafe.Sizeof(zk) + unsafe.Sizeof(zv)}
}

type mapValueCodec[K comparable, V any] struct {
	key  ValueCodec[K]
	val  ValueCodec[V]
	size uintptr // size of a key and a value
}

func (c mapValueCodec[K, V]) AppendValue(dst []byte, m map[K]V) []byte {
	if m == nil {
		return append(dst, 0)
	}
	dst = AppendUvarint(dst, uint64(len(m))+1)
	for k, v := range m {
		dst = c.key.AppendValue(dst, k)
		dst = c.val.AppendValue(dst, v)
	}
	return dst
}

func (c mapValueCodec[K, V]) DecodeValue(src []byte) (map[K]V, []byte, error) {
	u, rest, err := uvarint(src, "map value")
	if err != nil {
		return nil, nil, err
	}
	if u == 0 {
		return nil, rest, nil
	}
	n := u - 1
	if n > 1 && n > uint64(len(rest)) {
		return nil, nil, &decodeError{what: "map value", reason: reasonCount, a: n, b: uint64(len(rest))}
	}
	m := make(map[K]V, preallocLen(n, len(rest), c.size))
	for i := range int(n) {
		var k K
		var v V
		if k, rest, err = c.key.DecodeValue(rest); err != nil {
			return nil, nil, fmt.Errorf("map value key %d of %d: %w", i, n, err)
		}
		if v, rest, err = c.val.DecodeValue(rest); err != nil {
			return nil, nil, fmt.Errorf("map value element %d of %d: %w", i, n, err)
		}
		if _, dup := m[k]; dup {
			return nil, nil, fmt.Errorf("%w: map value: key %d of %d occurs twice", ErrCorrupt, i, n)
		}
		m[k] = v
	}
	return m, rest, nil
}

// PointerValueCodec returns the ValueCodec of *T: one byte 0 for nil, or one
// byte 1 followed by the value pointed to, encoded with elem. Decoding
// allocates a new T; pointers shared by several values decode as distinct
// pointers. PointerValueCodec panics if elem is nil.
func PointerValueCodec[T any](elem ValueCodec[T]) ValueCodec[*T] {
	if elem == nil {
		panic("stategen: PointerValueCodec: nil element codec")
	}
	return pointerValueCodec[T]{elem: elem}
}

type pointerValueCodec[T any] struct {
	elem ValueCodec[T]
}

func (c pointerValueCodec[T]) AppendValue(dst []byte, p *T) []byte {
	if p == nil {
		return append(dst, 0)
	}
	return c.elem.AppendValue(append(dst, 1), *p)
}

func (c pointerValueCodec[T]) DecodeValue(src []byte) (*T, []byte, error) {
	if len(src) == 0 {
		return nil, nil, errShort("pointer value", 1, 0)
	}
	switch src[0] {
	case 0:
		return nil, src[1:], nil
	case 1:
		v, rest, err := c.elem.DecodeValue(src[1:])
		if err != nil {
			return nil, nil, fmt.Errorf("pointer value: %w", err)
		}
		return &v, rest, nil
	default:
		return nil, nil, TagError("pointer value", src[0])
	}
}
