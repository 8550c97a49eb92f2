package perf

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func prefillFPM(tokens int64, wall float64) FPM {
	return FPM{Version: FPMVersion, WorkerID: "w", WallTime: wall,
		Scheduled: ScheduledRequests{NumPrefillRequests: 1, SumPrefillTokens: tokens}}
}

func decodeFPM(requests, kv int64, wall float64) FPM {
	return FPM{Version: FPMVersion, WorkerID: "w", WallTime: wall,
		Scheduled: ScheduledRequests{NumDecodeRequests: requests, SumDecodeKVTokens: kv}}
}

// trainedG2Prefill is the §4.4 prefill vector's model: wall = 0.001*t + 0.002.
func trainedG2Prefill(t *testing.T) *PrefillRegressionModel {
	m, err := NewPrefillRegressionModel(DefaultRegressionOptions())
	require.NoError(t, err)
	for _, tok := range []int64{500, 1000, 1500, 2000, 2500} {
		f := prefillFPM(tok, 0.001*float64(tok)+0.002)
		m.Observe(&f)
	}
	return m
}

// trainedG2Decode is the §4.4 decode vector's model: collinear features, wall = 1e-5*kv + 0.001.
func trainedG2Decode(t *testing.T) *DecodeRegressionModel {
	m, err := NewDecodeRegressionModel(DefaultRegressionOptions())
	require.NoError(t, err)
	for _, p := range [][2]int64{{5, 5000}, {10, 10000}, {20, 20000}, {30, 30000}, {40, 40000}} {
		f := decodeFPM(p[0], p[1], 1e-5*float64(p[1])+0.001)
		m.Observe(&f)
	}
	return m
}

func TestG2PrefillVectors(t *testing.T) {
	m := trainedG2Prefill(t)
	coef, intercept, ok := m.Reg.Coefficients()
	require.True(t, ok)
	require.InDelta(t, 0.001, coef[0], 1e-12)
	require.InDelta(t, 0.002, intercept, 1e-12)
	require.InDelta(t, 1500, m.AvgISL(), 1e-9)

	for _, tt := range []struct{ queued, want float64 }{{0, 1.502}, {5000, 6.508}, {10000, 11.512}} {
		got, ok := m.EstimateNextTTFT(tt.queued, 2048, 0)
		require.True(t, ok)
		require.InDelta(t, tt.want, got, 1e-9, "queued %v", tt.queued)
	}
	rps, ttft := m.FindBestEnginePrefillRPS(500, 1000, 0)
	require.InDelta(t, 0.998004, rps, 1e-6)
	require.InDelta(t, 1002, ttft, 1e-9)

	// Chunked: ISL 5000 with mbt 2048 = 2 full chunks + 904.
	rps, ttft = m.FindBestEnginePrefillRPS(500, 5000, 2048)
	want := 2*(0.001*2048+0.002) + (0.001*904 + 0.002)
	require.InDelta(t, want*1000, ttft, 1e-9)
	require.InDelta(t, 1/want, rps, 1e-12)

	// A prefix-cache hit rate discounts the work; it is clamped at 95%.
	got, _ := m.EstimateNextTTFT(500, 2048, 0.5)
	require.InDelta(t, 0.001*1000+0.002, got, 1e-12)
	got, _ = m.EstimateNextTTFT(500, 2048, 2)
	require.InDelta(t, 0.001*100+0.002, got, 1e-12)
	got, _ = m.EstimateNextTTFT(500, 2048, math.NaN())
	require.InDelta(t, 0.001*2000+0.002, got, 1e-12)
}

