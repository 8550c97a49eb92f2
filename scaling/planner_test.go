package scaling

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
	"github.com/stretchr/testify/require"
)

// Reference §1.3 vectors (G2 test_state_machine).
func TestSchedule(t *testing.T) {
	p := mustPlanner(t, slaConfig(func(c *config.Config) {
		c.EnableLoadScaling = true
		c.ThroughputAdjustmentIntervalSeconds = 60
	}))
	st := mustInit(t, p, 100, Bootstrap{})
	tk := p.NextTick(st)
	require.Equal(t, Tick{At: 105, Load: true, NeedFPM: true, NeedWorkers: true}, tk, "first tick is a load tick at start + 5 s")

	// A load-only planner's load tick requests a cheap traffic read over the load interval.
	lo := mustPlanner(t, func() config.Config { c := config.Default(); c.Environment = config.EnvNoop; return c }())
	st0 := mustInit(t, lo, 0, Bootstrap{})
	tk = lo.NextTick(st0)
	require.True(t, tk.Load)
	require.False(t, tk.Throughput)
	require.True(t, tk.NeedTraffic)
	require.False(t, tk.FullTraffic)
	require.Equal(t, 5.0, tk.TrafficDurationS)

	// After an FPM tick at 10 the next tick is at 15 (measured from the actual tick time).
	st0.NextLoadAt = ptr(10.0)
	_, _, diag := decideAt(t, lo, st0, Input{Now: 10})
	require.Equal(t, 15.0, diag.NextTickAt)

	// After a traffic tick at 60 with a 60 s interval the next throughput tick is at 120.
	st.NextLoadAt, st.NextThroughputAt = ptr(60.0), ptr(60.0)
	next, _, diag := decideAt(t, p, st, Input{Now: 60, Workers: counts(1, 1), Traffic: traffic(60, 0, 0, 0)})
	require.True(t, diag.RanLoad)
	require.True(t, diag.RanThroughput)
	require.Equal(t, 120.0, *next.NextThroughputAt)
	require.Equal(t, 65.0, *next.NextLoadAt)

	// Loops due within 0.5 s merge into one tick; beyond that they do not.
	st.NextLoadAt, st.NextThroughputAt = ptr(180.0), ptr(180.4)
	tk = p.NextTick(st)
	require.True(t, tk.Load && tk.Throughput)
	require.Equal(t, 180.0, tk.At)
	require.True(t, tk.NeedTraffic && tk.FullTraffic)
	require.Equal(t, 60.0, tk.TrafficDurationS)
	st.NextThroughputAt = ptr(180.6)
	tk = p.NextTick(st)
	require.True(t, tk.Load)
	require.False(t, tk.Throughput)

	// A Decide before anything is due decides nothing and leaves the schedule alone.
	st.NextLoadAt, st.NextThroughputAt = ptr(500.0), ptr(540.0)
	next, dec, diag := decideAt(t, p, st, Input{Now: 400, Workers: counts(1, 1)})
	require.True(t, dec.Empty())
	require.False(t, diag.RanLoad || diag.RanThroughput)
	require.Equal(t, 500.0, *next.NextLoadAt)
}

