package evaluate

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/predict"
	"github.com/llmplanner/planner/scaling"
	"github.com/llmplanner/planner/sim/engine"
	"github.com/llmplanner/planner/sim/replay"
	"github.com/llmplanner/planner/sim/router"
)

func profile(t testing.TB) *perf.Profile {
	t.Helper()
	p, err := perf.LoadProfile("../engine/testdata")
	require.NoError(t, err)
	return p
}

// stepTrace is 2 minutes quiet, 2 minutes at 25 req/s, 2 minutes quiet (ISL 3000, OSL 100).
func stepTrace() []predict.Request {
	var out []predict.Request
	add := func(from, to, rate float64) {
		for i := 0; i < int((to-from)*rate); i++ {
			out = append(out, predict.Request{Arrival: from + float64(i)/rate + 0.013, InputTokens: 3000, OutputTokens: 100})
		}
	}
	add(0, 120, 2)
	add(120, 240, 25)
	add(240, 360, 2)
	return out
}

func writeScenario(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.yaml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

const validScenario = `
name: step
trace: {sinusoid: {duration_s: 60, min_rps: 1, max_rps: 2, period_s: 60, isl: 1000, osl: 10, seed: 1}}
sla: {ttft_ms: 200, itl_ms: 10}
goodput_target: 0.9
startup_s: 30
max_gpu_budget: 8
`

func TestLoadScenario(t *testing.T) {
	sc, err := LoadScenario(writeScenario(t, validScenario))
	require.NoError(t, err)
	require.Equal(t, "step", sc.Name)
	require.Equal(t, 30*time.Second, sc.StartupDelay())
	require.Equal(t, 60.0, sc.OracleIntervalSeconds, "default oracle interval")
	require.Len(t, sc.Policies, 3, "the built-in policies by default")
	cfg, err := sc.PolicyConfig(sc.Policies[0])
	require.NoError(t, err)
	require.True(t, cfg.Ahead(), "the planner's own policy first")
	cfg, err = sc.PolicyConfig(sc.Policies[1])
	require.NoError(t, err)
	require.Equal(t, 200.0, cfg.TTFTMs)
	require.Equal(t, 8, cfg.MaxGPUBudget)
	require.Equal(t, 180, cfg.ThroughputAdjustmentIntervalSeconds)
	require.True(t, cfg.EnableLoadScaling && cfg.EnableThroughputScaling)
	th, err := sc.PolicyConfig(sc.Policies[2])
	require.NoError(t, err)
	require.True(t, th.IsEasyMode())
	require.Equal(t, router.LeastLoaded, sc.Router, "least-loaded routing by default")
	require.False(t, sc.PrefixCache)
	sc, err = LoadScenario(writeScenario(t, validScenario+"router: round-robin\nprefix_cache: true\n"))
	require.NoError(t, err)
	require.Equal(t, router.RoundRobin, sc.Router, "Dynamo's spelling")
	require.True(t, sc.PrefixCache)

	for name, tc := range map[string]struct{ body, want string }{
		"unknown key":       {validScenario + "bogus: 1\n", "bogus"},
		"no trace":          {strings.Replace(validScenario, "trace:", "x_trace:", 1), "x_trace"},
		"target":            {strings.Replace(validScenario, "goodput_target: 0.9", "goodput_target: 1.5", 1), "goodput_target"},
		"slo goodput":       {validScenario + "slo_goodput: -0.5\n", "slo_goodput"},
		"sla":               {strings.Replace(validScenario, "ttft_ms: 200", "ttft_ms: 0", 1), "sla"},
		"budget":            {strings.Replace(validScenario, "max_gpu_budget: 8", "max_gpu_budget: 1", 1), "max_gpu_budget"},
		"sinusoid":          {strings.Replace(validScenario, "min_rps: 1", "min_rps: 3", 1), "sinusoid"},
		"unknown builtin":   {validScenario + "policies: [{name: a, builtin: nope}]\n", "unknown builtin"},
		"bad config":        {validScenario + "policies: [{name: a, config: 'load_predictor: crystal_ball'}]\n", "load_predictor"},
		"two sources":       {validScenario + "policies: [{name: a, builtin: dynamo-default, config: 'ttft: 1'}]\n", "exactly one"},
		"static too big":    {validScenario + "static: [[4, 5]]\n", "static[0]"},
		"static empty pool": {validScenario + "static: [[0, 2]]\n", "static[0]"},
		"duplicate policy":  {validScenario + "policies: [{name: a, builtin: dynamo-default}, {name: a, builtin: dynamo-default}]\n", "twice"},
		"initial too big":   {validScenario + "initial: [4, 5]\n", "initial"},
		"initial empty":     {validScenario + "initial: [1, 0]\n", "initial"},
		"scored from":       {validScenario + "scored_from_s: -1\n", "scored_from_s"},
		"scored from huge":  {validScenario + "scored_from_s: 1e300\n", "scored_from_s"},
		"engine seqs":       {validScenario + "engine: {max_num_seqs: 100000}\n", "max_num_seqs"},
		"engine negative":   {validScenario + "engine: {block_size: -1}\n", "block_size"},
		"engine speedup":    {validScenario + "engine: {speedup_ratio: -2}\n", "speedup_ratio"},
		"engine bandwidth":  {validScenario + "engine: {kv_transfer_gbps: .nan}\n", "kv_transfer_gbps"},
		"engine unknown":    {validScenario + "engine: {warp_drive: 1}\n", "warp_drive"},
		"published static":  {validScenario + "static: [[2, 2]]\npublished: {policy: ahead, gains: [{static: [3, 1], goodput_pct: 5}]}\n", "3P 1D is not one"},
		"published policy":  {validScenario + "static: [[2, 2]]\npublished: {policy: nope, gains: [{static: [2, 2], goodput_pct: 5}]}\n", `policy "nope"`},
		"published no gain": {validScenario + "static: [[2, 2]]\npublished: {policy: ahead, gains: []}\n", "1 to 16 gains"},
		"published -100%":   {validScenario + "static: [[2, 2]]\npublished: {policy: ahead, gains: [{static: [2, 2], goodput_pct: -100}]}\n", "-100%"},
		"bad router":        {validScenario + "router: random\n", `router mode "random"`},
		"name a path":       {strings.Replace(validScenario, "name: step", "name: ../step", 1), `name "../step": want 1 to 200 bytes, a file name`},
		"name dot dot":      {strings.Replace(validScenario, "name: step", "name: '..'", 1), `name ".."`},
		"name too long":     {strings.Replace(validScenario, "name: step", "name: "+strings.Repeat("s", 201), 1), "want 1 to 200 bytes"},
		"bad prefix cache":  {validScenario + "prefix_cache: maybe\n", "prefix_cache"},
		"model, no file":    {strings.Replace(validScenario, "trace: {", "trace: {model: GPT-4, ", 1), "model selects a trace file's requests"},
		"speedup, no file":  {strings.Replace(validScenario, "trace: {", "trace: {speedup: 2, ", 1), "cut and compress a trace file"},
		"sinusoid and phases": {strings.Replace(validScenario, "trace: {", "trace: {phases: {isl: 10, osl: 10, steps: [{rps: 1, duration_s: 10}]}, ", 1),
			"exactly one of file, sinusoid and phases"},
		"blank model": {strings.Replace(validScenario, "trace: {sinusoid: {duration_s: 60, min_rps: 1, max_rps: 2, period_s: 60, isl: 1000, osl: 10, seed: 1}}",
			`trace: {file: b.csv, model: " "}`, 1), `model name " " is blank`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := LoadScenario(writeScenario(t, tc.body))
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestScenario_Phases: a load in phases holds each phase's rate (or ramps it) for its
// duration, draws the same requests from the same seed, and says what it is; bad phases are
// errors naming what is wrong.
func TestScenario_Phases(t *testing.T) {
	phases := func(steps string) string {
		return strings.Replace(validScenario, "trace: {sinusoid: {duration_s: 60, min_rps: 1, max_rps: 2, period_s: 60, isl: 1000, osl: 10, seed: 1}}",
			"trace: {phases: {isl: 500, osl: 50, seed: 7, steps: ["+steps+"]}}", 1)
	}
	sc, err := LoadScenario(writeScenario(t, phases("{rps: 40, duration_s: 100}, {rps: 0, duration_s: 200}, {rps: 0, to_rps: 20, duration_s: 100}")))
	require.NoError(t, err)
	reqs, desc, err := sc.Requests(t.TempDir())
	require.NoError(t, err)
	require.Equal(t, "phases: 40 req/s 100 s, then 0 req/s 200 s, then 0→20 req/s 100 s; ISL/OSL exponential 500/50, seed 7", desc)
	count := func(from, to float64) (n int) {
		for _, r := range reqs {
			if r.Arrival >= from && r.Arrival < to {
				n++
			}
		}
		return n
	}
	require.InDelta(t, 4000, count(0, 100), 4*math.Sqrt(4000), "40 req/s for 100 s")
	require.Zero(t, count(100, 300), "nothing while the rate is 0")
	require.InDelta(t, 990, count(300, 400), 4*math.Sqrt(990), "a ramp from 0 to 20 req/s: each second at its start's rate, 9.9 on average")
	require.Less(t, count(300, 350), count(350, 400), "the ramp rises")
	var isl float64
	for _, r := range reqs {
		require.LessOrEqual(t, r.InputTokens+r.OutputTokens, DefaultPhasesMaxTokens)
		isl += float64(r.InputTokens)
	}
	require.InDelta(t, 500, isl/float64(len(reqs)), 25, "exponential prompts of mean 500")
	again, _, err := sc.Requests(t.TempDir())
	require.NoError(t, err)
	require.Equal(t, reqs, again, "the same seed, the same requests")

	for name, tc := range map[string]struct{ steps, want string }{
		"no phase":            {"", "want 1 to 10000 phases"},
		"fractional duration": {"{rps: 1, duration_s: 1.5}", "duration_s 1.5: want a whole number of seconds"},
		"zero duration":       {"{rps: 1, duration_s: 0}", "duration_s 0"},
		"negative rate":       {"{rps: -1, duration_s: 10}", "rps and to_rps must be from 0"},
		"rate too high":       {"{rps: 1, to_rps: 1e9, duration_s: 10}", "rps and to_rps must be from 0"},
		"not a number":        {"{rps: .nan, duration_s: 10}", "rps and to_rps must be from 0"},
		"over a week":         {"{rps: 1, duration_s: 604800}, {rps: 1, duration_s: 1}", "over a week"},
		"too many requests":   {"{rps: 100000, duration_s: 101}", "about 10100000 requests in all, over 10000000"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := LoadScenario(writeScenario(t, phases(tc.steps)))
			require.ErrorContains(t, err, tc.want)
		})
	}
	sc, err = LoadScenario(writeScenario(t, phases("{rps: 0, duration_s: 100}")))
	require.NoError(t, err, "a load of rate 0 is valid; it draws no request")
	_, _, err = sc.Requests(t.TempDir())
	require.ErrorContains(t, err, "the phases drew no request")
	for name, tc := range map[string]struct{ from, to, want string }{
		"no prompt":               {"isl: 500", "isl: 0", "isl (0) and osl (50) are mean token counts"},
		"longer than max_tokens":  {"isl: 500", "isl: 500, max_tokens: 400", "together at most max_tokens (400)"},
		"max_tokens of one":       {"isl: 500", "isl: 500, max_tokens: 1", "max_tokens 1: want 2 to"},
		"a window of a generated": {"trace: {phases", "trace: {from_s: 10, phases", "cut and compress a trace file"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := LoadScenario(writeScenario(t, strings.Replace(phases("{rps: 1, duration_s: 10}"), tc.from, tc.to, 1)))
			require.ErrorContains(t, err, tc.want)
		})
	}
	sc, err = LoadScenario(writeScenario(t, strings.Replace(phases("{rps: 5, duration_s: 60}"), "isl: 500", "isl: 500, max_tokens: 1000", 1)))
	require.NoError(t, err)
	reqs, desc, err = sc.Requests(t.TempDir())
	require.NoError(t, err)
	require.Contains(t, desc, "(at most 1000 tokens a request)")
	for _, r := range reqs {
		require.LessOrEqual(t, r.InputTokens+r.OutputTokens, 1000)
	}
}

// TestScenario_TraceModel: a scenario's trace.model replays one model's requests of a
// BurstGPT trace, and says so in the trace's description; on a trace without models it is
// an error, not every request.
func TestScenario_TraceModel(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.csv"), []byte(`Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
5,ChatGPT,472,18,490,Conversation log
5.5,GPT-4,1087,9,1096,API log
31,ChatGPT,51,313,364,Conversation log
40,GPT-4,12,7,19,API log
`), 0o644))
	body := strings.Replace(validScenario, "trace: {sinusoid: {duration_s: 60, min_rps: 1, max_rps: 2, period_s: 60, isl: 1000, osl: 10, seed: 1}}",
		"trace: {file: b.csv, model: GPT-4}", 1)
	scPath := filepath.Join(dir, "s.yaml")
	require.NoError(t, os.WriteFile(scPath, []byte(body), 0o644))
	sc, err := LoadScenario(scPath)
	require.NoError(t, err)
	reqs, desc, err := sc.Requests(t.TempDir())
	require.NoError(t, err)
	require.Equal(t, []predict.Request{{Arrival: 0, InputTokens: 1087, OutputTokens: 9}, {Arrival: 34.5, InputTokens: 12, OutputTokens: 7}}, reqs)
	require.Contains(t, desc, "b.csv, model GPT-4")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.csv"), []byte("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:04,1,2\n"), 0o644))
	require.NoError(t, os.WriteFile(scPath, []byte(strings.Replace(body, "file: b.csv", "file: a.csv", 1)), 0o644))
	sc, err = LoadScenario(scPath)
	require.NoError(t, err)
	_, _, err = sc.Requests(t.TempDir())
	require.ErrorContains(t, err, "this is an Azure trace")
}

func TestRun_PoliciesOracleStaticSweepAndPredictors(t *testing.T) {
	sc, err := LoadScenario(writeScenario(t, validScenario+"static: [[2, 2]]\n"))
	require.NoError(t, err)
	plan := Plan{Scenario: sc, Requests: stepTrace(), TraceDesc: "step", Profile: profile(t), Oracle: true, Static: true,
		StartupSweep: []time.Duration{0, time.Minute}, Predictors: []string{"constant", "arima"}, PredictorPolicy: PolicyDynamoSLA, Parallel: 2}
	var calls int
	plan.Progress = func(Progress) { calls++ }
	plan.ProgressEvery = time.Millisecond
	rep, err := Run(context.Background(), plan)
	require.NoError(t, err)
	require.Positive(t, calls)

	require.Equal(t, 30.0, rep.ScoredFromS, "scored after the first startup window")
	scored := 0
	for _, q := range plan.Requests {
		if q.Arrival >= rep.ScoredFromS {
			scored++
		}
	}
	require.Less(t, scored, len(plan.Requests))
	var names, kinds []string
	for _, r := range rep.Rows {
		names, kinds = append(names, r.Name), append(kinds, r.Kind)
		require.Equal(t, scored, r.Requests, "%s: the requests after the first startup window are scored", r.Name)
		total := 0
		for _, iv := range r.Timeline {
			total += iv.Requests
		}
		require.Equal(t, len(plan.Requests), total, "%s: the timeline holds every request", r.Name)
		require.Positive(t, r.GPUHours)
		require.InDelta(t, r.GPUHours, r.PrefillGPUHours+r.DecodeGPUHours, 1e-9)
	}
	require.Equal(t, []string{"ahead", "dynamo-sla", "dynamo-default", "oracle", "slo-oracle", "best-static", "slo-static", "static 2P 2D",
		"ahead @0s", "ahead @60s", "dynamo-sla/constant", "dynamo-sla/arima"}, names)
	require.Equal(t, []string{KindPolicy, KindPolicy, KindPolicy, KindOracle, KindSLOOracle, KindStatic, KindSLOStatic, KindStatic, KindSweep,
		KindSweep, KindPredictor, KindPredictor}, kinds)
	oracle, sloOracleRow, static, sloStatic := rep.Rows[3], rep.Rows[4], rep.Rows[5], rep.Rows[6]
	require.Equal(t, "2P 2D", rep.Rows[7].Deployment)
	require.GreaterOrEqual(t, sloOracleRow.Goodput, DefaultSLOGoodput, "the oracle found at the goodput the policies are held to: %s", sloOracleRow.Note)
	require.Contains(t, sloOracleRow.Note, "per interval")
	require.Less(t, rep.LowerBoundGPUHours, sloOracleRow.GPUHours)
	require.Equal(t, DefaultSLOGoodput, rep.SLOGoodput)
	require.GreaterOrEqual(t, sloStatic.Goodput, DefaultSLOGoodput, "the static search at the goodput the policies are held to")
	require.GreaterOrEqual(t, sloStatic.GPUHours, static.GPUHours, "a higher target never needs a smaller deployment")
	require.Positive(t, rep.LowerBoundGPUHours)
	require.Less(t, rep.LowerBoundGPUHours, oracle.GPUHours, "no schedule beats the lower bound")
	require.Less(t, rep.LowerBoundGPUHours, static.GPUHours)
	require.GreaterOrEqual(t, oracle.Goodput, 0.9)
	require.GreaterOrEqual(t, static.Goodput, 0.9)
	require.Less(t, oracle.GPUHours, static.GPUHours, "the oracle follows the step; the static deployment is sized for it")
	require.Regexp(t, `^\d+P \d+D$`, static.Deployment)
	require.Len(t, rep.Predictors, 4, "2 predictors × 60 s and 180 s")

	// Markdown has no wall time: the same plan gives the same text.
	var a, b bytes.Buffer
	require.NoError(t, rep.WriteMarkdown(&a))
	rep2, err := Run(context.Background(), Plan{Scenario: sc, Requests: plan.Requests, TraceDesc: "step", Profile: plan.Profile,
		Oracle: true, Static: true, StartupSweep: plan.StartupSweep, Predictors: plan.Predictors, PredictorPolicy: PolicyDynamoSLA, Parallel: 1})
	require.NoError(t, err)
	require.NoError(t, rep2.WriteMarkdown(&b))
	require.Equal(t, a.String(), b.String())
	require.Contains(t, a.String(), "| best-static | static |")
	require.Contains(t, a.String(), "| slo-static | slo-static |")
	require.Contains(t, a.String(), "| slo-oracle | slo-oracle |")

	var html bytes.Buffer
	require.NoError(t, rep.WriteHTML(&html))
	require.Contains(t, html.String(), "<svg")
	require.Contains(t, html.String(), "Finished requests over the TTFT SLA per 60 s of arrivals")
	require.Contains(t, html.String(), "Finished requests over the ITL SLA per 60 s of arrivals")
	require.NotRegexp(t, `(src|href)="?https?:`, html.String(), "no network asset")
	require.NotContains(t, html.String(), "<script")
	var table bytes.Buffer
	require.NoError(t, rep.WriteTable(&table))
	require.Contains(t, table.String(), "oracle")
}

// TestRun_Ticks: with Plan.Ticks every planner run's row keeps its per-tick timeline — the
// pools, the decision, the observed window and the notes — and the rows without a planner
// keep none; without it no row does.
func TestRun_Ticks(t *testing.T) {
	sc, err := LoadScenario(writeScenario(t, validScenario))
	require.NoError(t, err)
	plan := Plan{Scenario: sc, Requests: stepTrace(), TraceDesc: "step", Profile: profile(t), Static: true,
		StartupSweep: []time.Duration{0}, Parallel: 2, Ticks: true}
	rep, err := Run(context.Background(), plan)
	require.NoError(t, err)
	for _, r := range rep.Rows {
		if r.Kind == KindStatic || r.Kind == KindSLOStatic {
			require.Nil(t, r.Ticks, "%s runs no planner", r.Name)
			continue
		}
		require.NotEmpty(t, r.Ticks, r.Name)
		scaled, observed := false, false
		for i, tk := range r.Ticks {
			if i > 0 {
				require.Greater(t, tk.At, r.Ticks[i-1].At, "%s: ticks in time order", r.Name)
			}
			scaled = scaled || !tk.Decision.Empty()
			observed = observed || (tk.Traffic != nil && tk.Traffic.NumReq != nil && *tk.Traffic.NumReq > 0)
		}
		require.True(t, scaled, "%s: the step is scaled for at some tick", r.Name)
		require.True(t, observed, "%s: the ticks say what traffic they saw", r.Name)
		if r.Policy == PolicyAhead {
			require.Contains(t, strings.Join(r.Ticks[len(r.Ticks)/2].Notes, "\n"), "ahead: demand", "%s: the policy's notes", r.Name)
		}
	}
	// The HTML report gives each run's ticks that scaled, after the charts.
	var html bytes.Buffer
	require.NoError(t, rep.WriteHTML(&html))
	page := html.String()
	for _, r := range rep.Rows {
		if r.Ticks != nil {
			require.Contains(t, page, "What "+r.Name+" decided, tick by tick")
		}
	}
	require.Greater(t, strings.Index(page, "What ahead decided"), strings.LastIndex(page, "</svg>"))
	require.Regexp(t, `<td>(prefill \d+|prefill \d+, decode \d+|decode \d+)</td>`, page)
	require.Contains(t, page, "ahead: demand")

	plan.Ticks = false
	rep, err = Run(context.Background(), plan)
	require.NoError(t, err)
	for _, r := range rep.Rows {
		require.Nil(t, r.Ticks, "%s: no ticks unless asked", r.Name)
	}
	html.Reset()
	require.NoError(t, rep.WriteHTML(&html))
	require.NotContains(t, html.String(), "decided, tick by tick")
}

// TestReport_Decisions: the table of a run's ticks that scaled, disaggregated and
// aggregated (one pool: no prefill column).
func TestReport_Decisions(t *testing.T) {
	four, two, num := 4, 2, 30.0
	ticks := []replay.TimelineEntry{
		{At: 5, Prefill: replay.PoolCounts{Ready: 1}, Decode: replay.PoolCounts{Ready: 2}},
		{At: 10, Prefill: replay.PoolCounts{Ready: 1, Starting: 1}, Decode: replay.PoolCounts{Ready: 2, Draining: 1},
			Decision: scaling.Decision{Prefill: &four, Decode: &two}, Traffic: &scaling.TrafficObservation{DurationS: 5, NumReq: &num},
			Notes: []string{"ahead: a", "ahead: b"}},
	}
	for name, tc := range map[string]struct {
		mode   config.Mode
		header []string
		row    []string
	}{
		"disagg": {config.ModeDisagg, []string{"s", "prefill seen", "decode seen", "decided", "window read", "notes"},
			[]string{"10", "1 +1 starting", "2 −1 draining", "prefill 4, decode 2", "6.0 req/s", "ahead: a · ahead: b"}},
		"agg": {config.ModeAgg, []string{"s", "engines seen", "decided", "window read", "notes"},
			[]string{"10", "2 −1 draining", "engines 2", "6.0 req/s", "ahead: a · ahead: b"}},
	} {
		t.Run(name, func(t *testing.T) {
			rep := &Report{Mode: string(tc.mode)}
			tab, ok := rep.decisions(Row{Name: "ahead", Ticks: ticks})
			require.True(t, ok)
			require.Equal(t, tc.header, tab.Header)
			require.Equal(t, [][]string{tc.row}, tab.Rows, "only the tick that scaled")
			_, ok = rep.decisions(Row{Name: "ahead", Ticks: ticks[:1]})
			require.False(t, ok, "no table for a run that never scaled")
		})
	}
}

// TestRun_InitialScoringEngineAndPublished: a scenario that gives the initial deployment,
// scores every request, overrides the engines and carries published gains.
func TestRun_InitialScoringEngineAndPublished(t *testing.T) {
	body := validScenario + `
initial: [1, 1]
scored_from_s: 0
static: [[2, 2], [1, 1]]
policies: [{name: p, builtin: dynamo-sla}]
published:
  source: a paper
  policy: p
  gains:
    - {static: [2, 2], goodput_pct: 52, goodput_per_gpu_pct: 29}
    - {static: [1, 1], goodput_pct: 700}
`
	sc, err := LoadScenario(writeScenario(t, body))
	require.NoError(t, err)
	plan := Plan{Scenario: sc, Requests: stepTrace(), TraceDesc: "step", Profile: profile(t), StartupSweep: []time.Duration{0, 30 * time.Second}}
	rep, err := Run(context.Background(), plan)
	require.NoError(t, err)
	require.Equal(t, 0.0, rep.ScoredFromS)
	require.True(t, rep.InitialGiven)
	require.Equal(t, [2]int{1, 1}, [2]int{rep.InitialPrefill, rep.InitialDecode})
	byName := map[string]Row{}
	for _, r := range rep.Rows {
		byName[r.Name] = r
		require.Equal(t, len(plan.Requests), r.Requests, "%s: every request is scored", r.Name)
		require.Positive(t, r.ScoredSeconds)
	}
	require.Equal(t, "p", byName["p @30s"].Policy)
	require.Equal(t, "", byName["static 2P 2D"].Policy)
	// The policy at 30 s is the scenario's own run: one row per startup delay in the comparison.
	require.Equal(t, byName["p"].Good, byName["p @30s"].Good)

	intro, tab := rep.published()
	require.NotNil(t, tab)
	require.Contains(t, intro, "Published: a paper.")
	require.Equal(t, []string{"startup s", "p goodput", "GPU-h", "vs 2P 2D goodput (published +52%)",
		"vs 2P 2D goodput/GPU (published +29%)", "vs 1P 1D goodput (published +700%)", "ordering as published"}, tab.Header)
	require.Len(t, tab.Rows, 2, "startup 0 and 30 s")
	require.Equal(t, "0", tab.Rows[0][0])
	require.Equal(t, "30", tab.Rows[1][0])
	p, b := byName["p @30s"], byName["static 2P 2D"]
	require.Equal(t, pct(100*(float64(p.Good)/float64(b.Good)-1)), tab.Rows[1][3])
	require.Equal(t, pct(100*(float64(p.Good)/p.GPUHours/(float64(b.Good)/b.GPUHours)-1)), tab.Rows[1][4])
	one := byName["static 1P 1D"]
	want := "yes"
	if !(p.Good > b.Good && p.Good > one.Good) {
		want = "no"
	}
	require.Equal(t, want, tab.Rows[1][6])

	var md, table, html bytes.Buffer
	require.NoError(t, rep.WriteMarkdown(&md))
	require.Contains(t, md.String(), "| startup s | p goodput | GPU-h |")
	require.Contains(t, md.String(), "(the scenario's initial deployment)")
	require.Contains(t, md.String(), "scored from 0 s (every request counts")
	require.Contains(t, md.String(), fmt.Sprintf("\"Goodput once warm\" counts the requests from %g s, two startups after", 2*sc.StartupSeconds))
	require.Contains(t, md.String(), "| goodput | goodput once warm |")
	for _, r := range rep.Rows {
		warm := "-"
		if r.WarmGoodput != nil {
			warm = fmt.Sprintf("%.1f%%", 100**r.WarmGoodput)
		}
		dep := cmp.Or(r.Deployment, "-")
		require.Contains(t, md.String(), fmt.Sprintf("\n| %s | %s | %g | %s | %.1f%% | %s | ", r.Name, r.Kind, r.StartupS, dep, 100*r.Goodput, warm), r.Name)
	}
	// A row without a warm goodput keeps every column in place.
	cold := rep.Rows[0]
	cold.WarmGoodput = nil
	require.Len(t, cold.cells(1), len(tableHeader))
	require.Len(t, rep.Rows[0].cells(1), len(tableHeader))
	require.Equal(t, "-", cold.cells(1)[slices.Index(tableHeader, "goodput once warm")])
	require.NoError(t, rep.WriteTable(&table))
	require.Contains(t, table.String(), "ordering as published")
	require.NoError(t, rep.WriteHTML(&html))
	require.Contains(t, html.String(), "Beside the published figures")

	// Faster engines (the engine section) serve the same trace better.
	fast := *sc
	fast.Engine = EngineSpec{SpeedupRatio: 3}
	rep2, err := Run(context.Background(), Plan{Scenario: &fast, Requests: plan.Requests, TraceDesc: "step", Profile: plan.Profile})
	require.NoError(t, err)
	require.Equal(t, "static 1P 1D", rep2.Rows[2].Name)
	require.Less(t, one.Good, len(plan.Requests), "1P 1D misses at the profile's speed")
	for _, r := range rep.Rows {
		require.Equal(t, r.Finished, r.Good+r.MissedTTFT+r.MissedITL+r.MissedBoth, "%s: every finished request good or missed once", r.Name)
	}
	require.Positive(t, one.MissedTTFT+one.MissedITL+one.MissedBoth, "1P 1D's misses are split by the SLA they miss")
	require.Greater(t, rep2.Rows[2].Good, one.Good, "static 1P 1D at 3× the profile's speed")
}

func TestScenario_EngineConfig(t *testing.T) {
	tests := []struct {
		name string
		spec EngineSpec
		want func(*engine.Config)
	}{
		{"defaults", EngineSpec{}, func(*engine.Config) {}},
		{"batching", EngineSpec{MaxNumBatchedTokens: 4096, MaxNumSeqs: 64, BlockSize: 128, NumGPUBlocks: 1000},
			func(c *engine.Config) {
				c.MaxNumBatchedTokens, c.MaxNumSeqs, c.BlockSize, c.NumGPUBlocks = 4096, 64, 128, 1000
			}},
		{"speed", EngineSpec{SpeedupRatio: 1.5, DecodeSpeedupRatio: 0.5},
			func(c *engine.Config) { c.SpeedupRatio, c.DecodeSpeedupRatio = 1.5, 0.5 }},
		{"kv transfer", EngineSpec{KVTransferGBps: 450, KVBytesPerToken: 65536},
			func(c *engine.Config) { c.KVTransferBandwidth, c.KVBytesPerToken = 450e9, 65536 }},
		{"no chunked prefill", EngineSpec{NoChunkedPrefill: true}, func(c *engine.Config) { c.EnableChunkedPrefill = false }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sc := &Scenario{Engine: tc.spec}
			require.NoError(t, tc.spec.validate())
			for _, role := range []engine.Role{engine.RolePrefill, engine.RoleDecode} {
				want := engine.DefaultConfig(role)
				tc.want(&want)
				got := sc.EngineConfig(role)
				require.Equal(t, want, got)
				require.NoError(t, got.Validate())
			}
		})
	}
}

func TestRun_Errors(t *testing.T) {
	sc, err := LoadScenario(writeScenario(t, validScenario))
	require.NoError(t, err)
	_, err = Run(context.Background(), Plan{Scenario: sc, Profile: profile(t)})
	require.Error(t, err, "no requests")
	_, err = Run(context.Background(), Plan{Scenario: sc, Requests: stepTrace(), Profile: profile(t), SweepPolicy: "nope",
		StartupSweep: []time.Duration{0}})
	require.ErrorContains(t, err, "nope")
	_, err = Run(context.Background(), Plan{Scenario: sc, Requests: stepTrace(), Profile: profile(t), Predictors: []string{"crystal_ball"},
		PredictorPolicy: PolicyDynamoSLA})
	require.ErrorContains(t, err, "crystal_ball")
	_, err = Run(context.Background(), Plan{Scenario: sc, Requests: stepTrace(), Profile: profile(t), Predictors: []string{"arima"}})
	require.ErrorContains(t, err, "uses no load predictor", "the ahead policy has no predictor to swap")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Run(ctx, Plan{Scenario: sc, Requests: stepTrace(), Profile: profile(t)})
	require.ErrorIs(t, err, context.Canceled)
}

func TestGPUSecondsFrom(t *testing.T) {
	pc := func(ready, starting, draining int) replay.PoolCounts {
		return replay.PoolCounts{Ready: ready, Starting: starting, Draining: draining}
	}
	samples := []replay.ReplicaSample{
		{At: 0, Prefill: pc(1, 0, 0), Decode: pc(1, 0, 0)},
		{At: 10, Prefill: pc(1, 2, 0), Decode: pc(1, 0, 1)},
		{At: 30, Prefill: pc(3, 0, 0), Decode: pc(1, 0, 0)},
	}
	tests := []struct {
		name           string
		from, end      float64
		prefill, decod float64
	}{
		{"whole", 0, 40, 1*10 + 3*20 + 3*10, 1*10 + 2*20 + 1*10},
		{"from inside a sample", 20, 40, 3*10 + 3*10, 2*10 + 1*10},
		{"from after the end", 50, 40, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, d := gpuSecondsFrom(samples, tc.from, tc.end)
			require.InDelta(t, tc.prefill, p, 1e-9)
			require.InDelta(t, tc.decod, d, 1e-9)
		})
	}
}

