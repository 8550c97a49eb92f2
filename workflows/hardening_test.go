package workflows_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/testsuite"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/internal/scripted"
	"github.com/llmplanner/planner/workflows"
)

// TestSignalsApplyInArrivalOrderAndUnknownOnesAreRejected sends "resume" then "pause" in one
// workflow task (a channel per name would apply pause first, then resume), then a misspelt
// signal name, which must be recorded as rejected rather than wait unread.
func TestSignalsApplyInArrivalOrderAndUnknownOnesAreRejected(t *testing.T) {
	h := newHarness(t, kvScript())
	h.at(7*time.Second, func() {
		h.env.SignalWorkflow(workflows.UpdateResume, workflows.DirectionRequest{})
		h.env.SignalWorkflow(workflows.UpdatePause, workflows.DirectionRequest{Reason: "maintenance"})
		h.env.SignalWorkflow("pasue", workflows.DirectionRequest{})
	})
	h.snapshot(8*time.Second, func(s workflows.StateView) {
		require.True(t, s.Overrides.PauseScaleUp && s.Overrides.PauseScaleDown, "resume then pause ends paused")
		require.Equal(t, "maintenance", s.Overrides.PauseReason)
		require.Len(t, s.Rejected, 1)
		require.Equal(t, "pasue", s.Rejected[0].Name)
		require.Contains(t, s.Rejected[0].Error, `unknown signal "pasue": the signals are set_replicas, clear_override, pause`)
	})
	h.at(9*time.Second, func() {
		h.env.SignalWorkflow(workflows.UpdatePause, workflows.DirectionRequest{})
		h.env.SignalWorkflow(workflows.UpdateResume, workflows.DirectionRequest{})
	})
	h.snapshot(10*time.Second, func(s workflows.StateView) {
		require.False(t, s.Overrides.PauseScaleUp || s.Overrides.PauseScaleDown, "pause then resume ends resumed")
	})
	h.env.ExecuteWorkflow(workflows.WorkflowName, workflows.Input{
		Deployment: workflows.Deployment{Namespace: "ns", Name: "llama"}, Config: thresholdConfig(config.EnvNoop),
		InitialDecode: 1, MaxTicksPerRun: 4,
	})
	h.finishedByContinueAsNew()
	h.verify()
}

func (h *harness) config() config.Config {
	h.t.Helper()
	v, err := h.env.QueryWorkflow(workflows.QueryConfig)
	require.NoError(h.t, err)
	var c config.Config
	require.NoError(h.t, v.Get(&c))
	return c
}

// TestAbsurdOperatorInputIsRefusedAndChangesNothing sends each out-of-bounds input the
// hardening review found accepted, as an update and as a signal, and checks every one is
// refused with the bound named and the planner's overrides, limits and config unchanged.
func TestAbsurdOperatorInputIsRefusedAndChangesNothing(t *testing.T) {
	huge := math.MaxInt64
	big := 1 << 62
	longReason := strings.Repeat("r", config.MaxReasonBytes+1)
	noop := thresholdConfig(config.EnvNoop)
	ptr := func(s string) *string { return &s }
	hugeReason := strings.Repeat("r", 1500<<10)
	cases := []struct {
		name    string
		arg     any
		wantErr string
	}{
		{workflows.UpdateSetReplicas, workflows.SetReplicasRequest{Component: "decode", Replicas: huge}, "replicas must be within 0..4096"},
		{workflows.UpdateSetReplicas, workflows.SetReplicasRequest{Component: "decode", Replicas: huge, Force: true}, "replicas must be within 0..4096"},
		{workflows.UpdateSetReplicas, workflows.SetReplicasRequest{Component: "decode", Replicas: 2, Reason: longReason}, "reason is 1025 bytes long, at most 1024"},
		{workflows.UpdateSetReplicas, workflows.SetReplicasRequest{Component: "decode", Replicas: 2, Reason: hugeReason}, "at most 262144"},
		{workflows.UpdatePause, workflows.DirectionRequest{Reason: longReason}, "reason is 1025 bytes long"},
		{workflows.UpdateSetLimits, workflows.SetLimitsRequest{MinEndpoint: &big}, "min_endpoint: must be at most 4096"},
		{workflows.UpdateSetLimits, workflows.SetLimitsRequest{MaxGPUBudget: &huge}, "max_gpu_budget: must be at most"},
		{workflows.UpdateConfig, map[string]any{"config": map[string]any{"max_gpu_budgit": 8}}, `unknown field "max_gpu_budgit"`},
		{workflows.UpdateConfig, map[string]any{"config": map[string]any{}, "extra": 1}, `unknown field "extra"`},
		{workflows.UpdateConfig, workflows.ConfigRequest{Config: noop, HostTaskQueue: ptr(strings.Repeat("q", 1001))}, "host_task_queue is 1001 bytes long, at most 1000"},
		{workflows.UpdateConfig, workflows.ConfigRequest{Config: noop, HostTaskQueue: ptr("planner-host/ns/llama ")}, "leading or trailing spaces"},
		{workflows.UpdateConfig, workflows.ConfigRequest{Config: noop, HostTaskQueue: ptr("planner-host/ns/\nllama")}, "control character at byte 16"},
		{workflows.UpdateConfig, workflows.ConfigRequest{Config: noop, HostTaskQueue: ptr("/_sys/planner-host/ns/llama")}, "reserved /_sys/ space"},
	}
	h := newHarness(t, kvScript())
	var before config.Config
	h.at(7*time.Second, func() {
		before = h.config()
		for _, tc := range cases {
			h.expect(tc.name, tc.arg, tc.wantErr, "")
			h.env.SignalWorkflow(tc.name, tc.arg)
		}
	})
	var after config.Config
	h.at(9*time.Second, func() { after = h.config() })
	h.snapshot(9*time.Second, func(s workflows.StateView) {
		require.Nil(t, s.Overrides.Decode)
		require.False(t, s.Overrides.PauseScaleUp || s.Overrides.PauseScaleDown)
		// Every input is rejected as a signal too (update_config as an unknown signal).
		require.Len(t, s.Rejected, len(cases), "%v", s.Rejected)
		for i, tc := range cases {
			if tc.name == workflows.UpdateConfig {
				require.Contains(t, s.Rejected[i].Error, "unknown signal")
				continue
			}
			require.Contains(t, s.Rejected[i].Error, tc.wantErr)
		}
	})
	h.checks = append(h.checks, func() { require.Equal(t, before, after, "the configuration is unchanged") })
	h.env.ExecuteWorkflow(workflows.WorkflowName, workflows.Input{
		Deployment: workflows.Deployment{Namespace: "ns", Name: "llama"}, Config: thresholdConfig(config.EnvNoop),
		InitialDecode: 1, MaxTicksPerRun: 4,
	})
	h.finishedByContinueAsNew()
	h.verify()
}

