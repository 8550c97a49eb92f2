package scaling

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// The ahead policy's guards against what the live path really feeds it (docs/policy.md,
// "Robustness"). Fixed, the same for every deployment and trace.
const (
	// aheadShownPoints bounds the decode batches kept as demonstrated within the ITL SLA.
	aheadShownPoints = 16
	// aheadShownShare is the share of a demonstrated decode batch the sizing relies on: the
	// largest batch shown within the SLA is at its edge by construction, so relying on all of
	// it would size the pool where any larger batch breaks the SLA; a perf model within 20%
	// of it is left alone.
	aheadShownShare = 0.8
	// aheadShownDecay is how fast a demonstrated decode batch is forgotten, per interval
	// (halves in about 350 intervals): engines that became slower stop vouching for it.
	aheadShownDecay = 0.002
	// aheadMaxRequestRate bounds the request rate a traffic window may report (req/s): far
	// past any deployment (every pool at config.MaxReplicas engines serving thousands of
	// requests a second each), and far below what makes the history's sums overflow. A rate
	// past it is a broken counter or query, read as unreadable traffic: the tick holds.
	aheadMaxRequestRate = 1e8
	// aheadMaxLength bounds a window's mean ISL or OSL (tokens): past it, the length is read
	// as unobserved, as a missing one (the recent means stand in).
	aheadMaxLength = 1e9
	// aheadMinWindowSeconds is the shortest traffic window read (the planner asks for one
	// interval, of at least a second): a shorter one is unreadable, as is one over
	// config.MaxIntervalSeconds.
	aheadMinWindowSeconds = 1e-3
)

// ShownBatch is a decode iteration an engine ran within the ITL SLA: N requests holding KV
// tokens of context. An iteration's time grows with both, so any batch with at most N
// requests and at most KV tokens is as fast.
type ShownBatch struct {
	N  float64 `json:"n"`
	KV float64 `json:"kv"`
}

// learnDecodeShown adds the decode iterations of this tick's FPMs (the latest per engine and
// the samples since the last tick) that ran within the ITL SLA to the demonstrated batches:
// the Pareto frontier of (requests, KV tokens), at most aheadShownPoints of it, each decayed
// by aheadShownDecay per interval.
func (t *tick) learnDecodeShown() {
	a := t.st.Ahead
	for i := range a.DecodeShown {
		a.DecodeShown[i].N *= 1 - aheadShownDecay
		a.DecodeShown[i].KV *= 1 - aheadShownDecay
	}
	limit := t.p.cfg.ITLMs / 1000 * t.acceptLength() // an iteration's seconds at the SLA
	for _, f := range t.decodeIterations() {
		n, kv := float64(f.Scheduled.NumDecodeRequests), float64(f.Scheduled.SumDecodeKVTokens)
		if f.IsHeartbeat() || !finite(f.WallTime) || f.WallTime <= 0 || f.WallTime > limit || n < 1 || kv < 0 {
			continue
		}
		a.DecodeShown = addShown(a.DecodeShown, ShownBatch{N: n, KV: kv})
	}
}

// addShown adds p to the frontier f unless a point of it dominates p, removing the points p
// dominates; past aheadShownPoints the point whose loss costs shownBatch the least goes
// (shownEvict), so the frontier keeps vouching for short and long contexts alike.
func addShown(f []ShownBatch, p ShownBatch) []ShownBatch {
	for _, q := range f {
		if q.N >= p.N && q.KV >= p.KV {
			return f
		}
	}
	f = slices.DeleteFunc(f, func(q ShownBatch) bool { return p.N >= q.N && p.KV >= q.KV })
	f = append(f, p)
	if len(f) > aheadShownPoints {
		i := shownEvict(f)
		f = slices.Delete(f, i, i+1)
	}
	return f
}