// TestRow_KeepsChargesOutsideTheSamples: the oracle charges its engines' startup delay to the
// GPU-seconds without a pool sample; scoring from a later time keeps that charge.
func TestRow_KeepsChargesOutsideTheSamples(t *testing.T) {
	sc, err := LoadScenario(writeScenario(t, validScenario))
	require.NoError(t, err)
	pc := replay.PoolCounts{Ready: 1}
	res := replay.Result{Duration: 100, Replicas: []replay.ReplicaSample{{At: 0, Prefill: pc, Decode: pc}},
		PrefillGPUSeconds: 100 + 60, DecodeGPUSeconds: 100} // one prefill engine's 60 s startup charged apart
	row := Plan{Scenario: sc}.row("oracle", KindOracle, 0, res)
	from := sc.ScoredFrom()
	require.InDelta(t, (100-from+60)/3600, row.PrefillGPUHours, 1e-12)
	require.InDelta(t, (100-from)/3600, row.DecodeGPUHours, 1e-12)
}

// TestRow_WarmGoodput: the warm goodput counts the requests arriving from two startups
// after the scoring start only; without any from then on it is nil, never 0.
func TestRow_WarmGoodput(t *testing.T) {
	sc, err := LoadScenario(writeScenario(t, validScenario))
	require.NoError(t, err)
	require.Positive(t, sc.StartupSeconds)
	from := sc.ScoredFrom()
	warmFrom := from + 2*sc.StartupSeconds
	good := func(at float64) replay.Record {
		return replay.Record{Arrival: at, OSL: 1, TTFTMs: 1, Finished: true}
	}
	late := func(at float64) replay.Record { // over any TTFT SLA
		return replay.Record{Arrival: at, OSL: 1, TTFTMs: 1e9, Finished: true}
	}
	tests := []struct {
		name     string
		recs     []replay.Record
		goodput  float64
		warm     *float64
		warmSeen bool
	}{
		{"cold misses only", []replay.Record{late(from), late(warmFrom - 1), good(warmFrom), good(warmFrom + 1)}, 0.5, new(1.0), true},
		{"misses once warm", []replay.Record{good(from), late(warmFrom), good(warmFrom + 5), good(warmFrom + 9)}, 0.75, new(2.0 / 3), true},
		{"none from the warm start", []replay.Record{good(from), late(warmFrom - 1)}, 0.5, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// A static row is replayed with no startup; the warm start is the scenario's
			// all the same, so every row counts the same requests.
			for _, startup := range []time.Duration{sc.StartupDelay(), 0, 3 * sc.StartupDelay()} {
				row := Plan{Scenario: sc}.row("ahead", KindPolicy, startup, replay.Result{Requests: tc.recs, Duration: warmFrom + 10})
				require.InDelta(t, tc.goodput, row.Goodput, 1e-12)
				require.Equal(t, warmFrom, row.WarmFromS, "startup %v", startup)
				if !tc.warmSeen {
					require.Nil(t, row.WarmGoodput)
					continue
				}
				require.NotNil(t, row.WarmGoodput)
				require.InDelta(t, *tc.warm, *row.WarmGoodput, 1e-12)
			}
		})
	}

	// A scenario scored from its start is warm two startups in.
	zero := *sc
	zero.ScoredFromSeconds = new(0.0)
	recs := []replay.Record{late(0), late(2*sc.StartupSeconds - 1), good(2 * sc.StartupSeconds)}
	row := Plan{Scenario: &zero}.row("ahead", KindPolicy, zero.StartupDelay(), replay.Result{Requests: recs, Duration: 3 * sc.StartupSeconds})
	require.Equal(t, 2*sc.StartupSeconds, row.WarmFromS)
	require.InDelta(t, 1.0/3, row.Goodput, 1e-12)
	require.NotNil(t, row.WarmGoodput)
	require.InDelta(t, 1.0, *row.WarmGoodput, 1e-12)
}

