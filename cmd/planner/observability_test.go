package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/internal/obscheck"
	"github.com/llmplanner/planner/internal/promtest"
	"github.com/llmplanner/planner/internal/repo"
	"github.com/llmplanner/planner/internal/temporaltest"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/sim/fpmpub"
	"github.com/llmplanner/planner/sim/frontend"
	"github.com/llmplanner/planner/worker"
)

// dynamoPlannerMetrics are the metrics Dynamo's planner exports (reference/dynamo-planner.md
// §9.2), but for those of features this planner does not have: power awareness
// (power_budget_total_watts, power_projected_watts, power_budget_utilization) and the plugin
// pipeline (plugin_*, reconcile_clamped_total, constrain_capped_total,
// reject_short_circuited_total, tick_skipped_total, tick_requires_unsatisfied_total,
// tick_timeout_total); of the pipeline's, the tick timings are exported.
var dynamoPlannerMetrics = []string{
	"num_prefill_replicas", "num_decode_replicas", "observed_ttft_ms", "observed_itl_ms",
	"observed_requests_per_second", "observed_request_duration_seconds",
	"observed_input_sequence_tokens", "observed_output_sequence_tokens",
	"predicted_requests_per_second", "predicted_input_sequence_tokens",
	"predicted_output_sequence_tokens", "predicted_num_prefill_replicas",
	"predicted_num_decode_replicas", "gpu_hours", "sla_target_ttft_ms", "sla_target_itl_ms", "estimated_ttft_ms",
	"estimated_itl_ms", "engine_prefill_capacity_requests_per_second",
	"engine_decode_capacity_requests_per_second",
	"load_scaling_decision", "throughput_scaling_decision",
	"engine_queued_prefill_tokens", "engine_queued_decode_kv_tokens", "engine_inflight_decode_kv_tokens",
	"tick_lag_seconds", "tick_duration_seconds",
}

