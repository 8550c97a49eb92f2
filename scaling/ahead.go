package scaling

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// The ahead policy's fixed parameters. They are the same for every deployment and trace;
// docs/policy.md says where each comes from.
const (
	// AheadMaxBucketSeconds bounds the width of the request-rate history's buckets, which
	// is half the expected lead time (30 s for a 60 s startup and a 5 s interval), a whole
	// number of intervals. The other windows are counted in buckets, so the policy works
	// at the deployment's own time scale.
	AheadMaxBucketSeconds = 60
	// AheadHistoryBuckets bounds the history: 120 buckets (an hour of 30 s buckets), so
	// periods up to 80 buckets are detected (one and a half periods are needed).
	AheadHistoryBuckets = 120
	// aheadTrendBuckets is the shortest window the trend is fitted over, in buckets (at
	// least twice the lead time).
	aheadTrendBuckets = 4
	// aheadLengthSeconds is the window the mean ISL and OSL are taken over.
	aheadLengthSeconds = 300
	// aheadQuantileZ is the forecast's upper quantile (90%), in standard deviations of the
	// rate's variation beyond Poisson noise (queueing accounts for Poisson noise).
	aheadQuantileZ = 1.2816
	// aheadWaitMissShare is the share of requests the prefill sizing lets wait past the TTFT
	// slack (the modelled queueing tail).
	aheadWaitMissShare = 0.02
	// aheadForeseenWaitMissShare is that share when the forecast is foreseen (a period
	// followed on calm arrivals, Forecast.foreseen), whose decode sizing keeps no Poisson
	// spread either: its own misses are measured at the horizon it sizes for and added, and
	// it is the highest rate of the lead time, which the rate seldom reaches within it.
	aheadForeseenWaitMissShare = 0.1
	// aheadDecodeDownSpare is the share of the decode engines' rate at the SLA that a
	// scale-down leaves spare (the tolerance of Kubernetes' HPA, 10%, as a one-sided band).
	aheadDecodeDownSpare = 0.1
	// aheadDecodeSpreadZ is how many standard deviations of the decode concurrency (Poisson:
	// the square root of the mean) the decode sizing keeps under its SLA batches: the
	// pool's (pooledBatch), or each engine's own (engineSpreadBatch: an aggregated engine,
	// and a disaggregated pool's observed concurrency).
	aheadDecodeSpreadZ = 1.0
	// aheadMinSeasonalCorrelation is the autocorrelation a period needs to be used (its
	// forecast then bounds the trend's from below), and aheadTrustedCorrelation the one at
	// which it replaces the trend.
	aheadMinSeasonalCorrelation = 0.5
	aheadTrustedCorrelation     = 0.8
	// aheadMinPeriodBuckets is the shortest period, in buckets.
	aheadMinPeriodBuckets = 4
	// aheadMinShortOverlap is the fewest bucket pairs a lag measured over less than a period
	// of overlap (one and a half to two periods of history) needs to be a period.
	aheadMinShortOverlap = 8
	// aheadExcessWeight is the weight of one interval's observation in the running excess
	// wait (about 20 intervals' memory).
	aheadExcessWeight = 0.05
	// aheadBurstTail is how much larger than the mean a burst the pool serves within the
	// TTFT SLA.
	aheadBurstTail = 1.5
	// aheadMaxGapHoldSeconds bounds how long a scale-down waits for demand that came back
	// after quiet gaps before.
	aheadMaxGapHoldSeconds = 900
	// aheadGapHoldFactor is how many times the longest quiet gap seen a scale-down waits
	// (plus the lead time): a gap seen once or twice says little about how long the next
	// one is.
	aheadGapHoldFactor = 2
	// aheadMaxGapLeads is the longest quiet gap, in lead times, that a scale-down waits out:
	// holding an engine through a longer one costs more GPU time than several restarts
	// (ski rental), and demand away that long comes back through the forecast's trend.
	aheadMaxGapLeads = 6
	// aheadCalmBurst is the burst excess, as a share of the level, under which arrivals
	// count as steady enough to learn the decode edge rate from.
	aheadCalmBurst = 0.1
	// aheadEdgeRelax is how fast the learned decode edge rate relaxes upwards, per interval,
	// while the ready pool runs at the edge (doubles in about 140 such intervals); less below
	// it, and not at all below half of it.
	aheadEdgeRelax = 0.005
	// aheadITLWatch is the share of the ITL SLA from which the observed ITL is read as load.
	aheadITLWatch = 0.8
	// aheadShiftPrompts is the fewest prompts of the newest half lead time whose mean length may
	// replace the aheadLengthSeconds mean, and aheadShiftZ how many standard errors of that
	// mean (the prompts' own spread over their number) it must be longer by (promptShift).
	aheadShiftPrompts = 30
	aheadShiftZ       = 2
	// aheadMinContextRequests is the fewest decode requests the FPMs of a tick must show for
	// their mean context to size the decode batch.
	aheadMinContextRequests = 8
	// aheadBurstyExcess is the burst excess, as a share of the level, over which arrivals
	// count as bursty (bursts over twice the level: on/off traffic, as the Azure code
	// trace's, not a smooth rate's noise), and aheadBurstHoldLeads how many lead times a
	// scale-down then holds the highest count needed.
	aheadBurstyExcess   = 1
	aheadBurstHoldLeads = 3
	// aheadBurstSpan is the fewest intervals whose mean rate an interval's burst is measured
	// against (the bucket's intervals when it holds that many: a lead time of a minute or
	// more, 5 s intervals).
	aheadBurstSpan = 6
	// aheadBurstBuckets is how far back the recent interval rates go, in buckets.
	aheadBurstBuckets = 10
	// aheadMaxRecent bounds the recent interval rates kept.
	aheadMaxRecent = 300
	// aheadBurstShare is the share of recent requests allowed to have arrived faster than
	// the burst rate the pools are sized for.
	aheadBurstShare = 0.1
	// aheadMissLeads is how far back, in lead times, the forecast's own misses are counted
	// (the SLO feedback's memory), and aheadMissWindows the fewest past forecasts whose
	// lead time has passed that are read as a quantile.
	aheadMissLeads   = 10
	aheadMissWindows = 5
	// aheadStepConfidence is the confidence at which the trend window's interval rates are
	// read as a step up rather than a line (an F test of the two fits: stepUp), and
	// aheadStepIntervals the fewest intervals on each side of the step.
	aheadStepConfidence = 0.99
	aheadStepIntervals  = 3
	// aheadWaveFall is how far, as a share of an earlier peak, the rate must have fallen
	// since for that peak to be a wave's, which a rise back is forecast no higher than
	// (wavePeak).
	aheadWaveFall = 0.5
	// aheadMaxLiveS bounds the live seconds a warmed history counts (AheadState.LiveS): past
	// any trend window.
	aheadMaxLiveS = 86400
	// aheadMaxStartupSeconds bounds a measured startup delay; a scale-up not ready after it
	// is forgotten.
	aheadMaxStartupSeconds = 3600
)

// AheadState is the ahead policy's memory: the request-rate history in fixed buckets
// (requests, summed prompt and output tokens, seconds observed) and the startup delay
// measured on its scale-ups.
type AheadState struct {
	// BucketS is the buckets' width in seconds (fixed when the planner starts).
	BucketS float64 `json:"bucket_s"`
	// T0 is the start of the first bucket (seconds, the planner's clock).
	T0 float64 `json:"t0"`
	// Count, ISL, OSL and Covered are per bucket: requests, their summed input and output
	// tokens, and the seconds of the bucket observed (a failed observation leaves a gap).
	Count   []float64 `json:"n"`
	ISL     []float64 `json:"isl"`
	OSL     []float64 `json:"osl"`
	Covered []float64 `json:"cov"`
	// Recent are the request rates of the newest observations (one per interval, newest
	// last, over aheadBurstBuckets buckets) and RecentBucket the bucket (index from T0)
	// of each: the bursts within a bucket the pools must absorb.
	Recent       []float64 `json:"recent"`
	RecentBucket []int     `json:"recent_bucket"`
	// NeedPrefill and NeedDecode are the highest count each pool needed in each bucket
	// (aligned with Count), as the scale-down holds record it (holdNeed: without the engines
	// an aggregated pool's requests-held floor adds on calm arrivals): when demand that
	// needed more came back after a quiet gap, a scale-down waits out such a gap.
	NeedPrefill []int `json:"need_prefill,omitempty"`
	NeedDecode  []int `json:"need_decode,omitempty"`
	// PrefillService and DecodeBatch are the perf model's prefill service time and decode
	// batch at the SLA of the newest ticks, over the last lead time: the online regression
	// can swing from one tick to the next, so the pools are sized with the slowest of them.
	PrefillService []float64 `json:"prefill_service,omitempty"`
	DecodeBatch    []float64 `json:"decode_batch,omitempty"`
	// DecodeEdgeRPS is the request rate per decode engine at which the observed mean ITL
	// reached aheadITLWatch of the SLA: what the engines really sustain, whatever the perf
	// model says (0: never seen). It relaxes by up to aheadEdgeRelax per interval
	// (learnDecodeEdge).
	DecodeEdgeRPS float64 `json:"decode_edge_rps,omitempty"`
	// DecodeWatchAt is the last tick at which a decode pool's observed mean ITL reached
	// aheadITLWatch of the SLA on steady arrivals (0: none; not kept for an aggregated pool):
	// the edge is learned at a watched tick within 1.5 intervals of it (learnDecodeEdge).
	DecodeWatchAt float64 `json:"decode_watch_at,omitempty"`
	// ReadyDecode is the ready decode engines at the last tick (0: not known) and
	// ReadyDecodeAt when that was: the engines ready for the whole interval since are the
	// fewer of it and those ready now, when it was one interval ago (not after ticks of
	// another policy, or missed ones).
	ReadyDecode   int     `json:"ready_decode,omitempty"`
	ReadyDecodeAt float64 `json:"ready_decode_at,omitempty"`
	// ReadyPrefill and ReadyPrefillAt are the same of the prefill engines: the SLO feedback
	// does not count an interval in which a pool's ready engines grew (grewWithin).
	ReadyPrefill   int     `json:"ready_prefill,omitempty"`
	ReadyPrefillAt float64 `json:"ready_prefill_at,omitempty"`
	// DecodeGrewAt is the last tick at which the decode pool's ready engines grew, or might
	// have unseen (grewWithin; or engines starting after a tick whose ready count is not
	// known; 0: none seen): an aggregated pool learns its decode edge while engines start
	// only once a lead time has passed since (aggEdgeReadable), a disaggregated one only from
	// intervals whose finishing requests began after it (finishersPredateGrowth).
	DecodeGrewAt float64 `json:"decode_grew_at,omitempty"`
	// DecodeShown are decode iterations the engines ran within the ITL SLA (a Pareto frontier
	// of requests and KV tokens, slowly forgotten): whatever the refitted perf model says,
	// the decode batch is never sized below what they demonstrate.
	DecodeShown []ShownBatch `json:"decode_shown,omitempty"`
	// DecodeConcurrency are the decode pool's concurrency at the newest ticks, over the last
	// lead time.
	DecodeConcurrency []float64 `json:"decode_concurrency,omitempty"`
	// DecodeHeldRequests and DecodeHeldKV are the decode requests (once per pass) and their KV
	// tokens the FPMs of each of the newest ticks showed, over the last lead time
	// (recordDecodeHeld, decodeContextHeld).
	DecodeHeldRequests []float64 `json:"decode_held_requests,omitempty"`
	DecodeHeldKV       []float64 `json:"decode_held_kv,omitempty"`
	// StartupS is the measured startup delay (0: none measured yet).
	StartupS float64 `json:"startup_s,omitempty"`
	// ExcessWait is the prefill wait the queueing model does not explain, in engine-seconds:
	// the running mean of ready engines × (observed mean wait − the model's mean wait). When
	// requests arrive in bursts spread over the pool, a burst's share of one engine waits
	// about twice the mean, and that shrinks as the pool grows.
	ExcessWait float64 `json:"excess_wait_s,omitempty"`
	// PromptBacklog is the prompt tokens queued on the prompt pool's engines at the last tick
	// and PromptBacklogAt when that was: a backlog smaller than it one interval later is being
	// cleared (learnExcessWait; not compared after ticks of another policy, or missed ones).
	PromptBacklog   float64 `json:"prompt_backlog_tokens,omitempty"`
	PromptBacklogAt float64 `json:"prompt_backlog_at,omitempty"`
	// ClearingAt is the last tick that found a backlog being cleared (learnExcessWait): at the
	// tick after it, one interval later, whose interval ends that queue's tail, while the
	// queued prompts are still fewer than at it, the excess wait is not learned and the SLO
	// feedback does not count the TTFT as missed either (clearingBacklog).
	ClearingAt float64 `json:"clearing_backlog_at,omitempty"`
	// FeedbackPrefill and FeedbackDecode are the SLO feedback of each pool (agg: Decode):
	// the share of requests served in intervals whose observed latency broke the SLA while
	// the pool was settled, and the share of the pool's need added for it.
	FeedbackPrefill *SLOFeedback `json:"feedback_prefill,omitempty"`
	FeedbackDecode  *SLOFeedback `json:"feedback_decode,omitempty"`

	// UpPrefill and UpDecode are scale-ups waiting to become ready (their target and when
	// they were decided), to measure the startup delay.
	UpPrefill *PendingDesired `json:"up_prefill,omitempty"`
	UpDecode  *PendingDesired `json:"up_decode,omitempty"`

	// LearnedTTFTMs and LearnedITLMs are the SLA targets what the policy learned was
	// learned against (0: a state from before they were kept, taken as the configured
	// ones). When `set_sla` or `update_config` changes a target, what was learned against
	// the old one is forgotten (forgetOtherSLA).
	LearnedTTFTMs float64 `json:"learned_ttft_ms,omitempty"`
	LearnedITLMs  float64 `json:"learned_itl_ms,omitempty"`

	// Warmed says the history began with a warm-up trace (warm), and LiveS counts the
	// seconds of live traffic observed since (at most aheadMaxLiveS): what the engines show
	// (the excess wait, the batches within the SLA) is learned live, so a warmed planner
	// waits as long as a cold one before its first scale-down.
	Warmed bool    `json:"warmed,omitempty"`
	LiveS  float64 `json:"live_s,omitempty"`

	// Forecast is, per bucket (aligned with Count), the demand the forecast gave at the
	// bucket's last tick, before its own misses were added (0: none made, or a forecast of
	// none): what the forecast's misses are measured on (forecastMiss). A forecast of none is
	// not measured: demand that comes back after a stop is a level, not a bias of the
	// forecast's to raise the next ones by (Sized keeps it, for outranForecast).
	Forecast []float64 `json:"forecast,omitempty"`
	// Sized is, per bucket (aligned with Count), the demand the pools were sized for at the
	// bucket's last tick: the forecast with the misses it added (0: none made, or a state
	// from before it was kept; a forecast of no demand is kept as aheadSizedNone; on calm
	// arrivals of a disaggregated deployment the misses its rise carries are not added:
	// carryMisses). The SLO feedback does not count a miss at a level beyond it
	// (outranForecast).
	Sized []float64 `json:"sized,omitempty"`
}

