package pebble

import (
	"fmt"
	"log"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stategen/stategen/runtime"
)

// SyncPolicy says how much of the working directory survives a crash. The
// working directory is not the durability mechanism of keyed state —
// checkpoints are: after a crash the job restores its last completed
// checkpoint into a fresh store — so the default writes no write-ahead log
// at all, like Flink's RocksDB backend.
type SyncPolicy uint8

const (
	// SyncNone (the default) disables Pebble's write-ahead log: a write goes
	// to the memtable only and reaches disk when the memtable is flushed.
	// A crash of the process loses the writes of the unflushed memtables;
	// Close flushes them when the directory is kept (Options.Dir set), so a
	// cleanly closed directory can be reused (ReuseExisting).
	SyncNone SyncPolicy = iota
	// SyncWAL writes every write to the write-ahead log without fsync: a
	// crash of the process loses nothing, a crash of the machine loses what
	// the operating system had not written back.
	SyncWAL
	// SyncAlways writes the write-ahead log and fsyncs it on every write:
	// a crash loses nothing, at the cost of a disk flush per operation.
	SyncAlways
)

// String returns the policy's name.
func (p SyncPolicy) String() string {
	switch p {
	case SyncNone:
		return "none"
	case SyncWAL:
		return "wal"
	case SyncAlways:
		return "always"
	}
	return fmt.Sprintf("SyncPolicy(%d)", uint8(p))
}

// ExistingDirPolicy says what New does when Options.Dir already holds
// files.
type ExistingDirPolicy uint8

const (
	// RefuseExisting (the default) makes New fail with ErrDirNotEmpty if the
	// working directory exists and is not empty: a store starts empty and
	// is filled by writes or by Restore from a checkpoint, so leftover files
	// are someone else's data or a crashed run's, and never silently used
	// or deleted.
	RefuseExisting ExistingDirPolicy = iota
	// ReuseExisting opens the store left in the directory by a store of this
	// package that was closed cleanly, with its states and entries. The
	// directory must record the same maxParallelism; key groups it holds
	// outside the new store's range are deleted (range deletions, as a
	// rescaled Flink job clips a reused RocksDB instance). A directory that
	// was not closed cleanly (the process crashed, or still runs) fails
	// with ErrUncleanDir, one that is not a store's with ErrNotStoreDir. An
	// empty or missing directory starts an empty store.
	ReuseExisting
)

// String returns the policy's name.
func (p ExistingDirPolicy) String() string {
	switch p {
	case RefuseExisting:
		return "refuse"
	case ReuseExisting:
		return "reuse"
	}
	return fmt.Sprintf("ExistingDirPolicy(%d)", uint8(p))
}

