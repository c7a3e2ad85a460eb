package runtime

import "fmt"

// ValueDescriptor describes a keyed value state: one V per key K.
type ValueDescriptor[K, V any] struct {
	Name        string        // stable state name (see StateSpec.Name)
	Fingerprint string        // schema fingerprint (see StateSpec.Fingerprint)
	Schema      string        // the schema it was derived from (see StateSpec.Schema)
	Migrations  []Migration   // from older, incompatible schemas (see Migration)
	TTL         TTL           // time to live of the entries; zero means none (see TTL)
	Key         KeyCodec[K]   // order-preserving key codec
	Value       ValueCodec[V] // value codec
	// Typed, if set (TypedValues, TypedSlices), lets a store that can (TableHost:
	// backends/cow) keep the state as Go values rather than bytes, when it
	// has no TTL. stategen sets it whenever K and V allow it.
	Typed TypedTable[K, V]
}

// SubKeyedValueDescriptor describes a sub-keyed value state: one V per
// (key K, namespace N), for example per (user, window).
type SubKeyedValueDescriptor[K, N, V any] struct {
	Name        string
	Fingerprint string
	Schema      string
	Migrations  []Migration
	TTL         TTL // time to live of the entries; zero means none (see TTL)
	Key         KeyCodec[K]
	Namespace   KeyCodec[N]
	Value       ValueCodec[V]
}

// valueHandle implements Value and SubKeyedValue.
type valueHandle[K, N, V any] struct {
	handle[K, N]
	st   ValueState
	upd  ValueUpdater // st, if it updates in one lookup
	vc   ValueCodec[V]
	into IntoDecoder[V] // vc, if it decodes into a value (GetInto)
	updc updateCall[V]  // the Update in progress, if upd
	// typed is st as a table of Go values (see TypedTable), if it is one:
	// the handle then reads and writes it without encoding values.
	typed typedValue[K, V]
}

func bindValue[K, N, V any](s Store, spec StateSpec, kc KeyCodec[K], nc KeyCodec[N], vc ValueCodec[V], ttl TTL, typed TypedTable[K, V]) (*valueHandle[K, N, V], error) {
	spec.Kind = KindValue
	h := new(valueHandle[K, N, V])
	if vc == nil {
		return nil, nilCodecError(spec.Name, "value")
	}
	var mk func(StateSpec, TableEnv) (Table, error)
	if typed.mk != nil && kc != nil {
		mk = func(spec StateSpec, env TableEnv) (Table, error) { return typed.mk(spec, env, kc, vc) }
	}
	st, err := h.bind(s, spec, kc, nc, ttl, mk)
	if err != nil {
		return nil, err
	}
	vs, ok := st.(ValueState)
	if !ok {
		return nil, wrongStateType(spec, st)
	}
	h.st, h.vc = vs, vc
	h.typed, _ = st.(typedValue[K, V])
	h.into, _ = vc.(IntoDecoder[V])
	if h.upd, _ = vs.(ValueUpdater); h.upd != nil {
		h.updc.init(spec.Name, vc)
	}
	return h, nil
}

// get decodes the value of (k, n) into *dst and reports whether it exists;
// *dst is left alone if it does not. (Writing through dst rather than
// returning a V keeps a large V from being copied through every frame.)
// dst does not escape: Get's result stays on its caller's stack.
func (h *valueHandle[K, N, V]) get(k K, n N, dst *V) (bool, error) {
	if h.typed != nil {
		return h.tget(k, n, dst)
	}
	b, ok, err := h.lookup(k, n)
	if err != nil || !ok {
		return false, err
	}
	if err := decodeInto(h.vc, b, dst); err != nil {
		return false, h.errorf("decode value", err)
	}
	return true, nil
}

// getInto is get for GetInto: it decodes into *dst reusing its memory (see
// IntoDecoder). It is a function of its own because passing dst to the
// IntoDecoder makes it escape, which get must not.
func (h *valueHandle[K, N, V]) getInto(k K, n N, dst *V) (bool, error) {
	if h.typed != nil {
		return h.tget(k, n, dst)
	}
	b, ok, err := h.lookup(k, n)
	if err != nil || !ok {
		return false, err
	}
	if err := decodeReusing(h.vc, h.into, b, dst); err != nil {
		return false, h.errorf("decode value", err)
	}
	return true, nil
}

