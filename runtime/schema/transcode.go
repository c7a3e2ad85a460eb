package schema

import (
	"fmt"
	"math"
	"time"

	"github.com/stategen/stategen/runtime"
)

// The transcoder reads values in the value encodings of package runtime
// (see runtime's codec_builtin.go) and writes them with runtime's own
// Append functions, so that what it writes is exactly what today's
// generated codec writes. It checks what it reads as strictly as the
// generated decoders do — including the bytes it copies unchanged — so a
// migrated value is never a corrupt one.

type opcode uint8

const (
	opCopy    opcode = iota + 1 // the bytes are the same: check and copy
	opZero                      // a field the writer lacks: append zero
	opConvert                   // a scalar widens (or string ↔ bytes)
	opStruct                    // fields by name
	opArray                     // elements
	opSlice                     // count, elements
	opMap                       // count, keys, values
	opPointer                   // presence byte, element
	opRef                       // T → *T: presence 1, element
	opDeref                     // *T → T: the element, or zero for nil
)

// op is one node of a compiled migration.
type op struct {
	code opcode
	w, r *Type
	// elem converts elements (arrays, slices, pointers, map values); key
	// converts map keys.
	elem, key *op
	// For structs, in the reader's field order: from[i] is the writer's
	// field that reader field i reads (-1: none, fields[i] is opZero), and
	// fields[i] how. inOrder reports that the writer's fields come in the
	// reader's order, so one pass over the writer's bytes suffices.
	from    []int
	fields  []*op
	inOrder bool
	// zero is the encoding of the reader type's zero value (opZero,
	// opDeref).
	zero []byte
}

// run appends the reader encoding of the value at the front of src and
// returns the rest of src.
func (o *op) run(dst, src []byte) ([]byte, []byte, error) {
	switch o.code {
	case opCopy:
		rest, err := skip(o.w, src, 0)
		if err != nil {
			return dst, nil, err
		}
		return append(dst, src[:len(src)-len(rest)]...), rest, nil
	case opZero:
		return append(dst, o.zero...), src, nil
	case opConvert:
		return convert(dst, src, o.w.Kind, o.r.Kind)
	case opStruct:
		return o.runStruct(dst, src)
	case opArray:
		var err error
		for range o.w.Len {
			if dst, src, err = o.elem.run(dst, src); err != nil {
				return dst, nil, err
			}
		}
		return dst, src, nil
	case opSlice, opMap:
		u, rest, err := runtime.DecodeUvarint(src)
		if err != nil {
			return dst, nil, err
		}
		dst = runtime.AppendUvarint(dst, u)
		if u == 0 {
			return dst, rest, nil // nil
		}
		if err := checkCount(o.w, u-1, rest); err != nil {
			return dst, nil, err
		}
		src = rest
		for range u - 1 {
			if o.code == opMap {
				if dst, src, err = o.key.run(dst, src); err != nil {
					return dst, nil, err
				}
			}
			if dst, src, err = o.elem.run(dst, src); err != nil {
				return dst, nil, err
			}
		}
		return dst, src, nil
	case opPointer, opDeref:
		present, rest, err := presence(src)
		if err != nil {
			return dst, nil, err
		}
		if !present {
			if o.code == opDeref {
				return append(dst, o.zero...), rest, nil
			}
			return append(dst, 0), rest, nil
		}
		if o.code == opPointer {
			dst = append(dst, 1)
		}
		return o.elem.run(dst, rest)
	case opRef:
		return o.elem.run(append(dst, 1), src)
	}
	return dst, nil, fmt.Errorf("schema: migration op %d", o.code)
}

func (o *op) runStruct(dst, src []byte) ([]byte, []byte, error) {
	var err error
	if o.inOrder {
		// One pass: each writer field is converted when the reader wants
		// it, skipped when it does not, and zeros fill the reader's new
		// fields in between.
		next := 0 // the writer's next field
		for i, j := range o.from {
			if j < 0 {
				dst = append(dst, o.fields[i].zero...)
				continue
			}
			for ; next < j; next++ {
				if src, err = skip(o.w.Fields[next].Type, src, 0); err != nil {
					return dst, nil, fieldError(o.w, next, err)
				}
			}
			if dst, src, err = o.fields[i].run(dst, src); err != nil {
				return dst, nil, fieldError(o.w, j, err)
			}
			next = j + 1
		}
		for ; next < len(o.w.Fields); next++ {
			if src, err = skip(o.w.Fields[next].Type, src, 0); err != nil {
				return dst, nil, fieldError(o.w, next, err)
			}
		}
		return dst, src, nil
	}
	// Reordered: find where every writer field starts first.
	starts := make([][]byte, len(o.w.Fields))
	for j, f := range o.w.Fields {
		starts[j] = src
		if src, err = skip(f.Type, src, 0); err != nil {
			return dst, nil, fieldError(o.w, j, err)
		}
	}
	for i, j := range o.from {
		if j < 0 {
			dst = append(dst, o.fields[i].zero...)
			continue
		}
		if dst, _, err = o.fields[i].run(dst, starts[j]); err != nil {
			return dst, nil, fieldError(o.w, j, err)
		}
	}
	return dst, src, nil
}

