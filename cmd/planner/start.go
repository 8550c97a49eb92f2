package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

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
	hostQueue := fs.String("host-task-queue", "", "task queue of the worker hosting the deployment's connector and metrics (required for environment local)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: planner start -f config.yaml --deployment <namespace>/<name> [flags]")
		fmt.Fprintln(stderr, "\nStarts the planner workflow planner/<namespace>/<name>, or, when it runs already, replaces its")
		fmt.Fprintln(stderr, "configuration (settings that shape its state, such as mode or predictor, cannot change).")
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
	cfg, err := config.Load(*file, os.LookupEnv)
	if err != nil {
		return err
	}
	if !workflows.SupportedEnvironment(cfg.Environment) {
		return fmt.Errorf("environment %q has no connector in this build yet (supported: %s); the planner would only log that it cannot read the deployment",
			cfg.Environment, strings.Join(workflows.SupportedEnvironments, ", "))
	}
	if cfg.Environment == config.EnvLocal && *hostQueue == "" {
		return fmt.Errorf("environment local needs --host-task-queue: the task queue of the worker (planner worker --host ...) that runs the deployment's processes")
	}
	if *ackTimeout <= 0 {
		return fmt.Errorf("--ack-timeout must be positive, got %s", *ackTimeout)
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	if *initialPrefill < 0 {
		*initialPrefill = cfg.PrefillMinEndpoints()
		if !cfg.HasPrefill() {
			*initialPrefill = 0
		}
	}
	if *initialDecode < 0 {
		*initialDecode = cfg.DecodeMinEndpoints()
		if !cfg.HasDecode() {
			*initialDecode = 0
		}
	}
	opts, err := worker.ClientOptions(nil, nil)
	if err != nil {
		return err
	}
	c, err := worker.Dial(ctx, opts)
	if err != nil {
		return err
	}
	defer c.Close()

	id := d.WorkflowID()
	running := false
	if desc, err := c.DescribeWorkflowExecution(ctx, id, ""); err == nil && desc.WorkflowExecutionInfo.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		running = true
	}
	sw := client.StartWorkflowOptions{
		ID: id, TaskQueue: *taskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		StaticSummary:            fmt.Sprintf("planner of %s/%s: %s, %s, %s", d.Namespace, d.Name, cfg.Mode, cfg.OptimizationTarget, cfg.Environment),
	}
	missing, err := missingSearchAttributes(ctx, c, opts.Namespace)
	if err != nil {
		fmt.Fprintf(stderr, "note: cannot list search attributes (%v); starting without them\n", err)
	} else if len(missing) > 0 {
		fmt.Fprintf(stderr, "note: namespace %q lacks the search attributes %s; to filter planners by them, run:\n", opts.Namespace, strings.Join(missing, ", "))
		for _, m := range missing {
			fmt.Fprintf(stderr, "  temporal operator search-attribute create --namespace %s --name %s --type Keyword\n", opts.Namespace, m)
		}
	} else {
		sw.TypedSearchAttributes = temporal.NewSearchAttributes(
			temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttributeDeployment).ValueSet(d.Namespace+"/"+d.Name),
			temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttributeMode).ValueSet(string(cfg.Mode)),
		)
	}
	in := workflows.Input{Deployment: d, Config: cfg, InitialPrefill: *initialPrefill, InitialDecode: *initialDecode,
		AckTimeoutSeconds: ackTimeout.Seconds(), MaxTicksPerRun: *maxTicks, HostTaskQueue: *hostQueue}
	startOp := c.NewWithStartWorkflowOperation(sw, workflows.WorkflowName, in)
	h, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: startOp,
		UpdateOptions: client.UpdateWorkflowOptions{UpdateName: workflows.UpdateConfig, Args: []any{workflows.ConfigRequest{Config: cfg}},
			WaitForStage: client.WorkflowUpdateStageCompleted},
	})
	if err != nil {
		return fmt.Errorf("start or update %s: %w", id, err)
	}
	var res workflows.Result
	if err := h.Get(ctx, &res); err != nil {
		return fmt.Errorf("update the configuration of %s: %w", id, err)
	}
	run, err := startOp.Get(ctx)
	if err != nil {
		return fmt.Errorf("start %s: %w", id, err)
	}
	if running {
		fmt.Fprintf(stdout, "%s is running (run %s): %s\n", id, run.GetRunID(), res.Message)
		fmt.Fprintln(stdout, "  (initial replica counts and the acknowledgement timeout apply to new planners only)")
	} else {
		fmt.Fprintf(stdout, "started %s (run %s) on task queue %s\n", id, run.GetRunID(), *taskQueue)
		fmt.Fprintf(stdout, "  mode %s, target %s, environment %s; initial prefill %d, decode %d\n", cfg.Mode, cfg.OptimizationTarget, cfg.Environment, *initialPrefill, *initialDecode)
	}
	fmt.Fprintf(stdout, "  state: temporal workflow query --workflow-id %s --name %s\n", id, workflows.QueryState)
	return nil
}

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

// missingSearchAttributes lists the planner's search attributes the namespace lacks.
func missingSearchAttributes(ctx context.Context, c client.Client, namespace string) ([]string, error) {
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, name := range []string{workflows.SearchAttributeDeployment, workflows.SearchAttributeMode} {
		if _, ok := resp.GetCustomAttributes()[name]; !ok {
			missing = append(missing, name)
		}
	}
	return missing, nil
}
