package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/llmplanner/planner/connectors/kubernetes"
	"github.com/llmplanner/planner/internal/kubetest"
	"github.com/llmplanner/planner/internal/temporaltest"
	"github.com/llmplanner/planner/predict"
	"github.com/llmplanner/planner/scaling"
	"github.com/llmplanner/planner/sim/engine"
	"github.com/llmplanner/planner/sim/frontend"
	"github.com/llmplanner/planner/sim/loadgen"
	"github.com/llmplanner/planner/sim/operator"
	"github.com/llmplanner/planner/workflows"
)

// e2eDGD is the DynamoGraphDeployment of the end-to-end test: prefill behind a scaling
// adapter, decode scaled through the DGD itself.
const e2eDGD = `
apiVersion: nvidia.com/v1beta1
kind: DynamoGraphDeployment
metadata:
  name: llama
spec:
  components:
    - name: Frontend
      type: frontend
      replicas: 1
    - name: VllmPrefillWorker
      type: prefill
      replicas: 1
      scalingAdapter: {}
    - name: VllmDecodeWorker
      type: decode
      replicas: 1
`

// TestKubernetesEndToEnd runs the whole loop against a real kube-apiserver: simulated engines
// (reconciled from the DGD by the simulated operator, mirrored as pods) serve a load step
// through the frontend; the worker hosts the deployment from a deployments file (Kubernetes
// connector with the planner's least-privilege Role, frontend metrics scraped, FPMs from the
// ready pods' fpm ports); the planner workflow on the dev server scales the prefill adapter
// up under the load and back down after it, and the operator starts and drains engines.
func TestKubernetesEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end on a real API server: skipped with -short")
	}
	bin, err := buildPlanner()
	require.NoError(t, err)
	cluster := kubetest.Start(t)
	srv := temporaltest.Start(t)
	useTemporal(t, srv)
	const ns, model = "dynamo", "nvidia/Llama-3.1-8B-Instruct-FP8"
	cluster.Namespace(t, ns)
	dir := t.TempDir()
	logger := slog.New(slog.NewTextHandler(&testLogWriter{t: t}, &slog.HandlerOptions{Level: slog.LevelWarn}))

	// The frontend, in this process.
	fe, err := frontend.New(frontend.Options{Model: model, Namespace: ns, Mode: frontend.Disaggregated, Logger: logger})
	require.NoError(t, err)
	feSrv := httptest.NewServer(fe)
	t.Cleanup(feSrv.Close)

	// The simulated operator: engine processes with a 3 s start-up, pods, status.
	profileDir := filepath.Join(dir, "profile")
	require.NoError(t, writeEmbedded("demodata/profile", profileDir))
	limits := scaling.EngineCapabilities{MaxNumBatchedTokens: engine.DefaultMaxNumBatchedTokens, MaxNumSeqs: engine.DefaultMaxNumSeqs,
		MaxKVTokens: 945029 / engine.DefaultBlockSize * engine.DefaultBlockSize, ContextLength: 16384}
	op, err := operator.New(operator.Options{Config: cluster.Admin, Namespace: ns, Logger: logger, Model: model, Limits: limits, Engines: &operator.EngineOptions{
		StateDir: filepath.Join(dir, "engines"), GPUs: 8, ReadyURL: "http://127.0.0.1:{http_port}/healthz", DrainTimeout: 20 * time.Second,
		Command: func(role scaling.Component) []string {
			return []string{bin, "engine", "--role", string(role), "--name", "{name}", "--listen", "127.0.0.1:{http_port}",
				"--fpm-endpoint", "tcp://127.0.0.1:{fpm_port}", "--frontend", feSrv.URL, "--profile", profileDir, "--startup-delay", "3s"}
		}}})
	require.NoError(t, err)
	opCtx, stopOp := context.WithCancel(context.Background())
	opDone := make(chan struct{})
	go func() { defer close(opDone); _ = op.Run(opCtx) }()
	t.Cleanup(func() {
		stopOp()
		<-opDone
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, op.Stop(sctx), "the simulated engines stop")
	})

	// The DGD, and a timeline of its writes and status seen through watches.
	dyn := cluster.Dynamic(t)
	tl := watchTimeline(t, dyn, ns)
	require.NoError(t, cluster.Apply(t, ns, kubetest.Objects(t, []byte(e2eDGD)), false))

	// The planner's identity: the service account of deploy/base, bound to its Role.
	require.NoError(t, cluster.Apply(t, ns, kubetest.Objects(t, []byte(readFile(t, filepath.Join(cluster.Root, "deploy", "base", "rbac.yaml")))), false))
	_, saKubeconfig := cluster.ServiceAccount(t, ns, "planner")

	cfg := filepath.Join(dir, "planner.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`
mode: disagg
environment: kubernetes
namespace: %s
model_name: %s
optimization_target: sla
ttft_ms: 300
itl_ms: 50
enable_load_scaling: true
load_adjustment_interval: 2
enable_throughput_scaling: false
max_gpu_budget: 6
min_endpoint: 1
profile_results_dir: %s
`, ns, model, profileDir)), 0o644))
	deployments := filepath.Join(dir, "deployments.yaml")
	require.NoError(t, os.WriteFile(deployments, []byte(fmt.Sprintf(`
deployments:
  - deployment: %s/llama
    planner_config: planner.yaml
    connector:
      kind: kubernetes
      kubernetes:
        kubeconfig: %s
    traffic:
      scrape:
        url: %s/metrics
        interval: 500ms
    fpm:
      discovery: connector
`, ns, saKubeconfig, feSrv.URL)), 0o644))

	// Wait for the initial engines, then run the worker.
	waitFor(t, 90*time.Second, "the initial engines are ready", func() bool { return tl.readyPrefill() == 1 && tl.readyDecode() == 1 })
	logs := runWorkerInProcess(t, "--deployments", deployments, "--metrics-address", "", "--log-level", "info")
	id := workflows.Deployment{Namespace: ns, Name: "llama"}.WorkflowID()
	waitFor(t, 30*time.Second, "the worker starts the planner", func() bool { return strings.Contains(logs.String(), "planner started") })

	// The load step.
	trace := filepath.Join(dir, "step.jsonl")
	writeStepTrace(t, trace, [][2]float64{{6, 4}, {24, 70}, {10, 3}})
	reqs, err := predict.ReadTrace(trace)
	require.NoError(t, err)
	sum, err := loadgen.Run(context.Background(), reqs, loadgen.Options{URL: feSrv.URL, Speedup: 1})
	require.NoError(t, err)
	t.Logf("load: %d sent, %d succeeded, %d failed in %s", sum.Sent, sum.Succeeded, sum.Failed, sum.Wall.Round(time.Second))
	require.Zero(t, sum.Failed, "every request is served while engines come and go")
	if tl.maxAdapter() < 2 {
		out, _ := temporalCLI(t, srv, "workflow", "query", "--workflow-id", id, "--name", workflows.QueryDiagnostics, "-o", "json")
		t.Logf("diagnostics:\n%s", out)
	}
	require.GreaterOrEqual(t, tl.maxAdapter(), int64(2), "the load step scaled the prefill adapter up")

	// After the load, back down to one prefill engine.
	waitFor(t, 120*time.Second, "prefill back at one ready engine after the load", func() bool {
		return tl.adapter() == 1 && tl.readyPrefill() == 1
	})
	// The workflow marks the decision done on its next tick, when it reads the ready count.
	var st workflows.StateView
	up, down := 0, 0
	waitFor(t, 30*time.Second, "the decision back to one prefill is done in the planner's state", func() bool {
		st = queryState(t, srv, id)
		up, down = 0, 0
		for _, d := range st.Decisions {
			if d.Targets.Prefill == nil {
				continue
			}
			if *d.Targets.Prefill > 1 {
				up++
			}
			if d.Status == workflows.StatusDone && *d.Targets.Prefill == 1 {
				down++
			}
		}
		return down > 0
	})
	require.Positive(t, up, "decisions to scale prefill up are in the workflow's state")
	require.Positive(t, down, "a decision back to one prefill is done")
	t.Logf("timeline (decision → patch → ready), seconds from the first decision:\n%s", tl.report(st.Decisions))
	dgd, err := dyn.Resource(kubernetes.DGDResource).Namespace(ns).Get(context.Background(), "llama", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, dgd.GetAnnotations()[kubernetes.AnnotationDecisionID], "the newest decision id is recorded on the DGD")
}

// testLogWriter sends log lines to the test log.
type testLogWriter struct{ t *testing.T }

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting until %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// timeline records, from watches, when the prefill adapter's count and the DGD's status
// changed.
type timeline struct {
	mu     sync.Mutex
	events []timelineEvent
	adapt  int64
	maxA   int64
	readyP int64
	readyD int64
}

type timelineEvent struct {
	at    time.Time
	what  string
	count int64
}

func watchTimeline(t *testing.T, dyn dynamic.Interface, ns string) *timeline {
	tl := &timeline{adapt: 1}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	watchRes := func(what string, res dynamic.ResourceInterface, on func(u *unstructured.Unstructured)) {
		w, err := res.Watch(ctx, metav1.ListOptions{})
		require.NoError(t, err, "watch %s", what)
		go func() {
			for ev := range w.ResultChan() {
				if ev.Type != watch.Added && ev.Type != watch.Modified {
					continue
				}
				if u, ok := ev.Object.(*unstructured.Unstructured); ok {
					on(u)
				}
			}
		}()
	}
	watchRes("adapters", dyn.Resource(kubernetes.AdapterResource).Namespace(ns), func(u *unstructured.Unstructured) {
		if u.GetName() != kubernetes.AdapterName("llama", "VllmPrefillWorker") {
			return
		}
		n, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
		tl.mu.Lock()
		defer tl.mu.Unlock()
		if n != tl.adapt {
			tl.events = append(tl.events, timelineEvent{time.Now(), "patch", n})
		}
		tl.adapt, tl.maxA = n, max(tl.maxA, n)
	})
	watchRes("DGDs", dyn.Resource(kubernetes.DGDResource).Namespace(ns), func(u *unstructured.Unstructured) {
		p, _, _ := unstructured.NestedInt64(u.Object, "status", "components", "VllmPrefillWorker", "readyReplicas")
		d, _, _ := unstructured.NestedInt64(u.Object, "status", "components", "VllmDecodeWorker", "readyReplicas")
		tl.mu.Lock()
		defer tl.mu.Unlock()
		if p != tl.readyP {
			tl.events = append(tl.events, timelineEvent{time.Now(), "ready", p})
		}
		tl.readyP, tl.readyD = p, d
	})
	return tl
}

func (tl *timeline) adapter() int64      { tl.mu.Lock(); defer tl.mu.Unlock(); return tl.adapt }
func (tl *timeline) maxAdapter() int64   { tl.mu.Lock(); defer tl.mu.Unlock(); return tl.maxA }
func (tl *timeline) readyPrefill() int64 { tl.mu.Lock(); defer tl.mu.Unlock(); return tl.readyP }
func (tl *timeline) readyDecode() int64  { tl.mu.Lock(); defer tl.mu.Unlock(); return tl.readyD }

// report lists the prefill decisions and the patches and readiness changes, relative to the
// first prefill decision.
func (tl *timeline) report(decisions []workflows.DecisionRecord) string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	type line struct {
		at   float64
		text string
	}
	var lines []line
	var t0 float64
	for _, d := range decisions {
		if d.Targets.Prefill == nil {
			continue
		}
		if t0 == 0 {
			t0 = d.At
		}
		lines = append(lines, line{d.At, fmt.Sprintf("decision %d: prefill → %d (%s)", d.ID, *d.Targets.Prefill, d.Status)})
	}
	for _, e := range tl.events {
		at := float64(e.at.UnixNano()) / 1e9
		if t0 == 0 || at < t0-1 {
			continue
		}
		if e.what == "patch" {
			lines = append(lines, line{at, fmt.Sprintf("  adapter spec.replicas = %d", e.count)})
		} else {
			lines = append(lines, line{at, fmt.Sprintf("  status readyReplicas = %d", e.count)})
		}
	}
	for i := 1; i < len(lines); i++ {
		for j := i; j > 0 && lines[j].at < lines[j-1].at; j-- {
			lines[j], lines[j-1] = lines[j-1], lines[j]
		}
	}
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "  %+7.2f s  %s\n", l.at-t0, l.text)
	}
	return b.String()
}

// queryState reads a planner's state with the temporal CLI.
func queryState(t *testing.T, srv *temporaltest.Server, id string) workflows.StateView {
	t.Helper()
	out, err := temporalCLI(t, srv, "workflow", "query", "--workflow-id", id, "--name", workflows.QueryState, "-o", "json")
	require.NoError(t, err, out)
	var resp struct {
		QueryResult []workflows.StateView `json:"queryResult"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &resp), out)
	require.Len(t, resp.QueryResult, 1)
	return resp.QueryResult[0]
}
