package codecbench

import (
	"github.com/mus-format/mus-go/ord"
	"github.com/mus-format/mus-go/raw"
	"github.com/mus-format/mus-go/varint"
)

// The mus-go serializers of Event and Bid, written with mus-go's own
// packages as its README shows for structs (mus-go has no struct support
// of its own; its generator, musgen-go, writes the same calls): varint for
// the integers, raw for the float and for the time (Unix nanoseconds, 8
// bytes, decoded in UTC), ord for strings, slices and maps, which copies
// strings out of the input (its unsafe package would alias it).

var (
	// EventMUS is the mus-go serializer of Event.
	EventMUS = eventMUS{}
	// BidMUS is the mus-go serializer of Bid.
	BidMUS = bidMUS{}

	tagsMUS   = ord.NewSliceSer[string](ord.String)
	countsMUS = ord.NewMapSer[string, int64](ord.String, varint.Int64)
)

type eventMUS struct{}

// Marshal fills bs with the encoding of v and returns its length; bs must
// hold Size(v) bytes.
func (eventMUS) Marshal(v Event, bs []byte) (n int) {
	n = varint.Int64.Marshal(v.ID, bs)
	n += ord.String.Marshal(v.Name, bs[n:])
	n += raw.TimeUnixNanoUTC.Marshal(v.At, bs[n:])
	n += tagsMUS.Marshal(v.Tags, bs[n:])
	n += raw.Float64.Marshal(v.Score, bs[n:])
	return n + countsMUS.Marshal(v.Counts, bs[n:])
}

// Unmarshal decodes an Event from the front of bs and returns it with the
// number of bytes it used.
func (eventMUS) Unmarshal(bs []byte) (v Event, n int, err error) {
	var n1 int
	if v.ID, n, err = varint.Int64.Unmarshal(bs); err != nil {
		return
	}
	if v.Name, n1, err = ord.String.Unmarshal(bs[n:]); err != nil {
		return
	}
	n += n1
	if v.At, n1, err = raw.TimeUnixNanoUTC.Unmarshal(bs[n:]); err != nil {
		return
	}
	n += n1
	if v.Tags, n1, err = tagsMUS.Unmarshal(bs[n:]); err != nil {
		return
	}
	n += n1
	if v.Score, n1, err = raw.Float64.Unmarshal(bs[n:]); err != nil {
		return
	}
	n += n1
	v.Counts, n1, err = countsMUS.Unmarshal(bs[n:])
	n += n1
	return
}

// Size returns the length of the encoding of v.
func (eventMUS) Size(v Event) int {
	return varint.Int64.Size(v.ID) + ord.String.Size(v.Name) +
		raw.TimeUnixNanoUTC.Size(v.At) + tagsMUS.Size(v.Tags) +
		raw.Float64.Size(v.Score) + countsMUS.Size(v.Counts)
}

type bidMUS struct{}

// Marshal fills bs with the encoding of v and returns its length; bs must
// hold Size(v) bytes.
func (bidMUS) Marshal(v Bid, bs []byte) (n int) {
	n = varint.Int64.Marshal(v.Auction, bs)
	n += varint.Int64.Marshal(v.Bidder, bs[n:])
	n += varint.Int64.Marshal(v.Price, bs[n:])
	n += ord.String.Marshal(v.Channel, bs[n:])
	return n + raw.TimeUnixNanoUTC.Marshal(v.At, bs[n:])
}

// Unmarshal decodes a Bid from the front of bs and returns it with the
// number of bytes it used.
func (bidMUS) Unmarshal(bs []byte) (v Bid, n int, err error) {
	var n1 int
	if v.Auction, n, err = varint.Int64.Unmarshal(bs); err != nil {
		return
	}
	if v.Bidder, n1, err = varint.Int64.Unmarshal(bs[n:]); err != nil {
		return
	}
	n += n1
	if v.Price, n1, err = varint.Int64.Unmarshal(bs[n:]); err != nil {
		return
	}
	n += n1
	if v.Channel, n1, err = ord.String.Unmarshal(bs[n:]); err != nil {
		return
	}
	n += n1
	v.At, n1, err = raw.TimeUnixNanoUTC.Unmarshal(bs[n:])
	n += n1
	return
}

// Size returns the length of the encoding of v.
func (bidMUS) Size(v Bid) int {
	return varint.Int64.Size(v.Auction) + varint.Int64.Size(v.Bidder) +
		varint.Int64.Size(v.Price) + ord.String.Size(v.Channel) +
		raw.TimeUnixNanoUTC.Size(v.At)
}
