package scaling

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/llmplanner/planner/perf"

	"github.com/stretchr/testify/require"
)

func TestSLOHeadroom(t *testing.T) {
	p, st := aheadPlanner(t) // TTFT SLA 200 ms, ITL 10 ms
	const lead = 65.0
	tk := func(now float64, readyP, expectedP int, ttft float64) *tick {
		in := aheadInput(now, readyP, 4, expectedP, 4, 20)
		in.Traffic.TTFTMs, in.Traffic.ITLMs = ptr(ttft), ptr(5.0)
		return &tick{p: p, st: &st, in: in, diag: &Diagnostics{}, readyP: readyP, readyD: 4,
			expectedP: ptr(expectedP), expectedD: ptr(4), countsKnown: true}
	}
	// A settled pool whose TTFT breaks the SLA: a step of headroom (a quarter of the need,
	// at least one engine), no more than one a lead time.
	require.Equal(t, 1, tk(5, 4, 4, 500).sloHeadroom(Prefill, 4, lead))
	require.Equal(t, 1, tk(10, 4, 4, 500).sloHeadroom(Prefill, 4, lead), "within the lead time of the last step")
	require.Equal(t, 4, tk(75, 4, 4, 500).sloHeadroom(Prefill, 8, lead), "a lead time later: half of a need of 8")
	require.Zero(t, tk(75, 4, 4, 500).sloHeadroom(Decode, 4, lead), "the decode pool met its SLA")
	require.Equal(t, 1, tk(80, 4, 4, 100).sloHeadroom(Prefill, 1, lead), "a share of the need: one engine on a need of 1")
	for now := 140.0; now < 400; now += 65 {
		tk(now, 4, 4, 500).sloHeadroom(Prefill, 4, lead)
	}
	require.Equal(t, 8, tk(400, 4, 4, 500).sloHeadroom(Prefill, 8, lead), "never more than doubling the need")

	// Met from then on: kept for aheadFeedbackLeads lead times after the last change, then
	// lowered a step at a time.
	now, h := 405.0, 8
	for ; h == 8; now += 5 {
		h = tk(now, 4, 4, 100).sloHeadroom(Prefill, 8, lead)
	}
	require.GreaterOrEqual(t, now-5, 205+aheadFeedbackLeads*lead, "the last step was at 205 s")
	require.Equal(t, 6, h, "a quarter of the need off")
	for ; h > 0 && now < 1e5; now += 5 {
		h = tk(now, 4, 4, 100).sloHeadroom(Prefill, 8, lead)
	}
	require.Zero(t, h)

	// One missed interval among many met ones is within the budget: no step. A share over the
	// budget holds the headroom however long ago it last changed.
	p, st = aheadPlanner(t)
	for now := 5.0; now <= 650; now += 5 {
		tk(now, 4, 4, 100).sloHeadroom(Prefill, 4, lead)
	}
	require.Zero(t, tk(655, 4, 4, 500).sloHeadroom(Prefill, 4, lead), "%.1f%% of the requests missed", 100*st.Ahead.FeedbackPrefill.share())
	p, st = aheadPlanner(t)
	for now := 5.0; now <= 2000; now += 5 {
		h := tk(now, 4, 4, 500).sloHeadroom(Prefill, 4, lead)
		require.Positive(t, h, "at %v: missing all along, the headroom stays", now)
	}

	// Misses while the pool scales up are the forecast's lag: no headroom.
	p, st = aheadPlanner(t)
	for now := 5.0; now <= 600; now += 5 {
		require.Zero(t, tk(now, 2, 5, 900).sloHeadroom(Prefill, 5, lead), "at %v", now)
	}
	require.InDelta(t, 0, st.Ahead.FeedbackPrefill.share(), 1e-12)

	// Nor at a level beyond the demand the ready pool was sized for, a lead time or more
	// before: that miss is the forecast's. At a level of 20 req/s, a demand of 15 then was
	// outrun; one of 25 was not, and the same miss counts — also when the interval itself (a
	// burst within the level window) ran at 40 req/s.
	for _, tc := range []struct {
		forecast, interval float64
		counted            bool
	}{{15, 20, false}, {25, 20, true}, {25, 40, true}, {0, 20, true}} {
		p, st = aheadPlanner(t)
		st.Ahead.BucketS = 30
		st.Ahead.Count = make([]float64, 10)
		st.Ahead.Covered = make([]float64, 10)
		st.Ahead.ISL, st.Ahead.OSL = make([]float64, 10), make([]float64, 10)
		st.Ahead.Sized = make([]float64, 10)
		st.Ahead.Count[9], st.Ahead.Covered[9] = 600, 30 // the level: 20 req/s
		st.Ahead.Sized[10-1-4] = tc.forecast             // ⌈65 / 30⌉ + 1 = 4 buckets before the newest
		st.Ahead.Sized[10-1-3] = 1                       // younger than the lead time: not what the ready pool was ordered on
		k := tk(5, 4, 4, 500)
		k.in.Traffic.NumReq = ptr(tc.interval * k.in.Traffic.DurationS)
		k.sloHeadroom(Prefill, 4, lead)
		require.Equal(t, tc.counted, st.Ahead.FeedbackPrefill.Missed > 0, "a forecast of %v req/s (0: unknown), the interval at %v", tc.forecast, tc.interval)
	}

	// Nor in the interval a scale-up became ready: settled at the tick, the pool served the
	// interval smaller, still catching up. A prefill scale-up measured ready at this tick
	// (measureStartup), or more decode engines ready than at the last tick, whether or not a
	// scale-up was being measured; the next interval, on the grown pool, counts.
	p, st = aheadPlanner(t)
	k := tk(60, 4, 4, 500)
	st.Ahead.UpPrefill = &PendingDesired{Replicas: 4, At: 0}
	k.measureStartup()
	require.Nil(t, st.Ahead.UpPrefill, "measured ready")
	k.sloHeadroom(Prefill, 4, lead)
	require.Zero(t, st.Ahead.FeedbackPrefill.Missed, "the prefill interval it became ready in")
	k = tk(65, 4, 4, 500)
	k.in.Traffic.ITLMs = ptr(50.0)
	k.readyDBefore, k.readyPBefore = 3, 3
	k.sloHeadroom(Decode, 4, lead)
	require.Zero(t, st.Ahead.FeedbackDecode.Missed, "a decode engine more than at the last tick")
	k.sloHeadroom(Prefill, 4, lead)
	require.Zero(t, st.Ahead.FeedbackPrefill.Missed, "a prefill engine more than at the last tick, no scale-up measured")
	k = tk(70, 4, 4, 500)
	k.in.Traffic.ITLMs = ptr(50.0)
	k.readyDBefore, k.readyPBefore = 4, 4
	require.Equal(t, 1, k.sloHeadroom(Prefill, 4, lead), "the next prefill interval counts")
	require.Equal(t, 1, k.sloHeadroom(Decode, 4, lead), "the next decode interval counts")

	// Nor while a connector that leaves the target unknown reports the pool scaling.
	p, st = aheadPlanner(t)
	for now := 5.0; now <= 600; now += 5 {
		k := tk(now, 2, 2, 900)
		k.expectedP, k.inProgP = nil, true
		require.Zero(t, k.sloHeadroom(Prefill, 5, lead), "at %v", now)
	}
}

