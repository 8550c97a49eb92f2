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
	"slices"
	"strconv"
	"strings"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/predict"
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
		traces         []string
		model          string
		ttft, itl      float64
		scales         string
		budget         int
		mode           string
		scenarios      string
		ticks          string
		startup        string
		oracle, asJSON bool
		static         bool
		quiet          bool
		parallel       int
	)
	fs := flag.NewFlagSet("robustness", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cases, "cases", 20, "random cases (1..1000), cycling through the sources")
	fs.StringVar(&sources, "sources", strings.Join(evaluate.RobustSources, ","), "trace sources the cases cycle through, in order; one listed twice is drawn twice as often (also: "+evaluate.SourceShapes+", synthetic steps, ramps, flash crowds and on/off waves; "+evaluate.SourceServeGenClients+", ServeGen's clients with their measured burstiness; "+evaluate.SourceTrace+", the --trace files')")
	fs.Func("trace", fmt.Sprintf("a trace file of your own (Mooncake .jsonl[.gz], Azure or BurstGPT .csv[.gz]), or a folder of them (its %s files); repeat it for several (at most %d files): a folder's empty files and those of another format are left out and named; the cases are windows and rate scales of the files, drawn in turn (each at least once: no more files than the cases drawing them), scored at --ttft-ms and --itl-ms (source %s: the only one, unless --sources is given, which must then list it)", strings.Join(traceSuffixes, ", "), evaluate.MaxRobustTraces, evaluate.SourceTrace), func(v string) error {
		traces = append(traces, v)
		return nil
	})
	fs.StringVar(&model, "trace-model", "", "with --trace: one model's requests of every trace, each then a BurstGPT file (its Model column, e.g. GPT-4)")
	fs.Float64Var(&ttft, "ttft-ms", 0, "with --trace: the TTFT SLA every trace file's cases are scored at (ms)")
	fs.Float64Var(&itl, "itl-ms", 0, "with --trace: the ITL SLA every trace file's cases are scored at (ms)")
	fs.StringVar(&scales, "scales", fmt.Sprintf("%d-%d", evaluate.DefaultRobustScaleMin, evaluate.DefaultRobustScaleMax), "rate scales the traces' and ServeGen's cases draw from, MIN-MAX within 0.01-100 (the sinusoids and shapes draw their own rates; --budget does not grow with them)")
	fs.IntVar(&budget, "budget", evaluate.DefaultRobustBudget, fmt.Sprintf("every case's GPU budget (2..%d)", evaluate.MaxRobustBudget))
	fs.StringVar(&mode, "mode", string(config.ModeDisagg), fmt.Sprintf("every case's deployment shape: %s (a prefill and a decode pool) or %s (one pool of engines running chunked prefill and decode in the same passes)", config.ModeDisagg, config.ModeAgg))
	fs.StringVar(&startup, "startup", fmt.Sprintf("%ds", evaluate.DefaultRobustStartupS), fmt.Sprintf("every case's engine startup delay (e.g. 2m; bare numbers are seconds; 0..%d s); each case is scored from its end", evaluate.MaxRobustStartupS))
	fs.Uint64Var(&seed, "seed", 1, "seed of the cases: the same seed gives the same cases and scores")
	fs.StringVar(&data, "data", filepath.Join("..", "shared", "data", "traces"), "folder of the shared traces")
	fs.StringVar(&profile, "profile", "", "profile folder (default: the bundled H200 Llama-3.1-8B-FP8 TP1 profile)")
	fs.StringVar(&policies, "policies", "ahead,dynamo-sla", "built-in policies scored on every case")
	fs.BoolVar(&oracle, "oracle", false, "also run the hindsight oracle on every case (slow)")
	fs.BoolVar(&static, "static", true, "search the best static deployment of every case (--static=false: the policies only, faster)")
	fs.StringVar(&out, "out", "", "also write the JSON report to this file")
	fs.StringVar(&scenarios, "scenarios", "", "also write every case a scenario file can replay (the traces' and the sinusoids') to this folder, as <case>.yaml for planner simulate --scenario (timelines, HTML report)")
	fs.StringVar(&ticks, "ticks", "", "also write every case's planner runs' per-tick timelines — the pools each tick saw, its decision, the loops' reasons and the policy's notes — to this new (or empty) folder, as <case>-<policy>.ticks.jsonl (one tick a line)")
	fs.BoolVar(&asJSON, "json", false, "print the JSON report instead of Markdown")
	fs.BoolVar(&quiet, "quiet", false, "no progress on stderr")
	fs.IntVar(&parallel, "parallel", runtime.GOMAXPROCS(0), "replays run at once")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: planner robustness [flags]")
		fmt.Fprintln(stderr, "\nDraws seeded cases — a trace source, a 10–30 minute window (the whole trace, replayed in less, when the")
		fmt.Fprintln(stderr, "window at its scale is longer), a 1–8× rate scale (--scales; the sinusoids and shapes draw their own")
		fmt.Fprintln(stderr, "rates) — and scores each policy, the best static deployment and the")
		fmt.Fprintln(stderr, "closed-form lower bound on every one, with the same parameters everywhere; prints the")
		fmt.Fprintln(stderr, "distribution (min and median goodput, GPU-hours over the bound, the best static deployment and")
		fmt.Fprintln(stderr, "the oracle), the policies' distribution per source when there are several, and every case. With")
		fmt.Fprintln(stderr, "--trace, the cases are drawn from traces of your own; --scenarios writes them as scenario files;")
		fmt.Fprintln(stderr, "--ticks writes what each policy decided at every tick of every case, and why.")
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
	set := givenFlags(fs)
	if err := robustTrace(&rp, set, traces, model, ttft, itl, stderr); err != nil {
		return err
	}
	if rp.ScaleMin, rp.ScaleMax, err = parseScales(scales); err != nil {
		return err
	}
	if budget == 0 { // the plan's "unset"; the flag's range is 2..MaxRobustBudget
		return fmt.Errorf("robustness: --budget 0: want 2..%d", evaluate.MaxRobustBudget)
	}
	rp.Budget = budget
	if m := config.Mode(mode); m != config.ModeDisagg && m != config.ModeAgg {
		return fmt.Errorf("robustness: --mode %q: want %s or %s", mode, config.ModeDisagg, config.ModeAgg)
	}
	rp.Mode = config.Mode(mode)
	d, err := parseSeconds(startup)
	if err != nil {
		return fmt.Errorf("robustness: --startup: %w", err)
	}
	startS := d.Seconds()
	rp.StartupS = &startS
	if scenarios != "" {
		rp.ScenarioDir = scenarios
		if profile != "" {
			rp.ScenarioProfileArg = " --profile '" + strings.ReplaceAll(profile, "'", `'\''`) + "'"
		}
		rp.ScenariosWritten = func(files []string, leftOut string) {
			fmt.Fprintf(stderr, "robustness: wrote %d scenario files to %s", len(files), scenarios)
			if leftOut != "" {
				fmt.Fprintf(stderr, " (left out: %s cases, whose arrivals come from rate series a scenario file does not describe)", leftOut)
			}
			fmt.Fprintln(stderr)
		}
	}
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
	rp.TicksDir = ticks
	rep, err := evaluate.Robustness(ctx, rp)
	if err != nil {
		return err
	}
	if ticks != "" {
		fmt.Fprintf(stderr, "robustness: wrote %d per-tick timelines to %s\n", len(rep.TickFiles), ticks)
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

// robustTrace sets the plan's own traces from the --trace flags (set: the flags given; paths:
// the --trace values, files or folders, whose files of another format it reports to stderr
// as left out): the trace source alone unless --sources was given, and --trace-model,
// --ttft-ms and --itl-ms only with --trace, the SLA flags required with it.
func robustTrace(rp *evaluate.RobustPlan, set map[string]bool, paths []string, model string, ttft, itl float64, stderr io.Writer) error {
	if len(paths) == 0 {
		for _, f := range []string{"trace-model", "ttft-ms", "itl-ms"} {
			if set[f] {
				return fmt.Errorf("robustness: --%s applies to the cases of --trace, and no --trace is given", f)
			}
		}
		return nil
	}
	if !set["ttft-ms"] || !set["itl-ms"] {
		return errors.New("robustness: --trace needs --ttft-ms and --itl-ms: the SLA its cases are scored at")
	}
	if !set["sources"] {
		rp.Sources = []string{evaluate.SourceTrace}
	}
	for _, p := range paths {
		files, leftOut, err := traceFiles(p, evaluate.MaxRobustTraces-len(rp.Traces))
		if err != nil {
			return err
		}
		if len(leftOut) > 0 {
			fmt.Fprintf(stderr, "robustness: --trace %s: left out %s\n", p, strings.Join(leftOut, ", "))
		}
		for _, f := range files {
			if len(rp.Traces) == evaluate.MaxRobustTraces {
				return fmt.Errorf("robustness: --trace: more than %d trace files in all", evaluate.MaxRobustTraces)
			}
			rp.Traces = append(rp.Traces, evaluate.RobustTrace{Path: f, Model: model, SLA: evaluate.SLA{TTFTMs: ttft, ITLMs: itl}})
		}
	}
	return nil
}

// traceSuffixes are the file names a --trace folder's traces have.
var traceSuffixes = []string{".jsonl", ".jsonl.gz", ".csv", ".csv.gz"}

// traceFiles is a --trace value's files: the file itself, or a folder's request traces —
// its files (symbolic links followed) named with a traceSuffixes ending, sorted by name, not
// its subfolders' — with those of another format (predict.TraceFormat: a ServeGen rate file,
// say), empty ones, and a compressed X.gz beside the X drawn (the same trace twice, as a
// rule; given as files, both are drawn) left out, each named with the reason; a folder
// without a trace is an error, and so is one with more than room traces (the rest of
// MaxRobustTraces), found before its other files are read. A file given itself, or one
// that cannot be read, is left to the plan, which reads every trace and names the one that
// fails.
func traceFiles(path string, room int) (files, leftOut []string, err error) {
	if strings.TrimSpace(path) == "" {
		return nil, nil, errors.New("robustness: --trace: an empty path")
	}
	info, err := os.Stat(path)
	if err != nil || !info.IsDir() {
		return []string{path}, nil, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, nil, fmt.Errorf("robustness: --trace: %w", err)
	}
	drawn := map[string]bool{}
	for _, e := range entries { // os.ReadDir sorts by name: X before X.gz
		name := e.Name()
		if !slices.ContainsFunc(traceSuffixes, func(s string) bool { return strings.HasSuffix(name, s) }) {
			continue
		}
		file := filepath.Join(path, name)
		if info, err := os.Stat(file); err == nil && info.IsDir() {
			continue // a subfolder, or a link to one
		}
		if plain, ok := strings.CutSuffix(name, ".gz"); ok && drawn[plain] {
			leftOut = append(leftOut, fmt.Sprintf("%s (%s is drawn: the same trace compressed, as a rule; give both as files to draw both)", name, plain))
			continue
		}
		switch format, err := predict.TraceFormat(file); {
		case errors.Is(err, predict.ErrUnknownTraceFormat):
			leftOut = append(leftOut, name+" (not a request trace)")
			continue
		case err == nil && format == "", errors.Is(err, io.EOF): // an empty gzip file has no header
			leftOut = append(leftOut, name+" (empty)")
			continue
		}
		if len(files) == room {
			return nil, nil, fmt.Errorf("robustness: --trace %s: more than %d trace files in all", path, evaluate.MaxRobustTraces)
		}
		files = append(files, file)
		drawn[name] = true
	}
	if len(files) == 0 {
		why := ""
		if len(leftOut) > 0 {
			why = "; left out: " + strings.Join(leftOut, ", ")
		}
		return nil, nil, fmt.Errorf("robustness: --trace %s: a folder with no request trace (%s files of a trace format)%s", path, strings.Join(traceSuffixes, ", "), why)
	}
	return files, leftOut, nil
}

// parseScales reads --scales, MIN-MAX (the plan checks the range).
func parseScales(s string) (lo, hi float64, err error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), "-")
	if !ok {
		return 0, 0, fmt.Errorf("robustness: --scales %q: want MIN-MAX, two numbers (e.g. 1-8)", s)
	}
	if lo, err = strconv.ParseFloat(strings.TrimSpace(a), 64); err == nil {
		hi, err = strconv.ParseFloat(strings.TrimSpace(b), 64)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("robustness: --scales %q: want MIN-MAX, two numbers (e.g. 1-8): %w", s, err)
	}
	if lo <= 0 || hi <= 0 { // 0-0 would read as the plan's defaults
		return 0, 0, fmt.Errorf("robustness: --scales %q: want MIN-MAX within %v-%d", s, evaluate.MinRobustScale, evaluate.MaxRobustScale)
	}
	return lo, hi, nil
}

// givenFlags are the names of the flags given on the command line (set, not defaulted).
func givenFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}
