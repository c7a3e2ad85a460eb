package runtime_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

// TestKeys: the typed KeysIn and AllKeys decode the keys of a state, one
// per key whatever its namespaces or user keys; AllKeys covers exactly the
// key groups the store owns, in order; a loop may read the state; an
// unowned key group and a write from the loop end the sequence with the
// contract's errors.
func TestKeys(t *testing.T) {
	const maxP = 16
	owned := runtime.KeyGroupRange{Start: 4, End: 12}
	s, err := storetest.NewModel(runtime.StoreConfig{MaxParallelism: maxP, KeyGroups: owned})
	check(t, err)
	defer s.Close()
	win := must[runtime.SubKeyedMap[string, int64, string, int64]](t)(runtime.NewSubKeyedMap(s, runtime.SubKeyedMapDescriptor[string, int64, string, int64]{
		Name: "w", Key: runtime.StringCodec{}, Namespace: runtime.Int64Codec{}, UserKey: runtime.StringCodec{}, Value: runtime.Int64Codec{},
	}))
	kgOf := func(u string) int {
		k := runtime.MakeKey(runtime.StringCodec{}.AppendKey(nil, u), nil, maxP)
		return k.Group()
	}
	var users []string // the owned ones
	byGroup := map[int][]string{}
	for _, u := range []string{"ann", "bob", "cy", "dee", "eve", "fay", "gus", "hal", "ivy", "jo"} {
		kg := kgOf(u)
		if !owned.Contains(kg) {
			continue
		}
		users = append(users, u)
		byGroup[kg] = append(byGroup[kg], u)
		for ns := range int64(3) {
			check(t, win.Put(u, ns, "p", ns))
			check(t, win.Put(u, ns, "q", ns))
		}
	}
	if len(byGroup) < 2 {
		t.Fatalf("the test's users fall in %d owned key groups, want at least 2", len(byGroup))
	}
	var all []string
	lastGroup := -1
	for u, err := range win.AllKeys() {
		check(t, err)
		kg := kgOf(u)
		if kg < lastGroup {
			t.Errorf("AllKeys yielded %q of key group %d after key group %d", u, kg, lastGroup)
		}
		lastGroup = kg
		// Reading from inside the loop is allowed.
		if v, ok, err := win.Get(u, 1, "q"); err != nil || !ok || v != 1 {
			t.Errorf("Get from inside AllKeys = %d, %v, %v", v, ok, err)
		}
		all = append(all, u)
	}
	slices.Sort(all)
	slices.Sort(users)
	if !slices.Equal(all, users) {
		t.Errorf("AllKeys = %v, want %v", all, users)
	}
	for kg, want := range byGroup {
		var got []string
		for u, err := range win.KeysIn(kg) {
			check(t, err)
			got = append(got, u)
		}
		slices.Sort(want)
		if !slices.Equal(got, want) { // the model is sorted: keys in key order
			t.Errorf("KeysIn(%d) = %v, want %v", kg, got, want)
		}
	}
	for _, err := range win.KeysIn(0) {
		if !errors.Is(err, runtime.ErrKeyGroupNotOwned) {
			t.Errorf("KeysIn of an unowned key group: %v, want ErrKeyGroupNotOwned", err)
		}
	}
	for u, err := range win.AllKeys() {
		check(t, err)
		if err := win.Delete(u, 0, "p"); !errors.Is(err, runtime.ErrWriteDuringIteration) {
			t.Errorf("Delete from inside AllKeys = %v, want ErrWriteDuringIteration", err)
		}
		break
	}
	var zero runtime.Value[string, int64]
	for _, err := range zero.AllKeys() {
		if !errors.Is(err, runtime.ErrUnbound) {
			t.Errorf("AllKeys of a zero handle: %v, want ErrUnbound", err)
		}
	}
}
