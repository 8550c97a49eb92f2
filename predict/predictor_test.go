package predict

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// allOptions are every kind, raw and log1p (log1p is a no-op for constant).
func allOptions() []Options {
	var out []Options
	for _, k := range Kinds {
		out = append(out, Options{Kind: k}, Options{Kind: k, Log1p: true})
	}
	return out
}

func name(o Options) string {
	if o.Log1p {
		return string(o.Kind) + "+log1p"
	}
	return string(o.Kind)
}

func TestOptionsDefaultsAndValidate(t *testing.T) {
	d := Options{Kind: ARIMA}.WithDefaults()
	require.Equal(t, Options{
		Kind: ARIMA, ProphetWindow: 50, StepSeconds: 180, KalmanQLevel: 1, KalmanQTrend: 0.1,
		KalmanR: 10, KalmanMinPoints: 5, MaxHistory: 256,
	}, d)
	require.NoError(t, d.Validate())

	for _, tc := range []struct {
		name string
		o    Options
		want []string
	}{
		{"unknown kind", Options{Kind: "lstm"}, []string{`load_predictor "lstm"`}},
		{"empty kind", Options{}, []string{`load_predictor ""`}},
		{"small window", Options{Kind: Prophet, ProphetWindow: 3}, []string{"prophet_window_size must be >= 5"}},
		{"negative noise", Options{Kind: Kalman, KalmanR: -1, KalmanQLevel: math.NaN()}, []string{"kalman_q_level", "kalman_r"}},
		{"negative min points", Options{Kind: Kalman, KalmanMinPoints: -2}, []string{"kalman_min_points"}},
		{"history below window", Options{Kind: Prophet, ProphetWindow: 300}, []string{"max history (256) must be >= prophet_window_size (300)"}},
		{"history too large", Options{Kind: Constant, MaxHistory: 1 << 20}, []string{"max history must be in [5, 4096]"}},
		{"bad step", Options{Kind: Prophet, StepSeconds: math.Inf(1)}, []string{"step seconds"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.WithDefaults().Validate()
			require.Error(t, err)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
			_, err = New(tc.o)
			require.Error(t, err)
		})
	}
}

func TestSharedRules(t *testing.T) {
	for _, o := range allOptions() {
		t.Run(name(o), func(t *testing.T) {
			p, err := New(o)
			require.NoError(t, err)
			f, err := p.Predict()
			require.NoError(t, err)
			require.Equal(t, Forecast{Value: 0, Fallback: "no data"}, f)
			require.Zero(t, p.LastValue())

			// Leading zeros, NaN and ±Inf (-> 0) are dropped while idle.
			for _, v := range []float64{0, math.NaN(), math.Inf(1), math.Inf(-1), 0} {
				p.Add(v)
			}
			require.Empty(t, p.State().Values)
			p.Add(7)
			p.Add(math.NaN()) // now stored as 0
			p.Add(0)
			require.Equal(t, []float64{7, 0, 0}, p.State().Values)
			require.Zero(t, p.LastValue())

			// ResetIdleSkip drops leading zeros again, keeping the buffer.
			p.ResetIdleSkip()
			p.Add(0)
			p.Add(math.Inf(1))
			require.Equal(t, []float64{7, 0, 0}, p.State().Values)
			p.Add(-3) // a non-zero value (even negative) ends the idle period
			p.Add(0)
			require.Equal(t, []float64{7, 0, 0, -3, 0}, p.State().Values)

			f, err = p.Predict()
			require.NoError(t, err)
			require.GreaterOrEqual(t, f.Value, 0.0)
			require.False(t, math.IsNaN(f.Value) || math.IsInf(f.Value, 0))
		})
	}
}

func TestConstant(t *testing.T) {
	p, err := New(Options{Kind: Constant})
	require.NoError(t, err)
	for _, v := range []float64{0, 0, 5, 9, 4} {
		p.Add(v)
	}
	f, err := p.Predict()
	require.NoError(t, err)
	require.Equal(t, Forecast{Value: 4}, f)
	p.Add(-2)
	f, err = p.Predict()
	require.NoError(t, err)
	require.Equal(t, Forecast{Value: 0}, f, "clamped at 0")
	require.Equal(t, -2.0, p.LastValue())
}

