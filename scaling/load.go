package scaling

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
)

// Static thresholds of the easy optimisation targets (Dynamo load_scaling.py, reference §4.5).
const (
	prefillThroughputUp   = 1.0 // queued tokens / context length
	prefillThroughputDown = 0.1
	prefillLatencyUp      = 0.1
	prefillLatencyDown    = 0.0
	decodeThroughputUp    = 1.0 // (scheduled + queued KV) / max KV
	decodeThroughputDown  = 0.6
	decodeLatencyUp       = 0.4
	decodeLatencyDown     = 0.1
)

// load is one load tick (Dynamo G3 load_scaling.py, reference §4).
func (t *tick) load() *Decision {
	d, cfg := t.diag, t.p.cfg
	if !cfg.EnableLoadScaling {
		d.LoadReason = ReasonDisabled
		return nil
	}
	if !t.countsKnown {
		d.LoadReason = ReasonNoWorkerCounts
		return nil
	}
	switch cfg.Mode {
	case config.ModeAgg:
		return t.loadAgg()
	case config.ModeDisagg:
		return t.loadDisagg()
	case config.ModePrefill:
		return t.loadSingle(Prefill)
	default:
		return t.loadSingle(Decode)
	}
}

// latestFPMs keeps one FPM per (worker_id, dp_rank) — the last given — in key order.
func latestFPMs(fpms []perf.FPM) []perf.FPM {
	if len(fpms) == 0 {
		return nil
	}
	out := slices.Clone(fpms)
	slices.SortStableFunc(out, func(a, b perf.FPM) int {
		return cmp.Or(cmp.Compare(a.WorkerID, b.WorkerID), cmp.Compare(a.DPRank, b.DPRank))
	})
	kept := out[:0]
	for i := range out {
		if len(kept) > 0 && kept[len(kept)-1].WorkerID == out[i].WorkerID && kept[len(kept)-1].DPRank == out[i].DPRank {
			kept[len(kept)-1] = out[i]
			continue
		}
		kept = append(kept, out[i])
	}
	return kept
}

// stats are the pool's latest FPMs the load loop decides from. FPMs of a schema version
// other than perf.FPMVersion are left out, as Dynamo's planner drops them: they are neither
// samples nor load (the observation step notes how many were skipped). Worked out once a
// tick; callers only read them.
func (t *tick) stats(c Component) []perf.FPM {
	if t.in.FPM == nil {
		return nil
	}
	if s, ok := t.fpmStats[c]; ok {
		return s
	}
	s := t.latestSupported(c)
	if t.fpmStats == nil {
		t.fpmStats = map[Component][]perf.FPM{}
	}
	t.fpmStats[c] = s
	return s
}

// latestSupported is stats worked out.
func (t *tick) latestSupported(c Component) []perf.FPM {
	fpms := t.in.FPM.Decode
	if c == Prefill {
		fpms = t.in.FPM.Prefill
	}
	supported := make([]perf.FPM, 0, len(fpms))
	for _, f := range fpms {
		if f.Version == perf.FPMVersion {
			supported = append(supported, f)
		}
	}
	if n := len(fpms) - len(supported); n > 0 && !t.p.sla() {
		t.diag.note(fmt.Sprintf("load %s: skipped %d FPMs of an unsupported schema version (want %d)", c, n, perf.FPMVersion))
	}
	return latestFPMs(supported)
}