func (a *AheadState) clone() *AheadState {
	if a == nil {
		return nil
	}
	c := *a
	c.Count, c.ISL, c.OSL, c.Covered = slices.Clone(a.Count), slices.Clone(a.ISL), slices.Clone(a.OSL), slices.Clone(a.Covered)
	c.Recent, c.RecentBucket = slices.Clone(a.Recent), slices.Clone(a.RecentBucket)
	c.DecodeConcurrency = slices.Clone(a.DecodeConcurrency)
	c.DecodeHeldRequests, c.DecodeHeldKV = slices.Clone(a.DecodeHeldRequests), slices.Clone(a.DecodeHeldKV)
	c.DecodeShown = slices.Clone(a.DecodeShown)
	c.PrefillService, c.DecodeBatch = slices.Clone(a.PrefillService), slices.Clone(a.DecodeBatch)
	if a.FeedbackPrefill != nil {
		c.FeedbackPrefill = ptr(*a.FeedbackPrefill)
	}
	if a.FeedbackDecode != nil {
		c.FeedbackDecode = ptr(*a.FeedbackDecode)
	}
	c.NeedPrefill, c.NeedDecode = slices.Clone(a.NeedPrefill), slices.Clone(a.NeedDecode)
	c.Forecast, c.Sized = slices.Clone(a.Forecast), slices.Clone(a.Sized)
	if a.UpPrefill != nil {
		c.UpPrefill = ptr(*a.UpPrefill)
	}
	if a.UpDecode != nil {
		c.UpDecode = ptr(*a.UpDecode)
	}
	return &c
}

// record adds a traffic window ending at now to the history (the bucket of its midpoint).
func (a *AheadState) record(now, dur, n, isl, osl float64) {
	mid := now - dur/2
	if len(a.Count) == 0 {
		a.T0 = math.Floor(mid/a.BucketS) * a.BucketS
	}
	idx := int(math.Floor((mid - a.T0) / a.BucketS))
	if idx < 0 {
		return // older than the history: ignored
	}
	if idx >= len(a.Count)+AheadHistoryBuckets {
		// A gap longer than the history: start again.
		a.Count, a.ISL, a.OSL, a.Covered, a.Recent, a.RecentBucket = nil, nil, nil, nil, nil, nil
		a.NeedPrefill, a.NeedDecode, a.Forecast, a.Sized = nil, nil, nil, nil
		a.T0 = math.Floor(mid/a.BucketS) * a.BucketS
		idx = 0
	}
	for len(a.Count) <= idx {
		a.Count, a.ISL, a.OSL, a.Covered = append(a.Count, 0), append(a.ISL, 0), append(a.OSL, 0), append(a.Covered, 0)
	}
	a.Count[idx] += n
	a.ISL[idx] += n * isl
	a.OSL[idx] += n * osl
	a.Covered[idx] += dur
	a.Recent, a.RecentBucket = append(a.Recent, n/dur), append(a.RecentBucket, idx)
	if keep := min(aheadMaxRecent, max(1, int(math.Ceil(aheadBurstBuckets*a.BucketS/dur)))); len(a.Recent) > keep {
		a.Recent = slices.Delete(a.Recent, 0, len(a.Recent)-keep)
		a.RecentBucket = slices.Delete(a.RecentBucket, 0, len(a.RecentBucket)-keep)
	}
	if drop := len(a.Count) - AheadHistoryBuckets; drop > 0 {
		a.Count, a.ISL, a.OSL, a.Covered = a.Count[drop:], a.ISL[drop:], a.OSL[drop:], a.Covered[drop:]
		a.T0 += float64(drop) * a.BucketS
		a.NeedPrefill = a.NeedPrefill[min(drop, len(a.NeedPrefill)):]
		a.NeedDecode = a.NeedDecode[min(drop, len(a.NeedDecode)):]
		a.Forecast = a.Forecast[min(drop, len(a.Forecast)):]
		a.Sized = a.Sized[min(drop, len(a.Sized)):]
		for i := range a.RecentBucket {
			a.RecentBucket[i] -= drop
		}
	}
}

// recent sums the newest buckets until at least seconds are covered: requests, tokens and
// seconds.
func (a *AheadState) recent(seconds float64) (n, isl, osl, cov float64) {
	for i := len(a.Count) - 1; i >= 0 && cov < seconds; i-- {
		n, isl, osl, cov = n+a.Count[i], isl+a.ISL[i], osl+a.OSL[i], cov+a.Covered[i]
	}
	return n, isl, osl, cov
}

// burst is the request-weighted upper quantile of how much faster than their reference mean
// (burstReference: their bucket's, or the buckets' around it) the recent intervals'
// requests arrived, beyond Poisson noise (which the queueing and
// batch models already allow for): the excess rate that aheadBurstShare of the recent
// requests exceeded (0 for Poisson arrivals). interval is the observations' length.
func (a *AheadState) burst(interval float64) float64 {
	var ex []excess
	for i, r := range a.Recent {
		mean, ok := a.burstReference(a.RecentBucket[i], interval)
		if !ok || r <= 0 {
			continue
		}
		ex = append(ex, excess{r - mean - aheadQuantileZ*math.Sqrt(mean/interval), r})
	}
	return upperExcess(ex)
}

// burstReference is the mean rate the intervals of bucket b are measured against for
// bursts: their bucket's, or, when a bucket holds fewer than aheadBurstSpan intervals (a
// short lead time; a bucket of one interval shows no burst at all), that of the buckets
// around it spanning about that many (false when none of them was observed).
func (a *AheadState) burstReference(b int, interval float64) (float64, bool) {
	if b < 0 || b >= len(a.Count) {
		return 0, false
	}
	half := 0
	if a.BucketS > 0 && interval > 0 {
		// Buckets on each side so that the 2·half+1 buckets hold aheadBurstSpan intervals.
		half = max(0, int(math.Ceil((aheadBurstSpan*interval/a.BucketS-1)/2)))
	}
	var n, cov float64
	for j := max(0, b-half); j <= min(len(a.Count)-1, b+half); j++ {
		n, cov = n+a.Count[j], cov+a.Covered[j]
	}
	if cov <= 0 {
		return 0, false
	}
	return n / cov, true
}

// unsteadiness is how much faster than level the requests of the last window seconds'
// intervals arrived, beyond Poisson noise: the request-weighted (1 − aheadBurstShare)
// quantile, like burst, but against the current level rather than each interval's bucket,
// so that it also sees the bursts when a bucket is a single interval, and those of the
// buckets before the current one (≥ 0).
func (a *AheadState) unsteadiness(level, interval, window float64) float64 {
	var ex []excess
	n := min(len(a.Recent), max(1, int(math.Ceil(window/interval))))
	for _, r := range a.Recent[len(a.Recent)-n:] {
		if r > 0 {
			ex = append(ex, excess{r - level - aheadQuantileZ*math.Sqrt(level/interval), r})
		}
	}
	return upperExcess(ex)
}

// excess is how much faster than expected an interval's requests arrived (by), weighted
// by its rate.
type excess struct{ by, weight float64 }

// upperExcess is the request-weighted (1 − aheadBurstShare) quantile of the excesses (≥ 0).
func upperExcess(ex []excess) float64 {
	var total float64
	for _, e := range ex {
		total += e.weight
	}
	slices.SortFunc(ex, func(x, y excess) int { return cmp.Compare(y.by, x.by) })
	var above float64
	for _, e := range ex {
		above += e.weight
		if above >= aheadBurstShare*total {
			return math.Max(0, e.by)
		}
	}
	return 0
}

// rate is bucket i's request rate (NaN when it was not observed enough to say).
func (a *AheadState) rate(i int) float64 {
	if i < 0 || i >= len(a.Count) || a.Covered[i] < a.BucketS/2 {
		return math.NaN()
	}
	return a.Count[i] / a.Covered[i]
}

// Forecast is the ahead policy's demand forecast for one tick.
type Forecast struct {
	// Level is the current request rate; Slope its trend (req/s per s) and Spread the
	// standard deviation of its variation beyond Poisson noise (around the trend, or around
	// the period when the forecast follows one).
	Level, Slope, Spread float64
	// PeriodS is the detected period (0: none) and Seasonal the rate a period ago over the
	// coming lead time, scaled to the current level.
	PeriodS, Seasonal float64
	// Correlation is the period's autocorrelation (0 without a period).
	Correlation float64
	// Step is the rate after a step up found in the trend window on calm arrivals (stepUp),
	// which replaces the trend's rise (0: none found).
	Step float64
	// Bend is the rise over the horizon of a rise found slowing down (bentRise), which
	// replaced the line's, LineRise (both 0: none found, the line's was not higher, or a
	// followed period gave the forecast).
	Bend, LineRise float64
	// Trough is the rise over the horizon of a rise found turning up from a trough
	// (troughRise), which replaced the line's, TroughLine (both 0: none found, the line's was
	// not lower, or a followed period gave the forecast).
	Trough, TroughLine float64
	// WavePeak is a wave's earlier peak that held the forecast (holdToWavePeak), and PeakCut
	// what that took off it, its misses first (both 0: none held it).
	WavePeak, PeakCut float64
	// wave is the earlier peak holdToWavePeak reads (wavePeak; 0: none, bursty arrivals, or
	// a followed period).
	wave float64
	// Trusted says the forecast follows the period rather than the trend: the
	// autocorrelation and the period's fit over its last period (seasonalFit) both reach
	// aheadTrustedCorrelation, and a bucket a period ago over the lead time was observed.
	Trusted bool
	// Rate is the demand the pools are sized for: the upper quantile of the forecast over
	// the lead time, bursts within a bucket included.
	Rate float64
	// ISL and OSL are the recent mean lengths.
	ISL, OSL float64
	// Burst is the excess rate of the recent bursts within a bucket (or the buckets around
	// it: burstReference), beyond Poisson noise.
	Burst float64
	// Missed is what Rate includes for the forecast's own misses (forecastMiss, less what
	// carryMisses and holdToWavePeak took off; 0 when a followed period gives the forecast),
	// over MissWindows past forecasts.
	Missed      float64
	MissWindows int
	// Carried is the part of the misses that the forecast's rise above its level and margins
	// already holds, not added again (carryMisses).
	Carried float64
	// Fall is how far the trend falls over the horizon at its current slope (0 when it does
	// not fall, or a step up was found): the slope of the parabola through the trend window's
	// interval rates at the newest of them when it fits better than the line (curve), else
	// the line's when it falls beyond chance (trendFit.fallsOnItsOwn: the line through the
	// buckets, else the one through the window's interval rates). HeldOff is the part of
	// the misses that fall held off (carryMisses).
	Fall, HeldOff float64
	// FallLasts reports that the fall lasts the horizon: the trend falls now (Fall) and, when
	// the window's parabola fits better than the line, it still falls a horizon past the
	// newest interval (no trough within it; the horizon counts from the level's midpoint, so
	// this is half a level window past the lead time's end, on the cautious side). A
	// disaggregated deployment's scale-down then holds for one bucket, not the lead time
	// (fallingHold).
	FallLasts bool
}

// carryMisses lowers the misses a forecast adds (Missed) by its own rise above the level and
// margins, and then by the fall its trend has now (Fall), on calm arrivals (bursts within the
// buckets at most the level) when no period is followed. There the misses are rises the
// forecast lagged: the line starts from the level and rises only once the rise shows, so a
// rise's start is missed by about its whole swing; added again to a forecast that is rising
// by as much, they count the same rise twice (rr-5-45's second period was forecast at 58
// req/s for a 45 req/s peak: the level 30, the line's rise +16, the margins +1, the misses of
// the first period's rise +11). While the rate falls, the level is already over the rates
// to come, and a rise's misses held the pools up all the way down a wave's fall (rr-5-45's
// first fall was sized for its level plus 10.8 req/s); the fall is read at the newest rates
// (the window's parabola), not along the line through the window, which still falls a
// minute into the next rise and would hold the misses off just when that rise needs them
// (policy.md, "Misses held off by a fall"). Bursty arrivals' misses are bursts on top of
// whatever trend: added whole. The disaggregated pools only: an aggregated pool on a
// sinusoid, already short of the goodput there, lost 5–6 points on two cases without them
// (policy.md, "Misses a rise already carries").
func (f *Forecast) carryMisses() {
	if f.Trusted || f.bursty() || !(f.Missed > 0) {
		return
	}
	f.Carried = math.Min(f.Missed, math.Max(0, f.Rate-f.Missed-f.Level-f.margin()))
	f.Missed -= f.Carried
	f.Rate -= f.Carried
	f.HeldOff = math.Min(f.Missed, f.Fall)
	f.Missed -= f.HeldOff
	f.Rate -= f.HeldOff
}

// margin is the forecast's upper quantile above its expected rate: the spread of the rate's
// variation at aheadQuantileZ and the bursts within the buckets, combined as independent.
func (f Forecast) margin() float64 { return math.Hypot(aheadQuantileZ*f.Spread, f.Burst) }

// foreseen reports whether the forecast follows a period on calm arrivals (bursts within the
// buckets at most aheadCalmBurst of the level): the lead time is known to the interval, not
// to a bucket, a scale-down holds for one bucket, and the queueing models size without
// their margins (margins).
func (f Forecast) foreseen() bool { return f.Trusted && f.Burst <= aheadCalmBurst*f.Level }

// foreseesDemand reports whether the forecast follows a period that foresees demand over
// the lead time (the rates a period ago: Seasonal), which an idle tick orders for
// (tick.idle).
func (f Forecast) foreseesDemand() bool { return f.Trusted && f.Seasonal > 0 }

// bursty reports whether the bursts within the buckets exceed aheadBurstyExcess of the
// level: a scale-down then holds the bursts' need (aheadDecide), and a busy run is not read
// as a step up (stepUp).
func (f Forecast) bursty() bool { return f.Burst > aheadBurstyExcess*f.Level }

// margins are the disaggregated pools' queueing margins for a forecast: the share of
// prompts the prefill sizing lets wait past the TTFT slack, and the standard deviations of
// the decode concurrency's Poisson spread kept under the SLA batch (an aggregated pool
// keeps its own: aheadAggSize).
func (f Forecast) margins() (waitMissShare, decodeSpreadZ float64) {
	if f.foreseen() {
		return aheadForeseenWaitMissShare, 0
	}
	return aheadWaitMissShare, aheadDecodeSpreadZ
}

