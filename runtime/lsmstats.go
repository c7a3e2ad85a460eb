package runtime

// LSMStats are the engine statistics of a Store built on a log-structured
// merge tree, such as backends/pebble: what an operator watches to see
// whether the tree keeps up with the writes (compactions, files in level
// 0, read amplification) and whether reads are served from memory (the
// block cache). A Store reports them through the optional method
//
//	LSMStats() (LSMStats, bool)
//
// which must be safe to call from any goroutine at any time, also
// concurrently with the store's operations and after Close (ok is then
// false), and cheap enough to call at every metrics collection: it is
// read by package runtime/coordinator/metrics in an observable
// instrument's callback, never on a Put or Get. Counters (Hits, Misses,
// Compactions) are cumulative since the store was opened.
type LSMStats struct {
	// BlockCacheHits and BlockCacheMisses count the block-cache lookups
	// that found the block, and those that had to read it.
	BlockCacheHits, BlockCacheMisses int64
	// BlockCacheBytes is the size of the blocks in the cache.
	BlockCacheBytes int64
	// Compactions counts the compactions completed.
	Compactions int64
	// CompactionDebtBytes estimates the bytes that must be compacted for
	// the tree to reach a stable shape.
	CompactionDebtBytes int64
	// L0Files is the number of files in level 0, and L0Sublevels the
	// number of its sublevels: many of either slow reads, and an engine
	// stalls writes when they pile up.
	L0Files, L0Sublevels int64
	// ReadAmplification is the number of sorted runs a read may have to
	// consult: the sublevels of level 0 plus the other non-empty levels.
	ReadAmplification int64
	// MemTableBytes is the size of the memtables, flushed or not.
	MemTableBytes int64
	// DiskBytes is the space the store's files take on disk.
	DiskBytes int64
}
