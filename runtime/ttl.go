package runtime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// State TTL: a state may let its entries expire (Flink's StateTtlConfig).
//
// A state with a TTL stores, in front of every value — each value of a
// Value state, each element of a List, each value of a Map or SortedMap —
// the time of its last update: eight bytes, big-endian, Unix milliseconds
// (TTLStampLen). An entry is expired once that time plus the state's TTL
// is at or before the current processing time (Flink's rule), which comes
// from the store's Clock (StoreConfig.Clock: the system clock unless a
// test injects a fake one). The stamp is written below the typed handles,
// by a decorator of the backend's State (ttlValue, ttlList, ttlMap), so
// every handle method, Merge included, reads and writes through the same
// few lines on every backend:
//
//   - Expired entries are never returned: a Get reports them absent,
//     iterations skip them, Contains is false.
//   - A write stamps the entry with the current time. Under
//     TTLOnReadAndWrite a read that finds a live entry stamps it again
//     (except from inside an iteration of the same store, where writes are
//     refused: such a read does not refresh).
//   - Every snapshot leaves expired entries out (storekit.DropExpired, which
//     every backend's Snapshot applies with the time of its synchronous
//     phase), so no checkpoint holds them: Flink's cleanup in full
//     snapshots.
//   - Writes clean incrementally (Flink's incremental cleanup): after each
//     write the decorator examines a few more keys (TTL.CleanupPerWrite) of
//     the key group it is sweeping, deletes their expired values, list
//     elements and map entries, and moves on to the next owned key group
//     when it has seen every key of this one.
//
// Pebble has no compaction filter (its maintainers declined one,
// cockroachdb/pebble#1050), so on the pebble backend expired entries go
// the same ways: the deletes of the incremental cleanup, which compactions
// then drop, and snapshots.
//
// Because the stamp is the time of the last update, not the expiry, a TTL
// changed between a checkpoint and its restore applies at once to every
// restored entry: lengthened, entries live longer; shortened, those older
// than the new TTL are expired as soon as they are restored. Enabling a
// TTL on a state restored from a checkpoint without one stamps every
// restored value with the restore's time (each then lives one full TTL);
// disabling it strips the stamps, and the values never expire. Both are
// conversions of the shared restore path (checkpoint.CheckStates); a Store
// restored directly from another store's snapshot refuses them
// (ErrStateMismatch), as it refuses any other change of layout.

// TTLStampLen is the length of the stamp in front of each value of a state
// with a TTL.
const TTLStampLen = 8

// DefaultTTLCleanup is the number of keys the incremental cleanup examines
// after each write when TTL.CleanupPerWrite is zero. Each key costs a
// lookup of its namespaces and one of each namespace's entry, so a write
// to a state with a TTL costs about three lookups instead of one; a full
// sweep takes as many writes as there are keys (plus one per key group).
const DefaultTTLCleanup = 1

// TTLUpdate says which accesses renew an entry's time to live.
type TTLUpdate uint8

// The update types of a TTL, Flink's StateTtlConfig.UpdateType.
const (
	// TTLOnCreateAndWrite (the zero value) renews an entry when it is
	// written: Put, Add, Replace, Update, Merge.
	TTLOnCreateAndWrite TTLUpdate = iota
	// TTLOnReadAndWrite renews it also when it is read.
	TTLOnReadAndWrite
)

// String returns "create-and-write" or "read-and-write".
func (u TTLUpdate) String() string {
	switch u {
	case TTLOnCreateAndWrite:
		return "create-and-write"
	case TTLOnReadAndWrite:
		return "read-and-write"
	}
	return fmt.Sprintf("TTLUpdate(%d)", uint8(u))
}

// TTL is the time-to-live configuration of a state, part of its descriptor.
// The zero TTL means the entries never expire.
type TTL struct {
	// Duration is how long an entry lives after its last update, in whole
	// milliseconds (finer durations are refused); zero means no TTL.
	Duration time.Duration
	// Update says which accesses renew an entry.
	Update TTLUpdate
	// CleanupPerWrite is the number of keys the incremental cleanup
	// examines after each write; zero means DefaultTTLCleanup, a negative
	// number turns the incremental cleanup off (expired entries are then
	// still hidden from reads and left out of snapshots).
	CleanupPerWrite int
}

// Enabled reports whether t expires entries.
func (t TTL) Enabled() bool { return t.Duration != 0 }

