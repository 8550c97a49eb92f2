package scaling

import (
	"fmt"
	"math"

	"github.com/llmplanner/planner/perf"
)

// aheadProfileMaxBatch bounds the profile's decode batch search (requests per engine).
const aheadProfileMaxBatch = 4096

// profileDecodeBatch is the largest decode batch the pre-deployment profile measured within
// the ITL SLA at mean context ctx: the requests n such that every batch of 1 to n requests
// of ctx tokens each runs its iteration, at the profile's interpolated ITL (KV usage
// n·ctx / max_kv_tokens), within itlMs × accept milliseconds. It stops at the first batch
// over the SLA (the interpolated surface need not be monotonic) and at the KV capacity.
// 0: no profile, or even one request is over the SLA (the perf model's sizing stands).
func (p *Planner) profileDecodeBatch(ctx, itlMs, accept float64) float64 {
	di := p.decodeProf
	if di == nil || !(ctx >= 1) || !(itlMs > 0) || math.IsInf(ctx, 0) {
		return 0
	}
	limit := itlMs * math.Max(1, accept)
	kv := float64(di.MaxKVTokens())
	top := min(aheadProfileMaxBatch, int(kv/ctx))
	n := 0
	for b := 1; b <= top; b++ {
		itl, _ := di.At(float64(b)*ctx/kv, ctx)
		if !(itl <= limit) {
			break
		}
		n = b
	}
	return float64(n)
}

// profileBatch is the profile's decode batch within this deployment's ITL SLA (at its
// acceptance length) at mean context ctx: profileDecodeBatch.
func (t *tick) profileBatch(ctx float64) float64 {
	return t.p.profileDecodeBatch(ctx, t.p.cfg.ITLMs, t.acceptLength())
}

// profileDecodeCap caps the perf model's decode batch b at pb, the profile's measured batch
// within the ITL SLA at context ctx (profileBatch). The regression bootstrapped from the
// profile is one plane through a surface that is not one: on the demo's profile its intercept
// is 1.7 ms above the measured low-batch ITL and its per-request slope far below the
// short-context rows', so at the SLA's edge (10 ms, about twice the one-request ITL) it
// answers 45 requests at a 2,062-token context (ISL 2,048, OSL 28) where the engines, which
// run that profile, hold 21. Where the profile is the smaller, it is the batch; the batches
// the engines show within the SLA may still raise it afterwards (decode floor). The returned
// source says why.
func (t *tick) profileDecodeCap(b, pb, ctx float64, source string) (float64, string) {
	if pb < 1 || pb >= b {
		return b, source
	}
	return pb, fmt.Sprintf("as the profile measured it within the ITL SLA at a %.0f-token context (the perf model says %.0f)", ctx, b)
}

// profileAggPass is an aggregated engine's forward pass (seconds) as the pre-deployment
// profile measured its parts: the prefill TTFT of the pass's new prompt tokens (the prefill
// curve, clamped to its ISL range) plus the decode ITL of its batch at the batch's KV usage
// and mean context (the direct interpolation, at least 1 ms; past the profile's points, the
// nearest one's, which the context decides: the usage is a fraction, the context tokens).
// The profile measures prefill and decode apart, so a mixed pass is taken to cost both; a
// real engine that overlaps them is faster, which costs GPU-hours, not goodput.
//
// The ahead policy sizes an aggregated pool with it when the deployment has a profile,
// rather than with the perf model (Dynamo's aggregated regression of a pass's time over its
// prompt tokens and decode KV tokens). That regression has no term for the decode requests,
// so its intercept carries their cost at whatever batch the engines ran: on one loaded
// engine the two terms rise together and the fit swings. On a 900 s sinusoid (ISL 1,000,
// OSL 200, ITL 15 ms) its intercept rose from 5 to 16 ms within two minutes and fell back,
// the SLA batch went from 68 to 1 and back to 71, and the pool from 2 engines to 16 and back
// to 2 (docs/policy.md, "Aggregated pass times from the profile").
func profileAggPass(prefill *perf.PrefillInterpolator, decode *perf.DecodeInterpolator) passFunc {
	maxKV := float64(decode.MaxKVTokens())
	return func(prefillTokens, decodeRequests, decodeKV int64) (float64, bool) {
		var ms float64
		if prefillTokens > 0 {
			ms += math.Max(0, prefill.TTFTMs(float64(prefillTokens)))
		}
		if decodeRequests > 0 && maxKV > 0 {
			kv := float64(max(0, decodeKV))
			itl, _ := decode.At(kv/maxKV, kv/float64(decodeRequests))
			ms += math.Max(1, itl)
		}
		if !finite(ms) {
			return 0, false
		}
		return ms / 1000, true
	}
}
