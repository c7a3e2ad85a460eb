package checkpoint_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
)

// craftFile returns a data file of key groups [start, end) of maxP with no
// data blocks and the given index payload, every checksum valid.
func craftFile(maxP, start, end uint32, index []byte) []byte {
	out := []byte{0x89, 'S', 'G', 'C', 'K', 'P', 'T', '\n'}
	for _, v := range []uint32{1, maxP, start, end, 0} {
		out = binary.LittleEndian.AppendUint32(out, v)
	}
	out = binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, castagnoli))
	indexOff := len(out)
	out = append(out, rawBlock(index, uint32(len(index)))...)
	tr := binary.LittleEndian.AppendUint64(nil, uint64(indexOff))
	tr = binary.LittleEndian.AppendUint64(tr, uint64(len(out)-indexOff))
	tr = binary.LittleEndian.AppendUint32(tr, crc32.Checksum(tr, castagnoli))
	return append(out, append(tr, 'S', 'G', 'C', 'X')...)
}

// uv appends uvarints.
func uv(vs ...uint64) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.AppendUvarint(b, v)
	}
	return b
}

// oneState is the index entry of a keyed value state "s".
var oneState = append(uv(1, 1), 's', 1, 0, 0)

// Counts and lengths of the index claiming billions, beyond what
// TestLengthsClaimingGigabytes covers — the key-group count, a key group's
// section count, a section's length and state delta, a state name's and a
// fingerprint's length — fail on a file of a few dozen bytes with an error
// at the offset of the field, allocating no more than the file justifies.
func TestIndexCountsClaimingBillions(t *testing.T) {
	const huge = 3 << 30
	cases := map[string][]byte{
		"key-group count":     append(uv(0), uv(huge)...),
		"section count":       append(append([]byte{}, oneState...), uv(1, huge)...),
		"section length":      append(append([]byte{}, oneState...), uv(1, 1, 0, 1<<62, 1)...),
		"section state delta": append(append([]byte{}, oneState...), uv(1, 1, huge, 10, 1)...),
		"section entries":     append(append([]byte{}, oneState...), uv(1, 1, 0, 10, 1<<40)...),
		"state name length":   uv(1, 1<<40),
		"fingerprint length":  append(uv(1, 1), 's', 1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f),
		"state count":         uv(1<<62, 1),
	}
	for name, index := range cases {
		t.Run(name, func(t *testing.T) {
			data := craftFile(1, 0, 1, index)
			var err error
			alloc := allocated(func() {
				var v *checkpoint.View
				v, err = checkpoint.OpenFile("f", bytes.NewReader(data), int64(len(data)))
				if err == nil {
					_, err = scanAll(v)
				}
			})
			fe := wantFileError(t, err, checkpoint.ErrCorrupt, "f")
			if fe.Offset < 32 || fe.Offset >= int64(len(data)) {
				t.Errorf("error %q at offset %d, outside the index of a %d-byte file", err, fe.Offset, len(data))
			}
			if alloc > 64<<10 {
				t.Errorf("a %d-byte file made the reader allocate %d bytes", len(data), alloc)
			}
		})
	}
}