// reconcileFPMWorkers is Dynamo's _reconcile_fpm_worker_count: the FPMs must come from
// exactly count workers, each with the same number of attention-DP ranks, all reporting.
func reconcileFPMWorkers(stats []perf.FPM, count int) (bool, string) {
	// Ranks per worker, in first-seen order (no map iteration: Decide also runs in workflow
	// code, where iteration order must not matter, and workflowcheck cannot tell it does not).
	index := map[string]int{}
	var ranks []map[int64]bool
	for _, f := range stats {
		i, ok := index[f.WorkerID]
		if !ok {
			i = len(ranks)
			index[f.WorkerID] = i
			ranks = append(ranks, map[int64]bool{})
		}
		ranks[i][f.DPRank] = true
	}
	if len(ranks) != count {
		return false, fmt.Sprintf("%d workers publish FPMs, %d are ready", len(ranks), count)
	}
	dp := -1
	for _, r := range ranks {
		if dp >= 0 && len(r) != dp {
			return false, "workers report different numbers of DP ranks"
		}
		dp = len(r)
	}
	if dp < 0 {
		dp = 1
	}
	if len(stats) != count*dp {
		return false, fmt.Sprintf("incomplete FPM coverage: want %d×%d, got %d", count, dp, len(stats))
	}
	return true, ""
}

func (t *tick) lowerBound(c Component) int {
	if c == Prefill {
		return t.st.LowerBoundPrefill
	}
	return t.st.LowerBoundDecode
}

func (t *tick) setLoadReason(c Component, r Reason) {
	t.diag.LoadReason = r
	if c == Prefill {
		t.diag.LoadReasonPrefill = r
	} else {
		t.diag.LoadReasonDecode = r
	}
}

// finalReason classifies a single pool's final target against its current count.
func finalReason(final, original, current int, budget Reason) Reason {
	r := ReasonNoChange
	switch {
	case final < current && final > original:
		r = ReasonScaleDownCappedByThroughput
	case final < current:
		r = ReasonScaleDown
	case final > current:
		r = ReasonScaleUp
	}
	if budget != "" {
		r = budget
	}
	return r
}

func (t *tick) loadSingle(c Component) *Decision {
	cfg := t.p.cfg
	if t.scalingInProgress(c) {
		t.setLoadReason(c, ReasonScalingInProgress)
		return nil
	}
	stats, n := t.stats(c), t.current(c)
	if len(stats) == 0 {
		t.setLoadReason(c, ReasonNoFPMData)
		return nil
	}
	if ok, why := reconcileFPMWorkers(stats, n); !ok {
		t.diag.note(fmt.Sprintf("load %s: %s", c, why))
		t.setLoadReason(c, ReasonWorkerCountMismatch)
		return nil
	}
	var desired *int
	var r Reason
	switch {
	case cfg.IsEasyMode() && c == Prefill:
		desired, r = t.prefillEasy(stats, n)
	case cfg.IsEasyMode():
		desired, r = t.decodeEasy(stats, n, false)
	case c == Prefill:
		desired, r = t.prefillSLA(stats, n)
	default:
		desired, r = t.decodeSLA(stats, n, false)
	}
	if desired == nil {
		t.setLoadReason(c, r)
		return nil
	}
	original := *desired
	target := original
	if cfg.EnableThroughputScaling {
		target = max(target, t.lowerBound(c))
	}
	// Dynamo's single-pool path has no endpoint lift (its disagg and agg paths do); it is
	// applied here too so a raised min endpoint is honoured in every mode.
	target = max(target, t.minEndpoint(c))
	target, budget := t.applySingleBudget(target, c)
	t.setLoadReason(c, finalReason(target, original, n, budget))
	return single(c, target)
}

