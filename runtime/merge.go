package runtime

import (
	"bytes"
	"fmt"
)

// Merging namespaces: what session windows need when a new event bridges
// two sessions (Flink's mergeNamespaces). Merge moves the state of several
// source namespaces of a key into a target namespace and removes the
// sources. It reads everything before it writes anything, so an error while
// reading leaves the state as it was; the writes then put the target first
// and clear the sources after it (an error there leaves the target merged
// and some sources still present, and is returned). A source equal to the
// target, and a source listed twice, count once; absent sources are skipped.
// Merge is written once, on the byte-level contract, so that it behaves
// alike on every backend.

// mergeScratch is the memory a Merge builds its Keys in: the encoded key,
// target and sources in buf, the source Keys in keys. A handle keeps one
// between Merges (handle.merge), taken for the duration of a Merge so that
// a Merge called from a merge function gets its own.
type mergeScratch struct {
	buf  []byte
	keys []Key
}

// mergeSources returns the Keys of the sources of a merge of k into
// target: k encoded and hashed once, the target and each namespace encoded
// into the handle's merge scratch (which the caller gives back with
// mergeDone), without the target and without repeats. It allocates only
// while the scratch grows.
func (h *handle[K, N]) mergeSources(k K, target N, sources []N) (Key, []Key, *mergeScratch) {
	sc := h.merge
	h.merge = nil
	if sc == nil {
		sc = new(mergeScratch)
	}
	// The Keys point into sc.buf; should an append grow it, the Keys made
	// before point into the old array, which is never written again.
	buf := h.kc.AppendKey(sc.buf[:0], k)
	kl := len(buf)
	buf = h.nc.AppendKey(buf, target)
	base := makeKey(HashKey(buf[:kl]), buf[:kl:kl], nil, h.maxP)
	tk := base.WithNamespace(buf[kl:len(buf):len(buf)])
	srcs := sc.keys[:0]
	for _, n := range sources {
		start := len(buf)
		buf = h.nc.AppendKey(buf, n)
		sk := base.WithNamespace(buf[start:len(buf):len(buf)])
		dup := bytes.Equal(sk.ns, tk.ns)
		for i := range srcs {
			dup = dup || bytes.Equal(srcs[i].ns, sk.ns)
		}
		if dup {
			buf = buf[:start]
		} else {
			srcs = append(srcs, sk)
		}
	}
	sc.buf, sc.keys = buf, srcs
	return tk, srcs, sc
}

// mergeDone gives a Merge's scratch back to the handle.
func (h *handle[K, N]) mergeDone(sc *mergeScratch) {
	clear(sc.keys[:cap(sc.keys)]) // drop references to older arrays
	sc.keys = sc.keys[:0]
	h.merge = sc
}

// clearSources clears the merged sources.
func (h *handle[K, N]) clearSources(st State, srcs []Key) error {
	for _, sk := range srcs {
		if err := st.Clear(sk); err != nil {
			return h.errorf("merge: clear a source", err)
		}
	}
	return nil
}

// Merge merges the values of the source namespaces of k into namespace
// target and deletes them: the target's value becomes merge(merge(t, s1),
// s2)... over the sources that have a value, in the order given, starting
// from the target's value, or from the first source's if the target has
// none. If no source has a value, nothing changes. The target among the
// sources, and a source listed twice, count once. Merge reads everything
// before it writes: a failed read changes nothing; a failed write after
// the target's leaves some sources in place, and is returned.
func (v SubKeyedValue[K, N, V]) Merge(k K, target N, sources []N, merge func(acc, v V) V) error {
	if v.h == nil {
		return ErrUnbound
	}
	h := v.h
	if merge == nil {
		return h.errorf("merge", fmt.Errorf("nil merge function"))
	}
	tk, srcs, sc := h.mergeSources(k, target, sources)
	defer h.mergeDone(sc)
	var acc V
	found, err := h.getKey(tk, &acc)
	if err != nil {
		return err
	}
	merged := srcs[:0] // the sources with a value: srcs, filtered in place
	for _, sk := range srcs {
		var sv V
		ok, err := h.getKey(sk, &sv)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		merged = append(merged, sk)
		if found {
			acc = merge(acc, sv)
		} else {
			acc, found = sv, true
		}
	}
	if len(merged) == 0 {
		return nil
	}
	h.vbuf = h.vc.AppendValue(h.vbuf[:0], acc)
	if err := h.st.Put(tk, h.vbuf); err != nil {
		return h.errorf("merge: put the target", err)
	}
	return h.clearSources(h.st, merged)
}

