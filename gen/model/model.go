// Package model is the generator's model of state declarations: the states a
// package declares and the Go types their keys, namespaces, user keys and
// values have, reduced to what code generation needs.
//
// The model sits between the two other stages of the generator (see package
// gen): package load builds it from go/types, package emit prints code from
// it. It imports neither: a model is plain data, so the emitter can be tested
// on hand-built models and a new type family touches this package, the
// loader's conversion and one emitter.
//
// # Types
//
// A Type is a tree (the loader rejects recursive types) of Kinds. Leaf kinds
// are the basic types, string, []byte, time.Time and time.Duration; composite
// kinds are arrays, slices, maps, pointers and structs. A defined type is a
// Named node whose Under is its underlying structure, so that code can both
// name it and encode its structure. Identical Go types share one *Type.
//
// # Schemas and fingerprints
//
// Every state has a canonical schema string (State.Schema) that describes its
// encoding and nothing else; its fingerprint (State.Fingerprint) is a hash of
// the schema. The grammar is:
//
//	schema = "stategen/v1 " kind [" subkeyed"] " key=" type [" namespace=" type]
//	         [" userkey=" type] " value=" type
//	kind   = "value" | "list" | "map" | "sortedmap"
//	type   = "bool" | "int" | "int8" | "int16" | "int32" | "int64"
//	       | "uint" | "uint8" | "uint16" | "uint32" | "uint64"
//	       | "float32" | "float64" | "string" | "bytes" | "time" | "duration"
//	       | "[" N "]" type | "[]" type | "map[" type "]" type | "*" type
//	       | "struct{" [field {";" field}] "}"
//	field  = name " " type
//
// Defined types are replaced by their structure, so renaming a type or moving
// it to another package keeps the fingerprint, while renaming, reordering,
// adding or removing a field, or changing a type, changes it. Keys,
// namespaces and user keys use the key encoding of their type and values the
// value encoding, which the position in the schema implies. A struct field
// tagged `stategen:"name"` is called name in the schema, so its Go name can
// change and its data stay. The fingerprint is "v1:" followed by the first
// 16 bytes of the SHA-256 of the schema, in lowercase hex.
//
// The grammar's parsed form, and the rules of which schema changes a
// checkpoint migrates across, are package runtime/schema's: State.Schema is
// SchemaState().String().
package model

import (
	"fmt"
	"go/token"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/schema"
)

// Kind is the kind of a Type.
type Kind uint8

// The kinds of types. Bool through Duration are leaves; Array through Struct
// are composite; Named is a defined type.
const (
	Invalid Kind = iota
	Bool
	Int
	Int8
	Int16
	Int32
	Int64
	Uint
	Uint8
	Uint16
	Uint32
	Uint64
	Float32
	Float64
	String
	Bytes    // []byte
	Time     // time.Time
	Duration // time.Duration
	Array
	Slice
	Map
	Pointer
	Struct
	Named
)

// String returns the kind's name, as used in schemas for leaves (the
// names of package runtime/schema, whose kinds are the model's but for
// Named).
func (k Kind) String() string {
	switch k {
	case Invalid:
		return "invalid"
	case Named:
		return "named"
	}
	return schema.Kind(k).String()
}

// IsLeaf reports whether k is a basic type, string, []byte, time.Time or
// time.Duration.
func (k Kind) IsLeaf() bool { return k >= Bool && k <= Duration }

// IsFloat reports whether k is float32 or float64.
func (k Kind) IsFloat() bool { return k == Float32 || k == Float64 }

// Type is a Go type in the model. Which fields are set depends on Kind.
type Type struct {
	Kind Kind

	// Named: the defining package's import path and name, the type's name,
	// its type arguments if it is an instantiated generic type, and its
	// underlying type (never Named). A Named type whose Under is Time is a
	// defined type over time.Time's structure (type Stamp time.Time).
	Pkg     string
	PkgName string
	Name    string
	Args    []*Type
	Under   *Type

	// Elem is the element type of arrays, slices and pointers and the value
	// type of maps; Key is the key type of maps; Len is the length of arrays.
	Elem *Type
	Key  *Type
	Len  int64

	// Fields are the encoded fields of a struct, in declaration order
	// (blank fields are not encoded and not listed).
	Fields []Field
}

