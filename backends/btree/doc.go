// Package btree is stategen's sorted in-memory backend: a runtime.Store
// that keeps every state in B-trees of github.com/tidwall/btree (the
// generic BTreeG, without locks: the operator's goroutine is the only
// writer), ordered by the bytes of an item key, and takes snapshots with the
// trees' O(1) copy-on-write Copy.
//
// Choose it over backends/cow when state is read in key order — SortedMap
// ranges, First and Last, time-ordered buffers, top-N by key: a range is
// one descent of a tree and a sequential walk, and a 16-entry range of a
// 64-entry sorted map took 2.9µs of CPU on btree against 3.8µs on cow at
// 1M entries. Choose cow for state read and written by point operations:
// a B-tree descent costs a few cache misses per level at millions of
// entries, and cow's hash table was 4 times faster for Value Get and Put
// (1.1µs against 0.27µs) and 1.4 to 1.5 times faster for Map Put and Get
// (benchmarks/btree_test.go and cow_test.go, same workloads, 1M keys,
// -count 6, CPU time).
//
// # Item keys
//
// Each entry is one item, ordered by its item key (its bytes live in the
// tree's arena; see Entries below). The item key of (key group g, key k, namespace n, user key u) is
//
//	g (2 bytes, big-endian) | framed k | framed n (sub-keyed states only) | u
//
// with u empty for values and lists: package storekit's sorted key layout,
// which backends/pebble shares. A framed field is cut into groups of 8
// bytes, the last padded with zeros, each followed by a marker byte (how
// many of the group's bytes are the field's, or 9 if it goes on). The Store
// contract promises that keys, namespaces and user keys are prefix-free,
// order-preserving encodings, so plain concatenation would order correctly;
// the store does not rely on it. The framing is prefix-free whatever bytes
// a caller passes (with plain concatenation, a codec that broke the promise
// would make (k="a", n="bc") and (k="ab", n="c") one entry, silently), and
// it keeps bytewise order across lengths, which a length prefix would not
// (it sorts "b" before "aa"). An 8-byte key takes 9 bytes; a keyed state,
// whose namespace is always empty, has no namespace field. What the order
// of item keys gives:
//
//   - the entries of one map are one contiguous run, ordered bytewise by
//     user key: SortedMap order, and a Range is a seek and a walk (Iterate
//     of a KindMap ascends too);
//   - every namespace of key k lies under the prefix g|framed k, so
//     Namespaces and DeleteAll are range operations (DeleteAll walks the
//     key's items once, to count their bytes as garbage, and removes them
//     with one DeleteRange; Namespaces seeks past each map), and
//     Namespaces yields them in encoded order;
//   - keys come in encoded order too: a snapshot's Scan yields a key
//     group's entries by key, namespace and user key (the View contract
//     leaves the order unspecified; storetest.Sorted checks this one).
//
// Keys, namespaces and user keys of up to MaxKeyBytes together are
// accepted.
//
// Items hold the first 24 bytes of their item key in three integers, and
// compare on them first. Comparing item keys through their bytes costs a
// cache miss per comparison in a tree of a million entries, whose bytes
// are spread over memory; with the inline prefix, a search reads only tree
// nodes unless two keys share 24 bytes. The item keys of keys of up to 13
// bytes (an int64 key's is 11) and of map entries of int64 keys and user
// keys (19 bytes) fit whole, and are then not stored a second time.
// Measured at 1M keys with the benchmarks of benchmarks/btree_test.go
// (-count 6, benchstat, CPU time, on the shared 2-core machine all numbers
// here come from), when each item still pointed at a heap allocation of
// its own, the inline prefix took Value Get from 1.78µs to 1.14µs (-36%),
// Map Get -34%, and ranges -32%; 24 bytes rather than 16 took another 24%
// off Map Get, for 8 more bytes per item.
//
// # Entries: items in the nodes, bytes in an arena
//
// An item is 40 bytes and holds no Go pointer:
//
//	p0, p1, p2  the first 24 bytes of the item key, big-endian, zero-padded
//	ref         its region in the tree's arena: slab index and offset
//	kl, vl      the lengths of the item key and of the value (a list's elements)
//
// and its region, in the arena of its tree (package backends/internal/arena,
// which backends/cow shares: append-only []byte slabs of 512 bytes growing
// to Options.MaxSlabSize, 1 MiB, a region larger than half a slab in a
// slab of its own), is
//
//	values, map entries: item key, if longer than 24 bytes | value
//	lists:               item key, if longer than 24 bytes | capacity (4 bytes) | elements
//
// (an empty region has ref 0). Neither the nodes' item slices nor the
// slabs contain a pointer, so the runtime allocates them as memory the
// garbage collector never scans: what it traces per tree is a node per few
// dozen entries and the slab list, never an entry. A write allocates
// nothing per entry once its tree's nodes and slabs exist. Values and map
// entries are capped slices of a slab; a value or list longer than
// MaxValueBytes (2 GiB) is refused with ErrTooLarge. Each tree has an
// arena of its own, so that a compaction rebuilds one tree and a snapshot
// keeps one slab list per tree.
//
// Measured against the layout this replaced (an item of 56 bytes holding a
// []byte of item key and value: one heap object per entry), with the
// benchmarks package (typed handles; two runs of -count 6, or 8 for
// Nexmark, old and new interleaved, benchstat; load average 1.1 to 1.8 on
// the 2 cores):
//
//	                                          arenas       heap objects   cow
//	heap per entry, 1M values (B/entry)       96           152            80
//	GC CPU per cycle, 1M values live          1.8-2.7ms    51-54ms        0.45-0.53ms
//	Nexmark, five queries, allocs per event   0.33         6.04
//	Nexmark, five queries, events/s           +9 to +12%   (p=0.02 to 0.04; 0.23 once)
//
// (BenchmarkHeapPerEntry, BenchmarkGCCycle: 1M int64 keys, 24-byte values;
// BenchmarkNexmark/query=all, 200K events, in benchmarks/nexmark.) What
// the collector still traces is the nodes: about one per 40 entries, each
// a node, an item slice and, inside the tree, a children slice. The
// allocations left in Nexmark (each pass a new store) are tree nodes — a
// key group's tree empties and refills as windows close, and a growing
// leaf's item slice grows by append — then new slabs and new trees; none
// is per entry.
//
// # Garbage and compaction
//
// A region stops being used when its entry is deleted or cleared, when a
// value is overwritten by a new region (see Values below), and when a list
// outgrows it. Its bytes are counted as the tree's garbage. Once the
// garbage exceeds both Options.CompactionMinGarbage (64 KiB) and the live
// bytes — four times them while a snapshot is live, which keeps the old
// slabs anyway — the tree compacts (arena.CompactDue, cow's rule): a walk
// of its nodes (tidwall/btree's WalkMut, which copies a node a snapshot
// shares before handing out its items, as any write does) copies each
// item's region into a fresh arena, lists at their exact length, and
// points the item at the copy. No key changes, so no search is made and
// no node is rebuilt: a first version that reloaded the items into a new
// BTreeG spent a quarter of a blind Put's time in it (a 10K-entry map). A
// compaction costs O(live bytes of one tree) and comes after at least as
// many bytes of writes, so it adds amortized O(1) per byte written, and
// the arena holds at most twice the live bytes (five times while a
// snapshot is live). A live snapshot keeps its own Copy of the old nodes
// and its own copy of the old slab list, so a compaction changes nothing
// it reads; the old slabs are freed once the last snapshot that sees them
// is released.
//
// # Tree granularity: one tree per state and key group
//
// A state keeps one tree per key group it owns, made on the first write.
// The alternative, one tree per state with the key-group prefix separating
// the groups, was measured with BenchmarkLayout (layout_test.go: a value
// state of 1M int64 keys, 128 key groups, -count 6, CPU time per
// operation, benchstat):
//
//	                      per state and group   per state
//	Get of a random key        1.21µs            1.42µs   (+17%, p=0.004)
//	Put over a key             1.50µs            1.65µs   (+10%, p=0.026)
//	Put of a new key           1.41µs            1.79µs   (+27%, p=0.004)
//	snapshot sync phase        17.7µs            1.1µs    (-94%)
//
// A tree per group is 128 times smaller, a level shallower, and wins the
// operations that every record makes; one tree per state wins the
// synchronous phase of a snapshot, which Copies one tree per state instead
// of one per non-empty key group. That phase stays O(states × key groups),
// which the contract allows, and independent of the number of entries
// (18 to 28µs per state at 128 key groups in our runs, 140 to 220ns per
// non-empty group): a checkpoint interval's worth of records saves far more. A tree
// per group also makes the other per-group operations whole-tree
// operations: the restore-conflict check is a length test, and the
// asynchronous phase scans one tree per key group from its start. With
// maxParallelism 32768 and every group written, the synchronous phase
// would grow to 5 to 7ms per state.
//
// # Snapshots
//
// The synchronous phase (Store.Snapshot) does three things per non-empty
// tree: it Copies the BTreeG (tidwall/btree's Copy allocates a tree header
// and gives the copy and the live tree new isolation ids, sharing every
// node), keeps the tree's slab list (a slice header) and marks the end of
// its arena. It visits no entry. Per state it allocates a view of the
// non-empty trees and a 2-byte index per key group, which the collector
// does not scan. The asynchronous phase (the snapshot's
// Scan, on any goroutine) walks the Copy of a key group's tree, reading
// regions through the kept slab list, while the operator keeps writing.
// Nothing it can reach is ever written again:
//
//   - tree nodes: the live tree copies each node it shares before changing
//     it;
//   - regions allocated before the newest snapshot's mark are frozen while
//     a snapshot is live: a value is never overwritten in them, nor a list
//     rewritten (with several snapshots live, the newest mark protects
//     them all: older snapshots see only older regions);
//   - a list's Add writes past the elements of the live item, into its
//     region's spare capacity, frozen or not: every item a snapshot holds
//     ends there or before, since a frozen region is never rewritten
//     shorter;
//   - new slabs are appended to the live slab list beyond the kept copy's
//     length, and a compaction moves the regions into a new arena, copying
//     first every node the snapshot shares.
//
// A Copy keeps the live tree's comparison function, which reads the live
// tree's probe key and arena when two item keys share their first 24
// bytes; a snapshot's Scan only seeks with a 2-byte key-group probe, which
// never gets that far. Under -race, TestTreeCopyIsolatesConcurrentReads
// checks the nodes, and TestSnapshotEqualsModelWhileWritesRaceTheScan
// everything, with compactions under way. The synchronous phase took 22µs
// of CPU for a value state of 10K entries and 12µs for one of 1M (23µs
// for both with one heap object per entry; BenchmarkSnapshotSync in
// benchmarks/, -count 6, load average 1.1 to 1.2); the asynchronous phase
// scanned 10.4M entries/s, against 8.3M (+25%, p=0.002;
// BenchmarkSnapshotAsync).
//
// Release drops the snapshot's copies; LiveSnapshots counts the snapshots
// not yet released, and Options.OnLeakedSnapshot reports one collected
// unreleased. After a snapshot, released or not, the first write to a tree
// node copies it (Copy changed the tree's isolation id): a write pays for
// the nodes on its path once per snapshot — nodes of up to 63 items of 40
// bytes — and the total copied between two snapshots is at most the trees'
// size. BenchmarkMapFirstPutAfterSnapshot/backend=btree measures it: a Put
// into a 10K-entry map took 2.8 to 3.3µs right after a snapshot (4.0 to
// 4.7µs with one heap object per entry) and 0.54 to 0.58µs otherwise
// (0.50 to 0.52µs: overwriting the same keys again and again, the arena
// compacts every 10K Puts or so). Nodes of half the size (Degree 16)
// changed neither that nor point operations significantly (p > 0.09), so
// the degree stays tidwall/btree's default of 32.
//
// # Values, lists and maps
//
// A Put writes the value into a new region and sets the item in one
// descent; the old region, if any, becomes garbage. There is one
// exception, the read-modify-write of an aggregation (a Get, then a Put of
// the same key): each tree remembers the item its last Get found until
// its next write, and a Put of that key whose value has the old one's
// length, into a region no live snapshot can see, overwrites the value in
// place — no search, no allocation, no garbage, no node written (so none
// to copy after a snapshot). Value and Map Update (runtime.ValueUpdater,
// MapUpdater) make the same in-place write after the one descent that
// finds the old value, without a second key encoding or search: Nexmark
// q5, a count per auction in a map per window, ran 20% faster (p=0.001,
// -count 10 interleaved, load average 1.1 to 1.2), though the five
// queries together did not change significantly. Looking every Put's
// item up first to overwrite it in place when possible costs a second,
// hinted descent when it is not, and the write's cache miss on the old
// value when it is: at 1M keys, blind Puts took 40% more CPU that way
// (p=0.015), and
// read-modify-writes no less (p=0.18 and 0.70 for values and maps).
// The remembered item serves reads too: a Get or Update of the key the
// last one found, with no write to the tree between that may have moved
// or dropped its item, compares the inline prefix and reads the value
// without a descent (a descent of even a one-item tidwall tree cost ~55
// ns). Nexmark q7, which reads its window's highest price at every bid,
// ran 38% faster (p=0.000, -count 8 interleaved, load average 0.8 to
// 1.2), the five queries 9% (p=0.05); point Gets of random keys did not
// change (p >= 0.24).
// Against one heap object per entry, at 1M keys (benchmarks package,
// -count 6 interleaved, CPU time, load average 1.1 to 1.2), Value and Map
// Update took 29% and 26% less (p=0.002, 0.041), List AddAll 9% less
// (p=0.041), and Value and Map Get and Put, List Add and Get and SortedMap
// Range were unchanged (p >= 0.065); the backend allocates in none of
// them (what allocations are left are the typed handles').
//
// A list is one item per (key, namespace) whose region holds the list's
// elements, each preceded by its length as a uvarint, and the region's
// capacity. A list Get reads one region sequentially, and an element costs
// one or two bytes beyond its own. Add works as Go's append does: it
// writes the new elements into the region's spare capacity if there is
// room, or else into a new region of twice the capacity, and sets the
// longer item. A run of Adds costs amortized O(element), snapshots or not
// (Flink's heap backend, by contrast, copies a whole list state on its
// first write after a snapshot). Replace writes in the region when it has
// room and no snapshot can see it, else into a new region of the exact
// size. The alternative, an item per element keyed by a sequence number,
// would cost an item (40 bytes and the key repeated) per element and a
// tree step per element read, and would save nothing on appends.
//
// A map entry is one item whose item key ends with the user key.
//
// Iterations (ranges, map iterations, snapshot scans) read their items in
// batches of 8 and touch each batch's regions in one loop before calling
// back, so that the cache misses of a batch overlap instead of coming one
// at a time (regions written at different times lie apart in the arena):
// at 1M keys, with one heap object per entry, this took 41% off a
// 16-entry map iteration and 46% off a 16-entry SortedMap range. Their
// buffers and iterators come from free lists of the store, so that an
// iteration allocates nothing.
//
// # The entry index
//
// A point read of a key other than the remembered one descends the tree:
// at every level a binary search whose comparisons are calls of the
// tree's less function (a quarter of the CPU of Nexmark's five queries).
// Reads that come back to the entries they read before (a count per
// auction of a window, a bidder's sessions) pay it every time. So each
// tree of a value or map state keeps an entry index (package
// backends/internal/entryidx, which backends/cow shares): item key ->
// the item's region and value length, holding the items that Get,
// Contains and Update found and those Update made (a count made by its
// first bid is updated by the next; q5 on Nexmark ran 3.8% faster for
// it, p=0.006, 8 interleaved rounds of speed-vs-plain). A read of an
// indexed item is one probe of the index, hashed from the item's inline
// prefix, and no descent.
//
// The index is exact: a record always holds its item's region and value
// length. The writes that change them keep it so where they happen — set
// (a value in a new region) sets the record's payload, delete removes
// the record, deletePrefix (Clear and DeleteAll of a map, DeleteAll of a
// key), which walks the items it deletes, removes theirs, and compact,
// which moves every region, empties the index in O(1) — and nothing else changes an
// item of a value or map tree (a restore only loads into empty trees).
// The index is not part of a snapshot: a snapshot keeps the tree's Copy
// and its slab list, and the live tree's index points into the live
// arena only. Item keys of up to 20 bytes are indexed (an int64 key's
// value, 11 bytes; a map entry of int64 key and user key, 19; a sub-keyed
// value of int64 key and namespace, 20); a record is 40 bytes, and an
// index grows up to four times its tree's live bytes (its items, 40 bytes
// each, and their regions). An index that holds every item of its tree
// answers "absent" too, without a descent (its records being exact, as
// many records as items means every item). A gate per state stops reads
// from using it while they seldom come back to an entry, as uniform reads
// of millions of keys do. Options.DisableEntryIndex
// turns it off. Nexmark's q5, a count per auction of a window, ran 24%
// faster on btree (p=0.000, 10 interleaved A/B runs); the five queries
// together by less than the machine's spread (-1% to -21% in three A/Bs).
//
// # Concurrency and errors
//
// Like every Store, a Store belongs to the operator's goroutine; snapshots
// may be scanned and released on any goroutine (several may scan one
// snapshot at once). Iteration callbacks may read the store, and a write
// from inside one fails with ErrWriteDuringIteration. The other errors a
// caller can test for are package runtime's: ErrClosed,
// ErrKeyGroupNotOwned, ErrInvalidKey (a namespace on a keyed state, the
// zero Key or one built for another maxParallelism, keys longer than
// MaxKeyBytes), ErrInvalidState and ErrStateMismatch from Register and
// Restore, ErrMaxParallelismMismatch and ErrRestoreConflict from Restore,
// ErrCorrupt for a restored entry that breaks the View contract, and
// ErrReleased; and this package's ErrTooLarge, for a value or list longer
// than MaxValueBytes. Errors name the state and, where one is involved,
// the key group. No input makes the store panic.
package btree
