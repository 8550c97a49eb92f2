// Package worker wires the planner's Temporal worker: a client configured like the `temporal`
// CLI (TEMPORAL_* environment variables and the profile file, TLS and API key included), the
// planner workflow and its activities registered on a task queue, an HTTP server with
// /metrics (Temporal SDK metrics and dynamo_planner_* gauges) and /healthz, and, when the
// OTEL_* environment asks for it, OpenTelemetry traces of every tick (tracing.go).
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/llmplanner/planner/activities"
	"github.com/llmplanner/planner/workflows"
)

// ClientOptions loads the Temporal client options the way the `temporal` CLI does: the
// profile file (TEMPORAL_CONFIG_FILE, else the user config dir's temporalio/temporal.toml;
// profile TEMPORAL_PROFILE, else "default"), then TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
// TEMPORAL_API_KEY, TEMPORAL_TLS* and TEMPORAL_GRPC_META_* on top. Unset, it is the local dev
// server: 127.0.0.1:7233, namespace "default".
func ClientOptions(logger *slog.Logger, metrics client.MetricsHandler) (client.Options, error) {
	// The SDK ignores a TEMPORAL_TLS it cannot read (yes, on, enabled…) and connects in
	// plaintext: refuse it instead.
	if v, ok := os.LookupEnv("TEMPORAL_TLS"); ok {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "1", "0", "true", "false":
		default:
			return client.Options{}, fmt.Errorf("TEMPORAL_TLS=%q: want true, false, 1 or 0 (as the temporal CLI reads it); not guessing whether to encrypt", v)
		}
	}
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		return client.Options{}, fmt.Errorf("temporal client configuration (TEMPORAL_* environment, profile file): %w", err)
	}
	if opts.Credentials != nil && opts.ConnectionOptions.TLS == nil {
		return client.Options{}, errors.New("temporal client configuration: an API key with TLS disabled would travel in plaintext; enable TLS (TEMPORAL_TLS=true) or drop the key")
	}
	if opts.HostPort == "" {
		opts.HostPort = client.DefaultHostPort
	}
	if opts.Namespace == "" {
		opts.Namespace = client.DefaultNamespace
	}
	if logger != nil {
		opts.Logger = log.NewStructuredLogger(logger)
	}
	if metrics != nil {
		opts.MetricsHandler = metrics
	}
	return opts, nil
}

// Dial connects to the Temporal server and checks it answers.
func Dial(ctx context.Context, opts client.Options) (client.Client, error) {
	dialCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	c, err := client.DialContext(dialCtx, opts)
	if err != nil {
		return nil, fmt.Errorf("cannot reach Temporal at %s (namespace %q): %w; set TEMPORAL_ADDRESS or start a dev server with 'make temporal'", opts.HostPort, opts.Namespace, err)
	}
	return c, nil
}

// Options configure Run.
type Options struct {
	// TaskQueue is the queue the worker polls (default workflows.TaskQueue).
	TaskQueue string
	// MetricsAddress is where /metrics and /healthz are served ("" for no HTTP server).
	MetricsAddress string
	// Activities are the activity implementations (nil: the zero value, advisory only).
	Activities *activities.Activities
	// Logger receives the worker's and the SDK's logs (slog.Default when nil).
	Logger *slog.Logger
	// Hosts are the deployments this worker hosts (OpenHosts): each gets its connector and
	// observations served on its host task queue (workflows.HostTaskQueue). Run does not
	// close them.
	Hosts []*Host
	// StartPlanners starts, once the worker polls, the planner of every host whose spec names
	// a planner config (or replaces the running planner's configuration), as `planner start`
	// would.
	StartPlanners bool
	// Started, when set, is called once the worker polls (and the planners are started).
	Started func()
	// Interceptors are worker interceptors added after workflows.Interceptors() (tests
	// inject faults with them).
	Interceptors []interceptor.WorkerInterceptor
}

// Register puts the planner workflow and its activities on a worker.
func Register(r sdkworker.Registry, acts *activities.Activities) {
	RegisterWorkflow(r)
	acts.Register(r)
}

// RegisterWorkflow registers the planner workflow under its name (on a worker or a replayer).
func RegisterWorkflow(r sdkworker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(workflows.PlannerWorkflow, workflow.RegisterOptions{Name: workflows.WorkflowName})
}

