package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/llmplanner/planner/activities"
	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/connectors/virtual"
	"github.com/llmplanner/planner/internal/scripted"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/scaling"
	"github.com/llmplanner/planner/workflows"
)

// thresholdConfig is a decode-only planner on the throughput threshold target: scale up
// when an engine's KV utilisation exceeds 100%, down when all are under 60%.
func thresholdConfig(env config.Environment) config.Config {
	c := config.Default()
	c.Mode, c.Environment, c.MaxGPUBudget = config.ModeDecode, env, 8
	c.LoadAdjustmentIntervalSeconds = 5
	return c
}

// kvScript: decode engines at 110% KV until tick 4, then at 20%.
func kvScript() *scripted.Script {
	caps := &scaling.WorkerCapabilities{Decode: &scaling.EngineCapabilities{NumGPU: 1, MaxKVTokens: 100000}}
	return &scripted.Script{Entries: []scripted.ScriptEntry{
		{FromTick: 0, Capabilities: caps, DecodeEngine: &perf.FPM{WallTime: 0.01, Scheduled: perf.ScheduledRequests{NumDecodeRequests: 40, SumDecodeKVTokens: 110000}}},
		{FromTick: 4, Capabilities: caps, DecodeEngine: &perf.FPM{WallTime: 0.01, Scheduled: perf.ScheduledRequests{NumDecodeRequests: 5, SumDecodeKVTokens: 20000}}},
	}}
}

type harness struct {
	t      *testing.T
	env    *testsuite.TestWorkflowEnvironment
	checks []func()
}

func newHarness(t *testing.T, script *scripted.Script) *harness {
	return newHarnessWithJournal(t, script, t.TempDir())
}

// newHarnessWithJournal runs the real activities with the noop connector journaling in dir.
func newHarnessWithJournal(t *testing.T, script *scripted.Script, journalDir string) *harness {
	var suite testsuite.WorkflowTestSuite
	// Warnings and errors go to the test log; the SDK's debug chatter is dropped.
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	env := suite.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: workflows.Interceptors()})
	env.RegisterWorkflowWithOptions(workflows.PlannerWorkflow, workflow.RegisterOptions{Name: workflows.WorkflowName})
	acts := &activities.Activities{NoopJournalDir: journalDir}
	if script != nil {
		acts.Unhosted = script
	}
	acts.Register(env)
	env.SetStartTime(time.Unix(1_700_000_000, 0))
	return &harness{t: t, env: env}
}

// testWriter sends log lines to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (h *harness) state() workflows.StateView {
	h.t.Helper()
	v, err := h.env.QueryWorkflow(workflows.QueryState)
	require.NoError(h.t, err)
	var s workflows.StateView
	require.NoError(h.t, v.Get(&s))
	return s
}

func (h *harness) diagnostics() []workflows.TickRecord {
	h.t.Helper()
	v, err := h.env.QueryWorkflow(workflows.QueryDiagnostics)
	require.NoError(h.t, err)
	var recs []workflows.TickRecord
	require.NoError(h.t, v.Get(&recs))
	return recs
}

// update sends an update; then runs once the workflow accepted and completed it, or
// rejected it (the test environment completes updates asynchronously).
func (h *harness) update(name string, arg any, then func(workflows.Result, error)) {
	h.env.UpdateWorkflow(name, "", &testsuite.TestUpdateCallback{
		OnReject: func(err error) { then(workflows.Result{}, err) },
		OnAccept: func() {},
		OnComplete: func(v any, err error) {
			r, _ := v.(workflows.Result)
			then(r, err)
		},
	}, arg)
}

func (h *harness) at(d time.Duration, f func()) { h.env.RegisterDelayedCallback(f, d) }

// finishedByContinueAsNew asserts the run ended by Continue-As-New (MaxTicksPerRun) and
// returns the input it carries to the next run and that input's payload size in bytes.
func (h *harness) finishedByContinueAsNew() (workflows.Input, int) {
	h.t.Helper()
	require.True(h.t, h.env.IsWorkflowCompleted(), "workflow did not complete: %v", h.env.GetWorkflowError())
	var can *workflow.ContinueAsNewError
	require.True(h.t, errors.As(h.env.GetWorkflowError(), &can), "want Continue-As-New, got %v", h.env.GetWorkflowError())
	var next workflows.Input
	require.NoError(h.t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next), "the Continue-As-New input decodes")
	size := 0
	for _, p := range can.Input.GetPayloads() {
		size += len(p.GetData())
	}
	return next, size
}