// lookup returns the encoded value of (k, n), valid until the next call on
// the store.
//
// It builds the Key itself, as handle.key does, rather than calling key,
// and passes it straight to the store: a Key is eight words, which the
// compiler keeps in memory, and one copied from where it was built is
// copied with wide moves that cannot be forwarded from the stores that
// made it (see Key.set). A Get is the most frequent operation, and on a
// table larger than the cache its cost is in how many lookups the
// processor overlaps; the call and the copies cost about 10% of it at 1M
// keys (benchmarks.BenchmarkValueGet, backend=cow).
func (h *valueHandle[K, N, V]) lookup(k K, n N) ([]byte, bool, error) {
	buf := h.kc.AppendKey(h.buf[:0], k)
	kl := len(buf)
	if h.nc != nil {
		buf = h.nc.AppendKey(buf, n)
	}
	h.buf = buf
	b, ok, err := h.st.Get(makeKey(HashKey(buf[:kl]), buf[:kl:kl], buf[kl:len(buf):len(buf)], h.maxP))
	if err != nil {
		return nil, false, h.errorf("get", err)
	}
	return b, ok, nil
}

// tget is get and getInto on a table of Go values: the value is copied,
// not decoded, a slice into *dst's array.
func (h *valueHandle[K, N, V]) tget(k K, n N, dst *V) (bool, error) {
	kg, hash := h.tableKey(k, n)
	v, ok, err := h.typed.tget(kg, hash, k, *dst)
	if err != nil {
		return false, h.errorf("get", err)
	}
	if ok {
		*dst = v
	}
	return ok, nil
}

// contains reports whether (k, n) has a value (Contains).
func (h *valueHandle[K, N, V]) contains(k K, n N) (bool, error) {
	if h.typed == nil {
		_, ok, err := h.lookup(k, n)
		return ok, err
	}
	kg, hash := h.tableKey(k, n)
	ok, err := h.typed.tcontains(kg, hash, k)
	if err != nil {
		return false, h.errorf("get", err)
	}
	return ok, nil
}

// del removes the value of (k, n) (Delete).
func (h *valueHandle[K, N, V]) del(k K, n N) error {
	if h.typed == nil {
		return h.clear(h.st, k, n)
	}
	kg, hash := h.tableKey(k, n)
	if err := h.typed.tdelete(kg, hash, k); err != nil {
		return h.errorf("clear", err)
	}
	return nil
}

func (h *valueHandle[K, N, V]) put(k K, n N, v V) error {
	if h.typed != nil {
		kg, hash := h.tableKey(k, n)
		if err := h.typed.tput(kg, hash, k, v); err != nil {
			return h.errorf("put", err)
		}
		return nil
	}
	var key Key
	h.key(&key, k, n)
	h.vbuf = h.vc.AppendValue(h.vbuf[:0], v)
	if err := h.st.Put(key, h.vbuf); err != nil {
		return h.errorf("put", err)
	}
	return nil
}

// update is the read-modify-write of Update: one lookup on a store whose
// ValueState is a ValueUpdater, a Get then a Put on the others.
func (h *valueHandle[K, N, V]) update(k K, n N, fn func(old V, found bool) V) error {
	if fn == nil {
		return h.errorf("update", fmt.Errorf("nil callback"))
	}
	if h.typed != nil {
		kg, hash := h.tableKey(k, n)
		if err := h.typed.tupdate(kg, hash, k, fn); err != nil {
			return h.errorf("update", err)
		}
		return nil
	}
	if h.upd == nil {
		var old V
		found, err := h.get(k, n, &old)
		if err != nil {
			return err
		}
		return h.put(k, n, fn(old, found))
	}
	var key Key
	h.key(&key, k, n)
	// fn may read through this handle: its keys must not overwrite key's
	// bytes (see take).
	buf := h.take()
	h.updc.begin(fn)
	err := h.updc.end(h.upd.Update(key, h.updc.cb))
	h.give(buf)
	return err
}

