package config

import (
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
)

// Environment variables Dynamo reads for defaults, read here the same way by DefaultFromEnv.
const (
	EnvNamespace               = "DYN_NAMESPACE"
	EnvPrometheusEndpoint      = "PROMETHEUS_ENDPOINT"
	EnvPrometheusToken         = "PROMETHEUS_TOKEN"
	EnvPrometheusTokenFile     = "PROMETHEUS_TOKEN_FILE"
	EnvPrometheusSSLVerify     = "PROMETHEUS_SSL_VERIFY"
	EnvPrometheusExtraParams   = "PROMETHEUS_EXTRA_QUERY_PARAMS"
	EnvPrometheusCABundle      = "PROMETHEUS_CA_BUNDLE"
	EnvPrometheusRequestTimout = "DYN_PLANNER_PROMETHEUS_REQUEST_TIMEOUT_SECONDS"
	EnvPlannerPrometheusPort   = "PLANNER_PROMETHEUS_PORT"
)

// LookupEnv is the shape of os.LookupEnv; tests pass a map-backed one.
type LookupEnv func(key string) (string, bool)

// DefaultFromEnv returns Default with the environment-backed defaults applied, as Dynamo's
// PlannerConfig does (namespace, Prometheus endpoint, token, TLS, extra query parameters,
// timeout, metrics port). A malformed variable is an error naming it; it is never ignored.
func DefaultFromEnv(lookup LookupEnv) (Config, error) {
	c := Default()
	if lookup == nil {
		return c, nil
	}
	get := func(k string) (string, bool) {
		v, ok := lookup(k)
		return v, ok && v != ""
	}
	if v, ok := get(EnvNamespace); ok {
		c.Namespace = v
	}
	if v, ok := get(EnvPrometheusEndpoint); ok {
		c.MetricPullingPrometheusEndpoint = v
	}
	if v, ok := get(EnvPrometheusToken); ok {
		c.MetricPullingPrometheusToken = &v
	}
	if v, ok := get(EnvPrometheusTokenFile); ok {
		c.MetricPullingPrometheusTokenFile = &v
	}
	if v, ok := get(EnvPrometheusSSLVerify); ok {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "1", "true", "yes":
			c.MetricPullingPrometheusSSLVerify = true
		}
	}
	if v, ok := get(EnvPrometheusCABundle); ok {
		c.MetricPullingPrometheusCABundle = &v
	}
	var errs []error
	if v, ok := get(EnvPrometheusExtraParams); ok {
		params, err := ParseExtraQueryParams(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", EnvPrometheusExtraParams, err))
		} else {
			c.MetricPullingPrometheusExtraQueryParams = params
		}
	}
	if v, ok := get(EnvPrometheusRequestTimout); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: not a number: %q", EnvPrometheusRequestTimout, v))
		case !(f > 0) || math.IsInf(f, 0):
			errs = append(errs, fmt.Errorf("%s: must be a positive number of seconds, got %q", EnvPrometheusRequestTimout, v))
		default:
			c.MetricPullingPrometheusRequestTimeoutSeconds = f
		}
	}
	if v, ok := get(EnvPlannerPrometheusPort); ok {
		p, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || p < 0 || p > 65535 {
			errs = append(errs, fmt.Errorf("%s: must be a port number 0..65535, got %q", EnvPlannerPrometheusPort, v))
		} else {
			c.MetricReportingPrometheusPort = p
		}
	}
	if len(errs) > 0 {
		return c, joinErrors(errs)
	}
	return c, nil
}

// ParseExtraQueryParams parses a URL query string ("a=1&b=2") strictly: every pair needs a
// non-empty key and an '=', and a key may appear once.
func ParseExtraQueryParams(s string) (map[string]string, error) {
	out := map[string]string{}
	s = strings.TrimPrefix(strings.TrimSpace(s), "?")
	if s == "" {
		return out, nil
	}
	for _, pair := range strings.Split(s, "&") {
		k, v, found := strings.Cut(pair, "=")
		if !found || k == "" {
			return nil, fmt.Errorf("malformed query parameter %q: want key=value", pair)
		}
		key, err := url.QueryUnescape(k)
		if err != nil {
			return nil, fmt.Errorf("malformed query parameter key %q: %w", k, err)
		}
		val, err := url.QueryUnescape(v)
		if err != nil {
			return nil, fmt.Errorf("malformed query parameter value %q: %w", v, err)
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("query parameter %q given twice", key)
		}
		out[key] = val
	}
	return out, nil
}