// forecast predicts the request rate over the next lead seconds from the history.
func (a *AheadState) forecast(lead, interval float64) (Forecast, bool) {
	var f Forecast
	n, isl, osl, cov := a.recent(a.levelWindow(interval))
	if cov <= 0 {
		return f, false
	}
	f.Level = n / cov
	if ln, li, lo, _ := a.recent(aheadLengthSeconds); ln > 0 {
		f.ISL, f.OSL = li/ln, lo/ln
	} else if n > 0 {
		f.ISL, f.OSL = isl/n, osl/n
	}

	// Trend: a least-squares line through the complete buckets of the window.
	window := a.trendWindow(lead)
	last := len(a.Count) - 1
	var xs, ys []float64
	for i := last; i >= 0 && float64(last-i)*a.BucketS < window; i-- {
		if r := a.rate(i); !math.IsNaN(r) {
			xs, ys = append(xs, float64(i)), append(ys, r)
		}
	}
	rise := 0.0 // the trend's rise from the level to the end of the lead time
	horizon := a.horizon(lead, interval)
	var line trendFit // the line through the window, and the rates it was fitted to
	lineN := 0
	if len(xs) >= 3 {
		tf := fitTrend(xs, ys)
		line, lineN = tf, len(xs)
		f.Slope = tf.slope / a.BucketS
		f.Spread = math.Sqrt(math.Max(0, tf.variance-f.Level/a.BucketS)) // minus Poisson noise
		rise = tf.rise(horizon / a.BucketS)
	} else if rates := a.recentSince(last - int(math.Ceil(window/a.BucketS))); len(rates) >= aheadBurstSpan && interval > 0 {
		// Fewer than three buckets in the window (the first minutes, or after a gap in the
		// observations): the same line through the window's interval rates, one per tick,
		// whose spread beyond their own Poisson noise shows a bursty start too.
		tf := fitIntervals(rates)
		line, lineN = tf, len(rates)
		f.Slope = tf.slope / interval
		f.Spread = math.Sqrt(math.Max(0, tf.variance-f.Level/interval))
		rise = tf.rise(horizon / interval)
	}
	// Bursts within a bucket add to the variation between buckets.
	f.Burst = a.burst(interval)
	// A rise from a trough is forecast along its own line (troughRise), not the line through
	// the whole window, which holds the fall before the trough and lags the rise, or falls
	// (unless it is a step, below).
	// The parabola through the window's interval rates is fitted once, for both rules.
	var cv windowCurve
	curved := false
	if !f.bursty() {
		cv, curved = a.curve(window, interval)
	}
	if curved {
		if up, ok := cv.troughRise(interval, horizon, a.highestRate()-f.Level); ok && up > rise {
			f.Trough, f.TroughLine, rise = up, rise, up
		}
	}
	// A step up is not a trend: extrapolated, the line through it would add the step again
	// over the horizon (a step from 1.5 to 41 req/s was forecast at 116 req/s a minute after
	// it). The rate after the step is the forecast's base instead, as the level once its
	// window has passed the step. Not on bursty arrivals, whose busy spells of a few
	// intervals pass for steps and whose rises a burst later needs. A step after a fall also
	// reads as a rise from a trough: the step wins.
	if rise > 0 && !f.bursty() {
		if post, ok := a.stepUp(window, interval); ok {
			f.Step, f.Slope, f.Trough, f.TroughLine = post, 0, 0, 0
			rise = math.Max(0, post-f.Level)
		}
	}
	// The trend's slope now, for the fall that holds off a rise's misses (carryMisses): the
	// parabola's at the newest interval when it fits better than the line, which turns at a
	// trough while the line through the window still falls; else the line's, when it falls
	// beyond chance (a flat rate's noise tilts the line either way) — through the buckets, or
	// through the window's interval rates, whose several times as many points show a fall
	// the buckets' few leave within chance (rr-5-45's first fall, 100 s past its peak, where
	// the parabola's bend is within the noise). None after a step up, which a parabola bends
	// over as if it were a peak.
	if f.Step == 0 {
		now := 0.0
		if lineN > 2 && line.fallsOnItsOwn(lineN) {
			now = f.Slope
		} else if len(cv.ys) > 2 {
			if il := fitIntervals(cv.ys); il.fallsOnItsOwn(len(cv.ys)) {
				now = il.slope / interval
			}
		}
		if curved { // positions centred on the window (fitParabola): the newest at (n−1)/2
			now = cv.p.slope(float64(len(cv.ys)-1)/2) / interval
		}
		if fall := -now * horizon; fall > 0 && !math.IsInf(fall, 0) {
			f.Fall = fall
			// The parabola's slope a horizon past the newest interval's middle.
			f.FallLasts = !curved || cv.p.slope(float64(len(cv.ys)-1)/2+horizon/interval) < 0
		}
	}
	// A rise that slows down is forecast to its turn (bentRise), not along the line through
	// the whole window, which keeps the rise's earlier slope past the turn.
	if rise > 0 && f.Step == 0 && curved { // a trough's parabola curves up: no bend
		if bent, ok := cv.bentRise(interval, a.levelWindow(interval), horizon); ok && bent < rise {
			f.Bend, f.LineRise, rise = bent, rise, bent
		}
	}
	margin := f.margin()
	// The level is about half a level window old; the engines decided now serve until the
	// end of the lead time.
	f.Rate = f.Level + rise + margin

	if period, acf, pairs, ok := a.period(); ok {
		f.PeriodS, f.Correlation = float64(period)*a.BucketS, acf
		// The last period's level against the one before it: how the pattern has grown.
		scale := 1.0
		// Only over two whole periods: part of one, as one and a half periods of history
		// leave, has the mean of the phases it holds, which a lag a bucket off shifts.
		if last-2*period+1 >= 0 {
			if prev, cur := a.rateOver(last-2*period+1, last-period), a.rateOver(last-period+1, last); prev > 0 {
				scale = math.Min(2, math.Max(0.5, cur/prev))
			}
		}
		// Trusted: as correlated over the history as over its last period.
		spread, recent := a.seasonalFit(period, scale)
		f.Trusted = correlationLowerBound(acf, pairs) >= aheadTrustedCorrelation && recent >= aheadTrustedCorrelation
		ahead := math.NaN()
		// The lead time's buckets a period ago, and one more — the period is only known to a
		// bucket — unless it is followed on steady arrivals.
		from, to := a.bucketsAhead(lead)
		if !f.foreseen() {
			to++
		}
		for h := from; h <= to; h++ {
			if r := a.rate(last - period + h); !math.IsNaN(r) && (math.IsNaN(ahead) || r > ahead) {
				ahead = r
			}
		}
		if !math.IsNaN(ahead) {
			f.Seasonal = ahead * scale
			if f.Trusted {
				// A clear period: it knows the turns a trend overshoots, and its own misses
				// are the spread to allow for.
				f.Spread, f.Step, f.Bend, f.LineRise, f.Trough, f.TroughLine = spread, 0, 0, 0, 0, 0
				f.Rate = math.Max(0, f.Seasonal+a.seasonalMiss(period, scale)) + f.margin()
			} else {
				f.Rate = math.Max(f.Rate, f.Seasonal+margin)
			}
		} else if f.Trusted {
			// None of the buckets a period ago over the lead time was observed (a gap in the
			// traffic seen): the period says nothing of the rates to come, so the forecast is
			// the trend's, with its misses and the holds of a period not followed — and, as
			// for one, the bucket after them bounds it from below when it was observed (a
			// followed period on steady arrivals did not look at it).
			foreseen := f.foreseen()
			f.Trusted = false
			if r := a.rate(last - period + to + 1); foreseen && !math.IsNaN(r) {
				f.Seasonal = r * scale
				f.Rate = math.Max(f.Rate, f.Seasonal+margin)
			}
		}
	}
	// A followed period adds its own misses (seasonalMiss); any other forecast, the upper
	// quantile of its misses over the last lead times.
	if !f.Trusted {
		f.Missed, f.MissWindows = a.forecastMiss(lead, interval)
		f.Rate += f.Missed
		if !f.bursty() {
			f.wave, _ = a.wavePeak(window) // holdToWavePeak reads it
		}
	}
	return f, true
}

// holdToWavePeak holds the forecast, its misses first, to a wave's earlier peak (wave, found
// by forecast on calm arrivals with no followed period) plus the margin, while the level is
// not past that peak by more than the margin: a wave comes back to about its earlier peak,
// where the line through its steepest rise and the misses of its earlier rises carry the
// forecast far past it (a 9–56 req/s sinusoid of a 300 s period was forecast at 90 req/s at
// its second peak). The level, a step found (stepUp) and the rate of a period found but not
// followed are measured, not extrapolated: the forecast is never held under any of them plus
// the margin. Called after carryMisses, so that it holds what the tick sizes for.
func (f *Forecast) holdToWavePeak() {
	margin := f.margin()
	if !(f.wave > 0) || !(f.Level < f.wave+margin) {
		return
	}
	top := math.Max(math.Max(f.wave, f.Level), math.Max(f.Seasonal, f.Step)) + margin
	if cut := f.Rate - top; cut > 0 {
		f.WavePeak, f.PeakCut = f.wave, cut
		f.Missed -= math.Min(cut, f.Missed)
		f.Rate = top
	}
}

// wavePeak is the highest bucket rate of the history before the trend window (the newest
// window seconds), when a later bucket's rate fell to aheadWaveFall of it or below: a wave's
// earlier peak (ok false when there is none, or the rate has not fallen that far since; a
// flat rate's noisy highs never do).
func (a *AheadState) wavePeak(window float64) (peak float64, ok bool) {
	last := len(a.Count) - 1
	at := -1
	for i := 0; i <= last && float64(last-i)*a.BucketS >= window; i++ {
		if r := a.rate(i); !math.IsNaN(r) && (at < 0 || r > peak) {
			peak, at = r, i
		}
	}
	if at < 0 || !(peak > 0) {
		return 0, false
	}
	for i := at + 1; i <= last; i++ {
		if r := a.rate(i); !math.IsNaN(r) && r <= aheadWaveFall*peak {
			return peak, true
		}
	}
	return 0, false
}

// levelWindow is the span the level (the current rate) is measured over: a bucket, and at
// least two intervals.
func (a *AheadState) levelWindow(interval float64) float64 {
	return math.Max(a.BucketS, 2*interval)
}

// horizon is how far ahead of the level the forecast reaches, in seconds: the lead time, plus
// half the window the level is measured over (max(a bucket, two intervals)), which the level
// is that old on average.
func (a *AheadState) horizon(lead, interval float64) float64 {
	return lead + a.levelWindow(interval)/2
}

// recordForecast notes the demand rate the forecast gave at this tick, before its own misses
// were added (rate) and with them (sized), as the newest bucket's (its last tick's stand).
func (a *AheadState) recordForecast(rate, sized float64) {
	for len(a.Forecast) < len(a.Count) {
		a.Forecast = append(a.Forecast, 0)
	}
	for len(a.Sized) < len(a.Count) {
		a.Sized = append(a.Sized, 0)
	}
	last := len(a.Count) - 1
	if last < 0 {
		return
	}
	if finite(rate) && rate > 0 {
		a.Forecast[last] = rate
	}
	if finite(sized) && sized >= 0 {
		// A forecast of no demand is a forecast made: kept as aheadSizedNone, not as 0 (none
		// made), so demand that comes back after a stop outran it (outranForecast).
		a.Sized[last] = math.Max(sized, aheadSizedNone)
	}
}

// aheadSizedNone is the demand (req/s) AheadState.Sized keeps for a bucket whose pools were
// sized for none: any arrival exceeds it.
const aheadSizedNone = 1e-9

// forecastMiss is how much the demand has exceeded the forecast: for each bucket of the last
// aheadMissLeads lead times whose lead time has passed, the highest rate of the complete
// buckets over that lead time (the forecast's horizon) minus the forecast made in it; of
// these misses, the upper quantile the forecast aims at (90%, as aheadQuantileZ), when
// positive and at least aheadMissWindows were measured (the 0.9·(n−1)-th of the n misses
// sorted); and how many were. A forecast is meant to be exceeded one time in ten; one
// exceeded more often — a convex rise the trend lags, a burst pattern the spread misses — is
// raised by what its misses say, in the spirit of a conformal interval calibrated on its own
// errors. Only the rises count: a forecast that is exceeded less often is not lowered (its
// margins also cover bursts within the buckets, which the bucket rates do not show).
func (a *AheadState) forecastMiss(lead, interval float64) (float64, int) {
	h := max(1, int(math.Ceil(a.horizon(lead, interval)/a.BucketS)))
	back := max(1, int(math.Ceil(aheadMissLeads*lead/a.BucketS)))
	newest := len(a.Count) - 2 // the newest bucket may be incomplete: not counted
	var miss []float64
	for b := newest - h; b >= 0 && b >= newest-h-back; b-- {
		if b >= len(a.Forecast) || !(a.Forecast[b] > 0) {
			continue
		}
		top := math.NaN()
		for j := b + 1; j <= b+h; j++ {
			if r := a.rate(j); !math.IsNaN(r) && (math.IsNaN(top) || r > top) {
				top = r
			}
		}
		if !math.IsNaN(top) {
			miss = append(miss, top-a.Forecast[b])
		}
	}
	if len(miss) < aheadMissWindows {
		return 0, len(miss)
	}
	slices.Sort(miss)
	q := miss[int(math.Floor(0.9*float64(len(miss)-1)))]
	return math.Max(0, q), len(miss)
}

// bucketsAhead are the buckets the next lead seconds fall in, counted from the newest
// one: from 0 while the newest is still filling, else 1 (the newest bucket's observed
// seconds say how far into it the history is).
func (a *AheadState) bucketsAhead(lead float64) (from, to int) {
	last := len(a.Count) - 1
	if last < 0 {
		return 0, 0
	}
	if a.Covered[last] >= a.BucketS {
		from = 1
	}
	return from, max(from, int(math.Ceil((a.Covered[last]+lead)/a.BucketS))-1)
}

// seasonalMiss is how far the newest bucket's rate is above what the period said for it
// (scale × the rate a period before; 0 when either is unknown): the forecast follows the
// period's shape from the current level.
func (a *AheadState) seasonalMiss(period int, scale float64) float64 {
	last := len(a.Count) - 1
	r, before := a.rate(last), a.rate(last-period)
	if math.IsNaN(r) || math.IsNaN(before) {
		return 0
	}
	return r - scale*before
}

// seasonalFit measures how well the period predicted the last period of buckets — each
// bucket's rate against scale × the rate a period before: the standard deviation of its
// misses beyond the Poisson noise of both (spread), and the autocorrelation those misses
// imply, 1 − mean squared miss / (2 × the rates' variance) (recent; as the whole history's,
// for a stationary series), which a period must still reach to be trusted (0 without
// buckets to compare).
func (a *AheadState) seasonalFit(period int, scale float64) (spread, recent float64) {
	var ss, noise float64
	var rates []float64
	for i := len(a.Count) - 1; i >= 0 && i >= len(a.Count)-period; i-- {
		r, before := a.rate(i), a.rate(i-period)
		if math.IsNaN(r) || math.IsNaN(before) {
			continue
		}
		d := r - scale*before
		ss += d * d
		noise += r/a.Covered[i] + scale*scale*before/a.Covered[i-period]
		rates = append(rates, r, scale*before)
	}
	n := float64(len(rates) / 2)
	if n == 0 {
		return 0, 0
	}
	spread = math.Sqrt(math.Max(0, (ss-noise)/n))
	if v := stat.Variance(rates, nil); v > 0 {
		recent = 1 - ss/n/(2*v)
	}
	return spread, recent
}

// trendWindow is the span the trend and the spread are fitted over: at least
// aheadTrendBuckets buckets and twice the lead time.
func (a *AheadState) trendWindow(lead float64) float64 {
	return math.Max(aheadTrendBuckets*a.BucketS, 2*lead)
}

// stepUp reports whether the interval rates of the trend window (the newest window seconds
// of them, within its buckets: none from before a gap in the observations; at least
// 2·aheadStepIntervals+1) are a step up rather than a line: of the splits that leave
// aheadStepIntervals or more on each side, the one whose two means fit best has the higher
// mean after it, it fits better than the least-squares line by more than chance — the F
// test of one parameter more, (SSE_line − SSE_step) over SSE_step/(m−3) against the
// aheadStepConfidence quantile of F(1, m−3); the split is chosen by its fit, so that is a
// threshold calibrated on steady Poisson traffic (about 1% of its windows) rather than an
// exact test level — and the run after it does not rise on its own (its slope's t statistic
// under the same quantile of Student's t: a rise that goes on after a step, or a ramp from
// the middle of the window, is the line's to extrapolate). post is the mean after the split
// (0 when not a step).
func (a *AheadState) stepUp(window, interval float64) (post float64, ok bool) {
	ys, ok := a.windowRates(window, interval)
	if !ok {
		return 0, false
	}
	m := len(ys)
	xs := make([]float64, m)
	for i := range xs {
		xs[i] = float64(i)
	}
	sseLine := fitTrend(xs, ys).variance * float64(m-2)
	sseStep, split := math.Inf(1), 0
	for k := aheadStepIntervals; k <= m-aheadStepIntervals; k++ {
		_, vb := stat.MeanVariance(ys[:k], nil)
		_, va := stat.MeanVariance(ys[k:], nil)
		if sse := vb*float64(k-1) + va*float64(m-k-1); sse < sseStep {
			sseStep, split = sse, k
		}
	}
	before, after := stat.Mean(ys[:split], nil), stat.Mean(ys[split:], nil)
	if !(after > before+1e-9*math.Max(1, math.Abs(before))) || !fitsBetter(sseLine, sseStep, m) {
		return 0, false // not a rise (rounding aside), or no better than the line
	}
	if n := m - split; n >= 4 {
		if fitTrend(xs[:n], ys[split:]).risesOnItsOwn(n) {
			return 0, false
		}
	}
	return after, true
}

// needs is pool c's need history (NeedPrefill or NeedDecode).
func (a *AheadState) needs(c Component) *[]int {
	if c == Decode {
		return &a.NeedDecode
	}
	return &a.NeedPrefill
}