// Validate reports whether t can be used by state; the error wraps
// ErrInvalidState and names the state.
func (t TTL) Validate(state string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: state %q: TTL %s", ErrInvalidState, state, fmt.Sprintf(format, args...))
	}
	switch {
	case t.Duration < 0:
		return bad("%v is negative", t.Duration)
	case t.Duration == 0 && (t.Update != TTLOnCreateAndWrite || t.CleanupPerWrite != 0):
		return bad("options are set but its duration is zero (no TTL)")
	case t.Duration%time.Millisecond != 0:
		return bad("%v is not a whole number of milliseconds", t.Duration)
	case t.Update > TTLOnReadAndWrite:
		return bad("has an unknown update type %d", t.Update)
	}
	return nil
}

// Clock is the source of processing time for TTL: the store's clock
// (StoreConfig.Clock). A test injects a fake one.
type Clock interface {
	Now() time.Time
}

// systemClock is the Clock of a StoreConfig that names none: the wall
// clock at the start of the process plus the monotonic time since, which
// costs one monotonic clock read (time.Now reads the wall clock too, at
// twice the cost, and a Get of a state with a TTL reads the clock every
// time) and does not jump when the wall clock is set.
type systemClock struct{}

// wallBase is when the process started, with its monotonic reading.
var (
	wallBase   = time.Now()
	wallBaseNs = wallBase.UnixNano()
)

func (systemClock) Now() time.Time { return time.Unix(0, systemNanos()) }

func systemNanos() int64 { return wallBaseNs + int64(time.Since(wallBase)) }

// systemMillis is systemClock's time in Unix milliseconds.
func systemMillis() int64 { return systemNanos() / int64(time.Millisecond) }

// Now returns the current processing time of the store: its Clock's, or
// the system's if it has none.
func (c *StoreConfig) Now() time.Time {
	if c.Clock == nil {
		return systemClock{}.Now()
	}
	return c.Clock.Now()
}

// AppendTTLStamp appends the stamp of an entry last updated at now (Unix
// milliseconds) to dst.
func AppendTTLStamp(dst []byte, now int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(now))
}

// SplitTTLStamp splits the stored value b of a state with a TTL into the
// time of its last update (Unix milliseconds) and the value proper. A b
// shorter than a stamp is corrupt.
func SplitTTLStamp(b []byte) (stamp int64, value []byte, err error) {
	if len(b) < TTLStampLen {
		return 0, nil, fmt.Errorf("%w: a value of a state with a TTL is %d bytes, shorter than its %d-byte stamp", ErrCorrupt, len(b), TTLStampLen)
	}
	return int64(binary.BigEndian.Uint64(b)), b[TTLStampLen:], nil
}

// TTLExpired reports whether an entry last updated at stamp has expired at
// now under ttl (all in milliseconds): stamp + ttl <= now, computed without
// overflow for any stamp.
func TTLExpired(stamp, ttl, now int64) bool {
	return stamp <= now && uint64(now)-uint64(stamp) >= uint64(ttl)
}

// ttlCore is what the TTL decorators of every kind share: the state under
// them, the configuration, the clock, a scratch buffer for stamped values
// and the incremental cleanup's cursor.
type ttlCore struct {
	inner State
	ttl   int64 // milliseconds
	upd   TTLUpdate
	clock Clock  // nil: the system clock (systemMillis)
	buf   []byte // a stamped value being written
	rbuf  []byte // a value read under TTLOnReadAndWrite, refreshed
	clean ttlCleaner
}

// now returns the current time in Unix milliseconds.
func (c *ttlCore) now() int64 {
	if c.clock == nil {
		return systemMillis()
	}
	return c.clock.Now().UnixMilli()
}

// stamp returns v with the stamp of now in front, in c.buf.
func (c *ttlCore) stamp(v []byte, now int64) []byte {
	c.buf = append(AppendTTLStamp(c.buf[:0], now), v...)
	return c.buf
}

// live splits a stored value and reports whether it is live at now.
func (c *ttlCore) live(b []byte, now int64) ([]byte, bool, error) {
	stamp, v, err := SplitTTLStamp(b)
	if err != nil {
		return nil, false, err
	}
	return v, !TTLExpired(stamp, c.ttl, now), nil
}

