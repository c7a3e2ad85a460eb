package storetest

import (
	"fmt"
	goruntime "runtime"

	"github.com/stategen/stategen/runtime"
)

// The randomized checks: scenarios that drive a harness.

func randomChecks() []check {
	return []check{
		{"MaxP128", func(e *env) { runRandom(e, "Random/MaxP128", runtime.StoreConfig{}) }},
		{"MaxP8Partial", func(e *env) {
			runRandom(e, "Random/MaxP8Partial", runtime.StoreConfig{MaxParallelism: 8, KeyGroups: runtime.KeyGroupRange{Start: 3, End: 6}})
		}},
		{"MaxP1", func(e *env) { runRandom(e, "Random/MaxP1", runtime.StoreConfig{MaxParallelism: 1}) }},
	}
}

// runRandom applies random operations to one store and the model, with
// full comparisons, live snapshots and restores interleaved.
func runRandom(e *env, name string, cfg runtime.StoreConfig) {
	h := newHarness(e, name, []runtime.StoreConfig{cfg})
	defer h.addContext()
	h.liveSnaps, h.restores = true, true
	h.run(e.ops(3000))
	h.finish()
}

func checkRestoreFresh(e *env) {
	h := newHarness(e, "Restore/Fresh", []runtime.StoreConfig{{}})
	defer h.addContext()
	h.liveSnaps = true
	h.run(e.ops(1500))
	h.restoreNode(0)
	h.run(e.ops(750))
	h.restoreNode(0)
	h.run(e.ops(250))
	h.finish()
}

func rescaleChecks() []check {
	var checks []check
	for _, pq := range [][2]int{{1, 4}, {2, 3}, {3, 2}, {4, 1}} {
		p, q := pq[0], pq[1]
		name := fmt.Sprintf("%dto%d", p, q)
		checks = append(checks, check{name, func(e *env) { runRescale(e, "Rescale/"+name, p, q) }})
	}
	return checks
}

// runRescale runs random operations on p stores that own the key groups of
// p operators (maxParallelism 128), rescales to q stores, goes on, rescales
// back to p, and goes on.
func runRescale(e *env, name string, p, q int) {
	const maxP = runtime.DefaultMaxParallelism
	cfgs := make([]runtime.StoreConfig, p)
	for i := range cfgs {
		r, err := runtime.KeyGroupRangeForOperator(maxP, p, i)
		if err != nil {
			panic(err)
		}
		cfgs[i] = runtime.StoreConfig{MaxParallelism: maxP, KeyGroups: r}
	}
	h := newHarness(e, name, cfgs)
	defer h.addContext()
	h.liveSnaps = true
	h.run(e.ops(1200))
	h.rescale(q)
	h.run(e.ops(600))
	h.rescale(p)
	h.run(e.ops(300))
	h.finish()
}

// slowView yields the processor before every key group it scans, so that a
// background read interleaves with the writes of the test goroutine even
// when it is fast.
type slowView struct{ runtime.View }

func (v slowView) Scan(state string, kg int, fn func(runtime.Entry) error) error {
	goruntime.Gosched()
	return v.View.Scan(state, kg, fn)
}

type bgResult struct {
	c   Contents
	err error
}

// readInBackground reads snap through the codec on another goroutine, and
// releases it there if release.
func (h *harness) readInBackground(snap runtime.Snapshot, release bool) <-chan bgResult {
	ch := make(chan bgResult, 1)
	codec, tb := h.e.o.codec, h.e.tb
	go func() {
		var res bgResult
		res.err = catch(func() {
			v, err := codec(tb, slowView{snap})
			must(err, "snapshot codec")
			if release {
				must(snap.Release(), "Release on the reading goroutine")
			}
			res.c, err = Dump(v)
			must(err, "dump of the codec's view")
			releaseView(v)
		})
		ch <- res
	}()
	return ch
}

// writeWhile performs n random steps while the background read ch runs,
// then waits for it. The number of steps does not depend on timing, so that
// a seed replays the same operations.
func (h *harness) writeWhile(ch <-chan bgResult, n int) bgResult {
	done := false
	defer func() {
		if !done {
			<-ch // never leave the reader running on a failed check
		}
	}()
	for range n {
		if len(ch) == 0 {
			h.stats.overlapped++
		}
		h.step()
	}
	done = true
	return <-ch
}

