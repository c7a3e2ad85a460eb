package coordinator

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/stategen/stategen/runtime"
)

// validate checks k on its own: an operator name, a valid maxParallelism
// and a non-empty range within it.
func (k KeyGroups) validate() error {
	if k.Operator == "" {
		return fmt.Errorf("key groups %v without an operator", k.Range)
	}
	if err := k.Range.Validate(k.MaxParallelism); err != nil {
		return fmt.Errorf("operator %q: %w", k.Operator, err)
	}
	return nil
}

// checkCoverage reports whether the participants' snapshots hold every key
// group of every operator they name exactly once: for each operator, the
// ranges of its instances, sorted, start at 0, follow one another without
// a gap or an overlap, and end at the operator's maxParallelism, which all
// its instances agree on. Participants without keyed state are not
// checked.
//
// The error wraps ErrIncomplete and names the operator and the key groups
// at fault. Two instances that claim the same key groups, or disagree on
// maxParallelism, are a misconfigured job: that is reported first, and
// counts as a failure. A gap alone also wraps ErrNotReady: an instance that
// should hold those key groups did not take part (it had not joined yet,
// or had left), which is benign and does not count.
func checkCoverage(parts []ParticipantState) error {
	byOp := map[string][]ParticipantState{}
	for _, ps := range parts {
		if k := ps.Payload.KeyGroups; !k.IsZero() {
			byOp[k.Operator] = append(byOp[k.Operator], ps)
		}
	}
	var gapErr error
	for _, op := range slices.Sorted(maps.Keys(byOp)) {
		ins := byOp[op]
		slices.SortFunc(ins, func(a, b ParticipantState) int {
			return cmp.Or(cmp.Compare(a.Payload.KeyGroups.Range.Start, b.Payload.KeyGroups.Range.Start),
				cmp.Compare(a.Participant, b.Participant))
		})
		maxP := ins[0].Payload.KeyGroups.MaxParallelism
		next := 0
		for i, ps := range ins {
			k := ps.Payload.KeyGroups
			switch {
			case k.MaxParallelism != maxP:
				return fmt.Errorf("%w: operator %q: %s has maxParallelism %d, %s has %d",
					ErrIncomplete, op, ins[0].Participant, maxP, ps.Participant, k.MaxParallelism)
			case k.Range.Start < next:
				return fmt.Errorf("%w: operator %q: %s holds key groups %v, which overlap %v of %s",
					ErrIncomplete, op, ps.Participant, k.Range, ins[i-1].Payload.KeyGroups.Range, ins[i-1].Participant)
			case k.Range.Start > next && gapErr == nil:
				gapErr = gap(op, runtime.KeyGroupRange{Start: next, End: k.Range.Start}, maxP)
			}
			next = k.Range.End
		}
		if next < maxP && gapErr == nil {
			gapErr = gap(op, runtime.KeyGroupRange{Start: next, End: maxP}, maxP)
		}
	}
	return gapErr
}

func gap(op string, missing runtime.KeyGroupRange, maxP int) error {
	return fmt.Errorf("%w: operator %q: no participant holds key groups %v of %d (%w: an instance had not joined or had left)",
		ErrIncomplete, op, missing, maxP, ErrNotReady)
}
