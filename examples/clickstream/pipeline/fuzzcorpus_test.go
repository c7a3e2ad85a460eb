package pipeline

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/stategen/stategen/internal/fuzzcorpus"
)

var updateCorpus = flag.Bool("update", false, "rewrite the seed corpus of FuzzStategenDecode in testdata/fuzz")

// TestFuzzStategenDecodeCorpus checks the checked-in seed corpus of the
// generated FuzzStategenDecode against the generated codecs (see package
// fuzzcorpus for its files); -update rewrites it.
func TestFuzzStategenDecodeCorpus(t *testing.T) {
	var codecs []fuzzcorpus.Codec
	for _, c := range stategenCodecTests {
		codecs = append(codecs, fuzzcorpus.Codec{Name: c.name, Seed: c.seed, Decode: c.fuzz})
	}
	fuzzcorpus.Check(t, filepath.Join("testdata", "fuzz", "FuzzStategenDecode"), codecs, *updateCorpus, nil)
}
