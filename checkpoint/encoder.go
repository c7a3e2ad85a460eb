package checkpoint

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	"github.com/stategen/stategen/runtime"
)

// sectionInfo is what the index records of one non-empty section: the
// state's index in the file's state table, the section's length in bytes
// (block headers included) and its entry count.
type sectionInfo struct {
	state           int
	length, entries int64
}

// appendGroupIndex appends the index entries of one key group — its
// non-empty sections, by state — to the index payload idx.
func appendGroupIndex(idx []byte, secs []sectionInfo) []byte {
	idx = binary.AppendUvarint(idx, uint64(len(secs)))
	prev := -1
	for _, s := range secs {
		idx = binary.AppendUvarint(idx, uint64(s.state-prev-1))
		idx = binary.AppendUvarint(idx, uint64(s.length))
		idx = binary.AppendUvarint(idx, uint64(s.entries))
		prev = s.state
	}
	return idx
}

// encoder turns the entries of one key group at a time into the blocks of
// its sections. The sequential writer has one; the pipelined writer one
// per goroutine. Both produce the same blocks for the same view, because
// block boundaries depend only on the entries and the block size.
type encoder struct {
	ctx       context.Context
	blockSize int
	maxP      int
	// emit takes a finished block (header filled in) and returns the
	// buffer the next block is built in: the same one once it has been
	// written, or another.
	emit func(block []byte) ([]byte, error)

	// buf is the current block: blockHeaderSize bytes of room for the block
	// header, then the payload.
	buf []byte
	// entries counts the entries encoded, over every key group.
	entries int64

	// The state and key group being encoded, and the current section.
	spec       runtime.StateSpec
	hasUserKey bool
	kg         int
	secLen     int64
	secEntries int64
	// prevKey and prevNS alias the current block's last new key, so that
	// the entries of one (key, namespace) share it.
	havePrev        bool
	prevKey, prevNS []byte

	// add is e.add as a func value, made once rather than per Scan.
	addFn func(runtime.Entry) error
}

func newEncoder(ctx context.Context, blockSize, maxP int, emit func([]byte) ([]byte, error)) *encoder {
	e := &encoder{ctx: ctx, blockSize: blockSize, maxP: maxP, emit: emit}
	e.buf = newBlockBuffer(blockSize)
	e.addFn = e.add
	return e
}

// newBlockBuffer returns an empty block buffer with room for a block of
// blockSize bytes and the entry that overflows it, most of the time.
func newBlockBuffer(blockSize int) []byte {
	return make([]byte, blockHeaderSize, blockHeaderSize+blockSize+blockSize/8)
}

// encodeGroup scans every state of key group kg of v and encodes its
// sections, appending the non-empty ones to secs. It checks the context
// before each state and after each block.
func (e *encoder) encodeGroup(v runtime.View, specs []runtime.StateSpec, kg int, secs []sectionInfo) ([]sectionInfo, error) {
	e.kg = kg
	for i, s := range specs {
		if err := e.ctx.Err(); err != nil {
			return secs, err
		}
		e.spec, e.hasUserKey = s, s.Kind.HasUserKey()
		e.secLen, e.secEntries = 0, 0
		if err := v.Scan(s.Name, kg, e.addFn); err != nil {
			return secs, fmt.Errorf("checkpoint: write state %q, key group %d: %w", s.Name, kg, err)
		}
		if err := e.flushBlock(); err != nil {
			return secs, err
		}
		if e.secEntries > 0 {
			secs = append(secs, sectionInfo{i, e.secLen, e.secEntries})
		}
	}
	return secs, nil
}

// uvarintLen returns the length of the uvarint encoding of n.
func uvarintLen(n int) int {
	l := 1
	for ; n >= 0x80; n >>= 7 {
		l++
	}
	return l
}

