package pipeline

import (
	"fmt"
	"math/bits"
)

// The shape of the synthetic stream.
const (
	// EventStep is the event time between two consecutive events.
	EventStep = 10 // milliseconds
	// StreamStart is the event time of event 0: 2026-01-01T00:00:00Z.
	StreamStart = 1767225600000 // Unix milliseconds
	// SessionGap is the length of a session bucket.
	SessionGap = 5 * 60 * 1000 // milliseconds
	// WindowSize is the length of a tumbling window.
	WindowSize = 60 * 1000 // milliseconds
	// TimelineSpan is how much event time a user's timeline keeps.
	TimelineSpan = 2 * 60 * 1000 // milliseconds
	// RecentEvents is the length of a user's recent-events list.
	RecentEvents = 8
	// Pages is the number of distinct pages.
	Pages = 40
)

// Stream is the synthetic, deterministic click stream: event i is a pure
// function of (Seed, i), so a consumer can start reading at any offset and
// read exactly what an earlier consumer read there — the property a Kafka
// partition gives a real job, and the one replay after a restore needs.
type Stream struct {
	// Seed selects the stream.
	Seed uint64
	// Users is the number of distinct users; a few are much more active
	// than the rest.
	Users int
	// Len is the number of events.
	Len int64
}

// Event returns event i of the stream.
func (s Stream) Event(i int64) Event {
	h1 := mix(s.Seed, uint64(i))
	h2 := mix(h1, 0x9e3779b97f4a7c15)
	// Skew users: the square of a uniform number favours small indexes.
	x, _ := bits.Mul64(h1, h1)
	u, _ := bits.Mul64(x, uint64(s.Users))
	user := fmt.Sprintf("user-%05d", u)
	at := StreamStart + i*EventStep + int64(h2%2000) // up to 2 s of jitter
	// Sessions are buckets of event time, shifted per user so that users
	// do not all start a session at once.
	shift := int64(mix(s.Seed, u) % SessionGap)
	return Event{
		Offset:  i,
		User:    user,
		Page:    fmt.Sprintf("/page/%02d", (h2>>32)%Pages),
		Session: (at + shift) / SessionGap,
		At:      at,
	}
}

// mix is SplitMix64's finalizer over a and b: a cheap, well-distributed
// pure function.
func mix(a, b uint64) uint64 {
	z := a ^ (b+0x9e3779b97f4a7c15)*0xbf58476d1ce4e5b9
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
