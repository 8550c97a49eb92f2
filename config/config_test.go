package config

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func envMap(m map[string]string) LookupEnv {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestDefaultsMatchDynamo(t *testing.T) {
	c := Default()
	require.Equal(t, "rapid", c.PreDeploymentSweepingMode)
	require.Equal(t, EnvKubernetes, c.Environment)
	require.Equal(t, "dynamo", c.Namespace)
	require.Equal(t, BackendVLLM, c.Backend)
	require.Equal(t, ModeDisagg, c.Mode)
	require.Equal(t, TargetThroughput, c.OptimizationTarget)
	require.Equal(t, 180, c.ThroughputAdjustmentIntervalSeconds)
	require.Equal(t, 8, c.MaxThroughputScalingReplicas)
	require.Equal(t, 8, c.MaxGPUBudget)
	require.Equal(t, -1, c.MinGPUBudget)
	require.Equal(t, 1, c.MinEndpoint)
	require.Equal(t, 9086, c.ControlAPIPort)
	require.Equal(t, "profiling_results", c.ProfileResultsDir)
	require.Equal(t, 500.0, c.TTFTMs)
	require.Equal(t, 50.0, c.ITLMs)
	require.Equal(t, "arima", c.LoadPredictor)
	require.Equal(t, 50, c.ProphetWindowSize)
	require.Equal(t, []float64{1.0, 0.1, 10.0}, []float64{c.KalmanQLevel, c.KalmanQTrend, c.KalmanR})
	require.Equal(t, 5, c.KalmanMinPoints)
	require.Equal(t, DefaultPrometheusEndpoint, c.MetricPullingPrometheusEndpoint)
	require.False(t, c.MetricPullingPrometheusSSLVerify)
	require.Equal(t, 10.0, c.MetricPullingPrometheusRequestTimeoutSeconds)
	require.Equal(t, "frontend", c.ThroughputMetricsSource)
	require.True(t, c.EnableThroughputScaling)
	require.False(t, c.EnableLoadScaling)
	require.Equal(t, 5, c.LoadAdjustmentIntervalSeconds)
	require.Equal(t, 64, c.MaxNumFPMSamples)
	require.Equal(t, 16, c.FPMSampleBucketSize)
	require.Equal(t, 80, c.LoadScalingDownSensitivity)
	require.Equal(t, 5, c.LoadMinObservations)
	require.Equal(t, 24.0, *c.ReportIntervalHours)
	require.Equal(t, 30.0, c.Scheduling.TickMaxDurationSeconds)
	require.Nil(t, c.Scheduling.ScaleIntervalSeconds)
	require.Equal(t, SizingCapacitySearch, c.ThroughputSizing)
	require.Equal(t, 1, c.PrefillGPUs())
	require.Equal(t, 1, c.DecodeGPUs())

	// The defaults are a valid configuration once resolved: target throughput is easy mode.
	c.Resolve()
	require.NoError(t, c.Validate())
	require.True(t, c.EnableLoadScaling)
	require.False(t, c.EnableThroughputScaling)
	require.Equal(t, 5.0, *c.Scheduling.ScaleIntervalSeconds)
}

func TestGoodFixtures(t *testing.T) {
	t.Run("dynamo disagg sla with aliases", func(t *testing.T) {
		c, _, err := LoadFile("testdata/good/dynamo_disagg_sla.yaml", nil)
		require.NoError(t, err)
		require.Equal(t, TargetSLA, c.OptimizationTarget)
		require.Equal(t, 200.0, c.TTFTMs)
		require.Equal(t, 10.0, c.ITLMs)
		require.Equal(t, 60, c.ThroughputAdjustmentIntervalSeconds)
		require.Equal(t, 5, c.LoadAdjustmentIntervalSeconds)
		require.True(t, c.EnableThroughputScaling)
		require.True(t, c.EnableLoadScaling)
		require.Equal(t, 2, c.PrefillMinEndpoints())
		require.Equal(t, 1, c.DecodeMinEndpoints())
		require.Equal(t, 2, c.DecodeGPUs())
		require.Equal(t, "kalman", c.LoadPredictor)
		require.Equal(t, "nvidia/Llama-3.1-8B-Instruct-FP8", *c.ModelName)
		require.Equal(t, 5.0, c.ScaleInterval(), "gcd(5 s, 60 s)")
		require.Equal(t, DefaultGatewayListen, c.Scheduling.Gateway.Listen, "nested defaults survive a partial section")
		require.Empty(t, c.Warnings())
	})
	t.Run("dynamo agg latency, tab-indented JSON, no_operation", func(t *testing.T) {
		c, _, err := LoadFile("testdata/good/dynamo_agg_latency.json", nil)
		require.NoError(t, err)
		require.Equal(t, ModeAgg, c.Mode)
		require.Equal(t, TargetLatency, c.OptimizationTarget)
		require.True(t, c.Advisory, "no_operation is the older name of advisory")
		require.True(t, c.EnableLoadScaling)
		require.False(t, c.EnableThroughputScaling, "easy mode turns throughput scaling off")
		require.Equal(t, 2.5, c.ScaleInterval())
		require.Equal(t, -1, c.MaxGPUBudget)
		require.Equal(t, []string{"load_metric_samples is accepted for compatibility with Dynamo and ignored: it belongs to Dynamo's older load planner; FPM retention is max_num_fpm_samples"}, c.Warnings())
	})
	t.Run("load target with the older planner's rules", func(t *testing.T) {
		c, _, err := LoadFile("testdata/good/load_target.yaml", nil)
		require.NoError(t, err)
		require.Equal(t, 8192, *c.PrefillScaleUpQueueTokens)
		require.Equal(t, 40.5, *c.DecodeScaleDownKVRate)
		require.Equal(t, 3, c.DecodeScaleDownHoldIntervals)
		require.Equal(t, 3, c.PrefillScaleUpTrendIntervals)
		require.Equal(t, 300, c.ScaleDownStabilizationSeconds)
		require.Equal(t, EnvLocal, c.Environment)
	})
	t.Run("interpolation sizing, integral float interval", func(t *testing.T) {
		c, _, err := LoadFile("testdata/good/interpolation_sizing.yaml", nil)
		require.NoError(t, err)
		require.Equal(t, SizingInterpolation, c.ThroughputSizing)
		require.True(t, c.NoCorrection)
		require.Equal(t, 180, c.ThroughputAdjustmentIntervalSeconds)
		require.Equal(t, 128, c.LoadPredictorHistorySize)
		require.Equal(t, map[string]string{"dedup": "true"}, c.MetricPullingPrometheusExtraQueryParams)
		require.False(t, c.EnableLoadScaling)
		require.Equal(t, 5.0, c.ScaleInterval(), "gcd(5 s load interval, 180 s)")
	})
	t.Run("empty file is all defaults", func(t *testing.T) {
		c, _, err := LoadFile("testdata/good/empty.yaml", nil)
		require.NoError(t, err)
		want := Default()
		want.Resolve()
		require.Equal(t, want, c)
	})
}

// badFixtures pairs every bad fixture with the exact error it must produce.
var badFixtures = map[string]string{
	"aic.yaml":               `line 2: aic_perf_model: is not supported: it needs Dynamo's Python-only AI Configurator wheel; this planner fits its forward-pass model from FPMs (bootstrapped from profile_results_dir)`,
	"alias_twice.yaml":       `line 1: ttft_ms: given twice, as "ttft_ms" (line 2) and as its alias "ttft"`,
	"bucket_not_square.yaml": `line 1: fpm_sample_bucket_size: must be a perfect square >= 1 (got 12)`,
	"global_planner.yaml": `line 1: environment: "global-planner" is not supported by this planner (use kubernetes, virtual, local or noop)
global_planner_namespace: is required when environment is "global-planner"`,
	"load_not_shorter.yaml":     `line 4: load_adjustment_interval_seconds: must be shorter than throughput_adjustment_interval_seconds when both loops are enabled (60 >= 60)`,
	"load_target_inverted.yaml": `line 3: decode_scale_up_kv_rate: must be greater than decode_scale_down_kv_rate (40 <= 60)`,
	"load_target_missing.yaml": `prefill_scale_down_queue_tokens: is required with optimization_target "load" in mode "disagg"
decode_scale_up_kv_rate: is required with optimization_target "load" in mode "disagg"
decode_scale_down_kv_rate: is required with optimization_target "load" in mode "disagg"`,
	"many.yaml": `line 2: mode: must be one of disagg, prefill, decode, agg (got "hybrid")
line 4: min_endpoint: must be >= 0 (got -1)
line 6: min_gpu_budget: must not exceed max_gpu_budget (6 > 4)
line 7: load_scaling_down_sensitivity: must be within 0..100 (got 120)
line 8: control_api_port: must be a port number 0..65535 (got 70000)
line 11: scheduling.gateway.enabled: is not supported: this planner has no plugin registration gateway
line 12: scheduling.external_plugins: is not supported: this planner has no gRPC plugin pipeline`,
	"not_a_mapping.yaml": `line 1: want a mapping of planner settings at the top level, got a list`,
	"null_required.yaml": `line 1: mode: must not be null
line 2: ttft_ms: must not be null`,
	"power.yaml": `line 1: enable_power_awareness: is not supported by this planner yet (GPU power budgets need per-GPU power limits from the Kubernetes deployment)
line 1: enable_power_awareness: requires environment "kubernetes"
total_gpu_power_limit: is required when enable_power_awareness is true`,
	"role_minimum_agg.yaml": `line 2: prefill_min_endpoint: is not allowed in mode "agg": use min_endpoint
line 3: decode_min_endpoint: is not allowed in mode "agg": use min_endpoint`,
	"role_minimum_inactive.yaml": `line 2: decode_min_endpoint: is not allowed in mode "prefill": that mode has no decode pool`,
	"scale_interval.yaml": `line 4: scheduling.scale_interval_seconds: must divide load_adjustment_interval_seconds (7 does not divide 5)
line 4: scheduling.scale_interval_seconds: must divide throughput_adjustment_interval_seconds (7 does not divide 180)`,
	"sla_nonpositive.yaml": `line 2: ttft_ms: must be > 0 (got 0)
line 3: itl_ms: must be > 0 (got -5)`,
	"sweeping_none.yaml":        `line 2: pre_deployment_sweeping_mode: cannot be "none" when throughput scaling is enabled: throughput sizing needs a pre-deployment profile`,
	"stabilization_window.yaml": `line 2: scale_down_stabilization_seconds: must be within 0..3600 (got 7200)`,
	"warmup_model_alone.yaml":   `line 2: load_predictor_warmup_trace_model: selects the rows of load_predictor_warmup_trace, which is not set`,
	"warmup_model_blank.yaml":   `line 3: load_predictor_warmup_trace_model: must be a model name, not blank, of at most 256 bytes once trimmed (got 0 bytes)`,
	"syntax.yaml":               `not valid YAML or JSON: line 2: mapping values are not allowed in this context`,
	"unknown_key.yaml": `line 2: unknown key "ttft_msec" (did you mean "ttft_ms"?)
line 3: unknown key "max_gpu_budgte" (did you mean "max_gpu_budget"?)`,
	"legacy_refused.yaml": `line 2: min-gpu-budget: Dynamo's older load planner's minimum GPUs per worker type has no equivalent here (min_gpu_budget is a floor on the deployment's total GPUs): set min_endpoint, prefill_min_endpoint or decode_min_endpoint (replicas), or min_gpu_budget
line 3: prefill-queue-scale-up-threshold: Dynamo's older load planner compared the requests waiting in its shared prefill queue; this planner's threshold is queued prefill tokens per engine, which has no conversion from it: set prefill_scale_up_queue_tokens with optimization_target "load" instead
line 4: prefill_queue_scale_down_threshold: Dynamo's older load planner compared the requests waiting in its shared prefill queue; this planner's threshold is queued prefill tokens per engine, which has no conversion from it: set prefill_scale_down_queue_tokens with optimization_target "load" instead
line 5: decode-kv-scale-up-threshold: want a KV-cache utilisation fraction within 0..1 (Dynamo's older load planner), got 90
line 6: load-prediction-window-size: Dynamo's early planner predicted from this many recent samples; this planner has no equivalent (prophet_window_size is the prophet predictor's window, load_predictor_history_size caps every predictor's history): set one of those instead
line 7: unknown key "max-gpu-budgte" (did you mean "max_gpu_budget"?)`,
	"spelled_twice.yaml": `line 2: max_gpu_budget: given twice, as "max_gpu_budget" (line 1) and as its hyphenated spelling "max-gpu-budget"
line 4: throughput_adjustment_interval_seconds: given twice, as "adjustment-interval" (line 3) and as its alias "throughput_adjustment_interval"
line 5: decode_scale_up_kv_rate: given twice, as "decode_scale_up_kv_rate" (line 6) and as Dynamo's older option "decode-kv-scale-up-threshold"`,
	"wrong_types.json": `line 2: ttft_ms: want a number, got string "fast"
line 3: enable_load_scaling: want true or false, got string "yes"
line 4: min_endpoint: want an integer, got 1.5
line 5: namespace: want a string, got integer "42"`,
}

func TestBadFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*")
	require.NoError(t, err)
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	var want []string
	for n := range badFixtures {
		want = append(want, n)
	}
	sort.Strings(want)
	require.Equal(t, want, names, "every bad fixture has an expected error and vice versa")

	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("testdata/bad", name)
			_, _, err := LoadFile(path, nil)
			require.Error(t, err)
			require.Equal(t, "planner config "+path+":\n"+badFixtures[name], err.Error())
			var fe *FieldError
			require.True(t, errors.As(err, &fe), "each problem is a *FieldError")
		})
	}
}

