package checkpoint

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/schema"
)

// Metadata is the content of a checkpoint's metadata object (MetadataName):
// everything needed to restore it, and the object whose commit makes the
// checkpoint exist. It is stored as indented JSON, to be read by people as
// well as programs; see the package doc for an example.
type Metadata struct {
	// FormatVersion is the format version of the metadata and of every
	// file it names; zero means FormatVersion when writing, and parsing
	// always sets it. A checkpoint written by an earlier version of this
	// package keeps its version (1: its files have no tag).
	FormatVersion int
	// CheckpointID is the coordinator's id of the checkpoint (zero if
	// none).
	CheckpointID uint64
	// Timestamp is when the checkpoint was triggered (zero if unknown).
	Timestamp time.Time
	// Properties are free-form strings for the coordinator and users, such
	// as "type": "savepoint".
	Properties map[string]string
	// Operators holds the keyed state of each stateful operator of the job,
	// by operator id.
	Operators []Operator
}

// Operator is the checkpointed state of one operator: the data files of its
// instances, which together cover its key groups.
type Operator struct {
	// ID names the operator; it is stable across job versions (see
	// ValidateName).
	ID string
	// MaxParallelism is the number of key groups of the operator's state.
	MaxParallelism int
	// KeyGroups is the range the instances cover together; a complete
	// checkpoint covers [0, MaxParallelism).
	KeyGroups runtime.KeyGroupRange
	// States are the descriptors of every state of the operator, sorted by
	// name.
	States []runtime.StateSpec
	// Instances are the old instances' snapshots, ordered by key groups;
	// their ranges are contiguous and cover KeyGroups.
	Instances []Instance
}

// Instance is the snapshot of one operator instance.
type Instance struct {
	// KeyGroups is the range of key groups the instance owned.
	KeyGroups runtime.KeyGroupRange
	// States names the states in the instance's file, sorted; each is one
	// of the Operator's States.
	States []string
	// File is the instance's data file.
	File File
	// Base is the chain of earlier checkpoints' files that File applies
	// to, oldest first: a full file, then the delta files written since,
	// all of the instance's key groups (format version 4). It is empty when
	// File is a full file. A restore reads Base[0], applies Base[1:] in
	// order, then File.
	Base []FileRef
	// OperatorState is the instance's opaque operator-state blob (see
	// InstanceSnapshot.OperatorState), or nil.
	OperatorState []byte
}

// File describes a data file of a checkpoint.
type File struct {
	// Name is the object's name within the checkpoint.
	Name string
	// Size is its length in bytes.
	Size int64
	// CRC32C is the CRC-32 (Castagnoli) of all its bytes.
	CRC32C uint32
	// Delta reports a file of changes (an incremental checkpoint's, format
	// version 4): its entries are operations to apply, in order, to the
	// files below it in its instance's chain (see Instance.Base), not
	// entries to load.
	Delta bool
	// Tag is the random tag the writer chose for the file and wrote in its
	// header: a reader that opens the file checks it, so that a file of
	// another checkpoint under this file's name fails the restore. It is
	// never zero in format version 2, and always zero in version 1, whose
	// files have none.
	Tag uint32
	// Entries counts the entries it holds.
	Entries int64
}

// FileRef is a data file of another checkpoint that an instance's chain
// references (Instance.Base): the file stays where it was written, owned
// by that checkpoint, and is deleted only when no committed checkpoint
// references it any more (see Delete).
type FileRef struct {
	// Checkpoint names the checkpoint that wrote the file and owns it.
	Checkpoint string
	// File describes it as that checkpoint's metadata did.
	File File
}

