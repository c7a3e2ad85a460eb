package model

import "testing"

// TestFingerprintIsPinned pins (with a value computed by sha256sum) the schema and fingerprint of a state: they
// are stored in checkpoints, so a change here breaks restores and must be a
// deliberate, versioned change of the schema grammar.
func TestFingerprintIsPinned(t *testing.T) {
	window := &Type{Kind: Named, Pkg: "example.com/p", PkgName: "p", Name: "Window",
		Under: &Type{Kind: Struct, Fields: []Field{
			{Name: "Start", Type: &Type{Kind: Int64}},
			{Name: "End", Type: &Type{Kind: Int64}},
		}}}
	agg := &Type{Kind: Struct, Fields: []Field{
		{Name: "Count", Type: &Type{Kind: Int64}},
		{Name: "Tags", Type: &Type{Kind: Slice, Elem: &Type{Kind: String}}},
		{Name: "By", Type: &Type{Kind: Map, Key: &Type{Kind: String}, Elem: &Type{Kind: Pointer, Elem: &Type{Kind: Float64}}}},
		{Name: "Hash", Type: &Type{Kind: Array, Len: 4, Elem: &Type{Kind: Uint8}}},
		{Name: "At", Type: &Type{Kind: Time}},
		{Name: "Raw", Type: &Type{Kind: Bytes}},
	}}
	s := &State{Name: "aggs", Kind: KindValue, SubKeyed: true, Key: &Type{Kind: String}, Namespace: window, Value: agg}
	const wantSchema = "stategen/v1 value subkeyed key=string namespace=struct{Start int64;End int64} value=struct{Count int64;Tags []string;By map[string]*float64;Hash [4]uint8;At time;Raw bytes}"
	if got := s.Schema(); got != wantSchema {
		t.Errorf("schema\n got %s\nwant %s", got, wantSchema)
	}
	const wantFP = "v1:98ea20046a404bee4a46cbb95365e311"
	if got := s.Fingerprint(); got != wantFP {
		t.Errorf("fingerprint %s, want %s", got, wantFP)
	}
	// Renaming a defined type keeps the fingerprint; renaming a field does not.
	window.Name = "Span"
	if got := s.Fingerprint(); got != wantFP {
		t.Errorf("renaming a type changed the fingerprint to %s", got)
	}
	window.Under.Fields[1].Name = "Stop"
	if got := s.Fingerprint(); got == wantFP {
		t.Error("renaming a field kept the fingerprint")
	}
}

func TestMinSizeAndStrings(t *testing.T) {
	str := &Type{Kind: String}
	cases := []struct {
		t       *Type
		min     int64
		strings int
	}{
		{&Type{Kind: Float64}, 8, 0},
		{&Type{Kind: Struct}, 0, 0},
		{&Type{Kind: Array, Len: 3, Elem: &Type{Kind: Time}}, 6, 0},
		{&Type{Kind: Slice, Elem: str}, 1, 2},
		{&Type{Kind: Pointer, Elem: str}, 1, 1},
		{&Type{Kind: Struct, Fields: []Field{{Name: "A", Type: str}, {Name: "B", Type: &Type{Kind: Int}}}}, 2, 1},
	}
	for _, c := range cases {
		if got := c.t.MinSize(); got != c.min {
			t.Errorf("%s: MinSize %d, want %d", c.t.ID(), got, c.min)
		}
		if got := c.t.Strings(); got != c.strings {
			t.Errorf("%s: Strings %d, want %d", c.t.ID(), got, c.strings)
		}
	}
}

// TestGoValue: which types a state may keep as Go values
// (runtime.TypedValues), as key and as value. It must agree with the
// runtime's check of the same rules (runtime.goValueSafe), which refuses
// at bind time a descriptor the generator would otherwise emit: the
// generated packages' tests open every state they declare.
func TestGoValue(t *testing.T) {
	i64, str, f64 := &Type{Kind: Int64}, &Type{Kind: String}, &Type{Kind: Float64}
	st := func(fields ...Field) *Type { return &Type{Kind: Struct, Fields: fields} }
	named := func(under *Type) *Type { return &Type{Kind: Named, Pkg: "p", PkgName: "p", Name: "N", Under: under} }
	cases := []struct {
		t          *Type
		key, value bool
	}{
		{i64, true, true},
		{&Type{Kind: Bool}, true, true},
		{&Type{Kind: Duration}, true, true},
		{str, false, true},
		{f64, false, true},
		{&Type{Kind: Bytes}, false, false},
		{&Type{Kind: Time}, false, false},
		{named(&Type{Kind: Time}), false, false},
		{&Type{Kind: Slice, Elem: i64}, false, false},
		{&Type{Kind: Map, Key: i64, Elem: i64}, false, false},
		{&Type{Kind: Pointer, Elem: i64}, false, false},
		{&Type{Kind: Array, Len: 2, Elem: i64}, true, true},
		{&Type{Kind: Array, Len: 2, Elem: str}, false, true},
		{st(Field{Name: "A", Type: i64}, Field{Name: "B", Type: &Type{Kind: Uint8}}), true, true},
		{named(st(Field{Name: "A", Type: i64}, Field{Name: "S", Type: str})), false, true},
		{st(Field{Name: "a", Type: i64}), false, false},
		{st(Field{Name: "A", Type: &Type{Kind: Slice, Elem: i64}}), false, false},
	}
	for _, c := range cases {
		if got := c.t.GoValue(true); got != c.key {
			t.Errorf("%s as a key: %v, want %v", c.t.ID(), got, c.key)
		}
		if got := c.t.GoValue(false); got != c.value {
			t.Errorf("%s as a value: %v, want %v", c.t.ID(), got, c.value)
		}
	}
}
