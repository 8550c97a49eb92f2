package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/internal/kubetest"
	"github.com/llmplanner/planner/internal/temporaltest"
	"github.com/llmplanner/planner/scaling"
	"github.com/llmplanner/planner/sim/fpmpub"
	"github.com/llmplanner/planner/sim/operator"
	"github.com/llmplanner/planner/workflows"
)

// TestWorkerHostsEveryKind runs `planner worker --deployments FILE` with one deployment of
// each connector kind, each with a planner_config the worker starts: a DGD on a real
// kube-apiserver (counts from its status), local worker processes (started by the hosted
// supervisor), a virtual deployment observed through a static FPM endpoint, and an advisory
// (noop) one whose frontend metrics are scraped. Each planner must see what its host reads.
func TestWorkerHostsEveryKind(t *testing.T) {
	if testing.Short() {
		t.Skip("real kube-apiserver and Temporal: skipped with -short")
	}
	cluster := kubetest.Start(t)
	srv := temporaltest.Start(t)
	useTemporal(t, srv)
	dir := t.TempDir()

	// Kubernetes: a decode-only DGD with 2 replicas, its status kept by the simulated operator.
	cluster.Namespace(t, "kinds")
	require.NoError(t, cluster.Apply(t, "kinds", kubetest.Objects(t, []byte(`
apiVersion: nvidia.com/v1beta1
kind: DynamoGraphDeployment
metadata: {name: llama}
spec:
  components:
    - {name: Frontend, type: frontend, replicas: 1}
    - {name: VllmDecodeWorker, type: decode, replicas: 2}
`)), false))
	op, err := operator.New(operator.Options{Config: cluster.Admin, Namespace: "kinds", Logger: quietLogger()})
	require.NoError(t, err)
	opCtx, stopOp := context.WithCancel(context.Background())
	opDone := make(chan struct{})
	go func() { defer close(opDone); _ = op.Run(opCtx) }()
	t.Cleanup(func() { stopOp(); <-opDone })

	// Local: the supervisor's worker process.
	fake := filepath.Join(dir, "fakeworker")
	out, err := exec.Command("go", "build", "-o", fake, "../../connectors/local/testdata/fakeworker").CombinedOutput()
	require.NoError(t, err, "%s", out)

	// Virtual: one decode engine publishing FPM heartbeats.
	fpmAddr := "tcp://" + freeAddr(t)
	pub, err := fpmpub.New(fpmAddr, "d0", 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pub.Close() })

	// Noop: a frontend's metrics (7 requests so far, none since).
	frontend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "# TYPE dynamo_frontend_requests_started_total counter")
		fmt.Fprintln(w, `dynamo_frontend_requests_started_total{model="m",dynamo_namespace="adv"} 7`)
	}))
	t.Cleanup(frontend.Close)

	// Threshold planners, but the noop one is an SLA planner: its throughput loop reads traffic.
	profile := filepath.Join(dir, "profile")
	require.NoError(t, writeEmbedded("demodata/profile", profile))
	for env, target := range map[string]string{"kubernetes": "throughput", "local": "throughput", "virtual": "throughput",
		"noop": "sla\nenable_throughput_scaling: true\nthroughput_adjustment_interval: 4\nprofile_results_dir: " + profile} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, env+".yaml"), []byte(fmt.Sprintf(
			"mode: decode\nenvironment: %s\nload_adjustment_interval: 2\nmax_gpu_budget: 8\noptimization_target: %s\n", env, target)), 0o644))
	}
	deployments := filepath.Join(dir, "deployments.yaml")
	require.NoError(t, os.WriteFile(deployments, []byte(fmt.Sprintf(`
deployments:
  - deployment: kinds/llama
    planner_config: kubernetes.yaml
    connector: {kind: kubernetes, kubernetes: {kubeconfig: %q}}
  - deployment: lab/local
    planner_config: local.yaml
    connector:
      kind: local
      local:
        state_file: local/state.json
        gpus: [0, 1]
        drain_timeout: 5s
        decode:
          command: [%q, --name, "{name}", --http-port, "{http_port}", --fpm-port, "{fpm_port}"]
          ready_url: "http://127.0.0.1:{http_port}/healthz"
  - deployment: ext/virtual
    planner_config: virtual.yaml
    connector: {kind: virtual}
    fpm:
      endpoints: [{address: %q, component: decode}]
  - deployment: adv/noop
    planner_config: noop.yaml
    connector: {kind: noop}
    traffic:
      model: m
      dynamo_namespace: adv
      scrape: {url: %q, interval: 500ms}
`, cluster.AdminKubeconfig, fake, fpmAddr, frontend.URL+"/metrics")), 0o644))

	logs := runWorkerInProcess(t, "--deployments", deployments, "--metrics-address", "", "--log-level", "info", "--stop-on-exit")

	state := func(ns, name string) workflows.StateView {
		return queryState(t, srv, workflows.Deployment{Namespace: ns, Name: name}.WorkflowID())
	}
	// Every planner was started by the worker, on its deployment's host task queue.
	waitFor(t, 60*time.Second, "the worker starts four planners", func() bool { return strings.Count(logs.String(), "planner started") == 4 })
	for _, d := range []string{"kinds/llama", "lab/local", "ext/virtual", "adv/noop"} {
		out, err := temporalCLI(t, srv, "workflow", "describe", "--workflow-id", "planner/"+d, "-o", "json")
		require.NoError(t, err, out)
		require.Contains(t, out, "WORKFLOW_EXECUTION_STATUS_RUNNING", d)
	}

	ready := func(v workflows.StateView) int {
		if v.Inventory == nil || v.Inventory.ReadyDecode == nil {
			return -1
		}
		return *v.Inventory.ReadyDecode
	}
	waitFor(t, 60*time.Second, "kubernetes: the DGD's 2 decode replicas", func() bool { return ready(state("kinds", "llama")) == 2 })
	waitFor(t, 60*time.Second, "local: the hosted supervisor's decode worker is ready", func() bool { return ready(state("lab", "local")) == 1 })
	require.FileExists(t, filepath.Join(dir, "local", "state.json"), "the local connector's state file, relative to the deployments file")
	waitFor(t, 60*time.Second, "virtual: the static endpoint's FPMs reach the load loop", func() bool {
		v := state("ext", "virtual")
		return v.LastTick != nil && v.LastTick.Diagnostics != nil && v.LastTick.Diagnostics.RanLoad &&
			v.LastTick.Diagnostics.LoadReasonDecode != scaling.ReasonNoFPMData && v.LastTick.Diagnostics.LoadReason != scaling.ReasonNoFPMData
	})
	var observed *float64
	waitFor(t, 60*time.Second, "noop: the scraped frontend's traffic reaches the throughput loop", func() bool {
		v := state("adv", "noop")
		if v.LastTick != nil && v.LastTick.Diagnostics != nil && v.LastTick.Diagnostics.ObservedNumReq != nil {
			observed = v.LastTick.Diagnostics.ObservedNumReq
		}
		return observed != nil
	})
	require.Zero(t, *observed, "an idle frontend is an observed 0, not a missing value")
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
