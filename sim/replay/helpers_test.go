package replay

import (
	"testing"
	"time"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/predict"
	"github.com/stretchr/testify/require"
)

// profile loads the engine package's test profile.
func profile(t testing.TB) *perf.Profile {
	t.Helper()
	p, err := perf.LoadProfile("../engine/testdata")
	require.NoError(t, err)
	return p
}

// loadConfig is an sla-target, load-scaling-only configuration.
func loadConfig() config.Config {
	c := config.Default()
	c.OptimizationTarget = config.TargetSLA
	c.Environment = config.EnvVirtual
	c.EnableLoadScaling = true
	c.EnableThroughputScaling = false
	c.LoadPredictor = config.PredictorConstant
	c.Scheduling.ScaleIntervalSeconds = nil
	return c
}

func loadOptions(t testing.TB) Options {
	return Options{Config: loadConfig(), Profile: profile(t), StartupDelay: 30 * time.Second, InitialPrefill: 1, InitialDecode: 1}
}

// step is a constant-rate segment of a trace: requests every 1/rate seconds in [from, to).
type step struct {
	from, to, rate float64
	isl, osl       int
}

// steps builds a deterministic trace from constant-rate segments.
func steps(ss ...step) []predict.Request {
	var out []predict.Request
	for _, s := range ss {
		n := int((s.to - s.from) * s.rate)
		for i := 0; i < n; i++ {
			out = append(out, predict.Request{Arrival: s.from + float64(i)/s.rate, InputTokens: s.isl, OutputTokens: s.osl})
		}
	}
	return out
}