func TestG2DecodeVectors(t *testing.T) {
	m := trainedG2Decode(t)
	coef, intercept, ok := m.Reg.Coefficients()
	require.True(t, ok)
	require.InDelta(t, 9.99999e-9, coef[0], 1e-13, "minimum-norm solution for collinear features")
	require.InDelta(t, 9.99999e-6, coef[1], 1e-11)
	require.InDelta(t, 0.001, intercept, 1e-12)

	rps, itl := m.FindBestEngineDecodeRPS(50, 1000, 150, 0, 0)
	require.InDelta(t, 41, itl, 1e-6, "batch 4: kv cap 40000/1000 = 40")
	require.InDelta(t, 0.650407, rps, 1e-6)

	// When even batch 1 misses the target, batch 1 is returned.
	rps, itl = m.FindBestEngineDecodeRPS(5, 1000, 150, 0, 0)
	require.InDelta(t, 11, itl, 1e-6)
	require.InDelta(t, 1/(150*0.011), rps, 1e-6)

	// Unfitted or invalid input: zero rate.
	empty, err := NewDecodeRegressionModel(DefaultRegressionOptions())
	require.NoError(t, err)
	rps, _ = empty.FindBestEngineDecodeRPS(50, 1000, 150, 0, 0)
	require.Zero(t, rps)
	rps, _ = m.FindBestEngineDecodeRPS(50, 0, 150, 0, 0)
	require.Zero(t, rps)
}

func TestG2AggCapacity(t *testing.T) {
	m, err := NewAggRegressionModel(DefaultRegressionOptions())
	require.NoError(t, err)
	// wall = 1e-4*prefill + 1e-5*kv + 0.001 on non-collinear points.
	for _, p := range [][2]float64{{0, 1000}, {100, 0}, {200, 3000}, {50, 6000}, {400, 500}, {300, 9000}} {
		f := FPM{Version: 1, WorkerID: "a", WallTime: 1e-4*p[0] + 1e-5*p[1] + 0.001,
			Scheduled: ScheduledRequests{NumPrefillRequests: 1, SumPrefillTokens: int64(p[0]), NumDecodeRequests: 1, SumDecodeKVTokens: int64(p[1])}}
		m.Observe(&f)
	}
	coef, intercept, ok := m.Reg.Coefficients()
	require.True(t, ok)
	require.InDelta(t, 1e-4, coef[0], 1e-12)
	require.InDelta(t, 1e-5, coef[1], 1e-12)
	require.InDelta(t, 0.001, intercept, 1e-12)

	// isl 100, osl 100, mbt 64: avg ctx 150, balance cap: 100/(64-x) <= 100 -> x <= 63, kv and
	// sequence caps 4. ITL(bs) = (1e-4*bs + 1.5e-3*bs + 1e-3) s: 5 ms allows bs <= 2.5.
	rps, ttft, itl := m.FindBestEngineAggRPS(100, 100, 64, 1000, 5, 1_000_000, 4, 0)
	require.InDelta(t, 4.2, itl, 1e-9)
	require.InDelta(t, 2/(100*0.0042), rps, 1e-9)
	// TTFT: queued int(prefill per iteration) = 2 plus the average ISL 210 (the first point's
	// 0 is a leading idle value: (100+200+50+400+300)/5), chunks 64,64,64,20 at decode KV 300.
	require.InDelta(t, 3*(6.4+3+1)+(2+3+1), ttft, 1e-9)
}

func TestRegressionNegativeCoefficient(t *testing.T) {
	t.Run("rejected on a non-relaxable feature", func(t *testing.T) {
		m := trainedG2Prefill(t)
		for _, tok := range []int64{3000, 3500, 4000, 4500, 5000, 5500, 6000, 6500} {
			f := prefillFPM(tok, 0.0001) // more tokens, less time: impossible
			m.Observe(&f)
		}
		ok, reason := m.Reg.Fit()
		require.False(t, ok)
		require.Contains(t, reason, "negative coefficient")
		_, ok = m.EstimateNextTTFT(0, 2048, 0)
		require.False(t, ok, "a rejected fit is a model that is not ready, never a zero estimate")
	})
	t.Run("relaxed on the decode request count", func(t *testing.T) {
		reg, err := NewRegression(2, 0, DefaultRegressionOptions())
		require.NoError(t, err)
		// wall = -1e-3*requests + 1e-5*kv + 0.01: the request coefficient is clamped to 0.
		for _, p := range [][2]float64{{1, 1000}, {2, 5000}, {3, 2000}, {5, 9000}, {8, 3000}, {4, 7000}} {
			reg.Add(p, -1e-3*p[0]+1e-5*p[1]+0.01)
		}
		coef, intercept, ok := reg.Coefficients()
		require.True(t, ok)
		require.Equal(t, 0.0, coef[0])
		require.InDelta(t, 1e-5, coef[1], 1e-12)
		require.InDelta(t, 0.01, intercept, 1e-12, "the intercept is not refitted")
	})
	t.Run("tiny negative kept", func(t *testing.T) {
		reg, err := NewRegression(2, 0, DefaultRegressionOptions())
		require.NoError(t, err)
		for _, p := range [][2]float64{{1, 1000}, {2, 5000}, {3, 2000}, {5, 9000}, {8, 3000}, {4, 7000}} {
			reg.Add(p, -1e-7*p[0]+1e-5*p[1]+0.01)
		}
		coef, _, ok := reg.Coefficients()
		require.True(t, ok)
		require.InDelta(t, -1e-7, coef[0], 1e-12)
	})
}

