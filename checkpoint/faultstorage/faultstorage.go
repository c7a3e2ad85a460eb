package faultstorage

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"syscall"

	"github.com/stategen/stategen/checkpoint"
)

// Op is an operation of a checkpoint.Storage that a Rule can fail.
type Op uint8

// The operations.
const (
	// OpCreate is Storage.Create.
	OpCreate Op = iota + 1
	// OpWrite is ObjectWriter.Write.
	OpWrite
	// OpSync is the first half of ObjectWriter.Commit: making the bytes
	// durable (fsync). A failure aborts the object.
	OpSync
	// OpRename is the second half of ObjectWriter.Commit: publishing the
	// object under its name (a link or rename, the completion of an
	// upload). A failure aborts the object.
	OpRename
	// OpOpen is Storage.Open.
	OpOpen
	// OpRead is ReadAt on an object returned by Open.
	OpRead
	// OpStat is Storage.Stat.
	OpStat
	// OpList is Storage.List.
	OpList
	// OpObjects is Storage.Objects.
	OpObjects
	// OpRemove is Storage.Remove.
	OpRemove
	// OpRemoveIncomplete is Storage.RemoveIncomplete.
	OpRemoveIncomplete
	// OpDelete is Storage.Delete.
	OpDelete

	numOps = iota + 1 // one past the last operation
)

var opNames = [...]string{
	OpCreate:           "create",
	OpWrite:            "write",
	OpSync:             "sync",
	OpRename:           "rename",
	OpOpen:             "open",
	OpRead:             "read",
	OpStat:             "stat",
	OpList:             "list",
	OpObjects:          "objects",
	OpRemove:           "remove",
	OpRemoveIncomplete: "remove-incomplete",
	OpDelete:           "delete",
}

// Ops returns every operation, in order.
func Ops() []Op {
	out := make([]Op, 0, numOps-OpCreate)
	for op := OpCreate; op < numOps; op++ {
		out = append(out, op)
	}
	return out
}

// String returns the operation's name, e.g. "sync".
func (op Op) String() string {
	if op >= OpCreate && op < numOps {
		return opNames[op]
	}
	return fmt.Sprintf("Op(%d)", uint8(op))
}

// ErrInjected is matched by every fault a Storage injects.
var ErrInjected = errors.New("faultstorage: injected fault")

// Error is an injected fault. errors.Is matches it against ErrInjected and
// against Cause (syscall.EIO, syscall.ENOSPC, ...).
type Error struct {
	// Op is the operation that failed.
	Op Op
	// Short reports a Write that wrote some of its bytes before failing.
	Short bool
	// Checkpoint and Object name what the operation was on; either may be
	// empty (List has neither, Delete no object).
	Checkpoint, Object string
	// Call is the number of the failed call among all calls of Op on the
	// Storage, from 1.
	Call int64
	// Cause is the error the fault stands for.
	Cause error
}

// Error describes the fault, e.g. "faultstorage: injected fault: sync of
// chk-00000000000000000002/_metadata (sync call 9): input/output error".
func (e *Error) Error() string {
	what := e.Op.String()
	if e.Short {
		what = "short " + what
	}
	path := e.Checkpoint
	if e.Object != "" {
		path += "/" + e.Object
	}
	if path == "" {
		path = "the storage"
	}
	return fmt.Sprintf("%v: %s of %s (%v call %d): %v", ErrInjected, what, path, e.Op, e.Call, e.Cause)
}

// Unwrap returns ErrInjected and the cause.
func (e *Error) Unwrap() []error { return []error{ErrInjected, e.Cause} }

// Kind is the counter key of the fault: the operation, with "-short" for a
// short write and the cause's errno name for syscall errors other than
// EIO, e.g. "write-short-ENOSPC", "sync", "open".
func (e *Error) Kind() string {
	k := e.Op.String()
	if e.Short {
		k += "-short"
	}
	var errno syscall.Errno
	if errors.As(e.Cause, &errno) && errno != syscall.EIO {
		k += "-" + errnoName(errno)
	}
	return k
}

func errnoName(e syscall.Errno) string {
	switch e {
	case syscall.ENOSPC:
		return "ENOSPC"
	case syscall.EDQUOT:
		return "EDQUOT"
	case syscall.EROFS:
		return "EROFS"
	case syscall.EACCES:
		return "EACCES"
	}
	return fmt.Sprintf("errno%d", uintptr(e))
}

