package evaluate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/predict"
	"github.com/llmplanner/planner/sim/replay"
)

// Row kinds.
const (
	KindPolicy    = "policy"     // a planner configuration of the scenario
	KindOracle    = "oracle"     // the hindsight oracle
	KindStatic    = "static"     // the best static deployment
	KindSLOStatic = "slo-static" // the smallest static deployment reaching Scenario.SLOGoodput
	KindSLOOracle = "slo-oracle" // the cheapest oracle run found reaching Scenario.SLOGoodput (else the one with the most goodput)
	KindSweep     = "startup"    // the sweep policy at another startup delay
	KindPredictor = "predictor"  // the sweep policy driven by another load predictor
)

// Plan is what Run evaluates.
type Plan struct {
	// Scenario supplies the SLAs, target, startup delay, budget and policies.
	Scenario *Scenario
	// Requests is the trace; TraceDesc describes it.
	Requests  []predict.Request
	TraceDesc string
	// Profile is the engines' timing model and the planner's perf model.
	Profile *perf.Profile
	// Oracle and Static add the hindsight oracle and the best static deployment (each also
	// at the scenario's SLOGoodput when it is above its GoodputTarget: the slo-oracle and
	// slo-static rows). NoSLOOracle leaves the slo-oracle row out (five more oracle runs).
	Oracle, Static, NoSLOOracle bool
	// SweepPolicy names the policy the startup sweep runs (empty: the first policy), and
	// PredictorPolicy the one the predictor comparison runs (empty: SweepPolicy).
	SweepPolicy, PredictorPolicy string
	// StartupSweep runs SweepPolicy at each of these startup delays.
	StartupSweep []time.Duration
	// Predictors runs PredictorPolicy with each of these load predictors, and backtests them on
	// the trace at PredictorIntervals (default 60 s and 180 s).
	Predictors         []string
	PredictorIntervals []time.Duration
	// Parallel bounds the replays run at once (≤ 0: 1).
	Parallel int
	// Progress, when set, is called about every ProgressEvery (default 1 s) and at the end.
	Progress      func(Progress)
	ProgressEvery time.Duration
	// Ticks keeps every planner run's per-tick timeline on its row (Row.Ticks): the pools
	// each tick saw, its decision, the loops' reasons and the policy's notes — what the
	// planner decided and why, as the workflow's ticks say it live. The ahead policy's come
	// to about 1.2 KB a tick in the indented JSON report: about 0.9 MB an hour at 5 s ticks.
	Ticks bool

	start [2]int // the policies' initial deployment (set by Run)
}

// Progress is a snapshot of a running evaluation.
type Progress struct {
	// Done and Total count the replays.
	Done, Total int
	// Running are the replays under way with the share of their requests finished.
	Running []RunProgress
}

// RunProgress is one running replay.
type RunProgress struct {
	Name     string
	Fraction float64
}

