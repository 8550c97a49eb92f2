package scaling

import (
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
)

func TestErlangC(t *testing.T) {
	tests := []struct {
		name string
		c    int
		a    float64
		want float64
	}{
		{"M/M/1 waits with probability rho", 1, 0.5, 0.5},
		{"two servers, one erlang", 2, 1, 1.0 / 3},
		{"unstable", 2, 2, 1},
		{"overloaded", 3, 5, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.InDelta(t, tc.want, erlangC(tc.c, tc.a), 1e-12)
		})
	}
}

func TestPrefillEngines(t *testing.T) {
	// 45 req/s of 62 ms prompts with 138 ms of slack (Dynamo's rr-5-45 peak on the H200
	// profile): 2.8 erlangs need more than 3 engines; equal prompts (cs² 0) need fewer than
	// exponential ones.
	det := prefillEngines(45, 0.062, 0.138, 0, aheadWaitMissShare, 100)
	exp := prefillEngines(45, 0.062, 0.138, 1, aheadWaitMissShare, 100)
	require.GreaterOrEqual(t, det, 4)
	require.GreaterOrEqual(t, exp, det)
	require.Zero(t, prefillEngines(0, 0.062, 0.138, 1, aheadWaitMissShare, 100), "no demand, no engine")
	require.LessOrEqual(t, prefillEngines(45, 0.062, 0.5, 1, aheadWaitMissShare, 100), det, "more slack never needs more engines")
	require.GreaterOrEqual(t, prefillEngines(90, 0.062, 0.138, 0, aheadWaitMissShare, 100), 2*det-1, "twice the demand needs about twice the engines")
	require.Equal(t, 7, prefillEngines(1e6, 0.062, 0.138, 1, aheadWaitMissShare, 7), "the limit bounds the search")
	require.Equal(t, 7, prefillEngines(1e300, 1e10, 0.138, 1, aheadWaitMissShare, 7), "a load past float64's integers is the limit")
	require.Equal(t, 7, prefillEngines(math.Inf(1), 0.062, 0.138, 1, aheadWaitMissShare, 7), "an infinite rate is the limit")
	require.LessOrEqual(t, prefillEngines(45, 0.062, 0.138, 0, aheadForeseenWaitMissShare, 100), det, "letting more wait never needs more engines")
	require.Less(t, prefillEngines(25, 0.058, 0.142, 0, aheadForeseenWaitMissShare, 100), prefillEngines(25, 0.058, 0.142, 0, aheadWaitMissShare, 100),
		"rr-5-45's mid-rise: 2 engines let 3.5% wait past the slack")
}

// TestPrefillEngines_OneRecurrence: the search that extends Erlang's B recurrence one
// engine at a time finds the very count a search computing Erlang's C afresh at every count
// finds, bit for bit, over loads from a fraction of an engine to thousands of engines and
// slacks from far below the service time to far above it.
func TestPrefillEngines_OneRecurrence(t *testing.T) {
	afresh := func(rate, service, slack, cs2, missShare float64, limit int) int {
		a := rate * service
		if a >= float64(limit) {
			return limit
		}
		c := max(1, int(math.Floor(a))+1)
		for ; c < limit; c++ {
			decay := (float64(c) - a) * slack / (service * (1 + cs2) / 2)
			if erlangC(c, a)*math.Exp(-decay) <= missShare {
				break
			}
		}
		return min(c, limit)
	}
	reachedLimit := false
	// Rates up to 4,000 engines' worth (4000/0.062), under the bound of 4,096 and under a
	// budget's bound of 5.
	for _, rate := range []float64{0.3, 4, 45, 300, 2500, 30000, 4000 / 0.062} {
		for _, slack := range []float64{1e-6, 0.01, 0.138, 2} {
			for _, cs2 := range []float64{0, 1} {
				for _, share := range []float64{aheadWaitMissShare, aheadForeseenWaitMissShare} {
					for _, limit := range []int{5, aheadMaxEngines} {
						want := afresh(rate, 0.062, slack, cs2, share, limit)
						require.Equal(t, want, prefillEngines(rate, 0.062, slack, cs2, share, limit),
							"rate %g, slack %g, cs² %g, share %g, limit %d", rate, slack, cs2, share, limit)
						reachedLimit = reachedLimit || (want == limit && rate*0.062 < float64(limit))
					}
				}
			}
		}
	}
	require.True(t, reachedLimit, "some search ran to its limit without finding a pool")
}

// TestForecast_Margins: the queueing margins are dropped only for a period followed on calm
// arrivals.
func TestForecast_Margins(t *testing.T) {
	for _, tc := range []struct {
		name     string
		f        Forecast
		share, z float64
		foreseen bool
	}{
		{"followed, calm", Forecast{Trusted: true, Level: 20, Burst: 1}, aheadForeseenWaitMissShare, 0, true},
		{"followed, bursty", Forecast{Trusted: true, Level: 20, Burst: 3}, aheadWaitMissShare, aheadDecodeSpreadZ, false},
		{"trend", Forecast{Level: 20}, aheadWaitMissShare, aheadDecodeSpreadZ, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			share, z := tc.f.margins()
			require.Equal(t, tc.share, share)
			require.Equal(t, tc.z, z)
			require.Equal(t, tc.foreseen, tc.f.foreseen())
		})
	}
}

func TestAheadState_Record(t *testing.T) {
	a := AheadState{BucketS: 30}
	a.record(10, 5, 50, 1000, 100) // bucket 0 (mid 7.5)
	a.record(15, 5, 50, 1000, 100)
	a.record(20, 5, 50, 1000, 100)
	a.record(35, 5, 100, 2000, 100) // bucket 1 (mid 32.5)
	require.Equal(t, 0.0, a.T0)
	require.Equal(t, []float64{150, 100}, a.Count)
	require.Equal(t, []float64{150 * 1000, 100 * 2000}, a.ISL)
	require.Equal(t, []float64{15, 5}, a.Covered)
	require.Equal(t, 10.0, a.rate(0), "rate of a covered bucket")
	require.True(t, math.IsNaN(a.rate(1)), "a bucket observed for less than half its width has no rate")
	require.True(t, math.IsNaN(a.rate(5)), "a bucket never observed has no rate")

	// A history longer than AheadHistoryBuckets keeps its newest buckets.
	for now := 40.0; now < 40+float64(AheadHistoryBuckets+10)*30; now += 5 {
		a.record(now, 5, 10, 1000, 100)
	}
	require.Len(t, a.Count, AheadHistoryBuckets)
	require.Len(t, a.Recent, aheadBurstBuckets*30/5)
	for i, b := range a.RecentBucket {
		require.Less(t, b, len(a.Count), "recent %d points into the history", i)
	}
	// A gap longer than the history starts again.
	a.record(1e6, 5, 10, 1000, 100)
	require.Len(t, a.Count, 1)
	require.Len(t, a.Recent, 1)
}

// feed records a rate function every 5 s from 0 to until.
func feed(a *AheadState, until float64, rate func(t float64) float64) {
	for now := 5.0; now <= until; now += 5 {
		a.record(now, 5, rate(now-2.5)*5, 3000, 300)
	}
}

// feedForecasting feeds the rate as feed does and forecasts at each tick as a disaggregated
// deployment's does (its misses carried by its rise, then held to a wave's earlier peak),
// recording each forecast for the misses of later ones; it returns the last forecast.
func feedForecasting(a *AheadState, until float64, rate func(t float64) float64) Forecast {
	var f Forecast
	for now := 5.0; now <= until; now += 5 {
		a.record(now, 5, rate(now-2.5)*5, 3000, 300)
		var ok bool
		if f, ok = a.forecast(65, 5); ok {
			f.carryMisses()
			f.holdToWavePeak()
			a.recordForecast(f.Rate-f.Missed, f.Rate)
		}
	}
	return f
}

func TestForecast_HoldToWavePeak(t *testing.T) {
	// Level 20, margin 2 (the spread alone: aheadQuantileZ × Spread), a wave's earlier peak of
	// 30: held at 32 at most.
	spread := 2 / aheadQuantileZ
	for _, tc := range []struct {
		name              string
		f                 Forecast
		rate, missed, cut float64
	}{
		{"a cut under the misses comes off them", Forecast{Level: 20, Spread: spread, wave: 30, Missed: 10, Rate: 20 + 5 + 10 + 2}, 32, 5, 5},
		{"a cut over the misses takes them all, then the rise", Forecast{Level: 20, Spread: spread, wave: 30, Missed: 4, Rate: 20 + 15 + 4 + 2}, 32, 0, 9},
		{"under the peak plus the margin: nothing held", Forecast{Level: 20, Spread: spread, wave: 30, Missed: 4, Rate: 31}, 31, 4, 0},
		{"a level past the peak by more than the margin: not held", Forecast{Level: 33, Spread: spread, wave: 30, Missed: 10, Rate: 45}, 45, 10, 0},
		{"a step found above the peak: held no lower than the step", Forecast{Level: 20, Spread: spread, wave: 30, Step: 40, Missed: 10, Rate: 52}, 42, 0, 10},
		{"no wave: nothing held", Forecast{Level: 20, Spread: spread, Missed: 10, Rate: 40}, 40, 10, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.f
			f.holdToWavePeak()
			require.InDelta(t, tc.rate, f.Rate, 1e-9)
			require.InDelta(t, tc.missed, f.Missed, 1e-9)
			require.InDelta(t, tc.cut, f.PeakCut, 1e-9)
		})
	}
}

