package storekit_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storekit"
)

// entriesView is a snapshot holding the given entries of every state in
// every key group.
type entriesView struct {
	view
	entries []runtime.Entry
}

func (v entriesView) Scan(_ string, _ int, fn func(runtime.Entry) error) error {
	for _, e := range v.entries {
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}
func (v entriesView) Release() error { return nil }

type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

// TestDropExpired: a snapshot leaves out the entries of states with a TTL
// that are expired at the time of the snapshot — last update plus TTL at
// or before it — and keeps the others, and every entry of states without
// one; a value too short for its stamp fails the Scan with ErrCorrupt,
// naming the state and key.
func TestDropExpired(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	stamped := func(at int64, v string) runtime.Entry {
		return runtime.Entry{Key: []byte("k" + v), Value: append(runtime.AppendTTLStamp(nil, at), v...)}
	}
	entries := []runtime.Entry{
		stamped(1_000_000-1000, "expired-at-now"), // TTL 1s: exactly expired
		stamped(1_000_000-999, "live"),
		stamped(1_000_000+5, "future"),
		{Key: []byte("kshort"), Value: []byte{1}},
	}
	specs := []runtime.StateSpec{
		{Name: "plain", Kind: runtime.KindValue},
		{Name: "ttl", Kind: runtime.KindValue, TTL: time.Second},
	}
	cfg := runtime.StoreConfig{MaxParallelism: 4, Clock: fixedClock(now)}
	snap := storekit.DropExpired(entriesView{view{4, runtime.FullRange(4), specs}, entries}, &cfg)
	var plain int
	if err := snap.Scan("plain", 0, func(runtime.Entry) error { plain++; return nil }); err != nil || plain != len(entries) {
		t.Errorf("a state without a TTL: %d entries, %v; want all %d", plain, err, len(entries))
	}
	var kept []string
	err := snap.Scan("ttl", 0, func(e runtime.Entry) error { kept = append(kept, string(e.Key)); return nil })
	if !errors.Is(err, runtime.ErrCorrupt) || !strings.Contains(err.Error(), `"ttl"`) || !strings.Contains(err.Error(), "6b73686f7274") {
		t.Errorf("Scan over a value shorter than its stamp: %v, want ErrCorrupt naming the state and key", err)
	}
	if strings.Join(kept, ",") != "klive,kfuture" {
		t.Errorf("kept %v, want klive and kfuture", kept)
	}
	noTTL := &entriesView{view{4, runtime.FullRange(4), specs[:1]}, entries}
	if got := storekit.DropExpired(noTTL, &cfg); got != runtime.Snapshot(noTTL) {
		t.Errorf("a snapshot without TTL states was wrapped: %T", got)
	}
}
