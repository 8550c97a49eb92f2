package evaluate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unicode"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/predict"
	"github.com/llmplanner/planner/sim/loadgen"
	"github.com/llmplanner/planner/sim/replay"
	"go.yaml.in/yaml/v3"
)

// The robustness benchmark's trace sources. Each case draws one, a window and a rate scale.
const (
	SourceAzureCode     = "azure-code"
	SourceMooncakeConv  = "mooncake-conversation"
	SourceMooncakeSynth = "mooncake-synthetic"
	SourceSinusoid      = "sinusoid"
	SourceServeGen      = "servegen"
	// SourceShapes is the synthetic level shifts no shared trace has — a step up and back, a
	// ramp up or down, a flash crowd, an on/off square wave — drawn per case: not in the
	// default cycle (RobustSources), so the default cases stay those of earlier editions;
	// asked for with RobustPlan.Sources (`planner robustness --sources shapes`).
	SourceShapes = "shapes"
	// SourceServeGenClients is ServeGen's per-client windows, each client a renewal process
	// with its measured rate and inter-arrival burstiness (loadgen.FromClients) — burstier
	// than the Poisson arrivals of SourceServeGen, on the same windows: not in the default
	// cycle, asked for with RobustPlan.Sources.
	SourceServeGenClients = "servegen-clients"
	// SourceTrace is the trace files of the user's own (RobustPlan.Traces), drawn as the
	// shared traces are — a window and a rate scale per case — and scored at their own SLA:
	// how the policies do on traffic the project does not ship. Not in the default cycle.
	SourceTrace = "trace"
)

// RobustSources are the sources the cases cycle through by default, in that order.
var RobustSources = []string{SourceAzureCode, SourceMooncakeConv, SourceMooncakeSynth, SourceSinusoid, SourceServeGen}

// AllRobustSources are every source a plan may cycle through.
var AllRobustSources = append(slices.Clone(RobustSources), SourceShapes, SourceServeGenClients, SourceTrace)

// RobustTrace is a trace file SourceTrace's cases draw from, and the SLA they are scored at.
type RobustTrace struct {
	// Path is a Mooncake JSONL, Azure CSV or BurstGPT CSV trace (predict.ReadTraceOf), read
	// as given (not from RobustPlan.DataDir).
	Path string `json:"path"`
	// Model keeps one model's requests of a BurstGPT trace (predict.TraceFilter); empty:
	// every request.
	Model string `json:"model,omitempty"`
	// SLA is what the trace's cases are scored at (each > 0, at most config.MaxLatencyMs).
	SLA SLA `json:"sla"`
}

// The rate scales a case draws from when RobustPlan.ScaleMin and ScaleMax are 0, and the
// range either may be in.
const (
	DefaultRobustScaleMin = 1
	DefaultRobustScaleMax = 8
	MinRobustScale        = 0.01
	MaxRobustScale        = 100
)

// MaxRobustTraces bounds a plan's trace files (each is read whole before any case runs).
const MaxRobustTraces = 64

// MaxRobustCaseRequests bounds the requests of one case: a busy trace at a high scale is
// refused with an error rather than replayed for hours.
const MaxRobustCaseRequests = 1_000_000

// RobustPlan is a seeded robustness benchmark: Cases random scenarios (a source, a 10–30
// minute window — a trace's whole span, replayed in less, when the window at the scale is
// longer — a rate scale of the traces and ServeGen's rates — 1–8× unless ScaleMin and
// ScaleMax say otherwise; the sinusoids and shapes draw their own rates) on which the
// policies, the best static deployment and (optionally) the oracle are scored with the same
// parameters everywhere.
type RobustPlan struct {
	Cases int
	Seed  uint64
	// DataDir holds the shared traces (../shared/data/traces).
	DataDir string
	Profile *perf.Profile
	// Policies are built-in policy names (default: ahead, dynamo-sla).
	Policies []string
	// Sources are the trace sources the cases cycle through, in order (default:
	// RobustSources); one listed twice is drawn twice as often.
	Sources []string
	// Oracle adds the hindsight oracle to every case (slow: hundreds of trial replays each).
	Oracle bool
	// Traces are the files SourceTrace's cases draw from, in turn: the source's n-th case
	// draws Traces[n mod len(Traces)]. At most MaxRobustTraces, no two of the same file name
	// and model, and no more than the cases that draw SourceTrace (each is drawn); they need
	// SourceTrace among Sources, and SourceTrace needs them.
	Traces []RobustTrace
	// ScaleMin and ScaleMax bound the rate scale the traces' and ServeGen's cases draw
	// (uniformly), within MinRobustScale–MaxRobustScale; both 0:
	// DefaultRobustScaleMin–DefaultRobustScaleMax. The sinusoids and shapes draw their own
	// rates. The GPU budget (Budget) does not grow with the scale.
	ScaleMin, ScaleMax float64
	// Budget is every case's GPU budget (0: DefaultRobustBudget), and StartupS every case's
	// startup delay in seconds (nil: DefaultRobustStartupS).
	Budget   int
	StartupS *float64
	// Mode is every case's deployment shape: config.ModeDisagg (empty: the default), a
	// prefill and a decode pool, or config.ModeAgg, one pool of engines that run chunked
	// prefill and decode in the same passes.
	Mode config.Mode
	// ScenarioDir, when set, is a new (or empty) folder Robustness writes every case a
	// scenario file can replay to, as <case>.yaml for `planner simulate --scenario`, before
	// running them; ScenarioProfileArg is appended to the replay command each file's first
	// line gives (" --profile DIR" for a run on another profile), and ScenariosWritten, when
	// set, is told the files written and the cases left out.
	ScenarioDir        string
	ScenarioProfileArg string
	ScenariosWritten   func(files []string, leftOut string)
	// TicksDir, when set, is a new (or empty) folder Robustness writes every case's planner
	// runs' per-tick timelines to as each case ends (Plan.Ticks): <case>-<run>.ticks.jsonl,
	// one replay.TimelineEntry a line — what each policy decided at every tick of the case,
	// and its notes. The report's rows leave them out.
	TicksDir string
	// NoStatic skips the best static deployment's search (a policy-only run: the summary's
	// comparisons with it are then "-").
	NoStatic bool
	Parallel int
	// Progress, when set, is called after each case with the cases done.
	Progress func(done, total int, c RobustCase)
}