func TestRegressionNeedsMinObservations(t *testing.T) {
	reg, err := NewRegression(1, -1, DefaultRegressionOptions())
	require.NoError(t, err)
	for i := 1; i <= 4; i++ {
		reg.Add([2]float64{float64(i)}, float64(i))
		ok, reason := reg.Fit()
		require.False(t, ok)
		require.Equal(t, fmt.Sprintf("%d of 5 samples needed to fit", i), reason)
		require.False(t, reg.HasSufficientData())
	}
	reg.Add([2]float64{5}, 5)
	require.True(t, reg.HasSufficientData())
	ok, _ := reg.Fit()
	require.True(t, ok)
	// Constant features: the slope is the minimum-norm 0 and the intercept the mean.
	flat, err := NewRegression(1, -1, DefaultRegressionOptions())
	require.NoError(t, err)
	for i := 0; i < 5; i++ {
		flat.Add([2]float64{100}, float64(i))
	}
	coef, intercept, ok := flat.Coefficients()
	require.True(t, ok)
	require.Equal(t, 0.0, coef[0])
	require.InDelta(t, 2, intercept, 1e-12)
}

func TestRegressionBucketedRetention(t *testing.T) {
	opts := RegressionOptions{MaxSamples: 6, MinObservations: 1, BucketCount: 4}
	reg, err := NewRegression(1, -1, opts)
	require.NoError(t, err)
	// Bounds 0..100 once 0 and 100 are seen: buckets of width 25.
	for _, x := range []float64{0, 100, 10, 11, 12, 13} {
		reg.Add([2]float64{x}, x)
	}
	require.Equal(t, 6, reg.Len())
	// Bucket 0 holds 0,10,11,12,13 (5), bucket 3 holds 100. The 7th sample retires the
	// oldest of the fullest bucket: 0.
	reg.Add([2]float64{60}, 60)
	require.Equal(t, 6, reg.Len())
	st := reg.State()
	require.Equal(t, []BucketState{
		{Key: [2]int{0, 0}, Samples: []Sample{{10, 0, 10}, {11, 0, 11}, {12, 0, 12}, {13, 0, 13}}},
		{Key: [2]int{3, 0}, Samples: []Sample{{100, 0, 100}}},
		{Key: [2]int{2, 0}, Samples: []Sample{{60, 0, 60}}},
	}, st.Buckets)

	// Growing the bounds re-buckets everything in insertion order: with bounds 0..200
	// (width 50) the samples 10..13 stay in bucket 0, 100 moves to bucket 2 and 60 to bucket 1,
	// so the buckets are now ordered 0, 2, 1, then 3 for the new 200.
	reg.Add([2]float64{200}, 200)
	st = reg.State()
	require.Equal(t, 6, reg.Len())
	require.Equal(t, [2]float64{0, 0}, st.Lo)
	require.Equal(t, 200.0, st.Hi[0])
	var keys [][2]int
	for _, b := range st.Buckets {
		keys = append(keys, b.Key)
	}
	require.Equal(t, [][2]int{{0, 0}, {2, 0}, {1, 0}, {3, 0}}, keys)
	require.Equal(t, []Sample{{11, 0, 11}, {12, 0, 12}, {13, 0, 13}}, st.Buckets[0].Samples, "10 retired from the fullest bucket")
}