// TestAhead_StateSurvivesJSONAndIsNotMutated: the ahead policy's state — its history, its
// learned values, the SLO feedback — round-trips through JSON (the workflow carries it across
// Continue-As-New) to the same decisions, and Decide never modifies the state it is given.
func TestAhead_StateSurvivesJSONAndIsNotMutated(t *testing.T) {
	p, direct := aheadPlanner(t)
	viaJSON := direct
	for i := 0; i < 120; i++ {
		now := float64(5 * (i + 1))
		rate := 10 + 30*float64((i/20)%2) // steps between 10 and 40 req/s
		in := aheadInput(now, 2, 2, 2, 2, rate)
		in.Traffic.TTFTMs, in.Traffic.ITLMs = ptr(float64(100+400*(i%7/6))), ptr(6.0) // a miss every 7th tick
		in.FPM = &FPMObservations{
			Prefill:        []perf.FPM{{Version: perf.FPMVersion, WorkerID: "p0", WallTime: 0.06, Scheduled: perf.ScheduledRequests{NumPrefillRequests: 2, SumPrefillTokens: 6000, VarPrefillLength: 4e5}}},
			Decode:         []perf.FPM{{Version: perf.FPMVersion, WorkerID: "d0", WallTime: 0.007, Scheduled: perf.ScheduledRequests{NumDecodeRequests: int64(10 + i%5), SumDecodeKVTokens: int64(31000 + 3000*(i%5))}}},
			DecodeSamples:  []perf.FPM{{Version: perf.FPMVersion, WorkerID: "d0", WallTime: 0.008, Scheduled: perf.ScheduledRequests{NumDecodeRequests: 14, SumDecodeKVTokens: 44000}}},
			PrefillSamples: []perf.FPM{{Version: perf.FPMVersion, WorkerID: "p0", WallTime: 0.05, Queued: perf.QueuedRequests{NumPrefillRequests: 3, SumPrefillTokens: 9000, VarPrefillLength: 2e5}}},
		}
		next, next2, dec := decideBothWays(t, p, direct, viaJSON, in, i)
		if !dec.Empty() {
			next, next2 = p.Submitted(next, dec, now), p.Submitted(next2, dec, now)
		}
		direct, viaJSON = next, next2
	}
	require.NotNil(t, direct.Ahead.FeedbackPrefill, "the SLO feedback is part of the state")
	require.Positive(t, direct.Ahead.FeedbackPrefill.Seen)
}

