package runtime

import "fmt"

// ListDescriptor describes a keyed list state: an ordered list of V per key
// K.
type ListDescriptor[K, V any] struct {
	Name        string
	Fingerprint string
	Schema      string
	Migrations  []Migration
	TTL         TTL // time to live of the entries; zero means none (see TTL)
	Key         KeyCodec[K]
	Value       ValueCodec[V] // codec of one element
}

// SubKeyedListDescriptor describes a sub-keyed list state: an ordered list
// of V per (key K, namespace N).
type SubKeyedListDescriptor[K, N, V any] struct {
	Name        string
	Fingerprint string
	Schema      string
	Migrations  []Migration
	TTL         TTL // time to live of the entries; zero means none (see TTL)
	Key         KeyCodec[K]
	Namespace   KeyCodec[N]
	Value       ValueCodec[V]
}

// listHandle implements List and SubKeyedList.
type listHandle[K, N, V any] struct {
	handle[K, N]
	st    ListState
	vc    ValueCodec[V]
	elems [][]byte // scratch for AddAll and Replace
	ends  []int
	scans []*listScan[V] // idle frames of All, for the next (see listScan)
	into  IntoDecoder[V] // vc, if it decodes into a value (GetInto)
	// GetInto's: the callback to the store, made once at bind (no code of
	// the caller runs while the store calls it), the slice it fills and
	// the decoding error that stopped it.
	intoCB  func(elem []byte) bool
	intoDst *[]V
	intoErr error
}

// appendInto is the callback of GetInto: it decodes elem into the next
// element of *h.intoDst, reusing that element's memory when the slice has
// room.
func (h *listHandle[K, N, V]) appendInto(elem []byte) bool {
	s := *h.intoDst
	if len(s) < cap(s) {
		s = s[:len(s)+1]
	} else {
		var zero V
		s = append(s, zero)
	}
	*h.intoDst = s
	if err := decodeReusing(h.vc, h.into, elem, &s[len(s)-1]); err != nil {
		h.intoErr = err
		return false
	}
	return true
}

// getIntoNested is getInto through an iteration, which needs no state of
// the handle's own; kept apart because its closure would make getInto's
// arguments escape.
func (h *listHandle[K, N, V]) getIntoNested(k K, n N, dst *[]V) error {
	out := (*dst)[:0]
	for v, err := range h.all(k, n) {
		if err != nil {
			*dst = out[:0]
			return err
		}
		out = append(out, v)
	}
	*dst = out
	return nil
}

// getInto decodes the elements of (k, n)'s list into *dst (see
// List.GetInto).
func (h *listHandle[K, N, V]) getInto(k K, n N, dst *[]V) error {
	if dst == nil {
		return h.errorf("get into", fmt.Errorf("nil destination"))
	}
	if h.intoDst != nil {
		// A GetInto from inside another's decoding (a migration that
		// reads the state): the handle's callback is taken.
		return h.getIntoNested(k, n, dst)
	}
	var key Key
	h.key(&key, k, n)
	*dst = (*dst)[:0]
	h.intoDst, h.intoErr = dst, nil
	err := h.st.Get(key, h.intoCB)
	derr := h.intoErr
	h.intoDst, h.intoErr = nil, nil
	switch {
	case derr != nil:
		*dst = (*dst)[:0]
		return h.errorf("decode element", derr)
	case err != nil:
		*dst = (*dst)[:0]
		return h.errorf("get", err)
	}
	return nil
}

// listScan is the frame of one All in progress: the callback the store
// calls with each element, made once per frame, and the caller's yield.
// A handle keeps the frames of ended Alls for the next, so that an All
// allocates its frame only when Alls nest deeper than before (a yield
// that ranges over the same handle).
type listScan[V any] struct {
	vc    ValueCodec[V]
	yield func(V, error) bool
	err   error // the decoding error that stopped the scan
	cb    func(elem []byte) bool
}

