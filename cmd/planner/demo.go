package main

import (
	"compress/gzip"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/llmplanner/planner/activities"
	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/predict"
	"github.com/llmplanner/planner/sim/evaluate"
	"github.com/llmplanner/planner/sim/loadgen"
	"github.com/llmplanner/planner/sim/router"
	"github.com/llmplanner/planner/worker"
	"github.com/llmplanner/planner/workflows"
)

//go:embed demodata
var demoData embed.FS

func init() {
	register(command{
		name:    "demo",
		summary: "run the whole system on this machine: Temporal, a worker, simulated engines and frontend, a real trace",
		run:     runDemo,
	})
}

// demoConfig is the planner configuration of the demo deployment: this planner's own
// policy (scaling_policy ahead, docs/policy.md) every 5 s, expecting the demo engines'
// 10 s start-up until it has measured one.
const demoConfig = `
mode: disagg
environment: local
namespace: demo
backend: mocker
optimization_target: sla
scaling_policy: ahead
expected_startup_seconds: 10
ttft_ms: 300
itl_ms: 10
load_adjustment_interval: 5
max_gpu_budget: 16
min_endpoint: 1
model_name: nvidia/Llama-3.1-8B-Instruct-FP8
`

// demoAggConfig is the planner configuration of the demo's aggregated deployment (--mode
// agg): this planner's own policy sizing the one pool of aggregated engines with its
// aggregated capacity model (docs/policy.md, "Aggregated deployments"), every 5 s, at SLAs
// an aggregated engine with chunked prefill can meet.
const demoAggConfig = `
mode: agg
environment: local
namespace: demo
backend: mocker
optimization_target: sla
scaling_policy: ahead
expected_startup_seconds: 10
ttft_ms: 500
itl_ms: 50
load_adjustment_interval: 5
max_gpu_budget: 16
min_endpoint: 1
model_name: nvidia/Llama-3.1-8B-Instruct-FP8
`

type demoOptions struct {
	out          string
	temporalCLI  string
	duration     time.Duration
	startupDelay time.Duration
	trace        string
	traceModel   string
	traceFrom    time.Duration
	traceLength  time.Duration
	gpus         int
	configFile   string
	tail         time.Duration
	metricsAddr  string
	mode         string
	start        string
	router       string
	prefixCache  bool
}

