package runtime

import "fmt"

// MapDescriptor describes a keyed Map or SortedMap state: a map of user key
// UK to V per key K.
type MapDescriptor[K, UK, V any] struct {
	Name        string
	Fingerprint string
	Schema      string
	Migrations  []Migration
	TTL         TTL // time to live of the entries; zero means none (see TTL)
	Key         KeyCodec[K]
	UserKey     KeyCodec[UK] // order-preserving: orders a SortedMap
	Value       ValueCodec[V]
	// Typed, if set (TypedMaps), lets a store that can (TableHost:
	// backends/cow) keep a Map state without TTL as Go values rather than
	// bytes. NewSortedMap ignores it: a hash table keeps no order.
	Typed TypedMapTable[K, UK, V]
}

// SubKeyedMapDescriptor describes a sub-keyed Map or SortedMap state: a map
// of user key UK to V per (key K, namespace N).
type SubKeyedMapDescriptor[K, N, UK, V any] struct {
	Name        string
	Fingerprint string
	Schema      string
	Migrations  []Migration
	TTL         TTL // time to live of the entries; zero means none (see TTL)
	Key         KeyCodec[K]
	Namespace   KeyCodec[N]
	UserKey     KeyCodec[UK]
	Value       ValueCodec[V]
}

// MapEntry is one entry of a map state.
type MapEntry[UK, V any] struct {
	Key   UK
	Value V
}

// mapHandle implements the four map handles; sorted is nil for KindMap.
type mapHandle[K, N, UK, V any] struct {
	handle[K, N]
	st     MapState
	sorted SortedMapState
	ukc    KeyCodec[UK]
	ukw    KeyWord[UK] // ukc, if it gives 8-byte encodings as numbers
	vc     ValueCodec[V]
	into   IntoDecoder[V] // vc, if it decodes into a value (GetInto)
	upd    MapUpdater     // st, if it updates in one lookup
	updc   updateCall[V]  // the Update in progress, if upd
	// typed is st as a table of Go values (see TypedMapTable), if it is
	// one: the handle then reads and writes Go values.
	typed typedMap[K, UK, V]
	edgec edgeCall[UK, V]   // the First or Last in progress, if sorted
	scans []*mapScan[UK, V] // idle frames of scan (see mapScan)
}

// mapScan is the frame of one iteration of a map in progress (see scan):
// the callback the store calls with each entry, made once per frame, and
// the caller's yield. A handle keeps the frames of ended iterations for
// the next, so that an iteration allocates its frame only when
// iterations nest deeper than before.
type mapScan[UK, V any] struct {
	ukc   KeyCodec[UK]
	vc    ValueCodec[V]
	what  int // decodeKeys, decodeValues
	yield func(MapEntry[UK, V], error) bool
	fail  string // what failed to decode, if err
	err   error
	cb    func(ukb, vb []byte) bool
}

// scanFrame returns an idle frame of h, made if there is none.
func (h *mapHandle[K, N, UK, V]) scanFrame() *mapScan[UK, V] {
	if n := len(h.scans); n > 0 {
		sc := h.scans[n-1]
		h.scans = h.scans[:n-1]
		return sc
	}
	sc := &mapScan[UK, V]{ukc: h.ukc, vc: h.vc}
	sc.cb = func(ukb, vb []byte) bool {
		var e MapEntry[UK, V]
		if sc.fail, sc.err = decodeMapEntry(sc.ukc, sc.vc, sc.what, ukb, vb, &e); sc.err != nil {
			return false
		}
		return sc.yield(e, nil)
	}
	return sc
}

// decodeMapEntry decodes the parts what names of the entry (ukb, vb)
// into *e; on an error it says which part failed.
func decodeMapEntry[UK, V any](ukc KeyCodec[UK], vc ValueCodec[V], what int, ukb, vb []byte, e *MapEntry[UK, V]) (fail string, err error) {
	if what&decodeKeys != 0 {
		if e.Key, err = decodeKeyAll(ukc, ukb); err != nil {
			return "decode user key", err
		}
	}
	if what&decodeValues != 0 {
		if err = decodeInto(vc, vb, &e.Value); err != nil {
			return "decode value", err
		}
	}
	return "", nil
}

// scanDone makes sc idle again.
func (h *mapHandle[K, N, UK, V]) scanDone(sc *mapScan[UK, V]) {
	sc.yield, sc.fail, sc.err = nil, "", nil
	h.scans = append(h.scans, sc)
}

// edgeCall is a sorted map's First or Last in progress: the callback the
// store calls with the edge entry, made once when the handle is bound so
// that a call allocates nothing, and what it decoded. A store never calls
// back into the handle while it runs the callback, so one per handle does.
type edgeCall[UK, V any] struct {
	cb    func(ukb, vb []byte) bool
	e     MapEntry[UK, V]
	found bool
	what  string // what failed to decode, if err
	err   error
}

