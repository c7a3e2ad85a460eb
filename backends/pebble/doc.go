// Package pebble is the on-disk state backend: a runtime.Store on
// CockroachDB's Pebble (github.com/cockroachdb/pebble/v2), for keyed state
// larger than memory — the role Flink's RocksDB backend plays. Memory is
// bounded by the block cache and the memtables, point reads and range
// scans stay fast, and snapshots are Pebble snapshots: the synchronous
// phase of a checkpoint costs microseconds whatever the size of the state.
//
// # When to pick it
//
// Pick pebble when the state does not fit in memory, or when its memory
// must be bounded (many operators per process, containers with hard
// limits), or when a restart should not pay for holding everything on the
// Go heap. Pick cow (the default) when the state fits in memory: its point
// operations are an order of magnitude faster (hundreds of nanoseconds
// against microseconds: every pebble write ends up in a memtable's
// skiplist and every read that misses it in an LSM lookup) and it does
// no I/O. Pick btree for
// in-memory state read in key order. All three pass the same conformance
// suite and read and write the same checkpoints, so switching is one line
// and a checkpoint taken on one restores on another.
//
// # Key layout
//
// All states live in one Pebble database, in one key space:
//
//	| field              | bytes                      | contiguous span it makes               |
//	|--------------------|----------------------------|----------------------------------------|
//	| key group          | 2, big-endian (< 0x8000)   | a key group (of every state)           |
//	| state id           | uvarint                    | a state in a key group (Scan, Restore) |
//	| key                | framed (9 bytes per 8)     | every namespace of a key (DeleteAll)   |
//	| namespace          | framed; sub-keyed only     | one (key, namespace): a value, a list, |
//	|                    |                            | a whole map (Clear)                    |
//	| user key           | bytes, to the end          | a SortedMap range [lo, hi)             |
//
// Values, and lists, have no user key; keyed states, whose namespace is
// always empty, have no namespace field. Metadata sorts after all data,
// under the prefix 0xff (no key group starts with it): 0xff 'c' holds the
// layout version, maxParallelism and key-group range, 0xff 's' + uvarint
// id holds the spec of state id (its kind as storekit.KindCode, never
// runtime.Kind's numbering). State ids are assigned by Register (and by
// Restore for new states) in order and recorded with their specs, so a
// reused directory (see below) knows its states; two bytes of prefix per
// entry instead of the state's name. layout_test.go pins every byte.
//
// The key and namespace are framed as package storekit lays out sorted
// keys (shared with backends/btree): cut into groups of 8 bytes, the last
// padded with zeros, each followed by a marker byte (the group's length in
// the field, or 9 if the field goes on). The store must split a key back
// into key, namespace and user key for Scan and Namespaces without knowing
// the codecs, and the framing makes every span above exact for any bytes
// while keeping bytewise order across lengths: keys and namespaces come
// out in encoded order, the order of their values. (A length prefix,
// which version 1 of the layout used, sorts by length first.) An 8-byte
// key, an int64, takes 9 bytes, as a length prefix would. The user key,
// last, is not framed, so entries of a map sort by user key and Range is
// one bounded iterator. Every iteration (Iterate, Range, Namespaces, Scan,
// the restore conflict check) uses an iterator bounded to its span, so
// Pebble never reads past it.
//
// # Lists
//
// A list is one key whose value is its elements, each preceded by its
// length as a uvarint. Add and AddAll write the new elements, encoded the
// same way, as a Pebble merge operand: a blind write, no read. The merge
// operator ("stategen.list.v1", recorded by Pebble in the directory)
// concatenates operands, so a read — List Get, a snapshot Scan — gets the
// folded list from one point lookup, and compactions fold operands for
// good. Update is a Set (which hides older operands), an empty Update or
// Clear a Delete.
//
// The alternative, one Pebble key per element (the entry key followed by
// a sequence number), was measured with raw Pebble on the same options
// (BenchmarkListLayout in this package, 100K lists, 24-byte elements):
//
//	op                      merge     per element
//	Add (random key)        4.8 µs    27.6 µs   (a reverse seek for the last sequence number, then a Set)
//	Get (4-element list)    12-19 µs  6.9 µs    (the merge read descends every level holding an operand)
//
// Lists are written far more often than read (a window's elements are
// added one by one and read once, when it fires): four Adds and one Get
// cost ~35 µs with the merge operator against ~117 µs with a key per
// element, and the merge operator keeps a list one key for Scan, Clear and
// Namespaces. A list read right after many Adds is the merge operator's
// weak case, until a compaction folds the operands.
//
// # Deletions
//
// Clear of a map and DeleteAll of a key read the keys of their span and
// delete them one by one if there are at most 1,024, else the whole span
// with one range deletion (DeleteRange); a value or a list is one key,
// deleted with a point Delete. A reused directory whose store now owns
// fewer key groups drops the others with at most two range deletions (key
// groups lead the layout), as a rescaled Flink job clips a reused RocksDB
// instance. A range deletion is a tombstone that reads overlapping it
// consult until a compaction drops it: cheap to write, not free to read
// past — while the memtable holds one, every Get and iterator allocates a
// tombstone iterator for it (Pebble's memTable.newRangeDelIter). Nexmark's
// q5 clears a window's map of ~1,000 counts every 5 s of event time: with
// a range deletion per Clear, the five queries allocated 1.6 objects per
// event, 1.4 of them those iterators; deleted entry by entry, 0.4.
//
// # Write batching
//
// Under SyncNone (the default, no write-ahead log) the store does not
// commit its writes one by one: every Put, Add, Delete, Clear and
// DeleteAll goes into one pending batch, and the batch is committed
// — applied to the memtable in one step through Pebble's commit pipeline
// — when
//
//   - it reaches Options.BatchSize (default a quarter of MemTableSize:
//     2 MiB), counted in bytes of memtable: a write's key and value and
//     the ~200 bytes of skiplist node Pebble charges it; a single entry
//     larger than that is committed on its own, so that every commit is
//     applied to the memtable rather than becoming a memtable of its own
//     (Pebble's large-batch path, above half a memtable);
//   - it holds 32 range deletions (see below);
//   - 16 reads come in a row with no write between them: a read-mostly
//     phase then reads the database alone;
//   - an iteration (Iterate, Range, Namespaces, Keys, a timer's Advance)
//     starts while it holds 128 writes or more, which it would otherwise
//     index, or whose successors would go into the indexed batch (see
//     below): indexing a write costs about what its insertion into the
//     memtable does, which the commit makes in its place
//     (Nexmark q5, whose windows fire an iteration each thousands of
//     writes apart, ran 25% faster, the five queries 16%: p=0.002 and
//     0.004, -count 6 interleaved, load average 0.8 to 1.0; a job that
//     iterates at every event still indexes its few pending writes);
//   - Snapshot is called: a snapshot holds every write made before it, and
//     none made after;
//   - Restore is called: its checks and loads work on the database;
//   - Close is called, if the directory is kept (a directory Close
//     removes needs no commit).
//
// Every read sees the pending writes, so the semantics are those of a
// commit per write. A point read (Get, Contains, List Get) of a key the
// key filter (below) knows absent answers "not found" at once; any other
// first asks the store's own index of the pending batch — a hash of each
// key to where the batch holds its last write, and the batch's range
// deletions: a key the batch does not touch is read from the database
// directly, the value of a pending Set is read from the batch's bytes, a
// pending Delete or a range deletion covering the key answers "not
// found", and only a key whose last pending write is a merge operand (a
// list's Add) is read through the batch, which folds it with the
// database's value. (Pebble's own
// Batch.Get builds iterators over the batch for every lookup: two
// allocations, and a merge of the batch into the LSM lookup, even for
// keys the batch does not hold.) A commit keeps that index, and a copy of
// the batch's bytes, as a committed batch; the store keeps the last four,
// which answer, newest first, the point reads of the keys they wrote
// that the pending batch does not touch: what the newest of them wrote
// last of a key is what the database holds, until a write reaches the
// database outside the pending batch (an entry larger than a batch,
// Restore), which forgets them. A job reads again what it wrote a moment
// ago, and such a read then costs a hash lookup rather than a search of
// Pebble's memtables: Nexmark's q11, which reads and writes a bidder's
// sessions at each of its bids, ran 23% faster with one batch kept (11%
// with a checkpoint a second; -count 12 interleaved, p=0.002 and 0.012).
// The five queries in one pass fill batches five times as fast: four
// batches kept answer 54,000 of their 109,000 point reads, one 31,000.
//
// Iterations (Iterate, Range, Namespaces, Keys) over fewer than 128
// pending writes open their iterator on the batch, which overlays the
// pending writes on the database: that takes a Pebble indexed batch,
// which inserts every write into a skiplist of its own. The writes go
// into a plain batch, which Pebble does not index, and the first read
// that must go through the batch (an iterator, or a list with pending
// operands) copies them into an indexed batch, which takes the writes
// that follow until the commit; so a phase of writes alone never pays for
// the index (a fifth of a Put), and one of reads and writes pays it once
// per write and one copy of the batch's bytes per commit. An indexed batch
// fragments its range deletions again on the first read after each new
// one, in time linear in their number, which is why a batch is committed
// at 32 of them.
//
// The win is the commit pipeline's fixed cost per write and the
// allocations of the writes: a Put costs 0.84× raw Pebble's (one commit
// per Set) on the same options at 1M keys (BenchmarkValuePut, an A/B run
// of -count 6 at load 1.4). A write pays its memtable insertion at
// commit, unless a later Set or Delete of the same key in the batch
// supersedes it: the store's index of the pending batch knows each key's
// last write, and a commit of a batch whose writes outnumber its keys by
// a third or more leaves the superseded ones out (write combining; range
// deletions, and the writes a merge operand folds, stay, in order). A
// stream job writes its hot keys again and again — a count per window,
// a bidder's sessions — and so inserts, flushes and compacts each of
// them once per commit instead of once per write: Nexmark's five queries
// ran 23% faster (30% with a checkpoint a second) and allocated 44% less
// (-count 6 interleaved, load average 0.9 to 1.2). With a write-ahead log
// (SyncWAL, SyncAlways) every write is committed on its own, as before: a
// write the caller saw succeed must be in the log.
//
// Before any of that, a Value or Map Get compares its key with the
// state's last key: the key of the state's last point read or write, whose
// value (up to 4 KiB) or absence the state keeps. Every write of the
// state's keys goes through the state, which keeps it true, and Restore,
// which loads around it, makes every state forget it. A windowed job
// reads its window's key at every event and writes it now and then (q7's
// highest price per window): such a read costs a comparison instead of a
// lookup in the pending batch's index and a Pebble Get (~0.4µs for a key in
// the memtable). Nexmark q7 ran 84% faster and the five queries 12%
// faster (p=0.002 and 0.041, -count 6 interleaved, load average 1.1 to
// 1.2); Gets of random keys, which miss it, did not change against raw
// Pebble. Value and Map Update (runtime.ValueUpdater, MapUpdater) are such
// a read and a write of one key, encoded and checked once; the old value
// is copied before the callback runs, since the callback may read the
// store and so change a state's last key.
//
// # The key filter
//
// A job that creates state reads absent keys all the time — the first
// count of an auction in a window, a bidder's first session — and Pebble
// answers such a read only after searching every memtable and probing
// the bloom filter of every level's tables. The store keeps a Bloom
// filter of its own, of every key it may have written to the database (a
// superset: writes and restored entries add their keys before they reach
// the database, deletions remove none), and answers a point read of a
// key the filter does not hold with "not found" at the cost of a hash
// lookup. The filter starts at 8 KiB; after the commit (or the Restore)
// that finds it outgrown it is rebuilt from a scan of the database's
// keys, which counts them and keeps their hashes, for four times as many
// keys (10 bits a key, about 1% false positives at that load), and it is
// turned off past Options.KeyFilterSize (16 MiB: the filter of up to 3.3
// million live keys); a store opened on an existing directory builds its
// first from its database, in the background, asking Pebble until then.
// A rebuild comes after three times the live keys were added since the
// last. It scans a Pebble snapshot on a goroutine of its own while the
// old filter, which still holds every key, keeps answering and logs the
// keys added meanwhile; the first commit after the scans takes the new
// filter with the logged keys (a Restore, which the caller waits for
// anyway, rebuilds before it returns). Filling a new store with 1M keys,
// one Put each, its longest Put took 332 ms while rebuilds paused the
// operator, 30 ms since (-91%), and the fill 21% less time (p=0.028,
// 8 interleaved runs, load 1.2-1.4; BenchmarkFillPause).
// Of the point reads Nexmark's five queries leave to Pebble, 81% are of
// absent keys; the filter made a pass 21% shorter (q5, 94% absent: 18%),
// p=0.010 and 0.038, 8 interleaved runs on an AMD EPYC, load 1.1-1.2;
// rebuilding it for four times the live keys rather than twice made a
// pass 17% shorter again (p=0.041, 6 interleaved runs).
//
// # Snapshots
//
// Snapshot, the synchronous phase of a checkpoint, commits the pending
// batch (at most BatchSize of writes, so O(1) in the size of the state)
// and takes a Pebble snapshot
// (DB.NewSnapshot: a sequence number registered with the database, O(1))
// and copies the list of states: ~2.5 µs at 1M entries
// (BenchmarkSnapshotSync/backend=pebble in benchmarks/). The snapshot is an immutable view that
// any goroutine may Scan while the operator writes: Scan reads one
// (state, key group) span with a bounded iterator on the Pebble snapshot,
// in key order, list elements folded and consecutive. Several snapshots
// may be live and read at once; Pebble keeps the versions they can see
// until they are released, which is why a leaked snapshot costs disk space
// and compaction work (Store.LiveSnapshots counts the unreleased ones, and
// a snapshot collected unreleased is released and reported through
// Options.OnLeakedSnapshot).
//
// An eventually-file-only snapshot (EFOS) would let Pebble drop the
// snapshot's pinned versions sooner, at the price of a memtable flush when
// it becomes file-only; its synchronous cost is the same O(1), and a
// checkpoint's scan is short-lived, so the plain snapshot is used.
//
// Release may come from any goroutine, also during a Scan, which then stops
// with runtime.ErrReleased; the Pebble snapshot is closed when the last
// running Scan ends. The store and its snapshots share the database with a
// reference count: Close closes the store at once (every method then
// returns runtime.ErrClosed) and the database when the last snapshot is
// released, so live snapshots stay readable after Close, as the Store
// contract requires, and Pebble never closes under an open iterator.
//
// # Restore
//
// Restore commits the pending batch, then first checks every state of
// the view: a state registered with
// another spec fails with runtime.ErrStateMismatch, and a state that
// already has an entry in a key group being loaded fails with
// runtime.ErrRestoreConflict — one seek per (state, key group), in an
// iterator bounded to that span. It then writes only the key groups that
// both the view and the store own, state by state, in batches of its own
// (a restore reads nothing back, so they need no index), each committed
// at a quarter of a memtable in Pebble's accounting (key, value and ~200
// bytes of skiplist node per entry): below Pebble's large-batch threshold,
// so that each batch is applied to the memtable. (Batches of 1 MiB of
// batch bytes, several times that in a memtable for small entries, were
// queued as memtables of their own and flushed as many small tables: a
// restore of 1M entries took 20-35% longer.) The consecutive elements of
// a list become one merge operand. Writing sstables and ingesting them
// (DB.Ingest) would skip the memtable, but needs entries in key order,
// which views from cow (a hash table) do not give, and on two cores it
// would move the flush's work onto the restoring goroutine rather than
// remove it: not done.
// Every entry is checked on the way: one in the wrong key group, a
// namespace in a keyed state or a user key outside a map fails with
// runtime.ErrCorrupt.
//
// # Options and defaults
//
//	| option           | default                | meaning                                        |
//	|------------------|------------------------|------------------------------------------------|
//	| StoreConfig      | 128 key groups, all    | the job's maxParallelism and the owned range   |
//	| Dir              | a new temporary dir    | the working directory; a default one is        |
//	|                  |                        | removed by Close, one given is kept            |
//	| FS, InMemory     | the OS file system     | vfs.NewMem() (InMemory) for tests              |
//	| BlockCacheSize   | 64 MiB                 | the memory budget: blocks and memtables        |
//	|                  |                        | (or share one cache: Cache)                    |
//	| MemTableSize     | BlockCacheSize/8       | at most 3 memtables, charged to the cache;     |
//	|                  | (8 MiB), 1 to 64 MiB   | 3×MemTableSize ≥ BlockCacheSize is refused     |
//	| Sync             | SyncNone               | no write-ahead log (see below)                 |
//	| BatchSize        | MemTableSize/4 (2 MiB) | the pending batch under SyncNone, in bytes of  |
//	|                  | (also the most)        | memtable (see "Write batching")                |
//	| KeyFilterSize    | 16 MiB                 | the most memory of the filter of keys the      |
//	|                  |                        | database may hold (see "The key filter")       |
//	| Existing         | RefuseExisting         | see "Working directory"                        |
//	| Logger           | errors to the log pkg  | Pebble's messages                              |
//
// Pebble charges its memtables to the block cache, so that the cache size
// bounds both: with memtables as large as the cache, no block would ever
// be cached and every read would go to disk and decompress its block (the
// first measurement of this package, with 32 MiB memtables and a 64 MiB
// cache, read values at 12 µs for that reason). Hence the default of an
// eighth of the cache per memtable.
//
// Sstables use Pebble's defaults (Snappy compression, 4 KiB blocks) and a
// 10-bit bloom filter per key, so that a point read skips the tables that
// cannot hold its key. Options.PebbleOptions returns the exact
// pebble.Options New uses; the benchmarks give raw Pebble the same.
//
// # Measurements
//
// benchmarks/ runs every workload on the backend and on a pebble-raw
// baseline making the same Pebble calls on the same bytes with the same
// options (Options.PebbleOptions), committing each write on its own (see
// benchmarks/REPORT.md). CPU time per operation, 1M keys, 24-byte values,
// default options on disk, at eb7c177 on a 2-core machine with nothing
// else running (load 1.3-1.6), -count 6, benchstat medians:
//
//	benchmark                 pebble    pebble-raw  ratio
//	ValueGet                  2.65 µs   2.83 µs     0.94 (not significant, p=0.13)
//	ValuePut                  1.74 µs   2.25 µs     0.78 (not significant, p=0.24;
//	                                                wall time 0.83, p=0.002)
//	MapGet                    4.37 µs   3.34 µs     1.31 (p=0.041)
//	MapPut                    2.00 µs   2.39 µs     0.84 (not significant)
//	MapIterate (10 entries)   6.80 µs   5.89 µs     1.16 (not significant)
//	SortedMapRange (16 of 64) 7.59 µs   7.19 µs     1.06 (not significant)
//	ListAdd                   1.88 µs   2.19 µs     0.86 (not significant)
//	ListGet (100 elements)    9.23 µs   5.85 µs     1.58
//	SnapshotSync, 1M entries  2.88 µs   1.04 µs
//
// (CPU time counts Pebble's flushes and compactions, on the other core,
// which is why a Put's is noisier than its wall time.) Nexmark
// (benchmarks/nexmark, the five queries in one pass over 200K events)
// runs at 432K events/s, 0.043× plain Go (±24%), with 0.18 allocations per
// event (benchmarks/REPORT.md, cc91fc3). The large-state benchmark (10M
// entries of 100-byte values, 1.1 GB on disk, 64 MiB block cache) filled
// at ~184K entries/s, read random entries at ~34 µs (most miss the
// cache), and peaked at 147 MiB RSS: 56 MiB of Pebble memory (cache and
// memtables), 5 MiB of Go heap (measured before write batching and the
// key filter, which past 3.3M live keys turns off).
//
// # Durability
//
// The working directory is not the durability mechanism of keyed state:
// checkpoints are. After a crash the job restores its last completed
// checkpoint into fresh stores, and nothing written to a working directory
// after that checkpoint may be used anyway. So the default, SyncNone, runs
// Pebble without a write-ahead log, like Flink's RocksDB backend: a write
// touches only the memtable, and a crash loses everything not yet flushed.
// Writes wait in the pending batch (see "Write batching") until it is
// committed, which changes nothing here: a crash loses them as it loses
// the memtables. SyncWAL writes the log without fsync, SyncAlways fsyncs
// it on every write (neither batches); both cost throughput and buy
// nothing a checkpoint does not give, unless the directory itself is to be
// reused after a crash of the process (which ReuseExisting refuses anyway,
// see below).
//
// # Working directory
//
// A store owns its working directory. By default (Options.Dir empty) New
// makes a new temporary directory and Close removes it. A directory given
// in Options.Dir is handled by Options.Existing:
//
//   - RefuseExisting (the default): New fails with ErrDirNotEmpty, naming
//     the directory and a few of its files, if it holds anything. A store
//     starts empty and is filled by writes or by Restore; leftover files are
//     a crashed run's or someone else's, and are never silently used or
//     deleted.
//   - ReuseExisting: New opens the store a previous store left in the
//     directory, with its states and entries, provided it was closed
//     cleanly: New writes a marker file (STATEGEN-OPEN) and Close removes it
//     after flushing the memtables, so a directory still holding the marker
//     (its store crashed, or failed to flush) fails with ErrUncleanDir: its
//     content may predate the last writes, and the job must restore a
//     checkpoint. The directory must record the same maxParallelism
//     (ErrNotStoreDir otherwise, also for a directory that holds another
//     database or files but no database); key groups outside the new range
//     are deleted.
//
// A directory held by an open store (Pebble's LOCK file) is refused by
// both policies, with Pebble's lock error or ErrDirNotEmpty. Every error of
// New names the directory, and a failed New leaves nothing open and
// deletes nothing but a directory it made itself.
//
// # Failures
//
// Pebble writes to disk in the background: a memtable is flushed when it is
// full, and a full disk (or any I/O error) fails that flush, which Pebble
// retries until it succeeds. Meanwhile the memtables fill, and Pebble would
// then stall every write until a flush succeeds — for ever, on a full disk,
// even for a write that began before the flush failed. So the store stalls
// its writes itself: it counts what its commits reserve in the memtable,
// and a commit that would need a new memtable while another still waits
// for its flush (or level 0 is full) waits in the store, which rotates the
// memtable itself once the flush is done, and which ends the wait with the
// directory's error if the flush fails; Pebble never stalls. The store
// also watches Pebble's background errors: while the last
// flush or compaction failed, every write fails with ErrFailed, naming the
// directory and the cause (e.g. "no space left on device"); reads and
// snapshots go on, and writes resume once a flush succeeds again (the disk
// has room). Nothing acknowledged is lost: refused writes were refused,
// and the writes of the pending batch stay in it, read by every read, and
// are committed once the directory takes writes again. A Snapshot needs
// them committed, so while the directory refuses writes a Snapshot with
// writes pending fails with ErrFailed too (committing them could stall
// for as long as the disk is full); one with none pending goes on.
// (Pebble retries the failed flush at once, again and again, so a store on
// a full disk keeps a core busy until space is freed or it is closed.)
// With a write-ahead log (SyncWAL, SyncAlways), a log write that fails is
// fatal to Pebble; the store turns it into ErrFailed and stays failed (it
// must be closed and the job restored from a checkpoint). So does every
// other fatal error of Pebble's, such as a MANIFEST write that fails in a
// background flush or compaction: the store logs it and refuses writes,
// where Pebble would end the process. So does a
// commit of the pending batch that fails: its writes were acknowledged
// and may be lost, so every later call of the store — reads, writes,
// Snapshot, Restore, Register — fails with ErrFailed, naming the
// directory, the number of writes and the cause; Close reports it too,
// and leaves a kept directory unclean (ErrUncleanDir on reuse). Close of a
// kept directory whose pending batch cannot be committed (the directory
// refuses writes) fails in the same way. Close on a full
// disk cannot flush a kept directory: it says so, closes the database and
// leaves the directory unclean.
package pebble
