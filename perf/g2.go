package perf

import (
	"math"
)

// MaxKVHitRateDiscount caps the prefix-cache discount of prefill work (Dynamo's
// MAX_KV_HIT_RATE_DISCOUNT).
const MaxKVHitRateDiscount = 0.95

// ClampKVHitRate is Dynamo's _clamp_kv_hit_rate: unknown (NaN) or non-finite is 0, else the
// rate clamped to [0, 0.95].
func ClampKVHitRate(r float64) float64 {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return 0
	}
	return math.Min(MaxKVHitRateDiscount, math.Max(0, r))
}

// The G2 models below are Dynamo's "state machine" generation regression models
// (core/perf_model/{prefill,decode,agg}.py). The planner's decisions use the G3 query layer
// (EngineModel); these are kept for Dynamo's G2 formulas (reference §3.4, §4.2, §4.4) and
// its test vectors.

// PrefillRegressionModel predicts one prefill iteration's wall time from its scheduled
// prefill tokens and simulates chunked prefill to estimate TTFT.
type PrefillRegressionModel struct {
	Reg           *Regression
	window        int
	avgISL        MovingAverage
	avgNumPrefill MovingAverage
}

// NewPrefillRegressionModel returns an empty G2 prefill model.
func NewPrefillRegressionModel(opts RegressionOptions) (*PrefillRegressionModel, error) {
	reg, err := NewRegression(1, -1, opts)
	if err != nil {
		return nil, err
	}
	return &PrefillRegressionModel{Reg: reg, window: opts.MaxSamples}, nil
}

// Observe updates the moving averages and, unless f is an idle heartbeat, adds a sample.
func (m *PrefillRegressionModel) Observe(f *FPM) {
	s := f.Scheduled
	if s.NumPrefillRequests > 0 {
		m.avgISL.Add(float64(s.SumPrefillTokens)/float64(s.NumPrefillRequests), m.window)
	}
	m.avgNumPrefill.Add(float64(s.NumPrefillRequests), m.window)
	if f.IsHeartbeat() {
		return
	}
	m.Reg.Add([2]float64{float64(s.SumPrefillTokens)}, f.WallTime)
}

// AvgISL is the moving average of scheduled prefill tokens per prefill request.
func (m *PrefillRegressionModel) AvgISL() float64 { return m.avgISL.Mean() }

// EstimateNextTTFT simulates the queue ahead of the next request: (queued + avg ISL) tokens,
// discounted by the prefix-cache hit rate, processed in chunks of mbt tokens; it returns the
// summed predicted wall time in seconds, or ok=false when the model is not ready.
func (m *PrefillRegressionModel) EstimateNextTTFT(queuedTokens float64, mbt int64, kvHitRate float64) (float64, bool) {
	return chunkedTTFT(m.Reg, queuedTokens+m.AvgISL(), mbt, kvHitRate, func(chunk float64) [2]float64 { return [2]float64{chunk} })
}

func chunkedTTFT(reg *Regression, tokens float64, mbt int64, kvHitRate float64, features func(chunk float64) [2]float64) (float64, bool) {
	if ok, _ := reg.Fit(); !ok || mbt <= 0 {
		return 0, false
	}
	total := tokens * (1 - ClampKVHitRate(kvHitRate))
	if total <= 0 {
		return 0, true
	}
	n := int(math.Ceil(total / float64(mbt)))
	var t float64
	remaining := total
	for i := 0; i < n; i++ {
		chunk := math.Min(remaining, float64(mbt))
		wt, _ := reg.Predict(features(chunk))
		t += wt
		remaining -= chunk
	}
	return t, true
}

// FindBestEnginePrefillRPS is Dynamo's G2 prefill capacity: the predicted wall time of one
// prefill of isl tokens (chunked by mbt when longer), engine rps = 1/wall time. It returns
// the rate and the predicted TTFT in ms; a rate of 0 means the model is not ready or the
// input is invalid. A TTFT above ttftSLAMs is still returned (the caller sizes from it).
func (m *PrefillRegressionModel) FindBestEnginePrefillRPS(ttftSLAMs, isl float64, mbt int64) (rps, ttftMs float64) {
	if ok, _ := m.Reg.Fit(); !ok || isl <= 0 {
		return 0, 0
	}
	var wt float64
	if mbt > 0 && isl > float64(mbt) {
		chunks := math.Ceil(isl / float64(mbt))
		remainder := isl - (chunks-1)*float64(mbt)
		full, _ := m.Reg.Predict([2]float64{float64(mbt)})
		tail, _ := m.Reg.Predict([2]float64{remainder})
		wt = (chunks-1)*full + tail
	} else {
		wt, _ = m.Reg.Predict([2]float64{isl})
	}
	return 1 / wt, wt * 1000
}

