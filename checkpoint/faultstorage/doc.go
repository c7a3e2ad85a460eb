// Package faultstorage wraps a checkpoint.Storage and makes chosen
// operations fail, so that tests can show what a failing disk or object
// store costs a job: which checkpoints are declined or aborted, whether the
// job keeps running, whether anything partial is ever taken for a
// completed checkpoint, and whether cleanup leaves the storage tidy.
//
// # Operations and rules
//
// Every call the checkpoint protocol makes on a Storage is one of the
// operations Op names: Create, the Write calls of an object writer, the two
// halves of a Commit — OpSync (making the bytes durable: fsync, the upload
// of the last part) and OpRename (publishing the object: the link or
// rename of a local file, the completion of a multipart upload) — Open,
// ReadAt on an opened object (OpRead), Stat, List, Objects, Remove,
// RemoveIncomplete and Delete. A Rule selects calls of one operation —
// optionally only those on some checkpoints or objects (Match) — and fails
// them: every one after the first After, at most Times of them, or each
// with a seeded Probability. A failed Write may first write half of its
// bytes (Short), as a full disk does; the cause is syscall.EIO unless the
// rule says otherwise, such as syscall.ENOSPC.
//
// A fault never reaches the wrapped storage half-done except where the real
// thing would leave it so: a failed Create creates nothing, a failed Write
// (short or not) leaves the writer open with what it wrote so far, and a
// failed Sync or Rename aborts the wrapped writer, so the object is not
// visible — exactly the Storage contract for a failed Commit. A failed
// Remove or Delete removes nothing. With no rule installed a Storage is a
// transparent wrapper and passes the conformance tests of package
// checkpoint/storagetest.
//
// # Errors and counters
//
// An injected fault is an *Error naming the operation, the checkpoint, the
// object and the call ("faultstorage: injected fault: short write of
// chk-00000000000000000003/counter-0.sgc (write call 17): no space left on
// device"). It matches ErrInjected and its cause with errors.Is, so code
// under test that checks for syscall.ENOSPC sees a full disk. Storage
// counts the calls of each operation and the faults injected, by kind
// (Injected), for tests to report.
//
// Rules can be replaced at any time (SetRules, Heal) while the storage is
// in use: a test injects faults for a few checkpoints, then heals the
// storage and checks that the job recovers. The random source is seeded, so
// a run with the same calls in the same order injects the same faults.
package faultstorage
