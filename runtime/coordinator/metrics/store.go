package metrics

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/coordinator"
)

// Store exports the state of one participant's runtime.Store through
// observable instruments, read in a callback when the MeterProvider
// collects — never on the store's Put or Get:
//
//   - the entries and bytes of each state, as the latest snapshot written
//     for a checkpoint counted them (see Measure);
//   - the number of live snapshots, for a store with a goroutine-safe
//     LiveSnapshots() int method (every backend of this module);
//   - the engine statistics of a store with an LSMStats() (runtime.LSMStats,
//     bool) method (backends/pebble).
//
// A Store is used by the participant that owns the store: package
// runtime/coordinator/driver makes one for each Instance whose
// InstanceOptions.MeterProvider is set (or whose Coordinator has one), and
// closes it with the Instance. Its methods are safe for concurrent use and
// do nothing on a nil *Store.
type Store struct {
	store runtime.Store
	who   attribute.KeyValue
	reg   metric.Registration

	live                 metric.Int64ObservableGauge
	entries, bytes       metric.Int64ObservableGauge
	lookups, compactions metric.Int64ObservableCounter
	lsmGauges            [7]metric.Int64ObservableGauge
	liveSnapshots        func() int
	lsmStats             func() (runtime.LSMStats, bool)
	hit, miss, whoOpt    metric.ObserveOption

	seq atomic.Uint64 // numbers the snapshots Measure wraps

	mu        sync.Mutex
	closed    bool
	published uint64      // seq of the sizes below
	sizes     []stateSize // sorted by name
}

// stateSize is what a written snapshot counted of one state.
type stateSize struct {
	name           string
	entries, bytes int64
	attrs          metric.ObserveOption
}

// NewStore registers the instruments of participant's store with mp's
// meter (ScopeName); a nil mp records nothing. The error wraps
// ErrInstrument and names the instrument mp could not create, or is the
// provider's error registering the callback. Close unregisters them.
func NewStore(mp metric.MeterProvider, participant coordinator.ParticipantID, store runtime.Store) (*Store, error) {
	b := &builder{m: meter(mp)}
	s := &Store{store: store, who: attribute.String(AttrParticipant, string(participant))}
	s.whoOpt = metric.WithAttributeSet(attribute.NewSet(s.who))
	s.entries = b.observableGauge(StateEntries, "{entry}", "Entries of each state at the latest snapshot written for a checkpoint.")
	s.bytes = b.observableGauge(StateSize, unitBytes,
		"Bytes of the keys, namespaces, user keys and values of each state at the latest snapshot written for a checkpoint.")
	insts := []metric.Observable{s.entries, s.bytes}
	if l, ok := store.(interface{ LiveSnapshots() int }); ok {
		s.liveSnapshots = l.LiveSnapshots
		s.live = b.observableGauge(StoreLiveSnapshots, "{snapshot}", "Snapshots of the store not freed yet (a count that only grows is a leak).")
		insts = append(insts, s.live)
	}
	if l, ok := store.(interface {
		LSMStats() (runtime.LSMStats, bool)
	}); ok {
		s.lsmStats = l.LSMStats
		s.hit = metric.WithAttributes(s.who, attribute.String(AttrCacheResult, "hit"))
		s.miss = metric.WithAttributes(s.who, attribute.String(AttrCacheResult, "miss"))
		s.lookups = b.observableCounter(LSMBlockCacheLookups, "{lookup}", "Block-cache lookups, by result (hit or miss).")
		s.compactions = b.observableCounter(LSMCompactions, "{compaction}", "Compactions completed.")
		s.lsmGauges = [...]metric.Int64ObservableGauge{
			b.observableGauge(LSMBlockCacheSize, unitBytes, "Size of the blocks in the block cache."),
			b.observableGauge(LSMCompactionDebt, unitBytes, "Estimated bytes to compact before the tree is stable."),
			b.observableGauge(LSML0Files, "{file}", "Files in level 0."),
			b.observableGauge(LSML0Sublevels, "{sublevel}", "Sublevels of level 0."),
			b.observableGauge(LSMReadAmplification, "{run}", "Sorted runs a read may visit."),
			b.observableGauge(LSMMemTableSize, unitBytes, "Size of the memtables."),
			b.observableGauge(LSMDiskUsage, unitBytes, "Space the store's files take on disk."),
		}
		insts = append(insts, s.lookups, s.compactions)
		for _, g := range s.lsmGauges {
			insts = append(insts, g)
		}
	}
	if b.err != nil {
		return nil, b.err
	}
	reg, err := b.m.RegisterCallback(s.observe, insts...)
	if err != nil {
		return nil, fmt.Errorf("%w: callback of %s: %w", ErrInstrument, participant, err)
	}
	s.reg = reg
	return s, nil
}

