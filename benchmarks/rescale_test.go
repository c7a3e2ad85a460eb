package benchmarks

// BenchmarkRescale measures a rescale from 2 to 3 instances: a checkpoint
// written by 2 instances is restored into 3 fresh stores of each backend of
// stores, each reading only the key groups it now owns. It reports the time of the
// three restores together and, as read-fraction, the bytes they read over
// the checkpoint's data bytes (1.0 means every byte was read exactly once:
// nothing was read twice, nothing skipped).

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
)

// rangeView restricts a ckptView to the key groups of one old instance.
type rangeView struct {
	*ckptView
	r runtime.KeyGroupRange
}

func (v rangeView) KeyGroups() runtime.KeyGroupRange { return v.r }

func BenchmarkRescale(b *testing.B) {
	const from, to = 2, 3
	ctx := context.Background()
	n := ckptKeys(b)
	dir, err := checkpoint.NewDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	view := newCkptView(n)
	var snaps []checkpoint.InstanceSnapshot
	var total int64
	for i := range from {
		r, err := runtime.KeyGroupRangeForOperator(ckptMaxP, from, i)
		if err != nil {
			b.Fatal(err)
		}
		snap, err := checkpoint.WriteInstance(ctx, dir, "chk", fmt.Sprintf("op-%d.sgc", i), rangeView{view, r}, nil)
		if err != nil {
			b.Fatal(err)
		}
		snaps = append(snaps, snap)
		total += snap.File.Size
	}
	op, err := checkpoint.NewOperator("op", snaps...)
	if err != nil {
		b.Fatal(err)
	}
	if err := checkpoint.Commit(ctx, dir, "chk", &checkpoint.Metadata{Operators: []checkpoint.Operator{op}}); err != nil {
		b.Fatal(err)
	}
	for _, be := range stores {
		b.Run("backend="+be.name, func(b *testing.B) {
			b.Run(fmt.Sprintf("p=%dto%d/keys=%s", from, to, sizeName(n)), func(b *testing.B) {
				b.SetBytes(total)
				var read, entries int64
				for i := 0; i < b.N; i++ {
					read, entries = 0, 0
					for j := range to {
						b.StopTimer()
						r, err := runtime.KeyGroupRangeForOperator(ckptMaxP, to, j)
						if err != nil {
							b.Fatal(err)
						}
						store, err := be.open(filepath.Join(b.TempDir(), "store"), runtime.StoreConfig{MaxParallelism: ckptMaxP, KeyGroups: r})
						if err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
						st, err := checkpoint.Restore(ctx, dir, "chk", "op", j, to, store, nil)
						if err != nil {
							b.Fatal(err)
						}
						b.StopTimer()
						read += st.BytesRead
						entries += st.Entries
						if err := store.Close(); err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
					}
				}
				if entries != int64(n) {
					b.Fatalf("the %d new instances restored %d entries together, want %d", to, entries, n)
				}
				b.ReportMetric(float64(read)/float64(total), "read-fraction")
			})
		})
	}
}
