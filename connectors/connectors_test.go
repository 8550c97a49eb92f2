package connectors

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/scaling"
)

func TestInventoryValidate(t *testing.T) {
	n := func(v int) *int { return &v }
	require.NoError(t, Inventory{WorkerCounts: scaling.WorkerCounts{ReadyPrefill: n(2), ReadyDecode: n(4096)}, AppliedDecisionID: 7}.Validate())
	for _, tc := range []struct {
		inv  Inventory
		want string
	}{
		{Inventory{WorkerCounts: scaling.WorkerCounts{ReadyDecode: n(math.MaxInt)}}, "ready decode count must be within 0..4096"},
		{Inventory{WorkerCounts: scaling.WorkerCounts{QueuedPrefill: n(-1)}}, "queued prefill count must be within 0..4096"},
		{Inventory{WorkerCounts: scaling.WorkerCounts{ExpectedPrefill: n(-1)}}, "expected prefill count"},
		{Inventory{AppliedDecisionID: math.MaxInt64}, "applied decision id must be within 0..9007199254740992"},
		{Inventory{Capabilities: scaling.WorkerCapabilities{Decode: &scaling.EngineCapabilities{GPUCostPerReplica: math.MaxInt}}}, "decode gpu_cost_per_replica must be within 0..512"},
	} {
		require.ErrorContains(t, tc.inv.Validate(), tc.want)
	}
}
