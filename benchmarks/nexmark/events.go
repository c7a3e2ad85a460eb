package nexmark

import (
	"fmt"
	"strconv"
	"strings"
)

// EventsEnv is the environment variable that sets how many events the
// benchmark generates and processes per pass (ParseEvents reads it).
const EventsEnv = "STATEGEN_NEXMARK_EVENTS"

// The benchmark's stream lengths.
const (
	// DefaultEvents is the default: 200,000 events, 200 s of event time —
	// 20 tumbling windows, 40 sliding ones — a pass of well under a second
	// on cow and of a few seconds on pebble.
	DefaultEvents = 200_000
	// SmokeEvents is the default under -short and in smoke runs
	// (-benchtime=Nx with N <= 10, as CI's -benchtime=1x).
	SmokeEvents = 20_000
	// MinEvents is the fewest events ParseEvents accepts: one of each kind
	// and a watermark.
	MinEvents = ProportionDenominator
)

// ParseEvents parses a number of events as EventsEnv gives it: digits,
// optionally with the suffix K (thousands) or M (1<<20, as
// STATEGEN_BENCH_KEYS), at least MinEvents.
func ParseEvents(s string) (int, error) {
	digits, mult := s, 1
	switch {
	case strings.HasSuffix(s, "K"):
		digits, mult = strings.TrimSuffix(s, "K"), 1000
	case strings.HasSuffix(s, "M"):
		digits, mult = strings.TrimSuffix(s, "M"), 1<<20
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 || n > (1<<40)/mult || n*mult < MinEvents {
		return 0, fmt.Errorf("%s=%q: want a number of events of at least %d, like 200000, 200K or 1M", EventsEnv, s, MinEvents)
	}
	return n * mult, nil
}

// EventsName formats a number of events for a benchmark name: 200K, 1M,
// 12345.
func EventsName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dK", n/1000)
	}
	return strconv.Itoa(n)
}
