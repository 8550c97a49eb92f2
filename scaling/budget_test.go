package scaling

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPythonIntegerSemantics(t *testing.T) {
	for _, tt := range []struct{ a, b, floor, ceil int }{
		{7, 2, 3, 4}, {-7, 2, -4, -3}, {6, 3, 2, 2}, {-6, 3, -2, -2}, {0, 5, 0, 0}, {-1, 4, -1, 0},
	} {
		require.Equal(t, tt.floor, floorDiv(tt.a, tt.b), "%d // %d", tt.a, tt.b)
		require.Equal(t, tt.ceil, ceilDiv(tt.a, tt.b), "ceil(%d / %d)", tt.a, tt.b)
	}
}

// Reference §3.6 vectors (test_budget.py).
func TestBoundsForTotal(t *testing.T) {
	in, _ := BoundsForTotal(2, 4, 8, 2)
	require.True(t, in, "2 >= 4 - 2")
	in, why := BoundsForTotal(9, 4, 8, 2)
	require.False(t, in)
	require.Equal(t, "exceeds ceiling", why)
	in, why = BoundsForTotal(1, 4, 8, 2)
	require.False(t, in)
	require.Equal(t, "below floor", why)
	in, _ = BoundsForTotal(1000, -1, -1, 0)
	require.True(t, in)
	require.Equal(t, 4, ComputeTolerance(2, 4, 0, -1))
	require.Equal(t, 0, ComputeTolerance())
}

func TestProportionalClampPair(t *testing.T) {
	tests := []struct {
		p, d, pGPU, dGPU, min, max, pMin, dMin int
		wantP, wantD                           int
	}{
		{10, 10, 1, 1, -1, 5, 2, 1, 2, 3},
		{5, 5, 1, 1, -1, 1, 1, 1, 0, 0},     // minimum footprint 2 > 1
		{1, 2, 2, 2, 3, 3, 1, 1, 0, 0},      // minimum footprint 4 > 3
		{1, 1, 2, 2, 5, 5, 1, 1, 1, 1},      // total 4 in band thanks to tolerance 2
		{2, 2, 1, 1, 100, 4, 1, 1, 2, 2},    // floor push infeasible -> inputs
		{1, 1, 1, 2, 4, 10, 1, 1, 1, 1},     // total 3 >= 4 - 2
		{3, 4, 1, 1, -1, -1, 1, 1, 3, 4},    // both bounds disabled
		{3, 4, 0, 1, 2, 5, 1, 1, 3, 4},      // unknown GPU cost
		{0, 0, 1, 1, 6, 10, 1, 1, 3, 3},     // floor from nothing: split evenly
		{8, 1, 1, 1, -1, 6, 1, 1, 5, 1},     // ceiling: decode never raised above its input
		{1, 1, 1, 1, 6, -1, 1, 1, 3, 3},     // floor only: ceil(1*6/2)=3, remaining 3
		{40, 20, 2, 4, -1, 64, 1, 2, 16, 8}, // scale 64/160 = 0.4: p = floor(16), decode takes (64-32)/4
	}
	for _, tt := range tests {
		name := fmt.Sprintf("(%d,%d) gpu %d/%d band %d/%d min %d/%d", tt.p, tt.d, tt.pGPU, tt.dGPU, tt.min, tt.max, tt.pMin, tt.dMin)
		p, d := ProportionalClampPair(tt.p, tt.d, tt.pGPU, tt.dGPU, tt.min, tt.max, tt.pMin, tt.dMin)
		require.Equal(t, [2]int{tt.wantP, tt.wantD}, [2]int{p, d}, name)
	}
}

func TestProportionalClampSingle(t *testing.T) {
	require.Equal(t, 4, ProportionalClampSingle(10, 1, -1, 4, 1))
	require.Equal(t, 0, ProportionalClampSingle(5, 1, -1, 2, 3))
	require.Equal(t, 0, ProportionalClampSingle(2, 4, 3, 3, 1))
	// The floor push never lands above the ceiling: min == max == 5 with 2-GPU replicas.
	require.Equal(t, 2, ProportionalClampSingle(1, 2, 5, 5, 1))
	// _apply_single_budget(3, decode) with 4 GPUs per replica and max 8: the GPU cost
	// resolves to gpu_cost_per_replica, else num_gpu.
	for _, tt := range []struct {
		caps EngineCapabilities
		want int
	}{
		{EngineCapabilities{NumGPU: 4}, 2},
		{EngineCapabilities{NumGPU: 4, GPUCostPerReplica: 4}, 2},
		{EngineCapabilities{NumGPU: 4, GPUCostPerReplica: 5}, 1},
	} {
		require.Equal(t, tt.want, ProportionalClampSingle(3, tt.caps.GPUCost(), -1, 8, 1), "%+v", tt.caps)
	}
}

