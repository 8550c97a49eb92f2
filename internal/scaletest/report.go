package scaletest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/llmplanner/planner/config"
)

// Summary is the result of a scale test (summary.json).
type Summary struct {
	Planners        int     `json:"planners"`
	Workers         int     `json:"workers"`
	IntervalS       float64 `json:"interval_s"`
	HalfPeriodTicks int     `json:"observation_half_period_ticks"`
	NumCPU          int     `json:"num_cpu"`
	// Config is the planners' configuration.
	Config config.Config `json:"config"`
	// InMemory and ServerArgs are how the dev server ran (Options).
	InMemory   bool     `json:"in_memory,omitempty"`
	ServerArgs []string `json:"server_args,omitempty"`
	// StartWithUpdate is true when the planners were started as `planner start` does.
	StartWithUpdate bool `json:"start_with_update,omitempty"`

	Started time.Time `json:"started"`
	// StartSeconds is how long starting every planner took.
	StartSeconds  float64 `json:"start_s"`
	StartFailures int     `json:"start_failures"`
	StartError    string  `json:"start_error,omitempty"`
	// WindowStart and WindowEnd bound the measurement; DurationS is its length.
	WindowStart time.Time `json:"window_start"`
	WindowEnd   time.Time `json:"window_end"`
	DurationS   float64   `json:"duration_s"`
	// Interrupted is true when the window was cut short (Ctrl-C).
	Interrupted bool `json:"interrupted,omitempty"`

	Ticks     TickStats     `json:"ticks"`
	End       EndState      `json:"end"`
	Resources ResourceStats `json:"resources"`
	SDK       SDKStats      `json:"sdk"`
	Server    ServerStats   `json:"server"`
	Failures  Failures      `json:"failures"`
	History   HistoryStats  `json:"history"`
}

// HistoryStats count the events of the planners' histories (every run that overlaps the
// window, from its start): the workflow task and activity timeouts and failures the server
// recorded.
type HistoryStats struct {
	// Planners is the planners whose histories were read, Errors those that could not be.
	Planners int `json:"planners"`
	Errors   int `json:"errors,omitempty"`
	// ReadSeconds is how long reading them took.
	ReadSeconds float64 `json:"read_s"`
	// Events counts the events by type (MarkerRecorded, ...), and among the markers the
	// local activities' under "LocalActivity" and "LocalActivity:<type>" and the side
	// effects' under "SideEffect" (ReadTicks).
	Events map[string]int64 `json:"events,omitempty"`
	// NotInitialized is the planners whose history has no Init (their first workflow task
	// never ran), NoTicks those with no tick at all.
	NotInitialized int `json:"not_initialized"`
	NoTicks        int `json:"no_ticks"`
	// Ticks is the ticks those histories hold (their Decide markers), EventsPerTick the
	// events over them.
	Ticks         int64   `json:"ticks"`
	EventsPerTick float64 `json:"events_per_tick"`
	// WorkflowTaskTimeouts and the others count those events.
	WorkflowTaskTimeouts int64 `json:"workflow_task_timeouts"`
	WorkflowTaskFailures int64 `json:"workflow_task_failures"`
	ActivityTimeouts     int64 `json:"activity_timeouts"`
	ActivityFailures     int64 `json:"activity_failures"`
}

func (h *HistoryStats) derive() {
	e := h.Events
	total := int64(0)
	for k, v := range e {
		if !strings.HasPrefix(k, localActivityMarker) && k != sideEffectMarker {
			total += v
		}
	}
	if h.Ticks > 0 {
		h.EventsPerTick = float64(total) / float64(h.Ticks)
	}
	h.WorkflowTaskTimeouts = e[enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT.String()]
	h.WorkflowTaskFailures = e[enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED.String()]
	h.ActivityTimeouts = e[enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT.String()]
	h.ActivityFailures = e[enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED.String()]
	if len(e) == 0 {
		h.Events = nil
	}
}

// EndState is what the planners' state queries said after the window.
type EndState struct {
	// Queried is the planners whose state was queried, Answered those that answered; Errors
	// counts the others' errors.
	Queried  int            `json:"queried"`
	Answered int            `json:"answered"`
	Errors   map[string]int `json:"errors,omitempty"`
	// ReadSeconds is how long the queries took.
	ReadSeconds float64 `json:"read_s"`
	// TicksTotal is the sum of the planners' tick counters (since they started).
	TicksTotal int64 `json:"ticks_total"`
	// OverdueS is, per planner, how far the pending tick's due time was in the past when its
	// state was read (negative: not due yet). A planner keeping up has it below zero or
	// within its lateness.
	OverdueS       Stats `json:"overdue_s"`
	NotInitialized int   `json:"not_initialized"`
	InitErrors     int   `json:"init_errors"`
}