// The demo's starting deployments (--start).
const (
	// demoStartSized starts at the smallest static deployment that serves the replay's first
	// minute in the simulator, where the simulated comparison's runs start.
	demoStartSized = "sized"
	// demoStartMinimum starts at the config's minimum endpoints (one engine per pool).
	demoStartMinimum = "minimum"
)

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("demo", flag.ContinueOnError)
	fset.SetOutput(stderr)
	var o demoOptions
	fset.StringVar(&o.out, "out", "demo-out", "folder for logs, the engines' state file and the report")
	fset.StringVar(&o.temporalCLI, "temporal", "", "temporal CLI for the dev server (default: .tools/bin/temporal, then PATH); unused when a server answers at TEMPORAL_ADDRESS or 127.0.0.1:7233")
	fset.DurationVar(&o.duration, "duration", 3*time.Minute, "wall time of the trace replay (the trace is compressed to fit: its rate rises accordingly)")
	fset.DurationVar(&o.startupDelay, "startup-delay", 10*time.Second, "simulated start-up time of a new engine (model load)")
	fset.DurationVar(&o.tail, "tail", 15*time.Second, "keep watching this long after the replay, to see the planner scale down")
	fset.StringVar(&o.trace, "trace", "", "trace to replay (Mooncake JSONL, Azure CSV or BurstGPT CSV); default: the bundled Azure LLM inference trace (code, 2023)")
	fset.StringVar(&o.traceModel, "trace-model", "", "replay one model's requests of a BurstGPT --trace (its Model column, e.g. GPT-4)")
	fset.DurationVar(&o.traceFrom, "trace-from", 0, "start this far into the trace")
	fset.DurationVar(&o.traceLength, "trace-length", 30*time.Minute, "replay this much of the trace (0: to its end)")
	fset.IntVar(&o.gpus, "gpus", 16, "simulated GPUs the local connector hands out")
	fset.StringVar(&o.mode, "mode", "", "deployment shape: disagg (prefill and decode engines) or agg (aggregated engines); default: --config's mode, else disagg")
	fset.StringVar(&o.start, "start", demoStartSized, "starting deployment: sized (the smallest static deployment serving the replay's first minute in the simulator) or minimum (the config's minimum endpoints); the simulated comparison starts there too")
	fset.StringVar(&o.router, "router", string(router.LeastLoaded), "how the frontend routes requests: least_loaded, round_robin or kv (Dynamo's KV router); the simulated comparison routes the same way")
	fset.BoolVar(&o.prefixCache, "prefix-caching", false, "engines keep a prefix cache of the trace's 512-token hash blocks (Mooncake traces carry them; the Azure trace has none); the simulated comparison caches the same way")
	fset.StringVar(&o.configFile, "config", "", "planner config (YAML/JSON) instead of the built-in one; environment must be local")
	fset.StringVar(&o.metricsAddr, "metrics-address", "127.0.0.1:9464", `serve the worker's /metrics here, for Prometheus and the Grafana dashboard (docs/observability.md; "" to disable)`)
	fset.Usage = func() {
		fmt.Fprintln(stderr, "usage: planner demo [flags]")
		fmt.Fprintln(stderr, "\nStarts (or reuses) a Temporal dev server, a planner worker, a simulated disaggregated deployment")
		fmt.Fprintln(stderr, "(frontend + prefill and decode engines supervised by the local connector; --mode agg: aggregated")
		fmt.Fprintln(stderr, "engines) and replays a real trace against it. Prints a line per planner tick; writes an HTML report at the end.")
		fset.PrintDefaults()
	}
	if err := fset.Parse(args); err != nil || fset.NArg() > 0 {
		if err == nil {
			fset.Usage()
		}
		return errUsage
	}
	switch config.Mode(o.mode) {
	case "", config.ModeDisagg, config.ModeAgg:
	default:
		return fmt.Errorf("--mode %q: want disagg or agg", o.mode)
	}
	if _, err := router.ParseMode(o.router); err != nil {
		return fmt.Errorf("--router: %w", err)
	}
	if o.start != demoStartSized && o.start != demoStartMinimum {
		return fmt.Errorf("--start %q: want %s or %s", o.start, demoStartSized, demoStartMinimum)
	}
	if o.duration < 20*time.Second {
		return fmt.Errorf("--duration %s is too short to see the planner work (at least 20s)", o.duration)
	}
	if o.traceModel != "" && o.trace == "" {
		return fmt.Errorf("--trace-model selects a --trace's requests; the bundled trace has no models")
	}
	d := &demo{o: o, stdout: stdout, started: time.Now()}
	defer d.cleanup()
	err := d.run(ctx)
	if errors.Is(err, context.Canceled) || (err == nil && ctx.Err() != nil) {
		d.say("interrupted: stopping everything")
		return nil
	}
	return err
}

// demo is one run of the demo: what it started, to stop it all at the end.
type demo struct {
	o        demoOptions
	stdout   io.Writer
	started  time.Time
	self     string
	logger   *slog.Logger
	logFile  *os.File
	cleanups []func()
}

func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.stdout, "[%5.1fs] %s\n", time.Since(d.started).Seconds(), fmt.Sprintf(format, args...))
}

func (d *demo) atExit(f func()) { d.cleanups = append(d.cleanups, f) }

func (d *demo) cleanup() {
	for i := len(d.cleanups) - 1; i >= 0; i-- {
		d.cleanups[i]()
	}
	if d.logFile != nil {
		_ = d.logFile.Close()
	}
}

