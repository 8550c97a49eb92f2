package scaling

import (
	"fmt"
	"math"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/predict"
)

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// throughput is one throughput tick (Dynamo G3 throughput_scaling.py, reference §3.5):
// feed the predictors, predict the next interval, size each pool and either store the
// result as the load loop's floor or decide.
func (t *tick) throughput() *Decision {
	d, cfg := t.diag, t.p.cfg
	if !cfg.EnableThroughputScaling {
		d.ThroughputReason = ReasonDisabled
		return nil
	}
	tr := t.in.Traffic
	switch {
	case tr == nil:
		d.ThroughputReason = ReasonNoTrafficData
		d.note("throughput: no traffic observation: decision skipped")
		return nil
	case tr.NumReq == nil || !finite(*tr.NumReq) || *tr.NumReq < 0:
		d.ThroughputReason = ReasonNoTrafficData
		d.note("throughput: request count unreadable: decision skipped (an unreadable count is never zero demand)")
		return nil
	case !(tr.DurationS > 0) || math.IsInf(tr.DurationS, 0):
		d.ThroughputReason = ReasonNoTrafficData
		d.note(fmt.Sprintf("throughput: traffic window of %v s: decision skipped", tr.DurationS))
		return nil
	}
	numReq := *tr.NumReq
	d.ObservedNumReq = ptr(numReq)
	var isl, osl float64
	if numReq == 0 {
		// Idle window: the means are undefined; carry the last known lengths so the predictors
		// keep a shape and scale-down can happen (Dynamo PR #11294).
		if t.st.LastISL != nil {
			isl = *t.st.LastISL
		}
		if t.st.LastOSL != nil {
			osl = *t.st.LastOSL
		}
	} else {
		if tr.ISL == nil || tr.OSL == nil || !finite(*tr.ISL) || !finite(*tr.OSL) || *tr.ISL < 0 || *tr.OSL < 0 {
			d.ThroughputReason = ReasonNoTrafficData
			d.note("throughput: requests were counted but their mean lengths are unreadable: decision skipped")
			return nil
		}
		isl, osl = *tr.ISL, *tr.OSL
		t.st.LastISL, t.st.LastOSL = ptr(isl), ptr(osl)
	}
	if t.p.usesInterpolation() && !cfg.NoCorrection && numReq > 0 {
		t.updateCorrection(tr, isl, osl)
	}

	nr, pisl, posl, ok := t.predict(numReq, isl, osl)
	if !ok {
		return nil
	}
	d.PredictedNumReq, d.PredictedISL, d.PredictedOSL = ptr(nr), ptr(pisl), ptr(posl)
	kv := t.kvHitRate()
	if t.st.LastKVHitRate != nil {
		d.PredictedKVHitRate = ptr(kv)
	}
	if !t.countsKnown {
		d.ThroughputReason = ReasonNoWorkerCounts
		return nil
	}
	demand := nr / tr.DurationS
	t.predNumReq = nr
	switch cfg.Mode {
	case config.ModeAgg:
		return t.throughputAgg(demand, pisl, posl, kv)
	case config.ModeDisagg:
		return t.throughputDisagg(demand, pisl, posl, kv)
	case config.ModePrefill:
		return t.throughputSingle(Prefill, demand, pisl, posl, kv)
	default:
		return t.throughputSingle(Decode, demand, pisl, posl, kv)
	}
}

// predict feeds the observation to the three predictors and forecasts the next interval.
func (t *tick) predict(numReq, isl, osl float64) (nr, pisl, posl float64, ok bool) {
	d := t.diag
	if t.st.Predictors == nil {
		d.ThroughputReason = ReasonPredictFailed
		d.note("throughput: state has no predictors")
		return 0, 0, 0, false
	}
	states := []*predict.State{&t.st.Predictors.NumReq, &t.st.Predictors.ISL, &t.st.Predictors.OSL}
	values := []float64{numReq, isl, osl}
	names := []string{"request count", "ISL", "OSL"}
	var out [3]float64
	for i, s := range states {
		pr, err := predict.Restore(t.p.predOpts, *s)
		if err != nil {
			d.ThroughputReason = ReasonPredictFailed
			d.note(fmt.Sprintf("throughput: %s predictor: %v", names[i], err))
			return 0, 0, 0, false
		}
		pr.Add(values[i])
		f, err := pr.Predict()
		*s = pr.State()
		if err != nil || !finite(f.Value) {
			d.ThroughputReason = ReasonPredictFailed
			d.note(fmt.Sprintf("throughput: %s forecast failed: %v", names[i], err))
			return 0, 0, 0, false
		}
		if f.Fallback != "" {
			d.note(fmt.Sprintf("throughput: %s forecast is the last value: %s", names[i], f.Fallback))
		}
		out[i] = f.Value
	}
	return out[0], out[1], out[2], true
}

