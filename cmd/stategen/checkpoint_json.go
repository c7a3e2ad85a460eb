package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/checkpoint/inspect"
)

// The documents of -json (see the package doc for their schema).

type jsonLs struct {
	Dir         string           `json:"dir"`
	Checkpoints []jsonCheckpoint `json:"checkpoints"`
}

type jsonCheckpoint struct {
	ID        uint64      `json:"id"`
	Name      string      `json:"name"`
	Type      string      `json:"type"`
	Time      *time.Time  `json:"time"`
	SizeBytes int64       `json:"size_bytes"`
	FullBytes int64       `json:"full_bytes"`
	Operators []jsonOpPar `json:"operators"`
	States    []string    `json:"states"`
	Error     string      `json:"error,omitempty"`
}

type jsonOpPar struct {
	ID          string `json:"id"`
	Parallelism int    `json:"parallelism"`
}

type jsonRange struct {
	Start int `json:"start"`
	End   int `json:"end"`
}

type jsonInspect struct {
	Name          string            `json:"name"`
	ID            uint64            `json:"id"`
	Time          *time.Time        `json:"time"`
	FormatVersion int               `json:"format_version"`
	SizeBytes     int64             `json:"size_bytes"`
	FullBytes     int64             `json:"full_bytes"`
	DataFiles     int               `json:"data_files"`
	Properties    map[string]string `json:"properties"`
	Operators     []jsonOperator    `json:"operators"`
}

type jsonOperator struct {
	ID             string         `json:"id"`
	MaxParallelism int            `json:"max_parallelism"`
	KeyGroups      jsonRange      `json:"key_groups"`
	Parallelism    int            `json:"parallelism"`
	States         []jsonState    `json:"states"`
	Instances      []jsonInstance `json:"instances"`
}

type jsonState struct {
	Name        string `json:"name"`
	Kind        string `json:"kind"`
	SubKeyed    bool   `json:"sub_keyed"`
	Fingerprint string `json:"fingerprint"`
	Schema      string `json:"schema"`
}

type jsonInstance struct {
	Index              int        `json:"index"`
	KeyGroups          jsonRange  `json:"key_groups"`
	File               jsonFile   `json:"file"`
	References         []jsonFile `json:"references"`
	OperatorStateBytes int        `json:"operator_state_bytes"`
}

type jsonFile struct {
	Name      string `json:"name"`
	SizeBytes int64  `json:"size_bytes"`
	CRC32C    string `json:"crc32c"`
	Tag       string `json:"tag"`
	Entries   int64  `json:"entries"`
	// Delta marks a file of changes; Checkpoint names the checkpoint that
	// owns a referenced file.
	Delta      bool   `json:"delta"`
	Checkpoint string `json:"checkpoint,omitempty"`
}

type jsonVerify struct {
	Name      string     `json:"name"`
	OK        bool       `json:"ok"`
	DataFiles int        `json:"data_files"`
	SizeBytes int64      `json:"size_bytes"`
	Seconds   float64    `json:"seconds"`
	Fault     *jsonFault `json:"fault"`
}

type jsonFault struct {
	Message string `json:"message"`
	Path    string `json:"path"`
	Offset  int64  `json:"offset"`
	Field   string `json:"field"`
	Reason  string `json:"reason"`
}

// writeJSON writes v as one indented JSON document.
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func jsonTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// lsEntry describes one listed checkpoint for -json.
func lsEntry(name string, m *checkpoint.Metadata, err error) jsonCheckpoint {
	c := jsonCheckpoint{Name: name, Type: "checkpoint", Operators: []jsonOpPar{}, States: []string{}}
	if err != nil {
		c.Error = err.Error()
		return c
	}
	c.ID, c.Time, c.SizeBytes, c.FullBytes = m.CheckpointID, jsonTime(m.Timestamp), inspect.DataSize(m), inspect.FullSize(m)
	if t := m.Properties["type"]; t != "" {
		c.Type = t
	}
	for _, op := range m.Operators {
		c.Operators = append(c.Operators, jsonOpPar{op.ID, len(op.Instances)})
		for _, st := range op.States {
			c.States = append(c.States, st.Name)
		}
	}
	slices.Sort(c.States)
	c.States = slices.Compact(c.States)
	return c
}

// inspectDoc describes a checkpoint's metadata for -json.
func inspectDoc(c *inspect.Checkpoint) jsonInspect {
	m := c.Metadata()
	doc := jsonInspect{
		Name: c.Name(), ID: m.CheckpointID, Time: jsonTime(m.Timestamp), FormatVersion: m.FormatVersion,
		SizeBytes: c.Size(), FullBytes: c.FullSize(), DataFiles: countFiles(m), Properties: map[string]string{}, Operators: []jsonOperator{},
	}
	for k, v := range m.Properties {
		doc.Properties[k] = v
	}
	for _, op := range m.Operators {
		o := jsonOperator{
			ID: op.ID, MaxParallelism: op.MaxParallelism, KeyGroups: jsonRange{op.KeyGroups.Start, op.KeyGroups.End},
			Parallelism: len(op.Instances), States: []jsonState{}, Instances: []jsonInstance{},
		}
		for _, s := range op.States {
			o.States = append(o.States, jsonState{s.Name, s.Kind.String(), s.SubKeyed, s.Fingerprint, s.Schema})
		}
		for i, in := range op.Instances {
			ji := jsonInstance{
				Index: i, KeyGroups: jsonRange{in.KeyGroups.Start, in.KeyGroups.End},
				File: fileDoc(m, "", in.File), References: []jsonFile{}, OperatorStateBytes: len(in.OperatorState),
			}
			for _, ref := range in.Base {
				ji.References = append(ji.References, fileDoc(m, ref.Checkpoint, ref.File))
			}
			o.Instances = append(o.Instances, ji)
		}
		doc.Operators = append(doc.Operators, o)
	}
	return doc
}

// fileDoc describes a data file of m, owned by checkpoint owner (empty:
// m's own), for -json.
func fileDoc(m *checkpoint.Metadata, owner string, f checkpoint.File) jsonFile {
	tag := ""
	if m.FormatVersion >= 2 {
		tag = fmt.Sprintf("%08x", f.Tag)
	}
	return jsonFile{f.Name, f.Size, fmt.Sprintf("%08x", f.CRC32C), tag, f.Entries, f.Delta, owner}
}

// verifyDoc describes the outcome of a verify for -json.
func verifyDoc(c *inspect.Checkpoint, took time.Duration, err error) jsonVerify {
	doc := jsonVerify{Name: c.Name(), OK: err == nil, DataFiles: countFiles(c.Metadata()), SizeBytes: c.Size(), Seconds: took.Seconds()}
	if err != nil {
		f := &jsonFault{Message: err.Error(), Offset: -1}
		var fe *checkpoint.FileError
		if errors.As(err, &fe) {
			f.Path, f.Offset, f.Field, f.Reason = fe.Path, fe.Offset, fe.Field, fe.Reason
		}
		doc.Fault = f
	}
	return doc
}