func TestMaxHistory(t *testing.T) {
	p, err := New(Options{Kind: Constant, MaxHistory: 5})
	require.NoError(t, err)
	for i := 1; i <= 9; i++ {
		p.Add(float64(i))
	}
	s := p.State()
	require.Equal(t, []float64{5, 6, 7, 8, 9}, s.Values)
	require.Equal(t, int64(9), s.Stored)
}

// randomSeries has idle runs, spikes, non-finite values and noise, like request counts;
// with ar set, it is a leading idle period then a trend, a cycle and autocorrelated noise
// (so ARIMA selects non-trivial orders).
func randomSeries(rng *rand.Rand, n int, ar bool) []float64 {
	out := make([]float64, n)
	level := 50 + 100*rng.Float64()
	if ar {
		e := 0.0
		for i := range out {
			e = 0.85*e + 10*rng.NormFloat64()
			out[i] = math.Round(200 + 2*float64(i) + e + 30*math.Sin(float64(i)/3))
			if i < 3 {
				out[i] = 0
			}
		}
		return out
	}
	for i := range out {
		switch r := rng.Float64(); {
		case r < 0.08:
			out[i] = 0
		case r < 0.10:
			out[i] = math.NaN()
		case r < 0.11:
			out[i] = math.Inf(1)
		default:
			level = math.Max(1, level+10*rng.NormFloat64())
			out[i] = math.Round(level + 5*rng.NormFloat64()*math.Sin(float64(i)/4))
		}
	}
	return out
}

func roundTrip(t *testing.T, o Options, p Predictor) Predictor {
	t.Helper()
	b, err := json.Marshal(p.State())
	require.NoError(t, err)
	var s State
	require.NoError(t, json.Unmarshal(b, &s))
	q, err := Restore(o, s)
	require.NoError(t, err)
	b2, err := json.Marshal(q.State())
	require.NoError(t, err)
	require.Equal(t, string(b), string(b2), "state round-trips to the same JSON")
	return q
}

// Property: a predictor serialised to JSON and restored after every step gives bit-identical
// forecasts to one that never was.
func TestStateRoundTripIsBitIdentical(t *testing.T) {
	for _, o := range allOptions() {
		t.Run(name(o), func(t *testing.T) {
			o := o
			o.MaxHistory = 40 // exercise trimming
			o.ProphetWindow = 20
			for seed := range uint64(3) {
				rng := rand.New(rand.NewPCG(seed, 99))
				series := randomSeries(rng, 90, seed > 0)
				first := []int{0, 25, 38}[seed] // a late first fit gives ARIMA richer orders
				a, err := New(o)
				require.NoError(t, err)
				b, err := New(o)
				require.NoError(t, err)
				for i, v := range series {
					a.Add(v)
					b.Add(v)
					b = roundTrip(t, o, b)
					if i == 45 {
						a.ResetIdleSkip()
						b.ResetIdleSkip()
					}
					if rng.Float64() < 0.7 && i >= first {
						fa, err := a.Predict()
						require.NoError(t, err)
						fb, err := b.Predict()
						require.NoError(t, err)
						require.Equal(t, math.Float64bits(fa.Value), math.Float64bits(fb.Value), "seed %d step %d: %v vs %v", seed, i, fa, fb)
						require.Equal(t, fa.Fallback, fb.Fallback)
						b = roundTrip(t, o, b)
					}
				}
			}
		})
	}
}

func TestStateSizeStaysSmall(t *testing.T) {
	for _, o := range allOptions() {
		p, err := New(o)
		require.NoError(t, err)
		rng := rand.New(rand.NewPCG(5, 6))
		for range 400 {
			p.Add(2000 + 500*rng.NormFloat64()) // ISL-like values with many digits
		}
		_, err = p.Predict()
		require.NoError(t, err)
		b, err := json.Marshal(p.State())
		require.NoError(t, err)
		require.Less(t, len(b), 6<<10, "%s: %d bytes", name(o), len(b))
	}
}

