package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDynamoGenerationsLoad loads a config of each generation of Dynamo's planner, written
// from the reference's examples, and checks what each key became and what is warned about.
func TestDynamoGenerationsLoad(t *testing.T) {
	t.Run("G1 classic planner flags, hyphenated", func(t *testing.T) {
		c, warns, err := LoadFile("testdata/good/dynamo_g1_flags.yaml", nil)
		require.NoError(t, err)
		require.Equal(t, "llama-prod", c.Namespace)
		require.True(t, c.Advisory, "no-operation")
		require.Equal(t, "/var/log/planner", *c.LogDir)
		require.Equal(t, 60, c.ThroughputAdjustmentIntervalSeconds, "adjustment-interval is the classic planner's (throughput) interval")
		require.Equal(t, 16, c.MaxGPUBudget)
		require.Equal(t, 2, c.DecodeGPUs())
		require.Equal(t, 1, c.PrefillGPUs())
		require.Equal(t, "/data/profiling_results", c.ProfileResultsDir)
		require.Equal(t, 200.0, c.TTFTMs)
		require.Equal(t, 50.0, c.ITLMs)
		require.Equal(t, "http://prometheus.monitoring:9090", c.MetricPullingPrometheusEndpoint)
		require.Equal(t, "meta-llama/Llama-3.1-8B-Instruct", *c.ModelName)
		require.Equal(t, []string{
			`line 17: ttft_ms/itl_ms are set but optimization_target "throughput" does not use them (only sla does)`,
			`line 10: log_dir is accepted for compatibility with Dynamo and ignored: logs are structured records on stderr`,
			`line 27: metric_reporting_prometheus_port is accepted for compatibility with Dynamo and ignored: the worker serves /metrics on its --metrics-address flag`,
		}, warns)
	})
	t.Run("G2 state-machine planner flags", func(t *testing.T) {
		c, warns, err := LoadFile("testdata/good/dynamo_g2_flags.yaml", nil)
		require.NoError(t, err)
		require.Equal(t, EnvVirtual, c.Environment)
		require.Equal(t, 120, c.ThroughputAdjustmentIntervalSeconds)
		require.Equal(t, 10, c.LoadAdjustmentIntervalSeconds)
		require.Equal(t, 70, c.LoadScalingDownSensitivity)
		require.Equal(t, 8, c.LoadMinObservations)
		require.Equal(t, 128, c.MaxNumFPMSamples)
		require.Equal(t, 25, c.FPMSampleBucketSize)
		require.Equal(t, "router", c.ThroughputMetricsSource)
		require.Len(t, warns, 2)
		require.Contains(t, warns[1], "line 12: load_metric_samples is accepted for compatibility with Dynamo and ignored")
	})
	t.Run("G3 PlannerConfig with the settings done another way", func(t *testing.T) {
		c, warns, err := LoadFile("testdata/good/dynamo_g3_cosmetic.yaml", nil)
		require.NoError(t, err)
		require.Equal(t, TargetSLA, c.OptimizationTarget)
		require.Equal(t, 90, c.ThroughputAdjustmentIntervalSeconds)
		require.Equal(t, 20.0, c.Scheduling.TickMaxDurationSeconds)
		var keys []string
		for _, w := range warns {
			keys = append(keys, strings.SplitN(w, " ", 4)[2])
		}
		require.Equal(t, []string{"log_dir", "control_api_port", "metric_reporting_prometheus_port", "live_dashboard_port", "report_*"}, keys)
		require.Contains(t, warns[4], "line 16: ", "the first report key's line")
		require.Contains(t, warns[4], "planner report --deployment NS/NAME")
	})
	t.Run("G3 PlannerConfig with aliases: only its explicit report period is not acted on", func(t *testing.T) {
		_, warns, err := LoadFile("testdata/good/dynamo_disagg_sla.yaml", nil)
		require.NoError(t, err)
		require.Equal(t, []string{"line 34: report_* is accepted for compatibility with Dynamo and ignored: no periodic report is written; 'planner report --deployment NS/NAME' writes a running planner's HTML report on demand"}, warns,
			"report_interval_hours: 24 asks for Dynamo's daily report; live_dashboard_port: 0 turns the dashboard off, as here")
	})
	t.Run("the older load planner's options", func(t *testing.T) {
		c, warns, err := LoadFile("testdata/good/dynamo_load_planner.yaml", nil)
		require.NoError(t, err)
		require.False(t, c.Advisory)
		require.Equal(t, 30, c.ThroughputAdjustmentIntervalSeconds)
		require.Equal(t, 8, c.MaxGPUBudget)
		require.Equal(t, 90.0, *c.DecodeScaleUpKVRate)
		require.Equal(t, 50.0, *c.DecodeScaleDownKVRate)
		require.Equal(t, []string{
			`line 11: metric-pulling-interval: ignored: Dynamo's older load planner sampled its metrics this often within an adjustment interval; this planner reads each interval's traffic from Prometheus and the engines' Forward Pass Metrics as they arrive, so the option is ignored`,
			`line 13: decode-kv-scale-up-threshold: Dynamo's older load planner's KV-cache utilisation fraction 0.9 is read as decode_scale_up_kv_rate 90 (percent); it is used only with optimization_target "load", where any decode engine at or over it scales up (the older load planner compared the mean over all engines and the adjustment interval)`,
			`line 14: decode-kv-scale-down-threshold: Dynamo's older load planner's KV-cache utilisation fraction 0.5 is read as decode_scale_down_kv_rate 50 (percent); it is used only with optimization_target "load", where all decode engines at or under it scale down (the older load planner compared the mean over all engines and the adjustment interval)`,
			`line 9: log_dir is accepted for compatibility with Dynamo and ignored: logs are structured records on stderr`,
		}, warns)
	})
}