// TestOutranForecast_SteadyAndStep: on steady Poisson arrivals the level seldom outruns what
// the pools were sized for (the feedback keeps nearly all its misses), and after a step it
// does until the sizing has caught up.
func TestOutranForecast_SteadyAndStep(t *testing.T) {
	p, st := aheadPlanner(t)
	rng := rand.New(rand.NewPCG(1, 2))
	poisson := func(mean float64) float64 { // a normal approximation, rounded, ≥ 0
		return math.Max(0, math.Round(mean+math.Sqrt(mean)*rng.NormFloat64()))
	}
	outran := func(now, perSecond float64) bool {
		in := aheadInput(now, 8, 8, 8, 8, 0)
		in.Traffic.NumReq = ptr(poisson(perSecond * 5))
		in.Traffic.ISL, in.Traffic.OSL = ptr(3000.0), ptr(300.0)
		decideAndSubmit(t, p, &st, in)
		k := &tick{p: p, st: &st, in: in, diag: &Diagnostics{}, readyP: 8, readyD: 8, expectedP: ptr(8), expectedD: ptr(8), countsKnown: true}
		return k.outranForecast(k.aheadLead())
	}
	var ticks, fired int
	now := 0.0
	for ; now < 2*3600; now += 5 {
		if outran(now+5, 20) && now >= 600 {
			fired++
		}
		if now >= 600 {
			ticks++
		}
	}
	require.Less(t, float64(fired)/float64(ticks), 0.1, "steady 20 req/s: outran on %d of %d ticks", fired, ticks)
	fired = 0
	for end := now + 60; now < end; now += 5 { // a step to 60 req/s
		if outran(now+5, 60) {
			fired++
		}
	}
	require.GreaterOrEqual(t, fired, 6, "the minute after a step to three times the level")
}

