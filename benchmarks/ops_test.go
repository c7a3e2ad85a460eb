package benchmarks

// The state operations of Flink's state benchmarks (flink-benchmarks'
// ValueState, ListState and MapState benchmarks) and SortedMap range scans,
// each one benchmark over every backend:
//
//	BenchmarkValueGet/backend=cow/keys=1M
//	BenchmarkValueGet/backend=gomap/keys=1M
//
// Every state holds keys entries: keys values, keys/100 lists of 100
// elements, keys/10 maps of 10 entries, keys/64 sorted maps of 64 entries.
// Reads and overwrites access the keys of workload.order (uniform or
// Zipfian); operations that insert (ValueAdd, ListAdd, ListAppend,
// ListAddAll, MapAdd) run on the pre-loaded state and rebuild it, with the
// timer stopped, once it has doubled, and MapRemove once it is empty, so
// that every operation meets a state of the same size however large b.N
// grows.

import (
	"testing"
)

// BenchmarkValueGet reads the value of a key.
func BenchmarkValueGet(b *testing.B) {
	forEachBackend(b, fillValues, func(b *testing.B, w *workload, f *fixture) {
		t, keys := f.get(b), w.order(f.n)
		for i := 0; f.loop(b); i++ {
			k := keys[i%len(keys)]
			v, ok, err := t.getValue(k)
			if !ok || err != nil || v.A != k {
				b.Fatalf("value of %d: (%v, %v, %v)", k, v.A, ok, err)
			}
			sink = v
		}
	})
}

// BenchmarkValuePut overwrites the value of a key (Flink's valueUpdate).
func BenchmarkValuePut(b *testing.B) {
	forEachBackend(b, fillValues, func(b *testing.B, w *workload, f *fixture) {
		t, keys := f.get(b), w.order(f.n)
		for i := 0; f.loop(b); i++ {
			check(b, t.putValue(keys[i%len(keys)], w.val(i)))
		}
	})
}

// BenchmarkValueUpdate adds to the value of a key with Update, the
// read-modify-write of an aggregation (on cow one lookup, elsewhere a Get
// and a Put; the Go map's is a read and a write).
func BenchmarkValueUpdate(b *testing.B) {
	forEachBackend(b, fillValues, func(b *testing.B, w *workload, f *fixture) {
		t, keys := f.get(b), w.order(f.n)
		for i := 0; f.loop(b); i++ {
			k := keys[i%len(keys)]
			check(b, t.updateValue(k, func(old Val, found bool) Val {
				if !found || old.A != k {
					b.Fatalf("Update of %d: old value %v, found %v", k, old.A, found)
				}
				old.B++
				return old
			}))
		}
	})
}

// BenchmarkValueAdd sets the value of a new key (Flink's valueAdd).
func BenchmarkValueAdd(b *testing.B) {
	forEachBackend(b, fillValues, func(b *testing.B, w *workload, f *fixture) {
		keys := perm(f.n, 4)
		for i := 0; f.loop(b); i++ {
			t, j := f.step(b, f.n)
			check(b, t.putValue(int64(f.n)+keys[j], w.val(i)))
		}
	})
}

// BenchmarkListGet reads every element of a 100-element list.
func BenchmarkListGet(b *testing.B) {
	forEachBackend(b, fillLists, func(b *testing.B, w *workload, f *fixture) {
		t, keys := f.get(b), w.order(listKeys(f.n))
		for i := 0; f.loop(b); i++ {
			k := keys[i%len(keys)]
			if n, err := t.readList(k); n != listLen || err != nil {
				b.Fatalf("list of %d: %d elements, want %d (%v)", k, n, listLen, err)
			}
		}
	})
}

// BenchmarkListAdd adds one element to the list of a key that has none
// (Flink's listAdd).
func BenchmarkListAdd(b *testing.B) {
	forEachBackend(b, fillLists, func(b *testing.B, w *workload, f *fixture) {
		keys := perm(f.n, 4)
		for i := 0; f.loop(b); i++ {
			t, j := f.step(b, f.n)
			check(b, t.addList(int64(listKeys(f.n))+keys[j], w.val(i)))
		}
	})
}

// BenchmarkListAppend adds one element to an existing list (Flink's
// listAppend).
func BenchmarkListAppend(b *testing.B) {
	forEachBackend(b, fillLists, func(b *testing.B, w *workload, f *fixture) {
		keys := w.order(listKeys(f.n))
		for i := 0; f.loop(b); i++ {
			t, j := f.step(b, f.n)
			check(b, t.addList(keys[j%len(keys)], w.val(i)))
		}
	})
}

// BenchmarkListAddAll adds 100 elements to an existing list in one call
// (Flink's listAddAll).
func BenchmarkListAddAll(b *testing.B) {
	forEachBackend(b, fillLists, func(b *testing.B, w *workload, f *fixture) {
		keys, vs := w.order(listKeys(f.n)), w.vals()
		for f.loop(b) {
			t, j := f.step(b, listKeys(f.n))
			check(b, t.addAllList(keys[j%len(keys)], vs))
		}
	})
}

// BenchmarkListUpdate replaces a list with 100 new elements (Flink's
// listUpdate).
func BenchmarkListUpdate(b *testing.B) {
	forEachBackend(b, fillLists, func(b *testing.B, w *workload, f *fixture) {
		t, keys, vs := f.get(b), w.order(listKeys(f.n)), w.vals()
		for i := 0; f.loop(b); i++ {
			check(b, t.updateList(keys[i%len(keys)], vs))
		}
	})
}