func (d *demo) run(ctx context.Context) error {
	o := d.o
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("output folder: %w", err)
	}
	out, err := filepath.Abs(o.out)
	if err != nil {
		return err
	}
	d.o.out = out
	if d.self, err = os.Executable(); err != nil {
		return fmt.Errorf("locate the planner binary: %w", err)
	}
	d.logFile, err = os.Create(filepath.Join(out, "planner.log"))
	if err != nil {
		return err
	}
	d.logger = slog.New(slog.NewTextHandler(d.logFile, &slog.HandlerOptions{Level: slog.LevelInfo}))
	d.say("planner demo: output in %s (logs: planner.log, logs/*.log)", out)
	retired, err := retirePreviousReport(out)
	if err != nil {
		return err
	}
	if len(retired) > 0 {
		d.say("the previous run's report is kept as %s (this run writes a new one only if it finishes)", strings.Join(retired, ", "))
	}

	// Inputs: the profile the engines simulate and the planner bootstraps from, the trace,
	// and the planner config.
	profileDir := filepath.Join(out, "profile")
	if err := writeEmbedded("demodata/profile", profileDir); err != nil {
		return err
	}
	reqs, traceName, err := d.loadTrace()
	if err != nil {
		return err
	}
	cfg, err := d.plannerConfig(profileDir)
	if err != nil {
		return err
	}
	span := 0.0
	for _, r := range reqs {
		span = max(span, r.Arrival)
	}
	if span <= 0 {
		return fmt.Errorf("trace %s: every request arrives at the same time; nothing to replay over time", traceName)
	}
	speedup := span / o.duration.Seconds()
	d.say("trace: %s, %d requests over %.0f s, replayed at %.1fx (%.1f req/s on average)",
		traceName, len(reqs), span, speedup, float64(len(reqs))/o.duration.Seconds())

	// Temporal: the worker and the demo's own client use the same settings as the temporal
	// CLI (TEMPORAL_* environment and profile).
	topts, err := worker.ClientOptions(nil, nil)
	if err != nil {
		return err
	}
	topts.Logger = quietSDKLogger{}
	addr, err := d.temporal(ctx, topts)
	if err != nil {
		return err
	}

	// The simulated deployment: a frontend process, then the deployments file the worker hosts
	// (engines under the local connector, the frontend's metrics scraped, FPMs discovered from
	// the connector), exactly as `planner worker --deployments` would.
	frontendURL, err := d.startFrontend(ctx, *cfg.ModelName, cfg.Mode)
	if err != nil {
		return err
	}
	dep := workflows.Deployment{Namespace: "demo", Name: "llama"}
	if _, err := os.Stat(filepath.Join(out, localStateFile)); err == nil {
		d.say("stopping whatever engines a previous demo left in %s", out)
	}
	if err := stopPreviousDemo(ctx, out); err != nil {
		return err
	}
	cfgData, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "planner.json"), append(cfgData, '\n'), 0o644); err != nil {
		return err
	}
	// The live run and the simulated comparison start from the same deployment (--start): by
	// default the smallest static deployment serving the replay's first minute
	// (evaluate.StartWindowSeconds), where the simulator starts every policy.
	sim, err := d.simulationPlan(reqs, speedup, cfg, d.configSource())
	if err != nil {
		return err
	}
	startP, startD, why := cfg.PrefillMinEndpoints(), cfg.DecodeMinEndpoints(), "the config's minimum endpoints"
	if o.start == demoStartSized {
		p, dd, err := sim.InitialDeployment()
		if err != nil {
			return err
		}
		startP, startD = max(p, startP), max(dd, startD)
		why = fmt.Sprintf("the smallest static deployment serving the replay's first %d s in the simulator", evaluate.StartWindowSeconds)
	}
	if cfg.Mode == config.ModeAgg {
		startP = 0
	}
	if err := sim.Scenario.StartAt(startP, startD); err != nil {
		return err
	}
	d.say("starting at %s (%s); the simulated comparison starts there too", sim.Scenario.DeploymentName(startP, startD), why)
	depFile, err := writeDemoDeployments(demoDeploymentsOptions{out: out, self: d.self, frontendURL: frontendURL, profileDir: profileDir,
		plannerConfig: "planner.json", gpus: o.gpus, startupDelay: o.startupDelay, agg: cfg.Mode == config.ModeAgg,
		initialPrefill: startP, initialDecode: startD, prefixCaching: o.prefixCache})
	if err != nil {
		return err
	}
	df, err := worker.LoadDeployments(depFile, func(string) (string, bool) { return "", false })
	if err != nil {
		return err
	}
	hosts, err := worker.OpenHosts(ctx, df, worker.HostOptions{Logger: d.logger})
	if err != nil {
		return err
	}
	host := hosts[0]
	pools := demoPools{l: host.Local(), agg: cfg.Mode == config.ModeAgg}
	d.atExit(func() {
		d.say("stopping the engines (SIGTERM: they drain for at most 15 s)")
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := host.StopDeployment(sctx); err != nil {
			d.say("stopping the engines: %v", err)
		}
	})
	if cfg.Mode == config.ModeAgg {
		d.say("deployments file %s: %d aggregated engines starting under the local connector (start-up delay %s), GPU pool of %d",
			depFile, startD, o.startupDelay, o.gpus)
	} else {
		d.say("deployments file %s: %d prefill + %d decode engines starting under the local connector (start-up delay %s), GPU pool of %d",
			depFile, startP, startD, o.startupDelay, o.gpus)
	}
	if err := pools.WaitReady(ctx, o.startupDelay+time.Minute); err != nil {
		return err
	}
	d.say("engines ready and registered with the frontend")

	// A planner a previous demo left running would continue from its old state: end it.
	c, err := client.Dial(topts)
	if err != nil {
		return fmt.Errorf("temporal client: %w", err)
	}
	d.atExit(c.Close)
	if desc, err := c.DescribeWorkflowExecution(ctx, dep.WorkflowID(), ""); err == nil &&
		desc.WorkflowExecutionInfo.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		d.say("terminating the planner a previous demo left running")
		if err := c.TerminateWorkflow(ctx, dep.WorkflowID(), "", "a new demo starts"); err != nil {
			return fmt.Errorf("terminate the previous demo's planner: %w", err)
		}
	}

	// The planner worker, in this process, hosting the deployment and starting its planner
	// (as planner worker does for a deployment with a planner_config).
	acts := &activities.Activities{Logger: d.logger}
	wctx, stopWorker := context.WithCancel(context.Background())
	workerDone := make(chan struct{})
	var workerErr error
	workerUp := make(chan struct{})
	go func() {
		defer close(workerDone)
		workerErr = worker.Run(wctx, worker.Options{TaskQueue: workflows.TaskQueue, MetricsAddress: d.o.metricsAddr, Activities: acts, Logger: d.logger,
			Hosts: hosts, StartPlanners: true, Started: func() { close(workerUp) }})
	}()
	d.atExit(func() {
		stopWorker()
		<-workerDone
	})
	select {
	case <-workerUp:
	case <-workerDone:
		return fmt.Errorf("planner worker: %w", workerErr)
	case <-ctx.Done():
		return ctx.Err()
	}
	desc, err := c.DescribeWorkflowExecution(ctx, dep.WorkflowID(), "")
	if err != nil || desc.WorkflowExecutionInfo.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return fmt.Errorf("the worker did not start the planner %s (see planner.log): %v", dep.WorkflowID(), err)
	}
	d.atExit(func() {
		tctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.TerminateWorkflow(tctx, dep.WorkflowID(), "", "demo finished")
	})
	ui := "http://127.0.0.1:8233"
	if addr != defaultTemporalAddress {
		ui = "(the Web UI of " + addr + ")"
	}
	d.say("planner workflow %s started; Web UI: %s/namespaces/%s/workflows/%s",
		dep.WorkflowID(), ui, topts.Namespace, strings.ReplaceAll(dep.WorkflowID(), "/", "%2F"))

	// Replay the trace and watch the planner.
	rec := newDemoRecorder(cfg, speedup)
	mon := &demoMonitor{d: d, c: c, dep: dep, rec: rec, host: pools}
	mctx, stopMonitor := context.WithCancel(ctx)
	monDone := make(chan struct{})
	go func() { mon.run(mctx); close(monDone) }()
	d.say("replaying the trace for %s; one line per planner tick:", o.duration)
	if cfg.Mode == config.ModeAgg {
		fmt.Fprintln(d.stdout, strings.Replace(demoHeader, "   decode", "      agg", 1)) // the one pool is the decode component
	} else {
		fmt.Fprintln(d.stdout, demoHeader)
	}
	sum, err := loadgen.Run(ctx, reqs, loadgen.Options{URL: frontendURL, Speedup: speedup, OnSent: rec.addSent, OnResult: rec.add})
	// A short tail shows the planner scaling back down once the traffic is gone.
	if err == nil && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(o.tail):
		}
	}
	stopMonitor()
	<-monDone
	if err != nil {
		return err
	}
	rec.finish()
	d.say("replay done: %d requests sent, %d succeeded, %d failed, %d sent late, in %s",
		sum.Sent, sum.Succeeded, sum.Failed, sum.Late, sum.Wall.Round(time.Second))
	if errors.Is(ctx.Err(), context.Canceled) {
		return ctx.Err()
	}
	report := filepath.Join(out, "report.html")
	result := rec.machineSummary(mon.ticks, mon.decisions)
	d.say("simulating the same replay offline (virtual clock): this config, Dynamo's SLA planner, the best static deployment")
	if result.Simulated, err = d.simulateSame(ctx, sim); err != nil {
		if ctx.Err() != nil {
			return ctx.Err() // interrupted: no report that looks complete
		}
		d.say("offline comparison failed: %v", err)
	}
	lines := result.lines(rec.cfg)
	for _, line := range lines {
		fmt.Fprintln(d.stdout, "  "+line)
	}
	if err := rec.writeReport(report, traceName, mon, lines); err != nil {
		return err
	}
	data, err := json.MarshalIndent(result, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "summary.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	d.say("report: %s (open it in a browser; it needs no network)", report)
	return nil
}

