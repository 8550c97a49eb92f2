package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/internal/scripted"
	"github.com/llmplanner/planner/internal/temporaltest"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/plannerclient"
	"github.com/llmplanner/planner/scaling"
	"github.com/llmplanner/planner/workflows"
)

// The randomized durability test: an SLA planner (disaggregated, perf model from a profile,
// load loop every second, noop connector journaling every decision it applies) runs twice
// on two dev servers with the same scripted observations (keyed by tick) and the same
// operator updates. One run is left alone. In the other, the worker process is SIGKILLed 20
// times — a "simulated hour" of 60 one-minute ticks at 1 s each — at points drawn from a
// seed (PLANNER_DURABILITY_SEED, logged): after an observation was read and before it was
// recorded, after Decide ran in workflow code and before its workflow task completed, after
// the connector applied a decision and before the activity completed, after an operator
// update was handled, at Continue-As-New, and at random moments; and its dev server is
// SIGKILLed (not stopped) once and restarted on the same SQLite file. Both runs must make the
// same decision at every tick, and the faulty run's connector must apply each decision once.
// The faulty worker also hosts a local deployment (durability_local_test.go), interrupted by
// the same kills, whose connector must neither double an apply nor orphan a process.

const (
	randomTicks  = 60
	randomFaults = 20
	// localApplyFaults: the faulty worker is killed right after the local connector applied
	// two of the local planner's first localApplyFaults decisions; the test waits for
	// localMinDecisions of them.
	localApplyFaults  = 4
	localMinDecisions = 5
)

// randomScript: the load moves between six levels every five ticks, so the SLA planner's
// reasons change often. (The noop connector's deployment never moves, so Dynamo's load loop,
// which steps one replica from the ready count, decides the same targets again and again: the
// decisions applied are few, the tick outcomes many.)
func randomScript(t *testing.T) string {
	caps := &scaling.WorkerCapabilities{
		Prefill: &scaling.EngineCapabilities{NumGPU: 1, MaxNumBatchedTokens: 8192, ContextLength: 16384},
		Decode:  &scaling.EngineCapabilities{NumGPU: 1, MaxKVTokens: 100000, MaxNumSeqs: 256, ContextLength: 16384},
	}
	var entries []scripted.ScriptEntry
	for k := int64(0); k <= randomTicks+10; k++ {
		level := []int64{1, 3, 5, 2, 6, 4, 1, 5, 3, 6, 2, 4}[(k/5)%12]
		entries = append(entries, scripted.ScriptEntry{FromTick: k, Capabilities: caps,
			PrefillEngine: &perf.FPM{WallTime: 0.05, Scheduled: perf.ScheduledRequests{NumPrefillRequests: 2, SumPrefillTokens: 6000 + 100*(k%3)},
				Queued: perf.QueuedRequests{NumPrefillRequests: 3 * (level - 1), SumPrefillTokens: 9000 * (level - 1)}},
			DecodeEngine: &perf.FPM{WallTime: 0.012, Scheduled: perf.ScheduledRequests{NumDecodeRequests: 15 * level, SumDecodeKVTokens: 15000*level + 500*(k%4)}},
			Traffic:      &scripted.ScriptTraffic{RequestsPerSecond: 4, ISL: 3000, OSL: 300}})
	}
	b, err := json.Marshal(scripted.Script{Entries: entries})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "script.json")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

func randomConfig() config.Config {
	c := config.Default()
	c.Mode, c.Environment, c.OptimizationTarget, c.MaxGPUBudget = config.ModeDisagg, config.EnvNoop, config.TargetSLA, 12
	c.EnableThroughputScaling, c.EnableLoadScaling, c.LoadAdjustmentIntervalSeconds = false, true, 1
	c.TTFTMs, c.ITLMs = 300, 20
	if root, err := filepath.Abs(filepath.Join("..", "..", "sim", "engine", "testdata")); err == nil {
		c.ProfileResultsDir = root
	}
	return c
}

// faultPlan draws the fault points: the PLANNER_FAULTS entries and the ticks of the random
// kills and of the server crash.
type faultPlan struct {
	entries     []string
	randomKills []int64
	crashAt     int64
}

