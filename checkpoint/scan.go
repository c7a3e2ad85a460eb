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
// A section of one block is read, decoded and handed to the Scan's
// callback on the caller's goroutine. A longer one, when read-ahead is on,
// is read and decoded on a goroutine of its own up to readAhead blocks
// ahead of the callback — which, in a restore, is the store's insert — so
// that the I/O, the checksums and the decoding overlap with the inserts.
// The decoding goroutine hands over batches of at most scanBatchEntries
// entries as offsets into the block they point into; a block's buffer
// comes back for reuse once the callback has seen its last entry. The
// callback sees exactly the entries, errors and order of the sequential
// path; only BytesRead may count the few blocks read ahead of a callback
// that stopped the Scan.

// DefaultReadAhead is how many blocks of a section a restore reads and
// decodes ahead of the store, unless RestoreOptions say otherwise.
const DefaultReadAhead = 2

// MaxReadAhead bounds RestoreOptions.ReadAhead.
const MaxReadAhead = 64

// scanBatchEntries bounds the entries of a batch, so that the offsets of
// a block of tiny entries take bounded memory.
const scanBatchEntries = 512

// span is the position of a byte string in a block's payload.
type span struct{ off, len uint32 }

func (s span) of(p []byte) []byte {
	end := s.off + s.len
	return p[s.off:end:end]
}

// entryRef is an entry as spans of its block's payload.
type entryRef struct{ key, ns, uk, val span }

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
		return buf, nil, 0, corruptAt(r.f.path, r.pos, "block checksum mismatch (stored %08x, computed %08x; state %q, key group %d)",
			stored, want, r.name, r.kg)
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

