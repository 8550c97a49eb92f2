// Package evaluate scores planner policies on a request trace: it replays the trace through
// simulated engines (sim/replay) under each policy, under the hindsight oracle and under the
// best static deployment, and gathers the results into one comparison (a table, a JSON
// document and a self-contained HTML report). Scenario files name a trace, the SLAs that
// fit the engine profile, the goodput target, the startup delay and the policies compared.
package evaluate

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/predict"
	"github.com/llmplanner/planner/sim/engine"
	"github.com/llmplanner/planner/sim/loadgen"
	"github.com/llmplanner/planner/sim/router"
)

// MaxScoredFromSeconds bounds a scenario's scored_from_s: 30 days, beyond any trace.
const MaxScoredFromSeconds = 30 * 24 * 3600

// MaxScenarioNameBytes bounds a scenario's name, which names its report files
// (<name>.json, <name>.html) under the 255 bytes of a file name; planner simulate's report
// name, the scenario's with the variants its flags add, is held to the same bound.
const MaxScenarioNameBytes = 200

// ErrInvalidScenario is wrapped by every scenario error.
var ErrInvalidScenario = errors.New("invalid scenario")

// Scenario is one evaluation: a trace, the SLAs it is scored against, and the policies.
type Scenario struct {
	// Name identifies the scenario in tables and names its report files: a file name of 1 to
	// MaxScenarioNameBytes bytes (no / or \, not . or ..). Description says what it is.
	Name        string `yaml:"name"`
	Description string `yaml:"description,omitempty"`
	// Mode is the deployment shape every run simulates: disagg (a prefill and a decode pool,
	// the default) or agg (one pool of aggregated engines, Dynamo's single decode
	// component). It is set on every policy's configuration.
	Mode config.Mode `yaml:"mode"`
	// Trace is the requests replayed.
	Trace TraceSpec `yaml:"trace"`
	// SLA is what a request must meet to be good.
	SLA SLA `yaml:"sla"`
	// GoodputTarget is the share of good requests the oracle (per interval) and the static
	// search (over the scored requests) must reach, in (0, 1].
	GoodputTarget float64 `yaml:"goodput_target"`
	// SLOGoodput is the goodput the policies are held to over the trace, in (0, 1] (default
	// DefaultSLOGoodput). When it is above GoodputTarget, the static search also runs at it
	// (the slo-static row: the fixed deployment a user who needs that goodput would run), and
	// so does the oracle (the slo-oracle row: the cheapest of six oracle runs bisecting its
	// per-interval target whose goodput over the scored requests reaches it; in
	// planner simulate, not the robustness benchmark), so that a policy's GPU-hours can be
	// compared with a fixed deployment and a hindsight schedule reaching the same goodput,
	// not only with ones reaching the lower target.
	SLOGoodput float64 `yaml:"slo_goodput"`
	// StartupSeconds is how long a new engine takes to become ready.
	StartupSeconds float64 `yaml:"startup_s"`
	// MaxGPUBudget caps every policy's GPUs (and bounds the oracle's search).
	MaxGPUBudget int `yaml:"max_gpu_budget"`
	// OracleIntervalSeconds is the oracle's decision interval (default 60).
	OracleIntervalSeconds float64 `yaml:"oracle_interval_s,omitempty"`
	// Policies are the planner configurations compared (default: the built-in ones).
	Policies []PolicySpec `yaml:"policies,omitempty"`
	// Static are fixed deployments scored beside the best one the search finds, each
	// [prefill, decode] engines (agg: [engines]).
	Static [][]int `yaml:"static,omitempty"`
	// Initial is the deployment every policy starts from, [prefill, decode] engines (agg:
	// [engines]); empty: the smallest static deployment serving the first
	// StartWindowSeconds of the trace at the goodput target.
	Initial []int `yaml:"initial,omitempty"`
	// ScoredFromSeconds is when scoring starts (nil: StartupSeconds, the end of the first
	// startup window). 0 scores every request, as a benchmark client does.
	ScoredFromSeconds *float64 `yaml:"scored_from_s,omitempty"`
	// Engine overrides the simulated engines' settings (every run's, the oracle's and the
	// static deployments'); unset fields keep the mocker defaults of sim/engine.
	Engine EngineSpec `yaml:"engine,omitempty"`
	// Published is a published result the scenario reproduces, rendered beside the
	// simulated one (nil: none).
	Published *Published `yaml:"published,omitempty"`
	// Router is how the frontend routes requests in every replay of the scenario:
	// least_loaded (the default), round_robin or kv (the engine holding the most of the
	// request's prompt blocks, ties by load), as Dynamo's router modes.
	Router router.Mode `yaml:"router"`
	// PrefixCache turns on the prefill and aggregated engines' prefix cache of the trace's hash ids
	// (Mooncake traces; other traces have none, so it changes nothing there).
	PrefixCache bool `yaml:"prefix_cache,omitempty"`

	dir       string // the scenario file's folder: relative trace paths start there
	generated bool   // the requests come from the caller (robustness cases), not Trace
}

