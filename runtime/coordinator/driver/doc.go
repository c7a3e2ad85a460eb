// Package driver runs the checkpoint coordinator's deterministic core
// (package coordinator) against the real world: a goroutine, a clock and a
// timer, participants (operator instances) in the same process, and a
// checkpoint.Storage.
//
// The Coordinator owns one goroutine that feeds the Core its inputs one at
// a time — acknowledgements and declines from participants, savepoint
// requests, timer ticks, the results of storage I/O — and executes the
// decisions that come out:
//
//   - Trigger: call Participant.Trigger for each participant, with the
//     checkpoint's name in the storage (checkpoint.CheckpointName(id), or
//     the savepoint's location);
//   - Finalize: assemble the participants' instance snapshots into
//     checkpoint metadata (one checkpoint.Operator per operator) and commit
//     it with checkpoint.Commit on an I/O goroutine; the outcome comes back
//     as Core.StoreResult;
//   - Discard: remove the files of rejected acknowledgements; delete a
//     checkpoint dropped by retention whole, metadata first;
//   - Report: log the record with log/slog, keep it in Stats, resolve a
//     waiting Savepoint call, and delete an aborted checkpoint whole —
//     everything under its name is its own, including what participants
//     are still writing;
//   - NotifyComplete / NotifyAborted: call the participants;
//   - Fail: close Failed and keep the error for Err.
//
// A participant writes its snapshot as one object of the triggered
// checkpoint (checkpoint.SnapshotAsync does the synchronous phase on the
// operator's goroutine and the writing in the background) and reports with
// Ack or Decline. Participant methods are called on the Coordinator's
// goroutine and must not block.
//
// At Start the Coordinator recovers from storage (Recover): the committed
// checkpoints become the retained set, and the id counter continues above
// every id found; then checkpoint.Cleanup removes crash debris.
package driver