func TestAheadState_Forecast(t *testing.T) {
	t.Run("poisson", func(t *testing.T) {
		a := AheadState{BucketS: 30}
		for now := 5.0; now <= 600; now += 5 {
			n := 50.0 + []float64{-7, 3, 0, 6, -4, 2}[int(now/5)%6] // Poisson-sized noise around 10 req/s
			a.record(now, 5, n, 3000, 300)
		}
		f, ok := a.forecast(65, 5)
		require.True(t, ok)
		require.Zero(t, f.Burst, "Poisson noise is not a burst")
	})
	t.Run("steady", func(t *testing.T) {
		a := AheadState{BucketS: 30}
		feed(&a, 600, func(float64) float64 { return 10 })
		f, ok := a.forecast(65, 5)
		require.True(t, ok)
		require.InDelta(t, 10, f.Level, 1e-9)
		require.InDelta(t, 10, f.Rate, 1e-9, "even arrivals: no margin")
		require.Equal(t, 3000.0, f.ISL)
		require.Zero(t, f.PeriodS)
	})
	t.Run("rising", func(t *testing.T) {
		a := AheadState{BucketS: 30}
		feed(&a, 300, func(t float64) float64 { return 5 + 0.1*t })
		f, ok := a.forecast(65, 5)
		require.True(t, ok)
		require.InDelta(t, 0.1, f.Slope, 0.01)
		require.Greater(t, f.Rate, 5+0.1*(300+60), "sized for the rate at the end of the lead time")
	})
	t.Run("rising, under three buckets: the intervals' line", func(t *testing.T) {
		a := AheadState{BucketS: 30}
		feed(&a, 45, func(t float64) float64 { return 5 + 0.1*t }) // 1.5 buckets
		f, ok := a.forecast(65, 5)
		require.True(t, ok)
		require.InDelta(t, 0.1, f.Slope, 0.01)
		require.Greater(t, f.Rate, f.Level+0.1*65, "the rise over the lead time added")
	})
	t.Run("bursty start, under three buckets: the intervals' spread", func(t *testing.T) {
		a := AheadState{BucketS: 30}
		feed(&a, 45, func(t float64) float64 { return []float64{0, 30, 0, 0, 40, 0, 0, 50, 0}[int(t/5)] })
		f, ok := a.forecast(65, 5)
		require.True(t, ok)
		require.Greater(t, f.Spread, 10.0, "bursts far beyond Poisson noise")
		require.Greater(t, f.Rate, f.Level+f.Burst+5, "the intervals' spread adds to the bursts within the buckets")
	})
	t.Run("after a gap in the observations: only the window's intervals", func(t *testing.T) {
		a := AheadState{BucketS: 30}
		feed(&a, 300, func(float64) float64 { return 2 })
		for now := 505.0; now <= 540; now += 5 { // 200 s unobserved, then a higher level
			a.record(now, 5, 20*5, 3000, 300)
		}
		f, ok := a.forecast(65, 5)
		require.True(t, ok)
		require.InDelta(t, 0, f.Slope, 1e-9, "the level before the gap is no trend")
		require.InDelta(t, 20, f.Rate, 1e-9)
	})
	t.Run("a rise past its turn: to the parabola's top, not along the line", func(t *testing.T) {
		a := AheadState{BucketS: 30}
		sinusoid := func(t float64) float64 { return 16 - 14*math.Cos(2*math.Pi*t/300) } // 2–30 req/s, peak at 150 s
		feed(&a, 170, sinusoid)
		f, ok := a.forecast(65, 5)
		require.True(t, ok)
		require.Positive(t, f.LineRise, "the line through the window still rises")
		require.Less(t, f.Bend, f.LineRise)
		require.InDelta(t, f.Level+f.Bend+math.Hypot(aheadQuantileZ*f.Spread, f.Burst), f.Rate, 1e-9)
		require.Less(t, f.Level+f.Bend, 31.0, "the rise ends at the peak, 30 req/s")
		require.Greater(t, f.Level+f.LineRise, 35.0, "the line's rise overshoots the peak")
	})
	t.Run("a rise from a trough: along its own line, not the line through the fall", func(t *testing.T) {
		a := AheadState{BucketS: 30}
		sinusoid := func(t float64) float64 { return 32.75 - 23.75*math.Cos(2*math.Pi*t/300) } // 9–56.5 req/s, trough at 300 s
		feed(&a, 330, sinusoid)
		f, ok := a.forecast(65, 5)
		require.True(t, ok)
		require.Negative(t, f.Slope, "the line through the window still falls")
		require.Positive(t, f.Trough)
		require.Zero(t, f.TroughLine, "the falling line rises by nothing")
		require.InDelta(t, f.Level+f.Trough+math.Hypot(aheadQuantileZ*f.Spread, f.Burst), f.Rate, 1e-9)
		require.Greater(t, f.Level+f.Trough, 2*f.Level, "the rate 65 s on is 42 req/s, four times the level")
		require.Less(t, f.Level+f.Trough, sinusoid(330+65), "the rise's own line still lags its convex start")

		window := a.trendWindow(65)
		cv, ok := a.curve(window, 5)
		require.True(t, ok)
		rise, ok := cv.troughRise(5, a.horizon(65, 5), 3)
		require.True(t, ok)
		require.InDelta(t, 3, rise, 1e-9, "no higher than the headroom to the history's highest rate")
	})
	t.Run("a fall that levels off is no trough", func(t *testing.T) {
		a := AheadState{BucketS: 30}
		feed(&a, 250, func(t float64) float64 {
			return math.Max(5, 50-0.3*t) + []float64{0, 1, -1, 0.5, 1.5, -0.5}[int(t/5)%6] // Poisson-sized noise
		})
		f, ok := a.forecast(65, 5)
		require.True(t, ok)
		require.Zero(t, f.Trough, "the noise after the lowest point is no rise")
	})
	t.Run("a step after a fall: the step, not a rise from a trough", func(t *testing.T) {
		a := AheadState{BucketS: 30}
		feed(&a, 220, func(t float64) float64 {
			switch {
			case t < 150:
				return 30 - t/6 // 30 → 5 req/s
			case t < 190:
				return 5
			default:
				return 25
			}
		})
		f, ok := a.forecast(65, 5)
		require.True(t, ok)
		require.InDelta(t, 25, f.Step, 1e-9)
		require.Zero(t, f.Trough)
		require.Zero(t, f.TroughLine)
	})
	t.Run("a rise from a trough: no higher than the history's highest rate", func(t *testing.T) {
		a := AheadState{BucketS: 30}
		feed(&a, 195, func(t float64) float64 {
			if t < 150 {
				return 30 - t/6 // 30 → 5 req/s
			}
			return 5 + 0.3*(t-150)
		})
		f, ok := a.forecast(65, 5)
		require.True(t, ok)
		require.Positive(t, f.Trough)
		require.InDelta(t, a.highestRate(), f.Level+f.Trough, 1e-9, "the rise's line over the horizon, 0.3 req/s per s, would pass 35")
	})
	t.Run("a wave's second rise: no higher than its earlier peak, plus the margin", func(t *testing.T) {
		a := AheadState{BucketS: 30}
		sinusoid := func(t float64) float64 { return 32.75 - 23.75*math.Cos(2*math.Pi*t/300) } // 9–56.5 req/s, peaks at 150 and 450 s
		f := feedForecasting(&a, 430, sinusoid)
		peak, ok := a.wavePeak(a.trendWindow(65))
		require.True(t, ok)
		require.InDelta(t, peak, f.WavePeak, 1e-9)
		require.InDelta(t, 55, peak, 1, "the first peak's bucket")
		require.Greater(t, f.PeakCut, 20.0, "the line through the steepest rise, and the misses, would add more than 20 req/s over the peak")
		require.Zero(t, f.Missed, "the misses are taken off first")
		require.InDelta(t, peak+f.margin(), f.Rate, 1e-9)
		require.GreaterOrEqual(t, f.Rate, sinusoid(450), "the peak the wave comes back to is still covered")
	})
	for _, tc := range []struct {
		name       string
		fallTo     float64 // from 30 req/s, at 150 s; a ramp from 250 s
		ramp       float64 // req/s per s
		until      float64
		heldToPeak bool
	}{
		{"a rise back after a fall to half: held to the earlier peak", 15, 0.12, 380, true},
		{"a fall to 60% is no wave's", 18, 0.08, 380, false},
		{"a ramp past the earlier peak by more than the margin is not held", 15, 0.3, 400, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := AheadState{BucketS: 30}
			f := feedForecasting(&a, tc.until, func(t float64) float64 {
				switch {
				case t < 150:
					return 30
				case t < 250:
					return tc.fallTo
				}
				return tc.fallTo + tc.ramp*(t-250)
			})
			margin := f.margin()
			require.Zero(t, f.Trough, "the window holds the ramp alone: no trough")
			if !tc.heldToPeak {
				require.Zero(t, f.PeakCut)
				require.Greater(t, f.Rate, 30+margin, "the line's rise goes past the earlier peak")
				return
			}
			require.Less(t, f.Level, 30.0)
			require.InDelta(t, 30, f.WavePeak, 1e-9)
			require.Positive(t, f.PeakCut)
			require.InDelta(t, 30+margin, f.Rate, 1e-9)
		})
	}
	t.Run("a ramp from the start is no wave's fall", func(t *testing.T) {
		a := AheadState{BucketS: 30}
		feed(&a, 400, func(t float64) float64 { return math.Min(30, 2+0.2*t) }) // 2 → 30 req/s over 140 s, then flat
		_, ok := a.wavePeak(a.trendWindow(65))
		require.False(t, ok, "the low rates before the peak are no fall after it")
	})
	t.Run("a step past the earlier peak is not held under it", func(t *testing.T) {
		a := AheadState{BucketS: 30}
		f := feedForecasting(&a, 430, func(t float64) float64 {
			switch {
			case t < 150:
				return 30
			case t < 400:
				return 12
			}
			return 45
		})
		require.InDelta(t, 45, f.Step, 1e-9)
		require.Less(t, f.Level, 30+f.margin(), "the level still lags the step")
		require.GreaterOrEqual(t, f.Rate, 45+f.margin(), "the step is measured: the forecast starts from it")
	})
	t.Run("a level just past the earlier peak keeps its margin", func(t *testing.T) {
		rate := func(t float64) float64 {
			switch {
			case t < 150:
				return 30
			case t < 250:
				return 8
			}
			return 8 + 0.3*(t-250) + []float64{0, 1.5, -1.5, 1, -1, 0}[int(t/5)%6] // with noise
		}
		between := 0
		for until := 300.0; until <= 400; until += 5 {
			a := AheadState{BucketS: 30}
			f := feedForecasting(&a, until, rate)
			if peak, ok := a.wavePeak(a.trendWindow(65)); ok && f.Level > peak && f.Level < peak+f.margin() {
				between++
				require.GreaterOrEqual(t, f.Rate, f.Level+f.margin()-1e-9, "at %.0f s: never held under the level plus the margin", until)
			}
		}
		require.Positive(t, between, "some tick's level lies between the peak and the peak plus the margin")
	})
	t.Run("a flat rate's noisy highs are no wave", func(t *testing.T) {
		a := AheadState{BucketS: 30}
		feed(&a, 600, func(t float64) float64 { return 10 + []float64{-1.4, 0.6, 0, 1.2, -0.8, 0.4}[int(t/5)%6] })
		_, ok := a.wavePeak(a.trendWindow(65))
		require.False(t, ok)
	})
	for _, tc := range []struct {
		name string
		rate func(t float64) float64
	}{
		{"a ramp is no bend", func(t float64) float64 {
			return 2 + 0.1*t + []float64{-2, 1, 0, 2, -1, 1}[int(t/5)%6] // with Poisson-sized noise
		}},
		{"a rise speeding up is no bend", func(t float64) float64 { return 2 + 0.0005*t*t }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := AheadState{BucketS: 30}
			feed(&a, 300, tc.rate)
			f, ok := a.forecast(65, 5)
			require.True(t, ok)
			require.Positive(t, f.Slope)
			require.Zero(t, f.Bend)
			require.Zero(t, f.LineRise)
			require.Zero(t, f.Trough, "no trough inside the window")
		})
	}
	t.Run("a step up: its rate, not the line through it", func(t *testing.T) {
		a := AheadState{BucketS: 30}
		feed(&a, 300, func(t float64) float64 {
			if t > 240 {
				return 40
			}
			return 2
		})
		f, ok := a.forecast(65, 5)
		require.True(t, ok)
		require.InDelta(t, 40, f.Step, 1e-9)
		require.Zero(t, f.Slope)
		require.InDelta(t, 40, f.Level, 1e-9, "the level's window has passed the step")
		require.InDelta(t, 40+math.Hypot(aheadQuantileZ*f.Spread, f.Burst), f.Rate, 1e-9, "no rise added: the step is not extrapolated")
		var xs, ys []float64 // the trend window's buckets (130 s: the newest five)
		for i := len(a.Count) - 5; i < len(a.Count); i++ {
			xs, ys = append(xs, float64(i)), append(ys, a.rate(i))
		}
		tf := fitTrend(xs, ys)
		require.Greater(t, tf.rise(a.horizon(65, 5)/30), 20.0, "the line through the window would have added over 20 req/s")
	})
	t.Run("bursts", func(t *testing.T) {
		a := AheadState{BucketS: 30}
		feed(&a, 600, func(t float64) float64 {
			if int(t/5)%6 == 0 {
				return 60 // one interval in six carries the bucket's requests
			}
			return 0
		})
		f, ok := a.forecast(65, 5)
		require.True(t, ok)
		require.InDelta(t, 10, f.Level, 1e-9)
		poisson := aheadQuantileZ * math.Sqrt(10.0/5) // the part of the excess Poisson arrivals would have
		require.InDelta(t, 50-poisson, f.Burst, 1e-9)
		require.InDelta(t, 60-poisson, f.Rate, 1e-9, "the pools absorb the bursts")
		require.Zero(t, f.Step, "bursty arrivals: a busy run is no step")
	})
	t.Run("periodic", func(t *testing.T) {
		a := AheadState{BucketS: 30}
		wave := func(t float64) float64 { return 25 - 20*math.Cos(2*math.Pi*t/600) }
		feed(&a, 1500, wave)
		f, ok := a.forecast(65, 5)
		require.True(t, ok)
		require.InDelta(t, 600, f.PeriodS, 30)
		require.Greater(t, f.Seasonal, wave(1500+30), "the period predicts the rise")
	})
	t.Run("nothing yet", func(t *testing.T) {
		a := AheadState{BucketS: 30}
		_, ok := a.forecast(65, 5)
		require.False(t, ok)
	})
}

// aheadPlanner is the ahead policy on the test profile, disaggregated, 16 GPUs.
func aheadPlanner(t *testing.T) (*Planner, State) {
	t.Helper()
	return aheadPlannerWith(t, func(*config.Config) {})
}

// aheadPlannerWith is aheadPlanner with its configuration changed by mutate.
func aheadPlannerWith(t *testing.T, mutate func(*config.Config)) (*Planner, State) {
	t.Helper()
	prof, err := perf.LoadProfile("../sim/engine/testdata")
	require.NoError(t, err)
	cfg := slaConfig(func(c *config.Config) {
		c.ScalingPolicy = config.PolicyAhead
		c.TTFTMs, c.ITLMs, c.MaxGPUBudget = 200, 10, 16
		mutate(c)
	})
	p, err := New(cfg, prof)
	require.NoError(t, err)
	st := mustInit(t, p, 0, Bootstrap{PrefillFPMs: perf.PrefillBootstrapFPMs(prof.Prefill), DecodeFPMs: perf.DecodeBootstrapFPMs(prof.Decode)})
	require.NotNil(t, st.Ahead)
	require.Nil(t, st.NextThroughputAt, "the ahead policy replaces the throughput loop")
	require.Nil(t, st.Predictors)
	return p, st
}

func aheadInput(now float64, readyP, readyD, expP, expD int, perSecond float64) Input {
	traffic := &TrafficObservation{DurationS: 5, NumReq: ptr(perSecond * 5)}
	if perSecond > 0 {
		traffic.ISL, traffic.OSL = ptr(3000.0), ptr(300.0)
	}
	return Input{Now: now, Traffic: traffic,
		Workers: &WorkerCounts{ReadyPrefill: ptr(readyP), ReadyDecode: ptr(readyD), ExpectedPrefill: ptr(expP), ExpectedDecode: ptr(expD)},
		FPM:     &FPMObservations{}}
}

func TestAhead_Decisions(t *testing.T) {
	p, st := aheadPlanner(t)
	tick := p.NextTick(st)
	require.True(t, tick.NeedTraffic && tick.FullTraffic, "every tick reads the traffic")
	require.Equal(t, 5.0, tick.TrafficDurationS)

	decide := func(in Input) (Decision, Diagnostics) {
		t.Helper()
		return decideAndSubmit(t, p, &st, in)
	}

	// Unreadable traffic holds: it is never zero demand.
	in := aheadInput(5, 4, 4, 4, 4, 0)
	in.Traffic.NumReq = nil
	dec, diag := decide(in)
	require.True(t, dec.Empty())
	require.Equal(t, ReasonNoTrafficData, diag.LoadReasonPrefill)

	// A surge to 40 req/s on 1P 1D: both pools go to what 40 req/s needs, in one step.
	dec, diag = decide(aheadInput(10, 1, 1, 1, 1, 40))
	require.NotNil(t, dec.Prefill)
	require.NotNil(t, dec.Decode)
	require.GreaterOrEqual(t, *dec.Prefill, 3, diag.Notes)
	require.GreaterOrEqual(t, *dec.Decode, 3, diag.Notes)
	require.Equal(t, ReasonScaleUp, diag.LoadReasonPrefill)
	wantP, wantD := *dec.Prefill, *dec.Decode

	// While they start, the same demand decides nothing more.
	now := 15.0
	for ; now < 70; now += 5 {
		dec, _ = decide(aheadInput(now, 1, 1, wantP, wantD, 40))
		require.True(t, dec.Empty(), "at %v", now)
	}
	// Ready: the startup delay is measured.
	decide(aheadInput(now, wantP, wantD, wantP, wantD, 40))
	require.InDelta(t, now-10-2.5, st.Ahead.StartupS, 1e-9, "ready within the last 5 s interval: its middle")
	lead := st.Ahead.StartupS + 5

	// Demand falls to 2 req/s: no scale-down within the lead time of the last high need,
	// and none while the observed TTFT breaks the SLA (the excess wait it shows may add
	// engines).
	start, provP := now, wantP
	var downAt float64
	for now += 5; now < start+10*lead; now += 5 {
		in := aheadInput(now, provP, wantD, provP, wantD, 2)
		slow := now < start+2*lead
		in.Traffic.TTFTMs = ptr(70.0)
		if slow {
			in.Traffic.TTFTMs = ptr(300.0)
		}
		dec, diag = decide(in)
		if dec.Prefill == nil {
			continue
		}
		if slow {
			require.Greater(t, *dec.Prefill, provP, "at %v: %v", now, diag.Notes)
		} else if *dec.Prefill < provP {
			downAt = now
			break
		}
		provP = *dec.Prefill
	}
	require.NotZero(t, downAt, "the prefill pool scales down once the surplus is sure")
	require.GreaterOrEqual(t, downAt, start+2*lead, "not while the observed TTFT breaks the SLA")
}

// TestAhead_StartupNotMeasuredWhileQueued: new workers the connector held back until a
// draining worker's GPU freed (the local connector's pending workers) waited for capacity, not
// for their start-up: that wait is not measured as the startup delay.
func TestAhead_StartupNotMeasuredWhileQueued(t *testing.T) {
	for _, queued := range []bool{false, true} {
		t.Run(fmt.Sprintf("queued=%v", queued), func(t *testing.T) {
			p, st := aheadPlanner(t)
			decide := func(in Input) Diagnostics {
				t.Helper()
				_, diag := decideAndSubmit(t, p, &st, in)
				return diag
			}
			decide(aheadInput(5, 1, 1, 1, 1, 0))
			in := aheadInput(10, 1, 1, 1, 1, 40)
			decide(in)
			require.NotNil(t, st.Ahead.UpPrefill)
			require.NotNil(t, st.Ahead.UpDecode)
			wantP, wantD := st.Ahead.UpPrefill.Replicas, st.Ahead.UpDecode.Replicas
			for now := 15.0; now < 40; now += 5 {
				in := aheadInput(now, 1, 1, wantP, wantD, 40)
				if queued && now == 20 {
					in.Workers.QueuedPrefill, in.Workers.QueuedDecode = ptr(1), ptr(1)
				}
				decide(in)
			}
			diag := decide(aheadInput(40, wantP, wantD, wantP, wantD, 40))
			require.Nil(t, st.Ahead.UpPrefill, "the scale-up is settled either way")
			if queued {
				require.Zero(t, st.Ahead.StartupS, "a wait for capacity is not a startup")
				require.Contains(t, strings.Join(diag.Notes, "\n"), "queued for capacity held by draining workers: not measured")
			} else {
				require.InDelta(t, 40-10-2.5, st.Ahead.StartupS, 1e-9)
			}
		})
	}
}

func TestAhead_BudgetAndMinimum(t *testing.T) {
	p, st := aheadPlanner(t)
	_, dec, diag, err := p.Decide(st, aheadInput(5, 1, 1, 1, 1, 1000))
	require.NoError(t, err)
	require.NotNil(t, dec.Prefill)
	require.LessOrEqual(t, *dec.Prefill+*dec.Decode, 16, "never above max_gpu_budget: %v", diag.Notes)

	_, dec, _, err = p.Decide(st, aheadInput(5, 3, 3, 3, 3, 0))
	require.NoError(t, err)
	require.True(t, dec.Empty(), "no scale-down before the trend window of traffic is known")
}

func TestAheadConfig(t *testing.T) {
	c := slaConfig(func(c *config.Config) { c.ScalingPolicy = "ahead" })
	require.NoError(t, c.Validate())
	c.OptimizationTarget = config.TargetThroughput
	require.ErrorContains(t, c.Validate(), "scaling_policy")
	c = slaConfig(func(c *config.Config) { c.ScalingPolicy, c.Mode = "ahead", config.ModeAgg })
	require.NoError(t, c.Validate(), "ahead sizes aggregated deployments (ahead_agg.go)")
	c = slaConfig(func(c *config.Config) { c.ExpectedStartupSeconds = 30 })
	require.ErrorContains(t, c.Validate(), "expected_startup_seconds", "only with the ahead policy")
	c = slaConfig(func(c *config.Config) { c.ScalingPolicy, c.ExpectedStartupSeconds = "ahead", 7200 })
	require.ErrorContains(t, c.Validate(), "expected_startup_seconds")
	c = slaConfig(func(c *config.Config) { c.ScalingPolicy = "clairvoyant" })
	require.ErrorContains(t, c.Validate(), "scaling_policy")
}