// The JSON form of Metadata. Field names are the format; they change only
// with the format version.
type (
	metadataJSON struct {
		FormatVersion int               `json:"formatVersion"`
		CheckpointID  uint64            `json:"checkpointId"`
		Timestamp     time.Time         `json:"timestamp,omitzero"`
		Properties    map[string]string `json:"properties,omitempty"`
		Operators     []operatorJSON    `json:"operators"`
		// Checksum is the CRC32C, as 8 hex digits, of the canonical form:
		// the compact JSON encoding of this struct with Checksum empty,
		// without HTML escaping, newline-terminated.
		Checksum string `json:"checksum"`
	}
	operatorJSON struct {
		ID             string         `json:"id"`
		MaxParallelism int            `json:"maxParallelism"`
		KeyGroups      rangeJSON      `json:"keyGroups"`
		States         []stateJSON    `json:"states"`
		Instances      []instanceJSON `json:"instances"`
	}
	rangeJSON struct {
		Start int `json:"start"`
		End   int `json:"end"`
	}
	stateJSON struct {
		Name        string `json:"name"`
		Kind        string `json:"kind"`
		SubKeyed    bool   `json:"subKeyed"`
		Fingerprint string `json:"fingerprint"`
		// Schema is the writer's schema; version 3 only.
		Schema string `json:"schema,omitempty"`
		// TTLMillis is the state's TTL in milliseconds, absent if it has
		// none (runtime.StateSpec.TTL).
		TTLMillis int64 `json:"ttlMillis,omitempty"`
	}
	instanceJSON struct {
		KeyGroups rangeJSON `json:"keyGroups"`
		States    []string  `json:"states"`
		File      fileJSON  `json:"file"`
		// Base is the chain under File; version 4 only.
		Base          []fileJSON `json:"base,omitempty"`
		OperatorState []byte     `json:"operatorState,omitempty"`
	}
	fileJSON struct {
		Name   string `json:"name"`
		Size   int64  `json:"size"`
		CRC32C string `json:"crc32c"`
		// Tag is the file tag as 8 hex digits; version 2 only.
		Tag     string `json:"tag,omitempty"`
		Entries int64  `json:"entries"`
		// Checkpoint names the checkpoint that owns a referenced file
		// (Instance.Base); Delta marks a file of changes. Version 4 only.
		Checkpoint string `json:"checkpoint,omitempty"`
		Delta      bool   `json:"delta,omitempty"`
	}
)

// Marshal validates m and returns its JSON form, of version
// m.FormatVersion: FormatVersion, or version 1 for the metadata of a
// version-1 checkpoint, so that metadata read from a checkpoint marshals
// as it was.
func (m *Metadata) Marshal() ([]byte, error) {
	version := m.version()
	if version < minFormatVersion || version > maxFormatVersion {
		return nil, fmt.Errorf("%w: cannot write format version %d", ErrUnsupportedVersion, m.FormatVersion)
	}
	if err := m.validate(MetadataName); err != nil {
		return nil, err
	}
	j := metadataJSON{
		FormatVersion: version,
		CheckpointID:  m.CheckpointID,
		Timestamp:     m.Timestamp,
		Properties:    m.Properties,
		Operators:     make([]operatorJSON, len(m.Operators)),
	}
	for i, op := range m.Operators {
		oj := operatorJSON{
			ID:             op.ID,
			MaxParallelism: op.MaxParallelism,
			KeyGroups:      rangeJSON(op.KeyGroups),
			States:         make([]stateJSON, len(op.States)),
			Instances:      make([]instanceJSON, len(op.Instances)),
		}
		for k, s := range op.States {
			oj.States[k] = stateJSON{Name: s.Name, Kind: s.Kind.String(), SubKeyed: s.SubKeyed, Fingerprint: s.Fingerprint, TTLMillis: s.TTL.Milliseconds()}
			if version >= 3 {
				oj.States[k].Schema = s.Schema
			}
		}
		for k, in := range op.Instances {
			oj.Instances[k] = instanceJSON{
				KeyGroups:     rangeJSON(in.KeyGroups),
				States:        in.States,
				File:          in.File.json(version, ""),
				OperatorState: in.OperatorState,
			}
			for _, ref := range in.Base {
				oj.Instances[k].Base = append(oj.Instances[k].Base, ref.File.json(version, ref.Checkpoint))
			}
			if oj.Instances[k].States == nil {
				oj.Instances[k].States = []string{}
			}
		}
		j.Operators[i] = oj
	}
	if j.Operators == nil {
		j.Operators = []operatorJSON{}
	}
	sum, err := j.checksum()
	if err != nil {
		return nil, err
	}
	j.Checksum = sum
	return encodeJSON(j, "  ")
}