func fieldError(t *Type, i int, err error) error {
	return fmt.Errorf("field %s: %w", t.Fields[i].Name, err)
}

func presence(src []byte) (bool, []byte, error) {
	if len(src) == 0 {
		return false, nil, fmt.Errorf("%w: pointer value: need 1 byte, have 0", runtime.ErrCorrupt)
	}
	switch src[0] {
	case 0:
		return false, src[1:], nil
	case 1:
		return true, src[1:], nil
	}
	return false, nil, fmt.Errorf("%w: pointer value: presence byte %d is neither 0 nor 1", runtime.ErrCorrupt, src[0])
}

// maxEmptyElems bounds the count of a slice or map whose elements encode
// to no bytes (struct{}): the count alone cannot be checked against the
// input, and a migration that adds fields to such elements writes bytes
// for each.
const maxEmptyElems = 1 << 16

// checkCount bounds the count of elements of a slice or map type t that
// src claims to hold: no more than its bytes can encode, so that a hostile
// count cannot make the transcoder loop without reading.
func checkCount(t *Type, n uint64, src []byte) error {
	per := t.Elem.MinSize()
	if t.Kind == Map {
		per += t.Key.MinSize()
	}
	limit := uint64(len(src))
	if per > 0 {
		limit /= uint64(per)
	} else {
		limit = maxEmptyElems // elements of no bytes (struct{}): a sane bound
	}
	if n > limit {
		return fmt.Errorf("%w: %s value: count %d exceeds what the %d remaining bytes can hold", runtime.ErrCorrupt, t.Kind, n, len(src))
	}
	return nil
}

// MinSize returns the fewest bytes the value encoding of t takes: zero
// only for types whose values all encode to nothing (struct{} and the
// like).
func (t *Type) MinSize() int64 {
	switch t.Kind {
	case Float32:
		return 4
	case Float64:
		return 8
	case Time:
		return 2
	case Array:
		return t.Len * t.Elem.MinSize()
	case Struct:
		var n int64
		for _, f := range t.Fields {
			n += f.Type.MinSize()
		}
		return n
	}
	return 1
}

// skip checks the value of type t at the front of src and returns the rest.
func skip(t *Type, src []byte, depth int) ([]byte, error) {
	var err error
	switch t.Kind {
	case Bool:
		_, src, err = runtime.DecodeBoolValue(src)
	case Int8:
		_, src, err = runtime.DecodeInt8Value(src)
	case Uint8:
		_, src, err = runtime.DecodeUint8Value(src)
	case Int16:
		_, src, err = runtime.DecodeInt16Value(src)
	case Int32:
		_, src, err = runtime.DecodeInt32Value(src)
	case Int64, Int, Duration:
		_, src, err = runtime.DecodeVarint(src)
	case Uint16:
		_, src, err = runtime.DecodeUint16Value(src)
	case Uint32:
		_, src, err = runtime.DecodeUint32Value(src)
	case Uint64, Uint:
		_, src, err = runtime.DecodeUvarint(src)
	case Float32:
		_, src, err = runtime.DecodeFloat32Value(src)
	case Float64:
		_, src, err = runtime.DecodeFloat64Value(src)
	case Time:
		_, src, err = runtime.DecodeTimeValue(src)
	case String, Bytes:
		var n int
		if n, _, src, err = text(t.Kind, src); err == nil {
			src = src[n:]
		}
	case Array:
		for range t.Len {
			if src, err = skip(t.Elem, src, depth+1); err != nil {
				return nil, err
			}
		}
	case Slice, Map:
		var u uint64
		if u, src, err = runtime.DecodeUvarint(src); err != nil || u == 0 {
			break
		}
		if err = checkCount(t, u-1, src); err != nil {
			return nil, err
		}
		for range u - 1 {
			if t.Kind == Map {
				if src, err = skip(t.Key, src, depth+1); err != nil {
					return nil, err
				}
			}
			if src, err = skip(t.Elem, src, depth+1); err != nil {
				return nil, err
			}
		}
	case Pointer:
		var present bool
		if present, src, err = presence(src); err == nil && present {
			src, err = skip(t.Elem, src, depth+1)
		}
	case Struct:
		for i, f := range t.Fields {
			if src, err = skip(f.Type, src, depth+1); err != nil {
				return nil, fieldError(t, i, err)
			}
		}
	default:
		err = fmt.Errorf("schema: cannot read a value of kind %v", t.Kind)
	}
	if err != nil {
		return nil, err
	}
	return src, nil
}

