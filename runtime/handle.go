package runtime

import (
	"encoding/binary"
	"fmt"
	"iter"
)

// This file holds the machinery shared by the typed handles: binding a
// descriptor to a store, encoding a (key, namespace) into a Key with one
// hash, and wrapping errors with the state's name.

// noNS is the namespace type of keyed states: they have no namespace.
type noNS = struct{}

// handle is the part of every typed handle that turns a typed (key,
// namespace) into a byte-level Key. It is used by the operator goroutine
// only, so one scratch buffer serves every call.
type handle[K, N any] struct {
	name   string
	maxP   int
	groups KeyGroupRange // the key groups the store owns
	kc     KeyCodec[K]
	kw     KeyWord[K]  // kc, if it gives 8-byte encodings as numbers
	nc     KeyCodec[N] // nil for keyed states
	// buf holds the encoded key, namespace and user key of the current call.
	// Iterating methods detach it for the duration of the iteration (see
	// detach), so that a call made from inside the loop cannot overwrite
	// the bytes a backend is still reading.
	buf []byte
	// vbuf holds encoded values.
	vbuf []byte
	// merge is the scratch of Merge (see mergeScratch), nil while one runs.
	merge *mergeScratch
}

// bind validates spec and ttl, registers spec (with ttl's duration) with s
// and fills in the handle's shared fields. It returns the registered
// state, behind its TTL decorator if ttl is enabled (see ttl.go).
//
// A state without TTL whose descriptor makes tables (typed, not nil) is
// registered through TableHost.HostTable when s is a TableHost: the
// caller then checks whether the State it gets is a table of its types.
func (h *handle[K, N]) bind(s Store, spec StateSpec, kc KeyCodec[K], nc KeyCodec[N], ttl TTL, typed func(StateSpec, TableEnv) (Table, error)) (State, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: state %q: nil store", ErrInvalidState, spec.Name)
	}
	if kc == nil {
		return nil, fmt.Errorf("%w: state %q: nil key codec", ErrInvalidState, spec.Name)
	}
	if spec.SubKeyed && nc == nil {
		return nil, fmt.Errorf("%w: state %q: nil namespace codec", ErrInvalidState, spec.Name)
	}
	if err := ttl.Validate(spec.Name); err != nil {
		return nil, err
	}
	kw, err := keyWordOf(spec.Name, "key", kc)
	if err != nil {
		return nil, err
	}
	spec.TTL = ttl.Duration
	var st State
	if host, ok := s.(TableHost); ok && typed != nil && !ttl.Enabled() {
		st, err = host.HostTable(spec, typed)
	} else {
		st, err = s.Register(spec)
	}
	if err != nil {
		return nil, err
	}
	if ttl.Enabled() {
		st = wrapTTL(st, s.Config(), ttl)
	}
	h.name = spec.Name
	h.maxP = s.Config().MaxParallelism
	h.groups = s.Config().KeyGroups
	h.kc = kc
	h.nc = nc
	h.kw = kw
	return st, nil
}

// keyWordOf returns c as a KeyWord, if it is one, after checking it on the
// zero value against the encoding: a word that is not the encoding would
// send keys to other key groups than their bytes go to, so a codec whose
// KeyWord disagrees with its AppendKey is refused, naming it.
func keyWordOf[T any](state, role string, c KeyCodec[T]) (KeyWord[T], error) {
	kw, ok := c.(KeyWord[T])
	if !ok {
		return nil, nil
	}
	var zero T
	enc := c.AppendKey(nil, zero)
	if w := kw.KeyWord(zero); len(enc) != 8 || binary.BigEndian.Uint64(enc) != w {
		return nil, fmt.Errorf("%w: state %q: %s codec %T: KeyWord of the zero value is %#x, but its encoding is %x (KeyWord must be the 8-byte encoding read as a big-endian number)",
			ErrInvalidState, state, role, c, w, enc)
	}
	return kw, nil
}

// tableKey returns the key group and HashKey of k, the key of a table of
// Go values (whose states have no namespace: n is noNS). When k's codec
// gives its encoding as a number (KeyWord), the hash is computed from it
// and nothing is encoded: a typed table finds its slot by k itself, and
// needs of the encoding only its hash. Else it is key's.
func (h *handle[K, N]) tableKey(k K, n N) (int, uint64) {
	if h.kw != nil {
		hash := hashKeyWord(h.kw.KeyWord(k))
		return KeyGroupOfHash(hash, h.maxP), hash
	}
	var key Key
	h.key(&key, k, n)
	return key.Group(), key.Hash()
}

