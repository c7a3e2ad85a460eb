package checkpoint_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

// opLists are the two operator lists of a test instance.
type opLists struct {
	positions runtime.OperatorList[string] // even split
	commits   runtime.UnionList[int64]
}

func bindOpLists(t *testing.T, s runtime.Store) opLists {
	t.Helper()
	var l opLists
	var err error
	if l.positions, err = runtime.NewOperatorList(s, runtime.OperatorListDescriptor[string]{Name: "positions", Fingerprint: "str", Value: runtime.StringCodec{}}); err != nil {
		t.Fatal(err)
	}
	if l.commits, err = runtime.NewUnionList(s, runtime.OperatorListDescriptor[int64]{Name: "commits", Fingerprint: "i64", Value: runtime.Int64Codec{}}); err != nil {
		t.Fatal(err)
	}
	return l
}

// checkpointOpLists checkpoints p instances; instance i holds 3+i
// positions "i/j" and the commits 100*i and 100*i+1, and its own blob
// "own i".
func checkpointOpLists(t *testing.T, s checkpoint.Storage, p int) {
	t.Helper()
	var snaps []checkpoint.InstanceSnapshot
	for i := range p {
		m := newModel(t, 16, p, i)
		l := bindOpLists(t, m)
		for j := range 3 + i {
			if err := l.positions.Add(fmt.Sprintf("%d/%d", i, j)); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.commits.Replace([]int64{int64(100 * i), int64(100*i + 1)}); err != nil {
			t.Fatal(err)
		}
		a, err := checkpoint.SnapshotAsync(ctx, m, s, "ops", fmt.Sprintf("op-%d.sgc", i), nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := a.Wait()
		if err != nil {
			t.Fatal(err)
		}
		res.Snapshot.OperatorState = runtime.EncodeOperatorState(m, []byte(fmt.Sprint("own ", i)))
		snaps = append(snaps, res.Snapshot)
	}
	op, err := checkpoint.NewOperator("op", snaps...)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Commit(ctx, s, "ops", &checkpoint.Metadata{CheckpointID: 1, Operators: []checkpoint.Operator{op}}); err != nil {
		t.Fatal(err)
	}
}

// TestOperatorListsRedistribute pins Flink's two redistributions on
// rescale, with each element's origin kept: an even-split list's elements
// are dealt out once each, in contiguous runs in old-instance order; a
// union list's go to every new instance. The operators' own blobs come
// back as they were.
func TestOperatorListsRedistribute(t *testing.T) {
	s := checkpoint.NewMem()
	checkpointOpLists(t, s, 3) // 3 + 4 + 5 = 12 positions
	var allPositions []string
	for i := range 3 {
		for j := range 3 + i {
			allPositions = append(allPositions, fmt.Sprintf("%d/%d", i, j))
		}
	}
	for _, q := range []int{1, 2, 3, 5} {
		t.Run(fmt.Sprintf("to%d", q), func(t *testing.T) {
			var got []string
			for i := range q {
				m := newModel(t, 16, q, i)
				l := bindOpLists(t, m)
				r, err := checkpoint.Open(ctx, s, "ops")
				if err != nil {
					t.Fatal(err)
				}
				plans, err := r.Plan("op", q)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := r.Restore(ctx, plans[i], m, nil); err != nil {
					t.Fatal(err)
				}
				if own := plans[i].OperatorStates; len(own) != 3 || string(own[0]) != "own 0" || string(own[2]) != "own 2" {
					t.Errorf("instance %d of %d: the operators' own blobs are %q", i, q, own)
				}
				elems := l.positions.Elements()
				if n := len(elems); n < 12/q || n > (12+q-1)/q {
					t.Errorf("instance %d of %d got %d positions, want an even share of 12", i, q, n)
				}
				for _, e := range elems {
					if want := strings.SplitN(e.Value, "/", 2)[0]; fmt.Sprint(e.Origin) != want {
						t.Errorf("position %s has origin %d", e.Value, e.Origin)
					}
					got = append(got, e.Value)
				}
				commits := l.commits.Elements()
				if len(commits) != 6 {
					t.Fatalf("instance %d of %d got union %v, want all 6 commits", i, q, commits)
				}
				for k, c := range commits {
					if c.Origin != k/2 || c.Value != int64(100*(k/2)+k%2) {
						t.Errorf("instance %d of %d: commit %d is %+v, want %d from instance %d", i, q, k, c, 100*(k/2)+k%2, k/2)
					}
				}
			}
			if !slices.Equal(got, allPositions) {
				t.Errorf("the new instances got positions %v, want each of %v once, in order", got, allPositions)
			}
		})
	}
}

// TestOperatorListsBadInput: a list bound as the other mode or with
// another fingerprint, a list no handle binds, and elements that do not
// decode each fail the restore with an error naming the list.
func TestOperatorListsBadInput(t *testing.T) {
	s := checkpoint.NewMem()
	checkpointOpLists(t, s, 2)
	restore := func(bind func(runtime.Store), opts *checkpoint.RestoreOptions) error {
		m := newModel(t, 16, 1, 0)
		bind(m)
		_, err := checkpoint.Restore(ctx, s, "ops", "op", 0, 1, m, opts)
		return err
	}
	both := func(st runtime.Store) { bindOpLists(t, st) }
	if err := restore(both, nil); err != nil {
		t.Fatalf("a good restore: %v", err)
	}
	for _, c := range []struct {
		name string
		bind func(runtime.Store)
		opts *checkpoint.RestoreOptions
		is   error
		says string
	}{
		{"OtherMode", func(st runtime.Store) {
			runtime.NewUnionList(st, runtime.OperatorListDescriptor[string]{Name: "positions", Fingerprint: "str", Value: runtime.StringCodec{}})
			runtime.NewUnionList(st, runtime.OperatorListDescriptor[int64]{Name: "commits", Fingerprint: "i64", Value: runtime.Int64Codec{}})
		}, nil, runtime.ErrStateMismatch, `operator list "positions": checkpointed as an even-split list, bound as a union list`},
		{"OtherFingerprint", func(st runtime.Store) {
			runtime.NewOperatorList(st, runtime.OperatorListDescriptor[string]{Name: "positions", Fingerprint: "str2", Value: runtime.StringCodec{}})
			runtime.NewUnionList(st, runtime.OperatorListDescriptor[int64]{Name: "commits", Fingerprint: "i64", Value: runtime.Int64Codec{}})
		}, nil, runtime.ErrStateMismatch, `"positions": checkpointed with fingerprint "str", bound with "str2"`},
		{"Unbound", func(st runtime.Store) {
			runtime.NewUnionList(st, runtime.OperatorListDescriptor[int64]{Name: "commits", Fingerprint: "i64", Value: runtime.Int64Codec{}})
		}, nil, checkpoint.ErrUnknownState, `operator list "positions", which no handle of the store binds`},
		{"DoesNotDecode", func(st runtime.Store) {
			// Same fingerprint, another codec: the strings are no int64s.
			runtime.NewOperatorList(st, runtime.OperatorListDescriptor[int64]{Name: "positions", Fingerprint: "str", Value: runtime.Int64Codec{}})
			runtime.NewUnionList(st, runtime.OperatorListDescriptor[int64]{Name: "commits", Fingerprint: "i64", Value: runtime.Int64Codec{}})
		}, nil, runtime.ErrCorrupt, `operator list "positions": element 0 (of old instance 0)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := restore(c.bind, c.opts)
			if !errors.Is(err, c.is) || !strings.Contains(fmt.Sprint(err), c.says) {
				t.Errorf("restore = %v, want %v saying %s", err, c.is, c.says)
			}
		})
	}
	// DropUnknownStates drops an unbound list.
	if err := restore(func(st runtime.Store) {
		runtime.NewUnionList(st, runtime.OperatorListDescriptor[int64]{Name: "commits", Fingerprint: "i64", Value: runtime.Int64Codec{}})
	}, &checkpoint.RestoreOptions{UnknownStates: checkpoint.DropUnknownStates}); err != nil {
		t.Errorf("restore dropping the unbound list: %v", err)
	}
}

// TestOperatorStateContainer: a blob written without lists is the
// operator's own, byte for byte; with lists, the container opens to the
// own blob and the lists; a damaged or truncated container is corrupt,
// never read as wrong lists or as an own blob.
func TestOperatorStateContainer(t *testing.T) {
	m, err := storetest.NewModel(runtime.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if got := runtime.EncodeOperatorState(m, []byte("own")); string(got) != "own" {
		t.Errorf("without lists: %q, want the own blob", got)
	}
	l := bindOpLists(t, m)
	l.positions.Add("p")
	blob := runtime.EncodeOperatorState(m, nil)
	own, lists, err := runtime.DecodeOperatorState(blob)
	if err != nil || own != nil || len(lists) != 2 || lists[1].Name != "positions" || string(lists[1].Elements[0]) != string(runtime.StringCodec{}.AppendValue(nil, "p")) {
		t.Errorf("DecodeOperatorState = %q, %+v, %v", own, lists, err)
	}
	bad := slices.Clone(blob)
	bad[len(bad)/2] ^= 1
	if _, _, err := runtime.DecodeOperatorState(bad); !errors.Is(err, runtime.ErrCorrupt) || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("a damaged container: %v, want ErrCorrupt for its checksum", err)
	}
	if _, _, err := runtime.DecodeOperatorState(blob[:9]); !errors.Is(err, runtime.ErrCorrupt) {
		t.Errorf("a truncated container: %v, want ErrCorrupt", err)
	}
}