// A metadata object or data file that claims a terabyte — a sparse file in
// a Dir, a few bytes on disk — is rejected without allocating what it
// claims: the metadata by its size bound, the data file by its header.
func TestSparseTerabyteObjects(t *testing.T) {
	d, err := checkpoint.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	v := genView(21, 4, runtime.FullRange(4), 10, 0)
	writeCheckpoint(t, d, "chk", v, 1, nil)
	meta := filepath.Join(d.Root(), "chk", checkpoint.MetadataName)
	if err := os.Truncate(meta, 1<<40); err != nil {
		t.Skipf("the file system cannot hold a sparse terabyte: %v", err)
	}
	alloc := allocated(func() { _, err = checkpoint.Open(ctx, d, "chk") })
	fe := wantFileError(t, err, checkpoint.ErrCorrupt, "chk/"+checkpoint.MetadataName)
	if !strings.Contains(fe.Reason, "more than") || alloc > 1<<20 {
		t.Errorf("Open of a terabyte of metadata: %v, %d bytes allocated", err, alloc)
	}
	removed, err := checkpoint.Cleanup(ctx, d, nil)
	if err == nil || len(removed) > 0 {
		t.Errorf("Cleanup with unreadable metadata = %q, %v; want it left alone and reported", removed, err)
	}

	// A data file of a terabyte, which a metadata object names with that
	// size (Commit checks the size against the file: it agrees).
	sparse := filepath.Join(d.Root(), "big", "op-0.sgc")
	if err := os.MkdirAll(filepath.Dir(sparse), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sparse, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(sparse, 1<<40); err != nil {
		t.Fatal(err)
	}
	op, err := checkpoint.NewOperator("op", checkpoint.InstanceSnapshot{
		MaxParallelism: 4, KeyGroups: runtime.FullRange(4),
		States: []runtime.StateSpec{{Name: "s", Kind: runtime.KindValue}},
		File:   checkpoint.File{Name: "op-0.sgc", Size: 1 << 40, Tag: 1, Entries: 1 << 30},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Commit(ctx, d, "big", &checkpoint.Metadata{Operators: []checkpoint.Operator{op}}); err != nil {
		t.Fatal(err)
	}
	r, err := checkpoint.Open(ctx, d, "big")
	if err != nil {
		t.Fatal(err)
	}
	alloc = allocated(func() {
		var v *checkpoint.View
		if v, err = r.View(ctx, "op", runtime.FullRange(4)); err == nil {
			v.Close()
		}
	})
	wantFileError(t, err, checkpoint.ErrCorrupt, "big/op-0.sgc")
	if alloc > 1<<20 {
		t.Errorf("opening a sparse terabyte allocated %d bytes", alloc)
	}
	alloc = allocated(func() { err = r.Verify(ctx) })
	wantFileError(t, err, checkpoint.ErrCorrupt, "big/op-0.sgc")
	if alloc > 1<<20 {
		t.Errorf("verifying a sparse terabyte allocated %d bytes", alloc)
	}
}

// Duplicate state names in a data file's index are rejected, even with
// every checksum valid.
func TestDuplicateStateNamesInTheDataFile(t *testing.T) {
	for _, specs := range [][]runtime.StateSpec{
		{{Name: "s", Kind: runtime.KindValue}, {Name: "s", Kind: runtime.KindValue}},
		{{Name: "s", Kind: runtime.KindValue}, {Name: "s", Kind: runtime.KindList}},
		{{Name: "a", Kind: runtime.KindValue}, {Name: "s", Kind: runtime.KindMap}, {Name: "s", Kind: runtime.KindMap, SubKeyed: true}},
	} {
		f := rawFile{version: 1, maxP: 1, start: 0, end: 1, states: specs, groups: [][]rawSection{nil}}
		data := f.bytes()
		_, err := checkpoint.OpenFile("f", bytes.NewReader(data), int64(len(data)))
		fe := wantFileError(t, err, checkpoint.ErrCorrupt, "f")
		if !strings.Contains(fe.Reason, `"s"`) {
			t.Errorf("error %q does not name the duplicate state", err)
		}
	}
}

// swapView is a checkpoint of two instances of operator "op" with one
// keyed value state: keys 0..n-1, each with a value of width bytes that
// depends on seed.
func swapView(n, width int, seed byte, fingerprint string) *memView {
	spec := runtime.StateSpec{Name: "count", Kind: runtime.KindValue, Fingerprint: fingerprint}
	v := &memView{maxP: 8, kgs: runtime.FullRange(8), specs: []runtime.StateSpec{spec},
		data: map[string]map[int][]runtime.Entry{"count": {}}}
	for k := range n {
		key := binary.BigEndian.AppendUint64(nil, uint64(k))
		kg := runtime.KeyGroupOfHash(runtime.HashKey(key), 8)
		v.data["count"][kg] = append(v.data["count"][kg], runtime.Entry{Key: key, Value: bytes.Repeat([]byte{seed + byte(k)}, width)})
	}
	return v
}

// swapCase is one swap of objects between two committed checkpoints.
type swapCase struct {
	name   string
	a, b   *memView // the checkpoints "a" and "b"
	object string   // the object of b copied over a's
	// sameShape says that the file has the size, key groups, states and
	// entry count of the one it replaces (or, for the metadata, that b's
	// files have a's): only the file tags tell them apart.
	sameShape bool
}

// Files swapped between checkpoints — of the same job at another id, or of
// another job — are rejected by a restore, which reads only the blocks it
// needs, and by Verify, which reads every byte. Whatever else differs
// (size, key groups, states, entry count), the file's tag differs from the
// one the metadata records, and a file of the same shape — the same job's
// previous checkpoint, where only values changed — is caught by its tag
// alone. A swapped metadata object is rejected likewise.
func TestFilesSwappedBetweenCheckpoints(t *testing.T) {
	cases := []swapCase{
		{"same job, more keys later", swapView(20, 8, 1, "fp"), swapView(30, 8, 2, "fp"), "op-0-of-2.sgc", false},
		{"same job, same keys, longer values", swapView(20, 8, 1, "fp"), swapView(20, 9, 2, "fp"), "op-1-of-2.sgc", false},
		{"same job, same size, other entry count", swapView(20, 8, 1, "fp"), sameSizeMoreEntries(t), "op-0-of-2.sgc", false},
		{"same job, same shape, other values", swapView(20, 8, 1, "fp"), swapView(20, 8, 2, "fp"), "op-0-of-2.sgc", true},
		{"same job, same shape, other values, second file", swapView(20, 8, 1, "fp"), swapView(20, 8, 2, "fp"), "op-1-of-2.sgc", true},
		{"same job, same shape, same values", swapView(20, 8, 1, "fp"), swapView(20, 8, 1, "fp"), "op-0-of-2.sgc", true},
		{"same job, swapped metadata", swapView(20, 8, 1, "fp"), swapView(30, 8, 2, "fp"), checkpoint.MetadataName, false},
		{"same job, same shape, swapped metadata", swapView(20, 8, 1, "fp"), swapView(20, 8, 2, "fp"), checkpoint.MetadataName, true},
		{"another job, same size, other state schema", swapView(20, 8, 1, "fp"), swapView(20, 8, 1, "fq"), "op-0-of-2.sgc", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := checkpoint.NewMem()
			ma := writeCheckpoint(t, s, "a", tc.a, 2, &checkpoint.WriterOptions{BlockSize: 64})
			mb := writeCheckpoint(t, s, "b", tc.b, 2, &checkpoint.WriterOptions{BlockSize: 64})
			if tc.sameShape {
				// Check the premise: the files agree on everything the
				// metadata records but the tag and the CRC.
				for i := range ma.Operators[0].Instances {
					fa, fb := ma.Operators[0].Instances[i].File, mb.Operators[0].Instances[i].File
					if fa.Size != fb.Size || fa.Entries != fb.Entries || fa.Tag == fb.Tag {
						t.Fatalf("the files are not of the same shape with other tags: %+v and %+v", fa, fb)
					}
				}
			}
			fromB := readObject(t, s, "b", tc.object)
			replaceObject(t, s, "a", tc.object, func([]byte) []byte { return fromB })
			blame := "a/" + tc.object
			if tc.object == checkpoint.MetadataName {
				// The metadata is b's and intact: it is the files that
				// no longer agree with it.
				blame = "a/op-"
			}
			wantBlamed := func(what string, err error) {
				t.Helper()
				fe := new(checkpoint.FileError)
				if !errors.As(err, &fe) || !errors.Is(err, checkpoint.ErrCorrupt) || !strings.HasPrefix(fe.Path, blame) {
					t.Fatalf("%s = %v, want a *FileError on %s wrapping ErrCorrupt", what, err, blame)
				}
				if !strings.Contains(err.Error(), fe.Path) {
					t.Errorf("%s: error %q does not name the file %s", what, err, fe.Path)
				}
				if tc.sameShape && (!strings.HasSuffix(fe.Field, ".file.tag") || !strings.Contains(fe.Reason, "another checkpoint")) {
					t.Errorf("%s: error %q does not name the file tag and say the file belongs to another checkpoint", what, err)
				}
			}
			r, err := checkpoint.Open(ctx, s, "a")
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			wantBlamed("Verify", r.Verify(ctx))
			// A restore of all key groups, and one of a quarter of them
			// that lies in the first file; the second file is swapped
			// only when the case says so, then a quarter in it.
			quarter := 0
			if tc.object == "op-1-of-2.sgc" {
				quarter = 3
			}
			for _, rs := range []struct{ index, parallelism int }{{0, 1}, {quarter, 4}} {
				store := newModel(t, 8, rs.parallelism, rs.index)
				_, err = checkpoint.Restore(ctx, s, "a", "op", rs.index, rs.parallelism, store, nil)
				wantBlamed(fmt.Sprintf("Restore of instance %d of %d", rs.index, rs.parallelism), err)
			}
			kgs, _ := runtime.KeyGroupRangeForOperator(8, 4, quarter)
			_, err = r.View(ctx, "op", kgs)
			wantBlamed(fmt.Sprintf("View of key groups %v", kgs), err)
			t.Logf("restore: %v", err)
		})
	}
}

// sameSizeMoreEntries is swapView(20, 8, 2) with one key fewer and the
// bytes it took spread over the other values, so that its files have the
// size, key groups and states of swapView(20, 8, 1)'s but other entry
// counts.
func sameSizeMoreEntries(t *testing.T) *memView {
	t.Helper()
	a := swapView(20, 8, 1, "fp")
	b := swapView(20, 8, 2, "fp")
	// Drop the first key of instance 0's first non-empty key group that
	// holds two keys, and lengthen another value of that key group by the
	// dropped entry's encoded length (tag, key length, 8 key bytes,
	// value length, 8 value bytes).
	for kg := 0; kg < 4; kg++ {
		es := b.data["count"][kg]
		if len(es) < 2 {
			continue
		}
		dropped := 1 + 1 + len(es[0].Key) + 1 + len(es[0].Value)
		es = es[1:]
		es[0].Value = bytes.Repeat([]byte{'x'}, len(es[0].Value)+dropped)
		b.data["count"][kg] = es
		sa := fileBytes(t, a.restrict(runtime.KeyGroupRange{Start: 0, End: 4}), &checkpoint.WriterOptions{BlockSize: 64})
		sb := fileBytes(t, b.restrict(runtime.KeyGroupRange{Start: 0, End: 4}), &checkpoint.WriterOptions{BlockSize: 64})
		if len(sa) != len(sb) {
			t.Fatalf("the crafted file has %d bytes, the original %d: the case tests nothing", len(sb), len(sa))
		}
		return b
	}
	t.Fatal("no key group with two keys")
	return nil
}
