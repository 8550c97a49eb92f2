package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/llmplanner/planner/perf"
)

// loadProfile reads the H200 Llama-3.1-8B FP8 TP1 profile copied into testdata.
func loadProfile(t testing.TB) *perf.Profile {
	t.Helper()
	p, err := perf.LoadProfile("testdata")
	require.NoError(t, err)
	require.NotNil(t, p.Prefill)
	require.NotNil(t, p.Decode)
	return p
}

func profileTiming(t testing.TB) (*perf.Profile, *ProfileTiming) {
	t.Helper()
	p := loadProfile(t)
	tim, err := NewProfileTiming(p)
	require.NoError(t, err)
	return p, tim
}

// fixedTiming charges PrefillFixed + PrefillPerToken·NewTokens ms for a prefill part and
// DecodeFixed ms for a decode part, and records the batches it was asked about.
type fixedTiming struct {
	PrefillFixed, PrefillPerToken, DecodeFixed float64
	prefills                                   []PrefillBatch
	decodes                                    []DecodeBatch
}

func (f *fixedTiming) PrefillMs(b PrefillBatch) float64 {
	f.prefills = append(f.prefills, b)
	return f.PrefillFixed + f.PrefillPerToken*float64(b.NewTokens)
}

func (f *fixedTiming) DecodeMs(b DecodeBatch) float64 {
	f.decodes = append(f.decodes, b)
	return f.DecodeFixed
}

// runAll steps the engine from now until idle, returning every pass (events copied).
func runAll(t testing.TB, e *Engine, now float64) []Pass {
	t.Helper()
	var out []Pass
	for i := 0; ; i++ {
		require.Less(t, i, 1_000_000, "engine did not become idle")
		p, ok := e.Step(now)
		if !ok {
			return out
		}
		p.Events = append([]Event(nil), p.Events...)
		out = append(out, p)
		now = p.End()
	}
}

// eventsOf collects the events of the passes.
func eventsOf(passes []Pass) []Event {
	var out []Event
	for _, p := range passes {
		out = append(out, p.Events...)
	}
	return out
}

func newEngine(t testing.TB, cfg Config, tim Timing) *Engine {
	t.Helper()
	e, err := New(cfg, tim)
	require.NoError(t, err)
	return e
}
