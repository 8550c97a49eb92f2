package config

import (
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/llmplanner/planner/predict"
)

// Validate reports every problem of the configuration, each with its field path; it returns
// nil or an Errors value. It checks the configuration as given: call Resolve first to apply
// the easy-mode override and the default scale interval (Load and Parse do). It reads no
// file (it runs in workflow code); CheckFiles checks the files the configuration names.
func (c *Config) Validate() error {
	v := validator{}
	v.oneOf("pre_deployment_sweeping_mode", c.PreDeploymentSweepingMode, "none", "rapid", "thorough")
	v.oneOf("environment", string(c.Environment), string(EnvKubernetes), string(EnvVirtual), string(EnvGlobalPlanner), string(EnvLocal), string(EnvNoop))
	v.oneOf("backend", string(c.Backend), string(BackendVLLM), string(BackendSGLang), string(BackendTRTLLM), string(BackendMocker))
	v.oneOf("mode", string(c.Mode), string(ModeDisagg), string(ModePrefill), string(ModeDecode), string(ModeAgg))
	v.oneOf("optimization_target", string(c.OptimizationTarget), string(TargetThroughput), string(TargetLatency), string(TargetLoad), string(TargetSLA))
	v.oneOf("load_predictor", c.LoadPredictor, PredictorConstant, PredictorARIMA, PredictorKalman, PredictorProphet)
	v.oneOf("throughput_metrics_source", c.ThroughputMetricsSource, "frontend", "router")
	v.oneOf("throughput_sizing", string(c.ThroughputSizing), string(SizingCapacitySearch), string(SizingInterpolation))
	if strings.TrimSpace(c.Namespace) == "" {
		v.add("namespace", "must not be empty")
	}

	// Supported-feature checks: Dynamo settings that need its Python-only or
	// Kubernetes-operator-only machinery.
	if c.Environment == EnvGlobalPlanner {
		v.add("environment", `"global-planner" is not supported by this planner (use kubernetes, virtual, local or noop)`)
		if c.GlobalPlannerNamespace == nil || *c.GlobalPlannerNamespace == "" {
			v.add("global_planner_namespace", `is required when environment is "global-planner"`)
		}
	}
	if c.AICInterpolation != nil {
		v.add("aic_interpolation", "is not supported: it runs Dynamo's Python-only AI Configurator; give a measured profile in profile_results_dir instead")
	}
	if c.AICPerfModel != nil {
		v.add("aic_perf_model", "is not supported: it needs Dynamo's Python-only AI Configurator wheel; this planner fits its forward-pass model from FPMs (bootstrapped from profile_results_dir)")
	}
	if len(c.Scheduling.ExternalPlugins) > 0 {
		v.add("scheduling.external_plugins", "is not supported: this planner has no gRPC plugin pipeline")
	}
	if c.Scheduling.Gateway.Enabled {
		v.add("scheduling.gateway.enabled", "is not supported: this planner has no plugin registration gateway")
	}
	if c.EnablePowerAwareness {
		v.add("enable_power_awareness", "is not supported by this planner yet (GPU power budgets need per-GPU power limits from the Kubernetes deployment)")
		if c.TotalGPUPowerLimit == nil {
			v.add("total_gpu_power_limit", "is required when enable_power_awareness is true")
		}
		if c.Environment != EnvKubernetes {
			v.add("enable_power_awareness", `requires environment "kubernetes"`)
		}
		if c.Mode == ModeAgg {
			v.add("enable_power_awareness", `is not available in mode "agg"`)
		}
	}
	if c.TotalGPUPowerLimit != nil && *c.TotalGPUPowerLimit < 1 {
		v.add("total_gpu_power_limit", fmt.Sprintf("must be >= 1 watt (got %d)", *c.TotalGPUPowerLimit))
	}

	// Loops and intervals.
	if !c.EnableThroughputScaling && !c.EnableLoadScaling {
		v.add("enable_throughput_scaling", "at least one of enable_throughput_scaling and enable_load_scaling must be true")
	}
	if c.EnableThroughputScaling && c.PreDeploymentSweepingMode == "none" {
		v.add("pre_deployment_sweeping_mode", `cannot be "none" when throughput scaling is enabled: throughput sizing needs a pre-deployment profile`)
	}
	if c.EnableThroughputScaling && c.ThroughputAdjustmentIntervalSeconds <= 0 {
		v.add("throughput_adjustment_interval_seconds", fmt.Sprintf("must be > 0 when throughput scaling is enabled (got %d)", c.ThroughputAdjustmentIntervalSeconds))
	}
	if c.LoadAdjustmentIntervalSeconds <= 0 {
		v.add("load_adjustment_interval_seconds", fmt.Sprintf("must be > 0 (got %d)", c.LoadAdjustmentIntervalSeconds))
	}
	if c.EnableThroughputScaling && c.EnableLoadScaling && c.LoadAdjustmentIntervalSeconds >= c.ThroughputAdjustmentIntervalSeconds {
		v.add("load_adjustment_interval_seconds", fmt.Sprintf("must be shorter than throughput_adjustment_interval_seconds when both loops are enabled (%d >= %d)", c.LoadAdjustmentIntervalSeconds, c.ThroughputAdjustmentIntervalSeconds))
	}
	if c.MaxThroughputScalingReplicas <= 0 {
		v.add("max_throughput_scaling_replicas", fmt.Sprintf("must be > 0 (got %d)", c.MaxThroughputScalingReplicas))
	}
	c.validateScheduling(&v)

	// Replicas and budgets.
	if c.MinEndpoint < 0 {
		v.add("min_endpoint", fmt.Sprintf("must be >= 0 (got %d)", c.MinEndpoint))
	}
	c.validateRoleMinimum(&v, "prefill_min_endpoint", c.PrefillMinEndpoint, c.HasPrefill(), ModePrefill)
	c.validateRoleMinimum(&v, "decode_min_endpoint", c.DecodeMinEndpoint, c.HasDecode(), ModeDecode)
	if c.MinGPUBudget < -1 {
		v.add("min_gpu_budget", fmt.Sprintf("must be -1 (disabled) or >= 0 (got %d)", c.MinGPUBudget))
	}
	if c.MinGPUBudget >= 0 && c.MaxGPUBudget >= 0 && c.MinGPUBudget > c.MaxGPUBudget {
		v.add("min_gpu_budget", fmt.Sprintf("must not exceed max_gpu_budget (%d > %d)", c.MinGPUBudget, c.MaxGPUBudget))
	}
	for _, g := range []struct {
		name string
		val  *int
	}{{"prefill_engine_num_gpu", c.PrefillEngineNumGPU}, {"decode_engine_num_gpu", c.DecodeEngineNumGPU}} {
		if g.val != nil && *g.val < 1 {
			v.add(g.name, fmt.Sprintf("must be >= 1 (got %d)", *g.val))
		}
	}
	for _, p := range []struct {
		name string
		val  int
	}{{"control_api_port", c.ControlAPIPort}, {"metric_reporting_prometheus_port", c.MetricReportingPrometheusPort}, {"live_dashboard_port", c.LiveDashboardPort}} {
		if p.val < 0 || p.val > 65535 {
			v.add(p.name, fmt.Sprintf("must be a port number 0..65535 (got %d)", p.val))
		}
	}

	// SLA targets and predictors.
	v.positive("ttft_ms", c.TTFTMs)
	v.positive("itl_ms", c.ITLMs)
	if c.ProphetWindowSize < 5 {
		v.add("prophet_window_size", fmt.Sprintf("must be >= 5, the prophet predictor's minimum points (got %d)", c.ProphetWindowSize))
	}
	if c.LoadPredictorHistorySize < c.ProphetWindowSize || c.LoadPredictorHistorySize < 5 {
		v.add("load_predictor_history_size", fmt.Sprintf("must be >= 5 and >= prophet_window_size (got %d)", c.LoadPredictorHistorySize))
	}
	v.nonNegative("kalman_q_level", c.KalmanQLevel)
	v.nonNegative("kalman_q_trend", c.KalmanQTrend)
	v.nonNegative("kalman_r", c.KalmanR)
	if c.KalmanMinPoints < 1 {
		v.add("kalman_min_points", fmt.Sprintf("must be >= 1 (got %d)", c.KalmanMinPoints))
	}
	if c.LoadPredictorWarmupTrace != nil && strings.TrimSpace(*c.LoadPredictorWarmupTrace) == "" {
		v.add("load_predictor_warmup_trace", "must not be empty when set")
	}
	if m := c.LoadPredictorWarmupTraceModel; m != nil {
		if err := predict.CheckModelName(*m); err != nil || *m == "" {
			v.add("load_predictor_warmup_trace_model", fmt.Sprintf("must be a model name, not blank, of at most %d bytes once trimmed (got %d bytes)", predict.MaxModelName, len(strings.TrimSpace(*m))))
		} else if c.LoadPredictorWarmupTrace == nil {
			v.add("load_predictor_warmup_trace_model", "selects the rows of load_predictor_warmup_trace, which is not set")
		}
	}

	// Prometheus.
	if strings.TrimSpace(c.MetricPullingPrometheusEndpoint) == "" {
		v.add("metric_pulling_prometheus_endpoint", "must not be empty")
	}
	v.positive("metric_pulling_prometheus_request_timeout_seconds", c.MetricPullingPrometheusRequestTimeoutSeconds)

	// Load scaling.
	if c.MaxNumFPMSamples < 1 {
		v.add("max_num_fpm_samples", fmt.Sprintf("must be >= 1 (got %d)", c.MaxNumFPMSamples))
	}
	if r := int(math.Sqrt(float64(max(c.FPMSampleBucketSize, 0)))); c.FPMSampleBucketSize < 1 || r*r != c.FPMSampleBucketSize {
		v.add("fpm_sample_bucket_size", fmt.Sprintf("must be a perfect square >= 1 (got %d)", c.FPMSampleBucketSize))
	}
	if c.LoadScalingDownSensitivity < 0 || c.LoadScalingDownSensitivity > 100 {
		v.add("load_scaling_down_sensitivity", fmt.Sprintf("must be within 0..100 (got %d)", c.LoadScalingDownSensitivity))
	}
	if c.LoadMinObservations < 1 {
		v.add("load_min_observations", fmt.Sprintf("must be >= 1 (got %d)", c.LoadMinObservations))
	}
	if c.SpeculativeNextn < 0 {
		v.add("speculative_nextn", fmt.Sprintf("must be >= 0 (got %d)", c.SpeculativeNextn))
	}
	if c.DecodeScaleDownHoldIntervals < 0 {
		v.add("decode_scale_down_hold_intervals", fmt.Sprintf("must be >= 0 (got %d)", c.DecodeScaleDownHoldIntervals))
	}
	if c.ScaleDownStabilizationSeconds < 0 || c.ScaleDownStabilizationSeconds > MaxStabilizationSeconds {
		v.add("scale_down_stabilization_seconds", fmt.Sprintf("must be within 0..%d (got %d)", MaxStabilizationSeconds, c.ScaleDownStabilizationSeconds))
	}
	c.validatePolicy(&v)
	c.validateBounds(&v)
	if c.PrefillScaleUpTrendIntervals < 0 {
		v.add("prefill_scale_up_trend_intervals", fmt.Sprintf("must be >= 0 (got %d)", c.PrefillScaleUpTrendIntervals))
	}
	c.validateThresholds(&v)

	// Reports (accepted, not acted on, but still sane).
	if c.ReportIntervalHours != nil && (!(*c.ReportIntervalHours > 0) || math.IsInf(*c.ReportIntervalHours, 0)) {
		v.add("report_interval_hours", fmt.Sprintf("must be a positive finite number of hours or null (got %v)", *c.ReportIntervalHours))
	}
	if c.Scheduling.TickMaxDurationSeconds <= 0 || math.IsNaN(c.Scheduling.TickMaxDurationSeconds) || math.IsInf(c.Scheduling.TickMaxDurationSeconds, 0) {
		v.add("scheduling.tick_max_duration_seconds", fmt.Sprintf("must be a positive number of seconds (got %v)", c.Scheduling.TickMaxDurationSeconds))
	}
	if len(v.errs) == 0 {
		return nil
	}
	return v.errs
}

