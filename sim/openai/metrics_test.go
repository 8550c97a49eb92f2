package openai

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/sim/engine"
)

// TestMetricsHandlerPrefixCounters: the prefix-cache counters carry vLLM's exposed names
// (with _total) and count the prompt tokens looked up and found.
func TestMetricsHandlerPrefixCounters(t *testing.T) {
	cfg := engine.DefaultConfig(engine.RoleAggregated)
	cfg.SpeedupRatio = 100
	cfg.EnablePrefixCaching = true
	eng, err := engine.New(cfg, engine.MockerPolynomial())
	require.NoError(t, err)
	live := engine.NewLive(eng, engine.LiveOptions{})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = live.Stop(ctx)
	})
	for _, hashes := range [][]uint64{{1, 2}, {1, 2, 3}} {
		ch, err := live.SubmitWith(len(hashes)*512, 2, engine.SubmitOptions{HashIDs: hashes})
		require.NoError(t, err)
		require.NoError(t, (<-ch).Err)
	}
	rec := httptest.NewRecorder()
	MetricsHandler(live, eng.Config()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(rec.Body)
	require.NoError(t, err)
	value := func(name string) float64 {
		mf, ok := mfs[name]
		require.True(t, ok, "no %s in the exposition", name)
		return mf.GetMetric()[0].GetCounter().GetValue()
	}
	require.Equal(t, float64(512*2+512*3), value(MetricPrefixCacheQueries))
	require.Equal(t, float64(2*512), value(MetricPrefixCacheHits), "the second request found the first's two blocks")
	require.NotContains(t, mfs, "vllm:prefix_cache_hits", "vLLM exposes the counter with _total")
}
