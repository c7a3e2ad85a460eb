// Package storetest holds the reference model of the byte-level Store
// contract (runtime.Store) and the conformance suite that every backend runs
// with one call.
//
// # The model
//
// Model implements runtime.Store with plain Go maps keyed by the strings of
// the encoded bytes, a sort wherever the contract promises an order, and deep
// copies for snapshots. It is written to be obviously correct rather than
// fast (its Snapshot is O(entries), which the contract forbids real
// backends), and it is deliberately stricter than the contract: it rejects
// Keys whose Group or Hash do not match their bytes, namespaces on keyed
// states and writes from inside iteration callbacks, and it overwrites every
// slice it lends (Get results at the next call, callback arguments when the
// callback returns), so that the typed handles and the checkpoint code can be
// tested against it for the mistakes a lenient backend would hide.
//
// # Views and contents
//
// Dump reads a whole View into Contents, a canonical, sorted, deep-copied
// form made of strings, so that two views are compared with cmp.Diff. Dump
// also checks what a View must guarantee (entries in the right key group,
// list elements consecutive, no duplicates, states sorted by name), so every
// comparison is also a check of the backend's Scan. CopyView deep-copies any
// View into a MemView: the in-memory snapshot stream the suite restores from
// until the checkpoint format exists.
//
// # The suite
//
// Run(t, factory) runs sub-tests against stores made by factory: Contract
// (deterministic examples of every rule, each kind keyed and sub-keyed),
// Random (seeded operation sequences over a small key universe, applied to
// the backend and to a fresh Model, every read compared, full snapshot
// comparisons every ~200 operations, live snapshots and restores
// interleaved), SnapshotsWhileWriting (snapshots read on other goroutines
// while the store changes, and the key groups of one snapshot scanned by
// several goroutines at once, as runtime.View allows; run it with -race),
// Restore, and Rescale (the
// snapshots of p stores restored into q stores owning other key-group
// ranges, and back). Randomized sub-tests log their seed;
// STATEGEN_SEED=<n> replays a run, STATEGEN_LONG=1 runs 100 times as many
// operations, and -short a fifth. Failures print the seed and the last
// operations.
//
// Every snapshot that the suite restores or reads in the background passes
// through a SnapshotCodec, by default CopyView. WithSnapshotCodec plugs in a
// codec that writes the snapshot to checkpoint files and reads it back, so
// that the whole suite runs through the checkpoint format; this package
// itself depends on nothing but runtime.
//
// A backend's test is one call:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(tb testing.TB, cfg runtime.StoreConfig) runtime.Store {
//			s, err := cow.New(cow.Options{StoreConfig: cfg})
//			if err != nil {
//				tb.Fatal(err)
//			}
//			return s
//		})
//	}
//
// The checks report failures by panicking with an internal value that Run
// turns into t.Fatal; this keeps them usable against deliberately broken
// stores in this package's own tests, which prove that the suite is not
// vacuous.
package storetest
