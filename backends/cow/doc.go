// Package cow is the copy-on-write, in-memory state backend: the default
// runtime.Store, whose snapshots cost a few words per (state, key group)
// and are then read on another goroutine while the operator keeps writing.
// Its design follows Flink's CopyOnWriteStateMap (FLINK-5715) in semantics,
// not in layout: nothing the garbage collector would have to trace is
// allocated per entry.
//
// # Layout
//
// Every state has one table per owned key group, made on the first write to
// it, so a snapshot is read key group by key group. A table has two parts:
//
//   - An arena: append-only []byte slabs (512 bytes growing to
//     Options.MaxSlabSize, 1 MiB), addressed by 64-bit refs (slab index,
//     offset). Slabs hold no pointers, so the collector never scans them,
//     are never reallocated, and their bytes are never handed out twice
//     (package backends/internal/arena, which backends/btree shares).
//   - A hash table of fixed-width records in Go-allocated []byte pages of
//     512 records, behind a page directory. A record is a 4-byte control
//     word (the top 24 bits of the hash, and whether the entry is inline)
//     and an area that holds the entry itself — header (three uvarint
//     lengths), key, namespace and value together — or, if it does not fit,
//     the ref of the entry in the arena. The width is picked from the
//     table's mean entry size each time the table is allocated (an int64 key
//     and a 24-byte value make 40-byte records), so a lookup costs one
//     dependent cache miss, like a Go map, and the heap holds one pointer
//     per page, not per entry.
//
// Lookup is linear probing from the home position given by the key's
// stable hash (runtime.Key.Hash, computed once by the typed handle; a
// sub-keyed state mixes in a cheap multiply-hash of the namespace), comparing
// the control word's hash bits before the entry's bytes. The same bits give
// a record's home, so deletion (backward shift, no tombstones) and rehashing
// never read or rehash keys. The table holds at most 3/4 of its records.
//
// Values of the other kinds are small fixed headers in the record:
//
//   - List: the ref, used length and capacity of an arena region holding
//     the elements (uvarint length, bytes). Add writes past the used length
//     and grows the region by doubling, so it is amortized O(1).
//   - Map and SortedMap: the root of a B+tree in the arena, per (key,
//     namespace), with leaves of up to 32 (prefix, ref) items: the first 8
//     bytes of the user key as a number, compared before the entry is read,
//     and the ref of the (user key, value) entry. One ordered structure
//     serves both kinds: range reads never sort, Iterate is ascending for
//     both, and a write copies one root-to-leaf path rather than the map. A
//     nested hash table would make Get of very large maps a little faster
//     but needs its own rehashing under snapshots; the B-tree won on
//     simplicity at the sizes benchmarked (16- and 64-entry maps, and the
//     10,000-entry first-Put benchmark). Point reads of entries read
//     before skip the tree: see the entry index below.
//   - Sub-keyed states keep a second hash table, key -> B-tree of its
//     namespaces, so Namespaces and DeleteAll visit one key's namespaces
//     (in ascending order) instead of the key group.
//
// # Versions, undo logs and copy-on-write
//
// The store counts snapshots (its epoch) and live snapshots (an atomic
// counter). Snapshot stamps every table with the epoch and the arena's end,
// and gives it the snapshot's view of it: a copy of its roots, which the
// table keeps in a list of protectors while the snapshot is live. Pages
// carry the epoch at which they were made, so a snapshot sees exactly the
// pages made before it.
//
// Record pages are written in place under a live snapshot, with an undo
// log per snapshot: the first time a write changes a record of the main
// table in a page a live snapshot sees, it saves the record's old bytes in
// that snapshot's undo log of the page (46 bytes for the benchmark's
// 40-byte records) and publishes the page's new undo-list head. The
// snapshot's reader marks the page as being read, then takes the head, and
// reads saved records from the log, never from the page: it reads every
// page as it was at the snapshot, as often as it likes. The two meet
// without a lock (Dekker's argument on sequentially consistent atomics:
// the writer publishes the head before it looks for a reader, the reader
// announces itself before it takes the head), so either the reader sees
// the saved record, or the writer sees the reader on the page — and then
// copies the page instead of writing it, and the page directory if a
// snapshot sees it. Later writes to a saved record need nothing at all.
// The writer never waits for a reader, and a reader never waits for the
// writer. The namespace index of sub-keyed states, which snapshots do not
// read, is written in place. With several snapshots live, a write saves
// the record in the log of each one that sees the page and has not saved
// it yet.
//
// Arena regions are never written while a snapshot can see them: a
// changed out-of-line entry is written anew, and the frozen nodes on the
// path from a tree's root are copied (path copying), changing the record
// that holds the new root; each node is copied at most once per snapshot.
// List appends write past the used bytes of the region, which no snapshot
// reads, and copy nothing. With several snapshots live, the newest one's
// arena mark protects all of them (older snapshots see only older bytes);
// releasing the newest first leaves the mark conservative, never wrong.
//
// A write therefore costs, with no live snapshot, one atomic load (the
// live count) more than a plain hash table's: a value that still fits its
// inline record — of the same length, or of another one-byte length within
// the record's width, as varint-encoded values often are — is overwritten
// in place. With a live snapshot that sees the record's page,
// the first write to the record since the snapshot also copies it into the
// undo log and does one atomic store and one atomic load; later writes to
// it cost nothing more. Copy-on-write of whole pages, which this replaced,
// copied 20 KiB on the first write to each page, which made a Put during a
// snapshot being written cost several times an idle one; the undo log
// copies only the touched records, as Flink copies the touched entries.
//
// The first Put into a key's 10,000-entry map after a snapshot therefore
// copies three tree nodes, one undo record and the new entry, a few KiB:
// never the 9,999 other entries.
//
// # The synchronous phase
//
// Snapshot copies, per state and owned key group, the table's hash-table
// root (page-directory slice header, counts, rehash cursor) and its slab
// list header, stamps the table with the epoch and arena end and adds the
// view to the table's protectors: O(states × key groups) words, never a
// page, a bucket array or an entry. It allocates per state, not per state
// and key group: a table keeps the view of its last freed snapshot (once
// the snapshot's release has dropped the view's undo logs) and fills it in
// for the next one, and a state's snapshot holds one slice of pointers to
// its views, made only if one of its tables holds entries. Four states in
// 128 key groups: 16 allocations, 2.5 KB and ~8 µs of CPU for a snapshot
// and its release on the shared 2-core machine under load 4 (it was 19
// allocations, 78 KB and ~33 µs when every snapshot made a 144-byte view
// per state and key group, which also made the collector run more often);
// the same at 1K and at 100K entries. A view's page states and undo logs
// are made by the first write or read that needs them, not by the
// synchronous phase.
//
// # The asynchronous phase and Release
//
// Scan walks the key group's record pages in order. For each run of 64
// records it builds the bitmap of occupied ones without a branch per
// record (at the usual half load such a branch is mispredicted every other
// record), then reports the occupied records by their bits; an inline
// Value entry becomes an Entry of slices of the record, with no call but
// the callback's and no allocation. Records in the page's undo log are
// taken from the log. A Scan is bound by reading the table's memory once
// (about 80 bytes per entry at the benchmark's load), not by computation.
//
// Release marks the snapshot released. It stops counting as live — and
// writes stop protecting what it sees — once no Scan of it is running, so
// a Release from another goroutine while a Scan runs is safe: the Scan
// stops with runtime.ErrReleased at its next page, and the snapshot is
// freed when it returns. Freeing drops the snapshot's undo logs at once;
// the tables drop their pointers to its views at their next write that
// may allocate, or at the next Snapshot.
//
// # Rehashing
//
// A table that reaches 3/4 load allocates a table twice the size and keeps
// the old one until every old record has been copied over, 16 per write
// (small tables at once). Lookups probe the new table, then the old one's
// unmigrated records; inserts go to the new table, deletes of unmigrated
// entries leave a tombstone in the old one. A snapshot taken mid-rehash
// captures both tables and the cursor; migration copies records out of
// old pages without writing them, and writes to pages a snapshot can see
// go through its undo log, so any number of live snapshots stay consistent.
//
// # Reclamation
//
// Pages replaced by copies or by a finished rehash, and undo logs, are
// ordinary Go allocations: the collector frees them once no snapshot view
// references them. Arena garbage (replaced entries, list regions and tree nodes) is
// counted per table; when it exceeds the table's live bytes, the table is
// compacted: rebuilt into a fresh arena with live entries only, hash tables
// sized for their counts, lists at their exact length and trees packed.
// A live snapshot keeps the old arena alive through its own slab list, so
// while one is live compaction waits for four times the live bytes. A
// compaction is O(live bytes of one state in one key group).
//
// # The entry index
//
// A map read costs the (key, namespace) probe, a root-to-leaf descent
// and a leaf scan; a job that reads and updates the same entries over
// and over (a count per item in a window, Nexmark's q5) pays it every
// time, where a Go map of maps pays two probes. So each table of a Map or
// SortedMap state keeps an entry index (package backends/internal/entryidx,
// which backends/btree shares): (key, namespace, user key) -> the ref of
// the entry in the arena, holding the entries that Get, Contains and
// Update found in the trees and the ones Update made; Put alone adds
// nothing (a state only written, such as the timers, keeps it empty). A
// read of an indexed entry is one probe of the index, whose record holds
// the key and namespace bytes (the user key is checked in the entry), and
// the entry itself; an Update then writes the new value in place as
// before.
//
// The index is exact, never a guess: a record's ref is always the live
// entry of its (key, namespace, user key). Arena bytes are never handed
// out twice, so a ref can only go stale by a write, and every write that
// moves an entry keeps the index true at the one place it happens — a Put
// that writes an entry anew (another length, or a snapshot sees the old
// one) sets the record's ref (treePut), a Delete removes the record
// (treeDelete), and removing a whole map (Clear, DeleteAll, the last
// Delete: removeEntry) or compacting the table empties the index in O(1).
// The index is not part of any snapshot (its records point into the
// arena, which the snapshot's view holds) and is written in place;
// Restore makes new tables with empty indexes. A record is 40 bytes and
// holds keys and namespaces of up to 20 bytes together (longer ones are
// not indexed); an index grows up to four times its table's live arena
// bytes (room for every entry), and a gate per state stops reads from
// using it while they seldom come back to an entry (uniform reads of 1M
// keys: MapGet took 28% longer and MapUpdate 44% with an index that took
// every read). Options.DisableEntryIndex turns it off.
//
// BenchmarkMapUpdate (four 1,000-entry maps, random increments) takes
// 48 ns an Update with the index against 105 ns without (-54%); Nexmark's
// q5 on cow ran 19% faster and the five queries 18.5% (6 A/B runs of the
// two binaries, interleaved).
//
// # Performance
//
// At 1M int64 keys and 24-byte values through the typed handles, against a
// Go map of the same types (benchmarks package, BenchmarkValueGet and the
// others with backend=cow and backend=gomap; a shared 2-core machine,
// -count 10): Value Get 1.76x the map's time, Put 0.72x, List.Add 1.28x;
// heap 80 B/entry against the map's 128; GC CPU per cycle with 4M entries
// live 1.2 ms against the map's 83 ms (slabs and record pages hold no
// pointers). A Get is one dependent cache miss, as in the map, but the path
// around it (encoding and hashing the key, the key group, two interface
// calls, decoding the value) is several times longer, so the processor
// overlaps fewer misses of consecutive lookups than it does for the map's
// short loop. The typed handles keep that path short on purpose: they hash
// short keys without a call into assembly, build the Key and decode the
// value in place rather than returning structs of more than four words
// through several frames (see runtime's valueHandle.get).
//
// # Tables of Go values (runtime.TableHost)
//
// The Store also hosts the tables of Go values that the typed layer makes
// for keyed value and unsorted map states whose types allow it
// (runtime.TypedValues, TypedSlices and TypedMaps, which stategen sets in
// the descriptors it generates): DESIGN.md §3's typed
// fast path. Such a state is a runtime.Table rather than tables of
// records, and the store treats it as one of its own: HostTable registers
// it with Register's checks, Snapshot freezes it (runtime.Table.Freeze: per
// key group a slice header, and a copy of the slice at the first write
// while the snapshot is live), the snapshot's Scan encodes its entries,
// Restore decodes the key groups it loads into it — for every hosted
// state before it installs anything, so that a Restore that fails still
// changes nothing — and Close drops it. A state a Restore made, which no
// Register has returned, becomes a table when a typed handle binds to it
// (HostTable reads it through a snapshot and drops its records); a state a
// handle may hold is never changed under it, so a typed handle that binds
// after a byte-level Register gets the records, and a byte-level Register
// after a typed handle gets the table, which answers the whole
// runtime.ValueState or MapState. The conformance suite runs with every
// keyed value and unsorted map state hosted (TestConformanceHostedValues).
//
// A Get of a hosted value copies the value out of its slot, with no decode;
// a Put writes the slot, with no encode. On Nexmark, whose q3 and q7 keep
// keyed values of int64 keys, q3 ran 31% and q7 51% faster on cow than
// with the same values as records (speed-vs-plain, 5 interleaved rounds);
// at 1M keys (FlatPut, FlatGet) a Put took 207 ns against 261 and a Get
// was within the noise of the records' (326 against 300 ns), one cache
// miss either way. String keys stay records: a table compares a string key
// by reading its bytes from another allocation, a second cache miss at
// scale (466 ns a Get at 1M keys against the records' 266), where a record
// holds the key's bytes. A hosted map is two probes (key, then user key)
// with nothing encoded but the keys: Nexmark q5, whose counts are a keyed
// Map of int64 to int64 updated once per bid and window, ran 2.2 times as
// fast as with records (0.157 to 0.350 of plain Go, 5 interleaved
// rounds); q11, whose sessions are a keyed Value of a slice of structs
// (TypedSlices), 1.37 times (0.19 to 0.26).
//
// # Aliasing, restore, leaks
//
// Put copies its arguments. Get and iteration callbacks receive slices of
// the store's own memory: read-only, and valid until the next call (Get) or
// the end of the callback. A snapshot never reads those bytes once they
// may change — the store saves a record to the undo logs of the snapshots
// that see it before it writes the record — so a caller holding a Get
// result cannot observe or cause a change to a snapshot. Writes from
// inside an iteration callback are refused.
//
// Restore loads a View into empty key groups: if a loaded key group already
// holds an entry of a restored state it fails with runtime.ErrRestoreConflict
// before changing anything (the contract's choice: restore never merges).
// Each (state, key group) is bulk-loaded: while the View is scanned, every
// entry is checked (its key group, no user key outside maps, no namespace
// in keyed states) and staged — values and list elements in a buffer
// reused from one key group to the next, map entries straight into the
// new arena — and then the main table is allocated for the number of
// (key, namespace) entries and filled in the order of the pages that hold
// their home records, so that fresh memory is written page after page:
// no incremental rehash, no probing for absent keys, lists in one region
// of their exact size, maps as packed B-trees (sorted first if the View
// scanned them out of order, and merged if it split one map's entries).
// What the View contract forbids — two values of one key, list elements
// that are not consecutive, two entries of one map user key — fails with
// runtime.ErrCorrupt rather than dropping an entry.
//
// The key groups load in parallel: Options.RestoreConcurrency workers
// (default GOMAXPROCS, at most 8; 1 loads on the calling goroutine) take
// the key groups in order from an atomic counter, and each loads every
// restored state of its key group with staging buffers of its own, so
// two Scans of one key group never overlap, as runtime.View requires. A
// table being loaded belongs to its worker alone; the store is only read
// (options, maxParallelism, snapshot count), and the new tables are
// installed, and the View's new states registered, on the calling
// goroutine once every key group has loaded. The first failure — a Scan's
// error, corruption, ErrTooLarge — stops the other workers (their Scans
// fail at the next entry, and no key group is handed out after it);
// Restore waits for every worker and returns that error, or re-raises on
// its own goroutine a panic raised in a worker. So a Restore that fails
// leaves the store exactly as it was — no new state, no loaded entry —
// and no goroutine behind, and the store may be restored again (the Store
// contract only promises an unspecified content after an error).
//
// Every Snapshot must be released. LiveSnapshots reports how many are not,
// and a snapshot that is garbage-collected unreleased is released by a
// runtime cleanup and reported to Options.OnLeakedSnapshot, so a leak
// (FLINK-13469) cannot leave copy-on-write on forever.
package cow
