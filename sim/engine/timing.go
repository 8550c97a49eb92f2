package engine

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/llmplanner/planner/perf"
)

// PrefillBatch describes the prefill part of a pass: every request that computes prompt
// tokens in it (new prompts, chunk continuations and recomputes after preemption).
type PrefillBatch struct {
	// NumRequests is the number of requests computing prompt tokens.
	NumRequests int
	// NewTokens is the number of tokens computed in the pass (the sum of the chunks).
	NewTokens int
	// CachedTokens is the number of those requests' tokens computed by earlier passes
	// (earlier chunks), which the new tokens attend to.
	CachedTokens int
}

// DecodeBatch describes the decode part of a pass: the requests generating one token.
type DecodeBatch struct {
	// NumRequests is the number of decoding requests.
	NumRequests int
	// SumContext is the sum of their sequence lengths (prompt plus tokens generated so
	// far); SumContext/NumRequests is the mean context length.
	SumContext int
	// ActiveKVTokens is the exact number of tokens in the KV cache after the pass, over
	// all running requests (decoding or prefilling).
	ActiveKVTokens int
	// ActiveBlocks is the number of KV blocks allocated to running requests.
	ActiveBlocks int
	// TotalBlocks is the engine's KV capacity in blocks.
	TotalBlocks int
	// BlockSize is the KV block size in tokens.
	BlockSize int
}

// Timing is an engine's pass-time model. Both methods return milliseconds at speedup 1
// and are only called with NumRequests ≥ 1. Implementations must be pure (the same batch
// gives the same time) and should not allocate.
type Timing interface {
	// PrefillMs is the time of the prefill part of a pass.
	PrefillMs(b PrefillBatch) float64
	// DecodeMs is the time of the decode part of a pass.
	DecodeMs(b DecodeBatch) float64
}

// KVCapacity is implemented by timing models that know the engine's KV capacity; New uses
// it when Config.NumGPUBlocks is 0.
type KVCapacity interface {
	// KVCapacityTokens is the KV cache capacity of one engine in tokens.
	KVCapacityTokens() int
}

// MinDecodeMs is the floor of a decode part's time, as in the mocker.
const MinDecodeMs = 1.0

// ProfileTiming is the pass-time model of a measured pre-deployment profile (the mocker's
// interpolated model, §1.3 (b)).
//
// Prefill: TTFT(x) is the profile's TTFT-versus-ISL curve, interpolated linearly between
// the profiled points and extrapolated linearly beyond them along the end segments (what
// the mocker's interpolated model does), never below 0. A pass whose prefill requests
// compute N new tokens on top of C tokens of their earlier chunks costs
//
//	TTFT(N)              if C = 0,
//	TTFT(C+N) − TTFT(C)  otherwise (never below 0).
//
// Why: a single request's chunks then telescope, TTFT(c₁) + (TTFT(c₁+c₂) − TTFT(c₁)) + …
// = TTFT(ISL), so one request of a profiled ISL reproduces the profiled TTFT exactly
// whether or not it is chunked, and a chunk costs what its tokens add to a prompt that
// already has C tokens (attention over the earlier chunks included). A batch of several
// new prompts costs TTFT of their total, as in the mocker's interpolated model: one forward
// pass over all the new tokens, paying the fixed per-pass overhead once. With chunk
// continuations in the batch their earlier chunks are treated as the prefix of that one
// long prompt. Linear rather than perf's cubic spline (which the planner's sizing uses)
// because the spline of the H200 profile overshoots and decreases between its last two
// points, which would make a chunk there cost less than nothing; the linear curve is
// non-decreasing wherever the profiled TTFTs are, and it is exact at the profiled points.
//
// Decode: the profile's ITL at (KV usage, mean context length), from perf's direct (off
// the grid) decode interpolation, floored at MinDecodeMs. KV usage is the exact number of
// tokens in the KV cache divided by the profile's max_kv_tokens, the quantity the profile
// was measured against (concurrency × context / max_kv_tokens); blocks are not used, so
// that block rounding (up to 64 tokens a request) does not bias it.
//
// A ProfileTiming is immutable and safe for concurrent use.
type ProfileTiming struct {
	isl, ttft   []float64 // profiled prefill points sorted by ISL
	decode      *perf.DecodeInterpolator
	maxKVTokens int
}

