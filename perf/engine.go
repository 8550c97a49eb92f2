package perf

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// EngineKind is the worker type an engine model describes.
type EngineKind string

// The engine kinds.
const (
	KindPrefill    EngineKind = "prefill"
	KindDecode     EngineKind = "decode"
	KindAggregated EngineKind = "aggregated"
)

// Default engine limits used when a worker reports capabilities without a value (Dynamo's
// DEFAULT_MAX_NUM_BATCHED_TOKENS, DEFAULT_MAX_NUM_SEQS, DEFAULT_MAX_KV_TOKENS).
const (
	DefaultMaxNumBatchedTokens = 8192
	DefaultMaxNumSeqs          = 512
	DefaultMaxKVTokens         = 2_000_000
)

// MaxCapacitySearchCandidates bounds the batch sizes a capacity search evaluates.
const MaxCapacitySearchCandidates = 128

const u32Max = (1 << 32) - 1

// Limits are an engine's runtime limits. A zero field means "not reported" and takes the
// default above, as Dynamo does when a worker publishes a partial capability set.
type Limits struct {
	MaxNumBatchedTokens int64 `json:"max_num_batched_tokens,omitempty"`
	MaxNumSeqs          int64 `json:"max_num_seqs,omitempty"`
	MaxKVTokens         int64 `json:"max_kv_tokens,omitempty"`
}

// WithDefaults fills unreported limits.
func (l Limits) WithDefaults() Limits {
	if l.MaxNumBatchedTokens <= 0 {
		l.MaxNumBatchedTokens = DefaultMaxNumBatchedTokens
	}
	if l.MaxNumSeqs <= 0 {
		l.MaxNumSeqs = DefaultMaxNumSeqs
	}
	if l.MaxKVTokens <= 0 {
		l.MaxKVTokens = DefaultMaxKVTokens
	}
	return l
}

// EngineModelState is the serialisable content of an EngineModel.
type EngineModelState struct {
	// Regression is the forward-pass model's sample set.
	Regression RegressionState `json:"regression"`
	// AvgISL averages scheduled prefill tokens per prefill request (0 when an iteration has
	// none), for the synthetic next request of TTFT estimates.
	AvgISL MovingAverage `json:"avg_isl"`
	// AvgDecodeLength averages KV tokens per decode request, for ITL estimates.
	AvgDecodeLength MovingAverage `json:"avg_decode_length"`
	// AggNumPrefill and AggPrefillTokens are the typical piggybacked prefill of an
	// aggregated engine, substituted into ITL estimates.
	AggNumPrefill    MovingAverage `json:"agg_num_prefill,omitzero"`
	AggPrefillTokens MovingAverage `json:"agg_prefill_tokens,omitzero"`
}

// EngineModel is the planner's view of one engine pool's performance: Dynamo's G3 query
// layer (core/perf_model/engine_query.py and the planner adapter's next-request synthesis)
// over a forward-pass model. Dynamo takes forward-pass estimates from its AI Configurator
// wheel, whose fallback is an FPM regression; here the forward-pass model is that regression
// (Dynamo's G2 model, reference §6.2): prefill wall time from prefill tokens, decode from
// [decode requests, decode KV tokens], aggregated from [prefill tokens, decode KV tokens].
// Attention-DP ranks are estimated one FPM at a time (Dynamo's rank-local behaviour when no
// AI Configurator model is configured).
type EngineModel struct {
	kind   EngineKind
	window int
	reg    *Regression
	st     EngineModelState
}

// NewEngineModel returns an empty engine model of the given kind.
func NewEngineModel(kind EngineKind, opts RegressionOptions) (*EngineModel, error) {
	return RestoreEngineModel(kind, opts, EngineModelState{})
}

