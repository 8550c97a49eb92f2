package scaling

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
	"github.com/stretchr/testify/require"
)

// chaosValue draws a non-negative observation from an ordinary range most of the time and,
// now and then, from the absurd ends a broken exporter or a mis-scaled query gives: zero, a
// tiny fraction, or a value many orders of magnitude past any deployment.
func chaosValue(rng *rand.Rand, typical float64) float64 {
	switch rng.IntN(24) {
	case 0:
		return 0
	case 1:
		return 1e-9
	case 2:
		return typical * 1e6
	case 3:
		return 1e15
	case 4:
		return 1e300
	default:
		return typical * rng.Float64() * 2
	}
}

// chaosFPMs are the FPMs of n engines (dp ranks each), with counts and tokens now and then
// far past anything an engine holds.
func chaosFPMs(rng *rand.Rand, prefix string, n, dp int) []perf.FPM {
	out := randomFPMs(rng, prefix, n, dp)
	for i := range out {
		// At the bounds of what an engine may report (perf.FPM.OutOfBounds), and now and
		// then past them (left out by Decide).
		if rng.IntN(10) == 0 {
			out[i].Queued.NumPrefillRequests = perf.MaxFPMRequests
			out[i].Queued.SumPrefillTokens = perf.MaxFPMTokens
		}
		if rng.IntN(10) == 0 {
			out[i].Scheduled.NumDecodeRequests = perf.MaxFPMRequests
			out[i].Scheduled.SumDecodeKVTokens = perf.MaxFPMTokens
		}
		if rng.IntN(10) == 0 {
			out[i].WallTime = perf.MaxFPMWallTime
			out[i].Scheduled.VarPrefillLength = perf.MaxFPMVariance
		}
		if rng.IntN(40) == 0 {
			out[i].WallTime = []float64{1e9, 1e300}[rng.IntN(2)]
			out[i].Queued.SumPrefillTokens = 1 << 62
		}
	}
	return out
}

