package engine

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A prefix-cache hit costs no prefill time for the cached tokens, but they are counted as
// the batch's cached tokens and hold KV; token events come one per output token between
// the first and the last.
func TestCachedTokensAndTokenEvents(t *testing.T) {
	tim := &fixedTiming{PrefillFixed: 10, PrefillPerToken: 1, DecodeFixed: 5}
	e := newEngine(t, DefaultConfig(RoleAggregated), tim)
	require.NoError(t, e.Submit(Request{ID: 1, ISL: 1000, OSL: 4, CachedTokens: 990, TokenEvents: true}))
	passes := runAll(t, e, 0)
	require.Equal(t, PrefillBatch{NumRequests: 1, NewTokens: 10, CachedTokens: 990}, tim.prefills[0])
	require.InDelta(t, 0.020, passes[0].Duration, 1e-12, "10 ms fixed + 10 new tokens")
	var kinds []EventKind
	for _, ev := range eventsOf(passes) {
		kinds = append(kinds, ev.Kind)
	}
	require.Equal(t, []EventKind{EventFirstToken, EventToken, EventToken, EventFinished}, kinds)

	e2 := newEngine(t, DefaultConfig(RoleAggregated), tim)
	require.NoError(t, e2.Submit(Request{ID: 2, ISL: 100, OSL: 4}))
	for _, ev := range eventsOf(runAll(t, e2, 0)) {
		require.NotEqual(t, EventToken, ev.Kind, "no token events unless asked")
	}
	for _, c := range []int{-1, 100} {
		require.ErrorIs(t, e2.Submit(Request{ID: 3, ISL: 100, OSL: 4, CachedTokens: c}), ErrInvalidRequest)
	}
}

// The tensor-parallel scaling: KV capacity × N, prefill ÷ 0.9N, decode ÷ 0.6N at the same
// KV usage fraction.
func TestTensorParallelTiming(t *testing.T) {
	_, base := profileTiming(t)
	tp2, err := NewTensorParallelTiming(base, 2)
	require.NoError(t, err)
	require.Equal(t, 2*base.KVCapacityTokens(), tp2.KVCapacityTokens())
	pb := PrefillBatch{NumRequests: 1, NewTokens: 4000}
	require.InDelta(t, base.PrefillMs(pb)/1.8, tp2.PrefillMs(pb), 1e-9)
	db := DecodeBatch{NumRequests: 100, SumContext: 100 * 3000, ActiveKVTokens: 300000}
	half := db
	half.ActiveKVTokens = 150000
	require.InDelta(t, base.DecodeMs(half)/1.2, tp2.DecodeMs(db), 1e-9)
	_, err = NewTensorParallelTiming(base, 0)
	require.Error(t, err)
}