// RestoreEngineModel rebuilds an engine model from its state.
func RestoreEngineModel(kind EngineKind, opts RegressionOptions, st EngineModelState) (*EngineModel, error) {
	ndim, relaxable := 2, -1
	switch kind {
	case KindPrefill:
		ndim = 1
	case KindDecode:
		relaxable = 0 // the request count may go slightly negative under collinearity
	case KindAggregated:
	default:
		return nil, fmt.Errorf("engine model: unknown kind %q", kind)
	}
	reg, err := RestoreRegression(ndim, relaxable, opts, st.Regression)
	if err != nil {
		return nil, fmt.Errorf("engine model %s: %w", kind, err)
	}
	st.Regression = RegressionState{}
	m := &EngineModel{kind: kind, window: opts.MaxSamples, reg: reg, st: EngineModelState{
		AvgISL: st.AvgISL.clone(), AvgDecodeLength: st.AvgDecodeLength.clone(),
		AggNumPrefill: st.AggNumPrefill.clone(), AggPrefillTokens: st.AggPrefillTokens.clone(),
	}}
	for _, avg := range []*MovingAverage{&m.st.AvgISL, &m.st.AvgDecodeLength, &m.st.AggNumPrefill, &m.st.AggPrefillTokens} {
		if over := len(avg.Values) - max(1, m.window); over > 0 {
			avg.Values = avg.Values[over:]
		}
	}
	return m, nil
}

// State returns a deep copy of the model's content.
func (m *EngineModel) State() EngineModelState {
	return EngineModelState{
		Regression:       m.reg.State(),
		AvgISL:           m.st.AvgISL.clone(),
		AvgDecodeLength:  m.st.AvgDecodeLength.clone(),
		AggNumPrefill:    m.st.AggNumPrefill.clone(),
		AggPrefillTokens: m.st.AggPrefillTokens.clone(),
	}
}

// Kind is the engine kind.
func (m *EngineModel) Kind() EngineKind { return m.kind }

// Regression exposes the forward-pass model (for diagnostics and tests).
func (m *EngineModel) Regression() *Regression { return m.reg }

// AvgISL is the average prefill length of recent requests (tokens).
func (m *EngineModel) AvgISL() float64 { return m.st.AvgISL.Mean() }

// AvgDecodeLength is the average KV context of recent decode requests (tokens).
func (m *EngineModel) AvgDecodeLength() float64 { return m.st.AvgDecodeLength.Mean() }

// Ready reports whether the forward-pass model can answer; reason says why not.
func (m *EngineModel) Ready() (bool, string) { return m.reg.Fit() }

// Observe feeds live FPMs (Dynamo's add_observations): FPMs of an unsupported schema version
// are skipped and counted; the others update the next-request averages and, unless they are
// idle heartbeats, become regression samples. The FPMs are taken in (worker_id, dp_rank)
// order whatever the order of the slice.
func (m *EngineModel) Observe(fpms []FPM) (skipped int) {
	order := make([]*FPM, 0, len(fpms))
	for i := range fpms {
		if fpms[i].Version != FPMVersion {
			skipped++
			continue
		}
		order = append(order, &fpms[i])
	}
	slices.SortStableFunc(order, func(a, b *FPM) int {
		return cmp.Or(cmp.Compare(a.WorkerID, b.WorkerID), cmp.Compare(a.DPRank, b.DPRank))
	})
	for _, f := range order {
		m.observeForNextRequest(f)
	}
	for _, f := range order {
		m.tune(f)
	}
	return skipped
}

// Bootstrap feeds benchmark FPMs (from a profile or a worker self-benchmark), each its own
// iteration (Dynamo's load_benchmark_fpms).
func (m *EngineModel) Bootstrap(fpms []FPM) (skipped int) {
	for i := range fpms {
		if fpms[i].Version != FPMVersion {
			skipped++
			continue
		}
		m.observeForNextRequest(&fpms[i])
	}
	for i := range fpms {
		if fpms[i].Version == FPMVersion {
			m.tune(&fpms[i])
		}
	}
	return skipped
}

func (m *EngineModel) observeForNextRequest(f *FPM) {
	s := f.Scheduled
	if s.NumPrefillRequests > 0 {
		m.st.AvgISL.Add(float64(s.SumPrefillTokens)/float64(s.NumPrefillRequests), m.window)
	} else {
		m.st.AvgISL.Add(0, m.window)
	}
	if s.NumDecodeRequests > 0 {
		m.st.AvgDecodeLength.Add(float64(s.SumDecodeKVTokens)/float64(s.NumDecodeRequests), m.window)
	}
}

