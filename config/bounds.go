package config

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"unicode/utf8"
)

// Bounds on every count, duration and string a configuration (and the operator messages
// checked against it) may carry. They are far above any real deployment and far below what
// would overflow an int, exhaust memory or exceed Temporal's payload limits: a value past
// one is an error, never clamped.
const (
	// MaxReplicas bounds a pool's replica count wherever one enters: minimum endpoints,
	// max_throughput_scaling_replicas, overrides, acknowledged ready counts, initial counts.
	MaxReplicas = 4096
	// MaxGPUsPerEngine bounds the GPUs of one engine (prefill_engine_num_gpu, decode_engine_num_gpu).
	MaxGPUsPerEngine = 512
	// MaxGPUs bounds a GPU budget: every pool at MaxReplicas engines of MaxGPUsPerEngine GPUs.
	MaxGPUs = 2 * MaxReplicas * MaxGPUsPerEngine
	// MaxIntervalSeconds bounds an adjustment interval (one day).
	MaxIntervalSeconds = 86400
	// MaxHistoryPoints bounds the sizes of the predictors' histories and windows (the
	// predictors' own bound, predict.MaxMaxHistory).
	MaxHistoryPoints = 4096
	// MaxFPMSamples bounds max_num_fpm_samples and fpm_sample_bucket_size.
	MaxFPMSamples = 100000
	// MaxQueueTokens bounds the target-load policy's queued-token thresholds.
	MaxQueueTokens = 1 << 40
	// MaxLatencyMs bounds an SLA target (one hour).
	MaxLatencyMs = 3_600_000
	// MaxSpeculativeTokens bounds speculative_nextn.
	MaxSpeculativeTokens = 64
	// MaxHoldIntervals bounds the counts of intervals a guard holds or looks back.
	MaxHoldIntervals = 10000
	// MaxStringBytes bounds a string setting (paths, URLs, names).
	MaxStringBytes = 4096
	// MaxNamespaceBytes bounds the namespace (a Kubernetes namespace is at most 63).
	MaxNamespaceBytes = 253
	// MaxQueryParams bounds metric_pulling_prometheus_extra_query_params.
	MaxQueryParams = 64
	// MaxReasonBytes bounds the free-text reason an operator gives an override or a pause.
	MaxReasonBytes = 1024
)

// CheckReplicas checks a replica count that enters from outside: 0..MaxReplicas.
func CheckReplicas(field string, n int) error {
	if n < 0 || n > MaxReplicas {
		return fmt.Errorf("%s must be within 0..%d (got %d)", field, MaxReplicas, n)
	}
	return nil
}

// CheckText checks free text that enters from outside and is recorded: valid UTF-8, at most
// maxBytes bytes.
func CheckText(field, s string, maxBytes int) error {
	if p := textProblem(s, maxBytes); p != "" {
		return fmt.Errorf("%s %s", field, p)
	}
	return nil
}

// textProblem says what is wrong with s as bounded text ("" when nothing is).
func textProblem(s string, maxBytes int) string {
	if len(s) > maxBytes {
		return fmt.Sprintf("is %d bytes long, at most %d", len(s), maxBytes)
	}
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	return ""
}