// text reads the length of a string or []byte value (kind k) at the front
// of src: n bytes follow in rest; null reports a nil []byte.
func text(k Kind, src []byte) (n int, null bool, rest []byte, err error) {
	if k == String {
		n, rest, err = runtime.DecodeLen(src)
		return n, false, rest, err
	}
	u, rest, err := runtime.DecodeUvarint(src)
	switch {
	case err != nil:
		return 0, false, nil, err
	case u == 0:
		return 0, true, rest, nil
	case u-1 > uint64(len(rest)):
		return 0, false, nil, fmt.Errorf("%w: bytes value: length %d exceeds the %d remaining bytes", runtime.ErrCorrupt, u-1, len(rest))
	}
	return int(u - 1), false, rest, nil
}

// convert reads a scalar of kind w and appends it as kind r (widens(w, r)).
func convert(dst, src []byte, w, r Kind) ([]byte, []byte, error) {
	if w == String || w == Bytes {
		n, null, src, err := text(w, src)
		if err != nil {
			return dst, nil, err
		}
		b := src[:n]
		if r == String {
			dst = runtime.AppendUvarint(dst, uint64(n))
		} else if !null || w == String {
			dst = runtime.AppendUvarint(dst, uint64(n)+1)
		} else {
			return append(dst, 0), src, nil
		}
		return append(dst, b...), src[n:], nil
	}
	var i int64
	var u uint64
	var f float64
	var err error
	signed, float := false, false
	switch w {
	case Int8:
		var v int8
		v, src, err = runtime.DecodeInt8Value(src)
		i, signed = int64(v), true
	case Int16:
		var v int16
		v, src, err = runtime.DecodeInt16Value(src)
		i, signed = int64(v), true
	case Int32:
		var v int32
		v, src, err = runtime.DecodeInt32Value(src)
		i, signed = int64(v), true
	case Int64, Int, Duration:
		i, src, err = runtime.DecodeVarint(src)
		signed = true
	case Uint8:
		var v uint8
		v, src, err = runtime.DecodeUint8Value(src)
		u = uint64(v)
	case Uint16:
		var v uint16
		v, src, err = runtime.DecodeUint16Value(src)
		u = uint64(v)
	case Uint32:
		var v uint32
		v, src, err = runtime.DecodeUint32Value(src)
		u = uint64(v)
	case Uint64, Uint:
		u, src, err = runtime.DecodeUvarint(src)
	case Float32:
		var v float32
		v, src, err = runtime.DecodeFloat32Value(src)
		f, float = float64(v), true
	case Float64:
		f, src, err = runtime.DecodeFloat64Value(src)
		float = true
	case Bool:
		var v bool
		v, src, err = runtime.DecodeBoolValue(src)
		dst = runtime.AppendBoolValue(dst, v)
		return dst, src, err
	case Time:
		var v time.Time
		v, src, err = runtime.DecodeTimeValue(src)
		dst = runtime.AppendTimeValue(dst, v)
		return dst, src, err
	default:
		return dst, nil, fmt.Errorf("schema: cannot convert %v", w)
	}
	if err != nil {
		return dst, nil, err
	}
	switch {
	case r == Float32 || r == Float64:
		if !float {
			if signed {
				f = float64(i)
			} else {
				f = float64(u)
			}
		}
		if r == Float32 {
			return runtime.AppendFloat32Value(dst, float32(f)), src, nil
		}
		return runtime.AppendFloat64Value(dst, f), src, nil
	case !signed && !float:
		if u > math.MaxInt64 && isSignedKind(r) {
			return dst, nil, fmt.Errorf("%w: %d does not fit %v", runtime.ErrCorrupt, u, r)
		}
		i = int64(u)
	}
	switch r {
	case Int16:
		return runtime.AppendInt16Value(dst, int16(i)), src, nil
	case Int32:
		return runtime.AppendInt32Value(dst, int32(i)), src, nil
	case Int64, Int, Duration:
		return runtime.AppendVarint(dst, i), src, nil
	case Uint16:
		return runtime.AppendUint16Value(dst, uint16(u)), src, nil
	case Uint32:
		return runtime.AppendUint32Value(dst, uint32(u)), src, nil
	case Uint64, Uint:
		return runtime.AppendUvarint(dst, u), src, nil
	}
	return dst, nil, fmt.Errorf("schema: cannot convert %v to %v", w, r)
}

func isSignedKind(k Kind) bool {
	_, signed, ok := intWidth(k)
	return ok && signed
}

// zeroValue is the encoding of t's zero value.
func zeroValue(t *Type) []byte {
	var b []byte
	switch t.Kind {
	case Float32:
		return runtime.AppendFloat32Value(nil, 0)
	case Float64:
		return runtime.AppendFloat64Value(nil, 0)
	case Time:
		return runtime.AppendTimeValue(nil, time.Time{})
	case Array:
		z := zeroValue(t.Elem)
		for range t.Len {
			b = append(b, z...)
		}
		return b
	case Struct:
		for _, f := range t.Fields {
			b = append(b, zeroValue(f.Type)...)
		}
		return b
	}
	// Every other kind: a zero byte (false, 0, "", nil).
	return []byte{0}
}
