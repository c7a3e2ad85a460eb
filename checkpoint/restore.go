package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stategen/stategen/internal/tick"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/schema"
)

// Reader reads a committed checkpoint: its metadata, restore plans, views
// over its files, and restores into stores.
type Reader struct {
	s    Storage
	name string
	meta *Metadata
}

// Open reads and validates the metadata of committed checkpoint ckpt. It
// fails with ErrNotFound if the checkpoint is not committed, and with a
// *FileError wrapping ErrCorrupt or ErrUnsupportedVersion if its metadata
// is bad. It opens no data file: they are read when needed.
func Open(ctx context.Context, s Storage, ckpt string) (*Reader, error) {
	m, err := ReadMetadata(ctx, s, ckpt)
	if err != nil {
		return nil, err
	}
	if err := m.checkCycles(ckpt); err != nil {
		return nil, err
	}
	return &Reader{s: s, name: ckpt, meta: m}, nil
}

// Name returns the checkpoint's name.
func (r *Reader) Name() string { return r.name }

// Metadata returns the checkpoint's metadata. The caller must not modify it.
func (r *Reader) Metadata() *Metadata { return r.meta }

// openFile opens the data file of instance k of operator op, checked
// against the metadata: size, format version and tag, maxParallelism, key
// groups, states and entry count.
func (r *Reader) openFile(ctx context.Context, opIndex int, k int, read *atomic.Int64) (*dataFile, error) {
	in := r.meta.Operators[opIndex].Instances[k]
	return r.openChecked(ctx, opIndex, k, FileRef{Checkpoint: r.name, File: in.File}, fmt.Sprintf("operators[%d].instances[%d].file", opIndex, k), read)
}

// openPart opens the part of a View that instance k serves, key groups
// kgs of it: its file, or its chain (Instance.Base) and its file of
// changes.
func (r *Reader) openPart(ctx context.Context, opIndex, k int, kgs runtime.KeyGroupRange, read *atomic.Int64) (viewPart, error) {
	f, err := r.openFile(ctx, opIndex, k, read)
	if err != nil {
		return viewPart{}, err
	}
	chain, err := r.openChain(ctx, opIndex, k, read)
	if err != nil {
		_ = f.close()
		return viewPart{}, err
	}
	if len(chain) > 0 {
		// The chain's full file first, then its changes, this
		// checkpoint's last.
		chain, f = append(chain[1:], f), chain[0]
	}
	return viewPart{kgs: kgs, file: f, changes: chain}, nil
}

