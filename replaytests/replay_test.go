package replaytests

import (
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/worker"
	"github.com/llmplanner/planner/workflows"
)

// fixtureName is v<logic version>[g<history generation>]-<scenario>[-run<n>].json.gz (no
// generation: generation 1).
var fixtureName = regexp.MustCompile(`^v(\d+)(?:g(\d+))?-([a-z-]+?)(?:-run(\d+))?\.json\.gz$`)

type fixture struct {
	path       string
	version    int
	generation int
	scenario   string
}

// fixtureBase is the file name prefix of the current code's recordings.
func fixtureBase() string {
	return fmt.Sprintf("v%dg%d", workflows.LogicVersion, workflows.HistoryGeneration)
}

func fixtures(t *testing.T) []fixture {
	t.Helper()
	paths, err := filepath.Glob("testdata/*.json.gz")
	require.NoError(t, err)
	var out []fixture
	for _, p := range paths {
		m := fixtureName.FindStringSubmatch(filepath.Base(p))
		require.NotNil(t, m, "fixture %s: want v<version>[g<generation>]-<scenario>[-run<n>].json.gz", p)
		v, _ := strconv.Atoi(m[1])
		g := 1
		if m[2] != "" {
			g, _ = strconv.Atoi(m[2])
		}
		out = append(out, fixture{path: p, version: v, generation: g, scenario: m[3]})
	}
	return out
}

func loadHistory(t *testing.T, path string) *historypb.History {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	h, err := client.HistoryFromJSON(gz, client.HistoryJSONOptions{})
	require.NoError(t, err, path)
	return h
}

// TestReplayRecordedHistories replays every recorded history with the current code.
func TestReplayRecordedHistories(t *testing.T) {
	fs := fixtures(t)
	require.NotEmpty(t, fs, "no recorded histories under testdata/: run make capture-histories")
	for _, f := range fs {
		t.Run(filepath.Base(f.path), func(t *testing.T) {
			r, err := sdkworker.NewWorkflowReplayerWithOptions(sdkworker.WorkflowReplayerOptions{Interceptors: workflows.Interceptors()})
			require.NoError(t, err)
			worker.RegisterWorkflow(r)
			require.NoError(t, r.ReplayWorkflowHistory(nil, loadHistory(t, f.path)))
		})
	}
}

// TestEveryLogicVersionHasAHistory guards the versioning rule: each logic version up to the
// current one has a recorded history of each scenario.
func TestEveryLogicVersionHasAHistory(t *testing.T) {
	have := map[string]bool{}
	for _, f := range fixtures(t) {
		have[fmt.Sprintf("v%d-%s", f.version, f.scenario)] = true
		have[fmt.Sprintf("v%dg%d-%s", f.version, f.generation, f.scenario)] = true
	}
	for v := 1; v <= workflows.LogicVersion; v++ {
		for _, s := range scenarios {
			require.True(t, have[fmt.Sprintf("v%d-%s", v, s)], "logic version %d has no %q history: run make capture-histories", v, s)
		}
	}
	for _, s := range scenarios {
		require.True(t, have[fixtureBase()+"-"+s], "the current code (%s) has no %q history: run make capture-histories", fixtureBase(), s)
	}
}