func (m *EngineModel) tune(f *FPM) {
	s := f.Scheduled
	if m.kind == KindAggregated {
		m.st.AggNumPrefill.Add(float64(max(s.NumPrefillRequests, 0)), m.window)
		m.st.AggPrefillTokens.Add(float64(s.SumPrefillTokens), m.window)
	}
	if f.IsHeartbeat() {
		return
	}
	var x [2]float64
	switch m.kind {
	case KindPrefill:
		x[0] = float64(s.SumPrefillTokens)
	case KindDecode:
		x = [2]float64{float64(s.NumDecodeRequests), float64(s.SumDecodeKVTokens)}
	case KindAggregated:
		x = [2]float64{float64(s.SumPrefillTokens), float64(s.SumDecodeKVTokens)}
	}
	m.reg.Add(x, f.WallTime)
}

// forward estimates one forward pass (seconds) of the given scheduled composition.
func (m *EngineModel) forward(prefillTokens, decodeRequests, decodeKV int64) (float64, bool) {
	switch m.kind {
	case KindPrefill:
		return m.reg.Predict([2]float64{float64(prefillTokens)})
	case KindDecode:
		return m.reg.Predict([2]float64{float64(decodeRequests), float64(decodeKV)})
	default:
		return m.reg.Predict([2]float64{float64(prefillTokens), float64(decodeKV)})
	}
}

// maxCount bounds token and request counts built from floats: far beyond any engine (Dynamo
// rejects counts above 2^32 - 1), and exactly representable, so a float never converts to a
// wrapped negative integer.
const maxCount = 1 << 53

// ceilNonNegative is Dynamo's _ceil_nonnegative (0 for values <= 0 or NaN), saturating at
// maxCount.
func ceilNonNegative(v float64) int64 {
	if !(v > 0) {
		return 0
	}
	if v >= maxCount {
		return maxCount
	}
	return int64(math.Ceil(v))
}

// PrefillQuery parameterises a queued-prefill (TTFT) estimate.
type PrefillQuery struct {
	// Limits are the engine's limits (max_num_batched_tokens is the chunk size).
	Limits Limits
	// KVHitRate discounts prefill work (NaN or 0 for none).
	KVHitRate float64
	// QueueScale multiplies the queued prefill work (N/(N-1) projects a scale-down).
	QueueScale float64
	// DecodeScale multiplies the decode load (aggregated engines).
	DecodeScale float64
	// IncludeQueuedDecode adds the queued decode load to the scheduled one.
	IncludeQueuedDecode bool
	// AddNextRequest adds one request of the average ISL (the request being estimated).
	AddNextRequest bool
}

// NextRequestPrefill is the default query: the next request's TTFT on this engine as loaded.
func NextRequestPrefill(limits Limits, kvHitRate float64) PrefillQuery {
	return PrefillQuery{Limits: limits, KVHitRate: kvHitRate, QueueScale: 1, DecodeScale: 1, AddNextRequest: true}
}

// QueuedPrefillTime estimates the time (seconds) to drain the engine's queued prefill work,
// plus the next request when AddNextRequest is set: Dynamo's estimate_queued_prefill_time.
// The queue is planned in chunks of max_num_batched_tokens, each chunk one forward pass
// (with the engine's decode load for aggregated engines). ok is false when the model is not
// ready or the engine kind has no prefill.
func (m *EngineModel) QueuedPrefillTime(f *FPM, q PrefillQuery) (float64, bool) {
	if m.kind == KindDecode {
		return 0, false
	}
	if ok, _ := m.reg.Fit(); !ok {
		return 0, false
	}
	mbt := q.Limits.WithDefaults().MaxNumBatchedTokens
	// The queued request count only labels the synthetic chunks in Dynamo; the regression's
	// features are token counts, so only the tokens are projected here.
	qt := float64(f.Queued.SumPrefillTokens) * q.QueueScale
	if avg := m.AvgISL(); q.AddNextRequest && avg > 0 {
		qt += avg
	}
	qt *= 1 - ClampKVHitRate(q.KVHitRate)
	dkv := float64(f.Scheduled.SumDecodeKVTokens)
	dr := float64(f.Scheduled.NumDecodeRequests)
	if q.IncludeQueuedDecode {
		dkv += float64(f.Queued.SumDecodeKVTokens)
		dr += float64(f.Queued.NumDecodeRequests)
	}
	tokens := ceilNonNegative(qt)
	decodeRequests, decodeKV := ceilNonNegative(dr*q.DecodeScale), ceilNonNegative(dkv*q.DecodeScale)
	if m.kind != KindAggregated {
		decodeRequests, decodeKV = 0, 0
	}
	return m.prefillChunkTime(tokens, mbt, func(chunk int64) (float64, bool) {
		return m.forward(chunk, decodeRequests, decodeKV)
	})
}