// Field is a struct field.
type Field struct {
	Name     string // the field's name; for an embedded field, its type's name
	Type     *Type
	Embedded bool
	Tag      string // the raw tag; part of the identity of unnamed struct types
}

// Base returns t's structure: Under for a Named type, t itself otherwise.
func (t *Type) Base() *Type {
	if t.Kind == Named {
		return t.Under
	}
	return t
}

// IsLeaf reports whether t's structure is a leaf kind.
func (t *Type) IsLeaf() bool { return t.Base().Kind.IsLeaf() }

// GoValue reports whether Go values of t behave as their encodings, so
// that a state may keep them as Go values (runtime.TypedValues): as a key
// (key), when == holds exactly when the encodings are equal and reads no
// memory outside the value — no floating-point number, no string; as a
// value, when a copy shares nothing its owner could change. Either way t
// is made of booleans, numbers, durations and (in values) strings, in
// arrays and structs whose fields are all exported (an unexported field is
// one the runtime cannot check), with no []byte, slice, map, pointer or
// time.Time (which holds a *time.Location).
func (t *Type) GoValue(key bool) bool {
	b := t.Base()
	switch {
	case b.Kind == Bytes || b.Kind == Time:
		return false
	case b.Kind.IsFloat() || b.Kind == String:
		return !key
	case b.Kind.IsLeaf():
		return true
	case b.Kind == Array:
		return b.Elem.GoValue(key)
	case b.Kind == Struct:
		for _, f := range b.Fields {
			if !token.IsExported(f.Name) || !f.Type.GoValue(key) {
				return false
			}
		}
		return true
	}
	return false
}

// ID returns a string that identifies t among all Go types: equal IDs mean
// identical types. It spells the type in Go syntax with full import paths.
func (t *Type) ID() string {
	var b strings.Builder
	t.write(&b, func(pkg, _ string) string { return pkg })
	return b.String()
}

// GoString spells t in Go syntax, qualifying defined types by package name
// except those of package local, as error messages do.
func (t *Type) GoString(local string) string {
	var b strings.Builder
	t.write(&b, func(pkg, name string) string {
		if pkg == local {
			return ""
		}
		return name
	})
	return b.String()
}

func (t *Type) write(b *strings.Builder, qual func(pkg, name string) string) {
	switch t.Kind {
	case Named:
		if q := qual(t.Pkg, t.PkgName); q != "" {
			b.WriteString(q)
			b.WriteByte('.')
		}
		b.WriteString(t.Name)
		if len(t.Args) > 0 {
			b.WriteByte('[')
			for i, a := range t.Args {
				if i > 0 {
					b.WriteByte(',')
				}
				a.write(b, qual)
			}
			b.WriteByte(']')
		}
	case Bytes:
		b.WriteString("[]byte")
	case Time:
		b.WriteString("time.Time")
	case Duration:
		b.WriteString("time.Duration")
	case Array:
		fmt.Fprintf(b, "[%d]", t.Len)
		t.Elem.write(b, qual)
	case Slice:
		b.WriteString("[]")
		t.Elem.write(b, qual)
	case Map:
		b.WriteString("map[")
		t.Key.write(b, qual)
		b.WriteByte(']')
		t.Elem.write(b, qual)
	case Pointer:
		b.WriteByte('*')
		t.Elem.write(b, qual)
	case Struct:
		b.WriteString("struct{")
		for i, f := range t.Fields {
			if i > 0 {
				b.WriteString("; ")
			}
			if !f.Embedded {
				b.WriteString(f.Name)
				b.WriteByte(' ')
			}
			f.Type.write(b, qual)
			if f.Tag != "" {
				b.WriteByte(' ')
				b.WriteString(strconv.Quote(f.Tag))
			}
		}
		b.WriteByte('}')
	default:
		b.WriteString(t.Kind.String())
	}
}

// Schema returns t's canonical schema (see the package documentation).
func (t *Type) Schema() string { return t.SchemaType().String() }

