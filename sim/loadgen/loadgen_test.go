package loadgen

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmplanner/planner/predict"
	"github.com/stretchr/testify/require"
)

func TestSinusoid(t *testing.T) {
	o := SinusoidOptions{DurationS: 1800, MinRPS: 5, MaxRPS: 45, PeriodS: 600, ISL: 3000, OSL: 300, Seed: 1}
	a, err := Sinusoid(o)
	require.NoError(t, err)
	b, err := Sinusoid(o)
	require.NoError(t, err)
	require.Equal(t, a, b, "same seed, same load")
	// The mean rate over whole periods is (min+max)/2 = 25 req/s: 45,000 requests ± Poisson noise.
	require.InDelta(t, 25*1800, len(a), 4*212)
	// The first minute is near the minimum, the minute around t=300 s near the maximum.
	count := func(from, to float64) int {
		n := 0
		for _, r := range a {
			if r.Arrival >= from && r.Arrival < to {
				n++
			}
		}
		return n
	}
	require.Less(t, count(0, 20), 20*8)
	require.Greater(t, count(290, 310), 20*40)
	for _, r := range a {
		require.Equal(t, 3000, r.InputTokens)
		require.Equal(t, 300, r.OutputTokens)
	}
	_, err = Sinusoid(SinusoidOptions{DurationS: 10, MinRPS: 5, MaxRPS: 1, PeriodS: 1, ISL: 1, OSL: 1})
	require.ErrorContains(t, err, "min rate")
}

func TestWindow(t *testing.T) {
	reqs := []predict.Request{{Arrival: 1}, {Arrival: 5}, {Arrival: 9}}
	require.Equal(t, []predict.Request{{Arrival: 0}}, Window(reqs, 5, 4))
	require.Equal(t, []predict.Request{{Arrival: 0}, {Arrival: 4}}, Window(reqs, 5, 0))
}

func TestRunSpeedupAndFailures(t *testing.T) {
	var mu sync.Mutex
	var arrivals []time.Time
	var bad atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req CompletionRequest
		require.NoError(t, json.NewDecoder(r.Body).Decode(&req))
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		mu.Unlock()
		if req.ISL == 13 {
			bad.Add(1)
			http.Error(w, "no ready prefill engine", http.StatusServiceUnavailable)
			return
		}
		_ = json.NewEncoder(w).Encode(CompletionResponse{TTFTMs: 5, DurationMs: 50})
	}))
	defer srv.Close()
	// 2 s of trace at 4x: about 0.5 s of wall time.
	var reqs []predict.Request
	for i := range 20 {
		reqs = append(reqs, predict.Request{Arrival: float64(i) * 0.1, InputTokens: 100 + i, OutputTokens: 10})
	}
	reqs[13].InputTokens = 13
	var results atomic.Int64
	sum, err := Run(context.Background(), reqs, Options{URL: srv.URL, Speedup: 4, OnResult: func(r Result) {
		results.Add(1)
		if r.ISL == 13 {
			require.Contains(t, r.Err, "HTTP 503")
		} else {
			require.Empty(t, r.Err)
			require.Equal(t, 5.0, r.Response.TTFTMs)
		}
	}})
	require.NoError(t, err)
	require.Equal(t, Summary{Sent: 20, Succeeded: 19, Failed: 1, Late: sum.Late, Wall: sum.Wall}, sum)
	require.EqualValues(t, 20, results.Load())
	require.Len(t, arrivals, 20)
	span := arrivals[len(arrivals)-1].Sub(arrivals[0])
	require.InDelta(t, 0.475, span.Seconds(), 0.2, "1.9 s of trace at 4x")

	_, err = Run(context.Background(), reqs, Options{URL: srv.URL, Speedup: 0})
	require.ErrorContains(t, err, "speed-up")
}

func TestFromRates(t *testing.T) {
	o := RatesOptions{Rates: []float64{10, 30}, StepS: 100, DurationS: 200, MeanISL: 300, MeanOSL: 100, MaxTokens: 1000, Seed: 1}
	a, err := FromRates(o)
	require.NoError(t, err)
	b, err := FromRates(o)
	require.NoError(t, err)
	require.Equal(t, a, b, "seeded")
	// The rate moves from 10 to 30 over the first 100 s and stays at 30: 2,000 + 3,000 requests expected.
	require.InDelta(t, 5000, len(a), 250)
	var first, isl float64
	for _, r := range a {
		if r.Arrival < 100 {
			first++
		}
		isl += float64(r.InputTokens)
		require.GreaterOrEqual(t, r.InputTokens, 1)
		require.GreaterOrEqual(t, r.OutputTokens, 1)
		require.LessOrEqual(t, r.InputTokens+r.OutputTokens, 1000)
		require.Less(t, r.Arrival, 200.0)
	}
	require.InDelta(t, 2000, first, 150)
	require.InDelta(t, 300, isl/float64(len(a)), 30)

	for name, bad := range map[string]RatesOptions{
		"no rates":      {StepS: 1, DurationS: 1, MeanISL: 1, MeanOSL: 1, MaxTokens: 2},
		"negative rate": {Rates: []float64{-1}, StepS: 1, DurationS: 1, MeanISL: 1, MeanOSL: 1, MaxTokens: 2},
		"absurd length": {Rates: []float64{1}, StepS: 1, DurationS: 1e9, MeanISL: 1, MeanOSL: 1, MaxTokens: 2},
		"tiny context":  {Rates: []float64{1}, StepS: 1, DurationS: 1, MeanISL: 1, MeanOSL: 1, MaxTokens: 1},
	} {
		_, err := FromRates(bad)
		require.Error(t, err, name)
	}
}
