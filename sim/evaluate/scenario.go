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
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/predict"
	"github.com/llmplanner/planner/sim/loadgen"
	"github.com/llmplanner/planner/sim/router"
)

// ErrInvalidScenario is wrapped by every scenario error.
var ErrInvalidScenario = errors.New("invalid scenario")

// Scenario is one evaluation: a trace, the SLAs it is scored against, and the policies.
type Scenario struct {
	// Name identifies the scenario in tables; Description says what it is.
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Trace is the requests replayed.
	Trace TraceSpec `yaml:"trace"`
	// SLA is what a request must meet to be good.
	SLA SLA `yaml:"sla"`
	// GoodputTarget is the share of good requests the oracle (per interval) and the static
	// search (over the trace) must reach, in (0, 1].
	GoodputTarget float64 `yaml:"goodput_target"`
	// StartupSeconds is how long a new engine takes to become ready.
	StartupSeconds float64 `yaml:"startup_s"`
	// MaxGPUBudget caps every policy's GPUs (and bounds the oracle's search).
	MaxGPUBudget int `yaml:"max_gpu_budget"`
	// OracleIntervalSeconds is the oracle's decision interval (default 60).
	OracleIntervalSeconds float64 `yaml:"oracle_interval_s"`
	// Policies are the planner configurations compared (default: the built-in ones).
	Policies []PolicySpec `yaml:"policies"`
	// Static are fixed deployments scored beside the best one the search finds, each
	// [prefill, decode] engines.
	Static [][2]int `yaml:"static"`
	// Router is how the frontend routes requests in every replay of the scenario:
	// least_loaded (the default), round_robin or kv (the engine holding the most of the
	// request's prompt blocks, ties by load), as Dynamo's router modes.
	Router router.Mode `yaml:"router"`
	// PrefixCache turns on the prefill engines' prefix cache of the trace's hash ids
	// (Mooncake traces; other traces have none, so it changes nothing there).
	PrefixCache bool `yaml:"prefix_cache"`

	dir       string // the scenario file's folder: relative trace paths start there
	generated bool   // the requests come from the caller (robustness cases), not Trace
}

// SLA is the latency objective of a request.
type SLA struct {
	TTFTMs float64 `yaml:"ttft_ms"`
	ITLMs  float64 `yaml:"itl_ms"`
}

// TraceSpec is a trace file or Dynamo's sinusoidal load.
type TraceSpec struct {
	// File is a Mooncake JSONL or Azure CSV trace; a relative path is looked up in the data
	// folder given to Requests, then next to the scenario file.
	File string `yaml:"file"`
	// FromSeconds and LengthSeconds cut a window of the file (0 length: to the end).
	FromSeconds   float64 `yaml:"from_s"`
	LengthSeconds float64 `yaml:"length_s"`
	// Speedup divides the arrival times (default 1).
	Speedup float64 `yaml:"speedup"`
	// MaxContext drops the requests whose ISL + OSL exceed it (0: keep all), as an engine
	// with that max model length would refuse them.
	MaxContext int `yaml:"max_context"`
	// Sinusoid generates Dynamo's sin_synth load instead of reading a file.
	Sinusoid *SinusoidSpec `yaml:"sinusoid"`
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
	Builtin string `yaml:"builtin"`
	Config  string `yaml:"config"`
	// File is a planner config file (relative to the scenario file), instead of Config.
	File string `yaml:"file"`
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
	return &sc, nil
}

// Validate checks the scenario and fills its defaults.
func (sc *Scenario) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidScenario, fmt.Sprintf(format, args...))
	}
	switch {
	case !sc.generated && (sc.Trace.File == "") == (sc.Trace.Sinusoid == nil):
		return bad("trace: give exactly one of file and sinusoid")
	case !(sc.SLA.TTFTMs > 0) || !(sc.SLA.ITLMs > 0):
		return bad("sla: ttft_ms and itl_ms must be > 0")
	case !(sc.GoodputTarget > 0 && sc.GoodputTarget <= 1):
		return bad("goodput_target %v not in (0, 1]", sc.GoodputTarget)
	case sc.StartupSeconds < 0:
		return bad("startup_s must be ≥ 0")
	case sc.MaxGPUBudget < 2:
		return bad("max_gpu_budget must be ≥ 2 (one engine of each role)")
	case sc.OracleIntervalSeconds < 0:
		return bad("oracle_interval_s must be ≥ 0")
	case sc.Trace.Speedup < 0 || sc.Trace.FromSeconds < 0 || sc.Trace.LengthSeconds < 0 || sc.Trace.MaxContext < 0:
		return bad("trace: from_s, length_s, speedup and max_context must be ≥ 0")
	}
	for i, d := range sc.Static {
		if d[0] < 1 || d[1] < 1 || d[0] > sc.MaxGPUBudget || d[1] > sc.MaxGPUBudget-d[0] {
			return bad("static[%d]: %dP %dD: each pool needs 1 to max_gpu_budget (%d) engines in all", i, d[0], d[1], sc.MaxGPUBudget)
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

func (s *SinusoidSpec) options() loadgen.SinusoidOptions {
	return loadgen.SinusoidOptions{DurationS: s.DurationSeconds, MinRPS: s.MinRPS, MaxRPS: s.MaxRPS,
		PeriodS: s.PeriodSeconds, ISL: s.ISL, OSL: s.OSL, Seed: s.Seed}
}

// ScoredFrom is when the scenario's runs start being scored (seconds): after the first
// startup window, since the policies start from one engine per pool, the static
// deployments from their own size and the oracle from what it ordered ahead.
func (sc *Scenario) ScoredFrom() float64 { return sc.StartupSeconds }

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
	path := t.File
	if !filepath.IsAbs(path) {
		path = filepath.Join(dataDir, t.File)
		if _, err := os.Stat(path); err != nil && sc.dir != "" {
			if alt := filepath.Join(sc.dir, t.File); fileExists(alt) {
				path = alt
			}
		}
	}
	reqs, err := predict.ReadTrace(path)
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
	desc := filepath.Base(path)
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

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// PolicyConfig builds a policy's planner configuration: Dynamo's defaults, the policy's
// settings, then the scenario's SLA and GPU budget, disaggregated on the virtual
// environment.
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
	cfg.Mode, cfg.Environment = config.ModeDisagg, config.EnvVirtual
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