// Reference §3.5 vectors (test_throughput_scaling.py), through the post-processing steps
// with injected raw targets.
func TestThroughputPostProcessing(t *testing.T) {
	disagg := func(mutate func(*config.Config)) *Planner {
		return mustPlanner(t, slaConfig(func(c *config.Config) {
			c.EnableLoadScaling = true
			c.MaxGPUBudget = -1
			if mutate != nil {
				mutate(c)
			}
		}))
	}
	t.Run("delta cap both ways", func(t *testing.T) {
		st := State{}
		tk := newTick(disagg(nil), &st, 24, 40)
		require.Nil(t, tk.throughputDisaggTargets(8, true, 180, true))
		require.Equal(t, [2]int{16, 48}, [2]int{st.LowerBoundPrefill, st.LowerBoundDecode})
		require.Equal(t, ReasonSetLowerBound, tk.diag.ThroughputReason)

		tk = newTick(disagg(func(c *config.Config) { c.MaxThroughputScalingReplicas = 3 }), &st, 24, 40)
		tk.throughputDisaggTargets(8, true, 180, true)
		require.Equal(t, [2]int{21, 43}, [2]int{st.LowerBoundPrefill, st.LowerBoundDecode})

		tk = newTick(disagg(nil), &st, 20, 20)
		tk.throughputDisaggTargets(1, true, 20, true)
		require.Equal(t, [2]int{12, 20}, [2]int{st.LowerBoundPrefill, st.LowerBoundDecode})
	})
	t.Run("at the GPU ceiling: hold", func(t *testing.T) {
		p := disagg(func(c *config.Config) { c.MaxGPUBudget = 64 })
		st := State{}
		tk := newTick(p, &st, 24, 40)
		require.Nil(t, tk.throughputDisaggTargets(32, true, 48, true))
		require.Equal(t, [2]int{24, 40}, [2]int{st.LowerBoundPrefill, st.LowerBoundDecode})
		require.Equal(t, ReasonGPUBudgetGuardHold, tk.diag.ThroughputReason)
		require.Equal(t, ReasonGPUBudgetGuardHold, tk.diag.ThroughputReasonPrefill)

		throughputOnly := mustPlanner(t, slaConfig(func(c *config.Config) { c.MaxGPUBudget = 64 }))
		tk = newTick(throughputOnly, &st, 24, 40)
		require.Nil(t, tk.throughputDisaggTargets(32, true, 48, true))
		require.Equal(t, ReasonGPUBudgetGuardHold, tk.diag.ThroughputReason)
	})
	t.Run("ceiling fit of a prefill scale-up", func(t *testing.T) {
		st := State{}
		tk := newTick(disagg(func(c *config.Config) { c.MaxGPUBudget = 64 }), &st, 24, 36)
		tk.throughputDisaggTargets(40, true, 36, true)
		require.Equal(t, [2]int{28, 36}, [2]int{st.LowerBoundPrefill, st.LowerBoundDecode})
	})
	t.Run("endpoint floor overrides the cap", func(t *testing.T) {
		st := State{}
		tk := newTick(disagg(func(c *config.Config) { c.PrefillMinEndpoint = ptr(30) }), &st, 21, 34)
		tk.throughputDisaggTargets(21, true, 34, true)
		require.Equal(t, [2]int{30, 34}, [2]int{st.LowerBoundPrefill, st.LowerBoundDecode})
	})
	t.Run("aggregated: demand 100 rps at 1 rps per engine from 10", func(t *testing.T) {
		p := mustPlanner(t, slaConfig(func(c *config.Config) { c.Mode = config.ModeAgg; c.MaxGPUBudget = -1 }))
		st := State{}
		tk := newTick(p, &st, 0, 10)
		dec := tk.throughputSingleTarget(Decode, pyCeil(100.0/1.0), true)
		require.Equal(t, 18, *dec.Decode)
		require.Equal(t, ReasonScale, tk.diag.ThroughputReason)
	})
	t.Run("model not ready: hold, but lift to the endpoint minimum", func(t *testing.T) {
		p := mustPlanner(t, slaConfig(func(c *config.Config) { c.Mode = config.ModeDecode; c.MinEndpoint = 2 }))
		st := State{}
		tk := newTick(p, &st, 0, 1)
		dec := tk.throughputSingleTarget(Decode, 0, false)
		require.Equal(t, 2, *dec.Decode)
		require.Equal(t, ReasonModelNotReady, tk.diag.ThroughputReason)
		tk = newTick(p, &st, 0, 3)
		require.Nil(t, tk.throughputSingleTarget(Decode, 0, false))
		require.Equal(t, ReasonModelNotReady, tk.diag.ThroughputReason)
	})
	t.Run("disagg: one side not ready holds both", func(t *testing.T) {
		p := mustPlanner(t, slaConfig(func(c *config.Config) { c.MaxGPUBudget = -1 }))
		st := State{}
		tk := newTick(p, &st, 2, 3)
		require.Nil(t, tk.throughputDisaggTargets(5, false, 9, true))
		require.Equal(t, ReasonModelNotReady, tk.diag.ThroughputReason)
		require.Equal(t, ReasonModelNotReady, tk.diag.ThroughputReasonPrefill)
		require.Equal(t, ReasonPartnerNotReady, tk.diag.ThroughputReasonDecode)
	})
}

// End to end through Decide: an engine doing exactly 1 request/s and 2.1 requests/s of
// predicted demand give 3 replicas.
func TestThroughputCapacitySizing(t *testing.T) {
	p := mustPlanner(t, slaConfig(func(c *config.Config) {
		c.Mode = config.ModePrefill
		c.TTFTMs = 2000
	}))
	// wall = 0.001 s per token, no intercept: a 1000-token prefill takes 1 s at any batch.
	st := mustInit(t, p, 0, Bootstrap{PrefillFPMs: linearPrefillFPMs(0.001, 0, 500, 1000, 1500, 2000, 2500)})
	st.NextLoadAt = ptr(1000.0) // only the throughput loop is due
	caps := WorkerCapabilities{Prefill: &EngineCapabilities{NumGPU: 1, MaxNumBatchedTokens: 8192, MaxNumSeqs: 512}}
	st, dec, diag := decideAt(t, p, st, Input{Now: 180, Workers: counts(1, 0), Traffic: traffic(180, 378, 1000, 100), Capabilities: caps})
	require.Equal(t, ReasonScale, diag.ThroughputReason, diag.Notes)
	require.InDelta(t, 1.0, *diag.EngineRPSPrefill, 1e-12)
	require.InDelta(t, 378, *diag.PredictedNumReq, 1e-9)
	require.Equal(t, 3, *dec.Prefill)
	require.Nil(t, dec.Decode)
	require.Equal(t, 3, st.PendingPrefill.Replicas, "the submitted count is remembered")
	unsubmitted, _, _, err := p.Decide(mustInit(t, p, 0, Bootstrap{PrefillFPMs: linearPrefillFPMs(0.001, 0, 500, 1000, 1500, 2000, 2500)}), Input{Now: 180, Workers: counts(1, 0), Traffic: traffic(180, 378, 1000, 100), Capabilities: caps})
	require.NoError(t, err)
	require.Nil(t, unsubmitted.PendingPrefill, "Decide alone remembers nothing: only Submitted does")

	t.Run("aggregated", func(t *testing.T) {
		p := mustPlanner(t, slaConfig(func(c *config.Config) { c.Mode = config.ModeAgg; c.MaxGPUBudget = -1 }))
		// Every iteration takes 40 ms: with 4 sequences and OSL 100, 4/(100*0.04) = 1 req/s.
		st := mustInit(t, p, 0, Bootstrap{AggFPMs: constantAggFPMs(0.04)})
		st.NextLoadAt = ptr(1000.0)
		caps := WorkerCapabilities{Decode: &EngineCapabilities{NumGPU: 1, MaxNumBatchedTokens: 8192, MaxNumSeqs: 4, MaxKVTokens: 1_000_000}}
		_, dec, diag := decideAt(t, p, st, Input{Now: 180, Workers: counts(0, 10), Traffic: traffic(180, 18000, 100, 100), Capabilities: caps})
		require.Equal(t, ReasonScale, diag.ThroughputReason, diag.Notes)
		require.InDelta(t, 1.0, *diag.EngineRPSDecode, 1e-9)
		require.Equal(t, 18, *dec.Decode, "100 replicas wanted, capped at +8")
	})
	t.Run("no capabilities reported: hold and say so", func(t *testing.T) {
		st := mustInit(t, p, 0, Bootstrap{PrefillFPMs: linearPrefillFPMs(0.001, 0, 500, 1000, 1500, 2000, 2500)})
		st.NextLoadAt = ptr(1000.0)
		_, dec, diag := decideAt(t, p, st, Input{Now: 180, Workers: counts(2, 0), Traffic: traffic(180, 378, 1000, 100)})
		require.True(t, dec.Empty())
		require.Equal(t, ReasonModelNotReady, diag.ThroughputReason)
		require.Contains(t, diag.Notes, "throughput: prefill workers have not reported their capabilities: holding")
	})
}