// EngineSpec overrides sim/engine settings; a zero field keeps engine.DefaultConfig's value.
type EngineSpec struct {
	// MaxNumBatchedTokens is the token budget of one pass (1..MaxEngineBatchedTokens).
	MaxNumBatchedTokens int `yaml:"max_num_batched_tokens"`
	// MaxNumSeqs is the most requests an engine runs at once (1..MaxEngineSeqs).
	MaxNumSeqs int `yaml:"max_num_seqs"`
	// BlockSize is the KV block size in tokens (1..MaxEngineBlockSize).
	BlockSize int `yaml:"block_size"`
	// NumGPUBlocks is the KV capacity in blocks (1..MaxEngineGPUBlocks; unset: the profile's
	// max_kv_tokens / block_size).
	NumGPUBlocks int `yaml:"num_gpu_blocks"`
	// SpeedupRatio divides every pass time, DecodeSpeedupRatio the decode part again
	// (each in (0, MaxEngineSpeedup]): engines faster (> 1) or slower than the profile.
	SpeedupRatio       float64 `yaml:"speedup_ratio"`
	DecodeSpeedupRatio float64 `yaml:"decode_speedup_ratio"`
	// KVTransferGBps is the prefill→decode KV transfer bandwidth in GB/s (in (0,
	// MaxEngineKVTransferGBps]); KVBytesPerToken the KV size of one token (in (0,
	// MaxEngineKVBytesPerToken]).
	KVTransferGBps  float64 `yaml:"kv_transfer_gbps"`
	KVBytesPerToken float64 `yaml:"kv_bytes_per_token"`
	// NoChunkedPrefill turns chunked prefill off (a prompt must fit one pass's budget).
	NoChunkedPrefill bool `yaml:"no_chunked_prefill"`
}

// Bounds of the engine overrides.
const (
	MaxEngineBatchedTokens   = 1 << 20
	MaxEngineSeqs            = 1 << 16
	MaxEngineBlockSize       = 4096
	MaxEngineGPUBlocks       = 1 << 24
	MaxEngineSpeedup         = 100
	MaxEngineKVTransferGBps  = 10000
	MaxEngineKVBytesPerToken = 1 << 24
)

// validate checks the overrides against their bounds.
func (e EngineSpec) validate() error {
	var errs []error
	count := func(name string, v, hi int) {
		if v < 0 || v > hi {
			errs = append(errs, fmt.Errorf("engine: %s %d not in 1..%d", name, v, hi))
		}
	}
	ratio := func(name string, v, hi float64) {
		if v != 0 && !(v > 0 && v <= hi) {
			errs = append(errs, fmt.Errorf("engine: %s %v not in (0, %v]", name, v, hi))
		}
	}
	count("max_num_batched_tokens", e.MaxNumBatchedTokens, MaxEngineBatchedTokens)
	count("max_num_seqs", e.MaxNumSeqs, MaxEngineSeqs)
	count("block_size", e.BlockSize, MaxEngineBlockSize)
	count("num_gpu_blocks", e.NumGPUBlocks, MaxEngineGPUBlocks)
	ratio("speedup_ratio", e.SpeedupRatio, MaxEngineSpeedup)
	ratio("decode_speedup_ratio", e.DecodeSpeedupRatio, MaxEngineSpeedup)
	ratio("kv_transfer_gbps", e.KVTransferGBps, MaxEngineKVTransferGBps)
	ratio("kv_bytes_per_token", e.KVBytesPerToken, MaxEngineKVBytesPerToken)
	return errors.Join(errs...)
}

// EngineConfig is the configuration of a new simulated engine of a role: the mocker
// defaults with the scenario's overrides.
func (sc *Scenario) EngineConfig(role engine.Role) engine.Config {
	c := engine.DefaultConfig(role)
	e := sc.Engine
	setInt := func(dst *int, v int) {
		if v != 0 {
			*dst = v
		}
	}
	setFloat := func(dst *float64, v float64) {
		if v != 0 {
			*dst = v
		}
	}
	setInt(&c.MaxNumBatchedTokens, e.MaxNumBatchedTokens)
	setInt(&c.MaxNumSeqs, e.MaxNumSeqs)
	setInt(&c.BlockSize, e.BlockSize)
	setInt(&c.NumGPUBlocks, e.NumGPUBlocks)
	setFloat(&c.SpeedupRatio, e.SpeedupRatio)
	setFloat(&c.DecodeSpeedupRatio, e.DecodeSpeedupRatio)
	setFloat(&c.KVTransferBandwidth, e.KVTransferGBps*1e9)
	setFloat(&c.KVBytesPerToken, e.KVBytesPerToken)
	if e.NoChunkedPrefill {
		c.EnableChunkedPrefill = false
	}
	return c
}