// NewProfileTiming builds the timing model of a profile, which must have both a prefill and
// a decode part.
func NewProfileTiming(p *perf.Profile) (*ProfileTiming, error) {
	if p == nil {
		return nil, errors.New("engine: profile timing: nil profile")
	}
	if p.Prefill == nil || p.Decode == nil {
		return nil, fmt.Errorf("engine: profile timing: profile %q needs both a prefill and a decode part", p.Dir)
	}
	if err := p.Prefill.Validate(); err != nil {
		return nil, fmt.Errorf("engine: profile timing: %w", err)
	}
	di, err := perf.NewDecodeInterpolator(p.Decode)
	if err != nil {
		return nil, fmt.Errorf("engine: profile timing: %w", err)
	}
	idx := make([]int, len(p.Prefill.ISL))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(p.Prefill.ISL[a], p.Prefill.ISL[b]) })
	t := &ProfileTiming{
		isl:         make([]float64, len(idx)),
		ttft:        make([]float64, len(idx)),
		decode:      di,
		maxKVTokens: int(p.Decode.MaxKVTokens),
	}
	for k, i := range idx {
		t.isl[k], t.ttft[k] = p.Prefill.ISL[i], p.Prefill.TTFTMs[i]
	}
	return t, nil
}

// TTFTMs is the profile's TTFT, in milliseconds, of one prompt of isl tokens: linear
// between the profiled points, extrapolated linearly beyond them, never below 0.
func (t *ProfileTiming) TTFTMs(isl float64) float64 {
	n := len(t.isl)
	j, _ := slices.BinarySearch(t.isl, isl) // isl[j-1] < isl <= isl[j]
	j = max(1, min(j, n-1))                 // the segment, the end ones beyond the range
	x0, x1, y0, y1 := t.isl[j-1], t.isl[j], t.ttft[j-1], t.ttft[j]
	return math.Max(0, y0+(y1-y0)*(isl-x0)/(x1-x0))
}

// PrefillMs implements Timing (see the type's documentation for the formula).
func (t *ProfileTiming) PrefillMs(b PrefillBatch) float64 {
	if b.NewTokens <= 0 {
		return 0
	}
	if b.CachedTokens <= 0 {
		return t.TTFTMs(float64(b.NewTokens))
	}
	c := float64(b.CachedTokens)
	return math.Max(0, t.TTFTMs(c+float64(b.NewTokens))-t.TTFTMs(c))
}

// DecodeMs implements Timing: the profile's ITL at the batch's KV usage and mean context,
// floored at MinDecodeMs.
func (t *ProfileTiming) DecodeMs(b DecodeBatch) float64 {
	if b.NumRequests <= 0 {
		return 0
	}
	usage := float64(b.ActiveKVTokens) / float64(t.maxKVTokens)
	ctx := float64(b.SumContext) / float64(b.NumRequests)
	itl, _ := t.decode.At(usage, ctx)
	return math.Max(MinDecodeMs, itl)
}

// KVCapacityTokens implements KVCapacity: the profile's max_kv_tokens.
func (t *ProfileTiming) KVCapacityTokens() int { return t.maxKVTokens }

// PolynomialTiming is the mocker's built-in polynomial pass-time model (§1.3 (a)), which
// its source calls "not scientific" and ties to no model or GPU:
//
//	T          = new prompt tokens in the pass
//	prefill_ms = PrefillA·T² + PrefillB·T + PrefillC            (0 if T = 0)
//	p          = min(1, active blocks × block size / (total blocks × block size))
//	decode_ms  = max(MinDecodeMs, DecodeA·p² + DecodeB·p + DecodeC)
type PolynomialTiming struct {
	// PrefillA, PrefillB and PrefillC are the prefill coefficients (ms/token², ms/token, ms).
	PrefillA, PrefillB, PrefillC float64
	// DecodeA, DecodeB and DecodeC are the decode coefficients of the KV usage fraction (ms).
	DecodeA, DecodeB, DecodeC float64
}

