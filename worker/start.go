package worker

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/workflows"
)

// NoHost, given as StartOptions.HostTaskQueue, starts a planner that no worker hosts: its
// observations come from nowhere (it holds) and its connector is the advisory one.
const NoHost = "none"

// StartOptions describe a planner to start, or the running one to update.
type StartOptions struct {
	// Deployment is the managed deployment.
	Deployment workflows.Deployment
	// Config is the planner configuration (validated).
	Config config.Config
	// TaskQueue is the planner workers' task queue (default workflows.TaskQueue).
	TaskQueue string
	// HostTaskQueue is the task queue of the worker hosting the deployment. Empty picks it:
	// the deployment's own host queue (workflows.HostTaskQueue) for the local and kubernetes
	// environments, which need a host, and for noop and virtual when a worker polls that queue
	// now; NoHost for none.
	HostTaskQueue string
	// InitialPrefill and InitialDecode are the replicas running now, for connectors that
	// cannot tell (noop, virtual); negative: the configured minimum endpoints.
	InitialPrefill, InitialDecode int
	// AckTimeout is the virtual environment's acknowledgement timeout (0: 1800 s).
	AckTimeout time.Duration
	// MaxTicksPerRun continues as new after this many ticks (0: when the server suggests).
	MaxTicksPerRun int
	// WorkerWait is how long to wait for a worker polling TaskQueue before giving up (0:
	// DefaultWorkerWait): the configuration update that starts or updates the planner is run
	// by a worker, and without one it would wait forever.
	WorkerWait time.Duration
}

// DefaultWorkerWait is StartOptions.WorkerWait's default.
const DefaultWorkerWait = 15 * time.Second

// StartResult says what StartPlanner did.
type StartResult struct {
	// WorkflowID and RunID identify the planner.
	WorkflowID, RunID string
	// Started is true for a new planner, false when a running one was updated.
	Started bool
	// Message is the configuration update's answer.
	Message string
	// HostTaskQueue is the host task queue the planner uses ("" when none).
	HostTaskQueue string
	// InitialPrefill and InitialDecode are the counts a new planner started with.
	InitialPrefill, InitialDecode int
	// Notes are things the operator should know (missing search attributes, a secret left
	// out of the workflow input, no worker hosting the deployment).
	Notes []string
}