// Published is a published result: a policy's goodput gains over static deployments, as
// the source reports them.
type Published struct {
	// Source says where the figures come from (at most 500 characters).
	Source string `yaml:"source" json:"source"`
	// Policy is the scenario policy the figures are about.
	Policy string `yaml:"policy" json:"policy"`
	// Gains are the policy's published gains, one per baseline (1..MaxPublishedGains).
	Gains []PublishedGain `yaml:"gains" json:"gains"`
}

// MaxPublishedGains bounds Published.Gains.
const MaxPublishedGains = 16

// PublishedGain is a published improvement of the policy over one static deployment.
type PublishedGain struct {
	// Static is the baseline, [prefill, decode] engines: one of the scenario's static
	// deployments.
	Static []int `yaml:"static" json:"static"`
	// GoodputPct is the goodput improvement in percent (+52 is 1.52×).
	GoodputPct float64 `yaml:"goodput_pct" json:"goodput_pct"`
	// GoodputPerGPUPct is the goodput-per-GPU improvement in percent (nil: not published).
	GoodputPerGPUPct *float64 `yaml:"goodput_per_gpu_pct" json:"goodput_per_gpu_pct,omitempty"`
}

// validate checks the published figures against the scenario's static deployments.
func (p *Published) validate(sc *Scenario) error {
	switch {
	case p.Policy == "":
		return errors.New("published: no policy")
	case len(p.Source) > 500:
		return errors.New("published: source longer than 500 characters")
	case len(p.Gains) == 0 || len(p.Gains) > MaxPublishedGains:
		return fmt.Errorf("published: 1 to %d gains", MaxPublishedGains)
	}
	for i, g := range p.Gains {
		if err := sc.checkDeployment(g.Static); err != nil {
			return fmt.Errorf("published: gains[%d]: %w", i, err)
		}
		if !slices.ContainsFunc(sc.Static, func(d []int) bool { return slices.Equal(d, g.Static) }) {
			return fmt.Errorf("published: gains[%d]: %s is not one of the scenario's static deployments", i, sc.DeploymentName(sc.Deployment(g.Static)))
		}
		for _, v := range []*float64{&g.GoodputPct, g.GoodputPerGPUPct} {
			if v != nil && !(*v > -100 && !math.IsInf(*v, 1)) {
				return fmt.Errorf("published: gains[%d]: %v%% is not a finite gain above -100%%", i, *v)
			}
		}
	}
	return nil
}

// SLA is the latency objective of a request.
type SLA struct {
	TTFTMs float64 `yaml:"ttft_ms" json:"ttft_ms"`
	ITLMs  float64 `yaml:"itl_ms" json:"itl_ms"`
}

// TraceSpec is a trace file, Dynamo's sinusoidal load or a load in phases.
type TraceSpec struct {
	// File is a Mooncake JSONL, Azure CSV or BurstGPT CSV trace; a relative path is looked
	// up in the data folder given to Requests, then next to the scenario file.
	File string `yaml:"file,omitempty"`
	// FromSeconds and LengthSeconds cut a window of the file (0 length: to the end).
	FromSeconds   float64 `yaml:"from_s,omitempty"`
	LengthSeconds float64 `yaml:"length_s,omitempty"`
	// Speedup divides the arrival times (default 1).
	Speedup float64 `yaml:"speedup,omitempty"`
	// MaxContext drops the requests whose ISL + OSL exceed it (0: keep all), as an engine
	// with that max model length would refuse them.
	MaxContext int `yaml:"max_context,omitempty"`
	// Model keeps one model's requests of a BurstGPT trace (its Model column: ChatGPT or
	// GPT-4); empty: every model's. An error with any other format (predict.TraceFilter).
	Model string `yaml:"model,omitempty"`
	// Sinusoid generates Dynamo's sin_synth load instead of reading a file.
	Sinusoid *SinusoidSpec `yaml:"sinusoid,omitempty"`
	// Phases generates a load in phases instead: steps, ramps, traffic that stops and comes
	// back.
	Phases *PhasesSpec `yaml:"phases,omitempty"`
}

// PhasesSpec is a load in phases, one after the other: each holds its rate for its duration,
// or ramps linearly from it to to_rps. Each second's request count is Poisson with the rate at
// the second's start (loadgen.FromRates), spread evenly inside it; prompt and output lengths
// are exponential with means isl and osl (at least 1 token each, at most max_tokens in all).
type PhasesSpec struct {
	Steps     []PhaseSpec `yaml:"steps"`
	ISL       float64     `yaml:"isl"`
	OSL       float64     `yaml:"osl"`
	MaxTokens int         `yaml:"max_tokens,omitempty"` // default DefaultPhasesMaxTokens
	Seed      uint64      `yaml:"seed"`
}

