package predict

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestProphetChangepoints(t *testing.T) {
	// Prophet: hist_size = floor(0.8 n), n_cp = min(25, hist_size-1), indexes
	// round(linspace(0, hist_size-1, n_cp+1)) without the first, as times i/(n-1).
	idx := func(n int) []int {
		var out []int
		for _, s := range prophetChangepoints(n) {
			out = append(out, int(math.Round(s*float64(n-1))))
		}
		return out
	}
	require.Equal(t, []int{1, 2, 3}, idx(5))
	require.Nil(t, idx(2), "hist_size 1: no changepoints")
	// n=50: hist 40, linspace(0, 39, 26) = 0, 1.56, 3.12, ... rounded half to even.
	require.Equal(t, []int{2, 3, 5, 6, 8, 9, 11, 12, 14, 16, 17, 19, 20, 22, 23, 25, 27, 28, 30, 31, 33, 34, 36, 37, 39}, idx(50))
	require.Len(t, idx(200), 25)
}

func TestProphetSeasonalities(t *testing.T) {
	day := secondsPerDay
	require.Empty(t, prophetSeasonalities(49*180, 180))
	require.Equal(t, []seasonality{{period: 1, order: 4}}, prophetSeasonalities(2*day, 3600))
	require.Empty(t, prophetSeasonalities(3*day, day), "daily needs sub-daily steps")
	require.Equal(t, []seasonality{{period: 7, order: 3}, {period: 1, order: 4}}, prophetSeasonalities(14*day, 3600))
	require.Equal(t, []seasonality{{period: 365.25, order: 10}, {period: 7, order: 3}}, prophetSeasonalities(730*day, day))
}

func TestProphetForecasts(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		step float64
		f    func(i int) float64
		tol  float64
	}{
		{"line n=5", 5, 180, func(i int) float64 { return 10 + 2*float64(i) }, 1e-9},
		{"line n=50", 50, 180, func(i int) float64 { return 10 + 2*float64(i) }, 1e-9},
		{"constant", 20, 60, func(int) float64 { return 7 }, 1e-9},
		// Hourly points over 49 hours: daily seasonality is on and fits a pure daily cycle.
		{"daily cycle", 50, 3600, func(i int) float64 { return 100 + 30*math.Sin(2*math.Pi*float64(i)/24) }, 1e-6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y := make([]float64, tc.n)
			for i := range y {
				y[i] = tc.f(i)
			}
			got, err := prophetForecast(y, 0, tc.step)
			require.NoError(t, err)
			require.InDelta(t, tc.f(tc.n), got, tc.tol)
		})
	}
	// A slope change in the first 80% of the window is followed by the trend.
	y := make([]float64, 50)
	for i := range y {
		y[i] = 100
		if i > 20 {
			y[i] = 100 + 5*float64(i-20)
		}
	}
	got, err := prophetForecast(y, 0, 180)
	require.NoError(t, err)
	require.InDelta(t, 250, got, 5)
}

func TestProphetPredictor(t *testing.T) {
	p, err := New(Options{Kind: Prophet, ProphetWindow: 10, StepSeconds: 60})
	require.NoError(t, err)
	for _, v := range []float64{0, 0, 1, 2, 3} { // leading zeros are not stored: no step
		p.Add(v)
	}
	f, err := p.Predict()
	require.NoError(t, err)
	require.Equal(t, Forecast{Value: 3, Fallback: "fewer than 5 points"}, f)
	for i := 4; i <= 30; i++ {
		p.Add(float64(i))
	}
	f, err = p.Predict()
	require.NoError(t, err)
	require.Empty(t, f.Fallback)
	require.InDelta(t, 31, f.Value, 1e-9, "a line over the last 10 points")
	require.Equal(t, int64(30), p.State().Stored)

	// Log1p mode models log1p(y) and returns expm1 of the forecast.
	q, err := New(Options{Kind: Prophet, Log1p: true})
	require.NoError(t, err)
	for i := range 12 {
		q.Add(math.Expm1(0.5 + 0.1*float64(i)))
	}
	f, err = q.Predict()
	require.NoError(t, err)
	require.InDelta(t, math.Expm1(0.5+0.1*12), f.Value, 1e-6)

	// Falling series: clamped at 0.
	r, err := New(Options{Kind: Prophet})
	require.NoError(t, err)
	for _, v := range []float64{50, 40, 30, 20, 10, 1} {
		r.Add(v)
	}
	f, err = r.Predict()
	require.NoError(t, err)
	require.Equal(t, Forecast{Value: 0}, f)
}

func TestProphetTimestampsFollowStoredSteps(t *testing.T) {
	// With hourly steps, the daily seasonality phase depends on the step counter: a series
	// whose steps are shifted by idle (dropped) points must fit the same model as the
	// unshifted one, while stored zeros after activity do advance the counter.
	mk := func(lead int) Predictor {
		p, err := New(Options{Kind: Prophet, StepSeconds: 3600})
		require.NoError(t, err)
		for range lead {
			p.Add(0)
		}
		for i := range 50 {
			p.Add(100 + 30*math.Sin(2*math.Pi*float64(i)/24))
		}
		return p
	}
	a, b := mk(0), mk(7)
	fa, err := a.Predict()
	require.NoError(t, err)
	fb, err := b.Predict()
	require.NoError(t, err)
	require.Equal(t, fa, fb)
	require.Equal(t, int64(50), b.State().Stored)
}
