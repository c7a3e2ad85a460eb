// Package metrictest reads what the instruments of package
// runtime/coordinator/metrics recorded, for tests: a MeterProvider of the
// OpenTelemetry SDK with a ManualReader, and lookups of one data point by
// instrument name and exact attribute set. Only tests import it, so only
// tests link the SDK.
package metrictest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Reader is an SDK MeterProvider whose measurements a test collects on
// demand.
type Reader struct {
	// Provider is the MeterProvider to hand to the code under test.
	Provider *sdkmetric.MeterProvider
	reader   *sdkmetric.ManualReader
}

// New returns a Reader, shut down when the test ends.
func New(t testing.TB) *Reader {
	r := sdkmetric.NewManualReader()
	p := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return &Reader{Provider: p, reader: r}
}

// Collect reads every instrument now (running the observable callbacks).
func (r *Reader) Collect(t testing.TB) Data {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	d := Data{byName: map[string]metricdata.Metrics{}}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			d.byName[m.Name] = m
		}
	}
	return d
}

// Data is one collection.
type Data struct {
	byName map[string]metricdata.Metrics
}

// Has reports whether instrument name recorded anything.
func (d Data) Has(name string) bool {
	_, ok := d.byName[name]
	return ok
}

// Unit returns instrument name's unit.
func (d Data) Unit(name string) string { return d.byName[name].Unit }

// Int returns the value of the data point of int64 sum or gauge name
// whose attributes are exactly attrs; ok is false if there is none.
func (d Data) Int(name string, attrs ...attribute.KeyValue) (v int64, ok bool) {
	set := attribute.NewSet(attrs...)
	var pts []metricdata.DataPoint[int64]
	switch a := d.byName[name].Data.(type) {
	case metricdata.Sum[int64]:
		pts = a.DataPoints
	case metricdata.Gauge[int64]:
		pts = a.DataPoints
	}
	for _, p := range pts {
		if p.Attributes.Equals(&set) {
			return p.Value, true
		}
	}
	return 0, false
}

// Float returns the value of the data point of float64 sum or gauge name
// whose attributes are exactly attrs.
func (d Data) Float(name string, attrs ...attribute.KeyValue) (v float64, ok bool) {
	set := attribute.NewSet(attrs...)
	var pts []metricdata.DataPoint[float64]
	switch a := d.byName[name].Data.(type) {
	case metricdata.Sum[float64]:
		pts = a.DataPoints
	case metricdata.Gauge[float64]:
		pts = a.DataPoints
	}
	for _, p := range pts {
		if p.Attributes.Equals(&set) {
			return p.Value, true
		}
	}
	return 0, false
}

// Count returns the number of measurements of the data point of
// histogram name whose attributes are exactly attrs.
func (d Data) Count(name string, attrs ...attribute.KeyValue) (n uint64, ok bool) {
	set := attribute.NewSet(attrs...)
	visit := func(attrs attribute.Set, count uint64) {
		if attrs.Equals(&set) {
			n, ok = count, true
		}
	}
	switch a := d.byName[name].Data.(type) {
	case metricdata.Histogram[int64]:
		for _, p := range a.DataPoints {
			visit(p.Attributes, p.Count)
		}
	case metricdata.Histogram[float64]:
		for _, p := range a.DataPoints {
			visit(p.Attributes, p.Count)
		}
	}
	return n, ok
}

// Sum returns the sum of the measurements of the data point of float64
// histogram name whose attributes are exactly attrs.
func (d Data) Sum(name string, attrs ...attribute.KeyValue) (sum float64, ok bool) {
	set := attribute.NewSet(attrs...)
	if a, is := d.byName[name].Data.(metricdata.Histogram[float64]); is {
		for _, p := range a.DataPoints {
			if p.Attributes.Equals(&set) {
				return p.Sum, true
			}
		}
	}
	return 0, false
}

// Points lists the data points of name, as "attributes=value" strings
// (a histogram's value is its count), sorted: for failure messages and
// for checking that nothing else was recorded.
func (d Data) Points(name string) []string {
	var out []string
	add := func(attrs attribute.Set, v any) {
		var kv []string
		for _, a := range attrs.ToSlice() {
			kv = append(kv, fmt.Sprintf("%s=%s", a.Key, a.Value.Emit()))
		}
		out = append(out, fmt.Sprintf("{%s}=%v", strings.Join(kv, ","), v))
	}
	switch a := d.byName[name].Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range a.DataPoints {
			add(p.Attributes, p.Value)
		}
	case metricdata.Gauge[int64]:
		for _, p := range a.DataPoints {
			add(p.Attributes, p.Value)
		}
	case metricdata.Sum[float64]:
		for _, p := range a.DataPoints {
			add(p.Attributes, p.Value)
		}
	case metricdata.Gauge[float64]:
		for _, p := range a.DataPoints {
			add(p.Attributes, p.Value)
		}
	case metricdata.Histogram[int64]:
		for _, p := range a.DataPoints {
			add(p.Attributes, p.Count)
		}
	case metricdata.Histogram[float64]:
		for _, p := range a.DataPoints {
			add(p.Attributes, p.Count)
		}
	}
	slices.Sort(out)
	return out
}