// PhaseSpec is one phase of a PhasesSpec.
type PhaseSpec struct {
	RPS             float64  `yaml:"rps"`
	ToRPS           *float64 `yaml:"to_rps,omitempty"` // a linear ramp from rps to it (default: rps throughout)
	DurationSeconds float64  `yaml:"duration_s"`
}

// Bounds of a PhasesSpec.
const (
	// MaxPhases is the most phases a load has.
	MaxPhases = 10000
	// MaxPhasesSeconds is the longest load in phases: a week, as loadgen.FromRates.
	MaxPhasesSeconds = 7 * 24 * 3600
	// MaxPhaseRPS is the highest rate of a phase, as loadgen.FromRates.
	MaxPhaseRPS = 1e5
	// DefaultPhasesMaxTokens is the longest request of a load in phases unless max_tokens
	// says otherwise: the bundled H200 profile's context.
	DefaultPhasesMaxTokens = 16384
	// MaxPhasesTokens is the highest max_tokens of a load in phases.
	MaxPhasesTokens = 1 << 24
	// MaxPhasesRequests is the most requests a load in phases may expect (its rates summed
	// over its seconds): ten million, which a replay holds in memory.
	MaxPhasesRequests = 10_000_000
)

// end is the phase's rate at its end: to_rps, or rps when it holds.
func (st PhaseSpec) end() float64 {
	if st.ToRPS != nil {
		return *st.ToRPS
	}
	return st.RPS
}

// maxTokens is the longest request of the load: max_tokens, or DefaultPhasesMaxTokens.
func (p *PhasesSpec) maxTokens() int {
	if p.MaxTokens == 0 {
		return DefaultPhasesMaxTokens
	}
	return p.MaxTokens
}

// rates checks the phases and returns the rate of each second of the load.
func (p *PhasesSpec) rates() ([]float64, error) {
	switch {
	case len(p.Steps) == 0 || len(p.Steps) > MaxPhases:
		return nil, fmt.Errorf("phases: steps: want 1 to %d phases, have %d", MaxPhases, len(p.Steps))
	case p.MaxTokens < 0 || p.MaxTokens == 1 || p.MaxTokens > MaxPhasesTokens:
		return nil, fmt.Errorf("phases: max_tokens %d: want 2 to %d (0: %d)", p.MaxTokens, MaxPhasesTokens, DefaultPhasesMaxTokens)
	case !(p.ISL >= 1) || !(p.OSL >= 1) || !(p.ISL+p.OSL <= float64(p.maxTokens())):
		return nil, fmt.Errorf("phases: isl (%v) and osl (%v) are mean token counts of at least 1, together at most max_tokens (%d)", p.ISL, p.OSL, p.maxTokens())
	}
	var total, expected float64
	for i, st := range p.Steps {
		to := st.end()
		switch {
		case !(st.DurationSeconds >= 1) || st.DurationSeconds != math.Trunc(st.DurationSeconds) || st.DurationSeconds > MaxPhasesSeconds:
			return nil, fmt.Errorf("phases: steps[%d]: duration_s %v: want a whole number of seconds from 1 to %d", i, st.DurationSeconds, MaxPhasesSeconds)
		case !(st.RPS >= 0 && st.RPS <= MaxPhaseRPS) || !(to >= 0 && to <= MaxPhaseRPS):
			return nil, fmt.Errorf("phases: steps[%d]: rps and to_rps must be from 0 to %g req/s", i, float64(MaxPhaseRPS))
		}
		total += st.DurationSeconds
		expected += (st.RPS + to) / 2 * st.DurationSeconds
	}
	switch {
	case total > MaxPhasesSeconds:
		return nil, fmt.Errorf("phases: %v s in all, over a week (%d s)", total, MaxPhasesSeconds)
	case expected > MaxPhasesRequests:
		return nil, fmt.Errorf("phases: about %.0f requests in all, over %d", expected, MaxPhasesRequests)
	}
	out := make([]float64, 0, int(total))
	for _, st := range p.Steps {
		to := st.end()
		for k := 0; float64(k) < st.DurationSeconds; k++ {
			out = append(out, st.RPS+(to-st.RPS)*float64(k)/st.DurationSeconds)
		}
	}
	return out, nil
}

// options is the loadgen form of the phases.
func (p *PhasesSpec) options() (loadgen.RatesOptions, error) {
	rates, err := p.rates()
	if err != nil {
		return loadgen.RatesOptions{}, err
	}
	return loadgen.RatesOptions{Rates: rates, StepS: 1, DurationS: float64(len(rates)), MeanISL: p.ISL, MeanOSL: p.OSL,
		MaxTokens: p.maxTokens(), Seed: p.Seed}, nil
}

