// Package plannerclient is the Go client of a running planner workflow: read its state,
// steer it (overrides, pause and resume, SLA and limits, configuration), and speak the
// virtual connector's protocol as an external orchestrator (Wait for a decision, Get the
// current one, Complete it once applied). It wraps a Temporal client; every call names the
// planner by its deployment, never by run id, so it follows the planner across
// Continue-As-New.
package plannerclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/connectors/virtual"
	"github.com/llmplanner/planner/workflows"
)

// Client talks to one deployment's planner.
type Client struct {
	c  client.Client
	id string
}

// New returns a client of the planner of d.
func New(c client.Client, d workflows.Deployment) *Client {
	return &Client{c: c, id: d.WorkflowID()}
}

// WorkflowID is the planner's workflow id.
func (p *Client) WorkflowID() string { return p.id }

func (p *Client) query(ctx context.Context, name string, out any) error {
	v, err := p.c.QueryWorkflow(ctx, p.id, "", name)
	if err != nil {
		return fmt.Errorf("query %s of %s: %w", name, p.id, err)
	}
	return v.Get(out)
}

// State returns the planner's state view.
func (p *Client) State(ctx context.Context) (workflows.StateView, error) {
	var s workflows.StateView
	return s, p.query(ctx, workflows.QueryState, &s)
}

// Diagnostics returns the recent ticks, oldest first.
func (p *Client) Diagnostics(ctx context.Context) ([]workflows.TickRecord, error) {
	var r []workflows.TickRecord
	return r, p.query(ctx, workflows.QueryDiagnostics, &r)
}

// Config returns the configuration in force.
func (p *Client) Config(ctx context.Context) (config.Config, error) {
	var c config.Config
	return c, p.query(ctx, workflows.QueryConfig, &c)
}

// Update sends one of the planner's updates and waits for its result. A request the
// planner's validator refuses returns its error and changes nothing.
func (p *Client) Update(ctx context.Context, name string, arg any) (workflows.Result, error) {
	var res workflows.Result
	err := p.update(ctx, name, arg, &res)
	return res, err
}

func (p *Client) update(ctx context.Context, name string, arg, out any) error {
	h, err := p.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: p.id, UpdateName: name, Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return fmt.Errorf("%s on %s: %w", name, p.id, err)
	}
	if err := h.Get(ctx, out); err != nil {
		return fmt.Errorf("%s on %s: %w", name, p.id, err)
	}
	return nil
}

// SetReplicas pins a component's replicas for a time.
func (p *Client) SetReplicas(ctx context.Context, r workflows.SetReplicasRequest) (workflows.Result, error) {
	return p.Update(ctx, workflows.UpdateSetReplicas, r)
}

// ClearOverride removes replica overrides.
func (p *Client) ClearOverride(ctx context.Context, r workflows.ClearOverrideRequest) (workflows.Result, error) {
	return p.Update(ctx, workflows.UpdateClearOverride, r)
}

// Pause stops the planner's own decisions in a direction.
func (p *Client) Pause(ctx context.Context, r workflows.DirectionRequest) (workflows.Result, error) {
	return p.Update(ctx, workflows.UpdatePause, r)
}

// Resume lets the planner decide again in a direction.
func (p *Client) Resume(ctx context.Context, r workflows.DirectionRequest) (workflows.Result, error) {
	return p.Update(ctx, workflows.UpdateResume, r)
}

// SetSLA changes the TTFT and ITL targets.
func (p *Client) SetSLA(ctx context.Context, r workflows.SetSLARequest) (workflows.Result, error) {
	return p.Update(ctx, workflows.UpdateSetSLA, r)
}

// SetLimits changes the minimum endpoints and the GPU budgets.
func (p *Client) SetLimits(ctx context.Context, r workflows.SetLimitsRequest) (workflows.Result, error) {
	return p.Update(ctx, workflows.UpdateSetLimits, r)
}

// SetConfig replaces the configuration of the running planner.
func (p *Client) SetConfig(ctx context.Context, c config.Config) (workflows.Result, error) {
	return p.Update(ctx, workflows.UpdateConfig, workflows.ConfigRequest{Config: c})
}

// Get returns the newest virtual decision (id -1 before the first).
func (p *Client) Get(ctx context.Context) (virtual.Decision, error) {
	var d virtual.Decision
	return d, p.query(ctx, workflows.QueryVirtualDecision, &d)
}

// Wait blocks until the planner's newest virtual decision is another than after, and
// returns it: normally a newer one; an older id means the planner was started again and its
// decision ids began anew (apply it all the same). It is built on the wait_decision update,
// which the planner answers within about a minute; Wait renews it until a decision arrives
// or ctx ends, rides over the planner's Continue-As-New and brief server outages, and fails
// when the planner is not running.
func (p *Client) Wait(ctx context.Context, after int64) (virtual.Decision, error) {
	for {
		var d virtual.Decision
		err := p.update(ctx, workflows.UpdateWaitDecision, workflows.WaitDecisionRequest{AfterDecisionID: after}, &d)
		switch {
		case err == nil && d.DecisionID != after:
			return d, nil
		case err == nil:
			// Answered without another decision (the wait span ended or the run continued
			// as new): ask again.
		case ctx.Err() != nil:
			return virtual.Decision{}, ctx.Err()
		case Transient(err):
			if running, derr := p.running(ctx); derr == nil && !running {
				return virtual.Decision{}, fmt.Errorf("%s is not running: %w", p.id, err)
			}
			select {
			case <-ctx.Done():
				return virtual.Decision{}, ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
		default:
			return virtual.Decision{}, err
		}
	}
}

// Transient reports errors worth retrying: the run closed under the request while
// continuing as new, or the server was briefly unavailable.
func Transient(err error) bool {
	var notFound *serviceerror.NotFound
	var unavailable *serviceerror.Unavailable
	var deadline *serviceerror.DeadlineExceeded
	return errors.As(err, &notFound) || errors.As(err, &unavailable) || errors.As(err, &deadline)
}

// running reports whether the planner's latest run is running.
func (p *Client) running(ctx context.Context) (bool, error) {
	desc, err := p.c.DescribeWorkflowExecution(ctx, p.id, "")
	if err != nil {
		var notFound *serviceerror.NotFound
		if errors.As(err, &notFound) {
			return false, nil
		}
		return false, err
	}
	return desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
}

// Complete acknowledges that the orchestrator applied a decision; readyPrefill and
// readyDecode, when given, are the ready counts it observes (else the decision's counts are
// taken as running).
func (p *Client) Complete(ctx context.Context, decisionID int64, readyPrefill, readyDecode *int) error {
	_, err := p.Update(ctx, workflows.UpdateAcknowledge, workflows.AcknowledgeRequest{DecisionID: decisionID, ReadyPrefill: readyPrefill, ReadyDecode: readyDecode})
	return err
}
