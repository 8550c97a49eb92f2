package worker

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"golang.org/x/time/rate"

	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/scaling"
	"github.com/llmplanner/planner/workflows"
)

// Refresh bounds of the planner series (plannerMetrics.run).
const (
	// DefaultPlannerRefreshInterval is how often the worker sweeps the planners it has series
	// of, reading the state of those not read within it (the others are read between their
	// ticks); it also bounds the wait for that between-ticks read.
	DefaultPlannerRefreshInterval = 30 * time.Second
	// plannerQueryTimeout bounds one state query.
	plannerQueryTimeout = 5 * time.Second
	// maxConcurrentRefresh bounds the state queries in flight.
	maxConcurrentRefresh = 4
	// maxTrackedTicks bounds the tick start and due times kept per planner.
	maxTrackedTicks = 8
	// DefaultPlannerQueriesPerSecond bounds the state queries a worker sends (with 1,000
	// planners the server, not the worker, is the bottleneck: docs/scale.md). A tick-start
	// read over the budget is skipped; the periodic refresh waits for its turn.
	DefaultPlannerQueriesPerSecond = 20
)

// plannerMetrics computes the planner series on the worker, from two sources that add
// nothing to workflow history:
//   - what the Observe activities running on this worker read (activities.ObservationSink):
//     replicas, the frontend's observed traffic, each engine's queued and in-flight tokens,
//     and when each tick started;
//   - the planner's `state` query, read halfway between a tick's start and the next tick,
//     and by a periodic sweep for planners not read within the refresh interval:
//     the last tick's diagnostics (estimates, predictions, capacities, decision reasons),
//     SLA targets, overrides, pending decisions, rejected messages, the schedule.
//
// A planner's series appear with its first tick on this worker. They are dropped at once
// when the state query finds the planner closed (completed, failed, cancelled, terminated,
// timed out) or gone, and after DefaultPlannerSeriesTTL without a tick here (it moved to
// another worker, or is stuck).
type plannerMetrics struct {
	gauges  *plannerGauges
	now     func() time.Time
	refresh time.Duration
	limit   *rate.Limiter
	wake    chan string

	mu     sync.Mutex
	tracks map[string]*plannerTrack
}

// plannerTrack is what the worker remembers of a planner between events.
type plannerTrack struct {
	// starts and dues are the recent ticks' start times (Observe scheduled) and due times.
	starts map[int64]time.Time
	dues   map[int64]time.Time
	// window is the last traffic window, s (rates are counts over it).
	window float64
	// interval is the tick interval; refreshed when the state was last read.
	interval  time.Duration
	refreshed time.Time
	// gpuAt, gpus and gpuHours integrate the GPUs of the ready replicas.
	gpuAt    time.Time
	gpus     float64
	gpuHours float64
}

func newPlannerMetrics(g *plannerGauges, now func() time.Time) *plannerMetrics {
	return &plannerMetrics{gauges: g, now: now, refresh: DefaultPlannerRefreshInterval, wake: make(chan string, 256),
		limit:  rate.NewLimiter(DefaultPlannerQueriesPerSecond, DefaultPlannerQueriesPerSecond),
		tracks: map[string]*plannerTrack{}}
}

// track returns a planner's track, creating it; callers hold mu.
func (p *plannerMetrics) track(id string) *plannerTrack {
	t := p.tracks[id]
	if t == nil {
		t = &plannerTrack{starts: map[int64]time.Time{}, dues: map[int64]time.Time{}}
		p.tracks[id] = t
	}
	return t
}

// prune keeps the newest maxTrackedTicks entries of a tick-keyed map.
func prune[V any](m map[int64]V, newest int64) {
	for k := range m {
		if k <= newest-maxTrackedTicks || k > newest+maxTrackedTicks {
			delete(m, k)
		}
	}
}