func (c *edgeCall[UK, V]) init(ukc KeyCodec[UK], vc ValueCodec[V]) {
	c.cb = func(ukb, vb []byte) bool {
		c.found = true
		c.what, c.err = decodeMapEntry(ukc, vc, decodeBoth, ukb, vb, &c.e)
		return false
	}
}

func bindMap[K, N, UK, V any](s Store, spec StateSpec, kc KeyCodec[K], nc KeyCodec[N], ukc KeyCodec[UK], vc ValueCodec[V], ttl TTL, typed TypedMapTable[K, UK, V]) (*mapHandle[K, N, UK, V], error) {
	if ukc == nil {
		return nil, nilCodecError(spec.Name, "user key")
	}
	if vc == nil {
		return nil, nilCodecError(spec.Name, "value")
	}
	ukw, err := keyWordOf(spec.Name, "user key", ukc)
	if err != nil {
		return nil, err
	}
	h := new(mapHandle[K, N, UK, V])
	var mk func(StateSpec, TableEnv) (Table, error)
	if typed.mk != nil && kc != nil && spec.Kind == KindMap {
		mk = func(spec StateSpec, env TableEnv) (Table, error) { return typed.mk(spec, env, kc, ukc, vc) }
	}
	st, err := h.bind(s, spec, kc, nc, ttl, mk)
	if err != nil {
		return nil, err
	}
	ms, ok := st.(MapState)
	if !ok {
		return nil, wrongStateType(spec, st)
	}
	if spec.Kind == KindSortedMap {
		if h.sorted, ok = st.(SortedMapState); !ok {
			return nil, wrongStateType(spec, st)
		}
		h.edgec.init(ukc, vc)
	}
	h.st, h.ukc, h.vc = ms, ukc, vc
	h.into, _ = vc.(IntoDecoder[V])
	h.typed, _ = st.(typedMap[K, UK, V])
	h.ukw = ukw
	if h.upd, _ = ms.(MapUpdater); h.upd != nil {
		h.updc.init(spec.Name, vc)
	}
	return h, nil
}

// get decodes the value of (k, n, uk) into *dst and reports whether it
// exists; *dst is left alone if it does not, and does not escape (see
// valueHandle.get).
func (h *mapHandle[K, N, UK, V]) get(k K, n N, uk UK, dst *V) (bool, error) {
	if h.typed != nil {
		return h.tget(k, n, uk, dst)
	}
	b, ok, err := h.lookup(k, n, uk)
	if err != nil || !ok {
		return false, err
	}
	if err := decodeInto(h.vc, b, dst); err != nil {
		return false, h.errorf("decode value", err)
	}
	return true, nil
}

// getInto is get for GetInto (see valueHandle.getInto).
func (h *mapHandle[K, N, UK, V]) getInto(k K, n N, uk UK, dst *V) (bool, error) {
	if h.typed != nil {
		return h.tget(k, n, uk, dst)
	}
	b, ok, err := h.lookup(k, n, uk)
	if err != nil || !ok {
		return false, err
	}
	if err := decodeReusing(h.vc, h.into, b, dst); err != nil {
		return false, h.errorf("decode value", err)
	}
	return true, nil
}

// tkey is the (key group, HashKey) of (k, n) and the userKeyHash of uk, as a
// map table takes them.
func (h *mapHandle[K, N, UK, V]) tkey(k K, n N, uk UK) (int, uint64, uint64) {
	kg, hash := h.tableKey(k, n)
	if h.ukw != nil {
		return kg, hash, userKeyHashWord(h.ukw.KeyWord(uk))
	}
	// Only the hashes are kept: uk is encoded at the buffer's start.
	h.buf = h.buf[:0]
	return kg, hash, userKeyHash(userKey(&h.buf, h.ukc, uk))
}

// tget is get on a table of Go values: the value is copied, not decoded.
func (h *mapHandle[K, N, UK, V]) tget(k K, n N, uk UK, dst *V) (bool, error) {
	kg, hash, uh := h.tkey(k, n, uk)
	v, ok, err := h.typed.tget(kg, hash, k, uh, uk)
	if err != nil {
		return false, h.errorf("get", err)
	}
	if ok {
		*dst = v
	}
	return ok, nil
}

// lookup returns the encoded value of (k, n, uk), valid until the next
// call on the store.
func (h *mapHandle[K, N, UK, V]) lookup(k K, n N, uk UK) ([]byte, bool, error) {
	var key Key
	h.key(&key, k, n)
	b, ok, err := h.st.Get(key, userKey(&h.buf, h.ukc, uk))
	if err != nil {
		return nil, false, h.errorf("get", err)
	}
	return b, ok, nil
}