func drawFaults(seed uint64) faultPlan {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	var p faultPlan
	pick := func(n int, lo, hi int64) []int64 {
		seen := map[int64]bool{}
		var out []int64
		for len(out) < n {
			v := lo + rng.Int64N(hi-lo+1)
			if !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
		}
		slices.Sort(out)
		return out
	}
	for _, v := range pick(5, 2, randomTicks-4) {
		p.entries = append(p.entries, fmt.Sprintf("%s@%d", faultAfterObserve, v))
	}
	for _, v := range pick(5, 2, randomTicks-6) {
		p.entries = append(p.entries, fmt.Sprintf("%s@%d", faultInline, v))
	}
	// The first decision (the noop deployment never moves: later ones are few, see randomScript).
	p.entries = append(p.entries, fmt.Sprintf("%s@%d", faultAfterApply, 1))
	for _, v := range pick(2, 1, localApplyFaults) { // the local planner's decisions
		p.entries = append(p.entries, fmt.Sprintf("%s@%d", faultAfterApplyLocal, v))
	}
	// Three operator updates are sent; the hosted local planner's start (update-with-start,
	// on every worker start) counts too.
	for _, v := range pick(2, 1, 3) {
		p.entries = append(p.entries, fmt.Sprintf("%s@%d", faultUpdate, v))
	}
	for _, v := range pick(2, 1, 2) { // at least three Continue-As-New in 60 ticks
		p.entries = append(p.entries, fmt.Sprintf("%s@%d", faultCAN, v))
	}
	p.randomKills = pick(randomFaults-len(p.entries), 5, randomTicks-5)
	p.crashAt = 20 + rng.Int64N(20)
	return p
}