func TestTrafficGapsNeverReadAsZeroDemand(t *testing.T) {
	p := mustPlanner(t, slaConfig(func(c *config.Config) { c.MaxGPUBudget = -1 }))
	boot := Bootstrap{PrefillFPMs: linearPrefillFPMs(0.001, 0, 500, 1000, 1500, 2000, 2500), DecodeFPMs: linearDecodeFPMs(1e-6, 0.005)}
	caps := WorkerCapabilities{Prefill: &EngineCapabilities{MaxNumBatchedTokens: 8192}, Decode: &EngineCapabilities{MaxKVTokens: 1_000_000, MaxNumSeqs: 256}}
	st := mustInit(t, p, 0, boot)
	st.NextLoadAt = ptr(1e9)
	before := *st.Predictors

	// Unreadable request count: skipped, predictors untouched, nothing decided.
	unreadable := &TrafficObservation{DurationS: 180, ISL: ptr(3000.0), OSL: ptr(300.0)}
	next, dec, diag := decideAt(t, p, st, Input{Now: 180, Workers: counts(4, 4), Traffic: unreadable, Capabilities: caps})
	require.True(t, dec.Empty())
	require.Equal(t, ReasonNoTrafficData, diag.ThroughputReason)
	require.Equal(t, before, *next.Predictors)
	// No traffic observation at all, or NaN lengths with requests: the same.
	for _, tr := range []*TrafficObservation{nil, {DurationS: 180, NumReq: ptr(50.0)}, {DurationS: 0, NumReq: ptr(50.0), ISL: ptr(1.0), OSL: ptr(1.0)}} {
		next, dec, diag = decideAt(t, p, st, Input{Now: 180, Workers: counts(4, 4), Traffic: tr, Capabilities: caps})
		require.True(t, dec.Empty())
		require.Equal(t, ReasonNoTrafficData, diag.ThroughputReason)
		require.Equal(t, before, *next.Predictors)
	}

	// Real traffic, then an idle window: zero demand is a real zero; the lengths carry over.
	st, _, _ = decideAt(t, p, st, Input{Now: 180, Workers: counts(4, 4), Traffic: traffic(180, 900, 1000, 100), Capabilities: caps})
	st.NextLoadAt = ptr(1e9)
	idle := &TrafficObservation{DurationS: 180, NumReq: ptr(0.0)}
	st, dec, diag = decideAt(t, p, st, Input{Now: 360, Workers: counts(4, 4), Traffic: idle, Capabilities: caps})
	require.Equal(t, 1000.0, *st.LastISL)
	require.Equal(t, 1000.0, *diag.PredictedISL, "the idle window carries the last ISL to the predictor")
	require.Equal(t, 0.0, *diag.PredictedNumReq)
	require.Equal(t, 1, *dec.Prefill, "zero demand scales down to the minimum")

	// Inventory unreadable: nothing is decided even with traffic.
	_, dec, diag = decideAt(t, p, st, Input{Now: 540, Traffic: traffic(180, 900, 1000, 100), Capabilities: caps})
	require.True(t, dec.Empty())
	require.Equal(t, ReasonNoWorkerCounts, diag.ThroughputReason)
}

