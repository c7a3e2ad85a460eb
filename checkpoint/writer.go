package checkpoint

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"slices"

	"github.com/stategen/stategen/runtime"
)

// WriterOptions tune the writer. The zero value, and a nil *WriterOptions,
// mean the defaults.
type WriterOptions struct {
	// BlockSize is the payload size at which a block is closed; zero means
	// DefaultBlockSize. Larger blocks cost fewer checksums and system calls;
	// the writer holds about one block in memory. A block may exceed it by
	// one entry, and a single entry larger than BlockSize gets a block of
	// its own (up to MaxBlockSize).
	BlockSize int
}

func (o *WriterOptions) blockSize() (int, error) {
	if o == nil || o.BlockSize == 0 {
		return DefaultBlockSize, nil
	}
	if o.BlockSize < 1 || o.BlockSize > MaxBlockSize {
		return 0, fmt.Errorf("checkpoint: BlockSize %d is outside [1, %d]", o.BlockSize, MaxBlockSize)
	}
	return o.BlockSize, nil
}

// InstanceSnapshot describes the data file that one operator instance wrote
// for a checkpoint: what WriteFile and WriteInstance return, what a
// participant acknowledges to the checkpoint coordinator, and what NewOperator
// assembles into the metadata of a checkpoint.
type InstanceSnapshot struct {
	// MaxParallelism is the view's maxParallelism.
	MaxParallelism int
	// KeyGroups is the view's key-group range.
	KeyGroups runtime.KeyGroupRange
	// States are the specs of the view's states, sorted by name, empty
	// states included.
	States []runtime.StateSpec
	// File describes the data file. WriteFile leaves its Name empty.
	File File
	// OperatorState is an opaque blob the participant attaches — typically
	// source positions — which the checkpoint stores and a restore hands
	// back to every new instance. The writer leaves it nil.
	OperatorState []byte
}

// WriteFile writes v to w as one data file of format version 1 and describes
// it. It streams: it reads v key group by key group, state by state, and
// holds one block and the key-group index in memory, never the entries. It
// checks ctx between blocks and fails with ctx's error once ctx is done.
//
// WriteFile checks that v keeps the View contract (states sorted and valid,
// no namespace in a keyed state, no user key outside a map, every key in the
// key group it is scanned from) and fails with ErrInvalidView otherwise.
// After an error, what was written to w is garbage.
func WriteFile(ctx context.Context, w io.Writer, v runtime.View, opts *WriterOptions) (InstanceSnapshot, error) {
	bs, err := opts.blockSize()
	if err != nil {
		return InstanceSnapshot{}, err
	}
	maxP := v.MaxParallelism()
	kgs := v.KeyGroups()
	if err := kgs.Validate(maxP); err != nil {
		return InstanceSnapshot{}, fmt.Errorf("%w: %w", ErrInvalidView, err)
	}
	specs := slices.Clone(v.States())
	for i, s := range specs {
		if err := s.Validate(); err != nil {
			return InstanceSnapshot{}, fmt.Errorf("%w: %w", ErrInvalidView, err)
		}
		if i > 0 && specs[i-1].Name >= s.Name {
			return InstanceSnapshot{}, fmt.Errorf("%w: States() is not sorted by name without duplicates: %q before %q",
				ErrInvalidView, specs[i-1].Name, s.Name)
		}
	}
	fw := &fileWriter{
		ctx:       ctx,
		blockSize: bs,
		maxP:      maxP,
	}
	fw.raw = writerFunc(fw.emitRaw(w))
	fw.out = bufio.NewWriterSize(fw.raw, 256<<10)
	snap := InstanceSnapshot{MaxParallelism: maxP, KeyGroups: kgs, States: specs}
	if err := fw.write(v, kgs, specs); err != nil {
		return InstanceSnapshot{}, err
	}
	snap.File = File{Size: fw.size, CRC32C: fw.crc, Entries: fw.entries}
	return snap, nil
}

// writerFunc adapts a function to io.Writer.
type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// fileWriter is the state of one WriteFile.
type fileWriter struct {
	ctx       context.Context
	raw       io.Writer     // the file, keeping size and checksum
	out       *bufio.Writer // buffers raw for small writes
	blockSize int
	maxP      int

	size    int64  // bytes written
	crc     uint32 // CRC32C of the bytes written
	entries int64  // entries written

	// buf is the current block: blockHeaderSize bytes of room for the block
	// header, then the payload.
	buf []byte
	// index is the index payload built so far.
	index []byte

	// The state and key group being written, and the current section.
	spec       runtime.StateSpec
	hasUserKey bool
	kg         int
	secLen     int64
	secEntries int64
	// prevKey and prevNS alias the current block's last new key, so that
	// the entries of one (key, namespace) share it.
	havePrev        bool
	prevKey, prevNS []byte
}

