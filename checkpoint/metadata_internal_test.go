package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/schema"
)

// countSchema is the schema of sampleMetadata's state "count".
const countSchema = "stategen/v1 value key=string value=int64"

func sampleMetadata() *Metadata {
	return &Metadata{
		FormatVersion: FormatVersion,
		CheckpointID:  42,
		Timestamp:     time.Date(2026, 1, 2, 15, 4, 5, 6, time.FixedZone("X", 3600)),
		Properties:    map[string]string{"type": "savepoint", "note": "<&>"},
		Operators: []Operator{{
			ID:             "clicks",
			MaxParallelism: 8,
			KeyGroups:      runtime.FullRange(8),
			States: []runtime.StateSpec{
				{Name: "count", Kind: runtime.KindValue, Fingerprint: schema.Fingerprint(countSchema), Schema: countSchema},
				{Name: "windows", Kind: runtime.KindSortedMap, SubKeyed: true, Fingerprint: "sm"},
			},
			Instances: []Instance{
				{KeyGroups: runtime.KeyGroupRange{Start: 0, End: 3}, States: []string{"count", "windows"},
					File: File{Name: "clicks-0.sgc", Size: 1043, CRC32C: 0x5b1e6c02, Tag: 0x9f3a0c11, Entries: 40}, OperatorState: []byte{0, 1, 2}},
				{KeyGroups: runtime.KeyGroupRange{Start: 3, End: 8}, States: []string{"count"},
					File: File{Name: "clicks-1.sgc", Size: 999, CRC32C: 7, Tag: 1, Entries: 0}},
			},
		}},
	}
}

// withoutSchemas clears the schemas of m's states, as a version-1 or -2
// metadata has none, and returns m.
func withoutSchemas(m *Metadata) *Metadata {
	for i := range m.Operators {
		for k := range m.Operators[i].States {
			m.Operators[i].States[k].Schema = ""
		}
	}
	return m
}