func (t *tick) loadDisagg() *Decision {
	d, cfg := t.diag, t.p.cfg
	all := func(r Reason) { d.LoadReason, d.LoadReasonPrefill, d.LoadReasonDecode = r, r, r }
	pStats, dStats := t.stats(Prefill), t.stats(Decode)
	if len(pStats) == 0 && len(dStats) == 0 {
		all(ReasonNoFPMData)
		return nil
	}
	if t.scalingInProgress(Prefill) || t.scalingInProgress(Decode) {
		all(ReasonScalingInProgress)
		return nil
	}
	for _, x := range []struct {
		c     Component
		stats []perf.FPM
		n     int
	}{{Prefill, pStats, t.readyP}, {Decode, dStats, t.readyD}} {
		if len(x.stats) == 0 {
			continue
		}
		if ok, why := reconcileFPMWorkers(x.stats, x.n); !ok {
			d.note(fmt.Sprintf("load %s: %s", x.c, why))
			all(ReasonWorkerCountMismatch)
			return nil
		}
	}
	var pDes, dDes *int
	var pReason, dReason Reason
	if len(pStats) > 0 {
		if cfg.IsEasyMode() {
			pDes, pReason = t.prefillEasy(pStats, t.readyP)
		} else {
			pDes, pReason = t.prefillSLA(pStats, t.readyP)
		}
	}
	if len(dStats) > 0 {
		if cfg.IsEasyMode() {
			dDes, dReason = t.decodeEasy(dStats, t.readyD, false)
		} else {
			dDes, dReason = t.decodeSLA(dStats, t.readyD, false)
		}
	}
	finalP, finalD := t.readyP, t.readyD
	if pDes != nil {
		finalP = *pDes
	}
	if dDes != nil {
		finalD = *dDes
	}
	origP, origD := finalP, finalD
	if cfg.EnableThroughputScaling {
		finalP, finalD = max(finalP, t.st.LowerBoundPrefill), max(finalD, t.st.LowerBoundDecode)
	}
	postFloorP, postFloorD := finalP, finalD
	finalP, finalD = max(finalP, t.minEndpoint(Prefill)), max(finalD, t.minEndpoint(Decode))
	if cfg.EnableThroughputScaling && (postFloorP > origP || postFloorD > origD) {
		finalP, finalD = t.fitDisaggCeiling(finalP, finalD)
	}
	finalP, finalD, budget := t.applyDisaggBudget(finalP, finalD)

	reason := func(final, original, postFloor, current int) Reason {
		floorCapped := postFloor > original && original < current
		switch {
		case final > current:
			return ReasonScaleUp
		case final < current && floorCapped:
			return ReasonScaleDownCappedByThroughput
		case final < current:
			return ReasonScaleDown
		case floorCapped:
			return ReasonScaleDownCappedByThroughput
		}
		return ReasonNoChange
	}
	d.LoadReasonPrefill = reason(finalP, origP, postFloorP, t.readyP)
	d.LoadReasonDecode = reason(finalD, origD, postFloorD, t.readyD)
	priority := map[Reason]int{ReasonScaleUp: 4, ReasonScaleDownCappedByThroughput: 3, ReasonScaleDown: 2, ReasonNoChange: 1}
	d.LoadReason = d.LoadReasonPrefill
	if priority[d.LoadReasonDecode] > priority[d.LoadReasonPrefill] {
		d.LoadReason = d.LoadReasonDecode
	}
	if budget != "" {
		d.LoadReason = budget
	}
	if finalP == t.readyP && finalD == t.readyD {
		// Restore the sub-decisions' informative reasons (e.g. insufficient_data).
		if pReason != "" && pReason != ReasonNoChange {
			d.LoadReasonPrefill = pReason
		}
		if dReason != "" && dReason != ReasonNoChange {
			d.LoadReasonDecode = dReason
		}
		if budget == "" {
			for _, r := range []Reason{pReason, dReason} {
				if r != "" && r != ReasonNoChange {
					d.LoadReason = r
					break
				}
			}
		}
		return nil
	}
	return &Decision{Prefill: ptr(finalP), Decode: ptr(finalD)}
}

