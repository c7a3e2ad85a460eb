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
