package replay

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/sim/loadgen"
)

// BenchmarkRunSinusoidHour replays one hour of Dynamo's rr-5-45 i3000o300 load (about
// 90,000 requests) under Dynamo's default policy (both loops, ARIMA, 180 s / 5 s) with a
// 60 s startup delay: the "one hour of trace in ≤ 10 s" target.
func BenchmarkRunSinusoidHour(b *testing.B) {
	reqs, err := loadgen.Sinusoid(loadgen.SinusoidOptions{DurationS: 3600, MinRPS: 5, MaxRPS: 45, PeriodS: 600, ISL: 3000, OSL: 300, Seed: 1})
	require.NoError(b, err)
	c := config.Default()
	c.OptimizationTarget, c.Environment = config.TargetSLA, config.EnvVirtual
	c.EnableLoadScaling, c.EnableThroughputScaling = true, true
	c.TTFTMs, c.ITLMs, c.MaxGPUBudget = 200, 10, 16
	require.NoError(b, c.Validate())
	o := Options{Config: c, Profile: profile(b), StartupDelay: time.Minute, InitialPrefill: 1, InitialDecode: 1}
	b.ResetTimer()
	for b.Loop() {
		res, err := Run(reqs, o)
		require.NoError(b, err)
		require.Equal(b, len(reqs), res.Finished)
	}
	b.ReportMetric(float64(len(reqs)), "requests")
}
