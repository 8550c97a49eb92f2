package scaling

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
)

// linearPass is a forward pass of intercept + perToken·prefill + perKV·decodeKV seconds (the
// aggregated regression's form).
func linearPass(intercept, perToken, perKV float64) passFunc {
	return func(p, _, kv int64) (float64, bool) {
		return intercept + perToken*float64(p) + perKV*float64(kv), true
	}
}

// h200Pass is about the H200 profile's engine: 4.3 ms a decode pass plus 0.12 ms per
// 3,150-token request, 20 µs a prompt token.
var h200Pass = linearPass(0.0043, 20e-6, 0.12e-3/3150)

func rrShape() aggShape {
	return aggShape{ISL: 3000, OSL: 300, Ctx: 3150, Accept: 1, Chunk: 8192, MaxBatch: 512, ITL: 0.010}
}

func TestAggShape_ChunksStretchTheITL(t *testing.T) {
	s := rrShape()
	p, ok := s.at(h200Pass, 10)
	require.True(t, ok)
	require.InDelta(t, 0.0043+10*0.12e-3, p.Decode, 1e-9, "a decode-only pass")
	require.InDelta(t, 3000*20e-6, p.Prefill, 1e-9, "a prompt adds its tokens' time to the pass that carries it")
	// Over a request's 300 passes, 10 prompts arrive (the batch): each adds 60 ms.
	require.InDelta(t, p.Decode+10*0.060/300, p.ITL, 1e-9)
	require.InDelta(t, 10/(300*p.ITL), p.RPS, 1e-9, "Little")
	require.True(t, p.Fits)

	// Without the chunks the ITL would be the decode pass alone: the model is not that.
	require.Greater(t, p.ITL, p.Decode*1.3)

	// A long prompt takes several passes beside the decodes.
	long := s
	long.ISL = 20000
	require.Equal(t, 3.0, long.chunks(10))
	sv, ok := long.service(h200Pass, 10)
	require.True(t, ok)
	require.InDelta(t, 3*(0.0043+10*0.12e-3)+20000*20e-6, sv, 1e-9)
}

// TestAggShape_DecodeAtTheSlowerContext: with the context the engines hold known, a pass's
// decode (and the passes carrying a prompt) cost the slower of the two contexts' passes,
// whichever context is the shorter: an interpolated surface need not be faster at a shorter
// context. A pass that cannot be timed at the held context fails the shape's point.
func TestAggShape_DecodeAtTheSlowerContext(t *testing.T) {
	// 4 ms a decode pass, 8 ms when the requests hold under 2,500 tokens each; 20 µs a
	// prompt token.
	pass := func(p, reqs, kv int64) (float64, bool) {
		d := 0.0
		if reqs > 0 {
			d = 0.004
			if float64(kv)/float64(reqs) < 2500 {
				d = 0.008
			}
		}
		return d + 20e-6*float64(p), true
	}
	tests := []struct {
		name         string
		held, decode float64
	}{
		{"not known: ISL + OSL/2", 0, 0.004},
		{"held shorter and slower there", 2000, 0.008},
		{"held longer and no slower", 6000, 0.004},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := rrShape() // Ctx 3,150
			s.Held = tc.held
			p, ok := s.at(pass, 10)
			require.True(t, ok)
			require.InDelta(t, tc.decode, p.Decode, 1e-12)
			sv, ok := s.service(pass, 10)
			require.True(t, ok)
			require.InDelta(t, tc.decode+3000*20e-6, sv, 1e-12, "the pass carrying the prompt decodes at the same context")
		})
	}
	failsHeld := func(p, reqs, kv int64) (float64, bool) {
		if reqs > 0 && float64(kv)/float64(reqs) < 2500 {
			return 0, false
		}
		return pass(p, reqs, kv)
	}
	s := rrShape()
	s.Held = 2000
	_, ok := s.at(failsHeld, 10)
	require.False(t, ok, "not timed at the held context: no point")
	_, ok = s.service(failsHeld, 10)
	require.False(t, ok)
	s.Held = 0
	_, ok = s.at(failsHeld, 10)
	require.True(t, ok, "the held context not known: ISL + OSL/2 alone")

	// The note names the context the decode is costed at.
	s.Held = 2000
	require.Equal(t, ", decode at the 2000-token context the engines hold, slower than ISL + OSL/2's 3150", s.contextNote(pass, 10))
	s.Held = 6000
	require.Equal(t, ", decode at ISL + OSL/2's 3150-token context, no faster than the 6000 the engines hold", s.contextNote(pass, 10))
}

func TestAggCapacity(t *testing.T) {
	s := rrShape()
	b, eligible, ok := aggCapacity(s, h200Pass)
	require.True(t, ok)
	require.True(t, eligible)
	// 4.3 + 0.12 b + 0.2 b ≤ 10 ms: b ≤ 17.8.
	require.Equal(t, int64(17), b)
	p, _ := s.at(h200Pass, float64(b))
	require.LessOrEqual(t, p.ITL, s.ITL)
	q, _ := s.at(h200Pass, float64(b+1))
	require.Greater(t, q.ITL, s.ITL, "the largest batch meeting the SLA")

	// A tighter SLA or longer prompts lower the batch; more output tokens (fewer prompts per
	// pass) raise it.
	tight := s
	tight.ITL = 0.008
	bt, _, _ := aggCapacity(tight, h200Pass)
	require.Less(t, bt, b)
	longer := s
	longer.ISL = 6000
	bl, _, _ := aggCapacity(longer, h200Pass)
	require.Less(t, bl, b)
	chatty := s
	chatty.OSL = 1000
	bc, _, _ := aggCapacity(chatty, h200Pass)
	require.Greater(t, bc, b)

	// Not even one request meets it: batch 1, not eligible.
	slow := s
	slow.ITL = 0.001
	b1, el, ok := aggCapacity(slow, h200Pass)
	require.True(t, ok)
	require.False(t, el)
	require.Equal(t, int64(1), b1)
}