// Options configures a Store. The zero value of every field means its
// default; New applies the defaults in one place (Options.withDefaults).
type Options struct {
	// StoreConfig is the job's maxParallelism and the key groups the store
	// owns (default: all DefaultMaxParallelism key groups).
	runtime.StoreConfig

	// Dir is the working directory. If empty, New creates a new directory
	// (os.MkdirTemp, or "stategen-pebble" in an in-memory FS) and Close
	// removes it; a directory given here is kept by Close, closed cleanly
	// so that ReuseExisting can open it again.
	Dir string

	// FS is the file system the working directory lives on; default
	// vfs.Default, the operating system's. Tests pass vfs.NewMem(), or set
	// InMemory.
	FS vfs.FS

	// InMemory puts the working directory on a new in-memory file system
	// (vfs.NewMem()) when FS is nil: for tests, and for state that must not
	// touch the disk. Memory use is then not bounded by the block cache.
	InMemory bool

	// BlockCacheSize is the size in bytes of Pebble's block cache; default
	// 64 MiB. It is the store's memory budget: the cache holds uncompressed
	// blocks of sstables, and Pebble charges the memtables against it too
	// (see MemTableSize), so blocks get what the memtables leave.
	BlockCacheSize int64

	// Cache, if set, is a block cache shared with other stores or Pebble
	// databases of the process, instead of one of BlockCacheSize. The store
	// takes its own reference; the caller keeps and releases (Unref) its
	// own.
	Cache *pebbledb.Cache

	// MemTableSize is the size in bytes of a memtable; default an eighth of
	// BlockCacheSize (8 MiB for the default cache), between 1 MiB and
	// 64 MiB. At most three are in memory at once (one being filled, two
	// waiting for their flush: writes stall when a third would wait), and
	// all are charged to the block cache, so New refuses memtables three
	// of which would take all of it. Larger memtables flush less often,
	// into fewer, larger tables.
	MemTableSize uint64

	// Sync is the durability of writes between checkpoints; default
	// SyncNone (see SyncPolicy).
	Sync SyncPolicy

	// BatchSize bounds the pending batch of writes under SyncNone, in
	// bytes of memtable: each write counts its key and value and the
	// ~200 bytes of skiplist node Pebble charges it in a memtable, so a
	// batch of small writes holds fewer bytes of keys and values than
	// BatchSize. A write that would take the batch past it commits the
	// batch first (see "Write batching" in the package doc). Default and
	// most: a quarter of MemTableSize (2 MiB for the default memtables),
	// so that a committed batch is applied to the memtable rather than
	// becoming a memtable of its own (Pebble's threshold is half a
	// memtable). The store holds the pending batch and a copy of the
	// last four batches it committed, so up to five times its key and
	// value bytes on the Go heap. It is ignored with a write-ahead log
	// (SyncWAL, SyncAlways), where every write is committed on its own.
	BatchSize int64

	// KeyFilterSize bounds the memory of the store's filter of the keys
	// its database may hold, in bytes; default 16 MiB; at least 8 KiB, or
	// negative for no filter. A point read of a key the filter does not
	// hold answers "not found" without asking Pebble. The filter starts at
	// 8 KiB and is rebuilt, from scans of the database's keys, for four
	// times as many keys as the database holds (40 bits a live key) each
	// time its keys outgrow it; it is turned off when it would outgrow
	// KeyFilterSize (16 MiB: past 3.3 million live keys; see "The key
	// filter" in the package doc). A store opened on an existing
	// directory builds its first filter from its database, in the
	// background. The memory is the Go heap's, not the block cache's;
	// while a rebuild runs (on a goroutine of its own) the old filter and
	// the new one are both held, with the hashes of the database's keys
	// the rebuild's scan collects (8 bytes a key, within KeyFilterSize: a
	// database of more keys is scanned twice instead) and 8 bytes for
	// each key written meanwhile.
	KeyFilterSize int64

	// Existing is the policy for a working directory that already holds
	// files; default RefuseExisting (see ExistingDirPolicy).
	Existing ExistingDirPolicy

	// Logger receives Pebble's log messages, and the store's own: that
	// its key filter was turned off (Errorf if a rebuild's scan failed,
	// Infof if the filter would outgrow KeyFilterSize). The default drops
	// informational messages and writes errors with the standard log
	// package, prefixed with the working directory. Its Fatalf is never
	// called: a fatal error of Pebble's fails the store (ErrFailed) and
	// reaches Errorf, rather than ending the process.
	Logger pebbledb.Logger

	// OnLeakedSnapshot, if set, is called when a snapshot becomes
	// unreachable without having been released. The store then releases it
	// (so that Pebble stops retaining the versions it pins), but a leak is
	// a bug in the caller: this hook reports it. It runs on a runtime
	// cleanup goroutine and receives the snapshot's sequence number (1 for
	// the store's first snapshot).
	OnLeakedSnapshot func(seq uint64)
}

const (
	defaultBlockCacheSize = 64 << 20
	defaultMemTableSize   = 64 << 20 // the most the default picks: an eighth of a 512 MiB cache
	minMemTableSize       = 1 << 20
	maxMemTableSize       = 4<<30 - 1 // Pebble's limit
	inMemoryDir           = "stategen-pebble"
)