// TestDecide_ChaosSequences drives the ahead policy, disaggregated and aggregated, and
// Dynamo's loops (random targets and modes) through
// long random sequences of ticks whose observations swing between ordinary traffic,
// silence, missing series and absurd magnitudes, with pools that appear and vanish: every
// tick decides without an error, every target respects the minimum endpoints and the GPU
// budget, and the state and the diagnostics always survive the JSON round trip the
// workflow's history makes of them (a NaN or an infinity anywhere in them would fail it, and
// the workflow with it).
func TestDecide_ChaosSequences(t *testing.T) {
	prof, err := perf.LoadProfile("../sim/engine/testdata")
	require.NoError(t, err)
	const sequences, ticks = 24, 400
	for s := 0; s < sequences; s++ {
		rng := rand.New(rand.NewPCG(uint64(s), 68))
		var cfg config.Config
		switch s % 4 {
		case 0, 1: // the ahead policy, disaggregated and aggregated
			mode := []config.Mode{config.ModeDisagg, config.ModeAgg}[s%2]
			cfg = slaConfig(func(c *config.Config) {
				c.Mode, c.ScalingPolicy = mode, config.PolicyAhead
				c.TTFTMs, c.ITLMs = 50+rng.Float64()*2000, 5+rng.Float64()*60
				c.MaxGPUBudget = []int{-1, 4, 16, 64}[rng.IntN(4)]
				c.PrefillEngineNumGPU, c.DecodeEngineNumGPU = ptr(1), ptr(1)
				if rng.IntN(3) == 0 {
					c.ExpectedStartupSeconds = rng.IntN(600)
				}
			})
		default: // Dynamo's loops, any target and mode
			cfg = randomConfig(rng, 1, 1)
		}
		require.NoError(t, cfg.Validate(), "sequence %d", s)
		mode := cfg.Mode
		p, err := New(cfg, prof)
		require.NoError(t, err)
		st := mustInit(t, p, 0, ProfileBootstrap(prof, mode))
		readyP, readyD := 1, 1
		if !cfg.HasPrefill() {
			readyP = 0
		}
		if !cfg.HasDecode() {
			readyD = 0
		}
		base := 1 + rng.Float64()*80 // the sequence's ordinary rate, req/s
		for i := 0; i < ticks; i++ {
			at := p.NextTick(st).At
			in := Input{Now: at}
			interval := 5.0
			switch k := rng.IntN(12); {
			case k == 0: // the traffic query failed
				in.Traffic = &TrafficObservation{DurationS: interval}
			case k == 1: // silence
				in.Traffic = traffic(interval, 0, 0, 0)
				in.Traffic.ISL, in.Traffic.OSL = nil, nil
			default:
				in.Traffic = traffic(interval, chaosValue(rng, base*interval), chaosValue(rng, 3000), chaosValue(rng, 300))
				in.Traffic.TTFTMs, in.Traffic.ITLMs = ptr(chaosValue(rng, cfg.TTFTMs)), ptr(chaosValue(rng, cfg.ITLMs))
				in.Traffic.RequestDurationS = ptr(chaosValue(rng, 10))
				if rng.IntN(4) == 0 {
					in.Traffic.KVHitRate = ptr(rng.Float64())
				}
			}
			// The pools move towards the last targets, and now and then jump or go unknown.
			if rng.IntN(15) == 0 {
				readyP, readyD = rng.IntN(40), rng.IntN(40)
			}
			if !cfg.HasPrefill() {
				readyP = 0
			}
			if !cfg.HasDecode() {
				readyD = 0
			}
			in.Workers = counts(readyP, readyD)
			if rng.IntN(20) == 0 {
				in.Workers = &WorkerCounts{}
			}
			// FPMs from at most 64 engines of each pool: past that, the publishers that report are
			// a part of the pool (the reconciliation's mismatch), and the test stays fast.
			in.FPM = &FPMObservations{Prefill: chaosFPMs(rng, "p", min(readyP, 64), 1), Decode: chaosFPMs(rng, "d", min(readyD, 64), 1)}
			if rng.IntN(10) == 0 {
				in.FPM = nil
			}

			next, dec, diag, err := p.Decide(st, in)
			require.NoError(t, err, "sequence %d tick %d", s, i)
			for _, v := range []any{next, diag, dec} {
				_, err := json.Marshal(v)
				require.NoError(t, err, "sequence %d tick %d: %T does not encode", s, i, v)
			}
			var restored State
			data, _ := json.Marshal(next)
			require.NoError(t, json.Unmarshal(data, &restored))

			// The pools as the decision leaves them: its targets, else the counts it saw.
			seen := func(target, expected, ready *int) int {
				switch {
				case target != nil:
					return *target
				case expected != nil:
					return *expected
				case ready != nil:
					return *ready
				}
				return 0
			}
			if dec.Prefill != nil {
				require.GreaterOrEqual(t, *dec.Prefill, cfg.PrefillMinEndpoints(), "sequence %d tick %d", s, i)
				readyP = *dec.Prefill
			}
			if dec.Decode != nil {
				require.GreaterOrEqual(t, *dec.Decode, cfg.DecodeMinEndpoints(), "sequence %d tick %d", s, i)
				readyD = *dec.Decode
			}
			if cfg.MaxGPUBudget >= 0 && !dec.Empty() {
				total := 0 // one GPU an engine
				if cfg.HasDecode() {
					total += seen(dec.Decode, diag.ExpectedDecode, diag.ReadyDecode)
				}
				if cfg.HasPrefill() {
					total += seen(dec.Prefill, diag.ExpectedPrefill, diag.ReadyPrefill)
				}
				require.LessOrEqual(t, total, cfg.MaxGPUBudget, "sequence %d tick %d: %s", s, i, fmt.Sprint(diag.Notes))
			}
			st = p.Submitted(next, dec, at)
		}
	}
}

// TestAhead_AbsurdDemandIsNotReadAsNone: within the bounds of what enters, a demand no
// deployment serves (5·10⁷ req/s) sizes both pools at their bound — every count of engines
// is taken through engineCount, where a ratio past int64 converted to a negative need, which
// left a pool at its minimum — or, under a GPU budget, fills it.
func TestAhead_AbsurdDemandIsNotReadAsNone(t *testing.T) {
	for _, budget := range []int{-1, 16} {
		p, st := aheadPlannerWith(t, func(c *config.Config) {
			c.MaxGPUBudget = budget
			c.PrefillEngineNumGPU, c.DecodeEngineNumGPU = ptr(1), ptr(1)
		})
		in := aheadInput(p.NextTick(st).At, 2, 2, 2, 2, 0)
		in.Traffic = traffic(5, 2.5e8, 3000, 300)
		_, dec, diag, err := p.Decide(st, in)
		require.NoError(t, err)
		require.NotNil(t, dec.Prefill, "budget %d: %v", budget, diag.Notes)
		require.NotNil(t, dec.Decode, "budget %d: %v", budget, diag.Notes)
		if budget < 0 {
			require.Equal(t, aheadMaxEngines, *dec.Prefill, "%v", diag.Notes)
			require.Equal(t, aheadMaxEngines, *dec.Decode, "%v", diag.Notes)
		} else {
			require.Equal(t, budget, *dec.Prefill+*dec.Decode, "%v", diag.Notes)
			require.Greater(t, *dec.Prefill, 2)
			require.Greater(t, *dec.Decode, 2)
		}
	}
}

