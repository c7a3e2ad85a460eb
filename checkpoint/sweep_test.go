package checkpoint_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stategen/stategen/backends/cow"
	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
)

// sweepSpecs are two states of every kind, keyed and sub-keyed.
var sweepSpecs = func() []runtime.StateSpec {
	var out []runtime.StateSpec
	for _, k := range []runtime.Kind{runtime.KindValue, runtime.KindList, runtime.KindMap, runtime.KindSortedMap} {
		for _, sub := range []bool{false, true} {
			name := k.String()
			if sub {
				name += "-ns"
			}
			out = append(out, runtime.StateSpec{Name: name, Kind: k, SubKeyed: sub, Fingerprint: "fp:" + name})
		}
	}
	return out
}()

const (
	sweepMaxP        = 4
	sweepParallelism = 2
)

// sweepCheckpoint writes a small real checkpoint: the two instances of
// operator "op" on backends/cow, with two states of every kind, entries in
// every key group — several per (state, key group), lists of several
// elements, empty values and namespaces — snapshotted by SnapshotAsync in
// blocks of 64 bytes, so that sections span several blocks, and committed.
// It returns the storage and the content of each instance.
func sweepCheckpoint(t testing.TB) *checkpoint.Mem {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 11))
	s := checkpoint.NewMem()
	var snaps []checkpoint.InstanceSnapshot
	for i := range sweepParallelism {
		kgs, err := runtime.KeyGroupRangeForOperator(sweepMaxP, sweepParallelism, i)
		if err != nil {
			t.Fatal(err)
		}
		store, err := cow.New(cow.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: sweepMaxP, KeyGroups: kgs}})
		if err != nil {
			t.Fatal(err)
		}
		perGroup := map[int]int{}
		for _, spec := range sweepSpecs {
			st, err := store.Register(spec)
			if err != nil {
				t.Fatal(err)
			}
			for k := uint64(0); k < 64; k++ {
				key := []byte{byte(k), 'k'}
				var ns []byte
				if spec.SubKeyed {
					ns = []byte{}
					if k%3 == 1 {
						ns = []byte("w1")
					}
				}
				rk := runtime.MakeKey(key, ns, sweepMaxP)
				if !kgs.Contains(rk.Group()) || perGroup[rk.Group()*100+len(spec.Name)] >= 2 {
					continue
				}
				perGroup[rk.Group()*100+len(spec.Name)]++
				val := func() []byte {
					if rng.IntN(4) == 0 {
						return []byte{}
					}
					return []byte(fmt.Sprintf("v%d", rng.IntN(1000)))
				}
				switch st := st.(type) {
				case runtime.ValueState:
					err = st.Put(rk, val())
				case runtime.ListState:
					for range 3 {
						if err == nil {
							err = st.Add(rk, val())
						}
					}
				case runtime.MapState:
					for u := range 2 {
						if err == nil {
							err = st.Put(rk, []byte{byte('a' + u)}, val())
						}
					}
				}
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		a, err := checkpoint.SnapshotAsync(ctx, store, s, "chk", fmt.Sprintf("op-%d.sgc", i), &checkpoint.WriterOptions{BlockSize: 64})
		if err != nil {
			t.Fatal(err)
		}
		res, err := a.Wait()
		if err != nil {
			t.Fatal(err)
		}
		res.Snapshot.OperatorState = []byte(fmt.Sprintf("offset %d", i))
		snaps = append(snaps, res.Snapshot)
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
	}
	op, err := checkpoint.NewOperator("op", snaps...)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Commit(ctx, s, "chk", &checkpoint.Metadata{CheckpointID: 3, Operators: []checkpoint.Operator{op}}); err != nil {
		t.Fatal(err)
	}
	// The checkpoint is what the sweep needs: every state in every key
	// group, and sections of several blocks.
	r, err := checkpoint.Open(ctx, s, "chk")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Verify(ctx); err != nil {
		t.Fatal(err)
	}
	v, err := r.View(ctx, "op", runtime.FullRange(sweepMaxP))
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	for _, spec := range sweepSpecs {
		for kg := range sweepMaxP {
			n := 0
			if err := v.Scan(spec.Name, kg, func(runtime.Entry) error { n++; return nil }); err != nil {
				t.Fatal(err)
			}
			if n < 2 {
				t.Fatalf("state %s has %d entries in key group %d", spec.Name, n, kg)
			}
		}
	}
	return s
}

// overlay is a Storage that serves other bytes for one object of a base
// storage: the damaged copy, without copying the rest.
type overlay struct {
	checkpoint.Storage
	ckpt, name string
	data       []byte
}

type bytesObject struct{ *bytes.Reader }

func (bytesObject) Close() error { return nil }

func (o *overlay) Open(ctx context.Context, ckpt, name string) (checkpoint.Object, error) {
	if ckpt == o.ckpt && name == o.name {
		return bytesObject{bytes.NewReader(o.data)}, nil
	}
	return o.Storage.Open(ctx, ckpt, name)
}

func (o *overlay) Stat(ctx context.Context, ckpt, name string) (checkpoint.ObjectInfo, error) {
	if ckpt == o.ckpt && name == o.name {
		return checkpoint.ObjectInfo{Name: name, Size: int64(len(o.data))}, nil
	}
	return o.Storage.Stat(ctx, ckpt, name)
}

// sweepStats counts the damaged checkpoints tried and how each check
// caught them.
type sweepStats struct {
	tried, verifyCaught, restoreCaught int
	// restoreBeforeChange counts restores that failed before the store
	// changed (metadata, size, header, index), the others failing on a
	// block while entries were being restored.
	restoreBeforeChange int
}