// TestShippedScenarios: every scenario in scenarios/ loads, and dynamo-sla-e2e runs the
// planner as Dynamo's E2E test did (planner_sla --ttft 200 --itl 10 --adjustment-interval=60
// --no-correction, the CLI defaults otherwise) from 1P 1D, scoring every request.
func TestShippedScenarios(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "scenarios", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	byName := map[string]*Scenario{}
	for _, f := range files {
		sc, err := LoadScenario(f)
		require.NoError(t, err, f)
		byName[sc.Name] = sc
	}
	sc := byName["dynamo-sla-e2e"]
	require.NotNil(t, sc)
	require.Equal(t, []int{1, 1}, sc.Initial)
	require.Equal(t, 0.0, sc.ScoredFrom())
	require.Equal(t, [][]int{{2, 2}, {3, 1}}, sc.Static)
	require.Equal(t, EngineSpec{}, sc.Engine, "the mocker's engine defaults")
	require.Len(t, sc.Policies, 1)
	cfg, err := sc.PolicyConfig(sc.Policies[0])
	require.NoError(t, err)
	require.Equal(t, 200.0, cfg.TTFTMs)
	require.Equal(t, 10.0, cfg.ITLMs)
	require.Equal(t, 60, cfg.ThroughputAdjustmentIntervalSeconds)
	require.True(t, cfg.EnableThroughputScaling)
	require.False(t, cfg.EnableLoadScaling)
	require.True(t, cfg.NoCorrection)
	require.Equal(t, config.SizingInterpolation, cfg.ThroughputSizing)
	require.Equal(t, config.PredictorARIMA, cfg.LoadPredictor)
	require.Equal(t, 8, cfg.MaxGPUBudget)
	require.Equal(t, 1, cfg.MinEndpoint)
	require.False(t, cfg.Ahead(), "Dynamo's loops, not the ahead policy")
	require.Equal(t, sc.Policies[0].Name, sc.Published.Policy)
	require.Len(t, sc.Published.Gains, 2)
}