// Value is a handle on a keyed value state: one V per key K. The zero
// Value is unbound and every method returns ErrUnbound; generated Open
// functions and NewValue bind it. A handle belongs to the operator's
// goroutine, like the store under it.
type Value[K, V any] struct{ h *valueHandle[K, noNS, V] }

// NewValue registers d with s and returns its handle.
func NewValue[K, V any](s Store, d ValueDescriptor[K, V]) (Value[K, V], error) {
	h, err := bindValue[K, noNS, V](s, StateSpec{Name: d.Name, Fingerprint: d.Fingerprint, Schema: d.Schema, Migrations: d.Migrations}, d.Key, nil, d.Value, d.TTL, d.Typed)
	return Value[K, V]{h}, err
}

// Get returns the value of k and whether it exists. The value is the
// caller's own copy.
func (v Value[K, V]) Get(k K) (val V, found bool, err error) {
	if v.h == nil {
		return val, false, ErrUnbound
	}
	found, err = v.h.get(k, noNS{}, &val)
	return val, found, err
}

// GetInto decodes the value of k into *dst and reports whether it exists,
// reusing the memory of the slices and maps *dst holds (see IntoDecoder:
// the codecs stategen generates do). A loop that reads a value, changes it
// and puts it back through one variable then allocates nothing. If k has
// no value, *dst is left as it was; on an error it is the zero V.
func (v Value[K, V]) GetInto(k K, dst *V) (found bool, err error) {
	if v.h == nil {
		return false, ErrUnbound
	}
	return v.h.getInto(k, noNS{}, dst)
}

// Contains reports whether k has a value, without decoding it (Flink's
// value() != null, without the deserialization). With TTL it reads as Get
// does: an expired value is absent, and a read renews a value whose TTL
// is updated on reads.
func (v Value[K, V]) Contains(k K) (bool, error) {
	if v.h == nil {
		return false, ErrUnbound
	}
	return v.h.contains(k, noNS{})
}

// Put sets the value of k, replacing any previous value.
func (v Value[K, V]) Put(k K, val V) error {
	if v.h == nil {
		return ErrUnbound
	}
	return v.h.put(k, noNS{}, val)
}

// Update sets the value of k to fn(old, found), where old is the current
// value (the zero V if !found): the shape of a reducing or aggregating
// function. On a store whose values update in one lookup
// (runtime.ValueUpdater: backends/cow, btree and pebble), it costs one
// lookup, not a Get and a Put. fn may read the store but not write to it (such a store refuses
// the write with ErrWriteDuringIteration).
func (v Value[K, V]) Update(k K, fn func(old V, found bool) V) error {
	if v.h == nil {
		return ErrUnbound
	}
	return v.h.update(k, noNS{}, fn)
}

// Delete removes the value of k; deleting an absent key is not an error.
func (v Value[K, V]) Delete(k K) error {
	if v.h == nil {
		return ErrUnbound
	}
	return v.h.del(k, noNS{})
}

// Spec returns the state's spec; the zero Value returns the zero spec.
func (v Value[K, V]) Spec() StateSpec {
	if v.h == nil {
		return StateSpec{}
	}
	return v.h.st.Spec()
}

// SubKeyedValue is a handle on a sub-keyed value state: one V per (key K,
// namespace N). The rules of Value apply.
type SubKeyedValue[K, N, V any] struct{ h *valueHandle[K, N, V] }

// NewSubKeyedValue registers d with s and returns its handle.
func NewSubKeyedValue[K, N, V any](s Store, d SubKeyedValueDescriptor[K, N, V]) (SubKeyedValue[K, N, V], error) {
	h, err := bindValue(s, StateSpec{Name: d.Name, Fingerprint: d.Fingerprint, Schema: d.Schema, Migrations: d.Migrations, SubKeyed: true}, d.Key, d.Namespace, d.Value, d.TTL, TypedTable[K, V]{})
	return SubKeyedValue[K, N, V]{h}, err
}