// StartPlanner starts the planner workflow of a deployment, or, when it runs already,
// replaces its configuration (and host task queue) in one update-with-start call: the same
// path for `planner start`, the demo and a worker starting the planners it hosts.
func StartPlanner(ctx context.Context, c client.Client, namespace string, o StartOptions) (StartResult, error) {
	d := o.Deployment
	if err := d.Validate(); err != nil {
		return StartResult{}, fmt.Errorf("deployment: %w", err)
	}
	if !workflows.SupportedEnvironment(o.Config.Environment) {
		return StartResult{}, fmt.Errorf("environment %q has no connector in this build (supported: %s)",
			o.Config.Environment, strings.Join(workflows.SupportedEnvironments, ", "))
	}
	if o.TaskQueue == "" {
		o.TaskQueue = workflows.TaskQueue
	}
	if o.AckTimeout < 0 {
		return StartResult{}, fmt.Errorf("ack timeout must not be negative, got %s", o.AckTimeout)
	}
	if err := o.Config.CheckFootprint(); err != nil {
		return StartResult{}, fmt.Errorf("planner config: %w", err)
	}
	cfg := o.Config
	res := StartResult{WorkflowID: d.WorkflowID()}
	// Secrets stay on the worker: the workflow's input, history and config query are
	// readable by anyone who can read the namespace.
	res.Notes = append(res.Notes, withoutSecrets(&cfg)...)
	host, polled, note, err := pickHostQueue(ctx, c, d, cfg.Environment, o.HostTaskQueue)
	if err != nil {
		return StartResult{}, err
	}
	res.HostTaskQueue = host
	res.InitialPrefill, res.InitialDecode = o.InitialPrefill, o.InitialDecode
	if res.InitialPrefill > config.MaxReplicas || res.InitialDecode > config.MaxReplicas {
		return StartResult{}, fmt.Errorf("initial replica counts must be at most %d (got prefill %d, decode %d)", config.MaxReplicas, res.InitialPrefill, res.InitialDecode)
	}
	if res.InitialPrefill < 0 {
		res.InitialPrefill = 0
		if cfg.HasPrefill() {
			res.InitialPrefill = cfg.PrefillMinEndpoints()
		}
	}
	if res.InitialDecode < 0 {
		res.InitialDecode = 0
		if cfg.HasDecode() {
			res.InitialDecode = cfg.DecodeMinEndpoints()
		}
	}
	running := false
	if desc, err := c.DescribeWorkflowExecution(ctx, d.WorkflowID(), ""); err == nil &&
		desc.WorkflowExecutionInfo.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		running = true
	}
	// A running planner moves to another host task queue only when asked, or to its own
	// deployment's queue when a worker polls it: a worker that is restarting right now must not
	// cost the planner its host.
	hostUpdate := &host
	if running && o.HostTaskQueue == "" && !polled {
		hostUpdate = nil
		res.HostTaskQueue = ""
		note = fmt.Sprintf("no worker polls %s now: the running planner keeps its host task queue", workflows.HostTaskQueue(d))
	}
	if note != "" {
		res.Notes = append(res.Notes, note)
	}
	summary := fmt.Sprintf("planner of %s/%s: %s, %s, %s", d.Namespace, d.Name, cfg.Mode, cfg.OptimizationTarget, cfg.Environment)
	sw := client.StartWorkflowOptions{
		ID: d.WorkflowID(), TaskQueue: o.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		StaticSummary:            summary,
	}
	missing, err := missingSearchAttributes(ctx, c, namespace)
	switch {
	case err != nil:
		res.Notes = append(res.Notes, fmt.Sprintf("cannot list search attributes (%v); starting without them", err))
	case len(missing) > 0:
		var b strings.Builder
		fmt.Fprintf(&b, "namespace %q lacks the search attributes %s; to filter planners by them, run:", namespace, strings.Join(missing, ", "))
		for _, m := range missing {
			fmt.Fprintf(&b, "\n  temporal operator search-attribute create --namespace %s --name %s --type Keyword", namespace, m)
		}
		res.Notes = append(res.Notes, b.String())
	default:
		sw.TypedSearchAttributes = temporal.NewSearchAttributes(
			temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttributeDeployment).ValueSet(d.Namespace+"/"+d.Name),
			temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttributeMode).ValueSet(string(cfg.Mode)),
		)
	}
	if err := waitForWorker(ctx, c, o.TaskQueue, o.WorkerWait); err != nil {
		return res, err
	}
	in := workflows.Input{Deployment: d, Config: cfg, InitialPrefill: res.InitialPrefill, InitialDecode: res.InitialDecode,
		AckTimeoutSeconds: o.AckTimeout.Seconds(), MaxTicksPerRun: o.MaxTicksPerRun, HostTaskQueue: host}
	startOp := c.NewWithStartWorkflowOperation(sw, workflows.WorkflowName, in)
	h, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: startOp,
		UpdateOptions: client.UpdateWorkflowOptions{UpdateName: workflows.UpdateConfig,
			Args:         []any{workflows.ConfigRequest{Config: cfg, HostTaskQueue: hostUpdate}},
			WaitForStage: client.WorkflowUpdateStageCompleted},
	})
	if err != nil {
		return res, fmt.Errorf("start or update %s: %w", d.WorkflowID(), err)
	}
	var upd workflows.Result
	if err := h.Get(ctx, &upd); err != nil {
		return res, fmt.Errorf("update the configuration of %s: %w", d.WorkflowID(), err)
	}
	run, err := startOp.Get(ctx)
	if err != nil {
		return res, fmt.Errorf("start %s: %w", d.WorkflowID(), err)
	}
	res.RunID, res.Started, res.Message = run.GetRunID(), !running, upd.Message
	return res, nil
}

