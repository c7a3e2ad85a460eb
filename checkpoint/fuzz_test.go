package checkpoint_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
)

// readerSeeds are the seeds of FuzzReader: valid files of every kind and
// block size, and a few broken ones, of the current format version (the
// corpus keeps those of version 1 too, as v1-*).
func readerSeeds(t testing.TB) map[string][]byte {
	t.Helper()
	v := genView(20, 4, runtime.FullRange(4), 5, 300)
	part := genView(21, 16, runtime.KeyGroupRange{Start: 5, End: 9}, 8, 0)
	valid := fileBytes(t, v, &checkpoint.WriterOptions{BlockSize: 64})
	truncated := valid[:len(valid)-30]
	flipped := bytes.Clone(valid)
	flipped[100] ^= 0x20
	// A version-2 header with a zero tag and a valid checksum: no writer
	// makes one.
	zeroTag := bytes.Clone(valid)
	clear(zeroTag[24:28])
	binary.LittleEndian.PutUint32(zeroTag[28:], crc32.Checksum(zeroTag[:28], castagnoli))
	return map[string][]byte{
		"valid-all-kinds":      valid,
		"valid-one-block-each": fileBytes(t, v, nil),
		"valid-partial-range":  fileBytes(t, part, &checkpoint.WriterOptions{BlockSize: 16}),
		"valid-empty": fileBytes(t, &memView{maxP: 1, kgs: runtime.FullRange(1), specs: []runtime.StateSpec{{Name: "s", Kind: runtime.KindValue}},
			data: map[string]map[int][]runtime.Entry{"s": {}}}, nil),
		"truncated": truncated,
		"flipped":   flipped,
		"zero-tag":  zeroTag,
	}
}

// FuzzReader feeds arbitrary bytes to the data-file reader: opening and
// scanning must never panic nor allocate beyond the input's size, errors
// must be *FileError values naming the file, and a file that reads must
// read the same way twice.
func FuzzReader(f *testing.F) {
	for _, b := range readerSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fv, err := checkpoint.OpenFile("fuzz.sgc", bytes.NewReader(data), int64(len(data)))
		if err != nil {
			checkFuzzError(t, err)
			return
		}
		n1, err1 := scanAll(fv)
		if err1 != nil {
			checkFuzzError(t, err1)
		}
		if n1 > len(data) {
			t.Fatalf("%d entries from %d bytes", n1, len(data))
		}
		fv2, err := checkpoint.OpenFile("fuzz.sgc", bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatalf("second open failed: %v", err)
		}
		if n2, err2 := scanAll(fv2); n2 != n1 || (err1 == nil) != (err2 == nil) {
			t.Fatalf("two reads differ: %d, %v and %d, %v", n1, err1, n2, err2)
		}
	})
}

func checkFuzzError(t *testing.T, err error) {
	t.Helper()
	var fe *checkpoint.FileError
	if !errors.As(err, &fe) || fe.Path != "fuzz.sgc" {
		t.Fatalf("error %q (%T) is not a *FileError naming the file", err, err)
	}
	if !errors.Is(err, checkpoint.ErrCorrupt) && !errors.Is(err, checkpoint.ErrUnsupportedVersion) {
		t.Fatalf("error %q wraps neither ErrCorrupt nor ErrUnsupportedVersion", err)
	}
}

// TestFuzzReaderCorpus keeps the checked-in seed corpus of FuzzReader in step
// with the format: valid seeds must read, broken ones must fail. -update
// rewrites it.
func TestFuzzReaderCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzReader")
	seeds := readerSeeds(t)
	if *checkpoint.UpdateTestdata {
		checkpoint.WriteCorpus(t, dir, seeds)
	}
	for name, want := range seeds {
		got := checkpoint.ReadCorpusFile(t, filepath.Join(dir, name))
		if !bytes.Equal(got, want) {
			t.Errorf("corpus file %s is stale; run go test -run TestFuzzReaderCorpus -update", name)
		}
		fv, err := checkpoint.OpenFile(name, bytes.NewReader(got), int64(len(got)))
		if err == nil {
			_, err = scanAll(fv)
		}
		if valid := strings.HasPrefix(name, "valid-"); valid != (err == nil) {
			t.Errorf("corpus %s: read error %v", name, err)
		}
	}
	// The seeds of earlier formats stay, as they were written: the valid
	// ones (v1-valid-*) must still read, the others still fail.
	for _, name := range checkpoint.OldCorpusFiles(t, dir, seeds) {
		got := checkpoint.ReadCorpusFile(t, filepath.Join(dir, name))
		fv, err := checkpoint.OpenFile(name, bytes.NewReader(got), int64(len(got)))
		if err == nil {
			_, err = scanAll(fv)
		}
		if valid := strings.HasPrefix(strings.TrimPrefix(name, "v1-"), "valid-"); valid != (err == nil) {
			t.Errorf("corpus %s (an earlier format's seed): read error %v", name, err)
		}
	}
}