// SchemaType returns t's structure in the schema grammar's terms (package
// runtime/schema): defined types are replaced by their structure, and a
// struct field is named by its `stategen:"name"` tag if it has one — so
// renaming the Go field keeps its data — and by its Go name otherwise.
func (t *Type) SchemaType() *schema.Type {
	switch t.Kind {
	case Named:
		return t.Under.SchemaType()
	case Array:
		return &schema.Type{Kind: schema.Array, Len: t.Len, Elem: t.Elem.SchemaType()}
	case Slice, Pointer:
		return &schema.Type{Kind: schema.Kind(t.Kind), Elem: t.Elem.SchemaType()}
	case Map:
		return &schema.Type{Kind: schema.Map, Key: t.Key.SchemaType(), Elem: t.Elem.SchemaType()}
	case Struct:
		st := &schema.Type{Kind: schema.Struct}
		for _, f := range t.Fields {
			st.Fields = append(st.Fields, schema.Field{Name: f.SchemaName(), Type: f.Type.SchemaType()})
		}
		return st
	}
	return &schema.Type{Kind: schema.Kind(t.Kind)}
}

// SchemaTag is the struct tag key that names a field in the schema:
// `stategen:"score"` keeps a field's data when its Go name changes.
const SchemaTag = "stategen"

// SchemaName returns the field's name in the schema: its SchemaTag, or its
// Go name.
func (f Field) SchemaName() string {
	if name := reflect.StructTag(f.Tag).Get(SchemaTag); name != "" {
		return name
	}
	return f.Name
}

// MinSize returns the smallest number of bytes the value encoding of t
// takes. It is zero only for types whose values all encode to nothing
// (struct{} and the like).
func (t *Type) MinSize() int64 { return t.SchemaType().MinSize() }

// Strings returns how many strings a value of t can hold: 0, 1 or 2 (two or
// more). Decoders of values that can hold several strings back them with one
// allocation.
func (t *Type) Strings() int {
	switch b := t.Base(); b.Kind {
	case String:
		return 1
	case Array:
		return min(2, int(min(b.Len, 2))*b.Elem.Strings())
	case Slice:
		return min(2, 2*b.Elem.Strings())
	case Map:
		return min(2, 2*(b.Key.Strings()+b.Elem.Strings()))
	case Pointer:
		return b.Elem.Strings()
	case Struct:
		n := 0
		for _, f := range b.Fields {
			n += f.Type.Strings()
		}
		return min(2, n)
	default:
		return 0
	}
}

// Role is the part a type plays in a state.
type Role uint8

// The roles of a state's types. Key, Namespace and UserKey use key
// encodings; Value uses value encodings.
const (
	RoleKey Role = iota + 1
	RoleNamespace
	RoleUserKey
	RoleValue
)