func (h *mapHandle[K, N, UK, V]) contains(k K, n N, uk UK) (bool, error) {
	if h.typed != nil {
		var v V
		return h.tget(k, n, uk, &v)
	}
	var key Key
	h.key(&key, k, n)
	_, ok, err := h.st.Get(key, userKey(&h.buf, h.ukc, uk))
	if err != nil {
		return false, h.errorf("contains", err)
	}
	return ok, nil
}

func (h *mapHandle[K, N, UK, V]) put(k K, n N, uk UK, v V) error {
	if h.typed != nil {
		kg, hash, uh := h.tkey(k, n, uk)
		if err := h.typed.tput(kg, hash, k, uh, uk, v); err != nil {
			return h.errorf("put", err)
		}
		return nil
	}
	var key Key
	h.key(&key, k, n)
	ukb := userKey(&h.buf, h.ukc, uk)
	h.vbuf = h.vc.AppendValue(h.vbuf[:0], v)
	if err := h.st.Put(key, ukb, h.vbuf); err != nil {
		return h.errorf("put", err)
	}
	return nil
}

// update is the read-modify-write of Update: one lookup on a store whose
// MapState is a MapUpdater, a Get then a Put on the others.
func (h *mapHandle[K, N, UK, V]) update(k K, n N, uk UK, fn func(old V, found bool) V) error {
	if fn == nil {
		return h.errorf("update", fmt.Errorf("nil callback"))
	}
	if h.typed != nil {
		kg, hash, uh := h.tkey(k, n, uk)
		if err := h.typed.tupdate(kg, hash, k, uh, uk, fn); err != nil {
			return h.errorf("update", err)
		}
		return nil
	}
	if h.upd == nil {
		var old V
		found, err := h.get(k, n, uk, &old)
		if err != nil {
			return err
		}
		return h.put(k, n, uk, fn(old, found))
	}
	var key Key
	h.key(&key, k, n)
	ukb := userKey(&h.buf, h.ukc, uk)
	// fn may read through this handle: its keys must not overwrite the
	// bytes of key and ukb (see take).
	buf := h.take()
	h.updc.begin(fn)
	err := h.updc.end(h.upd.Update(key, ukb, h.updc.cb))
	h.give(buf)
	return err
}

func (h *mapHandle[K, N, UK, V]) delete(k K, n N, uk UK) error {
	if h.typed != nil {
		kg, hash, uh := h.tkey(k, n, uk)
		if err := h.typed.tdelete(kg, hash, k, uh, uk); err != nil {
			return h.errorf("delete", err)
		}
		return nil
	}
	var key Key
	h.key(&key, k, n)
	if err := h.st.Delete(key, userKey(&h.buf, h.ukc, uk)); err != nil {
		return h.errorf("delete", err)
	}
	return nil
}

// Which parts of an entry an iteration decodes.
const (
	decodeKeys = 1 << iota
	decodeValues
	decodeBoth = decodeKeys | decodeValues
)

// scan is the iteration shared by All, Keys, Values and the sorted ranges.
// lo and hi bound the user keys for sorted ranges (nil: unbounded).
func (h *mapHandle[K, N, UK, V]) scan(k K, n N, what int, lo, hi *UK, reverse bool) Seq[MapEntry[UK, V]] {
	return func(yield func(MapEntry[UK, V], error) bool) {
		var key Key
		h.key(&key, k, n)
		var lob, hib []byte
		if lo != nil {
			lob = userKey(&h.buf, h.ukc, *lo)
		}
		if hi != nil {
			// Never nil, even for a zero-length encoding: nil means unbounded.
			if hib = userKey(&h.buf, h.ukc, *hi); hib == nil {
				hib = []byte{}
			}
		}
		defer h.give(h.take())
		sc := h.scanFrame()
		defer h.scanDone(sc)
		sc.what, sc.yield = what, yield
		var err error
		if h.typed != nil {
			// A map table is never sorted: no bounds, no reverse.
			err = h.typed.tscan(key.Group(), key.Hash(), k, sc)
		} else if lo == nil && hi == nil && !reverse {
			err = h.st.Iterate(key, sc.cb)
		} else {
			err = h.sorted.Range(key, lob, hib, reverse, sc.cb)
		}
		var ierr error
		switch {
		case sc.err != nil:
			ierr = h.errorf(sc.fail, sc.err)
		case err != nil:
			ierr = h.errorf("iterate", err)
		}
		if ierr != nil {
			yield(MapEntry[UK, V]{}, ierr)
		}
	}
}

func (h *mapHandle[K, N, UK, V]) keys(k K, n N) Seq[UK] {
	return func(yield func(UK, error) bool) {
		for e, err := range h.scan(k, n, decodeKeys, nil, nil, false) {
			if !yield(e.Key, err) {
				return
			}
		}
	}
}