// rawMetadata returns the JSON of sampleMetadata after edit, with a valid
// checksum, bypassing validation: what a buggy or malicious writer could
// produce.
func rawMetadata(t testing.TB, edit func(j *metadataJSON)) []byte {
	t.Helper()
	good, err := sampleMetadata().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var j metadataJSON
	if err := json.Unmarshal(good, &j); err != nil {
		t.Fatal(err)
	}
	edit(&j)
	sum, err := j.checksum()
	if err != nil {
		t.Fatal(err)
	}
	j.Checksum = sum
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestMetadataRoundTrip(t *testing.T) {
	m := sampleMetadata()
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseMetadata(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(m, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	// Human-readable: indented, kinds by name, checksums in hex.
	for _, want := range []string{"\n  \"formatVersion\": 3,", `"kind": "sortedmap"`, `"schema": "stategen/v1 value key=string value=int64"`, `"crc32c": "5b1e6c02"`, `"tag": "9f3a0c11"`, `"tag": "00000001"`,
		`"checksum": "`, `"subKeyed": true`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("metadata does not contain %s:\n%s", want, b)
		}
	}
	// A re-indented document (jq, an editor) keeps its meaning and checksum.
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.ReplaceAll(b, []byte("\n"), nil), "", "\t"); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseMetadata(buf.Bytes()); err != nil {
		t.Errorf("re-indented metadata: %v", err)
	}
}

func TestMetadataRejectsBadFields(t *testing.T) {
	inst := func(j *metadataJSON) *instanceJSON { return &j.Operators[0].Instances[0] }
	cases := []struct {
		name  string
		edit  func(j *metadataJSON)
		field string
	}{
		{"state name with slash", func(j *metadataJSON) { j.Operators[0].States[0].Name = "a/b" }, "operators[0].states[0]"},
		{"state name dot-dot", func(j *metadataJSON) { j.Operators[0].States[0].Name = ".." }, "operators[0].states[0]"},
		{"state name with NUL", func(j *metadataJSON) { j.Operators[0].States[0].Name = "c\x00unt" }, "operators[0].states[0]"},
		{"empty state name", func(j *metadataJSON) { j.Operators[0].States[0].Name = "" }, "operators[0].states[0]"},
		{"states unsorted", func(j *metadataJSON) { j.Operators[0].States[0].Name = "zzz" }, "operators[0].states[1].name"},
		{"unknown kind", func(j *metadataJSON) { j.Operators[0].States[1].Kind = "blob" }, "operators[0].states[1].kind"},
		{"file name dot-dot path", func(j *metadataJSON) { inst(j).File.Name = "../../etc/passwd" }, "operators[0].instances[0].file.name"},
		{"file name absolute", func(j *metadataJSON) { inst(j).File.Name = "/etc/passwd" }, "operators[0].instances[0].file.name"},
		{"file name in a subdirectory", func(j *metadataJSON) { inst(j).File.Name = "a/b.sgc" }, "operators[0].instances[0].file.name"},
		{"file name with backslash", func(j *metadataJSON) { inst(j).File.Name = `..\x` }, "operators[0].instances[0].file.name"},
		{"file name dot-dot", func(j *metadataJSON) { inst(j).File.Name = ".." }, "operators[0].instances[0].file.name"},
		{"file name a temporary file", func(j *metadataJSON) { inst(j).File.Name = ".tmp-0-x" }, "operators[0].instances[0].file.name"},
		{"file name the metadata", func(j *metadataJSON) { inst(j).File.Name = MetadataName }, "operators[0].instances[0].file.name"},
		{"file name empty", func(j *metadataJSON) { inst(j).File.Name = "" }, "operators[0].instances[0].file.name"},
		{"file name with NUL", func(j *metadataJSON) { inst(j).File.Name = "a\x00" }, "operators[0].instances[0].file.name"},
		{"file named twice", func(j *metadataJSON) { j.Operators[0].Instances[1].File.Name = inst(j).File.Name }, "operators[0].instances[1].file.name"},
		{"file size too small", func(j *metadataJSON) { inst(j).File.Size = 3 }, "operators[0].instances[0].file.size"},
		{"negative entries", func(j *metadataJSON) { inst(j).File.Entries = -1 }, "operators[0].instances[0].file.entries"},
		{"crc not hex", func(j *metadataJSON) { inst(j).File.CRC32C = "xyz" }, "operators[0].instances[0].file.crc32c"},
		{"crc upper case", func(j *metadataJSON) { inst(j).File.CRC32C = "5B1E6C02" }, "operators[0].instances[0].file.crc32c"},
		{"tag missing", func(j *metadataJSON) { inst(j).File.Tag = "" }, "operators[0].instances[0].file.tag"},
		{"tag not hex", func(j *metadataJSON) { inst(j).File.Tag = "9f3a0c1g" }, "operators[0].instances[0].file.tag"},
		{"tag upper case", func(j *metadataJSON) { inst(j).File.Tag = "9F3A0C11" }, "operators[0].instances[0].file.tag"},
		{"tag too short", func(j *metadataJSON) { inst(j).File.Tag = "9f3a0c1" }, "operators[0].instances[0].file.tag"},
		{"tag zero", func(j *metadataJSON) { j.Operators[0].Instances[1].File.Tag = "00000000" }, "operators[0].instances[1].file.tag"},
		{"tag in a version-1 metadata", func(j *metadataJSON) { j.FormatVersion = 1; j.Operators[0].States[0].Schema = "" }, "operators[0].instances[0].file.tag"},
		{"schema in a version-2 metadata", func(j *metadataJSON) { j.FormatVersion = 2 }, "operators[0].states[0].schema"},
		{"schema unparsable", func(j *metadataJSON) { j.Operators[0].States[0].Schema = "stategen/v1 value key=string" }, "operators[0].states[0].schema"},
		{"schema of another fingerprint", func(j *metadataJSON) {
			j.Operators[0].States[0].Schema = "stategen/v1 value key=string value=int32"
		}, "operators[0].states[0].schema"},
		{"schema of another kind", func(j *metadataJSON) {
			j.Operators[0].States[0].Schema = "stategen/v1 list key=string value=int64"
			j.Operators[0].States[0].Fingerprint = schema.Fingerprint(j.Operators[0].States[0].Schema)
		}, "operators[0].states[0].schema"},
		{"operator id unsafe", func(j *metadataJSON) { j.Operators[0].ID = "../op" }, "operators[0].id"},
		{"operator twice", func(j *metadataJSON) {
			j.Operators = append(j.Operators, j.Operators[0])
			j.Operators[1].Instances = []instanceJSON{j.Operators[0].Instances[0]}
			j.Operators[1].Instances[0].KeyGroups = rangeJSON{0, 8}
			j.Operators[1].Instances[0].File.Name = "other"
		}, "operators[1].id"},
		{"maxParallelism zero", func(j *metadataJSON) { j.Operators[0].MaxParallelism = 0 }, "operators[0].maxParallelism"},
		{"maxParallelism too big", func(j *metadataJSON) { j.Operators[0].MaxParallelism = 40000 }, "operators[0].maxParallelism"},
		{"key groups outside maxP", func(j *metadataJSON) { j.Operators[0].KeyGroups.End = 9 }, "operators[0].keyGroups"},
		{"instances overlap", func(j *metadataJSON) { j.Operators[0].Instances[1].KeyGroups.Start = 2 }, "operators[0].instances[1].keyGroups"},
		{"instances leave a gap", func(j *metadataJSON) { j.Operators[0].Instances[1].KeyGroups.Start = 4 }, "operators[0].instances[1].keyGroups"},
		{"instances stop short", func(j *metadataJSON) { j.Operators[0].Instances[1].KeyGroups.End = 7 }, "operators[0].instances"},
		{"no instances", func(j *metadataJSON) { j.Operators[0].Instances = nil }, "operators[0].instances"},
		{"instance names an unknown state", func(j *metadataJSON) { inst(j).States = []string{"count", "nope"} }, "operators[0].instances[0].states[1]"},
		{"instance states unsorted", func(j *metadataJSON) { inst(j).States = []string{"windows", "count"} }, "operators[0].instances[0].states[1]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseMetadata(rawMetadata(t, tc.edit))
			var fe *FileError
			if !errors.As(err, &fe) || !errors.Is(err, ErrCorrupt) || !errors.Is(err, runtime.ErrCorrupt) {
				t.Fatalf("ParseMetadata = %v, want a *FileError wrapping ErrCorrupt", err)
			}
			if fe.Field != tc.field || fe.Path != MetadataName || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q names field %q, want %q", err, fe.Field, tc.field)
			}
		})
	}
}