// bumpyPass is h200Pass with every pass carrying from..to decode requests add seconds (a
// negative add is a dip): a measured surface that is not monotonic in the batch.
func bumpyPass(from, to int64, add float64) passFunc {
	return func(p, reqs, kv int64) (float64, bool) {
		t, ok := h200Pass(p, reqs, kv)
		if reqs >= from && reqs <= to {
			t += add
		}
		return t, ok
	}
}

func TestAggCapacity_FirstMissOnANonMonotonicSurface(t *testing.T) {
	s := rrShape()
	// Batches 20–30 run 4 ms faster a pass: past the first miss (18) the SLA is met again. A
	// bisection from 1..511 lands on 30; the engines never get there within the SLA.
	dip := bumpyPass(20, 30, -0.004)
	b, eligible, ok := aggCapacity(s, dip)
	require.True(t, ok)
	require.True(t, eligible)
	require.Equal(t, int64(17), b)
	for k := int64(1); k <= b; k++ {
		p, _ := s.at(dip, float64(k))
		require.LessOrEqual(t, p.ITL, s.ITL, "batch %d", k)
	}
	p, _ := s.at(dip, 25)
	require.LessOrEqual(t, p.ITL, s.ITL, "the dip meets the SLA again")

	// Past the bound of the batches counted one at a time, the rest is bisected: free passes
	// with unbounded limits still end.
	free := rrShape()
	free.MaxBatch, free.Chunk = 1<<20, 1<<20
	bf, _, ok := aggCapacity(free, linearPass(0, 0, 0))
	require.True(t, ok)
	require.Greater(t, bf, int64(aggScanBatches))
	last, _ := free.at(linearPass(0, 0, 0), float64(bf))
	next, _ := free.at(linearPass(0, 0, 0), float64(bf+1))
	require.True(t, last.Fits)
	require.False(t, next.Fits, "the largest batch whose prompts fit the passes' budget")
}

func TestAggBatchAt_FirstBatchThatServesTheRate(t *testing.T) {
	s := rrShape()
	// Batches 10–14 run 6 ms slower a pass: the rate an engine serves falls there, so a rate
	// batch 9 serves is served again only past the bump.
	bump := bumpyPass(10, 14, 0.006)
	p9, _ := s.at(bump, 9)
	p10, _ := s.at(bump, 10)
	require.Less(t, p10.RPS, p9.RPS, "the surface is not monotonic")
	rps := 0.99 * p9.RPS
	for k := 10.0; k <= 14; k++ {
		q, _ := s.at(bump, k)
		require.Less(t, q.RPS, rps, "the bump's batch %.0f serves less than batch 9", k)
	}
	b := aggBatchAt(s, bump, rps, 40)
	require.Greater(t, b, 8.0)
	require.LessOrEqual(t, b, 9.0, "the first batch that serves the rate, not one past the bump")
	p, _ := s.at(bump, b)
	require.GreaterOrEqual(t, p.RPS, rps)
	for k := 1.0; k < math.Floor(b); k++ {
		q, _ := s.at(bump, k)
		require.Less(t, q.RPS, rps, "batch %.0f", k)
	}
	// On a monotonic surface it is the inverse of the rate as before; a rate no batch up to
	// top serves gets top.
	mono := aggBatchAt(s, h200Pass, rps, 40)
	pm, _ := s.at(h200Pass, mono)
	require.InDelta(t, rps, pm.RPS, 1e-6)
	require.Equal(t, 40.0, aggBatchAt(s, h200Pass, 1e6, 40))
}

func TestAggCapacity_AbsurdInputs(t *testing.T) {
	failing := func(int64, int64, int64) (float64, bool) { return 0, false }
	for name, tc := range map[string]struct {
		mutate func(*aggShape)
		pass   passFunc
		ok     bool
	}{
		"no prompt":          {func(s *aggShape) { s.ISL = 0 }, h200Pass, false},
		"NaN output":         {func(s *aggShape) { s.OSL = math.NaN() }, h200Pass, false},
		"infinite context":   {func(s *aggShape) { s.Ctx = math.Inf(1) }, h200Pass, false},
		"no ITL SLA":         {func(s *aggShape) { s.ITL = 0 }, h200Pass, false},
		"no chunk budget":    {func(s *aggShape) { s.Chunk = 1 }, h200Pass, false},
		"no batch":           {func(s *aggShape) { s.MaxBatch = 0 }, h200Pass, false},
		"accept below one":   {func(s *aggShape) { s.Accept = 0.5 }, h200Pass, false},
		"model not ready":    {func(*aggShape) {}, failing, false},
		"huge prompts":       {func(s *aggShape) { s.ISL, s.Ctx = 1e15, 1e15 }, h200Pass, true},
		"huge limits":        {func(s *aggShape) { s.MaxBatch, s.Chunk = math.MaxInt64, math.MaxInt64 }, h200Pass, true},
		"free passes":        {func(*aggShape) {}, linearPass(0, 0, 0), true},
		"one output token":   {func(s *aggShape) { s.OSL = 1 }, h200Pass, true},
		"speculative decode": {func(s *aggShape) { s.Accept = 3 }, h200Pass, true},
	} {
		t.Run(name, func(t *testing.T) {
			s := rrShape()
			tc.mutate(&s)
			b, _, ok := aggCapacity(s, tc.pass)
			require.Equal(t, tc.ok, ok)
			if ok {
				require.GreaterOrEqual(t, b, int64(1))
				require.LessOrEqual(t, b, max(1, min(s.MaxBatch, s.Chunk-1)))
			}
		})
	}
}