// Row is one replay's scores.
type Row struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Policy is the scenario policy a policy, startup or predictor row ran.
	Policy string `json:"policy,omitempty"`
	// StartupS is the startup delay the replay ran with.
	StartupS float64 `json:"startup_s"`
	// Deployment describes a static deployment or the oracle's range ("2P 2D", "1–3P 1–4D").
	Deployment string `json:"deployment,omitempty"`
	// OverBudget is set on the best-static row when no deployment within the GPU budget
	// meets the goodput target (the row is then the budget's best split).
	OverBudget bool `json:"over_budget,omitempty"`
	Requests   int  `json:"requests"`
	Finished   int  `json:"finished"`
	// Good counts the scored requests within both SLAs; Goodput is their share.
	Good    int     `json:"good"`
	Goodput float64 `json:"goodput"`
	// WarmGoodput is the goodput of the requests arriving from WarmFromS, two of the
	// scenario's startup delays after the scoring start: the first arrivals engines ordered
	// on the scored traffic can serve (one startup to be ready, one for the traffic that
	// asked for them to arrive). What a run loses before then is its cold start, which a
	// planner running for the deployment's life pays once; nil when no request arrives from
	// then on. The delay is the scenario's, not the row's StartupS, so every row counts the
	// same requests: a sweep row replayed at a longer startup is still partly cold there,
	// and with a startup of 0 the warm goodput is the goodput.
	WarmGoodput *float64 `json:"goodput_warm"`
	WarmFromS   float64  `json:"warm_from_s"`
	// Misses split the finished requests that are not good by the SLA they miss: the TTFT
	// only, the ITL only, or both (replay.Scores).
	replay.Misses
	// ScoredSeconds is the span the GPU-hours cover: from the scoring start to the replay's
	// end (its last completion).
	ScoredSeconds float64            `json:"scored_s"`
	TTFT          replay.Percentiles `json:"ttft_ms"`
	ITL           replay.Percentiles `json:"itl_ms"`
	// GPUHours is the provisioned (starting + ready + draining) GPU-hours, 1 GPU per engine.
	GPUHours        float64 `json:"gpu_hours"`
	PrefillGPUHours float64 `json:"prefill_gpu_hours"`
	DecodeGPUHours  float64 `json:"decode_gpu_hours"`
	// GPUHoursPer1kGood is GPU-hours per 1,000 good requests (+Inf without any: JSON null).
	GPUHoursPer1kGood *float64 `json:"gpu_hours_per_1k_good"`
	ScaleActions      int      `json:"scale_actions"`
	Reversals         int      `json:"reversals"`
	PeakPrefill       int      `json:"peak_prefill"`
	PeakDecode        int      `json:"peak_decode"`
	// Note says what else matters (infeasible oracle intervals, trial replays, prefix
	// reuse).
	Note string `json:"note,omitempty"`
	// KVHitRate is the KV router's mean hit rate (router kv only); PrefixHitShare the share
	// of prompt tokens the engines' prefix caches skipped (prefix_cache only).
	KVHitRate      float64 `json:"kv_hit_rate,omitempty"`
	PrefixHitShare float64 `json:"prefix_hit_share,omitempty"`
	// WallSeconds is how long the replay (or search) took.
	WallSeconds float64 `json:"wall_seconds"`
	// Timeline is the per-interval view (TimelineStepSeconds buckets of arrival time).
	Timeline []Interval `json:"timeline"`
	// Replicas are the pools' changes over time.
	Replicas []replay.ReplicaSample `json:"replicas"`
	// Ticks is the planner's per-tick timeline (Plan.Ticks; planner runs only).
	Ticks []replay.TimelineEntry `json:"ticks,omitempty"`
}

// TimelineStepSeconds is the width of a Row's timeline buckets.
const TimelineStepSeconds = 60

// Interval is one bucket of a replay's timeline.
type Interval struct {
	// At is the bucket's start in seconds; Requests the arrivals in it.
	At       float64 `json:"at"`
	Requests int     `json:"requests"`
	// Goodput is the bucket's share of good requests (1 without requests).
	Goodput float64 `json:"goodput"`
	// Misses split the bucket's finished requests that are not good by the SLA they miss,
	// as a row's do (replay.Scores).
	replay.Misses
	// TTFTMs and ITLMs are the bucket's finished requests' means (of their finite latencies).
	TTFTMs float64 `json:"ttft_ms"`
	ITLMs  float64 `json:"itl_ms"`
	// Prefill and Decode are the engines provisioned (starting + ready + draining) at its end.
	Prefill int `json:"prefill"`
	Decode  int `json:"decode"`
}

// PredictorScore is one predictor's one-step-ahead error on the trace's request counts.
type PredictorScore struct {
	Predictor string   `json:"predictor"`
	IntervalS float64  `json:"interval_s"`
	MAPEPct   *float64 `json:"mape_pct"`
	MAE       float64  `json:"mae"`
	Intervals int      `json:"intervals"`
	Fallbacks int      `json:"fallbacks"`
}

