package frontend

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/sim/engineapi"
	"github.com/llmplanner/planner/sim/loadgen"
)

// fakeEngine answers /v1/generate after a fixed time, or refuses with 503 when draining.
func fakeEngine(t *testing.T, name string, work time.Duration, draining *atomic.Bool, calls *atomic.Int64) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var req engineapi.GenerateRequest
		require.NoError(t, json.NewDecoder(r.Body).Decode(&req))
		if draining != nil && draining.Load() {
			http.Error(w, "engine: draining", http.StatusServiceUnavailable)
			return
		}
		start := time.Now()
		time.Sleep(work)
		resp := engineapi.GenerateResponse{Worker: name, FinishedUnixNano: time.Now().UnixNano()}
		if req.Phase == engineapi.PhasePrefill {
			resp.FirstTokenUnixNano = start.Add(work).UnixNano()
			resp.HandoffDelayMs = 1
		}
		_ = json.NewEncoder(w).Encode(resp)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, h http.Handler, path string, v any) *httptest.ResponseRecorder {
	t.Helper()
	body, err := json.Marshal(v)
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
	return rec
}

func TestFrontendRoutesAndSkipsRefusingEngines(t *testing.T) {
	f, err := New(Options{Model: "M", Namespace: "demo", Mode: Disaggregated})
	require.NoError(t, err)

	// No engine yet: 503 and an error counted.
	rec := post(t, f, "/v1/completions", loadgen.CompletionRequest{ISL: 100, OSL: 4})
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Contains(t, rec.Body.String(), "no routable prefill engine")

	var p0Calls, p1Calls, dCalls atomic.Int64
	var p0Draining atomic.Bool
	p0 := fakeEngine(t, "p0", 20*time.Millisecond, &p0Draining, &p0Calls)
	p1 := fakeEngine(t, "p1", 20*time.Millisecond, nil, &p1Calls)
	d0 := fakeEngine(t, "d0", 30*time.Millisecond, nil, &dCalls)
	for _, reg := range []engineapi.Registration{{Name: "p0", Role: "prefill", URL: p0.URL}, {Name: "p1", Role: "prefill", URL: p1.URL},
		{Name: "d0", Role: "decode", URL: d0.URL}} {
		require.Equal(t, http.StatusOK, post(t, f, engineapi.PathEngines, reg).Code)
	}
	require.Equal(t, http.StatusBadRequest, post(t, f, engineapi.PathEngines, engineapi.Registration{Name: "x", Role: "gpu", URL: "u"}).Code)

	rec = post(t, f, "/v1/completions", loadgen.CompletionRequest{ISL: 100, OSL: 4})
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var out loadgen.CompletionResponse
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
	require.Equal(t, "p0", out.PrefillWorker, "ties go to the first name")
	require.Equal(t, "d0", out.DecodeWorker)
	require.InDelta(t, 20, out.TTFTMs, 15)
	require.Greater(t, out.DurationMs, out.TTFTMs+25, "decode starts after prefill and the hand-off")

	// p0 starts draining without telling the frontend: the request is retried on p1 and p0
	// is no longer routable.
	p0Draining.Store(true)
	rec = post(t, f, "/v1/completions", loadgen.CompletionRequest{ISL: 100, OSL: 4})
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
	require.Equal(t, "p1", out.PrefillWorker)
	for _, e := range f.Engines() {
		if e.Name == "p0" {
			require.False(t, e.Routable)
		}
	}
	calls := p0Calls.Load()
	require.Equal(t, http.StatusOK, post(t, f, "/v1/completions", loadgen.CompletionRequest{ISL: 100, OSL: 1}).Code)
	require.Equal(t, calls, p0Calls.Load(), "a refusing engine gets no more requests")
	require.EqualValues(t, 2, dCalls.Load(), "OSL 1 needs no decode")

	// Metrics: 4 started, 3 succeeded, 1 failed.
	require.Equal(t, 4.0, testutil.ToFloat64(f.metrics.started))
}

// TestFrontend_ISLAtFirstTokenOSLAtCompletion: a disaggregated request's TTFT and ISL are
// observed when its prefill answers (its first token), its OSL only when it completes, as
// Dynamo's frontend observes them.
func TestFrontend_ISLAtFirstTokenOSLAtCompletion(t *testing.T) {
	f, err := New(Options{Model: "M", Namespace: "demo", Mode: Disaggregated})
	require.NoError(t, err)
	var calls atomic.Int64
	p0 := fakeEngine(t, "p0", 0, nil, &calls)
	decoding, release := make(chan struct{}), make(chan struct{})
	d0 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(decoding)
		<-release
		_ = json.NewEncoder(w).Encode(engineapi.GenerateResponse{Worker: "d0", FinishedUnixNano: time.Now().UnixNano()})
	}))
	t.Cleanup(d0.Close)
	for _, reg := range []engineapi.Registration{{Name: "p0", Role: "prefill", URL: p0.URL}, {Name: "d0", Role: "decode", URL: d0.URL}} {
		require.Equal(t, http.StatusOK, post(t, f, engineapi.PathEngines, reg).Code)
	}
	count := func(h prometheus.Histogram) uint64 {
		var m dto.Metric
		require.NoError(t, h.Write(&m))
		return m.GetHistogram().GetSampleCount()
	}
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- post(t, f, "/v1/completions", loadgen.CompletionRequest{ISL: 3000, OSL: 40}) }()
	<-decoding // the first token is out; the request is decoding
	require.Equal(t, uint64(1), count(f.metrics.isl), "the ISL at the first token")
	require.Equal(t, uint64(1), count(f.metrics.ttft), "the TTFT with it")
	require.Zero(t, count(f.metrics.osl), "no OSL before completion")
	close(release)
	require.Equal(t, http.StatusOK, (<-done).Code)
	require.Equal(t, uint64(1), count(f.metrics.osl), "the OSL at completion")
	require.Equal(t, uint64(1), count(f.metrics.isl), "the ISL once")
}