func TestAheadBucket(t *testing.T) {
	for _, tc := range []struct{ startup, interval, want float64 }{
		{60, 5, 30}, {10, 5, 5}, {600, 5, 60}, {0, 5, 5}, {60, 30, 30}, {120, 10, 60},
	} {
		require.Equal(t, tc.want, AheadBucket(tc.startup, tc.interval), "startup %v interval %v", tc.startup, tc.interval)
	}
}

func TestAheadState_QuietGaps(t *testing.T) {
	a := AheadState{BucketS: 30, Count: make([]float64, 10)}
	// Prefill needs per bucket: busy (4), quiet for 3 buckets, busy again, quiet since.
	a.NeedPrefill = []int{4, 4, 1, 1, 1, 4, 1, 1, 1, 1}
	longest, quiet := a.quietGaps(Prefill, 2, math.Inf(1))
	require.Equal(t, 90.0, longest, "demand needing more than 2 came back after 3 quiet buckets")
	require.Equal(t, 120.0, quiet, "quiet for the last 4 buckets")
	longest, quiet = a.quietGaps(Prefill, 2, 60)
	require.Zero(t, longest, "a gap longer than upTo is not counted")
	require.Equal(t, 120.0, quiet)
	longest, quiet = a.quietGaps(Prefill, 4, math.Inf(1))
	require.Zero(t, longest, "nothing ever needed more than 4")
	require.True(t, math.IsInf(quiet, 1))
	_, quiet = a.quietGaps(Decode, 1, math.Inf(1))
	require.True(t, math.IsInf(quiet, 1), "no decode need recorded")

	a.recordNeed(Decode, 3)
	a.recordNeed(Decode, 2)
	require.Equal(t, []int{0, 0, 0, 0, 0, 0, 0, 0, 0, 3}, a.NeedDecode, "the newest bucket keeps its highest need")
}

// TestAhead_QuietGapHold: demand that came back after a quiet gap keeps its capacity through
// the next gap of that length; the first gap, with no return seen yet, does not.
func TestAhead_QuietGapHold(t *testing.T) {
	p, st := aheadPlanner(t)
	provP, provD := 1, 1
	now := 0.0
	// run feeds rate for seconds and returns when the prefill pool was first back at one
	// engine (0: never).
	run := func(rate, seconds float64) (downAt float64) {
		for end := now + seconds; now < end; {
			now += 5
			in := aheadInput(now, provP, provD, provP, provD, rate)
			in.Traffic.TTFTMs, in.Traffic.ITLMs = ptr(80.0), ptr(6.0)
			next, dec, _, err := p.Decide(st, in)
			require.NoError(t, err)
			st = p.Submitted(next, dec, now)
			if dec.Prefill != nil {
				if *dec.Prefill == 1 && provP > 1 && downAt == 0 {
					downAt = now
				}
				provP = *dec.Prefill
			}
			if dec.Decode != nil {
				provD = *dec.Decode
			}
		}
		return downAt
	}
	// Gaps of 200 s, within aheadMaxGapLeads lead times (65 s each).
	run(40, 300)
	start := now
	first := run(1, 200) - start
	require.Positive(t, first, "the first quiet gap releases capacity")
	run(40, 300)
	start = now
	second := run(1, 600) - start
	require.Greater(t, second, first+200, "after demand came back once, the next gap is waited out longer")
}

// TestAhead_LongQuietGapNotHeld: a gap longer than aheadMaxGapLeads lead times is not waited
// out again: holding through it would cost more than restarting (ski rental).
func TestAhead_LongQuietGapNotHeld(t *testing.T) {
	p, st := aheadPlanner(t)
	provP, provD := 1, 1
	now := 0.0
	run := func(rate, seconds float64) (downAt float64) {
		for end := now + seconds; now < end; {
			now += 5
			in := aheadInput(now, provP, provD, provP, provD, rate)
			in.Traffic.TTFTMs, in.Traffic.ITLMs = ptr(80.0), ptr(6.0)
			next, dec, _, err := p.Decide(st, in)
			require.NoError(t, err)
			st = p.Submitted(next, dec, now)
			if dec.Prefill != nil {
				if *dec.Prefill == 1 && provP > 1 && downAt == 0 {
					downAt = now
				}
				provP = *dec.Prefill
			}
			if dec.Decode != nil {
				provD = *dec.Decode
			}
		}
		return downAt
	}
	run(40, 300)
	start := now
	first := run(1, 600) - start // 600 s > 6 × 65 s
	require.Positive(t, first)
	run(40, 300)
	start = now
	second := run(1, 600) - start
	require.Positive(t, second)
	require.InDelta(t, first, second, 30, "a gap of more than %d lead times is not waited out", aheadMaxGapLeads)
}

func TestAhead_EstimatesTheReadyPool(t *testing.T) {
	p, st := aheadPlanner(t)
	_, _, light, err := p.Decide(st, aheadInput(5, 4, 4, 4, 4, 5))
	require.NoError(t, err)
	_, _, heavy, err := p.Decide(st, aheadInput(5, 2, 2, 2, 2, 25))
	require.NoError(t, err)
	require.NotNil(t, light.EstimatedTTFTMs)
	require.NotNil(t, light.EstimatedITLMs)
	require.Greater(t, *light.EstimatedTTFTMs, 10.0, "at least the prompt's own service time")
	require.Greater(t, *heavy.EstimatedTTFTMs, *light.EstimatedTTFTMs, "more load per engine waits longer")
	require.Greater(t, *heavy.EstimatedITLMs, *light.EstimatedITLMs, "a bigger batch per engine is slower")
}

func TestAheadState_Unsteadiness(t *testing.T) {
	a := AheadState{BucketS: 5}
	feed(&a, 60, func(float64) float64 { return 40 })
	require.Zero(t, a.unsteadiness(40, 5, 15), "steady arrivals")
	// A burst two intervals ago, in a bucket of its own (one interval per bucket): the
	// bucket-relative burst cannot see it; against the level it shows.
	a.record(65, 5, 120*5, 3000, 300)
	a.record(70, 5, 40*5, 3000, 300)
	a.record(75, 5, 40*5, 3000, 300)
	require.Greater(t, a.unsteadiness(40, 5, 15), 0.1*40, "the burst within the lead time")
	require.Zero(t, a.unsteadiness(40, 5, 10), "outside the window")
}

// TestAheadState_BurstReference: a burst is measured against the mean of about
// aheadBurstSpan intervals — its bucket's when the bucket holds that many, else the buckets
// around it — so that a bucket of one interval (a 10 s startup at 5 s intervals: the demo)
// does not hide it.
func TestAheadState_BurstReference(t *testing.T) {
	withBurst := func(bucket float64) *AheadState {
		a := &AheadState{BucketS: bucket}
		feed(a, 60, func(float64) float64 { return 40 })
		a.record(65, 5, 120*5, 3000, 300) // one interval three times the rate
		a.record(70, 5, 40*5, 3000, 300)
		a.record(75, 5, 40*5, 3000, 300)
		return a
	}
	tests := []struct {
		name    string
		bucket  float64
		wantMin float64
		wantMax float64
	}{
		// Against the three buckets of one interval on each side (the two after it are all
		// observed yet: six intervals, mean 53.3 req/s): 120 − 53.3 − 1.28·√(53.3/5).
		{"a bucket of one interval", 5, 62, 63},
		// Against its 15 s bucket and one on each side (the one before and its own observed
		// yet: six intervals, mean 53.3 req/s).
		{"a bucket of three intervals", 15, 62, 63},
		// Against its own 30 s bucket (six intervals' room; the three observed so far, mean
		// 66.7 req/s), as before buckets of one interval were widened.
		{"a bucket of six intervals", 30, 48, 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := withBurst(tt.bucket).burst(5)
			require.GreaterOrEqual(t, b, tt.wantMin)
			require.LessOrEqual(t, b, tt.wantMax)
		})
	}
	steady := &AheadState{BucketS: 5}
	feed(steady, 120, func(float64) float64 { return 40 })
	require.Zero(t, steady.burst(5), "steady arrivals have no burst")
	_, ok := (&AheadState{BucketS: 5}).burstReference(0, 5)
	require.False(t, ok, "no bucket observed")
}

// TestAhead_DecodeEdgeOnlyWhenSteady: an ITL near the SLA after a burst (the burst's backlog
// reaching the decode pool) does not teach a per-engine decode rate, even when a bucket is
// a single interval (the demo's 10 s startup); the same ITL under steady arrivals does.
func TestAhead_DecodeEdgeOnlyWhenSteady(t *testing.T) {
	p, st := aheadPlannerWith(t, func(c *config.Config) { c.ExpectedStartupSeconds = 10 })
	require.Equal(t, 5.0, st.Ahead.BucketS)
	now := 0.0
	step := func(rate float64) {
		now += 5
		in := aheadInput(now, 4, 4, 4, 4, rate)
		if now > 10 {
			in.Traffic.ITLMs = ptr(9.0) // 90% of the SLA, once the arrivals can be judged
		}
		next, _, _, err := p.Decide(st, in)
		require.NoError(t, err)
		st = next // the pools stay as they are
	}
	for range 12 {
		step(5)
		step(60)
	}
	require.Zero(t, st.Ahead.DecodeEdgeRPS, "bursty arrivals: the ITL is the bursts'")
	for range 20 {
		step(20)
	}
	require.InDelta(t, 5, st.Ahead.DecodeEdgeRPS, 1, "steady 20 req/s on 4 decode engines at 90%% of the ITL SLA")
}

// TestAhead_DecodeEdgeNeedsTwoIntervalsAtTheWatch: on a disaggregated decode pool one
// interval's mean ITL at the watch (one slow request among a few) teaches no edge, nor do two
// apart; two in a row do. An aggregated pool learns from one: its ITL carries the prompts'
// chunks, which come with the rate.
func TestAhead_DecodeEdgeNeedsTwoIntervalsAtTheWatch(t *testing.T) {
	run := func(p *Planner, st State, readyP, readyD int, itls []float64) State {
		t.Helper()
		now := 0.0
		for range 12 { // a minute of steady arrivals under the watch
			now += 5
			next, _, _, err := p.Decide(st, aheadInput(now, readyP, readyD, readyP, readyD, 20))
			require.NoError(t, err)
			st = next
		}
		for _, itl := range itls {
			now += 5
			in := aheadInput(now, readyP, readyD, readyP, readyD, 20)
			in.Traffic.ITLMs = ptr(itl)
			next, _, _, err := p.Decide(st, in)
			require.NoError(t, err)
			st = next
		}
		return st
	}
	tests := []struct {
		name  string
		itls  []float64 // the observed ITL of the intervals after the calm minute (SLA 10 ms)
		learn bool
	}{
		{"one interval at the watch", []float64{5, 9, 5, 5}, false},
		{"two apart", []float64{9, 5, 9, 5}, false},
		{"two in a row", []float64{5, 9, 9, 5}, true},
		{"under the watch", []float64{7.9, 7.9, 7.9}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, st := aheadPlanner(t)
			st = run(p, st, 4, 4, tc.itls)
			if tc.learn {
				require.InDelta(t, 5, st.Ahead.DecodeEdgeRPS, 0.1, "20 req/s over 4 decode engines")
			} else {
				require.Zero(t, st.Ahead.DecodeEdgeRPS)
			}
		})
	}
	// A decode-only deployment's pool is a decode pool too.
	p, st := aheadPlannerWith(t, func(c *config.Config) { c.Mode = config.ModeDecode })
	one := run(p, st, 0, 4, []float64{5, 9, 5, 5})
	require.Zero(t, one.Ahead.DecodeEdgeRPS, "decode only: one interval")
	two := run(p, st, 0, 4, []float64{5, 9, 9, 5})
	require.InDelta(t, 5, two.Ahead.DecodeEdgeRPS, 0.1, "decode only: two in a row")

	p, st = aggAheadPlanner(t)
	st = run(p, st, 0, 4, []float64{5, 9, 5, 5})
	require.InDelta(t, 5, st.Ahead.DecodeEdgeRPS, 0.1, "an aggregated pool: 20 req/s over 4 engines, from one interval")
}

// TestAhead_StartCountsAsNeeded: the deployment found at the start counts as what the first
// bucket needed, so a quiet start followed by demand is a quiet gap like any other; and
// nothing is scaled down before the trend window has been observed.
func TestAhead_StartCountsAsNeeded(t *testing.T) {
	p, st := aheadPlanner(t)
	next, dec, _, err := p.Decide(st, aheadInput(5, 6, 6, 6, 6, 1))
	require.NoError(t, err)
	require.True(t, dec.Empty(), "no scale-down on the first observation")
	require.Equal(t, []int{6}, next.Ahead.NeedPrefill)
	require.Equal(t, []int{6}, next.Ahead.NeedDecode)
	cfg := p.Config()
	lead := cfg.StartupPriorSeconds() + 5
	window := next.Ahead.trendWindow(lead)
	require.Equal(t, 2*lead, window)
	st = next
	now := 5.0
	for ; now+5 < window; now += 5 {
		next, dec, _, err = p.Decide(st, aheadInput(now+5, 6, 6, 6, 6, 1))
		require.NoError(t, err)
		st = next
		require.True(t, dec.Empty(), "at %v: %.0f s observed, less than the trend window", now+5, now+5)
	}
}

func TestFitTrend_Rise(t *testing.T) {
	// Rates at buckets 10..14 (newest first, as forecast collects them).
	at := func(f func(x float64) float64) ([]float64, []float64) {
		var xs, ys []float64
		for i := 14; i >= 10; i-- {
			xs, ys = append(xs, float64(i)), append(ys, f(float64(i)))
		}
		return xs, ys
	}
	tests := []struct {
		name     string
		rate     func(x float64) float64
		h        float64
		min, max float64
	}{
		{"a line rises by its slope", func(x float64) float64 { return 5 + 2*x }, 3, 6 - 1e-9, 6 + 1e-9},
		{"a falling line never scales down early", func(x float64) float64 { return 50 - 2*x }, 3, 0, 0},
		{"a rise that speeds up keeps the line's slope", func(x float64) float64 { return 5 + (x-10)*(x-10) }, 3, 12 - 1e-9, 12 + 1e-9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			xs, ys := at(tc.rate)
			got := fitTrend(xs, ys).rise(tc.h)
			require.GreaterOrEqual(t, got, tc.min)
			require.LessOrEqual(t, got, tc.max)
		})
	}
	tf := fitTrend([]float64{3, 2, 1}, []float64{30, 20, 10})
	require.InDelta(t, 10, tf.slope, 1e-9)
	require.InDelta(t, 0, tf.variance, 1e-9)
}

func TestAheadState_BucketsAhead(t *testing.T) {
	tests := []struct {
		name     string
		covered  float64
		lead     float64
		from, to int
	}{
		{"the newest bucket still filling counts", 5, 65, 0, 2},
		{"a full newest bucket is the past", 30, 65, 1, 3},
		{"a lead within the bucket", 5, 10, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := AheadState{BucketS: 30, Count: []float64{1, 1}, Covered: []float64{30, tc.covered}}
			from, to := a.bucketsAhead(tc.lead)
			require.Equal(t, tc.from, from)
			require.Equal(t, tc.to, to)
		})
	}
	from, to := (&AheadState{BucketS: 30}).bucketsAhead(65)
	require.Zero(t, from+to, "no history")
}

