package nexmark

import (
	"github.com/stategen/stategen/runtime"
)

// NewQuery returns query name (one of Queries, or "all" for the five in
// one pass) on stategen's handles and timers, its states registered in
// store, emitting into out. The queries of "all" share the store: each has
// states of its own names.
func NewQuery(name string, store runtime.Store, out *Output) (Query, error) {
	names, err := expand(name)
	if err != nil {
		return nil, err
	}
	var qs []Query
	for _, n := range names {
		var q Query
		switch n {
		case "q3":
			st, err := OpenQ3State(store)
			if err != nil {
				return nil, err
			}
			q = &q3{st: st, out: out, wm: minTime}
		case "q5":
			st, err := OpenQ5State(store)
			if err != nil {
				return nil, err
			}
			q = &q5{st: st, out: out, wm: minTime}
		case "q7":
			st, err := OpenQ7State(store)
			if err != nil {
				return nil, err
			}
			q = &q7{st: st, out: out, wm: minTime}
		case "q8":
			st, err := OpenQ8State(store)
			if err != nil {
				return nil, err
			}
			q = &q8{st: st, out: out, wm: minTime}
		case "q11":
			st, err := OpenQ11State(store)
			if err != nil {
				return nil, err
			}
			q = &q11{st: st, out: out, wm: minTime}
		}
		qs = append(qs, q)
	}
	return combine(qs), nil
}

// minTime is the watermark before the first.
const minTime = -1 << 63

// q3 is local item suggestion, Beam's Query3: persons of Oregon, Idaho and
// California joined, by seller, with the auctions of category 10, in a
// global window. An auction that comes before its seller waits for it in
// Pending; a seller's state goes Q3Wait after its last event.
type q3 struct {
	st       *Q3State
	out      *Output
	wm       int64
	expireFn func(runtime.Timer[int64, int64]) error // q.expire, bound once
	pending  []int64                                 // scratch of flush
}

func (q *q3) Event(e *Event) error {
	var seller int64
	switch e.Kind {
	case KindPerson:
		p := e.Person
		if !inQ3State(p.State) {
			return nil
		}
		seller = p.ID
		if ok, err := q.st.Persons.Contains(seller); err != nil || ok {
			return err // a person comes once; Beam logs a second one
		}
		person := Q3Person{Name: p.Name, City: p.City, State: p.State}
		if err := q.st.Persons.Put(seller, person); err != nil {
			return err
		}
		if err := q.flush(seller, person); err != nil {
			return err
		}
	case KindAuction:
		a := e.Auction
		if a.Category != q3Category {
			return nil
		}
		seller = a.Seller
		p, ok, err := q.st.Persons.Get(seller)
		if err != nil {
			return err
		}
		if ok {
			q.out.Q3 = append(q.out.Q3, Q3Row{Name: p.Name, City: p.City, State: p.State, Auction: a.ID})
		} else if err := q.st.Pending.Add(seller, a.ID); err != nil {
			return err
		}
	default:
		return nil
	}
	// The seller's cleanup is now Q3Wait after this event: its timer is
	// set, and an earlier one left to find it moved (see Q3State).
	at := e.Time + Q3Wait
	old, ok, err := q.st.Expiry.Get(seller)
	if err != nil || (ok && old == at) {
		return err
	}
	if err := q.st.Timers.Register(at, seller, 0); err != nil {
		return err
	}
	return q.st.Expiry.Put(seller, at)
}

// flush emits the auctions that waited for person, the seller, and
// deletes them. (A function of its own: the variables an iteration's body
// uses escape to the heap, on every call of the function that holds it.)
func (q *q3) flush(seller int64, p Q3Person) error {
	if err := q.st.Pending.GetInto(seller, &q.pending); err != nil {
		return err
	}
	for _, id := range q.pending {
		q.out.Q3 = append(q.out.Q3, Q3Row{Name: p.Name, City: p.City, State: p.State, Auction: id})
	}
	if len(q.pending) == 0 {
		return nil
	}
	return q.st.Pending.Delete(seller)
}

func (q *q3) Watermark(wm int64) error {
	if wm <= q.wm {
		return nil
	}
	q.wm = wm
	if q.expireFn == nil {
		q.expireFn = q.expire
	}
	return q.st.Timers.Advance(wm, q.expireFn)
}

// expire deletes a seller's state if its cleanup time is the timer's: a
// timer of an earlier cleanup time does nothing.
func (q *q3) expire(tm runtime.Timer[int64, int64]) error {
	at, ok, err := q.st.Expiry.Get(tm.Key)
	if err != nil || !ok || at != tm.Time {
		return err
	}
	if err := q.st.Persons.Delete(tm.Key); err != nil {
		return err
	}
	if err := q.st.Pending.Delete(tm.Key); err != nil {
		return err
	}
	return q.st.Expiry.Delete(tm.Key)
}

