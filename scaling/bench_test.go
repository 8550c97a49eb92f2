package scaling

import (
	"fmt"
	"math"
	"testing"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
)

// benchDisagg is a disaggregated sla planner with both loops, its models bootstrapped from
// the H200 profile, 4 prefill and 4 decode engines.
func benchDisagg(b *testing.B, predictor string) (*Planner, State, Input) {
	profile, err := perf.LoadProfile("../perf/testdata/profiles/h200-llama3.1-8b-fp8-tp1")
	if err != nil {
		b.Fatal(err)
	}
	p := mustPlanner(b, slaConfig(func(c *config.Config) {
		c.EnableLoadScaling, c.MaxGPUBudget, c.LoadPredictor = true, 32, predictor
	}))
	st := mustInit(b, p, 0, Bootstrap{PrefillFPMs: perf.PrefillBootstrapFPMs(profile.Prefill), DecodeFPMs: perf.DecodeBootstrapFPMs(profile.Decode)})
	in := Input{Workers: counts(4, 4), Capabilities: WorkerCapabilities{
		Prefill: &EngineCapabilities{NumGPU: 1, MaxNumBatchedTokens: 8192, MaxNumSeqs: 256, ContextLength: 16384},
		Decode:  &EngineCapabilities{NumGPU: 1, MaxNumBatchedTokens: 8192, MaxNumSeqs: 256, ContextLength: 16384, MaxKVTokens: profile.Decode.MaxKVTokens},
	}, FPM: &FPMObservations{}}
	for i := 0; i < 4; i++ {
		in.FPM.Prefill = append(in.FPM.Prefill, perf.FPM{Version: 1, WorkerID: fmt.Sprintf("p%d", i), WallTime: 0.06 + 0.001*float64(i),
			Scheduled: perf.ScheduledRequests{NumPrefillRequests: 1, SumPrefillTokens: 3000 + int64(i)*100},
			Queued:    perf.QueuedRequests{NumPrefillRequests: 2, SumPrefillTokens: 6000}})
		in.FPM.Decode = append(in.FPM.Decode, perf.FPM{Version: 1, WorkerID: fmt.Sprintf("d%d", i), WallTime: 0.012 + 0.0005*float64(i),
			Scheduled: perf.ScheduledRequests{NumDecodeRequests: 40, SumDecodeKVTokens: 130000 + int64(i)*5000}})
	}
	return p, st, in
}