// TestHistoriesShowWhatTheyClaim checks each scenario's history holds the events it exists
// for, so a capture that went wrong cannot pass as coverage.
func TestHistoriesShowWhatTheyClaim(t *testing.T) {
	for _, f := range fixtures(t) {
		h := loadHistory(t, f.path)
		count := map[enumspb.EventType]int{}
		updates := map[string]int{}
		signals := map[string]int{}
		activities := map[string]int{}
		for _, e := range h.GetEvents() {
			if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
				activities[a.GetActivityType().GetName()]++
			}
			count[e.GetEventType()]++
			if a := e.GetWorkflowExecutionUpdateAcceptedEventAttributes(); a != nil {
				updates[a.GetAcceptedRequest().GetInput().GetName()]++
			}
			if a := e.GetWorkflowExecutionSignaledEventAttributes(); a != nil {
				signals[a.GetSignalName()]++
			}
		}
		if f.generation >= 2 {
			require.True(t, versionMarked(h, "ordered-signals"), "%s: generation 2 records the ordered-signals version", f.path)
		}
		if f.generation >= 3 {
			require.True(t, versionMarked(h, "inline-decide"), "%s: generation 3 records the inline-decide version", f.path)
			require.Positive(t, activities[workflows.ActivityObserve], "%s: generation 3 observes in one activity", f.path)
			require.Zero(t, activities[workflows.ActivityObserveFPM]+activities[workflows.ActivityObserveTraffic], "%s: not in three", f.path)
		}
		switch f.scenario {
		case "overrides":
			if f.generation >= 2 {
				require.Positive(t, signals["pasue"], "%s: an unknown signal", f.path)
			}
			require.Positive(t, updates[workflows.UpdateSetReplicas], f.path)
			require.Positive(t, updates[workflows.UpdateClearOverride], f.path)
			require.Positive(t, updates[workflows.UpdateSetSLA], f.path)
			require.Positive(t, updates[workflows.UpdateSetLimits], f.path)
			require.Positive(t, updates[workflows.UpdateConfig], f.path)
			require.Positive(t, signals[workflows.UpdatePause], f.path)
			require.Positive(t, signals[workflows.UpdateResume], f.path)
		case "continue-as-new":
			require.True(t, count[enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW] == 1 || continued(h),
				"%s: neither a run that continues as new nor one continued with carried state", f.path)
		case "virtual":
			require.Positive(t, updates[workflows.UpdateAcknowledge], f.path)
			require.Positive(t, updates[workflows.UpdateWaitDecision], f.path)
		case "ahead":
			var in workflows.Input
			start := h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes()
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(start.GetInput(), &in), f.path)
			require.Equal(t, config.PolicyAhead, in.Config.ScalingPolicy, "%s: a planner running the ahead policy", f.path)
			require.Positive(t, count[enumspb.EVENT_TYPE_MARKER_RECORDED], "%s: decisions recorded", f.path)
		case "sla-disagg":
			var in workflows.Input
			start := h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes()
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(start.GetInput(), &in), f.path)
			require.Equal(t, config.ModeDisagg, in.Config.Mode, f.path)
			require.Equal(t, config.TargetSLA, in.Config.OptimizationTarget, f.path)
		case "hosted":
			var hosted int
			for _, e := range h.GetEvents() {
				if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && strings.HasPrefix(a.GetTaskQueue().GetName(), workflows.HostTaskQueuePrefix) {
					hosted++
				}
			}
			require.Positive(t, hosted, "%s: activities on the host task queue", f.path)
			require.Positive(t, updates[workflows.UpdateSetReplicas], f.path)
			require.Positive(t, activities[workflows.ActivityApply], "%s: the host applied a decision", f.path)
		default:
			t.Fatalf("%s: unknown scenario %q", f.path, f.scenario)
		}
		require.Positive(t, count[enumspb.EVENT_TYPE_TIMER_FIRED], "%s: no tick ran", f.path)
	}
}

// versionMarked reports whether the history records a workflow.GetVersion marker for change.
func versionMarked(h *historypb.History, change string) bool {
	for _, e := range h.GetEvents() {
		a := e.GetMarkerRecordedEventAttributes()
		if a == nil || a.GetMarkerName() != "Version" {
			continue
		}
		var id string
		if p := a.GetDetails()["change-id"]; p != nil && converter.GetDefaultDataConverter().FromPayloads(p, &id) == nil && id == change {
			return true
		}
	}
	return false
}

// continued reports whether the run started from a Continue-As-New (carrying state).
func continued(h *historypb.History) bool {
	start := h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes()
	if start.GetContinuedExecutionRunId() == "" {
		return false
	}
	var in workflows.Input
	if err := converter.GetDefaultDataConverter().FromPayloads(start.GetInput(), &in); err != nil {
		return false
	}
	return in.State != nil
}

// TestHistoryCostPerTick measures, on the recorded Continue-As-New run, the history events a
// steady tick costs and the size of the state carried across Continue-As-New, and holds them
// to bounds (the state must stay tens of KB; see docs/workflow.md).
func TestHistoryCostPerTick(t *testing.T) {
	h := loadHistory(t, "testdata/"+fixtureBase()+"-continue-as-new-run1.json.gz")
	var fired []int64
	var carried int
	for _, e := range h.GetEvents() {
		if e.GetEventType() == enumspb.EVENT_TYPE_TIMER_FIRED {
			fired = append(fired, e.GetEventId())
		}
		if a := e.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
			for _, p := range a.GetInput().GetPayloads() {
				carried += len(p.GetData())
			}
		}
	}
	require.GreaterOrEqual(t, len(fired), 3)
	// Steady ticks: from one timer firing to the next.
	perTick := float64(fired[len(fired)-1]-fired[1]) / float64(len(fired)-2)
	t.Logf("history events per tick (noop load tick with FPM and traffic reads): %.1f; state carried across Continue-As-New: %d bytes", perTick, carried)
	require.LessOrEqual(t, perTick, 12.0, "a tick costs more history than it did (12 events when recorded; 18.8 before history generation 3)")
	require.Positive(t, carried)
	require.Less(t, carried, 64<<10)
}