// Rule selects calls of one operation and fails them.
type Rule struct {
	// Op is the operation to fail.
	Op Op
	// Match, if set, selects the calls the rule applies to by checkpoint
	// and object name (both empty for List, the object empty for Objects,
	// RemoveIncomplete and Delete). nil selects every call of Op. It is
	// called under the Storage's lock, for every call of Op: it must not
	// call the Storage.
	Match func(ckpt, object string) bool
	// After is how many selected calls succeed before the rule starts
	// failing them.
	After int64
	// Times bounds the number of calls the rule fails; zero means no
	// bound.
	Times int64
	// Probability, if strictly between 0 and 1, makes each selected call
	// after the first After fail with that probability, drawn from the
	// Storage's seeded source. Otherwise every one fails.
	Probability float64
	// Cause is the error the fault stands for; nil means syscall.EIO. Use
	// syscall.ENOSPC for a full disk.
	Cause error
	// Short makes a failed Write write the first half of its bytes to the
	// wrapped writer before it fails, as a write that fills the disk does.
	Short bool
}

// MatchObject selects calls on objects named name, in any checkpoint.
func MatchObject(name string) func(ckpt, object string) bool {
	return func(_, object string) bool { return object == name }
}

// MatchCheckpoint selects calls on checkpoint ckpt.
func MatchCheckpoint(name string) func(ckpt, object string) bool {
	return func(ckpt, _ string) bool { return ckpt == name }
}

// MatchDataFiles selects calls on the data files of checkpoints: objects
// other than the metadata, in checkpoints other than the coordinator's.
func MatchDataFiles(ckpt, object string) bool {
	return object != "" && object != checkpoint.MetadataName && ckpt != checkpoint.CoordinatorName
}

// MatchMetadata selects calls on checkpoints' metadata objects.
func MatchMetadata(_, object string) bool { return object == checkpoint.MetadataName }

// MatchCheckpoints selects calls on anything but the coordinator's own
// objects (checkpoint.CoordinatorName).
func MatchCheckpoints(ckpt, _ string) bool { return ckpt != checkpoint.CoordinatorName }

// rule is a Rule with its counters.
type rule struct {
	Rule
	seen, failed int64
}

// Storage is a checkpoint.Storage that injects the faults its rules select
// into the calls it passes to the storage it wraps. It is safe for
// concurrent use.
type Storage struct {
	inner checkpoint.Storage

	mu       sync.Mutex
	rng      *rand.Rand
	rules    []*rule
	calls    [numOps]int64
	injected map[string]int64
}

var _ checkpoint.Storage = (*Storage)(nil)

// New wraps inner. seed seeds the random source of probabilistic rules.
func New(inner checkpoint.Storage, seed uint64, rules ...Rule) *Storage {
	s := &Storage{inner: inner, rng: rand.New(rand.NewPCG(seed, 0x5eed)), injected: map[string]int64{}}
	s.SetRules(rules...)
	return s
}

// Inner returns the wrapped storage.
func (s *Storage) Inner() checkpoint.Storage { return s.inner }

// SetRules replaces the rules, with fresh counters; the calls and faults
// counted so far stay.
func (s *Storage) SetRules(rules ...Rule) {
	rs := make([]*rule, len(rules))
	for i, r := range rules {
		rs[i] = &rule{Rule: r}
	}
	s.mu.Lock()
	s.rules = rs
	s.mu.Unlock()
}

// AddRules adds rules to those installed.
func (s *Storage) AddRules(rules ...Rule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rules {
		s.rules = append(s.rules, &rule{Rule: r})
	}
}

// Heal removes every rule: from now on every call goes through.
func (s *Storage) Heal() { s.SetRules() }

// Calls returns the number of calls of op so far, failed ones included.
func (s *Storage) Calls(op Op) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

// Injected returns the number of faults injected so far by kind (see
// Error.Kind).
func (s *Storage) Injected() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.injected)
}

// Total returns the number of faults injected so far.
func (s *Storage) Total() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, v := range s.injected {
		n += v
	}
	return n
}