// Report is an evaluation's outcome.
type Report struct {
	Scenario      string  `json:"scenario"`
	Description   string  `json:"description,omitempty"`
	Trace         string  `json:"trace"`
	Requests      int     `json:"requests"`
	TraceSeconds  float64 `json:"trace_seconds"`
	TTFTMs        float64 `json:"ttft_sla_ms"`
	ITLMs         float64 `json:"itl_sla_ms"`
	GoodputTarget float64 `json:"goodput_target"`
	// SLOGoodput is the goodput the policies are held to (the slo-oracle and slo-static rows'
	// target).
	SLOGoodput   float64 `json:"slo_goodput"`
	StartupS     float64 `json:"startup_s"`
	MaxGPUBudget int     `json:"max_gpu_budget"`
	// ScoredFromS is when scoring starts: the rows count the requests arriving from then on
	// and the GPU-seconds provisioned from then on (the first startup window is scored for
	// no one, since the runs start from different deployments).
	ScoredFromS float64 `json:"scored_from_s"`
	// Mode is the deployment shape simulated (disagg or agg).
	Mode string `json:"mode"`
	// InitialPrefill and InitialDecode are the deployment the policies start from (agg:
	// InitialDecode aggregated engines, InitialPrefill 0).
	InitialPrefill int `json:"initial_prefill"`
	InitialDecode  int `json:"initial_decode"`
	// InitialGiven reports that the scenario gave the initial deployment (else it is the
	// smallest static deployment serving the first StartWindowSeconds).
	InitialGiven bool `json:"initial_given,omitempty"`
	// Published is the published result the scenario reproduces (nil: none).
	Published *Published `json:"published,omitempty"`
	// LowerBoundGPUHours is LowerBound over the scored requests.
	LowerBoundGPUHours float64 `json:"lower_bound_gpu_hours"`
	// Oracle says which oracle was built.
	Oracle string `json:"oracle,omitempty"`
	// Router and PrefixCache are the scenario's routing mode and prefix cache.
	Router      string `json:"router"`
	PrefixCache bool   `json:"prefix_cache"`
	Rows        []Row  `json:"rows"`
	// Predictors are the backtests of the predictor comparison.
	Predictors []PredictorScore `json:"predictors,omitempty"`
	// WallSeconds is the whole evaluation's wall time.
	WallSeconds float64 `json:"wall_seconds"`
}

// OracleDescription says which oracle Oracle rows are.
const OracleDescription = "simulation-based hindsight oracle: every interval, the smallest prefill then decode " +
	"counts whose trial replays (from the real state, later arrivals included) serve that interval's " +
	"arrivals at the goodput target; engines are ordered one startup delay ahead and charged for it"

// job is one replay of an evaluation.
type job struct {
	name string
	run  func(progress func(done, total int)) (Row, error)
}

// warmStart is when a run scored from scoredFrom is warm: two startup delays later, one for
// the traffic that asks for engines to arrive and one for them to start (Row.WarmFromS).
func warmStart(scoredFrom, startup float64) float64 { return scoredFrom + 2*startup }