// checkSnapshotsWhileWriting reads snapshots on other goroutines while the
// test goroutine keeps changing the store, with several snapshots live at
// once and released in random order.
func checkSnapshotsWhileWriting(e *env) {
	h := newHarness(e, "SnapshotsWhileWriting", []runtime.StoreConfig{{MaxParallelism: 16}})
	defer h.addContext()
	h.liveSnaps = true
	h.run(e.ops(1000))
	n := h.nodes[0]
	take := func() (runtime.Snapshot, Contents) {
		h.note("Snapshot for a background read")
		snap, err := n.store.Snapshot()
		must(err, "Snapshot")
		return snap, h.modelContents().Restrict(n.groups)
	}
	expect := func(what string, want Contents, r bgResult) {
		if r.err != nil {
			fail("%s: %v", what, r.err)
		}
		if d := diff(want, r.c); d != "" {
			fail("%s differs from the model's content when the snapshot was taken (-model +backend):\n%s", what, d)
		}
	}

	// One snapshot, read and released on another goroutine.
	snap, want := take()
	r := h.writeWhile(h.readInBackground(snap, true), e.ops(300))
	expect("a snapshot read in the background", want, r)

	// Several live snapshots, all read at once in the background.
	const live = 4
	snaps := make([]runtime.Snapshot, live)
	wants := make([]Contents, live)
	for i := range snaps {
		snaps[i], wants[i] = take()
		h.run(20 + h.rng.IntN(80))
	}
	chans := make([]<-chan bgResult, live)
	for i := range snaps {
		chans[i] = h.readInBackground(snaps[i], false)
	}
	for i := range snaps {
		expect(fmt.Sprintf("live snapshot %d of %d, read concurrently with the others", i, live),
			wants[i], h.writeWhile(chans[i], e.ops(50)))
	}

	// Released in random order; after each release, the others are read
	// again in the background.
	remaining := map[int]bool{}
	for i := range snaps {
		remaining[i] = true
	}
	for _, i := range h.rng.Perm(live) {
		h.note("release live snapshot %d", i)
		must(snaps[i].Release(), "Release of live snapshot %d", i)
		wantErr(snaps[i].Release(), runtime.ErrReleased, "a second Release")
		wantErr(snaps[i].Scan(h.specs[0].Name, n.groups.Start, func(runtime.Entry) error { return nil }),
			runtime.ErrReleased, "Scan after Release")
		delete(remaining, i)
		h.run(e.ops(50))
		for j := range live {
			if remaining[j] {
				expect(fmt.Sprintf("live snapshot %d, after snapshot %d was released", j, i),
					wants[j], h.writeWhile(h.readInBackground(snaps[j], false), e.ops(30)))
			}
		}
	}
	h.finish()
}

// checkConcurrentScans scans the key groups of snapshots from several
// goroutines at once — each its own key groups, as runtime.View allows —
// while the test goroutine keeps changing the store, and compares what they
// saw with the model's content when the snapshot was taken; then it scans
// the snapshot codec's View of the same snapshot the same way. Run it with
// -race: it is how a backend shows that concurrent Scans share nothing
// unsafely.
func checkConcurrentScans(e *env) {
	h := newHarness(e, "SnapshotsWhileWriting/ConcurrentScans", []runtime.StoreConfig{{MaxParallelism: 16}})
	defer h.addContext()
	h.liveSnaps = true
	h.run(e.ops(1000))
	n := h.nodes[0]
	const workers = 4
	for round := range 3 {
		h.note("Snapshot for concurrent Scans, round %d", round)
		snap, err := n.store.Snapshot()
		must(err, "Snapshot")
		want := h.modelContents().Restrict(n.groups)
		ch := make(chan bgResult, 1)
		go func() {
			var res bgResult
			res.err = catch(func() {
				var err error
				res.c, err = dumpConcurrently(snap, workers)
				must(err, "%d goroutines scanning the key groups of one snapshot", workers)
			})
			ch <- res
		}()
		r := h.writeWhile(ch, e.ops(200))
		if r.err != nil {
			fail("round %d: %v", round, r.err)
		}
		if d := diff(want, r.c); d != "" {
			fail("round %d: %d goroutines scanning the key groups of one snapshot saw another content than the model's when it was taken (-model +backend):\n%s",
				round, workers, d)
		}
		v := h.e.codec(snap)
		c, err := dumpConcurrently(v, workers)
		must(err, "round %d: %d goroutines scanning the key groups of the snapshot codec's view", round, workers)
		if d := diff(want, c); d != "" {
			fail("round %d: the snapshot codec's view, scanned by %d goroutines, differs from the model's content (-model +codec):\n%s",
				round, workers, d)
		}
		releaseView(v)
		must(snap.Release(), "Release")
		h.run(e.ops(100))
	}
	h.finish()
}