func TestAggEngines_MonotonicInLoad(t *testing.T) {
	s := rrShape()
	b, _, _ := aggCapacity(s, h200Pass)
	keep := math.Pow((-1+math.Sqrt(1+4*float64(b)))/2, 2)
	pt, _ := s.at(h200Pass, keep)
	prev := 0
	for _, rate := range []float64{0, 0.5, 1, 2, 5, 10, 20, 45, 90, 200, 1000} {
		n, service, ok := aggEngines(s, h200Pass, rate, pt.RPS, keep, 0.2, 1, aheadWaitMissShare, 64)
		require.True(t, ok)
		require.GreaterOrEqual(t, n, prev, "rate %.1f", rate)
		require.LessOrEqual(t, n, 64, "the limit bounds the pool")
		if rate > 0 {
			require.Positive(t, service)
			require.GreaterOrEqual(t, float64(n), math.Min(64, rate/pt.RPS-1e-9), "each engine within its ITL capacity")
		}
		prev = n
	}
	n45, _, _ := aggEngines(s, h200Pass, 45, pt.RPS, keep, 0.2, 1, aheadWaitMissShare, 64)
	require.Equal(t, 64, func() int {
		n, _, _ := aggEngines(s, h200Pass, 1e9, pt.RPS, keep, 0.2, 1, aheadWaitMissShare, 64)
		return n
	}(), "absurd load: the limit")
	// A tighter TTFT SLA never needs fewer engines; one a prompt alone breaks sizes the
	// prefill at 70% utilisation.
	tight, _, ok := aggEngines(s, h200Pass, 45, pt.RPS, keep, 0.068, 1, aheadWaitMissShare, 64)
	require.True(t, ok)
	require.GreaterOrEqual(t, tight, n45)
	over, _, ok := aggEngines(s, h200Pass, 45, pt.RPS, keep, 0.01, 1, aheadWaitMissShare, 64)
	require.True(t, ok)
	require.GreaterOrEqual(t, over, int(math.Ceil(45*0.06/0.7)))
	_, _, ok = aggEngines(s, h200Pass, 45, 0, keep, 0.2, 1, aheadWaitMissShare, 64)
	require.False(t, ok, "no capacity per engine: not sized")
}

// aggAheadPlanner is the ahead policy on an aggregated deployment of the test profile.
func aggAheadPlanner(t *testing.T) (*Planner, State) {
	cfg := slaConfig(func(c *config.Config) {
		c.Mode, c.ScalingPolicy = config.ModeAgg, config.PolicyAhead
		c.TTFTMs, c.ITLMs, c.MaxGPUBudget = 200, 10, 16
	})
	require.NoError(t, cfg.Validate())
	prof, err := perf.LoadProfile("../sim/engine/testdata")
	require.NoError(t, err)
	p := mustPlanner(t, cfg)
	return p, mustInit(t, p, 0, ProfileBootstrap(prof, config.ModeAgg))
}

func TestAhead_AggSizesTheOnePool(t *testing.T) {
	p, st := aggAheadPlanner(t)
	var need []int
	for _, rate := range []float64{5, 20, 45} {
		st2 := st
		st2.Ahead = nil
		_, dec, diag, err := p.Decide(st2, aheadInput(5, 0, 2, 0, 2, rate))
		require.NoError(t, err)
		require.Nil(t, dec.Prefill, "agg decides the decode component only")
		n := 2
		if dec.Decode != nil {
			n = *dec.Decode
		}
		require.NotNil(t, diag.EngineRPSDecode)
		require.Contains(t, strings.Join(diag.Notes, "\n"), "with chunks interleaved", "the note gives the agg model's reasoning")
		need = append(need, n)
	}
	require.Less(t, need[0], need[2], "more demand, more engines: %v", need)
	require.LessOrEqual(t, need[1], need[2])
	require.LessOrEqual(t, need[2], 16)
}