func TestAheadState_SeasonalFit(t *testing.T) {
	wave := func(t float64) float64 { return 25 - 20*math.Cos(2*math.Pi*t/600) }
	tests := []struct {
		name    string
		rate    func(t float64) float64
		trusted bool
	}{
		{"a clean period is followed", wave, true},
		{"a period whose last cycle changed shape is not", func(t float64) float64 {
			if t > 1200 {
				return 25 + 20*math.Cos(2*math.Pi*t/300) // twice as fast now
			}
			return wave(t)
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := AheadState{BucketS: 30}
			feed(&a, 1500, tc.rate)
			spread, recent := a.seasonalFit(20, 1)
			if tc.trusted {
				require.GreaterOrEqual(t, recent, aheadTrustedCorrelation)
				require.Less(t, spread, 0.5, "noise-free: the period misses nothing")
			} else {
				require.Less(t, recent, aheadTrustedCorrelation)
			}
		})
	}
	a := AheadState{BucketS: 30}
	feed(&a, 1500, wave)
	require.InDelta(t, 0, a.seasonalMiss(20, 1), 1e-9, "the newest bucket is what the period said")
	require.InDelta(t, 0, (&AheadState{BucketS: 30}).seasonalMiss(20, 1), 0, "no history, no miss")
}

func TestCorrelationLowerBound(t *testing.T) {
	require.InDelta(t, 0.5, correlationLowerBound(0.83, 7), 0.02, "0.83 over 7 pairs: the demo's spurious 35 s period")
	require.Greater(t, correlationLowerBound(0.99, 20), 0.95, "a clean sinusoid's two periods of 30 s buckets")
	require.Greater(t, correlationLowerBound(1.01, 20), 0.99, "the scaled autocorrelation can pass 1")
	require.Less(t, correlationLowerBound(0.9, 30), 0.9)
	require.Greater(t, correlationLowerBound(0.9, 300), correlationLowerBound(0.9, 30), "more pairs, a tighter bound")
	require.Equal(t, -1.0, correlationLowerBound(0.99, 3), "too few pairs to say anything")
}

// TestAheadState_ShortHistoryPeriodNotFollowed: two short bursts a few buckets apart show a
// high autocorrelation at their distance over a handful of buckets; that is no period to
// follow (following one lifts the holds that wait for the next burst).
func TestAheadState_ShortHistoryPeriodNotFollowed(t *testing.T) {
	// The demo's first 70 s (5 s buckets): two bursts 35 s apart, not quite alike.
	rates := []float64{100, 60, 5, 5, 20, 5, 5, 80, 90, 5, 15, 5, 5, 10}
	pattern := func(t float64) float64 { return rates[min(len(rates)-1, int(t/5))] }
	a := AheadState{BucketS: 5}
	feed(&a, 70, pattern)
	f, ok := a.forecast(12, 5)
	require.True(t, ok)
	require.Equal(t, 35.0, f.PeriodS, "the 35 s lag is found")
	require.GreaterOrEqual(t, f.Correlation, aheadTrustedCorrelation, "and it is high")
	require.False(t, f.Trusted, "but one repeat over 70 s is not evidence enough to follow it")

	// The same pattern for ten minutes: now it is a period.
	b := AheadState{BucketS: 5}
	feed(&b, 600, func(t float64) float64 { return rates[int(t/5)%len(rates)] })
	f, ok = b.forecast(12, 5)
	require.True(t, ok)
	require.True(t, f.Trusted, "r %.2f", f.Correlation)
}

// TestAheadState_PeriodAfterOneAndAHalf: a clear period is followed once one and a half
// periods are in the history, half a period sooner than two; a lag measured over less than a
// period of overlap must already reach the trusted correlation over its pairs, so a noisy
// repeat found that early is not a period to raise the forecast to.
func TestAheadState_PeriodAfterOneAndAHalf(t *testing.T) {
	wave := func(t float64) float64 { return 25 - 20*math.Cos(2*math.Pi*t/600) }
	// A repeat of a 20-bucket pattern under noise as large as the pattern itself.
	noise := []float64{9, -7, 11, -12, 4, -9, 13, 2, -11, 8, -5, 12, -10, 6, -13, 10, -3, 7, -8, 5}
	noisy := func(t float64) float64 {
		i := int(t / 30)
		return math.Max(0, wave(t)+noise[(i*7+i/20)%len(noise)])
	}
	tests := []struct {
		name    string
		rate    func(t float64) float64
		until   float64
		period  bool // the 600 s lag is a period
		trusted bool
	}{
		{"a clean period after one and a half periods", wave, 900, true, true},
		{"not before", wave, 780, false, false},
		{"a noisy repeat after one and a half periods is not read as a period", noisy, 900, false, false},
		{"the same noisy repeat after two periods is, not followed", noisy, 1200, true, false},
		{"two bursts 600 s apart on a flat rate are no period", func(t float64) float64 {
			if (t >= 120 && t < 150) || (t >= 720 && t < 750) {
				return 40
			}
			return 10
		}, 900, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := AheadState{BucketS: 30}
			feed(&a, tc.until, tc.rate)
			lag, acf, pairs, ok := a.period()
			if !tc.period {
				require.False(t, ok && 2*lag > len(a.Count), "lag %d, r %.2f over %d pairs", lag, acf, pairs)
				return
			}
			require.True(t, ok)
			within := 1.0 // a bucket either way: the clean wave
			if !tc.trusted {
				within = 2 // under noise as large as the pattern
			}
			require.InDelta(t, 20, lag, within, "r %.2f over %d pairs", acf, pairs)
			require.LessOrEqual(t, acf, 1.0+1e-9, "a correlation")
			f, ok := a.forecast(65, 5)
			require.True(t, ok)
			require.Equal(t, tc.trusted, f.Trusted, "r %.2f over %d pairs", acf, pairs)
		})
	}
}

// TestAheadState_PeriodAfterTrough: a period is a peak of the autocorrelation after it has
// fallen to zero. A rate whose level wanders without repeating — a ramp, or a level that
// drifts up and back down once — correlates with itself most at the shortest lags, which
// read as a period without the trough (both below: 4 buckets at r 0.78), and a period
// used bounds the forecast from below by the rates a period ago.
func TestAheadState_PeriodAfterTrough(t *testing.T) {
	tests := []struct {
		name   string
		rate   func(t float64) float64
		until  float64
		period bool
	}{
		{"a ramp", func(t float64) float64 { return 5 + 30*t/1200 }, 1200, false},
		{"one slow hump", func(t float64) float64 { return 20 - 15*math.Cos(2*math.Pi*t/1500) }, 1200, false},
		{"a wave with a 300 s period", func(t float64) float64 { return 20 - 15*math.Cos(2*math.Pi*t/300) }, 1200, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := AheadState{BucketS: 30}
			feed(&a, tc.until, tc.rate)
			lag, acf, pairs, ok := a.period()
			require.Equal(t, tc.period, ok, "lag %d, r %.2f over %d pairs", lag, acf, pairs)
			if tc.period {
				require.Zero(t, lag%10, "the period or a multiple of it: lag %d", lag)
			}
		})
	}
}

func TestLeaveOneOutCorrelation(t *testing.T) {
	line := []float64{1, 2, 3, 4, 5, 6, 7, 8}
	require.InDelta(t, 1, leaveOneOutCorrelation(line, line), 1e-9)
	flat := []float64{10, 10, 10, 40, 10, 10, 10, 10}
	require.InDelta(t, 1, stat.Correlation(flat, flat, nil), 1e-9, "one coincident burst: Pearson says 1")
	require.Zero(t, leaveOneOutCorrelation(flat, flat), "without it nothing varies")
	noisy := []float64{9, 11, 10, 40, 12, 8, 10, 11}
	other := []float64{11, 9, 12, 40, 9, 10, 12, 8}
	require.Greater(t, stat.Correlation(noisy, other, nil), 0.95)
	require.Less(t, leaveOneOutCorrelation(noisy, other), 0.2, "the burst pair carried it all")
	require.Zero(t, leaveOneOutCorrelation([]float64{1, 2}, []float64{1, 2}), "too few pairs")
}

// TestAheadState_SeasonalScaleWholePeriods: how the pattern has grown is measured over two
// whole periods; with one and a half in the history the period before is only partly there,
// and its mean depends on which phases it holds, so the rate a period ago is taken as it was.
func TestAheadState_SeasonalScaleWholePeriods(t *testing.T) {
	wave := func(t float64) float64 { return 25 - 20*math.Cos(2*math.Pi*t/600) }
	grown := func(t float64) float64 {
		if t >= 600 {
			return 1.2 * wave(t)
		}
		return wave(t)
	}
	for _, until := range []float64{900, 1500} {
		a := AheadState{BucketS: 30}
		feed(&a, until, grown)
		lag, _, _, ok := a.period()
		require.True(t, ok)
		f, ok := a.forecast(65, 5)
		require.True(t, ok)
		from, to := a.bucketsAhead(65)
		if !f.Trusted {
			to++
		}
		top, last := 0.0, len(a.Count)-1 // the lead time's buckets a period ago
		for h := from; h <= to; h++ {
			top = math.Max(top, a.rate(last-lag+h))
		}
		if until == 900 {
			require.InDelta(t, top, f.Seasonal, 1e-9, "one and a half periods: no growth measured")
		} else {
			require.Greater(t, f.Seasonal, 1.05*top, "two whole periods, the second grown: scaled up")
		}
	}
}

func TestAheadState_ForecastFollowsTrustedPeriod(t *testing.T) {
	// Past the peak of a clean sinusoid the followed period says the rate falls: the
	// forecast is below the level (the newest bucket's rate), which the trend never goes
	// under.
	a := AheadState{BucketS: 30}
	wave := func(t float64) float64 { return 25 - 20*math.Cos(2*math.Pi*t/600) }
	feed(&a, 1560, wave) // 60 s past the third peak
	f, ok := a.forecast(65, 5)
	require.True(t, ok)
	require.True(t, f.Trusted)
	require.Less(t, f.Rate, f.Level)
	require.Greater(t, f.Rate, wave(1560+65), "the whole lead time is covered")
}

func TestAheadState_ForecastUnobservedPeriodAgoNotFollowed(t *testing.T) {
	// A clean sinusoid whose buckets a period ago over the lead time, and the one after them,
	// went unobserved (a gap in the traffic seen): the period is still found, but it cannot
	// say what comes, so the forecast is the trend's and the period is not followed. With
	// the one after them observed, that one bounds the forecast, as for a period not
	// followed.
	wave := func(t float64) float64 { return 25 - 20*math.Cos(2*math.Pi*t/600) }
	a := AheadState{BucketS: 30}
	feed(&a, 1560, wave)
	period, _, _, ok := a.period()
	require.True(t, ok)
	last := len(a.Count) - 1
	from, to := a.bucketsAhead(65)
	for h := from; h <= to+1; h++ {
		a.Count[last-period+h], a.Covered[last-period+h] = 0, 0
	}
	_, _, _, ok = a.period()
	require.True(t, ok, "the period is still found")
	f, ok := a.forecast(65, 5)
	require.True(t, ok)
	require.False(t, f.Trusted)
	require.Zero(t, f.Seasonal)
	require.GreaterOrEqual(t, f.Rate, f.Level, "the trend's forecast never goes under the level")

	// The lead time's buckets a period ago unobserved, the one after them observed: a
	// period not followed reads that one too, which bounds the forecast from below.
	b := AheadState{BucketS: 30}
	feed(&b, 1560, wave)
	g, ok := b.forecast(65, 5)
	require.True(t, ok)
	require.True(t, g.foreseen(), "followed on steady arrivals: the extra bucket is not read")
	for h := from; h <= to; h++ {
		b.Count[last-period+h], b.Covered[last-period+h] = 0, 0
	}
	// Still trusted on its correlation and fit, and calm: only the unobserved buckets stop
	// it being followed.
	lag, acf, pairs, ok := b.period()
	require.True(t, ok)
	require.Equal(t, period, lag)
	require.GreaterOrEqual(t, correlationLowerBound(acf, pairs), aheadTrustedCorrelation)
	_, recent := b.seasonalFit(period, 1)
	require.GreaterOrEqual(t, recent, aheadTrustedCorrelation)
	g, ok = b.forecast(65, 5)
	require.True(t, ok)
	require.False(t, g.Trusted)
	require.Greater(t, g.Seasonal, 0.0, "the bucket after the lead time's, a period ago")
	require.GreaterOrEqual(t, g.Rate, g.Seasonal)
}

func TestPeakSince(t *testing.T) {
	h := []Recommendation{{At: 10, Replicas: 5}, {At: 40, Replicas: 3}, {At: 60, Replicas: 2}}
	tests := []struct {
		since float64
		want  int
	}{{0, 5}, {10, 5}, {11, 3}, {50, 2}, {61, 0}}
	for _, tc := range tests {
		require.Equal(t, tc.want, peakSince(h, tc.since), "since %v", tc.since)
	}
}

func TestAhead_HoldWindow(t *testing.T) {
	p, st := aheadPlanner(t)
	st.Ahead = &AheadState{BucketS: 30}
	tk := newTick(p, &st, 1, 1)
	require.Equal(t, 65.0, tk.aheadHoldWindow(65, false), "not foreseen (no followed period, or bursts): the lead time")
	require.Equal(t, 30.0, tk.aheadHoldWindow(65, true), "foreseen: one bucket")
	require.Equal(t, 15.0, tk.aheadHoldWindow(15, true), "never more than the lead time")
}

func TestAheadState_ForecastPeriodHorizon(t *testing.T) {
	wave := func(t float64) float64 { return 25 - 20*math.Cos(2*math.Pi*t/600) }
	// Rising at 1380 s, a followed period on steady arrivals looks a period back over the
	// buckets the next 65 s fall in ([1380, 1470) s), not one more.
	a := AheadState{BucketS: 30}
	feed(&a, 1380, wave)
	f, ok := a.forecast(65, 5)
	require.True(t, ok)
	require.True(t, f.Trusted)
	require.Greater(t, f.Seasonal, wave(1440))
	require.Less(t, f.Seasonal, wave(1470))
	// Bursts within the buckets: one bucket more (the period is only known to a bucket).
	b := AheadState{BucketS: 30}
	feed(&b, 1380, func(t float64) float64 {
		if int(t/5)%6 == 0 {
			return 6 * wave(t)
		}
		return 0
	})
	f, ok = b.forecast(65, 5)
	require.True(t, ok)
	require.Greater(t, f.Seasonal, wave(1470))
}

