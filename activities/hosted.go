package activities

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/observe"
	"github.com/llmplanner/planner/scaling"
	"github.com/llmplanner/planner/workflows"
)

// FPMReader reads the latest Forward Pass Metrics of a deployment's engines (the worker's
// ZeroMQ subscriber): the latest message per (worker_id, dp_rank) of each pool, plus a bounded
// set of regression samples seen since the previous read.
type FPMReader interface {
	ReadFPM(now time.Time) (*scaling.FPMObservations, error)
}

// Hosted is what this worker process hosts for one deployment: the connector that moves its
// replicas (the local supervisor's processes live here) and its live observation sources. The
// workflow reaches them through its host task queue (workflows.Input.HostTaskQueue).
type Hosted struct {
	// Connector moves the replicas.
	Connector connectors.Connector
	// FPM reads the engines' Forward Pass Metrics (nil: not observed).
	FPM FPMReader
	// Traffic reads the frontend traffic (nil: not observed).
	Traffic observe.TrafficSource
}

// Host makes this worker serve a deployment's connector and observations. It must be called
// before the worker starts polling.
func (a *Activities) Host(d workflows.Deployment, h Hosted) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.hosted == nil {
		a.hosted = map[string]Hosted{}
	}
	a.hosted[d.WorkflowID()] = h
}

func (a *Activities) hostedFor(d workflows.Deployment) (Hosted, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	h, ok := a.hosted[d.WorkflowID()]
	return h, ok
}

// observeHostedTraffic reads a hosted deployment's traffic; an unreadable window is an error
// (the workflow notes it and holds), never zero demand.
func observeHostedTraffic(ctx context.Context, h Hosted, req workflows.ObserveRequest) (*scaling.TrafficObservation, error) {
	if h.Traffic == nil {
		return nil, nil
	}
	window := time.Duration(req.TrafficDurationS * float64(time.Second))
	obs, err := h.Traffic.Traffic(ctx, window)
	if err != nil {
		return nil, temporal.NewApplicationError(fmt.Sprintf("traffic over %s: %v", window, err), workflows.ErrTypeUnavailable)
	}
	return obs, nil
}

// observeHostedFPM reads a hosted deployment's FPMs.
func observeHostedFPM(h Hosted) (workflows.FPMResult, error) {
	if h.FPM == nil {
		return workflows.FPMResult{}, nil
	}
	obs, err := h.FPM.ReadFPM(time.Now())
	if err != nil {
		return workflows.FPMResult{}, temporal.NewApplicationError(err.Error(), workflows.ErrTypeUnavailable)
	}
	return workflows.FPMResult{FPM: obs}, nil
}