// RobustCase is one case's description and scores.
type RobustCase struct {
	Name   string `json:"name"`
	Source string `json:"source"`
	// Trace names the trace file (and model) of a SourceTrace case.
	Trace    string  `json:"trace,omitempty"`
	Detail   string  `json:"detail"`
	Scale    float64 `json:"scale"`
	Requests int     `json:"requests"`
	TTFTMs   float64 `json:"ttft_sla_ms"`
	ITLMs    float64 `json:"itl_sla_ms"`
	// LowerBoundGPUHours is the case's lower bound; BestStatic the best static deployment,
	// and SLOStatic the smallest reaching the goodput the policies are held to (95%).
	LowerBoundGPUHours float64 `json:"lower_bound_gpu_hours"`
	BestStatic         string  `json:"best_static"`
	SLOStatic          string  `json:"slo_static,omitempty"`
	Rows               []Row   `json:"rows"`
}

// RobustReport is a robustness benchmark's outcome.
type RobustReport struct {
	Seed uint64 `json:"seed"`
	// Budget and StartupS are every case's GPU budget and startup delay (each case is scored
	// from the end of its first startup window).
	Budget   int     `json:"budget"`
	StartupS float64 `json:"startup_s"`
	// Mode is every case's deployment shape (disagg or agg).
	Mode config.Mode `json:"mode"`
	// Traces are the plan's trace files of the user's own (RobustPlan.Traces), as given.
	Traces []RobustTrace `json:"traces,omitempty"`
	Cases  []RobustCase  `json:"cases"`
	// ScenarioFiles are the scenario files written (RobustPlan.ScenarioDir), and
	// ScenariosLeftOut the cases no scenario file describes, counted per source.
	ScenarioFiles    []string `json:"scenario_files,omitempty"`
	ScenariosLeftOut string   `json:"scenarios_left_out,omitempty"`
	// TickFiles are the per-tick timelines written (RobustPlan.TicksDir), in case order.
	TickFiles []string `json:"tick_files,omitempty"`
}

// robustSLA is each source's SLA (the scenarios' for the shared traces, Dynamo's test SLA
// for sinusoids, a short-prompt chat SLA for ServeGen's language model).
var robustSLA = map[string]SLA{
	SourceAzureCode: {300, 10}, SourceMooncakeConv: {1000, 25}, SourceMooncakeSynth: {1000, 25},
	SourceSinusoid: {200, 10}, SourceServeGen: {200, 10}, SourceShapes: {300, 10}, SourceServeGenClients: {200, 10},
}

// robustMaxContext is the engines' context: longer requests are dropped, as in the scenarios.
const robustMaxContext = 16384

// Every case's GPU budget and startup delay unless the plan sets them: 48 GPUs is enough for
// 8× the shared traces' peaks. A plan's budget is within 2–MaxRobustBudget, its startup
// within 0–MaxRobustStartupS; each case is scored from the end of its startup window, and one
// whose replay ends before twice the startup is an error.
const (
	DefaultRobustBudget   = 48
	DefaultRobustStartupS = 60
	MaxRobustBudget       = 256
	MaxRobustStartupS     = 300
)