// refused reports whether err is a store's refusal of a write from inside
// one of its iterations: a read under TTLOnReadAndWrite made from such a
// callback does not refresh.
func refused(err error) bool { return errors.Is(err, ErrWriteDuringIteration) }

// Spec, Clear, Namespaces, DeleteAll and Keys pass through: they address
// whole entries, live or not. (Namespaces and Keys may therefore report a
// namespace or key whose entries have all expired but are not cleaned up
// yet; its reads find nothing.)
func (c *ttlCore) Spec() StateSpec       { return c.inner.Spec() }
func (c *ttlCore) Clear(k Key) error     { return c.inner.Clear(k) }
func (c *ttlCore) DeleteAll(k Key) error { return c.inner.DeleteAll(k) }
func (c *ttlCore) Namespaces(k Key, fn func(ns []byte) bool) error {
	return c.inner.Namespaces(k, fn)
}
func (c *ttlCore) Keys(kg int, fn func(key []byte) bool) error { return c.inner.Keys(kg, fn) }

// wrapTTL returns st behind the TTL decorator of its kind.
func wrapTTL(st State, cfg StoreConfig, ttl TTL) State {
	core := ttlCore{inner: st, ttl: ttl.Duration.Milliseconds(), upd: ttl.Update, clock: cfg.Clock}
	core.clean = ttlCleaner{groups: cfg.KeyGroups, maxP: cfg.MaxParallelism, budget: ttl.CleanupPerWrite, next: cfg.KeyGroups.Start}
	if core.clean.budget == 0 {
		core.clean.budget = DefaultTTLCleanup
	}
	switch s := st.(type) {
	case SortedMapState:
		m := &ttlSortedMap{ttlMap{ttlCore: core, st: s}, s}
		m.upd2, _ = s.(MapUpdater)
		return m
	case MapState:
		m := &ttlMap{ttlCore: core, st: s}
		m.upd2, _ = s.(MapUpdater)
		return m
	case ListState:
		return &ttlList{ttlCore: core, st: s}
	case ValueState:
		v := &ttlValue{ttlCore: core, st: s}
		v.upd2, _ = s.(ValueUpdater)
		return v
	}
	return st
}

// ttlValue is the TTL decorator of a ValueState.
type ttlValue struct {
	ttlCore
	st   ValueState
	upd2 ValueUpdater // st, if it updates in one lookup
}

// Get returns the live value of k.
func (t *ttlValue) Get(k Key) ([]byte, bool, error) {
	b, ok, err := t.st.Get(k)
	if err != nil || !ok {
		return nil, false, err
	}
	return t.found(b, func(v []byte) error { return t.st.Put(k, v) })
}

// found finishes a Get that found the stored value b: it returns the value
// if it is live, renewing it with renew under TTLOnReadAndWrite (a store's
// refusal of the write from inside an iteration is no error: the read
// does not renew). The value returned is the decorator's copy when it
// renewed, the store's slice otherwise.
func (c *ttlCore) found(b []byte, renew func(stamped []byte) error) ([]byte, bool, error) {
	now := c.now()
	v, alive, err := c.live(b, now)
	if err != nil || !alive {
		return nil, false, err
	}
	if c.upd == TTLOnReadAndWrite {
		c.rbuf = append(c.rbuf[:0], v...)
		if err := renew(c.stamp(c.rbuf, now)); err != nil && !refused(err) {
			return nil, false, err
		}
		return c.rbuf, true, nil
	}
	return v, true, nil
}

// Put stamps v and stores it, then cleans a little.
func (t *ttlValue) Put(k Key, v []byte) error {
	if err := t.st.Put(k, t.stamp(v, t.now())); err != nil {
		return err
	}
	return t.cleanup()
}

// Update reads and rewrites k's value, an expired one counting as absent.
func (t *ttlValue) Update(k Key, fn func(old []byte, found bool) ([]byte, error)) error {
	if fn == nil {
		return fmt.Errorf("state %q: Update with a nil callback", t.inner.Spec().Name)
	}
	if t.upd2 == nil {
		return getPut(fn, func() ([]byte, bool, error) { return t.Get(k) }, func(v []byte) error { return t.Put(k, v) })
	}
	if err := t.upd2.Update(k, t.restamp(t.now(), fn)); err != nil {
		return err
	}
	return t.cleanup()
}

