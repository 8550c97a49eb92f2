package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/connectors/virtual"
	"github.com/llmplanner/planner/internal/temporaltest"
	"github.com/llmplanner/planner/plannerclient"
	"github.com/llmplanner/planner/workflows"
)

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// temporalCLI runs the temporal CLI against the server and returns its output.
func temporalCLI(t *testing.T, srv *temporaltest.Server, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := srv.Cmd(ctx, args...).CombinedOutput()
	return string(out), err
}

// useTemporal points this process's Temporal client settings (as the temporal CLI reads
// them) at the test's dev server, for the test's duration.
func useTemporal(t *testing.T, srv *temporaltest.Server) {
	t.Setenv("TEMPORAL_ADDRESS", srv.HostPort)
	t.Setenv("TEMPORAL_NAMESPACE", "default")
	t.Setenv("TEMPORAL_CONFIG_FILE", filepath.Join(t.TempDir(), "absent.toml"))
	t.Setenv("TEMPORAL_PROFILE", "")
}

// runWorkerInProcess runs `planner worker` with args in this process until the test ends
// (it must then stop cleanly) and returns its log, printed when the test failed.
func runWorkerInProcess(t *testing.T, args ...string) *syncBuffer {
	t.Helper()
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	workerDone := make(chan int, 1)
	go func() { workerDone <- run(ctx, append([]string{"worker"}, args...), io.Discard, logs) }()
	t.Cleanup(func() {
		cancel()
		require.Equal(t, 0, <-workerDone, "the worker stops cleanly: %s", logs.String())
		if t.Failed() {
			t.Logf("worker log:\n%s", logs.String())
		}
	})
	return logs
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestWorkerStartAndOperatorCommands runs `planner worker` and `planner start` against a real
// dev server and steers the planner with the temporal CLI commands of docs/runbook.md.
func TestWorkerStartAndOperatorCommands(t *testing.T) {
	srv := temporaltest.Start(t)
	useTemporal(t, srv)

	// No worker yet: planner start says so instead of waiting forever for the update.
	var out0, err0 bytes.Buffer
	code0 := run(context.Background(), []string{"start", "-f", "testdata/threshold-noop.yaml", "--deployment", "prod/early",
		"--wait-for-worker", "1s"}, &out0, &err0)
	require.Equal(t, 1, code0, out0.String())
	require.Contains(t, err0.String(), `no worker polls task queue "planner" (waited 1s)`)

	metricsAddr := freeAddr(t)
	runWorkerInProcess(t, "--metrics-address", metricsAddr, "--observations", "testdata/kv-script.json",
		"--noop-journal-dir", t.TempDir(), "--log-level", "warn")

	start := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"start"}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, errOut := start("-f", "testdata/threshold-noop.yaml", "--deployment", "prod/llama", "--initial-decode", "1")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "started planner/prod/llama")
	require.NotContains(t, errOut, "lacks the search attributes", "the dev server has them registered")

	// Idempotent: a second start updates the running planner.
	code, out, errOut = start("-f", "testdata/threshold-noop.yaml", "--deployment", "prod/llama")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "planner/prod/llama is running")
	require.Contains(t, out, "configuration updated; it applies from the next tick")
	// A change of mode is refused and changes nothing.
	code, _, errOut = start("-f", `{"mode": "disagg", "environment": "noop", "optimization_target": "throughput"}`, "--deployment", "prod/llama")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "mode cannot change on a running planner (decode -> disagg)")
	// A kubernetes planner needs a worker hosting its deployment: it starts on its host task
	// queue and says nobody polls it yet.
	code, out, errOut = start("-f", `{"mode": "decode", "environment": "kubernetes", "enable_throughput_scaling": false, "optimization_target": "throughput"}`, "--deployment", "prod/k8s")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "hosted: observe and apply on task queue planner-host/prod/k8s")
	require.Contains(t, errOut, "no worker polls planner-host/prod/k8s yet")
	code, _, errOut = start("-f", "testdata/threshold-noop.yaml", "--deployment", "prod/none", "--host-task-queue", "none")
	require.Equal(t, 0, code, errOut)
	code, _, errOut = start("-f", "testdata/threshold-noop.yaml", "--deployment", "prod")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `--deployment "prod": want <namespace>/<name>`)

	id := "planner/prod/llama"
	state := func() workflows.StateView {
		out, err := temporalCLI(t, srv, "workflow", "query", "--workflow-id", id, "--name", "state", "-o", "json")
		require.NoError(t, err, out)
		var resp struct {
			QueryResult []workflows.StateView `json:"queryResult"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &resp), out)
		require.Len(t, resp.QueryResult, 1)
		return resp.QueryResult[0]
	}
	eventually(t, "the first decision", func() bool { return len(state().Decisions) > 0 })
	s := state()
	require.Equal(t, "decode=2", s.Decisions[0].Targets.String())
	require.Equal(t, workflows.StatusRecorded, s.Decisions[0].Status)
	require.True(t, s.Advisory)

	// Listing by search attribute.
	out, err := temporalCLI(t, srv, "workflow", "list", "--query", "PlannerDeployment='prod/llama' AND ExecutionStatus='Running'")
	require.NoError(t, err, out)
	require.Contains(t, out, id)

	// Overrides with updates: refused ones say why and change nothing.
	out, err = temporalCLI(t, srv, "workflow", "update", "execute", "--workflow-id", id, "--name", "set_replicas",
		"--input", `{"component": "decode", "replicas": 12}`)
	require.Error(t, err)
	require.Contains(t, out, "12 decode replicas would use 12 GPUs in all, over the budget of 8 (set force to override)")
	out, err = temporalCLI(t, srv, "workflow", "update", "execute", "--workflow-id", id, "--name", "set_replicas",
		"--input", `{"component": "decode", "replica": 2}`)
	require.Error(t, err)
	require.Contains(t, out, `unknown field \"replica\"`)
	out, err = temporalCLI(t, srv, "workflow", "update", "execute", "--workflow-id", id, "--name", "set_replicas",
		"--input", `{"component": "decode", "replicas": 3, "ttl_seconds": 600, "reason": "runbook test"}`)
	require.NoError(t, err, out)
	require.Contains(t, out, "decode pinned to 3 replicas for 10m")
	out, err = temporalCLI(t, srv, "workflow", "update", "execute", "--workflow-id", id, "--name", "pause", "--input", `{"direction": "down"}`)
	require.NoError(t, err, out)
	require.Contains(t, out, "scale-down paused, scale-up active")

	// Signals (tctl's spelling is the same call): an invalid one is recorded as rejected.
	out, err = temporalCLI(t, srv, "workflow", "signal", "--workflow-id", id, "--name", "pause", "--input", `{"direction": "sideways"}`)
	require.NoError(t, err, out)
	out, err = temporalCLI(t, srv, "workflow", "signal", "--workflow-id", id, "--name", "resume", "--input", `{}`)
	require.NoError(t, err, out)
	eventually(t, "the rejected signal in state", func() bool { return len(state().Rejected) == 1 })
	s = state()
	require.Equal(t, `direction must be up, down or both, got "sideways"`, s.Rejected[0].Error)
	require.False(t, s.Overrides.PauseScaleDown, "the valid resume signal was applied")
	require.Equal(t, 3, s.Overrides.Decode.Replicas)
	out, err = temporalCLI(t, srv, "workflow", "update", "execute", "--workflow-id", id, "--name", "clear_override", "--input", `{"component": "all"}`)
	require.NoError(t, err, out)
	require.Contains(t, out, "cleared 1 override(s)")

	// The worker's /metrics and /healthz.
	get := func(path string) string {
		resp, err := http.Get("http://" + metricsAddr + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}
	require.Equal(t, "ok\n", get("/healthz"))
	// The planner's series are refreshed from its state asynchronously (at its ticks and on
	// a timer): wait for the load loop's decision to show rather than read once.
	scaleUp := regexp.MustCompile(`dynamo_planner_load_scaling_decision\{[^}]*dynamo_planner_load_scaling_decision="scale_up"[^}]*\} 1`)
	var metrics string
	eventually(t, "the load loop's scale_up decision in /metrics", func() bool {
		metrics = get("/metrics")
		return scaleUp.MatchString(metrics)
	})
	require.Regexp(t, `dynamo_planner_num_decode_replicas\{[^}]*deployment="planner/prod/llama"[^}]*\} 1`, metrics)
	require.Contains(t, metrics, "temporal_workflow_task_execution_latency_seconds_bucket")
	require.Contains(t, metrics, `temporal_activity_execution_latency_seconds_count{activity_type="Apply"`)

	// The virtual protocol through plannerclient, as an external orchestrator would.
	code, _, errOut = start("-f", "testdata/threshold-virtual.yaml", "--deployment", "prod/virt", "--initial-decode", "1", "--ack-timeout", "10m")
	require.Equal(t, 0, code, errOut)
	pc := plannerclient.New(srv.Client(), workflows.Deployment{Namespace: "prod", Name: "virt"})
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	d, err := pc.Wait(wctx, virtual.Unset)
	require.NoError(t, err)
	require.Equal(t, virtual.Decision{DecisionID: 0, NumPrefill: virtual.Unset, NumDecode: 2}, d)
	got, err := pc.Get(wctx)
	require.NoError(t, err)
	require.Equal(t, d, got)
	err = pc.Complete(wctx, 5, nil, nil)
	require.ErrorContains(t, err, "decision 5")
	two := 2
	require.NoError(t, pc.Complete(wctx, 0, nil, &two))
	d, err = pc.Wait(wctx, 0)
	require.NoError(t, err)
	require.Equal(t, virtual.Decision{DecisionID: 1, NumPrefill: virtual.Unset, NumDecode: 3}, d, "the next decision starts from the acknowledged 2")
	vs, err := pc.State(wctx)
	require.NoError(t, err)
	require.Equal(t, int64(0), *vs.Virtual.ScaledDecisionID)

	// A cancelled planner ends.
	out, err = temporalCLI(t, srv, "workflow", "cancel", "--workflow-id", "planner/prod/virt")
	require.NoError(t, err, out)
	eventually(t, "the virtual planner to end", func() bool {
		out, _ := temporalCLI(t, srv, "workflow", "describe", "--workflow-id", "planner/prod/virt", "-o", "json")
		return strings.Contains(out, "WORKFLOW_EXECUTION_STATUS_CANCELED")
	})
}
