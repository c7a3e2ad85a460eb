package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storekit"
)

// dataFile is an opened data file: its header and parsed index. Reading
// entries goes through scan, which reads only the blocks of one section.
type dataFile struct {
	path   string
	r      io.ReaderAt
	closer io.Closer
	size   int64
	read   *atomic.Int64 // bytes read, shared with the View

	version uint32 // format version, from the header
	tag     uint32 // file tag, from the header; zero in version 1
	maxP    int
	kgs     runtime.KeyGroupRange
	states  []runtime.StateSpec
	// groupStart[i] is the index in sections of the first section of key
	// group kgs.Start+i; groupStart has kgs.Len()+1 elements.
	groupStart []int
	sections   []section
	dataEnd    int64 // offset of the index block
	// by says which checkpoint references the file, for the errors about
	// a file of another checkpoint's (a chain's): "referenced by
	// checkpoint <name>: ", or empty.
	by string
}

// annotate prefixes the reason of a *FileError about f with f.by.
func (f *dataFile) annotate(err error) error {
	var fe *FileError
	if f.by != "" && errors.As(err, &fe) && fe.Path == f.path && !strings.HasPrefix(fe.Reason, f.by) {
		fe.Reason = f.by + fe.Reason
	}
	return err
}

// section is the run of blocks holding one state's entries in one key
// group.
type section struct {
	state   int
	off     int64
	length  int64
	entries int64
}

// readAt reads exactly len(p) bytes at off, counting them; a short read is
// reported as truncation.
func (f *dataFile) readAt(p []byte, off int64) error {
	n, err := f.r.ReadAt(p, off)
	f.read.Add(int64(n))
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return corruptAt(f.path, off+int64(n), "file ends after %d of %d bytes read here (truncated)", n, len(p))
	}
	return &FileError{Path: f.path, Offset: off, Reason: "read failed: " + err.Error(), Err: err}
}

// openDataFile reads and checks the header, trailer and index of the data
// file r of size bytes. path names it in errors.
func openDataFile(path string, r io.ReaderAt, size int64, read *atomic.Int64) (*dataFile, error) {
	f := &dataFile{path: path, r: r, size: size, read: read}
	if size < minFileSize {
		return nil, corruptAt(path, size, "file is %d bytes, shorter than the smallest data file (%d bytes)", size, minFileSize)
	}
	var hdr [headerSize]byte
	if err := f.readAt(hdr[:], 0); err != nil {
		return nil, err
	}
	if !bytes.Equal(hdr[:8], headerMagic[:]) {
		return nil, corruptAt(path, 0, "bad magic %x: not a stategen checkpoint data file", hdr[:8])
	}
	if got, want := binary.LittleEndian.Uint32(hdr[28:]), crc32.Checksum(hdr[:28], castagnoli); got != want {
		return nil, corruptAt(path, 28, "header checksum mismatch (stored %08x, computed %08x)", got, want)
	}
	f.version = binary.LittleEndian.Uint32(hdr[8:])
	if f.version < minFormatVersion || f.version > FormatVersion {
		return nil, &FileError{Path: path, Offset: 8, Err: ErrUnsupportedVersion,
			Reason: fmt.Sprintf("format version %d is not supported (this reader reads versions %d to %d)", f.version, minFormatVersion, FormatVersion)}
	}
	maxP := binary.LittleEndian.Uint32(hdr[12:])
	start, end := binary.LittleEndian.Uint32(hdr[16:]), binary.LittleEndian.Uint32(hdr[20:])
	if maxP < 1 || maxP > runtime.UpperBoundMaxParallelism {
		return nil, corruptAt(path, 12, "maxParallelism %d is outside [1, %d]", maxP, runtime.UpperBoundMaxParallelism)
	}
	if start >= end || end > maxP {
		return nil, corruptAt(path, 16, "key-group range [%d, %d) is empty or outside [0, %d)", start, end, maxP)
	}
	f.tag = binary.LittleEndian.Uint32(hdr[24:])
	switch {
	case f.version == 1 && f.tag != 0:
		return nil, corruptAt(path, 24, "reserved header field of a version-1 file is %08x, not zero", f.tag)
	case f.version >= 2 && f.tag == 0:
		return nil, corruptAt(path, 24, "file tag is zero, which no writer chooses")
	}
	f.maxP = int(maxP)
	f.kgs = runtime.KeyGroupRange{Start: int(start), End: int(end)}

	var tr [trailerSize]byte
	trOff := size - trailerSize
	if err := f.readAt(tr[:], trOff); err != nil {
		return nil, err
	}
	if !bytes.Equal(tr[20:], trailerMagic[:]) {
		return nil, corruptAt(path, trOff+20, "bad trailer magic %x: the file is truncated or not a data file", tr[20:])
	}
	if got, want := binary.LittleEndian.Uint32(tr[16:]), crc32.Checksum(tr[:16], castagnoli); got != want {
		return nil, corruptAt(path, trOff+16, "trailer checksum mismatch (stored %08x, computed %08x)", got, want)
	}
	indexOff := binary.LittleEndian.Uint64(tr[0:])
	indexLen := binary.LittleEndian.Uint64(tr[8:])
	if indexOff < headerSize || indexOff > uint64(trOff) || indexLen != uint64(trOff)-indexOff ||
		indexLen < blockHeaderSize+minIndexPayload || indexLen > blockHeaderSize+MaxBlockSize {
		return nil, corruptAt(path, trOff, "index block at offset %d, length %d, does not end where the trailer begins (%d)",
			indexOff, indexLen, trOff)
	}
	f.dataEnd = int64(indexOff)
	idx := make([]byte, indexLen)
	if err := f.readAt(idx, f.dataEnd); err != nil {
		return nil, err
	}
	if n := binary.LittleEndian.Uint32(idx[0:]); uint64(n) != indexLen-blockHeaderSize {
		return nil, corruptAt(path, f.dataEnd, "index block length %d disagrees with the trailer (%d)", n, indexLen-blockHeaderSize)
	}
	if got, want := binary.LittleEndian.Uint32(idx[4:]), blockCRC(idx[0:4], idx[blockHeaderSize:]); got != want {
		return nil, corruptAt(path, f.dataEnd+4, "index block checksum mismatch (stored %08x, computed %08x)", got, want)
	}
	if err := f.parseIndex(idx[blockHeaderSize:], f.dataEnd+blockHeaderSize); err != nil {
		return nil, err
	}
	return f, nil
}

