package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/sim/evaluate"
	"github.com/llmplanner/planner/sim/router"
)

func init() {
	register(command{
		name:    "simulate",
		summary: "score planner policies on a trace against the hindsight oracle and baselines (virtual clock)",
		run:     runSimulate,
	})
}

// simulateOptions are the simulate command's flags.
type simulateOptions struct {
	scenario, trace, configFile  string
	traceModel                   string
	compare, policies            string
	baselines                    string
	startup, mode                string
	router, prefixCache          string
	seed                         string
	goodputTarget                float64
	sloGoodput                   float64
	sweep, predictors            string
	sweepPolicy, predictorPolicy string
	data, profile, out           string
	asJSON, markdown, quiet      bool
	ticks                        bool
	parallel                     int
}

func runSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o simulateOptions
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.scenario, "scenario", "", "scenario file (see scenarios/); or give --trace and --config")
	fs.StringVar(&o.trace, "trace", "", "trace file (Mooncake .jsonl[.gz], Azure .csv or BurstGPT .csv), with --config")
	fs.StringVar(&o.traceModel, "trace-model", "", "with --trace: replay one model's requests of a BurstGPT trace (its Model column, e.g. GPT-4)")
	fs.StringVar(&o.configFile, "config", "", "planner config file: the policy scored on --trace (its ttft, itl and max_gpu_budget are the scenario's)")
	fs.StringVar(&o.compare, "compare", "", "comma-separated planner config files to compare as extra policies (named after their files)")
	fs.StringVar(&o.policies, "policies", "", "comma-separated subset of the scenario's policies to run (default: all)")
	fs.StringVar(&o.baselines, "baselines", "oracle,static,ahead,dynamo-sla,dynamo-default", "baselines to run: oracle, static, ahead, dynamo-sla, dynamo-default, or none")
	fs.StringVar(&o.mode, "mode", "", "deployment shape simulated: disagg or agg (default: the scenario's mode, or the --config file's); another than the scenario's is reported as <scenario>-as-<mode>")
	fs.StringVar(&o.startup, "startup", "", "engine startup delay (e.g. 60s; default: the scenario's, 60s with --trace); another than the scenario's is reported as <scenario>-startup-<N>s")
	fs.StringVar(&o.router, "router", "", "frontend routing of every replay: least_loaded, round_robin or kv (default: the scenario's router, least_loaded); another than the scenario's is reported as <scenario>-router-<mode>")
	fs.StringVar(&o.seed, "seed", "", "arrival seed of a generated (sinusoid or phases) trace, in place of the scenario's: the same load drawn again; another than the scenario's is reported as <scenario>-seed<N> (default: the scenario's)")
	fs.StringVar(&o.prefixCache, "prefix-cache", "", "prefill engines' prefix cache of the trace's hash ids: on or off (default: the scenario's prefix_cache, off); another than the scenario's is reported as <scenario>-prefix-cache-<on|off>")
	fs.Float64Var(&o.goodputTarget, "goodput-target", 0, "goodput target of the oracle and the static search (default: the scenario's, 0.9 with --trace)")
	fs.Float64Var(&o.sloGoodput, "slo-goodput", 0, "goodput the policies are held to; above the goodput target, the oracle and the static search also run at it (the slo-oracle and slo-static rows; default: the scenario's, 0.95)")
	fs.StringVar(&o.sweep, "startup-sweep", "", "also run the sweep policy at these startup delays (comma-separated, e.g. 0,30s,60s,120s,300s; bare numbers are seconds)")
	fs.StringVar(&o.predictors, "predictors", "", "also run the sweep policy with each of these load predictors (e.g. constant,arima,kalman,prophet) and backtest them on the trace at 60 s and 180 s")
	fs.StringVar(&o.sweepPolicy, "sweep-policy", "", "the policy the startup sweep runs (default: the first)")
	fs.StringVar(&o.predictorPolicy, "predictor-policy", "", "the policy the predictor runs use (default: the sweep policy)")
	fs.StringVar(&o.data, "data", filepath.Join("..", "shared", "data", "traces"), "folder where a scenario's relative trace files are looked up first")
	fs.StringVar(&o.profile, "profile", "", "profile folder (default: the bundled H200 Llama-3.1-8B-FP8 TP1 profile); reported as <scenario>-profile-<folder name>")
	fs.StringVar(&o.out, "out", "simulate-out", "folder for <scenario>.json and <scenario>.html, named apart by what --mode, --router, --startup, --prefix-cache, --profile and --seed change (empty: write neither)")
	fs.BoolVar(&o.asJSON, "json", false, "print the JSON report on stdout instead of the table")
	fs.BoolVar(&o.markdown, "markdown", false, "print the comparison as a Markdown section (no wall times) instead of the table")
	fs.BoolVar(&o.ticks, "ticks", false, "keep every planner run's per-tick timeline — the pools each tick saw, its decision, the loops' reasons and the policy's notes — in the JSON report (rows[].ticks; with --json or --out)")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress on stderr")
	fs.IntVar(&o.parallel, "parallel", runtime.GOMAXPROCS(0), "replays run at once")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: planner simulate --scenario FILE [flags]")
		fmt.Fprintln(stderr, "       planner simulate --trace FILE --config planner.yaml [flags]")
		fmt.Fprintln(stderr, "\nReplays a trace on a virtual clock through simulated engines with the planner's decision core in")
		fmt.Fprintln(stderr, "the loop, for each policy, and scores goodput, latency percentiles, GPU-hours and scaling churn")
		fmt.Fprintln(stderr, "against the hindsight oracle, the best static deployment, this planner's ahead policy and Dynamo's SLA and default policies.")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("simulate: unexpected arguments %q", fs.Args())
	}
	if o.asJSON && o.markdown {
		return errors.New("simulate: --json and --markdown exclude each other")
	}
	if o.ticks && !o.asJSON && o.out == "" {
		return errors.New("simulate: --ticks keeps the ticks in the JSON report: give --json or --out")
	}
	plan, err := o.plan()
	if err != nil {
		return err
	}
	if !o.quiet {
		plan.Progress = progressPrinter(stderr)
	}
	fmt.Fprintf(stderr, "simulate %s: %d requests, %s\n", plan.Scenario.Name, len(plan.Requests), plan.TraceDesc)
	rep, err := evaluate.Run(ctx, plan)
	if err != nil {
		return err
	}
	if o.out != "" {
		if err := writeSimulateReport(o.out, rep); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "report: %s, %s\n", filepath.Join(o.out, rep.Scenario+".html"), filepath.Join(o.out, rep.Scenario+".json"))
	}
	if o.markdown {
		return rep.WriteMarkdown(stdout)
	}
	if o.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return rep.WriteTable(stdout)
}

