package workflows_test

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/llmplanner/planner/activities"
	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/predict"
	"github.com/llmplanner/planner/scaling"
	"github.com/llmplanner/planner/sim/loadgen"
	"github.com/llmplanner/planner/sim/replay"
	"github.com/llmplanner/planner/workflows"
)

// simProfileDir is the simulator's test profile (H200 rows), read by the workflow's Init
// activity and by the direct replay alike.
const simProfileDir = "../sim/engine/testdata"

// simConfig is Dynamo's default SLA planner (both loops, ARIMA, 180 s / 5 s) on a local
// deployment whose connector and observation sources the worker hosts: here, a simulation.
func simConfig(t *testing.T) config.Config {
	c := config.Default()
	c.Mode, c.Environment = config.ModeDisagg, config.EnvLocal
	c.OptimizationTarget = config.TargetSLA
	c.EnableThroughputScaling, c.EnableLoadScaling = true, true
	c.LoadPredictor = config.PredictorARIMA
	c.ThroughputAdjustmentIntervalSeconds, c.LoadAdjustmentIntervalSeconds = 180, 5
	c.TTFTMs, c.ITLMs = 200, 10
	c.MaxGPUBudget = 16
	c.ProfileResultsDir = simProfileDir
	c.Scheduling.ScaleIntervalSeconds = nil
	c.Resolve()
	require.NoError(t, c.Validate())
	return c
}

// TestPlannerWorkflow_DecidesLikeTheDirectReplay is "one policy, two paths": a short
// sinusoidal trace runs once through the direct replay loop (replay.Run: scaling.Decide
// called in-process) and once through the real planner workflow in the SDK's time-skipping
// environment, its activities wired to the same simulation (replay.Stepper as the hosted
// connector, FPM reader and traffic source) on the workflow's clock. Each workflow run
// continues as new after 40 ticks, so the decision core's state also crosses run
// boundaries. The two paths must tick at the same times, apply the same targets at the
// same times, and so serve every request identically. It runs with Dynamo's default policy
// with the scale-down stabilization window (whose recommendation history is state too) and
// with this planner's own policy (whose rate history and startup measurement are state).
func TestPlannerWorkflow_DecidesLikeTheDirectReplay(t *testing.T) {
	t.Run("dynamo-sla", func(t *testing.T) { twoPaths(t, simConfig(t)) })
	t.Run("stabilized-300s", func(t *testing.T) {
		cfg := simConfig(t)
		cfg.ScaleDownStabilizationSeconds = 300
		twoPaths(t, cfg)
	})
	t.Run("ahead", func(t *testing.T) {
		cfg := simConfig(t)
		cfg.ScalingPolicy = config.PolicyAhead
		require.NoError(t, cfg.Validate())
		twoPaths(t, cfg)
	})
	// Both warmed with the traffic before the planner started (load_predictor_warmup_trace):
	// the Init activity and the replay read the same trace into the same state.
	t.Run("dynamo-sla-warm", func(t *testing.T) {
		cfg := simConfig(t)
		cfg.LoadPredictorWarmupTrace = warmupTrace(t)
		requireWarmupMatters(t, cfg)
		twoPaths(t, cfg)
	})
	t.Run("ahead-warm", func(t *testing.T) {
		cfg := simConfig(t)
		cfg.ScalingPolicy = config.PolicyAhead
		cfg.LoadPredictorWarmupTrace = warmupTrace(t)
		require.NoError(t, cfg.Validate())
		requireWarmupMatters(t, cfg)
		twoPaths(t, cfg)
	})
	// An aggregated deployment: one pool of engines that prefill and decode, sized by
	// Dynamo's agg decisions (the 2-D regression for TTFT and ITL) on the decode component.
	t.Run("agg", func(t *testing.T) {
		cfg := simConfig(t)
		cfg.Mode = config.ModeAgg
		cfg.TTFTMs, cfg.ITLMs = 500, 50
		require.NoError(t, cfg.Validate())
		twoPaths(t, cfg)
	})
	// This planner's own policy on the aggregated pool (scaling/ahead_agg.go).
	t.Run("agg-ahead", func(t *testing.T) {
		cfg := simConfig(t)
		cfg.Mode, cfg.ScalingPolicy = config.ModeAgg, config.PolicyAhead
		cfg.TTFTMs, cfg.ITLMs = 500, 50
		require.NoError(t, cfg.Validate())
		twoPaths(t, cfg)
	})
}

