package etcdcoord

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime/coordinator"
)

// DefaultPrefix is where a Job's keys live unless Job.Prefix says
// otherwise.
const DefaultPrefix = "/stategen"

// Job names a job in etcd: its keys live under Prefix/Name/.
type Job struct {
	// Name is the job's name: a valid checkpoint name
	// (checkpoint.ValidateName), e.g. "clickstream". Required.
	Name string
	// Prefix is the key prefix of stategen's jobs; empty means
	// DefaultPrefix. It must begin with '/' and not end with one.
	Prefix string
}

// keys lays out a job's keys (see the package doc, "Keys").
type keys struct{ root string }

func newKeys(j Job) (keys, error) {
	if err := checkpoint.ValidateName(j.Name); err != nil {
		return keys{}, fmt.Errorf("etcdcoord: Job.Name: %w", err)
	}
	prefix := j.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if !strings.HasPrefix(prefix, "/") || strings.HasSuffix(prefix, "/") {
		return keys{}, fmt.Errorf("etcdcoord: Job.Prefix %q must begin with '/' and not end with one", prefix)
	}
	return keys{root: prefix + "/" + j.Name}, nil
}

func (k keys) election() string  { return k.root + "/election" }
func (k keys) counter() string   { return k.root + "/counter" }
func (k keys) completed() string { return k.root + "/completed" }
func (k keys) members() string   { return k.root + "/members/" }
func (k keys) inboxes() string   { return k.root + "/inbox/" }
func (k keys) acks() string      { return k.root + "/acks/" }

func (k keys) member(p coordinator.ParticipantID) string { return k.members() + escape(p) }
func (k keys) inbox(p coordinator.ParticipantID) string  { return k.inboxes() + escape(p) + "/" }

func (k keys) trigger(p coordinator.ParticipantID, id coordinator.CheckpointID) string {
	return k.inbox(p) + "t/" + idKey(id)
}

func (k keys) note(p coordinator.ParticipantID, id coordinator.CheckpointID) string {
	return k.inbox(p) + "n/" + idKey(id)
}

func (k keys) ack(id coordinator.CheckpointID, p coordinator.ParticipantID) string {
	return k.acks() + idKey(id) + "/" + escape(p)
}

// escape makes a participant id one key element: '/' and '%' are escaped,
// so "op/3" becomes "op%2F3".
func escape(p coordinator.ParticipantID) string { return url.PathEscape(string(p)) }

func unescape(s string) (coordinator.ParticipantID, bool) {
	p, err := url.PathUnescape(s)
	if err != nil || p == "" || escape(coordinator.ParticipantID(p)) != s {
		return "", false
	}
	return coordinator.ParticipantID(p), true
}

// idKey writes an id in 20 digits, so that keys sort like ids.
func idKey(id coordinator.CheckpointID) string { return fmt.Sprintf("%020d", uint64(id)) }

func parseIDKey(s string) (coordinator.CheckpointID, bool) {
	if len(s) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 || n >= uint64(coordinator.MaxID) {
		return 0, false
	}
	return coordinator.CheckpointID(n), true
}

// parseMember returns the participant of a key under members().
func (k keys) parseMember(key string) (coordinator.ParticipantID, bool) {
	rest, ok := strings.CutPrefix(key, k.members())
	if !ok {
		return "", false
	}
	return unescape(rest)
}

// parseInbox splits a key under inboxes() into its participant, kind ('t'
// for a trigger, 'n' for a notification) and checkpoint id.
func (k keys) parseInbox(key string) (p coordinator.ParticipantID, kind byte, id coordinator.CheckpointID, ok bool) {
	rest, ok := strings.CutPrefix(key, k.inboxes())
	if !ok {
		return "", 0, 0, false
	}
	esc, rest, ok := strings.Cut(rest, "/")
	if !ok {
		return "", 0, 0, false
	}
	if p, ok = unescape(esc); !ok {
		return "", 0, 0, false
	}
	switch {
	case strings.HasPrefix(rest, "t/"):
		kind = 't'
	case strings.HasPrefix(rest, "n/"):
		kind = 'n'
	default:
		return "", 0, 0, false
	}
	if id, ok = parseIDKey(rest[2:]); !ok {
		return "", 0, 0, false
	}
	return p, kind, id, true
}

// parseAck splits a key under acks() into its checkpoint id and
// participant.
func (k keys) parseAck(key string) (coordinator.CheckpointID, coordinator.ParticipantID, bool) {
	rest, ok := strings.CutPrefix(key, k.acks())
	if !ok {
		return 0, "", false
	}
	ids, esc, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, "", false
	}
	id, ok := parseIDKey(ids)
	if !ok {
		return 0, "", false
	}
	p, ok := unescape(esc)
	return id, p, ok
}