// plan turns the flags into an evaluation plan.
func (o simulateOptions) plan() (evaluate.Plan, error) {
	var sc *evaluate.Scenario
	var err error
	switch {
	case o.scenario != "" && (o.trace != "" || o.configFile != ""):
		return evaluate.Plan{}, errors.New("simulate: give --scenario, or --trace with --config, not both")
	case o.traceModel != "" && o.trace == "":
		return evaluate.Plan{}, errors.New("simulate: --trace-model selects a --trace's requests (a scenario file says trace: {model: ...})")
	case o.scenario != "":
		if sc, err = evaluate.LoadScenario(o.scenario); err != nil {
			return evaluate.Plan{}, err
		}
	case o.trace != "" && o.configFile != "":
		if sc, err = adHocScenario(o.trace, o.traceModel, o.configFile); err != nil {
			return evaluate.Plan{}, err
		}
	default:
		return evaluate.Plan{}, errors.New("simulate: give --scenario FILE, or --trace FILE with --config FILE (see planner simulate -h)")
	}
	// A flag that simulates another deployment or load than the scenario's names the report
	// apart (<scenario>-as-agg-router-kv-seed2), so that it does not replace the scenario's
	// own report in --out, and planner targets tells the variants apart.
	var variant []string
	switch m := config.Mode(o.mode); m {
	case "":
	case config.ModeDisagg, config.ModeAgg:
		// "-as-": not the name of a scenario called <scenario>-agg, as the shared aggregated
		// ones are.
		if own := cmp.Or(sc.Mode, config.ModeDisagg); m != own {
			variant = append(variant, "as-"+string(m))
		}
		sc.Mode = m
	default:
		return evaluate.Plan{}, fmt.Errorf("simulate: --mode %q: want disagg or agg", o.mode)
	}
	baselines := map[string]bool{}
	for _, b := range splitList(o.baselines) {
		switch b {
		case "none":
		case evaluate.PolicyAhead, "oracle", "static", evaluate.PolicyDynamoSLA, evaluate.PolicyDynamoDefault:
			baselines[b] = true
		default:
			return evaluate.Plan{}, fmt.Errorf("simulate: --baselines: unknown %q (oracle, static, ahead, dynamo-sla, dynamo-default, none)", b)
		}
	}
	if err := o.selectPolicies(sc, baselines); err != nil {
		return evaluate.Plan{}, err
	}
	if o.router != "" {
		r, err := router.ParseMode(o.router)
		if err != nil {
			return evaluate.Plan{}, fmt.Errorf("simulate: --router: %w", err)
		}
		if own, _ := router.ParseMode(string(sc.Router)); r != own {
			variant = append(variant, "router-"+string(r))
		}
		sc.Router = r
	}
	if o.startup != "" {
		d, err := parseSeconds(o.startup)
		if err != nil {
			return evaluate.Plan{}, fmt.Errorf("simulate: --startup: %w", err)
		}
		if d != time.Duration(math.Round(sc.StartupSeconds*float64(time.Second))) {
			// float64(d)/1e9, not d.Seconds(), which adds the fraction to the whole seconds
			// and names 1.61 s 1.6099999999999999.
			variant = append(variant, "startup-"+strconv.FormatFloat(float64(d)/float64(time.Second), 'f', -1, 64)+"s")
		}
		sc.StartupSeconds = d.Seconds()
	}
	if o.prefixCache != "" {
		var on bool
		state := "off"
		switch o.prefixCache {
		case "on", "true":
			on, state = true, "on"
		case "off", "false":
		default:
			return evaluate.Plan{}, fmt.Errorf("simulate: --prefix-cache %q: want on or off", o.prefixCache)
		}
		if on != sc.PrefixCache {
			variant = append(variant, "prefix-cache-"+state)
		}
		sc.PrefixCache = on
	}
	if o.profile != "" {
		abs, err := filepath.Abs(o.profile)
		if err != nil {
			return evaluate.Plan{}, fmt.Errorf("simulate: --profile: %w", err)
		}
		base := filepath.Base(abs)
		if base == string(filepath.Separator) {
			return evaluate.Plan{}, fmt.Errorf("simulate: --profile %q: a profile folder, not the file system's root", o.profile)
		}
		variant = append(variant, "profile-"+base)
	}
	if o.goodputTarget != 0 {
		sc.GoodputTarget = o.goodputTarget
	}
	if o.sloGoodput != 0 {
		sc.SLOGoodput = o.sloGoodput
	}
	if o.seed != "" {
		seed, err := strconv.ParseUint(o.seed, 10, 64)
		if err != nil {
			return evaluate.Plan{}, fmt.Errorf("simulate: --seed %q: want a whole number from 0 to %d", o.seed, uint64(math.MaxUint64))
		}
		var own *uint64 // the generated load's seed
		switch {
		case sc.Trace.Sinusoid != nil:
			own = &sc.Trace.Sinusoid.Seed
		case sc.Trace.Phases != nil:
			own = &sc.Trace.Phases.Seed
		default:
			return evaluate.Plan{}, fmt.Errorf("simulate: --seed: scenario %s replays a trace file, whose arrivals have no seed (only a generated load, sinusoid or phases, has one)", sc.Name)
		}
		if seed != *own {
			variant = append(variant, fmt.Sprintf("seed%d", seed))
		}
		*own = seed
	}
	report := strings.Join(append([]string{sc.Name}, variant...), "-")
	if len(report) > evaluate.MaxScenarioNameBytes {
		return evaluate.Plan{}, fmt.Errorf("simulate: the report's name %q (the scenario's name and what --mode, --router, --startup, --prefix-cache, --profile and --seed add to it) is over %d bytes: shorten the scenario's name",
			report, evaluate.MaxScenarioNameBytes)
	}
	sc.Name = report
	if err := sc.Validate(); err != nil {
		return evaluate.Plan{}, err
	}
	plan := evaluate.Plan{Scenario: sc, Oracle: baselines["oracle"], Static: baselines["static"],
		SweepPolicy: o.sweepPolicy, PredictorPolicy: o.predictorPolicy, Predictors: splitList(o.predictors), Parallel: o.parallel, Ticks: o.ticks}
	for _, s := range splitList(o.sweep) {
		d, err := parseSeconds(s)
		if err != nil {
			return evaluate.Plan{}, fmt.Errorf("simulate: --startup-sweep: %w", err)
		}
		plan.StartupSweep = append(plan.StartupSweep, d)
	}
	if plan.Requests, plan.TraceDesc, err = sc.Requests(o.data); err != nil {
		return evaluate.Plan{}, err
	}
	if plan.Profile, err = o.loadProfile(); err != nil {
		return evaluate.Plan{}, err
	}
	return plan, nil
}

