package runtime

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	goruntime "runtime"
	"slices"
	"sync"
	"weak"
)

// Timers are keyed state (DESIGN.md §3): a timer belongs to a (key,
// namespace), so to the key group of its key, and lives in the store like
// any state — on every backend, in every checkpoint in the canonical
// format, rescaled with its key group, fired by the instance that owns it.
//
// A Timers state is a SortedMap state of the store. Its keys are anchors,
// one per key group: the smallest uint32 whose key encoding hashes into
// that key group (found once per maxParallelism, the same in every
// instance and every run). Each anchor's map holds the timers of its key
// group, with user key (time, key, namespace) in their order-preserving
// encodings and an empty value. So the timers of a key group are sorted by
// time on every backend — on btree and pebble their keys are (key group,
// state, anchor, time, key, namespace), the layout of Flink's RocksDB
// timer column family — and registering a timer twice is one timer.
//
// Timers are not held in memory: the handles of a state share, per owned
// key group, the time of its earliest timer (when known) and its first
// timers (64 as read, up to 128 as registered since), the group's head. A
// timer registered or deleted is written to the store and, if it falls
// among the head's timers, into the head too, so that the head stays the
// group's first timers without a read. Advance reads only the key groups
// that may hold a due timer and whose head it does not hold (never read,
// emptied while the group holds more, or grown past its buffer), and the
// groups it saw empty again after a Restore (on a store that counts them,
// RestoreCounter; at every Advance on one that does not), and fires from a
// binary heap of the key groups' first timers: a fired timer costs one
// Delete, a heap step, and a read per 64 timers of its key group. A timer
// registered again that the head holds is not written again, on a store
// that can check a write without making it (WriteChecker): Flink's
// RocksDB timer queue does the same with its cache of first timers, and a
// window operator, which registers its window's timer with every element,
// then costs a search of the head, not a write (BenchmarkTimerRegisterAgain
// in benchmarks/: 2.5 to 6 times faster on the three backends).

// TimersDescriptor describes a timer state for NewTimers. Generated code
// fills it in for a runtime.Timers field of a state struct.
type TimersDescriptor[K, N any] struct {
	Name        string      // stable state name (see StateSpec.Name)
	Fingerprint string      // schema fingerprint (see StateSpec.Fingerprint)
	Schema      string      // the schema it was derived from (see StateSpec.Schema)
	Key         KeyCodec[K] // the key's order-preserving codec
	Namespace   KeyCodec[N] // the namespace's order-preserving codec
}

// Timer is a timer: a time (in the unit the job chooses: event time or
// processing time, milliseconds or nanoseconds), a key and a namespace.
type Timer[K, N any] struct {
	Time      int64
	Key       K
	Namespace N
}

// Timers is the handle of a timer state: a set of timers, each a (time,
// key, namespace), fired in (time, key, namespace) order by Advance. One
// Timers state is one time domain; a job with event-time and
// processing-time timers declares two. The zero Timers is unbound: its
// methods return ErrUnbound.
type Timers[K, N any] struct{ h *timersHandle[K, N] }

type timersHandle[K, N any] struct {
	handle[K, N]
	st    SortedMapState
	wc    WriteChecker // st, if it checks writes without making them
	sh    *timerShared
	ukBuf []byte
}

// timerShared is what every handle of one timer state in one store shares
// (see sharedTimers): the anchors, and what Advance knows of each owned key
// group — the time of its earliest timer when known — so that an Advance
// reads only the key groups that may hold a due timer. A key group's
// earliest time is known only while it holds timers: the cache never says
// "empty", so a Restore, which loads only into key groups without entries,
// cannot leave it wrong. Registering through any handle lowers a known
// earliest time; deleting the earliest timer forgets it.
type timerShared struct {
	// restores is the store's count of Restores (nil if it keeps none),
	// and seen its count at the last Advance or Next: the same count
	// tells that no key group was restored into since.
	restores RestoreCounter
	seen     uint64
	start    int   // the first owned key group
	anchors  []Key // by key group - start
	min      []int64
	known    []bool
	// advancing is set during an Advance; touched then lists the key
	// groups in which a timer was registered or deleted, whose heads
	// Advance reads again if the writes left them invalid, and reorders.
	advancing bool
	touched   []int
	heads     []head // Advance's, by key group - start, kept for their buffers
	order     headOrder
	// fillCB, made once, is refill's callback to the store: it appends to
	// the head refill is filling, fill (a store never calls back into the
	// state while it runs the callback, so one fill at a time).
	fill   *head
	fillCB func(u, _ []byte) bool
}

