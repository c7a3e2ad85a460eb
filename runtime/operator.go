package runtime

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// Operator state: state that belongs to an operator instance, not to a key
// (Flink's operator ListState) — a source's positions, a sink's pending
// commits. It is a list of elements per instance, held in memory by its
// handle, encoded with generated codecs when a snapshot is taken, and
// redistributed when a job is rescaled in one of Flink's two ways:
//
//   - OperatorList (Flink's getListState, even split): the elements of
//     every old instance, in old-instance order, are split into as many
//     contiguous runs as there are new instances, instance i taking
//     elements [i*n/q, (i+1)*n/q) of the n.
//   - UnionList (getUnionListState): every new instance gets every
//     element of every old instance.
//
// Each restored element keeps its origin: the index of the old instance
// whose snapshot held it (OperatorElement.Origin), so that a sink can find
// the commits an instance left pending.
//
// The lists of a store travel in its instance's operator-state blob (the
// blob of driver.Instance.Snapshot, checkpoint.Instance.OperatorState):
// EncodeOperatorState wraps the operator's own blob and every list bound to
// the store in one container, which DecodeOperatorState opens again; a
// blob written without lists is left as it is, and an old checkpoint's
// blob reads back as the operator's own. The restore (checkpoint.Reader's)
// redistributes the lists into the handles bound to the restored store —
// bind them before the restore, as keyed states are registered before it.

// OperatorListDescriptor describes an operator list state: a list of T
// per operator instance.
type OperatorListDescriptor[T any] struct {
	Name        string        // stable state name (see StateSpec.Name)
	Fingerprint string        // schema fingerprint of the element type
	Schema      string        // the schema it was derived from
	Value       ValueCodec[T] // codec of one element
}

// OperatorElement is an element of an operator list and where it came
// from.
type OperatorElement[T any] struct {
	Value T
	// Origin is the index of the old instance whose snapshot held the
	// element, in the parallelism of the checkpoint it was restored from;
	// -1 for an element added since.
	Origin int
}

// OperatorListSpec is the identity of an operator list as the restore
// sees it.
type OperatorListSpec struct {
	Name, Fingerprint, Schema string
	// Union reports a UnionList (every new instance gets every element);
	// false is an OperatorList (even split).
	Union bool
}

// OperatorListData is an operator list in a blob: its spec and its
// encoded elements.
type OperatorListData struct {
	OperatorListSpec
	Elements [][]byte
}

// opList is the part of an operator list the store's registry sees.
type opList interface {
	spec() OperatorListSpec
	encode() [][]byte
	restore(elems []OriginElement) error
}

// OriginElement is an encoded element of an operator list being restored,
// and the old instance it comes from.
type OriginElement struct {
	Origin int
	Data   []byte
}

// OperatorStates is the set of operator lists bound to one store: what
// EncodeOperatorState encodes and a restore fills. It lives until the
// store is closed, so that a snapshot taken after the operator let go of
// its handles (the final checkpoint of a finished instance) still holds
// the lists.
type OperatorStates struct {
	mu    sync.Mutex
	lists map[string]opList
}

// opRegistries maps each open Store to its operator lists. An entry lives
// as long as the store is open — the lists are the store's state, whether
// or not a handle of them is still reachable — and goes when the store is
// closed (ReleaseOperatorStates, which every backend's Close calls).
var opRegistries sync.Map // Store -> *OperatorStates

// OperatorStatesOf returns the operator lists of s, making the set if s
// has none yet; nil (which holds no lists) for a store that cannot hold
// any (one whose type is not comparable).
func OperatorStatesOf(s Store) *OperatorStates {
	r, _ := registryOf(s, true)
	return r
}

// ReleaseOperatorStates forgets the operator lists of s. A Store's Close
// calls it (every backend of this module does, and the conformance suite
// checks it): the lists of a closed store are gone with it, and a backend
// that did not call it would keep them, and the store, in memory.
func ReleaseOperatorStates(s Store) {
	if s != nil && reflect.TypeOf(s).Comparable() {
		opRegistries.Delete(s)
	}
}

// registryOf returns the registry of s; create makes it if it does not
// exist.
func registryOf(s Store, create bool) (*OperatorStates, error) {
	if s == nil || !reflect.TypeOf(s).Comparable() {
		return nil, fmt.Errorf("%w: a store of type %T cannot hold operator lists: it is not comparable (make it a pointer)", ErrInvalidState, s)
	}
	if r, ok := opRegistries.Load(s); ok {
		return r.(*OperatorStates), nil
	}
	if !create {
		return nil, nil
	}
	r, _ := opRegistries.LoadOrStore(s, &OperatorStates{lists: map[string]opList{}})
	return r.(*OperatorStates), nil
}