// warmupTrace writes 20 minutes of the test's sinusoid (another seed), ending at its
// trough as the test's trace starts, as a Mooncake JSONL trace, and returns its path.
func warmupTrace(t *testing.T) *string {
	t.Helper()
	reqs, err := loadgen.Sinusoid(loadgen.SinusoidOptions{DurationS: 1200, MinRPS: 1, MaxRPS: 24, PeriodS: 600, ISL: 3000, OSL: 150, Seed: 8})
	require.NoError(t, err)
	var b strings.Builder
	for _, r := range reqs {
		fmt.Fprintf(&b, "{\"timestamp\": %.3f, \"input_length\": %d, \"output_length\": %d}\n", r.Arrival*1000, r.InputTokens, r.OutputTokens)
	}
	path := filepath.Join(t.TempDir(), "warmup.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	return &path
}

// requireWarmupMatters checks that cfg's warm-up trace changes what the direct replay
// decides, so that two paths deciding alike shows both read it.
func requireWarmupMatters(t *testing.T, cfg config.Config) {
	t.Helper()
	prof, err := perf.LoadProfile(simProfileDir)
	require.NoError(t, err)
	cold := cfg
	cold.LoadPredictorWarmupTrace = nil
	decisions := func(cfg config.Config) []scaling.Decision {
		res, err := replay.Run(simTrace(t), replay.Options{Config: cfg, Profile: prof, StartupDelay: 60 * time.Second, InitialPrefill: 1, InitialDecode: 1})
		require.NoError(t, err)
		var out []scaling.Decision
		for _, e := range res.Timeline {
			out = append(out, e.Decision)
		}
		return out
	}
	require.NotEqual(t, decisions(cold), decisions(cfg), "the warm-up changes the decisions")
}

// simTrace is the test's load: 900 s of a sinusoid from 1 to 24 req/s, period 600 s.
func simTrace(t *testing.T) []predict.Request {
	t.Helper()
	reqs, err := loadgen.Sinusoid(loadgen.SinusoidOptions{DurationS: 900, MinRPS: 1, MaxRPS: 24, PeriodS: 600, ISL: 3000, OSL: 150, Seed: 7})
	require.NoError(t, err)
	return reqs
}

func twoPaths(t *testing.T, cfg config.Config) {
	prof, err := perf.LoadProfile(simProfileDir)
	require.NoError(t, err)
	reqs := simTrace(t)
	initialPrefill := 1
	if cfg.Mode == config.ModeAgg {
		initialPrefill = 0 // the aggregated engines are the decode component
	}
	o := replay.Options{Config: cfg, Profile: prof, StartupDelay: 60 * time.Second, InitialPrefill: initialPrefill, InitialDecode: 1}

	direct, err := replay.Run(reqs, o)
	require.NoError(t, err)
	var wantTicks []float64
	var wantApplied []replay.Applied
	for _, e := range direct.Timeline {
		wantTicks = append(wantTicks, e.At)
		if !e.Decision.Empty() {
			wantApplied = append(wantApplied, replay.Applied{At: e.At, DecisionID: int64(len(wantApplied) + 1), Prefill: e.Decision.Prefill, Decode: e.Decision.Decode})
		}
	}
	// The trace must exercise the planner: scale-ups and scale-downs, of both pools (agg: of
	// the one pool, and never of a prefill pool).
	require.GreaterOrEqual(t, direct.ScaleActions, 4)
	require.Positive(t, direct.Reversals)
	if cfg.Mode == config.ModeAgg {
		for _, a := range wantApplied {
			require.Nil(t, a.Prefill, "agg decides the decode component only")
		}
		require.Zero(t, direct.PrefillGPUSeconds)
	}

	// The workflow path. Its clock starts at the Unix epoch, so workflow time is replay time.
	var env *testsuite.TestWorkflowEnvironment
	stepper, err := replay.NewStepper(reqs, o, func() float64 { return float64(env.Now().UnixNano()) / 1e9 })
	require.NoError(t, err)
	dep := workflows.Deployment{Namespace: "sim", Name: "sinusoid"}
	in := workflows.Input{Deployment: dep, Config: cfg, InitialPrefill: initialPrefill, InitialDecode: 1, MaxTicksPerRun: 40}
	start := time.Unix(0, 0)
	end := time.Unix(0, 0).Add(time.Duration((direct.Duration + 30) * float64(time.Second)))
	runs := 0
	for {
		runs++
		require.Less(t, runs, 100, "the planner never stopped")
		var suite testsuite.WorkflowTestSuite
		suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelError}))))
		env = suite.NewTestWorkflowEnvironment()
		env.SetWorkerOptions(worker.Options{Interceptors: workflows.Interceptors()})
		env.RegisterWorkflowWithOptions(workflows.PlannerWorkflow, workflow.RegisterOptions{Name: workflows.WorkflowName})
		acts := &activities.Activities{Logger: slog.New(slog.DiscardHandler)}
		acts.Host(dep, activities.Hosted{Connector: stepper, FPM: stepper, Traffic: stepper})
		acts.Register(env)
		env.SetStartTime(start)
		env.RegisterDelayedCallback(env.CancelWorkflow, end.Sub(start))
		env.ExecuteWorkflow(workflows.WorkflowName, in)
		require.True(t, env.IsWorkflowCompleted())
		werr := env.GetWorkflowError()
		var can *workflow.ContinueAsNewError
		if errors.As(werr, &can) {
			in = continuedInput(t, can)
			start = env.Now()
			continue
		}
		var cancelled *temporal.CanceledError
		require.True(t, errors.As(werr, &cancelled), "the planner ended with %v", werr)
		break
	}
	require.Greater(t, runs, 3, "the trace must span several runs")
	require.True(t, stepper.Over(), "every request finished under the workflow too")

	// Ticks after the last request finished observe the replay as over: not compared.
	var gotTicks []float64
	for _, at := range stepper.Observed() {
		if at <= direct.Duration {
			gotTicks = append(gotTicks, at)
		}
	}
	require.Equal(t, wantTicks, gotTicks, "the workflow ticks when the direct loop does")
	require.Equal(t, wantApplied, stepper.Applied(), "the workflow applies what the direct loop applies, when it does")
	got := stepper.Result()
	require.Equal(t, direct.Requests, got.Requests, "every request is served alike")
	require.Equal(t, direct.Replicas, got.Replicas)
	require.Equal(t, direct.GPUSeconds, got.GPUSeconds)
	require.Equal(t, direct.Goodput, got.Goodput)
	for _, a := range stepper.Applied() {
		t.Logf("%.0f: P=%v D=%v", a.At, deref(a.Prefill), deref(a.Decode))
	}
	t.Logf("%d requests, %d ticks, %d decisions over %d workflow runs; goodput %.1f%%, %.2f GPU-h",
		len(reqs), len(gotTicks), len(wantApplied), runs, 100*got.Goodput, got.GPUSeconds/3600)
}

