package checkpoint_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"runtime/debug"
	"strings"
	"testing"

	gort "runtime"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
)

// smallFile returns a small data file with several blocks per section.
func smallFile(t testing.TB) (*memView, []byte) {
	t.Helper()
	v := genView(10, 4, runtime.FullRange(4), 6, 0)
	return v, fileBytes(t, v, &checkpoint.WriterOptions{BlockSize: 48})
}

// regions labels every offset of a data file by the part of the layout it
// falls in, walking the blocks as the package doc describes them.
func regions(t testing.TB, data []byte) []string {
	t.Helper()
	label := make([]string, len(data)+1)
	for i := 0; i < 32; i++ {
		label[i] = "header"
	}
	indexOff := int(binary.LittleEndian.Uint64(data[len(data)-24:]))
	off := 32
	for off < indexOff {
		n := int(binary.LittleEndian.Uint32(data[off:]))
		label[off] = "block boundary"
		for i := off + 1; i < off+8; i++ {
			label[i] = "block header"
		}
		for i := off + 8; i < off+8+n; i++ {
			label[i] = "mid-block"
		}
		off += 8 + n
	}
	if off != indexOff {
		t.Fatalf("blocks end at %d, the index begins at %d", off, indexOff)
	}
	label[indexOff] = "block boundary (index)"
	for i := indexOff + 1; i < len(data)-24; i++ {
		label[i] = "index"
	}
	label[len(data)-24] = "block boundary (trailer)"
	for i := len(data) - 23; i < len(data); i++ {
		label[i] = "trailer"
	}
	return label
}

func TestTruncatedFileFailsAtEveryOffset(t *testing.T) {
	v, data := smallFile(t)
	label := regions(t, data)
	counts := map[string]int{}
	for n := 0; n < len(data); n++ {
		counts[label[n]]++
		fv, err := checkpoint.OpenFile("f.sgc", bytes.NewReader(data[:n]), int64(n))
		if err == nil {
			_, err = scanAll(fv)
		}
		if err == nil {
			t.Fatalf("file truncated to %d of %d bytes (%s) reads without an error", n, len(data), label[n])
		}
		wantFileError(t, err, checkpoint.ErrCorrupt, "f.sgc")
	}
	t.Logf("%d truncations: %v", len(data), counts)
	if counts["block boundary"] < 10 || counts["mid-block"] < 100 {
		t.Fatalf("the file has too few blocks to test: %v", counts)
	}

	// Through a checkpoint: the size recorded in the metadata catches it
	// before any entry is read, and a restore fails before the store
	// changes.
	for _, n := range []int{0, 32, len(data) / 2, len(data) - 24, len(data) - 1} {
		t.Run(fmt.Sprintf("checkpoint/len=%d(%s)", n, label[n]), func(t *testing.T) {
			s := checkpoint.NewMem()
			writeCheckpoint(t, s, "chk", v, 1, &checkpoint.WriterOptions{BlockSize: 48})
			replaceObject(t, s, "chk", "op-0-of-1.sgc", func(b []byte) []byte { return b[:n] })
			r, err := checkpoint.Open(ctx, s, "chk")
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.View(ctx, "op", runtime.FullRange(4))
			fe := wantFileError(t, err, checkpoint.ErrCorrupt, "chk/op-0-of-1.sgc")
			if !strings.Contains(fe.Reason, "truncated") {
				t.Errorf("error %q does not say truncated", err)
			}
			if err := r.Verify(ctx); !errors.Is(err, checkpoint.ErrCorrupt) {
				t.Errorf("Verify = %v", err)
			}
		})
	}
}