// TestWaitDecisionCallsCannotCrowdOutOperators sends more wait_decision calls than may wait
// at once: the extra ones are refused at once, the others answered, and an operator's pause
// sent meanwhile is handled; an acknowledgement past the replica bound is refused.
func TestWaitDecisionCallsCannotCrowdOutOperators(t *testing.T) {
	h := newHarness(t, kvScript())
	const calls = workflows.MaxWaitDecision + 3
	var answered, refused int
	h.at(time.Second, func() {
		for i := 0; i < calls; i++ {
			h.env.UpdateWorkflow(workflows.UpdateWaitDecision, "", &testsuite.TestUpdateCallback{
				OnReject: func(err error) {
					require.ErrorContains(t, err, "wait_decision calls are already waiting, at most 4")
					refused++
				},
				OnAccept: func() {},
				OnComplete: func(_ any, err error) {
					if err != nil {
						require.ErrorContains(t, err, "already waiting")
						refused++
						return
					}
					answered++
				},
			}, workflows.WaitDecisionRequest{AfterDecisionID: -1})
		}
		h.expect(workflows.UpdatePause, workflows.DirectionRequest{Direction: "down"}, "", "scale-down paused")
	})
	h.at(6*time.Second, func() { // decision 0 was published at 5 s
		huge := math.MaxInt64
		h.expect(workflows.UpdateAcknowledge, workflows.AcknowledgeRequest{DecisionID: 0, ReadyDecode: &huge}, "over the bound of 4096 replicas per pool", "")
	})
	h.env.ExecuteWorkflow(workflows.WorkflowName, workflows.Input{
		Deployment: workflows.Deployment{Namespace: "ns", Name: "llama"}, Config: thresholdConfig(config.EnvVirtual),
		InitialDecode: 1, MaxTicksPerRun: 2,
	})
	h.finishedByContinueAsNew()
	h.verify()
	require.Equal(t, workflows.MaxWaitDecision, answered)
	require.Equal(t, calls-workflows.MaxWaitDecision, refused)
}

// TestStateFromANewerLogicVersionIsRefused continues a planner with state from a newer
// release: the worker must fail the task, never run (and downgrade) it.
func TestStateFromANewerLogicVersionIsRefused(t *testing.T) {
	h := newHarness(t, kvScript())
	h.env.ExecuteWorkflow(workflows.WorkflowName, workflows.Input{
		Deployment: workflows.Deployment{Namespace: "ns", Name: "llama"}, Config: thresholdConfig(config.EnvNoop),
		InitialDecode: 1, MaxTicksPerRun: 2,
	})
	next, _ := h.finishedByContinueAsNew()
	next.State.LogicVersion = workflows.LogicVersion + 1

	h2 := newHarness(t, kvScript())
	h2.env.ExecuteWorkflow(workflows.WorkflowName, next)
	require.True(t, h2.env.IsWorkflowCompleted())
	require.ErrorContains(t, h2.env.GetWorkflowError(), fmt.Sprintf("planner state has logic version %d, newer than this worker's %d", workflows.LogicVersion+1, workflows.LogicVersion))
}

