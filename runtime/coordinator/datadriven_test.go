package coordinator

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The scenario files in testdata/*.txt are the coordinator's semantics in
// readable form. Each file is a sequence of blocks:
//
//	# comment
//	command arg key=value ...
//	----
//	expected output, one line per result or decision
//
// separated by blank lines. Times are offsets from the start of the test
// (t0); `tick T` advances the fake clock to T, and any command takes at=T
// to advance it first. Run with -rewrite to regenerate the expected output
// after a deliberate change, then review the diff.
var rewrite = flag.Bool("rewrite", false, "rewrite testdata files with the actual output")

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario files: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			runScenarioFile(t, file)
		})
	}
}

func runScenarioFile(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	var out []string
	h := &harness{}
	for i := 0; i < len(lines); {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			out = append(out, line)
			i++
			continue
		}
		cmdLine := i + 1
		i++
		if i >= len(lines) || lines[i] != "----" {
			t.Fatalf("%s:%d: command %q is not followed by ----", file, cmdLine, line)
		}
		i++
		start := i
		for i < len(lines) && strings.TrimSpace(lines[i]) != "" {
			i++
		}
		want := slices.Clip(lines[start:i])
		got, err := h.run(line)
		if err != nil {
			t.Fatalf("%s:%d: %s: %v", file, cmdLine, line, err)
		}
		if len(want) == 0 {
			want = nil
		}
		if *rewrite {
			out = append(out, line, "----")
			out = append(out, got...)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s:%d: %s\noutput mismatch (-want +got):\n%s", file, cmdLine, line, diff)
		}
	}
	if *rewrite {
		if err := os.WriteFile(file, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// harness runs scenario commands against a Core on a fake clock.
type harness struct {
	c   *Core
	now time.Time
}

type args struct {
	pos []string
	kv  map[string]string
}

func parseArgs(fields []string) args {
	a := args{kv: map[string]string{}}
	for _, f := range fields {
		if k, v, ok := strings.Cut(f, "="); ok {
			a.kv[k] = v
		} else {
			a.pos = append(a.pos, f)
		}
	}
	return a
}

func (a args) duration(key string, def time.Duration) (time.Duration, error) {
	v, ok := a.kv[key]
	if !ok {
		return def, nil
	}
	return time.ParseDuration(v)
}

func (a args) int(key string, def int) (int, error) {
	v, ok := a.kv[key]
	if !ok {
		return def, nil
	}
	if v == "unlimited" {
		return UnlimitedFailures, nil
	}
	return strconv.Atoi(v)
}

func (a args) id(i int) (CheckpointID, error) {
	if i >= len(a.pos) {
		return 0, fmt.Errorf("missing checkpoint id")
	}
	n, err := strconv.ParseUint(a.pos[i], 10, 64)
	return CheckpointID(n), err
}

func (a args) str(i int) (string, error) {
	if i >= len(a.pos) {
		return "", fmt.Errorf("missing argument %d", i+1)
	}
	return a.pos[i], nil
}

func (h *harness) run(line string) ([]string, error) {
	fields := strings.Fields(line)
	cmd, a := fields[0], parseArgs(fields[1:])
	if at, ok := a.kv["at"]; ok {
		d, err := time.ParseDuration(at)
		if err != nil {
			return nil, err
		}
		h.now = t0.Add(d)
	}
	if cmd != "new" && h.c == nil {
		return nil, errors.New("no core: start with new")
	}
	var res []string
	switch cmd {
	case "new":
		var cfg Config
		var err error
		errs := []error{}
		get := func(d *time.Duration, key string) {
			*d, err = a.duration(key, 0)
			errs = append(errs, err)
		}
		geti := func(n *int, key string) {
			*n, err = a.int(key, 0)
			errs = append(errs, err)
		}
		get(&cfg.Interval, "interval")
		get(&cfg.Timeout, "timeout")
		get(&cfg.MinPause, "min-pause")
		geti(&cfg.MaxConcurrent, "max-concurrent")
		geti(&cfg.TolerableFailures, "tolerable")
		geti(&cfg.Retained, "retained")
		geti(&cfg.IDReservation, "id-reservation")
		nextID, err := a.int("next-id", 0)
		errs = append(errs, err)
		idLimit, err := a.int("id-limit", 0)
		errs = append(errs, err)
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		h.now = t0
		c, err := New(cfg, t0, Recovery{NextID: CheckpointID(nextID), IDLimit: CheckpointID(idLimit)})
		if err != nil {
			return []string{"error: " + err.Error()}, nil
		}
		h.c = c
		if ps := a.kv["participants"]; ps != "" {
			for _, p := range strings.Split(ps, ",") {
				if err := c.AddParticipant(ParticipantID(p)); err != nil {
					return nil, err
				}
			}
		}
	case "tick":
		d, err := time.ParseDuration(a.pos[0])
		if err != nil {
			return nil, err
		}
		h.now = t0.Add(d)
		h.c.Tick(h.now)
	case "savepoint":
		loc, _ := a.str(0)
		id, err := h.c.RequestSavepoint(h.now, loc)
		if err != nil {
			res = append(res, "error: "+err.Error())
		} else {
			res = append(res, fmt.Sprintf("id %d", id))
		}
	case "request":
		r, err := h.c.RequestCheckpoint(h.now)
		if err != nil {
			res = append(res, "error: "+err.Error())
		} else {
			res = append(res, fmt.Sprintf("request %d", r))
		}
	case "ack":
		id, err := a.id(0)
		if err != nil {
			return nil, err
		}
		p, err := a.str(1)
		if err != nil {
			return nil, err
		}
		pl := Payload{Files: []string{fmt.Sprintf("%s%d", p, id)}}
		if f, ok := a.kv["files"]; ok {
			pl.Files = nil
			if f != "" {
				pl.Files = strings.Split(f, ",")
			}
		}
		n, err := a.int("bytes", 0)
		if err != nil {
			return nil, err
		}
		pl.Bytes = int64(n)
		if pl.SyncDuration, err = a.duration("sync", 0); err != nil {
			return nil, err
		}
		if pl.AsyncDuration, err = a.duration("async", 0); err != nil {
			return nil, err
		}
		if kg, ok := a.kv["kg"]; ok {
			// kg=operator:start-end/maxParallelism
			if _, err := fmt.Sscanf(strings.Replace(kg, ":", " ", 1), "%s %d-%d/%d", &pl.KeyGroups.Operator,
				&pl.KeyGroups.Range.Start, &pl.KeyGroups.Range.End, &pl.KeyGroups.MaxParallelism); err != nil {
				return nil, fmt.Errorf("kg=%s: want operator:start-end/maxParallelism: %v", kg, err)
			}
		}
		pl.Finished = slices.Contains(a.pos, "finished")
		r, err := h.c.Ack(h.now, id, ParticipantID(p), pl)
		res = append(res, r.String())
		if err != nil {
			res = append(res, "error: "+err.Error())
		}
	case "decline":
		id, err := a.id(0)
		if err != nil {
			return nil, err
		}
		p, err := a.str(1)
		if err != nil {
			return nil, err
		}
		cause := errors.New("snapshot failed")
		if slices.Contains(a.pos, "not-ready") {
			cause = fmt.Errorf("operator closing: %w", ErrNotReady)
		}
		res = append(res, h.c.Decline(h.now, id, ParticipantID(p), cause).String())
	case "trigger-failed":
		id, err := a.id(0)
		if err != nil {
			return nil, err
		}
		res = append(res, h.c.TriggerFailed(h.now, id, errors.New("mkdir: permission denied")).String())
	case "store":
		id, err := a.id(0)
		if err != nil {
			return nil, err
		}
		var serr error
		switch outcome, _ := a.str(1); outcome {
		case "", "ok":
		case "err":
			serr = errors.New("disk full")
		case "unknown":
			serr = fmt.Errorf("put metadata: timeout: %w", ErrOutcomeUnknown)
		default:
			return nil, fmt.Errorf("store outcome %q: want ok, err or unknown", outcome)
		}
		if err := h.c.StoreResult(h.now, id, serr); err != nil {
			res = append(res, "error: "+err.Error())
		}
	case "reserve":
		limit, err := a.id(0)
		if err != nil {
			return nil, err
		}
		var rerr error
		switch outcome, _ := a.str(1); outcome {
		case "", "ok":
		case "err":
			rerr = errors.New("put next-id: permission denied")
		default:
			return nil, fmt.Errorf("reserve outcome %q: want ok or err", outcome)
		}
		if err := h.c.ReserveResult(h.now, limit, rerr); err != nil {
			res = append(res, "error: "+err.Error())
		}
	case "add":
		p, _ := a.str(0) // empty on purpose: invalid
		if err := h.c.AddParticipant(ParticipantID(p)); err != nil {
			res = append(res, "error: "+err.Error())
		}
	case "remove":
		p, err := a.str(0)
		if err != nil {
			return nil, err
		}
		if err := h.c.RemoveParticipant(h.now, ParticipantID(p)); err != nil {
			res = append(res, "error: "+err.Error())
		}
	case "shutdown":
		h.c.Shutdown(h.now)
	case "state":
		return h.state(), nil
	default:
		return nil, fmt.Errorf("unknown command %q", cmd)
	}
	for _, d := range h.c.Ready() {
		res = append(res, formatDecision(d))
	}
	return res, nil
}

func (h *harness) state() []string {
	c := h.c
	var out []string
	ids := func(xs []CheckpointID) string {
		s := make([]string, len(xs))
		for i, x := range xs {
			s[i] = strconv.FormatUint(uint64(x), 10)
		}
		return "[" + strings.Join(s, " ") + "]"
	}
	var retained []CheckpointID
	for _, cp := range c.Retained() {
		retained = append(retained, cp.ID)
	}
	line := fmt.Sprintf("pending=%s retained=%s next-id=%d", ids(c.Pending()), ids(retained), c.NextID())
	if c.Config().IDReservation > 0 {
		line += fmt.Sprintf(" id-limit=%d", c.IDLimit())
	}
	out = append(out, line)
	dl := "none"
	if at, ok := c.NextDeadline(); ok {
		dl = rel(at)
	}
	out = append(out, fmt.Sprintf("next-deadline=%s participants=%s failures=%d", dl, joinIDs(c.Participants()), c.failures.count))
	st := c.Stats()
	n := st.Counts()
	line = fmt.Sprintf("stats: triggered=%d completed=%d failed=%d in-progress=%d refused=%d",
		n.Triggered, n.Completed, n.Failed, n.InProgress(), n.Refused)
	if n.NotReady > 0 {
		line += fmt.Sprintf(" not-ready=%d", n.NotReady)
	}
	out = append(out, line)
	if err := c.Err(); err != nil {
		out = append(out, "err: "+err.Error())
	}
	return out
}

func rel(t time.Time) string {
	if t.IsZero() {
		return "none"
	}
	return t.Sub(t0).String()
}

func joinIDs(ps []ParticipantID) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = string(p)
	}
	return strings.Join(s, ",")
}

func formatDecision(d Decision) string {
	switch d := d.(type) {
	case Trigger:
		kind := "checkpoint"
		if d.Options.Savepoint {
			kind = "savepoint:" + d.Options.Location
		}
		s := fmt.Sprintf("trigger %d %s at=%s deadline=%s to=%s", d.ID, kind, rel(d.At), rel(d.Deadline), joinIDs(d.Participants))
		if d.Request != 0 {
			s += fmt.Sprintf(" request=%d", d.Request)
		}
		return s
	case Finalize:
		s := fmt.Sprintf("finalize %d", d.Checkpoint.ID)
		if d.Checkpoint.Options.Savepoint {
			s += " savepoint:" + d.Checkpoint.Options.Location
		}
		for _, p := range d.Checkpoint.Participants {
			f := strings.Join(p.Payload.Files, ",")
			if f == "" {
				f = "-"
			}
			s += fmt.Sprintf(" %s=%s", p.Participant, f)
		}
		return s
	case Discard:
		s := fmt.Sprintf("discard %d %s", d.ID, d.Reason)
		if d.Participant != "" {
			s += " from=" + string(d.Participant)
		}
		if d.Metadata {
			s += " metadata"
		}
		if len(d.Files) > 0 {
			s += " files=" + strings.Join(d.Files, ",")
		}
		return s
	case NotifyComplete:
		s := fmt.Sprintf("notify-complete %d", d.ID)
		if d.Savepoint {
			s += " savepoint"
		}
		if d.Final {
			s += " final"
		}
		return s + " to=" + joinIDs(d.Participants)
	case NotifyAborted:
		return fmt.Sprintf("notify-aborted %d to=%s: %v", d.ID, joinIDs(d.Participants), d.Err)
	case Schedule:
		return "schedule " + rel(d.At)
	case Reserve:
		return fmt.Sprintf("reserve ids below %d", d.Limit)
	case Refused:
		s := "refused " + d.Reason.String()
		if d.Request != 0 {
			s += fmt.Sprintf(" request=%d", d.Request)
		}
		if !d.RetryAt.IsZero() {
			s += " retry=" + rel(d.RetryAt)
		}
		return s
	case Fail:
		return "FAIL: " + d.Err.Error()
	case Report:
		r := d.Record
		var acked []string
		for _, p := range r.Participants {
			if p.Acked {
				acked = append(acked, string(p.Participant))
			}
		}
		ack := strings.Join(acked, ",")
		if ack == "" {
			ack = "-"
		}
		s := fmt.Sprintf("report %d %s in %v acked=%s", r.ID, r.Status, r.Duration(), ack)
		if r.Bytes > 0 {
			s += fmt.Sprintf(" bytes=%d", r.Bytes)
		}
		if r.Final {
			s += " final"
		}
		if r.Err != nil {
			s += " (" + r.Err.Reason.String() + ")"
			if r.Err.Reason == AbortIncomplete {
				s += ": " + r.Err.Cause.Error()
			}
		}
		return s
	}
	return fmt.Sprintf("unknown decision %T", d)
}
