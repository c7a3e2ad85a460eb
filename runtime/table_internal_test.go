package runtime

import (
	"fmt"
	"testing"
)

// fakeLease is a TableLease whose state the test sets.
type fakeLease struct{ released, freed bool }

func (l *fakeLease) Released() bool { return l.released }
func (l *fakeLease) Freed() bool    { return l.freed }
func (l *fakeLease) ErrReleasedDuringScan(state string) error {
	return fmt.Errorf("%w: %s", ErrReleased, state)
}

func testTable(t *testing.T) *valueTable[int64, int64] {
	closed, iterating := false, 0
	cfg := StoreConfig{MaxParallelism: 4, KeyGroups: KeyGroupRange{Start: 0, End: 4}}
	tab, err := newValueTable[int64, int64](StateSpec{Name: "t", Kind: KindValue}, TableEnv{
		Config: cfg, Closed: &closed, Iterating: &iterating,
		CheckGroup: func(*StoreConfig, string, int) error { return nil },
	}, Int64Codec{}, Int64Codec{})
	if err != nil {
		t.Fatal(err)
	}
	return tab.(*valueTable[int64, int64])
}

func (t *valueTable[K, V]) putKey(k K, v V) error {
	kb := t.keys.kc.AppendKey(nil, k)
	key := MakeKey(kb, nil, t.env.Config.MaxParallelism)
	return t.tput(key.Group(), key.Hash(), k, v)
}

// TestFreezeForgetsFreedSnapshots: a key group that is never written
// again keeps only the leases of live snapshots, however many snapshots
// are taken and freed; a write while one is live copies the slots, and
// one after every snapshot is freed writes them in place.
func TestFreezeForgetsFreedSnapshots(t *testing.T) {
	tab := testTable(t)
	for k := range int64(20) {
		if err := tab.putKey(k, k); err != nil {
			t.Fatal(err)
		}
	}
	var last *fakeLease
	for range 100 {
		if last != nil {
			last.released, last.freed = true, true
		}
		last = &fakeLease{}
		tab.Freeze(last)
	}
	for i, g := range tab.groups {
		if g.m.n != 0 && len(g.holders) != 1 {
			t.Fatalf("key group %d holds %d leases after 100 snapshots, one live; want 1", i, len(g.holders))
		}
	}
	view := tab.Freeze(last).(*valueView[int64, int64])
	before := &view.tabs[0].slots[0]
	_ = tab.putKey(0, 100) // a live snapshot holds the slots: copied
	for i := range tab.groups {
		if g := &tab.groups[i]; g.m.n != 0 && len(g.m.slots) != 0 && &g.m.slots[0] == before {
			t.Fatal("a write under a live snapshot wrote its slots")
		}
	}
	last.released, last.freed = true, true
	g := &tab.groups[KeyGroupOfHash(HashKey(Int64Codec{}.AppendKey(nil, 0)), 4)]
	slots := &g.m.slots[0]
	_ = tab.putKey(0, 200) // no live snapshot: in place
	if &g.m.slots[0] != slots {
		t.Fatal("a write with no live snapshot copied the slots")
	}
}
