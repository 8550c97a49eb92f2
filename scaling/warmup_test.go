package scaling

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
	"github.com/llmplanner/planner/predict"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/floats"
)

// sinusoidTrace is a deterministic trace of duration seconds whose rate goes from lo to hi
// and back every period seconds (starting at lo), ISL 3000 and OSL 300: arrivals spaced by
// the inverse of the rate.
func sinusoidTrace(duration, period, lo, hi float64) []predict.Request {
	var out []predict.Request
	for t := 0.0; t < duration; {
		out = append(out, predict.Request{Arrival: t, InputTokens: 3000, OutputTokens: 300})
		t += 1 / (lo + (hi-lo)*(1-math.Cos(2*math.Pi*t/period))/2)
	}
	return out
}

// writeTrace writes reqs as a Mooncake JSONL trace and returns its path.
func writeTrace(t *testing.T, reqs []predict.Request) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "warmup.jsonl")
	var b strings.Builder
	for _, r := range reqs {
		line, err := json.Marshal(map[string]any{"timestamp": r.Arrival * 1000, "input_length": r.InputTokens, "output_length": r.OutputTokens})
		require.NoError(t, err)
		b.Write(line)
		b.WriteByte('\n')
	}
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	return path
}

func TestAheadState_Warm(t *testing.T) {
	// 20 minutes of a 300 s sinusoid, into 30 s buckets at a 5 s interval, ending at 1020.
	reqs := sinusoidTrace(1200, 300, 2, 20)
	a := AheadState{BucketS: 30}
	a.warm(1020, 5, reqs)
	require.Len(t, a.Count, 40, "1200 s in 30 s buckets")
	require.Equal(t, 1020.0-1200, a.T0, "the trace ends when the planner starts")
	require.InDelta(t, float64(len(reqs)), floats.Sum(a.Count), 0, "every request counted once")
	for i, c := range a.Covered {
		require.Equal(t, 30.0, c, "bucket %d observed whole", i)
	}
	require.InDelta(t, 3000, a.ISL[10]/a.Count[10], 1e-9)
	require.InDelta(t, 300, a.OSL[10]/a.Count[10], 1e-9)
	require.Len(t, a.Recent, 60, "the newest ten buckets' interval rates")
	require.Empty(t, a.Forecast, "no forecast was made: its misses are measured live")

	// Only the newest AheadHistoryBuckets buckets are kept; a quiet stretch is observed
	// (counted as zero requests), not a gap.
	long := append(sinusoidTrace(600, 300, 2, 20), predict.Request{Arrival: 4200, InputTokens: 100, OutputTokens: 10})
	b := AheadState{BucketS: 30}
	b.warm(0, 5, long)
	require.Len(t, b.Count, AheadHistoryBuckets)
	require.Equal(t, -float64(AheadHistoryBuckets)*30, b.T0)
	require.Equal(t, 1.0, floats.Sum(b.Count), "only the last request is within the history")
	require.Equal(t, 30.0, b.Covered[0], "the quiet hour before it is observed")

	// Timestamps far from zero (or years apart) cost no more than the history: only the
	// requests within it are counted, against the last one.
	far := AheadState{BucketS: 30}
	far.warm(0, 5, []predict.Request{{Arrival: 5e16, InputTokens: 10, OutputTokens: 1}, {Arrival: 5e16 + 3000, InputTokens: 10, OutputTokens: 1}})
	require.Len(t, far.Count, 101, "3000 s back from the last request, in the 30 s buckets ending at now")
	require.Equal(t, 2.0, floats.Sum(far.Count))
	require.Equal(t, 1.0, far.Count[len(far.Count)-1], "the last request ends the history")
	huge := AheadState{BucketS: 30}
	huge.warm(0, 5, []predict.Request{{Arrival: 0}, {Arrival: 1e300}})
	require.Len(t, huge.Count, AheadHistoryBuckets)
	require.Equal(t, 1.0, floats.Sum(huge.Count))

	// Nothing to warm with: the history stays empty.
	var c AheadState
	c.BucketS = 30
	c.warm(0, 5, nil)
	require.Empty(t, c.Count)
}

