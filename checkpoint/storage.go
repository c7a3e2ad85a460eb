package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// Storage is where checkpoints live: a flat namespace of checkpoints, each a
// set of immutable objects. It is the shape of an object store (S3 and its
// kin) as much as of a directory: a checkpoint is a key prefix, an object is
// written once and becomes visible atomically when its writer commits, and
// nothing is ever renamed or modified in place. The commit protocol of a
// whole checkpoint — data objects first, the metadata object (MetadataName)
// last — is built on top of it by this package (see List, Delete, Cleanup
// and Commit), so an implementation only has to get single objects right.
//
// Checkpoint and object names are single path elements (see ValidateName).
// Names beginning with '.' are reserved for an implementation's own
// temporary objects and never appear in listings.
//
// Implementations are safe for concurrent use by several goroutines. Dir is
// the local-directory implementation and Mem an in-memory one for tests;
// package checkpoint/storagetest holds the conformance tests every
// implementation runs.
type Storage interface {
	// Create starts writing object name of checkpoint ckpt. The object is
	// invisible to Open, Stat and Objects until the writer's Commit returns
	// nil, and never visible if the writer is aborted or its process dies.
	// Create fails with ErrExist if the object is already committed; Commit
	// fails with ErrExist if another writer committed it meanwhile. ctx
	// governs the whole write: once it is done, Write and Commit fail.
	Create(ctx context.Context, ckpt, name string) (ObjectWriter, error)

	// Open opens a committed object for reading. It fails with an error
	// wrapping ErrNotFound if the object does not exist.
	Open(ctx context.Context, ckpt, name string) (Object, error)

	// Stat describes a committed object, or fails with ErrNotFound.
	Stat(ctx context.Context, ckpt, name string) (ObjectInfo, error)

	// List returns, sorted, the names of every checkpoint that holds
	// anything: committed objects or writes not yet committed (which
	// includes the debris of crashed writers). Whether a checkpoint is
	// committed is for the caller to decide: see the package-level List.
	List(ctx context.Context) ([]string, error)

	// Objects returns the committed objects of ckpt sorted by name; an
	// unknown checkpoint has none.
	Objects(ctx context.Context, ckpt string) ([]ObjectInfo, error)

	// Remove durably removes one committed object. Removing an object that
	// does not exist is not an error.
	Remove(ctx context.Context, ckpt, name string) error

	// RemoveIncomplete discards the uncommitted writes of ckpt (temporary
	// files, unfinished multipart uploads). Writers still running lose
	// their data: call it only for checkpoints nobody is writing.
	RemoveIncomplete(ctx context.Context, ckpt string) error

	// Delete removes ckpt entirely: its objects, its uncommitted writes and
	// the checkpoint itself. Deleting an unknown checkpoint is not an
	// error. Delete does not order its removals; the package-level Delete
	// removes the metadata first so that a crash cannot leave a committed
	// checkpoint with missing files.
	Delete(ctx context.Context, ckpt string) error
}

// ObjectWriter writes one object. Exactly one of Commit and Abort takes
// effect; calling Abort after Commit, or either twice, is harmless.
type ObjectWriter interface {
	io.Writer
	// Commit makes the object durable and visible, atomically. If it fails,
	// the object is not visible and the writer is aborted.
	Commit() error
	// Abort discards what was written. After a successful Commit it does
	// nothing and returns nil.
	Abort() error
}

// Object is a committed object opened for reading. As io.ReaderAt
// requires, ReadAt may be called from several goroutines at once: the
// reader scans several sections of one file in parallel, and reads ahead.
type Object interface {
	io.ReaderAt
	// Size returns the object's length in bytes.
	Size() int64
	// Close releases the object.
	Close() error
}

// ObjectInfo describes a committed object.
type ObjectInfo struct {
	Name string // the object's name within its checkpoint
	Size int64  // length in bytes
}

// MetadataName is the name of the object that commits a checkpoint: a
// checkpoint exists exactly when this object does, and it is written after
// every data object it names.
const MetadataName = "_metadata"

// CoordinatorName is the checkpoint name reserved for the checkpoint
// coordinator's own objects, such as its durable checkpoint-id counter
// (package runtime/coordinator/driver). It is never a checkpoint: it has no
// metadata, List does not show it, and Cleanup leaves it alone. It is a
// valid name, so that every Storage can hold it; do not use it for a
// checkpoint or savepoint.
const CoordinatorName = "_coordinator"

// MaxNameLen bounds the length of checkpoint, object and operator names.
const MaxNameLen = 200