// json returns f's JSON form in a metadata of version version, as a file
// of checkpoint owner (empty: the metadata's own checkpoint).
func (f File) json(version int, owner string) fileJSON {
	j := fileJSON{
		Name:       f.Name,
		Size:       f.Size,
		CRC32C:     fmt.Sprintf("%08x", f.CRC32C),
		Entries:    f.Entries,
		Checkpoint: owner,
		Delta:      f.Delta,
	}
	if version >= 2 {
		j.Tag = fmt.Sprintf("%08x", f.Tag)
	}
	return j
}

// encodeJSON encodes v without HTML escaping (the metadata is read by
// people, not browsers), indented by indent unless it is empty, and ending
// with a newline.
func encodeJSON(v any, indent string) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if indent != "" {
		enc.SetIndent("", indent)
	}
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("checkpoint: metadata: %w", err)
	}
	return buf.Bytes(), nil
}

// ParseMetadata parses and validates the JSON form of Metadata. Errors are
// *FileError values naming the field or offset at fault; they wrap
// ErrCorrupt, or ErrUnsupportedVersion for another format version.
func ParseMetadata(data []byte) (*Metadata, error) { return parseMetadata(MetadataName, data) }

func parseMetadata(path string, data []byte) (*Metadata, error) {
	if len(data) > MaxMetadataSize {
		return nil, corruptAt(path, MaxMetadataSize, "metadata is %d bytes, more than %d", len(data), MaxMetadataSize)
	}
	// The version first, leniently: a newer format may have other fields.
	var probe struct {
		FormatVersion *json.RawMessage `json:"formatVersion"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, jsonError(path, data, err, -1)
	}
	if probe.FormatVersion == nil {
		return nil, corruptField(path, "formatVersion", "missing")
	}
	if v, err := strconv.Atoi(string(*probe.FormatVersion)); err != nil || v < minFormatVersion || v > maxFormatVersion {
		return nil, &FileError{Path: path, Offset: -1, Field: "formatVersion", Err: ErrUnsupportedVersion,
			Reason: fmt.Sprintf("format version %s is not supported (this reader reads versions %d to %d)",
				*probe.FormatVersion, minFormatVersion, maxFormatVersion)}
	}
	var j metadataJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return nil, jsonError(path, data, err, dec.InputOffset())
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, corruptAt(path, dec.InputOffset(), "data after the metadata object")
	}
	if _, err := parseCRC(j.Checksum); err != nil {
		return nil, corruptField(path, "checksum", "%q is not 8 lowercase hexadecimal digits", j.Checksum)
	}
	if want, err := j.checksum(); err != nil || want != j.Checksum {
		return nil, corruptField(path, "checksum", "metadata checksum mismatch (stored %s, computed %s)", j.Checksum, want)
	}
	m := &Metadata{
		FormatVersion: j.FormatVersion,
		CheckpointID:  j.CheckpointID,
		Timestamp:     j.Timestamp,
		Properties:    j.Properties,
		Operators:     make([]Operator, len(j.Operators)),
	}
	for i, oj := range j.Operators {
		field := fmt.Sprintf("operators[%d]", i)
		op := Operator{
			ID:             oj.ID,
			MaxParallelism: oj.MaxParallelism,
			KeyGroups:      runtime.KeyGroupRange(oj.KeyGroups),
			States:         make([]runtime.StateSpec, len(oj.States)),
			Instances:      make([]Instance, len(oj.Instances)),
		}
		for k, sj := range oj.States {
			kind, err := runtime.ParseKind(sj.Kind)
			if err != nil {
				return nil, &FileError{Path: path, Offset: -1, Field: fmt.Sprintf("%s.states[%d].kind", field, k),
					Reason: "invalid kind", Err: ErrCorrupt, Cause: err}
			}
			if sj.TTLMillis < 0 || sj.TTLMillis > math.MaxInt64/int64(time.Millisecond) {
				return nil, corruptField(path, fmt.Sprintf("%s.states[%d].ttlMillis", field, k), "%d is not a TTL in milliseconds", sj.TTLMillis)
			}
			op.States[k] = runtime.StateSpec{Name: sj.Name, Kind: kind, SubKeyed: sj.SubKeyed, Fingerprint: sj.Fingerprint, Schema: sj.Schema,
				TTL: time.Duration(sj.TTLMillis) * time.Millisecond}
		}
		for k, ij := range oj.Instances {
			f := fmt.Sprintf("%s.instances[%d].file", field, k)
			file, err := ij.File.parse(path, f, j.FormatVersion)
			if err != nil {
				return nil, err
			}
			if ij.File.Checkpoint != "" {
				return nil, corruptField(path, f+".checkpoint", "an instance's own file belongs to its checkpoint, this one names %q", ij.File.Checkpoint)
			}
			var base []FileRef
			for l, bj := range ij.Base {
				bf := fmt.Sprintf("%s.instances[%d].base[%d]", field, k, l)
				file, err := bj.parse(path, bf, j.FormatVersion)
				if err != nil {
					return nil, err
				}
				base = append(base, FileRef{Checkpoint: bj.Checkpoint, File: file})
			}
			op.Instances[k] = Instance{
				KeyGroups:     runtime.KeyGroupRange(ij.KeyGroups),
				States:        ij.States,
				File:          file,
				Base:          base,
				OperatorState: ij.OperatorState,
			}
		}
		m.Operators[i] = op
	}
	if err := m.validate(path); err != nil {
		return nil, err
	}
	return m, nil
}

// parse parses the checksum and tag of j, the metadata field f of a
// metadata of version version.
func (j fileJSON) parse(path, f string, version int) (File, error) {
	crc, err := parseCRC(j.CRC32C)
	if err != nil {
		return File{}, corruptField(path, f+".crc32c", "%q is not 8 lowercase hexadecimal digits", j.CRC32C)
	}
	var tag uint32
	switch {
	case version == 1 && j.Tag != "":
		return File{}, corruptField(path, f+".tag", "a version-1 metadata has no file tags, this one has %q", j.Tag)
	case version >= 2 && j.Tag == "":
		return File{}, corruptField(path, f+".tag", "missing: a version-%d metadata records every file's tag", version)
	case version >= 2:
		if tag, err = parseCRC(j.Tag); err != nil {
			return File{}, corruptField(path, f+".tag", "%q is not 8 lowercase hexadecimal digits", j.Tag)
		}
	}
	return File{Name: j.Name, Size: j.Size, CRC32C: crc, Tag: tag, Entries: j.Entries, Delta: j.Delta}, nil
}

// checksum returns the checksum of j's canonical form.
func (j metadataJSON) checksum() (string, error) {
	j.Checksum = ""
	canon, err := encodeJSON(j, "")
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%08x", crc32.Checksum(canon, castagnoli)), nil
}

// parseCRC parses 8 lowercase hexadecimal digits: a checksum or a file
// tag.
func parseCRC(s string) (uint32, error) {
	if len(s) != 8 || strings.ToLower(s) != s {
		return 0, errors.New("bad crc")
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return 0, err
	}
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]), nil
}

// jsonError turns a JSON decoding error into a *FileError with the offset
// or field at fault; off is where the decoder stopped, or -1.
func jsonError(path string, data []byte, err error, off int64) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return &FileError{Path: path, Offset: syn.Offset, Reason: "metadata is not valid JSON", Err: ErrCorrupt, Cause: err}
	case errors.As(err, &typ):
		return &FileError{Path: path, Offset: typ.Offset, Field: typ.Field, Reason: "wrong JSON type", Err: ErrCorrupt, Cause: err}
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return &FileError{Path: path, Offset: int64(len(data)), Reason: "metadata is truncated", Err: ErrCorrupt, Cause: err}
	}
	if off < 0 {
		off = 0
	}
	return &FileError{Path: path, Offset: off, Reason: "metadata cannot be decoded", Err: ErrCorrupt, Cause: err}
}

// version returns m's format version; if unset, IncrementalFormatVersion
// for an incremental checkpoint and FormatVersion for the others.
func (m *Metadata) version() int {
	if m.FormatVersion != 0 {
		return m.FormatVersion
	}
	for _, op := range m.Operators {
		for _, in := range op.Instances {
			if len(in.Base) > 0 || in.File.Delta {
				return IncrementalFormatVersion
			}
		}
	}
	return FormatVersion
}

// validate checks everything about m that does not need its files. Errors
// name the field at fault.
func (m *Metadata) validate(path string) error {
	version := m.version()
	files := make(map[string]string)
	ids := make(map[string]bool)
	for i := range m.Operators {
		op := &m.Operators[i]
		field := fmt.Sprintf("operators[%d]", i)
		bad := func(sub string, cause error, format string, args ...any) error {
			return &FileError{Path: path, Offset: -1, Field: field + sub, Reason: fmt.Sprintf(format, args...), Err: ErrCorrupt, Cause: cause}
		}
		if err := ValidateName(op.ID); err != nil {
			return bad(".id", err, "invalid operator id")
		}
		if ids[op.ID] {
			return bad(".id", nil, "operator id %q appears twice", op.ID)
		}
		ids[op.ID] = true
		if err := runtime.ValidateMaxParallelism(op.MaxParallelism); err != nil {
			return bad(".maxParallelism", err, "invalid maxParallelism")
		}
		if err := op.KeyGroups.Validate(op.MaxParallelism); err != nil {
			return bad(".keyGroups", err, "invalid key-group range")
		}
		for k, s := range op.States {
			if err := s.Validate(); err != nil {
				return bad(fmt.Sprintf(".states[%d]", k), err, "invalid state descriptor")
			}
			if s.Schema != "" && version < 3 {
				return bad(fmt.Sprintf(".states[%d].schema", k), nil, "a version-%d metadata records no schemas", version)
			}
			if err := checkSchema(s); err != nil {
				return bad(fmt.Sprintf(".states[%d].schema", k), err, "invalid schema of state %q", s.Name)
			}
			if k > 0 && op.States[k-1].Name >= s.Name {
				return bad(fmt.Sprintf(".states[%d].name", k), nil, "state %q is not sorted after %q (or appears twice)", s.Name, op.States[k-1].Name)
			}
		}
		if len(op.Instances) == 0 {
			return bad(".instances", nil, "no instances")
		}
		next := op.KeyGroups.Start
		for k, in := range op.Instances {
			f := fmt.Sprintf(".instances[%d]", k)
			if err := in.KeyGroups.Validate(op.MaxParallelism); err != nil {
				return bad(f+".keyGroups", err, "invalid key-group range")
			}
			if in.KeyGroups.Start != next {
				return bad(f+".keyGroups", nil, "range %v does not begin at key group %d: instances must cover the operator's key groups %v in order, without gaps or overlaps",
					in.KeyGroups, next, op.KeyGroups)
			}
			next = in.KeyGroups.End
			for l, name := range in.States {
				if l > 0 && in.States[l-1] >= name {
					return bad(fmt.Sprintf("%s.states[%d]", f, l), nil, "state %q is not sorted after %q (or appears twice)", name, in.States[l-1])
				}
				if _, ok := op.spec(name); !ok {
					return bad(fmt.Sprintf("%s.states[%d]", f, l), nil, "state %q is not among the operator's states", name)
				}
			}
			if err := checkFile(in.File, version, func(sub string, cause error, format string, args ...any) error {
				return bad(f+".file"+sub, cause, format, args...)
			}); err != nil {
				return err
			}
			if other, dup := files[in.File.Name]; dup {
				return bad(f+".file.name", nil, "file %q is also named by %s", in.File.Name, other)
			}
			files[in.File.Name] = field + f
			if err := checkChain(in, version, func(sub string, cause error, format string, args ...any) error {
				return bad(f+sub, cause, format, args...)
			}); err != nil {
				return err
			}
		}
		if next != op.KeyGroups.End {
			return bad(".instances", nil, "instances end at key group %d, the operator's key groups %v at %d", next, op.KeyGroups, op.KeyGroups.End)
		}
	}
	return nil
}

// checkFile checks the fields of a data file's entry in a metadata of
// version version; bad reports a problem in one of them.
func checkFile(file File, version int, bad func(sub string, cause error, format string, args ...any) error) error {
	if err := ValidateName(file.Name); err != nil || file.Name == MetadataName {
		if err == nil {
			err = fmt.Errorf("%w: %q is the metadata's name", ErrInvalidName, MetadataName)
		}
		return bad(".name", err, "unsafe file name: it must name an object inside the checkpoint")
	}
	if file.Size < minFileSize {
		return bad(".size", nil, "size %d is less than the smallest data file (%d bytes)", file.Size, minFileSize)
	}
	if file.Entries < 0 || file.Entries > file.Size/minEntrySize {
		return bad(".entries", nil, "%d entries cannot fit in %d bytes", file.Entries, file.Size)
	}
	if version == 1 && file.Tag != 0 {
		return bad(".tag", nil, "tag %08x in a version-1 checkpoint, whose files have none", file.Tag)
	}
	if version >= 2 && file.Tag == 0 {
		return bad(".tag", nil, "tag is zero: every file of a version-%d checkpoint has a non-zero tag", version)
	}
	if version < IncrementalFormatVersion && file.Delta {
		return bad(".delta", nil, "a file of changes in a version-%d checkpoint, which has none", version)
	}
	return nil
}

// checkChain checks the chain of an instance (Instance.Base) in a metadata
// of version version: a full file, then files of changes, each named once,
// in a checkpoint of a safe name, under an own file of changes.
func checkChain(in Instance, version int, bad func(sub string, cause error, format string, args ...any) error) error {
	if len(in.Base) == 0 {
		if in.File.Delta {
			return bad(".file.delta", nil, "a file of changes with no chain to apply to (base is empty)")
		}
		return nil
	}
	if version < IncrementalFormatVersion {
		return bad(".base", nil, "a version-%d checkpoint references no files of other checkpoints", version)
	}
	if !in.File.Delta {
		return bad(".file.delta", nil, "a full file over a chain of %d files: only a file of changes applies to a chain", len(in.Base))
	}
	seen := make(map[string]int, len(in.Base))
	for l, ref := range in.Base {
		sub := fmt.Sprintf(".base[%d]", l)
		if err := ValidateName(ref.Checkpoint); err != nil || ref.Checkpoint == CoordinatorName {
			if err == nil {
				err = fmt.Errorf("%w: %q is the coordinator's", ErrInvalidName, CoordinatorName)
			}
			return bad(sub+".checkpoint", err, "unsafe checkpoint name: a chain references files of checkpoints in the same storage")
		}
		if err := checkFile(ref.File, version, func(s string, cause error, format string, args ...any) error {
			return bad(sub+s, cause, format, args...)
		}); err != nil {
			return err
		}
		if ref.File.Delta != (l > 0) {
			if l == 0 {
				return bad(sub+".delta", nil, "a chain begins with a full file, this one with a file of changes")
			}
			return bad(sub+".delta", nil, "a full file in the middle of a chain: only base[0] is full")
		}
		id := ref.Checkpoint + "/" + ref.File.Name
		if prev, dup := seen[id]; dup {
			return bad(sub, nil, "file %s is also base[%d]: a chain names each file once (a reference cycle?)", id, prev)
		}
		seen[id] = l
	}
	return nil
}

// fileNames returns the names of every data file m names.
func (m *Metadata) fileNames() []string {
	var out []string
	for _, op := range m.Operators {
		for _, in := range op.Instances {
			out = append(out, in.File.Name)
		}
	}
	return out
}

// checkCycles checks that the metadata of checkpoint ckpt references no
// file of ckpt itself in a chain: a chain is of earlier checkpoints.
func (m *Metadata) checkCycles(ckpt string) error {
	for i, op := range m.Operators {
		for k, in := range op.Instances {
			for l, ref := range in.Base {
				if ref.Checkpoint == ckpt {
					return corruptField(ckpt+"/"+MetadataName, fmt.Sprintf("operators[%d].instances[%d].base[%d].checkpoint", i, k, l),
						"the checkpoint references its own file %s in its chain (a reference cycle)", ref.File.Name)
				}
			}
		}
	}
	return nil
}

// refs returns the files of other checkpoints m references, as
// "<checkpoint>/<name>".
func (m *Metadata) refs() []string {
	var out []string
	for _, op := range m.Operators {
		for _, in := range op.Instances {
			for _, ref := range in.Base {
				out = append(out, ref.Checkpoint+"/"+ref.File.Name)
			}
		}
	}
	return out
}

// Operator returns the operator with the given id, or an error wrapping
// ErrNotFound.
func (m *Metadata) Operator(id string) (*Operator, error) {
	for i := range m.Operators {
		if m.Operators[i].ID == id {
			return &m.Operators[i], nil
		}
	}
	ids := make([]string, len(m.Operators))
	for i, op := range m.Operators {
		ids[i] = op.ID
	}
	return nil, fmt.Errorf("%w: operator %q (the checkpoint holds %q)", ErrNotFound, id, ids)
}

// Complete reports whether the checkpoint can be restored at all: every
// operator's instances cover all its key groups, [0, MaxParallelism). The
// error wraps ErrIncomplete and names the first operator that does not.
// A checkpoint without operators is complete.
func (m *Metadata) Complete() error {
	for i := range m.Operators {
		if err := m.Operators[i].complete(); err != nil {
			return err
		}
	}
	return nil
}

func (o *Operator) complete() error {
	if o.KeyGroups != runtime.FullRange(o.MaxParallelism) {
		return fmt.Errorf("%w: operator %q covers key groups %v, not all %d",
			ErrIncomplete, o.ID, o.KeyGroups, o.MaxParallelism)
	}
	return nil
}

// spec returns the descriptor of the named state.
func (o *Operator) spec(name string) (runtime.StateSpec, bool) {
	i, ok := slices.BinarySearchFunc(o.States, name, func(s runtime.StateSpec, n string) int { return strings.Compare(s.Name, n) })
	if !ok {
		return runtime.StateSpec{}, false
	}
	return o.States[i], true
}

// NewOperator assembles the snapshots of an operator's instances — the
// acknowledgements of one checkpoint — into its entry of the metadata. The
// snapshots may come in any order; they must have the same maxParallelism,
// key-group ranges that are contiguous once sorted, and agree on the spec of
// every state they share.
func NewOperator(id string, snaps ...InstanceSnapshot) (Operator, error) {
	if err := ValidateName(id); err != nil {
		return Operator{}, fmt.Errorf("checkpoint: operator id: %w", err)
	}
	if len(snaps) == 0 {
		return Operator{}, fmt.Errorf("checkpoint: operator %q: no instance snapshots", id)
	}
	snaps = slices.Clone(snaps)
	slices.SortFunc(snaps, func(a, b InstanceSnapshot) int { return a.KeyGroups.Start - b.KeyGroups.Start })
	op := Operator{
		ID:             id,
		MaxParallelism: snaps[0].MaxParallelism,
		KeyGroups:      runtime.KeyGroupRange{Start: snaps[0].KeyGroups.Start, End: snaps[len(snaps)-1].KeyGroups.End},
	}
	specs := make(map[string]runtime.StateSpec)
	for i, s := range snaps {
		if s.MaxParallelism != op.MaxParallelism {
			return Operator{}, fmt.Errorf("%w: operator %q: instance snapshots have maxParallelism %d and %d",
				runtime.ErrMaxParallelismMismatch, id, op.MaxParallelism, s.MaxParallelism)
		}
		if i > 0 && s.KeyGroups.Start != snaps[i-1].KeyGroups.End {
			return Operator{}, fmt.Errorf("%w: operator %q: instance key groups %v and %v are not contiguous",
				runtime.ErrInvalidKeyGroup, id, snaps[i-1].KeyGroups, s.KeyGroups)
		}
		in := Instance{KeyGroups: s.KeyGroups, File: s.File, Base: s.Base, OperatorState: s.OperatorState, States: make([]string, len(s.States))}
		for k, spec := range s.States {
			if prev, ok := specs[spec.Name]; ok {
				if err := runtime.CheckSame(prev, spec); err != nil {
					return Operator{}, fmt.Errorf("checkpoint: operator %q: instances disagree: %w", id, err)
				}
			}
			specs[spec.Name] = spec
			in.States[k] = spec.Name
		}
		op.Instances = append(op.Instances, in)
	}
	for _, s := range specs {
		op.States = append(op.States, s)
	}
	slices.SortFunc(op.States, func(a, b runtime.StateSpec) int { return strings.Compare(a.Name, b.Name) })
	m := Metadata{Operators: []Operator{op}}
	if err := m.validate("operator " + id); err != nil {
		return Operator{}, err
	}
	return op, nil
}

// Commit commits checkpoint ckpt: it checks that every file m names exists
// in s with the size m records, then writes m as the checkpoint's metadata
// object. Once Commit returns nil the checkpoint exists — List shows it and
// Open reads it — and not a moment before; if it fails, or the process dies
// during it, the checkpoint does not exist and Cleanup removes its files.
// Committing a checkpoint twice fails with ErrExist.
func Commit(ctx context.Context, s Storage, ckpt string, m *Metadata) error {
	if err := ValidateName(ckpt); err != nil {
		return fmt.Errorf("checkpoint name: %w", err)
	}
	data, err := m.Marshal()
	if err != nil {
		return err
	}
	if err := m.checkCycles(ckpt); err != nil {
		return err
	}
	for i, op := range m.Operators {
		for k, in := range op.Instances {
			field := fmt.Sprintf("operators[%d].instances[%d].file", i, k)
			info, err := s.Stat(ctx, ckpt, in.File.Name)
			if err != nil {
				return fmt.Errorf("checkpoint: commit %s: %s: %w", ckpt, field, err)
			}
			if info.Size != in.File.Size {
				return corruptField(ckpt+"/"+in.File.Name, field+".size", "the file is %d bytes, the metadata says %d", info.Size, in.File.Size)
			}
			for l, ref := range in.Base {
				field := fmt.Sprintf("operators[%d].instances[%d].base[%d]", i, k, l)
				info, err := s.Stat(ctx, ref.Checkpoint, ref.File.Name)
				if err != nil {
					return fmt.Errorf("checkpoint: commit %s: %s references %s/%s: %w", ckpt, field, ref.Checkpoint, ref.File.Name, err)
				}
				if info.Size != ref.File.Size {
					return corruptField(ref.Checkpoint+"/"+ref.File.Name, field+".size", "the file is %d bytes, the metadata of %s says %d", info.Size, ckpt, ref.File.Size)
				}
			}
		}
	}
	w, err := s.Create(ctx, ckpt, MetadataName)
	if err != nil {
		return fmt.Errorf("checkpoint: commit %s: %w", ckpt, err)
	}
	if _, err := w.Write(data); err != nil {
		_ = w.Abort()
		return fmt.Errorf("checkpoint: commit %s: %w", ckpt, err)
	}
	if err := w.Commit(); err != nil {
		return fmt.Errorf("checkpoint: commit %s: %w", ckpt, err)
	}
	return nil
}

// ReadMetadata reads and validates the metadata of committed checkpoint
// ckpt. It fails with ErrNotFound if the checkpoint has no committed
// metadata.
func ReadMetadata(ctx context.Context, s Storage, ckpt string) (*Metadata, error) {
	if err := ValidateName(ckpt); err != nil {
		return nil, fmt.Errorf("checkpoint name: %w", err)
	}
	obj, err := s.Open(ctx, ckpt, MetadataName)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("checkpoint: %s has no committed metadata: %w", ckpt, err)
		}
		return nil, err
	}
	defer obj.Close()
	path := ckpt + "/" + MetadataName
	size := obj.Size()
	if size > MaxMetadataSize {
		return nil, corruptAt(path, MaxMetadataSize, "metadata is %d bytes, more than %d", size, MaxMetadataSize)
	}
	data := make([]byte, size)
	if n, err := obj.ReadAt(data, 0); n != len(data) {
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			// An I/O error, not corruption: the metadata may read next time.
			return nil, &FileError{Path: path, Offset: int64(n), Reason: "read failed: " + err.Error(), Err: err}
		}
		return nil, &FileError{Path: path, Offset: int64(n), Reason: "read failed (truncated)", Err: ErrCorrupt, Cause: err}
	}
	return parseMetadata(path, data)
}

// checkSchema checks a state's schema, if it has one: a schema string of
// its kind and sub-keying, whose hash is its fingerprint.
func checkSchema(s runtime.StateSpec) error {
	if s.Schema == "" {
		return nil
	}
	st, err := schema.Parse(s.Schema)
	switch {
	case err != nil:
		return err
	case st.Kind != s.Kind || st.SubKeyed != s.SubKeyed:
		return fmt.Errorf("the schema describes a %s, the state is a %s", schemaKind(st.Kind, st.SubKeyed), schemaKind(s.Kind, s.SubKeyed))
	case schema.Fingerprint(s.Schema) != s.Fingerprint:
		return fmt.Errorf("the schema hashes to %s, not to the state's fingerprint %s", schema.Fingerprint(s.Schema), s.Fingerprint)
	}
	return nil
}

func schemaKind(k runtime.Kind, subKeyed bool) string {
	if subKeyed {
		return "sub-keyed " + k.String() + " state"
	}
	return k.String() + " state"
}