// prefillChunkTime sums one forward pass per chunk of mbt tokens plus one for the tail.
func (m *EngineModel) prefillChunkTime(tokens, mbt int64, chunkTime func(int64) (float64, bool)) (float64, bool) {
	full, tail := tokens/mbt, tokens%mbt
	var total float64
	if full > 0 {
		t, ok := chunkTime(mbt)
		if !ok {
			return 0, false
		}
		total += t * float64(full)
	}
	if tail > 0 {
		t, ok := chunkTime(tail)
		if !ok {
			return 0, false
		}
		total += t
	}
	if math.IsInf(total, 0) || math.IsNaN(total) {
		return 0, false
	}
	return total, true
}

// DecodeQuery parameterises a scheduled-decode (ITL) estimate.
type DecodeQuery struct {
	// DecodeScale multiplies the decode load (N/(N-1) projects a scale-down).
	DecodeScale float64
	// IncludeQueuedDecode adds preempted (queued) decode requests.
	IncludeQueuedDecode bool
	// IncludeQueuedPrefillAsKV counts queued prefill tokens as future KV (aggregated engines).
	IncludeQueuedPrefillAsKV bool
	// AddNextRequest adds one request of the average decode length.
	AddNextRequest bool
}

// NextRequestDecode is the default query: the ITL the next request would see.
func NextRequestDecode() DecodeQuery {
	return DecodeQuery{DecodeScale: 1, IncludeQueuedDecode: true, AddNextRequest: true}
}

// ScheduledDecodeITL estimates one decode iteration (seconds) for the engine's decode load
// (Dynamo's estimate_scheduled_decode_itl). Aggregated engines get their typical piggybacked
// prefill substituted. The caller divides by the speculative accept length. ok is false when
// the model is not ready or the engine kind has no decode.
func (m *EngineModel) ScheduledDecodeITL(f *FPM, q DecodeQuery) (float64, bool) {
	if m.kind == KindPrefill {
		return 0, false
	}
	if ok, _ := m.reg.Fit(); !ok {
		return 0, false
	}
	dkv := float64(f.Scheduled.SumDecodeKVTokens)
	dr := float64(f.Scheduled.NumDecodeRequests)
	if q.IncludeQueuedDecode {
		dkv += float64(f.Queued.SumDecodeKVTokens)
		dr += float64(f.Queued.NumDecodeRequests)
	}
	if q.IncludeQueuedPrefillAsKV {
		dkv += float64(f.Queued.SumPrefillTokens)
		dr += float64(f.Queued.NumPrefillRequests)
	}
	dkv *= q.DecodeScale
	dr *= q.DecodeScale
	if avg := m.AvgDecodeLength(); q.AddNextRequest && avg > 0 {
		dkv += avg
		dr++
	}
	var prefillTokens int64
	if m.kind == KindAggregated {
		// The scheduled prefill of this iteration is deliberately not used: the typical
		// prefill mix learned from past iterations is.
		prefillTokens = ceilNonNegative(m.st.AggPrefillTokens.Mean())
	}
	return m.forward(prefillTokens, ceilNonNegative(dr), ceilNonNegative(dkv))
}

// CapacityTarget is what a capacity search optimises among eligible batch sizes.
type CapacityTarget int

// The capacity targets.
const (
	// MaxThroughput keeps the highest request rate (what the planner sizes with).
	MaxThroughput CapacityTarget = iota
	// MinLatency keeps the lowest latency (end-to-end, else TTFT, else ITL).
	MinLatency
)