// TickStarted implements activities.ObservationSink: the planner ticks on this worker; its
// state is read halfway to its next tick (this tick's outcome).
func (p *plannerMetrics) TickStarted(d workflows.Deployment, tick int64, scheduled time.Time) {
	id := d.WorkflowID()
	p.gauges.seen(id)
	p.mu.Lock()
	t := p.track(id)
	t.starts[tick] = scheduled
	prune(t.starts, tick)
	due, ok := t.dues[tick]
	interval := t.interval
	p.mu.Unlock()
	if ok {
		p.gauges.set(id, "dynamo_planner_tick_lag_seconds", nil, max(0, scheduled.Sub(due).Seconds()))
	}
	// Read the state halfway to the next tick, once this one is recorded: the planner then
	// sleeps on its timer, and the query does not wait behind a workflow task (where the
	// server buffers a single query, and an operator's would be refused).
	delay := min(max(interval/2, minRefreshDelay), p.refresh)
	time.AfterFunc(delay, func() {
		select {
		case p.wake <- id:
		default: // the periodic refresh catches up
		}
	})
}

// minRefreshDelay is the earliest a tick's state is read after the tick started.
const minRefreshDelay = 500 * time.Millisecond

// Observed implements activities.ObservationSink: the observations of a tick.
func (p *plannerMetrics) Observed(req workflows.ObserveAllRequest, res workflows.ObserveAllResult) {
	id := req.Deployment.WorkflowID()
	if inv := res.Inventory; inv != nil {
		p.replicas(id, inv.ReadyPrefill, inv.ReadyDecode)
	}
	if tr := res.Traffic; req.Traffic && res.TrafficError == "" && tr != nil {
		window := tr.DurationS
		if window <= 0 {
			window = req.TrafficDurationS
		}
		p.mu.Lock()
		p.track(id).window = window
		p.mu.Unlock()
		windowed := *tr
		windowed.DurationS = window
		// As the tick records it, over the asked window when the source gave none (every
		// source gives it today).
		rps := windowed.RequestsPerSecond()
		// An unreadable value is NaN, as Dynamo's; never zero.
		for name, v := range map[string]*float64{
			"dynamo_planner_observed_ttft_ms":                  tr.TTFTMs,
			"dynamo_planner_observed_itl_ms":                   tr.ITLMs,
			"dynamo_planner_observed_request_duration_seconds": tr.RequestDurationS,
			"dynamo_planner_observed_input_sequence_tokens":    tr.ISL,
			"dynamo_planner_observed_output_sequence_tokens":   tr.OSL,
			"dynamo_planner_observed_requests_per_second":      rps,
		} {
			p.gauges.set(id, name, nil, valueOrNaN(v))
		}
	}
	if f := res.FPM; req.FPM && f != nil && f.FPM != nil {
		engine := func(e perf.FPM) map[string]string {
			return map[string]string{"worker_id": e.WorkerID, "dp_rank": strconv.FormatInt(e.DPRank, 10)}
		}
		var queuedPrefill, queuedDecode, inflightDecode []labelledValue
		prefillEngines := f.FPM.Prefill
		if len(prefillEngines) == 0 {
			prefillEngines = f.FPM.Decode // aggregated: the engines prefill too
		}
		for _, e := range prefillEngines {
			queuedPrefill = append(queuedPrefill, labelledValue{engine(e), float64(e.Queued.SumPrefillTokens)})
		}
		for _, e := range f.FPM.Decode {
			queuedDecode = append(queuedDecode, labelledValue{engine(e), float64(e.Queued.SumDecodeKVTokens)})
			inflightDecode = append(inflightDecode, labelledValue{engine(e), float64(e.Scheduled.SumDecodeKVTokens)})
		}
		p.gauges.replace(id, "dynamo_planner_engine_queued_prefill_tokens", queuedPrefill)
		p.gauges.replace(id, "dynamo_planner_engine_queued_decode_kv_tokens", queuedDecode)
		p.gauges.replace(id, "dynamo_planner_engine_inflight_decode_kv_tokens", inflightDecode)
	}
}

