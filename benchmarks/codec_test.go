package benchmarks

// Codec benchmarks: the code stategen generates for two values, against the
// fastest Go serializers with generated or hand-written code for the same
// structs (benchmarks/internal/codecbench): tinylib/msgp, mus-go and
// vtprotobuf; and, for the event, encoding/json and encoding/gob.
//
//   - value=small is generated.Bid, the shape of a Nexmark bid: three int64s,
//     a short string and a time.
//   - value=event is generated.Event: an int64 id, a short string, a time,
//     three tags, a float64 and a map of two counters.
//
// Every codec marshals into a reused buffer and unmarshals into a fresh
// value on the stack, as a state handle's Get decodes into its result
// (vtprotobuf into a Reset message, as pooled messages are reused, since a
// message on the stack would escape). Decoded strings are copies that do
// not alias the input, for every codec. A stored state value is self-contained, so
// gob encodes each value with a new Encoder (type information included) and
// decodes it with a new Decoder. The formats differ in what they keep of a
// time: stategen and msgp keep every instant time.Time holds, mus-go and
// protobuf (Unix nanoseconds, 8 bytes) only those of years 1678 to 2262.
//
//	go test -run '^$' -bench Codec -benchmem -count 6 ./benchmarks/ | benchstat -col /codec -

import (
	"bytes"
	"encoding/gob"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stategen/stategen/benchmarks/internal/codecbench"
	"github.com/stategen/stategen/benchmarks/internal/codecbench/pb"
	"github.com/stategen/stategen/generated"
)

var codecBenchAt = time.Date(2026, 3, 14, 15, 9, 26, 535897932, time.UTC)

func sgEvent() generated.Event {
	return generated.Event{
		ID:     1234567,
		Name:   "click",
		At:     codecBenchAt,
		Tags:   []string{"web", "eu", "mobile"},
		Score:  0.875,
		Counts: map[string]int64{"views": 42, "clicks": 7},
	}
}

func sgBid() generated.Bid {
	return generated.Bid{Auction: 1734, Bidder: 3271, Price: 89517, Channel: "Google", At: codecBenchAt}
}

// codecValue is a value of the benchmarks and its contenders.
type codecValue struct {
	name       string // value=<name>
	want       any    // the value, as its generated type
	contenders []codecContender
}

// codecContender is one contender: marshal appends the encoding of the
// fixed value to dst, unmarshal decodes it into a fresh value and, if keep,
// keeps it for last, which returns it as the generated type. The
// benchmarks do not keep values, so that no contender pays for a copy to
// the heap (with write barriers while the collector runs) that a handle's
// Get does not make.
type codecContender struct {
	name      string
	marshal   func(dst []byte) ([]byte, error)
	unmarshal func(src []byte, keep bool) error
	last      func() any
}

func codecValues() []codecValue {
	return []codecValue{
		{name: "small", want: sgBid(), contenders: bidContenders()},
		{name: "event", want: sgEvent(), contenders: eventContenders()},
	}
}

// grow extends dst by n bytes and returns it with the n new bytes, for the
// serializers that write into a slice of the encoding's size.
func grow(dst []byte, n int) (all, tail []byte) {
	all = slices.Grow(dst, n)[:len(dst)+n]
	return all, all[len(dst):]
}