// demoReportFiles are the files only a finished demo run writes in its output folder.
var demoReportFiles = []string{"report.html", "summary.json"}

// retirePreviousReport renames the report files a previous demo run left in out to
// "<name>.previous<ext>" (report.previous.html, replacing an older one), so that a run that
// is interrupted or fails leaves no report.html or summary.json that looks like its own. It
// returns the new names of the files it renamed.
func retirePreviousReport(out string) ([]string, error) {
	var retired []string
	for _, name := range demoReportFiles {
		ext := filepath.Ext(name)
		previous := strings.TrimSuffix(name, ext) + ".previous" + ext
		err := os.Rename(filepath.Join(out, name), filepath.Join(out, previous))
		switch {
		case err == nil:
			retired = append(retired, previous)
		case !errors.Is(err, fs.ErrNotExist):
			return retired, fmt.Errorf("set the previous run's %s aside: %w", name, err)
		}
	}
	return retired, nil
}

// loadTrace reads the trace to replay and cuts the requested window.
func (d *demo) loadTrace() ([]predict.Request, string, error) {
	path, name := d.o.trace, d.o.trace
	if path == "" {
		path, name = filepath.Join(d.o.out, "azure_code_2023.csv"), "Azure LLM inference trace, code, 2023 (bundled)"
		if err := gunzipEmbedded("demodata/azure_code_2023.csv.gz", path); err != nil {
			return nil, "", err
		}
	}
	filter := predict.TraceFilter{Model: d.o.traceModel}
	name = filter.Label(name)
	reqs, err := predict.ReadTraceOf(path, filter)
	if err != nil {
		return nil, "", err
	}
	reqs = loadgen.Window(reqs, d.o.traceFrom.Seconds(), d.o.traceLength.Seconds())
	if len(reqs) < 2 {
		return nil, "", fmt.Errorf("trace %s: fewer than 2 requests in the chosen window", name)
	}
	return reqs, name, nil
}