// openChain opens the files of instance k's chain (Instance.Base), in
// order.
func (r *Reader) openChain(ctx context.Context, opIndex int, k int, read *atomic.Int64) ([]*dataFile, error) {
	in := r.meta.Operators[opIndex].Instances[k]
	var files []*dataFile
	for l, ref := range in.Base {
		f, err := r.openChecked(ctx, opIndex, k, ref, fmt.Sprintf("operators[%d].instances[%d].base[%d]", opIndex, k, l), read)
		if err != nil {
			for _, f := range files {
				_ = f.close()
			}
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// openChecked opens file ref of instance k, at metadata field field, and
// checks it against the metadata. Errors about a file of another
// checkpoint (a chain's) name the checkpoint that references it too.
func (r *Reader) openChecked(ctx context.Context, opIndex int, k int, ref FileRef, field string, read *atomic.Int64) (*dataFile, error) {
	op := &r.meta.Operators[opIndex]
	in := op.Instances[k]
	path := ref.Checkpoint + "/" + ref.File.Name
	by := ""
	if ref.Checkpoint != r.name {
		by = "referenced by checkpoint " + r.name + ": "
	}
	obj, err := r.s.Open(ctx, ref.Checkpoint, ref.File.Name)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, &FileError{Path: path, Offset: -1, Field: field + ".name", Err: ErrNotFound,
				Reason: by + "the metadata names a data file that does not exist", Cause: err}
		}
		return nil, err
	}
	if size := obj.Size(); size != ref.File.Size {
		_ = obj.Close()
		return nil, corruptAt(path, min(size, ref.File.Size), "%sthe file is %d bytes, the metadata (%s.size) says %d: truncated or extended",
			by, size, field, ref.File.Size)
	}
	f, err := openDataFile(path, obj, ref.File.Size, read)
	if err != nil {
		_ = obj.Close()
		if fe := (*FileError)(nil); by != "" && errors.As(err, &fe) {
			fe.Reason = by + fe.Reason
		}
		return nil, err
	}
	f.closer, f.by = obj, by
	// reject closes the file and reports it as corrupt at offset, in the
	// metadata's field (the file's entry, or one of its fields).
	reject := func(offset int64, field, reason string) error {
		_ = obj.Close()
		return &FileError{Path: path, Offset: offset, Field: field, Err: ErrCorrupt, Reason: by + reason}
	}
	mismatch := func(format string, args ...any) error {
		return reject(0, field, "the file disagrees with the metadata: "+fmt.Sprintf(format, args...))
	}
	// The tag tells a file of another checkpoint — the same job's previous
	// one, whose file has the same size, key groups, states and entry
	// count and only other values — from this checkpoint's, without
	// reading more than the header.
	if want := dataVersion(r.meta.FormatVersion); int(f.version) != want {
		return nil, reject(8, field, fmt.Sprintf("the file is format version %d, the metadata version %d: the file belongs to another checkpoint",
			f.version, r.meta.FormatVersion))
	}
	if f.tag != ref.File.Tag {
		return nil, reject(24, field+".tag", fmt.Sprintf("the file's tag is %08x, the metadata's %08x: the file belongs to another checkpoint (or was written again)",
			f.tag, ref.File.Tag))
	}
	if f.maxP != op.MaxParallelism || f.kgs != in.KeyGroups {
		return nil, mismatch("maxParallelism %d and key groups %v, the metadata says %d and %v",
			f.maxP, f.kgs, op.MaxParallelism, in.KeyGroups)
	}
	// A chain's earlier files may hold fewer states (registered since),
	// each of the operator's.
	if len(f.states) != len(in.States) && ref.Checkpoint == r.name {
		return nil, mismatch("%d states, the metadata names %d", len(f.states), len(in.States))
	}
	for _, s := range f.states {
		want, ok := op.spec(s.Name)
		// The file's index records no schema: the metadata's, whose hash
		// is the fingerprint, is the one.
		if want.Schema = ""; !ok || !s.Equal(want) {
			return nil, mismatch("state %s, the metadata says %s", s, want)
		}
	}
	if ref.Checkpoint == r.name {
		for i, s := range f.states {
			if s.Name != in.States[i] {
				return nil, mismatch("state %s, the metadata names %s", s.Name, in.States[i])
			}
		}
	}
	// The index counts the entries of every section: a version-1 file of
	// another checkpoint with the same size, key groups and states (swapped
	// in by mistake) usually has another count. Only Verify, which reads
	// the whole file, catches a version-1 file of the same shape.
	var entries int64
	for _, sec := range f.sections {
		entries += sec.entries
	}
	if entries != ref.File.Entries {
		return nil, mismatch("its index counts %d entries, the metadata (%s.entries) %d", entries, field, ref.File.Entries)
	}
	return f, nil
}

// View opens a View over the key groups kgs of operator operator: the files
// of the instances that hold them, each checked against the metadata. kgs
// must lie within the operator's key groups (ErrIncomplete otherwise). ctx
// bounds the View's life: its Scans fail once ctx is done. The caller
// closes the View.
func (r *Reader) View(ctx context.Context, operator string, kgs runtime.KeyGroupRange) (*View, error) {
	opIndex, op, err := r.operator(operator)
	if err != nil {
		return nil, err
	}
	if err := kgs.Validate(op.MaxParallelism); err != nil {
		return nil, fmt.Errorf("checkpoint: %s: operator %q: %w", r.name, operator, err)
	}
	if kgs.Intersect(op.KeyGroups) != kgs {
		return nil, fmt.Errorf("%w: %s: operator %q covers key groups %v, not all of %v",
			ErrIncomplete, r.name, operator, op.KeyGroups, kgs)
	}
	v := &View{ctx: ctx, maxP: op.MaxParallelism, kgs: kgs, states: slices.Clone(op.States), readAhead: DefaultReadAhead}
	for k, in := range op.Instances {
		part := in.KeyGroups.Intersect(kgs)
		if part.Empty() {
			continue
		}
		vp, err := r.openPart(ctx, opIndex, k, part, &v.read)
		if err != nil {
			_ = v.Close()
			return nil, err
		}
		v.parts = append(v.parts, vp)
	}
	return v, nil
}

func (r *Reader) operator(id string) (int, *Operator, error) {
	for i := range r.meta.Operators {
		if r.meta.Operators[i].ID == id {
			return i, &r.meta.Operators[i], nil
		}
	}
	_, err := r.meta.Operator(id)
	return 0, nil, fmt.Errorf("checkpoint: %s: %w", r.name, err)
}

// InstancePlan is what one new operator instance reads to restore a
// checkpoint at a new parallelism: for each old instance's file that holds
// some of its key groups, which of them. The byte offsets of those key
// groups come from each file's index, which the reader loads when it opens
// the file, so that it reads only their blocks.
type InstancePlan struct {
	// Operator is the operator's id.
	Operator string
	// Index and Parallelism identify the new instance.
	Index, Parallelism int
	// KeyGroups is the new instance's range.
	KeyGroups runtime.KeyGroupRange
	// Reads are the files to read, in key-group order; their KeyGroups
	// tile the plan's.
	Reads []FileRead
	// OperatorStates are the operator-state blobs of every old instance, in
	// old-instance order (union redistribution): a source finds its
	// positions among them. Instances without a blob are skipped. They are
	// the operators' own blobs: operator lists (runtime.OperatorList) are
	// not in them, but restored into their handles.
	OperatorStates [][]byte
}

// FileRead is one file of an InstancePlan.
type FileRead struct {
	// Instance is the old instance's index in Operator.Instances.
	Instance int
	// File is the old instance's data file.
	File File
	// KeyGroups are the key groups to read from it.
	KeyGroups runtime.KeyGroupRange
}

// Plan returns the restore plan of each of parallelism new instances of the
// operator. The checkpoint must cover all key groups (ErrIncomplete), and
// parallelism must be in [1, maxParallelism].
func (o *Operator) Plan(parallelism int) ([]InstancePlan, error) {
	if err := runtime.ValidateParallelism(o.MaxParallelism, parallelism); err != nil {
		return nil, fmt.Errorf("checkpoint: operator %q: %w", o.ID, err)
	}
	if err := o.complete(); err != nil {
		return nil, err
	}
	var blobs [][]byte
	for k, in := range o.Instances {
		// The operator's own blobs; its operator lists are restored
		// into their handles (see operatorLists).
		own, _, err := runtime.DecodeOperatorState(in.OperatorState)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: operator %q, instance %d: %w", o.ID, k, err)
		}
		if own != nil {
			blobs = append(blobs, own)
		}
	}
	plans := make([]InstancePlan, parallelism)
	for i := range plans {
		kgs, err := runtime.KeyGroupRangeForOperator(o.MaxParallelism, parallelism, i)
		if err != nil {
			return nil, err
		}
		p := InstancePlan{Operator: o.ID, Index: i, Parallelism: parallelism, KeyGroups: kgs, OperatorStates: blobs}
		for k, in := range o.Instances {
			if part := in.KeyGroups.Intersect(kgs); !part.Empty() {
				p.Reads = append(p.Reads, FileRead{Instance: k, File: in.File, KeyGroups: part})
			}
		}
		plans[i] = p
	}
	return plans, nil
}

