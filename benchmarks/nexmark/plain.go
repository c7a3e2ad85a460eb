package nexmark

// The five queries in plain Go, with none of stategen: Go maps of Go
// values, and a binary heap of timers per query. They apply the rules of
// the stategen queries (stategen.go) to the same stream and watermarks,
// and so must emit the same rows: the test holds them to it, and the
// benchmark runs them beside the stategen queries as the limit of this
// machine.

// NewPlain returns query name (one of Queries, or "all") in plain Go,
// emitting into out.
func NewPlain(name string, out *Output) (Query, error) {
	names, err := expand(name)
	if err != nil {
		return nil, err
	}
	var qs []Query
	for _, n := range names {
		var q Query
		switch n {
		case "q3":
			q = &plainQ3{out: out, wm: minTime, persons: map[int64]Q3Person{}, pending: map[int64][]int64{}, expiry: map[int64]int64{}}
		case "q5":
			q = &plainQ5{out: out, wm: minTime, counts: map[int64]map[int64]int64{}}
		case "q7":
			q = &plainQ7{out: out, wm: minTime, windows: map[int64]*plainQ7Window{}}
		case "q8":
			q = &plainQ8{out: out, wm: minTime, windows: map[int64]map[int64]*plainQ8Cell{}}
		case "q11":
			q = &plainQ11{out: out, wm: minTime, sessions: map[int64][]plainSession{}}
		}
		qs = append(qs, q)
	}
	return combine(qs), nil
}

// timer is a timer of a plain query: due at time, for key; seq orders
// timers of one time by registration, and tells a timer from a stale one.
type timer[K any] struct {
	time int64
	seq  uint64
	key  K
}

// timerHeap is a binary min-heap of timers by (time, seq). It is written
// out rather than on container/heap, whose Push boxes every element.
type timerHeap[K any] struct {
	h   []timer[K]
	seq uint64
}

func (t *timerHeap[K]) less(i, j int) bool {
	a, b := &t.h[i], &t.h[j]
	return a.time < b.time || (a.time == b.time && a.seq < b.seq)
}

// push adds a timer at time for key and returns its seq.
func (t *timerHeap[K]) push(time int64, key K) uint64 {
	t.seq++
	t.add(timer[K]{time, t.seq, key})
	return t.seq
}

// repush adds tm again, at time, with its seq.
func (t *timerHeap[K]) repush(time int64, tm timer[K]) {
	tm.time = time
	t.add(tm)
}

func (t *timerHeap[K]) add(tm timer[K]) {
	t.h = append(t.h, tm)
	for i := len(t.h) - 1; i > 0; {
		p := (i - 1) / 2
		if !t.less(i, p) {
			break
		}
		t.h[i], t.h[p] = t.h[p], t.h[i]
		i = p
	}
}

// pop removes and returns the earliest timer if it is due at wm.
func (t *timerHeap[K]) pop(wm int64) (timer[K], bool) {
	if len(t.h) == 0 || t.h[0].time > wm {
		return timer[K]{}, false
	}
	top := t.h[0]
	n := len(t.h) - 1
	t.h[0] = t.h[n]
	t.h = t.h[:n]
	for i := 0; ; {
		l, s := 2*i+1, i
		if l < n && t.less(l, s) {
			s = l
		}
		if r := l + 1; r < n && t.less(r, s) {
			s = r
		}
		if s == i {
			break
		}
		t.h[i], t.h[s] = t.h[s], t.h[i]
		i = s
	}
	return top, true
}

// plainQ3 is q3: a map of persons, of pending auctions and of each
// seller's cleanup time; a cleanup timer is live while it is the seller's
// cleanup time (a moved timer is left in the heap, stale).
type plainQ3 struct {
	out     *Output
	wm      int64
	persons map[int64]Q3Person
	pending map[int64][]int64
	expiry  map[int64]int64
	timers  timerHeap[int64]
}

