package schema

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/stategen/stategen/runtime"
)

// ErrSyntax reports a schema string that does not follow the grammar.
var ErrSyntax = errors.New("schema: invalid schema")

// Prefix starts every schema string of this version of the grammar.
const Prefix = "stategen/v1 "

// Kind is the kind of a Type.
type Kind uint8

// The kinds of types: the leaves, then the composites.
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
)

var kindNames = [...]string{
	Bool: "bool", Int: "int", Int8: "int8", Int16: "int16", Int32: "int32", Int64: "int64",
	Uint: "uint", Uint8: "uint8", Uint16: "uint16", Uint32: "uint32", Uint64: "uint64",
	Float32: "float32", Float64: "float64", String: "string", Bytes: "bytes",
	Time: "time", Duration: "duration",
}

// String returns the kind's name in the grammar, e.g. "int64"; composites
// are "array", "slice", "map", "pointer" and "struct".
func (k Kind) String() string {
	switch k {
	case Array:
		return "array"
	case Slice:
		return "slice"
	case Map:
		return "map"
	case Pointer:
		return "pointer"
	case Struct:
		return "struct"
	}
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Type is the structure of a type, as the schema grammar spells it.
type Type struct {
	Kind Kind
	// Len is an array's length.
	Len int64
	// Key is a map's key type.
	Key *Type
	// Elem is the element type of an array, a slice or a pointer, and the
	// value type of a map.
	Elem *Type
	// Fields are a struct's fields, in encoding order.
	Fields []Field
}

// Field is a field of a struct type.
type Field struct {
	// Name is the field's schema name: its Go name, or the name of its
	// `stategen:"..."` tag.
	Name string
	Type *Type
}

// State is a parsed schema string: what a state is and how its parts are
// encoded.
type State struct {
	Kind     runtime.Kind
	SubKeyed bool
	// Key and Value are always set, Namespace for sub-keyed states,
	// UserKey for Map and SortedMap states.
	Key, Namespace, UserKey, Value *Type
}

// Timers returns the schema of a timer state (runtime.Timers) whose keys
// have type key and namespaces type ns: what the state stores, a sorted map
// from a key-group anchor (uint32) to its timers, each the user key
// struct{Time int64; Key; Namespace} with an empty value.
func Timers(key, ns *Type) *State {
	return &State{
		Kind: runtime.KindSortedMap,
		Key:  &Type{Kind: Uint32},
		UserKey: &Type{Kind: Struct, Fields: []Field{
			{Name: "Time", Type: &Type{Kind: Int64}}, {Name: "Key", Type: key}, {Name: "Namespace", Type: ns},
		}},
		Value: &Type{Kind: Struct},
	}
}

// OperatorList returns the schema of an operator list (runtime.OperatorList,
// runtime.UnionList) of elements of type value: a list with no key (the
// empty struct), whose fingerprint its operator-state container records.
func OperatorList(value *Type) *State {
	return &State{Kind: runtime.KindList, Key: &Type{Kind: Struct}, Value: value}
}

// String returns the type in the schema grammar.
func (t *Type) String() string {
	var b strings.Builder
	t.write(&b)
	return b.String()
}

func (t *Type) write(b *strings.Builder) {
	switch t.Kind {
	case Array:
		fmt.Fprintf(b, "[%d]", t.Len)
		t.Elem.write(b)
	case Slice:
		b.WriteString("[]")
		t.Elem.write(b)
	case Map:
		b.WriteString("map[")
		t.Key.write(b)
		b.WriteByte(']')
		t.Elem.write(b)
	case Pointer:
		b.WriteByte('*')
		t.Elem.write(b)
	case Struct:
		b.WriteString("struct{")
		for i, f := range t.Fields {
			if i > 0 {
				b.WriteByte(';')
			}
			b.WriteString(f.Name)
			b.WriteByte(' ')
			f.Type.write(b)
		}
		b.WriteByte('}')
	default:
		b.WriteString(t.Kind.String())
	}
}

// String returns the canonical schema string of s: Parse(s.String())
// returns s again.
func (s *State) String() string {
	var b strings.Builder
	b.WriteString(Prefix)
	b.WriteString(s.Kind.String())
	if s.SubKeyed {
		b.WriteString(" subkeyed")
	}
	b.WriteString(" key=")
	s.Key.write(&b)
	if s.Namespace != nil {
		b.WriteString(" namespace=")
		s.Namespace.write(&b)
	}
	if s.UserKey != nil {
		b.WriteString(" userkey=")
		s.UserKey.write(&b)
	}
	b.WriteString(" value=")
	s.Value.write(&b)
	return b.String()
}

// Fingerprint returns the fingerprint of a schema string: "v1:" and the
// first 16 bytes of its SHA-256, in lowercase hex. Generated descriptors
// carry it as runtime.StateSpec.Fingerprint, and a checkpoint's recorded
// schema must hash to its recorded fingerprint.
func Fingerprint(schema string) string {
	sum := sha256.Sum256([]byte(schema))
	return "v1:" + hex.EncodeToString(sum[:16])
}

// MaxDepth bounds the nesting of a parsed schema, so that a hostile schema
// string in a checkpoint cannot exhaust the stack.
const MaxDepth = 64

// MaxLen bounds the length of a schema string Parse accepts, and MaxArray
// the length of an array type.
const (
	MaxLen   = 1 << 20
	MaxArray = 1 << 30
)

// Parse parses a schema string. Errors wrap ErrSyntax and give the offset
// of the problem.
func Parse(s string) (*State, error) {
	if len(s) > MaxLen {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrSyntax, len(s), MaxLen)
	}
	p := &parser{s: s}
	st, err := p.state()
	if err != nil {
		return nil, err
	}
	return st, nil
}