// Plan returns the restore plans of the named operator at a new
// parallelism (see Operator.Plan).
func (r *Reader) Plan(operator string, parallelism int) ([]InstancePlan, error) {
	_, op, err := r.operator(operator)
	if err != nil {
		return nil, err
	}
	return op.Plan(parallelism)
}

// UnknownStatePolicy says what a restore does with states of the checkpoint
// that the store has not registered.
type UnknownStatePolicy int

const (
	// KeepUnknownStates restores them: Store.Restore registers them from the
	// checkpoint's descriptors, and the next checkpoint carries them on, as
	// Flink's keyed backends do. Register the states you use before
	// restoring, so that their schemas are checked; a state a new job
	// version dropped survives until a restore with DropUnknownStates.
	KeepUnknownStates UnknownStatePolicy = iota
	// DropUnknownStates leaves them out, like Flink's
	// --allowNonRestoredState: the new job forgets them.
	DropUnknownStates
	// FailOnUnknownStates refuses the restore with ErrUnknownState, naming
	// them: the safe choice when a renamed state would otherwise be lost
	// silently.
	FailOnUnknownStates
)

// String returns the policy's name.
func (p UnknownStatePolicy) String() string {
	switch p {
	case KeepUnknownStates:
		return "keep"
	case DropUnknownStates:
		return "drop"
	case FailOnUnknownStates:
		return "fail"
	}
	return fmt.Sprintf("UnknownStatePolicy(%d)", int(p))
}

// RestoreOptions tune a restore. The zero value, and a nil *RestoreOptions,
// keep unknown states and read ahead DefaultReadAhead blocks.
type RestoreOptions struct {
	// Progress, if not nil, is called about once a second while a
	// Reader.Restore loads the store, from a goroutine of its own, with
	// what it has done so far (a tool shows it on a terminal), and once
	// more when the load ends.
	Progress func(RestoreProgress)

	// UnknownStates is what to do with checkpointed states the store has
	// not registered.
	UnknownStates UnknownStatePolicy
	// ReadAhead is how many blocks of a section (the entries of one state
	// in one key group) the reader reads and checks ahead of the store, on
	// a goroutine of its own, while the store's goroutine decodes and
	// inserts the entries before them; zero means DefaultReadAhead. A
	// negative value turns read-ahead off: the store's goroutine reads as
	// it inserts. Each Scan of a section of several blocks holds
	// ReadAhead+1 blocks.
	ReadAhead int
}