func (h *mapHandle[K, N, UK, V]) values(k K, n N) Seq[V] {
	return func(yield func(V, error) bool) {
		for e, err := range h.scan(k, n, decodeValues, nil, nil, false) {
			if !yield(e.Value, err) {
				return
			}
		}
	}
}

func (h *mapHandle[K, N, UK, V]) isEmpty(k K, n N) (bool, error) {
	for _, err := range h.scan(k, n, 0, nil, nil, false) {
		return false, err
	}
	return true, nil
}

// edge returns the first (or, if last, the last) entry of a sorted map.
func (h *mapHandle[K, N, UK, V]) edge(k K, n N, last bool) (MapEntry[UK, V], bool, error) {
	var key Key
	h.key(&key, k, n)
	c := &h.edgec
	var err error
	if last {
		err = h.sorted.Range(key, nil, nil, true, c.cb)
	} else {
		err = h.st.Iterate(key, c.cb)
	}
	e, found, what, derr := c.e, c.found, c.what, c.err
	c.e, c.found, c.what, c.err = MapEntry[UK, V]{}, false, "", nil // keep nothing of the entry
	switch {
	case derr != nil:
		return MapEntry[UK, V]{}, false, h.errorf(what, derr)
	case err != nil:
		return MapEntry[UK, V]{}, false, h.errorf("iterate", err)
	}
	return e, found, nil
}

// edit is the Edit and EditRange of the map handles: the store's Edit (or
// EditRange, when lo or hi bounds the user keys), with each entry decoded
// for fn and a replaced value encoded.
func (h *mapHandle[K, N, UK, V]) edit(k K, n N, lo, hi *UK, fn func(uk UK, v *V) (EditAction, error)) error {
	if fn == nil {
		return h.errorf("edit", fmt.Errorf("nil callback"))
	}
	var key Key
	h.key(&key, k, n)
	var lob, hib []byte
	if lo != nil {
		lob = userKey(&h.buf, h.ukc, *lo)
	}
	if hi != nil {
		if hib = userKey(&h.buf, h.ukc, *hi); hib == nil {
			hib = []byte{}
		}
	}
	defer h.give(h.take())
	var vbuf []byte // fn may read through this handle, which reuses h.vbuf
	var ferr error
	cb := func(ukb, vb []byte) (MapEdit, error) {
		uk, err := decodeKeyAll(h.ukc, ukb)
		if err != nil {
			ferr = h.errorf("decode user key", err)
			return MapEdit{}, ferr
		}
		v, err := decodeAll(h.vc, vb)
		if err != nil {
			ferr = h.errorf("decode value", err)
			return MapEdit{}, ferr
		}
		act, err := fn(uk, &v)
		if act == EditReplace {
			vbuf = h.vc.AppendValue(vbuf[:0], v)
			return MapEdit{Action: act, Value: vbuf}, err
		}
		return MapEdit{Action: act}, err
	}
	var err error
	if lo == nil && hi == nil {
		err = h.st.Edit(key, cb)
	} else {
		err = h.sorted.EditRange(key, lob, hib, false, cb)
	}
	switch {
	case err == nil:
		return nil
	case ferr != nil:
		return ferr
	}
	return h.errorf("edit", err)
}

// Map is a handle on a keyed map state: a map of user key UK to V per key K,
// iterated in unspecified order. A map with no entries does not exist. The
// zero Map is unbound and every method returns ErrUnbound.
type Map[K, UK, V any] struct{ h *mapHandle[K, noNS, UK, V] }

// NewMap registers d as a KindMap state with s and returns its handle.
func NewMap[K, UK, V any](s Store, d MapDescriptor[K, UK, V]) (Map[K, UK, V], error) {
	h, err := bindMap[K, noNS](s, StateSpec{Name: d.Name, Fingerprint: d.Fingerprint, Schema: d.Schema, Migrations: d.Migrations, Kind: KindMap}, d.Key, nil, d.UserKey, d.Value, d.TTL, d.Typed)
	return Map[K, UK, V]{h}, err
}

// Get returns the value of uk in k's map and whether it exists.
func (m Map[K, UK, V]) Get(k K, uk UK) (val V, found bool, err error) {
	if m.h == nil {
		return val, false, ErrUnbound
	}
	found, err = m.h.get(k, noNS{}, uk, &val)
	return val, found, err
}

// GetInto decodes the value of uk in k's map into *dst and reports whether
// it exists, as Value.GetInto does.
func (m Map[K, UK, V]) GetInto(k K, uk UK, dst *V) (found bool, err error) {
	if m.h == nil {
		return false, ErrUnbound
	}
	return m.h.getInto(k, noNS{}, uk, dst)
}