// selectPolicies applies --policies, --compare and the built-in baselines to the scenario.
func (o simulateOptions) selectPolicies(sc *evaluate.Scenario, baselines map[string]bool) error {
	explicit := map[string]bool{}
	if want := splitList(o.policies); len(want) > 0 {
		var kept []evaluate.PolicySpec
		for _, name := range want {
			found := false
			for _, p := range sc.Policies {
				if p.Name == name {
					kept, found = append(kept, p), true
					explicit[name] = true
				}
			}
			if !found {
				return fmt.Errorf("simulate: --policies: scenario %s has no policy %q", sc.Name, name)
			}
		}
		sc.Policies = kept
	}
	for _, f := range splitList(o.compare) {
		abs, err := filepath.Abs(f)
		if err != nil {
			return err
		}
		sc.Policies = append(sc.Policies, evaluate.PolicySpec{Name: strings.TrimSuffix(filepath.Base(f), filepath.Ext(f)), File: abs})
	}
	// Built-in baselines the flag asks for and the scenario lacks are added; those it does
	// not ask for are removed, unless --policies names them.
	var out []evaluate.PolicySpec
	have := map[string]bool{}
	for _, p := range sc.Policies {
		if p.Builtin != "" && p.Builtin == p.Name && !baselines[p.Builtin] && !explicit[p.Name] {
			continue
		}
		have[p.Builtin] = true
		out = append(out, p)
	}
	for _, b := range evaluate.BuiltinPolicies {
		if baselines[b] && !have[b] {
			out = append(out, evaluate.PolicySpec{Name: b, Builtin: b})
		}
	}
	if len(out) == 0 {
		return errors.New("simulate: no policy left to run")
	}
	sc.Policies = out
	return nil
}