func TestPromptSpread(t *testing.T) {
	fpm := func(n int64, v float64) perf.FPM {
		return perf.FPM{Version: perf.FPMVersion, Scheduled: perf.ScheduledRequests{NumPrefillRequests: n, VarPrefillLength: v}}
	}
	queued := func(n int64, v float64) perf.FPM {
		return perf.FPM{Version: perf.FPMVersion, Queued: perf.QueuedRequests{NumPrefillRequests: n, VarPrefillLength: v}}
	}
	steady := func() *AheadState { // ten buckets of 3000-token prompts: no spread between buckets
		a := &AheadState{BucketS: 30}
		for now := 5.0; now <= 300; now += 5 {
			a.record(now, 5, 50, 3000, 300)
		}
		return a
	}
	tests := []struct {
		name     string
		ahead    *AheadState
		fpm      *FPMObservations
		want     float64
		tolerate float64
	}{
		{"nothing known: exponential", &AheadState{BucketS: 30}, nil, 1, 0},
		{"batches of one say nothing", &AheadState{BucketS: 30}, &FPMObservations{Prefill: []perf.FPM{fpm(1, 0), fpm(1, 0)}}, 1, 0},
		{"equal buckets: no spread", steady(), nil, 0, 1e-12},
		{"equal buckets, batches of one ignored", steady(), &FPMObservations{Prefill: []perf.FPM{fpm(1, 0)}}, 0, 1e-12},
		// Two prompts of 1500 and 4500: population variance 1500², sample variance 2·1500².
		{"a batch of two, unbiased", &AheadState{BucketS: 30}, &FPMObservations{Prefill: []perf.FPM{fpm(2, 1500*1500)}}, 0.5, 1e-12},
		{"samples and waiting prompts pooled", &AheadState{BucketS: 30},
			&FPMObservations{Prefill: []perf.FPM{fpm(2, 1500*1500)}, PrefillSamples: []perf.FPM{queued(3, 0), fpm(2, 1500*1500)}}, (2 + 2 + 0) * 1500 * 1500 / 4.0 / 9e6, 1e-12},
		{"at most 4", &AheadState{BucketS: 30}, &FPMObservations{Prefill: []perf.FPM{fpm(4, 1e9)}}, 4, 0},
		{"an FPM of another schema is skipped", &AheadState{BucketS: 30}, &FPMObservations{Prefill: []perf.FPM{{Version: perf.FPMVersion + 1, Scheduled: perf.ScheduledRequests{NumPrefillRequests: 2, VarPrefillLength: 1e6}}}}, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tk := &tick{st: &State{Ahead: tc.ahead}, in: Input{FPM: tc.fpm}}
			require.InDelta(t, tc.want, tk.promptSpread(Prefill, 3000), tc.tolerate)
		})
	}

	// Buckets whose mean prompt differs: two means of n prompts differ by 2σ²/n on average.
	a := &AheadState{BucketS: 30}
	for i := range 10 {
		isl := []float64{2800, 3200}[i%2]
		a.record(float64(30*i+15), 30, 100, isl, 300)
	}
	tk := &tick{st: &State{Ahead: a}}
	// Nine differences of 400 between means of 100 prompts: σ² = 400² / (2/100) each.
	require.InDelta(t, 400*400*50/9e6, tk.promptSpread(Prefill, 3000), 1e-9)

	// A mix drifting from 2,000 to 2,900 tokens a bucket at a time, each bucket's prompts
	// alike: the neighbours differ little, so it is not read as a spread of the prompts.
	a = &AheadState{BucketS: 30}
	for i := range 10 {
		a.record(float64(30*i+15), 30, 100, 2000+100*float64(i), 300)
	}
	tk = &tick{st: &State{Ahead: a}}
	require.Less(t, tk.promptSpread(Prefill, 2450), 0.1)

	// Absurd lengths never give NaN.
	for _, isl := range []float64{1e-300, 0, -1, math.NaN(), math.Inf(1)} {
		v := tk.promptSpread(Prefill, isl)
		require.False(t, math.IsNaN(v), "isl %v", isl)
		require.GreaterOrEqual(t, v, 0.0)
		require.LessOrEqual(t, v, 4.0)
	}
}

// TestAhead_BurstyHold: when arrivals come in bursts over twice the level, a scale-down
// holds the highest count needed over the last aheadBurstHoldLeads lead times (a burst much
// shorter than the lead time is over before capacity ordered for it is ready); otherwise it
// holds the last lead time's only.
func TestAhead_BurstyHold(t *testing.T) {
	const lead = 65.0 // a 60 s startup and a 5 s interval; buckets of 30 s
	tests := []struct {
		name      string
		burstAgo  int // buckets before the newest in which prefill needed 6
		bursty    bool
		want      int
		wantNoted bool
	}{
		{"bursty, 90 s ago: held", 3, true, 6, true},
		{"bursty, 180 s ago: still within 3 lead times", 6, true, 6, true},
		{"bursty, 210 s ago: released", 7, true, 2, false},
		{"steady, 90 s ago: released after one lead time", 3, false, 2, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, st := aheadPlanner(t)
			a := st.Ahead
			a.BucketS = 30
			for i := range 10 { // 300 s observed: past the first scale-down's trend window
				a.Count, a.ISL, a.OSL, a.Covered = append(a.Count, 60), append(a.ISL, 60*3000), append(a.OSL, 60*300), append(a.Covered, 30)
				need := 2
				if i == 9-tc.burstAgo {
					need = 6
				}
				a.NeedPrefill, a.NeedDecode = append(a.NeedPrefill, need), append(a.NeedDecode, 1)
			}
			tk := newTick(p, &st, 6, 1)
			tk.in = Input{Now: 300, Traffic: &TrafficObservation{DurationS: 5, NumReq: ptr(10.0)}}
			dec := tk.aheadDecide(map[Component]int{Prefill: 2, Decode: 1}, lead, false, false, tc.bursty, false)
			got := 6
			if dec.Prefill != nil {
				got = *dec.Prefill
			}
			require.Equal(t, tc.want, got)
			noted := slices.ContainsFunc(tk.diag.Notes, func(n string) bool { return strings.Contains(n, "arrivals come in bursts") })
			require.Equal(t, tc.wantNoted, noted, tk.diag.Notes)
		})
	}
}

// TestAhead_FallingHold: a forecast that falls through the horizon (fallingHold) holds a
// scale-down for one bucket, not the lead time: the 6 engines needed 45 s ago are released.
func TestAhead_FallingHold(t *testing.T) {
	const lead = 65.0 // a 60 s startup and a 5 s interval; buckets of 30 s
	for _, tc := range []struct {
		name    string
		falling bool
		want    int
	}{
		{"not falling: the lead time's hold keeps what was needed 45 s ago", false, 6},
		{"falling through the horizon: one bucket's hold", true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, st := aheadPlanner(t)
			a := st.Ahead
			a.BucketS = 30
			for range 10 { // 300 s observed: past the first scale-down's trend window
				a.Count, a.ISL, a.OSL, a.Covered = append(a.Count, 60), append(a.ISL, 60*3000), append(a.OSL, 60*300), append(a.Covered, 30)
				a.NeedPrefill, a.NeedDecode = append(a.NeedPrefill, 2), append(a.NeedDecode, 1)
			}
			st.StabilizationPrefill = []Recommendation{{At: 255, Replicas: 6}}
			tk := newTick(p, &st, 6, 1)
			tk.in = Input{Now: 300, Traffic: &TrafficObservation{DurationS: 5, NumReq: ptr(10.0)}}
			dec := tk.aheadDecide(map[Component]int{Prefill: 2, Decode: 1}, lead, false, false, false, tc.falling)
			got := 6
			if dec.Prefill != nil {
				got = *dec.Prefill
			}
			require.Equal(t, tc.want, got)
			noted := slices.ContainsFunc(tk.diag.Notes, func(n string) bool {
				return strings.Contains(n, "scale-down held for 30 s, not the lead time, whose 6 it would have kept")
			})
			require.Equal(t, tc.falling, noted, tk.diag.Notes)
		})
	}
}

// TestAhead_FallingHoldWhen: the short hold needs a fall that lasts the horizon, calm
// arrivals and a disaggregated deployment.
func TestAhead_FallingHoldWhen(t *testing.T) {
	lasting := Forecast{Level: 20, Fall: 8, FallLasts: true}
	for _, tc := range []struct {
		name string
		f    Forecast
		agg  bool
		want bool
	}{
		{"a lasting fall on calm arrivals", lasting, false, true},
		{"a fall the parabola turns within the horizon", Forecast{Level: 20, Fall: 8}, false, false},
		{"bursty arrivals", Forecast{Level: 20, Fall: 8, FallLasts: true, Burst: 25}, false, false},
		{"an aggregated deployment", lasting, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, st := aheadPlannerWith(t, func(c *config.Config) {
				if tc.agg {
					c.Mode = config.ModeAgg
				}
			})
			tk := newTick(p, &st, 1, 1)
			require.Equal(t, tc.want, tk.fallingHold(tc.f))
		})
	}
}

func TestAheadState_ForecastMiss(t *testing.T) {
	const lead, interval = 65.0, 5.0 // a horizon of 70 s: 3 buckets of 30 s
	// history is 40 buckets at 10 req/s, with the forecast made in each set by forecastAt
	// (bucket index → rate; 0: none). The newest bucket (39) is not counted, as it may be
	// incomplete; the misses measured are those of buckets 13–35: their 3-bucket lead times
	// end by bucket 38, and they go back 10 lead times (22 buckets) from bucket 35.
	history := func(forecastAt func(b int) float64) *AheadState {
		a := &AheadState{BucketS: 30}
		for now := 5.0; now <= 40*30; now += 5 {
			a.record(now, 5, 50, 3000, 300)
			a.recordForecast(forecastAt(len(a.Count)-1), forecastAt(len(a.Count)-1))
		}
		require.Len(t, a.Forecast, len(a.Count))
		return a
	}
	// at gives the forecast low in the buckets listed, 10 elsewhere.
	at := func(low float64, buckets ...int) func(int) float64 {
		return func(b int) float64 {
			if slices.Contains(buckets, b) {
				return low
			}
			return 10
		}
	}
	tests := []struct {
		name       string
		forecastAt func(b int) float64
		want       float64
		windows    int
	}{
		{"exact: no miss", func(int) float64 { return 10 }, 0, 23},
		{"2 req/s under every time: raised by 2", func(int) float64 { return 8 }, 2, 23},
		{"over every time: never lowered", func(int) float64 { return 12 }, 0, 23},
		{"4 of 23 windows 6 under: more than one in ten, raised by 6", at(4, 15, 20, 25, 30), 6, 23},
		{"2 of 23 windows under: within the quantile", at(4, 20, 25), 0, 23},
		{"misses older than 10 lead times do not count", at(1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12), 0, 23},
		{"too few forecasts measured yet", func(b int) float64 { return 5 * float64(min(1, max(0, b-31))) }, 0, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := history(tc.forecastAt)
			miss, windows := a.forecastMiss(lead, interval)
			require.InDelta(t, tc.want, miss, 1e-9)
			require.Equal(t, tc.windows, windows)
		})
	}

	// Trimmed to the history's 120 buckets, the forecasts stay aligned with the buckets.
	long := &AheadState{BucketS: 30}
	for now := 5.0; now <= 130*30; now += 5 {
		long.record(now, 5, 50, 3000, 300)
		long.recordForecast(8, 8)
	}
	require.Len(t, long.Count, AheadHistoryBuckets)
	require.Len(t, long.Forecast, AheadHistoryBuckets)
	miss, windows := long.forecastMiss(lead, interval)
	require.InDelta(t, 2, miss, 1e-9)
	require.Equal(t, 23, windows)

	// The forecast adds its misses unless it follows a period (which adds its own).
	a := history(func(int) float64 { return 8 })
	f, ok := a.forecast(lead, interval)
	require.True(t, ok)
	require.False(t, f.Trusted, "a flat rate has no period")
	require.InDelta(t, 2, f.Missed, 1e-9)
	require.Equal(t, 23, f.MissWindows)
	require.InDelta(t, f.Level+2, f.Rate, 1e-9, "a steady rate: the level and its misses")
}

// TestForecast_CarryMisses: on calm arrivals the misses are added only beyond the rise the
// forecast already has above its level and margins; bursty arrivals and a followed period
// keep them as they are.
func TestForecast_CarryMisses(t *testing.T) {
	z := aheadQuantileZ
	tests := []struct {
		name                 string
		f                    Forecast
		carried, missed, out float64
	}{
		{"a rise larger than the misses carries them all", Forecast{Level: 10, Missed: 3, Rate: 10 + 5 + 3}, 3, 0, 15},
		{"a smaller rise carries its part", Forecast{Level: 10, Missed: 6, Rate: 10 + 2 + 6}, 2, 4, 16},
		{"the margins are no rise", Forecast{Level: 10, Spread: 1, Missed: 3, Rate: 10 + z + 3}, 0, 3, 10 + z + 3},
		{"a flat forecast adds its misses whole", Forecast{Level: 10, Missed: 3, Rate: 13}, 0, 3, 13},
		{"bursty arrivals: added whole", Forecast{Level: 10, Burst: 11, Missed: 3, Rate: 10 + 5 + 11 + 3}, 0, 3, 29},
		{"no misses: nothing to carry", Forecast{Level: 10, Rate: 15}, 0, 0, 15},
		{"a followed period adds none of these", Forecast{Trusted: true, Level: 10, Missed: 3, Rate: 18}, 0, 3, 18},
		{"a forecast under its level and margins carries nothing", Forecast{Level: 10, Spread: 1, Missed: 3, Rate: 10 + 3}, 0, 3, 13},
		{"bursts at the level are calm", Forecast{Level: 10, Burst: 10, Missed: 3, Rate: 10 + 5 + 10 + 3}, 3, 0, 25},
		{"a fall larger than the misses holds them all off", Forecast{Level: 10, Fall: 4, Missed: 3, Rate: 13}, 0, 0, 10},
		{"a smaller fall holds its part off", Forecast{Level: 10, Fall: 1, Missed: 3, Rate: 13}, 0, 2, 12},
		{"bursty arrivals: a fall holds nothing off", Forecast{Level: 10, Burst: 11, Fall: 4, Missed: 3, Rate: 10 + 11 + 3}, 0, 3, 24},
		{"a followed period: nor there", Forecast{Trusted: true, Level: 10, Fall: 4, Missed: 3, Rate: 18}, 0, 3, 18},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.f
			f.carryMisses()
			require.InDelta(t, tc.carried, f.Carried, 1e-9)
			require.InDelta(t, tc.f.Missed-tc.carried-tc.missed, f.HeldOff, 1e-9, "the rest was held off by the fall")
			require.InDelta(t, tc.missed, f.Missed, 1e-9)
			require.InDelta(t, tc.out, f.Rate, 1e-9)
			require.InDelta(t, tc.f.Rate-tc.f.Missed, f.Rate-f.Missed, 1e-9, "the forecast before its misses is unchanged (recordForecast)")
		})
	}
}

// TestForecast_Fall: the fall that holds a rise's misses off is the trend's slope now — the
// line's on a clear fall, the window's parabola's where it bends — and none on a flat rate's
// noise or at a trough the line still falls through.
func TestForecast_Fall(t *testing.T) {
	const lead, interval = 65.0, 5.0
	t.Run("a clear fall: the line's, over the horizon", func(t *testing.T) {
		a := AheadState{BucketS: 30}
		feed(&a, 300, func(t float64) float64 { return 50 - t/10 })
		f, ok := a.forecast(lead, interval)
		require.True(t, ok)
		require.Less(t, f.Slope, 0.0)
		require.InDelta(t, -f.Slope*a.horizon(lead, interval), f.Fall, 1e-9)
		require.InDelta(t, 0.1*a.horizon(lead, interval), f.Fall, 0.01)
		require.True(t, f.FallLasts, "a line falls through the horizon")
	})
	t.Run("a bend: the parabola's slope at the newest interval", func(t *testing.T) {
		a := AheadState{BucketS: 30}
		feed(&a, 300, func(t float64) float64 { return 50 - 0.0005*(t-100)*(t-100) }) // a peak at 100 s
		f, ok := a.forecast(lead, interval)
		require.True(t, ok)
		slope := -0.001 * (297.5 - 100) // the rate's slope at the newest interval's middle
		require.InDelta(t, -slope*a.horizon(lead, interval), f.Fall, 1e-6)
		require.Greater(t, f.Fall, -f.Slope*a.horizon(lead, interval), "steeper now than the line through the window")
		require.True(t, f.FallLasts, "past a peak, the parabola falls on through the horizon")
	})
	t.Run("a fall the buckets leave within chance: the interval rates' line", func(t *testing.T) {
		a := AheadState{BucketS: 30}
		// −0.05 req/s per s, with each bucket 3 req/s above or below the line: through the
		// window's five buckets the fall is within chance, through its 26 intervals it is not.
		rate := func(t float64) float64 { return 40 - t/20 + 3*float64(1-2*(int(t/30)%2)) }
		feed(&a, 300, rate)
		f, ok := a.forecast(lead, interval)
		require.True(t, ok)
		var xs, ys []float64
		for i := len(a.Count) - 1; i >= 0 && float64(len(a.Count)-1-i)*a.BucketS < a.trendWindow(lead); i-- {
			xs, ys = append(xs, float64(i)), append(ys, a.rate(i))
		}
		require.False(t, fitTrend(xs, ys).fallsOnItsOwn(len(xs)), "the buckets' line: within chance")
		cv, curved := a.curve(a.trendWindow(lead), interval)
		require.False(t, curved, "no bend")
		il := fitIntervals(cv.ys)
		require.True(t, il.fallsOnItsOwn(len(cv.ys)), "the intervals' line: beyond chance")
		require.Positive(t, f.Fall)
		require.InDelta(t, -il.slope/interval*a.horizon(lead, interval), f.Fall, 1e-9)
	})
	t.Run("a flat rate's noise: none", func(t *testing.T) {
		a := AheadState{BucketS: 30}
		noise := []float64{1.5, -2, 0.5, 2, -1, -0.5, 1, -1.5, 2, -2}
		feed(&a, 300, func(t float64) float64 { return 20 + noise[int(t/5)%len(noise)] })
		f, ok := a.forecast(lead, interval)
		require.True(t, ok)
		require.Zero(t, f.Fall, "slope %.4f", f.Slope)
	})
	sinusoid := func(t float64) float64 { return 25 - 20*math.Cos(2*math.Pi*t/300) } // 5–45 req/s, troughs at 0, 300 s
	t.Run("down a wave's fall: its misses held off", func(t *testing.T) {
		a := AheadState{BucketS: 30}
		f := feedForecasting(&a, 260, sinusoid)
		require.Greater(t, f.Fall, 10.0, "falling at about 0.3 req/s per s")
		require.Positive(t, f.HeldOff, "the first rise's misses, held off")
		require.Zero(t, f.Missed, "all of them: the fall is larger")
		require.True(t, f.FallLasts, "the parabola through the window is still concave: it does not see the trough at 300 s coming")
	})
	t.Run("at a trough: the fall now, but the parabola turns within the horizon", func(t *testing.T) {
		a := AheadState{BucketS: 30}
		f := feedForecasting(&a, 310, sinusoid)
		require.Positive(t, f.Fall, "the newest rates still fall")
		require.False(t, f.FallLasts)
	})
	t.Run("a step up: no fall, though a parabola bends over it", func(t *testing.T) {
		a := AheadState{BucketS: 30}
		f := feedForecasting(&a, 360, func(t float64) float64 {
			if t < 250 {
				return 10
			}
			return 40
		})
		require.Positive(t, f.Step)
		require.Zero(t, f.Fall)
		require.Zero(t, f.HeldOff)
	})
	t.Run("past the trough: the line still falls, the rate does not", func(t *testing.T) {
		a := AheadState{BucketS: 30}
		f := feedForecasting(&a, 320, sinusoid)
		require.Less(t, f.Slope, 0.0, "the line through the window still falls")
		require.Zero(t, f.Fall, "the parabola has turned")
		require.Zero(t, f.HeldOff)
		require.Positive(t, f.Missed, "the misses are back for the rise")
	})
}