// Contains reports whether uk is in k's map.
func (m Map[K, UK, V]) Contains(k K, uk UK) (bool, error) {
	if m.h == nil {
		return false, ErrUnbound
	}
	return m.h.contains(k, noNS{}, uk)
}

// Put sets uk to v in k's map, replacing any previous value.
func (m Map[K, UK, V]) Put(k K, uk UK, v V) error {
	if m.h == nil {
		return ErrUnbound
	}
	return m.h.put(k, noNS{}, uk, v)
}

// Update sets uk in k's map to fn(old, found), where old is its current
// value (the zero V if !found): Value.Update for one entry of a map.
func (m Map[K, UK, V]) Update(k K, uk UK, fn func(old V, found bool) V) error {
	if m.h == nil {
		return ErrUnbound
	}
	return m.h.update(k, noNS{}, uk, fn)
}

// Delete removes uk from k's map.
func (m Map[K, UK, V]) Delete(k K, uk UK) error {
	if m.h == nil {
		return ErrUnbound
	}
	return m.h.delete(k, noNS{}, uk)
}

// All yields the entries of k's map.
func (m Map[K, UK, V]) All(k K) Seq[MapEntry[UK, V]] {
	if m.h == nil {
		return unboundSeq[MapEntry[UK, V]]
	}
	return m.h.scan(k, noNS{}, decodeBoth, nil, nil, false)
}

// Edit visits the entries of k's map, as All does, and fn says what
// becomes of each: EditKeep, EditDelete, or EditReplace with the value fn
// left in *v — Flink's iterator.remove and entry.setValue. It is the one
// way to change a map while iterating it (a Put or Delete from inside All
// fails with ErrWriteDuringIteration). fn sees the map as it was (reads
// from fn included); the edits apply when the walk ends, before Edit
// returns. fn returning StopEdit ends the walk, and its edits so far
// apply; any other error ends it, and Edit returns it and applies none.
//
//	// Drop the sessions that ended before the watermark, shorten the rest.
//	err := st.Sessions.Edit(user, func(id int64, s *Session) (runtime.EditAction, error) {
//		if s.End < watermark {
//			return runtime.EditDelete, nil
//		}
//		return runtime.EditKeep, nil
//	})
func (m Map[K, UK, V]) Edit(k K, fn func(uk UK, v *V) (EditAction, error)) error {
	if m.h == nil {
		return ErrUnbound
	}
	return m.h.edit(k, noNS{}, nil, nil, fn)
}

// Keys yields the user keys of k's map.
func (m Map[K, UK, V]) Keys(k K) Seq[UK] {
	if m.h == nil {
		return unboundSeq[UK]
	}
	return m.h.keys(k, noNS{})
}

// Values yields the values of k's map.
func (m Map[K, UK, V]) Values(k K) Seq[V] {
	if m.h == nil {
		return unboundSeq[V]
	}
	return m.h.values(k, noNS{})
}

// IsEmpty reports whether k's map has no entries.
func (m Map[K, UK, V]) IsEmpty(k K) (bool, error) {
	if m.h == nil {
		return false, ErrUnbound
	}
	return m.h.isEmpty(k, noNS{})
}

// Clear removes every entry of k's map.
func (m Map[K, UK, V]) Clear(k K) error {
	if m.h == nil {
		return ErrUnbound
	}
	return m.h.clear(m.h.st, k, noNS{})
}

// Spec returns the state's spec; the zero handle returns the zero spec.
func (m Map[K, UK, V]) Spec() StateSpec {
	if m.h == nil {
		return StateSpec{}
	}
	return m.h.st.Spec()
}

// SubKeyedMap is a handle on a sub-keyed map state: a map of user key UK to
// V per (key K, namespace N). The rules of Map apply.
type SubKeyedMap[K, N, UK, V any] struct{ h *mapHandle[K, N, UK, V] }

// NewSubKeyedMap registers d as a sub-keyed KindMap state with s and returns
// its handle.
func NewSubKeyedMap[K, N, UK, V any](s Store, d SubKeyedMapDescriptor[K, N, UK, V]) (SubKeyedMap[K, N, UK, V], error) {
	h, err := bindMap(s, StateSpec{Name: d.Name, Fingerprint: d.Fingerprint, Schema: d.Schema, Migrations: d.Migrations, Kind: KindMap, SubKeyed: true}, d.Key, d.Namespace, d.UserKey, d.Value, d.TTL, TypedMapTable[K, UK, V]{})
	return SubKeyedMap[K, N, UK, V]{h}, err
}

// Get returns the value of uk in (k, n)'s map and whether it exists.
func (m SubKeyedMap[K, N, UK, V]) Get(k K, n N, uk UK) (val V, found bool, err error) {
	if m.h == nil {
		return val, false, ErrUnbound
	}
	found, err = m.h.get(k, n, uk, &val)
	return val, found, err
}