func TestScaleIntervalGCD(t *testing.T) {
	tests := []struct {
		name       string
		load, thr  int
		target     Target
		throughput bool
		want       float64
	}{
		{"defaults, sla", 5, 180, TargetSLA, true, 5},
		{"defaults, easy target: load interval only", 5, 180, TargetThroughput, true, 5},
		{"coprime intervals", 3, 7, TargetSLA, true, 1},
		{"common factor", 4, 6, TargetSLA, true, 2},
		{"throughput off: load interval only", 4, 6, TargetSLA, false, 4},
		{"long intervals", 30, 600, TargetSLA, true, 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			c.LoadAdjustmentIntervalSeconds, c.ThroughputAdjustmentIntervalSeconds = tt.load, tt.thr
			c.OptimizationTarget, c.EnableThroughputScaling = tt.target, tt.throughput
			c.Resolve()
			require.Equal(t, tt.want, *c.Scheduling.ScaleIntervalSeconds)
		})
	}
}

func TestEasyModeOverride(t *testing.T) {
	for _, target := range []Target{TargetThroughput, TargetLatency, TargetLoad} {
		c := Default()
		c.OptimizationTarget = target
		c.EnableLoadScaling, c.EnableThroughputScaling = false, true
		c.Resolve()
		require.True(t, c.EnableLoadScaling, target)
		require.False(t, c.EnableThroughputScaling, target)
	}
	c := Default()
	c.OptimizationTarget = TargetSLA
	c.Resolve()
	require.True(t, c.EnableThroughputScaling)
	require.False(t, c.EnableLoadScaling)

	// Easy mode with SLA targets set warns that they are unused.
	c = Default()
	c.TTFTMs = 200
	require.Equal(t, []string{`ttft_ms/itl_ms are set but optimization_target "throughput" does not use them (only sla does)`}, c.Warnings())
}