func (c *Config) validateScheduling(v *validator) {
	si := c.Scheduling.ScaleIntervalSeconds
	if si == nil {
		return
	}
	if !(*si > 0) || math.IsInf(*si, 0) {
		v.add("scheduling.scale_interval_seconds", fmt.Sprintf("must be > 0 (got %v)", *si))
		return
	}
	divides := func(interval int) bool {
		ratio := float64(interval) / *si
		return isClose(ratio, math.RoundToEven(ratio))
	}
	if c.LoadAdjustmentIntervalSeconds > 0 && !divides(c.LoadAdjustmentIntervalSeconds) {
		v.add("scheduling.scale_interval_seconds", fmt.Sprintf("must divide load_adjustment_interval_seconds (%v does not divide %d)", *si, c.LoadAdjustmentIntervalSeconds))
	}
	if c.EnableThroughputScaling && c.ThroughputAdjustmentIntervalSeconds > 0 && !divides(c.ThroughputAdjustmentIntervalSeconds) {
		v.add("scheduling.scale_interval_seconds", fmt.Sprintf("must divide throughput_adjustment_interval_seconds (%v does not divide %d)", *si, c.ThroughputAdjustmentIntervalSeconds))
	}
}

// isClose is Python's math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9).
func isClose(a, b float64) bool {
	return math.Abs(a-b) <= math.Max(1e-9*math.Max(math.Abs(a), math.Abs(b)), 1e-9)
}

