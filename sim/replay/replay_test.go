package replay

import (
	"math"
	"testing"
	"time"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/predict"
	"github.com/llmplanner/planner/sim/router"
	"github.com/stretchr/testify/require"
)

func TestRun_SteadyLowRateKeepsMinimumAndMeetsSLA(t *testing.T) {
	tests := []struct {
		name string
		rate float64
		isl  int
		osl  int
	}{
		{name: "short prompts", rate: 0.5, isl: 1000, osl: 100},
		{name: "long prompts", rate: 1, isl: 3000, osl: 50},
		{name: "single-token outputs", rate: 1, isl: 500, osl: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reqs := steps(step{0, 300, tc.rate, tc.isl, tc.osl})
			res, err := Run(reqs, loadOptions(t))
			require.NoError(t, err)
			require.Len(t, res.Requests, len(reqs))
			require.Equal(t, len(reqs), res.Finished)
			require.InDelta(t, 1.0, res.Goodput, 1e-12)
			require.Zero(t, res.ScaleActions)
			require.NotEmpty(t, res.Timeline)
			for _, e := range res.Timeline {
				require.Equal(t, PoolCounts{Ready: 1}, e.Prefill, "at %v", e.At)
				require.Equal(t, PoolCounts{Ready: 1}, e.Decode, "at %v", e.At)
				require.True(t, e.Decision.Empty(), "at %v", e.At)
			}
			// The ticks say what they observed: past the first minute every window holds
			// requests of the trace's lengths.
			last := res.Timeline[len(res.Timeline)-1]
			require.NotNil(t, last.Traffic, "the last tick read a window")
			require.NotNil(t, last.Traffic.NumReq)
			require.Positive(t, *last.Traffic.NumReq)
			require.NotNil(t, last.Traffic.ISL)
			require.InDelta(t, tc.isl, *last.Traffic.ISL, 1e-9)
			for _, r := range res.Requests {
				require.True(t, r.Finished)
				require.Greater(t, r.TTFTMs, 0.0)
				require.GreaterOrEqual(t, r.Finish, r.FirstToken)
				if r.OSL > 1 {
					require.Greater(t, r.ITLMs, 0.0)
				} else {
					require.Zero(t, r.ITLMs)
				}
			}
			require.LessOrEqual(t, res.TTFT.P50, res.TTFT.P90)
			require.LessOrEqual(t, res.TTFT.P90, res.TTFT.P99)
			require.LessOrEqual(t, res.TTFT.P99, loadConfig().TTFTMs)
		})
	}
}

// loadStep is 2 minutes at 1 req/s, 2 minutes at 30 req/s (about twice one prefill
// engine's capacity at ISL 3000), then 6 minutes at 1 req/s.
func loadStep() []predict.Request {
	return steps(step{0, 120, 1, 3000, 50}, step{120, 240, 30, 3000, 50}, step{240, 600, 1, 3000, 50})
}

func TestRun_LoadStepScalesPrefillUpAndDown(t *testing.T) {
	res, err := Run(loadStep(), loadOptions(t))
	require.NoError(t, err)
	require.Equal(t, len(res.Requests), res.Finished)

	var firstUp, maxReady, lastAt float64
	peak := 0
	sawStarting := false
	for _, e := range res.Timeline {
		require.Greater(t, e.At, lastAt, "ticks are strictly increasing")
		lastAt = e.At
		if e.Prefill.Starting > 0 {
			sawStarting = true
		}
		if e.Decision.Prefill != nil && *e.Decision.Prefill > e.Prefill.Ready && firstUp == 0 {
			firstUp = e.At
		}
		if e.Prefill.Ready > peak {
			peak, maxReady = e.Prefill.Ready, e.At
		}
		if e.At < 120 {
			require.Equal(t, PoolCounts{Ready: 1}, e.Prefill, "before the step at %v", e.At)
		}
	}
	require.GreaterOrEqual(t, firstUp, 120.0, "no scale-up before the load step")
	require.Less(t, firstUp, 150.0, "scale-up soon after the load step")
	require.True(t, sawStarting, "new engines are starting for the startup delay")
	require.GreaterOrEqual(t, peak, 3)
	require.Greater(t, maxReady, firstUp+30-1e-9, "the first new engine is ready after the 30 s startup delay")
	last := res.Timeline[len(res.Timeline)-1]
	require.Equal(t, PoolCounts{Ready: 1}, last.Prefill, "prefill back to one replica after the step")
	require.Equal(t, PoolCounts{Ready: 1}, last.Decode)
	require.GreaterOrEqual(t, res.ScaleActions, 2)
	require.GreaterOrEqual(t, res.Reversals, 1)
	// More GPU-seconds than the two initial engines alone.
	require.Greater(t, res.GPUSeconds, 2*res.Duration+30)
	require.Less(t, res.Goodput, 1.0, "the step overloads prefill before the new engines are ready")
	require.Positive(t, res.MissedTTFT+res.MissedBoth, "the overloaded prefill misses the TTFT")
	require.Equal(t, res.Finished-res.Good, res.MissedTTFT+res.MissedITL+res.MissedBoth,
		"every finished request that is not good missed the TTFT, the ITL or both")
}