func bidContenders() []codecContender {
	sg := sgBid()
	mp := codecbench.Bid(sg)
	pv := &pb.Bid{Auction: sg.Auction, Bidder: sg.Bidder, Price: sg.Price, Channel: sg.Channel, AtUnixNano: sg.At.UnixNano()}
	var sgc generated.BidCodec
	var out generated.Bid
	last := func() any { return out }
	pbv := new(pb.Bid)
	return []codecContender{
		{
			name:    "stategen",
			marshal: func(dst []byte) ([]byte, error) { return sgc.AppendValue(dst, sg), nil },
			unmarshal: func(src []byte, keep bool) error {
				v, _, err := sgc.DecodeValue(src)
				if keep {
					out = v
				}
				return err
			},
			last: last,
		},
		{
			name:    "msgp",
			marshal: func(dst []byte) ([]byte, error) { return mp.MarshalMsg(dst) },
			unmarshal: func(src []byte, keep bool) error {
				var v codecbench.Bid
				_, err := v.UnmarshalMsg(src)
				if keep {
					out = generated.Bid(v)
				}
				return err
			},
			last: last,
		},
		{
			name: "mus",
			marshal: func(dst []byte) ([]byte, error) {
				dst, tail := grow(dst, codecbench.BidMUS.Size(mp))
				codecbench.BidMUS.Marshal(mp, tail)
				return dst, nil
			},
			unmarshal: func(src []byte, keep bool) error {
				v, _, err := codecbench.BidMUS.Unmarshal(src)
				if keep {
					out = generated.Bid(v)
				}
				return err
			},
			last: last,
		},
		{
			name: "vtproto",
			marshal: func(dst []byte) ([]byte, error) {
				dst, tail := grow(dst, pv.SizeVT())
				_, err := pv.MarshalToSizedBufferVT(tail)
				return dst, err
			},
			unmarshal: func(src []byte, keep bool) error {
				pbv.Reset()
				err := pbv.UnmarshalVT(src)
				if keep {
					out = generated.Bid{Auction: pbv.Auction, Bidder: pbv.Bidder, Price: pbv.Price, Channel: pbv.Channel, At: time.Unix(0, pbv.AtUnixNano).UTC()}
				}
				return err
			},
			last: last,
		},
	}
}

func eventContenders() []codecContender {
	sg := sgEvent()
	mp := codecbench.Event(sg)
	pv := &pb.Event{Id: sg.ID, Name: sg.Name, AtUnixNano: sg.At.UnixNano(), Tags: sg.Tags, Score: sg.Score, Counts: sg.Counts}
	var sgc generated.EventCodec
	var out generated.Event
	last := func() any { return out }
	pbv := new(pb.Event)
	var jbuf bytes.Buffer
	jenc := json.NewEncoder(&jbuf)
	return []codecContender{
		{
			name:    "stategen",
			marshal: func(dst []byte) ([]byte, error) { return sgc.AppendValue(dst, sg), nil },
			unmarshal: func(src []byte, keep bool) error {
				v, _, err := sgc.DecodeValue(src)
				if keep {
					out = v
				}
				return err
			},
			last: last,
		},
		{
			name:    "msgp",
			marshal: func(dst []byte) ([]byte, error) { return mp.MarshalMsg(dst) },
			unmarshal: func(src []byte, keep bool) error {
				var v codecbench.Event
				_, err := v.UnmarshalMsg(src)
				if keep {
					out = generated.Event(v)
				}
				return err
			},
			last: last,
		},
		{
			name: "mus",
			marshal: func(dst []byte) ([]byte, error) {
				dst, tail := grow(dst, codecbench.EventMUS.Size(mp))
				codecbench.EventMUS.Marshal(mp, tail)
				return dst, nil
			},
			unmarshal: func(src []byte, keep bool) error {
				v, _, err := codecbench.EventMUS.Unmarshal(src)
				if keep {
					out = generated.Event(v)
				}
				return err
			},
			last: last,
		},
		{
			name: "vtproto",
			marshal: func(dst []byte) ([]byte, error) {
				dst, tail := grow(dst, pv.SizeVT())
				_, err := pv.MarshalToSizedBufferVT(tail)
				return dst, err
			},
			unmarshal: func(src []byte, keep bool) error {
				pbv.Reset()
				err := pbv.UnmarshalVT(src)
				if keep {
					out = generated.Event{ID: pbv.Id, Name: pbv.Name, At: time.Unix(0, pbv.AtUnixNano).UTC(), Tags: pbv.Tags, Score: pbv.Score, Counts: pbv.Counts}
				}
				return err
			},
			last: last,
		},
		{
			name: "json",
			marshal: func(dst []byte) ([]byte, error) {
				jbuf.Reset()
				err := jenc.Encode(&sg)
				return append(dst, jbuf.Bytes()...), err
			},
			unmarshal: func(src []byte, keep bool) error {
				var v generated.Event
				err := json.Unmarshal(src, &v)
				if keep {
					out = v
				}
				return err
			},
			last: last,
		},
		{
			name: "gob",
			marshal: func(dst []byte) ([]byte, error) {
				b := bytes.NewBuffer(dst)
				err := gob.NewEncoder(b).Encode(&sg)
				return b.Bytes(), err
			},
			unmarshal: func(src []byte, keep bool) error {
				var v generated.Event
				err := gob.NewDecoder(bytes.NewReader(src)).Decode(&v)
				if keep {
					out = v
				}
				return err
			},
			last: last,
		},
	}
}