// Run evaluates the plan. Replays run in parallel; the rows come back in a fixed order:
// the policies, the oracle, the best static deployment, the scenario's static deployments,
// the sweep, the predictors.
func Run(ctx context.Context, p Plan) (*Report, error) {
	sc := p.Scenario
	if sc == nil || p.Profile == nil || len(p.Requests) == 0 {
		return nil, errors.New("evaluate: a scenario, a profile and requests are needed")
	}
	start := time.Now()
	rep := &Report{Scenario: sc.Name, Description: sc.Description, Trace: p.TraceDesc, Requests: len(p.Requests),
		TTFTMs: sc.SLA.TTFTMs, ITLMs: sc.SLA.ITLMs, GoodputTarget: sc.GoodputTarget, SLOGoodput: sc.SLOGoodput,
		StartupS: sc.StartupSeconds, MaxGPUBudget: sc.MaxGPUBudget, ScoredFromS: sc.ScoredFrom(), Mode: string(sc.Mode), Router: string(sc.Router),
		PrefixCache: sc.PrefixCache}
	for _, r := range p.Requests {
		rep.TraceSeconds = math.Max(rep.TraceSeconds, r.Arrival)
	}
	var err error
	if p.start[0], p.start[1], err = p.InitialDeployment(); err != nil {
		return nil, err
	}
	rep.InitialPrefill, rep.InitialDecode, rep.InitialGiven = p.start[0], p.start[1], len(sc.Initial) > 0
	rep.Published = sc.Published
	jobs, err := p.jobs()
	if err != nil {
		return nil, err
	}
	if rep.LowerBoundGPUHours, err = LowerBound(p.Requests, p.Profile, sc.SLA.ITLMs, sc.ScoredFrom(), sc.Mode); err != nil {
		return nil, err
	}
	if p.Oracle {
		rep.Oracle = OracleDescription
	}
	rows := make([]Row, len(jobs))
	errs := make([]error, len(jobs))
	fractions := make([]float64, len(jobs))
	state := make([]int, len(jobs)) // 0 waiting, 1 running, 2 done
	var mu sync.Mutex
	snapshot := func() Progress {
		mu.Lock()
		defer mu.Unlock()
		pr := Progress{Total: len(jobs)}
		for i, j := range jobs {
			switch state[i] {
			case 1:
				pr.Running = append(pr.Running, RunProgress{Name: j.name, Fraction: fractions[i]})
			case 2:
				pr.Done++
			}
		}
		return pr
	}
	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		if p.Progress == nil {
			return
		}
		every := p.ProgressEvery
		if every <= 0 {
			every = time.Second
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stopProgress:
				return
			case <-t.C:
				p.Progress(snapshot())
			}
		}
	}()
	par := max(1, p.Parallel)
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for i, j := range jobs {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if ctx.Err() != nil {
				errs[i] = ctx.Err()
				return
			}
			mu.Lock()
			state[i] = 1
			mu.Unlock()
			t0 := time.Now()
			row, err := j.run(func(done, total int) {
				mu.Lock()
				fractions[i] = float64(done) / float64(total)
				mu.Unlock()
			})
			row.WallSeconds = time.Since(t0).Seconds()
			rows[i], errs[i] = row, err
			mu.Lock()
			state[i] = 2
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(stopProgress)
	<-progressDone
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("evaluate %s: %w", jobs[i].name, err)
		}
	}
	rep.Rows = rows
	if len(p.Predictors) > 0 {
		if rep.Predictors, err = p.backtests(); err != nil {
			return nil, err
		}
	}
	rep.WallSeconds = time.Since(start).Seconds()
	if p.Progress != nil {
		p.Progress(snapshot())
	}
	return rep, nil
}

