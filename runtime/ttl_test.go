package runtime_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

// TestTTLBadInput: a TTL that is negative, finer than a millisecond, or
// has options without a duration is refused when the handle is bound,
// naming the state; a zero TTL is no TTL.
func TestTTLBadInput(t *testing.T) {
	s := must[*storetest.Model](t)(storetest.NewModel(runtime.StoreConfig{}))
	for _, c := range []struct {
		ttl  runtime.TTL
		want string
	}{
		{runtime.TTL{Duration: -time.Second}, "is negative"},
		{runtime.TTL{Duration: 1500 * time.Microsecond}, "whole number of milliseconds"},
		{runtime.TTL{Update: runtime.TTLOnReadAndWrite}, "duration is zero"},
		{runtime.TTL{CleanupPerWrite: 3}, "duration is zero"},
		{runtime.TTL{Duration: time.Second, Update: 7}, "unknown update type"},
	} {
		_, err := runtime.NewValue(s, runtime.ValueDescriptor[string, int64]{
			Name: "bad", Key: runtime.StringCodec{}, Value: runtime.Int64Codec{}, TTL: c.ttl,
		})
		if !errors.Is(err, runtime.ErrInvalidState) || !strings.Contains(err.Error(), `"bad"`) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("TTL %+v: %v, want ErrInvalidState naming the state and saying %q", c.ttl, err, c.want)
		}
	}
	if len(s.States()) != 0 {
		t.Errorf("refused descriptors registered %v", s.States())
	}
	if _, err := runtime.NewValue(s, runtime.ValueDescriptor[string, int64]{Name: "none", Key: runtime.StringCodec{}, Value: runtime.Int64Codec{}}); err != nil {
		t.Errorf("the zero TTL: %v", err)
	}
	// Timers take no TTL, and an entry too short for its stamp is corrupt.
	raw := must[runtime.State](t)(s.Register(runtime.StateSpec{Name: "short", Kind: runtime.KindValue, TTL: time.Second}))
	check(t, raw.(runtime.ValueState).Put(runtime.MakeKey(runtime.BytesCodec{}.AppendKey(nil, []byte("k")), nil, runtime.DefaultMaxParallelism), []byte{1, 2}))
	v := must[runtime.Value[[]byte, int64]](t)(runtime.NewValue(s, runtime.ValueDescriptor[[]byte, int64]{
		Name: "short", Key: runtime.BytesCodec{}, Value: runtime.Int64Codec{}, TTL: runtime.TTL{Duration: time.Second},
	}))
	if _, _, err := v.Get([]byte("k")); !errors.Is(err, runtime.ErrCorrupt) || !strings.Contains(err.Error(), `"short"`) {
		t.Errorf("Get of a value shorter than its stamp: %v, want ErrCorrupt naming the state", err)
	}
	// The model's Snapshot checks stamps as it copies; a backend's Scan
	// does (storekit.DropExpired, tested in the backends' conformance).
	if _, err := s.Snapshot(); !errors.Is(err, runtime.ErrCorrupt) || !strings.Contains(err.Error(), `"short"`) {
		t.Errorf("snapshot of a value shorter than its stamp: %v, want ErrCorrupt naming the state", err)
	}
}

// TestTTLSemantics pins Flink's TTL rules on every backend: an entry
// expires when its last update plus the TTL is at or before now; writes
// renew it, reads too under TTLOnReadAndWrite (but not from inside an
// iteration, where writes are refused); Update and Merge see an expired
// value as absent.
func TestTTLSemantics(t *testing.T) {
	const ttl = 10 * time.Second
	for name, newStore := range backendsFor(t) {
		t.Run(name, func(t *testing.T) {
			clock := storetest.NewManualClock(time.Unix(1_800_000_000, 0))
			s := newStore(runtime.StoreConfig{MaxParallelism: 16, Clock: clock})
			v := must[runtime.SubKeyedValue[string, int64, int64]](t)(runtime.NewSubKeyedValue(s, runtime.SubKeyedValueDescriptor[string, int64, int64]{
				Name: "v", Key: runtime.StringCodec{}, Namespace: runtime.Int64Codec{}, Value: runtime.Int64Codec{}, TTL: runtime.TTL{Duration: ttl},
			}))
			rv := must[runtime.Value[string, int64]](t)(runtime.NewValue(s, runtime.ValueDescriptor[string, int64]{
				Name: "rv", Key: runtime.StringCodec{}, Value: runtime.Int64Codec{}, TTL: runtime.TTL{Duration: ttl, Update: runtime.TTLOnReadAndWrite},
			}))
			l := must[runtime.List[string, int64]](t)(runtime.NewList(s, runtime.ListDescriptor[string, int64]{
				Name: "l", Key: runtime.StringCodec{}, Value: runtime.Int64Codec{}, TTL: runtime.TTL{Duration: ttl},
			}))
			get := func(k string, n int64) (int64, bool) {
				t.Helper()
				x, ok, err := v.Get(k, n)
				check(t, err)
				return x, ok
			}
			check(t, v.Put("a", 1, 10))
			check(t, rv.Put("a", 10))
			check(t, l.Add("a", 1))
			clock.Advance(ttl - time.Millisecond)
			if _, ok := get("a", 1); !ok {
				t.Fatal("expired 1ms before its TTL")
			}
			check(t, l.Add("a", 2))
			if _, ok, _ := rv.Get("a"); !ok { // renews it
				t.Fatal("the read-and-write value expired 1ms before its TTL")
			}
			clock.Advance(time.Millisecond)
			if ok, err := v.Contains("a", 1); ok || err != nil {
				t.Errorf("Contains at last update + TTL = %v, %v; want it expired", ok, err)
			}
			if x, ok := get("a", 1); ok {
				t.Errorf("Get at last update + TTL = %d, want it expired", x)
			}
			if got := must[[]int64](t)(l.Get("a")); !slices.Equal(got, []int64{2}) {
				t.Errorf("list at the first element's expiry = %v, want [2]", got)
			}
			if _, ok, _ := rv.Get("a"); !ok {
				t.Error("a read did not renew the read-and-write value")
			}
			// Update sees the expired value as absent.
			check(t, v.Update("a", 1, func(old int64, found bool) int64 {
				if found {
					t.Errorf("Update saw the expired value %d", old)
				}
				return 5
			}))
			if x, ok := get("a", 1); !ok || x != 5 {
				t.Errorf("after Update: %d, %v", x, ok)
			}
			// Merge ignores expired sources.
			check(t, v.Put("a", 2, 100))
			clock.Advance(ttl / 2)
			check(t, v.Put("a", 3, 1000))
			clock.Advance(ttl/2 + time.Millisecond) // 1 and 2 expired, 3 live
			check(t, v.Merge("a", 4, []int64{1, 2, 3}, func(acc, x int64) int64 { return acc + x }))
			if x, ok := get("a", 4); !ok || x != 1000 {
				t.Errorf("merge of one live and two expired sources = %d, %v; want 1000", x, ok)
			}
			// A read from inside an iteration of the store cannot renew:
			// it returns the value and leaves the stamp as it was.
			check(t, rv.Put("b", 7))
			clock.Advance(ttl - time.Millisecond)
			for _, err := range v.Namespaces("a") {
				check(t, err)
				if x, ok, err := rv.Get("b"); err != nil || !ok || x != 7 {
					t.Fatalf("a read-and-write Get from inside an iteration: %d, %v, %v", x, ok, err)
				}
			}
			clock.Advance(time.Millisecond)
			if _, ok, _ := rv.Get("b"); ok {
				t.Error("a read from inside an iteration renewed the value")
			}
		})
	}
}