func (o *RestoreOptions) policy() UnknownStatePolicy {
	if o == nil {
		return KeepUnknownStates
	}
	return o.UnknownStates
}

func (o *RestoreOptions) readAhead() (int, error) {
	switch {
	case o == nil || o.ReadAhead == 0:
		return DefaultReadAhead, nil
	case o.ReadAhead < 0:
		return 0, nil
	case o.ReadAhead > MaxReadAhead:
		return 0, fmt.Errorf("checkpoint: ReadAhead %d is more than %d", o.ReadAhead, MaxReadAhead)
	}
	return o.ReadAhead, nil
}

// Migrations says how the states of a checkpoint whose schema changed are
// read under the schemas a store registered, by state name. States that
// did not change are not in it.
type Migrations map[string]Migration

// Migration is how one state of a checkpoint is migrated (see
// Migrations).
type Migration struct {
	// To is the registered spec: what the state is restored as.
	To runtime.StateSpec
	// Changes describes what changed, as schema.Migration.Changes does.
	Changes []string
	// convert rewrites a value; nil if the bytes are kept.
	convert func(dst, src []byte) ([]byte, error)
}

// Rewrites reports whether the state's values are rewritten.
func (m Migration) Rewrites() bool { return m.convert != nil }

// Transcode appends to dst the value src (one value, whole, in the
// checkpoint's encoding) in the registered schema's encoding.
func (m Migration) Transcode(dst, src []byte) ([]byte, error) {
	if m.convert == nil {
		return append(dst, src...), nil
	}
	return m.convert(dst, src)
}

// CheckStates checks the states of a checkpoint against the states a store
// has registered, before any entry is read, and returns how to migrate
// those whose schema changed. A checkpointed state that is registered with
// the same spec (kind, sub-keying, fingerprint) restores as it is. One
// registered with another fingerprint migrates if the checkpoint recorded
// its writer's schema (format version 3), the registered descriptor has a
// schema too, and either the change is compatible (schema.Resolve) or the
// code registered a migration function from the checkpoint's schema, or
// from one it resolves to (the registered spec's Migrations: the //stategen:migrate
// escape hatch for an incompatible change). Otherwise the error wraps
// runtime.ErrStateMismatch and names the state: an incompatible change
// comes as a *schema.IncompatibleError naming the field path and both
// types. Under FailOnUnknownStates every checkpointed state must be
// registered (ErrUnknownState). All problems are reported, joined.
//
// A state given a TTL since the checkpoint has every value stamped with
// the time of the check (the system clock's; Operator.Check uses the
// store's), and one whose TTL was removed has the stamps stripped (see
// runtime.TTL); a TTL only lengthened or shortened needs no conversion:
// the registered one applies to the stamps as they are.
func CheckStates(registered, checkpointed []runtime.StateSpec, unknown UnknownStatePolicy) (Migrations, error) {
	return checkStates(registered, checkpointed, unknown, time.Now())
}

// checkStates is CheckStates at time now.
func checkStates(registered, checkpointed []runtime.StateSpec, unknown UnknownStatePolicy, now time.Time) (Migrations, error) {
	var errs []error
	var missing []string
	var migs Migrations
	for _, c := range checkpointed {
		i := slices.IndexFunc(registered, func(s runtime.StateSpec) bool { return s.Name == c.Name })
		if i < 0 {
			missing = append(missing, c.Name)
			continue
		}
		r := registered[i]
		if runtime.CheckSame(r, c) == nil {
			continue
		}
		m, err := migration(r, c, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("checkpoint: schema check: %w", err))
			continue
		}
		if migs == nil {
			migs = Migrations{}
		}
		migs[c.Name] = m
	}
	if len(missing) > 0 && unknown == FailOnUnknownStates {
		errs = append(errs, fmt.Errorf("%w: %q (register them, or restore with DropUnknownStates or KeepUnknownStates)",
			ErrUnknownState, missing))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return migs, nil
}