// TestOlderOptionsBothSpellings: each of the seeds' older options, written with hyphens as
// the argparse flag or with underscores as argparse stores it, is read as its current key,
// or refused or ignored with a message saying why.
func TestOlderOptionsBothSpellings(t *testing.T) {
	tests := []struct {
		option string
		value  string
		check  func(t *testing.T, c Config)
		warn   string // substring of the only warning ("" none)
		err    string // substring of the error ("" none)
		// underscoreIsCurrent: the underscore spelling is a current key (with its own meaning).
		underscoreIsCurrent bool
	}{
		{option: "adjustment-interval", value: "45", check: func(t *testing.T, c Config) { require.Equal(t, 45, c.ThroughputAdjustmentIntervalSeconds) }},
		{option: "metric-pulling-interval", value: "1", warn: "ignored: Dynamo's older load planner sampled its metrics"},
		{option: "max-gpu-budget", value: "12", check: func(t *testing.T, c Config) { require.Equal(t, 12, c.MaxGPUBudget) }},
		{option: "min-gpu-budget", value: "1", err: "min-gpu-budget: Dynamo's older load planner's minimum GPUs per worker type has no equivalent here",
			underscoreIsCurrent: true},
		{option: "decode-kv-scale-up-threshold", value: "0.85", check: func(t *testing.T, c Config) { require.Equal(t, 85.0, *c.DecodeScaleUpKVRate) },
			warn: "fraction 0.85 is read as decode_scale_up_kv_rate 85 (percent)"},
		{option: "decode-kv-scale-down-threshold", value: "0.3", check: func(t *testing.T, c Config) { require.Equal(t, 30.0, *c.DecodeScaleDownKVRate) },
			warn: "fraction 0.3 is read as decode_scale_down_kv_rate 30 (percent)"},
		{option: "prefill-queue-scale-up-threshold", value: "5.0", err: "has no conversion from it: set prefill_scale_up_queue_tokens"},
		{option: "prefill-queue-scale-down-threshold", value: "0.2", err: "has no conversion from it: set prefill_scale_down_queue_tokens"},
		{option: "prefill-engine-num-gpu", value: "4", check: func(t *testing.T, c Config) { require.Equal(t, 4, c.PrefillGPUs()) }},
		{option: "decode-engine-num-gpu", value: "2", check: func(t *testing.T, c Config) { require.Equal(t, 2, c.DecodeGPUs()) }},
		{option: "no-operation", value: "true", check: func(t *testing.T, c Config) { require.True(t, c.Advisory) }},
		{option: "log-dir", value: "logs/planner", check: func(t *testing.T, c Config) { require.Equal(t, "logs/planner", *c.LogDir) },
			warn: "log_dir is accepted for compatibility with Dynamo and ignored"},
	}
	for _, tt := range tests {
		for _, key := range []string{tt.option, strings.ReplaceAll(tt.option, "-", "_")} {
			t.Run(key, func(t *testing.T) {
				// max_gpu_budget 16 leaves room for the GPUs per engine; target sla keeps
				// the easy-mode warnings out.
				doc := fmt.Sprintf("optimization_target: sla\n%s: %s\n", key, tt.value)
				if !strings.Contains(key, "gpu_budget") && !strings.Contains(key, "gpu-budget") {
					doc += "max_gpu_budget: 16\n"
				}
				c, warns, err := Parse([]byte(doc), "inline", nil)
				if tt.underscoreIsCurrent && !strings.Contains(key, "-") {
					require.NoError(t, err, "the underscore spelling is the current key")
					require.Empty(t, warns)
					return
				}
				if tt.err != "" {
					require.ErrorContains(t, err, "line 2: "+key+": ")
					require.ErrorContains(t, err, tt.err)
					return
				}
				require.NoError(t, err)
				if tt.check != nil {
					tt.check(t, c)
				}
				if tt.warn == "" {
					require.Empty(t, warns)
					return
				}
				require.Len(t, warns, 1)
				require.Contains(t, warns[0], "line 2: ")
				require.Contains(t, warns[0], tt.warn)
			})
		}
	}
}