func TestMetadataRejectsBadDocuments(t *testing.T) {
	good := rawMetadata(t, func(*metadataJSON) {})
	if _, err := ParseMetadata(good); err != nil {
		t.Fatalf("the unedited document: %v", err)
	}
	cases := []struct {
		name     string
		data     []byte
		sentinel error
		field    string
	}{
		{"format version 5", bytes.Replace(good, []byte(`"formatVersion": 3`), []byte(`"formatVersion": 5`), 1), ErrUnsupportedVersion, "formatVersion"},
		{"format version 5 with unknown fields", []byte(`{"formatVersion": 5, "shards": []}`), ErrUnsupportedVersion, "formatVersion"},
		{"format version 0", []byte(`{"formatVersion": 0}`), ErrUnsupportedVersion, "formatVersion"},
		{"format version 1.5", []byte(`{"formatVersion": 1.5}`), ErrUnsupportedVersion, "formatVersion"},
		{"format version a string", []byte(`{"formatVersion": "2"}`), ErrUnsupportedVersion, "formatVersion"},
		{"no format version", []byte(`{"checkpointId": 1}`), ErrCorrupt, "formatVersion"},
		{"checksum mismatch", bytes.Replace(good, []byte(`"checkpointId": 42`), []byte(`"checkpointId": 43`), 1), ErrCorrupt, "checksum"},
		{"checksum missing", rawMetadataNoChecksum(t), ErrCorrupt, "checksum"},
		{"unknown field", bytes.Replace(good, []byte(`"checkpointId"`), []byte(`"shards": [], "checkpointId"`), 1), ErrCorrupt, ""},
		{"trailing data", append(bytes.Clone(good), []byte(`{}`)...), ErrCorrupt, ""},
		{"not JSON", []byte("\x89SGCKPT\n"), ErrCorrupt, ""},
		{"truncated", good[:len(good)/2], ErrCorrupt, ""},
		{"wrong type", bytes.Replace(good, []byte(`"checkpointId": 42`), []byte(`"checkpointId": "42"`), 1), ErrCorrupt, ""},
		{"too large", append(bytes.Clone(good), bytes.Repeat([]byte(" "), MaxMetadataSize)...), ErrCorrupt, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseMetadata(tc.data)
			var fe *FileError
			if !errors.As(err, &fe) || !errors.Is(err, tc.sentinel) {
				t.Fatalf("ParseMetadata = %v, want a *FileError wrapping %v", err, tc.sentinel)
			}
			if (tc.field != "" && fe.Field != tc.field) || (fe.Field == "" && fe.Offset < 0) {
				t.Errorf("error %q: field %q offset %d, want field %q or an offset", err, fe.Field, fe.Offset, tc.field)
			}
		})
	}
}