// replaceObject rewrites a committed object of s.
func replaceObject(t testing.TB, s checkpoint.Storage, ckpt, name string, edit func([]byte) []byte) {
	t.Helper()
	o, err := s.Open(ctx, ckpt, name)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, o.Size())
	o.ReadAt(b, 0)
	o.Close()
	b = edit(bytes.Clone(b))
	if err := s.Remove(ctx, ckpt, name); err != nil {
		t.Fatal(err)
	}
	w, err := s.Create(ctx, ckpt, name)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(b)
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestEveryFlippedByteIsDetected flips every byte of a small data file, in
// three ways, and requires every flip to fail the read with an error that
// names the file and the offset.
func TestEveryFlippedByteIsDetected(t *testing.T) {
	_, data := smallFile(t)
	label := regions(t, data)
	t.Logf("file of %d bytes", len(data))
	for off := range data {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			bad := bytes.Clone(data)
			bad[off] ^= mask
			fv, err := checkpoint.OpenFile("f.sgc", bytes.NewReader(bad), int64(len(bad)))
			if err == nil {
				_, err = scanAll(fv)
			}
			if err == nil {
				t.Fatalf("flipping byte %d (%s) with %#02x went undetected", off, label[off], mask)
			}
			fe := wantFileError(t, err, checkpoint.ErrCorrupt, "f.sgc")
			if fe.Offset < 0 || fe.Offset > int64(len(data)) {
				t.Fatalf("flip at %d: error %q has offset %d", off, err, fe.Offset)
			}
		}
	}
}

func readObject(t testing.TB, s checkpoint.Storage, ckpt, name string) []byte {
	t.Helper()
	o, err := s.Open(ctx, ckpt, name)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	b := make([]byte, o.Size())
	if _, err := o.ReadAt(b, 0); err != nil && len(b) > 0 {
		t.Fatal(err)
	}
	return b
}

func put(t testing.TB, s checkpoint.Storage, ckpt, name string, b []byte) {
	t.Helper()
	w, err := s.Create(ctx, ckpt, name)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(b)
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

func metadataDiff(a, b *checkpoint.Metadata) string {
	ja, _ := a.Marshal()
	jb, _ := b.Marshal()
	if bytes.Equal(ja, jb) {
		return ""
	}
	return fmt.Sprintf("\n%s\nvs\n%s", ja, jb)
}

func TestMissingMetadata(t *testing.T) {
	s := checkpoint.NewMem()
	v := genView(12, 4, runtime.FullRange(4), 10, 0)
	if _, err := checkpoint.WriteInstance(ctx, s, "chk", "op-0.sgc", v, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.Open(ctx, s, "chk"); !errors.Is(err, checkpoint.ErrNotFound) || !strings.Contains(err.Error(), "chk") {
		t.Errorf("Open without metadata = %v, want ErrNotFound naming chk", err)
	}
	if list, err := checkpoint.List(ctx, s); err != nil || len(list) != 0 {
		t.Errorf("List = %q, %v; want no checkpoint", list, err)
	}
	if _, err := checkpoint.Restore(ctx, s, "chk", "op", 0, 1, nil, nil); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("Restore without metadata = %v, want ErrNotFound", err)
	}
}

func TestMetadataNamesAMissingFile(t *testing.T) {
	s := checkpoint.NewMem()
	v := genView(13, 8, runtime.FullRange(8), 50, 0)
	writeCheckpoint(t, s, "chk", v, 2, nil)
	if err := s.Remove(ctx, "chk", "op-1-of-2.sgc"); err != nil {
		t.Fatal(err)
	}
	r, err := checkpoint.Open(ctx, s, "chk")
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.View(ctx, "op", runtime.FullRange(8))
	fe := wantFileError(t, err, checkpoint.ErrNotFound, "chk/op-1-of-2.sgc")
	if fe.Field != "operators[0].instances[1].file.name" {
		t.Errorf("error %q names field %q", err, fe.Field)
	}
	// A view that needs only the other file still works.
	kgs, _ := runtime.KeyGroupRangeForOperator(8, 2, 0)
	cv, err := r.View(ctx, "op", kgs)
	if err != nil {
		t.Fatal(err)
	}
	cv.Close()
	if err := r.Verify(ctx); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("Verify = %v, want ErrNotFound", err)
	}
}

