// Package frontend is the simulated Dynamo frontend: it routes completion requests to the
// simulated engines and records Dynamo's frontend Prometheus metrics (the series the planner's
// throughput loop reads, §9.1), so the planner observes a simulated deployment exactly as it
// would observe a real one.
package frontend

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names, as Dynamo's frontend exposes them (prefix dynamo_frontend_).
const (
	MetricTTFT             = "dynamo_frontend_time_to_first_token_seconds"
	MetricITL              = "dynamo_frontend_inter_token_latency_seconds"
	MetricRequestDuration  = "dynamo_frontend_request_duration_seconds"
	MetricInputTokens      = "dynamo_frontend_input_sequence_tokens"
	MetricOutputTokens     = "dynamo_frontend_output_sequence_tokens"
	MetricRequestsStarted  = "dynamo_frontend_requests_started_total"
	MetricRequestsTotal    = "dynamo_frontend_requests_total"
	MetricInflightRequests = "dynamo_frontend_inflight_requests"
	// MetricKVHitRate is the KV router's hit rate of each routed request (its chosen
	// engine's cached leading blocks over the request's blocks), a histogram the planner
	// averages over its interval (§9.1). Only a KV router observes it.
	MetricKVHitRate = "dynamo_component_router_kv_hit_rate"
)

// Label names and the values of the status label of MetricRequestsTotal.
const (
	LabelModel     = "model"
	LabelNamespace = "dynamo_namespace"
	LabelStatus    = "status"
	StatusSuccess  = "success"
	StatusError    = "error"
)

// Completed is one finished request as the frontend saw it.
type Completed struct {
	// ISL and OSL are the input and output lengths in tokens.
	ISL, OSL int
	// TTFT is the time from arrival to the first token; Duration from arrival to the last.
	TTFT, Duration time.Duration
	// Err marks a request that failed (no token was delivered).
	Err bool
	// FirstTokenObserved marks a request whose TTFT and ISL FirstToken already observed.
	FirstTokenObserved bool
}

// Metrics are one frontend's Dynamo metrics for one model. The labels model (lower-cased, as
// Dynamo's frontend does) and dynamo_namespace are constant, and every series exists from
// construction on with value 0, so an idle frontend reads as zero traffic rather than as a
// missing series. It is safe for concurrent use.
type Metrics struct {
	ttft, itl, duration, isl, osl prometheus.Histogram
	kvHitRate                     prometheus.Histogram
	started                       prometheus.Counter
	success, failed               prometheus.Counter
	inflight                      prometheus.Gauge
}

// NewMetrics registers the frontend metrics of model in namespace on reg.
//
// The buckets are Dynamo's defaults: log-spaced from a minimum to a maximum, rounded to two
// significant figures, with a leading 0 (TTFT 1 ms–480 s, ITL 1 ms–2 s, request duration
// 1–256 s, ISL 50–128000 tokens, OSL 50–32000 tokens).
func NewMetrics(reg prometheus.Registerer, model, namespace string) (*Metrics, error) {
	if model == "" || namespace == "" {
		return nil, fmt.Errorf("frontend metrics: model (%q) and namespace (%q) are required", model, namespace)
	}
	labels := prometheus.Labels{LabelModel: strings.ToLower(model), LabelNamespace: namespace}
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, ConstLabels: labels, Buckets: buckets})
	}
	m := &Metrics{
		ttft:     hist(MetricTTFT, "Time to first token in seconds", LogBuckets(0.001, 480, 18)),
		itl:      hist(MetricITL, "Inter-token latency in seconds", LogBuckets(0.001, 2, 13)),
		duration: hist(MetricRequestDuration, "Duration of LLM requests", LogBuckets(1, 256, 10)),
		isl:      hist(MetricInputTokens, "Input sequence length in tokens", LogBuckets(50, 128000, 12)),
		osl:      hist(MetricOutputTokens, "Output sequence length in tokens", LogBuckets(50, 32000, 10)),
		kvHitRate: hist(MetricKVHitRate, "KV router hit rate: cached leading blocks over the request's blocks",
			prometheus.LinearBuckets(0, 0.1, 11)),
	}
	started := prometheus.NewCounter(prometheus.CounterOpts{Name: MetricRequestsStarted,
		Help: "Total number of LLM requests started", ConstLabels: labels})
	total := prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricRequestsTotal,
		Help: "Total number of LLM requests processed", ConstLabels: labels}, []string{LabelStatus})
	inflight := prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricInflightRequests,
		Help: "Number of inflight requests", ConstLabels: labels})
	for _, c := range []prometheus.Collector{m.ttft, m.itl, m.duration, m.isl, m.osl, m.kvHitRate, started, total, inflight} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("frontend metrics: register for model %q namespace %q: %w", model, namespace, err)
		}
	}
	// Create both status children now so that every series is exposed (at 0) before the first
	// request.
	m.started, m.inflight = started, inflight
	m.success, m.failed = total.WithLabelValues(StatusSuccess), total.WithLabelValues(StatusError)
	return m, nil
}

