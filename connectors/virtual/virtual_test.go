package virtual

import (
	"context"
	"testing"

	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/connectors/connectortest"
	"github.com/stretchr/testify/require"
)

func n(v int) *int { return &v }

func TestConformance(t *testing.T) {
	connectortest.Run(t, func(*testing.T) connectors.Connector {
		return NewConnector(1, 1, func() float64 { return 0 }, DefaultAckTimeoutSeconds)
	}, connectortest.Options{Applies: true, Settle: func(t *testing.T, c connectors.Connector) {
		v := c.(*Connector)
		require.NoError(t, v.Complete(v.Current().DecisionID, nil, nil))
	}})
}

// Reference §7.2 readiness vectors through the protocol state.
func TestReadiness(t *testing.T) {
	s := NewState(1, 1)
	require.True(t, s.Ready(), "decision_id -1: ready")
	require.Equal(t, Published, s.Propose(0, n(1), n(2), DefaultAckTimeoutSeconds))
	require.Equal(t, int64(0), s.Decision.DecisionID)
	for range 3 { // decisions 1, 2, 3, each acknowledged
		require.NoError(t, s.Acknowledge(s.Decision.DecisionID, nil, nil))
		require.Equal(t, Published, s.Propose(0, n(int(s.Decision.DecisionID)+3), nil, DefaultAckTimeoutSeconds))
	}
	require.Equal(t, int64(3), s.Decision.DecisionID)
	require.False(t, s.Ready(), "(3, scaled 2)")
	s.ScaledDecisionID = nil
	require.False(t, s.Ready(), "(3, None)")
	require.NoError(t, s.Acknowledge(3, nil, nil))
	require.True(t, s.Ready(), "(3, 3)")
	four := int64(4)
	s.ScaledDecisionID = &four
	require.True(t, s.Ready(), "(3, 4)")
}

func TestProposeFollowsDynamo(t *testing.T) {
	s := NewState(1, 1)
	require.Equal(t, Unchanged, s.Propose(0, nil, nil, 1800), "no counts given")
	require.Equal(t, Published, s.Propose(10, n(2), nil, 1800))
	require.Equal(t, Decision{DecisionID: 0, NumPrefill: 2, NumDecode: Unset}, s.Decision)
	require.Equal(t, Unchanged, s.Propose(11, n(2), nil, 1800), "same counts")

	// Unacknowledged: held back for 1800 s from the first skip, then published anyway.
	require.Equal(t, AwaitingAcknowledgement, s.Propose(20, nil, n(3), 1800))
	require.Equal(t, AwaitingAcknowledgement, s.Propose(1819, nil, n(3), 1800))
	require.Equal(t, PublishedAfterTimeout, s.Propose(1820, nil, n(3), 1800))
	require.Equal(t, Decision{DecisionID: 1, NumPrefill: 2, NumDecode: 3}, s.Decision, "an absent count keeps the previous decision's")
	require.Nil(t, s.FirstSkipAt)

	// The inventory: expected is the decision, ready the acknowledged counts, scaling while
	// unacknowledged.
	inv := s.Inventory()
	require.Equal(t, n(1), inv.ReadyPrefill)
	require.Equal(t, n(2), inv.ExpectedPrefill)
	require.True(t, inv.PrefillScalingInProgress)
	require.NoError(t, s.Acknowledge(1, nil, nil))
	inv = s.Inventory()
	require.Equal(t, n(2), inv.ReadyPrefill)
	require.Equal(t, n(3), inv.ReadyDecode)
	require.False(t, inv.PrefillScalingInProgress || inv.DecodeScalingInProgress)
	// Reported ready counts win (the orchestrator may be mid-rollout).
	require.NoError(t, s.Acknowledge(1, n(2), n(2)))
	require.Equal(t, n(2), s.Inventory().ReadyDecode)

	require.EqualError(t, s.Acknowledge(5, nil, nil), "acknowledges decision 5, but the newest published decision is 1")
	require.EqualError(t, s.Acknowledge(-1, nil, nil), "acknowledges decision -1: decision ids start at 0")
	require.EqualError(t, s.Acknowledge(1, n(-2), nil), "reported ready count -2 is negative")
	// An old acknowledgement does not move the acknowledged id back.
	require.NoError(t, s.Acknowledge(0, nil, nil))
	require.Equal(t, int64(1), *s.ScaledDecisionID)
}

func TestConnectorAwaitsAcknowledgement(t *testing.T) {
	now := 0.0
	c := NewConnector(1, 1, func() float64 { return now }, 60)
	ctx := context.Background()
	require.NoError(t, c.Apply(ctx, 1, connectors.Targets{Prefill: n(2)}))
	require.ErrorIs(t, c.Apply(ctx, 2, connectors.Targets{Prefill: n(3)}), ErrAwaitingAcknowledgement)
	now = 61
	require.NoError(t, c.Apply(ctx, 2, connectors.Targets{Prefill: n(3)}), "published after the timeout")
	require.Equal(t, Decision{DecisionID: 1, NumPrefill: 3, NumDecode: Unset}, c.Current())
}