// capThroughput bounds one throughput observation's change (Dynamo's
// _cap_throughput_replicas).
func (t *tick) capThroughput(desired, current int) int {
	l := t.p.cfg.MaxThroughputScalingReplicas
	return min(max(desired, max(0, current-l)), current+l)
}

// fitSingleCeiling fits a single pool under the hard GPU ceiling only.
func (t *tick) fitSingleCeiling(desired int, c Component) (int, Reason) {
	return GuardSingleScalingBudget(t.current(c), desired, t.gpuCost(c), -1, t.p.cfg.MaxGPUBudget, t.minEndpoint(c))
}

// applySingleBudget applies the full band (floor and ceiling) to a single pool.
func (t *tick) applySingleBudget(desired int, c Component) (int, Reason) {
	return GuardSingleScalingBudget(t.current(c), desired, t.gpuCost(c), t.p.cfg.MinGPUBudget, t.p.cfg.MaxGPUBudget, t.minEndpoint(c))
}

// fitDisaggCeiling is Dynamo's _fit_disagg_throughput_ceiling.
func (t *tick) fitDisaggCeiling(p, d int) (int, int) {
	pMin, dMin := t.minEndpoint(Prefill), t.minEndpoint(Decode)
	pGPU, dGPU := t.gpuCost(Prefill), t.gpuCost(Decode)
	if t.readyP < pMin || t.readyD < dMin {
		return ProportionalClampPair(max(p, pMin), max(d, dMin), pGPU, dGPU, -1, t.p.cfg.MaxGPUBudget, pMin, dMin)
	}
	return FitDirectionalBudgetPair(t.readyP, t.readyD, p, d, pGPU, dGPU, -1, t.p.cfg.MaxGPUBudget, pMin, dMin)
}

// applyDisaggBudget is Dynamo's _apply_disagg_scaling_budget.
func (t *tick) applyDisaggBudget(p, d int) (int, int, Reason) {
	pMin, dMin := t.minEndpoint(Prefill), t.minEndpoint(Decode)
	pGPU, dGPU := t.gpuCost(Prefill), t.gpuCost(Decode)
	cfg := t.p.cfg
	if t.readyP < pMin || t.readyD < dMin {
		np, nd := ProportionalClampPair(max(p, pMin), max(d, dMin), pGPU, dGPU, cfg.MinGPUBudget, cfg.MaxGPUBudget, pMin, dMin)
		return np, nd, ReasonGPUBudgetReconcile
	}
	return GuardDisaggScalingBudget(t.readyP, t.readyD, p, d, pGPU, dGPU, cfg.MinGPUBudget, cfg.MaxGPUBudget, pMin, dMin)
}

func (t *tick) throughputSingle(c Component, demand, isl, osl, kv float64) *Decision {
	desired, ok := t.replicas(c, demand, isl, osl, kv)
	return t.throughputSingleTarget(c, desired, ok)
}

// throughputSingleTarget post-processes one pool's raw throughput target (Dynamo's
// _throughput_single and _throughput_agg): delta cap, endpoint floor (which may exceed the
// cap), GPU-ceiling fit, then the load loop's floor or a budget-guarded decision. A pool the
// model cannot size (ok false) holds at its current count, still lifted to its minimum.
func (t *tick) throughputSingleTarget(c Component, desired int, ok bool) *Decision {
	d, cfg := t.diag, t.p.cfg
	current := t.current(c)
	notReady := !ok
	if notReady {
		desired = current
		d.ThroughputReason = ReasonModelNotReady
	}
	desired = t.capThroughput(desired, current)
	desired = max(desired, t.minEndpoint(c)) // endpoint recovery may exceed the cap
	desired, ceiling := t.fitSingleCeiling(desired, c)
	if cfg.EnableLoadScaling {
		t.setLowerBound(c, desired)
		switch {
		case notReady:
			d.ThroughputReason = ReasonModelNotReady
		case ceiling == ReasonGPUBudgetGuardHold:
			d.ThroughputReason = ReasonGPUBudgetGuardHold
		default:
			d.ThroughputReason = ReasonSetLowerBound
		}
		return nil
	}
	desired, budget := t.applySingleBudget(desired, c)
	if desired == current {
		switch {
		case notReady:
			d.ThroughputReason = ReasonModelNotReady
		case budget != "":
			d.ThroughputReason = budget
		case ceiling != "":
			d.ThroughputReason = ceiling
		default:
			d.ThroughputReason = ReasonNoChange
		}
		return nil
	}
	d.ThroughputReason = ReasonScale
	if notReady {
		d.ThroughputReason = ReasonModelNotReady
	}
	return single(c, desired)
}

