package cow

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/stategen/stategen/backends/internal/arena"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storekit"
)

// Restore implements runtime.Store. It checks every state and key group
// before it loads anything; a key group that already holds entries of a
// restored state fails with runtime.ErrRestoreConflict (the store never
// merges or replaces).
//
// Each (state, key group) is bulk-loaded (see loader): its entries are
// staged as the view is scanned and then placed into a fresh table sized
// for them, with no incremental rehash and none of the per-write checks.
// The key groups are loaded on Options.RestoreConcurrency goroutines (see
// loadAll), each key group's states by one goroutine, and the new tables
// are installed, and new states registered, only once every key group has
// loaded: a Restore that fails changes nothing in the store.
func (s *Store) Restore(src runtime.View) error {
	if s.closed {
		return fmt.Errorf("%w: cannot restore", runtime.ErrClosed)
	}
	if s.iterating > 0 {
		return fmt.Errorf("%w: cow: Restore", runtime.ErrWriteDuringIteration)
	}
	s.restores.Note()
	r, err := storekit.CheckRestore(s.target(), src)
	if err != nil {
		return err
	}
	groups := r.Groups
	// Hosted states load into their tables (host.go); the loader loads the
	// others.
	var specs []runtime.StateSpec
	for _, spec := range r.States {
		if !s.hosted(spec.Name) {
			specs = append(specs, spec)
		}
	}
	tabs, err := s.loadAll(src, specs, groups)
	if err != nil {
		return err
	}
	installHosted, err := s.loadHosted(src, r.States, groups)
	if err != nil {
		return err
	}
	// Every key group loaded: install the tables.
	installHosted()
	for i, spec := range specs {
		if _, ok := s.states[spec.Name]; !ok {
			s.create(spec)
		}
		st := s.states[spec.Name]
		for kg := range groups.All() {
			if t := tabs[(kg-groups.Start)*len(specs)+i]; t != nil {
				st.tabs[kg-st.start] = t
			}
		}
	}
	return nil
}

// target describes the store to storekit.
func (s *Store) target() storekit.Target {
	return storekit.Target{
		Name:       "cow",
		Config:     s.cfg,
		Registered: storekit.Specs(s.states, func(st *state) runtime.StateSpec { return st.spec }),
		Occupied: func(name string, kg int) (bool, error) {
			if st := s.states[name]; st.tab != nil {
				return st.tab.Occupied(kg), nil
			}
			t := s.states[name].tabs[kg-s.cfg.KeyGroups.Start]
			return t != nil && !t.empty(), nil
		},
	}
}