func (c *Config) validateRoleMinimum(v *validator, field string, val *int, active bool, role Mode) {
	if val == nil {
		return
	}
	if c.Mode == ModeAgg {
		v.add(field, `is not allowed in mode "agg": use min_endpoint`)
		return
	}
	if !active {
		v.add(field, fmt.Sprintf("is not allowed in mode %q: that mode has no %s pool", c.Mode, role))
		return
	}
	if *val < 1 {
		v.add(field, fmt.Sprintf("must be >= 1 (got %d)", *val))
	}
}

func (c *Config) validateThresholds(v *validator) {
	if c.PrefillScaleUpQueueTokens != nil && *c.PrefillScaleUpQueueTokens < 0 {
		v.add("prefill_scale_up_queue_tokens", fmt.Sprintf("must be >= 0 (got %d)", *c.PrefillScaleUpQueueTokens))
	}
	if c.PrefillScaleDownQueueTokens != nil && *c.PrefillScaleDownQueueTokens < 0 {
		v.add("prefill_scale_down_queue_tokens", fmt.Sprintf("must be >= 0 (got %d)", *c.PrefillScaleDownQueueTokens))
	}
	for _, r := range []struct {
		name string
		val  *float64
	}{{"decode_scale_up_kv_rate", c.DecodeScaleUpKVRate}, {"decode_scale_down_kv_rate", c.DecodeScaleDownKVRate}} {
		if r.val != nil && (!(*r.val >= 0) || *r.val > 100) {
			v.add(r.name, fmt.Sprintf("must be within 0..100 percent (got %v)", *r.val))
		}
	}
	if c.OptimizationTarget != TargetLoad {
		return
	}
	required := func(field string) {
		v.add(field, fmt.Sprintf("is required with optimization_target \"load\" in mode %q", c.Mode))
	}
	if c.HasPrefill() {
		up, down := c.PrefillScaleUpQueueTokens, c.PrefillScaleDownQueueTokens
		if up == nil {
			required("prefill_scale_up_queue_tokens")
		}
		if down == nil {
			required("prefill_scale_down_queue_tokens")
		}
		if up != nil && down != nil && *up <= *down {
			v.add("prefill_scale_up_queue_tokens", fmt.Sprintf("must be greater than prefill_scale_down_queue_tokens (%d <= %d)", *up, *down))
		}
	}
	if c.HasDecode() {
		up, down := c.DecodeScaleUpKVRate, c.DecodeScaleDownKVRate
		if up == nil {
			required("decode_scale_up_kv_rate")
		}
		if down == nil {
			required("decode_scale_down_kv_rate")
		}
		if up != nil && down != nil && *up <= *down {
			v.add("decode_scale_up_kv_rate", fmt.Sprintf("must be greater than decode_scale_down_kv_rate (%v <= %v)", *up, *down))
		}
	}
}