// expect sends an update and records a check of its outcome: an error containing wantErr,
// or (wantErr == "") success with a message containing wantMsg. Checks run in verify.
func (h *harness) expect(name string, arg any, wantErr, wantMsg string) {
	answered := false
	h.update(name, arg, func(r workflows.Result, err error) {
		answered = true
		h.checks = append(h.checks, func() {
			if wantErr != "" {
				require.ErrorContains(h.t, err, wantErr, "update %s", name)
				return
			}
			require.NoError(h.t, err, "update %s", name)
			require.Contains(h.t, r.Message, wantMsg, "update %s", name)
		})
	})
	h.checks = append(h.checks, func() { require.True(h.t, answered, "update %s was never answered", name) })
}

// snapshot records the state query at d and a check of it.
func (h *harness) snapshot(d time.Duration, check func(workflows.StateView)) {
	h.at(d, func() {
		s := h.state()
		h.checks = append(h.checks, func() { check(s) })
	})
}

// verify runs the recorded checks.
func (h *harness) verify() {
	h.t.Helper()
	require.NotEmpty(h.t, h.checks)
	for _, c := range h.checks {
		c()
	}
}

func TestVirtualPlannerPublishesAndWaitsForAcknowledgement(t *testing.T) {
	h := newHarness(t, kvScript())
	h.snapshot(7*time.Second, func(s workflows.StateView) {
		// Tick 1 (t=5 s): 110% KV on the single engine -> virtual decision 0: decode 2.
		require.Equal(t, virtual.Decision{DecisionID: 0, NumPrefill: virtual.Unset, NumDecode: 2}, s.Virtual.Decision)
		require.Equal(t, workflows.StatusPublished, s.Decisions[0].Status)
		require.Equal(t, int64(1), s.Decisions[0].ID)
	})
	h.snapshot(11*time.Second, func(s workflows.StateView) {
		// Tick 2 (t=10 s): still unacknowledged: the core sees scaling in progress and holds.
		require.Equal(t, int64(0), s.Virtual.Decision.DecisionID, "no second decision before the acknowledgement")
		require.Equal(t, scaling.Reason("scaling_in_progress"), s.LastTick.Diagnostics.LoadReasonDecode)
		require.Nil(t, s.Virtual.ScaledDecisionID)
	})
	h.at(12*time.Second, func() {
		h.expect(workflows.UpdateAcknowledge, workflows.AcknowledgeRequest{DecisionID: 3}, "decision 3", "")
		h.expect(workflows.UpdateAcknowledge, workflows.AcknowledgeRequest{DecisionID: 0}, "", "decision 0 acknowledged")
	})
	h.snapshot(13*time.Second, func(s workflows.StateView) {
		require.Equal(t, int64(0), *s.Virtual.ScaledDecisionID)
		require.Equal(t, workflows.StatusDone, s.Decisions[0].Status)
	})
	h.snapshot(16*time.Second, func(s workflows.StateView) {
		// After the acknowledgement the deployment runs 2 and the next tick decides on 2 engines.
		require.Equal(t, 2, *s.Inventory.ReadyDecode)
		require.Equal(t, 2, *s.LastTick.Diagnostics.ReadyDecode)
	})
	h.env.ExecuteWorkflow(workflows.WorkflowName, workflows.Input{
		Deployment: workflows.Deployment{Namespace: "ns", Name: "llama"}, Config: thresholdConfig(config.EnvVirtual),
		InitialPrefill: 0, InitialDecode: 1, MaxTicksPerRun: 8,
	})
	h.finishedByContinueAsNew()
	h.verify()
}

