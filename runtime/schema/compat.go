package schema

import (
	"errors"
	"fmt"
	"slices"

	"github.com/stategen/stategen/runtime"
)

// ErrIncompatible reports a change of a state's schema that the checkpoint's
// bytes cannot be migrated across. An *IncompatibleError says where; it
// also matches runtime.ErrStateMismatch.
var ErrIncompatible = errors.New("schema: incompatible change")

// IncompatibleError is an incompatible schema change, at one place of the
// state's types.
type IncompatibleError struct {
	// Path is where in the state the change is: "key", "namespace", "user
	// key" or "value", then ".Field" for a struct field, "[]" for the
	// elements of an array or a slice, "[key]" and "[value]" for a map's
	// keys and values, "*" for a pointer's element.
	Path string
	// Checkpoint and Code are the types at Path in the checkpoint's schema
	// and in the code's, in the schema grammar ("" where a side has no
	// such part).
	Checkpoint, Code string
	// Reason says which rule refuses the change.
	Reason string
}

// Error describes the change, e.g. "value.Score: checkpoint has string,
// code declares float64: a value's type may change only by widening".
func (e *IncompatibleError) Error() string {
	return fmt.Sprintf("%s: checkpoint has %s, code declares %s: %s", e.Path, or(e.Checkpoint, "none"), or(e.Code, "none"), e.Reason)
}