// getPut is the read-modify-write of an Update on a state without one
// that looks up once: a get, fn, and a put of fn's result.
func getPut(fn func(old []byte, found bool) ([]byte, error), get func() ([]byte, bool, error), put func([]byte) error) error {
	old, found, err := get()
	if err != nil {
		return err
	}
	nv, err := fn(old, found)
	if err != nil {
		return err
	}
	return put(nv)
}

// restamp returns the callback of a one-lookup Update of fn at now: an
// expired old value counts as absent, and fn's result is stamped.
func (c *ttlCore) restamp(now int64, fn func(old []byte, found bool) ([]byte, error)) func(ob []byte, found bool) ([]byte, error) {
	return func(ob []byte, found bool) ([]byte, error) {
		var old []byte
		if found {
			v, alive, err := c.live(ob, now)
			if err != nil {
				return nil, err
			}
			old, found = v, alive
			if !alive {
				old = nil
			}
		}
		nv, err := fn(old, found)
		if err != nil {
			return nil, err
		}
		return c.stamp(nv, now), nil
	}
}

// cleanup runs one step of the incremental cleanup after a write.
func (c *ttlCore) cleanup() error {
	if c.clean.budget < 0 {
		return nil
	}
	if err := c.clean.step(c); err != nil {
		return fmt.Errorf("the write succeeded; the TTL cleanup after it failed: %w", err)
	}
	return nil
}

// ttlList is the TTL decorator of a ListState: every element carries its
// own stamp, as in Flink.
type ttlList struct {
	ttlCore
	st    ListState
	elems [][]byte
	ends  []int
}

// Get calls fn with the live elements of k's list. Under
// TTLOnReadAndWrite a complete read renews every live element (and drops
// the expired ones) by replacing the list.
func (t *ttlList) Get(k Key, fn func(elem []byte) bool) error {
	now := t.now()
	var ierr error
	refresh := t.upd == TTLOnReadAndWrite
	var live [][]byte
	stopped := false
	err := t.st.Get(k, func(b []byte) bool {
		v, alive, err := t.live(b, now)
		if err != nil {
			ierr = err
			return false
		}
		if !alive {
			return true
		}
		if refresh {
			live = append(live, append([]byte(nil), v...))
		}
		if stopped {
			return true
		}
		if !fn(v) {
			stopped = true
			return refresh
		}
		return true
	})
	if ierr != nil {
		return ierr
	}
	if err != nil || !refresh {
		return err
	}
	if err := t.st.Replace(k, t.stampAll(live, now)); err != nil && !refused(err) {
		return err
	}
	return nil
}

// stampAll returns the elements es, each with the stamp of now in front,
// in the decorator's scratch buffers.
func (t *ttlList) stampAll(es [][]byte, now int64) [][]byte {
	buf, ends := t.buf[:0], t.ends[:0]
	for _, e := range es {
		buf = append(AppendTTLStamp(buf, now), e...)
		ends = append(ends, len(buf))
	}
	elems, start := t.elems[:0], 0
	for _, end := range ends {
		elems = append(elems, buf[start:end:end])
		start = end
	}
	t.buf, t.ends, t.elems = buf, ends, elems
	return elems
}

// Add appends a stamped elem.
func (t *ttlList) Add(k Key, elem []byte) error {
	if err := t.st.Add(k, t.stamp(elem, t.now())); err != nil {
		return err
	}
	return t.cleanup()
}

// AddAll appends the elems, stamped.
func (t *ttlList) AddAll(k Key, elems [][]byte) error {
	if len(elems) == 0 {
		return nil
	}
	if err := t.st.AddAll(k, t.stampAll(elems, t.now())); err != nil {
		return err
	}
	return t.cleanup()
}

// Replace replaces k's list with the elems, stamped.
func (t *ttlList) Replace(k Key, elems [][]byte) error {
	if err := t.st.Replace(k, t.stampAll(elems, t.now())); err != nil {
		return err
	}
	return t.cleanup()
}

// ttlMap is the TTL decorator of a MapState: every entry carries its own
// stamp, as in Flink.
type ttlMap struct {
	ttlCore
	st   MapState
	upd2 MapUpdater // st, if it updates in one lookup
}

// Get returns the live value of userKey in k's map.
func (t *ttlMap) Get(k Key, userKey []byte) ([]byte, bool, error) {
	b, ok, err := t.st.Get(k, userKey)
	if err != nil || !ok {
		return nil, false, err
	}
	return t.found(b, func(v []byte) error { return t.st.Put(k, userKey, v) })
}

