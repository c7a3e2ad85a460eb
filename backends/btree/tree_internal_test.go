package btree

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	tb "github.com/tidwall/btree"
)

// TestTreeCopyIsolatesConcurrentReads pins the property of tidwall/btree
// that snapshots rest on: with NoLocks, a Copy may be read on other
// goroutines while the tree it was copied from goes on being written — Set,
// Delete, Load, DeleteRange, node splits and merges — because the written
// tree copies every node it shares before changing it. Under -race this
// fails on any write to a shared node; without it, the readers check that
// each copy still holds exactly its items.
func TestTreeCopyIsolatesConcurrentReads(t *testing.T) {
	for _, degree := range []int{2, 4, 32} {
		t.Run(fmt.Sprintf("degree=%d", degree), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(degree), 1))
			tr := testTree(t, false)
			tr.degree = degree
			live := tr.newBTree()
			model := map[uint64]bool{}
			key := func(i uint64) []byte { return binary.BigEndian.AppendUint64([]byte{0, 0, 1}, i) }
			for i := range uint64(2000) {
				live.Set(tr.newItem(key(i*2), nil))
				model[i*2] = true
			}
			type reader struct {
				want []uint64
				done chan error
			}
			var readers []reader
			for round := range 8 {
				snap := live.Copy()
				want := make([]uint64, 0, len(model))
				for k := range model {
					want = append(want, k)
				}
				slices.Sort(want)
				rd := reader{want: want, done: make(chan error, 1)}
				go func() {
					kb := make([]byte, inlineLen)
					for pass := range 3 {
						var got []uint64
						it := snap.Iter()
						for ok := it.First(); ok; ok = it.Next() {
							got = append(got, binary.BigEndian.Uint64(keyOf(nil, it.Item(), kb)[3:]))
						}
						it.Release()
						if !slices.Equal(got, rd.want) {
							rd.done <- fmt.Errorf("round %d, pass %d: the copy holds %d items, want %d (or other items)", round, pass, len(got), len(rd.want))
							return
						}
					}
					rd.done <- nil
				}()
				readers = append(readers, rd)
				for range 3000 {
					k := r.Uint64N(6000)
					switch op := r.IntN(10); {
					case op < 5:
						live.Set(tr.newItem(key(k), nil))
						model[k] = true
					case op < 8:
						live.Delete(shortProbe(key(k)))
						delete(model, k)
					case op < 9:
						hi := k + r.Uint64N(40)
						live.DeleteRange(shortProbe(key(k)), shortProbe(key(hi)), &tb.DeleteRangeOptions{NoReturn: true})
						for x := range model {
							if x >= k && x < hi {
								delete(model, x)
							}
						}
					default:
						top := uint64(0)
						if it, ok := live.Max(); ok {
							top = binary.BigEndian.Uint64(keyOf(nil, it, make([]byte, inlineLen))[3:])
						}
						live.Load(tr.newItem(key(top+1), nil))
						model[top+1] = true
					}
				}
			}
			for i, rd := range readers {
				if err := <-rd.done; err != nil {
					t.Errorf("reader %d: %v", i, err)
				}
			}
			if live.Len() != len(model) {
				t.Errorf("live tree holds %d items, want %d", live.Len(), len(model))
			}
		})
	}
}