// recordNeed notes that pool c needed n engines in the newest bucket (as the holds record
// it: holdNeed).
func (a *AheadState) recordNeed(c Component, n int) {
	h := a.needs(c)
	for len(*h) < len(a.Count) {
		*h = append(*h, 0)
	}
	if last := len(a.Count) - 1; last >= 0 {
		(*h)[last] = max((*h)[last], n)
	}
}

// quietGaps returns, for pool c and a count n, the longest quiet gap of the history (a run
// of buckets needing at most n between two needing more) of at most upTo seconds, and how
// long the current quiet run is (since the last bucket needing more), both in seconds. The
// current bucket counts as quiet.
func (a *AheadState) quietGaps(c Component, n int, upTo float64) (longest, current float64) {
	h := *a.needs(c)
	run, seenBusy, busyAgo := 0, false, -1
	for i, v := range h {
		if v > n {
			if gap := float64(run) * a.BucketS; seenBusy && run > 0 && gap <= upTo {
				longest = math.Max(longest, gap)
			}
			seenBusy, run, busyAgo = true, 0, i
			continue
		}
		run++
	}
	if busyAgo < 0 {
		return longest, math.Inf(1)
	}
	return longest, float64(len(h)-1-busyAgo) * a.BucketS
}

// recentSince are the recent interval rates observed in bucket from or later, oldest first.
func (a *AheadState) recentSince(from int) []float64 {
	var out []float64
	for i, r := range a.Recent {
		if a.RecentBucket[i] >= from {
			out = append(out, r)
		}
	}
	return out
}

// peakNeed is the highest count pool c needed over the newest buckets covering seconds.
func (a *AheadState) peakNeed(c Component, seconds float64) int {
	h := *a.needs(c)
	top := 0
	for i := len(h) - 1; i >= 0 && float64(len(h)-1-i)*a.BucketS < seconds; i-- {
		top = max(top, h[i])
	}
	return top
}

// rateOver is the mean rate of buckets from..to (0 when none was observed).
func (a *AheadState) rateOver(from, to int) float64 {
	var n, cov float64
	for j := max(0, from); j <= min(len(a.Count)-1, to); j++ {
		n, cov = n+a.Count[j], cov+a.Covered[j]
	}
	if cov <= 0 {
		return 0
	}
	return n / cov
}

// period finds the history's dominant period in buckets: the lag (aheadMinPeriodBuckets at
// least) of the highest autocorrelation past the autocorrelation's first fall to zero or
// below, when it reaches aheadMinSeasonalCorrelation, with the number of bucket pairs it was
// measured over. A rate whose level wanders without repeating correlates with itself at short
// lags and less at each longer one; a period shows as a peak after a trough. A lag needs as
// many pairs of observed buckets as itself (two periods of history), or half as many when the
// correlation of the pairs it has — at least aheadMinShortOverlap, with any one of them left
// out — is already one a period is followed on (correlationLowerBound reaches
// aheadTrustedCorrelation): a clear period is followed half a period sooner, and a high
// correlation over a short overlap, which a bursty trace's lags give by chance, is never
// read as a period to raise the forecast to. The zero crossing is only read at lags with a
// period of pairs.
func (a *AheadState) period() (lag int, acf float64, pairs int, ok bool) {
	n := len(a.Count)
	rates := make([]float64, n)
	var mean float64
	m := 0
	for i := range rates {
		rates[i] = a.rate(i)
		if !math.IsNaN(rates[i]) {
			mean += rates[i]
			m++
		}
	}
	if m < 8 {
		return 0, 0, 0, false
	}
	mean /= float64(m)
	var denom float64
	for _, r := range rates {
		if !math.IsNaN(r) {
			denom += (r - mean) * (r - mean)
		}
	}
	if denom <= 0 {
		return 0, 0, 0, false
	}
	best, bestLag, bestPairs := aheadMinSeasonalCorrelation, 0, 0
	var xs, ys []float64
	crossed := false // the autocorrelation has fallen to 0 or below at a shorter lag
	for lag := 1; 2*(n-lag) >= lag; lag++ {
		var num float64
		xs, ys = xs[:0], ys[:0]
		for i := 0; i+lag < n; i++ {
			if math.IsNaN(rates[i]) || math.IsNaN(rates[i+lag]) {
				continue
			}
			num += (rates[i] - mean) * (rates[i+lag] - mean)
			xs, ys = append(xs, rates[i]), append(ys, rates[i+lag])
		}
		pairs := len(xs)
		if 2*pairs < lag {
			continue
		}
		// Scaled to the full series, so short overlaps are not favoured.
		acf := num / denom * float64(m) / float64(pairs)
		// A period is a peak of the autocorrelation after it has fallen to zero: the
		// autocorrelation of a rate that wanders without repeating (a slowly changing
		// level) decays from lag 0 and is highest at the shortest lags, which are no period.
		if pairs >= lag && acf <= 0 {
			crossed = true
		}
		if lag < aheadMinPeriodBuckets || !crossed {
			continue
		}
		if pairs < lag {
			// Less than a period of pairs: the pairs' own correlation, with any one of them
			// left out (two bursts a lag apart are one pair, not a period), must already be
			// one a period is followed on; and it is what the lag is compared by (the scaled
			// autocorrelation of a short overlap can pass 1).
			r := leaveOneOutCorrelation(xs, ys)
			if pairs < aheadMinShortOverlap || correlationLowerBound(r, pairs-1) < aheadTrustedCorrelation {
				continue
			}
			acf = math.Min(acf, r)
		}
		if acf > best {
			best, bestLag, bestPairs = acf, lag, pairs
		}
	}
	return bestLag, best, bestPairs, bestLag > 0
}

// leaveOneOutCorrelation is the smallest Pearson correlation of the pairs (xs[i], ys[i]) with
// any one pair left out (0 when a remainder does not vary, or with fewer than 3 pairs): a
// correlation that does not rest on a single pair.
func leaveOneOutCorrelation(xs, ys []float64) float64 {
	n := len(xs)
	if n < 3 || len(ys) != n {
		return 0
	}
	var sx, sy, sxx, syy, sxy float64
	for i := range xs {
		sx, sy = sx+xs[i], sy+ys[i]
		sxx, syy, sxy = sxx+xs[i]*xs[i], syy+ys[i]*ys[i], sxy+xs[i]*ys[i]
	}
	k := float64(n - 1)
	lowest := math.Inf(1)
	for i := range xs {
		x, y := sx-xs[i], sy-ys[i]
		vx := (sxx - xs[i]*xs[i]) - x*x/k
		vy := (syy - ys[i]*ys[i]) - y*y/k
		cov := (sxy - xs[i]*ys[i]) - x*y/k
		r := 0.0
		if vx > 1e-12*math.Max(1, sxx) && vy > 1e-12*math.Max(1, syy) {
			r = cov / math.Sqrt(vx*vy)
		}
		lowest = math.Min(lowest, r)
	}
	return lowest
}

// correlationLowerBound is the lower end of the one-sided aheadQuantileZ (90%) confidence
// interval of a correlation r measured over pairs pairs (Fisher's z): a high
// autocorrelation over a handful of buckets — a bursty trace's first minutes — is no
// evidence of a period, and following a spurious one drops the holds that wait for bursts.
func correlationLowerBound(r float64, pairs int) float64 {
	if pairs <= 3 {
		return -1
	}
	z := math.Atanh(math.Min(0.999, math.Max(-0.999, r)))
	return math.Tanh(z - aheadQuantileZ/math.Sqrt(float64(pairs-3)))
}

// erlangC is the probability that an arrival waits in an M/M/c queue with offered load a
// (Erlang's C formula); 1 when the queue is unstable.
func erlangC(c int, a float64) float64 {
	if float64(c) <= a {
		return 1
	}
	b := 1.0
	for k := 1; k <= c; k++ {
		b = nextErlangB(b, k, a)
	}
	return erlangCOfB(c, a, b)
}

// nextErlangB is Erlang's B formula for k servers at offered load a from its value b for
// k−1 servers (the recurrence B(k) = a·B(k−1) / (k + a·B(k−1)), B(0) = 1).
func nextErlangB(b float64, k int, a float64) float64 {
	return a * b / (float64(k) + a*b)
}

// erlangCOfB is Erlang's C formula for c servers at offered load a < c from Erlang's B
// formula b for the same c and a.
func erlangCOfB(c int, a, b float64) float64 {
	rho := a / float64(c)
	return b / (1 - rho*(1-b))
}

// prefillEngines is the smallest prefill pool that serves rate requests/s (Poisson), each
// needing service seconds on an engine, with at most missShare of them waiting
// longer than slack seconds: M/G/c, Erlang C with the Allen–Cunneen correction for the
// service time's squared coefficient of variation cs2. limit bounds the search, which
// extends Erlang's B recurrence one engine at a time (O(limit), not O(limit²): a load of
// thousands of engines' worth with a slack far below the service time is a long search).
func prefillEngines(rate, service, slack, cs2, missShare float64, limit int) int {
	if rate <= 0 {
		return 0
	}
	a := rate * service
	if math.IsNaN(a) || a >= float64(limit) {
		return limit
	}
	c := max(1, int(math.Floor(a))+1)
	b := 1.0
	for k := 1; k < c; k++ {
		b = nextErlangB(b, k, a)
	}
	for ; c < limit; c++ {
		b = nextErlangB(b, c, a) // c > a: the queue is stable
		decay := (float64(c) - a) * slack / (service * (1 + cs2) / 2)
		if erlangCOfB(c, a, b)*math.Exp(-decay) <= missShare {
			break
		}
	}
	return min(c, limit)
}

// aheadMaxEngines bounds every pool the ahead policy sizes, under a GPU budget or not: the
// replica count a connector or an acknowledgement may report (config.MaxReplicas), so that
// the planner never orders a pool it could not then read back.
const aheadMaxEngines = config.MaxReplicas

// engineCount is ⌈x⌉ as a count of engines, at most limit: a count past limit, an infinite
// one or NaN (what absurd observations — a rate of 10³⁰⁰ req/s, an engine model that learned
// hour-long passes — make of the sizing's ratios) is limit, never the negative count the
// conversion of a float64 past int64 gives, which would read as no demand at all; 0 and
// below is 0.
func engineCount(x float64, limit int) int {
	switch {
	case math.IsNaN(x) || x >= float64(limit):
		return limit
	case x <= 0:
		return 0
	}
	return int(math.Ceil(x))
}

// AheadBucket is the history's bucket width for a startup delay and an interval: half the
// lead time, a whole number of intervals, at most AheadMaxBucketSeconds.
func AheadBucket(startupS, intervalS float64) float64 {
	n := math.Max(1, math.Floor((startupS+intervalS)/2/intervalS))
	return math.Max(intervalS, math.Min(n*intervalS, AheadMaxBucketSeconds))
}

// aheadLead is the lead time: the startup delay (measured, else expected_startup_seconds)
// plus one interval.
func (t *tick) aheadLead() float64 {
	s := t.p.cfg.StartupPriorSeconds()
	if t.st.Ahead != nil && t.st.Ahead.StartupS > 0 {
		s = t.st.Ahead.StartupS
	}
	return s + t.p.loadI
}