// CapacityRequest is a request shape and its SLA targets. A zero SLA means none.
type CapacityRequest struct {
	ISL, OSL     float64
	TTFTSLAMs    float64
	ITLSLAMs     float64
	E2ESLAMs     float64
	KVHitRate    float64
	AcceptLength float64
	Target       CapacityTarget
}

// Capacity is a sustainable per-engine request rate and its modelled latencies (0 = not
// modelled for that engine kind).
type Capacity struct {
	RPS       float64 `json:"rps"`
	BatchSize int64   `json:"batch_size"`
	TTFTMs    float64 `json:"ttft_ms,omitempty"`
	ITLMs     float64 `json:"itl_ms,omitempty"`
	E2EMs     float64 `json:"e2e_ms,omitempty"`
	// Eligible reports whether the point meets every SLA target given. When no batch size
	// does, the best ineligible point is returned (the planner still sizes from it).
	Eligible bool `json:"eligible"`
}

// FindCapacity searches the sustainable per-engine request rate for a request shape under
// SLA targets (Dynamo's G3 find_engine_capacity_rps, reference §3.5): ISL is rounded up,
// OSL rounded up to at least 1, the prefix-cache hit rate discounts prefill work (at most
// 95%), and batch sizes from 1 to the engine's cap (at most 128 of them, evenly spread) are
// evaluated with the forward-pass model. ok is false when the model is not ready or the
// request is empty.
func (m *EngineModel) FindCapacity(req CapacityRequest, limits Limits) (Capacity, bool) {
	if req.ISL <= 0 || math.IsNaN(req.ISL) || math.IsInf(req.ISL, 0) {
		return Capacity{}, false
	}
	if m.kind != KindPrefill && !(req.OSL > 0) {
		return Capacity{}, false
	}
	if ok, _ := m.reg.Fit(); !ok {
		return Capacity{}, false
	}
	l := limits.WithDefaults()
	accept := 1.0
	if m.kind != KindPrefill && req.AcceptLength > 1 && !math.IsInf(req.AcceptLength, 0) {
		accept = req.AcceptLength
	}
	// Dynamo's EngineCapacityRequest rejects lengths that do not fit u32 (the query fails and
	// the pool holds as not ready); an infinite or NaN OSL is rejected the same way.
	if req.ISL > u32Max || req.OSL > u32Max || math.IsNaN(req.OSL) || math.IsInf(req.OSL, 0) {
		return Capacity{}, false
	}
	isl := int64(math.Ceil(req.ISL))
	osl := max(1, ceilNonNegative(req.OSL))
	effISL := max(1, ceilNonNegative(float64(isl)*(1-ClampKVHitRate(req.KVHitRate))))
	ctx := max(1, min(u32Max, isl+osl/2))
	decodeMaxBatch := min(l.MaxNumSeqs, l.MaxKVTokens/ctx)
	sla := func(v, target float64) bool { return target <= 0 || v <= target/1000 }

	var best Capacity
	found := false
	consider := func(c Capacity) {
		if !found {
			best, found = c, true
			return
		}
		switch {
		case !best.Eligible && c.Eligible:
			best = c
		case best.Eligible && !c.Eligible:
		case req.Target == MaxThroughput:
			if c.RPS > best.RPS {
				best = c
			}
		default:
			if capacityLatency(c) < capacityLatency(best) {
				best = c
			}
		}
	}
	switch m.kind {
	case KindPrefill:
		maxBatch := int64(1)
		if effISL <= l.MaxNumBatchedTokens {
			maxBatch = min(l.MaxNumSeqs, l.MaxNumBatchedTokens/effISL)
		}
		for _, bs := range batchSizes(maxBatch) {
			ttft, ok := m.prefillChunkTime(min(u32Max, effISL*bs), l.MaxNumBatchedTokens, func(c int64) (float64, bool) { return m.forward(c, 0, 0) })
			if !ok {
				return Capacity{}, false
			}
			if ttft == 0 {
				continue
			}
			consider(Capacity{RPS: float64(bs) / ttft, BatchSize: bs, TTFTMs: ttft * 1000, E2EMs: ttft * 1000,
				Eligible: sla(ttft, req.TTFTSLAMs) && req.ITLSLAMs <= 0 && sla(ttft, req.E2ESLAMs)})
		}
	case KindDecode:
		for _, bs := range batchSizes(decodeMaxBatch) {
			fwd, ok := m.forward(0, bs, min(u32Max, bs*ctx))
			if !ok {
				return Capacity{}, false
			}
			itl := fwd / accept
			if itl == 0 {
				continue
			}
			consider(Capacity{RPS: float64(bs) / (float64(osl) * itl), BatchSize: bs, ITLMs: itl * 1000,
				Eligible: req.TTFTSLAMs <= 0 && sla(itl, req.ITLSLAMs) && req.E2ESLAMs <= 0})
		}
	case KindAggregated:
		if l.MaxNumBatchedTokens <= 1 {
			return Capacity{}, false
		}
		hardCap := min(decodeMaxBatch, max(1, l.MaxNumBatchedTokens-1))
		perIteration := func(bs int64) int64 {
			return ceilNonNegative(float64(bs) * accept * float64(effISL) / float64(max(1, osl)))
		}
		for _, bs := range batchSizes(hardCap) {
			budget := max(0, l.MaxNumBatchedTokens-bs)
			if budget == 0 || perIteration(bs) > budget {
				continue // prefill admission cannot keep up with decode egress
			}
			decodeKV := min(u32Max, bs*ctx)
			ppi := min(l.MaxNumBatchedTokens, perIteration(bs))
			fwd, ok := m.forward(ppi, bs, decodeKV)
			if !ok {
				return Capacity{}, false
			}
			itl := fwd / accept
			if itl == 0 {
				continue
			}
			ttft, ok := m.prefillChunkTime(min(u32Max, ppi+effISL), l.MaxNumBatchedTokens, func(c int64) (float64, bool) { return m.forward(c, bs, decodeKV) })
			if !ok {
				return Capacity{}, false
			}
			e2e := ttft + itl*float64(max(0, osl-1))
			consider(Capacity{RPS: float64(bs) / (float64(osl) * itl), BatchSize: bs, TTFTMs: ttft * 1000, ITLMs: itl * 1000, E2EMs: e2e * 1000,
				Eligible: sla(ttft, req.TTFTSLAMs) && sla(itl, req.ITLSLAMs) && sla(e2e, req.E2ESLAMs)})
		}
	}
	return best, found
}

