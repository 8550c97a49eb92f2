package worker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"

	"github.com/llmplanner/planner/internal/promtest"
	"github.com/llmplanner/planner/internal/temporaltest"
	"github.com/llmplanner/planner/workflows"
)

// otlpReceiver is an OTLP/gRPC trace receiver on loopback: the collector's trace service,
// keeping every span it is sent.
type otlpReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	Endpoint string

	mu       sync.Mutex
	spans    []*tracepb.Span
	services map[string]bool
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r := &otlpReceiver{Endpoint: "http://" + ln.Addr().String(), services: map[string]bool{}}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, r)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return r
}

// Export implements the collector's trace service.
func (r *otlpReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				r.services[a.GetValue().GetStringValue()] = true
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			r.spans = append(r.spans, ss.GetSpans()...)
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (r *otlpReceiver) snapshot() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

func attr(s *tracepb.Span, key string) string {
	for _, a := range s.GetAttributes() {
		if a.GetKey() == key {
			return a.GetValue().GetStringValue()
		}
	}
	return ""
}

// tickTrace is one tick's trace as the receiver holds it.
type tickTrace struct {
	tick, startObserve, runObserve, query, http, decide *tracepb.Span
}

// completeTickTrace finds a tick whose trace has the whole tree: the tick (a root) parents the
// observe activity's start, which parents its run, which parents a Prometheus query, which
// parents its HTTP call; the decision is the tick's child too.
func completeTickTrace(spans []*tracepb.Span) (tickTrace, bool) {
	child := func(parent *tracepb.Span, name string) *tracepb.Span {
		if parent == nil {
			return nil
		}
		for _, s := range spans {
			if s.GetName() == name && string(s.GetParentSpanId()) == string(parent.GetSpanId()) &&
				string(s.GetTraceId()) == string(parent.GetTraceId()) {
				return s
			}
		}
		return nil
	}
	for _, s := range spans {
		if s.GetName() != workflows.SpanTick+":"+workflows.WorkflowName || len(s.GetParentSpanId()) != 0 {
			continue
		}
		tt := tickTrace{tick: s}
		tt.startObserve = child(s, "StartActivity:"+workflows.ActivityObserve)
		tt.runObserve = child(tt.startObserve, "RunActivity:"+workflows.ActivityObserve)
		tt.query = child(tt.runObserve, "prometheus query")
		tt.http = child(tt.query, "prometheus POST")
		tt.decide = child(s, workflows.SpanDecide+":"+workflows.WorkflowName)
		if tt.http != nil && tt.decide != nil {
			return tt, true
		}
	}
	return tickTrace{}, false
}

// TestHostedPlannerTracedAndSearchable runs `planner worker`'s code (Run) on a real dev server
// with one hosted deployment whose traffic is a real Prometheus, with traces sent over OTLP/gRPC
// to a receiver on loopback: the worker starts the planner itself (the hosted-deployments
// path of StartPlanner), the planner is listed by its PlannerDeployment search attribute, and
// its ticks arrive as traces with the whole tree.
func TestHostedPlannerTracedAndSearchable(t *testing.T) {
	if testing.Short() {
		t.Skip("real Temporal dev server and Prometheus: skipped with -short")
	}
	srv := temporaltest.Start(t)
	prom := promtest.Start(t)
	recv := startOTLPReceiver(t)

	clearTemporalEnv(t)
	t.Setenv("TEMPORAL_ADDRESS", srv.HostPort)
	t.Setenv("TEMPORAL_NAMESPACE", "default")
	for k, v := range map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": recv.Endpoint,
		"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
		"OTEL_SERVICE_NAME":           "planner-trace-test",
		"OTEL_BSP_SCHEDULE_DELAY":     "100", // milliseconds: spans reach the receiver soon
		"OTEL_TRACES_SAMPLER":         "always_on",
	} {
		t.Setenv(k, v)
	}

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "planner.yaml"), []byte(
		"mode: decode\nenvironment: noop\noptimization_target: throughput\nload_adjustment_interval: 2\nmax_gpu_budget: 8\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "deployments.yaml"), []byte(fmt.Sprintf(`
deployments:
  - deployment: traced/llama
    planner_config: planner.yaml
    connector: {kind: noop}
    traffic:
      model: llama
      dynamo_namespace: traced
      prometheus: {url: %q}
`, prom.URL)), 0o644))
	df, err := LoadDeployments(filepath.Join(dir, "deployments.yaml"), os.LookupEnv)
	require.NoError(t, err)
	hosts, err := OpenHosts(context.Background(), df, HostOptions{Logger: quietLogger()})
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, h := range hosts {
			_ = h.Close()
		}
	})

	queue := "trace-test"
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		done <- Run(ctx, Options{TaskQueue: queue, Hosts: hosts, StartPlanners: true, Logger: quietLogger(),
			Started: func() { close(started) }})
	}()
	t.Cleanup(func() {
		stop()
		require.NoError(t, <-done)
	})
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("worker stopped: %v", err)
	}

	d := workflows.Deployment{Namespace: "traced", Name: "llama"}
	t.Run("the hosted planner is listed by PlannerDeployment", func(t *testing.T) {
		query := fmt.Sprintf("%s='traced/llama' AND %s='decode'", workflows.SearchAttributeDeployment, workflows.SearchAttributeMode)
		var found []string
		// Visibility is eventually consistent: poll, bounded.
		waitUntil(t, 30*time.Second, "the planner in the visibility store", func() bool {
			resp, err := srv.Client().ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default", Query: query})
			require.NoError(t, err)
			found = found[:0]
			for _, e := range resp.GetExecutions() {
				found = append(found, e.GetExecution().GetWorkflowId())
			}
			return len(found) > 0
		})
		require.Equal(t, []string{d.WorkflowID()}, found)
	})

	t.Run("a tick is a trace", func(t *testing.T) {
		var tt tickTrace
		waitUntil(t, 60*time.Second, "a tick's complete trace at the OTLP receiver", func() bool {
			var ok bool
			tt, ok = completeTickTrace(recv.snapshot())
			return ok
		})
		require.Equal(t, d.WorkflowID(), attr(tt.tick, "temporalWorkflowID"))
		require.Equal(t, "traced/llama", attr(tt.tick, "planner.deployment"))
		require.Equal(t, "scheduled", attr(tt.tick, "planner.tick_kind"))
		require.NotEmpty(t, attr(tt.tick, "planner.tick"))
		require.Len(t, tt.tick.GetLinks(), 1, "the tick links to its workflow run's span")
		require.Equal(t, tracepb.Span_SPAN_KIND_INTERNAL, tt.tick.GetKind())
		require.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, tt.http.GetKind())
		require.Contains(t, attr(tt.query, "db.query.text"), `model="llama",dynamo_namespace="traced"`)
		for _, s := range []*tracepb.Span{tt.startObserve, tt.runObserve, tt.query, tt.http, tt.decide} {
			require.GreaterOrEqual(t, s.GetStartTimeUnixNano(), tt.tick.GetStartTimeUnixNano(), s.GetName())
			require.LessOrEqual(t, s.GetEndTimeUnixNano(), tt.tick.GetEndTimeUnixNano(), s.GetName())
		}
		recv.mu.Lock()
		defer recv.mu.Unlock()
		require.True(t, recv.services["planner-trace-test"], "OTEL_SERVICE_NAME names the service: %v", recv.services)
	})
}

// waitUntil polls cond every 100 ms until it holds, failing the test after timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
