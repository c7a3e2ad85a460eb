// Package checkpoint is stategen's on-disk truth: the canonical checkpoint
// format, the storage it lives in, the writer that streams a store's
// snapshot into it in the background, and the reader that restores it into
// any backend — at the same or at a different parallelism.
//
// # Checkpoints, operators, instances, files
//
// A checkpoint is a set of immutable objects in a Storage under one name
// (such as CheckpointName(42), "chk-00000000000000000042"). Each operator
// instance writes the snapshot of its store — the key groups it owns — as
// one data file (WriteInstance, or the asynchronous runner SnapshotAsync).
// When every instance has written its file, the metadata object
// (MetadataName, "_metadata") is written last (Commit): it names every
// operator, its maxParallelism and key groups, every state's descriptor
// with its schema fingerprint, and every instance's file with its size,
// CRC32C, tag and entry count, plus the coordinator's checkpoint id, timestamp,
// properties and each instance's opaque operator-state blob (source
// positions). The checkpoint exists exactly when its metadata does, so a
// checkpoint of p instances is one committed unit: a crash before the
// metadata is committed leaves no checkpoint, only debris that Cleanup
// removes. The metadata is indented JSON for people to read:
//
//	{
//	  "formatVersion": 3,
//	  "checkpointId": 42,
//	  "timestamp": "2026-01-02T15:04:05Z",
//	  "operators": [{
//	    "id": "clicks",
//	    "maxParallelism": 128,
//	    "keyGroups": {"start": 0, "end": 128},
//	    "states": [{"name": "count", "kind": "value", "subKeyed": false, "fingerprint": "v1:6c6f…",
//	                "schema": "stategen/v1 value key=string value=int64"}],
//	                (a state with a TTL also has "ttlMillis": 1800000)
//	    "instances": [
//	      {"keyGroups": {"start": 0, "end": 64}, "states": ["count"],
//	       "file": {"name": "clicks-0.sgc", "size": 1043, "crc32c": "5b1e6c02", "tag": "9f3a0c11", "entries": 40},
//	       "operatorState": "AAAAAAAAAAo="},
//	      ...]
//	  }],
//	  "checksum": "0c1d3f6a"
//	}
//
// # Data file format, version 2
//
// A data file is key-group-major, in the spirit of Flink's canonical
// savepoint format: for each key group of the instance's range, in order,
// for each state, sorted by name, the state's entries in that key group —
// key, namespace (sub-keyed states only), user key (Map and SortedMap
// only) and value, as byte strings; a list yields one entry per element,
// consecutive and in list order. The entries of one (state, key group) form
// a section: a run of blocks, each beginning a new block, so that a reader
// seeks straight to any section. Empty sections take no space. Integers are
// little-endian; lengths are unsigned varints (encoding/binary.Uvarint),
// and every length is checked against the bytes that remain of its block
// before it is used, so no decoder allocates more than the file justifies.
//
//	file     = header block* indexBlock trailer
//
//	header (32 bytes)
//	  [0,8)    magic 89 'S' 'G' 'C' 'K' 'P' 'T' '\n'
//	  [8,12)   format version, uint32 = 2
//	  [12,16)  maxParallelism, uint32
//	  [16,20)  first key group, uint32
//	  [20,24)  end key group (exclusive), uint32
//	  [24,28)  file tag, uint32, random, never zero
//	  [28,32)  CRC32C of [0,28)
//
//	block (8+n bytes); a section is one or more blocks
//	  [0,4)    payload length n, uint32, 2 <= n <= MaxBlockSize
//	  [4,8)    CRC32C of [0,4) followed by the payload
//	  [8,8+n)  payload: entries, none split between blocks
//
//	entry (in a block payload)
//	  tag        byte: 0 = a new key follows; 1 = same key and namespace as
//	             the previous entry of this block (never a block's first)
//	  key        uvarint length, bytes              (tag 0)
//	  namespace  uvarint length, bytes              (tag 0, sub-keyed states)
//	  user key   uvarint length, bytes              (Map and SortedMap)
//	  value      uvarint length, bytes
//
//	indexBlock = a block whose payload is the index:
//	  uvarint state count S, then per state, sorted by name:
//	    name (uvarint length, bytes), kind byte (1 value, 2 list,
//	    3 map, 4 sortedmap),
//	    flags byte (bit 0: sub-keyed, bit 1: TTL), fingerprint (uvarint length, bytes),
//	    and with bit 1 the TTL in milliseconds (uvarint); the values of
//	    such a state start with an 8-byte big-endian stamp (runtime.TTL)
//	  uvarint key-group count G (= end - first), then per key group:
//	    uvarint section count, then per section, by state:
//	      uvarint state-index delta (index - previous index - 1),
//	      uvarint section length in bytes (block headers included),
//	      uvarint entry count
//
//	trailer (24 bytes, the file's last)
//	  [0,8)    offset of the index block, uint64
//	  [8,16)   length of the index block, header included, uint64
//	  [16,20)  CRC32C of [0,16)
//	  [20,24)  magic 'S' 'G' 'C' 'X'
//
// Section offsets are implicit: sections follow each other from offset 32
// in index order, and the reader checks that they end exactly where the
// index block begins, that blocks tile their section exactly and that a
// section holds the number of entries the index says. Every byte of a file
// is covered by a checksum — the header's, a block's, the index block's or
// the trailer's. CRC32C detects every error of up to 32 consecutive bits in
// the bytes it covers; a damaged length field changes which bytes are
// checked, and is caught by the tiling and count checks, or else by the
// checksum with probability 1-2⁻³². The tests flip every byte of small
// files and require every flip to be caught. The metadata adds the whole
// file's size, checked whenever a file is opened, and CRC32C, which
// Reader.Verify checks. Errors about bytes are *FileError values naming the
// object and offset (or the metadata field), and wrap ErrCorrupt — which
// also matches runtime.ErrCorrupt — or ErrUnsupportedVersion; a decoder
// never panics and never allocates more than the bytes it was given.
//
// The file tag is what tells a checkpoint's file from another's. The writer
// draws it from crypto/rand for each file, and the metadata records it
// beside the CRC32C; a reader that opens a file for a restore or a View
// checks the header's tag against the metadata's, and fails with a
// *FileError naming the file and the field
// (operators[i].instances[k].file.tag), wrapping ErrCorrupt, that says the
// file belongs to another checkpoint. Without it, a file of the same job's
// previous checkpoint swapped in under the same name — same size, key
// groups and states, same entry count, only other values — would restore
// silently with the wrong data: everything a restore reads of it is valid,
// and a restore reads only the header, the trailer, the index and the
// blocks of its key groups (a quarter of the file, for a new instance that
// owns a quarter of them). The whole file's CRC32C would tell, but only by
// reading every byte, which is Verify's job, not a restore's; and it cannot
// even see the header: a CRC run over bytes followed by their own CRC32C
// ends in a state that does not depend on them, so two files that differ
// only in their headers have the same CRC32C. The tag costs four bytes that
// the header already had, reserved, and no read beyond it. It guards
// against accidents — a copy, a restore from backup, a misconfigured path,
// a rewritten object — not against forgery, which the storage's access
// control must prevent. A file swapped in by mistake carries the tag of the
// file it replaces with probability 2⁻³², so 32 bits suffice: the chance
// that any of a thousand such swaps goes unnoticed is below one in four
// million. Zero is never drawn: it is the tag word of a version-1 file,
// which has no tag.
//
// Version 3 adds the writer's schema of every state to the metadata
// ("schema", the canonical schema string of package runtime/schema, when
// the state's descriptor has one; its fingerprint is the schema's hash),
// so that a restore can read the bytes of a state whose Go types have
// changed since (see "Schema evolution" below); its data files are version
// 2's but for the version field. Version 2 has no schemas; version 1
// differs from version 2 only in the header's version field and its word
// [24,28), which is reserved and zero, and in its metadata, whose
// "formatVersion" is 1 and whose files have no "tag". This package writes
// version 3 and reads all three, so existing checkpoints stay restorable
// (their states restore when their fingerprints match). A file's version
// must be its metadata's — a file of another version belongs to another
// checkpoint — and a version-2 or later metadata must record a non-zero
// tag for every file. Only Verify catches a same-shape swap of version-1
// files. Any other version fails with ErrUnsupportedVersion.
//
// The metadata carries a checksum too: "checksum" is the CRC32C of its
// canonical form (the compact JSON encoding, without HTML escaping, of the
// document with checksum empty), so it survives re-indentation but not a changed value. Parsing
// checks the version first, then the checksum, then every field: names are
// single path elements (no '/', '..' or NUL), so a metadata object cannot
// point outside its checkpoint; key-group ranges tile the operator's range;
// every state a file holds is described.
//
// The writer streams: it scans the snapshot section by section and holds a
// few blocks (DefaultBlockSize, 64 KiB) and the index — a few bytes per
// non-empty (key group, state) — in memory, never the entries. It checks
// the View contract as it goes (a key in the wrong key group, a namespace
// in a keyed state) and computes the file's CRC32C on the way out. Scanning
// and encoding are most of its work, and key groups are independent, so
// it is a pipeline (WriterOptions.Concurrency, by default one goroutine per
// core up to MaxDefaultConcurrency): encoding goroutines take key groups
// in order, scan them — runtime.View allows concurrent Scans of different
// key groups — and encode them into blocks, at most four blocks ahead per
// key group and one key group ahead per goroutine; the calling goroutine
// writes each key group's blocks in key-group order as they come,
// checksums the file and builds the index. The bytes are exactly those of
// the sequential writer (Concurrency 1), which block boundaries make easy:
// a block never spans two sections, so each key group's blocks depend on
// its entries alone. The first error of any key group — or a
// cancellation, or a failed write — stops every goroutine, and WriteFile
// returns only after they have ended.
//
// # Incremental checkpoints
//
// A Tracker wraps a store and records every change made through it — a
// put, a removal, a cleared (key, namespace), an appended list element, a
// key's every namespace deleted — as it is made, per state, in the order
// made, each with its key group: a changelog, in the spirit of Flink's
// FLIP-158, at the granularity of one entry (with uniform random updates
// every key group changes every interval, so key-group granularity would
// write it all). Recording is an append of the entry's bytes to one
// sequential log per state, in chunks that are never copied (one log per
// key group would be one stream of writes per key group, each write a
// cache miss); the write phase finds each key group's changes through an
// index it builds in one pass. The synchronous phase of a snapshot hands
// the changes so far to the snapshot and starts new ones, O(states), with
// no per-entry work. The chunks of changes that no one holds any more —
// the tracker dropped them when a later checkpoint completed, and every
// snapshot holding them was released — are recorded into again, so a job
// in a steady state of completing checkpoints records without allocating.
// WriteInstance writes a Tracker's snapshot as a file of changes
// (File.Delta) when the tracker has a base —
// the chain of the last checkpoint that Tracker.Completed reported — and
// in full otherwise. A file of changes is an ordinary data file: the same
// blocks, index, checksums and tag, whose entries are the changes since
// the base's snapshot (the changes of checkpoints that never completed
// included) and whose values begin with the operation. It is written in
// the background like any file, and costs bytes in proportion to what
// changed, not to the state.
//
// The metadata of an incremental checkpoint is version 4
// (IncrementalFormatVersion): an instance's "base" lists the files its
// "file" applies to, oldest first — a full file, then files of changes —
// each with the checkpoint that owns it ("checkpoint") and its size,
// CRC32C, tag and entry count, all of the instance's key groups:
//
//	"file": {"name": "clicks-0.sgc", ..., "delta": true},
//	"base": [{"name": "clicks-0.sgc", ..., "checkpoint": "chk-00000000000000000040"},
//	         {"name": "clicks-0.sgc", ..., "checkpoint": "chk-00000000000000000041", "delta": true}]
//
// The chain is flattened into every checkpoint's metadata, so a restore
// reads one metadata object, and a chain cannot loop: the checkpoint
// itself may not appear in it, nor any file twice. A chain is bounded
// (TrackOptions.MaxChainLength, DefaultMaxChainLength files); the
// checkpoint that would exceed it, or whose changes would outweigh the
// full file, or that follows a restore (what a restore loads is no
// change), or an overflow of TrackOptions.MaxChangeBytes, is written in
// full, which starts a new chain. A full checkpoint — a savepoint among
// them — references nothing and keeps format version 3.
//
// A restore reads a chain per (state, key group): the changes of that
// section in every file of changes, in order, into an overlay of what
// they leave of each (key, namespace) they touch, then the full file's
// section through the overlay — an entry replaced is passed, with its new
// value, in its old place, so a full file in key order stays in key order
// but for added entries — then what the overlay adds; memory is in
// proportion to the changes, and the full file is read once. The files
// of a chain are opened and checked against the metadata as any file is
// — size, version, tag, key groups, states, entry count — so a file
// missing, truncated or swapped for another checkpoint's fails the
// restore before the store changes, with a *FileError naming the file
// (its owner's path) and the checkpoint that references it. Portability
// is kept: a chain restores on any backend and at any parallelism, each
// new instance reading only the sections of the key groups it owns.
//
// Files are shared: a file stays in the checkpoint that wrote it, and
// Delete removes a checkpoint's metadata but keeps the files that another
// committed checkpoint references, until the last such checkpoint is
// deleted. What is referenced is decided from the metadata of the
// committed checkpoints alone, so it holds after a restart, on any
// Storage; Cleanup never removes a referenced file.
//
// # Local recovery
//
// A LocalCopy keeps a copy of the data files one instance writes on a
// storage of its own — a Dir on the instance's disk — and a restore
// through LocalCopy.Storage(remote) reads those files there instead of
// downloading them: all of them when the instance's key groups did not
// move, and otherwise the files of the old instance whose copy it has
// (Flink's local recovery, which Flink offers only at the same
// parallelism). The remote storage stays the truth: the metadata is read
// from it, a local write that fails (a full disk) costs the copy, never
// the checkpoint, and a copy is used only when its bytes match the CRC-32C
// recorded beside it and its size and header (with the write's random
// tag) match the remote object's; anything else — damaged, truncated,
// missing, or left from another job under the same names — is read
// remotely, and a bad copy removed. LocalCopy.Retain keeps the files of
// the last completed checkpoint's chain and drops the rest; the driver
// calls it on every completion (driver.InstanceOptions.LocalCopy).
//
// # Storage and the commit protocol
//
// Storage is an object store: objects are written once, become visible
// atomically when their writer commits, and are never renamed or changed.
// The checkpoint protocol lives in this package, above it: data objects
// first, the metadata object last. On a local directory (Dir) an object is
// written to a temporary file, fsynced, linked to its name (a link, unlike
// a rename, never replaces an object committed meanwhile) and its directory
// fsynced; so the metadata's commit is atomic and durable. On an object
// store (S3 and its kin) an object is a single PUT or a completed multipart
// upload, created with If-None-Match so it is never overwritten; it is
// visible in full or not at all, which is all the protocol needs — no
// rename, no listing consistency beyond read-after-write of one object.
// Delete removes the metadata first, so an interrupted delete leaves debris,
// never a committed checkpoint with missing files. Cleanup removes the
// debris of crashes: uncommitted writes, checkpoints without metadata, and
// files a committed checkpoint does not name. The conformance tests of
// package checkpoint/storagetest check any Storage.
//
// # Restoring and rescaling
//
// Open reads a checkpoint's metadata. A restore then reads only what it
// needs: Operator.Plan maps each of q new instances to the old instances'
// files that hold some of its key groups (operator i owns a contiguous
// range; see runtime.KeyGroupRangeForOperator), and Reader.Restore opens
// those files, reads each one's header, trailer and index, and hands
// Store.Restore a View of just the new instance's key groups in it; the
// View's Scan seeks to the section of one (state, key group) and reads its
// blocks, verifying each checksum. The blocks of a section of several are
// read and checked on a goroutine of the Scan's own, a couple of blocks
// ahead of the store decoding and inserting their entries
// (RestoreOptions.ReadAhead), so that reads overlap with inserts; the
// entries handed to the store point into pooled block buffers, never
// copied nor allocated one by one. The View also tells a store how many entries each
// section holds (View.Entries, from the index), so that it can size its
// tables before it loads them. A new instance that owns a quarter of
// the key groups reads about a quarter of the bytes (View.BytesRead counts
// them). Before any entry is read, Restore checks the maxParallelism, the
// schema fingerprint of every state the store registered (CheckStates,
// built on runtime.CheckSame), states the store does not know
// (UnknownStatePolicy: keep, drop or fail), and opens every file against
// the metadata, so a missing or truncated file, or a file of another
// checkpoint, fails the restore before the store changes. Every new
// instance also receives the operator-state blobs of all old instances.
//
// # Asynchronous snapshots
//
// SnapshotAsync runs a store's synchronous phase (Store.Snapshot) on the
// operator's goroutine and the write phase on a goroutine of its own; the
// AsyncSnapshot handle waits for or cancels it, and reports the sync and
// async durations and the bytes written. The snapshot is released in every
// outcome, and a cancelled or failed write leaves no object behind.
package checkpoint
