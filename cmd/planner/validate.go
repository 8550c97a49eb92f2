package main

import (
	"context"
	"encoding/json"

	"flag"
	"fmt"
	"io"
	"os"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/scaling"
)

func init() {
	register(command{
		name:    "validate",
		summary: "check a planner config (and optionally its profile) without starting anything",
		run:     runValidate,
	})
}

func runValidate(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("f", "", "planner config: a .yaml, .yml or .json file, or an inline JSON object (required)")
	checkProfile := fs.Bool("check-profile", false, "also load profile_results_dir and build the perf models from it, and read load_predictor_warmup_trace, as the Init activity does")
	printJSON := fs.Bool("print", false, "print the resolved configuration as JSON")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: planner validate -f config.yaml [--check-profile] [--print]")
		fmt.Fprintln(stderr, "\nLoads the config as the planner would (Dynamo's keys and aliases, environment defaults),")
		fmt.Fprintln(stderr, "reports every problem with its field path and line, and the settings that are accepted but unused.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if *file == "" || fs.NArg() > 0 {
		fs.Usage()
		return errUsage
	}
	cfg, warnings, err := config.Load(*file, os.LookupEnv)
	if err != nil {
		return err
	}
	if err := cfg.CheckFootprint(); err != nil {
		return fmt.Errorf("planner config %s: %w", describeSource(*file), err)
	}
	for _, w := range warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	var profile *perf.Profile
	if *checkProfile {
		profile, err = perf.LoadProfile(cfg.ProfileResultsDir)
		if err != nil {
			return fmt.Errorf("profile_results_dir %q: %w", cfg.ProfileResultsDir, err)
		}
	}
	p, err := scaling.New(cfg, profile)
	if err != nil {
		return err
	}
	var warmupNote string
	if *checkProfile {
		boot := scaling.ProfileBootstrap(profile, cfg.Mode) // as the Init activity seeds the models
		if boot.Warmup, warmupNote, err = p.ReadWarmup(); err != nil {
			return err
		}
		if _, err := p.Init(0, boot); err != nil {
			return fmt.Errorf("bootstrapping the perf models from %s: %w", cfg.ProfileResultsDir, err)
		}
	}
	if *printJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(cfg)
	}
	fmt.Fprintf(stdout, "%s: valid\n", describeSource(*file))
	fmt.Fprintf(stdout, "  mode %s, target %s, environment %s, backend %s\n", cfg.Mode, cfg.OptimizationTarget, cfg.Environment, cfg.Backend)
	loops := "load loop every %ds"
	switch {
	case cfg.Ahead():
		fmt.Fprintf(stdout, "  scaling policy ahead every %ds (docs/policy.md), startup assumed %gs until measured; the throughput loop, predictor (but for its warm-up trace) and thresholds are not used\n",
			cfg.LoadAdjustmentIntervalSeconds, cfg.StartupPriorSeconds())
	case cfg.EnableThroughputScaling && cfg.EnableLoadScaling:
		fmt.Fprintf(stdout, "  throughput loop every %ds (floor), "+loops+"\n", cfg.ThroughputAdjustmentIntervalSeconds, cfg.LoadAdjustmentIntervalSeconds)
	case cfg.EnableThroughputScaling:
		fmt.Fprintf(stdout, "  throughput loop every %ds, predictor %s, sizing %s\n", cfg.ThroughputAdjustmentIntervalSeconds, cfg.LoadPredictor, cfg.ThroughputSizing)
	default:
		fmt.Fprintf(stdout, "  "+loops+"\n", cfg.LoadAdjustmentIntervalSeconds)
	}
	if cfg.OptimizationTarget == config.TargetSLA {
		fmt.Fprintf(stdout, "  SLA: TTFT %g ms, ITL %g ms\n", cfg.TTFTMs, cfg.ITLMs)
	}
	fmt.Fprintf(stdout, "  GPU budget %s, min endpoints prefill %d / decode %d\n", budget(cfg), cfg.PrefillMinEndpoints(), cfg.DecodeMinEndpoints())
	if profile != nil {
		fmt.Fprintf(stdout, "  profile: prefill %s, decode %s\n", orNone(profile.PrefillFile), orNone(profile.DecodeFile))
	}
	if warmupNote != "" {
		fmt.Fprintf(stdout, "  warm-up: %s\n", warmupNote)
	}
	if cfg.Advisory {
		fmt.Fprintln(stdout, "  advisory: decisions are recorded, never applied")
	}
	return nil
}

func describeSource(arg string) string {
	if len(arg) > 0 && arg[0] == '{' {
		return "inline JSON"
	}
	return arg
}

func budget(c config.Config) string {
	lo, hi := "none", "none"
	if c.MinGPUBudget >= 0 {
		lo = fmt.Sprint(c.MinGPUBudget)
	}
	if c.MaxGPUBudget >= 0 {
		hi = fmt.Sprint(c.MaxGPUBudget)
	}
	return fmt.Sprintf("[%s, %s]", lo, hi)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
