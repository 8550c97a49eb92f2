package perf

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEngineModel_PassTime(t *testing.T) {
	m, err := NewEngineModel(KindAggregated, DefaultRegressionOptions())
	require.NoError(t, err)
	_, ok := m.PassTime(1000, 1, 1000)
	require.False(t, ok, "not ready before its fit")

	// wall = 2 ms + 10 µs per prefill token + 0.1 µs per KV token.
	var fpms []FPM
	for _, x := range [][2]int64{{0, 1000}, {0, 50000}, {2000, 0}, {8000, 0}, {4000, 20000}, {1000, 80000}, {6000, 5000}, {3000, 60000}} {
		for range 10 {
			fpms = append(fpms, FPM{Version: FPMVersion, WallTime: 0.002 + 1e-5*float64(x[0]) + 1e-7*float64(x[1]),
				Scheduled: ScheduledRequests{SumPrefillTokens: x[0], NumPrefillRequests: min(1, x[0]), SumDecodeKVTokens: x[1], NumDecodeRequests: x[1] / 1000}})
		}
	}
	m.Bootstrap(fpms)
	ok, why := m.Ready()
	require.True(t, ok, why)
	v, ok := m.PassTime(3000, 10, 30000)
	require.True(t, ok)
	require.InDelta(t, 0.002+0.03+0.003, v, 1e-6, "prefill tokens and decode KV, as the regression fits them")
	huge, ok := m.PassTime(1<<62, 1<<62, 1<<62)
	require.True(t, ok, "counts are clamped, not overflowed")
	require.InDelta(t, 0.002+1e-5*float64(u32Max)+1e-7*float64(u32Max), huge, 1)
	neg, ok := m.PassTime(-5, -5, -5)
	require.True(t, ok)
	require.InDelta(t, 0.002, neg, 1e-6, "negative counts are zero")
}
