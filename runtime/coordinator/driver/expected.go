package driver

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime/coordinator"
)

// Errors of the job graph (Options.Expected).
var (
	// ErrUnexpectedInstance reports an instance that the job graph does
	// not have: its operator is not expected, or its index is not below
	// the operator's parallelism. The message names the operator and the
	// index.
	ErrUnexpectedInstance = errors.New("driver: instance is not in the job graph")
	// ErrDuplicateInstance reports an instance that joined while another
	// with the same operator and index takes part.
	ErrDuplicateInstance = errors.New("driver: instance has joined already")
)

// ExpectedInstance is one operator instance of a job graph.
type ExpectedInstance struct {
	// Operator is the operator's name.
	Operator string
	// Index is the instance's index, in [0, Parallelism).
	Index int
	// Parallelism is the operator's number of instances.
	Parallelism int
}

// ID returns the instance's participant id, "operator/index".
func (e ExpectedInstance) ID() coordinator.ParticipantID { return InstanceID(e.Operator, e.Index) }

// InstanceID returns the participant id of instance index of operator,
// "operator/index": the id of an Instance that joined with these
// InstanceOptions.
func InstanceID(operator string, index int) coordinator.ParticipantID {
	return coordinator.ParticipantID(operator + "/" + strconv.Itoa(index))
}

// ParseInstanceID is the inverse of InstanceID; ok is false for an id of
// another form (without a '/' before a canonical decimal index).
func ParseInstanceID(id coordinator.ParticipantID) (operator string, index int, ok bool) {
	i := strings.LastIndexByte(string(id), '/')
	if i <= 0 {
		return "", 0, false
	}
	digits := string(id[i+1:])
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 || strconv.Itoa(n) != digits {
		return "", 0, false
	}
	return string(id[:i]), n, true
}

// ExpectedInstances validates a job graph — each operator's parallelism,
// as in Options.Expected — and returns its instances sorted by id. Nil
// returns nil. Every operator must be a valid checkpoint name
// (checkpoint.ValidateName) with a positive parallelism.
func ExpectedInstances(graph map[string]int) ([]ExpectedInstance, error) {
	if graph == nil {
		return nil, nil
	}
	if len(graph) == 0 {
		return nil, errors.New("driver: the job graph (Expected) has no operator")
	}
	var out []ExpectedInstance
	for _, op := range slices.Sorted(maps.Keys(graph)) {
		p := graph[op]
		if err := checkpoint.ValidateName(op); err != nil {
			return nil, fmt.Errorf("driver: the job graph (Expected): operator %q: %w", op, err)
		}
		if p <= 0 {
			return nil, fmt.Errorf("driver: the job graph (Expected): operator %q has parallelism %d; it must be positive", op, p)
		}
		for i := range p {
			out = append(out, ExpectedInstance{Operator: op, Index: i, Parallelism: p})
		}
	}
	slices.SortFunc(out, func(a, b ExpectedInstance) int { return strings.Compare(string(a.ID()), string(b.ID())) })
	return out, nil
}

// unexpected is the error for a participant id that expected does not
// hold.
func unexpected(id coordinator.ParticipantID, operator string, expected map[coordinator.ParticipantID]*slot) error {
	op, index, ok := ParseInstanceID(id)
	if !ok {
		return fmt.Errorf("%w: participant %q of operator %q is not an operator instance (operator/index)", ErrUnexpectedInstance, id, operator)
	}
	par := 0
	for _, sl := range expected {
		if sl.inst.Operator == op {
			par = sl.inst.Parallelism
			break
		}
	}
	if par == 0 {
		ops := map[string]bool{}
		for _, sl := range expected {
			ops[sl.inst.Operator] = true
		}
		return fmt.Errorf("%w: operator %q (instance %d) is not one of the job's operators %q", ErrUnexpectedInstance, op, index, slices.Sorted(maps.Keys(ops)))
	}
	return fmt.Errorf("%w: operator %q has parallelism %d; instance %d is outside [0, %d)", ErrUnexpectedInstance, op, par, index, par)
}

// slot is the Coordinator's participant for an expected instance: it
// forwards to the participant that took its place, and while there is
// none it declines every trigger on the instance's behalf as not ready,
// so that no checkpoint completes without it. It lives on the loop
// goroutine.
type slot struct {
	c    *Coordinator
	inst ExpectedInstance
	p    Participant // nil while the instance is absent
	// from is the first checkpoint the bound participant was triggered
	// for: it is told of no earlier checkpoint's end.
	from   coordinator.CheckpointID
	joined bool // a participant has taken the place at least once
}

func (s *slot) bind(p Participant) {
	s.p, s.from, s.joined = p, 0, true
}

func (s *slot) unbind() { s.p = nil }

func (s *slot) ID() coordinator.ParticipantID { return s.inst.ID() }
func (s *slot) Operator() string              { return s.inst.Operator }

func (s *slot) Trigger(t Trigger) {
	if s.p == nil {
		why := "has not joined yet"
		if s.joined {
			why = "has left"
		}
		cause := fmt.Errorf("driver: expected instance %s (of %d) %s: %w", s.ID(), s.inst.Parallelism, why, coordinator.ErrNotReady)
		s.c.later = append(s.c.later, func() { s.c.core.Decline(s.c.clock.Now(), t.ID, s.ID(), cause) })
		return
	}
	if s.from == 0 {
		s.from = t.ID
	}
	s.p.Trigger(t)
}

func (s *slot) told(id coordinator.CheckpointID) bool {
	return s.p != nil && s.from != 0 && id >= s.from
}

func (s *slot) NotifyComplete(n Completion) {
	if s.told(n.ID) {
		s.p.NotifyComplete(n)
	}
}

func (s *slot) NotifyAborted(id coordinator.CheckpointID, err error) {
	if s.told(id) {
		s.p.NotifyAborted(id, err)
	}
}