func TestRun_Deterministic(t *testing.T) {
	a, err := Run(loadStep(), loadOptions(t))
	require.NoError(t, err)
	b, err := Run(loadStep(), loadOptions(t))
	require.NoError(t, err)
	require.Equal(t, a, b)
}

func TestRun_GPUSecondsWithoutScaling(t *testing.T) {
	tests := []struct {
		name    string
		prefill int
		decode  int
	}{
		{name: "1P1D", prefill: 1, decode: 1},
		{name: "2P1D", prefill: 2, decode: 1},
		{name: "2P3D", prefill: 2, decode: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := loadOptions(t)
			o.Config.Advisory = true // decisions are recorded, never applied
			o.InitialPrefill, o.InitialDecode = tc.prefill, tc.decode
			reqs := steps(step{0, 100, 2, 2000, 20})
			res, err := Run(reqs, o)
			require.NoError(t, err)
			require.Equal(t, len(reqs), res.Finished)
			last := 0.0
			for _, r := range res.Requests {
				last = max(last, r.Finish)
			}
			require.InDelta(t, last, res.Duration, 1e-9, "the replay ends with the last completion")
			require.Greater(t, res.Duration, 99.5)
			require.InDelta(t, float64(tc.prefill)*res.Duration, res.PrefillGPUSeconds, 1e-6)
			require.InDelta(t, float64(tc.decode)*res.Duration, res.DecodeGPUSeconds, 1e-6)
			require.InDelta(t, float64(tc.prefill+tc.decode)*res.Duration, res.GPUSeconds, 1e-6)
			require.Zero(t, res.ScaleActions)
		})
	}
}

func TestRun_FrontendQueueWaitsForFirstEngine(t *testing.T) {
	o := loadOptions(t)
	o.InitialPrefill = 0 // the planner's minimum (1) starts one: requests wait for it
	res, err := Run(steps(step{0, 20, 1, 1000, 10}), o)
	require.NoError(t, err)
	require.Equal(t, 20, res.Finished)
	first := res.Requests[0]
	require.Greater(t, first.FirstToken, o.StartupDelay.Seconds(), "the first request waited for the startup delay")
	require.Equal(t, 1, res.ScaleActions)
}

func TestRun_InvalidOptions(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Options)
		reqs   []predict.Request
	}{
		{name: "no profile", mutate: func(o *Options) { o.Profile = nil }},
		{name: "aggregated mode", mutate: func(o *Options) { o.Config.Mode = config.ModeAgg }},
		{name: "negative replicas", mutate: func(o *Options) { o.InitialDecode = -1 }},
		{name: "negative startup", mutate: func(o *Options) { o.StartupDelay = -time.Second }},
		{name: "negative arrival", mutate: func(*Options) {}, reqs: []predict.Request{{Arrival: -1, InputTokens: 1, OutputTokens: 2}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := loadOptions(t)
			tc.mutate(&o)
			_, err := Run(tc.reqs, o)
			require.ErrorIs(t, err, ErrInvalidOptions)
		})
	}
}

func TestPercentiles(t *testing.T) {
	tests := []struct {
		name string
		in   []float64
		want Percentiles
	}{
		{name: "empty", in: nil, want: Percentiles{}},
		{name: "one", in: []float64{7}, want: Percentiles{P50: 7, P90: 7, P99: 7}},
		{name: "interpolated", in: []float64{10, 0, 5}, want: Percentiles{P50: 5, P90: 9, P99: 9.9}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := percentiles(tc.in)
			require.InDelta(t, tc.want.P50, got.P50, 1e-9)
			require.InDelta(t, tc.want.P90, got.P90, 1e-9)
			require.InDelta(t, tc.want.P99, got.P99, 1e-9)
		})
	}
}

