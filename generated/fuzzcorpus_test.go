package generated

import (
	"bytes"
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var updateCorpus = flag.Bool("update", false, "rewrite the seed corpus of FuzzStategenDecode in testdata/fuzz")

// TestFuzzStategenDecodeCorpus checks the checked-in seed corpus of the
// generated FuzzStategenDecode against the generated codecs. For each codec
// (the first byte of a seed picks it) it holds "valid-<codec>-one", one real
// encoding of a random value, which must decode; "valid-<codec>-two", two,
// which must decode whole for a key codec (two keys, compared by the fuzz
// target) and as one value followed by more bytes for a value codec; and
// "broken-<codec>-truncated", which must not decode. -update rewrites them.
// Encodings of maps depend on iteration order, so the files are checked
// by what they decode to, not byte for byte. Files of other names (inputs
// the fuzzer found) run as regression tests of FuzzStategenDecode itself.
func TestFuzzStategenDecodeCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzStategenDecode")
	fileName := func(c stategenCodecTest) string { return strings.ReplaceAll(c.name, "/", "-") }
	if *updateCorpus {
		seeds := map[string][]byte{}
		r := rand.New(rand.NewPCG(7, 11))
		for i, c := range stategenCodecTests {
			one := append([]byte{byte(i)}, c.seed(r)...)
			seeds["valid-"+fileName(c)+"-one"] = one
			seeds["valid-"+fileName(c)+"-two"] = append(bytes.Clone(one), c.seed(r)...)
			seeds["broken-"+fileName(c)+"-truncated"] = one[:len(one)-1]
		}
		// Time keys whose Unix seconds wrap sort after every other time
		// (see runtime.AppendTimeKey): decoded from arbitrary bytes they
		// are valid keys, and the fuzz target must not take their order
		// for a bug.
		i := slices.IndexFunc(stategenCodecTests, func(c stategenCodecTest) bool { return c.name == "SessionKeyCodec/key" })
		wrapped := SessionKeyCodec{}.AppendKey([]byte{byte(i)}, SessionKey{User: "u", At: time.Unix(math.MaxInt64, 0)})
		seeds["valid-SessionKeyCodec-key-wrapped-time-first-two"] = SessionKeyCodec{}.AppendKey(wrapped, SessionKey{User: "u"})
		writeFuzzSeeds(t, dir, seeds)
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
		data := readFuzzSeed(t, filepath.Join(dir, name))
		if len(data) == 0 {
			t.Errorf("corpus %s: empty", name)
			continue
		}
		c := stategenCodecTests[int(data[0])%len(stategenCodecTests)]
		if !strings.HasPrefix(strings.TrimPrefix(strings.TrimPrefix(name, "valid-"), "broken-"), fileName(c)+"-") {
			t.Errorf("corpus %s goes to codec %s: stale, run go test -run TestFuzzStategenDecodeCorpus -update", name, c.name)
			continue
		}
		want := 0
		switch {
		case valid && strings.HasSuffix(name, "-two") && strings.HasSuffix(c.name, "/key"):
			want = 2
		case valid:
			want = 1
		}
		if n, err := c.fuzz(data[1:]); err != nil || n != want {
			t.Errorf("corpus %s: %s decoded %d keys or values, want %d; %v", name, c.name, n, want, err)
		}
		if valid {
			covered[c.name] = true
		}
	}
	for _, c := range stategenCodecTests {
		if !covered[c.name] {
			t.Errorf("no valid seed of codec %s in %s; run go test -run TestFuzzStategenDecodeCorpus -update", c.name, dir)
		}
	}
}

// writeFuzzSeeds replaces the valid- and broken- files of dir by seeds, as
// "go test fuzz v1" files of one []byte.
func writeFuzzSeeds(t *testing.T, dir string, seeds map[string][]byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	old, err := filepath.Glob(filepath.Join(dir, "valid-*"))
	if err != nil {
		t.Fatal(err)
	}
	broken, err := filepath.Glob(filepath.Join(dir, "broken-*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(old, broken...) {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	for name, b := range seeds {
		data := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// readFuzzSeed reads the []byte of a "go test fuzz v1" file.
func readFuzzSeed(t *testing.T, path string) []byte {
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