// adHocScenario is the scenario of --trace and --config: the config's SLAs and budget, a
// 0.9 goodput target and a 60 s startup delay.
func adHocScenario(trace, model, cfgFile string) (*evaluate.Scenario, error) {
	cfg, _, err := config.LoadFile(cfgFile, func(string) (string, bool) { return "", false })
	if err != nil {
		return nil, err
	}
	tr, err := filepath.Abs(trace)
	if err != nil {
		return nil, err
	}
	cf, err := filepath.Abs(cfgFile)
	if err != nil {
		return nil, err
	}
	if cfg.Mode != config.ModeDisagg && cfg.Mode != config.ModeAgg {
		return nil, fmt.Errorf("simulate: %s: mode %q: only disagg and agg deployments are simulated", cfgFile, cfg.Mode)
	}
	budget := cfg.MaxGPUBudget
	if budget < 1 || (budget < 2 && cfg.Mode != config.ModeAgg) { // no budget (or too small to hold both pools)
		budget = 16
	}
	name := strings.TrimSuffix(filepath.Base(trace), filepath.Ext(trace))
	name = strings.TrimSuffix(name, ".jsonl")
	if name == "" || len(name) > evaluate.MaxScenarioNameBytes {
		return nil, fmt.Errorf("simulate: --trace %s: its file name names the report: want 1 to %d bytes before the extension", trace, evaluate.MaxScenarioNameBytes)
	}
	return &evaluate.Scenario{Name: name, Mode: cfg.Mode, Trace: evaluate.TraceSpec{File: tr, Model: model},
		SLA: evaluate.SLA{TTFTMs: cfg.TTFTMs, ITLMs: cfg.ITLMs}, GoodputTarget: 0.9, StartupSeconds: 60, MaxGPUBudget: budget,
		Policies: []evaluate.PolicySpec{{Name: strings.TrimSuffix(filepath.Base(cfgFile), filepath.Ext(cfgFile)), File: cf}}}, nil
}