// TestAhead_WarmStart: a planner warmed with the traffic before it started follows its
// period from the first tick, where a cold one has seen nothing; both wait for the trend
// window of live traffic before their first scale-down (what the engines show is learned
// live).
func TestAhead_WarmStart(t *testing.T) {
	trace := sinusoidTrace(1200, 300, 2, 20)
	cold, coldSt := aheadPlanner(t)
	path := writeTrace(t, trace)
	warm, _ := aheadPlannerWith(t, func(c *config.Config) { c.LoadPredictorWarmupTrace = &path })
	reqs, note, err := warm.ReadWarmup()
	require.NoError(t, err)
	require.Len(t, reqs, len(trace))
	require.Contains(t, note, "ahead's traffic history warmed with the last 1200 s of "+path)
	prof, err := perf.LoadProfile("../sim/engine/testdata")
	require.NoError(t, err)
	warmSt := mustInit(t, warm, 0, Bootstrap{PrefillFPMs: perf.PrefillBootstrapFPMs(prof.Prefill), DecodeFPMs: perf.DecodeBootstrapFPMs(prof.Decode), Warmup: reqs})
	require.Len(t, warmSt.Ahead.Count, 40)
	require.True(t, warmSt.Ahead.Warmed)

	// The first tick, at the sinusoid's trough (2 req/s) with 4P 4D ready.
	_, warmDiag := decideAndSubmit(t, warm, &warmSt, aheadInput(5, 4, 4, 4, 4, 2))
	_, coldDiag := decideAndSubmit(t, cold, &coldSt, aheadInput(5, 4, 4, 4, 4, 2))
	notes := strings.Join(warmDiag.Notes, "\n")
	require.Regexp(t, `period [36]00 s \(r [0-9.]+\) → [0-9.]+ followed`, notes, "the period is known from the warm-up")
	require.Contains(t, notes, "5 s of traffic observed, less than")
	require.Equal(t, ReasonScaleDownStabilizing, warmDiag.LoadReasonPrefill, notes)
	// A foreseen demand sizes without the queueing margins: 10% may wait past the TTFT
	// slack, and the decode pool runs its whole SLA batch; a cold forecast keeps them.
	require.Contains(t, notes, "for 90%")
	batch := regexp.MustCompile(`batch (\d+) of (\d+) `).FindStringSubmatch(notes)
	require.Len(t, batch, 3, notes)
	require.Equal(t, batch[2], batch[1], "no Poisson spread kept under the SLA batch")
	coldNotes := strings.Join(coldDiag.Notes, "\n")
	require.NotContains(t, coldNotes, "period")
	require.Contains(t, coldNotes, "5 s of traffic observed, less than")
	require.Contains(t, coldNotes, "for 98%")
	batch = regexp.MustCompile(`batch (\d+) of (\d+) `).FindStringSubmatch(coldNotes)
	require.Len(t, batch, 3, coldNotes)
	require.NotEqual(t, batch[2], batch[1], "b + √b under the SLA batch")

	// Past the trend window of live traffic, the warmed planner scales down.
	var down float64
	for now := 10.0; now <= 300 && down == 0; now += 5 {
		dec, diag := decideAndSubmit(t, warm, &warmSt, aheadInput(now, 4, 4, 4, 4, 2))
		if dec.Prefill != nil && *dec.Prefill < 4 {
			down = now
			require.Equal(t, ReasonScaleDown, diag.LoadReasonPrefill)
		}
	}
	require.GreaterOrEqual(t, down, warmSt.Ahead.trendWindow(65.0))
	require.Equal(t, down, warmSt.Ahead.LiveS)
}

