package worker

import (
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"
	tempotel "go.temporal.io/sdk/contrib/opentelemetry"
)

// LatencyBuckets are the histogram bounds, in seconds, of the SDK's latency timers
// (request, schedule-to-start, execution and workflow-task latencies).
var LatencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// Metrics is the worker's Prometheus registry: the Temporal SDK's metrics (through
// OpenTelemetry, counters as `<name>_total`, timers as `<name>_seconds` histograms) and the
// `dynamo_planner_*` gauges the planner workflow emits through the same handler, tagged with
// the deployment's workflow id; a deployment's gauges are dropped once none was updated for
// DefaultPlannerSeriesTTL. Go runtime and process collectors are included.
type Metrics struct {
	// Registry holds every collector; serve it with Handler.
	Registry *prometheus.Registry
	// SDK is the Temporal metrics handler to put in client.Options.
	SDK      client.MetricsHandler
	provider *sdkmetric.MeterProvider
	gauges   *plannerGauges
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
	return &Metrics{Registry: reg, SDK: plannerMetricsHandler{next: h, gauges: gauges}, provider: provider, gauges: gauges}, nil
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
