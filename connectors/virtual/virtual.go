// Package virtual is the virtual connector's protocol (Dynamo's VirtualConnectorCoordinator,
// reference §7.2): the planner publishes a decision (prefill and decode counts with an
// increasing decision id) and an external orchestrator applies it and acknowledges it. A new
// decision waits until the previous one is acknowledged, for at most the acknowledgement
// timeout (default 1800 s), after which it is published anyway.
//
// State is a plain value: the planner workflow keeps it in its own state and the
// orchestrator talks to the workflow (package plannerclient). Connector wraps a State for
// uses outside a workflow (tests, the simulator).
package virtual

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/scaling"
)

// DefaultAckTimeoutSeconds is how long a decision waits for its predecessor's
// acknowledgement before it is published anyway (Dynamo's SCALING_MAX_WAIT_TIME).
const DefaultAckTimeoutSeconds = 1800

// Unset is the count of a pool no decision has set yet, and the id before the first decision.
const Unset = -1

// Decision is a published decision as the orchestrator sees it.
type Decision struct {
	DecisionID int64 `json:"decision_id"`
	NumPrefill int   `json:"num_prefill_workers"`
	NumDecode  int   `json:"num_decode_workers"`
}

// State is the protocol state. The zero value is not valid: use NewState.
type State struct {
	// Decision is the newest published decision (DecisionID -1 before the first).
	Decision Decision `json:"decision"`
	// ScaledDecisionID is the newest decision the orchestrator acknowledged (nil: none).
	ScaledDecisionID *int64 `json:"scaled_decision_id,omitempty"`
	// FirstSkipAt is when a decision was first held back for want of an acknowledgement.
	FirstSkipAt *float64 `json:"first_skip_at,omitempty"`
	// AckedPrefill and AckedDecode are the counts of the newest acknowledged decision (or the
	// initial counts): what is running once the orchestrator has done its job.
	AckedPrefill int `json:"acked_prefill"`
	AckedDecode  int `json:"acked_decode"`
	// ReportedPrefill and ReportedDecode are ready counts the orchestrator reported with its
	// last acknowledgement, when it did; they win over the acknowledged counts.
	ReportedPrefill *int `json:"reported_prefill,omitempty"`
	ReportedDecode  *int `json:"reported_decode,omitempty"`
}

// NewState starts the protocol for a deployment running the given counts.
func NewState(prefill, decode int) State {
	return State{Decision: Decision{DecisionID: Unset, NumPrefill: Unset, NumDecode: Unset}, AckedPrefill: prefill, AckedDecode: decode}
}

// Ready reports whether a new decision may be published now (Dynamo's
// scaling_decision_is_ready).
func (s *State) Ready() bool {
	return scaling.DecisionAcknowledged(s.Decision.DecisionID, s.ScaledDecisionID)
}

// Outcome is what Propose did.
type Outcome string

// The outcomes of Propose.
const (
	// Published: a new decision was published.
	Published Outcome = "published"
	// PublishedAfterTimeout: published although the previous decision was never acknowledged.
	PublishedAfterTimeout Outcome = "published_after_timeout"
	// Unchanged: the counts equal the current decision's; nothing to publish.
	Unchanged Outcome = "unchanged"
	// AwaitingAcknowledgement: held back until the previous decision is acknowledged.
	AwaitingAcknowledgement Outcome = "awaiting_acknowledgement"
)

// Propose publishes a decision for the given counts (nil: keep the current decision's) at
// time now (seconds), following Dynamo's update_scaling_decision: nothing when no count
// changes; held back while the previous decision is unacknowledged, for at most
// ackTimeoutS; otherwise a new decision with the next id.
func (s *State) Propose(now float64, prefill, decode *int, ackTimeoutS float64) Outcome {
	changed := (prefill != nil && *prefill != s.Decision.NumPrefill) || (decode != nil && *decode != s.Decision.NumDecode)
	if !changed {
		return Unchanged
	}
	outcome := Published
	if !s.Ready() {
		if s.FirstSkipAt == nil {
			at := now
			s.FirstSkipAt = &at
		}
		if now-*s.FirstSkipAt < ackTimeoutS {
			return AwaitingAcknowledgement
		}
		outcome = PublishedAfterTimeout
	}
	d := s.Decision
	d.DecisionID++
	if prefill != nil {
		d.NumPrefill = *prefill
	}
	if decode != nil {
		d.NumDecode = *decode
	}
	s.Decision, s.FirstSkipAt = d, nil
	return outcome
}