// BenchmarkRun replays one hour of 5 req/s, ISL 3000 / OSL 300.
func BenchmarkRun(b *testing.B) {
	reqs := steps(step{0, 3600, 5, 3000, 300})
	o := loadOptions(b)
	b.ResetTimer()
	for b.Loop() {
		res, err := Run(reqs, o)
		require.NoError(b, err)
		require.Equal(b, len(reqs), res.Finished)
	}
}

func TestPoolFPMs_PublishedAtPassEndWithIdleHeartbeats(t *testing.T) {
	s, err := newSim(nil, loadOptions(t))
	require.NoError(t, err)
	require.NoError(t, s.add(s.p, 10)) // prefill-1, starting until 10 s
	rep := s.p.reps[0]

	heartbeat := s.p.fpms(0)
	require.Len(t, heartbeat, 1, "a starting engine reports nothing")
	require.Equal(t, "prefill-0", heartbeat[0].WorkerID)
	require.True(t, heartbeat[0].IsHeartbeat())
	require.Len(t, s.p.fpms(10), 2, "ready engines report")

	// Two 6000-token prompts: the first pass (8192 tokens) finishes one and chunks the other.
	s.reqs = []predict.Request{{Arrival: 0, InputTokens: 6000, OutputTokens: 5}, {Arrival: 0, InputTokens: 6000, OutputTokens: 5}}
	s.res.Requests = []Record{{ISL: 6000, OSL: 5}, {ISL: 6000, OSL: 5}}
	s.p.queue = []int{0, 1}
	s.flush(s.p, 0)
	require.Equal(t, 2, outstanding(rep.eng.LoadAt(0)), "routed to the only ready engine")
	pass, ok := rep.eng.Step(0)
	require.True(t, ok)
	rep.inFlight, rep.passEnd, rep.running = true, pass.End(), pass.FPM
	rep.events = append(rep.events[:0], pass.Events...)
	require.True(t, s.p.fpms(0)[0].IsHeartbeat(), "the pass in flight is not published yet")

	rep.inFlight = false
	s.deliver(s.p, rep)
	got := s.p.fpms(pass.End())[0]
	require.False(t, got.IsHeartbeat())
	require.Equal(t, int64(8192), got.Scheduled.SumPrefillTokens)
	require.InDelta(t, pass.End(), s.res.Requests[0].FirstToken, 1e-12)
	require.Zero(t, s.res.Requests[1].FirstToken, "the chunked prompt has no first token yet")
	require.Len(t, s.hand, 1, "the finished prompt is handed off to decode")
	require.Greater(t, s.hand[0].at, pass.End(), "after the KV transfer delay")

	// Once the engine is idle it reports a heartbeat again.
	pass, ok = rep.eng.Step(pass.End())
	require.True(t, ok)
	rep.running, rep.events = pass.FPM, append(rep.events[:0], pass.Events...)
	s.deliver(s.p, rep)
	require.True(t, rep.eng.Idle())
	require.True(t, s.p.fpms(pass.End())[0].IsHeartbeat())
	require.Len(t, s.hand, 2)
}

