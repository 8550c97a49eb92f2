package observe

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/llmplanner/planner/scaling"
)

// TrafficSource reads the frontend traffic of the last window (Dynamo's §3.1 inputs).
//
// The contract, shared by every implementation:
//   - The request count unreadable (query failed, series missing, history too short, data
//     stale): NumReq is nil and the error says why. The caller then holds its throughput
//     decision; an unknown count is never read as zero demand.
//   - The request count is 0: NumReq points at 0 and the means are nil (an idle window; the
//     planner carries its last known ISL/OSL).
//   - Otherwise: NumReq is the count in the window and each mean is the window's increase of
//     the histogram's _sum over the increase of its _count; a mean that cannot be read is nil,
//     never 0.
//
// The returned observation is never nil, even with an error; DurationS is always the window.
type TrafficSource interface {
	Traffic(ctx context.Context, window time.Duration) (*scaling.TrafficObservation, error)
}

// The frontend metrics the planner reads (§9.1), without the _sum/_count suffixes.
const (
	metricTTFT            = "dynamo_frontend_time_to_first_token_seconds"
	metricITL             = "dynamo_frontend_inter_token_latency_seconds"
	metricRequestDuration = "dynamo_frontend_request_duration_seconds"
	metricInputTokens     = "dynamo_frontend_input_sequence_tokens"
	metricOutputTokens    = "dynamo_frontend_output_sequence_tokens"
	metricRequestsStarted = "dynamo_frontend_requests_started_total"
	metricRequestsTotal   = "dynamo_frontend_requests_total"
	// metricKVHitRate is the KV router's per-request hit rate (§9.1 "KV hit rate"), labelled
	// by namespace (a router serves every model of it). Dynamo queries the worker namespace,
	// then its base namespace; a deployment here has one namespace (the deployments file's),
	// so that one is queried, and a router publishing under another namespace is not seen
	// (the hit rate stays unset, as Dynamo's does when both are missing).
	metricKVHitRate = "dynamo_component_router_kv_hit_rate"
)

// trafficMean is one of the histogram means of a TrafficObservation.
type trafficMean struct {
	// metric is the histogram's name.
	metric string
	// scale converts the histogram's unit to the observation's (seconds to milliseconds).
	scale float64
	// field is the observation's field.
	field func(o *scaling.TrafficObservation) **float64
	// anyModel selects the series by namespace only (the router's metrics).
	anyModel bool
}

// trafficMeans lists the histograms the planner averages, in §9.1 order.
var trafficMeans = []trafficMean{
	{metricTTFT, 1000, func(o *scaling.TrafficObservation) **float64 { return &o.TTFTMs }, false},
	{metricITL, 1000, func(o *scaling.TrafficObservation) **float64 { return &o.ITLMs }, false},
	{metricRequestDuration, 1, func(o *scaling.TrafficObservation) **float64 { return &o.RequestDurationS }, false},
	{metricInputTokens, 1, func(o *scaling.TrafficObservation) **float64 { return &o.ISL }, false},
	{metricOutputTokens, 1, func(o *scaling.TrafficObservation) **float64 { return &o.OSL }, false},
	{metricKVHitRate, 1, func(o *scaling.TrafficObservation) **float64 { return &o.KVHitRate }, true},
}

// windowString is Dynamo's PromQL range: whole seconds, "{int(seconds)}s".
func windowString(window time.Duration) string {
	return fmt.Sprintf("%ds", int64(window/time.Second))
}

// validWindow rejects windows that format to a zero or negative range.
func validWindow(window time.Duration) error {
	if window < time.Second {
		return fmt.Errorf("traffic window %v: must be at least 1s", window)
	}
	return nil
}

// finite returns a pointer to v, or nil when v is NaN or infinite.
func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}