// Cases draws the plan's cases (deterministic for a seed).
func (rp RobustPlan) cases() ([]robustInput, error) {
	if rp.Cases < 1 || rp.Cases > 1000 {
		return nil, fmt.Errorf("evaluate: robustness: %d cases (want 1..1000)", rp.Cases)
	}
	traces := map[string][]predict.Request{}
	load := func(file string) ([]predict.Request, error) {
		if r, ok := traces[file]; ok {
			return r, nil
		}
		r, err := predict.ReadTrace(filepath.Join(rp.DataDir, file))
		if err != nil {
			return nil, fmt.Errorf("evaluate: robustness: %w", err)
		}
		traces[file] = r
		return r, nil
	}
	sources := rp.Sources
	if len(sources) == 0 {
		sources = RobustSources
	}
	for _, src := range sources {
		if !slices.Contains(AllRobustSources, src) {
			return nil, fmt.Errorf("evaluate: robustness: unknown source %q (have %s)", src, strings.Join(AllRobustSources, ", "))
		}
	}
	if err := rp.checkTrace(sources); err != nil {
		return nil, err
	}
	lo, hi, err := rp.scales()
	if err != nil {
		return nil, err
	}
	_, startup, _, err := rp.deployment()
	if err != nil {
		return nil, err
	}
	// The traces of the user's own are all read before any case is drawn: a missing file, a
	// wrong format or an unknown model is an error before the first replay.
	own := make([][]predict.Request, len(rp.Traces))
	for k, t := range rp.Traces {
		if own[k], err = predict.ReadTraceOf(t.Path, predict.TraceFilter{Model: t.Model}); err != nil {
			return nil, fmt.Errorf("evaluate: robustness: %w", err)
		}
		if len(own[k]) == 0 {
			return nil, fmt.Errorf("evaluate: robustness: trace %s has no request", t.Path)
		}
	}
	traceCases := 0 // the SourceTrace cases drawn so far
	var series []predict.RateSeries
	var clients []predict.ClientSeries
	var out []robustInput
	for i := range rp.Cases {
		rng := rand.New(rand.NewPCG(rp.Seed, uint64(i)))
		src := sources[i%len(sources)]
		length := 600 + 1200*rng.Float64() // 10–30 minutes replayed
		scale := lo + (hi-lo)*rng.Float64()
		in := robustInput{source: src, sla: robustSLA[src], scale: scale}
		k := traceCases % max(1, len(rp.Traces)) // the trace a SourceTrace case draws
		if src == SourceTrace {
			traceCases++
			in.sla, in.trace = rp.Traces[k].SLA, rp.Traces[k].label()
		}
		switch src {
		case SourceSinusoid:
			period := []float64{120, 300, 600, 900, 1200}[rng.IntN(5)]
			lo := 1 + 9*rng.Float64()
			hi := lo + 10 + 40*rng.Float64()
			reqs, err := loadgen.Sinusoid(loadgen.SinusoidOptions{DurationS: math.Round(length), MinRPS: lo, MaxRPS: hi, PeriodS: period,
				ISL: 3000, OSL: 300, Seed: rp.Seed*1000 + uint64(i)})
			if err != nil {
				return nil, err
			}
			in.scale = 1
			in.reqs, in.detail = reqs, fmt.Sprintf("sinusoid %.0f–%.0f req/s, period %.0f s, %.0f s, ISL 3000 OSL 300", lo, hi, period, length)
			in.spec = &TraceSpec{Sinusoid: &SinusoidSpec{DurationSeconds: math.Round(length), MinRPS: lo, MaxRPS: hi, PeriodSeconds: period,
				ISL: 3000, OSL: 300, Seed: rp.Seed*1000 + uint64(i)}}
		case SourceShapes:
			rates, detail := shapeRates(rng, length)
			reqs, err := loadgen.FromRates(loadgen.RatesOptions{Rates: rates, StepS: shapeStepS, DurationS: math.Round(length),
				MeanISL: 2000, MeanOSL: 200, MaxTokens: robustMaxContext, Seed: rp.Seed*1000 + uint64(i)})
			if err != nil {
				return nil, err
			}
			in.scale = 1
			in.reqs, in.detail = reqs, fmt.Sprintf("%s, %.0f s, ISL/OSL exponential 2000/200", detail, length)
		case SourceServeGen:
			if series == nil {
				s, err := predict.ReadServeGenAggregate(filepath.Join(rp.DataDir, "servegen_aggregate_10min.csv"))
				if err != nil {
					return nil, fmt.Errorf("evaluate: robustness: %w", err)
				}
				series = s
			}
			s := series[rng.IntN(len(series))]
			// Ten-minute windows compressed to one minute, scaled to a mean of 2–5 req/s × scale.
			steps := int(math.Ceil(length/60)) + 1
			if len(s.Counts) < steps {
				return nil, fmt.Errorf("evaluate: robustness: servegen %s/%s has %d windows, want %d", s.Category, s.Model, len(s.Counts), steps)
			}
			gaps := s.Gaps()
			span := spanOutsideGaps(gaps, rng.IntN(len(s.Counts)-steps+1), steps)
			if span == nil {
				return nil, fmt.Errorf("evaluate: robustness: servegen %s/%s has fewer than %d windows outside the gaps in its recording", s.Category, s.Model, steps)
			}
			window := make([]float64, steps)
			for k, w := range span {
				window[k] = s.Counts[w]
			}
			var sum float64
			for _, c := range window {
				sum += c
			}
			if sum == 0 {
				window, sum = slices.Repeat([]float64{1}, steps), float64(steps)
			}
			mean := (2 + 3*rng.Float64()) * scale
			for k := range window {
				window[k] *= mean * float64(steps) / sum
			}
			reqs, err := loadgen.FromRates(loadgen.RatesOptions{Rates: window, StepS: 60, DurationS: math.Round(length),
				MeanISL: 360, MeanOSL: 290, MaxTokens: robustMaxContext, Seed: rp.Seed*1000 + uint64(i)})
			if err != nil {
				return nil, err
			}
			in.reqs = reqs
			in.detail = fmt.Sprintf("servegen %s/%s windows %s, mean %.1f req/s, %.0f s, ISL/OSL exponential 360/290",
				s.Category, s.Model, describeSpan(span), mean, length)
		case SourceServeGenClients:
			if clients == nil {
				c, err := predict.ReadServeGenClients(filepath.Join(rp.DataDir, "servegen_client_windows_10min.csv.gz"))
				if err != nil {
					return nil, fmt.Errorf("evaluate: robustness: %w", err)
				}
				if len(c) == 0 {
					return nil, errors.New("evaluate: robustness: servegen clients: no series")
				}
				clients = c
			}
			reqs, detail, err := clientsCase(rng, clients, math.Round(length), scale, rp.Seed*1000+uint64(i))
			if err != nil {
				return nil, fmt.Errorf("evaluate: robustness: case %d: %w", i, err)
			}
			in.reqs, in.detail = reqs, detail
		default:
			file := map[string]string{SourceAzureCode: "AzureLLMInferenceTrace_code_2023.csv",
				SourceMooncakeConv: "mooncake_fast25_conversation_trace.jsonl", SourceMooncakeSynth: "mooncake_fast25_synthetic_trace.jsonl"}[src]
			var all []predict.Request
			path, model := filepath.Join(rp.DataDir, file), ""
			if src == SourceTrace {
				all, file, path, model = own[k], in.trace, rp.Traces[k].Path, rp.Traces[k].Model
			} else if all, err = load(file); err != nil {
				return nil, err
			}
			var span float64
			for _, r := range all {
				span = math.Max(span, r.Arrival)
			}
			want := length * scale
			if want > span {
				want = span
			}
			from := rng.Float64() * (span - want)
			var reqs []predict.Request
			for _, r := range loadgen.Window(all, from, want) {
				if r.InputTokens+r.OutputTokens > robustMaxContext {
					continue
				}
				r.Arrival /= scale
				reqs = append(reqs, r)
			}
			in.reqs, in.detail = reqs, fmt.Sprintf("%s from %.0f s, %.0f s at %.1f×", file, from, want, scale)
			in.spec = &TraceSpec{File: path, Model: model, FromSeconds: from, LengthSeconds: want, Speedup: scale, MaxContext: robustMaxContext}
		}
		if len(in.reqs) == 0 {
			return nil, fmt.Errorf("evaluate: robustness: case %d (%s) has no request", i, in.detail)
		}
		// A case is scored from the end of its startup window: one whose replay ends before
		// twice that would be scored on too little (or nothing, read as 0% goodput).
		if last := in.reqs[len(in.reqs)-1].Arrival; last < 2*startup {
			return nil, fmt.Errorf("evaluate: robustness: case %d (%s) replays %.0f s, less than twice the %.0f s startup it is scored after: lower the rate scales or the startup", i, in.detail, last, startup)
		}
		if len(in.reqs) > MaxRobustCaseRequests {
			return nil, fmt.Errorf("evaluate: robustness: case %d (%s) has %d requests, more than %d: lower the rate scales", i, in.detail, len(in.reqs), MaxRobustCaseRequests)
		}
		in.name = fmt.Sprintf("case-%02d-%s", i, src)
		out = append(out, in)
	}
	return out, nil
}

