package engine

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// maxAndMedian returns the largest and the median of xs.
func maxAndMedian(xs []float64) (mx, med float64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return s[n-1], med
}

// TestProfilePrefillTTFT: one request of every profiled ISL on a prefill engine has a TTFT
// (arrival → first token) within 5 % of the profiled TTFT, chunked or not.
func TestProfilePrefillTTFT(t *testing.T) {
	prof, tim := profileTiming(t)
	require.Len(t, prof.Prefill.ISL, 17)
	var errs []float64
	for i, islF := range prof.Prefill.ISL {
		isl := int(islF)
		e := newEngine(t, DefaultConfig(RolePrefill), tim)
		const arrival = 12.5
		require.NoError(t, e.Submit(Request{ID: uint64(i), ISL: isl, OSL: 100, Arrival: arrival}))
		passes := runAll(t, e, arrival)
		wantPasses := (isl + DefaultMaxNumBatchedTokens - 1) / DefaultMaxNumBatchedTokens
		require.Len(t, passes, wantPasses, "isl %d: chunked passes", isl)
		evs := eventsOf(passes)
		require.Len(t, evs, 2, "isl %d: first token and finished", isl)
		require.Equal(t, EventFirstToken, evs[0].Kind)
		require.Equal(t, EventFinished, evs[1].Kind)
		ttftMs := (evs[0].Time - evs[0].Arrival) * 1000
		rel := math.Abs(ttftMs-prof.Prefill.TTFTMs[i]) / prof.Prefill.TTFTMs[i]
		errs = append(errs, rel)
		require.Less(t, rel, 0.05, "isl %d: simulated TTFT %.3f ms, profiled %.3f ms", isl, ttftMs, prof.Prefill.TTFTMs[i])
	}
	mx, med := maxAndMedian(errs)
	t.Logf("prefill TTFT vs profile over %d ISLs: max relative error %.3g, median %.3g", len(errs), mx, med)
}

// TestProfileDecodeITL: for every profiled decode point, a decode engine loaded with a
// batch of requests of that context filling that KV usage runs a pass (one ITL) within
// 5 % of the profiled ITL.
func TestProfileDecodeITL(t *testing.T) {
	prof, tim := profileTiming(t)
	d := prof.Decode
	require.Len(t, d.KVUsage, 41)
	var errs []float64
	for i := range d.KVUsage {
		ctx := int(d.ContextLength[i])
		n := max(1, int(math.Round(d.KVUsage[i]*float64(d.MaxKVTokens)/float64(ctx))))
		cfg := DefaultConfig(RoleDecode)
		cfg.MaxNumSeqs = 4096 // the profiler's batches go up to ~1,600 requests of 350 tokens
		e := newEngine(t, cfg, tim)
		// A decode request's context is its prompt plus the first token: ISL = ctx − 1.
		for k := range n {
			require.NoError(t, e.Submit(Request{ID: uint64(k), ISL: ctx - 1, OSL: 10}))
		}
		p, ok := e.Step(0)
		require.True(t, ok)
		require.Equal(t, int64(n), p.FPM.Scheduled.NumDecodeRequests, "point %d: whole batch decodes", i)
		require.Equal(t, int64(n*ctx), p.FPM.Scheduled.SumDecodeKVTokens)
		require.Zero(t, p.FPM.Scheduled.NumPrefillRequests)
		itlMs := p.Duration * 1000
		rel := math.Abs(itlMs-d.ITLMs[i]) / d.ITLMs[i]
		errs = append(errs, rel)
		require.Less(t, rel, 0.05, "point %d (kv %.4f, ctx %d, batch %d): simulated ITL %.3f ms, profiled %.3f ms",
			i, d.KVUsage[i], ctx, n, itlMs, d.ITLMs[i])
	}
	mx, med := maxAndMedian(errs)
	t.Logf("decode ITL vs profile over %d points: max relative error %.3g, median %.3g", len(errs), mx, med)
}

// TestProfileTimingPrefillShape checks the prefill formula's properties: chunks telescope
// to the unchunked TTFT, the curve is non-decreasing over the profiled range (so the
// formula's floor at 0 never applies there), it is linear between and beyond the points, and a batch
// of new prompts costs TTFT of their total.
func TestProfileTimingPrefillShape(t *testing.T) {
	prof, tim := profileTiming(t)
	lo, hi := slices.Min(prof.Prefill.ISL), slices.Max(prof.Prefill.ISL)

	prev := tim.TTFTMs(lo)
	for x := lo; x <= hi; x += 7 {
		v := tim.TTFTMs(x)
		require.GreaterOrEqual(t, v, prev-1e-9, "TTFT decreases at %v", x)
		prev = v
	}

	tests := []struct {
		name  string
		isl   int
		chunk int
	}{
		{"max ISL in 1000-token chunks", int(hi), 1000},
		{"max ISL in 8192-token chunks", int(hi), 8192},
		{"5000 tokens in 333-token chunks", 5000, 333},
		{"30000 tokens (extrapolated) in 8192-token chunks", 30000, 8192},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sum := 0.0
			for done := 0; done < tc.isl; done += tc.chunk {
				n := min(tc.chunk, tc.isl-done)
				sum += tim.PrefillMs(PrefillBatch{NumRequests: 1, NewTokens: n, CachedTokens: done})
			}
			require.InDelta(t, tim.TTFTMs(float64(tc.isl)), sum, 1e-9)
		})
	}

	// Linear beyond the profiled range, along the end segments.
	slope := (375.4826 - 354.0895) / (16372 - 15355)
	require.InDelta(t, 375.4826+slope*10000, tim.TTFTMs(hi+10000), 1e-9)
	slope = (38.4941 - 19.5252) / (1117 - 100)
	require.InDelta(t, 19.5252-slope*90, tim.TTFTMs(10), 1e-9)
	// Linear between points.
	require.InDelta(t, (19.5252+38.4941)/2, tim.TTFTMs((100+1117)/2.0), 1e-9)
	// Several new prompts: TTFT of the total.
	require.InDelta(t, tim.TTFTMs(3151), tim.PrefillMs(PrefillBatch{NumRequests: 3, NewTokens: 3151}), 1e-12)
	require.Zero(t, tim.PrefillMs(PrefillBatch{}))
	// Decode floor and zero batch.
	require.Zero(t, tim.DecodeMs(DecodeBatch{}))
	require.GreaterOrEqual(t, tim.DecodeMs(DecodeBatch{NumRequests: 1, SumContext: 1, ActiveKVTokens: 1}), MinDecodeMs)
	require.Equal(t, 945029, tim.KVCapacityTokens())
}