func single(c Component, n int) *Decision {
	if c == Prefill {
		return &Decision{Prefill: ptr(n)}
	}
	return &Decision{Decode: ptr(n)}
}

func (t *tick) setLowerBound(c Component, n int) {
	if c == Prefill {
		t.st.LowerBoundPrefill = n
	} else {
		t.st.LowerBoundDecode = n
	}
}

func (t *tick) throughputDisagg(demand, isl, osl, kv float64) *Decision {
	p, pok := t.replicas(Prefill, demand, isl, osl, kv)
	dd, dok := t.replicas(Decode, demand, isl, osl, kv)
	return t.throughputDisaggTargets(p, pok, dd, dok)
}

// throughputDisaggTargets post-processes the raw disaggregated targets (Dynamo's
// _throughput_disagg): if either side cannot be sized both hold; then the delta cap, the
// endpoint floors, the GPU-ceiling fit, and the load loop's floors or a budget-guarded
// decision.
func (t *tick) throughputDisaggTargets(p int, pok bool, dd int, dok bool) *Decision {
	d, cfg := t.diag, t.p.cfg
	notReady := !pok || !dok
	if notReady {
		d.ThroughputReasonPrefill, d.ThroughputReasonDecode = ReasonPartnerNotReady, ReasonPartnerNotReady
		if !pok {
			d.ThroughputReasonPrefill = ReasonModelNotReady
		}
		if !dok {
			d.ThroughputReasonDecode = ReasonModelNotReady
		}
		p, dd = t.readyP, t.readyD // hold both: the ready side's estimate cannot move alone
	}
	p = max(t.capThroughput(p, t.readyP), t.minEndpoint(Prefill))
	dd = max(t.capThroughput(dd, t.readyD), t.minEndpoint(Decode))
	boundedP, boundedD := p, dd
	p, dd = t.fitDisaggCeiling(p, dd)
	budgetHeld := p == t.readyP && dd == t.readyD && (boundedP != t.readyP || boundedD != t.readyD)
	if !notReady {
		r := ReasonScale
		if cfg.EnableLoadScaling {
			r = ReasonSetLowerBound
		}
		d.ThroughputReasonPrefill, d.ThroughputReasonDecode = r, r
	}
	if cfg.EnableLoadScaling {
		t.st.LowerBoundPrefill, t.st.LowerBoundDecode = p, dd
		switch {
		case notReady:
			d.ThroughputReason = ReasonModelNotReady
		case budgetHeld:
			d.ThroughputReason, d.ThroughputReasonPrefill, d.ThroughputReasonDecode = ReasonGPUBudgetGuardHold, ReasonGPUBudgetGuardHold, ReasonGPUBudgetGuardHold
		default:
			d.ThroughputReason = ReasonSetLowerBound
		}
		return nil
	}
	p, dd, budget := t.applyDisaggBudget(p, dd)
	if p == t.readyP && dd == t.readyD {
		if notReady {
			d.ThroughputReason = ReasonModelNotReady
			return nil
		}
		hold := budget
		if hold == "" {
			hold = ReasonNoChange
			if budgetHeld {
				hold = ReasonGPUBudgetGuardHold
			}
		}
		d.ThroughputReason, d.ThroughputReasonPrefill, d.ThroughputReasonDecode = hold, hold, hold
		return nil
	}
	d.ThroughputReason = ReasonScale
	if notReady {
		d.ThroughputReason = ReasonModelNotReady
	}
	return &Decision{Prefill: ptr(p), Decode: ptr(dd)}
}

