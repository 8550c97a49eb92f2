package scaletest

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmplanner/planner/workflows"
)

func TestPercentileIsNearestRank(t *testing.T) {
	s := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	require.Equal(t, 5.0, Percentile(s, 0.5))
	require.Equal(t, 9.0, Percentile(s, 0.9))
	require.Equal(t, 10.0, Percentile(s, 0.99))
	require.Equal(t, 10.0, Percentile(s, 1))
	require.Equal(t, 1.0, Percentile(s, 0.01))
	require.Equal(t, 7.0, Percentile([]float64{7}, 0.99))
	require.True(t, math.IsNaN(Percentile(nil, 0.5)))

	// 1000 values: p99 is the 990th, not the maximum.
	var many []float64
	for i := 1; i <= 1000; i++ {
		many = append(many, float64(i))
	}
	require.Equal(t, 990.0, Percentile(many, 0.99))
}

func TestNewStatsSortsACopy(t *testing.T) {
	in := []float64{3, 1, 2, 10}
	st := NewStats(in)
	require.Equal(t, []float64{3, 1, 2, 10}, in, "the caller's slice is left alone")
	require.Equal(t, Stats{Count: 4, Mean: 4, P50: 2, P90: 10, P99: 10, Max: 10, Min: 1}, st)
	require.Equal(t, Stats{}, NewStats(nil))
}

func TestLatenessIsAgainstWhenTheTickWasDue(t *testing.T) {
	// The timer the tick waited on says when it was due.
	prev := Tick{N: 4, At: 100, NextTickAt: 105, Scheduled: true}
	l, ok := Lateness(&prev, Tick{N: 5, At: 105.25, DueAt: 105.1, Scheduled: true}, 5)
	require.True(t, ok)
	require.InDelta(t, 0.15, l, 1e-9)
	l, ok = Lateness(nil, Tick{N: 5, At: 105.25, DueAt: 105.1, Scheduled: true}, 5)
	require.True(t, ok, "the timer is enough")
	require.InDelta(t, 0.15, l, 1e-9)

	// No timer (already due): the previous tick's recorded schedule, else its decision time
	// plus the interval (generation 3 records no schedule).
	l, ok = Lateness(&prev, Tick{N: 5, At: 106, Scheduled: true}, 5)
	require.True(t, ok)
	require.InDelta(t, 1, l, 1e-9)
	l, ok = Lateness(&Tick{N: 4, At: 100, Scheduled: true}, Tick{N: 5, At: 107, Scheduled: true}, 5)
	require.True(t, ok)
	require.InDelta(t, 2, l, 1e-9)

	_, ok = Lateness(&prev, Tick{N: 6, At: 110, Scheduled: true}, 5)
	require.False(t, ok, "tick 5 was not read: tick 6's due time is unknown")
	_, ok = Lateness(&Tick{N: 4, At: 100, Failures: []string{"decide failed"}}, Tick{N: 5, At: 105, Scheduled: true}, 5)
	require.False(t, ok, "tick 4 failed to decide: no schedule")
	_, ok = Lateness(&prev, Tick{N: 5, At: 101, DueAt: 101}, 5)
	require.False(t, ok, "an override pass is not a scheduled tick")
}

