package runtime_test

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stategen/stategen/runtime"
)

// sess is a session window in the merge tests: its start.
type sess = int64

// TestMergeNamespaces merges session windows of a Value, a List and a
// SortedMap: the target's content combined with the sources', in the order
// given; sources removed; the target, repeats and absent sources ignored;
// no source with content, no change; a nil merge function refused.
func TestMergeNamespaces(t *testing.T) {
	for name, newStore := range backendsFor(t) {
		t.Run(name, func(t *testing.T) {
			s := newStore(runtime.StoreConfig{})
			counts := must[runtime.SubKeyedValue[string, sess, string]](t)(runtime.NewSubKeyedValue(s, runtime.SubKeyedValueDescriptor[string, sess, string]{
				Name: "counts", Key: runtime.StringCodec{}, Namespace: runtime.Int64Codec{}, Value: runtime.StringCodec{},
			}))
			events := must[runtime.SubKeyedList[string, sess, string]](t)(runtime.NewSubKeyedList(s, runtime.SubKeyedListDescriptor[string, sess, string]{
				Name: "events", Key: runtime.StringCodec{}, Namespace: runtime.Int64Codec{}, Value: runtime.StringCodec{},
			}))
			pages := must[runtime.SubKeyedSortedMap[string, sess, string, int64]](t)(runtime.NewSubKeyedSortedMap(s, runtime.SubKeyedMapDescriptor[string, sess, string, int64]{
				Name: "pages", Key: runtime.StringCodec{}, Namespace: runtime.Int64Codec{}, UserKey: runtime.StringCodec{}, Value: runtime.Int64Codec{},
			}))
			concat := func(a, b string) string { return a + "+" + b }

			// Values: the target has one; source 3 is absent; 2 repeats;
			// the target itself is listed.
			check(t, counts.Put("ann", 1, "t"))
			check(t, counts.Put("ann", 2, "a"))
			check(t, counts.Put("ann", 4, "b"))
			check(t, counts.Put("bob", 2, "other key"))
			check(t, counts.Merge("ann", 1, []sess{2, 3, 1, 4, 2}, concat))
			wantValues(t, counts, "ann", map[sess]string{1: "t+a+b"})
			wantValues(t, counts, "bob", map[sess]string{2: "other key"})
			// No target value: the first source's starts the fold.
			check(t, counts.Put("ann", 7, "x"))
			check(t, counts.Put("ann", 8, "y"))
			check(t, counts.Merge("ann", 6, []sess{8, 7}, concat))
			wantValues(t, counts, "ann", map[sess]string{1: "t+a+b", 6: "y+x"})
			// No source has a value: nothing changes, not even an empty target.
			check(t, counts.Merge("ann", 9, []sess{10, 11}, concat))
			wantValues(t, counts, "ann", map[sess]string{1: "t+a+b", 6: "y+x"})
			if err := counts.Merge("ann", 1, []sess{6}, nil); err == nil {
				t.Error("Merge with a nil merge function succeeded")
			}

			// Lists: elements appended in the order of the sources.
			for _, e := range []struct {
				w sess
				v string
			}{{1, "t1"}, {2, "a1"}, {2, "a2"}, {3, "b1"}} {
				check(t, events.Add("ann", e.w, e.v))
			}
			check(t, events.Merge("ann", 1, []sess{3, 2, 5}))
			if got := must[[]string](t)(events.Get("ann", 1)); !slices.Equal(got, []string{"t1", "b1", "a1", "a2"}) {
				t.Errorf("merged list = %v", got)
			}
			for _, w := range []sess{2, 3} {
				if got := must[[]string](t)(events.Get("ann", w)); len(got) != 0 {
					t.Errorf("source list %d = %v after the merge, want it gone", w, got)
				}
			}

			// Maps: conflicts merged, the rest moved; with a nil merge the
			// later value wins.
			check(t, pages.Put("ann", 1, "/a", 1))
			check(t, pages.Put("ann", 2, "/a", 10))
			check(t, pages.Put("ann", 2, "/b", 20))
			check(t, pages.Put("ann", 3, "/b", 300))
			check(t, pages.Put("ann", 3, "/c", 400))
			sum := func(_ string, a, b int64) int64 { return a + b }
			check(t, pages.Merge("ann", 1, []sess{2, 3}, sum))
			wantMap(t, pages, 1, map[string]int64{"/a": 11, "/b": 320, "/c": 400})
			wantMap(t, pages, 2, map[string]int64{})
			check(t, pages.Put("ann", 5, "/a", 5))
			check(t, pages.Merge("ann", 1, []sess{5}, nil))
			wantMap(t, pages, 1, map[string]int64{"/a": 5, "/b": 320, "/c": 400})
			var zero runtime.SubKeyedList[string, sess, string]
			if err := zero.Merge("ann", 1, []sess{2}); !errors.Is(err, runtime.ErrUnbound) {
				t.Errorf("Merge on a zero handle: %v, want ErrUnbound", err)
			}
		})
	}
}

