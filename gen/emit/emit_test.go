package emit

import (
	"bytes"
	"errors"
	"go/token"
	"strings"
	"testing"
	"time"

	"github.com/stategen/stategen/gen/model"
)

// pkgWith returns a hand-built model of a package with one state whose
// value is a local struct type Event, and the given declarations.
func pkgWith(decls ...string) *model.Package {
	event := &model.Type{Kind: model.Named, Pkg: "example.com/p", PkgName: "p", Name: "Event",
		Under: &model.Type{Kind: model.Struct, Fields: []model.Field{
			{Name: "At", Type: &model.Type{Kind: model.Time}},
			{Name: "Tags", Type: &model.Type{Kind: model.Slice, Elem: &model.Type{Kind: model.String}}},
		}}}
	p := &model.Package{Path: "example.com/p", Name: "p", Decls: map[string]token.Position{},
		Structs: []*model.StateStruct{{Name: "S", States: []*model.State{{
			Field: "Events", Name: "events", Kind: model.KindList,
			Key: &model.Type{Kind: model.String}, Value: event,
		}}}}}
	for i, d := range decls {
		p.Decls[d] = token.Position{Filename: "p.go", Line: i + 1, Column: 6}
	}
	return p
}

func TestFileFromHandBuiltModel(t *testing.T) {
	code, err := File(pkgWith("S", "Event"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		Header + "\n",
		"func OpenS(s runtime.Store) (*S, error) {",
		"func DescribeS() SDescriptors {",
		"type SDescriptors struct {",
		"type EventCodec struct{}",
		"Value:       EventCodec{},",
		`Fingerprint: "` + pkgWith().Structs[0].States[0].Fingerprint() + `"`,
	} {
		if !bytes.Contains(code, []byte(want)) {
			t.Errorf("generated code lacks %q:\n%s", want, code)
		}
	}
}

func TestGeneratedNamesMustNotConflict(t *testing.T) {
	_, err := File(pkgWith("S", "Event", "EventCodec", "OpenS", "DescribeS", "SDescriptors"))
	var list model.ErrorList
	if !errors.As(err, &list) || len(list) != 4 {
		t.Fatalf("got %v, want four errors", err)
	}
	for i, want := range []string{
		"p.go:3:6: EventCodec conflicts with the codec stategen generates for type Event; rename one of them",
		"p.go:4:6: OpenS conflicts with the function stategen generates for state struct S; rename one of them",
		"p.go:5:6: DescribeS conflicts with the function stategen generates for state struct S; rename one of them",
		"p.go:6:6: SDescriptors conflicts with the type stategen generates for state struct S; rename one of them",
	} {
		if got := list[i].Error(); got != want {
			t.Errorf("error %d: got  %s\nwant %s", i, got, want)
		}
	}
}

func TestImportsAvoidPackageNames(t *testing.T) {
	p := pkgWith("S", "Event", "time", "fmt")
	p.Structs[0].States[0].Key = &model.Type{Kind: model.Time}
	code, err := File(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`timepkg "time"`, `fmtpkg "fmt"`, "timepkg.Time", "fmtpkg.Errorf"} {
		if !strings.Contains(string(code), want) {
			t.Errorf("generated code lacks %q:\n%s", want, code)
		}
	}
}

func TestNoStateNoFile(t *testing.T) {
	for _, f := range []func(*model.Package) ([]byte, error){File, TestFile} {
		if code, err := f(&model.Package{Path: "example.com/p", Name: "p"}); code != nil || err != nil {
			t.Errorf("got %q, %v; want nothing", code, err)
		}
	}
}

func TestGeneratedFuzzChecksKeyOrder(t *testing.T) {
	p := pkgWith("S", "Event", "Slot")
	p.Structs[0].States[0].Key = &model.Type{Kind: model.Named, Pkg: "example.com/p", PkgName: "p", Name: "Slot",
		Under: &model.Type{Kind: model.Struct, Fields: []model.Field{
			{Name: "At", Type: &model.Type{Kind: model.Time}},
			{Name: "N", Type: &model.Type{Kind: model.Int64}},
		}}}
	code, err := TestFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"func stategenFuzzKSlot(data []byte) (int, error) {",
		"for n := range 2 {",
		"want, have := stategenCompareSlot(&keys[0], &keys[1]), bytes.Compare(encs[0], encs[1])",
		"func stategenFuzzVEvent(data []byte) (int, error) {",
		`{"SlotCodec/key", stategenCheckKSlot, stategenFuzzKSlot, stategenSeedKSlot}`,
	} {
		if !strings.Contains(string(code), want) {
			t.Errorf("generated test file lacks %q:\n%s", want, code)
		}
	}
}

// TestTypedTables: a descriptor asks for a table of Go values
// (runtime.TypedValues, TypedSlices, TypedMaps) exactly for the keyed
// value and (unsorted) map states without TTL whose types allow it.
func TestTypedTables(t *testing.T) {
	i64, str := &model.Type{Kind: model.Int64}, &model.Type{Kind: model.String}
	cases := []struct {
		st   model.State
		want string // "" for none
	}{
		{model.State{Kind: model.KindValue, Key: i64, Value: str}, "runtime.TypedValues[int64, string]()"},
		{model.State{Kind: model.KindMap, Key: i64, UserKey: i64, Value: str}, "runtime.TypedMaps[int64, int64, string]()"},
		{model.State{Kind: model.KindMap, Key: i64, UserKey: str, Value: str}, ""},
		{model.State{Kind: model.KindMap, Key: str, UserKey: i64, Value: str}, ""},
		{model.State{Kind: model.KindSortedMap, Key: i64, UserKey: i64, Value: str}, ""},
		{model.State{Kind: model.KindMap, Key: i64, UserKey: i64, Value: str, TTL: time.Hour}, ""},
		{model.State{Kind: model.KindMap, Key: i64, Namespace: i64, SubKeyed: true, UserKey: i64, Value: str}, ""},
		{model.State{Kind: model.KindList, Key: i64, Value: str}, ""},
		{model.State{Kind: model.KindValue, Key: i64, Value: &model.Type{Kind: model.Slice, Elem: str}}, "runtime.TypedSlices[int64, string]()"},
		{model.State{Kind: model.KindValue, Key: i64, Value: &model.Type{Kind: model.Slice, Elem: &model.Type{Kind: model.Slice, Elem: i64}}}, ""},
		{model.State{Kind: model.KindMap, Key: i64, UserKey: i64, Value: &model.Type{Kind: model.Slice, Elem: i64}}, ""},
	}
	for i, c := range cases {
		st := c.st
		st.Field, st.Name = "F", "f"
		p := &model.Package{Path: "example.com/p", Name: "p", Decls: map[string]token.Position{},
			Structs: []*model.StateStruct{{Name: "S", States: []*model.State{&st}}}}
		code, err := File(p)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if i := bytes.Index(code, []byte("Typed:")); i >= 0 {
			line := code[i:]
			line = line[:bytes.IndexByte(line, '\n')]
			got = strings.TrimSuffix(strings.TrimSpace(strings.TrimPrefix(string(line), "Typed:")), ",")
		}
		if got != c.want {
			t.Errorf("case %d (%v state, key %s): Typed %q, want %q", i, st.Kind, st.Key.ID(), got, c.want)
		}
	}
}