// ahead is one tick of this planner's own policy (scaling_policy "ahead", docs/policy.md).
func (t *tick) ahead() Decision {
	d := t.diag
	d.ThroughputReason = ReasonDisabled
	if t.st.Ahead == nil || !(t.st.Ahead.BucketS > 0) {
		t.st.Ahead = &AheadState{BucketS: AheadBucket(t.p.cfg.StartupPriorSeconds(), t.p.loadI)}
	}
	a := t.st.Ahead
	hold := func(r Reason, note string) Decision {
		d.LoadReason = r
		for _, c := range t.pools() {
			t.setLoadReason(c, r)
		}
		d.note("ahead: " + note)
		return Decision{}
	}
	t.forgetOtherSLA()
	if a.ReadyDecode > 0 && t.in.Now-a.ReadyDecodeAt <= 1.5*t.p.loadI {
		t.readyDBefore = a.ReadyDecode
	}
	if a.ReadyPrefill > 0 && t.in.Now-a.ReadyPrefillAt <= 1.5*t.p.loadI {
		t.readyPBefore = a.ReadyPrefill
	}
	a.ReadyDecode, a.ReadyDecodeAt = 0, t.in.Now // 0: not known at this tick
	a.ReadyPrefill, a.ReadyPrefillAt = 0, t.in.Now
	if a.PromptBacklogAt > 0 && t.in.Now-a.PromptBacklogAt <= 1.5*t.p.loadI {
		t.backlogBefore, t.backlogBeforeKnown, t.backlogSpan = a.PromptBacklog, true, t.in.Now-a.PromptBacklogAt
		t.clearingBefore = a.ClearingAt == a.PromptBacklogAt
	}
	a.PromptBacklog, a.PromptBacklogAt = t.queuedPromptTokens(), t.in.Now
	t.recordDecodeHeld()
	if !t.countsKnown {
		return hold(ReasonNoWorkerCounts, "worker inventory unreadable: holding")
	}
	a.ReadyDecode, a.ReadyPrefill = t.current(Decode), t.current(Prefill)
	t.measureStartup()
	t.decodeGrewBefore = a.DecodeGrewAt
	if t.grewWithin(Decode) || (t.readyDBefore == 0 && !t.settled(Decode)) {
		a.DecodeGrewAt = t.in.Now
	}
	t.learnDecodeShown()

	tr := t.in.Traffic
	switch {
	case tr == nil || tr.NumReq == nil || !finite(*tr.NumReq) || *tr.NumReq < 0 || !(tr.DurationS > 0) || math.IsInf(tr.DurationS, 0):
		return hold(ReasonNoTrafficData, "traffic unreadable: holding (never read as zero demand)")
	case tr.DurationS < aheadMinWindowSeconds || tr.DurationS > config.MaxIntervalSeconds:
		return hold(ReasonNoTrafficData, fmt.Sprintf("traffic unreadable: a window of %.3g s, outside %g..%d s: holding",
			tr.DurationS, aheadMinWindowSeconds, config.MaxIntervalSeconds))
	case *tr.NumReq/tr.DurationS > aheadMaxRequestRate:
		return hold(ReasonNoTrafficData, fmt.Sprintf("traffic unreadable: %.3g requests in %.3g s is past %.0e req/s, more than any deployment serves (a broken counter or query): holding",
			*tr.NumReq, tr.DurationS, aheadMaxRequestRate))
	}
	isl, osl, ok := t.aheadLengths(tr)
	if !ok {
		return hold(ReasonNoTrafficData, "requests counted but their lengths are unreadable and none were seen before: holding")
	}
	first := len(a.Count) == 0
	a.record(t.in.Now, tr.DurationS, *tr.NumReq, isl, osl)
	if a.Warmed {
		a.LiveS = math.Min(a.LiveS+tr.DurationS, aheadMaxLiveS)
	}
	d.ObservedNumReq = ptr(*tr.NumReq)

	lead := t.aheadLead()
	f, ok := a.forecast(lead, t.p.loadI)
	if !ok {
		return hold(ReasonNoTrafficData, "no traffic history yet: holding")
	}
	if t.p.cfg.Mode != config.ModeAgg {
		f.carryMisses()
	}
	f.holdToWavePeak()
	a.recordForecast(f.Rate-f.Missed, f.Rate)
	if f.ISL == 0 && t.st.LastISL != nil {
		f.ISL, f.OSL = *t.st.LastISL, *t.st.LastOSL
	}
	lengths := fmt.Sprintf("ISL %.0f OSL %.0f", f.ISL, f.OSL)
	if isl, span, ok := t.promptShift(f.ISL); ok {
		lengths = fmt.Sprintf("ISL %.0f (the newest %.0f s; %.0f over %d s) OSL %.0f", isl, span, f.ISL, aheadLengthSeconds, f.OSL)
		f.ISL = isl
		t.promptsLonger = true
	}
	d.PredictedNumReq = ptr(f.Rate * t.p.loadI)
	d.PredictedISL, d.PredictedOSL = ptr(f.ISL), ptr(f.OSL)

	need := map[Component]int{}
	var why []string
	why = append(why, fmt.Sprintf("demand %.2f req/s over the next %.0f s (level %.2f, trend %+.3f/s, spread %.2f, burst %.2f", f.Rate, lead, f.Level, f.Slope, f.Spread, f.Burst))
	if f.Step > 0 {
		why[0] += fmt.Sprintf(", a step up to %.2f, not extrapolated", f.Step)
	}
	if f.LineRise > 0 {
		why[0] += fmt.Sprintf(", a rise slowing down: +%.2f to its turn, not the line's +%.2f", f.Bend, f.LineRise)
	}
	if f.Trough > 0 {
		why[0] += fmt.Sprintf(", a rise from a trough: +%.2f along its own line, not the line's +%.2f", f.Trough, f.TroughLine)
	}
	if f.PeakCut > 0 {
		why[0] += fmt.Sprintf(", held at %.2f by a wave's earlier peak of %.2f (−%.2f)", f.Rate, f.WavePeak, f.PeakCut)
	}
	if f.PeriodS > 0 {
		why[0] += fmt.Sprintf(", period %.0f s (r %.2f) → %.2f", f.PeriodS, f.Correlation, f.Seasonal)
		if f.Trusted {
			why[0] += " followed"
		}
	}
	if f.Missed > 0 || f.Carried > 0 || f.HeldOff > 0 {
		why[0] += fmt.Sprintf(", +%.2f for its misses over %d past forecasts", f.Missed, f.MissWindows)
		if f.Carried > 0 {
			why[0] += fmt.Sprintf(" (%.2f of their %.2f carried by its rise)", f.Carried, f.Carried+f.HeldOff+f.Missed)
		}
		if f.HeldOff > 0 {
			why[0] += fmt.Sprintf(" (%.2f of their %.2f held off by its fall of %.2f)", f.HeldOff, f.Carried+f.HeldOff+f.Missed, f.Fall)
		}
	}
	why[0] += "), " + lengths
	for _, c := range t.pools() {
		n, note, ok := t.aheadSize(c, f, lead)
		if !ok {
			return hold(ReasonModelNotReady, note)
		}
		need[c] = max(n, t.minEndpoint(c))
		why = append(why, note)
	}
	// The SLO feedback's headroom, within the GPU budget the needs leave: taken from the other
	// pool by the budget's fit, it would only move the misses there.
	extra := map[Component]int{}
	var spare, wanted int
	if t.p.cfg.MaxGPUBudget >= 0 {
		spare = t.p.cfg.MaxGPUBudget
	}
	for _, c := range t.pools() {
		extra[c] = t.sloHeadroom(c, need[c], lead)
		spare -= need[c] * t.gpuCost(c)
		wanted += extra[c] * t.gpuCost(c)
	}
	for i, c := range t.pools() {
		if extra[c] <= 0 {
			continue
		}
		h := extra[c]
		if t.p.cfg.MaxGPUBudget >= 0 && wanted > max(0, spare) {
			h = int(float64(h) * float64(max(0, spare)) / float64(wanted)) // GPUs shared in proportion
		}
		if h > 0 {
			need[c] += h
			why[1+i] += fmt.Sprintf(" + %d for the SLO (%.1f%% of recent requests in intervals over it)", h, 100*t.feedback(c).share())
			if c == Decode && t.heldFloorExcess > 0 {
				// The headroom on the requests-held floor's engines is not recorded for the
				// holds either: the holds record the headroom on the need without them.
				base := need[c] - h - t.heldFloorExcess
				if share := h - min(h, t.feedback(c).headroomFor(base)); share > 0 {
					t.heldFloorExcess += share
					why[1+i] += fmt.Sprintf(" (%d of them on the engines for the requests held, not recorded for the holds either)", share)
				}
			}
		} else {
			why[1+i] += fmt.Sprintf(" (the SLO's headroom of %d does not fit the GPU budget)", extra[c])
		}
	}
	d.note("ahead: " + strings.Join(why, "; "))
	idle, foresees := t.idle(), f.foreseesDemand()
	t.idleForeseen = idle && foresees
	if idle && !foresees {
		for _, c := range t.pools() {
			// The engines the requests-held floor adds (calm arrivals, past the first lead
			// time) are for a queue: with nothing arriving and nothing queued, the requests
			// the engines hold drain on the engines they are on, and the floor keeps none (not
			// when a followed period foresees demand: that tick's need stands, as it orders).
			if n := t.holdNeed(c, need[c]); n < need[c] {
				d.note(fmt.Sprintf("ahead: %s needs %d, not %d: no request arrived in the last %.0f s and none is queued, so no engine is kept for the requests held", c, n, need[c], tr.DurationS))
				need[c] = n
				t.heldFloorExcess = 0 // the need is already without them (holdNeed)
			}
			if held := max(t.provisioned(c), t.minEndpoint(c)); need[c] > held {
				d.note(fmt.Sprintf("ahead: %s not scaled up to %d: no request arrived in the last %.0f s and none is queued", c, need[c], tr.DurationS))
				need[c] = held
			}
		}
	}
	for _, c := range t.pools() {
		n := t.holdNeed(c, need[c])
		if first {
			// The deployment found at the start was sized for the traffic before the
			// history: it counts as what the first bucket needed, so demand that comes back
			// after a quiet start is held for like any other.
			n = max(n, t.provisioned(c))
		}
		a.recordNeed(c, n)
	}
	return t.aheadDecide(need, lead, f.Trusted, f.foreseen(), f.bursty(), t.fallingHold(f))
}

// holdNeed is pool c's need at this tick as the scale-down holds record it (the lead time's
// stabilization history, and the per-bucket needs the quiet-gap and bursty holds read):
// without the engines an aggregated pool's requests-held floor added to it on calm arrivals,
// and the SLO headroom on them (heldFloorExcess), at least the pool's min_endpoint. It is
// also the need of an idle tick at which no followed period foresees demand (tick.ahead).
func (t *tick) holdNeed(c Component, need int) int {
	if c != Decode || t.heldFloorExcess <= 0 {
		return need
	}
	return max(need-t.heldFloorExcess, t.minEndpoint(c))
}

// fallingHold reports whether a scale-down holds for one bucket because the forecast falls
// through the horizon (Forecast.FallLasts) on calm arrivals (bursts within the buckets at
// most the level) of a disaggregated deployment: the forecast then asks for less than the
// pool has all the way to the horizon, and the lead time's hold kept what the rates a lead
// time earlier needed down the whole fall (rr-5-45's first fall: 5 decode engines held
// until 460 s, 4 until 485 s, where 3 were needed from 425 s). Not on an aggregated pool,
// whose sinusoid is already short of the goodput ("Misses a rise already carries"); not
// where the parabola turns within the horizon, a trough's rise the lead time's hold is
// there for. With a period followed the trend's fall is read all the same: it shortens the
// hold of a followed period whose bursts are over 10% of the level (one foreseen, at most
// 10%, holds for a bucket already).
func (t *tick) fallingHold(f Forecast) bool {
	return f.FallLasts && !f.bursty() && t.p.cfg.Mode == config.ModeDisagg
}

// aheadSize is the engines pool c needs for the forecast plus its queued backlog (cleared
// over the lead time).
func (t *tick) aheadSize(c Component, f Forecast, lead float64) (int, string, bool) {
	if t.p.cfg.Mode == config.ModeAgg {
		return t.aheadAggSize(f, lead) // ahead_agg.go
	}
	limit := aheadMaxEngines
	if g := t.gpuCost(c); g > 0 && t.p.cfg.MaxGPUBudget >= 0 {
		limit = min(aheadMaxEngines, max(1, t.p.cfg.MaxGPUBudget/g+1))
	}
	kv := t.kvHitRate()
	var backlog float64 // prefill: queued prompt tokens; decode: preempted requests
	if c == Prefill {
		backlog = t.queuedPromptTokens()
	} else {
		for _, s := range t.stats(c) {
			backlog += float64(s.Queued.NumDecodeRequests)
		}
	}
	if f.Rate <= 0 && backlog <= 0 {
		return 0, fmt.Sprintf("%s: no demand", c), true
	}
	if c == Prefill {
		m := t.prefill
		if m == nil {
			return 0, "prefill: no perf model", false
		}
		caps := t.caps.Prefill
		if caps == nil {
			caps = &EngineCapabilities{}
		}
		tokens := int64(math.Ceil(math.Max(1, f.ISL) * (1 - perf.ClampKVHitRate(kv))))
		service, ok := m.PrefillTime(tokens, caps.Limits())
		if !ok || !(service > 0) {
			return 0, "prefill: perf model not ready", false
		}
		service = slices.Max(t.window(&t.st.Ahead.PrefillService, service, lead))
		rate := f.Rate
		if f.ISL > 0 {
			rate += t.backlogRate(f.ISL, service, lead)
		}
		cs2 := t.promptSpread(Prefill, f.ISL)
		slack := t.p.cfg.TTFTMs/1000 - service
		var n int
		if slack <= 0 {
			n = engineCount(rate*service/0.7, limit)
			t.diag.EngineRPSPrefill = ptr(0.7 / service)
			return min(n, limit), fmt.Sprintf("prefill %d (a %.0f-token prompt takes %.0f ms, over the TTFT SLA: sized at 70%% utilisation)", n, f.ISL, service*1000), true
		}
		missShare, _ := f.margins()
		n = prefillEngines(rate, service, slack, cs2, missShare, limit)
		excess := t.learnExcessWait(f, service, cs2, f.ISL)
		// The burst's share of one engine waits about twice the mean excess wait; at most
		// twice the ready pool per decision, should the latency not be the load's.
		if b := min(engineCount(2*aheadBurstTail*excess/slack, limit), 2*max(1, t.current(Prefill))); b > n && rate > 0 {
			n = min(b, limit)
		}
		if n > 0 {
			t.diag.EngineRPSPrefill = ptr(rate / float64(n))
		}
		// The next request's TTFT on the ready pool at the current rate, as modelled.
		if ready, load := t.current(Prefill), f.Level*service; ready > 0 && float64(ready) > load {
			wait := erlangC(ready, load)*service/(float64(ready)-load)*(1+cs2)/2 + excess/float64(ready)
			t.diag.EstimatedTTFTMs = ptr((service + wait) * 1000)
		}
		return n, fmt.Sprintf("prefill %d (%.2f req/s incl. backlog %.0f tokens, %.0f ms each, cs² %.2f, wait ≤ %.0f ms for %.0f%%, excess wait %.0f ms·engine)",
			n, rate, backlog, service*1000, cs2, slack*1000, 100*(1-missShare), excess*1000), true
	}
	m := t.decode
	if m == nil {
		return 0, "decode: no perf model", false
	}
	caps := t.caps.Decode
	if caps == nil {
		caps = &EngineCapabilities{}
	}
	capacity, ok := m.FindCapacity(perf.CapacityRequest{ISL: math.Max(1, f.ISL), OSL: math.Max(1, f.OSL), ITLSLAMs: t.p.cfg.ITLMs,
		KVHitRate: kv, AcceptLength: t.acceptLength()}, caps.Limits())
	if !ok || !(capacity.RPS > 0) || capacity.BatchSize <= 0 {
		return 0, "decode: perf model not ready", false
	}
	// No batch meets the ITL SLA: half the best point's batch.
	if !capacity.Eligible {
		capacity.BatchSize = max(1, capacity.BatchSize/2)
	}
	// Seconds per request at a batch: the capacity point's time per request.
	perRequest := float64(capacity.BatchSize) / capacity.RPS
	// The slowest estimate of the lead time, but never below 80% of a batch the engines ran
	// within the SLA at the sizing context, held to the profile's batch there unless they beat
	// the profile (shownDecodeBatch): a refit on one burst's iterations can swing far below it.
	ctx := math.Max(1, f.ISL) + math.Max(1, f.OSL)/2
	modelled := slices.Min(t.window(&t.st.Ahead.DecodeBatch, float64(capacity.BatchSize), lead))
	var beat float64 // shownBeat, computed at most once: batchAt runs at two contexts
	beatKnown := false
	shownBeat := func() float64 {
		if !beatKnown {
			beat, beatKnown = t.shownBeat(), true
		}
		return beat
	}
	batchAt := func(ctx float64) (float64, string) {
		here := t.profileBatch(ctx)
		b, source := t.profileDecodeCap(modelled, here, ctx, "at the ITL SLA")
		if shown, why := t.shownDecodeBatch(ctx, here, shownBeat); shown > b {
			b, source = shown, fmt.Sprintf("%s (the perf model says %.0f)", why, b)
		}
		return b, source
	}
	b, source := batchAt(ctx)
	// The requests on the engines hold more context than ISL + OSL/2 when the output lengths
	// vary: the long ones stay longer (the ServeGen cases' exponential lengths, 360/290, hold
	// about 650 tokens on average, not 505). The batch is the smaller of the two contexts'
	// (the profile's interpolated surface need not fall with the context).
	if held, ok := t.decodeContextHeld(); ok && held > ctx {
		if bh, sh := batchAt(held); bh < b {
			b, source = bh, fmt.Sprintf("%s, at the %.0f-token context the engines hold", sh, held)
		}
	}
	rate := f.Rate + backlog/lead
	_, z := f.margins()
	// The batch each engine is sized to hold: the pool's Poisson spread kept under the SLA
	// batches (pooledBatch).
	keep := pooledBatch(b, rate*perRequest, z)
	perEngine := keep / perRequest
	if edge := t.learnDecodeEdge(f, lead); edge > 0 && edge < perEngine {
		perEngine = edge
	}
	n, byRate := decodeEngines(rate, perEngine, t.provisioned(Decode))
	kept := n > byRate
	t.diag.EngineRPSDecode = ptr(perEngine)
	// What the engines really hold (which carries the bursts too short for the traffic's
	// intervals): the upper quantile of the last lead time's concurrency, within the batch
	// each engine keeps under its SLA batch on its own (engineSpreadBatch: measured so, not
	// with the pool's spread).
	held := t.observeConcurrency(m, ctx, lead)
	if m := engineCount(held/engineSpreadBatch(b, z), limit); m > n {
		n, kept = m, false
	}
	spare := ""
	if kept {
		t.decodeKept = true
		spare = fmt.Sprintf("; kept at %d, where the rate needs %d: a scale-down leaves %.0f%% of the engines' rate spare", n, byRate, 100*aheadDecodeDownSpare)
	}
	// The ITL on the ready pool at the current rate, as modelled (Little: each request
	// stays perRequest seconds per unit of batch).
	if ready := t.current(Decode); ready > 0 && f.Level > 0 {
		batch := f.Level * perRequest / float64(ready)
		q := perf.FPM{Scheduled: perf.ScheduledRequests{NumDecodeRequests: clampCount(batch), SumDecodeKVTokens: clampCount(batch * ctx)}}
		if itl, ok := m.ScheduledDecodeITL(&q, perf.DecodeQuery{DecodeScale: 1}); ok {
			t.diag.EstimatedITLMs = ptr(itl / t.acceptLength() * 1000)
		}
	}
	return min(n, limit), fmt.Sprintf("decode %d (%.2f req/s incl. backlog %.0f, %.2f req/s per engine: batch %.0f of %.0f %s; %.0f requests held at the %.0f%% quantile%s)",
		n, rate, backlog, perEngine, keep, b, source, held, 100*(1-aheadBurstShare), spare), true
}

// engineSpreadBatch is the mean batch k whose Poisson spread z·√k one engine keeps under
// its SLA batch b on its own: k + z·√k = b (b when z is 0).
func engineSpreadBatch(b, z float64) float64 {
	k := (-z + math.Sqrt(z*z+4*b)) / 2
	return k * k
}