// TestAhead_AggHeldFloorAfterALeadTime: the requests an aggregated pool's engines hold size
// it, over the batch kept — in full while the pool has seen less than a lead time of live
// traffic (the only early sign of a burst), and after that at most twice the engines the
// rate and the waits need (past that, what an overloaded pool holds is its queue), which the
// note says.
func TestAhead_AggHeldFloorAfterALeadTime(t *testing.T) {
	p, st := aggAheadPlanner(t)
	heldInput := func(now float64, held int64) Input {
		in := aheadInput(now, 0, 2, 0, 2, 5)
		for _, w := range []string{"a0", "a1"} {
			if held > 0 {
				in.FPM.Decode = append(in.FPM.Decode, perf.FPM{Version: perf.FPMVersion, WorkerID: w, WallTime: 0.02,
					Scheduled: perf.ScheduledRequests{NumDecodeRequests: held / 2}})
			}
		}
		return in
	}
	sized := func(diag Diagnostics) (n int, note string) {
		t.Helper()
		note = strings.Join(diag.Notes, "\n")
		m := regexp.MustCompile(`aggregated (\d+) \(`).FindStringSubmatch(note)
		require.Len(t, m, 2, note)
		n, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		return n, note
	}

	// Cold: the first tick's 80 requests held ask for their engines in full.
	_, _, diag, err := p.Decide(st, heldInput(5, 80))
	require.NoError(t, err)
	cold, note := sized(diag)
	require.GreaterOrEqual(t, cold, 5, "80 requests over a batch of about 13: %s", note)
	require.Regexp(t, `80 requests held at the 90% quantile, which ask for \d+ engines, not capped at twice the \d+ the rate and the waits need: 5 s of live traffic, less than the 65 s lead time`, note)
	require.NotContains(t, note, "the holds record", "within the first lead time the holds keep the floor's engines too")

	// A lead time of live traffic later, the same requests held ask for at most twice what
	// the rate (5 req/s: one engine) and the waits need.
	warm := st
	lead := p.cfg.StartupPriorSeconds() + 5
	now := 5.0
	for ; now <= lead+5; now += 5 {
		decideAndSubmit(t, p, &warm, heldInput(now, 0))
	}
	decideAndSubmit(t, p, &warm, heldInput(now, 80)) // the 90% quantile of the lead time's ticks: two of them
	_, _, diag, err = p.Decide(warm, heldInput(now+5, 80))
	require.NoError(t, err)
	capped, note := sized(diag)
	require.Less(t, capped, cold, note)
	m := regexp.MustCompile(`80 requests held at the 90% quantile, which ask for (\d+) engines: capped at (\d+), twice the (\d+) the rate and the waits need`).FindStringSubmatch(note)
	require.Len(t, m, 4, note)
	asked, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	top, err := strconv.Atoi(m[2])
	require.NoError(t, err)
	rateNeed, err := strconv.Atoi(m[3])
	require.NoError(t, err)
	require.Equal(t, 2*rateNeed, top)
	require.Greater(t, asked, top, note)
	require.Equal(t, top, capped, "capped at twice the rate's need")
	require.Contains(t, note, fmt.Sprintf("; the holds record %d, without the %d engines more for the requests held", rateNeed, top-rateNeed))

	// A warmed history covers more than a lead time from the start, but only its live
	// seconds count: a warmed planner's first tick is not capped either.
	path := writeTrace(t, sinusoidTrace(1200, 300, 2, 6))
	pw := mustPlanner(t, slaConfig(func(c *config.Config) {
		c.Mode, c.ScalingPolicy = config.ModeAgg, config.PolicyAhead
		c.TTFTMs, c.ITLMs, c.MaxGPUBudget = 200, 10, 16
		c.LoadPredictorWarmupTrace = &path
	}))
	reqs, _, err := pw.ReadWarmup()
	require.NoError(t, err)
	prof, err := perf.LoadProfile("../sim/engine/testdata")
	require.NoError(t, err)
	boot := ProfileBootstrap(prof, config.ModeAgg)
	boot.Warmup = reqs
	stW := mustInit(t, pw, 0, boot)
	require.True(t, stW.Ahead.Warmed)
	_, _, diag, err = pw.Decide(stW, heldInput(5, 80))
	require.NoError(t, err)
	_, note = sized(diag)
	require.Regexp(t, `80 requests held at the 90% quantile, which ask for \d+ engines, not capped at twice the \d+ the rate and the waits need: 5 s of live traffic`, note)
}

// TestAhead_AggBacklogCountsWholePrompts: the queued prompt tokens the FPMs show are whole
// prompts, so the aggregated pool's backlog is counted in requests at the prompt length, as
// the disaggregated prefill sizing counts it — not at the part a prefix-cache hit leaves to
// compute, which would count 1/(1 − hit) times as many requests.
func TestAhead_AggBacklogCountsWholePrompts(t *testing.T) {
	p, st := aggAheadPlanner(t)
	rateAt := func(hit *float64) float64 {
		st2 := st
		st2.Ahead = nil
		st2.LastKVHitRate = hit
		in := aheadInput(5, 0, 2, 0, 2, 5)
		for _, w := range []string{"a0", "a1"} { // 10 prompts of 3,000 tokens queued
			in.FPM.Decode = append(in.FPM.Decode, perf.FPM{Version: perf.FPMVersion, WorkerID: w, WallTime: 0.02,
				Queued: perf.QueuedRequests{NumPrefillRequests: 5, SumPrefillTokens: 15000}})
		}
		_, _, diag, err := p.Decide(st2, in)
		require.NoError(t, err)
		m := regexp.MustCompile(`aggregated \d+ \(([0-9.]+) req/s incl\. backlog 30000 tokens`).FindStringSubmatch(strings.Join(diag.Notes, "\n"))
		require.Len(t, m, 2, "the aggregated sizing's note: %v", diag.Notes)
		r, err := strconv.ParseFloat(m[1], 64)
		require.NoError(t, err)
		return r
	}
	none := rateAt(nil)
	require.Greater(t, none, 5.0, "the backlog adds to the rate")
	require.Equal(t, none, rateAt(ptr(0.5)), "half the prompt cached: the same 10 requests queued")
}