// TestSLOHeadroom_NotFromABacklogBeingCleared: the TTFTs of a backlog being cleared are its
// queue's tail (an engine's queue is its own: engines added would not serve it), so they add
// no headroom; the ITL of an aggregated pool still counts.
func TestSLOHeadroom_NotFromABacklogBeingCleared(t *testing.T) {
	const lead = 65.0
	for _, tc := range []struct {
		name     string
		agg      bool
		clearing bool
		itl      float64
		want     bool // a headroom
	}{
		{"TTFT over the SLA: a headroom", false, false, 5, true},
		{"TTFT over the SLA while a backlog is cleared: none", false, true, 5, false},
		{"aggregated, TTFT over while a backlog is cleared: none", true, true, 5, false},
		{"aggregated, TTFT over while a backlog is cleared, the ITL over too: a headroom", true, true, 50, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, st := aheadPlanner(t)
			c := Prefill
			if tc.agg {
				p, st = aggAheadPlanner(t)
				c = Decode
			}
			in := aheadInput(5, 4, 4, 4, 4, 20)
			in.Traffic.TTFTMs, in.Traffic.ITLMs = ptr(500.0), ptr(tc.itl)
			tk := &tick{p: p, st: &st, in: in, diag: &Diagnostics{}, readyP: 4, readyD: 4,
				expectedP: ptr(4), expectedD: ptr(4), countsKnown: true, clearingBacklog: tc.clearing}
			require.Equal(t, tc.want, tk.sloHeadroom(c, 4, lead) > 0)
		})
	}
}

// TestOutranForecast_AfterAStop: a forecast of no demand is a forecast made, so demand that
// comes back after traffic stopped outran it — its misses are the forecast's, not the
// sizing's — where a bucket with no forecast at all (0: none made, a state from before Sized
// was kept) leaves it unknown.
func TestOutranForecast_AfterAStop(t *testing.T) {
	p, st := aheadPlanner(t)
	tickAt := func(now, perSecond float64) *tick {
		in := aheadInput(now, 8, 8, 8, 8, perSecond)
		decideAndSubmit(t, p, &st, in)
		return &tick{p: p, st: &st, in: in, diag: &Diagnostics{}, readyP: 8, readyD: 8, expectedP: ptr(8), expectedD: ptr(8), countsKnown: true}
	}
	now := 5.0
	for ; now <= 600; now += 5 {
		tickAt(now, 20)
	}
	for ; now <= 1500; now += 5 { // the traffic stops for a quarter of an hour
		tickAt(now, 0)
	}
	a := st.Ahead
	require.Equal(t, aheadSizedNone, a.Sized[len(a.Sized)-2], "a bucket sized for no demand: %v", a.Sized)
	missed := a.FeedbackPrefill.Missed
	// The demand comes back on the settled pool, its TTFT far over the SLA: the forecast's
	// miss, which the SLO feedback does not count.
	in := aheadInput(now, 8, 8, 8, 8, 20)
	in.Traffic.TTFTMs = ptr(5000.0)
	decideAndSubmit(t, p, &st, in)
	require.Equal(t, missed, st.Ahead.FeedbackPrefill.Missed, "the return's first interval is not a sizing miss")
	require.Zero(t, st.Ahead.FeedbackPrefill.Headroom)
	k := &tick{p: p, st: &st, in: in, diag: &Diagnostics{}, readyP: 8, readyD: 8, expectedP: ptr(8), expectedD: ptr(8), countsKnown: true}
	require.True(t, k.outranForecast(k.aheadLead()), "demand back after a forecast of none outran it")
	for i := range st.Ahead.Sized {
		st.Ahead.Sized[i] = 0 // no forecast kept: unknown
	}
	require.False(t, k.outranForecast(k.aheadLead()), "no forecast kept: not known to have been outrun")
}

// TestRecordForecast_Sized: the demand the pools were sized for is kept per bucket; one of
// none as aheadSizedNone (a forecast made), an invalid one not at all (0: none made).
func TestRecordForecast_Sized(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sized float64
		want  float64
	}{
		{"a demand", 12.5, 12.5},
		{"none", 0, aheadSizedNone},
		{"negative: not kept", -3, 0},
		{"NaN: not kept", math.NaN(), 0},
		{"infinite: not kept", math.Inf(1), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &AheadState{Count: []float64{10, 20}}
			a.recordForecast(5, tc.sized)
			require.Equal(t, []float64{0, tc.want}, a.Sized)
		})
	}
}
