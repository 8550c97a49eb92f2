package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/connectors/local"
	"github.com/llmplanner/planner/internal/temporaltest"
	"github.com/llmplanner/planner/scaling"
	"github.com/llmplanner/planner/workflows"
)

// writeStepTrace writes a Mooncake-format trace: low, then a step of high load, then low
// again, ISL 2000 / OSL 20.
func writeStepTrace(t *testing.T, path string, phases [][2]float64) float64 {
	t.Helper()
	var b strings.Builder
	at := 0.0
	for _, ph := range phases {
		seconds, rate := ph[0], ph[1]
		n := int(seconds * rate)
		for i := range n {
			fmt.Fprintf(&b, "{\"timestamp\": %d, \"input_length\": 2000, \"output_length\": 20}\n", int((at+float64(i)/rate)*1000))
		}
		at += seconds
	}
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	return at
}

// TestDemoEndToEnd runs a short `planner demo` on a real Temporal dev server: simulated
// engines publish FPMs over ZeroMQ, the frontend's metrics are scraped, the planner workflow
// decides, and the local connector starts and drains engine processes. Under a load step the
// prefill pool must grow, and after it shrink back to one replica; every request must succeed
// and no process may be left behind.
func TestDemoEndToEnd(t *testing.T) {
	sum := runDemoForTest(t, "disagg", `
mode: disagg
environment: local
optimization_target: sla
ttft_ms: 300
itl_ms: 50
enable_load_scaling: true
load_adjustment_interval: 2
enable_throughput_scaling: false
max_gpu_budget: 8
min_endpoint: 1
`, [][2]float64{{8, 4}, {22, 70}, {30, 3}})
	require.GreaterOrEqual(t, sum.PeakPrefill, 2, "the load step scales prefill up")
	last := sum.Timeline[len(sum.Timeline)-1]
	require.Equal(t, 1, last.ReadyPrefill, "after the step, prefill is back at its minimum")
}

// TestDemoEndToEnd_Agg is the same with `planner demo --mode agg`: the frontend routes whole
// requests to aggregated engines, which publish their FPMs as the decode component, and
// Dynamo's agg decisions size the one pool up under the step and back down after it.
func TestDemoEndToEnd_Agg(t *testing.T) {
	sum := runDemoForTest(t, "agg", `
mode: agg
environment: local
optimization_target: sla
ttft_ms: 500
itl_ms: 50
enable_load_scaling: true
load_adjustment_interval: 2
enable_throughput_scaling: false
max_gpu_budget: 8
min_endpoint: 1
`, [][2]float64{{8, 4}, {22, 40}, {30, 3}})
	require.Zero(t, sum.PeakPrefill, "an aggregated deployment has no prefill pool")
	require.GreaterOrEqual(t, sum.PeakDecode, 2, "the load step scales the aggregated pool up")
	last := sum.Timeline[len(sum.Timeline)-1]
	require.Equal(t, 1, last.ReadyDecode, "after the step, the aggregated pool is back at its minimum")
}

// TestDemoEndToEnd_AggAhead is the aggregated demo with this planner's own policy
// (scaling_policy ahead sizing the one pool with its aggregated capacity model): up under the
// step, back down after it. It reads the frontend's traffic, so the namespace is the demo's.
func TestDemoEndToEnd_AggAhead(t *testing.T) {
	sum := runDemoForTest(t, "agg", `
mode: agg
environment: local
namespace: demo
optimization_target: sla
scaling_policy: ahead
expected_startup_seconds: 3
ttft_ms: 500
itl_ms: 50
load_adjustment_interval: 5
max_gpu_budget: 8
min_endpoint: 1
`, [][2]float64{{8, 4}, {22, 40}, {30, 3}})
	require.Zero(t, sum.PeakPrefill, "an aggregated deployment has no prefill pool")
	require.GreaterOrEqual(t, sum.PeakDecode, 2, "the load step scales the aggregated pool up")
	last := sum.Timeline[len(sum.Timeline)-1]
	require.Less(t, last.ReadyDecode, sum.PeakDecode, "after the step, the aggregated pool shrinks")
	read := 0.0
	for _, tk := range sum.Timeline {
		if tk.ReadRate != nil {
			read = max(read, *tk.ReadRate)
		}
	}
	require.Greater(t, read, 10.0, "the ticks show the rate they read from the frontend's metrics: the step's 40 req/s at some tick")
}