// TestProfileAggPass: an aggregated pass costs the profile's prefill TTFT of its new tokens
// plus its decode ITL at the batch's KV usage and mean context (at least 1 ms).
func TestProfileAggPass(t *testing.T) {
	prof, err := perf.LoadProfile("../sim/engine/testdata")
	require.NoError(t, err)
	pi, err := perf.NewPrefillInterpolator(prof.Prefill)
	require.NoError(t, err)
	di, err := perf.NewDecodeInterpolator(prof.Decode)
	require.NoError(t, err)
	pass := profileAggPass(pi, di)
	maxKV := float64(di.MaxKVTokens())

	got, ok := pass(2000, 0, 0)
	require.True(t, ok)
	require.InDelta(t, pi.TTFTMs(2000)/1000, got, 1e-12, "prefill only")
	itl, _ := di.At(32*1100/maxKV, 1100)
	got, ok = pass(0, 32, 32*1100)
	require.True(t, ok)
	require.InDelta(t, math.Max(1, itl)/1000, got, 1e-12, "decode only")
	got, ok = pass(2000, 32, 32*1100)
	require.True(t, ok)
	require.InDelta(t, (pi.TTFTMs(2000)+math.Max(1, itl))/1000, got, 1e-12, "a mixed pass costs both parts")
	got, ok = pass(0, 0, 0)
	require.True(t, ok)
	require.Zero(t, got, "an empty pass")
}

// TestNew_AggProfilePassForAheadOnly: the profile's aggregated pass model is built for the
// ahead policy in mode agg with a profile, and for nothing else — Dynamo's policies and the
// disaggregated modes never see it.
func TestNew_AggProfilePassForAheadOnly(t *testing.T) {
	prof, err := perf.LoadProfile("../sim/engine/testdata")
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		mode   config.Mode
		policy config.ScalingPolicy
		prof   *perf.Profile
		want   bool
	}{
		"ahead agg":          {config.ModeAgg, config.PolicyAhead, prof, true},
		"ahead agg, no prof": {config.ModeAgg, config.PolicyAhead, nil, false},
		"dynamo agg":         {config.ModeAgg, config.PolicyDynamo, prof, false},
		"ahead disagg":       {config.ModeDisagg, config.PolicyAhead, prof, false},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := slaConfig(func(c *config.Config) { c.Mode, c.ScalingPolicy = tc.mode, tc.policy })
			p, err := New(cfg, tc.prof)
			require.NoError(t, err)
			require.Equal(t, tc.want, p.aggProfilePass != nil)
		})
	}
}

// aggProfileSetup is an aggregated ahead planner's configuration at the TTFT and ITL SLAs
// given (ms; 16 GPUs) and the test profile.
func aggProfileSetup(t *testing.T, ttftMs, itlMs float64) (config.Config, *perf.Profile) {
	t.Helper()
	cfg := slaConfig(func(c *config.Config) {
		c.Mode, c.ScalingPolicy = config.ModeAgg, config.PolicyAhead
		c.TTFTMs, c.ITLMs, c.MaxGPUBudget = ttftMs, itlMs, 16
	})
	prof, err := perf.LoadProfile("../sim/engine/testdata")
	require.NoError(t, err)
	return cfg, prof
}

// aggNoteBatch is the SLA batch and the pass times' source (with what follows it in the
// parentheses) that the aggregated sizing's note gives.
func aggNoteBatch(t *testing.T, notes []string) (int, string) {
	t.Helper()
	m := regexp.MustCompile(`batch \d+ of (\d+) at the ITL SLA with chunks interleaved \(([^)]*)\)`).FindStringSubmatch(strings.Join(notes, "\n"))
	require.Len(t, m, 3, "the aggregated sizing's note: %v", notes)
	b, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return b, m[2]
}

// TestAhead_AggSizesWithTheProfile: with a profile, the aggregated sizing's pass times are
// the profile's, so a loaded engine's passes, which the perf model's regression refits to,
// leave its SLA batch where it was; without one the perf model sizes the pool, and the same
// passes move it (from 11 requests on the profile's points alone to 28 here).
func TestAhead_AggSizesWithTheProfile(t *testing.T) {
	cfg, prof := aggProfileSetup(t, 200, 10)
	pi, err := perf.NewPrefillInterpolator(prof.Prefill)
	require.NoError(t, err)
	di, err := perf.NewDecodeInterpolator(prof.Decode)
	require.NoError(t, err)
	truth := profileAggPass(pi, di)
	slaBatch := func(p *Planner, loaded bool) (int, string) {
		t.Helper()
		st := mustInit(t, p, 0, ProfileBootstrap(prof, config.ModeAgg))
		in := aheadInput(5, 0, 2, 0, 2, 20)
		if loaded {
			// One loaded engine's passes, timed as the profile times them: 40 to 79 requests
			// of 3,150 tokens decoding, and every other pass a 3,000-token prompt beside them.
			for i := range 400 {
				reqs, tokens := int64(40+i%40), int64(3000*(i%2))
				wall, ok := truth(tokens, reqs, reqs*3150)
				require.True(t, ok)
				in.FPM.DecodeSamples = append(in.FPM.DecodeSamples, perf.FPM{Version: perf.FPMVersion, WorkerID: "a0", WallTime: wall,
					Scheduled: perf.ScheduledRequests{NumPrefillRequests: tokens / 3000, SumPrefillTokens: tokens, NumDecodeRequests: reqs, SumDecodeKVTokens: reqs * 3150}})
			}
		}
		_, _, diag, err := p.Decide(st, in)
		require.NoError(t, err)
		return aggNoteBatch(t, diag.Notes)
	}
	withProfile, err := New(cfg, prof)
	require.NoError(t, err)
	calm, source := slaBatch(withProfile, false)
	require.Equal(t, "the profile's pass times", source)
	swung, _ := slaBatch(withProfile, true)
	require.Equal(t, calm, swung, "the profile's pass times do not move with the engines' passes")

	alone := mustPlanner(t, cfg)
	calm, source = slaBatch(alone, false)
	require.Equal(t, "the perf model's pass times", source)
	swung, _ = slaBatch(alone, true)
	require.NotEqual(t, calm, swung, "the same passes move the perf model's SLA batch")
}