// Failures is every failure the test can see.
type Failures struct {
	StartFailures int `json:"start_failures"`
	// NotRunning counts planner executions that are closed (-1: unknown).
	NotRunning int64 `json:"not_running"`
	// TickFailures count what failed in the ticks of the window ("decide failed").
	TickFailures map[string]int64 `json:"tick_failures,omitempty"`
	// WorkflowTaskFailures, ActivityFailures and LocalActivityFailures are the workers' SDK
	// counters over the window.
	WorkflowTaskFailures  float64 `json:"workflow_task_failures"`
	ActivityFailures      float64 `json:"activity_failures"`
	LocalActivityFailures float64 `json:"local_activity_failures"`
	// WorkerLog counts the workers' warnings and errors over the whole run.
	WorkerLog LogScan `json:"worker_log"`
	// WorkerExits lists processes that exited on their own.
	WorkerExits []string `json:"worker_exits,omitempty"`
}

// SDKStats are the workers' Temporal SDK metrics over the window (summed over workers).
type SDKStats struct {
	WorkflowTasks float64 `json:"workflow_tasks"`
	// WorkflowTaskScheduleToStart and the others are bucket upper bounds (the quantile is at
	// most that), in seconds.
	WorkflowTaskScheduleToStartP50 Num     `json:"workflow_task_schedule_to_start_p50_s"`
	WorkflowTaskScheduleToStartP99 Num     `json:"workflow_task_schedule_to_start_p99_s"`
	WorkflowTaskExecutionP50       Num     `json:"workflow_task_execution_p50_s"`
	WorkflowTaskExecutionP99       Num     `json:"workflow_task_execution_p99_s"`
	WorkflowTaskExecutionMean      Num     `json:"workflow_task_execution_mean_s"`
	Activities                     float64 `json:"activities"`
	ActivityScheduleToStartP50     Num     `json:"activity_schedule_to_start_p50_s"`
	ActivityScheduleToStartP99     Num     `json:"activity_schedule_to_start_p99_s"`
	LocalActivities                float64 `json:"local_activities"`
	WorkflowTaskFailures           float64 `json:"workflow_task_failures"`
	ActivityFailures               float64 `json:"activity_failures"`
	LocalActivityFailures          float64 `json:"local_activity_failures"`
	RequestFailures                float64 `json:"request_failures"`
	ResourceExhausted              float64 `json:"resource_exhausted"`
	StickyCacheHits                float64 `json:"sticky_cache_hits"`
	StickyCacheMisses              float64 `json:"sticky_cache_misses"`
	StickyCacheForcedEvictions     float64 `json:"sticky_cache_forced_evictions"`
	// StickyCacheSize, Goroutines, HeapInuseMiB and the slots are gauges at the window's end.
	StickyCacheSize         float64 `json:"sticky_cache_size"`
	Goroutines              float64 `json:"goroutines"`
	HeapInuseMiB            float64 `json:"heap_inuse_mib"`
	WorkflowSlotsUsed       float64 `json:"workflow_task_slots_used"`
	WorkflowSlotsAvailable  float64 `json:"workflow_task_slots_available"`
	ActivitySlotsUsed       float64 `json:"activity_slots_used"`
	LocalActivitySlotsUsed  float64 `json:"local_activity_slots_used"`
	ActivitySlotsAvailable  float64 `json:"activity_slots_available"`
	WorkflowTaskPollsEmpty  float64 `json:"workflow_task_polls_empty"`
	WorkflowTaskPollsServed float64 `json:"workflow_task_polls_served"`
}