func TestMeasureCountsTicksInTheWindow(t *testing.T) {
	// Planner a: ticks every 5 s, each 0.1 s late, seen twice (two polls), tick 5 never seen.
	var a []Tick
	for n := int64(1); n <= 10; n++ {
		at := 100 + float64(n-1)*5.1
		if n == 5 {
			continue
		}
		tk := Tick{N: n, At: at, NextTickAt: at + 5, Scheduled: true, Decided: n == 3}
		a = append(a, tk, tk)
	}
	// Planner b: tick 2 failed to decide, so tick 3 has no lateness; tick 4's timer fired
	// 0.1 s late, its task started 0.3 s later and it observed for 0.1 s.
	b := []Tick{
		{N: 1, At: 101, NextTickAt: 106, Scheduled: true},
		{N: 2, At: 106.5, Scheduled: true, Failures: []string{"decide failed"}},
		{N: 3, At: 111.5, NextTickAt: 116.5, Scheduled: true},
		{N: 4, At: 117, NextTickAt: 122, DueAt: 116.5, FiredAt: 116.6, WokeAt: 116.9, Scheduled: true},
	}
	// Planner c: no tick in the window.
	c := []Tick{{N: 1, At: 50, NextTickAt: 55, Scheduled: true}}
	w := Window{Start: 100, End: 150}
	got := Measure(map[string][]Tick{"a": a, "b": b, "c": c}, w, 5)

	require.InDelta(t, 3*50/5.0, got.Expected, 1e-9)
	require.Equal(t, int64(10+4), got.Run, "a: ticks 1..10 (5 unseen still ran); b: 1..4")
	require.Equal(t, int64(1), got.Unobserved)
	require.Equal(t, 2, got.PlannersWithTicks)
	require.InDelta(t, 14/30.0, got.RunRatio, 1e-9)
	require.Equal(t, int64(1), got.Decisions, "a repeated tick counts once")
	require.Equal(t, int64(9+3), got.NoTimer, "every tick but b's fourth has no timer")
	// a: ticks 2,3,4 and 7..10 have their predecessor (7 lateness values of 0.1); b: ticks 2
	// (0.5) and 4 (0.5); tick 3 follows a failed Decide.
	require.Equal(t, 9, got.LatenessS.Count)
	require.InDelta(t, 0.1, got.LatenessS.P50, 1e-9)
	require.InDelta(t, 0.5, got.LatenessS.Max, 1e-9)
	require.Equal(t, map[string]int64{"decide failed": 1}, got.Failures)
	require.Equal(t, 1, got.TimerS.Count)
	require.InDelta(t, 0.1, got.TimerS.P50, 1e-9)
	require.InDelta(t, 0.3, got.DispatchS.P50, 1e-9)
	require.InDelta(t, 0.4, got.WakeS.P50, 1e-9)
	require.InDelta(t, 0.1, got.ObserveS.P50, 1e-9)
}

func TestMeasureOfNothing(t *testing.T) {
	got := Measure(map[string][]Tick{}, Window{Start: 0, End: 10}, 5)
	require.Zero(t, got.Run)
	require.Zero(t, got.RunRatio)
	require.Nil(t, got.Failures)
}

func TestHistogramQuantileAndDelta(t *testing.T) {
	text := `# TYPE temporal_workflow_task_execution_latency_seconds histogram
temporal_workflow_task_execution_latency_seconds_bucket{task_queue="planner",le="0.001"} 50
temporal_workflow_task_execution_latency_seconds_bucket{task_queue="planner",le="0.01"} 90
temporal_workflow_task_execution_latency_seconds_bucket{task_queue="planner",le="0.1"} 100
temporal_workflow_task_execution_latency_seconds_bucket{task_queue="planner",le="+Inf"} 100
temporal_workflow_task_execution_latency_seconds_sum{task_queue="planner"} 0.5
temporal_workflow_task_execution_latency_seconds_count{task_queue="planner"} 100
# TYPE temporal_worker_task_slots_used gauge
temporal_worker_task_slots_used{worker_type="WorkflowWorker"} 3
temporal_worker_task_slots_used{worker_type="ActivityWorker"} 4
# TYPE temporal_activity_execution_failed_total counter
temporal_activity_execution_failed_total{activity_type="ObserveFPM"} 2
temporal_activity_execution_failed_total{activity_type="Apply"} 1
`
	s, err := ParseMetrics(strings.NewReader(text))
	require.NoError(t, err)
	h := s.Hists["temporal_workflow_task_execution_latency_seconds"]
	require.Equal(t, 100.0, h.Count)
	require.Equal(t, 0.001, h.Quantile(0.5))
	require.Equal(t, 0.01, h.Quantile(0.9))
	require.Equal(t, 0.1, h.Quantile(0.99))
	require.InDelta(t, 0.005, h.Mean(), 1e-12)
	require.Equal(t, 7.0, s.Values["temporal_worker_task_slots_used"])
	require.Equal(t, 3.0, s.Values["temporal_worker_task_slots_used{worker_type=WorkflowWorker}"])
	require.Equal(t, 3.0, s.Values["temporal_activity_execution_failed_total"])

	// A later scrape: 100 more tasks, all slow. The window's quantiles are the new ones.
	later := strings.NewReplacer(`le="0.1"} 100`, `le="0.1"} 200`, `le="+Inf"} 100`, `le="+Inf"} 200`,
		`_sum{task_queue="planner"} 0.5`, `_sum{task_queue="planner"} 9.5`, `_count{task_queue="planner"} 100`, `_count{task_queue="planner"} 200`,
		`{activity_type="Apply"} 1`, `{activity_type="Apply"} 5`).Replace(text)
	s2, err := ParseMetrics(strings.NewReader(later))
	require.NoError(t, err)
	d := s2.Sub(s)
	dh := d.Hists["temporal_workflow_task_execution_latency_seconds"]
	require.Equal(t, 100.0, dh.Count)
	require.Equal(t, 0.1, dh.Quantile(0.5))
	require.InDelta(t, 0.09, dh.Mean(), 1e-12)
	require.Equal(t, 4.0, d.Values["temporal_activity_execution_failed_total"])

	// Two workers add up.
	both := s.Add(s)
	require.Equal(t, 200.0, both.Hists["temporal_workflow_task_execution_latency_seconds"].Count)
	require.Equal(t, 0.001, both.Hists["temporal_workflow_task_execution_latency_seconds"].Quantile(0.5))
	require.True(t, math.IsNaN(Histogram{}.Quantile(0.5)))
}