func TestEnvironmentDefaults(t *testing.T) {
	c, err := DefaultFromEnv(envMap(map[string]string{
		EnvNamespace:               "prod-llama",
		EnvPrometheusEndpoint:      "http://prom:9090",
		EnvPrometheusToken:         "secret",
		EnvPrometheusSSLVerify:     "Yes",
		EnvPrometheusExtraParams:   "dedup=true&partial_response=false",
		EnvPrometheusRequestTimout: "2.5",
		EnvPlannerPrometheusPort:   "9100",
	}))
	require.NoError(t, err)
	require.Equal(t, "prod-llama", c.Namespace)
	require.Equal(t, "http://prom:9090", c.MetricPullingPrometheusEndpoint)
	require.Equal(t, "secret", *c.MetricPullingPrometheusToken)
	require.True(t, c.MetricPullingPrometheusSSLVerify)
	require.Equal(t, map[string]string{"dedup": "true", "partial_response": "false"}, c.MetricPullingPrometheusExtraQueryParams)
	require.Equal(t, 2.5, c.MetricPullingPrometheusRequestTimeoutSeconds)
	require.Equal(t, 9100, c.MetricReportingPrometheusPort)

	_, err = DefaultFromEnv(envMap(map[string]string{
		EnvPrometheusExtraParams:   "dedup",
		EnvPrometheusRequestTimout: "-1",
		EnvPlannerPrometheusPort:   "http",
	}))
	require.EqualError(t, err, `PROMETHEUS_EXTRA_QUERY_PARAMS: malformed query parameter "dedup": want key=value
DYN_PLANNER_PROMETHEUS_REQUEST_TIMEOUT_SECONDS: must be a positive number of seconds, got "-1"
PLANNER_PROMETHEUS_PORT: must be a port number 0..65535, got "http"`)

	// A file value wins over the environment default.
	c, _, err = Parse([]byte("namespace: from-file\n"), "inline", envMap(map[string]string{EnvNamespace: "from-env"}))
	require.NoError(t, err)
	require.Equal(t, "from-file", c.Namespace)
}

