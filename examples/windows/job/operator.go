package job

import (
	"fmt"
	"math"

	"github.com/stategen/stategen/runtime"
)

// Operator is one instance of the windowing operator: tumbling, sliding
// and session windows with allowed lateness, on stategen's primitives
// alone — window states keyed by user with the window as namespace,
// event-time timers (runtime.Timers) that fire windows and clean them up,
// runtime.SubKeyedValue.Merge for sessions, and a union operator list for
// its progress.
type Operator struct {
	st    *State
	store runtime.Store
	ops   *runtime.OperatorStates
	sink  Sink
	wm    int64 // the current watermark
	off   int64 // the offset of the last record handled
	// Dropped counts (event, window) pairs dropped as too late: the
	// window's allowed lateness had passed when the event came.
	Dropped int64
}

// NewOperator returns an operator on store, emitting into sink.
func NewOperator(store runtime.Store, sink Sink) (*Operator, error) {
	ops := runtime.OperatorStatesOf(store)
	st, err := OpenState(store)
	if err != nil {
		return nil, err
	}
	return &Operator{st: st, store: store, ops: ops, sink: sink, wm: math.MinInt64, off: -1}, nil
}

// Process handles one record routed to this instance: an event of a user
// whose key group it owns, or a watermark (which every instance gets).
func (o *Operator) Process(r Record) error {
	o.off = r.Offset
	if r.Watermark {
		return o.advance(r.Time)
	}
	w := tumblingWindow(r.Time)
	if err := o.add(Tumbling, o.st.Tumbling, r.User, w, r.Value); err != nil {
		return err
	}
	for _, w := range slidingWindows(r.Time) {
		if err := o.add(Sliding, o.st.Sliding, r.User, w, r.Value); err != nil {
			return err
		}
	}
	return o.session(r)
}

// add adds v to window w of user in state: unless the window's allowed
// lateness has passed (the event is dropped), it updates the aggregate,
// keeps the cleanup timer, and either fires the window at once (it is
// late, within its lateness: Flink fires it again) or keeps its timer.
func (o *Operator) add(kind Kind, state runtime.SubKeyedValue[string, Window, Agg], user string, w Window, v int64) error {
	if w.cleanup() <= o.wm {
		o.Dropped++
		return nil
	}
	var agg Agg
	if err := state.Update(user, w, func(old Agg, _ bool) Agg { agg = old.add(v); return agg }); err != nil {
		return err
	}
	return o.schedule(kind, user, w, agg)
}

// schedule registers the cleanup timer of window w and fires it or
// registers its timer.
func (o *Operator) schedule(kind Kind, user string, w Window, agg Agg) error {
	ns := TimerNS{Kind: kind, Start: w.Start, End: w.End}
	if err := o.st.Timers.Register(w.cleanup(), user, TimerNS{Kind: kind, Start: w.Start, End: w.End, Cleanup: true}); err != nil {
		return err
	}
	if w.last() <= o.wm {
		o.sink[ResultKey{kind, user, w}] = agg
		return nil
	}
	return o.st.Timers.Register(w.last(), user, ns)
}

// session adds an event to the sessions of its user: its window [t, t+Gap)
// merges with every session it touches (Merge moves their aggregates into
// the covering window; their timers are deleted).
func (o *Operator) session(r Record) error {
	merged := Window{r.Time, r.Time + Gap}
	var sources []Window
	for w, err := range o.st.Sessions.Namespaces(r.User) {
		if err != nil {
			return err
		}
		if w.intersects(merged) {
			sources = append(sources, w)
		}
	}
	for _, w := range sources {
		merged = merged.cover(w)
	}
	if merged.cleanup() <= o.wm {
		o.Dropped++
		return nil
	}
	if len(sources) > 0 {
		if err := o.st.Sessions.Merge(r.User, merged, sources, merge); err != nil {
			return err
		}
		for _, w := range sources {
			if w == merged {
				continue
			}
			for _, tm := range []runtime.Timer[string, TimerNS]{
				{Time: w.last(), Key: r.User, Namespace: TimerNS{Kind: Session, Start: w.Start, End: w.End}},
				{Time: w.cleanup(), Key: r.User, Namespace: TimerNS{Kind: Session, Start: w.Start, End: w.End, Cleanup: true}},
			} {
				if err := o.st.Timers.Delete(tm.Time, tm.Key, tm.Namespace); err != nil {
					return err
				}
			}
		}
	}
	var agg Agg
	if err := o.st.Sessions.Update(r.User, merged, func(old Agg, _ bool) Agg { agg = old.add(r.Value); return agg }); err != nil {
		return err
	}
	return o.schedule(Session, r.User, merged, agg)
}

// state returns the window state of kind.
func (o *Operator) state(kind Kind) runtime.SubKeyedValue[string, Window, Agg] {
	switch kind {
	case Tumbling:
		return o.st.Tumbling
	case Sliding:
		return o.st.Sliding
	}
	return o.st.Sessions
}

// advance moves the watermark to wm: every timer due fires, in (time,
// user, window) order — a window's result is emitted at its last
// millisecond, its state deleted once its lateness has passed.
func (o *Operator) advance(wm int64) error {
	if wm <= o.wm {
		return nil
	}
	o.wm = wm
	return o.st.Timers.Advance(wm, func(tm runtime.Timer[string, TimerNS]) error {
		ns := tm.Namespace
		w := Window{ns.Start, ns.End}
		state := o.state(ns.Kind)
		if ns.Cleanup {
			return state.Delete(tm.Key, w)
		}
		agg, ok, err := state.Get(tm.Key, w)
		if err != nil || !ok {
			return err
		}
		o.sink[ResultKey{ns.Kind, tm.Key, w}] = agg
		return nil
	})
}

// Finish fires and cleans up every window: the end of the stream is a
// watermark at the end of time.
func (o *Operator) Finish() error { return o.advance(math.MaxInt64) }

// mark records the operator's progress in its operator state, for the
// snapshot the caller takes next.
func (o *Operator) mark() error {
	return o.st.Progress.Replace([]Progress{{Offset: o.off, Watermark: o.wm, Dropped: o.Dropped}})
}

// resume reads the progress restored into the operator state — every old
// instance's, a union list — and returns the offset to replay after, which
// they share, and the drops they had counted between them. With no
// progress restored it is the stream's start.
func (o *Operator) resume() (off, dropped int64, err error) {
	ps := o.st.Progress.Elements()
	if len(ps) == 0 {
		return -1, 0, nil
	}
	off, wm := ps[0].Value.Offset, ps[0].Value.Watermark
	for _, p := range ps {
		dropped += p.Value.Dropped
	}
	for _, p := range ps[1:] {
		if p.Value.Offset != off || p.Value.Watermark != wm {
			return 0, 0, fmt.Errorf("windows: old instance %d stopped at offset %d (watermark %d), instance %d at %d (watermark %d): the snapshots are not aligned",
				ps[0].Origin, off, wm, p.Origin, p.Value.Offset, p.Value.Watermark)
		}
	}
	o.off, o.wm = off, wm
	return off, dropped, nil
}

// empty reports whether every window state and the timers are empty, as
// they must be after Finish.
func (o *Operator) empty() (bool, error) {
	for _, s := range []runtime.SubKeyedValue[string, Window, Agg]{o.st.Tumbling, o.st.Sliding, o.st.Sessions} {
		for _, err := range s.AllKeys() {
			return false, err
		}
	}
	_, ok, err := o.st.Timers.Next()
	return !ok, err
}
