package pebble

import "github.com/stategen/stategen/runtime"

// LSMStats returns a summary of Pebble's metrics of the working directory
// (see runtime.LSMStats): block-cache hits and misses, compactions, the
// files and sublevels of level 0, read amplification, memtable and disk
// sizes. Unlike the store's other methods it may be called from any
// goroutine, concurrently with the store's operations: it reads only
// Pebble's own metrics, under the lock that guards the database's close.
// ok is false once the database is closed (the store and its last
// snapshot).
func (s *Store) LSMStats() (stats runtime.LSMStats, ok bool) {
	h := s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || h.db == nil {
		return runtime.LSMStats{}, false
	}
	m := h.db.Metrics()
	l0 := m.Levels[0]
	return runtime.LSMStats{
		BlockCacheHits:      m.BlockCache.Hits,
		BlockCacheMisses:    m.BlockCache.Misses,
		BlockCacheBytes:     m.BlockCache.Size,
		Compactions:         m.Compact.Count,
		CompactionDebtBytes: int64(min(m.Compact.EstimatedDebt, 1<<63-1)),
		L0Files:             l0.TablesCount,
		L0Sublevels:         int64(l0.Sublevels),
		ReadAmplification:   int64(m.ReadAmp()),
		MemTableBytes:       int64(min(m.MemTable.Size, 1<<63-1)),
		DiskBytes:           int64(min(m.DiskSpaceUsage(), 1<<63-1)),
	}, true
}
