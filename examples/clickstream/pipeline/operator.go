package pipeline

import (
	"errors"
	"fmt"
	"math"

	"github.com/stategen/stategen/runtime"
)

// Process applies one event to the state of its user. It is the whole
// business logic of the operator: every kind of state is read and written
// through the generated, typed handles.
func Process(st *ClickState, e Event) error {
	if err := st.Users.Update(e.User, func(s UserStats, found bool) UserStats {
		if !found {
			s.First = e.At
		}
		s.Events++
		if !found || s.Session != e.Session {
			s.Sessions++
			s.Session = e.Session
		}
		s.Last = max(s.Last, e.At)
		return s
	}); err != nil {
		return err
	}

	// The recent-events list keeps the last RecentEvents events.
	recent, err := st.Recent.Get(e.User)
	if err != nil {
		return err
	}
	recent = append(recent, e)
	if len(recent) > RecentEvents {
		recent = recent[len(recent)-RecentEvents:]
	}
	if err := st.Recent.Replace(e.User, recent); err != nil {
		return err
	}

	n, _, err := st.Pages.Get(e.User, e.Page)
	if err != nil {
		return err
	}
	if err := st.Pages.Put(e.User, e.Page, n+1); err != nil {
		return err
	}

	// The timeline keeps TimelineSpan of event time before the newest
	// event: older entries are dropped from the front of the sorted map.
	if err := st.Timeline.Put(e.User, EventTime{At: e.At, Offset: e.Offset}, e); err != nil {
		return err
	}
	horizon := EventTime{At: e.At - TimelineSpan, Offset: math.MinInt64}
	var old []EventTime
	for entry, err := range st.Timeline.Before(e.User, horizon) {
		if err != nil {
			return err
		}
		old = append(old, entry.Key)
	}
	for _, k := range old {
		if err := st.Timeline.Delete(e.User, k); err != nil {
			return err
		}
	}

	start := e.At - e.At%WindowSize
	w := Window{Start: start, End: start + WindowSize}
	return st.Windows.Update(e.User, w, func(a WindowAgg, _ bool) WindowAgg {
		a.Events++
		if a.LastPage != e.Page {
			a.Pages++
			a.LastPage = e.Page
		}
		return a
	})
}

// Position is the part of an operator instance's checkpoint that describes
// its input: for each key group it owns, the offset of the last event of
// that key group reflected in its state (-1 before the first). It is the
// instance's operator-state blob.
type Position struct {
	// Ranges are disjoint runs of key groups sharing one offset.
	Ranges []PositionRange
}

// PositionRange says that the state of key groups KeyGroups reflects every
// event of theirs with an offset <= Offset.
type PositionRange struct {
	KeyGroups runtime.KeyGroupRange
	Offset    int64
}

// errBadPosition reports an operator-state blob that does not decode.
var errBadPosition = errors.New("clickstream: corrupt position blob")

// Marshal encodes p: a count, then (start, end, offset+1) per range, as
// varints.
func (p Position) Marshal() []byte {
	b := runtime.AppendUvarint(nil, uint64(len(p.Ranges)))
	for _, r := range p.Ranges {
		b = runtime.AppendUvarint(b, uint64(r.KeyGroups.Start))
		b = runtime.AppendUvarint(b, uint64(r.KeyGroups.End))
		b = runtime.AppendVarint(b, r.Offset+1)
	}
	return b
}

// UnmarshalPosition decodes a blob written by Position.Marshal.
func UnmarshalPosition(b []byte) (Position, error) {
	n, b, err := runtime.DecodeLen(b)
	if err != nil {
		return Position{}, fmt.Errorf("%w: %w", errBadPosition, err)
	}
	p := Position{Ranges: make([]PositionRange, 0, n)}
	for range n {
		var start, end uint64
		var off int64
		if start, b, err = runtime.DecodeUvarint(b); err == nil {
			if end, b, err = runtime.DecodeUvarint(b); err == nil {
				off, b, err = runtime.DecodeVarint(b)
			}
		}
		if err != nil {
			return Position{}, fmt.Errorf("%w: %w", errBadPosition, err)
		}
		if start >= end || end > runtime.UpperBoundMaxParallelism {
			return Position{}, fmt.Errorf("%w: key groups [%d, %d)", errBadPosition, start, end)
		}
		p.Ranges = append(p.Ranges, PositionRange{runtime.KeyGroupRange{Start: int(start), End: int(end)}, off - 1})
	}
	if len(b) != 0 {
		return Position{}, fmt.Errorf("%w: %d trailing bytes", errBadPosition, len(b))
	}
	return p, nil
}

// Thresholds merges the positions of every old instance of a checkpoint
// into one offset per key group of a job with maxParallelism key groups:
// events of key group g with an offset <= thresholds[g] are already in the
// restored state. Every key group must be covered exactly once.
func Thresholds(blobs [][]byte, maxParallelism int) ([]int64, error) {
	th := make([]int64, maxParallelism)
	seen := make([]bool, maxParallelism)
	for i, blob := range blobs {
		p, err := UnmarshalPosition(blob)
		if err != nil {
			return nil, fmt.Errorf("old instance %d: %w", i, err)
		}
		for _, r := range p.Ranges {
			if r.KeyGroups.End > maxParallelism {
				return nil, fmt.Errorf("old instance %d: %w: key groups %v beyond maxParallelism %d", i, errBadPosition, r.KeyGroups, maxParallelism)
			}
			for g := range r.KeyGroups.All() {
				if seen[g] {
					return nil, fmt.Errorf("old instance %d: %w: key group %d recorded twice", i, errBadPosition, g)
				}
				seen[g], th[g] = true, r.Offset
			}
		}
	}
	for g, ok := range seen {
		if !ok {
			return nil, fmt.Errorf("%w: no old instance recorded key group %d", errBadPosition, g)
		}
	}
	return th, nil
}