// TestFitTrend_T: the slope's t statistic is the slope over its standard error: large and
// negative on a clear fall, small within the noise, infinite on an exact sloped line, 0 on a
// flat one (stepUp reads a rise that goes on after a step by it).
func TestFitTrend_T(t *testing.T) {
	xs := []float64{0, 1, 2, 3, 4, 5, 6, 7}
	noise := []float64{1, -1, 0.5, -0.5, 1, -1, 0.5, -0.5}
	line := func(slope, noiseScale float64) []float64 {
		ys := make([]float64, len(xs))
		for i, x := range xs {
			ys[i] = 20 + slope*x + noiseScale*noise[i]
		}
		return ys
	}
	q := (distuv.StudentsT{Mu: 0, Sigma: 1, Nu: 6}).Quantile(aheadStepConfidence)
	require.Less(t, fitTrend(xs, line(-2, 1)).t, -q, "a clear fall")
	require.Greater(t, fitTrend(xs, line(2, 1)).t, q, "a clear rise")
	require.Less(t, math.Abs(fitTrend(xs, line(-0.2, 1)).t), q, "a fall within the noise")
	require.True(t, fitTrend(xs, line(-2, 1)).fallsOnItsOwn(len(xs)), "a clear fall")
	require.False(t, fitTrend(xs, line(-0.2, 1)).fallsOnItsOwn(len(xs)), "a fall within the noise")
	require.False(t, fitTrend(xs, line(2, 1)).fallsOnItsOwn(len(xs)), "a rise")
	require.True(t, math.IsInf(fitTrend(xs, []float64{4, 3, 2, 1, 0, -1, -2, -3}).t, -1), "an exact fall")
	require.Zero(t, fitTrend(xs, line(0, 0)).t, "a flat exact line: no slope")
}

// TestAhead_DecodeEdgeNotReadWhileFinishersPredateGrowth: an interval whose finishing
// requests may have started before the decode pool grew at an earlier tick (within the mean
// request duration before the interval, a lead time when that is unknown) teaches no edge:
// they ran in the fewer engines' larger batches.
func TestAhead_DecodeEdgeNotReadWhileFinishersPredateGrowth(t *testing.T) {
	p, st := aheadPlanner(t)
	const lead = 65.0
	tests := []struct {
		name     string
		now      float64
		grewAt   float64  // DecodeGrewAt (0: never grew)
		duration *float64 // the observed mean request duration (nil: unknown)
		want     float64  // the edge learned (0: none)
		before   float64  // DecodeGrewAt before this tick set it (when grewAt is now)
	}{
		{"never grew", 100, 0, ptr(2.3), 10, 0},
		{"grew at the last tick: its requests started before", 100, 95, ptr(2.3), 0, 0},
		{"grew two ticks ago, requests of 2.3 s: all started after", 100, 90, ptr(2.3), 10, 0},
		{"grew two ticks ago, requests of 6 s: some started before", 100, 90, ptr(6.0), 0, 0},
		{"exactly one interval and one duration after it", 100, 92.5, ptr(2.5), 10, 0},
		{"duration unknown: a lead time", 100, 31, nil, 0, 0},
		{"duration unknown, a lead time after it", 100, 30, nil, 10, 0},
		{"an absurd duration counts as a lead time", 100, 30, ptr(1e12), 10, 0},
		{"an unreadable duration counts as a lead time", 100, 31, ptr(math.NaN()), 0, 0},
		{"a negative duration counts as a lead time", 100, 31, ptr(-2.0), 0, 0},
		{"an infinite duration counts as a lead time", 100, 30, ptr(math.Inf(1)), 10, 0},
		{"grew at this tick: the engines ready all the interval count instead", 100, 100, ptr(2.3), 10, 0},
		{"grew at this tick and at the one before: the earlier growth counts", 100, 100, ptr(2.3), 0, 95},
		{"grew at this tick and two ticks before, requests of 2.3 s", 100, 100, ptr(2.3), 10, 90},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st2 := st
			st2.Ahead = st.Ahead.clone()
			st2.Ahead.DecodeWatchAt = tc.now - 5 // the last interval was at the watch too
			st2.Ahead.DecodeGrewAt = tc.grewAt
			in := aheadInput(tc.now, 2, 2, 2, 2, 20)
			in.Traffic.ITLMs = ptr(0.9 * p.cfg.ITLMs)
			in.Traffic.RequestDurationS = tc.duration
			tk := &tick{p: p, st: &st2, in: in, diag: &Diagnostics{}, readyP: 2, readyD: 2,
				expectedP: ptr(2), expectedD: ptr(2), countsKnown: true, readyDBefore: 2, decodeGrewBefore: tc.before}
			require.InDelta(t, tc.want, tk.learnDecodeEdge(Forecast{Level: 20}, lead), 1e-9)
			// A skipped interval is not the first of two in a row: the watch keeps the last one.
			wantWatch := tc.now
			if tc.want == 0 {
				wantWatch = tc.now - 5
			}
			require.Equal(t, wantWatch, st2.Ahead.DecodeWatchAt)
		})
	}
}

// TestAhead_DecodeEdgePerWholeIntervalEngine: an ITL near the SLA teaches the rate per decode
// engine ready for the whole interval: one that became ready during it served only part of
// it, while the engine that was alone under a rise drained its backlog.
func TestAhead_DecodeEdgePerWholeIntervalEngine(t *testing.T) {
	p, st := aheadPlanner(t)
	tests := []struct {
		name   string
		before int // ready decode engines at the last tick (0: unknown)
		want   float64
	}{
		{"the second engine became ready during the interval", 1, 20},
		{"both ready all along", 2, 10},
		{"not known: the engines ready now", 0, 10},
		{"one went away during it: the two that stayed", 3, 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st2 := st
			st2.Ahead = st.Ahead.clone()
			st2.Ahead.DecodeWatchAt = 5 // the last interval was at the watch too
			in := aheadInput(10, 2, 2, 2, 2, 20)
			in.Traffic.ITLMs = ptr(0.9 * p.cfg.ITLMs)
			tk := &tick{p: p, st: &st2, in: in, diag: &Diagnostics{}, readyP: 2, readyD: 2,
				expectedP: ptr(2), expectedD: ptr(2), countsKnown: true, readyDBefore: tc.before}
			require.InDelta(t, tc.want, tk.learnDecodeEdge(Forecast{Level: 20}, 65), 1e-9)
		})
	}
	// The prompts drained from the prompt pool's queue reached the decode pool on top of the
	// arrivals: counted in the rate the ITL was reached at.
	prefillFPMs := func(workers int) []perf.FPM {
		var fs []perf.FPM
		for i := range workers {
			fs = append(fs, perf.FPM{Version: perf.FPMVersion, WorkerID: fmt.Sprintf("p%d", i), WallTime: 0.05})
		}
		return fs
	}
	drains := []struct {
		name          string
		before, after float64 // queued prompt tokens at the last tick and this one
		known         bool
		span          float64 // seconds since the last tick
		fpmWorkers    int     // prompt engines whose FPMs this tick read (2 are ready)
		edge          float64 // the edge learned before (0: none)
		isl           float64
		want          float64
	}{
		{"50 prompts of 3,000 tokens drained over 5 s: 10 req/s more", 150000, 0, true, 5, 2, 0, 3000, 15},
		{"half the queue drained: 5 req/s more", 150000, 75000, true, 5, 2, 0, 3000, 12.5},
		{"drained over a late tick's 7.5 s", 150000, 0, true, 7.5, 2, 0, 3000, 10 + 50/7.5/2},
		{"a backlog that grew drained nothing", 150000, 200000, true, 5, 2, 0, 3000, 10},
		{"the last tick's backlog unknown", 150000, 0, false, 5, 2, 0, 3000, 10},
		{"prompt lengths unknown", 150000, 0, true, 5, 2, 0, 0, 10},
		{"one prompt engine's FPMs missing: its queue did not drain", 150000, 0, true, 5, 1, 0, 3000, 10},
		// Relaxed by 0.5% × (2 × 10 req/s per engine / 12 − 1); the drain's 15 is not lower.
		{"a lower edge learned before stays", 150000, 0, true, 5, 2, 12, 3000, 12 * (1 + 0.005*(2*10.0/12-1))},
	}
	for _, tc := range drains {
		t.Run(tc.name, func(t *testing.T) {
			st2 := st
			st2.Ahead = st.Ahead.clone()
			st2.Ahead.PromptBacklog, st2.Ahead.DecodeEdgeRPS, st2.Ahead.DecodeWatchAt = tc.after, tc.edge, 5
			in := aheadInput(10, 2, 2, 2, 2, 20)
			in.Traffic.ITLMs = ptr(0.9 * p.cfg.ITLMs)
			in.FPM.Prefill = prefillFPMs(tc.fpmWorkers)
			tk := &tick{p: p, st: &st2, in: in, diag: &Diagnostics{}, readyP: 2, readyD: 2,
				expectedP: ptr(2), expectedD: ptr(2), countsKnown: true, readyDBefore: 2,
				backlogBefore: tc.before, backlogBeforeKnown: tc.known, backlogSpan: tc.span}
			require.InDelta(t, tc.want, tk.learnDecodeEdge(Forecast{Level: 20, ISL: tc.isl}, 65), 1e-9)
		})
	}
	// Through Decide: the queue read at one tick is compared with the next tick's.
	queued := func(tokens int64) []perf.FPM {
		fs := prefillFPMs(2)
		for i := range fs {
			fs[i].Queued = perf.QueuedRequests{NumPrefillRequests: tokens / 3000, SumPrefillTokens: tokens}
		}
		return fs
	}
	first := aheadInput(5, 2, 2, 2, 2, 20)
	first.FPM.Prefill = queued(75000) // 150,000 tokens queued over the two engines
	first.Traffic.ITLMs = ptr(0.9 * p.cfg.ITLMs)
	next, _, _, err := p.Decide(st, first)
	require.NoError(t, err)
	require.Zero(t, next.Ahead.DecodeEdgeRPS, "the first interval at the watch teaches nothing")
	second := aheadInput(10, 2, 2, 2, 2, 20)
	second.FPM.Prefill = queued(0)
	second.Traffic.ITLMs = ptr(0.9 * p.cfg.ITLMs)
	next, _, _, err = p.Decide(next, second)
	require.NoError(t, err)
	require.InDelta(t, 15, next.Ahead.DecodeEdgeRPS, 1e-9, "20 req/s arrived and 10 req/s drained, over 2 decode engines")

	// Each tick records the ready engines for the next; a tick that cannot read them records
	// none, so the next one does not count an older tick's as the last.
	next, _, _, err = p.Decide(st, aheadInput(5, 1, 3, 1, 3, 10))
	require.NoError(t, err)
	require.Equal(t, 3, next.Ahead.ReadyDecode)
	require.Equal(t, 1, next.Ahead.ReadyPrefill)
	blind := aheadInput(10, 1, 3, 1, 3, 10)
	blind.Workers = nil
	next, _, _, err = p.Decide(next, blind)
	require.NoError(t, err)
	require.Zero(t, next.Ahead.ReadyDecode)
	require.Zero(t, next.Ahead.ReadyPrefill)
	// Only the tick one interval before counts as the last: after missed ticks (or another
	// policy's) the engines ready now are all there is to go by.
	fresh := st
	fresh.Ahead = st.Ahead.clone()
	fresh.Ahead.ReadyDecode, fresh.Ahead.ReadyDecodeAt = 1, 5
	fresh.Ahead.ReadyPrefill, fresh.Ahead.ReadyPrefillAt = 3, 5
	for _, tc := range []struct {
		now  float64
		want int
	}{{10, 1}, {60, 0}} {
		tk := &tick{p: p, st: &fresh, in: aheadInput(tc.now, 1, 2, 1, 2, 10), diag: &Diagnostics{}, readyP: 1, readyD: 2,
			expectedP: ptr(1), expectedD: ptr(2), countsKnown: true}
		st2 := fresh
		st2.Ahead = fresh.Ahead.clone()
		tk.st = &st2
		tk.ahead()
		require.Equal(t, tc.want, tk.readyDBefore, "at %v s", tc.now)
		require.Equal(t, 3*tc.want, tk.readyPBefore, "at %v s", tc.now)
		require.Equal(t, 2, st2.Ahead.ReadyDecode)
		require.Equal(t, 1, st2.Ahead.ReadyPrefill)
	}
}

