package coordinator

// failureCounter counts consecutive checkpoint failures the way Flink's
// CheckpointFailureManager does: each checkpoint id counts at most once,
// failures of ids at or below the last success are ignored, a success of a
// newer id resets the count, and exceeding the tolerable number is
// terminal. Whether a failure counts at all (its reason) is decided by the
// caller (AbortReason.counts).
type failureCounter struct {
	tolerable     int
	count         int
	counted       map[CheckpointID]struct{}
	lastSucceeded CheckpointID
}

func newFailureCounter(tolerable int) failureCounter {
	return failureCounter{tolerable: tolerable, counted: map[CheckpointID]struct{}{}}
}

// failure records a counted failure of checkpoint id and reports whether
// the count now exceeds the tolerable number.
func (f *failureCounter) failure(id CheckpointID) bool {
	if f.tolerable == UnlimitedFailures || id <= f.lastSucceeded {
		return false
	}
	if _, ok := f.counted[id]; !ok {
		f.counted[id] = struct{}{}
		f.count++
	}
	return f.count > f.tolerable
}

// success records the completion of checkpoint id.
func (f *failureCounter) success(id CheckpointID) {
	if id > f.lastSucceeded {
		f.lastSucceeded = id
		f.count = 0
		clear(f.counted)
	}
}

// failureWithoutID records a counted failure that belongs to no checkpoint
// (an id reservation that failed while a trigger waited for it) and reports
// whether the count now exceeds the tolerable number. Every such failure
// counts: there is no id to count once.
func (f *failureCounter) failureWithoutID() bool {
	if f.tolerable == UnlimitedFailures {
		return false
	}
	f.count++
	return f.count > f.tolerable
}