// Reference §4.5 vectors: context_length 4096, max_kv 100000, min_endpoint 1.
func TestEasyTargets(t *testing.T) {
	caps := WorkerCapabilities{Prefill: &EngineCapabilities{ContextLength: 4096}, Decode: &EngineCapabilities{MaxKVTokens: 100000}}
	run := func(mode config.Mode, target config.Target, readyP, readyD int, fpm *FPMObservations) (Decision, Diagnostics) {
		c := config.Default()
		c.Mode, c.OptimizationTarget, c.MaxGPUBudget = mode, target, -1
		p := mustPlanner(t, c)
		st := mustInit(t, p, 0, Bootstrap{})
		_, dec, diag := decideAt(t, p, st, Input{Workers: counts(readyP, readyD), FPM: fpm, Capabilities: caps})
		return dec, diag
	}
	dkv := func(kv ...int64) *FPMObservations {
		o := &FPMObservations{}
		for i, v := range kv {
			o.Decode = append(o.Decode, decodeEngine(string(rune('a'+i)), 10, v, 0))
		}
		return o
	}
	pq := func(q ...int64) *FPMObservations {
		o := &FPMObservations{}
		for i, v := range q {
			o.Prefill = append(o.Prefill, perf.FPM{Version: 1, WorkerID: string(rune('a' + i)), Queued: perf.QueuedRequests{SumPrefillTokens: v}})
		}
		return o
	}
	dec, diag := run(config.ModeDecode, config.TargetThroughput, 0, 1, dkv(110000))
	require.Equal(t, 2, *dec.Decode, "utilisation 1.1 > 1.0")
	require.Equal(t, ReasonScaleUp, diag.LoadReason)
	dec, _ = run(config.ModeDecode, config.TargetThroughput, 0, 2, dkv(40000, 40000))
	require.Equal(t, 1, *dec.Decode, "0.4 < 0.6 on every engine")
	dec, diag = run(config.ModeDecode, config.TargetThroughput, 0, 2, dkv(70000, 70000))
	require.True(t, dec.Empty())
	require.Equal(t, ReasonNoChange, diag.LoadReason)
	dec, _ = run(config.ModeDecode, config.TargetLatency, 0, 2, dkv(45000, 10000))
	require.Equal(t, 3, *dec.Decode, "latency target: 0.45 > 0.4")
	dec, _ = run(config.ModeDecode, config.TargetLatency, 0, 2, dkv(5000, 5000))
	require.Equal(t, 1, *dec.Decode, "latency target: 0.05 < 0.1")
	dec, _ = run(config.ModePrefill, config.TargetThroughput, 1, 0, pq(4096))
	require.Equal(t, 2, *dec.Prefill, "queued 4096 / 4096 = 1.0 >= 1.0")
	dec, diag = run(config.ModePrefill, config.TargetThroughput, 2, 0, pq(2048, 2048))
	require.True(t, dec.Empty())
	require.Equal(t, ReasonNoChange, diag.LoadReason)
	dec, _ = run(config.ModePrefill, config.TargetThroughput, 2, 0, pq(204, 204))
	require.Equal(t, 1, *dec.Prefill, "204/4096 = 0.0498 < 0.1")
	// The aggregated pool counts queued prefill as KV.
	agg := &FPMObservations{Decode: []perf.FPM{{Version: 1, WorkerID: "a", Scheduled: perf.ScheduledRequests{SumDecodeKVTokens: 90000},
		Queued: perf.QueuedRequests{SumPrefillTokens: 20000}}}}
	dec, _ = run(config.ModeAgg, config.TargetThroughput, 0, 1, agg)
	require.Equal(t, 2, *dec.Decode)
	// Without the capability a threshold target cannot run: insufficient data, no decision.
	c := config.Default()
	c.Mode = config.ModeDecode
	p := mustPlanner(t, c)
	st := mustInit(t, p, 0, Bootstrap{})
	_, dec, diag = decideAt(t, p, st, Input{Workers: counts(0, 1), FPM: dkv(110000)})
	require.True(t, dec.Empty())
	require.Equal(t, ReasonInsufficientData, diag.LoadReason)
	// Worker reconciliation: 2 workers publishing against 3 ready.
	_, dec, diag = decideAt(t, p, st, Input{Workers: counts(0, 3), FPM: dkv(1, 1), Capabilities: caps})
	require.True(t, dec.Empty())
	require.Equal(t, ReasonWorkerCountMismatch, diag.LoadReason)
}

// Consolidation-aware scale-down (reference §4.2, the §4.6 checks on this fixture): a
// steep KV-linear decode model (5 µs per KV token + 5 ms) and a token-linear prefill model
// (10 µs per token + 2 ms, average ISL 1000), sensitivity 80.
func TestConsolidation(t *testing.T) {
	decodePlanner := func(itl float64) (*Planner, State) {
		p := mustPlanner(t, slaConfig(func(c *config.Config) {
			c.Mode, c.EnableLoadScaling, c.EnableThroughputScaling, c.ITLMs, c.MaxGPUBudget = config.ModeDecode, true, false, itl, -1
		}))
		return p, mustInit(t, p, 0, Bootstrap{DecodeFPMs: linearDecodeFPMs(5e-6, 0.005)})
	}
	caps := WorkerCapabilities{Decode: &EngineCapabilities{MaxKVTokens: 100000}}
	decode := func(itl float64, kv int64) (Decision, Diagnostics) {
		p, st := decodePlanner(itl)
		_, dec, diag := decideAt(t, p, st, Input{Workers: counts(0, 2), Capabilities: caps,
			FPM: &FPMObservations{Decode: []perf.FPM{decodeEngine("a", kv/1000, kv, 0), decodeEngine("b", kv/1000, kv, 0)}}})
		return dec, diag
	}
	dec, diag := decode(50, 1500)
	require.Equal(t, 1, *dec.Decode, "absorbing 2x1500 KV stays well under 50 ms x 0.8")
	require.Equal(t, ReasonScaleDown, diag.LoadReason)
	dec, diag = decode(50, 6000)
	require.True(t, dec.Empty())
	require.Equal(t, ReasonScaleDownRefusedConsolidation, diag.LoadReason, "12000 KV on one engine would be ~70 ms")
	require.Less(t, *diag.EstimatedITLMs, 50.0, "the engines themselves are within the SLA")
	dec, diag = decode(1000, 60000)
	require.True(t, dec.Empty())
	require.Equal(t, ReasonScaleDownRefusedConsolidation, diag.LoadReason, "post_kv 120000 >= max_kv 100000")

	prefillPlanner := func(ttft float64) (*Planner, State) {
		p := mustPlanner(t, slaConfig(func(c *config.Config) {
			c.Mode, c.EnableLoadScaling, c.EnableThroughputScaling, c.TTFTMs, c.MaxGPUBudget = config.ModePrefill, true, false, ttft, -1
		}))
		return p, mustInit(t, p, 0, Bootstrap{PrefillFPMs: linearPrefillFPMs(1e-5, 0.002, 500, 1000, 1500)})
	}
	pcaps := WorkerCapabilities{Prefill: &EngineCapabilities{MaxNumBatchedTokens: 8192}}
	prefill := func(ttft float64, n int, queued int64) (Decision, Diagnostics) {
		p, st := prefillPlanner(ttft)
		var engines []perf.FPM
		for i := 0; i < n; i++ {
			engines = append(engines, prefillEngine(string(rune('a'+i)), queued))
		}
		_, dec, diag := decideAt(t, p, st, Input{Workers: counts(n, 0), Capabilities: pcaps, FPM: &FPMObservations{Prefill: engines}})
		return dec, diag
	}
	dec, diag = prefill(500, 2, 30000)
	require.True(t, dec.Empty())
	require.Equal(t, ReasonScaleDownRefusedConsolidation, diag.LoadReason, "60000 queued tokens on one engine: ~614 ms of queue")
	require.InDelta(t, 318.0, *diag.EstimatedTTFTMs, 0.5)
	dec, _ = prefill(500, 2, 0)
	require.Equal(t, 1, *dec.Prefill)
	dec, _ = prefill(500, 10, 2000)
	require.Equal(t, 9, *dec.Prefill)
	// T_own: the next request's own prefill (12 ms) is not part of the scale-down budget.
	dec, _ = prefill(50, 2, 1000)
	require.Equal(t, 1, *dec.Prefill, "queue-induced 20 ms < (50 - 12) x 0.8")
	dec, diag = prefill(25, 2, 1000)
	require.True(t, dec.Empty())
	require.Equal(t, ReasonScaleDownRefusedConsolidation, diag.LoadReason, "20 ms >= (25 - 12) x 0.8")
	// Every engine over the SLA: scale up.
	dec, diag = prefill(20, 2, 30000)
	require.Equal(t, 3, *dec.Prefill)
	require.Equal(t, ReasonScaleUp, diag.LoadReason)
}