func TestParseExtraQueryParams(t *testing.T) {
	tests := []struct {
		in      string
		want    map[string]string
		wantErr string
	}{
		{"", map[string]string{}, ""},
		{"?a=1&b=x%20y", map[string]string{"a": "1", "b": "x y"}, ""},
		{"a=", map[string]string{"a": ""}, ""},
		{"a=1&a=2", nil, `query parameter "a" given twice`},
		{"=1", nil, `malformed query parameter "=1": want key=value`},
		{"a=%zz", nil, `malformed query parameter value "%zz": invalid URL escape "%zz"`},
	}
	for _, tt := range tests {
		got, err := ParseExtraQueryParams(tt.in)
		if tt.wantErr != "" {
			require.EqualError(t, err, tt.wantErr, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		require.Equal(t, tt.want, got, tt.in)
	}
}

func TestLoadInlineJSONAndPaths(t *testing.T) {
	c, _, err := Load(`{"optimization_target": "sla", "ttft": 150, "itl": 12}`, nil)
	require.NoError(t, err)
	require.Equal(t, 150.0, c.TTFTMs)
	require.Equal(t, 12.0, c.ITLMs)

	_, _, err = Load(`{"optimization_target": "sla", "ttft": }`, nil)
	require.EqualError(t, err, "planner config inline JSON:\nline 1: not valid JSON: invalid character '}' looking for beginning of value")

	_, _, err = Load("testdata/does-not-exist.yaml", nil)
	require.ErrorContains(t, err, "no such file or directory")

	_, _, err = LoadFile("testdata", nil)
	require.EqualError(t, err, "planner config testdata: is a directory, want a .yaml, .yml or .json file")

	// A file with an unusual suffix is read as JSON or YAML, like Dynamo does.
	dir := t.TempDir()
	p := filepath.Join(dir, "planner.conf")
	require.NoError(t, os.WriteFile(p, []byte("optimization_target: sla\nttft_ms: 99\n"), 0o600))
	c, _, err = LoadFile(p, nil)
	require.NoError(t, err)
	require.Equal(t, 99.0, c.TTFTMs)

	big := filepath.Join(dir, "big.yaml")
	require.NoError(t, os.WriteFile(big, []byte(strings.Repeat("#", MaxFileBytes+1)), 0o600))
	_, _, err = LoadFile(big, nil)
	require.ErrorContains(t, err, "larger than the 1048576-byte limit")
}

func TestValidateReportsEveryProblemOfAZeroConfig(t *testing.T) {
	var c Config
	err := c.Validate()
	require.Error(t, err)
	var es Errors
	require.True(t, errors.As(err, &es))
	fields := map[string]bool{}
	for _, e := range es {
		fields[e.Field] = true
	}
	for _, f := range []string{"environment", "mode", "optimization_target", "namespace", "ttft_ms", "itl_ms",
		"fpm_sample_bucket_size", "max_throughput_scaling_replicas", "enable_throughput_scaling",
		"load_adjustment_interval_seconds", "scheduling.tick_max_duration_seconds"} {
		require.True(t, fields[f], "missing a problem for %s in:\n%v", f, err)
	}
}

func TestCABundleMustExist(t *testing.T) {
	missing := "/nonexistent/ca.pem"
	c := Default()
	c.MetricPullingPrometheusCABundle = &missing
	c.Resolve()
	require.NoError(t, c.Validate(), "Validate reads no file")
	require.ErrorContains(t, c.CheckFiles(), "metric_pulling_prometheus_ca_bundle: must be a readable file")
	_, _, err := Parse([]byte(`{"metric_pulling_prometheus_ca_bundle": "/nonexistent/ca.pem"}`), "inline", nil)
	require.ErrorContains(t, err, "line 1: metric_pulling_prometheus_ca_bundle: must be a readable file")
}

func TestConfigJSONRoundTrip(t *testing.T) {
	for _, f := range []string{"dynamo_disagg_sla.yaml", "dynamo_agg_latency.json", "load_target.yaml", "interpolation_sizing.yaml"} {
		c, _, err := LoadFile(filepath.Join("testdata/good", f), nil)
		require.NoError(t, err)
		data, err := json.Marshal(c)
		require.NoError(t, err)
		back, _, err := Parse(data, f+" as JSON", nil)
		require.NoError(t, err, f)
		require.Equal(t, c, back, f)
	}
}

// FuzzLoad feeds arbitrary bytes to the loader: it must never panic, and whatever it accepts
// must be valid and survive a JSON round trip unchanged.
func FuzzLoad(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/*")
	for _, p := range files {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"ttft": 1e308, "itl": 1e-308, "scheduling": {"scale_interval_seconds": 1e-9}}`))
	f.Add([]byte("mode: &a disagg\nbackend: *a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, _, err := Parse(data, "fuzz", nil)
		if err != nil {
			require.NotEmpty(t, err.Error())
			return
		}
		require.NoError(t, c.Validate())
		out, err := json.Marshal(c)
		if err != nil {
			return // opaque sections (plugin_registration) may hold values JSON cannot encode
		}
		back, _, err := Parse(out, "fuzz round trip", nil)
		require.NoError(t, err)
		require.Equal(t, c, back)
	})
}

func TestCheckFootprint(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		err    string
		need   int64
	}{
		{"fits", func(c *Config) { c.MinEndpoint, c.MaxGPUBudget = 2, 8 }, "", 4},
		{"too big", func(c *Config) { c.MinEndpoint, c.MaxGPUBudget = 5, 8 }, "need 10 GPUs, over max_gpu_budget 8", 10},
		{"GPUs per replica", func(c *Config) { c.MinEndpoint, c.MaxGPUBudget, c.DecodeEngineNumGPU = 2, 8, ptrTo(4) }, "need 10 GPUs", 10},
		{"no ceiling", func(c *Config) { c.MinEndpoint, c.MaxGPUBudget = 50, -1 }, "", 100},
		{"one pool", func(c *Config) { c.Mode, c.MinEndpoint, c.MaxGPUBudget = ModeDecode, 8, 8 }, "", 8},
		{"no overflow", func(c *Config) { c.MinEndpoint, c.MaxGPUBudget, c.DecodeEngineNumGPU = 1<<62, 8, ptrTo(1<<62) }, "over max_gpu_budget", math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			tc.mutate(&c)
			require.Equal(t, tc.need, c.MinimumGPUs())
			err := c.CheckFootprint()
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.err)
		})
	}
}

func ptrTo[T any](v T) *T { return &v }
