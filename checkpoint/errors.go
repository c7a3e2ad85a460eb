package checkpoint

import (
	"errors"
	"fmt"
	"strings"

	"github.com/stategen/stategen/runtime"
)

// sentinel is an error value that can also match a more general one: for
// example ErrCorrupt matches runtime.ErrCorrupt with errors.Is.
type sentinel struct {
	msg    string
	parent error
}

func (s *sentinel) Error() string { return s.msg }
func (s *sentinel) Unwrap() error { return s.parent }

// Errors a user can meet, to be tested with errors.Is. Functions wrap them
// with the checkpoint, file, offset or field at fault; problems with a file's
// bytes come as a *FileError.
var (
	// ErrCorrupt reports checkpoint bytes that fail a check: a checksum
	// mismatch, a truncated or extended file, a length beyond its bounds,
	// metadata that is not valid JSON or names an unsafe path. It also
	// matches runtime.ErrCorrupt.
	ErrCorrupt error = &sentinel{"checkpoint: corrupt", runtime.ErrCorrupt}

	// ErrUnsupportedVersion reports a data file or metadata of a format
	// version this package cannot read.
	ErrUnsupportedVersion = errors.New("checkpoint: unsupported format version")

	// ErrNotFound reports a checkpoint without committed metadata, an
	// object that does not exist, or an operator a checkpoint does not
	// hold.
	ErrNotFound = errors.New("checkpoint: not found")

	// ErrExist reports an attempt to create an object that already exists:
	// objects are immutable.
	ErrExist = errors.New("checkpoint: object already exists")

	// ErrInvalidName reports a checkpoint, object or operator name that is
	// not a single safe path element.
	ErrInvalidName = errors.New("checkpoint: invalid name")

	// ErrUnknownState reports, under FailOnUnknownStates, states of a
	// checkpoint that the restoring store has not registered.
	ErrUnknownState = errors.New("checkpoint: state in checkpoint is not registered")

	// ErrIncomplete reports a checkpoint that does not cover the key groups
	// a restore needs.
	ErrIncomplete = errors.New("checkpoint: checkpoint does not cover the key groups")

	// ErrTooLarge reports an entry whose encoding exceeds MaxBlockSize.
	ErrTooLarge = errors.New("checkpoint: entry too large")

	// ErrInvalidView reports a runtime.View that breaks its contract while
	// it is written: states not sorted, a namespace in a keyed state, a user
	// key outside a map, a key in the wrong key group.
	ErrInvalidView = errors.New("checkpoint: invalid view")

	// ErrPanic reports a panic recovered on the goroutine of an asynchronous
	// snapshot or on one of the writer's encoding goroutines (a panic in a
	// store's Scan); the error text holds the panic value and stack.
	ErrPanic = errors.New("checkpoint: panic during a checkpoint write")
)

// FileError is a problem with one object of a checkpoint: which object,
// where in it, and what. Err is the sentinel it matches (ErrCorrupt,
// ErrUnsupportedVersion, ErrNotFound) and Cause, if set, the underlying
// error (an I/O error, a JSON syntax error).
type FileError struct {
	// Path is the object's path, "<checkpoint>/<name>", or the name a data
	// file was opened with.
	Path string
	// Offset is the byte offset of the problem in the object, or -1.
	Offset int64
	// Field is the metadata field at fault, such as
	// "operators[0].states[2].name", or "".
	Field string
	// Reason says what is wrong.
	Reason string
	// Err is the sentinel the error matches with errors.Is.
	Err error
	// Cause is the underlying error, or nil.
	Cause error
}

// Error formats e as "checkpoint: <path>: offset <n>: field <f>: <reason>",
// leaving out the parts that are not set.
func (e *FileError) Error() string {
	var b strings.Builder
	b.WriteString("checkpoint: ")
	b.WriteString(e.Path)
	if e.Offset >= 0 {
		fmt.Fprintf(&b, ": offset %d", e.Offset)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": field %s", e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	if e.Cause != nil {
		b.WriteString(": ")
		b.WriteString(e.Cause.Error())
	}
	return b.String()
}

// Unwrap returns the sentinel and the cause, for errors.Is and errors.As.
func (e *FileError) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Cause}
}

// corruptAt returns a *FileError wrapping ErrCorrupt at an offset.
func corruptAt(path string, off int64, format string, args ...any) *FileError {
	return &FileError{Path: path, Offset: off, Reason: fmt.Sprintf(format, args...), Err: ErrCorrupt}
}

// corruptField returns a *FileError wrapping ErrCorrupt for a metadata field.
func corruptField(path, field string, format string, args ...any) *FileError {
	return &FileError{Path: path, Offset: -1, Field: field, Reason: fmt.Sprintf(format, args...), Err: ErrCorrupt}
}
