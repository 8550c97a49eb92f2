package scaling

import (
	"slices"
	"strings"
	"testing"

	"github.com/llmplanner/planner/config"
	"github.com/stretchr/testify/require"
)

// Over the GPU budget's ceiling, the ahead policy keeps the engines each pool has and needs,
// and gives what the budget leaves, an engine at a time, to the pool with the lower share of
// its target (holds included); Dynamo's fit of the whole targets is the answer when the
// ceiling does not bind, the engines kept exceed it, or the minimum endpoints do not fit
// beside them.
func TestAheadFitPair(t *testing.T) {
	tests := []struct {
		name             string
		budget, decodeTP int
		p, d             int  // the targets, holds included
		needP, needD     int  // the needs before the holds
		provP, provD     *int // the provisioned counts (nil: unknown, the ready ones count)
		readyP, readyD   int
		want             [2]int
		kept             bool
		dynamo           [2]int // Dynamo's fit of the targets, for comparison
	}{
		{name: "within the budget: the targets", budget: 8, p: 3, d: 4, needP: 3, needD: 4, provP: ptr(2), provD: ptr(2),
			want: [2]int{3, 4}, dynamo: [2]int{3, 4}},
		{name: "the last engine stays in its pool", budget: 8, p: 4, d: 5, needP: 4, needD: 5, provP: ptr(4), provD: ptr(4),
			want: [2]int{4, 4}, kept: true, dynamo: [2]int{3, 5}},
		{name: "a burst at the demo's budget: no ready prefill engine stopped", budget: 16, p: 16, d: 6, needP: 16, needD: 6,
			provP: ptr(12), provD: ptr(4), want: [2]int{12, 4}, kept: true, dynamo: [2]int{11, 5}},
		{name: "what the budget leaves goes to the pool furthest below its target", budget: 8, p: 6, d: 6, needP: 6, needD: 6,
			provP: ptr(4), provD: ptr(1), want: [2]int{4, 4}, kept: true, dynamo: [2]int{4, 4}},
		{name: "a pool that needs fewer frees the budget for the other", budget: 8, p: 2, d: 7, needP: 2, needD: 7,
			provP: ptr(5), provD: ptr(3), want: [2]int{2, 6}, kept: true, dynamo: [2]int{1, 7}},
		{name: "a held pool keeps only what it needs; its held engines are shared", budget: 8, p: 6, d: 6, needP: 2, needD: 6,
			provP: ptr(6), provD: ptr(2), want: [2]int{4, 4}, kept: true, dynamo: [2]int{4, 4}},
		{name: "held engines share by the targets, holds included", budget: 12, p: 10, d: 8, needP: 2, needD: 8,
			provP: ptr(10), provD: ptr(2), want: [2]int{7, 5}, kept: true, dynamo: [2]int{6, 6}},
		{name: "unknown provisioned counts: the ready ones", budget: 8, p: 4, d: 5, needP: 4, needD: 5, readyP: 4, readyD: 4,
			want: [2]int{4, 4}, kept: true, dynamo: [2]int{3, 5}},
		{name: "two GPUs a decode engine: an engine of each fits where the GPUs allow", budget: 10, decodeTP: 2, p: 6, d: 4,
			needP: 6, needD: 4, provP: ptr(3), provD: ptr(2), want: [2]int{4, 3}, kept: true, dynamo: [2]int{4, 3}},
		{name: "a budget lowered under the deployment: Dynamo's fit", budget: 8, p: 6, d: 6, needP: 6, needD: 6,
			provP: ptr(6), provD: ptr(6), want: [2]int{4, 4}, dynamo: [2]int{4, 4}},
		{name: "no room for the minimum endpoints beside the engines kept: Dynamo's fit", budget: 8, p: 1, d: 9, needP: 1,
			needD: 9, provP: ptr(0), provD: ptr(8), want: [2]int{1, 7}, dynamo: [2]int{1, 7}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, st := aheadPlannerWith(t, func(c *config.Config) {
				c.MaxGPUBudget = tc.budget
				if tc.decodeTP > 0 {
					c.DecodeEngineNumGPU = ptr(tc.decodeTP)
				}
			})
			tk := newTick(p, &st, tc.readyP, tc.readyD)
			tk.expectedP, tk.expectedD = tc.provP, tc.provD
			gotP, gotD, kept := tk.aheadFitPair(tc.p, tc.d, tc.needP, tc.needD)
			require.Equal(t, tc.want, [2]int{gotP, gotD})
			require.Equal(t, tc.kept, kept)
			require.LessOrEqual(t, gotP*tk.gpuCost(Prefill)+gotD*tk.gpuCost(Decode), tc.budget, "within the budget")
			dp, dd := ProportionalClampPair(tc.p, tc.d, tk.gpuCost(Prefill), tk.gpuCost(Decode), p.cfg.MinGPUBudget, tc.budget,
				tk.minEndpoint(Prefill), tk.minEndpoint(Decode))
			require.Equal(t, tc.dynamo, [2]int{dp, dd}, "Dynamo's fit")
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
	ahead := func(tk *tick, np, nd int) (int, int) {
		fp, fd, _ := tk.aheadFitPair(np, nd, np, nd)
		return fp, fd
	}
	require.Equal(t, len(needs), run(dynamo), "Dynamo's fit moves the last engine on every tick")
	require.Zero(t, run(ahead), "the ahead policy's fit keeps its split")
}

// Through aheadDecide: a prefill pool held above its need by the bursty hold keeps only what
// it needs over the budget; its held engines share what is left with decode's need by the
// targets. The note says the engines each pool has and needs were kept.
func TestAheadDecide_BudgetFitKeepsNeedsNotHolds(t *testing.T) {
	const lead = 65.0 // a 60 s startup and a 5 s interval; buckets of 30 s
	p, st := aheadPlannerWith(t, func(c *config.Config) { c.MaxGPUBudget = 8 })
	a := st.Ahead
	a.BucketS = 30
	for i := range 10 { // 300 s observed: past the first scale-down's trend window
		a.Count, a.ISL, a.OSL, a.Covered = append(a.Count, 60), append(a.ISL, 60*3000), append(a.OSL, 60*300), append(a.Covered, 30)
		need := 2
		if i == 7 {
			need = 6 // a burst 60 s ago: the bursty hold keeps 6 prefill engines
		}
		a.NeedPrefill, a.NeedDecode = append(a.NeedPrefill, need), append(a.NeedDecode, 2)
	}
	tk := newTick(p, &st, 6, 2)
	tk.in = Input{Now: 300, Traffic: &TrafficObservation{DurationS: 5, NumReq: ptr(10.0)}}
	dec := tk.aheadDecide(map[Component]int{Prefill: 2, Decode: 6}, lead, false, false, true, false)
	require.NotNil(t, dec.Prefill)
	require.NotNil(t, dec.Decode)
	require.Equal(t, [2]int{4, 4}, [2]int{*dec.Prefill, *dec.Decode}, tk.diag.Notes)
	require.True(t, slices.ContainsFunc(tk.diag.Notes, func(n string) bool {
		return strings.Contains(n, "ahead: 6P 6D fitted to the GPU budget: 4P 4D, keeping the engines each pool has and needs")
	}), tk.diag.Notes)
}