// decoder reads uvarints and byte strings from a payload, bounding every
// length by the bytes that remain. base is the file offset of the payload,
// for errors.
type decoder struct {
	path string
	base int64
	p    []byte
	pos  int
}

func (d *decoder) off() int64 { return d.base + int64(d.pos) }

func (d *decoder) uvarint(what string) (uint64, error) {
	v, n := binary.Uvarint(d.p[d.pos:])
	if n <= 0 {
		return 0, corruptAt(d.path, d.off(), "bad or truncated varint (%s)", what)
	}
	d.pos += n
	return v, nil
}

// count reads a uvarint that counts items of at least minSize bytes each,
// which must fit in what remains.
func (d *decoder) count(what string, minSize int) (int, error) {
	at := d.off()
	v, err := d.uvarint(what)
	if err != nil {
		return 0, err
	}
	if rest := uint64(len(d.p) - d.pos); v > rest/uint64(minSize) {
		return 0, corruptAt(d.path, at, "%s %d cannot fit in the %d bytes that remain", what, v, rest)
	}
	return int(v), nil
}

// bytes reads a uvarint length and that many bytes. It allocates nothing:
// messages are built on the error path only.
func (d *decoder) bytes(what string) ([]byte, error) {
	n, l := binary.Uvarint(d.p[d.pos:])
	if l <= 0 {
		return nil, corruptAt(d.path, d.off(), "bad or truncated varint (%s length)", what)
	}
	if rest := uint64(len(d.p) - d.pos - l); n > rest {
		return nil, corruptAt(d.path, d.off(), "%s length %d exceeds the %d bytes that remain in the block", what, n, rest)
	}
	start := d.pos + l
	end := start + int(n)
	d.pos = end
	return d.p[start:end:end], nil
}

func (d *decoder) byte(what string) (byte, error) {
	if d.pos >= len(d.p) {
		return 0, corruptAt(d.path, d.off(), "truncated (%s)", what)
	}
	b := d.p[d.pos]
	d.pos++
	return b, nil
}