// withDefaults validates o and fills in its defaults (except Dir, which
// New resolves when it creates the directory).
func (o Options) withDefaults() (Options, error) {
	cfg, err := o.StoreConfig.Normalize()
	if err != nil {
		return o, fmt.Errorf("pebble: %w", err)
	}
	o.StoreConfig = cfg
	if o.FS == nil && o.InMemory {
		o.FS = vfs.NewMem()
	}
	switch {
	case o.BlockCacheSize == 0:
		o.BlockCacheSize = defaultBlockCacheSize
	case o.BlockCacheSize < 0:
		return o, fmt.Errorf("pebble: BlockCacheSize %d is negative", o.BlockCacheSize)
	}
	switch {
	case o.MemTableSize == 0 && o.Cache != nil:
		o.MemTableSize = defaultMemTableSize
	case o.MemTableSize == 0:
		o.MemTableSize = uint64(min(max(o.BlockCacheSize/8, minMemTableSize), defaultMemTableSize))
	case o.MemTableSize < minMemTableSize || o.MemTableSize > maxMemTableSize:
		return o, fmt.Errorf("pebble: MemTableSize %d is outside [%d, %d]", o.MemTableSize, minMemTableSize, uint64(maxMemTableSize))
	}
	if o.Cache == nil && memTableStopWrites*o.MemTableSize >= uint64(o.BlockCacheSize) {
		return o, fmt.Errorf("pebble: the %d memtables of MemTableSize %d that writes may fill would take the whole block cache of BlockCacheSize %d, which Pebble charges them to: lower MemTableSize or raise BlockCacheSize",
			memTableStopWrites, o.MemTableSize, o.BlockCacheSize)
	}
	switch {
	case o.BatchSize == 0:
		o.BatchSize = int64(o.MemTableSize / 4)
	case o.BatchSize < 0:
		return o, fmt.Errorf("pebble: BatchSize %d is negative", o.BatchSize)
	case uint64(o.BatchSize) > o.MemTableSize/4:
		return o, fmt.Errorf("pebble: BatchSize %d is more than a quarter of MemTableSize %d: a batch that large would be committed as a memtable of its own; lower BatchSize or raise MemTableSize",
			o.BatchSize, o.MemTableSize)
	}
	switch {
	case o.KeyFilterSize == 0:
		o.KeyFilterSize = defaultKeyFilterSize
	case o.KeyFilterSize < 0:
		o.KeyFilterSize = -1
	case o.KeyFilterSize < minFilterBlocks*64:
		return o, fmt.Errorf("pebble: KeyFilterSize %d is less than the smallest key filter (%d bytes); pass a negative size for no filter",
			o.KeyFilterSize, minFilterBlocks*64)
	}
	if o.Sync > SyncAlways {
		return o, fmt.Errorf("pebble: unknown %v", o.Sync)
	}
	if o.Existing > ReuseExisting {
		return o, fmt.Errorf("pebble: unknown %v", o.Existing)
	}
	return o, nil
}

// PebbleOptions returns the pebble.Options with which New opens the working
// directory for these options: the same cache size, memtable size, merge
// operator, file system and write-ahead-log setting. Tools use it to open a
// working directory with Pebble directly (with Existing ReuseExisting
// semantics: a store's directory must be opened with its merge operator),
// and the benchmarks to give raw Pebble the store's exact configuration.
// The result has no Cache unless Options.Cache is set: Pebble makes one of
// BlockCacheSize and frees it when the database is closed.
func (o Options) PebbleOptions() (*pebbledb.Options, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	return o.pebbleOptions(nil), nil
}

