package workflows

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/scaling"
)

// TestRequestRates: the rate gauges divide by the interval the requests were counted over —
// the throughput loop's for Dynamo's policy, the load interval for the ahead policy, which
// counts every tick.
func TestRequestRates(t *testing.T) {
	num := func(v float64) *float64 { return &v }
	dynamo := config.Default()
	dynamo.ThroughputAdjustmentIntervalSeconds, dynamo.LoadAdjustmentIntervalSeconds = 180, 5
	ahead := dynamo
	ahead.OptimizationTarget, ahead.ScalingPolicy = config.TargetSLA, config.PolicyAhead

	obs, pred := requestRates(dynamo, &scaling.Diagnostics{RanThroughput: true, ObservedNumReq: num(360), PredictedNumReq: num(540)})
	require.Equal(t, 2.0, *obs)
	require.Equal(t, 3.0, *pred)
	obs, _ = requestRates(dynamo, &scaling.Diagnostics{ObservedNumReq: num(10)})
	require.Nil(t, obs, "a load-only tick's count is not a throughput observation")

	obs, pred = requestRates(ahead, &scaling.Diagnostics{ObservedNumReq: num(50), PredictedNumReq: num(60)})
	require.Equal(t, 10.0, *obs, "the ahead policy counts over the load interval")
	require.Equal(t, 12.0, *pred)
}