// configSource is the planner config file the demo runs.
func (d *demo) configSource() string {
	if d.o.configFile != "" {
		return d.o.configFile
	}
	return filepath.Join(d.o.out, "planner.yaml")
}

// simulationPlan is the simulator's replay of the demo's trace, compressed as the demo replays
// it, for the demo's config and Dynamo's SLA planner, with the same SLAs, GPU budget, engine
// start-up and mode.
func (d *demo) simulationPlan(reqs []predict.Request, speedup float64, cfg config.Config, src string) (evaluate.Plan, error) {
	compressed := make([]predict.Request, len(reqs))
	for i, r := range reqs {
		r.Arrival /= speedup
		compressed[i] = r
	}
	sc, err := evaluate.NewScenario("demo", evaluate.SLA{TTFTMs: cfg.TTFTMs, ITLMs: cfg.ITLMs}, 0.9, d.o.startupDelay.Seconds(),
		cfg.MaxGPUBudget, []evaluate.PolicySpec{{Name: "this config", File: src}, {Name: evaluate.PolicyDynamoSLA, Builtin: evaluate.PolicyDynamoSLA}})
	if err != nil {
		return evaluate.Plan{}, err
	}
	if cfg.Mode == config.ModeAgg { // the same policies, simulated on aggregated engines
		sc.Mode = config.ModeAgg
	}
	// The demo is held to its 90%: one static search, at that target.
	sc.SLOGoodput = sc.GoodputTarget
	// The same routing and prefix cache as the live frontend and engines.
	sc.Router, sc.PrefixCache = router.Mode(d.o.router), d.o.prefixCache
	if err := sc.Validate(); err != nil {
		return evaluate.Plan{}, err
	}
	prof, err := perf.LoadProfile(cfg.ProfileResultsDir)
	if err != nil {
		return evaluate.Plan{}, err
	}
	return evaluate.Plan{Scenario: sc, Requests: compressed, TraceDesc: "the demo's replay", Profile: prof, Static: true, Parallel: 2}, nil
}

