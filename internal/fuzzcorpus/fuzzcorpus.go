// Package fuzzcorpus checks and rewrites the checked-in seed corpus of a
// generated FuzzStategenDecode target (see cmd/stategen): the packages of
// this module that hold generated codecs (generated/, the clickstream
// example) keep one in testdata/fuzz/FuzzStategenDecode and test it with
// Check.
//
// The corpus has three files per codec, the codec picked by a seed's first
// byte as in the fuzz target: "valid-<codec>-one", one real encoding of a
// random value, which must decode; "valid-<codec>-two", two, which must
// decode whole for a key codec (two keys, compared by the fuzz target) and
// as one value followed by more bytes for a value codec; and
// "broken-<codec>-truncated", which must not decode. Encodings of maps
// depend on iteration order, so the files are checked by what they decode
// to, not byte for byte. Files of other names (inputs the fuzzer found, or
// seeds written by hand) are left alone: go test runs them as regression
// inputs of the fuzz target itself.
package fuzzcorpus

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Codec is one entry of a generated package's codec test table.
type Codec struct {
	// Name is the codec's name in the table, such as "EventCodec/value";
	// names ending in "/key" are key codecs.
	Name string
	// Seed returns one encoding of a random value.
	Seed func(*rand.Rand) []byte
	// Decode decodes data as the fuzz target does (after the selector
	// byte) and returns how many keys or values it decoded whole.
	Decode func(data []byte) (int, error)
}

// Check checks the corpus in dir against codecs, in the order of the
// generated table. With update it first rewrites the valid- and broken-
// files from random values (a fixed seed, so reruns write the same files
// where encodings are deterministic), and writes extra as well: seeds made
// by hand, named like the others (their first byte picks the codec), so
// that Check holds them to the same rules.
func Check(t *testing.T, dir string, codecs []Codec, update bool, extra map[string][]byte) {
	t.Helper()
	fileName := func(c Codec) string { return strings.ReplaceAll(c.Name, "/", "-") }
	if update {
		seeds := map[string][]byte{}
		r := rand.New(rand.NewPCG(7, 11))
		for i, c := range codecs {
			one := append([]byte{byte(i)}, c.Seed(r)...)
			seeds["valid-"+fileName(c)+"-one"] = one
			seeds["valid-"+fileName(c)+"-two"] = append(bytes.Clone(one), c.Seed(r)...)
			seeds["broken-"+fileName(c)+"-truncated"] = one[:len(one)-1]
		}
		for name, b := range extra {
			seeds[name] = b
		}
		WriteSeeds(t, dir, seeds)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("%v (run with -update to write the corpus)", err)
	}
	covered := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		valid := strings.HasPrefix(name, "valid-")
		if !valid && !strings.HasPrefix(name, "broken-") {
			continue
		}
		data := ReadSeed(t, filepath.Join(dir, name))
		if len(data) == 0 {
			t.Errorf("corpus %s: empty", name)
			continue
		}
		c := codecs[int(data[0])%len(codecs)]
		if !strings.HasPrefix(strings.TrimPrefix(strings.TrimPrefix(name, "valid-"), "broken-"), fileName(c)+"-") {
			t.Errorf("corpus %s goes to codec %s: stale, rerun the corpus test with -update", name, c.Name)
			continue
		}
		want := 0
		switch {
		case valid && strings.HasSuffix(name, "-two") && strings.HasSuffix(c.Name, "/key"):
			want = 2
		case valid:
			want = 1
		}
		if n, err := c.Decode(data[1:]); err != nil || n != want {
			t.Errorf("corpus %s: %s decoded %d keys or values, want %d; %v", name, c.Name, n, want, err)
		}
		if valid {
			covered[c.Name] = true
		}
	}
	for _, c := range codecs {
		if !covered[c.Name] {
			t.Errorf("no valid seed of codec %s in %s; rerun the corpus test with -update", c.Name, dir)
		}
	}
}

// WriteSeeds replaces the valid- and broken- files of dir by seeds, as "go
// test fuzz v1" files of one []byte; other files are kept.
func WriteSeeds(t *testing.T, dir string, seeds map[string][]byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, pattern := range []string{"valid-*", "broken-*"} {
		old, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range old {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, b := range seeds {
		if err := os.WriteFile(filepath.Join(dir, name), Encode(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Encode returns b as a "go test fuzz v1" file of one []byte.
func Encode(b []byte) []byte {
	return []byte("go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n")
}

// ReadSeed reads the []byte of a "go test fuzz v1" file.
func ReadSeed(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rest, ok1 := strings.CutPrefix(string(data), "go test fuzz v1\n[]byte(")
	rest, ok2 := strings.CutSuffix(rest, ")\n")
	s, err := strconv.Unquote(rest)
	if !ok1 || !ok2 || err != nil {
		t.Fatalf("%s is not a go test fuzz v1 file of one []byte: %v", path, err)
	}
	return []byte(s)
}
