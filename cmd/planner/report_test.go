package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/internal/temporaltest"
	"github.com/llmplanner/planner/plannerclient"
	"github.com/llmplanner/planner/scaling"
	"github.com/llmplanner/planner/workflows"
)

// TestReportOfARunningPlanner runs `planner worker` and `planner start` against a real dev
// server, then `planner report`: the HTML has the planner's decisions and its estimated and
// observed latencies. An unknown deployment and a planner no worker answers for are clear
// errors, within the timeout, and write nothing.
func TestReportOfARunningPlanner(t *testing.T) {
	srv := temporaltest.Start(t)
	useTemporal(t, srv)
	dir := t.TempDir()
	profile, err := filepath.Abs("../../perf/testdata/profiles/h200-llama3.1-8b-fp8-tp1")
	require.NoError(t, err)
	script := filepath.Join(dir, "script.json")
	require.NoError(t, os.WriteFile(script, []byte(`{"entries": [{"from_tick": 0,
  "capabilities": {"prefill": {"num_gpu": 1, "max_kv_tokens": 500000, "context_length": 8192, "max_num_batched_tokens": 8192},
                   "decode": {"num_gpu": 1, "max_kv_tokens": 500000, "context_length": 8192, "max_num_seqs": 256}},
  "traffic": {"requests_per_second": 40, "isl": 3000, "osl": 300, "ttft_ms": 412.5, "itl_ms": 17.25}}]}`), 0o644))
	cfgPath := filepath.Join(dir, "planner.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(`
mode: disagg
environment: noop
optimization_target: sla
ttft_ms: 300
itl_ms: 20
enable_load_scaling: false
throughput_adjustment_interval_seconds: 2
max_gpu_budget: 16
profile_results_dir: `+profile+"\n"), 0o644))
	runWorkerInProcess(t, "--metrics-address", freeAddr(t), "--observations", script, "--noop-journal-dir", t.TempDir(), "--log-level", "warn")
	code, _, errOut := runCLI("start", "-f", cfgPath, "--deployment", "prod/llama", "--initial-prefill", "1", "--initial-decode", "1")
	require.Equal(t, 0, code, errOut)

	pc := plannerclient.New(srv.Client(), workflows.Deployment{Namespace: "prod", Name: "llama"})
	var lastTick workflows.TickRecord
	observed := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := pc.State(ctx)
		if err != nil || len(s.Decisions) == 0 {
			return false
		}
		ticks, err := pc.Diagnostics(ctx)
		if err != nil || len(ticks) == 0 || ticks[len(ticks)-1].ObservedTTFTMs == nil {
			return false
		}
		lastTick = ticks[len(ticks)-1]
		return true
	}
	eventually(t, "a decision and a tick with observed latencies", observed)
	if t.Failed() {
		return
	}
	require.NotNil(t, lastTick.ObservedRequestsPerSecond, "the tick records the rate it read")
	require.InDelta(t, 40, *lastTick.ObservedRequestsPerSecond, 1e-9, "the script's 40 req/s")

	out := filepath.Join(dir, "report.html")
	code, stdout, errOut := runCLI("report", "--deployment", "prod/llama", "--out", out)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, stdout, "wrote "+out+": planner/prod/llama")
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	html := string(data)
	require.Contains(t, html, "planner report: prod/llama")
	require.Contains(t, html, "<svg", "charts drawn inline")
	require.NotContains(t, html, "<script", "self-contained, no script")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := pc.State(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, s.Decisions)
	first := s.Decisions[0]
	require.Contains(t, html, "<td>"+first.Targets.String()+"</td>", "the planner's first decision")
	require.Contains(t, html, "<td>"+workflows.StatusRecorded+"</td>")
	require.Contains(t, html, " / 412.5</td>", "the observed TTFT beside the estimate")
	require.Contains(t, html, " / 17.25</td>", "the observed ITL beside the estimate")
	require.Contains(t, html, "SLA: TTFT 300 ms, ITL 20 ms")

	// An unknown deployment.
	missing := filepath.Join(dir, "missing.html")
	code, _, errOut = runCLI("report", "--deployment", "prod/nobody", "--out", missing)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `no planner for this deployment: workflow planner/prod/nobody not found in namespace "default"`)
	require.NoFileExists(t, missing)

	// A planner on a task queue no worker polls: the query is not answered.
	cfg := config.Default()
	cfg.Mode, cfg.Environment = config.ModeDecode, config.EnvNoop
	cfg.Resolve()
	_, err = srv.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "planner/prod/orphan", TaskQueue: "nobody-polls"},
		workflows.WorkflowName, workflows.Input{Deployment: workflows.Deployment{Namespace: "prod", Name: "orphan"}, Config: cfg})
	require.NoError(t, err)
	orphan := filepath.Join(dir, "orphan.html")
	began := time.Now()
	code, _, errOut = runCLI("report", "--deployment", "prod/orphan", "--out", orphan, "--timeout", "2s")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no worker answered the state query of planner/prod/orphan within 2s")
	require.Less(t, time.Since(began), time.Minute, "bounded by --timeout")
	require.NoFileExists(t, orphan)

	code, _, errOut = runCLI("report", "--deployment", "prod/llama", "--timeout", "10m")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "--timeout 10m0s: want 1s..5m0s")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		require.False(t, strings.HasPrefix(e.Name(), ".planner-report-"), "no temporary file left: %s", e.Name())
	}
}

// TestLivePageFromDiagnostics: the page lays out every tick's diagnostics, including ticks
// without diagnostics (an override tick) and a planner with no tick yet.
func TestLivePageFromDiagnostics(t *testing.T) {
	one, two := 1, 2
	est, obs, rate := 123.456, 412.5, 41.234
	snap := liveSnapshot{
		State: workflows.StateView{WorkflowID: "planner/ns/m", Deployment: workflows.Deployment{Namespace: "ns", Name: "m"},
			Mode: "disagg", Target: "sla", Environment: "noop", TTFTMs: 300, ITLMs: 20, AsOf: "2026-11-24T22:00:00Z",
			Decisions: []workflows.DecisionRecord{{ID: 7, At: 1795560000, Tick: 3, Source: "planner", Targets: connectors.Targets{Prefill: &two}, Status: workflows.StatusApplied}},
			Overrides: workflows.Overrides{PauseScaleDown: true}},
		Config: config.Default(),
		Ticks: []workflows.TickRecord{
			{Tick: 3, Kind: "scheduled", At: 1795560000, ObservedTTFTMs: &obs, ObservedRequestsPerSecond: &rate, Diagnostics: &scaling.Diagnostics{
				ReadyPrefill: &one, ReadyDecode: &one, EstimatedTTFTMs: &est, Decision: scaling.Decision{Prefill: &two}, ThroughputReason: "scale_up"}},
			{Tick: 4, Kind: "override", At: 1795560002, Applied: connectors.Targets{Decode: &two}, Notes: []string{"decode pinned"}},
		},
	}
	var b strings.Builder
	require.NoError(t, livePage(snap).Write(&b))
	html := b.String()
	for _, want := range []string{
		"<td>prefill=2</td><td>applied</td>",    // the decision
		"<td>41.23</td><td>123.46 / 412.5</td>", // the rate read, estimated vs observed TTFT
		"<td>prefill=1 decode=1</td><td>prefill=2</td><td></td><td>scale_up</td>",
		// An override tick read nothing: empty reasons, rate and latencies, then its note.
		"<td>decode=2</td><td></td><td></td><td></td><td></td><td></td><td>decode pinned</td>",
		"<td>override</td><td></td><td>decode=2</td>", // an override tick: what was applied
		"scale-down paused",
		"s since 2026-11-24 ",
	} {
		require.Contains(t, html, want)
	}

	b.Reset()
	require.NoError(t, livePage(liveSnapshot{State: workflows.StateView{WorkflowID: "planner/ns/new"}, Config: config.Default()}).Write(&b))
	require.Contains(t, b.String(), "no data", "a planner without ticks yet still gets a report")
}