func (q *plainQ3) Event(e *Event) error {
	var seller int64
	switch e.Kind {
	case KindPerson:
		p := e.Person
		if !inQ3State(p.State) {
			return nil
		}
		seller = p.ID
		if _, ok := q.persons[seller]; ok {
			return nil
		}
		q.persons[seller] = Q3Person{Name: p.Name, City: p.City, State: p.State}
		for _, id := range q.pending[seller] {
			q.out.Q3 = append(q.out.Q3, Q3Row{Name: p.Name, City: p.City, State: p.State, Auction: id})
		}
		delete(q.pending, seller)
	case KindAuction:
		a := e.Auction
		if a.Category != q3Category {
			return nil
		}
		seller = a.Seller
		if p, ok := q.persons[seller]; ok {
			q.out.Q3 = append(q.out.Q3, Q3Row{Name: p.Name, City: p.City, State: p.State, Auction: a.ID})
		} else {
			q.pending[seller] = append(q.pending[seller], a.ID)
		}
	default:
		return nil
	}
	at := e.Time + Q3Wait
	if old, ok := q.expiry[seller]; ok && old == at {
		return nil
	}
	q.expiry[seller] = at
	q.timers.push(at, seller)
	return nil
}

func (q *plainQ3) Watermark(wm int64) error {
	if wm <= q.wm {
		return nil
	}
	q.wm = wm
	for {
		t, ok := q.timers.pop(wm)
		if !ok {
			return nil
		}
		if at, live := q.expiry[t.key]; live && at == t.time {
			delete(q.persons, t.key)
			delete(q.pending, t.key)
			delete(q.expiry, t.key)
		}
	}
}

// plainQ5 is q5: a map of windows (by start) of maps of counts (by
// auction), and a timer per window.
type plainQ5 struct {
	out    *Output
	wm     int64
	counts map[int64]map[int64]int64
	timers timerHeap[int64]
}

func (q *plainQ5) Event(e *Event) error {
	if e.Kind != KindBid {
		return nil
	}
	for start := latestSliding(e.Time); start > e.Time-WindowSize; start -= WindowPeriod {
		m := q.counts[start]
		if m == nil {
			m = map[int64]int64{}
			q.counts[start] = m
			q.timers.push(Window{start, start + WindowSize}.last(), start)
		}
		m[e.Bid.Auction]++
	}
	return nil
}

func (q *plainQ5) Watermark(wm int64) error {
	if wm <= q.wm {
		return nil
	}
	q.wm = wm
	for {
		t, ok := q.timers.pop(wm)
		if !ok {
			return nil
		}
		start := t.key
		var best int64
		first := len(q.out.Q5)
		for auction, n := range q.counts[start] {
			switch {
			case n > best:
				best = n
				q.out.Q5 = append(q.out.Q5[:first], Q5Row{start, start + WindowSize, auction, n})
			case n == best:
				q.out.Q5 = append(q.out.Q5, Q5Row{start, start + WindowSize, auction, n})
			}
		}
		delete(q.counts, start)
	}
}

// plainQ7Window is a q7 window: its highest price and the bids at it.
type plainQ7Window struct {
	max     int64
	winners []Q7Bid
}

// plainQ7 is q7: a map of windows (by start), and a timer per window.
type plainQ7 struct {
	out     *Output
	wm      int64
	windows map[int64]*plainQ7Window
	timers  timerHeap[int64]
}

func (q *plainQ7) Event(e *Event) error {
	if e.Kind != KindBid {
		return nil
	}
	b := &e.Bid
	w := tumbling(e.Time)
	win := Q7Bid{Auction: b.Auction, Bidder: b.Bidder, Time: b.Time}
	cur := q.windows[w.Start]
	switch {
	case cur == nil:
		q.windows[w.Start] = &plainQ7Window{max: b.Price, winners: []Q7Bid{win}}
		q.timers.push(w.last(), w.Start)
	case b.Price > cur.max:
		cur.max, cur.winners = b.Price, append(cur.winners[:0], win)
	case b.Price == cur.max:
		cur.winners = append(cur.winners, win)
	}
	return nil
}

func (q *plainQ7) Watermark(wm int64) error {
	if wm <= q.wm {
		return nil
	}
	q.wm = wm
	for {
		t, ok := q.timers.pop(wm)
		if !ok {
			return nil
		}
		w := q.windows[t.key]
		for _, b := range w.winners {
			q.out.Q7 = append(q.out.Q7, Q7Row{Start: t.key, End: t.key + WindowSize, Auction: b.Auction, Bidder: b.Bidder, Price: w.max, Time: b.Time})
		}
		delete(q.windows, t.key)
	}
}

