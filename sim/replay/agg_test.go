package replay

import (
	"context"
	"testing"
	"time"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/predict"
	"github.com/stretchr/testify/require"
)

// aggConfig is loadConfig in mode agg.
func aggConfig() config.Config {
	c := loadConfig()
	c.Mode = config.ModeAgg
	return c
}

func aggOptions(t testing.TB, engines int) Options {
	return Options{Config: aggConfig(), Profile: profile(t), StartupDelay: 30 * time.Second, InitialDecode: engines}
}

func TestRun_StaticAggServesLightLoadWithinSLA(t *testing.T) {
	tests := []struct {
		name    string
		engines int
		reqs    []predict.Request
	}{
		{name: "one engine, short prompts", engines: 1, reqs: steps(step{0, 300, 0.5, 1000, 100})},
		{name: "two engines, long prompts", engines: 2, reqs: steps(step{0, 300, 1, 3000, 50})},
		{name: "single-token outputs", engines: 1, reqs: steps(step{0, 120, 1, 500, 1})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := aggOptions(t, tc.engines)
			o.Static = true
			res, err := Run(tc.reqs, o)
			require.NoError(t, err)
			require.Equal(t, len(tc.reqs), res.Finished)
			require.InDelta(t, 1.0, res.Goodput, 1e-12)
			require.Zero(t, res.PrefillGPUSeconds, "agg has no prefill pool")
			require.InDelta(t, float64(tc.engines)*res.Duration, res.DecodeGPUSeconds, 1e-6)
			require.InDelta(t, res.DecodeGPUSeconds, res.GPUSeconds, 1e-9)
			for _, r := range res.Requests {
				require.True(t, r.Finished)
				require.Greater(t, r.TTFTMs, 0.0)
				require.GreaterOrEqual(t, r.Finish, r.FirstToken)
				if r.OSL > 1 {
					require.Greater(t, r.ITLMs, 0.0)
				} else {
					require.Zero(t, r.ITLMs)
					require.Equal(t, r.FirstToken, r.Finish)
				}
			}
			for _, s := range res.Replicas {
				require.Equal(t, PoolCounts{}, s.Prefill)
			}
		})
	}
}

func TestRun_AggPlannerScalesUpUnderLoadAndBackDown(t *testing.T) {
	res, err := Run(loadStep(), aggOptions(t, 1))
	require.NoError(t, err)
	require.Equal(t, len(res.Requests), res.Finished)
	peak, final := 0, -1
	for _, e := range res.Timeline {
		require.Equal(t, PoolCounts{}, e.Prefill)
		require.Nil(t, e.Decision.Prefill, "at %v: agg decides the one (decode) pool only", e.At)
		peak = max(peak, e.Decode.Ready)
		final = e.Decode.Ready + e.Decode.Starting
	}
	require.Greater(t, peak, 1, "the load step scales the aggregated pool up")
	require.Less(t, final, peak, "and back down after it")
	require.Positive(t, res.ScaleActions)
	require.Zero(t, res.PrefillGPUSeconds)
	t.Logf("peak %d final %d actions %d goodput %.3f", peak, final, res.ScaleActions, res.Goodput)
}

func TestRun_AggInvalidOptions(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Options)
		want string
	}{
		{name: "prefill engines in agg", edit: func(o *Options) { o.InitialPrefill = 1 }, want: "no prefill pool"},
		{name: "prefill mode", edit: func(o *Options) { o.Config.Mode = config.ModePrefill }, want: `mode "prefill"`},
		{name: "negative engines", edit: func(o *Options) { o.InitialDecode = -1 }, want: "negative initial replicas"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := aggOptions(t, 1)
			tc.edit(&o)
			_, err := Run(steps(step{0, 10, 1, 100, 10}), o)
			require.ErrorIs(t, err, ErrInvalidOptions)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestStepper_AggReportsOneDecodePoolAndRefusesPrefill(t *testing.T) {
	now := 0.0
	st, err := NewStepper(steps(step{0, 60, 2, 1000, 20}), aggOptions(t, 1), func() float64 { return now })
	require.NoError(t, err)
	inv, err := st.Inventory(context.Background())
	require.NoError(t, err)
	require.Nil(t, inv.ReadyPrefill, "agg has no prefill pool")
	require.Nil(t, inv.Capabilities.Prefill)
	require.Equal(t, 1, *inv.ReadyDecode)
	require.Positive(t, inv.Capabilities.Decode.MaxNumBatchedTokens, "the agg decisions need the chunk size")

	one, three := 1, 3
	err = st.Apply(context.Background(), 1, connectors.Targets{Prefill: &one, Decode: &three})
	require.ErrorIs(t, err, connectors.ErrInvalidTargets)
	require.Empty(t, st.Applied(), "a refused decision changes nothing")

	now = 10
	require.NoError(t, st.Apply(context.Background(), 1, connectors.Targets{Decode: &three}))
	inv, err = st.Inventory(context.Background())
	require.NoError(t, err)
	require.Equal(t, 3, *inv.ExpectedDecode)
	require.True(t, inv.DecodeScalingInProgress, "two aggregated engines are starting")
	fpm, err := st.ReadFPM(time.Time{})
	require.NoError(t, err)
	require.Empty(t, fpm.Prefill)
	require.Len(t, fpm.Decode, 1, "the ready aggregated engine's FPM, as decode")
}

func TestOracleAndBestStatic_Agg(t *testing.T) {
	reqs := steps(step{0, 120, 1, 3000, 50}, step{120, 240, 30, 3000, 50}, step{240, 360, 1, 3000, 50})
	o := OracleOptions{Options: aggOptions(t, 0), Target: 0.9, MaxDecode: 8, MaxPrefill: 8, Interval: time.Minute}
	o.Config.TTFTMs, o.Config.ITLMs = 1000, 50
	bs, err := BestStatic(reqs, o)
	require.NoError(t, err)
	require.True(t, bs.Feasible)
	require.Zero(t, bs.Prefill, "agg: no prefill pool")
	require.Greater(t, bs.Decode, 1, "the step needs more than one aggregated engine")
	require.GreaterOrEqual(t, bs.Goodput, 0.9)
	require.Zero(t, bs.PrefillGPUSeconds)

	or, err := Oracle(reqs, o)
	require.NoError(t, err)
	require.Zero(t, or.Infeasible)
	lo, hi := or.Schedule[0].Decode, 0
	for _, s := range or.Schedule {
		require.Zero(t, s.Prefill)
		lo, hi = min(lo, s.Decode), max(hi, s.Decode)
	}
	require.Less(t, lo, hi, "the oracle follows the step")
	require.Less(t, or.GPUSeconds, bs.GPUSeconds)
}