// check counts a call of op and returns the fault to inject, or nil. The
// first rule that selects the call and decides to fail it wins; every rule
// that selects the call counts it.
func (s *Storage) check(op Op, ckpt, object string) *Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[op]++
	var fault *Error
	for _, r := range s.rules {
		if r.Op != op || (r.Match != nil && !r.Match(ckpt, object)) {
			continue
		}
		r.seen++
		if fault != nil || r.seen <= r.After || (r.Times > 0 && r.failed >= r.Times) {
			continue
		}
		if r.Probability > 0 && r.Probability < 1 && s.rng.Float64() >= r.Probability {
			continue
		}
		r.failed++
		cause := r.Cause
		if cause == nil {
			cause = syscall.EIO
		}
		fault = &Error{Op: op, Short: r.Short && op == OpWrite, Checkpoint: ckpt, Object: object, Call: s.calls[op], Cause: cause}
	}
	if fault != nil {
		s.injected[fault.Kind()]++
	}
	return fault
}

// Create implements checkpoint.Storage.
func (s *Storage) Create(ctx context.Context, ckpt, name string) (checkpoint.ObjectWriter, error) {
	if f := s.check(OpCreate, ckpt, name); f != nil {
		return nil, f
	}
	w, err := s.inner.Create(ctx, ckpt, name)
	if err != nil {
		return nil, err
	}
	return &writer{s: s, w: w, ckpt: ckpt, name: name}, nil
}

type writer struct {
	s          *Storage
	w          checkpoint.ObjectWriter
	ckpt, name string
}

func (w *writer) Write(p []byte) (int, error) {
	f := w.s.check(OpWrite, w.ckpt, w.name)
	if f == nil {
		return w.w.Write(p)
	}
	if !f.Short {
		return 0, f
	}
	n, err := w.w.Write(p[:len(p)/2])
	if err != nil {
		return n, err
	}
	return n, f
}

func (w *writer) Commit() error {
	for _, op := range []Op{OpSync, OpRename} {
		if f := w.s.check(op, w.ckpt, w.name); f != nil {
			_ = w.w.Abort()
			return f
		}
	}
	return w.w.Commit()
}

func (w *writer) Abort() error { return w.w.Abort() }

// Open implements checkpoint.Storage.
func (s *Storage) Open(ctx context.Context, ckpt, name string) (checkpoint.Object, error) {
	if f := s.check(OpOpen, ckpt, name); f != nil {
		return nil, f
	}
	o, err := s.inner.Open(ctx, ckpt, name)
	if err != nil {
		return nil, err
	}
	return &object{Object: o, s: s, ckpt: ckpt, name: name}, nil
}

type object struct {
	checkpoint.Object
	s          *Storage
	ckpt, name string
}

func (o *object) ReadAt(p []byte, off int64) (int, error) {
	if f := o.s.check(OpRead, o.ckpt, o.name); f != nil {
		return 0, f
	}
	return o.Object.ReadAt(p, off)
}

// Stat implements checkpoint.Storage.
func (s *Storage) Stat(ctx context.Context, ckpt, name string) (checkpoint.ObjectInfo, error) {
	if f := s.check(OpStat, ckpt, name); f != nil {
		return checkpoint.ObjectInfo{}, f
	}
	return s.inner.Stat(ctx, ckpt, name)
}

// List implements checkpoint.Storage.
func (s *Storage) List(ctx context.Context) ([]string, error) {
	if f := s.check(OpList, "", ""); f != nil {
		return nil, f
	}
	return s.inner.List(ctx)
}

// Objects implements checkpoint.Storage.
func (s *Storage) Objects(ctx context.Context, ckpt string) ([]checkpoint.ObjectInfo, error) {
	if f := s.check(OpObjects, ckpt, ""); f != nil {
		return nil, f
	}
	return s.inner.Objects(ctx, ckpt)
}

// Remove implements checkpoint.Storage.
func (s *Storage) Remove(ctx context.Context, ckpt, name string) error {
	if f := s.check(OpRemove, ckpt, name); f != nil {
		return f
	}
	return s.inner.Remove(ctx, ckpt, name)
}

// RemoveIncomplete implements checkpoint.Storage.
func (s *Storage) RemoveIncomplete(ctx context.Context, ckpt string) error {
	if f := s.check(OpRemoveIncomplete, ckpt, ""); f != nil {
		return f
	}
	return s.inner.RemoveIncomplete(ctx, ckpt)
}

// Delete implements checkpoint.Storage.
func (s *Storage) Delete(ctx context.Context, ckpt string) error {
	if f := s.check(OpDelete, ckpt, ""); f != nil {
		return f
	}
	return s.inner.Delete(ctx, ckpt)
}