// runDemoForTest runs `planner demo --mode mode` with a planner config on a step trace and
// checks what every run must show: every request served, a scale-up and a scale-down
// decided, a report, the planner listed by its search attributes, nothing left running. It
// returns the demo's summary.
func runDemoForTest(t *testing.T, mode, plannerYAML string, phases [][2]float64) demoSummary {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end demo: skipped with -short")
	}
	bin, err := buildPlanner()
	require.NoError(t, err)
	srv := temporaltest.Start(t)
	dir := t.TempDir()
	trace := filepath.Join(dir, "step.jsonl")
	span := writeStepTrace(t, trace, phases)
	cfg := filepath.Join(dir, "planner.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(plannerYAML), 0o644))
	out := filepath.Join(dir, "out")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	args := []string{"demo", "--mode", mode}
	if mode == "agg" {
		// The aggregated run also goes through the KV router and the engines' prefix cache.
		args = append(args, "--router", "kv", "--prefix-caching")
	}
	cmd := exec.CommandContext(ctx, bin, append(args, "--out", out, "--trace", trace, "--trace-length", "0",
		"--duration", fmt.Sprintf("%.0fs", span), "--startup-delay", "3s", "--tail", "20s", "--config", cfg, "--gpus", "8", "--start", "minimum",
		"--metrics-address", freeAddr(t))...)
	cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+srv.HostPort)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	output, err := cmd.CombinedOutput()
	t.Logf("planner demo (%s):\n%s", time.Since(start).Round(time.Second), output)
	require.NoError(t, err)

	data, err := os.ReadFile(filepath.Join(out, "summary.json"))
	require.NoError(t, err)
	var sum demoSummary
	require.NoError(t, json.Unmarshal(data, &sum))
	require.Equal(t, len(strings.Split(strings.TrimSpace(readFile(t, trace)), "\n")), sum.Requests)
	require.Zero(t, sum.Failed, "every request is served")
	require.NotEmpty(t, sum.Timeline)
	scaledUp, scaledDown := false, false
	for _, tk := range sum.Timeline {
		scaledUp = scaledUp || strings.Contains(tk.Decision, "scale_up")
		scaledDown = scaledDown || strings.Contains(tk.Decision, "scale_down")
	}
	require.True(t, scaledUp, "a load tick decided scale_up")
	require.True(t, scaledDown, "a load tick decided scale_down")
	require.FileExists(t, filepath.Join(out, "report.html"))

	// The demo's planner was started as `planner start` starts one: it is listed by its search
	// attributes (visibility is eventually consistent: poll, bounded).
	listed := ""
	deadline := time.Now().Add(30 * time.Second)
	for listed == "" && time.Now().Before(deadline) {
		resp, err := srv.Client().ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: "default", Query: "PlannerDeployment='demo/llama' AND PlannerMode='" + mode + "'"})
		require.NoError(t, err)
		if len(resp.GetExecutions()) > 0 {
			listed = resp.GetExecutions()[0].GetExecution().GetWorkflowId()
		} else {
			time.Sleep(200 * time.Millisecond)
		}
	}
	require.Equal(t, "planner/demo/llama", listed, "temporal workflow list --query \"PlannerDeployment='demo/llama'\" finds the demo's planner")

	// Nothing is left running: every worker recorded in the local connector's state is gone.
	var state struct {
		Workers []struct {
			PID int `json:"pid"`
		} `json:"workers"`
	}
	require.NoError(t, json.Unmarshal([]byte(readFile(t, filepath.Join(out, localStateFile))), &state))
	require.Empty(t, state.Workers)
	pids, err := exec.Command("pgrep", "-f", out).Output()
	require.Empty(t, strings.TrimSpace(string(pids)), "processes left behind: %s (err %v)", pids, err)
	return sum
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(data)
}

// TestStopPreviousDemo: the engines a previous demo left in its folder are stopped and its
// state file removed (the worker's local connector for demo/llama wrote it).
func TestStopPreviousDemo(t *testing.T) {
	out := t.TempDir()
	sleep, err := exec.LookPath("sleep")
	require.NoError(t, err)
	one := 1
	l, err := local.Open(local.Config{Namespace: demoLocalNamespace, StateFile: filepath.Join(out, localStateFile), GPUs: []int{0, 1},
		Prefill: local.ComponentConfig{Command: []string{sleep, "600"}}, Decode: local.ComponentConfig{Command: []string{sleep, "600"}}},
		connectors.Targets{Prefill: &one, Decode: &one})
	require.NoError(t, err)
	pids := []int{}
	for _, w := range l.Workers() {
		pids = append(pids, w.PID)
	}
	require.Len(t, pids, 2)
	require.NoError(t, l.Close(), "the previous demo's worker is gone; its engines run on")
	require.NoError(t, stopPreviousDemo(context.Background(), out))
	require.NoFileExists(t, filepath.Join(out, localStateFile))
	for _, pid := range pids {
		require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "engine %d stopped", pid)
	}
}