// Unwrap returns ErrIncompatible and runtime.ErrStateMismatch.
func (e *IncompatibleError) Unwrap() []error {
	return []error{ErrIncompatible, runtime.ErrStateMismatch}
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Verdict classifies a schema change.
type Verdict uint8

// The verdicts of Resolve.
const (
	// Unchanged: the schemas are the same.
	Unchanged Verdict = iota + 1
	// Compatible: the schemas differ, and the checkpoint's bytes migrate
	// (Migration.Changes says how).
	Compatible
	// Incompatible: they cannot migrate.
	Incompatible
)

// String returns "unchanged", "compatible" or "incompatible".
func (v Verdict) String() string {
	switch v {
	case Unchanged:
		return "unchanged"
	case Compatible:
		return "compatible"
	case Incompatible:
		return "incompatible"
	}
	return fmt.Sprintf("Verdict(%d)", uint8(v))
}

// Migration is how a state's entries written under one schema are read
// under another: the result of Resolve.
type Migration struct {
	// Verdict is Unchanged or Compatible.
	Verdict Verdict
	// Changes describes each change, e.g. "value.Score: dropped (the code
	// removed it)"; empty if Unchanged.
	Changes []string
	// value converts the bytes of a value; nil if they are kept as they
	// are.
	value *op
}

// Rewrites reports whether values must be rewritten (Transcode); if not,
// the checkpoint's bytes are already what the code writes.
func (m *Migration) Rewrites() bool { return m.value != nil }

// Transcode appends to dst the value encoded in src — all of src, in the
// writer's encoding — in the reader's encoding. Errors wrap
// runtime.ErrCorrupt.
func (m *Migration) Transcode(dst, src []byte) ([]byte, error) {
	if m.value == nil {
		return append(dst, src...), nil
	}
	out, rest, err := m.value.run(dst, src)
	if err != nil {
		return dst, err
	}
	if len(rest) != 0 {
		return dst, fmt.Errorf("%w: schema migration: %d bytes after the value", runtime.ErrCorrupt, len(rest))
	}
	return out, nil
}

// Resolve decides whether entries written with the writer's schema can be
// read with the reader's, by the rules of the package doc, and returns the
// Migration, or an error wrapping ErrIncompatible (an *IncompatibleError).
func Resolve(writer, reader *State) (*Migration, error) {
	m := &Migration{Verdict: Unchanged}
	if writer.String() == reader.String() {
		return m, nil
	}
	m.Verdict = Compatible
	r := &resolver{m: m}
	if err := r.sameKeys(writer, reader); err != nil {
		return nil, err
	}
	v, err := r.value("value", writer.Value, reader.Value)
	if err != nil {
		return nil, err
	}
	if v.code != opCopy {
		m.value = v
	}
	if len(m.Changes) == 0 {
		// Only names changed that no byte depends on.
		m.Changes = append(m.Changes, "no byte changes: "+describeRename(writer, reader))
	}
	return m, nil
}

// CheckKeys checks what no migration may change: the state's kind and
// sub-keying, and the encoding of its keys, namespaces and user keys. The
// error is an *IncompatibleError. A migration function written by the user
// (runtime.Migration) may change a state's values only.
func CheckKeys(writer, reader *State) error {
	return (&resolver{m: &Migration{}}).sameKeys(writer, reader)
}

// sameKeys is CheckKeys, noting the changes that keep the bytes.
func (r *resolver) sameKeys(writer, reader *State) error {
	if writer.Kind != reader.Kind || writer.SubKeyed != reader.SubKeyed {
		return &IncompatibleError{Path: "state", Checkpoint: describeKind(writer), Code: describeKind(reader),
			Reason: "a state's kind may not change"}
	}
	for _, part := range []struct {
		path string
		w, r *Type
	}{{"key", writer.Key, reader.Key}, {"namespace", writer.Namespace, reader.Namespace}, {"user key", writer.UserKey, reader.UserKey}} {
		if part.w == nil {
			continue
		}
		if err := r.sameKey(part.path, part.w, part.r); err != nil {
			return err
		}
	}
	return nil
}

func describeKind(s *State) string {
	k := s.Kind.String()
	if s.SubKeyed {
		k = "subkeyed " + k
	}
	return k + " state"
}

func describeRename(w, r *State) string {
	if w.Key.String() != r.Key.String() {
		return "key fields renamed"
	}
	return "encodings unchanged"
}

type resolver struct{ m *Migration }

func (r *resolver) changef(format string, args ...any) {
	r.m.Changes = append(r.m.Changes, fmt.Sprintf(format, args...))
}

// keyKind is k as far as key encodings go: int and int64 encode alike, and
// so do uint and uint64, time.Duration and int64.
func keyKind(k Kind) Kind {
	switch k {
	case Int, Duration:
		return Int64
	case Uint:
		return Uint64
	}
	return k
}

// valueKind is k as far as value encodings go: the same equivalences.
func valueKind(k Kind) Kind { return keyKind(k) }

// sameKey checks that the key types w and r encode every key to the same
// bytes: the same structure, with field names free.
func (r *resolver) sameKey(path string, w, rd *Type) error {
	if !sameKeyEncoding(w, rd) {
		return &IncompatibleError{Path: path, Checkpoint: w.String(), Code: rd.String(),
			Reason: "keys, namespaces and user keys must keep their encoding: key groups and the order of entries depend on their bytes"}
	}
	if w.String() != rd.String() {
		r.changef("%s: %s → %s (the same bytes)", path, w, rd)
	}
	return nil
}

func sameKeyEncoding(a, b *Type) bool {
	if keyKind(a.Kind) != keyKind(b.Kind) {
		return false
	}
	switch a.Kind {
	case Array:
		return a.Len == b.Len && sameKeyEncoding(a.Elem, b.Elem)
	case Slice, Pointer:
		return sameKeyEncoding(a.Elem, b.Elem)
	case Map:
		return sameKeyEncoding(a.Key, b.Key) && sameKeyEncoding(a.Elem, b.Elem)
	case Struct:
		// Fields are concatenated in order; their names are in no byte.
		if len(a.Fields) != len(b.Fields) {
			return false
		}
		for i, f := range a.Fields {
			if !sameKeyEncoding(f.Type, b.Fields[i].Type) {
				return false
			}
		}
	}
	return true
}

// sameValueEncoding reports whether values of w are, byte for byte,
// values of r: the same structure, field names included.
func sameValueEncoding(a, b *Type) bool {
	if valueKind(a.Kind) != valueKind(b.Kind) {
		return false
	}
	switch a.Kind {
	case Array:
		return a.Len == b.Len && sameValueEncoding(a.Elem, b.Elem)
	case Slice, Pointer:
		return sameValueEncoding(a.Elem, b.Elem)
	case Map:
		return sameValueEncoding(a.Key, b.Key) && sameValueEncoding(a.Elem, b.Elem)
	case Struct:
		if len(a.Fields) != len(b.Fields) {
			return false
		}
		for i, f := range a.Fields {
			if f.Name != b.Fields[i].Name || !sameValueEncoding(f.Type, b.Fields[i].Type) {
				return false
			}
		}
	}
	return true
}

// value resolves a value of writer type w read as reader type rd.
func (r *resolver) value(path string, w, rd *Type) (*op, error) {
	if sameValueEncoding(w, rd) {
		if w.String() != rd.String() {
			r.changef("%s: %s → %s (the same bytes)", path, w, rd)
		}
		return &op{code: opCopy, w: w, r: rd}, nil
	}
	bad := func(reason string) (*op, error) {
		return nil, &IncompatibleError{Path: path, Checkpoint: w.String(), Code: rd.String(), Reason: reason}
	}
	switch {
	case w.Kind == Pointer && rd.Kind != Pointer:
		elem, err := r.value(path+"*", w.Elem, rd)
		if err != nil {
			return nil, err
		}
		r.changef("%s: %s → %s (nil becomes the zero value)", path, w, rd)
		return &op{code: opDeref, w: w, r: rd, elem: elem, zero: zeroValue(rd)}, nil
	case w.Kind != Pointer && rd.Kind == Pointer:
		elem, err := r.value(path, w, rd.Elem)
		if err != nil {
			return nil, err
		}
		r.changef("%s: %s → %s (never nil)", path, w, rd)
		return &op{code: opRef, w: w, r: rd, elem: elem}, nil
	}
	if isScalar(w.Kind) && isScalar(rd.Kind) {
		if !widens(w.Kind, rd.Kind) {
			return bad(fmt.Sprintf("a value's type may change only by widening (%s does not widen to %s; narrowing could lose data)", w, rd))
		}
		r.changef("%s: %s → %s", path, w, rd)
		return &op{code: opConvert, w: w, r: rd}, nil
	}
	if w.Kind != rd.Kind {
		return bad("a value's type may change only within its family: a struct, array, slice, map or pointer stays one")
	}
	switch w.Kind {
	case Struct:
		return r.structOp(path, w, rd)
	case Array:
		if w.Len != rd.Len {
			return bad(fmt.Sprintf("an array keeps its length (%d, not %d)", w.Len, rd.Len))
		}
		elem, err := r.value(path+"[]", w.Elem, rd.Elem)
		if err != nil {
			return nil, err
		}
		return &op{code: opArray, w: w, r: rd, elem: elem}, nil
	case Slice:
		elem, err := r.value(path+"[]", w.Elem, rd.Elem)
		if err != nil {
			return nil, err
		}
		return &op{code: opSlice, w: w, r: rd, elem: elem}, nil
	case Pointer:
		elem, err := r.value(path, w.Elem, rd.Elem)
		if err != nil {
			return nil, err
		}
		return &op{code: opPointer, w: w, r: rd, elem: elem}, nil
	case Map:
		var key *op
		if sameValueEncoding(w.Key, rd.Key) {
			key = &op{code: opCopy, w: w.Key, r: rd.Key}
		} else if isScalar(w.Key.Kind) && isScalar(rd.Key.Kind) && widensInjectively(w.Key.Kind, rd.Key.Kind) {
			r.changef("%s[key]: %s → %s", path, w.Key, rd.Key)
			key = &op{code: opConvert, w: w.Key, r: rd.Key}
		} else {
			return nil, &IncompatibleError{Path: path + "[key]", Checkpoint: w.Key.String(), Code: rd.Key.String(),
				Reason: "a map's keys may only widen like integers: any other change could make two keys equal"}
		}
		elem, err := r.value(path+"[value]", w.Elem, rd.Elem)
		if err != nil {
			return nil, err
		}
		return &op{code: opMap, w: w, r: rd, key: key, elem: elem}, nil
	}
	return bad("unsupported change")
}

// structOp resolves struct fields by name.
func (r *resolver) structOp(path string, w, rd *Type) (*op, error) {
	o := &op{code: opStruct, w: w, r: rd, from: make([]int, len(rd.Fields)), fields: make([]*op, len(rd.Fields))}
	used := make([]bool, len(w.Fields))
	inOrder, last := true, -1
	for i, f := range rd.Fields {
		j := slices.IndexFunc(w.Fields, func(g Field) bool { return g.Name == f.Name })
		o.from[i] = j
		if j < 0 {
			r.changef("%s.%s: added (the checkpoint's entries get the zero value)", path, f.Name)
			o.fields[i] = &op{code: opZero, r: f.Type, zero: zeroValue(f.Type)}
			continue
		}
		used[j] = true
		if j < last {
			inOrder = false
		}
		last = j
		fo, err := r.value(path+"."+f.Name, w.Fields[j].Type, f.Type)
		if err != nil {
			return nil, err
		}
		o.fields[i] = fo
	}
	for j, f := range w.Fields {
		if !used[j] {
			r.changef("%s.%s: dropped (the code removed it)", path, f.Name)
		}
	}
	if !inOrder {
		r.changef("%s: fields reordered", path)
	}
	o.inOrder = inOrder
	return o, nil
}

func isScalar(k Kind) bool { return k >= Bool && k <= Duration }

// rank orders the integer kinds of one signedness by width; floats after.
func intWidth(k Kind) (width int, signed, ok bool) {
	switch k {
	case Int8:
		return 8, true, true
	case Int16:
		return 16, true, true
	case Int32:
		return 32, true, true
	case Int64, Int, Duration:
		return 64, true, true
	case Uint8:
		return 8, false, true
	case Uint16:
		return 16, false, true
	case Uint32:
		return 32, false, true
	case Uint64, Uint:
		return 64, false, true
	}
	return 0, false, false
}

// widens reports whether every value of kind w is a value of kind r: the
// widening rules of the package doc.
func widens(w, r Kind) bool {
	if valueKind(w) == valueKind(r) {
		return true
	}
	ww, ws, wint := intWidth(w)
	rw, rs, rint := intWidth(r)
	switch {
	case wint && rint:
		return ws == rs && rw > ww || !ws && rs && rw > ww
	case wint && (r == Float32 || r == Float64):
		return true // Avro's int → float and long → double; exact up to the mantissa
	case w == Float32 && r == Float64:
		return true
	case (w == String || w == Bytes) && (r == String || r == Bytes):
		return true
	}
	return false
}

// widensInjectively reports whether a map key of kind w may become one of
// kind r: integer widening, which never makes two keys equal.
func widensInjectively(w, r Kind) bool {
	ww, ws, wint := intWidth(w)
	rw, rs, rint := intWidth(r)
	return wint && rint && (ws == rs && rw > ww || !ws && rs && rw > ww)
}