// Run serves the task queue until ctx ends, then stops the worker gracefully.
func Run(ctx context.Context, o Options) error {
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if o.TaskQueue == "" {
		o.TaskQueue = workflows.TaskQueue
	}
	if o.Activities == nil {
		o.Activities = &activities.Activities{}
	}
	if o.Activities.Logger == nil {
		o.Activities.Logger = logger
	}
	metrics, err := NewMetrics()
	if err != nil {
		return err
	}
	// The planner series are only worth their state queries when /metrics is served.
	exportPlanners := o.MetricsAddress != "" && o.Activities.Sink == nil
	if exportPlanners {
		o.Activities.Sink = metrics.Sink()
	}
	opts, err := ClientOptions(logger, metrics.SDK)
	if err != nil {
		return err
	}
	workerInterceptors := append(workflows.Interceptors(), o.Interceptors...)
	tracing, err := TracingFromEnv(ctx, os.LookupEnv)
	if err != nil {
		return err
	}
	if tracing != nil {
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := tracing.Shutdown(sctx); err != nil {
				logger.Warn("flushing the last spans", "error", err)
			}
		}()
		opts.Interceptors = append(opts.Interceptors, tracing.ClientInterceptor())
		workerInterceptors = append(workerInterceptors, tracing.WorkerInterceptor())
		logger.Info("tracing ticks", "exporter", tracing.Exporter)
	}
	c, err := Dial(ctx, opts)
	if err != nil {
		return err
	}
	defer c.Close()
	logger.Info("connected to Temporal", "address", opts.HostPort, "namespace", opts.Namespace)
	if exportPlanners {
		watchCtx, stopWatch := context.WithCancel(ctx)
		watchDone := make(chan struct{})
		go func() { defer close(watchDone); metrics.WatchPlanners(watchCtx, c, logger) }()
		defer func() { stopWatch(); <-watchDone }()
	}

	w := sdkworker.New(c, o.TaskQueue, sdkworker.Options{Interceptors: workerInterceptors})
	Register(w, o.Activities)

	var srv *http.Server
	if o.MetricsAddress != "" {
		ln, err := net.Listen("tcp", o.MetricsAddress)
		if err != nil {
			return fmt.Errorf("metrics address %s: %w", o.MetricsAddress, err)
		}
		addr := ln.Addr().String()
		mux := http.NewServeMux()
		mux.Handle("/metrics", metrics.Handler())
		mux.HandleFunc("/healthz", health(c))
		srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error("metrics server stopped", "error", err)
			}
		}()
		logger.Info("serving /metrics and /healthz", "address", addr)
	}
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker on task queue %q: %w", o.TaskQueue, err)
	}
	defer w.Stop()
	logger.Info("planner worker polling", "task_queue", o.TaskQueue)
	for _, h := range o.Hosts {
		id := h.Spec().ID()
		o.Activities.Host(id, h.Hosted())
		queue := workflows.HostTaskQueue(id)
		hw := sdkworker.New(c, queue, sdkworker.Options{DisableWorkflowWorker: true})
		o.Activities.Register(hw)
		if err := hw.Start(); err != nil {
			return fmt.Errorf("start worker on host task queue %q: %w", queue, err)
		}
		defer hw.Stop()
	}
	if len(o.Hosts) > 0 {
		logger.Info("hosting deployments", "count", len(o.Hosts))
	}
	if o.StartPlanners {
		startHostedPlanners(ctx, c, opts.Namespace, o.TaskQueue, o.Hosts, logger)
	}
	if o.Started != nil {
		o.Started()
	}
	<-ctx.Done()
	logger.Info("stopping the worker")
	if srv != nil {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}
	_ = metrics.provider.Shutdown(context.Background())
	return nil
}

// startHostedPlanners starts (or updates) the planner of every host with a planner config. A
// failure is logged and the worker goes on: the other deployments are still served, and the
// operator can fix the config and run planner start.
func startHostedPlanners(ctx context.Context, c client.Client, namespace, taskQueue string, hosts []*Host, logger *slog.Logger) {
	for _, h := range hosts {
		spec := h.Spec()
		cfg := spec.Config()
		if cfg == nil {
			continue
		}
		res, err := StartPlanner(ctx, c, namespace, StartOptions{Deployment: spec.ID(), Config: *cfg, TaskQueue: taskQueue,
			HostTaskQueue: workflows.HostTaskQueue(spec.ID()), InitialPrefill: -1, InitialDecode: -1})
		if err != nil {
			logger.Error("cannot start the planner of a hosted deployment", "deployment", spec.Deployment, "error", err)
			continue
		}
		for _, n := range res.Notes {
			logger.Warn(n, "deployment", spec.Deployment)
		}
		if res.Started {
			logger.Info("planner started", "workflow_id", res.WorkflowID, "run_id", res.RunID)
		} else {
			logger.Info("planner running; configuration replaced", "workflow_id", res.WorkflowID, "result", res.Message)
		}
	}
}

// health answers 200 when the Temporal server answers a health check, 503 otherwise.
func health(c client.Client) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
			http.Error(w, "temporal unreachable: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	}
}