// loadAll loads every state of specs in every key group of groups from src
// and returns the new tables, the table of specs[i] in key group kg at
// index (kg-groups.Start)*len(specs)+i, nil where src has no entries. It
// touches nothing of the store but what it reads: its options, its
// maxParallelism and its snapshot count (s.seq), which no one changes
// while it runs.
//
// With a concurrency of 1, or a single key group, it loads the key groups
// in order on the calling goroutine. Otherwise n workers, each with a
// loader (staging buffers) of its own, take the key groups in order from
// an atomic counter; a worker loads every state of its key group, so that
// two Scans of one key group never overlap, as runtime.View requires. Each
// worker writes only the tables of its key groups, which the caller reads
// after wg.Wait. The first failure — a Scan's error, corruption, a panic,
// a Scan that ends the goroutine with runtime.Goexit — sets the stop flag, which the other workers check before taking a key
// group and at every entry (a Scan in progress then fails with
// errRestoreStopped, which is not reported); loadAll waits for every worker
// and returns that failure, or re-raises the panic on the caller's
// goroutine, where the sequential path would have raised it.
func (s *Store) loadAll(src runtime.View, specs []runtime.StateSpec, groups runtime.KeyGroupRange) ([]*table, error) {
	ng := groups.Len()
	tabs := make([]*table, ng*len(specs))
	if len(tabs) == 0 {
		return tabs, nil
	}
	slot := func(kg int) []*table {
		i := (kg - groups.Start) * len(specs)
		return tabs[i : i+len(specs) : i+len(specs)]
	}
	n := min(s.opts.RestoreConcurrency, ng)
	if n <= 1 {
		ld := &loader{s: s}
		for kg := range groups.All() {
			if err := ld.loadGroup(src, specs, kg, slot(kg)); err != nil {
				return nil, err
			}
		}
		return tabs, nil
	}
	var (
		next  atomic.Int64 // the index in groups of the next key group to load
		stop  atomic.Bool
		mu    sync.Mutex
		first error      // the first failure, guarded by mu
		pan   *loadPanic // set with first if that failure is a panic
		wg    sync.WaitGroup
	)
	fail := func(err error, p *loadPanic) {
		mu.Lock()
		if first == nil {
			first, pan = err, p
		}
		mu.Unlock()
		stop.Store(true)
		if s.testLoadFailed != nil {
			s.testLoadFailed()
		}
	}
	for range n {
		wg.Go(func() {
			ld := &loader{s: s, stop: &stop}
			kg := -1
			exited := true // until the loop ends: a Scan that calls runtime.Goexit skips it
			defer func() {
				if r := recover(); r != nil {
					p := &loadPanic{kg: kg, val: r, stack: debug.Stack()}
					fail(p.error(), p)
				} else if exited {
					fail(fmt.Errorf("cow: restore: key group %d: the View's Scan exited the loading goroutine (runtime.Goexit)", kg), nil)
				}
			}()
			for !stop.Load() {
				i := int(next.Add(1) - 1)
				if i >= ng {
					break
				}
				kg = groups.Start + i
				if err := ld.loadGroup(src, specs, kg, slot(kg)); err != nil {
					if !errors.Is(err, errRestoreStopped) {
						fail(err, nil)
					}
					break
				}
			}
			exited = false
		})
	}
	wg.Wait()
	if pan != nil {
		panic(pan.error())
	}
	if first != nil {
		return nil, first
	}
	return tabs, nil
}

// errRestoreStopped fails the Scans of the other workers once one has
// failed; it is never reported.
var errRestoreStopped = errors.New("cow: restore stopped by a failure in another key group")

// loadPanic is a panic of a Restore worker, carried to Restore's goroutine.
type loadPanic struct {
	kg    int
	val   any
	stack []byte
}

// error describes the panic; it wraps the panic's value if that is an
// error.
func (p *loadPanic) error() error {
	if err, ok := p.val.(error); ok {
		return fmt.Errorf("cow: restore: panic loading key group %d: %w\n%s", p.kg, err, p.stack)
	}
	return fmt.Errorf("cow: restore: panic loading key group %d: %v\n%s", p.kg, p.val, p.stack)
}

// loadGroup loads every state of specs in key group kg into out, one table
// per state (nil where src has none of its entries).
func (ld *loader) loadGroup(src runtime.View, specs []runtime.StateSpec, kg int, out []*table) error {
	for i, spec := range specs {
		t, err := ld.load(spec, kg, src)
		if err != nil {
			return fmt.Errorf("cow: restore: state %q, key group %d: %w", spec.Name, kg, err)
		}
		out[i] = t
	}
	return nil
}

// loader bulk-loads the tables of a Restore, one (state, key group) at a
// time. While the view is scanned, it checks every entry and stages it:
// the entry bytes of a Value, the elements of a list, and the items of a
// map, which go straight into the new table's arena. Consecutive entries
// of one (key, namespace) — a list's elements, a map's entries — make one
// run. Once the scan ends, the main table is allocated for the number of
// runs and every run is placed: a list becomes one region of its exact
// size, a map a packed B-tree (sorted first if the view did not scan it in
// order). The map entries of a (key, namespace) met again in a later run
// are put into its tree, so any order the View contract allows loads
// correctly; what the contract forbids — two values of one (key,
// namespace), a list whose elements are not consecutive, two entries of
// one map user key — fails with runtime.ErrCorrupt rather than losing an
// entry silently. The staging buffers are reused from one key group to the
// next.
type loader struct {
	s     *Store
	stop  *atomic.Bool // set when another worker failed; nil on the sequential path
	spec  runtime.StateSpec
	t     *table
	kg    int
	buf   []byte      // staged keys, namespaces, values and list elements
	runs  []loadRun   // one per run of entries of one (key, namespace)
	items [][2]uint64 // map items in the new arena: (prefix, ref)
	order []int32     // runs in the order of their home pages
	start []int32     // scratch for the counting sort of order
}

