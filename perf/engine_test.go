package perf

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func newEngine(t *testing.T, kind EngineKind, fpms ...FPM) *EngineModel {
	t.Helper()
	m, err := NewEngineModel(kind, DefaultRegressionOptions())
	require.NoError(t, err)
	m.Observe(fpms)
	return m
}

// linearPrefill is wall = 0.001*tokens + 0.002 seconds (the §4.4 prefill vector).
func linearPrefill(t *testing.T) *EngineModel {
	var fpms []FPM
	for i, tok := range []int64{500, 1000, 1500, 2000, 2500} {
		f := prefillFPM(tok, 0.001*float64(tok)+0.002)
		f.WorkerID = string(rune('a' + i))
		fpms = append(fpms, f)
	}
	return newEngine(t, KindPrefill, fpms...)
}

// linearDecode is the §4.4 decode vector's model (collinear training points).
func linearDecode(t *testing.T) *EngineModel {
	var fpms []FPM
	for i, p := range [][2]int64{{5, 5000}, {10, 10000}, {20, 20000}, {30, 30000}, {40, 40000}} {
		f := decodeFPM(p[0], p[1], 1e-5*float64(p[1])+0.001)
		f.WorkerID = string(rune('a' + i))
		fpms = append(fpms, f)
	}
	return newEngine(t, KindDecode, fpms...)
}

// linearAgg is wall = 1e-4*prefill + 1e-5*kv + 0.001 seconds.
func linearAgg(t *testing.T) *EngineModel {
	var fpms []FPM
	for i, p := range [][2]int64{{0, 1000}, {100, 0}, {200, 3000}, {50, 6000}, {400, 500}, {300, 9000}} {
		fpms = append(fpms, FPM{Version: 1, WorkerID: string(rune('a' + i)), WallTime: 1e-4*float64(p[0]) + 1e-5*float64(p[1]) + 0.001,
			Scheduled: ScheduledRequests{NumPrefillRequests: min(p[0], 1), SumPrefillTokens: p[0], NumDecodeRequests: 3, SumDecodeKVTokens: p[1]}})
	}
	return newEngine(t, KindAggregated, fpms...)
}

func TestEngineQueuedPrefillTime(t *testing.T) {
	m := linearPrefill(t)
	ok, _ := m.Ready()
	require.True(t, ok)
	require.InDelta(t, 1500, m.AvgISL(), 1e-9)
	limits := Limits{MaxNumBatchedTokens: 2048}
	// The G3 chunk plan gives the §4.4 G2 vectors for a single rank.
	for _, tt := range []struct {
		queued int64
		want   float64
	}{{0, 1.502}, {5000, 6.508}, {10000, 11.512}} {
		f := FPM{Version: 1, Queued: QueuedRequests{NumPrefillRequests: 2, SumPrefillTokens: tt.queued}}
		got, ok := m.QueuedPrefillTime(&f, NextRequestPrefill(limits, 0))
		require.True(t, ok)
		require.InDelta(t, tt.want, got, 1e-9, "queued %d", tt.queued)
	}
	// Without the next request and with an empty queue the drain time is exactly 0.
	empty := FPM{Version: 1}
	q := NextRequestPrefill(limits, 0)
	q.AddNextRequest = false
	got, ok := m.QueuedPrefillTime(&empty, q)
	require.True(t, ok)
	require.Zero(t, got)
	// queue_scale projects N/(N-1): 4096 queued on 2 engines -> 8192 on one, plus 1500:
	// 9692 tokens = 4 chunks of 2048 and a 1500 tail.
	f := FPM{Version: 1, Queued: QueuedRequests{NumPrefillRequests: 2, SumPrefillTokens: 4096}}
	q = NextRequestPrefill(limits, 0)
	q.QueueScale = 2
	got, ok = m.QueuedPrefillTime(&f, q)
	require.True(t, ok)
	require.InDelta(t, 4*(2.048+0.002)+(1.5+0.002), got, 1e-9)
	// A prefix-cache hit rate of 0.5 halves the work (ceil'd): (4096+1500)/2 = 2798.
	got, ok = m.QueuedPrefillTime(&f, NextRequestPrefill(limits, 0.5))
	require.True(t, ok)
	require.InDelta(t, (2.048+0.002)+(0.750+0.002), got, 1e-9)
	// A decode model has no prefill estimate.
	_, ok = linearDecode(t).QueuedPrefillTime(&f, NextRequestPrefill(limits, 0))
	require.False(t, ok)
}

