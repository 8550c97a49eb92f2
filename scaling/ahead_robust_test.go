package scaling

import (
	"slices"
	"testing"

	"github.com/llmplanner/planner/perf"
	"github.com/stretchr/testify/require"
)

func TestAddShown_KeepsTheParetoFrontier(t *testing.T) {
	tests := []struct {
		name string
		have []ShownBatch
		add  ShownBatch
		want []ShownBatch
	}{
		{"first point", nil, ShownBatch{10, 20000}, []ShownBatch{{10, 20000}}},
		{"dominated: ignored", []ShownBatch{{10, 20000}}, ShownBatch{8, 15000}, []ShownBatch{{10, 20000}}},
		{"equal: ignored", []ShownBatch{{10, 20000}}, ShownBatch{10, 20000}, []ShownBatch{{10, 20000}}},
		{"dominates: replaces", []ShownBatch{{10, 20000}, {30, 9000}}, ShownBatch{12, 25000}, []ShownBatch{{30, 9000}, {12, 25000}}},
		{"a trade-off: kept beside", []ShownBatch{{10, 20000}}, ShownBatch{30, 9000}, []ShownBatch{{10, 20000}, {30, 9000}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, addShown(tc.have, tc.add))
		})
	}
	var f []ShownBatch
	for i := range 3 * aheadShownPoints {
		f = addShown(f, ShownBatch{N: float64(i + 1), KV: float64(100000 - i)})
	}
	require.Len(t, f, aheadShownPoints, "bounded")
	ns := func(f []ShownBatch) (lo, hi float64) {
		lo, hi = f[0].N, f[0].N
		for _, q := range f {
			lo, hi = min(lo, q.N), max(hi, q.N)
		}
		return lo, hi
	}
	_, hi := ns(f)
	require.Equal(t, float64(3*aheadShownPoints), hi, "the batch with the most requests stays")
	require.GreaterOrEqual(t, shownBatch(f, 100000), 0.95, "a batch still vouches for one request at the longest context")

	// A frontier full of short-context batches keeps the one long-context batch it was
	// given first: it is what a long-context sizing relies on.
	f = []ShownBatch{{N: 4, KV: 60000}}
	for i := range 2 * aheadShownPoints {
		f = addShown(f, ShownBatch{N: float64(20 + i), KV: float64(30000 - 100*i)})
	}
	require.Len(t, f, aheadShownPoints)
	require.Equal(t, 4.0, shownBatch(f, 15000), "at a 15,000-token context the long batch still vouches for 4 requests")
	lo, hi := ns(f)
	require.Equal(t, 4.0, lo)
	require.Equal(t, float64(20+2*aheadShownPoints-1), hi)
}

func TestShownEvict_TheLeastLoss(t *testing.T) {
	// Two points close together in the middle: one of them goes, not an extreme.
	f := []ShownBatch{{N: 5, KV: 50000}, {N: 20, KV: 30000}, {N: 21, KV: 29500}, {N: 60, KV: 10000}}
	i := shownEvict(f)
	require.Contains(t, []int{1, 2}, i, "a near-duplicate goes")
	// Its loss is small: shownBatch at any context drops by under 5%.
	rest := slices.Delete(slices.Clone(f), i, i+1)
	for _, ctx := range []float64{100, 500, 1000, 1400, 1500, 2000, 5000, 10000, 20000} {
		require.GreaterOrEqual(t, shownBatch(rest, ctx), 0.95*shownBatch(f, ctx), "context %v", ctx)
	}
}

func TestShownBatch(t *testing.T) {
	f := []ShownBatch{{N: 20, KV: 60000}, {N: 40, KV: 40000}}
	tests := []struct {
		name string
		ctx  float64
		want float64
	}{
		{"short context: the most requests", 1000, 40},
		{"the context the first point ran at", 3000, 20},
		{"longer than any: limited by the KV tokens", 6000, 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.InDelta(t, tc.want, shownBatch(f, tc.ctx), 1e-9)
		})
	}
	require.Zero(t, shownBatch(nil, 3000), "nothing demonstrated")
}

// TestAhead_DecodeNotSizedBelowWhatTheEnginesRan: whatever the perf model says, the decode
// batch at the ITL SLA is not sized below aheadShownShare of a batch the engines ran within
// the SLA at the sizing context (held to the profile's batch there unless the engines beat
// the profile: TestShownDecodeBatch_HeldToTheProfile), and that is remembered across ticks
// whose FPMs show nothing of the kind; a perf model within that share of it is left alone.
func TestAhead_DecodeNotSizedBelowWhatTheEnginesRan(t *testing.T) {
	// The model on the test profile holds 33 requests at ISL 3000 + OSL 300 / 2 within the
	// 10 ms SLA.
	run := func(sample perf.FPM) (State, Diagnostics) {
		p, st := aheadPlanner(t)
		var diag Diagnostics
		for i := range 6 {
			in := aheadInput(float64(5*(i+1)), 4, 4, 4, 4, 20)
			if i == 0 {
				in.FPM.DecodeSamples = []perf.FPM{sample}
			}
			var err error
			st, _, diag, err = p.Decide(st, in)
			require.NoError(t, err)
		}
		return st, diag
	}
	ran := func(n int64, wall float64) perf.FPM {
		return perf.FPM{Version: perf.FPMVersion, WorkerID: "decode-0", WallTime: wall,
			Scheduled: perf.ScheduledRequests{NumDecodeRequests: n, SumDecodeKVTokens: n * 3150}}
	}
	tests := []struct {
		name      string
		sample    perf.FPM
		wantShown float64
		higher    bool // sized higher per engine than the model alone
	}{
		{"60 requests within the SLA: sized at 48 of them", ran(60, 0.009), 60, true},
		{"40 within the SLA: 32, the model's 33 stands", ran(40, 0.009), 40, false},
		{"60 over the SLA: shows nothing", ran(60, 0.011), 0, false},
	}
	_, model := run(ran(60, 0.011))
	require.NotNil(t, model.EngineRPSDecode)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, diag := run(tc.sample)
			require.InDelta(t, tc.wantShown, shownBatch(st.Ahead.DecodeShown, 3150), 1, "barely forgotten")
			require.NotNil(t, diag.EngineRPSDecode)
			if tc.higher {
				require.Greater(t, *diag.EngineRPSDecode, 1.3**model.EngineRPSDecode, diag.Notes)
			} else {
				require.InEpsilon(t, *model.EngineRPSDecode, *diag.EngineRPSDecode, 0.01, "the model (the sample also enters its regression): %v", diag.Notes)
			}
		})
	}
}