// jobs lists the plan's replays in report order: the policies, the oracle and the oracle at
// the SLO's goodput, the best static deployment and the smallest one at the SLO's goodput,
// the scenario's static deployments, the startup sweep, the predictors.
func (p Plan) jobs() ([]job, error) {
	sc := p.Scenario
	var jobs []job
	cfgs := map[string]config.Config{}
	for _, ps := range sc.Policies {
		cfg, err := sc.PolicyConfig(ps)
		if err != nil {
			return nil, err
		}
		cfgs[ps.Name] = cfg
		jobs = append(jobs, p.policyJob(ps.Name, ps.Name, KindPolicy, cfg, sc.StartupDelay()))
	}
	base := p.replayOptions()
	bounds := sc.searchBounds()
	scoring, err := sc.apply(config.Default())
	if err != nil {
		return nil, err
	}
	if p.Oracle {
		oracle := func(target float64, progress func(int, int)) (Row, error) {
			o := bounds
			o.Options = base
			o.Config, o.StartupDelay, o.Progress, o.Target = scoring, sc.StartupDelay(), progress, target
			res, err := replay.Oracle(p.Requests, o)
			if err != nil {
				return Row{}, err
			}
			row := p.row("oracle", KindOracle, sc.StartupDelay(), res.Result)
			row.Deployment = fmt.Sprintf("%s P, %s D", span(res.Schedule, func(s replay.OracleStep) int { return s.Prefill }),
				span(res.Schedule, func(s replay.OracleStep) int { return s.Decode }))
			if sc.Mode == config.ModeAgg {
				row.Deployment = span(res.Schedule, func(s replay.OracleStep) int { return s.Decode }) + " agg"
			}
			row.Note = fmt.Sprintf("%d trial replays", res.Evaluations)
			if res.Infeasible > 0 {
				row.Note += fmt.Sprintf("; %d of %d intervals missed the target even at the budget", res.Infeasible, len(res.Schedule))
			}
			return row, nil
		}
		// The slo-oracle's first run is the oracle row's: run once, for whichever job asks
		// first (the other waits for it).
		var once sync.Once
		var atTarget Row
		var atTargetErr error
		memo := func(target float64, progress func(int, int)) (Row, error) {
			if target != sc.GoodputTarget {
				return oracle(target, progress)
			}
			once.Do(func() { atTarget, atTargetErr = oracle(target, progress) })
			return atTarget, atTargetErr
		}
		jobs = append(jobs, job{name: "oracle", run: func(progress func(int, int)) (Row, error) {
			return memo(sc.GoodputTarget, progress)
		}})
		if sc.SLOGoodput > sc.GoodputTarget && !p.NoSLOOracle {
			jobs = append(jobs, job{name: "slo-oracle", run: func(progress func(int, int)) (Row, error) {
				return sloOracle(sc.GoodputTarget, sc.SLOGoodput, memo, progress)
			}})
		}
	}
	if p.Static {
		static := func(name, kind string, target float64) job {
			return job{name: name, run: func(progress func(int, int)) (Row, error) {
				o := bounds
				o.Options = base
				o.Config, o.Progress, o.Target, o.ScoredFrom = scoring, progress, target, sc.ScoredFrom()
				res, err := replay.BestStatic(p.Requests, o)
				if err != nil {
					return Row{}, err
				}
				row := p.row(name, kind, 0, res.Result)
				row.Deployment = sc.DeploymentName(res.Prefill, res.Decode)
				row.Note = fmt.Sprintf("%d trial replays", res.Evaluations)
				if kind == KindSLOStatic {
					row.Note = fmt.Sprintf("the smallest reaching the %.0f%% the policies are held to; %s", 100*target, row.Note)
				}
				if !res.Feasible {
					row.OverBudget = true
					row.Note += "; no deployment within the budget meets the target: the split of the whole budget with the most goodput"
				}
				return row, nil
			}}
		}
		jobs = append(jobs, static("best-static", KindStatic, sc.GoodputTarget))
		if sc.SLOGoodput > sc.GoodputTarget {
			jobs = append(jobs, static("slo-static", KindSLOStatic, sc.SLOGoodput))
		}
	}
	for _, d := range sc.Static {
		np, nd := sc.Deployment(d)
		name := sc.StaticName(d)
		jobs = append(jobs, job{name: name, run: func(progress func(int, int)) (Row, error) {
			o := base
			o.Config, o.Static, o.InitialPrefill, o.InitialDecode, o.Progress = scoring, true, np, nd, progress
			res, err := replay.Run(p.Requests, o)
			if err != nil {
				return Row{}, err
			}
			row := p.row(name, KindStatic, 0, res)
			row.Deployment = sc.DeploymentName(np, nd)
			return row, nil
		}})
	}
	sweep := p.SweepPolicy
	if sweep == "" && len(sc.Policies) > 0 {
		sweep = sc.Policies[0].Name
	}
	sweepCfg, ok := cfgs[sweep]
	if !ok && len(p.StartupSweep) > 0 {
		return nil, fmt.Errorf("evaluate: sweep policy %q is not one of the scenario's", sweep)
	}
	for _, d := range p.StartupSweep {
		jobs = append(jobs, p.policyJob(fmt.Sprintf("%s @%gs", sweep, d.Seconds()), sweep, KindSweep, sweepCfg, d))
	}
	predPolicy := p.PredictorPolicy
	if predPolicy == "" {
		predPolicy = sweep
	}
	predCfg, ok := cfgs[predPolicy]
	if !ok && len(p.Predictors) > 0 {
		return nil, fmt.Errorf("evaluate: predictor policy %q is not one of the scenario's", predPolicy)
	}
	if len(p.Predictors) > 0 && predCfg.Ahead() {
		return nil, fmt.Errorf("evaluate: predictor policy %q runs scaling_policy ahead, which uses no load predictor: pick another (--predictor-policy)", predPolicy)
	}
	for _, pred := range p.Predictors {
		cfg := predCfg
		cfg.LoadPredictor = pred
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("evaluate: predictor %q: %w", pred, err)
		}
		jobs = append(jobs, p.policyJob(fmt.Sprintf("%s/%s", predPolicy, pred), predPolicy, KindPredictor, cfg, sc.StartupDelay()))
	}
	return jobs, nil
}

// StartWindowSeconds is the start of the trace whose smallest serving deployment the
// policies start from.
const StartWindowSeconds = 60

