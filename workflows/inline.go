package workflows

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/scaling"
)

// History generation 3 (inlineDecideChange): a tick is one Observe activity and Decide run in
// workflow code. The decision core is pure and deterministic, so its state is derived again on
// replay from the recorded observations instead of being recorded whole every tick; only the
// decision is recorded (a side effect), so the commands a replay issues never depend on
// floating-point results a different build might compute differently.

// scheduledTickInline is scheduledTick for runs of generation 3.
func (r *run) scheduledTickInline(tk scaling.Tick) {
	st := r.st
	st.Ticks++
	r.ticksHere++
	defer r.startTickSpan("scheduled")("")
	rec := TickRecord{Tick: st.Ticks, Kind: "scheduled", At: r.now()}
	in := r.observeAll(tk, &rec)
	// The decision's time is when it is made, after the observations (see scheduledTick).
	now := r.now()
	in.Now, rec.At = now, now
	endDecide := r.startChildSpan(SpanDecide)
	next, dec, diag, err := r.decideInline(in)
	if err != nil {
		endDecide(err.Error())
		rec.Notes = append(rec.Notes, "decide failed, holding: "+err.Error())
		r.logger.Error("decide failed; holding", "error", err)
		r.bumpSchedule(tk, now)
		r.finishTick(&rec, scaling.Decision{})
		return
	}
	endDecide("")
	st.Core = &next
	rec.Diagnostics = &diag
	r.finishTick(&rec, dec)
}

// observeAll reads what the tick needs in one activity (the virtual protocol's inventory
// comes from the state) and records the inventory.
func (r *run) observeAll(tk scaling.Tick, rec *TickRecord) scaling.Input {
	st := r.st
	req := ObserveAllRequest{ObserveRequest: ObserveRequest{Deployment: st.Deployment, Environment: st.Config.Environment, Tick: st.Ticks,
		InitialPrefill: st.InitialPrefill, InitialDecode: st.InitialDecode}, FPM: tk.NeedFPM, Traffic: tk.NeedTraffic}
	var virtualInv *connectors.Inventory
	if st.Virtual != nil {
		inv := st.Virtual.Inventory()
		virtualInv = &inv
	} else {
		req.Inventory = true
	}
	if tk.NeedFPM {
		// A scripted FPM source replicates its per-engine template by the ready counts the
		// planner knows as the tick starts (live sources report the engines that exist).
		req.ReadyPrefill, req.ReadyDecode = st.ready(ComponentPrefill), st.ready(ComponentDecode)
		if virtualInv != nil {
			req.ReadyPrefill, req.ReadyDecode = deref(virtualInv.ReadyPrefill), deref(virtualInv.ReadyDecode)
		}
	}
	if tk.NeedTraffic {
		req.TrafficDurationS = tk.TrafficDurationS
	}
	var res ObserveAllResult
	if req.Inventory || req.FPM || req.Traffic {
		if err := r.activity(ActivityObserve, "observe", observeTimeout, 2, req, &res); err != nil {
			text := errorText(err)
			res = ObserveAllResult{InventoryError: text, FPMError: text, TrafficError: text}
		}
	}
	in := scaling.Input{}
	inv := virtualInv
	if req.Inventory {
		inv = res.Inventory
		if inv == nil {
			rec.Notes = append(rec.Notes, "inventory unreadable, holding: "+orUnknown(res.InventoryError))
		}
	}
	if inv != nil {
		if accepted := r.acceptInventory(*inv, rec); accepted != nil {
			in.Workers = accepted.Counts()
		}
	}
	if req.FPM {
		if res.FPM == nil {
			rec.Notes = append(rec.Notes, "FPM unreadable: "+orUnknown(res.FPMError))
		} else if err := (connectors.Inventory{Capabilities: res.FPM.Capabilities}).Validate(); err != nil {
			rec.Notes = append(rec.Notes, "FPM capabilities out of bounds, FPM unread: "+err.Error())
		} else {
			in.FPM = res.FPM.FPM
			mergeCapabilities(&st.Capabilities, res.FPM.Capabilities)
		}
	}
	if req.Traffic {
		if res.TrafficError != "" {
			rec.Notes = append(rec.Notes, "traffic unreadable: "+res.TrafficError)
		} else {
			in.Traffic = res.Traffic
			rec.ObservedRequestsPerSecond = res.Traffic.RequestsPerSecond()
			if t := res.Traffic; t != nil && (t.TTFTMs != nil || t.ITLMs != nil) {
				r.observed = &observedLatency{TTFTMs: t.TTFTMs, ITLMs: t.ITLMs, At: r.now()}
				rec.ObservedTTFTMs, rec.ObservedITLMs = t.TTFTMs, t.ITLMs
			}
		}
	}
	in.Capabilities = st.Capabilities
	return in
}

func orUnknown(s string) string {
	if s == "" {
		return "no answer"
	}
	return s
}

// decideInline runs the decision core in workflow code and records its decision. A panic in
// the core is an error of this tick (it holds, as a failed Decide activity did), not a failed
// workflow task retried for ever on the same recorded inputs; recovering is deterministic.
func (r *run) decideInline(in scaling.Input) (next scaling.State, dec scaling.Decision, diag scaling.Diagnostics, err error) {
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("the decision core failed: %v", p)
			}
		}()
		var p *scaling.Planner
		if p, err = r.inlinePlanner(); err != nil {
			return
		}
		next, dec, diag, err = p.Decide(*r.st.Core, in)
	}()
	if err != nil {
		return scaling.State{}, scaling.Decision{}, scaling.Diagnostics{}, err
	}
	// Recorded: a replay issues the commands of the decision made, whatever it computes.
	var recorded scaling.Decision
	if err := workflow.SideEffect(r.ctx, func(workflow.Context) any { return dec }).Get(&recorded); err != nil {
		return scaling.State{}, scaling.Decision{}, scaling.Diagnostics{}, fmt.Errorf("record the decision: %w", err)
	}
	return next, recorded, diag, nil
}

// inlinePlanner is the decision core of the configuration in force, built once per run and
// configuration; the profile is read once per run (a local activity).
func (r *run) inlinePlanner() (*scaling.Planner, error) {
	if r.planner != nil {
		return r.planner, nil
	}
	if !r.profileRead {
		ctx := workflow.WithLocalActivityOptions(r.ctx, workflow.LocalActivityOptions{
			StartToCloseTimeout: localTimeout, Summary: "read the pre-deployment profile",
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3, NonRetryableErrorTypes: []string{ErrTypeBadConfig}},
		})
		var res LoadProfileResult
		if err := workflow.ExecuteLocalActivity(ctx, ActivityLoadProfile, LoadProfileRequest{Config: r.st.Config}).Get(ctx, &res); err != nil {
			return nil, fmt.Errorf("read the profile: %s", errorText(err))
		}
		if res.Note != "" {
			r.logger.Info("profile", "note", res.Note)
		}
		r.profile, r.profileRead = res.Profile, true
	}
	p, err := scaling.New(r.st.Config, r.profile)
	if err != nil {
		return nil, err
	}
	r.planner = p
	return p, nil
}