// pebbleOptions returns the pebble.Options of o, which has its defaults,
// for the database of handle h: with h's event listener and logger
// (storeLogger); with neither for a nil h (PebbleOptions).
func (o Options) pebbleOptions(h *handle) *pebbledb.Options {
	var el *pebbledb.EventListener
	if h != nil {
		el = h.listener()
	}
	po := &pebbledb.Options{
		FS:                          o.FS,
		Cache:                       o.Cache,
		CacheSize:                   o.BlockCacheSize,
		MemTableSize:                o.MemTableSize,
		MemTableStopWritesThreshold: memTableStopWrites,
		L0StopWritesThreshold:       l0StopWrites,
		Merger:                      listMerge,
		DisableWAL:                  o.Sync == SyncNone,
		Logger:                      o.Logger,
		EventListener:               el,
		FormatMajorVersion:          pebbledb.FormatNewest,
	}
	// Bloom filters (10 bits per key, ~1% false positives) let a point
	// read skip the tables that cannot hold its key; levels below 0
	// inherit the policy.
	po.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	if po.FS == nil {
		po.FS = vfs.Default
	}
	switch {
	case h != nil:
		po.Logger = storeLogger{h: h, user: o.Logger}
	case po.Logger == nil:
		po.Logger = quietLogger{}
	}
	return po
}

// writeOptions returns the pebble.WriteOptions of policy p.
func writeOptions(p SyncPolicy) *pebbledb.WriteOptions {
	if p == SyncAlways {
		return pebbledb.Sync
	}
	return pebbledb.NoSync
}

// storeLogger is the logger a store gives Pebble. Informational messages
// and errors go to Options.Logger, or by default (quietLogger) errors only,
// to the log package. A fatal error — one Pebble cannot go on from, such
// as a MANIFEST write that fails on a full disk — fails the store: it is
// recorded (writable returns it, so every later write is refused, and
// guard returns it from the call that met it) and logged as an error, and
// Fatalf returns. Pebble's default exits the process, and a panic would
// too when Pebble meets the error on one of its background goroutines, as
// it does in a flush or compaction; Pebble returns the error after Fatalf
// where it can, and the store writes nothing more.
type storeLogger struct {
	h    *handle
	user pebbledb.Logger // Options.Logger, or nil
}

func (l storeLogger) Infof(format string, args ...any) {
	if l.user != nil {
		l.user.Infof(format, args...)
	}
}

func (l storeLogger) Errorf(format string, args ...any) {
	if l.user != nil {
		l.user.Errorf(format, args...)
		return
	}
	quietLogger{}.Errorf(format, args...)
}

func (l storeLogger) Fatalf(format string, args ...any) {
	var err error = newFatalError(format, args...)
	l.h.fatal.CompareAndSwap(nil, &err)
	l.Errorf("working directory %q: %v (the store refuses writes from now on)", l.h.dir, err)
	l.h.noteProgress()
}

// quietLogger is the Logger of PebbleOptions, and storeLogger's default:
// it drops Pebble's informational messages, logs its errors, and panics
// with a fatalError on a fatal one (Pebble's default would exit the
// process).
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}

func (quietLogger) Errorf(format string, args ...any) {
	log.Printf("stategen/pebble: "+format, args...)
}

func (quietLogger) Fatalf(format string, args ...any) {
	panic(newFatalError(format, args...))
}

// fatalError is a fatal error of Pebble's (see storeLogger), and the
// panic value of quietLogger.Fatalf.
type fatalError struct {
	msg  string
	errs []error // the errors among Fatalf's arguments: the cause
}

// newFatalError makes the fatalError of a call Fatalf(format, args...).
func newFatalError(format string, args ...any) fatalError {
	fe := fatalError{msg: fmt.Sprintf(format, args...)}
	for _, a := range args {
		if err, ok := a.(error); ok {
			fe.errs = append(fe.errs, err)
		}
	}
	return fe
}

func (e fatalError) Error() string { return "pebble: fatal: " + e.msg }

// Unwrap returns the cause, so that errors.Is finds, say, ENOSPC.
func (e fatalError) Unwrap() []error { return e.errs }