func valueOrNaN(v *float64) float64 {
	if v == nil {
		return math.NaN()
	}
	return *v
}

func (p *plannerMetrics) replicas(id string, prefill, decode *int) {
	if prefill != nil {
		p.gauges.set(id, "dynamo_planner_num_prefill_replicas", nil, float64(*prefill))
	}
	if decode != nil {
		p.gauges.set(id, "dynamo_planner_num_decode_replicas", nil, float64(*decode))
	}
}

// stateQuerier reads a planner's state query; running is false when the planner is closed
// or does not exist.
type stateQuerier interface {
	plannerState(ctx context.Context, workflowID string) (v workflows.StateView, running bool, err error)
}

// clientQuerier queries through the worker's Temporal client. The query is refused by the
// server when the planner is not running (QUERY_REJECT_CONDITION_NOT_OPEN), so a closed
// planner is never replayed to answer it.
type clientQuerier struct{ c client.Client }

func (q clientQuerier) plannerState(ctx context.Context, id string) (workflows.StateView, bool, error) {
	var v workflows.StateView
	resp, err := q.c.QueryWorkflowWithOptions(ctx, &client.QueryWorkflowWithOptionsRequest{WorkflowID: id,
		QueryType: workflows.QueryState, QueryRejectCondition: enumspb.QUERY_REJECT_CONDITION_NOT_OPEN})
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		return v, false, nil
	case err != nil:
		return v, false, err
	case resp.QueryRejected != nil:
		return v, false, nil
	}
	if err := resp.QueryResult.Get(&v); err != nil {
		return v, false, err
	}
	return v, true, nil
}

// run refreshes the planners' series until ctx ends: at each tick's start (TickStarted) and
// every refresh interval for every planner with series here, at most maxConcurrentRefresh
// queries at once, one per planner, and DefaultPlannerQueriesPerSecond.
func (p *plannerMetrics) run(ctx context.Context, q stateQuerier, logger *slog.Logger) {
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, maxConcurrentRefresh)
	var mu sync.Mutex
	inflight := map[string]bool{}
	refresh := func(id string, wait bool) {
		// A planner already being read is skipped before it costs a slot of the rate.
		mu.Lock()
		busy := inflight[id]
		inflight[id] = true
		mu.Unlock()
		if busy {
			return
		}
		done := func() { mu.Lock(); delete(inflight, id); mu.Unlock() }
		if wait {
			if p.limit.Wait(ctx) != nil {
				done()
				return
			}
		} else if !p.limit.Allow() {
			done()
			return
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			done()
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem; done() }()
			qctx, cancel := context.WithTimeout(ctx, plannerQueryTimeout)
			defer cancel()
			if err := p.refreshOne(qctx, q, id); err != nil && ctx.Err() == nil {
				logger.Debug("cannot read a planner's state for /metrics", "workflow_id", id, "error", err)
			}
		}()
	}
	ticker := time.NewTicker(p.refresh)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-p.wake:
			refresh(id, false)
		case <-ticker.C:
			// Planners read at their ticks are skipped: the sweep is for those that stopped
			// ticking here (ended, moved, stuck) or tick rarely.
			now := p.now()
			live := p.gauges.list()
			p.mu.Lock()
			for id := range p.tracks {
				if !slices.Contains(live, id) { // expired: forget its ticks too
					delete(p.tracks, id)
				}
			}
			p.mu.Unlock()
			for _, id := range live {
				p.mu.Lock()
				t := p.tracks[id]
				fresh := t != nil && now.Sub(t.refreshed) < p.refresh
				p.mu.Unlock()
				if !fresh {
					refresh(id, true)
				}
			}
		}
	}
}

// refreshOne reads one planner's state and updates its series, or drops them when it ended.
func (p *plannerMetrics) refreshOne(ctx context.Context, q stateQuerier, id string) error {
	v, running, err := q.plannerState(ctx, id)
	if err != nil {
		return err
	}
	if !running {
		p.forget(id)
		return nil
	}
	p.apply(id, v)
	return nil
}

