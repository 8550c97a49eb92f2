package replay

import (
	"testing"
	"time"

	"github.com/llmplanner/planner/config"
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