// observe is the callback.
func (s *Store) observe(_ context.Context, o metric.Observer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	for _, st := range s.sizes {
		o.ObserveInt64(s.entries, st.entries, st.attrs)
		o.ObserveInt64(s.bytes, st.bytes, st.attrs)
	}
	if s.liveSnapshots != nil {
		o.ObserveInt64(s.live, int64(s.liveSnapshots()), s.whoOpt)
	}
	if s.lsmStats != nil {
		if st, ok := s.lsmStats(); ok {
			o.ObserveInt64(s.lookups, st.BlockCacheHits, s.hit)
			o.ObserveInt64(s.lookups, st.BlockCacheMisses, s.miss)
			o.ObserveInt64(s.compactions, st.Compactions, s.whoOpt)
			for i, v := range [...]int64{st.BlockCacheBytes, st.CompactionDebtBytes, st.L0Files, st.L0Sublevels,
				st.ReadAmplification, st.MemTableBytes, st.DiskBytes} {
				o.ObserveInt64(s.lsmGauges[i], v, s.whoOpt)
			}
		}
	}
	return nil
}

// Close unregisters the instruments' callback: once it returns, the
// callback no longer reads the store, which may then be closed. Close is
// idempotent.
func (s *Store) Close() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	return s.reg.Unregister()
}

// Measure wraps snap, a snapshot of the store about to be written for a
// checkpoint, so that the write counts the entries and bytes of each
// state as it scans them: the per-state sizes cost nothing on the store's
// operations and nothing in the synchronous phase, and mean the same on
// every backend — what the checkpoint holds. Hand the result to the
// writer in snap's place (it releases snap when released) and call
// Publish once the write has succeeded. On a nil *Store, Measure returns
// snap itself.
func (s *Store) Measure(snap runtime.Snapshot) runtime.Snapshot {
	if s == nil || snap == nil {
		return snap
	}
	m := &measured{Snapshot: snap, s: s, seq: s.seq.Add(1)}
	specs := snap.States()
	m.names = make([]string, len(specs))
	m.counts = make([]stateCount, len(specs))
	for i, sp := range specs {
		m.names[i] = sp.Name
	}
	return m
}

// measured is a snapshot wrapped by Store.Measure: a runtime.Snapshot
// whose Scans count what they pass, per state. Scans may run on several
// goroutines at once, as the View contract allows.
type measured struct {
	runtime.Snapshot
	s      *Store
	seq    uint64
	names  []string     // the states' names, sorted (View.States)
	counts []stateCount // by state, as names
}

type stateCount struct{ entries, bytes atomic.Int64 }

// Scan implements runtime.View: it scans the wrapped snapshot, counting
// the entries passed to fn and the bytes of their keys, namespaces, user
// keys and values.
func (m *measured) Scan(state string, kg int, fn func(runtime.Entry) error) error {
	i, ok := slices.BinarySearch(m.names, state)
	if !ok {
		return m.Snapshot.Scan(state, kg, fn)
	}
	var n, b int64
	err := m.Snapshot.Scan(state, kg, func(e runtime.Entry) error {
		n++
		b += int64(len(e.Key) + len(e.Namespace) + len(e.UserKey) + len(e.Value))
		return fn(e)
	})
	m.counts[i].entries.Add(n)
	m.counts[i].bytes.Add(b)
	return err
}

// Publish makes the counts of the write that scanned snap — a snapshot
// Measure returned — the store's state sizes, unless a snapshot measured
// after it has been published already. Call it once the write has
// succeeded: a failed or cancelled write counted only part of the states.
// It does nothing for a snapshot Measure did not wrap for s.
func (s *Store) Publish(snap runtime.Snapshot) {
	ms, ok := snap.(*measured)
	if s == nil || !ok || ms.s != s {
		return
	}
	sizes := make([]stateSize, len(ms.names))
	for i, name := range ms.names {
		sizes[i] = stateSize{
			name:    name,
			entries: ms.counts[i].entries.Load(),
			bytes:   ms.counts[i].bytes.Load(),
			attrs:   metric.WithAttributeSet(attribute.NewSet(s.who, attribute.String(AttrState, name))),
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ms.seq > s.published {
		s.published, s.sizes = ms.seq, sizes
	}
}
