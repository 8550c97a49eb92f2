package noop

import (
	"context"
	"testing"

	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/connectors/connectortest"
	"github.com/stretchr/testify/require"
)

func one() *int { v := 1; return &v }

func TestConformance(t *testing.T) {
	connectortest.Run(t, func(*testing.T) connectors.Connector {
		return New(connectors.Inventory{ReadyPrefill: one(), ReadyDecode: one()})
	}, connectortest.Options{Applies: false})
}

func TestRecordsAndAppliesNothing(t *testing.T) {
	c := New(connectors.Inventory{ReadyPrefill: one(), ReadyDecode: one()})
	three := 3
	require.NoError(t, c.Apply(context.Background(), 1, connectors.Targets{Decode: &three}))
	require.NoError(t, c.Apply(context.Background(), 1, connectors.Targets{Decode: &three}))
	require.Equal(t, []Applied{{DecisionID: 1, Targets: connectors.Targets{Decode: &three}}}, c.Recorded())
	inv, err := c.Inventory(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, *inv.ReadyDecode, "advisory: the deployment is unchanged")
	require.Nil(t, inv.ExpectedDecode)
}
