package replaytests

import (
	"bytes"
	"compress/gzip"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/llmplanner/planner/activities"
	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/connectors/local"
	"github.com/llmplanner/planner/connectors/virtual"
	"github.com/llmplanner/planner/internal/scripted"
	"github.com/llmplanner/planner/internal/temporaltest"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/plannerclient"
	"github.com/llmplanner/planner/scaling"
	"github.com/llmplanner/planner/worker"
	"github.com/llmplanner/planner/workflows"
)

var capture = flag.Bool("capture", false, "re-record the histories of the current logic version and history generation under testdata/ on a fresh dev server")

// scenarios are the recorded runs each logic version must have.
var scenarios = []string{"overrides", "continue-as-new", "virtual", "ahead", "sla-disagg", "hosted"}

// captureScript: decode engines at 110% KV with 40 req/s of traffic for 4 ticks, then at 20%
// with 2 req/s.
func captureScript() *scripted.Script {
	caps := &scaling.WorkerCapabilities{Decode: &scaling.EngineCapabilities{NumGPU: 1, MaxKVTokens: 100000}}
	return &scripted.Script{Entries: []scripted.ScriptEntry{
		{FromTick: 0, Capabilities: caps, DecodeEngine: &perf.FPM{WallTime: 0.01, Scheduled: perf.ScheduledRequests{NumDecodeRequests: 40, SumDecodeKVTokens: 110000}},
			Traffic: &scripted.ScriptTraffic{RequestsPerSecond: 40, ISL: 3000, OSL: 300, TTFTMs: ptr(90.0), ITLMs: ptr(9.0)}},
		{FromTick: 5, Capabilities: caps, DecodeEngine: &perf.FPM{WallTime: 0.01, Scheduled: perf.ScheduledRequests{NumDecodeRequests: 5, SumDecodeKVTokens: 20000}},
			Traffic: &scripted.ScriptTraffic{RequestsPerSecond: 2, ISL: 3000, OSL: 300, TTFTMs: ptr(70.0), ITLMs: ptr(6.0)}},
	}}
}

// aheadCaptureConfig is the capture config running this planner's own policy (decode pool,
// perf model from the engine simulator's test profile).
func aheadCaptureConfig() config.Config {
	c := captureConfig(config.EnvNoop)
	c.OptimizationTarget, c.ScalingPolicy, c.ExpectedStartupSeconds = config.TargetSLA, config.PolicyAhead, 2
	c.TTFTMs, c.ITLMs, c.ProfileResultsDir = 200, 10, filepath.Join("..", "sim", "engine", "testdata")
	return c
}

func captureConfig(env config.Environment) config.Config {
	c := config.Default()
	c.Mode, c.Environment, c.OptimizationTarget, c.MaxGPUBudget = config.ModeDecode, env, config.TargetThroughput, 8
	c.LoadAdjustmentIntervalSeconds = 1
	return c
}

