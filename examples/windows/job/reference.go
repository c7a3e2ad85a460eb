package job

import "math"

// Reference computes the job's output in plain Go, with none of stategen:
// maps of windows, a flag per window for the timer that fires it, and the
// same rules — an event is dropped from a window whose lateness has
// passed, added otherwise; a window fires when the watermark reaches its
// last millisecond, again at once for every late event, and is deleted
// once its lateness has passed too; sessions merge with every session
// their event's window touches.
func Reference(s Stream) (Sink, int64) {
	r := &reference{
		sink:     Sink{},
		windows:  map[ResultKey]*refWindow{},
		sessions: map[string]map[Window]bool{},
		wm:       math.MinInt64,
	}
	for i := range s.Len() {
		rec := s.At(i)
		if rec.Watermark {
			r.advance(rec.Time)
			continue
		}
		r.add(ResultKey{Tumbling, rec.User, tumblingWindow(rec.Time)}, rec.Value)
		for _, w := range slidingWindows(rec.Time) {
			r.add(ResultKey{Sliding, rec.User, w}, rec.Value)
		}
		r.session(rec)
	}
	r.advance(math.MaxInt64)
	return r.sink, r.dropped
}

type refWindow struct {
	agg     Agg
	pending bool // its firing timer has not fired yet
}

type reference struct {
	sink     Sink
	windows  map[ResultKey]*refWindow
	sessions map[string]map[Window]bool // each user's live session windows
	wm       int64
	dropped  int64
}

func (r *reference) add(k ResultKey, v int64) {
	if k.Window.cleanup() <= r.wm {
		r.dropped++
		return
	}
	w := r.windows[k]
	if w == nil {
		w = &refWindow{}
		r.windows[k] = w
		if k.Kind == Session {
			if r.sessions[k.User] == nil {
				r.sessions[k.User] = map[Window]bool{}
			}
			r.sessions[k.User][k.Window] = true
		}
	}
	w.agg = w.agg.add(v)
	if k.Window.last() <= r.wm {
		r.sink[k] = w.agg
	} else {
		w.pending = true
	}
}

func (r *reference) session(rec Record) {
	merged := Window{rec.Time, rec.Time + Gap}
	var touched []Window
	for w := range r.sessions[rec.User] {
		if w.intersects(merged) {
			touched = append(touched, w)
		}
	}
	for _, w := range touched {
		merged = merged.cover(w)
	}
	if merged.cleanup() <= r.wm {
		r.dropped++
		return
	}
	var agg Agg
	for _, w := range touched {
		k := ResultKey{Session, rec.User, w}
		agg = merge(agg, r.windows[k].agg)
		delete(r.windows, k)
		delete(r.sessions[rec.User], w)
	}
	if len(touched) > 0 {
		r.windows[ResultKey{Session, rec.User, merged}] = &refWindow{agg: agg}
		r.sessions[rec.User][merged] = true
	}
	r.add(ResultKey{Session, rec.User, merged}, rec.Value)
}

func (r *reference) advance(wm int64) {
	if wm <= r.wm {
		return
	}
	r.wm = wm
	for k, w := range r.windows {
		if w.pending && k.Window.last() <= wm {
			w.pending = false
			r.sink[k] = w.agg
		}
	}
	for k := range r.windows {
		if k.Window.cleanup() <= wm {
			delete(r.windows, k)
			if k.Kind == Session {
				delete(r.sessions[k.User], k.Window)
			}
		}
	}
}
