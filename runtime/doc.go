// Package runtime holds the contracts every part of stategen is built on:
// key groups, codecs, state specs, the byte-level Store contract that every
// backend implements, and the typed handles that operators call.
//
// # Key groups
//
// Keyed state is partitioned into maxParallelism key groups (default 128, at
// most 32768), fixed for the life of the state and recorded in every
// checkpoint. A key's key group is XXH64 (seed 0) of the key's
// order-preserving encoding, modulo maxParallelism: it depends only on the
// key's bytes, never on Go's randomized map hash, so the same key lands in
// the same key group in every process, on every machine and in every
// version. Operator instance i of p owns the contiguous range
// [ceil(i*maxP/p), floor(((i+1)*maxP-1)/p)], and key group g belongs to
// instance g*p/maxP. Rescaling from p to q instances therefore moves whole
// key groups: each new instance reads, from each old instance's snapshot,
// only the key groups it now owns. A router in front of the operators
// (a Kafka partitioner, an RPC shuffle) sends each record to
// OperatorIndexForKey of its encoded key.
//
// # Codecs
//
// Keys, namespaces and map user keys are encoded with KeyCodec: an
// order-preserving, prefix-free encoding (sign-flipped big-endian integers,
// IEEE floats with the sign trick, escaped and terminated strings), so that
// bytewise order is logical order — SortedMap is sorted on every backend,
// and a sorted backend finds every namespace of a key under one prefix.
// Values are encoded with ValueCodec, which favours size and speed (varints,
// length prefixes). Both are append-style (encode into the caller's buffer,
// no allocation) and decoders return the rest of their input, so codecs
// compose field by field (StructKeyCodec, StructValueCodec); the generator
// emits the same shape for user types. Decoders never panic and never
// allocate more than their input justifies; decoded values never alias the
// input.
//
// # The Store contract
//
// A Store holds the states of one operator instance for the key groups it
// owns, as bytes: the typed layer encodes and decodes, so every backend is
// interchangeable, the checkpoint format is one format, and the conformance
// suite in runtime/storetest is one suite. A state is registered by its
// StateSpec (name, Kind, sub-keyed or not, schema fingerprint) and then
// addressed by Key — key group, stable hash, encoded key and namespace —
// built once per operation, so a backend that hashes reuses the hash rather
// than hashing again. Keyed states use the empty namespace; sub-keyed states
// (a key plus, say, a window) can enumerate and delete all namespaces of a
// key. Empty lists and maps do not exist. Values a backend returns are
// read-only and valid until the next call; backends copy everything they
// are given.
//
// Snapshot is the synchronous phase of a checkpoint: it must cost
// O(states × key groups) at most, never O(entries), and returns an
// immutable View that another goroutine scans key group by key group while
// the operator keeps writing. Restore loads a View — a snapshot, or a
// checkpoint read from disk — into the key groups a store owns; restoring
// the snapshots of p old instances into each of q new ones rescales a job.
//
// # Typed handles
//
// Value, List, Map and SortedMap, and their SubKeyed variants, are generic
// handles over the user's types, bound to a Store by New* functions (which
// generated code calls). They mirror the explicit-key API of Flink's keyed
// and sub-keyed state: st.Clicks.Get(user), st.Window.Put(user, win, agg).
// Iterations return Seq, an iter.Seq2 whose second value is an error, so
// backend and decoding failures surface where they happen. A zero handle
// returns ErrUnbound rather than panicking. Handles, like stores, belong to
// the operator's goroutine; values they return are the caller's own.
//
// A verb means one thing on every handle. Update(fn) is always a
// read-modify-write: Value.Update and Map.Update set a value to fn(old,
// found), List.Update sets a list to fn(old); on a store whose values and
// map entries update in one lookup (ValueUpdater and MapUpdater:
// backends/cow, btree and pebble) Value.Update and Map.Update cost one
// lookup, not a Get and a Put. Put and Replace overwrite without reading (Replace is a list's
// Put). A write from inside an iteration fails with ErrWriteDuringIteration;
// Edit (and SortedMap's EditRange and EditBefore) is the iteration that may
// delete or replace the entries it visits, as Flink's iterator.remove and
// entry.setValue do.
//
// A keyed value or (unsorted) map state may be kept as Go values rather
// than bytes, where the store can host it (TableHost: backends/cow, and a
// checkpoint.Tracker over it, to which a table reports its changes:
// TableEnv.Changes) and its types allow it (TypedValues, TypedSlices and TypedMaps, which
// stategen sets in the descriptors it generates): a hash table of (hash,
// key, value) slots per key group — for a map, of keys to a hash table of
// user keys per key — read and written by the handle without encoding the
// value, frozen by a snapshot and copied by key group (and map) on the
// next write, encoded only by the snapshot's Scan and decoded by Restore
// (table.go, table_value.go, table_map.go). An int64 or uint64 key (and a
// defined type over one, whose generated codec says so: KeyWord) is not
// even encoded: its hash, which picks its key group, is computed from its
// value. Slices are copied in and out,
// so that the table and its callers never share an array. The checkpoint
// format, the rules of the Store contract and every answer of the handle
// are those of the bytes: only where the entries live in between changes.
//
// # What windows need
//
// Every handle lists its keys, per owned key group (KeysIn) or all of them
// (AllKeys), on the live store: Flink's getKeys. The sub-keyed handles
// merge namespaces (Merge: a Value's with a merge function, a List's by
// appending, a Map's by moving entries), what session windows do when an
// event bridges two sessions. Timers (runtime.Timers) are keyed state too:
// each a (time, key, namespace), stored by the backend in the key group of
// its key, checkpointed and rescaled with it, fired in order by Advance
// (see timers.go for how they are laid out and read).
//
// A state may expire its entries (TTL, on any descriptor: Flink's state
// TTL). Its values carry the time of their last update, from the store's
// Clock; a decorator of the backend's State, applied when the handle is
// bound, hides expired entries from every read, renews entries on writes
// (and reads, under TTLOnReadAndWrite) and deletes expired ones a few keys
// per write; every backend's Snapshot leaves them out (ttl.go has the
// rules, and what a restore does when the TTL changed).
package runtime