// DecodeRegressionModel predicts one decode iteration's wall time from
// [num_decode_requests, sum_decode_kv_tokens]; a negative request coefficient is relaxed.
type DecodeRegressionModel struct {
	Reg           *Regression
	window        int
	avgDecodeLen  MovingAverage
	avgNumDecode  MovingAverage
	maxObservedKV float64
}

// NewDecodeRegressionModel returns an empty G2 decode model.
func NewDecodeRegressionModel(opts RegressionOptions) (*DecodeRegressionModel, error) {
	reg, err := NewRegression(2, 0, opts)
	if err != nil {
		return nil, err
	}
	return &DecodeRegressionModel{Reg: reg, window: opts.MaxSamples}, nil
}

// Observe updates the moving averages and the largest KV load seen, and adds a sample unless
// f is an idle heartbeat.
func (m *DecodeRegressionModel) Observe(f *FPM) {
	s := f.Scheduled
	if s.NumDecodeRequests > 0 {
		m.avgDecodeLen.Add(float64(s.SumDecodeKVTokens)/float64(s.NumDecodeRequests), m.window)
	}
	m.avgNumDecode.Add(float64(s.NumDecodeRequests), m.window)
	m.maxObservedKV = math.Max(m.maxObservedKV, float64(s.SumDecodeKVTokens))
	if f.IsHeartbeat() {
		return
	}
	m.Reg.Add([2]float64{float64(s.NumDecodeRequests), float64(s.SumDecodeKVTokens)}, f.WallTime)
}

// AvgDecodeLength is the moving average of KV tokens per decode request.
func (m *DecodeRegressionModel) AvgDecodeLength() float64 { return m.avgDecodeLen.Mean() }

// EstimateNextITL predicts the next decode iteration (seconds) with one more request of the
// average length on top of the scheduled and queued KV.
func (m *DecodeRegressionModel) EstimateNextITL(scheduledKV, queuedKV float64) (float64, bool) {
	return m.Reg.Predict([2]float64{m.avgNumDecode.Mean() + 1, scheduledKV + queuedKV + m.AvgDecodeLength()})
}

// FindBestEngineDecodeRPS is Dynamo's G2 decode capacity: the largest batch (binary search
// up to the KV and sequence caps) whose predicted iteration fits the ITL target at the given
// context length; rps = batch / (osl × wall time). When even batch 1 misses the target, batch
// 1 is returned. A rate of 0 means not ready or invalid input.
func (m *DecodeRegressionModel) FindBestEngineDecodeRPS(itlMs, contextLength, osl float64, maxKVTokens, maxNumSeqs int64) (rps, actualITLMs float64) {
	if ok, _ := m.Reg.Fit(); !ok || contextLength <= 0 || osl <= 0 || itlMs <= 0 {
		return 0, 0
	}
	var kvCap int64
	switch {
	case maxKVTokens > 0:
		kvCap = max(1, int64(float64(maxKVTokens)/contextLength))
	case m.maxObservedKV > 0:
		kvCap = max(1, int64(m.maxObservedKV/contextLength))
	default:
		kvCap = 256
	}
	seqCap := kvCap
	if maxNumSeqs > 0 {
		seqCap = maxNumSeqs
	}
	lo, hi := int64(1), max(1, min(kvCap, seqCap))
	bestBS := int64(1)
	bestWT, _ := m.Reg.Predict([2]float64{1, contextLength})
	if bestWT*1000 > itlMs {
		return 1 / (osl * bestWT), bestWT * 1000
	}
	for lo <= hi {
		mid := (lo + hi) / 2
		wt, _ := m.Reg.Predict([2]float64{float64(mid), float64(mid) * contextLength})
		if wt*1000 <= itlMs {
			bestBS, bestWT = mid, wt
			lo = mid + 1
		} else {
			hi = mid - 1
		}
	}
	return float64(bestBS) / (osl * bestWT), bestWT * 1000
}

// AggRegressionModel predicts an aggregated engine's iteration from
// [sum_prefill_tokens, sum_decode_kv_tokens] (chunked prefill piggybacked on decode).
type AggRegressionModel struct {
	Reg              *Regression
	window           int
	avgISL           MovingAverage
	avgDecodeLen     MovingAverage
	avgPrefillTokens MovingAverage
	avgNumPrefill    MovingAverage
	avgNumDecode     MovingAverage
}