// TestPoolCountsString: the tick lines' pool column, pending engines included.
func TestPoolCountsString(t *testing.T) {
	for _, tc := range []struct {
		c     poolCounts
		want  string
		total int
	}{
		{poolCounts{Ready: 3}, "3", 3},
		{poolCounts{Ready: 3, Starting: 1}, "3 +1", 4},
		{poolCounts{Ready: 2, Draining: 2}, "2 -2", 4},
		{poolCounts{Ready: 4, Pending: 2}, "4 +2p", 4},
		{poolCounts{Ready: 2, Starting: 1, Pending: 1, Draining: 1}, "2 +1 +1p -1", 4},
	} {
		require.Equal(t, tc.want, tc.c.String())
		require.Equal(t, tc.total, tc.c.Total(), "pending engines hold no GPU")
	}
}

// TestDescribeTick: the tick line's decision column names the loops' reasons once each, and
// leaves out a loop that does not run.
func TestDescribeTick(t *testing.T) {
	four := 4
	for _, tc := range []struct {
		name string
		tk   workflows.TickRecord
		want string
	}{
		{"a hold without diagnostics", workflows.TickRecord{}, "hold"},
		{"Dynamo's loops",
			workflows.TickRecord{Applied: connectors.Targets{Prefill: &four}, Diagnostics: &scaling.Diagnostics{
				LoadReasonPrefill: scaling.ReasonScaleUp, LoadReasonDecode: scaling.ReasonNoChange, ThroughputReason: scaling.ReasonNoChange}},
			"→ prefill=4 (scale_up, no_change)"},
		{"the ahead policy: its throughput loop disabled",
			workflows.TickRecord{Applied: connectors.Targets{Decode: &four}, Diagnostics: &scaling.Diagnostics{
				LoadReason: scaling.ReasonScaleUp, ThroughputReason: scaling.ReasonDisabled}},
			"→ decode=4 (scale_up)"},
		{"the ahead policy's hold: one reason for every pool, once",
			workflows.TickRecord{Diagnostics: &scaling.Diagnostics{LoadReason: scaling.ReasonNoTrafficData,
				LoadReasonPrefill: scaling.ReasonNoTrafficData, LoadReasonDecode: scaling.ReasonNoTrafficData, ThroughputReason: scaling.ReasonDisabled}},
			"hold (no_traffic_data)"},
		{"every loop disabled",
			workflows.TickRecord{Diagnostics: &scaling.Diagnostics{LoadReason: scaling.ReasonDisabled, ThroughputReason: scaling.ReasonDisabled}},
			"hold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, describeTick(&tc.tk))
		})
	}
}

func TestRetirePreviousReport(t *testing.T) {
	for _, tc := range []struct {
		name        string
		files       map[string]string // in the output folder before
		wantRetired []string
		want        map[string]string // after (every file of the folder)
	}{
		{"first run", map[string]string{"planner.log": "log"}, nil, map[string]string{"planner.log": "log"}},
		{"previous report", map[string]string{"report.html": "<html>run 1", "summary.json": "{1}", "planner.log": "log"},
			[]string{"report.previous.html", "summary.previous.json"},
			map[string]string{"report.previous.html": "<html>run 1", "summary.previous.json": "{1}", "planner.log": "log"}},
		{"older previous report replaced", map[string]string{"report.html": "<html>run 2", "report.previous.html": "<html>run 1", "summary.previous.json": "{1}"},
			[]string{"report.previous.html"},
			map[string]string{"report.previous.html": "<html>run 2", "summary.previous.json": "{1}"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			for name, content := range tc.files {
				require.NoError(t, os.WriteFile(filepath.Join(out, name), []byte(content), 0o644))
			}
			retired, err := retirePreviousReport(out)
			require.NoError(t, err)
			require.Equal(t, tc.wantRetired, retired)
			got := map[string]string{}
			entries, err := os.ReadDir(out)
			require.NoError(t, err)
			for _, e := range entries {
				data, err := os.ReadFile(filepath.Join(out, e.Name()))
				require.NoError(t, err)
				got[e.Name()] = string(data)
			}
			require.Equal(t, tc.want, got)
			for _, name := range demoReportFiles {
				require.NoFileExists(t, filepath.Join(out, name), "nothing that looks like this run's report")
			}
		})
	}
	// A report that cannot be set aside stops the demo rather than staying in place.
	out := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(out, "report.html"), nil, 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(out, "report.previous.html"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(out, "report.previous.html", "x"), nil, 0o644))
	_, err := retirePreviousReport(out)
	require.ErrorContains(t, err, "set the previous run's report.html aside")
}
