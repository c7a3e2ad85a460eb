// Package job is the windowing job of the example command examples/windows:
// tumbling, sliding and session windows with allowed lateness, built on
// stategen's primitives alone, and the proof that they survive a crash and
// a rescale.
//
// # The windows
//
// The input (Stream) is a synthetic stream of user events, mostly a little
// out of order and now and then late, with a watermark every few records
// that the one source broadcasts to every instance. Each event goes to the
// instance that owns its user's key group, into three windowings (Flink's
// definitions): a tumbling window of Size ms, the Size/Slide sliding
// windows of Size ms that start every Slide ms, and a session that ends
// after Gap ms without events. An event whose window is past its allowed
// lateness (its last millisecond plus Lateness at or before the watermark)
// is dropped from that window.
//
// Every window is a value of a sub-keyed state, keyed by user with the
// window as namespace (State). Two event-time timers per window
// (runtime.Timers, namespaced by TimerNS) do what Flink's WindowOperator
// does with its trigger and cleanup timers: the first, at the window's last
// millisecond, emits its result; the second, Lateness later, deletes its
// state. A late event within the lateness updates the window and emits it
// again at once. A session's event opens the window [t, t+Gap), which
// merges with every session of the user it touches: Merge moves their
// aggregates into the covering window, and their timers are deleted.
//
// The output is an upsert table (Sink) keyed by (windowing, user, window).
//
// # Crash, restore, verification
//
// Run processes the stream at parallelism PBefore, taking a checkpoint
// every CheckpointEvery records — the instances' snapshots are aligned, as
// one goroutine routes every record — with each instance's progress
// (offset, watermark, drops) in a union operator list (runtime.UnionList).
// After CrashAt it abandons the instances, restores the latest checkpoint
// at parallelism PAfter (each new instance reads only the key groups it
// owns, timers included, and every instance gets every old instance's
// progress), replays from the checkpoint's offset and runs to the end,
// where a watermark at the end of time fires and cleans up every window.
// The sink outlives the crash, as an external table would: what the
// replay emits again overwrites what was emitted before.
//
// Reference computes the same windows in plain Go — maps, no stategen — and
// the run verifies when the sinks are equal, the drops agree and no
// instance holds a window or timer after the end: "0 differences".
package job
