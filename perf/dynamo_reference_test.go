package perf

import (
	"encoding/json"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// dynamoReference is what Dynamo's own interpolators (scipy) answer on the H200 profile,
// written by testdata/gen_dynamo_reference.py.
type dynamoReference struct {
	Prefill []struct {
		ISL        float64 `json:"isl"`
		TTFTMs     float64 `json:"ttft_ms"`
		ThptPerGPU float64 `json:"thpt_per_gpu"`
	} `json:"prefill"`
	FindBest []struct {
		ITLTarget  float64 `json:"itl_target_ms"`
		Context    float64 `json:"context"`
		ThptPerGPU float64 `json:"thpt_per_gpu"`
		ITLMs      float64 `json:"itl_ms"`
	} `json:"find_best_throughput_per_gpu"`
}

func loadDynamoReference(t *testing.T) dynamoReference {
	data, err := os.ReadFile("testdata/dynamo_reference_h200.json")
	require.NoError(t, err)
	var ref dynamoReference
	require.NoError(t, json.Unmarshal(data, &ref))
	require.NotEmpty(t, ref.Prefill)
	require.NotEmpty(t, ref.FindBest)
	return ref
}

// The prefill splines are the same function as scipy's interp1d(kind="cubic").
func TestPrefillAgainstDynamo(t *testing.T) {
	ref := loadDynamoReference(t)
	p := loadH200(t)
	pi, err := NewPrefillInterpolator(p.Prefill)
	require.NoError(t, err)
	for _, r := range ref.Prefill {
		require.InEpsilon(t, r.TTFTMs, pi.TTFTMs(r.ISL), 1e-9, "TTFT at ISL %v", r.ISL)
		require.InEpsilon(t, r.ThptPerGPU, pi.ThroughputPerGPU(r.ISL), 1e-9, "throughput at ISL %v", r.ISL)
	}
}

// TestDecodeAgainstDynamoGrid measures FindBestThroughputPerGPU against Dynamo's grid
// (cubic Clough–Tocher there, linear on the triangulation here; the same nearest fill).
func TestDecodeAgainstDynamoGrid(t *testing.T) {
	ref := loadDynamoReference(t)
	di, err := NewDecodeInterpolator(loadH200(t).Decode)
	require.NoError(t, err)
	var rel []float64
	var worst float64
	var worstAt [2]float64
	for _, r := range ref.FindBest {
		thpt, itl, _ := di.FindBestThroughputPerGPU(r.ITLTarget, r.Context)
		require.LessOrEqual(t, itl, math.Max(r.ITLTarget, r.ITLMs)+1e-9, "the answer meets the target unless nothing does")
		e := math.Abs(thpt-r.ThptPerGPU) / r.ThptPerGPU
		rel = append(rel, e)
		if e > worst {
			worst, worstAt = e, [2]float64{r.ITLTarget, r.Context}
		}
	}
	slices.Sort(rel)
	q := func(f float64) float64 { return rel[int(f*float64(len(rel)-1))] }
	t.Logf("FindBestThroughputPerGPU vs Dynamo's grid over %d queries: median %.2f%%, p90 %.1f%%, max %.1f%% (ITL %v ms, context %v)",
		len(rel), 100*q(0.5), 100*q(0.9), 100*worst, worstAt[0], worstAt[1])
	require.Less(t, q(0.5), 0.05, "median difference")
	require.Less(t, q(0.9), 0.25, "90th percentile difference")
	thpt, _, _ := di.FindBestThroughputPerGPU(10, 3150)
	require.InEpsilon(t, 4555.68, thpt, 0.02, "Dynamo's grid answers 4555.68 at (10 ms, 3150)")
}