// TestAhead_AggDecodeAtTheContextHeld: the engines' FPMs show the mean context of the
// decode requests they hold; where it is not ISL + OSL/2 the aggregated pool is sized at
// the slower of the two, which the note says. On the profile's surface a batch holding
// 2,010 tokens a request is slower than one holding 3,150 (ISL 3,000 + OSL 300/2), so the
// SLA batch is smaller; at 3,150 held nothing changes.
func TestAhead_AggDecodeAtTheContextHeld(t *testing.T) {
	cfg, prof := aggProfileSetup(t, 1000, 25)
	p, err := New(cfg, prof)
	require.NoError(t, err)
	slaBatch := func(held int64) (int, string) {
		t.Helper()
		st := mustInit(t, p, 0, ProfileBootstrap(prof, config.ModeAgg))
		in := aheadInput(5, 0, 2, 0, 2, 6)
		if held > 0 {
			for i := range 20 {
				reqs := int64(20 + i)
				in.FPM.DecodeSamples = append(in.FPM.DecodeSamples, perf.FPM{Version: perf.FPMVersion, WorkerID: "a0", WallTime: 0.01,
					Scheduled: perf.ScheduledRequests{NumDecodeRequests: reqs, SumDecodeKVTokens: reqs * held}})
			}
		}
		_, _, diag, err := p.Decide(st, in)
		require.NoError(t, err)
		return aggNoteBatch(t, diag.Notes)
	}
	alone, source := slaBatch(0)
	require.Equal(t, "the profile's pass times", source)
	same, source := slaBatch(3150)
	require.Equal(t, alone, same)
	require.Equal(t, "the profile's pass times", source, "the context held is ISL + OSL/2: nothing to compare")
	shorter, source := slaBatch(2010)
	require.Less(t, shorter, alone, "the profile's surface is slower at 2,010 tokens a request than at 3,150")
	require.Equal(t, "the profile's pass times, decode at the 2010-token context the engines hold, slower than ISL + OSL/2's 3150", source)
	longer, source := slaBatch(6000)
	require.Equal(t, "the profile's pass times, decode at the 6000-token context the engines hold, slower than ISL + OSL/2's 3150", source)
	require.LessOrEqual(t, longer, alone)
}

// TestAhead_AggEdgeWhileEnginesStart: an aggregated pool learns its decode edge (the rate per
// engine at which the observed ITL neared the SLA) while it is settled, and while engines it
// ordered start but none has become ready within the last lead time — the engines ready then
// carry the whole load — but not within a lead time of engines becoming ready, when the
// engines that were alone under the rise drain their backlog while the new ones idle, nor
// within a lead time of a tick whose ready count is not known (a missed tick: engines may
// have become ready unseen).
func TestAhead_AggEdgeWhileEnginesStart(t *testing.T) {
	const rate = 12.0 // steady arrivals, req/s
	p, _ := aggAheadPlanner(t)
	lead := p.cfg.StartupPriorSeconds() + p.loadI
	tests := []struct {
		name     string
		expected int     // the engines the pool is to have from the second tick; 2 are ready from the start
		readyAt  float64 // when a third becomes ready (0: never)
		missed   float64 // a tick that does not happen (0: none)
		readAt   float64 // the tick whose ITL is over 80% of the SLA
		grewAt   float64 // DecodeGrewAt before it
		learned  bool
	}{
		{name: "settled", expected: 2, readAt: 55, learned: true},
		{name: "engines starting, none ready yet", expected: 4, readAt: 55, learned: true},
		{name: "an engine ready less than a lead time ago", expected: 4, readyAt: 30, readAt: 30 + lead - p.loadI, grewAt: 30},
		{name: "an engine ready a lead time ago", expected: 4, readyAt: 30, readAt: 30 + lead, grewAt: 30, learned: true},
		{name: "a missed tick less than a lead time ago", expected: 4, missed: 30, readAt: 35 + lead - p.loadI, grewAt: 35},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, st := aggAheadPlanner(t)
			input := func(now, itl float64) Input {
				ready := 2
				if tt.readyAt > 0 && now >= tt.readyAt {
					ready = 3
				}
				expected := ready // the first tick finds the pool settled; it grows from the second on
				if now > p.loadI {
					expected = max(ready, tt.expected)
				}
				in := aheadInput(now, 0, ready, 0, expected, rate)
				in.Traffic.ITLMs = ptr(itl)
				return in
			}
			// Calm ticks with the ITL well within the SLA, then one over 80% of it.
			for now := p.loadI; now < tt.readAt; now += p.loadI {
				if now == tt.missed {
					continue
				}
				var err error
				st, _, _, err = p.Decide(st, input(now, 5))
				require.NoError(t, err)
			}
			require.Zero(t, st.Ahead.DecodeEdgeRPS, "nothing to learn while the ITL is low")
			require.Equal(t, tt.grewAt, st.Ahead.DecodeGrewAt)
			in := input(tt.readAt, 9)
			next, _, _, err := p.Decide(st, in)
			require.NoError(t, err)
			if !tt.learned {
				require.Zero(t, next.Ahead.DecodeEdgeRPS, "within a lead time of engines (maybe) becoming ready")
				return
			}
			ready := float64(*in.Workers.ReadyDecode)
			require.InDelta(t, rate/ready, next.Ahead.DecodeEdgeRPS, 0.5, "the arrivals over the engines ready")
		})
	}
}