func TestSampledConcurrency(t *testing.T) {
	eng := func(id string, running, queued int64) perf.FPM {
		return perf.FPM{Version: perf.FPMVersion, WorkerID: id, WallTime: 0.01,
			Scheduled: perf.ScheduledRequests{NumDecodeRequests: running}, Queued: perf.QueuedRequests{NumDecodeRequests: queued}}
	}
	tests := []struct {
		name        string
		fpm         *FPMObservations
		want        float64
		wantSampled bool
	}{
		{"no FPMs", nil, 0, false},
		{"latest only: their sum, no samples", &FPMObservations{Decode: []perf.FPM{eng("a", 3, 1), eng("b", 5, 0)}}, 9, false},
		{"samples: each engine's most, summed", &FPMObservations{
			Decode:        []perf.FPM{eng("a", 3, 1), eng("b", 5, 0)},
			DecodeSamples: []perf.FPM{eng("a", 20, 4), eng("a", 10, 0), eng("b", 2, 0), eng("c", 7, 0)},
		}, 24 + 5 + 7, true},
		{"other schema versions left out", &FPMObservations{Decode: []perf.FPM{{Version: 99, WorkerID: "a", WallTime: 0.01,
			Scheduled: perf.ScheduledRequests{NumDecodeRequests: 50}}}}, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tk := &tick{in: Input{FPM: tc.fpm}}
			got, sampled := tk.sampledConcurrency()
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.wantSampled, sampled)
		})
	}
}

func TestAheadLengths(t *testing.T) {
	withHistory := func() State {
		_, st := aheadPlanner(t)
		st.Ahead.record(5, 5, 10, 2000, 30)
		st.Ahead.record(10, 5, 30, 3000, 10) // request-weighted: ISL 2750, OSL 15
		return st
	}
	noHistory := func() State { _, st := aheadPlanner(t); return st }
	tests := []struct {
		name             string
		st               func() State
		numReq           float64
		isl, osl         *float64
		wantISL, wantOSL float64
		wantOK           bool
	}{
		{"idle window: no lengths needed", noHistory, 0, nil, nil, 0, 0, true},
		{"both observed", noHistory, 5, ptr(1000.0), ptr(20.0), 1000, 20, true},
		{"none finished yet: the history's OSL stands in", withHistory, 5, ptr(1000.0), nil, 1000, 15, true},
		{"none started yet: the history's lengths", withHistory, 5, nil, nil, 2750, 15, true},
		{"unreadable and nothing seen before: not ok", noHistory, 5, ptr(1000.0), nil, 0, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.st()
			p, _ := aheadPlanner(t)
			tk := newTick(p, &st, 1, 1)
			tr := &TrafficObservation{DurationS: 5, NumReq: ptr(tc.numReq), ISL: tc.isl, OSL: tc.osl}
			isl, osl, ok := tk.aheadLengths(tr)
			require.Equal(t, tc.wantOK, ok)
			require.InDelta(t, tc.wantISL, isl, 1e-9)
			require.InDelta(t, tc.wantOSL, osl, 1e-9)
		})
	}
}

func TestReadyWithin(t *testing.T) {
	tests := []struct {
		name           string
		took, interval float64
		want           float64
	}{
		{"seen three ticks after: ready within the last interval", 15, 5, 12.5},
		{"seen at the first tick after: within it", 5, 5, 2.5},
		{"sooner than an interval (a tick came early)", 2, 5, 1},
		{"no interval: as seen", 15, 0, 15},
		{"nothing elapsed", 0, 5, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.InDelta(t, tc.want, readyWithin(tc.took, tc.interval), 1e-12)
		})
	}
}

// TestObserveConcurrency_Overloaded: the concurrency an overloaded decode pool holds (its
// requests stay longer at a slow ITL) is read at the SLA's ITL, so a slow pool is not sized
// for its own slowness; within the SLA it is read as it is.
func TestObserveConcurrency_Overloaded(t *testing.T) {
	samples := &FPMObservations{DecodeSamples: []perf.FPM{{Version: perf.FPMVersion, WorkerID: "a", WallTime: 0.01,
		Scheduled: perf.ScheduledRequests{NumDecodeRequests: 80}, Queued: perf.QueuedRequests{NumDecodeRequests: 20}}}}
	tests := []struct {
		name string
		itl  *float64
		want float64
	}{
		{"within the ITL SLA", ptr(8.0), 100},
		{"at four times the SLA", ptr(40.0), 25},
		{"no ITL observed", nil, 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, st := aheadPlanner(t) // ITL SLA 10 ms
			tk := newTick(p, &st, 1, 1)
			tk.in = Input{Now: 5, FPM: samples, Traffic: &TrafficObservation{DurationS: 5, NumReq: ptr(10.0), ITLMs: tc.itl}}
			require.InDelta(t, tc.want, tk.observeConcurrency(nil, 3150, 65), 1e-9) // the model is only read without samples
		})
	}
}
