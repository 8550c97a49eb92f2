// Package connectortest is the conformance test every connectors.Connector passes: inventory
// without error, absolute and idempotent applies tagged with decision ids, stale and invalid
// decisions refused.
package connectortest

import (
	"context"
	"testing"

	"github.com/llmplanner/planner/connectors"
	"github.com/stretchr/testify/require"
)

// Options describe what the connector under test does.
type Options struct {
	// Applies is true when an applied target becomes the pool's expected count (false for an
	// advisory connector that applies nothing).
	Applies bool
	// Settle, when set, runs after each successful apply, before the deployment's counts are
	// checked and before the next apply (e.g. an orchestrator acknowledging a virtual
	// decision, a supervisor finishing a start, an operator reporting the new replicas).
	Settle func(t *testing.T, c connectors.Connector)
}

// Run checks the Connector contract on connectors made by newConnector; each sub-test gets
// a fresh one that must report a deployment of 1 prefill and 1 decode replica.
func Run(t *testing.T, newConnector func(t *testing.T) connectors.Connector, o Options) {
	ctx := context.Background()
	n := func(v int) *int { return &v }
	settle := func(t *testing.T, c connectors.Connector) {
		if o.Settle != nil {
			o.Settle(t, c)
		}
	}
	t.Run("initial inventory", func(t *testing.T) {
		inv, err := newConnector(t).Inventory(ctx)
		require.NoError(t, err)
		require.Equal(t, n(1), inv.ReadyPrefill)
		require.Equal(t, n(1), inv.ReadyDecode)
		require.Zero(t, inv.AppliedDecisionID)
	})
	t.Run("absolute targets with increasing ids", func(t *testing.T) {
		c := newConnector(t)
		require.NoError(t, c.Apply(ctx, 1, connectors.Targets{Prefill: n(2), Decode: n(3)}))
		settle(t, c)
		inv, err := c.Inventory(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(1), inv.AppliedDecisionID)
		if o.Applies {
			require.Equal(t, n(2), inv.ExpectedPrefill)
			require.Equal(t, n(3), inv.ExpectedDecode)
		}
		require.NoError(t, c.Apply(ctx, 2, connectors.Targets{Decode: n(1)}), "one pool only")
		settle(t, c)
		inv, err = c.Inventory(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(2), inv.AppliedDecisionID)
		if o.Applies {
			require.Equal(t, n(2), inv.ExpectedPrefill, "a nil target leaves the pool alone")
			require.Equal(t, n(1), inv.ExpectedDecode)
		}
	})
	t.Run("retried apply is harmless", func(t *testing.T) {
		c := newConnector(t)
		tg := connectors.Targets{Prefill: n(4)}
		require.NoError(t, c.Apply(ctx, 7, tg))
		before, err := c.Inventory(ctx)
		require.NoError(t, err)
		require.NoError(t, c.Apply(ctx, 7, tg), "the same decision again")
		after, err := c.Inventory(ctx)
		require.NoError(t, err)
		require.Equal(t, before, after)
	})
	t.Run("stale decision refused", func(t *testing.T) {
		c := newConnector(t)
		require.NoError(t, c.Apply(ctx, 5, connectors.Targets{Prefill: n(3)}))
		settle(t, c)
		err := c.Apply(ctx, 4, connectors.Targets{Prefill: n(1)})
		require.ErrorIs(t, err, connectors.ErrStaleDecision)
		inv, err := c.Inventory(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(5), inv.AppliedDecisionID)
		if o.Applies {
			require.Equal(t, n(3), inv.ExpectedPrefill, "the stale decision changed nothing")
		}
	})
	t.Run("invalid targets refused", func(t *testing.T) {
		c := newConnector(t)
		require.ErrorIs(t, c.Apply(ctx, 1, connectors.Targets{Decode: n(-1)}), connectors.ErrInvalidTargets)
		inv, err := c.Inventory(ctx)
		require.NoError(t, err)
		require.Zero(t, inv.AppliedDecisionID)
	})
}