func TestPendingDesiredGuard(t *testing.T) {
	caps := WorkerCapabilities{Decode: &EngineCapabilities{MaxKVTokens: 100000}}
	hot := &FPMObservations{Decode: []perf.FPM{decodeEngine("a", 10, 110000, 0)}}
	c := config.Default()
	c.Mode, c.MaxGPUBudget = config.ModeDecode, -1
	p := mustPlanner(t, c)
	st := mustInit(t, p, 0, Bootstrap{})
	st, dec, _ := decideAt(t, p, st, Input{Workers: counts(0, 1), FPM: hot, Capabilities: caps})
	require.Equal(t, 2, *dec.Decode)
	require.Equal(t, &PendingDesired{Replicas: 2, At: 5}, st.PendingDecode)

	// The connector says stable at 1 (it reports too early): the guard keeps the decision
	// in progress instead of stacking another scale-up.
	st, dec, diag := decideAt(t, p, st, Input{Workers: counts(0, 1), FPM: hot, Capabilities: caps})
	require.True(t, dec.Empty())
	require.Equal(t, ReasonScalingInProgress, diag.LoadReason)
	require.Equal(t, 2, *diag.ExpectedDecode)

	// Ready matches the desired count: the memory clears and decisions resume.
	two := &FPMObservations{Decode: []perf.FPM{decodeEngine("a", 10, 110000, 0), decodeEngine("b", 10, 110000, 0)}}
	st, dec, _ = decideAt(t, p, st, Input{Workers: counts(0, 2), FPM: two, Capabilities: caps})
	require.Equal(t, 3, *dec.Decode)

	// A desired count that never becomes ready expires after 5 throughput intervals (900 s).
	at := *st.NextLoadAt + 900
	st.NextLoadAt = ptr(at)
	st, dec, diag = decideAt(t, p, st, Input{Workers: counts(0, 2), FPM: two, Capabilities: caps})
	require.Equal(t, 3, *dec.Decode, "expired guard: scaling resumes")
	require.Contains(t, diag.Notes[0], "guard expired")

	// Advisory mode records nothing.
	c.Advisory = true
	adv := mustPlanner(t, c)
	st = mustInit(t, adv, 0, Bootstrap{})
	st, dec, _ = decideAt(t, adv, st, Input{Workers: counts(0, 1), FPM: hot, Capabilities: caps})
	require.Equal(t, 2, *dec.Decode)
	require.Nil(t, st.PendingDecode)
}