// headOrder is a binary min-heap of the indexes of the heads that hold
// due timers, ordered by their next timer. It is written out rather than
// run by container/heap: Advance reorders it after every timer it fires,
// and container/heap's interface calls, each comparing whole timer keys,
// took 0.44 s of Advance's 1.44 s in a profile of Nexmark's five queries
// on cow (BenchmarkTimerFire on cow: 330 -> 303 ns, p=0.000).
type headOrder struct {
	heads []head
	idx   []int
}

// less orders the heads idx[a] and idx[b] by their next timer.
func (o *headOrder) less(a, b int) bool {
	return timerKeyLess(o.heads[o.idx[a]].next(), o.heads[o.idx[b]].next())
}

// timerKeyLess reports whether the timer user key a orders before b. Both
// begin with their time's 8-byte key encoding, which orders as a
// big-endian number: the times decide, and the rest of the keys only
// between timers of the same time.
func timerKeyLess(a, b []byte) bool { return timerKeyCompare(a, b) < 0 }

// timerKeyCompare is bytes.Compare of two timer user keys, which compares
// their times as numbers first.
func timerKeyCompare(a, b []byte) int {
	if len(a) >= 8 && len(b) >= 8 {
		if x, y := binary.BigEndian.Uint64(a), binary.BigEndian.Uint64(b); x != y {
			if x < y {
				return -1
			}
			return 1
		}
		return bytes.Compare(a[8:], b[8:])
	}
	return bytes.Compare(a, b)
}

// reset makes the heap of every head that holds due timers.
func (o *headOrder) reset(heads []head, due func(int) bool) {
	o.heads, o.idx = heads, o.idx[:0]
	for i := range heads {
		if due(i) {
			o.idx = append(o.idx, i)
		}
	}
	for i := len(o.idx)/2 - 1; i >= 0; i-- {
		o.down(i)
	}
}

// down moves the head at i down to its place.
func (o *headOrder) down(i int) {
	n := len(o.idx)
	for {
		j := 2*i + 1
		if j >= n {
			return
		}
		if r := j + 1; r < n && o.less(r, j) {
			j = r
		}
		if !o.less(j, i) {
			return
		}
		o.idx[i], o.idx[j] = o.idx[j], o.idx[i]
		i = j
	}
}

// pop removes the first head.
func (o *headOrder) pop() {
	n := len(o.idx) - 1
	o.idx[0] = o.idx[n]
	o.idx = o.idx[:n]
	o.down(0)
}

// timerStates maps each bound timer State to its timerShared, weakly: an
// entry goes when no handle uses it.
var timerStates sync.Map // State -> weak.Pointer[timerShared]

// sharedTimers returns the timerShared of st, making it if needed. A State
// of a type that cannot be a map key (no backend of this module) gets a
// handle of its own: its handles must then not be mixed.
func sharedTimers(s Store, st State, maxP int, groups KeyGroupRange) *timerShared {
	comparable := reflect.TypeOf(st).Comparable()
	if comparable {
		if wp, ok := timerStates.Load(st); ok {
			if sh := wp.(weak.Pointer[timerShared]).Value(); sh != nil {
				return sh
			}
		}
	}
	all := timerAnchors(maxP)
	sh := &timerShared{start: groups.Start, min: make([]int64, groups.Len()), known: make([]bool, groups.Len())}
	if c, ok := s.(RestoreCounter); ok {
		if n, ok := c.Restores(); ok {
			sh.restores, sh.seen = c, n
		}
	}
	sh.fillCB = func(u, _ []byte) bool {
		hd := sh.fill
		hd.buf = append(hd.buf, u...)
		hd.ends = append(hd.ends, len(hd.buf))
		return len(hd.ends) < prefetch
	}
	for kg := range groups.All() {
		sh.anchors = append(sh.anchors, makeKey(HashKey(all[kg]), all[kg], nil, maxP))
		sh.heads = append(sh.heads, head{})
	}
	if comparable {
		wp := weak.Make(sh)
		if prev, loaded := timerStates.LoadOrStore(st, wp); loaded {
			if old := prev.(weak.Pointer[timerShared]).Value(); old != nil {
				return old
			}
			timerStates.Store(st, wp)
		}
		goruntime.AddCleanup(sh, func(st State) { timerStates.CompareAndDelete(st, wp) }, st)
	}
	return sh
}

