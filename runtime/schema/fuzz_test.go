package schema

import (
	"errors"
	"testing"

	"github.com/stategen/stategen/runtime"
)

// FuzzTranscode resolves random pairs of schemas and runs random bytes
// through the migration: never a panic, only errors wrapping ErrSyntax,
// ErrIncompatible or runtime.ErrCorrupt, and never output out of
// proportion to the input.
func FuzzTranscode(f *testing.F) {
	for _, c := range [][2]string{
		{"struct{A int64;B string}", "struct{A int64;B string;C float64}"},
		{"map[string][]struct{X int8;Old bool}", "map[string][]struct{New string;X int32}"},
		{"*struct{A int32;T time}", "struct{T time;A int64}"},
		{"[]struct{}", "[]struct{A [4]float64}"},
		{"bytes", "string"},
		{"map[uint8]*uint16", "map[int64]uint64"},
	} {
		w, r := valueSchema(c[0]), valueSchema(c[1])
		f.Add(w, r, []byte{})
		f.Add(w, r, []byte{2, 1, 'x', 3, 0, 0, 0, 0, 0, 0, 0, 0})
		f.Add(w, r, []byte{0xff, 0xff, 0x03})
	}
	f.Fuzz(func(t *testing.T, ws, rs string, value []byte) {
		w, err := Parse(ws)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("Parse: %v", err)
			}
			return
		}
		r, err := Parse(rs)
		if err != nil {
			return
		}
		m, err := Resolve(w, r)
		if err != nil {
			if !errors.Is(err, ErrIncompatible) {
				t.Fatalf("Resolve: %v", err)
			}
			return
		}
		out, err := m.Transcode(nil, value)
		if err != nil {
			if !errors.Is(err, runtime.ErrCorrupt) {
				t.Fatalf("Transcode: %v", err)
			}
			return
		}
		// Every byte out comes from a byte in, or from a zero value the
		// reader added per element read: bounded by the zero value's size
		// times the elements, at most maxEmptyElems per byte of input.
		if limit := (len(value) + 1) * maxEmptyElems * (len(zeroValue(r.Value)) + 16); len(out) > limit {
			t.Fatalf("%d bytes out of %d in", len(out), len(value))
		}
	})
}
