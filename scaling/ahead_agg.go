package scaling

import (
	"fmt"
	"math"
	"slices"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
)

// The ahead policy's sizing of an aggregated pool (mode agg): one pool of engines that run
// chunked prefill and decode in the same forward passes. The forecast, lead time, holds and
// decision rules are the disaggregated ones (ahead.go); only the pool's size differs.
// docs/policy.md ("Aggregated deployments") explains the model.

// aggMaxCount bounds the token and request counts the aggregated capacity model builds from
// floats (the perf model clamps to 2^32-1 anyway); it keeps every conversion finite.
const aggMaxCount = 1 << 32

// aggShape is what an aggregated engine is sized for: the mean request, the engine's limits
// and the ITL SLA.
type aggShape struct {
	// ISL is the prompt tokens a request computes (after prefix-cache hits) and OSL its
	// output tokens; Ctx the KV tokens a decoding request holds on average.
	ISL, OSL, Ctx float64
	// Held is the mean context of the decode requests the engines hold (their FPMs), when
	// known and not Ctx (0: not known). A pass's decode is costed at the slower of the two
	// contexts (slowest), and MaxBatch is the KV capacity over the longer.
	Held float64
	// Accept is the tokens a decode pass emits per request (speculative decoding, ≥ 1).
	Accept float64
	// Chunk is max_num_batched_tokens: the token budget of one pass, decode tokens included.
	Chunk int64
	// MaxBatch bounds the running requests (max_num_seqs and the KV capacity over the longer of
	// Ctx and Held).
	MaxBatch int64
	// ITL is the ITL SLA in seconds.
	ITL float64
}

// passFunc is a forward-pass time model (seconds): perf.EngineModel.PassTime.
type passFunc func(prefillTokens, decodeRequests, decodeKV int64) (float64, bool)

// aggPoint is an aggregated engine's steady state at a mean decode batch.
type aggPoint struct {
	// Batch is the mean number of decoding requests.
	Batch float64
	// Decode is a pass carrying only the batch's decodes; Prefill the time a mean prompt's
	// chunks add to the passes that carry them.
	Decode, Prefill float64
	// ITL is the mean inter-token latency with the chunks interleaved, RPS the request rate
	// per engine that keeps the batch (Little).
	ITL, RPS float64
	// Fits is false when the prompts arriving per pass do not fit the pass's token budget
	// beside the decodes (prefill cannot keep up at this batch).
	Fits bool
}

// clampCount converts a non-negative token or request count to int64 within aggMaxCount.
func clampCount(v float64) int64 {
	if !(v > 0) {
		return 0
	}
	return int64(math.Ceil(math.Min(v, aggMaxCount)))
}

// at is the engine's steady state at mean decode batch b. A request takes OSL/Accept decode
// passes; while it decodes, b prompts arrive at its engine (Little: the batch is the
// arrivals over one request's life), and each stretches the passes by the time its chunks
// add: a pass lasts Decode + b·Prefill/(OSL/Accept) on average, and that is the ITL (per
// Accept tokens). ok is false when the pass model fails.
func (s aggShape) at(pass passFunc, b float64) (aggPoint, bool) {
	b = math.Max(1, b)
	decode, ok := s.slowest(pass, 0, b)
	if !ok {
		return aggPoint{}, false
	}
	// The prompt's chunks share each pass's budget with the decodes (vLLM schedules the
	// running requests first).
	prefill, ok := s.service(pass, b)
	if !ok {
		return aggPoint{}, false
	}
	prefill = math.Max(0, prefill-decode*s.chunks(b))
	passes := math.Max(1, s.OSL/s.Accept)
	mean := decode + b*prefill/passes
	p := aggPoint{Batch: b, Decode: decode, Prefill: prefill, ITL: mean / s.Accept}
	if mean > 0 {
		p.RPS = b / (passes * mean)
	}
	p.Fits = b*s.ISL/passes+b <= float64(s.Chunk)
	return p, true
}