type validator struct{ errs Errors }

func (v *validator) add(field, msg string) {
	v.errs = append(v.errs, &FieldError{Field: field, Msg: msg})
}

func (v *validator) oneOf(field, got string, allowed ...string) {
	for _, a := range allowed {
		if got == a {
			return
		}
	}
	v.add(field, fmt.Sprintf("must be one of %s (got %q)", strings.Join(allowed, ", "), got))
}

func (v *validator) positive(field string, x float64) {
	if !(x > 0) || math.IsInf(x, 0) {
		v.add(field, fmt.Sprintf("must be > 0 (got %v)", x))
	}
}

func (v *validator) nonNegative(field string, x float64) {
	if !(x >= 0) || math.IsInf(x, 0) {
		v.add(field, fmt.Sprintf("must be >= 0 (got %v)", x))
	}
}

// CheckFiles checks the files the configuration names exist where it is loaded (Load and
// Parse call it after Validate): the Prometheus CA bundle.
func (c *Config) CheckFiles() error {
	if c.MetricPullingPrometheusCABundle == nil {
		return nil
	}
	if _, err := os.Stat(*c.MetricPullingPrometheusCABundle); err != nil {
		return Errors{{Field: "metric_pulling_prometheus_ca_bundle", Msg: fmt.Sprintf("must be a readable file: %v", err)}}
	}
	return nil
}