// plainQ8Cell is a person in a q8 window: its name if it registered in
// the window, and the reserves of the auctions it opened in it.
type plainQ8Cell struct {
	name     string
	person   bool
	reserves []int64
}

// plainQ8 is q8: a map of windows (by start) of maps of cells (by person),
// and a timer per window.
type plainQ8 struct {
	out     *Output
	wm      int64
	windows map[int64]map[int64]*plainQ8Cell
	timers  timerHeap[int64]
}

func (q *plainQ8) cell(start, person int64) *plainQ8Cell {
	w := q.windows[start]
	if w == nil {
		w = map[int64]*plainQ8Cell{}
		q.windows[start] = w
		q.timers.push(Window{start, start + WindowSize}.last(), start)
	}
	c := w[person]
	if c == nil {
		c = &plainQ8Cell{}
		w[person] = c
	}
	return c
}

func (q *plainQ8) Event(e *Event) error {
	w := tumbling(e.Time)
	switch e.Kind {
	case KindPerson:
		c := q.cell(w.Start, e.Person.ID)
		c.name, c.person = e.Person.Name, true
	case KindAuction:
		c := q.cell(w.Start, e.Auction.Seller)
		c.reserves = append(c.reserves, e.Auction.Reserve)
	}
	return nil
}

func (q *plainQ8) Watermark(wm int64) error {
	if wm <= q.wm {
		return nil
	}
	q.wm = wm
	for {
		t, ok := q.timers.pop(wm)
		if !ok {
			return nil
		}
		for person, c := range q.windows[t.key] {
			if !c.person {
				continue
			}
			for _, r := range c.reserves {
				q.out.Q8 = append(q.out.Q8, Q8Row{Start: t.key, Person: person, Name: c.name, Reserve: r})
			}
		}
		delete(q.windows, t.key)
	}
}

// plainSession is a live q11 session: its window, its number of bids, and
// the seq of its timer.
type plainSession struct {
	w   Window
	n   int64
	seq uint64
}

// plainQ11 is q11: a map of each bidder's live sessions, and a timer per
// session, set lazily as Flink's heap timers are often used: a session's
// timer is pushed when the session opens, and when it pops before the
// session's (since extended) last millisecond it is pushed again for it; a
// session merged into another leaves its timer in the heap, stale, its seq
// no longer a live session's.
type plainQ11 struct {
	out      *Output
	wm       int64
	sessions map[int64][]plainSession
	timers   timerHeap[int64]
}

func (q *plainQ11) Event(e *Event) error {
	if e.Kind != KindBid {
		return nil
	}
	bidder := e.Bid.Bidder
	opened := Window{e.Time, e.Time + SessionGap}
	merged := plainSession{w: opened, n: 1}
	live := q.sessions[bidder]
	kept := live[:0]
	for _, s := range live {
		if s.w.intersects(opened) {
			merged.w = merged.w.cover(s.w)
			merged.n += s.n
			if merged.seq == 0 {
				merged.seq = s.seq
			}
		} else {
			kept = append(kept, s)
		}
	}
	if merged.seq == 0 {
		merged.seq = q.timers.push(merged.w.last(), bidder)
	}
	q.sessions[bidder] = append(kept, merged)
	return nil
}

func (q *plainQ11) Watermark(wm int64) error {
	if wm <= q.wm {
		return nil
	}
	q.wm = wm
	for {
		t, ok := q.timers.pop(wm)
		if !ok {
			return nil
		}
		live := q.sessions[t.key]
		for i, s := range live {
			if s.seq != t.seq {
				continue
			}
			if s.w.last() > t.time {
				q.timers.repush(s.w.last(), t)
				break
			}
			q.out.Q11 = append(q.out.Q11, Q11Row{Bidder: t.key, Start: s.w.Start, End: s.w.End, Count: s.n})
			live = append(live[:i], live[i+1:]...)
			if len(live) == 0 {
				delete(q.sessions, t.key)
			} else {
				q.sessions[t.key] = live
			}
			break
		}
	}
}