// shownEvict is the index of the frontier point whose removal lowers shownBatch the least,
// relative to it. A point of N requests and KV tokens vouches the most at its own context
// KV/N (N requests); without it the next points on either side vouch there for the
// fewer-requests neighbour's N, or N × the more-requests neighbour's KV / KV: the relative
// loss is 1 − the larger of those two ratios (a point without a neighbour on one side counts
// that side as 0: an extreme goes only when its one neighbour nearly matches it).
func shownEvict(f []ShownBatch) int {
	order := make([]int, len(f))
	for i := range order {
		order[i] = i
	}
	// On a Pareto frontier more requests means fewer KV tokens: sorted by N, KV descends.
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(f[a].N, f[b].N) })
	best, bestLoss := order[0], math.Inf(1)
	for k, i := range order {
		var fewer, more float64
		if k > 0 && f[i].N > 0 {
			fewer = f[order[k-1]].N / f[i].N
		}
		if k+1 < len(order) && f[i].KV > 0 {
			more = f[order[k+1]].KV / f[i].KV
		}
		if loss := 1 - math.Max(fewer, more); loss < bestLoss {
			best, bestLoss = i, loss
		}
	}
	return best
}

// shownBatch is the largest decode batch of requests at mean context ctx that an engine has
// run within the ITL SLA: a demonstrated iteration of N requests and KV tokens vouches for
// min(N, KV/ctx) of them (0 without any).
func shownBatch(f []ShownBatch, ctx float64) float64 {
	var b float64
	for _, q := range f {
		b = math.Max(b, math.Min(q.N, q.KV/math.Max(1, ctx)))
	}
	return b
}

// shownDecodeBatch is the decode batch at mean context ctx the demonstrated batches let the
// sizing rely on (aheadShownShare of shownBatch), and the reason to give for it. here is the
// profile's batch at ctx (profileBatch) and beat the most the engines ran over the profile
// (shownBeat; called only when needed). With a profile that holds a request or more at ctx,
// the batch is held to here — the batch the profile cap already holds the perf model to —
// unless the engines ran more than the profile at their own context: then it is
// aheadShownShare × beat × here, never below here (a point must beat the profile by
// 1/aheadShownShare to raise it) nor above aheadShownShare of shownBatch. shownBatch's
// dominance (fewer requests holding fewer tokens are as fast) does not hold on the profile's
// surface as interpolated between its measured contexts, which the simulated engines run: on
// the H200 profile, measured at 350 and 2,997 tokens and nothing between, 49 requests of
// 3,000 tokens run within a 10 ms ITL but 23 of 2,112. A batch of 45 shown on a step's long
// requests vouched for 36 at 2,112 tokens, and the pool sized on it missed the ITL of 40% of a
// minute's requests (docs/policy.md, "A batch shown at another context"). Real engines whose
// time grows with the KV tokens are held to a pessimistic interpolation the same way the
// profile cap holds them: GPU-hours, not goodput.
func (t *tick) shownDecodeBatch(ctx, here float64, beat func() float64) (float64, string) {
	shown := aheadShownShare * shownBatch(t.st.Ahead.DecodeShown, ctx)
	why := fmt.Sprintf("%.0f%% of a batch the engines ran within the ITL SLA", 100*aheadShownShare)
	if here < 1 || !(shown > here) {
		return shown, why
	}
	b := beat()
	if scaled := math.Min(shown, aheadShownShare*b*here); scaled > here {
		return scaled, fmt.Sprintf("%s, %.0f%% of the profile's %.0f at a %.0f-token context: they ran %.2f× the profile's batch at their own", why, 100*aheadShownShare*b, here, ctx, b)
	}
	return here, fmt.Sprintf("%s, held to the profile's %.0f at a %.0f-token context", why, here, ctx)
}

// shownBeat is the most a demonstrated batch ran over the profile's batch at its own context
// (requests ÷ profileBatch at KV ÷ requests; 0 without a point the profile holds a request
// at). It does not depend on the sizing context, so a tick computes it once.
func (t *tick) shownBeat() float64 {
	var beat float64
	for _, q := range t.st.Ahead.DecodeShown {
		if !(q.N > 0) || !finite(q.KV) {
			continue
		}
		if own := t.profileBatch(q.KV / q.N); own >= 1 {
			beat = math.Max(beat, q.N/own)
		}
	}
	return beat
}