func (t *tick) throughputAgg(demand, isl, osl, kv float64) *Decision {
	d, cfg := t.diag, t.p.cfg
	var desired int
	notReady := true
	caps := t.caps.Decode
	switch {
	case caps == nil || caps.MaxNumBatchedTokens <= 0:
		d.note("throughput: aggregated workers have not reported max_num_batched_tokens: holding")
	default:
		c, ok := t.agg.FindCapacity(perf.CapacityRequest{ISL: isl, OSL: osl, TTFTSLAMs: cfg.TTFTMs, ITLSLAMs: cfg.ITLMs,
			KVHitRate: kv, AcceptLength: t.acceptLength()}, caps.Limits())
		if ok && c.RPS > 0 {
			notReady = false
			d.EngineRPSPrefill, d.EngineRPSDecode = ptr(c.RPS), ptr(c.RPS)
			if !c.Eligible {
				d.note(fmt.Sprintf("throughput: aggregated SLA not met at the best batch (TTFT %.1f ms, ITL %.1f ms): sizing from its rate", c.TTFTMs, c.ITLMs))
			}
			desired = max(pyCeil(demand/c.RPS), t.minEndpoint(Decode))
		} else {
			t.noteNotReady("aggregated", t.agg)
		}
	}
	return t.throughputSingleTarget(Decode, desired, !notReady)
}

func (t *tick) noteNotReady(name string, m *perf.EngineModel) {
	if m == nil {
		t.diag.note(fmt.Sprintf("throughput: %s perf model missing", name))
		return
	}
	if ok, why := m.Ready(); !ok {
		t.diag.note(fmt.Sprintf("throughput: %s perf model not ready: %s", name, why))
		return
	}
	t.diag.note(fmt.Sprintf("throughput: %s capacity search found no batch size", name))
}

// replicas sizes one pool for the demand: the capacity search (G3) or the classic profile
// interpolation (G1). ok is false when the model cannot size this tick.
func (t *tick) replicas(c Component, demand, isl, osl, kv float64) (int, bool) {
	cfg := t.p.cfg
	if t.p.usesInterpolation() {
		return t.classicReplicas(c, isl, osl), true
	}
	// Prefill is sized against the TTFT target with the prefix-cache discount; decode against
	// the ITL target with the speculative accept length.
	caps, model, rps := t.caps.Decode, t.decode, &t.diag.EngineRPSDecode
	req := perf.CapacityRequest{ISL: isl, OSL: osl, ITLSLAMs: cfg.ITLMs, AcceptLength: t.acceptLength()}
	if c == Prefill {
		caps, model, rps = t.caps.Prefill, t.prefill, &t.diag.EngineRPSPrefill
		req = perf.CapacityRequest{ISL: isl, OSL: osl, TTFTSLAMs: cfg.TTFTMs, KVHitRate: kv}
	}
	if caps == nil {
		t.diag.note(fmt.Sprintf("throughput: %s workers have not reported their capabilities: holding", c))
		return 0, false
	}
	cp, ok := model.FindCapacity(req, caps.Limits())
	if !ok || cp.RPS <= 0 {
		t.noteNotReady(string(c), model)
		return 0, false
	}
	*rps = ptr(cp.RPS)
	if !cp.Eligible {
		if c == Prefill {
			t.diag.note(fmt.Sprintf("throughput: prefill TTFT SLA not met at the best batch (%.1f ms > %.1f ms): sizing from its rate", cp.TTFTMs, cfg.TTFTMs))
		} else {
			t.diag.note(fmt.Sprintf("throughput: decode ITL SLA not met at the best batch (%.1f ms > %.1f ms): sizing from its rate", cp.ITLMs, cfg.ITLMs))
		}
	}
	return max(pyCeil(demand/cp.RPS), t.minEndpoint(c)), true
}

// classicReplicas is Dynamo's classic (G1) sizing for one pool with the live correction
// factors, from the predicted request count over the throughput interval T.
func (t *tick) classicReplicas(c Component, isl, osl float64) int {
	pc, dc := 1.0, 1.0
	if t.st.PrefillCorrection != nil {
		pc = *t.st.PrefillCorrection
	}
	if t.st.DecodeCorrection != nil {
		dc = *t.st.DecodeCorrection
	}
	if c == Prefill {
		return ClassicPrefillReplicas(t.predNumReq, isl, t.p.thrI, pc, t.p.prefillProf, t.gpuCost(Prefill), t.minEndpoint(Prefill))
	}
	return ClassicDecodeReplicas(t.predNumReq, isl, osl, t.p.thrI, t.p.cfg.ITLMs, dc, t.p.decodeProf, t.gpuCost(Decode), t.minEndpoint(Decode))
}