func TestOverridesUpdatesAndSignals(t *testing.T) {
	h := newHarness(t, kvScript())
	h.at(3*time.Second, func() {
		// Refused by the validators before they reach history.
		h.expect(workflows.UpdateSetReplicas, workflows.SetReplicasRequest{Component: "decode", Replicas: 0}, "0 decode replicas is below the minimum of 1 (set force to override)", "")
		h.expect(workflows.UpdateSetReplicas, workflows.SetReplicasRequest{Component: "prefill", Replicas: 2}, `component "prefill" is not a pool of mode "decode" (want "decode")`, "")
		h.expect(workflows.UpdateSetReplicas, workflows.SetReplicasRequest{Component: "decode", Replicas: 9}, "9 decode replicas would use 9 GPUs in all, over the budget of 8", "")
		h.expect(workflows.UpdateSetReplicas, workflows.SetReplicasRequest{Component: "decode", Replicas: 2, TTLSeconds: -1}, "ttl_seconds must be within", "")
		// A valid override is applied at once, before the next tick.
		h.expect(workflows.UpdateSetReplicas, workflows.SetReplicasRequest{Component: "decode", Replicas: 3, TTLSeconds: 60, Reason: "load test"}, "", "decode pinned to 3 replicas for 1m")
	})
	h.snapshot(4*time.Second, func(s workflows.StateView) {
		require.Equal(t, "override", s.LastTick.Kind)
		require.Equal(t, 3, *s.LastTick.Applied.Decode)
		require.Len(t, s.Decisions, 1)
		require.Equal(t, "override", s.Decisions[0].Source)
		require.Equal(t, workflows.StatusRecorded, s.Decisions[0].Status, "noop records, applies nothing")
		require.True(t, s.Overrides.Decode.Applied)
		require.Equal(t, "load test", s.Overrides.Decode.Reason)
		require.Empty(t, s.Rejected, "refused updates never reach the workflow")
	})
	h.at(4*time.Second+time.Millisecond, func() {
		// An invalid signal is recorded as rejected, never applied.
		h.env.SignalWorkflow(workflows.UpdatePause, workflows.DirectionRequest{Direction: "sideways"})
		h.env.SignalWorkflow(workflows.UpdatePause, workflows.DirectionRequest{Direction: "down", Reason: "maintenance"})
		h.env.SignalWorkflow(workflows.UpdateSetSLA, workflows.SetSLARequest{})
	})
	h.snapshot(6*time.Second, func(s workflows.StateView) {
		require.Len(t, s.Rejected, 2)
		require.Equal(t, workflows.RejectedMessage{At: s.Rejected[0].At, Name: "pause", Error: `direction must be up, down or both, got "sideways"`}, s.Rejected[0])
		require.Equal(t, "give ttft_ms, itl_ms or both", s.Rejected[1].Error)
		require.True(t, s.Overrides.PauseScaleDown)
		require.False(t, s.Overrides.PauseScaleUp)
		require.Equal(t, "maintenance", s.Overrides.PauseReason)
		require.Equal(t, thresholdConfig(config.EnvNoop).TTFTMs, s.TTFTMs, "SLA unchanged by the rejected signal")
		// The tick at 5 s: the planner wants 4 on 3 engines at 110% KV, but decode is pinned.
		require.Contains(t, s.LastTick.Notes, "planner's decode target 4 suppressed by the operator's override")
		require.Len(t, s.Decisions, 1)
	})
	h.at(6*time.Second+time.Millisecond, func() {
		h.expect(workflows.UpdateClearOverride, workflows.ClearOverrideRequest{Component: "decode"}, "", "cleared 1 override(s)")
		h.expect(workflows.UpdateClearOverride, workflows.ClearOverrideRequest{Component: "prefill"}, `component "prefill" is not a pool of mode "decode"`, "")
	})
	h.at(31*time.Second, func() {
		recs := h.diagnostics()
		h.checks = append(h.checks, func() {
			// One record per tick, oldest first: the override pass at 3 s, then every 5 s.
			require.Len(t, recs, 7)
			require.Equal(t, "override", recs[0].Kind)
			for i, r := range recs[1:] {
				require.Equal(t, "scheduled", r.Kind)
				require.Equal(t, float64(1_700_000_005+5*i), r.At)
			}
			require.Equal(t, "decode=4", recs[2].Applied.String(), "scale-up is not paused")
		})
	})
	h.snapshot(31*time.Second, func(s workflows.StateView) {
		// From tick 4 (t=20 s) the engines are idle and the planner wants fewer, but
		// scale-down is paused.
		require.Nil(t, s.Overrides.Decode)
		require.Contains(t, strings.Join(s.LastTick.Notes, "\n"), "not applied: scale-down is paused")
	})
	h.at(31*time.Second+time.Millisecond, func() {
		h.expect(workflows.UpdateResume, workflows.DirectionRequest{}, "", "scaling active in both directions")
		// Forced: below the minimum, recorded as forced.
		h.expect(workflows.UpdateSetReplicas, workflows.SetReplicasRequest{Component: "decode", Replicas: 0, Force: true}, "", "forced past the min-endpoint or GPU-budget invariant")
	})
	h.snapshot(32*time.Second, func(s workflows.StateView) {
		require.True(t, s.Forced)
		require.True(t, s.Overrides.Decode.Forced)
		require.Equal(t, 0, *s.LastTick.Applied.Decode)
	})
	h.env.ExecuteWorkflow(workflows.WorkflowName, workflows.Input{
		Deployment: workflows.Deployment{Namespace: "ns", Name: "llama"}, Config: thresholdConfig(config.EnvNoop),
		InitialDecode: 3, MaxTicksPerRun: 8,
	})
	h.finishedByContinueAsNew()
	h.verify()
}