// continuedInput decodes the input a run carried to the next by Continue-As-New.
func continuedInput(t *testing.T, can *workflow.ContinueAsNewError) workflows.Input {
	t.Helper()
	var next workflows.Input
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	return next
}

func deref(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

// TestScalingPolicyCannotChangeOnARunningPlanner: the policies keep different state (the
// throughput loop's predictors, the ahead policy's history), so update_config refuses to
// switch and says why; the ahead policy's own settings may change.
func TestScalingPolicyCannotChangeOnARunningPlanner(t *testing.T) {
	dynamo := simConfig(t)
	ahead := simConfig(t)
	ahead.ScalingPolicy = config.PolicyAhead
	st := workflows.State{Config: dynamo}
	err := st.ValidateConfig(workflows.ConfigRequest{Config: ahead})
	require.ErrorContains(t, err, "scaling_policy cannot change on a running planner (dynamo -> ahead)")
	st = workflows.State{Config: ahead}
	require.ErrorContains(t, st.ValidateConfig(workflows.ConfigRequest{Config: dynamo}), "scaling_policy cannot change")
	ahead.ExpectedStartupSeconds = 120
	require.NoError(t, st.ValidateConfig(workflows.ConfigRequest{Config: ahead}))
	explicit := dynamo
	explicit.ScalingPolicy = config.PolicyDynamo
	st = workflows.State{Config: dynamo}
	require.NoError(t, st.ValidateConfig(workflows.ConfigRequest{Config: explicit}), `"" is Dynamo's policy`)
}