// loadRun is one run of entries of one (key, namespace).
type loadRun struct {
	keyHash    uint64 // runtime.HashKey of the key
	key, ns    [2]int // bounds in loader.buf
	data       [2]int // bounds in loader.buf of the value or the list's elements
	items      [2]int // bounds in loader.items of a map's items
	itemBytes  int64  // bytes of those items
	mainTarget uint64 // hash in the main table
}

// load loads the entries of state spec in key group kg into a new table,
// which it returns; nil if src has none.
func (ld *loader) load(spec runtime.StateSpec, kg int, src runtime.View) (*table, error) {
	ld.spec, ld.kg = spec, kg
	ld.t = newTable(spec.Kind, &ld.s.opts, ld.s.seq)
	ld.buf, ld.runs, ld.items = ld.buf[:0], ld.runs[:0], ld.items[:0]
	if err := src.Scan(spec.Name, kg, ld.add); err != nil {
		return nil, err
	}
	if len(ld.runs) == 0 {
		return nil, nil
	}
	if err := ld.build(); err != nil {
		return nil, err
	}
	t := ld.t
	ld.t = nil
	return t, nil
}

func (ld *loader) bytes(b [2]int) []byte { return ld.buf[b[0]:b[1]:b[1]] }

func (ld *loader) stage(b []byte) [2]int {
	s := len(ld.buf)
	ld.buf = append(ld.buf, b...)
	return [2]int{s, len(ld.buf)}
}

// add checks and stages one entry of the view.
func (ld *loader) add(e runtime.Entry) error {
	if ld.stop != nil && ld.stop.Load() {
		return errRestoreStopped
	}
	spec := ld.spec
	if err := storekit.CheckEntryShape(spec, e); err != nil {
		return err
	}
	if len(ld.t.Slabs) > arena.MaxSlabs-slabHeadroom {
		return ErrTooLarge
	}
	n := len(ld.runs)
	same := spec.Kind != runtime.KindValue && n > 0 &&
		bytes.Equal(ld.bytes(ld.runs[n-1].key), e.Key) && bytes.Equal(ld.bytes(ld.runs[n-1].ns), e.Namespace)
	if !same {
		h := runtime.HashKey(e.Key)
		if err := storekit.CheckEntryGroup(ld.kg, runtime.KeyGroupOfHash(h, ld.s.cfg.MaxParallelism), e); err != nil {
			return err
		}
		r := loadRun{keyHash: h, mainTarget: h}
		if spec.SubKeyed {
			r.mainTarget ^= nsHash(e.Namespace)
		}
		r.key = ld.stage(e.Key)
		r.ns = ld.stage(e.Namespace)
		r.data = [2]int{len(ld.buf), len(ld.buf)}
		r.items = [2]int{len(ld.items), len(ld.items)}
		ld.runs = append(ld.runs, r)
		n++
	}
	r := &ld.runs[n-1]
	switch spec.Kind {
	case runtime.KindValue:
		r.data = ld.stage(e.Value)
	case runtime.KindList:
		ld.buf = appendUvarint(ld.buf, len(e.Value))
		ld.buf = append(ld.buf, e.Value...)
		r.data[1] = len(ld.buf)
	default:
		ref, size := ld.t.newItem(e.UserKey, e.Value)
		ld.items = append(ld.items, [2]uint64{prefix(e.UserKey), ref})
		r.items[1] = len(ld.items)
		r.itemBytes += int64(size)
	}
	return nil
}

