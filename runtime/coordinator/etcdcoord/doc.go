// Package etcdcoord coordinates a job's checkpoints across processes
// through etcd: the checkpoint coordinator runs in one of several
// coordinator processes, elected leader, and the operator instances run in
// worker processes of their own. It is not a second coordinator: the
// leader runs the deterministic core (package coordinator) under the
// ordinary driver (package runtime/coordinator/driver), and this package
// supplies what the driver needs from outside one process — a durable id
// counter and a completed-checkpoint index in etcd, participants that are
// messages in etcd, and the election that says which process runs it.
// Checkpoint data never goes through etcd: instances write their snapshots
// to the job's checkpoint.Storage (a shared directory, an object store),
// and etcd carries only small control messages.
//
//	coordinator A (leader)      coordinator B (standby)
//	  driver + core               campaigning
//	       │  ▲                        │
//	  triggers, notifications     election key
//	       ▼  │ acks                   ▼
//	  ┌──────────── etcd: /stategen/<job>/ ────────────┐
//	  │ election/  counter  completed  members/        │
//	  │ inbox/<instance>/{t,n}/<id>   acks/<id>/<inst> │
//	  └────────────────────────────────────────────────┘
//	       ▲  │                         ▲
//	  worker: Instance "op/0"      worker: Instance "op/1"   ──▶ checkpoint.Storage
//
// # Use
//
// A coordinator process calls StartCoordinator with the job, its storage
// and its coordinator.Config; it campaigns and, when elected, leads until
// it dies, loses its lease, or is closed. A worker process restores its
// instance's share of the latest checkpoint (RestoreLatest), then calls
// Join for each operator instance: the returned Instance is a
// driver.Instance — its operator loop selects on Triggers and
// Notifications and calls Snapshot, exactly as in one process. Each
// process uses its own etcd client. Leader says which coordinator leads,
// and ReadIndex and Latest what the job has completed.
//
// # Election and fencing
//
// Coordinators campaign with concurrency.Election on the job's election
// prefix, each under a session whose lease (Options.LeaseTTL) is kept
// alive while the process lives. When the leader dies its lease expires,
// its election key is deleted, and the oldest standby becomes leader. On
// takeover it recovers the completed checkpoints and the id counter from
// etcd, aborts the checkpoints its predecessor left pending (their
// instances are notified with an error wrapping ErrFailover, and their
// files are deleted with the storage's crash debris, see checkpoint.Cleanup),
// adds the registered instances and starts triggering.
//
// A leader that does not know it was deposed — paused, or cut off from
// etcd longer than its lease — must not corrupt its successor's state.
// Every write a leader makes is therefore a transaction guarded by its
// election key: it applies only while that key exists with the create
// revision the election gave it (see ErrNotLeader). Once the lease has
// expired, the old leader cannot write the counter, the completed index,
// triggers or notifications, however late its requests arrive; and it
// deletes from the storage only what is its own: its own checkpoints'
// files, never a checkpoint the index still lists (it must drop a
// checkpoint from the index first, which the fence forbids). A deposed
// leader stops as soon as it notices — its session ends, or a write is
// fenced off — and campaigns again as a standby; from then on it writes
// nothing, not even the aborts of the checkpoints it left pending, which
// its successor notifies as failovers.
//
// # The id counter and the completed index
//
// The checkpoint-id counter (Counter, a driver.IDCounter) is one key
// holding a high-water mark: ids below it may have been issued. The driver
// reserves ids in batches ahead of need; each reservation is a
// compare-and-swap from the revision the coordinator last saw, so that two
// coordinators never claim the same ids, and a new leader starts at the
// mark, above every id its predecessors could have issued. Ids never
// repeat across failovers, even for checkpoints that left nothing in the
// storage.
//
// The completed-checkpoint index (a driver.CompletedStore) is one key
// listing the completed, retained checkpoints in id order, each naming its
// metadata's checkpoint in the storage. A checkpoint completes when its
// metadata is committed to the storage and then listed; restores read the
// index (Latest, RestoreLatest), so a checkpoint a deposed leader
// committed but could not list is never restored, and the next leader
// deletes it. The first leader of a job that ran without etcd lists the
// checkpoints it finds in the storage.
//
// # Messages between the leader and the instances
//
// All keys live under Job.Prefix/Job.Name (default /stategen/<job>/);
// instance ids are path-escaped in keys ("op/3" is op%2F3). Values are
// versioned JSON.
//
//   - members/<instance>: an instance's registration (its operator), put
//     under the instance's own lease. The leader watches members/: a new
//     key makes the instance a participant; a deleted one — the instance
//     left, or its lease expired because its process died — aborts the
//     pending checkpoints still waiting for it, as the core's rules say
//     (coordinator.AbortParticipantLost; not counted as a failure). See
//     "Expected participants" for what a participant is.
//   - inbox/<instance>/t/<id>: a trigger for the instance. The instance
//     watches its inbox and hands triggers to its driver.Instance.
//   - acks/<id>/<instance>: the instance's acknowledgement (its
//     checkpoint.SnapshotResult: file, key groups, states, blob, durations)
//     or decline. The leader watches acks/, feeds each answer to the
//     driver, and deletes it.
//   - inbox/<instance>/n/<id>: the end of a checkpoint for the instance,
//     completed or aborted (with the coordinator.AbortError's reason and
//     cause). The leader writes it and deletes the trigger in the same
//     transaction; the instance deletes the notification once handled.
//
// So the keys of a checkpoint are gone when it ends, and a departed
// instance's inbox is wiped. Every watch starts at a known revision and
// resumes after the last event it saw, so nothing is missed across
// reconnects; if etcd compacted that revision away, the watcher reads the
// keys present instead (pending work is exactly what is still in etcd).
// The leader's writes are queued and written in order by one goroutine,
// several to a transaction, and retried until they land or the fence
// fails; the driver's participant calls never wait for etcd.
//
// # Expected participants
//
// A checkpoint of a keyed job is restorable only if it holds every key
// group, so it must include every operator instance of the job — and etcd
// alone cannot say which instances those are: a dead instance's
// registration expires, and a restarted job's instances join one at a
// time. Options.Expected is therefore the job graph, each operator's
// parallelism, as Flink's JobManager knows it, and the leader hands it to
// its driver (driver.Options.Expected), which triggers every checkpoint on
// every expected instance ("op/0" … "op/<p-1>"), registered or not. A
// registered instance is the driver participant of its id; for one that
// is not, the driver declines each trigger on its behalf with an error
// wrapping coordinator.ErrNotReady: the checkpoint aborts without counting
// towards TolerableFailures — Flink likewise declines to trigger while a
// task is not running — and no checkpoint completes without that
// instance. When a registration goes, the instance becomes absent again
// in one step of the driver, so no checkpoint can slip in between. A
// registration that Expected does not name (an unknown operator, an index
// not below the parallelism) is refused (driver.ErrUnexpectedInstance),
// with an error in the log, and never takes part in a checkpoint.
// Changing a parallelism means starting the coordinators again with the
// new Expected.
//
// Without Expected the participants are exactly the registered instances.
// The core still never completes a checkpoint that lacks key groups (see
// package coordinator, "Coverage"): one triggered after an instance died,
// or before all of a restarted job's instances joined, is aborted as
// incomplete once the others acknowledge — written for nothing. That mode
// suits jobs whose instances hold no keyed state, and tests; a keyed job
// sets Expected.
//
// # Finished instances, on-demand and final checkpoints
//
// A worker whose input ends calls driver.Instance.Finish on its Instance
// and keeps its process up: the Instance answers triggers with its final
// state, marked finished in its acknowledgement, so checkpoints keep
// completing while other workers run. Coordinator.TriggerCheckpoint takes
// a checkpoint now, on the leader; once every instance has finished, the
// next checkpoint is final, and its notification says so
// (driver.Notification.Final) — the worker may then exit. Savepoint
// completions are notified too, marked as savepoints.
//
// # Failover time
//
// A dead leader is noticed when its lease expires: at most LeaseTTL after
// its last keep-alive (etcd checks expiry every half second). The standby
// is then elected at once, recovers in a few round trips, and triggers the
// next checkpoint one Config.Interval after its takeover — so failover,
// from the leader's death to the new leader's first trigger, takes about
// LeaseTTL + Interval, within two lease periods when Interval is shorter
// than the lease. A leader that shuts down cleanly (Close) resigns, and its
// standby takes over at once.
package etcdcoord
