// Package openaitest serves a simulated engine over the OpenAI API and vLLM-style metrics on
// a loopback HTTP server, for tests: the handlers `planner engine --role aggregated` serves.
package openaitest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/sim/engine"
	"github.com/llmplanner/planner/sim/openai"
)

// Serve serves eng as model (context limit 16,384 tokens) until the test ends and returns
// its base URL.
func Serve(t testing.TB, eng *engine.Engine, model string) string {
	t.Helper()
	live := engine.NewLive(eng, engine.LiveOptions{})
	srv, err := openai.New(live, openai.Options{Model: model, MaxModelLen: 16384, BlockSize: eng.Config().BlockSize,
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
