package runtime

import (
	"bytes"
	"fmt"
	"sync"
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
// timer column family — and registering a timer twice is one timer. No
// timer is held in memory: Advance walks the key groups' first timers,
// O(owned key groups) reads per call plus one read per timer fired.

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
	st      SortedMapState
	anchors map[int]Key // by owned key group
	ukBuf   []byte
	// touched lists the key groups of the timers registered or deleted
	// through this handle during an Advance (advancing), whose first
	// timers Advance reads again.
	advancing bool
	touched   []int
	// heads and at (key group -> index in heads) are Advance's, kept from
	// one call to the next for their buffers.
	heads []head
	at    map[int]int
}

// NewTimers registers d with s and returns its handle.
func NewTimers[K, N any](s Store, d TimersDescriptor[K, N]) (Timers[K, N], error) {
	spec := StateSpec{Name: d.Name, Fingerprint: d.Fingerprint, Schema: d.Schema, Kind: KindSortedMap}
	if d.Namespace == nil {
		return Timers[K, N]{}, nilCodecError(d.Name, "namespace")
	}
	h := new(timersHandle[K, N])
	st, err := h.bind(s, spec, d.Key, d.Namespace)
	if err != nil {
		return Timers[K, N]{}, err
	}
	sm, ok := st.(SortedMapState)
	if !ok {
		return Timers[K, N]{}, wrongStateType(spec, st)
	}
	h.st = sm
	all := timerAnchors(h.maxP)
	h.anchors = make(map[int]Key, h.groups.Len())
	for kg := range h.groups.All() {
		h.anchors[kg] = makeKey(HashKey(all[kg]), all[kg], nil, h.maxP)
	}
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
// and returns the anchor of k's key group.
func (h *timersHandle[K, N]) timerKey(time int64, k K, ns N) (Key, []byte, error) {
	b := AppendInt64Key(h.ukBuf[:0], time)
	kl := len(b)
	b = h.kc.AppendKey(b, k)
	kb := b[kl:]
	kg := KeyGroupOfHash(HashKey(kb), h.maxP)
	b = h.nc.AppendKey(b, ns)
	h.ukBuf = b
	if h.advancing {
		h.touched = append(h.touched, kg)
	}
	a, ok := h.anchors[kg]
	if !ok {
		return Key{}, nil, h.errorf("timer", fmt.Errorf("%w: key group %d is not in the store's key groups %v", ErrKeyGroupNotOwned, kg, h.groups))
	}
	return a, b, nil
}

// Register registers the timer (time, k, ns). Registering a timer that
// exists already changes nothing: it fires once.
func (t Timers[K, N]) Register(time int64, k K, ns N) error {
	if t.h == nil {
		return ErrUnbound
	}
	a, uk, err := t.h.timerKey(time, k, ns)
	if err != nil {
		return err
	}
	if err := t.h.st.Put(a, uk, []byte{}); err != nil {
		return t.h.errorf("register timer", err)
	}
	return nil
}

// Delete deletes the timer (time, k, ns); deleting an absent timer is not
// an error.
func (t Timers[K, N]) Delete(time int64, k K, ns N) error {
	if t.h == nil {
		return ErrUnbound
	}
	a, uk, err := t.h.timerKey(time, k, ns)
	if err != nil {
		return err
	}
	if err := t.h.st.Delete(a, uk); err != nil {
		return t.h.errorf("delete timer", err)
	}
	return nil
}

// prefetch is how many due timers of a key group Advance reads at once.
const prefetch = 64

// head is the next due timers of a key group, as Advance sees them: read
// prefetch at a time, in order, into one buffer.
type head struct {
	kg   int
	q    [][]byte // the group's next due timers (user keys), in order
	more bool     // the group may hold more due timers than q
	buf  []byte   // backs q
	ends []int    // scratch of refill
}

// next returns the head's first timer, nil if the group has no due timer.
func (hd *head) next() []byte {
	if len(hd.q) == 0 {
		return nil
	}
	return hd.q[0]
}

// refill reads the next n due timers (before hi) of hd's key group.
func (h *timersHandle[K, N]) refill(hd *head, hi []byte, n int) error {
	hd.q, hd.buf, hd.ends = hd.q[:0], hd.buf[:0], hd.ends[:0]
	err := h.st.Range(h.anchors[hd.kg], nil, hi, false, func(u, _ []byte) bool {
		hd.buf = append(hd.buf, u...)
		hd.ends = append(hd.ends, len(hd.buf))
		return len(hd.ends) < n
	})
	if err != nil {
		return h.errorf(fmt.Sprintf("timers of key group %d", hd.kg), err)
	}
	start := 0
	for _, e := range hd.ends {
		hd.q = append(hd.q, hd.buf[start:e:e])
		start = e
	}
	hd.more = len(hd.ends) == n
	return nil
}

// Advance fires every timer with a time <= to, in (time, key, namespace)
// order across the key groups the store owns, each once: it deletes the
// timer, then calls fn with it. fn may register and delete timers; those
// it registers with a time <= to fire in the same Advance, in order. An
// error of fn ends the Advance and is returned: the timer it was called
// with is deleted already, as after any failure the job restores its last
// checkpoint, where the timer is still registered.
//
// Advance reads the due timers of each key group prefetch at a time, and
// again for a key group in which fn registered or deleted a timer through
// this handle; once none is left it reads every key group once more, for
// timers fn registered through another handle of the same state.
func (t Timers[K, N]) Advance(to int64, fn func(Timer[K, N]) error) error {
	if t.h == nil {
		return ErrUnbound
	}
	h := t.h
	if fn == nil {
		return h.errorf("advance timers", fmt.Errorf("nil callback"))
	}
	var hi []byte
	if to < 1<<63-1 {
		hi = AppendInt64Key(nil, to+1)
	}
	if h.advancing {
		return h.errorf("advance timers", fmt.Errorf("Advance called from inside Advance"))
	}
	h.advancing = true
	defer func() { h.advancing, h.touched = false, h.touched[:0] }()
	if h.heads == nil {
		h.at = make(map[int]int, len(h.anchors))
		for kg := range h.groups.All() {
			h.at[kg] = len(h.heads)
			h.heads = append(h.heads, head{kg: kg})
		}
	}
	heads, at := h.heads, h.at
	for {
		for i := range heads {
			if err := h.refill(&heads[i], hi, prefetch); err != nil {
				return err
			}
		}
		fired := false
		for {
			best := -1
			for i := range heads {
				if u := heads[i].next(); u != nil && (best < 0 || bytes.Compare(u, heads[best].next()) < 0) {
					best = i
				}
			}
			if best < 0 {
				break
			}
			fired = true
			hd := &heads[best]
			uk := hd.q[0]
			tm, err := h.decodeTimer(uk)
			if err != nil {
				return err
			}
			if err := h.st.Delete(h.anchors[hd.kg], uk); err != nil {
				return h.errorf("fire timer", err)
			}
			hd.q = hd.q[1:]
			h.touched = h.touched[:0]
			if err := fn(tm); err != nil {
				return err
			}
			if len(hd.q) == 0 && hd.more {
				h.touched = append(h.touched, hd.kg)
			}
			for _, kg := range h.touched {
				if err := h.refill(&heads[at[kg]], hi, prefetch); err != nil {
					return err
				}
			}
		}
		if !fired {
			return nil
		}
	}
}

// Next returns the time of the earliest timer, and false if there is none:
// when a driver needs to call Advance next.
func (t Timers[K, N]) Next() (time int64, ok bool, err error) {
	if t.h == nil {
		return 0, false, ErrUnbound
	}
	h := t.h
	var best []byte
	for kg := range h.groups.All() {
		hd := head{kg: kg}
		if err := h.refill(&hd, nil, 1); err != nil {
			return 0, false, err
		}
		if uk := hd.next(); uk != nil && (best == nil || bytes.Compare(uk, best) < 0) {
			best = uk
		}
	}
	if best == nil {
		return 0, false, nil
	}
	time, _, err = DecodeInt64Key(best)
	if err != nil {
		return 0, false, h.errorf("decode timer", err)
	}
	return time, true, nil
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
