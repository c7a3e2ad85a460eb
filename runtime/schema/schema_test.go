package schema

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stategen/stategen/runtime"
)

// mustParse parses a schema or fails the test.
func mustParse(t testing.TB, s string) *State {
	t.Helper()
	st, err := Parse(s)
	if err != nil {
		t.Fatalf("Parse(%q): %v", s, err)
	}
	return st
}

// valueSchema is the schema of a Value state with value type typ.
func valueSchema(typ string) string { return Prefix + "value key=string value=" + typ }

func TestParseRoundTrips(t *testing.T) {
	for _, s := range []string{
		Prefix + "value key=string value=int64",
		Prefix + "list subkeyed key=struct{User string;Day int32} namespace=struct{Start int64;End int64} value=struct{}",
		Prefix + "sortedmap key=bytes userkey=time value=map[string][]*[4]float32",
		Prefix + "map subkeyed key=uint namespace=duration userkey=[2]uint8 value=struct{A bool;B *struct{C []bytes};D map[int16]uint64}",
	} {
		if got := mustParse(t, s).String(); got != s {
			t.Errorf("Parse(%q).String() = %q", s, got)
		}
	}
}

func TestParseRejectsBadSchemas(t *testing.T) {
	for _, s := range []string{
		"",
		"stategen/v2 value key=string value=int64",
		Prefix + "blob key=string value=int64",
		Prefix + "value key=string",
		Prefix + "value key=string value=int65",
		Prefix + "value key=string value=int64 ",
		Prefix + "value key=string value=[x]int64",
		Prefix + "value key=string value=[-1]int64",
		Prefix + "value key=string value=struct{A int64;A int64}",
		Prefix + "value key=string value=struct{A int64",
		Prefix + "value key=string value=struct{ int64}",
		Prefix + "value subkeyed key=string value=int64",
		Prefix + "value key=string namespace=string value=int64",
		Prefix + "map key=string value=int64",
		Prefix + "value key=string userkey=string value=int64",
		Prefix + "value key=string value=" + strings.Repeat("*", MaxDepth+2) + "int64",
	} {
		if _, err := Parse(s); !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) = %v, want ErrSyntax", s, err)
		}
	}
}

// enc encodes a value of type t the way the generated codecs do, from a
// plain description: scalars as Go values, structs and arrays as []any,
// slices as []any (nil for nil), maps as [][2]any (nil for nil), pointers
// as *any (nil for nil).
func enc(t *Type, v any) []byte { return appendEnc(nil, t, v) }

func appendEnc(dst []byte, t *Type, v any) []byte {
	switch t.Kind {
	case Bool:
		return runtime.AppendBoolValue(dst, v.(bool))
	case Int8:
		return runtime.AppendInt8Value(dst, v.(int8))
	case Int16:
		return runtime.AppendInt16Value(dst, v.(int16))
	case Int32:
		return runtime.AppendInt32Value(dst, v.(int32))
	case Int64, Int:
		return runtime.AppendInt64Value(dst, v.(int64))
	case Duration:
		return runtime.AppendDurationValue(dst, v.(time.Duration))
	case Uint8:
		return runtime.AppendUint8Value(dst, v.(uint8))
	case Uint16:
		return runtime.AppendUint16Value(dst, v.(uint16))
	case Uint32:
		return runtime.AppendUint32Value(dst, v.(uint32))
	case Uint64, Uint:
		return runtime.AppendUint64Value(dst, v.(uint64))
	case Float32:
		return runtime.AppendFloat32Value(dst, v.(float32))
	case Float64:
		return runtime.AppendFloat64Value(dst, v.(float64))
	case String:
		return runtime.AppendStringValue(dst, v.(string))
	case Bytes:
		b, _ := v.([]byte)
		return runtime.AppendBytesValue(dst, b)
	case Time:
		return runtime.AppendTimeValue(dst, v.(time.Time))
	case Struct, Array:
		vs := v.([]any)
		for i, e := range vs {
			et := t.Elem
			if t.Kind == Struct {
				et = t.Fields[i].Type
			}
			dst = appendEnc(dst, et, e)
		}
		return dst
	case Slice:
		vs := v.([]any)
		if vs == nil {
			return append(dst, 0)
		}
		dst = runtime.AppendUvarint(dst, uint64(len(vs))+1)
		for _, e := range vs {
			dst = appendEnc(dst, t.Elem, e)
		}
		return dst
	case Map:
		kvs := v.([][2]any)
		if kvs == nil {
			return append(dst, 0)
		}
		dst = runtime.AppendUvarint(dst, uint64(len(kvs))+1)
		for _, kv := range kvs {
			dst = appendEnc(dst, t.Key, kv[0])
			dst = appendEnc(dst, t.Elem, kv[1])
		}
		return dst
	case Pointer:
		p := v.(*any)
		if p == nil {
			return append(dst, 0)
		}
		return appendEnc(append(dst, 1), t.Elem, *p)
	}
	panic(fmt.Sprintf("enc: kind %v", t.Kind))
}

func ptr(v any) *any { return &v }

