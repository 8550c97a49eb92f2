package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/worker"
	"github.com/llmplanner/planner/workflows"
)

func init() {
	register(command{
		name:    "start",
		summary: "start a deployment's planner workflow, or update the running one's configuration",
		run:     runStart,
	})
}

func runStart(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("start", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("f", "", "planner config: a .yaml, .yml or .json file, or an inline JSON object (required)")
	dep := fs.String("deployment", "", "the deployment, as <namespace>/<name> (required); the workflow id is planner/<namespace>/<name>")
	taskQueue := fs.String("task-queue", workflows.TaskQueue, "task queue of the planner workers")
	initialPrefill := fs.Int("initial-prefill", -1, "prefill replicas running now, for connectors that cannot tell (noop, virtual); -1: the minimum endpoints")
	initialDecode := fs.Int("initial-decode", -1, "decode (or aggregated) replicas running now; -1: the minimum endpoints")
	ackTimeout := fs.Duration("ack-timeout", 1800*time.Second, "virtual environment: publish a new decision anyway after waiting this long for an acknowledgement")
	maxTicks := fs.Int("max-ticks-per-run", 0, "continue as new after this many ticks (0: when the server suggests it); for tests")
	workerWait := fs.Duration("wait-for-worker", worker.DefaultWorkerWait, "give up when no worker polls --task-queue within this long (the configuration is applied by a worker)")
	hostQueue := fs.String("host-task-queue", "", "task queue of the worker hosting the deployment (default: planner-host/<namespace>/<name> when a worker hosts it, which local and kubernetes require; \""+worker.NoHost+"\": none)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: planner start -f config.yaml --deployment <namespace>/<name> [flags]")
		fmt.Fprintln(stderr, "\nStarts the planner workflow planner/<namespace>/<name>, or, when it runs already, replaces its")
		fmt.Fprintln(stderr, "configuration (settings that shape its state, such as mode or predictor, cannot change).")
		fmt.Fprintln(stderr, "A deployment listed in a worker's deployments file (planner worker --deployments FILE) is found")
		fmt.Fprintln(stderr, "on its host task queue without further flags.")
		fmt.Fprintln(stderr, "The Temporal connection comes from the TEMPORAL_* environment and profile, as for the temporal CLI.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || *file == "" || *dep == "" {
		if err == nil {
			fs.Usage()
		}
		return errUsage
	}
	d, err := parseDeployment(*dep)
	if err != nil {
		return err
	}
	cfg, warnings, err := config.Load(*file, os.LookupEnv)
	if err != nil {
		return err
	}
	if *ackTimeout <= 0 {
		return fmt.Errorf("--ack-timeout must be positive, got %s", *ackTimeout)
	}
	if *initialPrefill > maxInitialReplicas || *initialDecode > maxInitialReplicas {
		return fmt.Errorf("--initial-prefill and --initial-decode: at most %d replicas", maxInitialReplicas)
	}
	for _, w := range warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	c, namespace, err := dialTemporal(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := worker.StartPlanner(ctx, c, namespace, worker.StartOptions{Deployment: d, Config: cfg, TaskQueue: *taskQueue,
		HostTaskQueue: *hostQueue, InitialPrefill: *initialPrefill, InitialDecode: *initialDecode, AckTimeout: *ackTimeout, MaxTicksPerRun: *maxTicks, WorkerWait: *workerWait})
	for _, n := range res.Notes {
		fmt.Fprintf(stderr, "note: %s\n", n)
	}
	if err != nil {
		return err
	}
	if res.Started {
		fmt.Fprintf(stdout, "started %s (run %s) on task queue %s\n", res.WorkflowID, res.RunID, *taskQueue)
		fmt.Fprintf(stdout, "  mode %s, target %s, environment %s; initial prefill %d, decode %d\n", cfg.Mode, cfg.OptimizationTarget, cfg.Environment, res.InitialPrefill, res.InitialDecode)
	} else {
		fmt.Fprintf(stdout, "%s is running (run %s): %s\n", res.WorkflowID, res.RunID, res.Message)
		fmt.Fprintln(stdout, "  (initial replica counts and the acknowledgement timeout apply to new planners only)")
	}
	if res.HostTaskQueue != "" {
		fmt.Fprintf(stdout, "  hosted: observe and apply on task queue %s\n", res.HostTaskQueue)
	}
	fmt.Fprintf(stdout, "  state: temporal workflow query --workflow-id %s --name %s\n", res.WorkflowID, workflows.QueryState)
	return nil
}

// maxInitialReplicas bounds --initial-prefill and --initial-decode.
const maxInitialReplicas = config.MaxReplicas

// parseDeployment reads <namespace>/<name>.
func parseDeployment(s string) (workflows.Deployment, error) {
	ns, name, ok := strings.Cut(s, "/")
	d := workflows.Deployment{Namespace: ns, Name: name}
	if !ok {
		return d, fmt.Errorf("--deployment %q: want <namespace>/<name>", s)
	}
	if err := d.Validate(); err != nil {
		return d, fmt.Errorf("--deployment %q: %w", s, err)
	}
	return d, nil
}

// dialTemporal connects to Temporal from the same TEMPORAL_* environment and profile as the
// temporal CLI, as planner start and planner report do; it returns the client and its namespace.
func dialTemporal(ctx context.Context) (client.Client, string, error) {
	opts, err := worker.ClientOptions(nil, nil)
	if err != nil {
		return nil, "", err
	}
	c, err := worker.Dial(ctx, opts)
	if err != nil {
		return nil, "", err
	}
	return c, opts.Namespace, nil
}
