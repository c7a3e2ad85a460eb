package metrics

// ScopeName is the instrumentation scope of every instrument: the meter
// is MeterProvider.Meter(ScopeName).
const ScopeName = "github.com/stategen/stategen/runtime/coordinator/metrics"

// The names of the instruments, in OpenTelemetry's semantic-convention
// style: a "stategen." namespace, dots between levels, underscores within
// a word group, and the unit in the instrument's metadata, never in its
// name. The package doc's table says what each measures. A Prometheus
// exporter appends the unit and, for counters, "_total":
// stategen.checkpoint.completed is scraped as
// stategen_checkpoint_completed_total, stategen.checkpoint.duration as
// stategen_checkpoint_duration_seconds.
const (
	// CheckpointStarted counts checkpoints and savepoints triggered.
	CheckpointStarted = "stategen.checkpoint.started"
	// CheckpointCompleted counts checkpoints and savepoints completed.
	CheckpointCompleted = "stategen.checkpoint.completed"
	// CheckpointFailed counts checkpoints aborted for a reason that counts
	// towards coordinator.Config.TolerableFailures.
	CheckpointFailed = "stategen.checkpoint.failed"
	// CheckpointAborted counts checkpoints aborted for a reason that is
	// not a failure and not a participant that was not ready: subsumed,
	// shut down, a participant lost.
	CheckpointAborted = "stategen.checkpoint.aborted"
	// CheckpointNotReady counts checkpoints aborted because a participant
	// was not ready (coordinator.Record.NotReady).
	CheckpointNotReady = "stategen.checkpoint.not_ready"
	// CheckpointInProgress is the number of checkpoints triggered and not
	// ended yet.
	CheckpointInProgress = "stategen.checkpoint.in_progress"
	// CheckpointRefused counts periodic triggers that did not start a
	// checkpoint, and on-demand requests dropped without one.
	CheckpointRefused = "stategen.checkpoint.refused"
	// CheckpointDuration is the distribution of completed checkpoints'
	// durations, trigger to completion.
	CheckpointDuration = "stategen.checkpoint.duration"
	// CheckpointSize is the distribution of the bytes the participants
	// wrote for completed checkpoints.
	CheckpointSize = "stategen.checkpoint.size"
	// CheckpointFullSize is the distribution of completed checkpoints'
	// full sizes: every data file they reference.
	CheckpointFullSize = "stategen.checkpoint.full_size"
	// CheckpointLastDuration is the duration of the latest completed
	// checkpoint.
	CheckpointLastDuration = "stategen.checkpoint.last.duration"
	// CheckpointLastSize is the bytes written for the latest completed
	// checkpoint.
	CheckpointLastSize = "stategen.checkpoint.last.size"
	// CheckpointLastFullSize is the full size of the latest completed
	// checkpoint.
	CheckpointLastFullSize = "stategen.checkpoint.last.full_size"
	// CheckpointLastID is the id of the latest completed checkpoint.
	CheckpointLastID = "stategen.checkpoint.last.id"
	// CheckpointSyncDuration is the distribution of the participants'
	// synchronous phases, per participant.
	CheckpointSyncDuration = "stategen.checkpoint.sync.duration"
	// CheckpointAsyncDuration is the distribution of the participants'
	// asynchronous phases, per participant.
	CheckpointAsyncDuration = "stategen.checkpoint.async.duration"
	// CheckpointStartDelay is the distribution of the time from a
	// trigger to the start of a participant's snapshot, per participant.
	CheckpointStartDelay = "stategen.checkpoint.start_delay"

	// RestoreDuration is the distribution of restores' durations, per
	// participant.
	RestoreDuration = "stategen.restore.duration"
	// RestoreSize is the distribution of the bytes restores read, per
	// participant.
	RestoreSize = "stategen.restore.size"
	// RestoreEntries counts the entries restored, per participant.
	RestoreEntries = "stategen.restore.entries"

	// StateEntries is the number of entries of a state at the latest
	// snapshot written, per participant and state.
	StateEntries = "stategen.state.entries"
	// StateSize is the size of a state's entries at the latest snapshot
	// written, per participant and state.
	StateSize = "stategen.state.size"
	// StoreLiveSnapshots is the number of a store's snapshots not yet
	// freed.
	StoreLiveSnapshots = "stategen.store.snapshots.live"

	// LSMBlockCacheLookups counts block-cache lookups, by result.
	LSMBlockCacheLookups = "stategen.lsm.block_cache.lookups"
	// LSMBlockCacheSize is the size of the blocks in the block cache.
	LSMBlockCacheSize = "stategen.lsm.block_cache.size"
	// LSMCompactions counts the compactions completed.
	LSMCompactions = "stategen.lsm.compactions"
	// LSMCompactionDebt estimates the bytes left to compact.
	LSMCompactionDebt = "stategen.lsm.compaction.debt"
	// LSML0Files is the number of files in level 0.
	LSML0Files = "stategen.lsm.l0.files"
	// LSML0Sublevels is the number of sublevels of level 0.
	LSML0Sublevels = "stategen.lsm.l0.sublevels"
	// LSMReadAmplification is the number of sorted runs a read may visit.
	LSMReadAmplification = "stategen.lsm.read_amplification"
	// LSMMemTableSize is the size of the memtables.
	LSMMemTableSize = "stategen.lsm.memtable.size"
	// LSMDiskUsage is the space the store's files take on disk.
	LSMDiskUsage = "stategen.lsm.disk.usage"
)

// The attribute keys.
const (
	// AttrType is "checkpoint" or "savepoint".
	AttrType = "stategen.checkpoint.type"
	// AttrAbortReason is why a checkpoint was aborted: the name of its
	// coordinator.AbortReason, e.g. "expired", "declined".
	AttrAbortReason = "stategen.checkpoint.abort.reason"
	// AttrRefuseReason is why a trigger was refused: the name of its
	// coordinator.RefuseReason, e.g. "min-pause".
	AttrRefuseReason = "stategen.checkpoint.refuse.reason"
	// AttrParticipant is a participant's id, e.g. "clicks/3".
	AttrParticipant = "stategen.participant.id"
	// AttrState is a state's name.
	AttrState = "stategen.state.name"
	// AttrCacheResult is "hit" or "miss".
	AttrCacheResult = "stategen.lsm.cache.result"
)
