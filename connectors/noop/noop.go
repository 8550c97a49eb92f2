// Package noop is the advisory connector: it records every decision and applies nothing.
// Its inventory is the fixed deployment it was created with, so the planner keeps seeing the
// real (unchanged) replica counts and its decisions are what it would do, not what it did.
package noop

import (
	"context"
	"fmt"
	"sync"

	"github.com/llmplanner/planner/connectors"
)

// Applied is one recorded decision.
type Applied struct {
	DecisionID int64              `json:"decision_id"`
	Targets    connectors.Targets `json:"targets"`
}

// Connector is the no-op connector. It is safe for concurrent use.
type Connector struct {
	mu        sync.Mutex
	inventory connectors.Inventory
	applied   []Applied
}

// New returns a connector reporting inv (with no scaling in progress) and applying nothing.
func New(inv connectors.Inventory) *Connector { return &Connector{inventory: inv} }

// Inventory returns the fixed inventory and the newest recorded decision id.
func (c *Connector) Inventory(context.Context) (connectors.Inventory, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	inv := c.inventory
	if n := len(c.applied); n > 0 {
		inv.AppliedDecisionID = c.applied[n-1].DecisionID
	}
	return inv, nil
}

// Apply records the decision; the newest id again is a no-op, an older one is stale.
func (c *Connector) Apply(_ context.Context, id int64, t connectors.Targets) error {
	return c.apply(id, t, nil)
}

// apply checks and records a decision; persist, when given, runs first (under the lock) and
// the decision is recorded only if it succeeds.
func (c *Connector) apply(id int64, t connectors.Targets, persist func() error) error {
	if err := t.Validate(); err != nil {
		return fmt.Errorf("%w: %v", connectors.ErrInvalidTargets, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.applied); n > 0 {
		last := c.applied[n-1].DecisionID
		switch {
		case id == last:
			return nil
		case id < last:
			return fmt.Errorf("%w: decision %d, newest %d", connectors.ErrStaleDecision, id, last)
		}
	}
	if persist != nil {
		if err := persist(); err != nil {
			return err
		}
	}
	c.applied = append(c.applied, Applied{DecisionID: id, Targets: t})
	return nil
}

// Recorded returns a copy of every decision recorded, oldest first.
func (c *Connector) Recorded() []Applied {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Applied(nil), c.applied...)
}
