package scaling

import (
	"math"

	"github.com/llmplanner/planner/config"
)

// The ahead policy's SLO feedback (docs/policy.md, "SLO feedback"). Fixed, the same for every
// deployment and trace.
const (
	// aheadMissBudget is the share of requests the feedback lets be served in intervals
	// whose observed mean latency breaks the SLA (a 95% goodput target's misses).
	aheadMissBudget = 0.05
	// aheadFeedbackLeads is the feedback's memory, in lead times: the window the missed
	// share is measured over, and how long a headroom stays before it is lowered.
	aheadFeedbackLeads = 10
	// aheadHeadroomStep is how much of the pool's need one step of headroom adds (at least
	// one engine), and aheadMaxHeadroom the most it adds (doubling the need).
	aheadHeadroomStep = 0.25
	aheadMaxHeadroom  = 1.0
)

// SLOFeedback is one pool's SLO feedback: running means (over aheadFeedbackLeads lead
// times) of the requests served in intervals whose observed latency broke the SLA while the
// pool was settled, and of all requests; the share of the pool's need added for it, and when
// it last changed.
type SLOFeedback struct {
	Missed    float64 `json:"missed"`
	Seen      float64 `json:"seen"`
	Headroom  float64 `json:"headroom,omitempty"`
	ChangedAt float64 `json:"changed_at,omitempty"`
}

// share is the share of the recent requests that were served in intervals over the SLA.
func (f *SLOFeedback) share() float64 {
	if f == nil || !(f.Seen > 0) {
		return 0
	}
	return f.Missed / f.Seen
}

// feedback is pool c's SLO feedback (created on first use).
func (t *tick) feedback(c Component) *SLOFeedback {
	a := t.st.Ahead
	f := &a.FeedbackPrefill
	if c == Decode {
		f = &a.FeedbackDecode
	}
	if *f == nil {
		*f = &SLOFeedback{}
	}
	return *f
}

// sloHeadroom updates pool c's SLO feedback with this tick's interval and returns the
// engines to add to its need n. An interval counts as missed when the pool's observed mean
// latency broke the SLA (prefill: TTFT; decode: ITL; aggregated: either; the TTFT not while
// a backlog is being cleared, clearingBacklog) while the pool was settled — no scale-up of
// it under way, and none became ready within the interval
// (grewWithin): a miss while engines start is the forecast's lag, which more headroom would
// not have met, where a miss on a settled pool says the sizing models are optimistic for
// this traffic (bursts sharper than the queueing model's, a perf model slower than it says)
// — and the demand's level within what the ready pool was
// sized for (outranForecast: beyond it, the miss is the forecast's, not the sizing's). While
// more than aheadMissBudget of the recent requests were missed, each missed interval adds a
// step of headroom (aheadHeadroomStep of the need, up to aheadMaxHeadroom), at most one a
// lead time (it takes that long to show); once under half the budget it is lowered a step at
// a time, each after aheadFeedbackLeads lead times without a change. The headroom is a share
// of the need, so it follows the demand down: a pool whose latency stays over the SLA at a
// low need (the latency not the load's) keeps a share of that low need more, not of what it
// needed at a peak. It returns the engines added (at least one with a headroom).
func (t *tick) sloHeadroom(c Component, n int, lead float64) int {
	f := t.feedback(c)
	tr := t.in.Traffic
	num, window := *tr.NumReq, aheadFeedbackLeads*lead
	w := math.Min(1, tr.DurationS/window)
	over := func(v *float64, sla float64) bool { return v != nil && finite(*v) && *v > sla }
	var missed bool
	// The TTFTs of a backlog being cleared are its queue's tail (clearingBacklog), which
	// engines added to the pool would not serve.
	ttft := over(tr.TTFTMs, t.p.cfg.TTFTMs) && !t.clearingBacklog
	switch {
	case t.p.cfg.Mode == config.ModeAgg:
		missed = ttft || over(tr.ITLMs, t.p.cfg.ITLMs)
	case c == Prefill:
		missed = ttft
	default:
		missed = over(tr.ITLMs, t.p.cfg.ITLMs)
	}
	missed = missed && num > 0 && t.settled(c) && !t.grewWithin(c) && !t.outranForecast(lead)
	m := 0.0
	if missed {
		m = num
	}
	f.Missed += w * (m - f.Missed)
	f.Seen += w * (num - f.Seen)
	now := t.in.Now
	switch share := f.share(); {
	case missed && share > aheadMissBudget && f.Headroom < aheadMaxHeadroom && (f.Headroom == 0 || now-f.ChangedAt >= lead):
		f.Headroom, f.ChangedAt = math.Min(aheadMaxHeadroom, f.Headroom+aheadHeadroomStep), now
	case share < aheadMissBudget/2 && f.Headroom > 0 && now-f.ChangedAt >= window:
		f.Headroom, f.ChangedAt = math.Max(0, f.Headroom-aheadHeadroomStep), now
	}
	return f.headroomFor(n)
}

