package runtime_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stategen/stategen/runtime"
)

// TestGetInto reads values and map entries into a caller's variable on
// every backend: the value read is the value stored; an array large enough
// is reused (BytesCodec is an IntoDecoder) and a short one replaced; nil
// and empty stay apart; an absent key leaves the variable alone; a codec
// that is not an IntoDecoder (StringCodec) decodes a fresh value; the zero
// handle says ErrUnbound.
func TestGetInto(t *testing.T) {
	for name, newStore := range backendsFor(t) {
		t.Run(name, func(t *testing.T) {
			s := newStore(runtime.StoreConfig{})
			v := must[runtime.Value[string, []byte]](t)(runtime.NewValue(s, runtime.ValueDescriptor[string, []byte]{
				Name: "v", Key: runtime.StringCodec{}, Value: runtime.BytesCodec{},
			}))
			sv := must[runtime.SubKeyedValue[string, int64, []byte]](t)(runtime.NewSubKeyedValue(s, runtime.SubKeyedValueDescriptor[string, int64, []byte]{
				Name: "sv", Key: runtime.StringCodec{}, Namespace: runtime.Int64Codec{}, Value: runtime.BytesCodec{},
			}))
			m := must[runtime.Map[string, string, []byte]](t)(runtime.NewMap(s, runtime.MapDescriptor[string, string, []byte]{
				Name: "m", Key: runtime.StringCodec{}, UserKey: runtime.StringCodec{}, Value: runtime.BytesCodec{},
			}))
			sm := must[runtime.SubKeyedMap[string, int64, string, []byte]](t)(runtime.NewSubKeyedMap(s, runtime.SubKeyedMapDescriptor[string, int64, string, []byte]{
				Name: "sm", Key: runtime.StringCodec{}, Namespace: runtime.Int64Codec{}, UserKey: runtime.StringCodec{}, Value: runtime.BytesCodec{},
			}))
			str := must[runtime.Value[string, string]](t)(runtime.NewValue(s, runtime.ValueDescriptor[string, string]{
				Name: "str", Key: runtime.StringCodec{}, Value: runtime.StringCodec{},
			}))
			check(t, v.Put("a", []byte("hello")))
			check(t, v.Put("empty", []byte{}))
			check(t, v.Put("nil", nil))
			check(t, sv.Put("a", 7, []byte("sub")))
			check(t, m.Put("a", "x", []byte("map")))
			check(t, sm.Put("a", 7, "x", []byte("submap")))
			check(t, str.Put("a", "text"))

			reads := []struct {
				name string
				get  func(dst *[]byte) (bool, error)
				want []byte
			}{
				{"Value", func(d *[]byte) (bool, error) { return v.GetInto("a", d) }, []byte("hello")},
				{"SubKeyedValue", func(d *[]byte) (bool, error) { return sv.GetInto("a", 7, d) }, []byte("sub")},
				{"Map", func(d *[]byte) (bool, error) { return m.GetInto("a", "x", d) }, []byte("map")},
				{"SubKeyedMap", func(d *[]byte) (bool, error) { return sm.GetInto("a", 7, "x", d) }, []byte("submap")},
			}
			for _, r := range reads {
				big := make([]byte, 3, 64)
				dst := big
				if ok, err := r.get(&dst); err != nil || !ok || !bytes.Equal(dst, r.want) {
					t.Fatalf("%s.GetInto = %q, %v, %v; want %q, true", r.name, dst, ok, err, r.want)
				}
				if &dst[:1][0] != &big[:1][0] {
					t.Errorf("%s.GetInto did not reuse an array of capacity %d", r.name, cap(big))
				}
				short := make([]byte, 1)
				dst = short
				if ok, err := r.get(&dst); err != nil || !ok || !bytes.Equal(dst, r.want) || &dst[0] == &short[0] {
					t.Errorf("%s.GetInto into a short slice = %q, %v, %v; want a new %q", r.name, dst, ok, err, r.want)
				}
			}

			dst := []byte("keep")
			if ok, err := v.GetInto("absent", &dst); err != nil || ok || string(dst) != "keep" {
				t.Errorf("GetInto of an absent key = %q, %v, %v; want \"keep\" untouched, false", dst, ok, err)
			}
			if ok, err := m.GetInto("a", "absent", &dst); err != nil || ok || string(dst) != "keep" {
				t.Errorf("Map.GetInto of an absent user key = %q, %v, %v; want \"keep\" untouched, false", dst, ok, err)
			}
			if ok, err := v.GetInto("empty", &dst); err != nil || !ok || dst == nil || len(dst) != 0 {
				t.Errorf("GetInto of an empty value = %#v, %v, %v; want an empty, non-nil slice", dst, ok, err)
			}
			if ok, err := v.GetInto("nil", &dst); err != nil || !ok || dst != nil {
				t.Errorf("GetInto of a nil value = %#v, %v, %v; want nil", dst, ok, err)
			}
			var text string
			if ok, err := str.GetInto("a", &text); err != nil || !ok || text != "text" {
				t.Errorf("GetInto with a codec that is not an IntoDecoder = %q, %v, %v", text, ok, err)
			}

			var unbound runtime.Value[string, []byte]
			if _, err := unbound.GetInto("a", &dst); !errors.Is(err, runtime.ErrUnbound) {
				t.Errorf("GetInto on the zero Value: %v, want ErrUnbound", err)
			}
			var unboundMap runtime.SubKeyedMap[string, int64, string, []byte]
			if _, err := unboundMap.GetInto("a", 1, "x", &dst); !errors.Is(err, runtime.ErrUnbound) {
				t.Errorf("GetInto on the zero SubKeyedMap: %v, want ErrUnbound", err)
			}
		})
	}
}

