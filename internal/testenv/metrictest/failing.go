package metrictest

import (
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/embedded"
	"go.opentelemetry.io/otel/metric/noop"
)

// ErrRefused is the error of a Failing provider.
var ErrRefused = errors.New("metrictest: instrument refused")

// Failing returns a MeterProvider that refuses to create the instrument
// named name (with ErrRefused, and a no-op instrument, as the SDK does for
// an invalid instrument), or to register callbacks if name is
// "callback"; everything else is a no-op.
func Failing(name string) metric.MeterProvider { return failingProvider{name: name} }

type failingProvider struct {
	embedded.MeterProvider
	name string
}

func (p failingProvider) Meter(string, ...metric.MeterOption) metric.Meter {
	return failingMeter{name: p.name}
}

type failingMeter struct {
	noop.Meter
	name string
}

func (m failingMeter) err(name string) error {
	if name == m.name {
		return fmt.Errorf("%w: %s", ErrRefused, name)
	}
	return nil
}

func (m failingMeter) Int64Counter(name string, o ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	c, _ := m.Meter.Int64Counter(name, o...)
	return c, m.err(name)
}

func (m failingMeter) Int64UpDownCounter(name string, o ...metric.Int64UpDownCounterOption) (metric.Int64UpDownCounter, error) {
	c, _ := m.Meter.Int64UpDownCounter(name, o...)
	return c, m.err(name)
}

func (m failingMeter) Int64Histogram(name string, o ...metric.Int64HistogramOption) (metric.Int64Histogram, error) {
	h, _ := m.Meter.Int64Histogram(name, o...)
	return h, m.err(name)
}

func (m failingMeter) Float64Histogram(name string, o ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	h, _ := m.Meter.Float64Histogram(name, o...)
	return h, m.err(name)
}

func (m failingMeter) Int64Gauge(name string, o ...metric.Int64GaugeOption) (metric.Int64Gauge, error) {
	g, _ := m.Meter.Int64Gauge(name, o...)
	return g, m.err(name)
}

func (m failingMeter) Float64Gauge(name string, o ...metric.Float64GaugeOption) (metric.Float64Gauge, error) {
	g, _ := m.Meter.Float64Gauge(name, o...)
	return g, m.err(name)
}

func (m failingMeter) Int64ObservableGauge(name string, o ...metric.Int64ObservableGaugeOption) (metric.Int64ObservableGauge, error) {
	g, _ := m.Meter.Int64ObservableGauge(name, o...)
	return g, m.err(name)
}

func (m failingMeter) Int64ObservableCounter(name string, o ...metric.Int64ObservableCounterOption) (metric.Int64ObservableCounter, error) {
	c, _ := m.Meter.Int64ObservableCounter(name, o...)
	return c, m.err(name)
}

func (m failingMeter) RegisterCallback(f metric.Callback, insts ...metric.Observable) (metric.Registration, error) {
	r, _ := m.Meter.RegisterCallback(f, insts...)
	return r, m.err("callback")
}