func TestOlderLoadPlannerRules(t *testing.T) {
	caps := WorkerCapabilities{Decode: &EngineCapabilities{MaxKVTokens: 100000}}
	t.Run("no decode scale-down within 3 intervals of a scale-up", func(t *testing.T) {
		c := config.Default()
		c.Mode, c.MaxGPUBudget, c.DecodeScaleDownHoldIntervals = config.ModeDecode, -1, 3
		p := mustPlanner(t, c)
		st := mustInit(t, p, 0, Bootstrap{})
		st, dec, _ := decideAt(t, p, st, Input{Workers: counts(0, 1), Capabilities: caps, FPM: &FPMObservations{Decode: []perf.FPM{decodeEngine("a", 1, 110000, 0)}}})
		require.Equal(t, 2, *dec.Decode) // at t=5
		idle := &FPMObservations{Decode: []perf.FPM{decodeEngine("a", 1, 1000, 0), decodeEngine("b", 1, 1000, 0)}}
		var diag Diagnostics
		for _, now := range []float64{10, 15} {
			st, dec, diag = decideAt(t, p, st, Input{Now: now, Workers: counts(0, 2), Capabilities: caps, FPM: idle})
			require.True(t, dec.Empty(), "t=%v", now)
			require.Equal(t, ReasonScaleDownHeldAfterScaleUp, diag.LoadReason)
		}
		require.Equal(t, 20.0, *st.NextLoadAt)
		_, dec, _ = decideAt(t, p, st, Input{Now: 20, Workers: counts(0, 2), Capabilities: caps, FPM: idle})
		require.Equal(t, 1, *dec.Decode, "3 load intervals after the scale-up")
	})
	t.Run("no prefill scale-up when the queue trends under the threshold", func(t *testing.T) {
		c := config.Default()
		c.Mode, c.OptimizationTarget, c.MaxGPUBudget, c.Advisory = config.ModePrefill, config.TargetLoad, -1, true
		c.PrefillScaleUpQueueTokens, c.PrefillScaleDownQueueTokens, c.PrefillScaleUpTrendIntervals = ptr(1000), ptr(100), 3
		p := mustPlanner(t, c)
		st := mustInit(t, p, 0, Bootstrap{})
		queue := func(q int64) *FPMObservations {
			return &FPMObservations{Prefill: []perf.FPM{{Version: 1, WorkerID: "a", Queued: perf.QueuedRequests{SumPrefillTokens: q}}}}
		}
		st, dec, _ := decideAt(t, p, st, Input{Workers: counts(1, 0), FPM: queue(5000)})
		require.Equal(t, 2, *dec.Prefill, "no trend yet")
		st, dec, diag := decideAt(t, p, st, Input{Workers: counts(1, 0), FPM: queue(1500)})
		require.True(t, dec.Empty(), "1500 - 3*3500 < 1000")
		require.Equal(t, ReasonScaleUpSkippedQueueTrend, diag.LoadReason)
		_, dec, _ = decideAt(t, p, st, Input{Workers: counts(1, 0), FPM: queue(1600)})
		require.Equal(t, 2, *dec.Prefill, "rising again")
	})
}

func TestDisaggRestoresInformativeReasons(t *testing.T) {
	p := mustPlanner(t, slaConfig(func(c *config.Config) {
		c.EnableLoadScaling, c.EnableThroughputScaling, c.MaxGPUBudget = true, false, -1
	}))
	// The prefill model has no samples; the decode model is fitted and sees no pressure.
	st := mustInit(t, p, 0, Bootstrap{DecodeFPMs: linearDecodeFPMs(1e-6, 0.005)})
	caps := WorkerCapabilities{Prefill: &EngineCapabilities{MaxNumBatchedTokens: 8192}, Decode: &EngineCapabilities{MaxKVTokens: 1_000_000}}
	fpm := &FPMObservations{
		Prefill: []perf.FPM{{Version: 1, WorkerID: "p0"}},
		Decode:  []perf.FPM{decodeEngine("d0", 10, 10000, 0)},
	}
	_, dec, diag := decideAt(t, p, st, Input{Workers: counts(1, 1), FPM: fpm, Capabilities: caps})
	require.True(t, dec.Empty())
	require.Equal(t, ReasonInsufficientData, diag.LoadReasonPrefill)
	require.Equal(t, ReasonNoChange, diag.LoadReasonDecode)
	require.Equal(t, ReasonInsufficientData, diag.LoadReason)

	// Scaling in progress on either side holds both.
	w := counts(1, 1)
	w.ExpectedDecode = ptr(2)
	_, dec, diag = decideAt(t, p, st, Input{Workers: w, FPM: fpm, Capabilities: caps})
	require.True(t, dec.Empty())
	require.Equal(t, ReasonScalingInProgress, diag.LoadReasonPrefill)
	// No FPM from either pool.
	_, _, diag = decideAt(t, p, st, Input{Workers: counts(1, 1), Capabilities: caps})
	require.Equal(t, ReasonNoFPMData, diag.LoadReason)
}

func TestDisaggLoadWithThroughputFloor(t *testing.T) {
	p := mustPlanner(t, slaConfig(func(c *config.Config) {
		c.EnableLoadScaling, c.MaxGPUBudget = true, -1
		c.ThroughputAdjustmentIntervalSeconds = 60
	}))
	st := mustInit(t, p, 0, Bootstrap{PrefillFPMs: linearPrefillFPMs(1e-5, 0.002, 500, 1000, 1500), DecodeFPMs: linearDecodeFPMs(1e-6, 0.005)})
	st.LowerBoundPrefill, st.LowerBoundDecode = 3, 2
	caps := WorkerCapabilities{Prefill: &EngineCapabilities{MaxNumBatchedTokens: 8192}, Decode: &EngineCapabilities{MaxKVTokens: 1_000_000}}
	var pe, de []perf.FPM
	for _, id := range []string{"a", "b", "c"} {
		pe = append(pe, prefillEngine("p"+id, 0))
		de = append(de, decodeEngine("d"+id, 5, 5000, 0))
	}
	// Both pools are idle and would drop to 2, but the prefill floor is 3.
	_, dec, diag := decideAt(t, p, st, Input{Workers: counts(3, 3), Capabilities: caps, FPM: &FPMObservations{Prefill: pe, Decode: de}})
	require.Nil(t, dec.Prefill, "prefill held at its current 3 by the floor: no change to apply")
	require.Equal(t, 2, *dec.Decode)
	require.Equal(t, ReasonScaleDownCappedByThroughput, diag.LoadReasonPrefill)
	require.Equal(t, ReasonScaleDown, diag.LoadReasonDecode)
	require.Equal(t, ReasonScaleDownCappedByThroughput, diag.LoadReason)
}