// BenchmarkMapGet reads one entry of a 10-entry map.
func BenchmarkMapGet(b *testing.B) {
	forEachBackend(b, fillMaps, func(b *testing.B, w *workload, f *fixture) {
		t, keys := f.get(b), w.order(mapKeys(f.n))
		for i := 0; f.loop(b); i++ {
			k, uk := keys[i%len(keys)], int64(i%mapFanout)
			v, ok, err := t.getMap(k, uk)
			if !ok || err != nil || v.A != k*mapFanout+uk {
				b.Fatalf("entry (%d, %d): (%v, %v, %v)", k, uk, v.A, ok, err)
			}
			sink = v
		}
	})
}

// BenchmarkMapPut overwrites one entry of a map (Flink's mapUpdate).
func BenchmarkMapPut(b *testing.B) {
	forEachBackend(b, fillMaps, func(b *testing.B, w *workload, f *fixture) {
		t, keys := f.get(b), w.order(mapKeys(f.n))
		for i := 0; f.loop(b); i++ {
			check(b, t.putMap(keys[i%len(keys)], int64(i%mapFanout), w.val(i)))
		}
	})
}

// BenchmarkMapUpdate adds to one entry of a map with Update, the
// read-modify-write of a per-entry aggregation (on cow one lookup,
// elsewhere a Get and a Put; the Go map's is a read and a write).
func BenchmarkMapUpdate(b *testing.B) {
	forEachBackend(b, fillMaps, func(b *testing.B, w *workload, f *fixture) {
		t, keys := f.get(b), w.order(mapKeys(f.n))
		for i := 0; f.loop(b); i++ {
			k, uk := keys[i%len(keys)], int64(i%mapFanout)
			check(b, t.updateMap(k, uk, func(old Val, found bool) Val {
				if !found {
					b.Fatalf("Update of (%d, %d): not found", k, uk)
				}
				old.B++
				return old
			}))
		}
	})
}

// BenchmarkMapAdd puts a new entry into an existing map (Flink's mapAdd).
func BenchmarkMapAdd(b *testing.B) {
	forEachBackend(b, fillMaps, func(b *testing.B, w *workload, f *fixture) {
		keys := perm(mapKeys(f.n), 4)
		for i := 0; f.loop(b); i++ {
			t, j := f.step(b, f.n)
			check(b, t.putMap(keys[j%len(keys)], int64(mapFanout+j/len(keys)), w.val(i)))
		}
	})
}

// BenchmarkMapContains asks whether a map has a user key; half of them do.
func BenchmarkMapContains(b *testing.B) {
	forEachBackend(b, fillMaps, func(b *testing.B, w *workload, f *fixture) {
		t, keys := f.get(b), w.order(mapKeys(f.n))
		for i := 0; f.loop(b); i++ {
			k, uk := keys[i%len(keys)], int64(i%(2*mapFanout))
			if ok, err := t.containsMap(k, uk); ok != (uk < mapFanout) || err != nil {
				b.Fatalf("contains (%d, %d) = %v, %v", k, uk, ok, err)
			}
		}
	})
}

// BenchmarkMapRemove deletes every entry of the maps once, in a random
// order of keys (Flink's mapRemove).
func BenchmarkMapRemove(b *testing.B) {
	forEachBackend(b, fillMaps, func(b *testing.B, w *workload, f *fixture) {
		keys := perm(mapKeys(f.n), 4)
		for f.loop(b) {
			t, j := f.step(b, len(keys)*mapFanout)
			check(b, t.deleteMap(keys[j%len(keys)], int64(j/len(keys))))
		}
	})
}

// BenchmarkMapIterate reads every entry of a map (Flink's mapIterator).
func BenchmarkMapIterate(b *testing.B) { benchReadMap(b, partEntries) }

// BenchmarkMapKeys reads every user key of a map (Flink's mapKeys).
func BenchmarkMapKeys(b *testing.B) { benchReadMap(b, partKeys) }

// BenchmarkMapValues reads every value of a map (Flink's mapValues).
func BenchmarkMapValues(b *testing.B) { benchReadMap(b, partValues) }

func benchReadMap(b *testing.B, part mapPart) {
	forEachBackend(b, fillMaps, func(b *testing.B, w *workload, f *fixture) {
		t, keys := f.get(b), w.order(mapKeys(f.n))
		for i := 0; f.loop(b); i++ {
			k := keys[i%len(keys)]
			if n, err := t.readMap(k, part); n != mapFanout || err != nil {
				b.Fatalf("map of %d: %d entries, want %d (%v)", k, n, mapFanout, err)
			}
		}
	})
}

// BenchmarkSortedMapRange reads 16 consecutive entries of a 64-entry
// sorted map. The gomap baseline, a map of maps, has no order: it collects
// the user keys in the range and sorts them, which is what a sorted map
// saves.
func BenchmarkSortedMapRange(b *testing.B) {
	forEachBackend(b, fillSorted, func(b *testing.B, w *workload, f *fixture) {
		t, keys := f.get(b), w.order(sortedKeys(f.n))
		starts := perm(sortedFanout-rangeLen+1, 5)
		for i := 0; f.loop(b); i++ {
			k, from := keys[i%len(keys)], starts[i%len(starts)]
			if n, err := t.readRange(k, from, from+rangeLen); n != rangeLen || err != nil {
				b.Fatalf("range [%d, %d) of %d: %d entries, want %d (%v)", from, from+rangeLen, k, n, rangeLen, err)
			}
		}
	})
}