func capacityLatency(c Capacity) float64 {
	for _, v := range []float64{c.E2EMs, c.TTFTMs, c.ITLMs} {
		if v > 0 {
			return v
		}
	}
	return math.Inf(1)
}

// batchSizes are the candidates 1..maxBatch, or 128 of them evenly spread when maxBatch is
// larger (1 + i*(maxBatch-1)//127).
func batchSizes(maxBatch int64) []int64 {
	if maxBatch <= 0 {
		return nil
	}
	if maxBatch <= MaxCapacitySearchCandidates {
		out := make([]int64, maxBatch)
		for i := range out {
			out[i] = int64(i) + 1
		}
		return out
	}
	out := make([]int64, MaxCapacitySearchCandidates)
	span, den := maxBatch-1, int64(MaxCapacitySearchCandidates-1)
	for i := range out {
		out[i] = 1 + int64(i)*span/den
	}
	return out
}

// PrefillTime is the modelled time (seconds) for an idle prefill engine to compute a prompt
// of tokens tokens: one forward pass per chunk of max_num_batched_tokens, no decode load. ok
// is false when the model is not ready or has no prefill.
func (m *EngineModel) PrefillTime(tokens int64, limits Limits) (float64, bool) {
	if m.kind == KindDecode || tokens <= 0 {
		return 0, false
	}
	if ok, _ := m.reg.Fit(); !ok {
		return 0, false
	}
	return m.prefillChunkTime(min(tokens, u32Max), limits.WithDefaults().MaxNumBatchedTokens, func(c int64) (float64, bool) { return m.forward(c, 0, 0) })
}
