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
// codec=stategen decodes with DecodeValue, as a handle's Get does;
// codec=stategen-into with DecodeValueInto into a reset value, as GetInto
// does and as msgp and vtprotobuf are measured.
//
// Every codec marshals into a reused buffer and unmarshals into a fresh
// value on the stack, as a state handle's Get decodes into its result
// (the others into a reset value that they reuse, since one on the stack
// would escape through their methods). Decoded strings are copies
// that do not alias the input, for every codec. A stored state value is self-contained, so
// gob encodes each value with a new Encoder (type information included) and
// decodes it with a new Decoder. The formats differ in what they keep of a
// time: stategen and msgp keep every instant time.Time holds, mus-go and
// protobuf (Unix nanoseconds, 8 bytes) only those of years 1678 to 2262.
// Every contender decodes the time into a time.Time, as the value holds
// it: vtprotobuf's messages hold an int64 of Unix nanoseconds, which its
// contender makes into the time.Time after each decode (mus-go's decoder
// does the same inside).
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
	"github.com/stategen/stategen/runtime"
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
// Get does not make. Every contender calls its codec through an interface
// or a type parameter, as a state handle calls its runtime.ValueCodec: one
// indirect call per operation each.
type codecContender struct {
	name      string
	marshal   func(dst []byte) ([]byte, error)
	unmarshal func(src []byte, keep bool) error
	last      func() any
}

func codecValues() []codecValue {
	bid := sgBid()
	pbBid := &pb.Bid{Auction: bid.Auction, Bidder: bid.Bidder, Price: bid.Price, Channel: bid.Channel, AtUnixNano: bid.At.UnixNano()}
	ev := sgEvent()
	pbEvent := &pb.Event{Id: ev.ID, Name: ev.Name, AtUnixNano: ev.At.UnixNano(), Tags: ev.Tags, Score: ev.Score, Counts: ev.Counts}
	return []codecValue{
		{name: "small", want: bid, contenders: []codecContender{
			stategenContender[generated.Bid](generated.BidCodec{}, bid),
			stategenIntoContender[generated.Bid](generated.BidCodec{}, bid),
			msgpContender(codecbench.Bid(bid), func(v codecbench.Bid) any { return generated.Bid(v) }),
			musContender[codecbench.Bid](codecbench.BidMUS, codecbench.Bid(bid), func(v codecbench.Bid) any { return generated.Bid(v) }),
			vtprotoContender(pbBid, func(v *pb.Bid) any {
				return generated.Bid{Auction: v.Auction, Bidder: v.Bidder, Price: v.Price, Channel: v.Channel, At: time.Unix(0, v.AtUnixNano).UTC()}
			}),
		}},
		{name: "event", want: ev, contenders: []codecContender{
			stategenContender[generated.Event](generated.EventCodec{}, ev),
			stategenIntoContender[generated.Event](generated.EventCodec{}, ev),
			msgpContender(codecbench.Event(ev), func(v codecbench.Event) any { return generated.Event(v) }),
			musContender[codecbench.Event](codecbench.EventMUS, codecbench.Event(ev), func(v codecbench.Event) any { return generated.Event(v) }),
			vtprotoContender(pbEvent, func(v *pb.Event) any {
				return generated.Event{ID: v.Id, Name: v.Name, At: time.Unix(0, v.AtUnixNano).UTC(), Tags: v.Tags, Score: v.Score, Counts: v.Counts}
			}),
			jsonContender(ev),
			gobContender(ev),
		}},
	}
}

// stategenContender calls the generated codec c through the interface a
// state handle holds.
func stategenContender[T any](c runtime.ValueCodec[T], v T) codecContender {
	var out T
	return codecContender{
		name:    "stategen",
		marshal: func(dst []byte) ([]byte, error) { return c.AppendValue(dst, v), nil },
		unmarshal: func(src []byte, keep bool) error {
			x, _, err := c.DecodeValue(src)
			if keep {
				out = x
			}
			return err
		},
		last: func() any { return out },
	}
}

// stategenIntoContender decodes with the generated codec's DecodeValueInto
// into a value it resets and reuses, as GetInto does, and as msgp and
// vtprotobuf decode: in place, so that the decoded value is not returned
// through an interface call. Reset, the value holds no slice or map to
// reuse, so it allocates what DecodeValue does.
func stategenIntoContender[T any](c interface {
	runtime.ValueCodec[T]
	runtime.IntoDecoder[T]
}, v T) codecContender {
	var out T
	x := new(T)
	return codecContender{
		name:    "stategen-into",
		marshal: func(dst []byte) ([]byte, error) { return c.AppendValue(dst, v), nil },
		unmarshal: func(src []byte, keep bool) error {
			*x = *new(T)
			_, err := c.DecodeValueInto(x, src)
			if keep {
				out = *x
			}
			return err
		},
		last: func() any { return out },
	}
}

