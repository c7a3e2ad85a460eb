package checkpoint

import (
	"crypto/rand"
	"encoding/binary"
	"hash/crc32"
)

// FormatVersion is the version of the data-file and metadata format this
// package writes. It reads it and every earlier version, back to
// minFormatVersion.
const FormatVersion = 3

// IncrementalFormatVersion is the metadata version of an incremental
// checkpoint: one whose instances reference files of earlier checkpoints
// (Instance.Base) or whose files hold changes (File.Delta). Its data files
// are FormatVersion's. A checkpoint without either is written as
// FormatVersion, so that readers of that version keep reading it, and a
// reader that does not know version 4 refuses an incremental checkpoint
// instead of restoring only its changes.
const IncrementalFormatVersion = 4

// maxFormatVersion is the newest metadata version this package reads.
const maxFormatVersion = IncrementalFormatVersion

// dataVersion returns the data-file version of a metadata version.
func dataVersion(metaVersion int) int {
	if metaVersion == IncrementalFormatVersion {
		return FormatVersion
	}
	return metaVersion
}

// minFormatVersion is the oldest format version this package reads:
// version 1, whose files carry no tag (see the package doc).
const minFormatVersion = 1

// DefaultBlockSize is the payload size at which the writer closes a block,
// unless WriterOptions.BlockSize says otherwise.
const DefaultBlockSize = 64 << 10

// MaxBlockSize bounds the payload of a block, and so the encoded size of
// one entry: a block holds at least one entry whole.
const MaxBlockSize = 1 << 30

// MaxMetadataSize bounds the size of a metadata object.
const MaxMetadataSize = 64 << 20

// Sizes of the fixed parts of a data file (see the package doc).
const (
	headerSize      = 32
	blockHeaderSize = 8
	trailerSize     = 24
	// minIndexPayload is the smallest index payload: a state count and a
	// key-group count of one byte each.
	minIndexPayload = 2
	// minFileSize is the size of a data file with no state.
	minFileSize = headerSize + blockHeaderSize + minIndexPayload + trailerSize
	// minEntrySize is the smallest encoded entry: a tag and an empty value
	// (keys are never empty, but the format does not rely on it).
	minEntrySize = 2
)

// headerMagic begins every data file. The high first byte catches 7-bit
// transports; the newline catches newline translation.
var headerMagic = [8]byte{0x89, 'S', 'G', 'C', 'K', 'P', 'T', '\n'}

// trailerMagic ends every data file: a file that does not end with it was
// truncated or is not a data file.
var trailerMagic = [4]byte{'S', 'G', 'C', 'X'}

// Entry tags: the first byte of every entry in a block.
const (
	tagNewKey  = 0 // key (and namespace) follow
	tagSameKey = 1 // same key and namespace as the previous entry of the block
)

// The kind codes of the index's state table are storekit.KindCode's,
// fixed by version 1 (and pinned by the golden files), not runtime.Kind's
// numbering.

// Flags of a state in the index's state table.
//
// A state with stateFlagTTL has a TTL (runtime.StateSpec.TTL): its values
// carry a stamp (runtime.TTLStampLen), and its fingerprint is followed by
// the TTL in milliseconds, a uvarint. Files without such states are the bytes
// they were before the flag existed; a reader that does not know it
// refuses a file that has it (unknown flags).
const (
	stateFlagSubKeyed = 1 << 0
	stateFlagTTL      = 1 << 1
	stateFlagsKnown   = stateFlagSubKeyed | stateFlagTTL
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// newFileTag returns a random file tag: 32 bits from crypto/rand, never
// zero (zero marks a version-1 file, which has none).
func newFileTag() uint32 {
	var b [4]byte
	for {
		rand.Read(b[:]) // never fails (see crypto/rand.Read)
		if t := binary.LittleEndian.Uint32(b[:]); t != 0 {
			return t
		}
	}
}

// blockCRC returns the checksum of a block: CRC32C over its 4-byte length
// field and its payload, so that a damaged length is caught too.
func blockCRC(lenField, payload []byte) uint32 {
	return crc32.Update(crc32.Update(0, castagnoli, lenField), castagnoli, payload)
}

// header is the fixed header of a data file.
type header struct {
	version        uint32
	maxParallelism uint32
	start, end     uint32
	// tag is the file's random tag (version 2); zero in version 1.
	tag uint32
}

// appendHeader appends the 32-byte header:
//
//	[0,8)   magic
//	[8,12)  format version, uint32 little-endian
//	[12,16) maxParallelism
//	[16,20) first key group
//	[20,24) end key group (exclusive)
//	[24,28) file tag, uint32 (version 2; zero in version 1)
//	[28,32) CRC32C of bytes [0,28)
func appendHeader(dst []byte, h header) []byte {
	start := len(dst)
	dst = append(dst, headerMagic[:]...)
	dst = binary.LittleEndian.AppendUint32(dst, h.version)
	dst = binary.LittleEndian.AppendUint32(dst, h.maxParallelism)
	dst = binary.LittleEndian.AppendUint32(dst, h.start)
	dst = binary.LittleEndian.AppendUint32(dst, h.end)
	dst = binary.LittleEndian.AppendUint32(dst, h.tag)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// appendTrailer appends the 24-byte trailer:
//
//	[0,8)   offset of the index block, uint64 little-endian
//	[8,16)  length of the index block, header included
//	[16,20) CRC32C of bytes [0,16)
//	[20,24) trailer magic
func appendTrailer(dst []byte, indexOff, indexLen uint64) []byte {
	start := len(dst)
	dst = binary.LittleEndian.AppendUint64(dst, indexOff)
	dst = binary.LittleEndian.AppendUint64(dst, indexLen)
	dst = binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
	return append(dst, trailerMagic[:]...)
}
