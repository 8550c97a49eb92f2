package scaling

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/llmplanner/planner/config"
	"github.com/llmplanner/planner/perf"
	"github.com/stretchr/testify/require"
)

// slaConfig is a valid sla-target configuration changed by mutate.
func slaConfig(mutate func(*config.Config)) config.Config {
	c := config.Default()
	c.OptimizationTarget = config.TargetSLA
	c.LoadPredictor = config.PredictorConstant
	c.Environment = config.EnvNoop
	if mutate != nil {
		mutate(&c)
	}
	c.Scheduling.ScaleIntervalSeconds = nil
	return c
}

func mustPlanner(t testing.TB, cfg config.Config) *Planner {
	t.Helper()
	p, err := New(cfg, nil)
	require.NoError(t, err)
	return p
}

func mustInit(t testing.TB, p *Planner, now float64, boot Bootstrap) State {
	t.Helper()
	st, err := p.Init(now, boot)
	require.NoError(t, err)
	return st
}

// newTick builds a tick on st with known inventory, for tests of the post-processing steps.
func newTick(p *Planner, st *State, readyP, readyD int) *tick {
	d := &Diagnostics{}
	return &tick{p: p, st: st, diag: d, readyP: readyP, readyD: readyD, countsKnown: true}
}

// linearPrefillFPMs trains wall = slope*tokens + intercept with one request per iteration.
func linearPrefillFPMs(slope, intercept float64, tokens ...int64) []perf.FPM {
	var out []perf.FPM
	for i, tok := range tokens {
		out = append(out, perf.FPM{Version: perf.FPMVersion, WorkerID: fmt.Sprintf("boot-%d", i), WallTime: slope*float64(tok) + intercept,
			Scheduled: perf.ScheduledRequests{NumPrefillRequests: 1, SumPrefillTokens: tok}})
	}
	return out
}

// linearDecodeFPMs trains wall = kvSlope*kv + intercept on non-collinear points (decode
// lengths from 750 to 2,500 tokens per request, 1,196 on average).
func linearDecodeFPMs(kvSlope, intercept float64) []perf.FPM {
	var out []perf.FPM
	for i, p := range [][2]int64{{2, 2000}, {5, 4000}, {8, 9000}, {20, 15000}, {12, 30000}, {40, 40000}} {
		out = append(out, perf.FPM{Version: perf.FPMVersion, WorkerID: fmt.Sprintf("boot-%d", i), WallTime: kvSlope*float64(p[1]) + intercept,
			Scheduled: perf.ScheduledRequests{NumDecodeRequests: p[0], SumDecodeKVTokens: p[1]}})
	}
	return out
}

// constantAggFPMs trains an aggregated model whose iterations always take wall seconds.
func constantAggFPMs(wall float64) []perf.FPM {
	var out []perf.FPM
	for i, p := range [][2]int64{{100, 1000}, {0, 5000}, {400, 2000}, {50, 9000}, {800, 500}, {300, 7000}} {
		out = append(out, perf.FPM{Version: perf.FPMVersion, WorkerID: fmt.Sprintf("boot-%d", i), WallTime: wall,
			Scheduled: perf.ScheduledRequests{NumPrefillRequests: 1, SumPrefillTokens: p[0], NumDecodeRequests: 4, SumDecodeKVTokens: p[1]}})
	}
	return out
}

func decodeEngine(id string, requests, kv, queuedKV int64) perf.FPM {
	return perf.FPM{Version: perf.FPMVersion, WorkerID: id, WallTime: 0.01,
		Scheduled: perf.ScheduledRequests{NumDecodeRequests: requests, SumDecodeKVTokens: kv},
		Queued:    perf.QueuedRequests{SumDecodeKVTokens: queuedKV}}
}

func prefillEngine(id string, queued int64) perf.FPM {
	return perf.FPM{Version: perf.FPMVersion, WorkerID: id, WallTime: 0.012,
		Scheduled: perf.ScheduledRequests{NumPrefillRequests: 1, SumPrefillTokens: 1000},
		Queued:    perf.QueuedRequests{NumPrefillRequests: queued / 1000, SumPrefillTokens: queued}}
}

func counts(readyP, readyD int) *WorkerCounts {
	return &WorkerCounts{ReadyPrefill: ptr(readyP), ReadyDecode: ptr(readyD)}
}

func traffic(durationS, numReq, isl, osl float64) *TrafficObservation {
	return &TrafficObservation{DurationS: durationS, NumReq: ptr(numReq), ISL: ptr(isl), OSL: ptr(osl)}
}

// decideAt runs the tick due next (at its scheduled time) with the given observations.
func decideAt(t testing.TB, p *Planner, st State, in Input) (State, Decision, Diagnostics) {
	t.Helper()
	if in.Now == 0 {
		in.Now = p.NextTick(st).At
	}
	next, dec, diag, err := p.Decide(st, in)
	require.NoError(t, err)
	// A caller that submits every decision it gets.
	return p.Submitted(next, dec, in.Now), dec, diag
}

// decideBothWays runs tick i's Decide on direct and on viaJSON after a JSON round trip (the
// workflow carries the state as JSON across Continue-As-New): it requires Decide to leave
// direct unmodified and both to decide alike, and returns both next states and the decision.
func decideBothWays(t *testing.T, p *Planner, direct, viaJSON State, in Input, i int) (State, State, Decision) {
	t.Helper()
	snapshot, err := json.Marshal(direct)
	require.NoError(t, err)
	next, dec1, diag1, err := p.Decide(direct, in)
	require.NoError(t, err)
	after, err := json.Marshal(direct)
	require.NoError(t, err)
	require.JSONEq(t, string(snapshot), string(after), "Decide must not modify its input state")

	data, err := json.Marshal(viaJSON)
	require.NoError(t, err)
	var restored State
	require.NoError(t, json.Unmarshal(data, &restored))
	next2, dec2, diag2, err := p.Decide(restored, in)
	require.NoError(t, err)
	require.Equal(t, dec1, dec2, "tick %d", i)
	require.Equal(t, diag1, diag2, "tick %d", i)
	return next, next2, dec1
}

// decideAndSubmit runs Decide on *st, as the workflow would: the state moves on, and a
// decision is submitted at the tick's time.
func decideAndSubmit(t *testing.T, p *Planner, st *State, in Input) (Decision, Diagnostics) {
	t.Helper()
	next, dec, diag, err := p.Decide(*st, in)
	require.NoError(t, err)
	*st = next
	if !dec.Empty() {
		*st = p.Submitted(*st, dec, in.Now)
	}
	return dec, diag
}