// GetInto decodes the value of uk in (k, n)'s map into *dst and reports
// whether it exists, as Value.GetInto does.
func (m SubKeyedMap[K, N, UK, V]) GetInto(k K, n N, uk UK, dst *V) (found bool, err error) {
	if m.h == nil {
		return false, ErrUnbound
	}
	return m.h.getInto(k, n, uk, dst)
}

// Contains reports whether uk is in (k, n)'s map.
func (m SubKeyedMap[K, N, UK, V]) Contains(k K, n N, uk UK) (bool, error) {
	if m.h == nil {
		return false, ErrUnbound
	}
	return m.h.contains(k, n, uk)
}

// Put sets uk to v in (k, n)'s map.
func (m SubKeyedMap[K, N, UK, V]) Put(k K, n N, uk UK, v V) error {
	if m.h == nil {
		return ErrUnbound
	}
	return m.h.put(k, n, uk, v)
}

// Update sets uk in (k, n)'s map to fn(old, found), as Map.Update does.
func (m SubKeyedMap[K, N, UK, V]) Update(k K, n N, uk UK, fn func(old V, found bool) V) error {
	if m.h == nil {
		return ErrUnbound
	}
	return m.h.update(k, n, uk, fn)
}

// Delete removes uk from (k, n)'s map.
func (m SubKeyedMap[K, N, UK, V]) Delete(k K, n N, uk UK) error {
	if m.h == nil {
		return ErrUnbound
	}
	return m.h.delete(k, n, uk)
}

// All yields the entries of (k, n)'s map.
func (m SubKeyedMap[K, N, UK, V]) All(k K, n N) Seq[MapEntry[UK, V]] {
	if m.h == nil {
		return unboundSeq[MapEntry[UK, V]]
	}
	return m.h.scan(k, n, decodeBoth, nil, nil, false)
}

// Edit visits the entries of (k, n)'s map and applies what fn says of
// each, as Map.Edit does.
func (m SubKeyedMap[K, N, UK, V]) Edit(k K, n N, fn func(uk UK, v *V) (EditAction, error)) error {
	if m.h == nil {
		return ErrUnbound
	}
	return m.h.edit(k, n, nil, nil, fn)
}

// Keys yields the user keys of (k, n)'s map.
func (m SubKeyedMap[K, N, UK, V]) Keys(k K, n N) Seq[UK] {
	if m.h == nil {
		return unboundSeq[UK]
	}
	return m.h.keys(k, n)
}

// Values yields the values of (k, n)'s map.
func (m SubKeyedMap[K, N, UK, V]) Values(k K, n N) Seq[V] {
	if m.h == nil {
		return unboundSeq[V]
	}
	return m.h.values(k, n)
}

// IsEmpty reports whether (k, n)'s map has no entries.
func (m SubKeyedMap[K, N, UK, V]) IsEmpty(k K, n N) (bool, error) {
	if m.h == nil {
		return false, ErrUnbound
	}
	return m.h.isEmpty(k, n)
}

// Clear removes every entry of (k, n)'s map.
func (m SubKeyedMap[K, N, UK, V]) Clear(k K, n N) error {
	if m.h == nil {
		return ErrUnbound
	}
	return m.h.clear(m.h.st, k, n)
}

// Namespaces yields every namespace of k that has a non-empty map.
func (m SubKeyedMap[K, N, UK, V]) Namespaces(k K) Seq[N] {
	if m.h == nil {
		return unboundSeq[N]
	}
	return m.h.namespaces(m.h.st, k)
}

// DeleteAll removes the maps of every namespace of k.
func (m SubKeyedMap[K, N, UK, V]) DeleteAll(k K) error {
	if m.h == nil {
		return ErrUnbound
	}
	return m.h.deleteAll(m.h.st, k)
}

// Spec returns the state's spec; the zero handle returns the zero spec.
func (m SubKeyedMap[K, N, UK, V]) Spec() StateSpec {
	if m.h == nil {
		return StateSpec{}
	}
	return m.h.st.Spec()
}

// SortedMap is a handle on a keyed sorted map state: a Map whose entries
// are ordered by user key (by the order of its KeyCodec). Every Map method
// is available through the embedded Map and iterates in ascending order.
type SortedMap[K, UK, V any] struct{ Map[K, UK, V] }

// NewSortedMap registers d as a KindSortedMap state with s and returns its
// handle.
func NewSortedMap[K, UK, V any](s Store, d MapDescriptor[K, UK, V]) (SortedMap[K, UK, V], error) {
	h, err := bindMap[K, noNS](s, StateSpec{Name: d.Name, Fingerprint: d.Fingerprint, Schema: d.Schema, Migrations: d.Migrations, Kind: KindSortedMap}, d.Key, nil, d.UserKey, d.Value, d.TTL, TypedMapTable[K, UK, V]{})
	return SortedMap[K, UK, V]{Map[K, UK, V]{h}}, err
}

