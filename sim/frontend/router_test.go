package frontend

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/sim/engineapi"
	"github.com/llmplanner/planner/sim/loadgen"
	"github.com/llmplanner/planner/sim/router"
)

// aggFrontend is an aggregated frontend routing with mode over two instant engines a0 and a1.
func aggFrontend(t *testing.T, mode router.Mode) *Frontend {
	t.Helper()
	f, err := New(Options{Model: "M", Namespace: "demo", Mode: Aggregated, Router: mode})
	require.NoError(t, err)
	for _, name := range []string{"a0", "a1"} {
		srv := fakeEngine(t, name, 0, nil, new(atomic.Int64))
		require.Equal(t, http.StatusOK, post(t, f, engineapi.PathEngines, engineapi.Registration{Name: name, Role: "aggregated", URL: srv.URL}).Code)
	}
	return f
}

// worker sends one request and returns the engine that served it.
func worker(t *testing.T, f *Frontend, cr loadgen.CompletionRequest) string {
	t.Helper()
	rec := post(t, f, "/v1/completions", cr)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var out loadgen.CompletionResponse
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
	return out.DecodeWorker
}

// kvHitRate reads the KV hit-rate histogram's sum and count.
func kvHitRate(t *testing.T, f *Frontend) (sum float64, count uint64) {
	t.Helper()
	mfs, err := f.Registry().Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == MetricKVHitRate {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleSum(), h.GetSampleCount()
		}
	}
	t.Fatalf("no %s series", MetricKVHitRate)
	return 0, 0
}

func TestFrontendRouterModes(t *testing.T) {
	reqs := []loadgen.CompletionRequest{
		{ISL: 1536, OSL: 1, HashIDs: []uint64{1, 2, 3}},
		{ISL: 1000, OSL: 1, HashIDs: []uint64{7, 8}},
		{ISL: 2048, OSL: 1, HashIDs: []uint64{1, 2, 3, 4}},
		{ISL: 1000, OSL: 1},
	}
	tests := []struct {
		name  string
		mode  router.Mode
		want  []string
		sum   float64
		count uint64
	}{
		// Sequential requests find both engines idle: ties go to a0 unless a1 caches more.
		{"kv", router.KV, []string{"a0", "a0", "a0", "a0"}, 0.75, 4},
		{"least loaded", router.LeastLoaded, []string{"a0", "a0", "a0", "a0"}, 0, 0},
		{"round robin", router.RoundRobin, []string{"a0", "a1", "a0", "a1"}, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := aggFrontend(t, tc.mode)
			var got []string
			for _, cr := range reqs {
				got = append(got, worker(t, f, cr))
			}
			require.Equal(t, tc.want, got)
			sum, count := kvHitRate(t, f)
			require.InDelta(t, tc.sum, sum, 1e-12)
			require.Equal(t, tc.count, count, "only the KV router observes its hit rate")
		})
	}
}

func TestFrontendKVRouterPrefersTheCachingEngine(t *testing.T) {
	f := aggFrontend(t, router.KV)
	// a1 learns blocks 5 and 6 while a0 is busy with a long request in flight.
	f.mu.Lock()
	a0 := f.engines["a0"]
	f.mu.Unlock()
	a0.inflight.Add(1)
	a0.tokens.Add(4000)
	require.Equal(t, "a1", worker(t, f, loadgen.CompletionRequest{ISL: 1024, OSL: 1, HashIDs: []uint64{5, 6}}))
	a0.inflight.Add(-1)
	a0.tokens.Add(-4000)
	// Both idle now: the request sharing a1's prefix goes to a1, one that does not to a0.
	require.Equal(t, "a1", worker(t, f, loadgen.CompletionRequest{ISL: 2048, OSL: 1, HashIDs: []uint64{5, 6, 9, 10}}))
	require.Equal(t, "a0", worker(t, f, loadgen.CompletionRequest{ISL: 2048, OSL: 1, HashIDs: []uint64{11, 12}}))
	sum, count := kvHitRate(t, f)
	require.InDelta(t, 0.5, sum, 1e-12)
	require.Equal(t, uint64(3), count)
}

func TestFrontendRejectsTooManyHashes(t *testing.T) {
	f := aggFrontend(t, router.KV)
	rec := post(t, f, "/v1/completions", loadgen.CompletionRequest{ISL: 600, OSL: 1, HashIDs: []uint64{1, 2, 3}})
	require.Equal(t, http.StatusBadRequest, rec.Code)
	require.Contains(t, rec.Body.String(), "3 hash ids for isl 600: at most 2")
	_, count := kvHitRate(t, f)
	require.Zero(t, count)
	_, err := New(Options{Model: "M", Namespace: "demo", Mode: Aggregated, Router: "random"})
	require.ErrorContains(t, err, `router mode "random"`)
}

func TestKVIndex(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tests := []struct {
		name   string
		ops    func(x *kvIndex)
		hashes []uint64
		at     time.Time
		want   int
	}{
		{"leading run", func(x *kvIndex) { x.add([]uint64{1, 2, 3}, t0) }, []uint64{1, 2, 4}, t0, 2},
		{"within the ttl", func(x *kvIndex) { x.add([]uint64{1, 2}, t0) }, []uint64{1, 2}, t0.Add(time.Minute), 2},
		{"expired after the ttl", func(x *kvIndex) { x.add([]uint64{1, 2}, t0) }, []uint64{1, 2}, t0.Add(time.Minute + time.Second), 0},
		{"routing again refreshes", func(x *kvIndex) {
			x.add([]uint64{1, 2}, t0)
			x.add([]uint64{1}, t0.Add(50*time.Second))
		}, []uint64{1, 2}, t0.Add(90 * time.Second), 1},
		{"bounded: the least recently routed go first", func(x *kvIndex) {
			x.add([]uint64{1, 2, 3}, t0)
			x.add([]uint64{1}, t0)
			x.add([]uint64{4, 5}, t0) // keeps 3 of 4 blocks at most: 2 and 3 go
		}, []uint64{1, 2}, t0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := newKVIndex(time.Minute, 3)
			tc.ops(x)
			require.Equal(t, tc.want, x.match(tc.hashes, tc.at))
			require.LessOrEqual(t, len(x.index), 3)
			require.Equal(t, len(x.index), x.order.Len())
		})
	}
}