// describe is the phases in a line: each phase's rate and length, or, past six phases, their
// number, range and total length.
func (p *PhasesSpec) describe() string {
	var total, lo, hi float64
	lo = math.Inf(1)
	parts := make([]string, 0, len(p.Steps))
	for _, st := range p.Steps {
		to := st.end()
		part := fmt.Sprintf("%g req/s %g s", st.RPS, st.DurationSeconds)
		if st.ToRPS != nil {
			part = fmt.Sprintf("%g→%g req/s %g s", st.RPS, to, st.DurationSeconds)
		}
		parts = append(parts, part)
		total += st.DurationSeconds
		lo, hi = math.Min(lo, math.Min(st.RPS, to)), math.Max(hi, math.Max(st.RPS, to))
	}
	what := strings.Join(parts, ", then ")
	if len(parts) > 6 {
		what = fmt.Sprintf("%d phases at %g–%g req/s, %g s", len(parts), lo, hi, total)
	}
	most := ""
	if p.MaxTokens != 0 {
		most = fmt.Sprintf(" (at most %d tokens a request)", p.MaxTokens)
	}
	return fmt.Sprintf("phases: %s; ISL/OSL exponential %g/%g%s, seed %d", what, p.ISL, p.OSL, most, p.Seed)
}

// SinusoidSpec is Dynamo's sinusoidal load (benchmarks/sin_load_generator).
type SinusoidSpec struct {
	DurationSeconds float64 `yaml:"duration_s"`
	MinRPS          float64 `yaml:"min_rps"`
	MaxRPS          float64 `yaml:"max_rps"`
	PeriodSeconds   float64 `yaml:"period_s"`
	ISL             int     `yaml:"isl"`
	OSL             int     `yaml:"osl"`
	Seed            uint64  `yaml:"seed"`
}

// PolicySpec is one policy: a built-in one, or a planner configuration (YAML, the same
// keys as a planner config file) applied on top of Dynamo's defaults.
type PolicySpec struct {
	Name    string `yaml:"name"`
	Builtin string `yaml:"builtin,omitempty"`
	Config  string `yaml:"config,omitempty"`
	// File is a planner config file (relative to the scenario file), instead of Config.
	File string `yaml:"file,omitempty"`
}

// Built-in policy names.
const (
	// PolicyAhead is this planner's own policy (scaling_policy ahead, docs/policy.md) with
	// its defaults: a 5 s interval, the startup delay learned from 60 s.
	PolicyAhead = "ahead"
	// PolicyDynamoSLA is Dynamo's SLA planner with its defaults: both loops, ARIMA, 180 s
	// throughput and 5 s load intervals.
	PolicyDynamoSLA = "dynamo-sla"
	// PolicyDynamoDefault is what Dynamo's planner does by default: optimization target
	// throughput, the threshold ("easy mode") load loop only — prefill queue and decode KV
	// utilisation thresholds every 5 s.
	PolicyDynamoDefault = "dynamo-default"
)

// builtins are the built-in policies' settings on top of config.Default.
var builtins = map[string]string{
	PolicyAhead: `
optimization_target: sla
scaling_policy: ahead
load_adjustment_interval_seconds: 5
`,
	PolicyDynamoSLA: `
optimization_target: sla
enable_throughput_scaling: true
enable_load_scaling: true
load_predictor: arima
throughput_adjustment_interval_seconds: 180
load_adjustment_interval_seconds: 5
`,
	PolicyDynamoDefault: `
optimization_target: throughput
`,
}

// BuiltinPolicies are the built-in policies, in table order.
var BuiltinPolicies = []string{PolicyAhead, PolicyDynamoSLA, PolicyDynamoDefault}

// DefaultSLOGoodput is the goodput the policies are held to when a scenario does not say:
// 95%, the goodput the ahead policy sizes for (its miss budget, docs/policy.md).
const DefaultSLOGoodput = 0.95

// LoadScenario reads and checks a scenario file.
func LoadScenario(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	var sc Scenario
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&sc); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidScenario, path, err)
	}
	sc.dir = filepath.Dir(path)
	if sc.Name == "" {
		sc.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	if err := sc.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if p := sc.Published; p != nil && !slices.ContainsFunc(sc.Policies, func(ps PolicySpec) bool { return ps.Name == p.Policy }) {
		return nil, fmt.Errorf("%w: %s: published: policy %q is not one of the scenario's", ErrInvalidScenario, path, p.Policy)
	}
	return &sc, nil
}