// TestAhead_TrafficPastTheBoundsHolds: a window reporting more requests a second than any
// deployment serves is a broken counter: the tick holds, as on unreadable traffic, and its
// history is left as it was; a mean length past the bound is read as unobserved.
func TestAhead_TrafficPastTheBoundsHolds(t *testing.T) {
	p, st := aheadPlanner(t)
	in := aheadInput(p.NextTick(st).At, 2, 2, 2, 2, 0)
	in.Traffic = traffic(5, 5e300, 3000, 300)
	next, dec, diag, err := p.Decide(st, in)
	require.NoError(t, err)
	require.True(t, dec.Empty())
	require.Equal(t, ReasonNoTrafficData, diag.LoadReason, "%v", diag.Notes)
	require.Contains(t, fmt.Sprint(diag.Notes), "more than any deployment serves")
	require.Empty(t, next.Ahead.Count, "nothing recorded")

	in = aheadInput(p.NextTick(st).At, 2, 2, 2, 2, 20)
	next, _, _, err = p.Decide(st, in)
	require.NoError(t, err)
	in = aheadInput(p.NextTick(next).At, 2, 2, 2, 2, 20)
	in.Traffic.ISL = ptr(1e300)
	_, _, diag, err = p.Decide(next, in)
	require.NoError(t, err)
	require.Contains(t, fmt.Sprint(diag.Notes), "a mean ISL of 1e+300 tokens is past 1e+09")
	require.Contains(t, fmt.Sprint(diag.Notes), "their ISL or OSL not observed yet", "the recent means stand in")
}

// TestDecide_FPMsPastTheBoundsLeftOut: an FPM past what an engine reports (an iteration of
// 10³⁰⁰ s) is left out, with a note naming it, so that neither the engine models nor the
// loads read it; the others are kept, in their order.
func TestDecide_FPMsPastTheBoundsLeftOut(t *testing.T) {
	good := func(id string) perf.FPM {
		return perf.FPM{Version: perf.FPMVersion, WorkerID: id, WallTime: 0.05,
			Scheduled: perf.ScheduledRequests{NumPrefillRequests: 1, SumPrefillTokens: 3000}}
	}
	bad := good("p1")
	bad.WallTime = 1e300
	o := &FPMObservations{Prefill: []perf.FPM{good("p0"), bad, good("p2")}, Decode: []perf.FPM{good("d0")}}
	kept, note := boundedFPMs(o)
	require.Equal(t, []string{"p0", "p2"}, []string{kept.Prefill[0].WorkerID, kept.Prefill[1].WorkerID})
	require.Len(t, kept.Prefill, 2)
	require.Equal(t, o.Decode, kept.Decode)
	require.Len(t, o.Prefill, 3, "the input is left as it was")
	require.Contains(t, note, `left out 1 FPMs past what an engine reports (the first: worker "p1" rank 0: wall_time 1e+300 (0..3600))`)
	same, note := boundedFPMs(&FPMObservations{Prefill: []perf.FPM{good("p0")}})
	require.Empty(t, note)
	require.Len(t, same.Prefill, 1)
	none, note := boundedFPMs(nil)
	require.Nil(t, none)
	require.Empty(t, note)

	// Through Decide: the note is the tick's, and the state still encodes.
	p, st := aheadPlanner(t)
	in := aheadInput(p.NextTick(st).At, 3, 1, 3, 1, 20)
	in.FPM = o
	next, _, diag, err := p.Decide(st, in)
	require.NoError(t, err)
	require.Contains(t, fmt.Sprint(diag.Notes), "a broken publisher, not load")
	_, err = json.Marshal(next)
	require.NoError(t, err)
}

func TestNonFinite(t *testing.T) {
	type inner struct{ X []float64 }
	type outer struct {
		A float64
		B *inner
		C []int
	}
	require.Empty(t, nonFinite(reflect.ValueOf(outer{A: 1, B: &inner{X: []float64{1, 2}}, C: []int{3}}), "v"))
	require.Equal(t, "v.B.X[1] = +Inf", nonFinite(reflect.ValueOf(outer{B: &inner{X: []float64{1, math.Inf(1)}}}), "v"))
	require.Equal(t, "v.A = NaN", nonFinite(reflect.ValueOf(&outer{A: math.NaN()}), "v"))
	p, st := aheadPlanner(t)
	require.Empty(t, nonFinite(reflect.ValueOf(st), "state"))
	st.Ahead.ExcessWait = math.Inf(1)
	require.Equal(t, "state.Ahead.ExcessWait = +Inf", nonFinite(reflect.ValueOf(st), "state"))
	// A tick that meets such a state fails, and leaves it as it was, rather than hand the
	// workflow a state JSON cannot carry.
	_, _, _, err := p.Decide(st, aheadInput(p.NextTick(st).At, 1, 1, 1, 1, 20))
	require.ErrorContains(t, err, "the tick computed a value JSON cannot carry (state.Ahead.ExcessWait = +Inf)")
}