// scan returns an idle frame of h, made if there is none.
func (h *listHandle[K, N, V]) scan() *listScan[V] {
	if n := len(h.scans); n > 0 {
		sc := h.scans[n-1]
		h.scans = h.scans[:n-1]
		return sc
	}
	sc := &listScan[V]{vc: h.vc}
	sc.cb = func(elem []byte) bool {
		var v V
		if err := decodeInto(sc.vc, elem, &v); err != nil {
			sc.err = err
			return false
		}
		return sc.yield(v, nil)
	}
	return sc
}

// done makes sc idle again.
func (h *listHandle[K, N, V]) done(sc *listScan[V]) {
	sc.yield, sc.err = nil, nil
	h.scans = append(h.scans, sc)
}

func bindList[K, N, V any](s Store, spec StateSpec, kc KeyCodec[K], nc KeyCodec[N], vc ValueCodec[V], ttl TTL) (*listHandle[K, N, V], error) {
	spec.Kind = KindList
	if vc == nil {
		return nil, nilCodecError(spec.Name, "value")
	}
	h := new(listHandle[K, N, V])
	st, err := h.bind(s, spec, kc, nc, ttl, nil)
	if err != nil {
		return nil, err
	}
	ls, ok := st.(ListState)
	if !ok {
		return nil, wrongStateType(spec, st)
	}
	h.st, h.vc = ls, vc
	h.into, _ = vc.(IntoDecoder[V])
	h.intoCB = h.appendInto
	return h, nil
}

func (h *listHandle[K, N, V]) all(k K, n N) Seq[V] {
	return func(yield func(V, error) bool) {
		var key Key
		h.key(&key, k, n)
		defer h.give(h.take())
		sc := h.scan()
		defer h.done(sc)
		sc.yield = yield
		err := h.st.Get(key, sc.cb)
		var ierr error
		switch {
		case sc.err != nil:
			ierr = h.errorf("decode element", sc.err)
		case err != nil:
			ierr = h.errorf("get", err)
		}
		if ierr != nil {
			var zero V
			yield(zero, ierr)
		}
	}
}

