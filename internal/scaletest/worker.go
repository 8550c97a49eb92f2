package scaletest

import (
	"context"
	"errors"
	"log/slog"

	"github.com/llmplanner/planner/activities"
	"github.com/llmplanner/planner/internal/scripted"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/scaling"
	"github.com/llmplanner/planner/worker"
)

// WorkerOptions configure RunWorker.
type WorkerOptions struct {
	// TaskQueue is the planner workers' task queue.
	TaskQueue string
	// MetricsAddress serves /metrics and /healthz.
	MetricsAddress string
	// ScriptPath is the scripted observations (scripted.LoadScript).
	ScriptPath string
	// Logger receives the worker's and the SDK's logs.
	Logger *slog.Logger
}

// RunWorker is the planner worker of the scale test, run as a child process so its CPU and
// memory can be read from /proc: worker.Run, the code `planner worker` runs (the same
// workflow, activities, interceptors and SDK defaults), with the scripted observations
// answering the noop planners' observe activities in place of a hosted deployment. It
// serves until ctx ends.
func RunWorker(ctx context.Context, o WorkerOptions) error {
	if o.ScriptPath == "" {
		return errors.New("scale-test worker: no observation script")
	}
	script, err := scripted.LoadScript(o.ScriptPath)
	if err != nil {
		return err
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	acts := &activities.Activities{Unhosted: script, Logger: logger}
	return worker.Run(ctx, worker.Options{TaskQueue: o.TaskQueue, MetricsAddress: o.MetricsAddress, Activities: acts, Logger: logger})
}

// Observations is what every planner of the scale test observes: a decode pool whose load
// swings every halfPeriod ticks between busy (each engine at 110% of its KV capacity, 40
// req/s) and quiet (20% and 2 req/s), up to tick maxTick (the last phase holds after). The threshold
// planner's load loop then advises a scale-up and a scale-down in turn, so a tick regularly
// makes a decision (and calls the noop connector's Apply) and the decision core has FPM
// regression samples to keep: the same observations as the recorded histories
// (replaytests.captureScript), repeated.
func Observations(halfPeriod int, maxTick int64) *scripted.Script {
	if halfPeriod < 1 {
		halfPeriod = 1
	}
	caps := &scaling.WorkerCapabilities{Decode: &scaling.EngineCapabilities{NumGPU: 1, MaxKVTokens: 100000}}
	ttft, itl := 90.0, 9.0
	busy := scripted.ScriptEntry{Capabilities: caps,
		DecodeEngine: &perf.FPM{WallTime: 0.01, Scheduled: perf.ScheduledRequests{NumDecodeRequests: 40, SumDecodeKVTokens: 110000}},
		Traffic:      &scripted.ScriptTraffic{RequestsPerSecond: 40, ISL: 3000, OSL: 300, TTFTMs: &ttft, ITLMs: &itl}}
	quietTTFT, quietITL := 70.0, 6.0
	quiet := scripted.ScriptEntry{Capabilities: caps,
		DecodeEngine: &perf.FPM{WallTime: 0.01, Scheduled: perf.ScheduledRequests{NumDecodeRequests: 5, SumDecodeKVTokens: 20000}},
		Traffic:      &scripted.ScriptTraffic{RequestsPerSecond: 2, ISL: 3000, OSL: 300, TTFTMs: &quietTTFT, ITLMs: &quietITL}}
	s := &scripted.Script{}
	for from, i := int64(0), 0; from <= maxTick; from, i = from+int64(halfPeriod), i+1 {
		e := busy
		if i%2 == 1 {
			e = quiet
		}
		e.FromTick = from
		s.Entries = append(s.Entries, e)
	}
	return s
}
