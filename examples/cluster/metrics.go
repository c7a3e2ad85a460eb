package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// checkMetricsAddr validates the -metrics-addr flag: empty (no metrics)
// or HOST:PORT with a numeric port, 0 for any free one.
func checkMetricsAddr(addr string) error {
	if addr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		if n, perr := strconv.Atoi(port); perr != nil || n < 0 || n > 65535 {
			err = fmt.Errorf("port %q is not a number in [0, 65535]", port)
		}
	}
	if err != nil {
		return fmt.Errorf("-metrics-addr: %q: want HOST:PORT, e.g. 127.0.0.1:9464, or 127.0.0.1:0 for any free port: %v", addr, err)
	}
	return nil
}

// metricsServer serves the process's OpenTelemetry metrics in the
// Prometheus text format at /metrics.
type metricsServer struct {
	provider *sdkmetric.MeterProvider
	srv      *http.Server
	addr     net.Addr
}

// serveMetrics listens on addr and serves /metrics: the measurements of
// the returned MeterProvider, which the process hands to stategen
// (etcdcoord.Options.MeterProvider, driver.InstanceOptions.MeterProvider),
// exported by OpenTelemetry's Prometheus exporter into a registry of its
// own. It logs the address it listens on (the port, if addr's is 0). An
// empty addr serves nothing and returns a nil server, whose Provider is
// nil: stategen then records nothing.
func serveMetrics(addr string, log *slog.Logger) (*metricsServer, error) {
	if addr == "" {
		return nil, nil
	}
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("metrics exporter: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m := &metricsServer{
		provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp)),
		srv:      &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		addr:     ln.Addr(),
	}
	go func() {
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics server stopped", "err", err)
		}
	}()
	log.Info("serving metrics", "addr", m.addr.String(), "path", "/metrics")
	return m, nil
}

// Provider returns the MeterProvider to record with; nil for no metrics.
func (m *metricsServer) Provider() metric.MeterProvider {
	if m == nil {
		return nil
	}
	return m.provider
}

// Close stops serving and shuts the provider down.
func (m *metricsServer) Close() {
	if m == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = m.srv.Shutdown(ctx)
	_ = m.provider.Shutdown(ctx)
}