// slowest is the time of a pass of tokens prompt tokens beside a decode batch b: the slower
// of the passes at the two contexts, Ctx and Held (when known). The profile's decode surface
// is interpolated in KV usage and context, so at one batch it need not be faster at a
// shorter context: at a batch of 26, 10.5 ms at 2,010 tokens, 7.6 ms at 2,920. On the
// Mooncake synthetic trace, whose short prompts have the long outputs, the engines held
// 2,010 tokens a request where ISL + OSL/2 said 2,920, and one engine at 6.6 req/s ran at
// 16.5 ms where that context modelled 10.5 ms (17.0 ms at the context held; docs/policy.md,
// "The context an aggregated engine holds").
func (s aggShape) slowest(pass passFunc, tokens int64, b float64) (float64, bool) {
	t, _, ok := s.slowestAt(pass, tokens, b)
	return t, ok
}

// slowestAt is slowest, and whether the pass at the held context is the slower.
func (s aggShape) slowestAt(pass passFunc, tokens int64, b float64) (t float64, atHeld, ok bool) {
	reqs := clampCount(b)
	t, ok = pass(tokens, reqs, clampCount(b*s.Ctx))
	if !ok {
		return 0, false, false
	}
	if s.Held > 0 && reqs > 0 {
		h, ok := pass(tokens, reqs, clampCount(b*s.Held))
		if !ok {
			return 0, false, false
		}
		if h > t {
			return h, true, true
		}
		return math.Max(t, h), false, true // a NaN fails the callers' checks, as before
	}
	return t, false, true
}

// contextNote says which context a decode pass at batch b is costed at (Held known).
func (s aggShape) contextNote(pass passFunc, b float64) string {
	if _, atHeld, ok := s.slowestAt(pass, 0, b); ok && atHeld {
		return fmt.Sprintf(", decode at the %.0f-token context the engines hold, slower than ISL + OSL/2's %.0f", s.Held, s.Ctx)
	}
	return fmt.Sprintf(", decode at ISL + OSL/2's %.0f-token context, no faster than the %.0f the engines hold", s.Ctx, s.Held)
}

// chunks is the number of passes a mean prompt's prefill takes beside a decode batch b.
func (s aggShape) chunks(b float64) float64 {
	room := math.Max(1, float64(s.Chunk)-math.Ceil(b))
	return math.Max(1, math.Ceil(s.ISL/room))
}

// service is the time (seconds) of the passes that carry a mean prompt's chunks beside a
// decode batch b: its prefill service time on an aggregated engine.
func (s aggShape) service(pass passFunc, b float64) (float64, bool) {
	b = math.Max(0, b)
	room := max(1, s.Chunk-clampCount(b))
	tokens := clampCount(s.ISL)
	full, tail := tokens/room, tokens%room
	var total float64
	if full > 0 {
		t, ok := s.slowest(pass, room, b)
		if !ok {
			return 0, false
		}
		total += t * float64(full)
	}
	if tail > 0 || full == 0 {
		t, ok := s.slowest(pass, max(1, tail), b)
		if !ok {
			return 0, false
		}
		total += t
	}
	if !finite(total) {
		return 0, false
	}
	return total, true
}

// aggScanBatches bounds the batches aggCapacity and aggBatchAt count up one at a time (as the
// disaggregated profile batch is counted, up to 4096); past it they bisect, as if the surface
// were monotonic there.
const aggScanBatches = 4096