// MaxExpectedStartupSeconds bounds expected_startup_seconds.
const MaxExpectedStartupSeconds = 3600

// validatePolicy checks scaling_policy and its settings.
func (c *Config) validatePolicy(v *validator) {
	if c.ScalingPolicy != "" {
		v.oneOf("scaling_policy", string(c.ScalingPolicy), string(PolicyDynamo), string(PolicyAhead))
	}
	if c.ExpectedStartupSeconds < 0 || c.ExpectedStartupSeconds > MaxExpectedStartupSeconds {
		v.add("expected_startup_seconds", fmt.Sprintf("must be within 1..%d (0: the default, 60) (got %d)", MaxExpectedStartupSeconds, c.ExpectedStartupSeconds))
	}
	if c.ScalingPolicy != PolicyAhead {
		if c.ExpectedStartupSeconds != 0 {
			v.add("expected_startup_seconds", `is only used with scaling_policy "ahead"`)
		}
		return
	}
	if c.OptimizationTarget != TargetSLA {
		v.add("scaling_policy", fmt.Sprintf(`"ahead" sizes pools from the perf model and needs optimization_target "sla" (got %q)`, c.OptimizationTarget))
	}
	if c.LoadAdjustmentIntervalSeconds < 1 {
		v.add("load_adjustment_interval_seconds", `must be >= 1 with scaling_policy "ahead" (it is the policy's interval)`)
	}
}

// Ahead reports whether the configuration runs this planner's own policy.
func (c *Config) Ahead() bool { return c.ScalingPolicy == PolicyAhead }

// StartupPriorSeconds is the startup delay assumed before one is measured.
func (c *Config) StartupPriorSeconds() float64 {
	if c.ExpectedStartupSeconds > 0 {
		return float64(c.ExpectedStartupSeconds)
	}
	return 60
}