// journalDecisions reads the noop connector's journal of one deployment: the decision ids
// and targets applied, in order.
func journalDecisions(t *testing.T, dir string, d workflows.Deployment) []string {
	f, err := os.Open(filepath.Join(dir, "planner_"+d.Namespace+"_"+d.Name+".jsonl"))
	require.NoError(t, err)
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			out = append(out, line)
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// collectOutcomes polls a planner's diagnostics until tick upTo is recorded and returns every
// tick's outcome (the ring keeps 24 ticks: polling merges them).
func collectOutcomes(ctx context.Context, pc *plannerclient.Client, upTo int64) (map[int64]tickOutcome, error) {
	seen := map[int64]tickOutcome{}
	for {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		recs, err := pc.Diagnostics(qctx)
		cancel()
		if err == nil {
			for _, o := range outcomesOf(recs, upTo) {
				seen[o.Tick] = o
			}
			if _, done := seen[upTo]; done {
				return seen, nil
			}
		}
		if ctx.Err() != nil {
			return seen, fmt.Errorf("waiting for tick %d of %s: %w (last error %v; %d ticks seen)", upTo, pc.WorkflowID(), ctx.Err(), err, len(seen))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func TestRandomizedDurability(t *testing.T) {
	seed := uint64(1)
	if s := os.Getenv("PLANNER_DURABILITY_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "PLANNER_DURABILITY_SEED")
		seed = v
	}
	plan := drawFaults(seed)
	t.Logf("seed %d: faults %s; random kills at ticks %v; dev server crash at tick %d", seed, strings.Join(plan.entries, ","), plan.randomKills, plan.crashAt)

	script := randomScript(t)
	ls := newLocalSide(t)
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	canArg := fmt.Sprintf("limit.historyCount.suggestContinueAsNew=%d", 150)
	d := workflows.Deployment{Namespace: "random", Name: "sla"}

	type side struct {
		name    string
		srv     *temporaltest.Server
		journal string
		worker  *workerProc
		pc      *plannerclient.Client
	}
	var sides []*side
	for _, name := range []string{"steady", "faulty"} {
		s := &side{name: name, srv: temporaltest.Start(t, "--dynamic-config-value", canArg), journal: t.TempDir()}
		faults, hosts := "", []string(nil)
		if name == "faulty" {
			faults, hosts = strings.Join(plan.entries, ","), []string{"--deployments", ls.deployments}
		}
		s.worker = startWorkerProc(t, s.srv.HostPort, "random-"+name, script, s.journal, faults, hosts...)
		_, err := s.srv.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: d.WorkflowID(), TaskQueue: "random-" + name, WorkflowTaskTimeout: 2 * time.Second},
			workflows.WorkflowName, workflows.Input{Deployment: d, Config: randomConfig(), InitialPrefill: 1, InitialDecode: 1})
		require.NoError(t, err)
		s.pc = plannerclient.New(s.srv.Client(), d)
		sides = append(sides, s)
	}

	// Per side: operator updates at ticks 15, 30 and 45 (the SLA again: accepted, recorded,
	// deciding nothing different), retried with the same update id until answered.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	cfg := randomConfig()
	for _, s := range sides {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, at := range []int64{15, 30, 45} {
				for {
					st, err := stateOf(ctx, s.pc)
					if err == nil && st.Ticks >= at {
						break
					}
					if ctx.Err() != nil {
						errs <- fmt.Errorf("%s: waiting for tick %d: %w", s.name, at, ctx.Err())
						return
					}
					time.Sleep(200 * time.Millisecond)
				}
				id := fmt.Sprintf("sla-%d", i+1)
				for {
					uctx, cancel := context.WithTimeout(ctx, 20*time.Second)
					h, err := s.srv.Client().UpdateWorkflow(uctx, client.UpdateWorkflowOptions{WorkflowID: d.WorkflowID(), UpdateID: id,
						UpdateName: workflows.UpdateSetSLA, WaitForStage: client.WorkflowUpdateStageCompleted,
						Args: []any{workflows.SetSLARequest{TTFTMs: &cfg.TTFTMs, ITLMs: &cfg.ITLMs}}})
					if err == nil {
						var res workflows.Result
						err = h.Get(uctx, &res)
					}
					cancel()
					if err == nil {
						break
					}
					if ctx.Err() != nil {
						errs <- fmt.Errorf("%s: update %s: %w", s.name, id, err)
						return
					}
					time.Sleep(300 * time.Millisecond)
				}
			}
		}()
	}
	// The faulty side: random kills and one server crash, at their ticks; and, until the
	// local planner is checked, its frontend's rate moved with the ticks and its decisions
	// collected.
	faulty := sides[1]
	localPC := plannerclient.New(faulty.srv.Client(), localDeployment)
	localDecisions := &decisionLog{}
	stopLocal := make(chan struct{})
	localDone := make(chan struct{})
	go func() {
		defer close(localDone)
		for {
			select {
			case <-stopLocal:
				return
			case <-time.After(250 * time.Millisecond):
			}
			if st, err := stateOf(ctx, faulty.pc); err == nil {
				ls.frontend.setRate(localRates[(st.Ticks/localRatePeriod)%int64(len(localRates))])
			}
			if v, err := stateOf(ctx, localPC); err == nil {
				localDecisions.merge(v)
			}
		}
	}()
	defer func() {
		select {
		case <-stopLocal:
		default:
			close(stopLocal)
		}
		<-localDone
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		kills := slices.Clone(plan.randomKills)
		crashed := false
		for len(kills) > 0 || !crashed {
			st, err := stateOf(ctx, faulty.pc)
			if ctx.Err() != nil {
				errs <- fmt.Errorf("faulty: random kills: %w", ctx.Err())
				return
			}
			if err == nil && len(kills) > 0 && st.Ticks >= kills[0] {
				faulty.worker.kill()
				kills = kills[1:]
			}
			if err == nil && !crashed && st.Ticks >= plan.crashAt {
				faulty.srv.Crash()
				crashed = true
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()

	outcomes := make([]map[int64]tickOutcome, len(sides))
	for i, s := range sides {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := collectOutcomes(ctx, s.pc, randomTicks)
			if err != nil {
				errs <- fmt.Errorf("%s: %w", s.name, err)
			}
			outcomes[i] = o
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	reasons := map[string]int{}
	for k := int64(1); k <= randomTicks; k++ {
		reasons["prefill "+outcomes[0][k].PrefillReason]++
		reasons["decode "+outcomes[0][k].Reason]++
		require.Contains(t, outcomes[0], k, "steady run: tick %d", k)
		require.Contains(t, outcomes[1], k, "faulty run: tick %d", k)
		require.Equal(t, outcomes[0][k], outcomes[1][k], "tick %d: the interrupted planner decided as the uninterrupted one", k)
	}
	t.Logf("60 tick outcomes equal; load reasons %v", reasons)
	steadyJ, faultyJ := journalDecisions(t, sides[0].journal, d), journalDecisions(t, sides[1].journal, d)
	n := min(len(steadyJ), len(faultyJ))
	require.GreaterOrEqual(t, n, 1, "the planner decided")
	require.Equal(t, steadyJ[:n], faultyJ[:n], "the connector applied the same decisions in the same order")
	ids := map[string]bool{}
	for _, line := range faultyJ {
		var rec struct {
			DecisionID int64 `json:"decision_id"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		key := strconv.FormatInt(rec.DecisionID, 10)
		require.False(t, ids[key], "decision %d applied twice", rec.DecisionID)
		ids[key] = true
	}
	t.Logf("%d decisions applied, each once", len(faultyJ))

	// The local planner: enough decisions applied, then no doubled apply and no orphan.
	var lastErr error
	for {
		v, err := stateOf(ctx, localPC)
		if lastErr = err; err == nil {
			localDecisions.merge(v)
			if n := len(v.Decisions); n > 0 && v.Decisions[n-1].ID >= localMinDecisions && reached(v.Decisions[n-1]) {
				break
			}
		}
		require.NoError(t, ctx.Err(), "the local planner applies %d decisions (decisions seen %v; last query error %v)",
			localMinDecisions, targetsOf(localDecisions.sorted()), lastErr)
		time.Sleep(300 * time.Millisecond)
	}
	close(stopLocal)
	<-localDone
	checkLocalSide(t, ctx, ls, localPC, localDecisions)
	// Every fault point fired exactly once (the worker logs each before it dies); a random
	// kill may land while the worker is already down, so the restarts are at least the points
	// plus one.
	logged, err := os.ReadFile(faulty.worker.log.Name())
	require.NoError(t, err)
	for _, e := range plan.entries {
		require.Equal(t, 1, strings.Count(string(logged), "point="+e+"\n"), "fault point %s fired once", e)
	}
	restarts := faulty.worker.restartCount()
	t.Logf("faulty worker restarts: %d (fault points %d + random kills %d)", restarts, len(plan.entries), len(plan.randomKills))
	require.GreaterOrEqual(t, restarts, len(plan.entries)+1)
}
