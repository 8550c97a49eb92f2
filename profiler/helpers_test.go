package profiler

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/sim/engine"
	"github.com/llmplanner/planner/sim/openai"
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
	live := engine.NewLive(eng, engine.LiveOptions{})
	srv, err := openai.New(live, openai.Options{Model: testModel, MaxModelLen: 16384, BlockSize: eng.Config().BlockSize,
		CacheBlocks: eng.Config().NumGPUBlocks})
	require.NoError(t, err)
	mux := http.NewServeMux()
	srv.Register(mux)
	mux.Handle("GET /metrics", openai.MetricsHandler(live, eng.Config()))
	hs := httptest.NewServer(mux)
	t.Cleanup(func() {
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = live.Stop(ctx)
	})
	return hs.URL
}
