package worker

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// Prefixes of the planner series: Dynamo's names (reference §9.2, exported by Dynamo's
// planner on metric_reporting_prometheus_port) and the planner's own.
const (
	PlannerGaugePrefix = "dynamo_planner_"
	OwnGaugePrefix     = "planner_"
)

// plannerMetric describes one planner series family. Every series also has the label
// "deployment" (the planner's workflow id).
type plannerMetric struct {
	name, help string
	kind       prometheus.ValueType
}

// plannerMetrics lists every planner family the worker exports (docs/observability.md).
var plannerMetricDefs = []plannerMetric{
	// Dynamo's gauges.
	{"dynamo_planner_num_prefill_replicas", "Ready prefill replicas the connector reports.", prometheus.GaugeValue},
	{"dynamo_planner_num_decode_replicas", "Ready decode (or aggregated) replicas the connector reports.", prometheus.GaugeValue},
	{"dynamo_planner_observed_ttft_ms", "Mean time to first token over the last traffic window, ms.", prometheus.GaugeValue},
	{"dynamo_planner_observed_itl_ms", "Mean inter-token latency over the last traffic window, ms.", prometheus.GaugeValue},
	{"dynamo_planner_observed_requests_per_second", "Requests per second over the last traffic window.", prometheus.GaugeValue},
	{"dynamo_planner_observed_request_duration_seconds", "Mean request duration over the last traffic window, s.", prometheus.GaugeValue},
	{"dynamo_planner_observed_input_sequence_tokens", "Mean input sequence length over the last traffic window.", prometheus.GaugeValue},
	{"dynamo_planner_observed_output_sequence_tokens", "Mean output sequence length over the last traffic window.", prometheus.GaugeValue},
	{"dynamo_planner_predicted_requests_per_second", "Requests per second the throughput loop predicts for the next interval.", prometheus.GaugeValue},
	{"dynamo_planner_predicted_input_sequence_tokens", "Input sequence length the throughput loop predicts.", prometheus.GaugeValue},
	{"dynamo_planner_predicted_output_sequence_tokens", "Output sequence length the throughput loop predicts.", prometheus.GaugeValue},
	{"dynamo_planner_predicted_num_prefill_replicas", "Prefill replicas the throughput loop asked for (its target, or its lower bound when the load loop also runs).", prometheus.GaugeValue},
	{"dynamo_planner_predicted_num_decode_replicas", "Decode replicas the throughput loop asked for (its target, or its lower bound when the load loop also runs).", prometheus.GaugeValue},
	{"dynamo_planner_gpu_hours", "GPU-hours of the ready replicas since this worker began watching the planner (ready replicas x GPUs per replica x time).", prometheus.GaugeValue},
	{"dynamo_planner_sla_target_ttft_ms", "The TTFT target in force, ms.", prometheus.GaugeValue},
	{"dynamo_planner_sla_target_itl_ms", "The ITL target in force, ms.", prometheus.GaugeValue},
	{"dynamo_planner_estimated_ttft_ms", "TTFT the perf model estimates for the current load, ms.", prometheus.GaugeValue},
	{"dynamo_planner_estimated_itl_ms", "ITL the perf model estimates for the current load, ms.", prometheus.GaugeValue},
	{"dynamo_planner_engine_prefill_capacity_requests_per_second", "Requests per second one prefill engine sustains within the SLA.", prometheus.GaugeValue},
	{"dynamo_planner_engine_decode_capacity_requests_per_second", "Requests per second one decode engine sustains within the SLA.", prometheus.GaugeValue},
	// Dynamo's enums (prometheus_client Enum: one series per state, the label named after
	// the metric, 1 for the current state).
	{"dynamo_planner_load_scaling_decision", "The load loop's last decision reason (1: current state).", prometheus.GaugeValue},
	{"dynamo_planner_throughput_scaling_decision", "The throughput loop's last decision reason (1: current state).", prometheus.GaugeValue},
	// Dynamo's per-engine gauges (labels worker_id, dp_rank).
	{"dynamo_planner_engine_queued_prefill_tokens", "Prompt tokens waiting in a prefill engine's queue (latest FPM).", prometheus.GaugeValue},
	{"dynamo_planner_engine_queued_decode_kv_tokens", "KV tokens of the decode requests waiting in a decode engine's queue (latest FPM).", prometheus.GaugeValue},
	{"dynamo_planner_engine_inflight_decode_kv_tokens", "KV tokens of the decode requests a decode engine is running (latest FPM).", prometheus.GaugeValue},
	// Dynamo's tick timing.
	{"dynamo_planner_tick_lag_seconds", "How late the last tick started after it was due, s.", prometheus.GaugeValue},
	{"dynamo_planner_tick_duration_seconds", "The last tick's duration from its start to its decision (observation included), s.", prometheus.GaugeValue},
	// The planner's own.
	{"planner_ticks_total", "Ticks the planner ran (scheduled and override passes).", prometheus.CounterValue},
	{"planner_last_tick_timestamp_seconds", "When the planner's last tick decided (Unix seconds).", prometheus.GaugeValue},
	{"planner_next_tick_timestamp_seconds", "When the planner's next tick is due (Unix seconds).", prometheus.GaugeValue},
	{"planner_tick_interval_seconds", "The planner's tick interval, s.", prometheus.GaugeValue},
	{"planner_pending_decision_age_seconds", "Age of the oldest decision sent but not yet reached by the deployment (0: none), s.", prometheus.GaugeValue},
	{"planner_overrides_active", "Operator overrides in force, by kind (replicas_prefill, replicas_decode, pause_scale_up, pause_scale_down): 1 active, 0 not.", prometheus.GaugeValue},
	{"planner_rejected_messages", "Invalid signals recorded in the planner's state (the newest 16 are kept).", prometheus.GaugeValue},
	{"planner_last_rejected_message_timestamp_seconds", "When the newest invalid signal arrived (Unix seconds; 0: none).", prometheus.GaugeValue},
}

var plannerMetricByName = func() map[string]plannerMetric {
	m := make(map[string]plannerMetric, len(plannerMetricDefs))
	for _, d := range plannerMetricDefs {
		m[d.name] = d
	}
	return m
}()

// PlannerMetricNames returns the name of every planner series family the worker exports,
// sorted (Dynamo's dynamo_planner_* names and the planner's own planner_* ones).
func PlannerMetricNames() []string {
	names := make([]string, len(plannerMetricDefs))
	for i, d := range plannerMetricDefs {
		names[i] = d.name
	}
	slices.Sort(names)
	return names
}