// updateCorrection updates the classic sizing's correction factors from one interval's
// observation (Dynamo G1): observed TTFT over the profile's TTFT at the observed ISL, and
// observed ITL over the profile's ITL at the observed per-engine concurrency. A factor whose
// inputs are missing or invalid keeps its previous value.
func (t *tick) updateCorrection(tr *TrafficObservation, isl, osl float64) {
	if tr.TTFTMs != nil && finite(*tr.TTFTMs) && *tr.TTFTMs > 0 && t.p.prefillProf != nil {
		if exp := t.p.prefillProf.TTFTMs(isl); exp > 0 && finite(exp) {
			t.st.PrefillCorrection = ptr(*tr.TTFTMs / exp)
		}
	}
	if tr.ITLMs == nil || tr.RequestDurationS == nil || t.p.decodeProf == nil || !t.countsKnown || t.readyD <= 0 {
		return
	}
	if !finite(*tr.ITLMs) || *tr.ITLMs <= 0 || !finite(*tr.RequestDurationS) || *tr.RequestDurationS < 0 || tr.NumReq == nil {
		return
	}
	concurrency := *tr.NumReq / float64(t.readyD) * *tr.RequestDurationS / tr.DurationS
	if exp := t.p.decodeProf.ITLMs(concurrency, isl+osl/2); exp > 0 && finite(exp) {
		t.st.DecodeCorrection = ptr(*tr.ITLMs / exp)
	}
}

// PrefillThroughputCurve is the part of a prefill profile the classic sizing uses.
type PrefillThroughputCurve interface {
	ThroughputPerGPU(isl float64) float64
}

// DecodeThroughputCurve is the part of a decode profile the classic sizing uses.
type DecodeThroughputCurve interface {
	FindBestThroughputPerGPU(itlMs, contextLength float64) (thpt, itl, kvUsage float64)
}

// ClassicPrefillReplicas is Dynamo's classic prefill sizing (reference §3.2), evaluated in
// Python's order: the predicted prefill throughput numReq × ISL / intervalS × min(1,
// correction) tokens/s over the profile's throughput per GPU at that ISL, per replica of
// gpus GPUs, rounded up, at least minEndpoint. A correction above 1 is taken as queueing that
// more replicas fix and clamped to 1.
func ClassicPrefillReplicas(numReq, isl, intervalS, correction float64, curve PrefillThroughputCurve, gpus, minEndpoint int) int {
	thpt := numReq * isl / intervalS * math.Min(1, correction)
	perGPU := curve.ThroughputPerGPU(isl)
	if !(perGPU > 0) || gpus <= 0 {
		return minEndpoint
	}
	return max(pyCeil(thpt/perGPU/float64(gpus)), minEndpoint)
}

// ClassicDecodeReplicas is Dynamo's classic decode sizing (reference §3.2), evaluated in
// Python's order: the ITL target is divided by the correction factor (a factor <= 0 leaves
// it unchanged), the profile's best throughput per GPU at that ITL and context ISL + OSL/2
// sizes the demand of numReq × OSL / intervalS tokens/s, rounded up, at least minEndpoint.
func ClassicDecodeReplicas(numReq, isl, osl, intervalS, itlMs, correction float64, curve DecodeThroughputCurve, gpus, minEndpoint int) int {
	target := itlMs
	if correction > 0 {
		target = itlMs / correction
	}
	perGPU, _, _ := curve.FindBestThroughputPerGPU(target, isl+osl/2)
	if !(perGPU > 0) || gpus <= 0 {
		return minEndpoint
	}
	return max(pyCeil(numReq*osl/intervalS/perGPU/float64(gpus)), minEndpoint)
}

// ClassicBudget is Dynamo's classic (G1) GPU budget: when (p, d) exceeds maxGPUBudget, shrink
// proportionally with prefill capped so decode keeps its minimum, and decode taking what is
// left; (0, 0) when even the minimum endpoints do not fit. A negative budget disables it.
func ClassicBudget(p, d, pGPU, dGPU, minEndpoint, maxGPUBudget int) (int, int) {
	total := p*pGPU + d*dGPU
	if maxGPUBudget < 0 || total <= maxGPUBudget {
		return p, d
	}
	if maxGPUBudget < minEndpoint*pGPU+minEndpoint*dGPU {
		return 0, 0
	}
	scale := float64(maxGPUBudget) / float64(total)
	maxP := pyFloor(float64(maxGPUBudget-minEndpoint*dGPU) / float64(pGPU))
	np := max(minEndpoint, min(maxP, pyFloor(float64(p)*scale)))
	nd := max(minEndpoint, pyFloor(float64(maxGPUBudget-np*pGPU)/float64(dGPU)))
	return np, nd
}
