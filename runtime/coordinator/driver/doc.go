// Package driver runs the checkpoint coordinator's deterministic core
// (package coordinator) against the real world: a goroutine, a clock and a
// timer, participants (operator instances) in the same process, and a
// checkpoint.Storage. It also holds what a job needs around it: Instance,
// the participant helper for an operator with a runtime.Store, and the
// restore of the latest checkpoint at any parallelism.
//
// # A job's life
//
//  0. Start from a savepoint (optional). A new deployment that starts from
//     a savepoint calls StartFrom once, before anything else: until a
//     checkpoint of the new run completes, the restores below return the
//     savepoint — also after a crash before the first checkpoint.
//  1. Restore. Each operator instance restores its share of the latest
//     checkpoint (RestoreLatest, or PlanLatest and RestorePlan.Restore for
//     the whole operator) into a fresh store, at the job's parallelism, and
//     takes the old instances' operator-state blobs — its sources'
//     positions — to resume from. ErrNoCheckpoint means a fresh start.
//  2. Start. Start recovers the coordinator from the storage (Recover): the
//     committed checkpoints become the retained set, the id counter
//     continues where it stopped; crash debris is removed
//     (checkpoint.Cleanup) and a first batch of ids is reserved.
//     Options.Expected gives it the job graph (see below).
//  3. Join. Each instance joins (Coordinator.Join) and its operator loop
//     selects on its input, Instance.Triggers and Instance.Notifications.
//  4. Run. Every Interval a checkpoint is triggered; see below.
//     TriggerCheckpoint takes one now, Savepoint a savepoint. If
//     checkpoints keep failing, Failed is closed and Err says why: stop the
//     job and restart it from step 1.
//  5. End. An instance whose input ends calls Instance.Finish with its
//     final positions and keeps its store open; it goes on taking part in
//     checkpoints by itself. Once every instance has finished, the next
//     checkpoint is final (see "Ending a job"). Then close each Instance
//     and the Coordinator: pending checkpoints are aborted and their files
//     deleted; retained checkpoints stay. (A job that stops without
//     ending — to be restarted, or to change its code — closes them at
//     once, or stops on a savepoint.)
//
// # The job graph
//
// A checkpoint of keyed state can be restored only if it holds every key
// group, so it must include every instance of every operator.
// Options.Expected says which those are — each operator's parallelism, as
// Flink's JobManager knows the job graph — and every checkpoint is
// triggered on all of them, joined or not: an instance that has not joined
// yet, or was closed, has its checkpoints declined on its behalf as not
// ready (coordinator.ErrNotReady: aborted, not a failure, counted in
// Counts.NotReady). So the triggers that fire while the instances join one
// by one, or after one left, complete nothing, and the checkpoint the job
// restores always holds everything. Join refuses an instance the graph does
// not have (ErrUnexpectedInstance: an unknown operator, an index beyond
// the parallelism, a Store that does not own the instance's key groups) or
// that has joined already (ErrDuplicateInstance). Without Expected the
// core's coverage check still keeps incomplete checkpoints from completing
// (see package coordinator, "Coverage"), but they are written first and
// aborted after; set it for every keyed job.
//
// # Ending a job
//
// A bounded job — a backfill, a test, a stream that closes — should end on
// a final checkpoint that holds every instance's last state and source
// position, so that it can be restored (to resume, or to inspect) exactly
// where it ended. This is Flink's FLIP-147, and it works the same way:
//
//	// On each operator's goroutine, after its last record:
//	err := inst.Finish(positions)    // the instance answers triggers itself from now on
//	for n := range inst.Notifications() {
//		if n.Final { break }         // the final checkpoint completed: commit, then stop
//	}
//	inst.Close()
//
//	// In the job, once every instance has finished (or just wait: the next
//	// periodic checkpoint is final too):
//	t, err := coord.TriggerCheckpoint(ctx)
//	rec, err := t.Wait(ctx)          // rec.Final; coord.Finished() is closed
//	coord.Close(ctx)
//
// A finished instance snapshots its unchanging store for every trigger,
// marked finished (coordinator.Payload.Finished), so the checkpoints taken
// while other instances still run hold its final state too, and the first
// one in which every instance had finished is final
// (coordinator.Record.Final, Notification.Final).
//
// # Savepoint starts
//
// A job deployed from a savepoint (say, after a code change) restores the
// savepoint with PlanRestore. If it crashed before its first checkpoint,
// RestoreLatest would find nothing newer — or an older run's checkpoint —
// and the savepoint's state would be lost. StartFrom therefore records
// the savepoint as the job's origin in the storage, next to the id
// counter, with the first checkpoint id of the new run: Latest returns the
// newest complete checkpoint of the run, or the savepoint while there is
// none, and never a checkpoint older than the savepoint. The coordinator
// never deletes a savepoint (the user owns it), and every checkpoint
// written today is self-contained, the first one after the savepoint
// included.
//
// # The participant protocol
//
// A participant is one operator instance (Participant; Instance implements
// it for the common case). For each checkpoint:
//
//   - The Coordinator calls Participant.Trigger with the checkpoint's id,
//     deadline, storage and name. Participant methods run on the
//     Coordinator's goroutine and must not block: an Instance puts the
//     trigger in its mailbox (the Triggers channel).
//   - The operator takes the trigger between two records and runs the
//     synchronous phase on its own goroutine (Instance.Snapshot calls
//     Store.Snapshot and records the operator-state blob), so the snapshot
//     and the blob describe the same point of the input.
//   - The asynchronous phase writes the snapshot as one object of the
//     checkpoint (checkpoint.WriteAsync) while the operator goes on.
//   - When the write ends the participant acknowledges (Coordinator.Ack,
//     with the file, the sync and async durations, the bytes and the blob)
//     or declines (Coordinator.Decline; a cause wrapping
//     coordinator.ErrNotReady does not count as a failure).
//   - When every participant has acknowledged, the Coordinator commits the
//     checkpoint's metadata and calls NotifyComplete: the operator may now
//     commit side effects up to the checkpoint — a source commits the
//     positions of its blob. A savepoint's completion is notified too,
//     marked as one (Completion.Savepoint): it implies nothing about
//     checkpoints, and is committed on only when the job stops on it. If the checkpoint is aborted instead
//     (declined, expired, subsumed, shut down), NotifyAborted: an Instance
//     cancels the write, and the Coordinator deletes the checkpoint's
//     files, also those acknowledged too late.
//
// # The Coordinator's goroutine
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
//   - Reserve: write the durable id counter on an I/O goroutine; the
//     outcome comes back as Core.ReserveResult;
//   - Discard: remove the files of rejected acknowledgements; delete a
//     checkpoint dropped by retention whole, metadata first;
//   - Report: log the record with log/slog, keep it in Stats, resolve a
//     waiting Savepoint call, and delete an aborted checkpoint whole —
//     everything under its name is its own, including what participants
//     are still writing;
//   - NotifyComplete / NotifyAborted: call the participants;
//   - Fail: close Failed and keep the error for Err.
//
// # The id counter
//
// Checkpoint ids never repeat, across restarts too: the Coordinator keeps a
// durable counter — by default (see Options.Counter) objects under the
// reserved name checkpoint.CoordinatorName, which checkpoint.Cleanup leaves
// alone — and the Core issues only ids the counter covers, reserving them
// coordinator.DefaultIDReservation at a time (one small write per hundred
// checkpoints by default), ahead of need. After a crash the next id is the
// counter, so even an id whose checkpoint left nothing in storage is never
// issued again. See coordinator.Config.IDReservation.
//
// # Beyond one process
//
// Three seams let the same driver run a job whose coordinator can fail
// over and whose instances live in other processes (package
// runtime/coordinator/etcdcoord does so through etcd):
//
//   - Options.Counter replaces the storage's id counter with another
//     IDCounter, e.g. one in a consensus store that two coordinators can
//     never both advance;
//   - Options.Completed makes a CompletedStore, rather than the storage's
//     listing, the authority on which checkpoints completed: a checkpoint
//     completes when the index lists it, retention drops it from the index
//     before deleting it, and Start deletes committed checkpoints the
//     index does not list (a deposed coordinator's);
//   - NewInstance makes an Instance whose coordinator is elsewhere: a
//     transport calls its Participant as messages arrive, and it answers
//     to an Upstream.
//
// # Observability
//
// Every completed or failed checkpoint is logged (Options.Logger, at Info
// and Warn) with its id, duration, bytes and, per participant, whether it
// acknowledged, its sync and async durations and bytes; a failure adds its
// reason, the participant at fault and the error. Stats serves the same
// records, counters and a summary to other goroutines. With
// Options.MeterProvider the same decisions feed OpenTelemetry instruments
// (package runtime/coordinator/metrics), and each Instance exports its
// store's state sizes, counted by its snapshot writes, and live snapshots
// (InstanceOptions.MeterProvider).
package driver