// InitialDeployment is the deployment the policies start from: the scenario's initial one
// when it gives one, else the smallest static one that serves the requests of the first
// StartWindowSeconds at the goodput target (a planner takes over a deployment sized for the
// load of the moment, not one engine per pool).
func (p Plan) InitialDeployment() (prefill, decode int, err error) {
	sc := p.Scenario
	if len(sc.Initial) > 0 {
		prefill, decode = sc.Deployment(sc.Initial)
		return prefill, decode, nil
	}
	var first []predict.Request
	for _, r := range p.Requests {
		if r.Arrival < StartWindowSeconds {
			first = append(first, r)
		}
	}
	if len(first) == 0 {
		if sc.Mode == config.ModeAgg {
			return 0, 1, nil
		}
		return 1, 1, nil
	}
	scoring, err := sc.apply(config.Default())
	if err != nil {
		return 0, 0, err
	}
	o := sc.searchBounds()
	o.Options = p.replayOptions()
	o.Options.Config = scoring
	res, err := replay.BestStatic(first, o)
	if err != nil {
		return 0, 0, fmt.Errorf("evaluate: initial deployment: %w", err)
	}
	return res.Prefill, res.Decode, nil
}

// searchBounds are the oracle's and the static search's target, bounds and interval: both
// pools together within the GPU budget the policies are held to, each up to the budget less
// one engine of the other (agg: the one pool up to the budget).
func (sc *Scenario) searchBounds() replay.OracleOptions {
	o := replay.OracleOptions{Target: sc.GoodputTarget, MaxPrefill: sc.MaxGPUBudget - 1, MaxDecode: sc.MaxGPUBudget - 1, MaxTotal: sc.MaxGPUBudget,
		Interval: time.Duration(sc.OracleIntervalSeconds * float64(time.Second))}
	if sc.Mode == config.ModeAgg {
		o.MaxPrefill, o.MaxDecode, o.MaxTotal = 0, sc.MaxGPUBudget, 0
	}
	return o
}

// policyJob replays the trace under a planner configuration (of the scenario policy
// policy), from the initial deployment.
func (p Plan) policyJob(name, policy, kind string, cfg config.Config, startup time.Duration) job {
	return job{name: name, run: func(progress func(int, int)) (Row, error) {
		o := p.replayOptions()
		o.Config, o.StartupDelay, o.InitialPrefill, o.InitialDecode, o.Progress = cfg, startup, p.start[0], p.start[1], progress
		res, err := replay.Run(p.Requests, o)
		if err != nil {
			return Row{}, err
		}
		row := p.row(name, kind, startup, res)
		row.Policy = policy
		if p.Ticks {
			row.Ticks = res.Timeline
		}
		return row, nil
	}}
}

// StaticName is the row name of a static deployment of the scenario ([prefill, decode];
// agg: [engines]).
func (sc *Scenario) StaticName(d []int) string {
	return "static " + sc.DeploymentName(sc.Deployment(d))
}

// replayOptions are the options every replay of the plan shares: the profile, the router,
// the prefix cache and the engine settings.
func (p Plan) replayOptions() replay.Options {
	return replay.Options{Profile: p.Profile, Router: p.Scenario.Router, PrefixCache: p.Scenario.PrefixCache,
		EngineConfig: p.Scenario.EngineConfig}
}