// IsEasyMode reports whether the target is one of the threshold targets (not sla).
func (c *Config) IsEasyMode() bool { return c.OptimizationTarget != TargetSLA }

// Resolve applies the derived settings Dynamo's config validators apply before validation:
// the easy-mode override (a threshold target turns load scaling on and throughput scaling
// off) and the default scale interval (the gcd of the builtin intervals). It is idempotent.
func (c *Config) Resolve() {
	if c.OptimizationTarget != "" && c.IsEasyMode() {
		c.EnableLoadScaling = true
		c.EnableThroughputScaling = false
	}
	if c.Scheduling.ScaleIntervalSeconds == nil {
		v := c.defaultScaleInterval()
		c.Scheduling.ScaleIntervalSeconds = &v
	}
}

// defaultScaleInterval is gcd(round(load*1000), round(throughput*1000))/1000 where the
// throughput interval participates only when throughput scaling is on and the target is sla.
func (c *Config) defaultScaleInterval() float64 {
	ms := func(s int) int64 { return int64(math.RoundToEven(float64(s) * 1000)) }
	g := ms(c.LoadAdjustmentIntervalSeconds)
	if c.EnableThroughputScaling && c.OptimizationTarget == TargetSLA {
		g = gcd(g, ms(c.ThroughputAdjustmentIntervalSeconds))
	}
	return float64(g) / 1000
}

func gcd(a, b int64) int64 {
	if a < 0 {
		a = -a
	}
	if b < 0 {
		b = -b
	}
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// ScaleInterval is the pipeline period in seconds: scheduling.scale_interval_seconds, or its
// gcd default when unset.
func (c *Config) ScaleInterval() float64 {
	if c.Scheduling.ScaleIntervalSeconds != nil {
		return *c.Scheduling.ScaleIntervalSeconds
	}
	return c.defaultScaleInterval()
}

// HasPrefill reports whether the mode has a prefill pool.
func (c *Config) HasPrefill() bool { return c.Mode == ModeDisagg || c.Mode == ModePrefill }

// HasDecode reports whether the mode has a decode pool (agg's single pool counts as decode,
// as in Dynamo).
func (c *Config) HasDecode() bool { return c.Mode != ModePrefill }

// PrefillMinEndpoints is Dynamo's resolve_min_endpoint("prefill").
func (c *Config) PrefillMinEndpoints() int {
	if c.PrefillMinEndpoint != nil {
		return *c.PrefillMinEndpoint
	}
	return c.MinEndpoint
}

// DecodeMinEndpoints is Dynamo's resolve_min_endpoint("decode").
func (c *Config) DecodeMinEndpoints() int {
	if c.DecodeMinEndpoint != nil {
		return *c.DecodeMinEndpoint
	}
	return c.MinEndpoint
}

// PrefillGPUs is the configured GPUs per prefill replica (1 when unset).
func (c *Config) PrefillGPUs() int {
	if c.PrefillEngineNumGPU != nil {
		return *c.PrefillEngineNumGPU
	}
	return 1
}

// DecodeGPUs is the configured GPUs per decode or aggregated replica (1 when unset).
func (c *Config) DecodeGPUs() int {
	if c.DecodeEngineNumGPU != nil {
		return *c.DecodeEngineNumGPU
	}
	return 1
}

// MinimumGPUs is the GPUs the minimum endpoints need at the configured GPUs per replica
// (saturating, never overflowing).
func (c *Config) MinimumGPUs() int64 {
	need := 0.0
	if c.HasPrefill() {
		need += float64(max(0, c.PrefillMinEndpoints())) * float64(max(0, c.PrefillGPUs()))
	}
	if c.HasDecode() {
		need += float64(max(0, c.DecodeMinEndpoints())) * float64(max(0, c.DecodeGPUs()))
	}
	if need >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(need)
}

// CheckFootprint reports a configuration whose minimum endpoints need more GPUs than
// max_gpu_budget allows (at the configured GPUs per replica): the planner could never satisfy
// both, and a running planner's set_limits refuses the same combination. It is not part of
// Validate, which also runs inside the workflow on configurations started before the check
// existed; planner validate, planner start and the worker's deployments file apply it.
func (c *Config) CheckFootprint() error {
	if c.MaxGPUBudget < 0 {
		return nil
	}
	if need := c.MinimumGPUs(); need > int64(c.MaxGPUBudget) {
		var pools []string
		if c.HasPrefill() {
			pools = append(pools, fmt.Sprintf("prefill %d × %d GPUs", c.PrefillMinEndpoints(), c.PrefillGPUs()))
		}
		if c.HasDecode() {
			pools = append(pools, fmt.Sprintf("decode %d × %d GPUs", c.DecodeMinEndpoints(), c.DecodeGPUs()))
		}
		return fmt.Errorf("the minimum endpoints (%s) need %d GPUs, over max_gpu_budget %d", strings.Join(pools, ", "), need, c.MaxGPUBudget)
	}
	return nil
}

// Warnings lists settings that are legal but probably not what the operator meant: SLA
// targets set under a threshold target (where they are unused), and Dynamo settings this
// planner accepts for compatibility but does not act on, when they differ from the default.
func (c *Config) Warnings() []string {
	ws := c.warnings(func(string) bool { return false })
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.text
	}
	return out
}