// key encodes (k, n) into h.buf and makes *key its Key; the namespace is
// empty for keyed states. Further appends to h.buf (a user key) must use
// h.buf past len(key.Key)+len(key.Namespace) and must not grow the slices
// the Key holds: the Key's slices are capped so that appending elsewhere is
// safe. valueHandle.lookup builds its Key with these same lines, in its own
// frame (see there why): a change here must be made there too.
//
// It writes the caller's Key rather than returning one: a Key is eight
// words, which the compiler keeps in memory, and a returned one is spilled
// from the result registers a word at a time and copied to the caller's
// variable with 16-byte moves, which cannot be forwarded from those stores
// (see Key.set).
func (h *handle[K, N]) key(key *Key, k K, n N) {
	buf := h.kc.AppendKey(h.buf[:0], k)
	kl := len(buf)
	if h.nc != nil {
		buf = h.nc.AppendKey(buf, n)
	}
	h.buf = buf
	kb := buf[:kl:kl]
	key.set(HashKey(kb), kb, buf[kl:len(buf):len(buf)], h.maxP)
}

// userKey appends the encoding of uk to h.buf after the bytes of key and
// returns the encoded user key. Because key's slices point into h.buf,
// a growth of h.buf would leave key pointing at the old array, which still
// holds the right bytes: the old array is never written again.
func userKey[UK any](h *[]byte, c KeyCodec[UK], uk UK) []byte {
	start := len(*h)
	*h = c.AppendKey(*h, uk)
	return (*h)[start:len(*h):len(*h)]
}

// take detaches h.buf from the handle for the duration of an iteration and
// returns it; give hands it back. Calls made on the same handle from inside
// the loop then encode into a fresh buffer, never into the bytes the backend
// is iterating with.
func (h *handle[K, N]) take() []byte {
	b := h.buf
	h.buf = nil
	return b
}

// give returns a buffer detached by take.
func (h *handle[K, N]) give(b []byte) { h.buf = b }

// errorf wraps err with the state's name and what was being done.
func (h *handle[K, N]) errorf(op string, err error) error {
	return fmt.Errorf("state %q: %s: %w", h.name, op, err)
}

// updateCall is the typed side of a one-lookup Update (ValueUpdater,
// MapUpdater), shared by the value and map handles: the store calls cb
// with the old encoded value, cb decodes it, calls the Update's function
// and encodes its result. cb is made once, at bind: a closure made per
// call would be allocated per call.
type updateCall[V any] struct {
	name string // the state's, for errors
	vc   ValueCodec[V]
	cb   func(old []byte, found bool) ([]byte, error)
	// The Update in progress: its function, and the error of decoding the
	// old value.
	fn  func(old V, found bool) V
	err error
	buf []byte // the encoded new value
}

func (u *updateCall[V]) init(name string, vc ValueCodec[V]) {
	u.name, u.vc = name, vc
	u.cb = u.call
}

// begin starts an Update of fn. A store calls cb at most once, and refuses
// an Update from inside it before calling anything: the fields are this
// call's alone while cb runs.
func (u *updateCall[V]) begin(fn func(old V, found bool) V) { u.fn, u.err = fn, nil }

// end ends the Update begun last, given the store's error: a failure to
// decode the old value comes first (the store returns it too, unwrapped).
func (u *updateCall[V]) end(err error) error {
	derr := u.err
	u.fn, u.err = nil, nil
	switch {
	case derr != nil:
		return derr
	case err != nil:
		return fmt.Errorf("state %q: update: %w", u.name, err)
	}
	return nil
}

func (u *updateCall[V]) call(ob []byte, found bool) ([]byte, error) {
	var old V
	if found {
		if err := decodeInto(u.vc, ob, &old); err != nil {
			u.err = fmt.Errorf("state %q: decode value: %w", u.name, err)
			return nil, u.err
		}
	}
	u.buf = u.vc.AppendValue(u.buf[:0], u.fn(old, found))
	return u.buf, nil
}

// decodeAll decodes exactly one value from b: trailing bytes are corruption.
func decodeAll[T any](c ValueCodec[T], b []byte) (T, error) {
	var v T
	err := decodeInto(c, b, &v)
	return v, err
}

// decodeInto decodes exactly one value from b into *dst, and leaves the zero
// T there if it fails: trailing bytes are corruption. The Get paths decode
// into the caller's result this way, because a T larger than four words is
// otherwise copied through memory at every frame it is returned from, which
// costs a Get on a large state more than the backend's lookup.
func decodeInto[T any](c ValueCodec[T], b []byte, dst *T) error {
	var rest []byte
	var err error
	*dst, rest, err = c.DecodeValue(b)
	return decoded(dst, rest, err)
}

