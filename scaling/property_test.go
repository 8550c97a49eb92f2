package scaling

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
	"github.com/stretchr/testify/require"
)

// randomConfig draws a valid configuration whose GPU ceiling (when enabled) can hold the
// minimum endpoints.
func randomConfig(rng *rand.Rand, pGPU, dGPU int) config.Config {
	c := config.Default()
	c.Environment = config.EnvNoop
	c.Mode = []config.Mode{config.ModeDisagg, config.ModePrefill, config.ModeDecode, config.ModeAgg}[rng.IntN(4)]
	c.OptimizationTarget = []config.Target{config.TargetSLA, config.TargetThroughput, config.TargetLatency, config.TargetLoad}[rng.IntN(4)]
	c.LoadPredictor = []string{config.PredictorConstant, config.PredictorKalman}[rng.IntN(2)]
	c.MinEndpoint = rng.IntN(3)
	if c.Mode == config.ModeDisagg || c.Mode == config.ModePrefill {
		if rng.IntN(3) == 0 {
			c.PrefillMinEndpoint = ptr(1 + rng.IntN(3))
		}
	}
	if c.Mode == config.ModeDisagg || c.Mode == config.ModeDecode {
		if rng.IntN(3) == 0 {
			c.DecodeMinEndpoint = ptr(1 + rng.IntN(3))
		}
	}
	c.PrefillEngineNumGPU, c.DecodeEngineNumGPU = ptr(pGPU), ptr(dGPU)
	footprint := 0
	if c.HasPrefill() {
		footprint += c.PrefillMinEndpoints() * pGPU
	}
	if c.HasDecode() {
		footprint += c.DecodeMinEndpoints() * dGPU
	}
	c.MaxGPUBudget = -1
	if rng.IntN(4) != 0 {
		c.MaxGPUBudget = footprint + rng.IntN(40)
	}
	c.MinGPUBudget = -1
	if rng.IntN(3) == 0 {
		hi := 60
		if c.MaxGPUBudget >= 0 {
			hi = c.MaxGPUBudget
		}
		c.MinGPUBudget = rng.IntN(hi + 1)
	}
	c.MaxThroughputScalingReplicas = 1 + rng.IntN(8)
	c.LoadScalingDownSensitivity = rng.IntN(101)
	if c.OptimizationTarget == config.TargetSLA {
		c.EnableThroughputScaling = rng.IntN(3) != 0
		c.EnableLoadScaling = !c.EnableThroughputScaling || rng.IntN(2) == 0
		c.TTFTMs = 20 + rng.Float64()*1000
		c.ITLMs = 5 + rng.Float64()*100
		c.ThroughputAdjustmentIntervalSeconds = 30 * (1 + rng.IntN(6))
		if rng.IntN(4) == 0 && c.Mode != config.ModeAgg {
			c.ThroughputSizing = config.SizingInterpolation
		}
	}
	if c.OptimizationTarget == config.TargetLoad {
		c.PrefillScaleUpQueueTokens, c.PrefillScaleDownQueueTokens = ptr(2000+rng.IntN(10000)), ptr(rng.IntN(2000))
		c.DecodeScaleUpKVRate, c.DecodeScaleDownKVRate = ptr(50+rng.Float64()*50), ptr(rng.Float64()*50)
		c.DecodeScaleDownHoldIntervals, c.PrefillScaleUpTrendIntervals = rng.IntN(4), rng.IntN(4)
	}
	c.ScaleDownStabilizationSeconds = []int{0, 0, 30, 300}[rng.IntN(4)]
	c.Advisory = rng.IntN(5) == 0
	return c
}

func randomFPMs(rng *rand.Rand, prefix string, n int, dp int) []perf.FPM {
	var out []perf.FPM
	for w := 0; w < n; w++ {
		for r := 0; r < dp; r++ {
			f := perf.FPM{Version: perf.FPMVersion, WorkerID: fmt.Sprintf("%s%d", prefix, w), DPRank: int64(r)}
			if rng.IntN(6) != 0 {
				f.WallTime = rng.Float64() * 0.2
				f.Scheduled = perf.ScheduledRequests{NumPrefillRequests: int64(rng.IntN(4)), SumPrefillTokens: int64(rng.IntN(16000)),
					NumDecodeRequests: int64(rng.IntN(200)), SumDecodeKVTokens: int64(rng.IntN(400000))}
				f.Queued = perf.QueuedRequests{NumPrefillRequests: int64(rng.IntN(20)), SumPrefillTokens: int64(rng.IntN(100000)),
					NumDecodeRequests: int64(rng.IntN(5)), SumDecodeKVTokens: int64(rng.IntN(50000))}
			}
			out = append(out, f)
		}
	}
	return out
}

func randomCaps(rng *rand.Rand, gpu int) *EngineCapabilities {
	if rng.IntN(8) == 0 {
		return nil
	}
	c := &EngineCapabilities{NumGPU: gpu, MaxNumBatchedTokens: int64(1024 * (1 + rng.IntN(16))), MaxNumSeqs: int64(1 + rng.IntN(512)),
		ContextLength: int64(4096 * (1 + rng.IntN(8))), MaxKVTokens: int64(50000 + rng.IntN(2_000_000))}
	if rng.IntN(3) == 0 {
		c.SpeculativeNextn = rng.IntN(4)
	}
	return c
}

