package checkpoint

import (
	"context"
	"encoding/binary"
	"sync"

	"github.com/stategen/stategen/runtime"
)

// Reading a section: the blocks of one (state, key group), in order, each
// verified against its checksum, then decoded into entries.
//
// A section of one block is read, checked, decoded and handed to the
// Scan's callback on the caller's goroutine. A longer one, when read-ahead
// is on, is read and checked on a goroutine of its own up to readAhead
// blocks ahead of the caller, which decodes each block and hands its
// entries to the callback — in a restore, the store's insert — so that the
// reads and checksums overlap with the inserts, and a slow read (a cold
// disk, an object store) does not stall them. The handover is per block;
// entries are decoded where they are used, because handing them over one
// by one costs the consumer as much as decoding them (measured:
// BenchmarkCheckpointRestoreReadAhead). The callback sees exactly the
// entries, errors and order of the inline path; only BytesRead may count
// the few blocks read ahead of a callback that stopped the Scan.

// DefaultReadAhead is how many blocks of a section a restore reads and
// checks ahead of the store, unless RestoreOptions say otherwise.
const DefaultReadAhead = 2

// MaxReadAhead bounds RestoreOptions.ReadAhead.
const MaxReadAhead = 64

// sectionReader reads the blocks of one section in order and verifies
// their checksums. Each read fetches a block's payload and the header of
// the next block, so a section of b blocks costs b+1 reads.
type sectionReader struct {
	f    *dataFile
	name string // the state, for errors
	kg   int
	end  int64                 // end of the section
	pos  int64                 // offset of the next block
	hdr  [blockHeaderSize]byte // the next block's header
}

func (f *dataFile) openSection(name string, kg int, s section) (sectionReader, error) {
	r := sectionReader{f: f, name: name, kg: kg, end: s.off + s.length, pos: s.off}
	return r, f.readAt(r.hdr[:], r.pos)
}

func (r *sectionReader) more() bool { return r.pos < r.end }

// next reads the next block into buf, grown as needed, and returns the
// buffer, the block's payload (within it) and the payload's offset.
func (r *sectionReader) next(buf []byte) ([]byte, []byte, int64, error) {
	n := int64(binary.LittleEndian.Uint32(r.hdr[0:]))
	stored := binary.LittleEndian.Uint32(r.hdr[4:])
	payloadOff := r.pos + blockHeaderSize
	if n < minEntrySize || n > r.end-payloadOff {
		return buf, nil, 0, corruptAt(r.f.path, r.pos, "block length %d does not fit in the %d bytes that remain of the section (state %q, key group %d)",
			n, r.end-payloadOff, r.name, r.kg)
	}
	next := payloadOff + n
	need := int(n + min(r.end-next, blockHeaderSize))
	if cap(buf) < need {
		buf = make([]byte, need, max(need, 2*cap(buf)))
	}
	buf = buf[:need]
	if err := r.f.readAt(buf, payloadOff); err != nil {
		return buf, nil, 0, err
	}
	payload := buf[:n]
	if want := blockCRC(r.hdr[0:4], payload); stored != want {
		return buf, nil, 0, corruptAt(r.f.path, r.pos, "block of bytes [%d, %d): checksum mismatch (stored %08x, computed %08x; state %q, key group %d)",
			r.pos, next, stored, want, r.name, r.kg)
	}
	copy(r.hdr[:], buf[n:])
	r.pos = next
	return buf, payload, payloadOff, nil
}

// entryDecoder decodes the entries of a section's blocks and checks their
// count against the index.
type entryDecoder struct {
	path                 string
	name                 string // the state
	kg                   int
	subKeyed, hasUserKey bool
	want, got            int64 // entries the index promises, entries decoded
}