// TestAhead_DecodeContextHeld: the decode batch is sized at the context the engines hold when
// it is longer than ISL + OSL/2 (varied output lengths: the long ones stay longer), read from
// the tick's FPMs with enough requests in them, or over the lead time when the engines hold
// fewer than usual.
func TestAhead_DecodeContextHeld(t *testing.T) {
	p, st := aheadPlanner(t)
	engine := func(requests, kv int64) perf.FPM {
		return perf.FPM{Version: perf.FPMVersion, WallTime: 0.008,
			Scheduled: perf.ScheduledRequests{NumDecodeRequests: requests, SumDecodeKVTokens: kv}}
	}
	tests := []struct {
		name    string
		latest  []perf.FPM
		samples []perf.FPM
		want    float64
		ok      bool
	}{
		{"two engines and a sample", []perf.FPM{engine(10, 6000), engine(6, 4200)}, []perf.FPM{engine(4, 1800)}, 600, true},
		{"too few requests to say", []perf.FPM{engine(3, 3000), engine(4, 4000)}, nil, 0, false},
		{"idle engines", []perf.FPM{engine(0, 0)}, nil, 0, false},
		{"a bad FPM is skipped", []perf.FPM{engine(10, 6000), engine(50, -1)}, nil, 600, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := aheadInput(5, 2, 2, 2, 2, 20)
			in.FPM.Decode, in.FPM.DecodeSamples = tc.latest, tc.samples
			st2 := st
			st2.Ahead = st.Ahead.clone()
			tk := &tick{p: p, st: &st2, in: in, diag: &Diagnostics{}}
			tk.recordDecodeHeld()
			held, ok := tk.decodeContextHeld()
			require.Equal(t, tc.ok, ok)
			require.InDelta(t, tc.want, held, 1e-9)
		})
	}
	// A tick that holds fewer requests than the lead time's ticks did on average (arrivals
	// paused: the long requests outlast the short ones) is read over the lead time, weighted
	// by requests; one as busy or busier is read at once (outputs that got longer).
	heldAfter := func(ticks ...perf.FPM) (float64, bool, int) {
		st2 := st
		st2.Ahead = st.Ahead.clone()
		var held float64
		var ok bool
		var k int
		for _, fpm := range ticks {
			in := aheadInput(5, 2, 2, 2, 2, 20)
			in.FPM.Decode = []perf.FPM{fpm}
			tk := &tick{p: p, st: &st2, in: in, diag: &Diagnostics{}}
			tk.recordDecodeHeld()
			held, ok = tk.decodeContextHeld()
			k = int(math.Ceil(tk.aheadLead() / p.loadI))
		}
		return held, ok, k
	}
	_, _, k := heldAfter(engine(1, 1))
	require.Greater(t, k, 3, "a lead time of several ticks")
	busy := slices.Repeat([]perf.FPM{engine(40, 40*500)}, k)
	got, ok, _ := heldAfter(append(slices.Clone(busy), engine(8, 8*1800))...)
	require.True(t, ok)
	require.InDelta(t, (float64(k-1)*40*500+8*1800)/float64((k-1)*40+8), got, 1e-9, "a pause: its 8 survivors weigh 8 requests among the lead time's")
	got, _, _ = heldAfter(append(slices.Clone(busy), engine(60, 60*2000))...)
	require.InDelta(t, 2000, got, 1e-9, "longer outputs on a busy pool: read at once")
	got, _, _ = heldAfter(append(slices.Clone(busy), slices.Repeat([]perf.FPM{engine(8, 8*1800)}, k)...)...)
	require.InDelta(t, 1800, got, 1e-9, "a lead time later, the pool's mix is what it holds")
	// Sized at 40 req/s (ISL 3000, OSL 300: 3150 tokens): engines holding 9000-token contexts
	// fit fewer requests per engine (heartbeats: the engines' state, which neither refits the
	// perf model nor shows a batch).
	perEngine := func(fpm []perf.FPM) float64 {
		st := st
		var diag Diagnostics
		for i := range 6 {
			in := aheadInput(float64(5*(i+1)), 4, 4, 4, 4, 40)
			if i == 5 {
				in.FPM.Decode = fpm
			}
			var err error
			st, _, diag, err = p.Decide(st, in)
			require.NoError(t, err)
		}
		require.NotNil(t, diag.EngineRPSDecode, diag.Notes)
		return *diag.EngineRPSDecode
	}
	state := func(kv int64) perf.FPM { f := engine(10, kv); f.WallTime = 0; return f }
	require.Less(t, perEngine([]perf.FPM{state(90000)}), perEngine(nil))
	require.InDelta(t, perEngine(nil), perEngine([]perf.FPM{state(20000)}), 1e-9, "a shorter context held than ISL + OSL/2 changes nothing")
}

// TestEngineCount: a count of engines is ⌈x⌉ up to the bound; past it, infinite or NaN, the
// bound; never negative.
func TestEngineCount(t *testing.T) {
	tests := []struct {
		x    float64
		want int
	}{
		{0, 0}, {-3, 0}, {math.Inf(-1), 0}, {1e-9, 1}, {2, 2}, {2.1, 3}, {99.5, 100}, {100, 100},
		{100.5, 100}, {1e300, 100}, {math.Inf(1), 100}, {math.NaN(), 100},
		{float64(math.MaxInt64) * 4, 100}, // int(x) would be negative on amd64
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, engineCount(tc.x, 100), "x %v", tc.x)
	}
}

// TestDecodeEngines: a decode scale-down leaves 10% of the engines' rate spare; a scale-up
// goes to the rate's count.
func TestDecodeEngines(t *testing.T) {
	tests := []struct {
		name      string
		rate      float64
		cur, want int
		wantKept  bool
	}{
		{"a scale-up to the rate's count", 19.5, 1, 2, false},
		{"the same count", 19.5, 2, 2, false},
		{"down from 3: 1.95 engines' rate is kept at 3", 19.5, 3, 3, true},
		{"down from 3: 1.7 engines' rate fits 2 with 10% spare", 17, 3, 2, false},
		{"down from 3: 1.85 engines' rate does not (2.06 at 90%)", 18.5, 3, 3, true},
		{"down from 20: never above what the pool has (22 at 90%)", 190, 20, 20, true},
		{"down from 5: 3.9 engines' rate needs 4.33 at 90%", 39, 5, 5, true},
		{"down from 6: 3.9 engines' rate, 5 at 90%", 39, 6, 5, true},
		{"no demand", 0, 3, 0, false},
		{"a rate past any pool: the bound, not an overflowed negative count", 1e300, 3, aheadMaxEngines, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, byRate := decodeEngines(tc.rate, 10, tc.cur)
			require.Equal(t, tc.want, n)
			require.Equal(t, tc.wantKept, n > byRate)
		})
	}
	n, _ := decodeEngines(1e10, 1e-300, 3)
	require.Equal(t, aheadMaxEngines, n, "an engine model that serves next to nothing per engine")
}

// TestPooledBatch: the decode pool keeps its Poisson spread under the engines' SLA batches
// together — at one engine's worth of load or less, the batch one engine keeps alone; on more,
// a larger batch each, whose pool holds the load and its spread within its SLA batches, and
// never more engines than sizing each engine for its own spread.
func TestPooledBatch(t *testing.T) {
	const b, z = 41.0, 1.0
	alone := engineSpreadBatch(b, z)
	require.InDelta(t, b, alone+z*math.Sqrt(alone), 1e-9, "k + z·√k = b")
	require.InDelta(t, 35.1, alone, 0.05) // the batch one engine kept alone on rr-5-45: 35 of 41
	tests := []struct {
		name      string
		load      float64
		want      float64 // by hand: b·load/(load + √load), or alone
		wantPool  int     // engines: ⌈load ÷ the pooled batch⌉
		wantAlone int     // engines sized for each one's own spread
	}{
		{"no load: one engine's spread", 0, alone, 0, 0},
		{"a tenth of an engine's worth: still one engine's spread", 3.5, alone, 1, 1},
		{"one engine's worth: the same batch", alone, alone, 1, 1},
		{"four engines' worth (140.3): 37.81 each", 4 * alone, 37.81, 4, 4},
		{"4.2 engines' worth (147): 5 alone, 4 pooled at 37.88 (147 + 12.1 ≤ 164)", 147, 37.88, 4, 5},
		{"11.4 engines' worth (400): 12 alone, 11 pooled at 39.05 (400 + 20 ≤ 451)", 400, 39.05, 11, 12},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := pooledBatch(b, tc.load, z)
			require.InDelta(t, tc.want, got, 0.005)
			engines := func(per float64) int { return int(math.Ceil(tc.load/per - 1e-9)) }
			require.Equal(t, tc.wantPool, engines(got))
			require.Equal(t, tc.wantAlone, engines(alone))
			if n := engines(got); n > 1 {
				require.LessOrEqual(t, tc.load+z*math.Sqrt(tc.load), float64(n)*b, "the pool holds the load and its spread")
			}
		})
	}
	require.Equal(t, b, pooledBatch(b, 100, 0), "no spread kept: the SLA batch")
	require.Equal(t, alone, pooledBatch(b, math.Inf(1), z), "an infinite load is not a batch")
	require.Equal(t, alone, pooledBatch(b, math.NaN(), z))
	for load := 0.01; load < 2000; load *= 1.1 {
		got := pooledBatch(b, load, z)
		require.GreaterOrEqual(t, got, alone, "load %.2f", load)
		require.LessOrEqual(t, got, b, "load %.2f", load)
		require.LessOrEqual(t, math.Ceil(load/got), math.Ceil(load/alone), "load %.2f", load)
		require.LessOrEqual(t, got, pooledBatch(b, load*1.1, z), "the batch never falls with the load")
	}
}

// TestAhead_DecodeKeptReportsStabilizing: a tick whose decode count the scale-down spare kept
// at the pool's target reports scale_down_stabilizing, as a held scale-down does, not
// no_change.
func TestAhead_DecodeKeptReportsStabilizing(t *testing.T) {
	p, st := aheadPlanner(t)
	for _, kept := range []bool{false, true} {
		st2 := st
		st2.Ahead = st.Ahead.clone()
		tk := &tick{p: p, st: &st2, in: aheadInput(5, 4, 4, 4, 4, 20), diag: &Diagnostics{}, readyP: 4, readyD: 4,
			expectedP: ptr(4), expectedD: ptr(4), countsKnown: true, decodeKept: kept}
		dec := tk.aheadDecide(map[Component]int{Prefill: 4, Decode: 4}, 65, false, false, false, false)
		require.True(t, dec.Empty())
		want := ReasonNoChange
		if kept {
			want = ReasonScaleDownStabilizing
		}
		require.Equal(t, want, tk.diag.LoadReasonDecode, "kept %v", kept)
		require.Equal(t, ReasonNoChange, tk.diag.LoadReasonPrefill)
	}
}

func TestAhead_DecodeEdgeRelaxesWithTheLoad(t *testing.T) {
	p, st := aheadPlanner(t)
	// An edge of 10 req/s per engine, 4 ready decode engines, no ITL reading (nothing to
	// learn): how much the edge relaxes in one interval at a level of rate req/s.
	relaxed := func(rate float64) float64 {
		st2 := st
		st2.Ahead = st.Ahead.clone()
		st2.Ahead.DecodeEdgeRPS = 10
		tk := &tick{p: p, st: &st2, in: aheadInput(5, 4, 4, 4, 4, rate), diag: &Diagnostics{}, readyP: 4, readyD: 4,
			expectedP: ptr(4), expectedD: ptr(4), countsKnown: true}
		return tk.learnDecodeEdge(Forecast{Level: rate}, 65)/10 - 1
	}
	tests := []struct {
		name string
		rate float64
		want float64
	}{
		{"at the edge: the full step", 40, aheadEdgeRelax},
		{"over it without the ITL showing it: the full step", 60, aheadEdgeRelax},
		{"at three quarters of the edge: half a step", 30, aheadEdgeRelax / 2},
		{"at half the edge: none", 20, 0},
		{"in a trough: none", 4, 0},
		{"idle: none", 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.InDelta(t, tc.want, relaxed(tc.rate), 1e-12)
		})
	}
}

// TestAhead_PromptShift: the newest half lead time's mean prompt length replaces the five-minute
// mean when it is longer beyond its noise, so a jump in prompt lengths sizes the prefill
// within a lead time rather than minutes later.
func TestAhead_PromptShift(t *testing.T) {
	p, st := aheadPlanner(t)
	// 14 req/s for 300 s in 30 s buckets: 3,000-token prompts, then the last 90 s at last.
	history := func(rate, last float64, fpm *FPMObservations) *tick {
		a := &AheadState{BucketS: 30}
		for now := 5.0; now <= 300; now += 5 {
			isl := 3000.0
			if now > 210 {
				isl = last
			}
			a.record(now, 5, rate*5, isl, 300)
		}
		s := st
		s.Ahead = a
		return &tick{p: p, st: &s, in: Input{FPM: fpm}, diag: &Diagnostics{}}
	}
	// Half the lead time (60 s expected + a 5 s interval) in whole intervals: the newest
	// bucket. At a 300 s startup, half of 305 s.
	require.Equal(t, 30.0, history(14, 3000, nil).shiftWindow())
	slowStart, _ := aheadPlannerWith(t, func(c *config.Config) { c.ExpectedStartupSeconds = 300 })
	require.Equal(t, 150.0, (&tick{p: slowStart, st: &State{Ahead: &AheadState{BucketS: 60}}}).shiftWindow())
	slow := func(tk *tick) float64 {
		n, sum, _, _ := tk.st.Ahead.recent(aheadLengthSeconds)
		return sum / n
	}
	spread := &FPMObservations{Prefill: []perf.FPM{{Version: perf.FPMVersion,
		Scheduled: perf.ScheduledRequests{NumPrefillRequests: 1000, VarPrefillLength: 4 * 3000 * 3000}}}}
	tests := []struct {
		name   string
		tk     *tick
		want   float64
		ok     bool
		reason string
	}{
		{"longer prompts", history(14, 9000, nil), 9000, true, "420 prompts of 9,000 tokens against a mean of 4,800"},
		{"too few prompts to say", history(0.6, 9000, nil), 0, false, "18 prompts in the newest 30 s"},
		{"shorter prompts wait for the slow mean", history(14, 1000, nil), 0, false, ""},
		{"within the prompts' noise", history(14, 3200, spread), 0, false, "σ about 6,000 tokens over 420 prompts: 140 longer, within two standard errors (about 590)"},
		{"beyond the prompts' noise", history(14, 4400, spread), 4400, true, "980 longer, beyond two standard errors (about 590)"},
		{"the same prompts", history(14, 3000, nil), 0, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, span, ok := tc.tk.promptShift(slow(tc.tk))
			require.Equal(t, tc.ok, ok, tc.reason)
			require.InDelta(t, tc.want, got, 1e-9)
			if ok {
				require.Equal(t, 30.0, span, "the newest bucket")
			}
		})
	}
	for _, isl := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		_, _, ok := history(14, 9000, nil).promptShift(isl)
		require.False(t, ok, "isl %v", isl)
	}

	// Through the policy: 20 req/s of 3,000-token prompts for five minutes, then 6,000-token
	// ones. Once the lead time's prompts are the new ones, the prefill pool is sized for them —
	// at least as if the prompts had always been that long (the jump also reads as a spread of
	// the prompts) — not minutes later, when the five-minute mean has caught up.
	need := func(before, after float64) (int, []string) {
		s := st
		var diag Diagnostics
		for now := 5.0; now <= 390; now += 5 {
			in := aheadInput(now, 1, 4, 1, 4, 20)
			in.Traffic.ISL = ptr(before)
			if now > 300 {
				in.Traffic.ISL = ptr(after)
			}
			var err error
			s, _, diag, err = p.Decide(s, in)
			require.NoError(t, err)
		}
		require.NotNil(t, diag.EngineRPSPrefill, diag.Notes)
		return int(math.Round(20 / *diag.EngineRPSPrefill)), diag.Notes
	}
	before, _ := need(3000, 3000)
	jumped, notes := need(3000, 6000)
	always, _ := need(6000, 6000)
	require.Greater(t, always, before)
	require.GreaterOrEqual(t, jumped, always, notes)
	require.Contains(t, strings.Join(notes, "\n"), "ISL 6000 (the newest 30 s; 3900 over 300 s)")
}