// q5 is hot items, Beam's Query5: the auctions with the most bids of each
// sliding window. Each bid counts in each of its windows; a window's timer
// is registered with its first count of an auction, and at its last
// millisecond emits the auctions of the highest count and clears the
// window.
type q5 struct {
	st      *Q5State
	out     *Output
	wm      int64
	auction int64                                   // the bid being counted, for count
	created bool                                    // count found no entry
	countFn func(int64, bool) int64                 // q.count, bound once
	fireFn  func(runtime.Timer[int64, int64]) error // q.fire, bound once
}

func (q *q5) Event(e *Event) error {
	if e.Kind != KindBid {
		return nil
	}
	q.auction = e.Bid.Auction
	for start := latestSliding(e.Time); start > e.Time-WindowSize; start -= WindowPeriod {
		if err := q.add(start); err != nil {
			return err
		}
	}
	return nil
}

// add counts the bid q.auction in the window that starts at start.
func (q *q5) add(start int64) error {
	if q.countFn == nil {
		q.countFn = q.count
	}
	if err := q.st.Counts.Update(start, q.auction, q.countFn); err != nil {
		return err
	}
	if !q.created {
		return nil
	}
	w := Window{start, start + WindowSize}
	return q.st.Timers.Register(w.last(), start, w.End)
}

func (q *q5) count(old int64, found bool) int64 {
	q.created = !found
	return old + 1
}

func (q *q5) Watermark(wm int64) error {
	if wm <= q.wm {
		return nil
	}
	q.wm = wm
	if q.fireFn == nil {
		q.fireFn = q.fire
	}
	return q.st.Timers.Advance(wm, q.fireFn)
}

// fire emits the auctions with the most bids of the window that starts at
// the timer's key, and clears the window.
func (q *q5) fire(tm runtime.Timer[int64, int64]) error {
	start, end := tm.Key, tm.Namespace
	var best int64
	first := len(q.out.Q5)
	for e, err := range q.st.Counts.All(start) {
		if err != nil {
			return err
		}
		switch {
		case e.Value > best:
			best = e.Value
			q.out.Q5 = append(q.out.Q5[:first], Q5Row{start, end, e.Key, e.Value})
		case e.Value == best:
			q.out.Q5 = append(q.out.Q5, Q5Row{start, end, e.Key, e.Value})
		}
	}
	return q.st.Counts.Clear(start)
}

// q7 is highest bid, Beam's Query7: the bids of the highest price of each
// tumbling window. The window keeps its highest price and the bids at it,
// a combiner (Beam's own note says it beats Query7's side input); its
// timer, registered with its first bid, emits them.
type q7 struct {
	st     *Q7State
	out    *Output
	wm     int64
	one    [1]Q7Bid                                // scratch of Event
	fireFn func(runtime.Timer[int64, int64]) error // q.fire, bound once
}

func (q *q7) Event(e *Event) error {
	if e.Kind != KindBid {
		return nil
	}
	b := &e.Bid
	w := tumbling(e.Time)
	best, ok, err := q.st.Max.Get(w.Start)
	if err != nil {
		return err
	}
	win := Q7Bid{Auction: b.Auction, Bidder: b.Bidder, Time: b.Time}
	switch {
	case !ok:
		if err := q.st.Timers.Register(w.last(), w.Start, w.End); err != nil {
			return err
		}
		fallthrough
	case b.Price > best:
		if err := q.st.Max.Put(w.Start, b.Price); err != nil {
			return err
		}
		q.one[0] = win
		return q.st.Winners.Replace(w.Start, q.one[:])
	case b.Price == best:
		return q.st.Winners.Add(w.Start, win)
	}
	return nil
}

func (q *q7) Watermark(wm int64) error {
	if wm <= q.wm {
		return nil
	}
	q.wm = wm
	if q.fireFn == nil {
		q.fireFn = q.fire
	}
	return q.st.Timers.Advance(wm, q.fireFn)
}

func (q *q7) fire(tm runtime.Timer[int64, int64]) error {
	start, end := tm.Key, tm.Namespace
	price, ok, err := q.st.Max.Get(start)
	if err != nil || !ok {
		return err
	}
	for b, err := range q.st.Winners.All(start) {
		if err != nil {
			return err
		}
		q.out.Q7 = append(q.out.Q7, Q7Row{Start: start, End: end, Auction: b.Auction, Bidder: b.Bidder, Price: price, Time: b.Time})
	}
	if err := q.st.Max.Delete(start); err != nil {
		return err
	}
	return q.st.Winners.Delete(start)
}

// q8 is monitor new users, Beam's Query8: persons joined, by seller, with
// the auctions they opened in the tumbling window they registered in (a
// windowed CoGroupByKey). Persons and auctions wait in their window; the
// (person, window)'s timer, registered with each, emits the join.
type q8 struct {
	st       *Q8State
	out      *Output
	wm       int64
	fireFn   func(runtime.Timer[int64, int64]) error // q.fire, bound once
	reserves []int64                                 // scratch of fire
}