// MockerPolynomial returns the polynomial with the coefficients of the current mocker
// (aisimulate crates/core/src/engine/common/perf_model.rs).
func MockerPolynomial() PolynomialTiming {
	return PolynomialTiming{
		PrefillA: 4.209989e-07, PrefillB: 1.518344e-02, PrefillC: 16.50142,
		DecodeA: -25.74, DecodeB: 54.01, DecodeC: 5.74,
	}
}

// PrefillMs implements Timing.
func (p PolynomialTiming) PrefillMs(b PrefillBatch) float64 {
	if b.NewTokens <= 0 {
		return 0
	}
	t := float64(b.NewTokens)
	return p.PrefillA*t*t + p.PrefillB*t + p.PrefillC
}

// DecodeMs implements Timing.
func (p PolynomialTiming) DecodeMs(b DecodeBatch) float64 {
	if b.NumRequests <= 0 {
		return 0
	}
	u := 0.0
	if b.TotalBlocks > 0 {
		u = math.Min(1, float64(b.ActiveBlocks)/float64(b.TotalBlocks))
	}
	return math.Max(MinDecodeMs, p.DecodeA*u*u+p.DecodeB*u+p.DecodeC)
}

// Efficiencies of the tensor-parallel scaling of TensorParallelTiming.
const (
	// TPPrefillEfficiency is the fraction of the ideal N-fold prefill speed-up a
	// tensor-parallel engine of N GPUs gets (compute-bound, some all-reduce overhead).
	TPPrefillEfficiency = 0.9
	// TPDecodeEfficiency is the fraction of the ideal N-fold decode speed-up at the same
	// KV-cache usage fraction (memory-bound, all-reduce latency on every layer).
	TPDecodeEfficiency = 0.6
)

// TensorParallelTiming is a synthetic, documented scaling of a one-GPU timing model to a
// tensor-parallel engine of TP GPUs, for testing what the profiler picks between
// parallelism options; it is not a measurement of real hardware. With N = TP:
//
//	KV capacity   = N × the base model's (the weights are split, the KV cache grows)
//	prefill_ms    = base prefill_ms(batch) / (N × TPPrefillEfficiency)
//	decode_ms     = base decode_ms(batch at the same KV usage fraction) / (N × TPDecodeEfficiency)
//
// "The same KV usage fraction": the base model sees the batch's KV tokens (and blocks)
// divided by N, i.e. the fraction of its own capacity the batch fills on the larger one.
// So prefill throughput per GPU is 0.9× the base's (a TP1 engine is better per GPU when
// the TTFT target allows it) while decode gets 1.2× the base's throughput per GPU and a
// lower ITL floor.
type TensorParallelTiming struct {
	base Timing
	tp   int
}

// NewTensorParallelTiming scales base to tp GPUs (1 ≤ tp ≤ 64); tp = 1 returns base's
// behaviour unchanged.
func NewTensorParallelTiming(base Timing, tp int) (*TensorParallelTiming, error) {
	if base == nil {
		return nil, errors.New("engine: tensor-parallel timing: nil base timing")
	}
	if tp < 1 || tp > 64 {
		return nil, fmt.Errorf("engine: tensor-parallel timing: tp %d must be in [1, 64]", tp)
	}
	return &TensorParallelTiming{base: base, tp: tp}, nil
}

func (t *TensorParallelTiming) speedup(eff float64) float64 {
	if t.tp == 1 {
		return 1
	}
	return float64(t.tp) * eff
}

// PrefillMs implements Timing.
func (t *TensorParallelTiming) PrefillMs(b PrefillBatch) float64 {
	return t.base.PrefillMs(b) / t.speedup(TPPrefillEfficiency)
}

// DecodeMs implements Timing.
func (t *TensorParallelTiming) DecodeMs(b DecodeBatch) float64 {
	b.ActiveKVTokens /= t.tp
	b.ActiveBlocks /= t.tp
	b.TotalBlocks /= t.tp
	return math.Max(MinDecodeMs, t.base.DecodeMs(b)/t.speedup(TPDecodeEfficiency))
}

// KVCapacityTokens implements KVCapacity: tp × the base's capacity (0 when the base does
// not know its capacity, so the engine uses its default).
func (t *TensorParallelTiming) KVCapacityTokens() int {
	if c, ok := t.base.(KVCapacity); ok {
		return c.KVCapacityTokens() * t.tp
	}
	return 0
}