// First returns the entry of k's map with the smallest user key, and whether
// the map has one.
func (m SortedMap[K, UK, V]) First(k K) (MapEntry[UK, V], bool, error) {
	if m.h == nil {
		return MapEntry[UK, V]{}, false, ErrUnbound
	}
	return m.h.edge(k, noNS{}, false)
}

// Last returns the entry of k's map with the largest user key, and whether
// the map has one.
func (m SortedMap[K, UK, V]) Last(k K) (MapEntry[UK, V], bool, error) {
	if m.h == nil {
		return MapEntry[UK, V]{}, false, ErrUnbound
	}
	return m.h.edge(k, noNS{}, true)
}

// Range yields the entries of k's map with from <= user key < to, in
// ascending order.
func (m SortedMap[K, UK, V]) Range(k K, from, to UK) Seq[MapEntry[UK, V]] {
	if m.h == nil {
		return unboundSeq[MapEntry[UK, V]]
	}
	return m.h.scan(k, noNS{}, decodeBoth, &from, &to, false)
}

// EditRange is Edit over the entries of k's map with from <= user key <
// to, in ascending order (see Map.Edit).
func (m SortedMap[K, UK, V]) EditRange(k K, from, to UK, fn func(uk UK, v *V) (EditAction, error)) error {
	if m.h == nil {
		return ErrUnbound
	}
	return m.h.edit(k, noNS{}, &from, &to, fn)
}

// EditBefore is Edit over the entries of k's map with user key < to, in
// ascending order: the pruning of everything older than a bound.
func (m SortedMap[K, UK, V]) EditBefore(k K, to UK, fn func(uk UK, v *V) (EditAction, error)) error {
	if m.h == nil {
		return ErrUnbound
	}
	return m.h.edit(k, noNS{}, nil, &to, fn)
}

// From yields the entries of k's map with user key >= from, ascending.
func (m SortedMap[K, UK, V]) From(k K, from UK) Seq[MapEntry[UK, V]] {
	if m.h == nil {
		return unboundSeq[MapEntry[UK, V]]
	}
	return m.h.scan(k, noNS{}, decodeBoth, &from, nil, false)
}

// Before yields the entries of k's map with user key < to, ascending.
func (m SortedMap[K, UK, V]) Before(k K, to UK) Seq[MapEntry[UK, V]] {
	if m.h == nil {
		return unboundSeq[MapEntry[UK, V]]
	}
	return m.h.scan(k, noNS{}, decodeBoth, nil, &to, false)
}

// Descend yields every entry of k's map in descending order.
func (m SortedMap[K, UK, V]) Descend(k K) Seq[MapEntry[UK, V]] {
	if m.h == nil {
		return unboundSeq[MapEntry[UK, V]]
	}
	return m.h.scan(k, noNS{}, decodeBoth, nil, nil, true)
}

// DescendRange yields the entries of k's map with from <= user key < to, in
// descending order.
func (m SortedMap[K, UK, V]) DescendRange(k K, from, to UK) Seq[MapEntry[UK, V]] {
	if m.h == nil {
		return unboundSeq[MapEntry[UK, V]]
	}
	return m.h.scan(k, noNS{}, decodeBoth, &from, &to, true)
}

// SubKeyedSortedMap is a handle on a sub-keyed sorted map state. Every
// SubKeyedMap method is available through the embedded SubKeyedMap and
// iterates in ascending order.
type SubKeyedSortedMap[K, N, UK, V any] struct{ SubKeyedMap[K, N, UK, V] }

// NewSubKeyedSortedMap registers d as a sub-keyed KindSortedMap state with s
// and returns its handle.
func NewSubKeyedSortedMap[K, N, UK, V any](s Store, d SubKeyedMapDescriptor[K, N, UK, V]) (SubKeyedSortedMap[K, N, UK, V], error) {
	h, err := bindMap(s, StateSpec{Name: d.Name, Fingerprint: d.Fingerprint, Schema: d.Schema, Migrations: d.Migrations, Kind: KindSortedMap, SubKeyed: true}, d.Key, d.Namespace, d.UserKey, d.Value, d.TTL, TypedMapTable[K, UK, V]{})
	return SubKeyedSortedMap[K, N, UK, V]{SubKeyedMap[K, N, UK, V]{h}}, err
}