func wantValues(t *testing.T, v runtime.SubKeyedValue[string, sess, string], k string, want map[sess]string) {
	t.Helper()
	got := map[sess]string{}
	for ns, err := range v.Namespaces(k) {
		check(t, err)
		got[ns], _, _ = v.Get(k, ns)
	}
	if !maps.Equal(got, want) {
		t.Errorf("values of %s = %v, want %v", k, got, want)
	}
}

func wantMap(t *testing.T, m runtime.SubKeyedSortedMap[string, sess, string, int64], w sess, want map[string]int64) {
	t.Helper()
	got := map[string]int64{}
	for e, err := range m.All("ann", w) {
		check(t, err)
		got[e.Key] = e.Value
	}
	if !maps.Equal(got, want) {
		t.Errorf("map of sess %d = %v, want %v", w, got, want)
	}
}

// TestMergeFromMerge calls Merge from inside a merge function, on the same
// handle and another key, with long keys and many sources (so that the
// scratch Merge builds its keys in grows while in use): both merges are
// exact, and a Merge after them too.
func TestMergeFromMerge(t *testing.T) {
	for name, newStore := range backendsFor(t) {
		t.Run(name, func(t *testing.T) {
			s := newStore(runtime.StoreConfig{})
			v := must[runtime.SubKeyedValue[string, sess, string]](t)(runtime.NewSubKeyedValue(s, runtime.SubKeyedValueDescriptor[string, sess, string]{
				Name: "v", Key: runtime.StringCodec{}, Namespace: runtime.Int64Codec{}, Value: runtime.StringCodec{},
			}))
			ann, bob := "ann-"+string(make([]byte, 300)), "bob-"+string(make([]byte, 500))
			var srcs []sess
			for w := sess(1); w <= 40; w++ {
				check(t, v.Put(ann, w, "a"))
				check(t, v.Put(bob, w, "b"))
				srcs = append(srcs, w)
			}
			inner := 0
			check(t, v.Merge(ann, 100, srcs, func(acc, x string) string {
				if inner == 0 {
					inner++
					check(t, v.Merge(bob, 200, srcs, func(acc, x string) string { return acc + x }))
				}
				got, ok, err := v.Get(ann, 40)
				if err != nil || !ok || got != "a" {
					t.Errorf("Get from a merge function = %q, %v, %v; want \"a\", true", got, ok, err)
				}
				return acc + x
			}))
			wantValues(t, v, ann, map[sess]string{100: strings.Repeat("a", 40)})
			wantValues(t, v, bob, map[sess]string{200: strings.Repeat("b", 40)})
			check(t, v.Put(ann, 1, "c"))
			check(t, v.Merge(ann, 1, []sess{100, 100, 1}, func(acc, x string) string { return acc + x }))
			wantValues(t, v, ann, map[sess]string{1: "c" + strings.Repeat("a", 40)})
		})
	}
}