// appendBytes appends b with a uvarint length prefix.
func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// add encodes one entry of the current section.
func (e *encoder) add(en runtime.Entry) error {
	if !e.spec.SubKeyed && len(en.Namespace) > 0 {
		return fmt.Errorf("%w: keyed state %q has an entry with namespace %x in key group %d",
			ErrInvalidView, e.spec.Name, en.Namespace, e.kg)
	}
	if !e.hasUserKey && len(en.UserKey) > 0 {
		return fmt.Errorf("%w: %v state %q has an entry with user key %x in key group %d",
			ErrInvalidView, e.spec.Kind, e.spec.Name, en.UserKey, e.kg)
	}
	// A Value state has one entry per (key, namespace): only lists and maps
	// repeat a key.
	same := e.spec.Kind != runtime.KindValue && e.havePrev &&
		bytes.Equal(en.Key, e.prevKey) && bytes.Equal(en.Namespace, e.prevNS)
	if !same {
		if g := e.keyGroup(en.Key); g != e.kg {
			return fmt.Errorf("%w: state %q: key %x scanned from key group %d belongs to key group %d",
				ErrInvalidView, e.spec.Name, en.Key, e.kg, g)
		}
	}
	// The entry's encoded size, without and with its key.
	tail := 1 + uvarintLen(len(en.Value)) + len(en.Value)
	if e.hasUserKey {
		tail += uvarintLen(len(en.UserKey)) + len(en.UserKey)
	}
	full := tail + uvarintLen(len(en.Key)) + len(en.Key)
	if e.spec.SubKeyed {
		full += uvarintLen(len(en.Namespace)) + len(en.Namespace)
	}
	need := full
	if same {
		need = tail
	}
	if len(e.buf) > blockHeaderSize && len(e.buf)+need > blockHeaderSize+e.blockSize {
		if err := e.flushBlock(); err != nil {
			return err
		}
		same, need = false, full
	}
	if need > MaxBlockSize {
		return fmt.Errorf("%w: state %q: an entry of key %.32x... in key group %d needs %d bytes, more than MaxBlockSize",
			ErrTooLarge, e.spec.Name, en.Key, e.kg, need)
	}
	b := e.buf
	if same {
		b = append(b, tagSameKey)
	} else {
		b = append(b, tagNewKey)
		b = binary.AppendUvarint(b, uint64(len(en.Key)))
		kStart := len(b)
		b = append(b, en.Key...)
		e.prevKey = b[kStart:len(b):len(b)]
		if e.spec.SubKeyed {
			b = binary.AppendUvarint(b, uint64(len(en.Namespace)))
			nStart := len(b)
			b = append(b, en.Namespace...)
			e.prevNS = b[nStart:len(b):len(b)]
		} else {
			e.prevNS = nil
		}
		e.havePrev = true
	}
	if e.hasUserKey {
		b = binary.AppendUvarint(b, uint64(len(en.UserKey)))
		b = append(b, en.UserKey...)
	}
	b = binary.AppendUvarint(b, uint64(len(en.Value)))
	b = append(b, en.Value...)
	e.buf = b
	e.secEntries++
	e.entries++
	return nil
}

// keyGroup returns runtime.KeyGroupOfHash(runtime.HashKey(key), maxP),
// with a mask instead of a division when maxP is a power of two (the
// default, 128): the check costs a hash, not a hash and a division.
func (e *encoder) keyGroup(key []byte) int {
	h := runtime.HashKey(key)
	if e.maxP&(e.maxP-1) == 0 {
		return int(h & uint64(e.maxP-1))
	}
	return runtime.KeyGroupOfHash(h, e.maxP)
}

// flushBlock finishes the current block, if it holds any entry, hands it
// to emit and starts a new one.
func (e *encoder) flushBlock() error {
	n := len(e.buf) - blockHeaderSize
	if n == 0 {
		return nil
	}
	binary.LittleEndian.PutUint32(e.buf[0:4], uint32(n))
	binary.LittleEndian.PutUint32(e.buf[4:8], blockCRC(e.buf[0:4], e.buf[blockHeaderSize:]))
	e.secLen += int64(len(e.buf))
	next, err := e.emit(e.buf)
	if err != nil {
		return err
	}
	e.buf = next[:blockHeaderSize]
	e.havePrev, e.prevKey, e.prevNS = false, nil, nil
	return e.ctx.Err()
}
