package scaletest

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/llmplanner/planner/workflows"
)

// Marker names of the Go SDK: a local activity's result (details "data": its id and type;
// "result": its return value) and a side effect's.
const (
	localActivityMarker = "LocalActivity"
	sideEffectMarker    = "SideEffect"
)

// decideMarker is what the measurement reads of a Decide local activity's result
// (DecideResult).
type decideMarker struct {
	Diagnostics struct {
		At         float64 `json:"at"`
		NextTickAt float64 `json:"next_tick_at"`
	} `json:"diagnostics"`
}

// runTicks reads a run's history events into ticks (numbered from 1 within the run) and
// counts its events by type.
type runTicks struct {
	ticks  []Tick
	events map[string]int64
	// startedAt is the run's start (Unix seconds); previousRun is the run it continued.
	startedAt   float64
	previousRun string
}

// ticksFromEvents reads a run's events into ticks. A tick is its decision's marker: the
// Decide local activity's (history generations 1 and 2, whose result holds the tick's
// Diagnostics.At and NextTickAt) or the side effect recording the decision made in workflow
// code (generation 3: the tick decided at the start of the workflow task that recorded it,
// whose time is the workflow's time). The tick was due when the timer before it was due:
// the start of the workflow task that started the timer plus its duration (the planner
// sets it to the tick's due time minus the workflow's time). FiredAt is that timer firing,
// WokeAt the first workflow task that started after it; an Apply scheduled after the marker
// means the tick made a decision.
func ticksFromEvents(events []*historypb.HistoryEvent) (runTicks, error) {
	rt := runTicks{events: map[string]int64{}}
	dc := converter.GetDefaultDataConverter()
	taskStart := map[int64]float64{}      // workflow task started event id → its time
	completedStart := map[int64]float64{} // workflow task completed event id → its task's start
	var due, fired, woke, lastTaskStart float64
	for _, e := range events {
		rt.events[e.GetEventType().String()]++
		at := float64(e.GetEventTime().AsTime().UnixNano()) / 1e9
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			rt.startedAt = at
			rt.previousRun = e.GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			taskStart[e.GetEventId()] = at
			lastTaskStart = at
			if fired > 0 && woke == 0 {
				woke = at
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			completedStart[e.GetEventId()] = taskStart[e.GetWorkflowTaskCompletedEventAttributes().GetStartedEventId()]
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			a := e.GetTimerStartedEventAttributes()
			if start := completedStart[a.GetWorkflowTaskCompletedEventId()]; start > 0 {
				due = start + a.GetStartToFireTimeout().AsDuration().Seconds()
			}
			fired, woke = 0, 0
		case enumspb.EVENT_TYPE_TIMER_FIRED:
			fired, woke = at, 0
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			if e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == workflows.ActivityApply && len(rt.ticks) > 0 {
				rt.ticks[len(rt.ticks)-1].Decided = true
			}
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			m := e.GetMarkerRecordedEventAttributes()
			t := Tick{N: int64(len(rt.ticks) + 1), Scheduled: true, DueAt: due, FiredAt: fired, WokeAt: woke}
			switch m.GetMarkerName() {
			case sideEffectMarker:
				rt.events[sideEffectMarker]++
				t.At = completedStart[m.GetWorkflowTaskCompletedEventId()]
				if t.At == 0 {
					t.At = lastTaskStart
				}
			case localActivityMarker:
				rt.events[localActivityMarker]++
				var data struct{ ActivityType string }
				if err := dc.FromPayloads(m.GetDetails()["data"], &data); err != nil {
					return rt, fmt.Errorf("event %d: local activity marker: %w", e.GetEventId(), err)
				}
				rt.events[localActivityMarker+":"+data.ActivityType]++
				if data.ActivityType != workflows.ActivityDecide {
					continue
				}
				res, ok := m.GetDetails()["result"]
				if m.GetFailure() != nil || !ok {
					// Decide failed: the tick held; when it was due next is not recorded.
					t.At, t.Failures = lastTaskStart, []string{"decide failed"}
				} else {
					var d decideMarker
					if err := dc.FromPayloads(res, &d); err != nil {
						return rt, fmt.Errorf("event %d: Decide result: %w", e.GetEventId(), err)
					}
					t.At, t.NextTickAt = d.Diagnostics.At, d.Diagnostics.NextTickAt
				}
			default:
				continue
			}
			rt.ticks = append(rt.ticks, t)
			due, fired, woke = 0, 0, 0
		}
	}
	return rt, nil
}

// readRun reads one run's whole history.
func readRun(ctx context.Context, c client.Client, workflowID, runID string) (runTicks, error) {
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var events []*historypb.HistoryEvent
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return runTicks{}, fmt.Errorf("history of %s (run %q): %w", workflowID, runID, err)
		}
		events = append(events, e)
	}
	rt, err := ticksFromEvents(events)
	if err != nil {
		return rt, fmt.Errorf("history of %s (run %q): %w", workflowID, runID, err)
	}
	return rt, nil
}

// ReadTicks reads a planner's ticks from its histories: the current run, and the runs it
// continued (Continue-As-New) back to the first that started before since (Unix seconds).
// Ticks are numbered across the runs, oldest first. It also counts the events by type, the
// local activity markers under "LocalActivity", those of each activity type under
// "LocalActivity:<type>" ("LocalActivity:Init": the planner initialised), and the side
// effects under "SideEffect".
func ReadTicks(ctx context.Context, c client.Client, workflowID string, since float64) ([]Tick, map[string]int64, error) {
	var runs []runTicks
	runID := ""
	for {
		rt, err := readRun(ctx, c, workflowID, runID)
		if err != nil {
			return nil, nil, err
		}
		runs = append(runs, rt)
		if rt.previousRun == "" || rt.startedAt <= since || len(runs) >= 100 {
			break
		}
		runID = rt.previousRun
	}
	var ticks []Tick
	events := map[string]int64{}
	for i := len(runs) - 1; i >= 0; i-- {
		for _, t := range runs[i].ticks {
			t.N = int64(len(ticks) + 1)
			ticks = append(ticks, t)
		}
		for k, v := range runs[i].events {
			events[k] += v
		}
	}
	return ticks, events, nil
}
