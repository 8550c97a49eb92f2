package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/llmplanner/planner/sim/evaluate"
)

func init() {
	register(command{
		name:    "robustness",
		summary: "score policies on seeded random windows and rate scales of the shared traces (virtual clock)",
		run:     runRobustness,
	})
}

func runRobustness(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		cases          int
		seed           uint64
		data, profile  string
		out, policies  string
		sources        string
		oracle, asJSON bool
		static         bool
		quiet          bool
		parallel       int
	)
	fs := flag.NewFlagSet("robustness", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cases, "cases", 20, "random cases (1..1000), cycling through the sources")
	fs.StringVar(&sources, "sources", strings.Join(evaluate.RobustSources, ","), "trace sources the cases cycle through, in order; one listed twice is drawn twice as often (also: "+evaluate.SourceShapes+", synthetic steps, ramps, flash crowds and on/off waves; "+evaluate.SourceServeGenClients+", ServeGen's clients with their measured burstiness)")
	fs.Uint64Var(&seed, "seed", 1, "seed of the cases: the same seed gives the same cases and scores")
	fs.StringVar(&data, "data", filepath.Join("..", "shared", "data", "traces"), "folder of the shared traces")
	fs.StringVar(&profile, "profile", "", "profile folder (default: the bundled H200 Llama-3.1-8B-FP8 TP1 profile)")
	fs.StringVar(&policies, "policies", "ahead,dynamo-sla", "built-in policies scored on every case")
	fs.BoolVar(&oracle, "oracle", false, "also run the hindsight oracle on every case (slow)")
	fs.BoolVar(&static, "static", true, "search the best static deployment of every case (--static=false: the policies only, faster)")
	fs.StringVar(&out, "out", "", "also write the JSON report to this file")
	fs.BoolVar(&asJSON, "json", false, "print the JSON report instead of Markdown")
	fs.BoolVar(&quiet, "quiet", false, "no progress on stderr")
	fs.IntVar(&parallel, "parallel", runtime.GOMAXPROCS(0), "replays run at once")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: planner robustness [flags]")
		fmt.Fprintln(stderr, "\nDraws seeded cases — a trace source, a 10–30 minute window, a 1–8× rate scale (the sinusoids")
		fmt.Fprintln(stderr, "and shapes draw their own rates) — and scores each policy, the best static deployment and the")
		fmt.Fprintln(stderr, "closed-form lower bound on every one, with the same parameters everywhere; prints the")
		fmt.Fprintln(stderr, "distribution (min and median goodput, GPU-hours over the bound, the best static deployment and")
		fmt.Fprintln(stderr, "the oracle) and every case.")
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
		return fmt.Errorf("robustness: unexpected arguments %q", fs.Args())
	}
	prof, err := simulateOptions{profile: profile}.loadProfile()
	if err != nil {
		return err
	}
	rp := evaluate.RobustPlan{Cases: cases, Seed: seed, DataDir: data, Profile: prof, Policies: splitList(policies), Sources: splitList(sources),
		Oracle: oracle, NoStatic: !static, Parallel: parallel}
	// An unknown source is refused by the plan before any case runs; an empty list would read
	// as the default one.
	if len(rp.Sources) == 0 {
		return fmt.Errorf("robustness: --sources: none given (have %s)", strings.Join(evaluate.AllRobustSources, ", "))
	}
	for _, p := range rp.Policies {
		if !evaluate.IsBuiltin(p) {
			return fmt.Errorf("robustness: --policies: %q is not a built-in policy (%v)", p, evaluate.BuiltinPolicies)
		}
	}
	if !quiet {
		rp.Progress = func(done, total int, c evaluate.RobustCase) {
			fmt.Fprintf(stderr, "case %d/%d %s: %d requests, %s\n", done, total, c.Name, c.Requests, c.Detail)
		}
	}
	rep, err := evaluate.Robustness(ctx, rp)
	if err != nil {
		return err
	}
	if out != "" {
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(out, data, 0o644); err != nil {
			return fmt.Errorf("robustness: %w", err)
		}
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return rep.WriteMarkdown(stdout)
}