// TestGetIntoAllocs: on cow, reading a value into a variable that holds a
// large enough slice allocates nothing, where Get allocates the slice; and
// a Get of a value without pointers allocates nothing (its result does not
// escape: GetInto's path, which makes it escape, is kept apart).
func TestGetIntoAllocs(t *testing.T) {
	s := backendsFor(t)["cow"](runtime.StoreConfig{})
	v := must[runtime.Value[int64, []byte]](t)(runtime.NewValue(s, runtime.ValueDescriptor[int64, []byte]{
		Name: "v", Key: runtime.Int64Codec{}, Value: runtime.BytesCodec{},
	}))
	check(t, v.Put(1, bytes.Repeat([]byte("x"), 100)))
	dst := make([]byte, 0, 128)
	if n := testing.AllocsPerRun(100, func() {
		if _, err := v.GetInto(1, &dst); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("GetInto allocated %.1f times per call, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		if _, _, err := v.Get(1); err != nil {
			t.Fatal(err)
		}
	}); n != 1 {
		t.Errorf("Get allocated %.1f times per call, want 1 (the slice it returns)", n)
	}
	n := must[runtime.Value[int64, int64]](t)(runtime.NewValue(s, runtime.ValueDescriptor[int64, int64]{
		Name: "n", Key: runtime.Int64Codec{}, Value: runtime.Int64Codec{},
	}))
	mp := must[runtime.Map[int64, int64, int64]](t)(runtime.NewMap(s, runtime.MapDescriptor[int64, int64, int64]{
		Name: "mp", Key: runtime.Int64Codec{}, UserKey: runtime.Int64Codec{}, Value: runtime.Int64Codec{},
	}))
	check(t, n.Put(1, 5))
	check(t, mp.Put(1, 2, 5))
	if a := testing.AllocsPerRun(100, func() {
		if got, _, err := n.Get(1); err != nil || got != 5 {
			t.Fatal(got, err)
		}
		if got, _, err := mp.Get(1, 2); err != nil || got != 5 {
			t.Fatal(got, err)
		}
	}); a != 0 {
		t.Errorf("Value.Get and Map.Get of an int64 allocated %.1f times, want 0", a)
	}
}
