package generated

import (
	"time"

	"github.com/stategen/stategen/generated/geo"
)

// Event is the representative value of the codec benchmarks: an id, a short
// string, a timestamp, a few tags, a float and a small map.
type Event struct {
	ID     int64
	Name   string
	At     time.Time
	Tags   []string
	Score  float64
	Counts map[string]int64
}

// Bid is the small value of the codec benchmarks, in the shape of a
// Nexmark bid: an auction and a bidder id, a price, a short string and a
// timestamp.
type Bid struct {
	Auction int64
	Bidder  int64
	Price   int64
	Channel string
	At      time.Time
}

// Color is an enum: a defined type over a basic type.
type Color uint8

// The colors.
const (
	Red Color = iota
	Green
	Blue
)

// Level is a string enum.
type Level string

// AccountID is a defined int64, a key whose generated codec gives its
// encoding as a number (runtime.KeyWord).
type AccountID int64

// Window is a time window, the namespace of windowed state.
type Window struct {
	Start, End int64
}

// SessionKey is a composite key of every key-able leaf kind: keys order by
// its fields in declaration order.
type SessionKey struct {
	User   string
	Day    int32
	Weight float64
	At     time.Time
	Active bool
	ID     [4]byte
	Raw    []byte
	Span   time.Duration
	Shard  uint16
	Color  Color
}

// Scalars holds every basic type.
type Scalars struct {
	B   bool
	I   int
	I8  int8
	I16 int16
	I32 int32
	I64 int64
	U   uint
	U8  uint8
	U16 uint16
	U32 uint32
	U64 uint64
	F32 float32
	F64 float64
	S   string
	Bs  []byte
	T   time.Time
	D   time.Duration
}

// Base is embedded in Agg.
type Base struct {
	Count int64
	Sum   float64
}

// Stamp is a defined type over time.Time's structure.
type Stamp time.Time

// Blob is a defined []byte.
type Blob []byte

// Tags is a defined slice type.
type Tags []Level

// Agg is an aggregate with nested, embedded and unexported fields,
// pointers, arrays, slices, maps and types of another package.
type Agg struct {
	Base
	*Extra
	Min, Max  float32
	Where     geo.Point
	Path      geo.Region
	Pair      geo.Pair[string, int64]
	Matrix    [2][3]int16
	Hash      [8]byte
	Colors    []Color
	Levels    Tags
	ByColor   map[Color][]string
	Nested    map[string]map[int32]bool
	Next      *Agg2
	Maybe     *int64
	Blob      Blob
	Stamp     Stamp
	Window    Window
	Anonymous struct {
		X, Y int32
	}
	hidden string
	empty  struct{}
}

// Extra is embedded by pointer.
type Extra struct {
	Note string
}

// Agg2 is reached through a pointer (recursion is not supported, so a
// linked structure needs distinct types).
type Agg2 struct {
	Label Level
	Set   map[[2]uint8]struct{}
}

// Position is where a source instance reads a partition from.
type Position struct {
	Partition int32
	Offset    int64
}