// getKey is get for a Key built already.
func (h *valueHandle[K, N, V]) getKey(key Key, dst *V) (bool, error) {
	b, ok, err := h.st.Get(key)
	if err != nil {
		return false, h.errorf("merge: get", err)
	}
	if !ok {
		return false, nil
	}
	if err := decodeInto(h.vc, b, dst); err != nil {
		return false, h.errorf("merge: decode value", err)
	}
	return true, nil
}

// Merge appends the elements of the lists of the source namespaces of k,
// in the order given, to the list of namespace target, and deletes them.
// Elements are moved as bytes, never decoded. Repeated namespaces and
// errors are as for SubKeyedValue.Merge.
func (l SubKeyedList[K, N, V]) Merge(k K, target N, sources []N) error {
	if l.h == nil {
		return ErrUnbound
	}
	h := l.h
	tk, srcs, sc := h.mergeSources(k, target, sources)
	defer h.mergeDone(sc)
	var elems [][]byte
	for _, sk := range srcs {
		if err := h.st.Get(sk, func(e []byte) bool {
			elems = append(elems, bytes.Clone(e))
			return true
		}); err != nil {
			return h.errorf("merge: get a source", err)
		}
	}
	if len(elems) == 0 {
		return nil
	}
	if err := h.st.AddAll(tk, elems); err != nil {
		return h.errorf("merge: add to the target", err)
	}
	return h.clearSources(h.st, srcs)
}

// Merge puts the entries of the maps of the source namespaces of k, in the
// order given, into the map of namespace target, and deletes them. A user
// key already in the target (or in an earlier source) gets merge(uk, old,
// new); with a nil merge the later value replaces the earlier. Entries
// without a conflict are moved as bytes. Repeated namespaces and errors are
// as for SubKeyedValue.Merge.
func (m SubKeyedMap[K, N, UK, V]) Merge(k K, target N, sources []N, merge func(uk UK, old, v V) V) error {
	if m.h == nil {
		return ErrUnbound
	}
	h := m.h
	tk, srcs, sc := h.mergeSources(k, target, sources)
	defer h.mergeDone(sc)
	type entry struct{ uk, v []byte }
	var entries []entry
	at := map[string]int{} // user key -> index in entries
	var ierr error
	for _, sk := range srcs {
		err := h.st.Iterate(sk, func(ukb, vb []byte) bool {
			if i, ok := at[string(ukb)]; ok {
				entries[i].v, ierr = h.mergeValue(merge, ukb, entries[i].v, vb)
				return ierr == nil
			}
			old, found, err := h.st.Get(tk, ukb)
			switch {
			case err != nil:
				ierr = h.errorf("merge: get from the target", err)
				return false
			case found:
				v, err := h.mergeValue(merge, ukb, old, vb)
				if err != nil {
					ierr = err
					return false
				}
				vb = v
			default:
				vb = bytes.Clone(vb)
			}
			at[string(ukb)] = len(entries)
			entries = append(entries, entry{bytes.Clone(ukb), vb})
			return true
		})
		if ierr != nil {
			return ierr
		}
		if err != nil {
			return h.errorf("merge: iterate a source", err)
		}
	}
	for _, e := range entries {
		if err := h.st.Put(tk, e.uk, e.v); err != nil {
			return h.errorf("merge: put into the target", err)
		}
	}
	return h.clearSources(h.st, srcs)
}

// mergeValue returns the encoding of merge(uk, old, v) for the encoded
// user key and values (a copy of v if merge is nil).
func (h *mapHandle[K, N, UK, V]) mergeValue(merge func(uk UK, old, v V) V, ukb, oldb, vb []byte) ([]byte, error) {
	if merge == nil {
		return bytes.Clone(vb), nil
	}
	uk, err := decodeKeyAll(h.ukc, ukb)
	if err != nil {
		return nil, h.errorf("merge: decode user key", err)
	}
	old, err := decodeAll(h.vc, oldb)
	if err != nil {
		return nil, h.errorf("merge: decode value", err)
	}
	v, err := decodeAll(h.vc, vb)
	if err != nil {
		return nil, h.errorf("merge: decode value", err)
	}
	return h.vc.AppendValue(nil, merge(uk, old, v)), nil
}