func TestGuardSingleScalingBudget(t *testing.T) {
	tests := []struct {
		cur, prop, gpu, min, max, minEp int
		want                            int
		reason                          Reason
	}{
		{64, 63, 1, 64, 64, 1, 64, ReasonGPUBudgetGuardHold},
		{63, 62, 1, 64, 64, 1, 63, ReasonGPUBudgetGuardHold}, // 63 is in band via tolerance 1
		{70, 69, 1, -1, 64, 1, 64, ReasonGPUBudgetReconcile},
		{10, 12, 1, -1, 64, 1, 12, ""},
		{60, 70, 1, -1, 64, 1, 64, ""},                       // clamped toward the ceiling, same direction
		{64, 65, 1, -1, 64, 1, 64, ReasonGPUBudgetGuardHold}, // at the ceiling, no scale-up
		{5, 4, 0, 2, 8, 1, 4, ""},                            // unknown GPU cost: proposal passes
	}
	for _, tt := range tests {
		got, r := GuardSingleScalingBudget(tt.cur, tt.prop, tt.gpu, tt.min, tt.max, tt.minEp)
		require.Equal(t, tt.want, got, "%+v", tt)
		require.Equal(t, tt.reason, r, "%+v", tt)
	}
}

func TestFitDirectionalBudgetPair(t *testing.T) {
	tests := []struct {
		name                     string
		curP, curD, propP, propD int
		pGPU, dGPU, min, max     int
		wantP, wantD             int
	}{
		{"no room at the ceiling", 24, 40, 32, 48, 1, 1, 64, 64, 24, 40},
		{"opposing move, both legs move", 24, 40, 23, 48, 1, 1, 64, 64, 23, 41},
		{"2-GPU prefill donor", 16, 16, 15, 24, 2, 1, 48, 48, 15, 18},
		{"proportional skew tie-break", 24, 36, 32, 44, 1, 1, -1, 64, 26, 38},
		{"ceiling fit of a prefill scale-up", 24, 36, 40, 36, 1, 1, -1, 64, 28, 36},
		{"proposal in band passes", 10, 10, 12, 9, 1, 1, -1, 64, 12, 9},
	}
	for _, tt := range tests {
		p, d := FitDirectionalBudgetPair(tt.curP, tt.curD, tt.propP, tt.propD, tt.pGPU, tt.dGPU, tt.min, tt.max, 1, 1)
		require.Equal(t, [2]int{tt.wantP, tt.wantD}, [2]int{p, d}, tt.name)
	}
}