// BenchmarkDecideLoadTick is one load tick without forecasting: observe 8 FPMs into the
// perf models, refit, estimate every engine with the consolidation checks, combine with the
// throughput floors and the GPU budget. Target: <= 100 µs.
func BenchmarkDecideLoadTick(b *testing.B) {
	p, st, in := benchDisagg(b, config.PredictorConstant)
	in.Now = p.NextTick(st).At
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := p.Decide(st, in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecideThresholdTick is one load tick of a threshold target (no perf model).
func BenchmarkDecideThresholdTick(b *testing.B) {
	c := config.Default()
	c.Environment = config.EnvNoop
	p := mustPlanner(b, c)
	st := mustInit(b, p, 0, Bootstrap{})
	_, _, in := benchDisagg(b, config.PredictorConstant)
	in.Now = p.NextTick(st).At
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := p.Decide(st, in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecideThroughputTick is a merged load and throughput tick with each predictor
// holding 50 points of history: the forecast, the capacity searches and the load step.
func BenchmarkDecideThroughputTick(b *testing.B) {
	for _, pred := range []string{config.PredictorConstant, config.PredictorKalman, config.PredictorARIMA, config.PredictorProphet} {
		b.Run(pred, func(b *testing.B) {
			p, st, in := benchDisagg(b, pred)
			// 50 throughput intervals of a noisy sinusoidal load to warm the predictors.
			for i := 0; i < 50; i++ {
				st.NextThroughputAt = ptr(float64(i+1) * 180)
				st.NextLoadAt = ptr(1e12)
				nr := 2000 + 1500*math.Sin(float64(i)/6) + float64((i*37)%200)
				var err error
				st, _, _, err = p.Decide(st, Input{Now: *st.NextThroughputAt, Workers: counts(4, 4), Capabilities: in.Capabilities, Traffic: traffic(180, nr, 3000, 300)})
				if err != nil {
					b.Fatal(err)
				}
			}
			st.NextThroughputAt, st.NextLoadAt = ptr(51*180.0), ptr(51*180.0)
			in.Now = 51 * 180
			in.Traffic = traffic(180, 2500, 3000, 300)
			b.ReportAllocs()
			for b.Loop() {
				if _, _, _, err := p.Decide(st, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchAhead is a disaggregated ahead planner on the H200 profile (TTFT 200 ms, ITL 10 ms)
// with a budget of budget GPUs, its models bootstrapped from the profile, and its first state.
func benchAhead(b *testing.B, budget int) (*Planner, State) {
	profile, err := perf.LoadProfile("../perf/testdata/profiles/h200-llama3.1-8b-fp8-tp1")
	if err != nil {
		b.Fatal(err)
	}
	p, err := New(slaConfig(func(c *config.Config) {
		c.ScalingPolicy, c.TTFTMs, c.ITLMs, c.MaxGPUBudget = config.PolicyAhead, 200, 10, budget
	}), profile)
	if err != nil {
		b.Fatal(err)
	}
	return p, mustInit(b, p, 0, Bootstrap{PrefillFPMs: perf.PrefillBootstrapFPMs(profile.Prefill), DecodeFPMs: perf.DecodeBootstrapFPMs(profile.Decode)})
}

// benchTicks runs the planner's 5 s ticks from 5 s to until on input's observations.
func benchTicks(b *testing.B, p *Planner, st State, until float64, input func(now float64) Input) State {
	var err error
	for now := 5.0; now <= until; now += 5 {
		if st, _, _, err = p.Decide(st, input(now)); err != nil {
			b.Fatal(err)
		}
	}
	return st
}

// BenchmarkDecideAheadTick is one tick of the ahead policy after ten minutes of steady
// traffic at 20 req/s, its decode batch floored by 16 batches the engines ran within the ITL
// SLA: within the profile at the sizing context (one profile batch search), or beyond it, at
// longer contexts (the profile searched at each point's context too, once a tick: shownBeat).
func BenchmarkDecideAheadTick(b *testing.B) {
	p, warm := benchAhead(b, 32)
	input := func(now float64) Input {
		in := aheadInput(now, 4, 4, 4, 4, 20)
		for i := range 4 {
			in.FPM.Decode = append(in.FPM.Decode, perf.FPM{Version: perf.FPMVersion, WorkerID: fmt.Sprintf("d%d", i), WallTime: 0.008,
				Scheduled: perf.ScheduledRequests{NumDecodeRequests: 12, SumDecodeKVTokens: 12 * 3150}})
		}
		return in
	}
	warm = benchTicks(b, p, warm, 600, input)
	for _, tc := range []struct {
		name    string
		n, each float64 // the shown batches: n requests and up to 16 more, of each tokens
	}{
		{"shown within the profile", 12, 3150},
		{"shown beyond the profile", 100, 8000},
	} {
		b.Run(tc.name, func(b *testing.B) {
			st := warm
			st.Ahead = warm.Ahead.clone()
			st.Ahead.DecodeShown = nil
			for i := range aheadShownPoints {
				n := tc.n + float64(i)
				st.Ahead.DecodeShown = append(st.Ahead.DecodeShown, ShownBatch{N: n, KV: n * tc.each * (1 - float64(i)/40)})
			}
			in := input(605)
			b.ReportAllocs()
			for b.Loop() {
				if _, _, _, err := p.Decide(st, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecideAheadAggTick is one tick of the ahead policy sizing an aggregated pool on the
// profile's pass times (the SLA batch counted up from 1, the batch at the rate per engine
// counted up to where it is served) after ten minutes of steady traffic: at 20 req/s on 6
// engines within a 10 ms ITL SLA; at 200 req/s on 2 (the batch the engines would run is
// searched up to the largest they hold); and at 20 req/s within a 50 ms ITL SLA (a large SLA
// batch, counted up to).
func BenchmarkDecideAheadAggTick(b *testing.B) {
	profile, err := perf.LoadProfile("../perf/testdata/profiles/h200-llama3.1-8b-fp8-tp1")
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		itl   float64
		ready int
		rate  float64
	}{
		{"steady", 10, 6, 20},
		{"overloaded", 10, 2, 200},
		{"loose ITL", 50, 6, 20},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p, err := New(slaConfig(func(c *config.Config) {
				c.Mode, c.ScalingPolicy, c.TTFTMs, c.ITLMs, c.MaxGPUBudget = config.ModeAgg, config.PolicyAhead, 200, tc.itl, 32
			}), profile)
			if err != nil {
				b.Fatal(err)
			}
			st := mustInit(b, p, 0, ProfileBootstrap(profile, config.ModeAgg))
			st = benchTicks(b, p, st, 600, func(now float64) Input { return aheadInput(now, 0, tc.ready, 0, tc.ready, tc.rate) })
			in := aheadInput(605, 0, tc.ready, 0, tc.ready, tc.rate)
			b.ReportAllocs()
			for b.Loop() {
				if _, _, _, err := p.Decide(st, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPrefillEngines is the prefill pool's M/G/c search at its longest: a load of 4,000
// engines' worth with a slack a millionth of the service time, which needs about 4,135
// engines, so the search walks every count from the load to the 4,096 it may reach.
func BenchmarkPrefillEngines(b *testing.B) {
	for b.Loop() {
		prefillEngines(4000/0.062, 0.062, 0.062e-6, 1, aheadWaitMissShare, aheadMaxEngines)
	}
}

// BenchmarkDecideAheadTickLargePool is one tick of the ahead policy on 2,000 prefill and 2,000
// decode engines, each reporting an FPM, at 20,000 req/s: what grows with the pool (sorting
// and reading the FPMs, the M/G/c search).
func BenchmarkDecideAheadTickLargePool(b *testing.B) {
	p, st := benchAhead(b, 8192)
	const engines = 2000
	input := func(now float64) Input {
		in := aheadInput(now, engines, engines, engines, engines, 20000)
		for i := range engines {
			in.FPM.Prefill = append(in.FPM.Prefill, perf.FPM{Version: perf.FPMVersion, WorkerID: fmt.Sprintf("p%d", i), WallTime: 0.06,
				Scheduled: perf.ScheduledRequests{NumPrefillRequests: 1, SumPrefillTokens: 3000},
				Queued:    perf.QueuedRequests{NumPrefillRequests: 2, SumPrefillTokens: 6000}})
			in.FPM.Decode = append(in.FPM.Decode, perf.FPM{Version: perf.FPMVersion, WorkerID: fmt.Sprintf("d%d", i), WallTime: 0.008,
				Scheduled: perf.ScheduledRequests{NumDecodeRequests: 12, SumDecodeKVTokens: 12 * 3150}})
		}
		return in
	}
	st = benchTicks(b, p, st, 300, input)
	in := input(305)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := p.Decide(st, in); err != nil {
			b.Fatal(err)
		}
	}
}
