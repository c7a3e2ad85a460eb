package checkpoint

import (
	"context"
	"fmt"

	"github.com/stategen/stategen/runtime"
)

// A chain's (state, key group) is read in two passes. The first reads the
// section of every file of changes, in order, into an overlay: what the
// changes leave of each (key, namespace) they touch — whether its content
// in the full file is gone, and what it holds now. The second reads the
// full file's section and passes its entries through the overlay (an
// entry the changes removed is skipped, one they replaced is passed with
// its new value in its place, a list the changes appended to gets its new
// elements right after its old ones), then passes what the overlay holds
// that the full file did not. A full file in key order (a sorted store's)
// thus stays in key order but for the entries the changes added, which a
// sorted store's bulk load depends on. Memory is
// what the changes hold, never the full file's entries; the full file is
// read once, as a restore from a full checkpoint reads it.
//
// The overlay holds its bytes — keys, namespaces, values — in one arena,
// and its entries by value in one slice, found by index: a change costs
// about one allocation (its identity's map key), not one per field, which
// matters to stores whose heaps the garbage collector must scan.

// overlay is what the changes of one (state, key group) leave.
type overlay struct {
	kind     runtime.Kind
	subKeyed bool
	ids      map[string]int32   // ident(key, namespace) -> index in ents
	ents     []overlayEntry     // in the order first touched
	byKey    map[string][]int32 // a sub-keyed state's entries by key
	users    []userEntry
	arena    []byte
	idBuf    []byte
	// gone holds the keys whose every namespace was removed (opDeleteAll):
	// nothing of them in the full file survives.
	gone map[string]bool
}

// span is a run of the arena's bytes.
type span struct{ off, n int }

func (o *overlay) bytes(s span) []byte { return o.arena[s.off : s.off+s.n : s.off+s.n] }

func (o *overlay) keep(b []byte) span {
	s := span{len(o.arena), len(b)}
	o.arena = append(o.arena, b...)
	return s
}

// overlayEntry is what the changes leave of one (key, namespace).
type overlayEntry struct {
	key, ns span
	// cleared: the full file's content of (key, namespace) is gone.
	cleared bool
	value   span // a Value state's, if has
	has     bool
	elems   []span // a list's elements, after the full file's unless cleared
	// A map's entries the changes touched: user key -> index in
	// overlay.users, in the order first touched.
	users  map[string]int32
	uorder []string
	// emitted: a Value's new value, or a list's new elements, were passed
	// where the full file had its old ones.
	emitted bool
}

// userEntry is what the changes leave of a map entry: its value, or its
// removal.
type userEntry struct {
	value   span
	deleted bool
	emitted bool // passed where the full file had the entry
}

// ident appends the overlay's identity of (key, namespace) to dst.
func ident(dst, key, ns []byte) []byte { return appendBytes(appendBytes(dst, key), ns) }

func (o *overlay) entry(key, ns []byte) *overlayEntry {
	o.idBuf = ident(o.idBuf[:0], key, ns)
	if i, ok := o.ids[string(o.idBuf)]; ok {
		return &o.ents[i]
	}
	i := int32(len(o.ents))
	o.ids[string(o.idBuf)] = i
	o.ents = append(o.ents, overlayEntry{key: o.keep(key), ns: o.keep(ns), cleared: o.gone[string(key)]})
	if o.subKeyed {
		o.byKey[string(key)] = append(o.byKey[string(key)], i)
	}
	return &o.ents[i]
}

// clear empties e, and what the full file held of it.
func (e *overlayEntry) clear() {
	e.cleared, e.has, e.value, e.elems, e.users, e.uorder = true, false, span{}, nil, nil, nil
}

// apply applies one change, read from file path.
func (o *overlay) apply(path string, en runtime.Entry) error {
	if len(en.Value) == 0 {
		return corruptAt(path, -1, "a change of key %x has no operation", en.Key)
	}
	op, v := en.Value[0], en.Value[1:]
	bad := func() error {
		return corruptAt(path, -1, "change %d of key %x is not an operation on a %v state", op, en.Key, o.kind)
	}
	if op == opDeleteAll {
		o.gone[string(en.Key)] = true
		if !o.subKeyed {
			// A keyed state's key has one namespace, the empty one.
			o.idBuf = ident(o.idBuf[:0], en.Key, nil)
			if i, ok := o.ids[string(o.idBuf)]; ok {
				o.ents[i].clear()
			}
			return nil
		}
		for _, i := range o.byKey[string(en.Key)] {
			o.ents[i].clear()
		}
		return nil
	}
	e := o.entry(en.Key, en.Namespace)
	switch op {
	case opClear:
		e.clear()
	case opPut:
		switch o.kind {
		case runtime.KindValue:
			e.clear()
			e.value, e.has = o.keep(v), true
		case runtime.KindMap, runtime.KindSortedMap:
			o.user(e, en.UserKey, userEntry{value: o.keep(v)})
		default:
			return bad()
		}
	case opDelete:
		if !o.kind.HasUserKey() {
			return bad()
		}
		o.user(e, en.UserKey, userEntry{deleted: true})
	case opAppend:
		if o.kind != runtime.KindList {
			return bad()
		}
		e.elems = append(e.elems, o.keep(v))
	default:
		return corruptAt(path, -1, "unknown operation %d in a change of key %x", op, en.Key)
	}
	return nil
}