// build places every staged run into the new table.
func (ld *loader) build() error {
	t, spec := ld.t, ld.spec
	count := len(ld.runs)
	logcap := capFor(count)
	if logcap > maxLogCap {
		return ErrTooLarge
	}
	// The mean entry size picks the record width.
	var total int64
	for i := range ld.runs {
		r := &ld.runs[i]
		kl, nl := r.key[1]-r.key[0], r.ns[1]-r.ns[0]
		switch spec.Kind {
		case runtime.KindValue:
			total += int64(entrySize(kl, nl, r.data[1]-r.data[0]))
		case runtime.KindList:
			total += int64(entrySize(kl, nl, listHdrSize))
		default:
			total += int64(entrySize(kl, nl, btRootSize))
		}
	}
	m := &t.main
	m.logcap, m.w = logcap, uint16(widthFor(total/int64(count)))
	m.dir, m.dirEpoch = t.allocTable(logcap, int(m.w)), t.epoch
	var hv [max(listHdrSize, btRootSize)]byte
	for _, i := range ld.pageOrder() {
		r := &ld.runs[i]
		key, ns := ld.bytes(r.key), ld.bytes(r.ns)
		pos, found := probeFree(t.Slabs, m, r.mainTarget, key, ns)
		if found {
			if err := ld.merge(r, pos); err != nil {
				return err
			}
			continue
		}
		var val []byte
		switch spec.Kind {
		case runtime.KindValue:
			val = ld.bytes(r.data)
		case runtime.KindList:
			elems := ld.bytes(r.data)
			region, b := t.Alloc(len(elems))
			copy(b, elems)
			encodeList(hv[:], region, len(elems), len(elems))
			val = hv[:listHdrSize]
		default:
			root, err := ld.tree(r)
			if err != nil {
				return err
			}
			root.encode(hv[:])
			val = hv[:btRootSize]
		}
		size := t.putNew(record(m.dir, int(m.w), pos), tagOf(r.mainTarget), key, ns, val)
		m.count++
		m.bytes += int64(size)
		if spec.SubKeyed {
			if _, err := t.treePut(&t.nsIdx, r.keyHash, key, nil, ns, nil, false); err != nil {
				return err
			}
		}
	}
	if len(t.Slabs) > arena.MaxSlabs-slabHeadroom {
		return ErrTooLarge
	}
	return nil
}

// pageOrder returns the indexes of the runs ordered by the page of the
// main table that holds their home record (a counting sort), so that the
// table's pages are written one after the other: fresh memory is touched
// in order and each page is written while it is in the cache, where
// placing the runs in scan order — random positions — costs a cache miss,
// and on fresh memory a page fault, per run.
func (ld *loader) pageOrder() []int32 {
	m := &ld.t.main
	shift := 64 - uint(m.logcap) + pageShift
	if m.logcap <= pageShift {
		shift = 64 // one page
	}
	start := slices.Grow(ld.start[:0], len(m.dir)+1)[:len(m.dir)+1]
	clear(start)
	for i := range ld.runs {
		start[ld.runs[i].mainTarget>>shift+1]++
	}
	for p := 1; p < len(start); p++ {
		start[p] += start[p-1]
	}
	order := slices.Grow(ld.order[:0], len(ld.runs))[:len(ld.runs)]
	for i := range ld.runs {
		p := ld.runs[i].mainTarget >> shift
		order[start[p]] = int32(i)
		start[p]++
	}
	ld.start, ld.order = start, order
	return order
}