// NewTimers registers d with s and returns its handle. Every handle of the
// same state in the same store sees the others' timers at once (they share
// what Advance knows); a timer state is written through its handles only.
func NewTimers[K, N any](s Store, d TimersDescriptor[K, N]) (Timers[K, N], error) {
	spec := StateSpec{Name: d.Name, Fingerprint: d.Fingerprint, Schema: d.Schema, Kind: KindSortedMap}
	if d.Namespace == nil {
		return Timers[K, N]{}, nilCodecError(d.Name, "namespace")
	}
	h := new(timersHandle[K, N])
	st, err := h.bind(s, spec, d.Key, d.Namespace, TTL{}, nil)
	if err != nil {
		return Timers[K, N]{}, err
	}
	sm, ok := st.(SortedMapState)
	if !ok {
		return Timers[K, N]{}, wrongStateType(spec, st)
	}
	h.st = sm
	h.wc, _ = st.(WriteChecker)
	h.sh = sharedTimers(s, st, h.maxP, h.groups)
	return Timers[K, N]{h}, nil
}

// anchorCache holds the anchors of each maxParallelism seen: [][]byte by
// key group.
var anchorCache sync.Map

// timerAnchors returns the anchor key of every key group of maxP: the
// uint32-encoded smallest i whose encoding hashes into the key group.
func timerAnchors(maxP int) [][]byte {
	if a, ok := anchorCache.Load(maxP); ok {
		return a.([][]byte)
	}
	anchors := make([][]byte, maxP)
	left := maxP
	for i := uint32(0); left > 0; i++ {
		b := AppendUint32Key(nil, i)
		if kg := KeyGroupOfHash(HashKey(b), maxP); anchors[kg] == nil {
			anchors[kg] = b
			left--
		}
	}
	a, _ := anchorCache.LoadOrStore(maxP, anchors)
	return a.([][]byte)
}

// timerKey encodes (time, k, ns) as the user key of a timer, into h.ukBuf,
// and returns the index of k's key group (key group - start).
func (h *timersHandle[K, N]) timerKey(time int64, k K, ns N) (int, []byte, error) {
	b := AppendInt64Key(h.ukBuf[:0], time)
	kl := len(b)
	b = h.kc.AppendKey(b, k)
	kg := KeyGroupOfHash(HashKey(b[kl:]), h.maxP)
	b = h.nc.AppendKey(b, ns)
	h.ukBuf = b
	if !h.groups.Contains(kg) {
		return 0, nil, h.errorf("timer", fmt.Errorf("%w: key group %d is not in the store's key groups %v", ErrKeyGroupNotOwned, kg, h.groups))
	}
	return kg - h.sh.start, b, nil
}

// wrote records a write of the timer uk at time in key group index i:
// what Advance knows of the group — its head, kept in step with the write
// while it holds the group's first timers (see head.wrote), and its
// earliest time — and the group to read again if an Advance is running.
// at and held are the head's search for uk (head.search), if it is valid.
func (sh *timerShared) wrote(i int, uk []byte, time int64, registered bool, at int, held bool) {
	hd := &sh.heads[i]
	if hd.valid && hd.wrote(uk, registered, at, held) && len(hd.q) > 0 {
		// The head holds the group's first timers: its first is the
		// group's earliest.
		sh.min[i], sh.known[i] = timerTime(hd.q[0]), true
	} else {
		switch {
		case !sh.known[i]:
		case registered && time < sh.min[i]:
			sh.min[i] = time
		case !registered && time == sh.min[i]:
			sh.known[i] = false
		}
	}
	if sh.advancing {
		sh.touched = append(sh.touched, i)
	}
}