// TestSLOOracle_Bisection: the per-interval target is bisected for the overall goodput, the
// cheapest run reaching it is kept, and without one the run with the most goodput is.
func TestSLOOracle_Bisection(t *testing.T) {
	// goodput(target) is the overall goodput an oracle at a per-interval target reaches and
	// gpu(target) its GPU-hours (nil: 10 × the target, growing with it).
	fake := func(goodput, gpu func(float64) float64, targets *[]float64) func(float64, func(int, int)) (Row, error) {
		if gpu == nil {
			gpu = func(x float64) float64 { return 10 * x }
		}
		return func(target float64, progress func(int, int)) (Row, error) {
			*targets = append(*targets, target)
			progress(1, 2)
			progress(2, 2)
			return Row{Name: "oracle", Kind: KindOracle, Goodput: goodput(target), GPUHours: gpu(target), Note: "n trial replays"}, nil
		}
	}
	at := func(x0, v float64, f func(float64) float64) func(float64) float64 {
		return func(x float64) float64 {
			if x == x0 {
				return v
			}
			return f(x)
		}
	}
	for name, tc := range map[string]struct {
		perInterval float64 // 0: 0.9
		goodput     func(float64) float64
		gpu         func(float64) float64
		want        float64 // the per-interval target kept
		wantGPU     float64 // 0: 10 × want
		wantNote    string
		wantTried   []float64
	}{
		// Met at 90% per interval: bisected down to the cheapest target still meeting 95%
		// (3 of the 6 runs reach it: 0.9, 0.85 and 0.8375).
		"over at the target": {goodput: func(x float64) float64 { return x + 0.12 }, want: 0.8375,
			wantNote: "the cheapest of the 3 of 6 runs", wantTried: []float64{0.9, 0.7, 0.8, 0.85, 0.825, 0.8375}},
		// The same runs, but the first one reaching it is the cheapest: kept, not the last.
		"cheaper earlier": {goodput: func(x float64) float64 { return x + 0.12 }, gpu: at(0.9, 1, func(x float64) float64 { return 10 * x }),
			want: 0.9, wantGPU: 1, wantNote: "the cheapest of the 3 of 6 runs", wantTried: []float64{0.9, 0.7, 0.8, 0.85, 0.825, 0.8375}},
		// Short at 90% per interval: bisected up.
		"short at the target": {goodput: func(x float64) float64 { return x + 0.01 }, want: 0.940625,
			wantNote: "the cheapest of the 3 of 6 runs", wantTried: []float64{0.9, 0.95, 0.925, 0.9375, 0.94375, 0.940625}},
		// Never met: the run with the most goodput.
		"never": {goodput: func(x float64) float64 { return x / 2 }, want: 0.996875, wantNote: "none of 6 runs",
			wantTried: []float64{0.9, 0.95, 0.975, 0.9875, 0.99375, 0.996875}},
		// Never met, the most goodput at the first run: kept, not the last.
		"never, best first": {goodput: at(0.9, 0.94, func(x float64) float64 { return x / 2 }), want: 0.9, wantNote: "none of 6 runs",
			wantTried: []float64{0.9, 0.95, 0.975, 0.9875, 0.99375, 0.996875}},
		// A per-interval target of 0.5 or less bisects from half of it.
		"at 0.5": {perInterval: 0.5, goodput: func(x float64) float64 { return x + 0.7 }, want: 0.2578125,
			wantNote: "the cheapest of the 6 of 6 runs", wantTried: []float64{0.5, 0.375, 0.3125, 0.28125, 0.265625, 0.2578125}},
		"under 0.5": {perInterval: 0.3, goodput: func(x float64) float64 { return x + 0.7 }, want: 0.253125,
			wantNote: "the cheapest of the 3 of 6 runs", wantTried: []float64{0.3, 0.225, 0.2625, 0.24375, 0.253125, 0.2484375}},
	} {
		t.Run(name, func(t *testing.T) {
			per := tc.perInterval
			if per == 0 {
				per = 0.9
			}
			wantGPU := tc.wantGPU
			if wantGPU == 0 {
				wantGPU = 10 * tc.want
			}
			var tried []float64
			var last [2]int
			row, err := sloOracle(per, 0.95, fake(tc.goodput, tc.gpu, &tried), func(done, total int) { last = [2]int{done, total} })
			require.NoError(t, err)
			require.InDeltaSlice(t, tc.wantTried, tried, 1e-12)
			require.InDelta(t, wantGPU, row.GPUHours, 1e-9)
			require.Equal(t, "slo-oracle", row.Name)
			require.Equal(t, KindSLOOracle, row.Kind)
			require.Contains(t, row.Note, tc.wantNote)
			require.Contains(t, row.Note, fmt.Sprintf("the oracle at %.1f%% per interval", 100*tc.want))
			require.Contains(t, row.Note, "(that run: n trial replays)")
			require.Equal(t, [2]int{2 * sloOracleRuns, 2 * sloOracleRuns}, last, "progress over all the runs")
		})
	}
	_, err := sloOracle(0.9, 0.95, func(float64, func(int, int)) (Row, error) { return Row{}, errors.New("boom") }, nil)
	require.ErrorContains(t, err, "boom")
}