// emitRaw returns the function behind fw.out: it writes to w and keeps the
// size and checksum of the file.
func (fw *fileWriter) emitRaw(w io.Writer) func([]byte) (int, error) {
	return func(p []byte) (int, error) {
		n, err := w.Write(p)
		fw.crc = crc32.Update(fw.crc, castagnoli, p[:n])
		fw.size += int64(n)
		return n, err
	}
}

func (fw *fileWriter) write(v runtime.View, kgs runtime.KeyGroupRange, specs []runtime.StateSpec) error {
	hdr := appendHeader(nil, header{
		version:        FormatVersion,
		maxParallelism: uint32(fw.maxP),
		start:          uint32(kgs.Start),
		end:            uint32(kgs.End),
	})
	if _, err := fw.out.Write(hdr); err != nil {
		return err
	}
	// The index begins with the state table.
	fw.index = binary.AppendUvarint(fw.index, uint64(len(specs)))
	for _, s := range specs {
		fw.index = appendBytes(fw.index, []byte(s.Name))
		fw.index = append(fw.index, kindCode(s.Kind))
		var flags byte
		if s.SubKeyed {
			flags |= stateFlagSubKeyed
		}
		fw.index = append(fw.index, flags)
		fw.index = appendBytes(fw.index, []byte(s.Fingerprint))
	}
	fw.index = binary.AppendUvarint(fw.index, uint64(kgs.Len()))
	fw.buf = make([]byte, blockHeaderSize, blockHeaderSize+fw.blockSize+fw.blockSize/8)

	type section struct {
		state           int
		length, entries int64
	}
	var secs []section
	scan := func(e runtime.Entry) error { return fw.add(e) }
	for kg := range kgs.All() {
		secs = secs[:0]
		fw.kg = kg
		for i, s := range specs {
			if err := fw.ctx.Err(); err != nil {
				return err
			}
			fw.spec, fw.hasUserKey = s, s.Kind.HasUserKey()
			fw.secLen, fw.secEntries = 0, 0
			if err := v.Scan(s.Name, kg, scan); err != nil {
				return fmt.Errorf("checkpoint: write state %q, key group %d: %w", s.Name, kg, err)
			}
			if err := fw.flushBlock(); err != nil {
				return err
			}
			if fw.secEntries > 0 {
				secs = append(secs, section{i, fw.secLen, fw.secEntries})
			}
		}
		fw.index = binary.AppendUvarint(fw.index, uint64(len(secs)))
		prev := -1
		for _, s := range secs {
			fw.index = binary.AppendUvarint(fw.index, uint64(s.state-prev-1))
			fw.index = binary.AppendUvarint(fw.index, uint64(s.length))
			fw.index = binary.AppendUvarint(fw.index, uint64(s.entries))
			prev = s.state
		}
	}
	if len(fw.index) > MaxBlockSize {
		return fmt.Errorf("%w: the key-group index is %d bytes, more than MaxBlockSize", ErrTooLarge, len(fw.index))
	}
	indexOff := fw.size + int64(fw.out.Buffered())
	var lenField [4]byte
	binary.LittleEndian.PutUint32(lenField[:], uint32(len(fw.index)))
	blk := append(lenField[:], 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(blk[4:], blockCRC(lenField[:], fw.index))
	if _, err := fw.out.Write(blk); err != nil {
		return err
	}
	if _, err := fw.out.Write(fw.index); err != nil {
		return err
	}
	tr := appendTrailer(nil, uint64(indexOff), uint64(blockHeaderSize+len(fw.index)))
	if _, err := fw.out.Write(tr); err != nil {
		return err
	}
	return fw.out.Flush()
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
func (fw *fileWriter) add(e runtime.Entry) error {
	if !fw.spec.SubKeyed && len(e.Namespace) > 0 {
		return fmt.Errorf("%w: keyed state %q has an entry with namespace %x in key group %d",
			ErrInvalidView, fw.spec.Name, e.Namespace, fw.kg)
	}
	if !fw.hasUserKey && len(e.UserKey) > 0 {
		return fmt.Errorf("%w: %v state %q has an entry with user key %x in key group %d",
			ErrInvalidView, fw.spec.Kind, fw.spec.Name, e.UserKey, fw.kg)
	}
	// A Value state has one entry per (key, namespace): only lists and maps
	// repeat a key.
	same := fw.spec.Kind != runtime.KindValue && fw.havePrev &&
		bytes.Equal(e.Key, fw.prevKey) && bytes.Equal(e.Namespace, fw.prevNS)
	if !same {
		if g := fw.keyGroup(e.Key); g != fw.kg {
			return fmt.Errorf("%w: state %q: key %x scanned from key group %d belongs to key group %d",
				ErrInvalidView, fw.spec.Name, e.Key, fw.kg, g)
		}
	}
	// The entry's encoded size, without and with its key.
	tail := 1 + uvarintLen(len(e.Value)) + len(e.Value)
	if fw.hasUserKey {
		tail += uvarintLen(len(e.UserKey)) + len(e.UserKey)
	}
	full := tail + uvarintLen(len(e.Key)) + len(e.Key)
	if fw.spec.SubKeyed {
		full += uvarintLen(len(e.Namespace)) + len(e.Namespace)
	}
	need := full
	if same {
		need = tail
	}
	if len(fw.buf) > blockHeaderSize && len(fw.buf)+need > blockHeaderSize+fw.blockSize {
		if err := fw.flushBlock(); err != nil {
			return err
		}
		same, need = false, full
	}
	if need > MaxBlockSize {
		return fmt.Errorf("%w: state %q: an entry of key %.32x... in key group %d needs %d bytes, more than MaxBlockSize",
			ErrTooLarge, fw.spec.Name, e.Key, fw.kg, need)
	}
	b := fw.buf
	if same {
		b = append(b, tagSameKey)
	} else {
		b = append(b, tagNewKey)
		b = binary.AppendUvarint(b, uint64(len(e.Key)))
		kStart := len(b)
		b = append(b, e.Key...)
		fw.prevKey = b[kStart:len(b):len(b)]
		if fw.spec.SubKeyed {
			b = binary.AppendUvarint(b, uint64(len(e.Namespace)))
			nStart := len(b)
			b = append(b, e.Namespace...)
			fw.prevNS = b[nStart:len(b):len(b)]
		} else {
			fw.prevNS = nil
		}
		fw.havePrev = true
	}
	if fw.hasUserKey {
		b = binary.AppendUvarint(b, uint64(len(e.UserKey)))
		b = append(b, e.UserKey...)
	}
	b = binary.AppendUvarint(b, uint64(len(e.Value)))
	b = append(b, e.Value...)
	fw.buf = b
	fw.secEntries++
	fw.entries++
	return nil
}

// keyGroup returns runtime.KeyGroupOfHash(runtime.HashKey(key), maxP),
// with a mask instead of a division when maxP is a power of two (the
// default, 128): the check costs a hash, not a hash and a division.
func (fw *fileWriter) keyGroup(key []byte) int {
	h := runtime.HashKey(key)
	if fw.maxP&(fw.maxP-1) == 0 {
		return int(h & uint64(fw.maxP-1))
	}
	return runtime.KeyGroupOfHash(h, fw.maxP)
}

// flushBlock writes the current block, if it holds any entry, and starts a
// new one.
func (fw *fileWriter) flushBlock() error {
	n := len(fw.buf) - blockHeaderSize
	if n == 0 {
		return nil
	}
	binary.LittleEndian.PutUint32(fw.buf[0:4], uint32(n))
	binary.LittleEndian.PutUint32(fw.buf[4:8], blockCRC(fw.buf[0:4], fw.buf[blockHeaderSize:]))
	// A full block goes straight out, rather than through another copy in
	// the buffer, which serves small blocks.
	if len(fw.buf) >= fw.out.Size()/4 {
		if err := fw.out.Flush(); err != nil {
			return err
		}
		if _, err := fw.raw.Write(fw.buf); err != nil {
			return err
		}
	} else if _, err := fw.out.Write(fw.buf); err != nil {
		return err
	}
	fw.secLen += int64(len(fw.buf))
	fw.buf = fw.buf[:blockHeaderSize]
	fw.havePrev, fw.prevKey, fw.prevNS = false, nil, nil
	return fw.ctx.Err()
}

// WriteInstance writes v as object name of checkpoint ckpt in s (see
// WriteFile) and commits the object — not the checkpoint, which Commit does
// once every instance has written its file. On any error, cancellation of
// ctx included, and on a panic, the partial object is aborted, so nothing
// remains of it. The returned snapshot's File.Name is name.
func WriteInstance(ctx context.Context, s Storage, ckpt, name string, v runtime.View, opts *WriterOptions) (snap InstanceSnapshot, err error) {
	if name == MetadataName {
		return InstanceSnapshot{}, fmt.Errorf("%w: %q is reserved for the metadata", ErrInvalidName, name)
	}
	w, err := s.Create(ctx, ckpt, name)
	if err != nil {
		return InstanceSnapshot{}, err
	}
	committed := false
	defer func() {
		if !committed {
			_ = w.Abort()
		}
	}()
	snap, err = WriteFile(ctx, w, v, opts)
	if err != nil {
		return InstanceSnapshot{}, fmt.Errorf("checkpoint: writing %s/%s: %w", ckpt, name, err)
	}
	if err := w.Commit(); err != nil {
		return InstanceSnapshot{}, fmt.Errorf("checkpoint: committing %s/%s: %w", ckpt, name, err)
	}
	committed = true
	snap.File.Name = name
	return snap, nil
}
