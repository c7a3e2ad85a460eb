// Package codecbench holds the representative value of the codec
// benchmarks for tinylib/msgp, whose generated code (event_gen.go) is
// checked in. It mirrors generated.Event field for field.
package codecbench

import "time"

//go:generate go run github.com/tinylib/msgp@v1.6.5 -file event.go -o event_gen.go -tests=false

// Event is generated.Event for msgp.
type Event struct {
	ID     int64            `msg:"id"`
	Name   string           `msg:"name"`
	At     time.Time        `msg:"at"`
	Tags   []string         `msg:"tags"`
	Score  float64          `msg:"score"`
	Counts map[string]int64 `msg:"counts"`
}

// Bid is generated.Bid for msgp.
type Bid struct {
	Auction int64     `msg:"auction"`
	Bidder  int64     `msg:"bidder"`
	Price   int64     `msg:"price"`
	Channel string    `msg:"channel"`
	At      time.Time `msg:"at"`
}
