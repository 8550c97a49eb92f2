package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/llmplanner/planner/activities"
	"github.com/llmplanner/planner/observe"
	"github.com/llmplanner/planner/worker"
	"github.com/llmplanner/planner/workflows"
)

func init() {
	register(command{
		name:    "worker",
		summary: "run a Temporal worker for planner workflows (TEMPORAL_* environment and profile, like the temporal CLI)",
		run:     runWorker,
	})
}

func runWorker(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	taskQueue := fs.String("task-queue", workflows.TaskQueue, "task queue to poll")
	metricsAddr := fs.String("metrics-address", "127.0.0.1:9464", `serve /metrics and /healthz here ("" to disable)`)
	script := fs.String("observations", "", "scripted observations (JSON, see observe.Script) instead of live metrics: for tests and examples")
	journal := fs.String("noop-journal-dir", "", "journal the noop connector's recorded decisions here, one file per deployment")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	format := fs.String("log-format", "text", "text or json")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: planner worker [flags]")
		fmt.Fprintln(stderr, "\nServes planner workflows. The Temporal connection comes from TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,")
		fmt.Fprintln(stderr, "TEMPORAL_API_KEY, TEMPORAL_TLS_*, TEMPORAL_PROFILE and TEMPORAL_CONFIG_FILE, as for the temporal CLI")
		fmt.Fprintln(stderr, "(default 127.0.0.1:7233, namespace default).")
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
	if *script != "" {
		if acts.Script, err = observe.LoadScript(*script); err != nil {
			return err
		}
		logger.Warn("observations come from a script, not from the deployment", "script", *script)
	}
	if acts.Faults, err = activities.FaultsFromEnv(); err != nil {
		return err
	}
	if *journal != "" {
		if err := os.MkdirAll(*journal, 0o755); err != nil {
			return fmt.Errorf("noop journal dir: %w", err)
		}
	}
	return worker.Run(ctx, worker.Options{TaskQueue: *taskQueue, MetricsAddress: *metricsAddr, Activities: acts, Logger: logger})
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