// aggCapacity is the largest mean decode batch (an integer in 1..MaxBatch) whose ITL, with
// the chunks of the prompts that keep it interleaved, meets the SLA and whose prompts fit
// the passes' budget: the aggregated engine's SLA batch. It is counted up from 1 to the first
// batch that does not: a measured surface need not be monotonic in the batch (an
// interpolated profile's ITL can dip as the KV usage grows), and the engines reach a batch
// through every one below it, so a batch past the first miss is not one they run within the
// SLA. eligible is false when not even one request meets it (the batch is then 1). ok is
// false when the pass model fails or the shape is absurd (no tokens, no budget).
func aggCapacity(s aggShape, pass passFunc) (batch int64, eligible, ok bool) {
	if !(s.ISL > 0) || !(s.OSL > 0) || !(s.Ctx > 0) || !(s.Held >= 0) || !(s.Accept >= 1) || !(s.ITL > 0) || s.Chunk < 2 || s.MaxBatch < 1 ||
		!finite(s.ISL) || !finite(s.OSL) || !finite(s.Ctx) || !finite(s.Held) || !finite(s.Accept) || !finite(s.ITL) {
		return 0, false, false
	}
	meets := func(b int64) (bool, bool) {
		p, ok := s.at(pass, float64(b))
		return ok && p.Fits && p.ITL <= s.ITL, ok
	}
	hi := min(s.MaxBatch, s.Chunk-1)
	scan := min(hi, aggScanBatches)
	var lo int64 // the batches 1..lo meet the SLA
	for lo < scan {
		m, ok := meets(lo + 1)
		if !ok {
			return 0, false, false
		}
		if !m {
			break
		}
		lo++
	}
	switch {
	case lo == 0:
		return 1, false, true
	case lo < scan:
		return lo, true, true
	}
	for lo < hi { // every batch up to the scan's bound meets: bisect past it
		mid := lo + (hi-lo+1)/2
		m, ok := meets(mid)
		if !ok {
			return 0, false, false
		}
		if m {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo, true, true
}

// aggBatchAt is the smallest mean decode batch (within 0..top) at which an engine serves rps
// requests per second: the inverse of aggPoint.RPS, which grows with the batch on a
// regression's surface but need not on a measured one — the batch grows from empty until
// the engine keeps up, so the first batch that serves rps is the one it runs at. The whole
// batches are counted up from 1 (up to aggScanBatches) to the first that serves it, then the
// batch is bisected between it and the one before.
func aggBatchAt(s aggShape, pass passFunc, rps, top float64) float64 {
	lo, hi := 0.0, math.Max(1, top)
	for k := 1.0; k < hi && k <= aggScanBatches; k++ {
		if p, ok := s.at(pass, k); !ok || p.RPS >= rps {
			hi = k
			break
		}
		lo = k
	}
	for range 40 {
		mid := (lo + hi) / 2
		p, ok := s.at(pass, mid)
		if !ok || p.RPS >= rps {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// aggEngines is the smallest aggregated pool serving rate requests per second (Poisson)
// such that (a) each engine's mean decode batch stays under keep, the batch whose Poisson
// spread stays under the SLA batch (perEngine requests per second each), and (b) the
// prompts' prefill, a queue of engines whose service time is the passes carrying a prompt
// beside that engine's decodes, meets the TTFT slack (prefillEngines, the disaggregated
// prefill sizing). ttft is the TTFT SLA in seconds, cs2 the prompt service time's squared
// coefficient of variation, missShare the share of prompts let wait past the slack, limit
// bounds the pool. It also returns the prefill service time at the size found.
func aggEngines(s aggShape, pass passFunc, rate, perEngine, keep, ttft, cs2, missShare float64, limit int) (n int, service float64, ok bool) {
	if !finite(rate) {
		return 0, 0, false
	}
	if !(rate > 0) {
		return 0, 0, true
	}
	if !(perEngine > 0) || !finite(perEngine) {
		return 0, 0, false
	}
	n = engineCount(rate/perEngine, limit)
	for n = max(1, n); ; n++ {
		b := aggBatchAt(s, pass, rate/float64(n), keep)
		service, ok = s.service(pass, b)
		if !ok {
			return 0, 0, false
		}
		slack := ttft - service
		var m int
		if slack <= 0 {
			// A prompt alone breaks the TTFT SLA: keep the prefill under 70% of the pool.
			m = engineCount(rate*service/0.7, limit)
		} else {
			m = prefillEngines(rate, service, slack, cs2, missShare, limit)
		}
		if m <= n || n >= limit {
			return min(n, limit), service, true
		}
		n = m - 1 // the batch shrinks as the pool grows: check m itself
	}
}

// promptPool is the component that computes prompts: the aggregated pool (which Dynamo and
// this planner call decode) in mode agg, else prefill.
func (t *tick) promptPool() Component {
	if t.p.cfg.Mode == config.ModeAgg {
		return Decode
	}
	return Prefill
}

// aheadAggSize is the engines the aggregated pool needs for the forecast plus its queued
// backlog (cleared over the lead time).
func (t *tick) aheadAggSize(f Forecast, lead float64) (int, string, bool) {
	limit := aheadMaxEngines
	if g := t.gpuCost(Decode); g > 0 && t.p.cfg.MaxGPUBudget >= 0 {
		limit = min(aheadMaxEngines, max(1, t.p.cfg.MaxGPUBudget/g+1))
	}
	backlogTokens, backlogReqs := t.queuedPromptTokens(), 0.0
	for _, s := range t.stats(Decode) {
		backlogReqs += float64(s.Queued.NumDecodeRequests)
	}
	if f.Rate <= 0 && backlogTokens <= 0 && backlogReqs <= 0 {
		return 0, "aggregated: no demand", true
	}
	m := t.agg
	if m == nil {
		return 0, "aggregated: no perf model", false
	}
	// The profile's pass times when the deployment has a profile (profileAggPass: the perf
	// model's aggregated regression swings with the batch the engines run), else the perf
	// model's.
	pass, passSource, notReady := passFunc(m.PassTime), "the perf model's pass times", "aggregated: perf model not ready"
	if t.p.aggProfilePass != nil {
		pass, passSource, notReady = t.p.aggProfilePass, "the profile's pass times", "aggregated: the profile's pass times could not be computed"
	}
	caps := t.caps.Decode
	if caps == nil {
		caps = &EngineCapabilities{}
	}
	lim := caps.Limits().WithDefaults()
	isl, osl := math.Max(1, f.ISL), math.Max(1, f.OSL)
	s := aggShape{
		ISL: math.Max(1, isl*(1-perf.ClampKVHitRate(t.kvHitRate()))), OSL: osl, Ctx: isl + osl/2,
		Accept: t.acceptLength(), Chunk: lim.MaxNumBatchedTokens, ITL: t.p.cfg.ITLMs / 1000,
	}
	if held, ok := t.decodeContextHeld(); ok && held > 0 && math.Abs(held-s.Ctx) >= 1 {
		s.Held = held
	}
	s.MaxBatch = min(lim.MaxNumSeqs, clampCount(float64(lim.MaxKVTokens)/math.Max(s.Ctx, s.Held)))
	batch, eligible, ok := aggCapacity(s, pass)
	if !ok {
		return 0, notReady, false
	}
	ctxNote := ""
	if s.Held > 0 {
		ctxNote = s.contextNote(pass, float64(batch))
	}
	// The perf model's regression can swing: the smallest SLA batch of the last lead time (with
	// the profile's pass times it moves only with the lengths, the context the engines hold and
	// the SLA).
	b := slices.Min(t.window(&t.st.Ahead.DecodeBatch, float64(batch), lead))
	// Keep the Poisson spread of the batch under each engine's SLA batch (the disaggregated
	// decode pool keeps its pool's instead, pooledBatch: an aggregated pool, short of the
	// goodput on sinusoids, keeps this margin): the prompts arriving over one request's
	// life are the batch too, so the same spread
	// covers the chunks it sees — which a foreseen demand does not make smaller, so the
	// aggregated pool keeps its margins (Forecast.margins) whatever the forecast.
	missShare, z := aheadWaitMissShare, aheadDecodeSpreadZ
	keep := engineSpreadBatch(b, z)
	if !eligible {
		keep = 1
	}
	pt, ok := s.at(pass, keep)
	if !ok || !(pt.RPS > 0) {
		return 0, notReady, false
	}
	perEngine := pt.RPS
	// What the engines did: the rate per engine at which the observed ITL neared the SLA
	// (aggEdgeReadable says when it is read).
	edge := t.st.Ahead.DecodeEdgeRPS
	if t.aggEdgeReadable(lead) {
		edge = t.learnDecodeEdge(f, lead)
	}
	if edge > 0 && edge < perEngine {
		perEngine = edge
	}
	rate := f.Rate + backlogTokens/isl/lead + backlogReqs/lead
	// A prompt's service on an aggregated engine also varies with the decode batch its chunks
	// share passes with, whatever the prompts' lengths: exponential service at least. (With
	// the lengths' spread alone, 0 for the sinusoid's equal prompts, sinusoid-rr-5-45-agg fell
	// from 89.1% to 81.4%.)
	cs2 := math.Max(1, t.promptSpread(Decode, f.ISL))
	// The prompt's service at the current load, for the wait the queueing model misses.
	ready := t.current(Decode)
	nowService := pt.Decode + pt.Prefill
	if ready > 0 {
		if v, ok := s.service(pass, aggBatchAt(s, pass, f.Level/float64(ready), keep)); ok {
			nowService = v
		}
	}
	excess := t.learnExcessWait(f, nowService, cs2, s.ISL)
	n, service, ok := aggEngines(s, pass, rate, perEngine, keep, t.p.cfg.TTFTMs/1000, cs2, missShare, limit)
	if !ok {
		return 0, notReady, false
	}
	// The burst's share of one engine waits about twice the mean excess wait; at most twice
	// the ready pool per decision, should the latency not be the load's.
	if slack := t.p.cfg.TTFTMs/1000 - service; slack > 0 && rate > 0 {
		if e := min(engineCount(2*aheadBurstTail*excess/slack, limit), 2*max(1, ready)); e > n {
			n = min(e, limit)
		}
	}
	// What the engines really hold, within the batch kept; once a lead time of live traffic is
	// observed, at most twice the engines the rate and the waits need (twice the ready pool
	// bounds the excess wait's rule so). Past that, what they hold is the queue of a pool
	// overloaded now, which engines ordered now, ready a startup later, find drained: an Azure
	// code window at 1.8× held 44 requests on 2 engines whose SLA batch was 2, and the floor
	// ordered 44 engines, held for minutes (6.75 GPU-hours where 8 static engines reach 96% at
	// 3.42). Within the first lead time it is the only sign of a burst the forecast has not
	// measured yet: a cold pool's 5 requests held at 5 s ordered the engines a burst at 90 s
	// needed, and capped there that window fell from 97.1% to 92.8%. Past the first lead time,
	// on calm arrivals, the engines the floor adds are not held once it stops asking for them
	// (holdNeed), nor kept at an idle tick (tick.ahead): ordered for a queue, they find it
	// drained (a 300 s sinusoid's cold first rise held 13 engines for a minute past its peak
	// where its second rise, the period not yet followed, needed 8). On bursty arrivals the
	// floor's engines are held like any other need: there the queue is a burst that comes back
	// (without that hold, Azure code windows saved 2.6% of GPU-hours and lost 0.33 points of
	// goodput).
	held := t.aggConcurrency(lead)
	heldNote := ""
	if h := engineCount(held/keep, aheadMaxEngines); h > n {
		live := t.liveSeconds()
		if top := 2 * max(1, n); h > top {
			if live >= lead {
				heldNote = fmt.Sprintf(", which ask for %d engines: capped at %d, twice the %d the rate and the waits need (the rest is the queue of a pool overloaded now)", h, top, n)
				h = top
			} else {
				heldNote = fmt.Sprintf(", which ask for %d engines, not capped at twice the %d the rate and the waits need: %.0f s of live traffic, less than the %.0f s lead time", h, n, live, lead)
			}
		}
		if excess := min(h, limit) - min(n, limit); excess > 0 && live >= lead && !f.bursty() {
			t.heldFloorExcess = excess
			heldNote += fmt.Sprintf("; the holds record %d, without the %d engines more for the requests held", min(n, limit), excess)
		}
		n = min(h, limit)
	}
	t.diag.EngineRPSDecode = ptr(perEngine)
	if n > 0 {
		t.diag.EngineRPSPrefill = ptr(rate / float64(n))
	}
	// The ready pool at the current rate, as modelled.
	if ready > 0 && f.Level > 0 {
		bb := aggBatchAt(s, pass, f.Level/float64(ready), float64(s.MaxBatch))
		if p, ok := s.at(pass, bb); ok {
			t.diag.EstimatedITLMs = ptr(p.ITL * 1000)
		}
		if sv, ok := s.service(pass, bb); ok {
			if load := f.Level * sv; float64(ready) > load {
				wait := erlangC(ready, load)*sv/(float64(ready)-load)*(1+cs2)/2 + excess/float64(ready)
				t.diag.EstimatedTTFTMs = ptr((sv + wait) * 1000)
			}
		}
	}
	note := fmt.Sprintf("aggregated %d (%.2f req/s incl. backlog %.0f tokens %.0f requests; %.2f req/s per engine: batch %.0f of %.0f at the ITL SLA with chunks interleaved (%s%s), %.1f ms of prefill per prompt; prompt service %.0f ms, cs² %.2f, excess wait %.0f ms·engine; %.0f requests held at the %.0f%% quantile%s)",
		n, rate, backlogTokens, backlogReqs, perEngine, keep, b, passSource, ctxNote, pt.Prefill*1000, service*1000, cs2, excess*1000, held, 100*(1-aheadBurstShare), heldNote)
	if !eligible {
		note += "; not even one request meets the ITL SLA with the chunks interleaved: sized at batch 1"
	}
	return min(n, limit), note, true
}

// aggEdgeReadable reports whether the aggregated pool's observed ITL says what its engines
// sustain (learnDecodeEdge): while the pool is settled (no scale-up under way), or while
// engines start but none has become ready within the last lead time (DecodeGrewAt) — the
// engines ready then carry the whole load, as a short Mooncake synthetic window's two did at
// up to 7.5 req/s each with the ITL at up to 29.6 ms against a 25 ms SLA while the engines
// ordered for them started (the model said 7.7–8.4; read only once settled, the edge was
// not learned before the pool went back to the two engines that had failed). Not while
// engines start within a lead time of one becoming ready: the engines that were alone under
// the rise drain their backlog at a high ITL while the new ones idle, which says nothing
// about what an engine sustains. A settled pool is read at once, as before; within the
// interval engines became ready in, learnDecodeEdge counts only those ready for all of it.
func (t *tick) aggEdgeReadable(lead float64) bool {
	if t.settled(Decode) {
		return true
	}
	grew := t.st.Ahead.DecodeGrewAt
	return grew == 0 || t.in.Now-grew >= lead
}

// aggConcurrency records the aggregated pool's concurrency — the running (decoding and
// prefilling) and preempted requests of its FPMs, not the waiting prompts, which the backlog
// rate clears — and returns the (1 − aheadBurstShare) quantile of the last
// window seconds' (0 without any). Unlike the decode pool's, it does not read a batch from
// the observed ITL: on an aggregated engine that mostly measures the prefill chunks
// interleaved, which the capacity model accounts for (read through the disaggregated decode
// model it implied batches three times the engines' and pools of 16 engines where 10 did;
// read through the aggregated capacity model it cost 10% more GPU-hours for no goodput on
// the agg scenarios).
func (t *tick) aggConcurrency(window float64) float64 {
	var c float64
	for _, f := range t.stats(Decode) {
		c += float64(max(0, f.Scheduled.NumDecodeRequests) + max(0, f.Scheduled.NumPrefillRequests) + max(0, f.Queued.NumDecodeRequests))
	}
	sorted := slices.Clone(t.window(&t.st.Ahead.DecodeConcurrency, c, window))
	slices.Sort(sorted)
	return sorted[min(len(sorted)-1, int(math.Floor((1-aheadBurstShare)*float64(len(sorted)))))]
}