// SDKFrom reads the SDK's metrics from the window's difference (delta) and the final scrape
// (end, for gauges).
func SDKFrom(delta, end Snapshot) SDKStats {
	h := func(name string) Histogram { return delta.Hists[name] }
	wts := h("temporal_workflow_task_schedule_to_start_latency_seconds")
	wte := h("temporal_workflow_task_execution_latency_seconds")
	ats := h("temporal_activity_schedule_to_start_latency_seconds")
	v, g := delta.Values, end.Values
	return SDKStats{
		WorkflowTasks:                  wte.Count,
		WorkflowTaskScheduleToStartP50: Num(wts.Quantile(0.5)), WorkflowTaskScheduleToStartP99: Num(wts.Quantile(0.99)),
		WorkflowTaskExecutionP50: Num(wte.Quantile(0.5)), WorkflowTaskExecutionP99: Num(wte.Quantile(0.99)), WorkflowTaskExecutionMean: Num(wte.Mean()),
		Activities:                 h("temporal_activity_execution_latency_seconds").Count,
		ActivityScheduleToStartP50: Num(ats.Quantile(0.5)), ActivityScheduleToStartP99: Num(ats.Quantile(0.99)),
		LocalActivities:            v["temporal_local_activity_total"],
		WorkflowTaskFailures:       v["temporal_workflow_task_execution_failed_total"],
		ActivityFailures:           v["temporal_activity_execution_failed_total"],
		LocalActivityFailures:      v["temporal_local_activity_execution_failed_total"],
		RequestFailures:            v["temporal_request_failure_total"] + v["temporal_long_request_failure_total"],
		ResourceExhausted:          v["temporal_request_resource_exhausted_total"] + v["temporal_long_request_resource_exhausted_total"],
		StickyCacheHits:            v["temporal_sticky_cache_hit_total"],
		StickyCacheMisses:          v["temporal_sticky_cache_miss_total"],
		StickyCacheForcedEvictions: v["temporal_sticky_cache_total_forced_eviction_total"],
		StickyCacheSize:            g["temporal_sticky_cache_size"],
		Goroutines:                 g["go_goroutines"],
		HeapInuseMiB:               g["go_memstats_heap_inuse_bytes"] / mib,
		WorkflowSlotsUsed:          g["temporal_worker_task_slots_used{worker_type=WorkflowWorker}"],
		WorkflowSlotsAvailable:     g["temporal_worker_task_slots_available{worker_type=WorkflowWorker}"],
		ActivitySlotsUsed:          g["temporal_worker_task_slots_used{worker_type=ActivityWorker}"],
		ActivitySlotsAvailable:     g["temporal_worker_task_slots_available{worker_type=ActivityWorker}"],
		LocalActivitySlotsUsed:     g["temporal_worker_task_slots_used{worker_type=LocalActivityWorker}"],
		WorkflowTaskPollsEmpty:     v["temporal_workflow_task_queue_poll_empty_total"],
		WorkflowTaskPollsServed:    v["temporal_workflow_task_queue_poll_succeed_total"],
	}
}

// ServerStats are a few of the dev server's own metrics over the window: how long its
// persistence (SQLite) calls took, summed over operations.
type ServerStats struct {
	// PersistenceRequests is the persistence calls in the window.
	PersistenceRequests float64 `json:"persistence_requests"`
	// PersistenceLatencyP50 and P99 are bucket upper bounds, in seconds.
	PersistenceLatencyP50  Num `json:"persistence_latency_p50_s"`
	PersistenceLatencyP99  Num `json:"persistence_latency_p99_s"`
	PersistenceLatencyMean Num `json:"persistence_latency_mean_s"`
	// Found is false when the server exposed no persistence latency histogram.
	Found bool `json:"found"`
}

// ServerFrom reads the server's persistence latency from the window's difference.
func ServerFrom(delta Snapshot) ServerStats {
	h, ok := delta.Hists["persistence_latency"]
	if !ok {
		h, ok = delta.Hists["persistence_latency_seconds"]
	}
	if !ok {
		return ServerStats{}
	}
	return ServerStats{Found: true, PersistenceRequests: h.Count, PersistenceLatencyP50: Num(h.Quantile(0.5)),
		PersistenceLatencyP99: Num(h.Quantile(0.99)), PersistenceLatencyMean: Num(h.Mean())}
}

// LogScan counts a log's warnings and errors (slog text or JSON lines) by message.
type LogScan struct {
	Lines    int            `json:"lines"`
	Warnings int            `json:"warnings"`
	Errors   int            `json:"errors"`
	Messages map[string]int `json:"messages,omitempty"`
}

var (
	levelRe = regexp.MustCompile(`level=(WARN|ERROR)|"level":"(WARN|ERROR)"`)
	msgRe   = regexp.MustCompile(`msg="((?:[^"\\]|\\.)*)"|msg=(\S+)|"msg":"((?:[^"\\]|\\.)*)"`)
)