func TestEngineScheduledDecodeITL(t *testing.T) {
	m := linearDecode(t)
	// avg decode length: 1000 KV tokens per request in every training point.
	require.InDelta(t, 1000, m.AvgDecodeLength(), 1e-9)
	f := FPM{Version: 1, Scheduled: ScheduledRequests{NumDecodeRequests: 30, SumDecodeKVTokens: 30000},
		Queued: QueuedRequests{NumDecodeRequests: 2, SumDecodeKVTokens: 2500}}
	coef, b, _ := m.Regression().Coefficients()
	got, ok := m.ScheduledDecodeITL(&f, NextRequestDecode())
	require.True(t, ok)
	require.InDelta(t, b+coef[0]*33+coef[1]*33500, got, 1e-12)
	// Consolidating 2 -> 1 doubles the load before the next request is added.
	q := NextRequestDecode()
	q.DecodeScale = 2
	got, ok = m.ScheduledDecodeITL(&f, q)
	require.True(t, ok)
	require.InDelta(t, b+coef[0]*65+coef[1]*66000, got, 1e-12)
	_, ok = linearPrefill(t).ScheduledDecodeITL(&f, NextRequestDecode())
	require.False(t, ok)
}

func TestEngineAggregatedEstimates(t *testing.T) {
	m := linearAgg(t)
	ok, reason := m.Ready()
	require.True(t, ok, reason)
	// Typical piggybacked prefill: mean of the prefill tokens after the first non-zero
	// (100,200,50,400,300) = 210; its ITL estimate ignores this iteration's scheduled prefill.
	f := FPM{Version: 1, Scheduled: ScheduledRequests{NumPrefillRequests: 1, SumPrefillTokens: 5000, NumDecodeRequests: 4, SumDecodeKVTokens: 4000}}
	q := NextRequestDecode()
	q.AddNextRequest = false
	got, ok := m.ScheduledDecodeITL(&f, q)
	require.True(t, ok)
	require.InDelta(t, 1e-4*210+1e-5*4000+0.001, got, 1e-12)
	// The TTFT estimate carries the engine's decode load into every chunk.
	f = FPM{Version: 1, Scheduled: ScheduledRequests{NumDecodeRequests: 4, SumDecodeKVTokens: 4000},
		Queued: QueuedRequests{NumPrefillRequests: 1, SumPrefillTokens: 100}}
	got, ok = m.QueuedPrefillTime(&f, NextRequestPrefill(Limits{MaxNumBatchedTokens: 64}, 0))
	require.True(t, ok)
	avgISL := m.AvgISL()
	tokens := int64(100 + avgISL + 0.999999)
	full, tail := tokens/64, tokens%64
	want := float64(full)*(1e-4*64+1e-5*4000+0.001) + (1e-4*float64(tail) + 1e-5*4000 + 0.001)
	require.InDelta(t, want, got, 1e-9)
}

