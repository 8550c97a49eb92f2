package frontend

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/sim/engineapi"
	"github.com/llmplanner/planner/sim/loadgen"
	"github.com/llmplanner/planner/sim/router"
)

// aggFrontend is an aggregated frontend routing with mode over two instant engines a0 and a1
// that keep a prefix cache when caching is set.
func aggFrontend(t *testing.T, mode router.Mode, caching bool) *Frontend {
	t.Helper()
	f, err := New(Options{Model: "M", Namespace: "demo", Mode: Aggregated, Router: mode})
	require.NoError(t, err)
	for _, name := range []string{"a0", "a1"} {
		srv := fakeEngine(t, name, 0, nil, new(atomic.Int64))
		require.Equal(t, http.StatusOK, post(t, f, engineapi.PathEngines,
			engineapi.Registration{Name: name, Role: "aggregated", URL: srv.URL, PrefixCaching: caching}).Code)
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
		name    string
		mode    router.Mode
		caching bool
		want    []string
		sum     float64
		count   uint64
	}{
		// Sequential requests find both engines idle: ties go to a0 unless a1 caches more.
		{"kv", router.KV, true, []string{"a0", "a0", "a0", "a0"}, 0.75, 4},
		// Engines without a prefix cache cache nothing: every request's hit rate is 0.
		{"kv over engines without a prefix cache", router.KV, false, []string{"a0", "a0", "a0", "a0"}, 0, 4},
		{"least loaded", router.LeastLoaded, true, []string{"a0", "a0", "a0", "a0"}, 0, 0},
		{"round robin", router.RoundRobin, true, []string{"a0", "a1", "a0", "a1"}, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := aggFrontend(t, tc.mode, tc.caching)
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
	f := aggFrontend(t, router.KV, true)
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
	f := aggFrontend(t, router.KV, true)
	rec := post(t, f, "/v1/completions", loadgen.CompletionRequest{ISL: 600, OSL: 1, HashIDs: []uint64{1, 2, 3}})
	require.Equal(t, http.StatusBadRequest, rec.Code)
	require.Contains(t, rec.Body.String(), "3 hash ids for isl 600: at most 2")
	_, count := kvHitRate(t, f)
	require.Zero(t, count)
	// Routed by load, ids hashed in smaller blocks pass to engines without a prefix cache,
	// which ignore them.
	byLoad := aggFrontend(t, router.LeastLoaded, false)
	require.NotEmpty(t, worker(t, byLoad, loadgen.CompletionRequest{ISL: 600, OSL: 1, HashIDs: []uint64{1, 2, 3}}))
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

// switchEngine is an instant aggregated engine that refuses (503) while draining is set and
// rejects the request (400) while rejecting is set.
func switchEngine(t *testing.T, name string, draining, rejecting *atomic.Bool) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case draining.Load():
			http.Error(w, "engine: draining", http.StatusServiceUnavailable)
		case rejecting.Load():
			http.Error(w, "bad request: too long", http.StatusBadRequest)
		default:
			now := time.Now().UnixNano()
			_ = json.NewEncoder(w).Encode(engineapi.GenerateResponse{Worker: name, FirstTokenUnixNano: now, FinishedUnixNano: now})
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestFrontendKVRouterTakesBackRefusedRequests(t *testing.T) {
	f, err := New(Options{Model: "M", Namespace: "demo", Mode: Aggregated, Router: router.KV})
	require.NoError(t, err)
	var draining, rejecting atomic.Bool
	a0 := engineapi.Registration{Name: "a0", Role: "aggregated", URL: switchEngine(t, "a0", &draining, &rejecting), PrefixCaching: true}
	a1 := engineapi.Registration{Name: "a1", Role: "aggregated", URL: switchEngine(t, "a1", new(atomic.Bool), new(atomic.Bool)), PrefixCaching: true}
	for _, reg := range []engineapi.Registration{a0, a1} {
		require.Equal(t, http.StatusOK, post(t, f, engineapi.PathEngines, reg).Code)
	}
	index := func(name string) int {
		f.mu.Lock()
		defer f.mu.Unlock()
		if x := f.engines[name].index; x != nil {
			return len(x.index)
		}
		return 0
	}

	// a0 rejects the request: it caches none of it, and no hit rate is observed.
	rejecting.Store(true)
	rec := post(t, f, "/v1/completions", loadgen.CompletionRequest{ISL: 1024, OSL: 1, HashIDs: []uint64{1, 2}})
	require.Equal(t, http.StatusBadGateway, rec.Code, rec.Body.String())
	require.Zero(t, index("a0"), "the rejected request's blocks are taken back")
	rejecting.Store(false)
	require.Equal(t, "a0", worker(t, f, loadgen.CompletionRequest{ISL: 1536, OSL: 1, HashIDs: []uint64{1, 2, 3}}))
	sum, count := kvHitRate(t, f)
	require.Zero(t, sum, "nothing of the rejected request was cached")
	require.Equal(t, uint64(1), count)

	// a0 refuses (draining): the request goes to a1 and a0's prediction is dropped.
	draining.Store(true)
	require.Equal(t, "a1", worker(t, f, loadgen.CompletionRequest{ISL: 1536, OSL: 1, HashIDs: []uint64{1, 2, 3}}))
	require.Zero(t, index("a0"))
	require.Equal(t, 3, index("a1"))
	draining.Store(false)
	require.Equal(t, http.StatusOK, post(t, f, engineapi.PathEngines, a0).Code, "a0 is back")
	require.Equal(t, "a1", worker(t, f, loadgen.CompletionRequest{ISL: 2048, OSL: 1, HashIDs: []uint64{1, 2, 3, 4}}))
	sum, count = kvHitRate(t, f)
	require.InDelta(t, 0.75, sum, 1e-12, "the first served request on a1 missed, the next found 3 of 4 blocks")
	require.Equal(t, uint64(3), count)
}

func TestFrontendEngineLifecycle(t *testing.T) {
	f, err := New(Options{Model: "M", Namespace: "demo", Mode: Aggregated, Router: router.KV, EngineTTL: time.Second, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	now := time.Unix(1_700_000_000, 0)
	f.now = func() time.Time { return now }
	url := switchEngine(t, "a0", new(atomic.Bool), new(atomic.Bool))
	a0 := engineapi.Registration{Name: "a0", Role: "aggregated", URL: url, PrefixCaching: true, PrefixCacheBlocks: 2}
	require.Equal(t, http.StatusOK, post(t, f, engineapi.PathEngines, a0).Code)
	require.Equal(t, "a0", worker(t, f, loadgen.CompletionRequest{ISL: 2048, OSL: 1, HashIDs: []uint64{1, 2, 3, 4}}))
	f.mu.Lock()
	require.Equal(t, 2, len(f.engines["a0"].index.index), "the prediction is bounded by the engine's cache")
	f.mu.Unlock()

	// a0 misses its heartbeats past the TTL: its prediction is dropped; it comes back empty.
	now = now.Add(2 * time.Second)
	require.Equal(t, http.StatusOK, post(t, f, engineapi.PathEngines, a0).Code)
	require.Equal(t, "a0", worker(t, f, loadgen.CompletionRequest{ISL: 2048, OSL: 1, HashIDs: []uint64{3, 4}}))
	sum, count := kvHitRate(t, f)
	require.Zero(t, sum, "an expired engine's prediction is dropped")
	require.Equal(t, uint64(2), count)

	// Engines are bounded: a new name beyond MaxEngines is refused, a known one is not.
	for i := 1; i < MaxEngines; i++ {
		reg := engineapi.Registration{Name: fmt.Sprintf("e%d", i), Role: "aggregated", URL: url}
		require.Equal(t, http.StatusOK, post(t, f, engineapi.PathEngines, reg).Code)
	}
	rec := post(t, f, engineapi.PathEngines, engineapi.Registration{Name: "one-too-many", Role: "aggregated", URL: url})
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Contains(t, rec.Body.String(), "4096 engines registered")
	require.Len(t, f.Engines(), MaxEngines)
	require.Equal(t, http.StatusOK, post(t, f, engineapi.PathEngines, a0).Code, "a heartbeat of a known engine")

	// Without heartbeats, engines are forgotten and their names make room.
	now = now.Add(ForgetAfterTTLs*time.Second + time.Millisecond)
	require.Equal(t, http.StatusOK, post(t, f, engineapi.PathEngines, engineapi.Registration{Name: "late", Role: "aggregated", URL: url}).Code)
	require.Equal(t, []string{"late"}, func() (names []string) {
		for _, e := range f.Engines() {
			names = append(names, e.Name)
		}
		return names
	}())
}

func TestRegistrationValidate(t *testing.T) {
	tests := []struct {
		name string
		reg  engineapi.Registration
		want string
	}{
		{"ok", engineapi.Registration{Name: "p", Role: "prefill", URL: "u", PrefixCaching: true, PrefixCacheBlocks: 10}, ""},
		{"old engine: no cache fields", engineapi.Registration{Name: "p", Role: "prefill", URL: "u"}, ""},
		{"negative cache", engineapi.Registration{Name: "p", Role: "prefill", URL: "u", PrefixCacheBlocks: -1}, "prefix_cache_blocks -1"},
		{"decode caching", engineapi.Registration{Name: "d", Role: "decode", URL: "u", PrefixCaching: true}, "decode engine keeps no prefix cache"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.reg.Validate()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
	// The wire format: a registration without the new fields decodes as no prefix cache.
	var reg engineapi.Registration
	require.NoError(t, json.Unmarshal([]byte(`{"name":"a","role":"aggregated","url":"u"}`), &reg))
	require.False(t, reg.PrefixCaching)
	require.Zero(t, reg.PrefixCacheBlocks)
}