func rawMetadataNoChecksum(t testing.TB) []byte {
	var j map[string]any
	if err := json.Unmarshal(rawMetadata(t, func(*metadataJSON) {}), &j); err != nil {
		t.Fatal(err)
	}
	delete(j, "checksum")
	b, _ := json.Marshal(j)
	return b
}

func TestMarshalRefusesInvalidMetadata(t *testing.T) {
	m := sampleMetadata()
	m.Operators[0].Instances[0].File.Name = "../x"
	if _, err := m.Marshal(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Marshal of an unsafe file name = %v", err)
	}
	m = sampleMetadata()
	m.FormatVersion = 5
	if _, err := m.Marshal(); !errors.Is(err, ErrUnsupportedVersion) {
		t.Errorf("Marshal of version 5 = %v", err)
	}
	m = withoutSchemas(sampleMetadata())
	m.FormatVersion = 1
	if _, err := m.Marshal(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "file.tag") {
		t.Errorf("Marshal of version 1 with file tags = %v", err)
	}
	m = sampleMetadata()
	m.Operators[0].Instances[1].File.Tag = 0
	if _, err := m.Marshal(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "operators[0].instances[1].file.tag") {
		t.Errorf("Marshal of version 3 with a zero file tag = %v", err)
	}
	m = sampleMetadata()
	m.FormatVersion = 2
	if _, err := m.Marshal(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "operators[0].states[0].schema") {
		t.Errorf("Marshal of version 2 with a schema = %v", err)
	}
}

// The metadata of a version-1 checkpoint, which has no file tags, parses
// and marshals as it was, so that tools rewrite it unchanged.
func TestMetadataVersion1RoundTrip(t *testing.T) {
	m := withoutSchemas(sampleMetadata())
	m.FormatVersion = 1
	for i := range m.Operators[0].Instances {
		m.Operators[0].Instances[i].File.Tag = 0
	}
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("\n  \"formatVersion\": 1,")) || bytes.Contains(b, []byte(`"tag"`)) {
		t.Errorf("version-1 metadata is not written as version 1 without tags:\n%s", b)
	}
	got, err := ParseMetadata(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(m, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

// FuzzMetadata feeds arbitrary bytes to the metadata parser: it must never
// panic, its errors must be *FileError values wrapping ErrCorrupt or
// ErrUnsupportedVersion, and what it accepts must survive a round trip.
func FuzzMetadata(f *testing.F) {
	good, err := sampleMetadata().Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"formatVersion": 1, "operators": []}`))
	f.Add([]byte(`{"formatVersion": 3}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseMetadata(data)
		if err != nil {
			var fe *FileError
			if !errors.As(err, &fe) || !(errors.Is(err, ErrCorrupt) || errors.Is(err, ErrUnsupportedVersion)) {
				t.Fatalf("error %q (%T) is not a *FileError wrapping ErrCorrupt or ErrUnsupportedVersion", err, err)
			}
			return
		}
		again, err := m.Marshal()
		if err != nil {
			t.Fatalf("accepted metadata does not marshal: %v", err)
		}
		m2, err := ParseMetadata(again)
		if err != nil {
			t.Fatalf("re-marshaled metadata does not parse: %v\n%s", err, again)
		}
		if diff := cmp.Diff(m, m2, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
			t.Fatalf("round trip changed the metadata:\n%s", diff)
		}
	})
}