// TestBehaviouralDynamoKeysNameTheFeature: settings of Dynamo features this planner does not
// have are errors naming the feature, not warnings.
func TestBehaviouralDynamoKeysNameTheFeature(t *testing.T) {
	tests := []struct{ doc, want string }{
		{`{"aic_interpolation": {"system": "h200_sxm"}}`, "aic_interpolation: is not supported: it runs Dynamo's Python-only AI Configurator"},
		{`{"aic_perf_model": {"hf_id": "x", "system": "h200_sxm", "backend": "vllm"}}`, "aic_perf_model: is not supported: it needs Dynamo's Python-only AI Configurator"},
		{`{"enable_power_awareness": true, "total_gpu_power_limit": 4000}`, "enable_power_awareness: is not supported by this planner yet (GPU power budgets"},
		{`{"environment": "global-planner", "global_planner_namespace": "gp"}`, `environment: "global-planner" is not supported by this planner`},
		{`{"scheduling": {"external_plugins": [{"name": "p"}]}}`, "scheduling.external_plugins: is not supported: this planner has no gRPC plugin pipeline"},
		{`{"scheduling": {"gateway": {"enabled": true}}}`, "scheduling.gateway.enabled: is not supported: this planner has no plugin registration gateway"},
	}
	for _, tt := range tests {
		_, _, err := Load(tt.doc, nil)
		require.ErrorContains(t, err, tt.want, tt.doc)
	}
}

// TestUnknownKeysSuggest: an unknown key is an error, with the nearest known key (canonical,
// alias or older option) when it is a likely typo, whatever its separators.
func TestUnknownKeysSuggest(t *testing.T) {
	tests := []struct{ key, want string }{
		{"ttft_msec", `unknown key "ttft_msec" (did you mean "ttft_ms"?)`},
		{"max-gpu-budgte", `unknown key "max-gpu-budgte" (did you mean "max_gpu_budget"?)`},
		{"ttf", `unknown key "ttf" (did you mean "ttft"?)`},
		{"adjustment_intervall", `unknown key "adjustment_intervall" (did you mean "adjustment_interval"?)`},
		{"served-model-name", `unknown key "served-model-name"`},
	}
	for _, tt := range tests {
		_, _, err := Parse([]byte(tt.key+": 1\n"), "inline", nil)
		require.EqualError(t, err, "planner config inline:\nline 1: "+tt.want, tt.key)
	}
}

// TestSubMillisecondSLAWarns: Dynamo's early planner took ttft/itl in seconds; a value under
// 1 given under those names loads as milliseconds, with a warning.
func TestSubMillisecondSLAWarns(t *testing.T) {
	c, warns, err := Parse([]byte("optimization_target: sla\nttft: 0.5\nitl: 50\n"), "inline", nil)
	require.NoError(t, err)
	require.Equal(t, 0.5, c.TTFTMs)
	require.Equal(t, []string{"line 2: ttft: 0.5 is read as milliseconds (ttft_ms); Dynamo's early planner took seconds here: write 500 for 0.5 s"}, warns)
}

// TestCosmeticKeysWarnWhenGiven: a setting of Dynamo's own servers or report warns when the
// file gives it, even at Dynamo's default, unless it turns the server or report off.
func TestCosmeticKeysWarnWhenGiven(t *testing.T) {
	tests := []struct{ doc, want string }{
		{"control_api_port: 9086", "line 1: control_api_port is accepted for compatibility with Dynamo and ignored"},
		{"control_api_port: 0", ""},
		{"live_dashboard_port: 8080", "line 1: live_dashboard_port is accepted for compatibility with Dynamo and ignored"},
		{"live_dashboard_port: 0", ""},
		{"metric_reporting_prometheus_port: 0", ""},
		{"report_write_gzip_log: true", "line 1: report_* is accepted"},
		{"report_interval_hours: null\nreport_output_dir: /r", ""},
		{"log_dir: null", ""},
		{"log_dir: /var/log", "line 1: log_dir is accepted"},
	}
	for _, tt := range tests {
		_, warns, err := Parse([]byte("optimization_target: sla\n"+tt.doc+"\n"), "inline", nil)
		require.NoError(t, err, tt.doc)
		if tt.want == "" {
			require.Empty(t, warns, tt.doc)
			continue
		}
		require.Len(t, warns, 1, tt.doc)
		require.Contains(t, warns[0], strings.Replace(tt.want, "line 1", "line 2", 1), tt.doc)
	}
}