func TestUndefinedNumbersAreNullInJSON(t *testing.T) {
	out, err := json.Marshal(struct {
		A, B, C Num
	}{Num(math.NaN()), Num(math.Inf(1)), 0.25})
	require.NoError(t, err)
	require.JSONEq(t, `{"A": null, "B": null, "C": 0.25}`, string(out))
}

func TestParseProc(t *testing.T) {
	// The command name may hold spaces and parentheses.
	stat := []byte("4242 (planner (x) y) S 1 4242 4242 0 -1 4194560 1000 0 0 0 1250 375 0 0 20 0 12 0 100 0 0\n")
	cpu, err := ParseStatCPU(stat)
	require.NoError(t, err)
	require.InDelta(t, 16.25, cpu, 1e-9)
	_, err = ParseStatCPU([]byte("4242 planner S 1"))
	require.Error(t, err)

	some, full := ParsePressure([]byte("some avg10=1.00 avg60=2.00 avg300=3.00 total=2500000\nfull avg10=0.50 avg60=1.00 avg300=1.50 total=1000000\n"))
	require.InDelta(t, 2.5, some, 1e-9)
	require.InDelta(t, 1.0, full, 1e-9)

	m, err := ParseMachineStat([]byte("cpu  100 10 50 800 40 0 0 0 0 0\ncpu0 50 5 25 400 20 0 0 0 0 0\n"))
	require.NoError(t, err)
	require.InDelta(t, 1.6, m.BusySeconds, 1e-9)
	require.InDelta(t, 10, m.TotalSeconds, 1e-9)
}

func TestResourcesOverTheWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	mk := func(s int, workerCPU, serverCPU, busy float64, rssMiB int64) Sample {
		return Sample{At: t0.Add(time.Duration(s) * time.Second),
			Workers: []ProcUsage{{CPUSeconds: workerCPU, RSSBytes: rssMiB * mib, PeakRSSBytes: 300 * mib}},
			Server:  ProcUsage{CPUSeconds: serverCPU, RSSBytes: 100 * mib}, Machine: MachineUsage{BusySeconds: busy, Load1: 2, IOFullSeconds: busy / 100}}
	}
	samples := []Sample{mk(-5, 0, 0, 0, 50), mk(0, 10, 5, 100, 200), mk(5, 12.5, 6, 109, 250), mk(10, 20, 7, 118, 220), mk(15, 99, 99, 999, 999)}
	r := Resources(samples, t0, t0.Add(10*time.Second))
	require.Equal(t, 3, r.Samples)
	require.InDelta(t, 1.0, r.Workers.CPUCoresMean, 1e-9)
	require.InDelta(t, 1.5, r.Workers.CPUCoresMax, 1e-9)
	require.InDelta(t, 250, r.Workers.RSSMaxMiB, 1e-9)
	require.InDelta(t, 220, r.Workers.RSSEndMiB, 1e-9)
	require.InDelta(t, 300, r.Workers.PeakRSSMiB, 1e-9)
	require.InDelta(t, 0.2, r.Server.CPUCoresMean, 1e-9)
	require.InDelta(t, 1.8, r.Machine.BusyCoresMean, 1e-9)
	require.InDelta(t, 0.6, r.Machine.OtherCoresMean, 1e-9)
	require.InDelta(t, 1.8, r.Machine.IOFullPct, 1e-9)
}

