package worker

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"
	tempotel "go.temporal.io/sdk/contrib/opentelemetry"

	"github.com/llmplanner/planner/activities"
)

// LatencyBuckets are the histogram bounds, in seconds, of the SDK's latency timers
// (request, schedule-to-start, execution and workflow-task latencies).
var LatencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// Metrics is the worker's Prometheus registry: the Temporal SDK's metrics (through
// OpenTelemetry, counters as `<name>_total`, timers as `<name>_seconds` histograms) and the
// planner series (Dynamo's `dynamo_planner_*` and the planner's own `planner_*`, labelled
// with the deployment's workflow id) the worker computes from its Observe activities and the
// planners' state queries (plannerMetrics: workflow code emits none). Go runtime and process
// collectors are included.
type Metrics struct {
	// Registry holds every collector; serve it with Handler.
	Registry *prometheus.Registry
	// SDK is the Temporal metrics handler to put in client.Options.
	SDK      client.MetricsHandler
	provider *sdkmetric.MeterProvider
	planners *plannerMetrics
}

// NewMetrics builds the registry and the SDK metrics handler.
func NewMetrics() (*Metrics, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithView(sdkmetric.NewView(
		sdkmetric.Instrument{Kind: sdkmetric.InstrumentKindHistogram},
		sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: LatencyBuckets}},
	)))
	h := tempotel.NewMetricsHandler(tempotel.MetricsHandlerOptions{Meter: provider.Meter("planner"), UseMonotonicCounters: true})
	gauges := newPlannerGauges(DefaultPlannerSeriesTTL, time.Now)
	reg.MustRegister(gauges)
	return &Metrics{Registry: reg, SDK: h, provider: provider, planners: newPlannerMetrics(gauges, time.Now)}, nil
}

// Sink is the activities' observation sink feeding the planner series
// (activities.Activities.Sink).
func (m *Metrics) Sink() activities.ObservationSink { return m.planners }

// WatchPlanners keeps the planner series current until ctx ends: it reads the state query
// of each planner with series here when its tick starts and every refresh interval, and
// drops the series of a planner that ended.
func (m *Metrics) WatchPlanners(ctx context.Context, c client.Client, logger *slog.Logger) {
	m.planners.run(ctx, clientQuerier{c}, logger)
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