func TestPlanner_ReadWarmup(t *testing.T) {
	path := writeTrace(t, sinusoidTrace(600, 300, 2, 20))
	missing := filepath.Join(t.TempDir(), "none.jsonl")
	empty := filepath.Join(t.TempDir(), "empty.jsonl")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	years := writeTrace(t, []predict.Request{{Arrival: 0, InputTokens: 10, OutputTokens: 1}, {Arrival: 1e10, InputTokens: 10, OutputTokens: 1}})
	// A BurstGPT file of two models: ChatGPT every 2 s over 600 s, GPT-4 every 10 s from 100 s.
	var burst strings.Builder
	burst.WriteString("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n")
	for s := 0; s < 600; s += 2 {
		fmt.Fprintf(&burst, "%d,ChatGPT,300,100,400,Conversation log\n", s)
		if s >= 100 && s%10 == 0 {
			fmt.Fprintf(&burst, "%d,GPT-4,900,200,1100,Conversation log\n", s)
		}
	}
	burstGPT := filepath.Join(t.TempDir(), "BurstGPT.csv")
	require.NoError(t, os.WriteFile(burstGPT, []byte(burst.String()), 0o600))
	gpt4, claude := "GPT-4", "Claude"
	for _, tc := range []struct {
		name     string
		mutate   func(*config.Config)
		read     bool
		requests int // the requests read, when not 0
		note     string
		err      string
	}{
		{name: "unset", mutate: func(*config.Config) {}},
		{name: "dynamo predictors", read: true, note: "predictors warmed with 10 windows of " + path, mutate: func(c *config.Config) {
			c.EnableThroughputScaling, c.ThroughputAdjustmentIntervalSeconds, c.LoadPredictorWarmupTrace = true, 60, &path
		}},
		{name: "ahead", read: true, note: "ahead's traffic history warmed with the last 600 s", mutate: func(c *config.Config) {
			c.ScalingPolicy, c.LoadPredictorWarmupTrace = config.PolicyAhead, &path
		}},
		{name: "no throughput loop", note: "not read: throughput scaling is off", mutate: func(c *config.Config) {
			c.EnableThroughputScaling, c.EnableLoadScaling, c.LoadPredictorWarmupTrace = false, true, &path
		}},
		{name: "throughput target", note: "not read: optimization_target throughput has no predictors", mutate: func(c *config.Config) {
			c.OptimizationTarget, c.EnableThroughputScaling, c.LoadPredictorWarmupTrace = config.TargetThroughput, false, &path
		}},
		{name: "unreadable", err: "load_predictor_warmup_trace", mutate: func(c *config.Config) {
			c.ScalingPolicy, c.LoadPredictorWarmupTrace = config.PolicyAhead, &missing
		}},
		{name: "empty", err: "no requests", mutate: func(c *config.Config) {
			c.ScalingPolicy, c.LoadPredictorWarmupTrace = config.PolicyAhead, &empty
		}},
		{name: "years for the predictors", err: "100000 windows of 60 s at most", mutate: func(c *config.Config) {
			c.EnableThroughputScaling, c.ThroughputAdjustmentIntervalSeconds, c.LoadPredictorWarmupTrace = true, 60, &years
		}},
		{name: "one model of a BurstGPT trace", read: true, requests: 50, note: "the last 490 s of " + burstGPT + ", model GPT-4 (490 s, 50 requests)", mutate: func(c *config.Config) {
			c.ScalingPolicy, c.LoadPredictorWarmupTrace, c.LoadPredictorWarmupTraceModel = config.PolicyAhead, &burstGPT, &gpt4
		}},
		{name: "every model of a BurstGPT trace", read: true, requests: 350, note: "(598 s, 350 requests)", mutate: func(c *config.Config) {
			c.ScalingPolicy, c.LoadPredictorWarmupTrace = config.PolicyAhead, &burstGPT
		}},
		{name: "a model the trace lacks", err: `no request of model "Claude"`, mutate: func(c *config.Config) {
			c.ScalingPolicy, c.LoadPredictorWarmupTrace, c.LoadPredictorWarmupTraceModel = config.PolicyAhead, &burstGPT, &claude
		}},
		{name: "a model of a trace without models", err: "needs a BurstGPT trace's Model column", mutate: func(c *config.Config) {
			c.ScalingPolicy, c.LoadPredictorWarmupTrace, c.LoadPredictorWarmupTraceModel = config.PolicyAhead, &path, &gpt4
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPlanner(t, slaConfig(tc.mutate))
			reqs, note, err := p.ReadWarmup()
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.Nil(t, reqs)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.read, reqs != nil)
			if tc.requests > 0 {
				require.Len(t, reqs, tc.requests)
			}
			if tc.note == "" {
				require.Empty(t, note)
			} else {
				require.Contains(t, note, tc.note)
			}
		})
	}
}

// TestPlanner_WarmupBounded: a warm-up for Dynamo's predictors spanning more than
// MaxWarmupWindows intervals is refused, not bucketed into millions of empty windows; the
// ahead policy keeps only its history's span of any trace.
func TestPlanner_WarmupBounded(t *testing.T) {
	far := []predict.Request{{Arrival: 0, InputTokens: 10, OutputTokens: 10}, {Arrival: 1e12, InputTokens: 10, OutputTokens: 10}}
	dyn := mustPlanner(t, slaConfig(func(c *config.Config) { c.EnableThroughputScaling = true }))
	_, err := dyn.Init(0, Bootstrap{Warmup: far})
	require.ErrorContains(t, err, "warm-up trace spans")
	ok, err := dyn.Init(0, Bootstrap{Warmup: far[:1]})
	require.NoError(t, err)
	require.NotNil(t, ok.Predictors)

	ahead := mustPlanner(t, slaConfig(func(c *config.Config) { c.ScalingPolicy = config.PolicyAhead }))
	st, err := ahead.Init(0, Bootstrap{Warmup: far})
	require.NoError(t, err)
	require.Len(t, st.Ahead.Count, AheadHistoryBuckets)
}