// withoutSecrets removes from a planner config what may carry credentials and what the
// workflow never uses (the worker reads Prometheus with the deployments file's settings):
// the bearer token, extra query parameters (API keys travel there too) and a password in the
// endpoint URL. It returns a note for each removal.
func withoutSecrets(cfg *config.Config) []string {
	var notes []string
	const where = "secrets stay on the worker: give them in the deployments file (traffic.prometheus: token_file, token_env, extra_query_params)"
	if cfg.MetricPullingPrometheusToken != nil {
		cfg.MetricPullingPrometheusToken = nil
		notes = append(notes, "metric_pulling_prometheus_token (or PROMETHEUS_TOKEN) is not sent to the planner workflow; "+where)
	}
	if len(cfg.MetricPullingPrometheusExtraQueryParams) > 0 {
		cfg.MetricPullingPrometheusExtraQueryParams = nil
		notes = append(notes, "metric_pulling_prometheus_extra_query_params is not sent to the planner workflow; "+where)
	}
	if u, err := url.Parse(cfg.MetricPullingPrometheusEndpoint); err == nil && u.User != nil {
		u.User = nil
		cfg.MetricPullingPrometheusEndpoint = u.String()
		notes = append(notes, "the credentials in metric_pulling_prometheus_endpoint are not sent to the planner workflow; "+where)
	}
	return notes
}

// pickHostQueue resolves StartOptions.HostTaskQueue: the queue, whether a worker polls the
// deployment's own queue now, and a note saying what was picked and why when it was not asked
// for.
func pickHostQueue(ctx context.Context, c client.Client, d workflows.Deployment, env config.Environment, asked string) (string, bool, string, error) {
	own := workflows.HostTaskQueue(d)
	needsHost := env == config.EnvLocal || env == config.EnvKubernetes
	switch asked {
	case NoHost:
		if needsHost {
			return "", false, "", fmt.Errorf("environment %s needs a worker hosting the deployment: it cannot start without a host task queue", env)
		}
		return "", false, "", nil
	case "":
	default:
		return asked, true, "", nil
	}
	polled, err := hostPolled(ctx, c, own)
	if needsHost {
		if err == nil && !polled {
			return own, false, fmt.Sprintf("no worker polls %s yet: the planner holds until a worker hosting %s/%s (planner worker --deployments FILE) runs",
				own, d.Namespace, d.Name), nil
		}
		return own, polled, "", nil
	}
	if err != nil {
		return "", false, "", fmt.Errorf("cannot tell whether a worker hosts %s/%s (describe task queue %s: %w); pass --host-task-queue %s or %s",
			d.Namespace, d.Name, own, err, own, NoHost)
	}
	if !polled {
		return "", false, fmt.Sprintf("no worker hosts %s/%s (nobody polls %s): the planner gets no traffic or FPM observations and holds; "+
			"add the deployment to a worker's deployments file, then run planner start again", d.Namespace, d.Name, own), nil
	}
	return own, true, "", nil
}

// waitForWorker waits until a worker polls the planner workflows' task queue, for at most
// wait (0: DefaultWorkerWait). A server that cannot say (no permission to describe task
// queues) is not a reason to stop.
func waitForWorker(ctx context.Context, c client.Client, queue string, wait time.Duration) error {
	if wait <= 0 {
		wait = DefaultWorkerWait
	}
	deadline := time.Now().Add(wait)
	for {
		resp, err := c.DescribeTaskQueue(ctx, queue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
		if err != nil || len(resp.GetPollers()) > 0 {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("no worker polls task queue %q (waited %s): the planner's configuration is applied by a worker, "+
				"so start one first (planner worker, with the same TEMPORAL_* settings and --task-queue), then run this again", queue, wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// hostPolled reports whether a worker polls the host task queue for activities.
func hostPolled(ctx context.Context, c client.Client, queue string) (bool, error) {
	resp, err := c.DescribeTaskQueue(ctx, queue, enumspb.TASK_QUEUE_TYPE_ACTIVITY)
	if err != nil {
		return false, err
	}
	return len(resp.GetPollers()) > 0, nil
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