// pooledBatch is the mean batch each decode engine of a pool is sized to hold, of its SLA
// batch b, when the pool holds load requests on average (the rate times a request's time
// on an engine) and z standard deviations of their Poisson spread are kept under the SLA
// batches. A router that spreads the requests over the engines (least-loaded, round-robin,
// Dynamo's KV router with its load term) keeps their batches about equal, so the spread is
// the pool's, √load, not √k on every engine: n engines hold load + z·√load ≤ n·b, each
// b·load/(load + z·√load) (docs/policy.md, "The decode pool's spread"). Never less than
// engineSpreadBatch, which it equals at one engine's worth of load: under that, one engine
// holds the load whichever way it is counted, and the smaller batch would only lower the
// rate per engine reported and the 10% spare's threshold.
func pooledBatch(b, load, z float64) float64 {
	alone := engineSpreadBatch(b, z)
	if !(load > 0) || math.IsInf(load, 1) {
		return alone
	}
	return math.Max(alone, b*load/(load+z*math.Sqrt(load)))
}

// decodeEngines is the decode engines a rate needs at perEngine req/s each, given the cur
// the pool has (its target): the rate's count (byRate), or, when that is fewer than cur, the
// count that leaves aheadDecodeDownSpare of their rate spare (at most cur). A decode engine's
// SLA edge is hard — one engine at fixed lengths (ISL 360, OSL 290) gets 100% at 20 req/s,
// 92.7% at 22, 31.9% at 25 — so a demand at the edge of n engines is not taken down to n,
// where the next burst goes past it; a scale-up goes to the rate's count.
func decodeEngines(rate, perEngine float64, cur int) (n, byRate int) {
	byRate = engineCount(rate/perEngine, aheadMaxEngines)
	if byRate < cur {
		return max(byRate, min(cur, engineCount(rate/(perEngine*(1-aheadDecodeDownSpare)), aheadMaxEngines))), byRate
	}
	return byRate, byRate
}

// promptSpread is the squared coefficient of variation of the prompt lengths pool c's
// engines see (their service time's, for the M/G/c correction) against the mean ISL isl
// (at least 1), at most 4: the pooled variance of two estimates, weighted by their degrees of
// freedom — the FPMs and their samples that hold two prompts or more, scheduled or waiting (a
// batch of one says nothing of the spread), and the successive differences of the recent
// buckets' mean ISLs (two means of n and m prompts differ by σ²(1/n + 1/m) on average;
// differences of neighbours, not deviations from one mean, so that a drifting mix is not read
// as spread). Without either it is 1: exponential service (M/M/c).
func (t *tick) promptSpread(c Component, isl float64) float64 {
	if !(isl > 0) || !finite(isl) {
		return 1 // no mean to measure the spread against
	}
	isl = math.Max(1, isl)
	var sum, dof float64
	a := t.st.Ahead
	first, cov := len(a.Count), 0.0
	for i := len(a.Count) - 1; i >= 0 && cov < aheadLengthSeconds; i-- {
		cov, first = cov+a.Covered[i], i
	}
	for i := first + 1; i < len(a.Count); i++ {
		n, m := a.Count[i], a.Count[i-1]
		if n < 1 || m < 1 {
			continue
		}
		d := a.ISL[i]/n - a.ISL[i-1]/m
		sum += d * d / (1/n + 1/m)
		dof++
	}
	// Each FPM's nᵢ prompts of population variance varᵢ add nᵢ·varᵢ with nᵢ − 1 degrees of
	// freedom.
	add := func(n int64, v float64) {
		if n >= 2 && finite(v) && v >= 0 {
			sum += float64(n) * v
			dof += float64(n - 1)
		}
	}
	if o := t.in.FPM; o != nil {
		fpms, samples := o.Prefill, o.PrefillSamples
		if c == Decode {
			fpms, samples = o.Decode, o.DecodeSamples
		}
		for _, fs := range [][]perf.FPM{fpms, samples} {
			for _, f := range fs {
				if f.Version == perf.FPMVersion {
					add(f.Scheduled.NumPrefillRequests, f.Scheduled.VarPrefillLength)
					add(f.Queued.NumPrefillRequests, f.Queued.VarPrefillLength)
				}
			}
		}
	}
	if dof <= 0 {
		return 1
	}
	if v := sum / dof / (isl * isl); finite(v) {
		return math.Min(4, v)
	}
	return 4 // a variance past float64: as spread as the cap
}

// promptShift is the mean prompt length of the newest half lead time (shiftWindow, in whole
// buckets: span is the seconds observed) when it holds at least aheadShiftPrompts prompts and
// is longer than isl, the aheadLengthSeconds mean, by more than aheadShiftZ standard errors
// (the prompts' spread, promptSpread, over their number); ok is false otherwise. Prompts that
// got longer load the prefill at once, while a five-minute mean follows them over minutes: a
// Mooncake synthetic window at 6.2× went from prompts of about 3,400 tokens to ones whose
// decode context reached 11,000 at an unchanged request rate, and its prefill pool, sized for
// the slow mean, lost the TTFT of most of the next minute's requests. Only longer prompts
// count, as the trend's rise does: shorter ones wait for the slow mean (no scale-down on a
// window's noise).
func (t *tick) promptShift(isl float64) (mean, span float64, ok bool) {
	a := t.st.Ahead
	n, sum, _, span := a.recent(t.shiftWindow())
	if n < aheadShiftPrompts || !(isl > 0) || !finite(isl) || !finite(sum) || !(sum/n > isl) {
		return 0, 0, false
	}
	mean = sum / n
	if cs2 := t.promptSpread(t.promptPool(), isl); mean-isl > aheadShiftZ*isl*math.Sqrt(cs2/n) {
		return mean, span, true
	}
	return 0, 0, false
}

// shiftWindow is the span promptShift measures the newest prompts over: half the lead time,
// in whole intervals (a bucket at the expected startup), and at least the level's window. A
// longer prompt mix that lasts much less than the lead time is over before engines ordered
// for it are ready: measured over the level's window alone (60 s at a 300 s startup), the
// Azure code trace's bursts of long prompts held engines for a lead time each, 15% more
// GPU-hours at the same goodput. Measured over the whole lead time, the shift came too late
// for the robustness benchmark's short Mooncake synthetic windows (three lead times long) on
// which it matters most.
func (t *tick) shiftWindow() float64 {
	half := math.Floor(t.aheadLead()/2/t.p.loadI) * t.p.loadI
	return math.Max(half, t.st.Ahead.levelWindow(t.p.loadI))
}

// learnExcessWait updates the running excess wait from this interval's mean TTFT (capped
// at twice the SLA, so an overload does not read as a burst) and returns it (≥ 0). isl is
// the prompt length the sizing clears the queued prompt tokens at (0: it does not count them).
//
// Not while a backlog is being cleared (then clearingBacklog is set, for the SLO feedback):
// when the prompts queued on one engine at this tick take it longer than the TTFT slack to
// clear (an engine's queue is its own) and the prompt pool's are fewer than an interval
// before, the interval's waits are the backlog's tail — requests that queued on a pool too small for a
// step up, still waiting on the old engines while new ones are ready — which the sizing counts
// already (it adds the backlog to the rate), not bursts the queueing model misses. Learned
// there, the tail of a step from 1.5 to 40.7 req/s (robustness shapes seed 3, case 01) taught
// 777 ms·engine, and prefill went to 10 engines once the backlog had cleared; without it, to 6
// (3.13 → 2.99 GPU-h, 82.4% → 82.5%). A growing backlog is still learned: the pool is then
// falling behind a rise its sizing missed, and what that teaches meets the next rise (skipped
// too, a 300 s sinusoid, robustness seed 3's case 18, fell from 93.5% to 90.3%). Nor at the
// tick after one that found a backlog being cleared (AheadState.ClearingAt), while the
// queued prompts are still fewer than an interval before: its interval ends that queue's
// tail (traffic-stop's return: a mean TTFT of 16.9 s taught 521 → 1,375 ms·engine there).
func (t *tick) learnExcessWait(f Forecast, service, cs2, isl float64) float64 {
	a := t.st.Ahead
	tr := t.in.Traffic
	ready := t.current(t.promptPool())
	load := f.Level * service
	if tr.TTFTMs == nil || !finite(*tr.TTFTMs) || *tr.TTFTMs < 0 || ready < 1 || float64(ready) <= load {
		return math.Max(0, a.ExcessWait)
	}
	if backlog, slack := a.PromptBacklog, t.p.cfg.TTFTMs/1000-service; isl > 0 && slack > 0 && t.backlogBeforeKnown && backlog < t.backlogBefore {
		if clear := t.longestQueue() / isl * service; clear > slack {
			t.clearingBacklog, a.ClearingAt = true, t.in.Now
			t.diag.note(fmt.Sprintf("ahead: excess wait not learned: a backlog is being cleared (%.0f queued prompt tokens, %.0f an interval before; the longest engine's queue takes it %.0f ms, over the %.0f ms TTFT slack)",
				backlog, t.backlogBefore, clear*1000, slack*1000))
			return math.Max(0, a.ExcessWait)
		}
		if t.clearingBefore {
			t.clearingBacklog = true
			t.diag.note(fmt.Sprintf("ahead: excess wait not learned: the interval ends the backlog the last tick was clearing (%.0f queued prompt tokens, %.0f an interval before)",
				backlog, t.backlogBefore))
			return math.Max(0, a.ExcessWait)
		}
	}
	model := erlangC(ready, load) * service / (float64(ready) - load) * (1 + cs2) / 2
	observed := math.Min(*tr.TTFTMs, 2*t.p.cfg.TTFTMs)/1000 - service
	a.ExcessWait += aheadExcessWeight * (float64(ready)*(observed-model) - a.ExcessWait)
	return math.Max(0, a.ExcessWait)
}

// drainedRate is the rate (req/s) at which the prompt pool's queue drained since the last
// tick: the queued prompt tokens it lost, at prompt length isl, over the seconds between the
// two ticks. Those prompts reached the decode pool on top of the arrivals. 0 when the queue
// grew, when the last tick's queue or the prompt length is unknown, or when this tick's FPMs
// do not come from every ready engine of the prompt pool (reconcileFPMWorkers): a queue
// missing from them did not drain. After a rise in the prompt length (promptShift) the
// older, shorter prompts drained are counted at the new length: fewer than they were, so the
// rate errs low, as it did without them.
func (t *tick) drainedRate(isl float64) float64 {
	drained := t.backlogBefore - t.st.Ahead.PromptBacklog
	if !t.backlogBeforeKnown || !(drained > 0) || !(isl > 0) || !(t.backlogSpan > 0) {
		return 0
	}
	c := t.promptPool()
	n := t.current(c)
	if n <= 0 {
		return 0
	}
	if ok, _ := reconcileFPMWorkers(t.stats(c), n); !ok {
		return 0
	}
	return drained / isl / t.backlogSpan
}

// learnDecodeEdge records the rate per ready decode engine when the observed mean ITL
// reaches aheadITLWatch of the SLA while the arrivals are steady — no burst within the
// buckets, and none of the last lead time's intervals (a burst's backlog reaches the
// decode pool after it) above the level beyond aheadCalmBurst — on a decode pool (not an
// aggregated one) for the second interval in a row, neither of them one whose finishing
// requests may have begun before the pool last grew (finishersPredateGrowth); it keeps the
// lowest such rate, relaxed upwards, and returns it (0: never seen). The relaxation lets
// engines that got faster, or an edge read low, be found again: sized at the edge, a pool
// that does better than it keeps its ITL under the watch and probes a little further each
// interval. A pool running below half the edge tests nothing, so the edge relaxes by
// aheadEdgeRelax times twice the ready pool's load per engine against it less one (0 at half
// the edge, the full step at the edge): on rr-5-45-agg an edge relaxed on time alone went
// from 4.9 to 6.6 req/s per engine through the trough, and the next rise overloaded
// aggregated engines that could take about 5; relaxed in proportion to the load it still
// went from 5.4 to 6.1.
func (t *tick) learnDecodeEdge(f Forecast, lead float64) float64 {
	a := t.st.Ahead
	if ready := t.current(Decode); a.DecodeEdgeRPS > 0 && ready > 0 && f.Level > 0 {
		a.DecodeEdgeRPS *= 1 + aheadEdgeRelax*math.Max(0, math.Min(1, 2*f.Level/float64(ready)/a.DecodeEdgeRPS-1))
	}
	tr := t.in.Traffic
	// Only when the arrivals are about Poisson: a burst, not the engines, may have raised the
	// ITL otherwise.
	calm := f.Burst <= aheadCalmBurst*f.Level && a.unsteadiness(f.Level, t.p.loadI, lead) <= aheadCalmBurst*f.Level
	// Per engine ready for the whole interval: one that became ready during it served only
	// part of it, while the engine that was alone under a rise drained its backlog at a high
	// ITL (rr-5-45 at a 30 s startup read 7.5 req/s per engine at 120 s, where the second
	// engine became ready, and 6.6 at 725 s; the model says 12.4).
	ready := t.current(Decode)
	if t.readyDBefore > 0 {
		ready = min(ready, t.readyDBefore)
	}
	watched := calm && ready > 0 && f.Level > 0 && tr.ITLMs != nil && finite(*tr.ITLMs) && *tr.ITLMs >= aheadITLWatch*t.p.cfg.ITLMs
	// A skipped interval is not the first of two in a row either (DecodeWatchAt below).
	watched = watched && (t.p.cfg.Mode == config.ModeAgg || !t.finishersPredateGrowth(lead))
	if watched && t.p.cfg.Mode != config.ModeAgg {
		// One interval's mean ITL can be one request's (a shapes case's 1.6 req/s on one
		// decode engine read 8.5 ms against a 10 ms SLA, at a batch of 1.75 the profile runs
		// in about 5 ms: the rate per engine went from the model's 9 to a learned 1.6, and the
		// step to 36.6 req/s that followed was sized at 41 decode engines). A decode pool
		// learns its edge from a watched interval within 1.5 intervals of the last. An
		// aggregated engine's ITL carries the prompts' chunks, which come with the rate: one
		// interval at the watch is its load's.
		before := a.DecodeWatchAt
		a.DecodeWatchAt = t.in.Now
		gap := t.in.Now - before
		watched = before > 0 && gap > 0 && gap <= 1.5*t.p.loadI
	}
	if watched {
		rate := math.Max(f.Level, *tr.NumReq/tr.DurationS)
		// The prompts drained from the prompt pool's queue since the last tick reached the
		// decode pool on top of the arrivals.
		rate += t.drainedRate(f.ISL)
		if edge := rate / float64(ready); a.DecodeEdgeRPS == 0 || edge < a.DecodeEdgeRPS {
			a.DecodeEdgeRPS = edge
		}
	}
	return a.DecodeEdgeRPS
}

// finishersPredateGrowth reports whether the decode requests that finished in this tick's
// interval may have started before the pool last grew, or may have unseen (DecodeGrewAt; at
// an earlier tick — when this tick grew too, the growth before it): they ran on the engines
// that were ready then, in the larger batches of fewer engines, so their mean ITL says what
// those engines did, not what the pool now does at this rate. It counts the interval plus the
// observed mean request duration back from now (a lead time when the duration is not known;
// never more than a lead time): the requests finishing in the interval mostly began within
// that span. At a tick that grew after none within the span, the interval is counted per
// engine ready for all of it instead (learnDecodeEdge). On rr-5-45 the third decode engine,
// ready at 180 s, had the interval after it read 33 req/s over three engines at an 8.9 ms
// ITL, an edge of 11.1 req/s per engine, where in the oracle's run three ready engines took
// 44 req/s within the ITL SLA; sized at that edge, the pool held five engines at the next two
// peaks, where the oracle held three to four.
func (t *tick) finishersPredateGrowth(lead float64) bool {
	grew := t.st.Ahead.DecodeGrewAt
	if !(t.in.Now > grew) {
		grew = t.decodeGrewBefore // grew at this tick: the growth before it may still count
	}
	if !(grew > 0) || !(t.in.Now > grew) {
		return false
	}
	span := lead
	if d := t.in.Traffic.RequestDurationS; d != nil && finite(*d) && *d >= 0 {
		span = math.Min(*d, lead)
	}
	return t.in.Now-grew < t.in.Traffic.DurationS+span
}

