package storekit_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storekit"
)

// view is a View with no entries: CheckRestore reads only its header.
type view struct {
	maxP   int
	groups runtime.KeyGroupRange
	specs  []runtime.StateSpec
}

func (v view) MaxParallelism() int                               { return v.maxP }
func (v view) KeyGroups() runtime.KeyGroupRange                  { return v.groups }
func (v view) States() []runtime.StateSpec                       { return v.specs }
func (v view) Scan(string, int, func(runtime.Entry) error) error { return nil }

func spec(name, fp string) runtime.StateSpec {
	return runtime.StateSpec{Name: name, Kind: runtime.KindValue, Fingerprint: fp}
}

// target owns key groups [4, 8) of 16, has state "a" registered with
// fingerprint "v1", and holds entries of it in key group 6.
func target() storekit.Target {
	return storekit.Target{
		Name:   "kit",
		Config: runtime.StoreConfig{MaxParallelism: 16, KeyGroups: runtime.KeyGroupRange{Start: 4, End: 8}},
		Registered: func(name string) (runtime.StateSpec, bool) {
			if name == "a" {
				return spec("a", "v1"), true
			}
			return runtime.StateSpec{}, false
		},
		Occupied: func(name string, kg int) (bool, error) { return name == "a" && kg == 6, nil },
	}
}

func TestCheckRestore(t *testing.T) {
	all := runtime.FullRange(16)
	for _, tc := range []struct {
		name string
		src  runtime.View
		want error
		msg  string // a substring the error must hold
	}{
		{"nil view", nil, runtime.ErrInvalidView, "nil View"},
		{"max parallelism", view{maxP: 8, groups: runtime.FullRange(8)}, runtime.ErrMaxParallelismMismatch, "16"},
		{"key groups", view{maxP: 16, groups: runtime.KeyGroupRange{Start: 3, End: 20}}, runtime.ErrInvalidKeyGroup, ""},
		{"invalid state", view{maxP: 16, groups: all, specs: []runtime.StateSpec{{Name: "x"}}}, runtime.ErrInvalidState, ""},
		{"duplicate", view{maxP: 16, groups: all, specs: []runtime.StateSpec{spec("b", ""), spec("b", "")}}, runtime.ErrCorrupt, `"b" twice`},
		{"unsorted", view{maxP: 16, groups: all, specs: []runtime.StateSpec{spec("c", ""), spec("b", "")}}, runtime.ErrInvalidView, "not sorted"},
		{"mismatch", view{maxP: 16, groups: all, specs: []runtime.StateSpec{spec("a", "v2")}}, runtime.ErrStateMismatch, ""},
		{"conflict", view{maxP: 16, groups: all, specs: []runtime.StateSpec{spec("a", "v1")}}, runtime.ErrRestoreConflict, "key group 6"},
		// Checks run state by state: the first listing's conflict is
		// reported before the second listing is seen.
		{"order", view{maxP: 16, groups: all, specs: []runtime.StateSpec{spec("a", "v1"), spec("a", "v2")}}, runtime.ErrRestoreConflict, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := storekit.CheckRestore(target(), tc.src)
			if !errors.Is(err, tc.want) {
				t.Fatalf("CheckRestore = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), "kit") || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not name the store and %q", err, tc.msg)
			}
		})
	}
}

func TestCheckRestoreLoadsOwnedGroups(t *testing.T) {
	// Key group 6 holds entries of "a", but a view of [0, 6) does not
	// restore it: no conflict, and only the owned part is loaded.
	src := view{maxP: 16, groups: runtime.KeyGroupRange{Start: 0, End: 6}, specs: []runtime.StateSpec{spec("a", "v1"), spec("b", "")}}
	r, err := storekit.CheckRestore(target(), src)
	if err != nil {
		t.Fatal(err)
	}
	if r.Groups != (runtime.KeyGroupRange{Start: 4, End: 6}) || len(r.States) != 2 {
		t.Errorf("CheckRestore = %+v, want groups [4, 6) and 2 states", r)
	}
}

func TestCheckOccupiedError(t *testing.T) {
	boom := errors.New("boom")
	tg := target()
	tg.Occupied = func(string, int) (bool, error) { return false, boom }
	_, err := storekit.CheckRestore(tg, view{maxP: 16, groups: runtime.FullRange(16), specs: []runtime.StateSpec{spec("a", "v1")}})
	if !errors.Is(err, boom) {
		t.Fatalf("CheckRestore = %v, want the Occupied error", err)
	}
}

func TestCheckEntry(t *testing.T) {
	value := spec("v", "")
	sub := value
	sub.SubKeyed = true
	m := spec("m", "")
	m.Kind = runtime.KindMap
	for _, tc := range []struct {
		name      string
		spec      runtime.StateSpec
		kg, group int
		e         runtime.Entry
		ok        bool
	}{
		{"value", value, 3, 3, runtime.Entry{Key: []byte("k")}, true},
		{"other group", value, 3, 4, runtime.Entry{Key: []byte("k")}, false},
		{"namespace in keyed", value, 3, 3, runtime.Entry{Key: []byte("k"), Namespace: []byte("n")}, false},
		{"namespace in sub-keyed", sub, 3, 3, runtime.Entry{Key: []byte("k"), Namespace: []byte("n")}, true},
		{"user key in value", value, 3, 3, runtime.Entry{Key: []byte("k"), UserKey: []byte("u")}, false},
		{"user key in map", m, 3, 3, runtime.Entry{Key: []byte("k"), UserKey: []byte("u")}, true},
	} {
		err := storekit.CheckEntry(tc.spec, tc.kg, tc.group, tc.e)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, runtime.ErrCorrupt)) {
			t.Errorf("%s: CheckEntry = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestCheckRegister(t *testing.T) {
	tg := target()
	for _, tc := range []struct {
		name              string
		closed, iterating bool
		spec              runtime.StateSpec
		existing          bool
		want              error
	}{
		{"closed", true, false, spec("a", "v1"), false, runtime.ErrClosed},
		{"invalid", false, false, runtime.StateSpec{Name: "x"}, false, runtime.ErrInvalidState},
		{"mismatch", false, false, spec("a", "v2"), false, runtime.ErrStateMismatch},
		{"existing", false, true, spec("a", "v1"), true, nil},
		{"new", false, false, spec("b", ""), false, nil},
		{"new while iterating", false, true, spec("b", ""), false, runtime.ErrWriteDuringIteration},
	} {
		existing, err := storekit.CheckRegister(tg, tc.closed, tc.iterating, tc.spec)
		if existing != tc.existing || !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%s: CheckRegister = %v, %v; want %v, %v", tc.name, existing, err, tc.existing, tc.want)
		}
	}
}