// Validate checks the scenario and fills its defaults.
func (sc *Scenario) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidScenario, fmt.Sprintf(format, args...))
	}
	switch {
	case sc.Name == "" || len(sc.Name) > MaxScenarioNameBytes || sc.Name == "." || sc.Name == ".." ||
		strings.ContainsAny(sc.Name, "/\\\x00"):
		// The name is the report's file name in planner simulate --out.
		return bad("name %q: want 1 to %d bytes, a file name (no / or \\, not . or ..)", sc.Name, MaxScenarioNameBytes)
	case !sc.generated && sc.Trace.sources() != 1:
		return bad("trace: give exactly one of file, sinusoid and phases")
	case !(sc.SLA.TTFTMs > 0) || !(sc.SLA.ITLMs > 0):
		return bad("sla: ttft_ms and itl_ms must be > 0")
	case !(sc.GoodputTarget > 0 && sc.GoodputTarget <= 1):
		return bad("goodput_target %v not in (0, 1]", sc.GoodputTarget)
	case sc.SLOGoodput != 0 && !(sc.SLOGoodput > 0 && sc.SLOGoodput <= 1):
		return bad("slo_goodput %v not in (0, 1]", sc.SLOGoodput)
	case sc.StartupSeconds < 0:
		return bad("startup_s must be ≥ 0")
	case sc.Mode != "" && sc.Mode != config.ModeDisagg && sc.Mode != config.ModeAgg:
		return bad("mode %q: want %q or %q", sc.Mode, config.ModeDisagg, config.ModeAgg)
	case sc.Mode == config.ModeAgg && sc.MaxGPUBudget < 1:
		return bad("max_gpu_budget must be ≥ 1 (one aggregated engine)")
	case sc.Mode != config.ModeAgg && sc.MaxGPUBudget < 2:
		return bad("max_gpu_budget must be ≥ 2 (one engine of each role)")
	case sc.OracleIntervalSeconds < 0:
		return bad("oracle_interval_s must be ≥ 0")
	case sc.Trace.Speedup < 0 || sc.Trace.FromSeconds < 0 || sc.Trace.LengthSeconds < 0 || sc.Trace.MaxContext < 0:
		return bad("trace: from_s, length_s, speedup and max_context must be ≥ 0")
	case sc.Trace.Model != "" && sc.Trace.File == "":
		return bad("trace: model selects a trace file's requests; it needs file")
	case sc.Trace.File == "" && (sc.Trace.FromSeconds != 0 || sc.Trace.LengthSeconds != 0 || (sc.Trace.Speedup != 0 && sc.Trace.Speedup != 1) || sc.Trace.MaxContext != 0):
		return bad("trace: from_s, length_s, speedup and max_context cut and compress a trace file; a generated load (sinusoid, phases) gives its own")
	}
	if err := predict.CheckModelName(sc.Trace.Model); err != nil {
		return bad("trace: %v", err)
	}
	if sc.Mode == "" {
		sc.Mode = config.ModeDisagg
	}
	if sc.SLOGoodput == 0 {
		sc.SLOGoodput = DefaultSLOGoodput
	}
	for i, d := range sc.Static {
		if err := sc.checkDeployment(d); err != nil {
			return bad("static[%d]: %v", i, err)
		}
	}
	if len(sc.Initial) > 0 {
		if err := sc.checkDeployment(sc.Initial); err != nil {
			return bad("initial: %v", err)
		}
	}
	if f := sc.ScoredFromSeconds; f != nil && !(*f >= 0 && *f <= MaxScoredFromSeconds) {
		return bad("scored_from_s must be a number from 0 to %d (30 days)", MaxScoredFromSeconds)
	}
	if err := sc.Engine.validate(); err != nil {
		return bad("%v", err)
	}
	if p := sc.Published; p != nil {
		if err := p.validate(sc); err != nil {
			return bad("%v", err)
		}
	}
	mode, err := router.ParseMode(string(sc.Router))
	if err != nil {
		return bad("%v", err)
	}
	sc.Router = mode
	if sc.Trace.Speedup == 0 {
		sc.Trace.Speedup = 1
	}
	if sc.OracleIntervalSeconds == 0 {
		sc.OracleIntervalSeconds = 60
	}
	if s := sc.Trace.Sinusoid; s != nil {
		o := s.options()
		if err := o.Validate(); err != nil {
			return bad("trace: sinusoid: %v", err)
		}
	}
	if p := sc.Trace.Phases; p != nil {
		if _, err := p.rates(); err != nil {
			return bad("trace: %v", err)
		}
	}
	if len(sc.Policies) == 0 {
		for _, b := range BuiltinPolicies {
			sc.Policies = append(sc.Policies, PolicySpec{Name: b, Builtin: b})
		}
	}
	seen := map[string]bool{}
	for i, p := range sc.Policies {
		if p.Name == "" {
			return bad("policies[%d]: no name", i)
		}
		if seen[p.Name] {
			return bad("policies: %q twice", p.Name)
		}
		seen[p.Name] = true
		n := 0
		for _, s := range []string{p.Builtin, p.Config, p.File} {
			if s != "" {
				n++
			}
		}
		if n != 1 {
			return bad("policies[%d] (%s): give exactly one of builtin, config and file", i, p.Name)
		}
		if _, err := sc.PolicyConfig(p); err != nil {
			return err
		}
	}
	return nil
}

