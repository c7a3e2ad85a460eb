package metrics

import (
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// ErrInstrument reports that the MeterProvider could not create an
// instrument; the error names the instrument and wraps the provider's
// error.
var ErrInstrument = errors.New("metrics: cannot create instrument")

// Units, in UCUM as OpenTelemetry's semantic conventions write them.
const (
	unitSeconds    = "s"
	unitBytes      = "By"
	unitCheckpoint = "{checkpoint}"
)

// durationBuckets are the histogram boundaries of durations, in seconds:
// from a millisecond (a synchronous phase) to ten minutes (the default
// checkpoint timeout). The SDK's default boundaries suit milliseconds.
var durationBuckets = []float64{
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
	1, 2.5, 5, 10, 30, 60, 120, 300, 600,
}

// sizeBuckets are the histogram boundaries of sizes, in bytes: powers of
// four from 1 KiB to 64 GiB.
var sizeBuckets = func() []float64 {
	var b []float64
	for s := float64(1 << 10); s <= 1<<36; s *= 4 {
		b = append(b, s)
	}
	return b
}()

// meter returns the package's meter of mp; a nil mp is the no-op
// provider, which records nothing.
func meter(mp metric.MeterProvider) metric.Meter {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	return mp.Meter(ScopeName)
}

// builder creates instruments and keeps the first error.
type builder struct {
	m   metric.Meter
	err error
}

func (b *builder) check(name string, err error) {
	if err != nil && b.err == nil {
		b.err = fmt.Errorf("%w %s: %w", ErrInstrument, name, err)
	}
}

func (b *builder) counter(name, unit, desc string) metric.Int64Counter {
	c, err := b.m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	b.check(name, err)
	return c
}

func (b *builder) upDown(name, unit, desc string) metric.Int64UpDownCounter {
	c, err := b.m.Int64UpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	b.check(name, err)
	return c
}

func (b *builder) seconds(name, desc string) metric.Float64Histogram {
	h, err := b.m.Float64Histogram(name, metric.WithUnit(unitSeconds), metric.WithDescription(desc),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	b.check(name, err)
	return h
}

func (b *builder) bytes(name, desc string) metric.Int64Histogram {
	h, err := b.m.Int64Histogram(name, metric.WithUnit(unitBytes), metric.WithDescription(desc),
		metric.WithExplicitBucketBoundaries(sizeBuckets...))
	b.check(name, err)
	return h
}

func (b *builder) floatGauge(name, unit, desc string) metric.Float64Gauge {
	g, err := b.m.Float64Gauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
	b.check(name, err)
	return g
}

func (b *builder) gauge(name, unit, desc string) metric.Int64Gauge {
	g, err := b.m.Int64Gauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
	b.check(name, err)
	return g
}

func (b *builder) observableGauge(name, unit, desc string) metric.Int64ObservableGauge {
	g, err := b.m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
	b.check(name, err)
	return g
}

func (b *builder) observableCounter(name, unit, desc string) metric.Int64ObservableCounter {
	c, err := b.m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	b.check(name, err)
	return c
}
