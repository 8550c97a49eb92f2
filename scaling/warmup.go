package scaling

import (
	"fmt"
	"math"

	"github.com/llmplanner/planner/predict"
)

// MaxWarmupWindows bounds the throughput-interval windows a warm-up trace may span for
// Dynamo's predictors (100,000: 208 days at Dynamo's default 180 s interval, 69 at 60 s): a
// trace whose two requests are years apart is refused, not bucketed into billions of empty
// windows.
const MaxWarmupWindows = 100_000

// usesWarmup reports whether the configured policy reads load_predictor_warmup_trace:
// Dynamo's throughput-loop predictors (optimization_target sla, throughput scaling on) and
// the ahead policy's traffic history. Other configurations ignore the key.
func (p *Planner) usesWarmup() bool {
	if p.cfg.LoadPredictorWarmupTrace == nil || !p.sla() {
		return false
	}
	return p.cfg.Ahead() || p.cfg.EnableThroughputScaling
}

// ReadWarmup reads the trace load_predictor_warmup_trace names, for Bootstrap.Warmup, when
// the configured policy uses it (nil and no error otherwise), and a note saying what it
// warms, or why it was not read (no note when the key is unset). The workflow's Init
// activity and the replay both start from it, so both paths decide alike. An empty trace is
// an error, not a cold start.
func (p *Planner) ReadWarmup() ([]predict.Request, string, error) {
	if p.cfg.LoadPredictorWarmupTrace == nil {
		return nil, "", nil
	}
	if !p.usesWarmup() {
		return nil, fmt.Sprintf("load_predictor_warmup_trace not read: %s", p.warmupUnused()), nil
	}
	path := *p.cfg.LoadPredictorWarmupTrace
	var filter predict.TraceFilter
	if m := p.cfg.LoadPredictorWarmupTraceModel; m != nil {
		filter.Model = *m
	}
	reqs, err := predict.ReadTraceOf(path, filter)
	if err != nil {
		return nil, "", fmt.Errorf("load_predictor_warmup_trace: %w", err)
	}
	if len(reqs) == 0 {
		return nil, "", fmt.Errorf("load_predictor_warmup_trace %s: no requests", path)
	}
	path = filter.Label(path)
	if err := p.checkWarmup(reqs); err != nil {
		return nil, "", fmt.Errorf("load_predictor_warmup_trace %s: %w", path, err)
	}
	span := reqs[len(reqs)-1].Arrival - reqs[0].Arrival
	if p.cfg.Ahead() {
		keep := AheadHistoryBuckets * AheadBucket(p.cfg.StartupPriorSeconds(), p.loadI)
		return reqs, fmt.Sprintf("ahead's traffic history warmed with the last %.0f s of %s (%.0f s, %d requests)", math.Min(span, keep), path, span, len(reqs)), nil
	}
	return reqs, fmt.Sprintf("predictors warmed with %d windows of %s", int(span/p.thrI)+1, path), nil
}

// checkWarmup refuses a warm-up for Dynamo's predictors that spans MaxWarmupWindows
// throughput intervals or more.
func (p *Planner) checkWarmup(reqs []predict.Request) error {
	if len(reqs) == 0 || p.cfg.Ahead() {
		return nil
	}
	if span := reqs[len(reqs)-1].Arrival - reqs[0].Arrival; !(span/p.thrI < MaxWarmupWindows) {
		return fmt.Errorf("scaling: warm-up trace spans %.0f s: %d windows of %.0f s at most", span, MaxWarmupWindows, p.thrI)
	}
	return nil
}

// warm fills an empty history with a warm-up trace (in arrival order) taken to end at now
// (the planner's start): the load intervals of its newest AheadHistoryBuckets buckets,
// counted back from its last request, one at a time as live ticks would have recorded them
// (ending at now, now − interval, …, on the live ticks' grid). Only the traffic is warmed —
// the forecasts, the needs (so the deployment found at the start is not taken as the first
// bucket's need: the traffic before the start is known) and what the engines showed are
// learned live — so the forecast's own misses are measured from the first live forecasts
// on, and the first scale-down still waits for the trend window of live traffic (LiveS).
// Arrivals are only compared with the last one, so a trace whose timestamps are far from
// zero, or span years, costs no more than its requests and the history's intervals.
func (a *AheadState) warm(now, interval float64, reqs []predict.Request) {
	if len(reqs) == 0 || !(interval > 0) || !(a.BucketS > 0) {
		return
	}
	end := reqs[len(reqs)-1].Arrival
	n := int(math.Ceil(AheadHistoryBuckets * a.BucketS / interval)) // intervals kept
	count, isl, osl := make([]float64, n), make([]float64, n), make([]float64, n)
	oldest := 0
	for i := len(reqs) - 1; i >= 0; i-- {
		ago := end - reqs[i].Arrival
		if !(ago >= 0) || ago >= float64(n)*interval {
			break // older than the history (or out of order)
		}
		j := min(n-1, int(ago/interval))
		count[j]++
		isl[j] += float64(reqs[i].InputTokens)
		osl[j] += float64(reqs[i].OutputTokens)
		oldest = max(oldest, j)
	}
	if ago := end - reqs[0].Arrival; ago >= float64(n)*interval {
		oldest = n - 1 // the trace covers the whole history, quiet at its start or not
	}
	a.Warmed = true
	for j := oldest; j >= 0; j-- {
		var meanISL, meanOSL float64
		if count[j] > 0 {
			meanISL, meanOSL = isl[j]/count[j], osl[j]/count[j]
		}
		a.record(now-float64(j)*interval, interval, count[j], meanISL, meanOSL)
	}
}

// warmupUnused says why the configured policy has no use for a warm-up trace.
func (p *Planner) warmupUnused() string {
	if !p.sla() {
		return "optimization_target throughput has no predictors"
	}
	return "throughput scaling is off, and its predictors with it"
}