// TestDecisionsRespectEndpointsAndBudget drives 10,000 random configurations, states and
// observations through Decide: every emitted target is at least its pool's minimum
// endpoint, and the allocation it leads to never exceeds a satisfiable GPU ceiling.
func TestDecisionsRespectEndpointsAndBudget(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 2026))
	profile, err := perf.LoadProfile("../perf/testdata/profiles/h200-llama3.1-8b-fp8-tp1")
	require.NoError(t, err)
	boot := Bootstrap{
		PrefillFPMs: perf.PrefillBootstrapFPMs(profile.Prefill),
		DecodeFPMs:  perf.DecodeBootstrapFPMs(profile.Decode),
		AggFPMs:     constantAggFPMs(0.03),
	}
	const runs = 10000
	decisions, holds := 0, 0
	for i := 0; i < runs; i++ {
		pGPU, dGPU := 1+rng.IntN(4), 1+rng.IntN(4)
		cfg := randomConfig(rng, pGPU, dGPU)
		var prof *perf.Profile
		if cfg.ThroughputSizing == config.SizingInterpolation {
			prof = profile // building the decode grid takes ~1 ms: only where it is used
		}
		p, err := New(cfg, prof)
		require.NoError(t, err, "run %d: %+v", i, cfg)
		st, err := p.Init(0, boot)
		require.NoError(t, err)
		st.LowerBoundPrefill, st.LowerBoundDecode = rng.IntN(30), rng.IntN(30)
		readyP, readyD := rng.IntN(25), rng.IntN(25)
		if !cfg.HasPrefill() {
			readyP = 0
		}
		in := Input{Now: p.NextTick(st).At, Workers: counts(readyP, readyD)}
		if w := cfg.ScaleDownStabilizationSeconds; w > 0 && rng.IntN(4) != 0 { // earlier recommendations in the window
			at := in.Now - rng.Float64()*float64(w)
			st.StabilizationPrefill = []Recommendation{{At: at, Replicas: rng.IntN(30)}}
			st.StabilizationDecode = []Recommendation{{At: at, Replicas: rng.IntN(30)}}
		}
		if rng.IntN(2) == 0 { // the throughput loop is due too
			st.NextThroughputAt = ptr(in.Now)
			in.Traffic = traffic(float64(cfg.ThroughputAdjustmentIntervalSeconds), float64(rng.IntN(100000)), float64(100+rng.IntN(16000)), float64(1+rng.IntN(2000)))
			in.Traffic.TTFTMs, in.Traffic.ITLMs, in.Traffic.RequestDurationS = ptr(rng.Float64()*500), ptr(rng.Float64()*50), ptr(rng.Float64()*60)
			in.Traffic.KVHitRate, in.Traffic.AcceptLength = ptr(rng.Float64()), ptr(1+rng.Float64()*3)
			if rng.IntN(10) == 0 {
				in.Traffic.NumReq = nil
			}
		}
		if rng.IntN(10) == 0 {
			in.Workers.ExpectedDecode = ptr(readyD + 1)
		}
		dp := 1 + rng.IntN(2)
		in.FPM = &FPMObservations{Prefill: randomFPMs(rng, "p", readyP, dp), Decode: randomFPMs(rng, "d", readyD, dp)}
		if rng.IntN(10) == 0 { // a publisher missing: worker count mismatch
			in.FPM.Decode = in.FPM.Decode[:len(in.FPM.Decode)/2]
		}
		in.Capabilities = WorkerCapabilities{Prefill: randomCaps(rng, pGPU), Decode: randomCaps(rng, dGPU)}

		_, dec, diag, err := p.Decide(st, in)
		require.NoError(t, err, "run %d", i)
		if dec.Empty() {
			holds++
			continue
		}
		decisions++
		finalP, finalD := readyP, readyD
		if dec.Prefill != nil {
			finalP = *dec.Prefill
			require.GreaterOrEqual(t, finalP, cfg.PrefillMinEndpoints(), "run %d: prefill target below its minimum: %+v", i, diag)
		}
		if dec.Decode != nil {
			finalD = *dec.Decode
			require.GreaterOrEqual(t, finalD, cfg.DecodeMinEndpoints(), "run %d: decode target below its minimum: %+v", i, diag)
		}
		total := 0
		if cfg.HasPrefill() {
			total += finalP * pGPU
		}
		if cfg.HasDecode() {
			total += finalD * dGPU
		}
		if cfg.MaxGPUBudget >= 0 {
			require.LessOrEqual(t, total, cfg.MaxGPUBudget, "run %d: allocation (%d,%d) over the GPU ceiling; cfg %+v diag %+v", i, finalP, finalD, cfg, diag)
		}
	}
	t.Logf("%d random ticks: %d decisions, %d holds", runs, decisions, holds)
	require.Greater(t, decisions, runs/10, "the generator must exercise decisions, not only holds")
}