func (h *listHandle[K, N, V]) get(k K, n N) ([]V, error) {
	var out []V
	for v, err := range h.all(k, n) {
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (h *listHandle[K, N, V]) add(k K, n N, v V) error {
	var key Key
	h.key(&key, k, n)
	h.vbuf = h.vc.AppendValue(h.vbuf[:0], v)
	if err := h.st.Add(key, h.vbuf); err != nil {
		return h.errorf("add", err)
	}
	return nil
}

// encodeAll encodes vs into h.vbuf and returns one slice per element.
func (h *listHandle[K, N, V]) encodeAll(vs []V) [][]byte {
	buf, ends := h.vbuf[:0], h.ends[:0]
	for _, v := range vs {
		buf = h.vc.AppendValue(buf, v)
		ends = append(ends, len(buf))
	}
	// Slice only after every append: growth may have moved buf.
	elems, start := h.elems[:0], 0
	for _, end := range ends {
		elems = append(elems, buf[start:end:end])
		start = end
	}
	h.vbuf, h.ends, h.elems = buf, ends, elems
	return elems
}

func (h *listHandle[K, N, V]) addAll(k K, n N, vs []V) error {
	if len(vs) == 0 {
		return nil
	}
	var key Key
	h.key(&key, k, n)
	if err := h.st.AddAll(key, h.encodeAll(vs)); err != nil {
		return h.errorf("add all", err)
	}
	return nil
}

func (h *listHandle[K, N, V]) replace(k K, n N, vs []V) error {
	var key Key
	h.key(&key, k, n)
	if err := h.st.Replace(key, h.encodeAll(vs)); err != nil {
		return h.errorf("replace", err)
	}
	return nil
}

// update is the read-modify-write of Update: the list is read whole,
// given to fn, and replaced by what fn returns.
func (h *listHandle[K, N, V]) update(k K, n N, fn func(old []V) []V) error {
	if fn == nil {
		return h.errorf("update", fmt.Errorf("nil callback"))
	}
	old, err := h.get(k, n)
	if err != nil {
		return err
	}
	return h.replace(k, n, fn(old))
}

// List is a handle on a keyed list state: an ordered list of V per key K.
// An empty list does not exist. The zero List is unbound and every method
// returns ErrUnbound.
type List[K, V any] struct{ h *listHandle[K, noNS, V] }

// NewList registers d with s and returns its handle.
func NewList[K, V any](s Store, d ListDescriptor[K, V]) (List[K, V], error) {
	h, err := bindList[K, noNS, V](s, StateSpec{Name: d.Name, Fingerprint: d.Fingerprint, Schema: d.Schema, Migrations: d.Migrations}, d.Key, nil, d.Value, d.TTL)
	return List[K, V]{h}, err
}

// Get returns the elements of k's list in order; nil if it has none.
func (l List[K, V]) Get(k K) ([]V, error) {
	if l.h == nil {
		return nil, ErrUnbound
	}
	return l.h.get(k, noNS{})
}

// GetInto decodes the elements of k's list, in order, into *dst, reusing
// its backing array and the memory of the slices and maps of the elements
// it held (see IntoDecoder): a loop that reads a list through one slice
// allocates nothing once the slice is long enough. *dst is empty if the
// list is, and on an error.
func (l List[K, V]) GetInto(k K, dst *[]V) error {
	if l.h == nil {
		return ErrUnbound
	}
	return l.h.getInto(k, noNS{}, dst)
}

// All yields the elements of k's list in order.
func (l List[K, V]) All(k K) Seq[V] {
	if l.h == nil {
		return unboundSeq[V]
	}
	return l.h.all(k, noNS{})
}

// Add appends v to k's list.
func (l List[K, V]) Add(k K, v V) error {
	if l.h == nil {
		return ErrUnbound
	}
	return l.h.add(k, noNS{}, v)
}

// AddAll appends vs to k's list in order.
func (l List[K, V]) AddAll(k K, vs []V) error {
	if l.h == nil {
		return ErrUnbound
	}
	return l.h.addAll(k, noNS{}, vs)
}

// Replace replaces k's list with vs; an empty vs deletes the list.
func (l List[K, V]) Replace(k K, vs []V) error {
	if l.h == nil {
		return ErrUnbound
	}
	return l.h.replace(k, noNS{}, vs)
}

// Update replaces k's list with fn(old), where old is its elements (nil if
// it has none): a read-modify-write, like Value.Update — trimming a
// buffer, say. An empty result deletes the list.
func (l List[K, V]) Update(k K, fn func(old []V) []V) error {
	if l.h == nil {
		return ErrUnbound
	}
	return l.h.update(k, noNS{}, fn)
}

// Delete removes k's list.
func (l List[K, V]) Delete(k K) error {
	if l.h == nil {
		return ErrUnbound
	}
	return l.h.clear(l.h.st, k, noNS{})
}

// Spec returns the state's spec; the zero handle returns the zero spec.
func (l List[K, V]) Spec() StateSpec {
	if l.h == nil {
		return StateSpec{}
	}
	return l.h.st.Spec()
}

// SubKeyedList is a handle on a sub-keyed list state: an ordered list of V
// per (key K, namespace N). The rules of List apply.
type SubKeyedList[K, N, V any] struct{ h *listHandle[K, N, V] }

// NewSubKeyedList registers d with s and returns its handle.
func NewSubKeyedList[K, N, V any](s Store, d SubKeyedListDescriptor[K, N, V]) (SubKeyedList[K, N, V], error) {
	h, err := bindList(s, StateSpec{Name: d.Name, Fingerprint: d.Fingerprint, Schema: d.Schema, Migrations: d.Migrations, SubKeyed: true}, d.Key, d.Namespace, d.Value, d.TTL)
	return SubKeyedList[K, N, V]{h}, err
}

// Get returns the elements of (k, n)'s list in order; nil if it has none.
func (l SubKeyedList[K, N, V]) Get(k K, n N) ([]V, error) {
	if l.h == nil {
		return nil, ErrUnbound
	}
	return l.h.get(k, n)
}

// GetInto decodes the elements of (k, n)'s list into *dst, as
// List.GetInto does.
func (l SubKeyedList[K, N, V]) GetInto(k K, n N, dst *[]V) error {
	if l.h == nil {
		return ErrUnbound
	}
	return l.h.getInto(k, n, dst)
}

// All yields the elements of (k, n)'s list in order.
func (l SubKeyedList[K, N, V]) All(k K, n N) Seq[V] {
	if l.h == nil {
		return unboundSeq[V]
	}
	return l.h.all(k, n)
}

// Add appends v to (k, n)'s list.
func (l SubKeyedList[K, N, V]) Add(k K, n N, v V) error {
	if l.h == nil {
		return ErrUnbound
	}
	return l.h.add(k, n, v)
}

// AddAll appends vs to (k, n)'s list in order.
func (l SubKeyedList[K, N, V]) AddAll(k K, n N, vs []V) error {
	if l.h == nil {
		return ErrUnbound
	}
	return l.h.addAll(k, n, vs)
}

// Replace replaces (k, n)'s list with vs; an empty vs deletes the list.
func (l SubKeyedList[K, N, V]) Replace(k K, n N, vs []V) error {
	if l.h == nil {
		return ErrUnbound
	}
	return l.h.replace(k, n, vs)
}

// Update replaces (k, n)'s list with fn(old), as List.Update does.
func (l SubKeyedList[K, N, V]) Update(k K, n N, fn func(old []V) []V) error {
	if l.h == nil {
		return ErrUnbound
	}
	return l.h.update(k, n, fn)
}

// Delete removes (k, n)'s list.
func (l SubKeyedList[K, N, V]) Delete(k K, n N) error {
	if l.h == nil {
		return ErrUnbound
	}
	return l.h.clear(l.h.st, k, n)
}

// Namespaces yields every namespace of k that has a list.
func (l SubKeyedList[K, N, V]) Namespaces(k K) Seq[N] {
	if l.h == nil {
		return unboundSeq[N]
	}
	return l.h.namespaces(l.h.st, k)
}

// DeleteAll removes the lists of every namespace of k.
func (l SubKeyedList[K, N, V]) DeleteAll(k K) error {
	if l.h == nil {
		return ErrUnbound
	}
	return l.h.deleteAll(l.h.st, k)
}

// Spec returns the state's spec; the zero handle returns the zero spec.
func (l SubKeyedList[K, N, V]) Spec() StateSpec {
	if l.h == nil {
		return StateSpec{}
	}
	return l.h.st.Spec()
}

// KeysIn yields every key of the state in key group kg, which the store
// must own, each once, whatever its number of namespaces, entries or
// elements: on sorted backends in key order, elsewhere in the backend's.
// Calls on the state from inside the loop may read, never write. An error
// ends the sequence.
func (l List[K, V]) KeysIn(kg int) Seq[K] {
	if l.h == nil {
		return unboundSeq[K]
	}
	return l.h.keysIn(l.h.st, kg)
}

// AllKeys yields every key of the state in the key groups the store owns,
// key group after key group, as KeysIn does for one.
func (l List[K, V]) AllKeys() Seq[K] {
	if l.h == nil {
		return unboundSeq[K]
	}
	return l.h.allKeys(l.h.st)
}

// KeysIn yields every key of the state in key group kg, which the store
// must own, each once, whatever its number of namespaces, entries or
// elements: on sorted backends in key order, elsewhere in the backend's.
// Calls on the state from inside the loop may read, never write. An error
// ends the sequence.
func (l SubKeyedList[K, N, V]) KeysIn(kg int) Seq[K] {
	if l.h == nil {
		return unboundSeq[K]
	}
	return l.h.keysIn(l.h.st, kg)
}

// AllKeys yields every key of the state in the key groups the store owns,
// key group after key group, as KeysIn does for one.
func (l SubKeyedList[K, N, V]) AllKeys() Seq[K] {
	if l.h == nil {
		return unboundSeq[K]
	}
	return l.h.allKeys(l.h.st)
}
