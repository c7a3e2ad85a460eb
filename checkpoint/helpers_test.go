package checkpoint_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
)

var ctx = context.Background()

// memView is a runtime.View over entries held in memory.
type memView struct {
	maxP  int
	kgs   runtime.KeyGroupRange
	specs []runtime.StateSpec
	data  map[string]map[int][]runtime.Entry
}

func (v *memView) MaxParallelism() int              { return v.maxP }
func (v *memView) KeyGroups() runtime.KeyGroupRange { return v.kgs }
func (v *memView) States() []runtime.StateSpec      { return slices.Clone(v.specs) }
func (v *memView) Scan(state string, kg int, fn func(runtime.Entry) error) error {
	if !v.kgs.Contains(kg) {
		return fmt.Errorf("memView: key group %d outside %v", kg, v.kgs)
	}
	groups, ok := v.data[state]
	if !ok {
		return fmt.Errorf("memView: no state %q", state)
	}
	for _, e := range groups[kg] {
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// restrict returns the part of v in kgs.
func (v *memView) restrict(kgs runtime.KeyGroupRange) *memView {
	out := &memView{maxP: v.maxP, kgs: kgs, specs: v.specs, data: make(map[string]map[int][]runtime.Entry)}
	for name, groups := range v.data {
		out.data[name] = make(map[int][]runtime.Entry)
		for kg, es := range groups {
			if kgs.Contains(kg) {
				out.data[name][kg] = es
			}
		}
	}
	return out
}

var testSpecs = []runtime.StateSpec{
	{Name: "counts", Kind: runtime.KindValue, Fingerprint: "value:int64"},
	{Name: "empty", Kind: runtime.KindValue, SubKeyed: true, Fingerprint: "value:empty"},
	{Name: "events", Kind: runtime.KindList, SubKeyed: true, Fingerprint: "list:event"},
	{Name: "index", Kind: runtime.KindMap, Fingerprint: "map:string->int"},
	{Name: "windows", Kind: runtime.KindSortedMap, SubKeyed: true, Fingerprint: "sortedmap:ts->agg"},
}

// genView returns a view of maxP key groups holding kgs, with about keys
// keys in each state of testSpecs (but "empty"), of every shape: empty
// values and namespaces, lists and maps of several entries, and now and then
// a value of bigValue bytes.
func genView(seed uint64, maxP int, kgs runtime.KeyGroupRange, keys, bigValue int) *memView {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	v := &memView{maxP: maxP, kgs: kgs, specs: testSpecs, data: make(map[string]map[int][]runtime.Entry)}
	for _, s := range testSpecs {
		v.data[s.Name] = make(map[int][]runtime.Entry)
	}
	bytesOf := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return b
	}
	value := func() []byte {
		switch r := rng.IntN(50); {
		case r == 0 && bigValue > 0:
			return bytesOf(bigValue)
		case r < 5:
			return []byte{}
		default:
			return bytesOf(rng.IntN(40))
		}
	}
	for i := 0; i < keys*100 && i < 1<<20; i++ {
		key := binary.BigEndian.AppendUint64(nil, rng.Uint64())
		kg := runtime.KeyGroupOfHash(runtime.HashKey(key), maxP)
		if !kgs.Contains(kg) {
			continue
		}
		keys--
		if keys < 0 {
			break
		}
		add := func(state string, e runtime.Entry) { v.data[state][kg] = append(v.data[state][kg], e) }
		add("counts", runtime.Entry{Key: key, Value: value()})
		for n := range rng.IntN(3) {
			ns := []byte(fmt.Sprintf("w%d", n))
			if n == 0 {
				ns = []byte{}
			}
			for range 1 + rng.IntN(4) {
				add("events", runtime.Entry{Key: key, Namespace: ns, Value: value()})
			}
			for u := range rng.IntN(4) {
				add("windows", runtime.Entry{Key: key, Namespace: ns, UserKey: []byte{byte(u)}, Value: value()})
			}
		}
		for u := range rng.IntN(5) {
			add("index", runtime.Entry{Key: key, UserKey: []byte(fmt.Sprintf("u%d", u)), Value: value()})
		}
	}
	return v
}

// rec is an entry as strings, for comparisons.
type rec struct{ Key, NS, UK, Val string }

// dump reads every entry of v, per state and key group, in scan order.
func dump(t testing.TB, v runtime.View) map[string]map[int][]rec {
	t.Helper()
	out := make(map[string]map[int][]rec)
	for _, s := range v.States() {
		out[s.Name] = make(map[int][]rec)
		for kg := range v.KeyGroups().All() {
			err := v.Scan(s.Name, kg, func(e runtime.Entry) error {
				out[s.Name][kg] = append(out[s.Name][kg], rec{string(e.Key), string(e.Namespace), string(e.UserKey), string(e.Value)})
				return nil
			})
			if err != nil {
				t.Fatalf("Scan(%q, %d): %v", s.Name, kg, err)
			}
		}
	}
	return out
}

// scanAll reads every entry of v and returns the first error.
func scanAll(v runtime.View) (int, error) {
	n := 0
	for _, s := range v.States() {
		for kg := range v.KeyGroups().All() {
			if err := v.Scan(s.Name, kg, func(runtime.Entry) error { n++; return nil }); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// writeCheckpoint writes v as instances of parallelism p of operator "op"
// into checkpoint ckpt of s, commits it and returns the metadata.
func writeCheckpoint(t testing.TB, s checkpoint.Storage, ckpt string, v *memView, p int, opts *checkpoint.WriterOptions) *checkpoint.Metadata {
	t.Helper()
	var snaps []checkpoint.InstanceSnapshot
	for i := range p {
		kgs, err := runtime.KeyGroupRangeForOperator(v.maxP, p, i)
		if err != nil {
			t.Fatal(err)
		}
		snap, err := checkpoint.WriteInstance(ctx, s, ckpt, fmt.Sprintf("op-%d-of-%d.sgc", i, p), v.restrict(kgs), opts)
		if err != nil {
			t.Fatal(err)
		}
		snap.OperatorState = []byte(fmt.Sprintf("offsets of %d", i))
		snaps = append(snaps, snap)
	}
	op, err := checkpoint.NewOperator("op", snaps...)
	if err != nil {
		t.Fatal(err)
	}
	m := &checkpoint.Metadata{CheckpointID: 1, Operators: []checkpoint.Operator{op}}
	if err := checkpoint.Commit(ctx, s, ckpt, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// testTag is the file tag fileBytes writes, so that the bytes of a file
// depend on its view and options alone.
const testTag = 0x7a9e3c51

// fileBytes writes v as one data file, with file tag testTag, and returns
// its bytes.
func fileBytes(t testing.TB, v runtime.View, opts *checkpoint.WriterOptions) []byte {
	t.Helper()
	var o checkpoint.WriterOptions
	if opts != nil {
		o = *opts
	}
	checkpoint.SetFileTag(&o, testTag)
	var buf bytes.Buffer
	snap, err := checkpoint.WriteFile(ctx, &buf, v, &o)
	if err != nil {
		t.Fatal(err)
	}
	if snap.File.Tag != testTag || snap.File.Size != int64(buf.Len()) || snap.File.CRC32C != crc32.Checksum(buf.Bytes(), crc32.MakeTable(crc32.Castagnoli)) {
		t.Fatalf("WriteFile described the file as %+v; it is %d bytes", snap.File, buf.Len())
	}
	return buf.Bytes()
}

// wantFileError checks that err is a *FileError wrapping sentinel that names
// path and an offset or a field.
func wantFileError(t testing.TB, err error, sentinel error, path string) *checkpoint.FileError {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want a *FileError wrapping %v", sentinel)
	}
	var fe *checkpoint.FileError
	if !errors.As(err, &fe) {
		t.Fatalf("error %q (%T) is not a *FileError", err, err)
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %q does not wrap %v", err, sentinel)
	}
	if fe.Path != path {
		t.Fatalf("error %q names %q, want %q", err, fe.Path, path)
	}
	if fe.Offset < 0 && fe.Field == "" {
		t.Fatalf("error %q names neither an offset nor a field", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Fatalf("error text %q does not name %q", err, path)
	}
	return fe
}

// The documented layout, rebuilt independently of the writer, so that tests
// can craft files the writer would never produce.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type rawSection struct {
	state   int
	blocks  [][]byte // payloads
	entries int
}

type rawFile struct {
	version     uint32
	maxP        uint32
	start, end  uint32
	tag         uint32 // the file tag (version 2), or zero (version 1)
	states      []runtime.StateSpec
	groups      [][]rawSection // per key group
	indexTail   []byte         // appended to the index payload
	stateCount  *uint64        // overrides the state count
	blockLenFix func(i int, n uint32) uint32
}

func rawBlock(payload []byte, lenField uint32) []byte {
	b := binary.LittleEndian.AppendUint32(nil, lenField)
	crc := crc32.Update(crc32.Update(0, castagnoli, b), castagnoli, payload)
	b = binary.LittleEndian.AppendUint32(b, crc)
	return append(b, payload...)
}

func (f rawFile) bytes() []byte {
	var out []byte
	out = append(out, 0x89, 'S', 'G', 'C', 'K', 'P', 'T', '\n')
	out = binary.LittleEndian.AppendUint32(out, f.version)
	out = binary.LittleEndian.AppendUint32(out, f.maxP)
	out = binary.LittleEndian.AppendUint32(out, f.start)
	out = binary.LittleEndian.AppendUint32(out, f.end)
	out = binary.LittleEndian.AppendUint32(out, f.tag)
	out = binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, castagnoli))
	var index []byte
	n := uint64(len(f.states))
	if f.stateCount != nil {
		n = *f.stateCount
	}
	index = binary.AppendUvarint(index, n)
	for _, s := range f.states {
		index = binary.AppendUvarint(index, uint64(len(s.Name)))
		index = append(index, s.Name...)
		flags := byte(0)
		if s.SubKeyed {
			flags = 1
		}
		index = append(index, byte(s.Kind), flags)
		index = binary.AppendUvarint(index, uint64(len(s.Fingerprint)))
		index = append(index, s.Fingerprint...)
	}
	index = binary.AppendUvarint(index, uint64(len(f.groups)))
	blockNo := 0
	for _, secs := range f.groups {
		index = binary.AppendUvarint(index, uint64(len(secs)))
		prev := -1
		for _, s := range secs {
			length := 0
			for _, p := range s.blocks {
				lf := uint32(len(p))
				if f.blockLenFix != nil {
					lf = f.blockLenFix(blockNo, lf)
				}
				blockNo++
				blk := rawBlock(p, lf)
				out = append(out, blk...)
				length += len(blk)
			}
			index = binary.AppendUvarint(index, uint64(s.state-prev-1))
			index = binary.AppendUvarint(index, uint64(length))
			index = binary.AppendUvarint(index, uint64(s.entries))
			prev = s.state
		}
	}
	index = append(index, f.indexTail...)
	indexOff := len(out)
	out = append(out, rawBlock(index, uint32(len(index)))...)
	tr := binary.LittleEndian.AppendUint64(nil, uint64(indexOff))
	tr = binary.LittleEndian.AppendUint64(tr, uint64(len(out)-indexOff))
	tr = binary.LittleEndian.AppendUint32(tr, crc32.Checksum(tr, castagnoli))
	tr = append(tr, 'S', 'G', 'C', 'X')
	return append(out, tr...)
}

// keyIn returns an 8-byte key of key group kg.
func keyIn(kg, maxP int) []byte {
	for i := uint64(0); ; i++ {
		k := binary.BigEndian.AppendUint64(nil, i)
		if runtime.KeyGroupOfHash(runtime.HashKey(k), maxP) == kg {
			return k
		}
	}
}

// valueEntry encodes an entry of a keyed Value state.
func valueEntry(key, value []byte) []byte {
	b := []byte{0}
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.AppendUvarint(b, uint64(len(value)))
	return append(b, value...)
}