// currentDetails reads the markdown the Web UI shows (the workflow metadata query).
func (h *harness) currentDetails() string {
	h.t.Helper()
	v, err := h.env.QueryWorkflow("__temporal_workflow_metadata")
	require.NoError(h.t, err)
	var md sdkpb.WorkflowMetadata
	require.NoError(h.t, v.Get(&md))
	return md.GetCurrentDetails()
}

// TestCurrentDetailsFollowOverrides: the Web UI's current details show a pause as soon as it
// is handled (a signal), and its end as soon as a resume is (an update), between ticks.
func TestCurrentDetailsFollowOverrides(t *testing.T) {
	h := newHarness(t, kvScript())
	var before, paused, resumed string
	// Ticks every 5 s: 6 s is between two, and so are the checks.
	h.at(6*time.Second, func() {
		before = h.currentDetails()
		h.env.SignalWorkflow(workflows.UpdatePause, workflows.DirectionRequest{Reason: "maintenance"})
	})
	h.at(6*time.Second+100*time.Millisecond, func() { paused = h.currentDetails() })
	h.at(7*time.Second, func() {
		h.env.UpdateWorkflow(workflows.UpdateResume, "resume-1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("resume rejected: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, workflows.DirectionRequest{})
	})
	h.at(7*time.Second+100*time.Millisecond, func() { resumed = h.currentDetails() })
	h.env.ExecuteWorkflow(workflows.WorkflowName, workflows.Input{
		Deployment: workflows.Deployment{Namespace: "ns", Name: "llama"}, Config: thresholdConfig(config.EnvNoop),
		InitialDecode: 1, MaxTicksPerRun: 4,
	})
	h.finishedByContinueAsNew()
	require.Contains(t, before, "Tick 1 ")
	require.NotContains(t, before, "paused")
	require.Contains(t, paused, "Overrides: scale-up and scale-down paused")
	require.Contains(t, paused, "Tick 1 ", "refreshed between ticks")
	require.NotContains(t, resumed, "paused")
	require.Contains(t, resumed, "| decode |", "the last tick's pools are still shown")
}

// TestStartWithAnUnusableHostTaskQueueFails: a planner started with a host task queue no
// worker could poll fails at once, saying why, rather than wait for observations forever.
func TestStartWithAnUnusableHostTaskQueueFails(t *testing.T) {
	h := newHarness(t, kvScript())
	h.env.ExecuteWorkflow(workflows.WorkflowName, workflows.Input{
		Deployment: workflows.Deployment{Namespace: "ns", Name: "llama"}, Config: thresholdConfig(config.EnvNoop),
		InitialDecode: 1, HostTaskQueue: "/_sys/planner-host/ns/llama",
	})
	require.True(t, h.env.IsWorkflowCompleted())
	require.ErrorContains(t, h.env.GetWorkflowError(), `host_task_queue "/_sys/planner-host/ns/llama" is in Temporal's reserved /_sys/ space`)
}

// TestCurrentDetailsShowObservedLatencies: the Web UI's details put the frontend's observed
// TTFT and ITL (from the throughput loop's traffic window) beside the SLA, and the request
// rate the tick read.
func TestCurrentDetailsShowObservedLatencies(t *testing.T) {
	c := config.Default()
	c.Mode, c.Environment, c.OptimizationTarget = config.ModeDisagg, config.EnvNoop, config.TargetSLA
	c.ProfileResultsDir = "../perf/testdata/profiles/h200-llama3.1-8b-fp8-tp1"
	c.EnableThroughputScaling, c.EnableLoadScaling = true, false
	c.ThroughputAdjustmentIntervalSeconds, c.TTFTMs, c.ITLMs, c.MaxGPUBudget = 10, 300, 20, 16
	ttft, itl := 412.5, 17.25
	h := newHarness(t, &scripted.Script{Entries: []scripted.ScriptEntry{{FromTick: 0,
		Traffic: &scripted.ScriptTraffic{RequestsPerSecond: 4, ISL: 3000, OSL: 300, TTFTMs: &ttft, ITLMs: &itl}}}})
	var before, after string
	h.at(time.Second, func() { before = h.currentDetails() })
	h.at(15*time.Second, func() { after = h.currentDetails() })
	h.env.ExecuteWorkflow(workflows.WorkflowName, workflows.Input{
		Deployment: workflows.Deployment{Namespace: "ns", Name: "llama"}, Config: c,
		InitialPrefill: 1, InitialDecode: 1, MaxTicksPerRun: 3,
	})
	h.finishedByContinueAsNew()
	require.NotContains(t, before, "observed", "nothing observed before the first traffic window")
	require.NotContains(t, before, "Traffic read")
	require.Regexp(t, `Traffic read by tick \d+: 4\.0 req/s`, after, "the script's 4 req/s")
	require.Contains(t, after, "· observed 412.5 ms / SLA 300 ms")
	require.Contains(t, after, "· observed 17.2 ms / SLA 20 ms")
}
