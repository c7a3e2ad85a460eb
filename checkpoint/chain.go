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
// entry the changes removed or replaced is skipped, a list the changes
// appended to gets its new elements right after its old ones), then
// passes what the overlay holds that the full file did not. Memory is
// what the changes hold, never the full file's entries; the full file is
// read once, as a restore from a full checkpoint reads it.

// overlay is what the changes of one (state, key group) leave.
type overlay struct {
	kind    runtime.Kind
	entries map[string]*overlayEntry // by ident(key, namespace)
	order   []*overlayEntry          // in the order first touched
	byKey   map[string][]*overlayEntry
	// gone holds the keys whose every namespace was removed (opDeleteAll):
	// nothing of them in the full file survives.
	gone map[string]bool
}

// overlayEntry is what the changes leave of one (key, namespace).
type overlayEntry struct {
	key, ns []byte
	// cleared: the full file's content of (key, namespace) is gone.
	cleared bool
	value   []byte // a Value state's, if hasValue
	has     bool
	elems   [][]byte // a list's elements, after the full file's unless cleared
	users   map[string]*userEntry
	uorder  []string
	emitted bool // a list's elements were passed with the full file's
}

// userEntry is what the changes leave of a map entry: its value, or its
// removal.
type userEntry struct {
	value   []byte
	deleted bool
}

// ident returns the overlay's identity of (key, namespace).
func ident(key, ns []byte) string { return string(appendBytes(appendBytes(nil, key), ns)) }

func (o *overlay) entry(key, ns []byte) *overlayEntry {
	id := ident(key, ns)
	if e := o.entries[id]; e != nil {
		return e
	}
	e := &overlayEntry{key: append([]byte(nil), key...), ns: append([]byte(nil), ns...), cleared: o.gone[string(key)]}
	o.entries[id] = e
	o.order = append(o.order, e)
	o.byKey[string(key)] = append(o.byKey[string(key)], e)
	return e
}

// clear empties e, and what the full file held of it.
func (e *overlayEntry) clear() {
	e.cleared, e.has, e.value, e.elems, e.users, e.uorder = true, false, nil, nil, nil, nil
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
		for _, e := range o.byKey[string(en.Key)] {
			e.clear()
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
			e.value, e.has = append([]byte(nil), v...), true
		case runtime.KindMap, runtime.KindSortedMap:
			e.user(en.UserKey, &userEntry{value: append([]byte(nil), v...)})
		default:
			return bad()
		}
	case opDelete:
		if !o.kind.HasUserKey() {
			return bad()
		}
		e.user(en.UserKey, &userEntry{deleted: true})
	case opAppend:
		if o.kind != runtime.KindList {
			return bad()
		}
		e.elems = append(e.elems, append([]byte(nil), v...))
	default:
		return corruptAt(path, -1, "unknown operation %d in a change of key %x", op, en.Key)
	}
	return nil
}

func (e *overlayEntry) user(uk []byte, u *userEntry) {
	if e.users == nil {
		e.users = make(map[string]*userEntry)
	}
	if _, ok := e.users[string(uk)]; !ok {
		e.uorder = append(e.uorder, string(uk))
	}
	e.users[string(uk)] = u
}

// scanChain scans state spec in key group kg of a chain: the full file
// with the changes applied (see above).
func (p *viewPart) scanChain(ctx context.Context, spec runtime.StateSpec, kg int, readAhead int, fn func(runtime.Entry) error) (int64, error) {
	o := &overlay{kind: spec.Kind, entries: make(map[string]*overlayEntry), byKey: make(map[string][]*overlayEntry), gone: make(map[string]bool)}
	for _, f := range p.changes {
		if _, err := f.scan(ctx, spec.Name, kg, readAhead, func(en runtime.Entry) error { return o.apply(f.path, en) }); err != nil {
			return 0, err
		}
	}
	if len(o.order) == 0 && len(o.gone) == 0 {
		// No change to this section: the full file's, as it is.
		return p.file.scan(ctx, spec.Name, kg, readAhead, fn)
	}
	var n int64
	emit := func(en runtime.Entry) error {
		n++
		return fn(en)
	}
	var id []byte // the identity of the entry being passed
	// The list whose elements the full file is passing, to append the
	// changes' elements to once they end.
	var open *overlayEntry
	flush := func() error {
		if open == nil {
			return nil
		}
		e := open
		open, e.emitted = nil, true
		for _, el := range e.elems {
			if err := emit(runtime.Entry{Key: e.key, Namespace: e.ns, Value: el}); err != nil {
				return err
			}
		}
		return nil
	}
	_, err := p.file.scan(ctx, spec.Name, kg, readAhead, func(en runtime.Entry) error {
		if len(o.gone) > 0 && o.gone[string(en.Key)] {
			return flush()
		}
		id = appendBytes(appendBytes(id[:0], en.Key), en.Namespace)
		e := o.entries[string(id)]
		if open != nil && open != e {
			if err := flush(); err != nil {
				return err
			}
		}
		switch {
		case e == nil:
		case e.cleared:
			return nil
		case o.kind.HasUserKey():
			if _, ok := e.users[string(en.UserKey)]; ok {
				return nil // removed, or passed with its new value below
			}
		case o.kind == runtime.KindList:
			open = e
		}
		return emit(en)
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return n, err
	}
	for _, e := range o.order {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		switch o.kind {
		case runtime.KindValue:
			if e.has {
				err = emit(runtime.Entry{Key: e.key, Namespace: e.ns, Value: e.value})
			}
		case runtime.KindList:
			if !e.emitted {
				for _, el := range e.elems {
					if err = emit(runtime.Entry{Key: e.key, Namespace: e.ns, Value: el}); err != nil {
						break
					}
				}
			}
		default:
			for _, uk := range e.uorder {
				if u := e.users[uk]; !u.deleted {
					if err = emit(runtime.Entry{Key: e.key, Namespace: e.ns, UserKey: []byte(uk), Value: u.value}); err != nil {
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