// warning is one of Warnings, with the keys it is about (for the loader's line numbers).
type warning struct {
	keys []string
	text string
}

// warnings is Warnings; given(key) reports whether the source set key (the loader knows):
// a setting of Dynamo's own servers or report given explicitly is warned about even at
// Dynamo's default, unless it turns the server or report off.
func (c *Config) warnings(given func(key string) bool) []warning {
	var w []warning
	if c.IsEasyMode() && (c.TTFTMs != DefaultTTFTMs || c.ITLMs != DefaultITLMs) {
		w = append(w, warning{[]string{"ttft_ms", "itl_ms"}, fmt.Sprintf("ttft_ms/itl_ms are set but optimization_target %q does not use them (only sla does)", c.OptimizationTarget)})
	}
	d := Default()
	ignored := func(field, why string, keys ...string) {
		if len(keys) == 0 {
			keys = []string{field}
		}
		w = append(w, warning{keys, fmt.Sprintf("%s is accepted for compatibility with Dynamo and ignored: %s", field, why)})
	}
	if c.LogDir != nil {
		ignored("log_dir", "logs are structured records on stderr")
	}
	if (c.ControlAPIPort != d.ControlAPIPort || given("control_api_port")) && c.ControlAPIPort != 0 {
		ignored("control_api_port", "overrides go through Temporal updates and signals (docs/runbook.md)")
	}
	if c.MetricReportingPrometheusPort != 0 {
		ignored("metric_reporting_prometheus_port", "the worker serves /metrics on its --metrics-address flag")
	}
	if (c.LiveDashboardPort != d.LiveDashboardPort || given("live_dashboard_port")) && c.LiveDashboardPort != 0 {
		ignored("live_dashboard_port", "the Temporal Web UI shows each planner, and 'planner report' writes its HTML report on demand")
	}
	reportGiven := given("report_interval_hours") || given("report_output_dir") || given("report_filename") || given("report_write_gzip_log")
	if c.ReportIntervalHours != nil && (reportGiven || c.ReportFilename != nil || c.ReportOutputDir != d.ReportOutputDir ||
		!c.ReportWriteGzipLog || *c.ReportIntervalHours != *d.ReportIntervalHours) {
		ignored("report_*", "no periodic report is written; 'planner report --deployment NS/NAME' writes a running planner's HTML report on demand",
			"report_interval_hours", "report_output_dir", "report_filename", "report_write_gzip_log")
	}
	if c.LoadMetricSamples != nil {
		ignored("load_metric_samples", "it belongs to Dynamo's older load planner; FPM retention is max_num_fpm_samples")
	}
	if len(c.PluginRegistration) > 0 {
		ignored("plugin_registration", "external plugins are not supported")
	}
	return w
}