// Register registers the timer (time, k, ns). Registering a timer that
// exists already changes nothing: it fires once. A timer at a time already
// passed fires at the next Advance, as in Flink.
//
// A window operator registers its window's timer with every element of
// the window. When the handles hold the timer among the first timers of
// its key group they read for Advance, and the store can check a write
// without making it (WriteChecker: every backend of this module), Register
// checks that the store would take the write and writes nothing, as
// Flink's RocksDB timer queue skips the write of a timer its cache holds:
// the store, and an incremental checkpoint's changes, see the timer once.
func (t Timers[K, N]) Register(time int64, k K, ns N) error { return t.write(time, k, ns, true) }

// Delete deletes the timer (time, k, ns); deleting an absent timer is not
// an error.
func (t Timers[K, N]) Delete(time int64, k K, ns N) error { return t.write(time, k, ns, false) }

// write registers or deletes the timer (time, k, ns).
func (t Timers[K, N]) write(time int64, k K, ns N, register bool) error {
	if t.h == nil {
		return ErrUnbound
	}
	h := t.h
	i, uk, err := h.timerKey(time, k, ns)
	if err != nil {
		return err
	}
	// Where the head holds uk, or would: the store's write leaves the head
	// as it is, and wrote puts it in step.
	var at int
	var held bool
	if hd := &h.sh.heads[i]; hd.valid {
		at, held = hd.search(uk)
	}
	op := "register timer"
	if register && held && h.wc != nil {
		// Registered already: the write would change nothing, but must
		// fail as it would.
		switch err := h.wc.CheckWrite(h.sh.anchors[i]); {
		case err == nil:
			return nil
		case !errors.Is(err, errors.ErrUnsupported):
			return h.errorf(op, err)
		}
	}
	if register {
		err = h.st.Put(h.sh.anchors[i], uk, []byte{})
	} else {
		op, err = "delete timer", h.st.Delete(h.sh.anchors[i], uk)
	}
	if err != nil {
		return h.errorf(op, err)
	}
	h.sh.wrote(i, uk, time, register, at, held)
	return nil
}

// prefetch is how many timers of a key group Advance reads at once.
const prefetch = 64

// head is the first timers of a key group, as Advance sees them: read
// prefetch at a time, in order, into one buffer, and kept from one Advance
// to the next. While valid, q holds the group's first len(q) timers, all
// of them unless more: a write of a timer keeps it so (see wrote), and a
// head that cannot be kept so is marked invalid, to be read again.
type head struct {
	q     [][]byte // the group's first timers (user keys), in order
	qs    [][]byte // backs q, which Advance consumes from the front
	more  bool     // the group holds more timers than q
	valid bool     // q and more are the group's as it is
	buf   []byte   // backs q
	ends  []int    // scratch of refill
}

// maxHeadBytes bounds the bytes a head's buffer grows to by the timers
// written into it between two reads of its group: past it, a write marks
// the head invalid, and the next read starts the buffer over.
const maxHeadBytes = 16 << 10