// msgpMessage is what msgp generates for a type T.
type msgpMessage[T any] interface {
	*T
	MarshalMsg(b []byte) ([]byte, error)
	UnmarshalMsg(bts []byte) ([]byte, error)
}

func msgpContender[T any, P msgpMessage[T]](v T, generated func(T) any) codecContender {
	var out any
	x := P(new(T)) // reset and reused: on the stack it would escape
	return codecContender{
		name:    "msgp",
		marshal: func(dst []byte) ([]byte, error) { return P(&v).MarshalMsg(dst) },
		unmarshal: func(src []byte, keep bool) error {
			*x = *new(T)
			_, err := x.UnmarshalMsg(src)
			if keep {
				out = generated(*x)
			}
			return err
		},
		last: func() any { return out },
	}
}

// musSerializer is the part of mus.Serializer the benchmarks use.
type musSerializer[T any] interface {
	Marshal(v T, bs []byte) int
	Unmarshal(bs []byte) (T, int, error)
	Size(v T) int
}

func musContender[T any](s musSerializer[T], v T, generated func(T) any) codecContender {
	var out any
	return codecContender{
		name: "mus",
		marshal: func(dst []byte) ([]byte, error) {
			dst, tail := grow(dst, s.Size(v))
			s.Marshal(v, tail)
			return dst, nil
		},
		unmarshal: func(src []byte, keep bool) error {
			x, _, err := s.Unmarshal(src)
			if keep {
				out = generated(x)
			}
			return err
		},
		last: func() any { return out },
	}
}

// vtprotoMessage is what protoc-gen-go and vtprotobuf generate for a
// message M.
type vtprotoMessage[M any] interface {
	*M
	Reset()
	SizeVT() int
	MarshalToSizedBufferVT(dAtA []byte) (int, error)
	UnmarshalVT(dAtA []byte) error
	GetAtUnixNano() int64 // the message's time, which the value holds as a time.Time
}

// vtAt receives the time.Time of each vtprotobuf decode.
var vtAt time.Time

func vtprotoContender[M any, P vtprotoMessage[M]](v P, generated func(P) any) codecContender {
	var out any
	x := P(new(M))
	return codecContender{
		name: "vtproto",
		marshal: func(dst []byte) ([]byte, error) {
			dst, tail := grow(dst, v.SizeVT())
			_, err := v.MarshalToSizedBufferVT(tail)
			return dst, err
		},
		unmarshal: func(src []byte, keep bool) error {
			x.Reset()
			err := x.UnmarshalVT(src)
			vtAt = time.Unix(0, x.GetAtUnixNano()).UTC() // the value's time, as the others decode it
			if keep {
				out = generated(x)
			}
			return err
		},
		last: func() any { return out },
	}
}

// jsonContender and gobContender are the standard library's
// reflection-based codecs.
func jsonContender(v generated.Event) codecContender {
	var out generated.Event
	x := new(generated.Event) // reset and reused: on the stack it would escape
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	return codecContender{
		name: "json",
		marshal: func(dst []byte) ([]byte, error) {
			buf.Reset()
			err := enc.Encode(&v)
			return append(dst, buf.Bytes()...), err
		},
		unmarshal: func(src []byte, keep bool) error {
			*x = generated.Event{}
			err := json.Unmarshal(src, x)
			if keep {
				out = *x
			}
			return err
		},
		last: func() any { return out },
	}
}

func gobContender(v generated.Event) codecContender {
	var out generated.Event
	x := new(generated.Event)
	return codecContender{
		name: "gob",
		marshal: func(dst []byte) ([]byte, error) {
			b := bytes.NewBuffer(dst)
			err := gob.NewEncoder(b).Encode(&v)
			return b.Bytes(), err
		},
		unmarshal: func(src []byte, keep bool) error {
			*x = generated.Event{}
			err := gob.NewDecoder(bytes.NewReader(src)).Decode(x)
			if keep {
				out = *x
			}
			return err
		},
		last: func() any { return out },
	}
}

// grow extends dst by n bytes and returns it with the n new bytes, for the
// serializers that write into a slice of the encoding's size.
func grow(dst []byte, n int) (all, tail []byte) {
	all = slices.Grow(dst, n)[:len(dst)+n]
	return all, all[len(dst):]
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
