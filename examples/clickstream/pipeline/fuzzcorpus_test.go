package pipeline

import (
	"bytes"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var updateCorpus = flag.Bool("update", false, "rewrite the seed corpus of FuzzStategenDecode in testdata/fuzz")

// TestFuzzStategenDecodeCorpus keeps the checked-in seed corpus of the
// generated FuzzStategenDecode in step with the generated codecs. For each
// codec (the first byte of a seed picks it) it holds one and two real
// encodings of random values, which must decode whole — two keys for a key
// codec —, and a truncated encoding, which must not decode. -update
// rewrites the corpus; files of other names (inputs the fuzzer found) are
// left alone and run as regression tests by FuzzStategenDecode itself.
func TestFuzzStategenDecodeCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzStategenDecode")
	type seed struct {
		data []byte
		want int // keys or values that decode
	}
	seeds := map[string]seed{}
	r := rand.New(rand.NewPCG(7, 11))
	for i, c := range stategenCodecTests {
		name := strings.ReplaceAll(c.name, "/", "-")
		one := append([]byte{byte(i)}, c.seed(r)...)
		two := append(bytes.Clone(one), c.seed(r)...)
		wantTwo := 1 // a value followed by more bytes
		if strings.HasSuffix(c.name, "/key") {
			wantTwo = 2
		}
		seeds["valid-"+name+"-one"] = seed{one, 1}
		seeds["valid-"+name+"-two"] = seed{two, wantTwo}
		seeds["broken-"+name+"-truncated"] = seed{one[:len(one)-1], 0}
	}
	if *updateCorpus {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, s := range seeds {
			data := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s.data)) + ")\n"
			if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, s := range seeds {
		got := readFuzzSeed(t, filepath.Join(dir, name))
		if !bytes.Equal(got, s.data) {
			t.Errorf("corpus file %s is stale; run go test -run TestFuzzStategenDecodeCorpus -update", name)
			continue
		}
		c := stategenCodecTests[int(got[0])%len(stategenCodecTests)]
		n, err := c.fuzz(got[1:])
		if err != nil || n != s.want {
			t.Errorf("corpus %s: %s decoded %d, want %d; %v", name, c.name, n, s.want, err)
		}
	}
}

// readFuzzSeed reads the []byte of a "go test fuzz v1" file.
func readFuzzSeed(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write the corpus)", err)
	}
	rest, ok1 := strings.CutPrefix(string(data), "go test fuzz v1\n[]byte(")
	rest, ok2 := strings.CutSuffix(rest, ")\n")
	s, err := strconv.Unquote(rest)
	if !ok1 || !ok2 || err != nil {
		t.Fatalf("%s is not a go test fuzz v1 file of one []byte: %v", path, err)
	}
	return []byte(s)
}