func (t *tick) loadAgg() *Decision {
	d, cfg := t.diag, t.p.cfg
	stats, n := t.stats(Decode), t.readyD
	if len(stats) == 0 {
		t.setLoadReason(Decode, ReasonNoFPMData)
		return nil
	}
	if t.scalingInProgress(Decode) {
		t.setLoadReason(Decode, ReasonScalingInProgress)
		return nil
	}
	if ok, why := reconcileFPMWorkers(stats, n); !ok {
		d.note(fmt.Sprintf("load aggregated: %s", why))
		t.setLoadReason(Decode, ReasonWorkerCountMismatch)
		return nil
	}
	floorAndBudget := func(desired int) (int, Reason) {
		desired = max(desired, t.minEndpoint(Decode))
		if cfg.EnableThroughputScaling {
			desired = max(desired, t.st.LowerBoundDecode)
		}
		return t.applySingleBudget(desired, Decode)
	}
	if cfg.IsEasyMode() {
		des, r := t.decodeEasy(stats, n, true)
		if des == nil {
			t.setLoadReason(Decode, r)
			return nil
		}
		target, budget := floorAndBudget(*des)
		t.setLoadReason(Decode, finalReason(target, *des, n, budget))
		return single(Decode, target)
	}
	if ok, why := t.agg.Ready(); !ok {
		d.note("load aggregated: perf model not ready: " + why)
		t.setLoadReason(Decode, ReasonInsufficientData)
		return nil
	}
	var pDes *int
	var pReason Reason
	if caps := t.caps.Decode; caps == nil || caps.MaxNumBatchedTokens <= 0 {
		d.note("load aggregated: max_num_batched_tokens not reported: TTFT side skipped")
	} else {
		pDes, pReason = t.aggPrefillSLA(stats, n)
	}
	dDes, dReason := t.decodeSLA(stats, n, true)
	anyRefused := pReason == ReasonScaleDownRefusedConsolidation || dReason == ReasonScaleDownRefusedConsolidation
	desired := n
	switch {
	case pDes != nil && *pDes > n:
		desired = *pDes
	case dDes != nil && *dDes > n:
		desired = *dDes
	case pDes == nil && dDes != nil && *dDes < n:
		desired = *dDes // prefill signal unavailable: decode-only scale-down
	case pDes != nil && *pDes < n && dDes != nil && *dDes < n:
		desired = max(*pDes, *dDes)
	}
	original := desired
	target, budget := floorAndBudget(desired)
	floorCapped := target > original && original < n
	if target == n {
		switch {
		case budget != "":
			t.setLoadReason(Decode, budget)
		case anyRefused && !floorCapped:
			t.setLoadReason(Decode, ReasonScaleDownRefusedConsolidation)
		case floorCapped:
			t.setLoadReason(Decode, ReasonScaleDownCappedByThroughput)
		default:
			t.setLoadReason(Decode, ReasonNoChange)
		}
		return nil
	}
	r := ReasonScaleUp
	if target < n {
		r = ReasonScaleDown
		if floorCapped {
			r = ReasonScaleDownCappedByThroughput
		}
	}
	if budget != "" {
		r = budget
	}
	t.setLoadReason(Decode, r)
	return single(Decode, target)
}

// scaleDecision combines the per-engine estimates (ms) with the precomputed scale-down
// permission (Dynamo's _scale_decision): up by one when every engine is over the SLA, down by
// one (not below minEndpoint) when allowed, else no decision.
func scaleDecision(estimates []float64, sla float64, n, minEndpoint int, canScaleDown bool) (*int, Reason) {
	if len(estimates) == 0 {
		return nil, ReasonInsufficientData
	}
	allOver := true
	for _, e := range estimates {
		if !(e > sla) {
			allOver = false
			break
		}
	}
	if allOver {
		return ptr(n + 1), ""
	}
	if n > 1 && canScaleDown {
		return ptr(max(n-1, minEndpoint)), ""
	}
	return nil, ReasonNoChange
}

func (t *tick) consolidation(n int) float64 {
	if n > 1 {
		return float64(n) / float64(n-1)
	}
	return 1
}

func (t *tick) sensitivity() float64 { return float64(t.p.cfg.LoadScalingDownSensitivity) / 100 }

func (t *tick) recordTTFT(estimates []float64) {
	if len(estimates) > 0 {
		t.diag.EstimatedTTFTMs = ptr(slices.Max(estimates))
	}
}

func (t *tick) recordITL(estimates []float64) {
	if len(estimates) > 0 {
		t.diag.EstimatedITLMs = ptr(slices.Max(estimates))
	}
}