func TestBadInputFailsClearly(t *testing.T) {
	h := newHarness(t, nil)
	bad := thresholdConfig(config.EnvNoop)
	bad.Mode = "sideways"
	h.env.ExecuteWorkflow(workflows.WorkflowName, workflows.Input{Deployment: workflows.Deployment{Namespace: "ns", Name: "x"}, Config: bad})
	require.True(t, h.env.IsWorkflowCompleted())
	require.ErrorContains(t, h.env.GetWorkflowError(), `mode: must be one of disagg, prefill, decode, agg (got "sideways")`)

	h = newHarness(t, nil)
	h.env.ExecuteWorkflow(workflows.WorkflowName, workflows.Input{Deployment: workflows.Deployment{Namespace: "ns", Name: "a/b"}, Config: thresholdConfig(config.EnvNoop)})
	require.ErrorContains(t, h.env.GetWorkflowError(), `deployment "a/b" must not contain '/' or spaces`)
}

func TestStateCarriesAcrossContinueAsNew(t *testing.T) {
	h := newHarness(t, kvScript())
	h.env.ExecuteWorkflow(workflows.WorkflowName, workflows.Input{
		Deployment: workflows.Deployment{Namespace: "ns", Name: "llama"}, Config: thresholdConfig(config.EnvNoop),
		InitialDecode: 1, MaxTicksPerRun: 3,
	})
	next, _ := h.finishedByContinueAsNew()

	h2 := newHarness(t, kvScript())
	h2.env.ExecuteWorkflow(workflows.WorkflowName, next)
	after, _ := h2.finishedByContinueAsNew()
	require.Equal(t, int64(6), after.State.Ticks, "ticks continue across runs")
	require.Equal(t, 2, after.State.Runs, "the first run is 1, the continued one 2")
	require.NotNil(t, after.State.Core)
}

func TestWaitDecisionBlocksUntilANewerDecision(t *testing.T) {
	h := newHarness(t, kvScript())
	var got virtual.Decision
	var gotErr error
	var answeredAt time.Time
	h.at(time.Second, func() {
		h.env.UpdateWorkflow(workflows.UpdateWaitDecision, "", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { gotErr = err },
			OnAccept: func() {},
			OnComplete: func(v any, err error) {
				gotErr, answeredAt = err, h.env.Now()
				got, _ = v.(virtual.Decision)
			},
		}, workflows.WaitDecisionRequest{AfterDecisionID: -1})
	})
	h.env.ExecuteWorkflow(workflows.WorkflowName, workflows.Input{
		Deployment: workflows.Deployment{Namespace: "ns", Name: "llama"}, Config: thresholdConfig(config.EnvVirtual),
		InitialDecode: 1, MaxTicksPerRun: 2,
	})
	h.finishedByContinueAsNew()
	require.NoError(t, gotErr)
	require.Equal(t, virtual.Decision{DecisionID: 0, NumPrefill: virtual.Unset, NumDecode: 2}, got)
	require.Equal(t, time.Unix(1_700_000_005, 0), answeredAt.Truncate(time.Second), "answered by the tick at 5 s, not before")

	// A planner that is not virtual refuses the update in its validator.
	h = newHarness(t, kvScript())
	h.at(time.Second, func() {
		h.expect(workflows.UpdateWaitDecision, workflows.WaitDecisionRequest{}, `environment "noop" publishes no virtual decisions`, "")
		h.expect(workflows.UpdateAcknowledge, workflows.AcknowledgeRequest{}, `environment "noop" has no decisions to acknowledge (only virtual does)`, "")
	})
	h.env.ExecuteWorkflow(workflows.WorkflowName, workflows.Input{
		Deployment: workflows.Deployment{Namespace: "ns", Name: "llama"}, Config: thresholdConfig(config.EnvNoop),
		InitialDecode: 1, MaxTicksPerRun: 1,
	})
	h.finishedByContinueAsNew()
	h.verify()
}