// TestFuzzMetadataCorpus keeps the checked-in seed corpus of FuzzMetadata
// in step with the format: the valid seeds must parse. -update rewrites it.
func TestFuzzMetadataCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzMetadata")
	good, err := sampleMetadata().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	seeds := map[string][]byte{
		"valid-sample":      good,
		"valid-empty":       []byte(`{"formatVersion":1,"checkpointId":0,"operators":[],"checksum":"` + mustChecksum(t, metadataJSON{FormatVersion: 1, Operators: []operatorJSON{}}) + `"}`),
		"valid-empty-v2":    []byte(`{"formatVersion":2,"checkpointId":0,"operators":[],"checksum":"` + mustChecksum(t, metadataJSON{FormatVersion: 2, Operators: []operatorJSON{}}) + `"}`),
		"version-3":         []byte(`{"formatVersion": 3}`),
		"missing-tag":       rawMetadata(t, func(j *metadataJSON) { j.Operators[0].Instances[0].File.Tag = "" }),
		"bad-file-name":     rawMetadata(t, func(j *metadataJSON) { j.Operators[0].Instances[0].File.Name = "../x" }),
		"bad-state-name":    rawMetadata(t, func(j *metadataJSON) { j.Operators[0].States[0].Name = "a\x00" }),
		"checksum-mismatch": bytes.Replace(good, []byte(`42`), []byte(`43`), 1),
	}
	if updateCorpus() {
		writeCorpus(t, dir, seeds)
	}
	for name, want := range seeds {
		got := readCorpusFile(t, filepath.Join(dir, name))
		if !bytes.Equal(got, want) {
			t.Errorf("corpus file %s is stale; run go test -run TestFuzzMetadataCorpus -update", name)
		}
		_, err := ParseMetadata(got)
		if valid := strings.HasPrefix(name, "valid-"); valid != (err == nil) {
			t.Errorf("corpus %s: ParseMetadata = %v", name, err)
		}
	}
	// The seeds of earlier formats stay, as they were written: the valid
	// ones (v1-valid-*) must still parse, the others still fail.
	for _, name := range oldCorpusFiles(t, dir, seeds) {
		_, err := ParseMetadata(readCorpusFile(t, filepath.Join(dir, name)))
		if valid := strings.HasPrefix(strings.TrimPrefix(name, "v1-"), "valid-"); valid != (err == nil) {
			t.Errorf("corpus %s (an earlier format's seed): ParseMetadata = %v", name, err)
		}
	}
}

// OldCorpusFiles returns the files of corpus dir that are not among seeds:
// seeds of earlier formats, kept to fuzz the reading of old checkpoints.
func OldCorpusFiles(t testing.TB, dir string, seeds map[string][]byte) []string {
	return oldCorpusFiles(t, dir, seeds)
}

func oldCorpusFiles(t testing.TB, dir string, seeds map[string][]byte) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		if _, ok := seeds[de.Name()]; !ok {
			out = append(out, de.Name())
		}
	}
	return out
}

func mustChecksum(t testing.TB, j metadataJSON) string {
	s, err := j.checksum()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// UpdateTestdata is the -update flag: rewrite the golden files and seed
// corpora in testdata. The external tests use it too.
var UpdateTestdata = flag.Bool("update", false, "rewrite the golden files and seed corpora in testdata")

func updateCorpus() bool { return *UpdateTestdata }

// WriteCorpus writes seeds as files of the go test fuzz v1 format in dir.
func WriteCorpus(t testing.TB, dir string, seeds map[string][]byte) { writeCorpus(t, dir, seeds) }

// ReadCorpusFile reads the []byte seed of a go test fuzz v1 file.
func ReadCorpusFile(t testing.TB, path string) []byte { return readCorpusFile(t, path) }

func writeCorpus(t testing.TB, dir string, seeds map[string][]byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range seeds {
		data := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readCorpusFile(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create the corpus)", err)
	}
	rest, ok := strings.CutPrefix(string(data), "go test fuzz v1\n[]byte(")
	rest, ok2 := strings.CutSuffix(rest, ")\n")
	if !ok || !ok2 {
		t.Fatalf("%s is not a go test fuzz v1 file of one []byte", path)
	}
	s, err := strconv.Unquote(rest)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return []byte(s)
}
