package predict

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// The §5 vector: observations, observe then predict each step, defaults 1.0/0.1/10.0/5.
var kalmanObs = []float64{100, 80, 60, 40, 20, 10, 0, 0}

func TestKalmanReferenceVectors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		log1p bool
		want  []float64
	}{
		{"clamped", false, []float64{100, 80, 60, 40, 0.104, 0, 0, 0}},
		{"log1p", true, []float64{100, 80, 60, 40, 13.926, 6.439, 0.069, 0.0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(Options{Kind: Kalman, Log1p: tc.log1p})
			require.NoError(t, err)
			for i, z := range kalmanObs {
				p.Add(z)
				f, err := p.Predict()
				require.NoError(t, err)
				require.InDelta(t, tc.want[i], f.Value, 5e-4, "step %d", i)
				require.Equal(t, i < 4, f.Fallback != "", "step %d: min-points gate", i)
				require.GreaterOrEqual(t, f.Value, 0.0)
			}
		})
	}
}

func TestKalmanUnclampedLevel(t *testing.T) {
	want := []float64{0.104, -11.642, -21.241, -23.796}
	p, err := New(Options{Kind: Kalman})
	require.NoError(t, err)
	k := p.(*kalmanPredictor)
	var got []float64
	for i, z := range kalmanObs {
		k.Add(z)
		if i >= 4 {
			got = append(got, math.Round(k.level()*1000)/1000)
		}
	}
	require.Equal(t, want, got)
}

func TestKalmanCachedForecastDoesNotAdvance(t *testing.T) {
	p, err := New(Options{Kind: Kalman})
	require.NoError(t, err)
	for _, z := range []float64{10, 12, 14, 16, 18, 20} {
		p.Add(z)
	}
	a, err := p.Predict()
	require.NoError(t, err)
	for range 3 {
		b, err := p.Predict()
		require.NoError(t, err)
		require.Equal(t, a, b)
	}
	// Predicting before each Add (cached predict step) and only at the end gives the same
	// filter: Add skips its own predict step when one is cached.
	q, err := New(Options{Kind: Kalman})
	require.NoError(t, err)
	r, err := New(Options{Kind: Kalman})
	require.NoError(t, err)
	for _, z := range []float64{5, 7, 6, 9, 11, 10, 12} {
		q.Add(z)
		_, err := q.Predict()
		require.NoError(t, err)
		r.Add(z)
	}
	fq, err := q.Predict()
	require.NoError(t, err)
	fr, err := r.Predict()
	require.NoError(t, err)
	require.Equal(t, fq, fr)
}

func TestKalmanMinPoints(t *testing.T) {
	p, err := New(Options{Kind: Kalman, KalmanMinPoints: 2})
	require.NoError(t, err)
	p.Add(3)
	f, err := p.Predict()
	require.NoError(t, err)
	require.Equal(t, Forecast{Value: 3, Fallback: "fewer than 2 points"}, f)
	p.Add(5)
	f, err = p.Predict()
	require.NoError(t, err)
	require.Empty(t, f.Fallback)
}