// TestCaptureHistories records one history per scenario (make capture-histories). It runs
// only with -capture: it rewrites testdata.
func TestCaptureHistories(t *testing.T) {
	if !*capture {
		t.Skip("records histories; run make capture-histories")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const queue = "capture"
	serve := func(srv *temporaltest.Server) client.Client {
		w := sdkworker.New(srv.Client(), queue, sdkworker.Options{Interceptors: workflows.Interceptors()})
		worker.Register(w, &activities.Activities{Unhosted: byDeployment{"sla-disagg": slaDisaggScript()}, NoopJournalDir: t.TempDir()})
		require.NoError(t, w.Start())
		t.Cleanup(w.Stop)
		return srv.Client()
	}
	srv := temporaltest.Start(t)
	c := serve(srv)
	// A second server suggests Continue-As-New after 120 events, so the continue-as-new
	// scenario crosses runs the way a long-lived planner does (Temporal's default is 4,096).
	canSrv := temporaltest.Start(t, "--dynamic-config-value", "limit.historyCount.suggestContinueAsNew=120")
	canClient := serve(canSrv)

	old, _ := filepath.Glob("testdata/" + fixtureBase() + "-*.json.gz")
	for _, p := range old {
		require.NoError(t, os.Remove(p))
	}
	startWith := func(c client.Client, name string, cfg config.Config) (*plannerclient.Client, string) {
		d := workflows.Deployment{Namespace: "capture", Name: name}
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: d.WorkflowID(), TaskQueue: queue}, workflows.WorkflowName,
			workflows.Input{Deployment: d, Config: cfg, InitialDecode: 1})
		require.NoError(t, err)
		return plannerclient.New(c, d), run.GetRunID()
	}
	start := func(c client.Client, name string, env config.Environment) (*plannerclient.Client, string) {
		return startWith(c, name, captureConfig(env))
	}
	waitFor := func(pc *plannerclient.Client, what string, cond func(workflows.StateView) bool) {
		for {
			s, err := pc.State(ctx)
			if err == nil && cond(s) {
				return
			}
			require.NoError(t, ctx.Err(), "waiting for %s", what)
			time.Sleep(200 * time.Millisecond)
		}
	}
	save := func(srv *temporaltest.Server, pc *plannerclient.Client, runID, name string) {
		out, err := srv.Cmd(ctx, "workflow", "show", "--workflow-id", pc.WorkflowID(), "--run-id", runID, "-o", "json").Output()
		require.NoError(t, err)
		var buf bytes.Buffer
		gz := gzip.NewWriter(&buf)
		_, err = gz.Write(out)
		require.NoError(t, err)
		require.NoError(t, gz.Close())
		path := fmt.Sprintf("testdata/%s-%s.json.gz", fixtureBase(), name)
		require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
		t.Logf("recorded %s (%d bytes of JSON, %d gzipped)", path, len(out), buf.Len())
	}
	terminate := func(c client.Client, pc *plannerclient.Client) {
		require.NoError(t, c.TerminateWorkflow(ctx, pc.WorkflowID(), "", "history recorded"))
	}
	update := func(pc *plannerclient.Client, name string, arg any) {
		_, err := pc.Update(ctx, name, arg)
		require.NoError(t, err, name)
	}
	signal := func(pc *plannerclient.Client, name string, arg any) {
		require.NoError(t, c.SignalWorkflow(ctx, pc.WorkflowID(), "", name, arg))
	}

	// overrides: every update and signal an operator uses, valid and invalid.
	pc, runID := start(c, "overrides", config.EnvNoop)
	waitFor(pc, "the first tick", func(s workflows.StateView) bool { return s.Ticks >= 1 })
	update(pc, workflows.UpdateSetReplicas, workflows.SetReplicasRequest{Component: "decode", Replicas: 3, TTLSeconds: 3, Reason: "capture"})
	_, err := pc.Update(ctx, workflows.UpdateSetReplicas, workflows.SetReplicasRequest{Component: "decode", Replicas: 99})
	require.Error(t, err, "refused by the validator, so not in history")
	signal(pc, workflows.UpdatePause, workflows.DirectionRequest{Direction: "down", Reason: "capture"})
	signal(pc, workflows.UpdatePause, workflows.DirectionRequest{Direction: "sideways"})
	signal(pc, "pasue", workflows.DirectionRequest{}) // an unknown name: recorded as rejected
	update(pc, workflows.UpdateSetSLA, workflows.SetSLARequest{TTFTMs: ptr(300.0)})
	update(pc, workflows.UpdateSetLimits, workflows.SetLimitsRequest{MaxGPUBudget: ptr(6)})
	cfg := captureConfig(config.EnvNoop)
	cfg.MaxGPUBudget = 6
	update(pc, workflows.UpdateConfig, workflows.ConfigRequest{Config: cfg})
	waitFor(pc, "the override to expire", func(s workflows.StateView) bool { return s.Overrides.Decode == nil && s.Ticks >= 5 })
	update(pc, workflows.UpdateSetReplicas, workflows.SetReplicasRequest{Component: "decode", Replicas: 0, Force: true})
	update(pc, workflows.UpdateClearOverride, workflows.ClearOverrideRequest{})
	signal(pc, workflows.UpdateResume, workflows.DirectionRequest{})
	waitFor(pc, "two more ticks", func(s workflows.StateView) bool { return s.Ticks >= 8 && !s.Overrides.PauseScaleDown })
	terminate(c, pc)
	save(srv, pc, runID, "overrides")

	// continue-as-new: a run the server asks to continue, and the run that carries its state.
	pc, runID = start(canClient, "can", config.EnvNoop)
	var ticksAtCAN int64
	waitFor(pc, "a Continue-As-New", func(s workflows.StateView) bool { ticksAtCAN = s.Ticks; return s.Runs >= 2 })
	desc, err := canClient.DescribeWorkflowExecution(ctx, pc.WorkflowID(), "")
	require.NoError(t, err)
	second := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	waitFor(pc, "two ticks in the second run", func(s workflows.StateView) bool { return s.Ticks >= ticksAtCAN+2 })
	terminate(canClient, pc)
	save(canSrv, pc, runID, "continue-as-new-run1")
	save(canSrv, pc, second, "continue-as-new-run2")

	// virtual: an orchestrator waiting for, applying and acknowledging decisions.
	pc, runID = start(c, "virtual", config.EnvVirtual)
	after := int64(virtual.Unset)
	for i := 0; i < 3; i++ {
		d, err := pc.Wait(ctx, after)
		require.NoError(t, err)
		require.NoError(t, pc.Complete(ctx, d.DecisionID, nil, ptr(d.NumDecode)))
		after = d.DecisionID
	}
	terminate(c, pc)
	save(srv, pc, runID, "virtual")

	// sla-disagg: Dynamo's SLA policy, disaggregated, 8 prefill and 8 decode engines, both loops.
	{
		d := workflows.Deployment{Namespace: "capture", Name: "sla-disagg"}
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: d.WorkflowID(), TaskQueue: queue}, workflows.WorkflowName,
			workflows.Input{Deployment: d, Config: slaDisaggConfig(), InitialPrefill: 8, InitialDecode: 8})
		require.NoError(t, err)
		pc := plannerclient.New(c, d)
		waitFor(pc, "throughput and load ticks", func(s workflows.StateView) bool { return s.Ticks >= 12 })
		terminate(c, pc)
		save(srv, pc, run.GetRunID(), "sla-disagg")
	}

	// hosted: a local deployment whose connector lives on its host worker's task queue; an
	// override makes the host start a worker process.
	{
		d := workflows.Deployment{Namespace: "capture", Name: "hosted"}
		conn, err := local.Open(local.Config{Namespace: "capture-hosted", StateFile: filepath.Join(t.TempDir(), "state.json"), GPUs: []int{0, 1},
			Decode: local.ComponentConfig{Command: []string{"sleep", "600"}}}, connectors.Targets{Decode: ptr(1)})
		require.NoError(t, err)
		defer func() { _ = conn.StopAll(ctx); _ = conn.Close() }()
		acts := &activities.Activities{}
		acts.Host(d, activities.Hosted{Connector: conn})
		hw := sdkworker.New(c, workflows.HostTaskQueue(d), sdkworker.Options{DisableWorkflowWorker: true})
		acts.Register(hw)
		require.NoError(t, hw.Start())
		defer hw.Stop()
		cfg := captureConfig(config.EnvLocal)
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: d.WorkflowID(), TaskQueue: queue}, workflows.WorkflowName,
			workflows.Input{Deployment: d, Config: cfg, InitialDecode: 1, HostTaskQueue: workflows.HostTaskQueue(d)})
		require.NoError(t, err)
		pc := plannerclient.New(c, d)
		waitFor(pc, "a tick", func(s workflows.StateView) bool { return s.Ticks >= 2 })
		update(pc, workflows.UpdateSetReplicas, workflows.SetReplicasRequest{Component: "decode", Replicas: 2, Reason: "capture"})
		waitFor(pc, "the host to run 2", func(s workflows.StateView) bool {
			return s.Inventory != nil && s.Inventory.ReadyDecode != nil && *s.Inventory.ReadyDecode == 2 && s.Ticks >= 5
		})
		terminate(c, pc)
		save(srv, pc, run.GetRunID(), "hosted")
	}

	// ahead: this planner's own policy through a surge and a lull, deciding in both.
	pc, runID = startWith(c, "ahead", aheadCaptureConfig())
	waitFor(pc, "decisions in the surge and the lull", func(s workflows.StateView) bool { return s.Ticks >= 16 && len(s.Decisions) >= 2 })
	terminate(c, pc)
	save(srv, pc, runID, "ahead")
}

func ptr[T any](v T) *T { return &v }

// byDeployment observes each deployment with its own script (captureScript for the others).
type byDeployment map[string]*scripted.Script

func (b byDeployment) script(d workflows.Deployment) *scripted.Script {
	if s, ok := b[d.Name]; ok {
		return s
	}
	return captureScript()
}

func (b byDeployment) ObserveTraffic(ctx context.Context, req workflows.ObserveRequest) (*scaling.TrafficObservation, error) {
	return b.script(req.Deployment).ObserveTraffic(ctx, req)
}

func (b byDeployment) ObserveFPM(ctx context.Context, req workflows.ObserveRequest) (workflows.FPMResult, error) {
	return b.script(req.Deployment).ObserveFPM(ctx, req)
}
