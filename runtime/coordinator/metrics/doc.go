// Package metrics is stategen's instrument set: the checkpoint, restore
// and state metrics of a job, through the OpenTelemetry metric API
// (go.opentelemetry.io/otel/metric). Like any library instrumented with
// OpenTelemetry, stategen depends on the API only; the application picks
// the SDK, the exporter (Prometheus, OTLP, ...) and the MeterProvider,
// and passes it in an option — driver.Options.MeterProvider,
// driver.InstanceOptions.MeterProvider, etcdcoord.Options.MeterProvider.
// Without one nothing is recorded and nothing is paid: the driver keeps nil
// recorders, and an Instance does not wrap its snapshots.
//
// # Where measurements come from
//
// Job metrics come from the coordinator's decisions (package coordinator):
// the driver hands every Trigger, Refused and Report to Checkpoints, on
// its loop goroutine, after the Core has made them. A Report carries the
// checkpoint's Record — its outcome, abort reason, timings and, per
// participant, the durations of the two snapshot phases and the bytes —
// so every job metric agrees with Stats and the log: Counts.Completed is
// stategen.checkpoint.completed, Counts.Failed is the sum of
// stategen.checkpoint.failed and stategen.checkpoint.aborted, and
// Counts.NotReady is stategen.checkpoint.not_ready. Each aborted
// checkpoint lands in exactly one of those three: not ready
// (Record.NotReady: a participant had not joined, had left or declined as
// not ready — expected while a job starts, rescales or ends), failed (its
// abort counts towards Config.TolerableFailures: AbortError.Counted — the
// ones to alert on), or aborted (subsumed, shut down, a participant lost).
//
// Store metrics are observable instruments, read by a callback when the
// reader collects, so a store's Put and Get pay nothing for them. A store
// is used by one goroutine and the callback runs on another, so the
// callback reads only what is safe to read from any goroutine: the live
// snapshot count (an atomic counter in every backend, see
// storekit.Snapshots), an LSM backend's engine statistics (Pebble's own
// metrics, under the lock that guards its close; runtime.LSMStats), and
// the per-state entries and bytes that the latest checkpoint write
// counted. The latter are counted by the write itself (Store.Measure
// wraps the snapshot, and its Scans count what they pass on the writer's
// goroutines): nothing on the operator's goroutine, nothing in the
// synchronous phase, the same meaning on every backend — what the
// checkpoint holds of each state — and up to date at every checkpoint,
// as Flink's state size is. No backend can count a map state's entries
// in less than a scan of its keys, and Pebble not even its values'
// bytes, so live per-state counts would cost either Put and Get or a
// scan.
//
// Restore metrics are recorded by the caller of a restore
// (RecordRestore, with the restore's checkpoint.RestoreStats).
//
// # Instruments
//
// Names follow OpenTelemetry's semantic conventions: a "stategen."
// namespace, dot-separated, units in UCUM in the instrument's metadata
// ("s", "By", "{checkpoint}"). Durations are in seconds, as floats;
// sizes in bytes. A Prometheus exporter adds the unit and "_total" to the
// names: stategen_checkpoint_completed_total,
// stategen_checkpoint_duration_seconds. The attributes are
//
//	stategen.checkpoint.type          "checkpoint" or "savepoint"
//	stategen.checkpoint.abort.reason  coordinator.AbortReason: "declined", "expired",
//	                                  "trigger-failed", "finalize-failed", "incomplete",
//	                                  "subsumed", "participant-lost", "shutdown"
//	stategen.checkpoint.refuse.reason coordinator.RefuseReason: "too-many-pending",
//	                                  "min-pause", "shutdown", "no-participants", "no-ids"
//	stategen.participant.id           a participant (operator instance), e.g. "clicks/3"
//	stategen.state.name               a state's name
//	stategen.lsm.cache.result         "hit" or "miss"
//
// Job instruments (Checkpoints; the histograms and last-value gauges
// describe completed checkpoints only):
//
//	instrument                          kind           unit          attributes          meaning                                             Flink
//	stategen.checkpoint.started         Counter        {checkpoint}  type                triggered                                           totalNumberOfCheckpoints
//	stategen.checkpoint.completed       Counter        {checkpoint}  type                completed                                           numberOfCompletedCheckpoints
//	stategen.checkpoint.failed          Counter        {checkpoint}  type, abort.reason  aborted, counting towards TolerableFailures         numberOfFailedCheckpoints (a)
//	stategen.checkpoint.aborted         Counter        {checkpoint}  type, abort.reason  aborted, not a failure: subsumed, shutdown, lost    numberOfFailedCheckpoints (a)
//	stategen.checkpoint.not_ready       Counter        {checkpoint}  type, abort.reason  aborted: a participant was not ready                numberOfFailedCheckpoints (a)
//	stategen.checkpoint.in_progress     UpDownCounter  {checkpoint}  type                triggered, not ended yet                            numberOfInProgressCheckpoints
//	stategen.checkpoint.refused         Counter        {trigger}     refuse.reason       triggers that started no checkpoint                 (none)
//	stategen.checkpoint.duration        Histogram      s             type                trigger to completion                               lastCheckpointDuration, history
//	stategen.checkpoint.size            Histogram      By            type                bytes the participants wrote                        lastCheckpointSize (checkpointed size), history
//	stategen.checkpoint.full_size       Histogram      By            type                size of every data file referenced (b)              lastCheckpointFullSize, history
//	stategen.checkpoint.last.duration   Gauge          s             type                of the latest completed                             lastCheckpointDuration
//	stategen.checkpoint.last.size       Gauge          By            type                of the latest completed                             lastCheckpointSize
//	stategen.checkpoint.last.full_size  Gauge          By            type                of the latest completed                             lastCheckpointFullSize
//	stategen.checkpoint.last.id         Gauge          {checkpoint}  type                id of the latest completed                          lastCompletedCheckpointId
//	stategen.checkpoint.sync.duration   Histogram      s             participant.id      a participant's synchronous phase                   Sync Duration (per subtask)
//	stategen.checkpoint.async.duration  Histogram      s             participant.id      a participant's asynchronous phase (the write)      Async Duration (per subtask)
//	stategen.checkpoint.start_delay     Histogram      s             participant.id      trigger to the start of its snapshot (c)            checkpointStartDelayNanos
//
// Restore instruments (Restores):
//
//	stategen.restore.duration           Histogram      s             participant.id      a participant's restore                             restore time (task initialization)
//	stategen.restore.size               Histogram      By            participant.id      bytes its restore read                              restored checkpoint size
//	stategen.restore.entries            Counter        {entry}       participant.id      entries restored                                    (none)
//
// Store instruments (Store; observable, read at collection):
//
//	stategen.state.entries              Gauge          {entry}       participant.id, state.name  entries of the state at the latest checkpoint   state size (d)
//	stategen.state.size                 Gauge          By            participant.id, state.name  bytes of its keys, namespaces, values (e)       stateSize (d)
//	stategen.store.snapshots.live       Gauge          {snapshot}    participant.id      snapshots not freed; only growing is a leak         RocksDB num-snapshots
//	stategen.lsm.block_cache.lookups    Counter        {lookup}      participant.id, lsm.cache.result  hits and misses: hit rate           RocksDB block-cache-hit/-miss
//	stategen.lsm.block_cache.size       Gauge          By            participant.id      blocks in the cache                                 RocksDB block-cache-usage
//	stategen.lsm.compactions            Counter        {compaction}  participant.id      compactions completed                               RocksDB compaction counts
//	stategen.lsm.compaction.debt        Gauge          By            participant.id      estimated bytes left to compact                     RocksDB estimate-pending-compaction-bytes
//	stategen.lsm.l0.files               Gauge          {file}        participant.id      files in level 0                                    RocksDB num-files-at-level0
//	stategen.lsm.l0.sublevels           Gauge          {sublevel}    participant.id      sublevels of level 0                                (none)
//	stategen.lsm.read_amplification     Gauge          {run}         participant.id      sorted runs a read may visit                        (none)
//	stategen.lsm.memtable.size          Gauge          By            participant.id      memtables                                           RocksDB size-all-mem-tables
//	stategen.lsm.disk.usage             Gauge          By            participant.id      the store's files on disk                           RocksDB total-sst-files-size
//
// (a) Flink counts every abort as failed, also subsumed checkpoints and
// triggers declined because tasks were not running; their sum is
// numberOfFailedCheckpoints. (b) Every checkpoint stategen writes today is
// self-contained, so its full size equals its size; it would exceed it for
// a checkpoint that references files of earlier ones. (c) The
// coordinator sees the trigger leave and the acknowledgement arrive; what
// the two phases do not account for is the wait before the snapshot began
// (the operator finishing its record, a full mailbox) plus the
// acknowledgement's trip back, as Flink's start delay includes the
// barrier's trip. (d) Flink reports a task's state size per checkpoint;
// stategen per state and participant, counted by the write. (e) The bytes
// of the encoded keys, namespaces, user keys and values: what the state
// holds, before the checkpoint format's framing.
//
// # A dashboard
//
// Checkpoint health: rate(stategen.checkpoint.completed) and
// rate(stategen.checkpoint.failed) by abort.reason, with
// stategen.checkpoint.in_progress and the last.* gauges; not_ready rising
// during a deploy is normal, failed never is. Latency: the p99 of
// stategen.checkpoint.duration, broken down by the p99 of sync.duration,
// async.duration and start_delay per participant (a slow operator shows as
// start_delay, slow storage as async.duration). Size: last.size and the
// sum of stategen.state.size by state. Pebble: the hit rate from
// lsm.block_cache.lookups, and lsm.l0.sublevels with lsm.compaction.debt
// for a tree that falls behind.
package metrics
