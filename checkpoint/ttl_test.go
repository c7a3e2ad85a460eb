package checkpoint_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

var ttlStart = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// ttlStore returns a model store on clock with a Value state "v" of the
// given TTL (zero: none).
func ttlStore(t *testing.T, clock *storetest.ManualClock, ttl time.Duration) (*storetest.Model, runtime.Value[string, string]) {
	t.Helper()
	m, err := storetest.NewModel(runtime.StoreConfig{MaxParallelism: 8, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	v, err := runtime.NewValue(m, runtime.ValueDescriptor[string, string]{
		Name: "v", Key: runtime.StringCodec{}, Value: runtime.StringCodec{}, TTL: runtime.TTL{Duration: ttl},
	})
	if err != nil {
		t.Fatal(err)
	}
	return m, v
}

// present returns which of keys v finds.
func present(t *testing.T, v runtime.Value[string, string], keys ...string) []string {
	t.Helper()
	var out []string
	for _, k := range keys {
		got, ok, err := v.Get(k)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			if got != "value of "+k {
				t.Fatalf("Get(%q) = %q", k, got)
			}
			out = append(out, k)
		}
	}
	return out
}

// TestRestoreAppliesTheCodesTTL pins what a restore does to the TTL of a
// state (runtime.TTL's doc): the stamps are the times of the last updates,
// so a TTL changed since the checkpoint applies to them at once; a TTL
// removed strips them (the values never expire), a TTL added stamps every
// value with the restore's time.
func TestRestoreAppliesTheCodesTTL(t *testing.T) {
	clock := storetest.NewManualClock(ttlStart)
	src, v := ttlStore(t, clock, time.Hour)
	put := func(v runtime.Value[string, string], k string) {
		if err := v.Put(k, "value of "+k); err != nil {
			t.Fatal(err)
		}
	}
	put(v, "old") // at +0
	clock.Advance(30 * time.Minute)
	put(v, "new") // at +30m
	s := checkpoint.NewMem()
	checkpointStores(t, s, "ttl", []*storetest.Model{src})
	plain, pv := ttlStore(t, clock, 0)
	put(pv, "old")
	put(pv, "new")
	checkpointStores(t, s, "plain", []*storetest.Model{plain})
	clock.Advance(5 * time.Minute) // +35m: the restores happen now

	restore := func(ckpt string, ttl time.Duration) (runtime.Value[string, string], checkpoint.RestoreStats) {
		t.Helper()
		m, v := ttlStore(t, clock, ttl)
		stats, err := checkpoint.Restore(ctx, s, ckpt, "op", 0, 1, m, nil)
		if err != nil {
			t.Fatalf("restore of %s with TTL %v: %v", ckpt, ttl, err)
		}
		return v, stats
	}
	t.Run("Shortened", func(t *testing.T) {
		v, stats := restore("ttl", 20*time.Minute)
		if got := present(t, v, "old", "new"); len(got) != 1 || got[0] != "new" {
			t.Errorf("at +35m with a TTL of 20m: present %v, want only new (updated at +30m)", got)
		}
		if len(stats.Migrated) != 0 {
			t.Errorf("a changed TTL alone migrated %v", stats.Migrated)
		}
	})
	t.Run("Lengthened", func(t *testing.T) {
		v, _ := restore("ttl", 3*time.Hour)
		if got := present(t, v, "old", "new"); len(got) != 2 {
			t.Errorf("at +35m with a TTL of 3h: present %v, want both", got)
		}
	})
	t.Run("Removed", func(t *testing.T) {
		v, stats := restore("ttl", 0)
		clock.Advance(1000 * time.Hour)
		defer clock.Advance(-1000 * time.Hour)
		if got := present(t, v, "old", "new"); len(got) != 2 {
			t.Errorf("with the TTL removed, 1000h later: present %v, want both", got)
		}
		if ch := strings.Join(stats.Migrated["v"], "; "); !strings.Contains(ch, "TTL of 1h0m0s removed") {
			t.Errorf("Migrated = %q, want it to say the TTL was removed", ch)
		}
	})
	t.Run("Added", func(t *testing.T) {
		v, stats := restore("plain", 10*time.Minute)
		if ch := strings.Join(stats.Migrated["v"], "; "); !strings.Contains(ch, "TTL of 10m0s added") {
			t.Errorf("Migrated = %q, want it to say the TTL was added", ch)
		}
		clock.Advance(10*time.Minute - time.Millisecond)
		if got := present(t, v, "old", "new"); len(got) != 2 {
			t.Errorf("1ms before the restore's time plus the new TTL: present %v, want both", got)
		}
		clock.Advance(time.Millisecond)
		if got := present(t, v, "old", "new"); len(got) != 0 {
			t.Errorf("at the restore's time plus the new TTL: present %v, want none (expired)", got)
		}
		clock.Advance(-10 * time.Minute)
	})
	t.Run("Snapshot", func(t *testing.T) {
		// The snapshot taken at +35m holds what is live then: the TTL
		// checkpoint, restored with a TTL of 20m and checkpointed again,
		// keeps only "new", with its stamp.
		m, _ := ttlStore(t, clock, 20*time.Minute)
		if _, err := checkpoint.Restore(ctx, s, "ttl", "op", 0, 1, m, nil); err != nil {
			t.Fatal(err)
		}
		s2 := checkpoint.NewMem()
		checkpointStores(t, s2, "again", []*storetest.Model{m})
		m2, v2 := ttlStore(t, clock, time.Hour)
		if _, err := checkpoint.Restore(ctx, s2, "again", "op", 0, 1, m2, nil); err != nil {
			t.Fatal(err)
		}
		if got := present(t, v2, "old", "new"); len(got) != 1 || got[0] != "new" {
			t.Errorf("restored from the second checkpoint with a TTL of 1h: present %v, want only new (old was expired when it was taken)", got)
		}
		r, err := checkpoint.Open(ctx, s2, "again")
		if err != nil {
			t.Fatal(err)
		}
		op, _ := r.Metadata().Operator("op")
		if len(op.States) != 1 || op.States[0].TTL != 20*time.Minute {
			t.Errorf("the metadata records %v, want the state with its TTL of 20m", op.States)
		}
		if op.Instances[0].File.Entries != 1 {
			t.Errorf("the checkpoint holds %d entries, want 1: expired entries stay out of snapshots", op.Instances[0].File.Entries)
		}
	})
}

// TestRestoreProgress: a restore with RestoreOptions.Progress reports, at
// its end at the latest, every entry of the files' indexes loaded, and the
// bytes read.
func TestRestoreProgress(t *testing.T) {
	v := genView(41, 8, runtime.FullRange(8), 300, 0)
	s := setup(t, v)
	m := newModel(t, 8, 1, 0)
	var last checkpoint.RestoreProgress
	calls := 0
	stats, err := checkpoint.Restore(ctx, s, "chk", "op", 0, 1, m, &checkpoint.RestoreOptions{Progress: func(p checkpoint.RestoreProgress) { last = p; calls++ }})
	if err != nil {
		t.Fatal(err)
	}
	if calls == 0 || last.Entries != stats.Entries || last.TotalEntries != stats.Entries || last.BytesRead == 0 || last.Files != 1 {
		t.Errorf("%d progress reports, the last %+v; the restore loaded %d entries", calls, last, stats.Entries)
	}
}
