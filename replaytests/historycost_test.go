package replaytests

import (
	"context"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/llmplanner/planner/activities"
	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/internal/scripted"
	"github.com/llmplanner/planner/internal/temporaltest"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/plannerclient"
	"github.com/llmplanner/planner/scaling"
	"github.com/llmplanner/planner/worker"
	"github.com/llmplanner/planner/workflows"
)

// slaDisaggScript: 8 prefill and 8 decode engines under steady load, with FPMs that vary by
// tick so the regression keeps learning.
func slaDisaggScript() *scripted.Script {
	caps := &scaling.WorkerCapabilities{
		Prefill: &scaling.EngineCapabilities{NumGPU: 1, MaxNumBatchedTokens: 8192, ContextLength: 16384},
		Decode:  &scaling.EngineCapabilities{NumGPU: 1, MaxKVTokens: 400000, MaxNumSeqs: 256, ContextLength: 16384},
	}
	var entries []scripted.ScriptEntry
	for k := int64(0); k < 64; k++ {
		entries = append(entries, scripted.ScriptEntry{FromTick: k, Capabilities: caps,
			PrefillEngine: &perf.FPM{WallTime: 0.05 + 0.001*float64(k%7), Scheduled: perf.ScheduledRequests{NumPrefillRequests: 2 + k%3, SumPrefillTokens: 3000 + 500*(k%5)}},
			DecodeEngine:  &perf.FPM{WallTime: 0.012 + 0.0005*float64(k%5), Scheduled: perf.ScheduledRequests{NumDecodeRequests: 30 + k%9, SumDecodeKVTokens: 90000 + 4000*(k%7)}},
			Traffic:       &scripted.ScriptTraffic{RequestsPerSecond: 40 + float64(k%4), ISL: 3000, OSL: 300, TTFTMs: ptr(150.0), ITLMs: ptr(12.0)}})
	}
	return &scripted.Script{Entries: entries}
}

// slaDisaggConfig is Dynamo's SLA policy on a disaggregated deployment, both loops (1 s load
// and 4 s throughput ticks), with the engine simulator's test profile.
func slaDisaggConfig() config.Config {
	cfg := config.Default()
	cfg.Mode, cfg.Environment, cfg.OptimizationTarget, cfg.MaxGPUBudget = config.ModeDisagg, config.EnvNoop, config.TargetSLA, -1
	cfg.EnableLoadScaling, cfg.LoadAdjustmentIntervalSeconds, cfg.ThroughputAdjustmentIntervalSeconds = true, 1, 4
	cfg.TTFTMs, cfg.ITLMs, cfg.ProfileResultsDir = 300, 20, filepath.Join("..", "sim", "engine", "testdata")
	return cfg
}

// TestHistoryCostPerTickSLADisagg runs an SLA disaggregated planner of 16 engines (Dynamo's
// policy, both loops, a profile) on a real dev server and measures the history events and
// bytes a steady tick costs, by event type: at most 12 events and 4 KB.
func TestHistoryCostPerTickSLADisagg(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := temporaltest.Start(t)
	c := srv.Client()
	const queue = "history-cost"
	w := sdkworker.New(c, queue, sdkworker.Options{Interceptors: workflows.Interceptors()})
	worker.Register(w, &activities.Activities{Unhosted: slaDisaggScript(), NoopJournalDir: t.TempDir()})
	require.NoError(t, w.Start())
	defer w.Stop()

	cfg := slaDisaggConfig()
	d := workflows.Deployment{Namespace: "cost", Name: "llama"}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: d.WorkflowID(), TaskQueue: queue}, workflows.WorkflowName,
		workflows.Input{Deployment: d, Config: cfg, InitialPrefill: 8, InitialDecode: 8})
	require.NoError(t, err)
	pc := plannerclient.New(c, d)
	const ticks = 24
	for {
		s, err := pc.State(ctx)
		if err == nil && s.Ticks >= ticks {
			break
		}
		require.NoError(t, ctx.Err())
		time.Sleep(200 * time.Millisecond)
	}
	require.NoError(t, c.TerminateWorkflow(ctx, d.WorkflowID(), run.GetRunID(), "measured"))

	iter := c.GetWorkflowHistory(ctx, d.WorkflowID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	type span struct{ events, bytes int }
	var timers []int // indexes of TimerFired events
	var sizes []int
	var kinds []enumspb.EventType
	for iter.HasNext() {
		e, err := iter.Next()
		require.NoError(t, err)
		kinds = append(kinds, e.GetEventType())
		sizes = append(sizes, e.Size())
		if e.GetEventType() == enumspb.EVENT_TYPE_TIMER_FIRED {
			timers = append(timers, len(kinds)-1)
		}
	}
	require.GreaterOrEqual(t, len(timers), 10)
	// Steady ticks: from the 4th timer firing to the last (the first ticks warm up the models).
	from, to := timers[3], timers[len(timers)-1]
	n := len(timers) - 4
	byKind := map[enumspb.EventType]*span{}
	total := span{}
	for i := from; i < to; i++ {
		s := byKind[kinds[i]]
		if s == nil {
			s = &span{}
			byKind[kinds[i]] = s
		}
		s.events++
		s.bytes += sizes[i]
		total.events++
		total.bytes += sizes[i]
	}
	var names []enumspb.EventType
	for k := range byKind {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return byKind[names[i]].bytes > byKind[names[j]].bytes })
	for _, k := range names {
		t.Logf("  %-50s %5.1f events/tick %7.0f bytes/tick", k, float64(byKind[k].events)/float64(n), float64(byKind[k].bytes)/float64(n))
	}
	perTickEvents, perTickBytes := float64(total.events)/float64(n), float64(total.bytes)/float64(n)
	t.Logf("SLA disagg planner, 16 engines: %.1f history events and %.0f bytes per tick over %d ticks", perTickEvents, perTickBytes, n)
	// Before history generation 3 (three observe activities, the whole decision-core state
	// recorded by the Decide local activity, FPMs as objects): 16.1 events and 16,115 bytes.
	require.LessOrEqual(t, perTickEvents, 12.0, "history events per tick")
	require.LessOrEqual(t, perTickBytes, 4096.0, "history bytes per tick")
}