// A table of schema changes: each migrates a value written under the old
// type to exactly the bytes the new type's codec writes for the expected
// value.
func TestResolveMigratesCompatibleChanges(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 20, 27, 0, 5, time.UTC)
	for _, tc := range []struct {
		name     string
		old, new string
		in, want any
		changes  []string // substrings of Migration.Changes, in order
		rewrites bool
	}{
		{"field added", "struct{A int64;B string}", "struct{A int64;B string;C float64}",
			[]any{int64(-7), "x"}, []any{int64(-7), "x", 0.0}, []string{"value.C: added"}, true},
		{"field added in front", "struct{A int64}", "struct{Z []string;A int64}",
			[]any{int64(3)}, []any{[]any(nil), int64(3)}, []string{"value.Z: added"}, true},
		{"field removed", "struct{A int64;B string;C bool}", "struct{A int64;C bool}",
			[]any{int64(1), "gone", true}, []any{int64(1), true}, []string{"value.B: dropped"}, true},
		{"fields reordered", "struct{A int64;B string;C bool}", "struct{C bool;A int64;B string}",
			[]any{int64(1), "b", true}, []any{true, int64(1), "b"}, []string{"value: fields reordered"}, true},
		{"int8 to int64", "int8", "int64", int8(-128), int64(-128), []string{"value: int8 → int64"}, true},
		{"int16 to int32", "int16", "int32", int16(math.MinInt16), int32(math.MinInt16), nil, true},
		{"uint8 to uint64", "uint8", "uint64", uint8(255), uint64(255), nil, true},
		{"uint8 to int16", "uint8", "int16", uint8(255), int16(255), nil, true},
		{"uint32 to int64", "uint32", "int64", uint32(math.MaxUint32), int64(math.MaxUint32), nil, true},
		{"float32 to float64", "float32", "float64", float32(1.5), 1.5, nil, true},
		{"int32 to float64", "int32", "float64", int32(-3), -3.0, nil, true},
		{"int64 to int (same bytes)", "int64", "int", int64(9), int64(9), []string{"the same bytes"}, false},
		{"string to bytes", "string", "bytes", "", []byte{}, nil, true},
		{"bytes to string", "bytes", "string", []byte(nil), "", nil, true},
		{"value to pointer", "struct{A int32}", "*struct{A int64}", []any{int32(5)}, ptr([]any{int64(5)}), []string{"value.A: int32 → int64", "never nil"}, true},
		{"pointer to value, nil", "*struct{A int32;T time}", "struct{A int32;T time}", (*any)(nil), []any{int32(0), time.Time{}}, []string{"nil becomes the zero value"}, true},
		{"pointer to value, set", "*int16", "int64", ptr(int16(-2)), int64(-2), nil, true},
		{"nested in slices, arrays and maps",
			"map[string][]struct{X int8;Old bool}", "map[string][]struct{New string;X int32}",
			[][2]any{{"k", []any{[]any{int8(1), true}, []any{int8(-1), false}}}, {"nil", []any(nil)}},
			[][2]any{{"k", []any{[]any{"", int32(1)}, []any{"", int32(-1)}}}, {"nil", []any(nil)}},
			[]string{"value[value][].New: added", "value[value][].X: int8 → int32", "value[value][].Old: dropped"}, true},
		{"array elements", "[2]struct{A uint16}", "[2]struct{A uint32;B bool}",
			[]any{[]any{uint16(1)}, []any{uint16(2)}}, []any{[]any{uint32(1), false}, []any{uint32(2), false}}, nil, true},
		{"map keys widen", "map[int32]string", "map[int64]string",
			[][2]any{{int32(-1), "a"}, {int32(2), "b"}}, [][2]any{{int64(-1), "a"}, {int64(2), "b"}}, []string{"value[key]: int32 → int64"}, true},
		{"nil map", "map[int32]string", "map[int64]string", [][2]any(nil), [][2]any(nil), nil, true},
		{"renamed type, same structure", "struct{A int64}", "struct{A int64}", []any{int64(1)}, []any{int64(1)}, nil, false},
		{"zero time field", "struct{}", "struct{T time;D duration;F [3]float32;P *string;M map[string]int64;S []bytes}",
			[]any{}, []any{time.Time{}, time.Duration(0), []any{float32(0), float32(0), float32(0)}, (*any)(nil), [][2]any(nil), []any(nil)}, nil, true},
		{"time kept", "struct{T time;X int8}", "struct{X int16;T time}", []any{t0, int8(1)}, []any{int16(1), t0}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, r := mustParse(t, valueSchema(tc.old)), mustParse(t, valueSchema(tc.new))
			m, err := Resolve(w, r)
			if err != nil {
				t.Fatal(err)
			}
			wantVerdict := Compatible
			if tc.old == tc.new {
				wantVerdict = Unchanged
			}
			if m.Verdict != wantVerdict || m.Rewrites() != tc.rewrites {
				t.Errorf("verdict %v, rewrites %v; want %v, %v", m.Verdict, m.Rewrites(), wantVerdict, tc.rewrites)
			}
			joined := strings.Join(m.Changes, "\n")
			for _, c := range tc.changes {
				if !strings.Contains(joined, c) {
					t.Errorf("changes %q lack %q", m.Changes, c)
				}
			}
			in, want := enc(w.Value, tc.in), enc(r.Value, tc.want)
			got, err := m.Transcode([]byte("prefix"), in)
			if err != nil {
				t.Fatalf("Transcode: %v", err)
			}
			if !bytes.Equal(got, append([]byte("prefix"), want...)) {
				t.Errorf("Transcode(%x) = %x, want %x", in, got[6:], want)
			}
		})
	}
}