func TestRestoreRejectsMismatches(t *testing.T) {
	p, err := New(Options{Kind: Kalman})
	require.NoError(t, err)
	for _, v := range []float64{3, 4, 5} {
		p.Add(v)
	}
	s := p.State()
	for _, tc := range []struct {
		name string
		o    Options
		s    func(State) State
		want string
	}{
		{"kind", Options{Kind: ARIMA}, func(s State) State { return s }, `state is for predictor "kalman"`},
		{"version", Options{Kind: Kalman}, func(s State) State { s.Version = 9; return s }, "state version 9"},
		{"stored below values", Options{Kind: Kalman}, func(s State) State { s.Stored = 1; return s }, "stored count 1"},
		{"missing filter", Options{Kind: Kalman}, func(s State) State { s.Kalman = nil; return s }, "missing its filter"},
		{"non-finite filter", Options{Kind: Kalman}, func(s State) State {
			k := *s.Kalman
			k.P[0][1] = math.Inf(1)
			s.Kalman = &k
			return s
		}, "not finite"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Restore(tc.o, tc.s(s))
			require.ErrorContains(t, err, tc.want)
		})
	}
	_, err = Restore(Options{Kind: ARIMA}, State{Version: StateVersion, Kind: ARIMA, Values: []float64{1, 2}, Stored: 2,
		ARIMA: &ARIMAState{Model: &ARIMAModel{P: 2, Q: 1, Params: []float64{0.1}}}})
	require.ErrorContains(t, err, "needs 3 parameters")
	_, err = Restore(Options{Kind: ARIMA, Log1p: true}, State{Version: StateVersion, Kind: ARIMA, ARIMA: &ARIMAState{}})
	require.ErrorContains(t, err, "raw mode")
	_, err = Restore(Options{Kind: Constant}, State{Version: StateVersion, Kind: Constant, Kalman: &KalmanState{}})
	require.ErrorContains(t, err, "carries another predictor's model")
}

// TestRestoreTrimsToALoweredMaxHistory checks a state longer than the options' max history
// (the operator lowered load_predictor_history_size) keeps its newest values.
func TestRestoreTrimsToALoweredMaxHistory(t *testing.T) {
	for _, kind := range []Kind{Constant, ARIMA, Kalman, Prophet} {
		t.Run(string(kind), func(t *testing.T) {
			p, err := New(Options{Kind: kind})
			require.NoError(t, err)
			for i := 1; i <= 12; i++ {
				p.Add(float64(i))
			}
			r, err := Restore(Options{Kind: kind, MaxHistory: 5, ProphetWindow: 5, KalmanMinPoints: 5}, p.State())
			require.NoError(t, err)
			require.Equal(t, []float64{8, 9, 10, 11, 12}, r.State().Values)
			_, err = r.Predict()
			require.NoError(t, err)
		})
	}
}

func ExampleNew() {
	p, err := New(Options{Kind: Kalman})
	if err != nil {
		panic(err)
	}
	for _, v := range []float64{0, 0, 100, 80, 60, 40, 20} { // the leading zeros are skipped
		p.Add(v)
	}
	f, _ := p.Predict()
	fmt.Printf("%.3f %q\n", f.Value, f.Fallback)
	// Output: 0.104 ""
}

func TestBacktest_HandComputed(t *testing.T) {
	// The constant predictor forecasts the last value: errors 2 (of 2→4), 2 (4→2), 2 (2→0).
	r, err := Backtest(Options{Kind: Constant}, []float64{2, 4, 2, 0})
	require.NoError(t, err)
	require.Equal(t, 3, r.Intervals)
	require.Equal(t, 2, r.Scored, "the actual 0 is not in the MAPE")
	require.NotNil(t, r.MAPEPct)
	require.InDelta(t, 100*(2.0/4+2.0/2)/2, *r.MAPEPct, 1e-12)
	require.InDelta(t, 2.0, r.MAE, 1e-12)

	r, err = Backtest(Options{Kind: Constant}, []float64{0, 0})
	require.NoError(t, err)
	require.Nil(t, r.MAPEPct)

	_, err = Backtest(Options{Kind: "bogus"}, []float64{1})
	require.Error(t, err)
}