// row scores a replay from the plan's scoring start: the requests arriving from then on,
// the GPU-seconds provisioned from then on.
func (p Plan) row(name, kind string, startup time.Duration, res replay.Result) Row {
	from := p.Scenario.ScoredFrom()
	sc := replay.Score(res.Requests, p.Scenario.SLA.TTFTMs, p.Scenario.SLA.ITLMs, from)
	pre, dec := gpuSecondsFrom(res.Replicas, from, res.Duration)
	// GPU-seconds the replay charged outside its pool samples (the oracle's engines, ordered
	// ahead, are charged their startup delay) still count.
	allP, allD := gpuSecondsFrom(res.Replicas, 0, res.Duration)
	pre += math.Max(0, res.PrefillGPUSeconds-allP)
	dec += math.Max(0, res.DecodeGPUSeconds-allD)
	r := Row{Name: name, Kind: kind, StartupS: startup.Seconds(), Requests: sc.Requests, Finished: sc.Finished,
		Good: sc.Good, Goodput: sc.Goodput, Misses: sc.Misses, ScoredSeconds: math.Max(0, res.Duration-from), TTFT: sc.TTFT, ITL: sc.ITL, GPUHours: (pre + dec) / 3600,
		PrefillGPUHours: pre / 3600, DecodeGPUHours: dec / 3600,
		ScaleActions: res.ScaleActions, Reversals: res.Reversals, Replicas: res.Replicas}
	if sc.Good > 0 {
		v := r.GPUHours / float64(sc.Good) * 1000
		r.GPUHoursPer1kGood = &v
	}
	for _, s := range res.Replicas {
		r.PeakPrefill = max(r.PeakPrefill, s.Prefill.Ready+s.Prefill.Starting+s.Prefill.Draining)
		r.PeakDecode = max(r.PeakDecode, s.Decode.Ready+s.Decode.Starting+s.Decode.Draining)
	}
	r.WarmFromS = warmStart(from, p.Scenario.StartupSeconds)
	if w := replay.Score(res.Requests, p.Scenario.SLA.TTFTMs, p.Scenario.SLA.ITLMs, r.WarmFromS); w.Requests > 0 {
		r.WarmGoodput = &w.Goodput
	}
	r.Timeline = timeline(res, p.Scenario.SLA, TimelineStepSeconds)
	r.KVHitRate = res.KVHitRate
	if res.Prefix != nil && res.Prefix.PromptTokens > 0 {
		r.PrefixHitShare = float64(res.Prefix.HitTokens) / float64(res.Prefix.PromptTokens)
	}
	return r
}

// gpuSecondsFrom integrates the engines provisioned (starting, ready and draining, 1 GPU
// each) from from to end, per pool.
func gpuSecondsFrom(samples []replay.ReplicaSample, from, end float64) (prefill, decode float64) {
	for i, s := range samples {
		until := end
		if i+1 < len(samples) {
			until = samples[i+1].At
		}
		lo, hi := math.Max(s.At, from), math.Min(until, end)
		if hi <= lo {
			continue
		}
		prefill += float64(s.Prefill.Ready+s.Prefill.Starting+s.Prefill.Draining) * (hi - lo)
		decode += float64(s.Decode.Ready+s.Decode.Starting+s.Decode.Draining) * (hi - lo)
	}
	return prefill, decode
}

// timeline buckets a replay by arrival time.
func timeline(res replay.Result, sla SLA, step float64) []Interval {
	if len(res.Requests) == 0 {
		return nil
	}
	last := 0.0
	for _, r := range res.Requests {
		last = math.Max(last, r.Arrival)
	}
	n := int(last/step) + 1
	out := make([]Interval, n)
	ttftN, itlN := make([]int, n), make([]int, n)
	good := make([]int, n)
	for i := range out {
		out[i].At = float64(i) * step
	}
	for _, r := range res.Requests {
		b := int(r.Arrival / step)
		out[b].Requests++
		if !r.Finished {
			continue
		}
		// The means leave out a latency that is not a finite number (JSON has none); the
		// split counts it as a miss.
		if !math.IsNaN(r.TTFTMs) && !math.IsInf(r.TTFTMs, 0) {
			out[b].TTFTMs += r.TTFTMs
			ttftN[b]++
		}
		if r.OSL > 1 && !math.IsNaN(r.ITLMs) && !math.IsInf(r.ITLMs, 0) {
			out[b].ITLMs += r.ITLMs
			itlN[b]++
		}
		if out[b].Count(r.Outcome(sla.TTFTMs, sla.ITLMs)) {
			good[b]++
		}
	}
	k := 0
	for i := range out {
		out[i].Goodput = 1
		if out[i].Requests > 0 {
			out[i].Goodput = float64(good[i]) / float64(out[i].Requests)
		}
		if ttftN[i] > 0 {
			out[i].TTFTMs /= float64(ttftN[i])
		}
		if itlN[i] > 0 {
			out[i].ITLMs /= float64(itlN[i])
		}
		end := out[i].At + step
		for k+1 < len(res.Replicas) && res.Replicas[k+1].At <= end {
			k++
		}
		if len(res.Replicas) > 0 {
			s := res.Replicas[k]
			out[i].Prefill = s.Prefill.Ready + s.Prefill.Starting + s.Prefill.Draining
			out[i].Decode = s.Decode.Ready + s.Decode.Starting + s.Decode.Draining
		}
	}
	return out
}