func TestScanLogCountsWarningsAndErrorsByMessage(t *testing.T) {
	log := `time=x level=INFO msg="planner worker polling" task_queue=planner
time=x level=ERROR msg="decide failed; holding" WorkflowID=planner/scale/p00001 error="boom"
time=x level=ERROR msg="decide failed; holding" WorkflowID=planner/scale/p00002 error="boom"
time=x level=WARN msg="Failed to poll for task." error=x
{"time":"x","level":"WARN","msg":"signal rejected"}
`
	s, err := scanLog(strings.NewReader(log))
	require.NoError(t, err)
	require.Equal(t, LogScan{Lines: 5, Warnings: 2, Errors: 2, Messages: map[string]int{
		"ERROR: decide failed; holding": 2, "WARN: Failed to poll for task.": 1, "WARN: signal rejected": 1}}, s)
	require.Equal(t, []string{"2 × ERROR: decide failed; holding", "1 × WARN: Failed to poll for task."}, topMessages(s.Messages, 2))
}

func TestObservationsAlternate(t *testing.T) {
	s := Observations(3, 10)
	require.NoError(t, s.Validate())
	busy := func(tick int64) bool {
		f := s.FPM(tick, 0, 1)
		return f.Decode[0].Scheduled.SumDecodeKVTokens > 100000
	}
	for tick, want := range []bool{true, true, true, false, false, false, true, true, true, false} {
		require.Equal(t, want, busy(int64(tick)), "tick %d", tick)
	}
	require.Equal(t, 3, len(s.FPM(4, 0, 3).Decode), "one FPM per ready engine")
	require.NotNil(t, s.Traffic(4, 5).NumReq)
}

// history builds a run's events: each is a type, a time (Unix seconds) and its attributes.
type historyBuilder struct {
	t      *testing.T
	events []*historypb.HistoryEvent
}

func (h *historyBuilder) add(typ enumspb.EventType, at float64, set func(*historypb.HistoryEvent)) {
	e := &historypb.HistoryEvent{EventId: int64(len(h.events) + 1), EventType: typ,
		EventTime: timestamppb.New(time.Unix(0, int64(at*1e9)))}
	if set != nil {
		set(e)
	}
	h.events = append(h.events, e)
}

func (h *historyBuilder) payloads(v any) *commonpb.Payloads {
	p, err := converter.GetDefaultDataConverter().ToPayloads(v)
	require.NoError(h.t, err)
	return p
}

// marker adds a local activity marker of the given activity type, with a Decide result
// (nil: the local activity failed).
func (h *historyBuilder) marker(at float64, activityType string, result any) {
	h.add(enumspb.EVENT_TYPE_MARKER_RECORDED, at, func(e *historypb.HistoryEvent) {
		m := &historypb.MarkerRecordedEventAttributes{MarkerName: "LocalActivity", Details: map[string]*commonpb.Payloads{
			"data": h.payloads(map[string]any{"ActivityID": "1", "ActivityType": activityType})}}
		if result != nil {
			m.Details["result"] = h.payloads(result)
		} else {
			m.Failure = &failurepb.Failure{Message: "boom"}
		}
		e.Attributes = &historypb.HistoryEvent_MarkerRecordedEventAttributes{MarkerRecordedEventAttributes: m}
	})
}