// OperatorLists returns the specs of the operator lists bound to s, sorted
// by name.
func OperatorLists(s Store) []OperatorListSpec {
	r, _ := registryOf(s, false)
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []OperatorListSpec
	for _, l := range r.lists {
		out = append(out, l.spec())
	}
	slices.SortFunc(out, func(a, b OperatorListSpec) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// RestoreOperatorList sets the elements of the operator list name bound to
// s to elems, decoded with its codec. The list must be empty
// (ErrRestoreConflict otherwise); an element that does not decode fails the
// restore with ErrCorrupt, naming the list, the element and its origin, and
// leaves the list empty.
func RestoreOperatorList(s Store, name string, elems []OriginElement) error {
	r, _ := registryOf(s, false)
	var l opList
	if r != nil {
		r.mu.Lock()
		l = r.lists[name]
		r.mu.Unlock()
	}
	if l == nil {
		return fmt.Errorf("%w: no operator list %q is bound to the store", ErrInvalidState, name)
	}
	return l.restore(elems)
}

// opListHandle is the handle of an operator list: its elements, in memory.
type opListHandle[T any] struct {
	sp    OperatorListSpec
	vc    ValueCodec[T]
	elems []OperatorElement[T]
}

func (h *opListHandle[T]) spec() OperatorListSpec { return h.sp }

func (h *opListHandle[T]) encode() [][]byte {
	out := make([][]byte, len(h.elems))
	for i, e := range h.elems {
		out[i] = h.vc.AppendValue(nil, e.Value)
	}
	return out
}

func (h *opListHandle[T]) restore(elems []OriginElement) error {
	if len(h.elems) != 0 {
		return fmt.Errorf("%w: operator list %q already has %d elements", ErrRestoreConflict, h.sp.Name, len(h.elems))
	}
	out := make([]OperatorElement[T], len(elems))
	for i, e := range elems {
		if err := decodeInto(h.vc, e.Data, &out[i].Value); err != nil {
			return fmt.Errorf("operator list %q: element %d (of old instance %d): %w", h.sp.Name, i, e.Origin, err)
		}
		out[i].Origin = e.Origin
	}
	h.elems = out
	return nil
}

// bindOpList binds the operator list of d to s, or returns the handle
// already bound under its name.
func bindOpList[T any](s Store, d OperatorListDescriptor[T], union bool) (*opListHandle[T], error) {
	if s == nil {
		return nil, fmt.Errorf("%w: operator list %q: nil store", ErrInvalidState, d.Name)
	}
	if err := ValidateStateName(d.Name); err != nil {
		return nil, err
	}
	if d.Value == nil {
		return nil, nilCodecError(d.Name, "value")
	}
	sp := OperatorListSpec{Name: d.Name, Fingerprint: d.Fingerprint, Schema: d.Schema, Union: union}
	for _, st := range s.States() {
		if st.Name == d.Name {
			return nil, fmt.Errorf("%w: operator list %q: the store has a keyed state of that name", ErrStateMismatch, d.Name)
		}
	}
	r, err := registryOf(s, true)
	if err != nil {
		return nil, fmt.Errorf("operator list %q: %w", d.Name, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if l, ok := r.lists[d.Name]; ok {
		h, same := l.(*opListHandle[T])
		if prev := l.spec(); !same || prev.Union != union || prev.Fingerprint != sp.Fingerprint {
			return nil, fmt.Errorf("%w: operator list %q is bound as %s, requested as %s", ErrStateMismatch, d.Name, describeOpList(prev), describeOpList(sp))
		}
		return h, nil
	}
	h := &opListHandle[T]{sp: sp, vc: d.Value}
	r.lists[d.Name] = h
	return h, nil
}

func describeOpList(sp OperatorListSpec) string {
	mode := "an even-split list"
	if sp.Union {
		mode = "a union list"
	}
	return fmt.Sprintf("%s (fingerprint %q)", mode, sp.Fingerprint)
}

// OperatorList is a handle on an even-split operator list (see the file's
// doc). The zero OperatorList is unbound and every method returns
// ErrUnbound (or nothing). Like every handle, it belongs to the operator's
// goroutine.
type OperatorList[T any] struct{ h *opListHandle[T] }

// NewOperatorList binds d to s as an even-split operator list.
func NewOperatorList[T any](s Store, d OperatorListDescriptor[T]) (OperatorList[T], error) {
	h, err := bindOpList(s, d, false)
	return OperatorList[T]{h}, err
}

// UnionList is a handle on a union operator list (see the file's doc).
type UnionList[T any] struct{ h *opListHandle[T] }

// NewUnionList binds d to s as a union operator list.
func NewUnionList[T any](s Store, d OperatorListDescriptor[T]) (UnionList[T], error) {
	h, err := bindOpList(s, d, true)
	return UnionList[T]{h}, err
}

// Get returns the list's values, in order.
func (l OperatorList[T]) Get() []T { return opValues(l.h) }

// Elements returns the list's elements with their origins, in order.
func (l OperatorList[T]) Elements() []OperatorElement[T] { return opElements(l.h) }

// Add appends v.
func (l OperatorList[T]) Add(v T) error { return opAdd(l.h, v) }

// Replace replaces the list with vs (their origin is -1).
func (l OperatorList[T]) Replace(vs []T) error { return opReplace(l.h, vs) }

// Get returns the list's values, in order.
func (l UnionList[T]) Get() []T { return opValues(l.h) }

// Elements returns the list's elements with their origins, in order.
func (l UnionList[T]) Elements() []OperatorElement[T] { return opElements(l.h) }

// Add appends v.
func (l UnionList[T]) Add(v T) error { return opAdd(l.h, v) }

// Replace replaces the list with vs (their origin is -1).
func (l UnionList[T]) Replace(vs []T) error { return opReplace(l.h, vs) }

func opValues[T any](h *opListHandle[T]) []T {
	if h == nil {
		return nil
	}
	out := make([]T, len(h.elems))
	for i, e := range h.elems {
		out[i] = e.Value
	}
	return out
}

func opElements[T any](h *opListHandle[T]) []OperatorElement[T] {
	if h == nil {
		return nil
	}
	return slices.Clone(h.elems)
}

func opAdd[T any](h *opListHandle[T], v T) error {
	if h == nil {
		return ErrUnbound
	}
	h.elems = append(h.elems, OperatorElement[T]{Value: v, Origin: -1})
	return nil
}

func opReplace[T any](h *opListHandle[T], vs []T) error {
	if h == nil {
		return ErrUnbound
	}
	h.elems = h.elems[:0]
	for _, v := range vs {
		h.elems = append(h.elems, OperatorElement[T]{Value: v, Origin: -1})
	}
	return nil
}

// The container of an operator-state blob with lists:
//
//	magic "\x00sgops" (6 bytes), version byte 1,
//	flags byte (bit 0: the operator's own blob is present),
//	the own blob (uvarint length, bytes),
//	uvarint list count, then per list, sorted by name:
//	  name, fingerprint, schema (uvarint length, bytes each),
//	  mode byte (0 even split, 1 union),
//	  uvarint element count, each element (uvarint length, bytes),
//	CRC32C (Castagnoli) of all that, 4 bytes big-endian.
//
// A blob that does not start with the magic is an operator's own blob
// from before lists existed (an own blob that starts with these seven
// bytes is taken for a container, and fails as a corrupt one).
var opMagic = []byte("\x00sgops\x01")

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)

// EncodeOperatorState returns the operator-state blob of an instance whose
// operator passed own (nil for none): own itself if no operator list is
// bound to s, else the container of own and every list's elements, encoded
// now — the synchronous phase of a snapshot, which costs O(elements).
func EncodeOperatorState(s Store, own []byte) []byte {
	r, _ := registryOf(s, false)
	return r.Encode(own)
}

// Encode is EncodeOperatorState for the store of o; a nil o has no lists.
func (o *OperatorStates) Encode(own []byte) []byte {
	if o == nil {
		return slices.Clone(own)
	}
	o.mu.Lock()
	lists := make([]opList, 0, len(o.lists))
	for _, l := range o.lists {
		lists = append(lists, l)
	}
	o.mu.Unlock()
	if len(lists) == 0 {
		return slices.Clone(own)
	}
	slices.SortFunc(lists, func(a, b opList) int { return strings.Compare(a.spec().Name, b.spec().Name) })
	b := append([]byte(nil), opMagic...)
	var flags byte
	if own != nil {
		flags = 1
	}
	b = append(b, flags)
	b = appendOpBytes(b, own)
	b = binary.AppendUvarint(b, uint64(len(lists)))
	for _, l := range lists {
		sp := l.spec()
		b = appendOpBytes(b, []byte(sp.Name))
		b = appendOpBytes(b, []byte(sp.Fingerprint))
		b = appendOpBytes(b, []byte(sp.Schema))
		mode := byte(0)
		if sp.Union {
			mode = 1
		}
		b = append(b, mode)
		elems := l.encode()
		b = binary.AppendUvarint(b, uint64(len(elems)))
		for _, e := range elems {
			b = appendOpBytes(b, e)
		}
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoliTable))
}

func appendOpBytes(b, p []byte) []byte { return append(binary.AppendUvarint(b, uint64(len(p))), p...) }

// DecodeOperatorState opens an operator-state blob: the operator's own
// blob in it (nil if there was none) and its lists. A blob that does not
// start with the container's magic is the operator's own, whole, with no
// lists. A container that is truncated, fails its checksum or does not
// parse is corrupt (ErrCorrupt): its lists are never read wrong or lost
// silently.
func DecodeOperatorState(blob []byte) (own []byte, lists []OperatorListData, err error) {
	if !bytes.HasPrefix(blob, opMagic) {
		return blob, nil, nil
	}
	bad := func(what string) ([]byte, []OperatorListData, error) {
		return nil, nil, fmt.Errorf("%w: operator-state container: %s", ErrCorrupt, what)
	}
	if len(blob) < len(opMagic)+1+4 {
		return bad("truncated")
	}
	body := blob[:len(blob)-4]
	if crc32.Checksum(body, castagnoliTable) != binary.BigEndian.Uint32(blob[len(blob)-4:]) {
		return bad("checksum mismatch")
	}
	p := body[len(opMagic):]
	flags := p[0]
	p = p[1:]
	if flags > 1 {
		return bad("unknown flags")
	}
	var ok bool
	if own, p, ok = readOpBytes(p); !ok {
		return bad("truncated own blob")
	}
	if flags == 0 {
		own = nil
	} else {
		own = bytes.Clone(own)
	}
	n, w := binary.Uvarint(p)
	if w <= 0 || n > uint64(len(p)) {
		return bad("bad list count")
	}
	p = p[w:]
	for range n {
		var d OperatorListData
		var name, fp, sch []byte
		if name, p, ok = readOpBytes(p); !ok {
			return bad("truncated list name")
		}
		if fp, p, ok = readOpBytes(p); !ok {
			return bad(fmt.Sprintf("list %q: truncated fingerprint", name))
		}
		if sch, p, ok = readOpBytes(p); !ok || len(p) == 0 || p[0] > 1 {
			return bad(fmt.Sprintf("list %q: truncated schema or bad mode", name))
		}
		d.Name, d.Fingerprint, d.Schema, d.Union = string(name), string(fp), string(sch), p[0] == 1
		p = p[1:]
		count, w := binary.Uvarint(p)
		if w <= 0 || count > uint64(len(p)) {
			return bad(fmt.Sprintf("list %q: bad element count", name))
		}
		p = p[w:]
		for range count {
			var e []byte
			if e, p, ok = readOpBytes(p); !ok {
				return bad(fmt.Sprintf("list %q: truncated element", name))
			}
			d.Elements = append(d.Elements, bytes.Clone(e))
		}
		lists = append(lists, d)
	}
	if len(p) != 0 {
		return bad(fmt.Sprintf("%d bytes after the lists", len(p)))
	}
	return own, lists, nil
}

func readOpBytes(p []byte) ([]byte, []byte, bool) {
	n, w := binary.Uvarint(p)
	if w <= 0 || n > uint64(len(p)-w) {
		return nil, p, false
	}
	return p[w : w+int(n)], p[w+int(n):], true
}

// SplitOperatorList returns the elements that new instance index of
// parallelism gets of an operator list whose old instances held lists (in
// old-instance order, each element with its origin): all of them for a
// union list, run [index*n/parallelism, (index+1)*n/parallelism) of the n
// for an even split.
func SplitOperatorList(union bool, lists [][]OriginElement, index, parallelism int) []OriginElement {
	var all []OriginElement
	for _, l := range lists {
		all = append(all, l...)
	}
	if union {
		return all
	}
	n := len(all)
	return all[index*n/parallelism : (index+1)*n/parallelism]
}