func TestEngineCapacity(t *testing.T) {
	t.Run("prefill: best eligible batch under the TTFT target", func(t *testing.T) {
		m := linearPrefill(t)
		// ISL 1000, mbt 8192: batches 1..8; ttft(bs) = bs*1.000 + 0.002 s.
		c, ok := m.FindCapacity(CapacityRequest{ISL: 1000, OSL: 100, TTFTSLAMs: 3000}, Limits{MaxNumBatchedTokens: 8192})
		require.True(t, ok)
		require.Equal(t, int64(2), c.BatchSize)
		require.True(t, c.Eligible)
		require.InDelta(t, 2/2.002, c.RPS, 1e-12)
		require.InDelta(t, 2002, c.TTFTMs, 1e-9)
		// Nothing eligible: the best ineligible point is still returned.
		c, ok = m.FindCapacity(CapacityRequest{ISL: 1000, OSL: 100, TTFTSLAMs: 500}, Limits{MaxNumBatchedTokens: 8192})
		require.True(t, ok)
		require.False(t, c.Eligible)
		require.Equal(t, int64(8), c.BatchSize)
		// The hit rate discounts the prefill ISL: 1000*(1-0.5) = 500 tokens per request.
		c, ok = m.FindCapacity(CapacityRequest{ISL: 1000, OSL: 100, TTFTSLAMs: 3000, KVHitRate: 0.5}, Limits{MaxNumBatchedTokens: 8192})
		require.True(t, ok)
		require.Equal(t, int64(5), c.BatchSize, "5*0.5 s + 0.002 <= 3 s")
	})
	t.Run("decode: the §4.4 decode vector through the G3 search", func(t *testing.T) {
		m := linearDecode(t)
		// ctx = isl + osl//2 = 925 + 75 = 1000; KV cap 40000/1000 = 40.
		c, ok := m.FindCapacity(CapacityRequest{ISL: 925, OSL: 150, ITLSLAMs: 50}, Limits{MaxKVTokens: 40000})
		require.True(t, ok)
		require.Equal(t, int64(4), c.BatchSize)
		require.InDelta(t, 0.650407, c.RPS, 1e-6)
		require.InDelta(t, 41, c.ITLMs, 1e-6)
		// Speculative decoding: ITL per token divided by the accept length.
		c, ok = m.FindCapacity(CapacityRequest{ISL: 925, OSL: 150, ITLSLAMs: 50, AcceptLength: 2}, Limits{MaxKVTokens: 40000})
		require.True(t, ok)
		require.Equal(t, int64(9), c.BatchSize, "0.01*9+0.001 = 91 ms / 2 <= 50 ms")
	})
	t.Run("aggregated: hand-computed point", func(t *testing.T) {
		m := linearAgg(t)
		// isl 100, osl 100, mbt 64, seqs 4: ctx 150; per-iteration prefill = bs tokens;
		// itl(bs) = 0.0016*bs + 0.001 s; ttft = chunks of (bs + 100) tokens at KV 150*bs.
		c, ok := m.FindCapacity(CapacityRequest{ISL: 100, OSL: 100, TTFTSLAMs: 20, ITLSLAMs: 5},
			Limits{MaxNumBatchedTokens: 64, MaxNumSeqs: 4, MaxKVTokens: 1_000_000})
		require.True(t, ok)
		require.Equal(t, int64(2), c.BatchSize)
		require.True(t, c.Eligible)
		require.InDelta(t, 4.2, c.ITLMs, 1e-9)
		require.InDelta(t, 2/(100*0.0042), c.RPS, 1e-9)
		require.InDelta(t, 18.2, c.TTFTMs, 1e-9)
		require.InDelta(t, 18.2+4.2*99, c.E2EMs, 1e-9)
		// A minimum-latency search keeps batch 1.
		c, ok = m.FindCapacity(CapacityRequest{ISL: 100, OSL: 100, TTFTSLAMs: 20, ITLSLAMs: 5, Target: MinLatency},
			Limits{MaxNumBatchedTokens: 64, MaxNumSeqs: 4, MaxKVTokens: 1_000_000})
		require.True(t, ok)
		require.Equal(t, int64(1), c.BatchSize)
	})
	t.Run("not ready or empty request", func(t *testing.T) {
		empty, err := NewEngineModel(KindDecode, DefaultRegressionOptions())
		require.NoError(t, err)
		_, ok := empty.FindCapacity(CapacityRequest{ISL: 1000, OSL: 100}, Limits{})
		require.False(t, ok)
		_, ok = linearDecode(t).FindCapacity(CapacityRequest{ISL: 0, OSL: 100}, Limits{})
		require.False(t, ok)
		_, ok = linearDecode(t).FindCapacity(CapacityRequest{ISL: 1000, OSL: 0}, Limits{})
		require.False(t, ok)
	})
}

func TestBatchSizeCandidates(t *testing.T) {
	require.Equal(t, []int64{1, 2, 3}, batchSizes(3))
	require.Len(t, batchSizes(128), 128)
	big := batchSizes(1000)
	require.Len(t, big, 128)
	require.Equal(t, int64(1), big[0])
	require.Equal(t, int64(1+1*999/127), big[1])
	require.Equal(t, int64(1000), big[127])
	require.Nil(t, batchSizes(0))
}

func TestEngineObserveSkipsUnsupportedVersionsAndHeartbeats(t *testing.T) {
	m, err := NewEngineModel(KindPrefill, DefaultRegressionOptions())
	require.NoError(t, err)
	legacy := prefillFPM(1000, 1.0)
	legacy.Version = 0
	heartbeat := FPM{Version: 1, WorkerID: "x"} // sorts after "w"
	skipped := m.Observe([]FPM{legacy, heartbeat, prefillFPM(1000, 1.0)})
	require.Equal(t, 1, skipped)
	require.Equal(t, 1, m.Regression().Len(), "the heartbeat is state, not a sample")
	require.Equal(t, []float64{1000, 0}, m.State().AvgISL.Values, "the heartbeat (no prefill) adds 0 after the first request")
}