// NewAggRegressionModel returns an empty G2 aggregated model.
func NewAggRegressionModel(opts RegressionOptions) (*AggRegressionModel, error) {
	reg, err := NewRegression(2, -1, opts)
	if err != nil {
		return nil, err
	}
	return &AggRegressionModel{Reg: reg, window: opts.MaxSamples}, nil
}

// Observe updates the moving averages and adds a sample unless f is an idle heartbeat.
func (m *AggRegressionModel) Observe(f *FPM) {
	s := f.Scheduled
	if s.NumPrefillRequests > 0 {
		m.avgISL.Add(float64(s.SumPrefillTokens)/float64(s.NumPrefillRequests), m.window)
	}
	if s.NumDecodeRequests > 0 {
		m.avgDecodeLen.Add(float64(s.SumDecodeKVTokens)/float64(s.NumDecodeRequests), m.window)
	}
	m.avgPrefillTokens.Add(float64(s.SumPrefillTokens), m.window)
	m.avgNumPrefill.Add(float64(s.NumPrefillRequests), m.window)
	m.avgNumDecode.Add(float64(s.NumDecodeRequests), m.window)
	if f.IsHeartbeat() {
		return
	}
	m.Reg.Add([2]float64{float64(s.SumPrefillTokens), float64(s.SumDecodeKVTokens)}, f.WallTime)
}

// EstimateNextTTFT simulates chunked prefill of (queued + avg ISL) tokens, discounted by the
// prefix-cache hit rate, each chunk sharing the iteration with the current decode KV load.
func (m *AggRegressionModel) EstimateNextTTFT(queuedTokens float64, mbt int64, currentDecodeKV float64, kvHitRate float64) (float64, bool) {
	return chunkedTTFT(m.Reg, queuedTokens+m.avgISL.Mean(), mbt, kvHitRate, func(chunk float64) [2]float64 {
		return [2]float64{chunk, currentDecodeKV}
	})
}

// EstimateNextITL predicts the next iteration with the typical piggybacked prefill.
func (m *AggRegressionModel) EstimateNextITL(scheduledKV, queuedKV float64) (float64, bool) {
	return m.Reg.Predict([2]float64{m.avgPrefillTokens.Mean(), scheduledKV + queuedKV + m.avgDecodeLen.Mean()})
}

// FindBestEngineAggRPS is Dynamo's G2 aggregated capacity: sweep the decode batch from 1 up
// to the smallest of the KV cap, the sequence cap and the prefill/decode balance point, and
// keep the last batch whose ITL and TTFT both meet their targets. Returns (rps, ttft ms,
// itl ms); a rate of 0 means not ready or invalid input.
func (m *AggRegressionModel) FindBestEngineAggRPS(isl, osl float64, mbt int64, ttftSLAMs, itlSLAMs float64, maxKVTokens, maxNumSeqs int64, kvHitRate float64) (rps, ttftMs, itlMs float64) {
	if ok, _ := m.Reg.Fit(); !ok || isl <= 0 || osl <= 0 || mbt <= 0 {
		return 0, 0, 0
	}
	effectiveISL := isl * (1 - ClampKVHitRate(kvHitRate))
	avgCtx := isl + osl/2
	kvCap := int64(1024)
	if maxKVTokens > 0 {
		kvCap = max(1, int64(float64(maxKVTokens)/math.Max(1, avgCtx)))
	}
	seqCap := kvCap
	if maxNumSeqs > 0 {
		seqCap = maxNumSeqs
	}
	hardCap := min(kvCap, seqCap, mbt-1)
	balanced := func(x int64) bool {
		budget := mbt - x
		return budget > 0 && isl/float64(budget) <= osl
	}
	lo, hi := int64(1), max(1, hardCap)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if balanced(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	for bs := int64(1); bs <= lo; bs++ {
		decodeKV := float64(bs) * avgCtx
		perIter := math.Min(float64(bs)*effectiveISL/math.Max(1, osl), float64(mbt))
		wt, _ := m.Reg.Predict([2]float64{perIter, decodeKV})
		itl := wt * 1000
		var ttft float64
		if t, ok := m.EstimateNextTTFT(float64(int64(perIter)), mbt, float64(int64(decodeKV)), 0); ok {
			ttft = t * 1000
		}
		if itl > itlSLAMs || ttft > ttftSLAMs {
			if bs == 1 {
				rps, ttftMs, itlMs = 1/(osl*wt), ttft, itl
			}
			break
		}
		rps, ttftMs, itlMs = float64(bs)/(osl*wt), ttft, itl
	}
	return rps, ttftMs, itlMs
}