func TestConfigSLAAndLimitUpdates(t *testing.T) {
	h := newHarness(t, kvScript())
	h.at(time.Second, func() {
		c := thresholdConfig(config.EnvNoop)
		c.Mode = config.ModeDisagg
		h.expect(workflows.UpdateConfig, workflows.ConfigRequest{Config: c}, "mode cannot change on a running planner (decode -> disagg)", "")
		c = thresholdConfig(config.EnvNoop)
		c.LoadAdjustmentIntervalSeconds = 0
		h.expect(workflows.UpdateConfig, workflows.ConfigRequest{Config: c}, "load_adjustment_interval", "")
		c.LoadAdjustmentIntervalSeconds = 10
		h.expect(workflows.UpdateConfig, workflows.ConfigRequest{Config: c}, "", "configuration updated; it applies from the next tick")

		h.expect(workflows.UpdateSetSLA, workflows.SetSLARequest{TTFTMs: ptr(-5.0)}, "ttft", "")
		h.expect(workflows.UpdateSetSLA, workflows.SetSLARequest{TTFTMs: ptr(250.0), ITLMs: ptr(12.0)}, "",
			`SLA targets: TTFT 250 ms, ITL 12 ms (recorded; optimization_target "throughput" does not use them)`)

		h.expect(workflows.UpdateSetLimits, workflows.SetLimitsRequest{}, "give at least one of", "")
		h.expect(workflows.UpdateSetLimits, workflows.SetLimitsRequest{DecodeMinEndpoint: ptr(3), MaxGPUBudget: ptr(2)}, "the minimum endpoints need 3 GPUs, over max_gpu_budget 2", "")
		h.expect(workflows.UpdateSetLimits, workflows.SetLimitsRequest{DecodeMinEndpoint: ptr(2)}, "", "limits: min endpoints prefill 1 / decode 2, GPU budget [-1, 8] (-1: none)")
	})
	h.snapshot(2*time.Second, func(s workflows.StateView) {
		require.Equal(t, 250.0, s.TTFTMs)
		require.Equal(t, 12.0, s.ITLMs)
	})
	h.at(2*time.Second, func() {
		v, err := h.env.QueryWorkflow(workflows.QueryConfig)
		require.NoError(t, err)
		var c config.Config
		require.NoError(t, v.Get(&c))
		h.checks = append(h.checks, func() {
			require.Equal(t, 10, c.LoadAdjustmentIntervalSeconds)
			require.Equal(t, 2, c.DecodeMinEndpoints())
		})
	})
	h.env.ExecuteWorkflow(workflows.WorkflowName, workflows.Input{
		Deployment: workflows.Deployment{Namespace: "ns", Name: "llama"}, Config: thresholdConfig(config.EnvNoop),
		InitialDecode: 1, MaxTicksPerRun: 3,
	})
	h.finishedByContinueAsNew()
	h.verify()
	recs := h.diagnosticsFromCAN()
	// The first tick was scheduled at 5 s before the change; the next ones every 10 s.
	require.Equal(t, []float64{1_700_000_005, 1_700_000_015, 1_700_000_025}, tickTimes(recs))
	// With the new minimum of 2, the single engine is lifted to 2.
	require.Equal(t, "decode=2", recs[0].Applied.String())
}

func TestInitialisationFailureIsVisibleAndRetried(t *testing.T) {
	h := newHarness(t, nil)
	c := thresholdConfig(config.EnvNoop)
	c.OptimizationTarget, c.ThroughputSizing, c.ProfileResultsDir = config.TargetSLA, config.SizingInterpolation, "/nonexistent/profile"
	h.snapshot(10*time.Second, func(s workflows.StateView) {
		require.False(t, s.Initialized)
		require.Contains(t, s.InitError, `profile_results_dir "/nonexistent/profile"`)
		require.Zero(t, s.Ticks, "no tick runs without a decision core")
	})
	h.at(40*time.Second, func() { h.env.CancelWorkflow() })
	h.env.ExecuteWorkflow(workflows.WorkflowName, workflows.Input{
		Deployment: workflows.Deployment{Namespace: "ns", Name: "llama"}, Config: c, InitialDecode: 1,
	})
	require.True(t, h.env.IsWorkflowCompleted())
	require.ErrorContains(t, h.env.GetWorkflowError(), "canceled")
	h.verify()
}