// Acknowledge records the orchestrator's completion of decision id (Dynamo's
// complete(decision)), with the ready counts it observed when it reports them. An id newer
// than the newest published decision is an error; an older one is accepted and changes
// nothing but the reported counts.
func (s *State) Acknowledge(id int64, readyPrefill, readyDecode *int) error {
	if id > s.Decision.DecisionID {
		return fmt.Errorf("acknowledges decision %d, but the newest published decision is %d", id, s.Decision.DecisionID)
	}
	if id < 0 {
		return fmt.Errorf("acknowledges decision %d: decision ids start at 0", id)
	}
	for _, v := range []*int{readyPrefill, readyDecode} {
		if v != nil && *v < 0 {
			return fmt.Errorf("reported ready count %d is negative", *v)
		}
		if v != nil && *v > config.MaxReplicas {
			return fmt.Errorf("reported ready count %d is over the bound of %d replicas per pool", *v, config.MaxReplicas)
		}
	}
	if s.ScaledDecisionID == nil || id > *s.ScaledDecisionID {
		v := id
		s.ScaledDecisionID = &v
		if id == s.Decision.DecisionID {
			if s.Decision.NumPrefill != Unset {
				s.AckedPrefill = s.Decision.NumPrefill
			}
			if s.Decision.NumDecode != Unset {
				s.AckedDecode = s.Decision.NumDecode
			}
		}
	}
	s.ReportedPrefill, s.ReportedDecode = readyPrefill, readyDecode
	return nil
}

// Inventory is the deployment as the protocol knows it: ready are the reported counts, else
// the acknowledged decision's; expected are the newest decision's; a pool is scaling while
// its decision is unacknowledged.
func (s *State) Inventory() connectors.Inventory {
	ready := func(reported *int, acked int) *int {
		if reported != nil {
			v := *reported
			return &v
		}
		v := acked
		return &v
	}
	inv := connectors.Inventory{WorkerCounts: scaling.WorkerCounts{ReadyPrefill: ready(s.ReportedPrefill, s.AckedPrefill), ReadyDecode: ready(s.ReportedDecode, s.AckedDecode)}}
	if s.Decision.NumPrefill != Unset {
		v := s.Decision.NumPrefill
		inv.ExpectedPrefill = &v
	}
	if s.Decision.NumDecode != Unset {
		v := s.Decision.NumDecode
		inv.ExpectedDecode = &v
	}
	if !s.Ready() {
		inv.PrefillScalingInProgress = s.Decision.NumPrefill != Unset
		inv.DecodeScalingInProgress = s.Decision.NumDecode != Unset
	}
	return inv
}

// ErrAwaitingAcknowledgement is returned by Connector.Apply when the previous decision is
// not acknowledged yet.
var ErrAwaitingAcknowledgement = errors.New("previous decision not acknowledged yet")

// Connector is a State behind the connectors.Connector interface, with its own clock, for
// uses outside a workflow. It is safe for concurrent use.
type Connector struct {
	mu          sync.Mutex
	state       State
	now         func() float64
	ackTimeoutS float64
	applied     int64
}

// NewConnector returns a virtual connector for a deployment running the given counts.
func NewConnector(prefill, decode int, now func() float64, ackTimeoutS float64) *Connector {
	return &Connector{state: NewState(prefill, decode), now: now, ackTimeoutS: ackTimeoutS}
}

// Inventory implements connectors.Connector.
func (c *Connector) Inventory(context.Context) (connectors.Inventory, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	inv := c.state.Inventory()
	inv.AppliedDecisionID = c.applied
	return inv, nil
}

// Apply publishes the targets as a decision (connectors.Connector). The planner's decision
// id guards idempotency; the published decision gets the protocol's own id.
func (c *Connector) Apply(_ context.Context, id int64, t connectors.Targets) error {
	if err := t.Validate(); err != nil {
		return fmt.Errorf("%w: %v", connectors.ErrInvalidTargets, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case id == c.applied:
		return nil
	case id < c.applied:
		return fmt.Errorf("%w: decision %d, newest %d", connectors.ErrStaleDecision, id, c.applied)
	}
	if c.state.Propose(c.now(), t.Prefill, t.Decode, c.ackTimeoutS) == AwaitingAcknowledgement {
		return ErrAwaitingAcknowledgement
	}
	c.applied = id
	return nil
}

// Current returns the newest published decision (the orchestrator's get()).
func (c *Connector) Current() Decision {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state.Decision
}

// Complete acknowledges a decision (the orchestrator's complete()).
func (c *Connector) Complete(id int64, readyPrefill, readyDecode *int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state.Acknowledge(id, readyPrefill, readyDecode)
}