// putNew writes the entry (key, ns, val) with the hash bits of control
// word c into the empty, zeroed record rec of a table no snapshot sees:
// inline if it fits, else in the arena. It returns the entry's size.
func (t *table) putNew(rec []byte, c uint32, key, ns, val []byte) int {
	n := entrySize(len(key), len(ns), len(val))
	if n <= len(rec)-4 {
		binary.LittleEndian.PutUint32(rec, c&^0xff|recInline)
		writeEntry(rec[4:], key, ns, val)
		return n
	}
	ref, b := t.Alloc(n)
	writeEntry(b, key, ns, val)
	binary.LittleEndian.PutUint32(rec, c&^0xff|recRef)
	binary.LittleEndian.PutUint64(rec[4:], ref)
	return n
}

// probeFree returns the position of (key, ns) in the new table of r if it
// holds it, else the free record where it goes.
func probeFree(slabs [][]byte, r *htab, h uint64, key, ns []byte) (int, bool) {
	mask := 1<<r.logcap - 1
	pos := int(h >> (64 - r.logcap))
	tag := tagOf(h)
	w := int(r.w)
	for {
		rec := record(r.dir, w, pos)
		c := ctrl(rec)
		if c == recEmpty {
			return pos, false
		}
		if c&^0xff == tag && entryIs(recEntry(slabs, rec), key, ns) {
			return pos, true
		}
		pos = (pos + 1) & mask
	}
}

// merge adds map run r to the entry of the same (key, namespace) placed
// at pos by an earlier run; for the other kinds a second run of one (key,
// namespace) is corruption.
func (ld *loader) merge(r *loadRun, pos int) error {
	t := ld.t
	m := &t.main
	switch ld.spec.Kind {
	case runtime.KindValue:
		return fmt.Errorf("%w: two entries of key %x, namespace %x", runtime.ErrCorrupt, ld.bytes(r.key), ld.bytes(r.ns))
	case runtime.KindList:
		return fmt.Errorf("%w: the elements of the list of key %x, namespace %x are not consecutive",
			runtime.ErrCorrupt, ld.bytes(r.key), ld.bytes(r.ns))
	}
	_, _, rv, _, _ := decodeEntry(recEntry(t.Slabs, record(m.dir, int(m.w), pos)))
	root, ok := decodeBtree(rv)
	if !ok {
		return errCorrupt
	}
	for i := r.items[0]; i < r.items[1]; i++ {
		uk, v, size, _ := decodeItem(arena.At(t.Slabs, ld.items[i][1]))
		if _, _, dup := btGet(t.Slabs, &root, uk); dup {
			return ld.duplicate(r, uk)
		}
		t.btPut(&root, uk, v)
		t.garbage += int64(size) // the staged item: btPut wrote its own
	}
	var rb [btRootSize]byte
	root.encode(rb[:])
	t.setValue(m, loc{pos: pos}, rb[:])
	return nil
}

func (ld *loader) duplicate(r *loadRun, uk []byte) error {
	return fmt.Errorf("%w: two entries of key %x, namespace %x, user key %x",
		runtime.ErrCorrupt, ld.bytes(r.key), ld.bytes(r.ns), uk)
}

// tree builds the packed B-tree of a map run, sorting its items by user
// key if the view did not scan them in order.
func (ld *loader) tree(r *loadRun) (btree, error) {
	t := ld.t
	items := ld.items[r.items[0]:r.items[1]]
	key := func(it [2]uint64) []byte { return itemKey(arena.At(t.Slabs, it[1])) }
	order := func(a, b [2]uint64) int { return cmpItemKeys(a[0], key(a), b[0], key(b)) }
	if !slices.IsSortedFunc(items, order) {
		slices.SortFunc(items, order)
	}
	for i := 1; i < len(items); i++ {
		if order(items[i-1], items[i]) == 0 {
			return btree{}, ld.duplicate(r, key(items[i]))
		}
	}
	root := t.btBuild(items)
	root.bytes += r.itemBytes
	return root, nil
}

func cmpItemKeys(pa uint64, a []byte, pb uint64, b []byte) int {
	if c := cmp.Compare(pa, pb); c != 0 {
		return c
	}
	return bytes.Compare(a, b)
}

func appendUvarint(b []byte, v int) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}
