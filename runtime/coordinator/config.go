package coordinator

import (
	"fmt"
	"math"
	"time"
)

// Defaults applied by Config.Normalize to zero fields. They are Flink's.
const (
	// DefaultTimeout is how long a checkpoint may stay pending before it is
	// aborted as expired.
	DefaultTimeout = 10 * time.Minute
	// DefaultMaxConcurrent is the number of checkpoints that may be pending
	// at once.
	DefaultMaxConcurrent = 1
	// DefaultRetained is the number of completed checkpoints kept.
	DefaultRetained = 1
	// DefaultStatsHistory is the number of recent checkpoint records Stats
	// keeps (Flink's web.checkpoints.history).
	DefaultStatsHistory = 10
	// DefaultIDReservation is the number of checkpoint ids a driver with a
	// durable id counter reserves with one write (see
	// Config.IDReservation). The Core itself has no default: zero turns
	// reservations off.
	DefaultIDReservation = 100
)

// Bounds checked by Config.Normalize.
const (
	// MinInterval is the smallest Interval and Timeout accepted (Flink's
	// minimal checkpoint time).
	MinInterval = 10 * time.Millisecond
	// MaxDuration bounds Interval, Timeout and MinPause: one year. Longer
	// values are certainly mistakes, and bounding them keeps time arithmetic
	// far from overflow.
	MaxDuration = 365 * 24 * time.Hour
	// UnlimitedFailures, as Config.TolerableFailures, disables failure
	// counting: no number of failed checkpoints fails the job.
	UnlimitedFailures = math.MaxInt
	// MaxIDReservation bounds Config.IDReservation.
	MaxIDReservation = 1 << 20
)

// Config holds a coordinator's settings. The zero value of every field but
// Interval means its default; Normalize applies the defaults and validates.
type Config struct {
	// Interval is the period of checkpoints. It is required: at least
	// MinInterval, at most MaxDuration. If it is shorter than MinPause, it is
	// raised to MinPause (checkpoints cannot come more often than the pause
	// allows).
	Interval time.Duration

	// Timeout is how long a checkpoint may wait for its acknowledgements
	// before it is aborted as expired. Default DefaultTimeout (10 minutes);
	// at least MinInterval, at most MaxDuration.
	Timeout time.Duration

	// MinPause is the least time between the completion of one checkpoint
	// and the trigger of the next periodic one. Default 0; at most
	// MaxDuration. Savepoints ignore it.
	MinPause time.Duration

	// MaxConcurrent is how many checkpoints (savepoints included) may be
	// pending before a periodic trigger has to wait for one to finish.
	// Default DefaultMaxConcurrent (1). Savepoints ignore it.
	MaxConcurrent int

	// TolerableFailures is how many consecutive checkpoint failures are
	// tolerated; one more fails the job (see the package doc for what
	// counts). Default 0: the first counted failure fails the job.
	// UnlimitedFailures disables counting.
	TolerableFailures int

	// Retained is how many completed checkpoints are kept; older ones are
	// deleted when newer ones complete. Default DefaultRetained (1).
	// Savepoints are never counted or deleted.
	Retained int

	// StatsHistory is how many recent checkpoint records Stats keeps.
	// Default DefaultStatsHistory (10).
	StatsHistory int

	// IDReservation makes the checkpoint-id counter durable: the Core
	// issues only ids it holds a reservation for, and asks its driver for
	// IDReservation more (a Reserve decision) when fewer than half of them
	// remain, so one durable write covers many checkpoints. At most
	// MaxIDReservation. Zero — the Core's default — turns reservations
	// off: ids are issued without limit and NextID is the counter to
	// persist, which is what tests and drivers without storage want. The
	// driver in package runtime/coordinator/driver uses
	// DefaultIDReservation when it is zero. See the package doc, "The id
	// counter".
	IDReservation int
}

// Normalize applies the defaults to the zero fields of c and validates the
// result. The error wraps ErrInvalidConfig and names the field at fault.
func (c Config) Normalize() (Config, error) {
	bad := func(field, format string, args ...any) (Config, error) {
		return c, fmt.Errorf("%w: Config.%s %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = DefaultMaxConcurrent
	}
	if c.Retained == 0 {
		c.Retained = DefaultRetained
	}
	if c.StatsHistory == 0 {
		c.StatsHistory = DefaultStatsHistory
	}
	switch {
	case c.Interval == 0:
		return bad("Interval", "is required (checkpointing needs a period)")
	case c.Interval < MinInterval || c.Interval > MaxDuration:
		return bad("Interval", "is %v; it must be between %v and %v", c.Interval, MinInterval, MaxDuration)
	case c.Timeout < MinInterval || c.Timeout > MaxDuration:
		return bad("Timeout", "is %v; it must be between %v and %v", c.Timeout, MinInterval, MaxDuration)
	case c.MinPause < 0 || c.MinPause > MaxDuration:
		return bad("MinPause", "is %v; it must be between 0 and %v", c.MinPause, MaxDuration)
	case c.MaxConcurrent < 0:
		return bad("MaxConcurrent", "is %d; it must be at least 1", c.MaxConcurrent)
	case c.TolerableFailures < 0:
		return bad("TolerableFailures", "is %d; it must not be negative", c.TolerableFailures)
	case c.Retained < 0:
		return bad("Retained", "is %d; it must be at least 1", c.Retained)
	case c.StatsHistory < 0:
		return bad("StatsHistory", "is %d; it must be at least 1", c.StatsHistory)
	case c.IDReservation < 0 || c.IDReservation > MaxIDReservation:
		return bad("IDReservation", "is %d; it must be between 0 (off) and %d", c.IDReservation, MaxIDReservation)
	}
	if c.Interval < c.MinPause {
		c.Interval = c.MinPause
	}
	return c, nil
}