// prefillSLA estimates each prefill engine's next-request TTFT and decides against the TTFT
// target, with the consolidation-aware scale-down check: the queue-induced part of the TTFT
// after absorbing N/(N-1) of the queue must stay within (SLA − own prefill time) ×
// sensitivity on every engine.
func (t *tick) prefillSLA(stats []perf.FPM, n int) (*int, Reason) {
	cfg := t.p.cfg
	if ok, why := t.prefill.Ready(); !ok {
		t.diag.note("load prefill: perf model not ready: " + why)
		return nil, ReasonInsufficientData
	}
	if n == 0 {
		return nil, ReasonInsufficientData
	}
	caps := t.caps.Prefill
	if caps == nil || caps.MaxNumBatchedTokens <= 0 {
		t.diag.note("load prefill: max_num_batched_tokens not reported")
		return nil, ReasonInsufficientData
	}
	lim, kv, sens, cons := caps.Limits(), t.kvHitRate(), t.sensitivity(), t.consolidation(n)
	var estimates []float64
	canDown, refused := n > 1, false
	for i := range stats {
		f := &stats[i]
		if est, ok := t.prefill.QueuedPrefillTime(f, perf.NextRequestPrefill(lim, kv)); ok {
			estimates = append(estimates, est*1000)
		}
		if !canDown {
			continue
		}
		q := perf.NextRequestPrefill(lim, kv)
		q.QueueScale = 0
		own, ok := t.prefill.QueuedPrefillTime(f, q)
		if !ok {
			canDown = false
			continue
		}
		ownMs := own * 1000
		budget := (cfg.TTFTMs - ownMs) * sens
		if budget <= 0 {
			canDown, refused = false, true
			continue
		}
		q.QueueScale = cons
		post, ok := t.prefill.QueuedPrefillTime(f, q)
		switch {
		case !ok:
			canDown = false
		case post*1000-ownMs >= budget:
			canDown, refused = false, true
		}
	}
	t.recordTTFT(estimates)
	dec, r := scaleDecision(estimates, cfg.TTFTMs, n, t.minEndpoint(Prefill), canDown)
	if dec == nil && refused {
		r = ReasonScaleDownRefusedConsolidation
	}
	return dec, r
}

// decodeSLA estimates each engine's next-request ITL and decides against the ITL target; a
// scale-down must keep the absorbed KV load under max_kv_tokens and the projected ITL under
// SLA × sensitivity on every engine. For an aggregated pool (agg) queued prefill counts as
// future KV, and a refused scale-down returns n rather than nil so the combination with the
// TTFT side cannot mistake the refusal for a missing signal.
func (t *tick) decodeSLA(stats []perf.FPM, n int, agg bool) (*int, Reason) {
	cfg := t.p.cfg
	m := t.decode
	if agg {
		m = t.agg
	}
	if ok, why := m.Ready(); !ok {
		t.diag.note("load decode: perf model not ready: " + why)
		return nil, ReasonInsufficientData
	}
	if n == 0 {
		return nil, ReasonInsufficientData
	}
	var maxKV int64
	if c := t.caps.Decode; c != nil {
		maxKV = c.MaxKVTokens
	}
	sens, cons, accept := t.sensitivity(), t.consolidation(n), t.acceptLength()
	var estimates []float64
	canDown, refused := n > 1, false
	for i := range stats {
		f := &stats[i]
		if est, ok := m.ScheduledDecodeITL(f, perf.NextRequestDecode()); ok {
			estimates = append(estimates, est*1000/accept)
		}
		if !canDown {
			continue
		}
		kv := float64(f.Scheduled.SumDecodeKVTokens) + float64(f.Queued.SumDecodeKVTokens)
		if agg {
			kv += float64(f.Queued.SumPrefillTokens)
		}
		// Dynamo's int((sched + queued) * N/(N-1)) >= max_kv, compared as floats (the
		// truncation cannot change the comparison with an integer, and no conversion can wrap).
		if maxKV > 0 && kv*cons >= float64(maxKV) {
			canDown, refused = false, true // the survivors' cache cannot hold the load
			continue
		}
		q := perf.NextRequestDecode()
		q.DecodeScale, q.IncludeQueuedPrefillAsKV = cons, agg
		post, ok := m.ScheduledDecodeITL(f, q)
		switch {
		case !ok:
			canDown = false
		case post*1000/accept >= cfg.ITLMs*sens:
			canDown, refused = false, true
		}
	}
	t.recordITL(estimates)
	dec, r := scaleDecision(estimates, cfg.ITLMs, n, t.minEndpoint(Decode), canDown)
	if dec == nil && refused {
		if agg {
			return ptr(n), ReasonScaleDownRefusedConsolidation
		}
		r = ReasonScaleDownRefusedConsolidation
	}
	return dec, r
}