// parseIndex parses the index payload p, found at file offset base.
func (f *dataFile) parseIndex(p []byte, base int64) error {
	d := &decoder{path: f.path, base: base, p: p}
	// A state takes at least 4 bytes: name length, one name byte, kind,
	// flags (and a fingerprint length).
	n, err := d.count("state count", 5)
	if err != nil {
		return err
	}
	f.states = make([]runtime.StateSpec, n)
	for i := range f.states {
		at := d.off()
		name, err := d.bytes("state name")
		if err != nil {
			return err
		}
		kind, err := d.byte("state kind")
		if err != nil {
			return err
		}
		flags, err := d.byte("state flags")
		if err != nil {
			return err
		}
		fp, err := d.bytes("state fingerprint")
		if err != nil {
			return err
		}
		if flags&^stateFlagsKnown != 0 {
			return corruptAt(f.path, at, "state %q has unknown flags %#x", name, flags)
		}
		var ttl time.Duration
		if flags&stateFlagTTL != 0 {
			ms, err := d.uvarint("state TTL")
			if err != nil {
				return err
			}
			if ms == 0 || ms > math.MaxInt64/uint64(time.Millisecond) {
				return corruptAt(f.path, at, "state %q has a TTL of %d ms", name, ms)
			}
			ttl = time.Duration(ms) * time.Millisecond
		}
		s := runtime.StateSpec{Name: string(name), Kind: storekit.KindOfCode(kind), SubKeyed: flags&stateFlagSubKeyed != 0, Fingerprint: string(fp), TTL: ttl}
		if err := s.Validate(); err != nil {
			return &FileError{Path: f.path, Offset: at, Reason: "invalid state in the index", Err: ErrCorrupt, Cause: err}
		}
		if i > 0 && f.states[i-1].Name >= s.Name {
			return corruptAt(f.path, at, "state %q is not sorted after %q", s.Name, f.states[i-1].Name)
		}
		f.states[i] = s
	}
	at := d.off()
	groups, err := d.count("key-group count", 1)
	if err != nil {
		return err
	}
	if groups != f.kgs.Len() {
		return corruptAt(f.path, at, "index has %d key groups, the header's range %v has %d", groups, f.kgs, f.kgs.Len())
	}
	f.groupStart = make([]int, groups+1)
	off := int64(headerSize)
	for g := 0; g < groups; g++ {
		f.groupStart[g] = len(f.sections)
		// A section takes at least 3 bytes of index.
		ns, err := d.count("section count", 3)
		if err != nil {
			return err
		}
		if ns > len(f.states) {
			return corruptAt(f.path, d.off(), "key group %d has %d sections but the file has %d states", f.kgs.Start+g, ns, len(f.states))
		}
		state := -1
		for j := 0; j < ns; j++ {
			at := d.off()
			delta, err := d.uvarint("state delta")
			if err != nil {
				return err
			}
			length, err := d.uvarint("section length")
			if err != nil {
				return err
			}
			entries, err := d.uvarint("section entries")
			if err != nil {
				return err
			}
			if delta >= uint64(len(f.states)-state-1) {
				return corruptAt(f.path, at, "key group %d: section names state #%d+%d of %d", f.kgs.Start+g, state+1, delta, len(f.states))
			}
			state += int(delta) + 1
			if length < blockHeaderSize+minEntrySize || length > uint64(f.dataEnd-off) {
				return corruptAt(f.path, at, "key group %d, state %q: section length %d at offset %d exceeds the data that remains (%d bytes)",
					f.kgs.Start+g, f.states[state].Name, length, off, f.dataEnd-off)
			}
			if entries < 1 || entries > length/minEntrySize {
				return corruptAt(f.path, at, "key group %d, state %q: %d entries cannot fit in a section of %d bytes",
					f.kgs.Start+g, f.states[state].Name, entries, length)
			}
			f.sections = append(f.sections, section{state: state, off: off, length: int64(length), entries: int64(entries)})
			off += int64(length)
		}
	}
	f.groupStart[groups] = len(f.sections)
	if d.pos != len(p) {
		return corruptAt(f.path, d.off(), "%d bytes of garbage after the index", len(p)-d.pos)
	}
	if off != f.dataEnd {
		return corruptAt(f.path, off, "the sections end at offset %d but the index begins at %d", off, f.dataEnd)
	}
	return nil
}

// stateIndex returns the index of the named state in f.states, or -1.
func (f *dataFile) stateIndex(name string) int {
	i := sort.Search(len(f.states), func(i int) bool { return f.states[i].Name >= name })
	if i < len(f.states) && f.states[i].Name == name {
		return i
	}
	return -1
}

// find returns the section of state si in key group kg, if it has one.
func (f *dataFile) find(si, kg int) (section, bool) {
	g := kg - f.kgs.Start
	for _, s := range f.sections[f.groupStart[g]:f.groupStart[g+1]] {
		if s.state == si {
			return s, true
		}
	}
	return section{}, false
}

// byteRange returns the offset and length of the data of key groups kgs
// (within f's range): their sections are contiguous.
func (f *dataFile) byteRange(kgs runtime.KeyGroupRange) (off, n int64) {
	lo, hi := f.groupStart[kgs.Start-f.kgs.Start], f.groupStart[kgs.End-f.kgs.Start]
	if lo == hi {
		return 0, 0
	}
	first, last := f.sections[lo], f.sections[hi-1]
	return first.off, last.off + last.length - first.off
}

func (f *dataFile) close() error {
	if f.closer != nil {
		return f.closer.Close()
	}
	return nil
}