// TestAhead_AggHeldFloorNotHeldOnCalmArrivals: past the first lead time, on calm arrivals,
// the engines an aggregated pool's requests-held floor adds are released as soon as the floor
// stops asking for them — the scale-down holds record the need without them, and with the
// SLO feedback's headroom on the need without them only. On bursty arrivals they are held
// like any other need.
func TestAhead_AggHeldFloorNotHeldOnCalmArrivals(t *testing.T) {
	holdsRecord := regexp.MustCompile(`requests held at the 90% quantile[^;]*; the holds record (\d+), without the (\d+) engines more for the requests held`)
	heldNow := regexp.MustCompile(`(\d+) requests held at the 90% quantile`)
	headroomNote := regexp.MustCompile(`\+ (\d+) for the SLO \([^)]*\) \((\d+) of them on the engines for the requests held, not recorded for the holds either\)`)
	for _, tc := range []struct {
		name     string
		rate     func(now float64) float64 // req/s, 1 on average
		held     int64                     // requests held at the two ticks
		calm     bool
		headroom float64 // the SLO feedback's headroom on the decode pool's need
	}{
		{"calm, the floor capped at twice the rate's need", func(float64) float64 { return 1 }, 80, true, 0},
		{"calm, the floor under that cap", func(float64) float64 { return 1 }, 6, true, 0},
		{"calm, the floor capped, with SLO headroom", func(float64) float64 { return 1 }, 80, true, 0.5},
		{"bursty", func(now float64) float64 { return []float64{0, 0, 3}[int(now/5)%3] }, 80, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, st := aggAheadPlanner(t)
			in := func(now float64, ready, expected int, held int64) Input {
				in := aheadInput(now, 0, ready, 0, expected, tc.rate(now))
				for i := range ready {
					if held > 0 {
						in.FPM.Decode = append(in.FPM.Decode, perf.FPM{Version: perf.FPMVersion, WorkerID: fmt.Sprintf("a%d", i), WallTime: 0.02,
							Scheduled: perf.ScheduledRequests{NumDecodeRequests: held / int64(ready)}})
					}
				}
				return in
			}
			lead := p.cfg.StartupPriorSeconds() + 5
			now := 5.0
			for ; now <= 3*lead; now += 5 { // past the trend window, on 2 engines
				decideAndSubmit(t, p, &st, in(now, 2, 2, 0))
			}
			if tc.headroom > 0 {
				// Set now and not lowered for the feedback's window (no interval is over
				// the SLA here, so none raises it either).
				st.Ahead.FeedbackDecode = &SLOFeedback{Seen: 10, Headroom: tc.headroom, ChangedAt: now}
			}
			// Two ticks with the requests held (the lead time's 90% quantile needs two): the
			// floor raises the pool; on calm arrivals the holds are told to keep the rate's
			// need, and record it.
			floor, keep, told := 0, 0, false
			for range 2 {
				dec, diag := decideAndSubmit(t, p, &st, in(now, 2, 2, tc.held))
				now += 5
				if d := dec.Decode; d != nil {
					floor = *d
				}
				note := strings.Join(diag.Notes, "\n")
				if m := holdsRecord.FindStringSubmatch(note); m != nil {
					told = true
					var err error
					keep, err = strconv.Atoi(m[1])
					require.NoError(t, err)
					added, err := strconv.Atoi(m[2])
					require.NoError(t, err)
					require.Positive(t, added)
					sloAdded, sloNotHeld := 0, 0
					if tc.headroom > 0 {
						h := headroomNote.FindStringSubmatch(note)
						require.Len(t, h, 3, "the headroom on the floor's engines is named: %s", note)
						sloAdded, err = strconv.Atoi(h[1])
						require.NoError(t, err)
						sloNotHeld, err = strconv.Atoi(h[2])
						require.NoError(t, err)
						f := &SLOFeedback{Headroom: tc.headroom}
						require.Equal(t, f.headroomFor(keep+added), sloAdded, "the headroom is a share of the whole need: %s", note)
						require.Equal(t, f.headroomFor(keep), sloAdded-sloNotHeld, "the holds keep the headroom on the rate's need only: %s", note)
						require.Positive(t, sloNotHeld)
					} else {
						require.NotContains(t, note, "for the SLO")
					}
					require.Equal(t, floor, keep+added+sloAdded, "the decision is the rate's need, the floor's engines and the SLO's headroom on both: %s", note)
					keep += sloAdded - sloNotHeld // what the holds record
				}
			}
			require.Greater(t, floor, 2, "the requests held raised the pool")
			require.Equal(t, tc.calm, told)
			recorded := slices.Max(st.Ahead.NeedDecode[len(st.Ahead.NeedDecode)-2:])
			if tc.calm {
				require.Equal(t, keep, recorded, "the buckets' needs the quiet-gap and bursty holds read")
				require.Equal(t, keep, st.StabilizationDecode[len(st.StabilizationDecode)-1].Replicas, "the lead time's hold reads the same")
			} else {
				require.Equal(t, floor, recorded)
			}
			// The engines start (ready a startup later) and hold nothing: while the lead
			// time's quantile still holds the requests, the floor keeps its engines. At the
			// first tick it no longer asks for them, on calm arrivals the pool goes back to
			// what the rate needs; on bursty ones the holds keep them.
			ordered := now - 5
			for ; ; now += 5 {
				require.Less(t, now, 6*lead, "the floor never stopped asking")
				ready := 2
				if now >= ordered+p.cfg.StartupPriorSeconds() {
					ready = floor
				}
				dec, diag := decideAndSubmit(t, p, &st, in(now, ready, floor, 0))
				note := strings.Join(diag.Notes, "\n")
				m := heldNow.FindStringSubmatch(note)
				require.Len(t, m, 2, note)
				if m[1] != "0" {
					require.Nil(t, dec.Decode, "at %.0f s, while the floor asks: %s", now, note)
					continue
				}
				if !tc.calm {
					require.Nil(t, dec.Decode, "at %.0f s: %s", now, note)
					require.Equal(t, ReasonScaleDownStabilizing, diag.LoadReasonDecode)
					break
				}
				require.NotNil(t, dec.Decode, "at %.0f s the floor's engines are released at once: %s (%s)", now, note, diag.LoadReasonDecode)
				require.Equal(t, keep, *dec.Decode, "to the need the holds recorded")
				require.Equal(t, ReasonScaleDown, diag.LoadReasonDecode)
				break
			}
		})
	}
}