func TestGuardDisaggScalingBudget(t *testing.T) {
	tests := []struct {
		name                     string
		curP, curD, propP, propD int
		pGPU, dGPU, min, max     int
		pMin, dMin               int
		wantP, wantD             int
		reason                   Reason
	}{
		{"down at the floor", 28, 36, 27, 36, 1, 1, 64, 64, 1, 1, 28, 36, ReasonGPUBudgetGuardHold},
		{"opposing rebalance at the floor", 27, 37, 26, 38, 1, 1, 64, 64, 1, 1, 26, 38, ""},
		{"up at the ceiling", 28, 36, 28, 37, 1, 1, 64, 64, 1, 1, 28, 36, ReasonGPUBudgetGuardHold},
		{"both up at the ceiling", 28, 36, 29, 37, 1, 1, 64, 64, 1, 1, 28, 36, ReasonGPUBudgetGuardHold},
		{"2-GPU decode swap impossible at 4/4", 2, 1, 1, 2, 1, 2, 4, 4, 1, 1, 2, 1, ReasonGPUBudgetGuardHold},
		{"max 80, prefill down", 35, 35, 34, 35, 1, 1, 64, 80, 1, 1, 34, 35, ""},
		{"max 4, decode up at the ceiling", 3, 1, 3, 2, 1, 1, -1, 4, 1, 1, 3, 1, ReasonGPUBudgetGuardHold},
		{"max 5, both up at the ceiling", 4, 1, 5, 2, 1, 1, -1, 5, 1, 1, 4, 1, ReasonGPUBudgetGuardHold},
		{"2-GPU band 5/5, prefill to 0 held", 1, 1, 0, 1, 2, 2, 5, 5, 0, 1, 1, 1, ReasonGPUBudgetGuardHold},
		{"2-GPU band 5/5, prefill to decode", 1, 1, 0, 2, 2, 2, 5, 5, 0, 1, 0, 2, ""},
		{"band 6/10: clamp would raise decode", 4, 3, 1, 3, 1, 1, 6, 10, 1, 1, 4, 3, ReasonGPUBudgetGuardHold},
		{"2-GPU decode band 7/7 swap", 1, 2, 2, 1, 1, 2, 7, 7, 1, 1, 1, 2, ReasonGPUBudgetGuardHold},
		{"band 4/6: out of band current reconciled", 1, 1, 0, 1, 1, 1, 4, 6, 1, 1, 2, 2, ReasonGPUBudgetReconcile},
	}
	for _, tt := range tests {
		p, d, r := GuardDisaggScalingBudget(tt.curP, tt.curD, tt.propP, tt.propD, tt.pGPU, tt.dGPU, tt.min, tt.max, tt.pMin, tt.dMin)
		require.Equal(t, [2]int{tt.wantP, tt.wantD}, [2]int{p, d}, tt.name)
		require.Equal(t, tt.reason, r, tt.name)
	}
}

// fixed curves stand in for the profile interpolators, as Dynamo's G1 tests mock them.
type fixedPrefill float64

func (f fixedPrefill) ThroughputPerGPU(float64) float64 { return float64(f) }

type fixedDecode float64

func (f fixedDecode) FindBestThroughputPerGPU(float64, float64) (float64, float64, float64) {
	return float64(f), 0.01, 0.5
}

type recordingDecode struct{ itl *float64 }

func (r recordingDecode) FindBestThroughputPerGPU(itl, ctx float64) (float64, float64, float64) {
	*r.itl = itl
	return 1000, itl, 0.5
}

