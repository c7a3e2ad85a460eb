// Package coordinator is stategen's checkpoint coordinator: it triggers
// checkpoints of a job's participants (its operator instances), collects
// their acknowledgements, completes, expires, subsumes and retains
// checkpoints, and takes savepoints, with the semantics of Apache Flink's
// CheckpointCoordinator.
//
// # Core and driver
//
// The coordinator is split the way etcd's raft is. Core is a deterministic
// state machine: it has no goroutine, no timer, no clock and no I/O. Every
// input carries the current time (Tick, RequestSavepoint, Ack, Decline,
// TriggerFailed, StoreResult, ReserveResult, RemoveParticipant, Shutdown),
// and everything
// the outside world must do comes out of Ready as a list of decisions, in
// the order to execute them:
//
//   - Trigger: send a trigger (id, options) to these participants;
//   - Finalize: write this checkpoint's top-level metadata through the
//     checkpoint storage, then report the outcome with StoreResult;
//   - Discard: delete these files (and perhaps the metadata first);
//   - NotifyComplete / NotifyAborted: tell the participants;
//   - Schedule: call Tick at this time;
//   - Reserve: make the id counter durable up to this limit, then report
//     the outcome with ReserveResult;
//   - Refused: a periodic trigger did not start a checkpoint, and why;
//   - Fail: too many consecutive failures — the job must fail;
//   - Report: the outcome and statistics of one checkpoint.
//
// A driver owns the goroutines, the timer, the real clock and the storage:
// it feeds the Core and executes its decisions. Package
// runtime/coordinator/driver is that driver for in-process participants and
// a checkpoint.Storage; this package does not depend on it, nor on package
// checkpoint. Tests drive the Core with a fake clock and compare decisions;
// they are exact and instant.
//
// # Lifecycle
//
// A checkpoint is triggered (it gets the next id and a deadline, Timeout
// later) and is pending until every participant it was triggered with has
// acknowledged it. Then it is finalized — its metadata is written, one
// checkpoint at a time — and on StoreResult it is completed. Any other end
// aborts it: a participant declines, the deadline passes, the driver cannot
// start it or cannot write its metadata, a participant it waits for leaves,
// a newer checkpoint completes first (subsumption), or the coordinator shuts
// down. Every triggered checkpoint ends exactly once, completed or aborted,
// with one Report; an aborted one's files are discarded and its
// participants notified.
//
//	trigger ─▶ pending ──all acked──▶ finalizing ──StoreResult(nil)──▶ completed
//	              │                       │
//	              └──decline, expiry,     └──StoreResult(err)──▶ aborted
//	                 subsumption, ...──▶ aborted
//
// # Rules
//
// Ids start at 1 (or at the recovered counter, Recovery.NextID), strictly
// increase and never repeat (see "The id counter" for restarts).
//
// A periodic trigger is due every Interval. It is refused while there is
// no participant (retried an Interval later) and before MinPause has passed
// since the last completion (retried when it has). While MaxConcurrent
// checkpoints are pending it waits, and fires as soon as one ends; the
// period restarts from each trigger, so a slow checkpoint is followed by at
// most one immediate trigger, never by a burst.
//
// Savepoints (RequestSavepoint) are forced: they ignore MaxConcurrent and
// MinPause. They are written where the user says, never subsumed, never
// counted or deleted by retention, and do not subsume pending checkpoints.
// As in Flink since 1.15, their completion is not notified to participants:
// savepoints are not part of the job's recovery lineage, so side effects
// must not be committed on them.
//
// Acknowledgements that cannot be applied are not lost: a duplicate, one
// from a sender that is not a participant of the checkpoint, one for an id
// never issued, and a late one for a checkpoint already aborted or
// completed each have their files discarded. The Core counts references to
// every file of a pending, finalizing or retained checkpoint and never
// discards a referenced file, nor a file of a completed savepoint; so a
// redelivered acknowledgement deletes nothing.
//
// When a checkpoint completes, it joins the retained set, the oldest
// retained checkpoints beyond Retained are discarded (metadata first),
// pending non-savepoint checkpoints with lower ids are aborted as subsumed,
// and the participants are notified. Completions happen in id order, so
// notified ids strictly increase and at least one checkpoint is always
// retained once one has completed.
//
// Failures are counted as Flink's CheckpointFailureManager does: declines
// (except those whose cause wraps ErrNotReady), expiries, trigger (I/O)
// failures and finalize failures count; subsumption, lost participants and
// shutdown do not; of a savepoint's failures only declines count. Each
// checkpoint counts once, failures of ids at or below the last completed one
// are ignored, and a completion resets the count. One failure more than
// TolerableFailures emits Fail with an error wrapping ErrTooManyFailures
// and the last failure, and shuts the Core down. (Recent Flink versions no
// longer count finalize failures; stategen does, because a job that cannot
// write checkpoint metadata has no recovery point.)
//
// Shutdown aborts every pending checkpoint and discards its files, except
// one being finalized, whose result is still awaited; it then refuses
// savepoints and triggers nothing. Retained checkpoints survive it.
//
// # The id counter
//
// Flink's id counter never repeats an id, across restarts and failovers
// too, because it lives in a highly available store. Deriving the counter
// from the checkpoints found in storage is not enough: a checkpoint that
// was aborted and deleted, or whose trigger never wrote a file, leaves no
// trace, and its id would be issued again after a restart — to
// participants that may still hold state or side effects keyed by it. With
// Config.IDReservation set, the Core therefore issues only ids its driver
// has made durable: it emits Reserve{Limit} and, once the driver reports
// success with ReserveResult, issues ids below Limit. A restarted job
// starts at the durable limit (Recovery.NextID), skipping ids that were
// reserved but never issued; gaps are harmless, repeats are not.
//
// Reservations come in batches of IDReservation ids and are made ahead of
// need, when half a batch remains, so one durable write covers many
// checkpoints (like Flink's ZooKeeper and Kubernetes counters, which a
// JobManager bumps once per checkpoint, but cheaper). If the ids run out
// anyway — the write is slow or failing — a periodic trigger waits for the
// outstanding reservation (Refused with RefusedNoIDs) and fires when it
// succeeds; a savepoint request fails with ErrNoIDs. A failed reservation
// that a trigger waited for counts as a failed checkpoint and the trigger
// is due again an Interval later; a failed reservation made ahead of need
// does not count and is retried after the next trigger.
//
// # Observability
//
// Every Report carries a Record: id, trigger and end time, per-participant
// acknowledgement time, sync and async durations and bytes, and the failure
// reason. Stats keeps counters, the latest records and a summary of every
// completed checkpoint (min, mean and max of durations, sizes and
// per-participant phases; Core.Stats); a driver logs the same records with
// log/slog.
package coordinator