// wrote keeps a valid head in step with the registration or deletion of
// the timer uk, which the store has just made, and reports whether the
// head is still valid. A timer after the head's last, when the group holds
// more than the head, is not the head's concern; one before it is
// inserted (its bytes appended to buf) or removed. A head left empty while
// the group holds more, or whose buffer would outgrow maxHeadBytes, is
// marked invalid. p and found are search's answer for uk, made before the
// store's write.
func (hd *head) wrote(uk []byte, registered bool, p int, found bool) bool {
	switch {
	case registered == found:
		// Registered again, or deleted while absent: nothing changed.
	case p == len(hd.q) && hd.more:
		// Beyond the head: the group's first timers are the same.
	case registered:
		if len(hd.buf)+len(uk) > maxHeadBytes {
			hd.valid = false
			return false
		}
		if hd.buf == nil {
			hd.buf = make([]byte, 0, maxHeadBytes/8)
		}
		start := len(hd.buf)
		hd.buf = append(hd.buf, uk...)
		if len(hd.q) == cap(hd.q) {
			// Advance consumed q from the front of qs: move it back there
			// rather than grow a new array.
			if len(hd.q) < cap(hd.qs) {
				hd.q = append(hd.qs[:0], hd.q...)
			} else {
				hd.qs = slices.Grow(hd.qs[:0], max(2*len(hd.q), prefetch))
				hd.q = append(hd.qs, hd.q...)
			}
		}
		hd.q = slices.Insert(hd.q, p, hd.buf[start:len(hd.buf):len(hd.buf)])
		if len(hd.q) > 2*prefetch {
			hd.q, hd.more = hd.q[:prefetch], true
		}
	default:
		hd.q = slices.Delete(hd.q, p, p+1)
		if len(hd.q) == 0 && hd.more {
			hd.valid = false
			return false
		}
	}
	return true
}

// search returns the index of the timer uk among the head's timers, or
// where it would be, and whether the head holds it (and so the group).
func (hd *head) search(uk []byte) (int, bool) {
	return slices.BinarySearchFunc(hd.q, uk, timerKeyCompare)
}

// next returns the head's first timer, nil if it has none.
func (hd *head) next() []byte {
	if len(hd.q) == 0 {
		return nil
	}
	return hd.q[0]
}

// refill reads the first prefetch timers of key group index i into its
// head, and records the group's earliest time.
func (h *timersHandle[K, N]) refill(i int) error {
	sh := h.sh
	hd := &sh.heads[i]
	hd.q, hd.buf, hd.ends = nil, hd.buf[:0], hd.ends[:0]
	sh.fill = hd
	err := h.st.Range(sh.anchors[i], nil, nil, false, sh.fillCB)
	sh.fill = nil
	if err != nil {
		hd.valid = false
		return h.errorf(fmt.Sprintf("timers of key group %d", sh.start+i), err)
	}
	start, q := 0, hd.qs[:0]
	for _, e := range hd.ends {
		q = append(q, hd.buf[start:e:e])
		start = e
	}
	hd.qs, hd.q = q, q
	hd.more, hd.valid = len(hd.ends) == prefetch, true
	return h.learn(i, hd.next())
}

// learn records the earliest timer of key group index i: uk, or none
// (unknown) if uk is nil.
func (h *timersHandle[K, N]) learn(i int, uk []byte) error {
	sh := h.sh
	if uk == nil {
		sh.known[i] = false
		return nil
	}
	t, _, err := DecodeInt64Key(uk)
	if err != nil {
		return h.errorf("decode timer", err)
	}
	sh.min[i], sh.known[i] = t, true
	return nil
}

// checkRestores marks every head invalid, to be read again, if entries
// may have been restored into the store since the last check: if it
// counted a Restore since, or keeps no count. A Restore loads only key
// groups where the state has no entries, so the heads that hold timers
// stay right; but a head read empty may not be any more.
func (sh *timerShared) checkRestores() {
	if sh.restores != nil {
		n, ok := sh.restores.Restores()
		if ok && n == sh.seen {
			return
		}
		sh.seen = n
	}
	for i := range sh.heads {
		if hd := &sh.heads[i]; hd.valid && len(hd.q) == 0 && !hd.more {
			hd.valid = false
		}
	}
}

// timerTime returns the time of the timer uk, a user key the store holds
// (so well formed: its first 8 bytes are the time's key encoding).
func timerTime(uk []byte) int64 {
	t, _, _ := DecodeInt64Key(uk)
	return t
}