func TestTicksFromHistoryEvents(t *testing.T) {
	h := &historyBuilder{t: t}
	h.add(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, 100, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{
			WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{ContinuedExecutionRunId: "run-0"}}
	})
	// task adds a workflow task started at `at` and completed just after; it returns the
	// completed event's id.
	task := func(at float64) int64 {
		h.add(enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, at, nil)
		started := int64(len(h.events))
		h.add(enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, at+0.02, func(e *historypb.HistoryEvent) {
			e.Attributes = &historypb.HistoryEvent_WorkflowTaskCompletedEventAttributes{
				WorkflowTaskCompletedEventAttributes: &historypb.WorkflowTaskCompletedEventAttributes{StartedEventId: started}}
		})
		return int64(len(h.events))
	}
	timer := func(completed int64, d time.Duration) {
		h.add(enumspb.EVENT_TYPE_TIMER_STARTED, 0, func(e *historypb.HistoryEvent) {
			e.Attributes = &historypb.HistoryEvent_TimerStartedEventAttributes{TimerStartedEventAttributes: &historypb.TimerStartedEventAttributes{
				WorkflowTaskCompletedEventId: completed, StartToFireTimeout: durationpb.New(d)}}
		})
	}
	init := task(100.1)
	h.marker(100.12, workflows.ActivityInit, map[string]any{"core": map[string]any{}})
	timer(init, 4900*time.Millisecond) // due at 100.1 + 4.9

	// Tick 1 (generation 2: a Decide local activity): the timer fires at 105.01, the tick's
	// first task starts at 105.3, the observations come back in a task at 105.5; it applies.
	h.add(enumspb.EVENT_TYPE_TIMER_FIRED, 105.01, nil)
	task(105.3)
	task(105.5)
	h.marker(105.52, workflows.ActivityDecide, map[string]any{"state": map[string]any{"version": 1},
		"diagnostics": map[string]any{"at": 105.5, "next_tick_at": 110.5, "ran_load": true}})
	h.add(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, 105.52, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
			ActivityType: &commonpb.ActivityType{Name: workflows.ActivityApply}}}
	})
	// Tick 2 (generation 3: decided in workflow code, recorded as a side effect): the Apply
	// took past the due time, so no timer; the decision's task started at 111.4.
	task(111.0)
	decided := task(111.4)
	h.add(enumspb.EVENT_TYPE_MARKER_RECORDED, 111.42, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_MarkerRecordedEventAttributes{MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{
			MarkerName: "SideEffect", WorkflowTaskCompletedEventId: decided, Details: map[string]*commonpb.Payloads{"data": h.payloads(map[string]any{})}}}
	})
	timer(decided, 5*time.Second) // due at 116.4
	// Tick 3: Decide fails.
	h.add(enumspb.EVENT_TYPE_TIMER_FIRED, 116.45, nil)
	task(116.5)
	task(116.7)
	h.marker(116.72, workflows.ActivityDecide, nil)

	rt, err := ticksFromEvents(h.events)
	require.NoError(t, err)
	require.Equal(t, "run-0", rt.previousRun)
	require.InDelta(t, 100, rt.startedAt, 1e-6)
	require.Len(t, rt.ticks, 3)
	approx := func(want, got Tick) {
		t.Helper()
		require.Equal(t, want.N, got.N)
		for _, f := range [][2]float64{{want.At, got.At}, {want.DueAt, got.DueAt}, {want.NextTickAt, got.NextTickAt}, {want.FiredAt, got.FiredAt}, {want.WokeAt, got.WokeAt}} {
			require.InDelta(t, f[0], f[1], 1e-6, "tick %d: %+v", got.N, got)
		}
		require.Equal(t, want.Decided, got.Decided)
		require.Equal(t, want.Failures, got.Failures)
	}
	approx(Tick{N: 1, At: 105.5, DueAt: 105.0, NextTickAt: 110.5, FiredAt: 105.01, WokeAt: 105.3, Decided: true}, rt.ticks[0])
	approx(Tick{N: 2, At: 111.4}, rt.ticks[1])
	approx(Tick{N: 3, At: 116.7, DueAt: 116.4, FiredAt: 116.45, WokeAt: 116.5, Failures: []string{"decide failed"}}, rt.ticks[2])
	require.Equal(t, int64(3), rt.events["LocalActivity"])
	require.Equal(t, int64(1), rt.events["LocalActivity:Init"])
	require.Equal(t, int64(1), rt.events["SideEffect"])
	require.Equal(t, int64(4), rt.events["MarkerRecorded"])
	require.Equal(t, int64(7), rt.events["WorkflowTaskStarted"])

	// Tick 2 had no timer: it was due at tick 1's NextTickAt, so 0.9 s late.
	l, ok := Lateness(&rt.ticks[0], rt.ticks[1], 5)
	require.True(t, ok)
	require.InDelta(t, 0.9, l, 1e-6)

	hs := HistoryStats{Planners: 1, Ticks: 2, Events: map[string]int64{"MarkerRecorded": 3, "LocalActivity": 3, "WorkflowTaskTimedOut": 1, "ActivityTaskTimedOut": 2}}
	hs.derive()
	require.Equal(t, HistoryStats{Planners: 1, Ticks: 2, EventsPerTick: 3, WorkflowTaskTimeouts: 1, ActivityTimeouts: 2, Events: hs.Events}, hs)
}