// checkDamaged requires that the damaged checkpoint in s fails both
// Verify and a restore of the whole operator into a fresh cow store, each
// with a *FileError naming the damaged object and an offset or a field.
// Both begin with Open, which reads and checks the metadata: a damaged
// metadata object fails there, for both. A damaged data file leaves the
// metadata as it is: reader, if not nil, is the checkpoint opened once on s
// for all of them (its Verify and Restore open the data files afresh).
// *store is the fresh store; it is replaced once a restore has changed it.
func checkDamaged(t *testing.T, s checkpoint.Storage, reader *checkpoint.Reader, name, what string, st *sweepStats, store **cow.Store) {
	t.Helper()
	st.tried++
	path := "chk/" + name
	check := func(how string, err error) bool {
		var fe *checkpoint.FileError
		switch {
		case err == nil:
			t.Errorf("%s: %s does not detect it", what, how)
		case !errors.As(err, &fe):
			t.Errorf("%s: %s fails with %q, not a *FileError", what, how, err)
		case fe.Path != path:
			t.Errorf("%s: %s blames %q, not %q: %v", what, how, fe.Path, path, err)
		case fe.Offset < 0 && fe.Field == "":
			t.Errorf("%s: %s names neither an offset nor a field: %v", what, how, err)
		case !errors.Is(err, checkpoint.ErrCorrupt) && !errors.Is(err, checkpoint.ErrUnsupportedVersion):
			t.Errorf("%s: %s: %v is neither ErrCorrupt nor ErrUnsupportedVersion", what, how, err)
		default:
			return true
		}
		return false
	}
	r := reader
	if r == nil {
		var err error
		r, err = checkpoint.Open(ctx, s, "chk")
		if err != nil {
			if check("Open (for Verify and Restore)", err) {
				st.verifyCaught++
				st.restoreCaught++
				st.restoreBeforeChange++
			}
			return
		}
	}
	if check("Verify", r.Verify(ctx)) {
		st.verifyCaught++
	}
	plans, err := r.Plan("op", 1)
	if err != nil {
		t.Fatalf("%s: plan: %v", what, err)
	}
	_, err = r.Restore(ctx, plans[0], *store, nil)
	if check("Restore", err) {
		st.restoreCaught++
	}
	if len((*store).States()) == 0 {
		st.restoreBeforeChange++
		return
	}
	(*store).Close()
	*store = newSweepStore(t)
}

func newSweepStore(t testing.TB) *cow.Store {
	t.Helper()
	store, err := cow.New(cow.Options{StoreConfig: runtime.StoreConfig{MaxParallelism: sweepMaxP, KeyGroups: runtime.FullRange(sweepMaxP)}})
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// TestCorruptionSweepOfARealCheckpoint damages a small real checkpoint —
// two instances of an operator on backends/cow, two states of every kind,
// every key group populated, sections of several blocks — in every way a
// byte can go bad: every byte of every object, the metadata included,
// flipped with three patterns (lowest bit, highest bit, all bits), and
// every object truncated at every length. Every damaged checkpoint must
// fail both Verify and a restore into a fresh store with an error naming
// the damaged object and where in it: detection is 100%, and the test logs
// the counts.
func TestCorruptionSweepOfARealCheckpoint(t *testing.T) {
	base := sweepCheckpoint(t)
	objs, err := base.Objects(ctx, "chk")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != sweepParallelism+1 {
		t.Fatalf("objects %v", objs)
	}
	var flips, truncs sweepStats
	var harmless []string
	cr, err := checkpoint.Open(ctx, base, "chk")
	if err != nil {
		t.Fatal(err)
	}
	clean := cr.Metadata()
	store := newSweepStore(t)
	defer func() { store.Close() }()
	for _, o := range objs {
		orig := readObject(t, base, "chk", o.Name)
		ov := &overlay{Storage: base, ckpt: "chk", name: o.Name, data: orig}
		var reader *checkpoint.Reader
		if o.Name != checkpoint.MetadataName {
			if reader, err = checkpoint.Open(ctx, ov, "chk"); err != nil {
				t.Fatal(err)
			}
		}
		for off := range orig {
			for _, mask := range []byte{0x01, 0x80, 0xff} {
				ov.data = bytes.Clone(orig)
				ov.data[off] ^= mask
				checkDamaged(t, ov, reader, o.Name, fmt.Sprintf("%s byte %d ^ %#02x", o.Name, off, mask), &flips, &store)
			}
			ov.data = orig[:off]
			if o.Name == checkpoint.MetadataName && len(bytes.TrimSpace(orig[off:])) == 0 {
				// Only the whitespace after the document goes: the
				// metadata is intact (its checksum covers the canonical
				// form, which survives re-indentation).
				harmless = append(harmless, fmt.Sprintf("%s truncated to %d of %d bytes", o.Name, off, len(orig)))
				r, err := checkpoint.Open(ctx, ov, "chk")
				if err != nil || metadataDiff(r.Metadata(), clean) != "" {
					t.Errorf("%s without its final whitespace: %v", o.Name, err)
				}
				continue
			}
			checkDamaged(t, ov, reader, o.Name, fmt.Sprintf("%s truncated to %d of %d bytes", o.Name, off, len(orig)), &truncs, &store)
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	t.Logf("objects: %v", objs)
	t.Logf("byte flips: %d tried; Verify detected %d, restore detected %d (%d before the store changed)",
		flips.tried, flips.verifyCaught, flips.restoreCaught, flips.restoreBeforeChange)
	t.Logf("truncations: %d tried; Verify detected %d, restore detected %d (%d before the store changed)",
		truncs.tried, truncs.verifyCaught, truncs.restoreCaught, truncs.restoreBeforeChange)
	t.Logf("not damage (the document unchanged, only whitespace after it removed): %q", harmless)
}