// forget drops a planner's series and track (it ended).
func (p *plannerMetrics) forget(id string) {
	p.gauges.drop(id)
	p.mu.Lock()
	delete(p.tracks, id)
	p.mu.Unlock()
}

// apply sets the series a state query answers.
func (p *plannerMetrics) apply(id string, v workflows.StateView) {
	if !p.gauges.known(id) {
		return // dropped meanwhile (ended, or expired)
	}
	now := p.now()
	set := func(name string, x float64) { p.gauges.set(id, name, nil, x) }
	if v.TTFTMs > 0 {
		set("dynamo_planner_sla_target_ttft_ms", v.TTFTMs)
	}
	if v.ITLMs > 0 {
		set("dynamo_planner_sla_target_itl_ms", v.ITLMs)
	}
	set("planner_ticks_total", float64(v.Ticks))
	if v.NextTickAt > 0 {
		set("planner_next_tick_timestamp_seconds", v.NextTickAt)
	}

	// GPU-hours: the ready replicas' GPUs integrated over time (as Dynamo's
	// (p*p_gpu + d*d_gpu) * dt / 3600 per tick).
	var gpus float64
	if inv := v.Inventory; inv != nil {
		p.replicas(id, inv.ReadyPrefill, inv.ReadyDecode)
		if inv.ReadyPrefill != nil {
			gpus += float64(*inv.ReadyPrefill) * gpuCost(inv.Capabilities.Prefill)
		}
		if inv.ReadyDecode != nil {
			gpus += float64(*inv.ReadyDecode) * gpuCost(inv.Capabilities.Decode)
		}
	}
	p.mu.Lock()
	t := p.track(id)
	if !t.gpuAt.IsZero() && now.After(t.gpuAt) {
		t.gpuHours += t.gpus * now.Sub(t.gpuAt).Hours()
	}
	t.gpuAt, t.gpus, t.refreshed = now, gpus, now
	gpuHours, window := t.gpuHours, t.window
	p.mu.Unlock()
	set("dynamo_planner_gpu_hours", gpuHours)

	// The planner's own.
	pending := 0.0
	for _, d := range v.Decisions {
		if d.Status == workflows.StatusApplied || d.Status == workflows.StatusPublished {
			pending = max(pending, float64(now.UnixNano())/1e9-d.At)
		}
	}
	set("planner_pending_decision_age_seconds", pending)
	for kind, on := range map[string]bool{
		"replicas_prefill": v.Overrides.Prefill != nil, "replicas_decode": v.Overrides.Decode != nil,
		"pause_scale_up": v.Overrides.PauseScaleUp, "pause_scale_down": v.Overrides.PauseScaleDown,
	} {
		p.gauges.set(id, "planner_overrides_active", map[string]string{"kind": kind}, boolValue(on))
	}
	set("planner_rejected_messages", float64(len(v.Rejected)))
	last := 0.0
	if n := len(v.Rejected); n > 0 {
		last = v.Rejected[n-1].At
	}
	set("planner_last_rejected_message_timestamp_seconds", last)

	lt := v.LastTick
	if lt == nil {
		return
	}
	set("planner_last_tick_timestamp_seconds", lt.At)
	d := lt.Diagnostics
	if d == nil {
		return
	}
	// Tick timing: the tick's start is when its Observe was scheduled; it was due at the
	// previous tick's NextTickAt.
	at := unixTime(lt.At)
	p.mu.Lock()
	start, started := t.starts[lt.Tick]
	next := lt.Tick + 1
	due := unixTime(d.NextTickAt)
	if d.NextTickAt > 0 {
		t.dues[next] = due
		prune(t.dues, next)
	}
	nextStart, nextStarted := t.starts[next]
	p.mu.Unlock()
	if started {
		set("dynamo_planner_tick_duration_seconds", max(0, at.Sub(start).Seconds()))
	}
	if nextStarted && d.NextTickAt > 0 {
		set("dynamo_planner_tick_lag_seconds", max(0, nextStart.Sub(due).Seconds()))
	}
	if d.NextTickAt > lt.At {
		p.mu.Lock()
		t.interval = due.Sub(at)
		p.mu.Unlock()
		p.gauges.setInterval(id, due.Sub(at))
		set("planner_tick_interval_seconds", d.NextTickAt-lt.At)
	}

	setPtr := func(name string, x *float64) {
		if x != nil {
			set(name, *x)
		}
	}
	// What the loop that ran could not compute (a perf model not ready, capabilities not
	// reported) is NaN, as Dynamo's unset values: never zero, never a stale value.
	if d.RanLoad {
		set("dynamo_planner_estimated_ttft_ms", valueOrNaN(d.EstimatedTTFTMs))
		set("dynamo_planner_estimated_itl_ms", valueOrNaN(d.EstimatedITLMs))
	} else {
		setPtr("dynamo_planner_estimated_ttft_ms", d.EstimatedTTFTMs)
		setPtr("dynamo_planner_estimated_itl_ms", d.EstimatedITLMs)
	}
	if d.RanThroughput {
		set("dynamo_planner_engine_prefill_capacity_requests_per_second", valueOrNaN(d.EngineRPSPrefill))
		set("dynamo_planner_engine_decode_capacity_requests_per_second", valueOrNaN(d.EngineRPSDecode))
	} else {
		setPtr("dynamo_planner_engine_prefill_capacity_requests_per_second", d.EngineRPSPrefill)
		setPtr("dynamo_planner_engine_decode_capacity_requests_per_second", d.EngineRPSDecode)
	}
	if d.RanThroughput || d.PredictedNumReq != nil {
		setPtr("dynamo_planner_predicted_input_sequence_tokens", d.PredictedISL)
		setPtr("dynamo_planner_predicted_output_sequence_tokens", d.PredictedOSL)
		if d.PredictedNumReq != nil && window > 0 {
			set("dynamo_planner_predicted_requests_per_second", *d.PredictedNumReq/window)
		}
	}
	if d.RanThroughput {
		if n, ok := throughputTarget(d, d.Decision.Prefill, d.ThroughputLowerBoundPrefill, d.ReadyPrefill); ok {
			set("dynamo_planner_predicted_num_prefill_replicas", n)
		}
		if n, ok := throughputTarget(d, d.Decision.Decode, d.ThroughputLowerBoundDecode, d.ReadyDecode); ok {
			set("dynamo_planner_predicted_num_decode_replicas", n)
		}
	}
	enum := func(name string, current scaling.Reason, states []scaling.Reason) {
		if current == "" {
			return
		}
		for _, s := range states {
			p.gauges.set(id, name, map[string]string{name: string(s)}, boolValue(s == current))
		}
	}
	enum("dynamo_planner_load_scaling_decision", d.LoadReason, scaling.LoadReasons)
	enum("dynamo_planner_throughput_scaling_decision", d.ThroughputReason, scaling.ThroughputReasons)
}

// throughputTarget is the replica count the throughput loop asked for: its lower bound for
// the load loop when both run, else its decision, else (no change) the ready count.
func throughputTarget(d *scaling.Diagnostics, decided *int, lowerBound int, ready *int) (float64, bool) {
	switch {
	case d.ThroughputReason == scaling.ReasonSetLowerBound && lowerBound > 0:
		return float64(lowerBound), true
	case d.ThroughputReason == scaling.ReasonScale && decided != nil:
		return float64(*decided), true
	case d.ThroughputReason == scaling.ReasonNoChange && ready != nil:
		return float64(*ready), true
	}
	return 0, false
}

// gpuCost is a replica's GPUs as its workers report them (1 when they report none).
func gpuCost(c *scaling.EngineCapabilities) float64 {
	if g := c.GPUCost(); g > 0 {
		return float64(g)
	}
	return 1
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func unixTime(s float64) time.Time { return time.Unix(0, int64(s*1e9)) }