// TestAhead_NoScaleDownWhilePromptsGetLonger: while the newest prompts are longer than the
// five-minute mean (promptShift), an aggregated pool is not scaled down, though the need sized
// at the newest prompts is below what it holds, and the tick reports scale_down_stabilizing;
// with the same prompts throughout, the same ticks scale down. The pools of a disaggregated
// deployment, and of a prefill-only or decode-only one, are not held: the same ticks scale
// them down, with no such note. The pools are held at 6 engines each whatever the decisions,
// so every tick decides from the same deployment (an aggregated pool is the decode
// component).
func TestAhead_NoScaleDownWhilePromptsGetLonger(t *testing.T) {
	disagg, disaggSt := aheadPlanner(t)
	agg, aggSt := aggAheadPlanner(t)
	prefill, prefillSt := aheadPlannerWith(t, func(c *config.Config) { c.Mode = config.ModePrefill })
	decode, decodeSt := aheadPlannerWith(t, func(c *config.Config) { c.Mode = config.ModeDecode })
	tests := []struct {
		name  string
		p     *Planner
		st    State
		pools []Component
	}{
		{"disaggregated", disagg, disaggSt, []Component{Prefill, Decode}},
		{"prefill only", prefill, prefillSt, []Component{Prefill}},
		{"decode only", decode, decodeSt, []Component{Decode}},
		{"aggregated", agg, aggSt, []Component{Decode}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			held := tc.p.cfg.Mode == config.ModeAgg
			// run returns each tick's decision and diagnostics after 300 s, when the prompts go
			// from 3,000 tokens to after.
			run := func(after float64) (decs []Decision, diags []Diagnostics) {
				s := tc.st
				for now := 5.0; now <= 360; now += 5 {
					in := aheadInput(now, 6, 6, 6, 6, 8)
					if tc.p.cfg.Mode == config.ModeAgg {
						in = aheadInput(now, 0, 6, 0, 6, 8)
					}
					if now > 300 {
						in.Traffic.ISL = ptr(after)
					}
					var dec Decision
					var diag Diagnostics
					var err error
					s, dec, diag, err = tc.p.Decide(s, in)
					require.NoError(t, err)
					if now > 300 {
						decs, diags = append(decs, dec), append(diags, diag)
					}
				}
				return decs, diags
			}
			same, _ := run(3000)
			longer, diags := run(4500)
			require.Len(t, longer, len(same))
			shifted := 0
			for i := range same {
				for _, c := range tc.pools {
					got := same[i].pool(c)
					require.NotNil(t, *got, "tick %d: 6 %s engines for 8 req/s are scaled down", i, c)
					require.Less(t, **got, 6)
				}
				joined := strings.Join(diags[i].Notes, "\n")
				if !strings.Contains(joined, "ISL 4500 (the newest") {
					continue // the newest bucket's prompts not yet longer beyond their noise
				}
				shifted++
				if !held {
					require.NotContains(t, joined, "not scaled down: the newest prompts are longer")
					for _, c := range tc.pools {
						got := longer[i].pool(c)
						require.NotNil(t, *got, "tick %d: 6 %s engines for 8 req/s are scaled down while the prompts get longer: %v", i, c, diags[i].Notes)
						require.Less(t, **got, 6)
						reason := diags[i].LoadReasonDecode
						if c == Prefill {
							reason = diags[i].LoadReasonPrefill
						}
						require.Equal(t, ReasonScaleDown, reason, "tick %d: %s", i, c)
					}
					continue
				}
				require.True(t, longer[i].Empty(), "tick %d: no scale-down while the prompts get longer: %v", i, diags[i].Notes)
				for _, c := range tc.pools {
					require.Contains(t, joined, fmt.Sprintf("ahead: %s not scaled down: the newest prompts are longer than the 300 s mean", c))
					reason := diags[i].LoadReasonDecode
					if c == Prefill {
						reason = diags[i].LoadReasonPrefill
					}
					require.Equal(t, ReasonScaleDownStabilizing, reason, "tick %d: %s", i, c)
				}
			}
			require.GreaterOrEqual(t, shifted, len(same)/2, "the longer prompts show in half the minute's ticks: %v", diags)
		})
	}
}

func TestAheadState_StepUp(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	arrivals := func(rate float64) float64 { // Poisson counts over a 5 s interval, as a rate
		return float64(distuv.Poisson{Lambda: rate * 5, Src: rng}.Rand()) / 5
	}
	// window records 26 intervals of 5 s (six to a 30 s bucket) at the given rates.
	window := func(rate func(i int) float64) *AheadState {
		a := &AheadState{BucketS: 30}
		for i := range 26 {
			a.record(5*float64(i+1), 5, 5*rate(i), 3000, 300)
		}
		return a
	}
	stepAt := func(k int, low, high float64) func(i int) float64 {
		return func(i int) float64 {
			if i < k {
				return low
			}
			return high
		}
	}
	t.Run("exact runs", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			rate func(i int) float64
			post float64
			ok   bool
		}{
			{"a step up", stepAt(18, 2, 40), 40, true},
			{"a step down", stepAt(18, 40, 2), 0, false},
			{"a line", func(i int) float64 { return 2 + 1.5*float64(i) }, 0, false},
			{"constant", func(int) float64 { return 10 }, 0, false},
			{"constant, not representable", func(int) float64 { return 1.4 }, 0, false},
			// Three intervals at least after the split: a step two intervals back is read
			// with the interval before it, at their mean.
			{"a step two intervals back", stepAt(24, 2, 40), (2 + 40 + 40) / 3.0, true},
			// A rise that goes on after the step is the line's to extrapolate.
			{"a step, then a rise", func(i int) float64 { return stepAt(12, 2, 20)(i) + 2*math.Max(0, float64(i-12)) }, 0, false},
			{"flat, then a ramp", func(i int) float64 { return 5 + 3*math.Max(0, float64(i-13)) }, 0, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				post, ok := window(tc.rate).stepUp(130, 5)
				require.Equal(t, tc.ok, ok)
				require.InDelta(t, tc.post, post, 1e-9)
			})
		}
	})
	t.Run("too few intervals", func(t *testing.T) {
		a := &AheadState{BucketS: 30}
		for i := range 6 {
			a.record(5*float64(i+1), 5, 5*stepAt(3, 2, 40)(i), 3000, 300)
		}
		_, ok := a.stepUp(130, 5)
		require.False(t, ok)
		_, ok = window(stepAt(18, 2, 40)).stepUp(130, 0)
		require.False(t, ok, "no interval length")
	})
	t.Run("not across a gap in the observations", func(t *testing.T) {
		a := &AheadState{BucketS: 30}
		for now := 5.0; now <= 60; now += 5 {
			a.record(now, 5, 5*2, 3000, 300)
		}
		for now := 200.0; now <= 240; now += 5 { // 135 s unobserved, then 40 req/s
			a.record(now, 5, 5*40, 3000, 300)
		}
		_, ok := a.stepUp(130, 5)
		require.False(t, ok, "the level before the gap is outside the trend window: no step within it")
	})
	// With Poisson arrivals: steady traffic and ramps are seldom read as a step; a step up
	// from 2 to 40 req/s a minute back nearly always is, with its rate.
	const draws = 400
	var steady, ramp, step int
	for range draws {
		if _, ok := window(func(int) float64 { return arrivals(20) }).stepUp(130, 5); ok {
			steady++
		}
		if _, ok := window(func(i int) float64 { return arrivals(5 + 1.2*float64(i)) }).stepUp(130, 5); ok {
			ramp++
		}
		post, ok := window(func(i int) float64 { return arrivals(stepAt(14, 2, 40)(i)) }).stepUp(130, 5)
		if ok && math.Abs(post-40) < 4 {
			step++
		}
	}
	require.Less(t, steady, draws*3/100, "steady Poisson traffic read as a step")
	require.Less(t, ramp, draws*5/100, "a ramp read as a step")
	require.Greater(t, step, draws*95/100, "a step up missed")
}

// TestAhead_NoScaleUpWhileIdle: traffic that stops leaves a fall in the line through the
// window, whose spread the forecast reads as upside, and misses measured before the stop; on
// ticks where nothing arrived and nothing is queued neither orders an engine, and the pools
// come down to their minimum.
func TestAhead_NoScaleUpWhileIdle(t *testing.T) {
	for _, tc := range []struct {
		name    string
		planner func(*testing.T) (*Planner, State)
		rate    float64 // within the 16-GPU budget
	}{{"disagg", aheadPlanner, 80}, {"agg", aggAheadPlanner, 40}} {
		t.Run(tc.name, func(t *testing.T) {
			p, st := tc.planner(t)
			provP, provD := 1, 1
			now := 0.0
			step := func(rate float64) (Decision, Diagnostics) {
				now += 5
				in := aheadInput(now, provP, provD, provP, provD, rate)
				in.Traffic.TTFTMs, in.Traffic.ITLMs = ptr(80.0), ptr(6.0)
				// Every ready engine publishes (nothing queued): idle needs to see them all.
				in.FPM.Prefill, in.FPM.Decode = idleFPMs("p", provP), idleFPMs("d", provD)
				dec, diag := decideAndSubmit(t, p, &st, in)
				if dec.Prefill != nil {
					provP = *dec.Prefill
				}
				if dec.Decode != nil {
					provD = *dec.Decode
				}
				return dec, diag
			}
			for now < 600 {
				step(tc.rate)
			}
			require.Greater(t, max(provP, provD), 3, "several engines")
			require.Less(t, provP+provD, 16, "within the budget")
			stopped, held := now, 0
			for now < stopped+900 {
				beforeP, beforeD := provP, provD
				dec, diag := step(0)
				if dec.Prefill != nil {
					require.Less(t, *dec.Prefill, beforeP, "at %v s, %v s after the stop: %v", now, now-stopped, diag.Notes)
				}
				if dec.Decode != nil {
					require.Less(t, *dec.Decode, beforeD, "at %v s, %v s after the stop: %v", now, now-stopped, diag.Notes)
				}
				for _, n := range diag.Notes {
					if strings.Contains(n, "not scaled up") {
						held++
					}
				}
			}
			require.Positive(t, held, "the forecast asked for more engines after the stop: the rule is exercised")
			require.Equal(t, 1, provD, "back to the minimum")
			if tc.name == "disagg" {
				require.Equal(t, 1, provP, "back to the minimum")
			}
			// Demand that comes back arrives in an interval, which orders at once.
			dec, diag := step(tc.rate)
			require.NotNil(t, dec.Decode, diag.Notes)
			require.Greater(t, *dec.Decode, 1, diag.Notes)
		})
	}
}

// TestForecast_ForeseesDemand: only a followed period whose rate a period ago is above 0
// foresees demand an idle tick orders for; a period found but not followed, or followed and
// foreseeing none, leaves the idle rule to hold the forecast's margins and misses.
func TestForecast_ForeseesDemand(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    Forecast
		want bool
	}{
		{"followed, demand a period ago", Forecast{Trusted: true, Seasonal: 35.9, Rate: 40}, true},
		{"followed, none a period ago", Forecast{Trusted: true, Seasonal: 0, Rate: 4}, false},
		{"found, not followed", Forecast{Trusted: false, Seasonal: 35.9, Rate: 40}, false},
		{"no period", Forecast{Rate: 40}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.f.foreseesDemand())
		})
	}
}

// TestAhead_IdleTickOrdersForAFollowedPeriod: on/off traffic whose off phases are silent has
// its period followed, and the demand the period foresees is ordered at the idle ticks before
// an "on" — the idle rule holds a forecast's margins and misses, not a followed period's rates.
// Such a scale-up reports scale_up_foreseen, one with arrivals scale_up.
func TestAhead_IdleTickOrdersForAFollowedPeriod(t *testing.T) {
	foreseenRate := regexp.MustCompile(`\) → ([0-9.]+) followed`)
	for _, tc := range []struct {
		name    string
		planner func(*testing.T) (*Planner, State)
		rate    float64
	}{{"disagg", aheadPlanner, 40}, {"agg", aggAheadPlanner, 20}} {
		t.Run(tc.name, func(t *testing.T) {
			p, st := tc.planner(t)
			provP, provD := 1, 1
			foreseen, heldFollowed := 0, 0
			for now := 5.0; now <= 12*210; now += 5 {
				rate := 0.0
				if math.Mod(now-5, 210) < 90 { // 90 s on, 120 s off
					rate = tc.rate
				}
				in := aheadInput(now, provP, provD, provP, provD, rate)
				in.Traffic.TTFTMs, in.Traffic.ITLMs = ptr(80.0), ptr(6.0)
				in.FPM.Prefill, in.FPM.Decode = idleFPMs("p", provP), idleFPMs("d", provD)
				beforeP, beforeD := provP, provD
				dec, diag := decideAndSubmit(t, p, &st, in)
				if dec.Prefill != nil {
					provP = *dec.Prefill
				}
				if dec.Decode != nil {
					provD = *dec.Decode
				}
				// The period's rate a period ago, as the forecast's note gives it: ") → 35.92 followed".
				followed := false
				if m := foreseenRate.FindStringSubmatch(strings.Join(diag.Notes, " ")); m != nil {
					r, err := strconv.ParseFloat(m[1], 64)
					require.NoError(t, err)
					followed = r > 0
				}
				for _, n := range diag.Notes {
					if followed && strings.Contains(n, "not scaled up") {
						heldFollowed++
					}
				}
				if rate == 0 && followed && provD > beforeD {
					foreseen++
					require.Equal(t, ReasonScaleUpForeseen, diag.LoadReasonDecode, "a scale-up at a tick nothing arrived in says why: %v", diag.Notes)
				}
				if rate > 0 && provD > beforeD {
					require.Equal(t, ReasonScaleUp, diag.LoadReasonDecode, "arrivals: a plain scale-up")
				}
				if tc.name == "disagg" && provP > beforeP {
					want := ReasonScaleUp
					if rate == 0 && followed {
						want = ReasonScaleUpForeseen
					}
					require.Equal(t, want, diag.LoadReasonPrefill, "the prefill pool's too: %v", diag.Notes)
				}
			}
			require.Positive(t, foreseen, "a followed period's return ordered at an idle tick before it")
			require.Zero(t, heldFollowed, "the idle rule held a followed period's need")
		})
	}
}

// idleFPMs is one FPM with nothing scheduled or queued for each of n engines, named prefix0…
func idleFPMs(prefix string, n int) []perf.FPM {
	out := make([]perf.FPM, n)
	for i := range out {
		out[i] = perf.FPM{Version: perf.FPMVersion, WorkerID: fmt.Sprintf("%s%d", prefix, i)}
	}
	return out
}

// TestAhead_Idle: a tick is idle when nothing arrived in its interval and the FPMs of every
// ready engine show nothing queued — not when the traffic is unread, nor when an engine's
// queue is unseen.
func TestAhead_Idle(t *testing.T) {
	queued := func(q perf.QueuedRequests) []perf.FPM {
		f := idleFPMs("e", 2)
		f[1].Queued = q
		return f
	}
	tests := []struct {
		name string
		agg  bool
		in   func(in *Input)
		want bool
	}{
		{"no arrivals, nothing queued", false, func(*Input) {}, true},
		{"arrivals", false, func(in *Input) { in.Traffic.NumReq = ptr(1.0) }, false},
		{"traffic unread", false, func(in *Input) { in.Traffic.NumReq = nil }, false},
		{"no traffic observation", false, func(in *Input) { in.Traffic = nil }, false},
		{"prompts queued", false, func(in *Input) {
			in.FPM.Prefill = queued(perf.QueuedRequests{NumPrefillRequests: 1, SumPrefillTokens: 3000})
		}, false},
		{"decode requests queued", false, func(in *Input) { in.FPM.Decode = queued(perf.QueuedRequests{NumDecodeRequests: 2}) }, false},
		{"a ready prefill engine unseen", false, func(in *Input) { in.FPM.Prefill = in.FPM.Prefill[:1] }, false},
		{"no FPMs", false, func(in *Input) { in.FPM = nil }, false},
		{"aggregated, nothing queued", true, func(*Input) {}, true},
		{"aggregated, prompts queued", true, func(in *Input) {
			in.FPM.Decode = queued(perf.QueuedRequests{NumPrefillRequests: 1, SumPrefillTokens: 3000})
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, st := aheadPlanner(t)
			if tc.agg {
				p, st = aggAheadPlanner(t)
			}
			in := aheadInput(5, 2, 2, 2, 2, 0)
			in.FPM.Prefill, in.FPM.Decode = idleFPMs("e", 2), idleFPMs("e", 2)
			tc.in(&in)
			tk := &tick{p: p, st: &st, in: in, diag: &Diagnostics{}, readyP: 2, readyD: 2, countsKnown: true}
			require.Equal(t, tc.want, tk.idle())
		})
	}
}