func TestEngineStateRoundTrip(t *testing.T) {
	m := linearAgg(t)
	data, err := json.Marshal(m.State())
	require.NoError(t, err)
	var st EngineModelState
	require.NoError(t, json.Unmarshal(data, &st))
	back, err := RestoreEngineModel(KindAggregated, DefaultRegressionOptions(), st)
	require.NoError(t, err)
	req := CapacityRequest{ISL: 100, OSL: 100, TTFTSLAMs: 20, ITLSLAMs: 5}
	lim := Limits{MaxNumBatchedTokens: 64, MaxNumSeqs: 4, MaxKVTokens: 1_000_000}
	a, _ := m.FindCapacity(req, lim)
	b, _ := back.FindCapacity(req, lim)
	require.Equal(t, a, b)
	require.Equal(t, m.State(), back.State())
	_, err = RestoreEngineModel("mixed", DefaultRegressionOptions(), st)
	require.EqualError(t, err, `engine model: unknown kind "mixed"`)
}

func TestBootstrapFromSharedProfile(t *testing.T) {
	p, err := LoadProfile(h200Dir)
	require.NoError(t, err)
	pre := PrefillBootstrapFPMs(p.Prefill)
	require.Len(t, pre, 17)
	require.Equal(t, int64(3151), pre[3].Scheduled.SumPrefillTokens)
	require.InDelta(t, 0.0632148, pre[3].WallTime, 1e-7)
	dec := DecodeBootstrapFPMs(p.Decode)
	require.Len(t, dec, 41)
	// Point 8: kv usage ~0.1554 of 945029 at context 2997.
	kv := dec[8].Scheduled.SumDecodeKVTokens
	require.InDelta(t, 0.1554*945029, float64(kv), 0.0001*945029)
	require.Equal(t, max(1, int64(float64(kv)/2997+0.5)), dec[8].Scheduled.NumDecodeRequests)

	// Bootstrapped engine models are ready and give the profile's figures back: a prefill of
	// 3151 tokens on the linear fit of the profile, decode ITL within the profile's range.
	pm, err := NewEngineModel(KindPrefill, DefaultRegressionOptions())
	require.NoError(t, err)
	pm.Bootstrap(pre)
	ok, reason := pm.Ready()
	require.True(t, ok, reason)
	dm, err := NewEngineModel(KindDecode, DefaultRegressionOptions())
	require.NoError(t, err)
	dm.Bootstrap(dec)
	ok, reason = dm.Ready()
	require.True(t, ok, reason)
	c, ok := dm.FindCapacity(CapacityRequest{ISL: 3000, OSL: 300, ITLSLAMs: 10}, Limits{MaxKVTokens: p.Decode.MaxKVTokens, MaxNumSeqs: 512})
	require.True(t, ok)
	t.Logf("decode capacity from the H200 profile at ISL 3000/OSL 300, ITL 10 ms: %.2f req/s (batch %d, ITL %.2f ms, eligible %v)", c.RPS, c.BatchSize, c.ITLMs, c.Eligible)
	require.True(t, c.Eligible)
	// The profile says about 16 req/s per GPU at ISL 3000 / OSL 300 and 10 ms; the linear
	// forward-pass fit over all contexts is coarser, so only the order of magnitude is pinned.
	require.Greater(t, c.RPS, 8.0)
	require.Less(t, c.RPS, 32.0)
}

func BenchmarkEngineDecodeCapacity(b *testing.B) {
	p, err := LoadProfile(h200Dir)
	if err != nil {
		b.Skip(err)
	}
	dm, _ := NewEngineModel(KindDecode, DefaultRegressionOptions())
	dm.Bootstrap(DecodeBootstrapFPMs(p.Decode))
	req := CapacityRequest{ISL: 3000, OSL: 300, ITLSLAMs: 10}
	lim := Limits{MaxKVTokens: p.Decode.MaxKVTokens, MaxNumSeqs: 512}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := dm.FindCapacity(req, lim); !ok {
			b.Fatal("not ready")
		}
	}
}