func (q *q8) Event(e *Event) error {
	var person int64
	w := tumbling(e.Time)
	switch e.Kind {
	case KindPerson:
		person = e.Person.ID
		if err := q.st.Persons.Put(person, w.Start, e.Person.Name); err != nil {
			return err
		}
	case KindAuction:
		person = e.Auction.Seller
		if err := q.st.Reserves.Add(person, w.Start, e.Auction.Reserve); err != nil {
			return err
		}
	default:
		return nil
	}
	return q.st.Timers.Register(w.last(), person, w.Start)
}

func (q *q8) Watermark(wm int64) error {
	if wm <= q.wm {
		return nil
	}
	q.wm = wm
	if q.fireFn == nil {
		q.fireFn = q.fire
	}
	return q.st.Timers.Advance(wm, q.fireFn)
}

// fire emits the join of the (person, window) of the timer, and deletes
// it. The reserves come first: a person's name is read (and decoded) only
// if the person opened auctions in the window.
func (q *q8) fire(tm runtime.Timer[int64, int64]) error {
	person, start := tm.Key, tm.Namespace
	if err := q.st.Reserves.GetInto(person, start, &q.reserves); err != nil {
		return err
	}
	if len(q.reserves) > 0 {
		name, ok, err := q.st.Persons.Get(person, start)
		if err != nil {
			return err
		}
		for _, r := range q.reserves {
			if !ok {
				break // the seller registered in another window
			}
			q.out.Q8 = append(q.out.Q8, Q8Row{Start: start, Person: person, Name: name, Reserve: r})
		}
		if err := q.st.Reserves.Delete(person, start); err != nil {
			return err
		}
	}
	return q.st.Persons.Delete(person, start)
}

// q11 is user sessions, Beam's Query11: the number of bids of each
// bidder's sessions. A bid opens the window [t, t+SessionGap), which
// merges with every live session of its bidder it touches; a session's
// timer, set when it opens and set again when it fires before the
// session's (since extended) last millisecond, emits it (see Q11State).
type q11 struct {
	st     *Q11State
	out    *Output
	wm     int64
	live   []Q11Session                            // a bidder's sessions, as last read
	fireFn func(runtime.Timer[int64, int64]) error // q.fire, bound once
}

func (q *q11) Event(e *Event) error {
	if e.Kind != KindBid {
		return nil
	}
	bidder := e.Bid.Bidder
	opened := Window{e.Time, e.Time + SessionGap}
	merged := Q11Session{Start: opened.Start, End: opened.End, Count: 1}
	// The bidder's sessions are read into q.live, reusing its array (an
	// absent value leaves it alone: it is emptied first).
	q.live = q.live[:0]
	if _, err := q.st.Sessions.GetInto(bidder, &q.live); err != nil {
		return err
	}
	kept, timed := q.live[:0], false
	for _, s := range q.live {
		if w := (Window{s.Start, s.End}); w.intersects(opened) {
			w = w.cover(Window{merged.Start, merged.End})
			merged.Start, merged.End, merged.Count = w.Start, w.End, merged.Count+s.Count
			if !timed {
				merged.Timer, timed = s.Timer, true
			}
		} else {
			kept = append(kept, s)
		}
	}
	if !timed {
		merged.Timer = opened.Start
		if err := q.st.Timers.Register(opened.last(), bidder, merged.Timer); err != nil {
			return err
		}
	}
	q.live = append(kept, merged)
	return q.st.Sessions.Put(bidder, q.live)
}

func (q *q11) Watermark(wm int64) error {
	if wm <= q.wm {
		return nil
	}
	q.wm = wm
	if q.fireFn == nil {
		q.fireFn = q.fire
	}
	return q.st.Timers.Advance(wm, q.fireFn)
}

// fire emits the session whose timer fired if it ends by the timer's time,
// and forgets it; if the session has grown since, it sets its timer again
// at its last millisecond. A timer whose session was merged into another
// finds none.
func (q *q11) fire(tm runtime.Timer[int64, int64]) error {
	bidder := tm.Key
	q.live = q.live[:0]
	if _, err := q.st.Sessions.GetInto(bidder, &q.live); err != nil {
		return err
	}
	for i, s := range q.live {
		if s.Timer != tm.Namespace {
			continue
		}
		if last := s.End - 1; last > tm.Time {
			return q.st.Timers.Register(last, bidder, s.Timer)
		}
		q.out.Q11 = append(q.out.Q11, Q11Row{Bidder: bidder, Start: s.Start, End: s.End, Count: s.Count})
		q.live = append(q.live[:i], q.live[i+1:]...)
		if len(q.live) == 0 {
			return q.st.Sessions.Delete(bidder)
		}
		return q.st.Sessions.Put(bidder, q.live)
	}
	return nil
}