// migration resolves the checkpointed spec c against the registered r,
// which differ: in their values' schema, in whether they have a TTL, or
// both.
func migration(r, c runtime.StateSpec, now time.Time) (Migration, error) {
	m := Migration{To: r}
	if r.Fingerprint != c.Fingerprint || r.Kind != c.Kind || r.SubKeyed != c.SubKeyed {
		var err error
		if m, err = valueMigration(r, c); err != nil {
			return Migration{}, err
		}
	}
	if (r.TTL != 0) == (c.TTL != 0) {
		if c.TTL != 0 && m.convert != nil {
			// The values' stamps stay; the values behind them migrate.
			convert := m.convert
			m.convert = func(dst, src []byte) ([]byte, error) {
				stamp, v, err := runtime.SplitTTLStamp(src)
				if err != nil {
					return dst, err
				}
				return convert(runtime.AppendTTLStamp(dst, stamp), v)
			}
		}
		return m, nil
	}
	convert := m.convert
	if convert == nil {
		convert = func(dst, src []byte) ([]byte, error) { return append(dst, src...), nil }
	}
	if c.TTL != 0 {
		m.Changes = append(m.Changes, fmt.Sprintf("TTL of %v removed: the values' stamps are dropped and they no longer expire", c.TTL))
		m.convert = func(dst, src []byte) ([]byte, error) {
			_, v, err := runtime.SplitTTLStamp(src)
			if err != nil {
				return dst, err
			}
			return convert(dst, v)
		}
		return m, nil
	}
	stamp := now.UnixMilli()
	m.Changes = append(m.Changes, fmt.Sprintf("TTL of %v added: every value is stamped with the restore's time, %s", r.TTL, now.UTC().Format(time.RFC3339)))
	m.convert = func(dst, src []byte) ([]byte, error) {
		return convert(runtime.AppendTTLStamp(dst, stamp), src)
	}
	return m, nil
}

// valueMigration is the part of migration that converts the values of c
// into r's schema, which differ.
func valueMigration(r, c runtime.StateSpec) (Migration, error) {
	mismatch := runtime.CheckSame(r, runtime.StateSpec{Name: c.Name, Kind: c.Kind, SubKeyed: c.SubKeyed, Fingerprint: c.Fingerprint, Schema: c.Schema, TTL: r.TTL})
	switch {
	case c.Schema == "":
		return Migration{}, fmt.Errorf("%w; the checkpoint records no schema of it (written before format version 3, or by a hand-written descriptor), so its fingerprint must match", mismatch)
	case r.Schema == "":
		return Migration{}, fmt.Errorf("%w; the registered descriptor has no schema to migrate to", mismatch)
	}
	from, err := schema.Parse(c.Schema)
	if err != nil {
		return Migration{}, fmt.Errorf("%w: state %q: the checkpoint's schema: %w", ErrCorrupt, c.Name, err)
	}
	to, err := schema.Parse(r.Schema)
	if err != nil {
		return Migration{}, fmt.Errorf("%w: state %q: the registered schema: %w", runtime.ErrInvalidState, r.Name, err)
	}
	m, rerr := schema.Resolve(from, to)
	if rerr == nil {
		out := Migration{To: r, Changes: m.Changes}
		if m.Rewrites() {
			out.convert = m.Transcode
		}
		return out, nil
	}
	// The escape hatch: a migration function from the checkpoint's
	// schema, or from one the checkpoint's resolves to.
	for _, um := range r.Migrations {
		ufrom, err := schema.Parse(um.From)
		if err != nil {
			return Migration{}, fmt.Errorf("%w: state %q: the schema of a migration function: %w", runtime.ErrInvalidState, r.Name, err)
		}
		if schema.CheckKeys(ufrom, to) != nil {
			continue
		}
		pre, err := schema.Resolve(from, ufrom)
		if err != nil {
			continue
		}
		out := Migration{To: r, Changes: append(slices.Clone(pre.Changes),
			"value: converted by the code's migration function from "+ufrom.Value.String())}
		if pre.Verdict == schema.Unchanged {
			out.Changes = out.Changes[len(out.Changes)-1:]
		}
		convert := um.Convert
		if pre.Rewrites() {
			// Scans of several key groups may run at once: each takes a
			// scratch buffer of its own.
			scratch := sync.Pool{New: func() any { return new([]byte) }}
			convert = func(dst, src []byte) ([]byte, error) {
				bp := scratch.Get().(*[]byte)
				defer scratch.Put(bp)
				b, err := pre.Transcode((*bp)[:0], src)
				*bp = b
				if err != nil {
					return dst, err
				}
				return um.Convert(dst, b)
			}
		}
		out.convert = convert
		return out, nil
	}
	return Migration{}, fmt.Errorf("state %q cannot be restored with the code's types: %w", c.Name, rerr)
}