// Advance fires every timer with a time <= to, in (time, key, namespace)
// order across the key groups the store owns, each once: it deletes the
// timer, then calls fn with it. fn may register and delete timers (through
// any handle of the state); those it registers with a time <= to fire in
// the same Advance, in order. An error of fn ends the Advance and is
// returned: the timer it was called with is deleted already, as after any
// failure the job restores its last checkpoint, where the timer is still
// registered.
//
// Advance reads only the key groups that may hold a due timer (those whose
// earliest time is unknown or <= to) and whose first timers it does not
// hold already, prefetch timers at a time.
func (t Timers[K, N]) Advance(to int64, fn func(Timer[K, N]) error) error {
	if t.h == nil {
		return ErrUnbound
	}
	h := t.h
	sh := h.sh
	if fn == nil {
		return h.errorf("advance timers", fmt.Errorf("nil callback"))
	}
	if sh.advancing {
		return h.errorf("advance timers", fmt.Errorf("Advance called from inside Advance"))
	}
	var hi []byte
	if to < 1<<63-1 {
		hi = AppendInt64Key(nil, to+1)
	}
	sh.advancing = true
	defer func() { sh.advancing, sh.touched = false, sh.touched[:0] }()
	sh.checkRestores()
	for i := range sh.heads {
		hd := &sh.heads[i]
		if !hd.valid && (!sh.known[i] || sh.min[i] <= to) {
			if err := h.refill(i); err != nil {
				return err
			}
		}
	}
	due := func(i int) bool {
		u := sh.heads[i].next()
		return sh.heads[i].valid && u != nil && (hi == nil || timerKeyLess(u, hi))
	}
	o := &sh.order
	o.reset(sh.heads, due)
	for len(o.idx) > 0 {
		best := o.idx[0]
		hd := &sh.heads[best]
		uk := hd.q[0]
		tm, err := h.decodeTimer(uk)
		if err != nil {
			return err
		}
		if err := h.st.Delete(sh.anchors[best], uk); err != nil {
			hd.valid = false
			return h.errorf("fire timer", err)
		}
		hd.q = hd.q[1:]
		sh.touched = sh.touched[:0]
		if len(hd.q) == 0 && hd.more {
			sh.touched = append(sh.touched, best)
		} else if err := h.learn(best, hd.next()); err != nil {
			return err
		}
		if err := fn(tm); err != nil {
			return err
		}
		others := false
		for _, i := range sh.touched {
			if hd := &sh.heads[i]; !hd.valid || len(hd.q) == 0 && hd.more {
				if err := h.refill(i); err != nil {
					return err
				}
			}
			others = others || i != best
		}
		switch {
		case others:
			o.reset(sh.heads, due)
		case !due(best):
			o.pop()
		default:
			// Only the first head's next timer changed.
			o.down(0)
		}
	}
	return nil
}

// Next returns the time of the earliest timer, and false if there is none:
// when a driver needs to call Advance next. It reads the key groups whose
// earliest time is not known.
func (t Timers[K, N]) Next() (time int64, ok bool, err error) {
	if t.h == nil {
		return 0, false, ErrUnbound
	}
	h := t.h
	sh := h.sh
	if sh.advancing {
		return 0, false, h.errorf("next timer", fmt.Errorf("Next called from inside Advance"))
	}
	sh.checkRestores()
	for i := range sh.heads {
		if hd := &sh.heads[i]; !sh.known[i] && !(hd.valid && len(hd.q) == 0 && !hd.more) {
			if err := h.refill(i); err != nil {
				return 0, false, err
			}
		}
		if sh.known[i] && (!ok || sh.min[i] < time) {
			time, ok = sh.min[i], true
		}
	}
	return time, ok, nil
}

// decodeTimer decodes the user key of a timer.
func (h *timersHandle[K, N]) decodeTimer(uk []byte) (Timer[K, N], error) {
	var tm Timer[K, N]
	var err error
	rest := uk
	if tm.Time, rest, err = DecodeInt64Key(rest); err == nil {
		if tm.Key, rest, err = h.kc.DecodeKey(rest); err == nil {
			tm.Namespace, err = decodeKeyAll(h.nc, rest)
		}
	}
	if err != nil {
		return tm, h.errorf("decode timer", err)
	}
	return tm, nil
}

// Spec returns the state's spec; the zero handle returns the zero spec.
func (t Timers[K, N]) Spec() StateSpec {
	if t.h == nil {
		return StateSpec{}
	}
	return t.h.st.Spec()
}