// String returns "key", "namespace", "user key" or "value".
func (r Role) String() string {
	switch r {
	case RoleKey:
		return "key"
	case RoleNamespace:
		return "namespace"
	case RoleUserKey:
		return "user key"
	case RoleValue:
		return "value"
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// IsKey reports whether r uses key encodings.
func (r Role) IsKey() bool { return r != RoleValue }

// StateKind is the kind of a state; its values match runtime.Kind.
type StateKind uint8

// The four kinds of state.
const (
	KindValue StateKind = iota + 1
	KindList
	KindMap
	KindSortedMap
)

// String returns the kind's name as runtime.Kind spells it.
func (k StateKind) String() string {
	switch k {
	case KindValue:
		return "value"
	case KindList:
		return "list"
	case KindMap:
		return "map"
	case KindSortedMap:
		return "sortedmap"
	}
	return fmt.Sprintf("StateKind(%d)", uint8(k))
}

// State is one state: one field of a state struct.
type State struct {
	Field    string // the Go field of the state struct
	Name     string // the stable state name
	Kind     StateKind
	SubKeyed bool
	// Timers marks a timer state (runtime.Timers[Key, Namespace]): its
	// Kind is KindSortedMap, as stored (see schema.Timers), and it has a
	// Key and a Namespace but no UserKey or Value.
	Timers bool
	// Operator marks an operator list (runtime.OperatorList, or
	// runtime.UnionList if Union): a list of Value per operator instance,
	// with no Key.
	Operator, Union bool
	// Key is set for all but operator lists, Namespace for sub-keyed
	// states and timers, UserKey for maps, Value for all but timers.
	Key, Namespace, UserKey, Value *Type
	Pos                            token.Position // the field's position
	// Migrations are the user's functions that migrate the state's values
	// from older value types (//stategen:migrate).
	Migrations []*Migration
	// TTL is the state's time to live (the tag option ttl=), zero for
	// none; TTLOnRead reports ttlupdate=read-and-write: reads renew
	// entries too (runtime.TTL).
	TTL       time.Duration
	TTLOnRead bool
}

// Migration is a function the user wrote, marked //stategen:migrate, that
// migrates a state's values from an older value type: the escape hatch
// for a change the schema rules refuse (see runtime.Migration).
type Migration struct {
	// Func is the function's name: func Func(old From) (Value, error).
	Func string
	// From is the old value type.
	From *Type
	// Pos is the function's position.
	Pos token.Position
}

// MigrationSchema returns the schema of s with the old value type of m:
// the checkpoints m migrates from.
func (s *State) MigrationSchema(m *Migration) string {
	old := *s
	old.Value = m.From
	return old.Schema()
}

// Handle returns the name of the runtime handle type of s, such as
// "SubKeyedSortedMap".
func (s *State) Handle() string {
	switch {
	case s.Timers:
		return "Timers"
	case s.Union:
		return "UnionList"
	case s.Operator:
		return "OperatorList"
	}
	var n string
	switch s.Kind {
	case KindValue:
		n = "Value"
	case KindList:
		n = "List"
	case KindMap:
		n = "Map"
	case KindSortedMap:
		n = "SortedMap"
	}
	if s.SubKeyed {
		n = "SubKeyed" + n
	}
	return n
}

// SchemaState returns s's schema (package runtime/schema), the parsed form
// of Schema.
func (s *State) SchemaState() *schema.State {
	if s.Timers {
		return schema.Timers(s.Key.SchemaType(), s.Namespace.SchemaType())
	}
	if s.Operator {
		return schema.OperatorList(s.Value.SchemaType())
	}
	st := &schema.State{Kind: runtime.Kind(s.Kind), SubKeyed: s.SubKeyed, Key: s.Key.SchemaType(), Value: s.Value.SchemaType()}
	if s.Namespace != nil {
		st.Namespace = s.Namespace.SchemaType()
	}
	if s.UserKey != nil {
		st.UserKey = s.UserKey.SchemaType()
	}
	return st
}

// Schema returns the canonical schema string of s (see the package
// documentation).
func (s *State) Schema() string { return s.SchemaState().String() }

// Fingerprint returns the fingerprint of s: "v1:" and the first 16 bytes of
// the SHA-256 of its schema, in hex.
func (s *State) Fingerprint() string { return Fingerprint(s.Schema()) }

// Fingerprint returns the fingerprint of a schema string
// (schema.Fingerprint).
func Fingerprint(s string) string { return schema.Fingerprint(s) }

// StateStruct is a struct type marked //stategen:state.
type StateStruct struct {
	Name   string
	States []*State
	Pos    token.Position
}

// Package is a package with state declarations, or without any: then the
// generator removes its generated files.
type Package struct {
	Path string // import path
	Name string // package name
	Dir  string // directory of its files
	// Structs are the state structs, in source order.
	Structs []*StateStruct
	// Decls maps every package-scope identifier declared outside generated
	// files to its position, so that the emitter can refuse to emit a
	// conflicting name.
	Decls map[string]token.Position
}

// Error is a problem with the input, at a position in it.
type Error struct {
	Pos token.Position
	Msg string
}

// Error formats e as "file:line:col: msg".
func (e *Error) Error() string {
	if !e.Pos.IsValid() {
		return e.Msg
	}
	return e.Pos.String() + ": " + e.Msg
}

// ErrorList is a list of errors, sorted by position by Sort.
type ErrorList []*Error

// Error returns the errors one per line.
func (l ErrorList) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Sort sorts l by file, line, column and message.
func (l ErrorList) Sort() {
	sort.SliceStable(l, func(i, j int) bool {
		a, b := l[i].Pos, l[j].Pos
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Column != b.Column {
			return a.Column < b.Column
		}
		return l[i].Msg < l[j].Msg
	})
}

// Err returns l as an error, or nil if l is empty.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}