// recordDecodeHeld appends the decode requests and their KV tokens this tick's FPMs show
// (the latest and the samples) to the windows decodeContextHeld reads, kept over the last
// lead time: every tick, so that the windows span the lead time's ticks whatever the tick
// went on to decide.
func (t *tick) recordDecodeHeld() {
	var n, kv float64
	for _, f := range t.decodeIterations() {
		if f.Scheduled.NumDecodeRequests <= 0 || f.Scheduled.SumDecodeKVTokens < 0 {
			continue
		}
		n += float64(f.Scheduled.NumDecodeRequests)
		kv += float64(f.Scheduled.SumDecodeKVTokens)
	}
	a, lead := t.st.Ahead, t.aheadLead()
	t.window(&a.DecodeHeldRequests, n, lead)
	t.window(&a.DecodeHeldKV, kv, lead)
}

// decodeContextHeld is the mean context of the decode requests the engines hold — their KV
// tokens over their requests, counted once per pass in the FPMs (the latest and the samples),
// when at least aheadMinContextRequests — from this tick's FPMs, unless the engines hold fewer
// than they did on average over the last lead time: then from the whole lead time's, weighted
// by requests. When arrivals pause, the requests still held are the long ones (the short ones
// finished first), and one tick's few survivors would read as the pool's mix: on a ServeGen
// clients case (exponential lengths, 360/290, about 500 tokens held while traffic flows) a
// tick with no arrival read 1,807 tokens, where the profile's batch is 20 requests against
// 71 at 498, and decode was ordered from 9 engines to 15 where the next tick sized 4. A pool
// as busy as usual, or busier, is read at once: outputs that got longer show there first
// (their lengths are known only when they finish).
func (t *tick) decodeContextHeld() (float64, bool) {
	a := t.st.Ahead
	ns, kvs := a.DecodeHeldRequests, a.DecodeHeldKV
	if len(ns) == 0 || len(ns) != len(kvs) {
		return 0, false
	}
	n, kv := ns[len(ns)-1], kvs[len(kvs)-1]
	if total := floats.Sum(ns); n*float64(len(ns)) < total {
		n, kv = total, floats.Sum(kvs)
	}
	if n < aheadMinContextRequests || !finite(kv/n) {
		return 0, false
	}
	return kv / n, true
}

// decodeIterations are the decode (agg: aggregated) pool's FPMs of this tick in the supported
// schema: each engine's latest and the samples of the iterations since the last tick.
func (t *tick) decodeIterations() []perf.FPM {
	if t.in.FPM == nil {
		return nil
	}
	var out []perf.FPM
	for _, fs := range [][]perf.FPM{t.in.FPM.Decode, t.in.FPM.DecodeSamples} {
		for _, f := range fs {
			if f.Version == perf.FPMVersion {
				out = append(out, f)
			}
		}
	}
	return out
}

// window appends v to the per-tick history h, keeps the last lead time of it and returns it.
func (t *tick) window(h *[]float64, v, lead float64) []float64 {
	*h = append(*h, v)
	if keep := min(aheadMaxRecent, max(1, int(math.Ceil(lead/t.p.loadI)))); len(*h) > keep {
		*h = slices.Delete(*h, 0, len(*h)-keep)
	}
	return *h
}

// observeConcurrency records the decode pool's concurrency — per engine, the most running
// plus queued requests its FPMs since the last tick show (the latest and the samples), summed
// over the engines; or, when there are no samples (a feed of the latest FPMs only) and the
// observed mean ITL nears the SLA (aheadITLWatch), the batch that ITL implies on each ready
// engine per the perf model at context ctx, when that is more: either sees the bursts
// between two ticks; the samples scaled by the SLA's ITL over the observed one when the pool
// is over its ITL SLA — and returns the (1 − aheadBurstShare) quantile of the last window
// seconds' (0 without any). The samples are preferred: they are what the engines held, where
// the implied batch is only as good as the perf model, which a refit on one burst can skew.
func (t *tick) observeConcurrency(m *perf.EngineModel, ctx, window float64) float64 {
	a := t.st.Ahead
	tr := t.in.Traffic
	c, sampled := t.sampledConcurrency()
	if sampled && tr.ITLMs != nil && finite(*tr.ITLMs) && *tr.ITLMs > t.p.cfg.ITLMs {
		// An overloaded pool holds each request longer (residence ∝ ITL, Little's law): at
		// the SLA's ITL the same requests would be held that much shorter. Unscaled, the
		// concurrency piled up on a slow pool sized it for its own slowness.
		c *= t.p.cfg.ITLMs / *tr.ITLMs
	}
	if !sampled && tr.ITLMs != nil && finite(*tr.ITLMs) && *tr.ITLMs > aheadITLWatch*t.p.cfg.ITLMs && t.current(Decode) > 0 {
		c = math.Max(c, float64(t.current(Decode))*impliedBatch(m, ctx, *tr.ITLMs/1000*t.acceptLength()))
	}
	sorted := slices.Clone(t.window(&a.DecodeConcurrency, c, window))
	slices.Sort(sorted)
	return sorted[min(len(sorted)-1, int(math.Floor((1-aheadBurstShare)*float64(len(sorted)))))]
}