func (o *overlay) user(e *overlayEntry, uk []byte, u userEntry) {
	if e.users == nil {
		e.users = make(map[string]int32)
	}
	if i, ok := e.users[string(uk)]; ok {
		o.users[i] = u
		return
	}
	e.users[string(uk)] = int32(len(o.users))
	e.uorder = append(e.uorder, string(uk))
	o.users = append(o.users, u)
}

// scanChain scans state spec in key group kg of a chain: the full file
// with the changes applied (see above).
func (p *viewPart) scanChain(ctx context.Context, spec runtime.StateSpec, kg int, readAhead int, fn func(runtime.Entry) error) (int64, error) {
	o := &overlay{kind: spec.Kind, subKeyed: spec.SubKeyed, ids: make(map[string]int32), byKey: make(map[string][]int32), gone: make(map[string]bool)}
	for _, f := range p.changes {
		if _, err := f.scan(ctx, spec.Name, kg, readAhead, func(en runtime.Entry) error { return o.apply(f.path, en) }); err != nil {
			return 0, err
		}
	}
	if len(o.ents) == 0 && len(o.gone) == 0 {
		// No change to this section: the full file's, as it is.
		return p.file.scan(ctx, spec.Name, kg, readAhead, fn)
	}
	var n int64
	emit := func(en runtime.Entry) error {
		n++
		return fn(en)
	}
	// The list whose elements the full file is passing, to append the
	// changes' elements to once they end.
	open := -1
	flush := func() error {
		if open < 0 {
			return nil
		}
		e := &o.ents[open]
		open, e.emitted = -1, true
		for _, el := range e.elems {
			if err := emit(runtime.Entry{Key: o.bytes(e.key), Namespace: o.bytes(e.ns), Value: o.bytes(el)}); err != nil {
				return err
			}
		}
		return nil
	}
	var id []byte // the identity of the entry being passed
	_, err := p.file.scan(ctx, spec.Name, kg, readAhead, func(en runtime.Entry) error {
		if len(o.gone) > 0 && o.gone[string(en.Key)] {
			return flush()
		}
		id = ident(id[:0], en.Key, en.Namespace)
		i, touched := o.ids[string(id)]
		if open >= 0 && (!touched || int(i) != open) {
			if err := flush(); err != nil {
				return err
			}
		}
		if touched {
			// A replaced value or map entry is passed, with its new value,
			// in the old one's place.
			e := &o.ents[i]
			switch {
			case o.kind == runtime.KindValue && e.has:
				if e.emitted {
					return nil
				}
				e.emitted, en.Value = true, o.bytes(e.value)
				return emit(en)
			case o.kind.HasUserKey():
				if j, ok := e.users[string(en.UserKey)]; ok {
					u := &o.users[j]
					if u.deleted || u.emitted {
						return nil
					}
					u.emitted, en.Value = true, o.bytes(u.value)
					return emit(en)
				}
			}
			if e.cleared {
				return nil
			}
			if o.kind == runtime.KindList {
				open = int(i)
			}
		}
		return emit(en)
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return n, err
	}
	for i := range o.ents {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		e := &o.ents[i]
		key, ns := o.bytes(e.key), o.bytes(e.ns)
		switch o.kind {
		case runtime.KindValue:
			if e.has && !e.emitted {
				err = emit(runtime.Entry{Key: key, Namespace: ns, Value: o.bytes(e.value)})
			}
		case runtime.KindList:
			if !e.emitted {
				for _, el := range e.elems {
					if err = emit(runtime.Entry{Key: key, Namespace: ns, Value: o.bytes(el)}); err != nil {
						break
					}
				}
			}
		default:
			for _, uk := range e.uorder {
				if u := o.users[e.users[uk]]; !u.deleted && !u.emitted {
					if err = emit(runtime.Entry{Key: key, Namespace: ns, UserKey: []byte(uk), Value: o.bytes(u.value)}); err != nil {
						break
					}
				}
			}
		}
		if err != nil {
			return n, fmt.Errorf("checkpoint: state %q, key group %d: %w", spec.Name, kg, err)
		}
	}
	return n, nil
}