// Put stamps value and stores it, then cleans a little.
func (t *ttlMap) Put(k Key, userKey, value []byte) error {
	if err := t.st.Put(k, userKey, t.stamp(value, t.now())); err != nil {
		return err
	}
	return t.cleanup()
}

// Update reads and rewrites userKey in k's map, an expired value counting
// as absent.
func (t *ttlMap) Update(k Key, userKey []byte, fn func(old []byte, found bool) ([]byte, error)) error {
	if fn == nil {
		return fmt.Errorf("state %q: Update with a nil callback", t.inner.Spec().Name)
	}
	if t.upd2 == nil {
		return getPut(fn, func() ([]byte, bool, error) { return t.Get(k, userKey) }, func(v []byte) error { return t.Put(k, userKey, v) })
	}
	if err := t.upd2.Update(k, userKey, t.restamp(t.now(), fn)); err != nil {
		return err
	}
	return t.cleanup()
}

// Delete passes through.
func (t *ttlMap) Delete(k Key, userKey []byte) error { return t.st.Delete(k, userKey) }

// Iterate calls fn with the live entries of k's map.
func (t *ttlMap) Iterate(k Key, fn func(userKey, value []byte) bool) error {
	return t.visit(k, func(f func(uk, v []byte) bool) error { return t.st.Iterate(k, f) }, fn)
}

// Edit walks the live entries of k's map; expired ones it meets are
// deleted, and under TTLOnReadAndWrite the kept ones renewed.
func (t *ttlMap) Edit(k Key, fn func(userKey, value []byte) (MapEdit, error)) error {
	return t.edit(func(f func(uk, v []byte) (MapEdit, error)) error { return t.st.Edit(k, f) }, fn)
}

// visit is Iterate and Range over walk (the inner Iterate or Range) of k's
// map. Under TTLOnReadAndWrite it keeps copies of the entries fn saw and
// renews them once the walk has ended — unless the store refuses the
// writes (a visit from inside another iteration), when they stay as they
// were.
func (t *ttlMap) visit(k Key, walk func(func(uk, v []byte) bool) error, fn func(uk, v []byte) bool) error {
	now := t.now()
	refresh := t.upd == TTLOnReadAndWrite
	var seen []byte
	var ends []int // of user key, then value, per entry seen
	var ierr error
	err := walk(func(uk, b []byte) bool {
		v, alive, err := t.live(b, now)
		if err != nil {
			ierr = err
			return false
		}
		if !alive {
			return true
		}
		if refresh {
			seen = append(seen, uk...)
			ends = append(ends, len(seen))
			seen = append(seen, v...)
			ends = append(ends, len(seen))
		}
		return fn(uk, v)
	})
	if ierr != nil {
		return ierr
	}
	if err != nil {
		return err
	}
	for i, start := 0, 0; i < len(ends); i += 2 {
		uk, v := seen[start:ends[i]], seen[ends[i]:ends[i+1]]
		start = ends[i+1]
		if err := t.st.Put(k, uk, t.stamp(v, now)); err != nil {
			if refused(err) {
				return nil
			}
			return err
		}
	}
	return nil
}

// edit is Edit and EditRange over the inner edit.
func (t *ttlMap) edit(edit func(func(uk, v []byte) (MapEdit, error)) error, fn func(uk, v []byte) (MapEdit, error)) error {
	if fn == nil {
		return fmt.Errorf("Edit with a nil callback")
	}
	now := t.now()
	return edit(func(uk, b []byte) (MapEdit, error) {
		v, alive, err := t.live(b, now)
		if err != nil {
			return MapEdit{}, err
		}
		if !alive {
			return MapEdit{Action: EditDelete}, nil
		}
		e, err := fn(uk, v)
		switch {
		case e.Action == EditReplace:
			e.Value = t.stamp(e.Value, now)
		case e.Action == EditKeep && t.upd == TTLOnReadAndWrite:
			e = MapEdit{Action: EditReplace, Value: t.stamp(v, now)}
		}
		return e, err
	})
}

// ttlSortedMap is the TTL decorator of a SortedMapState.
type ttlSortedMap struct {
	ttlMap
	sst SortedMapState
}

