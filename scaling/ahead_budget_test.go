package scaling

import (
	"testing"

	"github.com/llmplanner/planner/config"
	"github.com/stretchr/testify/require"
)

// Over the GPU budget's ceiling, the ahead policy keeps the engines each pool has and still
// needs, and fits only the growth; Dynamo's fit of the whole targets is what is left when
// the ceiling does not bind, the engines kept exceed it, or the minimum endpoints do not fit.
func TestAheadFitPair(t *testing.T) {
	tests := []struct {
		name             string
		budget           int
		needP, needD     int
		provP, provD     int
		wantP, wantD     int
		dynamoP, dynamoD int // Dynamo's fit of the targets, for comparison
	}{
		{"within the budget: the targets", 8, 3, 4, 2, 2, 3, 4, 3, 4},
		{"the last engine stays in its pool", 8, 4, 5, 4, 4, 4, 4, 3, 5},
		{"a burst at the demo's budget: no ready prefill engine stopped", 16, 16, 6, 12, 4, 12, 4, 11, 5},
		{"the growth both pools want, in proportion", 8, 6, 6, 4, 1, 4, 4, 4, 4},
		{"a pool that needs fewer frees the budget for the other", 8, 2, 7, 5, 3, 2, 6, 1, 7},
		{"a budget lowered under the deployment: Dynamo's fit", 8, 6, 6, 6, 6, 4, 4, 4, 4},
		{"no room for the minimum endpoints beside the engines kept: Dynamo's fit", 8, 1, 9, 0, 8, 1, 7, 1, 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, st := aheadPlannerWith(t, func(c *config.Config) { c.MaxGPUBudget = tc.budget })
			tk := newTick(p, &st, tc.provP, tc.provD)
			tk.expectedP, tk.expectedD = ptr(tc.provP), ptr(tc.provD)
			gotP, gotD := tk.aheadFitPair(tc.needP, tc.needD)
			require.Equal(t, [2]int{tc.wantP, tc.wantD}, [2]int{gotP, gotD})
			dp, dd := ProportionalClampPair(tc.needP, tc.needD, 1, 1, p.cfg.MinGPUBudget, tc.budget, 1, 1)
			require.Equal(t, [2]int{tc.dynamoP, tc.dynamoD}, [2]int{dp, dd}, "Dynamo's fit")
		})
	}
}

// Two needs that drift across the rounding of Dynamo's proportional fit move its last engine
// between the pools on every tick (each move cancels an engine that is starting); the ahead
// policy's fit keeps the split it has. Each tick's provisioned counts are the last decision.
func TestAheadFitPair_NoFlapAtTheBudget(t *testing.T) {
	p, st := aheadPlannerWith(t, func(c *config.Config) { c.MaxGPUBudget = 8 })
	needs := [][2]int{{4, 5}, {5, 5}, {4, 5}, {5, 5}, {4, 5}, {5, 5}}
	run := func(fit func(tk *tick, p, d int) (int, int)) (moves int) {
		prov := [2]int{4, 4}
		for _, n := range needs {
			tk := newTick(p, &st, prov[0], prov[1])
			tk.expectedP, tk.expectedD = ptr(prov[0]), ptr(prov[1])
			fp, fd := fit(tk, n[0], n[1])
			require.LessOrEqual(t, fp+fd, 8, "within the budget")
			if fp != prov[0] {
				moves++
			}
			prov = [2]int{fp, fd}
		}
		return moves
	}
	dynamo := func(tk *tick, np, nd int) (int, int) {
		return ProportionalClampPair(np, nd, 1, 1, p.cfg.MinGPUBudget, 8, 1, 1)
	}
	require.Equal(t, len(needs), run(dynamo), "Dynamo's fit moves the last engine on every tick")
	require.Zero(t, run((*tick).aheadFitPair), "the ahead policy's fit keeps its split")
}
