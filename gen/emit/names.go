package emit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/stategen/stategen/gen/model"
)

// Naming. Every composite type reached gets a mangled name, unique in the
// package, from which the names of its generated functions derive
// (stategenAppendV<name>, ...). Names depend only on the types themselves,
// so adding a state does not rename the functions of other types; two types
// that mangle alike are told apart by a suffix, in the order of their IDs.

// reservedPrefix starts every unexported identifier the generator declares.
const reservedPrefix = "stategen"

// mangle returns a readable identifier fragment for t.
func mangle(t *model.Type, local string) string {
	switch t.Kind {
	case model.Named:
		var b strings.Builder
		if t.Pkg != local {
			b.WriteString(upperFirst(t.PkgName))
		}
		b.WriteString(upperFirst(t.Name))
		for i, a := range t.Args {
			if i == 0 {
				b.WriteString("Of")
			} else {
				b.WriteString("And")
			}
			b.WriteString(mangle(a, local))
		}
		return b.String()
	case model.Array:
		return fmt.Sprintf("Array%dOf%s", t.Len, mangle(t.Elem, local))
	case model.Slice:
		return "SliceOf" + mangle(t.Elem, local)
	case model.Map:
		return "MapOf" + mangle(t.Key, local) + "To" + mangle(t.Elem, local)
	case model.Pointer:
		return "PtrTo" + mangle(t.Elem, local)
	case model.Struct:
		sum := sha256.Sum256([]byte(t.ID()))
		return "Struct" + hex.EncodeToString(sum[:4])
	default:
		return upperFirst(t.Kind.String())
	}
}

func upperFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

// assignNames gives every type in types a unique mangled name.
func assignNames(types map[string]*model.Type, local string) map[string]string {
	ids := make([]string, 0, len(types))
	for id := range types {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	byName := map[string]int{}
	names := map[string]string{}
	for _, id := range ids {
		m := mangle(types[id], local)
		byName[m]++
		if n := byName[m]; n > 1 {
			m = fmt.Sprintf("%s_%d", m, n)
		}
		names[id] = m
	}
	return names
}