// Range calls fn with the live entries of k's map in [lo, hi).
func (t *ttlSortedMap) Range(k Key, lo, hi []byte, reverse bool, fn func(userKey, value []byte) bool) error {
	return t.visit(k, func(f func(uk, v []byte) bool) error { return t.sst.Range(k, lo, hi, reverse, f) }, fn)
}

// EditRange is Edit over the entries Range visits.
func (t *ttlSortedMap) EditRange(k Key, lo, hi []byte, reverse bool, fn func(userKey, value []byte) (MapEdit, error)) error {
	return t.edit(func(f func(uk, v []byte) (MapEdit, error)) error { return t.sst.EditRange(k, lo, hi, reverse, f) }, fn)
}

// ttlCleaner is the incremental cleanup's cursor: the key group being
// swept and the keys of it still to examine.
type ttlCleaner struct {
	groups KeyGroupRange
	maxP   int
	budget int // keys per step; negative: off
	next   int // the key group to sweep next
	kg     int // the key group being swept
	keys   []byte
	ends   []int
	pos    int
	nss    []byte // namespaces of the key being examined
	nsEnds []int
}

// step examines up to budget keys, loading the keys of the next key group
// when those of the current one are done. It loads at most one key group
// per step, so a store of empty key groups costs one Keys call per write.
func (c *ttlCleaner) step(t *ttlCore) error {
	if c.pos == len(c.ends) {
		if err := c.load(t); err != nil {
			return err
		}
	}
	for n := 0; n < c.budget && c.pos < len(c.ends); n++ {
		start := 0
		if c.pos > 0 {
			start = c.ends[c.pos-1]
		}
		key := c.keys[start:c.ends[c.pos]:c.ends[c.pos]]
		c.pos++
		if err := c.examine(t, key); err != nil {
			return fmt.Errorf("key group %d, key %x: %w", c.kg, key, err)
		}
	}
	return nil
}

// load collects the keys of the next owned key group.
func (c *ttlCleaner) load(t *ttlCore) error {
	c.kg = c.next
	c.next++
	if c.next >= c.groups.End {
		c.next = c.groups.Start
	}
	c.keys, c.ends, c.pos = c.keys[:0], c.ends[:0], 0
	err := t.inner.Keys(c.kg, func(key []byte) bool {
		c.keys = append(c.keys, key...)
		c.ends = append(c.ends, len(c.keys))
		return true
	})
	if err != nil {
		c.ends = c.ends[:0]
		return fmt.Errorf("keys of key group %d: %w", c.kg, err)
	}
	return nil
}

// examine deletes the expired entries of every namespace of key.
func (c *ttlCleaner) examine(t *ttlCore, key []byte) error {
	base := MakeKey(key, nil, c.maxP)
	c.nss, c.nsEnds = c.nss[:0], c.nsEnds[:0]
	if err := t.inner.Namespaces(base, func(ns []byte) bool {
		c.nss = append(c.nss, ns...)
		c.nsEnds = append(c.nsEnds, len(c.nss))
		return true
	}); err != nil {
		return err
	}
	now := t.now()
	start := 0
	for _, end := range c.nsEnds {
		k := base.WithNamespace(c.nss[start:end:end])
		start = end
		if err := t.expire(k, now); err != nil {
			return err
		}
	}
	return nil
}

// expire deletes the expired entries of k: a value, list elements, map
// entries.
func (t *ttlCore) expire(k Key, now int64) error {
	switch st := t.inner.(type) {
	case MapState:
		return st.Edit(k, func(_, b []byte) (MapEdit, error) {
			_, alive, err := t.live(b, now)
			if err != nil || alive {
				return MapEdit{}, err
			}
			return MapEdit{Action: EditDelete}, nil
		})
	case ListState:
		var live [][]byte
		expired := false
		var ierr error
		if err := st.Get(k, func(b []byte) bool {
			_, alive, err := t.live(b, now)
			if err != nil {
				ierr = err
				return false
			}
			if alive {
				live = append(live, append([]byte(nil), b...))
			} else {
				expired = true
			}
			return true
		}); err != nil || ierr != nil {
			return errors.Join(ierr, err)
		}
		if !expired {
			return nil
		}
		return st.Replace(k, live)
	case ValueState:
		b, ok, err := st.Get(k)
		if err != nil || !ok {
			return err
		}
		if _, alive, err := t.live(b, now); err != nil || alive {
			return err
		}
		return st.Clear(k)
	}
	return nil
}