func TestRegression2DBucketsPerAxis(t *testing.T) {
	reg, err := NewRegression(2, -1, RegressionOptions{MaxSamples: 64, MinObservations: 1, BucketCount: 16})
	require.NoError(t, err)
	reg.Add([2]float64{0, 0}, 1)
	reg.Add([2]float64{100, 1000}, 1)
	reg.Add([2]float64{99, 10}, 1)   // x: int(0.99*4)=3, y: int(0.01*4)=0
	reg.Add([2]float64{50, 500}, 1)  // (2, 2)
	reg.Add([2]float64{24, 999}, 1)  // (0, 3)
	reg.Add([2]float64{100, 250}, 1) // (3, 1): the top of an axis stays in the last bucket
	var keys [][2]int
	for _, b := range reg.State().Buckets {
		keys = append(keys, b.Key)
	}
	require.Equal(t, [][2]int{{0, 0}, {3, 3}, {3, 0}, {2, 2}, {0, 3}, {3, 1}}, keys)
}

func TestRegressionStateRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	opts := RegressionOptions{MaxSamples: 32, MinObservations: 5, BucketCount: 16}
	a, err := NewRegression(2, 0, opts)
	require.NoError(t, err)
	for i := 0; i < 200; i++ {
		n, kv := float64(rng.IntN(64)+1), float64(rng.IntN(200000))
		a.Add([2]float64{n, kv}, 1e-4*n+2e-7*kv+0.004+rng.NormFloat64()*1e-4)
		data, err := json.Marshal(a.State())
		require.NoError(t, err)
		var st RegressionState
		require.NoError(t, json.Unmarshal(data, &st))
		b, err := RestoreRegression(2, 0, opts, st)
		require.NoError(t, err)
		pa, oka := a.Predict([2]float64{10, 50000})
		pb, okb := b.Predict([2]float64{10, 50000})
		require.Equal(t, oka, okb)
		require.Equal(t, pa, pb, "restored model predicts bit-identically at step %d", i)
		a = b
	}
	require.Equal(t, 32, a.Len())

	// Fewer retained samples in the new options: trimmed by the retirement rule.
	small, err := RestoreRegression(2, 0, RegressionOptions{MaxSamples: 8, MinObservations: 5, BucketCount: 16}, a.State())
	require.NoError(t, err)
	require.Equal(t, 8, small.Len())

	// A corrupted state is an error, not a silent model.
	bad := a.State()
	bad.Buckets[0].Samples[0][2] = math.NaN()
	_, err = RestoreRegression(2, 0, opts, bad)
	require.ErrorContains(t, err, "non-finite sample")
}

func TestRegressionOptionsValidate(t *testing.T) {
	require.NoError(t, DefaultRegressionOptions().Validate())
	err := RegressionOptions{MaxSamples: 0, MinObservations: 0, BucketCount: 12}.Validate()
	require.EqualError(t, err, "max samples must be >= 1, got 0\nmin observations must be >= 1, got 0\nbucket count must be a perfect square >= 1, got 12")
	_, err = NewRegression(3, -1, DefaultRegressionOptions())
	require.EqualError(t, err, "regression: ndim must be 1 or 2, got 3")
}

func TestMovingAverage(t *testing.T) {
	var m MovingAverage
	for _, v := range []float64{0, 0, 0} {
		m.Add(v, 3)
	}
	require.Zero(t, m.Mean())
	require.Empty(t, m.Values, "leading zeros are the idle period before traffic")
	for _, v := range []float64{3, 0, 6, 9} {
		m.Add(v, 3)
	}
	require.Equal(t, []float64{0, 6, 9}, m.Values)
	require.Equal(t, 5.0, m.Mean())
	m.Add(-4, 3)
	require.Equal(t, []float64{6, 9, 0}, m.Values, "negatives clamp to 0")
}

func BenchmarkRegressionFit64x2(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	reg, _ := NewRegression(2, 0, DefaultRegressionOptions())
	for i := 0; i < 64; i++ {
		n, kv := float64(rng.IntN(64)+1), float64(rng.IntN(200000))
		reg.Add([2]float64{n, kv}, 1e-4*n+2e-7*kv+0.004)
	}
	b.ReportAllocs()
	for b.Loop() {
		reg.fit = nil
		if ok, _ := reg.Fit(); !ok {
			b.Fatal("fit failed")
		}
	}
}