// validateBounds checks every setting against its bound (bounds.go): what validate.go does
// not already range-check.
func (c *Config) validateBounds(v *validator) {
	ints := []struct {
		name   string
		val    *int
		lo, hi int
	}{
		{"throughput_adjustment_interval_seconds", &c.ThroughputAdjustmentIntervalSeconds, math.MinInt, MaxIntervalSeconds},
		{"load_adjustment_interval_seconds", &c.LoadAdjustmentIntervalSeconds, math.MinInt, MaxIntervalSeconds},
		{"max_throughput_scaling_replicas", &c.MaxThroughputScalingReplicas, math.MinInt, MaxReplicas},
		{"max_gpu_budget", &c.MaxGPUBudget, math.MinInt, MaxGPUs},
		{"min_gpu_budget", &c.MinGPUBudget, math.MinInt, MaxGPUs},
		{"min_endpoint", &c.MinEndpoint, math.MinInt, MaxReplicas},
		{"prefill_min_endpoint", c.PrefillMinEndpoint, math.MinInt, MaxReplicas},
		{"decode_min_endpoint", c.DecodeMinEndpoint, math.MinInt, MaxReplicas},
		{"prefill_engine_num_gpu", c.PrefillEngineNumGPU, math.MinInt, MaxGPUsPerEngine},
		{"decode_engine_num_gpu", c.DecodeEngineNumGPU, math.MinInt, MaxGPUsPerEngine},
		{"prophet_window_size", &c.ProphetWindowSize, math.MinInt, MaxHistoryPoints},
		{"kalman_min_points", &c.KalmanMinPoints, math.MinInt, MaxHistoryPoints},
		{"load_predictor_history_size", &c.LoadPredictorHistorySize, math.MinInt, MaxHistoryPoints},
		{"max_num_fpm_samples", &c.MaxNumFPMSamples, math.MinInt, MaxFPMSamples},
		{"fpm_sample_bucket_size", &c.FPMSampleBucketSize, math.MinInt, MaxFPMSamples},
		{"prefill_scale_up_queue_tokens", c.PrefillScaleUpQueueTokens, math.MinInt, MaxQueueTokens},
		{"prefill_scale_down_queue_tokens", c.PrefillScaleDownQueueTokens, math.MinInt, MaxQueueTokens},
		{"load_min_observations", &c.LoadMinObservations, math.MinInt, MaxHistoryPoints},
		{"speculative_nextn", &c.SpeculativeNextn, math.MinInt, MaxSpeculativeTokens},
		{"load_metric_samples", c.LoadMetricSamples, 0, MaxHistoryPoints},
		{"decode_scale_down_hold_intervals", &c.DecodeScaleDownHoldIntervals, math.MinInt, MaxHoldIntervals},
		{"prefill_scale_up_trend_intervals", &c.PrefillScaleUpTrendIntervals, math.MinInt, MaxHoldIntervals},
		{"total_gpu_power_limit", c.TotalGPUPowerLimit, math.MinInt, math.MaxInt32},
	}
	for _, b := range ints {
		// The lower bounds are validate.go's (with its messages); only the upper ones are here,
		// except where validate.go checks nothing.
		switch {
		case b.val == nil:
		case b.lo == math.MinInt && *b.val > b.hi:
			v.add(b.name, fmt.Sprintf("must be at most %d (got %d)", b.hi, *b.val))
		case b.lo != math.MinInt && (*b.val < b.lo || *b.val > b.hi):
			v.add(b.name, fmt.Sprintf("must be within %d..%d (got %d)", b.lo, b.hi, *b.val))
		}
	}
	floats := []struct {
		name string
		val  float64
		hi   float64
	}{
		{"ttft_ms", c.TTFTMs, MaxLatencyMs},
		{"itl_ms", c.ITLMs, MaxLatencyMs},
		{"metric_pulling_prometheus_request_timeout_seconds", c.MetricPullingPrometheusRequestTimeoutSeconds, MaxIntervalSeconds},
		{"scheduling.tick_max_duration_seconds", c.Scheduling.TickMaxDurationSeconds, MaxIntervalSeconds},
	}
	if c.Scheduling.ScaleIntervalSeconds != nil {
		floats = append(floats, struct {
			name string
			val  float64
			hi   float64
		}{"scheduling.scale_interval_seconds", *c.Scheduling.ScaleIntervalSeconds, MaxIntervalSeconds})
	}
	for _, f := range floats {
		if f.val > f.hi && !math.IsInf(f.val, 1) { // +Inf already has validate.go's message
			v.add(f.name, fmt.Sprintf("must be at most %g (got %g)", f.hi, f.val))
		}
	}
	strs := []struct {
		name string
		val  *string
		max  int
	}{
		{"namespace", &c.Namespace, MaxNamespaceBytes},
		{"pre_deployment_sweeping_mode", &c.PreDeploymentSweepingMode, MaxStringBytes},
		{"log_dir", c.LogDir, MaxStringBytes},
		{"profile_results_dir", &c.ProfileResultsDir, MaxStringBytes},
		{"load_predictor", &c.LoadPredictor, MaxStringBytes},
		{"load_predictor_warmup_trace", c.LoadPredictorWarmupTrace, MaxStringBytes},
		{"load_predictor_warmup_trace_model", c.LoadPredictorWarmupTraceModel, MaxStringBytes},
		{"metric_pulling_prometheus_endpoint", &c.MetricPullingPrometheusEndpoint, MaxStringBytes},
		{"metric_pulling_prometheus_token", c.MetricPullingPrometheusToken, MaxStringBytes},
		{"metric_pulling_prometheus_token_file", c.MetricPullingPrometheusTokenFile, MaxStringBytes},
		{"metric_pulling_prometheus_ca_bundle", c.MetricPullingPrometheusCABundle, MaxStringBytes},
		{"throughput_metrics_source", &c.ThroughputMetricsSource, MaxStringBytes},
		{"model_name", c.ModelName, MaxStringBytes},
		{"global_planner_namespace", c.GlobalPlannerNamespace, MaxNamespaceBytes},
		{"report_output_dir", &c.ReportOutputDir, MaxStringBytes},
		{"report_filename", c.ReportFilename, MaxStringBytes},
		{"scheduling.gateway.listen", &c.Scheduling.Gateway.Listen, MaxStringBytes},
	}
	for _, s := range strs {
		if s.val == nil {
			continue
		}
		if p := textProblem(*s.val, s.max); p != "" {
			v.add(s.name, p)
		}
	}
	if n := len(c.MetricPullingPrometheusExtraQueryParams); n > MaxQueryParams {
		v.add("metric_pulling_prometheus_extra_query_params", fmt.Sprintf("has %d entries, at most %d", n, MaxQueryParams))
	} else {
		// Sorted: validation runs in workflow code, where map order must not show.
		for _, k := range sortedKeys(c.MetricPullingPrometheusExtraQueryParams) {
			if textProblem(k, MaxStringBytes) != "" || textProblem(c.MetricPullingPrometheusExtraQueryParams[k], MaxStringBytes) != "" {
				v.add("metric_pulling_prometheus_extra_query_params", fmt.Sprintf("entries must be valid UTF-8 of at most %d bytes (key %.40q)", MaxStringBytes, k))
				break
			}
		}
	}
}

// sortedKeys returns m's keys in order: deterministic, although it ranges over a map (which
// workflowcheck cannot tell from an unordered use, hence the ignore).
//
//workflowcheck:ignore
func sortedKeys(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}