// TestJobs_SLOOracle: the oracle runs again at the SLO's goodput when that is above the
// goodput target, unless the plan leaves it out (the robustness benchmark does).
func TestJobs_SLOOracle(t *testing.T) {
	sc, err := LoadScenario(writeScenario(t, validScenario))
	require.NoError(t, err)
	names := func(p Plan) []string {
		jobs, err := p.jobs()
		require.NoError(t, err)
		var out []string
		for _, j := range jobs {
			if strings.Contains(j.name, "oracle") {
				out = append(out, j.name)
			}
		}
		return out
	}
	plan := Plan{Scenario: sc, Requests: stepTrace(), Profile: profile(t), Oracle: true}
	require.Equal(t, []string{"oracle", "slo-oracle"}, names(plan))
	plan.NoSLOOracle = true
	require.Equal(t, []string{"oracle"}, names(plan))
	plan.NoSLOOracle, sc.SLOGoodput = false, sc.GoodputTarget
	require.Equal(t, []string{"oracle"}, names(plan), "no second oracle at the goodput target")
	plan.Oracle = false
	require.Empty(t, names(plan))
}

// TestTimeline: each bucket of arrival time counts its requests, splits its finished ones
// that are not good by the SLA they miss (as a row does), and its goodput is its good ones
// over all its requests (unfinished ones included).
func TestTimeline(t *testing.T) {
	recs := []replay.Record{
		{Arrival: 1, OSL: 10, Finished: true, TTFTMs: 100, ITLMs: 5},  // good
		{Arrival: 2, OSL: 10, Finished: true, TTFTMs: 300, ITLMs: 5},  // TTFT only
		{Arrival: 3, OSL: 10, Finished: true, TTFTMs: 100, ITLMs: 50}, // ITL only
		{Arrival: 4, OSL: 10, Finished: true, TTFTMs: 300, ITLMs: 50}, // both
		{Arrival: 5, OSL: 10},                                                   // unfinished
		{Arrival: 61, OSL: 1, Finished: true, TTFTMs: 100},                      // one token: good
		{Arrival: 62, OSL: 10, Finished: true, TTFTMs: math.NaN(), ITLMs: 5},    // not a number: TTFT
		{Arrival: 125, OSL: 10, Finished: true, TTFTMs: 100, ITLMs: math.NaN()}, // not a number: ITL
	}
	got := timeline(replay.Result{Requests: recs}, SLA{TTFTMs: 200, ITLMs: 10}, 60)
	require.Len(t, got, 3)
	type split struct{ requests, ttft, itl, both int }
	want := []split{{5, 1, 1, 1}, {2, 1, 0, 0}, {1, 0, 1, 0}}
	for i, w := range want {
		iv := got[i]
		require.Equal(t, float64(60*i), iv.At)
		require.Equal(t, w, split{iv.Requests, iv.MissedTTFT, iv.MissedITL, iv.MissedBoth}, "bucket %d", i)
	}
	require.InDelta(t, 1.0/5, got[0].Goodput, 1e-12, "one good of five, the unfinished one counted")
	require.InDelta(t, 0.5, got[1].Goodput, 1e-12)
	require.Zero(t, got[2].Goodput)
	// The means are of the finished requests' finite latencies: a NaN is left out of them.
	require.InDelta(t, 200.0, got[0].TTFTMs, 1e-12)
	require.InDelta(t, 27.5, got[0].ITLMs, 1e-12)
	require.InDelta(t, 100.0, got[1].TTFTMs, 1e-12, "the NaN left out")
	require.InDelta(t, 5.0, got[1].ITLMs, 1e-12, "one token has no ITL")
	require.Zero(t, got[2].ITLMs, "no finite ITL")
	_, err := json.Marshal(got)
	require.NoError(t, err, "a report with a NaN latency is still written")
}