// RequestStarted counts an admitted request (requests_started_total) and raises the in-flight
// gauge. Every call must be paired with one RequestFinished.
func (m *Metrics) RequestStarted() {
	m.started.Inc()
	m.inflight.Inc()
}

// FirstToken observes a request's TTFT and ISL when its first token is delivered, as Dynamo's
// frontend does (its response collector observes both with the first response; the ISL only
// then, not at admission). The request's RequestFinished then has FirstTokenObserved set.
func (m *Metrics) FirstToken(isl int, ttft time.Duration) {
	m.ttft.Observe(ttft.Seconds())
	m.isl.Observe(float64(isl))
}

// RequestFinished records a finished request, as Dynamo's frontend does: it lowers the
// in-flight gauge, counts requests_total with status success or error and observes the request
// duration. A successful request also observes the OSL (Dynamo observes it when the request's
// response collector is dropped, at completion), TTFT and ISL unless FirstToken observed them
// at its first token, and the inter-token latency as OSL−1 observations of
// (Duration−TTFT)/(OSL−1) (none when OSL ≤ 1): Dynamo observes each token after the first
// once, with its chunk's per-token gap, so the histogram's mean is the per-token mean. A
// failed request observes no token metric here.
func (m *Metrics) RequestFinished(r Completed) {
	m.inflight.Dec()
	m.duration.Observe(r.Duration.Seconds())
	if r.Err {
		m.failed.Inc()
		return
	}
	m.success.Inc()
	if !r.FirstTokenObserved {
		m.FirstToken(r.ISL, r.TTFT)
	}
	m.osl.Observe(float64(r.OSL))
	if r.OSL <= 1 {
		return
	}
	gap := max(r.Duration-r.TTFT, 0).Seconds() / float64(r.OSL-1)
	for range r.OSL - 1 {
		m.itl.Observe(gap)
	}
}

// ObserveKVHitRate records the KV router's hit rate of one routed request (0–1).
func (m *Metrics) ObserveKVHitRate(rate float64) { m.kvHitRate.Observe(rate) }

// LogBuckets are Dynamo's histogram buckets: 0, then count−1 values log-spaced from lo to hi,
// each rounded to two significant figures, duplicates removed.
func LogBuckets(lo, hi float64, count int) []float64 {
	if count <= 0 {
		return nil
	}
	out := []float64{0}
	for i := 1; i < count; i++ {
		v := math.Exp(math.Log(lo) + (math.Log(hi)-math.Log(lo))*float64(i)/float64(count-1))
		v = roundSig(v, 2)
		if v != out[len(out)-1] {
			out = append(out, v)
		}
	}
	return out
}

func roundSig(v float64, digits int) float64 {
	if v == 0 {
		return 0
	}
	scale := math.Pow(10, float64(digits-1)-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*scale) / scale
}
