package profiler

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/internal/openaitest"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/sim/engine"
)

// sourceDir is the measured H200 profile (Dynamo's, bundled) the simulated engines are built from.
const sourceDir = "../perf/testdata/profiles/h200-llama3.1-8b-fp8-tp1"

const testModel = "nvidia/Llama-3.1-8B-Instruct-FP8"

func loadSource(t *testing.T) *perf.Profile {
	t.Helper()
	p, err := perf.LoadProfile(sourceDir)
	require.NoError(t, err)
	return p
}

// startSimEngine serves a simulated engine built from the source profile, scaled to tp GPUs,
// over the OpenAI API and vLLM-style metrics on a loopback HTTP server (the handlers
// `planner engine` serves), and returns its URL.
func startSimEngine(t *testing.T, tp int) string {
	t.Helper()
	timing, err := engine.NewProfileTiming(loadSource(t))
	require.NoError(t, err)
	tt, err := engine.NewTensorParallelTiming(timing, tp)
	require.NoError(t, err)
	cfg := engine.DefaultConfig(engine.RoleAggregated)
	cfg.MaxNumSeqs = 4096 // the profile was measured up to 1573 in flight
	eng, err := engine.New(cfg, tt)
	require.NoError(t, err)
	return openaitest.Serve(t, eng, testModel)
}