// allocated returns the bytes fn allocates.
func allocated(fn func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var before, after gort.MemStats
	gort.ReadMemStats(&before)
	fn()
	gort.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestLengthsClaimingGigabytes crafts files, with valid checksums, whose
// length fields claim gigabytes: each must fail cleanly without allocating
// what the field claims.
func TestLengthsClaimingGigabytes(t *testing.T) {
	const maxP = 2
	spec := runtime.StateSpec{Name: "s", Kind: runtime.KindValue}
	k0 := keyIn(0, maxP)
	valid := func() rawFile {
		return rawFile{version: 1, maxP: maxP, start: 0, end: 2, states: []runtime.StateSpec{spec},
			groups: [][]rawSection{{{state: 0, entries: 1, blocks: [][]byte{valueEntry(k0, []byte("v"))}}}, nil}}
	}
	if fv, err := checkpoint.OpenFile("ok", bytes.NewReader(valid().bytes()), int64(len(valid().bytes()))); err != nil {
		t.Fatalf("the valid crafted file does not read: %v", err)
	} else if n, err := scanAll(fv); n != 1 || err != nil {
		t.Fatalf("the valid crafted file reads %d entries, %v", n, err)
	}
	huge := uint64(3) << 30
	cases := map[string]func() []byte{
		"value length": func() []byte {
			f := valid()
			e := []byte{0, 8}
			e = append(e, k0...)
			e = binary.AppendUvarint(e, huge)
			f.groups[0][0].blocks[0] = append(e, 'v')
			return f.bytes()
		},
		"key length": func() []byte {
			f := valid()
			f.groups[0][0].blocks[0] = binary.AppendUvarint([]byte{0}, huge)
			return f.bytes()
		},
		"block length": func() []byte {
			f := valid()
			f.blockLenFix = func(int, uint32) uint32 { return 3 << 30 }
			return f.bytes()
		},
		"state count": func() []byte {
			f := valid()
			n := huge
			f.stateCount = &n
			return f.bytes()
		},
		"section entries": func() []byte {
			f := valid()
			f.groups[0][0].entries = int(huge)
			return f.bytes()
		},
		"trailer index length": func() []byte {
			b := valid().bytes()
			tr := b[len(b)-24:]
			binary.LittleEndian.PutUint64(tr[8:], huge)
			binary.LittleEndian.PutUint32(tr[16:], crc32.Checksum(tr[:16], castagnoli))
			return b
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			data := mk()
			var err error
			alloc := allocated(func() {
				var fv *checkpoint.View
				fv, err = checkpoint.OpenFile("f", bytes.NewReader(data), int64(len(data)))
				if err == nil {
					_, err = scanAll(fv)
				}
			})
			wantFileError(t, err, checkpoint.ErrCorrupt, "f")
			t.Logf("%v (allocated %d bytes)", err, alloc)
			if alloc > 1<<20 {
				t.Errorf("allocated %d bytes", alloc)
			}
		})
	}
	t.Run("metadata file size", func(t *testing.T) {
		s := checkpoint.NewMem()
		v := genView(14, 4, runtime.FullRange(4), 10, 0)
		m := writeCheckpoint(t, s, "chk", v, 1, nil)
		m.Operators[0].Instances[0].File.Size = 1 << 40
		meta, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Remove(ctx, "chk", checkpoint.MetadataName); err != nil {
			t.Fatal(err)
		}
		put(t, s, "chk", checkpoint.MetadataName, meta)
		r, err := checkpoint.Open(ctx, s, "chk")
		if err != nil {
			t.Fatal(err)
		}
		alloc := allocated(func() { _, err = r.View(ctx, "op", runtime.FullRange(4)) })
		wantFileError(t, err, checkpoint.ErrCorrupt, "chk/op-0-of-1.sgc")
		if alloc > 1<<20 {
			t.Errorf("allocated %d bytes", alloc)
		}
	})
}

func TestUnsafeStateNameInTheDataFileIndex(t *testing.T) {
	for _, name := range []string{"a/b", "..", "nul\x00", "."} {
		f := rawFile{version: 1, maxP: 1, start: 0, end: 1, states: []runtime.StateSpec{{Name: name, Kind: runtime.KindValue}},
			groups: [][]rawSection{nil}}
		data := f.bytes()
		_, err := checkpoint.OpenFile("f", bytes.NewReader(data), int64(len(data)))
		wantFileError(t, err, checkpoint.ErrCorrupt, "f")
		if !errors.Is(err, runtime.ErrInvalidState) {
			t.Errorf("state name %q: %v does not wrap runtime.ErrInvalidState", name, err)
		}
	}
}