// Reference §3.2 vectors (test_replica_calculation.py): T = 60 s, 1 GPU per replica,
// min_endpoint 1, max_gpu_budget 10, ISL 3000, OSL 150, prefill 40000 tok/s/GPU.
func TestClassicReplicas(t *testing.T) {
	const interval = 60.0
	classic := func(n, isl, osl float64, pCorr, dCorr float64, dThpt float64, pGPU, dGPU, minEp, budget int) (int, int) {
		p := ClassicPrefillReplicas(n, isl, interval, pCorr, fixedPrefill(40000), pGPU, minEp)
		d := ClassicDecodeReplicas(n, isl, osl, interval, 10, dCorr, fixedDecode(dThpt), dGPU, minEp)
		return ClassicBudget(p, d, pGPU, dGPU, minEp, budget)
	}
	p, d := classic(10, 3000, 150, 1, 1, 10000, 1, 1, 1, 10)
	require.Equal(t, [2]int{1, 1}, [2]int{p, d})
	p, d = classic(500, 3000, 150, 1, 1, 1000, 1, 1, 1, 10)
	require.Equal(t, [2]int{1, 2}, [2]int{p, d}, "prefill 0.625 -> 1, decode 1.25 -> 2")
	p, d = classic(50, 3000, 150, 1, 1, 10000, 1, 1, 1, 3)
	require.LessOrEqual(t, p+d, 3)
	require.Equal(t, [2]int{1, 1}, [2]int{p, d})
	p, d = classic(1, 100, 10, 1, 1, 10000, 1, 1, 2, 10)
	require.Equal(t, [2]int{2, 2}, [2]int{p, d}, "min_endpoint 2 lifts both")
	// p_corr 2.5 is treated as 1 (queueing, which more replicas fix); 0.5 halves the demand.
	require.Equal(t, 7, ClassicPrefillReplicas(5000, 3000, interval, 1, fixedPrefill(40000), 1, 1), "6.25 -> 7")
	require.Equal(t, 7, ClassicPrefillReplicas(5000, 3000, interval, 2.5, fixedPrefill(40000), 1, 1))
	require.Equal(t, 4, ClassicPrefillReplicas(5000, 3000, interval, 0.5, fixedPrefill(40000), 1, 1), "3.125 -> 4")
	// d_corr <= 0 uses the raw ITL target, no crash; d_corr 2 halves it.
	var itl float64
	for _, corr := range []float64{0, -1} {
		ClassicDecodeReplicas(60, 3000, 150, interval, 10, corr, recordingDecode{&itl}, 1, 1)
		require.Equal(t, 10.0, itl, "d_corr %v", corr)
	}
	ClassicDecodeReplicas(60, 3000, 150, interval, 10, 2, recordingDecode{&itl}, 1, 1)
	require.Equal(t, 5.0, itl)
	// Multi-GPU: 2 GPUs per prefill, 4 per decode replica, N=20 -> (1, 1).
	p = ClassicPrefillReplicas(20, 3000, interval, 1, fixedPrefill(40000), 2, 1)
	d = ClassicDecodeReplicas(20, 3000, 150, interval, 10, 1, fixedDecode(5000), 4, 1)
	require.Equal(t, [2]int{1, 1}, [2]int{p, d})
	// "Complex" budget: 2-GPU replicas, budget 5, N=100 at 10000 / 1000 tok/s/GPU.
	p = ClassicPrefillReplicas(100, 3000, interval, 1, fixedPrefill(10000), 2, 1)
	d = ClassicDecodeReplicas(100, 3000, 150, interval, 10, 1, fixedDecode(1000), 2, 1)
	p, d = ClassicBudget(p, d, 2, 2, 1, 5)
	require.Equal(t, [2]int{1, 1}, [2]int{p, d})
	require.LessOrEqual(t, p*2+d*2, 5)
	// Python's evaluation order: 966 requests × 1000 tokens / 60 s / 100 tok/s/GPU is exactly
	// 161 replicas in Python (966*1000/60/100), while 966/60 first, then × 1000 / 100 gives
	// 161.00000000000003, one replica more.
	require.Equal(t, 161, ClassicDecodeReplicas(966, 3000, 1000, interval, 10, 1, fixedDecode(100), 1, 1))
	n, T := 966.0, interval // variables: Go would fold constants exactly
	require.Equal(t, 162, pyCeil(n/T*1000/100), "the other order really differs")
}

// ClassicBudget (the classic GPU budget): proportional shrink with decode taking the rest.
func TestClassicBudget(t *testing.T) {
	for _, tt := range []struct {
		p, d, pGPU, dGPU, minEp, budget, wantP, wantD int
	}{
		{8, 8, 1, 1, 1, 10, 5, 5},  // scale 10/16: p = floor(5), decode takes 10 - 5
		{8, 8, 1, 1, 1, 1, 0, 0},   // budget below the minimum footprint
		{3, 9, 2, 1, 1, 10, 2, 6},  // scale 10/15: p = floor(3*0.666…) = 2 (≤ (10-1)//2), d = 10 - 4
		{10, 2, 1, 4, 1, 12, 6, 1}, // scale 12/18: p = floor(6.67) = 6, d = floor((12-6)/4) = 1
		{4, 4, 2, 2, 1, 100, 4, 4}, // within budget: unchanged
		{4, 4, 2, 2, 1, -1, 4, 4},  // budget disabled
	} {
		p, d := ClassicBudget(tt.p, tt.d, tt.pGPU, tt.dGPU, tt.minEp, tt.budget)
		require.Equal(t, [2]int{tt.wantP, tt.wantD}, [2]int{p, d}, "%+v", tt)
		if tt.budget >= 0 && tt.wantP+tt.wantD > 0 {
			require.LessOrEqual(t, p*tt.pGPU+d*tt.dGPU, tt.budget)
		}
	}
}

func TestDecisionAcknowledged(t *testing.T) {
	id := func(v int64) *int64 { return &v }
	require.True(t, DecisionAcknowledged(-1, nil))
	require.False(t, DecisionAcknowledged(3, nil))
	require.False(t, DecisionAcknowledged(3, id(2)))
	require.True(t, DecisionAcknowledged(3, id(3)))
	require.True(t, DecisionAcknowledged(3, id(4)))
}