// simulateSame runs the simulation plan (the demo's replay, from the deployment the live run
// started at) for the demo's config, Dynamo's SLA planner and the best static deployment.
func (d *demo) simulateSame(ctx context.Context, plan evaluate.Plan) ([]demoSimulated, error) {
	rep, err := evaluate.Run(ctx, plan)
	if err != nil {
		return nil, err
	}
	var out []demoSimulated
	for _, r := range rep.Rows {
		name, note := r.Name, ""
		if r.Kind == evaluate.KindStatic {
			name = "best static " + r.Deployment
			if r.OverBudget {
				note = "no deployment within the GPU budget meets the goodput target"
			}
		}
		out = append(out, demoSimulated{Name: name, GoodputPercent: 100 * r.Goodput, GPUMinutes: r.GPUHours * 60, Note: note})
	}
	return out, nil
}

// plannerConfig loads the planner configuration (built in, or --config).
func (d *demo) plannerConfig(profileDir string) (config.Config, error) {
	src := d.o.configFile
	if src == "" {
		src = filepath.Join(d.o.out, "planner.yaml")
		builtin := demoConfig
		if config.Mode(d.o.mode) == config.ModeAgg {
			builtin = demoAggConfig
		}
		if err := os.WriteFile(src, []byte(strings.TrimSpace(builtin)+"\n"), 0o644); err != nil {
			return config.Config{}, err
		}
	}
	cfg, _, err := config.Load(src, func(string) (string, bool) { return "", false })
	if err != nil {
		return config.Config{}, err
	}
	if cfg.Environment != config.EnvLocal {
		return config.Config{}, fmt.Errorf("%s: the demo runs environment local, not %q", src, cfg.Environment)
	}
	if cfg.Mode != config.ModeDisagg && cfg.Mode != config.ModeAgg {
		return config.Config{}, fmt.Errorf("%s: the demo runs a disaggregated (mode disagg) or aggregated (mode agg) deployment, not %q", src, cfg.Mode)
	}
	if d.o.mode != "" && config.Mode(d.o.mode) != cfg.Mode {
		return config.Config{}, fmt.Errorf("%s: mode %q, but --mode %s: give one", src, cfg.Mode, d.o.mode)
	}
	if d.o.configFile == "" || cfg.ProfileResultsDir == config.Default().ProfileResultsDir {
		cfg.ProfileResultsDir = profileDir
	}
	if cfg.MaxGPUBudget < 0 || cfg.MaxGPUBudget > d.o.gpus {
		return config.Config{}, fmt.Errorf("%s: max_gpu_budget %d does not fit the demo's pool of %d GPUs (--gpus)", src, cfg.MaxGPUBudget, d.o.gpus)
	}
	if cfg.ModelName == nil || *cfg.ModelName == "" {
		m := "nvidia/Llama-3.1-8B-Instruct-FP8"
		cfg.ModelName = &m
	}
	return cfg, nil
}

// defaultTemporalAddress is where the demo starts a dev server when none is configured.
const defaultTemporalAddress = "127.0.0.1:7233"