// checkTrace checks that the plan's traces and SourceTrace come together, their number (at
// most MaxRobustTraces, and each drawn by a case), and each trace's path, model and SLA.
func (rp RobustPlan) checkTrace(sources []string) error {
	listed := slices.Contains(sources, SourceTrace)
	switch n := len(rp.Traces); {
	case n == 0 && listed:
		return fmt.Errorf("evaluate: robustness: source %q needs a trace file (--trace)", SourceTrace)
	case n == 0:
		return nil
	case !listed:
		return fmt.Errorf("evaluate: robustness: a trace file (%s) is given, but the sources (%s) do not list %q", rp.Traces[0].Path, strings.Join(sources, ", "), SourceTrace)
	case n > MaxRobustTraces:
		return fmt.Errorf("evaluate: robustness: %d trace files: at most %d", n, MaxRobustTraces)
	}
	// Every trace is drawn at least once: one no case draws would be read, and missing from
	// the report, for nothing.
	drawn := 0
	for i := range rp.Cases {
		if sources[i%len(sources)] == SourceTrace {
			drawn++
		}
	}
	if drawn < len(rp.Traces) {
		return fmt.Errorf("evaluate: robustness: trace files: %d; cases drawing the trace source: %d of %d: each file needs one (raise the cases, or give fewer files)",
			len(rp.Traces), drawn, rp.Cases)
	}
	seen := map[string]bool{}
	for _, t := range rp.Traces {
		switch {
		case strings.TrimSpace(t.Path) == "":
			return errors.New("evaluate: robustness: a trace file's path is empty")
		case !(t.SLA.TTFTMs > 0 && t.SLA.TTFTMs <= config.MaxLatencyMs) || !(t.SLA.ITLMs > 0 && t.SLA.ITLMs <= config.MaxLatencyMs):
			return fmt.Errorf("evaluate: robustness: trace %s: SLA TTFT %v ms, ITL %v ms: each must be > 0 and at most %d ms", t.Path, t.SLA.TTFTMs, t.SLA.ITLMs, config.MaxLatencyMs)
		}
		if err := predict.CheckModelName(t.Model); err != nil {
			return fmt.Errorf("evaluate: robustness: trace %s: %w", t.Path, err)
		}
		// The cases and the per-source table name a trace by its file name and model.
		if seen[t.label()] {
			return fmt.Errorf("evaluate: robustness: two traces are named %s (a file name and model): one given twice, or files of the same name in two folders", t.label())
		}
		seen[t.label()] = true
	}
	return nil
}

// label names the trace in a case's description: its file name, and the model kept.
func (t RobustTrace) label() string {
	return predict.TraceFilter{Model: t.Model}.Label(filepath.Base(t.Path))
}

// deployment is every case's GPU budget, startup delay and mode: the plan's, or the defaults.
func (rp RobustPlan) deployment() (budget int, startupS float64, mode config.Mode, err error) {
	budget, startupS, mode = rp.Budget, DefaultRobustStartupS, rp.Mode
	if mode == "" {
		mode = config.ModeDisagg
	}
	if mode != config.ModeDisagg && mode != config.ModeAgg {
		return 0, 0, "", fmt.Errorf("evaluate: robustness: mode %q: want %q or %q", rp.Mode, config.ModeDisagg, config.ModeAgg)
	}
	if budget == 0 {
		budget = DefaultRobustBudget
	}
	if budget < 2 || budget > MaxRobustBudget {
		return 0, 0, "", fmt.Errorf("evaluate: robustness: GPU budget %d: want 2..%d", budget, MaxRobustBudget)
	}
	if s := rp.StartupS; s != nil {
		if !(*s >= 0 && *s <= MaxRobustStartupS) {
			return 0, 0, "", fmt.Errorf("evaluate: robustness: startup %v s: want 0..%d", *s, MaxRobustStartupS)
		}
		startupS = *s
	}
	return budget, startupS, mode, nil
}

// scales are the rate scales the cases draw from: the plan's, or the defaults when both are 0.
func (rp RobustPlan) scales() (lo, hi float64, err error) {
	lo, hi = rp.ScaleMin, rp.ScaleMax
	if lo == 0 && hi == 0 {
		return DefaultRobustScaleMin, DefaultRobustScaleMax, nil
	}
	if !(lo >= MinRobustScale && lo <= hi && hi <= MaxRobustScale) {
		return 0, 0, fmt.Errorf("evaluate: robustness: rate scales %v–%v: want %v ≤ min ≤ max ≤ %d", lo, hi, MinRobustScale, MaxRobustScale)
	}
	return lo, hi, nil
}

// clientsCase draws a SourceServeGenClients case: one of the series, a span of its windows
// each replayed in a minute (ten-minute windows, as SourceServeGen's) over length seconds,
// and a mean rate of 2–5 req/s × scale that every client's rate is scaled to, weighting each
// window by the seconds it is replayed, skipping the gaps in the series' recording
// (spanOutsideGaps). A span with no request in its replayed seconds, or whose draw holds
// none, is drawn again (up to 100 times).
func clientsCase(rng *rand.Rand, series []predict.ClientSeries, length, scale float64, seed uint64) ([]predict.Request, string, error) {
	s := series[rng.IntN(len(series))]
	steps := int(math.Ceil(length / 60))
	if len(s.Windows) < steps {
		return nil, "", fmt.Errorf("servegen clients %s/%s has %d windows, want %d", s.Category, s.Model, len(s.Windows), steps)
	}
	mean := (2 + 3*rng.Float64()) * scale
	gaps := s.Gaps()
	for range 100 {
		span := spanOutsideGaps(gaps, rng.IntN(len(s.Windows)-steps+1), steps)
		if span == nil {
			continue
		}
		window := make([][]predict.ClientWindow, steps)
		for k, w := range span {
			window[k] = s.Windows[w]
		}
		var sum float64 // requests per second of replay, summed over the replayed seconds
		for k, w := range window {
			played := math.Min(60, length-60*float64(k))
			for _, c := range w {
				sum += c.Rate * played
			}
		}
		if !(sum > 0) {
			continue
		}
		reqs, err := loadgen.FromClients(loadgen.ClientsOptions{Windows: window, StepS: 60, DurationS: length,
			Scale: mean * length / sum, MeanISL: 360, MeanOSL: 290, MaxTokens: robustMaxContext, Seed: seed})
		if err != nil {
			return nil, "", err
		}
		if len(reqs) > 0 {
			return reqs, fmt.Sprintf("servegen %s/%s clients, windows %s, mean %.1f req/s, %.0f s, ISL/OSL exponential 360/290",
				s.Category, s.Model, describeSpan(span), mean, length), nil
		}
	}
	return nil, "", fmt.Errorf("servegen clients %s/%s: 100 spans of %d windows drawn, none with a request outside the recording's gaps", s.Category, s.Model, steps)
}