// TestAhead_AggIdleTickKeepsNoEngineForTheRequestsHeld: past the first lead time, on calm
// arrivals, the engines the requests-held floor adds are for a queue. At a tick where
// nothing arrived and nothing is queued, the requests the engines hold drain where they are:
// the need is the rate's, and the floor's engines go (the holds never recorded them). While
// requests arrive, the floor keeps asking for them.
func TestAhead_AggIdleTickKeepsNoEngineForTheRequestsHeld(t *testing.T) {
	holdsRecord := regexp.MustCompile(`; the holds record (\d+), without the (\d+) engines more for the requests held`)
	for _, tc := range []struct {
		name string
		rate float64 // req/s at the tick after the floor's engines were ordered
	}{
		{"idle", 0},
		{"arrivals", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, st := aggAheadPlanner(t)
			in := func(now float64, ready, expected int, rate float64, held int64) Input {
				in := aheadInput(now, 0, ready, 0, expected, rate)
				in.FPM.Decode = idleFPMs("a", ready) // every ready engine publishes
				for i := range in.FPM.Decode {
					in.FPM.Decode[i].Scheduled.NumDecodeRequests = held / int64(ready)
				}
				return in
			}
			lead := p.cfg.StartupPriorSeconds() + 5
			now := 5.0
			for ; now <= 3*lead; now += 5 { // past the trend window, on 2 engines
				decideAndSubmit(t, p, &st, in(now, 2, 2, 4, 0))
			}
			floor, keep := 2, 0
			for range 2 { // the lead time's 90% quantile of the requests held needs two ticks
				dec, diag := decideAndSubmit(t, p, &st, in(now, 2, 2, 4, 80))
				now += 5
				if dec.Decode != nil {
					floor = *dec.Decode
				}
				if m := holdsRecord.FindStringSubmatch(strings.Join(diag.Notes, "\n")); m != nil {
					var err error
					keep, err = strconv.Atoi(m[1])
					require.NoError(t, err)
				}
			}
			require.Positive(t, keep, "calm arrivals: the holds record the rate's need")
			require.Greater(t, floor, max(2, keep), "the requests held raised the pool past it and past the 2 engines it had")

			dec, diag := decideAndSubmit(t, p, &st, in(now, 2, floor, tc.rate, 80))
			note := strings.Join(diag.Notes, "\n")
			if tc.rate > 0 {
				require.Nil(t, dec.Decode, "the floor still asks: %s", note)
				require.NotContains(t, note, "no engine is kept for the requests held")
				return
			}
			require.Contains(t, note, "no engine is kept for the requests held")
			require.NotNil(t, dec.Decode, "%s (%s)", note, diag.LoadReasonDecode)
			require.Equal(t, keep, *dec.Decode, "to the need the holds recorded: %s", note)
			require.Equal(t, ReasonScaleDown, diag.LoadReasonDecode)
			// Recorded once without the floor's engines, not twice: the lead time's hold reads
			// this tick's need as the rate's (the buckets' needs are maxima over their ticks).
			require.Equal(t, keep, st.StabilizationDecode[len(st.StabilizationDecode)-1].Replicas)
		})
	}
}
