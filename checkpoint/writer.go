package checkpoint

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	goruntime "runtime"
	"slices"

	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storekit"
)

// WriterOptions tune the writer. The zero value, and a nil *WriterOptions,
// mean the defaults.
type WriterOptions struct {
	// BlockSize is the payload size at which a block is closed; zero means
	// DefaultBlockSize. Larger blocks cost fewer checksums and system calls;
	// the writer holds a few blocks in memory (see Concurrency). A block
	// may exceed it by one entry, and a single entry larger than BlockSize
	// gets a block of its own (up to MaxBlockSize).
	BlockSize int
	// Concurrency is how many key groups the writer scans and encodes at
	// once; zero means DefaultConcurrency. With 1 the calling goroutine
	// scans, encodes, checksums and writes in turn, holding one block.
	// With n > 1, n goroutines scan and encode key groups ahead of the
	// calling goroutine, which writes their blocks in key-group order and
	// checksums the file. The bytes are the same as with 1. At most n+1
	// key groups are in flight, each with at most 4 finished blocks
	// waiting to be written, so memory stays bounded by 5n+5 blocks
	// whatever the size of the state. The view's Scan is then called from
	// several goroutines at once, for different key groups, which
	// runtime.View allows. A job whose operators need every core while
	// checkpoints are written sets 1: the write takes longer, on one core.
	Concurrency int

	// tag, if not zero, is the file tag to write instead of a random one:
	// tests set it (SetFileTag) to pin a file's bytes.
	tag uint32
}

// DefaultConcurrency is the writer's concurrency when WriterOptions do not
// set one: GOMAXPROCS, at most MaxDefaultConcurrency.
func DefaultConcurrency() int { return min(goruntime.GOMAXPROCS(0), MaxDefaultConcurrency) }

// MaxDefaultConcurrency caps DefaultConcurrency: beyond a few goroutines
// a checkpoint write is bound by the storage, and the cores are better
// left to the operators.
const MaxDefaultConcurrency = 4

// MaxConcurrency bounds WriterOptions.Concurrency.
const MaxConcurrency = 256

func (o *WriterOptions) blockSize() (int, error) {
	if o == nil || o.BlockSize == 0 {
		return DefaultBlockSize, nil
	}
	if o.BlockSize < 1 || o.BlockSize > MaxBlockSize {
		return 0, fmt.Errorf("checkpoint: BlockSize %d is outside [1, %d]", o.BlockSize, MaxBlockSize)
	}
	return o.BlockSize, nil
}

func (o *WriterOptions) concurrency() (int, error) {
	if o == nil || o.Concurrency == 0 {
		return DefaultConcurrency(), nil
	}
	if o.Concurrency < 1 || o.Concurrency > MaxConcurrency {
		return 0, fmt.Errorf("checkpoint: Concurrency %d is outside [1, %d]", o.Concurrency, MaxConcurrency)
	}
	return o.Concurrency, nil
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
	// Base is the chain of earlier checkpoints' files that File, a file of
	// changes, applies to (see Instance.Base); empty for a full file.
	Base []FileRef
	// OperatorState is an opaque blob the participant attaches — typically
	// source positions — which the checkpoint stores and a restore hands
	// back to every new instance. The writer leaves it nil.
	OperatorState []byte
}

// WriteFile writes v to w as one data file of format version FormatVersion,
// with a random file tag of its own, and describes it (the tag included, in
// File.Tag). It streams: it reads v key group by key group, state by state, and
// holds a few blocks and the key-group index in memory, never the entries
// (see WriterOptions.Concurrency). It checks ctx between blocks and fails
// with ctx's error once ctx is done.
//
// WriteFile checks that v keeps the View contract (states sorted and valid,
// no namespace in a keyed state, no user key outside a map, every key in the
// key group it is scanned from) and fails with ErrInvalidView otherwise.
// With a concurrency above 1, the first error of any key group aborts the
// whole write and is returned; a panic in v's Scan on one of the writer's
// goroutines is recovered and returned as an error wrapping ErrPanic. W is
// written only from the calling goroutine, and WriteFile returns only once
// every goroutine it started has ended. After an error, what was written
// to w is garbage.
func WriteFile(ctx context.Context, w io.Writer, v runtime.View, opts *WriterOptions) (InstanceSnapshot, error) {
	bs, err := opts.blockSize()
	if err != nil {
		return InstanceSnapshot{}, err
	}
	conc, err := opts.concurrency()
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
	tag := newFileTag()
	if opts != nil && opts.tag != 0 {
		tag = opts.tag
	}
	fw := &fileWriter{blockSize: bs, maxP: maxP}
	fw.raw = writerFunc(fw.emitRaw(w))
	fw.out = bufio.NewWriterSize(fw.raw, outBufferSize)
	if err := fw.begin(kgs, specs, tag); err != nil {
		return InstanceSnapshot{}, err
	}
	if conc == 1 {
		err = fw.writeSequentially(ctx, v, kgs, specs)
	} else {
		err = fw.writePipelined(ctx, v, kgs, specs, conc)
	}
	if err != nil {
		return InstanceSnapshot{}, err
	}
	if err := fw.finish(); err != nil {
		return InstanceSnapshot{}, err
	}
	return InstanceSnapshot{
		MaxParallelism: maxP,
		KeyGroups:      kgs,
		States:         specs,
		File:           File{Size: fw.size, CRC32C: fw.crc, Tag: tag, Entries: fw.entries},
	}, nil
}

