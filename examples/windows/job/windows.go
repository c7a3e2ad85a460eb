package job

// The windows, as Flink defines them, with the parameters of this job.
const (
	Size     = 1000 // ms: tumbling windows, and the length of sliding ones
	Slide    = 250  // ms between the starts of sliding windows
	Gap      = 300  // ms of inactivity that ends a session
	Lateness = 400  // ms a window keeps its state after it fired (allowed lateness)
)

// floorDiv is a/b rounded down (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// tumblingWindow returns the tumbling window of time t.
func tumblingWindow(t int64) Window {
	s := floorDiv(t, Size) * Size
	return Window{s, s + Size}
}

// slidingWindows returns the sliding windows of time t, latest first.
func slidingWindows(t int64) []Window {
	var ws []Window
	for s := floorDiv(t, Slide) * Slide; s > t-Size; s -= Slide {
		ws = append(ws, Window{s, s + Size})
	}
	return ws
}

// last returns a window's last millisecond: when it fires.
func (w Window) last() int64 { return w.End - 1 }

// cleanup returns when a window's state goes: its last millisecond plus
// the allowed lateness.
func (w Window) cleanup() int64 { return w.End - 1 + Lateness }

// intersects reports whether two session windows overlap or touch
// (Flink's TimeWindow.intersects): they merge.
func (w Window) intersects(o Window) bool { return w.Start <= o.End && w.End >= o.Start }

// cover returns the smallest window that holds w and o.
func (w Window) cover(o Window) Window {
	return Window{min(w.Start, o.Start), max(w.End, o.End)}
}

// ResultKey names a window's result in the sink.
type ResultKey struct {
	Kind   Kind
	User   string
	Window Window
}

// Sink is the job's output, an upsert table: a window's result, emitted
// when its watermark passes its end and again for each late event, is
// written under its key, so that a replay after a restore, which emits
// again what it emitted before the crash, converges to the same table.
type Sink map[ResultKey]Agg