// impliedBatch is the decode batch whose modelled iteration takes itl seconds at context
// ctx (0 when even one request is slower: the model says nothing; at most 4096).
func impliedBatch(m *perf.EngineModel, ctx, itl float64) float64 {
	at := func(b float64) float64 {
		f := perf.FPM{Scheduled: perf.ScheduledRequests{NumDecodeRequests: int64(math.Ceil(b)), SumDecodeKVTokens: int64(math.Ceil(b * ctx))}}
		v, ok := m.ScheduledDecodeITL(&f, perf.DecodeQuery{DecodeScale: 1})
		if !ok {
			return math.Inf(1)
		}
		return v
	}
	lo, hi := 1.0, 4096.0
	if at(lo) >= itl {
		return 0
	}
	if at(hi) <= itl {
		return hi
	}
	for range 30 {
		mid := (lo + hi) / 2
		if at(mid) <= itl {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// measureStartup measures the startup delay on the scale-ups that became ready: from the
// decision to the middle of the interval in which the engines became ready (readyWithin).
func (t *tick) measureStartup() {
	a := t.st.Ahead
	for _, c := range t.pools() {
		up := &a.UpPrefill
		if c == Decode {
			up = &a.UpDecode
		}
		if *up == nil {
			continue
		}
		took := t.in.Now - (*up).At
		if t.queued(c) > 0 {
			(*up).Queued = true
		}
		if t.current(c) >= (*up).Replicas {
			if t.readied == nil {
				t.readied = map[Component]bool{}
			}
			t.readied[c] = true
		}
		switch {
		case t.current(c) >= (*up).Replicas && (*up).Queued:
			t.diag.note(fmt.Sprintf("ahead: %s scale-up to %d ready after %.0f s, part of it queued for capacity held by draining workers: not measured as startup", c, (*up).Replicas, took))
			*up = nil
		case t.current(c) >= (*up).Replicas:
			took = readyWithin(took, t.p.loadI)
			if a.StartupS == 0 {
				a.StartupS = took
			} else {
				a.StartupS = (a.StartupS + took) / 2
			}
			t.diag.note(fmt.Sprintf("ahead: %s scale-up to %d ready after %.0f s: startup estimate %.0f s", c, (*up).Replicas, took, a.StartupS))
			*up = nil
		case took > aheadMaxStartupSeconds:
			t.diag.note(fmt.Sprintf("ahead: %s scale-up to %d not ready after %.0f s: not measured", c, (*up).Replicas, took))
			*up = nil
		}
	}
}

// queuedPromptTokens is the prompt tokens waiting on the prompt pool's engines, as their
// latest FPMs show them: the backlog an aggregated pool's sizing adds to the rate (a
// disaggregated prefill pool's adds each engine's: backlogRate), and the one
// learnExcessWait compares with the last tick's.
func (t *tick) queuedPromptTokens() float64 {
	var n float64
	for _, s := range t.stats(t.promptPool()) {
		n += float64(s.Queued.SumPrefillTokens)
	}
	return n
}

// longestQueue is the most prompt tokens queued on one engine of the prompt pool: an
// engine's queue is its own, so the time it takes that engine alone is how long the backlog
// lasts, whatever the pool.
func (t *tick) longestQueue() float64 {
	var most float64
	for _, s := range t.stats(t.promptPool()) {
		most = math.Max(most, float64(s.Queued.SumPrefillTokens))
	}
	return most
}

// backlogRate is the prompt rate that clears a disaggregated prefill pool's queued prompts
// (of isl tokens on average) within the lead time: each engine's queue is its own — the
// router sends new prompts to the engines with less work, and engines that join later do not
// take queued ones over — so each engine's queue adds at most the rate one engine serves (a
// prompt per service seconds): engines ordered for a queue beyond that would serve the new
// prompts, not the queue. An engine is an FPM's (worker, DP rank): each rank schedules its own
// queue. An aggregated pool's sizing counts its backlog pooled (aheadAggSize).
func (t *tick) backlogRate(isl, service, lead float64) float64 {
	var rate float64
	for _, s := range t.stats(Prefill) {
		if q := float64(s.Queued.SumPrefillTokens); q > 0 {
			rate += math.Min(q/isl/lead, 1/service)
		}
	}
	return rate
}

// idle reports whether nothing arrived in the tick's interval and nothing waits on the
// engines: no queued prompt tokens, no queued decode requests. Engines ordered then would be
// ready a lead time later for demand the tick has not seen; unless a followed period foresees
// demand (Forecast.foreseesDemand), a forecast that asks for them comes from its margins (the
// spread a fall leaves in the line through the window among them), its misses (measured before
// the traffic stopped) and the rates of a period found but not followed, so the tick's need is
// held to what each pool has (tick.ahead): no engine is ordered; the next interval with
// arrivals decides. An aggregated pool's need is then also without the engines its
// requests-held floor adds (holdNeed): the requests held drain on the engines that hold them.
// A followed period's demand is measured (the rates a period ago), and ordering for it before
// it arrives is what following it is for: on/off traffic whose off phases are silent (40 req/s
// for 90 s, nothing for 120 s) was met by the engines ordered as each "on" arrived, 84.2%
// (71.7% aggregated), where the period had foreseen it a lead time before (policy.md, "Traffic
// that stops"); a scale-up at such a tick reports scale_up_foreseen (tick.idleForeseen).
//
// Only when the FPMs show every ready engine of each pool (reconcileFPMWorkers): a queue on
// an engine that did not publish is not seen, so it is not read as none.
func (t *tick) idle() bool {
	if tr := t.in.Traffic; tr == nil || tr.NumReq == nil || *tr.NumReq != 0 {
		return false
	}
	for _, c := range t.pools() {
		if ok, _ := reconcileFPMWorkers(t.stats(c), t.current(c)); !ok {
			return false
		}
	}
	if t.queuedPromptTokens() > 0 {
		return false
	}
	for _, s := range t.stats(Decode) {
		if s.Queued.NumDecodeRequests > 0 {
			return false
		}
	}
	return true
}

// queued is how many of pool c's workers the connector holds back until capacity frees
// (0 when it does not say).
func (t *tick) queued(c Component) int {
	if t.in.Workers == nil {
		return 0
	}
	p := t.in.Workers.QueuedPrefill
	if c == Decode {
		p = t.in.Workers.QueuedDecode
	}
	if p == nil || *p < 0 {
		return 0
	}
	return *p
}

// provisioned is pool c's current target: the expected count when known, else the ready one.
func (t *tick) provisioned(c Component) int {
	e := t.expectedP
	if c == Decode {
		e = t.expectedD
	}
	if e != nil {
		return *e
	}
	return t.current(c)
}

// aheadDecide turns the needed counts into the tick's decision: scale-ups at once;
// scale-downs not before the trend window has been observed, only to the highest count
// needed over the lead time (over one bucket when the lead time is foreseen — a followed
// period on steady arrivals, Forecast.foreseen — or the forecast falls through it, falling:
// fallingHold, aheadHoldWindow), and, without a followed period (periodic:
// one the forecast follows instead of the trend), not before twice the longest quiet gap
// (of at most aheadMaxGapLeads lead times) after which demand came back before has passed;
// while arrivals are bursty (bursts over aheadBurstyExcess of the level) and the lead time
// not foreseen, only to the highest count needed over aheadBurstHoldLeads lead times;
// never for a pool whose observed latency breaks its SLA, nor, for an aggregated pool, while
// the newest prompts are longer than the aheadLengthSeconds mean (promptShift); then the GPU
// budget. The holds read the needs as holdNeed records them. A scale-up at an idle tick
// where a followed period foresees demand (idleForeseen) reports scale_up_foreseen.
func (t *tick) aheadDecide(need map[Component]int, lead float64, periodic, foreseen, bursty, falling bool) Decision {
	d := t.diag
	tr := t.in.Traffic
	target := map[Component]int{}
	observed := t.liveSeconds()
	for _, c := range t.pools() {
		hist := &t.st.StabilizationPrefill
		if c == Decode {
			hist = &t.st.StabilizationDecode
		}
		*hist = pushRecommendation(*hist, Recommendation{At: t.in.Now, Replicas: t.holdNeed(c, need[c])}, t.in.Now-lead)
		cur, n := t.provisioned(c), need[c]
		if first := t.st.Ahead.trendWindow(lead); n < cur && observed < first {
			d.note(fmt.Sprintf("ahead: %s not scaled down: %.0f s of traffic observed, less than the %.0f s the forecast's spread is measured over", c, observed, first))
			n = cur
		}
		if n < cur {
			window := t.aheadHoldWindow(lead, foreseen || falling)
			held := peakSince(*hist, t.in.Now-window)
			if top := peakSince(*hist, t.in.Now-lead); falling && !foreseen && top > max(n, held) {
				d.note(fmt.Sprintf("ahead: %s scale-down held for %.0f s, not the lead time, whose %d it would have kept: the forecast falls through the horizon", c, window, min(cur, top)))
			}
			if held > n {
				n = min(cur, held)
			}
			// Bursts much shorter than the lead time are over before capacity ordered for
			// them is ready: what they needed is held for several lead times, not one.
			if bursty && !foreseen {
				if top := t.st.Ahead.peakNeed(c, aheadBurstHoldLeads*lead); top > n {
					n = min(cur, top)
					d.note(fmt.Sprintf("ahead: %s held at %d: arrivals come in bursts over twice the level, and the last %.0f s needed %d", c, n, aheadBurstHoldLeads*lead, top))
				}
			}
			// Demand that came back after quiet gaps will likely come back again: unless a
			// trusted period is known (the forecast sees it coming), a scale-down waits out
			// the longest such gap (twice over: the next may be longer), so capacity is not
			// released just before it is needed.
			for !periodic && n < cur {
				longest, quiet := t.st.Ahead.quietGaps(c, n, aheadMaxGapLeads*lead)
				hold := math.Min(aheadMaxGapHoldSeconds, aheadGapHoldFactor*longest+lead)
				if longest == 0 || quiet >= hold {
					break
				}
				if n == need[c] || n == (*hist)[0].Replicas {
					d.note(fmt.Sprintf("ahead: %s held above %d: demand needing more came back after %.0f s quiet before; quiet for %.0f s", c, n, longest, quiet))
				}
				n++
			}
			slow := (c == t.promptPool() && tr.TTFTMs != nil && *tr.TTFTMs > t.p.cfg.TTFTMs) ||
				(c == Decode && tr.ITLMs != nil && *tr.ITLMs > t.p.cfg.ITLMs)
			if slow && n < cur {
				d.note(fmt.Sprintf("ahead: %s not scaled down: its observed latency breaks the SLA", c))
				n = cur
			}
			// Prompts getting longer are sized at their mean over the newest half lead time
			// (shiftWindow), which trails the latest prompts while the mix moves on; a
			// scale-down now would meet the longer ones that follow with fewer engines, a lead
			// time before more could be ready. An aggregated pool only: there each prompt's
			// chunks slow every decode in the engine's passes, where a prefill pool's lag
			// costs the TTFT alone; on disaggregated pools the hold cost GPU-hours for almost
			// no goodput (docs/policy.md, "Prompts getting longer").
			if t.promptsLonger && n < cur && t.p.cfg.Mode == config.ModeAgg {
				d.note(fmt.Sprintf("ahead: %s not scaled down: the newest prompts are longer than the %d s mean", c, aheadLengthSeconds))
				n = cur
			}
		}
		target[c] = n
	}
	if t.p.cfg.Mode == config.ModeDisagg {
		p, dd, kept := t.aheadFitPair(target[Prefill], target[Decode], need[Prefill], need[Decode])
		if p != target[Prefill] || dd != target[Decode] {
			how := ""
			if kept {
				how = ", keeping the engines each pool has and needs"
			}
			d.note(fmt.Sprintf("ahead: %dP %dD fitted to the GPU budget: %dP %dD%s", target[Prefill], target[Decode], p, dd, how))
		}
		target[Prefill], target[Decode] = p, dd
	} else {
		c := t.pools()[0]
		n := ProportionalClampSingle(target[c], t.gpuCost(c), t.p.cfg.MinGPUBudget, t.p.cfg.MaxGPUBudget, t.minEndpoint(c))
		if n != target[c] {
			d.note(fmt.Sprintf("ahead: %s %d fitted to the GPU budget: %d", c, target[c], n))
		}
		target[c] = n
	}
	var out Decision
	for _, c := range t.pools() {
		cur, n := t.provisioned(c), target[c]
		reason := ReasonNoChange
		switch {
		case n > cur && t.idleForeseen:
			reason = ReasonScaleUpForeseen
		case n > cur:
			reason = ReasonScaleUp
		case n < cur:
			reason = ReasonScaleDown
		case need[c] < cur, c == Decode && t.decodeKept:
			reason = ReasonScaleDownStabilizing
		}
		t.setLoadReason(c, reason)
		if n != cur {
			*out.pool(c) = ptr(n)
		}
		up := &t.st.Ahead.UpPrefill
		if c == Decode {
			up = &t.st.Ahead.UpDecode
		}
		switch {
		case n > t.current(c) && *up == nil && n > cur:
			*up = &PendingDesired{Replicas: n, At: t.in.Now}
		case *up != nil && n < (*up).Replicas:
			*up = nil // cancelled before it was ready: not a measurement
		}
	}
	return out
}

// liveSeconds is how much live traffic the history holds: the seconds its buckets cover, of
// which a warmed history (load_predictor_warmup_trace) counts only those observed live
// (AheadState.LiveS) — what the engines show is learned from those alone.
func (t *tick) liveSeconds() float64 {
	var observed float64
	for _, c := range t.st.Ahead.Covered {
		observed += c
	}
	if a := t.st.Ahead; a.Warmed {
		observed = math.Min(observed, a.LiveS)
	}
	return observed
}

// trendFit is a least-squares line through rates: the trend window's bucket rates (x in
// buckets), or, before three buckets, its interval rates (x in ticks).
type trendFit struct {
	// slope is the line's slope (req/s per bucket).
	slope float64
	// variance is the residuals' variance around the line.
	variance float64
	// t is the slope's t statistic: the slope over its standard error (±Inf when the rates
	// lie on a sloped line, 0 on a flat one).
	t float64
}

// fitIntervals fits the line through consecutive interval rates (the slope per interval).
func fitIntervals(rates []float64) trendFit {
	ticks := make([]float64, len(rates))
	for i := range ticks {
		ticks[i] = float64(i)
	}
	return fitTrend(ticks, rates)
}

// fitTrend fits the rates ys at the positions xs (buckets or ticks; any order).
func fitTrend(xs, ys []float64) trendFit {
	var tf trendFit
	rel := make([]float64, len(xs))
	for i, x := range xs {
		rel[i] = x - xs[0]
	}
	icept, slope := stat.LinearRegression(rel, ys, nil, false)
	tf.slope = slope
	for i, x := range rel {
		d := ys[i] - (icept + slope*x)
		tf.variance += d * d / float64(len(xs)-2)
	}
	mean := stat.Mean(rel, nil)
	var sxx float64
	for _, x := range rel {
		sxx += (x - mean) * (x - mean)
	}
	switch se := math.Sqrt(tf.variance / sxx); {
	case se > 0:
		tf.t = slope / se
	case slope > 0 && sxx > 0:
		tf.t = math.Inf(1)
	case slope < 0 && sxx > 0:
		tf.t = math.Inf(-1)
	}
	return tf
}

// rise is how much the rate rises over the next h buckets along the line (≥ 0: a falling
// trend never scales down early).
func (tf trendFit) rise(h float64) float64 { return math.Max(0, tf.slope*h) }

// risesOnItsOwn reports whether the line through a run of n rates rises by more than
// chance: its slope's t statistic is over the aheadStepConfidence quantile of Student's t
// with n−2 degrees of freedom (stepUp reads the run after its split so, troughRise the run
// after the trough).
func (tf trendFit) risesOnItsOwn(n int) bool { return tf.t > slopeTBound(n) }

// fallsOnItsOwn reports whether the line through n rates falls beyond chance: its slope's t
// statistic under the negative aheadStepConfidence quantile of Student's t (n − 2 degrees of
// freedom).
func (tf trendFit) fallsOnItsOwn(n int) bool { return tf.t < -slopeTBound(n) }

// slopeTBound is the aheadStepConfidence quantile of Student's t with n − 2 degrees of
// freedom: the bound a line's slope t statistic over n rates passes by more than chance.
func slopeTBound(n int) float64 {
	return (distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(n - 2)}).Quantile(aheadStepConfidence)
}

// peakSince is the highest count of the recommendations h (a window kept by
// pushRecommendation: decreasing counts, oldest first) made at since or later (0: none).
func peakSince(h []Recommendation, since float64) int {
	for _, r := range h {
		if r.At >= since {
			return r.Replicas
		}
	}
	return 0
}

// aheadFitPair fits the disaggregated targets p and d (holds included) to the GPU budget,
// given what the pools need before their holds (needP, needD). Over the budget's ceiling,
// each pool keeps the engines it has (provisioned, starting ones included) that it needs,
// raised to its minimum endpoints; what the budget leaves goes an engine at a time to the
// pool with the lower share of its target (ties to prefill), and kept is true. Dynamo's fit
// of the targets (ProportionalClampPair) is the answer, kept false, when the ceiling does not
// bind, or when the engines kept exceed it (a budget lowered under the deployment) or leave
// no room for the minimum endpoints. docs/policy.md, "The last engines at the GPU budget",
// says why: Dynamo's fit moves the last engines between the pools as the needs drift.
func (t *tick) aheadFitPair(p, d, needP, needD int) (fp, fd int, kept bool) {
	gp, gd := t.gpuCost(Prefill), t.gpuCost(Decode)
	budget := t.p.cfg.MaxGPUBudget
	dynamo := func() (int, int, bool) {
		fp, fd := ProportionalClampPair(p, d, gp, gd, t.p.cfg.MinGPUBudget, budget, t.minEndpoint(Prefill), t.minEndpoint(Decode))
		return fp, fd, false
	}
	if budget < 0 || gp <= 0 || gd <= 0 || p*gp+d*gd <= budget {
		return dynamo()
	}
	fp = max(0, min(p, needP, t.provisioned(Prefill)), t.minEndpoint(Prefill))
	fd = max(0, min(d, needD, t.provisioned(Decode)), t.minEndpoint(Decode))
	left := budget - fp*gp - fd*gd
	if left < 0 {
		return dynamo()
	}
	for {
		moreP, moreD := fp < p && gp <= left, fd < d && gd <= left
		if !moreP && !moreD {
			return fp, fd, true
		}
		if moreP && (!moreD || fp*d <= fd*p) { // fp/p ≤ fd/d
			fp, left = fp+1, left-gp
		} else {
			fd, left = fd+1, left-gd
		}
	}
}

// aheadHoldWindow is how long a scale-down holds the highest count needed before it: the
// lead time (what it takes to come back) — unless the forecast sees the next lead time
// (short): a followed period on steady arrivals (no burst within the buckets beyond
// aheadCalmBurst of the level), or a fall that lasts it (fallingHold); then one bucket, only
// against N↔N+1 flapping.
func (t *tick) aheadHoldWindow(lead float64, short bool) float64 {
	if short {
		return math.Min(lead, t.st.Ahead.BucketS)
	}
	return lead
}

// windowCurve is the trend window's interval rates (windowRates: the newest window seconds
// of them, as stepUp reads them; at least 2·aheadStepIntervals+1) and the parabola through
// them, which bentRise and troughRise read.
type windowCurve struct {
	ys []float64
	p  parabola
}

// curve fits the parabola through the trend window's interval rates; ok is false when there
// are too few of them or the parabola fits them no better than the line by more than chance
// (fitParabola: the F test of one parameter more at aheadStepConfidence, as stepUp's).
func (a *AheadState) curve(window, interval float64) (windowCurve, bool) {
	ys, ok := a.windowRates(window, interval)
	if !ok {
		return windowCurve{}, false
	}
	p, ok := fitParabola(ys)
	return windowCurve{ys: ys, p: p}, ok
}

// bentRise reports whether the window's curve (a parabola that fits its interval rates
// better than the line, curve) bends down: a negative curvature. rise is then the parabola's
// highest rise over the horizon from the level's midpoint (levelWindow seconds back from
// now, halved), at least 0: a rise that slows is forecast to its turn rather than along the
// line through the whole window, which a sinusoid's peak overshoots by more than its
// amplitude (a 2–30 req/s sinusoid of a 300 s period was forecast at 48 req/s at its peak).
func (c windowCurve) bentRise(interval, levelWindow, horizon float64) (rise float64, ok bool) {
	p := c.p
	if !(p.c2 < 0) {
		return 0, false
	}
	// Positions in intervals, centred (the newest interval's midpoint is now − interval/2).
	mid := float64(len(c.ys)-1) / 2
	from := mid + 0.5 - levelWindow/2/interval // the level's midpoint
	to := from + horizon/interval
	top := math.Max(p.at(from), p.at(to))
	if v := p.vertex(); v > from && v < to {
		top = p.at(v)
	}
	return math.Max(0, top-p.at(from)), true
}

// troughRise reports whether the window's curve (a parabola that fits its interval rates
// better than the line, curve) turns up from a trough: a positive curvature, the lowest
// point inside the window, and the rates after that point (at least aheadStepIntervals)
// rise on their own (risesOnItsOwn, as stepUp reads a run). rise is then that line's slope
// over the horizon, at most headroom (the history's highest rate less the level, at least
// 0). The line through the whole window holds the fall before the trough: on a 9–56 req/s
// sinusoid of a 300 s period (the robustness benchmark's seed 3, case 18) it still fell
// 30 s into the second rise, and the forecast stayed at the level plus its margins while
// the rate doubled within the lead time. The rise's own line starts at the trough and lags
// its convex start less; capped at the highest rate the history shows, a wave shorter than
// the horizon is not extrapolated past its peak. As stepUp's split, the run's start is
// chosen from the same rates, so 99% is a threshold rather than an exact test level. A step
// up after a fall reads as such a rise too; forecast then reads the step (stepUp), which
// replaces it.
func (c windowCurve) troughRise(interval, horizon, headroom float64) (rise float64, ok bool) {
	ys, p := c.ys, c.p
	if !(p.c2 > 0) {
		return 0, false
	}
	m := len(ys)
	mid := float64(m-1) / 2
	v := p.vertex()
	if !(v > -mid) {
		return 0, false // the lowest point is not inside the window: a rise speeding up
	}
	if !(v <= mid-float64(aheadStepIntervals-1)) {
		return 0, false // too few rates after it to read a rise (or a line: no turn at all)
	}
	first := int(math.Ceil(v + mid)) // the first rate after the trough
	n := m - first                   // at least aheadStepIntervals, by the bound above
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = float64(i)
	}
	tf := fitTrend(xs, ys[first:])
	if !tf.risesOnItsOwn(n) {
		return 0, false
	}
	return math.Max(0, math.Min(tf.slope*horizon/interval, headroom)), true
}

// parabola is c0 + c1·x + c2·x² through a window's interval rates, x in intervals from the
// window's middle.
type parabola struct{ c0, c1, c2 float64 }

// at is the parabola's value at x.
func (p parabola) at(x float64) float64 { return p.c0 + p.c1*x + p.c2*x*x }

// slope is the parabola's slope at x.
func (p parabola) slope(x float64) float64 { return p.c1 + 2*p.c2*x }

// vertex is the x of the parabola's turn (±Inf or NaN when it is a line).
func (p parabola) vertex() float64 { return -p.c1 / (2 * p.c2) }

// fitParabola fits a parabola to the rates ys (one interval apart, oldest first) by least
// squares; ok is false unless it fits them better than the line by more than chance
// (fitsBetter: the F test of one parameter more at aheadStepConfidence).
func fitParabola(ys []float64) (parabola, bool) {
	m := len(ys)
	if m < 4 {
		return parabola{}, false
	}
	mid := float64(m-1) / 2
	design := mat.NewDense(m, 3, nil)
	xs := make([]float64, m)
	for i := range m {
		x := float64(i) - mid
		xs[i] = x
		design.Set(i, 0, 1)
		design.Set(i, 1, x)
		design.Set(i, 2, x*x)
	}
	var beta mat.VecDense
	if err := beta.SolveVec(design, mat.NewVecDense(m, ys)); err != nil {
		return parabola{}, false
	}
	p := parabola{beta.AtVec(0), beta.AtVec(1), beta.AtVec(2)}
	var sse float64
	for i, x := range xs {
		d := ys[i] - p.at(x)
		sse += d * d
	}
	return p, fitsBetter(fitTrend(xs, ys).variance*float64(m-2), sse, m)
}

// highestRate is the highest rate of the history's buckets (0: none).
func (a *AheadState) highestRate() float64 {
	top := 0.0
	for i := range a.Count {
		if r := a.rate(i); !math.IsNaN(r) {
			top = math.Max(top, r)
		}
	}
	return top
}

// windowRates are the trend window's interval rates, oldest first: the newest window
// seconds of them, within its buckets (none from before a gap in the observations); ok is
// false when there are fewer than 2·aheadStepIntervals+1 (stepUp and curve read them).
func (a *AheadState) windowRates(window, interval float64) (ys []float64, ok bool) {
	if !(interval > 0) || !(window > 0) || !(a.BucketS > 0) {
		return nil, false
	}
	ys = a.recentSince(len(a.Count) - 1 - int(math.Ceil(window/a.BucketS)))
	m := min(len(ys), int(math.Ceil(window/interval)))
	if m < 2*aheadStepIntervals+1 {
		return nil, false
	}
	return ys[len(ys)-m:], true
}

// fitsBetter reports whether a fit with one parameter more than the line (a step's two
// means, a parabola) leaves less squared error over m points than the line by more than
// chance: the F test of one parameter more, (sseLine − sse) over sse/(m−3) against the
// aheadStepConfidence quantile of F(1, m−3) (an exact fit that beats the line always does).
func fitsBetter(sseLine, sse float64, m int) bool {
	if !(sseLine > sse) {
		return false
	}
	if sse <= 0 {
		return true
	}
	return (sseLine-sse)/(sse/float64(m-3)) > (distuv.F{D1: 1, D2: float64(m - 3)}).Quantile(aheadStepConfidence)
}
