package checkpoint_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	gort "runtime"

	"github.com/google/go-cmp/cmp"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
)

func TestRoundTripEveryKindAndBlockSize(t *testing.T) {
	v := genView(1, 32, runtime.FullRange(32), 300, 5000)
	want := dump(t, v)
	for _, bs := range []int{1, 7, 100, 512, 4096, 0} {
		t.Run(fmt.Sprintf("blockSize=%d", bs), func(t *testing.T) {
			opts := &checkpoint.WriterOptions{BlockSize: bs}
			// Through a file on its own.
			data := fileBytes(t, v, opts)
			fv, err := checkpoint.OpenFile("f.sgc", bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, dump(t, fv)); diff != "" {
				t.Fatalf("OpenFile: contents differ (-want +got):\n%s", diff)
			}
			if fv.MaxParallelism() != 32 || fv.KeyGroups() != runtime.FullRange(32) || !cmp.Equal(fv.States(), testSpecs) {
				t.Errorf("OpenFile: view is %d %v %v", fv.MaxParallelism(), fv.KeyGroups(), fv.States())
			}
			// Through a committed checkpoint of three instances.
			s := checkpoint.NewMem()
			writeCheckpoint(t, s, "chk", v, 3, opts)
			r, err := checkpoint.Open(ctx, s, "chk")
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Verify(ctx); err != nil {
				t.Fatal(err)
			}
			cv, err := r.View(ctx, "op", runtime.FullRange(32))
			if err != nil {
				t.Fatal(err)
			}
			defer cv.Close()
			if diff := cmp.Diff(want, dump(t, cv)); diff != "" {
				t.Fatalf("checkpoint view: contents differ (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBlockSizeBoundsBlocks(t *testing.T) {
	v := genView(2, 4, runtime.FullRange(4), 500, 0)
	small := fileBytes(t, v, &checkpoint.WriterOptions{BlockSize: 256})
	big := fileBytes(t, v, &checkpoint.WriterOptions{BlockSize: 1 << 20})
	// Walk the blocks of the small file: every payload but a lone large
	// entry's stays near the block size.
	blocks := 0
	for off := 32; ; {
		n := int(binary.LittleEndian.Uint32(small[off:]))
		if off+8+n > len(small)-24 {
			t.Fatalf("block at %d runs past the trailer", off)
		}
		if n > 256+64 {
			t.Errorf("block at %d has a %d-byte payload, block size 256", off, n)
		}
		blocks++
		off += 8 + n
		if off == int(binary.LittleEndian.Uint64(small[len(small)-24:])) {
			break
		}
	}
	if blocks < 20 || len(small) <= len(big) {
		t.Errorf("%d blocks of 256 bytes, file %d bytes vs %d with 1 MiB blocks", blocks, len(small), len(big))
	}
	for _, bs := range []int{-1, checkpoint.MaxBlockSize + 1} {
		if _, err := checkpoint.WriteFile(ctx, io.Discard, v, &checkpoint.WriterOptions{BlockSize: bs}); err == nil {
			t.Errorf("BlockSize %d accepted", bs)
		}
	}
}

func TestViewOfSomeKeyGroupsReadsOnlyTheirBlocks(t *testing.T) {
	const maxP = 128
	v := genView(3, maxP, runtime.FullRange(maxP), 8000, 0)
	s := checkpoint.NewMem()
	m := writeCheckpoint(t, s, "chk", v, 1, nil)
	size := m.Operators[0].Instances[0].File.Size
	r, err := checkpoint.Open(ctx, s, "chk")
	if err != nil {
		t.Fatal(err)
	}
	for q := range 4 {
		kgs, _ := runtime.KeyGroupRangeForOperator(maxP, 4, q)
		cv, err := r.View(ctx, "op", kgs)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(dump(t, v.restrict(kgs)), dump(t, cv)); diff != "" {
			t.Fatalf("quarter %d: contents differ (-want +got):\n%s", q, diff)
		}
		frac := float64(cv.BytesRead()) / float64(size)
		t.Logf("quarter %d %v: read %d of %d bytes (%.3f); its data is %d bytes", q, kgs, cv.BytesRead(), size, frac, cv.DataBytes())
		if frac > 0.30 || frac < 0.20 {
			t.Errorf("quarter %d read %.3f of the file, want about 0.25 and at most 0.30", q, frac)
		}
		// What it read beyond the key groups' blocks is the fixed part:
		// header, trailer, index.
		if extra := cv.BytesRead() - cv.DataBytes(); extra < 0 || extra > 32+24+8+4096 {
			t.Errorf("quarter %d read %d bytes beyond its data", q, extra)
		}
		cv.Close()
	}
}

func TestViewScanErrors(t *testing.T) {
	v := genView(4, 8, runtime.KeyGroupRange{Start: 2, End: 6}, 50, 0)
	data := fileBytes(t, v, nil)
	fv, err := checkpoint.OpenFile("f", bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	noop := func(runtime.Entry) error { return nil }
	if err := fv.Scan("counts", 1, noop); !errors.Is(err, runtime.ErrInvalidKeyGroup) {
		t.Errorf("Scan outside the range = %v", err)
	}
	if err := fv.Scan("nope", 2, noop); !errors.Is(err, runtime.ErrInvalidState) {
		t.Errorf("Scan of an unknown state = %v", err)
	}
	stop := errors.New("stop")
	if err := fv.Scan("counts", 3, func(runtime.Entry) error { return stop }); err != stop && len(v.data["counts"][3]) > 0 {
		t.Errorf("Scan did not return fn's error unchanged: %v", err)
	}
	if err := fv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fv.Scan("counts", 2, noop); !errors.Is(err, runtime.ErrReleased) {
		t.Errorf("Scan after Close = %v, want ErrReleased", err)
	}
	if err := fv.Release(); !errors.Is(err, runtime.ErrReleased) {
		t.Errorf("second Release = %v, want ErrReleased", err)
	}
}

func TestWriterRejectsViewsThatBreakTheContract(t *testing.T) {
	base := func() *memView { return genView(5, 8, runtime.FullRange(8), 30, 0) }
	firstKG := func(v *memView, state string) int {
		for kg := range 8 {
			if len(v.data[state][kg]) > 0 {
				return kg
			}
		}
		t.Fatal("no entries")
		return 0
	}
	cases := map[string]func(v *memView){
		"namespace in a keyed state": func(v *memView) {
			kg := firstKG(v, "counts")
			v.data["counts"][kg][0].Namespace = []byte("ns")
		},
		"user key in a list": func(v *memView) {
			kg := firstKG(v, "events")
			v.data["events"][kg][0].UserKey = []byte("uk")
		},
		"key in the wrong key group": func(v *memView) {
			kg := firstKG(v, "counts")
			v.data["counts"][kg][0].Key = keyIn((kg+1)%8, 8)
		},
		"states not sorted": func(v *memView) {
			v.specs = []runtime.StateSpec{testSpecs[1], testSpecs[0]}
		},
		"invalid state name": func(v *memView) {
			v.specs = []runtime.StateSpec{{Name: "a/b", Kind: runtime.KindValue}}
			v.data["a/b"] = map[int][]runtime.Entry{}
		},
	}
	for name, breakIt := range cases {
		t.Run(name, func(t *testing.T) {
			v := base()
			breakIt(v)
			s := checkpoint.NewMem()
			_, err := checkpoint.WriteInstance(ctx, s, "chk", "f", v, nil)
			if !errors.Is(err, checkpoint.ErrInvalidView) {
				t.Fatalf("WriteInstance = %v, want ErrInvalidView", err)
			}
			if objs, _ := s.Objects(ctx, "chk"); len(objs) != 0 {
				t.Errorf("a failed write left %v", objs)
			}
			if all, _ := s.List(ctx); len(all) != 0 {
				t.Errorf("a failed write left a pending write in %v", all)
			}
		})
	}
}

// lazyView generates n Value entries of valueSize bytes across maxP key
// groups on the fly, holding nothing: what it costs to write it is the
// writer's own memory.
type lazyView struct {
	maxP, n, valueSize int
	keys               [][]byte // per key group, one key prefix
}

func (v *lazyView) MaxParallelism() int              { return v.maxP }
func (v *lazyView) KeyGroups() runtime.KeyGroupRange { return runtime.FullRange(v.maxP) }
func (v *lazyView) States() []runtime.StateSpec {
	return []runtime.StateSpec{{Name: "s", Kind: runtime.KindMap}}
}
func (v *lazyView) Scan(_ string, kg int, fn func(runtime.Entry) error) error {
	e := runtime.Entry{Key: v.keys[kg], UserKey: make([]byte, 8), Value: make([]byte, v.valueSize)}
	for i := 0; i < v.n/v.maxP; i++ {
		binary.BigEndian.PutUint64(e.UserKey, uint64(i))
		binary.BigEndian.PutUint64(e.Value, uint64(i))
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// TestWriterMemoryIsBounded writes a file of about 20 MiB and checks that
// the writer allocates what its documentation promises, whatever the size
// of the state: one block and the output buffer when sequential; at most
// 5n+5 blocks and the buffer with n encoding goroutines.
func TestWriterMemoryIsBounded(t *testing.T) {
	v := &lazyView{maxP: 16, n: 200_000, valueSize: 100}
	for kg := range 16 {
		v.keys = append(v.keys, keyIn(kg, 16))
	}
	const (
		blockAlloc = checkpoint.DefaultBlockSize + checkpoint.DefaultBlockSize/8 + 8
		outBuffer  = 256 << 10
		slack      = 256 << 10 // the index, the InstanceSnapshot, goroutines, channels
	)
	for _, n := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("concurrency=%d", n), func(t *testing.T) {
			blocks := 1
			if n > 1 {
				blocks = 5*n + 5
			}
			limit := uint64(outBuffer + blocks*blockAlloc + slack)
			defer debug.SetGCPercent(debug.SetGCPercent(-1))
			var before, after gort.MemStats
			gort.GC()
			gort.ReadMemStats(&before)
			snap, err := checkpoint.WriteFile(ctx, io.Discard, v, &checkpoint.WriterOptions{Concurrency: n})
			if err != nil {
				t.Fatal(err)
			}
			gort.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("wrote %d entries, %d bytes, allocating %d bytes (limit %d)", snap.File.Entries, snap.File.Size, alloc, limit)
			if snap.File.Size < 20<<20 {
				t.Fatalf("file is only %d bytes", snap.File.Size)
			}
			if alloc > limit {
				t.Errorf("writing a %d-byte file allocated %d bytes; want at most %d blocks and a buffer (%d)",
					snap.File.Size, alloc, blocks, limit)
			}
		})
	}
}

func TestEntryLargerThanTheBlockSizeGetsItsOwnBlock(t *testing.T) {
	key := keyIn(0, 1)
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	v := &memView{maxP: 1, kgs: runtime.FullRange(1), specs: []runtime.StateSpec{{Name: "s", Kind: runtime.KindList}},
		data: map[string]map[int][]runtime.Entry{"s": {0: {{Key: key, Value: []byte("a")}, {Key: key, Value: big}, {Key: key, Value: []byte("c")}}}}}
	data := fileBytes(t, v, &checkpoint.WriterOptions{BlockSize: 1024})
	fv, err := checkpoint.OpenFile("f", bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(dump(t, v), dump(t, fv)); diff != "" {
		t.Fatalf("contents differ:\n%s", diff)
	}
}

// goldenView is the content of the golden files: every kind of state, a
// list of three elements and a map of two entries sharing a key, in key
// groups [1, 3) of 4 (the files) or all 4 (the golden checkpoints).
func goldenView(kgs runtime.KeyGroupRange) *memView {
	const maxP = 4
	k1, k2 := keyIn(1, maxP), keyIn(2, maxP)
	return &memView{maxP: maxP, kgs: kgs, specs: []runtime.StateSpec{
		{Name: "list", Kind: runtime.KindList, SubKeyed: true, Fingerprint: "l"},
		{Name: "map", Kind: runtime.KindSortedMap, Fingerprint: "m"},
		{Name: "value", Kind: runtime.KindValue, Fingerprint: "v"},
	}, data: map[string]map[int][]runtime.Entry{
		"list": {1: {
			{Key: k1, Namespace: []byte("w"), Value: []byte("e1")},
			{Key: k1, Namespace: []byte("w"), Value: []byte("e2")},
			{Key: k1, Namespace: []byte("w"), Value: []byte("e3")},
		}},
		"map": {2: {{Key: k2, UserKey: []byte("a"), Value: []byte("1")}, {Key: k2, UserKey: []byte("b"), Value: []byte("2")}}},
		"value": {1: {{Key: k1, Value: []byte("one")}},
			2: {{Key: k2, Value: []byte{}}}},
	}}
}

// goldenTag is the file tag of the golden version-2 files.
const goldenTag = 0x9f3a0c11

// goldenRaw is the golden file of goldenView's key groups [1, 3), 20-byte
// blocks, built by hand from the package doc's layout: the list's third
// element starts a second block; the list's second element and the map's
// second entry share their key.
func goldenRaw(version, tag uint32) rawFile {
	const maxP = 4
	k1, k2 := keyIn(1, maxP), keyIn(2, maxP)
	newKey := func(k []byte) []byte { return append([]byte{0, 8}, k...) }
	return rawFile{version: version, tag: tag, maxP: maxP, start: 1, end: 3, states: goldenView(runtime.FullRange(maxP)).specs, groups: [][]rawSection{
		{ // key group 1: list, value
			{state: 0, entries: 3, blocks: [][]byte{
				append(newKey(k1), 1, 'w', 2, 'e', '1', 1, 2, 'e', '2'),
				append(newKey(k1), 1, 'w', 2, 'e', '3'),
			}},
			{state: 2, entries: 1, blocks: [][]byte{valueEntry(k1, []byte("one"))}},
		},
		{ // key group 2: map, value
			{state: 1, entries: 2, blocks: [][]byte{append(newKey(k2), 1, 'a', 1, '1', 1, 1, 'b', 1, '2')}},
			{state: 2, entries: 1, blocks: [][]byte{valueEntry(k2, nil)}},
		},
	}}
}

// checkGoldenLayout checks the documented header and trailer of a golden
// file, byte by byte.
func checkGoldenLayout(t *testing.T, path string, data []byte, version, tag uint32) {
	t.Helper()
	if !bytes.Equal(data[:8], []byte{0x89, 'S', 'G', 'C', 'K', 'P', 'T', '\n'}) ||
		binary.LittleEndian.Uint32(data[8:]) != version || binary.LittleEndian.Uint32(data[12:]) != 4 ||
		binary.LittleEndian.Uint32(data[16:]) != 1 || binary.LittleEndian.Uint32(data[20:]) != 3 ||
		binary.LittleEndian.Uint32(data[24:]) != tag ||
		binary.LittleEndian.Uint32(data[28:]) != crc32.Checksum(data[:28], castagnoli) ||
		!bytes.Equal(data[len(data)-4:], []byte("SGCX")) {
		t.Errorf("%s: header or trailer do not follow the documented layout: %x", path, data)
	}
}

// TestGoldenFileV3 pins format version 3: the writer must keep producing
// these exact bytes (with the file tag pinned), and the reader must keep
// reading them. Run with -update only when the format version changes.
func TestGoldenFileV3(t *testing.T) {
	v := goldenView(runtime.KeyGroupRange{Start: 1, End: 3})
	opts := &checkpoint.WriterOptions{BlockSize: 20, Concurrency: 1}
	checkpoint.SetFileTag(opts, goldenTag)
	var buf bytes.Buffer
	snap, err := checkpoint.WriteFile(ctx, &buf, v, opts)
	if err != nil {
		t.Fatal(err)
	}
	got := buf.Bytes()
	if snap.File.Tag != goldenTag {
		t.Errorf("WriteFile described the file's tag as %08x, want %08x", snap.File.Tag, uint32(goldenTag))
	}
	pipelinedOpts := &checkpoint.WriterOptions{BlockSize: 20, Concurrency: 3}
	checkpoint.SetFileTag(pipelinedOpts, goldenTag)
	var pipelined bytes.Buffer
	if _, err := checkpoint.WriteFile(ctx, &pipelined, v, pipelinedOpts); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pipelined.Bytes(), got) {
		t.Errorf("the pipelined writer's bytes differ from the sequential writer's\npipelined  %x\nsequential %x", pipelined.Bytes(), got)
	}
	path := filepath.Join("testdata", "v3-small.sgc")
	want := checkGolden(t, path, got)
	fv, err := checkpoint.OpenFile(path, bytes.NewReader(want), int64(len(want)))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(dump(t, v), dump(t, fv)); diff != "" {
		t.Fatalf("contents of %s differ:\n%s", path, diff)
	}
	checkGoldenLayout(t, path, want, 3, goldenTag)
	// A version-3 data file is a version-2 one but for the version field
	// (and so the header's CRC32C).
	v2, err := os.ReadFile(filepath.Join("testdata", "v2-small.sgc"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(v2[12:28], want[12:28]) || !bytes.Equal(v2[32:], want[32:]) {
		t.Errorf("the version-2 and -3 golden files differ beyond the version field")
	}
	if rb := goldenRaw(3, goldenTag).bytes(); !bytes.Equal(rb, want) {
		t.Errorf("the layout rebuilt from the package doc differs from the writer's:\ndoc    %x\nwriter %x", rb, want)
	}
}

// TestGoldenFileV2 keeps format version 2 readable: the file a version-2
// writer produced reads, and it is the package doc's layout with version 2.
// As the package doc says, the whole file's CRC32C does not see the header,
// which ends with its own CRC32C: the version-1 file, which differs only
// there, has the same one. The tag is what tells them apart.
func TestGoldenFileV2(t *testing.T) {
	v := goldenView(runtime.KeyGroupRange{Start: 1, End: 3})
	path := filepath.Join("testdata", "v2-small.sgc")
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fv, err := checkpoint.OpenFile(path, bytes.NewReader(want), int64(len(want)))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(dump(t, v), dump(t, fv)); diff != "" {
		t.Fatalf("contents of %s differ:\n%s", path, diff)
	}
	checkGoldenLayout(t, path, want, 2, goldenTag)
	v1, err := os.ReadFile(filepath.Join("testdata", "v1-small.sgc"))
	if err != nil {
		t.Fatal(err)
	}
	if c1, c2 := crc32.Checksum(v1, castagnoli), crc32.Checksum(want, castagnoli); !bytes.Equal(v1[32:], want[32:]) || c1 != c2 {
		t.Errorf("the version-1 and -2 golden files differ beyond the header, or in CRC32C (%08x, %08x)", c1, c2)
	}
	if rb := goldenRaw(2, goldenTag).bytes(); !bytes.Equal(rb, want) {
		t.Errorf("the version-2 layout rebuilt from the package doc differs from %s:\ndoc  %x\nfile %x", path, rb, want)
	}
}

// TestGoldenFileV1 keeps format version 1 readable: the file a version-1
// writer produced reads, and it is the package doc's layout with version 1
// and no tag — the only difference from version 2.
func TestGoldenFileV1(t *testing.T) {
	v := goldenView(runtime.KeyGroupRange{Start: 1, End: 3})
	path := filepath.Join("testdata", "v1-small.sgc")
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fv, err := checkpoint.OpenFile(path, bytes.NewReader(want), int64(len(want)))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(dump(t, v), dump(t, fv)); diff != "" {
		t.Fatalf("contents of %s differ:\n%s", path, diff)
	}
	checkGoldenLayout(t, path, want, 1, 0)
	if rb := goldenRaw(1, 0).bytes(); !bytes.Equal(rb, want) {
		t.Errorf("the version-1 layout rebuilt from the package doc differs from %s:\ndoc  %x\nfile %x", path, rb, want)
	}
}