// aggPrefillSLA is the TTFT side of an aggregated pool. A refused scale-down returns n (not
// nil) so the combination cannot mistake it for a missing signal.
func (t *tick) aggPrefillSLA(stats []perf.FPM, n int) (*int, Reason) {
	cfg := t.p.cfg
	lim, kv, sens, cons := t.caps.Decode.Limits(), t.kvHitRate(), t.sensitivity(), t.consolidation(n)
	var estimates []float64
	canDown, refused := n > 1, false
	for i := range stats {
		f := &stats[i]
		if est, ok := t.agg.QueuedPrefillTime(f, perf.NextRequestPrefill(lim, kv)); ok {
			estimates = append(estimates, est*1000)
		}
		if !canDown {
			continue
		}
		q := perf.PrefillQuery{Limits: lim, KVHitRate: kv, QueueScale: 0, DecodeScale: cons, IncludeQueuedDecode: true, AddNextRequest: true}
		own, ok1 := t.agg.QueuedPrefillTime(f, q)
		q.QueueScale = cons
		post, ok2 := t.agg.QueuedPrefillTime(f, q)
		if !ok1 || !ok2 {
			canDown = false
			continue
		}
		ownMs := own * 1000
		budget := (cfg.TTFTMs - ownMs) * sens
		if budget <= 0 || post*1000-ownMs >= budget {
			canDown, refused = false, true
		}
	}
	t.recordTTFT(estimates)
	dec, r := scaleDecision(estimates, cfg.TTFTMs, n, t.minEndpoint(Decode), canDown)
	if dec == nil && refused {
		return ptr(n), ReasonScaleDownRefusedConsolidation
	}
	return dec, r
}

// prefillEasy is the threshold decision of a prefill pool (reference §4.5): any engine's
// queue at or over the scale-up threshold adds one replica; every engine under the
// scale-down threshold removes one. With prefill_scale_up_trend_intervals = K > 0, a
// scale-up is skipped when the queue's trend since the last tick brings it under the
// scale-up threshold within K intervals (Dynamo's older load planner).
func (t *tick) prefillEasy(stats []perf.FPM, n int) (*int, Reason) {
	cfg := t.p.cfg
	if n == 0 {
		return nil, ReasonInsufficientData
	}
	var up, down float64
	values := make([]float64, 0, len(stats))
	switch cfg.OptimizationTarget {
	case config.TargetLoad:
		if cfg.PrefillScaleUpQueueTokens == nil || cfg.PrefillScaleDownQueueTokens == nil {
			return nil, ReasonInsufficientData
		}
		up, down = float64(*cfg.PrefillScaleUpQueueTokens), float64(*cfg.PrefillScaleDownQueueTokens)
		for _, f := range stats {
			values = append(values, float64(f.Queued.SumPrefillTokens))
		}
	default:
		caps := t.caps.Prefill
		if caps == nil || caps.ContextLength <= 0 {
			t.diag.note("load prefill: context_length not reported: threshold target cannot run")
			return nil, ReasonInsufficientData
		}
		up, down = prefillThroughputUp, prefillThroughputDown
		if cfg.OptimizationTarget == config.TargetLatency {
			up, down = prefillLatencyUp, prefillLatencyDown
		}
		for _, f := range stats {
			values = append(values, float64(f.Queued.SumPrefillTokens)/float64(caps.ContextLength))
		}
	}
	if len(values) == 0 {
		return nil, ReasonInsufficientData
	}
	peak := slices.Max(values)
	prev := t.st.PrevPrefillQueue
	t.st.PrevPrefillQueue = ptr(peak)
	if slices.ContainsFunc(values, func(v float64) bool { return v >= up }) {
		if k := cfg.PrefillScaleUpTrendIntervals; k > 0 && prev != nil {
			if projected := peak + float64(k)*(peak-*prev); projected < up {
				t.diag.note(fmt.Sprintf("load prefill: queue %.4g trending to %.4g within %d intervals, under the scale-up threshold %.4g: scale-up skipped", peak, projected, k, up))
				return nil, ReasonScaleUpSkippedQueueTrend
			}
		}
		return ptr(n + 1), ""
	}
	if n > 1 {
		below := func(v float64) bool { return v <= down }
		if cfg.OptimizationTarget == config.TargetThroughput {
			below = func(v float64) bool { return v < down }
		}
		if !slices.ContainsFunc(values, func(v float64) bool { return !below(v) }) {
			return ptr(max(n-1, t.minEndpoint(Prefill))), ""
		}
	}
	return nil, ReasonNoChange
}

