package benchmarks

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBackendsDoTheSameWork runs one sequence of operations on every
// backend of the benchmarks, the baselines included, and checks that all
// return the same results and that their snapshots hold the same entries
// and bytes, as of the snapshot: a baseline that did less work than a store
// would make every comparison with it wrong.
func TestBackendsDoTheSameWork(t *testing.T) {
	w := &workload{pads: makePads(8)}
	var want []string
	for _, be := range allBackends() {
		t.Run(be.name, func(t *testing.T) {
			tg, err := be.open(filepath.Join(t.TempDir(), "target"))
			if err != nil {
				t.Fatal(err)
			}
			got := exercise(t, w, tg)
			if err := tg.close(); err != nil {
				t.Fatal(err)
			}
			if want == nil {
				want = got
				return
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("%s differs from %s (-%s +%s):\n%s", be.name, allBackends()[0].name, allBackends()[0].name, be.name, d)
			}
		})
	}
}

// exercise runs the operations of every benchmark on tg and returns what
// they returned, one line each.
func exercise(t *testing.T, w *workload, tg target) []string {
	var out []string
	note := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for k := range int64(50) {
		must(tg.putValue(k, w.fresh(int(k))))
	}
	must(tg.putValue(7, w.val(1007)))
	for _, k := range []int64{0, 7, 49, 50} {
		v, ok, err := tg.getValue(k)
		must(err)
		note("value %d: %v %v", k, v, ok)
	}
	for k := range int64(5) {
		must(tg.addAllList(k, w.vals()[:3]))
		must(tg.addList(k, w.val(int(k))))
	}
	must(tg.updateList(2, w.vals()[:2]))
	must(tg.addList(9, w.val(9)))
	for _, k := range []int64{0, 2, 4, 8, 9} {
		n, err := tg.readList(k)
		must(err)
		note("list %d: %d elements", k, n)
	}
	for k := range int64(5) {
		for uk := range int64(mapFanout) {
			must(tg.putMap(k, uk, w.fresh(int(k*mapFanout+uk))))
		}
	}
	must(tg.deleteMap(1, 3))
	must(tg.deleteMap(1, 99))
	must(tg.putMap(2, 3, w.val(3)))
	for _, k := range []int64{0, 1, 2, 7} {
		for _, part := range []mapPart{partEntries, partKeys, partValues} {
			n, err := tg.readMap(k, part)
			must(err)
			note("map %d part %d: %d", k, part, n)
		}
		for _, uk := range []int64{0, 3, 9, 10} {
			v, ok, err := tg.getMap(k, uk)
			must(err)
			has, err := tg.containsMap(k, uk)
			must(err)
			note("map entry (%d, %d): %v %v %v", k, uk, v, ok, has)
		}
	}
	for _, uk := range perm(sortedFanout, 3) {
		must(tg.putSorted(1, uk, w.fresh(int(uk))))
	}
	for _, r := range [][2]int64{{0, 64}, {10, 26}, {60, 70}, {-5, 3}, {64, 100}} {
		n, err := tg.readRange(1, r[0], r[1])
		must(err)
		note("range %v: %d entries", r, n)
	}
	s, err := tg.snapshot()
	must(err)
	// Writes after the snapshot are not in it.
	must(tg.putValue(100, w.val(100)))
	must(tg.addList(0, w.val(1)))
	must(tg.putMap(3, 50, w.val(1)))
	must(tg.deleteMap(4, 0))
	entries, bytes, err := s.scan()
	must(err)
	must(s.release())
	note("snapshot: %d entries, %d bytes", entries, bytes)
	return out
}