// Get returns the value of (k, n) and whether it exists.
func (v SubKeyedValue[K, N, V]) Get(k K, n N) (val V, found bool, err error) {
	if v.h == nil {
		return val, false, ErrUnbound
	}
	found, err = v.h.get(k, n, &val)
	return val, found, err
}

// GetInto decodes the value of (k, n) into *dst and reports whether it
// exists, as Value.GetInto does.
func (v SubKeyedValue[K, N, V]) GetInto(k K, n N, dst *V) (found bool, err error) {
	if v.h == nil {
		return false, ErrUnbound
	}
	return v.h.getInto(k, n, dst)
}

// Contains reports whether (k, n) has a value, without decoding it (see
// Value.Contains).
func (v SubKeyedValue[K, N, V]) Contains(k K, n N) (bool, error) {
	if v.h == nil {
		return false, ErrUnbound
	}
	return v.h.contains(k, n)
}

// Put sets the value of (k, n), replacing any previous value.
func (v SubKeyedValue[K, N, V]) Put(k K, n N, val V) error {
	if v.h == nil {
		return ErrUnbound
	}
	return v.h.put(k, n, val)
}

// Update sets the value of (k, n) to fn(old, found).
func (v SubKeyedValue[K, N, V]) Update(k K, n N, fn func(old V, found bool) V) error {
	if v.h == nil {
		return ErrUnbound
	}
	return v.h.update(k, n, fn)
}

// Delete removes the value of (k, n).
func (v SubKeyedValue[K, N, V]) Delete(k K, n N) error {
	if v.h == nil {
		return ErrUnbound
	}
	return v.h.del(k, n)
}

// Namespaces yields every namespace of k that has a value, in the backend's
// order (sorted backends yield them sorted). An error ends the sequence.
func (v SubKeyedValue[K, N, V]) Namespaces(k K) Seq[N] {
	if v.h == nil {
		return unboundSeq[N]
	}
	return v.h.namespaces(v.h.st, k)
}

// DeleteAll removes the values of every namespace of k.
func (v SubKeyedValue[K, N, V]) DeleteAll(k K) error {
	if v.h == nil {
		return ErrUnbound
	}
	return v.h.deleteAll(v.h.st, k)
}

// Spec returns the state's spec; the zero handle returns the zero spec.
func (v SubKeyedValue[K, N, V]) Spec() StateSpec {
	if v.h == nil {
		return StateSpec{}
	}
	return v.h.st.Spec()
}

// KeysIn yields every key of the state in key group kg, which the store
// must own, each once, whatever its number of namespaces, entries or
// elements: on sorted backends in key order, elsewhere in the backend's.
// Calls on the state from inside the loop may read, never write. An error
// ends the sequence.
func (v Value[K, V]) KeysIn(kg int) Seq[K] {
	if v.h == nil {
		return unboundSeq[K]
	}
	return v.h.keysIn(v.h.st, kg)
}

// AllKeys yields every key of the state in the key groups the store owns,
// key group after key group, as KeysIn does for one.
func (v Value[K, V]) AllKeys() Seq[K] {
	if v.h == nil {
		return unboundSeq[K]
	}
	return v.h.allKeys(v.h.st)
}

// KeysIn yields every key of the state in key group kg, which the store
// must own, each once, whatever its number of namespaces, entries or
// elements: on sorted backends in key order, elsewhere in the backend's.
// Calls on the state from inside the loop may read, never write. An error
// ends the sequence.
func (v SubKeyedValue[K, N, V]) KeysIn(kg int) Seq[K] {
	if v.h == nil {
		return unboundSeq[K]
	}
	return v.h.keysIn(v.h.st, kg)
}

// AllKeys yields every key of the state in the key groups the store owns,
// key group after key group, as KeysIn does for one.
func (v SubKeyedValue[K, N, V]) AllKeys() Seq[K] {
	if v.h == nil {
		return unboundSeq[K]
	}
	return v.h.allKeys(v.h.st)
}