// TestTTLMapOnReadAndWrite: reading a map entry, or visiting it, renews it
// under TTLOnReadAndWrite, also from inside another iteration, where the
// renewal is skipped but the visit happens once; Edit deletes the expired
// entries it meets; Update sees an expired entry as absent.
func TestTTLMapOnReadAndWrite(t *testing.T) {
	const ttl = time.Minute
	for name, newStore := range backendsFor(t) {
		t.Run(name, func(t *testing.T) {
			clock := storetest.NewManualClock(time.Unix(1_800_000_000, 0))
			s := newStore(runtime.StoreConfig{MaxParallelism: 16, Clock: clock})
			m := must[runtime.SortedMap[string, int64, string]](t)(runtime.NewSortedMap(s, runtime.MapDescriptor[string, int64, string]{
				Name: "m", Key: runtime.StringCodec{}, UserKey: runtime.Int64Codec{}, Value: runtime.StringCodec{},
				TTL: runtime.TTL{Duration: ttl, Update: runtime.TTLOnReadAndWrite},
			}))
			for i := range int64(4) {
				check(t, m.Put("k", i, "v"))
			}
			clock.Advance(ttl / 2)
			_ = must[bool](t)(m.Contains("k", 0))    // renews 0
			for e, err := range m.Range("k", 2, 4) { // renews 2 and 3
				check(t, err)
				_ = e
			}
			clock.Advance(ttl / 2)
			var keys []int64
			for e, err := range m.All("k") {
				check(t, err)
				keys = append(keys, e.Key)
			}
			if !slices.Equal(keys, []int64{0, 2, 3}) {
				t.Errorf("live keys = %v, want [0 2 3] (1 was not read)", keys)
			}
			// From inside another iteration of the store the visit cannot
			// renew; it still sees each entry once.
			for range m.Keys("k") {
				n := 0
				for _, err := range m.All("k") {
					check(t, err)
					n++
				}
				if n != 3 {
					t.Fatalf("All from inside Keys saw %d entries, want 3", n)
				}
				break
			}
			first, ok, err := m.First("k")
			if check(t, err); !ok || first.Key != 0 {
				t.Errorf("First = %v, %v", first, ok)
			}
			// Edit deletes the expired entries it meets: the raw state
			// holds 1 no more.
			check(t, m.Edit("k", func(uk int64, v *string) (runtime.EditAction, error) { return runtime.EditKeep, nil }))
			raw := must[runtime.State](t)(s.Register(m.Spec()))
			n := 0
			check(t, raw.(runtime.MapState).Iterate(runtime.MakeKey(runtime.StringCodec{}.AppendKey(nil, "k"), nil, 16), func(uk, v []byte) bool { n++; return true }))
			if n != 3 {
				t.Errorf("the store holds %d entries after a read-and-write walk, want 3 (the expired one deleted)", n)
			}
			// Update sees an expired entry as absent, and stamps its result.
			check(t, m.Put("k", 9, "old"))
			clock.Advance(ttl)
			check(t, m.Update("k", 9, func(old string, found bool) string {
				if found {
					t.Errorf("Update saw the expired entry %q", old)
				}
				return "new"
			}))
			clock.Advance(ttl - time.Millisecond)
			check(t, m.Update("k", 9, func(old string, found bool) string {
				if !found || old != "new" {
					t.Errorf("Update 1ms before the entry expires saw (%q, %v), want (new, true)", old, found)
				}
				return old + "er"
			}))
			clock.Advance(ttl - time.Millisecond)
			if v, ok, _ := m.Get("k", 9); !ok || v != "newer" {
				t.Errorf("after two Updates: (%q, %v), want (newer, true): the last Update renews the entry", v, ok)
			}
		})
	}
}