// ValidateName reports whether name can name a checkpoint, an object or an
// operator: non-empty UTF-8 of at most MaxNameLen bytes, without '/', '\\',
// NUL or other control characters, not "." or "..", and not beginning with
// '.' (reserved for temporary objects). Such a name is one path element on
// every file system and object store. The error wraps ErrInvalidName.
func ValidateName(name string) error {
	bad := func(why string) error { return fmt.Errorf("%w: %q %s", ErrInvalidName, name, why) }
	switch {
	case name == "":
		return bad("is empty")
	case len(name) > MaxNameLen:
		return bad(fmt.Sprintf("is longer than %d bytes", MaxNameLen))
	case !utf8.ValidString(name):
		return bad("is not valid UTF-8")
	case name[0] == '.':
		return bad("begins with '.'")
	case strings.ContainsAny(name, `/\`):
		return bad("contains a path separator")
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return bad("contains a control character")
		}
	}
	return nil
}

// List returns the names of the committed checkpoints in s — those whose
// metadata object exists — sorted by name. Use CheckpointName and
// ParseCheckpointName to order them by id.
func List(ctx context.Context, s Storage) ([]string, error) {
	all, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ckpt := range all {
		committed, err := isCommitted(ctx, s, ckpt)
		if err != nil {
			return nil, err
		}
		if committed {
			out = append(out, ckpt)
		}
	}
	return out, nil
}

func isCommitted(ctx context.Context, s Storage, ckpt string) (bool, error) {
	_, err := s.Stat(ctx, ckpt, MetadataName)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNotFound):
		return false, nil
	default:
		return false, err
	}
}

// Delete removes checkpoint ckpt from s. It first removes the metadata,
// which un-commits the checkpoint, and only then its other objects, so that
// an interrupted Delete leaves debris for Cleanup rather than a committed
// checkpoint with missing files. Deleting an unknown checkpoint is not an
// error.
//
// Files of ckpt that another committed checkpoint references (an
// incremental checkpoint's chain, Instance.Base) stay where they are, and
// ckpt keeps them, without metadata, until the last checkpoint that
// references them is deleted; that Delete removes them. Which files are
// referenced is read from the metadata of every committed checkpoint, so
// it holds after any restart; if one cannot be read (an I/O error; a
// corrupt one references nothing), Delete fails before it removes
// anything. Deletes may run at once: each reads the references again
// once ckpt is un-committed, so that the last of them removes the files
// only the deleted checkpoints referenced. A checkpoint being written
// that references ckpt's files is not committed and so not seen: do not
// delete a checkpoint while a chain that may reference it is being
// written (the coordinator deletes only checkpoints that a completed one
// subsumes).
func Delete(ctx context.Context, s Storage, ckpt string) error {
	if err := ValidateName(ckpt); err != nil {
		return err
	}
	var owners []string // checkpoints whose files ckpt references
	if m, err := ReadMetadata(ctx, s, ckpt); err == nil {
		for _, ref := range m.refs() {
			owner, _, _ := strings.Cut(ref, "/")
			if !slices.Contains(owners, owner) {
				owners = append(owners, owner)
			}
		}
	}
	// Read every reference first, so that a Delete that cannot tell what
	// is referenced fails before it removes anything.
	if _, err := references(ctx, s, ckpt); err != nil {
		return fmt.Errorf("checkpoint: delete %s: %w", ckpt, err)
	}
	if err := s.Remove(ctx, ckpt, MetadataName); err != nil {
		return fmt.Errorf("checkpoint: delete %s: %w", ckpt, err)
	}
	// And again once ckpt is un-committed: two Deletes that run at once
	// (the coordinator's housekeeping) would otherwise each keep the
	// files the other references, read while both were committed, and
	// leave them behind for good. Read after its own metadata is gone, the
	// later of the two sees neither checkpoint and removes what only they
	// referenced.
	refs, err := references(ctx, s, ckpt)
	if err != nil {
		return fmt.Errorf("checkpoint: delete %s: %w", ckpt, err)
	}
	if _, err := sweep(ctx, s, ckpt, refs[ckpt]); err != nil {
		return fmt.Errorf("checkpoint: delete %s: %w", ckpt, err)
	}
	// The files ckpt referenced may have been the last references to an
	// uncommitted owner's.
	for _, owner := range owners {
		committed, err := isCommitted(ctx, s, owner)
		if err == nil && !committed {
			_, err = sweep(ctx, s, owner, refs[owner])
		}
		if err != nil {
			return fmt.Errorf("checkpoint: delete %s: files it referenced in %s: %w", ckpt, owner, err)
		}
	}
	return nil
}

// references returns, by owning checkpoint, the names of the files that
// committed checkpoints other than except reference in their chains.
func references(ctx context.Context, s Storage, except string) (map[string]map[string]bool, error) {
	all, err := List(ctx, s)
	if err != nil {
		return nil, err
	}
	refs := make(map[string]map[string]bool)
	for _, ckpt := range all {
		if ckpt == except || ckpt == CoordinatorName {
			continue
		}
		m, err := ReadMetadata(ctx, s, ckpt)
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrCorrupt) {
			// Deleted since List, or metadata no restore can read: it
			// references nothing. Any other error (a failed read) may
			// pass, and leaves the question open.
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cannot tell which files %s references: %w", ckpt, err)
		}
		for _, ref := range m.refs() {
			owner, name, _ := strings.Cut(ref, "/")
			if refs[owner] == nil {
				refs[owner] = make(map[string]bool)
			}
			refs[owner][name] = true
		}
	}
	return refs, nil
}

// sweep removes the objects of uncommitted checkpoint ckpt but those in
// keep, and its uncommitted writes; with nothing to keep it deletes ckpt
// entirely. It returns what it removed, as Cleanup does.
func sweep(ctx context.Context, s Storage, ckpt string, keep map[string]bool) ([]string, error) {
	if len(keep) == 0 {
		if err := s.Delete(ctx, ckpt); err != nil {
			return nil, err
		}
		return []string{ckpt}, nil
	}
	if err := s.RemoveIncomplete(ctx, ckpt); err != nil {
		return nil, err
	}
	objs, err := s.Objects(ctx, ckpt)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, o := range objs {
		if keep[o.Name] {
			continue
		}
		if err := s.Remove(ctx, ckpt, o.Name); err != nil {
			return removed, err
		}
		removed = append(removed, ckpt+"/"+o.Name)
	}
	return removed, nil
}

// Cleanup removes the debris a crash can leave in s: uncommitted writes
// (temporary files) everywhere, checkpoints without committed metadata, and
// objects of committed checkpoints that their metadata does not name (files
// of a participant that acknowledged too late). It returns what it removed,
// as "<checkpoint>" for whole checkpoints and "<checkpoint>/<object>" for
// single objects. Files that a committed checkpoint references in its
// chain (Instance.Base) are never debris, whether or not the checkpoint
// that owns them is still committed (see Delete); if the metadata of a
// committed checkpoint cannot be read, what it references is unknown, and
// Cleanup removes no checkpoint without metadata.
//
// Checkpoints being written look like debris. Run Cleanup when nothing
// writes to s — when a coordinator starts — or pass inProgress, which
// reports the checkpoints that must be left alone; nil means none. The
// coordinator's reserved name (CoordinatorName) is always left alone.
// Committed checkpoints whose metadata cannot be read are left alone and
// reported in the error, which joins every problem met.
func Cleanup(ctx context.Context, s Storage, inProgress func(ckpt string) bool) ([]string, error) {
	all, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	refs, rerr := references(ctx, s, "")
	if rerr != nil {
		errs = append(errs, fmt.Errorf("checkpoint: cleanup removed no checkpoint without metadata: %w", rerr))
	}
	for _, ckpt := range all {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		if ckpt == CoordinatorName || inProgress != nil && inProgress(ckpt) {
			continue
		}
		committed, err := isCommitted(ctx, s, ckpt)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !committed {
			if rerr != nil {
				continue
			}
			swept, err := sweep(ctx, s, ckpt, refs[ckpt])
			removed = append(removed, swept...)
			if err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if err := s.RemoveIncomplete(ctx, ckpt); err != nil {
			errs = append(errs, err)
			continue
		}
		m, err := ReadMetadata(ctx, s, ckpt)
		if err != nil {
			errs = append(errs, fmt.Errorf("checkpoint: cleanup left %s alone: %w", ckpt, err))
			continue
		}
		named := m.fileNames()
		objs, err := s.Objects(ctx, ckpt)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, o := range objs {
			if o.Name == MetadataName || slices.Contains(named, o.Name) || refs[ckpt][o.Name] {
				continue
			}
			if err := s.Remove(ctx, ckpt, o.Name); err != nil {
				errs = append(errs, err)
				continue
			}
			removed = append(removed, ckpt+"/"+o.Name)
		}
	}
	return removed, errors.Join(errs...)
}

// CheckpointName returns the conventional name of checkpoint id: "chk-" and
// the id in 20 decimal digits, so that names sort like ids.
func CheckpointName(id uint64) string { return fmt.Sprintf("chk-%020d", id) }

// ParseCheckpointName is the inverse of CheckpointName; ok is false for
// names of another form (savepoints, say).
func ParseCheckpointName(name string) (id uint64, ok bool) {
	digits, found := strings.CutPrefix(name, "chk-")
	if !found || len(digits) != 20 {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if id > (1<<64-1-d)/10 {
			return 0, false
		}
		id = id*10 + d
	}
	return id, true
}