func TestStateSurvivesJSONAndIsNotMutated(t *testing.T) {
	p := mustPlanner(t, slaConfig(func(c *config.Config) {
		c.EnableLoadScaling, c.MaxGPUBudget, c.ThroughputAdjustmentIntervalSeconds = true, -1, 30
		c.LoadPredictor = config.PredictorKalman
	}))
	boot := Bootstrap{PrefillFPMs: linearPrefillFPMs(1e-5, 0.002, 500, 1000, 1500), DecodeFPMs: linearDecodeFPMs(1e-6, 0.005)}
	caps := WorkerCapabilities{Prefill: &EngineCapabilities{MaxNumBatchedTokens: 8192}, Decode: &EngineCapabilities{MaxKVTokens: 1_000_000, MaxNumSeqs: 256}}
	direct := mustInit(t, p, 0, boot)
	viaJSON := mustInit(t, p, 0, boot)
	for i := 0; i < 40; i++ {
		tk := p.NextTick(direct)
		in := Input{Now: tk.At, Workers: counts(1, 1), Capabilities: caps,
			FPM: &FPMObservations{
				Prefill: []perf.FPM{prefillEngine("p0", int64(i%7)*3000)},
				Decode:  []perf.FPM{decodeEngine("d0", int64(5+i%4), int64(5000+i*700), 0)},
			}}
		if tk.NeedTraffic {
			in.Traffic = traffic(tk.TrafficDurationS, float64(100+i*10), 1000, 200)
		}
		direct, viaJSON, _ = decideBothWays(t, p, direct, viaJSON, in, i)
	}
	data, err := json.Marshal(direct)
	require.NoError(t, err)
	t.Logf("state after 40 ticks: %d bytes of JSON", len(data))
	require.Less(t, len(data), 64<<10, "the state stays small enough for workflow history")
}

func TestNewRejectsBadInput(t *testing.T) {
	bad := config.Default()
	bad.TTFTMs = -1
	_, err := New(bad, nil)
	require.ErrorContains(t, err, "ttft_ms: must be > 0")

	interp := slaConfig(func(c *config.Config) { c.ThroughputSizing = config.SizingInterpolation })
	_, err = New(interp, nil)
	require.ErrorIs(t, err, ErrProfileRequired)

	p := mustPlanner(t, slaConfig(nil))
	_, _, _, err = p.Decide(State{Version: 99}, Input{})
	require.EqualError(t, err, "scaling: state version 99, this planner reads 1")
	_, _, _, err = p.Decide(State{Version: StateVersion, NextThroughputAt: ptr(1.0)}, Input{Now: 1})
	require.ErrorContains(t, err, "state has no perf model for an active pool")
}

// The aggregated pool combines a TTFT side and an ITL side (reference §4.3): on a model where
// every iteration takes 40 ms, an ITL target of 30 ms scales up, an idle pool with room
// scales down, and a cache that could not hold the absorbed load refuses on the ITL side,
// which vetoes the TTFT side's scale-down.
func TestAggregatedLoad(t *testing.T) {
	run := func(itl float64, maxKV int64, kv int64) (Decision, Diagnostics) {
		p := mustPlanner(t, slaConfig(func(c *config.Config) {
			c.Mode, c.EnableLoadScaling, c.EnableThroughputScaling, c.MaxGPUBudget = config.ModeAgg, true, false, -1
			c.ITLMs, c.TTFTMs = itl, 1000
		}))
		st := mustInit(t, p, 0, Bootstrap{AggFPMs: constantAggFPMs(0.04)})
		caps := WorkerCapabilities{Decode: &EngineCapabilities{MaxNumBatchedTokens: 8192, MaxNumSeqs: 256, MaxKVTokens: maxKV}}
		var engines []perf.FPM
		for _, id := range []string{"a", "b"} {
			engines = append(engines, perf.FPM{Version: 1, WorkerID: id, WallTime: 0.04,
				Scheduled: perf.ScheduledRequests{NumPrefillRequests: 1, SumPrefillTokens: 300, NumDecodeRequests: 4, SumDecodeKVTokens: kv}})
		}
		_, dec, diag := decideAt(t, p, st, Input{Workers: counts(0, 2), Capabilities: caps, FPM: &FPMObservations{Decode: engines}})
		return dec, diag
	}
	dec, diag := run(30, 1_000_000, 4000)
	require.Equal(t, 3, *dec.Decode, "every engine's 40 ms ITL is over 30 ms")
	require.Equal(t, ReasonScaleUp, diag.LoadReason)
	require.InDelta(t, 40, *diag.EstimatedITLMs, 1e-9)

	dec, diag = run(100, 1_000_000, 4000)
	require.Equal(t, 1, *dec.Decode, "40 ms after consolidation < 100 ms x 0.8, TTFT side idle too")
	require.Equal(t, ReasonScaleDown, diag.LoadReason)

	dec, diag = run(100, 10_000, 6000)
	require.True(t, dec.Empty(), "12000 KV tokens on one engine >= max_kv 10000")
	require.Equal(t, ReasonScaleDownRefusedConsolidation, diag.LoadReason)
}

