package planner_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/llmplanner/planner/internal/obscheck"
	"github.com/llmplanner/planner/worker"
)

// TestObservabilityArtifacts: every PromQL expression of the Grafana dashboard and of the
// alert rules parses and selects only series the worker exports; the dashboard covers the
// panels docs/observability.md describes; the rules pass `promtool check rules`, have the
// alerts the runbook names, and the PrometheusRule carries the same groups. (The queries are
// evaluated against a real Prometheus scraping a real worker in cmd/planner's
// TestWorkerMetricsParityAndDashboard.)
func TestObservabilityArtifacts(t *testing.T) {
	dash := filepath.Join("deploy", "grafana", "planner-dashboard.json")
	rules := filepath.Join("deploy", "prometheus", "alert-rules.yaml")
	dq, err := obscheck.DashboardQueries(dash)
	require.NoError(t, err)
	rq, err := obscheck.RuleQueries(rules)
	require.NoError(t, err)

	exported := worker.PlannerMetricNames()
	used := map[string]bool{}
	for _, q := range append(dq, rq...) {
		names, err := obscheck.MetricNames(q.Expr)
		require.NoError(t, err, "%s: %s", q.Where, q.Expr)
		require.NotEmpty(t, names, "%s selects no series", q.Where)
		for _, n := range names {
			require.True(t, slices.Contains(exported, n), "%s selects %s, which the worker does not export", q.Where, n)
			used[n] = true
		}
	}
	for _, n := range []string{
		"dynamo_planner_num_prefill_replicas", "dynamo_planner_num_decode_replicas",
		"dynamo_planner_predicted_num_prefill_replicas", "dynamo_planner_predicted_num_decode_replicas",
		"dynamo_planner_observed_ttft_ms", "dynamo_planner_estimated_ttft_ms", "dynamo_planner_sla_target_ttft_ms",
		"dynamo_planner_observed_itl_ms", "dynamo_planner_estimated_itl_ms", "dynamo_planner_sla_target_itl_ms",
		"dynamo_planner_observed_requests_per_second", "dynamo_planner_predicted_requests_per_second",
		"dynamo_planner_load_scaling_decision", "dynamo_planner_throughput_scaling_decision",
		"dynamo_planner_gpu_hours", "dynamo_planner_tick_lag_seconds", "planner_pending_decision_age_seconds",
	} {
		require.True(t, used[n], "the dashboard and rules show %s", n)
	}
	_, err = obscheck.MetricNames(`sum(rate(x[5m])`)
	require.Error(t, err, "the parser refuses a broken expression")

	var alerts []string
	for _, q := range rq {
		alerts = append(alerts, q.Where)
	}
	for _, a := range []string{"PlannerStuck", "PlannerTTFTAboveSLA", "PlannerITLAboveSLA", "PlannerGPUBudgetAtCeiling", "PlannerPendingDecisionTooOld"} {
		require.Contains(t, alerts, `rule "`+a+`"`)
	}

	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool (Debian package prometheus, installed by scripts/apt-deps) is missing: %v", err)
	}
	out, err := exec.Command(promtool, "check", "rules", rules).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "SUCCESS: 6 rules found")

	// The operator's PrometheusRule has the same groups.
	var plain, operator struct {
		Groups []any `yaml:"groups"`
		Spec   struct {
			Groups []any `yaml:"groups"`
		} `yaml:"spec"`
	}
	for path, into := range map[string]any{rules: &plain, filepath.Join("deploy", "prometheus", "prometheusrule.yaml"): &operator} {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NoError(t, yaml.Unmarshal(b, into))
	}
	require.NotEmpty(t, plain.Groups)
	require.Equal(t, plain.Groups, operator.Spec.Groups, "prometheusrule.yaml and alert-rules.yaml agree")
}
