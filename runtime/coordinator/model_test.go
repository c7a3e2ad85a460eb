package coordinator

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stategen/stategen/runtime"
)

// TestRandomSequencesKeepInvariants drives Cores with random sequences of
// events (acknowledgements right and wrong, declines, trigger and store
// failures, savepoints, participants leaving and joining, time passing) and
// checks, after every step, the Core's decisions against an independent
// model of the rules:
//
//   - ids strictly increase from the seeded counter;
//   - never more than MaxConcurrent non-savepoint checkpoints pending;
//   - acknowledgements and declines are classified as the rules say;
//   - every checkpoint ends exactly once (one Report; one NotifyAborted if
//     aborted), and at the end nothing is left pending;
//   - at most one Finalize outstanding, and only for fully acknowledged
//     checkpoints;
//   - no discarded file is referenced by a live checkpoint or belongs to a
//     completed savepoint, and at the end every file written is retained,
//     in a savepoint, or discarded (nothing leaks);
//   - at most Retained checkpoints retained, at least one once one
//     completed; the Core's retained set matches the model's;
//   - NotifyComplete ids strictly increase, only for completed checkpoints;
//   - the job fails exactly when the model's failure count exceeds
//     TolerableFailures, and nothing is triggered afterwards;
//   - no checkpoint waiting for acknowledgements outlives its deadline, and
//     the last Schedule equals NextDeadline;
//   - with IDReservation, only ids below a limit reported durable are
//     issued, one Reserve is outstanding at a time, limits never decrease,
//     a savepoint is refused for want of ids exactly when none is left, and
//     a failed reservation that a periodic trigger waited for counts as a
//     failure;
//   - coverage: every completed checkpoint's snapshots hold every key group
//     of the operator exactly once; a fully acknowledged checkpoint that
//     does not is aborted at once, counted only if two snapshots overlap;
//     and once anything completed, Latest is a covering checkpoint (the
//     job can always restore);
//   - a checkpoint is Final exactly when every participant acknowledged
//     with Finished, and NotifyComplete says so; a completed savepoint is
//     notified as a savepoint;
//   - on-demand requests are served oldest first, each exactly once
//     (triggered or refused), never wait while a slot, an id and a
//     participant are free, and are refused only for the reasons the
//     rules give.
func TestRandomSequencesKeepInvariants(t *testing.T) {
	seeds, steps := 400, 300
	if testing.Short() {
		seeds = 50
	}
	for seed := range seeds {
		if err := runModel(uint64(seed), steps); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

type mcp struct {
	id           CheckpointID
	savepoint    bool
	request      RequestID
	participants []ParticipantID
	deadline     time.Time
	acked        map[ParticipantID][]string
	kgs          map[ParticipantID]KeyGroups // the key groups each acknowledgement claimed
	finished     map[ParticipantID]bool
	coverage     string // once fully acknowledged: "", "gap" or "overlap" (see coverage)
	ended        bool
	status       Status
}

func (m *mcp) fullyAcked() bool { return len(m.acked) == len(m.participants) }

// final reports whether every participant acknowledged with Finished.
func (m *mcp) final() bool {
	if !m.fullyAcked() {
		return false
	}
	for _, p := range m.participants {
		if !m.finished[p] {
			return false
		}
	}
	return true
}

type model struct {
	rng  *rand.Rand
	cfg  Config
	c    *Core
	now  time.Time
	step int

	firstID, lastID CheckpointID
	cps             map[CheckpointID]*mcp
	finalizing      CheckpointID
	retained        []CheckpointID
	savepointFiles  map[string]bool
	written         map[string]bool
	discarded       map[string]bool
	unknownOutcome  map[string]bool
	lastNotified    CheckpointID
	everCompleted   bool
	failed          bool
	lastScheduled   time.Time

	// The model's own failure counter (rules from the package doc).
	failCount     int
	failCounted   map[CheckpointID]bool
	lastSucceeded CheckpointID

	fileSeq    int
	allPeers   []ParticipantID
	expectFail bool
	shutdown   bool

	// On-demand requests: waiting, oldest first, and every one issued.
	requests    []RequestID
	lastRequest RequestID
	requestEnd  map[RequestID]string // "triggered" or "refused"

	// The id counter, with cfg.IDReservation.
	durable   CheckpointID // ids below it were reported durable
	reserving CheckpointID // the outstanding Reserve's limit
	lastLimit CheckpointID // the last Reserve's limit
	idWait    bool         // a periodic trigger waits for ids
}

func runModel(seed uint64, steps int) error {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	pick := func(xs ...int) int { return xs[rng.IntN(len(xs))] }
	cfg := Config{
		Interval:          10 * time.Second,
		Timeout:           time.Duration(pick(15, 30, 60)) * time.Second,
		MinPause:          time.Duration(pick(0, 0, 5)) * time.Second,
		MaxConcurrent:     pick(1, 2, 5),
		Retained:          pick(1, 2, 3),
		TolerableFailures: pick(0, 2, 5, UnlimitedFailures),
		IDReservation:     pick(0, 0, 1, 2, 5, 100),
	}
	m := &model{
		rng: rng, cfg: cfg, now: t0,
		cps: map[CheckpointID]*mcp{}, savepointFiles: map[string]bool{}, written: map[string]bool{},
		discarded: map[string]bool{}, unknownOutcome: map[string]bool{}, failCounted: map[CheckpointID]bool{},
		requestEnd: map[RequestID]string{},
	}
	m.firstID = CheckpointID(pick(1, 1, 17, 1000))
	m.durable = m.firstID
	c, err := New(cfg, t0, Recovery{NextID: m.firstID})
	if err != nil {
		return err
	}
	m.c = c
	n := 1 + rng.IntN(4)
	for i := range n {
		p := ParticipantID(fmt.Sprintf("p%d", i))
		m.allPeers = append(m.allPeers, p)
		if err := c.AddParticipant(p); err != nil {
			return err
		}
	}
	if err := m.apply(nil, c.Ready()); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	for m.step = 0; m.step < steps; m.step++ {
		if err := m.randomStep(); err != nil {
			return fmt.Errorf("step %d at %v: %w", m.step, m.now.Sub(t0), err)
		}
	}
	// Shut down, let the outstanding finalization finish, and check that
	// everything ended and nothing leaked.
	m.now = m.now.Add(time.Second)
	m.shutdown = true
	c.Shutdown(m.now)
	if err := m.apply(nil, c.Ready()); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if m.finalizing != 0 {
		id := m.finalizing
		if err := c.StoreResult(m.now, id, nil); err != nil {
			return err
		}
		if err := m.apply(func() error { return m.expectStored(id, nil) }, c.Ready()); err != nil {
			return fmt.Errorf("final store: %w", err)
		}
	}
	for id, cp := range m.cps {
		if !cp.ended {
			return fmt.Errorf("checkpoint %d never ended", id)
		}
	}
	for r := RequestID(1); r <= m.lastRequest; r++ {
		if m.requestEnd[r] == "" {
			return fmt.Errorf("request %d was neither triggered nor refused", r)
		}
	}
	if len(c.Pending()) != 0 {
		return fmt.Errorf("pending after shutdown: %v", c.Pending())
	}
	live := map[string]bool{}
	for _, id := range m.retained {
		for _, fs := range m.cps[id].acked {
			for _, f := range fs {
				live[f] = true
			}
		}
	}
	for f := range m.written {
		if !live[f] && !m.savepointFiles[f] && !m.discarded[f] && !m.unknownOutcome[f] {
			return fmt.Errorf("file %s leaked: neither retained, in a savepoint, nor discarded", f)
		}
	}
	return nil
}

// nextID is the id the next checkpoint gets.
func (m *model) nextID() CheckpointID {
	if m.lastID == 0 {
		return m.firstID
	}
	return m.lastID + 1
}

// modelMaxP is the maxParallelism of the model's one keyed operator, "op";
// peer i of n owns runtime.KeyGroupRangeForOperator(modelMaxP, n, i).
const modelMaxP = 16

func (m *model) keyGroups(p ParticipantID) KeyGroups {
	i := slices.Index(m.allPeers, p)
	if i < 0 {
		return KeyGroups{}
	}
	r, err := runtime.KeyGroupRangeForOperator(modelMaxP, len(m.allPeers), i)
	if err != nil {
		panic(err)
	}
	return KeyGroups{Operator: "op", MaxParallelism: modelMaxP, Range: r}
}

// claim is what p's acknowledgement says it holds: mostly its own key
// groups; sometimes nothing (a gap), or a neighbour's (an overlap).
func (m *model) claim(p ParticipantID) KeyGroups {
	switch m.rng.IntN(25) {
	case 0:
		return KeyGroups{}
	case 1:
		i := slices.Index(m.allPeers, p)
		return m.keyGroups(m.allPeers[(i+1)%len(m.allPeers)])
	}
	return m.keyGroups(p)
}

// coverage classifies what the claims hold, independently of the Core:
// "" when every key group of "op" is held exactly once (or no claim names
// it), "overlap" when one is held twice, else "gap".
func coverage(claims map[ParticipantID]KeyGroups) string {
	var count [modelMaxP]int
	named := false
	for _, k := range claims {
		if k.IsZero() {
			continue
		}
		named = true
		for g := k.Range.Start; g < k.Range.End; g++ {
			count[g]++
		}
	}
	if !named {
		return ""
	}
	gap := false
	for _, n := range count {
		if n > 1 {
			return "overlap"
		}
		gap = gap || n == 0
	}
	if gap {
		return "gap"
	}
	return ""
}

func (m *model) freshFile(p ParticipantID, id CheckpointID) string {
	m.fileSeq++
	f := fmt.Sprintf("%s-%d-%d", p, id, m.fileSeq)
	m.written[f] = true
	return f
}

func (m *model) open() []*mcp {
	var out []*mcp
	for _, cp := range m.cps {
		if !cp.ended {
			out = append(out, cp)
		}
	}
	slices.SortFunc(out, func(a, b *mcp) int { return int(a.id) - int(b.id) })
	return out
}

func (m *model) anyID() CheckpointID {
	switch m.rng.IntN(4) {
	case 0:
		return CheckpointID(m.rng.IntN(int(m.lastID) + 3)) // includes 0, past and future ids
	default:
		if m.lastID >= m.firstID {
			return m.firstID + CheckpointID(m.rng.IntN(int(m.lastID-m.firstID)+1))
		}
		return m.firstID
	}
}

func (m *model) randomStep() error {
	rng, c := m.rng, m.c
	m.now = m.now.Add(time.Duration(rng.IntN(2000)) * time.Millisecond)
	// Let due expiries happen first, so that the expectations below see
	// the checkpoints the input will meet. (Scenario expiry.txt covers an
	// input whose own time expires a checkpoint.)
	for _, cp := range m.open() {
		if !cp.fullyAcked() && !m.now.Before(cp.deadline) {
			c.Tick(m.now)
			if err := m.apply(nil, c.Ready()); err != nil {
				return err
			}
			break
		}
	}
	open := m.open()
	var waiting []*mcp
	for _, cp := range open {
		if !cp.fullyAcked() {
			waiting = append(waiting, cp)
		}
	}
	switch r := rng.IntN(100); {
	case r < 20: // time passes
		m.now = m.now.Add(time.Duration(rng.IntN(12000)) * time.Millisecond)
		c.Tick(m.now)
		return m.apply(nil, c.Ready())

	case r < 55 && len(waiting) > 0: // a right acknowledgement
		cp := waiting[rng.IntN(len(waiting))]
		var missing []ParticipantID
		for _, p := range cp.participants {
			if _, ok := cp.acked[p]; !ok {
				missing = append(missing, p)
			}
		}
		p := missing[rng.IntN(len(missing))]
		files := []string{m.freshFile(p, cp.id)}
		if rng.IntN(3) == 0 {
			files = append(files, m.freshFile(p, cp.id))
		}
		return m.ackWith(cp.id, p, Payload{Files: files, KeyGroups: m.claim(p), Finished: rng.IntN(3) == 0})

	case r < 62: // a redelivered or different duplicate
		var accepted []*mcp
		for _, cp := range open {
			if len(cp.acked) > 0 {
				accepted = append(accepted, cp)
			}
		}
		if len(accepted) == 0 {
			return nil
		}
		cp := accepted[rng.IntN(len(accepted))]
		ps := make([]ParticipantID, 0, len(cp.acked))
		for p := range cp.acked {
			ps = append(ps, p)
		}
		slices.Sort(ps)
		p := ps[rng.IntN(len(ps))]
		files := slices.Clone(cp.acked[p])
		if rng.IntN(2) == 0 {
			files = append(files, m.freshFile(p, cp.id))
		}
		return m.ack(cp.id, p, files)

	case r < 70: // a stray acknowledgement: any id, any sender, maybe naming live files
		id := m.anyID()
		peers := append(slices.Clone(m.allPeers), "ghost")
		p := peers[rng.IntN(len(peers))]
		files := []string{m.freshFile(p, id)}
		// Checkpoints may share files (the Core counts references); a
		// savepoint's files are its own (see Payload.Files).
		toSavepoint := m.cps[id] != nil && m.cps[id].savepoint
		if live := m.liveFiles(); !toSavepoint && len(live) > 0 && rng.IntN(2) == 0 {
			files = append(files, live[rng.IntN(len(live))])
		}
		if rng.IntN(10) == 0 {
			files = append(files, "") // invalid
		}
		return m.ack(id, p, files)

	case r < 76: // a decline
		id := m.anyID()
		if len(open) > 0 && rng.IntN(3) > 0 {
			id = open[rng.IntN(len(open))].id
		}
		peers := append(slices.Clone(m.allPeers), "ghost")
		p := peers[rng.IntN(len(peers))]
		var cause error = errors.New("snapshot failed")
		if rng.IntN(3) == 0 {
			cause = fmt.Errorf("closing: %w", ErrNotReady)
		}
		return m.decline(id, p, cause)

	case r < 79: // the driver could not start a checkpoint
		id := m.anyID()
		if len(open) > 0 && rng.IntN(2) == 0 {
			id = open[rng.IntN(len(open))].id
		}
		return m.triggerFailed(id)

	case r < 90: // the outstanding finalization ends
		if m.finalizing == 0 {
			return nil
		}
		id := m.finalizing
		var serr error
		switch rng.IntN(10) {
		case 0:
			serr = errors.New("disk full")
		case 1:
			serr = fmt.Errorf("timeout: %w", ErrOutcomeUnknown)
		}
		if err := c.StoreResult(m.now, id, serr); err != nil {
			return err
		}
		return m.apply(func() error { return m.expectStored(id, serr) }, c.Ready())

	case r < 92: // an on-demand checkpoint
		id, err := c.RequestCheckpoint(m.now)
		switch {
		case m.failed && !errors.Is(err, ErrShutdown):
			return fmt.Errorf("request after the job failed: %v, want ErrShutdown", err)
		case !m.failed && len(c.Participants()) == 0 && !errors.Is(err, ErrNoParticipants):
			return fmt.Errorf("request without participants: %v, want ErrNoParticipants", err)
		case err == nil && (m.failed || len(c.Participants()) == 0):
			return fmt.Errorf("request %d accepted after the job failed or without participants", id)
		case err != nil && !m.failed && len(c.Participants()) > 0:
			return fmt.Errorf("request refused: %v", err)
		case err == nil && id != m.lastRequest+1:
			return fmt.Errorf("request id %d after %d", id, m.lastRequest)
		}
		if err == nil {
			m.lastRequest = id
			m.requests = append(m.requests, id)
		}
		return m.apply(nil, c.Ready())

	case r < 94: // a savepoint
		_, err := c.RequestSavepoint(m.now, "/user/sp")
		outOfIDs := m.cfg.IDReservation > 0 && m.nextID() >= m.durable
		if err != nil && !m.failed && len(c.Participants()) > 0 && !(outOfIDs && errors.Is(err, ErrNoIDs)) {
			return fmt.Errorf("savepoint refused: %v", err)
		}
		if err == nil && outOfIDs {
			return fmt.Errorf("savepoint accepted without a durable id (durable below %d)", m.durable)
		}
		return m.apply(nil, c.Ready())

	case r < 96 && m.reserving != 0: // the outstanding reservation ends
		var rerr error
		if rng.IntN(4) == 0 {
			rerr = errors.New("counter: permission denied")
		}
		limit := m.reserving
		counts := rerr != nil && m.idWait && !m.failed
		if err := c.ReserveResult(m.now, limit, rerr); err != nil {
			return err
		}
		m.reserving = 0
		if rerr == nil {
			m.durable = max(m.durable, limit)
		}
		if counts && m.cfg.TolerableFailures != UnlimitedFailures {
			m.failCount++
			if m.failCount > m.cfg.TolerableFailures {
				m.expectFail = true
			}
		}
		return m.apply(nil, c.Ready())

	case r < 97: // a participant leaves
		ps := c.Participants()
		if len(ps) == 0 {
			return nil
		}
		p := ps[rng.IntN(len(ps))]
		if err := c.RemoveParticipant(m.now, p); err != nil {
			return err
		}
		// Checkpoints still waiting for p must be aborted in this step.
		var expect []CheckpointID
		for _, cp := range waiting {
			if _, acked := cp.acked[p]; !acked && slices.Contains(cp.participants, p) {
				expect = append(expect, cp.id)
			}
		}
		return m.apply(func() error { return m.expectEnded(expect, StatusFailed) }, c.Ready())

	default: // a participant (re)joins
		for _, p := range m.allPeers {
			if !slices.Contains(c.Participants(), p) {
				return c.AddParticipant(p)
			}
		}
		return nil
	}
}

func (m *model) liveFiles() []string {
	var out []string
	for _, cp := range m.open() {
		if cp.savepoint {
			continue
		}
		for _, fs := range cp.acked {
			out = append(out, fs...)
		}
	}
	for _, id := range m.retained {
		for _, fs := range m.cps[id].acked {
			out = append(out, fs...)
		}
	}
	slices.Sort(out)
	return out
}

// expectedResult is the classification the rules give a message about id
// from p.
func (m *model) expectedResult(id CheckpointID, p ParticipantID, decline bool) MessageResult {
	cp, ok := m.cps[id]
	nextID := m.firstID
	if m.lastID > 0 {
		nextID = m.lastID + 1
	}
	switch {
	case id == 0 || id >= nextID:
		return MessageUnknownCheckpoint
	case !ok || cp.ended:
		return MessageLate
	case !slices.Contains(cp.participants, p):
		return MessageUnknownParticipant
	case decline && cp.fullyAcked():
		return MessageLate
	case decline:
		return MessageAccepted
	}
	if _, dup := cp.acked[p]; dup {
		return MessageDuplicate
	}
	return MessageAccepted
}

func (m *model) ack(id CheckpointID, p ParticipantID, files []string) error {
	return m.ackWith(id, p, Payload{Files: files})
}

func (m *model) ackWith(id CheckpointID, p ParticipantID, pl Payload) error {
	files := pl.Files
	want := m.expectedResult(id, p, false)
	invalid := slices.Contains(files, "")
	if want == MessageAccepted && invalid {
		want = MessageRejected
	}
	res, err := m.c.Ack(m.now, id, p, pl)
	if res != want {
		return fmt.Errorf("ack %d from %s: %v, want %v", id, p, res, want)
	}
	if (err != nil) != invalid {
		return fmt.Errorf("ack %d from %s: err %v with invalid=%v", id, p, err, invalid)
	}
	if cp := m.cps[id]; res == MessageLate && cp != nil && cp.savepoint && cp.status == StatusCompleted {
		// A late acknowledgement of a completed savepoint: its files are in
		// the user's location and are left to the user.
		live := m.live(0)
		for _, f := range files {
			if !live[f] {
				m.savepointFiles[f] = true
			}
		}
	}
	var check func() error
	if res == MessageAccepted {
		cp := m.cps[id]
		fs := slices.Clone(files)
		slices.Sort(fs)
		cp.acked[p] = slices.Compact(fs)
		cp.kgs[p] = pl.KeyGroups
		cp.finished[p] = pl.Finished
		if cp.fullyAcked() {
			// The last acknowledgement: a checkpoint that does not cover
			// the operator ends here, aborted as incomplete.
			if cp.coverage = coverage(cp.kgs); cp.coverage != "" {
				check = func() error { return m.expectEnded([]CheckpointID{id}, StatusFailed) }
			}
		}
	}
	if res == MessageRejected {
		check = func() error { return m.expectEnded([]CheckpointID{id}, StatusFailed) }
	}
	return m.apply(check, m.c.Ready())
}

func (m *model) decline(id CheckpointID, p ParticipantID, cause error) error {
	want := m.expectedResult(id, p, true)
	res := m.c.Decline(m.now, id, p, cause)
	if res != want {
		return fmt.Errorf("decline %d from %s: %v, want %v", id, p, res, want)
	}
	var check func() error
	if res == MessageAccepted {
		check = func() error { return m.expectEnded([]CheckpointID{id}, StatusFailed) }
	}
	return m.apply(check, m.c.Ready())
}

func (m *model) triggerFailed(id CheckpointID) error {
	// Classified like a decline from one of the checkpoint's participants.
	var from ParticipantID
	if cp, ok := m.cps[id]; ok {
		from = cp.participants[0]
	}
	want := m.expectedResult(id, from, true)
	res := m.c.TriggerFailed(m.now, id, errors.New("mkdir failed"))
	if res != want {
		return fmt.Errorf("trigger-failed %d: %v, want %v", id, res, want)
	}
	var check func() error
	if res == MessageAccepted {
		check = func() error { return m.expectEnded([]CheckpointID{id}, StatusFailed) }
	}
	return m.apply(check, m.c.Ready())
}

func (m *model) expectEnded(ids []CheckpointID, status Status) error {
	for _, id := range ids {
		if cp := m.cps[id]; !cp.ended || cp.status != status {
			return fmt.Errorf("checkpoint %d: ended=%v status=%v, want %v", id, cp.ended, cp.status, status)
		}
	}
	return nil
}

func (m *model) expectStored(id CheckpointID, serr error) error {
	if serr != nil {
		return m.expectEnded([]CheckpointID{id}, StatusFailed)
	}
	return m.expectEnded([]CheckpointID{id}, StatusCompleted)
}

// countFailure applies the failure rules to an abort and reports whether
// the job must fail.
func (m *model) countFailure(cp *mcp, e *AbortError) bool {
	counted := false
	switch e.Reason {
	case AbortDeclined:
		counted = !errors.Is(e.Cause, ErrNotReady)
	case AbortExpired, AbortTriggerFailed, AbortFinalizeFailed:
		counted = !cp.savepoint
	case AbortIncomplete:
		counted = cp.coverage == "overlap"
	}
	if !counted || m.cfg.TolerableFailures == UnlimitedFailures || cp.id <= m.lastSucceeded {
		return false
	}
	if !m.failCounted[cp.id] {
		m.failCounted[cp.id] = true
		m.failCount++
	}
	return m.failCount > m.cfg.TolerableFailures
}

// apply checks one step's decisions against the model and updates it; then
// check (if any) and the invariants run.
func (m *model) apply(check func() error, ds []Decision) error {
	notifiedAborted := map[CheckpointID]bool{}
	for i, d := range ds {
		if err := m.applyOne(d, notifiedAborted); err != nil {
			return fmt.Errorf("decision %d (%T): %w\nall: %s", i, d, err, describe(ds))
		}
	}
	if m.expectFail && !m.failed {
		return fmt.Errorf("the failure count exceeded %d but the job did not fail\nall: %s", m.cfg.TolerableFailures, describe(ds))
	}
	if check != nil {
		if err := check(); err != nil {
			return fmt.Errorf("%w\nall: %s", err, describe(ds))
		}
	}
	return m.invariants()
}

func describe(ds []Decision) string {
	var s []string
	for _, d := range ds {
		s = append(s, formatDecision(d))
	}
	return strings.Join(s, "; ")
}

func (m *model) live(except CheckpointID) map[string]bool {
	live := map[string]bool{}
	for id, cp := range m.cps {
		if id == except || (cp.ended && !slices.Contains(m.retained, id)) {
			continue
		}
		for _, fs := range cp.acked {
			for _, f := range fs {
				live[f] = true
			}
		}
	}
	return live
}

func (m *model) applyOne(d Decision, notifiedAborted map[CheckpointID]bool) error {
	switch d := d.(type) {
	case Trigger:
		if m.failed {
			return fmt.Errorf("trigger %d after the job failed", d.ID)
		}
		if m.lastID == 0 && d.ID != m.firstID || m.lastID != 0 && d.ID <= m.lastID {
			return fmt.Errorf("id %d after %d (first %d): ids must strictly increase from the seed", d.ID, m.lastID, m.firstID)
		}
		if len(d.Participants) == 0 {
			return fmt.Errorf("trigger %d without participants", d.ID)
		}
		if !d.Deadline.Equal(m.now.Add(m.cfg.Timeout)) {
			return fmt.Errorf("trigger %d: deadline %v, want now + timeout", d.ID, d.Deadline)
		}
		if m.cfg.IDReservation > 0 && d.ID >= m.durable {
			return fmt.Errorf("trigger %d, but only ids below %d are durable", d.ID, m.durable)
		}
		switch {
		case d.Request != 0 && (d.Options.Savepoint || len(m.requests) == 0 || m.requests[0] != d.Request):
			return fmt.Errorf("trigger %d for request %d, but the oldest waiting request is %v", d.ID, d.Request, m.requests)
		case d.Request == 0 && !d.Options.Savepoint && len(m.requests) > 0:
			return fmt.Errorf("periodic trigger %d while requests %v wait", d.ID, m.requests)
		case d.Request != 0:
			m.requests = m.requests[1:]
			m.requestEnd[d.Request] = "triggered"
		}
		if d.Request == 0 && !d.Options.Savepoint {
			m.idWait = false // the periodic trigger that waited for ids fired
		}
		m.lastID = d.ID
		m.cps[d.ID] = &mcp{id: d.ID, savepoint: d.Options.Savepoint, request: d.Request, participants: d.Participants,
			deadline: d.Deadline, acked: map[ParticipantID][]string{}, kgs: map[ParticipantID]KeyGroups{},
			finished: map[ParticipantID]bool{}}
	case Finalize:
		cp := m.cps[d.Checkpoint.ID]
		switch {
		case cp == nil || cp.ended:
			return fmt.Errorf("finalize of unknown or ended checkpoint %d", d.Checkpoint.ID)
		case m.finalizing != 0:
			return fmt.Errorf("finalize %d while %d is outstanding", cp.id, m.finalizing)
		case !cp.fullyAcked():
			return fmt.Errorf("finalize %d before every participant acknowledged", cp.id)
		case cp.coverage != "":
			return fmt.Errorf("finalize %d, whose snapshots do not cover the operator (%s)", cp.id, cp.coverage)
		}
		for _, ps := range d.Checkpoint.Participants {
			if !slices.Equal(ps.Payload.Files, cp.acked[ps.Participant]) {
				return fmt.Errorf("finalize %d: %s's files %v, model %v", cp.id, ps.Participant, ps.Payload.Files, cp.acked[ps.Participant])
			}
		}
		m.finalizing = cp.id
	case Discard:
		except := CheckpointID(0)
		if d.Reason == DiscardAborted || d.Reason == DiscardSubsumed {
			except = d.ID
		}
		live := m.live(except)
		for _, f := range d.Files {
			if live[f] {
				return fmt.Errorf("discard %d (%v) deletes %s, which a live checkpoint references", d.ID, d.Reason, f)
			}
			if m.savepointFiles[f] {
				return fmt.Errorf("discard %d (%v) deletes %s of a completed savepoint", d.ID, d.Reason, f)
			}
			m.discarded[f] = true
		}
		if d.Reason == DiscardSubsumed {
			if len(m.retained) == 0 || m.retained[0] != d.ID {
				return fmt.Errorf("retention discards %d, but the oldest retained is %v", d.ID, m.retained)
			}
			m.retained = m.retained[1:]
		}
	case NotifyAborted:
		cp := m.cps[d.ID]
		if cp == nil || cp.ended || notifiedAborted[d.ID] {
			return fmt.Errorf("notify-aborted %d: unknown, ended or notified twice", d.ID)
		}
		notifiedAborted[d.ID] = true
	case NotifyComplete:
		cp := m.cps[d.ID]
		if cp == nil || !cp.ended || cp.status != StatusCompleted || cp.savepoint != d.Savepoint {
			return fmt.Errorf("notify-complete %d (savepoint %v) for a checkpoint that did not complete, or of the other kind", d.ID, d.Savepoint)
		}
		if d.Final != cp.final() {
			return fmt.Errorf("notify-complete %d: final %v, want %v", d.ID, d.Final, cp.final())
		}
		if d.Savepoint {
			break
		}
		if d.ID <= m.lastNotified {
			return fmt.Errorf("notify-complete %d after %d", d.ID, m.lastNotified)
		}
		m.lastNotified = d.ID
	case Report:
		r := d.Record
		cp := m.cps[r.ID]
		if cp == nil || cp.ended {
			return fmt.Errorf("report %d: unknown or reported twice", r.ID)
		}
		cp.ended, cp.status = true, r.Status
		if m.finalizing == r.ID {
			m.finalizing = 0
		}
		if r.Request != cp.request {
			return fmt.Errorf("report %d: request %d, triggered for %d", r.ID, r.Request, cp.request)
		}
		if r.Final != cp.final() {
			return fmt.Errorf("report %d: final %v, want %v", r.ID, r.Final, cp.final())
		}
		if wantNR := r.Err != nil && (r.Err.Reason == AbortIncomplete && cp.coverage == "gap" ||
			r.Err.Reason == AbortDeclined && errors.Is(r.Err.Cause, ErrNotReady)); r.NotReady() != wantNR {
			return fmt.Errorf("report %d: not-ready %v, want %v (%v)", r.ID, r.NotReady(), wantNR, r.Err)
		}
		switch r.Status {
		case StatusCompleted:
			if !cp.fullyAcked() {
				return fmt.Errorf("checkpoint %d completed without every acknowledgement", r.ID)
			}
			if cp.coverage != "" {
				return fmt.Errorf("checkpoint %d completed, but its snapshots do not cover the operator (%s)", r.ID, cp.coverage)
			}
			if r.ID > m.lastSucceeded {
				m.lastSucceeded, m.failCount = r.ID, 0
				clear(m.failCounted)
			}
			if cp.savepoint {
				for _, fs := range cp.acked {
					for _, f := range fs {
						m.savepointFiles[f] = true
					}
				}
			} else {
				m.retained = append(m.retained, r.ID)
				m.everCompleted = true
			}
		case StatusFailed:
			if !notifiedAborted[r.ID] {
				return fmt.Errorf("checkpoint %d failed without notify-aborted", r.ID)
			}
			if r.Err == nil || r.Err.ID != r.ID {
				return fmt.Errorf("failed record %d without its error", r.ID)
			}
			if (r.Err.Reason == AbortIncomplete) != (cp.coverage != "") {
				return fmt.Errorf("checkpoint %d aborted %v, coverage %q", r.ID, r.Err.Reason, cp.coverage)
			}
			if r.Err.Reason == AbortFinalizeFailed && errors.Is(r.Err, ErrOutcomeUnknown) {
				for _, fs := range cp.acked {
					for _, f := range fs {
						m.unknownOutcome[f] = true
					}
				}
			}
			if m.countFailure(cp, r.Err) {
				m.expectFail = true
			}
		}
	case Fail:
		if m.failed || !m.expectFail {
			return fmt.Errorf("fail (already failed %v, expected %v): %v", m.failed, m.expectFail, d.Err)
		}
		if !errors.Is(d.Err, ErrTooManyFailures) {
			return fmt.Errorf("fail error %v does not wrap ErrTooManyFailures", d.Err)
		}
		m.failed = true
	case Schedule:
		m.lastScheduled = d.At
	case Refused:
		if d.Request != 0 {
			i := slices.Index(m.requests, d.Request)
			var why bool
			switch d.Reason {
			case RefusedShutdown:
				why = m.failed || m.shutdown
			case RefusedNoParticipants:
				why = len(m.c.Participants()) == 0
			case RefusedNoIDs:
				why = m.cfg.IDReservation > 0 && m.nextID() >= m.durable
			}
			if i < 0 || !why {
				return fmt.Errorf("request %d refused (%v): waiting at %d, for a reason: %v", d.Request, d.Reason, i, why)
			}
			m.requests = slices.Delete(m.requests, i, i+1)
			m.requestEnd[d.Request] = "refused"
			break
		}
		m.idWait = d.Reason == RefusedNoIDs && d.RetryAt.IsZero()
	case Reserve:
		switch {
		case m.cfg.IDReservation == 0:
			return fmt.Errorf("reserve %d without IDReservation", d.Limit)
		case m.reserving != 0:
			return fmt.Errorf("reserve %d while %d is outstanding", d.Limit, m.reserving)
		case d.Limit < m.lastLimit || d.Limit <= m.durable:
			return fmt.Errorf("reserve %d after %d (durable %d): limits must not decrease", d.Limit, m.lastLimit, m.durable)
		}
		m.reserving, m.lastLimit = d.Limit, d.Limit
	default:
		return fmt.Errorf("unknown decision")
	}
	return nil
}

func (m *model) invariants() error {
	pending := 0
	for _, cp := range m.open() {
		if !cp.savepoint {
			pending++
		}
		if !cp.fullyAcked() && !m.now.Before(cp.deadline) {
			return fmt.Errorf("checkpoint %d outlived its deadline %v", cp.id, cp.deadline.Sub(t0))
		}
	}
	if pending > m.cfg.MaxConcurrent {
		return fmt.Errorf("%d checkpoints pending, max %d", pending, m.cfg.MaxConcurrent)
	}
	if len(m.retained) > m.cfg.Retained {
		return fmt.Errorf("%d retained, max %d", len(m.retained), m.cfg.Retained)
	}
	if m.everCompleted && len(m.retained) == 0 {
		return errors.New("no checkpoint retained although one completed")
	}
	if latest, ok := m.c.Latest(); m.everCompleted {
		claims := map[ParticipantID]KeyGroups{}
		for _, ps := range latest.Participants {
			claims[ps.Participant] = ps.Payload.KeyGroups
		}
		if !ok || coverage(claims) != "" {
			return fmt.Errorf("latest checkpoint %d (ok %v) is not restorable: coverage %q", latest.ID, ok, coverage(claims))
		}
	}
	if len(m.requests) > 0 && !m.failed {
		noIDs := m.cfg.IDReservation > 0 && m.nextID() >= m.durable
		if len(m.open()) < m.cfg.MaxConcurrent && !noIDs {
			return fmt.Errorf("requests %v wait with %d pending (max %d) and ids to issue", m.requests, len(m.open()), m.cfg.MaxConcurrent)
		}
	}
	var got []CheckpointID
	for _, cp := range m.c.Retained() {
		got = append(got, cp.ID)
	}
	if !slices.Equal(got, m.retained) {
		return fmt.Errorf("core retains %v, model %v", got, m.retained)
	}
	if at, _ := m.c.NextDeadline(); !at.Equal(m.lastScheduled) {
		return fmt.Errorf("NextDeadline %v but last Schedule %v", at, m.lastScheduled)
	}
	if (m.c.Err() != nil) != m.failed {
		return fmt.Errorf("Err() = %v, model failed = %v", m.c.Err(), m.failed)
	}
	if m.cfg.IDReservation > 0 && m.c.IDLimit() != m.durable {
		return fmt.Errorf("IDLimit() = %d, model %d", m.c.IDLimit(), m.durable)
	}
	return nil
}