// ScanLog counts the warnings and errors of a log file, by level and message.
func ScanLog(path string) (LogScan, error) {
	f, err := os.Open(path)
	if err != nil {
		return LogScan{}, fmt.Errorf("scan log: %w", err)
	}
	defer f.Close()
	return scanLog(f)
}

func scanLog(r io.Reader) (LogScan, error) {
	s := LogScan{Messages: map[string]int{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		s.Lines++
		m := levelRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		level := m[1] + m[2]
		if level == "WARN" {
			s.Warnings++
		} else {
			s.Errors++
		}
		msg := "?"
		if mm := msgRe.FindStringSubmatch(line); mm != nil {
			msg = mm[1] + mm[2] + mm[3]
		}
		s.Messages[level+": "+truncate(msg, 120)]++
	}
	if err := sc.Err(); err != nil {
		return s, fmt.Errorf("scan log: %w", err)
	}
	if len(s.Messages) == 0 {
		s.Messages = nil
	}
	return s, nil
}

// Add sums two scans.
func (s LogScan) Add(o LogScan) LogScan {
	out := LogScan{Lines: s.Lines + o.Lines, Warnings: s.Warnings + o.Warnings, Errors: s.Errors + o.Errors}
	for _, m := range []map[string]int{s.Messages, o.Messages} {
		for k, v := range m {
			if out.Messages == nil {
				out.Messages = map[string]int{}
			}
			out.Messages[k] += v
		}
	}
	return out
}

// Print writes the summary as a table.
func (s *Summary) Print(w io.Writer) {
	t := s.Ticks
	r := s.Resources
	fmt.Fprintf(w, "\n%d planners, %d worker(s), load tick every %gs, measured %.0fs (after %.0fs to start them); %d CPUs\n",
		s.Planners, s.Workers, s.IntervalS, s.DurationS, s.StartSeconds, s.NumCPU)
	if s.Interrupted {
		fmt.Fprintln(w, "(interrupted: the window was cut short)")
	}
	row := func(k, format string, args ...any) {
		fmt.Fprintf(w, "  %-34s "+format+"\n", append([]any{k}, args...)...)
	}
	row("tick lateness p50 / p90 / p99 / max", "%s / %s / %s / %s  (%d ticks)", secs(t.LatenessS.P50), secs(t.LatenessS.P90), secs(t.LatenessS.P99), secs(t.LatenessS.Max), t.LatenessS.Count)
	row("  timer / dispatch / observe p50", "%s / %s / %s", secs(t.TimerS.P50), secs(t.DispatchS.P50), secs(t.ObserveS.P50))
	row("  timer / dispatch / observe p99", "%s / %s / %s", secs(t.TimerS.P99), secs(t.DispatchS.P99), secs(t.ObserveS.P99))
	row("time between ticks mean / p99", "%s / %s  (configured %gs)", secs(t.IntervalS.Mean), secs(t.IntervalS.P99), s.IntervalS)
	row("ticks run / expected", "%d / %.0f  (%.1f%%)", t.Run, t.Expected, 100*t.RunRatio)
	row("planners with a tick in the window", "%d of %d  (never initialised: %d)", t.PlannersWithTicks, s.Planners, s.History.NotInitialized)
	row("decisions (noop Apply calls)", "%d", t.Decisions)
	row("state queries answered at end", "%d of %d in %.0fs  (errors: %s)", s.End.Answered, s.End.Queried, s.End.ReadSeconds, countsText(s.End.Errors))
	row("pending tick overdue at end p50/p99", "%s / %s", secs(s.End.OverdueS.P50), secs(s.End.OverdueS.P99))
	row("worker CPU cores mean / max", "%.2f / %.2f", r.Workers.CPUCoresMean, r.Workers.CPUCoresMax)
	row("worker RSS max / peak (VmHWM)", "%.0f MiB / %.0f MiB  (heap in use %.0f MiB, %.0f goroutines, %d threads)", r.Workers.RSSMaxMiB, r.Workers.PeakRSSMiB, s.SDK.HeapInuseMiB, s.SDK.Goroutines, r.Workers.Threads)
	row("dev server CPU cores mean / max", "%.2f / %.2f", r.Server.CPUCoresMean, r.Server.CPUCoresMax)
	row("dev server RSS max", "%.0f MiB", r.Server.RSSMaxMiB)
	row("machine busy cores / other work", "%.2f / %.2f of %d  (load1 mean %.1f, max %.1f)", r.Machine.BusyCoresMean, r.Machine.OtherCoresMean, r.Machine.NumCPU, r.Machine.Load1Mean, r.Machine.Load1Max)
	row("machine I/O stall some / full", "%.0f%% / %.0f%% of the window", r.Machine.IOSomePct, r.Machine.IOFullPct)
	row("workflow tasks / activities / LAs", "%.0f / %.0f / %.0f", s.SDK.WorkflowTasks, s.SDK.Activities, s.SDK.LocalActivities)
	row("WFT schedule-to-start p50 / p99", "≤%s / ≤%s", secs(s.SDK.WorkflowTaskScheduleToStartP50), secs(s.SDK.WorkflowTaskScheduleToStartP99))
	row("WFT execution p50 / p99 / mean", "≤%s / ≤%s / %s", secs(s.SDK.WorkflowTaskExecutionP50), secs(s.SDK.WorkflowTaskExecutionP99), secs(s.SDK.WorkflowTaskExecutionMean))
	row("activity schedule-to-start p50/p99", "≤%s / ≤%s", secs(s.SDK.ActivityScheduleToStartP50), secs(s.SDK.ActivityScheduleToStartP99))
	row("sticky cache size / hits / misses", "%.0f / %.0f / %.0f  (forced evictions %.0f)", s.SDK.StickyCacheSize, s.SDK.StickyCacheHits, s.SDK.StickyCacheMisses, s.SDK.StickyCacheForcedEvictions)
	if s.Server.Found {
		row("server persistence p50 / p99 / mean", "≤%s / ≤%s / %s  (%.0f calls)", secs(s.Server.PersistenceLatencyP50), secs(s.Server.PersistenceLatencyP99), secs(s.Server.PersistenceLatencyMean), s.Server.PersistenceRequests)
	}
	f := s.Failures
	row("failures: starts / not running", "%d / %d", f.StartFailures, f.NotRunning)
	row("failures: WFT / activity / LA", "%.0f / %.0f / %.0f", f.WorkflowTaskFailures, f.ActivityFailures, f.LocalActivityFailures)
	row("failures: SDK requests / exhausted", "%.0f / %.0f", s.SDK.RequestFailures, s.SDK.ResourceExhausted)
	row("failures: tick notes", "%s", countsText(f.TickFailures))
	if hs := s.History; hs.Planners > 0 || hs.Errors > 0 {
		row("histories read / failed", "%d / %d in %.0fs  (%d ticks, %.1f events per tick)", hs.Planners, hs.Errors, hs.ReadSeconds, hs.Ticks, hs.EventsPerTick)
		row("history: WFT timeouts / failures", "%d / %d", hs.WorkflowTaskTimeouts, hs.WorkflowTaskFailures)
		row("history: activity timeouts / fails", "%d / %d", hs.ActivityTimeouts, hs.ActivityFailures)
	}
	row("worker log warnings / errors", "%d / %d", f.WorkerLog.Warnings, f.WorkerLog.Errors)
	for _, m := range topMessages(f.WorkerLog.Messages, 5) {
		fmt.Fprintf(w, "      %s\n", m)
	}
	for _, e := range f.WorkerExits {
		row("process exited", "%s", e)
	}
}

// Num is a number that may be undefined (NaN: no observations) or past the histogram's
// last bound (+Inf); JSON has neither, so both are written as null.
type Num float64

// MarshalJSON writes NaN and infinities as null.
func (n Num) MarshalJSON() ([]byte, error) {
	v := float64(n)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(v)
}

func secs[F float64 | Num](f F) string {
	v := float64(f)
	switch {
	case math.IsNaN(v):
		return "–"
	case math.IsInf(v, 1):
		return "inf"
	case math.Abs(v) < 1:
		return fmt.Sprintf("%.0fms", v*1000)
	}
	return fmt.Sprintf("%.2fs", v)
}

func countsText[V int | int64](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s: %d", k, m[k]))
	}
	return strings.Join(parts, "; ")
}

// topMessages are the n most frequent messages, "count × message".
func topMessages(m map[string]int, n int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var out []string
	for _, k := range keys[:min(n, len(keys))] {
		out = append(out, fmt.Sprintf("%d × %s", m[k], k))
	}
	return out
}
