package worker

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/connectors"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/scaling"
	"github.com/llmplanner/planner/workflows"
)

// fakeQuerier answers state queries from a map; a missing planner is not running.
type fakeQuerier struct {
	views map[string]workflows.StateView
	err   error
}

func (f fakeQuerier) plannerState(_ context.Context, id string) (workflows.StateView, bool, error) {
	if f.err != nil {
		return workflows.StateView{}, false, f.err
	}
	v, ok := f.views[id]
	return v, ok, nil
}

func newTestPlanners(now *time.Time) (*plannerMetrics, *prometheus.Registry) {
	g := newPlannerGauges(15*time.Minute, func() time.Time { return *now })
	reg := prometheus.NewRegistry()
	reg.MustRegister(g)
	return newPlannerMetrics(g, func() time.Time { return *now }), reg
}

func ptr[T any](v T) *T { return &v }

// TestPlannerSeriesExpireWithTheirPlanner: a planner's series appear with its first tick on
// this worker and are dropped, all of them, once no tick was seen within the TTL (it moved
// or is stuck), or at once when the state query finds it ended; another planner's stay, and
// a late refresh does not bring an ended planner back. The clock is a fake.
func TestPlannerSeriesExpireWithTheirPlanner(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	p, reg := newTestPlanners(&now)
	count := func() int { n, err := testutil.GatherAndCount(reg); require.NoError(t, err); return n }
	a, b := workflows.Deployment{Namespace: "ns", Name: "a"}, workflows.Deployment{Namespace: "ns", Name: "b"}
	observe := func(d workflows.Deployment, decode int) {
		p.TickStarted(d, 1, now)
		p.Observed(workflows.ObserveAllRequest{ObserveRequest: workflows.ObserveRequest{Deployment: d}, Inventory: true},
			workflows.ObserveAllResult{Inventory: &connectors.Inventory{WorkerCounts: scaling.WorkerCounts{ReadyDecode: &decode}}})
	}
	p.apply(a.WorkflowID(), workflows.StateView{TTFTMs: 200})
	require.Equal(t, 0, count(), "a planner never seen ticking here has no series")
	observe(a, 3)
	observe(b, 5)
	require.Equal(t, 2, count())

	now = now.Add(10 * time.Minute)
	observe(b, 6)
	now = now.Add(6 * time.Minute) // a's last tick is 16 minutes old
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP dynamo_planner_num_decode_replicas Ready decode (or aggregated) replicas the connector reports.
# TYPE dynamo_planner_num_decode_replicas gauge
dynamo_planner_num_decode_replicas{deployment="planner/ns/b"} 6
`)))

	// b ends: the refresh finds it closed and drops it at once.
	q := fakeQuerier{views: map[string]workflows.StateView{}}
	require.NoError(t, p.refreshOne(context.Background(), q, b.WorkflowID()))
	require.Equal(t, 0, count())
	p.apply(b.WorkflowID(), workflows.StateView{TTFTMs: 200})
	require.Equal(t, 0, count(), "a late answer does not bring it back")

	// A query that fails (server unreachable) keeps the series: the TTL decides.
	observe(a, 2)
	require.Error(t, p.refreshOne(context.Background(), fakeQuerier{err: errors.New("unavailable")}, a.WorkflowID()))
	require.Equal(t, 1, count())

	// A planner ticking every 30 minutes keeps its series for three intervals.
	p.apply(a.WorkflowID(), workflows.StateView{LastTick: &workflows.TickRecord{Tick: 1, At: float64(now.Unix()),
		Diagnostics: &scaling.Diagnostics{NextTickAt: float64(now.Add(30 * time.Minute).Unix())}}})
	now = now.Add(80 * time.Minute)
	require.NotZero(t, count())
	now = now.Add(11 * time.Minute)
	require.Equal(t, 0, count(), "91 minutes without a tick: gone")
}

// TestPlannerSeriesValues: what the Observe activity read and what the state query answers
// become Dynamo's series and the planner's own, with Dynamo's labels.
// TestMovedPlannerSeriesExpireDespiteAnsweringQueries: a planner that ticks on another
// worker still answers the state query here; those answers (the sweep's) must not keep its
// series alive past the TTL, or a moved planner would be exported by every worker that ever
// saw it, forever.
func TestMovedPlannerSeriesExpireDespiteAnsweringQueries(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	p, reg := newTestPlanners(&now)
	count := func() int { n, err := testutil.GatherAndCount(reg); require.NoError(t, err); return n }
	a := workflows.Deployment{Namespace: "ns", Name: "a"}
	decode := 3
	p.TickStarted(a, 1, now)
	p.Observed(workflows.ObserveAllRequest{ObserveRequest: workflows.ObserveRequest{Deployment: a}, Inventory: true},
		workflows.ObserveAllResult{Inventory: &connectors.Inventory{WorkerCounts: scaling.WorkerCounts{ReadyDecode: &decode}}})
	require.NotZero(t, count())
	// It moved: no tick here any more, but every sweep's query answers with fresh ticks.
	for i := 0; i < 40; i++ {
		now = now.Add(30 * time.Second)
		tick := int64(2 + i)
		p.apply(a.WorkflowID(), workflows.StateView{TTFTMs: 200, LastTick: &workflows.TickRecord{Tick: tick, At: float64(now.Unix()),
			Diagnostics: &scaling.Diagnostics{NextTickAt: float64(now.Add(5 * time.Second).Unix())}}})
	}
	require.Equal(t, 0, count(), "20 minutes without a tick on this worker: its series are gone")
}

func TestPlannerSeriesValues(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	p, reg := newTestPlanners(&now)
	d := workflows.Deployment{Namespace: "ns", Name: "llama"}
	id := d.WorkflowID()
	start := now
	p.TickStarted(d, 7, start)
	p.Observed(workflows.ObserveAllRequest{ObserveRequest: workflows.ObserveRequest{Deployment: d, Tick: 7, TrafficDurationS: 60},
		Inventory: true, FPM: true, Traffic: true},
		workflows.ObserveAllResult{
			Inventory: &connectors.Inventory{WorkerCounts: scaling.WorkerCounts{ReadyPrefill: ptr(1), ReadyDecode: ptr(2)},
				Capabilities: scaling.WorkerCapabilities{Decode: &scaling.EngineCapabilities{NumGPU: 2}}},
			Traffic: &scaling.TrafficObservation{DurationS: 60, NumReq: ptr(120.0), TTFTMs: ptr(150.0), ITLMs: ptr(12.0), ISL: ptr(3000.0)},
			FPM: &workflows.FPMResult{FPM: &scaling.FPMObservations{
				Prefill: []perf.FPM{{WorkerID: "p0", Queued: perf.QueuedRequests{SumPrefillTokens: 9000}}},
				Decode:  []perf.FPM{{WorkerID: "d0", DPRank: 1, Queued: perf.QueuedRequests{SumDecodeKVTokens: 50}, Scheduled: perf.ScheduledRequests{SumDecodeKVTokens: 7000}}},
			}},
		})
	now = now.Add(2 * time.Second)
	view := workflows.StateView{Ticks: 7, TTFTMs: 200, ITLMs: 20, NextTickAt: float64(now.Unix()) + 58,
		Inventory: &connectors.Inventory{WorkerCounts: scaling.WorkerCounts{ReadyPrefill: ptr(1), ReadyDecode: ptr(2)},
			Capabilities: scaling.WorkerCapabilities{Decode: &scaling.EngineCapabilities{NumGPU: 2}}},
		Decisions: []workflows.DecisionRecord{{ID: 3, At: float64(now.Unix()) - 40, Status: workflows.StatusApplied}},
		Overrides: workflows.Overrides{PauseScaleDown: true},
		Rejected:  []workflows.RejectedMessage{{At: 1_699_999_000, Name: "pause"}},
		LastTick: &workflows.TickRecord{Tick: 7, Kind: "scheduled", At: float64(now.Unix()),
			Diagnostics: &scaling.Diagnostics{RanThroughput: true, EstimatedTTFTMs: ptr(180.0), PredictedNumReq: ptr(180.0),
				ThroughputReason: scaling.ReasonSetLowerBound, ThroughputLowerBoundDecode: 3, LoadReason: scaling.ReasonScaleUp,
				NextTickAt: float64(now.Unix()) + 58}}}
	p.apply(id, view)
	now = now.Add(30 * time.Minute)
	p.TickStarted(d, 8, now) // it still ticks here, so its series stay
	p.apply(id, view)

	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"dynamo_planner_num_prefill_replicas", nil, 1},
		{"dynamo_planner_observed_requests_per_second", nil, 2},
		{"dynamo_planner_observed_ttft_ms", nil, 150},
		{"dynamo_planner_predicted_requests_per_second", nil, 3},
		{"dynamo_planner_predicted_num_decode_replicas", nil, 3},
		{"dynamo_planner_estimated_ttft_ms", nil, 180},
		{"dynamo_planner_sla_target_itl_ms", nil, 20},
		{"dynamo_planner_gpu_hours", nil, 2.5}, // (1 prefill x 1 GPU + 2 decode x 2 GPUs) for half an hour
		{"dynamo_planner_engine_queued_prefill_tokens", map[string]string{"worker_id": "p0", "dp_rank": "0"}, 9000},
		{"dynamo_planner_engine_inflight_decode_kv_tokens", map[string]string{"worker_id": "d0", "dp_rank": "1"}, 7000},
		{"dynamo_planner_load_scaling_decision", map[string]string{"dynamo_planner_load_scaling_decision": "scale_up"}, 1},
		{"dynamo_planner_load_scaling_decision", map[string]string{"dynamo_planner_load_scaling_decision": "scale_down"}, 0},
		{"dynamo_planner_tick_duration_seconds", nil, 2},
		{"planner_pending_decision_age_seconds", nil, 30*60 + 40},
		{"planner_overrides_active", map[string]string{"kind": "pause_scale_down"}, 1},
		{"planner_overrides_active", map[string]string{"kind": "replicas_decode"}, 0},
		{"planner_rejected_messages", nil, 1},
		{"planner_ticks_total", nil, 7},
	} {
		require.InDelta(t, c.want, gaugeValue(t, reg, c.name, id, c.labels), 1e-9, c.name)
	}
	require.True(t, math.IsNaN(gaugeValue(t, reg, "dynamo_planner_observed_output_sequence_tokens", id, nil)), "not read: NaN, never 0")

	// The next tick starts 5 s after it was due: its lag.
	p.TickStarted(d, 8, unixTime(view.LastTick.Diagnostics.NextTickAt).Add(5*time.Second))
	require.InDelta(t, 5, gaugeValue(t, reg, "dynamo_planner_tick_lag_seconds", id, nil), 1e-9)
}

func gaugeValue(t *testing.T, reg *prometheus.Registry, name, deployment string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if got["deployment"] != deployment {
				continue
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no series %s%v for %s", name, labels, deployment)
	return 0
}

// TestPlannerRefreshAtTickStart: a tick's start makes the worker read the planner's state;
// a planner the query finds closed loses its series without waiting for the TTL or the
// periodic refresh.
func TestPlannerRefreshAtTickStart(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	p, reg := newTestPlanners(&now)
	p.refresh = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.run(ctx, fakeQuerier{views: map[string]workflows.StateView{}}, slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() { cancel(); <-done })
	p.TickStarted(workflows.Deployment{Namespace: "ns", Name: "ended"}, 3, now)
	require.Eventually(t, func() bool {
		n, err := testutil.GatherAndCount(reg)
		return err == nil && n == 0 && !p.gauges.known("planner/ns/ended")
	}, 10*time.Second, 10*time.Millisecond)
}