// decodeEasy is the threshold decision of a decode (or aggregated) pool on KV utilisation
// (aggregated pools count queued prefill as KV). With decode_scale_down_hold_intervals = K
// > 0, no scale-down happens within K load intervals of a decode scale-up (Dynamo's older
// load planner's grace period for new workers to fill their cache).
func (t *tick) decodeEasy(stats []perf.FPM, n int, agg bool) (*int, Reason) {
	cfg := t.p.cfg
	var maxKV int64
	if c := t.caps.Decode; c != nil {
		maxKV = c.MaxKVTokens
	}
	if maxKV <= 0 {
		t.diag.note("load decode: max_kv_tokens not reported: threshold target cannot run")
		return nil, ReasonInsufficientData
	}
	if n == 0 {
		return nil, ReasonInsufficientData
	}
	isLoad := cfg.OptimizationTarget == config.TargetLoad
	var up, down float64
	switch {
	case isLoad:
		if cfg.DecodeScaleUpKVRate == nil || cfg.DecodeScaleDownKVRate == nil {
			return nil, ReasonInsufficientData
		}
		up, down = *cfg.DecodeScaleUpKVRate/100, *cfg.DecodeScaleDownKVRate/100
	case cfg.OptimizationTarget == config.TargetLatency:
		up, down = decodeLatencyUp, decodeLatencyDown
	default:
		up, down = decodeThroughputUp, decodeThroughputDown
	}
	utils := make([]float64, 0, len(stats))
	for _, f := range stats {
		kv := float64(f.Scheduled.SumDecodeKVTokens) + float64(f.Queued.SumDecodeKVTokens)
		if agg {
			kv += float64(f.Queued.SumPrefillTokens)
		}
		utils = append(utils, kv/float64(maxKV))
	}
	over := func(u float64) bool { return u > up }
	under := func(u float64) bool { return u < down }
	if isLoad {
		over = func(u float64) bool { return u >= up }
		under = func(u float64) bool { return u <= down }
	}
	if slices.ContainsFunc(utils, over) {
		return ptr(n + 1), ""
	}
	if n > 1 && !slices.ContainsFunc(utils, func(u float64) bool { return !under(u) }) {
		if k := cfg.DecodeScaleDownHoldIntervals; k > 0 && t.st.LastDecodeScaleUpAt != nil {
			if until := *t.st.LastDecodeScaleUpAt + float64(k)*t.p.loadI; t.in.Now < until {
				t.diag.note(fmt.Sprintf("load decode: scale-down held until %.0f, %d load intervals after the last decode scale-up", until, k))
				return nil, ReasonScaleDownHeldAfterScaleUp
			}
		}
		return ptr(max(n-1, t.minEndpoint(Decode))), ""
	}
	return nil, ReasonNoChange
}
