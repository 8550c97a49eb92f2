package evaluate

import (
	"errors"
	"fmt"
	"math"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/predict"
	"github.com/llmplanner/planner/sim/engine"
)

// LowerBound is a closed-form lower bound on the GPU-hours any deployment needs to serve
// the requests arriving at or after from within the SLAs, from the perf model of the
// profile: every prompt computed at the engine's best prefill throughput (tokens per second
// over chunk sizes up to max_num_batched_tokens) and every request decoded at the highest
// request rate a decode engine sustains for its shape at the ITL SLA (the perf model's
// capacity search), with no queueing, no idle engine, no startup and 1 GPU per engine; and
// never less than one engine per pool from from to the last arrival (a disaggregated
// deployment keeps one of each). No schedule can use fewer engine-seconds; the greedy
// oracle is not such a minimum. In mode agg the same engines do both: a pass's prefill and
// decode parts run in sequence (the mocker's pass time is their sum), so the bound is the
// sum of the prefill and decode engine-seconds, never less than one engine.
func LowerBound(reqs []predict.Request, prof *perf.Profile, itlSLAMs, from float64, mode config.Mode) (float64, error) {
	if prof == nil || prof.Prefill == nil || prof.Decode == nil {
		return 0, errors.New("evaluate: lower bound: the profile needs prefill and decode data")
	}
	cfg := config.Default()
	opts := perf.RegressionOptions{MaxSamples: cfg.MaxNumFPMSamples, MinObservations: cfg.LoadMinObservations, BucketCount: cfg.FPMSampleBucketSize}
	pm, err := perf.NewEngineModel(perf.KindPrefill, opts)
	if err != nil {
		return 0, err
	}
	pm.Bootstrap(perf.PrefillBootstrapFPMs(prof.Prefill))
	dm, err := perf.NewEngineModel(perf.KindDecode, opts)
	if err != nil {
		return 0, err
	}
	dm.Bootstrap(perf.DecodeBootstrapFPMs(prof.Decode))

	limits, err := engineLimits(prof)
	if err != nil {
		return 0, err
	}
	// The best prefill throughput: tokens per second over chunk sizes.
	var best float64
	for tokens := int64(256); tokens <= limits.MaxNumBatchedTokens; tokens += 256 {
		t, ok := pm.PrefillTime(tokens, limits)
		if ok && t > 0 {
			best = math.Max(best, float64(tokens)/t)
		}
	}
	if best <= 0 {
		return 0, errors.New("evaluate: lower bound: the prefill model is not ready")
	}
	// Decode: engine-seconds per request by shape, ISL and OSL rounded up to buckets.
	type shape struct{ isl, osl int }
	perRequest := map[shape]float64{}
	var prefillS, decodeS, last float64
	for _, r := range reqs {
		if r.Arrival < from {
			continue
		}
		last = math.Max(last, r.Arrival)
		prefillS += float64(r.InputTokens) / best
		if r.OutputTokens <= 1 {
			continue
		}
		// Rounded down: a shorter request never costs more, so the bound stays a bound.
		k := shape{max(1, r.InputTokens/256*256), max(1, r.OutputTokens/16*16)}
		s, ok := perRequest[k]
		if !ok {
			c, ok := dm.FindCapacity(perf.CapacityRequest{ISL: float64(k.isl), OSL: float64(k.osl), ITLSLAMs: itlSLAMs}, limits)
			if !ok || !(c.RPS > 0) {
				return 0, fmt.Errorf("evaluate: lower bound: no decode capacity for ISL %d OSL %d", k.isl, k.osl)
			}
			s = 1 / c.RPS
			perRequest[k] = s
		}
		decodeS += s
	}
	span := math.Max(0, last-from)
	if mode == config.ModeAgg {
		return math.Max(prefillS+decodeS, span) / 3600, nil
	}
	return (math.Max(prefillS, span) + math.Max(decodeS, span)) / 3600, nil
}

// engineLimits are the simulated engines' limits (sim/engine's defaults, the KV capacity
// of the profile's timing model).
func engineLimits(prof *perf.Profile) (perf.Limits, error) {
	timing, err := engine.NewProfileTiming(prof)
	if err != nil {
		return perf.Limits{}, fmt.Errorf("evaluate: lower bound: %w", err)
	}
	c := engine.DefaultConfig(engine.RoleDecode)
	kv := int64(engine.DefaultNumGPUBlocks * c.BlockSize)
	if k := timing.KVCapacityTokens(); k > 0 {
		kv = int64(k)
	}
	return perf.Limits{MaxNumBatchedTokens: int64(c.MaxNumBatchedTokens), MaxNumSeqs: int64(c.MaxNumSeqs), MaxKVTokens: kv}, nil
}