type parser struct {
	s   string
	pos int
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w at offset %d: %s", ErrSyntax, p.pos, fmt.Sprintf(format, args...))
}

func (p *parser) accept(lit string) bool {
	if strings.HasPrefix(p.s[p.pos:], lit) {
		p.pos += len(lit)
		return true
	}
	return false
}

func (p *parser) expect(lit string) error {
	if !p.accept(lit) {
		return p.errorf("want %q", lit)
	}
	return nil
}

// word returns the run of letters, digits and underscores at the current
// position.
func (p *parser) word() string {
	start := p.pos
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		if c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80 {
			p.pos++
			continue
		}
		break
	}
	return p.s[start:p.pos]
}

func (p *parser) state() (*State, error) {
	if err := p.expect(Prefix); err != nil {
		return nil, err
	}
	kind, err := runtime.ParseKind(p.word())
	if err != nil {
		return nil, p.errorf("state kind: %v", err)
	}
	st := &State{Kind: kind}
	if p.accept(" subkeyed") {
		st.SubKeyed = true
	}
	if err := p.expect(" key="); err != nil {
		return nil, err
	}
	if st.Key, err = p.typ(0); err != nil {
		return nil, err
	}
	if p.accept(" namespace=") {
		if st.Namespace, err = p.typ(0); err != nil {
			return nil, err
		}
	}
	if p.accept(" userkey=") {
		if st.UserKey, err = p.typ(0); err != nil {
			return nil, err
		}
	}
	if err := p.expect(" value="); err != nil {
		return nil, err
	}
	if st.Value, err = p.typ(0); err != nil {
		return nil, err
	}
	switch {
	case p.pos != len(p.s):
		return nil, p.errorf("trailing text %q", p.s[p.pos:])
	case st.SubKeyed != (st.Namespace != nil):
		return nil, p.errorf("a namespace goes with subkeyed, and only with it")
	case kind.HasUserKey() != (st.UserKey != nil):
		return nil, p.errorf("a user key goes with map and sortedmap states, and only with them")
	}
	return st, nil
}

func (p *parser) typ(depth int) (*Type, error) {
	if depth > MaxDepth {
		return nil, p.errorf("types nested more than %d deep", MaxDepth)
	}
	switch {
	case p.accept("[]"):
		elem, err := p.typ(depth + 1)
		if err != nil {
			return nil, err
		}
		return &Type{Kind: Slice, Elem: elem}, nil
	case p.accept("["):
		start := p.pos
		for p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
			p.pos++
		}
		n, err := strconv.ParseInt(p.s[start:p.pos], 10, 64)
		if err != nil || n < 0 || n > MaxArray {
			return nil, p.errorf("array length %q is not in [0, %d]", p.s[start:p.pos], MaxArray)
		}
		if err := p.expect("]"); err != nil {
			return nil, err
		}
		elem, err := p.typ(depth + 1)
		if err != nil {
			return nil, err
		}
		return &Type{Kind: Array, Len: n, Elem: elem}, nil
	case p.accept("map["):
		key, err := p.typ(depth + 1)
		if err != nil {
			return nil, err
		}
		if err := p.expect("]"); err != nil {
			return nil, err
		}
		elem, err := p.typ(depth + 1)
		if err != nil {
			return nil, err
		}
		return &Type{Kind: Map, Key: key, Elem: elem}, nil
	case p.accept("*"):
		elem, err := p.typ(depth + 1)
		if err != nil {
			return nil, err
		}
		return &Type{Kind: Pointer, Elem: elem}, nil
	case p.accept("struct{"):
		t := &Type{Kind: Struct}
		if p.accept("}") {
			return t, nil
		}
		seen := map[string]bool{}
		for {
			name := p.word()
			if name == "" {
				return nil, p.errorf("want a field name")
			}
			if seen[name] {
				return nil, p.errorf("field %s appears twice", name)
			}
			seen[name] = true
			if err := p.expect(" "); err != nil {
				return nil, err
			}
			ft, err := p.typ(depth + 1)
			if err != nil {
				return nil, err
			}
			t.Fields = append(t.Fields, Field{Name: name, Type: ft})
			if p.accept("}") {
				return t, nil
			}
			if err := p.expect(";"); err != nil {
				return nil, err
			}
		}
	}
	name := p.word()
	for k := Bool; k <= Duration; k++ {
		if kindNames[k] == name {
			return &Type{Kind: k}, nil
		}
	}
	return nil, p.errorf("unknown type %q", name)
}