// checkDeployment checks a [prefill, decode] (agg: [engines]) deployment against the mode
// and the budget.
func (sc *Scenario) checkDeployment(d []int) error {
	if sc.Mode == config.ModeAgg {
		if len(d) != 1 || d[0] < 1 || d[0] > sc.MaxGPUBudget {
			return fmt.Errorf("%v: mode agg takes [engines], 1 to max_gpu_budget (%d)", d, sc.MaxGPUBudget)
		}
		return nil
	}
	if len(d) != 2 {
		return fmt.Errorf("%v: mode disagg takes [prefill, decode]", d)
	}
	if d[0] < 1 || d[1] < 1 || d[0] > sc.MaxGPUBudget || d[1] > sc.MaxGPUBudget-d[0] {
		return fmt.Errorf("%dP %dD: each pool needs 1 to max_gpu_budget (%d) engines in all", d[0], d[1], sc.MaxGPUBudget)
	}
	return nil
}

// Deployment returns a [prefill, decode] (agg: [engines]) deployment as the replay's
// initial prefill and decode engines (agg: 0 and the engines).
func (sc *Scenario) Deployment(d []int) (prefill, decode int) {
	if sc.Mode == config.ModeAgg {
		return 0, d[0]
	}
	return d[0], d[1]
}

// StartAt sets the deployment the policies start from (Initial) to prefill and decode
// engines (agg: decode aggregated engines, prefill 0), checked against the mode and budget.
func (sc *Scenario) StartAt(prefill, decode int) error {
	d := []int{prefill, decode}
	if sc.Mode == config.ModeAgg {
		d = []int{decode}
	}
	if err := sc.checkDeployment(d); err != nil {
		return fmt.Errorf("%w: initial: %w", ErrInvalidScenario, err)
	}
	sc.Initial = d
	return nil
}

// DeploymentName names a deployment of the scenario's mode ("2P 2D", "4 agg").
func (sc *Scenario) DeploymentName(prefill, decode int) string {
	if sc.Mode == config.ModeAgg {
		return fmt.Sprintf("%d agg", decode)
	}
	return fmt.Sprintf("%dP %dD", prefill, decode)
}

func (s *SinusoidSpec) options() loadgen.SinusoidOptions {
	return loadgen.SinusoidOptions{DurationS: s.DurationSeconds, MinRPS: s.MinRPS, MaxRPS: s.MaxRPS,
		PeriodS: s.PeriodSeconds, ISL: s.ISL, OSL: s.OSL, Seed: s.Seed}
}

// ScoredFrom is when the scenario's runs start being scored (seconds): scored_from_s when
// given, else after the first startup window, since the policies start from their initial
// deployment, the static deployments from their own size and the oracle from what it
// ordered ahead.
func (sc *Scenario) ScoredFrom() float64 {
	if sc.ScoredFromSeconds != nil {
		return *sc.ScoredFromSeconds
	}
	return sc.StartupSeconds
}

// StartupDelay is the scenario's engine startup delay.
func (sc *Scenario) StartupDelay() time.Duration {
	return time.Duration(sc.StartupSeconds * float64(time.Second))
}