// decoded ends a decode into *dst that left rest and err: nil if it
// decoded exactly one value, else an error (trailing bytes are corruption)
// and the zero T in *dst.
func decoded[T any](dst *T, rest []byte, err error) error {
	if err == nil && len(rest) == 0 {
		return nil
	}
	var zero T
	*dst = zero
	if err == nil {
		err = fmt.Errorf("%w: %d trailing bytes after value", ErrCorrupt, len(rest))
	}
	return err
}

// decodeReusing is decodeInto for GetInto: with an IntoDecoder (into not
// nil) it decodes into *dst reusing its memory, and leaves the zero T
// there if it fails.
func decodeReusing[T any](c ValueCodec[T], into IntoDecoder[T], b []byte, dst *T) error {
	if into == nil {
		return decodeInto(c, b, dst)
	}
	rest, err := into.DecodeValueInto(dst, b)
	return decoded(dst, rest, err)
}

// decodeKeyAll decodes exactly one key from b: trailing bytes are corruption.
func decodeKeyAll[T any](c KeyCodec[T], b []byte) (T, error) {
	v, rest, err := c.DecodeKey(b)
	if err != nil {
		return v, err
	}
	if len(rest) != 0 {
		var zero T
		return zero, fmt.Errorf("%w: %d trailing bytes after key", ErrCorrupt, len(rest))
	}
	return v, nil
}

// namespaces implements the Namespaces method of sub-keyed handles.
func (h *handle[K, N]) namespaces(st State, k K) func(yield func(N, error) bool) {
	return func(yield func(N, error) bool) {
		var zero N
		var key Key
		h.key(&key, k, zero)
		defer h.give(h.take())
		var ierr error
		err := st.Namespaces(key, func(ns []byte) bool {
			n, err := decodeKeyAll(h.nc, ns)
			if err != nil {
				ierr = h.errorf("decode namespace", err)
				return false
			}
			return yield(n, nil)
		})
		if ierr == nil && err != nil {
			ierr = h.errorf("namespaces", err)
		}
		if ierr != nil {
			yield(zero, ierr)
		}
	}
}

// keysIn implements the KeysIn method of every handle: the keys of st in
// key group kg.
func (h *handle[K, N]) keysIn(st State, kg int) Seq[K] {
	return func(yield func(K, error) bool) { h.eachKey(st, kg, yield) }
}

// allKeys implements the AllKeys method of every handle: the keys of st in
// every key group the store owns, group after group.
func (h *handle[K, N]) allKeys(st State) Seq[K] {
	return func(yield func(K, error) bool) {
		for kg := range h.groups.All() {
			if !h.eachKey(st, kg, yield) {
				return
			}
		}
	}
}

// eachKey yields the keys of st in key group kg; it reports whether the
// caller may go on (no error, and yield asked for more).
func (h *handle[K, N]) eachKey(st State, kg int, yield func(K, error) bool) bool {
	defer h.give(h.take())
	var zero K
	var ierr error
	more := true
	err := st.Keys(kg, func(key []byte) bool {
		k, err := decodeKeyAll(h.kc, key)
		if err != nil {
			ierr = h.errorf("decode key", err)
			return false
		}
		more = yield(k, nil)
		return more
	})
	if ierr == nil && err != nil {
		ierr = h.errorf(fmt.Sprintf("keys of key group %d", kg), err)
	}
	if ierr != nil {
		yield(zero, ierr)
		return false
	}
	return more
}

// deleteAll implements the DeleteAll method of sub-keyed handles.
func (h *handle[K, N]) deleteAll(st State, k K) error {
	var zero N
	var key Key
	h.key(&key, k, zero)
	if err := st.DeleteAll(key); err != nil {
		return h.errorf("delete all namespaces", err)
	}
	return nil
}

// clear implements Delete of values and lists and Clear of maps.
func (h *handle[K, N]) clear(st State, k K, n N) error {
	var key Key
	h.key(&key, k, n)
	if err := st.Clear(key); err != nil {
		return h.errorf("clear", err)
	}
	return nil
}

// Seq is the shape of every typed iteration: a sequence of values, each
// paired with a nil error, ended early by the first error, which is yielded
// with the zero T. Callers check the error in the loop:
//
//	for page, err := range st.Pages.Keys(user) {
//		if err != nil {
//			return err
//		}
//		...
//	}
type Seq[T any] = iter.Seq2[T, error]

// unboundSeq is the sequence of a zero handle: one ErrUnbound.
func unboundSeq[T any](yield func(T, error) bool) {
	var zero T
	yield(zero, ErrUnbound)
}

func nilCodecError(state, which string) error {
	return fmt.Errorf("%w: state %q: nil %s codec", ErrInvalidState, state, which)
}

func wrongStateType(spec StateSpec, st State) error {
	return fmt.Errorf("%w: state %q: backend returned %T for a %v state", ErrInvalidState, spec.Name, st, spec.Kind)
}