// temporal finds the configured Temporal server or, when none is configured and nothing
// answers on the default address, starts a dev server there; it returns the address.
func (d *demo) temporal(ctx context.Context, opts client.Options) (string, error) {
	addr := opts.HostPort
	if temporalAnswers(ctx, opts) {
		d.say("Temporal: using the server at %s (namespace %s)", addr, opts.Namespace)
		return addr, nil
	}
	if addr != defaultTemporalAddress && addr != "localhost:7233" {
		return "", fmt.Errorf("the configured Temporal server %s does not answer (TEMPORAL_ADDRESS or the profile's address)", addr)
	}
	if opts.Namespace != "default" {
		return "", fmt.Errorf("no Temporal server at %s, and a dev server would only have the namespace default, not %q", addr, opts.Namespace)
	}
	cli := d.o.temporalCLI
	if cli == "" {
		for _, c := range []string{filepath.Join(".tools", "bin", "temporal"), filepath.Join(filepath.Dir(d.self), "temporal")} {
			if _, err := os.Stat(c); err == nil {
				cli = c
				break
			}
		}
	}
	if cli == "" {
		p, err := exec.LookPath("temporal")
		if err != nil {
			return "", errors.New("no Temporal server at 127.0.0.1:7233 and no temporal CLI to start one: run 'make demo' (it builds the CLI) or 'make temporal-cli'")
		}
		cli = p
	}
	if portBusy("127.0.0.1:8233") {
		return "", errors.New("port 8233 (the Temporal Web UI) is taken by something that is not a Temporal server at 7233: free it or set TEMPORAL_ADDRESS")
	}
	d.say("Temporal: starting a dev server (%s) on 127.0.0.1:7233, Web UI on http://127.0.0.1:8233", cli)
	cmd := exec.Command(cli, "server", "start-dev", "--ip", "127.0.0.1", "--port", "7233", "--ui-ip", "127.0.0.1", "--ui-port", "8233",
		"--db-filename", filepath.Join(d.o.out, "temporal.db"), "--log-level", "error",
		"--search-attribute", workflows.SearchAttributeDeployment+"=Keyword", "--search-attribute", workflows.SearchAttributeMode+"=Keyword")
	exited, err := d.startChild("the Temporal dev server", cmd, filepath.Join(d.o.out, "temporal.log"), 10*time.Second)
	if err != nil {
		return "", err
	}
	deadline := time.Now().Add(60 * time.Second)
	opts.HostPort = defaultTemporalAddress
	for !temporalAnswers(ctx, opts) {
		select {
		case err := <-exited:
			return "", fmt.Errorf("the Temporal dev server exited (%v): see %s", err, filepath.Join(d.o.out, "temporal.log"))
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return "", errors.New("the Temporal dev server did not answer within 60 s")
		}
	}
	return defaultTemporalAddress, nil
}

// temporalAnswers reports whether the Temporal frontend of opts answers a health check.
func temporalAnswers(ctx context.Context, opts client.Options) bool {
	if !portBusy(opts.HostPort) {
		return false
	}
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	c, err := client.DialContext(cctx, opts)
	if err != nil {
		return false
	}
	defer c.Close()
	_, err = c.CheckHealth(cctx, &client.CheckHealthRequest{})
	return err == nil
}

func portBusy(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// startFrontend runs `planner frontend` as a child process on a free port, routing as the
// deployment's mode needs (disagg: prefill then decode engines; agg: aggregated engines).
func (d *demo) startFrontend(ctx context.Context, model string, mode config.Mode) (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	logDir := filepath.Join(d.o.out, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return "", err
	}
	cmd := exec.Command(d.self, "frontend", "--listen", addr, "--namespace", "demo", "--mode", string(mode), "--model", model, "--router", d.o.router)
	exited, err := d.startChild("the frontend", cmd, filepath.Join(logDir, "frontend.log"), 12*time.Second)
	if err != nil {
		return "", err
	}
	url := "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := healthClient.Get(url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-exited:
			return "", fmt.Errorf("the frontend exited (%v): see logs/frontend.log", err)
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return "", errors.New("the frontend did not answer within 20 s")
		}
	}
	d.say("frontend: %s (dynamo_frontend_* metrics on %s/metrics)", url, url)
	return url, nil
}

var healthClient = &http.Client{Timeout: 2 * time.Second}

// startChild starts cmd in its own process group with its output in logPath (and a parent-
// death signal, so it cannot outlive the demo), and registers its stop: SIGTERM to the group,
// SIGKILL after stopTimeout. The returned channel receives the child's exit.
func (d *demo) startChild(what string, cmd *exec.Cmd, logPath string, stopTimeout time.Duration) (<-chan error, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", what, err)
	}
	exited := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		err := cmd.Wait()
		logf.Close()
		exited <- err
		close(done)
	}()
	d.atExit(func() {
		d.say("stopping %s", what)
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(stopTimeout):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	return exited, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// writeEmbedded copies an embedded folder to dir.
func writeEmbedded(src, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	entries, err := fs.ReadDir(demoData, src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		data, err := demoData.ReadFile(src + "/" + e.Name())
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// gunzipEmbedded writes an embedded gzip file, decompressed, to path.
func gunzipEmbedded(src, path string) error {
	f, err := demoData.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, zr); err != nil {
		out.Close()
		return fmt.Errorf("%s: %w", src, err)
	}
	return out.Close()
}

// quietSDKLogger drops the Temporal SDK's client logs (the demo prints its own lines).
type quietSDKLogger struct{}

func (quietSDKLogger) Debug(string, ...any) {}
func (quietSDKLogger) Info(string, ...any)  {}
func (quietSDKLogger) Warn(string, ...any)  {}
func (quietSDKLogger) Error(string, ...any) {}
