package generated

import (
	"flag"
	"math"
	"path/filepath"
	"slices"
	"testing"
	"time"

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
	// Time keys whose Unix seconds wrap sort after every other time (see
	// runtime.AppendTimeKey): decoded from arbitrary bytes they are valid
	// keys, and the fuzz target must not take their order for a bug.
	i := slices.IndexFunc(stategenCodecTests, func(c stategenCodecTest) bool { return c.name == "SessionKeyCodec/key" })
	wrapped := SessionKeyCodec{}.AppendKey([]byte{byte(i)}, SessionKey{User: "u", At: time.Unix(math.MaxInt64, 0)})
	extra := map[string][]byte{
		"valid-SessionKeyCodec-key-wrapped-time-first-two": SessionKeyCodec{}.AppendKey(wrapped, SessionKey{User: "u"}),
	}
	fuzzcorpus.Check(t, filepath.Join("testdata", "fuzz", "FuzzStategenDecode"), codecs, *updateCorpus, extra)
}