// Requests returns the scenario's trace, arrivals in seconds from 0. dataDir is where
// relative trace files are looked up first.
func (sc *Scenario) Requests(dataDir string) ([]predict.Request, string, error) {
	t := sc.Trace
	if t.Sinusoid != nil {
		reqs, err := loadgen.Sinusoid(t.Sinusoid.options())
		if err != nil {
			return nil, "", err
		}
		s := t.Sinusoid
		return reqs, fmt.Sprintf("sinusoid rr-%g-%g period %g s, %g s, ISL %d / OSL %d, seed %d",
			s.MinRPS, s.MaxRPS, s.PeriodSeconds, s.DurationSeconds, s.ISL, s.OSL, s.Seed), nil
	}
	if p := t.Phases; p != nil {
		o, err := p.options()
		if err != nil {
			return nil, "", fmt.Errorf("scenario %s: trace: %w", sc.Name, err)
		}
		reqs, err := loadgen.FromRates(o)
		if err != nil {
			return nil, "", fmt.Errorf("scenario %s: trace: %w", sc.Name, err)
		}
		if len(reqs) == 0 {
			return nil, "", fmt.Errorf("scenario %s: trace: the phases drew no request (every rate 0, or too short)", sc.Name)
		}
		return reqs, p.describe(), nil
	}
	path := t.File
	if !filepath.IsAbs(path) {
		path = filepath.Join(dataDir, t.File)
		if _, err := os.Stat(path); err != nil && sc.dir != "" {
			if alt := filepath.Join(sc.dir, t.File); fileExists(alt) {
				path = alt
			}
		}
	}
	reqs, err := predict.ReadTraceOf(path, predict.TraceFilter{Model: t.Model})
	if err != nil {
		return nil, "", fmt.Errorf("scenario %s: trace: %w", sc.Name, err)
	}
	reqs = loadgen.Window(reqs, t.FromSeconds, t.LengthSeconds)
	dropped := 0
	kept := reqs[:0]
	for _, r := range reqs {
		if t.MaxContext > 0 && r.InputTokens+r.OutputTokens > t.MaxContext {
			dropped++
			continue
		}
		r.Arrival /= t.Speedup
		kept = append(kept, r)
	}
	reqs = kept
	if len(reqs) == 0 {
		return nil, "", fmt.Errorf("scenario %s: trace %s: no request in the window", sc.Name, path)
	}
	desc := predict.TraceFilter{Model: t.Model}.Label(filepath.Base(path))
	if t.FromSeconds > 0 || t.LengthSeconds > 0 {
		desc += fmt.Sprintf(", window %g s + %g s", t.FromSeconds, t.LengthSeconds)
	}
	if t.Speedup != 1 {
		desc += fmt.Sprintf(", %g× speed", t.Speedup)
	}
	if dropped > 0 {
		desc += fmt.Sprintf(", %d requests longer than %d tokens dropped", dropped, t.MaxContext)
	}
	return reqs, desc, nil
}

// sources counts the trace's sources given: a file, a sinusoid, phases.
func (t TraceSpec) sources() int {
	n := 0
	for _, given := range []bool{t.File != "", t.Sinusoid != nil, t.Phases != nil} {
		if given {
			n++
		}
	}
	return n
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// PolicyConfig builds a policy's planner configuration: Dynamo's defaults, the policy's
// settings, then the scenario's SLA, GPU budget and mode, on the virtual environment.
func (sc *Scenario) PolicyConfig(p PolicySpec) (config.Config, error) {
	src, text := p.Name, p.Config
	switch {
	case p.Builtin != "":
		b, ok := builtins[p.Builtin]
		if !ok {
			return config.Config{}, fmt.Errorf("%w: policy %s: unknown builtin %q (have %s)", ErrInvalidScenario,
				p.Name, p.Builtin, strings.Join(BuiltinPolicies, ", "))
		}
		text = b
	case p.File != "":
		path := p.File
		if !filepath.IsAbs(path) && sc.dir != "" {
			path = filepath.Join(sc.dir, path)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return config.Config{}, fmt.Errorf("%w: policy %s: %w", ErrInvalidScenario, p.Name, err)
		}
		src, text = path, string(data)
	}
	cfg, _, err := config.Parse([]byte(text), src, func(string) (string, bool) { return "", false })
	if err != nil {
		return config.Config{}, fmt.Errorf("%w: policy %s: %w", ErrInvalidScenario, p.Name, err)
	}
	return sc.apply(cfg)
}

// apply sets the scenario's SLA, budget, mode and environment on a policy's config.
func (sc *Scenario) apply(cfg config.Config) (config.Config, error) {
	cfg.TTFTMs, cfg.ITLMs = sc.SLA.TTFTMs, sc.SLA.ITLMs
	cfg.MaxGPUBudget = sc.MaxGPUBudget
	cfg.Mode, cfg.Environment = sc.Mode, config.EnvVirtual
	if cfg.Mode == "" {
		cfg.Mode = config.ModeDisagg
	}
	if err := cfg.Validate(); err != nil {
		return config.Config{}, fmt.Errorf("%w: %w", ErrInvalidScenario, err)
	}
	return cfg, nil
}

// IsBuiltin reports whether name is a built-in policy.
func IsBuiltin(name string) bool { _, ok := builtins[name]; return ok }

// NewScenario is a scenario whose requests the caller gives (evaluate.Plan.Requests), not a
// trace file: the SLA, goodput target, engine start-up, GPU budget and policies.
func NewScenario(name string, sla SLA, target, startupS float64, budget int, policies []PolicySpec) (*Scenario, error) {
	sc := &Scenario{Name: name, SLA: sla, GoodputTarget: target, StartupSeconds: startupS, MaxGPUBudget: budget,
		Policies: policies, generated: true}
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	return sc, nil
}
