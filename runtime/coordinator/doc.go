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
// input carries the current time (Tick, RequestCheckpoint,
// RequestSavepoint, Ack, Decline, TriggerFailed, StoreResult,
// ReserveResult, RemoveParticipant, Shutdown), and everything the outside
// world must do comes out of Ready as a list of decisions, in the order to
// execute them:
//
//   - Trigger: send a trigger (id, options) to these participants;
//   - Finalize: write this checkpoint's top-level metadata through the
//     checkpoint storage, then report the outcome with StoreResult;
//   - Discard: delete these files (and perhaps the metadata first);
//   - NotifyComplete / NotifyAborted: tell the participants;
//   - Schedule: call Tick at this time;
//   - Reserve: make the id counter durable up to this limit, then report
//     the outcome with ReserveResult;
//   - Refused: a periodic trigger did not start a checkpoint, or an
//     on-demand request was dropped, and why;
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
// acknowledged it. If their snapshots do not cover every key group (see
// "Coverage") it is aborted there; otherwise it is finalized — its metadata is written, one
// checkpoint at a time — and on StoreResult it is completed. Any other end
// aborts it: a participant declines, the deadline passes, the driver cannot
// start it or cannot write its metadata, a participant it waits for leaves,
// a newer checkpoint completes first (subsumption), or the coordinator shuts
// down. Every triggered checkpoint ends exactly once, completed or aborted,
// with one Report; an aborted one's files are discarded and its
// participants notified.
//
//	trigger ─▶ pending ──all acked, covering──▶ finalizing ──StoreResult(nil)──▶ completed
//	              │                                  │
//	              └──decline, expiry, subsumption,   └──StoreResult(err)──▶ aborted
//	                 not covering, ...──▶ aborted
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
// On-demand checkpoints (RequestCheckpoint, Flink's manual trigger) are
// regular checkpoints taken now: they ignore MinPause but not
// MaxConcurrent — a request waits for a free slot (and for a reserved id)
// and then goes before a waiting periodic trigger, oldest first. The
// Trigger and the Record carry the request's id; a request dropped without
// a checkpoint (shutdown, no participant left, a failed id reservation) is
// answered by a Refused decision with its id.
//
// Savepoints (RequestSavepoint) are forced: they ignore MaxConcurrent and
// MinPause. They are written where the user says, never subsumed, never
// counted or deleted by retention, and do not subsume pending checkpoints.
// Their completion is notified to participants (NotifyComplete with
// Savepoint set), apart from the checkpoints': a savepoint is not part of
// the job's recovery lineage — after a crash the job restores its latest
// checkpoint, which may be older — so it implies nothing about
// checkpoints, and side effects are committed on it only when the job
// stops on it.
//
// # Coverage
//
// A checkpoint of keyed state can be restored only if it holds every key
// group. Each acknowledgement says which key groups of which operator its
// snapshot holds (Payload.KeyGroups), and when the last one arrives the
// Core checks that, for every operator named, the instances' ranges tile
// [0, maxParallelism) exactly. If they do not, the checkpoint is aborted
// (AbortIncomplete, ErrIncomplete naming the operator and key groups)
// instead of completed: so every completed checkpoint covers every key
// group of every operator, and since retention keeps the newest completed
// checkpoints, the newest restorable checkpoint is never deleted. A gap —
// an instance that had not joined yet, or had left — is benign (its cause
// wraps ErrNotReady, and it does not count as a failure); an overlap, or
// instances that disagree on maxParallelism, is a misconfigured job and
// counts. A driver that knows the job graph declines on behalf of a
// missing instance before it comes to this (see package
// runtime/coordinator/driver, Options.Expected); the check is the
// defence in depth that holds in every mode. A Recovery whose retained
// checkpoints do not cover is refused (ErrInvalidRecovery).
//
// # Finished participants and the final checkpoint
//
// A participant that reached the end of its input keeps taking part with
// its final state, and says so (Payload.Finished), as Flink's tasks do
// since FLIP-147. A checkpoint whose participants had all finished holds
// the job's final state: its Record and NotifyComplete are marked Final,
// and the job may end on it.
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
// failures, finalize failures and overlapping coverage count; subsumption,
// lost participants, coverage gaps and shutdown do not; of a savepoint's failures only declines count. Each
// checkpoint counts once, failures of ids at or below the last completed one
// are ignored, and a completion resets the count. One failure more than
// TolerableFailures emits Fail with an error wrapping ErrTooManyFailures
// and the last failure, and shuts the Core down. (Recent Flink versions no
// longer count finalize failures; stategen does, because a job that cannot
// write checkpoint metadata has no recovery point.)
//
// Shutdown aborts every pending checkpoint and discards its files, except
// one being finalized, whose result is still awaited; it refuses the
// periodic trigger and the waiting on-demand requests (Refused with
// RefusedShutdown), then refuses savepoints and requests (ErrShutdown,
// wrapping the job's failure if it failed) and triggers nothing. Retained
// checkpoints survive it.
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
// reason. Stats keeps counters — checkpoints aborted because a participant
// was not ready apart from failures (Counts.NotReady) —, the latest
// records and a summary of every
// completed checkpoint (min, mean and max of durations, sizes and
// per-participant phases; Core.Stats); a driver logs the same records with
// log/slog, and package runtime/coordinator/metrics turns them into
// OpenTelemetry metrics.
package coordinator