// Check checks that a store with configuration cfg and registered states
// can restore the operator: same maxParallelism (runtime.ErrMaxParallelismMismatch
// otherwise) and CheckStates, whose migrations it returns.
func (o *Operator) Check(cfg runtime.StoreConfig, registered []runtime.StateSpec, unknown UnknownStatePolicy) (Migrations, error) {
	if cfg.MaxParallelism != o.MaxParallelism {
		return nil, fmt.Errorf("%w: operator %q was checkpointed with maxParallelism %d, the store has %d",
			runtime.ErrMaxParallelismMismatch, o.ID, o.MaxParallelism, cfg.MaxParallelism)
	}
	return checkStates(registered, o.States, unknown, cfg.Now())
}

// RestoreProgress is how far a restore has got.
type RestoreProgress struct {
	// Entries counts the entries loaded so far, of TotalEntries (from
	// the files' indexes).
	Entries, TotalEntries int64
	// BytesRead counts the bytes read from the data files so far.
	BytesRead int64
	// Files is the number of data files the restore reads.
	Files int
	// Elapsed is the time since the restore began.
	Elapsed time.Duration
}

// RestoreStats describes a restore.
type RestoreStats struct {
	// Files is the number of data files read.
	Files int
	// BytesRead counts the bytes read from them.
	BytesRead int64
	// Entries counts the entries restored.
	Entries int64
	// Duration is the restore's wall time.
	Duration time.Duration
	// Migrated names the states whose schema changed since the checkpoint
	// and that were migrated to the registered schema (CheckStates), with
	// what changed.
	Migrated map[string][]string
}

// Restore restores plan — one new instance's share of the checkpoint — into
// store, which must own exactly plan.KeyGroups with the checkpoint's
// maxParallelism and be empty in them. Before it reads any entry, Restore
// checks the maxParallelism (runtime.ErrMaxParallelismMismatch), the
// schemas and unknown states (CheckStates, under opts' policy), and opens
// every file of the plan, checking it against the metadata, so that a
// missing, truncated or mismatched file fails the restore before the store
// changes. It then calls store.Restore once per file with a View of the
// plan's key groups in it. A corrupt block met during that phase fails the
// restore with a *FileError; the store's content is then unspecified and
// it must be discarded (see runtime.Store.Restore).
func (r *Reader) Restore(ctx context.Context, plan InstancePlan, store runtime.Store, opts *RestoreOptions) (stats RestoreStats, err error) {
	t0 := time.Now()
	opIndex, op, err := r.operator(plan.Operator)
	if err != nil {
		return stats, err
	}
	cfg := store.Config()
	policy := opts.policy()
	if policy < KeepUnknownStates || policy > FailOnUnknownStates {
		return stats, fmt.Errorf("checkpoint: restore %s: invalid %v", r.name, policy)
	}
	readAhead, err := opts.readAhead()
	if err != nil {
		return stats, err
	}
	migs, err := op.Check(cfg, store.States(), policy)
	if err != nil {
		return stats, fmt.Errorf("checkpoint: restore %s: %w", r.name, err)
	}
	restoreLists, err := op.operatorLists(store, plan.Index, plan.Parallelism, policy)
	if err != nil {
		return stats, fmt.Errorf("checkpoint: restore %s: %w", r.name, err)
	}
	if cfg.KeyGroups != plan.KeyGroups {
		return stats, fmt.Errorf("%w: checkpoint: restore %s: the store owns key groups %v, the plan restores %v",
			runtime.ErrInvalidKeyGroup, r.name, cfg.KeyGroups, plan.KeyGroups)
	}
	// The plan may have travelled: check that its reads tile its key
	// groups with the checkpoint's files.
	next := plan.KeyGroups.Start
	for _, rd := range plan.Reads {
		if rd.Instance < 0 || rd.Instance >= len(op.Instances) || op.Instances[rd.Instance].File != rd.File ||
			rd.KeyGroups.Start != next || rd.KeyGroups.Intersect(op.Instances[rd.Instance].KeyGroups) != rd.KeyGroups || rd.KeyGroups.Empty() {
			return stats, fmt.Errorf("%w: checkpoint: restore %s: the plan's read of %q for key groups %v does not match the checkpoint",
				ErrIncomplete, r.name, rd.File.Name, rd.KeyGroups)
		}
		next = rd.KeyGroups.End
	}
	if next != plan.KeyGroups.End {
		return stats, fmt.Errorf("%w: checkpoint: restore %s: the plan's reads end at key group %d, not %d",
			ErrIncomplete, r.name, next, plan.KeyGroups.End)
	}
	states := slices.Clone(op.States)
	if policy == DropUnknownStates {
		reg := store.States()
		states = slices.DeleteFunc(states, func(s runtime.StateSpec) bool {
			return !slices.ContainsFunc(reg, func(x runtime.StateSpec) bool { return x.Name == s.Name })
		})
	}
	// Migrated states are restored as the store registered them.
	for i, s := range states {
		if m, ok := migs[s.Name]; ok {
			states[i] = m.To
			if stats.Migrated == nil {
				stats.Migrated = map[string][]string{}
			}
			stats.Migrated[s.Name] = m.Changes
		}
	}
	views := make([]*View, 0, len(plan.Reads))
	var entries atomic.Int64
	defer func() {
		for _, v := range views {
			stats.BytesRead += v.BytesRead()
			_ = v.Close()
		}
		stats.Entries = entries.Load()
		stats.Duration = time.Since(t0)
	}()
	for _, rd := range plan.Reads {
		v := &View{ctx: ctx, maxP: op.MaxParallelism, kgs: rd.KeyGroups, states: slices.Clone(op.States), readAhead: readAhead}
		vp, err := r.openPart(ctx, opIndex, rd.Instance, rd.KeyGroups, &v.read)
		if err != nil {
			return stats, err
		}
		v.parts = []viewPart{vp}
		views = append(views, v)
	}
	stats.Files = len(views)
	if opts != nil && opts.Progress != nil {
		stop := reportRestore(opts.Progress, views, states, &entries, t0)
		defer stop()
	}
	for _, v := range views {
		fv := &filteredView{View: v, states: states, migrations: migs, entries: &entries}
		if err := store.Restore(fv); err != nil {
			return stats, fmt.Errorf("checkpoint: restore %s: %w", r.name, err)
		}
	}
	if err := restoreLists(); err != nil {
		return stats, fmt.Errorf("checkpoint: restore %s: %w", r.name, err)
	}
	return stats, nil
}