// TestCodecsRoundTrip checks that every contender decodes what it encodes,
// so that the benchmarks compare codecs that do the same work.
func TestCodecsRoundTrip(t *testing.T) {
	for _, v := range codecValues() {
		for _, c := range v.contenders {
			b, err := c.marshal(nil)
			if err != nil {
				t.Fatalf("%s/%s: %v", v.name, c.name, err)
			}
			if err := c.unmarshal(b, true); err != nil {
				t.Fatalf("%s/%s: %v", v.name, c.name, err)
			}
			if got := c.last(); !cmp.Equal(got, v.want) {
				t.Errorf("%s/%s: round trip: %s", v.name, c.name, cmp.Diff(v.want, got))
			}
		}
	}
}

// TestStategenMarshalDoesNotAllocate pins the zero-allocation encoding into
// a reused buffer, and the allocations of a decode: one for all strings,
// one for the tags, and two for the map.
func TestStategenMarshalDoesNotAllocate(t *testing.T) {
	v := sgEvent()
	var c generated.EventCodec
	buf := c.AppendValue(nil, v)
	if n := testing.AllocsPerRun(100, func() { buf = c.AppendValue(buf[:0], v) }); n != 0 {
		t.Errorf("AppendValue into a reused buffer: %v allocations, want 0", n)
	}
	var msgpAllocs float64
	{
		mp := codecbench.Event(v)
		b, _ := mp.MarshalMsg(nil)
		msgpAllocs = testing.AllocsPerRun(100, func() {
			var w codecbench.Event
			w.UnmarshalMsg(b)
		})
	}
	n := testing.AllocsPerRun(100, func() { c.DecodeValue(buf) })
	if n > 4 || n >= msgpAllocs {
		t.Errorf("DecodeValue: %v allocations, msgp's UnmarshalMsg %v: want fewer", n, msgpAllocs)
	}
}

func BenchmarkCodecMarshal(b *testing.B) {
	benchCodecs(b, true, func(c codecContender, buf []byte) ([]byte, error) { return c.marshal(buf[:0]) })
}

func BenchmarkCodecUnmarshal(b *testing.B) {
	benchCodecs(b, true, func(c codecContender, buf []byte) ([]byte, error) { return buf, c.unmarshal(buf, false) })
}

func BenchmarkCodecRoundTrip(b *testing.B) {
	benchCodecs(b, false, func(c codecContender, buf []byte) ([]byte, error) {
		buf, err := c.marshal(buf[:0])
		if err == nil {
			err = c.unmarshal(buf, false)
		}
		return buf, err
	})
}

// benchCodecs runs op on every contender of every value as
// value=<value>/codec=<name>, starting from the contender's encoding of the
// value, and with that encoding's size as the bytes of an operation (MB/s)
// if setBytes.
func benchCodecs(b *testing.B, setBytes bool, op func(c codecContender, buf []byte) ([]byte, error)) {
	for _, v := range codecValues() {
		b.Run("value="+v.name, func(b *testing.B) {
			for _, c := range v.contenders {
				b.Run("codec="+c.name, func(b *testing.B) {
					buf, err := c.marshal(nil)
					if err != nil {
						b.Fatal(err)
					}
					if setBytes {
						b.SetBytes(int64(len(buf)))
					}
					b.ReportAllocs()
					for b.Loop() {
						if buf, err = op(c, buf); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