// headroomFor is the engines the headroom adds to a need of n: at least one while there is
// any, none without.
func (f *SLOFeedback) headroomFor(n int) int {
	if f == nil || f.Headroom <= 0 || n <= 0 {
		return 0
	}
	return max(1, int(math.Ceil(f.Headroom*float64(n)-1e-9)))
}

// outranForecast reports whether the demand's level (its rate over the level window, as the
// forecast measures it) exceeds the demand the pools were sized for a lead time or more
// before (Sized: the forecast with the misses it added, at the last tick of the newest bucket
// that old): the capacity ready now was ordered on it, so a miss at a level beyond it is the
// forecast's — which forecastMiss raises the next forecasts for (on calm arrivals of a
// disaggregated deployment, beyond the rise they already have: carryMisses; not after a
// forecast of none, which Sized keeps as aheadSizedNone and Forecast not at all) — not the
// sizing's. Counted by the SLO feedback too, a level shift no forecast could foresee (a step
// from 4 to 24 req/s) added a quarter of the need for the twenty minutes after the pool had
// caught up with it. The level, not the interval's rate: a burst within the level window is
// for the sizing's margins and the feedback to cover. False when that demand or the level is
// unknown (the first lead times, a gap in the history, a state from before Sized was kept).
func (t *tick) outranForecast(lead float64) bool {
	a := t.st.Ahead
	if a == nil || !(a.BucketS > 0) || !(lead > 0) || math.IsInf(lead, 0) {
		return false
	}
	// The newest bucket whose last tick is at least lead old: the one ⌈lead / bucket⌉ + 1
	// before the newest (the newest is still filling).
	back := math.Ceil(lead/a.BucketS) + 1
	if back >= float64(len(a.Count)) {
		return false
	}
	b := len(a.Count) - 1 - int(back)
	if b >= len(a.Sized) || !(a.Sized[b] > 0) {
		return false
	}
	n, _, _, cov := a.recent(a.levelWindow(t.p.loadI))
	return cov > 0 && n/cov > a.Sized[b]
}

// grewWithin reports whether pool c's ready engines grew within this tick's interval: a
// scale-up of it became ready at this tick (measureStartup), or more of its engines are ready
// than at the last tick (known one interval before: ReadyPrefill, ReadyDecode). The
// interval's latency is then the smaller pool's, still catching up with the demand it was
// ordered for: the forecast's lag, as while the engines started.
func (t *tick) grewWithin(c Component) bool {
	before := t.readyPBefore
	if c == Decode {
		before = t.readyDBefore
	}
	return t.readied[c] || (before > 0 && t.current(c) > before)
}

// settled reports whether pool c has no scale-up under way: its target is no more than its
// ready count, known from the connector (or, when the connector does not say, the target
// last submitted); a connector that leaves the target unknown while it reports scaling in
// progress (the Kubernetes connector while a component is not stable) is not settled.
func (t *tick) settled(c Component) bool {
	e, busy := t.expectedP, t.inProgP
	if c == Decode {
		e, busy = t.expectedD, t.inProgD
	}
	if e == nil && busy {
		return false
	}
	return t.provisioned(c) <= t.current(c)
}