// decode calls fn with every entry of payload, found at file offset base,
// and returns fn's first error as is. It allocates nothing: the entries'
// slices point into payload.
func (d *entryDecoder) decode(payload []byte, base int64, fn func(runtime.Entry) error) error {
	dec := decoder{path: d.path, base: base, p: payload}
	var e runtime.Entry
	first := true
	for dec.pos < len(payload) {
		at := dec.off()
		switch tag := payload[dec.pos]; tag {
		case tagNewKey:
			dec.pos++
			var err error
			if e.Key, err = dec.bytes("key"); err != nil {
				return err
			}
			if d.subKeyed {
				if e.Namespace, err = dec.bytes("namespace"); err != nil {
					return err
				}
			}
		case tagSameKey:
			if first {
				return corruptAt(d.path, at, "the first entry of a block refers to a previous key")
			}
			dec.pos++
		default:
			return corruptAt(d.path, at, "unknown entry tag %d", tag)
		}
		first = false
		var err error
		if d.hasUserKey {
			if e.UserKey, err = dec.bytes("user key"); err != nil {
				return err
			}
		}
		if e.Value, err = dec.bytes("value"); err != nil {
			return err
		}
		d.got++
		if d.got > d.want {
			return corruptAt(d.path, at, "state %q, key group %d: more entries than the index's %d", d.name, d.kg, d.want)
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// finish checks, at the end of the section at offset end, that it held the
// entries the index promised.
func (d *entryDecoder) finish(end int64) error {
	if d.got != d.want {
		return corruptAt(d.path, end, "state %q, key group %d: %d entries, the index says %d", d.name, d.kg, d.got, d.want)
	}
	return nil
}

// blockPool recycles block buffers between Scans.
var blockPool = sync.Pool{New: func() any {
	b := make([]byte, 0, DefaultBlockSize+DefaultBlockSize/8+2*blockHeaderSize)
	return &b
}}

// scan calls fn with every entry of the named state in key group kg,
// which f holds, and returns how many it passed. A state f does not know
// has no entries. It checks ctx before every block, and reads up to
// readAhead blocks ahead of fn on a goroutine of its own (none if
// readAhead is 0).
func (f *dataFile) scan(ctx context.Context, name string, kg int, readAhead int, fn func(runtime.Entry) error) (int64, error) {
	n, err := f.scanSection(ctx, name, kg, readAhead, fn)
	return n, f.annotate(err)
}

func (f *dataFile) scanSection(ctx context.Context, name string, kg int, readAhead int, fn func(runtime.Entry) error) (int64, error) {
	si := f.stateIndex(name)
	if si < 0 {
		return 0, nil
	}
	s, ok := f.find(si, kg)
	if !ok {
		return 0, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	spec := f.states[si]
	d := &entryDecoder{path: f.path, name: name, kg: kg, subKeyed: spec.SubKeyed, hasUserKey: spec.Kind.HasUserKey(), want: s.entries}
	r, err := f.openSection(name, kg, s)
	if err != nil {
		return 0, err
	}
	// A section of one block is read inline: the block header says how
	// long the first block is.
	if readAhead > 0 && s.length > blockHeaderSize+int64(binary.LittleEndian.Uint32(r.hdr[0:])) {
		err = scanAhead(ctx, &r, d, readAhead, fn)
	} else {
		err = scanInline(ctx, &r, d, fn)
	}
	if err != nil {
		return d.got, err
	}
	return d.got, d.finish(r.end)
}

// scanInline reads, decodes and passes the entries of a section on the
// calling goroutine.
func scanInline(ctx context.Context, r *sectionReader, d *entryDecoder, fn func(runtime.Entry) error) error {
	bp := blockPool.Get().(*[]byte)
	defer blockPool.Put(bp)
	for r.more() {
		if err := ctx.Err(); err != nil {
			return err
		}
		buf, payload, off, err := r.next(*bp)
		*bp = buf
		if err != nil {
			return err
		}
		if err := d.decode(payload, off, fn); err != nil {
			return err
		}
	}
	return nil
}

// aheadBlock is a block read and checked by the goroutine of scanAhead,
// in the buffer buf; or the error that ended the section.
type aheadBlock struct {
	buf     *[]byte
	payload []byte
	off     int64
	err     error
}

// scanAhead reads and checks the blocks of a section on a goroutine of its
// own, up to readAhead blocks ahead of the calling goroutine, which
// decodes them and passes their entries to fn. It returns once that
// goroutine has closed blocks, its last act: it is then done with every
// buffer and with r.
//
// The readAhead+1 block buffers are tokens: in free (whose capacity is
// their number, so giving one back never blocks), held by the reading
// goroutine, in blocks, or being decoded.
func scanAhead(ctx context.Context, r *sectionReader, d *entryDecoder, readAhead int, fn func(runtime.Entry) error) error {
	blocks := make(chan aheadBlock, readAhead)
	stop := make(chan struct{})
	free := make(chan *[]byte, readAhead+1)
	for range readAhead + 1 {
		free <- blockPool.Get().(*[]byte)
	}
	go readBlocks(ctx, r, blocks, stop, free)
	var err error
	for b := range blocks {
		if err == nil {
			if err = b.err; err == nil {
				if err = d.decode(b.payload, b.off, fn); err != nil {
					close(stop) // the reader stops and closes blocks
				}
			}
		}
		if b.buf != nil {
			free <- b.buf
		}
	}
	// blocks is closed: the reader has ended and given back the buffer
	// it held.
	close(free)
	for bp := range free {
		blockPool.Put(bp)
	}
	return err
}

// readBlocks is the reading goroutine of scanAhead. It closes blocks when
// it ends: at the end of the section, after an error (sent), or when stop
// is closed. It blocks on nothing but stop and the channels of its Scan.
func readBlocks(ctx context.Context, r *sectionReader, blocks chan<- aheadBlock, stop <-chan struct{}, free chan *[]byte) {
	defer close(blocks)
	for r.more() {
		var b aheadBlock
		if b.err = ctx.Err(); b.err == nil {
			select {
			case b.buf = <-free:
			case <-stop:
				return
			}
			var buf []byte
			buf, b.payload, b.off, b.err = r.next(*b.buf)
			*b.buf = buf
		}
		select {
		case blocks <- b:
		case <-stop:
			if b.buf != nil {
				free <- b.buf
			}
			return
		}
		if b.err != nil {
			return
		}
	}
}
