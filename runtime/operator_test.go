package runtime_test

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/stategen/stategen/runtime"
	"github.com/stategen/stategen/runtime/storetest"
)

// FuzzDecodeOperatorState: no container, however damaged — with its
// checksum recomputed so that the parser sees the damage — panics or
// reads past its input.
func FuzzDecodeOperatorState(f *testing.F) {
	m, err := storetest.NewModel(runtime.StoreConfig{})
	if err != nil {
		f.Fatal(err)
	}
	l, err := runtime.NewOperatorList(m, runtime.OperatorListDescriptor[string]{Name: "l", Value: runtime.StringCodec{}})
	if err != nil {
		f.Fatal(err)
	}
	l.Add("a")
	l.Add("bc")
	blob := runtime.EncodeOperatorState(m, []byte("own"))
	f.Add(blob[7:len(blob)-4], true)
	f.Add([]byte{1, 0, 0}, false)
	magic := blob[:7]
	f.Fuzz(func(t *testing.T, body []byte, fixCRC bool) {
		b := append(append([]byte(nil), magic...), body...)
		if fixCRC {
			b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
		}
		own, lists, err := runtime.DecodeOperatorState(b)
		if err != nil && (own != nil || lists != nil) {
			t.Fatalf("an error with results: %q, %v", own, lists)
		}
	})
}

// TestOperatorListHandles: the zero handle is unbound; binding the same
// name twice returns the same list; another mode, or a keyed state's
// name, is refused.
func TestOperatorListHandles(t *testing.T) {
	var zero runtime.OperatorList[int64]
	if zero.Add(1) != runtime.ErrUnbound || zero.Get() != nil {
		t.Error("the zero OperatorList is not unbound")
	}
	m := must[*storetest.Model](t)(storetest.NewModel(runtime.StoreConfig{}))
	d := runtime.OperatorListDescriptor[int64]{Name: "l", Value: runtime.Int64Codec{}}
	a := must[runtime.OperatorList[int64]](t)(runtime.NewOperatorList(m, d))
	b := must[runtime.OperatorList[int64]](t)(runtime.NewOperatorList(m, d))
	check(t, a.Add(7))
	if got := b.Elements(); len(got) != 1 || got[0].Value != 7 || got[0].Origin != -1 {
		t.Errorf("the second handle sees %v", got)
	}
	if _, err := runtime.NewUnionList(m, d); err == nil {
		t.Error("the even-split list bound again as a union list")
	}
	must[runtime.Value[string, int64]](t)(runtime.NewValue(m, runtime.ValueDescriptor[string, int64]{Name: "v", Key: runtime.StringCodec{}, Value: runtime.Int64Codec{}}))
	if _, err := runtime.NewOperatorList(m, runtime.OperatorListDescriptor[int64]{Name: "v", Value: runtime.Int64Codec{}}); err == nil {
		t.Error("an operator list took a keyed state's name")
	}
}