// First returns the entry of (k, n)'s map with the smallest user key.
func (m SubKeyedSortedMap[K, N, UK, V]) First(k K, n N) (MapEntry[UK, V], bool, error) {
	if m.h == nil {
		return MapEntry[UK, V]{}, false, ErrUnbound
	}
	return m.h.edge(k, n, false)
}

// Last returns the entry of (k, n)'s map with the largest user key.
func (m SubKeyedSortedMap[K, N, UK, V]) Last(k K, n N) (MapEntry[UK, V], bool, error) {
	if m.h == nil {
		return MapEntry[UK, V]{}, false, ErrUnbound
	}
	return m.h.edge(k, n, true)
}

// Range yields the entries of (k, n)'s map with from <= user key < to,
// ascending.
func (m SubKeyedSortedMap[K, N, UK, V]) Range(k K, n N, from, to UK) Seq[MapEntry[UK, V]] {
	if m.h == nil {
		return unboundSeq[MapEntry[UK, V]]
	}
	return m.h.scan(k, n, decodeBoth, &from, &to, false)
}

// EditRange is Edit over the entries of (k, n)'s map with from <= user
// key < to, in ascending order (see Map.Edit).
func (m SubKeyedSortedMap[K, N, UK, V]) EditRange(k K, n N, from, to UK, fn func(uk UK, v *V) (EditAction, error)) error {
	if m.h == nil {
		return ErrUnbound
	}
	return m.h.edit(k, n, &from, &to, fn)
}

// EditBefore is Edit over the entries of (k, n)'s map with user key < to,
// in ascending order.
func (m SubKeyedSortedMap[K, N, UK, V]) EditBefore(k K, n N, to UK, fn func(uk UK, v *V) (EditAction, error)) error {
	if m.h == nil {
		return ErrUnbound
	}
	return m.h.edit(k, n, nil, &to, fn)
}

// From yields the entries of (k, n)'s map with user key >= from, ascending.
func (m SubKeyedSortedMap[K, N, UK, V]) From(k K, n N, from UK) Seq[MapEntry[UK, V]] {
	if m.h == nil {
		return unboundSeq[MapEntry[UK, V]]
	}
	return m.h.scan(k, n, decodeBoth, &from, nil, false)
}

// Before yields the entries of (k, n)'s map with user key < to, ascending.
func (m SubKeyedSortedMap[K, N, UK, V]) Before(k K, n N, to UK) Seq[MapEntry[UK, V]] {
	if m.h == nil {
		return unboundSeq[MapEntry[UK, V]]
	}
	return m.h.scan(k, n, decodeBoth, nil, &to, false)
}

// Descend yields every entry of (k, n)'s map in descending order.
func (m SubKeyedSortedMap[K, N, UK, V]) Descend(k K, n N) Seq[MapEntry[UK, V]] {
	if m.h == nil {
		return unboundSeq[MapEntry[UK, V]]
	}
	return m.h.scan(k, n, decodeBoth, nil, nil, true)
}

// DescendRange yields the entries of (k, n)'s map with from <= user key <
// to, descending.
func (m SubKeyedSortedMap[K, N, UK, V]) DescendRange(k K, n N, from, to UK) Seq[MapEntry[UK, V]] {
	if m.h == nil {
		return unboundSeq[MapEntry[UK, V]]
	}
	return m.h.scan(k, n, decodeBoth, &from, &to, true)
}

// KeysIn yields every key of the state in key group kg, which the store
// must own, each once, whatever its number of namespaces, entries or
// elements: on sorted backends in key order, elsewhere in the backend's.
// Calls on the state from inside the loop may read, never write. An error
// ends the sequence.
func (m Map[K, UK, V]) KeysIn(kg int) Seq[K] {
	if m.h == nil {
		return unboundSeq[K]
	}
	return m.h.keysIn(m.h.st, kg)
}

// AllKeys yields every key of the state in the key groups the store owns,
// key group after key group, as KeysIn does for one.
func (m Map[K, UK, V]) AllKeys() Seq[K] {
	if m.h == nil {
		return unboundSeq[K]
	}
	return m.h.allKeys(m.h.st)
}

// KeysIn yields every key of the state in key group kg, which the store
// must own, each once, whatever its number of namespaces, entries or
// elements: on sorted backends in key order, elsewhere in the backend's.
// Calls on the state from inside the loop may read, never write. An error
// ends the sequence.
func (m SubKeyedMap[K, N, UK, V]) KeysIn(kg int) Seq[K] {
	if m.h == nil {
		return unboundSeq[K]
	}
	return m.h.keysIn(m.h.st, kg)
}

// AllKeys yields every key of the state in the key groups the store owns,
// key group after key group, as KeysIn does for one.
func (m SubKeyedMap[K, N, UK, V]) AllKeys() Seq[K] {
	if m.h == nil {
		return unboundSeq[K]
	}
	return m.h.allKeys(m.h.st)
}