func TestAdvisoryRecordsButDoesNotHold(t *testing.T) {
	h := newHarness(t, kvScript())
	c := thresholdConfig(config.EnvNoop)
	c.Advisory = true
	h.env.ExecuteWorkflow(workflows.WorkflowName, workflows.Input{
		Deployment: workflows.Deployment{Namespace: "ns", Name: "llama"}, Config: c, InitialDecode: 1, MaxTicksPerRun: 3,
	})
	next, _ := h.finishedByContinueAsNew()
	// Every tick sees 110% KV on the unchanged single engine and gives the same advice: one
	// decision, then "unchanged" notes; no pending-desired memory turns it into
	// scaling_in_progress.
	require.Len(t, next.State.Decisions, 1)
	require.Equal(t, workflows.StatusRecorded, next.State.Decisions[0].Status)
	require.Equal(t, "decode=2", next.State.Decisions[0].Targets.String())
	require.Len(t, next.State.Recent, 3)
	for i, r := range next.State.Recent {
		require.Equal(t, scaling.Reason("scale_up"), r.Diagnostics.LoadReasonDecode)
		if i > 0 {
			require.Equal(t, []string{"advice unchanged since decision 1: decode=2"}, r.Notes)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func tickTimes(recs []workflows.TickRecord) []float64 {
	var out []float64
	for _, r := range recs {
		out = append(out, r.At)
	}
	return out
}

// diagnosticsFromCAN returns the tick records carried by the run's Continue-As-New.
func (h *harness) diagnosticsFromCAN() []workflows.TickRecord {
	h.t.Helper()
	next, _ := h.finishedByContinueAsNew()
	return next.State.Recent
}

func TestUnreadableMetricsHoldAndNeverScaleDown(t *testing.T) {
	// Idle engines (20% KV) would scale 3 -> 2, but the FPM read fails: the planner holds.
	caps := &scaling.WorkerCapabilities{Decode: &scaling.EngineCapabilities{NumGPU: 1, MaxKVTokens: 100000}}
	idle := &scripted.Script{Entries: []scripted.ScriptEntry{{FromTick: 0, Capabilities: caps,
		DecodeEngine: &perf.FPM{WallTime: 0.01, Scheduled: perf.ScheduledRequests{NumDecodeRequests: 5, SumDecodeKVTokens: 20000}}}}}
	h := newHarness(t, idle)
	h.env.OnActivity(workflows.ActivityObserve, mock.Anything, mock.Anything).Return(
		func(_ context.Context, req workflows.ObserveAllRequest) (workflows.ObserveAllResult, error) {
			three := 3
			return workflows.ObserveAllResult{Inventory: &connectors.Inventory{WorkerCounts: scaling.WorkerCounts{ReadyDecode: &three}},
				FPMError: "metrics endpoint unreachable"}, nil
		})
	h.env.ExecuteWorkflow(workflows.WorkflowName, workflows.Input{
		Deployment: workflows.Deployment{Namespace: "ns", Name: "llama"}, Config: thresholdConfig(config.EnvNoop),
		InitialDecode: 3, MaxTicksPerRun: 3,
	})
	recs := h.diagnosticsFromCAN()
	require.Len(t, recs, 3)
	for _, r := range recs {
		require.Equal(t, "no change", r.Applied.String())
		require.Equal(t, scaling.Reason("no_fpm_data"), r.Diagnostics.LoadReasonDecode)
		require.Contains(t, strings.Join(r.Notes, "\n"), "FPM unreadable")
		require.Contains(t, strings.Join(r.Notes, "\n"), "metrics endpoint unreachable")
	}
}

func TestARestartedPlannerContinuesAfterTheConnectorsNewestDecision(t *testing.T) {
	// A previous planner of the same deployment left decision 7 in the noop journal.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "planner_ns_llama.jsonl"), []byte(`{"decision_id":7,"targets":{"decode":1}}`+"\n"), 0o644))
	h := newHarnessWithJournal(t, kvScript(), dir)
	h.env.ExecuteWorkflow(workflows.WorkflowName, workflows.Input{
		Deployment: workflows.Deployment{Namespace: "ns", Name: "llama"}, Config: thresholdConfig(config.EnvNoop),
		InitialDecode: 1, MaxTicksPerRun: 1,
	})
	next, _ := h.finishedByContinueAsNew()
	require.Len(t, next.State.Decisions, 1)
	require.Equal(t, int64(8), next.State.Decisions[0].ID)
	require.Equal(t, workflows.StatusRecorded, next.State.Decisions[0].Status, "not refused as stale")
}

// TestStateStaysSmallForAnSLAPlanner runs a disaggregated SLA planner with the measured H200
// profile, an ARIMA predictor and both loops for 120 ticks (one hour of 60 s throughput and
// 30 s load ticks), then measures the state it carries across Continue-As-New.
func TestStateStaysSmallForAnSLAPlanner(t *testing.T) {
	c := config.Default()
	c.Mode, c.Environment, c.OptimizationTarget = config.ModeDisagg, config.EnvVirtual, config.TargetSLA
	c.ProfileResultsDir = "../perf/testdata/profiles/h200-llama3.1-8b-fp8-tp1"
	c.EnableThroughputScaling, c.EnableLoadScaling = true, true
	c.LoadPredictor, c.ThroughputAdjustmentIntervalSeconds, c.LoadAdjustmentIntervalSeconds = "arima", 60, 30
	c.TTFTMs, c.ITLMs, c.MaxGPUBudget = 200, 20, 16
	caps := &scaling.WorkerCapabilities{Prefill: &scaling.EngineCapabilities{NumGPU: 1, MaxKVTokens: 500000}, Decode: &scaling.EngineCapabilities{NumGPU: 1, MaxKVTokens: 500000}}
	var entries []scripted.ScriptEntry
	for i := int64(0); i < 120; i += 10 {
		rps := 4 + float64(i%40)/4 // a slow sawtooth
		entries = append(entries, scripted.ScriptEntry{FromTick: i, Capabilities: caps,
			Traffic:       &scripted.ScriptTraffic{RequestsPerSecond: rps, ISL: 3000, OSL: 300},
			PrefillEngine: &perf.FPM{WallTime: 0.05 + 0.001*float64(i%7), Scheduled: perf.ScheduledRequests{NumPrefillRequests: 2, SumPrefillTokens: 6000 + 100*i}},
			DecodeEngine:  &perf.FPM{WallTime: 0.012 + 0.0001*float64(i%5), Scheduled: perf.ScheduledRequests{NumDecodeRequests: 30 + i%9, SumDecodeKVTokens: 100000 + 1000*i}},
		})
	}
	h := newHarness(t, &scripted.Script{Entries: entries})
	// An orchestrator acknowledges the newest decision a second after every tick.
	for k := 1; k <= 120; k++ {
		h.at(time.Duration(k)*30*time.Second+time.Second, func() {
			v, err := h.env.QueryWorkflow(workflows.QueryVirtualDecision)
			require.NoError(t, err)
			var d virtual.Decision
			require.NoError(t, v.Get(&d))
			if d.DecisionID >= 0 {
				h.env.SignalWorkflow(workflows.UpdateAcknowledge, workflows.AcknowledgeRequest{DecisionID: d.DecisionID})
			}
		})
	}
	h.env.ExecuteWorkflow(workflows.WorkflowName, workflows.Input{
		Deployment: workflows.Deployment{Namespace: "ns", Name: "llama"}, Config: c,
		InitialPrefill: 2, InitialDecode: 2, MaxTicksPerRun: 120,
	})
	next, size := h.finishedByContinueAsNew()
	require.Equal(t, int64(120), next.State.Ticks)
	require.NotNil(t, next.State.Core.Models.Decode)
	last := next.State.Recent[len(next.State.Recent)-1]
	require.Equal(t, scaling.Reason("set_lower_bound"), last.Diagnostics.ThroughputReasonDecode, "the throughput loop ran on the forecast")
	t.Logf("state carried across Continue-As-New after %d ticks: %d bytes (%d decisions kept, %d tick records)",
		next.State.Ticks, size, len(next.State.Decisions), len(next.State.Recent))
	require.Less(t, size, 128<<10, "the state must stay tens of KB")
}

func TestMalformedSignalsAreRejectedAndThePlannerGoesOn(t *testing.T) {
	h := newHarness(t, kvScript())
	h.at(7*time.Second, func() {
		h.env.SignalWorkflow(workflows.UpdatePause, map[string]any{"direction": 5})
		h.env.SignalWorkflow(workflows.UpdateClearOverride, map[string]any{"componet": "decode"})
		h.env.SignalWorkflow(workflows.UpdateResume, nil)
	})
	h.at(8*time.Second, func() {
		// Updates are decoded just as strictly: a misspelt field is refused, not read as "all".
		h.expect(workflows.UpdatePause, map[string]any{"directon": "up"}, `unknown field "directon"`, "")
	})
	h.snapshot(31*time.Second, func(s workflows.StateView) {
		require.Len(t, s.Rejected, 3)
		require.Contains(t, s.Rejected[0].Error, "cannot unmarshal number into Go struct field")
		require.Contains(t, s.Rejected[1].Error, `unknown field "componet"`)
		require.Equal(t, "the signal has no input: give a JSON object (--input '{...}')", s.Rejected[2].Error)
		require.False(t, s.Overrides.PauseScaleUp || s.Overrides.PauseScaleDown)
		require.GreaterOrEqual(t, s.Ticks, int64(6), "the planner kept ticking")
	})
	h.env.ExecuteWorkflow(workflows.WorkflowName, workflows.Input{
		Deployment: workflows.Deployment{Namespace: "ns", Name: "llama"}, Config: thresholdConfig(config.EnvNoop),
		InitialDecode: 1, MaxTicksPerRun: 8,
	})
	h.finishedByContinueAsNew()
	h.verify()
}

func TestAnOverrideThatArrivesDuringApplyIsAppliedAfterIt(t *testing.T) {
	h := newHarness(t, kvScript())
	// The connector takes 3 s to apply: the tick at 5 s sends decode=2 and waits.
	var applied []string
	one := 1
	h.env.OnActivity(workflows.ActivityObserveInventory, mock.Anything, mock.Anything).Return(
		connectors.Inventory{WorkerCounts: scaling.WorkerCounts{ReadyDecode: &one}}, nil)
	script := kvScript()
	h.env.OnActivity(workflows.ActivityObserve, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, req workflows.ObserveAllRequest) (workflows.ObserveAllResult, error) {
			fr, err := script.ObserveFPM(ctx, req.ObserveRequest)
			return workflows.ObserveAllResult{Inventory: &connectors.Inventory{WorkerCounts: scaling.WorkerCounts{ReadyDecode: &one}}, FPM: &fr}, err
		})
	h.env.OnActivity(workflows.ActivityApply, mock.Anything, mock.Anything).After(3 * time.Second).Return(
		func(_ context.Context, req workflows.ApplyRequest) error {
			applied = append(applied, fmt.Sprintf("%d:%s", req.DecisionID, req.Targets))
			return nil
		})
	h.at(6*time.Second, func() {
		h.expect(workflows.UpdateSetReplicas, workflows.SetReplicasRequest{Component: "decode", Replicas: 3, Reason: "mid-apply"}, "", "decode pinned to 3")
		// Signals sent while the tick waits are applied as they arrive, in order.
		h.env.SignalWorkflow(workflows.UpdateResume, workflows.DirectionRequest{})
	})
	h.at(6*time.Second+time.Millisecond, func() {
		h.env.SignalWorkflow(workflows.UpdatePause, workflows.DirectionRequest{Direction: "down"})
	})
	h.snapshot(12*time.Second, func(s workflows.StateView) {
		require.True(t, s.Overrides.Decode.Applied)
		require.True(t, s.Overrides.PauseScaleDown, "resume then pause: paused")
	})
	h.env.ExecuteWorkflow(workflows.WorkflowName, workflows.Input{
		Deployment: workflows.Deployment{Namespace: "ns", Name: "llama"}, Config: thresholdConfig(config.EnvKubernetes),
		InitialDecode: 1, MaxTicksPerRun: 4,
	})
	h.finishedByContinueAsNew()
	h.verify()
	require.Equal(t, []string{"1:decode=2", "2:decode=3"}, applied[:2], "the override was sent after the planner's decision, not marked applied with it")
}
