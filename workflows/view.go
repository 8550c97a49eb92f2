package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/scaling"
)

// view builds the state query's answer.
func (r *run) view() StateView {
	st := r.st
	v := StateView{
		WorkflowID: st.Deployment.WorkflowID(), Deployment: st.Deployment, LogicVersion: st.LogicVersion,
		Mode: string(st.Config.Mode), Target: string(st.Config.OptimizationTarget), Environment: string(st.Config.Environment),
		Advisory: st.Config.AppliesNothing(), Initialized: st.Core != nil, Ticks: st.Ticks, Runs: st.Runs,
		Inventory: st.Inventory, Decisions: st.Decisions, Overrides: st.Overrides, Virtual: st.Virtual,
		Rejected: st.Rejected, TTFTMs: st.Config.TTFTMs, ITLMs: st.Config.ITLMs, InitError: r.initErr,
	}
	for _, o := range []*ReplicaOverride{st.Overrides.Prefill, st.Overrides.Decode} {
		if o != nil && o.Forced {
			v.Forced = true
		}
	}
	if n := len(st.Recent); n > 0 {
		last := st.Recent[n-1]
		v.LastTick = &last
	}
	v.AsOf = workflow.Now(r.ctx).UTC().Format(time.RFC3339)
	if st.Core != nil {
		v.NextTickAt = scaling.Schedule(st.Config, *st.Core).At
		v.NextTick = time.Unix(0, int64(v.NextTickAt*1e9)).UTC().Format(time.RFC3339)
		v.LowerBoundPrefill, v.LowerBoundDecode = st.Core.LowerBoundPrefill, st.Core.LowerBoundDecode
		for _, m := range []struct {
			pool string
			s    *perf.EngineModelState
		}{{"prefill", st.Core.Models.Prefill}, {"decode", st.Core.Models.Decode}, {"aggregated", st.Core.Models.Agg}} {
			if m.s == nil {
				continue
			}
			n := 0
			for _, b := range m.s.Regression.Buckets {
				n += len(b.Samples)
			}
			v.Models = append(v.Models, ModelStatus{Pool: m.pool, Samples: n})
		}
	}
	return v
}

// refreshDetails sets the current details again from the last tick, after any operator
// message was applied (overrides, pauses, SLA and limits are shown in them).
func (r *run) refreshDetails() {
	var rec *TickRecord
	if n := len(r.st.Recent); n > 0 {
		last := r.st.Recent[n-1]
		rec = &last
	}
	r.details(rec)
}

// details sets the markdown the Web UI shows as the workflow's current details.
func (r *run) details(rec *TickRecord) {
	st := r.st
	var b strings.Builder
	b.WriteString(fmt.Sprintf("**%s** · mode `%s` · target `%s` · environment `%s`", st.Deployment.WorkflowID(), st.Config.Mode, st.Config.OptimizationTarget, st.Config.Environment))
	if st.Config.AppliesNothing() {
		b.WriteString(" · **advisory**")
	}
	b.WriteString("\n\n")
	if st.Core == nil {
		if r.initErr != "" {
			b.WriteString(fmt.Sprintf("Initialisation failed, retrying every %s: %s\n", initRetryAfter, r.initErr))
		} else {
			b.WriteString("Initialising.\n")
		}
		workflow.SetCurrentDetails(r.ctx, b.String())
		return
	}
	if rec != nil {
		b.WriteString("| pool | ready | expected | load | throughput |\n|---|---|---|---|---|\n")
		d := rec.Diagnostics
		for _, c := range []string{ComponentPrefill, ComponentDecode} {
			if !st.hasComponent(c) {
				continue
			}
			ready, expected := "–", "–"
			if st.Inventory != nil {
				rp, ep := st.Inventory.ReadyDecode, st.Inventory.ExpectedDecode
				if c == ComponentPrefill {
					rp, ep = st.Inventory.ReadyPrefill, st.Inventory.ExpectedPrefill
				}
				ready, expected = intOrDash(rp), intOrDash(ep)
			}
			load, thr := "–", "–"
			if d != nil {
				lr, tr := d.LoadReasonDecode, d.ThroughputReasonDecode
				if c == ComponentPrefill {
					lr, tr = d.LoadReasonPrefill, d.ThroughputReasonPrefill
				}
				load, thr = reasonOr(lr, d.LoadReason), reasonOr(tr, d.ThroughputReason)
			}
			b.WriteString(fmt.Sprintf("| %s | %s | %s | %s | %s |\n", c, ready, expected, load, thr))
		}
		b.WriteString("\n")
		if r := rec.ObservedRequestsPerSecond; r != nil {
			b.WriteString(fmt.Sprintf("Traffic read by tick %d: %.1f req/s\n\n", rec.Tick, *r))
		}
		var estTTFT, estITL *float64
		if d != nil {
			estTTFT, estITL = d.EstimatedTTFTMs, d.EstimatedITLMs
		}
		if o := r.observed; o != nil {
			b.WriteString(fmt.Sprintf("TTFT estimated %s · observed %s / SLA %g ms · ITL estimated %s · observed %s / SLA %g ms (observed: the frontend's means over the traffic window read at %s)\n\n",
				msOrDash(estTTFT), msOrDash(o.TTFTMs), st.Config.TTFTMs, msOrDash(estITL), msOrDash(o.ITLMs), st.Config.ITLMs, unixTime(o.At)))
		} else if estTTFT != nil || estITL != nil {
			b.WriteString(fmt.Sprintf("TTFT estimated %s / SLA %g ms · ITL estimated %s / SLA %g ms\n\n", msOrDash(estTTFT), st.Config.TTFTMs, msOrDash(estITL), st.Config.ITLMs))
		}
		if n := len(st.Decisions); n > 0 {
			d := st.Decisions[n-1]
			b.WriteString(fmt.Sprintf("Last decision: #%d %s (%s, %s) at %s\n\n", d.ID, d.Targets, d.Source, d.Status, unixTime(d.At)))
		}
		for _, n := range rec.Notes {
			b.WriteString(fmt.Sprintf("- %s\n", n))
		}
	}
	var ov []string
	for _, c := range []string{ComponentPrefill, ComponentDecode} {
		if o := st.override(c); o != nil {
			forced := ""
			if o.Forced {
				forced = " (forced)"
			}
			ov = append(ov, fmt.Sprintf("%s pinned to %d until %s%s", c, o.Replicas, unixTime(o.ExpiresAt), forced))
		}
	}
	if st.Overrides.PauseScaleUp || st.Overrides.PauseScaleDown {
		ov = append(ov, st.pauseStatus())
	}
	if len(ov) > 0 {
		b.WriteString(fmt.Sprintf("\nOverrides: %s\n", strings.Join(ov, "; ")))
	}
	b.WriteString(fmt.Sprintf("\nTick %d · next at %s\n", st.Ticks, unixTime(scaling.Schedule(st.Config, *st.Core).At)))
	workflow.SetCurrentDetails(r.ctx, b.String())
}

func intOrDash(p *int) string {
	if p == nil {
		return "–"
	}
	return fmt.Sprint(*p)
}

func msOrDash(p *float64) string {
	if p == nil {
		return "–"
	}
	return fmt.Sprintf("%.1f ms", *p)
}

func reasonOr(r, fallback scaling.Reason) string {
	if r == "" {
		r = fallback
	}
	if r == "" {
		return "–"
	}
	return string(r)
}

func unixTime(s float64) string {
	return time.Unix(0, int64(s*1e9)).UTC().Format("15:04:05Z")
}