// sampledConcurrency is the decode pool's concurrency as this tick's FPMs show it: per engine
// (worker_id, dp_rank), the most requests running plus queued in its latest FPM or any of the
// samples since the last tick, summed over the engines; and whether there were samples.
// The samples see the bursts between two ticks the latest FPMs miss.
func (t *tick) sampledConcurrency() (float64, bool) {
	if t.in.FPM == nil {
		return 0, false
	}
	type key struct {
		worker string
		rank   int64
	}
	most := map[key]int64{}
	var order []key // the engines in first-seen order: the sum does not depend on map order
	for _, f := range t.decodeIterations() {
		k := key{f.WorkerID, f.DPRank}
		v, seen := most[k]
		if !seen {
			order = append(order, k)
		}
		most[k] = max(v, f.Scheduled.NumDecodeRequests+f.Queued.NumDecodeRequests)
	}
	var c float64
	for _, k := range order {
		c += float64(most[k])
	}
	return c, len(t.in.FPM.DecodeSamples) > 0
}

// aheadLengths are the mean ISL and OSL to record for this tick's traffic window (0 for an
// idle one). The frontend observes a request's ISL at its first token and its OSL at its
// completion, as Dynamo's does, so a window with arrivals may have neither yet (a burst's
// first seconds, or requests outlasting the window): a length the window does not give is
// the recent history's mean (over aheadLengthSeconds), else the last one seen, which leaves
// the history's mean as it is. Only with none of these it is not ok.
func (t *tick) aheadLengths(tr *TrafficObservation) (isl, osl float64, ok bool) {
	if *tr.NumReq == 0 {
		return 0, 0, true
	}
	good := func(v *float64) bool { return v != nil && finite(*v) && *v >= 0 && *v <= aheadMaxLength }
	for _, l := range []struct {
		name string
		v    *float64
	}{{"ISL", tr.ISL}, {"OSL", tr.OSL}} {
		if l.v != nil && finite(*l.v) && *l.v > aheadMaxLength {
			t.diag.note(fmt.Sprintf("ahead: a mean %s of %.3g tokens is past %.0e, longer than any prompt or output (a broken query): read as not observed", l.name, *l.v, aheadMaxLength))
		}
	}
	var hi, ho float64
	known := false
	if n, i, o, _ := t.st.Ahead.recent(aheadLengthSeconds); n > 0 {
		hi, ho, known = i/n, o/n, true
	} else if t.st.LastISL != nil && t.st.LastOSL != nil {
		hi, ho, known = *t.st.LastISL, *t.st.LastOSL, true
	}
	switch {
	case good(tr.ISL) && good(tr.OSL):
		isl, osl = *tr.ISL, *tr.OSL
	case !known:
		return 0, 0, false
	default:
		isl, osl = hi, ho
		if good(tr.ISL) {
			isl = *tr.ISL
		}
		if good(tr.OSL) {
			osl = *tr.OSL
		}
		t.diag.note(fmt.Sprintf("ahead: %.0f requests, their ISL or OSL not observed yet (observed at the first token and at completion): the recent means stand in", *tr.NumReq))
	}
	t.st.LastISL, t.st.LastOSL = ptr(isl), ptr(osl)
	return isl, osl, true
}

// readyWithin is the startup delay of a scale-up first seen ready took seconds after it was
// decided, by ticks interval seconds apart: the engines became ready at some time in the
// interval before (the previous tick saw them starting), uniformly as far as the ticks can
// tell, so the estimate is its middle rather than its end, which overstated the delay by
// half an interval on average (15 s measured for 10.5–11 s engines at 5 s ticks). A scale-up
// seen ready at the first tick after it was decided took at most that long: half of it.
func readyWithin(took, interval float64) float64 {
	if !(interval > 0) || took <= 0 {
		return math.Max(0, took)
	}
	return took - math.Min(interval, took)/2
}