// TestTraffic_Window: the traffic windows observe what Dynamo's frontend observes when it
// does: the count at arrival, TTFT and ISL at the first token, OSL and ITL at completion.
func TestTraffic_Window(t *testing.T) {
	s, err := newSim(nil, loadOptions(t))
	require.NoError(t, err)
	s.reqs = []predict.Request{{Arrival: 1, InputTokens: 100, OutputTokens: 2}, {Arrival: 4, InputTokens: 1000, OutputTokens: 50},
		{Arrival: 6, InputTokens: 300, OutputTokens: 1}, {Arrival: 7, InputTokens: 500, OutputTokens: 4}}
	s.res.Requests = make([]Record, len(s.reqs))
	first := []float64{1.1, 4.2, 6.1, 7.1}
	for i, r := range s.reqs {
		s.arrived(i)
		s.res.Requests[i] = Record{Arrival: r.Arrival, ISL: r.InputTokens, OSL: r.OutputTokens}
		s.firstToken(i, first[i])
	}
	s.finished(0, 3.1) // ITL 2000 ms
	s.finished(2, 6.1) // OSL 1: no ITL
	s.finished(3, 7.4) // ITL 100 ms
	s.finished(1, 9.0) // the long one, started before the last five seconds: ITL 4800/49 ms

	tests := []struct {
		name      string
		now, dur  float64
		numReq    float64
		isl, osl  *float64
		ttft, itl *float64
	}{
		{name: "last five seconds: the OSL of what finished, the long one included", now: 10, dur: 5, numReq: 2,
			isl: ptr(400.0), osl: ptr((1 + 4 + 50) / 3.0), ttft: ptr(100.0), itl: ptr((100 + 4800.0/49) / 2)},
		{name: "everything", now: 10, dur: 10, numReq: 4,
			isl: ptr(1900 / 4.0), osl: ptr(57 / 4.0), ttft: ptr(125.0), itl: ptr((2000 + 100 + 4800.0/49) / 3)},
		{name: "empty window", now: 20, dur: 5, numReq: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obs := s.traffic(tc.now, tc.dur)
			require.Equal(t, tc.dur, obs.DurationS)
			require.NotNil(t, obs.NumReq, "a count is always observed, zero included")
			require.InDelta(t, tc.numReq, *obs.NumReq, 1e-12)
			requirePtr(t, tc.isl, obs.ISL)
			requirePtr(t, tc.osl, obs.OSL)
			requirePtr(t, tc.ttft, obs.TTFTMs)
			requirePtr(t, tc.itl, obs.ITLMs)
		})
	}

	// Arrived and started, none finished yet: the ISL is known, the OSL is not.
	s, err = newSim(nil, loadOptions(t))
	require.NoError(t, err)
	s.reqs = []predict.Request{{Arrival: 4, InputTokens: 1000, OutputTokens: 50}}
	s.res.Requests = []Record{{Arrival: 4, ISL: 1000, OSL: 50}}
	s.arrived(0)
	s.firstToken(0, 4.2)
	obs := s.traffic(5, 5)
	requirePtr(t, ptr(1000.0), obs.ISL)
	require.Nil(t, obs.OSL)
	requirePtr(t, ptr(200.0), obs.TTFTMs)
}

func requirePtr(t *testing.T, want, got *float64) {
	t.Helper()
	if want == nil {
		require.Nil(t, got)
		return
	}
	require.NotNil(t, got)
	require.InDelta(t, *want, *got, 1e-9)
}

// TestRecord_Outcome: a finished record against a 200 ms TTFT and a 10 ms ITL SLA — within
// both (≤), over one, over both; a latency that is not a number is never within; one token (or
// none) has no ITL, whatever its ITL field holds.
func TestRecord_Outcome(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name      string
		osl       int
		ttft, itl float64
		want      Outcome
	}{
		{"within both", 10, 100, 5, Good},
		{"at both SLAs", 10, 200, 10, Good},
		{"late first token", 10, 201, 5, MissedTTFT},
		{"slow tokens", 10, 100, 11, MissedITL},
		{"both", 10, 300, 50, MissedBoth},
		{"TTFT not a number", 10, nan, 5, MissedTTFT},
		{"ITL not a number", 10, 100, nan, MissedITL},
		{"one token: no ITL", 1, 100, 50, Good},
		{"one token, ITL not a number", 1, 100, nan, Good},
		{"no token: no ITL", 0, 100, 50, Good},
		{"one token, late", 1, 300, 50, MissedTTFT},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Record{OSL: tc.osl, Finished: true, TTFTMs: tc.ttft, ITLMs: tc.itl}
			require.Equal(t, tc.want, r.Outcome(200, 10))
		})
	}
}

