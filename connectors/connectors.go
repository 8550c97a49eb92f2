// Package connectors moves replicas. A Connector reports the deployment's inventory and
// applies absolute replica targets tagged with a decision id, so a retried apply is harmless
// and a stale one is refused. Implementations live in the subpackages (noop, virtual, and
// with later issues kubernetes and local); connectortest holds the conformance test every
// implementation passes.
//
// The package is pure: no Temporal. The planner workflow reaches connectors through
// activities (noop, kubernetes, local) or keeps their protocol in its own state (virtual).
package connectors

import (
	"context"
	"errors"
	"fmt"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/scaling"
)

// Targets are absolute replica targets; nil means "leave this pool alone".
type Targets struct {
	Prefill *int `json:"prefill,omitempty"`
	Decode  *int `json:"decode,omitempty"`
}

// String renders the targets for logs ("prefill=3 decode=4").
func (t Targets) String() string {
	s := ""
	if t.Prefill != nil {
		s = fmt.Sprintf("prefill=%d", *t.Prefill)
	}
	if t.Decode != nil {
		if s != "" {
			s += " "
		}
		s += fmt.Sprintf("decode=%d", *t.Decode)
	}
	if s == "" {
		return "no change"
	}
	return s
}

// Equal reports whether two targets set the same pools to the same counts.
func (t Targets) Equal(o Targets) bool {
	same := func(a, b *int) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
	return same(t.Prefill, o.Prefill) && same(t.Decode, o.Decode)
}

// Validate rejects negative targets.
func (t Targets) Validate() error {
	if t.Prefill != nil && *t.Prefill < 0 {
		return fmt.Errorf("prefill target %d is negative", *t.Prefill)
	}
	if t.Decode != nil && *t.Decode < 0 {
		return fmt.Errorf("decode target %d is negative", *t.Decode)
	}
	return nil
}

// Inventory is what a connector knows of the deployment: Dynamo's WorkerCounts (ready and
// expected counts, nil when unknown, and the scaling-in-progress flags) plus the workers'
// capabilities and the newest decision applied.
type Inventory struct {
	scaling.WorkerCounts
	// Capabilities are the workers' reported capabilities (GPU counts, limits).
	Capabilities scaling.WorkerCapabilities `json:"capabilities"`
	// AppliedDecisionID is the newest decision id the connector has applied (0: none).
	AppliedDecisionID int64 `json:"applied_decision_id,omitempty"`
}

// MaxDecisionID bounds a decision id a connector reports (2^53: exact in JSON numbers, and
// far from wrapping when the planner counts on from it).
const MaxDecisionID = 1 << 53

// Validate checks what a connector reported is within the planner's bounds: replica counts
// within 0..config.MaxReplicas and GPUs per engine within 0..config.MaxGPUsPerEngine. An
// inventory that is not is unreadable, never taken as the deployment.
func (i Inventory) Validate() error {
	var errs []error
	for _, c := range []struct {
		name string
		n    *int
	}{{"ready prefill", i.ReadyPrefill}, {"ready decode", i.ReadyDecode}, {"expected prefill", i.ExpectedPrefill}, {"expected decode", i.ExpectedDecode},
		{"queued prefill", i.QueuedPrefill}, {"queued decode", i.QueuedDecode}} {
		if c.n != nil {
			if err := config.CheckReplicas(c.name+" count", *c.n); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if i.AppliedDecisionID < 0 || i.AppliedDecisionID > MaxDecisionID {
		errs = append(errs, fmt.Errorf("applied decision id must be within 0..%d (got %d)", int64(MaxDecisionID), i.AppliedDecisionID))
	}
	for _, e := range []struct {
		name string
		caps *scaling.EngineCapabilities
	}{{"prefill", i.Capabilities.Prefill}, {"decode", i.Capabilities.Decode}} {
		if e.caps == nil {
			continue
		}
		for _, g := range []struct {
			what string
			n    int
		}{{"num_gpu", e.caps.NumGPU}, {"gpu_cost_per_replica", e.caps.GPUCostPerReplica}} {
			if g.n < 0 || g.n > config.MaxGPUsPerEngine {
				errs = append(errs, fmt.Errorf("%s %s must be within 0..%d (got %d)", e.name, g.what, config.MaxGPUsPerEngine, g.n))
			}
		}
	}
	return errors.Join(errs...)
}

// Counts returns a copy of the worker counts for the decision core.
func (i Inventory) Counts() *scaling.WorkerCounts {
	c := i.WorkerCounts
	return &c
}

// Connector reports inventory and applies decisions. Apply takes absolute targets tagged
// with a decision id (increasing): applying the newest id again changes nothing, and an id
// older than the newest applied is refused with ErrStaleDecision, so a late retry can never
// undo a newer decision.
//
// Apply applies targets the deployment can hold even when it cannot start every new replica
// now: a decision that shrinks one pool and grows the other on full capacity applies the
// shrink at once, and the new replicas wait for the capacity the shrink frees (a Kubernetes
// pod Pending until a GPU frees; a local worker pending until a draining one exits). A
// replica waiting so counts toward its pool's target (the expected count) and is not ready,
// and the pool's scaling is in progress, as for a replica starting. Apply refuses, with
// ErrInvalidTargets and nothing changed, only targets the deployment could never hold.
type Connector interface {
	Inventory(ctx context.Context) (Inventory, error)
	Apply(ctx context.Context, decisionID int64, targets Targets) error
}

// ErrStaleDecision is returned by Apply for a decision older than the newest applied.
var ErrStaleDecision = errors.New("stale decision: a newer decision was already applied")

// ErrInvalidTargets is returned by Apply for targets the deployment could never hold
// (negative, a pool it does not have, more GPUs than it has), never for targets that only
// wait for capacity being freed; the decision changed nothing.
var ErrInvalidTargets = errors.New("invalid targets")

// ErrNotReady is returned by Apply when the deployment cannot take a change now (a rollout,
// terminating pods, not Ready): the decision is held, not forced, and the planner decides
// again on a later tick.
var ErrNotReady = errors.New("deployment not ready")

// Endpoint is where one engine publishes its Forward Pass Metrics.
type Endpoint struct {
	// Address is the ZeroMQ address (tcp://host:port).
	Address string `json:"address"`
	// Component is the engine's pool.
	Component scaling.Component `json:"component"`
}

// EndpointDiscoverer is a connector that knows where its engines publish Forward Pass
// Metrics. It lists the ready engines only: like Dynamo's planner, which sees the workers its
// discovery lists, a starting or draining engine is not observed.
type EndpointDiscoverer interface {
	FPMEndpoints(ctx context.Context) ([]Endpoint, error)
}