// TestWorkerMetricsParityAndDashboard runs `planner worker --deployments FILE` hosting a
// disaggregated SLA planner (noop connector) whose frontend is scraped and whose engines
// publish FPMs over ZeroMQ, on a real dev server. The worker's /metrics must carry every one
// of Dynamo's planner metrics and every planner series the worker declares, labelled with the
// deployment, with Dynamo's per-engine and enum labels. A real Prometheus then scrapes the
// worker: every query of the Grafana dashboard returns series and every alert expression
// evaluates. Once the planner is terminated its series leave /metrics.
func TestWorkerMetricsParityAndDashboard(t *testing.T) {
	if testing.Short() {
		t.Skip("real Temporal and Prometheus: skipped with -short")
	}
	srv := temporaltest.Start(t)
	useTemporal(t, srv)
	dir := t.TempDir()

	// The frontend: Dynamo's metrics, one request every 100 ms (TTFT 120 ms, 1 s, 1000 in,
	// 90 out).
	reg := prometheus.NewRegistry()
	fm, err := frontend.NewMetrics(reg, "m", "obs")
	require.NoError(t, err)
	front := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(front.Close)

	// One prefill and one decode engine publishing FPMs.
	prefillAddr, decodeAddr := "tcp://"+freeAddr(t), "tcp://"+freeAddr(t)
	pp, err := fpmpub.New(prefillAddr, "p0", 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pp.Close() })
	dp, err := fpmpub.New(decodeAddr, "d0", 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = dp.Close() })
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for i := int64(0); ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
			fm.RequestStarted()
			fm.RequestFinished(frontend.Completed{ISL: 1000, OSL: 90, TTFT: 120 * time.Millisecond, Duration: time.Second})
			// Varied batches, so the perf models' regressions have something to fit.
			tokens := 1000 + (i%5)*500
			pp.Publish(perf.FPM{WorkerID: "p0", WallTime: 0.01 + float64(tokens)*2e-5, CounterID: i,
				Scheduled: perf.ScheduledRequests{NumPrefillRequests: 1 + i%3, SumPrefillTokens: tokens},
				Queued:    perf.QueuedRequests{NumPrefillRequests: 1, SumPrefillTokens: 1000}})
			dp.Publish(perf.FPM{WorkerID: "d0", WallTime: 0.008 + float64(10+i%5)*1e-4, CounterID: i,
				Scheduled: perf.ScheduledRequests{NumDecodeRequests: 10 + i%5, SumDecodeKVTokens: 10500}})
		}
	}()

	profile := filepath.Join(dir, "profile")
	require.NoError(t, writeEmbedded("demodata/profile", profile))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "planner.yaml"), []byte(`
mode: disagg
environment: noop
optimization_target: sla
profile_results_dir: `+profile+`
enable_throughput_scaling: true
enable_load_scaling: true
load_predictor: constant
throughput_sizing: interpolation
throughput_adjustment_interval: 3
load_adjustment_interval: 2
ttft_ms: 300
itl_ms: 20
max_gpu_budget: 8
`), 0o644))
	deployments := filepath.Join(dir, "deployments.yaml")
	require.NoError(t, os.WriteFile(deployments, []byte(fmt.Sprintf(`
deployments:
  - deployment: obs/llama
    planner_config: planner.yaml
    connector: {kind: noop}
    traffic:
      model: m
      dynamo_namespace: obs
      scrape: {url: %q, interval: 500ms}
    fpm:
      endpoints: [{address: %q, component: prefill}, {address: %q, component: decode}]
`, front.URL+"/metrics", prefillAddr, decodeAddr)), 0o644))
	metricsAddr := freeAddr(t)
	runWorkerInProcess(t, "--deployments", deployments, "--metrics-address", metricsAddr, "--log-level", "warn")

	scrape := func() string {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	const label = `deployment="planner/obs/llama"`
	missing := func(text string, names []string) []string {
		var out []string
		for _, n := range names {
			if !regexp.MustCompile(`(?m)^` + n + `\{[^}]*` + regexp.QuoteMeta(label)).MatchString(text) {
				out = append(out, n)
			}
		}
		return out
	}
	var dynamo []string
	for _, n := range dynamoPlannerMetrics {
		dynamo = append(dynamo, "dynamo_planner_"+n)
	}
	exported := worker.PlannerMetricNames()
	for _, n := range dynamo {
		require.True(t, slices.Contains(exported, n), "the worker declares Dynamo's %s", n)
	}
	var text string
	deadline := time.Now().Add(90 * time.Second)
	for {
		text = scrape()
		m := missing(text, exported)
		if len(m) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker's /metrics lacks %v\n%s", m, grep(text, label))
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Dynamo's labels: per engine, and the enum's label named after the metric.
	require.Regexp(t, `dynamo_planner_engine_queued_prefill_tokens\{deployment="planner/obs/llama",dp_rank="0",worker_id="p0"\} 1000`, text)
	require.Regexp(t, `dynamo_planner_engine_inflight_decode_kv_tokens\{deployment="planner/obs/llama",dp_rank="0",worker_id="d0"\} 10500`, text)
	require.Regexp(t, `dynamo_planner_load_scaling_decision\{deployment="planner/obs/llama",dynamo_planner_load_scaling_decision="[a-z_]+"\} 1`, text)
	require.Regexp(t, `dynamo_planner_sla_target_ttft_ms\{deployment="planner/obs/llama"\} 300`, text)
	require.Regexp(t, `dynamo_planner_observed_ttft_ms\{deployment="planner/obs/llama"\} 12\d(\.\d+)?\n`, text, "the frontend's 120 ms")
	t.Logf("planner series:\n%s", grep(text, label))

	// A real Prometheus scraping the worker: the dashboard's queries return series, the
	// alert expressions evaluate.
	prom := promtest.Start(t, metricsAddr)
	root, err := repo.Root()
	require.NoError(t, err)
	dq, err := obscheck.DashboardQueries(filepath.Join(root, "deploy", "grafana", "planner-dashboard.json"))
	require.NoError(t, err)
	rq, err := obscheck.RuleQueries(filepath.Join(root, "deploy", "prometheus", "alert-rules.yaml"))
	require.NoError(t, err)
	for _, q := range dq {
		prom.WaitFor(t, q.Expr, 60*time.Second, func(v model.Vector) bool { return len(v) > 0 })
	}
	for _, q := range rq {
		qctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := prom.Query(qctx, q.Expr, time.Now())
		cancel()
		require.NoError(t, err, q.Where)
	}

	// The planner ends: its series leave /metrics (the worker's refresh finds it closed).
	out, err := temporalCLI(t, srv, "workflow", "terminate", "--workflow-id", "planner/obs/llama", "--reason", "test")
	require.NoError(t, err, out)
	waitFor(t, 3*worker.DefaultPlannerRefreshInterval, "the ended planner's series leave /metrics", func() bool {
		return !strings.Contains(scrape(), label)
	})
}

// grep returns the lines of text containing s.
func grep(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