// TestDecide_TargetsWithinMaxReplicas: Dynamo's throughput loop sizes a request count no
// deployment serves past config.MaxReplicas (its ceilings saturate at 2³⁰); the target is
// capped there, with a note, since no connector reports a pool larger than that.
func TestDecide_TargetsWithinMaxReplicas(t *testing.T) {
	prof, err := perf.LoadProfile("../sim/engine/testdata")
	require.NoError(t, err)
	cfg := slaConfig(func(c *config.Config) {
		c.MaxGPUBudget, c.EnableThroughputScaling, c.EnableLoadScaling = -1, true, false
		c.MaxThroughputScalingReplicas = config.MaxReplicas // the cap on a change: 2 + 4096 is past it
	})
	require.NoError(t, cfg.Validate())
	p, err := New(cfg, prof)
	require.NoError(t, err)
	st := mustInit(t, p, 0, ProfileBootstrap(prof, cfg.Mode))
	// throughputTick runs ticks on pools of ready engines up to the next throughput tick.
	throughputTick := func(ready int) (Decision, Diagnostics) {
		for range 100 {
			in := Input{Now: p.NextTick(st).At, Workers: counts(ready, ready), Traffic: traffic(float64(cfg.ThroughputAdjustmentIntervalSeconds), 1e13, 3000, 300),
				Capabilities: WorkerCapabilities{Prefill: &EngineCapabilities{NumGPU: 1}, Decode: &EngineCapabilities{NumGPU: 1}}}
			next, dec, diag, err := p.Decide(st, in)
			require.NoError(t, err)
			if st = next; diag.RanThroughput {
				return dec, diag
			}
		}
		require.FailNow(t, "no throughput tick in 100 ticks")
		return Decision{}, Diagnostics{}
	}
	dec, diag := throughputTick(2)
	require.NotNil(t, dec.Prefill, "%v", diag.Notes)
	require.NotNil(t, dec.Decode, "%v", diag.Notes)
	require.Equal(t, config.MaxReplicas, *dec.Prefill, "%v", diag.Notes)
	require.Equal(t, config.MaxReplicas, *dec.Decode, "%v", diag.Notes)
	require.Contains(t, fmt.Sprint(diag.Notes), "capped at 4096, the most replicas a pool may report")

	// A pool already there is not ordered again (nor, at a count past it, down to it).
	dec, diag = throughputTick(config.MaxReplicas)
	require.True(t, dec.Empty(), "%v", diag.Notes)
	require.Contains(t, fmt.Sprint(diag.Notes), "not ordered: the pool is at 4096")
}

// TestAhead_BoundUnderALargeBudget: a GPU budget of more GPUs than 4,096 engines hold does
// not raise the ahead policy's bound past config.MaxReplicas.
func TestAhead_BoundUnderALargeBudget(t *testing.T) {
	p, st := aheadPlannerWith(t, func(c *config.Config) {
		c.MaxGPUBudget = 20000
		c.PrefillEngineNumGPU, c.DecodeEngineNumGPU = ptr(1), ptr(1)
	})
	in := aheadInput(p.NextTick(st).At, 2, 2, 2, 2, 0)
	in.Traffic = traffic(5, 2.5e8, 3000, 300)
	_, dec, diag, err := p.Decide(st, in)
	require.NoError(t, err)
	require.NotNil(t, dec.Prefill, "%v", diag.Notes)
	require.NotNil(t, dec.Decode, "%v", diag.Notes)
	require.LessOrEqual(t, *dec.Prefill, config.MaxReplicas)
	require.LessOrEqual(t, *dec.Decode, config.MaxReplicas)
	require.NotContains(t, fmt.Sprint(diag.Notes), "capped at", "sized within the bound, not capped after")
}

// TestAhead_TrafficWindowOutsideItsBounds: a window of a nanosecond or of a year is
// unreadable (a rate over it, or its place in the history, would be absurd): the tick holds.
func TestAhead_TrafficWindowOutsideItsBounds(t *testing.T) {
	p, st := aheadPlanner(t)
	for _, dur := range []float64{1e-9, 1e300} {
		in := aheadInput(p.NextTick(st).At, 2, 2, 2, 2, 0)
		in.Traffic = traffic(dur, 0, 0, 0)
		next, dec, diag, err := p.Decide(st, in)
		require.NoError(t, err)
		require.True(t, dec.Empty())
		require.Equal(t, ReasonNoTrafficData, diag.LoadReason, "%v", diag.Notes)
		require.Contains(t, fmt.Sprint(diag.Notes), "traffic unreadable: a window of")
		require.Empty(t, next.Ahead.Count)
	}
}