// decode calls emit with every entry of payload, found at file offset
// base, and returns emit's first error as is.
func (d *entryDecoder) decode(payload []byte, base int64, emit func(entryRef) error) error {
	dec := decoder{path: d.path, base: base, p: payload}
	var ref entryRef
	first := true
	for dec.pos < len(payload) {
		at := dec.off()
		switch tag := payload[dec.pos]; tag {
		case tagNewKey:
			dec.pos++
			var err error
			if ref.key, err = dec.span("key"); err != nil {
				return err
			}
			if d.subKeyed {
				if ref.ns, err = dec.span("namespace"); err != nil {
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
			if ref.uk, err = dec.span("user key"); err != nil {
				return err
			}
		}
		if ref.val, err = dec.span("value"); err != nil {
			return err
		}
		d.got++
		if d.got > d.want {
			return corruptAt(d.path, at, "state %q, key group %d: more entries than the index's %d", d.name, d.kg, d.want)
		}
		if err := emit(ref); err != nil {
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

// entry returns the Entry of ref in payload.
func (d *entryDecoder) entry(payload []byte, ref entryRef) runtime.Entry {
	e := runtime.Entry{Key: ref.key.of(payload), Value: ref.val.of(payload)}
	if d.subKeyed {
		e.Namespace = ref.ns.of(payload)
	}
	if d.hasUserKey {
		e.UserKey = ref.uk.of(payload)
	}
	return e
}

// span reads a uvarint length and that many bytes, as a span of the
// payload (see bytes).
func (d *decoder) span(what string) (span, error) {
	b, err := d.bytes(what)
	if err != nil {
		return span{}, err
	}
	end := uint32(d.pos)
	return span{off: end - uint32(len(b)), len: uint32(len(b))}, nil
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
	var payload []byte
	emit := func(ref entryRef) error { return fn(d.entry(payload, ref)) }
	for r.more() {
		if err := ctx.Err(); err != nil {
			return err
		}
		var off int64
		var err error
		if *bp, payload, off, err = r.next(*bp); err != nil {
			return err
		}
		if err := d.decode(payload, off, emit); err != nil {
			return err
		}
	}
	return nil
}

// scanBatch is what the decoding goroutine of scanAhead hands over: up to
// scanBatchEntries entries of one block, and, with the block's last ones,
// the block's buffer to give back; or the error that ended the section,
// after the entries decoded before it.
type scanBatch struct {
	payload []byte
	refs    *[]entryRef // nil if the batch has no entries
	block   *[]byte     // non-nil on the last batch of a block
	err     error
}

// refsPool recycles the entry offsets of scanAhead's batches.
var refsPool = sync.Pool{New: func() any {
	rs := make([]entryRef, 0, scanBatchEntries)
	return &rs
}}

// scanAhead reads and decodes the blocks of a section on a goroutine of its
// own, up to readAhead blocks ahead of fn, which runs on the calling
// goroutine. It returns once that goroutine has ended.
//
// The buffers are tokens that travel between the two goroutines: readAhead+1
// blocks and 2·readAhead+4 sets of offsets, each in its free channel (whose
// capacity is their number, so giving one back never blocks), held by the
// decoder, or in a batch.
func scanAhead(ctx context.Context, r *sectionReader, d *entryDecoder, readAhead int, fn func(runtime.Entry) error) error {
	nBatches := 2 * (readAhead + 1)
	batches := make(chan scanBatch, nBatches)
	stop := make(chan struct{})
	freeBlocks := make(chan *[]byte, readAhead+1)
	for range readAhead + 1 {
		freeBlocks <- blockPool.Get().(*[]byte)
	}
	freeRefs := make(chan *[]entryRef, nBatches+2)
	for range nBatches + 2 {
		freeRefs <- refsPool.Get().(*[]entryRef)
	}
	go decodeAhead(ctx, r, d, batches, stop, freeBlocks, freeRefs)

	var err error
	for b := range batches {
		if b.refs != nil {
			if err == nil {
				for _, ref := range *b.refs {
					if err = fn(d.entry(b.payload, ref)); err != nil {
						close(stop) // the decoder stops and closes batches
						break
					}
				}
			}
			freeRefs <- b.refs
		}
		if b.block != nil {
			freeBlocks <- b.block
		}
		if err == nil {
			err = b.err
		}
	}
	// batches is closed: the decoder has ended and given back every
	// buffer it held.
	close(freeBlocks)
	for bp := range freeBlocks {
		blockPool.Put(bp)
	}
	close(freeRefs)
	for rs := range freeRefs {
		*rs = (*rs)[:0]
		refsPool.Put(rs)
	}
	return err
}

// decodeAhead is the decoding goroutine of scanAhead. It closes batches
// when it ends: at the end of the section, after an error (sent in a
// batch), or when stop is closed. It blocks on nothing but stop and the
// channels of its Scan, and gives back every buffer it holds before it
// ends.
func decodeAhead(ctx context.Context, r *sectionReader, d *entryDecoder, batches chan<- scanBatch, stop <-chan struct{},
	freeBlocks chan *[]byte, freeRefs chan *[]entryRef) {
	defer close(batches)
	send := func(b scanBatch) bool {
		select {
		case batches <- b:
			return true
		case <-stop:
			return false
		}
	}
	for r.more() {
		if err := ctx.Err(); err != nil {
			send(scanBatch{err: err})
			return
		}
		var bp *[]byte
		select {
		case bp = <-freeBlocks:
		case <-stop:
			return
		}
		buf, payload, off, err := r.next(*bp)
		*bp = buf
		if err != nil {
			freeBlocks <- bp
			send(scanBatch{err: err})
			return
		}
		var cur *[]entryRef // the batch being filled
		stopped := false
		err = d.decode(payload, off, func(ref entryRef) error {
			if cur != nil && len(*cur) == scanBatchEntries {
				if !send(scanBatch{payload: payload, refs: cur}) {
					stopped = true
					return errScanStopped
				}
				cur = nil
			}
			if cur == nil {
				select {
				case cur = <-freeRefs:
					*cur = (*cur)[:0]
				case <-stop:
					stopped = true
					return errScanStopped
				}
			}
			*cur = append(*cur, ref)
			return nil
		})
		last := scanBatch{payload: payload, refs: cur, block: bp, err: err}
		if stopped || !send(last) {
			if cur != nil {
				freeRefs <- cur
			}
			freeBlocks <- bp
			return
		}
		if err != nil {
			return
		}
	}
}

// errScanStopped ends the decoding of a block when the Scan's callback
// has stopped it; nobody else sees it.
var errScanStopped = &sentinel{msg: "checkpoint: scan stopped"}