// spanOutsideGaps returns the first steps windows from from on that are not gaps in the
// series' recording (predict.RecordingGaps): a gap is missing data, not a quiet spell of
// traffic, so a case replays the windows either side of it back to back. A span that would
// run past the series' end is its last steps windows outside the gaps instead. With no gap in
// it, a span is the windows from from on, as drawn; the window after a run of gaps, and the
// series' last span, are drawn more often than others. Nil when the series has fewer than
// steps windows outside the gaps.
func spanOutsideGaps(gaps []bool, from, steps int) []int {
	var span []int
	for w := from; w < len(gaps) && len(span) < steps; w++ {
		if !gaps[w] {
			span = append(span, w)
		}
	}
	for w := from - 1; w >= 0 && len(span) < steps; w-- {
		if !gaps[w] {
			span = slices.Insert(span, 0, w)
		}
	}
	if len(span) < steps {
		return nil
	}
	return span
}

// describeSpan names a span of ServeGen windows for a case's description: its first and
// last window, and how many gaps in the recording were skipped between them.
func describeSpan(span []int) string {
	first, last := span[0], span[len(span)-1]
	note := ""
	if skipped := last - first + 1 - len(span); skipped > 0 {
		note = fmt.Sprintf("; %d windows skipped, gaps in the recording", skipped)
	}
	return fmt.Sprintf("%d–%d (10 min each, replayed in 1 min%s)", first, last, note)
}

// shapeStepS is the step of a shape's rate series: a step or a flash crowd's onset lands
// within it.
const shapeStepS = 5

// shapeRates draws one of the synthetic shapes over length seconds: its request rate per
// shapeStepS and a description. Each goes between a low rate of 1–5 req/s and a high one
// 10–40 req/s above it, with no warning a forecast could read: a step up and back down; a
// linear ramp up or down; a flash crowd (the high rate at once, decaying exponentially over
// 1–5 minutes); an on/off square wave (a 3–10 minute period, on 40% of it).
func shapeRates(rng *rand.Rand, length float64) ([]float64, string) {
	lo := 1 + 4*rng.Float64()
	hi := lo + 10 + 30*rng.Float64()
	n := int(math.Ceil(length / shapeStepS))
	rates := make([]float64, n)
	at := func(k int) float64 { return (float64(k) + 0.5) * shapeStepS }
	var detail string
	switch kind := rng.IntN(5); kind {
	case 0:
		up, down := (0.2+0.2*rng.Float64())*length, (0.6+0.2*rng.Float64())*length
		for k := range rates {
			rates[k] = lo
			if t := at(k); t >= up && t < down {
				rates[k] = hi
			}
		}
		detail = fmt.Sprintf("step %.1f → %.1f req/s at %.0f s, back at %.0f s", lo, hi, up, down)
	case 1, 2:
		from, to := lo, hi
		if kind == 2 {
			from, to = hi, lo
		}
		for k := range rates {
			rates[k] = from + (to-from)*math.Min(1, at(k)/length)
		}
		detail = fmt.Sprintf("ramp %.1f → %.1f req/s", from, to)
	case 3:
		onset, tau := (0.2+0.3*rng.Float64())*length, 60+240*rng.Float64()
		for k := range rates {
			rates[k] = lo
			if t := at(k); t >= onset {
				rates[k] += (hi - lo) * math.Exp(-(t-onset)/tau)
			}
		}
		detail = fmt.Sprintf("flash crowd %.1f → %.1f req/s at %.0f s, decaying over %.0f s", lo, hi, onset, tau)
	default:
		period := 180 + 420*rng.Float64()
		for k := range rates {
			rates[k] = lo
			if math.Mod(at(k), period) < 0.4*period {
				rates[k] = hi
			}
		}
		detail = fmt.Sprintf("on/off %.1f ↔ %.1f req/s, period %.0f s (on 40%%)", hi, lo, period)
	}
	return rates, detail
}

// robustInput is one case's drawn trace.
type robustInput struct {
	// trace is the label of a SourceTrace case's trace (RobustTrace.label).
	name, source, trace, detail string
	scale                       float64
	sla                         SLA
	reqs                        []predict.Request
	// spec is the scenario trace that gives the same requests (scenarioFiles); nil for the
	// sources a scenario file cannot describe (shapes, ServeGen's rates and clients).
	spec *TraceSpec
}

