package pebble

import (
	"io"

	pebbledb "github.com/cockroachdb/pebble/v2"
)

// listMergerName is recorded by Pebble in the working directory: a
// directory written with one merge operator cannot be opened with another.
const listMergerName = "stategen.list.v1"

// listMerge is the merge operator of list values: operands are encoded
// element runs (see appendElems) and merging concatenates them, oldest
// first. Concatenation is associative, as Pebble requires, and the result
// of a partial merge (during a compaction) is itself a valid operand.
var listMerge = &pebbledb.Merger{
	Name: listMergerName,
	Merge: func(_, value []byte) (pebbledb.ValueMerger, error) {
		m := &listMerger{}
		m.newer = append(m.newer, value...)
		return m, nil
	},
}

// listMerger accumulates operands. Pebble submits them all newer or all
// older than the first; older ones are kept in arrival order (newest first)
// and joined in reverse by Finish, so that neither direction copies the
// accumulated bytes more than once.
type listMerger struct {
	newer []byte   // the first operand, then every newer one appended
	older [][]byte // copies of older operands, newest first
}

func (m *listMerger) MergeNewer(value []byte) error {
	m.newer = append(m.newer, value...)
	return nil
}

func (m *listMerger) MergeOlder(value []byte) error {
	m.older = append(m.older, append([]byte(nil), value...))
	return nil
}

func (m *listMerger) Finish(bool) ([]byte, io.Closer, error) {
	if len(m.older) == 0 {
		return m.newer, nil, nil
	}
	n := len(m.newer)
	for _, o := range m.older {
		n += len(o)
	}
	out := make([]byte, 0, n)
	for i := len(m.older) - 1; i >= 0; i-- {
		out = append(out, m.older[i]...)
	}
	return append(out, m.newer...), nil, nil
}