func TestScore(t *testing.T) {
	recs := []Record{
		{Arrival: 1, OSL: 10, Finished: true, TTFTMs: 100, ITLMs: 5},  // before from: not scored
		{Arrival: 5, OSL: 10, Finished: true, TTFTMs: 100, ITLMs: 5},  // good
		{Arrival: 6, OSL: 10, Finished: true, TTFTMs: 300, ITLMs: 5},  // TTFT too long
		{Arrival: 7, OSL: 10, Finished: true, TTFTMs: 100, ITLMs: 50}, // ITL too long
		{Arrival: 8, OSL: 1, Finished: true, TTFTMs: 100, ITLMs: 0},   // one token: no ITL, good
		{Arrival: 9, OSL: 10}, // unfinished: not good
	}
	sc := Score(recs, 200, 10, 5)
	require.Equal(t, 5, sc.Requests)
	require.Equal(t, 4, sc.Finished)
	require.Equal(t, 2, sc.Good)
	require.Equal(t, 1, sc.MissedTTFT)
	require.Equal(t, 1, sc.MissedITL)
	require.Zero(t, sc.MissedBoth)
	require.InDelta(t, 0.4, sc.Goodput, 1e-12)
	both := Score(append(recs, Record{Arrival: 10, OSL: 10, Finished: true, TTFTMs: 300, ITLMs: 50}), 200, 10, 5)
	require.Equal(t, 1, both.MissedBoth, "over both SLAs")
	require.Equal(t, both.Finished, both.Good+both.MissedTTFT+both.MissedITL+both.MissedBoth, "every finished request counted once")
	nan := Score([]Record{{Arrival: 5, OSL: 10, Finished: true, TTFTMs: math.NaN(), ITLMs: 5}}, 200, 10, 0)
	require.Zero(t, nan.Good, "a latency that is not a number is not good")
	require.Equal(t, 1, nan.MissedTTFT)
	require.Equal(t, 100.0, sc.TTFT.P50)
	require.Zero(t, Score(recs, 200, 10, 100).Goodput, "nothing to score")
}

func TestFPMObservations_SampleThePassesSinceTheLastRead(t *testing.T) {
	tests := []struct {
		name        string
		passes      int // decode passes delivered before the read (one heartbeat among them)
		wantSamples int
	}{
		{"no pass: no samples", 0, 0},
		{"a few passes: every one", 5, 5},
		{"more than the reservoir: a uniform sample of its size", 500, perf.FPMReservoirSize},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := newSim(nil, loadOptions(t))
			require.NoError(t, err)
			require.NoError(t, s.add(s.d, 0))
			rep := s.d.reps[len(s.d.reps)-1]
			for i := range tc.passes {
				rep.running = perf.FPM{Version: perf.FPMVersion, WorkerID: rep.id, CounterID: int64(i), WallTime: 0.005,
					Scheduled: perf.ScheduledRequests{NumDecodeRequests: int64(i%7 + 1)}}
				s.deliver(s.d, rep)
			}
			rep.running = perf.FPM{Version: perf.FPMVersion, WorkerID: rep.id} // a heartbeat: never a sample
			s.deliver(s.d, rep)

			obs := s.fpmObservations(1)
			require.Len(t, obs.DecodeSamples, tc.wantSamples)
			require.Empty(t, obs.PrefillSamples, "no prefill pass ran")
			for i, f := range obs.DecodeSamples {
				require.False(t, f.IsHeartbeat())
				if i > 0 {
					require.Less(t, obs.DecodeSamples[i-1].CounterID, f.CounterID, "in arrival order")
				}
			}
			require.Len(t, obs.Decode, len(s.d.reps), "the latest FPM of each ready engine")
			require.Empty(t, s.fpmObservations(2).DecodeSamples, "a read forgets the samples it returned")
		})
	}
}

// TestRun_RouterCountsPromptsUntilTheirPassEnds checks that a prefill engine running a pass
// is not read as idle by the router: the engine lets go of the prompts it completes when it
// computes the pass, but they hold it until the pass ends. Prompts 100 ms apart on four
// engines, each prompt's pass longer than that: a router that sees the busy engines never
// queues one behind another, so every prompt's first token takes one pass.
func TestRun_RouterCountsPromptsUntilTheirPassEnds(t *testing.T) {
	for _, mode := range []router.Mode{router.LeastLoaded, router.KV} {
		t.Run(string(mode), func(t *testing.T) {
			o := loadOptions(t)
			o.Config.Advisory = true // the four engines stay four
			o.InitialPrefill, o.InitialDecode = 4, 2
			o.Router = mode
			res, err := Run(steps(step{0, 30, 10, 6000, 2}), o)
			require.NoError(t, err)
			require.Equal(t, 300, res.Finished)
			pass := res.Requests[0].TTFTMs
			require.Greater(t, pass, 100.0, "a pass outlasts the gap between two prompts")
			require.Less(t, pass, 400.0, "and four engines take them in turn")
			for i, r := range res.Requests {
				require.InDelta(t, pass, r.TTFTMs, 1e-6, "prompt %d waited behind another", i)
			}
		})
	}
}
