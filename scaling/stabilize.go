package scaling

import "fmt"

// stabilize applies scale_down_stabilization_seconds (Kubernetes HPA's scale-down
// stabilization window) to the tick's final decision: every tick records each pool's
// recommendation (its target, or the ready count when it holds), and a scale-down goes no
// lower than the highest recommendation of the window. Scale-ups are never touched, and
// nothing is held when holding would leave the deployment above max_gpu_budget (a budget
// reconcile, or the down half of a rebalance at the ceiling): the budget wins.
func (t *tick) stabilize(out *Decision) {
	window := float64(t.p.cfg.ScaleDownStabilizationSeconds)
	if window <= 0 {
		return
	}
	cand := Decision{Prefill: out.Prefill, Decode: out.Decode}
	var notes []string
	var held []Component // pools whose scale-down is held entirely
	for _, c := range t.pools() {
		target, hist, ready := cand.pool(c), &t.st.StabilizationPrefill, t.current(c)
		if c == Decode {
			hist = &t.st.StabilizationDecode
		}
		rec := ready
		if *target != nil {
			rec = **target
		}
		*hist = pushRecommendation(*hist, Recommendation{At: t.in.Now, Replicas: rec}, t.in.Now-window)
		if *target == nil || rec >= ready {
			continue
		}
		top := (*hist)[0]
		if top.Replicas <= rec {
			continue
		}
		to := min(top.Replicas, ready)
		notes = append(notes, fmt.Sprintf("%s scale-down %d -> %d held at %d: %d recommended at %.0f, within the %.0f s stabilization window",
			c, ready, rec, to, top.Replicas, top.At, window))
		if to < ready {
			*target = ptr(to)
			continue
		}
		*target = nil
		held = append(held, c)
	}
	if len(notes) == 0 {
		return
	}
	if ceiling := t.p.cfg.MaxGPUBudget; ceiling >= 0 {
		total := 0
		for _, c := range t.pools() {
			n := t.current(c)
			if v := *cand.pool(c); v != nil {
				n = *v
			}
			total += n * t.gpuCost(c)
		}
		if total > ceiling {
			t.diag.note(fmt.Sprintf("scale-down not held by the stabilization window: holding would use %d GPUs, over max_gpu_budget %d", total, ceiling))
			return
		}
	}
	for _, n := range notes {
		t.diag.note(n)
	}
	*out = cand
	for _, c := range held {
		t.setStabilizingReason(c, false)
	}
	if len(held) > 0 && out.Empty() {
		t.setStabilizingReason(Prefill, true)
	}
}

// pushRecommendation adds r to a window's decreasing sequence of recommendations, dropping
// those older than since and those r outranks (they can never be the highest again). It
// never modifies h's backing array (the input state is shared).
func pushRecommendation(h []Recommendation, r Recommendation, since float64) []Recommendation {
	i := 0
	for i < len(h) && h[i].At < since {
		i++
	}
	j := len(h)
	for j > i && h[j-1].Replicas <= r.Replicas {
		j--
	}
	out := make([]Recommendation, 0, j-i+1)
	return append(append(out, h[i:j]...), r)
}

// pools are the components the configured mode scales.
func (t *tick) pools() []Component {
	var out []Component
	if t.p.cfg.HasPrefill() {
		out = append(out, Prefill)
	}
	if t.p.cfg.HasDecode() {
		out = append(out, Decode)
	}
	return out
}

// pool is the decision's target field of component c.
func (d *Decision) pool(c Component) **int {
	if c == Prefill {
		return &d.Prefill
	}
	return &d.Decode
}

// setStabilizingReason records a held scale-down as pool c's reason (or, overall, as the
// tick's reason when nothing else changes) on the loop that decided it.
func (t *tick) setStabilizingReason(c Component, overall bool) {
	d, r := t.diag, ReasonScaleDownStabilizing
	load := d.RanLoad && t.p.cfg.EnableLoadScaling
	switch {
	case overall && load:
		d.LoadReason = r
	case overall:
		d.ThroughputReason = r
	case load && c == Prefill:
		d.LoadReasonPrefill = r
	case load:
		d.LoadReasonDecode = r
	case c == Prefill:
		d.ThroughputReasonPrefill = r
	default:
		d.ThroughputReasonDecode = r
	}
}