// Incompatible changes name the path, both types and the rule.
func TestResolveRefusesIncompatibleChanges(t *testing.T) {
	for _, tc := range []struct {
		name, old, new string
		path, says     string
	}{
		{"narrowing", valueSchema("int64"), valueSchema("int32"), "value", "widening"},
		{"float narrowing", valueSchema("float64"), valueSchema("float32"), "value", "widening"},
		{"signed to unsigned", valueSchema("int8"), valueSchema("uint64"), "value", "widening"},
		{"uint64 to int64", valueSchema("uint64"), valueSchema("int64"), "value", "widening"},
		{"string to int", valueSchema("struct{A string}"), valueSchema("struct{A int64}"), "value.A", "checkpoint has string, code declares int64"},
		{"family", valueSchema("[]int64"), valueSchema("[2]int64"), "value", "family"},
		{"array length", valueSchema("[2]int64"), valueSchema("[3]int64"), "value", "length"},
		{"key type", Prefix + "value key=int32 value=int64", Prefix + "value key=int64 value=int64", "key", "key groups"},
		{"key field added", Prefix + "value key=struct{A string} value=int64", Prefix + "value key=struct{A string;B string} value=int64", "key", "encoding"},
		{"namespace", Prefix + "value subkeyed key=string namespace=int64 value=int64", Prefix + "value subkeyed key=string namespace=string value=int64", "namespace", "encoding"},
		{"user key", Prefix + "sortedmap key=string userkey=int64 value=int64", Prefix + "sortedmap key=string userkey=uint64 value=int64", "user key", "encoding"},
		{"map key", valueSchema("map[string]int64"), valueSchema("map[bytes]int64"), "value[key]", "two keys equal"},
		{"kind", Prefix + "value key=string value=int64", Prefix + "list key=string value=int64", "state", "kind"},
		{"sub-keying", Prefix + "value key=string value=int64", Prefix + "value subkeyed key=string namespace=string value=int64", "state", "kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Resolve(mustParse(t, tc.old), mustParse(t, tc.new))
			var ie *IncompatibleError
			if !errors.As(err, &ie) || !errors.Is(err, ErrIncompatible) || !errors.Is(err, runtime.ErrStateMismatch) {
				t.Fatalf("Resolve: %v, want an *IncompatibleError", err)
			}
			if ie.Path != tc.path || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "checkpoint has ") {
				t.Errorf("error %q: path %q, want %q and a mention of %q", err, ie.Path, tc.path, tc.says)
			}
		})
	}
}

// Keys keep their bytes through the changes that do not touch them.
func TestResolveAllowsKeyChangesThatKeepTheBytes(t *testing.T) {
	for _, c := range [][2]string{
		{Prefix + "value key=struct{User string;Day int32} value=int64", Prefix + "value key=struct{Who string;D int32} value=int64"},
		{Prefix + "value key=int64 value=int64", Prefix + "value key=int value=int64"},
		{Prefix + "value subkeyed key=string namespace=duration value=int64", Prefix + "value subkeyed key=string namespace=int64 value=int64"},
	} {
		m, err := Resolve(mustParse(t, c[0]), mustParse(t, c[1]))
		if err != nil || m.Verdict != Compatible || m.Rewrites() {
			t.Errorf("%s → %s: %+v, %v; want compatible without rewriting", c[0], c[1], m, err)
		}
	}
}

// Corrupt input is an error wrapping runtime.ErrCorrupt, never a panic,
// including in the parts the migration copies unchanged.
func TestTranscodeRejectsCorruptValues(t *testing.T) {
	m, err := Resolve(mustParse(t, valueSchema("struct{A []string;B int8}")), mustParse(t, valueSchema("struct{B int16;A []string}")))
	if err != nil {
		t.Fatal(err)
	}
	good := enc(mustParse(t, valueSchema("struct{A []string;B int8}")).Value, []any{[]any{"x", "y"}, int8(3)})
	for i := range good {
		if _, err := m.Transcode(nil, good[:i]); !errors.Is(err, runtime.ErrCorrupt) {
			t.Errorf("truncated at %d: %v, want ErrCorrupt", i, err)
		}
	}
	if _, err := m.Transcode(nil, append(slices.Clone(good), 0)); !errors.Is(err, runtime.ErrCorrupt) {
		t.Errorf("trailing byte: %v, want ErrCorrupt", err)
	}
	// A count that claims more elements than bytes.
	if _, err := m.Transcode(nil, []byte{0xff, 0xff, 0x03, 0}); !errors.Is(err, runtime.ErrCorrupt) {
		t.Errorf("huge count: %v, want ErrCorrupt", err)
	}
}