// Reviewed edge cases: unsupported FPM versions, out-of-range traffic, the merge boundary.
func TestEdgeCases(t *testing.T) {
	t.Run("FPMs of another schema version are not load", func(t *testing.T) {
		p := mustPlanner(t, slaConfig(func(c *config.Config) {
			c.Mode, c.EnableLoadScaling, c.EnableThroughputScaling, c.MaxGPUBudget = config.ModeDecode, true, false, -1
		}))
		st := mustInit(t, p, 0, Bootstrap{DecodeFPMs: linearDecodeFPMs(5e-6, 0.005)})
		caps := WorkerCapabilities{Decode: &EngineCapabilities{MaxKVTokens: 1_000_000}}
		for _, v := range []int64{0, 2} {
			f := decodeEngine("a", 30, 30000, 0)
			f.Version = v
			_, dec, diag := decideAt(t, p, st, Input{Workers: counts(0, 1), Capabilities: caps, FPM: &FPMObservations{Decode: []perf.FPM{f}}})
			require.True(t, dec.Empty(), "version %d", v)
			require.Equal(t, ReasonNoFPMData, diag.LoadReason, "version %d", v)
			require.Contains(t, diag.Notes, "decode: skipped 1 FPMs of an unsupported schema version (want 1)")
		}
		// The same in a threshold target, which has no perf model.
		c := config.Default()
		c.Mode = config.ModeDecode
		easy := mustPlanner(t, c)
		est := mustInit(t, easy, 0, Bootstrap{})
		f := decodeEngine("a", 30, 990000, 0)
		f.Version = 0
		_, dec, diag := decideAt(t, easy, est, Input{Workers: counts(0, 1), Capabilities: caps, FPM: &FPMObservations{Decode: []perf.FPM{f}}})
		require.True(t, dec.Empty())
		require.Equal(t, ReasonNoFPMData, diag.LoadReason)
	})
	t.Run("absurd traffic never wraps into a scale-down", func(t *testing.T) {
		p := mustPlanner(t, slaConfig(func(c *config.Config) { c.Mode, c.MaxGPUBudget = config.ModeDecode, -1 }))
		st := mustInit(t, p, 0, Bootstrap{DecodeFPMs: linearDecodeFPMs(1e-6, 0.005)})
		st.NextLoadAt = ptr(1e9)
		caps := WorkerCapabilities{Decode: &EngineCapabilities{MaxKVTokens: 1_000_000, MaxNumSeqs: 256}}
		_, dec, diag := decideAt(t, p, st, Input{Now: 180, Workers: counts(0, 20), Capabilities: caps, Traffic: traffic(180, 1e22, 1000, 200)})
		require.Equal(t, 28, *dec.Decode, "a huge demand is a capped scale-up: 20 + 8")
		require.Equal(t, ReasonScale, diag.ThroughputReason)
		for _, tr := range []*TrafficObservation{traffic(180, 1000, 1e19, 200), traffic(180, 1000, 1000, 1e19), traffic(180, 1000, 5e9, 200)} {
			_, dec, diag = decideAt(t, p, st, Input{Now: 180, Workers: counts(0, 20), Capabilities: caps, Traffic: tr})
			require.True(t, dec.Empty(), "lengths beyond u32 are not sized: %+v", *tr)
			require.Equal(t, ReasonModelNotReady, diag.ThroughputReason)
		}
	})
	t.Run("loops due exactly 0.5 s apart merge", func(t *testing.T) {
		p := mustPlanner(t, slaConfig(func(c *config.Config) { c.EnableLoadScaling = true }))
		st := mustInit(t, p, 0, Bootstrap{})
		st.NextLoadAt, st.NextThroughputAt = ptr(100.0), ptr(100.5)
		require.True(t, p.NextTick(st).Throughput)
		st.NextThroughputAt = ptr(math.Nextafter(100.5, 101))
		require.False(t, p.NextTick(st).Throughput)
	})
}

// TestTrafficObservation_RequestsPerSecond: the rate a tick read is the count over the window,
// and nothing (never zero, never an infinity JSON cannot carry) when either is unusable.
func TestTrafficObservation_RequestsPerSecond(t *testing.T) {
	for _, tc := range []struct {
		name string
		obs  *TrafficObservation
		want *float64
	}{
		{"no observation", nil, nil},
		{"count unread", &TrafficObservation{DurationS: 5}, nil},
		{"no window", &TrafficObservation{NumReq: ptr(10.0)}, nil},
		{"a negative window", &TrafficObservation{DurationS: -5, NumReq: ptr(10.0)}, nil},
		{"past float64", &TrafficObservation{DurationS: 1e-300, NumReq: ptr(1e300)}, nil},
		{"none arrived", &TrafficObservation{DurationS: 5, NumReq: ptr(0.0)}, ptr(0.0)},
		{"40 req/s", &TrafficObservation{DurationS: 5, NumReq: ptr(200.0)}, ptr(40.0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.obs.RequestsPerSecond())
		})
	}
}

// TestLatestFPMs: one FPM per (worker, rank), the last given, in key order — what a stable
// sort by key and a pass keeping the last of each key give — over seeded random pools with
// repeated reports, ranks and workers.
func TestLatestFPMs(t *testing.T) {
	reference := func(fpms []perf.FPM) []perf.FPM {
		out := slices.Clone(fpms)
		slices.SortStableFunc(out, func(a, b perf.FPM) int {
			return cmp.Or(cmp.Compare(a.WorkerID, b.WorkerID), cmp.Compare(a.DPRank, b.DPRank))
		})
		var kept []perf.FPM
		for _, f := range out {
			if n := len(kept); n > 0 && kept[n-1].WorkerID == f.WorkerID && kept[n-1].DPRank == f.DPRank {
				kept[n-1] = f
				continue
			}
			kept = append(kept, f)
		}
		return kept
	}
	require.Nil(t, latestFPMs(nil))
	rng := rand.New(rand.NewPCG(7, 69))
	for range 200 {
		fpms := make([]perf.FPM, rng.IntN(60)+1)
		for i := range fpms {
			// CounterID tells the reports of one key apart: the last given must be kept.
			fpms[i] = perf.FPM{WorkerID: fmt.Sprintf("w%d", rng.IntN(8)), DPRank: int64(rng.IntN(3)), CounterID: int64(i)}
		}
		in := slices.Clone(fpms)
		require.Equal(t, reference(fpms), latestFPMs(fpms))
		require.Equal(t, in, fpms, "the FPMs given are left as they were")
	}
}
