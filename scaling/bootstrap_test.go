package scaling

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
)

func TestProfileBootstrap(t *testing.T) {
	prof, err := perf.LoadProfile("../sim/engine/testdata")
	require.NoError(t, err)
	pre, dec := perf.PrefillBootstrapFPMs(prof.Prefill), perf.DecodeBootstrapFPMs(prof.Decode)
	require.NotEmpty(t, pre)
	require.NotEmpty(t, dec)

	disagg := ProfileBootstrap(prof, config.ModeDisagg)
	require.Equal(t, Bootstrap{PrefillFPMs: pre, DecodeFPMs: dec}, disagg, "disagg: each model its own points")
	agg := ProfileBootstrap(prof, config.ModeAgg)
	require.Empty(t, agg.PrefillFPMs)
	require.Empty(t, agg.DecodeFPMs)
	require.Equal(t, append(append([]perf.FPM(nil), pre...), dec...), agg.AggFPMs, "agg: the one model gets both edges")
	require.Equal(t, Bootstrap{}, ProfileBootstrap(nil, config.ModeAgg))

	// The seeded aggregated model is ready at once (a fit with a negative coefficient would
	// not be).
	cfg := config.Default()
	cfg.Mode, cfg.OptimizationTarget, cfg.Environment = config.ModeAgg, config.TargetSLA, config.EnvVirtual
	cfg.EnableLoadScaling, cfg.EnableThroughputScaling = true, false
	require.NoError(t, cfg.Validate())
	p, err := New(cfg, prof)
	require.NoError(t, err)
	st, err := p.Init(0, agg)
	require.NoError(t, err)
	opts := perf.RegressionOptions{MaxSamples: cfg.MaxNumFPMSamples, MinObservations: cfg.LoadMinObservations, BucketCount: cfg.FPMSampleBucketSize}
	m, err := perf.RestoreEngineModel(perf.KindAggregated, opts, *st.Models.Agg)
	require.NoError(t, err)
	ok, why := m.Ready()
	require.True(t, ok, why)
}
