package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/llmplanner/planner/activities"
	"github.com/llmplanner/planner/worker"
	"github.com/llmplanner/planner/workflows"
)

func init() {
	register(command{
		name:    "worker",
		summary: "run a Temporal worker for planner workflows, hosting the deployments of a deployments file",
		run:     runWorker,
	})
}

// workerTestHooks, set by the tests only, adds test-only flags to `planner worker` and wires
// them into the activities (scripted observations, fault injection). Nil in the binary.
var workerTestHooks func(fs *flag.FlagSet) func(*activities.Activities, *worker.Options, *slog.Logger) error

func runWorker(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	taskQueue := fs.String("task-queue", workflows.TaskQueue, "task queue to poll")
	deployments := fs.String("deployments", os.Getenv("PLANNER_DEPLOYMENTS"), "deployments file: the deployments this worker hosts (connector, traffic, FPM); default $PLANNER_DEPLOYMENTS")
	noStart := fs.Bool("no-start", false, "do not start the planners of the deployments that name a planner_config (start them with planner start)")
	stopOnExit := fs.Bool("stop-on-exit", false, "stop the local deployments' worker processes when the worker exits (default: they keep running and the next worker adopts them)")
	metricsAddr := fs.String("metrics-address", "127.0.0.1:9464", `serve /metrics and /healthz here ("" to disable)`)
	journal := fs.String("noop-journal-dir", "", "journal the noop connector's recorded decisions here, one file per deployment")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	format := fs.String("log-format", "text", "text or json")
	var wire func(*activities.Activities, *worker.Options, *slog.Logger) error
	if workerTestHooks != nil {
		wire = workerTestHooks(fs)
	}
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: planner worker [--deployments FILE] [flags]")
		fmt.Fprintln(stderr, "\nServes planner workflows, and hosts the deployments of the deployments file: their connectors")
		fmt.Fprintln(stderr, "(kubernetes, local, virtual, noop), traffic sources (Prometheus or the frontend's /metrics) and")
		fmt.Fprintln(stderr, "FPM subscribers, on each deployment's host task queue (planner-host/<namespace>/<name>); see")
		fmt.Fprintln(stderr, "docs/deployments.md. The Temporal connection comes from TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,")
		fmt.Fprintln(stderr, "TEMPORAL_API_KEY, TEMPORAL_TLS_*, TEMPORAL_PROFILE and TEMPORAL_CONFIG_FILE, as for the temporal CLI")
		fmt.Fprintln(stderr, "(default 127.0.0.1:7233, namespace default). Every tick is traced over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT")
		fmt.Fprintln(stderr, "or OTEL_TRACES_EXPORTER=otlp is set (off by default; docs/tracing.md).")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		if err == nil {
			fs.Usage()
		}
		return errUsage
	}
	logger, err := newLogger(stderr, *level, *format)
	if err != nil {
		return err
	}
	acts := &activities.Activities{NoopJournalDir: *journal, Logger: logger}
	opts := worker.Options{TaskQueue: *taskQueue, MetricsAddress: *metricsAddr, Activities: acts, Logger: logger, StartPlanners: !*noStart}
	if wire != nil {
		if err := wire(acts, &opts, logger); err != nil {
			return err
		}
	}
	if *journal != "" {
		if err := os.MkdirAll(*journal, 0o755); err != nil {
			return fmt.Errorf("noop journal dir: %w", err)
		}
	}
	var hosts []*worker.Host
	if *deployments != "" {
		df, err := worker.LoadDeployments(*deployments, os.LookupEnv)
		if err != nil {
			return err
		}
		df.LogWarnings(logger)
		if hosts, err = worker.OpenHosts(ctx, df, worker.HostOptions{Logger: logger}); err != nil {
			return err
		}
		defer func() {
			for _, h := range hosts {
				if !*stopOnExit {
					_ = h.Close()
					continue
				}
				sctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				if err := h.StopDeployment(sctx); err != nil {
					logger.Error("stopping a local deployment", "deployment", h.Spec().Deployment, "error", err)
				}
				cancel()
			}
		}()
	}
	opts.Hosts = hosts
	return worker.Run(ctx, opts)
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}