// backtests scores the plan's predictors on the trace's request counts.
func (p Plan) backtests() ([]PredictorScore, error) {
	ivs := p.PredictorIntervals
	if len(ivs) == 0 {
		ivs = []time.Duration{60 * time.Second, 180 * time.Second}
	}
	reqs := append([]predict.Request(nil), p.Requests...)
	sort.SliceStable(reqs, func(a, b int) bool { return reqs[a].Arrival < reqs[b].Arrival })
	var out []PredictorScore
	for _, iv := range ivs {
		windows := predict.Bucket(reqs, iv.Seconds())
		counts := make([]float64, len(windows))
		for i, w := range windows {
			counts[i] = float64(w.Count)
		}
		for _, name := range p.Predictors {
			bt, err := predict.Backtest(predict.Options{Kind: predict.Kind(name), StepSeconds: iv.Seconds()}, counts)
			if err != nil {
				return nil, fmt.Errorf("evaluate: backtest %s at %v: %w", name, iv, err)
			}
			out = append(out, PredictorScore{Predictor: name, IntervalS: iv.Seconds(), MAPEPct: bt.MAPEPct, MAE: bt.MAE,
				Intervals: bt.Intervals, Fallbacks: bt.Fallbacks})
		}
	}
	return out, nil
}

// span formats the range of a schedule's values ("2" or "1–3").
func span(steps []replay.OracleStep, f func(replay.OracleStep) int) string {
	if len(steps) == 0 {
		return "-"
	}
	lo, hi := f(steps[0]), f(steps[0])
	for _, s := range steps {
		lo, hi = min(lo, f(s)), max(hi, f(s))
	}
	if lo == hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d–%d", lo, hi)
}

// sloOracleRuns is how many oracle runs sloOracle makes: the first at the per-interval
// target, then a bisection (from 90%: to 0.4/2⁵ = 1.25 points below it, 0.3 points above).
const sloOracleRuns = 6

// sloOracle is the cheapest oracle schedule found whose goodput over the scored requests
// reaches overall. The oracle holds every interval to a per-interval target, and most
// intervals are easy, so its goodput over the trace lands above or below that target
// (98.4% on rr-5-45 at 90% per interval). sloOracle runs the oracle (oracle) at the
// per-interval target first, then bisects that target over [0.5, 1] (from half the
// per-interval target when that is 0.5 or less; sloOracleRuns runs in all), and keeps the
// run with the fewest GPU-hours among those reaching overall — or, when none does, the one
// with the most goodput, as its note says.
func sloOracle(perInterval, overall float64, oracle func(float64, func(int, int)) (Row, error), progress func(int, int)) (Row, error) {
	var best, fallback Row
	var tried bool
	reached := 0 // the runs reaching overall; best is the cheapest of them
	var bestTarget, fallbackTarget float64
	lo, hi, target := 0.5, 1.0, perInterval
	if perInterval <= lo {
		lo = perInterval / 2
	}
	for run := range sloOracleRuns {
		row, err := oracle(target, func(done, total int) {
			if progress != nil {
				progress(run*total+done, sloOracleRuns*total)
			}
		})
		if err != nil {
			return Row{}, err
		}
		if row.Goodput >= overall {
			if reached == 0 || row.GPUHours < best.GPUHours {
				best, bestTarget = row, target
			}
			reached++
			hi = target
		} else {
			if !tried || row.Goodput > fallback.Goodput {
				fallback, fallbackTarget, tried = row, target, true
			}
			lo = target
		}
		target = (lo + hi) / 2
	}
	row, t := best, bestTarget
	verdict := fmt.Sprintf("the cheapest of the %d of %d runs bisecting that target that reach the %.0f%% the policies are held to",
		reached, sloOracleRuns, 100*overall)
	if reached == 0 {
		row, t = fallback, fallbackTarget
		verdict = fmt.Sprintf("none of %d runs bisecting that target reached the %.0f%% the policies are held to: the one with the most goodput", sloOracleRuns, 100*overall)
	}
	row.Name, row.Kind = "slo-oracle", KindSLOOracle
	row.Note = fmt.Sprintf("the oracle at %.1f%% per interval: %s (that run: %s)", 100*t, verdict, row.Note)
	return row, nil
}