// outBufferSize is the size of the buffer small blocks are gathered in.
const outBufferSize = 256 << 10

// writerFunc adapts a function to io.Writer.
type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// fileWriter is the output side of one WriteFile: it writes the file's
// bytes in order, keeping its size and checksum, and builds the index. It
// is used by one goroutine, the caller's.
type fileWriter struct {
	raw       io.Writer     // the file, keeping size and checksum
	out       *bufio.Writer // buffers raw for small writes
	blockSize int
	maxP      int

	size    int64  // bytes written
	crc     uint32 // CRC32C of the bytes written
	entries int64  // entries written

	// index is the index payload built so far.
	index []byte
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

// begin writes the header, with the file's tag, and starts the index with
// the state table.
func (fw *fileWriter) begin(kgs runtime.KeyGroupRange, specs []runtime.StateSpec, tag uint32) error {
	hdr := appendHeader(nil, header{
		version:        FormatVersion,
		maxParallelism: uint32(fw.maxP),
		start:          uint32(kgs.Start),
		end:            uint32(kgs.End),
		tag:            tag,
	})
	if _, err := fw.out.Write(hdr); err != nil {
		return err
	}
	fw.index = binary.AppendUvarint(fw.index, uint64(len(specs)))
	for _, s := range specs {
		fw.index = appendBytes(fw.index, []byte(s.Name))
		fw.index = append(fw.index, storekit.KindCode(s.Kind))
		var flags byte
		if s.SubKeyed {
			flags |= stateFlagSubKeyed
		}
		if s.TTL != 0 {
			flags |= stateFlagTTL
		}
		fw.index = append(fw.index, flags)
		fw.index = appendBytes(fw.index, []byte(s.Fingerprint))
		if s.TTL != 0 {
			fw.index = binary.AppendUvarint(fw.index, uint64(s.TTL.Milliseconds()))
		}
	}
	fw.index = binary.AppendUvarint(fw.index, uint64(kgs.Len()))
	return nil
}

// writeBlock writes one finished block. A full block goes straight out,
// rather than through another copy in the buffer, which serves small
// blocks.
func (fw *fileWriter) writeBlock(b []byte) error {
	if len(b) >= fw.out.Size()/4 {
		if err := fw.out.Flush(); err != nil {
			return err
		}
		_, err := fw.raw.Write(b)
		return err
	}
	_, err := fw.out.Write(b)
	return err
}

// writeSequentially scans, encodes and writes every key group in turn on
// the calling goroutine.
func (fw *fileWriter) writeSequentially(ctx context.Context, v runtime.View, kgs runtime.KeyGroupRange, specs []runtime.StateSpec) error {
	enc := newEncoder(ctx, fw.blockSize, fw.maxP, func(b []byte) ([]byte, error) {
		return b, fw.writeBlock(b)
	})
	var secs []sectionInfo
	for kg := range kgs.All() {
		var err error
		if secs, err = enc.encodeGroup(v, specs, kg, secs[:0]); err != nil {
			return err
		}
		fw.index = appendGroupIndex(fw.index, secs)
	}
	fw.entries = enc.entries
	return nil
}

// finish writes the index block and the trailer, and flushes.
func (fw *fileWriter) finish() error {
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

// WriteInstance writes v as object name of checkpoint ckpt in s (see
// WriteFile) and commits the object — not the checkpoint, which Commit does
// once every instance has written its file. On any error, cancellation of
// ctx included, and on a panic, the partial object is aborted, so nothing
// remains of it. The returned snapshot's File.Name is name.
//
// The snapshot of a Tracker (*TrackedSnapshot) is written as a file of
// changes over its chain when it has one (File.Delta, Base set), in full
// otherwise, and the tracker learns which: once Tracker.Completed reports
// ckpt, that chain is the base of the next.
func WriteInstance(ctx context.Context, s Storage, ckpt, name string, v runtime.View, opts *WriterOptions) (snap InstanceSnapshot, err error) {
	if ts, ok := v.(*TrackedSnapshot); ok {
		return ts.write(ctx, s, ckpt, name, opts)
	}
	return writeInstance(ctx, s, ckpt, name, v, opts)
}

func writeInstance(ctx context.Context, s Storage, ckpt, name string, v runtime.View, opts *WriterOptions) (snap InstanceSnapshot, err error) {
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