// loadProfile reads --profile, or the bundled H200 profile.
func (o simulateOptions) loadProfile() (*perf.Profile, error) {
	dir := o.profile
	if dir == "" {
		tmp, err := os.MkdirTemp("", "planner-profile-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		if err := writeEmbedded("demodata/profile", tmp); err != nil {
			return nil, err
		}
		dir = tmp
	}
	p, err := perf.LoadProfile(dir)
	if err != nil {
		return nil, fmt.Errorf("simulate: profile: %w", err)
	}
	if p.Prefill == nil || p.Decode == nil {
		return nil, fmt.Errorf("simulate: profile %s: needs both prefill and decode data", dir)
	}
	return p, nil
}

// maxSeconds bounds a bare number of seconds parseSeconds reads (a year: far past any
// startup, well within a time.Duration).
const maxSeconds = 365 * 24 * 3600.0

// parseSeconds reads a duration ("90s", "2m") or a bare number of seconds.
func parseSeconds(s string) (time.Duration, error) {
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		if v < 0 {
			return 0, fmt.Errorf("%q is negative", s)
		}
		if !(v <= maxSeconds) { // NaN, ∞ or past what a Duration holds
			return 0, fmt.Errorf("%q is more than %d seconds", s, int64(maxSeconds))
		}
		return time.Duration(math.Round(v * float64(time.Second))), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is neither a duration nor a number of seconds", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	return d, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// progressPrinter reports an evaluation's progress: one rewritten line on a terminal, a
// line every 10 s otherwise.
func progressPrinter(w io.Writer) func(evaluate.Progress) {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	var last time.Time
	return func(p evaluate.Progress) {
		parts := make([]string, 0, len(p.Running))
		for _, r := range p.Running {
			parts = append(parts, fmt.Sprintf("%s %3.0f%%", r.Name, 100*r.Fraction))
		}
		line := fmt.Sprintf("[%d/%d replays done] %s", p.Done, p.Total, strings.Join(parts, ", "))
		switch {
		case tty:
			fmt.Fprintf(w, "\r\033[K%s", line)
			if p.Done == p.Total {
				fmt.Fprintln(w)
			}
		case p.Done == p.Total || time.Since(last) >= 10*time.Second:
			last = time.Now()
			fmt.Fprintln(w, line)
		}
	}
}

// writeSimulateReport writes <scenario>.json and <scenario>.html into dir.
func writeSimulateReport(dir string, rep *evaluate.Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, rep.Scenario+".json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, rep.Scenario+".html"))
	if err != nil {
		return err
	}
	if err := rep.WriteHTML(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