// Robustness runs the plan: each case through Run (policies, best static, oracle when
// asked), Parallel cases at a time.
func Robustness(ctx context.Context, rp RobustPlan) (*RobustReport, error) {
	if rp.Profile == nil {
		return nil, errors.New("evaluate: robustness: no profile")
	}
	policies := rp.policies()
	budget, startup, mode, err := rp.deployment()
	if err != nil {
		return nil, err
	}
	inputs, err := rp.cases()
	if err != nil {
		return nil, err
	}
	rep := &RobustReport{Seed: rp.Seed, Budget: budget, StartupS: startup, Mode: mode, Traces: rp.Traces, Cases: make([]RobustCase, len(inputs))}
	// Both folders are checked before either is made: one may hold the other.
	for _, f := range []struct{ dir, what string }{{rp.TicksDir, "tick timeline"}, {rp.ScenarioDir, "scenario"}} {
		if f.dir == "" {
			continue
		}
		if err := emptyFolder(f.dir, f.what); err != nil {
			return nil, err
		}
	}
	if rp.TicksDir != "" {
		if err := os.MkdirAll(rp.TicksDir, 0o755); err != nil {
			return nil, fmt.Errorf("evaluate: robustness: %w", err)
		}
	}
	if rp.ScenarioDir != "" {
		files, skipped, err := rp.scenarioFiles(inputs, policies, budget, startup, mode)
		if err != nil {
			return nil, err
		}
		if rep.ScenarioFiles, err = writeScenarios(rp.ScenarioDir, rp.ScenarioProfileArg, rp.Seed, files, skipped); err != nil {
			return nil, err
		}
		rep.ScenariosLeftOut = skippedBySource(inputs, skipped)
		if rp.ScenariosWritten != nil {
			rp.ScenariosWritten(rep.ScenarioFiles, rep.ScenariosLeftOut)
		}
	}
	errs := make([]error, len(inputs))
	tickFiles := make([][]string, len(inputs))
	sem := make(chan struct{}, max(1, rp.Parallel))
	var mu sync.Mutex
	var wg sync.WaitGroup
	done := 0
	for i, in := range inputs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, files, err := rp.runCase(ctx, in, policies, budget, startup, mode)
			mu.Lock()
			defer mu.Unlock()
			rep.Cases[i], tickFiles[i], errs[i] = c, files, err
			done++
			if err == nil && rp.Progress != nil {
				rp.Progress(done, len(inputs), c)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	rep.TickFiles = slices.Concat(tickFiles...)
	return rep, nil
}

// policies are the plan's built-in policies, or the default pair.
func (rp RobustPlan) policies() []string {
	if len(rp.Policies) == 0 {
		return []string{PolicyAhead, PolicyDynamoSLA}
	}
	return rp.Policies
}

// runCase scores one case (its replays one at a time: the cases run in parallel), and
// writes its planner runs' per-tick timelines to rp.TicksDir when set (the files written).
func (rp RobustPlan) runCase(ctx context.Context, in robustInput, policies []string, budget int, startupS float64, mode config.Mode) (RobustCase, []string, error) {
	var specs []PolicySpec
	for _, p := range policies {
		specs = append(specs, PolicySpec{Name: p, Builtin: p})
	}
	sc, err := NewScenario(in.name, in.sla, 0.9, startupS, budget, specs)
	if err != nil {
		return RobustCase{}, nil, err
	}
	sc.Mode = mode
	if err := sc.Validate(); err != nil {
		return RobustCase{}, nil, err
	}
	sc.Description = in.detail
	r, err := Run(ctx, Plan{Scenario: sc, Requests: in.reqs, TraceDesc: in.detail, Profile: rp.Profile,
		Oracle: rp.Oracle, NoSLOOracle: true, Static: !rp.NoStatic, Parallel: 1, Ticks: rp.TicksDir != ""})
	if err != nil {
		return RobustCase{}, nil, fmt.Errorf("evaluate: robustness %s: %w", in.name, err)
	}
	c := RobustCase{Name: in.name, Source: in.source, Trace: in.trace, Detail: in.detail, Scale: in.scale, Requests: len(in.reqs),
		TTFTMs: in.sla.TTFTMs, ITLMs: in.sla.ITLMs, LowerBoundGPUHours: r.LowerBoundGPUHours, Rows: r.Rows}
	var files []string
	for k := range c.Rows {
		if c.Rows[k].Ticks != nil {
			path := filepath.Join(rp.TicksDir, in.name+"-"+fileSafe(c.Rows[k].Name)+".ticks.jsonl")
			if err := writeTicks(path, c.Rows[k].Ticks); err != nil {
				return RobustCase{}, files, fmt.Errorf("evaluate: robustness %s: %w", in.name, err)
			}
			files = append(files, path)
		}
		c.Rows[k].Timeline, c.Rows[k].Replicas, c.Rows[k].Ticks = nil, nil, nil // the cases' summary only
		switch c.Rows[k].Kind {
		case KindStatic:
			c.BestStatic = c.Rows[k].Deployment
		case KindSLOStatic:
			c.SLOStatic = c.Rows[k].Deployment
		}
	}
	return c, files, nil
}

// writeTicks writes a run's per-tick timeline to path, one JSON object a line.
func writeTicks(path string, ticks []replay.TimelineEntry) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, t := range ticks {
		if err := enc.Encode(t); err != nil {
			return err
		}
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// fileSafe is name with every rune but ASCII letters, digits, '.', '-' and '_' replaced by
// '_' (a run name such as "ahead @30s" as part of a file name).
func fileSafe(name string) string {
	return strings.Map(func(r rune) rune {
		if r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '.' || r == '-' || r == '_') {
			return r
		}
		return '_'
	}, name)
}

// RobustSummary is one run's distribution over the cases.
type RobustSummary struct {
	Name string `json:"name"`
	// MinGoodput and MedianGoodput are over the cases; Meets90 and Meets95 count the cases
	// at or above 90% and 95%.
	MinGoodput, MedianGoodput float64
	Meets90, Meets95          int
	// WarmCases counts the cases with requests from the warm start (Row.WarmFromS), and
	// WarmMeets95 those whose goodput from then on (Row.WarmGoodput) is at least 95%.
	WarmCases, WarmMeets95 int
	// MedianVsBound and MaxVsBound are GPU-hours over the lower bound; MedianVsStatic,
	// MedianVsSLOStatic and MedianVsOracle over the best static deployment's, the smallest
	// static deployment's reaching the policies' 95%, and the oracle's (0: not run).
	MedianVsBound, MaxVsBound, MedianVsStatic, MedianVsSLOStatic, MedianVsOracle float64
}

// warm is the summary's warm cell: "k of n" (the cases with requests from the warm start),
// or "-" without any.
func (s RobustSummary) warm() string {
	if s.WarmCases == 0 {
		return "-"
	}
	return fmt.Sprintf("%d of %d", s.WarmMeets95, s.WarmCases)
}

// Summaries are the report's distributions, one per run name, in row order.
func (rep *RobustReport) Summaries() []RobustSummary { return summarize(rep.Cases) }

// SourceSummary is the distributions of one source's cases (of one trace file's, for
// SourceTrace).
type SourceSummary struct {
	Source string `json:"source"`
	// Trace names the trace file (and model) of SourceTrace's cases; each has its own
	// summary.
	Trace string `json:"trace,omitempty"`
	// Cases is how many of the report's cases drew the source.
	Cases int `json:"cases"`
	// Runs are the cases' distributions, one per run name, in row order.
	Runs []RobustSummary `json:"runs"`
}

// SourceSummaries are the report's distributions per source (and per trace file of the
// user's own), in the order they first appear among the cases.
func (rep *RobustReport) SourceSummaries() []SourceSummary {
	type key struct{ source, trace string }
	var order []key
	bySource := map[key][]RobustCase{}
	for _, c := range rep.Cases {
		k := key{c.Source, c.Trace}
		if _, ok := bySource[k]; !ok {
			order = append(order, k)
		}
		bySource[k] = append(bySource[k], c)
	}
	out := make([]SourceSummary, 0, len(order))
	for _, k := range order {
		out = append(out, SourceSummary{Source: k.source, Trace: k.trace, Cases: len(bySource[k]), Runs: summarize(bySource[k])})
	}
	return out
}

// name is the summary's source, and its trace file when it has one ("trace: mine.csv").
func (ss SourceSummary) name() string {
	if ss.Trace != "" {
		return ss.Source + ": " + ss.Trace
	}
	return ss.Source
}

// summarize is the distributions of cases, one per run name, in row order.
func summarize(cases []RobustCase) []RobustSummary {
	var names []string
	type acc struct{ goodput, warm, vsBound, vsStatic, vsSLOStatic, vsOracle []float64 }
	accs := map[string]*acc{}
	for _, c := range cases {
		var static, sloStatic, oracle float64
		for _, r := range c.Rows {
			switch r.Kind {
			case KindStatic:
				static = r.GPUHours
			case KindSLOStatic:
				sloStatic = r.GPUHours
			case KindOracle:
				oracle = r.GPUHours
			}
		}
		for _, r := range c.Rows {
			a, ok := accs[r.Name]
			if !ok {
				a = &acc{}
				accs[r.Name] = a
				names = append(names, r.Name)
			}
			a.goodput = append(a.goodput, r.Goodput)
			if r.WarmGoodput != nil {
				a.warm = append(a.warm, *r.WarmGoodput)
			}
			if c.LowerBoundGPUHours > 0 {
				a.vsBound = append(a.vsBound, r.GPUHours/c.LowerBoundGPUHours)
			}
			if static > 0 {
				a.vsStatic = append(a.vsStatic, r.GPUHours/static)
			}
			if sloStatic > 0 {
				a.vsSLOStatic = append(a.vsSLOStatic, r.GPUHours/sloStatic)
			}
			if oracle > 0 {
				a.vsOracle = append(a.vsOracle, r.GPUHours/oracle)
			}
		}
	}
	var out []RobustSummary
	for _, n := range names {
		a := accs[n]
		s := RobustSummary{Name: n, MinGoodput: slices.Min(a.goodput), MedianGoodput: median(a.goodput),
			MedianVsBound: median(a.vsBound), MedianVsStatic: median(a.vsStatic), MedianVsSLOStatic: median(a.vsSLOStatic),
			MedianVsOracle: median(a.vsOracle)}
		if len(a.vsBound) > 0 {
			s.MaxVsBound = slices.Max(a.vsBound)
		}
		s.WarmCases = len(a.warm)
		for _, g := range a.warm {
			if g >= 0.95 {
				s.WarmMeets95++
			}
		}
		for _, g := range a.goodput {
			if g >= 0.9 {
				s.Meets90++
			}
			if g >= 0.95 {
				s.Meets95++
			}
		}
		out = append(out, s)
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// WriteMarkdown writes the benchmark: the distribution per run, then every case.
func (rep *RobustReport) WriteMarkdown(w io.Writer) error {
	shape := ""
	if rep.Mode == config.ModeAgg {
		shape = "; aggregated deployments (mode agg: one pool of engines running chunked prefill and decode in the same passes)"
	}
	fmt.Fprintf(w, "Seed %d, %d cases, each scored from %g s; budget %d GPUs; startup %g s%s.\n\n", rep.Seed, len(rep.Cases), rep.StartupS, rep.Budget, rep.StartupS, shape)
	if len(rep.Traces) > 0 {
		var names []string
		for _, t := range rep.Traces {
			names = append(names, fmt.Sprintf("%s (TTFT %g ms, ITL %g ms)", t.label(), t.SLA.TTFTMs, t.SLA.ITLMs))
		}
		if len(names) == 1 {
			fmt.Fprintf(w, "Trace file of your own: %s.\n\n", names[0])
		} else {
			fmt.Fprintf(w, "Trace files of your own, drawn in turn: %s.\n\n", strings.Join(names, "; "))
		}
	}
	warmFrom := roundedSeconds(warmStart(rep.StartupS, rep.StartupS)) // each case is scored from one startup
	fmt.Fprintf(w, "| run | min goodput | median goodput | cases ≥ 90%% | cases ≥ 95%% | cases ≥ 95%% from %s s | GPU-h ÷ bound, median / max | ÷ best static, median | ÷ static at %.0f%%, median | ÷ oracle, median |\n|---|---|---|---|---|---|---|---|---|---|\n", warmFrom, 100*DefaultSLOGoodput)
	ratio := func(v float64) string {
		if v > 0 {
			return fmt.Sprintf("%.2f", v)
		}
		return "-"
	}
	for _, s := range rep.Summaries() {
		fmt.Fprintf(w, "| %s | %.1f%% | %.1f%% | %d of %d | %d of %d | %s | %.2f / %.2f | %s | %s | %s |\n", s.Name, 100*s.MinGoodput,
			100*s.MedianGoodput, s.Meets90, len(rep.Cases), s.Meets95, len(rep.Cases), s.warm(), s.MedianVsBound, s.MaxVsBound,
			ratio(s.MedianVsStatic), ratio(s.MedianVsSLOStatic), ratio(s.MedianVsOracle))
	}
	// By source, the policies' rows only, when the cases drew more than one.
	if sums := rep.SourceSummaries(); len(sums) > 1 {
		fmt.Fprintf(w, "\nBy source (the policies):\n\n| source | run | cases | min goodput | median goodput | cases ≥ 95%% | cases ≥ 95%% from %s s | ÷ best static, median | ÷ static at %.0f%%, median | ÷ oracle, median |\n|---|---|---|---|---|---|---|---|---|---|\n", warmFrom, 100*DefaultSLOGoodput)
		policies := map[string]bool{}
		for _, r := range rep.Cases[0].Rows {
			policies[r.Name] = r.Kind == KindPolicy
		}
		for _, ss := range sums {
			for _, s := range ss.Runs {
				if policies[s.Name] {
					fmt.Fprintf(w, "| %s | %s | %d | %.1f%% | %.1f%% | %d of %d | %s | %s | %s | %s |\n", ss.name(), s.Name, ss.Cases, 100*s.MinGoodput,
						100*s.MedianGoodput, s.Meets95, ss.Cases, s.warm(), ratio(s.MedianVsStatic), ratio(s.MedianVsSLOStatic), ratio(s.MedianVsOracle))
				}
			}
		}
	}
	fmt.Fprintf(w, "\n| case | trace | requests | SLA ms | bound GPU-h | best static | static at %.0f%% | %s |\n|---|---|---|---|---|---|---|%s\n", 100*DefaultSLOGoodput,
		strings.Join(rep.runNames(), " goodput / GPU-h | ")+" goodput / GPU-h", strings.Repeat("---|", len(rep.runNames())))
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	for _, c := range rep.Cases {
		cells := []string{c.Name, c.Detail, fmt.Sprint(c.Requests), fmt.Sprintf("%g / %g", c.TTFTMs, c.ITLMs),
			fmt.Sprintf("%.2f", c.LowerBoundGPUHours), dash(c.BestStatic), dash(c.SLOStatic)}
		for _, r := range c.Rows {
			cells = append(cells, fmt.Sprintf("%.1f%% / %.2f", 100*r.Goodput, r.GPUHours))
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	_, err := fmt.Fprintln(w)
	return err
}

func (rep *RobustReport) runNames() []string {
	if len(rep.Cases) == 0 {
		return nil
	}
	var out []string
	for _, r := range rep.Cases[0].Rows {
		out = append(out, r.Name)
	}
	return out
}

// scenarioFiles builds the scenario file of every case one can replay — the traces' (a
// window, a speedup, the 16,384-token context, the model) and the sinusoids' — with the
// plan's SLA, budget, startup and policies: `planner simulate --scenario` replays it with its
// timelines and HTML report, the same requests (trace files by absolute path) scored from the
// same second. Each is validated as LoadScenario would. It returns the files, in case order,
// and the cases left out (shapes, ServeGen's rates and clients: their arrivals are drawn from
// rate series no scenario key describes).
func (rp RobustPlan) scenarioFiles(inputs []robustInput, policies []string, budget int, startup float64, mode config.Mode) (files []scenarioFile, skipped []string, err error) {
	for _, in := range inputs {
		if in.spec == nil {
			skipped = append(skipped, in.name)
			continue
		}
		spec := *in.spec
		if spec.File != "" {
			if spec.File, err = filepath.Abs(spec.File); err != nil {
				return nil, nil, fmt.Errorf("evaluate: robustness: %w", err)
			}
		}
		sc := Scenario{Name: in.name, Description: fmt.Sprintf("robustness seed %d, %s: %s", rp.Seed, in.name, in.detail),
			Trace: spec, SLA: in.sla, GoodputTarget: 0.9, StartupSeconds: startup, MaxGPUBudget: budget, Mode: mode}
		for _, p := range policies {
			sc.Policies = append(sc.Policies, PolicySpec{Name: p, Builtin: p})
		}
		// Validated as LoadScenario will, and written with the defaults that filled in
		// (mode, router, slo_goodput, …): what the case ran with.
		if err := sc.Validate(); err != nil {
			return nil, nil, fmt.Errorf("evaluate: robustness: scenario of %s: %w", in.name, err)
		}
		data, err := yaml.Marshal(&sc)
		if err != nil {
			return nil, nil, fmt.Errorf("evaluate: robustness: %s: %w", in.name, err)
		}
		files = append(files, scenarioFile{name: in.name, data: data})
	}
	return files, skipped, nil
}

// scenarioFile is one case's scenario file: the case's name and the file's YAML.
type scenarioFile struct {
	name string
	data []byte
}

// writeScenarios writes the scenario files to dir/<case>.yaml (the folder is made; Robustness
// has refused one holding anything already, so that files of another seed are not mixed in). An
// error when no case can be written. Each file's first line says how to replay it (with
// profileArg, the --profile flag the run used, if any).
func writeScenarios(dir, profileArg string, seed uint64, files []scenarioFile, skipped []string) ([]string, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("evaluate: robustness: no case can be written as a scenario file (%d cases of sources whose arrivals come from rate series)", len(skipped))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("evaluate: robustness: %w", err)
	}
	var written []string
	for _, f := range files {
		path := filepath.Join(dir, f.name+".yaml")
		head := fmt.Sprintf("# Written by planner robustness (seed %d): replay with planner simulate --scenario %s%s\n", seed, path, profileArg)
		if err := os.WriteFile(path, append([]byte(head), f.data...), 0o644); err != nil {
			return written, fmt.Errorf("evaluate: robustness: %w", err)
		}
		written = append(written, path)
	}
	return written, nil
}

// emptyFolder refuses a folder that holds anything already, so that the files of another
// run are not mixed in (a missing one is fine); what names the files in the errors.
func emptyFolder(dir, what string) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("evaluate: robustness: %s folder %s is not empty: give a new one", what, dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("evaluate: robustness: %w", err)
	}
	return nil
}

// skippedBySource says which cases were left out of the scenario files, counted per source.
func skippedBySource(inputs []robustInput, skipped []string) string {
	if len(skipped) == 0 {
		return ""
	}
	left := map[string]bool{}
	for _, n := range skipped {
		left[n] = true
	}
	var order []string
	count := map[string]int{}
	for _, in := range inputs {
		if left[in.name] {
			if count[in.source] == 0 {
				order = append(order, in.source)
			}
			count[in.source]++
		}
	}
	parts := make([]string, 0, len(order))
	for _, src := range order {
		parts = append(parts, fmt.Sprintf("%d %s", count[src], src))
	}
	return strings.Join(parts, ", ")
}
