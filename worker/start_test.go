package worker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/config"
)

func TestWithoutSecrets(t *testing.T) {
	cfg, _, err := config.Parse([]byte(`
mode: decode
environment: noop
optimization_target: throughput
metric_pulling_prometheus_endpoint: "http://user:hunter2@prometheus:9090"
metric_pulling_prometheus_token: tok
metric_pulling_prometheus_extra_query_params: {api_key: k}
`), "test", nil)
	require.NoError(t, err)
	notes := withoutSecrets(&cfg)
	require.Len(t, notes, 3)
	require.Nil(t, cfg.MetricPullingPrometheusToken)
	require.Empty(t, cfg.MetricPullingPrometheusExtraQueryParams)
	require.Equal(t, "http://prometheus:9090", cfg.MetricPullingPrometheusEndpoint)
	require.Empty(t, withoutSecrets(&cfg), "nothing left to remove")
	require.Equal(t, "http://user:xxxxx@p:9090/metrics", redacted("http://user:pw@p:9090/metrics"))
}
