// Command planner-scale measures how many planner workflows one worker keeps on schedule:
// it starts a Temporal dev server, planner workers as child processes and N advisory
// planners ticking every interval, and reports the tick lateness, the ticks run against those
// expected, the workers' and the server's CPU and memory, and the failures (docs/scale.md).
//
//	go run ./cmd/planner-scale --planners 1000 --duration 10m --interval 5s
//
// It is its own program, not a `planner` subcommand, because its workers answer the
// planners' observations from a script (internal/scripted), which stays out of the planner
// binary. `planner-scale worker` is the worker process it starts.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/llmplanner/planner/internal/repo"
	"github.com/llmplanner/planner/internal/scaletest"
	"github.com/llmplanner/planner/workflows"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	case err != nil:
		fmt.Fprintf(os.Stderr, "planner-scale: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "worker" {
		return runWorker(ctx, args[1:], stderr)
	}
	fs := flag.NewFlagSet("planner-scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	planners := fs.Int("planners", 1000, "planner workflows to start")
	duration := fs.Duration("duration", 10*time.Minute, "measured window, after every planner started and the warm-up")
	interval := fs.Duration("interval", 5*time.Second, "each planner's load_adjustment_interval_seconds (whole seconds; Dynamo's load loop default is 5 s)")
	workers := fs.Int("workers", 1, "worker processes polling the task queue "+workflows.TaskQueue)
	warmup := fs.Duration("warmup", 30*time.Second, "wait between the last planner's start and the window")
	sample := fs.Duration("sample", 5*time.Second, "period of the CPU and memory samples from /proc")
	stateQueries := fs.Int("state-queries", 100, "planners whose state is queried when the window ends, as an operator would (0: all)")
	readConc := fs.Int("read-concurrency", 16, "state queries and history reads in flight after the window")
	halfPeriod := fs.Int("half-period", 6, "ticks between the scripted observations' busy and quiet phases")
	startUpdate := fs.Bool("start-with-update", false, "start the planners as 'planner start' does (update-with-start, waits for the worker to run each one's first task) instead of with ExecuteWorkflow")
	startConc := fs.Int("start-concurrency", 16, "planner starts in flight")
	out := fs.String("out", "scale-out", "output directory: summary.json, samples.csv, observations.json, the worker and server logs")
	cli := fs.String("temporal-cli", "", "the temporal CLI (default: $PLANNER_TEMPORAL_CLI, .tools/bin/temporal at the module root, next to this program, or on PATH)")
	logLevel := fs.String("worker-log-level", "info", "the workers' log level")
	inMemory := fs.Bool("in-memory", false, "run the dev server on in-memory SQLite instead of a file (loses everything on exit; shows the file's cost)")
	var serverArgs stringList
	fs.Var(&serverArgs, "server-arg", "an argument for 'temporal server start-dev' (repeat: --server-arg=--sqlite-pragma --server-arg=synchronous=OFF)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: planner-scale [flags]")
		fmt.Fprintln(stderr, "\nStarts a Temporal dev server, planner worker processes and N noop planners, measures for --duration,")
		fmt.Fprintln(stderr, "prints the tick lateness, ticks run, CPU, memory and failures, and writes them to --out/summary.json.")
		fmt.Fprintln(stderr, "Nothing is downloaded: the dev server is the temporal CLI built by 'make temporal-cli'. See docs/scale.md.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flag.ErrHelp
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return flag.ErrHelp
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this program to run its workers: %w", err)
	}
	temporal, err := findCLI(*cli, self)
	if err != nil {
		return err
	}
	if err := setAside(*out); err != nil {
		return err
	}
	sum, err := scaletest.Run(ctx, scaletest.Options{Planners: *planners, Duration: *duration, Interval: *interval, Workers: *workers,
		Warmup: *warmup, Sample: *sample, StartConcurrency: *startConc, StartWithUpdate: *startUpdate, HalfPeriod: *halfPeriod, ReadConcurrency: *readConc, StateQueries: *stateQueries, OutDir: *out,
		TemporalCLI: temporal, InMemory: *inMemory, ServerArgs: serverArgs, Executable: self, WorkerLogLevel: *logLevel, Progress: stdout})
	if sum != nil {
		sum.Print(stdout)
		fmt.Fprintf(stdout, "\nsummary: %s\n", filepath.Join(*out, "summary.json"))
	}
	return err
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, " ") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// setAside renames a previous run's summary, so an interrupted run leaves none that looks
// current.
func setAside(dir string) error {
	prev := filepath.Join(dir, "summary.json")
	if _, err := os.Stat(prev); err != nil {
		return nil
	}
	if err := os.Rename(prev, filepath.Join(dir, "summary.previous.json")); err != nil {
		return fmt.Errorf("set the previous summary aside: %w", err)
	}
	return nil
}

// findCLI finds the temporal CLI: the flag, $PLANNER_TEMPORAL_CLI, .tools/bin/temporal at
// the module root, next to this program, then PATH.
func findCLI(flagValue, self string) (string, error) {
	candidates := []string{flagValue, os.Getenv("PLANNER_TEMPORAL_CLI")}
	if root, err := repo.Root(); err == nil {
		candidates = append(candidates, filepath.Join(root, ".tools", "bin", "temporal"))
	}
	candidates = append(candidates, filepath.Join(filepath.Dir(self), "temporal"))
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if _, err := os.Stat(c); err == nil {
			return c, nil
		}
	}
	if p, err := exec.LookPath("temporal"); err == nil {
		return p, nil
	}
	return "", errors.New("no temporal CLI: run 'make temporal-cli' (builds it into .tools/bin from the Go module proxy) or pass --temporal-cli")
}

// runWorker is the worker process the scale test starts (scaletest.RunWorker).
func runWorker(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("planner-scale worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	queue := fs.String("task-queue", workflows.TaskQueue, "task queue to poll")
	metrics := fs.String("metrics-address", "127.0.0.1:0", "serve /metrics and /healthz here")
	script := fs.String("script", "", "scripted observations (JSON, internal/scripted)")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return flag.ErrHelp
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToLower(*level))); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", *level)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: l}))
	return scaletest.RunWorker(ctx, scaletest.WorkerOptions{TaskQueue: *queue, MetricsAddress: *metrics, ScriptPath: *script, Logger: logger})
}