// reportRestore calls progress about once a second, on a goroutine of its
// own, until the function it returns is called, which reports once more
// and waits for the goroutine.
func reportRestore(progress func(RestoreProgress), views []*View, states []runtime.StateSpec, entries *atomic.Int64, t0 time.Time) func() {
	var total int64
	for _, v := range views {
		for _, s := range states {
			for kg := range v.kgs.All() {
				n, _ := v.Entries(s.Name, kg)
				total += n
			}
		}
	}
	now := func() RestoreProgress {
		p := RestoreProgress{Entries: entries.Load(), TotalEntries: total, Files: len(views), Elapsed: time.Since(t0)}
		for _, v := range views {
			p.BytesRead += v.BytesRead()
		}
		return p
	}
	return tick.Every(time.Second, func() { progress(now()) })
}

// operatorLists checks the operator lists (runtime.OperatorList,
// runtime.UnionList) in the operator-state blobs of o's instances against
// those bound to store, and returns the function that restores, into each
// bound list, its share for new instance index of parallelism (its origin
// kept). A list in the checkpoint that is bound as the other mode or with
// another fingerprint fails (runtime.ErrStateMismatch: operator lists do
// not migrate); one that no handle binds fails too, unless policy is
// DropUnknownStates — it cannot be kept, as it lives in its handle.
func (o *Operator) operatorLists(store runtime.Store, index, parallelism int, policy UnknownStatePolicy) (func() error, error) {
	bound := runtime.OperatorLists(store)
	type found struct {
		spec  runtime.OperatorListSpec
		lists [][]runtime.OriginElement // by old instance
	}
	byName := map[string]*found{}
	var names []string
	for k, in := range o.Instances {
		_, lists, err := runtime.DecodeOperatorState(in.OperatorState)
		if err != nil {
			return nil, fmt.Errorf("operator %q, instance %d: %w", o.ID, k, err)
		}
		for _, l := range lists {
			f := byName[l.Name]
			if f == nil {
				f = &found{spec: l.OperatorListSpec, lists: make([][]runtime.OriginElement, len(o.Instances))}
				byName[l.Name] = f
				names = append(names, l.Name)
			} else if f.spec != l.OperatorListSpec {
				return nil, fmt.Errorf("%w: operator %q: instances disagree on operator list %q", ErrCorrupt, o.ID, l.Name)
			}
			for _, e := range l.Elements {
				f.lists[k] = append(f.lists[k], runtime.OriginElement{Origin: k, Data: e})
			}
		}
	}
	slices.Sort(names)
	var apply []func() error
	var errs []error
	for _, name := range names {
		f := byName[name]
		i := slices.IndexFunc(bound, func(b runtime.OperatorListSpec) bool { return b.Name == name })
		if i < 0 {
			if policy != DropUnknownStates {
				errs = append(errs, fmt.Errorf("%w: operator %q: the checkpoint holds operator list %q, which no handle of the store binds (bind it before the restore, or restore with DropUnknownStates)",
					ErrUnknownState, o.ID, name))
			}
			continue
		}
		b := bound[i]
		switch {
		case b.Union != f.spec.Union:
			errs = append(errs, fmt.Errorf("%w: operator list %q: checkpointed as %s, bound as %s",
				runtime.ErrStateMismatch, name, listMode(f.spec.Union), listMode(b.Union)))
			continue
		case b.Fingerprint != f.spec.Fingerprint:
			errs = append(errs, fmt.Errorf("%w: operator list %q: checkpointed with fingerprint %q, bound with %q (operator lists do not migrate)",
				runtime.ErrStateMismatch, name, f.spec.Fingerprint, b.Fingerprint))
			continue
		}
		share := runtime.SplitOperatorList(f.spec.Union, f.lists, index, parallelism)
		apply = append(apply, func() error { return runtime.RestoreOperatorList(store, name, share) })
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return func() error {
		for _, fn := range apply {
			if err := fn(); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

func listMode(union bool) string {
	if union {
		return "a union list"
	}
	return "an even-split list"
}

// Restore opens checkpoint ckpt of s and restores the share of instance
// index of parallelism of the named operator into store (see Reader.Plan
// and Reader.Restore).
func Restore(ctx context.Context, s Storage, ckpt, operator string, index, parallelism int, store runtime.Store, opts *RestoreOptions) (RestoreStats, error) {
	r, err := Open(ctx, s, ckpt)
	if err != nil {
		return RestoreStats{}, err
	}
	plans, err := r.Plan(operator, parallelism)
	if err != nil {
		return RestoreStats{}, err
	}
	if index < 0 || index >= len(plans) {
		return RestoreStats{}, fmt.Errorf("%w: instance index %d is outside [0, %d)", runtime.ErrInvalidParallelism, index, parallelism)
	}
	return r.Restore(ctx, plans[index], store, opts)
}

// Verify reads every data file of the checkpoint completely and checks
// everything: sizes and whole-file CRC32C against the metadata, headers,
// indexes, every block's checksum and every entry's encoding. It returns
// the first problem found.
func (r *Reader) Verify(ctx context.Context) error {
	for i, op := range r.meta.Operators {
		for k, in := range op.Instances {
			field := fmt.Sprintf("operators[%d].instances[%d]", i, k)
			for l, ref := range in.Base {
				if err := r.verifyFile(ctx, i, k, ref, fmt.Sprintf("%s.base[%d]", field, l)); err != nil {
					return err
				}
			}
			if err := r.verifyFile(ctx, i, k, FileRef{Checkpoint: r.name, File: in.File}, field+".file"); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *Reader) verifyFile(ctx context.Context, opIndex, k int, ref FileRef, field string) error {
	var read atomic.Int64
	f, err := r.openChecked(ctx, opIndex, k, ref, field, &read)
	if err != nil {
		return err
	}
	defer f.close()
	return f.annotate(r.verifyOpen(ctx, f, ref))
}

// verifyOpen is verifyFile of the open file f.
func (r *Reader) verifyOpen(ctx context.Context, f *dataFile, ref FileRef) error {
	file := ref.File
	path := ref.Checkpoint + "/" + file.Name
	crc := uint32(0)
	buf := make([]byte, min(f.size, 1<<20))
	for off := int64(0); off < f.size; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := int(min(int64(len(buf)), f.size-off))
		if err := f.readAt(buf[:n], off); err != nil {
			return err
		}
		crc = crc32.Update(crc, castagnoli, buf[:n])
		off += int64(n)
	}
	// A damaged byte fails the whole-file checksum; the checksums of the
	// blocks then say where it is, so they are checked first.
	var entries int64
	count := func(runtime.Entry) error { return nil }
	for kg := range f.kgs.All() {
		for _, s := range f.states {
			n, err := f.scan(ctx, s.Name, kg, 0, count)
			if err != nil {
				return err
			}
			entries += n
		}
	}
	if crc != file.CRC32C {
		return corruptAt(path, -1, "file checksum mismatch (metadata %08x, computed %08x), though every header, index and block checksum holds: the file is not the one the checkpoint wrote", file.CRC32C, crc)
	}
	if entries != file.Entries {
		return corruptAt(path, -1, "the file holds %d entries, the metadata says %d", entries, file.Entries)
	}
	return nil
}
