package config

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBoundsRefuseAbsurdValues checks every bounded setting refuses a value past its bound
// (naming the field) and accepts the bound itself.
func TestBoundsRefuseAbsurdValues(t *testing.T) {
	huge := math.MaxInt64
	long := strings.Repeat("x", MaxStringBytes+1)
	ptr := func(n int) *int { return &n }
	str := func(s string) *string { return &s }
	cases := []struct {
		field string
		set   func(c *Config)
	}{
		{"max_gpu_budget", func(c *Config) { c.MaxGPUBudget = huge }},
		{"min_gpu_budget", func(c *Config) { c.MinGPUBudget = MaxGPUs + 1; c.MaxGPUBudget = -1 }},
		{"min_endpoint", func(c *Config) { c.MinEndpoint = 1 << 62 }},
		{"prefill_min_endpoint", func(c *Config) { c.PrefillMinEndpoint = ptr(MaxReplicas + 1) }},
		{"decode_min_endpoint", func(c *Config) { c.DecodeMinEndpoint = ptr(huge) }},
		{"decode_engine_num_gpu", func(c *Config) { c.DecodeEngineNumGPU = ptr(MaxGPUsPerEngine + 1) }},
		{"max_throughput_scaling_replicas", func(c *Config) { c.MaxThroughputScalingReplicas = huge }},
		{"throughput_adjustment_interval_seconds", func(c *Config) { c.ThroughputAdjustmentIntervalSeconds = huge }},
		{"load_predictor_history_size", func(c *Config) { c.LoadPredictorHistorySize = 1 << 40 }},
		{"max_num_fpm_samples", func(c *Config) { c.MaxNumFPMSamples = huge }},
		{"fpm_sample_bucket_size", func(c *Config) { c.FPMSampleBucketSize = 1 << 40 }},
		{"load_metric_samples", func(c *Config) { c.LoadMetricSamples = ptr(-1) }},
		{"speculative_nextn", func(c *Config) { c.SpeculativeNextn = 1000 }},
		{"decode_scale_down_hold_intervals", func(c *Config) { c.DecodeScaleDownHoldIntervals = huge }},
		{"ttft_ms", func(c *Config) { c.TTFTMs = 1e300 }},
		{"scheduling.tick_max_duration_seconds", func(c *Config) { c.Scheduling.TickMaxDurationSeconds = 1e12 }},
		{"namespace", func(c *Config) { c.Namespace = strings.Repeat("n", MaxNamespaceBytes+1) }},
		{"profile_results_dir", func(c *Config) { c.ProfileResultsDir = long }},
		{"model_name", func(c *Config) { c.ModelName = str("\xff\xfe") }},
		{"metric_pulling_prometheus_extra_query_params", func(c *Config) {
			c.MetricPullingPrometheusExtraQueryParams = map[string]string{"a": long}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.field, func(t *testing.T) {
			c := Default()
			tc.set(&c)
			c.Resolve()
			err := c.Validate()
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.field+":")
		})
	}

	t.Run("the bounds themselves are valid", func(t *testing.T) {
		c := Default()
		c.MaxGPUBudget, c.MinEndpoint, c.MaxThroughputScalingReplicas = MaxGPUs, MaxReplicas, MaxReplicas
		c.DecodeEngineNumGPU, c.PrefillEngineNumGPU = ptr(MaxGPUsPerEngine), ptr(MaxGPUsPerEngine)
		c.LoadPredictorHistorySize, c.MaxNumFPMSamples = MaxHistoryPoints, MaxFPMSamples
		c.Resolve()
		require.NoError(t, c.Validate())
	})
}

func TestCheckReplicasAndText(t *testing.T) {
	require.NoError(t, CheckReplicas("replicas", 0))
	require.NoError(t, CheckReplicas("replicas", MaxReplicas))
	require.ErrorContains(t, CheckReplicas("replicas", MaxReplicas+1), "replicas must be within 0..4096")
	require.ErrorContains(t, CheckReplicas("replicas", -1), "got -1")
	require.NoError(t, CheckText("reason", "scale for the launch", MaxReasonBytes))
	require.ErrorContains(t, CheckText("reason", strings.Repeat("r", MaxReasonBytes+1), MaxReasonBytes), "reason is 1025 bytes long, at most 1024")
	require.ErrorContains(t, CheckText("reason", "\xc3", MaxReasonBytes), "not valid UTF-8")
}