// Format versions 1 (no tag), 2 and 3 (a non-zero tag) read; others fail
// with ErrUnsupportedVersion, and a tag that does not fit the version is
// corruption.
func TestFormatVersionsOfTheDataFile(t *testing.T) {
	open := func(f rawFile) error {
		data := f.bytes()
		_, err := checkpoint.OpenFile("f", bytes.NewReader(data), int64(len(data)))
		return err
	}
	for _, v := range []uint32{0, 4, 1 << 31} {
		err := open(rawFile{version: v, tag: 1, maxP: 1, start: 0, end: 1, groups: [][]rawSection{nil}})
		fe := wantFileError(t, err, checkpoint.ErrUnsupportedVersion, "f")
		if fe.Offset != 8 || !strings.Contains(err.Error(), fmt.Sprintf("version %d", v)) {
			t.Errorf("error %q, want one about version %d at offset 8", err, v)
		}
	}
	if err := open(rawFile{version: 1, maxP: 1, start: 0, end: 1, groups: [][]rawSection{nil}}); err != nil {
		t.Errorf("a version-1 file: %v", err)
	}
	for _, v := range []uint32{2, 3} {
		if err := open(rawFile{version: v, tag: 0x80000001, maxP: 1, start: 0, end: 1, groups: [][]rawSection{nil}}); err != nil {
			t.Errorf("a version-%d file: %v", v, err)
		}
	}
	for _, f := range []rawFile{
		{version: 1, tag: 0x80000001, maxP: 1, start: 0, end: 1, groups: [][]rawSection{nil}},
		{version: 2, tag: 0, maxP: 1, start: 0, end: 1, groups: [][]rawSection{nil}},
		{version: 3, tag: 0, maxP: 1, start: 0, end: 1, groups: [][]rawSection{nil}},
	} {
		fe := wantFileError(t, open(f), checkpoint.ErrCorrupt, "f")
		if fe.Offset != 24 {
			t.Errorf("version %d, tag %08x: error %q, want one at offset 24", f.version, f.tag, fe)
		}
	}
}

func TestCraftedIndexInconsistencies(t *testing.T) {
	spec := runtime.StateSpec{Name: "s", Kind: runtime.KindValue}
	k0 := keyIn(0, 1)
	base := func() rawFile {
		return rawFile{version: 1, maxP: 1, start: 0, end: 1, states: []runtime.StateSpec{spec},
			groups: [][]rawSection{{{state: 0, entries: 1, blocks: [][]byte{valueEntry(k0, []byte("v"))}}}}}
	}
	cases := map[string]func(f *rawFile){
		"entry count too high":    func(f *rawFile) { f.groups[0][0].entries = 2 },
		"entry count too low":     func(f *rawFile) { f.groups[0][0].blocks[0] = append(f.groups[0][0].blocks[0], valueEntry(k0, nil)...) },
		"unknown state":           func(f *rawFile) { f.groups[0][0].state = 1 },
		"garbage after index":     func(f *rawFile) { f.indexTail = []byte{0} },
		"range outside maxP":      func(f *rawFile) { f.end = 2 },
		"continuation first":      func(f *rawFile) { f.groups[0][0].blocks[0] = []byte{1, 1, 'v'} },
		"unknown tag":             func(f *rawFile) { f.groups[0][0].blocks[0][0] = 7 },
		"empty key-group range":   func(f *rawFile) { f.end = 0 },
		"invalid kind":            func(f *rawFile) { f.states[0].Kind = 9 },
		"states out of order":     func(f *rawFile) { f.states = []runtime.StateSpec{{Name: "b", Kind: 1}, {Name: "a", Kind: 1}} },
		"two sections of a state": func(f *rawFile) { f.groups[0] = append(f.groups[0], f.groups[0][0]) },
	}
	for name, breakIt := range cases {
		t.Run(name, func(t *testing.T) {
			f := base()
			f.states = append([]runtime.StateSpec(nil), f.states...)
			breakIt(&f)
			data := f.bytes()
			fv, err := checkpoint.OpenFile("f", bytes.NewReader(data), int64(len(data)))
			if err == nil {
				_, err = scanAll(fv)
			}
			wantFileError(t, err, checkpoint.ErrCorrupt, "f")
		})
	}
}
